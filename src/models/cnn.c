/* cnn.c — the built-in CNN classifier (public API only): a small ResNet of
 * convolutions, batch norm and residual blocks over NHWC images, global
 * average pooling and a Dense logit layer. tpuloop/models.h describes it. */
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "tpuloop/models.h"
#include "models_int.h"

#define BN_EPSILON 1e-3 /* Keras BatchNormalization's default */
#define CNN_MAX_STAGES 8

/* What params_json says. */
typedef struct cnn_params {
    int64_t num_classes;
    int num_stages;
    int64_t filters[CNN_MAX_STAGES]; /* per stage; the stem has filters[0] */
    double momentum;                 /* batch norm's */
    double label_smoothing;          /* the loss's, in [0, 1] */
} cnn_params;

/* The JSON text of v, for messages. */
static void json_text(const json_t *v, char *buf, size_t n)
{
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(buf, n, "%s", text ? text : "(absent)");
    free(text);
}

/* params' num_classes, filters and batch_norm_momentum, with their defaults
 * (tpuloop/models.h). */
static tl_status read_params(tl_graph *g, const char *params_json, cnn_params *c)
{
    *c = (cnn_params){.num_classes = 10, .num_stages = 3, .filters = {16, 32, 64}, .momentum = 0.99,
                      .label_smoothing = 0.0};
    json_t *params = params_json ? json_loads(params_json, 0, NULL) : NULL;
    tl_status st = TL_OK;
    char got[96];
    const json_t *v = json_object_get(params, "num_classes");
    if (v != NULL) {
        if (!json_is_integer(v) || json_integer_value(v) < 2 || json_integer_value(v) > (1 << 24)) {
            json_text(v, got, sizeof got);
            st = tl_model_bad(g, "cnn: params num_classes must be an int in [2, 16777216], got %s", got);
        }
        c->num_classes = json_is_integer(v) ? json_integer_value(v) : 0;
    }
    v = json_object_get(params, "filters");
    if (st == TL_OK && v != NULL) {
        size_t n = json_array_size(v);
        if (!json_is_array(v) || n < 1 || n > CNN_MAX_STAGES) {
            json_text(v, got, sizeof got);
            st = tl_model_bad(g, "cnn: params filters must be a list of 1 to %d ints (one per stage), got %s",
                              CNN_MAX_STAGES, got);
        }
        for (size_t i = 0; st == TL_OK && i < n; i++) {
            const json_t *f = json_array_get(v, i);
            if (!json_is_integer(f) || json_integer_value(f) < 1 || json_integer_value(f) > 65536) {
                json_text(f, got, sizeof got);
                st = tl_model_bad(g, "cnn: params filters[%zu] must be an int in [1, 65536], got %s", i, got);
            } else {
                c->filters[i] = json_integer_value(f);
            }
        }
        c->num_stages = (int)n;
    }
    v = json_object_get(params, "batch_norm_momentum");
    if (st == TL_OK && v != NULL) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0.0 && json_number_value(v) < 1.0)) {
            json_text(v, got, sizeof got);
            st = tl_model_bad(g, "cnn: params batch_norm_momentum must be a number in [0, 1), got %s", got);
        } else {
            c->momentum = json_number_value(v);
        }
    }
    v = json_object_get(params, "label_smoothing");
    if (st == TL_OK && v != NULL) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0.0 && json_number_value(v) <= 1.0)) {
            json_text(v, got, sizeof got);
            st = tl_model_bad(g, "cnn: params label_smoothing must be a number in [0, 1], got %s", got);
        } else {
            c->label_smoothing = json_number_value(v);
        }
    }
    json_decref(params);
    return st;
}

/* conv (no bias) → batch norm, named <name>/conv and <name>/bn. */
static tl_t conv_bn(tl_graph *g, tl_t x, int64_t filters, int64_t k, int64_t stride, double momentum,
                    const char *name)
{
    int64_t d[TL_MAX_RANK];
    if (tl_rank(g, x, d) != 4)
        return TL_T_INVALID; /* the graph holds the error already */
    char kname[96], bname[96];
    snprintf(kname, sizeof kname, "%s/conv/kernel", name);
    snprintf(bname, sizeof bname, "%s/bn", name);
    int64_t ks[4] = {k, k, d[3], filters};
    tl_t w = tl_variable(g, kname, ks, 4, (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0});
    tl_conv2d_attrs at = {.strides = {stride, stride}, .dilations = {1, 1}, .padding = TL_PAD_SAME, .groups = 1};
    return tl_batch_norm(g, tl_conv2d(g, x, w, &at), momentum, BN_EPSILON, bname);
}

/* A basic residual block: relu(bn(conv(relu(bn(conv(x))))) + shortcut(x)). */
static tl_t block(tl_graph *g, tl_t x, int64_t filters, int64_t stride, double momentum, int index)
{
    int64_t d[TL_MAX_RANK];
    if (tl_rank(g, x, d) != 4)
        return TL_T_INVALID;
    char name[64];
    snprintf(name, sizeof name, "block%d/a", index);
    tl_t h = tl_relu(g, conv_bn(g, x, filters, 3, stride, momentum, name));
    snprintf(name, sizeof name, "block%d/b", index);
    h = conv_bn(g, h, filters, 3, 1, momentum, name);
    tl_t shortcut = x;
    if (stride != 1 || d[3] != filters) {
        snprintf(name, sizeof name, "block%d/shortcut", index);
        shortcut = conv_bn(g, x, filters, 1, stride, momentum, name);
    }
    return tl_relu(g, tl_add(g, h, shortcut));
}

tl_status tl_model_cnn(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    cnn_params c;
    tl_status st = read_params(g, a->params_json, &c);
    if (st != TL_OK)
        return st;
    int64_t d[TL_MAX_RANK];
    int rank = tl_rank(g, a->features, d);
    if (rank != 3 && rank != 4) {
        if (rank < 0)
            return tl_model_bad(g, "cnn: features are not a tensor of this graph");
        return tl_model_bad(g, "cnn: features must be images (batch, height, width) or "
                               "(batch, height, width, channels); got rank %d", rank);
    }
    tl_t x = a->features;
    if (rank == 3) {
        int64_t s4[4] = {d[0], d[1], d[2], 1};
        x = tl_reshape(g, x, s4, 4); /* one channel, NHWC */
    }
    tl_t h = tl_relu(g, conv_bn(g, x, c.filters[0], 3, 1, c.momentum, "stem"));
    for (int s = 0; s < c.num_stages; s++)
        h = block(g, h, c.filters[s], s == 0 ? 1 : 2, c.momentum, s + 1);
    h = tl_global_avg_pool2d(g, h, false); /* (batch, filters) */
    tl_t logits = tl_dense(g, h, c.num_classes, TL_ACT_NONE, "dense");
    spec->logits = logits;
    spec->predictions = logits;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_sparse_softmax_xent(g, logits, a->labels, c.label_smoothing));
    return tl_graph_status(g);
}

/* dcn.c — the built-in DCN-v2 click-through model (public API only): the
 * dense features and every embedding feature's activations concatenated,
 * a cross network of full-rank cross layers, a deep network stacked on it,
 * one logit and the mean log loss. The layers follow Wang et al. 2021
 * ("DCN V2", eq. 1, the stacked structure) and TF Recommenders'
 * tfrs.layers.dcn.Cross (full rank, use_bias, diag_scale 0, its
 * truncated-normal kernels). tpuloop/models.h describes it. */
#include <stdio.h>

#include "tpuloop/models.h"
#include "models_int.h"

/* The configuration against itself and the features' width. */
static tl_status check(tl_graph *g, const tl_dcn_config *c, int64_t width)
{
    if (c->num_features < 0 || c->num_features > TL_DCN_MAX_FEATURES)
        return tl_model_bad(g, "dcn: num_features must be in [0, %d], got %d", TL_DCN_MAX_FEATURES, c->num_features);
    if (c->num_cross < 0 || c->num_cross > TL_DCN_MAX_LAYERS)
        return tl_model_bad(g, "dcn: num_cross must be in [0, %d], got %d", TL_DCN_MAX_LAYERS, c->num_cross);
    if (c->num_deep < 0 || c->num_deep > TL_DCN_MAX_LAYERS)
        return tl_model_bad(g, "dcn: num_deep must be in [0, %d], got %d", TL_DCN_MAX_LAYERS, c->num_deep);
    if (c->num_dense < 0 || c->num_dense > width)
        return tl_model_bad(g, "dcn: num_dense must be in [1, %lld] (the features' width), or 0 for all of them; "
                               "got %d", (long long)width, c->num_dense);
    for (int i = 0; i < c->num_deep; i++)
        if (c->deep[i] < 1)
            return tl_model_bad(g, "dcn: deep[%d] must be >= 1, got %lld", i, (long long)c->deep[i]);
    for (int f = 0; f < c->num_features; f++)
        if (c->dims[f] < 1)
            return tl_model_bad(g, "dcn: dims[%d] must be >= 1, got %d", f, c->dims[f]);
    return TL_OK;
}

/* Keras' names for the i-th layer of a kind: <base>, <base>_1, ... */
static void keras_name(char *buf, size_t n, const char *base, int i)
{
    if (i == 0)
        snprintf(buf, n, "%s", base);
    else
        snprintf(buf, n, "%s_%d", base, i);
}

/* One full-rank cross layer, tfrs.layers.dcn.Cross(projection_dim=None):
 * x0 ⊙ (x W + b) + x, W (d, d) and b (d) its Dense's variables
 * <scope>/dense/kernel (truncated normal, stddev 0.05: Keras'
 * "truncated_normal", Cross's default) and <scope>/dense/bias (zeros). */
static tl_t cross_layer(tl_graph *g, tl_t x0, tl_t x, int64_t d, const char *scope)
{
    char name[96];
    int64_t ks[2] = {d, d};
    snprintf(name, sizeof name, "%s/dense/kernel", scope);
    tl_t w = tl_variable(g, name, ks, 2, (tl_initializer){TL_INIT_TRUNCATED_NORMAL, 0.0, 0.05});
    snprintf(name, sizeof name, "%s/dense/bias", scope);
    tl_t b = tl_variable(g, name, &d, 1, (tl_initializer){TL_INIT_ZEROS, 0.0, 0.0});
    tl_t wx = tl_bias_add(g, tl_matmul(g, x, w, false, false), b);
    return tl_add(g, tl_mul(g, x0, wx), x);
}

tl_status tl_model_dcn(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    const tl_dcn_config *c = user;
    if (c == NULL)
        return tl_graph_fail(g, TL_EINVAL, "dcn: the model needs a tl_dcn_config (user is NULL)");
    int64_t fdims[TL_MAX_RANK];
    int rank = tl_rank(g, a->features, fdims);
    if (rank != 2) {
        if (rank < 0)
            return tl_model_bad(g, "dcn: features are not a tensor of this graph");
        return tl_model_bad(g, "dcn: features must be (batch, columns), the dense inputs; got rank %d", rank);
    }
    tl_status st = check(g, c, fdims[1]);
    if (st != TL_OK)
        return st;
    int64_t batch = fdims[0];

    /* x0 = [dense inputs, e_0, ..., e_{F-1}]: the features hold only the
     * dense inputs (the embedding ids travel apart, to the runtime's
     * enqueue). */
    int64_t nd = c->num_dense > 0 ? c->num_dense : fdims[1];
    int64_t d = nd;
    tl_t parts[TL_DCN_MAX_FEATURES + 1];
    parts[0] = nd == fdims[1] ? a->features : tl_slice(g, a->features, 1, 0, nd);
    for (int f = 0; f < c->num_features; f++) {
        int64_t es[2] = {batch, c->dims[f]};
        parts[f + 1] = tl_embedding_activations(g, f, es, 2);
        d += c->dims[f];
    }
    tl_t x0 = tl_model_concat_many(g, parts, c->num_features + 1); /* (batch, d) */

    /* The cross network, then the deep network on its output (DCN-v2's
     * stacked structure), then the logit. */
    char name[64];
    tl_t x = x0;
    for (int l = 0; l < c->num_cross; l++) {
        keras_name(name, sizeof name, "cross", l);
        x = cross_layer(g, x0, x, d, name);
    }
    for (int i = 0; i < c->num_deep; i++) {
        keras_name(name, sizeof name, "deep/dense", i);
        x = tl_dense(g, x, c->deep[i], TL_ACT_RELU, name);
    }
    tl_t logits = tl_dense(g, x, 1, TL_ACT_NONE, "logits"); /* (batch, 1) */
    spec->logits = logits;
    spec->predictions = logits;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_sigmoid_xent(g, logits, a->labels));
    return tl_graph_status(g);
}

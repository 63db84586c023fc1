/* mlp.c — the built-in MLP classifier (public API only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tpuloop/models.h"

/* params' "num_classes" (10 when absent), or 0 with `got` holding the JSON
 * of a value that is not an int in [2, 2^24]. */
static int64_t num_classes(const char *params_json, char *got, size_t n)
{
    json_t *params = params_json ? json_loads(params_json, 0, NULL) : NULL;
    const json_t *v = json_object_get(params, "num_classes");
    int64_t c = v == NULL ? 10 : json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
    if (c < 2 || c > (1 << 24)) {
        char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf(got, n, "%s", text ? text : "?");
        free(text);
        c = 0;
    }
    json_decref(params);
    return c;
}

tl_status tl_model_mlp(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    const tl_model_config *m = user;
    char got[64], msg[160];
    int64_t classes = num_classes(a->params_json, got, sizeof got);
    if (classes == 0) {
        snprintf(msg, sizeof msg, "mlp: params num_classes must be an int in [2, 16777216], got %s", got);
        return tl_graph_fail(g, TL_EINVAL, msg);
    }
    tl_activation act = TL_ACT_RELU;
    if (strcmp(m->activation, "sigmoid") == 0)
        act = TL_ACT_SIGMOID;
    else if (strcmp(m->activation, "tanh") == 0)
        act = TL_ACT_TANH;
    int64_t dims[TL_MAX_RANK];
    int rank = tl_rank(g, a->features, dims);
    tl_t h = a->features;
    if (rank > 2) {
        int64_t flat[2] = {dims[0], 1};
        for (int i = 1; i < rank; i++)
            flat[1] *= dims[i];
        h = tl_reshape(g, h, flat, 2);
    }
    char name[32];
    for (int i = 0; i < m->num_hidden; i++) {
        if (i == 0)
            snprintf(name, sizeof name, "dense");
        else
            snprintf(name, sizeof name, "dense_%d", i);
        h = tl_dense(g, h, m->hidden_units[i], act, name);
        if (m->dropout > 0)
            h = tl_dropout(g, h, m->dropout);
    }
    if (m->num_hidden == 0)
        snprintf(name, sizeof name, "dense");
    else
        snprintf(name, sizeof name, "dense_%d", m->num_hidden);
    tl_t logits = tl_dense(g, h, classes, TL_ACT_NONE, name);
    spec->logits = logits;
    spec->predictions = logits;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    return tl_graph_status(g);
}

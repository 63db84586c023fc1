/* mlp.c — the built-in MLP classifier (public API only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/models.h"

/* "num_classes" from the params JSON, without a JSON library: the params are
 * tpuloop's own compact dump ({"key":value,...}). */
static int64_t num_classes(const char *params_json)
{
    const char *p = params_json ? strstr(params_json, "\"num_classes\":") : NULL;
    if (p == NULL)
        return 10;
    char *end;
    long long v = strtoll(p + strlen("\"num_classes\":"), &end, 10);
    return v >= 2 && v <= (1 << 24) ? (int64_t)v : -1;
}

tl_status tl_model_mlp(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    const tl_model_config *m = user;
    int64_t classes = num_classes(a->params_json);
    if (classes < 2)
        return tl_graph_fail(g, TL_EINVAL, "mlp: params num_classes must be an int in [2, 16777216]");
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

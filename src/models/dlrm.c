/* dlrm.c — the built-in DLRM click-through model (public API only): a bottom
 * MLP over the dense features, the dot interaction of its output with every
 * embedding feature's activations, a top MLP to one logit, and the mean log
 * loss. The shapes follow the DLRM paper and shared/bench/torch_dlrm.py. */
#include <stdio.h>

#include "tpuloop/models.h"
#include "models_int.h"

/* The configuration against itself and the features' width. */
static tl_status check(tl_graph *g, const tl_dlrm_config *c, int64_t width)
{
    if (c->num_features < 0 || c->num_features > TL_DLRM_MAX_FEATURES)
        return tl_model_bad(g, "dlrm: num_features must be in [0, %d], got %d", TL_DLRM_MAX_FEATURES, c->num_features);
    if (c->num_bottom < 1 || c->num_bottom > TL_DLRM_MAX_LAYERS)
        return tl_model_bad(g, "dlrm: num_bottom must be in [1, %d], got %d", TL_DLRM_MAX_LAYERS, c->num_bottom);
    if (c->num_top < 0 || c->num_top > TL_DLRM_MAX_LAYERS)
        return tl_model_bad(g, "dlrm: num_top must be in [0, %d], got %d", TL_DLRM_MAX_LAYERS, c->num_top);
    if (c->num_dense < 0 || c->num_dense > width)
        return tl_model_bad(g, "dlrm: num_dense must be in [1, %lld] (the features' width), or 0 for all of them; "
                               "got %d", (long long)width, c->num_dense);
    for (int i = 0; i < c->num_bottom; i++)
        if (c->bottom[i] < 1)
            return tl_model_bad(g, "dlrm: bottom[%d] must be >= 1, got %lld", i, (long long)c->bottom[i]);
    for (int i = 0; i < c->num_top; i++)
        if (c->top[i] < 1)
            return tl_model_bad(g, "dlrm: top[%d] must be >= 1, got %lld", i, (long long)c->top[i]);
    int64_t d = c->bottom[c->num_bottom - 1];
    for (int f = 0; f < c->num_features; f++) {
        if (c->dims[f] < 1)
            return tl_model_bad(g, "dlrm: dims[%d] must be >= 1, got %d", f, c->dims[f]);
        if (c->dims[f] != d)
            return tl_model_bad(g, "dlrm: bottom_mlp's last width %lld must equal feature %d's embedding dim %d",
                                (long long)d, f, c->dims[f]);
    }
    return TL_OK;
}

/* Keras' names inside a scope: <scope>/dense, <scope>/dense_1, ... */
static void layer_name(char *buf, size_t n, const char *scope, int i)
{
    if (i == 0)
        snprintf(buf, n, "%s/dense", scope);
    else
        snprintf(buf, n, "%s/dense_%d", scope, i);
}

tl_status tl_model_dlrm(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    const tl_dlrm_config *c = user;
    if (c == NULL)
        return tl_graph_fail(g, TL_EINVAL, "dlrm: the model needs a tl_dlrm_config (user is NULL)");
    int64_t fdims[TL_MAX_RANK];
    int rank = tl_rank(g, a->features, fdims);
    if (rank != 2) {
        if (rank < 0)
            return tl_model_bad(g, "dlrm: features are not a tensor of this graph");
        return tl_model_bad(g, "dlrm: features must be (batch, columns), the dense inputs; got rank %d", rank);
    }
    tl_status st = check(g, c, fdims[1]);
    if (st != TL_OK)
        return st;
    int64_t batch = fdims[0];
    char name[64];

    /* The dense inputs: the features hold nothing else (the embedding ids
     * travel apart, to the runtime's enqueue). */
    int64_t nd = c->num_dense > 0 ? c->num_dense : fdims[1];
    tl_t x = nd == fdims[1] ? a->features : tl_slice(g, a->features, 1, 0, nd);
    for (int i = 0; i < c->num_bottom; i++) {
        layer_name(name, sizeof name, "bottom_mlp", i);
        x = tl_dense(g, x, c->bottom[i], TL_ACT_RELU, name); /* ReLU on the last one too, as the paper */
    }

    tl_t top_in = x;
    if (c->num_features > 0) {
        /* Stack [x, e_0, ..., e_{F-1}] as (batch, F+1, d): rows of the
         * (batch, (F+1)·d) concatenation are exactly the stacked vectors, so
         * one reshape (a view) makes the stack. */
        int64_t d = c->bottom[c->num_bottom - 1];
        tl_t parts[TL_DLRM_MAX_FEATURES + 1];
        parts[0] = x;
        for (int f = 0; f < c->num_features; f++) {
            int64_t es[2] = {batch, c->dims[f]};
            parts[f + 1] = tl_embedding_activations(g, f, es, 2);
        }
        int64_t s3[3] = {batch, (int64_t)c->num_features + 1, d};
        tl_t stack = tl_reshape(g, tl_model_concat_many(g, parts, c->num_features + 1), s3, 3);
        tl_t z = tl_pairwise_dot(g, stack); /* (batch, (F+1)F/2) */
        top_in = tl_concat(g, (tl_t[]){x, z}, 2, 1);
    }
    tl_t h = top_in;
    for (int i = 0; i < c->num_top; i++) {
        layer_name(name, sizeof name, "top_mlp", i);
        h = tl_dense(g, h, c->top[i], TL_ACT_RELU, name);
    }
    tl_t logits = tl_dense(g, h, 1, TL_ACT_NONE, "top_mlp/logits"); /* (batch, 1) */
    spec->logits = logits;
    spec->predictions = logits;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_sigmoid_xent(g, logits, a->labels));
    return tl_graph_status(g);
}

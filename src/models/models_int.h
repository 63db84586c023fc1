/*
 * models_int.h — what the built-in models share: recording a configuration
 * error in the graph, and concatenating any number of tensors. The models see
 * the public headers only, so these are built on tpuloop/models.h alone.
 */
#ifndef TL_MODELS_INT_H
#define TL_MODELS_INT_H

#include <stdarg.h>
#include <stdio.h>

#include "tpuloop/models.h"

/* Records a configuration error in the graph. */
static inline tl_status tl_model_bad(tl_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline tl_status tl_model_bad(tl_graph *g, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tl_graph_fail(g, TL_EINVAL, msg);
}

/* xs[0..n) concatenated along axis 1. tl_concat takes at most
 * TL_MODEL_CONCAT_FANIN inputs, so longer lists are joined in groups first;
 * concatenation is associative, so the result is the same tensor. */
#define TL_MODEL_CONCAT_FANIN 32
static inline tl_t tl_model_concat_many(tl_graph *g, tl_t *xs, int n)
{
    while (n > TL_MODEL_CONCAT_FANIN) {
        int m = 0;
        for (int i = 0; i < n; i += TL_MODEL_CONCAT_FANIN) {
            int k = n - i < TL_MODEL_CONCAT_FANIN ? n - i : TL_MODEL_CONCAT_FANIN;
            xs[m++] = k == 1 ? xs[i] : tl_concat(g, xs + i, k, 1);
        }
        n = m;
    }
    return n == 1 ? xs[0] : tl_concat(g, xs, n, 1);
}

#endif

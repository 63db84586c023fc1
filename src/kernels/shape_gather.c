/* shape_gather.c — the shape family's index ops: gather and its scatter-add
 * gradient, one-hot (shape.h), and their float64 twins. gather checks every
 * index before it writes anything, and a bad one is a data error whose
 * message names its position as TensorFlow's do; one-hot gives an index out
 * of range a row of off, as TF. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../base/base_int.h"
#include "kernels_int.h"
#include "shape.h"

/* ---- checks ------------------------------------------------------------------------ */

static int64_t index_at(const tl_k_indices *idx, int64_t j)
{
    return idx->i64 != NULL ? idx->i64[j] : (int64_t)idx->i32[j];
}

/* "[1,2]" for flat position j of the indices' shape, as TF's messages. */
static const char *position(const tl_k_indices *idx, int64_t j, char *buf, size_t n)
{
    if (idx->shape == NULL || idx->rank == 1) {
        snprintf(buf, n, "[%" PRId64 "]", j);
        return buf;
    }
    if (idx->rank == 0) {
        buf[0] = '\0';
        return buf;
    }
    int64_t at[TL_K_MAX_DIMS];
    for (int d = idx->rank - 1; d >= 0; d--) {
        at[d] = idx->shape[d] > 0 ? j % idx->shape[d] : 0;
        j = idx->shape[d] > 0 ? j / idx->shape[d] : 0;
    }
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < idx->rank && off < n; d++)
        off += (size_t)snprintf(buf + off, n - off, "%s%" PRId64, d ? "," : "", at[d]);
    if (off < n)
        snprintf(buf + off, n - off, "]");
    return buf;
}

static tl_status check_indices(const char *what, const tl_k_indices *idx, int64_t limit)
{
    TL_ASSERT((idx->i32 == NULL) != (idx->i64 == NULL));
    TL_ASSERT(idx->shape == NULL || (idx->rank >= 0 && idx->rank <= TL_K_MAX_DIMS));
    for (int64_t j = 0; j < idx->n; j++) {
        int64_t k = index_at(idx, j);
        if (k < 0 || k >= limit) {
            char pos[256];
            return tl_error(TL_EINVAL, "%s: indices%s = %" PRId64 " is not in [0, %" PRId64 ")", what,
                            position(idx, j, pos, sizeof pos), k, limit);
        }
    }
    return TL_OK;
}

static tl_status check_gather(const char *what, int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *idx)
{
    if (outer < 0 || axis < 0 || inner < 0 || idx->n < 0)
        return tl_error(TL_EINVAL,
                        "%s: the (outer, axis, inner) view and the index count must not be negative, got (%" PRId64
                        ", %" PRId64 ", %" PRId64 ") and %" PRId64,
                        what, outer, axis, inner, idx->n);
    return check_indices(what, idx, axis);
}

static tl_status check_one_hot(int64_t outer, int64_t depth, int64_t inner, const tl_k_indices *idx)
{
    TL_ASSERT((idx->i32 == NULL) != (idx->i64 == NULL));
    if (outer < 0 || depth < 0 || inner < 0)
        return tl_error(TL_EINVAL, "one_hot: (outer, depth, inner) must not be negative, got (%" PRId64 ", %" PRId64
                                   ", %" PRId64 ")",
                        outer, depth, inner);
    if ((inner > 0 && outer > INT64_MAX / inner) || idx->n != outer * inner)
        return tl_error(TL_EINVAL, "one_hot: %" PRId64 " indices do not fill (outer %" PRId64 ", inner %" PRId64 ")",
                        idx->n, outer, inner);
    return TL_OK;
}

/* ---- gather and one-hot ---------------------------------------------------------------- */

tl_status tl_k_gather(int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *idx, const float *restrict x,
                      float *restrict y)
{
    tl_status st = check_gather("gather", outer, axis, inner, idx);
    if (st != TL_OK)
        return st;
    const int64_t n = idx->n;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            copy_run(y + (o * n + j) * inner, x + (o * axis + index_at(idx, j)) * inner, inner);
    return TL_OK;
}

tl_status tl_k_gather_grad(int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *idx,
                           const float *restrict dy, float *restrict dx)
{
    tl_status st = check_gather("gather_grad", outer, axis, inner, idx);
    if (st != TL_OK)
        return st;
    if (outer * axis * inner > 0)
        memset(dx, 0, (size_t)(outer * axis * inner) * sizeof *dx);
    const int64_t n = idx->n;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++) {
            float *restrict dst = dx + (o * axis + index_at(idx, j)) * inner;
            const float *restrict src = dy + (o * n + j) * inner;
            int64_t i = 0;
            for (; i + TL_K_LANES <= inner; i += TL_K_LANES)
                for (int l = 0; l < TL_K_LANES; l++)
                    dst[i + l] += src[i + l];
            for (; i < inner; i++)
                dst[i] += src[i];
        }
    return TL_OK;
}

tl_status tl_k_one_hot(int64_t outer, int64_t depth, int64_t inner, const tl_k_indices *idx, double on, double off,
                       float *restrict y)
{
    tl_status st = check_one_hot(outer, depth, inner, idx);
    if (st != TL_OK)
        return st;
    fill_run(y, (float)off, outer * depth * inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t k = index_at(idx, o * inner + i);
            if (k >= 0 && k < depth) /* else a row of off, as TF */
                y[(o * depth + k) * inner + i] = (float)on;
        }
    return TL_OK;
}

/* ---- float64 twins ------------------------------------------------------------------ */

tl_status tl_k_gather_ref(int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *idx,
                          const double *restrict x, double *restrict y)
{
    tl_status st = check_gather("gather", outer, axis, inner, idx);
    if (st != TL_OK)
        return st;
    const int64_t n = idx->n;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < inner; i++)
                y[(o * n + j) * inner + i] = x[(o * axis + index_at(idx, j)) * inner + i];
    return TL_OK;
}

tl_status tl_k_gather_grad_ref(int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *idx,
                               const double *restrict dy, double *restrict dx)
{
    tl_status st = check_gather("gather_grad", outer, axis, inner, idx);
    if (st != TL_OK)
        return st;
    for (int64_t k = 0; k < outer * axis * inner; k++)
        dx[k] = 0.0;
    const int64_t n = idx->n;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < inner; i++)
                dx[(o * axis + index_at(idx, j)) * inner + i] += dy[(o * n + j) * inner + i];
    return TL_OK;
}

tl_status tl_k_one_hot_ref(int64_t outer, int64_t depth, int64_t inner, const tl_k_indices *idx, double on,
                           double off, double *restrict y)
{
    tl_status st = check_one_hot(outer, depth, inner, idx);
    if (st != TL_OK)
        return st;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t d = 0; d < depth; d++)
            for (int64_t i = 0; i < inner; i++)
                y[(o * depth + d) * inner + i] = index_at(idx, o * inner + i) == d ? on : off;
    return TL_OK;
}

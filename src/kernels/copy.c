/* copy.c — slice and concat along an axis of a row-major tensor viewed as
 * (outer, axis, inner), their gradients (scatter and slice), and the float64
 * twins. Each (o, a) is a contiguous run of inner elements, so a window of the
 * axis is one contiguous run of size·inner elements per o: the fast kernels
 * are memcpy per run. */
#include <inttypes.h>
#include <string.h>

#include "../base/base_int.h"
#include "kernels.h"

static tl_status check_view(const char *what, int64_t outer, int64_t axis, int64_t inner)
{
    if (outer < 0 || axis < 0 || inner < 0)
        return tl_error(TL_EINVAL,
                        "%s: the (outer, axis, inner) view must have no negative extent, got (%" PRId64 ", %" PRId64
                        ", %" PRId64 ")",
                        what, outer, axis, inner);
    return TL_OK;
}

static tl_status check_window(const char *what, int64_t outer, int64_t axis, int64_t inner, int64_t begin,
                              int64_t size)
{
    tl_status st = check_view(what, outer, axis, inner);
    if (st != TL_OK)
        return st;
    if (begin < 0 || size < 0 || begin > axis - size)
        return tl_error(TL_EINVAL,
                        "%s: begin %" PRId64 " and size %" PRId64 " must select a window inside [0, %" PRId64
                        ") of the axis",
                        what, begin, size, axis);
    return TL_OK;
}

/* The output's axis extent, the sum of sizes; an error for a negative count
 * or size. */
static tl_status check_parts(const char *what, int64_t outer, int64_t inner, int64_t count,
                             const int64_t *sizes, int64_t *total)
{
    if (outer < 0 || inner < 0)
        return tl_error(TL_EINVAL, "%s: outer and inner must be >= 0, got %" PRId64 " and %" PRId64, what, outer,
                        inner);
    if (count < 0)
        return tl_error(TL_EINVAL, "%s: count must be >= 0, got %" PRId64, what, count);
    int64_t sum = 0;
    for (int64_t j = 0; j < count; j++) {
        if (sizes[j] < 0)
            return tl_error(TL_EINVAL, "%s: sizes[%" PRId64 "] must be >= 0, got %" PRId64, what, j, sizes[j]);
        sum += sizes[j];
    }
    *total = sum;
    return TL_OK;
}

static void copy_run(float *restrict dst, const float *restrict src, int64_t n)
{
    if (n > 0)
        memcpy(dst, src, (size_t)n * sizeof(float));
}

static void zero_run(float *restrict dst, int64_t n)
{
    if (n > 0)
        memset(dst, 0, (size_t)n * sizeof(float));
}

tl_status tl_k_slice(int64_t outer, int64_t axis, int64_t inner, int64_t begin, int64_t size,
                     const float *restrict x, float *restrict y)
{
    tl_status st = check_window("slice", outer, axis, inner, begin, size);
    if (st != TL_OK)
        return st;
    for (int64_t o = 0; o < outer; o++)
        copy_run(y + o * size * inner, x + (o * axis + begin) * inner, size * inner);
    return TL_OK;
}

tl_status tl_k_slice_grad(int64_t outer, int64_t axis, int64_t inner, int64_t begin, int64_t size,
                          const float *restrict dy, bool accumulate, float *restrict dx)
{
    tl_status st = check_window("slice_grad", outer, axis, inner, begin, size);
    if (st != TL_OK)
        return st;
    const int64_t run = size * inner;
    for (int64_t o = 0; o < outer; o++) {
        float *restrict row = dx + o * axis * inner;
        const float *restrict src = dy + o * run;
        if (!accumulate) {
            zero_run(row, begin * inner);
            copy_run(row + begin * inner, src, run);
            zero_run(row + (begin + size) * inner, (axis - begin - size) * inner);
            continue;
        }
        float *restrict dst = row + begin * inner;
        int64_t i = 0;
        for (; i + TL_K_LANES <= run; i += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++)
                dst[i + l] += src[i + l];
        for (; i < run; i++)
            dst[i] += src[i];
    }
    return TL_OK;
}

tl_status tl_k_concat(int64_t outer, int64_t inner, int64_t count, const int64_t *sizes,
                      const float *const *xs, float *restrict y)
{
    int64_t total;
    tl_status st = check_parts("concat", outer, inner, count, sizes, &total);
    if (st != TL_OK)
        return st;
    for (int64_t o = 0; o < outer; o++) {
        float *restrict dst = y + o * total * inner;
        for (int64_t j = 0; j < count; j++) {
            copy_run(dst, xs[j] + o * sizes[j] * inner, sizes[j] * inner);
            dst += sizes[j] * inner;
        }
    }
    return TL_OK;
}

tl_status tl_k_concat_grad(int64_t outer, int64_t inner, int64_t count, const int64_t *sizes,
                           const float *restrict dy, float *const *dxs)
{
    int64_t total;
    tl_status st = check_parts("concat_grad", outer, inner, count, sizes, &total);
    if (st != TL_OK)
        return st;
    for (int64_t o = 0; o < outer; o++) {
        const float *restrict src = dy + o * total * inner;
        for (int64_t j = 0; j < count; j++) {
            copy_run(dxs[j] + o * sizes[j] * inner, src, sizes[j] * inner);
            src += sizes[j] * inner;
        }
    }
    return TL_OK;
}

/* ---- float64 twins: element by element --------------------------------------------- */

tl_status tl_k_slice_ref(int64_t outer, int64_t axis, int64_t inner, int64_t begin, int64_t size,
                         const double *restrict x, double *restrict y)
{
    tl_status st = check_window("slice", outer, axis, inner, begin, size);
    if (st != TL_OK)
        return st;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t a = 0; a < size; a++)
            for (int64_t i = 0; i < inner; i++)
                y[(o * size + a) * inner + i] = x[(o * axis + begin + a) * inner + i];
    return TL_OK;
}

tl_status tl_k_slice_grad_ref(int64_t outer, int64_t axis, int64_t inner, int64_t begin, int64_t size,
                              const double *restrict dy, bool accumulate, double *restrict dx)
{
    tl_status st = check_window("slice_grad", outer, axis, inner, begin, size);
    if (st != TL_OK)
        return st;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t a = 0; a < axis; a++)
            for (int64_t i = 0; i < inner; i++) {
                double *d = &dx[(o * axis + a) * inner + i];
                bool inside = a >= begin && a < begin + size;
                double g = inside ? dy[(o * size + a - begin) * inner + i] : 0.0;
                if (accumulate)
                    *d += g;
                else
                    *d = g;
            }
    return TL_OK;
}

tl_status tl_k_concat_ref(int64_t outer, int64_t inner, int64_t count, const int64_t *sizes,
                          const double *const *xs, double *restrict y)
{
    int64_t total;
    tl_status st = check_parts("concat", outer, inner, count, sizes, &total);
    if (st != TL_OK)
        return st;
    int64_t start = 0;
    for (int64_t j = 0; j < count; j++) {
        for (int64_t o = 0; o < outer; o++)
            for (int64_t a = 0; a < sizes[j]; a++)
                for (int64_t i = 0; i < inner; i++)
                    y[(o * total + start + a) * inner + i] = xs[j][(o * sizes[j] + a) * inner + i];
        start += sizes[j];
    }
    return TL_OK;
}

tl_status tl_k_concat_grad_ref(int64_t outer, int64_t inner, int64_t count, const int64_t *sizes,
                               const double *restrict dy, double *const *dxs)
{
    int64_t total;
    tl_status st = check_parts("concat_grad", outer, inner, count, sizes, &total);
    if (st != TL_OK)
        return st;
    int64_t start = 0;
    for (int64_t j = 0; j < count; j++) {
        for (int64_t o = 0; o < outer; o++)
            for (int64_t a = 0; a < sizes[j]; a++)
                for (int64_t i = 0; i < inner; i++)
                    dxs[j][(o * sizes[j] + a) * inner + i] = dy[(o * total + start + a) * inner + i];
        start += sizes[j];
    }
    return TL_OK;
}

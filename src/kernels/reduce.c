/* reduce.c — sums and means over all elements and along an axis, their
 * broadcast gradients, and the float64 twins. The summation orders are the
 * ones kernels.h documents; changing one changes results bit for bit. */
#include <string.h>

#include "../base/base_int.h"
#include "kernels.h"

/* Inner elements reduced together in the strided case: a float64 accumulator
 * each, on the stack (kernels allocate nothing). */
#define STRIDED_CHUNK 256

/* A contiguous run: TL_K_LANES float64 partials, element i into partial
 * i mod TL_K_LANES, partials added in order. The tail starts at a multiple of
 * TL_K_LANES, so its element i lands in partial i - start = i mod TL_K_LANES
 * as well. */
static double sum_run(int64_t n, const float *restrict x)
{
    double part[TL_K_LANES] = {0};
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            part[l] += (double)x[i + l];
    for (int l = 0; i < n; i++, l++)
        part[l] += (double)x[i];
    double s = 0.0;
    for (int l = 0; l < TL_K_LANES; l++)
        s += part[l];
    return s;
}

/* y[o, i] = sum over a of x[o, a, i] (divided by axis for a mean). */
static void reduce_axis(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, float *restrict y,
                        bool mean)
{
    TL_ASSERT(outer >= 0 && axis >= 0 && inner >= 0);
    const double count = (double)axis;
    if (inner == 1) {
        for (int64_t o = 0; o < outer; o++) {
            double s = sum_run(axis, x + o * axis);
            y[o] = (float)(mean ? s / count : s);
        }
        return;
    }
    double acc[STRIDED_CHUNK];
    for (int64_t o = 0; o < outer; o++) {
        const float *restrict xo = x + o * axis * inner;
        for (int64_t i0 = 0; i0 < inner; i0 += STRIDED_CHUNK) {
            int64_t w = inner - i0 < STRIDED_CHUNK ? inner - i0 : STRIDED_CHUNK;
            for (int64_t c = 0; c < w; c++)
                acc[c] = 0.0;
            for (int64_t a = 0; a < axis; a++) {
                const float *restrict row = xo + a * inner + i0;
                int64_t c = 0;
                for (; c + TL_K_LANES <= w; c += TL_K_LANES)
                    for (int l = 0; l < TL_K_LANES; l++)
                        acc[c + l] += (double)row[c + l];
                for (; c < w; c++)
                    acc[c] += (double)row[c];
            }
            float *restrict yo = y + o * inner + i0;
            for (int64_t c = 0; c < w; c++)
                yo[c] = (float)(mean ? acc[c] / count : acc[c]);
        }
    }
}

/* dx = value over n elements. */
static void fill(int64_t n, float value, float *restrict dx)
{
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            dx[i + l] = value;
    for (; i < n; i++)
        dx[i] = value;
}

/* dx[o, a, i] = dy[o, i]·scale: each (o, a) is a copy of a row of dy. */
static void broadcast_axis(int64_t outer, int64_t axis, int64_t inner, const float *restrict dy,
                           float *restrict dx, bool mean)
{
    TL_ASSERT(outer >= 0 && axis >= 0 && inner >= 0);
    for (int64_t o = 0; o < outer; o++) {
        const float *restrict src = dy + o * inner;
        for (int64_t a = 0; a < axis; a++) {
            float *restrict dst = dx + (o * axis + a) * inner;
            if (mean) {
                for (int64_t i = 0; i < inner; i++)
                    dst[i] = (float)((double)src[i] / (double)axis);
            } else if (inner > 0) {
                memcpy(dst, src, (size_t)inner * sizeof(float));
            }
        }
    }
}

void tl_k_sum(int64_t n, const float *restrict x, float *restrict y)
{
    TL_ASSERT(n >= 0);
    y[0] = (float)sum_run(n, x);
}

void tl_k_mean(int64_t n, const float *restrict x, float *restrict y)
{
    TL_ASSERT(n >= 0);
    y[0] = (float)(sum_run(n, x) / (double)n);
}

void tl_k_sum_grad(int64_t n, const float *restrict dy, float *restrict dx)
{
    TL_ASSERT(n >= 0);
    fill(n, dy[0], dx);
}

void tl_k_mean_grad(int64_t n, const float *restrict dy, float *restrict dx)
{
    TL_ASSERT(n >= 0);
    if (n > 0)
        fill(n, (float)((double)dy[0] / (double)n), dx);
}

void tl_k_sum_axis(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, float *restrict y)
{
    reduce_axis(outer, axis, inner, x, y, false);
}

void tl_k_mean_axis(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, float *restrict y)
{
    reduce_axis(outer, axis, inner, x, y, true);
}

void tl_k_sum_axis_grad(int64_t outer, int64_t axis, int64_t inner, const float *restrict dy,
                        float *restrict dx)
{
    broadcast_axis(outer, axis, inner, dy, dx, false);
}

void tl_k_mean_axis_grad(int64_t outer, int64_t axis, int64_t inner, const float *restrict dy,
                         float *restrict dx)
{
    broadcast_axis(outer, axis, inner, dy, dx, true);
}

/* ---- float64 twins: one accumulator, increasing index -------------------------- */

void tl_k_sum_ref(int64_t n, const double *restrict x, double *restrict y)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += x[i];
    y[0] = s;
}

void tl_k_mean_ref(int64_t n, const double *restrict x, double *restrict y)
{
    double s;
    tl_k_sum_ref(n, x, &s);
    y[0] = s / (double)n;
}

void tl_k_sum_grad_ref(int64_t n, const double *restrict dy, double *restrict dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[0];
}

void tl_k_mean_grad_ref(int64_t n, const double *restrict dy, double *restrict dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[0] / (double)n;
}

void tl_k_sum_axis_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x, double *restrict y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0.0;
            for (int64_t a = 0; a < axis; a++)
                s += x[(o * axis + a) * inner + i];
            y[o * inner + i] = s;
        }
}

void tl_k_mean_axis_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x,
                        double *restrict y)
{
    tl_k_sum_axis_ref(outer, axis, inner, x, y);
    for (int64_t j = 0; j < outer * inner; j++)
        y[j] /= (double)axis;
}

void tl_k_sum_axis_grad_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict dy,
                            double *restrict dx)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t a = 0; a < axis; a++)
            for (int64_t i = 0; i < inner; i++)
                dx[(o * axis + a) * inner + i] = dy[o * inner + i];
}

void tl_k_mean_axis_grad_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict dy,
                             double *restrict dx)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t a = 0; a < axis; a++)
            for (int64_t i = 0; i < inner; i++)
                dx[(o * axis + a) * inner + i] = dy[o * inner + i] / (double)axis;
}

/* interaction.c — DLRM's pairwise dot interaction: all dot products between
 * the f feature vectors of each example (full matrix or strictly lower
 * triangle), their gradients, and the float64 twins.
 *
 * Direct loops rather than a GEMM per example: f and d are small in DLRM
 * (f ≈ 27, d = 16..128), where a BLAS call per example costs more than its
 * arithmetic, and the dot product's summation order is then fixed by this
 * file rather than by whichever BLAS kernel the machine selects. */
#include "../base/base_int.h"
#include "kernels.h"

/* <a, b> with TL_K_LANES float partial sums (component c into partial
 * c mod TL_K_LANES), added in order: independent lanes vectorise without
 * reassociating anything. */
static float dot_lanes(int64_t d, const float *restrict a, const float *restrict b)
{
    float part[TL_K_LANES] = {0};
    int64_t c = 0;
    for (; c + TL_K_LANES <= d; c += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            part[l] += a[c + l] * b[c + l];
    for (int l = 0; c < d; c++, l++)
        part[l] += a[c] * b[c];
    float s = 0.0f;
    for (int l = 0; l < TL_K_LANES; l++)
        s += part[l];
    return s;
}

/* y += w·x over d elements. */
static void axpy(int64_t d, float w, const float *restrict x, float *restrict y)
{
    int64_t c = 0;
    for (; c + TL_K_LANES <= d; c += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            y[c + l] += w * x[c + l];
    for (; c < d; c++)
        y[c] += w * x[c];
}

static void zero(int64_t d, float *restrict y)
{
    for (int64_t c = 0; c < d; c++)
        y[c] = 0.0f;
}

/* Index of the pair (i, j), i > j, in the row-order triangle. */
static int64_t tril_index(int64_t i, int64_t j)
{
    return i * (i - 1) / 2 + j;
}

void tl_k_pairwise_dot(int64_t batch, int64_t f, int64_t d, const float *restrict t, float *restrict z)
{
    TL_ASSERT(batch >= 0 && f >= 0 && d >= 0);
    for (int64_t b = 0; b < batch; b++) {
        const float *restrict tb = t + b * f * d;
        float *restrict zb = z + b * f * f;
        for (int64_t i = 0; i < f; i++)
            for (int64_t j = 0; j <= i; j++) {
                float v = dot_lanes(d, tb + i * d, tb + j * d);
                zb[i * f + j] = v;
                zb[j * f + i] = v;
            }
    }
}

void tl_k_pairwise_dot_tril(int64_t batch, int64_t f, int64_t d, const float *restrict t, float *restrict z)
{
    TL_ASSERT(batch >= 0 && f >= 0 && d >= 0);
    const int64_t pairs = f * (f - 1) / 2;
    for (int64_t b = 0; b < batch; b++) {
        const float *restrict tb = t + b * f * d;
        float *restrict zb = z + b * pairs;
        int64_t p = 0;
        for (int64_t i = 1; i < f; i++)
            for (int64_t j = 0; j < i; j++)
                zb[p++] = dot_lanes(d, tb + i * d, tb + j * d);
    }
}

void tl_k_pairwise_dot_grad(int64_t batch, int64_t f, int64_t d, const float *restrict t,
                            const float *restrict dz, float *restrict dt)
{
    TL_ASSERT(batch >= 0 && f >= 0 && d >= 0);
    for (int64_t b = 0; b < batch; b++) {
        const float *restrict tb = t + b * f * d;
        const float *restrict dzb = dz + b * f * f;
        for (int64_t i = 0; i < f; i++) {
            float *restrict dti = dt + (b * f + i) * d;
            zero(d, dti);
            for (int64_t j = 0; j < f; j++)
                axpy(d, dzb[i * f + j] + dzb[j * f + i], tb + j * d, dti);
        }
    }
}

void tl_k_pairwise_dot_tril_grad(int64_t batch, int64_t f, int64_t d, const float *restrict t,
                                 const float *restrict dz, float *restrict dt)
{
    TL_ASSERT(batch >= 0 && f >= 0 && d >= 0);
    const int64_t pairs = f * (f - 1) / 2;
    for (int64_t b = 0; b < batch; b++) {
        const float *restrict tb = t + b * f * d;
        const float *restrict dzb = dz + b * pairs;
        for (int64_t i = 0; i < f; i++) {
            float *restrict dti = dt + (b * f + i) * d;
            zero(d, dti);
            /* j < i: the pair (i, j); j > i: the pair (j, i); no pair (i, i). */
            for (int64_t j = 0; j < i; j++)
                axpy(d, dzb[tril_index(i, j)], tb + j * d, dti);
            for (int64_t j = i + 1; j < f; j++)
                axpy(d, dzb[tril_index(j, i)], tb + j * d, dti);
        }
    }
}

/* ---- float64 twins: the definitions written out ------------------------------------- */

static double dot_ref(int64_t d, const double *a, const double *b)
{
    double s = 0.0;
    for (int64_t c = 0; c < d; c++)
        s += a[c] * b[c];
    return s;
}

void tl_k_pairwise_dot_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t, double *restrict z)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < f; i++)
            for (int64_t j = 0; j < f; j++)
                z[(b * f + i) * f + j] = dot_ref(d, t + (b * f + i) * d, t + (b * f + j) * d);
}

void tl_k_pairwise_dot_tril_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t,
                                double *restrict z)
{
    const int64_t pairs = f * (f - 1) / 2;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 1; i < f; i++)
            for (int64_t j = 0; j < i; j++)
                z[b * pairs + tril_index(i, j)] = dot_ref(d, t + (b * f + i) * d, t + (b * f + j) * d);
}

void tl_k_pairwise_dot_grad_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t,
                                const double *restrict dz, double *restrict dt)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < f; i++)
            for (int64_t c = 0; c < d; c++) {
                double s = 0.0;
                for (int64_t j = 0; j < f; j++)
                    s += dz[(b * f + i) * f + j] * t[(b * f + j) * d + c];
                for (int64_t j = 0; j < f; j++)
                    s += dz[(b * f + j) * f + i] * t[(b * f + j) * d + c];
                dt[(b * f + i) * d + c] = s;
            }
}

void tl_k_pairwise_dot_tril_grad_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t,
                                     const double *restrict dz, double *restrict dt)
{
    const int64_t pairs = f * (f - 1) / 2;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < f; i++)
            for (int64_t c = 0; c < d; c++) {
                double s = 0.0;
                for (int64_t j = 0; j < i; j++)
                    s += dz[b * pairs + tril_index(i, j)] * t[(b * f + j) * d + c];
                for (int64_t k = i + 1; k < f; k++)
                    s += dz[b * pairs + tril_index(k, i)] * t[(b * f + k) * d + c];
                dt[(b * f + i) * d + c] = s;
            }
}

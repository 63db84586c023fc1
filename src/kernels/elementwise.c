/* elementwise.c — bias add, relu / sigmoid / tanh, gradient accumulation and
 * dropout, with their float64 twins.
 *
 * The fast loops run in blocks of TL_K_LANES elements with a scalar tail: gcc
 * -O2 (the "very cheap" vectoriser) only vectorises a loop whose trip count it
 * knows, and the fixed inner block gives it one. The per-element formula is a
 * static inline function used by both loops, so block and tail cannot drift
 * apart. */
#include <math.h>

#include "../base/base_int.h"
#include "kernels.h"

/* ---- bias add ------------------------------------------------------------------ */

TL_VECTOR_CLONES void tl_k_bias_add(int64_t rows, int64_t cols, const float *restrict x, const float *restrict bias,
                   float *restrict y)
{
    TL_ASSERT(rows >= 0 && cols >= 0);
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * cols;
        float *restrict yr = y + r * cols;
        int64_t c = 0;
        for (; c + TL_K_LANES <= cols; c += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++)
                yr[c + l] = xr[c + l] + bias[c + l];
        for (; c < cols; c++)
            yr[c] = xr[c] + bias[c];
    }
}

void tl_k_bias_add_ref(int64_t rows, int64_t cols, const double *restrict x, const double *restrict bias,
                       double *restrict y)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            y[r * cols + c] = x[r * cols + c] + bias[c];
}

TL_VECTOR_CLONES void tl_k_bias_add_grad(int64_t rows, int64_t cols, const float *restrict dy, float *restrict dbias)
{
    tl_k_sum_axis(1, rows, cols, dy, dbias);
}

void tl_k_bias_add_grad_ref(int64_t rows, int64_t cols, const double *restrict dy, double *restrict dbias)
{
    for (int64_t c = 0; c < cols; c++) {
        double s = 0.0;
        for (int64_t r = 0; r < rows; r++)
            s += dy[r * cols + c];
        dbias[c] = s;
    }
}

/* ---- activations ---------------------------------------------------------------- */

/* x < 0 rather than x > 0 so that NaN passes through. */
static inline float relu1(float x)
{
    return x < 0.0f ? 0.0f : x;
}

/* dy is loaded whatever the branch: a conditional load would stop the
 * vectoriser ("control flow in loop"). */
static inline float relu_grad1(float y, float dy)
{
    return y > 0.0f ? dy : 0.0f;
}

static inline float sigmoid1(float x)
{
    /* exp(-x) overflows to inf for x < -88 and 1/inf is the right 0; it never
     * gives NaN, so the textbook form is also the stable one. */
    return 1.0f / (1.0f + expf(-x));
}

static inline float sigmoid_grad1(float y, float dy)
{
    return dy * (y * (1.0f - y));
}

static inline float tanh_grad1(float y, float dy)
{
    return dy * (1.0f - y * y);
}

TL_VECTOR_CLONES void tl_k_relu(int64_t n, const float *restrict x, float *restrict y)
{
    TL_ASSERT(n >= 0);
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            y[i + l] = relu1(x[i + l]);
    for (; i < n; i++)
        y[i] = relu1(x[i]);
}

TL_VECTOR_CLONES void tl_k_relu_grad(int64_t n, const float *restrict y, const float *restrict dy, float *restrict dx)
{
    TL_ASSERT(n >= 0);
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            dx[i + l] = relu_grad1(y[i + l], dy[i + l]);
    for (; i < n; i++)
        dx[i] = relu_grad1(y[i], dy[i]);
}

TL_VECTOR_CLONES void tl_k_bias_relu_cols(int64_t rows, int64_t ld, int64_t c0, int64_t c1,
                                          const float *restrict bias, bool relu, float *y)
{
    TL_ASSERT(rows >= 0 && c0 >= 0 && c0 <= c1 && c1 <= ld);
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * ld;
        if (relu)
            for (int64_t c = c0; c < c1; c++)
                yr[c] = relu1(yr[c] + bias[c]);
        else
            for (int64_t c = c0; c < c1; c++)
                yr[c] = yr[c] + bias[c];
    }
}

/* Columns per pass of the float64 sums (reduce.c's STRIDED_CHUNK). */
#define BIAS_CHUNK 256

TL_VECTOR_CLONES void tl_k_bias_relu_grad_cols(int64_t rows, int64_t ld, int64_t c0, int64_t c1,
                                               const float *restrict y, bool relu, float *restrict dy,
                                               float *restrict dbias)
{
    TL_ASSERT(rows >= 0 && c0 >= 0 && c0 <= c1 && c1 <= ld);
    double acc[BIAS_CHUNK];
    for (int64_t j0 = c0; j0 < c1; j0 += BIAS_CHUNK) {
        int64_t w = c1 - j0 < BIAS_CHUNK ? c1 - j0 : BIAS_CHUNK;
        for (int64_t c = 0; c < w; c++)
            acc[c] = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            float *restrict dr = dy + r * ld + j0;
            if (relu) {
                const float *restrict yr = y + r * ld + j0;
                for (int64_t c = 0; c < w; c++)
                    dr[c] = relu_grad1(yr[c], dr[c]);
            }
            for (int64_t c = 0; c < w; c++)
                acc[c] += (double)dr[c];
        }
        if (dbias != NULL)
            for (int64_t c = 0; c < w; c++)
                dbias[j0 + c] = (float)acc[c];
    }
}

TL_VECTOR_CLONES void tl_k_add_relu(int64_t n, const float *restrict a, const float *restrict b, float *restrict y)
{
    TL_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++)
        y[i] = relu1(a[i] + b[i]);
}

TL_VECTOR_CLONES void tl_k_add_relu_grad(int64_t n, const float *restrict y, const float *restrict dy,
                                         float *restrict dx0, float *restrict dx1)
{
    TL_ASSERT(n >= 0);
    if (dx0 == NULL) {
        dx0 = dx1;
        dx1 = NULL;
    }
    if (dx0 == NULL)
        return;
    if (dx1 == NULL) {
        tl_k_relu_grad(n, y, dy, dx0);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float g = relu_grad1(y[i], dy[i]);
        dx0[i] = g;
        dx1[i] = g;
    }
}

/* expf and tanhf are library calls, which gcc does not vectorise without
 * -ffast-math; these two stay scalar. */
void tl_k_sigmoid(int64_t n, const float *restrict x, float *restrict y)
{
    TL_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++)
        y[i] = sigmoid1(x[i]);
}

TL_VECTOR_CLONES void tl_k_sigmoid_grad(int64_t n, const float *restrict y, const float *restrict dy, float *restrict dx)
{
    TL_ASSERT(n >= 0);
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            dx[i + l] = sigmoid_grad1(y[i + l], dy[i + l]);
    for (; i < n; i++)
        dx[i] = sigmoid_grad1(y[i], dy[i]);
}

void tl_k_tanh(int64_t n, const float *restrict x, float *restrict y)
{
    TL_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++)
        y[i] = tanhf(x[i]);
}

TL_VECTOR_CLONES void tl_k_tanh_grad(int64_t n, const float *restrict y, const float *restrict dy, float *restrict dx)
{
    TL_ASSERT(n >= 0);
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            dx[i + l] = tanh_grad1(y[i + l], dy[i + l]);
    for (; i < n; i++)
        dx[i] = tanh_grad1(y[i], dy[i]);
}

void tl_k_relu_ref(int64_t n, const double *restrict x, double *restrict y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] < 0.0 ? 0.0 : x[i];
}

void tl_k_relu_grad_ref(int64_t n, const double *restrict y, const double *restrict dy, double *restrict dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = y[i] > 0.0 ? dy[i] : 0.0;
}

void tl_k_sigmoid_ref(int64_t n, const double *restrict x, double *restrict y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = 1.0 / (1.0 + exp(-x[i]));
}

void tl_k_sigmoid_grad_ref(int64_t n, const double *restrict y, const double *restrict dy, double *restrict dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * y[i] * (1.0 - y[i]);
}

void tl_k_tanh_ref(int64_t n, const double *restrict x, double *restrict y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = tanh(x[i]);
}

void tl_k_tanh_grad_ref(int64_t n, const double *restrict y, const double *restrict dy, double *restrict dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * (1.0 - y[i] * y[i]);
}

/* ---- accumulation ----------------------------------------------------------------- */

TL_VECTOR_CLONES void tl_k_accumulate(int64_t n, const float *restrict x, float *restrict acc)
{
    TL_ASSERT(n >= 0);
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            acc[i + l] += x[i + l];
    for (; i < n; i++)
        acc[i] += x[i];
}

void tl_k_accumulate_ref(int64_t n, const double *restrict x, double *restrict acc)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] += x[i];
}

/* ---- dropout ------------------------------------------------------------------------- */

static tl_status check_rate(const char *what, double rate)
{
    /* Written so that NaN fails too. */
    if (!(rate >= 0.0 && rate < 1.0))
        return tl_error(TL_EINVAL, "%s: rate must be a float in the range [0, 1), got %g", what, rate);
    return TL_OK;
}

/* TF's scale: 1 / (1 - rate) in float64 (a Python float), then float32. */
static float dropout_scale(double rate)
{
    return (float)(1.0 / (1.0 - rate));
}

static inline float masked1(float v, float scale, uint8_t keep)
{
    return v * scale * (float)keep;
}

tl_status tl_k_dropout(int64_t n, double rate, const tl_rng *stream, uint64_t offset, const float *restrict x,
                       float *restrict y, uint8_t *restrict mask)
{
    tl_status st = check_rate("dropout", rate);
    if (st != TL_OK)
        return st;
    TL_ASSERT(n >= 0);
    /* u = (w >> 8)·2⁻²⁴ for a word w, so u >= r ⇔ (w >> 8) >= ceil(r·2²⁴):
     * an exact integer test, equal to comparing tl_rng_uniform with the
     * float32 rate. */
    const uint32_t threshold = (uint32_t)ceil((double)(float)rate * 16777216.0);
    tl_rng r = *stream;
    tl_rng_seek(&r, offset);
    for (int64_t i = 0; i < n; i++)
        mask[i] = (uint8_t)((tl_rng_u32(&r) >> 8) >= threshold);
    const float scale = dropout_scale(rate);
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            y[i + l] = masked1(x[i + l], scale, mask[i + l]);
    for (; i < n; i++)
        y[i] = masked1(x[i], scale, mask[i]);
    return TL_OK;
}

tl_status tl_k_dropout_grad(int64_t n, double rate, const uint8_t *restrict mask, const float *restrict dy,
                            float *restrict dx)
{
    tl_status st = check_rate("dropout_grad", rate);
    if (st != TL_OK)
        return st;
    TL_ASSERT(n >= 0);
    const float scale = dropout_scale(rate);
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            dx[i + l] = masked1(dy[i + l], scale, mask[i + l]);
    for (; i < n; i++)
        dx[i] = masked1(dy[i], scale, mask[i]);
    return TL_OK;
}

tl_status tl_k_dropout_ref(int64_t n, double rate, const tl_rng *stream, uint64_t offset,
                           const double *restrict x, double *restrict y, uint8_t *restrict mask)
{
    tl_status st = check_rate("dropout", rate);
    if (st != TL_OK)
        return st;
    for (int64_t i = 0; i < n; i++) {
        tl_rng r = *stream;
        tl_rng_seek(&r, offset + (uint64_t)i);
        mask[i] = tl_rng_uniform(&r) >= (float)rate;
        y[i] = mask[i] ? x[i] / (1.0 - rate) : 0.0;
    }
    return TL_OK;
}

tl_status tl_k_dropout_grad_ref(int64_t n, double rate, const uint8_t *restrict mask, const double *restrict dy,
                                double *restrict dx)
{
    tl_status st = check_rate("dropout_grad", rate);
    if (st != TL_OK)
        return st;
    for (int64_t i = 0; i < n; i++)
        dx[i] = mask[i] ? dy[i] / (1.0 - rate) : 0.0;
    return TL_OK;
}

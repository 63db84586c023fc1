/* elementwise_unary.c — the element-wise family's unary math and
 * activations (tl_k_unary, tl_k_unary_grad, elementwise_bcast.h) and their
 * float64 twins: one per-element function per op, in a blocked loop
 * (TL_K_LANES) where gcc can vectorise it and a plain loop around library
 * calls. */
#include <math.h>

#include "../base/base_int.h"
#include "elementwise_bcast.h"
#include "kernels_int.h"

/* ---- unary math and activations ---------------------------------------------------------- */

#define INV_SQRT2 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794
#define GELU_K 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_A 0.044715

static inline float sigmoid1(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float clip1(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }
/* gelu = x·Φ(x) with Φ(x) = 0.5·(1 + erf(x/√2)) = 0.5·erfc(-x/√2), and the
 * tanh form's 0.5·(1 + tanh(u)) = sigmoid(2u): the same functions as TF's
 * expressions, without the cancellation of 1 + erf / 1 + tanh for x < 0. */
static inline float gelu_u(float x) { return (float)GELU_K * (x + (float)GELU_A * (x * x * x)); }
static inline float gelu1(float x) { return 0.5f * x * erfcf(-x * (float)INV_SQRT2); }
static inline float gelu_tanh1(float x) { return x * sigmoid1(2.0f * gelu_u(x)); }
static inline float elu1(float x, float alpha) { return x > 0.0f ? x : alpha * expm1f(x); }
static inline float softplus1(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }

static inline float abs_grad1(float x, float dy) { return x > 0.0f ? dy : (x < 0.0f ? -dy : 0.0f); }
static inline float clip_grad1(float x, float lo, float hi, float dy) { return x >= lo && x <= hi ? dy : 0.0f; }
static inline float gelu_grad1(float x, float dy)
{
    float cdf = 0.5f * erfcf(-x * (float)INV_SQRT2);
    return dy * (cdf + x * expf(-0.5f * x * x) * (float)INV_SQRT_2PI);
}
/* d/dx x·s(2u) = s + 2x·s·(1 - s)·u'. */
static inline float gelu_tanh_grad1(float x, float dy)
{
    float s = sigmoid1(2.0f * gelu_u(x));
    float du = (float)GELU_K * (1.0f + 3.0f * (float)GELU_A * (x * x));
    return dy * (s + 2.0f * x * (s * (1.0f - s)) * du);
}
static inline float silu_grad1(float x, float dy)
{
    float s = sigmoid1(x);
    return dy * (s * (1.0f + x * (1.0f - s)));
}
static inline float leaky_grad1(float x, float alpha, float dy) { return x > 0.0f ? dy : dy * alpha; }
static inline float elu_grad1(float x, float alpha, float dy) { return x > 0.0f ? dy : dy * (alpha * expf(x)); }

/* Library calls (expf, logf, erff, tanhf ...) do not vectorise without
 * -ffast-math; their loops are plain. */
TL_VECTOR_CLONES void tl_k_unary(tl_k_unop op, int64_t n, float a, float b, const float *restrict x,
                                 float *restrict y)
{
    TL_ASSERT(n >= 0);
    switch (op) {
    case TL_K_NEG: EACH(n, y[i] = -x[i]); return;
    case TL_K_ABS: EACH(n, y[i] = fabsf(x[i])); return;
    case TL_K_EXP: for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]); return;
    case TL_K_LOG: for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]); return;
    case TL_K_SQRT: EACH(n, y[i] = sqrtf(x[i])); return;
    case TL_K_RSQRT: EACH(n, y[i] = 1.0f / sqrtf(x[i])); return;
    case TL_K_SQUARE: EACH(n, y[i] = x[i] * x[i]); return;
    case TL_K_CLIP: EACH(n, y[i] = clip1(x[i], a, b)); return;
    case TL_K_GELU: for (int64_t i = 0; i < n; i++) y[i] = gelu1(x[i]); return;
    case TL_K_GELU_TANH: for (int64_t i = 0; i < n; i++) y[i] = gelu_tanh1(x[i]); return;
    case TL_K_SILU: for (int64_t i = 0; i < n; i++) y[i] = x[i] * sigmoid1(x[i]); return;
    case TL_K_LEAKY_RELU: EACH(n, y[i] = x[i] > 0.0f ? x[i] : a * x[i]); return;
    case TL_K_ELU: for (int64_t i = 0; i < n; i++) y[i] = elu1(x[i], a); return;
    case TL_K_SOFTPLUS: for (int64_t i = 0; i < n; i++) y[i] = softplus1(x[i]); return;
    case TL_K_UNOP_COUNT_: break;
    }
    TL_ASSERT(!"unknown unary op");
}

TL_VECTOR_CLONES void tl_k_unary_grad(tl_k_unop op, int64_t n, float a, float b, const float *restrict x,
                                      const float *restrict y, const float *restrict dy, float *restrict dx)
{
    TL_ASSERT(n >= 0);
    switch (op) {
    case TL_K_NEG: EACH(n, dx[i] = -dy[i]); return;
    case TL_K_ABS: EACH(n, dx[i] = abs_grad1(x[i], dy[i])); return;
    case TL_K_EXP: EACH(n, dx[i] = dy[i] * y[i]); return;
    case TL_K_LOG: EACH(n, dx[i] = dy[i] * (1.0f / x[i])); return;
    case TL_K_SQRT: EACH(n, dx[i] = 0.5f * dy[i] / y[i]); return;
    case TL_K_RSQRT: EACH(n, dx[i] = -0.5f * (y[i] * y[i] * y[i]) * dy[i]); return;
    case TL_K_SQUARE: EACH(n, dx[i] = dy[i] * (2.0f * x[i])); return;
    case TL_K_CLIP: EACH(n, dx[i] = clip_grad1(x[i], a, b, dy[i])); return;
    case TL_K_GELU: for (int64_t i = 0; i < n; i++) dx[i] = gelu_grad1(x[i], dy[i]); return;
    case TL_K_GELU_TANH: for (int64_t i = 0; i < n; i++) dx[i] = gelu_tanh_grad1(x[i], dy[i]); return;
    case TL_K_SILU: for (int64_t i = 0; i < n; i++) dx[i] = silu_grad1(x[i], dy[i]); return;
    case TL_K_LEAKY_RELU: EACH(n, dx[i] = leaky_grad1(x[i], a, dy[i])); return;
    case TL_K_ELU: for (int64_t i = 0; i < n; i++) dx[i] = elu_grad1(x[i], a, dy[i]); return;
    case TL_K_SOFTPLUS: for (int64_t i = 0; i < n; i++) dx[i] = dy[i] / (1.0f + expf(-x[i])); return;
    case TL_K_UNOP_COUNT_: break;
    }
    TL_ASSERT(!"unknown unary op");
}

static double unary_ref1(tl_k_unop op, double a, double b, double x)
{
    switch (op) {
    case TL_K_NEG: return -x;
    case TL_K_ABS: return fabs(x);
    case TL_K_EXP: return exp(x);
    case TL_K_LOG: return log(x);
    case TL_K_SQRT: return sqrt(x);
    case TL_K_RSQRT: return 1.0 / sqrt(x);
    case TL_K_SQUARE: return x * x;
    case TL_K_CLIP: return isnan(x) ? x : fmax(fmin(x, b), a);
    case TL_K_GELU: return 0.5 * x * (1.0 + erf(x * INV_SQRT2));
    case TL_K_GELU_TANH: return 0.5 * x * (1.0 + tanh(GELU_K * (x + GELU_A * x * x * x)));
    case TL_K_SILU: return x / (1.0 + exp(-x));
    case TL_K_LEAKY_RELU: return x > 0.0 ? x : a * x;
    case TL_K_ELU: return x > 0.0 ? x : a * expm1(x);
    case TL_K_SOFTPLUS: return fmax(x, 0.0) + log1p(exp(-fabs(x)));
    case TL_K_UNOP_COUNT_: break;
    }
    TL_ASSERT(!"unknown unary op");
    return 0.0;
}

static double unary_grad_ref1(tl_k_unop op, double a, double b, double x, double y)
{
    switch (op) {
    case TL_K_NEG: return -1.0;
    case TL_K_ABS: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
    case TL_K_EXP: return y;
    case TL_K_LOG: return 1.0 / x;
    case TL_K_SQRT: return 0.5 / y;
    case TL_K_RSQRT: return -0.5 * y * y * y;
    case TL_K_SQUARE: return 2.0 * x;
    case TL_K_CLIP: return x >= a && x <= b ? 1.0 : 0.0;
    case TL_K_GELU: return 0.5 * (1.0 + erf(x * INV_SQRT2)) + x * exp(-0.5 * x * x) * INV_SQRT_2PI;
    case TL_K_GELU_TANH: {
        double t = tanh(GELU_K * (x + GELU_A * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_A * x * x);
    }
    case TL_K_SILU: {
        double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    case TL_K_LEAKY_RELU: return x > 0.0 ? 1.0 : a;
    case TL_K_ELU: return x > 0.0 ? 1.0 : a * exp(x);
    case TL_K_SOFTPLUS: return 1.0 / (1.0 + exp(-x));
    case TL_K_UNOP_COUNT_: break;
    }
    TL_ASSERT(!"unknown unary op");
    return 0.0;
}

void tl_k_unary_ref(tl_k_unop op, int64_t n, double a, double b, const double *restrict x, double *restrict y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = unary_ref1(op, a, b, x[i]);
}

void tl_k_unary_grad_ref(tl_k_unop op, int64_t n, double a, double b, const double *restrict x,
                         const double *restrict y, const double *restrict dy, double *restrict dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * unary_grad_ref1(op, a, b, x[i], y[i]);
}

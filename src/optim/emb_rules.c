/* emb_rules.c — the TPU embedding update of one row (gradient clip, weight
 * decay, the optimizer, weight clip) and simulated quantization.
 *
 * This runs once per touched row inside the update of a table, so the
 * algorithm and its switches are resolved once per row, never per element:
 * every rule is a loop with restrict pointers and no calls but sqrtf, in the
 * form the auto-vectoriser takes (see apply.c for the flags it needs).
 * Switches that select a different formula (Nesterov, update_accumulator_first,
 * FTRL's multiply_linear_by_lr, exponents other than 1/2) get their own loop,
 * written once as an always-inline body and instantiated with constant
 * flags. Rules that are also dense optimizers (SGD, Adagrad, Momentum, plain
 * Adam, RMSProp, centered RMSProp) call apply.c's kernels, so tpuloop holds
 * each of those formulas once.
 *
 * Exponents other than 1/2 (AdagradMomentum's exponent, FTRL's
 * learning_rate_power, FrequencyAwareAdagrad's probability_exponent) need
 * powf, which GCC does not vectorise without -ffast-math; those loops are
 * scalar and rare. The formulas are in tpuloop/emb_optim.h.
 */
#include <math.h>
#include <string.h>

#include "../base/base_int.h"
#include "optim_int.h"
#include "tpuloop/emb_optim.h"

#if defined(__GNUC__)
#define EMB_INLINE static inline __attribute__((always_inline))
#else
#define EMB_INLINE static inline
#endif

/* -1, 0 or 1, branch-free so that loops using it vectorise. */
EMB_INLINE float sign_f(float x)
{
    return (float)((x > 0.0f) - (x < 0.0f));
}

/* ---- the pipeline around the rule --------------------------------------- */

/* x = clamp(x, lo, hi); an absent bound is +-inf, where the compare is a
 * no-op (NaN stays NaN). */
TL_VECTOR_CLONES static void clamp_f(float *restrict x, float lo, float hi, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        x[i] = v > hi ? hi : v;
    }
}

static void clamp_limits(const tl_emb_limits *l, float *restrict x, int64_t n)
{
    if (l->has_lower || l->has_upper)
        clamp_f(x, l->has_lower ? l->lower : -INFINITY, l->has_upper ? l->upper : INFINITY, n);
}

TL_VECTOR_CLONES static void decay_f(float *restrict w, float wd, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        w[i] -= wd * w[i];
}

/* ---- rules with no dense twin ------------------------------------------- */

/* a = c1*a + c2*g^2: (1, 1) is beta2 == 1's a + g^2 exactly (1*x == x),
 * (beta2, 1 - beta2) the moving average. */
EMB_INLINE void adagrad_momentum_body(float *restrict w, const float *restrict g, float *restrict a,
                                      float *restrict m, float lr, float mu, float c1, float c2, float eps,
                                      float neg_inv_exp, int64_t n, const bool nesterov, const bool half)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float ai = c1 * a[i] + c2 * (gi * gi);
        float si = half ? 1.0f / sqrtf(ai + eps) : powf(ai + eps, neg_inv_exp);
        float mi = mu * m[i] + si * gi;
        float ui = nesterov ? mu * mi + si * gi : mi;
        a[i] = ai;
        m[i] = mi;
        w[i] -= lr * ui;
    }
}

TL_VECTOR_CLONES static void adagrad_momentum_sqrt_f(float *restrict w, const float *restrict g, float *restrict a,
                                                     float *restrict m, float lr, float mu, float c1, float c2,
                                                     float eps, int64_t n)
{
    adagrad_momentum_body(w, g, a, m, lr, mu, c1, c2, eps, -0.5f, n, false, true);
}

TL_VECTOR_CLONES static void adagrad_momentum_sqrt_nesterov_f(float *restrict w, const float *restrict g,
                                                              float *restrict a, float *restrict m, float lr, float mu,
                                                              float c1, float c2, float eps, int64_t n)
{
    adagrad_momentum_body(w, g, a, m, lr, mu, c1, c2, eps, -0.5f, n, true, true);
}

static void adagrad_momentum(const tl_emb_optimizer *o, float lr, float *restrict w, const float *restrict g,
                             float *restrict a, float *restrict m, int64_t n)
{
    float c1 = o->beta2 == 1.0f ? 1.0f : o->beta2;
    float c2 = o->beta2 == 1.0f ? 1.0f : 1.0f - o->beta2;
    if (o->exponent == 2.0f) {
        if (o->use_nesterov)
            adagrad_momentum_sqrt_nesterov_f(w, g, a, m, lr, o->momentum, c1, c2, o->epsilon, n);
        else
            adagrad_momentum_sqrt_f(w, g, a, m, lr, o->momentum, c1, c2, o->epsilon, n);
    } else {
        float e = -1.0f / o->exponent;
        if (o->use_nesterov)
            adagrad_momentum_body(w, g, a, m, lr, o->momentum, c1, c2, o->epsilon, e, n, true, false);
        else
            adagrad_momentum_body(w, g, a, m, lr, o->momentum, c1, c2, o->epsilon, e, n, false, false);
    }
}

/* cap and max_d are +inf when the option is 0 (no cap). */
EMB_INLINE void bounded_adagrad_body(float *restrict w, const float *restrict g, float *restrict a, float lr,
                                     float cap, float max_d, int64_t n, const bool first)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float ai = a[i];
        float an = ai + gi * gi;
        an = an < cap ? an : cap;
        float d = lr * gi / sqrtf(first ? an : ai);
        d = d < -max_d ? -max_d : d;
        d = d > max_d ? max_d : d;
        w[i] -= d;
        a[i] = an;
    }
}

TL_VECTOR_CLONES static void bounded_adagrad_first_f(float *restrict w, const float *restrict g, float *restrict a,
                                                     float lr, float cap, float max_d, int64_t n)
{
    bounded_adagrad_body(w, g, a, lr, cap, max_d, n, true);
}

TL_VECTOR_CLONES static void bounded_adagrad_f(float *restrict w, const float *restrict g, float *restrict a, float lr,
                                               float cap, float max_d, int64_t n)
{
    bounded_adagrad_body(w, g, a, lr, cap, max_d, n, false);
}

/* step is max(step_counter, 1). */
EMB_INLINE void f2a_body(float *restrict w, const float *restrict g, float *restrict a, float *restrict c, float lr,
                         float step, float p, float max_mult, float decay, float init, float l1, float l2, int64_t n,
                         const bool half)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i], wi = w[i];
        float ci = c[i] + 1.0f;
        float ai = decay * a[i] + gi * gi;
        ai = ai < init ? init : ai;
        float ratio = step / ci;
        float scale = half ? sqrtf(ratio) : powf(ratio, p);
        scale = scale < max_mult ? scale : max_mult;
        float u = scale * gi / sqrtf(ai) + l1 * sign_f(wi) + l2 * wi;
        c[i] = ci;
        a[i] = ai;
        w[i] = wi - lr * u;
    }
}

TL_VECTOR_CLONES static void f2a_sqrt_f(float *restrict w, const float *restrict g, float *restrict a,
                                        float *restrict c, float lr, float step, float max_mult, float decay,
                                        float init, float l1, float l2, int64_t n)
{
    f2a_body(w, g, a, c, lr, step, 0.5f, max_mult, decay, init, l1, l2, n, true);
}

static void f2a(const tl_emb_optimizer *o, const tl_emb_step *st, float *restrict w, const float *restrict g,
                float *restrict a, float *restrict c, int64_t n)
{
    float lr = st->learning_rate;
    float step = st->step_counter > 1.0f ? st->step_counter : 1.0f;
    float l1 = o->l1_regularization_strength, l2 = o->l2_regularization_strength;
    if (o->probability_exponent == 0.5f)
        f2a_sqrt_f(w, g, a, c, lr, step, o->max_lr_multiplier, o->accumulator_decay, o->initial_accumulator_value,
                   l1, l2, n);
    else
        f2a_body(w, g, a, c, lr, step, o->probability_exponent, o->max_lr_multiplier, o->accumulator_decay,
                 o->initial_accumulator_value, l1, l2, n, false);
}

/* k = -learning_rate_power; l1s = l1 * (mult ? lr : 1); two_l2 = 2*l2
 * (normal) or 2*lr*l2 (mult). */
EMB_INLINE void ftrl_body(float *restrict w, const float *restrict g, float *restrict a, float *restrict lin, float lr,
                          float k, float l1s, float two_l2, float beta, int64_t n, const bool mult, const bool half)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i], wi = w[i], ai = a[i];
        float an = ai + gi * gi;
        float p_new = half ? sqrtf(an) : powf(an, k);
        float p_old = half ? sqrtf(ai) : powf(ai, k);
        float d = p_new - p_old;
        float li, den;
        if (mult) {
            li = lin[i] + lr * gi - d * wi;
            den = p_new + two_l2 + beta;
        } else {
            li = lin[i] + gi - d / lr * wi;
            den = (p_new + beta) / lr + two_l2;
        }
        float cl = li < -l1s ? -l1s : li;
        cl = cl > l1s ? l1s : cl;
        /* den == 0 (a = g = beta = l2 = 0) keeps w. The division under the
         * condition is vectorised with AVX-512's masks; for SSE2 and AVX2
         * GCC wants -fno-trapping-math (every rewrite without a condition
         * is folded back into one). */
        w[i] = den != 0.0f ? (cl - li) / den : wi;
        lin[i] = li;
        a[i] = an;
    }
}

TL_VECTOR_CLONES static void ftrl_sqrt_f(float *restrict w, const float *restrict g, float *restrict a,
                                         float *restrict lin, float lr, float l1s, float two_l2, float beta, int64_t n)
{
    ftrl_body(w, g, a, lin, lr, 0.5f, l1s, two_l2, beta, n, false, true);
}

TL_VECTOR_CLONES static void ftrl_sqrt_mult_f(float *restrict w, const float *restrict g, float *restrict a,
                                              float *restrict lin, float lr, float l1s, float two_l2, float beta,
                                              int64_t n)
{
    ftrl_body(w, g, a, lin, lr, 0.5f, l1s, two_l2, beta, n, true, true);
}

static void ftrl(const tl_emb_optimizer *o, float lr, float *restrict w, const float *restrict g, float *restrict a,
                 float *restrict lin, int64_t n)
{
    float k = -o->learning_rate_power;
    float l1 = o->l1_regularization_strength, l2 = o->l2_regularization_strength;
    if (o->multiply_linear_by_lr) {
        float l1s = l1 * lr, two_l2 = 2.0f * lr * l2;
        if (k == 0.5f)
            ftrl_sqrt_mult_f(w, g, a, lin, lr, l1s, two_l2, o->beta, n);
        else
            ftrl_body(w, g, a, lin, lr, k, l1s, two_l2, o->beta, n, true, false);
    } else {
        float two_l2 = 2.0f * l2;
        if (k == 0.5f)
            ftrl_sqrt_f(w, g, a, lin, lr, l1, two_l2, o->beta, n);
        else
            ftrl_body(w, g, a, lin, lr, k, l1, two_l2, o->beta, n, false, false);
    }
}

/* Adam with use_sum_inside_sqrt; the moving averages as the dense kernel
 * writes them. eps2 = epsilon^2. */
TL_VECTOR_CLONES static void adam_sum_inside_f(float *restrict w, const float *restrict g, float *restrict m,
                                               float *restrict v, float lr, float one_minus_b1, float one_minus_b2,
                                               float eps2, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = m[i] + (gi - m[i]) * one_minus_b1;
        float vi = v[i] + (gi * gi - v[i]) * one_minus_b2;
        m[i] = mi;
        v[i] = vi;
        w[i] -= mi * lr / sqrtf(vi + eps2);
    }
}

TL_VECTOR_CLONES static void lion_f(float *restrict w, const float *restrict g, float *restrict m, float lr, float b1,
                                    float b2, int64_t n)
{
    float omb1 = 1.0f - b1, omb2 = 1.0f - b2;
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i], mi = m[i];
        float c = b1 * mi + omb1 * gi;
        w[i] -= lr * sign_f(c);
        m[i] = b2 * mi + omb2 * gi;
    }
}

TL_VECTOR_CLONES static void adadelta_f(float *restrict w, const float *restrict g, float *restrict acc,
                                        float *restrict upd, float lr, float rho, float eps, int64_t n)
{
    float omr = 1.0f - rho;
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float ai = rho * acc[i] + omr * (gi * gi);
        float u = sqrtf(upd[i] + eps) / sqrtf(ai + eps) * gi;
        acc[i] = ai;
        upd[i] = rho * upd[i] + omr * (u * u);
        w[i] -= lr * u;
    }
}

/* The proximal step of ProximalAdagrad and ProximalYogi:
 * sign(x) * max(|x| - e*l1, 0) / (1 + e*l2). With l1 = 0 it is x/(1 + e*l2)
 * and with l1 = l2 = 0 it is x, bit for bit (|x| - 0 = |x|, sign(x)*|x| = x,
 * x/1 = x), so the one formula covers ProximalYogi's three cases. */
EMB_INLINE float shrink(float x, float e, float l1, float l2)
{
    float y = fabsf(x) - e * l1;
    y = y > 0.0f ? y : 0.0f;
    return sign_f(x) * y / (1.0f + e * l2);
}

TL_VECTOR_CLONES static void proximal_adagrad_f(float *restrict w, const float *restrict g, float *restrict a,
                                                float lr, float l1, float l2, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float ai = a[i] + gi * gi;
        float e = lr / sqrtf(ai);
        a[i] = ai;
        w[i] = shrink(w[i] - e * gi, e, l1, l2);
    }
}

TL_VECTOR_CLONES static void proximal_yogi_f(float *restrict w, const float *restrict g, float *restrict v,
                                             float *restrict m, float lr, float b1, float b2, float eps, float l1,
                                             float l2, int64_t n)
{
    float omb1 = 1.0f - b1, omb2 = 1.0f - b2;
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i], g2 = gi * gi, vi = v[i];
        float mi = b1 * m[i] + omb1 * gi;
        vi = vi + omb2 * sign_f(g2 - vi) * g2;
        float e = lr / (sqrtf(vi) + eps);
        m[i] = mi;
        v[i] = vi;
        w[i] = shrink(w[i] - e * mi, e, l1, l2);
    }
}

/* step: the global step, passed as the learning rate. The table is one
 * wide, so this loop is not worth vectorising. */
static void frequency_estimator_f(float *restrict w, float *restrict last, float step, float tau,
                                                   float max_delta, float threshold, int64_t n)
{
    float omt = 1.0f - tau;
    for (int64_t i = 0; i < n; i++) {
        float wi = w[i];
        float d = step - last[i];
        float dc = d < max_delta ? d : max_delta;
        float smooth = omt * wi + tau * dc;
        w[i] = d >= threshold * wi ? dc : smooth;
        last[i] = step;
    }
}

/* ---- one row ------------------------------------------------------------ */

static void apply_rule(const tl_emb_optimizer *o, const tl_emb_step *st, float *restrict w, float *restrict g,
                       float *const *s, int64_t n)
{
    float lr = st->learning_rate;
    switch (o->algorithm) {
    case TL_EMB_SGD:
        tl_optim_sgd_f(w, g, lr, n);
        break;
    case TL_EMB_ADAGRAD:
        tl_optim_adagrad_f(w, g, s[0], lr, n);
        break;
    case TL_EMB_ADAGRAD_MOMENTUM:
        adagrad_momentum(o, lr, w, g, s[0], s[1], n);
        break;
    case TL_EMB_BOUNDED_ADAGRAD: {
        float cap = o->max_accumulator > 0.0f ? o->max_accumulator : INFINITY;
        float max_d = o->max_var_update > 0.0f ? o->max_var_update : INFINITY;
        if (o->update_accumulator_first)
            bounded_adagrad_first_f(w, g, s[0], lr, cap, max_d, n);
        else
            bounded_adagrad_f(w, g, s[0], lr, cap, max_d, n);
        break;
    }
    case TL_EMB_FREQUENCY_AWARE_ADAGRAD:
        f2a(o, st, w, g, s[0], s[1], n);
        break;
    case TL_EMB_FTRL:
        ftrl(o, lr, w, g, s[0], s[1], n);
        break;
    case TL_EMB_ADAM:
        if (o->use_sum_inside_sqrt)
            adam_sum_inside_f(w, g, s[0], s[1], lr, 1.0f - o->beta1, 1.0f - o->beta2, o->epsilon * o->epsilon, n);
        else
            tl_optim_adam_f(w, g, s[0], s[1], lr, 1.0f - o->beta1, 1.0f - o->beta2, o->epsilon, n);
        break;
    case TL_EMB_MOMENTUM:
        if (o->use_nesterov)
            tl_optim_nesterov_f(w, g, s[0], lr, o->momentum, n);
        else
            tl_optim_momentum_f(w, g, s[0], lr, o->momentum, n);
        break;
    case TL_EMB_LION:
        lion_f(w, g, s[0], lr, o->beta1, o->beta2, n);
        break;
    case TL_EMB_RMSPROP:
        tl_optim_rmsprop_f(w, g, s[0], s[1], lr, 1.0f - o->rho, o->momentum, o->epsilon, n);
        break;
    case TL_EMB_CENTERED_RMSPROP:
        tl_optim_rmsprop_centered_f(w, g, s[0], s[1], s[2], lr, 1.0f - o->rho, o->momentum, o->epsilon, n);
        break;
    case TL_EMB_ADADELTA:
        adadelta_f(w, g, s[0], s[1], lr, o->rho, o->epsilon, n);
        break;
    case TL_EMB_PROXIMAL_ADAGRAD:
        proximal_adagrad_f(w, g, s[0], lr, o->l1_regularization_strength, o->l2_regularization_strength, n);
        break;
    case TL_EMB_PROXIMAL_YOGI:
        proximal_yogi_f(w, g, s[0], s[1], lr, o->beta1, o->beta2, o->epsilon, o->l1_regularization_strength,
                        o->l2_regularization_strength, n);
        break;
    case TL_EMB_FREQUENCY_ESTIMATOR:
        frequency_estimator_f(w, s[0], lr, o->tau, o->max_delta, o->outlier_threshold, n);
        break;
    case TL_EMB_ASSIGN:
        memcpy(w, g, (size_t)n * sizeof *w);
        break;
    case TL_EMB_USER_DEFINED:
        o->user_fn(g, w, s, o->user_num_slots, lr, (int)n, o->user);
        break;
    default:
        TL_ASSERT(!"tl_emb_update_row: algorithm not implemented (the optimizer was not validated)");
    }
}

void tl_emb_update_row(const tl_emb_optimizer *o, const tl_emb_step *st, float *w, float *g, float *const *slots,
                       int dim)
{
    if (dim <= 0)
        return;
    int64_t n = dim;
    clamp_limits(&o->gradient_clipping_limits, g, n);
    if (o->weight_decay_factor != 0.0f) {
        float wd = o->weight_decay_factor;
        if (o->multiply_weight_decay_factor_by_learning_rate)
            wd *= st->learning_rate;
        decay_f(w, wd, n);
    }
    apply_rule(o, st, w, g, slots, n);
    clamp_limits(&o->clipping_limits, w, n);
}

TL_VECTOR_CLONES static void quantize_f(float *restrict x, float lo, float hi, float q, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
        x[i] = floorf((v - lo) / q + 0.5f) * q + lo;
    }
}

void tl_emb_quantize(const tl_emb_optimizer *o, float *x, int dim)
{
    if (!o->simulated_quantization.enabled || dim <= 0)
        return;
    float lo = o->simulated_quantization.clipping_limits.lower;
    float hi = o->simulated_quantization.clipping_limits.upper;
    float q = (hi - lo) / (float)(o->simulated_quantization.num_buckets - 1);
    quantize_f(x, lo, hi, q, dim);
}

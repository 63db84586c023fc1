/* apply.c — the per-element update kernels: float32 for training, and the
 * float64 reference twin.
 *
 * The float kernels are written for the auto-vectoriser: one loop per rule
 * (the kind, nesterov and centered switches are outside the loops), restrict
 * pointers, no branches or calls in the loop bodies except sqrtf. Whether a
 * loop is actually vectorised depends on the build: GCC needs
 * -fno-math-errno for the loops with sqrtf (otherwise sqrtf may set errno and
 * is a call), and at -O2 GCC 12's "very cheap" cost model declines loops
 * whose trip count is unknown; -O3, or -fvect-cost-model=dynamic, vectorises
 * all of them. Neither flag changes a result.
 *
 * The moving averages are written as TF's kernels write them,
 * x += (y - x) * (1 - beta); the twin writes the textbook
 * beta * x + (1 - beta) * y, so the two are independent transcriptions.
 */
#include <math.h>

#include "../base/base_int.h"
#include "optim_int.h"

/* ---- float32 ------------------------------------------------------------ */

/* These are the library's one copy of each rule: tl_optimizer_apply below
 * and the embedding rules of emb_rules.c both call them (optim_int.h). */

TL_VECTOR_CLONES void tl_optim_sgd_f(float *restrict p, const float *restrict g, float lr, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] -= g[i] * lr;
}

TL_VECTOR_CLONES void tl_optim_momentum_f(float *restrict p, const float *restrict g, float *restrict a, float lr,
                                         float mu, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float ai = a[i] * mu + g[i];
        a[i] = ai;
        p[i] -= ai * lr;
    }
}

TL_VECTOR_CLONES void tl_optim_nesterov_f(float *restrict p, const float *restrict g, float *restrict a, float lr,
                                         float mu, int64_t n)
{
    float mu_lr = mu * lr;
    for (int64_t i = 0; i < n; i++) {
        float ai = a[i] * mu + g[i];
        a[i] = ai;
        p[i] -= g[i] * lr + ai * mu_lr;
    }
}

TL_VECTOR_CLONES void tl_optim_adagrad_f(float *restrict p, const float *restrict g, float *restrict acc, float lr,
                                        int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float ai = acc[i] + gi * gi;
        acc[i] = ai;
        p[i] -= gi * lr / sqrtf(ai);
    }
}

TL_VECTOR_CLONES void tl_optim_adam_f(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                                     float lr_t, float one_minus_b1, float one_minus_b2, float eps, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = m[i] + (gi - m[i]) * one_minus_b1;
        float vi = v[i] + (gi * gi - v[i]) * one_minus_b2;
        m[i] = mi;
        v[i] = vi;
        p[i] -= mi * lr_t / (sqrtf(vi) + eps);
    }
}

TL_VECTOR_CLONES void tl_optim_rmsprop_f(float *restrict p, const float *restrict g, float *restrict ms,
                                        float *restrict mom, float lr, float one_minus_rho, float mu, float eps, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float si = ms[i] + (gi * gi - ms[i]) * one_minus_rho;
        float oi = mom[i] * mu + gi * lr / sqrtf(si + eps);
        ms[i] = si;
        mom[i] = oi;
        p[i] -= oi;
    }
}

TL_VECTOR_CLONES void tl_optim_rmsprop_centered_f(float *restrict p, const float *restrict g, float *restrict ms,
                                                 float *restrict mom, float *restrict mg, float lr, float one_minus_rho,
                                                 float mu, float eps, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float si = ms[i] + (gi * gi - ms[i]) * one_minus_rho;
        float ci = mg[i] + (gi - mg[i]) * one_minus_rho;
        float oi = mom[i] * mu + gi * lr / sqrtf((si - ci * ci) + eps);
        ms[i] = si;
        mg[i] = ci;
        mom[i] = oi;
        p[i] -= oi;
    }
}

void tl_optimizer_apply(const tl_optimizer_config *cfg, const tl_optimizer_step *st, float *param,
                        const float *grad, float *const *slots, int64_t n)
{
    if (n <= 0)
        return;
    float lr = (float)st->learning_rate;
    switch (cfg->kind) {
    case TL_OPTIM_SGD:
        tl_optim_sgd_f(param, grad, lr, n);
        break;
    case TL_OPTIM_MOMENTUM:
        if (cfg->use_nesterov)
            tl_optim_nesterov_f(param, grad, slots[0], lr, (float)cfg->momentum, n);
        else
            tl_optim_momentum_f(param, grad, slots[0], lr, (float)cfg->momentum, n);
        break;
    case TL_OPTIM_ADAGRAD:
        tl_optim_adagrad_f(param, grad, slots[0], lr, n);
        break;
    case TL_OPTIM_ADAM:
        tl_optim_adam_f(param, grad, slots[0], slots[1], (float)st->lr_t, (float)(1.0 - cfg->beta1),
               (float)(1.0 - cfg->beta2), (float)cfg->epsilon, n);
        break;
    case TL_OPTIM_RMSPROP:
        if (cfg->centered)
            tl_optim_rmsprop_centered_f(param, grad, slots[0], slots[1], slots[2], lr, (float)(1.0 - cfg->decay),
                               (float)cfg->momentum, (float)cfg->epsilon, n);
        else
            tl_optim_rmsprop_f(param, grad, slots[0], slots[1], lr, (float)(1.0 - cfg->decay), (float)cfg->momentum,
                      (float)cfg->epsilon, n);
        break;
    default:
        TL_ASSERT(!"tl_optimizer_apply: unknown optimizer kind (the config was not validated)");
    }
}

/* ---- float64 reference twin --------------------------------------------- */

void tl_optimizer_apply_ref(const tl_optimizer_config *cfg, const tl_optimizer_step *st, double *param,
                            const double *grad, double *const *slots, int64_t n)
{
    double lr = st->learning_rate;
    for (int64_t i = 0; i < n; i++) {
        double g = grad[i];
        switch (cfg->kind) {
        case TL_OPTIM_SGD:
            param[i] = param[i] - lr * g;
            break;
        case TL_OPTIM_MOMENTUM: {
            double mu = cfg->momentum;
            double a = mu * slots[0][i] + g;
            slots[0][i] = a;
            if (cfg->use_nesterov)
                param[i] = param[i] - (lr * g + lr * mu * a);
            else
                param[i] = param[i] - lr * a;
            break;
        }
        case TL_OPTIM_ADAGRAD: {
            double a = slots[0][i] + g * g;
            slots[0][i] = a;
            param[i] = param[i] - lr * g / sqrt(a);
            break;
        }
        case TL_OPTIM_ADAM: {
            double b1 = cfg->beta1, b2 = cfg->beta2;
            double m = b1 * slots[0][i] + (1.0 - b1) * g;
            double v = b2 * slots[1][i] + (1.0 - b2) * g * g;
            slots[0][i] = m;
            slots[1][i] = v;
            param[i] = param[i] - st->lr_t * m / (sqrt(v) + cfg->epsilon);
            break;
        }
        case TL_OPTIM_RMSPROP: {
            double rho = cfg->decay;
            double ms = rho * slots[0][i] + (1.0 - rho) * g * g;
            double denom = ms;
            if (cfg->centered) {
                double mg = rho * slots[2][i] + (1.0 - rho) * g;
                slots[2][i] = mg;
                denom = ms - mg * mg;
            }
            double mom = cfg->momentum * slots[1][i] + lr * g / sqrt(denom + cfg->epsilon);
            slots[0][i] = ms;
            slots[1][i] = mom;
            param[i] = param[i] - mom;
            break;
        }
        default:
            TL_ASSERT(!"tl_optimizer_apply_ref: unknown optimizer kind (the config was not validated)");
        }
    }
}

/* schedule.c — learning rates as pure functions of the global step, and the
 * per-step scalar prologue of an update. Everything here is double: these are
 * a handful of scalars per step, and the float kernels round them once. */
#include <math.h>

#include "../base/base_int.h"
#include "optim_int.h"

/* Python's math.pi, which TF's cosine_decay uses; M_PI is not C11. */
static const double pi = 3.141592653589793;

static const char *decay_name(tl_lr_kind kind)
{
    switch (kind) {
    case TL_LR_CONSTANT:
        return "constant";
    case TL_LR_EXPONENTIAL_DECAY:
        return "exponential_decay";
    case TL_LR_COSINE_DECAY:
        return "cosine_decay";
    default:
        return "unknown";
    }
}

tl_status tl_lr_schedule_check(const tl_lr_schedule *s, const char *who)
{
    if ((int)s->kind < 0 || (int)s->kind >= TL_LR_KIND_COUNT)
        return tl_error(TL_EINVAL,
                        "%s: learning-rate schedule kind %d is unknown; expected 0 (constant), "
                        "1 (exponential_decay) or 2 (cosine_decay)",
                        who, (int)s->kind);
    if (isnan(s->learning_rate))
        return tl_error(TL_EINVAL, "%s: learning_rate is not set", who);
    if (!(s->learning_rate >= 0.0) || !isfinite(s->learning_rate))
        return tl_error(TL_EINVAL, "%s: learning_rate must be >= 0 and finite; got %.10g", who, s->learning_rate);
    const char *fn = decay_name(s->kind);
    if (s->kind == TL_LR_EXPONENTIAL_DECAY || s->kind == TL_LR_COSINE_DECAY) {
        if (s->decay_steps < 1)
            return tl_error(TL_EINVAL, "%s: %s decay_steps must be >= 1; got %lld", who, fn,
                            (long long)s->decay_steps);
    }
    if (s->kind == TL_LR_EXPONENTIAL_DECAY) {
        if (!(s->decay_rate > 0.0) || !isfinite(s->decay_rate))
            return tl_error(TL_EINVAL, "%s: %s decay_rate must be > 0 and finite; got %.10g", who, fn, s->decay_rate);
    }
    if (s->kind == TL_LR_COSINE_DECAY) {
        if (!(s->alpha >= 0.0 && s->alpha <= 1.0))
            return tl_error(TL_EINVAL, "%s: %s alpha must be in [0, 1]; got %.10g", who, fn, s->alpha);
    }
    if (s->warmup_steps < 0)
        return tl_error(TL_EINVAL, "%s: warmup_steps must be >= 0; got %lld", who, (long long)s->warmup_steps);
    return TL_OK;
}

tl_status tl_lr_schedule_validate(const tl_lr_schedule *s)
{
    return tl_lr_schedule_check(s, "learning rate");
}

/* The decay alone, without warmup. */
static double decayed(const tl_lr_schedule *s, int64_t step)
{
    double lr = s->learning_rate;
    switch (s->kind) {
    case TL_LR_EXPONENTIAL_DECAY: {
        double p = (double)step / (double)s->decay_steps;
        if (s->staircase)
            p = floor(p);
        return lr * pow(s->decay_rate, p);
    }
    case TL_LR_COSINE_DECAY: {
        int64_t t = step < s->decay_steps ? step : s->decay_steps;
        double frac = (double)t / (double)s->decay_steps;
        double cosine = 0.5 * (1.0 + cos(pi * frac));
        return lr * ((1.0 - s->alpha) * cosine + s->alpha);
    }
    case TL_LR_CONSTANT:
    default:
        return lr;
    }
}

double tl_lr_schedule_value(const tl_lr_schedule *s, int64_t step)
{
    if (step < 0)
        step = 0;
    /* BERT's rule: the initial rate ramped by step / W, then the decay at
     * the unshifted step (see optim.h). */
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        return s->learning_rate * ((double)step / (double)s->warmup_steps);
    return decayed(s, step);
}

tl_status tl_optimizer_step_prepare(const tl_optimizer_config *cfg, int64_t step, tl_optimizer_step *st)
{
    *st = (tl_optimizer_step){0};
    tl_status rc = tl_optimizer_config_validate(cfg);
    if (rc != TL_OK)
        return rc;
    if (step < 0)
        return tl_error(TL_EINVAL, "%s: global_step must be >= 0; got %lld", tl_optimizer_kind_name(cfg->kind),
                        (long long)step);
    st->step = step;
    st->learning_rate = tl_lr_schedule_value(&cfg->lr, step);
    st->lr_t = st->learning_rate;
    if (cfg->kind == TL_OPTIM_ADAM) {
        /* TF's beta powers start at beta and are multiplied after each
         * update, so update step + 1 sees beta^(step + 1). */
        double t = (double)step + 1.0;
        st->beta1_power = pow(cfg->beta1, t);
        st->beta2_power = pow(cfg->beta2, t);
        st->lr_t = st->learning_rate * sqrt(1.0 - st->beta2_power) / (1.0 - st->beta1_power);
    }
    return TL_OK;
}

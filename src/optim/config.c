/* config.c — optimizer configurations: TensorFlow's defaults, validation,
 * names, and the slot table. */
#include <math.h>
#include <strings.h>

#include "../base/base_int.h"
#include "optim_int.h"

/* One row per kind: TF's optimizer name and its class, for messages. */
static const struct {
    const char *name;
    const char *tf_class;
} kinds[TL_OPTIM_KIND_COUNT] = {
    [TL_OPTIM_SGD] = {"GradientDescent", "tf.compat.v1.train.GradientDescentOptimizer"},
    [TL_OPTIM_MOMENTUM] = {"Momentum", "tf.compat.v1.train.MomentumOptimizer"},
    [TL_OPTIM_ADAGRAD] = {"Adagrad", "tf.compat.v1.train.AdagradOptimizer"},
    [TL_OPTIM_ADAM] = {"Adam", "tf.compat.v1.train.AdamOptimizer"},
    [TL_OPTIM_RMSPROP] = {"RMSProp", "tf.compat.v1.train.RMSPropOptimizer"},
};

static bool kind_known(tl_optimizer_kind kind)
{
    return (int)kind >= 0 && (int)kind < TL_OPTIM_KIND_COUNT;
}

void tl_optimizer_config_default(tl_optimizer_kind kind, tl_optimizer_config *cfg)
{
    *cfg = (tl_optimizer_config){0};
    cfg->kind = kind;
    cfg->lr.kind = TL_LR_CONSTANT;
    /* TF v1 makes learning_rate a required argument of every optimizer but
     * Adam; NAN is "not set", which validation reports. */
    cfg->lr.learning_rate = NAN;
    switch (kind) {
    case TL_OPTIM_SGD:
        break;
    case TL_OPTIM_MOMENTUM:
        cfg->momentum = NAN; /* required in TF too */
        cfg->use_nesterov = false;
        break;
    case TL_OPTIM_ADAGRAD:
        cfg->initial_accumulator_value = 0.1;
        break;
    case TL_OPTIM_ADAM:
        cfg->lr.learning_rate = 0.001;
        cfg->beta1 = 0.9;
        cfg->beta2 = 0.999;
        cfg->epsilon = 1e-8;
        break;
    case TL_OPTIM_RMSPROP:
        cfg->decay = 0.9;
        cfg->momentum = 0.0;
        cfg->epsilon = 1e-10;
        cfg->centered = false;
        break;
    default:
        break;
    }
}

const char *tl_optimizer_kind_name(tl_optimizer_kind kind)
{
    return kind_known(kind) ? kinds[kind].name : "unknown";
}

tl_status tl_optimizer_kind_parse(const char *name, tl_optimizer_kind *kind)
{
    if (name != NULL) {
        for (int k = 0; k < TL_OPTIM_KIND_COUNT; k++) {
            if (strcasecmp(name, kinds[k].name) == 0) {
                *kind = (tl_optimizer_kind)k;
                return TL_OK;
            }
        }
        if (strcasecmp(name, "sgd") == 0) {
            *kind = TL_OPTIM_SGD;
            return TL_OK;
        }
    }
    return tl_error(TL_EINVAL,
                    "optimizer '%s' is unknown; expected GradientDescent (or sgd), Momentum, Adagrad, Adam or RMSProp",
                    name != NULL ? name : "(null)");
}

/* x is in [lo, hi], or [lo, hi) when hi_open; NAN is never in range. */
static bool in_range(double x, double lo, double hi, bool hi_open)
{
    return x >= lo && (hi_open ? x < hi : x <= hi);
}

tl_status tl_optimizer_config_validate(const tl_optimizer_config *cfg)
{
    if (!kind_known(cfg->kind))
        return tl_error(TL_EINVAL,
                        "optimizer kind %d is unknown; expected 0 (GradientDescent), 1 (Momentum), 2 (Adagrad), "
                        "3 (Adam) or 4 (RMSProp)",
                        (int)cfg->kind);
    const char *name = kinds[cfg->kind].name;
    if (isnan(cfg->lr.learning_rate))
        return tl_error(TL_EINVAL, "%s: learning_rate is not set (%s has no default)", name,
                        kinds[cfg->kind].tf_class);
    tl_status st = tl_lr_schedule_check(&cfg->lr, name);
    if (st != TL_OK)
        return st;

    switch (cfg->kind) {
    case TL_OPTIM_SGD:
        break;
    case TL_OPTIM_MOMENTUM:
        if (isnan(cfg->momentum))
            return tl_error(TL_EINVAL, "%s: momentum is not set (%s has no default)", name,
                            kinds[cfg->kind].tf_class);
        if (!in_range(cfg->momentum, 0.0, 1.0, false))
            return tl_error(TL_EINVAL, "%s: momentum must be in [0, 1]; got %.10g", name, cfg->momentum);
        break;
    case TL_OPTIM_ADAGRAD:
        /* TF: "initial_accumulator_value must be positive". The accumulator
         * is the divisor's square, and ApplyAdagrad has no epsilon. */
        if (!(cfg->initial_accumulator_value > 0.0) || !isfinite(cfg->initial_accumulator_value))
            return tl_error(TL_EINVAL, "%s: initial_accumulator_value must be positive and finite; got %.10g", name,
                            cfg->initial_accumulator_value);
        break;
    case TL_OPTIM_ADAM:
        if (!in_range(cfg->beta1, 0.0, 1.0, true))
            return tl_error(TL_EINVAL, "%s: beta1 must be in [0, 1); got %.10g", name, cfg->beta1);
        if (!in_range(cfg->beta2, 0.0, 1.0, true))
            return tl_error(TL_EINVAL, "%s: beta2 must be in [0, 1); got %.10g", name, cfg->beta2);
        if (!(cfg->epsilon > 0.0) || !isfinite(cfg->epsilon))
            return tl_error(TL_EINVAL, "%s: epsilon must be positive and finite; got %.10g", name, cfg->epsilon);
        break;
    case TL_OPTIM_RMSPROP:
        if (!in_range(cfg->decay, 0.0, 1.0, false))
            return tl_error(TL_EINVAL, "%s: decay must be in [0, 1]; got %.10g", name, cfg->decay);
        if (!in_range(cfg->momentum, 0.0, 1.0, false))
            return tl_error(TL_EINVAL, "%s: momentum must be in [0, 1]; got %.10g", name, cfg->momentum);
        if (!(cfg->epsilon > 0.0) || !isfinite(cfg->epsilon))
            return tl_error(TL_EINVAL, "%s: epsilon must be positive and finite; got %.10g", name, cfg->epsilon);
        break;
    default:
        break;
    }
    return TL_OK;
}

int tl_optimizer_num_slots(const tl_optimizer_config *cfg)
{
    switch (cfg->kind) {
    case TL_OPTIM_SGD:
        return 0;
    case TL_OPTIM_MOMENTUM:
    case TL_OPTIM_ADAGRAD:
        return 1;
    case TL_OPTIM_ADAM:
        return 2;
    case TL_OPTIM_RMSPROP:
        return cfg->centered ? 3 : 2;
    default:
        return 0;
    }
}

const char *tl_optimizer_slot_name(const tl_optimizer_config *cfg, int i)
{
    if (i < 0 || i >= tl_optimizer_num_slots(cfg))
        return NULL;
    switch (cfg->kind) {
    case TL_OPTIM_MOMENTUM:
        return "momentum";
    case TL_OPTIM_ADAGRAD:
        return "accumulator";
    case TL_OPTIM_ADAM:
        return i == 0 ? "m" : "v";
    case TL_OPTIM_RMSPROP:
        return i == 0 ? "rms" : i == 1 ? "momentum" : "mg";
    default:
        return NULL;
    }
}

double tl_optimizer_slot_init(const tl_optimizer_config *cfg, int i)
{
    if (i < 0 || i >= tl_optimizer_num_slots(cfg))
        return NAN;
    if (cfg->kind == TL_OPTIM_ADAGRAD)
        return cfg->initial_accumulator_value;
    if (cfg->kind == TL_OPTIM_RMSPROP && i == 0)
        return 1.0; /* v1 RMSPropOptimizer: "rms" uses ones_initializer */
    return 0.0;
}

void tl_optimizer_init_slots(const tl_optimizer_config *cfg, float *const *slots, int64_t n)
{
    int k = tl_optimizer_num_slots(cfg);
    for (int i = 0; i < k; i++) {
        float v = (float)tl_optimizer_slot_init(cfg, i);
        float *s = slots[i];
        for (int64_t j = 0; j < n; j++)
            s[j] = v;
    }
}

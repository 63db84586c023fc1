/* emb_config.c — TPU embedding optimizers (OptimizationParameters):
 * TensorFlow's defaults, validation with its messages, the algorithm names,
 * the slot table of GetOptimizationAlgorithmStateVariables, and the
 * per-step resolution of dynamic learning rates. The per-row math is in
 * emb_rules.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../base/base_int.h"
#include "tpuloop/emb_optim.h"

/* One row per algorithm: GetOptimizationAlgorithmName, the proto's oneof
 * field name (accepted by tl_emb_algorithm_parse), and the slots in
 * load/retrieve order (spec §2.4). UserDefinedProgram's slots come from the
 * optimizer. */
static const struct {
    const char *name;
    const char *field;
    int nslots;
    const char *slots[3];
} algs[TL_EMB_ALGORITHM_COUNT] = {
    [TL_EMB_OPT_NONE] = {"None", NULL, 0, {NULL}},
    [TL_EMB_SGD] = {"StochasticGradientDescent", "stochastic_gradient_descent", 0, {NULL}},
    [TL_EMB_ADAGRAD] = {"Adagrad", "adagrad", 1, {"accumulators"}},
    [TL_EMB_ADAGRAD_MOMENTUM] = {"AdagradMomentum", "adagrad_momentum", 2, {"accumulators", "momenta"}},
    [TL_EMB_BOUNDED_ADAGRAD] = {"BoundedAdagrad", "bounded_adagrad", 1, {"accumulators"}},
    [TL_EMB_FREQUENCY_AWARE_ADAGRAD] = {"FrequencyAwareAdagrad", "frequency_aware_adagrad", 2,
                                        {"accumulators", "counters"}},
    [TL_EMB_FTRL] = {"FTRL", "ftrl", 2, {"accumulators", "linears"}},
    [TL_EMB_ADAM] = {"ADAM", "adam", 2, {"momenta", "velocities"}},
    [TL_EMB_MOMENTUM] = {"Momentum", "momentum", 1, {"momenta"}},
    [TL_EMB_LION] = {"Lion", "lion", 1, {"momenta"}},
    [TL_EMB_RMSPROP] = {"RMSProp", "rms_prop", 2, {"ms", "mom"}},
    [TL_EMB_CENTERED_RMSPROP] = {"CenteredRMSProp", "centered_rms_prop", 3, {"ms", "mom", "mg"}},
    [TL_EMB_MDL_ADAGRAD_LIGHT] = {"MDLAdagradLight", "mdl_adagrad_light", 3, {"accumulators", "weights", "benefits"}},
    [TL_EMB_ADADELTA] = {"Adadelta", "adadelta", 2, {"accumulators", "updates"}},
    [TL_EMB_PROXIMAL_ADAGRAD] = {"ProximalAdagrad", "proximal_adagrad", 1, {"accumulators"}},
    [TL_EMB_ONLINE_YOGI] = {"OnlineYogi", "online_yogi", 2, {"vs", "linears"}},
    [TL_EMB_PROXIMAL_YOGI] = {"ProximalYogi", "proximal_yogi", 2, {"v", "m"}},
    [TL_EMB_FREQUENCY_ESTIMATOR] = {"FrequencyEstimator", "frequency_estimator", 1, {"last_hit_step"}},
    [TL_EMB_USER_DEFINED] = {"UserDefinedProgram", "user_defined_program", 0, {NULL}},
    [TL_EMB_ASSIGN] = {"Assign", "assign", 0, {NULL}},
};

static const char *const user_slot_names[TL_EMB_MAX_SLOTS] = {"Slot_0", "Slot_1", "Slot_2", "Slot_3",
                                                              "Slot_4", "Slot_5", "Slot_6"};

static bool alg_known(tl_emb_algorithm a)
{
    return (int)a >= 0 && (int)a < TL_EMB_ALGORITHM_COUNT;
}

void tl_emb_optimizer_default(tl_emb_algorithm algorithm, tl_emb_optimizer *o)
{
    *o = (tl_emb_optimizer){0};
    o->algorithm = algorithm;
    o->learning_rate = 0.01f;
    o->lr_tag = -1;
    o->step_counter_tag = -1;
    o->gradient_accumulation_status = TL_EMB_ACCUM_UNSPECIFIED;
    o->initial_accumulator_value = 0.1f;
    switch (algorithm) {
    case TL_EMB_ADAGRAD:
    case TL_EMB_FTRL:
        o->learning_rate = 0.001f;
        o->learning_rate_power = -0.5f;
        break;
    case TL_EMB_ADAGRAD_MOMENTUM:
        o->learning_rate = 0.001f;
        o->exponent = 2.0f;
        o->beta2 = 1.0f;
        o->epsilon = 1e-10f;
        break;
    case TL_EMB_ADAM:
        o->learning_rate = 0.001f;
        o->beta1 = 0.9f;
        o->beta2 = 0.999f;
        o->epsilon = 1e-7f;
        o->use_sum_inside_sqrt = true;
        break;
    case TL_EMB_LION:
        o->beta1 = 0.9f;
        o->beta2 = 0.99f;
        break;
    case TL_EMB_PROXIMAL_YOGI:
        o->beta1 = 0.9f;
        o->beta2 = 0.999f;
        o->epsilon = 1e-3f;
        o->initial_accumulator_value = 1e-6f;
        break;
    case TL_EMB_RMSPROP:
    case TL_EMB_CENTERED_RMSPROP:
        o->rho = 0.9f;
        o->epsilon = 1e-10f;
        break;
    case TL_EMB_ADADELTA:
        o->rho = 0.95f;
        o->epsilon = 1e-6f;
        break;
    case TL_EMB_FREQUENCY_AWARE_ADAGRAD:
        o->max_lr_multiplier = 10.0f;
        o->probability_exponent = 0.5f;
        o->accumulator_decay = 1.0f;
        /* The step counter is a DynamicHyperParameter message; absent, its
         * tag reads as proto3's 0. */
        o->step_counter_tag = 0;
        break;
    case TL_EMB_FREQUENCY_ESTIMATOR:
        /* FrequencyEstimatorParameters(tau, max_delta, outlier_threshold,
         * weight_exponent) has no defaults: NAN is "not set", which
         * validation reports. */
        o->tau = NAN;
        o->max_delta = NAN;
        o->outlier_threshold = NAN;
        o->weight_exponent = NAN;
        break;
    default:
        break;
    }
}

const char *tl_emb_algorithm_name(tl_emb_algorithm a)
{
    return alg_known(a) ? algs[a].name : "unknown";
}

tl_status tl_emb_algorithm_parse(const char *name, tl_emb_algorithm *out)
{
    if (name != NULL) {
        for (int a = 1; a < TL_EMB_ALGORITHM_COUNT; a++) {
            if (strcasecmp(name, algs[a].name) == 0 || strcasecmp(name, algs[a].field) == 0) {
                *out = (tl_emb_algorithm)a;
                return TL_OK;
            }
        }
        /* Spellings users write: Keras' "sgd", and rmsprop without the
         * proto's underscore. */
        static const struct {
            const char *name;
            tl_emb_algorithm a;
        } aliases[] = {{"sgd", TL_EMB_SGD}, {"centered_rmsprop", TL_EMB_CENTERED_RMSPROP}};
        for (size_t i = 0; i < TL_ARRAY_LEN(aliases); i++) {
            if (strcasecmp(name, aliases[i].name) == 0) {
                *out = aliases[i].a;
                return TL_OK;
            }
        }
    }
    return tl_error(TL_EINVAL,
                    "embedding optimizer '%s' is unknown; expected one of Adagrad, AdagradMomentum, BoundedAdagrad, "
                    "FrequencyAwareAdagrad, StochasticGradientDescent (sgd), FTRL, ADAM, Momentum, Lion, RMSProp, "
                    "CenteredRMSProp, MDLAdagradLight, Adadelta, ProximalAdagrad, OnlineYogi, ProximalYogi, "
                    "FrequencyEstimator, UserDefinedProgram, Assign (any case, or the proto's snake_case field "
                    "names: adagrad_momentum, rms_prop, ...)",
                    name != NULL ? name : "(null)");
}

bool tl_emb_optimizer_is_lazy(const tl_emb_optimizer *o)
{
    return !((o->algorithm == TL_EMB_ADAM || o->algorithm == TL_EMB_LION) && o->use_non_lazy);
}

bool tl_emb_optimizer_accumulates(const tl_emb_optimizer *o)
{
    return o->gradient_accumulation_status == TL_EMB_ACCUM_UNSPECIFIED ||
           o->gradient_accumulation_status == TL_EMB_ACCUM_ENABLED;
}

/* ---- slots -------------------------------------------------------------- */

int tl_emb_num_slots(const tl_emb_optimizer *o)
{
    if (!alg_known(o->algorithm))
        return 0;
    if (o->algorithm == TL_EMB_USER_DEFINED)
        return o->user_num_slots < 0 ? 0 : o->user_num_slots > TL_EMB_MAX_SLOTS ? TL_EMB_MAX_SLOTS : o->user_num_slots;
    return algs[o->algorithm].nslots;
}

const char *tl_emb_slot_name(const tl_emb_optimizer *o, int i)
{
    if (i < 0 || i >= tl_emb_num_slots(o))
        return NULL;
    if (o->algorithm == TL_EMB_USER_DEFINED)
        return user_slot_names[i];
    return algs[o->algorithm].slots[i];
}

float tl_emb_slot_init(const tl_emb_optimizer *o, int i)
{
    if (i < 0 || i >= tl_emb_num_slots(o))
        return NAN;
    switch (o->algorithm) {
    case TL_EMB_ADAGRAD:
    case TL_EMB_BOUNDED_ADAGRAD:
    case TL_EMB_PROXIMAL_ADAGRAD:
        return o->initial_accumulator_value;
    case TL_EMB_FREQUENCY_AWARE_ADAGRAD: /* accumulators; counters start at 0 */
    case TL_EMB_FTRL:                    /* accumulators; linears start at 0 */
    case TL_EMB_PROXIMAL_YOGI:           /* v; m starts at 0 */
        return i == 0 ? o->initial_accumulator_value : 0.0f;
    case TL_EMB_USER_DEFINED:
        return o->slot_init[i];
    default:
        /* AdagradMomentum too: "both slots start at 0" (spec §3.2). */
        return 0.0f;
    }
}

/* ---- validation --------------------------------------------------------- */

/* A float as the shortest decimal that reads back as it, for messages:
 * "0.01" where %.9g prints 0.00999999978. The array lives until the end of
 * the full expression that calls fmt. */
typedef struct fstr {
    char s[32];
} fstr;

static fstr fmt(float x)
{
    fstr f;
    for (int p = 6; p <= 9; p++) {
        snprintf(f.s, sizeof f.s, "%.*g", p, (double)x);
        if (strtof(f.s, NULL) == x)
            break;
    }
    return f;
}

/* x in [lo, hi], or [lo, hi) when hi_open; NAN is never in range. */
static bool in_range(float x, float lo, float hi, bool hi_open)
{
    return x >= lo && (hi_open ? x < hi : x <= hi);
}

static bool positive(float x)
{
    return x > 0.0f && isfinite(x);
}

static bool nonneg(float x)
{
    return x >= 0.0f && isfinite(x);
}

static tl_status check_limits(const char *alg, const char *field, const tl_emb_limits *l)
{
    if ((l->has_lower && isnan(l->lower)) || (l->has_upper && isnan(l->upper)))
        return tl_error(TL_EINVAL, "%s: %s has a NaN bound (lower %s, upper %s)", alg, field, fmt(l->lower).s,
                        fmt(l->upper).s);
    if (l->has_lower && l->has_upper && l->lower > l->upper)
        return tl_error(TL_EINVAL, "%s: %s.lower (%s) must be <= %s.upper (%s)", alg, field, fmt(l->lower).s, field,
                        fmt(l->upper).s);
    return TL_OK;
}

/* The message of a bad hyperparameter: "<alg>: <field> must be <rule>; got <value>". */
static tl_status bad(const char *alg, const char *field, const char *rule, float value)
{
    return tl_error(TL_EINVAL, "%s: %s must be %s; got %s", alg, field, rule, fmt(value).s);
}

/* In check_algorithm: returns the error unless cond holds. */
#define CHECK(cond, field, rule, value)                 \
    do {                                                \
        if (!(cond))                                    \
            return bad(name, (field), (rule), (value)); \
    } while (0)

/* TF v2's Adagrad and FTRL reject a non-positive initial accumulator (the
 * message is TF's): it is the square of the first update's divisor. */
#define CHECK_INIT_ACC()                                                                                         \
    do {                                                                                                         \
        if (!positive(o->initial_accumulator_value))                                                             \
            return tl_error(TL_EINVAL, "%s: Argument `initial_accumulator_value` must be a positive float; got %s", \
                            name, fmt(o->initial_accumulator_value).s);                                         \
    } while (0)

/* Each algorithm's own ranges. */
static tl_status check_algorithm(const tl_emb_optimizer *o, const char *name)
{
    switch (o->algorithm) {
    case TL_EMB_ADAGRAD:
    case TL_EMB_BOUNDED_ADAGRAD:
        CHECK_INIT_ACC();
        if (o->algorithm == TL_EMB_BOUNDED_ADAGRAD) {
            CHECK(nonneg(o->max_var_update), "max_var_update", ">= 0 (0: no cap)", o->max_var_update);
            CHECK(nonneg(o->max_accumulator), "max_accumulator", ">= 0 (0: no cap)", o->max_accumulator);
        }
        break;
    case TL_EMB_ADAGRAD_MOMENTUM:
        CHECK(in_range(o->momentum, 0.0f, 1.0f, false), "momentum", "in [0, 1]", o->momentum);
        CHECK(positive(o->exponent), "exponent", "positive", o->exponent);
        CHECK(in_range(o->beta2, 0.0f, 1.0f, false), "beta2", "in [0, 1]", o->beta2);
        CHECK(positive(o->epsilon), "epsilon", "positive", o->epsilon);
        break;
    case TL_EMB_FREQUENCY_AWARE_ADAGRAD:
        CHECK_INIT_ACC();
        CHECK(nonneg(o->l1_regularization_strength), "l1_regularization_strength", ">= 0",
              o->l1_regularization_strength);
        CHECK(nonneg(o->l2_regularization_strength), "l2_regularization_strength", ">= 0",
              o->l2_regularization_strength);
        CHECK(positive(o->max_lr_multiplier), "max_lr_multiplier", "positive", o->max_lr_multiplier);
        CHECK(nonneg(o->probability_exponent), "probability_exponent", ">= 0", o->probability_exponent);
        CHECK(in_range(o->accumulator_decay, 0.0f, 1.0f, false), "accumulator_decay", "in [0, 1]",
              o->accumulator_decay);
        if (o->step_counter_tag < 0)
            return tl_error(TL_EINVAL,
                            "%s: step_counter_tag must be >= 0 (the step counter is a dynamic hyperparameter); "
                            "got %d",
                            name, o->step_counter_tag);
        break;
    case TL_EMB_FTRL:
        CHECK_INIT_ACC();
        CHECK(o->learning_rate_power <= 0.0f && isfinite(o->learning_rate_power), "learning_rate_power", "<= 0",
              o->learning_rate_power);
        CHECK(nonneg(o->l1_regularization_strength), "l1_regularization_strength", ">= 0",
              o->l1_regularization_strength);
        CHECK(nonneg(o->l2_regularization_strength), "l2_regularization_strength", ">= 0",
              o->l2_regularization_strength);
        CHECK(nonneg(o->beta), "beta", ">= 0", o->beta);
        /* Without multiply_linear_by_lr the update divides by lr. */
        if (!o->multiply_linear_by_lr && o->lr_tag < 0 && o->learning_rate == 0.0f)
            return tl_error(TL_EINVAL,
                            "%s: learning_rate must be positive without multiply_linear_by_lr (the update "
                            "divides by it); got 0",
                            name);
        break;
    case TL_EMB_ADAM:
    case TL_EMB_LION:
        CHECK(in_range(o->beta1, 0.0f, 1.0f, true), "beta1", "in [0, 1)", o->beta1);
        CHECK(in_range(o->beta2, 0.0f, 1.0f, true), "beta2", "in [0, 1)", o->beta2);
        if (o->algorithm == TL_EMB_ADAM)
            CHECK(positive(o->epsilon), "epsilon", "positive", o->epsilon);
        break;
    case TL_EMB_MOMENTUM:
        CHECK(in_range(o->momentum, 0.0f, 1.0f, false), "momentum", "in [0, 1]", o->momentum);
        break;
    case TL_EMB_RMSPROP:
    case TL_EMB_CENTERED_RMSPROP:
        CHECK(in_range(o->momentum, 0.0f, 1.0f, false), "momentum", "in [0, 1]", o->momentum);
        /* fall through */
    case TL_EMB_ADADELTA:
        CHECK(in_range(o->rho, 0.0f, 1.0f, false), "rho", "in [0, 1]", o->rho);
        CHECK(positive(o->epsilon), "epsilon", "positive", o->epsilon);
        break;
    case TL_EMB_PROXIMAL_ADAGRAD:
        CHECK_INIT_ACC();
        CHECK(nonneg(o->l1_regularization_strength), "l1_regularization_strength", ">= 0",
              o->l1_regularization_strength);
        CHECK(nonneg(o->l2_regularization_strength), "l2_regularization_strength", ">= 0",
              o->l2_regularization_strength);
        break;
    case TL_EMB_PROXIMAL_YOGI:
        CHECK(nonneg(o->initial_accumulator_value), "initial_accumulator_value", ">= 0",
              o->initial_accumulator_value);
        CHECK(nonneg(o->l1_regularization_strength), "l1_regularization_strength", ">= 0",
              o->l1_regularization_strength);
        CHECK(nonneg(o->l2_regularization_strength), "l2_regularization_strength", ">= 0",
              o->l2_regularization_strength);
        CHECK(in_range(o->beta1, 0.0f, 1.0f, true), "beta1", "in [0, 1)", o->beta1);
        CHECK(in_range(o->beta2, 0.0f, 1.0f, true), "beta2", "in [0, 1)", o->beta2);
        CHECK(positive(o->epsilon), "epsilon", "positive", o->epsilon);
        break;
    case TL_EMB_FREQUENCY_ESTIMATOR:
        if (isnan(o->tau) || isnan(o->max_delta) || isnan(o->outlier_threshold) || isnan(o->weight_exponent))
            return tl_error(TL_EINVAL,
                            "%s: tau, max_delta, outlier_threshold and weight_exponent are required "
                            "(FrequencyEstimatorParameters has no defaults); got %s, %s, %s, %s",
                            name, fmt(o->tau).s, fmt(o->max_delta).s, fmt(o->outlier_threshold).s,
                            fmt(o->weight_exponent).s);
        /* The proto documents tau in (0, 1) but TensorFlow checks nothing;
         * the readers warn outside it (emb_spec_finish) and accept it. */
        CHECK(isfinite(o->tau), "tau", "finite", o->tau);
        CHECK(positive(o->max_delta), "max_delta", "positive", o->max_delta);
        CHECK(nonneg(o->outlier_threshold), "outlier_threshold", ">= 0", o->outlier_threshold);
        CHECK(isfinite(o->weight_exponent), "weight_exponent", "finite", o->weight_exponent);
        break;
    case TL_EMB_USER_DEFINED:
        if (o->user_fn == NULL)
            return tl_error(TL_EINVAL, "%s: user_fn is NULL; a user-defined program needs its update function",
                            name);
        for (int i = 0; i < o->user_num_slots; i++)
            if (!isfinite(o->slot_init[i]))
                return tl_error(TL_EINVAL, "%s: slot_init[%d] must be finite; got %s", name, i,
                                fmt(o->slot_init[i]).s);
        break;
    default: /* SGD, Assign: no parameters */
        break;
    }
    return TL_OK;
}

#undef CHECK
#undef CHECK_INIT_ACC

tl_status tl_emb_optimizer_validate(const tl_emb_optimizer *o)
{
    if (o->algorithm == TL_EMB_OPT_NONE)
        return tl_error(TL_EINVAL, "No optimization algorithm specified");
    if (!alg_known(o->algorithm))
        return tl_error(TL_EINVAL, "embedding optimizer algorithm %d is unknown; expected 1..%d", (int)o->algorithm,
                        TL_EMB_ALGORITHM_COUNT - 1);
    const char *name = algs[o->algorithm].name;
    if (o->algorithm == TL_EMB_ONLINE_YOGI || o->algorithm == TL_EMB_MDL_ADAGRAD_LIGHT)
        return tl_error(TL_ENOTIMPL,
                        "Optimization algorithm %s is not implemented: TensorFlow has not published its update "
                        "(it runs only inside libtpu), and tpuloop will not guess it",
                        name);
    if ((int)o->gradient_accumulation_status < TL_EMB_ACCUM_UNSPECIFIED ||
        (int)o->gradient_accumulation_status > TL_EMB_ACCUM_DISABLED)
        return tl_error(TL_EINVAL,
                        "%s: gradient_accumulation_status must be 0 (UNSPECIFIED), 1 (ENABLED) or 2 (DISABLED); "
                        "got %d",
                        name, (int)o->gradient_accumulation_status);
    if (o->algorithm == TL_EMB_USER_DEFINED && (o->user_num_slots < 0 || o->user_num_slots > TL_EMB_MAX_SLOTS))
        return tl_error(TL_EINVAL, "%s: user_num_slots must be in [0, %d]; got %d", name, TL_EMB_MAX_SLOTS,
                        o->user_num_slots);
    /* The accumulator is a hidden extra slot, and a table has at most
     * kMaxAuxiliaryParameterCount. */
    bool accum = tl_emb_optimizer_accumulates(o);
    if (accum && tl_emb_num_slots(o) + 1 > TL_EMB_MAX_SLOTS)
        return tl_error(TL_EINVAL,
                        "Optimization algorithm %s does not support gradient accumulation but parameters specify "
                        "it. (%d slots and the accumulator exceed the %d a table has; set "
                        "gradient_accumulation_status to DISABLED)",
                        name, tl_emb_num_slots(o), TL_EMB_MAX_SLOTS);

    if (o->lr_tag < -1)
        return tl_error(TL_EINVAL, "%s: lr_tag must be >= 0 (a dynamic learning rate) or -1 (the constant); got %d",
                        name, o->lr_tag);
    if (o->lr_tag < 0 && !(o->learning_rate >= 0.0f && isfinite(o->learning_rate)))
        return tl_error(TL_EINVAL, "%s: learning_rate must be finite and >= 0; got %s", name,
                        fmt(o->learning_rate).s);
    tl_status st = check_limits(name, "clipping_limits", &o->clipping_limits);
    if (st == TL_OK)
        st = check_limits(name, "gradient_clipping_limits", &o->gradient_clipping_limits);
    if (st != TL_OK)
        return st;
    if (!accum && (o->gradient_clipping_limits.has_lower || o->gradient_clipping_limits.has_upper))
        return tl_error(TL_EINVAL,
                        "%s: gradient_clipping_limits are set with gradient_accumulation_status DISABLED. When "
                        "`use_gradient_accumulation` is False, gradient clipping cannot be used",
                        name);
    if (!accum && !tl_emb_optimizer_is_lazy(o))
        return tl_error(TL_EINVAL,
                        o->algorithm == TL_EMB_ADAM
                            ? "%s: use_non_lazy is set with gradient_accumulation_status DISABLED. When disabling "
                              "lazy Adam (`lazy_adam=False`), gradient accumulation must be used."
                            : "%s: use_non_lazy is set with gradient_accumulation_status DISABLED. When disabling "
                              "lazy Lion (`lazy_lion=False`), gradient accumulation must be used.",
                        name);
    if (!nonneg(o->weight_decay_factor))
        return tl_error(TL_EINVAL, "%s: weight_decay_factor must be finite and >= 0; got %s", name,
                        fmt(o->weight_decay_factor).s);
    if (o->simulated_quantization.enabled) {
        const tl_emb_limits *q = &o->simulated_quantization.clipping_limits;
        if (!q->has_lower || !q->has_upper)
            return tl_error(TL_EINVAL,
                            "%s: simulated_quantization.clipping_limits needs both a lower and an upper bound "
                            "(has lower: %s, has upper: %s)",
                            name, q->has_lower ? "yes" : "no", q->has_upper ? "yes" : "no");
        if (!(isfinite(q->lower) && isfinite(q->upper) && q->lower < q->upper))
            return tl_error(TL_EINVAL,
                            "%s: simulated_quantization.clipping_limits must be finite with lower < upper; "
                            "got [%s, %s]",
                            name, fmt(q->lower).s, fmt(q->upper).s);
        if (o->simulated_quantization.num_buckets < 2)
            return tl_error(TL_EINVAL, "%s: simulated_quantization.num_buckets must be >= 2; got %d", name,
                            o->simulated_quantization.num_buckets);
    }
    if (o->low_dimensional_packing_status < 0 || o->low_dimensional_packing_status > 2)
        return tl_error(TL_EINVAL,
                        "%s: low_dimensional_packing_status must be 0 (UNSPECIFIED), 1 (ENABLED) or 2 "
                        "(DISABLED); got %d",
                        name, o->low_dimensional_packing_status);
    if (o->hot_id_replication_status < 0 || o->hot_id_replication_status > 3)
        return tl_error(TL_EINVAL,
                        "%s: hot_id_replication_status must be 0 (UNSPECIFIED), 1 (ENABLED), 2 (DISABLED) or 3 "
                        "(MIGRATION_ONLY); got %d",
                        name, o->hot_id_replication_status);
    return check_algorithm(o, name);
}

/* ---- one step ----------------------------------------------------------- */

/* learning_rates[tag], checked; what names the value in messages. */
static tl_status dynamic_value(const char *alg, const char *what, int tag, const float *learning_rates, int n,
                               float *out)
{
    if (tag < 0 || tag >= n)
        return tl_error(TL_EINVAL, "%s: %s tag %d but %d learning rates were sent", alg, what, tag, n);
    float v = learning_rates[tag];
    if (!isfinite(v))
        return tl_error(TL_EINVAL, "%s: %s (dynamic tag %d) is %s; it must be finite", alg, what, tag, fmt(v).s);
    *out = v;
    return TL_OK;
}

tl_status tl_emb_step_prepare(const tl_emb_optimizer *o, const float *learning_rates, int n, tl_emb_step *st)
{
    const char *name = tl_emb_algorithm_name(o->algorithm);
    if (n < 0 || (n > 0 && learning_rates == NULL))
        return tl_error(TL_EINVAL, "%s: %d learning rates at %p; want n >= 0 and an array when n > 0", name, n,
                        (const void *)learning_rates);
    *st = (tl_emb_step){.learning_rate = o->learning_rate, .step_counter = 0.0f};
    if (o->lr_tag >= 0) {
        tl_status rc = dynamic_value(name, "learning rate", o->lr_tag, learning_rates, n, &st->learning_rate);
        if (rc != TL_OK)
            return rc;
        if (o->algorithm == TL_EMB_FTRL && !o->multiply_linear_by_lr && st->learning_rate == 0.0f)
            return tl_error(TL_EINVAL,
                            "%s: the learning rate (dynamic tag %d) is 0, and without multiply_linear_by_lr the "
                            "update divides by it",
                            name, o->lr_tag);
    }
    if (o->algorithm == TL_EMB_FREQUENCY_AWARE_ADAGRAD) {
        tl_status rc = dynamic_value(name, "step_counter", o->step_counter_tag, learning_rates, n, &st->step_counter);
        if (rc != TL_OK)
            return rc;
    }
    return TL_OK;
}

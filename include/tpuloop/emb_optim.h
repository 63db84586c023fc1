/*
 * tpuloop/emb_optim.h — TensorFlow's TPU embedding optimizers
 * (OptimizationParameters of optimization_parameters.proto) and the update
 * pipeline they run on each touched row.
 *
 * An embedding table is updated in place, one row at a time: after a step's
 * gradients for a row have been summed over every sample, feature, device
 * and host, the owner of the row runs, on that one row,
 *
 *     1. gradient clip   g = clamp(g, gradient_clipping_limits)
 *     2. weight decay    w -= wd * w, wd = weight_decay_factor
 *                              (* lr with multiply_weight_decay_factor_by_learning_rate)
 *     3. the optimizer   w, slots = rule(w, g, slots, lr)
 *     4. weight clip     w = clamp(w, clipping_limits)
 *
 * Rows no gradient reached are left alone ("lazy"), except with non-lazy
 * Adam and Lion, which update every row of the table each step with g = 0.
 * The rules that are also dense optimizers (SGD, Adagrad, Momentum, Adam,
 * RMSProp, centered RMSProp) run the same float kernels as tpuloop/optim.h.
 *
 *     tl_emb_optimizer o;
 *     tl_emb_optimizer_default(TL_EMB_ADAGRAD, &o);   // TF's defaults
 *     o.learning_rate = 0.1f;
 *     if (tl_emb_optimizer_validate(&o) != TL_OK) ...
 *     tl_emb_step st;
 *     tl_emb_step_prepare(&o, learning_rates, n_rates, &st);  // once per step
 *     tl_emb_update_row(&o, &st, w, g, slots, dim);             // per touched row
 *
 * The formulas (w the row, g its summed gradient, lr the learning rate; all
 * elementwise; the slots in load/retrieve order, see tl_emb_slot_name):
 *
 *   StochasticGradientDescent  w -= lr*g
 *   Adagrad            a += g^2; w -= lr*g/sqrt(a)                 (no epsilon)
 *   AdagradMomentum    a = beta2 == 1 ? a + g^2 : beta2*a + (1-beta2)*g^2
 *                      s = (a + eps)^(-1/exponent); m = momentum*m + s*g
 *                      w -= lr * (use_nesterov ? momentum*m + s*g : m)
 *   BoundedAdagrad     a' = a + g^2, capped at max_accumulator when > 0
 *                      d = lr*g/sqrt(update_accumulator_first ? a' : a),
 *                      clamped to +-max_var_update when > 0; w -= d; a = a'
 *   FrequencyAwareAdagrad  c += 1; a = max(accumulator_decay*a + g^2, initial_accumulator_value)
 *                      scale = min((max(step,1)/c)^probability_exponent, max_lr_multiplier)
 *                      w -= lr*(scale*g/sqrt(a) + l1*sign(w) + l2*w)  (step: the
 *                      dynamic hyperparameter step_counter_tag)
 *   FTRL               k = -learning_rate_power; a' = a + g^2; d = a'^k - a^k
 *                      L += g - d/lr*w; den = (a'^k + beta)/lr + 2*l2       (or, with
 *                      multiply_linear_by_lr: L += lr*g - d*w; den = a'^k + 2*lr*l2 + beta)
 *                      w = (l1 == 0 ? -L : clamp(L, -l1*s, l1*s) - L) / den, s = 1 (lr);
 *                      den == 0 leaves w.
 *   ADAM               m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g^2
 *                      w -= lr*m/(sqrt(v) + eps), or lr*m/sqrt(v + eps^2) with
 *                      use_sum_inside_sqrt. No bias correction: pass it in lr.
 *   Momentum           m = momentum*m + g; w -= lr*m (nesterov: lr*g + lr*momentum*m)
 *   Lion               c = beta1*m + (1-beta1)*g; w -= lr*sign(c); m = beta2*m + (1-beta2)*g
 *   RMSProp            ms = rho*ms + (1-rho)*g^2; mom = momentum*mom + lr*g/sqrt(ms + eps); w -= mom
 *   CenteredRMSProp    mg = rho*mg + (1-rho)*g, then as RMSProp with ms - mg^2 + eps
 *   Adadelta           acc = rho*acc + (1-rho)*g^2; u = sqrt(upd + eps)/sqrt(acc + eps)*g
 *                      upd = rho*upd + (1-rho)*u^2; w -= lr*u
 *   ProximalAdagrad    a += g^2; e = lr/sqrt(a); x = w - e*g
 *                      w = sign(x)*max(|x| - e*l1, 0)/(1 + e*l2)
 *   ProximalYogi       m = beta1*m + (1-beta1)*g; v += (1-beta2)*sign(g^2 - v)*g^2
 *                      e = lr/(sqrt(v) + eps); x = w - e*m; then as ProximalAdagrad's
 *                      shrink when l1 > 0, x/(1 + e*l2) when l2 > 0, else x
 *   FrequencyEstimator (dim 1; lr is the global step) d = step - last_hit;
 *                      dc = min(d, max_delta); if d >= outlier_threshold*w: w = dc,
 *                      else w = (1-tau)*w + tau*dc; last_hit = step
 *   Assign             w = g
 *   UserDefinedProgram user_fn(g, w, slots, ...)
 *
 * OnlineYogi and MDLAdagradLight are TensorFlow algorithms whose math is not
 * public; validation rejects them (TL_ENOTIMPL) rather than guess.
 *
 * Threads and memory: nothing here allocates or keeps state. Rows are
 * independent: disjoint rows may be updated concurrently.
 */
#ifndef TPULOOP_EMB_OPTIM_H
#define TPULOOP_EMB_OPTIM_H

#include "tpuloop/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kMaxAuxiliaryParameterCount: the most slots (auxiliary parameters) a table has. */
#define TL_EMB_MAX_SLOTS 7

/* The algorithms of the `parameters` oneof. Values are append-only. */
typedef enum {
    TL_EMB_OPT_NONE = 0, /* "No optimization algorithm specified" */
    TL_EMB_SGD,
    TL_EMB_ADAGRAD,
    TL_EMB_ADAGRAD_MOMENTUM,
    TL_EMB_BOUNDED_ADAGRAD,
    TL_EMB_FREQUENCY_AWARE_ADAGRAD,
    TL_EMB_FTRL,
    TL_EMB_ADAM,
    TL_EMB_MOMENTUM,
    TL_EMB_LION,
    TL_EMB_RMSPROP,
    TL_EMB_CENTERED_RMSPROP,
    TL_EMB_MDL_ADAGRAD_LIGHT, /* rejected: not public */
    TL_EMB_ADADELTA,
    TL_EMB_PROXIMAL_ADAGRAD,
    TL_EMB_ONLINE_YOGI,       /* rejected: not public */
    TL_EMB_PROXIMAL_YOGI,
    TL_EMB_FREQUENCY_ESTIMATOR,
    TL_EMB_USER_DEFINED,
    TL_EMB_ASSIGN,
    TL_EMB_ALGORITHM_COUNT
} tl_emb_algorithm;

/* GradientAccumulationStatus.Status: UNSPECIFIED means ENABLED. */
typedef enum {
    TL_EMB_ACCUM_UNSPECIFIED = 0,
    TL_EMB_ACCUM_ENABLED = 1,
    TL_EMB_ACCUM_DISABLED = 2
} tl_emb_accumulation;

/* ClippingLimits: an absent bound is -inf (lower) or +inf (upper). */
typedef struct tl_emb_limits {
    bool has_lower, has_upper;
    float lower, upper;
} tl_emb_limits;

/* A user-defined rule (UserDefinedProgram's elementwise program, in C):
 * updates w[0..dim) and slots[0..num_slots)[0..dim) in place from g[0..dim).
 * hyper is the rule's dynamic hyperparameter (the learning rate). */
typedef void (*tl_emb_user_fn)(const float *g, float *w, float *const *slots, int num_slots, float hyper, int dim,
                               void *user);

/*
 * OptimizationParameters, with the proto's field names. Fields the
 * algorithm does not use are ignored. Fill it with tl_emb_optimizer_default
 * and change what you need.
 */
typedef struct tl_emb_optimizer {
    tl_emb_algorithm algorithm;
    float learning_rate;                    /* LearningRate.constant, used when lr_tag < 0 */
    int lr_tag;                             /* LearningRate.dynamic.tag (>= 0), or -1 for constant */
    tl_emb_limits clipping_limits;          /* the weights, after the update */
    tl_emb_limits gradient_clipping_limits; /* the summed gradient, before it */
    float weight_decay_factor;              /* >= 0 */
    bool multiply_weight_decay_factor_by_learning_rate;
    tl_emb_accumulation gradient_accumulation_status;
    struct {
        bool enabled;
        tl_emb_limits clipping_limits; /* both bounds required when enabled */
        int num_buckets;               /* >= 2 */
    } simulated_quantization;          /* forward only, see tl_emb_quantize */
    int low_dimensional_packing_status;  /* accepted, no effect (layout only) */
    int hot_id_replication_status;       /* accepted, no effect (performance only) */

    /* The algorithms' parameters. */
    float momentum;       /* AdagradMomentum, Momentum, RMSProp, CenteredRMSProp */
    bool use_nesterov;    /* AdagradMomentum, Momentum */
    float exponent;       /* AdagradMomentum: > 0 */
    float beta1, beta2;   /* AdagradMomentum (beta2), ADAM, Lion, ProximalYogi */
    float epsilon;        /* AdagradMomentum, ADAM, RMSProp, CenteredRMSProp, Adadelta, ProximalYogi: > 0 */
    bool update_accumulator_first; /* BoundedAdagrad */
    float max_var_update;          /* BoundedAdagrad: 0 = no cap */
    float max_accumulator;         /* BoundedAdagrad: 0 = no cap */
    float l1_regularization_strength; /* FTRL, ProximalAdagrad, ProximalYogi, FrequencyAwareAdagrad */
    float l2_regularization_strength;
    float max_lr_multiplier;          /* FrequencyAwareAdagrad */
    float probability_exponent;       /* FrequencyAwareAdagrad */
    float accumulator_decay;          /* FrequencyAwareAdagrad */
    int step_counter_tag;             /* FrequencyAwareAdagrad: DynamicHyperParameter tag of the step */
    float learning_rate_power;        /* FTRL: <= 0 */
    bool multiply_linear_by_lr;       /* FTRL */
    float beta;                       /* FTRL */
    bool use_non_lazy;                /* ADAM use_non_lazy_adam, Lion use_non_lazy_lion */
    bool use_sum_inside_sqrt;         /* ADAM */
    float rho;                        /* RMSProp, CenteredRMSProp, Adadelta */
    float tau, max_delta, outlier_threshold, weight_exponent; /* FrequencyEstimator */
    tl_emb_user_fn user_fn;           /* UserDefinedProgram */
    void *user;
    int user_num_slots;               /* UserDefinedProgram: 0..TL_EMB_MAX_SLOTS */

    /* The value every slot starts at (the accumulator of the Adagrad family,
     * FTRL and ProximalAdagrad, ProximalYogi's v: TF's
     * initial_accumulator_value; the others 0). Filled by the defaults. */
    float initial_accumulator_value;
    float slot_init[TL_EMB_MAX_SLOTS]; /* UserDefinedProgram's slots */
} tl_emb_optimizer;

/* What a step's update reads that is not per row: the learning rate (the
 * constant or learning_rates[lr_tag]) and the dynamic hyperparameter
 * (FrequencyAwareAdagrad's step counter). Plain data. */
typedef struct tl_emb_step {
    float learning_rate;
    float step_counter;
} tl_emb_step;

/* ---- configuration ------------------------------------------------------ */

/*
 * Fills *o with algorithm's defaults, TensorFlow's (tf.tpu.experimental.embedding,
 * v2 where it has the optimizer, else v1): learning_rate SGD 0.01, Adagrad /
 * AdagradMomentum / FTRL / Adam 0.001, the rest 0.01; lr_tag -1;
 * initial_accumulator_value 0.1 (ProximalYogi 1e-6); Adam beta1 0.9, beta2
 * 0.999, epsilon 1e-7, use_sum_inside_sqrt true; AdagradMomentum exponent 2,
 * beta2 1, epsilon 1e-10; FTRL learning_rate_power -0.5; Lion beta1 0.9,
 * beta2 0.99; ProximalYogi beta1 0.9, beta2 0.999, epsilon 1e-3; RMSProp /
 * CenteredRMSProp rho 0.9, epsilon 1e-10; Adadelta rho 0.95, epsilon 1e-6;
 * FrequencyAwareAdagrad max_lr_multiplier 10, probability_exponent 0.5,
 * accumulator_decay 1, step_counter_tag 0 (proto3's value of an absent tag;
 * -1 for the others); FrequencyEstimator's tau, max_delta,
 * outlier_threshold and weight_exponent NAN (TF has no defaults: validation
 * asks for them); accumulation UNSPECIFIED (enabled); no clipping, no
 * decay. Never fails.
 */
TL_API void tl_emb_optimizer_default(tl_emb_algorithm algorithm, tl_emb_optimizer *o);

/*
 * Checks *o as TensorFlow's configuration does. Errors, the first found:
 *   TL_EINVAL "No optimization algorithm specified" (TL_EMB_OPT_NONE);
 *   TL_ENOTIMPL for OnlineYogi and MDLAdagradLight ("... its update is not
 *     published ...");
 *   TL_EINVAL "Optimization algorithm %s does not support gradient
 *     accumulation but parameters specify it." (the slots and the hidden
 *     accumulator slot exceed TL_EMB_MAX_SLOTS: UserDefinedProgram with 7
 *     slots and accumulation on);
 *   TL_EINVAL for a learning rate negative or not finite, lr_tag < -1, a
 *     limit with lower > upper, gradient clipping or non-lazy Adam / Lion
 *     without accumulation (TF's "When `use_gradient_accumulation` is False,
 *     gradient clipping cannot be used"), weight_decay_factor < 0, a
 *     simulated quantization without both bounds or with num_buckets < 2,
 *     and each algorithm's ranges (beta in [0, 1), epsilon > 0, exponent > 0,
 *     initial_accumulator_value > 0 where TF says "must be a positive float",
 *     learning_rate_power <= 0, UserDefinedProgram without user_fn,
 *     FrequencyAwareAdagrad without a step_counter_tag, FrequencyEstimator
 *     without its four parameters or with a tau that is not finite (a
 *     finite tau outside (0, 1), the proto's documented range, is valid:
 *     TensorFlow accepts it, and the configuration readers warn), FTRL
 *     with a constant learning rate 0
 *     and without multiply_linear_by_lr, which divides by it), naming the
 *     algorithm, field and value.
 */
TL_API tl_status tl_emb_optimizer_validate(const tl_emb_optimizer *o);

/* GetOptimizationAlgorithmName: "Adagrad", "AdagradMomentum",
 * "BoundedAdagrad", "FrequencyAwareAdagrad", "StochasticGradientDescent",
 * "FTRL", "ADAM", "Momentum", "Lion", "RMSProp", "CenteredRMSProp",
 * "MDLAdagradLight", "Adadelta", "ProximalAdagrad", "OnlineYogi",
 * "ProximalYogi", "FrequencyEstimator", "UserDefinedProgram", "Assign";
 * "None" for TL_EMB_OPT_NONE, "unknown" otherwise. */
TL_API const char *tl_emb_algorithm_name(tl_emb_algorithm a);

/* The algorithm named name (as above, ignoring case; also the config names
 * "sgd", "adagrad_momentum", "ftrl", "adam", ... in snake case). Errors:
 * TL_EINVAL naming the text and listing the names. */
TL_API tl_status tl_emb_algorithm_parse(const char *name, tl_emb_algorithm *out);

/* True when the update touches only rows that received a gradient (all but
 * non-lazy ADAM and Lion). */
TL_API bool tl_emb_optimizer_is_lazy(const tl_emb_optimizer *o);

/* True when gradients are summed over the step before one update per row
 * (status UNSPECIFIED or ENABLED). */
TL_API bool tl_emb_optimizer_accumulates(const tl_emb_optimizer *o);

/* ---- slots -------------------------------------------------------------- */

/* The number of slots (auxiliary parameters, §2.4): 0..TL_EMB_MAX_SLOTS. */
TL_API int tl_emb_num_slots(const tl_emb_optimizer *o);

/* TensorFlow's name of slot i ("accumulators", "momenta", "velocities",
 * "linears", "ms", "mom", "mg", "updates", "v", "m", "counters",
 * "last_hit_step", "Slot_<i>"), in load/retrieve order; NULL out of range. */
TL_API const char *tl_emb_slot_name(const tl_emb_optimizer *o, int i);

/* The value slot i starts at; NAN out of range. */
TL_API float tl_emb_slot_init(const tl_emb_optimizer *o, int i);

/* ---- one update --------------------------------------------------------- */

/*
 * Resolves the step's learning rate and hyperparameter from the dynamic
 * values a send passes (learning_rates[0..n), indexed by tag; NULL when n
 * is 0). Errors: TL_EINVAL when a tag of o is >= n ("learning rate tag 2
 * but 1 learning rates were sent") or its value is not finite, when n < 0
 * or learning_rates is NULL with n > 0, and for FTRL without
 * multiply_linear_by_lr when the dynamic learning rate is 0 (the update
 * divides by it).
 */
TL_API tl_status tl_emb_step_prepare(const tl_emb_optimizer *o, const float *learning_rates, int n, tl_emb_step *st);

/*
 * The pipeline above on one row: w[0..dim) and slots[i][0..dim) for each
 * slot i, in place, from the summed gradient g[0..dim), which is clipped in
 * place (so g is scratch). o must be valid and st prepared from it; nothing
 * is checked (called per row). w, g and the slots must not overlap.
 */
TL_API void tl_emb_update_row(const tl_emb_optimizer *o, const tl_emb_step *st, float *w, float *g, float *const *slots,
                              int dim);

/*
 * Simulated quantization of a gathered row (forward only): each element
 * x = clamp(x, lo, hi), then floor((x - lo)/q + 0.5)*q + lo with
 * q = (hi - lo)/(num_buckets - 1). Does nothing unless enabled.
 */
TL_API void tl_emb_quantize(const tl_emb_optimizer *o, float *x, int dim);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_EMB_OPTIM_H */

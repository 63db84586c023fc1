/*
 * tpuloop/optim.h — update rules and learning-rate schedules, written once.
 *
 * TensorFlow's dense optimizers (tf.compat.v1.train.*Optimizer, the ones a
 * TPUEstimator model_fn builds) and its TPU embedding optimizers are the same
 * per-element formulas; this header holds them once, as a kernel that updates
 * n contiguous elements of a variable and its slots in place. A dense variable
 * is one call over all its elements; an embedding row is one call over `dim`
 * elements.
 *
 * An update is split the way TensorFlow splits it: what depends only on the
 * global step (the scheduled learning rate, Adam's bias-corrected rate) is a
 * scalar prologue computed once per step, and the element loop reads it.
 *
 *     tl_optimizer_config cfg;
 *     tl_optimizer_config_default(TL_OPTIM_ADAM, &cfg);     // TF's defaults
 *     cfg.lr.kind = TL_LR_COSINE_DECAY;                     // optional schedule
 *     cfg.lr.decay_steps = 10000;
 *     if (tl_optimizer_config_validate(&cfg) != TL_OK)
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *
 *     float *slot[TL_OPTIM_MAX_SLOTS];                      // "m", "v": n floats each
 *     ... allocate tl_optimizer_num_slots(&cfg) buffers of n floats ...
 *     tl_optimizer_init_slots(&cfg, slot, n);
 *     for (int64_t step = 0; step < steps; step++) {
 *         tl_optimizer_step st;
 *         tl_optimizer_step_prepare(&cfg, step, &st);       // per step, scalars
 *         ... compute grad ...
 *         tl_optimizer_apply(&cfg, &st, param, grad, slot, n);   // per variable or row
 *     }
 *
 * What "step" is. `step` is TensorFlow's global_step as the update reads it:
 * the number of updates applied before this one (0 for the first update).
 * Schedules are pure functions of it, and so is Adam's bias correction: TF's
 * AdamOptimizer keeps beta1_power/beta2_power accumulators that start at
 * beta1/beta2 and are multiplied after every update, so update number
 * step + 1 uses beta^(step + 1). tpuloop computes beta^(step + 1) with pow()
 * in double instead of keeping a float accumulator: the same values, without
 * the float rounding that builds up in TF's accumulators, and a stopped and
 * resumed run needs nothing but the step to continue exactly.
 *
 * The formulas (TensorFlow's training_ops.cc CPU kernels; lr is the
 * schedule's value at the step):
 *
 *   GradientDescent  var -= lr * g
 *   Momentum         accum = momentum * accum + g
 *                    var  -= lr * accum                         (use_nesterov false)
 *                    var  -= lr * g + lr * momentum * accum     (use_nesterov true)
 *   Adagrad          accum += g^2;  var -= lr * g / sqrt(accum)
 *                    No epsilon: this is v1 ApplyAdagrad, what
 *                    tf.compat.v1.train.AdagradOptimizer runs. Keras' Adagrad
 *                    (ApplyAdagradV2) divides by sqrt(accum) + epsilon (1e-7);
 *                    tpuloop follows v1. The accumulator starts at
 *                    initial_accumulator_value (> 0, default 0.1), so the
 *                    division is safe.
 *   Adam             t = step + 1;  lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
 *                    m = beta1 * m + (1 - beta1) * g
 *                    v = beta2 * v + (1 - beta2) * g^2
 *                    var -= lr_t * m / (sqrt(v) + epsilon)
 *                    epsilon is the paper's "epsilon hat": added to sqrt(v)
 *                    outside the bias correction (PyTorch adds it to
 *                    sqrt(v / (1 - beta2^t)) instead).
 *   RMSProp          ms  = decay * ms + (1 - decay) * g^2
 *                    mom = momentum * mom + lr * g / sqrt(ms + epsilon)
 *                    var -= mom
 *   centered         mg  = decay * mg + (1 - decay) * g
 *                    mom = momentum * mom + lr * g / sqrt(ms - mg^2 + epsilon)
 *
 * The float kernel evaluates the moving averages as TF's kernels do,
 * x += (y - x) * (1 - beta), which equals beta * x + (1 - beta) * y.
 *
 * Slots, in index order, with TensorFlow's slot names and initial values
 * (the v1 optimizers' _create_slots):
 *
 *   GradientDescent  none
 *   Momentum         "momentum" 0
 *   Adagrad          "accumulator" initial_accumulator_value
 *   Adam             "m" 0, "v" 0
 *   RMSProp          "rms" 1 (ones: v1 RMSPropOptimizer initializes it with
 *                    ones_initializer, unlike Keras, which starts at 0),
 *                    "momentum" 0, and "mg" 0 when centered.
 *
 * "mg" is last so that slots 0 and 1 mean the same with and without centered.
 *
 * Threads and memory: nothing here allocates, keeps state or locks. Every
 * function may be called from any thread; tl_optimizer_apply on disjoint
 * element ranges may run concurrently. Only a failing call writes the
 * thread's error message (tl_last_error).
 */
#ifndef TPULOOP_OPTIM_H
#define TPULOOP_OPTIM_H

#include "tpuloop/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most slots any optimizer here has (centered RMSProp). */
#define TL_OPTIM_MAX_SLOTS 3

/* The update rules. Values are append-only. */
typedef enum {
    TL_OPTIM_SGD = 0,      /* tf.compat.v1.train.GradientDescentOptimizer */
    TL_OPTIM_MOMENTUM = 1, /* tf.compat.v1.train.MomentumOptimizer */
    TL_OPTIM_ADAGRAD = 2,  /* tf.compat.v1.train.AdagradOptimizer */
    TL_OPTIM_ADAM = 3,     /* tf.compat.v1.train.AdamOptimizer */
    TL_OPTIM_RMSPROP = 4,  /* tf.compat.v1.train.RMSPropOptimizer */
    TL_OPTIM_KIND_COUNT = 5
} tl_optimizer_kind;

/* The learning-rate decays. Values are append-only. */
typedef enum {
    TL_LR_CONSTANT = 0,          /* learning_rate */
    TL_LR_EXPONENTIAL_DECAY = 1, /* tf.compat.v1.train.exponential_decay */
    TL_LR_COSINE_DECAY = 2,      /* tf.compat.v1.train.cosine_decay */
    TL_LR_KIND_COUNT = 3
} tl_lr_kind;

/*
 * A learning rate as a function of the global step (see tl_lr_schedule_value
 * for the exact formulas). Fields a kind does not use are ignored.
 */
typedef struct tl_lr_schedule {
    tl_lr_kind kind;
    double learning_rate; /* the initial rate, >= 0 */
    int64_t decay_steps;  /* exponential, cosine: >= 1 */
    double decay_rate;    /* exponential: > 0 (> 1 grows, as TF allows) */
    bool staircase;       /* exponential: floor(step / decay_steps) */
    double alpha;         /* cosine: the final rate as a fraction of learning_rate, in [0, 1] */
    int64_t warmup_steps; /* >= 0; 0 is no warmup. Wraps any kind (see below). */
} tl_lr_schedule;

/*
 * An optimizer: its kind, its learning-rate schedule and its
 * hyperparameters. Fields the kind does not use are ignored. Fill it with
 * tl_optimizer_config_default and change what you need.
 */
typedef struct tl_optimizer_config {
    tl_optimizer_kind kind;
    tl_lr_schedule lr;
    double momentum;                  /* Momentum, RMSProp: in [0, 1] */
    bool use_nesterov;                /* Momentum */
    double initial_accumulator_value; /* Adagrad: > 0 */
    double beta1;                     /* Adam: in [0, 1) */
    double beta2;                     /* Adam: in [0, 1) */
    double epsilon;                   /* Adam, RMSProp: > 0 */
    double decay;                     /* RMSProp: in [0, 1] */
    bool centered;                    /* RMSProp */
} tl_optimizer_config;

/*
 * What an update needs that depends on the step and not on the element;
 * filled by tl_optimizer_step_prepare, read by the kernels. Plain data.
 */
typedef struct tl_optimizer_step {
    int64_t step;         /* the global step it was prepared for */
    double learning_rate; /* the schedule's value at step */
    double lr_t;          /* Adam: learning_rate * sqrt(1 - beta2_power) / (1 - beta1_power);
                             the others: learning_rate */
    double beta1_power;   /* Adam: beta1^(step + 1); the others: 0 */
    double beta2_power;   /* Adam: beta2^(step + 1); the others: 0 */
} tl_optimizer_step;

/* ---- configuration ------------------------------------------------------ */

/*
 * Fills *cfg with kind's defaults, TensorFlow's where TF has them:
 *   Adam     learning_rate 0.001, beta1 0.9, beta2 0.999, epsilon 1e-8
 *   Adagrad  initial_accumulator_value 0.1
 *   RMSProp  decay 0.9, momentum 0.0, epsilon 1e-10, centered false
 *   Momentum use_nesterov false
 * tf.compat.v1.train's GradientDescent, Momentum, Adagrad and RMSProp have no
 * default learning rate, and Momentum none for momentum: TF makes them
 * required arguments. These fields are left NAN ("not set"), and
 * tl_optimizer_config_validate fails until they are set. The schedule is
 * constant with no warmup; decay_steps 0, decay_rate 0, staircase false and
 * alpha 0 (cosine_decay's default). Unused fields are 0.
 * An unknown kind still fills *cfg (all zero, lr NAN, with that kind) so that
 * validation reports it. Never fails.
 */
TL_API void tl_optimizer_config_default(tl_optimizer_kind kind, tl_optimizer_config *cfg);

/*
 * Checks a configuration; the first problem found is reported, naming the
 * field, the value and what is allowed, e.g.
 *   "Adam: beta1 must be in [0, 1) (got 1)"
 *   "GradientDescent: learning_rate is not set (tf.compat.v1.train.GradientDescentOptimizer has no default)"
 * Errors (all TL_EINVAL): unknown kind; learning_rate unset, negative or not
 * finite; momentum unset or outside [0, 1] (Momentum, RMSProp);
 * initial_accumulator_value <= 0 or not finite (Adagrad, as TF's "must be
 * positive"); beta1 or beta2 outside [0, 1) (Adam); epsilon <= 0 or not finite
 * (Adam, RMSProp); decay outside [0, 1] (RMSProp); and the schedule's errors
 * (tl_lr_schedule_validate).
 */
TL_API tl_status tl_optimizer_config_validate(const tl_optimizer_config *cfg);

/* TensorFlow's default name of the optimizer ("GradientDescent", "Momentum",
 * "Adagrad", "Adam", "RMSProp"); "unknown" for a value not in the list. */
TL_API const char *tl_optimizer_kind_name(tl_optimizer_kind kind);

/* The kind named name, matched as tl_optimizer_kind_name spells it, ignoring
 * case; "sgd" is accepted for GradientDescent. Errors: TL_EINVAL naming the
 * text and listing the names. */
TL_API tl_status tl_optimizer_kind_parse(const char *name, tl_optimizer_kind *kind);

/* ---- slots -------------------------------------------------------------- */

/* The number of slot variables (see the table above): 0 to
 * TL_OPTIM_MAX_SLOTS; 0 for an unknown kind. */
TL_API int tl_optimizer_num_slots(const tl_optimizer_config *cfg);

/* TensorFlow's name of slot i ("m", "v", "accumulator", "momentum", "rms",
 * "mg"); NULL when i is not in [0, tl_optimizer_num_slots(cfg)). */
TL_API const char *tl_optimizer_slot_name(const tl_optimizer_config *cfg, int i);

/* The value slot i starts at; NAN when i is out of range. */
TL_API double tl_optimizer_slot_init(const tl_optimizer_config *cfg, int i);

/* Sets slots[i][0..n) to slot i's initial value for every slot of cfg;
 * slots beyond tl_optimizer_num_slots are not touched (and may be NULL). */
TL_API void tl_optimizer_init_slots(const tl_optimizer_config *cfg, float *const *slots, int64_t n);

/* ---- learning rate ------------------------------------------------------ */

/*
 * Checks a schedule. Errors (TL_EINVAL, message naming the field): unknown
 * kind; learning_rate unset (NAN), negative or not finite; decay_steps < 1
 * (exponential, cosine); decay_rate <= 0 or not finite (exponential); alpha
 * outside [0, 1] (cosine); warmup_steps < 0.
 */
TL_API tl_status tl_lr_schedule_validate(const tl_lr_schedule *s);

/*
 * The learning rate at global step `step` of a valid schedule, in double (a
 * negative step is taken as 0). With lr = learning_rate:
 *
 *   constant     lr
 *   exponential  lr * decay_rate^p, p = step / decay_steps,
 *                floor(p) if staircase                   (exponential_decay)
 *   cosine       s = min(step, decay_steps);
 *                lr * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) + alpha)
 *                so it ends, and stays, at alpha * lr    (cosine_decay)
 *
 * Warmup, when warmup_steps = W > 0, wraps the decay as BERT's
 * optimization.py (the warmup most TPUEstimator models copied) does:
 *
 *   step < W:   lr * step / W      (the initial rate, ramped; 0 at step 0)
 *   step >= W:  the decay above at `step` (not step - W)
 *
 * The decay is not shifted by W, and the first update (step 0) has rate 0;
 * both are what BERT and its descendants do.
 */
TL_API double tl_lr_schedule_value(const tl_lr_schedule *s, int64_t step);

/* ---- one update --------------------------------------------------------- */

/*
 * Computes *st for global step `step`: the learning rate and, for Adam, the
 * beta powers and lr_t (see tl_optimizer_step). Validates cfg first.
 * Errors: TL_EINVAL for step < 0 or an invalid cfg (tl_optimizer_config_validate's
 * messages); *st is then zeroed.
 */
TL_API tl_status tl_optimizer_step_prepare(const tl_optimizer_config *cfg, int64_t step, tl_optimizer_step *st);

/*
 * Applies one update to n contiguous elements in place, in float32:
 * param[0..n) and slots[i][0..n) for each slot i of cfg, with gradient
 * grad[0..n). cfg must be valid and st prepared from it (the kernels do not
 * check: they are called per row, inside device loops). n <= 0 does nothing.
 * param, grad and the slots must not overlap (they are restrict in the loops).
 * For GradientDescent slots may be NULL.
 */
TL_API void tl_optimizer_apply(const tl_optimizer_config *cfg, const tl_optimizer_step *st, float *param,
                               const float *grad, float *const *slots, int64_t n);

/*
 * The reference twin: the same update in float64, written plainly from the
 * formulas above (beta * x + (1 - beta) * y), for tests and for checking
 * the fast kernel. Same contract as tl_optimizer_apply.
 */
TL_API void tl_optimizer_apply_ref(const tl_optimizer_config *cfg, const tl_optimizer_step *st, double *param,
                                   const double *grad, double *const *slots, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_OPTIM_H */

/* optim/: TensorFlow's defaults, validation messages, slot names and initial
 * values, learning-rate schedules at chosen steps, Adam's per-step prologue,
 * and hand-computed single updates. The long runs against NumPy and PyTorch
 * are in test_optim_ref.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tpuloop/optim.h"

#define EXPECT_NEAR(x, want, rel)                                                                           \
    do {                                                                                                    \
        double x_ = (x), w_ = (want);                                                                       \
        cr_assert(fabs(x_ - w_) <= (rel) * fabs(w_), "%s = %.17g, want %.17g", #x, x_, w_);               \
    } while (0)

/* cfg fails validation with TL_EINVAL and a message containing frag. */
static void invalid(const tl_optimizer_config *cfg, const char *frag)
{
    tl_status st = tl_optimizer_config_validate(cfg);
    cr_assert_eq(st, TL_EINVAL, "want TL_EINVAL for '%s', got %d (%s)", frag, st, tl_last_error());
    cr_assert(strstr(tl_last_error(), frag) != NULL, "message \"%s\" lacks \"%s\"", tl_last_error(), frag);
}

static tl_optimizer_config make(tl_optimizer_kind kind, double lr)
{
    tl_optimizer_config c;
    tl_optimizer_config_default(kind, &c);
    c.lr.learning_rate = lr;
    return c;
}

static void valid(const tl_optimizer_config *cfg)
{
    tl_status st = tl_optimizer_config_validate(cfg);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
}

/* ---- defaults ----------------------------------------------------------- */

Test(optim, adam_defaults_are_tf_v1s)
{
    tl_optimizer_config c;
    tl_optimizer_config_default(TL_OPTIM_ADAM, &c);
    cr_assert_eq(c.kind, TL_OPTIM_ADAM);
    cr_assert_eq(c.lr.learning_rate, 0.001);
    cr_assert_eq(c.beta1, 0.9);
    cr_assert_eq(c.beta2, 0.999);
    cr_assert_eq(c.epsilon, 1e-8); /* v1; Keras' is 1e-7 */
    cr_assert_eq(c.lr.kind, TL_LR_CONSTANT);
    cr_assert_eq(c.lr.warmup_steps, 0);
    valid(&c);
}

Test(optim, rmsprop_and_adagrad_defaults)
{
    tl_optimizer_config c;
    tl_optimizer_config_default(TL_OPTIM_RMSPROP, &c);
    cr_assert_eq(c.decay, 0.9);
    cr_assert_eq(c.momentum, 0.0);
    cr_assert_eq(c.epsilon, 1e-10); /* v1; Keras' is 1e-7 */
    cr_assert_not(c.centered);
    tl_optimizer_config_default(TL_OPTIM_ADAGRAD, &c);
    cr_assert_eq(c.initial_accumulator_value, 0.1);
    tl_optimizer_config_default(TL_OPTIM_MOMENTUM, &c);
    cr_assert_not(c.use_nesterov);
}

Test(optim, required_arguments_have_no_default)
{
    /* TF v1: learning_rate is required except for Adam; Momentum's momentum too. */
    static const struct {
        tl_optimizer_kind kind;
        const char *tf_class;
    } req[] = {
        {TL_OPTIM_SGD, "GradientDescent: learning_rate is not set (tf.compat.v1.train.GradientDescentOptimizer"},
        {TL_OPTIM_MOMENTUM, "Momentum: learning_rate is not set"},
        {TL_OPTIM_ADAGRAD, "Adagrad: learning_rate is not set"},
        {TL_OPTIM_RMSPROP, "RMSProp: learning_rate is not set"},
    };
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        tl_optimizer_config c;
        tl_optimizer_config_default(req[i].kind, &c);
        invalid(&c, req[i].tf_class);
    }
    tl_optimizer_config c = make(TL_OPTIM_MOMENTUM, 0.1);
    invalid(&c, "Momentum: momentum is not set (tf.compat.v1.train.MomentumOptimizer has no default)");
    c.momentum = 0.9;
    valid(&c);
    tl_optimizer_config s = make(TL_OPTIM_SGD, 0.5);
    valid(&s);
}

/* ---- validation --------------------------------------------------------- */

Test(optim, rejects_bad_hyperparameters)
{
    tl_optimizer_config c = make(TL_OPTIM_ADAM, -0.1);
    invalid(&c, "Adam: learning_rate must be >= 0 and finite; got -0.1");
    c.lr.learning_rate = INFINITY;
    invalid(&c, "learning_rate must be >= 0");
    c = make(TL_OPTIM_ADAM, 0.0); /* 0 is allowed, as in TF */
    valid(&c);

    c = make(TL_OPTIM_ADAM, 0.001);
    c.beta1 = 1.0;
    invalid(&c, "Adam: beta1 must be in [0, 1); got 1");
    c.beta1 = -0.5;
    invalid(&c, "beta1 must be in [0, 1); got -0.5");
    c.beta1 = NAN;
    invalid(&c, "beta1 must be in [0, 1)");
    c.beta1 = 0.0;
    valid(&c);
    c.beta2 = 1.0;
    invalid(&c, "Adam: beta2 must be in [0, 1); got 1");
    c.beta2 = 0.999;
    c.epsilon = 0.0;
    invalid(&c, "Adam: epsilon must be positive and finite; got 0");
    c.epsilon = -1e-8;
    invalid(&c, "epsilon must be positive");

    c = make(TL_OPTIM_ADAGRAD, 0.1);
    c.initial_accumulator_value = 0.0;
    invalid(&c, "Adagrad: initial_accumulator_value must be positive and finite; got 0");

    c = make(TL_OPTIM_RMSPROP, 0.1);
    c.decay = 1.5;
    invalid(&c, "RMSProp: decay must be in [0, 1]; got 1.5");
    c.decay = 0.9;
    c.momentum = -0.1;
    invalid(&c, "RMSProp: momentum must be in [0, 1]; got -0.1");
    c.momentum = 0.0;
    c.epsilon = 0.0;
    invalid(&c, "RMSProp: epsilon must be positive and finite; got 0");

    c = make(TL_OPTIM_MOMENTUM, 0.1);
    c.momentum = 2.0;
    invalid(&c, "Momentum: momentum must be in [0, 1]; got 2");
}

Test(optim, rejects_unknown_kinds)
{
    tl_optimizer_config c;
    tl_optimizer_config_default((tl_optimizer_kind)7, &c);
    invalid(&c, "optimizer kind 7 is unknown");
    cr_assert_eq(tl_optimizer_num_slots(&c), 0);
    cr_assert_null(tl_optimizer_slot_name(&c, 0));
    cr_assert_str_eq(tl_optimizer_kind_name((tl_optimizer_kind)7), "unknown");
    c = make(TL_OPTIM_SGD, 0.1);
    c.lr.kind = (tl_lr_kind)9;
    invalid(&c, "GradientDescent: learning-rate schedule kind 9 is unknown");
}

Test(optim, rejects_bad_schedules)
{
    tl_optimizer_config c = make(TL_OPTIM_SGD, 0.1);
    c.lr.kind = TL_LR_EXPONENTIAL_DECAY;
    c.lr.decay_rate = 0.5;
    invalid(&c, "GradientDescent: exponential_decay decay_steps must be >= 1; got 0");
    c.lr.decay_steps = 10;
    valid(&c);
    c.lr.decay_rate = 0.0;
    invalid(&c, "exponential_decay decay_rate must be > 0 and finite; got 0");
    c.lr.kind = TL_LR_COSINE_DECAY;
    c.lr.alpha = 1.5;
    invalid(&c, "cosine_decay alpha must be in [0, 1]; got 1.5");
    c.lr.alpha = 0.0;
    c.lr.decay_steps = -3;
    invalid(&c, "cosine_decay decay_steps must be >= 1; got -3");
    c.lr.decay_steps = 100;
    c.lr.warmup_steps = -1;
    invalid(&c, "warmup_steps must be >= 0; got -1");

    tl_lr_schedule s = {.kind = TL_LR_CONSTANT, .learning_rate = NAN};
    cr_assert_eq(tl_lr_schedule_validate(&s), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "learning rate: learning_rate is not set");
    s.learning_rate = 0.1;
    cr_assert_eq(tl_lr_schedule_validate(&s), TL_OK);
}

Test(optim, step_prepare_rejects_negative_steps_and_bad_configs)
{
    tl_optimizer_config c = make(TL_OPTIM_ADAM, 0.001);
    tl_optimizer_step st;
    cr_assert_eq(tl_optimizer_step_prepare(&c, -1, &st), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "global_step must be >= 0; got -1") != NULL, "%s", tl_last_error());
    c.beta2 = 2.0;
    st.learning_rate = 5.0;
    cr_assert_eq(tl_optimizer_step_prepare(&c, 0, &st), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "beta2") != NULL);
    cr_assert_eq(st.learning_rate, 0.0);
}

/* ---- names and slots ---------------------------------------------------- */

Test(optim, kind_names_round_trip)
{
    for (int k = 0; k < TL_OPTIM_KIND_COUNT; k++) {
        tl_optimizer_kind got;
        cr_assert_eq(tl_optimizer_kind_parse(tl_optimizer_kind_name((tl_optimizer_kind)k), &got), TL_OK);
        cr_assert_eq(got, (tl_optimizer_kind)k);
    }
    tl_optimizer_kind got;
    cr_assert_eq(tl_optimizer_kind_parse("sgd", &got), TL_OK);
    cr_assert_eq(got, TL_OPTIM_SGD);
    cr_assert_eq(tl_optimizer_kind_parse("rmsprop", &got), TL_OK);
    cr_assert_eq(got, TL_OPTIM_RMSPROP);
    cr_assert_eq(tl_optimizer_kind_parse("adamw", &got), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "optimizer 'adamw' is unknown") != NULL, "%s", tl_last_error());
    cr_assert_str_eq(tl_optimizer_kind_name(TL_OPTIM_SGD), "GradientDescent");
}

/* The slots of cfg are exactly names[] with initial values inits[]. */
static void slots_are(const tl_optimizer_config *cfg, int n, const char *const *names, const double *inits)
{
    cr_assert_eq(tl_optimizer_num_slots(cfg), n);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(tl_optimizer_slot_name(cfg, i), names[i]);
        cr_assert_eq(tl_optimizer_slot_init(cfg, i), inits[i], "slot %s starts at %g", names[i],
                     tl_optimizer_slot_init(cfg, i));
    }
    cr_assert_null(tl_optimizer_slot_name(cfg, n));
    cr_assert_null(tl_optimizer_slot_name(cfg, -1));
    cr_assert(isnan(tl_optimizer_slot_init(cfg, n)));
}

Test(optim, slot_names_and_initial_values_are_tfs)
{
    tl_optimizer_config c = make(TL_OPTIM_SGD, 0.1);
    slots_are(&c, 0, NULL, NULL);
    c = make(TL_OPTIM_MOMENTUM, 0.1);
    slots_are(&c, 1, (const char *[]){"momentum"}, (double[]){0.0});
    c = make(TL_OPTIM_ADAGRAD, 0.1);
    slots_are(&c, 1, (const char *[]){"accumulator"}, (double[]){0.1});
    c.initial_accumulator_value = 0.25;
    slots_are(&c, 1, (const char *[]){"accumulator"}, (double[]){0.25});
    c = make(TL_OPTIM_ADAM, 0.1);
    slots_are(&c, 2, (const char *[]){"m", "v"}, (double[]){0.0, 0.0});
    c = make(TL_OPTIM_RMSPROP, 0.1);
    /* v1 RMSPropOptimizer starts "rms" at ones (Keras starts at zeros). */
    slots_are(&c, 2, (const char *[]){"rms", "momentum"}, (double[]){1.0, 0.0});
    c.centered = true;
    slots_are(&c, 3, (const char *[]){"rms", "momentum", "mg"}, (double[]){1.0, 0.0, 0.0});
}

Test(optim, init_slots_fills_only_the_optimizers_slots)
{
    float a[5], b[5], extra[5];
    for (int i = 0; i < 5; i++)
        a[i] = b[i] = extra[i] = -7.0f;
    float *slots[3] = {a, b, extra};
    tl_optimizer_config c = make(TL_OPTIM_RMSPROP, 0.1);
    tl_optimizer_init_slots(&c, slots, 5);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(a[i], 1.0f);
        cr_assert_eq(b[i], 0.0f);
        cr_assert_eq(extra[i], -7.0f);
    }
    c = make(TL_OPTIM_SGD, 0.1);
    tl_optimizer_init_slots(&c, NULL, 5); /* no slots: not read */
}

/* ---- schedules ---------------------------------------------------------- */

Test(optim_lr, constant)
{
    tl_lr_schedule s = {.kind = TL_LR_CONSTANT, .learning_rate = 0.25};
    cr_assert_eq(tl_lr_schedule_value(&s, 0), 0.25);
    cr_assert_eq(tl_lr_schedule_value(&s, 1000000), 0.25);
}

Test(optim_lr, exponential_staircase_steps_at_multiples)
{
    tl_lr_schedule s = {.kind = TL_LR_EXPONENTIAL_DECAY, .learning_rate = 0.1, .decay_steps = 100,
                        .decay_rate = 0.96, .staircase = true};
    cr_assert_eq(tl_lr_schedule_value(&s, 0), 0.1);
    cr_assert_eq(tl_lr_schedule_value(&s, 99), 0.1);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 100), 0.096, 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 199), 0.096, 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 250), 0.1 * 0.96 * 0.96, 1e-15);
    s.staircase = false;
    EXPECT_NEAR(tl_lr_schedule_value(&s, 50), 0.1 * sqrt(0.96), 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 100), 0.096, 1e-15);
}

Test(optim_lr, cosine_ends_at_alpha_times_lr)
{
    tl_lr_schedule s = {.kind = TL_LR_COSINE_DECAY, .learning_rate = 0.1, .decay_steps = 1000, .alpha = 0.1};
    cr_assert_eq(tl_lr_schedule_value(&s, 0), 0.1);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 500), 0.1 * (0.9 * 0.5 + 0.1), 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 250), 0.1 * (0.9 * 0.5 * (1 + sqrt(0.5)) + 0.1), 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 1000), 0.01, 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 123456789), 0.01, 1e-15); /* step clipped at decay_steps */
    s.alpha = 0.0;
    cr_assert_eq(tl_lr_schedule_value(&s, 1000), 0.0);
}

Test(optim_lr, warmup_ramps_from_zero_then_hands_over)
{
    /* BERT's rule: lr * step / W while step < W, then the decay at step. */
    tl_lr_schedule s = {.kind = TL_LR_CONSTANT, .learning_rate = 0.1, .warmup_steps = 10};
    cr_assert_eq(tl_lr_schedule_value(&s, 0), 0.0);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 1), 0.01, 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 5), 0.05, 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 9), 0.09, 1e-15);
    cr_assert_eq(tl_lr_schedule_value(&s, 10), 0.1);
    cr_assert_eq(tl_lr_schedule_value(&s, 11), 0.1);

    /* Wrapping a decay: the decay runs on the unshifted step. */
    s.kind = TL_LR_COSINE_DECAY;
    s.decay_steps = 100;
    EXPECT_NEAR(tl_lr_schedule_value(&s, 5), 0.05, 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 10), 0.1 * 0.5 * (1 + cos(3.141592653589793 * 0.1)), 1e-15);
    s.kind = TL_LR_EXPONENTIAL_DECAY;
    s.decay_steps = 10;
    s.decay_rate = 0.5;
    s.staircase = true;
    EXPECT_NEAR(tl_lr_schedule_value(&s, 9), 0.09, 1e-15);
    EXPECT_NEAR(tl_lr_schedule_value(&s, 10), 0.05, 1e-15);
}

Test(optim_lr, step_prepare_gives_the_schedule_and_adams_correction)
{
    tl_optimizer_config c = make(TL_OPTIM_ADAM, 0.001);
    tl_optimizer_step st;
    cr_assert_eq(tl_optimizer_step_prepare(&c, 0, &st), TL_OK);
    /* The first update uses t = 1: TF's beta powers start at beta. */
    cr_assert_eq(st.step, 0);
    cr_assert_eq(st.learning_rate, 0.001);
    EXPECT_NEAR(st.beta1_power, 0.9, 1e-15);
    EXPECT_NEAR(st.beta2_power, 0.999, 1e-15);
    EXPECT_NEAR(st.lr_t, 0.001 * sqrt(1 - 0.999) / (1 - 0.9), 1e-14);
    cr_assert_eq(tl_optimizer_step_prepare(&c, 9, &st), TL_OK);
    EXPECT_NEAR(st.beta1_power, pow(0.9, 10), 1e-15);
    EXPECT_NEAR(st.lr_t, 0.001 * sqrt(1 - pow(0.999, 10)) / (1 - pow(0.9, 10)), 1e-14);
    /* Far along, the correction vanishes. */
    cr_assert_eq(tl_optimizer_step_prepare(&c, 100000000, &st), TL_OK);
    EXPECT_NEAR(st.lr_t, 0.001, 1e-15);

    c = make(TL_OPTIM_SGD, 0.5);
    c.lr.kind = TL_LR_EXPONENTIAL_DECAY;
    c.lr.decay_steps = 2;
    c.lr.decay_rate = 0.5;
    c.lr.staircase = true;
    cr_assert_eq(tl_optimizer_step_prepare(&c, 5, &st), TL_OK); /* 0.5 * 0.5^floor(5 / 2) */
    cr_assert_eq(st.learning_rate, 0.125);
    cr_assert_eq(st.lr_t, 0.125);
}

/* ---- single updates, by hand -------------------------------------------- */

/* One float32 and one float64 update of 3 elements from param p and slots
 * s (num_slots rows); checks both against want_p and want_s to 1e-6 and 1e-14
 * relative. */
static void one_update(const tl_optimizer_config *cfg, int64_t step, const double *p, const double *g,
                       const double (*s)[3], const double *want_p, const double (*want_s)[3])
{
    tl_optimizer_step st;
    cr_assert_eq(tl_optimizer_step_prepare(cfg, step, &st), TL_OK, "%s", tl_last_error());
    int ns = tl_optimizer_num_slots(cfg);
    float pf[3], gf[3], sf[TL_OPTIM_MAX_SLOTS][3];
    double pd[3], sd[TL_OPTIM_MAX_SLOTS][3];
    float *sfp[TL_OPTIM_MAX_SLOTS] = {sf[0], sf[1], sf[2]};
    double *sdp[TL_OPTIM_MAX_SLOTS] = {sd[0], sd[1], sd[2]};
    for (int i = 0; i < 3; i++) {
        pf[i] = (float)p[i];
        pd[i] = p[i];
        gf[i] = (float)g[i];
        for (int k = 0; k < ns; k++) {
            sf[k][i] = (float)s[k][i];
            sd[k][i] = s[k][i];
        }
    }
    tl_optimizer_apply(cfg, &st, pf, gf, sfp, 3);
    tl_optimizer_apply_ref(cfg, &st, pd, g, sdp, 3);
    for (int i = 0; i < 3; i++) {
        EXPECT_NEAR(pf[i], want_p[i], 1e-6);
        EXPECT_NEAR(pd[i], want_p[i], 1e-14);
        for (int k = 0; k < ns; k++) {
            EXPECT_NEAR(sf[k][i], want_s[k][i], 1e-6);
            EXPECT_NEAR(sd[k][i], want_s[k][i], 1e-14);
        }
    }
}

static const double P[3] = {1.0, -2.0, 0.5};
static const double G[3] = {0.5, -1.0, 2.0};

Test(optim_update, gradient_descent)
{
    tl_optimizer_config c = make(TL_OPTIM_SGD, 0.1);
    one_update(&c, 0, P, G, NULL, (double[]){0.95, -1.9, 0.3}, NULL);
}

Test(optim_update, momentum_and_nesterov)
{
    tl_optimizer_config c = make(TL_OPTIM_MOMENTUM, 0.1);
    c.momentum = 0.9;
    const double acc[1][3] = {{1.0, 1.0, -1.0}};
    /* accum = 0.9 * accum + g = {1.4, -0.1, 1.1}; var -= 0.1 * accum */
    one_update(&c, 0, P, G, acc, (double[]){0.86, -1.99, 0.39}, (const double[][3]){{1.4, -0.1, 1.1}});
    /* nesterov: var -= 0.1 * g + 0.1 * 0.9 * accum */
    c.use_nesterov = true;
    one_update(&c, 0, P, G, acc, (double[]){1.0 - 0.05 - 0.126, -2.0 + 0.1 + 0.009, 0.5 - 0.2 - 0.099},
               (const double[][3]){{1.4, -0.1, 1.1}});
}

Test(optim_update, adagrad_has_no_epsilon)
{
    tl_optimizer_config c = make(TL_OPTIM_ADAGRAD, 0.1);
    /* accum = 0.1 + g^2 = {0.35, 1.1, 4.1}; var -= 0.1 * g / sqrt(accum) */
    const double acc[1][3] = {{0.1, 0.1, 0.1}};
    one_update(&c, 0, P, G, acc,
               (double[]){1.0 - 0.05 / sqrt(0.35), -2.0 + 0.1 / sqrt(1.1), 0.5 - 0.2 / sqrt(4.1)},
               (const double[][3]){{0.35, 1.1, 4.1}});
}

Test(optim_update, adam_first_step_and_epsilon_hat)
{
    tl_optimizer_config c = make(TL_OPTIM_ADAM, 0.1);
    c.epsilon = 0.01;
    const double zero[2][3] = {{0, 0, 0}, {0, 0, 0}};
    /* t = 1: m = 0.1 g, v = 0.001 g^2, lr_t = 0.1 * sqrt(0.001) / 0.1;
     * var -= lr_t * m / (sqrt(v) + 0.01) — epsilon outside the correction. */
    double lr_t = 0.1 * sqrt(0.001) / 0.1, want[3];
    for (int i = 0; i < 3; i++)
        want[i] = P[i] - lr_t * 0.1 * G[i] / (sqrt(0.001) * fabs(G[i]) + 0.01);
    one_update(&c, 0, P, G, zero, want,
               (const double[][3]){{0.05, -0.1, 0.2}, {0.001 * 0.25, 0.001 * 1.0, 0.001 * 4.0}});

    /* At step 4 (t = 5) from nonzero moments. */
    const double mv[2][3] = {{0.2, -0.3, 0.1}, {0.04, 0.5, 0.01}};
    double b1p = pow(0.9, 5), b2p = pow(0.999, 5), m[3], v[3];
    lr_t = 0.1 * sqrt(1 - b2p) / (1 - b1p);
    for (int i = 0; i < 3; i++) {
        m[i] = 0.9 * mv[0][i] + 0.1 * G[i];
        v[i] = 0.999 * mv[1][i] + 0.001 * G[i] * G[i];
        want[i] = P[i] - lr_t * m[i] / (sqrt(v[i]) + 0.01);
    }
    one_update(&c, 4, P, G, mv, want, (const double[][3]){{m[0], m[1], m[2]}, {v[0], v[1], v[2]}});
}

Test(optim_update, rmsprop_plain_and_centered)
{
    tl_optimizer_config c = make(TL_OPTIM_RMSPROP, 0.01);
    c.momentum = 0.5;
    c.epsilon = 0.001;
    /* From TF's initial slots: rms 1, momentum 0. */
    const double init[3][3] = {{1, 1, 1}, {0, 0, 0}, {0, 0, 0}};
    double ms[3], mom[3], want[3];
    for (int i = 0; i < 3; i++) {
        ms[i] = 0.9 + 0.1 * G[i] * G[i];
        mom[i] = 0.01 * G[i] / sqrt(ms[i] + 0.001); /* epsilon inside the sqrt */
        want[i] = P[i] - mom[i];
    }
    one_update(&c, 0, P, G, init, want, (const double[][3]){{ms[0], ms[1], ms[2]}, {mom[0], mom[1], mom[2]}});

    c.centered = true;
    const double st[3][3] = {{0.5, 0.6, 0.7}, {0.01, -0.02, 0.03}, {0.1, -0.2, 0.3}};
    double mg[3];
    for (int i = 0; i < 3; i++) {
        ms[i] = 0.9 * st[0][i] + 0.1 * G[i] * G[i];
        mg[i] = 0.9 * st[2][i] + 0.1 * G[i];
        mom[i] = 0.5 * st[1][i] + 0.01 * G[i] / sqrt(ms[i] - mg[i] * mg[i] + 0.001);
        want[i] = P[i] - mom[i];
    }
    one_update(&c, 0, P, G, st, want,
               (const double[][3]){{ms[0], ms[1], ms[2]}, {mom[0], mom[1], mom[2]}, {mg[0], mg[1], mg[2]}});
}

Test(optim_update, rows_equal_the_whole)
{
    /* The kernel is elementwise: applying it row by row (embedding rows)
     * gives the same bits as one call over the whole variable. */
    enum { n = 37, dim = 5 };
    tl_optimizer_config c = make(TL_OPTIM_RMSPROP, 0.01);
    c.centered = true;
    c.momentum = 0.9;
    float pa[n], pb[n], g[n], sa[3][n], sb[3][n];
    float *sap[3] = {sa[0], sa[1], sa[2]};
    for (int i = 0; i < n; i++) {
        pa[i] = pb[i] = (float)cos(0.7 * i);
        g[i] = (float)sin(0.37 * i);
    }
    tl_optimizer_init_slots(&c, sap, n);
    memcpy(sb, sa, sizeof sa);
    for (int64_t t = 0; t < 10; t++) {
        tl_optimizer_step st;
        cr_assert_eq(tl_optimizer_step_prepare(&c, t, &st), TL_OK);
        tl_optimizer_apply(&c, &st, pa, g, sap, n);
        for (int r = 0; r < n; r += dim) {
            int len = n - r < dim ? n - r : dim;
            float *rows[3] = {sb[0] + r, sb[1] + r, sb[2] + r};
            tl_optimizer_apply(&c, &st, pb + r, g + r, rows, len);
        }
    }
    cr_assert(memcmp(pa, pb, sizeof pa) == 0);
    cr_assert(memcmp(sa, sb, sizeof sa) == 0);
}

Test(optim_update, empty_and_slotless)
{
    tl_optimizer_config c = make(TL_OPTIM_SGD, 1.0);
    tl_optimizer_step st;
    cr_assert_eq(tl_optimizer_step_prepare(&c, 0, &st), TL_OK);
    float p = 1.0f, g = 0.25f;
    tl_optimizer_apply(&c, &st, &p, &g, NULL, 0);
    cr_assert_eq(p, 1.0f);
    tl_optimizer_apply(&c, &st, &p, &g, NULL, 1);
    cr_assert_eq(p, 0.75f);
    double pd = 1.0, gd = 0.25;
    tl_optimizer_apply_ref(&c, &st, &pd, &gd, NULL, 1);
    cr_assert_eq(pd, 0.75);
}

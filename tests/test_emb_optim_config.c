/* optim/ for TPU embeddings, configuration: TensorFlow's defaults, the
 * algorithm names and their parsing, slot names and initial values in
 * load order (spec §2.4), each validation error (spec §10 wording where TF
 * has one) and each tl_emb_step_prepare error. The update vectors are in
 * test_emb_optim.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tpuloop/emb_optim.h"

#define ASSERT_ERR(call, status, frag)                                                                      \
    do {                                                                                                    \
        tl_status st_ = (call);                                                                             \
        cr_assert_eq(st_, (status), "%s: got %s (%s), want %s", #call, tl_err_name(st_), tl_last_error(), \
                     tl_err_name(status));                                                                  \
        cr_assert(strstr(tl_last_error(), (frag)) != NULL, "message \"%s\" lacks \"%s\"", tl_last_error(), \
                  (frag));                                                                                  \
    } while (0)

static tl_emb_optimizer make(tl_emb_algorithm a, float lr)
{
    tl_emb_optimizer o;
    tl_emb_optimizer_default(a, &o);
    o.learning_rate = lr;
    return o;
}

/* A user-defined rule for the validation tests; never called. */
static void user_rule(const float *g, float *w, float *const *slots, int num_slots, float hyper, int dim, void *user)
{
    (void)g, (void)w, (void)slots, (void)num_slots, (void)hyper, (void)dim, (void)user;
}

/* ---- defaults, names, slots --------------------------------------------- */

Test(emb_optim_config, defaults_are_tensorflows)
{
    tl_emb_optimizer o;
    tl_emb_optimizer_default(TL_EMB_SGD, &o);
    cr_assert_eq(o.learning_rate, 0.01f);
    cr_assert_eq(o.lr_tag, -1);
    cr_assert_eq(o.gradient_accumulation_status, TL_EMB_ACCUM_UNSPECIFIED);
    cr_assert(tl_emb_optimizer_accumulates(&o), "UNSPECIFIED means ENABLED");
    cr_assert(!o.clipping_limits.has_lower && !o.clipping_limits.has_upper && o.weight_decay_factor == 0.0f);
    tl_emb_optimizer_default(TL_EMB_ADAGRAD, &o);
    cr_assert(o.learning_rate == 0.001f && o.initial_accumulator_value == 0.1f);
    tl_emb_optimizer_default(TL_EMB_ADAGRAD_MOMENTUM, &o);
    cr_assert(o.learning_rate == 0.001f && o.momentum == 0.0f && !o.use_nesterov && o.exponent == 2.0f &&
              o.beta2 == 1.0f && o.epsilon == 1e-10f);
    tl_emb_optimizer_default(TL_EMB_FTRL, &o);
    cr_assert(o.learning_rate == 0.001f && o.learning_rate_power == -0.5f && o.initial_accumulator_value == 0.1f &&
              o.l1_regularization_strength == 0.0f && o.beta == 0.0f && !o.multiply_linear_by_lr);
    tl_emb_optimizer_default(TL_EMB_ADAM, &o);
    cr_assert(o.learning_rate == 0.001f && o.beta1 == 0.9f && o.beta2 == 0.999f && o.epsilon == 1e-7f &&
              o.use_sum_inside_sqrt && !o.use_non_lazy);
    tl_emb_optimizer_default(TL_EMB_LION, &o);
    cr_assert(o.learning_rate == 0.01f && o.beta1 == 0.9f && o.beta2 == 0.99f);
    tl_emb_optimizer_default(TL_EMB_PROXIMAL_YOGI, &o);
    cr_assert(o.beta1 == 0.9f && o.beta2 == 0.999f && o.epsilon == 1e-3f && o.initial_accumulator_value == 1e-6f);
    tl_emb_optimizer_default(TL_EMB_RMSPROP, &o);
    cr_assert(o.rho == 0.9f && o.epsilon == 1e-10f && o.momentum == 0.0f);
    tl_emb_optimizer_default(TL_EMB_CENTERED_RMSPROP, &o);
    cr_assert(o.rho == 0.9f && o.epsilon == 1e-10f);
    tl_emb_optimizer_default(TL_EMB_ADADELTA, &o);
    cr_assert(o.rho == 0.95f && o.epsilon == 1e-6f);
    tl_emb_optimizer_default(TL_EMB_FREQUENCY_AWARE_ADAGRAD, &o);
    cr_assert(o.max_lr_multiplier == 10.0f && o.probability_exponent == 0.5f && o.accumulator_decay == 1.0f &&
              o.initial_accumulator_value == 0.1f && o.step_counter_tag == 0);
}

Test(emb_optim_config, defaults_validate)
{
    for (int a = 1; a < TL_EMB_ALGORITHM_COUNT; a++) {
        tl_emb_optimizer o;
        tl_emb_optimizer_default((tl_emb_algorithm)a, &o);
        tl_status st = tl_emb_optimizer_validate(&o);
        tl_status want = TL_OK;
        if (a == TL_EMB_ONLINE_YOGI || a == TL_EMB_MDL_ADAGRAD_LIGHT)
            want = TL_ENOTIMPL;
        else if (a == TL_EMB_FREQUENCY_ESTIMATOR || a == TL_EMB_USER_DEFINED)
            want = TL_EINVAL; /* required parameters: tau ..., user_fn */
        cr_assert_eq(st, want, "%s: %s", tl_emb_algorithm_name((tl_emb_algorithm)a), tl_last_error());
    }
}

Test(emb_optim_config, names_and_parse)
{
    static const char *names[TL_EMB_ALGORITHM_COUNT] = {
        "None", "StochasticGradientDescent", "Adagrad", "AdagradMomentum", "BoundedAdagrad",
        "FrequencyAwareAdagrad", "FTRL", "ADAM", "Momentum", "Lion", "RMSProp", "CenteredRMSProp",
        "MDLAdagradLight", "Adadelta", "ProximalAdagrad", "OnlineYogi", "ProximalYogi", "FrequencyEstimator",
        "UserDefinedProgram", "Assign"};
    for (int a = 0; a < TL_EMB_ALGORITHM_COUNT; a++) {
        cr_assert_str_eq(tl_emb_algorithm_name((tl_emb_algorithm)a), names[a]);
        if (a == 0)
            continue;
        tl_emb_algorithm got = TL_EMB_OPT_NONE;
        cr_assert_eq(tl_emb_algorithm_parse(names[a], &got), TL_OK, "%s", tl_last_error());
        cr_assert_eq(got, (tl_emb_algorithm)a);
    }
    cr_assert_str_eq(tl_emb_algorithm_name(TL_EMB_ALGORITHM_COUNT), "unknown");
    cr_assert_str_eq(tl_emb_algorithm_name((tl_emb_algorithm)-1), "unknown");

    static const struct {
        const char *text;
        tl_emb_algorithm want;
    } other[] = {{"sgd", TL_EMB_SGD},
                 {"stochastic_gradient_descent", TL_EMB_SGD},
                 {"adam", TL_EMB_ADAM},
                 {"Adam", TL_EMB_ADAM},
                 {"ftrl", TL_EMB_FTRL},
                 {"adagrad_momentum", TL_EMB_ADAGRAD_MOMENTUM},
                 {"rms_prop", TL_EMB_RMSPROP},
                 {"rmsprop", TL_EMB_RMSPROP},
                 {"centered_rms_prop", TL_EMB_CENTERED_RMSPROP},
                 {"centered_rmsprop", TL_EMB_CENTERED_RMSPROP},
                 {"frequency_aware_adagrad", TL_EMB_FREQUENCY_AWARE_ADAGRAD},
                 {"PROXIMAL_YOGI", TL_EMB_PROXIMAL_YOGI},
                 {"user_defined_program", TL_EMB_USER_DEFINED},
                 {"assign", TL_EMB_ASSIGN}};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        tl_emb_algorithm got = TL_EMB_OPT_NONE;
        cr_assert_eq(tl_emb_algorithm_parse(other[i].text, &got), TL_OK, "%s: %s", other[i].text, tl_last_error());
        cr_assert_eq(got, other[i].want, "%s", other[i].text);
    }
    tl_emb_algorithm got;
    ASSERT_ERR(tl_emb_algorithm_parse("adamw", &got), TL_EINVAL, "embedding optimizer 'adamw' is unknown");
    cr_assert(strstr(tl_last_error(), "ProximalYogi") != NULL, "the message lists the names");
    ASSERT_ERR(tl_emb_algorithm_parse("None", &got), TL_EINVAL, "'None' is unknown");
    ASSERT_ERR(tl_emb_algorithm_parse(NULL, &got), TL_EINVAL, "(null)");
}

Test(emb_optim_config, slot_names_in_load_order)
{
    static const struct {
        tl_emb_algorithm a;
        const char *slots[3];
    } table[] = {
        {TL_EMB_SGD, {NULL}},
        {TL_EMB_ADAGRAD, {"accumulators"}},
        {TL_EMB_ADAGRAD_MOMENTUM, {"accumulators", "momenta"}},
        {TL_EMB_BOUNDED_ADAGRAD, {"accumulators"}},
        {TL_EMB_FREQUENCY_AWARE_ADAGRAD, {"accumulators", "counters"}},
        {TL_EMB_FTRL, {"accumulators", "linears"}},
        {TL_EMB_ADAM, {"momenta", "velocities"}},
        {TL_EMB_MOMENTUM, {"momenta"}},
        {TL_EMB_LION, {"momenta"}},
        {TL_EMB_RMSPROP, {"ms", "mom"}},
        {TL_EMB_CENTERED_RMSPROP, {"ms", "mom", "mg"}},
        {TL_EMB_MDL_ADAGRAD_LIGHT, {"accumulators", "weights", "benefits"}},
        {TL_EMB_ADADELTA, {"accumulators", "updates"}},
        {TL_EMB_PROXIMAL_ADAGRAD, {"accumulators"}},
        {TL_EMB_ONLINE_YOGI, {"vs", "linears"}},
        {TL_EMB_PROXIMAL_YOGI, {"v", "m"}},
        {TL_EMB_FREQUENCY_ESTIMATOR, {"last_hit_step"}},
        {TL_EMB_USER_DEFINED, {NULL}},
        {TL_EMB_ASSIGN, {NULL}},
    };
    cr_assert_eq(sizeof table / sizeof table[0], (size_t)TL_EMB_ALGORITHM_COUNT - 1);
    for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
        tl_emb_optimizer o = make(table[t].a, 0.1f);
        const char *name = tl_emb_algorithm_name(table[t].a);
        int k = 0;
        while (k < 3 && table[t].slots[k] != NULL)
            k++;
        cr_assert_eq(tl_emb_num_slots(&o), k, "%s", name);
        for (int i = 0; i < k; i++)
            cr_assert_str_eq(tl_emb_slot_name(&o, i), table[t].slots[i], "%s slot %d", name, i);
        cr_assert_null(tl_emb_slot_name(&o, k));
        cr_assert_null(tl_emb_slot_name(&o, -1));
        cr_assert(isnan(tl_emb_slot_init(&o, k)) && isnan(tl_emb_slot_init(&o, -1)), "%s", name);
    }
}

Test(emb_optim_config, slot_initial_values)
{
    /* The accumulator-type slots start at initial_accumulator_value, the rest at 0. */
    static const struct {
        tl_emb_algorithm a;
        float want[3];
    } table[] = {
        {TL_EMB_ADAGRAD, {0.25f}},
        {TL_EMB_ADAGRAD_MOMENTUM, {0.0f, 0.0f}}, /* "both slots start at 0" */
        {TL_EMB_BOUNDED_ADAGRAD, {0.25f}},
        {TL_EMB_FREQUENCY_AWARE_ADAGRAD, {0.25f, 0.0f}},
        {TL_EMB_FTRL, {0.25f, 0.0f}},
        {TL_EMB_ADAM, {0.0f, 0.0f}},
        {TL_EMB_MOMENTUM, {0.0f}},
        {TL_EMB_LION, {0.0f}},
        {TL_EMB_RMSPROP, {0.0f, 0.0f}},
        {TL_EMB_CENTERED_RMSPROP, {0.0f, 0.0f, 0.0f}},
        {TL_EMB_ADADELTA, {0.0f, 0.0f}},
        {TL_EMB_PROXIMAL_ADAGRAD, {0.25f}},
        {TL_EMB_PROXIMAL_YOGI, {0.25f, 0.0f}},
        {TL_EMB_FREQUENCY_ESTIMATOR, {0.0f}},
    };
    for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
        tl_emb_optimizer o = make(table[t].a, 0.1f);
        o.initial_accumulator_value = 0.25f;
        for (int i = 0; i < tl_emb_num_slots(&o); i++)
            cr_assert_eq(tl_emb_slot_init(&o, i), table[t].want[i], "%s slot %d: %g",
                         tl_emb_algorithm_name(table[t].a), i, (double)tl_emb_slot_init(&o, i));
    }
}

/* ---- validation --------------------------------------------------------- */

static void invalid(const tl_emb_optimizer *o, tl_status want, const char *frag)
{
    ASSERT_ERR(tl_emb_optimizer_validate(o), want, frag);
}

Test(emb_optim_config, validation_of_the_common_fields)
{
    tl_emb_optimizer o = make(TL_EMB_OPT_NONE, 0.1f);
    invalid(&o, TL_EINVAL, "No optimization algorithm specified");
    o.algorithm = TL_EMB_ALGORITHM_COUNT;
    invalid(&o, TL_EINVAL, "algorithm 20 is unknown");

    o = make(TL_EMB_ADAGRAD, -0.5f);
    invalid(&o, TL_EINVAL, "Adagrad: learning_rate must be finite and >= 0; got -0.5");
    o.learning_rate = INFINITY;
    invalid(&o, TL_EINVAL, "learning_rate must be finite");
    o.lr_tag = 0; /* the constant is unused */
    cr_assert_eq(tl_emb_optimizer_validate(&o), TL_OK, "%s", tl_last_error());
    o.lr_tag = -2;
    invalid(&o, TL_EINVAL, "Adagrad: lr_tag must be >= 0 (a dynamic learning rate) or -1 (the constant); got -2");

    o = make(TL_EMB_ADAGRAD, 0.1f);
    o.clipping_limits = (tl_emb_limits){.has_lower = true, .has_upper = true, .lower = 1.0f, .upper = -1.0f};
    invalid(&o, TL_EINVAL, "Adagrad: clipping_limits.lower (1) must be <= clipping_limits.upper (-1)");
    o.clipping_limits = (tl_emb_limits){.has_upper = true, .upper = NAN};
    invalid(&o, TL_EINVAL, "clipping_limits has a NaN bound");
    o.clipping_limits = (tl_emb_limits){0};
    o.gradient_clipping_limits = (tl_emb_limits){.has_lower = true, .has_upper = true, .lower = 2.0f, .upper = 1.0f};
    invalid(&o, TL_EINVAL, "gradient_clipping_limits.lower (2) must be <= gradient_clipping_limits.upper (1)");

    o = make(TL_EMB_SGD, 0.1f);
    o.weight_decay_factor = -0.01f;
    invalid(&o, TL_EINVAL, "StochasticGradientDescent: weight_decay_factor must be finite and >= 0; got -0.01");

    o = make(TL_EMB_SGD, 0.1f);
    o.gradient_accumulation_status = (tl_emb_accumulation)3;
    invalid(&o, TL_EINVAL, "gradient_accumulation_status must be 0 (UNSPECIFIED), 1 (ENABLED) or 2 (DISABLED); got 3");
    o.gradient_accumulation_status = TL_EMB_ACCUM_DISABLED;
    cr_assert_not(tl_emb_optimizer_accumulates(&o));
    cr_assert_eq(tl_emb_optimizer_validate(&o), TL_OK);
    o.low_dimensional_packing_status = 3;
    invalid(&o, TL_EINVAL, "low_dimensional_packing_status must be");
    o.low_dimensional_packing_status = 1;
    o.hot_id_replication_status = 4;
    invalid(&o, TL_EINVAL, "hot_id_replication_status must be");
    o.hot_id_replication_status = 3; /* MIGRATION_ONLY: accepted, no effect */
    cr_assert_eq(tl_emb_optimizer_validate(&o), TL_OK, "%s", tl_last_error());
}

Test(emb_optim_config, validation_of_accumulation_rules)
{
    tl_emb_optimizer o = make(TL_EMB_SGD, 0.1f);
    o.gradient_accumulation_status = TL_EMB_ACCUM_DISABLED;
    o.gradient_clipping_limits.has_upper = true;
    o.gradient_clipping_limits.upper = 1.0f;
    invalid(&o, TL_EINVAL, "When `use_gradient_accumulation` is False, gradient clipping cannot be used");
    cr_assert(strstr(tl_last_error(), "StochasticGradientDescent: gradient_clipping_limits") != NULL, "%s",
              tl_last_error());

    o = make(TL_EMB_ADAM, 0.1f);
    o.use_non_lazy = true;
    o.gradient_accumulation_status = TL_EMB_ACCUM_DISABLED;
    invalid(&o, TL_EINVAL, "When disabling lazy Adam (`lazy_adam=False`), gradient accumulation must be used.");
    o.gradient_accumulation_status = TL_EMB_ACCUM_ENABLED;
    cr_assert_eq(tl_emb_optimizer_validate(&o), TL_OK, "%s", tl_last_error());

    o = make(TL_EMB_LION, 0.1f);
    o.use_non_lazy = true;
    o.gradient_accumulation_status = TL_EMB_ACCUM_DISABLED;
    invalid(&o, TL_EINVAL, "When disabling lazy Lion (`lazy_lion=False`), gradient accumulation must be used.");

    /* Seven user slots leave no room for the hidden accumulator slot. */
    o = make(TL_EMB_USER_DEFINED, 0.1f);
    o.user_fn = user_rule;
    o.user_num_slots = 7;
    invalid(&o, TL_EINVAL,
            "Optimization algorithm UserDefinedProgram does not support gradient accumulation but parameters "
            "specify it.");
    o.gradient_accumulation_status = TL_EMB_ACCUM_DISABLED;
    cr_assert_eq(tl_emb_optimizer_validate(&o), TL_OK, "%s", tl_last_error());
    o.user_num_slots = 6;
    o.gradient_accumulation_status = TL_EMB_ACCUM_ENABLED;
    cr_assert_eq(tl_emb_optimizer_validate(&o), TL_OK, "%s", tl_last_error());
    o.user_num_slots = 8;
    invalid(&o, TL_EINVAL, "UserDefinedProgram: user_num_slots must be in [0, 7]; got 8");
    o.user_num_slots = 1;
    o.slot_init[0] = NAN;
    invalid(&o, TL_EINVAL, "UserDefinedProgram: slot_init[0] must be finite");
    o.slot_init[0] = 0.0f;
    o.user_fn = NULL;
    invalid(&o, TL_EINVAL, "UserDefinedProgram: user_fn is NULL");
}

Test(emb_optim_config, validation_of_simulated_quantization)
{
    tl_emb_optimizer o = make(TL_EMB_SGD, 0.1f);
    o.simulated_quantization.enabled = true;
    o.simulated_quantization.num_buckets = 5;
    o.simulated_quantization.clipping_limits = (tl_emb_limits){.has_lower = true, .lower = -1.0f};
    invalid(&o, TL_EINVAL, "simulated_quantization.clipping_limits needs both a lower and an upper bound");
    o.simulated_quantization.clipping_limits.has_upper = true;
    o.simulated_quantization.clipping_limits.upper = -1.0f;
    invalid(&o, TL_EINVAL, "finite with lower < upper; got [-1, -1]");
    o.simulated_quantization.clipping_limits.upper = 1.0f;
    o.simulated_quantization.num_buckets = 1;
    invalid(&o, TL_EINVAL, "simulated_quantization.num_buckets must be >= 2; got 1");
}

Test(emb_optim_config, unpublished_algorithms_are_not_implemented)
{
    tl_emb_optimizer o = make(TL_EMB_ONLINE_YOGI, 0.1f);
    invalid(&o, TL_ENOTIMPL, "OnlineYogi");
    cr_assert(strstr(tl_last_error(), "TensorFlow has not published") != NULL, "%s", tl_last_error());
    o = make(TL_EMB_MDL_ADAGRAD_LIGHT, 0.1f);
    invalid(&o, TL_ENOTIMPL, "MDLAdagradLight");
    cr_assert(strstr(tl_last_error(), "TensorFlow has not published") != NULL, "%s", tl_last_error());
}

/* Sets a field of a fresh default optimizer and expects the message. */
#define BAD_FIELD(alg, field, value, frag)            \
    do {                                              \
        tl_emb_optimizer o_ = make((alg), 0.1f);      \
        o_.field = (value);                           \
        invalid(&o_, TL_EINVAL, (frag));              \
    } while (0)

Test(emb_optim_config, validation_of_each_algorithms_ranges)
{
    const char *pos = "Argument `initial_accumulator_value` must be a positive float; got 0";
    BAD_FIELD(TL_EMB_ADAGRAD, initial_accumulator_value, 0.0f, "Adagrad: Argument `initial_accumulator_value`");
    BAD_FIELD(TL_EMB_ADAGRAD, initial_accumulator_value, 0.0f, pos);
    BAD_FIELD(TL_EMB_FTRL, initial_accumulator_value, 0.0f, "FTRL: Argument `initial_accumulator_value`");
    BAD_FIELD(TL_EMB_PROXIMAL_ADAGRAD, initial_accumulator_value, -1.0f, "ProximalAdagrad: Argument");
    BAD_FIELD(TL_EMB_BOUNDED_ADAGRAD, initial_accumulator_value, 0.0f, "BoundedAdagrad: Argument");
    BAD_FIELD(TL_EMB_FREQUENCY_AWARE_ADAGRAD, initial_accumulator_value, 0.0f, "FrequencyAwareAdagrad: Argument");

    BAD_FIELD(TL_EMB_ADAGRAD_MOMENTUM, epsilon, 0.0f, "AdagradMomentum: epsilon must be positive; got 0");
    BAD_FIELD(TL_EMB_ADAGRAD_MOMENTUM, exponent, -1.0f, "AdagradMomentum: exponent must be positive; got -1");
    BAD_FIELD(TL_EMB_ADAGRAD_MOMENTUM, beta2, 1.5f, "AdagradMomentum: beta2 must be in [0, 1]; got 1.5");
    BAD_FIELD(TL_EMB_ADAGRAD_MOMENTUM, momentum, -0.1f, "AdagradMomentum: momentum must be in [0, 1]");
    BAD_FIELD(TL_EMB_BOUNDED_ADAGRAD, max_var_update, -1.0f, "BoundedAdagrad: max_var_update must be >= 0");
    BAD_FIELD(TL_EMB_BOUNDED_ADAGRAD, max_accumulator, NAN, "BoundedAdagrad: max_accumulator must be >= 0");
    BAD_FIELD(TL_EMB_FREQUENCY_AWARE_ADAGRAD, max_lr_multiplier, 0.0f, "max_lr_multiplier must be positive");
    BAD_FIELD(TL_EMB_FREQUENCY_AWARE_ADAGRAD, probability_exponent, -1.0f, "probability_exponent must be >= 0");
    BAD_FIELD(TL_EMB_FREQUENCY_AWARE_ADAGRAD, accumulator_decay, 2.0f, "accumulator_decay must be in [0, 1]");
    BAD_FIELD(TL_EMB_FREQUENCY_AWARE_ADAGRAD, l1_regularization_strength, -1.0f, "l1_regularization_strength");
    BAD_FIELD(TL_EMB_FREQUENCY_AWARE_ADAGRAD, step_counter_tag, -1,
              "FrequencyAwareAdagrad: step_counter_tag must be >= 0");
    BAD_FIELD(TL_EMB_FTRL, learning_rate_power, 0.5f, "FTRL: learning_rate_power must be <= 0; got 0.5");
    BAD_FIELD(TL_EMB_FTRL, l2_regularization_strength, -1.0f, "FTRL: l2_regularization_strength must be >= 0");
    BAD_FIELD(TL_EMB_FTRL, beta, -1.0f, "FTRL: beta must be >= 0; got -1");
    BAD_FIELD(TL_EMB_FTRL, learning_rate, 0.0f, "FTRL: learning_rate must be positive without multiply_linear_by_lr");
    BAD_FIELD(TL_EMB_ADAM, beta1, 1.0f, "ADAM: beta1 must be in [0, 1); got 1");
    BAD_FIELD(TL_EMB_ADAM, beta2, -0.5f, "ADAM: beta2 must be in [0, 1); got -0.5");
    BAD_FIELD(TL_EMB_ADAM, epsilon, 0.0f, "ADAM: epsilon must be positive; got 0");
    BAD_FIELD(TL_EMB_LION, beta2, 1.0f, "Lion: beta2 must be in [0, 1); got 1");
    BAD_FIELD(TL_EMB_MOMENTUM, momentum, 1.5f, "Momentum: momentum must be in [0, 1]; got 1.5");
    BAD_FIELD(TL_EMB_RMSPROP, rho, -0.1f, "RMSProp: rho must be in [0, 1]");
    BAD_FIELD(TL_EMB_RMSPROP, momentum, 2.0f, "RMSProp: momentum must be in [0, 1]");
    BAD_FIELD(TL_EMB_CENTERED_RMSPROP, epsilon, 0.0f, "CenteredRMSProp: epsilon must be positive");
    BAD_FIELD(TL_EMB_ADADELTA, epsilon, -1.0f, "Adadelta: epsilon must be positive; got -1");
    BAD_FIELD(TL_EMB_ADADELTA, rho, 1.5f, "Adadelta: rho must be in [0, 1]; got 1.5");
    BAD_FIELD(TL_EMB_PROXIMAL_ADAGRAD, l1_regularization_strength, -1.0f, "ProximalAdagrad: l1_regularization");
    BAD_FIELD(TL_EMB_PROXIMAL_YOGI, initial_accumulator_value, -1.0f, "ProximalYogi: initial_accumulator_value");
    BAD_FIELD(TL_EMB_PROXIMAL_YOGI, epsilon, 0.0f, "ProximalYogi: epsilon must be positive");
    BAD_FIELD(TL_EMB_PROXIMAL_YOGI, beta1, 1.0f, "ProximalYogi: beta1 must be in [0, 1)");

    tl_emb_optimizer o = make(TL_EMB_FREQUENCY_ESTIMATOR, 1.0f);
    invalid(&o, TL_EINVAL, "FrequencyEstimator: tau, max_delta, outlier_threshold and weight_exponent are required");
    o.tau = INFINITY;
    o.max_delta = 10.0f;
    o.outlier_threshold = 1.0f;
    o.weight_exponent = 1.0f;
    invalid(&o, TL_EINVAL, "FrequencyEstimator: tau must be finite; got inf");
    /* TensorFlow documents tau in (0, 1) and checks nothing: any finite tau
     * is valid (the readers warn). */
    static const float taus[] = {0.0f, 1.0f, -0.5f, 2.0f};
    for (size_t i = 0; i < sizeof taus / sizeof taus[0]; i++) {
        o.tau = taus[i];
        cr_assert_eq(tl_emb_optimizer_validate(&o), TL_OK, "tau %g: %s", (double)taus[i], tl_last_error());
    }
    o.tau = 0.5f;
    o.max_delta = 0.0f;
    invalid(&o, TL_EINVAL, "FrequencyEstimator: max_delta must be positive");

    /* FTRL's multiply_linear_by_lr form does not divide by lr. */
    o = make(TL_EMB_FTRL, 0.0f);
    o.multiply_linear_by_lr = true;
    cr_assert_eq(tl_emb_optimizer_validate(&o), TL_OK, "%s", tl_last_error());
}

/* ---- step_prepare ------------------------------------------------------- */

Test(emb_optim_config, step_prepare_resolves_dynamic_rates)
{
    tl_emb_optimizer o = make(TL_EMB_ADAGRAD, 0.25f);
    tl_emb_step st;
    cr_assert_eq(tl_emb_step_prepare(&o, NULL, 0, &st), TL_OK);
    cr_assert_eq(st.learning_rate, 0.25f);
    float rates[3] = {0.5f, 0.125f, NAN};
    o.lr_tag = 1;
    cr_assert_eq(tl_emb_step_prepare(&o, rates, 3, &st), TL_OK);
    cr_assert_eq(st.learning_rate, 0.125f);
    o.lr_tag = 2;
    ASSERT_ERR(tl_emb_step_prepare(&o, rates, 3, &st), TL_EINVAL, "Adagrad: learning rate (dynamic tag 2) is nan");
    o.lr_tag = 2;
    ASSERT_ERR(tl_emb_step_prepare(&o, rates, 1, &st), TL_EINVAL, "learning rate tag 2 but 1 learning rates were sent");
    ASSERT_ERR(tl_emb_step_prepare(&o, NULL, 0, &st), TL_EINVAL, "learning rate tag 2 but 0 learning rates were sent");
    ASSERT_ERR(tl_emb_step_prepare(&o, NULL, 3, &st), TL_EINVAL, "want n >= 0 and an array when n > 0");
    ASSERT_ERR(tl_emb_step_prepare(&o, rates, -1, &st), TL_EINVAL, "want n >= 0");

    /* FrequencyAwareAdagrad's step counter is a second tag. */
    o = make(TL_EMB_FREQUENCY_AWARE_ADAGRAD, 0.1f);
    o.lr_tag = 0;
    o.step_counter_tag = 1;
    cr_assert_eq(tl_emb_step_prepare(&o, rates, 2, &st), TL_OK, "%s", tl_last_error());
    cr_assert(st.learning_rate == 0.5f && st.step_counter == 0.125f);
    ASSERT_ERR(tl_emb_step_prepare(&o, rates, 1, &st), TL_EINVAL,
               "FrequencyAwareAdagrad: step_counter tag 1 but 1 learning rates were sent");
    o.step_counter_tag = 2;
    ASSERT_ERR(tl_emb_step_prepare(&o, rates, 3, &st), TL_EINVAL, "step_counter (dynamic tag 2) is nan");

    /* FTRL without multiply_linear_by_lr divides by the learning rate. */
    float zero = 0.0f;
    o = make(TL_EMB_FTRL, 0.1f);
    o.lr_tag = 0;
    ASSERT_ERR(tl_emb_step_prepare(&o, &zero, 1, &st), TL_EINVAL, "FTRL: the learning rate (dynamic tag 0) is 0");
    o.multiply_linear_by_lr = true;
    cr_assert_eq(tl_emb_step_prepare(&o, &zero, 1, &st), TL_OK, "%s", tl_last_error());
}

/* The JSON `embedding` section (tpuloop/emb_spec.h): a full config whose
 * every field is checked in the tl_emb_config it makes, the defaults of
 * TensorFlow's Python classes, and each error. JSON is written with ' for "
 * to stay readable. */
#define _GNU_SOURCE /* asprintf */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tpuloop/emb_spec.h"

/* text with ' turned into " (malloc'd). */
static char *dq(const char *squoted)
{
    char *s = strdup(squoted);
    cr_assert_not_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    return s;
}

static tl_status from_json(const char *squoted, tl_emb_spec **out)
{
    char *t = dq(squoted);
    tl_status st = tl_emb_spec_from_json(t, strlen(t), out);
    free(t);
    return st;
}

static tl_emb_spec *json_ok(const char *squoted)
{
    tl_emb_spec *s = NULL;
    tl_status st = from_json(squoted, &s);
    cr_assert_eq(st, TL_OK, "%s: %s", tl_err_name(st), tl_last_error());
    cr_assert_not_null(s);
    return s;
}

/* squoted fails with want and a message holding frag, leaving no spec. */
static void json_fails(const char *squoted, tl_status want, const char *frag)
{
    tl_emb_spec *s = (tl_emb_spec *)&s;
    tl_status st = from_json(squoted, &s);
    cr_assert_eq(st, want, "%s: got %s (%s), want %s", squoted, tl_err_name(st), tl_last_error(), tl_err_name(want));
    cr_assert(strstr(tl_last_error(), frag) != NULL, "%s: message \"%s\" lacks \"%s\"", squoted, tl_last_error(),
              frag);
    cr_assert_null(s);
}

static const char *const full =
    "{'tables': ["
    "  {'name': 'user', 'vocabulary_size': 3000000000, 'dim': 8, 'combiner': 'sum',"
    "   'initializer': {'type': 'uniform', 'minval': -0.5, 'maxval': 0.25},"
    "   'optimizer': {'type': 'adam', 'learning_rate': 0.002, 'beta_1': 0.8, 'beta_2': 0.99, 'epsilon': 1e-5,"
    "                 'lazy_adam': false, 'sum_inside_sqrt': false, 'clipvalue': 2.5,"
    "                 'clip_weight_min': -3, 'clip_weight_max': null, 'weight_decay_factor': 0.01,"
    "                 'multiply_weight_decay_factor_by_learning_rate': true}},"
    "  {'name': 'item', 'vocabulary_size': 100, 'dim': 4, 'combiner': 'sqrtn', 'initializer': 'zeros'},"
    "  {'vocabulary_size': 7, 'dim': 1, 'initializer': {'type': 'row_id', 'offset': 5},"
    "   'quantization_config': {'num_buckets': 16, 'lower': -1, 'upper': 1}},"
    "  {'name': 'ftrl', 'vocabulary_size': 9, 'dim': 2, 'initializer': {'type': 'constant', 'value': 0.5},"
    "   'optimizer': {'type': 'ftrl', 'learning_rate_tag': 0, 'learning_rate_power': -0.25,"
    "                 'l1_regularization_strength': 0.1, 'l2_regularization_strength': 0.2, 'beta': 0.3,"
    "                 'initial_accumulator_value': 0.4, 'multiply_linear_by_learning_rate': true,"
    "                 'allow_zero_accumulator': true, 'use_gradient_accumulation': false}},"
    "  {'name': 'tn', 'vocabulary_size': 4, 'dim': 3, 'initializer': {'type': 'truncated_normal', 'mean': 1,"
    "   'stddev': 0.5}, 'optimizer': {'type': 'momentum', 'momentum': 0.7, 'use_nesterov': true,"
    "   'clipvalue': [null, 4], 'simulated_quantization': {'num_buckets': 3, 'lower': 0, 'upper': 2},"
    "   'low_dimensional_packing_status': true, 'hot_id_replication_status': 'migration_only'}}],"
    " 'features': [{'name': 'watched', 'table': 'user', 'max_sequence_length': 10},"
    "              {'table': 1, 'combiner': 'sum'}, {'name': 'q', 'table': 'table_2'},"
    "              {'name': 'f', 'table': 'ftrl'}, {'name': 't', 'table': 4}],"
    " 'optimizer': {'type': 'adagrad', 'learning_rate': 0.05, 'initial_accumulator_value': 0.2},"
    " 'mode': 'inference', 'num_tensor_cores': 4, 'batch_size_per_tensor_core': 16, 'num_shards': 2,"
    " 'sharding_strategy': 'mod', 'pipeline_execution_with_tensor_core': true, 'bounds_check_mode': 'warning',"
    " 'seed': 1234567890123}";

Test(emb_spec_json, full_config_round_trips_into_the_config)
{
    tl_emb_spec *s = json_ok(full);
    const tl_emb_config *c = tl_emb_spec_config(s);
    cr_assert_eq(c->mode, TL_EMB_MODE_INFERENCE);
    cr_assert_eq(c->num_tensor_cores, 4);
    cr_assert_eq(c->batch_size_per_tensor_core, 16);
    cr_assert_eq(c->num_shards, 2);
    cr_assert_eq(c->sharding_strategy, TL_EMB_MOD);
    cr_assert(c->pipeline_execution_with_tensor_core);
    cr_assert_eq(c->bounds_check_mode, TL_EMB_BOUNDS_WARNING);
    cr_assert_eq(c->seed, 1234567890123u);
    cr_assert_eq(c->optimizer.algorithm, TL_EMB_ADAGRAD);
    cr_assert_eq(c->optimizer.learning_rate, 0.05f);
    cr_assert_eq(c->optimizer.initial_accumulator_value, 0.2f);

    cr_assert_eq(c->num_tables, 5);
    const tl_emb_table_config *t = c->tables;
    cr_assert_str_eq(t[0].name, "user");
    cr_assert_eq(t[0].vocabulary_size, 3000000000LL);
    cr_assert_eq(t[0].dim, 8);
    cr_assert_eq(t[0].combiner, TL_EMB_COMBINER_SUM);
    cr_assert_eq(t[0].initializer.kind, TL_EMB_INIT_UNIFORM);
    cr_assert(t[0].initializer.minval == -0.5 && t[0].initializer.maxval == 0.25);
    const tl_emb_optimizer *o = t[0].optimizer;
    cr_assert_not_null(o);
    cr_assert_eq(o->algorithm, TL_EMB_ADAM);
    cr_assert_eq(o->learning_rate, 0.002f);
    cr_assert_eq(o->lr_tag, -1);
    cr_assert(o->beta1 == 0.8f && o->beta2 == 0.99f && o->epsilon == 1e-5f);
    cr_assert(o->use_non_lazy, "lazy_adam false");
    cr_assert_not(o->use_sum_inside_sqrt);
    cr_assert(o->gradient_clipping_limits.has_lower && o->gradient_clipping_limits.lower == -2.5f);
    cr_assert(o->gradient_clipping_limits.has_upper && o->gradient_clipping_limits.upper == 2.5f);
    cr_assert(o->clipping_limits.has_lower && o->clipping_limits.lower == -3.0f);
    cr_assert_not(o->clipping_limits.has_upper, "clip_weight_max null: no bound");
    cr_assert(o->weight_decay_factor == 0.01f && o->multiply_weight_decay_factor_by_learning_rate);

    cr_assert_str_eq(t[1].name, "item");
    cr_assert_eq(t[1].combiner, TL_EMB_COMBINER_SQRTN);
    cr_assert_eq(t[1].initializer.kind, TL_EMB_INIT_ZEROS);
    cr_assert_null(t[1].optimizer, "no optimizer: the global one");

    cr_assert_str_eq(t[2].name, "table_2");
    cr_assert_eq(t[2].combiner, TL_EMB_COMBINER_MEAN);
    cr_assert(t[2].initializer.kind == TL_EMB_INIT_ROW_ID && t[2].initializer.offset == 5);
    o = t[2].optimizer;
    cr_assert_not_null(o, "quantization_config gives the table its own copy of the global optimizer");
    cr_assert(o->algorithm == TL_EMB_ADAGRAD && o->learning_rate == 0.05f && o->initial_accumulator_value == 0.2f);
    cr_assert(o->simulated_quantization.enabled && o->simulated_quantization.num_buckets == 16);
    cr_assert(o->simulated_quantization.clipping_limits.lower == -1 && o->simulated_quantization.clipping_limits.upper == 1);
    cr_assert_not(c->optimizer.simulated_quantization.enabled, "the global optimizer is left alone");

    cr_assert(t[3].initializer.kind == TL_EMB_INIT_CONSTANT && t[3].initializer.value == 0.5);
    o = t[3].optimizer;
    cr_assert_eq(o->algorithm, TL_EMB_FTRL);
    cr_assert_eq(o->lr_tag, 0);
    cr_assert(o->learning_rate_power == -0.25f && o->l1_regularization_strength == 0.1f &&
              o->l2_regularization_strength == 0.2f && o->beta == 0.3f && o->initial_accumulator_value == 0.4f &&
              o->multiply_linear_by_lr);
    cr_assert_eq(o->gradient_accumulation_status, TL_EMB_ACCUM_DISABLED);

    cr_assert(t[4].initializer.kind == TL_EMB_INIT_TRUNCATED_NORMAL && t[4].initializer.mean == 1 &&
              t[4].initializer.stddev == 0.5);
    o = t[4].optimizer;
    cr_assert(o->algorithm == TL_EMB_MOMENTUM && o->momentum == 0.7f && o->use_nesterov);
    cr_assert_eq(o->learning_rate, 0.01f, "Momentum's default");
    cr_assert(!o->gradient_clipping_limits.has_lower && o->gradient_clipping_limits.upper == 4);
    cr_assert(o->simulated_quantization.enabled && o->simulated_quantization.num_buckets == 3);
    cr_assert_eq(o->low_dimensional_packing_status, 1);
    cr_assert_eq(o->hot_id_replication_status, 3);

    cr_assert_eq(c->num_features, 5);
    const tl_emb_feature_config *f = c->features;
    cr_assert(strcmp(f[0].name, "watched") == 0 && f[0].table == 0 && f[0].max_sequence_length == 10 &&
              !f[0].has_combiner);
    cr_assert(strcmp(f[1].name, "feature_1") == 0 && f[1].table == 1 && f[1].max_sequence_length == 0);
    cr_assert(f[1].has_combiner && f[1].combiner == TL_EMB_COMBINER_SUM);
    cr_assert_eq(f[2].table, 2, "the default name table_2 names the table");
    cr_assert_eq(f[3].table, 3);
    cr_assert_eq(f[4].table, 4);
    tl_emb_spec_destroy(s);
}

Test(emb_spec_json, defaults_are_tensorflows)
{
    tl_emb_spec *s = json_ok("{'tables': [{'vocabulary_size': 10, 'dim': 4}], 'features': [{'table': 0}],"
                             " 'optimizer': {'type': 'sgd'}}");
    const tl_emb_config *c = tl_emb_spec_config(s);
    cr_assert_eq(c->mode, TL_EMB_MODE_TRAINING);
    cr_assert(c->num_tensor_cores == 1 && c->batch_size_per_tensor_core == 1 && c->num_shards == 1);
    cr_assert_eq(c->sharding_strategy, TL_EMB_DIV_DEFAULT);
    cr_assert_not(c->pipeline_execution_with_tensor_core);
    cr_assert_eq(c->bounds_check_mode, TL_EMB_BOUNDS_FATAL);
    cr_assert_eq(c->seed, 0u);
    cr_assert_str_eq(c->tables[0].name, "table_0");
    cr_assert_eq(c->tables[0].combiner, TL_EMB_COMBINER_MEAN);
    cr_assert_eq(c->tables[0].initializer.kind, TL_EMB_INIT_TRUNCATED_NORMAL);
    cr_assert(c->tables[0].initializer.mean == 0 && c->tables[0].initializer.stddev == 0);
    cr_assert_null(c->tables[0].optimizer);
    cr_assert_str_eq(c->features[0].name, "feature_0");
    cr_assert_eq(c->optimizer.algorithm, TL_EMB_SGD);
    cr_assert_eq(c->optimizer.learning_rate, 0.01f);
    cr_assert_eq(c->optimizer.lr_tag, -1);
    tl_emb_spec_destroy(s);
}

/* a and b hold the same values, field by field (not bytes: padding). */
static void opt_eq(const tl_emb_optimizer *a, const tl_emb_optimizer *b, const char *what)
{
#define EQ(f) cr_assert(a->f == b->f, "%s: field " #f " differs", what)
    EQ(algorithm); EQ(learning_rate); EQ(lr_tag); EQ(weight_decay_factor);
    EQ(clipping_limits.has_lower); EQ(clipping_limits.has_upper); EQ(clipping_limits.lower);
    EQ(clipping_limits.upper); EQ(gradient_clipping_limits.has_lower); EQ(gradient_clipping_limits.has_upper);
    EQ(gradient_clipping_limits.lower); EQ(gradient_clipping_limits.upper);
    EQ(multiply_weight_decay_factor_by_learning_rate); EQ(gradient_accumulation_status);
    EQ(simulated_quantization.enabled); EQ(simulated_quantization.num_buckets);
    EQ(low_dimensional_packing_status); EQ(hot_id_replication_status); EQ(momentum); EQ(use_nesterov);
    EQ(exponent); EQ(beta1); EQ(beta2); EQ(epsilon); EQ(update_accumulator_first); EQ(max_var_update);
    EQ(max_accumulator); EQ(l1_regularization_strength); EQ(l2_regularization_strength); EQ(max_lr_multiplier);
    EQ(probability_exponent); EQ(accumulator_decay); EQ(step_counter_tag); EQ(learning_rate_power);
    EQ(multiply_linear_by_lr); EQ(beta); EQ(use_non_lazy); EQ(use_sum_inside_sqrt); EQ(rho);
    EQ(user_fn); EQ(user_num_slots); EQ(initial_accumulator_value);
#undef EQ
}

/* Each optimizer type with no arguments has tl_emb_optimizer_default's fields. */
Test(emb_spec_json, optimizer_types_and_their_defaults)
{
    const char *types[] = {"sgd", "adagrad", "adagrad_momentum", "ftrl", "adam", "momentum", "lion", "rms_prop",
                           "centered_rms_prop", "adadelta", "proximal_adagrad", "proximal_yogi",
                           "frequency_aware_adagrad", "bounded_adagrad", "assign", "Adam", "ADAM"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{'tables': [{'vocabulary_size': 2, 'dim': 1}], 'features': [{'table': 0}], "
                 "'optimizer': {'type': '%s'}}",
                 types[i]);
        tl_emb_spec *s = json_ok(text);
        const tl_emb_optimizer *o = &tl_emb_spec_config(s)->optimizer;
        tl_emb_algorithm a;
        ASSERT_OK(tl_emb_algorithm_parse(types[i], &a));
        tl_emb_optimizer d;
        tl_emb_optimizer_default(a, &d);
        opt_eq(o, &d, types[i]);
        tl_emb_spec_destroy(s);
    }
}

Test(emb_spec_json, optimizer_keys_set_their_fields)
{
    tl_emb_spec *s = json_ok(
        "{'tables': [{'vocabulary_size': 2, 'dim': 1, 'optimizer': {'type': 'adagrad_momentum', 'momentum': 0.5,"
        "  'use_nesterov': true, 'exponent': 3, 'beta2': 0.5, 'epsilon': 0.1, 'lr_tag': 1}},"
        " {'vocabulary_size': 2, 'dim': 1, 'optimizer': {'type': 'frequency_aware_adagrad', 'max_lr_multiplier': 4,"
        "  'probability_exponent': 0.25, 'accumulator_decay': 0.5, 'step_counter_tag': 0,"
        "  'l1_regularization_strength': 0.125, 'gradient_accumulation_status': 'Enabled',"
        "  'clipping_limits': {'lower': -1, 'upper': 1}, 'gradient_clipping_limits': {'upper': 3}}},"
        " {'vocabulary_size': 2, 'dim': 1, 'optimizer': {'type': 'bounded_adagrad',"
        "  'update_accumulator_first': true, 'max_var_update': 2, 'max_accumulator': 8}},"
        " {'vocabulary_size': 2, 'dim': 1, 'optimizer': {'type': 'lion', 'beta1': 0.25, 'beta_2': 0.75,"
        "  'lazy_lion': false}},"
        " {'vocabulary_size': 2, 'dim': 1, 'optimizer': {'type': 'adadelta', 'rho': 0.5,"
        "  'low_dimensional_packing_status': 'disabled'}},"
        " {'vocabulary_size': 2, 'dim': 1, 'optimizer': {'type': 'frequency_estimator', 'tau': 0.5,"
        "  'max_delta': 10, 'outlier_threshold': 2, 'weight_exponent': 1}}],"
        " 'features': [{'table': 0}]}");
    const tl_emb_table_config *t = tl_emb_spec_config(s)->tables;
    const tl_emb_optimizer *o = t[0].optimizer;
    cr_assert(o->momentum == 0.5f && o->use_nesterov && o->exponent == 3 && o->beta2 == 0.5f && o->epsilon == 0.1f);
    cr_assert_eq(o->lr_tag, 1);
    o = t[1].optimizer;
    cr_assert(o->max_lr_multiplier == 4 && o->probability_exponent == 0.25f && o->accumulator_decay == 0.5f &&
              o->step_counter_tag == 0 && o->l1_regularization_strength == 0.125f);
    cr_assert_eq(o->gradient_accumulation_status, TL_EMB_ACCUM_ENABLED);
    cr_assert(o->clipping_limits.has_lower && o->clipping_limits.has_upper && o->clipping_limits.upper == 1);
    cr_assert(!o->gradient_clipping_limits.has_lower && o->gradient_clipping_limits.upper == 3);
    o = t[2].optimizer;
    cr_assert(o->update_accumulator_first && o->max_var_update == 2 && o->max_accumulator == 8);
    o = t[3].optimizer;
    cr_assert(o->beta1 == 0.25f && o->beta2 == 0.75f && o->use_non_lazy);
    o = t[4].optimizer;
    cr_assert(o->rho == 0.5f && o->low_dimensional_packing_status == 2);
    o = t[5].optimizer;
    cr_assert(o->tau == 0.5f && o->max_delta == 10 && o->outlier_threshold == 2 && o->weight_exponent == 1);
    tl_emb_spec_destroy(s);
}

Test(emb_spec_json, the_engine_takes_the_config)
{
    tl_emb_spec *s = json_ok("{'tables': [{'name': 'a', 'vocabulary_size': 6, 'dim': 2,"
                             "              'optimizer': {'type': 'adam'}},"
                             "             {'name': 'b', 'vocabulary_size': 5, 'dim': 3}],"
                             " 'features': [{'table': 'a'}, {'table': 'b', 'max_sequence_length': 2}],"
                             " 'optimizer': {'type': 'adagrad', 'learning_rate': 0.1},"
                             " 'num_tensor_cores': 2, 'batch_size_per_tensor_core': 4, 'num_shards': 2}");
    tl_emb_engine *eng;
    ASSERT_OK(tl_emb_engine_create(tl_emb_spec_config(s), &eng));
    tl_emb_spec_destroy(s);
    /* a: 6 x 2 with Adam's two slots, b: 5 x 3 with Adagrad's one */
    cr_assert_eq(tl_emb_table_bytes(eng), (6 * 2 * 3 + 5 * 3 * 2) * 4);
    tl_emb_engine_destroy(eng);
}

/* ---- errors ---------------------------------------------------------------------- */

#define T1 "'tables': [{'name': 'a', 'vocabulary_size': 10, 'dim': 4}]"
#define F1 "'features': [{'table': 'a'}]"
#define G1 "'optimizer': {'type': 'sgd'}"
/* A minimal valid section with x added at the top level. */
#define WITH(x) "{" T1 ", " F1 ", " G1 ", " x "}"
/* ... with the global optimizer o. */
#define OPT(o) "{" T1 ", " F1 ", 'optimizer': " o "}"
/* ... with the only table t. */
#define TABLE(t) "{'tables': [" t "], " F1 ", " G1 "}"
/* ... with the only feature f. */
#define FEATURE(f) "{" T1 ", 'features': [" f "], " G1 "}"

Test(emb_spec_json, syntax_and_top_level)
{
    json_fails("{'tables': [", TL_EPARSE, "embedding: malformed JSON at line 1");
    json_fails("[1]", TL_ETYPE, "embedding must be an object; got list");
    json_fails("{" T1 ", 'tables': []}", TL_EPARSE, "duplicate object key");
    json_fails(WITH("'num_cores': 2"), TL_EUNKNOWN,
               "embedding: unknown key 'num_cores'; allowed: tables, features, optimizer, mode, num_tensor_cores");
    json_fails("{" F1 ", " G1 "}", TL_EINVAL, "embedding.tables is required");
    json_fails("{'tables': {}, " F1 "}", TL_ETYPE, "embedding.tables must be a list; got dict");
    json_fails("{'tables': [], " F1 "}", TL_EINVAL, "embedding.tables is empty");
    json_fails("{" T1 ", " G1 "}", TL_EINVAL, "embedding.features is required");
    json_fails("{" T1 ", 'features': [], " G1 "}", TL_EINVAL, "embedding.features is empty");
    json_fails(WITH("'mode': 'train'"), TL_EINVAL,
               "embedding.mode must be one of 'inference', 'training', 'backward_pass_only'; got 'train'");
    json_fails(WITH("'mode': 2"), TL_ETYPE, "embedding.mode must be a str");
    json_fails(WITH("'num_tensor_cores': 0"), TL_EINVAL, "embedding.num_tensor_cores must be in [1, 2147483647]; got 0");
    json_fails(WITH("'batch_size_per_tensor_core': 2.5"), TL_ETYPE,
               "embedding.batch_size_per_tensor_core must be an int; got float 2.5");
    json_fails(WITH("'num_shards': 4294967296"), TL_EINVAL, "embedding.num_shards must be in [1, 2147483647]");
    json_fails(WITH("'sharding_strategy': 'div'"), TL_EINVAL, "embedding.sharding_strategy must be one of 'div_default', 'mod'");
    json_fails(WITH("'pipeline_execution_with_tensor_core': 1"), TL_ETYPE,
               "embedding.pipeline_execution_with_tensor_core must be a bool (true or false); got int 1");
    json_fails(WITH("'bounds_check_mode': 'strict'"), TL_EINVAL, "'fatal', 'warning', 'ignore'; got 'strict'");
    json_fails(WITH("'seed': -1"), TL_EINVAL, "embedding.seed must be >= 0; got -1");
    tl_emb_spec *s = NULL;
    ASSERT_ERR(tl_emb_spec_from_json(NULL, 0, &s), TL_EINVAL, "text is NULL");
    ASSERT_ERR(tl_emb_spec_from_json("{}", 2, NULL), TL_EINVAL, "out is NULL");
}

Test(emb_spec_json, tables)
{
    json_fails(TABLE("{'name': 'a', 'dim': 4}"), TL_EINVAL, "embedding.tables[0].vocabulary_size is required");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 4}"), TL_EINVAL, "embedding.tables[0].dim is required");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 10, 'dim': '4'}"), TL_ETYPE,
               "embedding.tables[0].dim must be an int; got str '4'");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 0, 'dim': 4}"), TL_EINVAL,
               "embedding.tables[0].vocabulary_size must be >= 1; got 0");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 10, 'dim': 0}"), TL_EINVAL,
               "embedding.tables[0].dim must be in [1, 2147483647]; got 0");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 10, 'dim': 4, 'dims': 4}"), TL_EUNKNOWN,
               "embedding.tables[0]: unknown key 'dims'; allowed: name, vocabulary_size, dim, combiner, initializer, "
               "optimizer, quantization_config");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 10, 'dim': 4, 'combiner': 'max'}"), TL_EINVAL,
               "embedding.tables[0].combiner: Argument `combiner` must be one of ('mean', 'sum', 'sqrtn'); got str "
               "'max'");
    json_fails(TABLE("{'name': 7, 'vocabulary_size': 10, 'dim': 4}"), TL_ETYPE,
               "embedding.tables[0].name must be a str; got int 7");
    json_fails(TABLE("{'name': '', 'vocabulary_size': 10, 'dim': 4}"), TL_EINVAL, "name must be non-empty");
    json_fails(TABLE("3"), TL_ETYPE, "embedding.tables[0] must be an object (a TableConfig); got int 3");
    json_fails("{'tables': [{'name': 'a', 'vocabulary_size': 1, 'dim': 1}, {'name': 'a', 'vocabulary_size': 1, "
               "'dim': 1}], " F1 ", " G1 "}",
               TL_EINVAL, "Multiple tables with name a found.");
    json_fails("{" T1 ", " F1 "}", TL_EINVAL,
               "embedding.tables[0] (\"a\") has no optimizer and embedding.optimizer is not set");
}

Test(emb_spec_json, initializers)
{
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'initializer': 'ones'}"), TL_EINVAL,
               "embedding.tables[0].initializer must be one of 'truncated_normal', 'zeros', 'constant', 'uniform', "
               "'row_id'; got 'ones'");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'initializer': {'mean': 1}}"), TL_EINVAL,
               "embedding.tables[0].initializer.type is required");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'initializer': {'type': 'zeros', 'value': 1}}"),
               TL_EUNKNOWN, "embedding.tables[0].initializer: unknown key 'value'; allowed: type");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'initializer': {'type': 'uniform', "
                     "'minval': 1, 'maxval': 0}}"),
               TL_EINVAL, "minval (1) must be <= maxval (0)");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'initializer': {'type': 'truncated_normal', "
                     "'stddev': -1}}"),
               TL_EINVAL, "initializer.stddev must be >= 0 (0: 1/sqrt(dim)); got -1");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'initializer': {'type': 'constant', "
                     "'value': 'x'}}"),
               TL_ETYPE, "initializer.value must be a number; got str 'x'");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'initializer': 5}"), TL_ETYPE,
               "initializer must be an initializer: a type name or an object");
}

Test(emb_spec_json, features)
{
    json_fails(FEATURE("{'name': 'x'}"), TL_EINVAL, "embedding.features[0].table is required");
    json_fails(FEATURE("{'table': 'b'}"), TL_EINVAL, "embedding.features[0].table: no table is named 'b'; the "
                                                     "tables are 'a'");
    json_fails(FEATURE("{'table': 1}"), TL_EINVAL, "embedding.features[0].table must be in [0, 0]; got 1");
    json_fails(FEATURE("{'table': 0.5}"), TL_ETYPE, "embedding.features[0].table must be a table's name (str) or "
                                                    "index (int); got float 0.5");
    json_fails(FEATURE("{'table': 0, 'max_sequence_length': -1}"), TL_EINVAL,
               "embedding.features[0].max_sequence_length must be in [0, 2147483647]; got -1");
    json_fails(FEATURE("{'table': 0, 'weights': 1}"), TL_EUNKNOWN,
               "embedding.features[0]: unknown key 'weights'; allowed: name, table, max_sequence_length, combiner");
    json_fails(FEATURE("{'table': 0, 'combiner': 'avg'}"), TL_EINVAL, "Argument `combiner` must be one of");
}

Test(emb_spec_json, optimizers)
{
    json_fails(OPT("{'learning_rate': 0.1}"), TL_EINVAL, "embedding.optimizer.type is required: one of sgd, adagrad");
    json_fails(OPT("{'type': 3}"), TL_ETYPE, "embedding.optimizer.type must be a str");
    json_fails(OPT("{'type': 'adamw'}"), TL_EINVAL, "embedding.optimizer.type: embedding optimizer 'adamw' is unknown");
    json_fails(OPT("'adam'"), TL_ETYPE, "embedding.optimizer must be an object {\"type\": ..., ...}; got str 'adam'");
    json_fails(OPT("{'type': 'adam', 'beta_3': 0.5}"), TL_EUNKNOWN,
               "embedding.optimizer: unknown key 'beta_3'; adam (ADAM) takes: type, learning_rate, learning_rate_tag");
    json_fails(OPT("{'type': 'adam', 'momentum': 0.5}"), TL_EUNKNOWN,
               "embedding.optimizer: unexpected key 'momentum'; adam (ADAM) takes: type, learning_rate");
    json_fails(OPT("{'type': 'sgd', 'initial_accumulator_value': 0.5}"), TL_EUNKNOWN,
               "unexpected key 'initial_accumulator_value'; sgd (StochasticGradientDescent) takes");
    json_fails(OPT("{'type': 'adam', 'beta_1': 0.5, 'beta1': 0.6}"), TL_EINVAL,
               "embedding.optimizer: 'beta_1' and 'beta1' both set the same field; give one of them");
    json_fails(OPT("{'type': 'sgd', 'learning_rate': 0.5, 'learning_rate_tag': 0}"), TL_EINVAL,
               "'learning_rate' and 'learning_rate_tag' both set the same field");
    json_fails(OPT("{'type': 'sgd', 'clipping_limits': {'lower': 0}, 'clip_weight_max': 1}"), TL_EINVAL,
               "'clipping_limits' and 'clip_weight_max' both set the same field");
    json_fails(OPT("{'type': 'sgd', 'learning_rate': '0.1'}"), TL_ETYPE,
               "embedding.optimizer.learning_rate must be a number; got str '0.1'");
    json_fails(OPT("{'type': 'sgd', 'learning_rate': 1e300}"), TL_EINVAL,
               "embedding.optimizer.learning_rate must fit in a float32");
    json_fails(OPT("{'type': 'sgd', 'learning_rate_tag': -1}"), TL_EINVAL,
               "embedding.optimizer.learning_rate_tag must be in [0, 2147483647]; got -1");
    json_fails(OPT("{'type': 'sgd', 'use_gradient_accumulation': 'yes'}"), TL_ETYPE,
               "use_gradient_accumulation must be a bool (true or false); got str 'yes'");
    json_fails(OPT("{'type': 'sgd', 'clipvalue': -1}"), TL_EINVAL, "embedding.optimizer.clipvalue must be >= 0");
    json_fails(OPT("{'type': 'sgd', 'clipvalue': [1]}"), TL_ETYPE,
               "embedding.optimizer.clipvalue must be a number c (for [-c, c]) or a list [min, max]");
    json_fails(OPT("{'type': 'sgd', 'clipvalue': [1, 'x']}"), TL_ETYPE,
               "embedding.optimizer.clipvalue[1] must be a number or null (no bound); got str 'x'");
    json_fails(OPT("{'type': 'sgd', 'clip_weight_min': 1, 'clip_weight_max': 0}"), TL_EINVAL,
               "clipping_limits.lower (1) must be <=");
    json_fails(OPT("{'type': 'sgd', 'clipping_limits': {'low': 1}}"), TL_EUNKNOWN,
               "embedding.optimizer.clipping_limits: unknown key 'low'; allowed: lower, upper");
    json_fails(OPT("{'type': 'sgd', 'gradient_accumulation_status': 'on'}"), TL_EINVAL,
               "gradient_accumulation_status must be one of 'unspecified', 'enabled', 'disabled'; got 'on'");
    json_fails(OPT("{'type': 'sgd', 'hot_id_replication_status': 'sometimes'}"), TL_EINVAL,
               "'migration_only'; got 'sometimes'");
    json_fails(OPT("{'type': 'sgd', 'simulated_quantization': {'num_buckets': 4, 'bits': 8}}"), TL_EUNKNOWN,
               "simulated_quantization: unknown key 'bits'; allowed: enabled, num_buckets, lower, upper");
    json_fails(OPT("{'type': 'user_defined_program'}"), TL_ENOTIMPL, "which JSON cannot give");
}

Test(emb_spec_json, validation_names_the_table)
{
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'optimizer': {'type': 'adam', 'beta_1': 1.5}}"),
               TL_EINVAL, "table \"a\": ADAM: beta1 must be in [0, 1); got 1.5");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'optimizer': {'type': 'adagrad', "
                     "'initial_accumulator_value': 0}}"),
               TL_EINVAL, "table \"a\": Adagrad: Argument `initial_accumulator_value` must be a positive float");
    json_fails(OPT("{'type': 'sgd', 'use_gradient_accumulation': false, 'clipvalue': 1}"), TL_EINVAL,
               "table \"a\": StochasticGradientDescent: gradient_clipping_limits are set with "
               "gradient_accumulation_status DISABLED. When `use_gradient_accumulation` is False, gradient clipping "
               "cannot be used");
    json_fails(OPT("{'type': 'adam', 'lazy_adam': false, 'use_gradient_accumulation': false}"), TL_EINVAL,
               "When disabling lazy Adam (`lazy_adam=False`), gradient accumulation must be used.");
    json_fails(OPT("{'type': 'online_yogi'}"), TL_ENOTIMPL, "table \"a\": Optimization algorithm OnlineYogi");
    json_fails(OPT("{'type': 'frequency_estimator'}"), TL_EINVAL,
               "FrequencyEstimator: tau, max_delta, outlier_threshold and weight_exponent are required");
    /* A global optimizer that no table uses is still checked. */
    json_fails("{'tables': [{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'optimizer': {'type': 'sgd'}}], " F1
               ", 'optimizer': {'type': 'rms_prop', 'rho': 2}}",
               TL_EINVAL, "embedding.optimizer: RMSProp: rho must be in [0, 1]; got 2");
}

Test(emb_spec_json, quantization_config)
{
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'quantization_config': {'lower': 0, "
                     "'upper': 1}}"),
               TL_EINVAL, "embedding.tables[0].quantization_config.num_buckets is required");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'quantization_config': {'num_buckets': 1, "
                     "'lower': 0, 'upper': 1}}"),
               TL_EINVAL, "quantization_config.num_buckets must be in [2, 2147483647]; got 1");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'quantization_config': {'num_buckets': 4, "
                     "'lower': 0, 'upper': 1}, 'optimizer': {'type': 'sgd', 'simulated_quantization': "
                     "{'num_buckets': 4, 'lower': 0, 'upper': 1}}}"),
               TL_EINVAL, "the table's optimizer already sets simulated_quantization");
    json_fails(TABLE("{'name': 'a', 'vocabulary_size': 1, 'dim': 1, 'quantization_config': {'num_buckets': 4, "
                     "'lower': 1, 'upper': 0}}"),
               TL_EINVAL, "table \"a\": StochasticGradientDescent: simulated_quantization.clipping_limits must be "
                          "finite with lower < upper");
}

/* Allocation failures in the reader (jansson's own allocations are not
 * hooked; every block tpuloop takes is). */
static tl_status json_and_free(void *ctx)
{
    char *text = ctx;
    tl_emb_spec *s;
    tl_status st = tl_emb_spec_from_json(text, strlen(text), &s);
    tl_emb_spec_destroy(s);
    return st;
}

Test(emb_spec_json, every_allocation_failure_unwinds)
{
    char *text = dq(full);
    cr_assert_gt(tu_oom_sweep(json_and_free, text, "tl_emb_spec_from_json"), 5);
    free(text);
}

/* FeatureConfig.output_shape as TensorFlow writes it: the per-replica batch,
 * then each sample's bags; the batch must agree with the section's. */
Test(emb_spec_json, output_shape)
{
    tl_emb_spec *s = json_ok("{'optimizer': {'type': 'sgd'}, 'tables': [{'name': 't', 'vocabulary_size': 10, 'dim': 4}], 'features': ["
                             "{'table': 't', 'output_shape': [32, 3, 2]}, {'table': 't'}]}");
    const tl_emb_config *c = tl_emb_spec_config(s);
    cr_assert_eq(c->batch_size_per_tensor_core, 32, "the batch comes from output_shape");
    cr_assert_eq(c->features[0].num_output_dims, 2);
    cr_assert_eq(c->features[0].output_shape[0], 3);
    cr_assert_eq(c->features[0].output_shape[1], 2);
    cr_assert_eq(c->features[1].num_output_dims, 0);
    tl_emb_spec_destroy(s);
    json_fails("{'optimizer': {'type': 'sgd'}, 'tables': [{'name': 't', 'vocabulary_size': 10, 'dim': 4}], 'batch_size_per_tensor_core': 16, "
               "'features': [{'table': 't', 'output_shape': [32, 3]}]}",
               TL_EINVAL, "features[0].output_shape[0] is 32 but batch_size_per_tensor_core is 16");
    json_fails("{'optimizer': {'type': 'sgd'}, 'tables': [{'name': 't', 'vocabulary_size': 10, 'dim': 4}], 'features': ["
               "{'table': 't', 'output_shape': [32, 3]}, {'table': 't', 'output_shape': [8, 3]}]}",
               TL_EINVAL, "features[1].output_shape[0] is 8 but features[0]'s is 32");
    json_fails("{'optimizer': {'type': 'sgd'}, 'tables': [{'name': 't', 'vocabulary_size': 10, 'dim': 4}], 'features': ["
               "{'table': 't', 'output_shape': [32]}]}",
               TL_EINVAL, "output_shape has 1 dims; it must have 2 to 5");
    json_fails("{'optimizer': {'type': 'sgd'}, 'tables': [{'name': 't', 'vocabulary_size': 10, 'dim': 4}], 'features': ["
               "{'table': 't', 'output_shape': [32, 0]}]}",
               TL_EINVAL, "output_shape[1]");
}

/* ---- FrequencyEstimator's tau ----------------------------------------------- */

/* The warnings logged while capturing, one per line. */
static char warned[4096];

static void capture(tl_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level == TL_LOG_WARN && strlen(warned) + strlen(msg) + 2 < sizeof warned) {
        strcat(warned, msg);
        strcat(warned, "\n");
    }
}

Test(emb_spec_json, tau_outside_0_1_is_accepted_with_a_warning)
{
    /* TensorFlow documents tau "between (0, 1)" and checks nothing. */
    static const char *const taus[] = {"1.5", "0", "1", "-0.25"};
    for (size_t i = 0; i < sizeof taus / sizeof taus[0]; i++) {
        char text[600];
        snprintf(text, sizeof text,
                 "{'tables': [{'name': 'freq', 'vocabulary_size': 4, 'dim': 1, 'optimizer': {'type':"
                 " 'frequency_estimator', 'tau': %s, 'max_delta': 10, 'outlier_threshold': 2, 'weight_exponent': 1,"
                 " 'learning_rate_tag': 0}}], 'features': [{'table': 0}]}",
                 taus[i]);
        warned[0] = '\0';
        tl_set_log_handler(capture, NULL);
        tl_set_log_level(TL_LOG_WARN);
        tl_emb_spec *s = json_ok(text);
        tl_set_log_level(TL_LOG_OFF);
        tl_set_log_handler(NULL, NULL);
        char want[200];
        snprintf(want, sizeof want, "table \"freq\": FrequencyEstimator tau %s is outside (0, 1)", taus[i]);
        cr_assert(strstr(warned, want) != NULL && strstr(warned, "accepted, as TensorFlow does") != NULL,
                  "tau %s: warnings:\n%s", taus[i], warned);
        tl_emb_spec_destroy(s);
    }
    /* The shared optimizer warns once, not per table; a tau inside warns not. */
    warned[0] = '\0';
    tl_set_log_handler(capture, NULL);
    tl_set_log_level(TL_LOG_WARN);
    tl_emb_spec *s = json_ok("{'tables': [{'vocabulary_size': 4, 'dim': 1}, {'vocabulary_size': 4, 'dim': 1},"
                             " {'vocabulary_size': 4, 'dim': 1, 'optimizer': {'type': 'frequency_estimator',"
                             " 'tau': 0.5, 'max_delta': 10, 'outlier_threshold': 2, 'weight_exponent': 1}}],"
                             " 'features': [{'table': 0}], 'optimizer': {'type': 'frequency_estimator', 'tau': 2,"
                             " 'max_delta': 10, 'outlier_threshold': 2, 'weight_exponent': 1}}");
    tl_set_log_level(TL_LOG_OFF);
    tl_set_log_handler(NULL, NULL);
    cr_assert_str_eq(warned, "the embedding optimizer of the tables without their own: FrequencyEstimator tau 2 is "
                             "outside (0, 1), the range FrequencyEstimatorParameters documents; accepted, as "
                             "TensorFlow does\n");
    cr_assert_eq(tl_emb_spec_config(s)->optimizer.tau, 2.0f);
    tl_emb_spec_destroy(s);
    json_fails("{'tables': [{'vocabulary_size': 4, 'dim': 1, 'optimizer': {'type': 'frequency_estimator',"
               " 'tau': 1e39, 'max_delta': 10, 'outlier_threshold': 2, 'weight_exponent': 1}}],"
               " 'features': [{'table': 0}]}",
               TL_EINVAL, "float32");
}

/* ---- an optimizer written as JSON ------------------------------------------------ */

/* tl_emb_optimizer_to_json(o) read back as a table's optimizer is o. */
static void writes_and_reads_back(const tl_emb_optimizer *o, const char *what)
{
    char *text = NULL;
    cr_assert_eq(tl_emb_optimizer_to_json(o, &text), TL_OK, "%s: %s", what, tl_last_error());
    char *section = NULL;
    cr_assert(asprintf(&section, "{\"tables\": [{\"vocabulary_size\": 2, \"dim\": 1, \"optimizer\": %s}],"
                                 " \"features\": [{\"table\": 0}]}",
                       text) > 0);
    tl_emb_spec *s = NULL;
    tl_status st = tl_emb_spec_from_json(section, strlen(section), &s);
    cr_assert_eq(st, TL_OK, "%s: %s does not read back: %s", what, text, tl_last_error());
    const tl_emb_optimizer *back = tl_emb_spec_config(s)->tables[0].optimizer;
    opt_eq(back, o, what);
    cr_assert(back->tau == o->tau || (back->tau != back->tau && o->tau != o->tau), "%s: tau", what);
    cr_assert(back->max_delta == o->max_delta || (back->max_delta != back->max_delta && o->max_delta != o->max_delta));
    cr_assert(back->simulated_quantization.clipping_limits.lower == o->simulated_quantization.clipping_limits.lower &&
              back->simulated_quantization.clipping_limits.has_upper ==
                  o->simulated_quantization.clipping_limits.has_upper,
              "%s: quantization", what);
    tl_emb_spec_destroy(s);
    free(section);
    tl_free_string(text);
}

Test(emb_spec_json, every_optimizer_parameter_as_json)
{
    /* Adagrad's defaults at 0.05, exactly. */
    tl_emb_optimizer o;
    tl_emb_optimizer_default(TL_EMB_ADAGRAD, &o);
    o.learning_rate = 0.05f;
    char *text = NULL;
    ASSERT_OK(tl_emb_optimizer_to_json(&o, &text));
    cr_assert_str_eq(text, "{\"type\":\"adagrad\",\"learning_rate\":0.05,\"gradient_accumulation_status\":"
                           "\"unspecified\",\"clipping_limits\":{\"lower\":null,\"upper\":null},"
                           "\"gradient_clipping_limits\":{\"lower\":null,\"upper\":null},\"weight_decay_factor\":0.0,"
                           "\"multiply_weight_decay_factor_by_learning_rate\":false,\"simulated_quantization\":"
                           "{\"enabled\":false,\"num_buckets\":0,\"lower\":null,\"upper\":null},"
                           "\"low_dimensional_packing_status\":\"unspecified\",\"hot_id_replication_status\":"
                           "\"unspecified\",\"initial_accumulator_value\":0.1}");
    tl_free_string(text);

    /* Every algorithm JSON can give, with its defaults and with every
     * parameter moved off them, reads back as itself. */
    static const tl_emb_algorithm algs[] = {
        TL_EMB_SGD, TL_EMB_ADAGRAD, TL_EMB_ADAGRAD_MOMENTUM, TL_EMB_BOUNDED_ADAGRAD, TL_EMB_FREQUENCY_AWARE_ADAGRAD,
        TL_EMB_FTRL, TL_EMB_ADAM, TL_EMB_MOMENTUM, TL_EMB_LION, TL_EMB_RMSPROP, TL_EMB_CENTERED_RMSPROP,
        TL_EMB_ADADELTA, TL_EMB_PROXIMAL_ADAGRAD, TL_EMB_PROXIMAL_YOGI, TL_EMB_FREQUENCY_ESTIMATOR, TL_EMB_ASSIGN};
    for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
        tl_emb_optimizer_default(algs[i], &o);
        if (algs[i] == TL_EMB_FREQUENCY_ESTIMATOR)
            o.tau = 0.25f, o.max_delta = 10, o.outlier_threshold = 2, o.weight_exponent = 1.5f;
        writes_and_reads_back(&o, tl_emb_algorithm_name(algs[i]));
        o.learning_rate = 0.123f;
        o.clipping_limits = (tl_emb_limits){true, false, -1.5f, 0};
        o.gradient_clipping_limits = (tl_emb_limits){false, true, 0, 3};
        o.weight_decay_factor = 0.01f;
        o.multiply_weight_decay_factor_by_learning_rate = true;
        o.simulated_quantization.enabled = true;
        o.simulated_quantization.num_buckets = 16;
        o.simulated_quantization.clipping_limits = (tl_emb_limits){true, true, -2, 2};
        o.low_dimensional_packing_status = 2;
        o.hot_id_replication_status = 3;
        o.momentum = 0.7f, o.use_nesterov = true, o.exponent = 3, o.beta1 = 0.2f, o.beta2 = 0.3f, o.epsilon = 1e-5f;
        o.update_accumulator_first = true, o.max_var_update = 2, o.max_accumulator = 9;
        o.l1_regularization_strength = 0.01f, o.l2_regularization_strength = 0.02f;
        o.max_lr_multiplier = 5, o.probability_exponent = 0.3f, o.accumulator_decay = 0.9f, o.step_counter_tag = 2;
        o.learning_rate_power = -0.7f, o.multiply_linear_by_lr = true, o.beta = 0.4f, o.use_sum_inside_sqrt = false;
        o.rho = 0.85f, o.initial_accumulator_value = 0.2f;
        /* Only what the algorithm takes is written: what reads back writes
         * the same text, so every written parameter kept its value. */
        char *t = NULL, *again = NULL, *section = NULL;
        ASSERT_OK(tl_emb_optimizer_to_json(&o, &t));
        cr_assert(asprintf(&section, "{\"tables\": [{\"vocabulary_size\": 2, \"dim\": 1, \"optimizer\": %s}],"
                                     " \"features\": [{\"table\": 0}]}",
                           t) > 0);
        tl_emb_spec *s = NULL;
        tl_status st = tl_emb_spec_from_json(section, strlen(section), &s);
        cr_assert_eq(st, TL_OK, "%s: %s: %s", tl_emb_algorithm_name(algs[i]), t, tl_last_error());
        ASSERT_OK(tl_emb_optimizer_to_json(tl_emb_spec_config(s)->tables[0].optimizer, &again));
        cr_assert_str_eq(again, t, "%s", tl_emb_algorithm_name(algs[i]));
        cr_assert(strstr(t, "\"learning_rate\":0.123,") && strstr(t, "\"lower\":-1.5,\"upper\":null"),
                  "%s", t);
        tl_emb_spec_destroy(s);
        free(section);
        tl_free_string(t);
        tl_free_string(again);
    }
    /* A dynamic learning rate, non-lazy Adam. */
    tl_emb_optimizer_default(TL_EMB_ADAM, &o);
    o.lr_tag = 1, o.use_non_lazy = true, o.beta1 = 0.5f, o.epsilon = 1e-8f;
    writes_and_reads_back(&o, "dynamic Adam");
    ASSERT_OK(tl_emb_optimizer_to_json(&o, &text));
    cr_assert(strstr(text, "\"learning_rate_tag\":1") && !strstr(text, "\"learning_rate\":") &&
                  strstr(text, "\"lazy_adam\":false") && strstr(text, "\"beta_1\":0.5") &&
                  strstr(text, "\"epsilon\":1e-8"),
              "%s", text);
    tl_free_string(text);

    ASSERT_ERR(tl_emb_optimizer_to_json(NULL, &text), TL_EINVAL, "NULL");
    ASSERT_ERR(tl_emb_optimizer_to_json(&o, NULL), TL_EINVAL, "out is NULL");
    o.algorithm = (tl_emb_algorithm)99;
    ASSERT_ERR(tl_emb_optimizer_to_json(&o, &text), TL_EINVAL, "algorithm 99 is unknown");
}

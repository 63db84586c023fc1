/* The binary TPUEmbeddingConfiguration reader (tpuloop/emb_spec.h): a file
 * that protoc encoded from text (tests/data/emb_config.txtpb), messages
 * built and packed here with the generated protobuf-c code, hand-made wire
 * bytes, and every error path. The JSON reader is in test_emb_spec_json.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tpuloop/emb_spec.h"
#include "tpuloop/tpu_embedding.pb-c.h"

typedef Tpuloop__TPUEmbeddingConfiguration pb_config;
typedef Tpuloop__TPUEmbeddingConfiguration__TableDescriptor pb_table;
typedef Tpuloop__TPUEmbeddingConfiguration__FeatureDescriptor pb_feature;

#define MAXT 20
#define MAXF 4

/* A valid configuration to change field by field: MAXT table slots (n in
 * use), SGD at 0.1 each; two features, [8] on table 0 and [8, 3] on
 * table 1; TRAINING on 2 tensor cores. */
typedef struct builder {
    pb_config m;
    pb_table t[MAXT], *tp[MAXT];
    Tpuloop__OptimizationParameters op[MAXT];
    Tpuloop__LearningRate lr[MAXT];
    Tpuloop__StochasticGradientDescentParameters sgd;
    char names[MAXT][16];
    pb_feature f[MAXF], *fp[MAXF];
    int32_t shape[MAXF][3];
} builder;

static void builder_init(builder *b, int n)
{
    memset(b, 0, sizeof *b);
    b->m = (pb_config)TPULOOP__TPUEMBEDDING_CONFIGURATION__INIT;
    b->sgd = (Tpuloop__StochasticGradientDescentParameters)TPULOOP__STOCHASTIC_GRADIENT_DESCENT_PARAMETERS__INIT;
    for (int i = 0; i < MAXT; i++) {
        b->t[i] = (pb_table)TPULOOP__TPUEMBEDDING_CONFIGURATION__TABLE_DESCRIPTOR__INIT;
        snprintf(b->names[i], sizeof b->names[i], "t%d", i);
        b->t[i].name = b->names[i];
        b->t[i].vocabulary_size = 10 + i;
        b->t[i].dimension = 2 + i % 3;
        b->op[i] = (Tpuloop__OptimizationParameters)TPULOOP__OPTIMIZATION_PARAMETERS__INIT;
        b->lr[i] = (Tpuloop__LearningRate)TPULOOP__LEARNING_RATE__INIT;
        b->lr[i].learning_rate_case = TPULOOP__LEARNING_RATE__LEARNING_RATE_CONSTANT;
        b->lr[i].constant = 0.1f;
        b->op[i].learning_rate = &b->lr[i];
        b->op[i].parameters_case = TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_STOCHASTIC_GRADIENT_DESCENT;
        b->op[i].stochastic_gradient_descent = &b->sgd;
        b->t[i].optimization_parameters = &b->op[i];
        b->tp[i] = &b->t[i];
    }
    for (int j = 0; j < MAXF; j++) {
        b->f[j] = (pb_feature)TPULOOP__TPUEMBEDDING_CONFIGURATION__FEATURE_DESCRIPTOR__INIT;
        b->f[j].table_id = j % n;
        b->shape[j][0] = 8;
        b->shape[j][1] = 3;
        b->f[j].input_shape = b->shape[j];
        b->f[j].n_input_shape = j == 1 ? 2 : 1;
        b->fp[j] = &b->f[j];
    }
    b->m.n_table_descriptor = (size_t)n;
    b->m.table_descriptor = b->tp;
    b->m.n_feature_descriptor = 2;
    b->m.feature_descriptor = b->fp;
    b->m.mode = TPULOOP__TPUEMBEDDING_CONFIGURATION__MODE__TRAINING;
    b->m.num_tensor_cores = 2;
}

/* The packed bytes of m (malloc'd). */
static uint8_t *pack(const pb_config *m, size_t *len)
{
    *len = tpuloop__tpuembedding_configuration__get_packed_size(m);
    uint8_t *buf = malloc(*len + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(tpuloop__tpuembedding_configuration__pack(m, buf), *len);
    return buf;
}

static tl_status parse(const builder *b, tl_emb_spec **out)
{
    size_t len;
    uint8_t *buf = pack(&b->m, &len);
    tl_status st = tl_emb_spec_from_proto(buf, len, out);
    free(buf);
    return st;
}

static tl_emb_spec *parse_ok(const builder *b)
{
    tl_emb_spec *s = NULL;
    ASSERT_OK(parse(b, &s));
    cr_assert_not_null(s);
    return s;
}

/* Parsing b fails with want, a message holding frag, and no spec. */
static void parse_fails(const builder *b, tl_status want, const char *frag)
{
    tl_emb_spec *s = (tl_emb_spec *)b; /* must be reset to NULL */
    ASSERT_ERR(parse(b, &s), want, frag);
    cr_assert_null(s);
}

static void bytes_fail(const uint8_t *buf, size_t len, tl_status want, const char *frag)
{
    tl_emb_spec *s = (tl_emb_spec *)buf;
    ASSERT_ERR(tl_emb_spec_from_proto(buf, len, &s), want, frag);
    cr_assert_null(s);
}

static void limits_eq(const tl_emb_limits *l, bool has_lo, float lo, bool has_hi, float hi, const char *what)
{
    cr_assert_eq(l->has_lower, has_lo, "%s: has_lower", what);
    cr_assert_eq(l->has_upper, has_hi, "%s: has_upper", what);
    if (has_lo)
        cr_assert_eq(l->lower, lo, "%s: lower %g, want %g", what, (double)l->lower, (double)lo);
    if (has_hi)
        cr_assert_eq(l->upper, hi, "%s: upper %g, want %g", what, (double)l->upper, (double)hi);
}

/* ---- the file protoc encoded -------------------------------------------------- */

Test(emb_spec, protoc_encoded_file_maps_every_field)
{
    tl_emb_spec *s;
    ASSERT_OK(tl_emb_spec_from_proto_file("tests/data/emb_config.pb", &s));
    const tl_emb_config *c = tl_emb_spec_config(s);
    cr_assert_eq(c->mode, TL_EMB_MODE_TRAINING);
    cr_assert_eq(c->num_shards, 2, "num_hosts → num_shards");
    cr_assert_eq(c->num_tensor_cores, 4);
    cr_assert_eq(c->sharding_strategy, TL_EMB_MOD);
    cr_assert(c->pipeline_execution_with_tensor_core);
    cr_assert_eq(c->batch_size_per_tensor_core, 32, "from the features' input_shape[0]");
    cr_assert_eq(c->bounds_check_mode, TL_EMB_BOUNDS_FATAL);
    cr_assert_eq(c->seed, 0u);

    cr_assert_eq(c->num_tables, 3);
    const char *names[] = {"user", "video", "ads"};
    const int64_t vocab[] = {1000, 5000000000LL, 77};
    const int dims[] = {8, 16, 4};
    for (int i = 0; i < 3; i++) {
        const tl_emb_table_config *t = &c->tables[i];
        cr_assert_str_eq(t->name, names[i]);
        cr_assert_eq(t->vocabulary_size, vocab[i], "table %d: int64 vocabulary", i);
        cr_assert_eq(t->dim, dims[i]);
        cr_assert_eq(t->combiner, TL_EMB_COMBINER_MEAN, "no combiner in the proto: TableConfig's MEAN");
        cr_assert_eq(t->initializer.kind, TL_EMB_INIT_TRUNCATED_NORMAL);
        cr_assert_eq(t->initializer.stddev, 0.0, "0 stands for 1/sqrt(dim)");
        cr_assert_not_null(t->optimizer, "every proto table has its own optimizer");
    }

    const tl_emb_optimizer *o = c->tables[0].optimizer;
    cr_assert_eq(o->algorithm, TL_EMB_ADAGRAD);
    cr_assert_eq(o->learning_rate, 0.05f);
    cr_assert_eq(o->lr_tag, -1);
    limits_eq(&o->clipping_limits, true, -1.5f, true, 2.5f, "user clipping");
    limits_eq(&o->gradient_clipping_limits, false, 0, true, 10.0f, "user gradient clipping (no lower FloatValue)");
    cr_assert_eq(o->weight_decay_factor, 0.001f);
    cr_assert(o->multiply_weight_decay_factor_by_learning_rate);
    cr_assert_eq(o->gradient_accumulation_status, TL_EMB_ACCUM_ENABLED);
    cr_assert_eq(o->hot_id_replication_status, 3, "MIGRATION_ONLY");
    cr_assert_eq(o->initial_accumulator_value, 0.1f, "not in the proto: the default");
    cr_assert_not(o->simulated_quantization.enabled);

    o = c->tables[1].optimizer;
    cr_assert_eq(o->algorithm, TL_EMB_ADAM);
    cr_assert_eq(o->lr_tag, 0, "learning_rate.dynamic.tag");
    cr_assert_eq(o->beta1, 0.8f);
    cr_assert_eq(o->beta2, 0.99f);
    cr_assert_eq(o->epsilon, 1e-6f);
    cr_assert(o->use_non_lazy);
    cr_assert_not(o->use_sum_inside_sqrt, "false in the proto, although the default is true");
    cr_assert_eq(o->low_dimensional_packing_status, 2, "DISABLED");
    cr_assert_eq(o->gradient_accumulation_status, TL_EMB_ACCUM_UNSPECIFIED);
    limits_eq(&o->clipping_limits, false, 0, false, 0, "video clipping");

    o = c->tables[2].optimizer;
    cr_assert_eq(o->algorithm, TL_EMB_FTRL);
    cr_assert_eq(o->learning_rate, 0.25f);
    cr_assert_eq(o->gradient_accumulation_status, TL_EMB_ACCUM_DISABLED);
    cr_assert(o->simulated_quantization.enabled);
    limits_eq(&o->simulated_quantization.clipping_limits, true, -0.5f, true, 0.5f, "quantization");
    cr_assert_eq(o->simulated_quantization.num_buckets, 256);
    cr_assert_eq(o->l1_regularization_strength, 0.01f);
    cr_assert_eq(o->l2_regularization_strength, 0.02f);
    cr_assert_eq(o->learning_rate_power, -0.5f);
    cr_assert_eq(o->beta, 0.1f);
    cr_assert(o->multiply_linear_by_lr);

    cr_assert_eq(c->num_features, 4);
    const char *fnames[] = {"watched", "user_id", "liked", "feature_3"};
    const int ftab[] = {1, 0, 1, 2}, fseq[] = {20, 0, 0, 0};
    for (int j = 0; j < 4; j++) {
        cr_assert_str_eq(c->features[j].name, fnames[j], "an empty name reads as feature_<j>");
        cr_assert_eq(c->features[j].table, ftab[j]);
        cr_assert_eq(c->features[j].max_sequence_length, fseq[j], "input_shape [32, 20] is a sequence of 20");
        cr_assert_not(c->features[j].has_combiner);
    }
    tl_emb_spec_destroy(s);
}

Test(emb_spec, destroy_and_config_accept_null)
{
    tl_emb_spec_destroy(NULL);
    cr_assert_null(tl_emb_spec_config(NULL));
}

/* ---- every algorithm, packed here --------------------------------------------- */

Test(emb_spec, every_algorithm_and_its_fields)
{
    builder b;
    builder_init(&b, 16);
    Tpuloop__OptimizationParameters *op = b.op;
    Tpuloop__AdagradParameters adagrad = TPULOOP__ADAGRAD_PARAMETERS__INIT;
    Tpuloop__AdagradMomentumParameters am = TPULOOP__ADAGRAD_MOMENTUM_PARAMETERS__INIT;
    am.momentum = 0.5f, am.use_nesterov = 1, am.exponent = 3, am.beta2 = 0.75f, am.epsilon = 0.125f;
    Tpuloop__BoundedAdagradParameters ba = TPULOOP__BOUNDED_ADAGRAD_PARAMETERS__INIT;
    ba.update_accumulator_first = 1, ba.max_var_update = 2, ba.max_accumulator = 4;
    Tpuloop__DynamicHyperParameter step = TPULOOP__DYNAMIC_HYPER_PARAMETER__INIT;
    step.tag = 1;
    Tpuloop__FrequencyAwareAdagradParameters fa = TPULOOP__FREQUENCY_AWARE_ADAGRAD_PARAMETERS__INIT;
    fa.l1_regularization_strength = 0.25f, fa.l2_regularization_strength = 0.5f, fa.max_lr_multiplier = 8;
    fa.probability_exponent = 0.75f, fa.accumulator_decay = 0.875f, fa.initial_accumulator_value = 0.3f;
    fa.step_counter = &step;
    Tpuloop__FtrlParameters ftrl = TPULOOP__FTRL_PARAMETERS__INIT;
    ftrl.l1 = 1, ftrl.l2 = 2, ftrl.lr_power = -0.25f, ftrl.beta = 0.5f, ftrl.allow_zero_accumulator = 1;
    Tpuloop__AdamParameters adam = TPULOOP__ADAM_PARAMETERS__INIT;
    adam.beta1 = 0.5f, adam.beta2 = 0.25f, adam.epsilon = 1e-3f, adam.use_sum_inside_sqrt = 1;
    Tpuloop__MomentumParameters mom = TPULOOP__MOMENTUM_PARAMETERS__INIT;
    mom.momentum = 0.9f, mom.use_nesterov = 1;
    Tpuloop__LionParameters lion = TPULOOP__LION_PARAMETERS__INIT;
    lion.beta1 = 0.3f, lion.beta2 = 0.6f, lion.use_non_lazy_lion = 1;
    Tpuloop__RmsPropParameters rms = TPULOOP__RMS_PROP_PARAMETERS__INIT;
    rms.rho = 0.8f, rms.momentum = 0.2f, rms.epsilon = 0.01f;
    Tpuloop__CenteredRmsPropParameters crms = TPULOOP__CENTERED_RMS_PROP_PARAMETERS__INIT;
    crms.rho = 0.7f, crms.momentum = 0.1f, crms.epsilon = 0.02f;
    Tpuloop__AdadeltaParameters ada = TPULOOP__ADADELTA_PARAMETERS__INIT;
    ada.rho = 0.6f, ada.epsilon = 0.03f;
    Tpuloop__ProximalAdagradParameters pa = TPULOOP__PROXIMAL_ADAGRAD_PARAMETERS__INIT;
    pa.l1 = 0.4f, pa.l2 = 0.8f;
    Tpuloop__ProximalYogiParameters py = TPULOOP__PROXIMAL_YOGI_PARAMETERS__INIT;
    py.l1 = 0.1f, py.l2 = 0.2f, py.beta1 = 0.3f, py.beta2 = 0.4f, py.epsilon = 0.5f;
    Tpuloop__FrequencyEstimatorParameters fe = TPULOOP__FREQUENCY_ESTIMATOR_PARAMETERS__INIT;
    fe.tau = 0.5f, fe.max_delta = 10, fe.outlier_threshold = 2, fe.weight_exponent = 1;
    Tpuloop__AssignParameters assign = TPULOOP__ASSIGN_PARAMETERS__INIT;

#define SET(i, CASE, field, msg)                                               \
    op[i].parameters_case = TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_##CASE; \
    op[i].field = &msg
    SET(0, ADAGRAD, adagrad, adagrad);
    SET(1, ADAGRAD_MOMENTUM, adagrad_momentum, am);
    SET(2, BOUNDED_ADAGRAD, bounded_adagrad, ba);
    SET(3, FREQUENCY_AWARE_ADAGRAD, frequency_aware_adagrad, fa);
    /* 4 stays SGD */
    SET(5, FTRL, ftrl, ftrl);
    SET(6, ADAM, adam, adam);
    SET(7, MOMENTUM, momentum, mom);
    SET(8, LION, lion, lion);
    SET(9, RMS_PROP, rms_prop, rms);
    SET(10, CENTERED_RMS_PROP, centered_rms_prop, crms);
    SET(11, ADADELTA, adadelta, ada);
    SET(12, PROXIMAL_ADAGRAD, proximal_adagrad, pa);
    SET(13, PROXIMAL_YOGI, proximal_yogi, py);
    SET(14, FREQUENCY_ESTIMATOR, frequency_estimator, fe);
    SET(15, ASSIGN, assign, assign);
#undef SET
    b.t[14].dimension = 1;
    tl_emb_spec *s = parse_ok(&b);
    const tl_emb_config *c = tl_emb_spec_config(s);
    const tl_emb_algorithm want[16] = {
        TL_EMB_ADAGRAD,  TL_EMB_ADAGRAD_MOMENTUM, TL_EMB_BOUNDED_ADAGRAD, TL_EMB_FREQUENCY_AWARE_ADAGRAD,
        TL_EMB_SGD,      TL_EMB_FTRL,             TL_EMB_ADAM,            TL_EMB_MOMENTUM,
        TL_EMB_LION,     TL_EMB_RMSPROP,          TL_EMB_CENTERED_RMSPROP, TL_EMB_ADADELTA,
        TL_EMB_PROXIMAL_ADAGRAD, TL_EMB_PROXIMAL_YOGI, TL_EMB_FREQUENCY_ESTIMATOR, TL_EMB_ASSIGN};
    const tl_emb_optimizer *o[16];
    for (int i = 0; i < 16; i++) {
        o[i] = c->tables[i].optimizer;
        cr_assert_eq(o[i]->algorithm, want[i], "table %d: %s", i, tl_emb_algorithm_name(o[i]->algorithm));
        cr_assert_eq(o[i]->learning_rate, 0.1f);
    }
    cr_assert(o[1]->momentum == 0.5f && o[1]->use_nesterov && o[1]->exponent == 3 && o[1]->beta2 == 0.75f &&
              o[1]->epsilon == 0.125f);
    cr_assert(o[2]->update_accumulator_first && o[2]->max_var_update == 2 && o[2]->max_accumulator == 4);
    cr_assert(o[3]->l1_regularization_strength == 0.25f && o[3]->l2_regularization_strength == 0.5f &&
              o[3]->max_lr_multiplier == 8 && o[3]->probability_exponent == 0.75f &&
              o[3]->accumulator_decay == 0.875f && o[3]->initial_accumulator_value == 0.3f);
    cr_assert_eq(o[3]->step_counter_tag, 1);
    cr_assert(o[5]->l1_regularization_strength == 1 && o[5]->l2_regularization_strength == 2 &&
              o[5]->learning_rate_power == -0.25f && o[5]->beta == 0.5f && !o[5]->multiply_linear_by_lr);
    cr_assert_eq(o[5]->initial_accumulator_value, 0.1f, "FTRL's initial accumulator is not in the proto");
    cr_assert(o[6]->beta1 == 0.5f && o[6]->beta2 == 0.25f && o[6]->epsilon == 1e-3f && o[6]->use_sum_inside_sqrt &&
              !o[6]->use_non_lazy);
    cr_assert(o[7]->momentum == 0.9f && o[7]->use_nesterov);
    cr_assert(o[8]->beta1 == 0.3f && o[8]->beta2 == 0.6f && o[8]->use_non_lazy);
    cr_assert(o[9]->rho == 0.8f && o[9]->momentum == 0.2f && o[9]->epsilon == 0.01f);
    cr_assert(o[10]->rho == 0.7f && o[10]->momentum == 0.1f && o[10]->epsilon == 0.02f);
    cr_assert(o[11]->rho == 0.6f && o[11]->epsilon == 0.03f);
    cr_assert(o[12]->l1_regularization_strength == 0.4f && o[12]->l2_regularization_strength == 0.8f);
    cr_assert(o[13]->l1_regularization_strength == 0.1f && o[13]->l2_regularization_strength == 0.2f &&
              o[13]->beta1 == 0.3f && o[13]->beta2 == 0.4f && o[13]->epsilon == 0.5f);
    cr_assert_eq(o[13]->initial_accumulator_value, 1e-6f, "ProximalYogi's default v");
    cr_assert(o[14]->tau == 0.5f && o[14]->max_delta == 10 && o[14]->outlier_threshold == 2 &&
              o[14]->weight_exponent == 1);
    tl_emb_spec_destroy(s);
}

Test(emb_spec, proto3_zero_is_zero_not_the_python_default)
{
    /* An AdamParameters with beta1 left out is beta1 0, as the TPU reads it. */
    builder b;
    builder_init(&b, 2);
    Tpuloop__AdamParameters adam = TPULOOP__ADAM_PARAMETERS__INIT;
    adam.beta2 = 0.5f, adam.epsilon = 0.25f;
    b.op[0].parameters_case = TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_ADAM;
    b.op[0].adam = &adam;
    tl_emb_spec *s = parse_ok(&b);
    const tl_emb_optimizer *o = tl_emb_spec_config(s)->tables[0].optimizer;
    cr_assert_eq(o->beta1, 0.0f);
    cr_assert_not(o->use_sum_inside_sqrt);
    tl_emb_spec_destroy(s);
}

static char logged[512];
static void capture_log(tl_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level >= TL_LOG_WARN)
        snprintf(logged, sizeof logged, "%s", msg);
}

Test(emb_spec, absent_learning_rate_is_constant_zero_with_a_warning)
{
    builder b;
    builder_init(&b, 2);
    b.op[1].learning_rate = NULL;
    tl_set_log_handler(capture_log, NULL);
    tl_emb_spec *s = parse_ok(&b);
    tl_set_log_handler(NULL, NULL);
    const tl_emb_optimizer *o = tl_emb_spec_config(s)->tables[1].optimizer;
    cr_assert_eq(o->learning_rate, 0.0f);
    cr_assert_eq(o->lr_tag, -1);
    cr_assert(strstr(logged, "table \"t1\"") && strstr(logged, "learning_rate is not set"), "log: %s", logged);
    tl_emb_spec_destroy(s);
}

Test(emb_spec, defaults_of_zero_fields)
{
    builder b;
    builder_init(&b, 2);
    b.m.num_hosts = 0;
    b.t[1].name = "";
    b.f[0].name = NULL;
    tl_emb_spec *s = parse_ok(&b);
    const tl_emb_config *c = tl_emb_spec_config(s);
    cr_assert_eq(c->num_shards, 1, "num_hosts 0 is one shard");
    cr_assert_eq(c->sharding_strategy, TL_EMB_DIV_DEFAULT);
    cr_assert_not(c->pipeline_execution_with_tensor_core);
    cr_assert_str_eq(c->tables[1].name, "table_1");
    cr_assert_str_eq(c->features[0].name, "feature_0");
    cr_assert_eq(c->features[1].max_sequence_length, 3);
    cr_assert_eq(c->batch_size_per_tensor_core, 8);
    const tl_emb_optimizer *o = c->tables[0].optimizer;
    limits_eq(&o->clipping_limits, false, 0, false, 0, "no clipping_limits message");
    cr_assert_eq(o->gradient_accumulation_status, TL_EMB_ACCUM_UNSPECIFIED);
    cr_assert_eq(o->hot_id_replication_status, 0);
    tl_emb_spec_destroy(s);
}

Test(emb_spec, the_engine_takes_the_config)
{
    builder b;
    builder_init(&b, 2);
    b.m.num_hosts = 2;
    tl_emb_spec *s = parse_ok(&b);
    tl_emb_engine *eng;
    ASSERT_OK(tl_emb_engine_create(tl_emb_spec_config(s), &eng));
    tl_emb_spec_destroy(s);
    /* table 0: 10 x 2, table 1: 11 x 3, SGD has no slots */
    cr_assert_eq(tl_emb_table_bytes(eng), (10 * 2 + 11 * 3) * 4);
    tl_emb_engine_destroy(eng);
}

/* ---- wire details ---------------------------------------------------------------- */

/* A varint. */
static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    return n;
}

Test(emb_spec, unknown_fields_are_skipped)
{
    builder b;
    builder_init(&b, 2);
    size_t len;
    uint8_t *base = pack(&b.m, &len);
    uint8_t buf[1024];
    memcpy(buf, base, len);
    size_t n = len;
    /* field 8 (the old output_layout), length-delimited, holding junk */
    n += put_varint(buf + n, 8 << 3 | 2);
    n += put_varint(buf + n, 3);
    memcpy(buf + n, "\x0a\x01\x00", 3);
    n += 3;
    /* field 99 varint, field 100 fixed64, field 101 fixed32 */
    n += put_varint(buf + n, 99 << 3 | 0);
    n += put_varint(buf + n, 300);
    n += put_varint(buf + n, 100 << 3 | 1);
    memset(buf + n, 7, 8), n += 8;
    n += put_varint(buf + n, 101 << 3 | 5);
    memset(buf + n, 7, 4), n += 4;
    tl_emb_spec *s;
    ASSERT_OK(tl_emb_spec_from_proto(buf, n, &s));
    cr_assert_eq(tl_emb_spec_config(s)->num_tables, 2);
    cr_assert_eq(tl_emb_spec_config(s)->num_features, 2);
    tl_emb_spec_destroy(s);
    free(base);
}

Test(emb_spec, unpacked_input_shape_is_accepted)
{
    builder b;
    builder_init(&b, 2);
    b.m.n_feature_descriptor = 0;
    b.m.batch_size_per_tensor_core = 0;
    size_t len;
    uint8_t *base = pack(&b.m, &len);
    uint8_t buf[512];
    memcpy(buf, base, len);
    size_t n = len;
    /* feature_descriptor { table_id: 1 input_shape: 4 input_shape: 5 }, unpacked */
    const uint8_t fd[] = {2 << 3 | 0, 1, 3 << 3 | 0, 4, 3 << 3 | 0, 5};
    n += put_varint(buf + n, 10 << 3 | 2);
    n += put_varint(buf + n, sizeof fd);
    memcpy(buf + n, fd, sizeof fd), n += sizeof fd;
    tl_emb_spec *s;
    ASSERT_OK(tl_emb_spec_from_proto(buf, n, &s));
    const tl_emb_config *c = tl_emb_spec_config(s);
    cr_assert_eq(c->num_features, 1);
    cr_assert_eq(c->features[0].table, 1);
    cr_assert_eq(c->batch_size_per_tensor_core, 4);
    cr_assert_eq(c->features[0].max_sequence_length, 5);
    tl_emb_spec_destroy(s);
    free(base);
}

Test(emb_spec, malformed_bytes_say_where)
{
    builder b;
    builder_init(&b, 2);
    size_t len;
    uint8_t *buf = pack(&b.m, &len);
    /* cut inside the first table_descriptor */
    bytes_fail(buf, 5, TL_EPARSE, "Malformed tpu_embedding_config.");
    bytes_fail(buf, 5, TL_EPARSE, "table_descriptor[0] (field 1, at byte 0): length");
    free(buf);

    /* mode (field 2) as a length-delimited field */
    const uint8_t wrong_type[] = {2 << 3 | 2, 1, 0};
    bytes_fail(wrong_type, sizeof wrong_type, TL_EPARSE,
               "mode (field 2, at byte 0): wire type 2 (length-delimited), expected 0 (varint)");
    /* table_descriptor { dimension (3) as fixed32 } */
    const uint8_t nested[] = {1 << 3 | 2, 5, 3 << 3 | 5, 1, 2, 3, 4};
    bytes_fail(nested, sizeof nested, TL_EPARSE, "table_descriptor[0].dimension (field 3, at byte 2): wire type 5");
    /* a group (wire type 3) in an unknown field */
    const uint8_t group[] = {12 << 3 | 3, 12 << 3 | 4};
    bytes_fail(group, sizeof group, TL_EPARSE, "<unknown> (field 12, at byte 0): wire type 3 (start group)");
    /* a truncated varint value */
    const uint8_t trunc[] = {4 << 3 | 0, 0x80};
    bytes_fail(trunc, sizeof trunc, TL_EPARSE, "num_hosts (field 4, at byte 0): the varint value is truncated");
    /* field number 0 */
    const uint8_t zero[] = {0 << 3 | 0, 1};
    bytes_fail(zero, sizeof zero, TL_EPARSE, "TPUEmbeddingConfiguration: field number 0 at byte 0");
    /* a length past the end, deep: table_descriptor.optimization_parameters.adam */
    const uint8_t deep[] = {1 << 3 | 2, 4, 5 << 3 | 2, 2, 6 << 3 | 2, 9};
    bytes_fail(deep, sizeof deep, TL_EPARSE,
               "table_descriptor[0].optimization_parameters.adam (field 6, at byte 4): length 9 but only 0 bytes");
    /* a packed input_shape ending in half a varint */
    const uint8_t packed[] = {10 << 3 | 2, 4, 3 << 3 | 2, 2, 8, 0x80};
    bytes_fail(packed, sizeof packed, TL_EPARSE,
               "feature_descriptor[0].input_shape[0] (field 3, at byte 2): the packed values end in a partial value");
}

Test(emb_spec, bad_arguments)
{
    tl_emb_spec *s = NULL;
    ASSERT_ERR(tl_emb_spec_from_proto(NULL, 3, &s), TL_EINVAL, "data is NULL");
    ASSERT_ERR(tl_emb_spec_from_proto("", 0, NULL), TL_EINVAL, "out is NULL");
    /* nothing at all: every field 0, so the mode is UNSPECIFIED */
    ASSERT_ERR(tl_emb_spec_from_proto(NULL, 0, &s), TL_EINVAL, "mode is INVALID");
    cr_assert_null(s);
}

Test(emb_spec, files)
{
    tl_emb_spec *s = (tl_emb_spec *)&s;
    ASSERT_ERR(tl_emb_spec_from_proto_file("tests/data/no_such_file.pb", &s), TL_EIO,
               "cannot open the embedding configuration 'tests/data/no_such_file.pb': No such file");
    cr_assert_null(s);
    char path[] = "/tmp/tl_emb_spec_XXXXXX";
    tu_write_temp(path, "\x0a\xff");
    ASSERT_ERR(tl_emb_spec_from_proto_file(path, &s), TL_EPARSE, "Malformed tpu_embedding_config.");
    cr_assert(strstr(tl_last_error(), path) == tl_last_error(), "the path comes first: %s", tl_last_error());
    remove(path);
}

/* ---- configuration errors ------------------------------------------------------- */

Test(emb_spec, mode)
{
    builder b;
    builder_init(&b, 2);
    b.m.mode = TPULOOP__TPUEMBEDDING_CONFIGURATION__MODE__UNSPECIFIED;
    parse_fails(&b, TL_EINVAL,
                "TPUEmbeddingConfiguration.mode is INVALID.  Must be INFERENCE, TRAINING, or BACKWARD_PASS_ONLY");
    b.m.mode = (Tpuloop__TPUEmbeddingConfiguration__Mode)7;
    parse_fails(&b, TL_EINVAL, "(got 7)");
    const int modes[] = {1, 2, 3};
    for (int i = 0; i < 3; i++) {
        b.m.mode = (Tpuloop__TPUEmbeddingConfiguration__Mode)modes[i];
        tl_emb_spec *s = parse_ok(&b);
        cr_assert_eq((int)tl_emb_spec_config(s)->mode, modes[i]);
        tl_emb_spec_destroy(s);
    }
}

Test(emb_spec, per_table_layout_is_not_implemented)
{
    builder b;
    builder_init(&b, 2);
    b.m.n_feature_descriptor = 0;
    b.m.batch_size_per_tensor_core = 16;
    b.t[0].num_features = 2;
    parse_fails(&b, TL_ENOTIMPL, "per-table outputs (no feature_descriptor) are not supported; write feature "
                                 "descriptors");
}

Test(emb_spec, top_level_fields)
{
    builder b;
    builder_init(&b, 2);
    b.m.n_table_descriptor = 0;
    parse_fails(&b, TL_EINVAL, "table_descriptor is empty");
    builder_init(&b, 2);
    b.m.batch_size_per_tensor_core = 16;
    parse_fails(&b, TL_EINVAL, "batch_size_per_tensor_core must not be set when feature_descriptor is populated");
    parse_fails(&b, TL_EINVAL, "got 16");
    builder_init(&b, 2);
    b.m.num_hosts = -1;
    parse_fails(&b, TL_EINVAL, "num_hosts must be >= 0 (0 means 1); got -1");
    builder_init(&b, 2);
    b.m.num_tensor_cores = 0;
    parse_fails(&b, TL_EINVAL, "num_tensor_cores must be >= 1");
    builder_init(&b, 2);
    b.m.sharding_strategy = (Tpuloop__TPUEmbeddingConfiguration__ShardingStrategy)2;
    parse_fails(&b, TL_EINVAL, "sharding_strategy must be DIV_DEFAULT (0) or MOD (1); got 2");

    builder_init(&b, 2);
    Tpuloop__TPUEmbeddingConfiguration__SpmdSharding spmd = TPULOOP__TPUEMBEDDING_CONFIGURATION__SPMD_SHARDING__INIT;
    spmd.enabled = 1;
    spmd.num_cores_per_replica = 1;
    b.m.spmd_sharding = &spmd;
    tl_emb_spec_destroy(parse_ok(&b));
    spmd.num_cores_per_replica = 2;
    parse_fails(&b, TL_ENOTIMPL, "spmd_sharding: num_cores_per_replica 2");
    spmd.enabled = 0;
    tl_emb_spec_destroy(parse_ok(&b));
}

Test(emb_spec, table_fields)
{
    builder b;
    builder_init(&b, 2);
    b.t[1].vocabulary_size = 0;
    parse_fails(&b, TL_EINVAL, "table \"t1\": table_descriptor[1].vocabulary_size must be >= 1; got 0");
    builder_init(&b, 2);
    b.t[0].dimension = -3;
    parse_fails(&b, TL_EINVAL, "table \"t0\": table_descriptor[0].dimension must be >= 1; got -3");
    builder_init(&b, 2);
    b.t[1].name = "t0";
    parse_fails(&b, TL_EINVAL, "Multiple tables with name t0 found.");
}

Test(emb_spec, feature_fields)
{
    builder b;
    builder_init(&b, 2);
    b.f[1].table_id = 2;
    b.f[1].name = "clicks";
    parse_fails(&b, TL_EINVAL, "feature \"clicks\": feature_descriptor[1].table_id must be in [0, 2)");
    parse_fails(&b, TL_EINVAL, "got 2");
    b.f[1].table_id = -1;
    parse_fails(&b, TL_EINVAL, "got -1");
    builder_init(&b, 2);
    b.f[0].n_input_shape = 0;
    parse_fails(&b, TL_EINVAL, "feature_descriptor[0].input_shape is empty");
    builder_init(&b, 2);
    b.f[0].n_input_shape = 3;
    parse_fails(&b, TL_ENOTIMPL, "input_shape has rank 3; tpuloop supports [batch] and [batch, max_sequence_length]");
    builder_init(&b, 2);
    b.shape[1][1] = 0;
    parse_fails(&b, TL_EINVAL, "feature_descriptor[1].input_shape[1] must be >= 1; got 0");
    builder_init(&b, 2);
    b.shape[1][0] = 16;
    parse_fails(&b, TL_EINVAL, "feature_descriptor[1].input_shape[0] is 16 but feature_descriptor[0] has 8");
}

Test(emb_spec, optimizer_errors_name_the_table)
{
    builder b;
    builder_init(&b, 2);
    b.t[1].optimization_parameters = NULL;
    parse_fails(&b, TL_EINVAL, "table \"t1\": No optimization algorithm specified");
    builder_init(&b, 2);
    b.op[0].parameters_case = TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS__NOT_SET;
    parse_fails(&b, TL_EINVAL, "table \"t0\": No optimization algorithm specified");

    builder_init(&b, 2);
    Tpuloop__AdamParameters adam = TPULOOP__ADAM_PARAMETERS__INIT;
    adam.beta1 = 1.5f, adam.beta2 = 0.5f, adam.epsilon = 1;
    b.op[1].parameters_case = TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_ADAM;
    b.op[1].adam = &adam;
    parse_fails(&b, TL_EINVAL, "table \"t1\": ADAM: beta1 must be in [0, 1); got 1.5");

    builder_init(&b, 2);
    Tpuloop__DynamicHyperParameter tag = TPULOOP__DYNAMIC_HYPER_PARAMETER__INIT;
    tag.tag = -2;
    b.lr[0].learning_rate_case = TPULOOP__LEARNING_RATE__LEARNING_RATE_DYNAMIC;
    b.lr[0].dynamic = &tag;
    parse_fails(&b, TL_EINVAL, "learning_rate.dynamic.tag must be >= 0");

    builder_init(&b, 2);
    Tpuloop__FloatValue lo = TPULOOP__FLOAT_VALUE__INIT, hi = TPULOOP__FLOAT_VALUE__INIT;
    lo.value = 3, hi.value = 1;
    Tpuloop__ClippingLimits lim = TPULOOP__CLIPPING_LIMITS__INIT;
    lim.lower = &lo, lim.upper = &hi;
    b.op[0].clipping_limits = &lim;
    parse_fails(&b, TL_EINVAL, "table \"t0\": StochasticGradientDescent: clipping_limits.lower (3) must be <=");

    builder_init(&b, 2);
    lim.lower = NULL;
    b.op[1].gradient_clipping_limits = &lim;
    b.op[1].gradient_accumulation_status = TPULOOP__GRADIENT_ACCUMULATION_STATUS__STATUS__DISABLED;
    parse_fails(&b, TL_EINVAL, "When `use_gradient_accumulation` is False, gradient clipping cannot be used");
}

Test(emb_spec, unpublished_algorithms_are_read_then_refused)
{
    builder b;
    builder_init(&b, 2);
    Tpuloop__OnlineYogiParameters oy = TPULOOP__ONLINE_YOGI_PARAMETERS__INIT;
    oy.beta2 = 0.5f;
    b.op[1].parameters_case = TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_ONLINE_YOGI;
    b.op[1].online_yogi = &oy;
    parse_fails(&b, TL_ENOTIMPL, "table \"t1\": Optimization algorithm OnlineYogi is not implemented");
    builder_init(&b, 2);
    Tpuloop__MdlAdagradLightParameters mdl = TPULOOP__MDL_ADAGRAD_LIGHT_PARAMETERS__INIT;
    b.op[0].parameters_case = TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_MDL_ADAGRAD_LIGHT;
    b.op[0].mdl_adagrad_light = &mdl;
    parse_fails(&b, TL_ENOTIMPL, "table \"t0\": Optimization algorithm MDLAdagradLight is not implemented");
    builder_init(&b, 2);
    Tpuloop__UserDefinedProgramParameters udp = TPULOOP__USER_DEFINED_PROGRAM_PARAMETERS__INIT;
    udp.program.data = (uint8_t *)"\x0a\x03hlo";
    udp.program.len = 5;
    b.op[0].parameters_case = TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_USER_DEFINED_PROGRAM;
    b.op[0].user_defined_program = &udp;
    parse_fails(&b, TL_ENOTIMPL, "user_defined_program holds an XLA program (5 bytes of HloModuleProto)");
}

/* ---- allocation failures --------------------------------------------------------- */

typedef struct bytes_ctx {
    uint8_t *data;
    size_t len;
} bytes_ctx;

static tl_status parse_and_free(void *ctx)
{
    bytes_ctx *b = ctx;
    tl_emb_spec *s;
    tl_status st = tl_emb_spec_from_proto(b->data, b->len, &s);
    tl_emb_spec_destroy(s);
    return st;
}

Test(emb_spec, every_allocation_failure_unwinds)
{
    FILE *fp = fopen("tests/data/emb_config.pb", "rb");
    cr_assert_not_null(fp);
    bytes_ctx b = {malloc(4096), 0};
    b.len = fread(b.data, 1, 4096, fp);
    fclose(fp);
    cr_assert_gt(tu_oom_sweep(parse_and_free, &b, "tl_emb_spec_from_proto"), 10);
    free(b.data);
}

/* ---- FrequencyEstimator's tau ----------------------------------------------- */

static char warned[2048];

static void capture(tl_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level == TL_LOG_WARN && strlen(warned) + strlen(msg) + 2 < sizeof warned) {
        strcat(warned, msg);
        strcat(warned, "\n");
    }
}

Test(emb_spec, tau_outside_0_1_is_accepted_with_a_warning)
{
    /* The proto's comment says "between (0, 1)"; TensorFlow checks nothing,
     * and proto3 reads a tau left out as 0. */
    static const float taus[] = {0.0f, 1.5f, 1.0f};
    for (size_t i = 0; i < sizeof taus / sizeof taus[0]; i++) {
        builder b;
        builder_init(&b, 2);
        Tpuloop__FrequencyEstimatorParameters fe = TPULOOP__FREQUENCY_ESTIMATOR_PARAMETERS__INIT;
        fe.tau = taus[i], fe.max_delta = 10, fe.outlier_threshold = 2, fe.weight_exponent = 1;
        b.op[1].parameters_case = TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_FREQUENCY_ESTIMATOR;
        b.op[1].frequency_estimator = &fe;
        b.t[1].dimension = 1;
        warned[0] = '\0';
        tl_set_log_handler(capture, NULL);
        tl_set_log_level(TL_LOG_WARN);
        tl_emb_spec *s = parse_ok(&b);
        tl_set_log_level(TL_LOG_OFF);
        tl_set_log_handler(NULL, NULL);
        char want[200];
        snprintf(want, sizeof want, "table \"t1\": FrequencyEstimator tau %g is outside (0, 1)", (double)taus[i]);
        cr_assert(strstr(warned, want) != NULL, "tau %g: warnings:\n%s", (double)taus[i], warned);
        cr_assert_eq(tl_emb_spec_config(s)->tables[1].optimizer->tau, taus[i]);
        tl_emb_spec_destroy(s);
    }
}

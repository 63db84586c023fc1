/* spec_proto.c — TensorFlow's binary TPUEmbeddingConfiguration (and each
 * table's OptimizationParameters) into a tl_emb_spec, decoded with
 * protobuf-c from proto/tpuloop/tpu_embedding.proto. The mapping, field by
 * field, is in tpuloop/emb_spec.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "emb_spec_int.h"
#include "tpuloop/tpu_embedding.pb-c.h"

typedef Tpuloop__TPUEmbeddingConfiguration pb_config;
typedef Tpuloop__TPUEmbeddingConfiguration__TableDescriptor pb_table;
typedef Tpuloop__TPUEmbeddingConfiguration__FeatureDescriptor pb_feature;
typedef Tpuloop__OptimizationParameters pb_optim;

/* ---- decoding ---------------------------------------------------------------- */

/* protobuf-c returns NULL both for malformed bytes and for a failed
 * allocation; the flag tells the two apart. Allocations go through
 * tpuloop's hook so that allocation-failure tests reach the decoder. */
typedef struct pb_alloc_state {
    bool oom;
} pb_alloc_state;

static void *pb_alloc(void *ud, size_t n)
{
    void *p = tl_malloc(n > 0 ? n : 1);
    if (p == NULL)
        ((pb_alloc_state *)ud)->oom = true;
    return p;
}

static void pb_free(void *ud, void *p)
{
    (void)ud;
    tl_free(p);
}

/* Where the bytes go wrong, for the message of a failed decode: a walk of
 * the wire format guided by the generated descriptors, so it names the
 * field path and the byte offset. It checks what protobuf-c checks —
 * varints, lengths, wire types of known fields, groups — and recurses into
 * known message fields. Writes a description to why and returns false at
 * the first problem. */
typedef struct wire_walk {
    const uint8_t *base; /* the whole input, for offsets */
    char *why;
    size_t why_len;
} wire_walk;

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if ((b & 0x80) == 0) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* The wire type a known field's value has when not packed. */
static unsigned field_wire_type(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return 5;
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return 1;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return 2;
    default:
        return 0;
    }
}

static const char *const wire_names[8] = {"varint",    "fixed64",   "length-delimited", "start group",
                                          "end group", "fixed32",   "invalid (6)",      "invalid (7)"};

/* Reports a problem with the field at byte `at`: "<path> (field N, at byte
 * X): <what>". */
static bool bad_field(wire_walk *w, const char *sub, uint64_t num, size_t at, const char *what)
{
    snprintf(w->why, w->why_len, "%s (field %llu, at byte %zu): %s", sub, (unsigned long long)num, at, what);
    return false;
}

static bool walk(wire_walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                 const char *path, int depth)
{
    const char *here = path[0] != '\0' ? path : "TPUEmbeddingConfiguration";
    unsigned counts[64] = {0}; /* occurrences of each known field, for repeated indices */
    char what[160];
    while (p < end) {
        size_t at = (size_t)(p - w->base);
        uint64_t tag;
        if (!read_varint(&p, end, &tag)) {
            snprintf(w->why, w->why_len, "%s: the field key at byte %zu is a truncated or overlong varint", here, at);
            return false;
        }
        uint64_t num = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        if (num == 0 || num > 536870911u) {
            snprintf(w->why, w->why_len, "%s: field number %llu at byte %zu (valid: 1..536870911)", here,
                     (unsigned long long)num, at);
            return false;
        }
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)num);
        const char *dot = path[0] != '\0' ? "." : "";
        char sub[256];
        if (f == NULL) {
            snprintf(sub, sizeof sub, "%s%s<unknown>", path, dot);
        } else {
            unsigned idx = (unsigned)(f - d->fields);
            unsigned k = idx < 64 ? counts[idx]++ : 0;
            if (f->label == PROTOBUF_C_LABEL_REPEATED)
                snprintf(sub, sizeof sub, "%s%s%s[%u]", path, dot, f->name, k);
            else
                snprintf(sub, sizeof sub, "%s%s%s", path, dot, f->name);
        }
        if (wt == 3 || wt == 4 || wt > 5) {
            snprintf(what, sizeof what, "wire type %u (%s), which a proto3 message never has", wt, wire_names[wt]);
            return bad_field(w, sub, num, at, what);
        }
        unsigned want = f != NULL ? field_wire_type(f->type) : wt;
        bool packable = f != NULL && f->label == PROTOBUF_C_LABEL_REPEATED && want != 2;
        if (wt != want && !(packable && wt == 2)) {
            snprintf(what, sizeof what, "wire type %u (%s), expected %u (%s)", wt, wire_names[wt], want,
                     wire_names[want]);
            return bad_field(w, sub, num, at, what);
        }
        uint64_t v, len = 0;
        switch (wt) {
        case 0:
            if (!read_varint(&p, end, &v))
                return bad_field(w, sub, num, at, "the varint value is truncated or overlong");
            break;
        case 1:
        case 5:
            len = wt == 1 ? 8 : 4;
            if ((uint64_t)(end - p) < len) {
                snprintf(what, sizeof what, "a %llu-byte value but only %zu bytes are left", (unsigned long long)len,
                         (size_t)(end - p));
                return bad_field(w, sub, num, at, what);
            }
            p += len;
            break;
        default: { /* 2 */
            if (!read_varint(&p, end, &len))
                return bad_field(w, sub, num, at, "the length is a truncated or overlong varint");
            if (len > (uint64_t)(end - p)) {
                snprintf(what, sizeof what, "length %llu but only %zu bytes are left", (unsigned long long)len,
                         (size_t)(end - p));
                return bad_field(w, sub, num, at, what);
            }
            const uint8_t *body = p;
            p += len;
            if (f == NULL)
                break;
            if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth >= 32)
                    return bad_field(w, sub, num, at, "messages nested deeper than 32");
                if (!walk(w, f->descriptor, body, p, sub, depth + 1))
                    return false;
            } else if (packable) {
                /* A packed run: whole values only. */
                size_t width = want == 1 ? 8 : want == 5 ? 4 : 0;
                for (const uint8_t *q = body; q < p;) {
                    if (width == 0 ? !read_varint(&q, p, &v) : (size_t)(p - q) < width)
                        return bad_field(w, sub, num, at, "the packed values end in a partial value");
                    q += width;
                }
            }
            break;
        }
        }
    }
    return true;
}

/* The TL_EPARSE of bytes protobuf-c refused. */
static tl_status malformed(const uint8_t *data, size_t len)
{
    char why[512];
    wire_walk w = {data, why, sizeof why};
    if (walk(&w, &tpuloop__tpuembedding_configuration__descriptor, data, data + len, "", 0))
        snprintf(why, sizeof why,
                 "protobuf-c refused the bytes although every field frames correctly");
    return tl_error(TL_EPARSE, "Malformed tpu_embedding_config. (%zu bytes, a tensorflow.tpu."
                    "TPUEmbeddingConfiguration): %s",
                    len, why);
}

/* ---- OptimizationParameters ------------------------------------------------------ */

static void limits_of(const Tpuloop__ClippingLimits *c, tl_emb_limits *l)
{
    *l = (tl_emb_limits){0};
    if (c == NULL)
        return;
    if (c->lower != NULL) {
        l->has_lower = true;
        l->lower = c->lower->value;
    }
    if (c->upper != NULL) {
        l->has_upper = true;
        l->upper = c->upper->value;
    }
}

/* The algorithm of the oneof; TL_EMB_OPT_NONE when unset. */
static tl_emb_algorithm algorithm_of(const pb_optim *p)
{
    switch (p->parameters_case) {
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_ADAGRAD: return TL_EMB_ADAGRAD;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_STOCHASTIC_GRADIENT_DESCENT: return TL_EMB_SGD;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_FTRL: return TL_EMB_FTRL;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_ADAM: return TL_EMB_ADAM;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_MOMENTUM: return TL_EMB_MOMENTUM;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_RMS_PROP: return TL_EMB_RMSPROP;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_CENTERED_RMS_PROP: return TL_EMB_CENTERED_RMSPROP;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_MDL_ADAGRAD_LIGHT: return TL_EMB_MDL_ADAGRAD_LIGHT;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_ADADELTA: return TL_EMB_ADADELTA;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_PROXIMAL_ADAGRAD: return TL_EMB_PROXIMAL_ADAGRAD;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_BOUNDED_ADAGRAD: return TL_EMB_BOUNDED_ADAGRAD;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_ONLINE_YOGI: return TL_EMB_ONLINE_YOGI;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_PROXIMAL_YOGI: return TL_EMB_PROXIMAL_YOGI;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_FREQUENCY_ESTIMATOR: return TL_EMB_FREQUENCY_ESTIMATOR;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_USER_DEFINED_PROGRAM: return TL_EMB_USER_DEFINED;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_ASSIGN: return TL_EMB_ASSIGN;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_ADAGRAD_MOMENTUM: return TL_EMB_ADAGRAD_MOMENTUM;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_LION: return TL_EMB_LION;
    case TPULOOP__OPTIMIZATION_PARAMETERS__PARAMETERS_FREQUENCY_AWARE_ADAGRAD: return TL_EMB_FREQUENCY_AWARE_ADAGRAD;
    default: return TL_EMB_OPT_NONE;
    }
}

/* Each algorithm's fields. proto3 has no presence: a field left out is 0
 * here, as the TPU reads it. */
static void algorithm_fields(const pb_optim *p, tl_emb_optimizer *o)
{
    switch (o->algorithm) {
    case TL_EMB_ADAGRAD_MOMENTUM: {
        const Tpuloop__AdagradMomentumParameters *a = p->adagrad_momentum;
        o->momentum = a->momentum;
        o->use_nesterov = a->use_nesterov;
        o->exponent = a->exponent;
        o->beta2 = a->beta2;
        o->epsilon = a->epsilon;
        break;
    }
    case TL_EMB_BOUNDED_ADAGRAD:
        o->update_accumulator_first = p->bounded_adagrad->update_accumulator_first;
        o->max_var_update = p->bounded_adagrad->max_var_update;
        o->max_accumulator = p->bounded_adagrad->max_accumulator;
        break;
    case TL_EMB_FREQUENCY_AWARE_ADAGRAD: {
        const Tpuloop__FrequencyAwareAdagradParameters *a = p->frequency_aware_adagrad;
        o->l1_regularization_strength = a->l1_regularization_strength;
        o->l2_regularization_strength = a->l2_regularization_strength;
        o->max_lr_multiplier = a->max_lr_multiplier;
        o->probability_exponent = a->probability_exponent;
        o->accumulator_decay = a->accumulator_decay;
        o->initial_accumulator_value = a->initial_accumulator_value;
        /* An absent DynamicHyperParameter reads as tag 0. */
        o->step_counter_tag = a->step_counter != NULL ? a->step_counter->tag : 0;
        break;
    }
    case TL_EMB_FTRL:
        /* allow_zero_accumulator is deprecated and ignored, as in TensorFlow. */
        o->l1_regularization_strength = p->ftrl->l1;
        o->l2_regularization_strength = p->ftrl->l2;
        o->learning_rate_power = p->ftrl->lr_power;
        o->multiply_linear_by_lr = p->ftrl->multiply_linear_by_lr;
        o->beta = p->ftrl->beta;
        break;
    case TL_EMB_ADAM:
        o->beta1 = p->adam->beta1;
        o->beta2 = p->adam->beta2;
        o->epsilon = p->adam->epsilon;
        o->use_non_lazy = p->adam->use_non_lazy_adam;
        o->use_sum_inside_sqrt = p->adam->use_sum_inside_sqrt;
        break;
    case TL_EMB_MOMENTUM:
        o->momentum = p->momentum->momentum;
        o->use_nesterov = p->momentum->use_nesterov;
        break;
    case TL_EMB_LION:
        o->beta1 = p->lion->beta1;
        o->beta2 = p->lion->beta2;
        o->use_non_lazy = p->lion->use_non_lazy_lion;
        break;
    case TL_EMB_RMSPROP:
        o->rho = p->rms_prop->rho;
        o->momentum = p->rms_prop->momentum;
        o->epsilon = p->rms_prop->epsilon;
        break;
    case TL_EMB_CENTERED_RMSPROP:
        o->rho = p->centered_rms_prop->rho;
        o->momentum = p->centered_rms_prop->momentum;
        o->epsilon = p->centered_rms_prop->epsilon;
        break;
    case TL_EMB_MDL_ADAGRAD_LIGHT:
        /* Read for completeness; validation refuses the algorithm. */
        o->l2_regularization_strength = p->mdl_adagrad_light->l2;
        o->learning_rate_power = p->mdl_adagrad_light->lr_power;
        break;
    case TL_EMB_ADADELTA:
        o->rho = p->adadelta->rho;
        o->epsilon = p->adadelta->epsilon;
        break;
    case TL_EMB_PROXIMAL_ADAGRAD:
        o->l1_regularization_strength = p->proximal_adagrad->l1;
        o->l2_regularization_strength = p->proximal_adagrad->l2;
        break;
    case TL_EMB_ONLINE_YOGI:
        o->l1_regularization_strength = p->online_yogi->l1;
        o->l2_regularization_strength = p->online_yogi->l2;
        o->beta2 = p->online_yogi->beta2;
        break;
    case TL_EMB_PROXIMAL_YOGI: {
        const Tpuloop__ProximalYogiParameters *a = p->proximal_yogi;
        o->l1_regularization_strength = a->l1;
        o->l2_regularization_strength = a->l2;
        o->beta1 = a->beta1;
        o->beta2 = a->beta2;
        o->epsilon = a->epsilon;
        break;
    }
    case TL_EMB_FREQUENCY_ESTIMATOR:
        o->tau = p->frequency_estimator->tau;
        o->max_delta = p->frequency_estimator->max_delta;
        o->outlier_threshold = p->frequency_estimator->outlier_threshold;
        o->weight_exponent = p->frequency_estimator->weight_exponent;
        break;
    default: /* Adagrad, SGD, Assign: no fields */
        break;
    }
}

/* Table i's OptimizationParameters (p may be NULL: absent) into *o. */
static tl_status optimizer_of(const pb_optim *p, int i, const char *table, tl_emb_optimizer *o)
{
    tl_emb_algorithm a = p != NULL ? algorithm_of(p) : TL_EMB_OPT_NONE;
    if (a == TL_EMB_OPT_NONE)
        return tl_error(TL_EINVAL,
                        "table \"%s\": No optimization algorithm specified (table_descriptor[%d]."
                        "optimization_parameters %s; set one of adagrad, stochastic_gradient_descent, ftrl, adam, "
                        "momentum, lion, rms_prop, centered_rms_prop, adadelta, proximal_adagrad, proximal_yogi, "
                        "adagrad_momentum, bounded_adagrad, frequency_aware_adagrad, frequency_estimator, assign)",
                        table, i, p == NULL ? "is absent" : "has no algorithm");
    if (a == TL_EMB_USER_DEFINED)
        return tl_error(TL_ENOTIMPL,
                        "table \"%s\": table_descriptor[%d].optimization_parameters.user_defined_program holds an "
                        "XLA program (%zu bytes of HloModuleProto), which tpuloop cannot run; give the table a C "
                        "update function (tl_emb_optimizer.user_fn) through the C API instead",
                        table, i, p->user_defined_program->program.len);
    tl_emb_optimizer_default(a, o);

    const Tpuloop__LearningRate *lr = p->learning_rate;
    if (lr != NULL && lr->learning_rate_case == TPULOOP__LEARNING_RATE__LEARNING_RATE_DYNAMIC) {
        int tag = lr->dynamic != NULL ? lr->dynamic->tag : 0;
        if (tag < 0)
            return tl_error(TL_EINVAL,
                            "table \"%s\": table_descriptor[%d].optimization_parameters.learning_rate.dynamic.tag "
                            "must be >= 0 (an index into the learning rates of each gradient send); got %d",
                            table, i, tag);
        o->lr_tag = tag;
    } else {
        if (lr == NULL || lr->learning_rate_case != TPULOOP__LEARNING_RATE__LEARNING_RATE_CONSTANT)
            tl_log(TL_LOG_WARN,
                   "table \"%s\": table_descriptor[%d].optimization_parameters.learning_rate is not set; it reads "
                   "as the constant 0, and the table will not learn",
                   table, i);
        o->learning_rate = lr != NULL && lr->learning_rate_case == TPULOOP__LEARNING_RATE__LEARNING_RATE_CONSTANT
                               ? lr->constant
                               : 0.0f;
        o->lr_tag = -1;
    }
    limits_of(p->clipping_limits, &o->clipping_limits);
    limits_of(p->gradient_clipping_limits, &o->gradient_clipping_limits);
    o->weight_decay_factor = p->weight_decay_factor;
    o->multiply_weight_decay_factor_by_learning_rate = p->multiply_weight_decay_factor_by_learning_rate;
    o->gradient_accumulation_status = (tl_emb_accumulation)p->gradient_accumulation_status;
    if (p->simulated_quantization != NULL) {
        o->simulated_quantization.enabled = p->simulated_quantization->enabled;
        limits_of(p->simulated_quantization->clipping_limits, &o->simulated_quantization.clipping_limits);
        o->simulated_quantization.num_buckets = p->simulated_quantization->num_buckets;
    }
    o->low_dimensional_packing_status = (int)p->low_dimensional_packing_status;
    o->hot_id_replication_status =
        p->hot_id_replication_configuration != NULL ? (int)p->hot_id_replication_configuration->status : 0;
    algorithm_fields(p, o);
    return TL_OK;
}

/* ---- TPUEmbeddingConfiguration ---------------------------------------------------- */

static tl_status check_top(const pb_config *m)
{
    if (m->mode == TPULOOP__TPUEMBEDDING_CONFIGURATION__MODE__UNSPECIFIED ||
        (int)m->mode > TPULOOP__TPUEMBEDDING_CONFIGURATION__MODE__BACKWARD_PASS_ONLY || (int)m->mode < 0)
        return tl_error(TL_EINVAL,
                        "TPUEmbeddingConfiguration.mode is INVALID.  Must be INFERENCE, TRAINING, or "
                        "BACKWARD_PASS_ONLY (got %d%s)",
                        (int)m->mode, m->mode == 0 ? ", UNSPECIFIED" : "");
    if (m->n_table_descriptor == 0)
        return tl_error(TL_EINVAL, "TPUEmbeddingConfiguration.table_descriptor is empty; at least one table is "
                                   "required");
    if (m->n_table_descriptor > INT_MAX / 2 || m->n_feature_descriptor > INT_MAX / 2)
        return tl_error(TL_EINVAL, "TPUEmbeddingConfiguration: %zu tables and %zu features are too many",
                        m->n_table_descriptor, m->n_feature_descriptor);
    if (m->n_feature_descriptor == 0)
        return tl_error(TL_ENOTIMPL,
                        "TPUEmbeddingConfiguration has no feature_descriptor: TensorFlow's old per-table outputs "
                        "(no feature_descriptor) are not supported; write feature descriptors, one per input "
                        "feature, each with its table_id and input_shape [batch] or [batch, max_sequence_length]");
    if (m->batch_size_per_tensor_core != 0)
        return tl_error(TL_EINVAL,
                        "TPUEmbeddingConfiguration.batch_size_per_tensor_core must not be set when "
                        "feature_descriptor is populated (it comes from each feature's input_shape[0]); got %d",
                        m->batch_size_per_tensor_core);
    if (m->num_hosts < 0)
        return tl_error(TL_EINVAL, "TPUEmbeddingConfiguration.num_hosts must be >= 0 (0 means 1); got %d",
                        m->num_hosts);
    if (m->num_tensor_cores < 1)
        return tl_error(TL_EINVAL,
                        "TPUEmbeddingConfiguration.num_tensor_cores must be >= 1 (the replicas that enqueue); "
                        "got %d",
                        m->num_tensor_cores);
    if ((int)m->sharding_strategy != TPULOOP__TPUEMBEDDING_CONFIGURATION__SHARDING_STRATEGY__DIV_DEFAULT &&
        (int)m->sharding_strategy != TPULOOP__TPUEMBEDDING_CONFIGURATION__SHARDING_STRATEGY__MOD)
        return tl_error(TL_EINVAL,
                        "TPUEmbeddingConfiguration.sharding_strategy must be DIV_DEFAULT (0) or MOD (1); got %d",
                        (int)m->sharding_strategy);
    if (m->spmd_sharding != NULL && m->spmd_sharding->enabled && m->spmd_sharding->num_cores_per_replica > 1)
        return tl_error(TL_ENOTIMPL,
                        "TPUEmbeddingConfiguration.spmd_sharding: num_cores_per_replica %d (model parallelism "
                        "on the TensorCore side) is not supported; tpuloop's embedding outputs are per replica "
                        "(num_cores_per_replica 1)",
                        m->spmd_sharding->num_cores_per_replica);
    return TL_OK;
}

static tl_status fill_tables(tl_emb_spec *s, const pb_config *m)
{
    for (int i = 0; i < s->cfg.num_tables; i++) {
        const pb_table *t = m->table_descriptor[i];
        tl_emb_table_config *tc = &s->tables[i];
        const char *nm = t->name != NULL ? t->name : "";
        tl_status st = emb_spec_set_name(s, false, i, nm, strlen(nm));
        if (st != TL_OK)
            return st;
        if (t->vocabulary_size < 1)
            return tl_error(TL_EINVAL, "table \"%s\": table_descriptor[%d].vocabulary_size must be >= 1; got %lld",
                            tc->name, i, (long long)t->vocabulary_size);
        if (t->dimension < 1)
            return tl_error(TL_EINVAL, "table \"%s\": table_descriptor[%d].dimension must be >= 1; got %d",
                            tc->name, i, t->dimension);
        tc->vocabulary_size = t->vocabulary_size;
        tc->dim = t->dimension;
        /* No combiner in the proto: TableConfig's default (the enqueue may
         * override it per feature); no initializer: TableConfig's default,
         * truncated normal with stddev 1/sqrt(dim), which the zeroed
         * initializer already says. */
        tc->combiner = TL_EMB_COMBINER_MEAN;
        st = optimizer_of(t->optimization_parameters, i, tc->name, &s->opts[i]);
        if (st != TL_OK)
            return st;
        tc->optimizer = &s->opts[i];
    }
    return TL_OK;
}

static tl_status fill_features(tl_emb_spec *s, const pb_config *m)
{
    int batch = 0, batch_from = -1;
    for (int j = 0; j < s->cfg.num_features; j++) {
        const pb_feature *f = m->feature_descriptor[j];
        tl_emb_feature_config *fc = &s->features[j];
        const char *nm = f->name != NULL ? f->name : "";
        tl_status st = emb_spec_set_name(s, true, j, nm, strlen(nm));
        if (st != TL_OK)
            return st;
        if (f->table_id < 0 || f->table_id >= s->cfg.num_tables)
            return tl_error(TL_EINVAL,
                            "feature \"%s\": feature_descriptor[%d].table_id must be in [0, %d) (an index into "
                            "table_descriptor); got %d",
                            fc->name, j, s->cfg.num_tables, f->table_id);
        fc->table = f->table_id;
        if (f->n_input_shape == 0)
            return tl_error(TL_EINVAL,
                            "feature \"%s\": feature_descriptor[%d].input_shape is empty; it must be [batch] or "
                            "[batch, max_sequence_length]",
                            fc->name, j);
        if (f->n_input_shape > 2)
            return tl_error(TL_ENOTIMPL,
                            "feature \"%s\": feature_descriptor[%d].input_shape has rank %zu; tpuloop supports "
                            "[batch] and [batch, max_sequence_length] (rank 1 or 2)",
                            fc->name, j, f->n_input_shape);
        for (size_t d = 0; d < f->n_input_shape; d++)
            if (f->input_shape[d] < 1)
                return tl_error(TL_EINVAL,
                                "feature \"%s\": feature_descriptor[%d].input_shape[%zu] must be >= 1; got %d",
                                fc->name, j, d, f->input_shape[d]);
        if (batch_from >= 0 && f->input_shape[0] != batch)
            return tl_error(TL_EINVAL,
                            "feature \"%s\": feature_descriptor[%d].input_shape[0] is %d but feature_descriptor[%d] "
                            "has %d; every feature must have the same batch (batch_size_per_tensor_core)",
                            fc->name, j, f->input_shape[0], batch_from, batch);
        batch = f->input_shape[0];
        batch_from = j;
        fc->max_sequence_length = f->n_input_shape == 2 ? f->input_shape[1] : 0;
    }
    s->cfg.batch_size_per_tensor_core = batch;
    return TL_OK;
}

tl_status tl_emb_spec_from_proto(const void *data, size_t len, tl_emb_spec **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_emb_spec_from_proto: out is NULL");
    *out = NULL;
    if (data == NULL && len > 0)
        return tl_error(TL_EINVAL, "tl_emb_spec_from_proto: data is NULL but len is %zu", len);
    static const uint8_t empty[1] = {0};
    const uint8_t *bytes = len > 0 ? data : empty;

    pb_alloc_state as = {false};
    ProtobufCAllocator a = {pb_alloc, pb_free, &as};
    pb_config *m = tpuloop__tpuembedding_configuration__unpack(&a, len, bytes);
    if (m == NULL)
        return as.oom ? tl_error_oom() : malformed(bytes, len);

    tl_emb_spec *s = NULL;
    tl_status st = check_top(m);
    if (st == TL_OK)
        st = emb_spec_new((int)m->n_table_descriptor, (int)m->n_feature_descriptor, &s);
    if (st == TL_OK) {
        s->cfg.mode = (tl_emb_mode)m->mode;
        s->cfg.num_shards = m->num_hosts > 0 ? m->num_hosts : 1;
        s->cfg.num_tensor_cores = m->num_tensor_cores;
        s->cfg.sharding_strategy = m->sharding_strategy == TPULOOP__TPUEMBEDDING_CONFIGURATION__SHARDING_STRATEGY__MOD
                                       ? TL_EMB_MOD
                                       : TL_EMB_DIV_DEFAULT;
        s->cfg.pipeline_execution_with_tensor_core = m->pipeline_execution_with_tensor_core;
        st = fill_tables(s, m);
    }
    if (st == TL_OK)
        st = fill_features(s, m);
    if (st == TL_OK)
        st = emb_spec_finish(s);
    tpuloop__tpuembedding_configuration__free_unpacked(m, &a);
    if (st != TL_OK) {
        tl_emb_spec_destroy(s);
        return st;
    }
    *out = s;
    return TL_OK;
}

/* Files past this are not embedding configurations (TensorFlow's are a few
 * hundred bytes a table). */
#define MAX_PROTO_FILE ((size_t)1 << 30)

tl_status tl_emb_spec_from_proto_file(const char *path, tl_emb_spec **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_emb_spec_from_proto_file: out is NULL");
    *out = NULL;
    if (path == NULL)
        return tl_error(TL_EINVAL, "tl_emb_spec_from_proto_file: path is NULL");
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return tl_error(TL_EIO, "cannot open the embedding configuration '%s': %s", path, strerror(errno));
    tl_status st = TL_OK;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_PROTO_FILE) {
                st = tl_error(TL_EINVAL, "the embedding configuration '%s' is larger than %zu bytes", path,
                              MAX_PROTO_FILE);
                break;
            }
            size_t ncap = cap == 0 ? 4096 : cap * 2;
            uint8_t *nb = tl_realloc(buf, ncap);
            if (nb == NULL) {
                st = tl_error_oom();
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) {
            if (ferror(fp))
                st = tl_error(TL_EIO, "cannot read the embedding configuration '%s': %s", path, strerror(errno));
            break;
        }
    }
    fclose(fp);
    if (st == TL_OK) {
        st = tl_emb_spec_from_proto(buf, len, out);
        if (st != TL_OK && st != TL_ENOMEM)
            st = tl_error(st, "%s: %s", path, tl_last_error());
    }
    tl_free(buf);
    return st;
}

/* spec_json_optim.c — an optimizer object of the JSON `embedding` section
 * (tpuloop/emb_spec.h): its "type" and TensorFlow's Python argument names,
 * each checked against the algorithm that takes it, on top of
 * tl_emb_optimizer_default's values; and an optimizer written back as such
 * an object (tl_emb_optimizer_to_json), from the same table of keys. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emb_spec_int.h"

/* ---- optimizers ------------------------------------------------------------------ */

/* How a key sets the optimizer. */
typedef enum {
    K_FLOAT,       /* the float at off */
    K_BOOL,        /* the bool at off */
    K_NOT_BOOL,    /* the bool at off, negated (lazy_adam) */
    K_TAG,         /* the int at off, >= 0 */
    K_IGNORE_BOOL, /* a bool read and dropped (deprecated in TensorFlow) */
    K_LR,
    K_LR_TAG,
    K_ACC_BOOL,
    K_ACC_STR,
    K_CLIP_MIN,
    K_CLIP_MAX,
    K_CLIP_LIMITS,
    K_CLIPVALUE,
    K_GCLIP_LIMITS,
    K_QUANT,
    K_PACK,
    K_HOT
} key_kind;

/* The field a key sets, so that two spellings of one field are caught. */
typedef enum {
    G_LR, G_ACC, G_CLO, G_CHI, G_GCLIP, G_WD, G_WDLR, G_QUANT, G_PACK, G_HOT, G_IAV, G_MOM, G_NEST, G_EXP,
    G_B1, G_B2, G_EPS, G_UAF, G_MVU, G_MACC, G_L1, G_L2, G_MLM, G_PEXP, G_ADEC, G_SCT, G_LRP, G_MLLR, G_BETA,
    G_AZA, G_NONLAZY, G_SIS, G_RHO, G_TAU, G_MD, G_OT, G_WE, G_COUNT
} key_group;

#define A(x) (1u << TL_EMB_##x)
#define OFF(f) offsetof(tl_emb_optimizer, f)

static const struct okey {
    const char *key;
    key_kind kind;
    key_group group;
    uint32_t algs; /* the algorithms that take it; 0: all */
    size_t off;
} okeys[] = {
    {"learning_rate", K_LR, G_LR, 0, 0},
    {"learning_rate_tag", K_LR_TAG, G_LR, 0, 0},
    {"lr_tag", K_LR_TAG, G_LR, 0, 0},
    {"use_gradient_accumulation", K_ACC_BOOL, G_ACC, 0, 0},
    {"gradient_accumulation_status", K_ACC_STR, G_ACC, 0, 0},
    {"clip_weight_min", K_CLIP_MIN, G_CLO, 0, 0},
    {"clip_weight_max", K_CLIP_MAX, G_CHI, 0, 0},
    {"clipping_limits", K_CLIP_LIMITS, G_CLO, 0, 0},
    {"clipvalue", K_CLIPVALUE, G_GCLIP, 0, 0},
    {"gradient_clipping_limits", K_GCLIP_LIMITS, G_GCLIP, 0, 0},
    {"weight_decay_factor", K_FLOAT, G_WD, 0, OFF(weight_decay_factor)},
    {"multiply_weight_decay_factor_by_learning_rate", K_BOOL, G_WDLR, 0,
     OFF(multiply_weight_decay_factor_by_learning_rate)},
    {"simulated_quantization", K_QUANT, G_QUANT, 0, 0},
    {"low_dimensional_packing_status", K_PACK, G_PACK, 0, 0},
    {"hot_id_replication_status", K_HOT, G_HOT, 0, 0},
    {"initial_accumulator_value", K_FLOAT, G_IAV,
     A(ADAGRAD) | A(BOUNDED_ADAGRAD) | A(FREQUENCY_AWARE_ADAGRAD) | A(FTRL) | A(PROXIMAL_ADAGRAD) | A(PROXIMAL_YOGI),
     OFF(initial_accumulator_value)},
    {"momentum", K_FLOAT, G_MOM, A(ADAGRAD_MOMENTUM) | A(MOMENTUM) | A(RMSPROP) | A(CENTERED_RMSPROP), OFF(momentum)},
    {"use_nesterov", K_BOOL, G_NEST, A(ADAGRAD_MOMENTUM) | A(MOMENTUM), OFF(use_nesterov)},
    {"exponent", K_FLOAT, G_EXP, A(ADAGRAD_MOMENTUM), OFF(exponent)},
    {"beta_1", K_FLOAT, G_B1, A(ADAM) | A(LION) | A(PROXIMAL_YOGI), OFF(beta1)},
    {"beta1", K_FLOAT, G_B1, A(ADAM) | A(LION) | A(PROXIMAL_YOGI), OFF(beta1)},
    {"beta_2", K_FLOAT, G_B2, A(ADAGRAD_MOMENTUM) | A(ADAM) | A(LION) | A(PROXIMAL_YOGI) | A(ONLINE_YOGI), OFF(beta2)},
    {"beta2", K_FLOAT, G_B2, A(ADAGRAD_MOMENTUM) | A(ADAM) | A(LION) | A(PROXIMAL_YOGI) | A(ONLINE_YOGI), OFF(beta2)},
    {"epsilon", K_FLOAT, G_EPS,
     A(ADAGRAD_MOMENTUM) | A(ADAM) | A(RMSPROP) | A(CENTERED_RMSPROP) | A(ADADELTA) | A(PROXIMAL_YOGI), OFF(epsilon)},
    {"update_accumulator_first", K_BOOL, G_UAF, A(BOUNDED_ADAGRAD), OFF(update_accumulator_first)},
    {"max_var_update", K_FLOAT, G_MVU, A(BOUNDED_ADAGRAD), OFF(max_var_update)},
    {"max_accumulator", K_FLOAT, G_MACC, A(BOUNDED_ADAGRAD), OFF(max_accumulator)},
    {"l1_regularization_strength", K_FLOAT, G_L1,
     A(FTRL) | A(PROXIMAL_ADAGRAD) | A(PROXIMAL_YOGI) | A(FREQUENCY_AWARE_ADAGRAD) | A(ONLINE_YOGI),
     OFF(l1_regularization_strength)},
    {"l2_regularization_strength", K_FLOAT, G_L2,
     A(FTRL) | A(PROXIMAL_ADAGRAD) | A(PROXIMAL_YOGI) | A(FREQUENCY_AWARE_ADAGRAD) | A(ONLINE_YOGI) |
         A(MDL_ADAGRAD_LIGHT),
     OFF(l2_regularization_strength)},
    {"max_lr_multiplier", K_FLOAT, G_MLM, A(FREQUENCY_AWARE_ADAGRAD), OFF(max_lr_multiplier)},
    {"probability_exponent", K_FLOAT, G_PEXP, A(FREQUENCY_AWARE_ADAGRAD), OFF(probability_exponent)},
    {"accumulator_decay", K_FLOAT, G_ADEC, A(FREQUENCY_AWARE_ADAGRAD), OFF(accumulator_decay)},
    {"step_counter_tag", K_TAG, G_SCT, A(FREQUENCY_AWARE_ADAGRAD), OFF(step_counter_tag)},
    {"learning_rate_power", K_FLOAT, G_LRP, A(FTRL) | A(MDL_ADAGRAD_LIGHT), OFF(learning_rate_power)},
    {"multiply_linear_by_learning_rate", K_BOOL, G_MLLR, A(FTRL), OFF(multiply_linear_by_lr)},
    {"multiply_linear_by_lr", K_BOOL, G_MLLR, A(FTRL), OFF(multiply_linear_by_lr)},
    {"beta", K_FLOAT, G_BETA, A(FTRL), OFF(beta)},
    {"allow_zero_accumulator", K_IGNORE_BOOL, G_AZA, A(FTRL), 0},
    {"lazy_adam", K_NOT_BOOL, G_NONLAZY, A(ADAM), OFF(use_non_lazy)},
    {"lazy_lion", K_NOT_BOOL, G_NONLAZY, A(LION), OFF(use_non_lazy)},
    {"use_non_lazy", K_BOOL, G_NONLAZY, A(ADAM) | A(LION), OFF(use_non_lazy)},
    {"sum_inside_sqrt", K_BOOL, G_SIS, A(ADAM), OFF(use_sum_inside_sqrt)},
    {"use_sum_inside_sqrt", K_BOOL, G_SIS, A(ADAM), OFF(use_sum_inside_sqrt)},
    {"rho", K_FLOAT, G_RHO, A(RMSPROP) | A(CENTERED_RMSPROP) | A(ADADELTA), OFF(rho)},
    {"tau", K_FLOAT, G_TAU, A(FREQUENCY_ESTIMATOR), OFF(tau)},
    {"max_delta", K_FLOAT, G_MD, A(FREQUENCY_ESTIMATOR), OFF(max_delta)},
    {"outlier_threshold", K_FLOAT, G_OT, A(FREQUENCY_ESTIMATOR), OFF(outlier_threshold)},
    {"weight_exponent", K_FLOAT, G_WE, A(FREQUENCY_ESTIMATOR), OFF(weight_exponent)},
};

static bool takes(const struct okey *k, tl_emb_algorithm a)
{
    return k->algs == 0 || (k->algs & (1u << a)) != 0;
}

/* "type, learning_rate, ..." : the keys algorithm a takes. */
static void keys_of(tl_emb_algorithm a, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "type");
    for (size_t i = 0; i < TL_ARRAY_LEN(okeys) && used < n; i++)
        if (takes(&okeys[i], a))
            used += (size_t)snprintf(buf + used, n - used, ", %s", okeys[i].key);
}

static const char *const accum_names[] = {"unspecified", "enabled", "disabled"};
static const char *const hot_names[] = {"unspecified", "enabled", "disabled", "migration_only"};

/* simulated_quantization: {"enabled": true, "num_buckets", "lower", "upper"} */
static tl_status get_quant(const json_t *v, const char *where, tl_emb_optimizer *o)
{
    static const char *const keys[] = {"enabled", "num_buckets", "lower", "upper", NULL};
    tl_status st = emb_json_object(v, where, "an object {\"enabled\", \"num_buckets\", \"lower\", \"upper\"}");
    if (st == TL_OK)
        st = emb_json_check_keys(v, where, keys);
    if (st != TL_OK)
        return st;
    char w[EMB_WHERE_MAX];
    const json_t *x;
    o->simulated_quantization.enabled = true;
    if ((x = json_object_get(v, "enabled")) != NULL) {
        emb_json_path(w, where, ".enabled");
        if ((st = emb_json_bool(x, w, &o->simulated_quantization.enabled)) != TL_OK)
            return st;
    }
    if ((x = json_object_get(v, "num_buckets")) != NULL) {
        emb_json_path(w, where, ".num_buckets");
        if ((st = emb_json_int32(x, w, INT_MIN, &o->simulated_quantization.num_buckets)) != TL_OK)
            return st;
    }
    tl_emb_limits *l = &o->simulated_quantization.clipping_limits;
    if ((x = json_object_get(v, "lower")) != NULL) {
        emb_json_path(w, where, ".lower");
        if ((st = emb_json_bound(x, w, &l->has_lower, &l->lower)) != TL_OK)
            return st;
    }
    if ((x = json_object_get(v, "upper")) != NULL) {
        emb_json_path(w, where, ".upper");
        st = emb_json_bound(x, w, &l->has_upper, &l->upper);
    }
    return st;
}

/* clipvalue: c → [-c, c], or [min, max] with null for no bound. */
static tl_status get_clipvalue(const json_t *v, const char *where, tl_emb_limits *l)
{
    *l = (tl_emb_limits){0};
    if (json_is_number(v)) {
        float c;
        tl_status st = emb_json_float(v, where, &c);
        if (st != TL_OK)
            return st;
        if (!(c >= 0.0f))
            return tl_error(TL_EINVAL, "%s must be >= 0 (it clips gradients to [-c, c]); got %g", where, (double)c);
        *l = (tl_emb_limits){true, true, -c, c};
        return TL_OK;
    }
    if (!json_is_array(v) || json_array_size(v) != 2)
        return emb_json_wrong_type(v, where, "a number c (for [-c, c]) or a list [min, max]");
    char w[EMB_WHERE_MAX];
    emb_json_path(w, where, "[0]");
    tl_status st = emb_json_bound(json_array_get(v, 0), w, &l->has_lower, &l->lower);
    if (st != TL_OK)
        return st;
    emb_json_path(w, where, "[1]");
    return emb_json_bound(json_array_get(v, 1), w, &l->has_upper, &l->upper);
}

static tl_status apply_key(const struct okey *k, const json_t *v, const char *where, tl_emb_optimizer *o)
{
    char *field = (char *)o + k->off;
    tl_status st = TL_OK;
    bool b = false;
    int i = 0;
    switch (k->kind) {
    case K_FLOAT: return emb_json_float(v, where, (float *)(void *)field);
    case K_BOOL: return emb_json_bool(v, where, (bool *)(void *)field);
    case K_NOT_BOOL:
        if ((st = emb_json_bool(v, where, &b)) == TL_OK)
            *(bool *)(void *)field = !b;
        return st;
    case K_TAG: return emb_json_int32(v, where, 0, (int *)(void *)field);
    case K_IGNORE_BOOL: return emb_json_bool(v, where, &b);
    case K_LR:
        o->lr_tag = -1;
        return emb_json_float(v, where, &o->learning_rate);
    case K_LR_TAG: return emb_json_int32(v, where, 0, &o->lr_tag);
    case K_ACC_BOOL:
        if ((st = emb_json_bool(v, where, &b)) == TL_OK)
            o->gradient_accumulation_status = b ? TL_EMB_ACCUM_ENABLED : TL_EMB_ACCUM_DISABLED;
        return st;
    case K_ACC_STR:
        if ((st = emb_json_enum(v, where, accum_names, 3, &i)) == TL_OK)
            o->gradient_accumulation_status = (tl_emb_accumulation)i;
        return st;
    case K_CLIP_MIN: return emb_json_bound(v, where, &o->clipping_limits.has_lower, &o->clipping_limits.lower);
    case K_CLIP_MAX: return emb_json_bound(v, where, &o->clipping_limits.has_upper, &o->clipping_limits.upper);
    case K_CLIP_LIMITS: return emb_json_limits(v, where, &o->clipping_limits);
    case K_CLIPVALUE: return get_clipvalue(v, where, &o->gradient_clipping_limits);
    case K_GCLIP_LIMITS: return emb_json_limits(v, where, &o->gradient_clipping_limits);
    case K_QUANT: return get_quant(v, where, o);
    case K_PACK:
        /* Python's low_dimensional_packing_status is a bool. */
        if (json_is_boolean(v)) {
            o->low_dimensional_packing_status = json_is_true(v) ? 1 : 2;
            return TL_OK;
        }
        if ((st = emb_json_enum(v, where, accum_names, 3, &i)) == TL_OK)
            o->low_dimensional_packing_status = i;
        return st;
    case K_HOT:
        if ((st = emb_json_enum(v, where, hot_names, 4, &i)) == TL_OK)
            o->hot_id_replication_status = i;
        return st;
    }
    TL_ASSERT(0);
    return TL_OK;
}

tl_status emb_json_optimizer(const json_t *v, const char *where, tl_emb_optimizer *o)
{
    tl_status st = emb_json_object(v, where, "an object {\"type\": ..., ...}");
    if (st != TL_OK)
        return st;
    const json_t *type = json_object_get(v, "type");
    static const char *const common =
        "sgd, adagrad, adagrad_momentum, bounded_adagrad, frequency_aware_adagrad, ftrl, adam, momentum, lion, "
        "rms_prop, centered_rms_prop, adadelta, proximal_adagrad, proximal_yogi, frequency_estimator, assign";
    if (type == NULL)
        return tl_error(TL_EINVAL, "%s.type is required: one of %s", where, common);
    if (!json_is_string(type)) {
        char b[96];
        return tl_error(TL_ETYPE, "%s.type must be a str, one of %s; got %s %s", where, common, emb_json_type(type),
                        emb_json_repr(type, b, sizeof b));
    }
    tl_emb_algorithm a;
    if ((st = tl_emb_algorithm_parse(json_string_value(type), &a)) != TL_OK)
        return tl_error(st, "%s.type: %s", where, tl_last_error());
    if (a == TL_EMB_USER_DEFINED)
        return tl_error(TL_ENOTIMPL,
                        "%s.type: a user-defined program needs its C update function (tl_emb_optimizer.user_fn), "
                        "which JSON cannot give; configure the table through the C API",
                        where);
    tl_emb_optimizer_default(a, o);

    const char *seen[G_COUNT] = {0};
    const char *key;
    json_t *x;
    json_object_foreach((json_t *)v, key, x) {
        if (strcmp(key, "type") == 0)
            continue;
        const struct okey *k = NULL;
        for (size_t i = 0; i < TL_ARRAY_LEN(okeys) && k == NULL; i++)
            if (strcmp(okeys[i].key, key) == 0)
                k = &okeys[i];
        if (k == NULL || !takes(k, a)) {
            char list[700];
            keys_of(a, list, sizeof list);
            return tl_error(TL_EUNKNOWN, "%s: %s key '%s'; %s (%s) takes: %s", where,
                            k == NULL ? "unknown" : "unexpected", key, json_string_value(type),
                            tl_emb_algorithm_name(a), list);
        }
        key_group g2 = k->kind == K_CLIP_LIMITS ? G_CHI : k->group;
        const char *prev = seen[k->group] != NULL ? seen[k->group] : seen[g2];
        if (prev != NULL)
            return tl_error(TL_EINVAL, "%s: '%s' and '%s' both set the same field; give one of them", where, prev,
                            key);
        seen[k->group] = seen[g2] = key;
        char w[EMB_WHERE_MAX];
        emb_json_key(w, where, key);
        if ((st = apply_key(k, x, w, o)) != TL_OK)
            return st;
    }
    return TL_OK;
}

/* ---- the optimizer as JSON -------------------------------------------------------- */

/* The "type" of each algorithm, as the header lists them. */
static const char *const type_names[TL_EMB_ALGORITHM_COUNT] = {
    [TL_EMB_OPT_NONE] = "none",
    [TL_EMB_SGD] = "sgd",
    [TL_EMB_ADAGRAD] = "adagrad",
    [TL_EMB_ADAGRAD_MOMENTUM] = "adagrad_momentum",
    [TL_EMB_BOUNDED_ADAGRAD] = "bounded_adagrad",
    [TL_EMB_FREQUENCY_AWARE_ADAGRAD] = "frequency_aware_adagrad",
    [TL_EMB_FTRL] = "ftrl",
    [TL_EMB_ADAM] = "adam",
    [TL_EMB_MOMENTUM] = "momentum",
    [TL_EMB_LION] = "lion",
    [TL_EMB_RMSPROP] = "rms_prop",
    [TL_EMB_CENTERED_RMSPROP] = "centered_rms_prop",
    [TL_EMB_MDL_ADAGRAD_LIGHT] = "mdl_adagrad_light",
    [TL_EMB_ADADELTA] = "adadelta",
    [TL_EMB_PROXIMAL_ADAGRAD] = "proximal_adagrad",
    [TL_EMB_ONLINE_YOGI] = "online_yogi",
    [TL_EMB_PROXIMAL_YOGI] = "proximal_yogi",
    [TL_EMB_FREQUENCY_ESTIMATOR] = "frequency_estimator",
    [TL_EMB_USER_DEFINED] = "user_defined_program",
    [TL_EMB_ASSIGN] = "assign",
};

/* A float as the shortest decimal that reads back as it ("0.1", not
 * 0.100000001490116), as a JSON number; null when not finite. */
static json_t *float_json(float x)
{
    if (!isfinite(x))
        return json_null();
    char buf[32];
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)x);
        if (strtof(buf, NULL) == x)
            break;
    }
    return json_real(strtod(buf, NULL));
}

static json_t *limits_json(const tl_emb_limits *l)
{
    return json_pack("{s:o, s:o}", "lower", l->has_lower ? float_json(l->lower) : json_null(), "upper",
                     l->has_upper ? float_json(l->upper) : json_null());
}

static const char *status_name(int v, const char *const *names, int n)
{
    return v >= 0 && v < n ? names[v] : "unspecified";
}

tl_status tl_emb_optimizer_to_json(const tl_emb_optimizer *o, char **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_emb_optimizer_to_json: out is NULL");
    *out = NULL;
    if (o == NULL)
        return tl_error(TL_EINVAL, "tl_emb_optimizer_to_json: the optimizer is NULL");
    tl_emb_algorithm a = o->algorithm;
    if ((int)a < 0 || (int)a >= TL_EMB_ALGORITHM_COUNT)
        return tl_error(TL_EINVAL, "embedding optimizer algorithm %d is unknown; expected 0..%d", (int)a,
                        TL_EMB_ALGORITHM_COUNT - 1);
    json_t *j = json_object();
    bool ok = j != NULL && json_object_set_new(j, "type", json_string(type_names[a])) == 0;
    if (o->lr_tag >= 0)
        ok = ok && json_object_set_new(j, "learning_rate_tag", json_integer(o->lr_tag)) == 0;
    else
        ok = ok && json_object_set_new(j, "learning_rate", float_json(o->learning_rate)) == 0;
    const tl_emb_limits *q = &o->simulated_quantization.clipping_limits;
    ok = ok &&
         json_object_set_new(j, "gradient_accumulation_status",
                             json_string(status_name((int)o->gradient_accumulation_status, accum_names, 3))) == 0 &&
         json_object_set_new(j, "clipping_limits", limits_json(&o->clipping_limits)) == 0 &&
         json_object_set_new(j, "gradient_clipping_limits", limits_json(&o->gradient_clipping_limits)) == 0 &&
         json_object_set_new(j, "weight_decay_factor", float_json(o->weight_decay_factor)) == 0 &&
         json_object_set_new(j, "multiply_weight_decay_factor_by_learning_rate",
                             json_boolean(o->multiply_weight_decay_factor_by_learning_rate)) == 0 &&
         json_object_set_new(j, "simulated_quantization",
                             json_pack("{s:b, s:i, s:o, s:o}", "enabled", o->simulated_quantization.enabled,
                                       "num_buckets", o->simulated_quantization.num_buckets, "lower",
                                       q->has_lower ? float_json(q->lower) : json_null(), "upper",
                                       q->has_upper ? float_json(q->upper) : json_null())) == 0 &&
         json_object_set_new(j, "low_dimensional_packing_status",
                             json_string(status_name(o->low_dimensional_packing_status, accum_names, 3))) == 0 &&
         json_object_set_new(j, "hot_id_replication_status",
                             json_string(status_name(o->hot_id_replication_status, hot_names, 4))) == 0;
    /* The algorithm's own keys, each field once under its first spelling
     * (TensorFlow's Python name); allow_zero_accumulator sets nothing. */
    bool seen[G_COUNT] = {false};
    for (size_t i = 0; ok && i < TL_ARRAY_LEN(okeys); i++) {
        const struct okey *k = &okeys[i];
        if (k->algs == 0 || !takes(k, a) || seen[k->group] || k->kind == K_IGNORE_BOOL)
            continue;
        seen[k->group] = true;
        const char *field = (const char *)o + k->off;
        json_t *v = k->kind == K_FLOAT      ? float_json(*(const float *)(const void *)field)
                    : k->kind == K_BOOL     ? json_boolean(*(const bool *)(const void *)field)
                    : k->kind == K_NOT_BOOL ? json_boolean(!*(const bool *)(const void *)field)
                                            : json_integer(*(const int *)(const void *)field);
        ok = json_object_set_new(j, k->key, v) == 0;
    }
    char *text = ok ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (text == NULL)
        return tl_error_oom();
    *out = tl_strdup(text);
    free(text);
    return *out != NULL ? TL_OK : tl_error_oom();
}

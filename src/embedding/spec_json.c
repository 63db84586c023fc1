/* spec_json.c — the JSON `embedding` section into a tl_emb_spec, in the
 * words of tf.tpu.experimental.embedding's Python classes (TableConfig,
 * FeatureConfig), and the typed readers of JSON values the section and its
 * optimizer objects (spec_json_optim.c) are read with. Keys and defaults
 * are listed in tpuloop/emb_spec.h. Every message names its key by path
 * from "embedding", e.g. "embedding.tables[1].optimizer.beta_1". */
#include <float.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "emb_spec_int.h"

#define ROOT "embedding"

/* w = where followed by a and b (either may be NULL), cut to fit. */
static const char *path_cat(char *w, const char *where, const char *a, const char *b)
{
    size_t n = 0;
    const char *parts[3] = {where, a, b};
    for (int i = 0; i < 3; i++)
        for (const char *p = parts[i]; p != NULL && *p != '\0' && n + 1 < EMB_WHERE_MAX; p++)
            w[n++] = *p;
    w[n] = '\0';
    return w;
}

const char *emb_json_path(char *w, const char *where, const char *suffix)
{
    return path_cat(w, where, suffix, NULL);
}

const char *emb_json_key(char *w, const char *where, const char *key)
{
    return path_cat(w, where, ".", key);
}

/* ---- values -------------------------------------------------------------------- */

/* Python's name of a JSON value's type, as TensorFlow users read types. */
const char *emb_json_type(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "dict";
    case JSON_ARRAY: return "list";
    case JSON_STRING: return "str";
    case JSON_INTEGER: return "int";
    case JSON_REAL: return "float";
    case JSON_TRUE:
    case JSON_FALSE: return "bool";
    default: return "NoneType";
    }
}

/* A short emb_json_repr of v for messages: 'abc', 3, 0.5, True, None, a dict. */
const char *emb_json_repr(const json_t *v, char *buf, size_t n)
{
    switch (json_typeof(v)) {
    case JSON_STRING: snprintf(buf, n, "'%.60s%s'", json_string_value(v), json_string_length(v) > 60 ? "..." : ""); break;
    case JSON_INTEGER: snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: snprintf(buf, n, "%.17g", json_real_value(v)); break;
    case JSON_TRUE: snprintf(buf, n, "True"); break;
    case JSON_FALSE: snprintf(buf, n, "False"); break;
    case JSON_NULL: snprintf(buf, n, "None"); break;
    default: snprintf(buf, n, "a %s", emb_json_type(v)); break;
    }
    return buf;
}

tl_status emb_json_wrong_type(const json_t *v, const char *where, const char *want)
{
    char b[96];
    return tl_error(TL_ETYPE, "%s must be %s; got %s %s", where, want, emb_json_type(v), emb_json_repr(v, b, sizeof b));
}

/* Every key of o must be in allowed (NULL-terminated). */
tl_status emb_json_check_keys(const json_t *o, const char *where, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        size_t i = 0;
        while (allowed[i] != NULL && strcmp(allowed[i], key) != 0)
            i++;
        if (allowed[i] != NULL)
            continue;
        char list[512];
        size_t used = 0;
        list[0] = '\0';
        for (i = 0; allowed[i] != NULL && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", allowed[i]);
        return tl_error(TL_EUNKNOWN, "%s: unknown key '%s'; allowed: %s", where, key, list);
    }
    return TL_OK;
}

tl_status emb_json_int(const json_t *v, const char *where, int64_t lo, int64_t hi, int64_t *out)
{
    if (!json_is_integer(v))
        return emb_json_wrong_type(v, where, "an int");
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        if (hi == INT64_MAX)
            return tl_error(TL_EINVAL, "%s must be >= %lld; got %lld", where, (long long)lo, (long long)x);
        return tl_error(TL_EINVAL, "%s must be in [%lld, %lld]; got %lld", where, (long long)lo, (long long)hi,
                        (long long)x);
    }
    *out = x;
    return TL_OK;
}

tl_status emb_json_int32(const json_t *v, const char *where, int lo, int *out)
{
    int64_t x = 0;
    tl_status st = emb_json_int(v, where, lo, INT_MAX, &x);
    if (st == TL_OK)
        *out = (int)x;
    return st;
}

tl_status emb_json_number(const json_t *v, const char *where, double *out)
{
    if (!json_is_number(v))
        return emb_json_wrong_type(v, where, "a number");
    *out = json_number_value(v);
    return TL_OK;
}

tl_status emb_json_float(const json_t *v, const char *where, float *out)
{
    double d = 0;
    tl_status st = emb_json_number(v, where, &d);
    if (st != TL_OK)
        return st;
    if (d > FLT_MAX || d < -FLT_MAX)
        return tl_error(TL_EINVAL, "%s must fit in a float32 (|x| <= %g); got %g", where, (double)FLT_MAX, d);
    *out = (float)d;
    return TL_OK;
}

tl_status emb_json_bool(const json_t *v, const char *where, bool *out)
{
    if (!json_is_boolean(v))
        return emb_json_wrong_type(v, where, "a bool (true or false)");
    *out = json_is_true(v);
    return TL_OK;
}

/* A string among names[0..n) (NULL entries skipped), any case; *out its index. */
tl_status emb_json_enum(const json_t *v, const char *where, const char *const *names, int n, int *out)
{
    char list[256];
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < n; i++)
        if (names[i] != NULL && used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", used ? ", " : "", names[i]);
    if (!json_is_string(v)) {
        char b[96];
        return tl_error(TL_ETYPE, "%s must be a str, one of %s; got %s %s", where, list, emb_json_type(v),
                        emb_json_repr(v, b, sizeof b));
    }
    for (int i = 0; i < n; i++) {
        if (names[i] != NULL && strcasecmp(json_string_value(v), names[i]) == 0) {
            *out = i;
            return TL_OK;
        }
    }
    char b[96];
    return tl_error(TL_EINVAL, "%s must be one of %s; got %s", where, list, emb_json_repr(v, b, sizeof b));
}

tl_status emb_json_object(const json_t *v, const char *where, const char *what)
{
    return json_is_object(v) ? TL_OK : emb_json_wrong_type(v, where, what);
}

/* A bound: a number, or null for none. */
tl_status emb_json_bound(const json_t *v, const char *where, bool *has, float *x)
{
    if (json_is_null(v)) {
        *has = false;
        return TL_OK;
    }
    if (!json_is_number(v))
        return emb_json_wrong_type(v, where, "a number or null (no bound)");
    *has = true;
    return emb_json_float(v, where, x);
}

/* {"lower": x|null, "upper": x|null} */
tl_status emb_json_limits(const json_t *v, const char *where, tl_emb_limits *l)
{
    static const char *const keys[] = {"lower", "upper", NULL};
    tl_status st = emb_json_object(v, where, "an object {\"lower\", \"upper\"}");
    if (st == TL_OK)
        st = emb_json_check_keys(v, where, keys);
    if (st != TL_OK)
        return st;
    *l = (tl_emb_limits){0};
    char w[EMB_WHERE_MAX];
    const json_t *x;
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

/* ---- tables and features --------------------------------------------------------- */

static const char *const combiner_names[] = {"mean", "sum", "sqrtn"};

static tl_status get_combiner(const json_t *v, const char *where, tl_emb_combiner *out)
{
    if (json_is_string(v)) {
        for (int i = 0; i < 3; i++) {
            if (strcmp(json_string_value(v), combiner_names[i]) == 0) {
                *out = (tl_emb_combiner)i;
                return TL_OK;
            }
        }
    }
    char b[96];
    return tl_error(json_is_string(v) ? TL_EINVAL : TL_ETYPE,
                    "%s: Argument `combiner` must be one of ('mean', 'sum', 'sqrtn'); got %s %s", where, emb_json_type(v),
                    emb_json_repr(v, b, sizeof b));
}

/* The initializer: a type name, or {"type", and the type's parameters}. */
static tl_status parse_initializer(const json_t *v, const char *where, tl_emb_initializer *in)
{
    static const char *const types[] = {"truncated_normal", "zeros", "constant", "uniform", "row_id"};
    static const char *const k_tn[] = {"type", "mean", "stddev", NULL}, *const k_zeros[] = {"type", NULL},
                             *const k_const[] = {"type", "value", NULL},
                             *const k_unif[] = {"type", "minval", "maxval", NULL},
                             *const k_rowid[] = {"type", "offset", NULL};
    static const char *const *const keys[] = {k_tn, k_zeros, k_const, k_unif, k_rowid};
    const json_t *type = v;
    char w[EMB_WHERE_MAX];
    emb_json_path(w, where, ".type");
    if (json_is_object(v)) {
        if ((type = json_object_get(v, "type")) == NULL)
            return tl_error(TL_EINVAL, "%s is required: one of truncated_normal, zeros, constant, uniform, row_id", w);
    } else if (!json_is_string(v)) {
        return emb_json_wrong_type(v, where, "an initializer: a type name or an object {\"type\", ...}");
    }
    int kind;
    tl_status st = emb_json_enum(type, json_is_object(v) ? w : where, types, 5, &kind);
    if (st != TL_OK)
        return st;
    /* Keras' RandomUniform defaults; TableConfig's truncated normal
     * (stddev 0 stands for 1/sqrt(dim)). */
    *in = (tl_emb_initializer){.kind = (tl_emb_init_kind)kind, .minval = -0.05, .maxval = 0.05};
    if (!json_is_object(v))
        return TL_OK;
    if ((st = emb_json_check_keys(v, where, keys[kind])) != TL_OK)
        return st;
    static const struct {
        const char *key;
        size_t off;
    } nums[] = {{"mean", offsetof(tl_emb_initializer, mean)},     {"stddev", offsetof(tl_emb_initializer, stddev)},
                {"value", offsetof(tl_emb_initializer, value)},   {"minval", offsetof(tl_emb_initializer, minval)},
                {"maxval", offsetof(tl_emb_initializer, maxval)}, {"offset", offsetof(tl_emb_initializer, offset)}};
    for (size_t i = 0; i < TL_ARRAY_LEN(nums); i++) {
        const json_t *x = json_object_get(v, nums[i].key);
        if (x == NULL)
            continue;
        emb_json_key(w, where, nums[i].key);
        if ((st = emb_json_number(x, w, (double *)(void *)((char *)in + nums[i].off))) != TL_OK)
            return st;
    }
    if (in->stddev < 0)
        return tl_error(TL_EINVAL, "%s.stddev must be >= 0 (0: 1/sqrt(dim)); got %g", where, in->stddev);
    if (in->minval > in->maxval)
        return tl_error(TL_EINVAL, "%s: minval (%g) must be <= maxval (%g)", where, in->minval, in->maxval);
    return TL_OK;
}

/* A required key of o, or TL_EINVAL naming it. */
static tl_status need(const json_t *o, const char *where, const char *key, const char *what, const json_t **out)
{
    if ((*out = json_object_get(o, key)) == NULL)
        return tl_error(TL_EINVAL, "%s.%s is required (%s)", where, key, what);
    return TL_OK;
}

/* quantization_config {num_buckets, lower, upper}: TableConfig's, which
 * sets the table optimizer's simulated quantization. */
static tl_status apply_quantization(const json_t *v, const char *where, tl_emb_optimizer *o)
{
    static const char *const keys[] = {"num_buckets", "lower", "upper", NULL};
    tl_status st = emb_json_object(v, where, "an object {\"num_buckets\", \"lower\", \"upper\"}");
    if (st == TL_OK)
        st = emb_json_check_keys(v, where, keys);
    if (st != TL_OK)
        return st;
    if (o->simulated_quantization.enabled)
        return tl_error(TL_EINVAL, "%s: the table's optimizer already sets simulated_quantization; give one of them",
                        where);
    const json_t *nb, *lo, *hi;
    char w[EMB_WHERE_MAX];
    if ((st = need(v, where, "num_buckets", "an int >= 2", &nb)) != TL_OK ||
        (st = need(v, where, "lower", "a number", &lo)) != TL_OK ||
        (st = need(v, where, "upper", "a number", &hi)) != TL_OK)
        return st;
    emb_json_path(w, where, ".num_buckets");
    if ((st = emb_json_int32(nb, w, 2, &o->simulated_quantization.num_buckets)) != TL_OK)
        return st;
    tl_emb_limits *l = &o->simulated_quantization.clipping_limits;
    emb_json_path(w, where, ".lower");
    if ((st = emb_json_float(lo, w, &l->lower)) != TL_OK)
        return st;
    emb_json_path(w, where, ".upper");
    if ((st = emb_json_float(hi, w, &l->upper)) != TL_OK)
        return st;
    l->has_lower = l->has_upper = true;
    o->simulated_quantization.enabled = true;
    return TL_OK;
}

static tl_status parse_table(tl_emb_spec *s, int i, const json_t *v, bool has_global)
{
    static const char *const keys[] = {"name",      "vocabulary_size", "dim", "combiner", "initializer",
                                       "optimizer", "quantization_config", NULL};
    char where[EMB_WHERE_MAX], w[EMB_WHERE_MAX];
    snprintf(where, sizeof where, ROOT ".tables[%d]", i);
    tl_status st = emb_json_object(v, where, "an object (a TableConfig)");
    if (st == TL_OK)
        st = emb_json_check_keys(v, where, keys);
    if (st != TL_OK)
        return st;
    tl_emb_table_config *t = &s->tables[i];
    const json_t *x = json_object_get(v, "name");
    if (x != NULL && !json_is_string(x))
        return emb_json_wrong_type(x, emb_json_path(w, where, ".name"), "a str");
    if (x != NULL && json_string_length(x) == 0)
        return tl_error(TL_EINVAL, "%s.name must be non-empty (leave it out for \"table_%d\")", where, i);
    if ((st = emb_spec_set_name(s, false, i, x ? json_string_value(x) : "", x ? json_string_length(x) : 0)) != TL_OK)
        return st;

    int64_t vocab;
    if ((st = need(v, where, "vocabulary_size", "an int >= 1", &x)) != TL_OK)
        return st;
    emb_json_path(w, where, ".vocabulary_size");
    if ((st = emb_json_int(x, w, 1, INT64_MAX, &vocab)) != TL_OK)
        return st;
    t->vocabulary_size = vocab;
    if ((st = need(v, where, "dim", "an int >= 1", &x)) != TL_OK)
        return st;
    emb_json_path(w, where, ".dim");
    if ((st = emb_json_int32(x, w, 1, &t->dim)) != TL_OK)
        return st;
    t->combiner = TL_EMB_COMBINER_MEAN;
    if ((x = json_object_get(v, "combiner")) != NULL) {
        emb_json_path(w, where, ".combiner");
        if ((st = get_combiner(x, w, &t->combiner)) != TL_OK)
            return st;
    }
    if ((x = json_object_get(v, "initializer")) != NULL) {
        emb_json_path(w, where, ".initializer");
        if ((st = parse_initializer(x, w, &t->initializer)) != TL_OK)
            return st;
    }
    if ((x = json_object_get(v, "optimizer")) != NULL) {
        emb_json_path(w, where, ".optimizer");
        if ((st = emb_json_optimizer(x, w, &s->opts[i])) != TL_OK)
            return st;
        t->optimizer = &s->opts[i];
    } else if (!has_global) {
        return tl_error(TL_EINVAL,
                        "%s (\"%s\") has no optimizer and " ROOT ".optimizer is not set; give the table an "
                        "optimizer or set the global one",
                        where, t->name);
    }
    if ((x = json_object_get(v, "quantization_config")) != NULL) {
        if (t->optimizer == NULL) {
            /* The table's own copy of the global optimizer, quantized. */
            s->opts[i] = s->cfg.optimizer;
            t->optimizer = &s->opts[i];
        }
        emb_json_path(w, where, ".quantization_config");
        if ((st = apply_quantization(x, w, &s->opts[i])) != TL_OK)
            return st;
    }
    return TL_OK;
}

/* FeatureConfig.output_shape: TensorFlow's, the per-replica batch first
 * (into *batch), then the per-sample dims. */
static tl_status get_output_shape(const json_t *x, const char *w, tl_emb_feature_config *f, int64_t *batch)
{
    if (!json_is_array(x))
        return emb_json_wrong_type(x, w, "a list of ints (the batch, then each sample's dims)");
    size_t n = json_array_size(x);
    if (n < 2 || n > 1 + TL_EMB_MAX_OUTPUT_DIMS)
        return tl_error(TL_EINVAL, "%s has %zu dims; it must have 2 to %d: the batch, then each sample's bags (an "
                                   "output of [batch, 1] is the default)", w, n, 1 + TL_EMB_MAX_OUTPUT_DIMS);
    char e[EMB_WHERE_MAX + 8];
    for (size_t i = 0; i < n; i++) {
        int64_t d;
        snprintf(e, sizeof e, "%s[%zu]", w, i);
        tl_status st = emb_json_int(json_array_get(x, i), e, 1, INT32_MAX, &d);
        if (st != TL_OK)
            return st;
        if (i == 0)
            *batch = d;
        else
            f->output_shape[i - 1] = d;
    }
    f->num_output_dims = (int)n - 1;
    return TL_OK;
}

static tl_status parse_feature(tl_emb_spec *s, int j, const json_t *v, int64_t *out_batch)
{
    static const char *const keys[] = {"name", "table", "max_sequence_length", "combiner", "output_shape", NULL};
    char where[EMB_WHERE_MAX], w[EMB_WHERE_MAX];
    snprintf(where, sizeof where, ROOT ".features[%d]", j);
    tl_status st = emb_json_object(v, where, "an object (a FeatureConfig)");
    if (st == TL_OK)
        st = emb_json_check_keys(v, where, keys);
    if (st != TL_OK)
        return st;
    tl_emb_feature_config *f = &s->features[j];
    const json_t *x = json_object_get(v, "name");
    if (x != NULL && !json_is_string(x))
        return emb_json_wrong_type(x, emb_json_path(w, where, ".name"), "a str");
    if (x != NULL && json_string_length(x) == 0)
        return tl_error(TL_EINVAL, "%s.name must be non-empty (leave it out for \"feature_%d\")", where, j);
    if ((st = emb_spec_set_name(s, true, j, x ? json_string_value(x) : "", x ? json_string_length(x) : 0)) != TL_OK)
        return st;

    if ((st = need(v, where, "table", "a table's name or index", &x)) != TL_OK)
        return st;
    emb_json_path(w, where, ".table");
    if (json_is_string(x)) {
        f->table = emb_spec_find_table(s, json_string_value(x));
        if (f->table < 0) {
            char list[400];
            size_t used = 0;
            list[0] = '\0';
            for (int i = 0; i < s->cfg.num_tables && used < sizeof list; i++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "", s->tables[i].name);
            char b[96];
            return tl_error(TL_EINVAL, "%s: no table is named %s; the tables are %s", w, emb_json_repr(x, b, sizeof b), list);
        }
    } else if (json_is_integer(x)) {
        int64_t t;
        if ((st = emb_json_int(x, w, 0, s->cfg.num_tables - 1, &t)) != TL_OK)
            return st;
        f->table = (int)t;
    } else {
        return emb_json_wrong_type(x, w, "a table's name (str) or index (int)");
    }
    if ((x = json_object_get(v, "max_sequence_length")) != NULL) {
        emb_json_path(w, where, ".max_sequence_length");
        if ((st = emb_json_int32(x, w, 0, &f->max_sequence_length)) != TL_OK)
            return st;
    }
    if ((x = json_object_get(v, "combiner")) != NULL) {
        emb_json_path(w, where, ".combiner");
        if ((st = get_combiner(x, w, &f->combiner)) != TL_OK)
            return st;
        f->has_combiner = true;
    }
    *out_batch = 0;
    if ((x = json_object_get(v, "output_shape")) != NULL) {
        emb_json_path(w, where, ".output_shape");
        if ((st = get_output_shape(x, w, f, out_batch)) != TL_OK)
            return st;
    }
    return TL_OK;
}

/* ---- the section ------------------------------------------------------------------ */

/* A required non-empty list of the section. */
static tl_status get_list(const json_t *root, const char *key, const char *what, const json_t **out)
{
    const json_t *x = json_object_get(root, key);
    if (x == NULL)
        return tl_error(TL_EINVAL, ROOT ".%s is required: a list of %s", key, what);
    if (!json_is_array(x)) {
        char w[64];
        snprintf(w, sizeof w, ROOT ".%s", key);
        return emb_json_wrong_type(x, w, "a list");
    }
    if (json_array_size(x) == 0)
        return tl_error(TL_EINVAL, ROOT ".%s is empty; at least one is required (%s)", key, what);
    if (json_array_size(x) > INT_MAX / 2)
        return tl_error(TL_EINVAL, ROOT ".%s has %zu entries, too many", key, json_array_size(x));
    *out = x;
    return TL_OK;
}

static tl_status parse_top(tl_emb_spec *s, const json_t *root)
{
    static const char *const modes[] = {NULL, "inference", "training", "backward_pass_only"};
    static const char *const shardings[] = {"div_default", "mod"};
    static const char *const bounds[] = {"fatal", "warning", "ignore"};
    tl_emb_config *c = &s->cfg;
    const json_t *x;
    tl_status st = TL_OK;
    int i;
    if ((x = json_object_get(root, "mode")) != NULL) {
        if ((st = emb_json_enum(x, ROOT ".mode", modes, 4, &i)) != TL_OK)
            return st;
        c->mode = (tl_emb_mode)i;
    }
    if ((x = json_object_get(root, "num_tensor_cores")) != NULL &&
        (st = emb_json_int32(x, ROOT ".num_tensor_cores", 1, &c->num_tensor_cores)) != TL_OK)
        return st;
    if ((x = json_object_get(root, "batch_size_per_tensor_core")) != NULL &&
        (st = emb_json_int32(x, ROOT ".batch_size_per_tensor_core", 1, &c->batch_size_per_tensor_core)) != TL_OK)
        return st;
    if ((x = json_object_get(root, "num_shards")) != NULL &&
        (st = emb_json_int32(x, ROOT ".num_shards", 1, &c->num_shards)) != TL_OK)
        return st;
    if ((x = json_object_get(root, "sharding_strategy")) != NULL) {
        if ((st = emb_json_enum(x, ROOT ".sharding_strategy", shardings, 2, &i)) != TL_OK)
            return st;
        c->sharding_strategy = (tl_emb_sharding)i;
    }
    if ((x = json_object_get(root, "pipeline_execution_with_tensor_core")) != NULL &&
        (st = emb_json_bool(x, ROOT ".pipeline_execution_with_tensor_core", &c->pipeline_execution_with_tensor_core)) !=
            TL_OK)
        return st;
    if ((x = json_object_get(root, "bounds_check_mode")) != NULL) {
        if ((st = emb_json_enum(x, ROOT ".bounds_check_mode", bounds, 3, &i)) != TL_OK)
            return st;
        c->bounds_check_mode = (tl_emb_bounds_check)i;
    }
    if ((x = json_object_get(root, "seed")) != NULL) {
        int64_t seed;
        if ((st = emb_json_int(x, ROOT ".seed", 0, INT64_MAX, &seed)) != TL_OK)
            return st;
        c->seed = (uint64_t)seed;
    }
    return TL_OK;
}

static tl_status parse_section(const json_t *root, tl_emb_spec **out)
{
    static const char *const keys[] = {"tables",
                                       "features",
                                       "optimizer",
                                       "mode",
                                       "num_tensor_cores",
                                       "batch_size_per_tensor_core",
                                       "num_shards",
                                       "sharding_strategy",
                                       "pipeline_execution_with_tensor_core",
                                       "bounds_check_mode",
                                       "seed",
                                       NULL};
    if (!json_is_object(root))
        return emb_json_wrong_type(root, ROOT, "an object");
    const json_t *tables, *features;
    tl_status st = emb_json_check_keys(root, ROOT, keys);
    if (st == TL_OK)
        st = get_list(root, "tables", "TableConfig objects {\"vocabulary_size\", \"dim\", ...}", &tables);
    if (st == TL_OK)
        st = get_list(root, "features", "FeatureConfig objects {\"table\", ...}", &features);
    if (st != TL_OK)
        return st;

    tl_emb_spec *s;
    if ((st = emb_spec_new((int)json_array_size(tables), (int)json_array_size(features), &s)) != TL_OK)
        return st;
    const json_t *g = json_object_get(root, "optimizer");
    if (g != NULL)
        st = emb_json_optimizer(g, ROOT ".optimizer", &s->cfg.optimizer);
    if (st == TL_OK)
        st = parse_top(s, root);
    for (int i = 0; st == TL_OK && i < s->cfg.num_tables; i++)
        st = parse_table(s, i, json_array_get(tables, (size_t)i), g != NULL);
    /* The output shapes' batch: every feature's the same, and the section's. */
    int64_t batch = 0;
    int batch_from = -1;
    for (int j = 0; st == TL_OK && j < s->cfg.num_features; j++) {
        int64_t b = 0;
        if ((st = parse_feature(s, j, json_array_get(features, (size_t)j), &b)) != TL_OK || b == 0)
            continue;
        if (batch_from < 0) {
            batch = b;
            batch_from = j;
        } else if (b != batch) {
            st = tl_error(TL_EINVAL, ROOT ".features[%d].output_shape[0] is %lld but features[%d]'s is %lld: the "
                                     "batch (per replica) must be the same", j, (long long)b, batch_from,
                          (long long)batch);
        }
    }
    if (st == TL_OK && batch_from >= 0) {
        if (json_object_get(root, "batch_size_per_tensor_core") == NULL)
            s->cfg.batch_size_per_tensor_core = (int)batch;
        else if (s->cfg.batch_size_per_tensor_core != batch)
            st = tl_error(TL_EINVAL, ROOT ".features[%d].output_shape[0] is %lld but batch_size_per_tensor_core is "
                                     "%d: they must be the same", batch_from, (long long)batch,
                          s->cfg.batch_size_per_tensor_core);
    }
    if (st == TL_OK)
        st = emb_spec_finish(s);
    /* A global optimizer no table uses is still checked: it was written. */
    if (st == TL_OK && g != NULL && (st = tl_emb_optimizer_validate(&s->cfg.optimizer)) != TL_OK)
        st = tl_error(st, ROOT ".optimizer: %s", tl_last_error());
    if (st != TL_OK) {
        tl_emb_spec_destroy(s);
        return st;
    }
    *out = s;
    return TL_OK;
}

tl_status tl_emb_spec_from_json(const char *text, size_t len, tl_emb_spec **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_emb_spec_from_json: out is NULL");
    *out = NULL;
    if (text == NULL)
        return tl_error(TL_EINVAL, "tl_emb_spec_from_json: text is NULL");
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return tl_error(TL_EPARSE, ROOT ": malformed JSON at line %d, column %d: %s", err.line, err.column, err.text);
    tl_status st = parse_section(root, out);
    json_decref(root);
    return st;
}

/* input.c — the "input" section past dataset, data_dir and epochs: the files
 * of the file datasets, the tf.Example feature spec, the CSV columns, the
 * Criteo vocabulary sizes and the pipeline's knobs (shuffle, interleave,
 * parse threads, prefetch).
 *
 * Each option is checked alone first, in the option table's order, with a
 * message that names the option (and inside a structure the key and the
 * field), the value and what is allowed; then the combinations the chosen
 * dataset needs, so that a run fails at `tpuloop config` time rather than
 * after minutes of reading. Everything rc.input points to is allocated here
 * and listed in one store, freed as a whole when the configuration changes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

#define RAW(id) (cfg->raw[TL_OPT_ID_##id])
#define NAME(id) (tl_options[TL_OPT_ID_##id].name)

struct tl_input_store {
    void **allocs; /* (n) every allocation behind rc.input */
    size_t n, cap;
};

void tl_input_store_free(struct tl_input_store *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        tl_free(s->allocs[i]);
    tl_free(s->allocs);
    tl_free(s);
}

/* Zeroed memory owned by the store (NULL when out of memory). */
static void *keep(struct tl_input_store *s, size_t count, size_t size)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        void **a = tl_realloc(s->allocs, cap * sizeof *a);
        if (a == NULL)
            return NULL;
        s->allocs = a;
        s->cap = cap;
    }
    void *p = tl_calloc(count ? count : 1, size);
    if (p != NULL)
        s->allocs[s->n++] = p;
    return p;
}

static char *keep_str(struct tl_input_store *s, const char *text)
{
    size_t n = strlen(text) + 1;
    char *p = keep(s, n, 1);
    if (p != NULL)
        memcpy(p, text, n);
    return p;
}

/* Python's str() of v, for "got ..." (truncated when long). */
static const char *py(const json_t *v, char *buf, size_t n)
{
    tl_py_str(v, buf, n);
    return buf;
}

/* Python's repr() of a value inside a structure ('a' for a string, so an
 * empty one still shows), for "got ...". */
static const char *pyr(const json_t *v, char *buf, size_t n)
{
    if (json_is_string(v)) {
        snprintf(buf, n, "'%s'", json_string_value(v));
        return buf;
    }
    return py(v, buf, n);
}

/* "<name> must be <allowed>; got <value>" for option id. */
static tl_status bad(const tl_config *cfg, tl_opt_id id, tl_status st, const json_t *v)
{
    char buf[200];
    return tl_config_rerr(cfg, id, st, "%s must be %s; got %s", tl_options[id].name, tl_options[id].allowed,
                          py(v, buf, sizeof buf));
}

static tl_status get_bool(const tl_config *cfg, tl_opt_id id, bool *out)
{
    const json_t *v = cfg->raw[id];
    if (!json_is_boolean(v))
        return bad(cfg, id, TL_ETYPE, v);
    *out = json_is_true(v);
    return TL_OK;
}

/* An int in the table's [min, max]; None is allowed when the option is
 * nullable (then *out is not set). */
static tl_status get_int(const tl_config *cfg, tl_opt_id id, tl_opt_int *out)
{
    const tl_option *o = &tl_options[id];
    const json_t *v = cfg->raw[id];
    *out = (tl_opt_int){false, 0};
    if (o->nullable && json_is_null(v))
        return TL_OK;
    if (!json_is_integer(v))
        return bad(cfg, id, TL_ETYPE, v);
    int64_t x = json_integer_value(v);
    if (x < o->min || x > o->max)
        return bad(cfg, id, TL_EINVAL, v);
    *out = (tl_opt_int){true, x};
    return TL_OK;
}

static tl_status get_plain_int(const tl_config *cfg, tl_opt_id id, int64_t *out)
{
    tl_opt_int v;
    tl_status st = get_int(cfg, id, &v);
    *out = v.value;
    return st;
}

/* A string that must not be empty; None only when nullable (then NULL). */
static tl_status get_name(const tl_config *cfg, tl_opt_id id, const char **out)
{
    const json_t *v = cfg->raw[id];
    *out = NULL;
    if (tl_options[id].nullable && json_is_null(v))
        return TL_OK;
    if (!json_is_string(v))
        return bad(cfg, id, TL_ETYPE, v);
    if (json_string_length(v) == 0 || strlen(json_string_value(v)) != json_string_length(v))
        return bad(cfg, id, TL_EINVAL, v);
    *out = json_string_value(v);
    return TL_OK;
}

/* A list of non-empty strings (a lone string is a list of one), unique
 * when unique is set; NULL and 0 for None. */
static tl_status get_strings(const tl_config *cfg, tl_opt_id id, struct tl_input_store *s, bool unique,
                             const char *const **out, int *n)
{
    const char *name = tl_options[id].name;
    const json_t *v = cfg->raw[id];
    *out = NULL;
    *n = 0;
    if (json_is_null(v))
        return TL_OK;
    if (!json_is_array(v) && !json_is_string(v))
        return bad(cfg, id, TL_ETYPE, v);
    size_t count = json_is_array(v) ? json_array_size(v) : 1;
    if (count == 0 || count > (1u << 20))
        return bad(cfg, id, TL_EINVAL, v);
    const char **list = keep(s, count, sizeof *list);
    if (list == NULL)
        return tl_error_oom();
    char buf[200];
    for (size_t i = 0; i < count; i++) {
        const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(e) || json_string_length(e) == 0 || strlen(json_string_value(e)) != json_string_length(e))
            return tl_config_rerr(cfg, id, json_is_string(e) ? TL_EINVAL : TL_ETYPE,
                                  "%s[%zu] must be a non-empty string; got %s (allowed: %s)", name, i,
                                  pyr(e, buf, sizeof buf), tl_options[id].allowed);
        for (size_t k = 0; unique && k < i; k++)
            if (strcmp(list[k], json_string_value(e)) == 0)
                return tl_config_rerr(cfg, id, TL_EINVAL, "%s[%zu] '%s' repeats %s[%zu]", name, i, list[k], name, k);
        if ((list[i] = keep_str(s, json_string_value(e))) == NULL)
            return tl_error_oom();
    }
    *out = list;
    *n = (int)count;
    return TL_OK;
}

/* ---- features: the tf.Example spec -------------------------------------- */

static const struct {
    const char *name;
    tl_feature_kind kind;
} dtypes[] = {{"float32", TL_FEATURE_FLOAT}, {"int64", TL_FEATURE_INT64}, {"string", TL_FEATURE_BYTES}};

static const char *dtype_name(tl_feature_kind k)
{
    for (size_t i = 0; i < TL_ARRAY_LEN(dtypes); i++)
        if (dtypes[i].kind == k)
            return dtypes[i].name;
    return "?";
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The values of default_value (a scalar or a flat list) into spec. */
static tl_status spec_default(const tl_config *cfg, struct tl_input_store *s, const char *key, const json_t *dv,
                              int64_t size, tl_feature_spec *spec)
{
    const tl_opt_id id = TL_OPT_ID_features;
    char buf[200];
    size_t count = json_is_array(dv) ? json_array_size(dv) : 1;
    if ((int64_t)count != 1 && (int64_t)count != size)
        return tl_config_rerr(cfg, id, TL_EINVAL,
                              "features[\"%s\"].default_value has %zu values; a FixedLenFeature of %lld values "
                              "takes 1 (for every value) or %lld",
                              key, count, (long long)size, (long long)size);
    void *values = keep(s, count, spec->dtype == TL_FEATURE_FLOAT   ? sizeof(float)
                                  : spec->dtype == TL_FEATURE_INT64 ? sizeof(int64_t)
                                                                    : sizeof(tl_bytes));
    if (values == NULL)
        return tl_error_oom();
    for (size_t i = 0; i < count; i++) {
        const json_t *e = json_is_array(dv) ? json_array_get(dv, i) : dv;
        bool ok = spec->dtype == TL_FEATURE_FLOAT   ? json_is_number(e)
                  : spec->dtype == TL_FEATURE_INT64 ? json_is_integer(e)
                                                    : json_is_string(e);
        if (!ok)
            return tl_config_rerr(cfg, id, TL_ETYPE,
                                  "features[\"%s\"].default_value%s must be %s for dtype %s; got %s", key,
                                  json_is_array(dv) ? "[i]" : "",
                                  spec->dtype == TL_FEATURE_FLOAT   ? "a number"
                                  : spec->dtype == TL_FEATURE_INT64 ? "an int"
                                                                    : "a string",
                                  dtype_name(spec->dtype), pyr(e, buf, sizeof buf));
        if (spec->dtype == TL_FEATURE_FLOAT) {
            double x = json_number_value(e);
            if (fabs(x) > 3.4028234663852886e38)
                return tl_config_rerr(cfg, id, TL_EINVAL,
                                      "features[\"%s\"].default_value: %s is outside float32's range", key,
                                      pyr(e, buf, sizeof buf));
            ((float *)values)[i] = (float)x;
        } else if (spec->dtype == TL_FEATURE_INT64) {
            ((int64_t *)values)[i] = json_integer_value(e);
        } else {
            uint8_t *b = keep(s, json_string_length(e) + 1, 1);
            if (b == NULL)
                return tl_error_oom();
            memcpy(b, json_string_value(e), json_string_length(e));
            ((tl_bytes *)values)[i] = (tl_bytes){b, json_string_length(e)};
        }
    }
    spec->default_value = values;
    spec->default_count = count;
    return TL_OK;
}

/* One entry of features: {type, dtype, shape, default_value}. */
static tl_status parse_spec(const tl_config *cfg, struct tl_input_store *s, const char *key, const json_t *o,
                            tl_feature_spec *spec)
{
    const tl_opt_id id = TL_OPT_ID_features;
    char buf[200];
    if (key[0] == '\0')
        return tl_config_rerr(cfg, id, TL_EINVAL, "features: a key must be a non-empty string (got '')");
    if (!json_is_object(o))
        return tl_config_rerr(cfg, id, TL_ETYPE,
                              "features[\"%s\"] must be an object {\"type\", \"dtype\", \"shape\", "
                              "\"default_value\"}; got %s",
                              key, tl_py_type(o));
    const char *field;
    const json_t *v;
    json_object_foreach((json_t *)o, field, v) {
        if (strcmp(field, "type") != 0 && strcmp(field, "dtype") != 0 && strcmp(field, "shape") != 0 &&
            strcmp(field, "default_value") != 0)
            return tl_config_rerr(cfg, id, TL_EINVAL,
                                  "features[\"%s\"]: unknown field '%s' (allowed: type, dtype, shape, default_value)",
                                  key, field);
    }
    if ((spec->key = keep_str(s, key)) == NULL)
        return tl_error_oom();

    const json_t *type = json_object_get(o, "type");
    if (type == NULL)
        return tl_config_rerr(cfg, id, TL_EINVAL,
                              "features[\"%s\"].type is required: FixedLenFeature or VarLenFeature", key);
    if (json_is_string(type) && strcmp(json_string_value(type), "FixedLenFeature") == 0)
        spec->type = TL_SPEC_FIXED_LEN;
    else if (json_is_string(type) && strcmp(json_string_value(type), "VarLenFeature") == 0)
        spec->type = TL_SPEC_VAR_LEN;
    else
        return tl_config_rerr(cfg, id, json_is_string(type) ? TL_EINVAL : TL_ETYPE,
                              "features[\"%s\"].type must be FixedLenFeature or VarLenFeature; got %s", key,
                              pyr(type, buf, sizeof buf));

    const json_t *dtype = json_object_get(o, "dtype");
    if (dtype == NULL)
        return tl_config_rerr(cfg, id, TL_EINVAL, "features[\"%s\"].dtype is required: float32, int64 or string",
                              key);
    spec->dtype = TL_FEATURE_NONE;
    for (size_t i = 0; json_is_string(dtype) && i < TL_ARRAY_LEN(dtypes); i++)
        if (strcmp(json_string_value(dtype), dtypes[i].name) == 0)
            spec->dtype = dtypes[i].kind;
    if (spec->dtype == TL_FEATURE_NONE)
        return tl_config_rerr(cfg, id, json_is_string(dtype) ? TL_EINVAL : TL_ETYPE,
                              "features[\"%s\"].dtype must be float32, int64 or string; got %s", key,
                              pyr(dtype, buf, sizeof buf));

    const json_t *shape = json_object_get(o, "shape");
    const json_t *dv = json_object_get(o, "default_value");
    if (spec->type == TL_SPEC_VAR_LEN) {
        if (shape != NULL && !json_is_null(shape))
            return tl_config_rerr(cfg, id, TL_EINVAL,
                                  "features[\"%s\"].shape: a VarLenFeature has no shape (got %s)", key,
                                  py(shape, buf, sizeof buf));
        if (dv != NULL && !json_is_null(dv))
            return tl_config_rerr(cfg, id, TL_EINVAL,
                                  "features[\"%s\"].default_value: a VarLenFeature has no default (got %s)", key,
                                  py(dv, buf, sizeof buf));
        return TL_OK;
    }
    int64_t size = 1;
    if (shape != NULL && !json_is_null(shape)) {
        if (!json_is_array(shape) || json_array_size(shape) > TL_FEATURE_MAX_RANK)
            return tl_config_rerr(cfg, id, json_is_array(shape) ? TL_EINVAL : TL_ETYPE,
                                  "features[\"%s\"].shape must be a list of at most %d ints >= 0; got %s", key,
                                  TL_FEATURE_MAX_RANK, py(shape, buf, sizeof buf));
        spec->rank = (int)json_array_size(shape);
        for (int d = 0; d < spec->rank; d++) {
            const json_t *e = json_array_get(shape, (size_t)d);
            if (!json_is_integer(e) || json_integer_value(e) < 0)
                return tl_config_rerr(cfg, id, json_is_integer(e) ? TL_EINVAL : TL_ETYPE,
                                      "features[\"%s\"].shape[%d] must be an int >= 0; got %s", key, d,
                                      pyr(e, buf, sizeof buf));
            spec->shape[d] = json_integer_value(e);
            if (spec->shape[d] != 0 && size > (INT64_C(1) << 31) / spec->shape[d])
                return tl_config_rerr(cfg, id, TL_EINVAL,
                                      "features[\"%s\"].shape %s holds more than 2^31 values", key,
                                      py(shape, buf, sizeof buf));
            size *= spec->shape[d];
        }
    }
    if (dv == NULL || json_is_null(dv))
        return TL_OK;
    return spec_default(cfg, s, key, dv, size, spec);
}

static tl_status parse_features(const tl_config *cfg, struct tl_input_store *s, tl_input_config *in)
{
    const json_t *v = RAW(features);
    if (json_is_null(v))
        return TL_OK;
    if (!json_is_object(v) || json_object_size(v) == 0)
        return bad(cfg, TL_OPT_ID_features, json_is_object(v) ? TL_EINVAL : TL_ETYPE, v);
    size_t n = json_object_size(v);
    const char **keys = keep(s, n, sizeof *keys);
    tl_feature_spec *specs = keep(s, n, sizeof *specs);
    if (keys == NULL || specs == NULL)
        return tl_error_oom();
    size_t i = 0;
    const char *key;
    const json_t *o;
    json_object_foreach((json_t *)v, key, o)
        keys[i++] = key;
    /* Sorted, as TensorFlow's parse ops return their dict: the order of the
     * keys in a file does not change the tensors or their order. */
    qsort(keys, n, sizeof *keys, cmp_keys);
    for (i = 0; i < n; i++) {
        tl_status st = parse_spec(cfg, s, keys[i], json_object_get(v, keys[i]), &specs[i]);
        if (st != TL_OK)
            return st;
    }
    in->features = specs;
    in->num_features = (int)n;
    return TL_OK;
}

/* ---- csv_columns and vocab_sizes ----------------------------------------- */

static tl_status parse_csv_columns(const tl_config *cfg, struct tl_input_store *s, tl_input_config *in)
{
    static const char *const types[] = {"float32", "int64", "string"};
    const tl_opt_id id = TL_OPT_ID_csv_columns;
    const json_t *v = RAW(csv_columns);
    char buf[200];
    if (json_is_null(v))
        return TL_OK;
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > TL_CSV_MAX_COLUMNS)
        return bad(cfg, id, json_is_array(v) ? TL_EINVAL : TL_ETYPE, v);
    size_t n = json_array_size(v);
    tl_csv_column *cols = keep(s, n, sizeof *cols);
    if (cols == NULL)
        return tl_error_oom();
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(v, i);
        if (!json_is_object(c))
            return tl_config_rerr(cfg, id, TL_ETYPE, "csv_columns[%zu] must be an object {\"name\", \"type\"}; got %s",
                                  i, py(c, buf, sizeof buf));
        const char *field;
        const json_t *x;
        json_object_foreach((json_t *)c, field, x) {
            if (strcmp(field, "name") != 0 && strcmp(field, "type") != 0)
                return tl_config_rerr(cfg, id, TL_EINVAL,
                                      "csv_columns[%zu]: unknown field '%s' (allowed: name, type)", i, field);
        }
        const json_t *name = json_object_get(c, "name"), *type = json_object_get(c, "type");
        if (!json_is_string(name) || json_string_length(name) == 0 ||
            strlen(json_string_value(name)) != json_string_length(name))
            return tl_config_rerr(cfg, id, name == NULL || json_is_string(name) ? TL_EINVAL : TL_ETYPE,
                                  "csv_columns[%zu].name must be a non-empty string; got %s", i,
                                  name ? pyr(name, buf, sizeof buf) : "nothing");
        for (size_t k = 0; k < i; k++)
            if (strcmp(cols[k].name, json_string_value(name)) == 0)
                return tl_config_rerr(cfg, id, TL_EINVAL, "csv_columns[%zu].name '%s' repeats csv_columns[%zu]", i,
                                      cols[k].name, k);
        int t = -1;
        for (int k = 0; json_is_string(type) && k < 3; k++)
            if (strcmp(json_string_value(type), types[k]) == 0)
                t = k;
        if (t < 0)
            return tl_config_rerr(cfg, id, type == NULL || json_is_string(type) ? TL_EINVAL : TL_ETYPE,
                                  "csv_columns[%zu].type (column '%s') must be float32, int64 or string; got %s", i,
                                  json_string_value(name), type ? pyr(type, buf, sizeof buf) : "nothing");
        if ((cols[i].name = keep_str(s, json_string_value(name))) == NULL)
            return tl_error_oom();
        cols[i].type = t == 0 ? TL_CSV_FLOAT32 : t == 1 ? TL_CSV_INT64 : TL_CSV_STRING;
    }
    in->csv_columns = cols;
    in->num_csv_columns = (int)n;
    return TL_OK;
}

/* A list of TL_CRITEO_NUM_CAT ints in the table's [min, max] of option id,
 * one per categorical column C1..C26, into *out (NULL for None). */
static tl_status categorical_list(const tl_config *cfg, tl_opt_id id, struct tl_input_store *s,
                                  const int64_t **out)
{
    const tl_option *o = &tl_options[id];
    const json_t *v = cfg->raw[id];
    char buf[200], rule[64];
    *out = NULL;
    if (json_is_null(v))
        return TL_OK;
    if (!json_is_array(v))
        return bad(cfg, id, TL_ETYPE, v);
    if (json_array_size(v) != TL_CRITEO_NUM_CAT)
        return tl_config_rerr(cfg, id, TL_EINVAL, "%s must be %s; got a list of %zu", o->name, o->allowed,
                              json_array_size(v));
    if (o->max == INT64_MAX)
        snprintf(rule, sizeof rule, "an int >= %lld", (long long)o->min);
    else
        snprintf(rule, sizeof rule, "an int in [%lld, %lld]", (long long)o->min, (long long)o->max);
    int64_t *sizes = keep(s, TL_CRITEO_NUM_CAT, sizeof *sizes);
    if (sizes == NULL)
        return tl_error_oom();
    for (size_t i = 0; i < TL_CRITEO_NUM_CAT; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_integer(e) || json_integer_value(e) < o->min || json_integer_value(e) > o->max)
            return tl_config_rerr(cfg, id, json_is_integer(e) ? TL_EINVAL : TL_ETYPE,
                                  "%s[%zu] (C%zu) must be %s; got %s", o->name, i, i + 1, rule,
                                  pyr(e, buf, sizeof buf));
        sizes[i] = json_integer_value(e);
    }
    *out = sizes;
    return TL_OK;
}

static tl_status parse_vocab_sizes(const tl_config *cfg, struct tl_input_store *s, tl_input_config *in)
{
    return categorical_list(cfg, TL_OPT_ID_vocab_sizes, s, &in->vocab_sizes);
}

/* ---- the synthetic datasets ---------------------------------------------------- */

/* The datasets that read each synthetic option, and the defaults that
 * depend on the dataset (options.def holds null for those and says so in
 * their help). */
static const struct {
    tl_opt_id id;
    const char *readers; /* the datasets that read it, for messages */
    bool synthetic, criteo, sequences;
    int64_t synthetic_default, criteo_default, sequences_default; /* 0: the table's */
} synth_opts[] = {
    {TL_OPT_ID_synthetic_examples, "datasets synthetic, criteo_synthetic and synthetic_sequences", true, true, true,
     60000, 1048576, 60000},
    {TL_OPT_ID_synthetic_eval_examples, "datasets synthetic, criteo_synthetic and synthetic_sequences", true, true,
     true, 10000, 131072, 10000},
    {TL_OPT_ID_synthetic_vocab_cap, "dataset criteo_synthetic", false, true, false, 0, 0, 0},
    {TL_OPT_ID_synthetic_vocab_sizes, "dataset criteo_synthetic", false, true, false, 0, 0, 0},
    {TL_OPT_ID_synthetic_num_features, "dataset synthetic", true, false, false, 0, 0, 0},
    {TL_OPT_ID_synthetic_sequence_length, "dataset synthetic_sequences", false, false, true, 0, 0, 0},
    {TL_OPT_ID_synthetic_vocab, "dataset synthetic_sequences", false, false, true, 0, 0, 0},
};

static struct tl_input_store *input_store(tl_config *cfg)
{
    if (cfg->input == NULL)
        cfg->input = tl_calloc(1, sizeof *cfg->input);
    return cfg->input;
}

static tl_opt_int *synth_field(tl_input_config *in, tl_opt_id id)
{
    switch (id) {
    case TL_OPT_ID_synthetic_examples: return &in->synthetic_examples;
    case TL_OPT_ID_synthetic_eval_examples: return &in->synthetic_eval_examples;
    case TL_OPT_ID_synthetic_vocab_cap: return &in->synthetic_vocab_cap;
    case TL_OPT_ID_synthetic_num_features: return &in->synthetic_num_features;
    case TL_OPT_ID_synthetic_sequence_length: return &in->synthetic_sequence_length;
    case TL_OPT_ID_synthetic_vocab: return &in->synthetic_vocab;
    default: return NULL;
    }
}

tl_status tl_config_resolve_synthetic(tl_config *cfg)
{
    tl_input_config *in = &cfg->rc.input;
    struct tl_input_store *s = input_store(cfg);
    if (s == NULL)
        return tl_error_oom();
    bool synthetic = strcmp(in->dataset, "synthetic") == 0, criteo = strcmp(in->dataset, "criteo_synthetic") == 0;
    bool sequences = strcmp(in->dataset, "synthetic_sequences") == 0;
    for (size_t i = 0; i < TL_ARRAY_LEN(synth_opts); i++) {
        tl_opt_id id = synth_opts[i].id;
        const json_t *v = cfg->raw[id];
        if (!(synthetic && synth_opts[i].synthetic) && !(criteo && synth_opts[i].criteo) &&
            !(sequences && synth_opts[i].sequences)) {
            /* The table's default is no choice of the user's: only a value
             * given for a dataset that does not read it is a mistake. */
            if (cfg->source[id] != TL_SOURCE_DEFAULT && !json_is_null(v))
                return tl_config_rerr(cfg, id, TL_EINVAL, "%s is only read by %s; dataset is %s (set it to null)",
                                      tl_options[id].name, synth_opts[i].readers, in->dataset);
            continue;
        }
        tl_status st;
        if (id == TL_OPT_ID_synthetic_vocab_sizes) {
            if ((st = categorical_list(cfg, id, s, &in->synthetic_vocab_sizes)) != TL_OK)
                return st;
            continue;
        }
        tl_opt_int *f = synth_field(in, id);
        if ((st = get_int(cfg, id, f)) != TL_OK)
            return st;
        if (f->set)
            continue;
        int64_t d = synthetic ? synth_opts[i].synthetic_default
                    : criteo  ? synth_opts[i].criteo_default
                              : synth_opts[i].sequences_default;
        if (d == 0 && tl_parse_int64(tl_options[id].default_json, &d) != 0)
            TL_ASSERT(!"a synthetic option's table default is an int");
        *f = (tl_opt_int){true, d};
    }
    /* Explicit vocabularies replace the cap, which then does not apply. */
    if (in->synthetic_vocab_sizes != NULL)
        in->synthetic_vocab_cap = (tl_opt_int){false, 0};
    return TL_OK;
}

/* ---- what the dataset needs ------------------------------------------------ */

static bool is_file_dataset(const char *ds)
{
    return strcmp(ds, "tfrecord") == 0 || strcmp(ds, "criteo") == 0 || strcmp(ds, "csv") == 0 ||
           strcmp(ds, "idx") == 0;
}

/* Option id, set (not None), belongs to the datasets named in `for`. */
static tl_status not_for(const tl_config *cfg, tl_opt_id id, const char *dataset, const char *for_what)
{
    if (json_is_null(cfg->raw[id]))
        return TL_OK;
    return tl_config_rerr(cfg, id, TL_EINVAL, "%s is only read by %s; dataset is %s (set it to null)",
                          tl_options[id].name, for_what, dataset);
}

/* The tensor names a dataset's elements have, for feature_keys. */
static tl_status check_feature_keys(const tl_config *cfg, const tl_input_config *in, const char *label)
{
    const tl_opt_id id = TL_OPT_ID_feature_keys;
    for (int i = 0; i < in->num_feature_keys; i++) {
        const char *k = in->feature_keys[i];
        if (strcmp(k, label) == 0)
            return tl_config_rerr(cfg, id, TL_EINVAL, "feature_keys[%d] '%s' is the label (label_key): it cannot be "
                                  "a feature too", i, k);
        const char *why = NULL;
        bool found = false;
        if (strcmp(in->dataset, "tfrecord") == 0) {
            for (int f = 0; f < in->num_features && !found; f++) {
                if (strcmp(in->features[f].key, k) != 0)
                    continue;
                found = true;
                if (in->features[f].type == TL_SPEC_VAR_LEN)
                    why = "is a VarLenFeature: a ragged tensor cannot be a model feature";
                else if (in->features[f].dtype == TL_FEATURE_BYTES)
                    why = "has dtype string: model features must be float32 or int64";
            }
            if (!found)
                why = "is not a key of features";
        } else if (strcmp(in->dataset, "csv") == 0) {
            for (int c = 0; c < in->num_csv_columns && !found; c++) {
                if (strcmp(in->csv_columns[c].name, k) != 0)
                    continue;
                found = true;
                if (in->csv_columns[c].type == TL_CSV_STRING)
                    why = "is a string column: model features must be float32 or int64";
            }
            if (!found)
                why = "is not a column of csv_columns";
        } else if (strcmp(in->dataset, "criteo") == 0) {
            bool known = strcmp(k, "dense") == 0;
            for (int c = 1; c <= 26 && !known; c++) {
                char name[24];
                snprintf(name, sizeof name, "C%d", c);
                known = strcmp(k, name) == 0;
            }
            if (!known)
                why = "is not a criteo tensor (dense: float32 (13), C1 .. C26: int64)";
        } else if (strcmp(k, "features") != 0) {
            why = "is not an idx tensor (features)";
        }
        if (why != NULL)
            return tl_config_rerr(cfg, id, TL_EINVAL, "feature_keys[%d] '%s' %s", i, k, why);
    }
    return TL_OK;
}

static tl_status check_dataset(const tl_config *cfg, tl_input_config *in)
{
    const char *ds = in->dataset;
    tl_status st;
    if (!is_file_dataset(ds)) {
        static const tl_opt_id file_only[] = {TL_OPT_ID_files, TL_OPT_ID_eval_files, TL_OPT_ID_features,
                                              TL_OPT_ID_feature_keys, TL_OPT_ID_shuffle_buffer_size,
                                              TL_OPT_ID_vocab_sizes, TL_OPT_ID_csv_columns, TL_OPT_ID_label_column};
        for (size_t i = 0; i < TL_ARRAY_LEN(file_only); i++)
            if ((st = not_for(cfg, file_only[i], ds, "the file datasets (tfrecord, criteo, csv, idx)")) != TL_OK)
                return st;
        return TL_OK;
    }
    if (in->files == NULL)
        return tl_config_rerr(cfg, TL_OPT_ID_dataset, TL_EINVAL,
                              "dataset %s reads files: set files (a list of paths or glob patterns%s)", ds,
                              strcmp(ds, "idx") == 0 ? ": [images, labels]" : "");
    bool tfrecord = strcmp(ds, "tfrecord") == 0, criteo = strcmp(ds, "criteo") == 0, csv = strcmp(ds, "csv") == 0;
    if ((!tfrecord && (st = not_for(cfg, TL_OPT_ID_features, ds, "dataset tfrecord")) != TL_OK) ||
        (!criteo && (st = not_for(cfg, TL_OPT_ID_vocab_sizes, ds, "dataset criteo")) != TL_OK) ||
        (!csv && (st = not_for(cfg, TL_OPT_ID_csv_columns, ds, "dataset csv")) != TL_OK) ||
        (!csv && (st = not_for(cfg, TL_OPT_ID_label_column, ds, "dataset csv")) != TL_OK))
        return st;
    const char *label = in->label_key;
    if (tfrecord) {
        if (in->features == NULL)
            return tl_config_rerr(cfg, TL_OPT_ID_dataset, TL_EINVAL,
                                  "dataset tfrecord needs features: the tf.Example spec of its records, e.g. "
                                  "{\"x\": {\"type\": \"FixedLenFeature\", \"dtype\": \"float32\", \"shape\": [4]}, "
                                  "\"label\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\"}}");
        const tl_feature_spec *l = NULL;
        for (int f = 0; f < in->num_features; f++)
            if (strcmp(in->features[f].key, label) == 0)
                l = &in->features[f];
        int64_t n = 1;
        for (int d = 0; l != NULL && d < l->rank; d++)
            n *= l->shape[d];
        if (l == NULL || l->type != TL_SPEC_FIXED_LEN || l->dtype != TL_FEATURE_INT64 || n != 1)
            return tl_config_rerr(cfg, TL_OPT_ID_label_key, TL_EINVAL,
                                  "label_key '%s' must name a FixedLenFeature of dtype int64 and one value in "
                                  "features%s",
                                  label, l == NULL ? " (it has no such key)" : "");
    } else if (csv) {
        if (in->csv_columns == NULL)
            return tl_config_rerr(cfg, TL_OPT_ID_dataset, TL_EINVAL,
                                  "dataset csv needs csv_columns: the header's columns in order, e.g. "
                                  "[{\"name\": \"x\", \"type\": \"float32\"}, {\"name\": \"label\", \"type\": \"int64\"}]");
        if (in->label_column != NULL)
            label = in->label_column;
        const tl_csv_column *l = NULL;
        for (int c = 0; c < in->num_csv_columns; c++)
            if (strcmp(in->csv_columns[c].name, label) == 0)
                l = &in->csv_columns[c];
        if (l == NULL || l->type != TL_CSV_INT64)
            return tl_config_rerr(cfg, in->label_column ? TL_OPT_ID_label_column : TL_OPT_ID_label_key, TL_EINVAL,
                                  "%s '%s' must name an int64 column of csv_columns%s",
                                  in->label_column ? "label_column" : "label_key", label,
                                  l == NULL ? " (it has no such column)" : "");
    } else if (strcmp(label, "label") != 0) {
        return tl_config_rerr(cfg, TL_OPT_ID_label_key, TL_EINVAL,
                              "label_key must be 'label' for dataset %s (its tensors are %s); got '%s'", ds,
                              criteo ? "label, dense and cat" : "features and label", label);
    }
    if (strcmp(ds, "idx") == 0) {
        if (in->num_files != 2)
            return tl_config_rerr(cfg, TL_OPT_ID_files, TL_EINVAL,
                                  "files must be [images, labels] (two IDX files) for dataset idx; got %d", in->num_files);
        if (in->eval_files != NULL && in->num_eval_files != 2)
            return tl_config_rerr(cfg, TL_OPT_ID_eval_files, TL_EINVAL,
                                  "eval_files must be null or [images, labels] (two IDX files) for dataset idx; got %d",
                                  in->num_eval_files);
    }
    return check_feature_keys(cfg, in, label);
}

tl_status tl_config_resolve_input(tl_config *cfg)
{
    tl_input_config *in = &cfg->rc.input;
    struct tl_input_store *s = input_store(cfg);
    if (s == NULL)
        return tl_error_oom();
    tl_status st;
    tl_opt_int shuffle;
    if ((st = get_strings(cfg, TL_OPT_ID_files, s, false, &in->files, &in->num_files)) != TL_OK ||
        (st = get_strings(cfg, TL_OPT_ID_eval_files, s, false, &in->eval_files, &in->num_eval_files)) != TL_OK)
        return st;
    const json_t *comp = RAW(compression);
    static const char *const comps[] = {"AUTO", "", "NONE", "GZIP", "ZLIB"};
    in->compression = NULL;
    for (size_t i = 0; json_is_string(comp) && i < TL_ARRAY_LEN(comps); i++)
        if (strcmp(json_string_value(comp), comps[i]) == 0)
            in->compression = comps[i];
    if (in->compression == NULL)
        return bad(cfg, TL_OPT_ID_compression, json_is_string(comp) ? TL_EINVAL : TL_ETYPE, comp);
    if ((st = parse_features(cfg, s, in)) != TL_OK ||
        (st = get_strings(cfg, TL_OPT_ID_feature_keys, s, true, &in->feature_keys, &in->num_feature_keys)) != TL_OK ||
        (st = get_name(cfg, TL_OPT_ID_label_key, &in->label_key)) != TL_OK ||
        (st = get_int(cfg, TL_OPT_ID_shuffle_buffer_size, &shuffle)) != TL_OK ||
        (st = get_bool(cfg, TL_OPT_ID_reshuffle_each_iteration, &in->reshuffle_each_iteration)) != TL_OK ||
        (st = get_plain_int(cfg, TL_OPT_ID_cycle_length, &in->cycle_length)) != TL_OK ||
        (st = get_plain_int(cfg, TL_OPT_ID_block_length, &in->block_length)) != TL_OK ||
        (st = get_plain_int(cfg, TL_OPT_ID_num_parallel_calls, &in->num_parallel_calls)) != TL_OK ||
        (st = get_plain_int(cfg, TL_OPT_ID_prefetch, &in->prefetch)) != TL_OK ||
        (st = get_bool(cfg, TL_OPT_ID_skip_corrupt_records, &in->skip_corrupt_records)) != TL_OK ||
        (st = parse_vocab_sizes(cfg, s, in)) != TL_OK || (st = parse_csv_columns(cfg, s, in)) != TL_OK ||
        (st = get_name(cfg, TL_OPT_ID_label_column, &in->label_column)) != TL_OK)
        return st;
    in->shuffle_buffer_size = shuffle;
    const json_t *scale = RAW(scale);
    if (!json_is_number(scale) || !(json_number_value(scale) > 0) || !isfinite(json_number_value(scale)) ||
        json_number_value(scale) > 3.4028234663852886e38)
        return bad(cfg, TL_OPT_ID_scale, json_is_number(scale) ? TL_EINVAL : TL_ETYPE, scale);
    in->scale = json_number_value(scale);
    return check_dataset(cfg, in);
}

/* ---- emitting ------------------------------------------------------------ */

/* Appends v (taken) to a; on failure frees a and returns NULL. */
static json_t *append(json_t *a, json_t *v)
{
    if (json_array_append_new(a, v) != 0) {
        json_decref(a);
        return NULL;
    }
    return a;
}

static json_t *strings_json(const char *const *list, int n)
{
    if (list == NULL)
        return json_null();
    json_t *a = json_array();
    for (int i = 0; a != NULL && i < n; i++)
        a = append(a, json_string(list[i]));
    return a;
}

/* One value of a default as JSON. */
static json_t *default_json(const tl_feature_spec *f, size_t i)
{
    if (f->dtype == TL_FEATURE_FLOAT)
        return json_real(((const float *)f->default_value)[i]);
    if (f->dtype == TL_FEATURE_INT64)
        return json_integer(((const int64_t *)f->default_value)[i]);
    const tl_bytes *b = &((const tl_bytes *)f->default_value)[i];
    return json_stringn((const char *)b->data, b->len);
}

static json_t *spec_json(const tl_feature_spec *f)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bool ok = json_object_set_new(o, "type", json_string(f->type == TL_SPEC_VAR_LEN ? "VarLenFeature"
                                                                                      : "FixedLenFeature")) == 0 &&
              json_object_set_new(o, "dtype", json_string(dtype_name(f->dtype))) == 0;
    if (ok && f->type == TL_SPEC_FIXED_LEN) {
        json_t *shape = json_array();
        for (int d = 0; shape != NULL && d < f->rank; d++)
            shape = append(shape, json_integer(f->shape[d]));
        ok = json_object_set_new(o, "shape", shape) == 0;
        json_t *dv;
        if (f->default_value == NULL) {
            dv = json_null();
        } else if (f->default_count == 1) {
            dv = default_json(f, 0);
        } else {
            dv = json_array();
            for (size_t i = 0; dv != NULL && i < f->default_count; i++)
                dv = append(dv, default_json(f, i));
        }
        ok = json_object_set_new(o, "default_value", dv) == 0 && ok;
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *tl_input_value_json(const tl_config *cfg, tl_opt_id id)
{
    const tl_input_config *in = &cfg->rc.input;
    switch (id) {
    case TL_OPT_ID_files: return strings_json(in->files, in->num_files);
    case TL_OPT_ID_eval_files: return strings_json(in->eval_files, in->num_eval_files);
    case TL_OPT_ID_compression: return json_string(in->compression);
    case TL_OPT_ID_features: {
        if (in->features == NULL)
            return json_null();
        json_t *o = json_object();
        for (int i = 0; o != NULL && i < in->num_features; i++) {
            json_t *f = spec_json(&in->features[i]);
            if (f == NULL || json_object_set_new(o, in->features[i].key, f) != 0) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    case TL_OPT_ID_feature_keys: return strings_json(in->feature_keys, in->num_feature_keys);
    case TL_OPT_ID_label_key: return json_string(in->label_key);
    case TL_OPT_ID_shuffle_buffer_size:
        return in->shuffle_buffer_size.set ? json_integer(in->shuffle_buffer_size.value) : json_null();
    case TL_OPT_ID_reshuffle_each_iteration: return json_boolean(in->reshuffle_each_iteration);
    case TL_OPT_ID_cycle_length: return json_integer(in->cycle_length);
    case TL_OPT_ID_block_length: return json_integer(in->block_length);
    case TL_OPT_ID_num_parallel_calls: return json_integer(in->num_parallel_calls);
    case TL_OPT_ID_prefetch: return json_integer(in->prefetch);
    case TL_OPT_ID_skip_corrupt_records: return json_boolean(in->skip_corrupt_records);
    case TL_OPT_ID_vocab_sizes:
    case TL_OPT_ID_synthetic_vocab_sizes: {
        const int64_t *sizes = id == TL_OPT_ID_vocab_sizes ? in->vocab_sizes : in->synthetic_vocab_sizes;
        if (sizes == NULL)
            return json_null();
        json_t *a = json_array();
        for (int i = 0; a != NULL && i < TL_CRITEO_NUM_CAT; i++)
            a = append(a, json_integer(sizes[i]));
        return a;
    }
    case TL_OPT_ID_csv_columns: {
        if (in->csv_columns == NULL)
            return json_null();
        json_t *a = json_array();
        for (int i = 0; a != NULL && i < in->num_csv_columns; i++) {
            const tl_csv_column *c = &in->csv_columns[i];
            const char *t = c->type == TL_CSV_FLOAT32 ? "float32" : c->type == TL_CSV_INT64 ? "int64" : "string";
            a = append(a, json_pack("{s:s, s:s}", "name", c->name, "type", t));
        }
        return a;
    }
    case TL_OPT_ID_label_column: return in->label_column ? json_string(in->label_column) : json_null();
    case TL_OPT_ID_synthetic_examples:
    case TL_OPT_ID_synthetic_eval_examples:
    case TL_OPT_ID_synthetic_vocab_cap:
    case TL_OPT_ID_synthetic_num_features:
    case TL_OPT_ID_synthetic_sequence_length:
    case TL_OPT_ID_synthetic_vocab: {
        tl_opt_int f = id == TL_OPT_ID_synthetic_examples          ? in->synthetic_examples
                       : id == TL_OPT_ID_synthetic_eval_examples   ? in->synthetic_eval_examples
                       : id == TL_OPT_ID_synthetic_vocab_cap       ? in->synthetic_vocab_cap
                       : id == TL_OPT_ID_synthetic_num_features    ? in->synthetic_num_features
                       : id == TL_OPT_ID_synthetic_sequence_length ? in->synthetic_sequence_length
                                                                   : in->synthetic_vocab;
        return f.set ? json_integer(f.value) : json_null();
    }
    case TL_OPT_ID_scale: return json_real(in->scale);
    default: return json_null();
    }
}

/* example_spec.c — feature specs (tpuloop/example.h): a parsed example's
 * features read as dense or ragged values, as tf.io.parse_single_example and
 * tf.io.parse_single_sequence_example do. Error wording follows TensorFlow's
 * parsing kernels (example_proto_fast_parsing.cc): "is required but could not
 * be found", "Data types don't match", "Number of float values != expected". */
#include <stdio.h>
#include <string.h>

#include "../base/base_int.h"
#include "example_int.h"

/* TensorFlow's DataTypeString of a spec's dtype. */
static const char *dtype_name(tl_feature_kind k)
{
    switch (k) {
    case TL_FEATURE_FLOAT:
        return "float";
    case TL_FEATURE_INT64:
        return "int64";
    case TL_FEATURE_BYTES:
        return "string";
    default:
        return "invalid";
    }
}

static const char *type_name(tl_feature_spec_type t)
{
    switch (t) {
    case TL_SPEC_FIXED_LEN:
        return "FIXED_LEN";
    case TL_SPEC_VAR_LEN:
        return "VAR_LEN";
    case TL_SPEC_FIXED_LEN_SEQUENCE:
        return "FIXED_LEN_SEQUENCE";
    case TL_SPEC_VAR_LEN_SEQUENCE:
        return "VAR_LEN_SEQUENCE";
    }
    return "?";
}

static size_t elem_size(tl_feature_kind k)
{
    return k == TL_FEATURE_FLOAT ? sizeof(float) : k == TL_FEATURE_INT64 ? sizeof(int64_t) : sizeof(tl_bytes);
}

/* Writes TensorFlow's way of printing a shape, "[2,3]", into buf. */
static const char *shape_str(char *buf, size_t cap, int rank, const int64_t *shape)
{
    size_t at = 0;
    at += (size_t)snprintf(buf + at, cap - at, "[");
    for (int i = 0; i < rank && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i > 0 ? "," : "", (long long)shape[i]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
    return buf;
}

/* Checks spec i and sets *elems to the number of values in one value of its
 * shape (1 for the variable-length types). */
static tl_status check_spec(size_t i, const tl_feature_spec *s, size_t *elems)
{
    *elems = 1;
    if (s->key == NULL)
        return tl_error(TL_EINVAL, "specs[%zu]: key is NULL", i);
    const char *key = s->key;
    if (s->type != TL_SPEC_FIXED_LEN && s->type != TL_SPEC_VAR_LEN && s->type != TL_SPEC_FIXED_LEN_SEQUENCE &&
        s->type != TL_SPEC_VAR_LEN_SEQUENCE)
        return tl_error(TL_EINVAL,
                        "specs[%zu] (key \"%s\"): type must be TL_SPEC_FIXED_LEN, _VAR_LEN, "
                        "_FIXED_LEN_SEQUENCE or _VAR_LEN_SEQUENCE (got %d)",
                        i, key, (int)s->type);
    if (s->dtype != TL_FEATURE_FLOAT && s->dtype != TL_FEATURE_INT64 && s->dtype != TL_FEATURE_BYTES)
        return tl_error(TL_EINVAL,
                        "specs[%zu] (key \"%s\"): dtype must be TL_FEATURE_FLOAT, TL_FEATURE_INT64 or "
                        "TL_FEATURE_BYTES (got %d)",
                        i, key, (int)s->dtype);
    bool fixed = s->type == TL_SPEC_FIXED_LEN || s->type == TL_SPEC_FIXED_LEN_SEQUENCE;
    if (s->default_value != NULL && s->type != TL_SPEC_FIXED_LEN)
        return tl_error(TL_EINVAL, "specs[%zu] (key \"%s\"): a default_value is only allowed on TL_SPEC_FIXED_LEN (got %s)",
                        i, key, type_name(s->type));
    if (s->allow_missing && s->type != TL_SPEC_FIXED_LEN_SEQUENCE)
        return tl_error(TL_EINVAL,
                        "specs[%zu] (key \"%s\"): allow_missing is only allowed on TL_SPEC_FIXED_LEN_SEQUENCE (got %s)",
                        i, key, type_name(s->type));
    if (!fixed)
        return TL_OK;
    if (s->rank < 0 || s->rank > TL_FEATURE_MAX_RANK)
        return tl_error(TL_EINVAL, "specs[%zu] (key \"%s\"): rank must be 0..%d (got %d)", i, key, TL_FEATURE_MAX_RANK,
                        s->rank);
    size_t n = 1;
    for (int d = 0; d < s->rank; d++) {
        if (s->shape[d] < 0)
            return tl_error(TL_EINVAL, "specs[%zu] (key \"%s\"): shape[%d] must be >= 0 (got %lld)", i, key, d,
                            (long long)s->shape[d]);
        if (s->shape[d] > 0 && n > (SIZE_MAX / 16) / (uint64_t)s->shape[d])
            return tl_error(TL_EINVAL, "specs[%zu] (key \"%s\"): the shape has too many elements", i, key);
        n *= (size_t)s->shape[d];
    }
    if (s->default_value != NULL && s->default_count != 1 && s->default_count != n)
        return tl_error(TL_EINVAL, "specs[%zu] (key \"%s\"): default_count must be 1 or %zu, the shape's size (got %zu)",
                        i, key, n, s->default_count);
    *elems = n;
    return TL_OK;
}

/* Allocates o's value array for count values of o->dtype. */
static tl_status alloc_values(tl_parsed_feature *o, size_t count)
{
    o->count = count;
    if (count == 0)
        return TL_OK;
    void *p = tl_alloc_array(count, elem_size(o->dtype));
    if (p == NULL)
        return tl_error_oom();
    if (o->dtype == TL_FEATURE_FLOAT)
        o->floats = p;
    else if (o->dtype == TL_FEATURE_INT64)
        o->int64s = p;
    else
        o->bytes = p;
    return TL_OK;
}

/* Copies f's count values to o's values from position at. */
static void copy_values(tl_parsed_feature *o, size_t at, const tl_feature *f)
{
    if (f->count == 0)
        return;
    if (o->dtype == TL_FEATURE_FLOAT)
        memcpy(o->floats + at, f->floats, f->count * sizeof(float));
    else if (o->dtype == TL_FEATURE_INT64)
        memcpy(o->int64s + at, f->int64s, f->count * sizeof(int64_t));
    else
        memcpy(o->bytes + at, f->bytes, f->count * sizeof(tl_bytes));
}

/* Where a message points: spec s's feature, or step `step` of its feature
 * list when step is not NO_STEP. Formatted only when there is an error to
 * report: a snprintf per feature cost more than the lookup it labelled. */
#define NO_STEP SIZE_MAX

static const char *where_str(char *buf, size_t cap, const tl_feature_spec *s, size_t step)
{
    if (step == NO_STEP)
        snprintf(buf, cap, "feature \"%s\"", s->key);
    else
        snprintf(buf, cap, "feature list \"%s\", step %zu", s->key, step);
    return buf;
}

/* f (spec s's feature, or a step of its list) must be of the spec's kind. */
static tl_status check_kind(const tl_example *ex, const tl_feature_spec *s, size_t step, const tl_feature *f)
{
    if (f->kind == TL_FEATURE_NONE || f->kind == s->dtype)
        return TL_OK;
    char where[300];
    return tl_error(TL_EINVAL, "record %llu: %s: data types don't match: expected type %s (%s), feature is %s",
                    (unsigned long long)ex->index, where_str(where, sizeof where, s, step), dtype_name(s->dtype),
                    tl_feature_kind_name(s->dtype), tl_feature_kind_name(f->kind));
}

static tl_status wrong_count(const tl_example *ex, const tl_feature_spec *s, size_t step, size_t got)
{
    char shape[200], where[300];
    return tl_error(TL_EINVAL, "record %llu: %s: number of %s values != expected: values size %zu but output shape %s",
                    (unsigned long long)ex->index, where_str(where, sizeof where, s, step), dtype_name(s->dtype), got,
                    shape_str(shape, sizeof shape, s->rank, s->shape));
}

static tl_status read_fixed(const tl_example *ex, const tl_feature_spec *s, size_t elems, tl_parsed_feature *o)
{
    o->rank = s->rank;
    memcpy(o->shape, s->shape, (size_t)s->rank * sizeof s->shape[0]);
    const tl_feature *f = tl_example_find(ex, s->key);
    if (f != NULL && f->kind == TL_FEATURE_NONE)
        f = NULL;
    if (f == NULL && s->default_value == NULL)
        return tl_error(TL_EINVAL, "record %llu: feature \"%s\" (data type: %s) is required but could not be found",
                        (unsigned long long)ex->index, s->key, dtype_name(s->dtype));
    tl_status st = f != NULL ? check_kind(ex, s, NO_STEP, f) : TL_OK;
    if (st == TL_OK && f != NULL && f->count != elems)
        st = wrong_count(ex, s, NO_STEP, f->count);
    if (st == TL_OK)
        st = alloc_values(o, elems);
    if (st != TL_OK)
        return st;
    if (f != NULL) {
        copy_values(o, 0, f);
        return TL_OK;
    }
    size_t es = elem_size(s->dtype);
    uint8_t *dst = o->floats != NULL ? (uint8_t *)o->floats : o->int64s != NULL ? (uint8_t *)o->int64s : (uint8_t *)o->bytes;
    for (size_t k = 0; k < elems; k++) {
        const uint8_t *src = (const uint8_t *)s->default_value + (s->default_count == 1 ? 0 : k * es);
        memcpy(dst + k * es, src, es);
    }
    return TL_OK;
}

static tl_status read_var(const tl_example *ex, const tl_feature_spec *s, tl_parsed_feature *o)
{
    const tl_feature *f = tl_example_find(ex, s->key);
    tl_feature none = {0};
    if (f == NULL)
        f = &none;
    tl_status st = check_kind(ex, s, NO_STEP, f);
    if (st != TL_OK)
        return st;
    o->row_lengths = tl_malloc(sizeof *o->row_lengths);
    if (o->row_lengths == NULL)
        return tl_error_oom();
    o->num_rows = 1;
    o->row_lengths[0] = (int64_t)f->count;
    o->rank = 1;
    o->shape[0] = (int64_t)f->count;
    if ((st = alloc_values(o, f->count)) != TL_OK)
        return st;
    copy_values(o, 0, f);
    return TL_OK;
}

static tl_status read_fixed_seq(const tl_example *ex, const tl_feature_spec *s, size_t elems, tl_parsed_feature *o)
{
    const tl_feature_list *fl = tl_example_find_list(ex, s->key);
    if (fl == NULL && !s->allow_missing)
        return tl_error(TL_EINVAL,
                        "record %llu: feature list \"%s\" is required but could not be found "
                        "(allow_missing reads a missing list as zero steps)",
                        (unsigned long long)ex->index, s->key);
    size_t steps = fl != NULL ? fl->count : 0;
    o->rank = s->rank + 1;
    o->shape[0] = (int64_t)steps;
    memcpy(o->shape + 1, s->shape, (size_t)s->rank * sizeof s->shape[0]);
    for (size_t j = 0; j < steps; j++) {
        const tl_feature *f = &fl->steps[j];
        tl_status st = check_kind(ex, s, j, f);
        if (st == TL_OK && f->count != elems)
            st = wrong_count(ex, s, j, f->count);
        if (st != TL_OK)
            return st;
    }
    if (steps > 0 && elems > SIZE_MAX / 16 / steps)
        return tl_error(TL_EINVAL, "record %llu: feature list \"%s\": %zu steps of shape size %zu are too many values",
                        (unsigned long long)ex->index, s->key, steps, elems);
    tl_status st = alloc_values(o, steps * elems);
    if (st != TL_OK)
        return st;
    for (size_t j = 0; j < steps; j++)
        copy_values(o, j * elems, &fl->steps[j]);
    return TL_OK;
}

static tl_status read_var_seq(const tl_example *ex, const tl_feature_spec *s, tl_parsed_feature *o)
{
    const tl_feature_list *fl = tl_example_find_list(ex, s->key);
    size_t steps = fl != NULL ? fl->count : 0;
    size_t total = 0, longest = 0;
    for (size_t j = 0; j < steps; j++) {
        const tl_feature *f = &fl->steps[j];
        tl_status st = check_kind(ex, s, j, f);
        if (st != TL_OK)
            return st;
        total += f->count; /* cannot wrap: every value came from the input */
        if (f->count > longest)
            longest = f->count;
    }
    o->rank = 2;
    o->shape[0] = (int64_t)steps;
    o->shape[1] = (int64_t)longest;
    if (steps > 0) {
        o->row_lengths = tl_alloc_array(steps, sizeof *o->row_lengths);
        if (o->row_lengths == NULL)
            return tl_error_oom();
        o->num_rows = steps;
    }
    tl_status st = alloc_values(o, total);
    if (st != TL_OK)
        return st;
    size_t at = 0;
    for (size_t j = 0; j < steps; j++) {
        o->row_lengths[j] = (int64_t)fl->steps[j].count;
        copy_values(o, at, &fl->steps[j]);
        at += fl->steps[j].count;
    }
    return TL_OK;
}

tl_status tl_example_parse_features(const tl_example *ex, const tl_feature_spec *specs, size_t n,
                                    tl_parsed_feature *out)
{
    if (n == 0)
        return TL_OK;
    if (ex == NULL || specs == NULL || out == NULL)
        return tl_error(TL_EINVAL, "tl_example_parse_features: ex, specs and out must not be NULL (n is %zu)", n);
    memset(out, 0, n * sizeof *out);
    /* Every spec is checked before any is read, so a bad spec fails the same
     * way whatever the example holds. */
    for (size_t i = 0; i < n; i++) {
        size_t e;
        tl_status st = check_spec(i, &specs[i], &e);
        if (st != TL_OK)
            return st;
    }
    for (size_t i = 0; i < n; i++) {
        const tl_feature_spec *s = &specs[i];
        size_t e;
        tl_status st = check_spec(i, s, &e);
        TL_ASSERT(st == TL_OK);
        out[i].dtype = s->dtype;
        switch (s->type) {
        case TL_SPEC_FIXED_LEN:
            st = read_fixed(ex, s, e, &out[i]);
            break;
        case TL_SPEC_VAR_LEN:
            st = read_var(ex, s, &out[i]);
            break;
        case TL_SPEC_FIXED_LEN_SEQUENCE:
            st = read_fixed_seq(ex, s, e, &out[i]);
            break;
        default:
            st = read_var_seq(ex, s, &out[i]);
            break;
        }
        if (st != TL_OK) {
            tl_parsed_features_free(out, i + 1);
            return st;
        }
    }
    return TL_OK;
}

void tl_parsed_features_free(tl_parsed_feature *out, size_t n)
{
    if (out == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        tl_free(out[i].floats);
        tl_free(out[i].int64s);
        tl_free(out[i].bytes);
        tl_free(out[i].row_lengths);
        out[i] = (tl_parsed_feature){0};
    }
}

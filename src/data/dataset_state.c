/* dataset_state.c — elements as JSON for a saved pipeline state (the
 * contents of shuffle and prefetch buffers), and the JSON helpers the nodes'
 * save and restore share.
 *
 * An element is {"file": name or null, "record": n, "offset": "n",
 * "tensors": [{"key", "dtype", "shape": [...], "ragged", "num_values",
 * "row_lengths": [...], "data": base64 or, for bytes, [base64, ...]}]}.
 * Numeric data is base64 of the values' bytes in the host's byte order (a
 * state is restored by the same build on the same kind of machine). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dataset_int.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static json_t *b64_json(const uint8_t *p, size_t n)
{
    size_t len = (n + 2) / 3 * 4;
    char *s = tl_malloc(len + 1);
    if (s == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        s[o++] = B64[(v >> 18) & 63];
        s[o++] = B64[(v >> 12) & 63];
        s[o++] = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        s[o++] = i + 2 < n ? B64[v & 63] : '=';
    }
    s[o] = '\0';
    json_t *j = json_stringn(s, o);
    tl_free(s);
    return j;
}

static int b64_val(char c)
{
    const char *p = c != '\0' ? strchr(B64, c) : NULL;
    return p != NULL ? (int)(p - B64) : -1;
}

/* Decodes s into dst, which holds cap bytes; *n is how many were written.
 * Returns false for text that is not base64 or does not fit. */
static bool b64_decode(const char *s, size_t slen, uint8_t *dst, size_t cap, size_t *n)
{
    *n = 0;
    if (slen % 4 != 0)
        return false;
    for (size_t i = 0; i < slen; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == slen && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad > 0 || (v[k] = b64_val(s[i + k])) < 0) {
                return false;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        for (int k = 0; k < 3 - pad; k++) {
            if (*n == cap)
                return false;
            dst[(*n)++] = (uint8_t)(w >> (16 - 8 * k));
        }
    }
    return true;
}

json_t *ds_json_u64_new(uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return json_string(buf);
}

tl_status ds_json_int(json_t *obj, const char *key, const char *what, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return tl_error(TL_EINVAL, "%s: the saved state lacks the integer \"%s\"", what, key);
    *out = (int64_t)json_integer_value(v);
    return TL_OK;
}

tl_status ds_json_u64(json_t *obj, const char *key, const char *what, uint64_t *out)
{
    const char *s = json_string_value(json_object_get(obj, key));
    int64_t v;
    if (s == NULL)
        return tl_error(TL_EINVAL, "%s: the saved state lacks \"%s\"", what, key);
    /* Values past INT64_MAX come back through the unsigned parse. */
    char *end;
    unsigned long long u = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || *s == '-') {
        if (tl_parse_int64(s, &v) != 0)
            return tl_error(TL_EINVAL, "%s: \"%s\" is not an unsigned integer (\"%s\")", what, key, s);
        u = (unsigned long long)v;
    }
    *out = (uint64_t)u;
    return TL_OK;
}

tl_status ds_json_bool(json_t *obj, const char *key, const char *what, bool *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_boolean(v))
        return tl_error(TL_EINVAL, "%s: the saved state lacks the boolean \"%s\"", what, key);
    *out = json_is_true(v);
    return TL_OK;
}

static json_t *tensor_to_json(const tl_tensor *t)
{
    json_t *o = json_object(), *shape = json_array();
    if (o == NULL || shape == NULL) {
        json_decref(o);
        json_decref(shape);
        return NULL;
    }
    bool ok = json_object_set_new(o, "shape", shape) == 0;
    for (int i = 0; i < t->rank && ok; i++)
        ok = json_array_append_new(shape, json_integer(t->shape[i])) == 0;
    ok = ok && json_object_set_new(o, "key", json_string(t->key)) == 0 &&
         json_object_set_new(o, "dtype", json_integer(t->dtype)) == 0 &&
         json_object_set_new(o, "ragged", json_boolean(t->ragged)) == 0;
    if (ok && t->ragged) {
        json_t *rl = json_array();
        ok = rl != NULL && json_object_set_new(o, "row_lengths", rl) == 0 &&
             json_object_set_new(o, "num_values", json_integer(t->num_values)) == 0;
        for (int64_t i = 0; i < t->num_rows && ok; i++)
            ok = json_array_append_new(rl, json_integer(t->row_lengths[i])) == 0;
    }
    int64_t n = ds_tensor_count(t);
    if (ok && t->dtype == TL_DT_BYTES) {
        json_t *arr = json_array();
        ok = arr != NULL && json_object_set_new(o, "data", arr) == 0;
        const tl_bytes *b = t->data;
        for (int64_t i = 0; i < n && ok; i++)
            ok = json_array_append_new(arr, b64_json(b[i].data, b[i].len)) == 0;
    } else if (ok) {
        ok = json_object_set_new(o, "data", b64_json(t->data, (size_t)n * ds_dtype_size(t->dtype))) == 0;
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *ds_elem_to_json(const ds_elem *e)
{
    json_t *o = json_object(), *ts = json_array();
    if (o == NULL || ts == NULL) {
        json_decref(o);
        json_decref(ts);
        return NULL;
    }
    bool ok = json_object_set_new(o, "tensors", ts) == 0 &&
              json_object_set_new(o, "file", e->file != NULL ? json_string(e->file) : json_null()) == 0 &&
              json_object_set_new(o, "record", json_integer(e->record)) == 0 &&
              json_object_set_new(o, "offset", ds_json_u64_new(e->offset)) == 0;
    for (int i = 0; i < e->pub.num_tensors && ok; i++)
        ok = json_array_append_new(ts, tensor_to_json(&e->pub.tensors[i])) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static tl_status bad(const char *what, const char *field)
{
    return tl_error(TL_EINVAL, "%s: malformed saved element (field \"%s\")", what, field);
}

static tl_status tensor_from_json(ds_ctx *ctx, json_t *j, const char *what, tl_tensor *t)
{
    const char *key = json_string_value(json_object_get(j, "key"));
    json_t *shape = json_object_get(j, "shape"), *data = json_object_get(j, "data");
    json_t *dt = json_object_get(j, "dtype");
    if (key == NULL)
        return bad(what, "key");
    if (!json_is_array(shape) || json_array_size(shape) > TL_TENSOR_MAX_RANK)
        return bad(what, "shape");
    if (!json_is_integer(dt) || ds_dtype_size((tl_data_type)json_integer_value(dt)) == 0)
        return bad(what, "dtype");
    memset(t, 0, sizeof *t);
    t->key = ds_intern(ctx, key);
    if (t->key == NULL)
        return tl_error_oom();
    t->dtype = (tl_data_type)json_integer_value(dt);
    t->rank = (int)json_array_size(shape);
    for (int i = 0; i < t->rank; i++) {
        json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > ((int64_t)1 << 40))
            return bad(what, "shape");
        t->shape[i] = json_integer_value(d);
    }
    t->ragged = json_is_true(json_object_get(j, "ragged"));
    if (t->ragged) {
        json_t *rl = json_object_get(j, "row_lengths");
        tl_status st = ds_json_int(j, "num_values", what, &t->num_values);
        if (st != TL_OK)
            return st;
        if (!json_is_array(rl) || t->num_values < 0 || t->num_values > ((int64_t)1 << 40))
            return bad(what, "row_lengths");
        t->num_rows = (int64_t)json_array_size(rl);
        t->row_lengths = tl_alloc_array((size_t)t->num_rows + 1, sizeof *t->row_lengths);
        if (t->row_lengths == NULL)
            return tl_error_oom();
        for (int64_t i = 0; i < t->num_rows; i++)
            t->row_lengths[i] = json_integer_value(json_array_get(rl, (size_t)i));
    } else {
        int64_t n = 1;
        for (int i = 0; i < t->rank; i++)
            n *= t->shape[i];
        if (n > ((int64_t)1 << 40))
            return bad(what, "shape");
    }
    int64_t n = ds_tensor_count(t);
    if (t->dtype == TL_DT_BYTES) {
        if (!json_is_array(data) || (int64_t)json_array_size(data) != n)
            return bad(what, "data");
        size_t total = 0;
        for (int64_t i = 0; i < n; i++)
            total += json_string_length(json_array_get(data, (size_t)i));
        size_t head = (size_t)n * sizeof(tl_bytes);
        uint8_t *block = tl_malloc(head + total + 1);
        if (block == NULL)
            return tl_error_oom();
        t->data = block;
        tl_bytes *b = (tl_bytes *)(void *)block;
        uint8_t *pool = block + head;
        for (int64_t i = 0; i < n; i++) {
            json_t *s = json_array_get(data, (size_t)i);
            size_t got;
            if (!json_is_string(s) || !b64_decode(json_string_value(s), json_string_length(s), pool,
                                                  (size_t)(block + head + total - pool), &got))
                return bad(what, "data");
            b[i].data = pool;
            b[i].len = got;
            pool += got;
        }
    } else {
        size_t bytes = (size_t)n * ds_dtype_size(t->dtype), got;
        t->data = tl_malloc(bytes > 0 ? bytes : 1);
        if (t->data == NULL)
            return tl_error_oom();
        if (!json_is_string(data) ||
            !b64_decode(json_string_value(data), json_string_length(data), t->data, bytes, &got) || got != bytes)
            return bad(what, "data");
    }
    return TL_OK;
}

tl_status ds_elem_from_json(ds_ctx *ctx, json_t *j, const char *what, ds_elem **out)
{
    *out = NULL;
    json_t *ts = json_object_get(j, "tensors");
    if (!json_is_array(ts) || json_array_size(ts) > 65536)
        return bad(what, "tensors");
    ds_elem *e = ds_elem_new((int)json_array_size(ts));
    if (e == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    const char *file = json_string_value(json_object_get(j, "file"));
    if (file != NULL && (e->file = ds_intern(ctx, file)) == NULL)
        st = tl_error_oom();
    if (st == TL_OK)
        st = ds_json_int(j, "record", what, &e->record);
    if (st == TL_OK)
        st = ds_json_u64(j, "offset", what, &e->offset);
    for (int i = 0; i < e->pub.num_tensors && st == TL_OK; i++)
        st = tensor_from_json(ctx, json_array_get(ts, (size_t)i), what, &e->pub.tensors[i]);
    if (st != TL_OK) {
        ds_elem_free(e);
        return st;
    }
    *out = e;
    return TL_OK;
}

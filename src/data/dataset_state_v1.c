/* dataset_state_v1.c — reading buffered elements of a state saved in format
 * "tpuloop.dataset/1", as tpuloop wrote them before format 2 (see
 * dataset_state.c): each element a JSON object,
 *
 *   {"file": name or null, "record": n, "offset": "n" (decimal string),
 *    "tensors": [{"key", "dtype", "shape": [...], "ragged", and when ragged
 *                 "num_values" and "row_lengths": [...], "data": base64 of
 *                 the values' bytes in the host's order, or for bytes
 *                 [base64, ...]}]},
 *
 * a list of slots a JSON array of them, null for an empty slot. Checkpoints
 * hold such states; they restore as they always did. */
#include <string.h>

#include "dataset_int.h"

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
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > DS_STATE_MAX_COUNT)
            return bad(what, "shape");
        t->shape[i] = json_integer_value(d);
    }
    t->ragged = json_is_true(json_object_get(j, "ragged"));
    if (t->ragged) {
        json_t *rl = json_object_get(j, "row_lengths");
        tl_status st = ds_json_int(j, "num_values", what, &t->num_values);
        if (st != TL_OK)
            return st;
        if (!json_is_array(rl) || t->num_values < 0 || t->num_values > DS_STATE_MAX_COUNT)
            return bad(what, "row_lengths");
        t->num_rows = (int64_t)json_array_size(rl);
        t->row_lengths = tl_alloc_array((size_t)t->num_rows + 1, sizeof *t->row_lengths);
        if (t->row_lengths == NULL)
            return tl_error_oom();
        /* The rows share out the values: a batch copies row by row. */
        int64_t sum = 0;
        for (int64_t i = 0; i < t->num_rows; i++) {
            json_t *v = json_array_get(rl, (size_t)i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > t->num_values - sum)
                return bad(what, "row_lengths");
            t->row_lengths[i] = json_integer_value(v);
            sum += t->row_lengths[i];
        }
        if (sum != t->num_values)
            return bad(what, "row_lengths");
    } else {
        int64_t n = 1;
        for (int i = 0; i < t->rank; i++) {
            if (t->shape[i] != 0 && n > DS_STATE_MAX_COUNT / t->shape[i])
                return bad(what, "shape");
            n *= t->shape[i];
        }
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
            if (!json_is_string(s) || !ds_b64_decode(json_string_value(s), json_string_length(s), pool,
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
            !ds_b64_decode(json_string_value(data), json_string_length(data), t->data, bytes, &got) || got != bytes)
            return bad(what, "data");
    }
    return TL_OK;
}

static tl_status elem_from_json(ds_ctx *ctx, json_t *j, const char *what, ds_elem **out)
{
    *out = NULL;
    json_t *ts = json_object_get(j, "tensors");
    if (!json_is_array(ts) || json_array_size(ts) > DS_STATE_MAX_TENSORS)
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

tl_status ds_load_slots_v1(ds_ctx *ctx, json_t *obj, const char *key, const char *what, int64_t max,
                           ds_elem ***slots, int64_t *n)
{
    json_t *arr = json_object_get(obj, key);
    if (!json_is_array(arr))
        return tl_error(TL_EINVAL, "%s: the saved state lacks its \"%s\" array", what, key);
    int64_t count = (int64_t)json_array_size(arr);
    if (count > max)
        return tl_error(TL_EINVAL, "%s: the saved \"%s\" holds %lld elements; at most %lld fit", what, key,
                        (long long)count, (long long)max);
    if (count == 0)
        return TL_OK;
    ds_elem **s = tl_calloc((size_t)count, sizeof *s);
    if (s == NULL)
        return tl_error_oom();
    for (int64_t i = 0; i < count; i++) {
        json_t *j = json_array_get(arr, (size_t)i);
        tl_status st = json_is_null(j) ? TL_OK : elem_from_json(ctx, j, what, &s[i]);
        if (st != TL_OK) {
            ds_slots_free(s, count);
            return st;
        }
    }
    *slots = s;
    *n = count;
    return TL_OK;
}

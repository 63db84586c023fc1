/* dataset.c — the dataset core: nodes and their context, owned elements,
 * and the public calls that consume a pipeline and save or restore its
 * position (see tpuloop/dataset.h). */
#include <stdio.h>
#include <string.h>

#include "dataset_int.h"

/* ---- context ---------------------------------------------------------------- */

static ds_ctx *ctx_new(void)
{
    ds_ctx *c = tl_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        tl_free(c);
        return NULL;
    }
    atomic_init(&c->corrupt_skipped, 0);
    c->refs = 1;
    return c;
}

static void ctx_release(ds_ctx *c)
{
    if (c == NULL || --c->refs > 0)
        return;
    for (size_t i = 0; i < c->n; i++)
        tl_free(c->strs[i]);
    tl_free(c->strs);
    pthread_mutex_destroy(&c->mu);
    tl_free(c);
}

/* Linear: a pipeline interns its keys and file names, tens to thousands of
 * strings, each once when a node is built or a file opened. */
const char *ds_intern(ds_ctx *ctx, const char *s)
{
    const char *r = NULL;
    pthread_mutex_lock(&ctx->mu);
    for (size_t i = ctx->n; i-- > 0;)
        if (strcmp(ctx->strs[i], s) == 0) {
            r = ctx->strs[i];
            goto out;
        }
    if (ctx->n == ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap * 2 : 16;
        char **p = tl_realloc(ctx->strs, cap * sizeof *p);
        if (p == NULL)
            goto out;
        ctx->strs = p;
        ctx->cap = cap;
    }
    char *d = tl_strdup(s);
    if (d != NULL)
        r = ctx->strs[ctx->n++] = d;
out:
    pthread_mutex_unlock(&ctx->mu);
    return r;
}

void ds_count_skip(ds_ctx *ctx)
{
    atomic_fetch_add(&ctx->corrupt_skipped, 1);
}

/* ---- nodes ------------------------------------------------------------------- */

tl_dataset *ds_node_new(const ds_ops *ops, void *impl, char *desc, tl_dataset *input)
{
    tl_dataset *ds = desc != NULL ? tl_calloc(1, sizeof *ds) : NULL;
    ds_ctx *ctx = NULL;
    if (ds != NULL) {
        if (input != NULL) {
            ctx = input->ctx;
            ctx->refs++;
        } else {
            ctx = ctx_new();
        }
    }
    if (ctx == NULL) {
        tl_free(ds);
        tl_free(desc);
        tl_dataset_destroy(input);
        return NULL;
    }
    ds->ops = ops;
    ds->impl = impl;
    ds->desc = desc;
    ds->input = input;
    ds->ctx = ctx;
    return ds;
}

tl_status ds_finish(tl_status st, const ds_ops *ops, void *impl, char *desc, tl_dataset *in, tl_dataset **out)
{
    *out = NULL;
    if (st != TL_OK) {
        tl_free(desc);
        tl_dataset_destroy(in);
        return st;
    }
    tl_dataset *ds = ds_node_new(ops, impl, desc, in);
    if (ds == NULL)
        return tl_error_oom();
    *out = ds;
    return TL_OK;
}

tl_status ds_pull(tl_dataset *ds, ds_elem **out)
{
    *out = NULL;
    return ds->ops->next(ds, out);
}

tl_status ds_reset(tl_dataset *ds, uint64_t epoch_key)
{
    return ds->ops->reset(ds, epoch_key);
}

void tl_dataset_destroy(tl_dataset *ds)
{
    while (ds != NULL) {
        tl_dataset *in = ds->input;
        /* The node's own threads stop before its input goes away. */
        if (ds->ops->destroy != NULL)
            ds->ops->destroy(ds);
        ds_elem_free(ds->current);
        ctx_release(ds->ctx);
        tl_free(ds->desc);
        tl_free(ds);
        ds = in;
    }
}

/* ---- elements ----------------------------------------------------------------- */

ds_elem *ds_elem_new(int num_tensors)
{
    ds_elem *e = tl_calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    if (num_tensors > 0) {
        e->pub.tensors = tl_calloc((size_t)num_tensors, sizeof *e->pub.tensors);
        if (e->pub.tensors == NULL) {
            tl_free(e);
            return NULL;
        }
    }
    e->pub.num_tensors = num_tensors;
    e->record = -1;
    return e;
}

void ds_elem_free(ds_elem *e)
{
    if (e == NULL)
        return;
    for (int i = 0; i < e->pub.num_tensors; i++) {
        tl_free(e->pub.tensors[i].data);
        tl_free(e->pub.tensors[i].row_lengths);
    }
    tl_free(e->pub.tensors);
    tl_free(e);
}

size_t ds_dtype_size(tl_data_type dt)
{
    switch (dt) {
    case TL_DT_FLOAT32: return sizeof(float);
    case TL_DT_INT64: return sizeof(int64_t);
    case TL_DT_INT32: return sizeof(int32_t);
    case TL_DT_BYTES: return sizeof(tl_bytes);
    }
    return 0;
}

const char *tl_data_type_name(tl_data_type dt)
{
    switch (dt) {
    case TL_DT_FLOAT32: return "float32";
    case TL_DT_INT64: return "int64";
    case TL_DT_INT32: return "int32";
    case TL_DT_BYTES: return "bytes";
    }
    return "?";
}

int64_t ds_tensor_count(const tl_tensor *t)
{
    if (t->ragged)
        return t->num_values;
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

static void tensor_head(tl_tensor *t, const char *key, tl_data_type dtype, int rank, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->key = key;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->shape[i] = shape[i];
}

tl_status ds_tensor_alloc(tl_tensor *t, const char *key, tl_data_type dtype, int rank, const int64_t *shape)
{
    tensor_head(t, key, dtype, rank, shape);
    int64_t n = ds_tensor_count(t);
    /* One byte at least, so that data is never NULL. */
    t->data = tl_malloc(n > 0 ? (size_t)n * ds_dtype_size(dtype) : 1);
    return t->data != NULL ? TL_OK : tl_error_oom();
}

tl_status ds_tensor_set_bytes(tl_tensor *t, const char *key, int rank, const int64_t *shape, const tl_bytes *vals,
                              int64_t count)
{
    tensor_head(t, key, TL_DT_BYTES, rank, shape);
    size_t total = 0;
    for (int64_t i = 0; i < count; i++)
        total += vals[i].len;
    size_t head = (size_t)count * sizeof(tl_bytes);
    uint8_t *block = tl_malloc(head + total + 1);
    if (block == NULL)
        return tl_error_oom();
    tl_bytes *b = (tl_bytes *)(void *)block;
    uint8_t *pool = block + head;
    for (int64_t i = 0; i < count; i++) {
        if (vals[i].len > 0)
            memcpy(pool, vals[i].data, vals[i].len);
        b[i].data = pool;
        b[i].len = vals[i].len;
        pool += vals[i].len;
    }
    t->data = block;
    return TL_OK;
}

void ds_format_shape(char *buf, size_t cap, const int64_t *shape, int rank)
{
    size_t at = 0;
    at += (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < rank && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < cap)
        snprintf(buf + at, cap - at, ")");
}

void ds_where(char *buf, size_t cap, const ds_elem *e)
{
    if (e->file != NULL)
        snprintf(buf, cap, "%s: record %lld at byte offset %llu", e->file, (long long)e->record,
                 (unsigned long long)e->offset);
    else
        snprintf(buf, cap, "element %lld", (long long)e->record);
}

const tl_tensor *tl_element_find(const tl_element *e, const char *key)
{
    if (e == NULL || key == NULL)
        return NULL;
    for (int i = 0; i < e->num_tensors; i++)
        if (strcmp(e->tensors[i].key, key) == 0)
            return &e->tensors[i];
    return NULL;
}

/* ---- consuming -------------------------------------------------------------- */

tl_status tl_dataset_next(tl_dataset *ds, const tl_element **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_next: out is NULL");
    *out = NULL;
    if (ds == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_next: ds is NULL");
    ds->started = true;
    ds_elem_free(ds->current);
    ds->current = NULL;
    ds_elem *e;
    tl_status st = ds_pull(ds, &e);
    if (st != TL_OK)
        return st;
    ds->current = e;
    *out = e != NULL ? &e->pub : NULL;
    return TL_OK;
}

int64_t tl_dataset_corrupt_skipped(const tl_dataset *ds)
{
    return ds != NULL ? (int64_t)atomic_load(&ds->ctx->corrupt_skipped) : 0;
}

/* ---- save and restore ----------------------------------------------------- */

tl_status tl_dataset_save(tl_dataset *ds, char **json_out)
{
    if (json_out == NULL || ds == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_save: %s is NULL", ds == NULL ? "ds" : "json_out");
    *json_out = NULL;
    /* Threads stop top-down, so that a paused node is not pulled from. */
    for (tl_dataset *n = ds; n != NULL; n = n->input)
        if (n->ops->pause != NULL)
            n->ops->pause(n);
    json_t *nodes = json_array();
    ds_saver *sv = ds_saver_new();
    tl_status st = nodes != NULL && sv != NULL ? TL_OK : tl_error_oom();
    for (tl_dataset *n = ds; n != NULL && st == TL_OK; n = n->input) {
        json_t *obj = json_object();
        if (obj == NULL || json_array_append_new(nodes, obj) != 0 ||
            json_object_set_new(obj, "node", json_string(n->desc)) != 0) {
            st = tl_error_oom();
            break;
        }
        if (n->ops->save != NULL)
            st = n->ops->save(n, obj, sv);
    }
    if (st == TL_OK)
        st = ds_state_write(sv, (int64_t)atomic_load(&ds->ctx->corrupt_skipped), nodes, json_out);
    json_decref(nodes);
    ds_saver_free(sv);
    /* Resumed bottom-up: each node's input runs again before it does. */
    tl_dataset *stack[256];
    int depth = 0;
    for (tl_dataset *n = ds; n != NULL; n = n->input)
        if (n->ops->resume != NULL && depth < (int)TL_ARRAY_LEN(stack))
            stack[depth++] = n;
    while (depth > 0) {
        tl_dataset *n = stack[--depth];
        n->ops->resume(n);
    }
    return st;
}

tl_status tl_dataset_restore(tl_dataset *ds, const char *json)
{
    if (ds == NULL || json == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_restore: %s is NULL", ds == NULL ? "ds" : "json");
    if (ds->started)
        return tl_error(TL_EINVAL, "tl_dataset_restore: the dataset has already been read from; restore a "
                                   "freshly built one before its first tl_dataset_next");
    json_t *root;
    ds_loader *ld;
    tl_status st = ds_state_read(ds->ctx, json, &root, &ld);
    if (st != TL_OK)
        return st;
    json_t *nodes = json_object_get(root, "nodes");
    int64_t skipped = 0;
    if (!json_is_array(nodes)) {
        st = tl_error(TL_EINVAL, "tl_dataset_restore: the saved state lacks its \"nodes\" array");
        goto out;
    }
    st = ds_json_int(root, "corrupt_skipped", "tl_dataset_restore", &skipped);
    if (st != TL_OK)
        goto out;
    size_t depth = 0;
    for (tl_dataset *n = ds; n != NULL; n = n->input)
        depth++;
    if (json_array_size(nodes) != depth) {
        st = tl_error(TL_EINVAL,
                      "tl_dataset_restore: the saved pipeline has %zu nodes, this one %zu (saved from a pipeline "
                      "built differently)",
                      json_array_size(nodes), depth);
        goto out;
    }
    size_t i = 0;
    for (tl_dataset *n = ds; n != NULL; n = n->input, i++) {
        json_t *obj = json_array_get(nodes, i);
        const char *desc = json_string_value(json_object_get(obj, "node"));
        if (desc == NULL || strcmp(desc, n->desc) != 0) {
            st = tl_error(TL_EINVAL, "tl_dataset_restore: node %zu is %s here but %s in the saved state", i, n->desc,
                          desc != NULL ? desc : "(missing)");
            goto out;
        }
    }
    i = 0;
    for (tl_dataset *n = ds; n != NULL && st == TL_OK; n = n->input, i++)
        if (n->ops->restore != NULL)
            st = n->ops->restore(n, json_array_get(nodes, i), ld);
    if (st == TL_OK)
        atomic_store(&ds->ctx->corrupt_skipped, (long long)skipped);
out:
    ds_loader_free(ld);
    json_decref(root);
    return st;
}

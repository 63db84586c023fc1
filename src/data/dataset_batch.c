/* dataset_batch.c — batch: dense tensors stacked along a new leading
 * dimension, ragged ones concatenated with one row length per element. */
#include <stdio.h>
#include <string.h>

#include "dataset_int.h"

typedef struct batch_impl {
    int64_t size;
    bool drop_remainder;
    ds_elem **items; /* (size) the elements of the batch being built */
    int64_t *index;  /* (size) its positions, over random access (else NULL) */
} batch_impl;

/* Elements i > 0 must match element 0 tensor by tensor. */
static tl_status check_same(ds_elem *const *items, int64_t n)
{
    const tl_element *a = &items[0]->pub;
    for (int64_t i = 1; i < n; i++) {
        const tl_element *b = &items[i]->pub;
        if (b->num_tensors != a->num_tensors)
            return tl_error(TL_EINVAL, "batch: element %lld of the batch has %d tensors but element 0 has %d",
                            (long long)i, b->num_tensors, a->num_tensors);
        for (int t = 0; t < a->num_tensors; t++) {
            const tl_tensor *x = &a->tensors[t], *y = &b->tensors[t];
            if (strcmp(x->key, y->key) != 0 || x->dtype != y->dtype || x->ragged != y->ragged)
                return tl_error(TL_EINVAL,
                                "batch: tensor %d of element %lld is \"%s\" (%s%s) but of element 0 \"%s\" (%s%s)",
                                t, (long long)i, y->key, tl_data_type_name(y->dtype), y->ragged ? ", ragged" : "",
                                x->key, tl_data_type_name(x->dtype), x->ragged ? ", ragged" : "");
            if (x->ragged)
                continue;
            bool same = x->rank == y->rank;
            for (int d = 0; same && d < x->rank; d++)
                same = x->shape[d] == y->shape[d];
            if (!same) {
                char sx[128], sy[128], where[512];
                ds_format_shape(sx, sizeof sx, x->shape, x->rank);
                ds_format_shape(sy, sizeof sy, y->shape, y->rank);
                ds_where(where, sizeof where, items[i]);
                return tl_error(TL_EINVAL,
                                "batch: \"%s\" has shape %s in element %lld of the batch (%s) but %s in element 0; "
                                "batch needs equal shapes",
                                x->key, sy, (long long)i, where, sx);
            }
        }
    }
    return TL_OK;
}

/* Tensor t of the n items stacked or concatenated into o. */
static tl_status combine(ds_elem *const *items, int64_t n, int t, tl_tensor *o)
{
    const tl_tensor *x = &items[0]->pub.tensors[t];
    size_t vsize = ds_dtype_size(x->dtype);
    int64_t total = 0, longest = 0;
    if (x->ragged) {
        for (int64_t i = 0; i < n; i++) {
            const tl_tensor *y = &items[i]->pub.tensors[t];
            if (y->num_rows != 1)
                return tl_error(TL_ENOTIMPL,
                                "batch: \"%s\" is ragged with %lld rows (a VarLen sequence feature); only ragged "
                                "tensors of one row (VarLen features) can be batched",
                                y->key, (long long)y->num_rows);
            total += y->num_values;
            if (y->num_values > longest)
                longest = y->num_values;
        }
    } else {
        if (x->rank >= TL_TENSOR_MAX_RANK)
            return tl_error(TL_EINVAL, "batch: \"%s\" already has rank %d; a batch of it would exceed %d", x->key,
                            x->rank, TL_TENSOR_MAX_RANK);
        total = n * ds_tensor_count(x);
    }
    int64_t shape[TL_TENSOR_MAX_RANK];
    int rank;
    shape[0] = n;
    if (x->ragged) {
        shape[1] = longest;
        rank = 2;
    } else {
        for (int d = 0; d < x->rank; d++)
            shape[d + 1] = x->shape[d];
        rank = x->rank + 1;
    }
    tl_status st;
    if (x->dtype == TL_DT_BYTES) {
        tl_bytes *vals = tl_alloc_array((size_t)total + 1, sizeof *vals);
        if (vals == NULL)
            return tl_error_oom();
        int64_t at = 0;
        for (int64_t i = 0; i < n; i++) {
            const tl_tensor *y = &items[i]->pub.tensors[t];
            int64_t c = ds_tensor_count(y);
            memcpy(vals + at, y->data, (size_t)c * sizeof *vals);
            at += c;
        }
        st = ds_tensor_set_bytes(o, x->key, rank, shape, vals, total);
        tl_free(vals);
    } else {
        if (x->ragged) {
            st = ds_tensor_alloc(o, x->key, x->dtype, 1, &total);
            o->rank = rank;
            o->shape[0] = shape[0];
            o->shape[1] = shape[1];
        } else {
            st = ds_tensor_alloc(o, x->key, x->dtype, rank, shape);
        }
        uint8_t *dst = o->data;
        for (int64_t i = 0; st == TL_OK && i < n; i++) {
            const tl_tensor *y = &items[i]->pub.tensors[t];
            size_t bytes = (size_t)ds_tensor_count(y) * vsize;
            memcpy(dst, y->data, bytes);
            dst += bytes;
        }
    }
    if (st != TL_OK || !x->ragged)
        return st;
    o->ragged = true;
    o->num_values = total;
    o->num_rows = n;
    o->row_lengths = tl_alloc_array((size_t)n, sizeof *o->row_lengths);
    if (o->row_lengths == NULL)
        return tl_error_oom();
    for (int64_t i = 0; i < n; i++)
        o->row_lengths[i] = items[i]->pub.tensors[t].num_values;
    return TL_OK;
}

/* Over random access: the batch's positions, then its rows copied straight
 * from the source into the batch (no element of each). */
static tl_status batch_gather(tl_dataset *ds, ds_elem **out)
{
    batch_impl *b = ds->impl;
    int64_t n = 0, j;
    tl_status st = TL_OK;
    while (n < b->size && (st = ds->input->access->claim(ds->input, &j)) == TL_OK && j >= 0)
        b->index[n++] = j;
    if (st != TL_OK || n == 0 || (b->drop_remainder && n < b->size))
        return st;
    return ds->input->rows->access->gather(ds->input->rows, b->index, n, out);
}

static tl_status batch_next(tl_dataset *ds, ds_elem **out)
{
    batch_impl *b = ds->impl;
    if (b->index != NULL)
        return batch_gather(ds, out);
    int64_t n = 0;
    tl_status st = TL_OK;
    while (n < b->size) {
        ds_elem *e;
        if ((st = ds_pull(ds->input, &e)) != TL_OK || e == NULL)
            break;
        b->items[n++] = e;
    }
    ds_elem *o = NULL;
    if (st == TL_OK && n > 0 && !(b->drop_remainder && n < b->size))
        st = check_same(b->items, n);
    if (st == TL_OK && n > 0 && !(b->drop_remainder && n < b->size)) {
        o = ds_elem_new(b->items[0]->pub.num_tensors);
        if (o == NULL)
            st = tl_error_oom();
        for (int t = 0; st == TL_OK && t < o->pub.num_tensors; t++)
            st = combine(b->items, n, t, &o->pub.tensors[t]);
        if (o != NULL) {
            o->file = b->items[0]->file;
            o->record = b->items[0]->record;
            o->offset = b->items[0]->offset;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        ds_elem_free(b->items[i]);
        b->items[i] = NULL;
    }
    if (st != TL_OK) {
        ds_elem_free(o);
        return st;
    }
    *out = o;
    return TL_OK;
}

static tl_status batch_reset(tl_dataset *ds, uint64_t epoch_key)
{
    return ds_reset(ds->input, epoch_key);
}

static void batch_destroy(tl_dataset *ds)
{
    batch_impl *b = ds->impl;
    if (b != NULL) {
        tl_free(b->items);
        tl_free(b->index);
    }
    tl_free(b);
}

/* A batch holds nothing between calls: its state is its input's. */
static const ds_ops batch_ops = {"batch", batch_next, batch_reset, NULL, NULL, NULL, NULL, batch_destroy};

#define MAX_BATCH ((int64_t)1 << 30)

tl_status tl_dataset_batch(tl_dataset *in, int64_t batch_size, bool drop_remainder, tl_dataset **out)
{
    if (out == NULL) {
        tl_dataset_destroy(in);
        return tl_error(TL_EINVAL, "batch: out is NULL");
    }
    tl_status st = TL_OK;
    if (in == NULL)
        st = tl_error(TL_EINVAL, "batch: the input dataset is NULL");
    else if (batch_size < 1 || batch_size > MAX_BATCH)
        st = tl_error(TL_EINVAL, "batch: batch_size must be in 1..%lld (got %lld)", (long long)MAX_BATCH,
                      (long long)batch_size);
    batch_impl *b = NULL;
    char *desc = NULL;
    if (st == TL_OK) {
        b = tl_calloc(1, sizeof *b);
        desc = tl_asprintf("batch(batch_size=%lld, drop_remainder=%s)", (long long)batch_size,
                           drop_remainder ? "true" : "false");
        if (b != NULL) {
            b->size = batch_size;
            b->drop_remainder = drop_remainder;
            b->items = tl_calloc((size_t)batch_size, sizeof *b->items);
            /* A source in memory (or a shuffle, repeat or scale of one) with a
             * gather: rows go straight into the batch. */
            if (in->access != NULL && in->rows->access->gather != NULL)
                b->index = tl_malloc((size_t)batch_size * sizeof *b->index);
        }
        if (b == NULL || b->items == NULL || desc == NULL || (in->access != NULL && b->index == NULL))
            st = tl_error_oom();
    }
    st = ds_finish(st, &batch_ops, b, desc, in, out);
    if (st != TL_OK)
        batch_destroy(&(tl_dataset){.impl = b});
    return st;
}

/* dataset_scale.c — tl_dataset_scale: numeric tensors become float32 values
 * times a factor, tf.data's `map(lambda x: tf.cast(x, tf.float32) * s)`:
 * what turns IDX or converted pixels 0..255 into [0, 1], whatever the
 * source. It holds nothing between elements, so its state is its input's. */
#include <string.h>

#include "dataset_int.h"

typedef struct scale_impl {
    float scale;
    char **keys;  /* (nkeys) the tensors to scale; NULL: every numeric one not in skip */
    int nkeys;
    char **skip;  /* (nskip) */
    int nskip;
} scale_impl;

static bool listed(char *const *names, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], key) == 0)
            return true;
    return false;
}

/* t's values as float32 times s, in place (int32 and int64 replaced). The
 * product is the float one, as tl_dataset_idx's scale is. */
static tl_status scale_tensor(tl_tensor *t, float s)
{
    int64_t n = ds_tensor_count(t);
    if (t->dtype == TL_DT_FLOAT32) {
        float *v = t->data;
        for (int64_t i = 0; i < n; i++)
            v[i] *= s;
        return TL_OK;
    }
    float *f = tl_malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    if (f == NULL)
        return tl_error_oom();
    if (t->dtype == TL_DT_INT64)
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)((const int64_t *)t->data)[i] * s;
    else
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)((const int32_t *)t->data)[i] * s;
    tl_free(t->data);
    t->data = f;
    t->dtype = TL_DT_FLOAT32;
    return TL_OK;
}

/* The chosen tensors of e scaled in place. */
static tl_status scale_elem(const scale_impl *c, ds_elem *e)
{
    tl_status st = TL_OK;
    for (int k = 0; k < e->pub.num_tensors && st == TL_OK; k++) {
        tl_tensor *t = &e->pub.tensors[k];
        bool numeric = t->dtype == TL_DT_FLOAT32 || t->dtype == TL_DT_INT64 || t->dtype == TL_DT_INT32;
        bool chosen = c->keys != NULL ? listed(c->keys, c->nkeys, t->key) : !listed(c->skip, c->nskip, t->key);
        if (!chosen)
            continue;
        if (!numeric) {
            char where[256];
            ds_where(where, sizeof where, e);
            return tl_error(TL_EINVAL, "scale: tensor \"%s\" (%s) is not numeric, at %s", t->key,
                            tl_data_type_name(t->dtype), where);
        }
        st = scale_tensor(t, c->scale);
    }
    return st;
}

/* e scaled into *out, or freed on error. */
static tl_status scaled(const scale_impl *c, tl_status st, ds_elem *e, ds_elem **out)
{
    if (st == TL_OK && e != NULL && (st = scale_elem(c, e)) != TL_OK) {
        ds_elem_free(e);
        return st;
    }
    if (st == TL_OK)
        *out = e;
    return st;
}

static tl_status scale_next(tl_dataset *ds, ds_elem **out)
{
    ds_elem *e = NULL;
    tl_status st = ds_pull(ds->input, &e);
    return scaled(ds->impl, st, e, out);
}

/* Over random access the node passes positions on and scales the rows its
 * input's source makes (one by one, or a batch at once: the same floats). */
static tl_status scale_claim(tl_dataset *ds, int64_t *index)
{
    return ds->input->access->claim(ds->input, index);
}

static tl_status scale_fetch(tl_dataset *ds, int64_t index, ds_elem **out)
{
    tl_dataset *rows = ds->input->rows;
    ds_elem *e = NULL;
    tl_status st = rows->access->fetch(rows, index, &e);
    return scaled(ds->impl, st, e, out);
}

static tl_status scale_gather(tl_dataset *ds, const int64_t *index, int64_t n, ds_elem **out)
{
    tl_dataset *rows = ds->input->rows;
    ds_elem *e = NULL;
    tl_status st = rows->access->gather(rows, index, n, &e);
    return scaled(ds->impl, st, e, out);
}

static const ds_access scale_access = {scale_claim, scale_fetch, scale_gather};

static tl_status scale_reset(tl_dataset *ds, uint64_t epoch_key)
{
    return ds_reset(ds->input, epoch_key);
}

static void names_free(char **names, int n)
{
    for (int i = 0; names != NULL && i < n; i++)
        tl_free(names[i]);
    tl_free(names);
}

static void scale_destroy(tl_dataset *ds)
{
    scale_impl *c = ds->impl;
    if (c == NULL)
        return;
    names_free(c->keys, c->nkeys);
    names_free(c->skip, c->nskip);
    tl_free(c);
}

static const ds_ops scale_ops = {"scale", scale_next, scale_reset, NULL, NULL, NULL, NULL, scale_destroy};

static char **names_dup(const char *const *names, int n)
{
    char **out = tl_calloc((size_t)n + 1, sizeof *out);
    for (int i = 0; out != NULL && i < n; i++)
        if ((out[i] = tl_strdup(names[i])) == NULL) {
            names_free(out, i);
            return NULL;
        }
    return out;
}

tl_status tl_dataset_scale(tl_dataset *in, double scale, const char *const *keys, int num_keys,
                           const char *const *skip, int num_skip, tl_dataset **out)
{
    if (out == NULL) {
        tl_dataset_destroy(in);
        return tl_error(TL_EINVAL, "scale: out is NULL");
    }
    tl_status st = TL_OK;
    if (in == NULL)
        st = tl_error(TL_EINVAL, "scale: the input dataset is NULL");
    else if (!(scale > 0) || !((float)scale < 3.4e38f))
        st = tl_error(TL_EINVAL, "scale: the factor must be a finite number > 0 (got %g)", scale);
    else if (num_keys < 0 || num_skip < 0 || (num_keys > 0 && keys == NULL) || (num_skip > 0 && skip == NULL))
        st = tl_error(TL_EINVAL, "scale: %d keys and %d to skip, with keys %s and skip %s", num_keys, num_skip,
                      keys ? "set" : "NULL", skip ? "set" : "NULL");
    for (int i = 0; st == TL_OK && i < num_keys; i++)
        if (keys[i] == NULL)
            st = tl_error(TL_EINVAL, "scale: key %d is NULL", i);
    for (int i = 0; st == TL_OK && i < num_skip; i++)
        if (skip[i] == NULL)
            st = tl_error(TL_EINVAL, "scale: skip %d is NULL", i);
    scale_impl *c = NULL;
    char *desc = NULL;
    if (st == TL_OK) {
        c = tl_calloc(1, sizeof *c);
        desc = tl_asprintf("scale(%.9g)", scale);
        if (c != NULL) {
            c->scale = (float)scale;
            c->nkeys = num_keys;
            c->nskip = num_skip;
            c->keys = keys != NULL ? names_dup(keys, num_keys) : NULL;
            c->skip = names_dup(skip, num_skip);
        }
        if (c == NULL || desc == NULL || (keys != NULL && c->keys == NULL) || c->skip == NULL)
            st = tl_error_oom();
    }
    bool access = in != NULL && in->access != NULL && in->rows->access->gather != NULL;
    st = ds_finish(st, &scale_ops, c, desc, in, out);
    if (st != TL_OK) {
        scale_destroy(&(tl_dataset){.impl = c});
        return st;
    }
    if (access) { /* the nodes above index the scaled rows: this node's */
        (*out)->access = &scale_access;
        (*out)->rows = *out;
    }
    return TL_OK;
}

/* dataset_sources.c — the sources that are not TFRecord: file lists (glob),
 * examples in memory (tl_labeled_data, IDX files, tensor slices) and text
 * files (Criteo TSV, CSV) read one after another. */
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dataset_int.h"

/* ---- glob ------------------------------------------------------------------- */

void ds_names_free(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        tl_free(names[i]);
    tl_free(names);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

tl_status ds_glob(const char *const *patterns, int n, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    if (patterns == NULL || n < 1)
        return tl_error(TL_EINVAL, "file patterns: need at least one pattern (got %d)", n);
    char **list = NULL;
    size_t len = 0, cap = 0;
    tl_status st = TL_OK;
    for (int p = 0; p < n && st == TL_OK; p++) {
        if (patterns[p] == NULL) {
            st = tl_error(TL_EINVAL, "file patterns: pattern %d is NULL", p);
            break;
        }
        glob_t g;
        memset(&g, 0, sizeof g);
        int rc = glob(patterns[p], 0, NULL, &g);
        if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
            st = tl_error(TL_ENOTFOUND, "file pattern \"%s\" matches no file", patterns[p]);
        } else if (rc != 0) {
            st = rc == GLOB_NOSPACE ? tl_error_oom()
                                    : tl_error(TL_EIO, "file pattern \"%s\": glob failed (a directory could not "
                                                       "be read)",
                                               patterns[p]);
        } else {
            /* glob sorts in the locale's collation; strcmp order is the same
             * everywhere. */
            size_t first = len;
            for (size_t i = 0; i < g.gl_pathc && st == TL_OK; i++) {
                if (len == cap) {
                    size_t nc = cap ? cap * 2 : 16;
                    char **l2 = tl_realloc(list, nc * sizeof *l2);
                    if (l2 == NULL) {
                        st = tl_error_oom();
                        break;
                    }
                    list = l2;
                    cap = nc;
                }
                if ((list[len] = tl_strdup(g.gl_pathv[i])) == NULL)
                    st = tl_error_oom();
                else
                    len++;
            }
            if (st == TL_OK) /* list may still be NULL when its first allocation failed */
                qsort(list + first, len - first, sizeof *list, cmp_str);
        }
        globfree(&g);
    }
    if (st != TL_OK) {
        ds_names_free(list, len);
        return st;
    }
    *names = list;
    *count = len;
    return TL_OK;
}

/* ---- the file list ------------------------------------------------------------ */

typedef struct files_impl {
    char **names; /* (count) */
    size_t count;
    size_t pos;   /* the next name's index */
} files_impl;

static tl_status files_next(tl_dataset *ds, ds_elem **out)
{
    files_impl *f = ds->impl;
    if (f->pos >= f->count)
        return TL_OK;
    const char *key = ds_intern(ds->ctx, "filename");
    ds_elem *e = ds_elem_new(1);
    if (key == NULL || e == NULL) {
        ds_elem_free(e);
        return tl_error_oom();
    }
    tl_bytes b = {(const uint8_t *)f->names[f->pos], strlen(f->names[f->pos])};
    tl_status st = ds_tensor_set_bytes(&e->pub.tensors[0], key, 0, NULL, &b, 1);
    if (st != TL_OK) {
        ds_elem_free(e);
        return st;
    }
    e->record = (int64_t)f->pos++;
    *out = e;
    return TL_OK;
}

static tl_status files_reset(tl_dataset *ds, uint64_t epoch_key)
{
    (void)epoch_key;
    ((files_impl *)ds->impl)->pos = 0;
    return TL_OK;
}

/* The saved list must be this one: a position in another list of files
 * means nothing. */
static tl_status check_names(json_t *obj, const char *what, char **names, size_t count)
{
    json_t *arr = json_object_get(obj, "files");
    if (!json_is_array(arr))
        return tl_error(TL_EINVAL, "%s: the saved state lacks its file list", what);
    for (size_t i = 0; i < count || i < json_array_size(arr); i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (i >= count || s == NULL || i >= json_array_size(arr) || strcmp(s, names[i]) != 0)
            return tl_error(TL_EINVAL,
                            "%s: file %zu is \"%s\" here but \"%s\" in the saved state (%zu files here, %zu saved)",
                            what, i, i < count ? names[i] : "(none)", s != NULL ? s : "(none)", count,
                            json_array_size(arr));
    }
    return TL_OK;
}

static tl_status save_names(json_t *obj, char **names, size_t count)
{
    json_t *arr = json_array();
    if (arr == NULL || json_object_set_new(obj, "files", arr) != 0)
        return tl_error_oom();
    for (size_t i = 0; i < count; i++)
        if (json_array_append_new(arr, json_string(names[i])) != 0)
            return tl_error_oom();
    return TL_OK;
}

static tl_status files_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    (void)sv;
    files_impl *f = ds->impl;
    tl_status st = save_names(obj, f->names, f->count);
    if (st == TL_OK && json_object_set_new(obj, "pos", json_integer((json_int_t)f->pos)) != 0)
        st = tl_error_oom();
    return st;
}

static tl_status files_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    (void)ld;
    files_impl *f = ds->impl;
    int64_t pos;
    tl_status st = check_names(obj, "restore: file list", f->names, f->count);
    if (st == TL_OK)
        st = ds_json_int(obj, "pos", "restore: file list", &pos);
    if (st == TL_OK && (pos < 0 || (uint64_t)pos > f->count))
        st = tl_error(TL_EINVAL, "restore: file list: position %lld outside 0..%zu", (long long)pos, f->count);
    if (st == TL_OK)
        f->pos = (size_t)pos;
    return st;
}

static void files_destroy(tl_dataset *ds)
{
    files_impl *f = ds->impl;
    if (f != NULL)
        ds_names_free(f->names, f->count);
    tl_free(f);
}

static const ds_ops files_ops = {"files", files_next, files_reset, files_save, files_restore, NULL, NULL,
                                 files_destroy};

tl_status tl_dataset_from_files(const char *const *patterns, int n, tl_dataset **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_from_files: out is NULL");
    *out = NULL;
    files_impl *f = tl_calloc(1, sizeof *f);
    if (f == NULL)
        return tl_error_oom();
    tl_status st = ds_glob(patterns, n, &f->names, &f->count);
    char *desc = st == TL_OK ? tl_asprintf("files(%zu files)", f->count) : NULL;
    if (st == TL_OK && desc == NULL)
        st = tl_error_oom();
    if (st != TL_OK) {
        tl_free(desc);
        files_destroy(&(tl_dataset){.impl = f});
        return st;
    }
    tl_dataset *ds = ds_node_new(&files_ops, f, desc, NULL);
    if (ds == NULL) {
        files_destroy(&(tl_dataset){.impl = f});
        return tl_error_oom();
    }
    *out = ds;
    return TL_OK;
}

/* ---- examples in memory ---------------------------------------------------- */

typedef struct mem_impl {
    const float *features; /* (N, D) */
    const int32_t *labels; /* (N), NULL for none */
    int64_t n, d;
    int rank;
    int64_t shape[TL_TENSOR_MAX_RANK]; /* one example's, (rank) */
    float *own_features;   /* what the node frees (IDX) */
    int32_t *own_labels;
    int64_t pos;
} mem_impl;

/* Example i (0 <= i < n) as an element. */
static tl_status mem_fetch(tl_dataset *ds, int64_t i, ds_elem **out)
{
    mem_impl *m = ds->impl;
    if (i < 0 || i >= m->n) /* a restored shuffle's saved position */
        return tl_error(TL_EINVAL, "examples: position %lld outside 0..%lld", (long long)i, (long long)m->n - 1);
    const char *kf = ds_intern(ds->ctx, "features"), *kl = ds_intern(ds->ctx, "label");
    ds_elem *e = ds_elem_new(m->labels != NULL ? 2 : 1);
    tl_status st = kf != NULL && kl != NULL && e != NULL ? TL_OK : tl_error_oom();
    if (st == TL_OK)
        st = ds_tensor_alloc(&e->pub.tensors[0], kf, TL_DT_FLOAT32, m->rank, m->shape);
    if (st == TL_OK && m->labels != NULL)
        st = ds_tensor_alloc(&e->pub.tensors[1], kl, TL_DT_INT32, 0, NULL);
    if (st != TL_OK) {
        ds_elem_free(e);
        return st;
    }
    memcpy(e->pub.tensors[0].data, m->features + i * m->d, (size_t)m->d * sizeof(float));
    if (m->labels != NULL)
        *(int32_t *)e->pub.tensors[1].data = m->labels[i];
    e->record = i;
    *out = e;
    return TL_OK;
}

static tl_status mem_claim(tl_dataset *ds, int64_t *index)
{
    mem_impl *m = ds->impl;
    *index = m->pos < m->n ? m->pos++ : -1;
    return TL_OK;
}

static tl_status mem_next(tl_dataset *ds, ds_elem **out)
{
    int64_t i;
    (void)mem_claim(ds, &i);
    return i >= 0 ? mem_fetch(ds, i, out) : TL_OK;
}

/* Examples index[0..n) stacked: batch()'s element of them. */
static tl_status mem_gather(tl_dataset *ds, const int64_t *index, int64_t n, ds_elem **out)
{
    mem_impl *m = ds->impl;
    const char *kf = ds_intern(ds->ctx, "features"), *kl = ds_intern(ds->ctx, "label");
    ds_elem *e = ds_elem_new(m->labels != NULL ? 2 : 1);
    tl_status st = kf != NULL && kl != NULL && e != NULL ? TL_OK : tl_error_oom();
    int64_t shape[TL_TENSOR_MAX_RANK + 1] = {n};
    memcpy(shape + 1, m->shape, (size_t)m->rank * sizeof *shape);
    if (st == TL_OK)
        st = ds_tensor_alloc(&e->pub.tensors[0], kf, TL_DT_FLOAT32, m->rank + 1, shape);
    if (st == TL_OK && m->labels != NULL)
        st = ds_tensor_alloc(&e->pub.tensors[1], kl, TL_DT_INT32, 1, &n);
    for (int64_t r = 0; r < n && st == TL_OK; r++) {
        int64_t i = index[r];
        if (i < 0 || i >= m->n) {
            st = tl_error(TL_EINVAL, "examples: position %lld outside 0..%lld", (long long)i, (long long)m->n - 1);
            break;
        }
        memcpy((float *)e->pub.tensors[0].data + r * m->d, m->features + i * m->d, (size_t)m->d * sizeof(float));
        if (m->labels != NULL)
            ((int32_t *)e->pub.tensors[1].data)[r] = m->labels[i];
    }
    if (st != TL_OK) {
        ds_elem_free(e);
        return st;
    }
    e->record = index[0];
    *out = e;
    return TL_OK;
}

static const ds_access mem_access = {mem_claim, mem_fetch, mem_gather};

static tl_status mem_reset(tl_dataset *ds, uint64_t epoch_key)
{
    (void)epoch_key;
    ((mem_impl *)ds->impl)->pos = 0;
    return TL_OK;
}

/* The state of a source of n examples in memory read up to pos: both, so
 * that a position is never restored into a different number of examples. */
static tl_status pos_save(json_t *obj, int64_t pos, int64_t n)
{
    if (json_object_set_new(obj, "pos", json_integer(pos)) != 0 || json_object_set_new(obj, "n", json_integer(n)) != 0)
        return tl_error_oom();
    return TL_OK;
}

static tl_status pos_restore(json_t *obj, const char *what, int64_t n, int64_t *pos_out)
{
    int64_t pos, saved_n;
    tl_status st = ds_json_int(obj, "pos", what, &pos);
    if (st == TL_OK)
        st = ds_json_int(obj, "n", what, &saved_n);
    if (st != TL_OK)
        return st;
    if (saved_n != n)
        return tl_error(TL_EINVAL, "%s: the saved state has %lld examples, this dataset %lld", what,
                        (long long)saved_n, (long long)n);
    if (pos < 0 || pos > n)
        return tl_error(TL_EINVAL, "%s: position %lld outside 0..%lld", what, (long long)pos, (long long)n);
    *pos_out = pos;
    return TL_OK;
}

static tl_status mem_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    (void)sv;
    mem_impl *m = ds->impl;
    return pos_save(obj, m->pos, m->n);
}

static tl_status mem_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    (void)ld;
    mem_impl *m = ds->impl;
    return pos_restore(obj, "restore: examples", m->n, &m->pos);
}

static void mem_destroy(tl_dataset *ds)
{
    mem_impl *m = ds->impl;
    if (m != NULL) {
        tl_free(m->own_features);
        tl_free(m->own_labels);
    }
    tl_free(m);
}

static const ds_ops mem_ops = {"examples", mem_next, mem_reset, mem_save, mem_restore, NULL, NULL, mem_destroy};

static tl_status mem_finish(mem_impl *m, const char *what, tl_dataset **out)
{
    char shape[128];
    ds_format_shape(shape, sizeof shape, m->shape, m->rank);
    char *desc = tl_asprintf("%s(%lld examples, features %s%s)", what, (long long)m->n, shape,
                             m->labels != NULL ? ", label" : "");
    /* ds_node_new frees desc when it fails. */
    tl_dataset *ds = desc != NULL ? ds_node_new(&mem_ops, m, desc, NULL) : NULL;
    if (ds == NULL) {
        mem_destroy(&(tl_dataset){.impl = m});
        return tl_error_oom();
    }
    ds->access = &mem_access;
    ds->rows = ds;
    *out = ds;
    return TL_OK;
}

tl_status tl_dataset_labeled(const tl_labeled_data *d, tl_dataset **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_labeled: out is NULL");
    *out = NULL;
    if (d == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_labeled: data is NULL");
    if (d->num_examples < 0 || d->num_features < 0 || (d->num_examples > 0 && (!d->features || !d->labels)))
        return tl_error(TL_EINVAL, "tl_dataset_labeled: num_examples %lld, num_features %lld with %s arrays",
                        (long long)d->num_examples, (long long)d->num_features,
                        d->features && d->labels ? "both" : "missing");
    mem_impl *m = tl_calloc(1, sizeof *m);
    if (m == NULL)
        return tl_error_oom();
    m->features = d->features;
    m->labels = d->labels;
    m->n = d->num_examples;
    m->d = d->num_features;
    m->rank = 1;
    m->shape[0] = d->num_features;
    return mem_finish(m, "labeled", out);
}

/* ---- tensor slices in memory ------------------------------------------------ */

/* One column: its element's dtype and shape (the column's without its first
 * dimension) and its rows, borrowed from the caller. */
typedef struct slice_col {
    const char *key;                   /* interned in the pipeline's context */
    tl_data_type dtype;
    int rank;                          /* the column's rank - 1 */
    int64_t shape[TL_TENSOR_MAX_RANK]; /* an element's, (rank) */
    const uint8_t *data;               /* (n, shape...), borrowed */
    size_t row_bytes;                  /* one element's */
} slice_col;

typedef struct slices_impl {
    slice_col *cols; /* (ncols) */
    int ncols;
    int64_t n;       /* rows: every column's shape[0] */
    int64_t pos;     /* the next row */
} slices_impl;

/* Row i (0 <= i < n) as an element. */
static tl_status slices_fetch(tl_dataset *ds, int64_t i, ds_elem **out)
{
    slices_impl *s = ds->impl;
    if (i < 0 || i >= s->n) /* a restored shuffle's saved position */
        return tl_error(TL_EINVAL, "tensor_slices: row %lld outside 0..%lld", (long long)i, (long long)s->n - 1);
    ds_elem *e = ds_elem_new(s->ncols);
    tl_status st = e != NULL ? TL_OK : tl_error_oom();
    for (int c = 0; c < s->ncols && st == TL_OK; c++) {
        const slice_col *col = &s->cols[c];
        st = ds_tensor_alloc(&e->pub.tensors[c], col->key, col->dtype, col->rank, col->shape);
        if (st == TL_OK && col->row_bytes > 0)
            memcpy(e->pub.tensors[c].data, col->data + (size_t)i * col->row_bytes, col->row_bytes);
    }
    if (st != TL_OK) {
        ds_elem_free(e);
        return st;
    }
    e->record = i;
    *out = e;
    return TL_OK;
}

static tl_status slices_claim(tl_dataset *ds, int64_t *index)
{
    slices_impl *s = ds->impl;
    *index = s->pos < s->n ? s->pos++ : -1;
    return TL_OK;
}

static tl_status slices_next(tl_dataset *ds, ds_elem **out)
{
    int64_t i;
    (void)slices_claim(ds, &i);
    return i >= 0 ? slices_fetch(ds, i, out) : TL_OK;
}

/* Rows index[0..n) stacked column by column: batch()'s element of them. */
static tl_status slices_gather(tl_dataset *ds, const int64_t *index, int64_t n, ds_elem **out)
{
    slices_impl *s = ds->impl;
    for (int64_t r = 0; r < n; r++)
        if (index[r] < 0 || index[r] >= s->n)
            return tl_error(TL_EINVAL, "tensor_slices: row %lld outside 0..%lld", (long long)index[r],
                            (long long)s->n - 1);
    ds_elem *e = ds_elem_new(s->ncols);
    tl_status st = e != NULL ? TL_OK : tl_error_oom();
    for (int c = 0; c < s->ncols && st == TL_OK; c++) {
        const slice_col *col = &s->cols[c];
        int64_t shape[TL_TENSOR_MAX_RANK + 1] = {n};
        memcpy(shape + 1, col->shape, (size_t)col->rank * sizeof *shape);
        if (col->rank + 1 > TL_TENSOR_MAX_RANK)
            st = tl_error(TL_EINVAL, "batch: \"%s\" already has rank %d; a batch of it would exceed %d", col->key,
                          col->rank, TL_TENSOR_MAX_RANK);
        else
            st = ds_tensor_alloc(&e->pub.tensors[c], col->key, col->dtype, col->rank + 1, shape);
        uint8_t *dst = st == TL_OK ? e->pub.tensors[c].data : NULL;
        for (int64_t r = 0; st == TL_OK && col->row_bytes > 0 && r < n; r++)
            memcpy(dst + (size_t)r * col->row_bytes, col->data + (size_t)index[r] * col->row_bytes, col->row_bytes);
    }
    if (st != TL_OK) {
        ds_elem_free(e);
        return st;
    }
    e->record = index[0];
    *out = e;
    return TL_OK;
}

static const ds_access slices_access = {slices_claim, slices_fetch, slices_gather};

static tl_status slices_reset(tl_dataset *ds, uint64_t epoch_key)
{
    (void)epoch_key;
    ((slices_impl *)ds->impl)->pos = 0;
    return TL_OK;
}

static tl_status slices_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    (void)sv;
    slices_impl *s = ds->impl;
    return pos_save(obj, s->pos, s->n);
}

static tl_status slices_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    (void)ld;
    slices_impl *s = ds->impl;
    return pos_restore(obj, "restore: tensor_slices", s->n, &s->pos);
}

static void slices_destroy(tl_dataset *ds)
{
    slices_impl *s = ds->impl;
    if (s != NULL)
        tl_free(s->cols);
    tl_free(s);
}

static const ds_ops slices_ops = {"tensor_slices", slices_next, slices_reset, slices_save, slices_restore, NULL,
                                  NULL, slices_destroy};

#define SLICES_WHAT "tl_dataset_from_tensor_slices"

/* Checks column c of columns (the ones before it already checked) and fills
 * col from it. */
static tl_status slices_column(const tl_tensor *columns, int c, slice_col *col)
{
    const tl_tensor *t = &columns[c];
    if (t->key == NULL || t->key[0] == '\0')
        return tl_error(TL_EINVAL, SLICES_WHAT ": columns[%d].key is %s; every column needs a non-empty key", c,
                        t->key == NULL ? "NULL" : "empty");
    for (int p = 0; p < c; p++)
        if (strcmp(columns[p].key, t->key) == 0)
            return tl_error(TL_EINVAL, SLICES_WHAT ": columns[%d].key \"%s\" is also columns[%d].key; keys must be "
                                       "distinct",
                            c, t->key, p);
    if (t->dtype == TL_DT_BYTES)
        return tl_error(TL_ENOTIMPL, SLICES_WHAT ": column \"%s\": dtype bytes is not supported; float32, int32 or "
                                     "int64",
                        t->key);
    if (t->dtype != TL_DT_FLOAT32 && t->dtype != TL_DT_INT32 && t->dtype != TL_DT_INT64)
        return tl_error(TL_EINVAL, SLICES_WHAT ": column \"%s\": dtype %d is not a tl_data_type; float32, int32 or "
                                   "int64",
                        t->key, (int)t->dtype);
    if (t->ragged)
        return tl_error(TL_EINVAL, SLICES_WHAT ": column \"%s\" is ragged; only dense columns are allowed", t->key);
    if (t->rank < 1 || t->rank > TL_TENSOR_MAX_RANK)
        return tl_error(TL_EINVAL, SLICES_WHAT ": column \"%s\": rank %d outside 1..%d (shape[0] is the number of "
                                   "examples)",
                        t->key, t->rank, TL_TENSOR_MAX_RANK);
    /* The values must fit a size_t count of bytes: a column bigger than
     * memory can only be a wrong shape. */
    int64_t count = 1, limit = INT64_MAX / 8;
    for (int i = 0; i < t->rank; i++) {
        if (t->shape[i] < 0)
            return tl_error(TL_EINVAL, SLICES_WHAT ": column \"%s\": shape[%d] is %lld; dimensions must be >= 0",
                            t->key, i, (long long)t->shape[i]);
        if (t->shape[i] > 0 && count > limit / t->shape[i]) {
            char shape[160];
            ds_format_shape(shape, sizeof shape, t->shape, t->rank);
            return tl_error(TL_EINVAL, SLICES_WHAT ": column \"%s\": shape %s holds more than %lld values", t->key,
                            shape, (long long)limit);
        }
        count *= t->shape[i];
    }
    if (t->data == NULL && count > 0)
        return tl_error(TL_EINVAL, SLICES_WHAT ": column \"%s\": data is NULL for %lld values", t->key,
                        (long long)count);
    if (c > 0 && t->shape[0] != columns[0].shape[0])
        return tl_error(TL_EINVAL, SLICES_WHAT ": column \"%s\" has %lld examples (shape[0]) but column \"%s\" has "
                                   "%lld; every column needs the same shape[0]",
                        t->key, (long long)t->shape[0], columns[0].key, (long long)columns[0].shape[0]);
    col->dtype = t->dtype;
    col->rank = t->rank - 1;
    int64_t per_row = 1;
    for (int i = 1; i < t->rank; i++) {
        col->shape[i - 1] = t->shape[i];
        per_row *= t->shape[i];
    }
    col->row_bytes = (size_t)per_row * ds_dtype_size(t->dtype);
    col->data = t->data;
    return TL_OK;
}

tl_status tl_dataset_from_tensor_slices(const tl_tensor *columns, int n, tl_dataset **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, SLICES_WHAT ": out is NULL");
    *out = NULL;
    if (n < 1)
        return tl_error(TL_EINVAL, SLICES_WHAT ": n is %d; at least one column is needed", n);
    if (columns == NULL)
        return tl_error(TL_EINVAL, SLICES_WHAT ": columns is NULL (n %d)", n);
    slices_impl *s = tl_calloc(1, sizeof *s);
    if (s == NULL || (s->cols = tl_calloc((size_t)n, sizeof *s->cols)) == NULL) {
        tl_free(s);
        return tl_error_oom();
    }
    s->ncols = n;
    s->n = columns[0].shape[0];
    tl_status st = TL_OK;
    for (int c = 0; c < n && st == TL_OK; c++)
        st = slices_column(columns, c, &s->cols[c]);
    tl_strbuf sb = {0};
    if (st == TL_OK) {
        tl_strbuf_appendf(&sb, "tensor_slices(%lld examples:", (long long)s->n);
        for (int c = 0; c < n; c++) {
            char shape[160];
            ds_format_shape(shape, sizeof shape, s->cols[c].shape, s->cols[c].rank);
            tl_strbuf_appendf(&sb, "%s %s %s %s", c ? "," : "", columns[c].key, shape,
                              tl_data_type_name(s->cols[c].dtype));
        }
        tl_strbuf_append(&sb, ")");
    }
    char *desc = st == TL_OK ? tl_strbuf_take(&sb) : NULL;
    tl_strbuf_free(&sb);
    if (st != TL_OK || desc == NULL) {
        slices_destroy(&(tl_dataset){.impl = s});
        return st != TL_OK ? st : tl_error_oom();
    }
    tl_dataset *ds = ds_node_new(&slices_ops, s, desc, NULL); /* which frees desc when it fails */
    if (ds == NULL) {
        slices_destroy(&(tl_dataset){.impl = s});
        return tl_error_oom();
    }
    ds->access = &slices_access;
    ds->rows = ds;
    /* Interned once: the elements point at the context's copies. */
    for (int c = 0; c < n; c++)
        if ((s->cols[c].key = ds_intern(ds->ctx, columns[c].key)) == NULL) {
            tl_dataset_destroy(ds);
            return tl_error_oom();
        }
    *out = ds;
    return TL_OK;
}

/* The value of element i of an IDX array as a double. */
static double idx_value(const tl_idx *a, int64_t i)
{
    const void *p = tl_idx_data(a);
    switch (tl_idx_type(a)) {
    case TL_IDX_U8: return ((const uint8_t *)p)[i];
    case TL_IDX_I8: return ((const int8_t *)p)[i];
    case TL_IDX_I16: return ((const int16_t *)p)[i];
    case TL_IDX_I32: return ((const int32_t *)p)[i];
    case TL_IDX_F32: return ((const float *)p)[i];
    case TL_IDX_F64: return ((const double *)p)[i];
    }
    return 0;
}

tl_status tl_dataset_idx(const char *images, const char *labels, float scale, tl_dataset **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_idx: out is NULL");
    *out = NULL;
    if (images == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_idx: images is NULL");
    if (!isfinite(scale))
        return tl_error(TL_EINVAL, "tl_dataset_idx: scale must be finite (got %g)", (double)scale);
    tl_idx *xi = NULL, *yi = NULL;
    mem_impl *m = NULL;
    tl_status st = tl_idx_read_file(images, NULL, &xi);
    if (st == TL_OK && labels != NULL)
        st = tl_idx_read_file(labels, NULL, &yi);
    if (st != TL_OK)
        goto fail;
    int64_t n = tl_idx_dim(xi, 0);
    if (tl_idx_ndim(xi) - 1 > TL_TENSOR_MAX_RANK) {
        st = tl_error(TL_EPARSE, "%s: %d dimensions per example; at most %d", images, tl_idx_ndim(xi) - 1,
                      TL_TENSOR_MAX_RANK);
        goto fail;
    }
    if (yi != NULL) {
        tl_idx_dtype t = tl_idx_type(yi);
        if (tl_idx_ndim(yi) != 1 || t == TL_IDX_F32 || t == TL_IDX_F64) {
            st = tl_error(TL_EPARSE, "%s: labels must be one integer per example (rank 1 of u8, i8, i16 or i32); "
                                     "got rank %d of %s",
                          labels, tl_idx_ndim(yi), tl_idx_dtype_name(t));
            goto fail;
        }
        if (tl_idx_dim(yi, 0) != n) {
            st = tl_error(TL_EPARSE, "%s has %lld labels but %s has %lld images", labels,
                          (long long)tl_idx_dim(yi, 0), images, (long long)n);
            goto fail;
        }
    }
    m = tl_calloc(1, sizeof *m);
    if (m == NULL) {
        st = tl_error_oom();
        goto fail;
    }
    m->n = n;
    m->rank = tl_idx_ndim(xi) - 1;
    m->d = 1;
    for (int i = 0; i < m->rank; i++) {
        m->shape[i] = tl_idx_dim(xi, i + 1);
        m->d *= m->shape[i];
    }
    m->own_features = tl_alloc_array((size_t)(n * m->d) + 1, sizeof(float));
    m->own_labels = yi != NULL ? tl_alloc_array((size_t)n + 1, sizeof(int32_t)) : NULL;
    if (m->own_features == NULL || (yi != NULL && m->own_labels == NULL)) {
        st = tl_error_oom();
        goto fail;
    }
    for (int64_t i = 0; i < n * m->d; i++)
        m->own_features[i] = (float)idx_value(xi, i) * scale;
    for (int64_t i = 0; yi != NULL && i < n; i++)
        m->own_labels[i] = (int32_t)idx_value(yi, i);
    m->features = m->own_features;
    m->labels = m->own_labels;
    tl_idx_destroy(xi);
    tl_idx_destroy(yi);
    return mem_finish(m, "idx", out);
fail:
    if (m != NULL)
        mem_destroy(&(tl_dataset){.impl = m});
    tl_idx_destroy(xi);
    tl_idx_destroy(yi);
    return st;
}

/* ---- text files: Criteo TSV and CSV ---------------------------------------- */

typedef struct text_impl {
    bool csv;
    char **names; /* (count) */
    size_t count;
    tl_criteo_options criteo;
    tl_csv_options csvo;          /* columns and label point into the copies below */
    tl_csv_column *columns;       /* (num_columns) */
    char *label;
    size_t file;                  /* the file being read (count: done) */
    int64_t record;               /* records read from it */
    tl_criteo_reader *cr;
    tl_csv_reader *cv;
    /* Criteo's keys, interned once: "label", "dense", "C1".."C26". */
    const char *ckeys[2 + TL_CRITEO_NUM_CAT];
} text_impl;

static void text_close(text_impl *t)
{
    tl_criteo_reader_destroy(t->cr);
    tl_csv_reader_destroy(t->cv);
    t->cr = NULL;
    t->cv = NULL;
}

static tl_status text_open(text_impl *t)
{
    if (t->csv)
        return tl_csv_reader_create_file(t->names[t->file], &t->csvo, &t->cv);
    return tl_criteo_reader_create_file(t->names[t->file], &t->criteo, &t->cr);
}

/* One record as {"label", "dense" (13), "C1".."C26"}: each categorical
 * column its own int64 scalar, named as Criteo names it, so a column's ids
 * reach the embedding feature of that name typed and by name. */
static tl_status criteo_elem(tl_dataset *ds, text_impl *t, const tl_criteo_example *x, ds_elem **out)
{
    int64_t nd = TL_CRITEO_NUM_DENSE;
    int nk = 2 + TL_CRITEO_NUM_CAT;
    for (int k = 0; k < nk && t->ckeys[nk - 1] == NULL; k++) {
        char name[24];
        snprintf(name, sizeof name, "C%d", k - 1);
        if ((t->ckeys[k] = ds_intern(ds->ctx, k == 0 ? "label" : k == 1 ? "dense" : name)) == NULL)
            return tl_error_oom();
    }
    ds_elem *e = ds_elem_new(nk);
    tl_status st = e != NULL ? TL_OK : tl_error_oom();
    if (st == TL_OK)
        st = ds_tensor_alloc(&e->pub.tensors[0], t->ckeys[0], TL_DT_INT32, 0, NULL);
    if (st == TL_OK)
        st = ds_tensor_alloc(&e->pub.tensors[1], t->ckeys[1], TL_DT_FLOAT32, 1, &nd);
    for (int c = 0; c < TL_CRITEO_NUM_CAT && st == TL_OK; c++)
        if ((st = ds_tensor_alloc(&e->pub.tensors[2 + c], t->ckeys[2 + c], TL_DT_INT64, 0, NULL)) == TL_OK)
            *(int64_t *)e->pub.tensors[2 + c].data = x->ids[c];
    if (st != TL_OK) {
        ds_elem_free(e);
        return st;
    }
    *(int32_t *)e->pub.tensors[0].data = x->label;
    memcpy(e->pub.tensors[1].data, x->dense, sizeof x->dense);
    *out = e;
    return TL_OK;
}

static tl_status csv_elem(tl_dataset *ds, const text_impl *t, ds_elem **out)
{
    ds_elem *e = ds_elem_new(t->csvo.num_columns);
    if (e == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    for (int c = 0; c < t->csvo.num_columns && st == TL_OK; c++) {
        tl_tensor *x = &e->pub.tensors[c];
        const char *key = ds_intern(ds->ctx, t->columns[c].name);
        if (key == NULL) {
            st = tl_error_oom();
        } else if (t->columns[c].type == TL_CSV_STRING) {
            size_t len;
            const char *s = tl_csv_reader_string(t->cv, c, &len);
            tl_bytes b = {(const uint8_t *)s, len};
            st = ds_tensor_set_bytes(x, key, 0, NULL, &b, 1);
        } else if (t->columns[c].type == TL_CSV_FLOAT32) {
            if ((st = ds_tensor_alloc(x, key, TL_DT_FLOAT32, 0, NULL)) == TL_OK)
                *(float *)x->data = tl_csv_reader_float(t->cv, c);
        } else if ((st = ds_tensor_alloc(x, key, TL_DT_INT64, 0, NULL)) == TL_OK) {
            *(int64_t *)x->data = tl_csv_reader_int64(t->cv, c);
        }
    }
    if (st != TL_OK) {
        ds_elem_free(e);
        return st;
    }
    *out = e;
    return TL_OK;
}

/* Reads the next record of the open file into *out (NULL at its end). */
static tl_status text_read(tl_dataset *ds, text_impl *t, ds_elem **out)
{
    bool got = false;
    tl_status st;
    if (t->csv) {
        st = tl_csv_reader_next(t->cv, &got);
        if (st == TL_OK && got)
            st = csv_elem(ds, t, out);
    } else {
        tl_criteo_example x;
        st = tl_criteo_reader_next(t->cr, &x, &got);
        if (st == TL_OK && got)
            st = criteo_elem(ds, t, &x, out);
    }
    if (st == TL_OK && got) {
        /* Counted even when it fails: the reader has read the record. */
        (*out)->record = t->record++;
        if (((*out)->file = ds_intern(ds->ctx, t->names[t->file])) == NULL) {
            ds_elem_free(*out);
            *out = NULL;
            st = tl_error_oom();
        }
    }
    return st;
}

static tl_status text_next(tl_dataset *ds, ds_elem **out)
{
    text_impl *t = ds->impl;
    while (t->file < t->count) {
        if (t->cr == NULL && t->cv == NULL) {
            tl_status st = text_open(t);
            if (st != TL_OK)
                return st;
            t->record = 0;
        }
        tl_status st = text_read(ds, t, out);
        if (st != TL_OK || *out != NULL)
            return st;
        text_close(t);
        t->file++;
    }
    return TL_OK;
}

static tl_status text_reset(tl_dataset *ds, uint64_t epoch_key)
{
    (void)epoch_key;
    text_impl *t = ds->impl;
    text_close(t);
    t->file = 0;
    t->record = 0;
    return TL_OK;
}

static tl_status text_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    (void)sv;
    text_impl *t = ds->impl;
    tl_status st = save_names(obj, t->names, t->count);
    if (st == TL_OK && (json_object_set_new(obj, "file", json_integer((json_int_t)t->file)) != 0 ||
                        json_object_set_new(obj, "record", json_integer(t->record)) != 0))
        st = tl_error_oom();
    return st;
}

/* Text readers cannot seek: the file is read again up to the record. */
static tl_status text_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    (void)ld;
    text_impl *t = ds->impl;
    int64_t file, record;
    tl_status st = check_names(obj, "restore: text files", t->names, t->count);
    if (st == TL_OK)
        st = ds_json_int(obj, "file", "restore: text files", &file);
    if (st == TL_OK)
        st = ds_json_int(obj, "record", "restore: text files", &record);
    if (st != TL_OK)
        return st;
    if (file < 0 || (uint64_t)file > t->count || record < 0)
        return tl_error(TL_EINVAL, "restore: text files: file %lld record %lld out of range", (long long)file,
                        (long long)record);
    text_close(t);
    t->file = (size_t)file;
    t->record = 0;
    if (t->file == t->count || record == 0)
        return TL_OK;
    if ((st = text_open(t)) != TL_OK)
        return st;
    while (t->record < record) {
        ds_elem *e = NULL;
        if ((st = text_read(ds, t, &e)) != TL_OK)
            return st;
        if (e == NULL)
            return tl_error(TL_EINVAL, "restore: %s has %lld records, fewer than the %lld read before the save",
                            t->names[t->file], (long long)t->record, (long long)record);
        ds_elem_free(e);
    }
    return TL_OK;
}

static void text_destroy(tl_dataset *ds)
{
    text_impl *t = ds->impl;
    if (t == NULL)
        return;
    text_close(t);
    ds_names_free(t->names, t->count);
    for (int c = 0; t->columns != NULL && c < t->csvo.num_columns; c++)
        tl_free((char *)t->columns[c].name);
    tl_free(t->columns);
    tl_free(t->label);
    tl_free(t);
}

static const ds_ops text_ops = {"text", text_next, text_reset, text_save, text_restore, NULL, NULL, text_destroy};

static tl_status text_finish(text_impl *t, const char *const *patterns, int n, tl_dataset **out)
{
    tl_status st = ds_glob(patterns, n, &t->names, &t->count);
    char *desc = NULL;
    if (st == TL_OK) {
        desc = tl_asprintf("%s(%zu files)", t->csv ? "csv" : "criteo", t->count);
        if (desc == NULL)
            st = tl_error_oom();
    }
    /* Options are checked by opening the first file now, so that a bad option
     * fails at construction, as the header promises. */
    if (st == TL_OK && (st = text_open(t)) == TL_OK)
        text_close(t);
    tl_dataset *ds = NULL;
    if (st == TL_OK) {
        ds = ds_node_new(&text_ops, t, desc, NULL); /* which frees desc when it fails */
        desc = NULL;
        if (ds == NULL)
            st = tl_error_oom();
    }
    if (st != TL_OK) {
        tl_free(desc);
        text_destroy(&(tl_dataset){.impl = t});
        return st;
    }
    *out = ds;
    return TL_OK;
}

tl_status tl_dataset_criteo(const char *const *patterns, int n, const tl_criteo_options *o, tl_dataset **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_criteo: out is NULL");
    *out = NULL;
    text_impl *t = tl_calloc(1, sizeof *t);
    if (t == NULL)
        return tl_error_oom();
    if (o != NULL)
        t->criteo = *o;
    else
        tl_criteo_options_init(&t->criteo);
    return text_finish(t, patterns, n, out);
}

tl_status tl_dataset_csv(const char *const *patterns, int n, const tl_csv_options *o, tl_dataset **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_csv: out is NULL");
    *out = NULL;
    if (o == NULL || o->columns == NULL || o->num_columns < 1 || o->num_columns > TL_CSV_MAX_COLUMNS)
        return tl_error(TL_EINVAL, "tl_dataset_csv: options with 1..%d columns are required (got %d)",
                        TL_CSV_MAX_COLUMNS, o != NULL ? o->num_columns : 0);
    text_impl *t = tl_calloc(1, sizeof *t);
    if (t == NULL)
        return tl_error_oom();
    t->csv = true;
    t->csvo = *o;
    t->columns = tl_calloc((size_t)o->num_columns, sizeof *t->columns);
    tl_status st = t->columns != NULL ? TL_OK : tl_error_oom();
    for (int c = 0; c < o->num_columns && st == TL_OK; c++) {
        t->columns[c].type = o->columns[c].type;
        if (o->columns[c].name == NULL)
            st = tl_error(TL_EINVAL, "tl_dataset_csv: column %d has no name", c);
        else if ((t->columns[c].name = tl_strdup(o->columns[c].name)) == NULL)
            st = tl_error_oom();
    }
    if (st == TL_OK && o->label_column != NULL && (t->label = tl_strdup(o->label_column)) == NULL)
        st = tl_error_oom();
    if (st != TL_OK) {
        t->csvo.num_columns = t->columns != NULL ? o->num_columns : 0;
        text_destroy(&(tl_dataset){.impl = t});
        return st;
    }
    t->csvo.columns = t->columns;
    t->csvo.label_column = t->label;
    return text_finish(t, patterns, n, out);
}

/* example.c — tf.train.Example / SequenceExample records (tpuloop/example.h):
 * decoding with protobuf-c (proto/tpuloop/example.proto) into a sorted,
 * read-only view. The feature specs that read the view are in
 * example_spec.c. */
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "../base/base_int.h"
#include "example_int.h"
#include "tpuloop/example.pb-c.h"

/* protobuf-c allocates through tpuloop's hook, so allocation-failure tests
 * reach the decoder too. protobuf-c returns NULL both for malformed bytes and
 * for out of memory; the flag tells the two apart. */
static void *pb_alloc(void *ud, size_t n)
{
    void *p = tl_malloc(n > 0 ? n : 1);
    if (p == NULL)
        *(bool *)ud = true;
    return p;
}

static void pb_free(void *ud, void *p)
{
    (void)ud;
    tl_free(p);
}

const char *tl_feature_kind_name(tl_feature_kind kind)
{
    switch (kind) {
    case TL_FEATURE_NONE:
        return "none";
    case TL_FEATURE_BYTES:
        return "bytes_list";
    case TL_FEATURE_FLOAT:
        return "float_list";
    case TL_FEATURE_INT64:
        return "int64_list";
    }
    return "?";
}

/* A map entry while the view is built: its key, its value and where it stood
 * on the wire, so that sorting keeps the last of equal keys last. */
typedef struct entry {
    const char *key;
    const void *value; /* Tpuloop__Feature or Tpuloop__FeatureList; may be NULL */
    size_t pos;
} entry;

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c != 0)
        return c;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Sorts e[0..n) by key and keeps the last entry of each key (protobuf's map
 * semantics); returns how many remain. */
static size_t sort_unique(entry *e, size_t n)
{
    if (n == 0)
        return 0;
    qsort(e, n, sizeof *e, entry_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && strcmp(e[i].key, e[i + 1].key) == 0)
            continue;
        e[m++] = e[i];
    }
    return m;
}

static size_t bytes_count(const Tpuloop__Feature *f)
{
    if (f != NULL && f->kind_case == TPULOOP__FEATURE__KIND_BYTES_LIST && f->bytes_list != NULL)
        return f->bytes_list->n_value;
    return 0;
}

/* Fills dst from f, taking bytes slots from *slab. */
static void fill_feature(tl_feature *dst, const char *key, const Tpuloop__Feature *f, tl_bytes **slab)
{
    *dst = (tl_feature){.key = key, .kind = TL_FEATURE_NONE};
    if (f == NULL)
        return;
    switch (f->kind_case) {
    case TPULOOP__FEATURE__KIND_BYTES_LIST:
        dst->kind = TL_FEATURE_BYTES;
        if (f->bytes_list != NULL && f->bytes_list->n_value > 0) {
            dst->count = f->bytes_list->n_value;
            dst->bytes = *slab;
            for (size_t i = 0; i < dst->count; i++) {
                const ProtobufCBinaryData *b = &f->bytes_list->value[i];
                /* An empty value may come back with a NULL pointer. */
                (*slab)[i] = (tl_bytes){b->data != NULL ? b->data : (const uint8_t *)"", b->len};
            }
            *slab += dst->count;
        }
        break;
    case TPULOOP__FEATURE__KIND_FLOAT_LIST:
        dst->kind = TL_FEATURE_FLOAT;
        if (f->float_list != NULL && f->float_list->n_value > 0) {
            dst->count = f->float_list->n_value;
            dst->floats = f->float_list->value;
        }
        break;
    case TPULOOP__FEATURE__KIND_INT64_LIST:
        dst->kind = TL_FEATURE_INT64;
        if (f->int64_list != NULL && f->int64_list->n_value > 0) {
            dst->count = f->int64_list->n_value;
            dst->int64s = f->int64_list->value;
        }
        break;
    default:
        break;
    }
}

/* Collects the entries of a Features map (m may be NULL) into *out. */
static tl_status collect_features(const Tpuloop__Features *m, entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (m == NULL || m->n_feature == 0)
        return TL_OK;
    entry *e = tl_alloc_array(m->n_feature, sizeof *e);
    if (e == NULL)
        return tl_error_oom();
    for (size_t i = 0; i < m->n_feature; i++)
        e[i] = (entry){m->feature[i]->key, m->feature[i]->value, i};
    *out = e;
    *n = sort_unique(e, m->n_feature);
    return TL_OK;
}

static tl_status collect_lists(const Tpuloop__FeatureLists *m, entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (m == NULL || m->n_feature_list == 0)
        return TL_OK;
    entry *e = tl_alloc_array(m->n_feature_list, sizeof *e);
    if (e == NULL)
        return tl_error_oom();
    for (size_t i = 0; i < m->n_feature_list; i++)
        e[i] = (entry){m->feature_list[i]->key, m->feature_list[i]->value, i};
    *out = e;
    *n = sort_unique(e, m->n_feature_list);
    return TL_OK;
}

/* Builds ex's view from the decoded features and feature lists. */
static tl_status build_view(tl_example *ex, const Tpuloop__Features *feats, const Tpuloop__FeatureLists *lists)
{
    entry *fe = NULL, *le = NULL;
    size_t nf, nl;
    tl_status st = collect_features(feats, &fe, &nf);
    if (st == TL_OK)
        st = collect_lists(lists, &le, &nl);
    if (st != TL_OK) {
        tl_free(fe);
        return st;
    }
    /* Counts fit in size_t: each value took at least one byte of the input. */
    size_t nbytes = 0, nsteps = 0;
    for (size_t i = 0; i < nf; i++)
        nbytes += bytes_count(fe[i].value);
    for (size_t i = 0; i < nl; i++) {
        const Tpuloop__FeatureList *fl = le[i].value;
        if (fl == NULL)
            continue;
        nsteps += fl->n_feature;
        for (size_t j = 0; j < fl->n_feature; j++)
            nbytes += bytes_count(fl->feature[j]);
    }
    if (nf > 0)
        ex->features = tl_alloc_array(nf, sizeof *ex->features);
    if (nl > 0)
        ex->lists = tl_alloc_array(nl, sizeof *ex->lists);
    if (nsteps > 0)
        ex->steps = tl_alloc_array(nsteps, sizeof *ex->steps);
    if (nbytes > 0)
        ex->bytes = tl_alloc_array(nbytes, sizeof *ex->bytes);
    if ((nf > 0 && ex->features == NULL) || (nl > 0 && ex->lists == NULL) ||
        (nsteps > 0 && ex->steps == NULL) || (nbytes > 0 && ex->bytes == NULL)) {
        tl_free(fe);
        tl_free(le);
        return tl_error_oom();
    }
    tl_bytes *slab = ex->bytes;
    for (size_t i = 0; i < nf; i++)
        fill_feature(&ex->features[i], fe[i].key, fe[i].value, &slab);
    tl_feature *step = ex->steps;
    for (size_t i = 0; i < nl; i++) {
        const Tpuloop__FeatureList *fl = le[i].value;
        size_t k = fl != NULL ? fl->n_feature : 0;
        ex->lists[i] = (tl_feature_list){le[i].key, k, k > 0 ? step : NULL};
        for (size_t j = 0; j < k; j++)
            fill_feature(step++, NULL, fl->feature[j], &slab);
    }
    TL_ASSERT(nbytes == 0 ? slab == NULL : slab == ex->bytes + nbytes);
    TL_ASSERT(nsteps == 0 ? step == NULL : step == ex->steps + nsteps);
    ex->n_features = nf;
    ex->n_lists = nl;
    tl_free(fe);
    tl_free(le);
    return TL_OK;
}

static tl_status parse(const void *data, size_t len, uint64_t index, bool sequence, tl_example **out)
{
    *out = NULL;
    if (data == NULL && len > 0)
        return tl_error(TL_EINVAL, "record %llu: data is NULL but len is %zu", (unsigned long long)index, len);
    tl_example *ex = tl_calloc(1, sizeof *ex);
    if (ex == NULL)
        return tl_error_oom();
    ex->index = index;
    ex->sequence = sequence;
    bool oom = false;
    ProtobufCAllocator a = {pb_alloc, pb_free, &oom};
    const uint8_t *bytes = data != NULL ? data : (const uint8_t *)"";
    const Tpuloop__Features *feats = NULL;
    const Tpuloop__FeatureLists *lists = NULL;
    if (sequence) {
        Tpuloop__SequenceExample *m = tpuloop__sequence_example__unpack(&a, len, bytes);
        ex->msg = m != NULL ? &m->base : NULL;
        if (m != NULL)
            feats = m->context, lists = m->feature_lists;
    } else {
        Tpuloop__Example *m = tpuloop__example__unpack(&a, len, bytes);
        ex->msg = m != NULL ? &m->base : NULL;
        if (m != NULL)
            feats = m->features;
    }
    if (ex->msg == NULL) {
        tl_free(ex);
        if (oom)
            return tl_error(TL_ENOMEM, "record %llu: out of memory decoding its %zu bytes", (unsigned long long)index,
                            len);
        return tl_error(TL_EPARSE, "record %llu: its %zu bytes are not a serialized tensorflow.%s",
                        (unsigned long long)index, len, sequence ? "SequenceExample" : "Example");
    }
    tl_status st = build_view(ex, feats, lists);
    if (st != TL_OK) {
        tl_example_destroy(ex);
        return st;
    }
    *out = ex;
    return TL_OK;
}

tl_status tl_example_parse(const void *data, size_t len, uint64_t index, tl_example **out)
{
    return parse(data, len, index, false, out);
}

tl_status tl_sequence_example_parse(const void *data, size_t len, uint64_t index, tl_example **out)
{
    return parse(data, len, index, true, out);
}

void tl_example_destroy(tl_example *ex)
{
    if (ex == NULL)
        return;
    if (ex->msg != NULL) {
        bool oom = false;
        ProtobufCAllocator a = {pb_alloc, pb_free, &oom};
        protobuf_c_message_free_unpacked(ex->msg, &a);
    }
    tl_free(ex->features);
    tl_free(ex->lists);
    tl_free(ex->steps);
    tl_free(ex->bytes);
    tl_free(ex);
}

uint64_t tl_example_index(const tl_example *ex)
{
    return ex->index;
}

bool tl_example_is_sequence(const tl_example *ex)
{
    return ex->sequence;
}

const tl_feature *tl_example_features(const tl_example *ex, size_t *n)
{
    *n = ex->n_features;
    return ex->features;
}

const tl_feature_list *tl_example_feature_lists(const tl_example *ex, size_t *n)
{
    *n = ex->n_lists;
    return ex->lists;
}

/* Binary search in the sorted views: a key is the first field of both
 * tl_feature and tl_feature_list. */
const tl_feature *tl_example_find(const tl_example *ex, const char *key)
{
    size_t lo = 0, hi = ex->n_features;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, ex->features[mid].key);
        if (c == 0)
            return &ex->features[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const tl_feature_list *tl_example_find_list(const tl_example *ex, const char *key)
{
    size_t lo = 0, hi = ex->n_lists;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, ex->lists[mid].key);
        if (c == 0)
            return &ex->lists[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

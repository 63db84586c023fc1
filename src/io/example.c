/* example.c — tf.train.Example / SequenceExample records (tpuloop/example.h):
 * decoding with protobuf-c (proto/tpuloop/example.proto) into a sorted,
 * read-only view. The feature specs that read the view are in
 * example_spec.c. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "../base/base_int.h"
#include "example_int.h"
#include "tpuloop/example.pb-c.h"

/* An example's memory is one arena: a few blocks taken from tl_malloc, cut
 * by bumping a pointer, and freed all at once by tl_example_destroy. A
 * decoded Criteo record is some 200 small allocations (each map entry, its
 * key, its Feature, its list and the list's values), and their malloc and
 * free were a third of the time a record took to parse. The blocks still
 * come from tpuloop's hook, so allocation-failure tests reach the decoder. */
typedef struct arena_block {
    struct arena_block *next;
    size_t cap, used;        /* bytes of data */
    max_align_t data[];      /* (cap / sizeof(max_align_t)) */
} arena_block;

#define ARENA_ALIGN sizeof(max_align_t)

/* n bytes from ex's arena, aligned for any type; NULL when out of memory
 * (ex->oom is then set: protobuf-c returns NULL both for malformed bytes and
 * for out of memory, and the flag tells the two apart). */
static void *arena_alloc(tl_example *ex, size_t n)
{
    if (n > SIZE_MAX - 2 * ARENA_ALIGN - sizeof(arena_block)) {
        ex->oom = true;
        return NULL;
    }
    n = (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    arena_block *b = ex->arena;
    if (b == NULL || b->cap - b->used < n) {
        /* Blocks double from the first guess, so few are needed and the
         * space left unused at the end of each is bounded by the last. */
        size_t cap = ex->arena_next;
        if (cap < n)
            cap = n;
        b = tl_malloc(sizeof(arena_block) + cap);
        if (b == NULL) {
            ex->oom = true;
            return NULL;
        }
        b->cap = cap;
        b->used = n;
        if (ex->arena != NULL && n > ex->arena_next) {
            /* A value larger than the next block gets a block of its own,
             * behind the current one, whose free space stays in use. */
            b->next = ex->arena->next;
            ex->arena->next = b;
            return b->data;
        }
        b->next = ex->arena;
        ex->arena = b;
        if (ex->arena_next <= SIZE_MAX / 4)
            ex->arena_next *= 2;
        return b->data;
    }
    void *p = (unsigned char *)b->data + b->used;
    b->used += n;
    return p;
}

static void *pb_alloc(void *ud, size_t n)
{
    return arena_alloc(ud, n > 0 ? n : 1);
}

/* Nothing is freed piece by piece; the arena goes as a whole. */
static void pb_free(void *ud, void *p)
{
    (void)ud, (void)p;
}

static void *arena_array(tl_example *ex, size_t n, size_t size)
{
    if (n > 0 && size > SIZE_MAX / n) {
        ex->oom = true;
        return NULL;
    }
    return arena_alloc(ex, n * size);
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

/* strcmp's order, inline: feature names are a few bytes long, and a call to
 * the library's vectorised strcmp cost more than comparing them (the sort
 * and the lookups of 40 features make some 500 comparisons a record). */
static inline int key_cmp(const char *a, const char *b)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    while (*x != 0 && *x == *y)
        x++, y++;
    return (int)*x - (int)*y;
}

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = key_cmp(x->key, y->key);
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
    /* Writers that sort their keys (Python's deterministic serialization,
     * tl_example_builder) need no sort; equal keys count as unsorted, so
     * the last one still wins by position. */
    size_t k = 1;
    while (k < n && key_cmp(e[k - 1].key, e[k].key) < 0)
        k++;
    if (k < n)
        qsort(e, n, sizeof *e, entry_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && key_cmp(e[i].key, e[i + 1].key) == 0)
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
static tl_status collect_features(tl_example *ex, const Tpuloop__Features *m, entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (m == NULL || m->n_feature == 0)
        return TL_OK;
    entry *e = arena_array(ex, m->n_feature, sizeof *e);
    if (e == NULL)
        return tl_error_oom();
    for (size_t i = 0; i < m->n_feature; i++)
        e[i] = (entry){m->feature[i]->key, m->feature[i]->value, i};
    *out = e;
    *n = sort_unique(e, m->n_feature);
    return TL_OK;
}

static tl_status collect_lists(tl_example *ex, const Tpuloop__FeatureLists *m, entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (m == NULL || m->n_feature_list == 0)
        return TL_OK;
    entry *e = arena_array(ex, m->n_feature_list, sizeof *e);
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
    tl_status st = collect_features(ex, feats, &fe, &nf);
    if (st == TL_OK)
        st = collect_lists(ex, lists, &le, &nl);
    if (st != TL_OK)
        return st;
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
        ex->features = arena_array(ex, nf, sizeof *ex->features);
    if (nl > 0)
        ex->lists = arena_array(ex, nl, sizeof *ex->lists);
    if (nsteps > 0)
        ex->steps = arena_array(ex, nsteps, sizeof *ex->steps);
    if (nbytes > 0)
        ex->bytes = arena_array(ex, nbytes, sizeof *ex->bytes);
    if ((nf > 0 && ex->features == NULL) || (nl > 0 && ex->lists == NULL) ||
        (nsteps > 0 && ex->steps == NULL) || (nbytes > 0 && ex->bytes == NULL))
        return tl_error_oom();
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
    /* The first block holds a typical decoded record whole (protobuf-c's
     * structs take several times the wire bytes of small features), up to
     * 64 KiB; a larger record takes a few doubling blocks, a large value a
     * block of its own size. */
    ex->arena_next = len < 8 * 1024 ? 8 * len + 2048 : 64 * 1024;
    ProtobufCAllocator a = {pb_alloc, pb_free, ex};
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
        bool oom = ex->oom;
        tl_example_destroy(ex);
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
    /* The decoded message and the view all live in the arena. */
    for (arena_block *b = ex->arena, *next; b != NULL; b = next) {
        next = b->next;
        tl_free(b);
    }
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
        int c = key_cmp(key, ex->features[mid].key);
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
        int c = key_cmp(key, ex->lists[mid].key);
        if (c == 0)
            return &ex->lists[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

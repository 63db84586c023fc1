/* example_write.c — serializing a tf.train.Example (tl_example_builder,
 * tpuloop/example.h) through protobuf-c's generated code
 * (proto/tpuloop/example.proto).
 *
 * The builder copies each feature into one arena (keys and values, every
 * value array 8-byte aligned), so adding a feature is a copy and, once the
 * arena has grown to the largest example, no allocation at all. Serializing
 * lays protobuf-c's message structs over the arena — one slot (map entry,
 * Feature, value list) per feature, reused from call to call — sorts the
 * entries by key and packs them into an output buffer the builder keeps.
 * Offsets, not pointers, are stored at add time because the arena moves
 * when it grows. */
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "../base/base_int.h"
#include "tpuloop/example.h"
#include "tpuloop/example.pb-c.h"

/* protobuf's limit on one message (and TensorFlow's on one record). */
#define MAX_MESSAGE ((size_t)INT32_MAX)

/* One added feature; every offset is into the arena. */
typedef struct bentry {
    size_t key;           /* the NUL-terminated key */
    tl_feature_kind kind;
    size_t count;         /* number of values */
    size_t values;        /* floats or int64s (count); for bytes, count size_t lengths, then the bytes */
} bentry;

/* The protobuf-c structs of one feature while serializing. */
typedef struct pb_slot {
    Tpuloop__Features__FeatureEntry entry;
    Tpuloop__Feature feature;
    union {
        Tpuloop__BytesList bytes;
        Tpuloop__FloatList floats;
        Tpuloop__Int64List int64s;
    } list;
} pb_slot;

struct tl_example_builder {
    bentry *e; /* (n) in the order added */
    size_t n, cap;
    unsigned char *arena; /* (arena_cap) */
    size_t used, arena_cap;
    pb_slot *slots; /* (slots_cap) */
    size_t slots_cap;
    Tpuloop__Features__FeatureEntry **ptrs; /* (ptrs_cap) the entries, sorted by key */
    size_t ptrs_cap;
    ProtobufCBinaryData *bins; /* (bins_cap) every bytes value, feature after feature */
    size_t bins_cap;
    uint8_t *out; /* (out_cap) the last serialized example */
    size_t out_cap;
};

tl_status tl_example_builder_create(tl_example_builder **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_example_builder_create: out is NULL");
    *out = tl_calloc(1, sizeof **out);
    return *out != NULL ? TL_OK : tl_error_oom();
}

void tl_example_builder_destroy(tl_example_builder *b)
{
    if (b == NULL)
        return;
    tl_free(b->e);
    tl_free(b->arena);
    tl_free(b->slots);
    tl_free(b->ptrs);
    tl_free(b->bins);
    tl_free(b->out);
    tl_free(b);
}

void tl_example_builder_reset(tl_example_builder *b)
{
    if (b != NULL)
        b->n = b->used = 0;
}

size_t tl_example_builder_count(const tl_example_builder *b)
{
    return b != NULL ? b->n : 0;
}

/* The array p of *cap elements of elem bytes, grown to hold at least want
 * (doubling); NULL when out of memory, p and *cap then unchanged. NULL also
 * when want is 0 and nothing was ever allocated, which is no failure. */
static void *grow(void *p, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap)
        return p;
    size_t c = *cap ? *cap : 16;
    while (c < want)
        c = c > SIZE_MAX / 2 ? want : 2 * c;
    if (c > SIZE_MAX / elem)
        return NULL;
    void *q = tl_realloc(p, c * elem);
    if (q != NULL)
        *cap = c;
    return q;
}

/* Reserves n bytes of the arena at an 8-byte boundary; *off is where. */
static tl_status arena_take(tl_example_builder *b, size_t n, size_t *off)
{
    size_t start = (b->used + 7) & ~(size_t)7;
    if (start < b->used || n > SIZE_MAX - start)
        return tl_error(TL_EINVAL, "tl_example_builder: the example's size overflows");
    unsigned char *a = grow(b->arena, &b->arena_cap, start + n, 1);
    if (a == NULL && start + n > 0)
        return tl_error_oom();
    b->arena = a;
    *off = start;
    b->used = start + n;
    return TL_OK;
}

/* Checks the arguments and copies key into a new entry; *e is it (not yet
 * counted: the caller commits with b->n++). */
static tl_status begin(tl_example_builder *b, const char *key, const void *values, size_t count, const char *fn,
                       bentry **e)
{
    if (b == NULL || key == NULL)
        return tl_error(TL_EINVAL, "%s: %s is NULL", fn, b == NULL ? "the builder" : "key");
    if (key[0] == '\0')
        return tl_error(TL_EINVAL, "%s: the feature key is empty; a key needs at least one byte", fn);
    if (values == NULL && count > 0)
        return tl_error(TL_EINVAL, "%s: feature \"%s\": values is NULL but count is %zu", fn, key, count);
    bentry *grown = grow(b->e, &b->cap, b->n + 1, sizeof *b->e);
    if (grown == NULL)
        return tl_error_oom();
    b->e = grown;
    size_t klen = strlen(key) + 1, koff = 0;
    tl_status st = arena_take(b, klen, &koff);
    if (st != TL_OK)
        return st;
    memcpy(b->arena + koff, key, klen);
    *e = &b->e[b->n];
    **e = (bentry){.key = koff};
    return TL_OK;
}

/* Adds a numeric list of count values of elem bytes each. */
static tl_status add_numbers(tl_example_builder *b, const char *key, tl_feature_kind kind, const void *values,
                             size_t count, size_t elem, const char *fn)
{
    bentry *e;
    size_t mark = b != NULL ? b->used : 0;
    tl_status st = begin(b, key, values, count, fn, &e);
    if (st != TL_OK)
        return st;
    if (count > SIZE_MAX / elem) {
        b->used = mark;
        return tl_error(TL_EINVAL, "%s: feature \"%s\": %zu values overflow the size", fn, key, count);
    }
    size_t off;
    if ((st = arena_take(b, count * elem, &off)) != TL_OK) {
        b->used = mark;
        return st;
    }
    if (count > 0)
        memcpy(b->arena + off, values, count * elem);
    e->kind = kind;
    e->count = count;
    e->values = off;
    b->n++;
    return TL_OK;
}

tl_status tl_example_builder_add_floats(tl_example_builder *b, const char *key, const float *values, size_t count)
{
    return add_numbers(b, key, TL_FEATURE_FLOAT, values, count, sizeof(float), "tl_example_builder_add_floats");
}

tl_status tl_example_builder_add_int64s(tl_example_builder *b, const char *key, const int64_t *values, size_t count)
{
    return add_numbers(b, key, TL_FEATURE_INT64, values, count, sizeof(int64_t), "tl_example_builder_add_int64s");
}

tl_status tl_example_builder_add_empty(tl_example_builder *b, const char *key)
{
    bentry *e;
    tl_status st = begin(b, key, NULL, 0, "tl_example_builder_add_empty", &e);
    if (st != TL_OK)
        return st;
    e->kind = TL_FEATURE_NONE;
    b->n++;
    return TL_OK;
}

tl_status tl_example_builder_add_bytes(tl_example_builder *b, const char *key, const tl_bytes *values, size_t count)
{
    static const char fn[] = "tl_example_builder_add_bytes";
    bentry *e;
    size_t mark = b != NULL ? b->used : 0;
    tl_status st = begin(b, key, values, count, fn, &e);
    if (st != TL_OK)
        return st;
    /* The lengths, then the bytes one after another. */
    size_t total = 0;
    bool bad = count > SIZE_MAX / sizeof(size_t);
    for (size_t i = 0; i < count && !bad; i++) {
        if (values[i].data == NULL && values[i].len > 0) {
            b->used = mark;
            return tl_error(TL_EINVAL, "%s: feature \"%s\": value %zu has NULL data and length %zu", fn, key, i,
                            values[i].len);
        }
        bad = values[i].len > SIZE_MAX - total;
        total += values[i].len;
    }
    if (bad || total > SIZE_MAX - count * sizeof(size_t)) {
        b->used = mark;
        return tl_error(TL_EINVAL, "%s: feature \"%s\": the values' size overflows", fn, key);
    }
    size_t off;
    if ((st = arena_take(b, count * sizeof(size_t) + total, &off)) != TL_OK) {
        b->used = mark;
        return st;
    }
    unsigned char *p = b->arena + off + count * sizeof(size_t);
    for (size_t i = 0; i < count; i++) {
        memcpy(b->arena + off + i * sizeof(size_t), &values[i].len, sizeof(size_t));
        if (values[i].len > 0)
            memcpy(p, values[i].data, values[i].len);
        p += values[i].len;
    }
    e->kind = TL_FEATURE_BYTES;
    e->count = count;
    e->values = off;
    b->n++;
    return TL_OK;
}

static int entry_cmp(const void *a, const void *b)
{
    const Tpuloop__Features__FeatureEntry *x = *(Tpuloop__Features__FeatureEntry *const *)a;
    const Tpuloop__Features__FeatureEntry *y = *(Tpuloop__Features__FeatureEntry *const *)b;
    return strcmp(x->key, y->key);
}

/* Points slot s at entry e's values in the arena. */
static void fill_slot(tl_example_builder *b, const bentry *e, pb_slot *s, ProtobufCBinaryData **bins)
{
    unsigned char *vals = b->arena + e->values;
    s->entry = (Tpuloop__Features__FeatureEntry)TPULOOP__FEATURES__FEATURE_ENTRY__INIT;
    s->feature = (Tpuloop__Feature)TPULOOP__FEATURE__INIT;
    s->entry.key = (char *)b->arena + e->key;
    s->entry.value = &s->feature;
    switch (e->kind) {
    case TL_FEATURE_FLOAT:
        s->list.floats = (Tpuloop__FloatList)TPULOOP__FLOAT_LIST__INIT;
        s->list.floats.n_value = e->count;
        s->list.floats.value = e->count ? (float *)(void *)vals : NULL;
        s->feature.kind_case = TPULOOP__FEATURE__KIND_FLOAT_LIST;
        s->feature.float_list = &s->list.floats;
        break;
    case TL_FEATURE_INT64:
        s->list.int64s = (Tpuloop__Int64List)TPULOOP__INT64_LIST__INIT;
        s->list.int64s.n_value = e->count;
        s->list.int64s.value = e->count ? (int64_t *)(void *)vals : NULL;
        s->feature.kind_case = TPULOOP__FEATURE__KIND_INT64_LIST;
        s->feature.int64_list = &s->list.int64s;
        break;
    case TL_FEATURE_BYTES: {
        s->list.bytes = (Tpuloop__BytesList)TPULOOP__BYTES_LIST__INIT;
        s->list.bytes.n_value = e->count;
        s->list.bytes.value = e->count ? *bins : NULL;
        unsigned char *p = vals + e->count * sizeof(size_t);
        for (size_t i = 0; i < e->count; i++) {
            size_t len;
            memcpy(&len, vals + i * sizeof(size_t), sizeof len);
            (*bins)[i] = (ProtobufCBinaryData){len, p};
            p += len;
        }
        *bins += e->count;
        s->feature.kind_case = TPULOOP__FEATURE__KIND_BYTES_LIST;
        s->feature.bytes_list = &s->list.bytes;
        break;
    }
    case TL_FEATURE_NONE:
        break;
    }
}

tl_status tl_example_builder_serialize(tl_example_builder *b, const uint8_t **data, size_t *len)
{
    if (b == NULL || data == NULL || len == NULL)
        return tl_error(TL_EINVAL, "tl_example_builder_serialize: %s is NULL",
                        b == NULL ? "the builder" : data == NULL ? "data" : "len");
    size_t nbins = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->e[i].kind == TL_FEATURE_BYTES)
            nbins += b->e[i].count;
    pb_slot *slots = grow(b->slots, &b->slots_cap, b->n, sizeof *b->slots);
    if (slots == NULL && b->n > 0)
        return tl_error_oom();
    b->slots = slots;
    Tpuloop__Features__FeatureEntry **ptrs = grow(b->ptrs, &b->ptrs_cap, b->n, sizeof *b->ptrs);
    if (ptrs == NULL && b->n > 0)
        return tl_error_oom();
    b->ptrs = ptrs;
    ProtobufCBinaryData *grown = grow(b->bins, &b->bins_cap, nbins, sizeof *b->bins);
    if (grown == NULL && nbins > 0)
        return tl_error_oom();
    b->bins = grown;
    ProtobufCBinaryData *bins = b->bins;
    for (size_t i = 0; i < b->n; i++) {
        fill_slot(b, &b->e[i], &b->slots[i], &bins);
        b->ptrs[i] = &b->slots[i].entry;
    }
    /* Deterministic bytes: protobuf's deterministic serialization orders a
     * map's entries by key; duplicates would be two entries on the wire. */
    if (b->n > 1)
        qsort(b->ptrs, b->n, sizeof *b->ptrs, entry_cmp);
    for (size_t i = 1; i < b->n; i++)
        if (strcmp(b->ptrs[i - 1]->key, b->ptrs[i]->key) == 0)
            return tl_error(TL_EINVAL, "tl_example_builder_serialize: feature \"%s\" was added twice",
                            b->ptrs[i]->key);
    Tpuloop__Features feats = TPULOOP__FEATURES__INIT;
    feats.n_feature = b->n;
    feats.feature = b->n ? b->ptrs : NULL;
    Tpuloop__Example ex = TPULOOP__EXAMPLE__INIT;
    ex.features = &feats;
    size_t size = tpuloop__example__get_packed_size(&ex);
    if (size > MAX_MESSAGE)
        return tl_error(TL_EINVAL,
                        "tl_example_builder_serialize: the example would be %zu bytes, over protobuf's limit of "
                        "%zu",
                        size, MAX_MESSAGE);
    uint8_t *out = grow(b->out, &b->out_cap, size, 1);
    if (out == NULL && size > 0)
        return tl_error_oom();
    b->out = out;
    size_t packed = tpuloop__example__pack(&ex, b->out);
    TL_ASSERT(packed == size);
    *data = b->out;
    *len = size;
    return TL_OK;
}

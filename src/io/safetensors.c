/* safetensors.c — the dtype table and writing checkpoint files (the format
 * is documented in include/tpuloop/checkpoint.h; safetensors_read.c reads
 * them). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base_int.h"
#include "ckpt_int.h"
#include "crc32c.h"
#include "file.h"
#include "tpuloop/checkpoint.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors is little-endian: tpuloop writes tensors as they lie in memory, so it needs a little-endian host"
#endif

/* CRC and write in slices, so each slice is still in cache when it is written. */
#define WRITE_SLICE ((size_t)4 << 20)

static const struct {
    const char *name;
    size_t size;
} dtypes[TL_CKPT_NUM_DTYPES] = {
    [TL_CKPT_BOOL] = {"BOOL", 1},
    [TL_CKPT_U8] = {"U8", 1},
    [TL_CKPT_I8] = {"I8", 1},
    [TL_CKPT_F8_E5M2] = {"F8_E5M2", 1},
    [TL_CKPT_F8_E4M3] = {"F8_E4M3", 1},
    [TL_CKPT_I16] = {"I16", 2},
    [TL_CKPT_U16] = {"U16", 2},
    [TL_CKPT_F16] = {"F16", 2},
    [TL_CKPT_BF16] = {"BF16", 2},
    [TL_CKPT_I32] = {"I32", 4},
    [TL_CKPT_U32] = {"U32", 4},
    [TL_CKPT_F32] = {"F32", 4},
    [TL_CKPT_I64] = {"I64", 8},
    [TL_CKPT_U64] = {"U64", 8},
    [TL_CKPT_F64] = {"F64", 8},
};

/* The metadata keys the writer owns. */
static const char *const reserved_meta[] = {"format", "format_version", "crc32c", "header_crc32c"};

size_t tl_ckpt_dtype_size(tl_ckpt_dtype dt)
{
    return (unsigned)dt < TL_CKPT_NUM_DTYPES ? dtypes[dt].size : 0;
}

const char *tl_ckpt_dtype_name(tl_ckpt_dtype dt)
{
    return (unsigned)dt < TL_CKPT_NUM_DTYPES ? dtypes[dt].name : "?";
}

tl_status tl_ckpt_dtype_parse(const char *name, tl_ckpt_dtype *out)
{
    if (name == NULL)
        return tl_error(TL_EINVAL, "dtype name is NULL");
    for (int i = 0; i < TL_CKPT_NUM_DTYPES; i++)
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (tl_ckpt_dtype)i;
            return TL_OK;
        }
    return tl_error(TL_EINVAL, "dtype '%s' is unknown; expected one of BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, "
                               "F16, BF16, I32, U32, F32, I64, U64, F64", name);
}

/* RFC 3629 UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned c = *s;
        int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0)
            return false;
        unsigned cp = n == 0 ? c : n == 1 ? (c & 0x1f) : n == 2 ? (c & 0x0f) : (c & 0x07);
        for (int i = 1; i <= n; i++) {
            if ((s[i] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i] & 0x3f);
        }
        static const unsigned min_cp[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        s += n + 1;
    }
    return true;
}

uint64_t tl_ckpt_tensor_bytes(const int64_t *shape, int rank, size_t esize, bool *ok)
{
    *ok = true;
    for (int i = 0; i < rank; i++)
        if (shape[i] == 0)
            return 0;
    uint64_t n = esize;
    for (int i = 0; i < rank; i++) {
        if ((uint64_t)shape[i] != 0 && n > UINT64_MAX / (uint64_t)shape[i]) {
            *ok = false;
            return 0;
        }
        n *= (uint64_t)shape[i];
    }
    return n;
}

void tl_ckpt_format_shape(char *buf, size_t cap, const int64_t *shape, int rank)
{
    size_t len = 0;
    int i = 0;
    buf[len++] = '[';
    for (; i < rank && len + 28 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(buf + len, cap - len, "%s]", i < rank ? ", ..." : "");
}

/* ======================================================================== */
/* Writer                                                                   */
/* ======================================================================== */

typedef struct wentry {
    char *name;
    tl_ckpt_dtype dtype;
    int rank;
    int64_t *shape; /* (rank) */
    const void *data;
    uint64_t bytes;
} wentry;

struct tl_ckpt_writer {
    wentry *e; /* (n) */
    int n, cap;
    int *hash; /* (hcap) open addressing over e by name; -1 empty */
    int hcap;
    char **mkey, **mval; /* (nmeta) */
    int nmeta, mcap;
};

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of name in the hash: where it is, or the empty slot it would go. */
static int hash_slot(const tl_ckpt_writer *w, const char *name)
{
    int mask = w->hcap - 1;
    int i = (int)(hash_name(name) & (uint64_t)mask);
    while (w->hash[i] >= 0 && strcmp(w->e[w->hash[i]].name, name) != 0)
        i = (i + 1) & mask;
    return i;
}

static tl_status hash_grow(tl_ckpt_writer *w)
{
    int ncap = w->hcap ? w->hcap * 2 : 64;
    int *nh = tl_alloc_array((size_t)ncap, sizeof *nh);
    if (nh == NULL)
        return tl_error_oom();
    for (int i = 0; i < ncap; i++)
        nh[i] = -1;
    tl_free(w->hash);
    w->hash = nh;
    w->hcap = ncap;
    for (int k = 0; k < w->n; k++)
        w->hash[hash_slot(w, w->e[k].name)] = k;
    return TL_OK;
}

tl_status tl_ckpt_writer_create(tl_ckpt_writer **out)
{
    *out = tl_calloc(1, sizeof **out);
    if (*out == NULL)
        return tl_error_oom();
    tl_status st = hash_grow(*out);
    if (st != TL_OK) {
        tl_free(*out);
        *out = NULL;
    }
    return st;
}

void tl_ckpt_writer_destroy(tl_ckpt_writer *w)
{
    if (w == NULL)
        return;
    for (int i = 0; i < w->n; i++) {
        tl_free(w->e[i].name);
        tl_free(w->e[i].shape);
    }
    for (int i = 0; i < w->nmeta; i++) {
        tl_free(w->mkey[i]);
        tl_free(w->mval[i]);
    }
    tl_free(w->e);
    tl_free(w->hash);
    tl_free(w->mkey);
    tl_free(w->mval);
    tl_free(w);
}

tl_status tl_ckpt_writer_add(tl_ckpt_writer *w, const char *name, tl_ckpt_dtype dtype, const int64_t *shape,
                             int rank, const void *data)
{
    if (name == NULL || name[0] == '\0')
        return tl_error(TL_EINVAL, "checkpoint tensor name must be non-empty");
    if (strcmp(name, "__metadata__") == 0)
        return tl_error(TL_EINVAL, "checkpoint tensor name '__metadata__' is reserved for the metadata");
    if (!utf8_valid(name))
        return tl_error(TL_EINVAL, "checkpoint tensor name '%s' is not valid UTF-8", name);
    if ((unsigned)dtype >= TL_CKPT_NUM_DTYPES)
        return tl_error(TL_EINVAL, "tensor '%s': dtype %d is not a tl_ckpt_dtype", name, (int)dtype);
    if (rank < 0 || rank > TL_CKPT_MAX_RANK)
        return tl_error(TL_EINVAL, "tensor '%s': rank must be in [0, %d], got %d", name, TL_CKPT_MAX_RANK, rank);
    if (rank > 0 && shape == NULL)
        return tl_error(TL_EINVAL, "tensor '%s': shape is NULL for rank %d", name, rank);
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return tl_error(TL_EINVAL, "tensor '%s': shape[%d] must be >= 0, got %lld", name, i,
                            (long long)shape[i]);
    bool ok;
    uint64_t bytes = tl_ckpt_tensor_bytes(shape, rank, dtypes[dtype].size, &ok);
    if (!ok || bytes > (uint64_t)INT64_MAX)
        return tl_error(TL_EINVAL, "tensor '%s': the byte size of its shape overflows 64 bits", name);
    if (bytes > 0 && data == NULL)
        return tl_error(TL_EINVAL, "tensor '%s': data is NULL for %llu bytes", name, (unsigned long long)bytes);
    int slot = hash_slot(w, name);
    if (w->hash[slot] >= 0)
        return tl_error(TL_EINVAL, "checkpoint tensor '%s' was already added", name);

    if (w->n == w->cap) {
        int ncap = w->cap ? w->cap * 2 : 16;
        wentry *ne = tl_realloc(w->e, (size_t)ncap * sizeof *ne);
        if (ne == NULL)
            return tl_error_oom();
        w->e = ne;
        w->cap = ncap;
    }
    wentry *e = &w->e[w->n];
    e->name = tl_strdup(name);
    e->shape = rank > 0 ? tl_alloc_array((size_t)rank, sizeof *e->shape) : NULL;
    if (e->name == NULL || (rank > 0 && e->shape == NULL)) {
        tl_free(e->name);
        tl_free(e->shape);
        return tl_error_oom();
    }
    if (rank > 0)
        memcpy(e->shape, shape, (size_t)rank * sizeof *shape);
    e->dtype = dtype;
    e->rank = rank;
    e->data = data;
    e->bytes = bytes;
    w->hash[slot] = w->n++;
    if (2 * w->n > w->hcap && hash_grow(w) != TL_OK) {
        /* the entry stays out: the table cannot hold it */
        w->n--;
        w->hash[hash_slot(w, name)] = -1;
        tl_free(e->name);
        tl_free(e->shape);
        return tl_error_oom();
    }
    return TL_OK;
}

const char *tl_ckpt_writer_meta_get(const tl_ckpt_writer *w, const char *key)
{
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->mkey[i], key) == 0)
            return w->mval[i];
    return NULL;
}

tl_status tl_ckpt_writer_set_meta(tl_ckpt_writer *w, const char *key, const char *value)
{
    if (key == NULL || key[0] == '\0')
        return tl_error(TL_EINVAL, "checkpoint metadata key must be non-empty");
    if (value == NULL)
        return tl_error(TL_EINVAL, "checkpoint metadata '%s': value is NULL", key);
    for (size_t i = 0; i < TL_ARRAY_LEN(reserved_meta); i++)
        if (strcmp(key, reserved_meta[i]) == 0)
            return tl_error(TL_EINVAL, "checkpoint metadata '%s' is written by tpuloop itself and cannot be set", key);
    if (!utf8_valid(key) || !utf8_valid(value))
        return tl_error(TL_EINVAL, "checkpoint metadata '%s': key and value must be valid UTF-8", key);
    char *v = tl_strdup(value);
    if (v == NULL)
        return tl_error_oom();
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->mkey[i], key) == 0) {
            tl_free(w->mval[i]);
            w->mval[i] = v;
            return TL_OK;
        }
    if (w->nmeta == w->mcap) {
        int ncap = w->mcap ? w->mcap * 2 : 8;
        char **nk = tl_realloc(w->mkey, (size_t)ncap * sizeof *nk);
        if (nk != NULL)
            w->mkey = nk;
        char **nv = nk ? tl_realloc(w->mval, (size_t)ncap * sizeof *nv) : NULL;
        if (nv != NULL)
            w->mval = nv;
        if (nk == NULL || nv == NULL) {
            tl_free(v);
            return tl_error_oom();
        }
        w->mcap = ncap;
    }
    char *k = tl_strdup(key);
    if (k == NULL) {
        tl_free(v);
        return tl_error_oom();
    }
    w->mkey[w->nmeta] = k;
    w->mval[w->nmeta++] = v;
    return TL_OK;
}

/* The order of the data section: largest element first, then the order of
 * adding (the reference writer sorts by dtype for alignment; this keeps it
 * stable). One pass per element size, so linear in the tensors. */
static void layout_order(const tl_ckpt_writer *w, int *order)
{
    static const size_t sizes[] = {8, 4, 2, 1};
    int k = 0;
    for (size_t s = 0; s < TL_ARRAY_LEN(sizes); s++)
        for (int i = 0; i < w->n; i++)
            if (dtypes[w->e[i].dtype].size == sizes[s])
                order[k++] = i;
    TL_ASSERT(k == w->n);
}

static json_t *tensor_json(const wentry *e, uint64_t begin)
{
    json_t *o = json_object(), *shape = json_array(), *off = json_array();
    bool ok = o && shape && off;
    for (int i = 0; ok && i < e->rank; i++)
        ok = json_array_append_new(shape, json_integer((json_int_t)e->shape[i])) == 0;
    ok = ok && json_array_append_new(off, json_integer((json_int_t)begin)) == 0 &&
         json_array_append_new(off, json_integer((json_int_t)(begin + e->bytes))) == 0;
    ok = ok && json_object_set_new(o, "dtype", json_string(dtypes[e->dtype].name)) == 0;
    if (ok) {
        ok = json_object_set_new(o, "shape", shape) == 0;
        shape = NULL;
    }
    if (ok) {
        ok = json_object_set_new(o, "data_offsets", off) == 0;
        off = NULL;
    }
    json_decref(shape);
    json_decref(off);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The header JSON, compact, with "00000000" in both checksum fields. */
static char *header_json(const tl_ckpt_writer *w, const int *order)
{
    json_t *root = json_object(), *meta = json_object();
    bool ok = root && meta;
    ok = ok && json_object_set_new(meta, "format", json_string(TL_CKPT_FORMAT)) == 0;
    ok = ok && json_object_set_new(meta, "format_version", json_string(TL_CKPT_FORMAT_VERSION)) == 0;
    ok = ok && json_object_set_new(meta, "crc32c", json_string("00000000")) == 0;
    ok = ok && json_object_set_new(meta, "header_crc32c", json_string("00000000")) == 0;
    for (int i = 0; ok && i < w->nmeta; i++)
        ok = json_object_set_new(meta, w->mkey[i], json_string(w->mval[i])) == 0;
    if (ok) {
        ok = json_object_set_new(root, "__metadata__", meta) == 0;
        meta = NULL;
    }
    uint64_t off = 0;
    for (int k = 0; ok && k < w->n; k++) {
        const wentry *e = &w->e[order[k]];
        ok = json_object_set_new(root, e->name, tensor_json(e, off)) == 0;
        off += e->bytes;
    }
    char *text = ok ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(meta);
    json_decref(root);
    return text;
}

/* Where the 8 digits of `"key":"00000000"` start in text; it is there
 * exactly once, because a quote inside a JSON string is always escaped. */
static size_t field_digits(const char *text, const char *key)
{
    char pat[40];
    snprintf(pat, sizeof pat, "\"%s\":\"00000000\"", key);
    const char *p = strstr(text, pat);
    TL_ASSERT(p != NULL && strstr(p + 1, pat) == NULL);
    return (size_t)(p - text) + strlen(key) + 4;
}

static void put_hex8(unsigned char *dst, uint32_t v)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 7; i >= 0; i--, v >>= 4)
        dst[i] = (unsigned char)hex[v & 15];
}

/* The part of the header that takes the most bytes, for the message of a
 * header over the limit: a metadata value or a tensor's name. */
static void largest_part(const tl_ckpt_writer *w, char *buf, size_t cap)
{
    size_t best = 0;
    snprintf(buf, cap, "none");
    for (int i = 0; i < w->nmeta; i++) {
        size_t n = strlen(w->mkey[i]) + strlen(w->mval[i]);
        if (n > best) {
            best = n;
            snprintf(buf, cap, "metadata '%.64s' (%zu bytes)", w->mkey[i], strlen(w->mval[i]));
        }
    }
    for (int i = 0; i < w->n; i++) {
        size_t n = strlen(w->e[i].name);
        if (n > best) {
            best = n;
            snprintf(buf, cap, "the name of tensor '%.64s...' (%zu bytes)", w->e[i].name, n);
        }
    }
}

/* What the reader refuses, refused before anything is written: a header
 * over TL_CKPT_MAX_HEADER. bytes is the header's size, or a lower bound of
 * it (the raw text it holds) before it is built. */
static tl_status header_too_big(const tl_ckpt_writer *w, const char *path, size_t bytes, bool bound)
{
    char part[160];
    largest_part(w, part, sizeof part);
    return tl_error(TL_EINVAL, "%s: the header would be %s%zu bytes, over the limit of %d bytes that checkpoint "
                               "readers accept (TL_CKPT_MAX_HEADER; Python's safetensors has the same); its largest "
                               "part is %s: store large data as a tensor, not in the header",
                    path, bound ? "more than " : "", bytes, TL_CKPT_MAX_HEADER, part);
}

/* The temporary file, complete, opened by the reader as a resume would
 * open it (every bound, the header's and the data's checksums): a file
 * that does not read back is never committed. */
static tl_status verify_written(const tl_io_atomic *a)
{
    tl_ckpt_reader *r;
    tl_status st = tl_ckpt_open(a->tmp_path, 0, &r);
    tl_ckpt_close(r);
    if (st == TL_OK || st == TL_ENOMEM)
        return st;
    return tl_error(TL_EIO, "%s: the checkpoint written does not read back, so it is not committed: %s", a->path,
                    tl_last_error());
}

tl_status tl_ckpt_writer_write(tl_ckpt_writer *w, const char *path)
{
    if (path == NULL)
        return tl_error(TL_EINVAL, "checkpoint path is NULL");
    /* The header holds at least every name and metadata text: when those
     * alone are over the limit, there is no need to build it. */
    size_t raw = 0;
    for (int i = 0; i < w->nmeta; i++)
        raw += strlen(w->mkey[i]) + strlen(w->mval[i]);
    for (int i = 0; i < w->n; i++)
        raw += strlen(w->e[i].name);
    if (raw > TL_CKPT_MAX_HEADER)
        return header_too_big(w, path, raw, true);
    int *order = tl_alloc_array((size_t)w->n + 1, sizeof *order);
    if (order == NULL)
        return tl_error_oom();
    layout_order(w, order);
    char *json = header_json(w, order);
    if (json == NULL) {
        tl_free(order);
        return tl_error(TL_ENOMEM, "%s: out of memory building the header", path);
    }
    size_t jlen = strlen(json);
    size_t hlen = (jlen + 7) & ~(size_t)7;
    if (hlen > TL_CKPT_MAX_HEADER) {
        free(json); /* jansson's allocation */
        tl_free(order);
        return header_too_big(w, path, hlen, false);
    }
    unsigned char *head = tl_malloc(8 + hlen); /* length field + padded header */
    if (head == NULL) {
        free(json); /* jansson's allocation */
        tl_free(order);
        return tl_error(TL_ENOMEM, "%s: out of memory for a %zu-byte header", path, hlen);
    }
    for (int i = 0; i < 8; i++)
        head[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(head + 8, json, jlen);
    memset(head + 8 + jlen, ' ', hlen - jlen);
    size_t data_crc_at = 8 + field_digits(json, "crc32c");
    size_t head_crc_at = 8 + field_digits(json, "header_crc32c");
    free(json);

    /* The header goes first with placeholder checksums, so the data can be
     * checksummed as it streams out; the finished header is written over
     * it before the commit. */
    tl_io_atomic a;
    tl_status st = tl_io_atomic_begin(&a, path);
    if (st == TL_OK)
        st = tl_io_atomic_write(&a, head, 8 + hlen);
    uint32_t crc = 0;
    for (int k = 0; st == TL_OK && k < w->n; k++) {
        const wentry *e = &w->e[order[k]];
        const unsigned char *p = e->data;
        for (uint64_t done = 0; st == TL_OK && done < e->bytes;) {
            size_t n = e->bytes - done < WRITE_SLICE ? (size_t)(e->bytes - done) : WRITE_SLICE;
            crc = tl_crc32c_extend(crc, p + done, n);
            st = tl_io_atomic_write(&a, p + done, n);
            done += n;
        }
    }
    if (st == TL_OK) {
        put_hex8(head + data_crc_at, crc);
        /* over the length and the header with its own digits still "00000000" */
        put_hex8(head + head_crc_at, tl_crc32c_extend(0, head, 8 + hlen));
        st = tl_io_atomic_pwrite(&a, head + 8, hlen, 8);
    }
    if (st == TL_OK)
        st = verify_written(&a);
    if (st == TL_OK)
        st = tl_io_atomic_commit(&a);
    else
        tl_io_atomic_abort(&a);
    tl_free(head);
    tl_free(order);
    return st;
}

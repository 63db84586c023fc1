/* safetensors_read.c — opening a checkpoint: every check of the format in
 * include/tpuloop/checkpoint.h, in the order a byte stream meets them, each
 * failure a TL_EPARSE naming the file and the exact problem. Nothing is
 * handed out before all checks pass. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base_int.h"
#include "ckpt_int.h"
#include "crc32c.h"
#include "file.h"
#include "tpuloop/checkpoint.h"

typedef struct rtensor {
    char *name;
    tl_ckpt_dtype dtype;
    int rank;
    int64_t *shape; /* (rank); NULL for rank 0 */
    uint64_t begin, end;
} rtensor;

struct tl_ckpt_reader {
    char *label;
    tl_io_map map;             /* the file, when opened from one */
    const unsigned char *data; /* (data_len) the data section */
    uint64_t data_len;
    rtensor *t; /* (nt) by offset */
    int nt;
    int *by_name; /* (nt) indices into t, by strcmp of the names */
    char **mkey, **mval; /* (nmeta) */
    int nmeta;
    unsigned checksums;
};

/* "an integer", "a string", ... for messages. */
static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* A non-negative JSON integer, or -1. */
static int64_t json_uint(const json_t *v)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    return (int64_t)json_integer_value(v);
}

static tl_status bad(const tl_ckpt_reader *r, const char *fmt, ...) TL_PRINTF(2, 3);

/* TL_EPARSE with "<label>: " before the formatted detail. */
static tl_status bad(const tl_ckpt_reader *r, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tl_error(TL_EPARSE, "%s: %s", r->label, msg);
}

static tl_status parse_tensor(const tl_ckpt_reader *r, const char *name, const json_t *v, rtensor *t)
{
    if (name[0] == '\0')
        return bad(r, "a tensor has an empty name");
    if (!json_is_object(v))
        return bad(r, "tensor '%s': its entry is %s, not an object", name, json_kind(v));
    const char *key;
    const json_t *f;
    json_object_foreach((json_t *)v, key, f) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 && strcmp(key, "data_offsets") != 0)
            return bad(r, "tensor '%s': unknown field '%s' (expected dtype, shape and data_offsets)", name, key);
    }
    const json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
                 *off = json_object_get(v, "data_offsets");
    if (dt == NULL || shape == NULL || off == NULL)
        return bad(r, "tensor '%s': missing field '%s'", name, dt == NULL ? "dtype" : shape == NULL ? "shape" : "data_offsets");
    if (!json_is_string(dt))
        return bad(r, "tensor '%s': dtype must be a string, got %s", name, json_kind(dt));
    if (tl_ckpt_dtype_parse(json_string_value(dt), &t->dtype) != TL_OK)
        return bad(r, "tensor '%s': unknown dtype '%s'", name, json_string_value(dt));
    if (!json_is_array(shape))
        return bad(r, "tensor '%s': shape must be an array of integers, got %s", name, json_kind(shape));
    size_t rank = json_array_size(shape);
    if (rank > TL_CKPT_MAX_RANK)
        return bad(r, "tensor '%s': rank %zu is over the limit of %d", name, rank, TL_CKPT_MAX_RANK);
    int64_t dims[TL_CKPT_MAX_RANK];
    for (size_t i = 0; i < rank; i++) {
        dims[i] = json_uint(json_array_get(shape, i));
        if (dims[i] < 0)
            return bad(r, "tensor '%s': shape[%zu] must be an integer >= 0", name, i);
    }
    if (!json_is_array(off) || json_array_size(off) != 2 || json_uint(json_array_get(off, 0)) < 0 ||
        json_uint(json_array_get(off, 1)) < 0)
        return bad(r, "tensor '%s': data_offsets must be [begin, end], two integers >= 0", name);
    t->begin = (uint64_t)json_uint(json_array_get(off, 0));
    t->end = (uint64_t)json_uint(json_array_get(off, 1));
    char sbuf[160];
    tl_ckpt_format_shape(sbuf, sizeof sbuf, dims, (int)rank);
    if (t->end < t->begin)
        return bad(r, "tensor '%s': data_offsets [%llu, %llu] end before they begin", name,
                   (unsigned long long)t->begin, (unsigned long long)t->end);
    bool ok;
    uint64_t need = tl_ckpt_tensor_bytes(dims, (int)rank, tl_ckpt_dtype_size(t->dtype), &ok);
    if (!ok)
        return bad(r, "tensor '%s': %s %s is more than 2^64 bytes", name, tl_ckpt_dtype_name(t->dtype), sbuf);
    if (t->end - t->begin != need)
        return bad(r, "tensor '%s': data_offsets [%llu, %llu] but %s %s needs %llu bytes", name,
                   (unsigned long long)t->begin, (unsigned long long)t->end, tl_ckpt_dtype_name(t->dtype), sbuf,
                   (unsigned long long)need);
    t->name = tl_strdup(name);
    t->shape = rank ? tl_alloc_array(rank, sizeof *t->shape) : NULL;
    if (t->name == NULL || (rank && t->shape == NULL)) {
        tl_free(t->name);
        tl_free(t->shape);
        t->name = NULL;
        t->shape = NULL;
        return tl_error(TL_ENOMEM, "%s: out of memory", r->label);
    }
    if (rank)
        memcpy(t->shape, dims, rank * sizeof *dims);
    t->rank = (int)rank;
    return TL_OK;
}

static tl_status parse_meta(tl_ckpt_reader *r, const json_t *m)
{
    if (!json_is_object(m))
        return bad(r, "__metadata__ must be an object of strings, got %s", json_kind(m));
    size_t n = json_object_size(m);
    r->mkey = tl_calloc(n + 1, sizeof *r->mkey);
    r->mval = tl_calloc(n + 1, sizeof *r->mval);
    if (r->mkey == NULL || r->mval == NULL)
        return tl_error(TL_ENOMEM, "%s: out of memory", r->label);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)m, key, v) {
        if (!json_is_string(v))
            return bad(r, "__metadata__ '%s' must be a string, got %s", key, json_kind(v));
        r->mkey[r->nmeta] = tl_strdup(key);
        r->mval[r->nmeta] = tl_strdup(json_string_value(v));
        if (r->mkey[r->nmeta] == NULL || r->mval[r->nmeta] == NULL) {
            tl_free(r->mkey[r->nmeta]);
            tl_free(r->mval[r->nmeta]);
            return tl_error(TL_ENOMEM, "%s: out of memory", r->label);
        }
        r->nmeta++;
    }
    return TL_OK;
}

static int cmp_offset(const void *a, const void *b)
{
    const rtensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

typedef struct name_idx {
    const char *name;
    int idx;
} name_idx;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const name_idx *)a)->name, ((const name_idx *)b)->name);
}

/* Sorted by offset, the tensors must tile [0, data_len) exactly. */
static tl_status check_coverage(const tl_ckpt_reader *r)
{
    uint64_t at = 0;
    for (int i = 0; i < r->nt; i++) {
        const rtensor *t = &r->t[i];
        if (t->begin > at) {
            if (i == 0)
                return bad(r, "tensor '%s': data_offsets [%llu, %llu] leave a gap of %llu bytes at the start of the "
                              "data section", t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                           (unsigned long long)t->begin);
            return bad(r, "tensor '%s': data_offsets [%llu, %llu] leave a gap of %llu bytes after tensor '%s' [%llu, %llu]",
                       t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                       (unsigned long long)(t->begin - at), r->t[i - 1].name, (unsigned long long)r->t[i - 1].begin,
                       (unsigned long long)r->t[i - 1].end);
        }
        if (t->begin < at)
            return bad(r, "tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]", t->name,
                       (unsigned long long)t->begin, (unsigned long long)t->end, r->t[i - 1].name,
                       (unsigned long long)r->t[i - 1].begin, (unsigned long long)r->t[i - 1].end);
        at = t->end;
    }
    if (at != r->data_len)
        return bad(r, "the tensors end at byte %llu of the data section but it has %llu bytes (%s)",
                   (unsigned long long)at, (unsigned long long)r->data_len,
                   at > r->data_len ? "the file is truncated" : "bytes no tensor owns");
    return TL_OK;
}

/* 8 lowercase hex digits. */
static bool parse_hex8(const char *s, uint32_t *v)
{
    uint32_t x = 0;
    for (int i = 0; i < 8; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9')
            x = x * 16 + (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x = x * 16 + (uint32_t)(c - 'a' + 10);
        else
            return false;
    }
    if (s[8] != '\0')
        return false;
    *v = x;
    return true;
}

/* Where pat (plen bytes) occurs in hay (n bytes): the first position, and
 * in *count how many times (counting stops at 2). */
static size_t find_bytes(const unsigned char *hay, size_t n, const char *pat, size_t plen, int *count)
{
    size_t first = SIZE_MAX;
    *count = 0;
    for (size_t i = 0; plen <= n && i <= n - plen && *count < 2; i++)
        if (hay[i] == (unsigned char)pat[0] && memcmp(hay + i, pat, plen) == 0) {
            if (first == SIZE_MAX)
                first = i;
            (*count)++;
        }
    return first;
}

/* The metadata contract and both checksums; buf is the whole file. */
static tl_status check_meta_and_sums(tl_ckpt_reader *r, const unsigned char *buf, size_t hlen, unsigned flags)
{
    const char *format = tl_ckpt_meta(r, "format"), *version = tl_ckpt_meta(r, "format_version");
    const char *dcrc = tl_ckpt_meta(r, "crc32c"), *hcrc = tl_ckpt_meta(r, "header_crc32c");
    if (!(flags & TL_CKPT_ALLOW_FOREIGN)) {
        if (format == NULL)
            return bad(r, "__metadata__ has no 'format': not a tpuloop checkpoint (TL_CKPT_ALLOW_FOREIGN reads "
                          "other safetensors files)");
        if (strcmp(format, TL_CKPT_FORMAT) != 0)
            return bad(r, "__metadata__ format is '%s', expected '" TL_CKPT_FORMAT "'", format);
        if (version == NULL)
            return bad(r, "__metadata__ has no 'format_version'");
        if (strcmp(version, TL_CKPT_FORMAT_VERSION) != 0)
            return bad(r, "__metadata__ format_version '%s' is not supported (this tpuloop reads version "
                          TL_CKPT_FORMAT_VERSION ")", version);
        if (dcrc == NULL || hcrc == NULL)
            return bad(r, "__metadata__ has no '%s' checksum", dcrc == NULL ? "crc32c" : "header_crc32c");
    }
    uint32_t want;
    if (hcrc != NULL) {
        if (!parse_hex8(hcrc, &want))
            return bad(r, "__metadata__ header_crc32c '%s' is not 8 lowercase hex digits", hcrc);
        static const char pat[] = "\"header_crc32c\":\"";
        int count;
        size_t at = find_bytes(buf + 8, hlen, pat, sizeof pat - 1, &count);
        if (count != 1 || at + sizeof pat - 1 + 9 > hlen || buf[8 + at + sizeof pat - 1 + 8] != '"')
            return bad(r, "header_crc32c is not written as tpuloop writes it (\"header_crc32c\":\"8 digits\" once)");
        size_t digits = 8 + at + sizeof pat - 1;
        uint32_t got = tl_crc32c_extend(0, buf, digits);
        got = tl_crc32c_extend(got, "00000000", 8);
        got = tl_crc32c_extend(got, buf + digits + 8, 8 + hlen - digits - 8);
        if (got != want)
            return bad(r, "header checksum mismatch: header_crc32c says %08x, the header has %08x", want, got);
        r->checksums |= 2;
    }
    if (dcrc != NULL) {
        if (!parse_hex8(dcrc, &want))
            return bad(r, "__metadata__ crc32c '%s' is not 8 lowercase hex digits", dcrc);
        uint32_t got = tl_crc32c_extend(0, r->data, (size_t)r->data_len);
        if (got != want)
            return bad(r, "data checksum mismatch: crc32c says %08x, the %llu data bytes have %08x", want,
                       (unsigned long long)r->data_len, got);
        r->checksums |= 1;
    }
    return TL_OK;
}

static tl_status parse_file(tl_ckpt_reader *r, const unsigned char *buf, size_t len, unsigned flags)
{
    if (len < 8)
        return bad(r, "%zu bytes is too short for a checkpoint (the header length alone takes 8)", len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | buf[i];
    if (hlen > TL_CKPT_MAX_HEADER)
        return bad(r, "header length %llu is over the limit of %d bytes", (unsigned long long)hlen,
                   TL_CKPT_MAX_HEADER);
    if (hlen > len - 8)
        return bad(r, "header length %llu runs past the end of the file (%zu bytes follow the length)",
                   (unsigned long long)hlen, len - 8);
    if (hlen == 0)
        return bad(r, "the header is empty");
    if (buf[8] != '{')
        return bad(r, "the header does not start with '{' (byte 0x%02x)", buf[8]);
    r->data = buf + 8 + hlen;
    r->data_len = len - 8 - hlen;

    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return bad(r, "the header is not valid JSON: %s (at byte %d of the header)", jerr.text, jerr.position);
    tl_status st = TL_OK;
    if (!json_is_object(root))
        st = bad(r, "the header is %s, not an object", json_kind(root));
    const json_t *meta = st == TL_OK ? json_object_get(root, "__metadata__") : NULL;
    size_t n = st == TL_OK ? json_object_size(root) - (meta != NULL) : 0;
    if (st == TL_OK && n > (size_t)INT32_MAX / 2)
        st = bad(r, "%zu tensors are too many", n);
    if (st == TL_OK) {
        r->t = tl_calloc(n + 1, sizeof *r->t);
        r->by_name = tl_alloc_array(n + 1, sizeof *r->by_name);
        if (r->t == NULL || r->by_name == NULL)
            st = tl_error(TL_ENOMEM, "%s: out of memory", r->label);
    }
    if (st == TL_OK && meta != NULL)
        st = parse_meta(r, meta);
    if (st == TL_OK) {
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v) {
            if (meta != NULL && v == meta)
                continue;
            st = parse_tensor(r, key, v, &r->t[r->nt]);
            if (r->t[r->nt].name != NULL)
                r->nt++;
            if (st != TL_OK)
                break;
        }
    }
    json_decref(root);
    if (st != TL_OK)
        return st;
    qsort(r->t, (size_t)r->nt, sizeof *r->t, cmp_offset);
    st = check_coverage(r);
    if (st == TL_OK)
        st = check_meta_and_sums(r, buf, (size_t)hlen, flags);
    if (st != TL_OK)
        return st;
    name_idx *ni = tl_alloc_array((size_t)r->nt + 1, sizeof *ni);
    if (ni == NULL)
        return tl_error(TL_ENOMEM, "%s: out of memory", r->label);
    for (int i = 0; i < r->nt; i++)
        ni[i] = (name_idx){r->t[i].name, i};
    qsort(ni, (size_t)r->nt, sizeof *ni, cmp_name);
    for (int i = 0; i < r->nt; i++)
        r->by_name[i] = ni[i].idx;
    tl_free(ni);
    return TL_OK;
}

static tl_status reader_new(const char *label, tl_ckpt_reader **out)
{
    *out = tl_calloc(1, sizeof **out);
    if (*out == NULL)
        return tl_error_oom();
    (*out)->label = tl_strdup(label);
    if ((*out)->label == NULL) {
        tl_free(*out);
        *out = NULL;
        return tl_error_oom();
    }
    return TL_OK;
}

tl_status tl_ckpt_open_memory(const void *buf, size_t len, const char *label, unsigned flags, tl_ckpt_reader **out)
{
    *out = NULL;
    tl_ckpt_reader *r;
    tl_status st = reader_new(label ? label : "<memory>", &r);
    if (st != TL_OK)
        return st;
    st = parse_file(r, buf, len, flags);
    if (st != TL_OK) {
        tl_ckpt_close(r);
        return st;
    }
    *out = r;
    return TL_OK;
}

tl_status tl_ckpt_open(const char *path, unsigned flags, tl_ckpt_reader **out)
{
    *out = NULL;
    if (path == NULL)
        return tl_error(TL_EINVAL, "checkpoint path is NULL");
    tl_ckpt_reader *r;
    tl_status st = reader_new(path, &r);
    if (st != TL_OK)
        return st;
    st = tl_io_map_file(path, &r->map);
    if (st == TL_OK)
        st = parse_file(r, r->map.data, r->map.len, flags);
    if (st != TL_OK) {
        tl_ckpt_close(r);
        return st;
    }
    *out = r;
    return TL_OK;
}

void tl_ckpt_close(tl_ckpt_reader *r)
{
    if (r == NULL)
        return;
    for (int i = 0; i < r->nt; i++) {
        tl_free(r->t[i].name);
        tl_free(r->t[i].shape);
    }
    for (int i = 0; i < r->nmeta; i++) {
        tl_free(r->mkey[i]);
        tl_free(r->mval[i]);
    }
    tl_free(r->t);
    tl_free(r->by_name);
    tl_free(r->mkey);
    tl_free(r->mval);
    tl_io_unmap(&r->map);
    tl_free(r->label);
    tl_free(r);
}

int tl_ckpt_num_tensors(const tl_ckpt_reader *r)
{
    return r->nt;
}

static void fill_info(const tl_ckpt_reader *r, const rtensor *t, tl_ckpt_tensor_info *info)
{
    info->name = t->name;
    info->dtype = t->dtype;
    info->rank = t->rank;
    info->shape = t->shape;
    info->bytes = t->end - t->begin;
    info->offset = t->begin;
    info->data = info->bytes ? r->data + t->begin : NULL;
}

tl_status tl_ckpt_tensor(const tl_ckpt_reader *r, int i, tl_ckpt_tensor_info *info)
{
    if (i < 0 || i >= r->nt)
        return tl_error(TL_EINVAL, "%s: tensor index %d is outside [0, %d)", r->label, i, r->nt);
    fill_info(r, &r->t[i], info);
    return TL_OK;
}

tl_status tl_ckpt_find(const tl_ckpt_reader *r, const char *name, tl_ckpt_tensor_info *info)
{
    int lo = 0, hi = r->nt;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(r->t[r->by_name[mid]].name, name);
        if (c == 0) {
            fill_info(r, &r->t[r->by_name[mid]], info);
            return TL_OK;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return tl_error(TL_ENOTFOUND, "%s: no tensor '%s'", r->label, name);
}

const char *tl_ckpt_meta(const tl_ckpt_reader *r, const char *key)
{
    for (int i = 0; i < r->nmeta; i++)
        if (strcmp(r->mkey[i], key) == 0)
            return r->mval[i];
    return NULL;
}

int tl_ckpt_num_meta(const tl_ckpt_reader *r)
{
    return r->nmeta;
}

void tl_ckpt_meta_at(const tl_ckpt_reader *r, int i, const char **key, const char **value)
{
    bool in = i >= 0 && i < r->nmeta;
    *key = in ? r->mkey[i] : NULL;
    *value = in ? r->mval[i] : NULL;
}

unsigned tl_ckpt_checksums(const tl_ckpt_reader *r)
{
    return r->checksums;
}

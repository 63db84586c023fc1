/* idx.c — the IDX reader of tpuloop/data.h: plain or gzip, from a file or
 * from memory, through one byte stream so both sources meet the same checks.
 *
 * zlib's inflate is driven directly rather than through gzopen/gzread so
 * that (1) memory and files share one code path, (2) zlib's allocations go
 * through tpuloop's hook, where the allocation-failure tests can reach them,
 * and (3) bytes after the gzip stream are seen and reported instead of being
 * silently skipped, as gzread does. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "../base/base_int.h"
#include "tpuloop/data.h"

#define FILE_CHUNK ((size_t)1 << 16)       /* fread size for files */
#define MEM_CHUNK ((size_t)1 << 30)        /* slices of memory input handed to zlib (avail_in is 32-bit) */
#define FIRST_ALLOC ((size_t)1 << 20)      /* data buffer before it grows */
#define TRAILING_COUNT_MAX ((uint64_t)1 << 20) /* stop counting trailing bytes here */

struct tl_idx {
    tl_idx_dtype dtype;
    int ndim;
    int64_t dims[TL_IDX_MAX_NDIM]; /* (ndim) */
    int64_t count;
    void *data; /* (count) elements of dtype, host order */
};

/* ---- the byte stream ------------------------------------------------------ */

typedef struct stream {
    const char *name;
    const tl_idx_options *opts;
    FILE *f;                  /* file source, or NULL for memory */
    unsigned char *fbuf;      /* (FILE_CHUNK) file read buffer */
    const unsigned char *mem; /* memory source */
    size_t mem_len, mem_pos;
    const unsigned char *raw; /* unread raw bytes; for gzip, zlib's next_in is the window instead */
    size_t raw_len;
    bool raw_eof; /* the source has no bytes beyond the window */
    bool gz;
    bool zs_live;
    bool gz_end; /* the last gzip member ended and nothing follows */
    z_stream zs;
    uint64_t delivered; /* bytes handed out (after decompression) */
} stream;

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return tl_alloc_array(items, size);
}

static void z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    tl_free(p);
}

/* Makes the raw window non-empty unless the source is exhausted. */
static tl_status raw_fill(stream *s)
{
    if (s->raw_len > 0 || s->raw_eof)
        return TL_OK;
    if (s->f == NULL) {
        size_t n = s->mem_len - s->mem_pos;
        if (n > MEM_CHUNK)
            n = MEM_CHUNK;
        s->raw = s->mem + s->mem_pos;
        s->raw_len = n;
        s->mem_pos += n;
        s->raw_eof = n == 0;
        return TL_OK;
    }
    size_t n = fread(s->fbuf, 1, FILE_CHUNK, s->f);
    if (n == 0 && ferror(s->f))
        return tl_error(TL_EIO, "%s: read error: %s", s->name, strerror(errno));
    s->raw = s->fbuf;
    s->raw_len = n;
    s->raw_eof = n == 0;
    return TL_OK;
}

/* Detects gzip from the first two bytes and sets up inflate for it. */
static tl_status stream_start(stream *s)
{
    tl_status st = raw_fill(s);
    if (st != TL_OK)
        return st;
    if (s->raw_len < 2 || s->raw[0] != 0x1f || s->raw[1] != 0x8b)
        return TL_OK;
    s->gz = true;
    s->zs.zalloc = z_alloc;
    s->zs.zfree = z_free;
    s->zs.opaque = Z_NULL;
    s->zs.next_in = (Bytef *)(uintptr_t)s->raw; /* zlib's API is not const; it only reads */
    s->zs.avail_in = (uInt)s->raw_len;
    s->raw_len = 0;
    int rc = inflateInit2(&s->zs, 16 + MAX_WBITS); /* 16: gzip wrapper only */
    if (rc == Z_MEM_ERROR)
        return tl_error(TL_ENOMEM, "%s: out of memory for the gzip decoder", s->name);
    if (rc != Z_OK)
        return tl_error(TL_ERUNTIME, "%s: zlib inflateInit2 failed (%d)", s->name, rc);
    s->zs_live = true;
    return TL_OK;
}

static void stream_close(stream *s)
{
    if (s->zs_live)
        inflateEnd(&s->zs);
    s->zs_live = false;
}

/* Makes zlib's input non-empty unless the source is exhausted. */
static tl_status gz_fill(stream *s)
{
    if (s->zs.avail_in > 0)
        return TL_OK;
    tl_status st = raw_fill(s);
    if (st != TL_OK)
        return st;
    s->zs.next_in = (Bytef *)(uintptr_t)s->raw;
    s->zs.avail_in = (uInt)s->raw_len;
    s->raw_len = 0;
    return TL_OK;
}

/* After a gzip member ends: another member follows (gunzip reads them all as
 * one stream), the input ends, or something else follows, which is garbage. */
static tl_status gz_member_end(stream *s)
{
    tl_status st = gz_fill(s);
    if (st != TL_OK)
        return st;
    if (s->zs.avail_in == 0) {
        s->gz_end = true;
        return TL_OK;
    }
    if (s->zs.next_in[0] == 0x1f) {
        /* inflate itself rejects a bad header after the first byte */
        inflateReset(&s->zs);
        return TL_OK;
    }
    uint64_t extra = s->zs.avail_in;
    if (!s->opts->allow_trailing) {
        while (extra < TRAILING_COUNT_MAX) {
            s->zs.avail_in = 0;
            if ((st = gz_fill(s)) != TL_OK)
                return st;
            if (s->zs.avail_in == 0)
                break;
            extra += s->zs.avail_in;
        }
        return tl_error(TL_EPARSE, "%s: %s%llu bytes of trailing garbage after the gzip stream", s->name,
                        extra >= TRAILING_COUNT_MAX ? "at least " : "", (unsigned long long)extra);
    }
    tl_log(TL_LOG_WARN, "%s: ignoring trailing garbage after the gzip stream", s->name);
    s->gz_end = true;
    return TL_OK;
}

/* Reads up to n bytes; *got < n only at the end of the data. */
static tl_status stream_read(stream *s, void *dst, size_t n, size_t *got)
{
    unsigned char *out = dst;
    size_t have = 0;
    tl_status st = TL_OK;
    while (have < n) {
        if (!s->gz) {
            if ((st = raw_fill(s)) != TL_OK)
                break;
            if (s->raw_len == 0)
                break;
            size_t k = n - have < s->raw_len ? n - have : s->raw_len;
            memcpy(out + have, s->raw, k);
            s->raw += k;
            s->raw_len -= k;
            have += k;
            continue;
        }
        if (s->gz_end)
            break;
        if ((st = gz_fill(s)) != TL_OK)
            break;
        if (s->zs.avail_in == 0) {
            st = tl_error(TL_EPARSE, "%s: the gzip stream is truncated (%llu bytes decompressed before it ended)",
                          s->name, (unsigned long long)(s->delivered + have));
            break;
        }
        size_t want = n - have;
        s->zs.next_out = out + have;
        s->zs.avail_out = want > UINT_MAX ? UINT_MAX : (uInt)want;
        uInt before = s->zs.avail_out;
        int rc = inflate(&s->zs, Z_NO_FLUSH);
        have += before - s->zs.avail_out;
        if (rc == Z_STREAM_END) {
            if ((st = gz_member_end(s)) != TL_OK)
                break;
        } else if (rc == Z_MEM_ERROR) {
            st = tl_error(TL_ENOMEM, "%s: out of memory for the gzip decoder", s->name);
            break;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            st = tl_error(TL_EPARSE, "%s: corrupt gzip data: %s", s->name,
                          s->zs.msg ? s->zs.msg : "inflate failed");
            break;
        }
    }
    s->delivered += have;
    *got = have;
    return st;
}

/* ---- the format ----------------------------------------------------------- */

size_t tl_idx_dtype_size(tl_idx_dtype t)
{
    switch (t) {
    case TL_IDX_U8:
    case TL_IDX_I8:
        return 1;
    case TL_IDX_I16:
        return 2;
    case TL_IDX_I32:
    case TL_IDX_F32:
        return 4;
    case TL_IDX_F64:
        return 8;
    }
    return 0;
}

const char *tl_idx_dtype_name(tl_idx_dtype t)
{
    switch (t) {
    case TL_IDX_U8:
        return "u8";
    case TL_IDX_I8:
        return "i8";
    case TL_IDX_I16:
        return "i16";
    case TL_IDX_I32:
        return "i32";
    case TL_IDX_F32:
        return "f32";
    case TL_IDX_F64:
        return "f64";
    }
    return "unknown";
}

void tl_idx_options_init(tl_idx_options *o)
{
    *o = (tl_idx_options){TL_IDX_DEFAULT_MAX_BYTES, false};
}

/* "60000 x 28 x 28" into buf. */
static void format_dims(char *buf, size_t cap, const int64_t *dims, int ndim)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && len < cap; i++) {
        int n = snprintf(buf + len, cap - len, "%s%lld", i ? " x " : "", (long long)dims[i]);
        if (n < 0)
            return;
        len += (size_t)n;
    }
}

/* Big-endian elements to host order, in place; byte-wise so it holds on
 * hosts of either order and never reads misaligned. */
static void to_host_order(unsigned char *p, int64_t count, size_t esize)
{
    for (int64_t i = 0; i < count; i++, p += esize) {
        if (esize == 2) {
            uint16_t v = (uint16_t)((unsigned)p[0] << 8 | p[1]);
            memcpy(p, &v, 2);
        } else if (esize == 4) {
            uint32_t v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
            memcpy(p, &v, 4);
        } else if (esize == 8) {
            uint64_t v = 0;
            for (int b = 0; b < 8; b++)
                v = v << 8 | p[b];
            memcpy(p, &v, 8);
        }
    }
}

/* Reads the header into a (dtype, ndim, dims, count) and checks it. */
static tl_status read_header(stream *s, tl_idx *a, uint64_t *nbytes)
{
    unsigned char h[4 + 4 * TL_IDX_MAX_NDIM];
    size_t got;
    tl_status st = stream_read(s, h, 4, &got);
    if (st != TL_OK)
        return st;
    if (got == 0)
        return tl_error(TL_EPARSE, "%s: empty file; an IDX file has at least a 4-byte header", s->name);
    if (got < 4)
        return tl_error(TL_EPARSE, "%s: the file ends after %zu bytes, inside the 4-byte IDX header", s->name, got);
    if (h[0] != 0 || h[1] != 0)
        return tl_error(TL_EPARSE,
                        "%s: bad magic %02x %02x %02x %02x: an IDX file begins with two zero bytes, "
                        "a type byte and a dimension count (or is gzip, 1f 8b)",
                        s->name, h[0], h[1], h[2], h[3]);
    a->dtype = (tl_idx_dtype)h[2];
    size_t esize = tl_idx_dtype_size(a->dtype);
    if (esize == 0)
        return tl_error(TL_EPARSE,
                        "%s: unknown IDX type byte 0x%02x; expected 0x08 (u8), 0x09 (i8), 0x0B (i16), "
                        "0x0C (i32), 0x0D (f32) or 0x0E (f64)",
                        s->name, h[2]);
    a->ndim = h[3];
    if (a->ndim < 1 || a->ndim > TL_IDX_MAX_NDIM)
        return tl_error(TL_EPARSE, "%s: IDX header gives %d dimensions; 1 to %d are allowed", s->name, a->ndim,
                        TL_IDX_MAX_NDIM);
    size_t dbytes = 4 * (size_t)a->ndim;
    if ((st = stream_read(s, h + 4, dbytes, &got)) != TL_OK)
        return st;
    if (got < dbytes)
        return tl_error(TL_EPARSE, "%s: the header declares %d dimensions (%zu header bytes) but the file ends after %zu",
                        s->name, a->ndim, 4 + dbytes, 4 + got);
    bool empty = false;
    for (int i = 0; i < a->ndim; i++) {
        const unsigned char *d = h + 4 + 4 * i;
        a->dims[i] = (int64_t)((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3]);
        empty = empty || a->dims[i] == 0;
    }
    char dims[160];
    format_dims(dims, sizeof dims, a->dims, a->ndim);
    uint64_t count = 1;
    if (empty)
        count = 0;
    for (int i = 0; i < a->ndim && !empty; i++) {
        if (count > UINT64_MAX / (uint64_t)a->dims[i] || count * (uint64_t)a->dims[i] > UINT64_MAX / esize)
            return tl_error(TL_EINVAL, "%s: IDX dimensions %s of %s overflow 64 bits", s->name, dims,
                            tl_idx_dtype_name(a->dtype));
        count *= (uint64_t)a->dims[i];
    }
    uint64_t max = s->opts->max_bytes ? s->opts->max_bytes : TL_IDX_DEFAULT_MAX_BYTES;
    if (count * esize > max || count * esize > SIZE_MAX || count > INT64_MAX)
        return tl_error(TL_EINVAL, "%s: IDX dimensions %s of %s make %llu data bytes, more than the limit of %llu "
                        "(tl_idx_options.max_bytes)",
                        s->name, dims, tl_idx_dtype_name(a->dtype), (unsigned long long)(count * esize),
                        (unsigned long long)max);
    a->count = (int64_t)count;
    *nbytes = count * esize;
    return TL_OK;
}

/* Reads nbytes of data into a->data, growing the buffer as bytes arrive so
 * that a header claiming gigabytes over a short input allocates little. */
static tl_status read_data(stream *s, tl_idx *a, uint64_t nbytes)
{
    size_t total = (size_t)nbytes;
    size_t cap = total < FIRST_ALLOC ? total : FIRST_ALLOC;
    unsigned char *buf = tl_malloc(cap);
    if (buf == NULL)
        return tl_error(TL_ENOMEM, "%s: out of memory for %zu bytes", s->name, cap);
    size_t have = 0;
    while (have < total) {
        if (have == cap) {
            size_t ncap = cap > total / 2 ? total : cap * 2;
            unsigned char *nb = tl_realloc(buf, ncap);
            if (nb == NULL) {
                tl_free(buf);
                return tl_error(TL_ENOMEM, "%s: out of memory for %zu bytes", s->name, ncap);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got;
        tl_status st = stream_read(s, buf + have, cap - have, &got);
        have += got;
        if (st != TL_OK) {
            tl_free(buf);
            return st;
        }
        if (have < cap)
            break;
    }
    if (have < total) {
        tl_free(buf);
        char dims[160];
        format_dims(dims, sizeof dims, a->dims, a->ndim);
        uint64_t hdr = 4 + 4 * (uint64_t)a->ndim;
        return tl_error(TL_EPARSE,
                        "%s: the data is cut short: the header declares %s of %s, %llu data bytes (%llu with the "
                        "header), but only %llu data bytes (%llu in all) could be read%s",
                        s->name, dims, tl_idx_dtype_name(a->dtype), (unsigned long long)nbytes,
                        (unsigned long long)(nbytes + hdr), (unsigned long long)have,
                        (unsigned long long)(have + hdr), s->gz ? " after gzip decompression" : "");
    }
    a->data = buf;
    return TL_OK;
}

/* Anything after the data is an error unless the options allow it. */
static tl_status check_trailing(stream *s, uint64_t expected)
{
    unsigned char scratch[4096];
    uint64_t extra = 0;
    for (;;) {
        size_t got;
        tl_status st = stream_read(s, scratch, sizeof scratch, &got);
        if (st != TL_OK)
            return st;
        extra += got;
        if (got < sizeof scratch || extra >= TRAILING_COUNT_MAX || (extra > 0 && s->opts->allow_trailing))
            break;
    }
    if (extra == 0)
        return TL_OK;
    if (s->opts->allow_trailing) {
        tl_log(TL_LOG_WARN, "%s: ignoring bytes after the %llu the IDX header declares", s->name,
               (unsigned long long)expected);
        return TL_OK;
    }
    return tl_error(TL_EPARSE,
                    "%s: %s%llu trailing bytes after the %llu bytes the IDX header declares "
                    "(wrong dimensions in the header?)%s",
                    s->name, extra >= TRAILING_COUNT_MAX ? "at least " : "", (unsigned long long)extra,
                    (unsigned long long)expected, s->gz ? ", after gzip decompression" : "");
}

static tl_status read_stream(stream *s, tl_idx **out)
{
    tl_idx *a = tl_calloc(1, sizeof *a);
    if (a == NULL)
        return tl_error(TL_ENOMEM, "%s: out of memory", s->name);
    uint64_t nbytes = 0;
    tl_status st = stream_start(s);
    if (st == TL_OK)
        st = read_header(s, a, &nbytes);
    if (st == TL_OK)
        st = read_data(s, a, nbytes);
    if (st == TL_OK)
        st = check_trailing(s, 4 + 4 * (uint64_t)a->ndim + nbytes);
    stream_close(s);
    if (st != TL_OK) {
        tl_idx_destroy(a);
        return st;
    }
    to_host_order(a->data, a->count, tl_idx_dtype_size(a->dtype));
    *out = a;
    return TL_OK;
}

tl_status tl_idx_read_memory(const void *data, size_t size, const char *name, const tl_idx_options *opts,
                             tl_idx **out)
{
    *out = NULL;
    tl_idx_options defaults;
    tl_idx_options_init(&defaults);
    if (data == NULL && size > 0)
        return tl_error(TL_EINVAL, "tl_idx_read_memory: data is NULL but size is %zu", size);
    stream s = {.name = name ? name : "<memory>", .opts = opts ? opts : &defaults};
    s.mem = data;
    s.mem_len = size;
    return read_stream(&s, out);
}

tl_status tl_idx_read_file(const char *path, const tl_idx_options *opts, tl_idx **out)
{
    *out = NULL;
    if (path == NULL)
        return tl_error(TL_EINVAL, "tl_idx_read_file: path is NULL");
    tl_idx_options defaults;
    tl_idx_options_init(&defaults);
    stream s = {.name = path, .opts = opts ? opts : &defaults};
    s.fbuf = tl_malloc(FILE_CHUNK);
    if (s.fbuf == NULL)
        return tl_error(TL_ENOMEM, "%s: out of memory", path);
    s.f = fopen(path, "rb");
    if (s.f == NULL) {
        int e = errno;
        tl_free(s.fbuf);
        return tl_error(TL_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    tl_status st = read_stream(&s, out);
    fclose(s.f);
    tl_free(s.fbuf);
    return st;
}

void tl_idx_destroy(tl_idx *a)
{
    if (a == NULL)
        return;
    tl_free(a->data);
    tl_free(a);
}

tl_idx_dtype tl_idx_type(const tl_idx *a) { return a->dtype; }
int tl_idx_ndim(const tl_idx *a) { return a->ndim; }
int64_t tl_idx_count(const tl_idx *a) { return a->count; }
const void *tl_idx_data(const tl_idx *a) { return a->data; }

int64_t tl_idx_dim(const tl_idx *a, int i)
{
    if (i < 0 || i >= a->ndim)
        return -1;
    return a->dims[i];
}

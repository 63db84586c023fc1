/* tfrecord_zlib.c — GZIP and ZLIB compressed TFRecord files: a streaming
 * inflating byte source under the TFRecord reader, and a deflating record
 * writer (see compress.h). */
#include "compress.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include "../base/base_int.h"

/* Compressed bytes read at a time, and compressed bytes buffered before a
 * write(2): large enough that system calls are not the cost, small next to
 * a record. */
#define IN_BUFFER (64 * 1024)
#define OUT_BUFFER (64 * 1024)

const char *tl_tfrecord_compression_name(tl_tfrecord_compression c)
{
    switch (c) {
    case TL_TFRECORD_NONE: return "";
    case TL_TFRECORD_GZIP: return "GZIP";
    case TL_TFRECORD_ZLIB: return "ZLIB";
    case TL_TFRECORD_AUTO: return "AUTO";
    }
    return "?";
}

tl_status tl_tfrecord_compression_parse(const char *s, tl_tfrecord_compression *out)
{
    static const struct {
        const char *name;
        tl_tfrecord_compression c;
    } names[] = {{"", TL_TFRECORD_NONE},
                 {"NONE", TL_TFRECORD_NONE},
                 {"GZIP", TL_TFRECORD_GZIP},
                 {"ZLIB", TL_TFRECORD_ZLIB},
                 {"AUTO", TL_TFRECORD_AUTO}};
    for (size_t i = 0; s != NULL && i < TL_ARRAY_LEN(names); i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].c;
            return TL_OK;
        }
    }
    return tl_error(TL_EINVAL, "compression_type \"%s\" is not one of \"\", \"NONE\", \"GZIP\", \"ZLIB\", \"AUTO\"",
                    s != NULL ? s : "(null)");
}

tl_tfrecord_compression tl_tfrecord_sniff_compression(const uint8_t *head, size_t n)
{
    if (n >= TL_TFRECORD_HEADER_SIZE) {
        uint64_t len = 0;
        for (int i = 7; i >= 0; i--)
            len = (len << 8) | head[i];
        uint8_t want[TL_TFRECORD_HEADER_SIZE];
        tl_tfrecord_encode_header(want, len);
        if (memcmp(want, head, sizeof want) == 0)
            return TL_TFRECORD_NONE;
    }
    if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b && (n < 3 || head[2] == 8))
        return TL_TFRECORD_GZIP;
    /* RFC 1950: CM 8 (deflate), CINFO <= 7, FCHECK makes CMF*256+FLG a
     * multiple of 31, and no FDICT (TensorFlow never writes one). */
    if (n >= 2 && (head[0] & 0x0f) == 8 && (head[0] >> 4) <= 7 && ((unsigned)head[0] << 8 | head[1]) % 31 == 0 &&
        (head[1] & 0x20) == 0)
        return TL_TFRECORD_ZLIB;
    return TL_TFRECORD_NONE;
}

static bool valid_compression(tl_tfrecord_compression c)
{
    return c == TL_TFRECORD_NONE || c == TL_TFRECORD_GZIP || c == TL_TFRECORD_ZLIB || c == TL_TFRECORD_AUTO;
}

/* zlib allocates through tpuloop's hook, so allocation-failure tests reach it. */
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

/* ======================================================================== */
/* Reader                                                                   */
/* ======================================================================== */

typedef enum { IN_MEMORY, IN_FILE, IN_STREAM } in_kind;

/* Where the inflater is: before any member, inside one, just after a GZIP
 * member (another may follow), or finished. */
typedef enum { ST_START, ST_MEMBER, ST_BETWEEN, ST_DONE } zstate;

struct tl_tfrecord_zreader {
    char *name;
    tl_tfrecord_compression comp; /* AUTO until decided */
    in_kind kind;
    const uint8_t *mem; /* (mem_size) IN_MEMORY, borrowed */
    size_t mem_size, mem_pos;
    FILE *file; /* IN_FILE */
    bool own_file;
    tl_tfrecord_read_fn read_fn; /* IN_STREAM */
    void *ud;
    uint8_t *inbuf; /* (IN_BUFFER) file and stream input */
    bool in_eof;
    uint64_t in_total; /* compressed bytes handed to strm.next_in so far */
    z_stream strm;
    bool strm_init;
    zstate state;
    uint64_t out_total; /* uncompressed bytes produced */
    int deferred;       /* an inflate error met after producing bytes, reported next call; Z_OK: none */
    tl_tfrecord_reader *reader;
};

static uint64_t comp_offset(const tl_tfrecord_zreader *z)
{
    return z->in_total - z->strm.avail_in;
}

/* Refills strm.next_in (which must be empty) from the source; sets in_eof
 * at its end. */
static tl_status fill(tl_tfrecord_zreader *z)
{
    size_t k = 0;
    if (z->kind == IN_MEMORY) {
        k = z->mem_size - z->mem_pos;
        if (k > UINT_MAX)
            k = UINT_MAX;
        z->strm.next_in = (Bytef *)(uintptr_t)(z->mem + z->mem_pos);
        z->mem_pos += k;
    } else if (z->kind == IN_FILE) {
        k = fread(z->inbuf, 1, IN_BUFFER, z->file);
        if (k == 0 && ferror(z->file)) {
            int e = errno;
            clearerr(z->file);
            return tl_error(TL_EIO, "reading compressed byte offset %llu failed: %s",
                            (unsigned long long)z->in_total, strerror(e));
        }
        z->strm.next_in = z->inbuf;
    } else {
        tl_status st = z->read_fn(z->ud, z->inbuf, IN_BUFFER, &k);
        if (st != TL_OK)
            return tl_error(st, "reading compressed byte offset %llu failed: %s", (unsigned long long)z->in_total,
                            tl_last_error());
        if (k > IN_BUFFER)
            return tl_error(TL_ERUNTIME, "the stream's read function returned %zu bytes when %d were asked for", k,
                            IN_BUFFER);
        z->strm.next_in = z->inbuf;
    }
    z->strm.avail_in = (uInt)k;
    z->in_total += k;
    if (k == 0)
        z->in_eof = true;
    return TL_OK;
}

static tl_status start_inflate(tl_tfrecord_zreader *z)
{
    z->strm.zalloc = z_alloc;
    z->strm.zfree = z_free;
    z->strm.opaque = Z_NULL;
    /* 16 + MAX_WBITS: a GZIP wrapper only, as TensorFlow asks for it (32 +
     * would also accept ZLIB, and AUTO has already chosen). */
    int ret = inflateInit2(&z->strm, z->comp == TL_TFRECORD_GZIP ? 16 + MAX_WBITS : MAX_WBITS);
    if (ret != Z_OK)
        return ret == Z_MEM_ERROR ? tl_error_oom()
                                  : tl_error(TL_ERUNTIME, "%s: inflateInit2 failed (%d)", z->name, ret);
    z->strm_init = true;
    return TL_OK;
}

/* For AUTO on a file or stream: reads the first bytes (up to a TFRecord
 * header's worth, through short reads) and decides. They stay in inbuf as
 * the first input; the caller starts inflate when one is needed. */
static tl_status decide(tl_tfrecord_zreader *z)
{
    size_t have = 0;
    while (have < TL_TFRECORD_HEADER_SIZE && !z->in_eof) {
        size_t k = 0;
        if (z->kind == IN_FILE) {
            k = fread(z->inbuf + have, 1, TL_TFRECORD_HEADER_SIZE - have, z->file);
            if (k == 0 && ferror(z->file))
                return tl_error(TL_EIO, "cannot read its first bytes: %s", strerror(errno));
        } else {
            tl_status st = z->read_fn(z->ud, z->inbuf + have, TL_TFRECORD_HEADER_SIZE - have, &k);
            if (st != TL_OK)
                return tl_error(st, "reading its first bytes failed: %s", tl_last_error());
            if (k > TL_TFRECORD_HEADER_SIZE - have)
                return tl_error(TL_ERUNTIME, "the stream's read function returned %zu bytes when %zu were asked for",
                                k, TL_TFRECORD_HEADER_SIZE - have);
        }
        if (k == 0)
            z->in_eof = true;
        have += k;
    }
    z->strm.next_in = z->inbuf;
    z->strm.avail_in = (uInt)have;
    z->in_total = have;
    z->comp = tl_tfrecord_sniff_compression(z->inbuf, have);
    return TL_OK;
}

/* NONE through the stream interface (a stream or unseekable file that AUTO
 * found plain): the sniffed bytes, then the source itself. */
static tl_status passthrough(tl_tfrecord_zreader *z, uint8_t *buf, size_t n, size_t *got)
{
    if (z->strm.avail_in == 0 && !z->in_eof) {
        tl_status st = fill(z);
        if (st != TL_OK)
            return st;
    }
    size_t k = z->strm.avail_in < n ? z->strm.avail_in : n;
    memcpy(buf, z->strm.next_in, k);
    z->strm.next_in += k;
    z->strm.avail_in -= (uInt)k;
    *got = k;
    return TL_OK;
}

/* Why inflate stopped, in words a user can act on. */
static tl_status inflate_error(tl_tfrecord_zreader *z, int ret)
{
    const char *kind = tl_tfrecord_compression_name(z->comp);
    if (ret == Z_MEM_ERROR)
        return tl_error(TL_ENOMEM, "out of memory inflating %s data at compressed byte offset %llu", kind,
                        (unsigned long long)comp_offset(z));
    const char *msg = z->strm.msg != NULL ? z->strm.msg : "no detail from zlib";
    const char *what = "data corrupt";
    if (ret == Z_NEED_DICT)
        what = "stream needs a preset dictionary (TFRecord files never use one)";
    else if (strcmp(msg, "incorrect data check") == 0)
        what = z->comp == TL_TFRECORD_GZIP ? "member trailer has a bad CRC-32" : "trailer has a bad Adler-32";
    else if (strcmp(msg, "incorrect length check") == 0)
        what = "member trailer has a bad ISIZE (the uncompressed length)";
    else if (strcmp(msg, "incorrect header check") == 0 || strcmp(msg, "unknown compression method") == 0 ||
             strcmp(msg, "header crc mismatch") == 0 || strcmp(msg, "unknown header flags set") == 0 ||
             strcmp(msg, "invalid window size") == 0)
        what = "header is not valid";
    return tl_error(TL_EPARSE, "%s %s at compressed byte offset %llu (uncompressed byte offset %llu): %s", kind, what,
                    (unsigned long long)comp_offset(z), (unsigned long long)z->out_total, msg);
}

/* The tl_tfrecord_read_fn under the record reader: inflates into buf until
 * at least one byte is out, the input ends, or something is wrong. */
static tl_status zread(void *ud, void *vbuf, size_t n, size_t *got)
{
    tl_tfrecord_zreader *z = ud;
    uint8_t *buf = vbuf;
    *got = 0;
    if (z->comp == TL_TFRECORD_AUTO) {
        tl_status st = decide(z);
        if (st == TL_OK && z->comp != TL_TFRECORD_NONE) {
            st = start_inflate(z);
            tl_tfrecord_reader_set_decompressed(z->reader, tl_tfrecord_compression_name(z->comp));
        }
        if (st != TL_OK)
            return st;
    }
    if (z->comp == TL_TFRECORD_NONE)
        return passthrough(z, buf, n, got);
    if (z->deferred != Z_OK)
        return inflate_error(z, z->deferred);
    if (n == 0)
        return TL_OK;
    uInt room = n > UINT_MAX ? UINT_MAX : (uInt)n;
    z->strm.next_out = buf;
    z->strm.avail_out = room;
    for (;;) {
        if (z->strm.avail_in == 0 && !z->in_eof) {
            tl_status st = fill(z);
            if (st != TL_OK)
                return st;
        }
        *got = room - z->strm.avail_out;
        if (z->state == ST_DONE) {
            if (*got > 0 || z->strm.avail_in == 0)
                return TL_OK;
            /* The ZLIB stream ended and bytes follow (GZIP starts a member). */
            return tl_error(TL_EPARSE,
                            "ZLIB data continues after the end of its stream at compressed byte offset %llu "
                            "(uncompressed byte offset %llu): one stream per file is all a reader may assume",
                            (unsigned long long)comp_offset(z), (unsigned long long)z->out_total);
        }
        if (z->state == ST_START || z->state == ST_BETWEEN) {
            if (z->strm.avail_in == 0) { /* no input left: an empty file, or the end after a member */
                z->state = ST_DONE;
                return TL_OK;
            }
            if (z->state == ST_BETWEEN && inflateReset(&z->strm) != Z_OK)
                return tl_error(TL_ERUNTIME, "inflateReset failed at compressed byte offset %llu",
                                (unsigned long long)comp_offset(z));
            z->state = ST_MEMBER;
        }
        uInt before = z->strm.avail_out;
        int ret = inflate(&z->strm, Z_NO_FLUSH);
        z->out_total += before - z->strm.avail_out;
        *got = room - z->strm.avail_out;
        if (ret == Z_STREAM_END) {
            z->state = z->comp == TL_TFRECORD_GZIP ? ST_BETWEEN : ST_DONE;
        } else if (ret == Z_BUF_ERROR || (ret == Z_OK && before == z->strm.avail_out && z->strm.avail_in == 0)) {
            /* No progress: more input needed, and there is none. */
            if (z->in_eof && z->strm.avail_in == 0 && *got == 0)
                return tl_error(TL_EPARSE,
                                "%s stream truncated: the file ends at compressed byte offset %llu (uncompressed "
                                "byte offset %llu) before the end of its %s",
                                tl_tfrecord_compression_name(z->comp), (unsigned long long)comp_offset(z),
                                (unsigned long long)z->out_total,
                                z->comp == TL_TFRECORD_GZIP ? "member's trailer" : "trailer");
        } else if (ret != Z_OK) {
            /* Hand out what came before the fault first, so that what a
             * reader sees does not depend on how the input was chunked. */
            if (*got == 0)
                return inflate_error(z, ret);
            z->deferred = ret;
        }
        if (*got > 0)
            return TL_OK;
    }
}

static tl_status zreader_new(const char *name, const char *fallback, tl_tfrecord_compression c, in_kind kind,
                             tl_tfrecord_zreader **out)
{
    *out = NULL;
    if (!valid_compression(c))
        return tl_error(TL_EINVAL, "%s: compression %d is not NONE, GZIP, ZLIB or AUTO", name ? name : fallback,
                        (int)c);
    tl_tfrecord_zreader *z = tl_calloc(1, sizeof *z);
    if (z == NULL)
        return tl_error_oom();
    z->name = tl_strdup(name != NULL ? name : fallback);
    if (z->name == NULL) {
        tl_free(z);
        return tl_error_oom();
    }
    z->comp = c;
    z->kind = kind;
    if (kind != IN_MEMORY) {
        z->inbuf = tl_malloc(IN_BUFFER);
        if (z->inbuf == NULL) {
            tl_tfrecord_zreader_destroy(z);
            return tl_error_oom();
        }
    }
    *out = z;
    return TL_OK;
}

/* Puts the record reader on top: the native memory or file reader when the
 * bytes are plain and the source can be read directly (so seeking works),
 * else the inflating stream. */
static tl_status zreader_finish(tl_tfrecord_zreader *z, bool direct, tl_tfrecord_zreader **out)
{
    tl_status st;
    if (z->comp == TL_TFRECORD_GZIP || z->comp == TL_TFRECORD_ZLIB) {
        st = start_inflate(z);
        if (st != TL_OK)
            goto fail;
    }
    if (direct && z->kind == IN_MEMORY)
        st = tl_tfrecord_reader_create_memory(z->mem, z->mem_size, z->name, &z->reader);
    else if (direct)
        st = tl_tfrecord_reader_create_file(z->file, z->name, &z->reader);
    else
        st = tl_tfrecord_reader_create_stream(zread, z, z->name, &z->reader);
    if (st != TL_OK)
        goto fail;
    if (z->comp == TL_TFRECORD_GZIP || z->comp == TL_TFRECORD_ZLIB)
        tl_tfrecord_reader_set_decompressed(z->reader, tl_tfrecord_compression_name(z->comp));
    *out = z;
    return TL_OK;
fail:
    tl_tfrecord_zreader_destroy(z);
    *out = NULL;
    return st;
}

tl_status tl_tfrecord_zreader_create_memory(const void *data, size_t size, const char *name,
                                            tl_tfrecord_compression c, tl_tfrecord_zreader **out)
{
    tl_tfrecord_zreader *z;
    tl_status st = zreader_new(name, "<memory>", c, IN_MEMORY, &z);
    if (st != TL_OK)
        return st;
    z->mem = data;
    z->mem_size = data != NULL ? size : 0;
    if (c == TL_TFRECORD_AUTO)
        z->comp = tl_tfrecord_sniff_compression(z->mem, z->mem_size);
    return zreader_finish(z, z->comp == TL_TFRECORD_NONE, out);
}

tl_status tl_tfrecord_zreader_create_stream(tl_tfrecord_read_fn read_fn, void *ud, const char *name,
                                            tl_tfrecord_compression c, tl_tfrecord_zreader **out)
{
    tl_tfrecord_zreader *z;
    tl_status st = zreader_new(name, "<stream>", c, IN_STREAM, &z);
    if (st != TL_OK)
        return st;
    z->read_fn = read_fn;
    z->ud = ud;
    /* Sniffing here would read before the first tl_tfrecord_next; a stream
     * decides at its first read instead. */
    return zreader_finish(z, false, out);
}

tl_status tl_tfrecord_zreader_open(const char *path, tl_tfrecord_compression c, tl_tfrecord_zreader **out)
{
    *out = NULL;
    if (!valid_compression(c))
        return tl_error(TL_EINVAL, "%s: compression %d is not NONE, GZIP, ZLIB or AUTO", path, (int)c);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return tl_error(TL_EIO, "%s: cannot open for reading: %s", path, strerror(errno));
    tl_tfrecord_zreader *z;
    tl_status st = zreader_new(path, "<file>", c, IN_FILE, &z);
    if (st != TL_OK) {
        fclose(f);
        return st;
    }
    z->file = f;
    z->own_file = true;
    bool direct = c == TL_TFRECORD_NONE;
    if (c == TL_TFRECORD_AUTO) {
        st = decide(z);
        if (st != TL_OK) {
            st = tl_error(st, "%s: %s", path, tl_last_error());
            tl_tfrecord_zreader_destroy(z);
            return st;
        }
        /* Plain bytes in a seekable file: hand the file itself to the reader
         * from its start; in a pipe, pass the sniffed bytes through. */
        if (z->comp == TL_TFRECORD_NONE && fseeko(f, 0, SEEK_SET) == 0) {
            direct = true;
            z->strm.avail_in = 0;
        }
    }
    return zreader_finish(z, direct, out);
}

tl_tfrecord_reader *tl_tfrecord_zreader_records(tl_tfrecord_zreader *z) { return z->reader; }

tl_tfrecord_compression tl_tfrecord_zreader_compression(const tl_tfrecord_zreader *z) { return z->comp; }

uint64_t tl_tfrecord_zreader_compressed_offset(const tl_tfrecord_zreader *z)
{
    return z->strm_init ? comp_offset(z) : 0;
}

void tl_tfrecord_zreader_destroy(tl_tfrecord_zreader *z)
{
    if (z == NULL)
        return;
    tl_tfrecord_reader_destroy(z->reader);
    if (z->strm_init)
        inflateEnd(&z->strm);
    if (z->own_file)
        fclose(z->file);
    tl_free(z->inbuf);
    tl_free(z->name);
    tl_free(z);
}

/* ======================================================================== */
/* Writer                                                                   */
/* ======================================================================== */

struct tl_tfrecord_zwriter {
    char *name;
    tl_tfrecord_compression comp;
    tl_tfrecord_writer *plain; /* NONE: the ordinary writer does it all */
    int fd;
    bool own_fd;
    z_stream strm;
    bool strm_init;
    uint8_t *out; /* (OUT_BUFFER) */
    uint64_t bytes;      /* uncompressed */
    uint64_t written;    /* compressed bytes written to fd */
    tl_status err;       /* sticky */
    char *err_msg;
};

static tl_status zwriter_fail(tl_tfrecord_zwriter *w, tl_status st, const char *msg)
{
    if (w->err == TL_OK) {
        w->err = st;
        w->err_msg = tl_strdup(msg);
    }
    return tl_error(w->err, "%s", w->err_msg != NULL ? w->err_msg : msg);
}

static tl_status write_all(tl_tfrecord_zwriter *w, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s: write failed after %llu compressed bytes: %s", w->name,
                     (unsigned long long)w->written, strerror(k < 0 ? errno : EIO));
            return zwriter_fail(w, TL_EIO, msg);
        }
        p += k;
        n -= (size_t)k;
        w->written += (uint64_t)k;
    }
    return TL_OK;
}

/* Deflates p[0..n) with `flush`, writing out each full output buffer; for
 * Z_FINISH until the trailer is out, for Z_SYNC_FLUSH until the flush is. */
static tl_status deflate_bytes(tl_tfrecord_zwriter *w, const uint8_t *p, size_t n, int flush)
{
    do {
        uInt take = n > UINT_MAX ? UINT_MAX : (uInt)n;
        w->strm.next_in = (Bytef *)(uintptr_t)p;
        w->strm.avail_in = take;
        int f = take == n ? flush : Z_NO_FLUSH;
        for (;;) {
            w->strm.next_out = w->out;
            w->strm.avail_out = OUT_BUFFER;
            int ret = deflate(&w->strm, f);
            if (ret == Z_STREAM_ERROR) {
                char msg[256];
                snprintf(msg, sizeof msg, "%s: deflate failed (%d)", w->name, ret);
                return zwriter_fail(w, TL_ERUNTIME, msg);
            }
            tl_status st = write_all(w, w->out, OUT_BUFFER - w->strm.avail_out);
            if (st != TL_OK)
                return st;
            if (f == Z_FINISH ? ret == Z_STREAM_END : w->strm.avail_in == 0 && w->strm.avail_out != 0)
                break;
        }
        if (take > 0) /* p is NULL for a flush */
            p += take;
        n -= take;
    } while (n > 0);
    return TL_OK;
}

tl_status tl_tfrecord_zwriter_create_fd(int fd, const char *name, bool own_fd, tl_tfrecord_compression c, int level,
                                        tl_tfrecord_zwriter **out)
{
    *out = NULL;
    const char *nm = name != NULL ? name : "<output>";
    if (c != TL_TFRECORD_NONE && c != TL_TFRECORD_GZIP && c != TL_TFRECORD_ZLIB)
        return tl_error(TL_EINVAL, "%s: writer compression %d is not NONE, GZIP or ZLIB", nm, (int)c);
    if (level < -1 || level > 9)
        return tl_error(TL_EINVAL, "%s: compression level %d is not -1 (zlib's default) or 0..9", nm, level);
    tl_tfrecord_zwriter *w = tl_calloc(1, sizeof *w);
    if (w == NULL)
        return tl_error_oom();
    w->name = tl_strdup(nm);
    w->comp = c;
    w->fd = fd;
    if (w->name == NULL)
        goto oom;
    if (c == TL_TFRECORD_NONE) {
        tl_status st = tl_tfrecord_writer_create_fd(fd, nm, own_fd, &w->plain);
        if (st != TL_OK)
            goto oom;
        *out = w;
        return TL_OK;
    }
    w->out = tl_malloc(OUT_BUFFER);
    if (w->out == NULL)
        goto oom;
    w->strm.zalloc = z_alloc;
    w->strm.zfree = z_free;
    int ret = deflateInit2(&w->strm, level, Z_DEFLATED, c == TL_TFRECORD_GZIP ? 16 + MAX_WBITS : MAX_WBITS, 8,
                           Z_DEFAULT_STRATEGY);
    if (ret != Z_OK)
        goto oom; /* the arguments are checked, so only memory can fail */
    w->strm_init = true;
    w->own_fd = own_fd;
    *out = w;
    return TL_OK;
oom:
    tl_free(w->out);
    tl_free(w->name);
    tl_free(w);
    return tl_error_oom();
}

tl_status tl_tfrecord_zwriter_open(const char *path, int oflags, tl_tfrecord_compression c, int level,
                                   tl_tfrecord_zwriter **out)
{
    *out = NULL;
    if (c == TL_TFRECORD_ZLIB && (oflags & O_APPEND))
        return tl_error(TL_EINVAL, "%s: a ZLIB file cannot be appended to (its readers stop at the first stream); "
                                   "use GZIP or a new file", path);
    if (c != TL_TFRECORD_NONE && c != TL_TFRECORD_GZIP && c != TL_TFRECORD_ZLIB)
        return tl_error(TL_EINVAL, "%s: writer compression %d is not NONE, GZIP or ZLIB", path, (int)c);
    if (level < -1 || level > 9)
        return tl_error(TL_EINVAL, "%s: compression level %d is not -1 (zlib's default) or 0..9", path, level);
    int fd = open(path, O_WRONLY | O_CLOEXEC | oflags, 0666);
    if (fd < 0) {
        int e = errno;
        tl_error(TL_EIO, "%s: cannot open for writing: %s", path, strerror(e));
        errno = e;
        return TL_EIO;
    }
    tl_status st = tl_tfrecord_zwriter_create_fd(fd, path, true, c, level, out);
    if (st != TL_OK)
        close(fd);
    return st;
}

tl_status tl_tfrecord_zwriter_write(tl_tfrecord_zwriter *w, const void *data, size_t n)
{
    if (w->plain != NULL)
        return tl_tfrecord_write(w->plain, data, n);
    if (w->err != TL_OK)
        return tl_error(w->err, "%s", w->err_msg != NULL ? w->err_msg : "earlier write failed");
    if (data == NULL && n > 0)
        return tl_error(TL_EINVAL, "%s: a record of %zu bytes with no data", w->name, n);
    uint8_t hdr[TL_TFRECORD_HEADER_SIZE], foot[TL_TFRECORD_FOOTER_SIZE];
    tl_tfrecord_encode_header(hdr, n);
    uint32_t crc = tl_tfrecord_data_crc(data, n);
    for (int i = 0; i < 4; i++)
        foot[i] = (uint8_t)(crc >> (8 * i));
    tl_status st = deflate_bytes(w, hdr, sizeof hdr, Z_NO_FLUSH);
    if (st == TL_OK && n > 0)
        st = deflate_bytes(w, data, n, Z_NO_FLUSH);
    if (st == TL_OK)
        st = deflate_bytes(w, foot, sizeof foot, Z_NO_FLUSH);
    if (st == TL_OK)
        w->bytes += sizeof hdr + n + sizeof foot;
    return st;
}

tl_status tl_tfrecord_zwriter_flush(tl_tfrecord_zwriter *w, bool sync)
{
    if (w->plain != NULL)
        return tl_tfrecord_writer_flush(w->plain, sync);
    if (w->err != TL_OK)
        return tl_error(w->err, "%s", w->err_msg != NULL ? w->err_msg : "earlier write failed");
    tl_status st = deflate_bytes(w, NULL, 0, Z_SYNC_FLUSH);
    if (st != TL_OK)
        return st;
    /* Pipes and /dev/null cannot sync; that is not a failure. */
    if (sync && fsync(w->fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s: fsync failed after %llu compressed bytes: %s", w->name,
                 (unsigned long long)w->written, strerror(errno));
        return zwriter_fail(w, TL_EIO, msg);
    }
    return TL_OK;
}

uint64_t tl_tfrecord_zwriter_bytes(const tl_tfrecord_zwriter *w)
{
    return w->plain != NULL ? tl_tfrecord_writer_bytes(w->plain) : w->bytes;
}

tl_status tl_tfrecord_zwriter_destroy(tl_tfrecord_zwriter *w)
{
    if (w == NULL)
        return TL_OK;
    tl_status st;
    if (w->plain != NULL) {
        st = tl_tfrecord_writer_destroy(w->plain);
    } else {
        st = w->err != TL_OK ? tl_error(w->err, "%s", w->err_msg != NULL ? w->err_msg : "earlier write failed")
                             : deflate_bytes(w, NULL, 0, Z_FINISH);
        if (w->own_fd && close(w->fd) != 0 && st == TL_OK)
            st = tl_error(TL_EIO, "%s: close failed: %s", w->name, strerror(errno));
    }
    if (w->strm_init)
        deflateEnd(&w->strm);
    tl_free(w->err_msg);
    tl_free(w->out);
    tl_free(w->name);
    tl_free(w);
    return st;
}

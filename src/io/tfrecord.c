/* tfrecord.c — TFRecord framing: a streaming, CRC-checking record reader over
 * memory, files and callbacks, and a buffered record writer (see tfrecord.h). */
#include "tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "../base/base_int.h"
#include "compress.h"
#include "crc32c.h"

#define WRITE_BUFFER (64 * 1024)
/* The first allocation for a record whose length is not vouched for by a
 * known file size; later ones double, so a lying length costs at most twice
 * the bytes that really follow it. */
#define FIRST_CHUNK (64 * 1024)
/* stdio's buffer for a file the reader opens itself. Its default is the
 * block size, 4 KiB: a read(2) per 4 KiB, which held 700-byte records at
 * 2.6 GB/s from the page cache (make bench, bench_input); with one per
 * 256 KiB they read at 3.6 GB/s. */
#define READ_BUFFER (256 * 1024)

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void tl_tfrecord_encode_header(uint8_t hdr[TL_TFRECORD_HEADER_SIZE], uint64_t len)
{
    put_le64(hdr, len);
    put_le32(hdr + 8, tl_crc32c_mask(tl_crc32c_extend(0, hdr, 8)));
}

uint32_t tl_tfrecord_data_crc(const void *data, size_t n)
{
    return tl_crc32c_mask(tl_crc32c_extend(0, data, n));
}

/* A formatted message in a new tl_malloc'd string (NULL when out of memory). */
static char *vformat(const char *fmt, va_list ap) TL_PRINTF(1, 0);

static char *vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return NULL;
    char *s = tl_malloc((size_t)n + 1);
    if (s != NULL)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

/* A sticky error: the status and its message, kept so that every later call
 * on the object can repeat them. */
typedef struct sticky {
    tl_status st;
    char *msg;
} sticky;

static tl_status sticky_set(sticky *s, tl_status st, const char *fmt, va_list ap) TL_PRINTF(3, 0);

static tl_status sticky_set(sticky *s, tl_status st, const char *fmt, va_list ap)
{
    char *msg = vformat(fmt, ap);
    tl_free(s->msg);
    s->msg = msg;
    s->st = st;
    if (msg == NULL)
        return tl_error(st, "TFRecord error (and out of memory describing it)");
    return tl_error(st, "%s", msg);
}

static tl_status sticky_repeat(const sticky *s)
{
    return tl_error(s->st, "%s", s->msg ? s->msg : "TFRecord error (and out of memory describing it)");
}

static void sticky_clear(sticky *s)
{
    tl_free(s->msg);
    s->msg = NULL;
    s->st = TL_OK;
}

/* ======================================================================== */
/* Reader                                                                   */
/* ======================================================================== */

typedef enum { SRC_MEMORY, SRC_FILE, SRC_STREAM } source_kind;

struct tl_tfrecord_reader {
    char *name;
    source_kind kind;
    const uint8_t *mem; /* (mem_size) SRC_MEMORY, borrowed */
    size_t mem_size;
    FILE *file; /* SRC_FILE */
    bool own_file;
    char *iobuf; /* (READ_BUFFER) file's stdio buffer when own_file, or NULL */
    tl_tfrecord_read_fn read_fn; /* SRC_STREAM */
    void *ud;
    bool size_known; /* a regular file: size is its length when last looked at */
    uint64_t size;
    uint64_t offset;  /* where the next record starts */
    uint64_t index;   /* records returned so far */
    uint8_t *buf;     /* (cap) the current record's data and footer */
    size_t cap;
    uint64_t max_record;
    tl_tfrecord_fault fault;
    uint64_t fault_len;        /* BAD_DATA_CRC: the failing record's length */
    const char *decompressed;  /* "GZIP" or "ZLIB" when the bytes come out of one; NULL: the file's own */
    sticky err;
};

static tl_status reader_fail(tl_tfrecord_reader *r, tl_status st, tl_tfrecord_fault fault, const char *fmt, ...)
    TL_PRINTF(4, 5);

static tl_status reader_fail(tl_tfrecord_reader *r, tl_status st, tl_tfrecord_fault fault, const char *fmt, ...)
{
    r->fault = fault;
    va_list ap;
    va_start(ap, fmt);
    tl_status ret = sticky_set(&r->err, st, fmt, ap);
    va_end(ap);
    return ret;
}

static tl_status reader_new(const char *name, const char *fallback, source_kind kind, tl_tfrecord_reader **out)
{
    *out = NULL;
    tl_tfrecord_reader *r = tl_calloc(1, sizeof *r);
    if (r == NULL)
        return tl_error_oom();
    r->name = tl_strdup(name != NULL ? name : fallback);
    if (r->name == NULL) {
        tl_free(r);
        return tl_error_oom();
    }
    r->kind = kind;
    r->max_record = TL_TFRECORD_DEFAULT_MAX_RECORD;
    *out = r;
    return TL_OK;
}

/* Looks at f's length again when it is a regular file (a live event file
 * grows while it is read). */
static void refresh_size(tl_tfrecord_reader *r)
{
    struct stat sb;
    if (r->kind == SRC_FILE && fstat(fileno(r->file), &sb) == 0 && S_ISREG(sb.st_mode)) {
        r->size_known = true;
        r->size = (uint64_t)sb.st_size;
    }
}

tl_status tl_tfrecord_reader_create_memory(const void *data, size_t size, const char *name,
                                           tl_tfrecord_reader **out)
{
    tl_status st = reader_new(name, "<memory>", SRC_MEMORY, out);
    if (st != TL_OK)
        return st;
    (*out)->mem = data;
    (*out)->mem_size = data != NULL ? size : 0;
    (*out)->size_known = true;
    (*out)->size = (*out)->mem_size;
    return TL_OK;
}

tl_status tl_tfrecord_reader_create_file(FILE *f, const char *name, tl_tfrecord_reader **out)
{
    tl_status st = reader_new(name, "<file>", SRC_FILE, out);
    if (st != TL_OK)
        return st;
    tl_tfrecord_reader *r = *out;
    r->file = f;
    /* Offsets in messages are the file's own, so they match a hex dump. */
    off_t pos = ftello(f);
    r->offset = pos > 0 ? (uint64_t)pos : 0;
    refresh_size(r);
    return TL_OK;
}

tl_status tl_tfrecord_reader_create_stream(tl_tfrecord_read_fn read_fn, void *ud, const char *name,
                                           tl_tfrecord_reader **out)
{
    tl_status st = reader_new(name, "<stream>", SRC_STREAM, out);
    if (st != TL_OK)
        return st;
    (*out)->read_fn = read_fn;
    (*out)->ud = ud;
    return TL_OK;
}

tl_status tl_tfrecord_reader_open(const char *path, tl_tfrecord_reader **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return tl_error(TL_EIO, "%s: cannot open for reading: %s", path, strerror(errno));
    /* Before any read, as setvbuf requires; through tl_malloc like every
     * other allocation. Should setvbuf refuse, stdio's own buffer serves. */
    char *iobuf = tl_malloc(READ_BUFFER);
    if (iobuf == NULL) {
        fclose(f);
        return tl_error_oom();
    }
    if (setvbuf(f, iobuf, _IOFBF, READ_BUFFER) != 0) {
        tl_free(iobuf);
        iobuf = NULL;
    }
    tl_status st = tl_tfrecord_reader_create_file(f, path, out);
    if (st != TL_OK) {
        fclose(f);
        tl_free(iobuf);
        return st;
    }
    (*out)->own_file = true;
    (*out)->iobuf = iobuf;
    return TL_OK;
}

void tl_tfrecord_reader_set_max_record(tl_tfrecord_reader *r, uint64_t max_record)
{
    r->max_record = max_record;
}

void tl_tfrecord_reader_destroy(tl_tfrecord_reader *r)
{
    if (r == NULL)
        return;
    if (r->own_file)
        fclose(r->file);
    tl_free(r->iobuf); /* after fclose, which still uses it */
    sticky_clear(&r->err);
    tl_free(r->buf);
    tl_free(r->name);
    tl_free(r);
}

void tl_tfrecord_reader_set_decompressed(tl_tfrecord_reader *r, const char *kind)
{
    r->decompressed = kind;
}

uint64_t tl_tfrecord_reader_offset(const tl_tfrecord_reader *r) { return r->offset; }
uint64_t tl_tfrecord_reader_index(const tl_tfrecord_reader *r) { return r->index; }
tl_tfrecord_fault tl_tfrecord_reader_fault(const tl_tfrecord_reader *r) { return r->fault; }

/* Reads up to n bytes at the source's position into dst, stopping early only
 * at the end of the stream; *got says how many arrived. */
static tl_status read_upto(tl_tfrecord_reader *r, uint8_t *dst, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        size_t k = 0;
        if (r->kind == SRC_FILE) {
            k = fread(dst + *got, 1, n - *got, r->file);
            if (k == 0 && ferror(r->file)) {
                int e = errno;
                clearerr(r->file);
                return reader_fail(r, TL_EIO, TL_TFRECORD_FAULT_READ_ERROR, "%s: read failed at byte offset %llu: %s",
                                   r->name, (unsigned long long)(r->offset + *got), strerror(e));
            }
        } else {
            tl_status st = r->read_fn(r->ud, dst + *got, n - *got, &k);
            if (st != TL_OK)
                return reader_fail(r, st, TL_TFRECORD_FAULT_READ_ERROR, "%s: read failed near byte offset %llu: %s",
                                   r->name, (unsigned long long)(r->offset + *got), tl_last_error());
            if (k > n - *got)
                return reader_fail(r, TL_ERUNTIME, TL_TFRECORD_FAULT_READ_ERROR,
                                   "%s: the stream's read function returned %zu bytes when %zu were asked for", r->name,
                                   k, n - *got);
        }
        if (k == 0)
            break;
        *got += k;
    }
    return TL_OK;
}

static tl_status truncated_data(tl_tfrecord_reader *r, uint64_t len, uint64_t have)
{
    return reader_fail(r, TL_EPARSE, TL_TFRECORD_FAULT_TRUNCATED_DATA,
                       "%s: record %llu at byte offset %llu: its length %llu runs past the end of the file "
                       "(%llu bytes follow its header; the data and its CRC need %llu)",
                       r->name, (unsigned long long)r->index, (unsigned long long)r->offset, (unsigned long long)len,
                       (unsigned long long)have, (unsigned long long)len + TL_TFRECORD_FOOTER_SIZE);
}

/* A first record whose length CRC fails is almost always a file that is
 * not TFRecord data at all (text, another format, a compressed file read as
 * plain): said in those words, with what the first bytes look like. */
static tl_status not_a_tfrecord(tl_tfrecord_reader *r, const uint8_t *hdr, uint32_t stored, uint32_t want)
{
    const char *hint = "";
    if (r->decompressed == NULL) {
        tl_tfrecord_compression c = tl_tfrecord_sniff_compression(hdr, TL_TFRECORD_HEADER_SIZE);
        if (c == TL_TFRECORD_GZIP)
            hint = "; its first bytes are GZIP's magic 1f 8b 08: read it with compression GZIP or AUTO";
        else if (c == TL_TFRECORD_ZLIB)
            hint = "; its first bytes are a valid ZLIB header: read it with compression ZLIB or AUTO";
    }
    char where[64] = "";
    if (r->decompressed != NULL)
        snprintf(where, sizeof where, " of the decompressed %s data", r->decompressed);
    return reader_fail(r, TL_EPARSE, TL_TFRECORD_FAULT_BAD_LENGTH_CRC,
                       "%s: not a TFRecord file: the first record's length CRC does not match at byte 0%s (a "
                       "TFRecord file starts with a record's 8-byte length and its masked CRC-32C; stored 0x%08x, "
                       "computed 0x%08x)%s",
                       r->name, where, stored, want, hint);
}

/* Checks a header: the length's CRC and the length limit. */
static tl_status check_header(tl_tfrecord_reader *r, const uint8_t *hdr, uint64_t *len)
{
    *len = get_le64(hdr);
    uint32_t stored = get_le32(hdr + 8);
    uint32_t want = tl_crc32c_mask(tl_crc32c_extend(0, hdr, 8));
    if (stored != want && r->index == 0 && r->offset == 0)
        return not_a_tfrecord(r, hdr, stored, want);
    if (stored != want)
        return reader_fail(r, TL_EPARSE, TL_TFRECORD_FAULT_BAD_LENGTH_CRC,
                           "%s: record %llu at byte offset %llu: bad length CRC (stored 0x%08x, computed 0x%08x "
                           "over the length bytes, which read %llu)",
                           r->name, (unsigned long long)r->index, (unsigned long long)r->offset, stored, want,
                           (unsigned long long)*len);
    if (*len > r->max_record)
        return reader_fail(r, TL_EPARSE, TL_TFRECORD_FAULT_TOO_LARGE,
                           "%s: record %llu at byte offset %llu: length %llu is more than the %llu bytes allowed "
                           "for one record",
                           r->name, (unsigned long long)r->index, (unsigned long long)r->offset,
                           (unsigned long long)*len, (unsigned long long)r->max_record);
    return TL_OK;
}

static tl_status check_data(tl_tfrecord_reader *r, const uint8_t *data, uint64_t len)
{
    uint32_t stored = get_le32(data + len);
    uint32_t want = tl_tfrecord_data_crc(data, (size_t)len);
    r->fault_len = len;
    if (stored != want)
        return reader_fail(r, TL_EPARSE, TL_TFRECORD_FAULT_BAD_DATA_CRC,
                           "%s: record %llu at byte offset %llu: bad data CRC (stored 0x%08x, computed 0x%08x "
                           "over its %llu data bytes)",
                           r->name, (unsigned long long)r->index, (unsigned long long)r->offset, stored, want,
                           (unsigned long long)len);
    return TL_OK;
}

static tl_status truncated_header(tl_tfrecord_reader *r, size_t have)
{
    return reader_fail(r, TL_EPARSE, TL_TFRECORD_FAULT_TRUNCATED_HEADER,
                       "%s: record %llu at byte offset %llu: truncated header (the file ends after %zu of its %d "
                       "bytes)",
                       r->name, (unsigned long long)r->index, (unsigned long long)r->offset, have,
                       TL_TFRECORD_HEADER_SIZE);
}

static tl_status next_memory(tl_tfrecord_reader *r, const uint8_t **data, size_t *len)
{
    size_t avail = r->mem_size - (size_t)r->offset;
    if (avail == 0)
        return TL_OK;
    if (avail < TL_TFRECORD_HEADER_SIZE)
        return truncated_header(r, avail);
    const uint8_t *p = r->mem + r->offset;
    uint64_t n;
    tl_status st = check_header(r, p, &n);
    if (st != TL_OK)
        return st;
    uint64_t rest = avail - TL_TFRECORD_HEADER_SIZE;
    if (rest < TL_TFRECORD_FOOTER_SIZE || n > rest - TL_TFRECORD_FOOTER_SIZE)
        return truncated_data(r, n, rest);
    st = check_data(r, p + TL_TFRECORD_HEADER_SIZE, n);
    if (st != TL_OK)
        return st;
    *data = p + TL_TFRECORD_HEADER_SIZE;
    *len = (size_t)n;
    r->offset += TL_TFRECORD_HEADER_SIZE + n + TL_TFRECORD_FOOTER_SIZE;
    r->index++;
    return TL_OK;
}

/* Grows the record buffer to at least want bytes. */
static tl_status reserve(tl_tfrecord_reader *r, size_t want)
{
    if (want <= r->cap)
        return TL_OK;
    uint8_t *b = tl_realloc(r->buf, want);
    if (b == NULL)
        return reader_fail(r, TL_ENOMEM, TL_TFRECORD_FAULT_NONE,
                           "%s: out of memory for %zu bytes of record %llu at byte offset %llu", r->name, want,
                           (unsigned long long)r->index, (unsigned long long)r->offset);
    r->buf = b;
    r->cap = want;
    return TL_OK;
}

static tl_status next_stream(tl_tfrecord_reader *r, const uint8_t **data, size_t *len)
{
    uint8_t hdr[TL_TFRECORD_HEADER_SIZE];
    size_t got;
    tl_status st = read_upto(r, hdr, sizeof hdr, &got);
    if (st != TL_OK)
        return st;
    if (got == 0)
        return TL_OK;
    if (got < sizeof hdr)
        return truncated_header(r, got);
    uint64_t n;
    st = check_header(r, hdr, &n);
    if (st != TL_OK)
        return st;
    uint64_t need = n + TL_TFRECORD_FOOTER_SIZE; /* n <= max_record, so no overflow */
    if (need > SIZE_MAX)
        return reader_fail(r, TL_EPARSE, TL_TFRECORD_FAULT_TOO_LARGE,
                           "%s: record %llu at byte offset %llu: length %llu does not fit in this machine's memory",
                           r->name, (unsigned long long)r->index, (unsigned long long)r->offset,
                           (unsigned long long)n);
    uint64_t body_at = r->offset + TL_TFRECORD_HEADER_SIZE;
    if (r->size_known && (r->size < body_at || r->size - body_at < need)) {
        refresh_size(r);
        if (r->size < body_at || r->size - body_at < need)
            return truncated_data(r, n, r->size > body_at ? r->size - body_at : 0);
    }
    /* With a known size the length is vouched for; otherwise memory follows
     * the bytes that actually arrive. */
    size_t have = 0;
    while (have < need) {
        if (have == r->cap) {
            size_t grow = r->size_known ? (size_t)need : r->cap < FIRST_CHUNK ? FIRST_CHUNK : r->cap * 2;
            st = reserve(r, grow < need ? grow : (size_t)need);
            if (st != TL_OK)
                return st;
        }
        size_t want = (r->cap < need ? r->cap : (size_t)need) - have;
        st = read_upto(r, r->buf + have, want, &got);
        if (st != TL_OK)
            return st;
        have += got;
        if (got < want)
            return truncated_data(r, n, have);
    }
    st = check_data(r, r->buf, n);
    if (st != TL_OK)
        return st;
    *data = r->buf;
    *len = (size_t)n;
    r->offset = body_at + need;
    r->index++;
    return TL_OK;
}

tl_status tl_tfrecord_next(tl_tfrecord_reader *r, const uint8_t **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    if (r->err.st != TL_OK)
        return sticky_repeat(&r->err);
    r->fault = TL_TFRECORD_FAULT_NONE;
    tl_status st = r->kind == SRC_MEMORY ? next_memory(r, data, len) : next_stream(r, data, len);
    return st;
}

tl_status tl_tfrecord_reader_skip_record(tl_tfrecord_reader *r)
{
    if (r->fault != TL_TFRECORD_FAULT_BAD_DATA_CRC)
        return tl_error(TL_EINVAL, "%s: record %llu at byte offset %llu: only a record whose data CRC failed can be "
                                   "skipped (its framing is intact)",
                        r->name, (unsigned long long)r->index, (unsigned long long)r->offset);
    /* next_memory and next_stream consumed header, data and footer before
     * checking the data: only the offset and index stayed behind. */
    r->offset += TL_TFRECORD_HEADER_SIZE + r->fault_len + TL_TFRECORD_FOOTER_SIZE;
    r->index++;
    r->fault = TL_TFRECORD_FAULT_NONE;
    sticky_clear(&r->err);
    return TL_OK;
}

tl_status tl_tfrecord_reader_seek(tl_tfrecord_reader *r, uint64_t offset, uint64_t index)
{
    if (r->kind == SRC_STREAM)
        return tl_error(TL_ENOTIMPL, "%s: a stream cannot seek (to byte offset %llu)", r->name,
                        (unsigned long long)offset);
    if (r->kind == SRC_MEMORY && offset > r->mem_size)
        return tl_error(TL_EINVAL, "%s: byte offset %llu is past the end of the %zu-byte buffer", r->name,
                        (unsigned long long)offset, r->mem_size);
    if (r->kind == SRC_FILE) {
        if (offset > (uint64_t)INT64_MAX || fseeko(r->file, (off_t)offset, SEEK_SET) != 0)
            return tl_error(TL_EIO, "%s: cannot seek to byte offset %llu: %s", r->name, (unsigned long long)offset,
                            strerror(errno));
        refresh_size(r);
    }
    r->offset = offset;
    r->index = index;
    r->fault = TL_TFRECORD_FAULT_NONE;
    sticky_clear(&r->err);
    return TL_OK;
}

/* ======================================================================== */
/* Writer                                                                   */
/* ======================================================================== */

struct tl_tfrecord_writer {
    char *name;
    int fd; /* -1 when writing to file */
    bool own_fd;
    FILE *file;
    uint8_t *buf; /* (WRITE_BUFFER) fd only */
    size_t len;
    uint64_t bytes;
    sticky err;
};

static tl_status writer_fail(tl_tfrecord_writer *w, const char *what, int e)
{
    char *msg = tl_asprintf("%s: %s failed after %llu bytes: %s", w->name, what, (unsigned long long)w->bytes,
                            strerror(e));
    tl_free(w->err.msg);
    w->err.msg = msg;
    w->err.st = TL_EIO;
    return sticky_repeat(&w->err);
}

static tl_status writer_new(const char *name, tl_tfrecord_writer **out)
{
    *out = NULL;
    tl_tfrecord_writer *w = tl_calloc(1, sizeof *w);
    if (w == NULL)
        return tl_error_oom();
    w->name = tl_strdup(name != NULL ? name : "<output>");
    if (w->name == NULL) {
        tl_free(w);
        return tl_error_oom();
    }
    w->fd = -1;
    *out = w;
    return TL_OK;
}

tl_status tl_tfrecord_writer_create_fd(int fd, const char *name, bool own_fd, tl_tfrecord_writer **out)
{
    tl_status st = writer_new(name, out);
    if (st != TL_OK)
        return st;
    tl_tfrecord_writer *w = *out;
    w->buf = tl_malloc(WRITE_BUFFER);
    if (w->buf == NULL) {
        tl_free(w->name);
        tl_free(w);
        *out = NULL;
        return tl_error_oom();
    }
    w->fd = fd;
    w->own_fd = own_fd;
    return TL_OK;
}

tl_status tl_tfrecord_writer_create_file(FILE *f, const char *name, tl_tfrecord_writer **out)
{
    tl_status st = writer_new(name, out);
    if (st == TL_OK)
        (*out)->file = f;
    return st;
}

tl_status tl_tfrecord_writer_open(const char *path, int oflags, tl_tfrecord_writer **out)
{
    *out = NULL;
    int fd = open(path, O_WRONLY | O_CLOEXEC | oflags, 0666);
    if (fd < 0) {
        int e = errno;
        tl_error(TL_EIO, "%s: cannot open for writing: %s", path, strerror(e));
        errno = e;
        return TL_EIO;
    }
    tl_status st = tl_tfrecord_writer_create_fd(fd, path, true, out);
    if (st != TL_OK)
        close(fd);
    return st;
}

/* Writes all of p[0..n) to the descriptor, retrying short writes and EINTR. */
static tl_status write_all(tl_tfrecord_writer *w, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return writer_fail(w, "write", k < 0 ? errno : EIO);
        p += k;
        n -= (size_t)k;
    }
    return TL_OK;
}

static tl_status drain(tl_tfrecord_writer *w)
{
    tl_status st = write_all(w, w->buf, w->len);
    w->len = 0;
    return st;
}

/* Appends p[0..n) to the output: into the buffer when it fits, else straight
 * through once the buffer is drained. */
static tl_status emit(tl_tfrecord_writer *w, const void *p, size_t n)
{
    if (w->file != NULL) {
        if (n > 0 && fwrite(p, 1, n, w->file) != n)
            return writer_fail(w, "write", errno != 0 ? errno : EIO);
        return TL_OK;
    }
    if (n <= WRITE_BUFFER - w->len) {
        if (n > 0)
            memcpy(w->buf + w->len, p, n);
        w->len += n;
        return TL_OK;
    }
    tl_status st = drain(w);
    if (st != TL_OK)
        return st;
    if (n >= WRITE_BUFFER)
        return write_all(w, p, n);
    memcpy(w->buf, p, n);
    w->len = n;
    return TL_OK;
}

tl_status tl_tfrecord_write(tl_tfrecord_writer *w, const void *data, size_t n)
{
    if (w->err.st != TL_OK)
        return sticky_repeat(&w->err);
    if (data == NULL && n > 0)
        return tl_error(TL_EINVAL, "%s: a record of %zu bytes with no data", w->name, n);
    uint8_t hdr[TL_TFRECORD_HEADER_SIZE], foot[TL_TFRECORD_FOOTER_SIZE];
    tl_tfrecord_encode_header(hdr, n);
    put_le32(foot, tl_tfrecord_data_crc(data, n));
    errno = 0;
    tl_status st = emit(w, hdr, sizeof hdr);
    if (st == TL_OK)
        st = emit(w, data, n);
    if (st == TL_OK)
        st = emit(w, foot, sizeof foot);
    if (st == TL_OK)
        w->bytes += sizeof hdr + n + sizeof foot;
    return st;
}

tl_status tl_tfrecord_writer_flush(tl_tfrecord_writer *w, bool sync)
{
    if (w->err.st != TL_OK)
        return sticky_repeat(&w->err);
    int fd = w->fd;
    if (w->file != NULL) {
        if (fflush(w->file) != 0)
            return writer_fail(w, "flush", errno);
        fd = fileno(w->file);
    } else {
        tl_status st = drain(w);
        if (st != TL_OK)
            return st;
    }
    /* Pipes, terminals and /dev/null cannot sync; that is not a failure. */
    if (sync && fd >= 0 && fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP)
        return writer_fail(w, "fsync", errno);
    return TL_OK;
}

uint64_t tl_tfrecord_writer_bytes(const tl_tfrecord_writer *w) { return w->bytes; }

tl_status tl_tfrecord_writer_destroy(tl_tfrecord_writer *w)
{
    if (w == NULL)
        return TL_OK;
    tl_status st = tl_tfrecord_writer_flush(w, false);
    if (w->own_fd && close(w->fd) != 0 && st == TL_OK)
        st = writer_fail(w, "close", errno);
    sticky_clear(&w->err);
    tl_free(w->buf);
    tl_free(w->name);
    tl_free(w);
    return st;
}

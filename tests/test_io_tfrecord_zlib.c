/* Compressed TFRecord files: the GZIP files TFX wrote (../shared/testdata/
 * external/tfx, checked against their .expected.json) through every source
 * and AUTO, round trips through the writer for GZIP, ZLIB and NONE, GZIP
 * headers with every optional field, concatenated members, every truncation
 * point and every bit flip of a small file, damaged trailers, trailing
 * bytes, the AUTO rule, and allocation failures. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/base_int.h"
#include "io/compress.h"
#include "io/tfrecord.h"
#include "testutil.h"

#define TFX "../shared/testdata/external/tfx"
#define PENGUIN TFX "/penguin-Split-eval-data_tfrecord-00000-of-00001.gz"
#define SEQUENCE TFX "/tfrecord_sequence-Split-eval-data_tfrecord_eval.gz"

static void tmp_path(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/tl_tfz_XXXXXX");
    int fd = mkstemp(buf);
    cr_assert_geq(fd, 0);
    close(fd);
}

/* A stream over memory handing out at most `chunk` bytes a call. */
typedef struct mem_stream {
    const uint8_t *data;
    size_t size, pos, chunk;
} mem_stream;

static tl_status mem_read(void *ud, void *buf, size_t n, size_t *got)
{
    mem_stream *s = ud;
    size_t k = s->size - s->pos;
    if (k > n)
        k = n;
    if (k > s->chunk)
        k = s->chunk;
    memcpy(buf, s->data + s->pos, k);
    s->pos += k;
    *got = k;
    return TL_OK;
}

/* ---- the TFX fixtures --------------------------------------------------- */

typedef struct expected {
    size_t count;
    uint64_t uncompressed_size;
    uint64_t *offset, *length;
    uint32_t *length_crc, *data_crc;
    char (*sha256)[65];
} expected;

static void load_expected(const char *path, expected *e)
{
    char jp[512];
    snprintf(jp, sizeof jp, "%s.expected.json", path);
    json_error_t err;
    json_t *j = json_load_file(jp, 0, &err);
    cr_assert_not_null(j, "%s: %s", jp, err.text);
    cr_assert_str_eq(json_string_value(json_object_get(j, "compression")), "GZIP");
    json_t *fa = json_object_get(j, "framing"), *recs = json_object_get(j, "records");
    e->count = json_array_size(fa);
    cr_assert_eq((json_int_t)e->count, json_integer_value(json_object_get(j, "record_count")));
    cr_assert_gt(e->count, 0);
    e->uncompressed_size = (uint64_t)json_integer_value(json_object_get(j, "uncompressed_size"));
    e->offset = calloc(e->count, sizeof *e->offset);
    e->length = calloc(e->count, sizeof *e->length);
    e->length_crc = calloc(e->count, sizeof *e->length_crc);
    e->data_crc = calloc(e->count, sizeof *e->data_crc);
    e->sha256 = calloc(e->count, sizeof *e->sha256);
    for (size_t i = 0; i < e->count; i++) {
        json_t *f = json_array_get(fa, i);
        e->offset[i] = (uint64_t)json_integer_value(json_object_get(f, "offset"));
        e->length[i] = (uint64_t)json_integer_value(json_object_get(f, "length"));
        e->length_crc[i] = (uint32_t)strtoul(json_string_value(json_object_get(f, "length_crc")), NULL, 16);
        e->data_crc[i] = (uint32_t)strtoul(json_string_value(json_object_get(f, "data_crc")), NULL, 16);
        const char *sha = json_string_value(json_object_get(json_array_get(recs, i), "record_sha256"));
        cr_assert_not_null(sha, "%s: record %zu has no record_sha256", jp, i);
        snprintf(e->sha256[i], sizeof e->sha256[i], "%s", sha);
    }
    json_decref(j);
}

static void free_expected(expected *e)
{
    free(e->offset);
    free(e->length);
    free(e->length_crc);
    free(e->data_crc);
    free(e->sha256);
}

static void check_records(tl_tfrecord_reader *r, const expected *e, const char *what)
{
    for (size_t i = 0; i < e->count; i++) {
        cr_assert_eq(tl_tfrecord_reader_offset(r), e->offset[i], "%s: record %zu offset", what, i);
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_not_null(rec, "%s: record %zu missing", what, i);
        cr_assert_eq(len, e->length[i], "%s: record %zu length %zu", what, i, len);
        cr_assert_eq(tl_tfrecord_data_crc(rec, len), e->data_crc[i], "%s: record %zu data CRC", what, i);
        uint8_t hdr[TL_TFRECORD_HEADER_SIZE];
        tl_tfrecord_encode_header(hdr, len);
        uint32_t lcrc = (uint32_t)hdr[8] | (uint32_t)hdr[9] << 8 | (uint32_t)hdr[10] << 16 | (uint32_t)hdr[11] << 24;
        cr_assert_eq(lcrc, e->length_crc[i], "%s: record %zu length CRC", what, i);
        char hex[SHA256_DIGEST_STRING_LENGTH];
        SHA256Data(rec, len, hex);
        cr_assert_str_eq(hex, e->sha256[i], "%s: record %zu sha256", what, i);
    }
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
    cr_assert_null(rec, "%s: a record after the last one", what);
    cr_assert_eq(tl_tfrecord_reader_offset(r), e->uncompressed_size, "%s: uncompressed size", what);
}

static void check_fixture(const char *path)
{
    expected e;
    load_expected(path, &e);
    size_t n;
    uint8_t *file = tu_slurp(path, &n);
    for (int how = 0; how < 6; how++) {
        tl_tfrecord_zreader *z;
        tl_tfrecord_compression c = how % 2 ? TL_TFRECORD_AUTO : TL_TFRECORD_GZIP;
        mem_stream ms = {file, n, 0, 7};
        const char *src = how < 2 ? "file" : how < 4 ? "memory" : "stream";
        if (how < 2)
            ASSERT_OK(tl_tfrecord_zreader_open(path, c, &z));
        else if (how < 4)
            ASSERT_OK(tl_tfrecord_zreader_create_memory(file, n, "mem.gz", c, &z));
        else
            ASSERT_OK(tl_tfrecord_zreader_create_stream(mem_read, &ms, "pipe.gz", c, &z));
        char what[600];
        snprintf(what, sizeof what, "%s via %s, %s", path, src, tl_tfrecord_compression_name(c));
        check_records(tl_tfrecord_zreader_records(z), &e, what);
        cr_assert_eq(tl_tfrecord_zreader_compression(z), TL_TFRECORD_GZIP, "%s", what);
        cr_assert_eq(tl_tfrecord_zreader_compressed_offset(z), n, "%s: all compressed bytes consumed", what);
        tl_tfrecord_zreader_destroy(z);
    }
    free(file);
    free_expected(&e);
}

Test(io_tfrecord_zlib, reads_tfx_penguin_gzip) { check_fixture(PENGUIN); }
Test(io_tfrecord_zlib, reads_tfx_sequence_example_gzip) { check_fixture(SEQUENCE); }

/* ---- writing ------------------------------------------------------------ */

/* Record i of a test set: lengths 0, 1, ... with a 200 KB one (longer than
 * every buffer) in the middle, and content that compresses but not to
 * nothing. */
static size_t rec_len(int i) { return i == 7 ? 200000 : (size_t)(i * 37 % 300); }

static void rec_fill(int i, uint8_t *buf)
{
    uint32_t x = 2654435761u * (uint32_t)(i + 1);
    for (size_t k = 0; k < rec_len(i); k++) {
        x = x * 1103515245u + 12345u;
        buf[k] = (uint8_t)(k % 5 == 0 ? x >> 24 : 'a' + k % 7);
    }
}

#define NREC 20

/* Reads z to the end expecting records first..first+count-1 of the set. */
static void expect_set(tl_tfrecord_zreader *z, int first, int count, const char *what)
{
    static uint8_t want[200000];
    tl_tfrecord_reader *r = tl_tfrecord_zreader_records(z);
    for (int i = first; i < first + count; i++) {
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_not_null(rec, "%s: record %d missing", what, i);
        rec_fill(i % NREC, want);
        cr_assert_eq(len, rec_len(i % NREC), "%s: record %d length", what, i);
        cr_assert_eq(memcmp(rec, want, len), 0, "%s: record %d bytes", what, i);
    }
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
    cr_assert_null(rec, "%s: extra record", what);
}

static void write_set(tl_tfrecord_zwriter *w, bool flush_midway)
{
    static uint8_t buf[200000];
    for (int i = 0; i < NREC; i++) {
        rec_fill(i, buf);
        ASSERT_OK(tl_tfrecord_zwriter_write(w, rec_len(i) ? buf : NULL, rec_len(i)));
        if (flush_midway && i == NREC / 2)
            ASSERT_OK(tl_tfrecord_zwriter_flush(w, true));
    }
}

static uint64_t set_bytes(void)
{
    uint64_t b = 0;
    for (int i = 0; i < NREC; i++)
        b += rec_len(i) + TL_TFRECORD_HEADER_SIZE + TL_TFRECORD_FOOTER_SIZE;
    return b;
}

Test(io_tfrecord_zlib, round_trips_every_compression_and_level)
{
    static const tl_tfrecord_compression cs[] = {TL_TFRECORD_GZIP, TL_TFRECORD_ZLIB, TL_TFRECORD_NONE};
    static const int levels[] = {-1, 0, 1, 9};
    char path[64];
    tmp_path(path, sizeof path);
    for (size_t ci = 0; ci < 3; ci++) {
        for (size_t li = 0; li < 4; li++) {
            tl_tfrecord_zwriter *w;
            ASSERT_OK(tl_tfrecord_zwriter_open(path, O_CREAT | O_TRUNC, cs[ci], levels[li], &w));
            write_set(w, li == 1);
            cr_assert_eq(tl_tfrecord_zwriter_bytes(w), set_bytes());
            ASSERT_OK(tl_tfrecord_zwriter_destroy(w));
            char what[128];
            snprintf(what, sizeof what, "%s level %d", tl_tfrecord_compression_name(cs[ci]), levels[li]);
            size_t n;
            uint8_t *file = tu_slurp(path, &n);
            if (cs[ci] == TL_TFRECORD_GZIP)
                cr_assert(file[0] == 0x1f && file[1] == 0x8b, "%s: no GZIP magic", what);
            if (cs[ci] != TL_TFRECORD_NONE && levels[li] != 0)
                cr_assert_lt(n, set_bytes() / 2, "%s: %zu bytes did not compress", what, n);
            tl_tfrecord_compression mode[2] = {cs[ci], TL_TFRECORD_AUTO};
            for (int m = 0; m < 2; m++) {
                tl_tfrecord_zreader *z;
                ASSERT_OK(tl_tfrecord_zreader_open(path, mode[m], &z));
                cr_assert_eq(tl_tfrecord_zreader_compression(z), cs[ci], "%s: AUTO chose wrongly", what);
                expect_set(z, 0, NREC, what);
                tl_tfrecord_zreader_destroy(z);
                mem_stream ms = {file, n, 0, 1000};
                ASSERT_OK(tl_tfrecord_zreader_create_stream(mem_read, &ms, "s", mode[m], &z));
                expect_set(z, 0, NREC, what);
                tl_tfrecord_zreader_destroy(z);
            }
            free(file);
        }
    }
    unlink(path);
}

/* A flushed but unfinished file reads up to the flush, then says truncated. */
Test(io_tfrecord_zlib, flush_makes_records_readable_before_destroy)
{
    char path[64];
    tmp_path(path, sizeof path);
    tl_tfrecord_zwriter *w;
    ASSERT_OK(tl_tfrecord_zwriter_open(path, O_CREAT | O_TRUNC, TL_TFRECORD_GZIP, 6, &w));
    static uint8_t buf[200000];
    for (int i = 0; i < 5; i++) {
        rec_fill(i, buf);
        ASSERT_OK(tl_tfrecord_zwriter_write(w, buf, rec_len(i)));
    }
    ASSERT_OK(tl_tfrecord_zwriter_flush(w, false));
    tl_tfrecord_zreader *z;
    ASSERT_OK(tl_tfrecord_zreader_open(path, TL_TFRECORD_GZIP, &z));
    tl_tfrecord_reader *r = tl_tfrecord_zreader_records(z);
    const uint8_t *rec;
    size_t len;
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_eq(len, rec_len(i));
    }
    ASSERT_ERR(tl_tfrecord_next(r, &rec, &len), TL_EPARSE, "GZIP stream truncated");
    cr_assert(strstr(tl_last_error(), path) != NULL, "%s", tl_last_error());
    tl_tfrecord_zreader_destroy(z);
    ASSERT_OK(tl_tfrecord_zwriter_destroy(w));
    unlink(path);
}

/* Appending to a GZIP file adds a member; readers see one stream, as
 * TensorFlow's ZlibInputStream does. ZLIB refuses to append. */
Test(io_tfrecord_zlib, gzip_append_makes_members_that_read_as_one)
{
    char path[64];
    tmp_path(path, sizeof path);
    for (int k = 0; k < 3; k++) {
        tl_tfrecord_zwriter *w;
        ASSERT_OK(tl_tfrecord_zwriter_open(path, O_CREAT | (k == 0 ? O_TRUNC : O_APPEND), TL_TFRECORD_GZIP, -1, &w));
        write_set(w, false);
        ASSERT_OK(tl_tfrecord_zwriter_destroy(w));
    }
    tl_tfrecord_zreader *z;
    ASSERT_OK(tl_tfrecord_zreader_open(path, TL_TFRECORD_AUTO, &z));
    expect_set(z, 0, 3 * NREC, "three members");
    tl_tfrecord_zreader_destroy(z);
    tl_tfrecord_zwriter *w = (tl_tfrecord_zwriter *)1;
    ASSERT_ERR(tl_tfrecord_zwriter_open(path, O_APPEND, TL_TFRECORD_ZLIB, -1, &w), TL_EINVAL, "cannot be appended");
    cr_assert_null(w);
    ASSERT_ERR(tl_tfrecord_zwriter_open(path, O_TRUNC, TL_TFRECORD_AUTO, -1, &w), TL_EINVAL, "NONE, GZIP or ZLIB");
    ASSERT_ERR(tl_tfrecord_zwriter_open(path, O_TRUNC, TL_TFRECORD_GZIP, 10, &w), TL_EINVAL, "level 10");
    ASSERT_ERR(tl_tfrecord_zwriter_open("/nonexistent/dir/x.gz", O_CREAT, TL_TFRECORD_GZIP, -1, &w), TL_EIO,
               "/nonexistent/dir/x.gz");
    unlink(path);
}

/* ---- hand-made GZIP members --------------------------------------------- */

/* A TFRecord body of three small records, in memory. */
static size_t small_body(uint8_t *out)
{
    size_t n = 0;
    static const char *const recs[] = {"alpha", "", "gamma gamma gamma gamma"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(recs[i]);
        tl_tfrecord_encode_header(out + n, len);
        n += TL_TFRECORD_HEADER_SIZE;
        memcpy(out + n, recs[i], len);
        n += len;
        uint32_t crc = tl_tfrecord_data_crc(recs[i], len);
        for (int b = 0; b < 4; b++)
            out[n++] = (uint8_t)(crc >> (8 * b));
    }
    return n;
}

/* Raw deflate of in[0..n) into out; returns the length. */
static size_t raw_deflate(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    cr_assert_eq(deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    s.next_in = (Bytef *)(uintptr_t)in;
    s.avail_in = (uInt)n;
    s.next_out = out;
    s.avail_out = (uInt)cap;
    cr_assert_eq(deflate(&s, Z_FINISH), Z_STREAM_END);
    size_t len = cap - s.avail_out;
    deflateEnd(&s);
    return len;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

enum { F_HCRC = 2, F_EXTRA = 4, F_NAME = 8, F_COMMENT = 16 };

/* A GZIP member with the given optional header fields around body. */
static size_t gzip_member(int flags, const uint8_t *body, size_t n, uint8_t *out)
{
    size_t k = 0;
    const uint8_t fixed[10] = {0x1f, 0x8b, 8, (uint8_t)flags, 0x78, 0x56, 0x34, 0x12, 2, 3};
    memcpy(out, fixed, 10);
    k = 10;
    if (flags & F_EXTRA) {
        static const uint8_t extra[] = {'A', 'p', 5, 0, 1, 2, 3, 4, 5}; /* one subfield of 5 bytes */
        out[k++] = sizeof extra;
        out[k++] = 0;
        memcpy(out + k, extra, sizeof extra);
        k += sizeof extra;
    }
    if (flags & F_NAME) {
        memcpy(out + k, "train.tfrecord", 15);
        k += 15;
    }
    if (flags & F_COMMENT) {
        memcpy(out + k, "written by hand", 16);
        k += 16;
    }
    if (flags & F_HCRC) {
        uint32_t c = (uint32_t)crc32(0, out, (uInt)k);
        out[k++] = (uint8_t)c;
        out[k++] = (uint8_t)(c >> 8);
    }
    k += raw_deflate(body, n, out + k, 4096);
    put32(out + k, (uint32_t)crc32(0, body, (uInt)n));
    put32(out + k + 4, (uint32_t)n);
    return k + 8;
}

static void expect_small(tl_tfrecord_zreader *z, const char *what)
{
    tl_tfrecord_reader *r = tl_tfrecord_zreader_records(z);
    static const char *const recs[] = {"alpha", "", "gamma gamma gamma gamma"};
    for (int i = 0; i < 3; i++) {
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_not_null(rec, "%s: record %d", what, i);
        cr_assert_eq(len, strlen(recs[i]), "%s: record %d", what, i);
        cr_assert_eq(memcmp(rec, recs[i], len), 0, "%s: record %d", what, i);
    }
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
    cr_assert_null(rec, "%s", what);
}

Test(io_tfrecord_zlib, gzip_headers_with_every_optional_field)
{
    uint8_t body[256], gz[8192];
    size_t bn = small_body(body);
    for (int flags = 0; flags < 32; flags += 2) {
        size_t n = gzip_member(flags, body, bn, gz);
        char what[64];
        snprintf(what, sizeof what, "FLG 0x%02x", flags);
        for (int auto_ = 0; auto_ < 2; auto_++) {
            tl_tfrecord_zreader *z;
            ASSERT_OK(tl_tfrecord_zreader_create_memory(gz, n, "hand.gz",
                                                        auto_ ? TL_TFRECORD_AUTO : TL_TFRECORD_GZIP, &z));
            expect_small(z, what);
            tl_tfrecord_zreader_destroy(z);
        }
        if (flags & F_HCRC) { /* a wrong header CRC is caught */
            size_t at = n - 8 - raw_deflate(body, bn, gz + 4096, 4096) - 2;
            gz[at] ^= 0x01;
            tl_tfrecord_zreader *z;
            ASSERT_OK(tl_tfrecord_zreader_create_memory(gz, n, "hand.gz", TL_TFRECORD_GZIP, &z));
            const uint8_t *rec;
            size_t len;
            ASSERT_ERR(tl_tfrecord_next(tl_tfrecord_zreader_records(z), &rec, &len), TL_EPARSE,
                       "header is not valid");
            cr_assert(strstr(tl_last_error(), "hand.gz") != NULL);
            tl_tfrecord_zreader_destroy(z);
        }
    }
}

/* Reads z to the end: TL_OK with `want` records cycling through those of
 * the small body, or an error naming the source; never anything in between.
 * Returns the status. */
static tl_status read_small_or_fail(tl_tfrecord_zreader *z, int want, const char *what)
{
    tl_tfrecord_reader *r = tl_tfrecord_zreader_records(z);
    static const char *const recs[] = {"alpha", "", "gamma gamma gamma gamma"};
    int i = 0;
    const uint8_t *rec;
    size_t len;
    tl_status st;
    while ((st = tl_tfrecord_next(r, &rec, &len)) == TL_OK && rec != NULL) {
        cr_assert_lt(i, want, "%s: record %d is one too many", what, i);
        cr_assert(len == strlen(recs[i % 3]) && memcmp(rec, recs[i % 3], len) == 0, "%s: record %d is wrong", what,
                  i);
        i++;
    }
    if (st == TL_OK) {
        cr_assert_eq(i, want, "%s: only %d records and no error", what, i);
    } else {
        cr_assert(strstr(tl_last_error(), "z.gz") != NULL, "%s: message \"%s\" lacks the name", what,
                  tl_last_error());
        cr_assert_neq(tl_tfrecord_reader_fault(r), TL_TFRECORD_FAULT_NONE);
    }
    return st;
}

Test(io_tfrecord_zlib, every_truncation_is_an_error)
{
    uint8_t body[256], gz[8192], two[16384];
    size_t bn = small_body(body);
    size_t n = gzip_member(F_NAME, body, bn, gz);
    /* and a ZLIB stream, and two GZIP members (cut inside the second) */
    uint8_t zl[4096];
    uLongf zn = sizeof zl;
    cr_assert_eq(compress2(zl, &zn, body, bn, 9), Z_OK);
    memcpy(two, gz, n);
    size_t n2 = n + gzip_member(0, body, bn, two + n);
    struct {
        const uint8_t *data;
        size_t size;
        tl_tfrecord_compression c;
        size_t ok_at; /* a prefix that is complete, 0: only the whole */
    } cases[] = {{gz, n, TL_TFRECORD_GZIP, 0}, {zl, zn, TL_TFRECORD_ZLIB, 0}, {two, n2, TL_TFRECORD_GZIP, n}};
    for (size_t c = 0; c < TL_ARRAY_LEN(cases); c++) {
        for (size_t cut = 1; cut < cases[c].size; cut++) {
            char what[64];
            snprintf(what, sizeof what, "case %zu cut at %zu", c, cut);
            tl_tfrecord_zreader *z;
            ASSERT_OK(tl_tfrecord_zreader_create_memory(cases[c].data, cut, "z.gz", cases[c].c, &z));
            tl_status st = read_small_or_fail(z, c == 2 && cut != cases[c].ok_at ? 6 : 3, what);
            if (cut == cases[c].ok_at)
                cr_assert_eq(st, TL_OK, "%s: a whole member fails: %s", what, tl_last_error());
            else
                cr_assert_eq(st, TL_EPARSE, "%s: got %s", what, tl_err_name(st));
            if (st != TL_OK)
                cr_assert(strstr(tl_last_error(), "compressed byte offset") != NULL, "%s: %s", what,
                          tl_last_error());
            tl_tfrecord_zreader_destroy(z);
        }
    }
}

Test(io_tfrecord_zlib, every_bit_flip_is_caught_or_harmless)
{
    uint8_t body[256], gz[8192], zl[4096];
    size_t bn = small_body(body);
    size_t n = gzip_member(F_HCRC | F_NAME, body, bn, gz);
    uLongf zn = sizeof zl;
    cr_assert_eq(compress2(zl, &zn, body, bn, 9), Z_OK);
    int caught = 0, total = 0;
    for (int which = 0; which < 2; which++) {
        uint8_t *data = which ? zl : gz;
        size_t size = which ? zn : n;
        for (size_t bit = 0; bit < size * 8; bit++) {
            data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            char what[64];
            snprintf(what, sizeof what, "%s bit %zu", which ? "ZLIB" : "GZIP", bit);
            tl_tfrecord_zreader *z;
            ASSERT_OK(tl_tfrecord_zreader_create_memory(data, size, "z.gz",
                                                        which ? TL_TFRECORD_ZLIB : TL_TFRECORD_GZIP, &z));
            caught += read_small_or_fail(z, 3, what) != TL_OK;
            total++;
            tl_tfrecord_zreader_destroy(z);
            data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
    }
    /* The header CRC covers the GZIP header and the trailers cover the data;
     * what passes is the padding bits after the last deflate block. */
    cr_assert_gt(caught, total * 95 / 100, "only %d of %d flips caught", caught, total);
}

Test(io_tfrecord_zlib, damaged_trailers_are_named)
{
    uint8_t body[256], gz[8192], zl[4096];
    size_t bn = small_body(body);
    size_t n = gzip_member(0, body, bn, gz);
    uLongf zn = sizeof zl;
    cr_assert_eq(compress2(zl, &zn, body, bn, 9), Z_OK);
    struct {
        uint8_t *data;
        size_t size, at;
        tl_tfrecord_compression c;
        const char *frag;
    } cases[] = {{gz, n, n - 8, TL_TFRECORD_GZIP, "GZIP member trailer has a bad CRC-32"},
                 {gz, n, n - 1, TL_TFRECORD_GZIP, "GZIP member trailer has a bad ISIZE"},
                 {zl, zn, zn - 1, TL_TFRECORD_ZLIB, "ZLIB trailer has a bad Adler-32"},
                 {gz, n, 0, TL_TFRECORD_GZIP, "GZIP header is not valid"},
                 {zl, zn, 0, TL_TFRECORD_ZLIB, "ZLIB header is not valid"}};
    for (size_t i = 0; i < TL_ARRAY_LEN(cases); i++) {
        cases[i].data[cases[i].at] ^= 0x40;
        /* A stream one byte at a time reads as many records before the
         * error as memory does: the chunking never changes the outcome. */
        mem_stream ms = {cases[i].data, cases[i].size, 0, 1};
        tl_tfrecord_zreader *zs;
        ASSERT_OK(tl_tfrecord_zreader_create_stream(mem_read, &ms, "d.gz", cases[i].c, &zs));
        int nstream = 0;
        const uint8_t *rec;
        size_t len;
        while (tl_tfrecord_next(tl_tfrecord_zreader_records(zs), &rec, &len) == TL_OK && rec != NULL)
            nstream++;
        tl_tfrecord_zreader_destroy(zs);
        tl_tfrecord_zreader *z;
        ASSERT_OK(tl_tfrecord_zreader_create_memory(cases[i].data, cases[i].size, "d.gz", cases[i].c, &z));
        tl_tfrecord_reader *r = tl_tfrecord_zreader_records(z);
        tl_status st;
        int nmem = 0;
        while ((st = tl_tfrecord_next(r, &rec, &len)) == TL_OK && rec != NULL)
            nmem++;
        cr_assert_eq(st, TL_EPARSE, "case %zu", i);
        cr_assert_eq(nmem, nstream, "case %zu: %d records from memory, %d from a stream", i, nmem, nstream);
        cr_assert_eq(nmem, i < 3 ? 3 : 0, "case %zu: %d records before the damage", i, nmem);
        cr_assert(strstr(tl_last_error(), cases[i].frag) != NULL, "case %zu: \"%s\"", i, tl_last_error());
        cr_assert(strstr(tl_last_error(), "d.gz") != NULL);
        char off[64];
        snprintf(off, sizeof off, "compressed byte offset %zu", i == 0 ? cases[i].size - 4 : cases[i].size);
        if (i < 3) /* the check fails once the whole field is in */
            cr_assert(strstr(tl_last_error(), off) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, tl_last_error(),
                      off);
        /* sticky */
        ASSERT_ERR(tl_tfrecord_next(r, &rec, &len), TL_EPARSE, cases[i].frag);
        tl_tfrecord_zreader_destroy(z);
        cases[i].data[cases[i].at] ^= 0x40;
    }
}

Test(io_tfrecord_zlib, bytes_after_the_stream)
{
    uint8_t body[256], buf[8192];
    size_t bn = small_body(body);
    size_t n = gzip_member(0, body, bn, buf);
    memset(buf + n, 0, 8); /* gzip(1) pads tapes with zeros; TensorFlow fails, and so do we */
    tl_tfrecord_zreader *z;
    ASSERT_OK(tl_tfrecord_zreader_create_memory(buf, n + 8, "z.gz", TL_TFRECORD_GZIP, &z));
    cr_assert_eq(read_small_or_fail(z, 3, "zero padding"), TL_EPARSE);
    tl_tfrecord_zreader_destroy(z);
    uLongf zn = sizeof buf;
    cr_assert_eq(compress2(buf, &zn, body, bn, 9), Z_OK);
    memcpy(buf + zn, buf, zn); /* a second ZLIB stream: TensorFlow would drop it silently */
    ASSERT_OK(tl_tfrecord_zreader_create_memory(buf, 2 * zn, "z.gz", TL_TFRECORD_ZLIB, &z));
    cr_assert_eq(read_small_or_fail(z, 3, "two zlib streams"), TL_EPARSE);
    cr_assert(strstr(tl_last_error(), "continues after the end of its stream") != NULL, "%s", tl_last_error());
    tl_tfrecord_zreader_destroy(z);
}

/* ---- AUTO, empty files, names ------------------------------------------- */

Test(io_tfrecord_zlib, sniffing_rule)
{
    uint8_t h[TL_TFRECORD_HEADER_SIZE];
    tl_tfrecord_encode_header(h, 5);
    cr_assert_eq(tl_tfrecord_sniff_compression(h, sizeof h), TL_TFRECORD_NONE);
    static const uint8_t gz[] = {0x1f, 0x8b, 8, 0}, zl[] = {0x78, 0x9c}, zl1[] = {0x78, 0x01}, junk[] = {1, 2, 3};
    cr_assert_eq(tl_tfrecord_sniff_compression(gz, 4), TL_TFRECORD_GZIP);
    cr_assert_eq(tl_tfrecord_sniff_compression(zl, 2), TL_TFRECORD_ZLIB);
    cr_assert_eq(tl_tfrecord_sniff_compression(zl1, 2), TL_TFRECORD_ZLIB);
    cr_assert_eq(tl_tfrecord_sniff_compression(junk, 3), TL_TFRECORD_NONE);
    cr_assert_eq(tl_tfrecord_sniff_compression(NULL, 0), TL_TFRECORD_NONE);
    /* The ambiguous case: a plain record of 0x9c78 bytes starts 78 9c, a ZLIB
     * header, but its length CRC is valid, so it is plain. */
    tl_tfrecord_encode_header(h, 0x9c78);
    cr_assert(h[0] == 0x78 && h[1] == 0x9c);
    cr_assert_eq(tl_tfrecord_sniff_compression(h, sizeof h), TL_TFRECORD_NONE);
    cr_assert_eq(tl_tfrecord_sniff_compression(h, 2), TL_TFRECORD_ZLIB); /* too short to tell */
    tl_tfrecord_encode_header(h, 0x088b1f);
    cr_assert_eq(tl_tfrecord_sniff_compression(h, sizeof h), TL_TFRECORD_NONE);
}

Test(io_tfrecord_zlib, auto_reads_plain_files_and_seeks)
{
    static uint8_t rec[0x9c78];
    memset(rec, 'x', sizeof rec);
    char path[64];
    tmp_path(path, sizeof path);
    tl_tfrecord_zwriter *w;
    ASSERT_OK(tl_tfrecord_zwriter_open(path, O_CREAT | O_TRUNC, TL_TFRECORD_NONE, -1, &w));
    ASSERT_OK(tl_tfrecord_zwriter_write(w, rec, sizeof rec));
    ASSERT_OK(tl_tfrecord_zwriter_write(w, "b", 1));
    ASSERT_OK(tl_tfrecord_zwriter_destroy(w));
    size_t n;
    uint8_t *file = tu_slurp(path, &n);
    for (int how = 0; how < 3; how++) {
        tl_tfrecord_zreader *z;
        mem_stream ms = {file, n, 0, 3};
        if (how == 0)
            ASSERT_OK(tl_tfrecord_zreader_open(path, TL_TFRECORD_AUTO, &z));
        else if (how == 1)
            ASSERT_OK(tl_tfrecord_zreader_create_memory(file, n, "m", TL_TFRECORD_AUTO, &z));
        else
            ASSERT_OK(tl_tfrecord_zreader_create_stream(mem_read, &ms, "s", TL_TFRECORD_AUTO, &z));
        tl_tfrecord_reader *r = tl_tfrecord_zreader_records(z);
        const uint8_t *p;
        size_t len;
        ASSERT_OK(tl_tfrecord_next(r, &p, &len));
        cr_assert_eq(len, sizeof rec, "how %d", how);
        cr_assert_eq(tl_tfrecord_zreader_compression(z), TL_TFRECORD_NONE, "how %d", how);
        uint64_t second = tl_tfrecord_reader_offset(r);
        ASSERT_OK(tl_tfrecord_next(r, &p, &len));
        cr_assert(len == 1 && p[0] == 'b');
        if (how < 2) { /* plain file and memory readers seek */
            ASSERT_OK(tl_tfrecord_reader_seek(r, second, 1));
            ASSERT_OK(tl_tfrecord_next(r, &p, &len));
            cr_assert(len == 1 && p[0] == 'b');
        }
        ASSERT_OK(tl_tfrecord_next(r, &p, &len));
        cr_assert_null(p);
        tl_tfrecord_zreader_destroy(z);
    }
    free(file);
    unlink(path);
}

Test(io_tfrecord_zlib, empty_files_hold_no_records)
{
    char path[64];
    tmp_path(path, sizeof path);
    for (int c = TL_TFRECORD_NONE; c <= TL_TFRECORD_AUTO; c++) {
        tl_tfrecord_zreader *z;
        mem_stream ms = {(const uint8_t *)"", 0, 0, 1};
        for (int how = 0; how < 3; how++) {
            if (how == 0)
                ASSERT_OK(tl_tfrecord_zreader_open(path, (tl_tfrecord_compression)c, &z));
            else if (how == 1)
                ASSERT_OK(tl_tfrecord_zreader_create_memory(NULL, 0, NULL, (tl_tfrecord_compression)c, &z));
            else
                ASSERT_OK(tl_tfrecord_zreader_create_stream(mem_read, &ms, NULL, (tl_tfrecord_compression)c, &z));
            const uint8_t *p = (const uint8_t *)"";
            size_t len;
            ASSERT_OK(tl_tfrecord_next(tl_tfrecord_zreader_records(z), &p, &len));
            cr_assert_null(p, "compression %d how %d", c, how);
            tl_tfrecord_zreader_destroy(z);
        }
    }
    tl_tfrecord_zreader *z = (tl_tfrecord_zreader *)1;
    ASSERT_ERR(tl_tfrecord_zreader_open("/nonexistent/x.gz", TL_TFRECORD_GZIP, &z), TL_EIO, "/nonexistent/x.gz");
    cr_assert_null(z);
    ASSERT_ERR(tl_tfrecord_zreader_open(path, (tl_tfrecord_compression)7, &z), TL_EINVAL, "compression 7");
    unlink(path);
    tl_tfrecord_zreader_destroy(NULL);
    cr_assert_eq(tl_tfrecord_zwriter_destroy(NULL), TL_OK);
}

Test(io_tfrecord_zlib, compression_names)
{
    static const char *const ok[] = {"", "NONE", "GZIP", "ZLIB", "AUTO"};
    static const tl_tfrecord_compression want[] = {TL_TFRECORD_NONE, TL_TFRECORD_NONE, TL_TFRECORD_GZIP,
                                                   TL_TFRECORD_ZLIB, TL_TFRECORD_AUTO};
    for (size_t i = 0; i < 5; i++) {
        tl_tfrecord_compression c;
        ASSERT_OK(tl_tfrecord_compression_parse(ok[i], &c));
        cr_assert_eq(c, want[i]);
    }
    tl_tfrecord_compression c;
    ASSERT_ERR(tl_tfrecord_compression_parse("gzip", &c), TL_EINVAL, "\"gzip\" is not one of");
    cr_assert_str_eq(tl_tfrecord_compression_name(TL_TFRECORD_GZIP), "GZIP");
    cr_assert_str_eq(tl_tfrecord_compression_name(TL_TFRECORD_NONE), "");
}

/* A writer whose descriptor refuses writes fails with the file's name, and
 * keeps failing. */
Test(io_tfrecord_zlib, write_failures_are_sticky)
{
    int fd = open("/dev/full", O_WRONLY);
    cr_assert_geq(fd, 0);
    tl_tfrecord_zwriter *w;
    ASSERT_OK(tl_tfrecord_zwriter_create_fd(fd, "full.gz", true, TL_TFRECORD_GZIP, 0, &w));
    static uint8_t big[200000];
    ASSERT_ERR(tl_tfrecord_zwriter_write(w, big, sizeof big), TL_EIO, "full.gz: write failed");
    ASSERT_ERR(tl_tfrecord_zwriter_write(w, "a", 1), TL_EIO, "full.gz: write failed");
    ASSERT_ERR(tl_tfrecord_zwriter_flush(w, false), TL_EIO, "full.gz");
    ASSERT_ERR(tl_tfrecord_zwriter_destroy(w), TL_EIO, "full.gz");
}

/* ---- allocation failure ------------------------------------------------- */

static tl_status oom_round_trip(void *ctx)
{
    const char *path = ctx;
    tl_tfrecord_zwriter *w;
    tl_status st = tl_tfrecord_zwriter_open(path, O_CREAT | O_TRUNC, TL_TFRECORD_GZIP, 1, &w);
    if (st != TL_OK)
        return st;
    st = tl_tfrecord_zwriter_write(w, "hello", 5);
    tl_status st2 = tl_tfrecord_zwriter_destroy(w);
    if (st == TL_OK)
        st = st2;
    if (st != TL_OK)
        return st;
    for (int c = TL_TFRECORD_GZIP; c <= TL_TFRECORD_AUTO; c += 2) {
        tl_tfrecord_zreader *z;
        st = tl_tfrecord_zreader_open(path, (tl_tfrecord_compression)c, &z);
        if (st != TL_OK)
            return st;
        const uint8_t *p;
        size_t len;
        st = tl_tfrecord_next(tl_tfrecord_zreader_records(z), &p, &len);
        if (st == TL_OK && (p == NULL || len != 5))
            st = tl_error(TL_ERUNTIME, "wrong record");
        tl_tfrecord_zreader_destroy(z);
        if (st != TL_OK)
            return st;
    }
    return TL_OK;
}

Test(io_tfrecord_zlib, allocation_failures_unwind)
{
    char path[64];
    tmp_path(path, sizeof path);
    cr_assert_gt(tu_oom_sweep(oom_round_trip, path, "GZIP write and read"), 3);
    unlink(path);
}

/* TFRecord framing: files TensorFlow wrote (../shared/testdata/external,
 * checked against their .expected.json), byte-exact writing, round trips
 * through every reader source, every truncation point and every bit flip of
 * a small file, lying lengths, sticky errors, seeking, write failures and
 * allocation failures. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base_int.h"
#include "io/crc32c.h"
#include "io/tfrecord.h"
#include "testutil.h"

#define EXTERNAL "../shared/testdata/external"
#define SINGLES EXTERNAL "/pwnall-tfrecord/singles.tfrecords"
#define LINGVO_EVENTS EXTERNAL "/lingvo/events.out.tfevents.test"
#define LINGVO_WMT EXTERNAL "/lingvo/wmt14_ende_wpm_32k_test.tfrecord"

static json_t *load_json(const char *path)
{
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    cr_assert_not_null(j, "%s: %s at line %d", path, err.text, err.line);
    return j;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

/* A stream over memory handing out at most `chunk` bytes a call (short reads
 * are not the end of a stream), failing at fail_at when that is set. */
typedef struct mem_stream {
    const uint8_t *data;
    size_t size, pos, chunk;
    size_t fail_at; /* 0: never */
} mem_stream;

static tl_status mem_read(void *ud, void *buf, size_t n, size_t *got)
{
    mem_stream *s = ud;
    if (s->fail_at > 0 && s->pos >= s->fail_at)
        return tl_error(TL_EIO, "the disk is on fire");
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

typedef enum { SRC_MEM, SRC_FILE, SRC_STREAM } src;
static const char *const src_names[] = {"memory", "file", "stream"};

/* A reader of data[0..n) through source kind s; for SRC_FILE the bytes are
 * written to a temporary file first (its path in tmp, removed by the caller). */
static tl_tfrecord_reader *reader_of(src s, const uint8_t *data, size_t n, mem_stream *ms, char *tmp)
{
    tl_tfrecord_reader *r = NULL;
    if (s == SRC_MEM) {
        ASSERT_OK(tl_tfrecord_reader_create_memory(data, n, "buf.tfrecord", &r));
    } else if (s == SRC_FILE) {
        strcpy(tmp, "/tmp/tl_tfrecord_XXXXXX");
        int fd = mkstemp(tmp);
        cr_assert_geq(fd, 0);
        close(fd);
        write_file(tmp, data, n);
        ASSERT_OK(tl_tfrecord_reader_open(tmp, &r));
    } else {
        *ms = (mem_stream){data, n, 0, 7, 0};
        ASSERT_OK(tl_tfrecord_reader_create_stream(mem_read, ms, "pipe.tfrecord", &r));
    }
    return r;
}

/* The framing of a fixture as its .expected.json gives it. */
typedef struct framing {
    size_t count;
    uint64_t offset[400], length[400];
    uint32_t length_crc[400], data_crc[400];
    char sha256[400][65]; /* "" when the JSON has none */
} framing;

static void load_framing(const char *json_path, framing *fr)
{
    json_t *j = load_json(json_path);
    json_t *fa = json_object_get(j, "framing");
    json_t *recs = json_object_get(j, "records");
    fr->count = json_array_size(fa);
    cr_assert_eq((json_int_t)fr->count, json_integer_value(json_object_get(j, "record_count")));
    cr_assert_leq(fr->count, 400);
    for (size_t i = 0; i < fr->count; i++) {
        json_t *e = json_array_get(fa, i);
        fr->offset[i] = (uint64_t)json_integer_value(json_object_get(e, "offset"));
        fr->length[i] = (uint64_t)json_integer_value(json_object_get(e, "length"));
        fr->length_crc[i] = (uint32_t)strtoul(json_string_value(json_object_get(e, "length_crc")), NULL, 16);
        fr->data_crc[i] = (uint32_t)strtoul(json_string_value(json_object_get(e, "data_crc")), NULL, 16);
        json_t *sha = json_object_get(json_array_get(recs, i), "record_sha256");
        snprintf(fr->sha256[i], sizeof fr->sha256[i], "%s", sha != NULL ? json_string_value(sha) : "");
    }
    json_decref(j);
}

/* Reads every record of r and checks it against fr: offsets, lengths, the
 * CRCs TensorFlow stored, and each record's SHA-256 where the JSON has it. */
static void check_against_framing(tl_tfrecord_reader *r, const framing *fr, const uint8_t *file, const char *what)
{
    for (size_t i = 0; i < fr->count; i++) {
        cr_assert_eq(tl_tfrecord_reader_offset(r), fr->offset[i], "%s: record %zu offset", what, i);
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_not_null(rec, "%s: record %zu missing", what, i);
        cr_assert_eq(len, fr->length[i], "%s: record %zu length %zu", what, i, len);
        cr_assert_eq(tl_tfrecord_data_crc(rec, len), fr->data_crc[i], "%s: record %zu data CRC", what, i);
        uint8_t hdr[TL_TFRECORD_HEADER_SIZE];
        tl_tfrecord_encode_header(hdr, len);
        cr_assert_eq(memcmp(hdr, file + fr->offset[i], sizeof hdr), 0, "%s: record %zu header bytes", what, i);
        uint32_t lcrc = (uint32_t)hdr[8] | (uint32_t)hdr[9] << 8 | (uint32_t)hdr[10] << 16 | (uint32_t)hdr[11] << 24;
        cr_assert_eq(lcrc, fr->length_crc[i], "%s: record %zu length CRC", what, i);
        if (fr->sha256[i][0] != '\0') {
            char hex[SHA256_DIGEST_STRING_LENGTH];
            SHA256Data(rec, len, hex);
            cr_assert_str_eq(hex, fr->sha256[i], "%s: record %zu sha256", what, i);
        }
        cr_assert_eq(tl_tfrecord_reader_index(r), i + 1);
    }
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
    cr_assert_null(rec, "%s: a record after the last one", what);
    ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
    cr_assert_null(rec, "%s: the end is not repeated", what);
}

static void check_fixture(const char *path)
{
    static framing fr;
    char json_path[512];
    snprintf(json_path, sizeof json_path, "%s.expected.json", path);
    load_framing(json_path, &fr);
    size_t n;
    uint8_t *file = tu_slurp(path, &n);
    for (src s = SRC_MEM; s <= SRC_STREAM; s++) {
        mem_stream ms;
        char tmp[64] = "";
        tl_tfrecord_reader *r;
        if (s == SRC_FILE)
            ASSERT_OK(tl_tfrecord_reader_open(path, &r));
        else
            r = reader_of(s, file, n, &ms, tmp);
        char what[600];
        snprintf(what, sizeof what, "%s via %s", path, src_names[s]);
        check_against_framing(r, &fr, file, what);
        tl_tfrecord_reader_destroy(r);
    }
    free(file);
}

Test(io_tfrecord, reads_the_file_tensorflow_wrote) { check_fixture(SINGLES); }
Test(io_tfrecord, reads_lingvo_event_file_framing) { check_fixture(LINGVO_EVENTS); }
Test(io_tfrecord, reads_lingvo_example_file) { check_fixture(LINGVO_WMT); }

/* Rewriting the records of TensorFlow's file gives TensorFlow's bytes, through
 * a descriptor and through a FILE. */
Test(io_tfrecord, writer_reproduces_tensorflow_bytes)
{
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    char path[] = "/tmp/tl_tfrecord_w_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    for (int use_file = 0; use_file < 2; use_file++) {
        tl_tfrecord_writer *w;
        FILE *f = NULL;
        if (use_file) {
            f = fopen(path, "wb");
            ASSERT_OK(tl_tfrecord_writer_create_file(f, path, &w));
        } else {
            ASSERT_OK(tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w));
        }
        tl_tfrecord_reader *r;
        ASSERT_OK(tl_tfrecord_reader_create_memory(file, n, "singles", &r));
        const uint8_t *rec;
        size_t len;
        while (tl_tfrecord_next(r, &rec, &len) == TL_OK && rec != NULL)
            ASSERT_OK(tl_tfrecord_write(w, rec, len));
        tl_tfrecord_reader_destroy(r);
        cr_assert_eq(tl_tfrecord_writer_bytes(w), n);
        ASSERT_OK(tl_tfrecord_writer_flush(w, true));
        ASSERT_OK(tl_tfrecord_writer_destroy(w));
        if (f != NULL)
            fclose(f);
        size_t m;
        uint8_t *out = tu_slurp(path, &m);
        cr_assert_eq(m, n, "written %zu bytes, TensorFlow wrote %zu", m, n);
        cr_assert_eq(memcmp(out, file, n), 0, "the bytes differ from TensorFlow's (FILE: %d)", use_file);
        free(out);
    }
    unlink(path);
    free(file);
}

static const size_t sizes[] = {0, 1, 2, 11, 12, 13, 100, 65536 - 16, 65536 - 12, 65536, 65537, 300000, 0, 5};

static uint8_t *pattern(size_t n, uint32_t seed)
{
    uint8_t *p = malloc(n > 0 ? n : 1);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
    return p;
}

/* Records of every size around the header, the write buffer (64 KiB) and the
 * reader's first chunk come back byte for byte through every source, with
 * their offsets; an empty record is a non-NULL pointer. */
Test(io_tfrecord, round_trip_through_every_source)
{
    char path[] = "/tmp/tl_tfrecord_rt_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    tl_tfrecord_writer *w;
    ASSERT_OK(tl_tfrecord_writer_create_fd(fd, path, true, &w));
    uint64_t offsets[TL_ARRAY_LEN(sizes) + 1] = {0};
    for (size_t i = 0; i < TL_ARRAY_LEN(sizes); i++) {
        uint8_t *p = pattern(sizes[i], (uint32_t)i);
        ASSERT_OK(tl_tfrecord_write(w, sizes[i] ? p : NULL, sizes[i]));
        free(p);
        offsets[i + 1] = offsets[i] + sizes[i] + 16;
        cr_assert_eq(tl_tfrecord_writer_bytes(w), offsets[i + 1]);
    }
    ASSERT_OK(tl_tfrecord_writer_destroy(w));
    size_t n;
    uint8_t *file = tu_slurp(path, &n);
    cr_assert_eq(n, offsets[TL_ARRAY_LEN(sizes)]);
    for (src s = SRC_MEM; s <= SRC_STREAM; s++) {
        mem_stream ms;
        char tmp[64] = "";
        tl_tfrecord_reader *r = reader_of(s, file, n, &ms, tmp);
        for (size_t i = 0; i < TL_ARRAY_LEN(sizes); i++) {
            cr_assert_eq(tl_tfrecord_reader_offset(r), offsets[i]);
            const uint8_t *rec;
            size_t len;
            ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
            cr_assert_not_null(rec, "%s: record %zu (%zu bytes) missing", src_names[s], i, sizes[i]);
            cr_assert_eq(len, sizes[i], "%s: record %zu", src_names[s], i);
            uint8_t *p = pattern(sizes[i], (uint32_t)i);
            cr_assert_eq(memcmp(rec, p, len), 0, "%s: record %zu differs", src_names[s], i);
            free(p);
        }
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_null(rec);
        tl_tfrecord_reader_destroy(r);
        if (tmp[0])
            unlink(tmp);
    }
    free(file);
    unlink(path);
}

/* The record of singles.tfrecords that byte b belongs to, and its start. */
static const uint64_t singles_start[] = {0, 40, 85, 130};

static int record_of(size_t b)
{
    int i = 0;
    while (b >= singles_start[i + 1])
        i++;
    return i;
}

/* Reads r to its end or first error; returns the status and the number of
 * records read. */
static tl_status drain_reader(tl_tfrecord_reader *r, int *count)
{
    *count = 0;
    for (;;) {
        const uint8_t *rec;
        size_t len;
        tl_status st = tl_tfrecord_next(r, &rec, &len);
        if (st != TL_OK || rec == NULL)
            return st;
        (*count)++;
    }
}

static void expect_fault(tl_status st, tl_tfrecord_reader *r, tl_tfrecord_fault fault, const char *frag,
                         const char *name, int index, uint64_t offset, const char *what)
{
    cr_assert_eq(st, TL_EPARSE, "%s: got %s (%s)", what, tl_err_name(st), tl_last_error());
    cr_assert_eq(tl_tfrecord_reader_fault(r), fault, "%s: fault %d, want %d (%s)", what, tl_tfrecord_reader_fault(r),
                 fault, tl_last_error());
    char where[128];
    snprintf(where, sizeof where, "record %d at byte offset %llu:", index, (unsigned long long)offset);
    /* The first record's header failing its CRC is a file that is not
     * TFRecord data, and said so. */
    if (fault == TL_TFRECORD_FAULT_BAD_LENGTH_CRC && index == 0 && offset == 0) {
        frag = "not a TFRecord file: the first record's length CRC does not match";
        snprintf(where, sizeof where, "at byte 0 (");
    }
    const char *msg = tl_last_error();
    cr_assert(strstr(msg, frag) && strstr(msg, where) && strstr(msg, name), "%s: message \"%s\" lacks %s / %s / %s",
              what, msg, frag, where, name);
    cr_assert_eq(tl_tfrecord_reader_offset(r), offset, "%s: the offset stays at the failing record", what);
}

/* Every prefix of a file: the whole records before the cut come back, then a
 * clean end at a record boundary, else the named truncation at the record's
 * offset. */
Test(io_tfrecord, every_truncation_point_is_named)
{
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    cr_assert_eq(n, 130);
    for (src s = SRC_MEM; s <= SRC_STREAM; s++) {
        for (size_t cut = 0; cut <= n; cut++) {
            mem_stream ms;
            char tmp[64] = "";
            tl_tfrecord_reader *r = reader_of(s, file, cut, &ms, tmp);
            int count;
            tl_status st = drain_reader(r, &count);
            int i = cut == n ? 3 : record_of(cut);
            char what[64];
            snprintf(what, sizeof what, "%s cut at %zu", src_names[s], cut);
            cr_assert_eq(count, i, "%s: %d whole records, want %d", what, count, i);
            const char *name = s == SRC_MEM ? "buf.tfrecord" : s == SRC_FILE ? tmp : "pipe.tfrecord";
            if (cut == singles_start[i])
                cr_assert_eq(st, TL_OK, "%s: %s", what, tl_last_error());
            else if (cut - singles_start[i] < TL_TFRECORD_HEADER_SIZE)
                expect_fault(st, r, TL_TFRECORD_FAULT_TRUNCATED_HEADER, "truncated header", name, i,
                             singles_start[i], what);
            else
                expect_fault(st, r, TL_TFRECORD_FAULT_TRUNCATED_DATA, "runs past the end of the file", name, i,
                             singles_start[i], what);
            tl_tfrecord_reader_destroy(r);
            if (tmp[0])
                unlink(tmp);
        }
    }
    free(file);
}

/* Every single-bit error is caught by the CRC that covers it: the length and
 * its CRC by the length CRC, the data and its CRC by the data CRC. */
Test(io_tfrecord, every_bit_flip_is_named)
{
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    for (src s = SRC_MEM; s <= SRC_STREAM; s++) {
        for (size_t b = 0; b < n; b++) {
            for (int bit = 0; bit < 8; bit++) {
                if (s == SRC_FILE && (size_t)bit != b % 8)
                    continue; /* one bit a byte through the file system is enough */
                file[b] ^= (uint8_t)(1u << bit);
                mem_stream ms;
                char tmp[64] = "";
                tl_tfrecord_reader *r = reader_of(s, file, n, &ms, tmp);
                int count;
                tl_status st = drain_reader(r, &count);
                int i = record_of(b);
                char what[64];
                snprintf(what, sizeof what, "%s: byte %zu bit %d", src_names[s], b, bit);
                cr_assert_eq(count, i, "%s", what);
                const char *name = s == SRC_MEM ? "buf.tfrecord" : s == SRC_FILE ? tmp : "pipe.tfrecord";
                if (b - singles_start[i] < TL_TFRECORD_HEADER_SIZE)
                    expect_fault(st, r, TL_TFRECORD_FAULT_BAD_LENGTH_CRC, "bad length CRC", name, i,
                                 singles_start[i], what);
                else
                    expect_fault(st, r, TL_TFRECORD_FAULT_BAD_DATA_CRC, "bad data CRC", name, i, singles_start[i],
                                 what);
                tl_tfrecord_reader_destroy(r);
                if (tmp[0])
                    unlink(tmp);
                file[b] ^= (uint8_t)(1u << bit);
            }
        }
    }
    free(file);
}

/* The largest single allocation tpuloop asks for while hooked. */
static size_t max_alloc;

static void *big_malloc(size_t n, void *ud)
{
    (void)ud;
    if (n > max_alloc)
        max_alloc = n;
    return malloc(n);
}

static void *big_realloc(void *p, size_t n, void *ud)
{
    (void)ud;
    if (n > max_alloc)
        max_alloc = n;
    return realloc(p, n);
}

static void big_free(void *p, void *ud)
{
    (void)ud;
    free(p);
}

/* A length with a valid CRC that claims far more than the stream holds is a
 * named error that never allocates the claimed size: from the file's size
 * where it is known, by growing with the bytes that arrive where it is not. */
Test(io_tfrecord, lying_length_never_allocates_it)
{
    uint8_t buf[TL_TFRECORD_HEADER_SIZE + 1000];
    memset(buf, 0xab, sizeof buf);
    const uint64_t lies[] = {(uint64_t)1 << 30, (uint64_t)1 << 40, UINT64_MAX};
    tl_allocator a = {big_malloc, big_realloc, big_free, NULL};
    for (size_t k = 0; k < TL_ARRAY_LEN(lies); k++) {
        tl_tfrecord_encode_header(buf, lies[k]);
        for (src s = SRC_MEM; s <= SRC_STREAM; s++) {
            mem_stream ms;
            char tmp[64] = "";
            max_alloc = 0;
            tl_set_allocator(&a);
            tl_tfrecord_reader *r = reader_of(s, buf, sizeof buf, &ms, tmp);
            int count;
            tl_status st = drain_reader(r, &count);
            tl_set_allocator(NULL);
            const char *name = s == SRC_MEM ? "buf.tfrecord" : s == SRC_FILE ? tmp : "pipe.tfrecord";
            char what[64];
            snprintf(what, sizeof what, "%s: length %llu", src_names[s], (unsigned long long)lies[k]);
            if (lies[k] > TL_TFRECORD_DEFAULT_MAX_RECORD)
                expect_fault(st, r, TL_TFRECORD_FAULT_TOO_LARGE, "bytes allowed for one record", name, 0, 0, what);
            else
                expect_fault(st, r, TL_TFRECORD_FAULT_TRUNCATED_DATA, "runs past the end of the file", name, 0, 0,
                             what);
            cr_assert_lt(max_alloc, (size_t)1 << 20, "%s: allocated %zu bytes", what, max_alloc);
            tl_tfrecord_reader_destroy(r);
            if (tmp[0])
                unlink(tmp);
        }
    }
    /* A lower limit applies to honest records too. */
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    tl_tfrecord_reader *r;
    ASSERT_OK(tl_tfrecord_reader_create_memory(file, n, "singles", &r));
    tl_tfrecord_reader_set_max_record(r, 28);
    int count;
    expect_fault(drain_reader(r, &count), r, TL_TFRECORD_FAULT_TOO_LARGE, "length 29 is more than the 28 bytes",
                 "singles", 1, 40, "max_record 28");
    cr_assert_eq(count, 1);
    tl_tfrecord_reader_destroy(r);
    free(file);
}

/* After an error every call repeats it; seek clears it and resumes at a
 * saved position, for a dataset restored from a checkpoint or a follower of a
 * file still being written. */
Test(io_tfrecord, errors_stick_until_seek_and_seek_resumes)
{
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    file[50] ^= 1; /* record 1's data */
    for (src s = SRC_MEM; s <= SRC_FILE; s++) {
        mem_stream ms;
        char tmp[64] = "";
        tl_tfrecord_reader *r = reader_of(s, file, n, &ms, tmp);
        int count;
        cr_assert_eq(drain_reader(r, &count), TL_EPARSE);
        char first[512];
        snprintf(first, sizeof first, "%s", tl_last_error());
        const uint8_t *rec;
        size_t len;
        tl_clear_error();
        cr_assert_eq(tl_tfrecord_next(r, &rec, &len), TL_EPARSE);
        cr_assert_null(rec);
        cr_assert_str_eq(tl_last_error(), first);
        /* skip the bad record: resume at record 2 */
        ASSERT_OK(tl_tfrecord_reader_seek(r, 85, 2));
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_eq(len, 29);
        cr_assert_eq(tl_tfrecord_reader_index(r), 3);
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_null(rec);
        /* and back to the start */
        ASSERT_OK(tl_tfrecord_reader_seek(r, 0, 0));
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_eq(len, 24);
        if (s == SRC_MEM)
            ASSERT_ERR(tl_tfrecord_reader_seek(r, 131, 0), TL_EINVAL, "past the end of the 130-byte buffer");
        tl_tfrecord_reader_destroy(r);
        if (tmp[0])
            unlink(tmp);
    }
    tl_tfrecord_reader *r;
    mem_stream ms = {file, n, 0, 7, 0};
    ASSERT_OK(tl_tfrecord_reader_create_stream(mem_read, &ms, "pipe", &r));
    ASSERT_ERR(tl_tfrecord_reader_seek(r, 0, 0), TL_ENOTIMPL, "pipe: a stream cannot seek");
    tl_tfrecord_reader_destroy(r);
    free(file);
}

/* skip_record steps over a record whose data CRC failed, on every source —
 * a stream too, which cannot seek — and only in that state. */
Test(io_tfrecord, skip_record_steps_over_a_bad_data_crc)
{
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    for (src s = SRC_MEM; s <= SRC_STREAM; s++) {
        mem_stream ms;
        char tmp[64] = "";
        tl_tfrecord_reader *r = reader_of(s, file, n, &ms, tmp);
        ASSERT_ERR(tl_tfrecord_reader_skip_record(r), TL_EINVAL, "only a record whose data CRC failed");
        tl_tfrecord_reader_destroy(r);
        if (tmp[0])
            unlink(tmp);
    }
    file[60] ^= 1; /* record 1's data (bytes 52..80) */
    for (src s = SRC_MEM; s <= SRC_STREAM; s++) {
        mem_stream ms;
        char tmp[64] = "";
        tl_tfrecord_reader *r = reader_of(s, file, n, &ms, tmp);
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_eq(tl_tfrecord_next(r, &rec, &len), TL_EPARSE, "%s", src_names[s]);
        cr_assert_eq(tl_tfrecord_reader_fault(r), TL_TFRECORD_FAULT_BAD_DATA_CRC, "%s: fault %d: %s", src_names[s], (int)tl_tfrecord_reader_fault(r), tl_last_error());
        ASSERT_OK(tl_tfrecord_reader_skip_record(r));
        cr_assert_eq(tl_tfrecord_reader_offset(r), 85, "%s", src_names[s]);
        cr_assert_eq(tl_tfrecord_reader_index(r), 2);
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_eq(len, 29);
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_null(rec, "%s: the end after record 2", src_names[s]);
        tl_tfrecord_reader_destroy(r);
        if (tmp[0])
            unlink(tmp);
    }
    /* A bad length CRC cannot be stepped over. */
    file[60] ^= 1;
    file[41] ^= 1; /* record 1's length */
    tl_tfrecord_reader *r;
    ASSERT_OK(tl_tfrecord_reader_create_memory(file, n, "buf", &r));
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
    cr_assert_eq(tl_tfrecord_next(r, &rec, &len), TL_EPARSE);
    cr_assert_eq(tl_tfrecord_reader_fault(r), TL_TFRECORD_FAULT_BAD_LENGTH_CRC);
    ASSERT_ERR(tl_tfrecord_reader_skip_record(r), TL_EINVAL, "only a record whose data CRC failed");
    tl_tfrecord_reader_destroy(r);
    free(file);
}

/* A file that grows (a live event file) is read as far as it goes, and after
 * a seek back the record that was being written is read whole. */
Test(io_tfrecord, follows_a_growing_file)
{
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    char path[] = "/tmp/tl_tfrecord_grow_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, file, 60), 60); /* record 0 and part of record 1 */
    tl_tfrecord_reader *r;
    ASSERT_OK(tl_tfrecord_reader_open(path, &r));
    int count;
    expect_fault(drain_reader(r, &count), r, TL_TFRECORD_FAULT_TRUNCATED_DATA, "runs past", path, 1, 40, "growing");
    cr_assert_eq(write(fd, file + 60, n - 60), (ssize_t)(n - 60));
    close(fd);
    ASSERT_OK(tl_tfrecord_reader_seek(r, tl_tfrecord_reader_offset(r), tl_tfrecord_reader_index(r)));
    ASSERT_OK(drain_reader(r, &count));
    cr_assert_eq(count, 2);
    tl_tfrecord_reader_destroy(r);
    unlink(path);
    free(file);
}

/* /dev/full takes the open and refuses the bytes: the failure names the file
 * and the reason, and sticks. */
Test(io_tfrecord, write_failure_names_the_file_and_sticks)
{
    tl_tfrecord_writer *w;
    ASSERT_OK(tl_tfrecord_writer_open("/dev/full", 0, &w));
    ASSERT_OK(tl_tfrecord_write(w, "abc", 3)); /* buffered */
    ASSERT_ERR(tl_tfrecord_writer_flush(w, true), TL_EIO, "/dev/full: write failed");
    cr_assert(strstr(tl_last_error(), strerror(ENOSPC)), "%s", tl_last_error());
    ASSERT_ERR(tl_tfrecord_write(w, "abc", 3), TL_EIO, "/dev/full: write failed");
    ASSERT_ERR(tl_tfrecord_writer_destroy(w), TL_EIO, "/dev/full");

    /* A record larger than the buffer goes straight through and fails at once. */
    ASSERT_OK(tl_tfrecord_writer_open("/dev/full", 0, &w));
    uint8_t *big = pattern(200000, 1);
    ASSERT_ERR(tl_tfrecord_write(w, big, 200000), TL_EIO, "/dev/full");
    free(big);
    tl_tfrecord_writer_destroy(w);

    FILE *f = fopen("/dev/full", "wb");
    cr_assert_not_null(f);
    ASSERT_OK(tl_tfrecord_writer_create_file(f, "full-stream", &w));
    tl_status st = tl_tfrecord_write(w, "abc", 3);
    if (st == TL_OK)
        st = tl_tfrecord_writer_flush(w, false);
    cr_assert_eq(st, TL_EIO);
    cr_assert(strstr(tl_last_error(), "full-stream:"), "%s", tl_last_error());
    tl_tfrecord_writer_destroy(w);
    fclose(f);

    /* /dev/null cannot fsync, which is no failure. */
    ASSERT_OK(tl_tfrecord_writer_open("/dev/null", 0, &w));
    ASSERT_OK(tl_tfrecord_write(w, "abc", 3));
    ASSERT_OK(tl_tfrecord_writer_flush(w, true));
    ASSERT_OK(tl_tfrecord_writer_destroy(w));
    ASSERT_OK(tl_tfrecord_writer_destroy(NULL));
}

Test(io_tfrecord, open_errors_name_the_path)
{
    tl_tfrecord_reader *r;
    ASSERT_ERR(tl_tfrecord_reader_open("/nonexistent/x.tfrecord", &r), TL_EIO,
               "/nonexistent/x.tfrecord: cannot open for reading");
    cr_assert_null(r);
    tl_tfrecord_writer *w;
    char path[] = "/tmp/tl_tfrecord_ex_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    errno = 0;
    ASSERT_ERR(tl_tfrecord_writer_open(path, O_CREAT | O_EXCL, &w), TL_EIO, "cannot open for writing");
    cr_assert_eq(errno, EEXIST, "errno is kept for the caller");
    cr_assert_null(w);
    unlink(path);
}

Test(io_tfrecord, stream_failure_names_the_stream)
{
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    mem_stream ms = {file, n, 0, 5, 50};
    tl_tfrecord_reader *r;
    ASSERT_OK(tl_tfrecord_reader_create_stream(mem_read, &ms, "gz:train", &r));
    int count;
    tl_status st = drain_reader(r, &count);
    cr_assert_eq(st, TL_EIO);
    cr_assert_eq(tl_tfrecord_reader_fault(r), TL_TFRECORD_FAULT_READ_ERROR);
    cr_assert(strstr(tl_last_error(), "gz:train: read failed near byte offset") &&
                  strstr(tl_last_error(), "the disk is on fire"),
              "%s", tl_last_error());
    cr_assert_eq(count, 1);
    tl_tfrecord_reader_destroy(r);
    free(file);
}

static uint8_t *oom_file;
static size_t oom_n;

static tl_status oom_sequence(void *ctx)
{
    const char *path = ctx;
    tl_tfrecord_writer *w;
    tl_status st = tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w);
    for (int i = 0; st == TL_OK && i < 3; i++)
        st = tl_tfrecord_write(w, oom_file, oom_n);
    tl_status st2 = w != NULL ? tl_tfrecord_writer_destroy(w) : TL_OK;
    if (st != TL_OK || st2 != TL_OK)
        return st != TL_OK ? st : st2;
    for (src s = SRC_MEM; s <= SRC_STREAM; s++) {
        tl_tfrecord_reader *r = NULL;
        mem_stream ms = {oom_file, oom_n, 0, 3, 0};
        if (s == SRC_MEM)
            st = tl_tfrecord_reader_create_memory(oom_file, oom_n, "m", &r);
        else if (s == SRC_FILE)
            st = tl_tfrecord_reader_open(path, &r);
        else
            st = tl_tfrecord_reader_create_stream(mem_read, &ms, "s", &r);
        int count = 0;
        if (st == TL_OK)
            st = drain_reader(r, &count);
        tl_tfrecord_reader_destroy(r);
        if (st != TL_OK)
            return st;
        if (count != 3)
            return tl_error(TL_ERUNTIME, "read %d records", count);
    }
    return TL_OK;
}

Test(io_tfrecord, allocation_failures_unwind)
{
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    oom_file = file;
    oom_n = n;
    char path[] = "/tmp/tl_tfrecord_oom_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    tu_oom_sweep(oom_sequence, path, "TFRecord write and read");
    unlink(path);
    free(file);
}

/* The public TFRecord API (tpuloop/tfrecord.h): the external files
 * TensorFlow and TFX wrote, read against their .expected.json framing;
 * round trips through the writer for NONE, GZIP and ZLIB, read back with
 * the compression named and with AUTO; corrupt records with their faults
 * and skip_record; files that are not TFRecord data; atomic writes (nothing
 * under the name until close, an old file kept by destroy and by a failing
 * close at every fallible step); finish then close; the argument checks;
 * and allocation failures in every constructor. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/file.h" /* the I/O fault injector */
#include "testutil.h"
#include "tpuloop/tfrecord.h"

#define EXTERNAL "../shared/testdata/external"
#define SINGLES EXTERNAL "/pwnall-tfrecord/singles.tfrecords"
#define PENGUIN EXTERNAL "/tfx/penguin-Split-eval-data_tfrecord-00000-of-00001.gz"

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* A fresh directory under /tmp (malloc'd); rmdir_all removes it and what
 * is in it, and frees the name. */
static char *new_dir(void)
{
    char *d = strdup("/tmp/tl_trf_XXXXXX");
    cr_assert(d != NULL && mkdtemp(d) != NULL);
    return d;
}

/* The number of entries in dir. */
static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void rmdir_all(char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

/* Reads r to its end and returns the number of records, checking the
 * reader's index and offset before each, and each record's offset and
 * length against framing (the .expected.json entries) when given. */
static size_t read_all(tl_record_reader *r, const json_t *framing)
{
    const uint8_t *rec;
    size_t n, count = 0;
    uint64_t offset = 0;
    tl_status st;
    for (;;) {
        cr_assert_eq(tl_record_reader_index(r), count);
        cr_assert_eq(tl_record_reader_offset(r), offset);
        if ((st = tl_record_reader_next(r, &rec, &n)) != TL_OK || rec == NULL)
            break;
        if (framing != NULL) {
            const json_t *e = json_array_get(framing, count);
            cr_assert_eq((json_int_t)offset, json_integer_value(json_object_get(e, "offset")), "record %zu", count);
            cr_assert_eq((json_int_t)n, json_integer_value(json_object_get(e, "length")), "record %zu", count);
        }
        offset += 16 + n;
        count++;
    }
    ASSERT_OK(st);
    cr_assert_eq(tl_record_reader_fault(r), TL_RECORD_FAULT_NONE);
    return count;
}

static void check_external(const char *path, tl_record_compression c, tl_record_compression want)
{
    char jp[512];
    snprintf(jp, sizeof jp, "%s.expected.json", path);
    json_error_t e;
    json_t *j = json_load_file(jp, 0, &e);
    cr_assert_not_null(j, "%s: %s", jp, e.text);
    tl_record_reader *r;
    ASSERT_OK(tl_record_reader_open(path, c, &r));
    cr_assert_eq(tl_record_reader_compression(r), want);
    size_t n = read_all(r, json_object_get(j, "framing"));
    cr_assert_eq((json_int_t)n, json_integer_value(json_object_get(j, "record_count")));
    if (want == TL_RECORD_NONE)
        cr_assert_eq(tl_record_reader_compressed_offset(r), 0u);
    else
        cr_assert_eq((json_int_t)tl_record_reader_compressed_offset(r),
                     json_integer_value(json_object_get(j, "file_size")),
                     "the whole compressed file was consumed");
    /* The end repeats itself. */
    const uint8_t *rec = (const uint8_t *)"x";
    size_t len = 1;
    ASSERT_OK(tl_record_reader_next(r, &rec, &len));
    cr_assert(rec == NULL && len == 0);
    tl_record_reader_destroy(r);
    json_decref(j);
}

Test(io_tfrecord_file, reads_the_external_files)
{
    check_external(SINGLES, TL_RECORD_NONE, TL_RECORD_NONE);
    check_external(SINGLES, TL_RECORD_AUTO, TL_RECORD_NONE);
    check_external(PENGUIN, TL_RECORD_GZIP, TL_RECORD_GZIP);
    check_external(PENGUIN, TL_RECORD_AUTO, TL_RECORD_GZIP);
}

/* ---- round trips ----------------------------------------------------------- */

/* Records 0..n-1: record i has i*37 % 300 bytes of a pattern (0 bytes too). */
static size_t record_of(int i, uint8_t *buf)
{
    size_t len = (size_t)(i * 37 % 300);
    for (size_t k = 0; k < len; k++)
        buf[k] = (uint8_t)(i * 7 + (int)k * 13);
    return len;
}

static void write_records(const char *path, tl_record_compression c, bool atomic, int n)
{
    tl_record_writer_options o;
    tl_record_writer_options_init(&o);
    o.compression = c;
    o.atomic = atomic;
    tl_record_writer *w;
    ASSERT_OK(tl_record_writer_open(path, &o, &w));
    uint8_t buf[300];
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++) {
        size_t len = record_of(i, buf);
        ASSERT_OK(tl_record_writer_write(w, len > 0 ? buf : NULL, len));
        bytes += 16 + len;
        cr_assert_eq(tl_record_writer_bytes(w), bytes);
    }
    ASSERT_OK(tl_record_writer_close(w));
}

static void check_records(const char *path, tl_record_compression c, int n)
{
    tl_record_reader *r;
    ASSERT_OK(tl_record_reader_open(path, c, &r));
    uint8_t buf[300];
    for (int i = 0; i <= n; i++) {
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_record_reader_next(r, &rec, &len));
        if (i == n) {
            cr_assert_null(rec);
            break;
        }
        size_t want = record_of(i, buf);
        cr_assert_not_null(rec, "record %d: an empty record is not the end", i);
        cr_assert_eq(len, want, "record %d", i);
        cr_assert(memcmp(rec, buf, len) == 0, "record %d", i);
    }
    tl_record_reader_destroy(r);
}

Test(io_tfrecord_file, round_trips_every_compression)
{
    static const tl_record_compression comps[] = {TL_RECORD_NONE, TL_RECORD_GZIP, TL_RECORD_ZLIB};
    char *dir = new_dir();
    for (size_t c = 0; c < 3; c++) {
        for (int atomic = 0; atomic < 2; atomic++) {
            char path[600];
            snprintf(path, sizeof path, "%s/f-%zu-%d", dir, c, atomic);
            write_records(path, comps[c], atomic, 50);
            check_records(path, comps[c], 50);
            check_records(path, TL_RECORD_AUTO, 50);
            tl_record_reader *r;
            ASSERT_OK(tl_record_reader_open(path, TL_RECORD_AUTO, &r));
            cr_assert_eq(tl_record_reader_compression(r), comps[c], "AUTO finds %s",
                         tl_record_compression_name(comps[c]));
            tl_record_reader_destroy(r);
            /* The same bytes from memory. */
            size_t n;
            uint8_t *file = tu_slurp(path, &n);
            ASSERT_OK(tl_record_reader_create_memory(file, n, "mem", TL_RECORD_AUTO, &r));
            cr_assert_eq(tl_record_reader_compression(r), comps[c]);
            cr_assert_eq(read_all(r, NULL), 50u);
            tl_record_reader_destroy(r);
            free(file);
        }
    }
    /* An empty file holds no records, whatever the compression. */
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    FILE *f = fopen(empty, "wb");
    cr_assert_not_null(f);
    fclose(f);
    for (int c = TL_RECORD_NONE; c <= TL_RECORD_AUTO; c++)
        check_records(empty, (tl_record_compression)c, 0);
    rmdir_all(dir);
}

/* The level changes the bytes, never the records. */
Test(io_tfrecord_file, compression_level)
{
    char *dir = new_dir();
    size_t sizes[2];
    for (int k = 0; k < 2; k++) {
        char path[600];
        snprintf(path, sizeof path, "%s/l%d.gz", dir, k);
        tl_record_writer_options o;
        tl_record_writer_options_init(&o);
        cr_assert_eq(o.compression_level, -1);
        o.compression = TL_RECORD_GZIP;
        o.compression_level = k == 0 ? 0 : 9;
        tl_record_writer *w;
        ASSERT_OK(tl_record_writer_open(path, &o, &w));
        static const uint8_t zeros[4096];
        ASSERT_OK(tl_record_writer_write(w, zeros, sizeof zeros));
        ASSERT_OK(tl_record_writer_close(w));
        uint8_t *b = tu_slurp(path, &sizes[k]);
        free(b);
        tl_record_reader *r;
        ASSERT_OK(tl_record_reader_open(path, TL_RECORD_GZIP, &r));
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_record_reader_next(r, &rec, &len));
        cr_assert(len == sizeof zeros && memcmp(rec, zeros, len) == 0);
        tl_record_reader_destroy(r);
    }
    cr_assert_gt(sizes[0], 4096u, "level 0 stores");
    cr_assert_lt(sizes[1], 200u, "level 9 compresses 4 KiB of zeros");
    rmdir_all(dir);
}

/* ---- faults ------------------------------------------------------------------ */

/* Record 1 of singles (byte 40) with a flipped data byte: TL_EPARSE naming
 * the file, the record and its offset; skip_record steps over it. */
Test(io_tfrecord_file, bad_data_crc_is_named_and_skipped)
{
    static const tl_record_compression comps[] = {TL_RECORD_NONE, TL_RECORD_GZIP, TL_RECORD_ZLIB};
    size_t n;
    uint8_t *plain = tu_slurp(SINGLES, &n);
    plain[40 + 12 + 5] ^= 0x20;
    char *dir = new_dir();
    for (size_t c = 0; c < 3; c++) {
        /* The damaged framing, compressed as it is (the compression itself is intact). */
        char path[600];
        snprintf(path, sizeof path, "%s/bad-%zu", dir, c);
        /* The damaged framing as the uncompressed bytes of an intact GZIP or
         * ZLIB stream: a fault of the records, not of the compression. */
        if (comps[c] == TL_RECORD_GZIP) {
            gzFile g = gzopen(path, "wb");
            cr_assert_not_null(g);
            cr_assert_eq(gzwrite(g, plain, (unsigned)n), (int)n);
            cr_assert_eq(gzclose(g), Z_OK);
        } else {
            uint8_t z[512];
            uLongf zn = sizeof z;
            if (comps[c] == TL_RECORD_ZLIB)
                cr_assert_eq(compress2(z, &zn, plain, n, 6), Z_OK);
            else
                memcpy(z, plain, zn = n);
            FILE *f = fopen(path, "wb");
            cr_assert_not_null(f);
            cr_assert_eq(fwrite(z, 1, zn, f), (size_t)zn);
            fclose(f);
        }
        tl_record_reader *r;
        ASSERT_OK(tl_record_reader_open(path, TL_RECORD_AUTO, &r));
        cr_assert_eq(tl_record_reader_compression(r), comps[c]);
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_record_reader_next(r, &rec, &len));
        cr_assert_eq(len, 24u);
        char want[700];
        snprintf(want, sizeof want, "%s: record 1 at byte offset 40: bad data CRC", path);
        ASSERT_ERR(tl_record_reader_next(r, &rec, &len), TL_EPARSE, want);
        cr_assert(rec == NULL && len == 0);
        cr_assert_eq(tl_record_reader_fault(r), TL_RECORD_FAULT_BAD_DATA_CRC);
        cr_assert_eq(tl_record_reader_offset(r), 40u, "the offset stays at the failing record");
        /* Sticky until skipped. */
        ASSERT_ERR(tl_record_reader_next(r, &rec, &len), TL_EPARSE, want);
        ASSERT_OK(tl_record_reader_skip_record(r));
        cr_assert_eq(tl_record_reader_index(r), 2u);
        cr_assert_eq(tl_record_reader_offset(r), 85u);
        ASSERT_OK(tl_record_reader_next(r, &rec, &len));
        cr_assert_not_null(rec, "record 2 reads after the skip");
        ASSERT_OK(tl_record_reader_next(r, &rec, &len));
        cr_assert_null(rec);
        /* Nothing to skip now. */
        ASSERT_ERR(tl_record_reader_skip_record(r), TL_EINVAL, "only a record whose data CRC failed");
        tl_record_reader_destroy(r);
    }
    free(plain);
    rmdir_all(dir);
}

/* A bad length CRC past the first record, and a truncation: faults that
 * cannot be skipped. */
Test(io_tfrecord_file, faults_that_cannot_be_skipped)
{
    size_t n;
    uint8_t *file = tu_slurp(SINGLES, &n);
    file[85 + 1] ^= 0x01;
    tl_record_reader *r;
    ASSERT_OK(tl_record_reader_create_memory(file, n, "m.tfrecord", TL_RECORD_NONE, &r));
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_record_reader_next(r, &rec, &len));
    ASSERT_OK(tl_record_reader_next(r, &rec, &len));
    ASSERT_ERR(tl_record_reader_next(r, &rec, &len), TL_EPARSE,
               "m.tfrecord: record 2 at byte offset 85: bad length CRC");
    cr_assert_eq(tl_record_reader_fault(r), TL_RECORD_FAULT_BAD_LENGTH_CRC);
    ASSERT_ERR(tl_record_reader_skip_record(r), TL_EINVAL, "record 2 at byte offset 85");
    tl_record_reader_destroy(r);
    file[85 + 1] ^= 0x01;
    /* Cut inside record 2's data. */
    ASSERT_OK(tl_record_reader_create_memory(file, 100, NULL, TL_RECORD_NONE, &r));
    ASSERT_OK(tl_record_reader_next(r, &rec, &len));
    ASSERT_OK(tl_record_reader_next(r, &rec, &len));
    ASSERT_ERR(tl_record_reader_next(r, &rec, &len), TL_EPARSE, "<memory>: record 2 at byte offset 85: its length");
    cr_assert_eq(tl_record_reader_fault(r), TL_RECORD_FAULT_TRUNCATED_DATA);
    tl_record_reader_destroy(r);
    free(file);

    /* A truncated GZIP file: the decompressor's fault. */
    uint8_t *gz = tu_slurp(PENGUIN, &n);
    ASSERT_OK(tl_record_reader_create_memory(gz, 1500, "cut.gz", TL_RECORD_AUTO, &r));
    tl_status st;
    while ((st = tl_record_reader_next(r, &rec, &len)) == TL_OK && rec != NULL)
        ;
    cr_assert_eq(st, TL_EPARSE);
    cr_assert_eq(tl_record_reader_fault(r), TL_RECORD_FAULT_READ_ERROR);
    cr_assert(strstr(tl_last_error(), "cut.gz") && strstr(tl_last_error(), "GZIP stream truncated"), "%s",
              tl_last_error());
    cr_assert_gt(tl_record_reader_compressed_offset(r), 0u);
    tl_record_reader_destroy(r);
    free(gz);
}

/* Bytes that are not TFRecord data: said so at byte 0, with what the bytes
 * look like when they are a compressed file read as plain. */
Test(io_tfrecord_file, not_a_tfrecord_file)
{
    static const char text[] = "just some text, long enough for a header";
    tl_record_reader *r;
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_record_reader_create_memory(text, sizeof text - 1, "notes.txt", TL_RECORD_AUTO, &r));
    cr_assert_eq(tl_record_reader_compression(r), TL_RECORD_NONE);
    ASSERT_ERR(tl_record_reader_next(r, &rec, &len), TL_EPARSE,
               "notes.txt: not a TFRecord file: the first record's length CRC does not match at byte 0 (a TFRecord "
               "file starts with a record's 8-byte length and its masked CRC-32C; stored 0x");
    cr_assert_eq(tl_record_reader_fault(r), TL_RECORD_FAULT_BAD_LENGTH_CRC);
    cr_assert_null(strstr(tl_last_error(), "; its first bytes"), "no hint for text: %s", tl_last_error());
    tl_record_reader_destroy(r);

    size_t n;
    uint8_t *gz = tu_slurp(PENGUIN, &n);
    ASSERT_OK(tl_record_reader_create_memory(gz, n, "p.gz", TL_RECORD_NONE, &r));
    ASSERT_ERR(tl_record_reader_next(r, &rec, &len), TL_EPARSE,
               "; its first bytes are GZIP's magic 1f 8b 08: read it with compression GZIP or AUTO");
    tl_record_reader_destroy(r);
    free(gz);
}

/* ---- writing: atomic, finish, destroy ------------------------------------------ */

Test(io_tfrecord_file, atomic_writer_replaces_only_at_close)
{
    char *dir = new_dir();
    char path[600];
    snprintf(path, sizeof path, "%s/out.tfrecord.gz", dir);
    tl_record_writer_options o;
    tl_record_writer_options_init(&o);
    o.compression = TL_RECORD_GZIP;
    o.atomic = true;
    tl_record_writer *w;
    /* A new name appears only at close. */
    ASSERT_OK(tl_record_writer_open(path, &o, &w));
    ASSERT_OK(tl_record_writer_write(w, "r", 1));
    ASSERT_OK(tl_record_writer_flush(w, true));
    cr_assert(!exists(path));
    ASSERT_OK(tl_record_writer_close(w));
    cr_assert(exists(path));

    write_records(path, TL_RECORD_NONE, false, 3); /* the old file */
    ASSERT_OK(tl_record_writer_open(path, &o, &w));
    uint8_t buf[300];
    for (int i = 0; i < 20; i++) {
        size_t len = record_of(i, buf);
        ASSERT_OK(tl_record_writer_write(w, buf, len));
    }
    ASSERT_OK(tl_record_writer_flush(w, true));
    cr_assert_eq(count_files(dir), 2, "the old file and the temporary one");
    check_records(path, TL_RECORD_AUTO, 3); /* the old file, still whole */
    /* Finished: complete and synced, still under its temporary name. */
    ASSERT_OK(tl_record_writer_finish(w));
    ASSERT_OK(tl_record_writer_finish(w));
    ASSERT_ERR(tl_record_writer_write(w, buf, 1), TL_EINVAL, "the writer is finished");
    ASSERT_ERR(tl_record_writer_flush(w, false), TL_EINVAL, "the writer is finished");
    check_records(path, TL_RECORD_AUTO, 3);
    ASSERT_OK(tl_record_writer_close(w));
    check_records(path, TL_RECORD_GZIP, 20);
    cr_assert_eq(count_files(dir), 1, "no temporary file is left");

    /* destroy drops an atomic writer's file: the old one stays. */
    ASSERT_OK(tl_record_writer_open(path, &o, &w));
    ASSERT_OK(tl_record_writer_write(w, "x", 1));
    tl_record_writer_destroy(w);
    check_records(path, TL_RECORD_GZIP, 20);
    cr_assert_eq(count_files(dir), 1);
    tl_record_writer_destroy(NULL);
    ASSERT_OK(tl_record_writer_close(NULL));
    rmdir_all(dir);
}

/* A non-atomic writer truncates at open, as TFRecordWriter does, and
 * destroy completes its file (the GZIP trailer included). */
Test(io_tfrecord_file, plain_writer_truncates_and_destroy_completes)
{
    char *dir = new_dir();
    char path[600];
    snprintf(path, sizeof path, "%s/p.gz", dir);
    write_records(path, TL_RECORD_NONE, false, 30);
    tl_record_writer_options o;
    tl_record_writer_options_init(&o);
    o.compression = TL_RECORD_GZIP;
    tl_record_writer *w;
    ASSERT_OK(tl_record_writer_open(path, &o, &w));
    check_records(path, TL_RECORD_AUTO, 0); /* truncated: empty */
    uint8_t buf[300];
    for (int i = 0; i < 4; i++) {
        size_t len = record_of(i, buf);
        ASSERT_OK(tl_record_writer_write(w, buf, len));
    }
    tl_record_writer_destroy(w);
    check_records(path, TL_RECORD_GZIP, 4);
    /* finish, then bytes still counts, and close after finish succeeds. */
    ASSERT_OK(tl_record_writer_open(path, &o, &w));
    ASSERT_OK(tl_record_writer_write(w, "abc", 3));
    ASSERT_OK(tl_record_writer_finish(w));
    cr_assert_eq(tl_record_writer_bytes(w), 19u);
    ASSERT_OK(tl_record_writer_close(w));
    cr_assert_eq(count_files(dir), 1);
    rmdir_all(dir);
}

/* Every fallible file call of an atomic close (write, fsync, rename, the
 * directory's fsync) failing in turn: close reports it, naming the file, and
 * the old file stands untouched with no temporary file left — except a
 * failing directory fsync, after which the new file is in place. */
Test(io_tfrecord_file, atomic_close_failures_keep_the_old_file)
{
    char *dir = new_dir();
    char path[600];
    snprintf(path, sizeof path, "%s/a.tfrecord", dir);
    write_records(path, TL_RECORD_NONE, false, 3);
    tl_record_writer_options o;
    tl_record_writer_options_init(&o);
    o.atomic = true;
    int failures = 0;
    for (int k = 1; k < 20; k++) {
        tl_record_writer *w;
        ASSERT_OK(tl_record_writer_open(path, &o, &w));
        ASSERT_OK(tl_record_writer_write(w, "new", 3));
        long before = tl_io_call_count();
        tl_io_fail_after(k, EIO);
        tl_status st = tl_record_writer_close(w);
        long calls = tl_io_call_count() - before;
        tl_io_fail_after(0, 0);
        if (st == TL_OK) {
            cr_assert_leq(calls, k, "the injected failure was not reached");
            break;
        }
        failures++;
        cr_assert_eq(st, TL_EIO, "step %d: %s", k, tl_last_error());
        cr_assert(strstr(tl_last_error(), path) != NULL, "step %d: %s", k, tl_last_error());
        cr_assert_eq(count_files(dir), 1, "step %d: no temporary file left (%s)", k, tl_last_error());
        if (strstr(tl_last_error(), "may not survive a power loss") != NULL) {
            /* The rename happened: the new file, whole. */
            tl_record_reader *r;
            ASSERT_OK(tl_record_reader_open(path, TL_RECORD_NONE, &r));
            const uint8_t *rec;
            size_t len;
            ASSERT_OK(tl_record_reader_next(r, &rec, &len));
            cr_assert(rec != NULL && len == 3 && memcmp(rec, "new", 3) == 0, "step %d", k);
            tl_record_reader_destroy(r);
        } else {
            check_records(path, TL_RECORD_NONE, 3);
        }
        write_records(path, TL_RECORD_NONE, false, 3);
    }
    cr_assert_geq(failures, 3, "fsync, rename and the directory's fsync are fallible (%d)", failures);
    rmdir_all(dir);
}

/* ---- arguments -------------------------------------------------------------------- */

Test(io_tfrecord_file, bad_arguments)
{
    tl_record_writer *w = (tl_record_writer *)1;
    tl_record_writer_options o;
    tl_record_writer_options_init(&o);
    o.compression = TL_RECORD_AUTO;
    ASSERT_ERR(tl_record_writer_open("/tmp/x", &o, &w), TL_EINVAL,
               "/tmp/x: writer compression must be NONE, GZIP or ZLIB (got AUTO, which only readers take)");
    cr_assert_null(w);
    o.compression = (tl_record_compression)7;
    ASSERT_ERR(tl_record_writer_open("/tmp/x", &o, &w), TL_EINVAL, "(got ?)");
    tl_record_writer_options_init(&o);
    o.compression_level = 10;
    ASSERT_ERR(tl_record_writer_open("/tmp/x", &o, &w), TL_EINVAL,
               "compression_level must be -1 (zlib's default) or 0..9 (got 10)");
    ASSERT_ERR(tl_record_writer_open(NULL, NULL, &w), TL_EINVAL, "path is NULL");
    ASSERT_ERR(tl_record_writer_open("/tmp/x", NULL, NULL), TL_EINVAL, "out is NULL");
    ASSERT_ERR(tl_record_writer_open("/nonexistent-dir/x.tfrecord", NULL, &w), TL_EIO, "/nonexistent-dir/x.tfrecord");
    o.atomic = true;
    o.compression_level = -1;
    ASSERT_ERR(tl_record_writer_open("/nonexistent-dir/x.tfrecord", &o, &w), TL_EIO, "/nonexistent-dir/x.tfrecord");

    tl_record_reader *r = (tl_record_reader *)1;
    ASSERT_ERR(tl_record_reader_open("/nonexistent-dir/x", TL_RECORD_AUTO, &r), TL_EIO,
               "/nonexistent-dir/x: cannot open for reading");
    cr_assert_null(r);
    ASSERT_ERR(tl_record_reader_open("/tmp", (tl_record_compression)4, &r), TL_EINVAL, "compression 4 is not");
    ASSERT_ERR(tl_record_reader_open(NULL, TL_RECORD_AUTO, &r), TL_EINVAL, "path is NULL");
    ASSERT_ERR(tl_record_reader_create_memory(NULL, 5, "m", TL_RECORD_NONE, &r), TL_EINVAL, "m: NULL data of 5 bytes");
    ASSERT_ERR(tl_record_reader_create_memory("", 0, "m", (tl_record_compression)-1, &r), TL_EINVAL, "compression -1");
    ASSERT_ERR(tl_record_reader_create_memory("", 0, "m", TL_RECORD_NONE, NULL), TL_EINVAL, "out is NULL");
    tl_record_reader_destroy(NULL);

    tl_record_compression c = TL_RECORD_AUTO;
    static const struct {
        const char *s;
        tl_record_compression c;
    } names[] = {{"", TL_RECORD_NONE}, {"NONE", TL_RECORD_NONE}, {"GZIP", TL_RECORD_GZIP},
                 {"ZLIB", TL_RECORD_ZLIB}, {"AUTO", TL_RECORD_AUTO}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        ASSERT_OK(tl_record_compression_parse(names[i].s, &c));
        cr_assert_eq(c, names[i].c, "%s", names[i].s);
    }
    ASSERT_ERR(tl_record_compression_parse("gzip", &c), TL_EINVAL,
               "compression_type \"gzip\" is not one of \"\", \"NONE\", \"GZIP\", \"ZLIB\", \"AUTO\"");
    ASSERT_ERR(tl_record_compression_parse(NULL, &c), TL_EINVAL, "(null)");
    ASSERT_ERR(tl_record_compression_parse("GZIP", NULL), TL_EINVAL, "out is NULL");
    cr_assert_str_eq(tl_record_compression_name(TL_RECORD_NONE), "NONE");
    cr_assert_str_eq(tl_record_compression_name(TL_RECORD_GZIP), "GZIP");
    cr_assert_str_eq(tl_record_compression_name(TL_RECORD_ZLIB), "ZLIB");
    cr_assert_str_eq(tl_record_compression_name(TL_RECORD_AUTO), "AUTO");
    cr_assert_str_eq(tl_record_compression_name((tl_record_compression)9), "?");
}

/* ---- allocation failures ---------------------------------------------------------- */

typedef struct oom_ctx {
    char path[600];
    tl_record_compression c;
} oom_ctx;

static tl_status oom_write(void *ud)
{
    oom_ctx *x = ud;
    tl_record_writer_options o;
    tl_record_writer_options_init(&o);
    o.compression = x->c;
    o.atomic = true;
    tl_record_writer *w;
    tl_status st = tl_record_writer_open(x->path, &o, &w);
    if (st != TL_OK)
        return st;
    uint8_t buf[300];
    for (int i = 0; i < 5 && st == TL_OK; i++) {
        size_t len = record_of(i, buf);
        st = tl_record_writer_write(w, buf, len);
    }
    if (st != TL_OK) {
        tl_record_writer_destroy(w);
        return st;
    }
    return tl_record_writer_close(w);
}

static tl_status oom_read(void *ud)
{
    oom_ctx *x = ud;
    tl_record_reader *r;
    tl_status st = tl_record_reader_open(x->path, TL_RECORD_AUTO, &r);
    if (st != TL_OK)
        return st;
    const uint8_t *rec;
    size_t len;
    int n = 0;
    while ((st = tl_record_reader_next(r, &rec, &len)) == TL_OK && rec != NULL)
        n++;
    tl_record_reader_destroy(r);
    cr_assert(st != TL_OK || n == 5, "%d records", n);
    return st;
}

Test(io_tfrecord_file, allocation_failures_unwind)
{
    static const tl_record_compression comps[] = {TL_RECORD_NONE, TL_RECORD_GZIP, TL_RECORD_ZLIB};
    char *dir = new_dir();
    for (size_t c = 0; c < 3; c++) {
        oom_ctx x = {.c = comps[c]};
        snprintf(x.path, sizeof x.path, "%s/o-%zu", dir, c);
        cr_assert_geq(tu_oom_sweep(oom_write, &x, "atomic write"), 1);
        cr_assert_eq(count_files(dir), (int)c + 1, "failed runs leave no temporary file");
        cr_assert_geq(tu_oom_sweep(oom_read, &x, "read"), 1);
    }
    rmdir_all(dir);
}

/* Dataset positions and corrupt records: a pipeline saved after k elements,
 * for every k, and restored into a fresh one yields exactly the rest of the
 * sequence (mid shuffle buffer, mid file, across epochs, with prefetch and
 * parallel parsing); a state from another pipeline is refused by name; and
 * skip_corrupt_records skips a bad record or the rest of a file, counted,
 * where without it the error names the file and the offset. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/base_int.h"
#include "io/tfrecord.h"
#include "test_data_dataset_util.h"
#include "testutil.h"

typedef tl_dataset *(*builder)(const char *dir, uint64_t seed);

static void fixture(const char *dir)
{
    char *a = dd_join(dir, "part-0"), *b = dd_join(dir, "part-1"), *c = dd_join(dir, "part-2.gz");
    dd_write_examples(a, 0, 0, 20);
    dd_write_examples(b, 0, 100, 17);
    dd_write_examples(c, 1, 200, 11);
    free(a), free(b), free(c);
}

static tl_dataset *files_ds(const char *dir, const char *pattern, int64_t cycle, int64_t block, int c)
{
    char *p = dd_join(dir, pattern);
    const char *pats[] = {p};
    tl_tfrecord_options o;
    tl_tfrecord_options_init(&o);
    o.cycle_length = cycle;
    o.block_length = block;
    o.compression = (tl_record_compression)c;
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_tfrecord(pats, 1, &o, &ds));
    free(p);
    return ds;
}

/* Mid-file and mid-buffer positions, two epochs, batches of 3. */
static tl_dataset *pipe_a(const char *dir, uint64_t seed)
{
    tl_dataset *ds = files_ds(dir, "part-[01]", 2, 3, TL_RECORD_NONE);
    ASSERT_OK(tl_dataset_shuffle(ds, 7, seed, true, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, 2, &ds));
    ASSERT_OK(tl_dataset_parse_example(ds, dd_specs, 4, NULL, &ds));
    ASSERT_OK(tl_dataset_batch(ds, 3, false, &ds));
    return ds;
}

/* Compressed files read by re-reading, shard, take/skip, prefetch. */
static tl_dataset *pipe_b(const char *dir, uint64_t seed)
{
    tl_dataset *ds = files_ds(dir, "part-*", 3, 2, TL_RECORD_AUTO);
    ASSERT_OK(tl_dataset_shard(ds, 2, 1, &ds));
    ASSERT_OK(tl_dataset_shuffle(ds, 5, seed, true, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, 3, &ds));
    ASSERT_OK(tl_dataset_skip(ds, 3, &ds));
    ASSERT_OK(tl_dataset_take(ds, 50, &ds));
    ASSERT_OK(tl_dataset_parse_example(ds, dd_specs, 2, NULL, &ds));
    ASSERT_OK(tl_dataset_prefetch(ds, 4, &ds));
    return ds;
}

/* Parallel parsing and prefetch, a shuffled file list. */
static tl_dataset *pipe_c(const char *dir, uint64_t seed)
{
    char *p = dd_join(dir, "part-[01]");
    const char *pats[] = {p};
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_from_files(pats, 1, &ds));
    free(p);
    ASSERT_OK(tl_dataset_shuffle(ds, 2, seed, true, &ds));
    ASSERT_OK(tl_dataset_tfrecord_interleave(ds, NULL, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, 2, &ds));
    tl_parse_options po = {.num_parallel_calls = 3};
    ASSERT_OK(tl_dataset_parse_example(ds, dd_specs, 4, &po, &ds));
    ASSERT_OK(tl_dataset_batch(ds, 4, true, &ds));
    ASSERT_OK(tl_dataset_prefetch(ds, 2, &ds));
    return ds;
}

static void restore_everywhere(builder build, int step)
{
    char *dir = dd_tmpdir();
    fixture(dir);
    tl_dataset *ds = build(dir, 42);
    int64_t *ref;
    size_t total = dd_drain(ds, &ref, -1);
    tl_dataset_destroy(ds);
    cr_assert_gt(total, 20u);
    /* the elements: count them again, one next per element */
    ds = build(dir, 42);
    const tl_element *e;
    int elements = 0;
    for (;;) {
        ASSERT_OK(tl_dataset_next(ds, &e));
        if (e == NULL)
            break;
        elements++;
    }
    tl_dataset_destroy(ds);
    for (int k = 0; k <= elements + 1; k += step) {
        ds = build(dir, 42);
        int64_t *head, *tail;
        size_t nh = dd_drain(ds, &head, k);
        char *state;
        ASSERT_OK(tl_dataset_save(ds, &state));
        /* the saved pipeline goes on as if nothing happened */
        size_t nt0 = dd_drain(ds, &tail, -1);
        cr_assert_eq(nh + nt0, total, "k=%d: saving changed the sequence", k);
        free(tail);
        tl_dataset_destroy(ds);
        ds = build(dir, 42);
        ASSERT_OK(tl_dataset_restore(ds, state));
        size_t nt = dd_drain(ds, &tail, -1);
        cr_assert_eq(nh + nt, total, "k=%d: %zu + %zu elements, want %zu", k, nh, nt, total);
        for (size_t i = 0; i < nh; i++)
            cr_assert_eq(head[i], ref[i]);
        for (size_t i = 0; i < nt; i++)
            cr_assert_eq(tail[i], ref[nh + i], "k=%d: id %zu after the restore is %lld, want %lld", k, i,
                         (long long)tail[i], (long long)ref[nh + i]);
        free(head);
        free(tail);
        tl_free(state);
        tl_dataset_destroy(ds);
    }
    free(ref);
    dd_rmtree(dir);
    free(dir);
}

Test(data_dataset_state, restore_everywhere_shuffle_repeat_batch)
{
    restore_everywhere(pipe_a, 1);
}

Test(data_dataset_state, restore_everywhere_gzip_shard_prefetch)
{
    restore_everywhere(pipe_b, 1);
}

Test(data_dataset_state, restore_everywhere_parallel_parse)
{
    restore_everywhere(pipe_c, 1);
}

Test(data_dataset_state, restore_refuses_another_pipeline)
{
    char *dir = dd_tmpdir();
    fixture(dir);
    tl_dataset *ds = pipe_a(dir, 1);
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    char *state;
    ASSERT_OK(tl_dataset_save(ds, &state));
    ASSERT_ERR(tl_dataset_restore(ds, state), TL_EINVAL, "already been read from");
    tl_dataset_destroy(ds);

    ds = pipe_a(dir, 2);
    ASSERT_ERR(tl_dataset_restore(ds, state), TL_EINVAL, "seed=2");
    cr_assert(strstr(tl_last_error(), "seed=1") != NULL, "%s", tl_last_error());
    tl_dataset_destroy(ds);

    ds = pipe_b(dir, 1);
    ASSERT_ERR(tl_dataset_restore(ds, state), TL_EINVAL, "nodes");
    tl_dataset_destroy(ds);

    ds = pipe_a(dir, 1);
    ASSERT_ERR(tl_dataset_restore(ds, "{\"format\": 3}"), TL_EINVAL, "not a saved dataset state");
    ASSERT_ERR(tl_dataset_restore(ds, "[1,"), TL_EINVAL, "not a saved dataset state");
    tl_dataset_destroy(ds);

    /* another file list under the same shape */
    char *extra = dd_join(dir, "part-1a");
    dd_write_examples(extra, 0, 0, 1);
    tl_dataset *d2 = files_ds(dir, "part-1*", 2, 3, TL_RECORD_NONE);
    tl_dataset *d1 = files_ds(dir, "part-1", 2, 3, TL_RECORD_NONE);
    char *s1;
    ASSERT_OK(tl_dataset_save(d1, &s1));
    ASSERT_ERR(tl_dataset_restore(d2, s1), TL_EINVAL, "file");
    tl_free(s1);
    tl_dataset_destroy(d1);
    tl_dataset_destroy(d2);
    free(extra);
    tl_free(state);
    dd_rmtree(dir);
    free(dir);
}

/* ---- corrupt records -------------------------------------------------------------- */

/* The byte offset of record i of a plain TFRecord file. */
static uint64_t record_offset(const char *path, int i)
{
    tl_tfrecord_reader *r;
    ASSERT_OK(tl_tfrecord_reader_open(path, &r));
    const uint8_t *d;
    size_t n;
    for (int k = 0; k < i; k++)
        ASSERT_OK(tl_tfrecord_next(r, &d, &n));
    uint64_t off = tl_tfrecord_reader_offset(r);
    tl_tfrecord_reader_destroy(r);
    return off;
}

static void flip(const char *path, uint64_t at)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fseek(f, (long)at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, (long)at, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static tl_dataset *corrupt_pipe(const char *dir, bool skip, bool parse_skip)
{
    char *p = dd_join(dir, "c-*");
    const char *pats[] = {p};
    tl_tfrecord_options o;
    tl_tfrecord_options_init(&o);
    o.skip_corrupt_records = skip;
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_tfrecord(pats, 1, &o, &ds));
    tl_parse_options po = {.skip_corrupt_records = parse_skip};
    ASSERT_OK(tl_dataset_parse_example(ds, dd_specs, 1, &po, &ds));
    free(p);
    return ds;
}

static char last_log[512];

static void quiet(tl_log_level level, const char *msg, void *ud)
{
    (void)level;
    snprintf(last_log, sizeof last_log, "%s", msg);
    (*(int *)ud)++;
}

Test(data_dataset_state, skip_corrupt_data_crc)
{
    char *dir = dd_tmpdir(), *a = dd_join(dir, "c-0"), *b = dd_join(dir, "c-1");
    dd_write_examples(a, 0, 0, 5);
    dd_write_examples(b, 0, 10, 2);
    uint64_t off = record_offset(a, 2);
    flip(a, off + TL_TFRECORD_HEADER_SIZE + 3);
    int logged = 0;
    tl_set_log_handler(quiet, &logged);
    tl_dataset *ds = corrupt_pipe(dir, true, false);
    int64_t *ids;
    cr_assert_eq(dd_drain(ds, &ids, -1), 6u);
    const int64_t want[] = {0, 1, 3, 4, 10, 11};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(ids[i], want[i]);
    cr_assert_eq(tl_dataset_corrupt_skipped(ds), 1);
    cr_assert_eq(logged, 1, "one warning per skipped record");
    free(ids);
    tl_dataset_destroy(ds);

    /* a position after the skip restores past it */
    ds = corrupt_pipe(dir, true, false);
    cr_assert_eq(dd_drain(ds, &ids, 3), 3u);
    free(ids);
    char *state;
    ASSERT_OK(tl_dataset_save(ds, &state));
    tl_dataset_destroy(ds);
    ds = corrupt_pipe(dir, true, false);
    ASSERT_OK(tl_dataset_restore(ds, state));
    cr_assert_eq(tl_dataset_corrupt_skipped(ds), 1, "the count is part of the state");
    cr_assert_eq(dd_drain(ds, &ids, -1), 3u);
    cr_assert_eq(ids[0], 4);
    free(ids);
    tl_free(state);
    tl_dataset_destroy(ds);
    tl_set_log_handler(NULL, NULL);

    ds = corrupt_pipe(dir, false, false);
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    ASSERT_OK(tl_dataset_next(ds, &e));
    tl_status st = tl_dataset_next(ds, &e);
    cr_assert_eq(st, TL_EPARSE);
    char want_where[512];
    snprintf(want_where, sizeof want_where, "%s: record 2 at byte offset %llu: bad data CRC", a,
             (unsigned long long)off);
    cr_assert(strstr(tl_last_error(), want_where) != NULL, "%s", tl_last_error());
    tl_dataset_destroy(ds);
    free(a), free(b);
    dd_rmtree(dir);
    free(dir);
}

/* gzip's the file at src into dst. */
static void gzip_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    cr_assert_not_null(in);
    gzFile out = gzopen(dst, "wb");
    cr_assert_not_null(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        cr_assert_eq(gzwrite(out, buf, (unsigned)n), (int)n);
    fclose(in);
    cr_assert_eq(gzclose(out), Z_OK);
}

Test(data_dataset_state, skip_corrupt_data_crc_inside_gzip)
{
    /* The same bad record, inside a GZIP stream: the length CRC vouches for
     * the framing, so only that record is skipped, as in a plain file. */
    char *dir = dd_tmpdir(), *plain = dd_join(dir, "plain"), *a = dd_join(dir, "g-0"), *b = dd_join(dir, "g-1");
    dd_write_examples(plain, 0, 0, 5);
    dd_write_examples(b, 1, 10, 2);
    flip(plain, record_offset(plain, 2) + TL_TFRECORD_HEADER_SIZE + 3);
    gzip_file(plain, a);
    char *p = dd_join(dir, "g-*");
    const char *pats[] = {p};
    tl_tfrecord_options o;
    tl_tfrecord_options_init(&o);
    o.compression = TL_RECORD_AUTO;
    o.skip_corrupt_records = true;
    int logged = 0;
    tl_set_log_handler(quiet, &logged);
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_tfrecord(pats, 1, &o, &ds));
    ASSERT_OK(tl_dataset_parse_example(ds, dd_specs, 1, NULL, &ds));
    int64_t *ids;
    cr_assert_eq(dd_drain(ds, &ids, -1), 6u);
    const int64_t want[] = {0, 1, 3, 4, 10, 11};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(ids[i], want[i]);
    cr_assert_eq(tl_dataset_corrupt_skipped(ds), 1);
    cr_assert_eq(logged, 1);
    free(ids);
    tl_dataset_destroy(ds);
    /* A second pipeline reads past the skip (logged: 2) and saves; restoring
     * re-reads the stream up to the saved record, and that replay neither
     * logs nor counts the skip again. */
    ASSERT_OK(tl_dataset_tfrecord(pats, 1, &o, &ds));
    ASSERT_OK(tl_dataset_parse_example(ds, dd_specs, 1, NULL, &ds));
    cr_assert_eq(dd_drain(ds, &ids, 3), 3u);
    free(ids);
    char *state;
    ASSERT_OK(tl_dataset_save(ds, &state));
    tl_dataset_destroy(ds);
    ASSERT_OK(tl_dataset_tfrecord(pats, 1, &o, &ds));
    ASSERT_OK(tl_dataset_parse_example(ds, dd_specs, 1, NULL, &ds));
    ASSERT_OK(tl_dataset_restore(ds, state));
    cr_assert_eq(dd_drain(ds, &ids, -1), 3u);
    cr_assert_eq(ids[0], 4);
    cr_assert_eq(tl_dataset_corrupt_skipped(ds), 1);
    cr_assert_eq(logged, 2, "the second pipeline's own skip only: %s", last_log);
    free(ids);
    tl_free(state);
    tl_dataset_destroy(ds);
    tl_set_log_handler(NULL, NULL);
    free(p), free(plain), free(a), free(b);
    dd_rmtree(dir);
    free(dir);
}

Test(data_dataset_state, skip_corrupt_length_ends_file)
{
    char *dir = dd_tmpdir(), *a = dd_join(dir, "c-0"), *b = dd_join(dir, "c-1");
    dd_write_examples(a, 0, 0, 5);
    dd_write_examples(b, 0, 10, 2);
    uint64_t off = record_offset(a, 2);
    flip(a, off + 1);
    int logged = 0;
    tl_set_log_handler(quiet, &logged);
    tl_dataset *ds = corrupt_pipe(dir, true, false);
    int64_t *ids;
    cr_assert_eq(dd_drain(ds, &ids, -1), 4u);
    const int64_t want[] = {0, 1, 10, 11};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ids[i], want[i], "the rest of the file is skipped, the next file read");
    cr_assert_eq(tl_dataset_corrupt_skipped(ds), 1);
    cr_assert_eq(logged, 1);
    free(ids);
    tl_dataset_destroy(ds);
    tl_set_log_handler(NULL, NULL);

    ds = corrupt_pipe(dir, false, false);
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    ASSERT_OK(tl_dataset_next(ds, &e));
    ASSERT_ERR(tl_dataset_next(ds, &e), TL_EPARSE, "bad length CRC");
    char want_where[512];
    snprintf(want_where, sizeof want_where, "%s: record 2 at byte offset %llu", a, (unsigned long long)off);
    cr_assert(strstr(tl_last_error(), want_where) != NULL, "%s", tl_last_error());
    tl_dataset_destroy(ds);
    free(a), free(b);
    dd_rmtree(dir);
    free(dir);
}

Test(data_dataset_state, skip_records_that_do_not_parse)
{
    char *dir = dd_tmpdir(), *a = dd_join(dir, "c-0");
    tl_tfrecord_writer *w;
    ASSERT_OK(tl_tfrecord_writer_open(a, O_CREAT | O_TRUNC, &w));
    for (int i = 0; i < 4; i++) {
        size_t n;
        uint8_t *rec = dd_example(i, &n);
        ASSERT_OK(tl_tfrecord_write(w, i == 1 ? (const void *)"\xff\xff\xff" : rec, i == 1 ? 3 : n));
        free(rec);
    }
    ASSERT_OK(tl_tfrecord_writer_destroy(w));
    int logged = 0;
    tl_set_log_handler(quiet, &logged);
    tl_dataset *ds = corrupt_pipe(dir, false, true);
    int64_t *ids;
    cr_assert_eq(dd_drain(ds, &ids, -1), 3u);
    cr_assert_eq(ids[1], 2);
    cr_assert_eq(tl_dataset_corrupt_skipped(ds), 1);
    cr_assert_eq(logged, 1);
    free(ids);
    tl_dataset_destroy(ds);
    tl_set_log_handler(NULL, NULL);

    ds = corrupt_pipe(dir, false, false);
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    ASSERT_ERR(tl_dataset_next(ds, &e), TL_EPARSE, "record 1");
    cr_assert(strstr(tl_last_error(), a) != NULL, "%s", tl_last_error());
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_eq(*(int64_t *)e->tensors[0].data, 2, "reading goes on after a parse error");
    tl_dataset_destroy(ds);
    free(a);
    dd_rmtree(dir);
    free(dir);
}

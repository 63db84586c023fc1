/* The dataset's threads: prefetch and parallel parsing yield the sequence of
 * the plain pipeline for every depth and thread count; a save taken while
 * they run restores exactly; destroying a pipeline whose producer is
 * blocked on a full buffer returns. Written for the TSan stand-in too. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/tfrecord.h"
#include "tpuloop/config.h"
#include "tpuloop/dataset.h"
#include "tpuloop/example.pb-c.h"

#define N_RECORDS 300

static void write_fixture(const char *path)
{
    tl_tfrecord_writer *w;
    cr_assert_eq(tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w), TL_OK);
    for (int64_t id = 0; id < N_RECORDS; id++) {
        int64_t v[1] = {id};
        float x[3] = {(float)id, 0.5f, -1};
        Tpuloop__Int64List li = TPULOOP__INT64_LIST__INIT;
        Tpuloop__FloatList lx = TPULOOP__FLOAT_LIST__INIT;
        li.n_value = 1;
        li.value = v;
        lx.n_value = (size_t)(id % 4);
        lx.value = x;
        Tpuloop__Feature f[2] = {TPULOOP__FEATURE__INIT, TPULOOP__FEATURE__INIT};
        f[0].kind_case = TPULOOP__FEATURE__KIND_INT64_LIST;
        f[0].int64_list = &li;
        f[1].kind_case = TPULOOP__FEATURE__KIND_FLOAT_LIST;
        f[1].float_list = &lx;
        Tpuloop__Features__FeatureEntry e0 = TPULOOP__FEATURES__FEATURE_ENTRY__INIT,
                                        e1 = TPULOOP__FEATURES__FEATURE_ENTRY__INIT;
        e0.key = (char *)"id";
        e0.value = &f[0];
        e1.key = (char *)"v";
        e1.value = &f[1];
        Tpuloop__Features__FeatureEntry *ents[2] = {&e0, &e1};
        Tpuloop__Features fs = TPULOOP__FEATURES__INIT;
        fs.n_feature = 2;
        fs.feature = ents;
        Tpuloop__Example ex = TPULOOP__EXAMPLE__INIT;
        ex.features = &fs;
        uint8_t buf[256];
        size_t n = tpuloop__example__pack(&ex, buf);
        cr_assert_eq(tl_tfrecord_write(w, buf, n), TL_OK);
    }
    cr_assert_eq(tl_tfrecord_writer_destroy(w), TL_OK);
}

static const tl_feature_spec specs[2] = {
    {.key = "id", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_INT64},
    {.key = "v", .type = TL_SPEC_VAR_LEN, .dtype = TL_FEATURE_FLOAT},
};

/* shuffle -> repeat(repeat) -> parse(threads) -> batch(5) -> [prefetch(depth)] */
static tl_dataset *build(const char *path, int threads, int depth, int64_t repeat)
{
    const char *files[] = {path};
    tl_dataset *ds;
    cr_assert_eq(tl_dataset_tfrecord(files, 1, NULL, &ds), TL_OK);
    cr_assert_eq(tl_dataset_shuffle(ds, 16, 9, true, &ds), TL_OK);
    cr_assert_eq(tl_dataset_repeat(ds, repeat, &ds), TL_OK);
    tl_parse_options po = {.num_parallel_calls = threads};
    cr_assert_eq(tl_dataset_parse_example(ds, specs, 2, &po, &ds), TL_OK);
    cr_assert_eq(tl_dataset_batch(ds, 5, false, &ds), TL_OK);
    if (depth > 0)
        cr_assert_eq(tl_dataset_prefetch(ds, depth, &ds), TL_OK);
    return ds;
}

/* The ids and the ragged row lengths of up to limit batches, folded into one
 * checksum-like list: ids[i] * 8 + row length. */
static int drain(tl_dataset *ds, int64_t *out, int cap, int limit)
{
    int n = 0;
    const tl_element *e;
    for (int b = 0; limit < 0 || b < limit; b++) {
        cr_assert_eq(tl_dataset_next(ds, &e), TL_OK, "%s", tl_last_error());
        if (e == NULL)
            break;
        const tl_tensor *id = tl_element_find(e, "id"), *v = tl_element_find(e, "v");
        cr_assert_not_null(id);
        cr_assert_not_null(v);
        cr_assert_eq(v->num_rows, id->shape[0]);
        for (int64_t i = 0; i < id->shape[0]; i++) {
            cr_assert_lt(n, cap);
            out[n++] = ((int64_t *)id->data)[i] * 8 + v->row_lengths[i];
        }
    }
    return n;
}

static char *tmp_file(void)
{
    char *path = strdup("/tmp/tl_mt_dataset_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    write_fixture(path);
    return path;
}

#define CAP (N_RECORDS * 3)

Test(mt_dataset, threads_yield_the_plain_sequence)
{
    char *path = tmp_file();
    static int64_t ref[CAP], got[CAP];
    tl_dataset *ds = build(path, 1, 0, 2);
    int n = drain(ds, ref, CAP, -1);
    tl_dataset_destroy(ds);
    cr_assert_eq(n, 2 * N_RECORDS);
    for (int threads = 1; threads <= 4; threads++)
        for (int depth = 0; depth <= 4; depth++) {
            ds = build(path, threads, depth, 2);
            int m = drain(ds, got, CAP, -1);
            tl_dataset_destroy(ds);
            cr_assert_eq(m, n, "threads %d depth %d", threads, depth);
            for (int i = 0; i < n; i++)
                cr_assert_eq(got[i], ref[i], "threads %d depth %d: element %d", threads, depth, i);
        }
    unlink(path);
    free(path);
}

Test(mt_dataset, save_while_threads_run)
{
    char *path = tmp_file();
    static int64_t ref[CAP], head[CAP], tail[CAP];
    tl_dataset *ds = build(path, 1, 0, 2);
    int n = drain(ds, ref, CAP, -1);
    tl_dataset_destroy(ds);
    for (int k = 0; k < 120; k += 7) {
        ds = build(path, 3, 3, 2);
        int h = drain(ds, head, CAP, k);
        char *state;
        cr_assert_eq(tl_dataset_save(ds, &state), TL_OK, "%s", tl_last_error());
        int t0 = drain(ds, tail, CAP, -1);
        cr_assert_eq(h + t0, n, "k=%d: the saved pipeline goes on unchanged", k);
        tl_dataset_destroy(ds);
        ds = build(path, 2, 1, 2); /* other thread counts and depth: the same state */
        cr_assert_eq(tl_dataset_restore(ds, state), TL_OK, "%s", tl_last_error());
        int t = drain(ds, tail, CAP, -1);
        cr_assert_eq(h + t, n, "k=%d", k);
        for (int i = 0; i < t; i++)
            cr_assert_eq(tail[i], ref[h + i], "k=%d: element %d after the restore", k, i);
        tl_free_string(state);
        tl_dataset_destroy(ds);
    }
    unlink(path);
    free(path);
}

Test(mt_dataset, destroy_with_blocked_producer)
{
    char *path = tmp_file();
    static int64_t got[CAP];
    for (int threads = 1; threads <= 4; threads += 3) {
        tl_dataset *ds = build(path, threads, 2, -1);
        cr_assert_eq(drain(ds, got, CAP, 1), 5);
        /* give the threads time to fill every buffer and block */
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        tl_dataset_destroy(ds); /* must return */
    }
    /* never started */
    tl_dataset *ds = build(path, 4, 2, -1);
    tl_dataset_destroy(ds);
    unlink(path);
    free(path);
}

/* A file of the fixture's records with record `bad` replaced by bytes that
 * are no tf.Example, then cut `cut` bytes short (0: whole). */
static char *tmp_file_with_bad(int bad, off_t cut)
{
    char *path = tmp_file();
    char *out = strdup("/tmp/tl_mt_dataset_bad_XXXXXX");
    int fd = mkstemp(out);
    cr_assert_geq(fd, 0);
    close(fd);
    const char *files[] = {path};
    tl_dataset *ds;
    cr_assert_eq(tl_dataset_tfrecord(files, 1, NULL, &ds), TL_OK);
    tl_tfrecord_writer *w;
    cr_assert_eq(tl_tfrecord_writer_open(out, O_CREAT | O_TRUNC, &w), TL_OK);
    const tl_element *e;
    for (int i = 0; tl_dataset_next(ds, &e) == TL_OK && e != NULL; i++) {
        const tl_bytes *b = tl_element_find(e, "record")->data;
        if (i == bad)
            cr_assert_eq(tl_tfrecord_write(w, "\xff\xff\xff", 3), TL_OK);
        else
            cr_assert_eq(tl_tfrecord_write(w, b->data, b->len), TL_OK);
    }
    cr_assert_eq(tl_tfrecord_writer_destroy(w), TL_OK);
    tl_dataset_destroy(ds);
    unlink(path);
    free(path);
    if (cut > 0) {
        FILE *f = fopen(out, "r+");
        cr_assert_not_null(f);
        cr_assert_eq(fseeko(f, 0, SEEK_END), 0);
        cr_assert_eq(ftruncate(fileno(f), ftello(f) - cut), 0);
        fclose(f);
    }
    return out;
}

/* The ids before the first error, and the error's message (or "" at the end). */
static int drain_records(const char *path, int threads, bool skip, int64_t *ids, char *msg, size_t cap)
{
    const char *files[] = {path};
    tl_dataset *ds;
    cr_assert_eq(tl_dataset_tfrecord(files, 1, NULL, &ds), TL_OK);
    tl_parse_options po = {.num_parallel_calls = threads, .skip_corrupt_records = skip};
    cr_assert_eq(tl_dataset_parse_example(ds, specs, 2, &po, &ds), TL_OK);
    int n = 0;
    const tl_element *e;
    msg[0] = '\0';
    for (;;) {
        if (tl_dataset_next(ds, &e) != TL_OK) {
            snprintf(msg, cap, "%s", tl_last_error());
            break;
        }
        if (e == NULL)
            break;
        cr_assert_lt(n, N_RECORDS);
        ids[n++] = ((const int64_t *)tl_element_find(e, "id")->data)[0];
    }
    tl_dataset_destroy(ds);
    return n;
}

/* Failures inside a worker's run of records come out at their place in the
 * sequence, with the serial form's message, for every thread count. */
Test(mt_dataset, failures_inside_a_run_keep_their_place)
{
    static int64_t ref[N_RECORDS], got[N_RECORDS];
    char ref_msg[700], got_msg[700];
    tl_set_log_level(TL_LOG_ERROR); /* the skips are logged as warnings */
    const struct {
        int bad;
        off_t cut;
        bool skip, fails;
        int want; /* elements before the error or the end */
    } cases[] = {
        {37, 0, false, true, 37},            /* a record that does not parse, mid-run */
        {37, 0, true, false, N_RECORDS - 1}, /* the same, skipped */
        {-1, 5, false, true, N_RECORDS - 1}, /* a truncated last record: a read error */
        {0, 5, true, true, N_RECORDS - 2},   /* skip the first; the truncation still fails */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *path = tmp_file_with_bad(cases[c].bad, cases[c].cut);
        int n = drain_records(path, 1, cases[c].skip, ref, ref_msg, sizeof ref_msg);
        cr_assert_eq(n, cases[c].want, "case %zu: %d elements (%s)", c, n, ref_msg);
        cr_assert_eq(ref_msg[0] != '\0', cases[c].fails, "case %zu: %s", c, ref_msg);
        if (cases[c].fails)
            cr_assert(strstr(ref_msg, path) != NULL && strstr(ref_msg, "offset") != NULL, "case %zu: %s", c, ref_msg);
        for (int threads = 2; threads <= 4; threads++) {
            int m = drain_records(path, threads, cases[c].skip, got, got_msg, sizeof got_msg);
            cr_assert_eq(m, n, "case %zu threads %d", c, threads);
            for (int i = 0; i < n; i++)
                cr_assert_eq(got[i], ref[i], "case %zu threads %d: element %d", c, threads, i);
            cr_assert_str_eq(got_msg, ref_msg, "case %zu threads %d", c, threads);
        }
        unlink(path);
        free(path);
    }
}

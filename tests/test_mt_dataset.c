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

/* The dataset pipeline: sources (TFRecord with interleave, glob, GZIP and
 * ZLIB, IDX, CSV, Criteo, labeled data) and the transforms (shard, shuffle,
 * repeat, take, skip, batch, parse), each checked against an order or a
 * value worked out by hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>

#include "io/tfrecord.h"
#include "test_data_dataset_util.h"
#include "tpuloop/example.pb-c.h"
#include "testutil.h"

static tl_dataset *records_of(const char *const *files, int n, int64_t cycle, int64_t block)
{
    tl_tfrecord_options o;
    tl_tfrecord_options_init(&o);
    o.cycle_length = cycle;
    o.block_length = block;
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_tfrecord(files, n, &o, &ds));
    return ds;
}

static void expect_records(const char *const *files, int n, int64_t cycle, int64_t block, const char *want)
{
    tl_dataset *ds = records_of(files, n, cycle, block);
    char *got = dd_records(ds);
    cr_assert_str_eq(got, want, "cycle %lld block %lld", (long long)cycle, (long long)block);
    free(got);
    tl_dataset_destroy(ds);
}

/* Files A (5 records), B (2), C (4): tf.data's deterministic interleave,
 * worked out by hand from its loop (see tl_dataset_tfrecord_interleave). */
Test(data_dataset, interleave_order_by_hand)
{
    char *dir = dd_tmpdir();
    char *a = dd_join(dir, "a"), *b = dd_join(dir, "b"), *c = dd_join(dir, "c");
    dd_write_strings(a, "A", 5);
    dd_write_strings(b, "B", 2);
    dd_write_strings(c, "C", 4);
    const char *files[] = {a, b, c};
    expect_records(files, 3, 1, 1, "A0 A1 A2 A3 A4 B0 B1 C0 C1 C2 C3");
    expect_records(files, 3, 2, 2, "A0 A1 B0 B1 A2 A3 A4 C0 C1 C2 C3");
    expect_records(files, 3, 3, 1, "A0 B0 C0 A1 B1 C1 A2 C2 A3 C3 A4");
    expect_records(files, 3, 2, 1, "A0 B0 A1 B1 A2 A3 C0 A4 C1 C2 C3");
    expect_records(files, 3, 4, 3, "A0 A1 A2 B0 B1 C0 C1 C2 A3 A4 C3");
    free(a), free(b), free(c);
    dd_drop_dir(dir);
}

Test(data_dataset, glob_sorted_and_no_match_named)
{
    char *dir = dd_tmpdir();
    const char *names[] = {"train-00002-of-00003", "train-00000-of-00003", "train-00001-of-00003", "eval-0"};
    for (int i = 0; i < 4; i++) {
        char *p = dd_join(dir, names[i]);
        char prefix[2] = {(char)('A' + i), 0};
        dd_write_strings(p, prefix, 1);
        free(p);
    }
    char *pat = dd_join(dir, "train-*-of-00003");
    const char *pats[] = {pat};
    expect_records(pats, 1, 1, 1, "B0 C0 A0");
    char *none = dd_join(dir, "test-*");
    const char *bad[] = {pat, none};
    tl_dataset *ds = (tl_dataset *)1;
    ASSERT_ERR(tl_dataset_tfrecord(bad, 2, NULL, &ds), TL_ENOTFOUND, "test-*");
    cr_assert_null(ds);
    ASSERT_ERR(tl_dataset_from_files(pats, 0, &ds), TL_EINVAL, "at least one pattern");
    free(pat);
    free(none);
    dd_drop_dir(dir);
}

/* Four files of three records: sharding the file list gives whole files,
 * sharding records gives every other record of the interleaved stream. */
Test(data_dataset, shard_files_versus_records)
{
    char *dir = dd_tmpdir();
    char *paths[4];
    for (int i = 0; i < 4; i++) {
        char name[8] = {'f', (char)('0' + i), 0}, prefix[2] = {(char)('A' + i), 0};
        paths[i] = dd_join(dir, name);
        dd_write_strings(paths[i], prefix, 3);
    }
    const char *pat[] = {paths[0], paths[1], paths[2], paths[3]};
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_from_files(pat, 4, &ds));
    ASSERT_OK(tl_dataset_shard(ds, 2, 1, &ds));
    ASSERT_OK(tl_dataset_tfrecord_interleave(ds, NULL, &ds));
    char *got = dd_records(ds);
    cr_assert_str_eq(got, "B0 B1 B2 D0 D1 D2");
    free(got);
    tl_dataset_destroy(ds);

    ds = records_of(pat, 4, 1, 1);
    ASSERT_OK(tl_dataset_shard(ds, 2, 1, &ds));
    got = dd_records(ds);
    cr_assert_str_eq(got, "A1 B0 B2 C1 D0 D2");
    free(got);
    tl_dataset_destroy(ds);

    ds = records_of(pat, 4, 1, 1);
    ASSERT_ERR(tl_dataset_shard(ds, 3, 3, &ds), TL_EINVAL, "index must be in [0, num_shards) = [0, 3) (got 3)");
    cr_assert_null(ds);
    for (int i = 0; i < 4; i++)
        free(paths[i]);
    dd_drop_dir(dir);
}

/* ---- in-memory data for the order tests -------------------------------------- */

static tl_labeled_data *counting(int64_t n)
{
    tl_labeled_data *d = calloc(1, sizeof *d);
    d->num_examples = n;
    d->num_features = 2;
    d->num_classes = (int32_t)n;
    d->feature_rank = 1;
    d->feature_shape[0] = 2;
    d->features = malloc((size_t)(n * 2 + 1) * sizeof(float));
    d->labels = malloc((size_t)(n + 1) * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) {
        d->features[2 * i] = (float)i;
        d->features[2 * i + 1] = -(float)i;
        d->labels[i] = (int32_t)i;
    }
    return d;
}

static void free_counting(tl_labeled_data *d)
{
    free(d->features);
    free(d->labels);
    free(d);
}

static size_t shuffled(const tl_labeled_data *d, int64_t buf, uint64_t seed, bool reshuffle, int64_t repeat,
                       int64_t **ids)
{
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_OK(tl_dataset_shuffle(ds, buf, seed, reshuffle, &ds));
    if (repeat != 1)
        ASSERT_OK(tl_dataset_repeat(ds, repeat, &ds));
    size_t n = dd_drain(ds, ids, -1);
    tl_dataset_destroy(ds);
    return n;
}

static void expect_permutation(const int64_t *ids, int64_t n)
{
    char *seen = calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++) {
        cr_assert(ids[i] >= 0 && ids[i] < n, "id %lld out of range", (long long)ids[i]);
        cr_assert_not(seen[ids[i]], "id %lld twice", (long long)ids[i]);
        seen[ids[i]] = 1;
    }
    free(seen);
}

Test(data_dataset, shuffle_deterministic_permutation)
{
    tl_labeled_data *d = counting(100);
    int64_t *a, *b, *c, *id;
    cr_assert_eq(shuffled(d, 10, 7, true, 1, &a), 100u);
    cr_assert_eq(shuffled(d, 10, 7, true, 1, &b), 100u);
    cr_assert_eq(shuffled(d, 10, 8, true, 1, &c), 100u);
    cr_assert_eq(memcmp(a, b, 100 * sizeof *a), 0, "same seed, same order");
    cr_assert_neq(memcmp(a, c, 100 * sizeof *a), 0, "another seed, another order");
    expect_permutation(a, 100);
    int moved = 0;
    for (int i = 0; i < 100; i++)
        moved += a[i] != i;
    cr_assert_gt(moved, 50, "a shuffle that moves only %d of 100", moved);
    /* A buffer of 10 never outputs an element more than 9 places early. */
    for (int i = 0; i < 100; i++)
        cr_assert_leq(a[i], i + 9, "element %lld at %d", (long long)a[i], i);
    cr_assert_eq(shuffled(d, 1, 7, true, 1, &id), 100u);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(id[i], i, "buffer_size 1 is the identity");
    free(a), free(b), free(c), free(id);
    free_counting(d);
}

Test(data_dataset, shuffle_epochs_with_and_without_reshuffle)
{
    tl_labeled_data *d = counting(50);
    int64_t *r, *r2, *s;
    cr_assert_eq(shuffled(d, 50, 3, true, 3, &r), 150u);
    cr_assert_eq(shuffled(d, 50, 3, true, 3, &r2), 150u);
    cr_assert_eq(shuffled(d, 50, 3, false, 3, &s), 150u);
    cr_assert_eq(memcmp(r, r2, 150 * sizeof *r), 0, "reshuffled epochs are a function of (seed, epoch)");
    for (int e = 0; e < 3; e++) {
        expect_permutation(r + 50 * e, 50);
        expect_permutation(s + 50 * e, 50);
    }
    cr_assert_neq(memcmp(r, r + 50, 50 * sizeof *r), 0, "epoch 1 reshuffled");
    cr_assert_neq(memcmp(r + 50, r + 100, 50 * sizeof *r), 0, "epoch 2 reshuffled");
    cr_assert_eq(memcmp(s, s + 50, 50 * sizeof *s), 0, "without reshuffle every epoch is the same");
    cr_assert_eq(memcmp(s, s + 100, 50 * sizeof *s), 0);
    free(r), free(r2), free(s);
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_ERR(tl_dataset_shuffle(ds, 0, 1, true, &ds), TL_EINVAL, "buffer_size must be in 1..");
    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_ERR(tl_dataset_shuffle(ds, -5, 1, true, &ds), TL_EINVAL, "(got -5)");
    free_counting(d);
}

static void expect_ids(tl_dataset *ds, const int64_t *want, size_t n)
{
    int64_t *ids;
    size_t got = dd_drain(ds, &ids, -1);
    cr_assert_eq(got, n, "%zu elements, want %zu", got, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(ids[i], want[i], "element %zu: %lld, want %lld", i, (long long)ids[i], (long long)want[i]);
    free(ids);
    tl_dataset_destroy(ds);
}

Test(data_dataset, repeat_take_skip)
{
    tl_labeled_data *d = counting(4);
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, 3, &ds));
    ASSERT_OK(tl_dataset_skip(ds, 2, &ds));
    ASSERT_OK(tl_dataset_take(ds, 7, &ds));
    expect_ids(ds, (const int64_t[]){2, 3, 0, 1, 2, 3, 0}, 7);

    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, -1, &ds));
    ASSERT_OK(tl_dataset_take(ds, 10, &ds));
    expect_ids(ds, (const int64_t[]){0, 1, 2, 3, 0, 1, 2, 3, 0, 1}, 10);

    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, 0, &ds));
    expect_ids(ds, NULL, 0);

    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_OK(tl_dataset_skip(ds, -1, &ds));
    expect_ids(ds, NULL, 0);

    /* repeat(-1) over nothing ends instead of looping for ever */
    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_OK(tl_dataset_take(ds, 0, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, -1, &ds));
    expect_ids(ds, NULL, 0);

    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_ERR(tl_dataset_repeat(ds, -2, &ds), TL_EINVAL, "count must be >= -1");
    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_ERR(tl_dataset_take(ds, -3, &ds), TL_EINVAL, "take: count must be >= -1");
    free_counting(d);
}

Test(data_dataset, batch_dense_and_remainder)
{
    tl_labeled_data *d = counting(5);
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_OK(tl_dataset_batch(ds, 2, false, &ds));
    const tl_element *e;
    int sizes[3];
    for (int b = 0; b < 3; b++) {
        ASSERT_OK(tl_dataset_next(ds, &e));
        cr_assert_not_null(e);
        const tl_tensor *f = tl_element_find(e, "features"), *l = tl_element_find(e, "label");
        cr_assert_eq(f->rank, 2);
        cr_assert_eq(f->shape[1], 2);
        cr_assert_eq(l->rank, 1);
        sizes[b] = (int)f->shape[0];
        for (int i = 0; i < sizes[b]; i++) {
            cr_assert_eq(((float *)f->data)[2 * i], (float)(2 * b + i));
            cr_assert_eq(((float *)f->data)[2 * i + 1], -(float)(2 * b + i));
            cr_assert_eq(((int32_t *)l->data)[i], 2 * b + i);
        }
    }
    cr_assert_eq(sizes[0], 2);
    cr_assert_eq(sizes[2], 1, "the remainder is kept without drop_remainder");
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e);
    tl_dataset_destroy(ds);

    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_OK(tl_dataset_batch(ds, 2, true, &ds));
    int64_t *ids;
    cr_assert_eq(dd_drain(ds, &ids, -1), 2u, "drop_remainder: two full batches, the short one dropped");
    free(ids);
    tl_dataset_destroy(ds);

    ASSERT_OK(tl_dataset_labeled(d, &ds));
    ASSERT_ERR(tl_dataset_batch(ds, 0, true, &ds), TL_EINVAL, "batch_size must be in 1..");
    cr_assert_null(ds);
    free_counting(d);
}

/* ---- parse ---------------------------------------------------------------------- */

static tl_dataset *parsed(const char *path, int c, const tl_feature_spec *specs, int n)
{
    tl_tfrecord_options o;
    tl_tfrecord_options_init(&o);
    o.compression = (tl_record_compression)c;
    const char *files[] = {path};
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_tfrecord(files, 1, &o, &ds));
    ASSERT_OK(tl_dataset_parse_example(ds, specs, n, NULL, &ds));
    return ds;
}

Test(data_dataset, parse_fixed_var_and_bytes)
{
    char *dir = dd_tmpdir(), *p = dd_join(dir, "ex");
    dd_write_examples(p, 0, 10, 4);
    tl_dataset *ds = parsed(p, 0, dd_specs, 4);
    const tl_element *e;
    for (int64_t id = 10; id < 14; id++) {
        ASSERT_OK(tl_dataset_next(ds, &e));
        cr_assert_not_null(e);
        cr_assert_eq(e->num_tensors, 4);
        cr_assert_str_eq(e->tensors[0].key, "id");
        cr_assert_str_eq(e->tensors[3].key, "name");
        const tl_tensor *x = tl_element_find(e, "x"), *t = tl_element_find(e, "tags"), *nm = tl_element_find(e, "name");
        cr_assert_eq(*(int64_t *)tl_element_find(e, "id")->data, id);
        cr_assert_eq(tl_element_find(e, "id")->rank, 0);
        cr_assert_eq(x->dtype, TL_DT_FLOAT32);
        cr_assert_eq(x->rank, 1);
        cr_assert_eq(x->shape[0], 2);
        cr_assert_eq(((float *)x->data)[0], (float)id / 2);
        cr_assert_eq(((float *)x->data)[1], (float)id + 1);
        cr_assert(t->ragged);
        cr_assert_eq(t->num_rows, 1);
        cr_assert_eq(t->num_values, id % 3);
        cr_assert_eq(t->row_lengths[0], id % 3);
        for (int64_t k = 0; k < id % 3; k++)
            cr_assert_eq(((int64_t *)t->data)[k], id + k);
        char want[32];
        snprintf(want, sizeof want, "n%lld", (long long)id);
        const tl_bytes *b = nm->data;
        cr_assert_eq(b->len, strlen(want));
        cr_assert_eq(memcmp(b->data, want, b->len), 0);
    }
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e);
    tl_dataset_destroy(ds);
    free(p);
    dd_drop_dir(dir);
}

Test(data_dataset, parse_default_and_missing_required)
{
    char *dir = dd_tmpdir(), *p = dd_join(dir, "ex");
    dd_write_examples(p, 0, 0, 3);
    const float dflt[2] = {9, 8};
    tl_feature_spec specs[2] = {
        {.key = "id", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_INT64},
        {.key = "weight", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_FLOAT, .rank = 1, .shape = {2},
         .default_value = dflt, .default_count = 2},
    };
    tl_dataset *ds = parsed(p, 0, specs, 2);
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    const tl_tensor *w = tl_element_find(e, "weight");
    cr_assert_eq(((float *)w->data)[0], 9.0f);
    cr_assert_eq(((float *)w->data)[1], 8.0f);
    tl_dataset_destroy(ds);

    specs[1].default_value = NULL; /* required now */
    ds = parsed(p, 0, specs, 2);
    tl_status st = tl_dataset_next(ds, &e);
    cr_assert_eq(st, TL_EINVAL, "%s", tl_last_error());
    cr_assert_null(e);
    cr_assert(strstr(tl_last_error(), "\"weight\"") != NULL, "%s", tl_last_error());
    cr_assert(strstr(tl_last_error(), "record 0") != NULL, "%s", tl_last_error());
    cr_assert(strstr(tl_last_error(), p) != NULL, "names the file: %s", tl_last_error());
    /* the next record fails the same way, naming record 1 */
    cr_assert_eq(tl_dataset_next(ds, &e), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "record 1") != NULL, "%s", tl_last_error());
    tl_dataset_destroy(ds);

    /* a spec mismatch: id is int64, read as float */
    tl_feature_spec wrong = {.key = "id", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_FLOAT};
    ds = parsed(p, 0, &wrong, 1);
    cr_assert_eq(tl_dataset_next(ds, &e), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "\"id\"") != NULL, "%s", tl_last_error());
    tl_dataset_destroy(ds);

    /* a bad spec fails at construction */
    tl_feature_spec neg = {.key = "id", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_INT64, .rank = 1,
                           .shape = {-2}};
    const char *files[] = {p};
    ASSERT_OK(tl_dataset_tfrecord(files, 1, NULL, &ds));
    ASSERT_ERR(tl_dataset_parse_example(ds, &neg, 1, NULL, &ds), TL_EINVAL, "specs[0]");
    cr_assert_null(ds);
    free(p);
    dd_drop_dir(dir);
}

Test(data_dataset, batch_ragged_and_bytes)
{
    char *dir = dd_tmpdir(), *p = dd_join(dir, "ex");
    dd_write_examples(p, 0, 0, 5); /* tags lengths 0 1 2 0 1 */
    tl_dataset *ds = parsed(p, 0, dd_specs, 4);
    ASSERT_OK(tl_dataset_batch(ds, 3, true, &ds));
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    const tl_tensor *t = tl_element_find(e, "tags"), *x = tl_element_find(e, "x"), *nm = tl_element_find(e, "name");
    cr_assert(t->ragged);
    cr_assert_eq(t->num_rows, 3);
    cr_assert_eq(t->rank, 2);
    cr_assert_eq(t->shape[0], 3);
    cr_assert_eq(t->shape[1], 2, "the longest row");
    cr_assert_eq(t->num_values, 3);
    int64_t want_len[3] = {0, 1, 2}, want_vals[3] = {1, 2, 3};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(t->row_lengths[i], want_len[i]);
        cr_assert_eq(((int64_t *)t->data)[i], want_vals[i]);
    }
    cr_assert_eq(x->rank, 2);
    cr_assert_eq(x->shape[0], 3);
    cr_assert_eq(x->shape[1], 2);
    cr_assert_eq(((float *)x->data)[5], 3.0f);
    cr_assert_eq(nm->rank, 1);
    const tl_bytes *b = nm->data;
    cr_assert_eq(b[2].len, 2u);
    cr_assert_eq(memcmp(b[2].data, "n2", 2), 0);
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e, "drop_remainder drops the 2 left");
    tl_dataset_destroy(ds);
    free(p);
    dd_drop_dir(dir);
}

/* A SequenceExample whose feature list "tok" has `steps` steps of one
 * int64 each (step i holds i). */
static void write_sequences(const char *path, const int *steps, int n)
{
    tl_tfrecord_writer *w;
    ASSERT_OK(tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w));
    for (int r = 0; r < n; r++) {
        int64_t vals[16];
        Tpuloop__Int64List lists[16];
        Tpuloop__Feature feats[16];
        Tpuloop__Feature *fp[16];
        for (int i = 0; i < steps[r]; i++) {
            vals[i] = i;
            tpuloop__int64_list__init(&lists[i]);
            lists[i].n_value = 1;
            lists[i].value = &vals[i];
            tpuloop__feature__init(&feats[i]);
            feats[i].kind_case = TPULOOP__FEATURE__KIND_INT64_LIST;
            feats[i].int64_list = &lists[i];
            fp[i] = &feats[i];
        }
        Tpuloop__FeatureList fl = TPULOOP__FEATURE_LIST__INIT;
        fl.n_feature = (size_t)steps[r];
        fl.feature = fp;
        Tpuloop__FeatureLists__FeatureListEntry ent = TPULOOP__FEATURE_LISTS__FEATURE_LIST_ENTRY__INIT;
        ent.key = (char *)"tok";
        ent.value = &fl;
        Tpuloop__FeatureLists__FeatureListEntry *ents[1] = {&ent};
        Tpuloop__FeatureLists fls = TPULOOP__FEATURE_LISTS__INIT;
        fls.n_feature_list = 1;
        fls.feature_list = ents;
        Tpuloop__SequenceExample se = TPULOOP__SEQUENCE_EXAMPLE__INIT;
        se.feature_lists = &fls;
        size_t len = tpuloop__sequence_example__get_packed_size(&se);
        uint8_t *buf = malloc(len + 1);
        tpuloop__sequence_example__pack(&se, buf);
        ASSERT_OK(tl_tfrecord_write(w, buf, len));
        free(buf);
    }
    ASSERT_OK(tl_tfrecord_writer_destroy(w));
}

Test(data_dataset, sequence_features_and_batch_errors)
{
    char *dir = dd_tmpdir(), *p = dd_join(dir, "seq");
    write_sequences(p, (const int[]){2, 2, 3}, 3);
    tl_feature_spec fixed = {.key = "tok", .type = TL_SPEC_FIXED_LEN_SEQUENCE, .dtype = TL_FEATURE_INT64};
    tl_dataset *ds = parsed(p, 0, &fixed, 1);
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    const tl_tensor *t = tl_element_find(e, "tok");
    cr_assert_eq(t->rank, 1);
    cr_assert_eq(t->shape[0], 2, "(steps) for a scalar step");
    cr_assert_eq(((int64_t *)t->data)[1], 1);
    tl_dataset_destroy(ds);

    ds = parsed(p, 0, &fixed, 1);
    ASSERT_OK(tl_dataset_batch(ds, 3, false, &ds));
    ASSERT_ERR(tl_dataset_next(ds, &e), TL_EINVAL, "\"tok\" has shape (3) in element 2 of the batch");
    cr_assert(strstr(tl_last_error(), "but (2) in element 0") != NULL, "%s", tl_last_error());
    tl_dataset_destroy(ds);

    tl_feature_spec var = {.key = "tok", .type = TL_SPEC_VAR_LEN_SEQUENCE, .dtype = TL_FEATURE_INT64};
    ds = parsed(p, 0, &var, 1);
    ASSERT_OK(tl_dataset_next(ds, &e));
    t = tl_element_find(e, "tok");
    cr_assert(t->ragged);
    cr_assert_eq(t->num_rows, 2);
    cr_assert_eq(t->num_values, 2);
    tl_dataset_destroy(ds);
    ds = parsed(p, 0, &var, 1);
    ASSERT_OK(tl_dataset_batch(ds, 2, false, &ds));
    ASSERT_ERR(tl_dataset_next(ds, &e), TL_ENOTIMPL, "ragged with 2 rows");
    tl_dataset_destroy(ds);
    free(p);
    dd_drop_dir(dir);
}

Test(data_dataset, gzip_zlib_auto)
{
    char *dir = dd_tmpdir();
    for (int c = 0; c < 3; c++) {
        char name[8] = {'f', (char)('0' + c), 0};
        char *p = dd_join(dir, name);
        dd_write_examples(p, c, 100 * c, 20);
        for (int mode = 0; mode < 2; mode++) {
            tl_dataset *ds = parsed(p, mode == 0 ? c : TL_RECORD_AUTO, dd_specs, 1);
            int64_t *ids;
            cr_assert_eq(dd_drain(ds, &ids, -1), 20u);
            for (int i = 0; i < 20; i++)
                cr_assert_eq(ids[i], 100 * c + i, "compression %d", c);
            free(ids);
            tl_dataset_destroy(ds);
        }
        free(p);
    }
    dd_drop_dir(dir);
}

/* ---- other sources ---------------------------------------------------------------- */

Test(data_dataset, labeled_source)
{
    tl_labeled_data *d = counting(3);
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_labeled(d, &ds));
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    ASSERT_OK(tl_dataset_next(ds, &e));
    const tl_tensor *f = tl_element_find(e, "features"), *l = tl_element_find(e, "label");
    cr_assert_eq(f->dtype, TL_DT_FLOAT32);
    cr_assert_eq(f->rank, 1);
    cr_assert_eq(f->shape[0], 2);
    cr_assert_eq(((float *)f->data)[1], -1.0f);
    cr_assert_eq(l->dtype, TL_DT_INT32);
    cr_assert_eq(*(int32_t *)l->data, 1);
    cr_assert_null(tl_element_find(e, "nope"));
    tl_dataset_destroy(ds);
    ASSERT_ERR(tl_dataset_labeled(NULL, &ds), TL_EINVAL, "data is NULL");
    free_counting(d);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

Test(data_dataset, idx_source)
{
    char *dir = dd_tmpdir(), *xi = dd_join(dir, "x"), *yi = dd_join(dir, "y"), *bad = dd_join(dir, "y3");
    /* 3 images 2x2 u8, labels u8 */
    uint8_t x[4 + 12 + 12] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
    for (int i = 0; i < 12; i++)
        x[16 + i] = (uint8_t)(i * 20);
    uint8_t y[8 + 3] = {0, 0, 0x08, 1, 0, 0, 0, 3, 7, 8, 9};
    uint8_t y2[8 + 2] = {0, 0, 0x08, 1, 0, 0, 0, 2, 7, 8};
    write_file(xi, x, 16 + 12);
    write_file(yi, y, sizeof y);
    write_file(bad, y2, sizeof y2);
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_idx(xi, yi, 0.5f, &ds));
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    ASSERT_OK(tl_dataset_next(ds, &e));
    const tl_tensor *f = tl_element_find(e, "features");
    cr_assert_eq(f->rank, 2);
    cr_assert_eq(f->shape[0], 2);
    cr_assert_eq(f->shape[1], 2);
    cr_assert_eq(((float *)f->data)[1], 100 * 0.5f);
    cr_assert_eq(*(int32_t *)tl_element_find(e, "label")->data, 8);
    tl_dataset_destroy(ds);
    ASSERT_ERR(tl_dataset_idx(xi, bad, 1, &ds), TL_EPARSE, "has 2 labels but");
    ASSERT_OK(tl_dataset_idx(xi, NULL, 1, &ds));
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(tl_element_find(e, "label"));
    tl_dataset_destroy(ds);
    free(xi), free(yi), free(bad);
    dd_drop_dir(dir);
}

Test(data_dataset, csv_source)
{
    char *dir = dd_tmpdir(), *p = dd_join(dir, "a.csv");
    const char *text = "age,score,name,label\n3,1.5,bob,1\n4,-2,\"a,b\",0\n";
    write_file(p, text, strlen(text));
    tl_csv_column cols[4] = {{"age", TL_CSV_INT64}, {"score", TL_CSV_FLOAT32}, {"name", TL_CSV_STRING},
                             {"label", TL_CSV_INT64}};
    tl_csv_options o;
    tl_csv_options_init(&o);
    o.columns = cols;
    o.num_columns = 4;
    o.label_column = "label";
    const char *files[] = {p};
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_csv(files, 1, &o, &ds));
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_eq(e->num_tensors, 4);
    cr_assert_eq(*(int64_t *)tl_element_find(e, "age")->data, 4);
    cr_assert_eq(*(float *)tl_element_find(e, "score")->data, -2.0f);
    const tl_bytes *b = tl_element_find(e, "name")->data;
    cr_assert_eq(b->len, 3u);
    cr_assert_eq(memcmp(b->data, "a,b", 3), 0);
    cr_assert_eq(*(int64_t *)tl_element_find(e, "label")->data, 0);
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e);
    tl_dataset_destroy(ds);
    cols[1].name = "points";
    ASSERT_ERR(tl_dataset_csv(files, 1, &o, &ds), TL_EPARSE, "header column");
    free(p);
    dd_drop_dir(dir);
}

Test(data_dataset, criteo_source)
{
    char *dir = dd_tmpdir(), *p = dd_join(dir, "day_0");
    char line[512] = "1";
    for (int i = 0; i < 13; i++)
        strcat(line, i == 2 ? "\t" : "\t3");
    for (int i = 0; i < 26; i++)
        strcat(line, "\tff");
    strcat(line, "\n");
    char text[1024];
    snprintf(text, sizeof text, "%s%s", line, line);
    text[strlen(line)] = '0'; /* the second line's label */
    write_file(p, text, strlen(text));
    const char *files[] = {p};
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_criteo(files, 1, NULL, &ds));
    ASSERT_OK(tl_dataset_batch(ds, 2, true, &ds));
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    const tl_tensor *l = tl_element_find(e, "label"), *d = tl_element_find(e, "dense"), *c = tl_element_find(e, "C26");
    cr_assert_eq(l->dtype, TL_DT_INT32);
    cr_assert_eq(((int32_t *)l->data)[0], 1);
    cr_assert_eq(((int32_t *)l->data)[1], 0);
    cr_assert_eq(d->shape[1], 13);
    cr_assert_eq(((float *)d->data)[0], logf(4.0f));
    cr_assert_eq(((float *)d->data)[2], 0.0f, "an empty field is 0");
    /* each categorical column its own int64 tensor, C1 .. C26: (batch) */
    cr_assert_eq(e->num_tensors, 2 + 26);
    cr_assert_str_eq(e->tensors[2].key, "C1");
    cr_assert_eq(c->dtype, TL_DT_INT64);
    cr_assert(c->rank == 1 && c->shape[0] == 2);
    cr_assert_eq(((int64_t *)c->data)[1], 255);
    tl_dataset_destroy(ds);
    free(p);
    dd_drop_dir(dir);
}

/* ---- tensor slices ------------------------------------------------------------------ */

/* Five examples in three columns: x float32 (5, 2, 3) with x[i][r][c] =
 * 100 i + 10 r + c, id int64 (5) = i, pair int32 (5, 2) = {-i, i * i}. */
typedef struct slices_data {
    float x[5][2][3];
    int64_t id[5];
    int32_t pair[5][2];
    tl_tensor cols[3];
} slices_data;

static void slices_fill(slices_data *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 5; i++) {
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 3; c++)
                s->x[i][r][c] = (float)(100 * i + 10 * r + c);
        s->id[i] = i;
        s->pair[i][0] = -i;
        s->pair[i][1] = i * i;
    }
    s->cols[0] = (tl_tensor){.key = "x", .dtype = TL_DT_FLOAT32, .rank = 3, .shape = {5, 2, 3}, .data = s->x};
    s->cols[1] = (tl_tensor){.key = "id", .dtype = TL_DT_INT64, .rank = 1, .shape = {5}, .data = s->id};
    s->cols[2] = (tl_tensor){.key = "pair", .dtype = TL_DT_INT32, .rank = 2, .shape = {5, 2}, .data = s->pair};
}

static tl_dataset *slices_of(const slices_data *s)
{
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_from_tensor_slices(s->cols, 3, &ds));
    return ds;
}

/* Element e is example i: x (2, 3), id (), pair (2), in column order. */
static void expect_slice(const tl_element *e, int i)
{
    cr_assert_not_null(e, "example %d missing", i);
    cr_assert_eq(e->num_tensors, 3);
    const tl_tensor *x = &e->tensors[0], *id = &e->tensors[1], *pair = &e->tensors[2];
    cr_assert_str_eq(x->key, "x");
    cr_assert_str_eq(id->key, "id");
    cr_assert_str_eq(pair->key, "pair");
    cr_assert(x->dtype == TL_DT_FLOAT32 && x->rank == 2 && x->shape[0] == 2 && x->shape[1] == 3 && !x->ragged);
    cr_assert(id->dtype == TL_DT_INT64 && id->rank == 0);
    cr_assert(pair->dtype == TL_DT_INT32 && pair->rank == 1 && pair->shape[0] == 2);
    for (int k = 0; k < 6; k++)
        cr_assert_eq(((float *)x->data)[k], (float)(100 * i + 10 * (k / 3) + k % 3), "example %d x[%d]", i, k);
    cr_assert_eq(*(int64_t *)id->data, i);
    cr_assert_eq(((int32_t *)pair->data)[0], -i);
    cr_assert_eq(((int32_t *)pair->data)[1], i * i);
}

Test(data_dataset, tensor_slices_elements_and_shapes)
{
    slices_data *s = malloc(sizeof *s);
    slices_fill(s);
    tl_dataset *ds = slices_of(s);
    /* Borrowed, not copied: a value changed after creation is the one read. */
    s->x[0][1][2] = 12.0f;
    s->id[4] = 4;
    const tl_element *e;
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(tl_dataset_next(ds, &e));
        expect_slice(e, i);
    }
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e);
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e, "the end stays the end");
    tl_dataset_destroy(ds);

    /* The keys are the dataset's own: the caller's strings may go. */
    char key[8] = "id";
    tl_tensor one = {.key = key, .dtype = TL_DT_INT64, .rank = 1, .shape = {5}, .data = s->id};
    ASSERT_OK(tl_dataset_from_tensor_slices(&one, 1, &ds));
    strcpy(key, "zz");
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_str_eq(e->tensors[0].key, "id");
    tl_dataset_destroy(ds);

    /* No examples: an empty dataset, data may be NULL. */
    tl_tensor none = {.key = "x", .dtype = TL_DT_FLOAT32, .rank = 2, .shape = {0, 4}};
    ASSERT_OK(tl_dataset_from_tensor_slices(&none, 1, &ds));
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e);
    tl_dataset_destroy(ds);
    free(s);
}

Test(data_dataset, tensor_slices_batch_drop_remainder)
{
    slices_data *s = malloc(sizeof *s);
    slices_fill(s);
    tl_dataset *ds = slices_of(s);
    ASSERT_OK(tl_dataset_batch(ds, 2, true, &ds));
    const tl_element *e;
    for (int b = 0; b < 2; b++) {
        ASSERT_OK(tl_dataset_next(ds, &e));
        cr_assert_not_null(e);
        const tl_tensor *x = tl_element_find(e, "x"), *id = tl_element_find(e, "id"), *p = tl_element_find(e, "pair");
        cr_assert(x->rank == 3 && x->shape[0] == 2 && x->shape[1] == 2 && x->shape[2] == 3);
        cr_assert(id->rank == 1 && id->shape[0] == 2);
        cr_assert(p->rank == 2 && p->shape[0] == 2 && p->shape[1] == 2);
        for (int k = 0; k < 2; k++) {
            int i = 2 * b + k;
            cr_assert_eq(((int64_t *)id->data)[k], i);
            cr_assert_eq(((float *)x->data)[6 * k + 5], (float)(100 * i + 12));
            cr_assert_eq(((int32_t *)p->data)[2 * k + 1], i * i);
        }
    }
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e, "drop_remainder: the fifth example is dropped");
    tl_dataset_destroy(ds);
    free(s);
}

Test(data_dataset, tensor_slices_repeat_and_shuffle)
{
    slices_data *s = malloc(sizeof *s);
    slices_fill(s);
    tl_dataset *ds = slices_of(s);
    ASSERT_OK(tl_dataset_repeat(ds, 2, &ds));
    expect_ids(ds, (const int64_t[]){0, 1, 2, 3, 4, 0, 1, 2, 3, 4}, 10);

    int64_t *a, *b;
    ds = slices_of(s);
    ASSERT_OK(tl_dataset_shuffle(ds, 5, 11, true, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, 3, &ds));
    cr_assert_eq(dd_drain(ds, &a, -1), 15u);
    tl_dataset_destroy(ds);
    ds = slices_of(s);
    ASSERT_OK(tl_dataset_shuffle(ds, 5, 11, true, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, 3, &ds));
    cr_assert_eq(dd_drain(ds, &b, -1), 15u);
    tl_dataset_destroy(ds);
    cr_assert_eq(memcmp(a, b, 15 * sizeof *a), 0, "the same seed, the same order");
    for (int ep = 0; ep < 3; ep++)
        expect_permutation(a + 5 * ep, 5);
    bool moved = false;
    for (int i = 0; i < 15; i++)
        moved |= a[i] != i % 5;
    cr_assert(moved, "a shuffle that kept every epoch in order");
    free(a), free(b);
    free(s);
}

Test(data_dataset, tensor_slices_save_and_restore)
{
    slices_data *s = malloc(sizeof *s);
    slices_fill(s);
    tl_dataset *ds = slices_of(s);
    const tl_element *e;
    for (int i = 0; i < 2; i++)
        ASSERT_OK(tl_dataset_next(ds, &e));
    char *state;
    ASSERT_OK(tl_dataset_save(ds, &state));
    cr_assert_not_null(strstr(state, "tensor_slices(5 examples: x (2, 3) float32, id () int64, pair (2) int32)"),
                      "the node: %s", state);
    ASSERT_OK(tl_dataset_next(ds, &e));
    expect_slice(e, 2);
    tl_dataset_destroy(ds);

    ds = slices_of(s);
    ASSERT_OK(tl_dataset_restore(ds, state));
    for (int i = 2; i < 5; i++) {
        ASSERT_OK(tl_dataset_next(ds, &e));
        expect_slice(e, i);
    }
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e);
    tl_dataset_destroy(ds);

    /* Into a different dataset: another N, another shape, another key. */
    slices_data *o = malloc(sizeof *o);
    slices_fill(o);
    o->cols[0].shape[0] = o->cols[1].shape[0] = o->cols[2].shape[0] = 4;
    ASSERT_OK(tl_dataset_from_tensor_slices(o->cols, 3, &ds));
    ASSERT_ERR(tl_dataset_restore(ds, state), TL_EINVAL, "tensor_slices(4 examples:");
    tl_dataset_destroy(ds);
    slices_fill(o);
    o->cols[0].shape[1] = 3, o->cols[0].shape[2] = 2;
    ASSERT_OK(tl_dataset_from_tensor_slices(o->cols, 3, &ds));
    ASSERT_ERR(tl_dataset_restore(ds, state), TL_EINVAL, "x (3, 2) float32");
    tl_dataset_destroy(ds);
    slices_fill(o);
    o->cols[1].key = "ids";
    ASSERT_OK(tl_dataset_from_tensor_slices(o->cols, 3, &ds));
    ASSERT_ERR(tl_dataset_restore(ds, state), TL_EINVAL, "in the saved state");
    tl_dataset_destroy(ds);
    free(o);

    /* A position past N is refused. */
    char *bad = strdup(state), *p = strstr(bad, "\"pos\": 2");
    if (p == NULL)
        p = strstr(bad, "\"pos\":2");
    cr_assert_not_null(p, "no position in %s", state);
    p[strlen(p[6] == ' ' ? "\"pos\": " : "\"pos\":")] = '9';
    ds = slices_of(s);
    ASSERT_ERR(tl_dataset_restore(ds, bad), TL_EINVAL, "restore: tensor_slices: position 9 outside 0..5");
    tl_dataset_destroy(ds);
    free(bad);
    free(state);
    free(s);
}

static void expect_slices_error(const tl_tensor *cols, int n, tl_status want, const char *frag)
{
    tl_dataset *ds = (tl_dataset *)1;
    ASSERT_ERR(tl_dataset_from_tensor_slices(cols, n, &ds), want, frag);
    cr_assert_null(ds, "a failed call leaves *out NULL");
    cr_assert(strstr(tl_last_error(), "tl_dataset_from_tensor_slices") != NULL, "%s", tl_last_error());
}

Test(data_dataset, tensor_slices_errors_name_the_column)
{
    float f[6] = {0};
    int64_t ids[3] = {0};
    tl_tensor c[2];
    tl_tensor good0 = {.key = "a", .dtype = TL_DT_FLOAT32, .rank = 2, .shape = {3, 2}, .data = f};
    tl_tensor good1 = {.key = "b", .dtype = TL_DT_INT64, .rank = 1, .shape = {3}, .data = ids};
#define RESET() (c[0] = good0, c[1] = good1)
    RESET();
    ASSERT_ERR(tl_dataset_from_tensor_slices(c, 2, NULL), TL_EINVAL, "out is NULL");
    expect_slices_error(c, 0, TL_EINVAL, "n is 0; at least one column");
    expect_slices_error(c, -1, TL_EINVAL, "n is -1");
    expect_slices_error(NULL, 2, TL_EINVAL, "columns is NULL");
    c[1].key = NULL;
    expect_slices_error(c, 2, TL_EINVAL, "columns[1].key is NULL");
    RESET();
    c[0].key = "";
    expect_slices_error(c, 2, TL_EINVAL, "columns[0].key is empty");
    RESET();
    c[1].key = "a";
    expect_slices_error(c, 2, TL_EINVAL, "columns[1].key \"a\" is also columns[0].key");
    RESET();
    c[1].dtype = TL_DT_BYTES;
    expect_slices_error(c, 2, TL_ENOTIMPL, "column \"b\": dtype bytes is not supported");
    RESET();
    c[1].dtype = (tl_data_type)9;
    expect_slices_error(c, 2, TL_EINVAL, "column \"b\": dtype 9 is not a tl_data_type");
    RESET();
    c[0].rank = 0;
    expect_slices_error(c, 2, TL_EINVAL, "column \"a\": rank 0 outside 1..8");
    RESET();
    c[0].rank = TL_TENSOR_MAX_RANK + 1;
    expect_slices_error(c, 2, TL_EINVAL, "column \"a\": rank 9 outside 1..8");
    RESET();
    c[0].shape[1] = -2;
    expect_slices_error(c, 2, TL_EINVAL, "column \"a\": shape[1] is -2; dimensions must be >= 0");
    RESET();
    c[0].shape[0] = -3;
    c[1].shape[0] = -3;
    expect_slices_error(c, 2, TL_EINVAL, "column \"a\": shape[0] is -3");
    RESET();
    c[1].rank = 3;
    c[1].shape[1] = c[1].shape[2] = (int64_t)1 << 40;
    expect_slices_error(c, 2, TL_EINVAL, "column \"b\": shape (3, 1099511627776, 1099511627776) holds more than");
    RESET();
    c[1].data = NULL;
    expect_slices_error(c, 2, TL_EINVAL, "column \"b\": data is NULL for 3 values");
    RESET();
    c[1].shape[0] = 4;
    expect_slices_error(c, 2, TL_EINVAL, "column \"b\" has 4 examples (shape[0]) but column \"a\" has 3");
    RESET();
    int64_t lens[1] = {3};
    c[1].ragged = true;
    c[1].num_values = 3;
    c[1].num_rows = 1;
    c[1].row_lengths = lens;
    expect_slices_error(c, 2, TL_EINVAL, "column \"b\" is ragged; only dense columns");
#undef RESET
}

/* Building, reading, batching, saving and restoring: every allocation may
 * fail, each failure is TL_ENOMEM and nothing leaks. */
static tl_status slices_sequence(void *ctx)
{
    const slices_data *s = ctx;
    tl_dataset *ds;
    const tl_element *e;
    char *state = NULL;
    tl_status st = tl_dataset_from_tensor_slices(s->cols, 3, &ds);
    if (st == TL_OK && (st = tl_dataset_batch(ds, 2, false, &ds)) == TL_OK) {
        if ((st = tl_dataset_next(ds, &e)) == TL_OK)
            st = tl_dataset_save(ds, &state);
        tl_dataset_destroy(ds);
    }
    if (st == TL_OK && (st = tl_dataset_from_tensor_slices(s->cols, 3, &ds)) == TL_OK) {
        if ((st = tl_dataset_batch(ds, 2, false, &ds)) == TL_OK) {
            if ((st = tl_dataset_restore(ds, state)) == TL_OK)
                while ((st = tl_dataset_next(ds, &e)) == TL_OK && e != NULL) {
                }
            tl_dataset_destroy(ds);
        }
    }
    tl_free_string(state);
    return st;
}

Test(data_dataset, tensor_slices_unwind_when_an_allocation_fails)
{
    slices_data *s = malloc(sizeof *s);
    slices_fill(s);
    tu_oom_sweep(slices_sequence, s, "tl_dataset_from_tensor_slices, batch, save and restore");
    free(s);
}

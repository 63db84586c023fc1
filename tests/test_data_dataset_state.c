/* Dataset positions and corrupt records: a pipeline saved after k elements,
 * for every k, and restored into a fresh one yields exactly the rest of the
 * sequence (mid shuffle buffer, mid file, across epochs, with prefetch and
 * parallel parsing); the saved text has the documented form, byte for byte,
 * and still restores when reformatted; states of format tpuloop.dataset/1
 * restore; a state from another pipeline or a damaged one is refused by
 * name, and save and restore unwind when an allocation fails; and
 * skip_corrupt_records skips a bad record or the rest of a file, counted,
 * where without it the error names the file and the offset. */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/base_int.h"
#include "io/tfrecord.h"
#include "test_data_dataset_util.h"
#include "test_mt_ckpt_util.h"
#include "testutil.h"

typedef tl_dataset *(*builder)(const char *dir, uint64_t seed);

/* A new directory of the fixture's files. */
static char *fixture_dir(void)
{
    char *dir = dd_tmpdir();
    char *a = dd_join(dir, "part-0"), *b = dd_join(dir, "part-1"), *c = dd_join(dir, "part-2.gz");
    dd_write_examples(a, 0, 0, 20);
    dd_write_examples(b, 0, 100, 17);
    dd_write_examples(c, 1, 200, 11);
    free(a), free(b), free(c);
    return dir;
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

/* Parsed elements (ragged "tags", bytes "name") in a shuffle buffer, fed by
 * two parse threads, under a prefetch. */
static tl_dataset *pipe_d(const char *dir, uint64_t seed)
{
    tl_dataset *ds = files_ds(dir, "part-[01]", 2, 3, TL_RECORD_NONE);
    tl_parse_options po = {.num_parallel_calls = 2};
    ASSERT_OK(tl_dataset_parse_example(ds, dd_specs, 4, &po, &ds));
    ASSERT_OK(tl_dataset_shuffle(ds, 6, seed, false, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, 2, &ds));
    ASSERT_OK(tl_dataset_prefetch(ds, 3, &ds));
    return ds;
}

static void restore_everywhere(builder build, int step)
{
    char *dir = fixture_dir();
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
    dd_drop_dir(dir);
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

Test(data_dataset_state, restore_everywhere_parsed_elements_in_the_buffer)
{
    restore_everywhere(pipe_d, 1);
}

/* A state restored into a fresh pipeline built by build yields the rest of
 * the reference sequence after the first k elements. */
static void expect_rest(builder build, const char *dir, const char *state, int k)
{
    tl_dataset *ds = build(dir, 42);
    int64_t *ref, *head, *tail;
    size_t total = dd_drain(ds, &ref, -1);
    tl_dataset_destroy(ds);
    ds = build(dir, 42);
    size_t nh = dd_drain(ds, &head, k);
    tl_dataset_destroy(ds);
    free(head);
    ds = build(dir, 42);
    ASSERT_OK(tl_dataset_restore(ds, state));
    size_t nt = dd_drain(ds, &tail, -1);
    tl_dataset_destroy(ds);
    cr_assert_eq(nh + nt, total, "%zu + %zu elements after the restore, want %zu", nh, nt, total);
    for (size_t i = 0; i < nt; i++)
        cr_assert_eq(tail[i], ref[nh + i], "id %zu after the restore is %lld, want %lld", i, (long long)tail[i],
                     (long long)ref[nh + i]);
    free(ref);
    free(tail);
}

/* tests/data/dataset_state_v1/ holds states tpuloop wrote in format
 * tpuloop.dataset/1, elements as JSON (tl_dataset_save of commit 9150d45,
 * the fixture's directory replaced by @DIR@), for pipe_a after 5 elements,
 * pipe_b after 7 (prefetched elements, a GZIP file read again) and pipe_d
 * after 9 (a hole, ragged and bytes tensors, records waiting to be parsed).
 * They restore, and a state saved after such a restore is format 2 and
 * restores the same. */
Test(data_dataset_state, a_state_of_format_1_restores)
{
    static const struct {
        builder build;
        const char *file;
        int k;
    } cases[] = {
        {pipe_a, "tests/data/dataset_state_v1/shuffle_repeat_parse_batch_after_5.json", 5},
        {pipe_b, "tests/data/dataset_state_v1/gzip_shard_shuffle_prefetch_after_7.json", 7},
        {pipe_d, "tests/data/dataset_state_v1/parse_shuffle_prefetch_after_9.json", 9},
    };
    char *dir = fixture_dir();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *v1 = mtck_read_replacing(cases[c].file, "@DIR@", dir);
        cr_assert(strstr(v1, "\"format\":\"tpuloop.dataset/1\"") != NULL, "%s", cases[c].file);
        expect_rest(cases[c].build, dir, v1, cases[c].k);
        tl_dataset *ds = cases[c].build(dir, 42);
        ASSERT_OK(tl_dataset_restore(ds, v1));
        char *v2;
        ASSERT_OK(tl_dataset_save(ds, &v2));
        tl_dataset_destroy(ds);
        cr_assert(strstr(v2, "\"format\":\"tpuloop.dataset/2\"") != NULL, "%s", v2);
        expect_rest(cases[c].build, dir, v2, cases[c].k);
        tl_free(v2);
        free(v1);
    }
    dd_drop_dir(dir);
}

/* A saved state is JSON: pretty-printed (the elements still last) or with
 * its keys sorted (the elements no longer last) it restores the same. */
Test(data_dataset_state, a_reformatted_state_restores)
{
    char *dir = fixture_dir();
    tl_dataset *ds = pipe_d(dir, 42);
    int64_t *head;
    dd_drain(ds, &head, 9);
    free(head);
    char *state;
    ASSERT_OK(tl_dataset_save(ds, &state));
    tl_dataset_destroy(ds);
    json_error_t jerr;
    json_t *j = json_loads(state, 0, &jerr);
    cr_assert_not_null(j, "the state is not JSON: %s", jerr.text);
    static const size_t flags[] = {JSON_INDENT(2), JSON_INDENT(1) | JSON_SORT_KEYS, JSON_COMPACT | JSON_SORT_KEYS};
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        char *text = json_dumps(j, flags[f]);
        cr_assert_neq(strcmp(text, state), 0);
        expect_rest(pipe_d, dir, text, 9);
        free(text);
    }
    json_decref(j);
    tl_free(state);
    dd_drop_dir(dir);
}

/* ---- the form of a saved state ------------------------------------------------------ */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const uint8_t *p, size_t n)
{
    char *s = malloc((n + 2) / 3 * 4 + 1), *o = s;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *o = '\0';
    return s;
}

static size_t b64_decode(const char *s, uint8_t *out)
{
    size_t n = 0;
    uint32_t v = 0;
    int bits = 0;
    for (; *s != '\0' && *s != '='; s++) {
        const char *c = strchr(B64, *s);
        cr_assert_not_null(c, "'%c' is not base64", *s);
        v = v << 6 | (uint32_t)(c - B64);
        if ((bits += 6) >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(v >> bits);
        }
    }
    return n;
}

/* Two examples, features (2) and an int32 label, through shuffle(2), read
 * once: the buffer holds the other example and the hole. */
static const float two_features[4] = {1.5f, -2.0f, 0.25f, 3.0f};
static const int32_t two_labels[2] = {7, 300};

static tl_dataset *two_examples(tl_labeled_data *d)
{
    *d = (tl_labeled_data){.num_examples = 2, .num_features = 2, .num_classes = 301, .feature_rank = 1,
                           .feature_shape = {2}, .features = (float *)two_features, .labels = (int32_t *)two_labels};
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_labeled(d, &ds));
    /* take(-1) passes every element but hides the source's random access,
     * so the shuffle buffers elements: the format under test. */
    ASSERT_OK(tl_dataset_take(ds, -1, &ds));
    ASSERT_OK(tl_dataset_shuffle(ds, 2, 1, false, &ds));
    return ds;
}

/* The slots of the buffer after example out was read, as the format says:
 * the hole (0), and example 1 - out: tag 1, no file, record zigzag(k) = 2k,
 * offset 0, 2 tensors; "features" (string 0) float32 rank 1 (2), dense, two
 * little-endian floats; "label" (string 1) int32 scalar, dense, LE int32. */
static size_t two_slots(int out, uint8_t *b)
{
    static const uint8_t ex[2][26] = {
        {1, 0, 0, 0, 2, 0, 1, 1, 2, 0, 0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0, 1, 3, 0, 0, 7, 0, 0, 0},
        {1, 0, 2, 0, 2, 0, 1, 1, 2, 0, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0x40, 0x40, 1, 3, 0, 0, 0x2c, 1, 0, 0},
    };
    size_t n = 0;
    for (int slot = 0; slot < 2; slot++) {
        if (slot == out) {
            b[n++] = 0;
        } else {
            memcpy(b + n, ex[1 - out], sizeof ex[0]);
            n += sizeof ex[0];
        }
    }
    return n;
}

/* The label of the element e. */
static int32_t label_of(const tl_element *e)
{
    const tl_tensor *t = tl_element_find(e, "label");
    cr_assert_not_null(t);
    return *(const int32_t *)t->data;
}

/* The state of the two-example pipeline after its first element (tl_free
 * it); *out is that example's index, the hole's slot. */
static char *two_after_one(int *out)
{
    tl_labeled_data d;
    tl_dataset *ds = two_examples(&d);
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    *out = label_of(e) == 7 ? 0 : 1;
    char *state;
    ASSERT_OK(tl_dataset_save(ds, &state));
    tl_dataset_destroy(ds);
    return state;
}

Test(data_dataset_state, the_saved_text_has_the_documented_form)
{
    int out;
    char *state = two_after_one(&out);
    /* the element data is the last member, written compactly */
    const char *el = strstr(state, ",\"elements\":\"");
    cr_assert_not_null(el, "%s", state);
    cr_assert_eq(strchr(el + 13, '"'), state + strlen(state) - 2, "%s", state);
    cr_assert_str_eq(state + strlen(state) - 2, "\"}");
    json_error_t jerr;
    json_t *j = json_loads(state, 0, &jerr);
    cr_assert_not_null(j, "%s", jerr.text);
    cr_assert_str_eq(json_string_value(json_object_get(j, "format")), "tpuloop.dataset/2");
    cr_assert_eq(json_integer_value(json_object_get(j, "corrupt_skipped")), 0);
    json_t *strs = json_object_get(j, "strings");
    cr_assert_eq(json_array_size(strs), 2u);
    cr_assert_str_eq(json_string_value(json_array_get(strs, 0)), "features");
    cr_assert_str_eq(json_string_value(json_array_get(strs, 1)), "label");
    json_t *shuffle = json_array_get(json_object_get(j, "nodes"), 0);
    cr_assert_eq(json_integer_value(json_object_get(shuffle, "hole")), out);
    json_t *buffer = json_object_get(shuffle, "buffer");
    uint8_t want[64], got[64];
    size_t n = two_slots(out, want);
    cr_assert_eq(json_integer_value(json_object_get(buffer, "slots")), 2);
    cr_assert_eq(json_integer_value(json_object_get(buffer, "at")), 0);
    cr_assert_eq(json_integer_value(json_object_get(buffer, "bytes")), (json_int_t)n);
    cr_assert_eq(b64_decode(json_string_value(json_object_get(j, "elements")), got), n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "byte %zu of the elements is 0x%02x, want 0x%02x", i, got[i], want[i]);
    json_decref(j);
    tl_free(state);
}

/* saved (a state of the two-example pipeline) with its buffer list replaced
 * by list and its elements by b[0..n). */
static char *two_state(const char *saved, const char *list, const uint8_t *b, size_t n)
{
    const char *lb = strstr(saved, "\"buffer\":{"), *le = lb != NULL ? strchr(lb, '}') : NULL;
    const char *el = strstr(saved, ",\"elements\":\"");
    cr_assert(lb != NULL && le != NULL && el != NULL && le < el, "%s", saved);
    char *b64 = b64_encode(b, n);
    size_t cap = strlen(saved) + strlen(list) + strlen(b64) + 64;
    char *s = malloc(cap);
    snprintf(s, cap, "%.*s\"buffer\":%s%.*s,\"elements\":\"%s\"}", (int)(lb - saved), saved, list, (int)(el - le - 1),
             le + 1, b64);
    free(b64);
    return s;
}

/* Restores state into the two-example pipeline: expect st with frag. */
static void expect_refused(const char *state, tl_status st, const char *frag)
{
    tl_labeled_data d;
    tl_dataset *ds = two_examples(&d);
    ASSERT_ERR(tl_dataset_restore(ds, state), st, frag);
    tl_dataset_destroy(ds);
}

Test(data_dataset_state, a_damaged_state_is_refused_naming_the_field)
{
    /* The real pipeline's description of its source, and the reference. */
    int out;
    char *saved = two_after_one(&out);
    uint8_t b[64];
    size_t n = two_slots(out, b);
    char list[128];
    snprintf(list, sizeof list, "{\"slots\":2,\"at\":0,\"bytes\":%zu}", n);
    char *s = two_state(saved, list, b, n);
    cr_assert_str_eq(s, saved, "the test's hand-made state is the saved one");
    /* It restores: the other example comes next, then the end. */
    tl_labeled_data d;
    tl_dataset *ds = two_examples(&d);
    const tl_element *e;
    ASSERT_OK(tl_dataset_restore(ds, s));
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_eq(label_of(e), two_labels[1 - out]);
    ASSERT_OK(tl_dataset_next(ds, &e));
    cr_assert_null(e);
    tl_dataset_destroy(ds);
    free(s);

    size_t el = out == 0 ? 1 : 0; /* where the element starts */
    struct {
        size_t at;     /* the byte changed, or SIZE_MAX */
        uint8_t value;
        const char *list;
        size_t n;      /* the bytes written */
        const char *frag;
    } cases[] = {
        {el + 6, 9, NULL, n, "tensor \"features\": dtype 9 (allowed: 1 float32, 2 int64, 3 int32, 4 bytes)"},
        {el + 7, 9, NULL, n, "tensor \"features\": rank 9 (allowed: 0..8)"},
        {el + 5, 2, NULL, n, "key is 2, at most 1 allowed"},
        {el, 2, NULL, n, "tag 2 (allowed: 0 an empty slot, 1 an element)"},
        {el + 1, 3, NULL, n, "file is 3, at most 2 allowed"},
        {el + 8, 100, NULL, n, "tensor \"features\": 100 values of 4 bytes in"},
        {SIZE_MAX, 0, "{\"slots\":2,\"at\":0,\"bytes\":3}", n, "the data ends inside it"},
        {SIZE_MAX, 0, "{\"slots\":2,\"at\":1,\"bytes\":27}", n, "lies outside the 27 bytes of \"elements\""},
        {SIZE_MAX, 0, "{\"slots\":1,\"at\":0,\"bytes\":27}", n, "bytes after the last slot"},
        {SIZE_MAX, 0, "{\"slots\":3,\"at\":0,\"bytes\":27}", n, "holds 3 elements; 0..2 fit"},
        {SIZE_MAX, 0, "{\"slots\":2,\"at\":0}", n, "lacks the integer \"bytes\""},
        {SIZE_MAX, 0, "[]", n, "lacks its \"buffer\" list"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t m[64];
        memcpy(m, b, n);
        if (cases[c].at != SIZE_MAX)
            m[cases[c].at] = cases[c].value;
        s = two_state(saved, cases[c].list != NULL ? cases[c].list : list, m, cases[c].n);
        expect_refused(s, TL_EINVAL, cases[c].frag);
        free(s);
    }
    /* the hole in the wrong slot */
    uint8_t other[64];
    two_slots(1 - out, other);
    s = two_state(saved, list, other, n);
    expect_refused(s, TL_EINVAL, "restore: shuffle: saved slot");
    free(s);
    /* elements that are not base64, or missing */
    s = two_state(saved, list, b, n);
    char *q = strstr(s, "\"elements\":\"") + 12;
    q[0] = '*';
    expect_refused(s, TL_EINVAL, "\"elements\" is not base64");
    strcpy(strstr(s, ",\"elements\""), "}");
    expect_refused(s, TL_EINVAL, "lacks its \"elements\" string");
    free(s);
    expect_refused("{\"format\":\"tpuloop.dataset/3\"}", TL_EINVAL,
                   "format \"tpuloop.dataset/3\", expected \"tpuloop.dataset/2\" or \"tpuloop.dataset/1\"");
    tl_free(saved);
}

typedef struct sweep {
    const tl_labeled_data *d; /* the two examples */
    const char *csv;          /* a CSV file of strings */
} sweep;

/* The two examples, or the CSV file's rows, shuffled. */
static tl_status sweep_pipeline(const sweep *w, bool csv, tl_dataset **ds)
{
    static const tl_csv_column cols[] = {{"k", TL_CSV_INT64}, {"s", TL_CSV_STRING}};
    tl_csv_options o;
    tl_csv_options_init(&o);
    o.columns = cols;
    o.num_columns = 2;
    tl_status st = csv ? tl_dataset_csv(&w->csv, 1, &o, ds) : tl_dataset_labeled(w->d, ds);
    return st == TL_OK ? tl_dataset_shuffle(*ds, 3, 1, false, ds) : st;
}

/* Saves each pipeline after one element, restores it into a fresh one and
 * reads to the end. */
static tl_status save_and_restore(void *ctx)
{
    const sweep *w = ctx;
    tl_status st = TL_OK;
    for (int csv = 0; csv < 2 && st == TL_OK; csv++) {
        tl_dataset *ds;
        if ((st = sweep_pipeline(w, csv, &ds)) != TL_OK)
            return st;
        const tl_element *e;
        char *state = NULL;
        if ((st = tl_dataset_next(ds, &e)) == TL_OK)
            st = tl_dataset_save(ds, &state);
        tl_dataset_destroy(ds);
        if (st != TL_OK)
            return st;
        if ((st = sweep_pipeline(w, csv, &ds)) == TL_OK) {
            if ((st = tl_dataset_restore(ds, state)) == TL_OK)
                while ((st = tl_dataset_next(ds, &e)) == TL_OK && e != NULL) {
                }
            tl_dataset_destroy(ds);
        }
        tl_free(state);
    }
    return st;
}

/* Every allocation of building, reading, saving and restoring may fail:
 * each failure is TL_ENOMEM and nothing leaks (the in-memory source's and
 * the CSV source's constructors once freed their description twice). */
Test(data_dataset_state, save_and_restore_unwind_when_an_allocation_fails)
{
    tl_labeled_data d = {.num_examples = 2, .num_features = 2, .num_classes = 301, .feature_rank = 1,
                         .feature_shape = {2}, .features = (float *)two_features, .labels = (int32_t *)two_labels};
    char *dir = dd_tmpdir(), *csv = dd_join(dir, "rows.csv");
    FILE *f = fopen(csv, "w");
    cr_assert_not_null(f);
    fputs("k,s\n1,one\n2,two\n3,three\n4,four\n", f);
    fclose(f);
    sweep w = {&d, csv};
    tu_oom_sweep(save_and_restore, &w, "tl_dataset_save and tl_dataset_restore");
    free(csv);
    dd_drop_dir(dir);
}

Test(data_dataset_state, restore_refuses_another_pipeline)
{
    char *dir = fixture_dir();
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
    dd_drop_dir(dir);
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
    dd_drop_dir(dir);
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
    dd_drop_dir(dir);
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
    dd_drop_dir(dir);
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
    dd_drop_dir(dir);
}

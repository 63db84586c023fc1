/* tf.Example / SequenceExample decoding against files third-party writers
 * made (../shared/testdata/external: TensorFlow's own TFRecordWriter, lingvo,
 * TFX/Beam), every record compared with the .expected.json that Python's
 * protobuf decoded; and corrupt records (every truncation, every bit flip),
 * which must end in a named error, never a crash. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/tfrecord.h"
#include "testutil.h"
#include "tpuloop/example.h"

#define EXTERNAL "../shared/testdata/external"
#define SINGLES EXTERNAL "/pwnall-tfrecord/singles.tfrecords"
#define LINGVO_WMT EXTERNAL "/lingvo/wmt14_ende_wpm_32k_test.tfrecord"
#define PENGUIN EXTERNAL "/tfx/penguin-Split-eval-data_tfrecord-00000-of-00001.gz"
#define SEQUENCE EXTERNAL "/tfx/tfrecord_sequence-Split-eval-data_tfrecord_eval.gz"

/* The whole (gunzipped, where it is gzip) file at path, malloc'd. gzread
 * passes a plain file through unchanged. */
static uint8_t *slurp(const char *path, size_t *n)
{
    gzFile g = gzopen(path, "rb");
    cr_assert_not_null(g, "%s: %s (the external fixtures live in ../shared/testdata/external)", path,
                       strerror(errno));
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (len == cap)
            buf = realloc(buf, cap *= 2);
        int got = gzread(g, buf + len, (unsigned)(cap - len));
        cr_assert_geq(got, 0, "%s: gzread failed", path);
        if (got == 0)
            break;
        len += (size_t)got;
    }
    gzclose(g);
    *n = len;
    return buf;
}

static json_t *load_json(const char *path)
{
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    cr_assert_not_null(j, "%s: %s at line %d", path, err.text, err.line);
    return j;
}

/* The records of a TFRecord image, as pointers into it. */
typedef struct records {
    size_t count;
    const uint8_t **data;
    size_t *len;
} records;

static records split(const uint8_t *img, size_t n, const char *name)
{
    records rs = {0, NULL, NULL};
    tl_tfrecord_reader *r;
    ASSERT_OK(tl_tfrecord_reader_create_memory(img, n, name, &r));
    for (;;) {
        const uint8_t *d;
        size_t len;
        ASSERT_OK(tl_tfrecord_next(r, &d, &len));
        if (d == NULL)
            break;
        rs.data = realloc(rs.data, (rs.count + 1) * sizeof *rs.data);
        rs.len = realloc(rs.len, (rs.count + 1) * sizeof *rs.len);
        rs.data[rs.count] = d;
        rs.len[rs.count++] = len;
    }
    tl_tfrecord_reader_destroy(r);
    return rs;
}

static void records_free(records *rs)
{
    free(rs->data);
    free(rs->len);
}

/* f holds exactly what the JSON's feature object j says. */
static void expect_feature(const tl_feature *f, json_t *j, const char *what)
{
    json_t *kind = json_object_get(j, "kind");
    if (json_is_null(kind)) {
        cr_assert_eq(f->kind, TL_FEATURE_NONE, "%s: kind %s, want none", what, tl_feature_kind_name(f->kind));
        cr_assert_eq(f->count, 0u, "%s", what);
        return;
    }
    cr_assert_str_eq(tl_feature_kind_name(f->kind), json_string_value(kind), "%s", what);
    if (f->kind == TL_FEATURE_BYTES) {
        json_t *hex = json_object_get(j, "value_hex");
        cr_assert_eq(f->count, json_array_size(hex), "%s: %zu values", what, f->count);
        for (size_t i = 0; i < f->count; i++) {
            const char *h = json_string_value(json_array_get(hex, i));
            cr_assert_eq(f->bytes[i].len * 2, strlen(h), "%s[%zu]: length", what, i);
            for (size_t k = 0; k < f->bytes[i].len; k++) {
                unsigned v;
                cr_assert_eq(sscanf(h + 2 * k, "%2x", &v), 1);
                cr_assert_eq(f->bytes[i].data[k], v, "%s[%zu] byte %zu", what, i, k);
            }
        }
    } else if (f->kind == TL_FEATURE_FLOAT) {
        json_t *bits = json_object_get(j, "value_f32_bits");
        cr_assert_eq(f->count, json_array_size(bits), "%s: %zu values", what, f->count);
        for (size_t i = 0; i < f->count; i++) {
            uint32_t got, want = (uint32_t)strtoul(json_string_value(json_array_get(bits, i)), NULL, 16);
            memcpy(&got, &f->floats[i], 4);
            cr_assert_eq(got, want, "%s[%zu]: bits 0x%08x, want 0x%08x", what, i, got, want);
        }
    } else {
        json_t *v = json_object_get(j, "value");
        cr_assert_eq(f->count, json_array_size(v), "%s: %zu values", what, f->count);
        for (size_t i = 0; i < f->count; i++)
            cr_assert_eq(f->int64s[i], (int64_t)json_integer_value(json_array_get(v, i)), "%s[%zu]", what, i);
    }
}

/* The features of ex are exactly the object jf: the same keys, in sorted
 * order, each with the JSON's kind and values. */
static void expect_features(const tl_example *ex, json_t *jf, size_t rec)
{
    size_t n;
    const tl_feature *fs = tl_example_features(ex, &n);
    cr_assert_eq(n, json_object_size(jf), "record %zu: %zu features, want %zu", rec, n, json_object_size(jf));
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            cr_assert_lt(strcmp(fs[i - 1].key, fs[i].key), 0, "record %zu: features not sorted", rec);
        json_t *j = json_object_get(jf, fs[i].key);
        cr_assert_not_null(j, "record %zu: feature \"%s\" is not in the JSON", rec, fs[i].key);
        cr_assert_eq(tl_example_find(ex, fs[i].key), &fs[i]);
        char what[200];
        snprintf(what, sizeof what, "record %zu feature %s", rec, fs[i].key);
        expect_feature(&fs[i], j, what);
    }
}

/* Every record of the TFRecord file at path matches its .expected.json. */
static void check_file(const char *path, bool sequence)
{
    size_t n;
    uint8_t *img = slurp(path, &n);
    char jpath[512];
    snprintf(jpath, sizeof jpath, "%s.expected.json", path);
    json_t *j = load_json(jpath);
    cr_assert_str_eq(json_string_value(json_object_get(j, "message_type")),
                     sequence ? "tensorflow.SequenceExample" : "tensorflow.Example");
    records rs = split(img, n, path);
    json_t *recs = json_object_get(j, "records");
    cr_assert_eq(rs.count, json_array_size(recs));
    cr_assert_eq((json_int_t)rs.count, json_integer_value(json_object_get(j, "record_count")));
    for (size_t i = 0; i < rs.count; i++) {
        json_t *jr = json_array_get(recs, i);
        tl_example *ex;
        if (sequence)
            ASSERT_OK(tl_sequence_example_parse(rs.data[i], rs.len[i], i, &ex));
        else
            ASSERT_OK(tl_example_parse(rs.data[i], rs.len[i], i, &ex));
        cr_assert_eq(tl_example_index(ex), i);
        cr_assert_eq(tl_example_is_sequence(ex), sequence);
        expect_features(ex, json_object_get(jr, sequence ? "context" : "features"), i);
        size_t nl;
        const tl_feature_list *ls = tl_example_feature_lists(ex, &nl);
        json_t *jl = json_object_get(jr, "feature_lists");
        cr_assert_eq(nl, sequence ? json_object_size(jl) : 0u, "record %zu: %zu feature lists", i, nl);
        for (size_t k = 0; k < nl; k++) {
            json_t *steps = json_object_get(jl, ls[k].key);
            cr_assert_not_null(steps, "record %zu: list \"%s\" is not in the JSON", i, ls[k].key);
            cr_assert_eq(tl_example_find_list(ex, ls[k].key), &ls[k]);
            cr_assert_eq(ls[k].count, json_array_size(steps));
            for (size_t s = 0; s < ls[k].count; s++) {
                char what[200];
                snprintf(what, sizeof what, "record %zu list %s step %zu", i, ls[k].key, s);
                cr_assert_null(ls[k].steps[s].key);
                expect_feature(&ls[k].steps[s], json_array_get(steps, s), what);
            }
        }
        tl_example_destroy(ex);
    }
    records_free(&rs);
    json_decref(j);
    free(img);
}

Test(io_example, singles_written_by_tensorflow)
{
    check_file(SINGLES, false);
}

Test(io_example, lingvo_wmt_examples)
{
    check_file(LINGVO_WMT, false);
}

Test(io_example, tfx_penguin_gzip_examples)
{
    check_file(PENGUIN, false);
}

Test(io_example, tfx_sequence_examples_with_empty_features)
{
    check_file(SEQUENCE, true);
    /* Record 0's context features are Features with no kind: present, empty. */
    size_t n;
    uint8_t *img = slurp(SEQUENCE, &n);
    records rs = split(img, n, SEQUENCE);
    tl_example *ex;
    ASSERT_OK(tl_sequence_example_parse(rs.data[0], rs.len[0], 0, &ex));
    const tl_feature *f = tl_example_find(ex, "i");
    cr_assert_not_null(f);
    cr_assert_eq(f->kind, TL_FEATURE_NONE);
    cr_assert_null(f->int64s);
    cr_assert_null(tl_example_find(ex, "s"), "a feature list is not a context feature");
    cr_assert_null(tl_example_find(ex, "missing"));
    cr_assert_null(tl_example_find_list(ex, "i"));
    tl_example_destroy(ex);
    records_free(&rs);
    free(img);
}

/* A SequenceExample read as an Example keeps its context (field 1 is the
 * same Features) and skips the feature lists as an unknown field. */
Test(io_example, sequence_record_read_as_example)
{
    size_t n;
    uint8_t *img = slurp(SEQUENCE, &n);
    records rs = split(img, n, SEQUENCE);
    tl_example *ex;
    ASSERT_OK(tl_example_parse(rs.data[1], rs.len[1], 1, &ex));
    size_t nf, nl;
    tl_example_features(ex, &nf);
    tl_example_feature_lists(ex, &nl);
    cr_assert_eq(nf, 2u);
    cr_assert_eq(nl, 0u);
    cr_assert_eq(tl_example_find(ex, "i")->int64s[0], 10501);
    tl_example_destroy(ex);
    records_free(&rs);
    free(img);
}

/* Every prefix of a record either parses (a prefix can end on a field
 * boundary) or is TL_EPARSE naming the record; none crashes or leaks. */
static void truncations(const uint8_t *rec, size_t len, uint64_t index, bool sequence)
{
    size_t failed = 0;
    for (size_t k = 0; k < len; k++) {
        tl_example *ex = NULL;
        tl_status st = sequence ? tl_sequence_example_parse(rec, k, index, &ex) : tl_example_parse(rec, k, index, &ex);
        if (st == TL_OK) {
            cr_assert_not_null(ex);
            tl_example_destroy(ex);
            continue;
        }
        failed++;
        cr_assert_null(ex);
        char want[64];
        snprintf(want, sizeof want, "record %llu: its %zu bytes are not", (unsigned long long)index, k);
        ASSERT_ERR(st, TL_EPARSE, want);
    }
    cr_assert_gt(failed, len / 2, "most prefixes cut a field: %zu of %zu failed", failed, len);
}

Test(io_example, every_truncation_is_a_named_error)
{
    size_t n;
    uint8_t *img = slurp(LINGVO_WMT, &n);
    records rs = split(img, n, LINGVO_WMT);
    truncations(rs.data[0], rs.len[0], 0, false);
    records_free(&rs);
    free(img);
    img = slurp(SEQUENCE, &n);
    rs = split(img, n, SEQUENCE);
    truncations(rs.data[1], rs.len[1], 1, true);
    records_free(&rs);
    free(img);
    ASSERT_ERR(tl_example_parse(NULL, 3, 9, &(tl_example *){NULL}), TL_EINVAL, "record 9: data is NULL");
}

/* Every single bit flip parses or fails with a message; flips inside a
 * value's bytes keep the structure and must still parse. */
static void bit_flips(const uint8_t *rec, size_t len, bool sequence)
{
    uint8_t *copy = malloc(len);
    size_t ok = 0;
    for (size_t bit = 0; bit < len * 8; bit++) {
        memcpy(copy, rec, len);
        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        tl_example *ex = NULL;
        tl_status st = sequence ? tl_sequence_example_parse(copy, len, 5, &ex) : tl_example_parse(copy, len, 5, &ex);
        if (st == TL_OK) {
            size_t nf;
            const tl_feature *fs = tl_example_features(ex, &nf);
            for (size_t i = 0; i < nf; i++) /* every value readable */
                for (size_t k = 0; k < fs[i].count && fs[i].kind == TL_FEATURE_BYTES; k++)
                    cr_assert_not_null(fs[i].bytes[k].data);
            tl_example_destroy(ex);
            ok++;
        } else {
            cr_assert_eq(st, TL_EPARSE, "bit %zu: %s", bit, tl_last_error());
            cr_assert(strstr(tl_last_error(), "record 5:") != NULL, "%s", tl_last_error());
        }
    }
    cr_assert_gt(ok, 0u);
    free(copy);
}

Test(io_example, every_bit_flip_is_handled)
{
    size_t n;
    uint8_t *img = slurp(SINGLES, &n);
    records rs = split(img, n, SINGLES);
    for (size_t i = 0; i < rs.count; i++)
        bit_flips(rs.data[i], rs.len[i], false);
    records_free(&rs);
    free(img);
    img = slurp(SEQUENCE, &n);
    rs = split(img, n, SEQUENCE);
    bit_flips(rs.data[1], rs.len[1], true);
    records_free(&rs);
    free(img);
}

/* tf.Example round trips (messages built and packed with protobuf-c, then
 * parsed), both encodings of numeric lists, duplicate keys, and the feature
 * specs of tl_example_parse_features: dense, ragged, sequences, defaults,
 * and the errors a user sees when a record does not fit its spec. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tpuloop/example.h"
#include "tpuloop/example.pb-c.h"

/* ---- building messages ---------------------------------------------------- */

/* Everything a test builds, freed by arena_free. */
static void *arena[256];
static size_t arena_n;

static void *keep(void *p)
{
    cr_assert_lt(arena_n, sizeof arena / sizeof arena[0]);
    arena[arena_n++] = p;
    return p;
}

static void arena_free(void)
{
    while (arena_n > 0)
        free(arena[--arena_n]);
}

static Tpuloop__Feature *f_int64(size_t n, const int64_t *v)
{
    Tpuloop__Int64List *l = keep(malloc(sizeof *l));
    tpuloop__int64_list__init(l);
    l->n_value = n;
    l->value = (int64_t *)v;
    Tpuloop__Feature *f = keep(malloc(sizeof *f));
    tpuloop__feature__init(f);
    f->kind_case = TPULOOP__FEATURE__KIND_INT64_LIST;
    f->int64_list = l;
    return f;
}

static Tpuloop__Feature *f_float(size_t n, const float *v)
{
    Tpuloop__FloatList *l = keep(malloc(sizeof *l));
    tpuloop__float_list__init(l);
    l->n_value = n;
    l->value = (float *)v;
    Tpuloop__Feature *f = keep(malloc(sizeof *f));
    tpuloop__feature__init(f);
    f->kind_case = TPULOOP__FEATURE__KIND_FLOAT_LIST;
    f->float_list = l;
    return f;
}

/* n strings, each its strlen long. */
static Tpuloop__Feature *f_bytes(size_t n, const char *const *v)
{
    Tpuloop__BytesList *l = keep(malloc(sizeof *l));
    tpuloop__bytes_list__init(l);
    l->n_value = n;
    l->value = keep(calloc(n + 1, sizeof *l->value));
    for (size_t i = 0; i < n; i++)
        l->value[i] = (ProtobufCBinaryData){strlen(v[i]), (uint8_t *)v[i]};
    Tpuloop__Feature *f = keep(malloc(sizeof *f));
    tpuloop__feature__init(f);
    f->kind_case = TPULOOP__FEATURE__KIND_BYTES_LIST;
    f->bytes_list = l;
    return f;
}

static Tpuloop__Feature *f_none(void)
{
    Tpuloop__Feature *f = keep(malloc(sizeof *f));
    tpuloop__feature__init(f);
    return f;
}

static Tpuloop__Features *features(size_t n, const char *const *keys, Tpuloop__Feature *const *vals)
{
    Tpuloop__Features *m = keep(malloc(sizeof *m));
    tpuloop__features__init(m);
    m->n_feature = n;
    m->feature = keep(calloc(n + 1, sizeof *m->feature));
    for (size_t i = 0; i < n; i++) {
        Tpuloop__Features__FeatureEntry *e = keep(malloc(sizeof *e));
        tpuloop__features__feature_entry__init(e);
        e->key = (char *)keys[i];
        e->value = vals[i];
        m->feature[i] = e;
    }
    return m;
}

static uint8_t *pack_example(Tpuloop__Features *fs, size_t *len)
{
    Tpuloop__Example ex = TPULOOP__EXAMPLE__INIT;
    ex.features = fs;
    *len = tpuloop__example__get_packed_size(&ex);
    uint8_t *buf = keep(malloc(*len + 1));
    cr_assert_eq(tpuloop__example__pack(&ex, buf), *len);
    return buf;
}

/* The SequenceExample the spec tests read: context label [7], weights
 * [1..6], name ["abc"], empty (no kind), tags ["x", "yy"]; feature lists
 * tok [[1,2],[3,4],[5,6]], words [["a"],[],["b","c"]], bad [[1],[1,2]],
 * mixed [int64 [1], float [2]]. */
static const int64_t one_two[] = {1, 2}, three_four[] = {3, 4}, five_six[] = {5, 6}, seven[] = {7};
static const float weights[] = {1, 2, 3, 4, 5, 6}, two_f[] = {2};
static const char *const abc[] = {"abc"}, *const tags[] = {"x", "yy"}, *const a_[] = {"a"}, *const bc[] = {"b", "c"};

static Tpuloop__FeatureList *flist(size_t n, Tpuloop__Feature *const *steps)
{
    Tpuloop__FeatureList *l = keep(malloc(sizeof *l));
    tpuloop__feature_list__init(l);
    l->n_feature = n;
    l->feature = keep(calloc(n + 1, sizeof *l->feature));
    memcpy(l->feature, steps, n * sizeof *steps);
    return l;
}

static uint8_t *pack_sequence(size_t *len)
{
    const char *ckeys[] = {"label", "weights", "name", "empty", "tags"};
    Tpuloop__Feature *cvals[] = {f_int64(1, seven), f_float(6, weights), f_bytes(1, abc), f_none(), f_bytes(2, tags)};
    Tpuloop__FeatureList *lists[] = {
        flist(3, (Tpuloop__Feature *[]){f_int64(2, one_two), f_int64(2, three_four), f_int64(2, five_six)}),
        flist(3, (Tpuloop__Feature *[]){f_bytes(1, a_), f_bytes(0, NULL), f_bytes(2, bc)}),
        flist(2, (Tpuloop__Feature *[]){f_int64(1, one_two), f_int64(2, one_two)}),
        flist(2, (Tpuloop__Feature *[]){f_int64(1, one_two), f_float(1, two_f)}),
    };
    const char *lkeys[] = {"tok", "words", "bad", "mixed"};
    Tpuloop__FeatureLists *fl = keep(malloc(sizeof *fl));
    tpuloop__feature_lists__init(fl);
    fl->n_feature_list = 4;
    fl->feature_list = keep(calloc(4, sizeof *fl->feature_list));
    for (size_t i = 0; i < 4; i++) {
        Tpuloop__FeatureLists__FeatureListEntry *e = keep(malloc(sizeof *e));
        tpuloop__feature_lists__feature_list_entry__init(e);
        e->key = (char *)lkeys[i];
        e->value = lists[i];
        fl->feature_list[i] = e;
    }
    Tpuloop__SequenceExample se = TPULOOP__SEQUENCE_EXAMPLE__INIT;
    se.context = features(5, ckeys, cvals);
    se.feature_lists = fl;
    *len = tpuloop__sequence_example__get_packed_size(&se);
    uint8_t *buf = keep(malloc(*len));
    cr_assert_eq(tpuloop__sequence_example__pack(&se, buf), *len);
    return buf;
}

static tl_example *sequence_fixture(void)
{
    size_t len;
    uint8_t *buf = pack_sequence(&len);
    tl_example *ex;
    ASSERT_OK(tl_sequence_example_parse(buf, len, 42, &ex));
    return ex;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- round trips ---------------------------------------------------------- */

Test(io_example_spec, round_trip_every_kind)
{
    static const int64_t ints[] = {INT64_MIN, -1, 0, INT64_MAX};
    float floats[3] = {1.5f, -0.0f, 0};
    uint32_t nan_bits = 0x7fc00001u;
    memcpy(&floats[2], &nan_bits, 4);
    static const char nul3[] = {'a', 0, 'b'};
    Tpuloop__Feature *b = f_bytes(2, (const char *[]){"", "xyz"});
    b->bytes_list->value[1] = (ProtobufCBinaryData){3, (uint8_t *)nul3};
    const char *keys[] = {"i", "f", "b", "e", "z", "\xe2\x96\x81key"};
    Tpuloop__Feature *vals[] = {f_int64(4, ints), f_float(3, floats), b, f_none(), f_float(0, NULL), f_int64(1, ints)};
    size_t len;
    uint8_t *buf = pack_example(features(6, keys, vals), &len);
    tl_example *ex;
    ASSERT_OK(tl_example_parse(buf, len, 3, &ex));
    memset(buf, 0xee, len); /* the view owns its memory */
    size_t n;
    const tl_feature *fs = tl_example_features(ex, &n);
    cr_assert_eq(n, 6u);
    const char *sorted[] = {"b", "e", "f", "i", "z", "\xe2\x96\x81key"};
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(fs[i].key, sorted[i]);
    const tl_feature *f = tl_example_find(ex, "i");
    cr_assert_eq(f->kind, TL_FEATURE_INT64);
    cr_assert_eq(f->count, 4u);
    cr_assert_eq(memcmp(f->int64s, ints, sizeof ints), 0);
    cr_assert_null(f->floats);
    f = tl_example_find(ex, "f");
    cr_assert_eq(f->kind, TL_FEATURE_FLOAT);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(bits(f->floats[i]), bits(floats[i]), "float %d keeps its bits", i);
    f = tl_example_find(ex, "b");
    cr_assert_eq(f->kind, TL_FEATURE_BYTES);
    cr_assert_eq(f->count, 2u);
    cr_assert_eq(f->bytes[0].len, 0u);
    cr_assert_not_null(f->bytes[0].data);
    cr_assert_eq(f->bytes[1].len, 3u);
    cr_assert_eq(memcmp(f->bytes[1].data, nul3, 3), 0);
    f = tl_example_find(ex, "e");
    cr_assert_eq(f->kind, TL_FEATURE_NONE);
    cr_assert_eq(f->count, 0u);
    f = tl_example_find(ex, "z");
    cr_assert_eq(f->kind, TL_FEATURE_FLOAT, "a kind with no values is still that kind");
    cr_assert_eq(f->count, 0u);
    cr_assert_null(tl_example_find(ex, "j"));
    cr_assert_str_eq(tl_feature_kind_name(TL_FEATURE_INT64), "int64_list");
    tl_example_destroy(ex);
    tl_example_destroy(NULL);
    arena_free();
}

Test(io_example_spec, empty_record_is_an_empty_example)
{
    tl_example *ex;
    ASSERT_OK(tl_example_parse("", 0, 0, &ex));
    size_t n;
    tl_example_features(ex, &n);
    cr_assert_eq(n, 0u);
    cr_assert_null(tl_example_find(ex, "x"));
    tl_example_destroy(ex);
}

/* A key on the wire twice keeps its last value, as protobuf maps do. */
Test(io_example_spec, duplicate_key_keeps_the_last)
{
    const char *keys[] = {"k", "a", "k"};
    Tpuloop__Feature *vals[] = {f_int64(1, seven), f_int64(1, seven), f_float(1, two_f)};
    size_t len;
    uint8_t *buf = pack_example(features(3, keys, vals), &len);
    tl_example *ex;
    ASSERT_OK(tl_example_parse(buf, len, 0, &ex));
    size_t n;
    tl_example_features(ex, &n);
    cr_assert_eq(n, 2u);
    const tl_feature *f = tl_example_find(ex, "k");
    cr_assert_eq(f->kind, TL_FEATURE_FLOAT);
    cr_assert_eq(f->floats[0], 2.0f);
    tl_example_destroy(ex);
    arena_free();
}

/* ---- packed and unpacked encodings, by hand --------------------------------- */

typedef struct wbuf {
    uint8_t b[256];
    size_t n;
} wbuf;

static void put_varint(wbuf *w, uint64_t v)
{
    do {
        w->b[w->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
}

static void put_ld(wbuf *w, unsigned field, const wbuf *inner)
{
    put_varint(w, field << 3 | 2);
    put_varint(w, inner->n);
    memcpy(w->b + w->n, inner->b, inner->n);
    w->n += inner->n;
}

/* Example{features{feature{key: key, value: Feature{<kind> list}}}}, the
 * list's bytes given. */
static wbuf wrap(const char *key, unsigned kind, const wbuf *list)
{
    wbuf feat = {{0}, 0}, entry = {{0}, 0}, fs = {{0}, 0}, ex = {{0}, 0}, k = {{0}, 0};
    put_ld(&feat, kind, list);
    k.n = strlen(key);
    memcpy(k.b, key, k.n);
    put_ld(&entry, 1, &k);
    put_ld(&entry, 2, &feat);
    put_ld(&fs, 1, &entry);
    put_ld(&ex, 1, &fs);
    return ex;
}

Test(io_example_spec, packed_and_unpacked_lists_read_the_same)
{
    const float fv[] = {1.25f, -3.0f};
    const int64_t iv[] = {-1, 300};
    wbuf fl_unpacked = {{0}, 0}, fl_packed = {{0}, 0}, raw = {{0}, 0};
    for (int i = 0; i < 2; i++) {
        put_varint(&fl_unpacked, 1 << 3 | 5); /* fixed32, one per value */
        memcpy(fl_unpacked.b + fl_unpacked.n, &fv[i], 4);
        fl_unpacked.n += 4;
        memcpy(raw.b + raw.n, &fv[i], 4);
        raw.n += 4;
    }
    put_ld(&fl_packed, 1, &raw);
    wbuf il_unpacked = {{0}, 0}, il_packed = {{0}, 0}, iraw = {{0}, 0}, il_mixed = {{0}, 0}, one = {{0}, 0};
    for (int i = 0; i < 2; i++) {
        put_varint(&il_unpacked, 1 << 3 | 0);
        put_varint(&il_unpacked, (uint64_t)iv[i]);
        put_varint(&iraw, (uint64_t)iv[i]);
    }
    put_ld(&il_packed, 1, &iraw);
    /* A packed run followed by an unpacked value: protobuf concatenates. */
    put_varint(&one, (uint64_t)iv[0]);
    put_ld(&il_mixed, 1, &one);
    put_varint(&il_mixed, 1 << 3 | 0);
    put_varint(&il_mixed, (uint64_t)iv[1]);
    const wbuf *flists[] = {&fl_unpacked, &fl_packed}, *ilists[] = {&il_unpacked, &il_packed, &il_mixed};
    for (int v = 0; v < 2; v++) {
        wbuf ex = wrap("f", 2, flists[v]);
        tl_example *e;
        ASSERT_OK(tl_example_parse(ex.b, ex.n, 0, &e));
        const tl_feature *f = tl_example_find(e, "f");
        cr_assert_eq(f->count, 2u, "encoding %d", v);
        cr_assert_eq(memcmp(f->floats, fv, sizeof fv), 0, "encoding %d", v);
        tl_example_destroy(e);
    }
    for (int v = 0; v < 3; v++) {
        wbuf ex = wrap("i", 3, ilists[v]);
        tl_example *e;
        ASSERT_OK(tl_example_parse(ex.b, ex.n, 0, &e));
        const tl_feature *f = tl_example_find(e, "i");
        cr_assert_eq(f->count, 2u, "encoding %d", v);
        cr_assert_eq(f->int64s[0], -1);
        cr_assert_eq(f->int64s[1], 300);
        tl_example_destroy(e);
    }
    /* A float list with a varint value is a wrong wire type. */
    wbuf bad = wrap("f", 2, &il_unpacked);
    tl_example *e;
    ASSERT_ERR(tl_example_parse(bad.b, bad.n, 11, &e), TL_EPARSE, "record 11:");
}

/* Keys are C strings of raw bytes: not checked for UTF-8, cut at a NUL. */
Test(io_example_spec, keys_are_raw_bytes)
{
    const uint8_t rec[] = {0x0a, 0x0b, 0x0a, 0x09, 0x0a, 0x03, 0xff, 0x00, 'b', 0x12, 0x02, 0x1a, 0x00};
    tl_example *ex;
    ASSERT_OK(tl_example_parse(rec, sizeof rec, 0, &ex));
    const tl_feature *f = tl_example_find(ex, "\xff");
    cr_assert_not_null(f);
    cr_assert_eq(f->kind, TL_FEATURE_INT64);
    cr_assert_eq(f->count, 0u);
    tl_example_destroy(ex);
}

Test(io_example_spec, sequence_round_trip)
{
    tl_example *ex = sequence_fixture();
    cr_assert(tl_example_is_sequence(ex));
    size_t n;
    const tl_feature_list *ls = tl_example_feature_lists(ex, &n);
    cr_assert_eq(n, 4u);
    cr_assert_str_eq(ls[0].key, "bad");
    const tl_feature_list *w = tl_example_find_list(ex, "words");
    cr_assert_eq(w->count, 3u);
    cr_assert_eq(w->steps[0].bytes[0].data[0], 'a');
    cr_assert_eq(w->steps[1].kind, TL_FEATURE_BYTES);
    cr_assert_eq(w->steps[1].count, 0u);
    cr_assert_eq(w->steps[2].bytes[1].data[0], 'c');
    cr_assert_eq(tl_example_find(ex, "label")->int64s[0], 7);
    tl_example_destroy(ex);
    arena_free();
}

/* ---- feature specs ---------------------------------------------------------- */

static tl_feature_spec spec(const char *key, tl_feature_spec_type type, tl_feature_kind dtype, int rank,
                            const int64_t *shape)
{
    tl_feature_spec s = {.key = key, .type = type, .dtype = dtype, .rank = rank};
    for (int i = 0; i < rank; i++)
        s.shape[i] = shape[i];
    return s;
}

Test(io_example_spec, fixed_len_dense_values)
{
    tl_example *ex = sequence_fixture();
    tl_feature_spec s[3] = {
        spec("label", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 0, NULL),
        spec("weights", TL_SPEC_FIXED_LEN, TL_FEATURE_FLOAT, 2, (int64_t[]){2, 3}),
        spec("name", TL_SPEC_FIXED_LEN, TL_FEATURE_BYTES, 1, (int64_t[]){1}),
    };
    tl_parsed_feature out[3];
    ASSERT_OK(tl_example_parse_features(ex, s, 3, out));
    cr_assert_eq(out[0].rank, 0);
    cr_assert_eq(out[0].count, 1u);
    cr_assert_eq(out[0].int64s[0], 7);
    cr_assert_eq(out[1].rank, 2);
    cr_assert_eq(out[1].shape[0], 2);
    cr_assert_eq(out[1].shape[1], 3);
    cr_assert_eq(memcmp(out[1].floats, weights, sizeof weights), 0);
    cr_assert_null(out[1].row_lengths);
    cr_assert_eq(out[2].bytes[0].len, 3u);
    cr_assert_eq(memcmp(out[2].bytes[0].data, "abc", 3), 0);
    tl_parsed_features_free(out, 3);
    cr_assert_null(out[1].floats);
    tl_parsed_features_free(NULL, 3);
    tl_example_destroy(ex);
    arena_free();
}

Test(io_example_spec, fixed_len_defaults)
{
    tl_example *ex = sequence_fixture();
    const int64_t nine = 9, three[] = {1, 2, 3};
    const tl_bytes dflt = {(const uint8_t *)"dflt", 4};
    tl_feature_spec s[4] = {
        spec("nope", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 2, (int64_t[]){2, 2}),
        spec("nope", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 1, (int64_t[]){3}),
        spec("empty", TL_SPEC_FIXED_LEN, TL_FEATURE_BYTES, 0, NULL),
        spec("label", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 0, NULL),
    };
    s[0].default_value = &nine, s[0].default_count = 1;
    s[1].default_value = three, s[1].default_count = 3;
    s[2].default_value = &dflt, s[2].default_count = 1;
    s[3].default_value = &nine, s[3].default_count = 1;
    tl_parsed_feature out[4];
    ASSERT_OK(tl_example_parse_features(ex, s, 4, out));
    cr_assert_eq(out[0].count, 4u);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(out[0].int64s[i], 9, "a one-value default fills the shape");
    cr_assert_eq(memcmp(out[1].int64s, three, sizeof three), 0);
    cr_assert_eq(out[2].bytes[0].data, dflt.data, "a present feature with no kind takes the default");
    cr_assert_eq(out[3].int64s[0], 7, "a present feature ignores the default");
    tl_parsed_features_free(out, 4);
    tl_example_destroy(ex);
    arena_free();
}

/* Runs one spec that must fail with status and a message holding frag, and
 * checks the earlier, successful spec's result was zeroed. */
static void spec_fails(tl_example *ex, tl_feature_spec s, tl_status status, const char *frag)
{
    tl_feature_spec two[2] = {spec("label", TL_SPEC_VAR_LEN, TL_FEATURE_INT64, 0, NULL), s};
    tl_parsed_feature out[2];
    ASSERT_ERR(tl_example_parse_features(ex, two, 2, out), status, frag);
    cr_assert_null(out[0].int64s);
    cr_assert_null(out[0].row_lengths);
    cr_assert_eq(out[0].count, 0u);
}

Test(io_example_spec, fixed_len_errors_name_record_and_key)
{
    tl_example *ex = sequence_fixture();
    spec_fails(ex, spec("nope", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 0, NULL), TL_EINVAL,
               "record 42: feature \"nope\" (data type: int64) is required but could not be found");
    spec_fails(ex, spec("empty", TL_SPEC_FIXED_LEN, TL_FEATURE_FLOAT, 0, NULL), TL_EINVAL,
               "record 42: feature \"empty\" (data type: float) is required");
    spec_fails(ex, spec("label", TL_SPEC_FIXED_LEN, TL_FEATURE_FLOAT, 0, NULL), TL_EINVAL,
               "record 42: feature \"label\": data types don't match: expected type float (float_list), "
               "feature is int64_list");
    spec_fails(ex, spec("weights", TL_SPEC_FIXED_LEN, TL_FEATURE_FLOAT, 2, (int64_t[]){2, 2}), TL_EINVAL,
               "record 42: feature \"weights\": number of float values != expected: values size 6 but output "
               "shape [2,2]");
    spec_fails(ex, spec("label", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 1, (int64_t[]){0}), TL_EINVAL,
               "values size 1 but output shape [0]");
    tl_example_destroy(ex);
    arena_free();
}

Test(io_example_spec, var_len_values_and_lengths)
{
    tl_example *ex = sequence_fixture();
    tl_feature_spec s[3] = {
        spec("tags", TL_SPEC_VAR_LEN, TL_FEATURE_BYTES, 0, NULL),
        spec("nope", TL_SPEC_VAR_LEN, TL_FEATURE_FLOAT, 0, NULL),
        spec("empty", TL_SPEC_VAR_LEN, TL_FEATURE_INT64, 0, NULL),
    };
    tl_parsed_feature out[3];
    ASSERT_OK(tl_example_parse_features(ex, s, 3, out));
    cr_assert_eq(out[0].count, 2u);
    cr_assert_eq(out[0].bytes[1].len, 2u);
    cr_assert_eq(out[0].num_rows, 1u);
    cr_assert_eq(out[0].row_lengths[0], 2);
    cr_assert_eq(out[0].rank, 1);
    cr_assert_eq(out[0].shape[0], 2);
    for (int i = 1; i < 3; i++) {
        cr_assert_eq(out[i].count, 0u, "a missing or empty feature is no values");
        cr_assert_null(out[i].floats);
        cr_assert_null(out[i].int64s);
        cr_assert_eq(out[i].row_lengths[0], 0);
    }
    tl_parsed_features_free(out, 3);
    spec_fails(ex, spec("tags", TL_SPEC_VAR_LEN, TL_FEATURE_INT64, 0, NULL), TL_EINVAL,
               "record 42: feature \"tags\": data types don't match: expected type int64 (int64_list), feature is "
               "bytes_list");
    tl_example_destroy(ex);
    arena_free();
}

Test(io_example_spec, fixed_len_sequence)
{
    tl_example *ex = sequence_fixture();
    tl_feature_spec s[2] = {
        spec("tok", TL_SPEC_FIXED_LEN_SEQUENCE, TL_FEATURE_INT64, 1, (int64_t[]){2}),
        spec("nope", TL_SPEC_FIXED_LEN_SEQUENCE, TL_FEATURE_FLOAT, 1, (int64_t[]){2}),
    };
    s[1].allow_missing = true;
    tl_parsed_feature out[2];
    ASSERT_OK(tl_example_parse_features(ex, s, 2, out));
    cr_assert_eq(out[0].rank, 2);
    cr_assert_eq(out[0].shape[0], 3);
    cr_assert_eq(out[0].shape[1], 2);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(out[0].int64s[i], i + 1);
    cr_assert_eq(out[1].shape[0], 0, "allow_missing: zero steps");
    cr_assert_eq(out[1].shape[1], 2);
    cr_assert_eq(out[1].count, 0u);
    tl_parsed_features_free(out, 2);
    spec_fails(ex, spec("tok", TL_SPEC_FIXED_LEN_SEQUENCE, TL_FEATURE_INT64, 1, (int64_t[]){3}), TL_EINVAL,
               "record 42: feature list \"tok\", step 0: number of int64 values != expected: values size 2 but "
               "output shape [3]");
    spec_fails(ex, spec("bad", TL_SPEC_FIXED_LEN_SEQUENCE, TL_FEATURE_INT64, 0, NULL), TL_EINVAL,
               "feature list \"bad\", step 1: number of int64 values != expected: values size 2 but output shape []");
    spec_fails(ex, spec("nope", TL_SPEC_FIXED_LEN_SEQUENCE, TL_FEATURE_INT64, 0, NULL), TL_EINVAL,
               "record 42: feature list \"nope\" is required but could not be found");
    spec_fails(ex, spec("mixed", TL_SPEC_FIXED_LEN_SEQUENCE, TL_FEATURE_INT64, 0, NULL), TL_EINVAL,
               "feature list \"mixed\", step 1: data types don't match: expected type int64 (int64_list), feature is "
               "float_list");
    tl_example_destroy(ex);
    arena_free();
}

Test(io_example_spec, var_len_sequence_is_ragged)
{
    tl_example *ex = sequence_fixture();
    tl_feature_spec s[2] = {
        spec("words", TL_SPEC_VAR_LEN_SEQUENCE, TL_FEATURE_BYTES, 0, NULL),
        spec("nope", TL_SPEC_VAR_LEN_SEQUENCE, TL_FEATURE_FLOAT, 0, NULL),
    };
    tl_parsed_feature out[2];
    ASSERT_OK(tl_example_parse_features(ex, s, 2, out));
    cr_assert_eq(out[0].count, 3u);
    cr_assert_eq(out[0].num_rows, 3u);
    cr_assert_eq(out[0].row_lengths[0], 1);
    cr_assert_eq(out[0].row_lengths[1], 0);
    cr_assert_eq(out[0].row_lengths[2], 2);
    cr_assert_eq(out[0].shape[0], 3);
    cr_assert_eq(out[0].shape[1], 2);
    cr_assert_eq(out[0].bytes[0].data[0], 'a');
    cr_assert_eq(out[0].bytes[2].data[0], 'c');
    cr_assert_eq(out[1].num_rows, 0u);
    cr_assert_eq(out[1].shape[0], 0);
    tl_parsed_features_free(out, 2);
    spec_fails(ex, spec("mixed", TL_SPEC_VAR_LEN_SEQUENCE, TL_FEATURE_INT64, 0, NULL), TL_EINVAL,
               "record 42: feature list \"mixed\", step 1: data types don't match");
    tl_example_destroy(ex);
    arena_free();
}

Test(io_example_spec, plain_example_has_no_feature_lists)
{
    size_t len;
    uint8_t *buf = pack_example(features(1, (const char *[]){"tok"}, (Tpuloop__Feature *[]){f_int64(2, one_two)}),
                                &len);
    tl_example *ex;
    ASSERT_OK(tl_example_parse(buf, len, 8, &ex));
    spec_fails(ex, spec("tok", TL_SPEC_FIXED_LEN_SEQUENCE, TL_FEATURE_INT64, 0, NULL), TL_EINVAL,
               "record 8: feature list \"tok\" is required but could not be found");
    tl_example_destroy(ex);
    arena_free();
}

Test(io_example_spec, bad_specs_are_rejected)
{
    tl_example *ex = sequence_fixture();
    const int64_t nine = 9;
    tl_feature_spec s = spec(NULL, TL_SPEC_VAR_LEN, TL_FEATURE_INT64, 0, NULL);
    spec_fails(ex, s, TL_EINVAL, "specs[1]: key is NULL");
    s = spec("k", (tl_feature_spec_type)9, TL_FEATURE_INT64, 0, NULL);
    spec_fails(ex, s, TL_EINVAL, "specs[1] (key \"k\"): type must be");
    s = spec("k", TL_SPEC_VAR_LEN, TL_FEATURE_NONE, 0, NULL);
    spec_fails(ex, s, TL_EINVAL, "dtype must be TL_FEATURE_FLOAT, TL_FEATURE_INT64 or TL_FEATURE_BYTES (got 0)");
    s = spec("k", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 0, NULL);
    s.rank = TL_FEATURE_MAX_RANK + 1;
    spec_fails(ex, s, TL_EINVAL, "rank must be 0..8 (got 9)");
    s = spec("k", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 2, (int64_t[]){2, -1});
    spec_fails(ex, s, TL_EINVAL, "shape[1] must be >= 0 (got -1)");
    s = spec("k", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 2, (int64_t[]){INT64_C(1) << 40, INT64_C(1) << 40});
    spec_fails(ex, s, TL_EINVAL, "the shape has too many elements");
    s = spec("k", TL_SPEC_VAR_LEN, TL_FEATURE_INT64, 0, NULL);
    s.default_value = &nine, s.default_count = 1;
    spec_fails(ex, s, TL_EINVAL, "a default_value is only allowed on TL_SPEC_FIXED_LEN (got VAR_LEN)");
    s = spec("k", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 1, (int64_t[]){3});
    s.default_value = &nine, s.default_count = 2;
    spec_fails(ex, s, TL_EINVAL, "default_count must be 1 or 3, the shape's size (got 2)");
    s = spec("k", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 0, NULL);
    s.allow_missing = true;
    spec_fails(ex, s, TL_EINVAL, "allow_missing is only allowed on TL_SPEC_FIXED_LEN_SEQUENCE");
    /* A bad spec fails before any feature is read, whatever the data. */
    tl_feature_spec two[2] = {spec("nope", TL_SPEC_FIXED_LEN, TL_FEATURE_INT64, 0, NULL),
                              spec(NULL, TL_SPEC_VAR_LEN, TL_FEATURE_INT64, 0, NULL)};
    tl_parsed_feature out[2];
    ASSERT_ERR(tl_example_parse_features(ex, two, 2, out), TL_EINVAL, "specs[1]: key is NULL");
    ASSERT_OK(tl_example_parse_features(ex, two, 0, NULL));
    tl_example_destroy(ex);
    arena_free();
}

/* ---- allocation failure ----------------------------------------------------- */

typedef struct oom_ctx {
    const uint8_t *buf;
    size_t len;
} oom_ctx;

static tl_status parse_and_read(void *ctx)
{
    const oom_ctx *c = ctx;
    tl_example *ex;
    tl_status st = tl_sequence_example_parse(c->buf, c->len, 1, &ex);
    if (st != TL_OK)
        return st;
    const float dflt = 0.5f;
    tl_feature_spec s[5] = {
        spec("weights", TL_SPEC_FIXED_LEN, TL_FEATURE_FLOAT, 1, (int64_t[]){6}),
        spec("nope", TL_SPEC_FIXED_LEN, TL_FEATURE_FLOAT, 1, (int64_t[]){2}),
        spec("tags", TL_SPEC_VAR_LEN, TL_FEATURE_BYTES, 0, NULL),
        spec("tok", TL_SPEC_FIXED_LEN_SEQUENCE, TL_FEATURE_INT64, 1, (int64_t[]){2}),
        spec("words", TL_SPEC_VAR_LEN_SEQUENCE, TL_FEATURE_BYTES, 0, NULL),
    };
    s[1].default_value = &dflt, s[1].default_count = 1;
    tl_parsed_feature out[5];
    st = tl_example_parse_features(ex, s, 5, out);
    if (st == TL_OK)
        tl_parsed_features_free(out, 5);
    tl_example_destroy(ex);
    return st;
}

Test(io_example_spec, allocation_failure_sweep)
{
    oom_ctx c;
    c.buf = pack_sequence(&c.len);
    long runs = tu_oom_sweep(parse_and_read, &c, "parse a SequenceExample and read 5 specs");
    /* The example, its arena's blocks (protobuf-c's allocations and the
     * view: example.c) and the 7 arrays of the results: with the arena
     * outside the hook there would be 8. */
    cr_assert_gt(runs, 8, "protobuf-c's allocations go through the hook too (%ld runs)", runs);
    arena_free();
}

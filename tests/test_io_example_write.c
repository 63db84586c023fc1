/* tl_example_builder: the bytes it writes are those of Python protobuf's
 * SerializeToString(deterministic=True) (fixed bytes below, and the same
 * examples built by /usr/bin/python3 from proto/tpuloop/example.proto when
 * protoc and python3-protobuf are there), tl_example_parse gives back every
 * value bit for bit, every record of the external Example files rebuilt reads
 * the same, and bad calls and allocation failures end in named errors. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/compress.h"
#include "testutil.h"
#include "tpuloop/example.h"

#define EXTERNAL "../shared/testdata/external"

static float f32(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static char *hex(const uint8_t *p, size_t n)
{
    char *s = malloc(2 * n + 1);
    cr_assert_not_null(s);
    for (size_t i = 0; i < n; i++)
        snprintf(s + 2 * i, 3, "%02x", p[i]);
    s[2 * n] = '\0';
    return s;
}

/* ---- the examples, built here and (in the live test) by Python ---------- */

/* Example 2 of the set: every kind, keys added out of order, edge values. */
static const uint32_t IMAGE_BITS[7] = {0x3f000000, 0x80000000, 0x7f800000, 0xff800000,
                                       0x7fc00001, 0x00000001, 0x3f800001};
static const int64_t LABELS[5] = {-1, 0, 1, INT64_MAX, INT64_MIN};
static const char KEY_RU[] = "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87"; /* "ключ" */

static void build(tl_example_builder *b, int which)
{
    tl_example_builder_reset(b);
    if (which == 1) {
        const int64_t v = 42;
        ASSERT_OK(tl_example_builder_add_int64s(b, "int_feature", &v, 1));
    } else if (which == 2) {
        float image[7];
        for (int i = 0; i < 7; i++)
            image[i] = f32(IMAGE_BITS[i]);
        const tl_bytes names[3] = {{(const uint8_t *)"", 0}, {(const uint8_t *)"a\0b", 3},
                                   {(const uint8_t *)"\xff\xfe", 2}};
        const int64_t z = 300;
        const float pi = 3.14f;
        ASSERT_OK(tl_example_builder_add_int64s(b, "label", LABELS, 5));
        ASSERT_OK(tl_example_builder_add_floats(b, "image", image, 7));
        ASSERT_OK(tl_example_builder_add_bytes(b, "name", names, 3));
        ASSERT_OK(tl_example_builder_add_empty(b, "empty"));
        ASSERT_OK(tl_example_builder_add_floats(b, "e_floats", NULL, 0));
        ASSERT_OK(tl_example_builder_add_bytes(b, "e_bytes", NULL, 0));
        ASSERT_OK(tl_example_builder_add_int64s(b, "Z", &z, 1));
        ASSERT_OK(tl_example_builder_add_floats(b, KEY_RU, &pi, 1));
    } else if (which == 3) {
        float lng[300];
        int64_t ids[101];
        for (int i = 0; i < 300; i++)
            lng[i] = (float)i / 7.0f;
        for (int i = 0; i < 101; i++)
            ids[i] = (int64_t)i * 997;
        ASSERT_OK(tl_example_builder_add_floats(b, "long", lng, 300));
        ASSERT_OK(tl_example_builder_add_int64s(b, "ids", ids, 101));
    }
}

/* The same examples in Python: f32 from bits; C's float32 (float)i / 7.0f
 * equals Python's float(i) / 7 rounded to float32, because rounding a
 * double quotient to float is innocuous (53 >= 2 * 24 + 2 bits). */
static const char PY_SCRIPT[] =
    "import struct, sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from tpuloop import example_pb2 as e\n"
    "def f32(b): return struct.unpack('<f', struct.pack('<I', b))[0]\n"
    "xs = []\n"
    "x = e.Example(); x.features.SetInParent(); xs.append(x)\n"
    "x = e.Example(); x.features.feature['int_feature'].int64_list.value.append(42); xs.append(x)\n"
    "x = e.Example(); F = x.features.feature\n"
    "F['label'].int64_list.value.extend([-1, 0, 1, 2**63 - 1, -2**63])\n"
    "F['image'].float_list.value.extend([f32(b) for b in (0x3f000000, 0x80000000, 0x7f800000, 0xff800000,"
    " 0x7fc00001, 1, 0x3f800001)])\n"
    "F['name'].bytes_list.value.extend([b'', b'a\\x00b', b'\\xff\\xfe'])\n"
    "F['empty']\n"
    "F['e_floats'].float_list.SetInParent()\n"
    "F['e_bytes'].bytes_list.SetInParent()\n"
    "F['Z'].int64_list.value.append(300)\n"
    "F['\\u043a\\u043b\\u044e\\u0447'].float_list.value.append(3.14)\n"
    "xs.append(x)\n"
    "x = e.Example(); F = x.features.feature\n"
    "F['long'].float_list.value.extend([float(i) / 7 for i in range(300)])\n"
    "F['ids'].int64_list.value.extend(range(0, 100001, 997))\n"
    "xs.append(x)\n"
    "for x in xs: print(x.SerializeToString(deterministic=True).hex())\n";

/* What Python 3.21.12 (the C++ implementation) printed for examples 0..2. */
static const char *const EXPECTED_HEX[3] = {
    "0a00",
    "0a160a140a0b696e745f6665617475726512051a030a012a",
    "0abd010a0b0a015a12061a040a02ac020a0d0a07655f627974657312020a000a0e0a08655f666c6f617473120212000a090a05656d707479"
    "12000a290a05696d6167651220121e0a1c0000003f000000800000807f000080ff0100c07f010000000100803f0a2c0a056c6162656c1223"
    "1a210a1fffffffffffffffffff010001ffffffffffffffff7f808080808080808080010a150a046e616d65120d0a0b0a000a036100620a02"
    "fffe0a140a08d0bad0bbd18ed187120812060a04c3f54840",
};

Test(io_example_write, bytes_equal_python_protobuf)
{
    tl_example_builder *b;
    ASSERT_OK(tl_example_builder_create(&b));
    for (int which = 0; which < 3; which++) {
        build(b, which);
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_example_builder_serialize(b, &rec, &len));
        char *h = hex(rec, len);
        cr_assert_str_eq(h, EXPECTED_HEX[which], "example %d", which);
        free(h);
    }
    tl_example_builder_destroy(b);
}

/* Runs protoc and Python now, for all four examples. Skipped (and said so)
 * where either is missing, so the suite stays runnable on a bare machine;
 * the fixed bytes above hold the first three either way. */
Test(io_example_write, bytes_equal_python_protobuf_live)
{
    if (access("/usr/bin/python3", X_OK) != 0 || system("command -v protoc >/dev/null 2>&1") != 0)
        cr_skip_test("protoc or /usr/bin/python3 is not installed");
    char dir[] = "/tmp/tpuloop-pb-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cmd[1024], script[600];
    snprintf(script, sizeof script, "%s/make.py", dir);
    FILE *f = fopen(script, "w");
    cr_assert_not_null(f);
    fputs(PY_SCRIPT, f);
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "protoc --python_out=%s -Iproto proto/tpuloop/example.proto 2>&1", dir);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s 2>/dev/null", script, dir);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    static char line[1 << 16];
    tl_example_builder *b;
    ASSERT_OK(tl_example_builder_create(&b));
    int which = 0;
    while (fgets(line, sizeof line, p) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        cr_assert_lt(which, 4);
        build(b, which);
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_example_builder_serialize(b, &rec, &len));
        char *h = hex(rec, len);
        cr_assert_str_eq(h, line, "example %d differs from Python's", which);
        free(h);
        which++;
    }
    int rc = pclose(p);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    if (rc != 0 && which == 0)
        cr_skip_test("/usr/bin/python3 cannot import google.protobuf");
    cr_assert_eq(which, 4, "Python printed %d examples", which);
    tl_example_builder_destroy(b);
}

/* ---- round trips -------------------------------------------------------- */

Test(io_example_write, round_trip_every_value_bit_for_bit)
{
    tl_example_builder *b;
    ASSERT_OK(tl_example_builder_create(&b));
    build(b, 2);
    cr_assert_eq(tl_example_builder_count(b), 8u);
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_example_builder_serialize(b, &rec, &len));
    tl_example *ex;
    ASSERT_OK(tl_example_parse(rec, len, 5, &ex));
    size_t n;
    const tl_feature *fs = tl_example_features(ex, &n);
    cr_assert_eq(n, 8u);
    /* Sorted by key in strcmp order: uppercase first, the UTF-8 key last. */
    static const char *const keys[8] = {"Z", "e_bytes", "e_floats", "empty", "image", "label", "name", KEY_RU};
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(fs[i].key, keys[i]);
    const tl_feature *img = tl_example_find(ex, "image");
    cr_assert_eq(img->kind, TL_FEATURE_FLOAT);
    cr_assert_eq(img->count, 7u);
    for (int i = 0; i < 7; i++)
        cr_assert_eq(bits_of(img->floats[i]), IMAGE_BITS[i], "image[%d]: %08x", i, bits_of(img->floats[i]));
    const tl_feature *lab = tl_example_find(ex, "label");
    cr_assert_eq(lab->kind, TL_FEATURE_INT64);
    cr_assert_eq(lab->count, 5u);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(lab->int64s[i], LABELS[i]);
    const tl_feature *nm = tl_example_find(ex, "name");
    cr_assert_eq(nm->kind, TL_FEATURE_BYTES);
    cr_assert_eq(nm->count, 3u);
    cr_assert_eq(nm->bytes[0].len, 0u);
    cr_assert_eq(nm->bytes[1].len, 3u);
    cr_assert(memcmp(nm->bytes[1].data, "a\0b", 3) == 0);
    cr_assert(memcmp(nm->bytes[2].data, "\xff\xfe", 2) == 0);
    cr_assert_eq(tl_example_find(ex, "empty")->kind, TL_FEATURE_NONE);
    cr_assert_eq(tl_example_find(ex, "e_floats")->kind, TL_FEATURE_FLOAT);
    cr_assert_eq(tl_example_find(ex, "e_floats")->count, 0u);
    cr_assert_eq(tl_example_find(ex, "e_bytes")->kind, TL_FEATURE_BYTES);
    cr_assert_eq(tl_example_find(ex, "Z")->int64s[0], 300);
    tl_example_destroy(ex);
    tl_example_builder_destroy(b);
}

Test(io_example_write, reuse_reset_and_serialize_twice)
{
    tl_example_builder *b;
    ASSERT_OK(tl_example_builder_create(&b));
    build(b, 3);
    const uint8_t *rec;
    size_t len, len2;
    ASSERT_OK(tl_example_builder_serialize(b, &rec, &len));
    char *first = hex(rec, len);
    ASSERT_OK(tl_example_builder_serialize(b, &rec, &len2));
    char *again = hex(rec, len2);
    cr_assert_str_eq(first, again);
    /* A smaller example after a larger one: nothing of the old one remains. */
    build(b, 1);
    ASSERT_OK(tl_example_builder_serialize(b, &rec, &len));
    char *h = hex(rec, len);
    cr_assert_str_eq(h, EXPECTED_HEX[1]);
    tl_example_builder_reset(b);
    cr_assert_eq(tl_example_builder_count(b), 0u);
    ASSERT_OK(tl_example_builder_serialize(b, &rec, &len));
    cr_assert_eq(len, 2u);
    cr_assert(memcmp(rec, "\x0a\x00", 2) == 0);
    free(first);
    free(again);
    free(h);
    tl_example_builder_destroy(b);
}

/* The values are copied when added: the caller may overwrite them at once. */
Test(io_example_write, values_are_copied)
{
    tl_example_builder *b;
    ASSERT_OK(tl_example_builder_create(&b));
    char key[8] = "k";
    int64_t v[2] = {7, 8};
    uint8_t raw[2] = {'x', 'y'};
    tl_bytes bv = {raw, 2};
    ASSERT_OK(tl_example_builder_add_int64s(b, key, v, 2));
    key[0] = 'j';
    ASSERT_OK(tl_example_builder_add_bytes(b, key, &bv, 1));
    v[0] = -1;
    raw[0] = 'z';
    key[0] = 'q';
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_example_builder_serialize(b, &rec, &len));
    tl_example *ex;
    ASSERT_OK(tl_example_parse(rec, len, 0, &ex));
    cr_assert_eq(tl_example_find(ex, "k")->int64s[0], 7);
    cr_assert(memcmp(tl_example_find(ex, "j")->bytes[0].data, "xy", 2) == 0);
    cr_assert_null(tl_example_find(ex, "q"));
    tl_example_destroy(ex);
    tl_example_builder_destroy(b);
}

/* Every record of the external tf.Example files (TensorFlow's writer,
 * lingvo's, TFX's), parsed and rebuilt, parses to the same features; a
 * record with one feature is rebuilt byte for byte (with several, the file's
 * key order is arbitrary and ours is sorted). */
static void rebuild_file(const char *path, size_t want_records)
{
    tl_tfrecord_zreader *z;
    ASSERT_OK(tl_tfrecord_zreader_open(path, TL_TFRECORD_AUTO, &z));
    tl_tfrecord_reader *r = tl_tfrecord_zreader_records(z);
    tl_example_builder *b;
    ASSERT_OK(tl_example_builder_create(&b));
    const uint8_t *rec;
    size_t n, count = 0, same_bytes = 0;
    while (tl_tfrecord_next(r, &rec, &n) == TL_OK && rec != NULL) {
        tl_example *a, *c;
        ASSERT_OK(tl_example_parse(rec, n, count, &a));
        size_t nf;
        const tl_feature *fs = tl_example_features(a, &nf);
        tl_example_builder_reset(b);
        for (size_t i = 0; i < nf; i++) {
            const tl_feature *f = &fs[i];
            if (f->kind == TL_FEATURE_FLOAT)
                ASSERT_OK(tl_example_builder_add_floats(b, f->key, f->floats, f->count));
            else if (f->kind == TL_FEATURE_INT64)
                ASSERT_OK(tl_example_builder_add_int64s(b, f->key, f->int64s, f->count));
            else if (f->kind == TL_FEATURE_BYTES)
                ASSERT_OK(tl_example_builder_add_bytes(b, f->key, f->bytes, f->count));
            else
                ASSERT_OK(tl_example_builder_add_empty(b, f->key));
        }
        const uint8_t *out;
        size_t len;
        ASSERT_OK(tl_example_builder_serialize(b, &out, &len));
        if (nf == 1) {
            cr_assert_eq(len, n, "%s record %zu", path, count);
            cr_assert(memcmp(out, rec, n) == 0, "%s record %zu", path, count);
            same_bytes++;
        }
        ASSERT_OK(tl_example_parse(out, len, count, &c));
        size_t nc;
        const tl_feature *gs = tl_example_features(c, &nc);
        cr_assert_eq(nc, nf);
        for (size_t i = 0; i < nf; i++) {
            cr_assert_str_eq(gs[i].key, fs[i].key);
            cr_assert_eq(gs[i].kind, fs[i].kind);
            cr_assert_eq(gs[i].count, fs[i].count);
            for (size_t k = 0; k < fs[i].count; k++) {
                if (fs[i].kind == TL_FEATURE_FLOAT)
                    cr_assert_eq(bits_of(gs[i].floats[k]), bits_of(fs[i].floats[k]));
                else if (fs[i].kind == TL_FEATURE_INT64)
                    cr_assert_eq(gs[i].int64s[k], fs[i].int64s[k]);
                else
                    cr_assert(gs[i].bytes[k].len == fs[i].bytes[k].len &&
                              memcmp(gs[i].bytes[k].data, fs[i].bytes[k].data, fs[i].bytes[k].len) == 0);
            }
        }
        tl_example_destroy(a);
        tl_example_destroy(c);
        count++;
    }
    cr_assert_eq(count, want_records, "%s: %s", path, tl_last_error());
    if (strstr(path, "singles"))
        cr_assert_eq(same_bytes, 3u);
    tl_example_builder_destroy(b);
    tl_tfrecord_zreader_destroy(z);
}

Test(io_example_write, external_files_rebuild)
{
    rebuild_file(EXTERNAL "/pwnall-tfrecord/singles.tfrecords", 3);
    rebuild_file(EXTERNAL "/lingvo/wmt14_ende_wpm_32k_test.tfrecord", 100);
    rebuild_file(EXTERNAL "/tfx/penguin-Split-eval-data_tfrecord-00000-of-00001.gz", 100);
}

/* ---- errors ------------------------------------------------------------- */

Test(io_example_write, bad_calls_are_named)
{
    tl_example_builder *b;
    const float one = 1.0f;
    ASSERT_ERR(tl_example_builder_create(NULL), TL_EINVAL, "out is NULL");
    ASSERT_OK(tl_example_builder_create(&b));
    ASSERT_ERR(tl_example_builder_add_floats(NULL, "x", &one, 1), TL_EINVAL, "the builder is NULL");
    ASSERT_ERR(tl_example_builder_add_floats(b, NULL, &one, 1), TL_EINVAL, "key is NULL");
    ASSERT_ERR(tl_example_builder_add_floats(b, "", &one, 1), TL_EINVAL, "the feature key is empty");
    ASSERT_ERR(tl_example_builder_add_int64s(b, "x", NULL, 2), TL_EINVAL, "feature \"x\": values is NULL but count is 2");
    const tl_bytes bad = {NULL, 3};
    ASSERT_ERR(tl_example_builder_add_bytes(b, "y", &bad, 1), TL_EINVAL, "value 0 has NULL data and length 3");
    cr_assert_eq(tl_example_builder_count(b), 0u, "a failed add adds nothing");
    ASSERT_OK(tl_example_builder_add_floats(b, "dup", &one, 1));
    ASSERT_OK(tl_example_builder_add_empty(b, "other"));
    ASSERT_OK(tl_example_builder_add_int64s(b, "dup", NULL, 0));
    const uint8_t *rec;
    size_t len;
    ASSERT_ERR(tl_example_builder_serialize(b, &rec, &len), TL_EINVAL, "feature \"dup\" was added twice");
    ASSERT_ERR(tl_example_builder_serialize(b, NULL, &len), TL_EINVAL, "data is NULL");
    ASSERT_ERR(tl_example_builder_serialize(NULL, &rec, &len), TL_EINVAL, "the builder is NULL");
    tl_example_builder_reset(b);
    ASSERT_OK(tl_example_builder_serialize(b, &rec, &len));
    tl_example_builder_destroy(b);
    tl_example_builder_destroy(NULL);
}

static tl_status oom_sequence(void *ctx)
{
    (void)ctx;
    tl_example_builder *b = NULL;
    tl_status st = tl_example_builder_create(&b);
    const tl_bytes v[2] = {{(const uint8_t *)"ab", 2}, {(const uint8_t *)"c", 1}};
    const float fl[3] = {1, 2, 3};
    const uint8_t *rec;
    size_t len;
    for (int round = 0; round < 2 && st == TL_OK; round++) {
        tl_example_builder_reset(b);
        if (st == TL_OK)
            st = tl_example_builder_add_floats(b, "f", fl, 3);
        if (st == TL_OK)
            st = tl_example_builder_add_bytes(b, "b", v, 2);
        if (st == TL_OK)
            st = tl_example_builder_add_empty(b, "e");
        if (st == TL_OK)
            st = tl_example_builder_serialize(b, &rec, &len);
    }
    tl_example_builder_destroy(b);
    return st;
}

Test(io_example_write, allocation_failures_unwind)
{
    cr_assert_geq(tu_oom_sweep(oom_sequence, NULL, "build and serialize"), 1);
}

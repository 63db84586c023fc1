/* Checkpoint files: round trips of every dtype and shape (scalars and empty
 * tensors too), the byte layout the safetensors format prescribes, the
 * writer's argument checks, an allocation-failure sweep, and NumPy reading
 * what tpuloop wrote (and tpuloop reading what NumPy wrote) through
 * tests/ref/ckpt_ref.py. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_io_ckpt_util.h"
#include "testutil.h"
#include "tpuloop/checkpoint.h"

#define PYTHON "/usr/bin/python3"
#define SCRIPT "tests/ref/ckpt_ref.py"

/* A tensor of the round trip: deterministic bytes of every dtype. */
typedef struct rt_tensor {
    char name[32];
    tl_ckpt_dtype dt;
    int rank;
    int64_t shape[4];
    unsigned char *data;
    size_t bytes;
} rt_tensor;

static const int64_t rt_shapes[][5] = {
    /* rank, dims */
    {0}, {1, 0}, {1, 7}, {2, 3, 4}, {3, 3, 0, 2}, {4, 2, 1, 3, 2},
};

/* Element i of a tensor of dt: varied bytes, and for float dtypes finite
 * values with a few signs and magnitudes. */
static void rt_fill(rt_tensor *t, unsigned seed)
{
    size_t es = tl_ckpt_dtype_size(t->dt), n = t->bytes / es;
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = t->data + i * es;
        unsigned v = seed * 2654435761u + (unsigned)i * 40503u;
        if (t->dt == TL_CKPT_F32) {
            float f = (float)((int)(v % 2001) - 1000) / 7.0f;
            memcpy(p, &f, 4);
        } else if (t->dt == TL_CKPT_F64) {
            double d = ((int)(v % 200001) - 100000) / 13.0;
            memcpy(p, &d, 8);
        } else if (t->dt == TL_CKPT_BOOL) {
            p[0] = (unsigned char)(v & 1);
        } else if (t->dt == TL_CKPT_U64 || t->dt == TL_CKPT_I64) {
            int64_t x = (int64_t)((uint64_t)v << 20) - (t->dt == TL_CKPT_I64 ? (int64_t)1 << 40 : 0);
            memcpy(p, &x, 8);
        } else {
            for (size_t b = 0; b < es; b++)
                p[b] = (unsigned char)(v >> (8 * b));
        }
    }
}

/* Every dtype in every shape of rt_shapes, named "<dtype>/<shape index>". */
static rt_tensor *rt_make(int *count)
{
    int ns = (int)(sizeof rt_shapes / sizeof rt_shapes[0]);
    rt_tensor *v = calloc((size_t)(TL_CKPT_NUM_DTYPES * ns), sizeof *v);
    cr_assert_not_null(v);
    int k = 0;
    for (int d = 0; d < TL_CKPT_NUM_DTYPES; d++)
        for (int s = 0; s < ns; s++, k++) {
            rt_tensor *t = &v[k];
            t->dt = (tl_ckpt_dtype)d;
            t->rank = (int)rt_shapes[s][0];
            size_t n = 1;
            for (int i = 0; i < t->rank; i++)
                n *= (size_t)(t->shape[i] = rt_shapes[s][i + 1]);
            t->bytes = n * tl_ckpt_dtype_size(t->dt);
            t->data = t->bytes ? malloc(t->bytes) : NULL;
            snprintf(t->name, sizeof t->name, "%s/%d", tl_ckpt_dtype_name(t->dt), s);
            if (t->bytes)
                rt_fill(t, (unsigned)k);
        }
    *count = k;
    return v;
}

static void rt_free(rt_tensor *v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i].data);
    free(v);
}

static void rt_write(const rt_tensor *v, int n, const char *path)
{
    tl_ckpt_writer *w;
    ASSERT_OK(tl_ckpt_writer_create(&w));
    for (int i = 0; i < n; i++)
        ASSERT_OK(tl_ckpt_writer_add(w, v[i].name, v[i].dt, v[i].shape, v[i].rank, v[i].data));
    ASSERT_OK(tl_ckpt_writer_set_meta(w, "global_step", "200"));
    ASSERT_OK(tl_ckpt_writer_set_meta(w, "note", "ünïcödé ✓"));
    ASSERT_OK(tl_ckpt_writer_write(w, path));
    tl_ckpt_writer_destroy(w);
}

Test(io_ckpt, dtype_names_and_sizes)
{
    static const char *names[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
                                  "BF16", "I32", "U32", "F32", "I64",     "U64",     "F64"};
    static const size_t sizes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    for (int d = 0; d < TL_CKPT_NUM_DTYPES; d++) {
        cr_assert_str_eq(tl_ckpt_dtype_name((tl_ckpt_dtype)d), names[d]);
        cr_assert_eq(tl_ckpt_dtype_size((tl_ckpt_dtype)d), sizes[d]);
        tl_ckpt_dtype back;
        ASSERT_OK(tl_ckpt_dtype_parse(names[d], &back));
        cr_assert_eq(back, (tl_ckpt_dtype)d);
    }
    tl_ckpt_dtype dt;
    ASSERT_ERR(tl_ckpt_dtype_parse("f32", &dt), TL_EINVAL, "dtype 'f32' is unknown");
    cr_assert_eq(tl_ckpt_dtype_size(TL_CKPT_NUM_DTYPES), 0);
    cr_assert_str_eq(tl_ckpt_dtype_name((tl_ckpt_dtype)99), "?");
}

Test(io_ckpt, round_trip_of_every_dtype_and_shape)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "all.safetensors");
    int n;
    rt_tensor *v = rt_make(&n);
    rt_write(v, n, path);

    tl_ckpt_reader *r;
    ASSERT_OK(tl_ckpt_open(path, 0, &r));
    cr_assert_eq(tl_ckpt_num_tensors(r), n);
    cr_assert_eq(tl_ckpt_checksums(r), 3u);
    cr_assert_str_eq(tl_ckpt_meta(r, "global_step"), "200");
    cr_assert_str_eq(tl_ckpt_meta(r, "note"), "ünïcödé ✓");
    cr_assert_str_eq(tl_ckpt_meta(r, "format"), "tpuloop-ckpt");
    cr_assert_str_eq(tl_ckpt_meta(r, "format_version"), "1");
    cr_assert_null(tl_ckpt_meta(r, "absent"));
    for (int i = 0; i < n; i++) {
        tl_ckpt_tensor_info t;
        ASSERT_OK(tl_ckpt_find(r, v[i].name, &t));
        cr_assert_eq(t.dtype, v[i].dt, "%s", v[i].name);
        cr_assert_eq(t.rank, v[i].rank, "%s", v[i].name);
        for (int d = 0; d < t.rank; d++)
            cr_assert_eq(t.shape[d], v[i].shape[d], "%s dim %d", v[i].name, d);
        cr_assert_eq(t.bytes, v[i].bytes, "%s", v[i].name);
        if (v[i].bytes) {
            cr_assert_eq(memcmp(t.data, v[i].data, v[i].bytes), 0, "%s data", v[i].name);
            /* mapped tensors are aligned to their element size */
            cr_assert_eq((uintptr_t)t.data % tl_ckpt_dtype_size(t.dtype), 0, "%s alignment", v[i].name);
        } else {
            cr_assert_null(t.data, "%s", v[i].name);
        }
    }
    /* index order is the file's: offsets ascending, element sizes descending,
     * and within one size the order of adding */
    uint64_t at = 0;
    size_t last_size = 8;
    for (int i = 0; i < n; i++) {
        tl_ckpt_tensor_info t;
        ASSERT_OK(tl_ckpt_tensor(r, i, &t));
        cr_assert_eq(t.offset, at, "tensor %d (%s) at %llu", i, t.name, (unsigned long long)t.offset);
        cr_assert_leq(tl_ckpt_dtype_size(t.dtype), last_size, "%s out of alignment order", t.name);
        last_size = tl_ckpt_dtype_size(t.dtype);
        at += t.bytes;
    }
    tl_ckpt_tensor_info t;
    ASSERT_ERR(tl_ckpt_tensor(r, n, &t), TL_EINVAL, "tensor index");
    ASSERT_ERR(tl_ckpt_find(r, "nope", &t), TL_ENOTFOUND, "no tensor 'nope'");
    cr_assert(strstr(tl_last_error(), path) != NULL);
    tl_ckpt_close(r);
    rt_free(v, n);
    ck_rmtree(dir);
    free(path);
    free(dir);
}

/* The bytes on disk, field by field, as the format says. */
Test(io_ckpt, byte_layout)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "s.safetensors");
    ck_sample_write(path, 3);
    size_t len;
    unsigned char *b = ck_read(path, &len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | b[i];
    cr_assert_eq(n % 8, 0, "header length %llu is not a multiple of 8", (unsigned long long)n);
    cr_assert_leq(8 + n, len);
    cr_assert_eq(b[8], '{');
    size_t end = 8 + n;
    while (b[end - 1] == ' ')
        end--;
    cr_assert_eq(b[end - 1], '}');
    cr_assert_lt(8 + n - end, 8, "more than 7 padding bytes");
    /* __metadata__ comes first, as the reference writer puts it */
    static const char head[] = "{\"__metadata__\":{\"format\":\"tpuloop-ckpt\",\"format_version\":\"1\",\"crc32c\":\"";
    cr_assert_eq(memcmp(b + 8, head, sizeof head - 1), 0, "header starts: %.80s", b + 8);
    json_error_t e;
    json_t *h = json_loadb((const char *)b + 8, n, 0, &e);
    cr_assert_not_null(h, "%s", e.text);
    /* the data section holds exactly the tensors: 8 + 24 + 80 + 7 bytes */
    cr_assert_eq(len - 8 - n, 8 + 24 + 80 + 7);
    json_t *k = json_object_get(h, "dense/kernel");
    cr_assert_str_eq(json_string_value(json_object_get(k, "dtype")), "F32");
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(k, "shape"), 1)), 5);
    /* F64 and I64 first (added order), then F32, then U8, I32 empty last of the 4-byte group */
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(json_object_get(h, "dense/bias"), "data_offsets"), 0)), 0);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(json_object_get(h, "global_step"), "data_offsets"), 0)), 24);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(k, "data_offsets"), 0)), 32);
    json_t *empty = json_object_get(h, "empty");
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(empty, "data_offsets"), 0)), 112);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(empty, "data_offsets"), 1)), 112);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(h, "global_step"), "shape")), 0);
    json_decref(h);
    free(b);
    ck_rmtree(dir);
    free(path);
    free(dir);
}

Test(io_ckpt, writer_rejects_bad_arguments)
{
    tl_ckpt_writer *w;
    ASSERT_OK(tl_ckpt_writer_create(&w));
    float x[2] = {1, 2};
    int64_t s2[1] = {2};
    ASSERT_ERR(tl_ckpt_writer_add(w, "", TL_CKPT_F32, s2, 1, x), TL_EINVAL, "non-empty");
    ASSERT_ERR(tl_ckpt_writer_add(w, "__metadata__", TL_CKPT_F32, s2, 1, x), TL_EINVAL, "reserved");
    ASSERT_ERR(tl_ckpt_writer_add(w, "bad\xff", TL_CKPT_F32, s2, 1, x), TL_EINVAL, "UTF-8");
    ASSERT_ERR(tl_ckpt_writer_add(w, "a", (tl_ckpt_dtype)77, s2, 1, x), TL_EINVAL, "dtype 77");
    ASSERT_ERR(tl_ckpt_writer_add(w, "a", TL_CKPT_F32, s2, -1, x), TL_EINVAL, "rank must be in [0, 64], got -1");
    ASSERT_ERR(tl_ckpt_writer_add(w, "a", TL_CKPT_F32, s2, 65, x), TL_EINVAL, "got 65");
    ASSERT_ERR(tl_ckpt_writer_add(w, "a", TL_CKPT_F32, (int64_t[]){-2}, 1, x), TL_EINVAL, "shape[0] must be >= 0, got -2");
    ASSERT_ERR(tl_ckpt_writer_add(w, "a", TL_CKPT_F64, (int64_t[]){INT64_MAX, 4}, 2, x), TL_EINVAL, "overflows");
    ASSERT_ERR(tl_ckpt_writer_add(w, "a", TL_CKPT_F32, s2, 1, NULL), TL_EINVAL, "data is NULL for 8 bytes");
    ASSERT_ERR(tl_ckpt_writer_add(w, "a", TL_CKPT_F32, NULL, 1, x), TL_EINVAL, "shape is NULL");
    ASSERT_OK(tl_ckpt_writer_add(w, "a", TL_CKPT_F32, s2, 1, x));
    ASSERT_ERR(tl_ckpt_writer_add(w, "a", TL_CKPT_I32, s2, 1, x), TL_EINVAL, "'a' was already added");
    ASSERT_OK(tl_ckpt_writer_add(w, "a_zero", TL_CKPT_F32, (int64_t[]){0, INT64_MAX}, 2, NULL));
    for (const char *const *k = (const char *const[]){"format", "format_version", "crc32c", "header_crc32c", NULL}; *k;
         k++)
        ASSERT_ERR(tl_ckpt_writer_set_meta(w, *k, "x"), TL_EINVAL, "written by tpuloop itself");
    ASSERT_ERR(tl_ckpt_writer_set_meta(w, "", "x"), TL_EINVAL, "non-empty");
    ASSERT_ERR(tl_ckpt_writer_set_meta(w, "k", "\xc0\x80"), TL_EINVAL, "UTF-8"); /* overlong NUL */
    ASSERT_OK(tl_ckpt_writer_set_meta(w, "k", "1"));
    ASSERT_OK(tl_ckpt_writer_set_meta(w, "k", "2")); /* replaces */
    ASSERT_ERR(tl_ckpt_writer_write(w, "/nonexistent-dir-tpuloop/x.safetensors"), TL_EIO,
               "/nonexistent-dir-tpuloop/x.safetensors.tmp-");
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "w.safetensors");
    ASSERT_OK(tl_ckpt_writer_write(w, path));
    tl_ckpt_reader *r;
    ASSERT_OK(tl_ckpt_open(path, 0, &r));
    cr_assert_str_eq(tl_ckpt_meta(r, "k"), "2");
    cr_assert_eq(tl_ckpt_num_meta(r), 5);
    const char *key, *val;
    tl_ckpt_meta_at(r, 4, &key, &val);
    cr_assert_str_eq(key, "k");
    tl_ckpt_meta_at(r, 5, &key, &val);
    cr_assert_null(key);
    tl_ckpt_close(r);
    tl_ckpt_writer_destroy(w);
    tl_ckpt_writer_destroy(NULL);
    tl_ckpt_close(NULL);
    ck_rmtree(dir);
    free(path);
    free(dir);
}

/* A header the readers would refuse (over 100 MB: tpuloop's reader and
 * Python's safetensors both stop there) is refused before anything is
 * written, naming the limit and what takes the room; the same bytes as a
 * tensor are a valid checkpoint whose header stays small. */
Test(io_ckpt, a_header_over_the_readers_limit_is_refused_up_front)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "big.safetensors");
    float x[2] = {1, 2};
    /* over the limit by its raw text alone */
    size_t n = (size_t)TL_CKPT_MAX_HEADER + 1;
    char *big = malloc(n + 1);
    cr_assert_not_null(big);
    memset(big, 'a', n);
    big[n] = '\0';
    tl_ckpt_writer *w;
    ASSERT_OK(tl_ckpt_writer_create(&w));
    ASSERT_OK(tl_ckpt_writer_add(w, "x", TL_CKPT_F32, (int64_t[]){2}, 1, x));
    ASSERT_OK(tl_ckpt_writer_set_meta(w, "positions", big));
    ASSERT_ERR(tl_ckpt_writer_write(w, path), TL_EINVAL,
               "the header would be more than 100000011 bytes, over the limit of 100000000 bytes that checkpoint "
               "readers accept (TL_CKPT_MAX_HEADER");
    cr_assert(strstr(tl_last_error(), "its largest part is metadata 'positions' (100000001 bytes)") != NULL, "%s",
              tl_last_error());
    cr_assert_eq(access(path, F_OK), -1, "nothing is written");
    cr_assert_eq(ck_count_temps(dir), 0);
    tl_ckpt_writer_destroy(w);
    /* under the limit as text, over it as JSON: every quote is escaped */
    n = (size_t)TL_CKPT_MAX_HEADER / 2 + 16;
    memset(big, '"', n);
    big[n] = '\0';
    ASSERT_OK(tl_ckpt_writer_create(&w));
    ASSERT_OK(tl_ckpt_writer_set_meta(w, "quotes", big));
    ASSERT_ERR(tl_ckpt_writer_write(w, path), TL_EINVAL, "over the limit of 100000000 bytes");
    cr_assert(strstr(tl_last_error(), "more than") == NULL, "the exact size: %s", tl_last_error());
    cr_assert_eq(access(path, F_OK), -1, "nothing is written");
    tl_ckpt_writer_destroy(w);
    /* the same bytes as a U8 tensor */
    ASSERT_OK(tl_ckpt_writer_create(&w));
    int64_t len = (int64_t)n;
    ASSERT_OK(tl_ckpt_writer_add(w, "quotes", TL_CKPT_U8, &len, 1, big));
    ASSERT_OK(tl_ckpt_writer_write(w, path));
    tl_ckpt_writer_destroy(w);
    free(big);
    size_t flen;
    unsigned char *file = ck_read(path, &flen);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | file[i];
    cr_assert_lt(hlen, 1024, "a %llu-byte header", (unsigned long long)hlen);
    free(file);
    tl_ckpt_reader *r;
    ASSERT_OK(tl_ckpt_open(path, 0, &r));
    tl_ckpt_tensor_info t;
    ASSERT_OK(tl_ckpt_find(r, "quotes", &t));
    cr_assert_eq(t.bytes, (uint64_t)n);
    tl_ckpt_close(r);
    ck_rmtree(dir);
    free(path);
    free(dir);
}

/* Many tensors: the writer's name table grows, and lookups stay right. */
Test(io_ckpt, thousands_of_tensors)
{
    enum { N = 3000 };
    static int32_t vals[N];
    tl_ckpt_writer *w;
    ASSERT_OK(tl_ckpt_writer_create(&w));
    char name[32];
    for (int i = 0; i < N; i++) {
        vals[i] = i * 7 - 5;
        snprintf(name, sizeof name, "layer_%d/w", (i * 7919) % N);
        ASSERT_OK(tl_ckpt_writer_add(w, name, TL_CKPT_I32, NULL, 0, &vals[i]));
    }
    ASSERT_ERR(tl_ckpt_writer_add(w, "layer_0/w", TL_CKPT_I32, NULL, 0, vals), TL_EINVAL, "already added");
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "many.safetensors");
    ASSERT_OK(tl_ckpt_writer_write(w, path));
    tl_ckpt_writer_destroy(w);
    tl_ckpt_reader *r;
    ASSERT_OK(tl_ckpt_open(path, 0, &r));
    cr_assert_eq(tl_ckpt_num_tensors(r), N);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "layer_%d/w", (i * 7919) % N);
        tl_ckpt_tensor_info t;
        ASSERT_OK(tl_ckpt_find(r, name, &t));
        cr_assert_eq(*(const int32_t *)t.data, vals[i], "%s", name);
    }
    tl_ckpt_close(r);
    ck_rmtree(dir);
    free(path);
    free(dir);
}

static tl_status oom_sequence(void *ctx)
{
    const char *path = ctx;
    static float k[6] = {1, 2, 3, 4, 5, 6};
    tl_ckpt_writer *w;
    tl_status st = tl_ckpt_writer_create(&w);
    if (st != TL_OK)
        return st;
    st = tl_ckpt_writer_add(w, "k", TL_CKPT_F32, (int64_t[]){2, 3}, 2, k);
    if (st == TL_OK)
        st = tl_ckpt_writer_add(w, "s", TL_CKPT_F32, NULL, 0, k);
    if (st == TL_OK)
        st = tl_ckpt_writer_set_meta(w, "m", "v");
    if (st == TL_OK)
        st = tl_ckpt_writer_write(w, path);
    tl_ckpt_writer_destroy(w);
    tl_ckpt_reader *r = NULL;
    if (st == TL_OK)
        st = tl_ckpt_open(path, 0, &r);
    tl_ckpt_tensor_info t;
    if (st == TL_OK)
        st = tl_ckpt_find(r, "k", &t);
    if (st == TL_OK && memcmp(t.data, k, sizeof k) != 0)
        st = TL_ERUNTIME; /* read back different data */
    tl_ckpt_close(r);
    return st;
}

Test(io_ckpt, allocation_failures_unwind)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "oom.safetensors");
    tu_oom_sweep(oom_sequence, path, "write and read a checkpoint");
    cr_assert_eq(ck_count_temps(dir), 0, "a failed write left a temporary file");
    ck_rmtree(dir);
    free(path);
    free(dir);
}

/* Runs the reference script; returns its JSON output line. */
static json_t *run_ref(const char *args)
{
    cr_assert(access(SCRIPT, R_OK) == 0, "%s is missing: run the tests from the repository root (make test does)",
              SCRIPT);
    /* TPULOOP_REF_PYTHON may name another interpreter with NumPy, such as a
     * virtual environment that has the safetensors package */
    const char *py = getenv("TPULOOP_REF_PYTHON") ? getenv("TPULOOP_REF_PYTHON") : PYTHON;
    cr_assert(access(py, X_OK) == 0, "%s is missing: the reference needs Debian's python3 with numpy", py);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s %s", py, SCRIPT, args);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    int status = pclose(f);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    cr_assert_not_null(j, "%s printed no JSON (status %d): %s", SCRIPT, status, out);
    cr_assert(json_is_true(json_object_get(j, "ok")), "%s: %s", cmd, out);
    cr_assert_eq(status, 0, "%s: status %d", cmd, status);
    return j;
}

/* The values of t as the JSON numbers the script compares: floats as the
 * exact doubles of their values, F16/BF16/F8 as bit patterns. */
static json_t *values_json(const rt_tensor *t)
{
    json_t *a = json_array();
    size_t es = tl_ckpt_dtype_size(t->dt), n = t->bytes / es;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = t->data + i * es;
        json_t *v;
        if (t->dt == TL_CKPT_F32) {
            float f;
            memcpy(&f, p, 4);
            v = json_real(f);
        } else if (t->dt == TL_CKPT_F64) {
            double d;
            memcpy(&d, p, 8);
            v = json_real(d);
        } else if (t->dt == TL_CKPT_I8) {
            v = json_integer((int8_t)p[0]);
        } else if (t->dt == TL_CKPT_I16 || t->dt == TL_CKPT_I32 || t->dt == TL_CKPT_I64) {
            int64_t x = 0;
            memcpy(&x, p, es);
            if (es < 8 && (x >> (8 * es - 1)) & 1)
                x -= (int64_t)1 << (8 * es); /* sign-extend */
            v = json_integer(x);
        } else {
            uint64_t x = 0;
            memcpy(&x, p, es);
            v = json_integer((json_int_t)x); /* test values stay below 2^63 */
        }
        json_array_append_new(a, v);
    }
    return a;
}

Test(io_ckpt, numpy_reads_every_tensor)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "np.safetensors");
    char *want = ck_join(dir, "expected.json");
    int n;
    rt_tensor *v = rt_make(&n);
    rt_write(v, n, path);
    json_t *exp = json_pack("{s:{s:s,s:s}}", "metadata", "global_step", "200", "note", "ünïcödé ✓");
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < v[i].rank; d++)
            json_array_append_new(shape, json_integer(v[i].shape[d]));
        json_array_append_new(arr, json_pack("{s:s,s:s,s:o,s:o}", "name", v[i].name, "dtype",
                                             tl_ckpt_dtype_name(v[i].dt), "shape", shape, "values", values_json(&v[i])));
    }
    json_object_set_new(exp, "tensors", arr);
    cr_assert_eq(json_dump_file(exp, want, JSON_COMPACT), 0);
    json_decref(exp);
    char args[512];
    snprintf(args, sizeof args, "check %s %s", path, want);
    json_t *res = run_ref(args);
    cr_assert_eq(json_integer_value(json_object_get(res, "tensors")), n);
    cr_log_info("NumPy read %d tensors; the safetensors package: %s", n,
                json_string_value(json_object_get(res, "safetensors")));
    json_decref(res);
    rt_free(v, n);
    ck_rmtree(dir);
    free(want);
    free(path);
    free(dir);
}

/* A file NumPy wrote the way the reference writer lays it out, without
 * tpuloop's metadata: readable only with TL_CKPT_ALLOW_FOREIGN. */
static void check_foreign(const char *path)
{
    tl_ckpt_reader *r;
    ASSERT_ERR(tl_ckpt_open(path, 0, &r), TL_EPARSE, "not a tpuloop checkpoint");
    ASSERT_OK(tl_ckpt_open(path, TL_CKPT_ALLOW_FOREIGN, &r));
    cr_assert_eq(tl_ckpt_checksums(r), 0u);
    cr_assert_str_eq(tl_ckpt_meta(r, "source"), "numpy");
    cr_assert_eq(tl_ckpt_num_tensors(r), 5);
    tl_ckpt_tensor_info t;
    ASSERT_OK(tl_ckpt_find(r, "a_weights", &t));
    cr_assert_eq(t.dtype, TL_CKPT_F32);
    cr_assert_eq(t.rank, 2);
    cr_assert_eq(t.shape[0], 2);
    cr_assert_eq(t.shape[1], 3);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((const float *)t.data)[i], 0.5f * (float)i);
    ASSERT_OK(tl_ckpt_find(r, "b_ids", &t));
    cr_assert_eq(((const int64_t *)t.data)[0], -1);
    cr_assert_eq(((const int64_t *)t.data)[1], (int64_t)1 << 40);
    ASSERT_OK(tl_ckpt_find(r, "c_mask", &t));
    cr_assert_eq(memcmp(t.data, "\1\0\1\1\0", 5), 0);
    ASSERT_OK(tl_ckpt_find(r, "scalar", &t));
    cr_assert_eq(t.rank, 0);
    cr_assert_eq(*(const double *)t.data, 3.141592653589793);
    ASSERT_OK(tl_ckpt_find(r, "empty", &t));
    cr_assert_eq(t.bytes, 0);
    cr_assert_eq(t.shape[0], 0);
    cr_assert_eq(t.shape[1], 4);
    tl_ckpt_close(r);
}

Test(io_ckpt, reads_what_numpy_wrote)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "foreign.safetensors");
    char args[512];
    snprintf(args, sizeof args, "write %s", path);
    json_t *res = run_ref(args);
    check_foreign(path);
    if (strcmp(json_string_value(json_object_get(res, "safetensors")), "written") == 0) {
        char *ref = ck_join(dir, "foreign.safetensors.ref");
        check_foreign(ref);
        free(ref);
    } else {
        cr_log_info("the safetensors package is not installed: only the NumPy-written file was read");
    }
    json_decref(res);
    ck_rmtree(dir);
    free(path);
    free(dir);
}

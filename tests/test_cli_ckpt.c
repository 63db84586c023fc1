/* `tpuloop ckpt list` and `tpuloop ckpt inspect` on checkpoints written
 * here with the checkpoint API, every byte known: what they list and show,
 * how they report corrupt, missing and foreign files, and their exit codes
 * (0 ok, 1 a file that cannot be used, 2 bad arguments). Checkpoints that
 * training writes are listed and inspected in test_cli_resume.c. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_cli_util.h"
#include "tpuloop/tpuloop.h"

/* ---- fixtures ----------------------------------------------------------- */

/* One tensor of every kind inspect converts, with known values. */
typedef struct fixture {
    float kernel[4 * 5];      /* (4, 5) F32 "dense/kernel": k * 0.25 - 2 */
    double bias[3];           /* (3) F64 "dense/bias" */
    float big[100];           /* (10, 10) F32 "big": 0..99 */
    int64_t step;             /* () I64 "global_step" */
    uint16_t half[4];         /* (4) F16: 1, -2, 0.5, inf */
    uint16_t bf[2];           /* (2) BF16: 1, -0.5 */
    uint8_t mask[3];          /* (3) BOOL: 1, 0, 1 */
    uint8_t u8[2];            /* (2) U8: 0, 255 */
    uint8_t e4m3[3];          /* (3) F8_E4M3: 1, -2, NaN */
    uint8_t e5m2[2];          /* (2) F8_E5M2: 1, inf */
    int32_t none[1];          /* (0, 3) I32 "empty" */
} fixture;

static tl_ckpt_writer *fixture_writer(fixture *f, int64_t step)
{
    for (int k = 0; k < 20; k++)
        f->kernel[k] = (float)k * 0.25f - 2.0f;
    f->bias[0] = 0.1;
    f->bias[1] = -2.5;
    f->bias[2] = 1e300;
    for (int k = 0; k < 100; k++)
        f->big[k] = (float)k;
    f->step = step;
    const uint16_t half[4] = {0x3c00, 0xc000, 0x3800, 0x7c00}, bf[2] = {0x3f80, 0xbf00};
    memcpy(f->half, half, sizeof half);
    memcpy(f->bf, bf, sizeof bf);
    const uint8_t mask[3] = {1, 0, 1}, u8[2] = {0, 255}, e4m3[3] = {0x38, 0xc0, 0x7f}, e5m2[2] = {0x3c, 0x7c};
    memcpy(f->mask, mask, 3);
    memcpy(f->u8, u8, 2);
    memcpy(f->e4m3, e4m3, 3);
    memcpy(f->e5m2, e5m2, 2);
    tl_ckpt_writer *w;
    cr_assert_eq(tl_ckpt_writer_create(&w), TL_OK);
    const int64_t s45[2] = {4, 5}, s3[1] = {3}, s1010[2] = {10, 10}, s4[1] = {4}, s2[1] = {2}, s03[2] = {0, 3};
    cr_assert_eq(tl_ckpt_writer_add(w, "dense/kernel", TL_CKPT_F32, s45, 2, f->kernel), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "dense/bias", TL_CKPT_F64, s3, 1, f->bias), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "big", TL_CKPT_F32, s1010, 2, f->big), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "global_step", TL_CKPT_I64, NULL, 0, &f->step), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "half", TL_CKPT_F16, s4, 1, f->half), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "bf", TL_CKPT_BF16, s2, 1, f->bf), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "mask", TL_CKPT_BOOL, s3, 1, f->mask), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "u8", TL_CKPT_U8, s2, 1, f->u8), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "e4m3", TL_CKPT_F8_E4M3, s3, 1, f->e4m3), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "e5m2", TL_CKPT_F8_E5M2, s2, 1, f->e5m2), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "empty", TL_CKPT_I32, s03, 2, f->none), TL_OK);
    cr_assert_eq(tl_ckpt_writer_set_meta(w, "note", "written by test_cli_ckpt"), TL_OK);
    return w;
}

/* A model_dir with checkpoints at steps 10, 20, 30 saved by the manager
 * (so with the index); returns the malloc'd directory. */
static char *fixture_dir(void)
{
    char *dir = tc_tmpdir();
    tl_ckpt_manager *m;
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    cr_assert_eq(tl_ckpt_manager_create(dir, &o, &m), TL_OK, "%s", tl_last_error());
    for (int64_t step = 10; step <= 30; step += 10) {
        fixture f;
        tl_ckpt_writer *w = fixture_writer(&f, step);
        cr_assert_eq(tl_ckpt_manager_save(m, w, step), TL_OK, "%s", tl_last_error());
        tl_ckpt_writer_destroy(w);
    }
    tl_ckpt_manager_destroy(m);
    return dir;
}

static char *ckpt_file(const char *dir, int64_t step)
{
    char *p = malloc(4096);
    cr_assert_not_null(p);
    cr_assert_eq(tl_ckpt_path(dir, step, p, 4096), TL_OK);
    return p;
}

/* Flips one bit of the file's last byte (in the data section). */
static void flip_last_byte(const char *path)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fseek(f, -1, SEEK_END), 0);
    int c = fgetc(f);
    cr_assert_eq(fseek(f, -1, SEEK_END), 0);
    fputc(c ^ 0x10, f);
    cr_assert_eq(fclose(f), 0);
}

static json_t *row_of(json_t *list, int64_t step)
{
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(list, "checkpoints"), i, row)
    if (json_integer_value(json_object_get(row, "step")) == step)
        return row;
    cr_assert_fail("no row for step %lld", (long long)step);
    return NULL;
}

/* ---- ckpt list ---------------------------------------------------------- */

Test(cli_ckpt, list_json_shows_every_checkpoint_its_size_and_the_latest)
{
    char *dir = fixture_dir();
    tc_result r = tc_runf("ckpt list %s --json", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "model_dir")), dir);
    cr_assert_str_eq(json_string_value(json_object_get(j, "index")), "model.ckpt-30");
    cr_assert_eq(json_integer_value(json_object_get(j, "resume_step")), 30);
    cr_assert_eq(json_array_size(json_object_get(j, "checkpoints")), 3u);
    for (int64_t step = 10; step <= 30; step += 10) {
        json_t *row = row_of(j, step);
        char *path = ckpt_file(dir, step);
        char want[64];
        snprintf(want, sizeof want, "model.ckpt-%lld.safetensors", (long long)step);
        cr_assert_str_eq(json_string_value(json_object_get(row, "file")), want);
        cr_assert_str_eq(json_string_value(json_object_get(row, "path")), path);
        cr_assert(json_is_true(json_object_get(row, "valid")));
        cr_assert(json_is_null(json_object_get(row, "error")));
        cr_assert(json_is_true(json_object_get(row, "in_index")));
        cr_assert_eq(json_is_true(json_object_get(row, "latest")), step == 30);
        cr_assert(json_real_value(json_object_get(row, "timestamp")) > 1.6e9, "written now");
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f);
        fseek(f, 0, SEEK_END);
        cr_assert_eq(json_integer_value(json_object_get(row, "bytes")), ftell(f));
        fclose(f);
        free(path);
    }
    json_decref(j);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_ckpt, list_names_a_corrupt_checkpoint_and_what_a_resume_loads)
{
    char *dir = fixture_dir();
    char *p30 = ckpt_file(dir, 30), *p10 = ckpt_file(dir, 10);
    flip_last_byte(p30);
    unlink(p10); /* the index still lists it */
    tc_result r = tc_runf("ckpt list %s --json", dir);
    cr_assert_eq(r.status, 0, "a listing reports problems, it does not fail: %s", r.err);
    json_t *j = tc_json(&r);
    json_t *bad = row_of(j, 30), *gone = row_of(j, 10);
    cr_assert(json_is_false(json_object_get(bad, "valid")));
    cr_assert(json_is_true(json_object_get(bad, "exists")));
    cr_assert(json_is_true(json_object_get(bad, "latest")), "the index still names it");
    const char *why = json_string_value(json_object_get(bad, "error"));
    cr_assert(why != NULL && strstr(why, "checksum mismatch"), "%s", why ? why : "(null)");
    cr_assert(json_is_false(json_object_get(gone, "exists")));
    cr_assert(json_is_false(json_object_get(gone, "valid")));
    cr_assert(json_is_null(json_object_get(gone, "bytes")));
    cr_assert(strstr(json_string_value(json_object_get(gone, "error")), "missing"));
    cr_assert_eq(json_integer_value(json_object_get(j, "resume_step")), 20, "the newest valid one");
    json_decref(j);
    tc_done(&r);

    r = tc_runf("ckpt list %s", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "a resume restores step 20"), "%s", r.out);
    cr_assert(strstr(r.out, "INVALID: data checksum mismatch"), "%s", r.out);
    cr_assert(strstr(r.out, "latest in the index"), "%s", r.out);
    cr_assert(strstr(r.out, "file is missing"), "%s", r.out);
    tc_done(&r);
    free(p30);
    free(p10);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_ckpt, list_without_index_uses_the_files_and_a_bad_index_is_a_warning)
{
    char *dir = fixture_dir();
    char index[4096];
    snprintf(index, sizeof index, "%s/checkpoint", dir);
    unlink(index);
    tc_result r = tc_runf("ckpt list %s --json", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    cr_assert(json_is_null(json_object_get(j, "index")));
    cr_assert(json_is_null(json_object_get(j, "index_error")));
    cr_assert_eq(json_array_size(json_object_get(j, "checkpoints")), 3u);
    cr_assert(json_is_false(json_object_get(row_of(j, 20), "in_index")));
    cr_assert_eq(json_integer_value(json_object_get(j, "resume_step")), 30);
    json_decref(j);
    tc_done(&r);

    FILE *f = fopen(index, "w");
    cr_assert_not_null(f);
    fputs("model_checkpoint_path: \"model.ckpt-30\"\nbogus_field: 1\n", f);
    fclose(f);
    r = tc_runf("ckpt list %s --json", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "warning: ") && strstr(r.err, "bogus_field"), "%s", r.err);
    j = tc_json(&r);
    cr_assert(strstr(json_string_value(json_object_get(j, "index_error")), "bogus_field"));
    cr_assert_eq(json_integer_value(json_object_get(j, "resume_step")), 30);
    json_decref(j);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_ckpt, list_of_an_empty_or_missing_directory)
{
    char *dir = tc_tmpdir();
    tc_result r = tc_runf("ckpt list %s", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "0 checkpoint files") && strstr(r.out, "starts from scratch"), "%s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt list %s --json", dir);
    json_t *j = tc_json(&r);
    cr_assert_eq(json_array_size(json_object_get(j, "checkpoints")), 0u);
    cr_assert(json_is_null(json_object_get(j, "resume_step")));
    json_decref(j);
    tc_done(&r);
    r = tc_runf("ckpt list %s/nope", dir);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "error: ") && strstr(r.err, "/nope"), "%s", r.err);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_ckpt, usage_errors_exit_2)
{
    static const char *const bad[] = {"ckpt", "ckpt frobnicate", "ckpt list", "ckpt list a b",
                                      "ckpt list /tmp --tensor=x", "ckpt inspect", "ckpt inspect f --bogus",
                                      "ckpt inspect f --tensor="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tc_result r = tc_run(NULL, bad[i]);
        cr_assert_eq(r.status, 2, "tpuloop %s: %d\n%s", bad[i], r.status, r.err);
        cr_assert(strncmp(r.err, "error: ", 7) == 0, "%s", r.err);
        cr_assert_str_eq(r.out, "");
        tc_done(&r);
    }
}

/* ---- ckpt inspect ------------------------------------------------------- */

Test(cli_ckpt, inspect_lists_metadata_checksums_and_every_tensor)
{
    char *dir = fixture_dir(), *path = ckpt_file(dir, 20);
    tc_result r = tc_runf("ckpt inspect %s --json", path);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "file")), path);
    cr_assert_eq(json_integer_value(json_object_get(j, "step")), 20);
    cr_assert_str_eq(json_string_value(json_object_get(j, "format_version")), TL_CKPT_FORMAT_VERSION);
    json_t *sums = json_object_get(j, "checksums");
    cr_assert_str_eq(json_string_value(json_object_get(sums, "data")), "verified");
    cr_assert_str_eq(json_string_value(json_object_get(sums, "header")), "verified");
    json_t *meta = json_object_get(j, "metadata");
    cr_assert_str_eq(json_string_value(json_object_get(meta, "note")), "written by test_cli_ckpt");
    cr_assert_str_eq(json_string_value(json_object_get(meta, "format")), TL_CKPT_FORMAT);
    cr_assert_eq(strlen(json_string_value(json_object_get(meta, "crc32c"))), 8u);
    /* Every tensor, as the reader sees it. */
    tl_ckpt_reader *rd;
    cr_assert_eq(tl_ckpt_open(path, 0, &rd), TL_OK);
    json_t *ts = json_object_get(j, "tensors");
    cr_assert_eq((int)json_array_size(ts), tl_ckpt_num_tensors(rd));
    cr_assert_eq(json_array_size(ts), 11u);
    for (int i = 0; i < tl_ckpt_num_tensors(rd); i++) {
        tl_ckpt_tensor_info t;
        cr_assert_eq(tl_ckpt_tensor(rd, i, &t), TL_OK);
        json_t *o = json_array_get(ts, (size_t)i);
        cr_assert_str_eq(json_string_value(json_object_get(o, "name")), t.name);
        cr_assert_str_eq(json_string_value(json_object_get(o, "dtype")), tl_ckpt_dtype_name(t.dtype));
        json_t *shape = json_object_get(o, "shape");
        cr_assert_eq((int)json_array_size(shape), t.rank, "%s", t.name);
        for (int d = 0; d < t.rank; d++)
            cr_assert_eq(json_integer_value(json_array_get(shape, (size_t)d)), t.shape[d]);
        cr_assert_eq(json_integer_value(json_object_get(o, "bytes")), (json_int_t)t.bytes);
    }
    tl_ckpt_close(rd);
    json_decref(j);
    tc_done(&r);

    r = tc_runf("ckpt inspect %s", path);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "step 20, format tpuloop-ckpt version 1"), "%s", r.out);
    cr_assert(strstr(r.out, "checksums: data crc32c verified, header crc32c verified"), "%s", r.out);
    cr_assert(strstr(r.out, "    dense/kernel (F32) [4,5]\n"), "%s", r.out);
    cr_assert(strstr(r.out, "    global_step (I64) []\n"), "%s", r.out);
    cr_assert(strstr(r.out, "    empty (I32) [0,3]\n"), "%s", r.out);
    cr_assert(strstr(r.out, "11 tensors"), "%s", r.out);
    tc_done(&r);
    free(path);
    tc_rmtree(dir);
    free(dir);
}

/* The values of --tensor=name --json: every value when small or --all_values. */
static json_t *tensor_json(const char *path, const char *name, bool all)
{
    tc_result r = tc_runf("ckpt inspect %s --tensor=%s --json%s", path, name, all ? " --all_values" : "");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    json_t *t = json_incref(json_object_get(j, "tensor"));
    cr_assert_not_null(t, "%s", r.out);
    cr_assert_str_eq(json_string_value(json_object_get(t, "name")), name);
    json_decref(j);
    tc_done(&r);
    return t;
}

static double num(json_t *v)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        return strcmp(s, "NaN") == 0 ? NAN : strcmp(s, "Infinity") == 0 ? INFINITY : -INFINITY;
    }
    return json_number_value(v);
}

static void expect_values(json_t *t, const char *key, const double *want, size_t n)
{
    json_t *v = json_object_get(t, key);
    cr_assert_eq(json_array_size(v), n, "%s", json_string_value(json_object_get(t, "name")));
    for (size_t i = 0; i < n; i++) {
        double got = num(json_array_get(v, i));
        cr_assert(isnan(want[i]) ? isnan(got) : got == want[i], "%s[%zu]: %.17g, want %.17g",
                  json_string_value(json_object_get(t, "name")), i, got, want[i]);
    }
}

Test(cli_ckpt, inspect_tensor_values_of_every_dtype)
{
    char *dir = fixture_dir(), *path = ckpt_file(dir, 30);
    json_t *t = tensor_json(path, "dense/kernel", false);
    double kernel[20];
    for (int k = 0; k < 20; k++)
        kernel[k] = k * 0.25 - 2.0;
    expect_values(t, "values", kernel, 20);
    cr_assert_eq(json_number_value(json_object_get(t, "min")), -2.0);
    cr_assert_eq(json_number_value(json_object_get(t, "max")), 2.75);
    cr_assert_eq(json_number_value(json_object_get(t, "mean")), 0.375);
    json_decref(t);

    static const struct {
        const char *name;
        double values[4];
        size_t n;
    } cases[] = {
        {"dense/bias", {0.1, -2.5, 1e300}, 3},   {"global_step", {30}, 1},
        {"half", {1, -2, 0.5, INFINITY}, 4},     {"bf", {1, -0.5}, 2},
        {"mask", {1, 0, 1}, 3},                  {"u8", {0, 255}, 2},
        {"e4m3", {1, -2, NAN}, 3},               {"e5m2", {1, INFINITY}, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        t = tensor_json(path, cases[c].name, false);
        expect_values(t, "values", cases[c].values, cases[c].n);
        json_decref(t);
    }
    t = tensor_json(path, "e4m3", false);
    cr_assert_eq(json_integer_value(json_object_get(t, "nan")), 1, "NaN counted, not in min/max/mean");
    cr_assert_eq(json_number_value(json_object_get(t, "min")), -2.0);
    cr_assert_eq(json_number_value(json_object_get(t, "mean")), -0.5);
    json_decref(t);
    t = tensor_json(path, "half", false);
    cr_assert_str_eq(json_string_value(json_object_get(t, "max")), "Infinity");
    cr_assert_str_eq(json_string_value(json_object_get(t, "mean")), "Infinity");
    json_decref(t);
    t = tensor_json(path, "empty", false);
    cr_assert_eq(json_integer_value(json_object_get(t, "elements")), 0);
    cr_assert_eq(json_array_size(json_object_get(t, "values")), 0u);
    cr_assert(json_is_null(json_object_get(t, "min")));
    json_decref(t);
    free(path);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_ckpt, inspect_summarises_a_big_tensor_unless_all_values)
{
    char *dir = fixture_dir(), *path = ckpt_file(dir, 30);
    double want[100];
    for (int k = 0; k < 100; k++)
        want[k] = k;
    json_t *t = tensor_json(path, "big", false);
    cr_assert_null(json_object_get(t, "values"));
    expect_values(t, "first_values", want, 10);
    cr_assert_eq(json_integer_value(json_object_get(t, "elements")), 100);
    cr_assert_eq(json_number_value(json_object_get(t, "min")), 0.0);
    cr_assert_eq(json_number_value(json_object_get(t, "max")), 99.0);
    cr_assert_eq(json_number_value(json_object_get(t, "mean")), 49.5);
    json_decref(t);
    t = tensor_json(path, "big", true);
    expect_values(t, "values", want, 100);
    json_decref(t);

    tc_result r = tc_runf("ckpt inspect %s --tensor=big", path);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "tensor_name:  big\n"), "%s", r.out);
    cr_assert(strstr(r.out, "dtype F32, shape [10,10], 100 elements, 400 bytes"), "%s", r.out);
    cr_assert(strstr(r.out, "first values: 0 1 2 3 4 5 6 7 8 9 ...\n"), "%s", r.out);
    cr_assert(strstr(r.out, "min 0  max 99  mean 49.5\n"), "%s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s --tensor=big --all_values", path);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "values: 0 1 2 3 4 5 6 7 8 9\n    10 11"), "%s", r.out);
    cr_assert(strstr(r.out, " 98 99\n"), "%s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s --tensor=dense/bias", path);
    cr_assert(strstr(r.out, "values: 0.1 -2.5 1e+300\n"), "the shortest text that reads back: %s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s --tensor=dense/kernel", path);
    cr_assert(strstr(r.out, "values: -2 -1.75 -1.5 -1.25 -1 -0.75 -0.5 -0.25 0 0.25\n    0.5 0.75"), "%s", r.out);
    tc_done(&r);
    free(path);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_ckpt, inspect_a_corrupt_truncated_or_missing_file_exits_1_naming_it)
{
    char *dir = fixture_dir(), *path = ckpt_file(dir, 30);
    flip_last_byte(path);
    tc_result r = tc_runf("ckpt inspect %s", path);
    cr_assert_eq(r.status, 1);
    char want[4200];
    snprintf(want, sizeof want, "error: %s: data checksum mismatch", path);
    cr_assert(strstr(r.err, want), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    tc_done(&r);
    cr_assert_eq(truncate(path, 100), 0);
    r = tc_runf("ckpt inspect %s --json", path);
    cr_assert_eq(r.status, 1);
    snprintf(want, sizeof want, "error: %s: ", path);
    cr_assert(strstr(r.err, want), "%s", r.err);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-99.safetensors", dir);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "model.ckpt-99.safetensors"), "%s", r.err);
    tc_done(&r);
    free(path);
    path = ckpt_file(dir, 20);
    r = tc_runf("ckpt inspect %s --tensor=no/such", path);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "no/such"), "%s", r.err);
    tc_done(&r);
    free(path);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_ckpt, inspect_a_foreign_safetensors_file)
{
    /* As Python's safetensors writes it: no tpuloop metadata, no checksums. */
    static const char header[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t hlen = (sizeof header - 1 + 7) / 8 * 8;
    char path[] = "/tmp/tpuloop-cli-foreign-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    uint64_t n = hlen;
    fwrite(&n, 8, 1, f);
    fputs(header, f);
    for (size_t i = sizeof header - 1; i < hlen; i++)
        fputc(' ', f);
    const float w[2] = {1.5f, -3.0f};
    fwrite(w, 4, 2, f);
    cr_assert_eq(fclose(f), 0);
    tc_result r = tc_runf("ckpt inspect %s --tensor=w --json", path);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    cr_assert(json_is_null(json_object_get(j, "step")));
    cr_assert(json_is_null(json_object_get(j, "format_version")));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "checksums"), "data")), "absent");
    const double want[2] = {1.5, -3.0};
    expect_values(json_object_get(j, "tensor"), "values", want, 2);
    json_decref(j);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s", path);
    cr_assert(strstr(r.out, "format - (not written by tpuloop)"), "%s", r.out);
    cr_assert(strstr(r.out, "data crc32c absent"), "%s", r.out);
    tc_done(&r);
    unlink(path);
}

/* The prefix a TensorFlow user names a checkpoint by (what predict's
 * --checkpoint= takes) inspects the prefix's .safetensors file; a prefix of
 * nothing is an error naming it. */
Test(cli_ckpt, inspect_takes_tensorflows_checkpoint_prefix)
{
    char *dir = fixture_dir();
    tc_result r = tc_runf("ckpt inspect %s/model.ckpt-20 --json", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    char want[4200];
    snprintf(want, sizeof want, "%s/model.ckpt-20.safetensors", dir);
    cr_assert_str_eq(json_string_value(json_object_get(j, "file")), want);
    cr_assert_eq(json_integer_value(json_object_get(j, "step")), 20);
    json_decref(j);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-30 --tensor=global_step", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "tensor_name:  global_step\n"), "%s", r.out);
    cr_assert(strstr(r.out, "values: 30\n"), "%s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-99", dir);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "model.ckpt-99"), "%s", r.err);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

/* A checkpoint of training from input_fn datasets holds their position as
 * the U8 tensor "input_datasets" (JSON text): list calls it valid, inspect
 * lists it as text and shows its text. */
Test(cli_ckpt, the_input_positions_tensor_is_shown_as_text)
{
    char *dir = tc_tmpdir();
    tl_ckpt_manager *m;
    cr_assert_eq(tl_ckpt_manager_create(dir, NULL, &m), TL_OK, "%s", tl_last_error());
    fixture f;
    tl_ckpt_writer *w = fixture_writer(&f, 40);
    char json[300];
    int len = snprintf(json, sizeof json, "[{\"type\":\"shuffle\",\"buffer\":[");
    while (len < 280)
        len += snprintf(json + len, sizeof json - (size_t)len, "%d,", len);
    len += snprintf(json + len, sizeof json - (size_t)len, "0]}]");
    const int64_t shape[1] = {len};
    cr_assert_eq(tl_ckpt_writer_add(w, "input_datasets", TL_CKPT_U8, shape, 1, json), TL_OK);
    cr_assert_eq(tl_ckpt_manager_save(m, w, 40), TL_OK, "%s", tl_last_error());
    tl_ckpt_writer_destroy(w);
    tl_ckpt_manager_destroy(m);

    tc_result r = tc_runf("ckpt list %s --json", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    cr_assert(json_is_true(json_object_get(row_of(j, 40), "valid")));
    cr_assert_eq(json_integer_value(json_object_get(j, "resume_step")), 40);
    json_decref(j);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-40", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    char line[400];
    snprintf(line, sizeof line, "    input_datasets (U8) [%d] text\n", len);
    cr_assert(strstr(r.out, line), "no '%s' in\n%s", line, r.out);
    cr_assert(strstr(r.out, "    u8 (U8) [2]\n"), "bytes that are not text: %s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-40 --tensor=input_datasets", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    snprintf(line, sizeof line, "  text: %.200s ...\n", json);
    cr_assert(strstr(r.out, line), "no '%s' in\n%s", line, r.out);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-40 --tensor=input_datasets --all_values --json", dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    j = tc_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "tensor"), "text")), json);
    json_decref(j);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

/* A checkpoint of 2 hosts of a model without embedding tables: the main
 * file names its 2 host files (checkpoint.h, "Host files"), each with its
 * host's input positions. list counts them ("host_files") and calls the
 * checkpoint incomplete without one; inspect lists them, each valid or why
 * not. */
Test(cli_ckpt, a_checkpoint_of_2_hosts_lists_and_inspects_its_host_files)
{
    char *dir = tc_tmpdir();
    tl_ckpt_manager *m;
    cr_assert_eq(tl_ckpt_manager_create(dir, NULL, &m), TL_OK, "%s", tl_last_error());
    char main[1024], file[1100];
    cr_assert_eq(tl_ckpt_path(dir, 40, main, sizeof main), TL_OK);
    static const char *const positions[2] = {"[{\"format\":\"x\"},null]", "[null,{\"format\":\"y\"}]"};
    for (int h = 0; h < 2; h++) {
        cr_assert_eq(tl_ckpt_host_path(main, h, 2, file, sizeof file), TL_OK);
        tl_ckpt_writer *w;
        cr_assert_eq(tl_ckpt_writer_create(&w), TL_OK);
        const int64_t len = (int64_t)strlen(positions[h]);
        cr_assert_eq(tl_ckpt_writer_add(w, "input_datasets", TL_CKPT_U8, &len, 1, positions[h]), TL_OK);
        char v[16];
        snprintf(v, sizeof v, "%d", h);
        cr_assert_eq(tl_ckpt_writer_set_meta(w, "step", "40"), TL_OK);
        cr_assert_eq(tl_ckpt_writer_set_meta(w, TL_CKPT_META_HOST_FILE, v), TL_OK);
        cr_assert_eq(tl_ckpt_writer_set_meta(w, TL_CKPT_META_HOST_FILES, "2"), TL_OK);
        cr_assert_eq(tl_ckpt_writer_write(w, file), TL_OK, "%s", tl_last_error());
        tl_ckpt_writer_destroy(w);
    }
    fixture f;
    tl_ckpt_writer *w = fixture_writer(&f, 40);
    cr_assert_eq(tl_ckpt_writer_set_meta(w, TL_CKPT_META_HOST_FILES, "2"), TL_OK);
    cr_assert_eq(tl_ckpt_manager_save(m, w, 40), TL_OK, "%s", tl_last_error());
    tl_ckpt_writer_destroy(w);
    tl_ckpt_manager_destroy(m);

    tc_result r = tc_runf("ckpt list %s", dir);
    cr_assert(r.status == 0 && strstr(r.out, "valid (with 2 host files)") != NULL, "%s%s", r.out, r.err);
    tc_done(&r);
    r = tc_runf("ckpt list %s --json", dir);
    json_t *j = tc_json(&r);
    cr_assert_eq(json_integer_value(json_object_get(row_of(j, 40), "host_files")), 2, "%s", r.out);
    json_decref(j);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-40", dir);
    cr_assert(r.status == 0 && strstr(r.out, "  2 host files, each with its host's input positions") != NULL, "%s",
              r.out);
    cr_assert(strstr(r.out, "model.ckpt-40.host-00001-of-00002.safetensors: valid") != NULL, "%s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-40 --tensor=input_datasets", dir);
    cr_assert(r.status == 1 && strstr(r.err, "input positions are in its 2 host files: inspect those") != NULL, "%s",
              r.err);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-40.host-00001-of-00002.safetensors --tensor=input_datasets", dir);
    cr_assert(r.status == 0 && strstr(r.out, "  text: [null,{\"format\":\"y\"}]") != NULL, "%s%s", r.out, r.err);
    tc_done(&r);
    /* Without host file 1 the checkpoint is incomplete. */
    cr_assert_eq(unlink(file), 0);
    r = tc_runf("ckpt list %s --json", dir);
    j = tc_json(&r);
    const char *err = json_string_value(json_object_get(row_of(j, 40), "error"));
    cr_assert(err != NULL && strstr(err, "is incomplete: host file 1 of 2") != NULL, "%s", r.out);
    cr_assert(json_is_false(json_object_get(row_of(j, 40), "valid")));
    json_decref(j);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/model.ckpt-40 --json", dir);
    j = tc_json(&r);
    json_t *files = json_object_get(j, "host_files");
    cr_assert(json_array_size(files) == 2 && json_is_true(json_object_get(json_array_get(files, 0), "valid")) &&
                  json_is_false(json_object_get(json_array_get(files, 1), "valid")), "%s", r.out);
    json_decref(j);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

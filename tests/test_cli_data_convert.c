/* `tpuloop data convert`, run as the built binary: IDX (u8, i16, f32, f64),
 * CSV and Criteo TSV into plain, GZIP and ZLIB TFRecord files of tf.Example
 * and shards, each read back with `data inspect --records` and compared
 * value for value (float bits included) with the source; a failed convert
 * leaves nothing under the output name (an older file there is kept); bad
 * arguments and bad input give their errors and exit statuses. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_cli_util.h"
#include "tpuloop/dataset.h"

/* ---- helpers -------------------------------------------------------------- */

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint32_t json_f32_bits(const json_t *v)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        return strcmp(s, "inf") == 0 ? 0x7f800000u : strcmp(s, "-inf") == 0 ? 0xff800000u : 0x7fc00000u;
    }
    cr_assert(json_is_real(v));
    return bits_of((float)json_real_value(v));
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* An IDX file: type byte, dims, and the elements already big-endian. */
static void write_idx(const char *path, int type, int ndim, const uint32_t *dims, const void *be, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    unsigned char h[4] = {0, 0, (unsigned char)type, (unsigned char)ndim};
    fwrite(h, 1, 4, f);
    for (int i = 0; i < ndim; i++) {
        unsigned char d[4] = {(unsigned char)(dims[i] >> 24), (unsigned char)(dims[i] >> 16),
                              (unsigned char)(dims[i] >> 8), (unsigned char)dims[i]};
        fwrite(d, 1, 4, f);
    }
    fwrite(be, 1, n, f);
    cr_assert_eq(fclose(f), 0);
}

/* `data convert ARGS`: must succeed; returns its summary line. */
static json_t *convert_ok(const char *args)
{
    tc_result r = tc_runf("data convert %s", args);
    cr_assert_eq(r.status, 0, "data convert %s\nstderr: %s", args, r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    return j;
}

/* inspect --json --records=N of one file: its report (a new reference). */
static json_t *inspect_file(const char *path, int n)
{
    tc_result r = tc_runf("data inspect %s --json --records=%d", path, n);
    cr_assert_eq(r.status, 0, "inspect %s: %s", path, r.err);
    json_t *j = tc_json(&r);
    json_t *f = json_incref(json_array_get(json_object_get(j, "files"), 0));
    json_decref(j);
    tc_done(&r);
    return f;
}

/* The values of feature key in record i of a report, checking the kind. */
static const json_t *values(const json_t *report, size_t i, const char *key, const char *kind)
{
    const json_t *rec = json_array_get(json_object_get(report, "first_records"), i);
    const json_t *f = json_object_get(json_object_get(rec, "features"), key);
    cr_assert_not_null(f, "record %zu has no feature %s", i, key);
    const json_t *v = json_object_get(f, kind);
    cr_assert(json_is_array(v), "record %zu feature %s is not a %s", i, key, kind);
    return v;
}

static int64_t ival(const json_t *arr, size_t i)
{
    cr_assert(json_is_integer(json_array_get(arr, i)));
    return json_integer_value(json_array_get(arr, i));
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Names in dir that contain ".tmp-": a convert's leftovers. */
static int leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp-") != NULL;
    closedir(d);
    return n;
}

/* ---- IDX -------------------------------------------------------------------- */

Test(cli_data_convert, idx_u8_to_plain_gzip_zlib)
{
    char *dir = tc_tmpdir();
    tc_write_tiny_mnist(dir, 5, 2, 4); /* train: (5, 4, 4) u8 images, (5) u8 labels */
    char images[512], labels[512];
    snprintf(images, sizeof images, "%s/train-images-idx3-ubyte", dir);
    snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte", dir);
    char *img = tc_slurp(images), *lab = tc_slurp(labels);
    cr_assert(img && lab);
    static const struct {
        const char *name, *flag, *comp;
    } outs[] = {{"a.tfrecord", "", "NONE"}, {"b.tfrecord.gz", "", "GZIP"}, {"c.tfrecord", "--compression=ZLIB", "ZLIB"},
                {"d.tfrecord.gz", "--compression=NONE", "NONE"}};
    for (size_t o = 0; o < sizeof outs / sizeof *outs; o++) {
        char args[2048], out[512];
        snprintf(out, sizeof out, "%s/%s", dir, outs[o].name);
        snprintf(args, sizeof args, "--from=idx %s --labels=%s --out=%s %s", images, labels, out, outs[o].flag);
        json_t *s = convert_ok(args);
        cr_assert_eq(json_integer_value(json_object_get(s, "records")), 5);
        cr_assert_str_eq(json_string_value(json_object_get(s, "compression")), outs[o].comp);
        json_t *f0 = json_array_get(json_object_get(s, "files"), 0);
        cr_assert_str_eq(json_string_value(json_object_get(f0, "path")), out);
        struct stat sb;
        cr_assert_eq(stat(out, &sb), 0);
        cr_assert_eq(json_integer_value(json_object_get(f0, "bytes")), (json_int_t)sb.st_size);
        cr_assert_eq(json_integer_value(json_object_get(s, "bytes")), (json_int_t)sb.st_size);
        json_decref(s);

        json_t *rep = inspect_file(out, 5);
        cr_assert_str_eq(json_string_value(json_object_get(rep, "compression")), outs[o].comp, "%s", out);
        cr_assert_eq(json_integer_value(json_object_get(rep, "records")), 5);
        for (size_t i = 0; i < 5; i++) {
            const json_t *im = values(rep, i, "image", "int64_list");
            cr_assert_eq(json_array_size(im), 16u);
            for (size_t p = 0; p < 16; p++)
                cr_assert_eq(ival(im, p), (unsigned char)img[16 + i * 16 + p], "record %zu pixel %zu", i, p);
            cr_assert_eq(ival(values(rep, i, "label", "int64_list"), 0), (unsigned char)lab[8 + i]);
        }
        json_decref(rep);
    }
    cr_assert_eq(leftovers(dir), 0);
    free(img);
    free(lab);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_data_convert, idx_float_and_signed_types)
{
    char *dir = tc_tmpdir();
    char f32p[512], f64p[512], i16p[512], out[512];
    snprintf(f32p, sizeof f32p, "%s/x-f32", dir);
    snprintf(f64p, sizeof f64p, "%s/x-f64", dir);
    snprintf(i16p, sizeof i16p, "%s/y-i16", dir);
    /* f32 (3, 2): special values, big-endian. */
    const uint32_t fb[6] = {0x3dcccccd, 0x80000000, 0x00000001, 0x7f800000, 0xff800000, 0xc2f6e979};
    unsigned char be[48];
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 4; k++)
            be[4 * i + k] = (unsigned char)(fb[i] >> (24 - 8 * k));
    const uint32_t d32[2] = {3, 2};
    write_idx(f32p, 0x0D, 2, d32, be, 24);
    /* i16 (3) labels: -5, 0, 300. */
    const int16_t ys[3] = {-5, 0, 300};
    unsigned char yb[6];
    for (int i = 0; i < 3; i++) {
        yb[2 * i] = (unsigned char)((uint16_t)ys[i] >> 8);
        yb[2 * i + 1] = (unsigned char)ys[i];
    }
    const uint32_t d3[1] = {3};
    write_idx(i16p, 0x0B, 1, d3, yb, 6);
    snprintf(out, sizeof out, "%s/f.tfrecord", dir);
    char args[2048];
    snprintf(args, sizeof args, "--from=idx %s --labels=%s --out=%s", f32p, i16p, out);
    json_decref(convert_ok(args));
    json_t *rep = inspect_file(out, 3);
    for (size_t i = 0; i < 3; i++) {
        const json_t *im = values(rep, i, "image", "float_list");
        cr_assert_eq(json_array_size(im), 2u);
        for (size_t p = 0; p < 2; p++)
            cr_assert_eq(json_f32_bits(json_array_get(im, p)), fb[2 * i + p], "record %zu value %zu", i, p);
        cr_assert_eq(ival(values(rep, i, "label", "int64_list"), 0), ys[i]);
    }
    json_decref(rep);
    /* f64 (2): rounded to float32; no labels, so no "label" feature. */
    const double dv[2] = {0.1, -1e300};
    unsigned char db[16];
    for (int i = 0; i < 2; i++) {
        uint64_t u;
        memcpy(&u, &dv[i], 8);
        for (int k = 0; k < 8; k++)
            db[8 * i + k] = (unsigned char)(u >> (56 - 8 * k));
    }
    const uint32_t d2[1] = {2};
    write_idx(f64p, 0x0E, 1, d2, db, 16);
    snprintf(args, sizeof args, "--from=idx %s --out=%s", f64p, out);
    json_decref(convert_ok(args));
    rep = inspect_file(out, 2);
    cr_assert_eq(json_f32_bits(json_array_get(values(rep, 0, "image", "float_list"), 0)), bits_of((float)0.1));
    cr_assert_eq(json_f32_bits(json_array_get(values(rep, 1, "image", "float_list"), 0)), 0xff800000u);
    cr_assert_null(json_object_get(json_object_get(json_array_get(json_object_get(rep, "first_records"), 0),
                                                   "features"),
                                   "label"));
    json_decref(rep);
    /* Labels of another length than the images: bad input, nothing written. */
    snprintf(out, sizeof out, "%s/g.tfrecord", dir);
    tc_result r = tc_runf("data convert --from=idx %s --labels=%s --out=%s", f64p, i16p, out);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "labels must be an integer IDX file of shape (2)"), "%s", r.err);
    cr_assert(!exists(out));
    tc_done(&r);
    cr_assert_eq(leftovers(dir), 0);
    tc_rmtree(dir);
    free(dir);
}

/* ---- CSV -------------------------------------------------------------------- */

Test(cli_data_convert, csv_round_trip_two_inputs)
{
    char *dir = tc_tmpdir();
    char a[512], b[512], out[512];
    snprintf(a, sizeof a, "%s/a.csv", dir);
    snprintf(b, sizeof b, "%s/b.csv", dir);
    snprintf(out, sizeof out, "%s/c.tfrecord.gz", dir);
    write_text(a, "x,n,s,y\n"
                  "0.1,9223372036854775807,plain,1\n"
                  "-1e-45,-9223372036854775808,\"a,b\nc\",0\n");
    write_text(b, "x,n,s,y\r\n"
                  "inf,0,,7\r\n"
                  "\"2.5\",-3,\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87,2\r\n");
    char args[2048];
    snprintf(args, sizeof args, "--from=csv %s %s --columns=x:float,n:int64,s:string,y:int64 --label_column=y --out=%s",
             a, b, out);
    json_t *s = convert_ok(args);
    cr_assert_eq(json_integer_value(json_object_get(s, "records")), 4);
    cr_assert_str_eq(json_string_value(json_object_get(s, "compression")), "GZIP");
    cr_assert_eq(json_array_size(json_object_get(s, "inputs")), 2u);
    json_decref(s);
    json_t *rep = inspect_file(out, 4);
    const uint32_t xs[4] = {bits_of(strtof("0.1", NULL)), bits_of(strtof("-1e-45", NULL)), 0x7f800000u,
                            bits_of(2.5f)};
    const int64_t ns[4] = {INT64_MAX, INT64_MIN, 0, -3}, ys[4] = {1, 0, 7, 2};
    /* base64 of "plain", "a,b\nc", "", "ключ" */
    static const char *const sv[4] = {"cGxhaW4=", "YSxiCmM=", "", "0LrQu9GO0Yc="};
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(json_f32_bits(json_array_get(values(rep, i, "x", "float_list"), 0)), xs[i], "row %zu", i);
        cr_assert_eq(ival(values(rep, i, "n", "int64_list"), 0), ns[i], "row %zu", i);
        cr_assert_str_eq(json_string_value(json_array_get(values(rep, i, "s", "bytes_list"), 0)), sv[i], "row %zu", i);
        cr_assert_eq(ival(values(rep, i, "label", "int64_list"), 0), ys[i], "row %zu", i);
        cr_assert_null(json_object_get(json_object_get(json_array_get(json_object_get(rep, "first_records"), i),
                                                       "features"),
                                       "y"),
                       "the label column is written as \"label\"");
    }
    json_decref(rep);
    tc_rmtree(dir);
    free(dir);
}

/* Seven rows into three shards: Beam's names (the tag before the
 * extensions), round-robin order. */
Test(cli_data_convert, shards_round_robin_with_tensorflow_names)
{
    char *dir = tc_tmpdir();
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/in.csv", dir);
    write_text(in, "i\n0\n1\n2\n3\n4\n5\n6\n");
    snprintf(out, sizeof out, "%s/s.tfrecord.gz", dir);
    char args[2048];
    snprintf(args, sizeof args, "--from=csv %s --columns=i:int64 --out=%s --shards=3", in, out);
    json_t *s = convert_ok(args);
    json_t *files = json_object_get(s, "files");
    cr_assert_eq(json_array_size(files), 3u);
    static const int counts[3] = {3, 2, 2};
    for (int k = 0; k < 3; k++) {
        char want[512];
        snprintf(want, sizeof want, "%s/s-%05d-of-00003.tfrecord.gz", dir, k);
        json_t *f = json_array_get(files, (size_t)k);
        cr_assert_str_eq(json_string_value(json_object_get(f, "path")), want);
        cr_assert_eq(json_integer_value(json_object_get(f, "records")), counts[k]);
        json_t *rep = inspect_file(want, counts[k]);
        cr_assert_str_eq(json_string_value(json_object_get(rep, "compression")), "GZIP");
        for (int i = 0; i < counts[k]; i++)
            cr_assert_eq(ival(values(rep, (size_t)i, "i", "int64_list"), 0), k + 3 * i);
        json_decref(rep);
    }
    cr_assert(!exists(out), "with --shards the plain name is not written");
    json_decref(s);
    /* One shard, no ".gz": the tag goes before ".tfrecord". */
    snprintf(out, sizeof out, "%s/one.tfrecord", dir);
    snprintf(args, sizeof args, "--from=csv %s --columns=i:int64 --out=%s --shards=1", in, out);
    json_decref(convert_ok(args));
    char one[512];
    snprintf(one, sizeof one, "%s/one-00000-of-00001.tfrecord", dir);
    json_t *rep = inspect_file(one, 0);
    cr_assert_eq(json_integer_value(json_object_get(rep, "records")), 7);
    json_decref(rep);
    tc_rmtree(dir);
    free(dir);
}

/* Where the tag goes for each kind of name: before the record and
 * compression extensions, at the end when there are none (an extension
 * that says nothing of the format stays in the prefix). */
Test(cli_data_convert, shard_names_keep_the_extensions_last)
{
    char *dir = tc_tmpdir();
    char in[512];
    snprintf(in, sizeof in, "%s/in.csv", dir);
    write_text(in, "i\n0\n1\n");
    static const struct {
        const char *out, *first;
    } cases[] = {
        {"train", "train-00000-of-00002"},
        {"train.tfrecord", "train-00000-of-00002.tfrecord"},
        {"train.tfrecords", "train-00000-of-00002.tfrecords"},
        {"train.tfrec", "train-00000-of-00002.tfrec"},
        {"train.tfrecord.gz", "train-00000-of-00002.tfrecord.gz"},
        {"train.tfr.zlib", "train-00000-of-00002.tfr.zlib"},
        {"data_tfrecord.gz", "data_tfrecord-00000-of-00002.gz"}, /* TFX ExampleGen's names */
        {"day.v2.tfrecord", "day.v2-00000-of-00002.tfrecord"},
        {"day.csv", "day.csv-00000-of-00002"},
        {".tfrecord", ".tfrecord-00000-of-00002"}, /* nothing would be left before the tag */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char args[2048], want[512];
        snprintf(args, sizeof args, "--from=csv %s --columns=i:int64 --out=%s/%s --shards=2", in, dir, cases[c].out);
        json_t *s = convert_ok(args);
        snprintf(want, sizeof want, "%s/%s", dir, cases[c].first);
        const char *got = json_string_value(json_object_get(json_array_get(json_object_get(s, "files"), 0), "path"));
        cr_assert_str_eq(got, want, "--out=%s", cases[c].out);
        cr_assert(exists(want), "%s", want);
        json_decref(s);
    }
    cr_assert_eq(leftovers(dir), 0);
    tc_rmtree(dir);
    free(dir);
}

/* The README's three lines — convert --out=data/train.tfrecord.gz
 * --shards=8, inspect of the first shard, train --files with the glob
 * 'data/train-*-of-00008.tfrecord.gz' — fit together: the glob, expanded as
 * a tfrecord dataset expands --files, names exactly the files convert wrote,
 * in shard order. */
Test(cli_data_convert, readme_glob_matches_the_shards)
{
    char *dir = tc_tmpdir();
    char in[512], data[512];
    snprintf(in, sizeof in, "%s/in.csv", dir);
    write_text(in, "i\n0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    snprintf(data, sizeof data, "%s/data", dir);
    cr_assert_eq(mkdir(data, 0777), 0);
    char args[2048];
    snprintf(args, sizeof args, "--from=csv %s --columns=i:int64 --out=%s/train.tfrecord.gz --shards=8", in, data);
    json_t *s = convert_ok(args);
    json_t *files = json_object_get(s, "files");
    cr_assert_eq(json_array_size(files), 8u);
    /* A file that the glob must not take: another set of shards. */
    char other[640];
    snprintf(other, sizeof other, "%s/train-00000-of-00004.tfrecord.gz", data);
    write_text(other, "");

    char pattern[640];
    snprintf(pattern, sizeof pattern, "%s/train-*-of-00008.tfrecord.gz", data);
    const char *patterns[1] = {pattern};
    tl_dataset *ds;
    cr_assert_eq(tl_dataset_from_files(patterns, 1, &ds), TL_OK, "%s", tl_last_error());
    const tl_element *e;
    size_t k = 0;
    tl_status st;
    while ((st = tl_dataset_next(ds, &e)) == TL_OK && e != NULL) {
        const tl_tensor *t = tl_element_find(e, "filename");
        cr_assert_not_null(t);
        const tl_bytes *b = t->data;
        const char *want = json_string_value(json_object_get(json_array_get(files, k), "path"));
        cr_assert_not_null(want, "the glob matched more than the %zu shards", json_array_size(files));
        cr_assert(b->len == strlen(want) && memcmp(b->data, want, b->len) == 0, "file %zu: %.*s, want %s", k,
                  (int)b->len, (const char *)b->data, want);
        k++;
    }
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_eq(k, 8u, "the glob matched %zu of the 8 shards", k);
    tl_dataset_destroy(ds);
    /* And inspect reads the first one as the README shows. */
    char first[640];
    snprintf(first, sizeof first, "%s/train-00000-of-00008.tfrecord.gz", data);
    json_t *rep = inspect_file(first, 2);
    cr_assert_str_eq(json_string_value(json_object_get(rep, "compression")), "GZIP");
    cr_assert_eq(json_integer_value(json_object_get(rep, "records")), 2);
    json_decref(rep);
    json_decref(s);
    tc_rmtree(dir);
    free(dir);
}

/* `tpuloop help` shows a --shards example; convert writes exactly those
 * names. */
Test(cli_data_convert, help_names_the_shards_convert_writes)
{
    tc_result h = tc_run(NULL, "help data");
    cr_assert_eq(h.status, 0);
    cr_assert(strstr(h.out, "--shards=8 --out=d.tfrecord.gz\n") &&
                  strstr(h.out, "writes d-00000-of-00008.tfrecord.gz ... d-00007-of-00008.tfrecord.gz\n"),
              "%s", h.out);
    tc_done(&h);
    char *dir = tc_tmpdir();
    char in[512], args[2048];
    snprintf(in, sizeof in, "%s/in.csv", dir);
    write_text(in, "i\n0\n");
    snprintf(args, sizeof args, "--from=csv %s --columns=i:int64 --shards=8 --out=%s/d.tfrecord.gz", in, dir);
    json_decref(convert_ok(args));
    for (int k = 0; k < 8; k++) {
        char want[512];
        snprintf(want, sizeof want, "%s/d-%05d-of-00008.tfrecord.gz", dir, k);
        cr_assert(exists(want), "%s", want);
    }
    tc_rmtree(dir);
    free(dir);
}

/* ---- Criteo ------------------------------------------------------------------ */

Test(cli_data_convert, criteo_dense_transformed_cat_hashed)
{
    char *dir = tc_tmpdir();
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/day_0", dir);
    snprintf(out, sizeof out, "%s/criteo.tfrecord", dir);
    /* Two lines: label, 13 ints (empty, negative, large), 26 hex ids. */
    const long long ints[2][13] = {{0, 1, -5, 3, 100, 7, 0, 9, 12345678, 1, 2, 3, 4},
                                   {5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 99}};
    char text[4096];
    size_t len = 0;
    for (int l = 0; l < 2; l++) {
        len += (size_t)snprintf(text + len, sizeof text - len, "%d", l);
        for (int c = 0; c < 13; c++) {
            if (l == 0 && c == 0)
                len += (size_t)snprintf(text + len, sizeof text - len, "\t"); /* empty: read as 0 */
            else
                len += (size_t)snprintf(text + len, sizeof text - len, "\t%lld", ints[l][c]);
        }
        for (int c = 0; c < 26; c++)
            len += (size_t)snprintf(text + len, sizeof text - len, "\t%x", 0x1000u * (unsigned)(c + 1) + (unsigned)l);
        len += (size_t)snprintf(text + len, sizeof text - len, "\n");
    }
    write_text(in, text);
    char args[2048];
    snprintf(args, sizeof args, "--from=criteo %s --vocab_sizes=1000 --out=%s --compression=ZLIB", in, out);
    json_decref(convert_ok(args));
    json_t *rep = inspect_file(out, 2);
    cr_assert_str_eq(json_string_value(json_object_get(rep, "compression")), "ZLIB");
    for (size_t l = 0; l < 2; l++) {
        cr_assert_eq(ival(values(rep, l, "label", "int64_list"), 0), (int64_t)l);
        const json_t *d = values(rep, l, "dense", "float_list");
        cr_assert_eq(json_array_size(d), 13u);
        for (size_t k = 0; k < 13; k++) {
            long long x = ints[l][k] < 0 ? 0 : ints[l][k];
            cr_assert_eq(json_f32_bits(json_array_get(d, k)), bits_of(logf((float)x + 1.0f)), "line %zu I%zu", l,
                         k + 1);
        }
        for (size_t k = 0; k < 26; k++) { /* one id under each column's name */
            char key[24];
            snprintf(key, sizeof key, "C%zu", k + 1);
            const json_t *c = values(rep, l, key, "int64_list");
            cr_assert_eq(json_array_size(c), 1u);
            cr_assert_eq(ival(c, 0), (int64_t)((0x1000u * (k + 1) + l) % 1000), "line %zu C%zu", l, k + 1);
        }
    }
    json_decref(rep);
    tc_rmtree(dir);
    free(dir);
}

/* ---- failures ----------------------------------------------------------------- */

/* Bad input part-way: exit 2 naming the line, no output and no temporary
 * file; an older file under the output name is left as it was. */
Test(cli_data_convert, failure_leaves_no_output)
{
    char *dir = tc_tmpdir();
    char in[512], out[512], old[512];
    snprintf(in, sizeof in, "%s/in.csv", dir);
    write_text(in, "a,b\n1,2\n3,4\n5,oops\n7,8\n");
    snprintf(out, sizeof out, "%s/new.tfrecord", dir);
    tc_result r = tc_runf("data convert --from=csv %s --columns=a:int64,b:int64 --out=%s", in, out);
    cr_assert_eq(r.status, 2, "bad input data is exit 2; got %d", r.status);
    cr_assert(strstr(r.err, "error: ") && strstr(r.err, "in.csv:4"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    tc_done(&r);
    cr_assert(!exists(out));
    snprintf(old, sizeof old, "%s/old.tfrecord", dir);
    write_text(old, "previous contents");
    r = tc_runf("data convert --from=csv %s --columns=a:int64,b:int64 --out=%s --shards=2", in, old);
    cr_assert_eq(r.status, 2);
    tc_done(&r);
    char *kept = tc_slurp(old);
    cr_assert_str_eq(kept, "previous contents");
    free(kept);
    cr_assert_eq(leftovers(dir), 0);
    /* A missing input or an output directory that does not exist: exit 1. */
    r = tc_runf("data convert --from=criteo %s/none --out=%s", dir, out);
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, "none"), "%s", r.err);
    tc_done(&r);
    r = tc_runf("data convert --from=csv %s --columns=a:int64,b:int64 --out=%s/no/such/dir.tfrecord", in, dir);
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, "no/such/dir.tfrecord"), "%s", r.err);
    tc_done(&r);
    /* A header that differs from --columns. */
    r = tc_runf("data convert --from=csv %s --columns=a:int64,c:int64 --out=%s", in, out);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "header column 2"), "%s", r.err);
    tc_done(&r);
    cr_assert(!exists(out));
    cr_assert_eq(leftovers(dir), 0);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_data_convert, bad_arguments)
{
    static const struct {
        const char *args, *frag;
    } cases[] = {
        {"data convert x --out=y", "needs --from=idx, --from=csv or --from=criteo"},
        {"data convert --from=parquet x --out=y", "--from must be idx, csv or criteo (got 'parquet')"},
        {"data convert --from=idx x", "needs --out=FILE.tfrecord"},
        {"data convert --from=idx --out=y", "needs an INPUT file"},
        {"data convert --from=idx a b --out=y", "--from=idx takes one images file"},
        {"data convert --from=csv x --out=y", "--from=csv needs --columns=NAME:TYPE"},
        {"data convert --from=csv x --columns=a:double --out=y", "column 'a' has type 'double'"},
        {"data convert --from=csv x --columns=a --out=y", "'a' is not NAME:TYPE"},
        {"data convert --from=csv x --columns=a:int64,label:int64 --label_column=a --out=y",
         "another column is named \"label\""},
        {"data convert --from=csv x --labels=z --columns=a:int64 --out=y", "--labels is for --from=idx"},
        {"data convert --from=idx x --columns=a:int64 --out=y", "--columns is for --from=csv"},
        {"data convert --from=idx x --vocab_sizes=5 --out=y", "--vocab_sizes is for --from=criteo"},
        {"data convert --from=criteo x --vocab_sizes=1,2 --out=y", "--vocab_sizes has 2 sizes"},
        {"data convert --from=criteo x --vocab_sizes=-1 --out=y", "--vocab_sizes must be one size >= 0"},
        {"data convert --from=criteo x --out=y --compression=AUTO", "--compression must be GZIP, ZLIB or NONE"},
        {"data convert --from=criteo x --out=y --shards=0", "--shards must be a whole number in 1..10000"},
        {"data convert --from=criteo x --out=y --shards=3x", "--shards must be a whole number"},
        {"data convert --from=criteo x --out=y --bogus", "unknown option '--bogus'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tc_result r = tc_run(NULL, cases[i].args);
        cr_assert_eq(r.status, 2, "%s: exit %d", cases[i].args, r.status);
        cr_assert(strstr(r.err, cases[i].frag), "%s: %s", cases[i].args, r.err);
        cr_assert_str_eq(r.out, "");
        tc_done(&r);
    }
}

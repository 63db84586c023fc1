/* `tpuloop train`, `evaluate` and `predict` on the file datasets of the
 * "input" section: TFRecord files of tf.Example (plain and GZIP), CSV,
 * Criteo TSV and IDX, written here with a planted, learnable label.
 *
 * Example i of the planted problem has four features x in [-1, 1) (a hash
 * of i, exact in float32) and label 1 when x0 + x1 > x2 + x3, else 0. The
 * same examples are written as TFRecord (feature "x" of 4 floats) and as CSV
 * (columns a, b, c, d), so the two read the same values in the same order
 * and, with the same seed, must train the same bits (params_digest).
 *
 * Each run trains a tiny MLP for a few dozen steps on 2 devices, a fraction
 * of a second. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/tfrecord.h"
#include "test_cli_util.h"
#include "tpuloop/example.h"

#define N_TRAIN 1024 /* 4 files of 256 */
#define N_EVAL 256
#define FILES 4

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int64_t planted(int64_t i, float x[4])
{
    for (int k = 0; k < 4; k++)
        x[k] = (float)(mix((uint64_t)i * 4 + (uint64_t)k) >> 40) / (float)(1 << 23) - 1.0f;
    return x[0] + x[1] > x[2] + x[3] ? 1 : 0;
}

/* Examples [first, first + n) as a TFRecord file of tf.Example {x, label}. */
static void write_tfrecord(const char *path, int64_t first, int64_t n)
{
    tl_tfrecord_writer *w;
    cr_assert_eq(tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w), TL_OK, "%s", tl_last_error());
    tl_example_builder *b;
    cr_assert_eq(tl_example_builder_create(&b), TL_OK);
    for (int64_t i = first; i < first + n; i++) {
        float x[4];
        int64_t label = planted(i, x);
        tl_example_builder_reset(b);
        cr_assert_eq(tl_example_builder_add_floats(b, "x", x, 4), TL_OK);
        cr_assert_eq(tl_example_builder_add_int64s(b, "label", &label, 1), TL_OK);
        const uint8_t *rec;
        size_t len;
        cr_assert_eq(tl_example_builder_serialize(b, &rec, &len), TL_OK);
        cr_assert_eq(tl_tfrecord_write(w, rec, len), TL_OK);
    }
    tl_example_builder_destroy(b);
    cr_assert_eq(tl_tfrecord_writer_destroy(w), TL_OK);
}

/* src compressed as one GZIP stream into dst. */
static void gzip_file(const char *src, const char *dst)
{
    char *text = tc_slurp(src);
    cr_assert_not_null(text);
    FILE *f = fopen(src, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    gzFile z = gzopen(dst, "wb");
    cr_assert_not_null(z);
    cr_assert_eq(gzwrite(z, text, (unsigned)size), (int)size);
    cr_assert_eq(gzclose(z), Z_OK);
    free(text);
}

static void write_csv(const char *path, int64_t first, int64_t n)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "a,b,c,d,name,label\n");
    for (int64_t i = first; i < first + n; i++) {
        float x[4];
        int64_t label = planted(i, x);
        fprintf(f, "%.9g,%.9g,%.9g,%.9g,ex%lld,%lld\n", x[0], x[1], x[2], x[3], (long long)i, (long long)label);
    }
    cr_assert_eq(fclose(f), 0);
}

/* Criteo lines with a random label; I1 is 0..19 for label 0 and 80..99
 * for label 1, the other fields noise. */
static void write_criteo(const char *path, int64_t first, int64_t n)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int64_t i = first; i < first + n; i++) {
        uint64_t h = mix((uint64_t)i + 77);
        int label = (int)(h >> 63), i1 = (int)(h % 20) + 80 * label;
        fprintf(f, "%d\t%d", label, i1);
        for (int k = 1; k < 13; k++)
            fprintf(f, "\t%d", (int)(mix(h + (uint64_t)k) % 10));
        for (int k = 0; k < 26; k++)
            fprintf(f, "\t%08x", (unsigned)(mix(h + 100 + (uint64_t)k) & 0xffffffffu));
        fputc('\n', f);
    }
    cr_assert_eq(fclose(f), 0);
}

/* dir/train-0000k-of-00004 (k < FILES) and dir/eval-00000-of-00001, plus
 * GZIP copies under dir/gz, CSV under dir/csv and Criteo under dir/criteo. */
static char *write_all(void)
{
    char *dir = tc_tmpdir();
    char path[512], gz[512];
    snprintf(path, sizeof path, "%s/gz", dir);
    cr_assert_eq(mkdir(path, 0777), 0);
    for (int k = 0; k < FILES; k++) {
        snprintf(path, sizeof path, "%s/train-%05d-of-%05d", dir, k, FILES);
        write_tfrecord(path, (int64_t)k * (N_TRAIN / FILES), N_TRAIN / FILES);
        snprintf(gz, sizeof gz, "%s/gz/train-%05d-of-%05d.gz", dir, k, FILES);
        gzip_file(path, gz);
        snprintf(path, sizeof path, "%s/train-%05d.csv", dir, k);
        write_csv(path, (int64_t)k * (N_TRAIN / FILES), N_TRAIN / FILES);
        snprintf(path, sizeof path, "%s/day_%d", dir, k);
        write_criteo(path, (int64_t)k * (N_TRAIN / FILES), N_TRAIN / FILES);
    }
    snprintf(path, sizeof path, "%s/eval-00000-of-00001", dir);
    write_tfrecord(path, N_TRAIN, N_EVAL);
    snprintf(gz, sizeof gz, "%s/gz/eval-00000-of-00001.gz", dir);
    gzip_file(path, gz);
    snprintf(path, sizeof path, "%s/eval.csv", dir);
    write_csv(path, N_TRAIN, N_EVAL);
    snprintf(path, sizeof path, "%s/eval_day", dir);
    write_criteo(path, N_TRAIN, N_EVAL);
    return dir;
}

/* A configuration file in dir for the planted problem; returns its path
 * (malloc'd). input is the "input" section's JSON. */
static char *write_config(const char *dir, const char *name, const char *input)
{
    char *path = NULL;
    cr_assert(asprintf(&path, "%s/%s", dir, name) > 0);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "{\"train_batch_size\": 32, \"eval_batch_size\": 32, \"eval_steps\": 8, \"predict_batch_size\": 64,\n"
            " \"devices\": 2, \"tf_random_seed\": 7, \"log_step_count_steps\": 1000,\n"
            " \"params\": {\"num_classes\": 2},\n"
            " \"model\": {\"hidden_units\": [16], \"learning_rate\": 0.02},\n"
            " \"input\": %s}\n",
            input);
    cr_assert_eq(fclose(f), 0);
    return path;
}

#define TFRECORD_FEATURES                                                                                        \
    "\"features\": {\"x\": {\"type\": \"FixedLenFeature\", \"dtype\": \"float32\", \"shape\": [4]},"           \
    " \"label\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\", \"shape\": []}}"

static char *tfrecord_config(const char *dir, const char *extra)
{
    char input[2048];
    snprintf(input, sizeof input,
             "{\"dataset\": \"tfrecord\", \"files\": [\"%s/train-*-of-00004\"],"
             " \"eval_files\": [\"%s/eval-00000-of-00001\"], \"shuffle_buffer_size\": 256, " TFRECORD_FEATURES "%s}",
             dir, dir, extra);
    return write_config(dir, "tfrecord.json", input);
}

/* `tpuloop ARGS`: exit 0 and its summary line. */
static json_t *run_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static json_t *run_ok(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *args = NULL;
    cr_assert(vasprintf(&args, fmt, ap) > 0);
    va_end(ap);
    tc_result r = tc_run(NULL, args);
    cr_assert_eq(r.status, 0, "tpuloop %s\nstderr:\n%s", args, r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    free(args);
    return j;
}

static const char *digest(const json_t *j)
{
    const char *d = json_string_value(json_object_get(j, "params_digest"));
    cr_assert(d != NULL && strlen(d) == 64, "no params_digest");
    return d;
}

static double eval_field(const json_t *j, const char *k)
{
    json_t *e = json_object_get(j, "eval");
    cr_assert(json_is_object(e), "no eval in the summary");
    return json_number_value(json_object_get(e, k));
}

/* ---- TFRecord ------------------------------------------------------------ */

Test(cli_input, tfrecord_learns_and_is_deterministic)
{
    char *dir = write_all();
    char *cfg = tfrecord_config(dir, "");
    json_t *a = run_ok("train %s --train_steps=96", cfg);
    /* Loss falls from ln 2 (0.69: chance for two classes) and the planted
     * label is learned. */
    double loss = json_number_value(json_object_get(a, "loss"));
    cr_assert_lt(loss, 0.4, "final loss %g", loss);
    cr_assert_gt(eval_field(a, "accuracy"), 0.9, "accuracy %g", eval_field(a, "accuracy"));
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(a, "eval"), "examples")), N_EVAL);
    cr_assert_lt(eval_field(a, "loss"), 0.4);
    json_t *b = run_ok("train %s --train_steps=96", cfg);
    cr_assert_str_eq(digest(a), digest(b), "the same configuration twice gives other bits");
    /* Another seed shuffles otherwise: other bits. */
    json_t *c = run_ok("train %s --train_steps=96 --tf_random_seed=8", cfg);
    cr_assert_str_neq(digest(a), digest(c));
    /* iterations_per_loop is a pure performance knob, also with files. */
    json_t *d = run_ok("train %s --train_steps=96 --iterations_per_loop=5", cfg);
    cr_assert_str_eq(digest(a), digest(d), "iterations_per_loop changed the bits");
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

Test(cli_input, gzip_files_train_the_same_bits)
{
    char *dir = write_all();
    char *cfg = tfrecord_config(dir, "");
    json_t *plain = run_ok("train %s --train_steps=40", cfg);
    json_t *gz = run_ok("train %s --train_steps=40 --compression=GZIP --files=%s/gz/train-* "
                        "--eval_files=%s/gz/eval-*", cfg, dir, dir);
    cr_assert_str_eq(digest(plain), digest(gz), "GZIP files hold the same records");
    json_t *aut = run_ok("train %s --train_steps=40 --files=%s/gz/train-*", cfg, dir);
    cr_assert_eq(eval_field(plain, "accuracy"), eval_field(gz, "accuracy"), "GZIP eval_files");
    cr_assert_str_eq(digest(plain), digest(aut), "AUTO (the default) detects GZIP");
    /* A wrong compression is the reader's error, naming the file. */
    tc_result r = tc_runf("train %s --train_steps=40 --compression=ZLIB --files=%s/gz/train-* "
                          "--eval_files=%s/gz/eval-*", cfg, dir, dir);
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "error: ") && strstr(r.err, "train-00000-of-00004.gz"), "%s", r.err);
    tc_done(&r);
    json_decref(plain);
    json_decref(gz);
    json_decref(aut);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

Test(cli_input, sharded_invocations_by_file_and_by_record)
{
    char *dir = write_all();
    char *cfg = tfrecord_config(dir, "");
    /* PER_SHARD_V1 on 2 devices: two input_fn calls; 4 files: 2 each. */
    json_t *a = run_ok("train %s --train_steps=64 --per_host_input_for_training=false", cfg);
    cr_assert_gt(eval_field(a, "accuracy"), 0.85);
    json_t *b = run_ok("train %s --train_steps=64 --per_host_input_for_training=false", cfg);
    cr_assert_str_eq(digest(a), digest(b));
    /* One file for two calls: every call reads it and keeps every 2nd record. */
    json_t *c = run_ok("train %s --train_steps=64 --per_host_input_for_training=false --files=%s/train-00000-of-00004",
                       cfg, dir);
    cr_assert_eq(json_integer_value(json_object_get(c, "global_step")), 64);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

Test(cli_input, evaluate_and_predict_read_eval_files)
{
    char *dir = write_all();
    char *cfg = tfrecord_config(dir, "");
    json_t *t = run_ok("train %s --train_steps=64 --model_dir=%s/m --save_checkpoints_steps=32", cfg, dir);
    json_t *e = run_ok("evaluate %s --model_dir=%s/m", cfg, dir);
    cr_assert_eq(json_number_value(json_object_get(e, "accuracy")), eval_field(t, "accuracy"),
                 "evaluate reads the eval_files train evaluated on");
    cr_assert_eq(json_integer_value(json_object_get(e, "global_step")), 64);
    cr_assert_str_eq(digest(e), digest(t));
    /* eval_files null: evaluate reads files. */
    json_t *e2 = run_ok("evaluate %s --model_dir=%s/m --eval_files=null", cfg, dir);
    cr_assert_eq(json_integer_value(json_object_get(e2, "examples")), 256);
    /* predict reads every example of eval_files, in order. */
    json_t *p = run_ok("predict %s --model_dir=%s/m --predictions_out=%s/p.csv", cfg, dir, dir);
    json_t *pred = json_object_get(p, "predictions");
    cr_assert_eq(json_integer_value(json_object_get(pred, "rows")), N_EVAL);
    char path[512];
    snprintf(path, sizeof path, "%s/p.csv", dir);
    char *text = tc_slurp(path);
    cr_assert_not_null(text);
    int right = 0, rows = 0;
    char *line = strchr(text, '\n') + 1;
    while (line != NULL && *line) {
        long long idx, cls;
        cr_assert_eq(sscanf(line, "%lld,%lld", &idx, &cls), 2);
        cr_assert_eq(idx, rows);
        float x[4];
        right += planted(N_TRAIN + idx, x) == cls;
        rows++;
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    cr_assert_eq(rows, N_EVAL);
    cr_assert_gt(right, N_EVAL * 0.85, "%d of %d predicted right", right, rows);
    free(text);
    /* train --predict too. */
    json_t *tp = run_ok("train %s --train_steps=8 --predict --predictions_out=%s/q.jsonl", cfg, dir);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(tp, "predictions"), "rows")), N_EVAL);
    json_decref(t);
    json_decref(e);
    json_decref(e2);
    json_decref(p);
    json_decref(tp);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

Test(cli_input, resume_reads_on_where_the_stopped_run_was)
{
    char *dir = write_all();
    char *cfg = tfrecord_config(dir, "");
    /* 80 steps cross two epochs (32 steps each) of a shuffled, repeated
     * input; the split run restores the datasets' positions from the
     * checkpoint at step 40. Both per-host (one call) and per-shard (two). */
    static const char *const modes[] = {"true", "false"};
    for (int m = 0; m < 2; m++) {
        json_t *whole = run_ok("train %s --train_steps=80 --per_host_input_for_training=%s", cfg, modes[m]);
        json_t *h1 = run_ok("train %s --train_steps=40 --model_dir=%s/r%d --save_checkpoints_steps=20 "
                            "--per_host_input_for_training=%s", cfg, dir, m, modes[m]);
        cr_assert_eq(json_integer_value(json_object_get(h1, "global_step")), 40);
        for (int k = 0; k < 2; k++) {
            json_t *w = json_object_get(h1, k == 0 ? "infeed_start_seconds" : "infeed_wait_seconds");
            cr_assert(json_is_real(w) && json_real_value(w) >= 0 && json_real_value(w) < 60, "infeed wait %d", k);
        }
        json_t *h2 = run_ok("train %s --train_steps=40 --model_dir=%s/r%d --save_checkpoints_steps=20 "
                            "--per_host_input_for_training=%s", cfg, dir, m, modes[m]);
        cr_assert_eq(json_integer_value(json_object_get(h2, "restored_from_step")), 40);
        cr_assert_eq(json_integer_value(json_object_get(h2, "global_step")), 80);
        cr_assert_str_eq(digest(whole), digest(h2), "stopped at 40 and resumed (%s) != one run to 80", modes[m]);
        json_decref(whole);
        json_decref(h1);
        json_decref(h2);
    }
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

Test(cli_input, sigterm_then_resume_gives_the_uninterrupted_digest)
{
    char *dir = write_all();
    char *cfg = tfrecord_config(dir, "");
    json_t *whole = run_ok("train %s --max_steps=400", cfg);
    char md[512];
    snprintf(md, sizeof md, "--model_dir=%s/s", dir);
    const char *argv[] = {"train", cfg, "--max_steps=400", md, "--save_checkpoints_steps=2", NULL};
    tc_proc p;
    tc_spawn(&p, argv);
    /* Wait for the first checkpoint, then ask it to stop. */
    char ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/s/checkpoint", dir);
    double t0 = tc_now();
    while (access(ckpt, F_OK) != 0 && tc_now() - t0 < 60)
        tc_sleep(0.002);
    kill(p.pid, SIGTERM);
    tc_result r = tc_finish(&p, 120);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *s = tc_json(&r);
    int64_t at = json_integer_value(json_object_get(s, "global_step"));
    json_t *res = run_ok("train %s --max_steps=400 %s --save_checkpoints_steps=2", cfg, md);
    cr_assert(json_is_true(json_object_get(s, "stopped")), "SIGTERM did not stop the run: %s", r.out);
    cr_assert_lt(at, 400);
    cr_assert_eq(json_integer_value(json_object_get(res, "restored_from_step")), at);
    cr_assert_eq(json_integer_value(json_object_get(res, "global_step")), 400);
    cr_assert_str_eq(digest(whole), digest(res), "stopped at step %lld and resumed != one run", (long long)at);
    tc_done(&r);
    json_decref(whole);
    json_decref(s);
    json_decref(res);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

/* epochs repeat the files that many times (before batching) and training
 * ends where they end, as Estimator.train ends at OutOfRange. */
Test(cli_input, epochs_end_with_the_input)
{
    char *dir = write_all();
    char *cfg = tfrecord_config(dir, "");
    json_t *j = run_ok("train %s --epochs=2", cfg);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 2 * N_TRAIN / 32);
    cr_assert(json_is_true(json_object_get(j, "end_of_input")));
    json_decref(j);
    /* Three passes of 1024 in batches of 96: 3072 / 96 = 32 steps. */
    j = run_ok("train %s --epochs=3 --train_batch_size=96", cfg);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 3 * N_TRAIN / 96);
    json_decref(j);
    /* Less than one batch: no batch to trace the model with. */
    tc_result r = tc_runf("train %s --epochs=1 --train_batch_size=2048", cfg);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "error: input_fn (train, invocation 0): the dataset is empty"), "%s", r.err);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

Test(cli_input, bad_inputs_are_named)
{
    char *dir = write_all();
    char *cfg = tfrecord_config(dir, "");
    tc_result r = tc_runf("train %s --train_steps=4 --files=%s/nothing-*", cfg, dir);
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "error: ") && strstr(r.err, "nothing-*"), "%s", r.err);
    tc_done(&r);
    /* A spec the records do not fit: the key is named. */
    r = tc_runf("train %s --train_steps=4 --features='{\"x\": {\"type\": \"FixedLenFeature\", \"dtype\": \"float32\", "
                "\"shape\": [5]}, \"label\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\"}}'",
                cfg);
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "error: ") && strstr(r.err, "\"x\""), "%s", r.err);
    tc_done(&r);
    /* A configuration error comes before anything is read. */
    r = tc_runf("train %s --train_steps=4 --cycle_length=0", cfg);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: cycle_length must be an int in [1, 65536]; got 0 [from flag --cycle_length]"),
              "%s", r.err);
    tc_done(&r);
    r = tc_runf("config %s --dataset=tfrecord --features=null", cfg);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: dataset tfrecord needs features"), "%s", r.err);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

Test(cli_input, skip_corrupt_records_flag)
{
    char *dir = write_all();
    char *cfg = tfrecord_config(dir, "");
    /* A file whose last record's data is damaged (its CRC fails). */
    char path[512];
    snprintf(path, sizeof path, "%s/train-00003-of-00004", dir);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fseek(f, -8, SEEK_END);
    fputc(0x5a, f);
    fclose(f);
    tc_result r = tc_runf("train %s --train_steps=64", cfg);
    cr_assert_neq(r.status, 0, "a corrupt record fails the run");
    cr_assert(strstr(r.err, "train-00003-of-00004"), "%s", r.err);
    tc_done(&r);
    r = tc_runf("train %s --train_steps=64 --skip_corrupt_records=true", cfg);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *j = tc_json(&r);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 64);
    json_decref(j);
    /* Each skip is logged naming the file, and the total at the end. */
    cr_assert(strstr(r.err, "train-00003-of-00004") != NULL, "%s", r.err);
    cr_assert(strstr(r.err, "skipped ") != NULL && strstr(r.err, " corrupt record") != NULL, "%s", r.err);
    tc_done(&r);
    json_t *k = run_ok("train %s --train_steps=64 --skip_corrupt_records", cfg);
    cr_assert_eq(json_integer_value(json_object_get(k, "global_step")), 64);
    json_decref(k);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

/* ---- CSV, Criteo, IDX ------------------------------------------------------ */

Test(cli_input, csv_learns_and_matches_tfrecord)
{
    char *dir = write_all();
    char input[2048];
    snprintf(input, sizeof input,
             "{\"dataset\": \"csv\", \"files\": [\"%s/train-*.csv\"], \"eval_files\": [\"%s/eval.csv\"],"
             " \"shuffle_buffer_size\": 256, \"csv_columns\": [{\"name\": \"a\", \"type\": \"float32\"},"
             " {\"name\": \"b\", \"type\": \"float32\"}, {\"name\": \"c\", \"type\": \"float32\"},"
             " {\"name\": \"d\", \"type\": \"float32\"}, {\"name\": \"name\", \"type\": \"string\"},"
             " {\"name\": \"label\", \"type\": \"int64\"}]}",
             dir, dir);
    char *cfg = write_config(dir, "csv.json", input);
    json_t *c = run_ok("train %s --train_steps=96", cfg);
    cr_assert_gt(eval_field(c, "accuracy"), 0.9);
    char *tcfg = tfrecord_config(dir, "");
    json_t *t = run_ok("train %s --train_steps=96", tcfg);
    cr_assert_str_eq(digest(c), digest(t), "the same examples as CSV and as TFRecord train other bits");
    /* feature_keys picks and orders the columns: another order, other bits. */
    json_t *k = run_ok("train %s --train_steps=96 --feature_keys=[\\\"b\\\",\\\"a\\\",\\\"c\\\",\\\"d\\\"]", cfg);
    cr_assert_str_neq(digest(c), digest(k));
    cr_assert_gt(eval_field(k, "accuracy"), 0.9);
    json_decref(c);
    json_decref(t);
    json_decref(k);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
    free(tcfg);
}

Test(cli_input, criteo_learns)
{
    char *dir = write_all();
    char input[1024];
    snprintf(input, sizeof input,
             "{\"dataset\": \"criteo\", \"files\": [\"%s/day_*\"], \"eval_files\": [\"%s/eval_day\"],"
             " \"feature_keys\": [\"dense\"], \"shuffle_buffer_size\": 64,"
             " \"vocab_sizes\": [100,100,100,100,100,100,100,100,100,100,100,100,100,"
             "100,100,100,100,100,100,100,100,100,100,100,100,100]}",
             dir, dir);
    char *cfg = write_config(dir, "criteo.json", input);
    json_t *a = run_ok("train %s --train_steps=160 --learning_rate=0.05", cfg);
    cr_assert_gt(eval_field(a, "accuracy"), 0.85, "accuracy %g", eval_field(a, "accuracy"));
    json_t *b = run_ok("train %s --train_steps=160 --learning_rate=0.05", cfg);
    cr_assert_str_eq(digest(a), digest(b));
    json_decref(a);
    json_decref(b);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

Test(cli_input, idx_files)
{
    char *dir = tc_tmpdir();
    tc_write_tiny_mnist(dir, 512, 128, 8);
    char input[1024];
    snprintf(input, sizeof input,
             "{\"dataset\": \"idx\", \"files\": [\"%s/train-images-idx3-ubyte\", \"%s/train-labels-idx1-ubyte\"],"
             " \"eval_files\": [\"%s/t10k-images-idx3-ubyte\", \"%s/t10k-labels-idx1-ubyte\"],"
             " \"scale\": 0.00392156862745098, \"shuffle_buffer_size\": 512}",
             dir, dir, dir, dir);
    char *cfg = write_config(dir, "idx.json", input);
    json_t *a = run_ok("train %s --train_steps=32 --eval_steps=4 --params={\\\"num_classes\\\":10}", cfg);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(a, "eval"), "examples")), 4 * 32);
    json_t *b = run_ok("train %s --train_steps=32 --eval_steps=4 --params={\\\"num_classes\\\":10}", cfg);
    cr_assert_str_eq(digest(a), digest(b));
    json_t *p = run_ok("train %s --train_steps=4 --eval_steps=4 --params={\\\"num_classes\\\":10} --predict "
                       "--predictions_out=%s/p.jsonl", cfg, dir);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(p, "predictions"), "rows")), 128);
    json_decref(a);
    json_decref(b);
    json_decref(p);
    tc_rmtree(dir);
    free(dir);
    free(cfg);
}

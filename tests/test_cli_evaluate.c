/* `tpuloop evaluate` and `tpuloop predict` on a model_dir that `tpuloop
 * train` wrote: the same metrics (to the bit) and the same prediction file as
 * the training run's own evaluation and --predict of the same parameters;
 * --checkpoint for an older one; the errors without a checkpoint; the
 * fallback past a corrupt one. And `ckpt list` / `ckpt inspect` of what
 * training wrote. The runs use a tiny dataset in Fashion-MNIST's format
 * (64 features; 512 training and 128 test examples). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_cli_util.h"

/* The model and data flags every command of a test shares. */
static char *model_flags(const char *data, const char *dir)
{
    char *s = NULL;
    int n = asprintf(&s,
                     "--data_dir=%s --train_batch_size=16 --eval_batch_size=32 --eval_steps=4 "
                     "--predict_batch_size=24 --hidden_units=[8] --devices=2 --tf_random_seed=3 "
                     "--log_step_count_steps=1000 --model_dir=%s",
                     data, dir);
    cr_assert(n > 0);
    return s;
}

typedef struct trained {
    char *data, *dir, *flags;
    json_t *summary;   /* train's summary line */
    char *predictions; /* train --predict's file (CSV), its text */
} trained;

/* Trains 40 steps, saving every 10 (keeping all), then evaluates and
 * predicts to a CSV file. */
static void train_once(trained *t)
{
    t->data = tc_tmpdir();
    t->dir = tc_tmpdir();
    tc_write_tiny_mnist(t->data, 512, 128, 8);
    t->flags = model_flags(t->data, t->dir);
    char pred[4200];
    snprintf(pred, sizeof pred, "%s/train_predictions.csv", t->data);
    tc_result r = tc_runf("train %s --max_steps=40 --iterations_per_loop=5 --save_checkpoints_steps=10 "
                          "--keep_checkpoint_max=0 --predict --predictions_out=%s",
                          t->flags, pred);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    t->summary = tc_json(&r);
    tc_done(&r);
    cr_assert_eq(json_integer_value(json_object_get(t->summary, "global_step")), 40);
    cr_assert_not_null(json_object_get(t->summary, "eval"));
    t->predictions = tc_slurp(pred);
    cr_assert_not_null(t->predictions);
}

static void trained_free(trained *t)
{
    json_decref(t->summary);
    free(t->predictions);
    tc_rmtree(t->dir);
    tc_rmtree(t->data);
    free(t->dir);
    free(t->data);
    free(t->flags);
}

/* Two JSON numbers are the same double, bit for bit. */
static void same_number(json_t *a, json_t *b, const char *what)
{
    cr_assert(json_is_number(a) && json_is_number(b), "%s", what);
    double x = json_number_value(a), y = json_number_value(b);
    cr_assert(memcmp(&x, &y, sizeof x) == 0, "%s: %.17g vs %.17g", what, x, y);
}

Test(cli_evaluate, evaluate_and_predict_match_the_training_runs_own)
{
    trained t;
    train_once(&t);
    tc_result r = tc_runf("evaluate %s", t.flags);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *e = tc_json(&r);
    tc_done(&r);
    json_t *want = json_object_get(t.summary, "eval");
    const char *keys[] = {"loss", "accuracy"};
    for (int i = 0; i < 2; i++)
        same_number(json_object_get(e, keys[i]), json_object_get(want, keys[i]), keys[i]);
    cr_assert_eq(json_integer_value(json_object_get(e, "examples")), 128);
    cr_assert_eq(json_integer_value(json_object_get(e, "global_step")), 40);
    cr_assert_str_eq(json_string_value(json_object_get(e, "params_digest")),
                     json_string_value(json_object_get(t.summary, "params_digest")));
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s/model.ckpt-40.safetensors", t.dir);
    cr_assert_str_eq(json_string_value(json_object_get(e, "checkpoint")), ckpt);
    json_decref(e);

    /* The same file, byte for byte, as CSV and as JSON Lines. */
    char pred[4200];
    snprintf(pred, sizeof pred, "%s/predictions.csv", t.data);
    r = tc_runf("predict %s --predictions_out=%s", t.flags, pred);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *p = tc_json(&r);
    tc_done(&r);
    cr_assert_eq(json_integer_value(json_object_get(p, "global_step")), 40);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(p, "predictions"), "rows")), 128);
    json_decref(p);
    char *csv = tc_slurp(pred);
    cr_assert_not_null(csv);
    cr_assert_str_eq(csv, t.predictions, "predict writes what train --predict wrote");
    free(csv);
    snprintf(pred, sizeof pred, "%s/predictions.jsonl", t.data);
    r = tc_runf("predict %s --predictions_out=%s", t.flags, pred);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    tc_done(&r);
    char *jsonl = tc_slurp(pred);
    cr_assert(strncmp(jsonl, "{\"index\":0,\"class\":", 19) == 0, "%s", jsonl);
    int lines = 0;
    for (const char *c = jsonl; *c; c++)
        lines += *c == '\n';
    cr_assert_eq(lines, 128);
    free(jsonl);
    trained_free(&t);
}

Test(cli_evaluate, checkpoint_flag_loads_an_older_checkpoint)
{
    trained t;
    train_once(&t);
    /* The parameters at step 20 are those of a run trained to step 20. */
    char *fresh = tc_tmpdir(), *flags20 = model_flags(t.data, fresh);
    tc_result r = tc_runf("train %s --max_steps=20 --iterations_per_loop=5", flags20);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j20 = tc_json(&r);
    tc_done(&r);
    /* Both spellings: the file, and TensorFlow's prefix. */
    const char *names[] = {"model.ckpt-20.safetensors", "model.ckpt-20"};
    for (int i = 0; i < 2; i++) {
        r = tc_runf("evaluate %s --checkpoint=%s/%s", t.flags, t.dir, names[i]);
        cr_assert_eq(r.status, 0, "stderr: %s", r.err);
        json_t *e = tc_json(&r);
        tc_done(&r);
        cr_assert_eq(json_integer_value(json_object_get(e, "global_step")), 20);
        cr_assert_str_eq(json_string_value(json_object_get(e, "params_digest")),
                         json_string_value(json_object_get(j20, "params_digest")));
        same_number(json_object_get(e, "loss"), json_object_get(json_object_get(j20, "eval"), "loss"), "loss");
        json_decref(e);
    }
    r = tc_runf("predict %s --checkpoint=%s/model.ckpt-20 --predictions_out=%s/p20.csv", t.flags, t.dir, t.data);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *p = tc_json(&r);
    cr_assert_eq(json_integer_value(json_object_get(p, "global_step")), 20);
    json_decref(p);
    tc_done(&r);
    json_decref(j20);
    tc_rmtree(fresh);
    free(fresh);
    free(flags20);
    trained_free(&t);
}

Test(cli_evaluate, no_checkpoint_is_an_error_and_a_corrupt_one_is_skipped)
{
    char *data = tc_tmpdir(), *empty = tc_tmpdir();
    tc_write_tiny_mnist(data, 512, 128, 8);
    char *flags = model_flags(data, empty);
    const char *cmds[] = {"evaluate", "predict"};
    for (int i = 0; i < 2; i++) {
        tc_result r = tc_runf("%s %s", cmds[i], flags);
        cr_assert_eq(r.status, 1, "%s: %s", cmds[i], r.err);
        char want[4200];
        snprintf(want, sizeof want, "error: Could not find trained model in model_dir: %s.", empty);
        cr_assert(strstr(r.err, want), "%s", r.err);
        cr_assert_str_eq(r.out, "");
        tc_done(&r);
    }
    tc_result r = tc_runf("evaluate --data_dir=%s --eval_batch_size=32 --eval_steps=4", data);
    cr_assert_eq(r.status, 2, "neither model_dir nor --checkpoint: %s", r.err);
    tc_done(&r);
    r = tc_runf("evaluate %s --checkpoint=%s/model.ckpt-7", flags, empty);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "model.ckpt-7"), "%s", r.err);
    tc_done(&r);
    free(flags);

    trained t;
    train_once(&t);
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s/model.ckpt-40.safetensors", t.dir);
    FILE *f = fopen(ckpt, "r+b");
    cr_assert_not_null(f);
    fseek(f, -3, SEEK_END);
    fputc(0x5a, f);
    fclose(f);
    r = tc_runf("evaluate %s", t.flags);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.err, ckpt) && strstr(r.err, "falling back"), "a warning names the file: %s", r.err);
    json_t *e = tc_json(&r);
    cr_assert_eq(json_integer_value(json_object_get(e, "global_step")), 30);
    json_decref(e);
    tc_done(&r);
    r = tc_runf("evaluate %s --checkpoint=%s", t.flags, ckpt);
    cr_assert_eq(r.status, 1, "a corrupt named checkpoint is an error, not a fallback");
    cr_assert(strstr(r.err, ckpt) && strstr(r.err, "checksum"), "%s", r.err);
    tc_done(&r);
    tc_rmtree(empty);
    tc_rmtree(data);
    free(empty);
    free(data);
    trained_free(&t);
}

Test(cli_evaluate, ckpt_list_and_inspect_what_training_wrote)
{
    trained t;
    train_once(&t);
    tc_result r = tc_runf("ckpt list %s --json", t.dir);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    /* Saved at the start, every 10 steps and not again at the end (T26). */
    json_t *rows = json_object_get(j, "checkpoints");
    cr_assert_eq(json_array_size(rows), 5u, "%s", json_dumps(j, 0));
    for (int i = 0; i < 5; i++) {
        json_t *row = json_array_get(rows, (size_t)i);
        cr_assert_eq(json_integer_value(json_object_get(row, "step")), 10 * i);
        cr_assert(json_is_true(json_object_get(row, "valid")));
        /* keep_checkpoint_max 0 lists only the latest, as TF's Saver */
        cr_assert_eq(json_is_true(json_object_get(row, "in_index")), i == 4);
        cr_assert_eq(json_is_true(json_object_get(row, "latest")), i == 4);
    }
    cr_assert_eq(json_integer_value(json_object_get(j, "resume_step")), 40);
    cr_assert_str_eq(json_string_value(json_object_get(j, "index")), "model.ckpt-40");
    json_decref(j);

    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s/model.ckpt-40.safetensors", t.dir);
    r = tc_runf("ckpt inspect %s", ckpt);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    static const char *const lines[] = {"    dense/kernel (F32) [64,8]\n",   "    dense/kernel/Adam (F32) [64,8]\n",
                                        "    dense/kernel/Adam_1 (F32) [64,8]\n", "    dense/bias (F32) [8]\n",
                                        "    dense_1/kernel (F32) [8,10]\n", "    dense_1/bias (F32) [10]\n",
                                        "    global_step (I64) []\n"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        cr_assert(strstr(r.out, lines[i]), "no '%s' in\n%s", lines[i], r.out);
    cr_assert(strstr(r.out, "step 40, format tpuloop-ckpt version 1"), "%s", r.out);
    cr_assert(strstr(r.out, "data crc32c verified, header crc32c verified"), "%s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s --tensor=global_step --json", ckpt);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    j = tc_json(&r);
    json_t *v = json_object_get(json_object_get(j, "tensor"), "values");
    cr_assert_eq(json_array_size(v), 1u);
    cr_assert_eq(json_integer_value(json_array_get(v, 0)), 40);
    json_decref(j);
    tc_done(&r);
    trained_free(&t);
}

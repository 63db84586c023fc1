/* The `tpuloop` command as a new user meets it, over the job layer: --help
 * for every command, `help COMMAND`, progress lines, the start line, a
 * wrong data_dir, the predictions' format, simulated hosts, and epochs as a
 * property of the input that a resumed run finishes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli_util.h"
#include "tpuloop/summary.h"

/* A tiny Fashion-MNIST-shaped set: 512 training examples of 8 x 8. */
static char *tiny_data(void)
{
    char *data = tc_tmpdir();
    tc_write_tiny_mnist(data, 512, 128, 8);
    return data;
}

#define TINY "--train_batch_size=16 --hidden_units=[8] --devices=2 --tf_random_seed=7"

static json_t *ok_json(tc_result r)
{
    cr_assert_eq(r.status, 0, "stderr:\n%s", r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    return j;
}
#define run_ok(...) ok_json(tc_runf(__VA_ARGS__))

static const char *digest_of(json_t *j)
{
    const char *d = json_string_value(json_object_get(j, "params_digest"));
    cr_assert(d != NULL && strlen(d) == 64);
    return d;
}

Test(cli_job, every_command_has_help)
{
    static const char *const names[] = {"train", "evaluate", "predict", "config", "ckpt", "data", "devices"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        tc_result r = tc_runf("%s --help", names[i]);
        cr_assert_eq(r.status, 0, "%s --help: %s", names[i], r.err);
        char want[64];
        snprintf(want, sizeof want, "usage: tpuloop %s", names[i]);
        cr_assert(strstr(r.out, want), "%s --help:\n%s", names[i], r.out);
        tc_done(&r);
        r = tc_runf("help %s", names[i]);
        cr_assert_eq(r.status, 0, "help %s: %s", names[i], r.err);
        cr_assert(strstr(r.out, want), "help %s:\n%s", names[i], r.out);
        tc_done(&r);
    }
    /* After other arguments too, and -h. */
    tc_result r = tc_runf("train configs/mlp_fashion_mnist.json --train_steps=3 -h");
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "usage: tpuloop train") && strstr(r.out, "--predictions_out"), "%s", r.out);
    tc_done(&r);
    r = tc_runf("help options");
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "iterations_per_loop") && strstr(r.out, "train_batch_size"));
    tc_done(&r);
    r = tc_runf("help nonsense");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: no command 'nonsense'"), "%s", r.err);
    tc_done(&r);
}

/* One line per loss log: the mean loss since the last line beside the
 * last, and a rate (with the time left) only once there is one. */
Test(cli_job, progress_lines_show_no_zero_rates)
{
    char *data = tiny_data();
    tc_result r = tc_runf("train --data_dir=%s " TINY " --train_steps=60 --iterations_per_loop=3 "
                          "--log_step_count_steps=10",
                          data);
    cr_assert_eq(r.status, 0, "%s", r.err);
    int lines = 0;
    for (char *p = r.err; (p = strstr(p, "step ")) != NULL; p++) {
        char *eol = strchr(p, '\n');
        if (eol == NULL || strncmp(p, "step ", 5) != 0 || (p > r.err && p[-1] != '\n'))
            continue;
        lines++;
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(eol - p), p);
        cr_assert(strstr(line, "/60 loss = ") && strstr(line, "(mean "), "%s", line);
        cr_assert_null(strstr(line, " 0.0 steps/s"), "%s", line);
        cr_assert(strstr(line, " left") == NULL || strstr(line, "steps/s") != NULL, "%s", line);
        if (lines == 1)
            cr_assert_null(strstr(line, "steps/s"), "the first line has no rate yet: %s", line);
    }
    cr_assert(lines >= 3, "%s", r.err);
    tc_done(&r);
    tc_rmtree(data);
    free(data);
}

Test(cli_job, a_wrong_data_dir_is_an_error)
{
    tc_result r = tc_runf("train configs/mlp_fashion_mnist.json --data_dir=/nonexistent/fmnist --train_steps=3");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "error: ") && strstr(r.err, "/nonexistent/fmnist"), "%s", r.err);
    cr_assert_null(strstr(r.err, "synthetic data shaped like"), "%s", r.err);
    cr_assert(r.out[0] == '\0', "no summary line: %s", r.out);
    tc_done(&r);
    /* Synthetic data when asked for. */
    r = tc_runf("train configs/mlp_fashion_mnist.json --dataset=synthetic --train_steps=3 --eval_steps=1");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
}

Test(cli_job, predictions_go_to_csv_or_json_lines_only)
{
    char *data = tiny_data();
    tc_result r = tc_runf("train --data_dir=%s " TINY " --train_steps=2 --predict_batch_size=64 "
                          "--predictions_out=p.parquet",
                          data);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "'p.parquet' is a .parquet") && strstr(r.err, ".csv") && strstr(r.err, ".jsonl"), "%s",
              r.err);
    cr_assert_null(strstr(r.err, "training "), "refused before training: %s", r.err);
    tc_done(&r);
    char *dir = tc_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/p.jsonl", dir);
    r = tc_runf("train --data_dir=%s " TINY " --train_steps=2 --predict_batch_size=64 --predictions_out=%s", data,
                path);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    char *text = tc_slurp(path);
    cr_assert(text != NULL && strncmp(text, "{\"index\":0,\"class\":", 19) == 0, "%s", text ? text : "(none)");
    free(text);
    tc_rmtree(dir);
    free(dir);
    tc_rmtree(data);
    free(data);
}

/* Hosts simulated in one process: training does not fail on the rules of
 * modes it does not run, and the start line counts every host's devices. */
Test(cli_job, simulated_hosts_train_whatever_eval_and_predict_allow)
{
    char *data = tiny_data();
    tc_result r = tc_runf("train --data_dir=%s " TINY " --devices=2 --num_hosts=2 --train_steps=4 "
                          "--eval_batch_size=32 --eval_steps=1 --predict_batch_size=32",
                          data);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "on 4 devices (2 hosts)"), "%s", r.err);
    cr_assert(strstr(r.err, "warning: not evaluating after training: TPUEstimator.evaluate is only supported under "
                            "three conditions"),
              "%s", r.err);
    json_t *j = tc_json(&r);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 4);
    cr_assert_null(json_object_get(j, "eval"));
    json_decref(j);
    tc_done(&r);
    /* PER_HOST_V2 evaluates on several hosts. */
    j = run_ok("train --data_dir=%s " TINY " --devices=2 --num_hosts=2 --train_steps=4 --eval_batch_size=32 "
               "--eval_steps=1 %s",
               data, "--per_host_input_for_training=PER_HOST_V2");
    cr_assert_not_null(json_object_get(j, "eval"));
    json_decref(j);
    tc_rmtree(data);
    free(data);
}

/* 512 examples, batches of 16: 32 steps an epoch. Two epochs end at 64,
 * and a run stopped at 40 and resumed ends there too, with the same bits
 * (before, epochs became a relative train_steps and the resume ran on). */
Test(cli_job, a_resumed_run_finishes_the_same_epochs)
{
    char *data = tiny_data(), *dir = tc_tmpdir();
    json_t *whole = run_ok("train --data_dir=%s " TINY " --epochs=2 --iterations_per_loop=7%s", data, "");
    cr_assert_eq(json_integer_value(json_object_get(whole, "global_step")), 64);
    cr_assert(json_is_true(json_object_get(whole, "end_of_input")));
    char extra[600];
    snprintf(extra, sizeof extra, " --model_dir=%s --max_steps=40", dir);
    json_t *j = run_ok("train --data_dir=%s " TINY " --epochs=2 --iterations_per_loop=7%s", data, extra);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 40);
    json_decref(j);
    /* The model_dir's config.json holds max_steps 40: null clears it. */
    snprintf(extra, sizeof extra, " --model_dir=%s --max_steps=null", dir);
    j = run_ok("train --data_dir=%s " TINY " --epochs=2 --iterations_per_loop=7%s", data, extra);
    cr_assert_eq(json_integer_value(json_object_get(j, "restored_from_step")), 40);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 64);
    cr_assert_str_eq(digest_of(j), digest_of(whole));
    json_decref(j);
    /* Once more: the input has ended, nothing trains. */
    j = run_ok("train --data_dir=%s " TINY " --epochs=2 --iterations_per_loop=7%s", data, extra);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 64);
    cr_assert(json_is_true(json_object_get(j, "end_of_input")));
    cr_assert_str_eq(digest_of(j), digest_of(whole));
    json_decref(j);
    json_decref(whole);
    tc_rmtree(dir);
    tc_rmtree(data);
    free(dir);
    free(data);
}

/* The plain Estimator path the README promises: train, evaluate and
 * predict with use_tpu false, and evaluate with eval_on_tpu false, which
 * without eval_steps reads the whole evaluation input. */
Test(cli_job, use_tpu_false_and_eval_on_tpu_false_run)
{
    char *data = tiny_data(), *dir = tc_tmpdir();
    char md[600], pred[700];
    snprintf(md, sizeof md, "--model_dir=%s", dir);
    snprintf(pred, sizeof pred, "--predictions_out=%s/p.csv", dir);
    json_t *j = run_ok("train --data_dir=%s " TINY " --use_tpu=false --train_steps=6 --eval_batch_size=50 "
                       "--eval_steps=null --predict_batch_size=40 --predict %s %s",
                       data, md, pred);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 6);
    json_t *e = json_object_get(j, "eval");
    cr_assert_eq(json_integer_value(json_object_get(e, "examples")), 128, "all 128, the last batch short");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "predictions"), "rows")), 128);
    json_decref(j);
    j = run_ok("evaluate --data_dir=%s " TINY " --use_tpu=false --eval_batch_size=50 %s", data, md);
    cr_assert_eq(json_integer_value(json_object_get(j, "examples")), 128);
    json_decref(j);
    j = run_ok("evaluate --data_dir=%s " TINY " --eval_on_tpu=false --eval_batch_size=100 %s", data, md);
    cr_assert_eq(json_integer_value(json_object_get(j, "examples")), 128);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 6);
    json_decref(j);
    j = run_ok("predict --data_dir=%s " TINY " --use_tpu=false --predict_batch_size=64 %s %s", data, md, pred);
    json_decref(j);
    tc_rmtree(dir);
    tc_rmtree(data);
    free(dir);
    free(data);
}

/* Steps of the scalar `tag` in dir's event files, in file order. */
static int event_steps(const char *dir, const char *tag, int64_t *steps, int max)
{
    char pattern[800];
    cr_assert(snprintf(pattern, sizeof pattern, "ls %s/events.out.tfevents.* 2>/dev/null", dir) < (int)sizeof pattern);
    FILE *ls = popen(pattern, "r");
    cr_assert_not_null(ls);
    char path[700];
    int n = 0;
    while (fgets(path, sizeof path, ls) != NULL) {
        path[strcspn(path, "\n")] = '\0';
        tl_summary_reader *r;
        cr_assert_eq(tl_summary_reader_open(path, &r), TL_OK, "%s", tl_last_error());
        const tl_event *ev;
        while (tl_summary_reader_next(r, &ev) == TL_OK && ev != NULL)
            for (size_t k = 0; k < ev->num_values; k++)
                if (strcmp(ev->values[k].tag, tag) == 0 && n < max)
                    steps[n++] = ev->step;
        tl_summary_reader_close(r);
    }
    pclose(ls);
    return n;
}

/* tf.estimator.train_and_evaluate, locally: the checkpoints are evaluated as
 * they come (not the starting state's), training keeps its bits, the eval
 * run gets a point per evaluation, and the best checkpoints are kept. */
Test(cli_job, train_and_evaluate_evaluates_the_checkpoints_as_they_come)
{
    char *data = tiny_data(), *a = tc_tmpdir(), *b = tc_tmpdir();
    char ma[600], mb[600];
    snprintf(ma, sizeof ma, "--model_dir=%s --save_checkpoints_steps=20", a);
    snprintf(mb, sizeof mb, "--model_dir=%s --eval_every_n_steps=20 --best_exporter=true --exports_to_keep=2", b);
    json_t *plain = run_ok("train --data_dir=%s " TINY " --train_steps=60 --iterations_per_loop=10 --eval_batch_size=32 "
                           "--eval_steps=2 %s", data, ma);
    json_t *j = run_ok("train_and_evaluate --data_dir=%s " TINY " --train_steps=60 --iterations_per_loop=10 "
                       "--eval_batch_size=32 --eval_steps=2 %s", data, mb);
    cr_assert_str_eq(digest_of(j), digest_of(plain));
    cr_assert_eq(json_integer_value(json_object_get(j, "evaluations")), 3);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "eval"), "global_step")), 60);
    cr_assert_eq(json_real_value(json_object_get(json_object_get(j, "eval"), "loss")),
                 json_real_value(json_object_get(json_object_get(plain, "eval"), "loss")),
                 "the last evaluation is the plain run's evaluation after training");
    const char *best = json_string_value(json_object_get(j, "best_export"));
    cr_assert(best != NULL && strstr(best, "/export/best/model.ckpt-"), "%s", best ? best : "(null)");
    json_decref(plain);
    json_decref(j);
    char eval_dir[700];
    cr_assert(snprintf(eval_dir, sizeof eval_dir, "%s/eval", b) < (int)sizeof eval_dir);
    int64_t steps[16];
    int n = event_steps(eval_dir, "loss", steps, 16);
    cr_assert_eq(n, 3);
    cr_assert(steps[0] == 20 && steps[1] == 40 && steps[2] == 60, "%lld %lld %lld", (long long)steps[0],
              (long long)steps[1], (long long)steps[2]);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls %s/export/best | grep -c safetensors", b);
    FILE *p = popen(cmd, "r");
    int exports = 0;
    cr_assert(fscanf(p, "%d", &exports) == 1);
    pclose(p);
    cr_assert(exports >= 1 && exports <= 2, "%d exports", exports);
    tc_rmtree(a);
    tc_rmtree(b);
    free(a);
    free(b);
    tc_rmtree(data);
    free(data);
}

/* throttle_secs: the first new checkpoint is evaluated, the later ones
 * within the throttle are skipped, the final one is evaluated. */
Test(cli_job, train_and_evaluate_throttles_and_names_its_needs)
{
    char *data = tiny_data(), *dir = tc_tmpdir();
    char md[600];
    snprintf(md, sizeof md, "--model_dir=%s --save_checkpoints_steps=20 --throttle_secs=100000", dir);
    json_t *j = run_ok("train_and_evaluate --data_dir=%s " TINY " --train_steps=60 --iterations_per_loop=10 "
                       "--eval_batch_size=32 --eval_steps=2 %s", data, md);
    cr_assert_eq(json_integer_value(json_object_get(j, "evaluations")), 2, "at 20 and at the end, 60");
    json_decref(j);
    tc_result r = tc_runf("train_and_evaluate --data_dir=%s " TINY " --train_steps=6 --eval_batch_size=32 "
                          "--eval_steps=2", data);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "train_and_evaluate evaluates the checkpoints training saves: set model_dir"), "%s",
              r.err);
    tc_done(&r);
    r = tc_runf("train_and_evaluate --data_dir=%s " TINY " --train_steps=6 --eval_batch_size=32 --eval_steps=2 "
                "--model_dir=%s --throttle_secs=0", data, dir);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "eval_spec.throttle_secs should be positive, given: 0."), "%s", r.err);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
    tc_rmtree(data);
    free(data);
}

/* The input section's scale applies to every source: Fashion-MNIST's test
 * images read as IDX and scaled by 1/255, and the same images converted to
 * TFRecord (int64 pixels) and scaled by the same factor, train the same
 * bits. */
Test(cli_job, every_source_can_be_scaled)
{
    char *dir = tc_tmpdir();
    const char *fm = "/usr/share/datasets/fashion-mnist";
    tc_result r = tc_runf("data convert --from=idx %s/t10k-images-idx3-ubyte.gz --labels=%s/t10k-labels-idx1-ubyte.gz "
                          "--out=%s/t10k.tfrecord --shards=1", fm, fm, dir);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    const char *common = "--train_batch_size=32 --hidden_units=[16] --devices=1 --train_steps=20 --eval_steps=null "
                         "--eval_batch_size=null --scale=0.00392156862745098 --tf_random_seed=3";
    json_t *a = run_ok("train --dataset=idx --files='[\"%s/t10k-images-idx3-ubyte.gz\", "
                       "\"%s/t10k-labels-idx1-ubyte.gz\"]' %s", fm, fm, common);
    json_t *b = run_ok("train --dataset=tfrecord --files=%s/t10k-00000-of-00001.tfrecord "
                       "--features='{\"image\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\", \"shape\": "
                       "[784]}, \"label\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\"}}' %s", dir, common);
    cr_assert_str_eq(digest_of(a), digest_of(b));
    json_t *c = run_ok("train --dataset=tfrecord --files=%s/t10k-00000-of-00001.tfrecord "
                       "--features='{\"image\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\", \"shape\": "
                       "[784]}, \"label\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\"}}' %s --scale=1",
                       dir, common);
    cr_assert_str_neq(digest_of(b), digest_of(c), "the scale is applied");
    json_decref(a);
    json_decref(b);
    json_decref(c);
    tc_rmtree(dir);
    free(dir);
}

/* The job layer (tpuloop/job.h) from C: what `tpuloop train` does, a program
 * does through the public API with the same bits; its callbacks; the
 * configuration's mistakes named before any data is made; the predictions'
 * formats. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli_util.h"
#include "tpuloop/job.h"
#include "tpuloop/tpuloop.h"

static tl_config *config_of(const char *json, int argc, char **argv)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    if (json != NULL)
        cr_assert_eq(tl_config_load_json(cfg, json, strlen(json), "test"), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_apply_args(cfg, argc, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    return cfg;
}

typedef struct seen {
    int starts, progress, evaluations;
    int64_t final_step, last_step;
    double last_mean;
} seen;

static void on_start(const tl_job_train_start *s, void *user)
{
    seen *x = user;
    x->starts++;
    x->final_step = s->final_step;
    cr_assert_str_eq(s->model_name, "mlp");
    cr_assert_eq(s->examples, 512);
    cr_assert_eq(s->num_devices, 2);
}

static void on_progress(const tl_train_log *lg, int64_t final_step, void *user)
{
    seen *x = user;
    x->progress++;
    cr_assert_eq(final_step, x->final_step);
    cr_assert(lg->step > x->last_step);
    x->last_step = lg->step;
    if (lg->log_loss)
        x->last_mean = lg->loss_mean;
}

static void on_evaluation(const tl_job_evaluation *ev, void *user)
{
    seen *x = user;
    x->evaluations++;
    cr_assert_eq(ev->result.examples, 64);
}

/* The same run through `tpuloop train` and through tl_job: the same
 * params_digest and evaluation. */
Test(job, a_program_does_what_the_command_does)
{
    char *data = tc_tmpdir();
    tc_write_tiny_mnist(data, 512, 128, 8);
    char dd[600];
    snprintf(dd, sizeof dd, "--data_dir=%s", data);
    tc_result r = tc_runf("train %s --train_batch_size=16 --hidden_units=[8] --devices=2 --tf_random_seed=7 "
                          "--epochs=1 --eval_batch_size=32 --eval_steps=2 --log_step_count_steps=8",
                          dd);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *want = tc_json(&r);
    tc_done(&r);

    char *argv[] = {dd, "--train_batch_size=16", "--hidden_units=[8]", "--devices=2", "--tf_random_seed=7",
                    "--epochs=1", "--eval_batch_size=32", "--eval_steps=2", "--log_step_count_steps=8"};
    tl_config *cfg = config_of(NULL, 9, argv);
    seen x = {0};
    tl_job_options o;
    tl_job_options_init(&o);
    o.train = true;
    o.on_train_start = on_start;
    o.on_progress = on_progress;
    o.on_evaluation = on_evaluation;
    o.user = &x;
    tl_job *job;
    cr_assert_eq(tl_job_create(cfg, &o, &job), TL_OK, "%s", tl_last_error());
    tl_job_train_result tr;
    cr_assert_eq(tl_job_train(job, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.train.global_step, 32, "one epoch of 512 in batches of 16");
    cr_assert(tr.train.end_of_input);
    cr_assert_eq(tr.restored_from_step, -1);
    cr_assert_eq(x.starts, 1);
    cr_assert_eq(x.final_step, 32);
    cr_assert(x.progress >= 4 && x.last_step >= 24 && x.last_step <= 32, "%d progress calls, last at %lld",
              x.progress, (long long)x.last_step);
    cr_assert(x.last_mean > 0);
    tl_job_evaluation ev;
    cr_assert_eq(tl_job_evaluate(job, NULL, &ev), TL_OK, "%s", tl_last_error());
    cr_assert_eq(x.evaluations, 1);
    cr_assert_str_eq(ev.checkpoint, "", "the parameters in memory");
    char hex[65];
    cr_assert_eq(tl_job_params_digest(job, hex), TL_OK);
    cr_assert_str_eq(hex, json_string_value(json_object_get(want, "params_digest")));
    json_t *e = json_object_get(want, "eval");
    cr_assert_eq(ev.result.accuracy, json_real_value(json_object_get(e, "accuracy")));
    cr_assert_eq(ev.result.loss, json_real_value(json_object_get(e, "loss")));
    tl_job_destroy(job);
    tl_config_destroy(cfg);
    json_decref(want);
    tc_rmtree(data);
    free(data);
}

Test(job, configuration_mistakes_come_before_the_data)
{
    char *dlrm[] = {"--model_name=dlrm", "--dataset=criteo_synthetic", "--train_batch_size=8"};
    tl_config *cfg = config_of(NULL, 3, dlrm);
    tl_job *job = (tl_job *)1;
    cr_assert_eq(tl_job_create(cfg, NULL, &job), TL_EINVAL);
    cr_assert_null(job);
    cr_assert(strstr(tl_last_error(), "model_name dlrm needs embedding tables"), "%s", tl_last_error());
    tl_config_destroy(cfg);

    /* The embedding dim against bottom_mlp: named at once, with a training
     * set of 2^28 examples that is never made. */
    const char *json = "{\"model\": {\"model_name\": \"dlrm\", \"bottom_mlp\": [8, 4]},"
                       " \"input\": {\"dataset\": \"criteo_synthetic\", \"synthetic_examples\": 268435456},"
                       " \"embedding\": {\"tables\": [{\"name\": \"t\", \"vocabulary_size\": 10, \"dim\": 16}],"
                       "                \"features\": [{\"name\": \"f\", \"table\": \"t\"}],"
                       "                \"optimizer\": {\"type\": \"sgd\", \"learning_rate\": 0.1}}}";
    char *none[] = {"--train_batch_size=8"};
    cfg = config_of(json, 1, none);
    tl_job_options o;
    tl_job_options_init(&o);
    o.train = true;
    cr_assert_eq(tl_job_create(cfg, &o, &job), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "dlrm: bottom_mlp's last width 4 must equal feature 0's embedding dim 16"),
              "%s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(job, missing_data_is_an_error)
{
    char *argv[] = {"--data_dir=/nonexistent/x", "--train_batch_size=8"};
    tl_config *cfg = config_of(NULL, 2, argv);
    tl_job *job;
    cr_assert_eq(tl_job_create(cfg, NULL, &job), TL_EIO);
    cr_assert(strstr(tl_last_error(), "dataset fashion_mnist: ") && strstr(tl_last_error(), "/nonexistent/x"), "%s",
              tl_last_error());
    tl_config_destroy(cfg);
}

Test(job, predictions_are_csv_or_json_lines)
{
    float logits[] = {0.0f, 2.0f, 1.0f, -1.0f, 0.5f, 0.25f};
    tl_predict_result pr = {.values = logits, .num_examples = 2, .width = 3};
    char *dir = tc_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/p.csv", dir);
    cr_assert_eq(tl_job_write_predictions(path, &pr), TL_OK, "%s", tl_last_error());
    char *text = tc_slurp(path);
    cr_assert(strncmp(text, "index,class,p0,p1,p2\n0,1,", 24) == 0 && strstr(text, "\n1,1,"), "%s", text);
    free(text);
    /* One logit: a binary model, P(class 1) = sigmoid. */
    float one[] = {0.0f, 3.0f};
    tl_predict_result bin = {.values = one, .num_examples = 2, .width = 1};
    snprintf(path, sizeof path, "%s/p.jsonl", dir);
    cr_assert_eq(tl_job_write_predictions(path, &bin), TL_OK, "%s", tl_last_error());
    text = tc_slurp(path);
    cr_assert(strstr(text, "{\"index\":0,\"class\":0,\"probabilities\":[0.5,0.5]}\n{\"index\":1,\"class\":1,"), "%s",
              text);
    free(text);
    snprintf(path, sizeof path, "%s/p.parquet", dir);
    cr_assert_eq(tl_job_write_predictions(path, &pr), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "is a .parquet") && strstr(tl_last_error(), "CSV (.csv) or JSON Lines"), "%s",
              tl_last_error());
    cr_assert_eq(tl_job_check_predictions_path("out"), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "'out' has no extension"), "%s", tl_last_error());
    tc_rmtree(dir);
    free(dir);
}

/* The plain Estimator's path (spec tpu_estimator.md: use_tpu false, and
 * evaluation with eval_on_tpu false): one model copy on the host with the
 * global batch, evaluation to the end of the input with a short last batch
 * evaluated at its own size. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/tpuloop.h"

#define ARGS(...) (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), (const char *[]){__VA_ARGS__}

/* use_tpu false trains one copy with the global batch whatever the devices:
 * the bits of one replica on one device. */
Test(mt_estimator_cpu, use_tpu_false_trains_one_copy_with_the_global_batch)
{
    tl_labeled_data *d = mtck_data(512, 4, 3);
    char a[65], b[65];
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGS("--use_tpu=false", "--devices=4", "--train_batch_size=32", "--train_steps=12",
                                 "--iterations_per_loop=5", "--tf_random_seed=5"),
                            d, &tr, a),
                 TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 12);
    cr_assert_eq(mtck_train(ARGS("--devices=1", "--train_batch_size=32", "--train_steps=12",
                                 "--iterations_per_loop=3", "--tf_random_seed=5"),
                            d, &tr, b),
                 TL_OK, "%s", tl_last_error());
    cr_assert_str_eq(a, b);
    tl_labeled_data_destroy(d);
}

static double eval_loss(const char *batch, const char *steps, const char *on_tpu, const char *devices,
                        const tl_labeled_data *data, tl_eval_result *er)
{
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGS("--train_batch_size=16", devices, batch, steps, on_tpu,
                                            "--tf_random_seed=5"),
                                       NULL, &cfg);
    tl_status st = tl_estimator_evaluate(est, data, er);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    return er->loss;
}

/* 1000 examples in batches of 300: three whole batches and one of 100,
 * which counts as one batch (tf.metrics.mean over the batches' losses), and
 * whose loss is the model's at batch 100 — the same bits as an evaluation
 * whose batch is 100. */
Test(mt_estimator_cpu, evaluation_reads_to_the_end_with_a_short_last_batch)
{
    tl_labeled_data *d = mtck_data(1000, 4, 9);
    tl_eval_result all, head, tail;
    eval_loss("--eval_batch_size=300", "--eval_steps=null", "--eval_on_tpu=false", "--devices=2", d, &all);
    cr_assert_eq(all.steps, 4);
    cr_assert_eq(all.examples, 1000);
    tl_labeled_data first = *d, last = *d;
    first.num_examples = 900;
    last.num_examples = 100;
    last.features += 900 * d->num_features;
    last.labels += 900;
    eval_loss("--eval_batch_size=300", "--eval_steps=null", "--eval_on_tpu=false", "--devices=2", &first, &head);
    cr_assert_eq(head.steps, 3);
    eval_loss("--eval_batch_size=100", "--eval_steps=1", "--use_tpu=false", "--devices=2", &last, &tail);
    cr_assert_eq(tail.steps, 1);
    double want = (3 * head.loss + tail.loss) / 4;
    cr_assert(fabs(all.loss - want) <= 1e-12 * fabs(want), "%.17g vs %.17g", all.loss, want);
    double correct = all.accuracy * 1000, parts = head.accuracy * 900 + tail.accuracy * 100;
    cr_assert(fabs(correct - parts) < 1e-6, "%g vs %g correct", correct, parts);
    /* eval_steps stops earlier; on the device path they are required. */
    eval_loss("--eval_batch_size=300", "--eval_steps=2", "--eval_on_tpu=false", "--devices=2", d, &head);
    cr_assert_eq(head.steps, 2);
    cr_assert_eq(head.examples, 600);
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGS("--devices=2", "--train_batch_size=16", "--eval_batch_size=300"), NULL,
                                       &cfg);
    cr_assert_eq(tl_estimator_evaluate(est, d, &all), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "Evaluate `steps` must be set on TPU. Cannot be `None`."), "%s",
              tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(d);
}

/* Training on two replicas, evaluating on the host: the same metrics as a
 * one-device evaluation of the same parameters. */
Test(mt_estimator_cpu, eval_on_tpu_false_evaluates_on_the_host)
{
    tl_labeled_data *d = mtck_data(700, 4, 11);
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGS("--devices=2", "--train_batch_size=32", "--train_steps=6",
                                            "--eval_batch_size=256", "--eval_on_tpu=false", "--tf_random_seed=5"),
                                       NULL, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    cr_assert_eq(er.steps, 3);
    cr_assert_eq(er.examples, 700);
    cr_assert_eq(er.global_step, 6);
    cr_assert(er.accuracy > 0 && er.accuracy <= 1 && isfinite(er.loss));
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(d);
}

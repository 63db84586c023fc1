/* Model parallelism through the estimator (issue 16): num_cores_per_replica
 * C > 1 with input_partition_dims splitting the images, each core a device
 * thread running its partitioned program (graph/partition.h) on its tile of
 * the replica's batch, the replica's gradient summed over its cores. The
 * built-in cnn trains to the parameters of one core per replica with the
 * same replica count, to float tolerance, at C = 2 and 4 and several tile
 * grids; with the same bits for any iterations_per_loop at each C; and
 * evaluates and predicts (every example, the stop batch on every core) as
 * the unpartitioned program does. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/tpuloop.h"

#define SIDE 13 /* 13 and 7 rows: no empty tile in 4 */
#define BATCH 8   /* per replica */
#define EXAMPLES 64
#define STEPS 6

typedef struct run {
    char digest[65];
    float loss, eval_loss;
    float *params;        /* every variable, in the store's name order */
    int64_t nparams;
    float pred[EXAMPLES * 4];
} run;

/* Trains STEPS steps at devices, cores per replica (0: unset) and dims
 * (input_partition_dims' features entry), with one more flag (a model_dir,
 * say) when not NULL, then evaluates and predicts. */
static void train_in(int devices, int cores, const char *dims, const char *ipl, const char *flag, run *out)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char dev[48], ncpr[48], pdims[96], bs[48], ipl_flag[48];
    snprintf(dev, sizeof dev, "--devices=%d", devices);
    snprintf(ncpr, sizeof ncpr, "--num_cores_per_replica=%d", cores);
    snprintf(pdims, sizeof pdims, "--input_partition_dims=[%s, null]", dims != NULL ? dims : "");
    snprintf(bs, sizeof bs, "--train_batch_size=%d", BATCH * devices / (cores > 0 ? cores : 1));
    snprintf(ipl_flag, sizeof ipl_flag, "--iterations_per_loop=%s", ipl);
    char *argv[] = {dev, bs, ipl_flag, "--max_steps=6", "--tf_random_seed=7", "--eval_batch_size=16",
                    "--eval_steps=2", "--predict_batch_size=16", "--per_host_input_for_training=PER_HOST_V2",
                    "--params={\"filters\": [4, 8], \"num_classes\": 4}", ncpr, pdims, (char *)flag};
    int argc = cores > 0 ? 12 : 10;
    if (flag != NULL) { /* after the two core flags, or in their place: a model_dir, or any flag */
        argv[argc] = (char *)flag;
        argc++;
    }
    cr_assert_eq(tl_config_apply_args(cfg, argc, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = tl_model_cnn;
    o.optimizer.lr.learning_rate = 0.01;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *d = mtck_images(EXAMPLES, SIDE, 4, 9);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, STEPS);
    out->loss = (float)tr.loss;
    cr_assert_eq(tl_estimator_params_digest(est, out->digest), TL_OK);
    static const char *const names[] = {"stem/conv/kernel", "stem/bn/gamma", "stem/bn/moving_mean",
                                        "block2/shortcut/conv/kernel", "dense/kernel", "dense/bias"};
    static const int64_t sizes[] = {3 * 3 * 1 * 4, 4, 4, 1 * 1 * 4 * 8, 8 * 4, 4};
    out->nparams = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        out->nparams += sizes[k];
    out->params = malloc((size_t)out->nparams * sizeof(float));
    float *at = out->params;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        cr_assert_eq(tl_estimator_variable_value(est, names[k], at, sizes[k]), TL_OK, "%s", tl_last_error());
        at += sizes[k];
    }
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    out->eval_loss = (float)er.loss;
    tl_predict_result pr;
    cr_assert_eq(tl_estimator_predict(est, d, &pr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(pr.num_examples, EXAMPLES);
    cr_assert_eq(pr.width, 4);
    memcpy(out->pred, pr.values, sizeof out->pred);
    tl_predict_result_free(&pr);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

static void train(int devices, int cores, const char *dims, const char *ipl, run *out)
{
    train_in(devices, cores, dims, ipl, NULL, out);
}

/* The evaluation loss, predictions and parameters of a and b agree, and
 * the training loss when both trained. */
static void assert_close(const run *a, const run *b, const char *what)
{
    cr_assert(a->loss == 0 || b->loss == 0 || fabsf(a->loss - b->loss) <= 1e-4f * (1 + fabsf(b->loss)),
              "%s: loss %.7g, one core %.7g", what, (double)a->loss, (double)b->loss);
    cr_assert(fabsf(a->eval_loss - b->eval_loss) <= 1e-4f * (1 + fabsf(b->eval_loss)),
              "%s: evaluation loss %.7g, one core %.7g", what, (double)a->eval_loss, (double)b->eval_loss);
    for (int k = 0; k < EXAMPLES * 4; k++)
        cr_assert(fabsf(a->pred[k] - b->pred[k]) <= 1e-4f * (1 + fabsf(b->pred[k])),
                  "%s: prediction %d is %.7g, one core %.7g", what, k, (double)a->pred[k], (double)b->pred[k]);
    for (int64_t k = 0; k < a->nparams; k++)
        cr_assert(fabsf(a->params[k] - b->params[k]) <= 1e-4f * (1 + fabsf(b->params[k])),
                  "%s: parameter %lld is %.7g, one core %.7g", what, (long long)k, (double)a->params[k],
                  (double)b->params[k]);
}

Test(mt_model_parallel, cores_of_a_replica_train_as_one_core)
{
    run one, two, four, four_grid;
    train(1, 0, NULL, "2", &one);
    train(2, 2, "[1, 2, 1]", "2", &two);
    assert_close(&two, &one, "2 cores, rows");
    train(4, 4, "[1, 2, 2]", "2", &four_grid);
    assert_close(&four_grid, &one, "4 cores, 2 x 2 tiles");
    train(4, 4, "[1, 4, 1]", "2", &four);
    assert_close(&four, &one, "4 cores, rows");
    free(one.params), free(two.params), free(four.params), free(four_grid.params);
}

Test(mt_model_parallel, replicas_of_several_cores_train_as_replicas_of_one)
{
    run one, two;
    train(2, 0, NULL, "2", &one);          /* 2 replicas of 1 core */
    train(4, 2, "[1, 1, 2]", "2", &two);   /* 2 replicas of 2 cores */
    assert_close(&two, &one, "2 replicas of 2 cores");
    free(one.params), free(two.params);
}

Test(mt_model_parallel, same_bits_for_any_iterations_per_loop)
{
    run a, b, c;
    train(2, 2, "[1, 2, 1]", "1", &a);
    train(2, 2, "[1, 2, 1]", "4", &b);
    train(2, 2, "[1, 2, 1]", "6", &c);
    cr_assert_str_eq(a.digest, b.digest);
    cr_assert_str_eq(a.digest, c.digest);
    free(a.params), free(b.params), free(c.params);
    train(4, 4, "[1, 2, 2]", "1", &a);
    train(4, 4, "[1, 2, 2]", "6", &b);
    cr_assert_str_eq(a.digest, b.digest, "C = 4");
    free(a.params), free(b.params);
}

/* Creating an estimator with these flags fails, naming what. */
static void refused(int argc, char **argv, const char *fragment)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    cr_assert_eq(tl_config_apply_args(cfg, argc, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = tl_model_cnn;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), fragment) != NULL, "%s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(mt_model_parallel, what_is_not_built_is_refused_by_name)
{
    char *none[] = {"--devices=2", "--num_cores_per_replica=2", "--train_batch_size=8"};
    refused(3, none, "the cores of a replica split the images (input_partition_dims giving the features' tiles");
    char *labels[] = {"--devices=2", "--num_cores_per_replica=2", "--train_batch_size=8",
                      "--per_host_input_for_training=PER_HOST_V2", "--input_partition_dims=[[1, 2, 1], [2]]"};
    refused(5, labels, "the labels must be None");
}

/* eval_on_tpu false: the plain Estimator's evaluation runs the model whole
 * on replica 0 (the other cores sit it out), on the same examples, to the
 * partitioned evaluation's loss. */
Test(mt_model_parallel, eval_on_tpu_false_evaluates_the_model_whole)
{
    run tpu, cpu;
    train(2, 2, "[1, 2, 1]", "2", &tpu);
    train_in(2, 2, "[1, 2, 1]", "2", "--eval_on_tpu=false", &cpu);
    cr_assert_str_eq(cpu.digest, tpu.digest, "training is the same");
    cr_assert(fabsf(cpu.eval_loss - tpu.eval_loss) <= 1e-4f * (1 + fabsf(tpu.eval_loss)),
              "evaluation loss %.7g whole, %.7g partitioned", (double)cpu.eval_loss, (double)tpu.eval_loss);
    free(tpu.params), free(cpu.params);
}

/* Variables are whole on every core: a checkpoint written at C = 4 is the
 * one written at C = 1, and restores at C = 1 and 2 (the training call
 * finds every step done and trains none). */
Test(mt_model_parallel, a_checkpoint_moves_between_core_counts)
{
    char flag[512];
    char *dir = mtck_model_dir(flag, sizeof flag);
    run four, one, two;
    train_in(4, 4, "[1, 2, 2]", "2", flag, &four);
    train_in(1, 0, NULL, "2", flag, &one);
    train_in(2, 2, "[1, 2, 1]", "2", flag, &two);
    cr_assert_str_eq(one.digest, four.digest, "restored at C = 1");
    cr_assert_str_eq(two.digest, four.digest, "restored at C = 2");
    cr_assert(one.loss == 0 && two.loss == 0, "every step was done: none trained");
    assert_close(&one, &four, "C = 1 evaluating C = 4's checkpoint");
    assert_close(&two, &four, "C = 2 evaluating C = 4's checkpoint");
    free(four.params), free(one.params), free(two.params);
    mtck_drop_dir(dir);
}

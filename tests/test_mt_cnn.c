/* The cnn model through the estimator on device threads: convolutions,
 * pooling and batch norm on oneDNN and GEMM, one OpenMP thread per device,
 * give the same bits for any iterations_per_loop and on every repetition,
 * and the model learns a planted image task. (Also run under TSan.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/tpuloop.h"

#define SIDE 8

/* Images (n, 8, 8) of a planted linear model's features: learnable. */
static tl_labeled_data *images(int64_t n)
{
    return mtck_images(n, SIDE, 3, 17);
}

static void train(const char *ipl, int steps, char digest[65], double *accuracy)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char ipl_flag[64], steps_flag[64];
    snprintf(ipl_flag, sizeof ipl_flag, "--iterations_per_loop=%s", ipl);
    snprintf(steps_flag, sizeof steps_flag, "--train_steps=%d", steps);
    char *argv[] = {ipl_flag, steps_flag, "--devices=2", "--train_batch_size=32", "--eval_batch_size=64",
                    "--eval_steps=4", "--tf_random_seed=9",
                    "--params={\"filters\": [4, 8], \"num_classes\": 3, \"batch_norm_momentum\": 0.9}"};
    cr_assert_eq(tl_config_apply_args(cfg, 8, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = tl_model_cnn;
    o.optimizer.lr.learning_rate = 0.02;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *all = images(2048 + 256);
    tl_labeled_data train_view = *all, test_view = *all;
    train_view.num_examples = 2048;
    test_view.num_examples = 256;
    test_view.features += 2048 * all->num_features;
    test_view.labels += 2048;
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, &train_view, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, &test_view, &er), TL_OK, "%s", tl_last_error());
    *accuracy = er.accuracy;
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(all);
    tl_config_destroy(cfg);
}

Test(mt_cnn, same_bits_for_any_iterations_per_loop)
{
    char first[65], d[65];
    double acc;
    train("1", 12, first, &acc);
    static const char *const ipls[] = {"5", "12", "5"};
    for (int i = 0; i < 3; i++) {
        train(ipls[i], 12, d, &acc);
        cr_assert_str_eq(d, first, "iterations_per_loop=%s trained other bits", ipls[i]);
    }
}

Test(mt_cnn, learns_a_planted_image_task)
{
    char d[65];
    double acc;
    train("16", 128, d, &acc);
    cr_assert_gt(acc, 0.6, "three planted classes: accuracy %.3f (chance 0.33)", acc);
}

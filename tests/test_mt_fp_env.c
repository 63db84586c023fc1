/*
 * test_mt_fp_env.c — the floating-point environment kernels run in
 * (base_int.h), TensorFlow's: denormal floats flushed to zero on the device
 * threads (workers and intra-op helpers), whatever the caller's thread
 * does, and the caller's own environment left as it was.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "base/base_int.h"
#include "tpuloop/tpuloop.h"

/* A product of a denormal and one, computed where the compiler cannot fold it. */
static float denormal_times_one(void)
{
    volatile float a = 1e-39f, one = 1.0f;
    return a * one;
}

Test(fp_env, enter_flushes_and_leave_restores_the_callers)
{
    cr_assert(!tl_fp_flushes_denormals(), "a test thread starts in C's default environment");
    cr_assert(denormal_times_one() != 0.0f);
    tl_fp_env env;
    tl_fp_enter(&env);
    cr_assert(tl_fp_flushes_denormals());
    cr_assert_eq(denormal_times_one(), 0.0f, "a denormal operand reads as zero");
    tl_fp_leave(&env);
    cr_assert(!tl_fp_flushes_denormals());
    cr_assert(denormal_times_one() != 0.0f);
}

/* One dense layer of `units` with no activation: the predictions are its
 * outputs. */
static tl_status linear(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    tl_t y = tl_dense(g, a->features, *(const int64_t *)user, TL_ACT_NONE, "dense");
    spec->loss = tl_mean(g, tl_mse(g, y, y));
    spec->predictions = y;
    return tl_graph_status(g);
}

/* Predicts on features that are all 1e-39 (denormal): TensorFlow's kernels
 * read them as zero, so every output is the bias, zeros at initialization;
 * in C's default environment each would be a tiny nonzero sum. */
static void predict_denormal_features(const char *threads, int64_t features, int64_t units)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char f_thr[64];
    snprintf(f_thr, sizeof f_thr, "--intra_op_parallelism_threads=%s", threads);
    char *argv[] = {"--devices=1", f_thr, "--predict_batch_size=128", "--train_batch_size=128", "--tf_random_seed=9"};
    cr_assert_eq(tl_config_apply_args(cfg, 5, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = linear;
    o.user = &units;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = 256;
    s.num_features = features;
    s.num_classes = 2;
    tl_labeled_data *data = NULL;
    cr_assert_eq(tl_synthetic_load(&s, &data), TL_OK, "%s", tl_last_error());
    float *x = data->features;
    for (int64_t i = 0; i < 256 * features; i++)
        x[i] = 1e-39f;
    tl_predict_result res;
    cr_assert_eq(tl_estimator_predict(est, data, &res), TL_OK, "%s", tl_last_error());
    cr_assert_eq(res.num_examples, 256);
    cr_assert_eq(res.width, units);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < res.num_examples * res.width; i++)
        nonzero += res.values[i] != 0.0f;
    cr_assert_eq(nonzero, 0, "%lld of %lld outputs are not the zero bias (threads %s)", (long long)nonzero,
                 (long long)(res.num_examples * res.width), threads);
    cr_assert(!tl_fp_flushes_denormals(), "the caller's thread keeps its environment");
    tl_predict_result_free(&res);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(data);
    tl_config_destroy(cfg);
}

Test(fp_env, device_threads_flush_denormals_as_tensorflow_does)
{
    predict_denormal_features("1", 20, 8);
}

Test(fp_env, intra_op_threads_flush_denormals_too)
{
    /* 128 x 600 x 512: the GEMM runs in pieces, one on the helper. */
    predict_denormal_features("2", 600, 512);
}

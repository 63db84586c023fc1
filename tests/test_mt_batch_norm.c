/* Batch norm's state through the estimator: the moving statistics move by
 * Keras' rule with the replicas' batch statistics averaged, the same bits
 * for any iterations_per_loop, saved in checkpoints without optimizer slots
 * and restored, and evaluation reads them. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/tpuloop.h"

#define FEATURES 6
#define STEPS 5
#define BATCH 32
#define MOMENTUM 0.9

/* Batch norm straight on the features, then the logits: the moving mean
 * depends on the data alone, so a float64 replay can predict it. */
static tl_status bn_model(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    tl_t h = tl_batch_norm(g, a->features, MOMENTUM, 1e-3, "bn");
    tl_t logits = tl_dense(g, h, 4, TL_ACT_NONE, "dense");
    spec->logits = logits;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    return tl_graph_status(g);
}

static tl_labeled_data *data(int64_t n)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = n;
    s.num_features = FEATURES;
    s.num_classes = 4;
    s.seed = 5;
    tl_labeled_data *d = NULL;
    cr_assert_eq(tl_synthetic_load(&s, &d), TL_OK, "%s", tl_last_error());
    /* Shift each column so its mean is far from the initial 0. */
    for (int64_t i = 0; i < n; i++)
        for (int f = 0; f < FEATURES; f++)
            d->features[i * FEATURES + f] += (float)(f + 1);
    return d;
}

static tl_estimator *make(const char *ipl, const char *devices, const char *model_dir_flag, tl_config **cfg)
{
    cr_assert_eq(tl_config_create(cfg), TL_OK);
    char ipl_flag[64], dev_flag[64], steps_flag[64], batch_flag[64];
    snprintf(ipl_flag, sizeof ipl_flag, "--iterations_per_loop=%s", ipl);
    snprintf(dev_flag, sizeof dev_flag, "--devices=%s", devices);
    snprintf(steps_flag, sizeof steps_flag, "--train_steps=%d", STEPS);
    snprintf(batch_flag, sizeof batch_flag, "--train_batch_size=%d", BATCH);
    char *argv[] = {ipl_flag, dev_flag, steps_flag, batch_flag, "--eval_batch_size=32", "--eval_steps=1",
                    "--tf_random_seed=3", (char *)model_dir_flag};
    int argc = model_dir_flag != NULL ? 8 : 7;
    cr_assert_eq(tl_config_apply_args(*cfg, argc, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(*cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = bn_model;
    o.optimizer.lr.learning_rate = 0.01;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(*cfg, &o, &est), TL_OK, "%s", tl_last_error());
    return est;
}

/* Trains STEPS epochs of BATCH examples (one global batch each, in an
 * order the input pipeline picks) and returns the digest and the moving
 * statistics. */
static void train(const char *ipl, const char *devices, char digest[65], float mean[FEATURES], float var[FEATURES])
{
    tl_config *cfg;
    tl_estimator *est = make(ipl, devices, NULL, &cfg);
    tl_labeled_data *d = data(BATCH);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train_epochs(est, d, STEPS, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, STEPS);
    cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    cr_assert_eq(tl_estimator_variable_value(est, "bn/moving_mean", mean, FEATURES), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_variable_value(est, "bn/moving_variance", var, FEATURES), TL_OK, "%s",
                 tl_last_error());
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

/* The moving statistics after STEPS steps over the same BATCH examples, in
 * float64. Whatever order the input takes, every step's global batch is
 * all of them, so the mean of the replicas' batch means (equal slices) is
 * the data's mean; the variance is that too with one replica only. */
static void replay(double mean[FEATURES], double var[FEATURES])
{
    tl_labeled_data *d = data(BATCH);
    for (int f = 0; f < FEATURES; f++) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < BATCH; i++)
            m += d->features[i * FEATURES + f];
        m /= BATCH;
        for (int64_t i = 0; i < BATCH; i++)
            v += (d->features[i * FEATURES + f] - m) * (d->features[i * FEATURES + f] - m);
        v /= BATCH;
        mean[f] = 0.0;
        var[f] = 1.0;
        for (int s = 0; s < STEPS; s++) {
            mean[f] = mean[f] * MOMENTUM + m * (1 - MOMENTUM);
            var[f] = var[f] * MOMENTUM + v * (1 - MOMENTUM);
        }
    }
    tl_labeled_data_destroy(d);
}

Test(mt_batch_norm, moving_statistics_follow_keras_rule_averaged_over_replicas)
{
    double want_mean[FEATURES], want_var[FEATURES];
    replay(want_mean, want_var);
    static const char *const devices[] = {"1", "2", "4"};
    for (int k = 0; k < 3; k++) {
        char digest[65];
        float mean[FEATURES], var[FEATURES];
        train("1", devices[k], digest, mean, var);
        for (int f = 0; f < FEATURES; f++) {
            cr_assert(fabs(mean[f] - want_mean[f]) <= 1e-5 * (1 + fabs(want_mean[f])),
                      "%s devices: moving_mean[%d] %.7g, want %.7g", devices[k], f, mean[f], want_mean[f]);
            if (k == 0)
                cr_assert(fabs(var[f] - want_var[f]) <= 1e-5 * (1 + fabs(want_var[f])),
                          "moving_variance[%d] %.7g, want %.7g", f, var[f], want_var[f]);
        }
        /* It moved: from 0 towards column means near f + 1. */
        cr_assert_gt(mean[FEATURES - 1], 1.0f);
    }
}

Test(mt_batch_norm, same_bits_for_any_iterations_per_loop)
{
    char first[65], d[65];
    float m0[FEATURES], v0[FEATURES], m[FEATURES], v[FEATURES];
    train("1", "2", first, m0, v0);
    static const char *const ipls[] = {"2", "5", "3"};
    for (int i = 0; i < 3; i++) {
        train(ipls[i], "2", d, m, v);
        cr_assert_str_eq(d, first, "iterations_per_loop=%s trained other bits", ipls[i]);
        cr_assert_eq(memcmp(m, m0, sizeof m), 0);
        cr_assert_eq(memcmp(v, v0, sizeof v), 0);
    }
}

/* The checkpoint holds the moving statistics (no optimizer slots for them,
 * as TensorFlow has none), a new estimator restores them, and evaluation
 * from the restore gives the training estimator's own result. */
Test(mt_batch_norm, checkpoint_round_trip_without_slots)
{
    char flag[1200];
    char *dir = mtck_model_dir(flag, sizeof flag);
    tl_config *cfg;
    tl_estimator *est = make("2", "2", flag, &cfg);
    tl_labeled_data *d = data(BATCH);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train_epochs(est, d, STEPS, &tr), TL_OK, "%s", tl_last_error());
    tl_eval_result e1;
    cr_assert_eq(tl_estimator_evaluate(est, d, &e1), TL_OK, "%s", tl_last_error());
    float mean[FEATURES];
    cr_assert_eq(tl_estimator_variable_value(est, "bn/moving_mean", mean, FEATURES), TL_OK);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);

    char path[1400];
    snprintf(path, sizeof path, "%s/model.ckpt-%d.safetensors", dir, STEPS);
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(path, 0, &r), TL_OK, "%s", tl_last_error());
    tl_ckpt_tensor_info t;
    cr_assert_eq(tl_ckpt_find(r, "bn/moving_mean", &t), TL_OK, "%s", tl_last_error());
    cr_assert_eq(memcmp(t.data, mean, sizeof mean), 0, "the checkpoint's moving_mean is the trained one");
    cr_assert_eq(tl_ckpt_find(r, "bn/moving_variance", &t), TL_OK);
    cr_assert_eq(tl_ckpt_find(r, "bn/gamma/Adam", &t), TL_OK, "a trainable variable keeps its slots");
    cr_assert_neq(tl_ckpt_find(r, "bn/moving_mean/Adam", &t), TL_OK, "a state variable has no slots");
    cr_assert_neq(tl_ckpt_find(r, "bn/moving_variance/Adam_1", &t), TL_OK);
    tl_ckpt_close(r);

    est = make("2", "2", flag, &cfg);
    float restored[FEATURES];
    cr_assert_eq(tl_estimator_variable_value(est, "bn/moving_mean", restored, FEATURES), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "no value yet") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_restore(est, NULL), TL_OK, "%s", tl_last_error());
    tl_eval_result e2;
    cr_assert_eq(tl_estimator_evaluate(est, d, &e2), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_variable_value(est, "bn/moving_mean", restored, FEATURES), TL_OK);
    cr_assert_eq(memcmp(restored, mean, sizeof mean), 0);
    cr_assert_eq(e1.loss, e2.loss, "evaluation reads the restored moving statistics");
    cr_assert_eq(e1.accuracy, e2.accuracy);
    /* Errors name the variable. */
    cr_assert_eq(tl_estimator_variable_value(est, "bn/moving_man", restored, FEATURES), TL_ENOTFOUND);
    cr_assert(strstr(tl_last_error(), "no variable named bn/moving_man") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_variable_value(est, "bn/moving_mean", restored, 3), TL_EINVAL);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(d);
    mtck_drop_dir(dir);
}

/* Training and evaluation in device loops on worker threads: the trained
 * parameters are the same bits for every iterations_per_loop and on every
 * repetition; the model learns; NaN and short data are errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tpuloop/tpuloop.h"

static tl_status small_mlp(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    tl_t h = tl_dense(g, a->features, 32, TL_ACT_RELU, "dense");
    h = tl_dropout(g, h, 0.1);
    tl_t logits = tl_dense(g, h, 4, TL_ACT_NONE, "dense_1");
    spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    spec->logits = logits;
    return tl_graph_status(g);
}

static tl_labeled_data *synthetic(int64_t n, uint64_t seed)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = n;
    s.num_features = 20;
    s.num_classes = 4;
    s.seed = seed;
    tl_labeled_data *d = NULL;
    cr_assert_eq(tl_synthetic_load(&s, &d), TL_OK, "%s", tl_last_error());
    return d;
}

/* Trains with the given flags and returns the parameters' digest. */
static void train_digest(const char *ipl, const char *devices, double lr, char digest[65], double *accuracy,
                         tl_status *train_status)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char ipl_flag[64], dev_flag[64];
    snprintf(ipl_flag, sizeof ipl_flag, "--iterations_per_loop=%s", ipl);
    snprintf(dev_flag, sizeof dev_flag, "--devices=%s", devices);
    char *argv[] = {ipl_flag, dev_flag, "--train_batch_size=64", "--eval_batch_size=64", "--train_steps=60",
                    "--eval_steps=8", "--tf_random_seed=3"};
    cr_assert_eq(tl_config_apply_args(cfg, 7, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = small_mlp;
    o.optimizer.lr.learning_rate = lr;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    /* One planted model: the first 1000 examples train, the next 512 test. */
    tl_labeled_data *all = synthetic(1512, 11);
    tl_labeled_data train_view = *all, test_view = *all;
    train_view.num_examples = 1000;
    test_view.num_examples = 512;
    test_view.features += 1000 * all->num_features;
    test_view.labels += 1000;
    tl_labeled_data *train = &train_view, *test = &test_view;
    tl_train_result tr;
    *train_status = tl_estimator_train(est, train, &tr);
    if (*train_status == TL_OK) {
        cr_assert_eq(tr.global_step, 60);
        tl_eval_result er;
        cr_assert_eq(tl_estimator_evaluate(est, test, &er), TL_OK, "%s", tl_last_error());
        *accuracy = er.accuracy;
        cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    }
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(all);
    tl_config_destroy(cfg);
}

Test(mt_estimator, params_digest_is_independent_of_iterations_per_loop)
{
    static const char *const ipls[] = {"1", "7", "100", "2s"};
    char first[65], d[65];
    double acc;
    tl_status st;
    train_digest(ipls[0], "2", 0.01, first, &acc, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_gt(acc, 0.6, "a planted linear model is learnable: accuracy %f", acc);
    for (int i = 1; i < 4; i++) {
        train_digest(ipls[i], "2", 0.01, d, &acc, &st);
        cr_assert_eq(st, TL_OK, "%s", tl_last_error());
        cr_assert_str_eq(d, first, "iterations_per_loop=%s trained other bits", ipls[i]);
    }
    train_digest("7", "2", 0.01, d, &acc, &st);
    cr_assert_str_eq(d, first, "a repeated run trained other bits");
}

Test(mt_estimator, four_devices_fixed_global_batch)
{
    char a[65], b[65];
    double acc;
    tl_status st;
    train_digest("1", "4", 0.01, a, &acc, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    train_digest("13", "4", 0.01, b, &acc, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_str_eq(a, b);
}

Test(mt_estimator, nan_loss_is_an_error)
{
    char d[65];
    double acc;
    tl_status st;
    train_digest("5", "2", 1e30, d, &acc, &st);
    cr_assert_eq(st, TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "NaN loss during training.") != NULL ||
                  strstr(tl_last_error(), "is NaN") != NULL,
              "%s", tl_last_error());
}

/* §9, T66: MEAN scales each replica's loss by 1/R before differentiating, so
 * the update uses the mean gradient; SUM uses the sum. With SGD, SUM at a
 * learning rate lr/R therefore trains what MEAN trains at lr (to rounding). */
static void sgd_losses(bool reduce_sum, double lr, float *out, int64_t *n)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char *argv[] = {"--devices=2", "--train_batch_size=16", "--train_steps=5", "--tf_random_seed=2",
                    "--iterations_per_loop=5"};
    cr_assert_eq(tl_config_apply_args(cfg, 5, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = small_mlp;
    o.reduce_sum = reduce_sum;
    tl_optimizer_config_default(TL_OPTIM_SGD, &o.optimizer);
    o.optimizer.lr.learning_rate = lr;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *d = synthetic(256, 5);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    /* The last step's losses are computed from the parameters the earlier
     * updates produced, so they compare the two trainings. */
    out[0] = (float)tr.loss;
    out[1] = (float)tr.loss_mean;
    *n = 2;
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

Test(mt_estimator, T66_cross_shard_mean_and_sum)
{
    float mean[2], sum[2], sum_same_lr[2];
    int64_t n;
    sgd_losses(false, 0.2, mean, &n);
    sgd_losses(true, 0.1, sum, &n);
    sgd_losses(true, 0.2, sum_same_lr, &n);
    for (int i = 0; i < 2; i++)
        cr_assert(fabsf(mean[i] - sum[i]) <= 1e-5f * (1 + fabsf(mean[i])), "MEAN at lr %g vs SUM at lr/2: %g vs %g",
                  0.2, mean[i], sum[i]);
    cr_assert(fabsf(mean[1] - sum_same_lr[1]) > 1e-4f, "SUM at the same lr takes twice the step");
}

/* ---- the optimizer of the TRAIN spec ----------------------------------------- */

/* What spec_mlp puts into the spec: the optimizer (NULL: none) and its
 * reduction, in TRAIN, or in every mode but TRAIN with other_modes. */
typedef struct spec_opt {
    const tl_optimizer_config *optimizer;
    bool reduce_sum;
    bool other_modes;
} spec_opt;

static tl_status spec_mlp(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    const spec_opt *so = user;
    tl_status st = small_mlp(g, a, spec, NULL);
    if ((a->mode == TL_MODE_TRAIN) != so->other_modes) {
        spec->optimizer = so->optimizer;
        spec->optimizer_reduce_sum = so->reduce_sum;
    }
    return st;
}

/* Trains 12 steps on 2 devices with options o (model_fn and user set by the
 * caller, or small_mlp) and returns the digest; the status in *train_status. */
static void digest_with(tl_estimator_options *o, char digest[65], tl_status *train_status)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char *argv[] = {"--devices=2", "--train_batch_size=32", "--eval_batch_size=32", "--train_steps=12",
                    "--eval_steps=2", "--tf_random_seed=4", "--iterations_per_loop=5"};
    cr_assert_eq(tl_config_apply_args(cfg, 7, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    if (o->model_fn == NULL)
        o->model_fn = small_mlp;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *d = synthetic(256, 9);
    tl_train_result tr;
    *train_status = tl_estimator_train(est, d, &tr);
    if (*train_status == TL_OK) {
        cr_assert_eq(tr.global_step, 12);
        tl_eval_result er;
        cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    }
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

static tl_optimizer_config sgd(double lr)
{
    tl_optimizer_config c;
    tl_optimizer_config_default(TL_OPTIM_SGD, &c);
    c.lr.learning_rate = lr;
    return c;
}

/* train_op = CrossShardOptimizer(GradientDescentOptimizer(0.1)) in the
 * model_fn trains what options.optimizer SGD 0.1 trains, whatever the
 * options say (their default is Adam). */
Test(mt_estimator, spec_optimizer_replaces_the_options)
{
    tl_optimizer_config s = sgd(0.1);
    tl_estimator_options o;
    char by_options[65], by_spec[65], adam[65];
    tl_status st;
    tl_estimator_options_init(&o);
    o.optimizer = s;
    digest_with(&o, by_options, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());

    spec_opt so = {&s, false, false};
    tl_estimator_options_init(&o);
    o.model_fn = spec_mlp;
    o.user = &so;
    digest_with(&o, by_spec, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_str_eq(by_spec, by_options, "the spec's SGD trained other bits than the options' SGD");

    tl_estimator_options_init(&o);
    digest_with(&o, adam, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_str_neq(adam, by_spec, "the spec's optimizer changed nothing");

    /* Only TRAIN's spec counts: EVAL's and PREDICT's are ignored. */
    tl_optimizer_config bad = sgd(-1);
    spec_opt eval_only = {&bad, true, true};
    tl_estimator_options_init(&o);
    o.model_fn = spec_mlp;
    o.user = &eval_only;
    o.optimizer = s;
    digest_with(&o, by_spec, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_str_eq(by_spec, by_options, "an optimizer in the EVAL spec was used");
}

Test(mt_estimator, spec_optimizer_invalid_fails_train_naming_it)
{
    tl_optimizer_config bad = sgd(-0.5);
    spec_opt so = {&bad, false, false};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = spec_mlp;
    o.user = &so;
    char d[65];
    tl_status st;
    digest_with(&o, d, &st);
    cr_assert_eq(st, TL_EINVAL, "%d: %s", st, tl_last_error());
    cr_assert(strstr(tl_last_error(), "model_fn (train): spec->optimizer: ") != NULL, "%s", tl_last_error());
    cr_assert(strstr(tl_last_error(), "learning_rate") != NULL && strstr(tl_last_error(), "-0.5") != NULL, "%s",
              tl_last_error());
}

/* CrossShardOptimizer(opt, reduction=SUM) in the spec is options.reduce_sum
 * true: the same bits over 2 replicas, and other bits than MEAN's. */
Test(mt_estimator, spec_optimizer_reduce_sum_is_the_options)
{
    tl_optimizer_config s = sgd(0.05);
    tl_estimator_options o;
    char by_options[65], by_spec[65], mean[65];
    tl_status st;
    tl_estimator_options_init(&o);
    o.optimizer = s;
    o.reduce_sum = true;
    digest_with(&o, by_options, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());

    spec_opt so = {&s, true, false};
    tl_estimator_options_init(&o);
    o.model_fn = spec_mlp;
    o.user = &so;
    digest_with(&o, by_spec, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_str_eq(by_spec, by_options, "the spec's SUM trained other bits than options.reduce_sum");

    /* The spec's MEAN replaces the options' SUM too. */
    so.reduce_sum = false;
    tl_estimator_options_init(&o);
    o.model_fn = spec_mlp;
    o.user = &so;
    o.reduce_sum = true;
    digest_with(&o, mean, &st);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_str_neq(mean, by_spec, "MEAN and SUM over 2 replicas trained the same bits");
}

/* Estimator.train(steps=, max_steps=) and evaluate(steps=) per call
 * (tl_estimator_set_steps): steps count from the current step, max_steps is
 * absolute, and TensorFlow's refusals name the arguments. */
Test(mt_estimator, set_steps_per_call)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char *argv[] = {"--devices=2", "--train_batch_size=32", "--eval_batch_size=32", "--train_steps=12",
                    "--eval_steps=2", "--tf_random_seed=4", "--iterations_per_loop=5"};
    cr_assert_eq(tl_config_apply_args(cfg, 7, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = small_mlp;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *d = synthetic(256, 9);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_set_steps(est, 3, -1, -1), TL_OK);
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 3);
    cr_assert_eq(tl_estimator_set_steps(est, 4, -1, -1), TL_OK);
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 7, "steps count from the current step");
    cr_assert_eq(tl_estimator_set_steps(est, -1, 9, -1), TL_OK);
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 9, "max_steps is absolute");
    cr_assert_eq(tl_estimator_set_steps(est, -1, -1, 3), TL_OK);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    cr_assert_eq(er.steps, 3);
    cr_assert_eq(tl_estimator_set_steps(est, 2, 5, -1), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "Can not provide both steps and max_steps.");
    cr_assert_eq(tl_estimator_set_steps(est, 0, -1, -1), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "Must specify steps > 0, given: 0");
    cr_assert_eq(tl_estimator_set_steps(est, -1, 0, -1), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "Must specify max_steps > 0, given: 0");
    /* Neither steps nor max_steps on an endless input: TensorFlow's TPU error. */
    cr_assert_eq(tl_estimator_set_steps(est, -1, -1, -1), TL_OK);
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "one of `steps` or `max_steps` must be set") != NULL, "%s", tl_last_error());
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

/* A model_fn that sets no logits in EVAL (TensorFlow's model_fns have none:
 * metric_fn computes what it needs) evaluates its loss; there is no
 * accuracy (NaN) and no AUC. The same model with logits gives the same loss. */
static tl_status no_eval_logits(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    tl_status st = small_mlp(g, a, spec, NULL);
    if (a->mode == TL_MODE_EVAL && user != NULL)
        spec->logits = TL_T_INVALID;
    return st;
}

Test(mt_estimator, eval_without_logits)
{
    double loss[2];
    for (int k = 0; k < 2; k++) {
        tl_config *cfg;
        cr_assert_eq(tl_config_create(&cfg), TL_OK);
        char *argv[] = {"--devices=2", "--train_batch_size=32", "--eval_batch_size=32", "--train_steps=6",
                        "--eval_steps=3", "--tf_random_seed=4", "--iterations_per_loop=3"};
        cr_assert_eq(tl_config_apply_args(cfg, 7, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
        tl_estimator_options o;
        tl_estimator_options_init(&o);
        o.model_fn = no_eval_logits;
        o.user = k == 0 ? &o : NULL;
        tl_estimator *est;
        cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
        tl_labeled_data *d = synthetic(256, 9);
        tl_train_result tr;
        cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
        tl_eval_result er;
        cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
        loss[k] = er.loss;
        if (k == 0) {
            cr_assert(isnan(er.accuracy), "accuracy %g without logits", er.accuracy);
            cr_assert(!er.has_auc);
        } else {
            cr_assert(er.accuracy >= 0 && er.accuracy <= 1);
        }
        tl_estimator_destroy(est);
        tl_labeled_data_destroy(d);
        tl_config_destroy(cfg);
    }
    cr_assert_eq(loss[0], loss[1], "the loss depends on the logits being set: %.9g vs %.9g", loss[0], loss[1]);
}

/* The device loop of the estimator: nothing is allocated per step (the
 * allocation hook counts every call), the infeed thread feeds the workers the
 * same batches as before, and the default host_call receives every replica's
 * loss at the scheduled steps (tests/test_mt_hostcall.c has the spec's own
 * host_call tensors). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
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

static tl_labeled_data *synthetic(int64_t n, int classes, uint64_t seed)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = n;
    s.num_features = 20;
    s.num_classes = classes;
    s.seed = seed;
    tl_labeled_data *d = NULL;
    cr_assert_eq(tl_synthetic_load(&s, &d), TL_OK, "%s", tl_last_error());
    return d;
}

static tl_config *make_config(int argc, char **argv)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    cr_assert_eq(tl_config_apply_args(cfg, argc, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    return cfg;
}

/* ---- allocation-free device loop ---------------------------------------- */


/* Allocations made by the second train() of a warm estimator that trains
 * `steps` steps per call. */
static long allocations_of_second_train(const char *steps)
{
    char steps_flag[64];
    snprintf(steps_flag, sizeof steps_flag, "--train_steps=%s", steps);
    char *argv[] = {"--iterations_per_loop=10", "--devices=2", "--train_batch_size=32", steps_flag,
                    "--tf_random_seed=5"};
    tl_config *cfg = make_config(5, argv);
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = small_mlp;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *data = synthetic(300, 4, 2);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, data, &tr), TL_OK, "%s", tl_last_error());
    long before = mtck_allocations();
    cr_assert_eq(tl_estimator_train(est, data, &tr), TL_OK, "%s", tl_last_error());
    long n = mtck_allocations() - before;
    cr_assert_eq(tr.global_step, 2 * strtol(steps, NULL, 10));
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(data);
    tl_config_destroy(cfg);
    return n;
}

Test(mt_estimator_loop, training_allocates_nothing_per_step)
{
    mtck_count_allocations(true);
    long short_run = allocations_of_second_train("10");   /* 1 loop */
    long long_run = allocations_of_second_train("510");   /* 51 loops */
    mtck_count_allocations(false);
    cr_assert_gt(short_run, 0, "the hook sees train's own allocations (its schedule)");
    cr_assert_eq(long_run, short_run, "10 steps allocate %ld times, 510 steps %ld times", short_run, long_run);
}

/* ---- infeed ------------------------------------------------------------- */

static tl_estimator *train_small(int argc, char **argv, tl_estimator_options *o, tl_train_result *tr,
                                 tl_config **cfg_out, tl_labeled_data **data_out)
{
    tl_config *cfg = make_config(argc, argv);
    o->model_fn = small_mlp;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *data = synthetic(400, 4, 9);
    cr_assert_eq(tl_estimator_train(est, data, tr), TL_OK, "%s", tl_last_error());
    *cfg_out = cfg;
    *data_out = data;
    return est;
}

Test(mt_estimator_loop, infeed_depth_does_not_change_the_parameters)
{
    char *argv[] = {"--iterations_per_loop=3", "--devices=2", "--train_batch_size=32", "--train_steps=25",
                    "--tf_random_seed=4"};
    char digest[3][65];
    static const int depths[] = {0, 1, 8};
    for (int k = 0; k < 3; k++) {
        tl_estimator_options o;
        tl_estimator_options_init(&o);
        o.infeed_depth = depths[k];
        tl_train_result tr;
        tl_config *cfg;
        tl_labeled_data *data;
        tl_estimator *est = train_small(5, argv, &o, &tr, &cfg, &data);
        cr_assert_eq(tr.global_step, 25);
        cr_assert_eq(tl_estimator_params_digest(est, digest[k]), TL_OK);
        tl_estimator_destroy(est);
        tl_labeled_data_destroy(data);
        tl_config_destroy(cfg);
    }
    cr_assert_str_eq(digest[1], digest[0], "infeed depth 1 trained other bits");
    cr_assert_str_eq(digest[2], digest[0], "infeed depth 8 trained other bits");
}

Test(mt_estimator_loop, infeed_depth_is_checked)
{
    char *argv[] = {"--train_batch_size=32", "--train_steps=1"};
    tl_config *cfg = make_config(2, argv);
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = small_mlp;
    o.infeed_depth = -1;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_EINVAL);
    cr_assert_null(est);
    cr_assert(strstr(tl_last_error(), "infeed_depth") != NULL, "%s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(mt_estimator_loop, initial_infeed_sleep_delays_the_first_batch)
{
    char *argv[] = {"--initial_infeed_sleep_secs=1", "--devices=2", "--train_batch_size=32", "--train_steps=2"};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    tl_train_result tr;
    tl_config *cfg;
    tl_labeled_data *data;
    tl_estimator *est = train_small(4, argv, &o, &tr, &cfg, &data);
    cr_assert_eq(tr.global_step, 2);
    cr_assert_geq(tr.seconds, 0.99, "train took %f s", tr.seconds);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(data);
    tl_config_destroy(cfg);
}

/* ---- host_call ---------------------------------------------------------- */

typedef struct host_calls {
    int n;
    int64_t step[64];
    float values[64][4];
    int R;
} host_calls;

/* The default host_call: one float32 tensor "loss" of shape (R). */
static tl_status record_host_call(int64_t global_step, const tl_host_tensor *t, int n, void *user)
{
    host_calls *h = user;
    cr_assert_lt(h->n, 64);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(t[0].name, "loss");
    cr_assert_eq(t[0].dtype, TL_F32);
    cr_assert_eq(t[0].rank, 1);
    int R = (int)t[0].shape[0];
    cr_assert_leq(R, 4);
    h->step[h->n] = global_step;
    memcpy(h->values[h->n], t[0].data, (size_t)R * sizeof(float));
    h->R = R;
    h->n++;
    return TL_OK;
}

/* T32: every_n 4 with ipl 10 fires at loop-local 0, 4 and 8 of each loop. */
Test(mt_estimator_loop, host_call_fires_every_n_steps_of_each_loop)
{
    char *argv[] = {"--iterations_per_loop=10", "--experimental_host_call_every_n_steps=4", "--devices=2",
                    "--train_batch_size=32", "--train_steps=30", "--tf_random_seed=4"};
    host_calls h = {0};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.host_call = record_host_call;
    o.host_call_user = &h;
    tl_train_result tr;
    tl_config *cfg;
    tl_labeled_data *data;
    tl_estimator *est = train_small(6, argv, &o, &tr, &cfg, &data);
    cr_assert_eq(tr.loops, 3);
    cr_assert_eq(h.n, 9, "3 firings per loop of 10, got %d", h.n);
    cr_assert_eq(h.R, 2);
    static const int64_t steps[9] = {1, 5, 9, 11, 15, 19, 21, 25, 29}; /* post-increment */
    bool replicas_differ = false;
    for (int k = 0; k < 9; k++) {
        cr_assert_eq(h.step[k], steps[k], "firing %d at global step %lld", k, (long long)h.step[k]);
        cr_assert(h.values[k][0] > 0 && h.values[k][1] > 0, "losses are positive");
        replicas_differ |= h.values[k][0] != h.values[k][1];
    }
    cr_assert(replicas_differ, "each replica outfeeds its own loss");
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(data);
    tl_config_destroy(cfg);
}

Test(mt_estimator_loop, host_call_values_are_the_replica_losses)
{
    char *argv[] = {"--iterations_per_loop=4", "--devices=4", "--train_batch_size=32", "--train_steps=10",
                    "--tf_random_seed=4"};
    host_calls h = {0};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.host_call = record_host_call;
    o.host_call_user = &h;
    tl_train_result tr;
    tl_config *cfg;
    tl_labeled_data *data;
    tl_estimator *est = train_small(5, argv, &o, &tr, &cfg, &data);
    cr_assert_eq(h.n, 10, "every_n defaults to 1: every step fires");
    cr_assert_eq(h.R, 4);
    for (int k = 0; k < 10; k++)
        cr_assert_eq(h.step[k], k + 1);
    cr_assert_eq((double)h.values[9][0], tr.loss, "replica 0's last loss %f is the result's %f",
                 (double)h.values[9][0], tr.loss);
    double sum = 0;
    for (int r = 0; r < 4; r++)
        sum += h.values[9][r];
    cr_assert_eq(sum / 4, tr.loss_mean);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(data);
    tl_config_destroy(cfg);
}

/* ---- AUC ---------------------------------------------------------------- */

/* logits = features + a zero bias: the scores are known to the test. */
static tl_status identity_logits(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    int64_t two = 2;
    tl_t b = tl_variable(g, "bias", &two, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    tl_t logits = tl_bias_add(g, a->features, b);
    spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    spec->logits = logits;
    return tl_graph_status(g);
}

Test(mt_estimator_loop, auc_of_a_binary_model_matches_all_pairs)
{
    enum { N = 192, USED = 160 }; /* 5 steps of 32; the rest is never seen */
    static float features[N * 2];
    static int32_t labels[N];
    uint64_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        labels[i] = (int32_t)((x >> 40) & 1);
        /* Few distinct values, so positives and negatives tie often; a weak
         * signal keeps the AUC away from 0.5 and 1. */
        features[2 * i] = (float)((x >> 20) % 5);
        features[2 * i + 1] = (float)((x >> 30) % 5) + (labels[i] ? 1.0f : 0.0f);
    }
    tl_labeled_data d = {N, 2, 2, 1, {2}, features, labels, NULL, 0};
    char *argv[] = {"--devices=2", "--train_batch_size=32", "--eval_batch_size=32", "--eval_steps=5",
                    "--train_steps=1"};
    tl_config *cfg = make_config(5, argv);
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = identity_logits;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, &d, &er), TL_OK, "%s", tl_last_error());
    cr_assert_eq(er.examples, USED);
    double wins = 0;
    int64_t pairs = 0, ties = 0;
    for (int i = 0; i < USED; i++) {
        if (labels[i] != 1)
            continue;
        double si = 1.0 / (1.0 + exp((double)features[2 * i] - (double)features[2 * i + 1]));
        for (int j = 0; j < USED; j++) {
            if (labels[j] == 1)
                continue;
            double sj = 1.0 / (1.0 + exp((double)features[2 * j] - (double)features[2 * j + 1]));
            wins += si > sj ? 1.0 : si == sj ? 0.5 : 0.0;
            ties += si == sj;
            pairs++;
        }
    }
    cr_assert_gt(ties, 0, "the data has ties to check");
    double want = wins / (double)pairs;
    cr_assert(er.has_auc);
    cr_assert(fabs(er.auc - want) < 1e-12, "AUC %.15f, all pairs say %.15f", er.auc, want);
    cr_assert(want > 0.55 && want < 0.95, "a weak signal: %f", want);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
}

Test(mt_estimator_loop, auc_needs_two_classes)
{
    char *argv[] = {"--devices=2", "--train_batch_size=32", "--eval_batch_size=32", "--eval_steps=2",
                    "--train_steps=1"};
    tl_config *cfg = make_config(5, argv);
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = small_mlp; /* 4 classes */
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *data = synthetic(128, 4, 3);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, data, &er), TL_OK, "%s", tl_last_error());
    cr_assert_not(er.has_auc);
    cr_assert(isnan(er.auc));
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(data);
    tl_config_destroy(cfg);

    /* A binary model whose evaluated labels are all one class has no AUC. */
    enum { N = 64 };
    static float features[N * 2];
    static int32_t labels[N];
    for (int i = 0; i < N; i++)
        features[2 * i + 1] = (float)i;
    tl_labeled_data one_class = {N, 2, 2, 1, {2}, features, labels, NULL, 0};
    cfg = make_config(5, argv);
    o.model_fn = identity_logits;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_evaluate(est, &one_class, &er), TL_OK, "%s", tl_last_error());
    cr_assert_not(er.has_auc);
    cr_assert_eq(er.examples, 64);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
}

/*
 * test_mt_intra_op.c — intra-op threads (also a ThreadSanitizer target): the
 * team runs every part of every job once, with the owner's writes before a
 * job and every part's writes after it visible; and a device that runs its
 * kernels on several threads (intra_op_parallelism_threads) trains the same
 * bits as one thread, for every iterations_per_loop, whether the threads
 * have cores of their own or not, on one core of a replica or on several.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/thread.h"
#include "test_mt_cpu_util.h"
#include "tpuloop/tpuloop.h"

/* ---- the team ------------------------------------------------------------- */

typedef struct job {
    int64_t *cells;  /* (n) each part adds round + 1 to its cells */
    int64_t n;
    int64_t round;
    atomic_int calls[8];
    int size_seen[8];
} job;

static void add_round(void *ctx, int part, int nparts)
{
    job *j = ctx;
    atomic_fetch_add(&j->calls[part], 1);
    j->size_seen[part] = nparts;
    int64_t lo, hi;
    tl_team_range(j->n, 4, part, nparts, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        j->cells[i] += j->round + 1;
}

static void run_rounds(int nthreads, int64_t spin_ns, int rounds)
{
    tl_team *t;
    cr_assert_eq(tl_team_create(nthreads, NULL, spin_ns, &t), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_team_size(t), nthreads);
    static int64_t cells[1000];
    memset(cells, 0, sizeof cells);
    job j = {.cells = cells, .n = 1000};
    for (int p = 0; p < 8; p++)
        atomic_init(&j.calls[p], 0);
    for (int r = 0; r < rounds; r++) {
        j.round = r; /* written by the owner before the job: every part sees it */
        tl_team_run(t, add_round, &j);
        /* every part's writes are visible here */
        cr_assert_eq(cells[999], (int64_t)(r + 1) * (r + 2) / 2, "round %d", r);
    }
    tl_team_destroy(t);
    for (int64_t i = 0; i < 1000; i++)
        cr_assert_eq(cells[i], (int64_t)rounds * (rounds + 1) / 2, "cell %lld", (long long)i);
    for (int p = 0; p < nthreads; p++) {
        cr_assert_eq(atomic_load(&j.calls[p]), rounds, "part %d ran %d times", p, atomic_load(&j.calls[p]));
        cr_assert_eq(j.size_seen[p], nthreads);
    }
}

Test(mt_intra_op, team_of_two_runs_every_part_of_every_job_spinning)
{
    run_rounds(2, 50000, 3000);
}

Test(mt_intra_op, team_of_four_runs_every_part_sleeping_oversubscribed)
{
    run_rounds(4, 0, 500);
}

Test(mt_intra_op, team_of_one_and_null_run_the_owner_alone)
{
    run_rounds(1, 0, 10);
    int64_t cells[8] = {0};
    job j = {.cells = cells, .n = 8};
    for (int p = 0; p < 8; p++)
        atomic_init(&j.calls[p], 0);
    tl_team_run(NULL, add_round, &j);
    cr_assert_eq(atomic_load(&j.calls[0]), 1);
    cr_assert_eq(j.size_seen[0], 1);
    cr_assert_eq(cells[7], 1);
    cr_assert_eq(tl_team_size(NULL), 1);
    tl_team_destroy(NULL);
}

Test(mt_intra_op, team_arguments_are_checked)
{
    tl_team *t = (tl_team *)&t;
    cr_assert_eq(tl_team_create(0, NULL, 0, &t), TL_EINVAL);
    cr_assert_null(t);
    cr_assert(strstr(tl_last_error(), "nthreads >= 1, got 0") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_team_create(2, NULL, -1, &t), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "spin must be >= 0 ns, got -1") != NULL, "%s", tl_last_error());
}

/* Each part records the cpu it ran on. */
static void where(void *ctx, int part, int nparts)
{
    (void)nparts;
    ((int *)ctx)[part] = sched_getcpu();
}

Test(mt_intra_op, helpers_pin_to_the_cpus_given)
{
    /* Helper 1 on the last cpu of the mask; helper 2's cpu is outside it,
     * which is no error: that helper runs unpinned. */
    int last = tmc_last_cpu();
    int cpus[2] = {last, 100000};
    tl_team *t;
    cr_assert_eq(tl_team_create(3, cpus, 0, &t), TL_OK, "%s", tl_last_error());
    int ran_on[3] = {-1, -1, -1};
    for (int round = 0; round < 20; round++)
        tl_team_run(t, where, ran_on);
    tl_team_destroy(t);
    cr_assert_eq(ran_on[1], last, "helper 1 pinned to cpu %d ran on %d", last, ran_on[1]);
    cr_assert(ran_on[0] >= 0 && ran_on[2] >= 0, "every part ran");
}

/* ---- a device on several threads ------------------------------------------ */

/* An MLP whose first two layers' GEMMs are large enough to split (a piece
 * of 2^21 multiply-adds or more, kernels.h), forward and backward. */
static tl_status wide_mlp(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    tl_t h = tl_dense(g, a->features, 512, TL_ACT_RELU, "dense");
    h = tl_dense(g, h, 256, TL_ACT_RELU, "dense_1");
    tl_t logits = tl_dense(g, h, 4, TL_ACT_NONE, "dense_2");
    spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    spec->logits = logits;
    return tl_graph_status(g);
}

/* Trains 24 steps of batch 128 with the flags and returns the digest and
 * the evaluation's loss. */
static void train_digest(const char *devices, const char *threads, const char *ipl, const char *extra,
                         char digest[65], double *eval_loss)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char f_dev[64], f_thr[64], f_ipl[64];
    snprintf(f_dev, sizeof f_dev, "--devices=%s", devices);
    snprintf(f_thr, sizeof f_thr, "--intra_op_parallelism_threads=%s", threads);
    snprintf(f_ipl, sizeof f_ipl, "--iterations_per_loop=%s", ipl);
    char *argv[] = {f_dev, f_thr, f_ipl, "--train_batch_size=128", "--eval_batch_size=128", "--train_steps=24",
                    "--eval_steps=2", "--tf_random_seed=5", (char *)extra};
    int argc = extra != NULL ? 9 : 8;
    cr_assert_eq(tl_config_apply_args(cfg, argc, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = wide_mlp;
    tl_optimizer_config_default(TL_OPTIM_ADAM, &o.optimizer);
    o.optimizer.lr.learning_rate = 0.01;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = 1024;
    s.num_features = 600;
    s.num_classes = 4;
    s.seed = 4;
    tl_labeled_data *data = NULL;
    cr_assert_eq(tl_synthetic_load(&s, &data), TL_OK, "%s", tl_last_error());
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, data, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 24);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, data, &er), TL_OK, "%s", tl_last_error());
    *eval_loss = er.loss;
    cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(data);
    tl_config_destroy(cfg);
}

Test(mt_intra_op, threads_train_the_bits_of_one_thread_at_every_iterations_per_loop)
{
    char one[65], d[65];
    double l1, l;
    train_digest("1", "1", "24", NULL, one, &l1);
    static const char *const runs[][2] = {{"2", "24"}, {"2", "5"}, {"3", "1"}, {"4", "7"}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        train_digest("1", runs[i][0], runs[i][1], NULL, d, &l);
        cr_assert_str_eq(d, one, "%s threads at iterations_per_loop %s", runs[i][0], runs[i][1]);
        cr_assert(l == l1, "evaluation loss %.9g at %s threads, %.9g at one", l, runs[i][0], l1);
    }
}

/* devices devices (and the extra flag) on 2 threads each train the bits of
 * one thread each, and evaluate the same loss. */
static void two_threads_as_one(const char *devices, const char *extra)
{
    char one[65], two[65];
    double l1, l2;
    train_digest(devices, "1", "6", extra, one, &l1);
    train_digest(devices, "2", "6", extra, two, &l2);
    cr_assert_str_eq(two, one);
    cr_assert(l1 == l2, "evaluation loss %.9g on 2 threads, %.9g on one", l2, l1);
}

Test(mt_intra_op, replicas_of_several_threads_train_the_bits_of_one_thread_each)
{
    /* 2 replicas x 2 threads: more threads than this machine's cores when
     * it has fewer than 4 (the helpers then sleep instead of spinning). */
    two_threads_as_one("2", NULL);
}

Test(mt_intra_op, cores_of_a_partitioned_replica_split_their_gemms_too)
{
    /* Two cores of one replica, each with 2 threads (core 1's are its
     * follower's team): the first layer's kernel split by columns over the
     * cores (Keras' ModelParallel), the second's by rows. */
    static const char *const layout = "--layout_map={\"dense/kernel\": [null, \"model\"], \"dense/bias\": "
                                      "[\"model\"], \"dense_1/kernel\": [\"model\", null]}";
    two_threads_as_one("2", layout);
}

/* host_call with the spec's own tensors (spec tpu_estimator.md §6): each
 * tensor arrives concatenated over the replicas along axis 0 in replica order
 * (T64), at the steps experimental_host_call_every_n_steps picks, with the
 * post-increment global step; an empty list disables the outfeed; a scalar is
 * refused with TensorFlow's message (T63); a failing callback stops training;
 * evaluation's host_call fires every step. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/tpuloop.h"

enum { D = 4, C = 4, N = 256 };

/* What the model_fn puts in its spec's host_call. */
typedef struct hc_model {
    bool outfeed;          /* loss (1), logits (b, C), labels (b) int32, features (b, D) */
    bool names;            /* name them; else the defaults */
    bool disabled;         /* host_call_disabled */
    bool eval_only;        /* the tensors only in EVAL */
    int bad;               /* 0, or which malformed spec to return (see model_fn) */
} hc_model;

/* logits = features + bias: the test can tell the bias from any row, and a
 * replica's loss from its rows. */
static tl_status model_fn(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    const hc_model *m = user;
    int64_t c = C, one = 1;
    tl_t bias = tl_variable(g, "bias", &c, 1, (tl_initializer){TL_INIT_UNIFORM, -0.5, 0.5});
    tl_t logits = tl_bias_add(g, a->features, bias);
    spec->logits = logits;
    spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    spec->host_call_disabled = m->disabled;
    if (m->outfeed && (!m->eval_only || a->mode == TL_MODE_EVAL)) {
        static const char *const names[4] = {"loss", "logits", "labels", "features"};
        tl_t ts[4] = {tl_reshape(g, spec->loss, &one, 1), logits, a->labels, a->features};
        for (int k = 0; k < 4; k++) {
            spec->host_call[k] = ts[k];
            spec->host_call_names[k] = m->names ? names[k] : NULL;
        }
        spec->num_host_call = 4;
    }
    static char long_name[80];
    switch (m->bad) {
    case 1: /* T63 */
        spec->host_call[1] = spec->loss;
        spec->host_call_names[1] = "my_loss";
        break;
    case 2:
        spec->num_host_call = TL_MAX_HOST_CALL + 1;
        break;
    case 3:
        spec->num_host_call = -1;
        break;
    case 4:
        spec->host_call[2] = TL_T_INVALID;
        break;
    case 5:
        memset(long_name, 'x', sizeof long_name - 1);
        spec->host_call_names[3] = long_name;
        break;
    case 6: /* scalar without a name: the default name in the message */
        spec->host_call[0] = spec->loss;
        spec->host_call_names[0] = NULL;
        break;
    default:
        break;
    }
    return tl_graph_status(g);
}

static tl_labeled_data *synthetic(int64_t n, uint64_t seed)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = n;
    s.num_features = D;
    s.num_classes = C;
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

/* ---- the callback records what it gets ---------------------------------- */

enum { MAX_CALLS = 32, MAX_R = 4, MAX_B = 16 };

typedef struct call {
    int64_t step;
    int n;
    char names[4][TL_MAX_OUTFEED_NAME];
    tl_dtype dtype[4];
    int rank[4];
    int64_t shape[4][2];
    float loss[MAX_R];
    float logits[MAX_R * MAX_B * C];
    int32_t labels[MAX_R * MAX_B];
    float features[MAX_R * MAX_B * D];
} call;

typedef struct recorder {
    int n;
    call calls[MAX_CALLS];
    int64_t fail_at;       /* return TL_EIO at this global step (0: never) */
} recorder;

static tl_status record(int64_t global_step, const tl_host_tensor *t, int n, void *user)
{
    recorder *rec = user;
    cr_assert_lt(rec->n, MAX_CALLS);
    call *c = &rec->calls[rec->n++];
    c->step = global_step;
    c->n = n;
    cr_assert_leq(n, 4);
    for (int k = 0; k < n; k++) {
        snprintf(c->names[k], sizeof c->names[k], "%s", t[k].name);
        c->dtype[k] = t[k].dtype;
        c->rank[k] = t[k].rank;
        cr_assert_leq(t[k].rank, 2);
        c->shape[k][0] = t[k].shape[0];
        c->shape[k][1] = t[k].rank > 1 ? t[k].shape[1] : 0;
    }
    if (n == 4) {
        cr_assert_leq(t[0].shape[0], MAX_R, "%s rank %d shape %lld", t[0].name, t[0].rank, (long long)t[0].shape[0]);
        cr_assert_leq(t[2].shape[0], MAX_R * MAX_B);
        memcpy(c->loss, t[0].data, (size_t)t[0].shape[0] * sizeof(float));
        memcpy(c->logits, t[1].data, (size_t)(t[1].shape[0] * C) * sizeof(float));
        memcpy(c->labels, t[2].data, (size_t)t[2].shape[0] * sizeof(int32_t));
        memcpy(c->features, t[3].data, (size_t)(t[3].shape[0] * D) * sizeof(float));
    }
    return global_step == rec->fail_at ? TL_EIO : TL_OK;
}

/* The index of the example whose features are row, or -1. */
static int64_t find_row(const tl_labeled_data *d, const float *row)
{
    for (int64_t i = 0; i < d->num_examples; i++)
        if (memcmp(d->features + i * D, row, D * sizeof(float)) == 0)
            return i;
    return -1;
}

/* Checks one call of the four tensors with R replicas of b rows each: the
 * shapes, each row against the data, one bias for every row, and each
 * replica's loss recomputed from its own block of logits and labels. */
static void check_call(const call *c, const tl_labeled_data *d, int R, int64_t b)
{
    cr_assert_eq(c->n, 4);
    static const char *const names[4] = {"loss", "logits", "labels", "features"};
    for (int k = 0; k < 4; k++)
        cr_assert_str_eq(c->names[k], names[k]);
    cr_assert_eq(c->rank[0], 1);
    cr_assert_eq(c->shape[0][0], R, "T64: (1,) per replica arrives as (R)");
    cr_assert_eq(c->shape[1][0], R * b);
    cr_assert_eq(c->shape[1][1], C);
    cr_assert_eq(c->rank[2], 1);
    cr_assert_eq(c->shape[2][0], R * b);
    cr_assert_eq(c->dtype[2], TL_I32);
    cr_assert_eq(c->dtype[3], TL_F32);
    cr_assert_eq(c->shape[3][0], R * b);
    for (int64_t i = 0; i < R * b; i++) {
        int64_t ex = find_row(d, c->features + i * D);
        cr_assert_geq(ex, 0, "row %lld of the concatenated features is an example", (long long)i);
        cr_assert_eq(c->labels[i], d->labels[ex], "row %lld's label", (long long)i);
        for (int j = 0; j < C; j++) {
            double bias = (double)c->logits[i * C + j] - (double)c->features[i * D + j];
            double bias0 = (double)c->logits[j] - (double)c->features[j];
            cr_assert(fabs(bias - bias0) < 1e-5, "one bias for every row of the step");
        }
    }
    for (int r = 0; r < R; r++) {
        double sum = 0;
        for (int64_t i = r * b; i < (r + 1) * b; i++) {
            const float *z = c->logits + i * C;
            double mx = z[0], s = 0;
            for (int j = 1; j < C; j++)
                mx = z[j] > mx ? z[j] : mx;
            for (int j = 0; j < C; j++)
                s += exp((double)z[j] - mx);
            sum += mx + log(s) - (double)z[c->labels[i]];
        }
        double want = sum / (double)b;
        cr_assert(fabs(want - c->loss[r]) < 1e-5 * (1 + want), "replica %d's loss %f is its rows' %f", r,
                  (double)c->loss[r], want);
    }
}

static tl_estimator *make_estimator(int argc, char **argv, hc_model *m, recorder *rec, tl_config **cfg)
{
    *cfg = make_config(argc, argv);
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = model_fn;
    o.user = m;
    o.host_call = record;
    o.host_call_user = rec;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(*cfg, &o, &est), TL_OK, "%s", tl_last_error());
    return est;
}

/* ---- T64 ---------------------------------------------------------------- */

Test(mt_hostcall, T64_tensors_are_concatenated_over_replicas_in_replica_order)
{
    char *argv[] = {"--devices=4", "--iterations_per_loop=3", "--train_batch_size=16", "--train_steps=7",
                    "--tf_random_seed=3"};
    hc_model m = {.outfeed = true, .names = true};
    static recorder rec;
    memset(&rec, 0, sizeof rec);
    tl_config *cfg;
    tl_estimator *est = make_estimator(5, argv, &m, &rec, &cfg);
    tl_labeled_data *d = synthetic(N, 5);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(rec.n, 7, "every_n 1: every step fires");
    bool replicas_differ = false;
    for (int k = 0; k < 7; k++) {
        cr_assert_eq(rec.calls[k].step, k + 1, "post-increment global step");
        check_call(&rec.calls[k], d, 4, 4);
        replicas_differ |= rec.calls[k].loss[0] != rec.calls[k].loss[3];
    }
    cr_assert(replicas_differ);
    /* Block 0 is replica 0: the reported loss is replica 0's last loss. */
    cr_assert_eq((double)rec.calls[6].loss[0], tr.loss);
    double mean = 0;
    for (int r = 0; r < 4; r++)
        mean += rec.calls[6].loss[r];
    cr_assert_eq(mean / 4, tr.loss_mean);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

/* T32 with the spec's tensors: every_n 2, ipl 5 fires at loop-local 0, 2, 4. */
Test(mt_hostcall, every_n_steps_picks_loop_local_steps)
{
    char *argv[] = {"--devices=2", "--iterations_per_loop=5", "--experimental_host_call_every_n_steps=2",
                    "--train_batch_size=8", "--train_steps=10", "--tf_random_seed=3"};
    hc_model m = {.outfeed = true, .names = true};
    static recorder rec;
    memset(&rec, 0, sizeof rec);
    tl_config *cfg;
    tl_estimator *est = make_estimator(6, argv, &m, &rec, &cfg);
    tl_labeled_data *d = synthetic(N, 5);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    static const int64_t steps[] = {1, 3, 5, 6, 8, 10};
    cr_assert_eq(rec.n, 6);
    for (int k = 0; k < 6; k++) {
        cr_assert_eq(rec.calls[k].step, steps[k]);
        check_call(&rec.calls[k], d, 2, 4);
    }
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

Test(mt_hostcall, unnamed_tensors_get_default_names)
{
    char *argv[] = {"--devices=2", "--train_batch_size=8", "--train_steps=1"};
    hc_model m = {.outfeed = true, .names = false};
    static recorder rec;
    memset(&rec, 0, sizeof rec);
    tl_config *cfg;
    tl_estimator *est = make_estimator(3, argv, &m, &rec, &cfg);
    tl_labeled_data *d = synthetic(N, 5);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(rec.n, 1);
    cr_assert_eq(rec.calls[0].n, 4);
    cr_assert_str_eq(rec.calls[0].names[0], "host_call_0");
    cr_assert_str_eq(rec.calls[0].names[3], "host_call_3");
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

/* TensorFlow's empty tensor list: no outfeed, no call, training as usual. */
Test(mt_hostcall, disabled_host_call_is_never_called)
{
    char *argv[] = {"--devices=2", "--iterations_per_loop=2", "--train_batch_size=8", "--train_steps=5",
                    "--tf_random_seed=3"};
    hc_model m = {.disabled = true};
    static recorder rec;
    memset(&rec, 0, sizeof rec);
    tl_config *cfg;
    tl_estimator *est = make_estimator(5, argv, &m, &rec, &cfg);
    tl_labeled_data *d = synthetic(N, 5);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 5);
    cr_assert_eq(rec.n, 0);
    char disabled_digest[65], outfeed_digest[65];
    cr_assert_eq(tl_estimator_params_digest(est, disabled_digest), TL_OK);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);

    /* The outfeed changes nothing the devices compute. */
    m.disabled = false;
    m.outfeed = true;
    est = make_estimator(5, argv, &m, &rec, &cfg);
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(rec.n, 5);
    cr_assert_eq(tl_estimator_params_digest(est, outfeed_digest), TL_OK);
    cr_assert_str_eq(disabled_digest, outfeed_digest);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

/* A failing callback stops training after its loop; the loop's steps count. */
Test(mt_hostcall, failing_callback_stops_training)
{
    char *argv[] = {"--devices=2", "--iterations_per_loop=5", "--train_batch_size=8", "--train_steps=20"};
    hc_model m = {.outfeed = true, .names = true};
    static recorder rec;
    memset(&rec, 0, sizeof rec);
    rec.fail_at = 7;
    tl_config *cfg;
    tl_estimator *est = make_estimator(4, argv, &m, &rec, &cfg);
    tl_labeled_data *d = synthetic(N, 5);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_EIO);
    cr_assert(strstr(tl_last_error(), "host_call at step 7: returned TL_EIO") != NULL, "%s", tl_last_error());
    cr_assert_eq(rec.n, 7, "no call after the failing one");
    cr_assert_eq(tr.global_step, 10, "the second loop ran; no third");
    cr_assert_eq(tl_estimator_global_step(est), 10);
    /* The estimator trains on afterwards. */
    rec.fail_at = 0;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 30);
    cr_assert_eq(rec.n, 27);
    cr_assert_eq(rec.calls[26].step, 30);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

/* ---- checks when the model is traced ------------------------------------ */

static void train_fails(hc_model m, tl_status want, const char *msg)
{
    char *argv[] = {"--devices=2", "--train_batch_size=8", "--train_steps=2"};
    static recorder rec;
    memset(&rec, 0, sizeof rec);
    tl_config *cfg;
    tl_estimator *est = make_estimator(3, argv, &m, &rec, &cfg);
    tl_labeled_data *d = synthetic(64, 5);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), want, "bad %d: %s", m.bad, tl_last_error());
    cr_assert(strstr(tl_last_error(), msg) != NULL, "bad %d: %s", m.bad, tl_last_error());
    /* Sticky: the half-built estimator never runs. */
    cr_assert_eq(tl_estimator_train(est, d, &tr), want);
    cr_assert(strstr(tl_last_error(), msg) != NULL, "%s", tl_last_error());
    cr_assert_eq(rec.n, 0);
    cr_assert_eq(tl_estimator_global_step(est), 0);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

Test(mt_hostcall, T63_a_scalar_is_refused)
{
    train_fails((hc_model){.outfeed = true, .names = true, .bad = 1}, TL_EINVAL,
                "All tensors outfed from TPU should preserve batch size dimension, but got scalar my_loss");
    train_fails((hc_model){.outfeed = true, .bad = 6}, TL_EINVAL,
                "should preserve batch size dimension, but got scalar host_call_0");
}

Test(mt_hostcall, malformed_specs_are_refused)
{
    train_fails((hc_model){.outfeed = true, .bad = 2}, TL_EINVAL, "spec->num_host_call must be in [0, 8], got 9");
    train_fails((hc_model){.outfeed = true, .bad = 3}, TL_EINVAL, "spec->num_host_call must be in [0, 8], got -1");
    train_fails((hc_model){.outfeed = true, .bad = 4}, TL_EINVAL, "spec->host_call[2] is not a tensor of the graph");
    train_fails((hc_model){.outfeed = true, .bad = 5}, TL_EINVAL, "spec->host_call_names[3] must have 1 to 63 bytes");
    train_fails((hc_model){.outfeed = true, .disabled = true}, TL_EINVAL, "host_call_disabled");
}

/* ---- evaluation --------------------------------------------------------- */

/* Eval host_calls fire every step, in order, with the evaluated step; the
 * eval data is taken in order, so the concatenation is the data's rows. */
Test(mt_hostcall, eval_host_call_fires_every_step_with_the_rows_in_order)
{
    char *argv[] = {"--devices=2", "--iterations_per_loop=4", "--train_batch_size=8", "--train_steps=3",
                    "--eval_batch_size=8", "--eval_steps=5", "--tf_random_seed=3"};
    hc_model m = {.outfeed = true, .names = true, .eval_only = true};
    static recorder rec;
    memset(&rec, 0, sizeof rec);
    tl_config *cfg;
    tl_estimator *est = make_estimator(7, argv, &m, &rec, &cfg);
    tl_labeled_data *d = synthetic(N, 5);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(rec.n, 3, "TRAIN's spec has no host_call: the default one");
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(rec.calls[k].n, 1);
        cr_assert_str_eq(rec.calls[k].names[0], "loss");
        cr_assert_eq(rec.calls[k].shape[0][0], 2);
    }
    rec.n = 0;
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    cr_assert_eq(rec.n, 5, "one call per eval step");
    double loss_sum = 0, loss0_sum = 0;
    for (int k = 0; k < 5; k++) {
        const call *c = &rec.calls[k];
        cr_assert_eq(c->step, 3, "the evaluated parameters' step");
        check_call(c, d, 2, 4);
        cr_assert_eq(memcmp(c->features, d->features + k * 8 * D, 8 * D * sizeof(float)), 0,
                     "step %d: replica 0's rows, then replica 1's", k);
        cr_assert_eq(memcmp(c->labels, d->labels + k * 8, 8 * sizeof(int32_t)), 0);
        loss_sum += (double)c->loss[0] + (double)c->loss[1];
        loss0_sum += c->loss[0];
    }
    cr_assert(fabs(er.loss - loss_sum / 10) < 1e-6, "eval loss %f vs the outfed losses' %f", er.loss, loss_sum / 10);
    cr_assert(fabs(er.loss_replica0 - loss0_sum / 5) < 1e-6);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(d);
    tl_config_destroy(cfg);
}

/* ---- no allocation per step --------------------------------------------- */


static tl_status count_calls(int64_t global_step, const tl_host_tensor *t, int n, void *user)
{
    (void)global_step;
    (void)t;
    cr_assert_eq(n, 4);
    (*(int64_t *)user)++;
    return TL_OK;
}

/* Allocations made by the second train() of a warm estimator. */
static long allocations_of_second_train(const char *steps, int64_t *calls)
{
    char steps_flag[64];
    snprintf(steps_flag, sizeof steps_flag, "--train_steps=%s", steps);
    char *argv[] = {"--iterations_per_loop=10", "--devices=2", "--train_batch_size=8", steps_flag};
    tl_config *cfg = make_config(4, argv);
    hc_model m = {.outfeed = true, .names = true};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = model_fn;
    o.user = &m;
    o.host_call = count_calls;
    o.host_call_user = calls;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *data = synthetic(N, 2);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, data, &tr), TL_OK, "%s", tl_last_error());
    long before = mtck_allocations();
    cr_assert_eq(tl_estimator_train(est, data, &tr), TL_OK, "%s", tl_last_error());
    long n = mtck_allocations() - before;
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(data);
    tl_config_destroy(cfg);
    return n;
}

Test(mt_hostcall, outfeed_allocates_nothing_per_step)
{
    mtck_count_allocations(true);
    int64_t short_calls = 0, long_calls = 0;
    long short_run = allocations_of_second_train("10", &short_calls);
    long long_run = allocations_of_second_train("310", &long_calls);
    mtck_count_allocations(false);
    cr_assert_eq(short_calls, 20);
    cr_assert_eq(long_calls, 620);
    cr_assert_eq(long_run, short_run, "10 steps allocate %ld times, 310 steps %ld times", short_run, long_run);
}

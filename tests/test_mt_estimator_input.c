/* The estimator fed by input_fn datasets (tl_estimator_train_input,
 * tl_estimator_evaluate_input): every deployment mode end to end on 4 and 8
 * virtual devices over 1 and 2 hosts — which example reaches which replica,
 * seen through host_call's features — the deployment tuple each invocation
 * gets, exact resume of the datasets' positions from checkpoints (shuffle
 * buffers included), the same bits whatever iterations_per_loop, and the
 * input's errors. Example id k has features (k, k % 7, 1, -1) and label
 * k % 4. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/dataset.h"
#include "tpuloop/tpuloop.h"

enum { D = 4, C = 4, N = 4096, MAX_R = 8, MAX_STEPS = 16, MAX_B = 16 };

static tl_labeled_data *id_data(void)
{
    tl_labeled_data *d = calloc(1, sizeof *d);
    cr_assert_not_null(d);
    d->num_examples = N;
    d->num_features = D;
    d->num_classes = C;
    d->feature_rank = 1;
    d->feature_shape[0] = D;
    d->features = malloc(sizeof(float) * N * D);
    d->labels = malloc(sizeof(int32_t) * N);
    cr_assert(d->features != NULL && d->labels != NULL);
    for (int64_t k = 0; k < N; k++) {
        float row[D] = {(float)k, (float)(k % 7), 1.0f, -1.0f};
        memcpy(d->features + k * D, row, sizeof row);
        d->labels[k] = (int32_t)(k % C);
    }
    return d;
}

static void id_data_free(tl_labeled_data *d)
{
    free(d->features);
    free(d->labels);
    free(d);
}

/* ---- the input_fn ------------------------------------------------------- */

typedef struct input {
    const tl_labeled_data *data;
    bool shard, repeat;
    int64_t shuffle;            /* buffer, 0: none */
    int calls;
    tl_input_context ctx[MAX_R];
    int fail_at;                /* invocation that fails, -1: none */
} input;

static tl_status input_fn(const tl_input_context *ctx, void *user, tl_dataset **out)
{
    input *in = user;
    if (in->calls < MAX_R)
        in->ctx[in->calls] = *ctx;
    in->calls++;
    if (ctx->index == in->fail_at)
        return TL_EIO;
    tl_dataset *ds;
    tl_status st = tl_dataset_labeled(in->data, &ds);
    if (st == TL_OK && in->shard)
        st = tl_dataset_shard(ds, ctx->total, ctx->index, &ds);
    if (st == TL_OK && in->shuffle > 0)
        st = tl_dataset_shuffle(ds, in->shuffle, 7, true, &ds);
    if (st == TL_OK && in->repeat)
        st = tl_dataset_repeat(ds, -1, &ds);
    /* Prediction keeps the last, short batch (TPUEstimator pads it). */
    if (st == TL_OK)
        st = tl_dataset_batch(ds, ctx->batch_size, ctx->mode != TL_MODE_PREDICT, &ds);
    if (st == TL_OK)
        st = tl_dataset_prefetch(ds, 2, &ds);
    *out = st == TL_OK ? ds : NULL;
    return st;
}

/* ---- the model and its host_call: features (b, D) over replicas --------- */

typedef struct seen {
    int steps;
    int64_t global_step[MAX_STEPS];
    int64_t rows;                       /* R * b */
    float ids[MAX_STEPS][MAX_R * MAX_B]; /* feature 0 of every row, replica order */
} seen;

static tl_status model_fn(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    tl_t logits = tl_dense(g, a->features, C, TL_ACT_NONE, "dense");
    spec->logits = logits;
    if (a->mode != TL_MODE_PREDICT) {
        spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
        spec->host_call[0] = a->features;
        spec->num_host_call = 1;
    } else {
        spec->predictions = a->features; /* each row says which example it was */
    }
    return tl_graph_status(g);
}

static tl_status host_call(int64_t global_step, const tl_host_tensor *t, int n, void *user)
{
    seen *s = user;
    cr_assert_eq(n, 1);
    cr_assert_lt(s->steps, MAX_STEPS);
    cr_assert_leq(t[0].shape[0], MAX_R * MAX_B);
    s->global_step[s->steps] = global_step;
    s->rows = t[0].shape[0];
    const float *f = t[0].data;
    for (int64_t i = 0; i < t[0].shape[0]; i++)
        s->ids[s->steps][i] = f[i * D];
    s->steps++;
    return TL_OK;
}

static tl_estimator *make(int argc, const char *const *argv, seen *s, tl_config **cfg)
{
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = model_fn;
    o.host_call = s != NULL ? host_call : NULL;
    o.host_call_user = s;
    o.optimizer.lr.learning_rate = 0.01;
    *cfg = mtck_config(argc, argv);
    tl_estimator *est = NULL;
    cr_assert_eq(tl_estimator_create(*cfg, &o, &est), TL_OK, "%s", tl_last_error());
    return est;
}

#define ARGS(...) (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), (const char *[]){__VA_ARGS__}

/* Trains steps steps with argv and checks that row j of replica r at step
 * s holds example expect(r, s, j). */
typedef int64_t (*expect_fn)(int r, int64_t s, int64_t j, int64_t b);

static void train_and_check(int argc, const char *const *argv, input *in, int R, int64_t b, int steps,
                            expect_fn expect)
{
    seen s = {0};
    tl_config *cfg;
    tl_estimator *est = make(argc, argv, &s, &cfg);
    tl_train_result tr;
    tl_input inp = {.input_fn = input_fn, .user = in};
    cr_assert_eq(tl_estimator_train_input(est, &inp, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, steps);
    cr_assert_eq(s.steps, steps);
    cr_assert_eq(s.rows, R * b);
    for (int k = 0; k < steps; k++) {
        cr_assert_eq(s.global_step[k], k + 1);
        for (int r = 0; r < R; r++)
            for (int64_t j = 0; j < b; j++)
                cr_assert_eq(s.ids[k][r * b + j], (float)expect(r, k, j, b), "step %d replica %d row %lld: %g, want %lld",
                             k, r, (long long)j, s.ids[k][r * b + j], (long long)expect(r, k, j, b));
    }
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
}

/* 2 hosts x 2 devices, shard(2, h): host h's n-th example is h + 2n; its
 * host batch of 2b rows is split in two contiguous chunks. */
static int64_t per_host_2x2(int r, int64_t s, int64_t j, int64_t b)
{
    int h = r / 2, jr = r % 2;
    return h + 2 * (s * 2 * b + jr * b + j);
}

Test(mt_estimator_input, per_host_v1_two_hosts)
{
    tl_labeled_data *d = id_data();
    input in = {.data = d, .shard = true, .repeat = true, .fail_at = -1};
    train_and_check(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", "--train_steps=5",
                         "--iterations_per_loop=2"),
                    &in, 4, 4, 5, per_host_2x2);
    /* T36's tuple: (host h, index h, total 2, 2 replicas), batch G / H. */
    cr_assert_eq(in.calls, 3, "one shape probe, then one per host");
    for (int h = 0; h < 2; h++) {
        const tl_input_context *c = &in.ctx[1 + h];
        cr_assert_eq(c->host, h);
        cr_assert_eq(c->index, h);
        cr_assert_eq(c->total, 2);
        cr_assert_eq(c->num_replicas, 2);
        cr_assert_eq(c->batch_size, 8);
        cr_assert_eq(c->mode, TL_MODE_TRAIN);
    }
    id_data_free(d);
}

Test(mt_estimator_input, per_host_v2_two_hosts_same_assignment)
{
    tl_labeled_data *d = id_data();
    input in = {.data = d, .shard = true, .repeat = true, .fail_at = -1};
    train_and_check(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", "--train_steps=4",
                         "--per_host_input_for_training=PER_HOST_V2"),
                    &in, 4, 4, 4, per_host_2x2);
    cr_assert_eq(in.ctx[1].batch_size, 4, "PER_HOST_V2: input_fn gets G / R");
    id_data_free(d);
}

static int64_t per_shard_4(int r, int64_t s, int64_t j, int64_t b)
{
    return r + 4 * (s * b + j);
}

Test(mt_estimator_input, per_shard_v1_one_invocation_per_replica)
{
    tl_labeled_data *d = id_data();
    input in = {.data = d, .shard = true, .repeat = true, .fail_at = -1};
    train_and_check(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", "--train_steps=3",
                         "--per_host_input_for_training=false"),
                    &in, 4, 4, 3, per_shard_4);
    cr_assert_eq(in.calls, 5);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(in.ctx[1 + i].index, i);
        cr_assert_eq(in.ctx[1 + i].host, i / 2);
        cr_assert_eq(in.ctx[1 + i].total, 4);
        cr_assert_eq(in.ctx[1 + i].num_replicas, 1);
    }
    id_data_free(d);
}

static int64_t broadcast_all(int r, int64_t s, int64_t j, int64_t b)
{
    (void)r;
    return s * b + j;
}

Test(mt_estimator_input, broadcast_copies_the_batch_to_every_replica)
{
    tl_labeled_data *d = id_data();
    input in = {.data = d, .shard = true, .repeat = true, .fail_at = -1};
    train_and_check(ARGS("--devices=4", "--train_batch_size=6", "--train_steps=3",
                         "--per_host_input_for_training=BROADCAST"),
                    &in, 4, 6, 3, broadcast_all);
    cr_assert_eq(in.ctx[1].total, 1);
    cr_assert_eq(in.ctx[1].num_replicas, 4);
    cr_assert_eq(in.ctx[1].batch_size, 6);
    id_data_free(d);
}

Test(mt_estimator_input, sliced_evaluation_on_eight_devices)
{
    /* T46: SLICED, G_eval 16 on 8 replicas: one call with 16, slice r
     * (2 rows) to replica r, every eval step. */
    tl_labeled_data *d = id_data();
    input in = {.data = d, .shard = true, .repeat = false, .fail_at = -1};
    seen s = {0};
    tl_config *cfg;
    tl_estimator *est = make(ARGS("--devices=8", "--train_batch_size=16", "--eval_batch_size=16", "--eval_steps=3",
                                  "--eval_training_input_configuration=SLICED"),
                             &s, &cfg);
    tl_eval_result er;
    tl_input inp = {.input_fn = input_fn, .user = &in};
    cr_assert_eq(tl_estimator_evaluate_input(est, &inp, &er), TL_OK, "%s", tl_last_error());
    cr_assert_eq(er.steps, 3);
    cr_assert_eq(er.examples, 48);
    cr_assert_eq(s.steps, 3);
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < 16; i++)
            cr_assert_eq(s.ids[k][i], (float)(k * 16 + i));
    const tl_input_context *c = &in.ctx[in.calls - 1];
    cr_assert_eq(c->mode, TL_MODE_EVAL);
    cr_assert_eq(c->total, 1);
    cr_assert_eq(c->num_replicas, 8);
    cr_assert_eq(c->batch_size, 16);
    /* Evaluation with the same data in memory gives the same metrics. */
    tl_eval_result mem;
    cr_assert_eq(tl_estimator_evaluate(est, d, &mem), TL_OK, "%s", tl_last_error());
    cr_assert_eq(mem.loss, er.loss);
    cr_assert_eq(mem.accuracy, er.accuracy);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    id_data_free(d);
}

static void predict_check(int argc, const char *const *argv, input *in, const int64_t *want, int64_t n,
                          int64_t steps, int64_t padded)
{
    tl_config *cfg;
    tl_estimator *est = make(argc, argv, NULL, &cfg);
    tl_predict_result pr;
    tl_input inp = {.input_fn = input_fn, .user = in};
    cr_assert_eq(tl_estimator_predict_input(est, &inp, &pr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(pr.width, D);
    cr_assert_eq(pr.num_examples, n);
    cr_assert_eq(pr.device_steps, steps, "device steps %lld", (long long)pr.device_steps);
    cr_assert_eq(pr.padded_rows, padded, "padded %lld", (long long)pr.padded_rows);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(pr.values[i * D], (float)want[i], "row %lld: %g, want %lld", (long long)i, pr.values[i * D],
                     (long long)want[i]);
    tl_predict_result_free(&pr);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
}

Test(mt_estimator_input, predict_pads_the_last_batch_across_loops)
{
    /* 50 examples, G 16 on 4 replicas: steps 0-2 full, step 3 gives 2 real
     * rows to replica 0 and padding to the others, step 4 is the stop
     * batch; loops of 2 steps. (TensorFlow predicts on several hosts only
     * with BROADCAST or SLICED, one invocation.) */
    tl_labeled_data *d = id_data();
    tl_labeled_data small = *d;
    small.num_examples = 50;
    input in = {.data = &small, .shard = true, .repeat = false, .fail_at = -1};
    int64_t want[50];
    for (int i = 0; i < 50; i++)
        want[i] = i;
    predict_check(ARGS("--devices=4", "--train_batch_size=16", "--predict_batch_size=16", "--iterations_per_loop=2"),
                  &in, want, 50, 5, 14);
    /* The same through the in-memory path. */
    tl_config *cfg;
    tl_estimator *est = make(ARGS("--devices=4", "--train_batch_size=16", "--predict_batch_size=16",
                                  "--iterations_per_loop=2"),
                             NULL, &cfg);
    tl_predict_result pr;
    cr_assert_eq(tl_estimator_predict(est, &small, &pr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(pr.num_examples, 50);
    cr_assert_eq(pr.device_steps, 5);
    cr_assert_eq(pr.padded_rows, 14);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(pr.values[i * D], (float)i);
    tl_predict_result_free(&pr);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    id_data_free(d);
}

Test(mt_estimator_input, predict_sliced_and_broadcast)
{
    tl_labeled_data *d = id_data();
    tl_labeled_data small = *d;
    small.num_examples = 10;
    input in = {.data = &small, .shard = true, .repeat = false, .fail_at = -1};
    int64_t want[10];
    for (int i = 0; i < 10; i++)
        want[i] = i;
    /* SLICED, G 4 over 2 replicas: 4, 4, 2 + 2 padding, stop (T58's shape). */
    predict_check(ARGS("--devices=2", "--train_batch_size=4", "--predict_batch_size=4",
                       "--eval_training_input_configuration=SLICED"),
                  &in, want, 10, 4, 2);
    /* BROADCAST: each replica predicts the whole batch; replica 0's rows count. */
    predict_check(ARGS("--devices=2", "--train_batch_size=4", "--predict_batch_size=4",
                       "--per_host_input_for_training=BROADCAST"),
                  &in, want, 10, 4, 2);
    id_data_free(d);
}

/* ---- positions in checkpoints -------------------------------------------- */

static void digest_of(int argc, const char *const *argv, input *in, int64_t want_step, char hex[65])
{
    tl_config *cfg;
    tl_estimator *est = make(argc, argv, NULL, &cfg);
    tl_train_result tr;
    tl_input inp = {.input_fn = input_fn, .user = in};
    cr_assert_eq(tl_estimator_train_input(est, &inp, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, want_step);
    cr_assert_geq(tr.infeed_wait_seconds, 0.0);
    cr_assert_eq(tl_estimator_params_digest(est, hex), TL_OK);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
}

Test(mt_estimator_input, resume_continues_the_shuffled_input_exactly)
{
    tl_labeled_data *d = id_data();
    /* A small set so the 12 steps cross epochs: the repeat's epoch and the
     * reshuffle are in the saved position too. */
    tl_labeled_data small = *d;
    small.num_examples = 200;
    input in = {.data = &small, .shard = true, .repeat = true, .shuffle = 64, .fail_at = -1};
    char *dir1 = mtck_tmpdir(), *dir2 = mtck_tmpdir();
    char md1[512], md2[512];
    snprintf(md1, sizeof md1, "--model_dir=%s", dir1);
    snprintf(md2, sizeof md2, "--model_dir=%s", dir2);
    char whole[65], split[65], loop5[65];
    digest_of(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", "--train_steps=12",
                   "--iterations_per_loop=3", "--save_checkpoints_steps=3", "--tf_random_seed=5", md1),
              &in, 12, whole);
    /* Two runs of 6 steps each, the second restoring from the first's
     * checkpoint in a new estimator. */
    digest_of(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", "--train_steps=6",
                   "--iterations_per_loop=3", "--save_checkpoints_steps=3", "--tf_random_seed=5", md2),
              &in, 6, split);
    cr_assert_str_neq(split, whole);
    digest_of(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", "--train_steps=6",
                   "--iterations_per_loop=3", "--save_checkpoints_steps=3", "--tf_random_seed=5", md2),
              &in, 12, split);
    cr_assert_str_eq(split, whole, "a resumed run must read exactly the examples of the uninterrupted one");
    /* And without a model_dir, other loop sizes give the same bits. */
    digest_of(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", "--train_steps=12",
                   "--iterations_per_loop=5", "--tf_random_seed=5"),
              &in, 12, loop5);
    cr_assert_str_eq(loop5, whole);
    mtck_rmtree(dir1);
    mtck_rmtree(dir2);
    free(dir1);
    free(dir2);
    id_data_free(d);
}

/* ---- errors ---------------------------------------------------------------- */

Test(mt_estimator_input, a_failing_input_fn_names_its_invocation)
{
    tl_labeled_data *d = id_data();
    input in = {.data = d, .shard = true, .repeat = true, .fail_at = 1};
    tl_config *cfg;
    tl_estimator *est = make(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", "--train_steps=2"), NULL,
                             &cfg);
    tl_train_result tr;
    tl_input inp = {.input_fn = input_fn, .user = &in};
    cr_assert_eq(tl_estimator_train_input(est, &inp, &tr), TL_EIO);
    cr_assert(strstr(tl_last_error(), "input_fn (train, invocation 1 of 2, host 1): ") != NULL, "%s",
              tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    id_data_free(d);
}

/* Estimator.train ends at OutOfRange: an input that runs out stops training
 * at that step, with a checkpoint there, and a run resumed from any earlier
 * checkpoint ends at the same step with the same bits. */
static void train_to_end(const char *ipl, const char *dir, const char *steps, bool finite, int64_t want,
                         char hex[65])
{
    tl_labeled_data *d = id_data();
    tl_labeled_data small = *d;
    small.num_examples = 88; /* 2 shards of 44: five steps of 8 per host, then out */
    input in = {.data = &small, .shard = true, .repeat = false, .shuffle = 16, .fail_at = -1};
    char md[512];
    snprintf(md, sizeof md, "--model_dir=%s", dir != NULL ? dir : "");
    tl_config *cfg;
    tl_estimator *est = dir != NULL ? make(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", ipl, md,
                                                "--save_checkpoints_steps=2", steps),
                                           NULL, &cfg)
                                    : make(ARGS("--devices=2", "--num_hosts=2", "--train_batch_size=16", ipl, steps),
                                           NULL, &cfg);
    tl_train_result tr;
    tl_input inp = {.input_fn = input_fn, .user = &in, .finite = finite};
    cr_assert_eq(tl_estimator_train_input(est, &inp, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, want);
    cr_assert(tr.end_of_input || want < 5);
    cr_assert_eq(tl_estimator_params_digest(est, hex), TL_OK);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    id_data_free(d);
}

Test(mt_estimator_input, an_input_that_ends_stops_training)
{
    char a[65], b[65], c[65], e[65];
    /* train_steps beyond the input: it ends at step 5, mid-loop for ipl 3. */
    train_to_end("--iterations_per_loop=3", NULL, "--train_steps=9", false, 5, a);
    train_to_end("--iterations_per_loop=1", NULL, "--train_steps=9", false, 5, b);
    cr_assert_str_eq(a, b);
    /* Neither train_steps nor max_steps: an input that ends says where. */
    train_to_end("--iterations_per_loop=4", NULL, "--max_steps=null", true, 5, c);
    cr_assert_str_eq(a, c);
    /* Stopped at 4 (a checkpoint at 2 and at 4), then resumed: the pass
     * finishes at 5 with the same bits, and once more trains nothing. */
    char *dir = mtck_tmpdir();
    train_to_end("--iterations_per_loop=2", dir, "--max_steps=4", true, 4, e);
    train_to_end("--iterations_per_loop=2", dir, "--max_steps=null", true, 5, e);
    cr_assert_str_eq(a, e);
    int64_t steps[8];
    int n = mtck_steps(dir, steps, 8);
    cr_assert(n >= 1 && steps[n - 1] == 5, "the end saves a checkpoint at step 5");
    train_to_end("--iterations_per_loop=2", dir, "--max_steps=null", true, 5, e);
    cr_assert_str_eq(a, e);
    mtck_drop_dir(dir);
}

Test(mt_estimator_input, steps_are_required_for_an_input_without_end)
{
    tl_labeled_data *d = id_data();
    input in = {.data = d, .shard = true, .repeat = true, .fail_at = -1};
    tl_config *cfg;
    tl_estimator *est = make(ARGS("--devices=2", "--train_batch_size=16"), NULL, &cfg);
    tl_train_result tr;
    tl_input inp = {.input_fn = input_fn, .user = &in};
    cr_assert_eq(tl_estimator_train_input(est, &inp, &tr), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "For TPU training, one of `steps` or `max_steps` must be set.") != NULL, "%s",
              tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    id_data_free(d);
}

static tl_status keyed_fn(const tl_input_context *ctx, void *user, tl_dataset **out)
{
    (void)ctx;
    tl_status st = tl_dataset_labeled(user, out);
    return st == TL_OK ? tl_dataset_batch(*out, 8, true, out) : st;
}

Test(mt_estimator_input, a_missing_key_lists_what_there_is)
{
    tl_labeled_data *d = id_data();
    tl_config *cfg;
    tl_estimator *est = make(ARGS("--devices=1", "--train_batch_size=8", "--train_steps=1"), NULL, &cfg);
    tl_train_result tr;
    const char *keys[] = {"image"};
    tl_input inp = {.input_fn = keyed_fn, .user = d, .feature_keys = keys, .num_feature_keys = 1};
    cr_assert_eq(tl_estimator_train_input(est, &inp, &tr), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "no feature tensor \"image\" (they have \"features\", \"label\")") != NULL, "%s",
              tl_last_error());
    inp.feature_keys = NULL;
    inp.num_feature_keys = 0;
    inp.label_key = "y";
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    est = make(ARGS("--devices=1", "--train_batch_size=8", "--train_steps=1"), NULL, &cfg);
    cr_assert_eq(tl_estimator_train_input(est, &inp, &tr), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "no label tensor \"y\"") != NULL, "%s", tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    id_data_free(d);
}

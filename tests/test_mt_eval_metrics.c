/* eval_metrics (spec tpu_estimator.md §5, §7): the spec's metric tensors are
 * outfed every eval step and handed to metric_update concatenated over the
 * replicas in replica order, in step order; metric_result is read once at
 * the end; "loss" and "global_step" are reserved (T57); the reported loss is
 * replica 0's mean (T55); and the eval loop still allocates nothing per
 * step. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/tpuloop.h"

enum { D = 5, C = 3, N = 96, MAX_ROWS = 96 };

/* What the model_fn puts in the EVAL spec. */
typedef struct em_model {
    bool metrics;       /* eval_metric_tensors = logits "logits", labels "labels" */
    bool scalar;        /* ... and the scalar loss as a third (T63 in EVAL) */
    bool host_call;     /* an eval host_call of the labels */
} em_model;

static tl_status model_fn(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    const em_model *m = user;
    tl_t logits = tl_dense(g, tl_dense(g, a->features, 8, TL_ACT_TANH, "dense"), C, TL_ACT_NONE, "dense_1");
    spec->logits = logits;
    if (a->mode == TL_MODE_PREDICT)
        return tl_graph_status(g);
    spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    if (a->mode != TL_MODE_EVAL)
        return tl_graph_status(g);
    if (m->metrics) {
        spec->eval_metric_tensors[0] = logits;
        spec->eval_metric_tensor_names[0] = "logits";
        spec->eval_metric_tensors[1] = a->labels;
        spec->eval_metric_tensor_names[1] = "labels";
        spec->num_eval_metric_tensors = 2;
    }
    if (m->scalar)
        spec->eval_metric_tensors[spec->num_eval_metric_tensors++] = spec->loss;
    if (m->host_call) {
        spec->host_call[0] = a->labels;
        spec->num_host_call = 1;
    }
    return tl_graph_status(g);
}

/* metric_fn's state: every row it was given, and the order of the calls. */
typedef struct metric_state {
    int updates;
    int64_t rows;
    float logits[MAX_ROWS * C];
    int32_t labels[MAX_ROWS];
    int64_t correct;
    int results;
    char log[64];        /* 'h' host_call, 'u' metric_update, 'r' metric_result */
    int fail_update_at;  /* metric_update returns TL_EINVAL at this call (0-based; -1 never) */
    int result_kind;     /* which result metric_result writes (see result()) */
} metric_state;

static void log_call(metric_state *s, char c)
{
    size_t n = strlen(s->log);
    cr_assert_lt(n, sizeof s->log - 1);
    s->log[n] = c;
}

static tl_status update(const tl_host_tensor *t, int n, void *user)
{
    metric_state *s = user;
    log_call(s, 'u');
    cr_assert_eq(n, 2);
    cr_assert_str_eq(t[0].name, "logits");
    cr_assert_eq(t[0].dtype, TL_F32);
    cr_assert_eq(t[0].rank, 2);
    cr_assert_eq(t[0].shape[1], C);
    cr_assert_str_eq(t[1].name, "labels");
    cr_assert_eq(t[1].dtype, TL_I32);
    cr_assert_eq(t[1].rank, 1);
    cr_assert_eq(t[1].shape[0], t[0].shape[0]);
    int64_t rows = t[0].shape[0];
    cr_assert_leq(s->rows + rows, MAX_ROWS);
    const float *z = t[0].data;
    const int32_t *y = t[1].data;
    memcpy(s->logits + s->rows * C, z, (size_t)(rows * C) * sizeof *z);
    memcpy(s->labels + s->rows, y, (size_t)rows * sizeof *y);
    for (int64_t i = 0; i < rows; i++) {
        int best = 0;
        for (int c = 1; c < C; c++)
            if (z[i * C + c] > z[i * C + best])
                best = c;
        s->correct += best == y[i];
    }
    s->rows += rows;
    return s->updates++ == s->fail_update_at ? TL_EINVAL : TL_OK;
}

static tl_status result(tl_metric *out, int max, int *n, void *user)
{
    metric_state *s = user;
    log_call(s, 'r');
    s->results++;
    cr_assert_eq(max, TL_MAX_METRICS);
    switch (s->result_kind) {
    case 1:
        snprintf(out[0].name, sizeof out[0].name, "loss");
        *n = 1;
        return TL_OK;
    case 2:
        snprintf(out[0].name, sizeof out[0].name, "global_step");
        *n = 1;
        return TL_OK;
    case 3:
        snprintf(out[0].name, sizeof out[0].name, "a");
        snprintf(out[1].name, sizeof out[1].name, "a");
        *n = 2;
        return TL_OK;
    case 4:
        *n = max + 1;
        return TL_OK;
    case 5:
        memset(out[0].name, 'x', sizeof out[0].name);
        *n = 1;
        return TL_OK;
    case 6:
        *n = 1; /* an empty name */
        return TL_OK;
    case 7:
        return TL_ENOTFOUND;
    default:
        break;
    }
    snprintf(out[0].name, sizeof out[0].name, "my_accuracy");
    out[0].value = s->rows ? (double)s->correct / (double)s->rows : NAN;
    snprintf(out[1].name, sizeof out[1].name, "examples");
    out[1].value = (double)s->rows;
    *n = 2;
    return TL_OK;
}

static tl_status host_call(int64_t global_step, const tl_host_tensor *t, int n, void *user)
{
    (void)global_step;
    (void)t;
    (void)n;
    log_call(user, 'h');
    return TL_OK;
}

static tl_labeled_data *synthetic(int64_t n)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = n;
    s.num_features = D;
    s.num_classes = C;
    s.seed = 8;
    tl_labeled_data *d = NULL;
    cr_assert_eq(tl_synthetic_load(&s, &d), TL_OK, "%s", tl_last_error());
    return d;
}

/* An estimator trained 20 steps; eval: 2 replicas x 4 rows x eval_steps. */
static tl_estimator *trained(const char *eval_steps, em_model *m, metric_state *s, bool callbacks,
                             tl_labeled_data *d, tl_config **cfg)
{
    cr_assert_eq(tl_config_create(cfg), TL_OK);
    char es[64];
    snprintf(es, sizeof es, "--eval_steps=%s", eval_steps);
    char *argv[] = {"--devices=2", "--train_batch_size=8", "--train_steps=20", "--tf_random_seed=2",
                    "--eval_batch_size=8", es, "--predict_batch_size=6"};
    cr_assert_eq(tl_config_apply_args(*cfg, 7, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(*cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = model_fn;
    o.user = m;
    if (callbacks) {
        o.metric_update = update;
        o.metric_result = result;
        o.metric_user = s;
        o.host_call = host_call;
        o.host_call_user = s;
    }
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(*cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    memset(s->log, 0, sizeof s->log); /* training called the default host_call */
    return est;
}

static void reset(metric_state *s)
{
    memset(s, 0, sizeof *s);
    s->fail_update_at = -1;
}

/* The metric tensors are the evaluated rows in input order (replica 0's
 * slice, then replica 1's, step after step), equal to a predict pass; the
 * metric computed from them equals the built-in accuracy; the built-in
 * results do not change. */
Test(mt_eval_metrics, metric_fn_sees_every_row_in_order)
{
    tl_labeled_data *d = synthetic(N);
    em_model m = {.metrics = true};
    static metric_state s;
    reset(&s);
    tl_config *cfg;
    tl_estimator *est = trained("3", &m, &s, true, d, &cfg);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    cr_assert_eq(s.updates, 3, "once per eval step");
    cr_assert_eq(s.results, 1);
    cr_assert_str_eq(s.log, "uuur");
    cr_assert_eq(s.rows, 24);
    cr_assert_eq(memcmp(s.labels, d->labels, 24 * sizeof(int32_t)), 0, "labels in input order");
    tl_predict_result pr;
    cr_assert_eq(tl_estimator_predict(est, d, &pr), TL_OK, "%s", tl_last_error());
    for (int i = 0; i < 24 * C; i++)
        cr_assert(fabsf(s.logits[i] - pr.values[i]) <= 1e-5f * (1 + fabsf(pr.values[i])),
                  "logit %d: metric_fn %f, predict %f", i, (double)s.logits[i], (double)pr.values[i]);
    int64_t correct = 0;
    for (int i = 0; i < 24; i++) {
        int best = 0;
        for (int c = 1; c < C; c++)
            if (pr.values[i * C + c] > pr.values[i * C + best])
                best = c;
        correct += best == d->labels[i];
    }
    tl_predict_result_free(&pr);
    cr_assert_eq(er.num_metrics, 2);
    cr_assert_str_eq(er.metrics[0].name, "my_accuracy");
    cr_assert_eq(er.metrics[0].value, (double)correct / 24, "metric %f, predict pass %f", er.metrics[0].value,
                 (double)correct / 24);
    cr_assert_eq(er.metrics[0].value, er.accuracy, "the built-in accuracy sees the same logits");
    cr_assert_str_eq(er.metrics[1].name, "examples");
    cr_assert_eq(er.metrics[1].value, 24.0);
    cr_assert_eq(er.examples, 24);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);

    /* The same model without callbacks: the built-in results are the same bits. */
    tl_eval_result plain;
    est = trained("3", &m, &s, false, d, &cfg);
    cr_assert_eq(tl_estimator_evaluate(est, d, &plain), TL_OK, "%s", tl_last_error());
    cr_assert_eq(plain.num_metrics, 0);
    cr_assert_eq(plain.loss, er.loss);
    cr_assert_eq(plain.loss_replica0, er.loss_replica0);
    cr_assert_eq(plain.accuracy, er.accuracy);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(d);
}

/* §7: per step the outfeed thread runs host_call and the update ops; the
 * values are read once after the last step. */
Test(mt_eval_metrics, host_call_and_update_interleave_per_step)
{
    tl_labeled_data *d = synthetic(N);
    em_model m = {.metrics = true, .host_call = true};
    static metric_state s;
    reset(&s);
    tl_config *cfg;
    tl_estimator *est = trained("4", &m, &s, true, d, &cfg);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    cr_assert_str_eq(s.log, "huhuhuhur");
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(d);
}

static void evaluate_fails(int result_kind, int fail_update_at, tl_status want, const char *msg)
{
    tl_labeled_data *d = synthetic(N);
    em_model m = {.metrics = true};
    static metric_state s;
    reset(&s);
    s.result_kind = result_kind;
    s.fail_update_at = fail_update_at;
    tl_config *cfg;
    tl_estimator *est = trained("3", &m, &s, true, d, &cfg);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), want, "kind %d: %s", result_kind, tl_last_error());
    cr_assert(strstr(tl_last_error(), msg) != NULL, "kind %d: %s", result_kind, tl_last_error());
    cr_assert_eq(er.num_metrics, 0);
    cr_assert_eq(er.steps, 0, "no result on error");
    /* The estimator evaluates again once metric_fn behaves. */
    reset(&s);
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    cr_assert_eq(er.num_metrics, 2);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(d);
}

Test(mt_eval_metrics, T57_loss_and_global_step_are_reserved)
{
    evaluate_fails(1, -1, TL_EINVAL,
                   "Metric with name \"loss\" is not allowed, because Estimator already defines a default metric "
                   "with the same name.");
    evaluate_fails(2, -1, TL_EINVAL,
                   "Metric with name `global_step` is not allowed, because Estimator already defines a default "
                   "metric with the same name.");
}

Test(mt_eval_metrics, malformed_results_are_refused)
{
    evaluate_fails(3, -1, TL_EINVAL, "metrics 0 and 1 are both named \"a\"");
    evaluate_fails(4, -1, TL_EINVAL, "the number of metrics must be in [0, 16], got 17");
    evaluate_fails(5, -1, TL_EINVAL, "metric 0's name is not NUL-terminated within 64 bytes");
    evaluate_fails(6, -1, TL_EINVAL, "metric 0 has an empty name");
    evaluate_fails(7, -1, TL_ENOTFOUND, "metric_result: returned TL_ENOTFOUND");
}

Test(mt_eval_metrics, a_failing_update_stops_evaluation)
{
    evaluate_fails(0, 1, TL_EINVAL, "metric_update at eval step 1: returned TL_EINVAL");
}

Test(mt_eval_metrics, T63_a_scalar_metric_tensor_is_refused)
{
    tl_labeled_data *d = synthetic(N);
    em_model m = {.metrics = true, .scalar = true};
    static metric_state s;
    reset(&s);
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char *argv[] = {"--devices=2", "--train_batch_size=8", "--train_steps=1", "--eval_batch_size=8",
                    "--eval_steps=1"};
    cr_assert_eq(tl_config_apply_args(cfg, 5, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = model_fn;
    o.user = &m;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_eval_result er;
    /* Checked when traced, with or without a metric_fn to consume it. */
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "All tensors outfed from TPU should preserve batch size dimension, but got "
                                      "scalar eval_metric_2") != NULL,
              "%s", tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(d);
}

/* ---- T55 ---------------------------------------------------------------- */

/* loss = the mean of the features: the test sets every replica's loss. */
static tl_status mean_model(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    int64_t two = 2;
    tl_t b = tl_variable(g, "bias", &two, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    spec->logits = tl_bias_add(g, a->features, b);
    spec->loss = tl_mean(g, a->features);
    return tl_graph_status(g);
}

Test(mt_eval_metrics, T55_reported_loss_is_replica0s_mean_over_steps)
{
    enum { STEPS = 3, G = 4 };
    static float features[STEPS * G * 2];
    static int32_t labels[STEPS * G];
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < G; i++) /* rows 0-1: replica 0, loss s + 1; rows 2-3: replica 1, 10 (s + 1) */
            features[(s * G + i) * 2] = features[(s * G + i) * 2 + 1] = (float)((s + 1) * (i < 2 ? 1 : 10));
    tl_labeled_data d = {STEPS * G, 2, 2, 1, {2}, features, labels, NULL, 0};
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char *argv[] = {"--devices=2", "--train_batch_size=4", "--train_steps=1", "--eval_batch_size=4",
                    "--eval_steps=3", "--iterations_per_loop=2"};
    cr_assert_eq(tl_config_apply_args(cfg, 6, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mean_model;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, &d, &er), TL_OK, "%s", tl_last_error());
    cr_assert_eq(er.steps, 3, "one loop of eval_steps, whatever iterations_per_loop");
    cr_assert_eq(er.loss_replica0, 2.0, "replica 0's losses 1, 2, 3: %f", er.loss_replica0);
    cr_assert_eq(er.loss, 11.0, "and over both replicas: %f", er.loss);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
}

/* ---- no allocation per eval step ---------------------------------------- */


/* Allocations of the second evaluate() of a warm estimator. */
static long allocations_of_second_evaluate(const char *steps, tl_labeled_data *d)
{
    em_model m = {.metrics = true};
    static metric_state s;
    reset(&s);
    tl_config *cfg;
    tl_estimator *est = trained(steps, &m, &s, true, d, &cfg);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    reset(&s);
    long before = mtck_allocations();
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    long n = mtck_allocations() - before;
    cr_assert_eq(s.updates, (int)strtol(steps, NULL, 10));
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    return n;
}

Test(mt_eval_metrics, evaluation_allocates_nothing_per_step)
{
    mtck_count_allocations(true);
    tl_labeled_data *d = synthetic(N);
    long two = allocations_of_second_evaluate("2", d);
    long twelve = allocations_of_second_evaluate("12", d);
    tl_labeled_data_destroy(d);
    mtck_count_allocations(false);
    cr_assert_eq(twelve, two, "2 eval steps allocate %ld times, 12 steps %ld times", two, twelve);
}

/* Prediction (spec tpu_estimator.md §8): batches through the infeed, a padded
 * last batch whose rows are dropped, the stop batch run as one more device
 * step (T58, T59), one prediction per example in input order, the same values
 * whatever the batch size, and argmax agreeing with evaluation. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tpuloop/tpuloop.h"

static tl_status tiny(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    tl_t logits = tl_dense(g, tl_dense(g, a->features, 8, TL_ACT_TANH, "dense"), 3, TL_ACT_NONE, "dense_1");
    spec->logits = logits;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    return tl_graph_status(g);
}

static tl_labeled_data *data_of(int64_t n)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = n;
    s.num_features = 5;
    s.num_classes = 3;
    s.seed = 4;
    tl_labeled_data *d = NULL;
    cr_assert_eq(tl_synthetic_load(&s, &d), TL_OK, "%s", tl_last_error());
    return d;
}

/* Trains 20 steps, then predicts data with the given predict_batch_size. */
static tl_predict_result run(const char *predict_batch, tl_labeled_data *data, double *eval_accuracy)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char pb[64];
    snprintf(pb, sizeof pb, "--predict_batch_size=%s", predict_batch);
    char *argv[] = {"--devices=2", "--train_batch_size=8", "--train_steps=20", "--tf_random_seed=1", pb,
                    "--eval_batch_size=8", "--eval_steps=1"};
    cr_assert_eq(tl_config_apply_args(cfg, 7, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = tiny;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_labeled_data *train = data_of(64);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, train, &tr), TL_OK, "%s", tl_last_error());
    tl_predict_result pr;
    cr_assert_eq(tl_estimator_predict(est, data, &pr), TL_OK, "%s", tl_last_error());
    if (eval_accuracy != NULL) {
        tl_eval_result er;
        cr_assert_eq(tl_estimator_evaluate(est, data, &er), TL_OK, "%s", tl_last_error());
        *eval_accuracy = er.accuracy;
    }
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(train);
    tl_config_destroy(cfg);
    return pr;
}

Test(mt_predict, T58_padded_last_batch)
{
    tl_labeled_data *d = data_of(10);
    tl_predict_result pr = run("4", d, NULL);
    cr_assert_eq(pr.num_examples, 10, "one prediction per real example");
    cr_assert_eq(pr.device_steps, 4, "batches [4], [4], [2 real + 2 padded], [stop batch]");
    cr_assert_eq(pr.padded_rows, 2);
    cr_assert_eq(pr.width, 3);
    tl_predict_result_free(&pr);
    tl_labeled_data_destroy(d);
}

Test(mt_predict, T59_divisible_dataset)
{
    tl_labeled_data *d = data_of(8);
    tl_predict_result pr = run("4", d, NULL);
    cr_assert_eq(pr.num_examples, 8);
    cr_assert_eq(pr.device_steps, 3, "2 full batches + the stop batch");
    cr_assert_eq(pr.padded_rows, 0);
    tl_predict_result_free(&pr);
    tl_labeled_data_destroy(d);
}

Test(mt_predict, values_do_not_depend_on_the_batch_and_agree_with_evaluation)
{
    tl_labeled_data *d = data_of(8);
    double acc;
    tl_predict_result a = run("4", d, NULL), b = run("8", d, &acc);
    cr_assert_eq(a.num_examples, b.num_examples);
    int correct = 0;
    for (int64_t i = 0; i < a.num_examples * a.width; i++)
        cr_assert(fabsf(a.values[i] - b.values[i]) <= 1e-6f * (1 + fabsf(b.values[i])), "value %lld", (long long)i);
    for (int64_t i = 0; i < b.num_examples; i++) {
        int best = 0;
        for (int c = 1; c < 3; c++)
            if (b.values[i * 3 + c] > b.values[i * 3 + best])
                best = c;
        correct += best == d->labels[i];
    }
    cr_assert(fabs(acc - correct / 8.0) < 1e-12, "eval accuracy %f vs predictions %f", acc, correct / 8.0);
    tl_predict_result_free(&a);
    tl_predict_result_free(&b);
    tl_labeled_data_destroy(d);
}

/* ---- predictions checked row by row ---------------------------------------- */

/* predictions = features + a zero bias: before any training they are the
 * features themselves, so the test knows every row. */
static tl_status identity(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    int64_t d = 3;
    tl_t b = tl_variable(g, "bias", &d, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    tl_t z = tl_bias_add(g, a->features, b);
    spec->logits = z;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_softmax_xent(g, z, a->labels));
    return tl_graph_status(g);
}

static tl_estimator *untrained(const char *devices, const char *predict_batch, int depth, tl_config **cfg)
{
    cr_assert_eq(tl_config_create(cfg), TL_OK);
    char dv[64], pb[64];
    snprintf(dv, sizeof dv, "--devices=%s", devices);
    snprintf(pb, sizeof pb, "--predict_batch_size=%s", predict_batch);
    char *argv[] = {dv, "--train_batch_size=8", "--train_steps=1", pb};
    cr_assert_eq(tl_config_apply_args(*cfg, 4, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(*cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = identity;
    o.infeed_depth = depth;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(*cfg, &o, &est), TL_OK, "%s", tl_last_error());
    return est;
}

/* Every real row comes back, in input order, for batches that leave a replica
 * partly padded, a replica wholly padded, or no padding at all. */
Test(mt_predict, every_row_in_input_order_whatever_the_padding)
{
    enum { N = 11 };
    static float features[N * 3];
    static int32_t labels[N];
    for (int i = 0; i < N * 3; i++)
        features[i] = (float)i * 0.25f - 3.0f;
    tl_labeled_data d = {N, 3, 3, 1, {3}, features, labels, NULL, 0};
    static const struct {
        const char *devices, *batch;
        int depth;
        int64_t steps, padded;
    } cases[] = {
        {"2", "4", 0, 3 + 1, 1},   /* last batch: replica 0 has 2 real rows, replica 1 1 real + 1 padded */
        {"2", "8", 0, 2 + 1, 5},   /* last batch: replica 0 3 real + 1 padded, replica 1 all padded */
        {"4", "4", 1, 3 + 1, 1},    /* one row per replica, infeed depth 1 */
        {"1", "11", 0, 1 + 1, 0},  /* no padding: one batch and the stop batch */
        {"4", "16", 8, 1 + 1, 5},   /* one batch holds all, replicas 3 wholly padded */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tl_config *cfg;
        tl_estimator *est = untrained(cases[c].devices, cases[c].batch, cases[c].depth, &cfg);
        tl_predict_result pr;
        cr_assert_eq(tl_estimator_predict(est, &d, &pr), TL_OK, "case %zu: %s", c, tl_last_error());
        cr_assert_eq(pr.num_examples, N);
        cr_assert_eq(pr.width, 3);
        cr_assert_eq(pr.device_steps, cases[c].steps, "case %zu: %lld device steps", c, (long long)pr.device_steps);
        cr_assert_eq(pr.padded_rows, cases[c].padded, "case %zu", c);
        cr_assert_eq(pr.global_step, 0);
        for (int i = 0; i < N * 3; i++)
            cr_assert_eq(pr.values[i], features[i], "case %zu: value %d is %f, the features say %f", c, i,
                         (double)pr.values[i], (double)features[i]);
        tl_predict_result_free(&pr);
        /* A second predict on the same estimator starts again from batch 0. */
        cr_assert_eq(tl_estimator_predict(est, &d, &pr), TL_OK, "%s", tl_last_error());
        cr_assert_eq(pr.device_steps, cases[c].steps);
        cr_assert_eq(memcmp(pr.values, features, sizeof features), 0, "case %zu: second predict", c);
        tl_predict_result_free(&pr);
        tl_estimator_destroy(est);
        tl_config_destroy(cfg);
    }
}

Test(mt_predict, no_examples_give_an_empty_result_and_no_steps)
{
    static float features[3];
    static int32_t labels[1];
    tl_labeled_data d = {0, 3, 3, 1, {3}, features, labels, NULL, 0};
    tl_config *cfg;
    tl_estimator *est = untrained("2", "4", 0, &cfg);
    tl_predict_result pr;
    cr_assert_eq(tl_estimator_predict(est, &d, &pr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(pr.num_examples, 0);
    cr_assert_eq(pr.device_steps, 0);
    cr_assert_eq(pr.padded_rows, 0);
    cr_assert_not_null(pr.values);
    tl_predict_result_free(&pr);
    cr_assert_null(pr.values);
    /* The estimator still predicts afterwards. */
    tl_labeled_data one = {1, 3, 3, 1, {3}, features, labels, NULL, 0};
    features[1] = 7.5f;
    cr_assert_eq(tl_estimator_predict(est, &one, &pr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(pr.device_steps, 2, "one padded batch and the stop batch");
    cr_assert_eq(pr.padded_rows, 3);
    cr_assert_eq(pr.values[1], 7.5f);
    tl_predict_result_free(&pr);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
}

/* Labels are not read in PREDICT: prediction data may have none. */
Test(mt_predict, data_without_labels)
{
    static float features[5 * 3];
    for (int i = 0; i < 15; i++)
        features[i] = (float)(i % 7);
    tl_labeled_data d = {5, 3, 3, 1, {3}, features, NULL, NULL, 0};
    tl_config *cfg;
    tl_estimator *est = untrained("2", "4", 0, &cfg);
    tl_predict_result pr;
    cr_assert_eq(tl_estimator_predict(est, &d, &pr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(pr.device_steps, 3);
    cr_assert_eq(memcmp(pr.values, features, sizeof features), 0);
    tl_predict_result_free(&pr);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
}

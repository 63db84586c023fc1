/* Prediction (spec tpu_estimator.md §8): a padded last batch whose rows are
 * dropped, one prediction per example in input order (T58, T59), the same
 * values whatever the batch size, and argmax agreeing with evaluation. */
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
    cr_assert_eq(pr.device_steps, 3, "batches [4], [4], [2 real + 2 padded]");
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
    cr_assert_eq(pr.device_steps, 2);
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

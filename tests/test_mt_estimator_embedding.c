/* The estimator with an embedding engine (tl_estimator_options.embedding):
 * the tables' update is the gradient of the replicas' mean loss, summed
 * over the replicas' examples (TPUEstimator's CrossShardOptimizer MEAN and
 * TPUEmbedding's summed gradients); the ids travel typed, as int64 beside
 * the features (tl_labeled_data.ids) or in the input_fn's tensors named by
 * the embedding features (tl_input.embedding_keys), never among the model's
 * features; the same bits whatever iterations_per_loop and across a stop
 * and a resume through a checkpoint that holds the tables and slots;
 * evaluation in inference mode at its own batch, with the AUC of a
 * one-logit model; and the errors of a configuration or an input the
 * estimator cannot run. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/dataset.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Examples: 2 dense values as the features, and as ids feature 0's (table
 * "a", vocab 50) and feature 1's (table "b", vocab 30); the label depends
 * on both ids. */
#define NDENSE 2
#define VA 50
#define VB 30

/* n examples of nd dense features and nid ids each, zeroed. */
static tl_labeled_data *alloc_data(int64_t n, int64_t nd, int64_t nid)
{
    tl_labeled_data *d = calloc(1, sizeof *d);
    d->num_examples = n;
    d->num_features = nd;
    d->num_classes = 2;
    d->feature_rank = 1;
    d->feature_shape[0] = nd;
    d->features = calloc((size_t)(n * nd) + 1, sizeof(float));
    d->labels = calloc((size_t)n + 1, sizeof(int32_t));
    d->num_ids = nid;
    d->ids = calloc((size_t)(n * nid) + 1, sizeof(int64_t));
    return d;
}

static tl_labeled_data *emb_data(int64_t n)
{
    tl_labeled_data *d = alloc_data(n, NDENSE, 2);
    uint64_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        float *row = d->features + i * NDENSE;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t a = (int64_t)((s >> 33) % VA), b = (int64_t)((s >> 13) % VB);
        row[0] = (float)((s >> 40) & 255) / 255.0f;
        row[1] = (float)((s >> 20) & 255) / 255.0f;
        d->ids[i * 2] = a;
        d->ids[i * 2 + 1] = b;
        d->labels[i] = (a % 3 == 0) != (b % 2 == 0);
    }
    return d;
}

static void free_data(tl_labeled_data *d)
{
    free(d->features);
    free(d->labels);
    free(d->ids);
    free(d);
}

/* Two tables of dim 4 (Adagrad 0.1 by default), two features. */
static tl_emb_engine *emb_engine(int cores, int batch, tl_emb_algorithm algo)
{
    tl_emb_table_config t[2] = {
        {.name = "a", .vocabulary_size = VA, .dim = 4, .combiner = TL_EMB_COMBINER_SUM},
        {.name = "b", .vocabulary_size = VB, .dim = 4, .combiner = TL_EMB_COMBINER_SUM},
    };
    tl_emb_feature_config f[2] = {{.name = "fa", .table = 0}, {.name = "fb", .table = 1}};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = t;
    c.num_tables = 2;
    c.features = f;
    c.num_features = 2;
    c.num_tensor_cores = cores;
    c.batch_size_per_tensor_core = batch;
    c.num_shards = 2;
    c.seed = 3;
    tl_emb_optimizer_default(algo, &c.optimizer);
    c.optimizer.learning_rate = 0.1f;
    return mtck_emb_engine(&c);
}

/* Table "a" of the steps by hand: 10 rows of dim 1 from zeros, so that the
 * rows after a step are its update alone. */
static const tl_emb_table_config tiny_table = {.name = "a", .vocabulary_size = 10, .dim = 1,
                                               .initializer = {.kind = TL_EMB_INIT_ZEROS},
                                               .combiner = TL_EMB_COMBINER_SUM};

/* tiny_table read by feature *f alone, batch examples a core. */
static tl_emb_config tiny_config(const tl_emb_feature_config *f, int batch)
{
    tl_emb_config c;
    mtck_emb_config1(&c, &tiny_table, f);
    c.batch_size_per_tensor_core = batch;
    return c;
}

/* n examples (n <= 8) of one feature, a zero the models do not read, with
 * their labels and nid ids each (borrowed). */
static tl_labeled_data tiny_data(int64_t n, const int64_t *ids, int64_t nid, const int32_t *labels)
{
    static float zeros[8];
    cr_assert_leq(n, 8);
    return (tl_labeled_data){.num_examples = n, .num_features = 1, .num_classes = 2, .feature_rank = 1,
                             .feature_shape = {1}, .features = zeros, .labels = (int32_t *)labels,
                             .ids = (int64_t *)ids, .num_ids = nid};
}

/* The features are the dense inputs and nothing else: NDENSE columns, or
 * *user when given. */
static tl_status check_width(tl_graph *g, const tl_model_args *a, const void *user)
{
    int64_t dims[TL_MAX_RANK], want = user != NULL ? *(const int64_t *)user : NDENSE;
    if (tl_rank(g, a->features, dims) != 2 || dims[1] != want) {
        char msg[96];
        snprintf(msg, sizeof msg, "the features have %lld columns; the model wants its %lld dense values",
                 (long long)dims[1], (long long)want);
        return tl_graph_fail(g, TL_EINVAL, msg);
    }
    return TL_OK;
}

/* z is the one logit; a sigmoid loss but in PREDICT. */
static tl_status one_logit(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, tl_t z)
{
    spec->logits = spec->predictions = z;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_sigmoid_xent(g, z, a->labels));
    return tl_graph_status(g);
}

/* dense(x) + <fa, fb> summed over the dim: one logit, sigmoid loss. */
static tl_status emb_model(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    if (check_width(g, a, user) != TL_OK)
        return tl_graph_status(g);
    int64_t B = a->batch_size, s2[2] = {B, 4};
    tl_t ea = tl_embedding_activations(g, 0, s2, 2);
    tl_t eb = tl_embedding_activations(g, 1, s2, 2);
    tl_t parts[3] = {a->features, ea, eb};
    tl_t h = tl_dense(g, tl_concat(g, parts, 3, 1), 8, TL_ACT_RELU, "dense");
    return one_logit(g, a, spec, tl_dense(g, h, 1, TL_ACT_NONE, "logits"));
}

/* emb_model over one dense value. */
static tl_status emb_model1(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    static const int64_t one = 1;
    (void)user;
    return emb_model(g, a, spec, (void *)&one);
}

/* The models below read feature 0's activations alone: their one feature
 * column is not read, but must be the only one. */
static const int64_t one_column = 1;

/* Only feature 0's activation (B, 1) is the logit: no dense variables. */
static tl_status logit_model(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    if (check_width(g, a, user != NULL ? user : &one_column) != TL_OK)
        return tl_graph_status(g);
    int64_t s[2] = {a->batch_size, 1};
    return one_logit(g, a, spec, tl_embedding_activations(g, 0, s, 2));
}

/* Feature 0 has n activations per example, [B, n, 1]; the logit is the
 * first, so only the ids in the first place move. */
static tl_status first_of_n_model(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user, int64_t n)
{
    if (check_width(g, a, user != NULL ? user : &one_column) != TL_OK)
        return tl_graph_status(g);
    int64_t s3[3] = {a->batch_size, n, 1}, s2[2] = {a->batch_size, n};
    tl_t e = tl_embedding_activations(g, 0, s3, 3);
    return one_logit(g, a, spec, tl_slice(g, tl_reshape(g, e, s2, 2), 1, 0, 1));
}

/* Options of fn over eng, the others the defaults. */
static tl_estimator_options emb_options(tl_emb_engine *eng, tl_model_fn fn)
{
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = fn;
    o.embedding = eng;
    return o;
}

static tl_estimator *make_est(int argc, const char *const *argv, tl_emb_engine *eng, tl_model_fn fn,
                              tl_config **cfg)
{
    tl_estimator_options o = emb_options(eng, fn);
    o.optimizer.lr.learning_rate = 0.01;
    return mtck_estimator(argc, argv, &o, cfg);
}

/* The estimator, its configuration and its engine. */
static void destroy_all(tl_estimator *est, tl_config *cfg, tl_emb_engine *eng)
{
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_emb_engine_destroy(eng);
}

/* Trains fn over eng on d with the flags (expects TL_OK), then destroys the
 * estimator: the engine keeps the tables. */
static void train_once(int argc, const char *const *argv, tl_emb_engine *eng, tl_model_fn fn,
                       const tl_labeled_data *d)
{
    tl_config *cfg;
    tl_estimator *est = make_est(argc, argv, eng, fn, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    destroy_all(est, cfg, NULL);
}

static float table_value(tl_emb_engine *eng, int table, int64_t V, int dim, int nslots, int64_t id)
{
    float *buf = calloc((size_t)(V * dim * (1 + nslots)), sizeof *buf);
    float *state[4];
    for (int k = 0; k <= nslots; k++)
        state[k] = buf + k * V * dim;
    cr_assert_eq(tl_emb_retrieve(eng, table, NULL, 1, 0, state, 1 + nslots, V), TL_OK, "%s", tl_last_error());
    float v = buf[id * dim];
    free(buf);
    return v;
}

/* Row id of tiny_table. */
static float tiny_row(tl_emb_engine *eng, int64_t id)
{
    return table_value(eng, 0, 10, 1, 0, id);
}

/* The examples of the steps by hand. */
static const int64_t by_hand_ids[8] = {3, 3, 5, 7, 3, 9, 5, 1};
static const int32_t by_hand_labels[8] = {1, 1, 0, 1, 0, 1, 0, 0};

/* After one step of logit_model over tiny_table, SGD at lr 0.5, on the
 * first n examples by hand in one batch: dL/dz_i = (σ(0) - y_i) / n under
 * MEAN, and row r moved by -lr Σ over the examples with id r. what names
 * the case in the messages. */
static void expect_the_step_by_hand(tl_emb_engine *eng, int n, const char *what)
{
    double want[10] = {0};
    for (int i = 0; i < n; i++)
        want[by_hand_ids[i]] -= 0.5 * (0.5 - by_hand_labels[i]) / (double)n;
    for (int r = 0; r < 10; r++) {
        float got = tiny_row(eng, r);
        cr_assert(fabs(got - want[r]) < 1e-7, "%s row %d: %.9g, want %.9g", what, r, (double)got, want[r]);
    }
}

/* One step by hand: the logit is the row, and every replica's examples are
 * summed (B R of them in the mean). */
static void one_step_by_hand(int R)
{
    tl_emb_feature_config f = {.name = "fa", .table = 0};
    tl_emb_config c = tiny_config(&f, 4);
    c.num_tensor_cores = R;
    c.optimizer.learning_rate = 0.5f; /* SGD */
    tl_emb_engine *eng = mtck_emb_engine(&c);
    /* One global batch is the whole data: the epoch's permutation only
     * reorders the sum. */
    tl_labeled_data d = tiny_data(4 * R, by_hand_ids, 1, by_hand_labels);
    char dev[32], gb[40], what[16];
    snprintf(dev, sizeof dev, "--devices=%d", R);
    snprintf(gb, sizeof gb, "--train_batch_size=%d", 4 * R);
    const char *argv[] = {dev, gb, "--train_steps=1", "--iterations_per_loop=1"};
    train_once(ARGC(argv), argv, eng, logit_model, &d);
    snprintf(what, sizeof what, "R=%d", R);
    expect_the_step_by_hand(eng, 4 * R, what);
    tl_emb_engine_destroy(eng);
}

Test(mt_estimator_embedding, the_tables_update_is_the_mean_losss_summed_gradient)
{
    one_step_by_hand(1);
    one_step_by_hand(2);
}

/* The determinism tests' run: a fresh engine's emb_model trained to
 * max_steps with the flags on d, or (d NULL) from the input_fn in; the
 * digest after. */
static void run(const char *const *argv, int argc, const tl_labeled_data *d, const tl_input *in, char digest[65],
                int64_t *gs)
{
    tl_emb_engine *eng = emb_engine(2, 16, TL_EMB_ADAGRAD);
    tl_config *cfg;
    tl_estimator *est = make_est(argc, argv, eng, emb_model, &cfg);
    tl_train_result tr;
    tl_status st = d != NULL ? tl_estimator_train(est, d, &tr) : tl_estimator_train_input(est, in, &tr);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    *gs = tr.global_step;
    destroy_all(est, cfg, eng);
}

/* run's bits are the same for iterations_per_loop 1 and 5, and for a run
 * stopped at 11 and resumed to 24 through model_dir flag md. */
static void expect_same_bits(const tl_labeled_data *d, const tl_input *in, const char *md)
{
    char a[65], b[65], c[65], e[65];
    int64_t gs;
    const char *one[] = {"--devices=2", "--train_batch_size=32", "--max_steps=24", "--iterations_per_loop=1",
                         "--tf_random_seed=5"};
    run(one, ARGC(one), d, in, a, &gs);
    const char *five[] = {"--devices=2", "--train_batch_size=32", "--max_steps=24", "--iterations_per_loop=5",
                          "--tf_random_seed=5"};
    run(five, ARGC(five), d, in, b, &gs);
    cr_assert_str_eq(a, b, "iterations_per_loop 1 and 5 differ");
    const char *first[] = {"--devices=2", "--train_batch_size=32", "--max_steps=11", "--iterations_per_loop=3",
                           "--tf_random_seed=5", md};
    run(first, ARGC(first), d, in, c, &gs);
    cr_assert_eq(gs, 11);
    cr_assert_str_neq(c, a, "11 steps are not 24");
    /* A new engine (fresh tables): only the checkpoint can give it step 11's. */
    const char *second[] = {"--devices=2", "--train_batch_size=32", "--max_steps=24", "--iterations_per_loop=7",
                            "--tf_random_seed=5", md};
    run(second, ARGC(second), d, in, e, &gs);
    cr_assert_eq(gs, 24);
    cr_assert_str_eq(e, a, "stopped at 11 and resumed: other bits than the uninterrupted run");
}

Test(mt_estimator_embedding, same_bits_for_any_iterations_per_loop_and_across_a_resume)
{
    tl_labeled_data *d = emb_data(320);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    expect_same_bits(d, NULL, md);
    mtck_drop_dir(dir);
    free_data(d);
}

Test(mt_estimator_embedding, training_learns_and_evaluation_gives_auc_at_its_own_batch)
{
    tl_labeled_data *d = emb_data(4096);
    tl_emb_engine *eng = emb_engine(2, 32, TL_EMB_ADAGRAD);
    const char *argv[] = {"--devices=2", "--train_batch_size=64", "--eval_batch_size=48", "--eval_steps=20",
                          "--predict_batch_size=20", "--train_steps=400", "--iterations_per_loop=50",
                          "--tf_random_seed=1"};
    tl_config *cfg;
    tl_estimator *est = make_est(ARGC(argv), argv, eng, emb_model, &cfg);
    tl_eval_result before, after;
    cr_assert_eq(tl_estimator_evaluate(est, d, &before), TL_OK, "%s", tl_last_error());
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_evaluate(est, d, &after), TL_OK, "%s", tl_last_error());
    cr_assert(after.has_auc, "a one-logit model has an AUC");
    cr_assert_eq(after.examples, 20 * 48);
    /* The label is a function of the two ids: the embeddings learn it. */
    cr_assert(after.auc > 0.9, "auc %.4f after training (before %.4f)", after.auc, before.auc);
    cr_assert(after.loss < before.loss * 0.75, "loss %.4f -> %.4f", before.loss, after.loss);
    cr_assert(after.accuracy > 0.8, "accuracy %.4f", after.accuracy);
    tl_emb_stats st;
    tl_emb_get_stats(eng, &st);
    cr_assert_eq(st.steps_applied, 400, "evaluation applies nothing: %lld", (long long)st.steps_applied);
    tl_predict_result pr;
    tl_labeled_data few = *d;
    few.num_examples = 50;
    cr_assert_eq(tl_estimator_predict(est, &few, &pr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(pr.num_examples, 50);
    cr_assert_eq(pr.width, 1);
    tl_predict_result_free(&pr);
    destroy_all(est, cfg, eng);
    free_data(d);
}

static tl_status create_with(tl_emb_engine *eng, tl_model_fn fn, const char *devices)
{
    const char *argv[] = {devices, "--train_batch_size=32", "--train_steps=2"};
    tl_config *cfg = mtck_config(ARGC(argv), argv);
    tl_estimator_options o = emb_options(eng, fn);
    tl_estimator *est = NULL;
    tl_status st = tl_estimator_create(cfg, &o, &est);
    if (st == TL_OK) {
        tl_labeled_data *d = emb_data(64);
        tl_train_result tr;
        st = tl_estimator_train(est, d, &tr);
        free_data(d);
    }
    destroy_all(est, cfg, NULL);
    return st;
}

static bool has(const char *needle)
{
    return strstr(tl_last_error(), needle) != NULL;
}

Test(mt_estimator_embedding, configurations_it_cannot_run_are_named_errors)
{
    tl_emb_engine *eng = emb_engine(2, 16, TL_EMB_SGD);
    cr_assert_eq(create_with(eng, emb_model, "--devices=1"), TL_EINVAL);
    cr_assert(has("num_tensor_cores 2; the estimator runs 1 replicas"), "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
    /* The model asks for activations the estimator cannot give. */
    cr_assert_eq(create_with(NULL, emb_model, "--devices=1"), TL_EINVAL);
    cr_assert(has("no embedding engine"), "%s", tl_last_error());
    /* Vocabularies beyond float32's exact integers are no limit: ids are
     * int64 all the way (the rows above 2^24 training: test_estimator_vocab.c). */
    tl_emb_table_config t = {.name = "huge", .vocabulary_size = (1 << 24) + 1, .dim = 1};
    tl_emb_feature_config f = {.name = "f", .table = 0};
    tl_emb_config c;
    mtck_emb_config1(&c, &t, &f);
    c.num_shards = 64;
    eng = mtck_emb_engine(&c);
    {
        const char *argv[] = {"--devices=1", "--train_batch_size=32", "--train_steps=2"};
        tl_estimator_options o = emb_options(eng, logit_model);
        tl_config *cfg;
        tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
        destroy_all(est, cfg, NULL);
    }
    tl_emb_engine_destroy(eng);
    /* Pipelining's staleness would not survive a checkpoint. */
    t.vocabulary_size = 100;
    c.num_shards = 1;
    c.pipeline_execution_with_tensor_core = true;
    eng = mtck_emb_engine(&c);
    cr_assert_eq(create_with(eng, logit_model, "--devices=1"), TL_EINVAL);
    cr_assert(has("pipeline_execution_with_tensor_core is not supported"), "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
    /* The estimator picks each step's mode itself. */
    c.mode = TL_EMB_MODE_INFERENCE;
    eng = mtck_emb_engine(&c);
    cr_assert_eq(create_with(eng, logit_model, "--devices=1"), TL_EINVAL);
    cr_assert(has("the embedding engine's mode is INFERENCE; the estimator needs TRAINING"), "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
    c.mode = TL_EMB_MODE_TRAINING;
    /* A dynamic learning rate needs its callback. */
    c.pipeline_execution_with_tensor_core = false;
    c.optimizer.lr_tag = 0;
    eng = mtck_emb_engine(&c);
    cr_assert_eq(create_with(eng, logit_model, "--devices=1"), TL_EINVAL);
    cr_assert(has("embedding_learning_rates"), "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
}

static tl_status dynamic_lr(int64_t step, float *v, int n, void *user)
{
    (void)user;
    for (int i = 0; i < n; i++)
        v[i] = 0.5f / (float)(1 + step); /* a schedule of the global step */
    return TL_OK;
}

Test(mt_estimator_embedding, dynamic_learning_rates_come_from_the_callback)
{
    tl_emb_feature_config f = {.name = "fa", .table = 0};
    tl_emb_config c = tiny_config(&f, 2);
    c.optimizer.lr_tag = 0;
    tl_emb_engine *eng = mtck_emb_engine(&c);
    static const int64_t ids[4] = {2, 2, 2, 2};
    static const int32_t labels[4] = {1, 1, 1, 1};
    tl_labeled_data d = tiny_data(4, ids, 1, labels);
    const char *argv[] = {"--devices=1", "--train_batch_size=2", "--train_steps=1"};
    tl_estimator_options o = emb_options(eng, logit_model);
    o.embedding_learning_rates = dynamic_lr;
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, &d, &tr), TL_OK, "%s", tl_last_error());
    /* step 0: lr 0.5; two examples of id 2, each dL/dz = (0.5 - 1) / 2 */
    float got = tiny_row(eng, 2);
    cr_assert(fabsf(got - 0.25f) < 1e-7f, "row 2 = %.9g, want 0.25", (double)got);
    destroy_all(est, cfg, eng);
}

/* An id outside the table is the engine's bounds check, the one check: it
 * names the feature, the id and the vocabulary, and the estimator adds the
 * step and the row of the batch. */
Test(mt_estimator_embedding, bad_ids_in_the_batch_name_the_feature_step_and_row)
{
    tl_labeled_data *d = emb_data(64);
    d->ids[37 * 2] = 77; /* feature fa of example 37: eval step 1, row 5 (vocab 50) */
    tl_emb_engine *eng = emb_engine(1, 32, TL_EMB_SGD);
    const char *argv[] = {"--devices=1", "--train_batch_size=32", "--train_steps=2", "--eval_batch_size=32",
                          "--eval_steps=2"};
    tl_config *cfg;
    tl_estimator *est = make_est(ARGC(argv), argv, eng, emb_model, &cfg);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_EINVAL);
    cr_assert(has("step 1, row 5 of the batch: "), "%s", tl_last_error());
    cr_assert(has("feature \"fa\""), "%s", tl_last_error());
    cr_assert(has("id 77"), "%s", tl_last_error());
    cr_assert(has("vocabulary size is 50"), "%s", tl_last_error());
    destroy_all(est, cfg, eng);
    /* Training: the step and row depend on the shuffle; the id is named. */
    d->ids[37 * 2] = -3;
    eng = emb_engine(1, 32, TL_EMB_SGD);
    est = make_est(ARGC(argv), argv, eng, emb_model, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_EINVAL);
    cr_assert(has("id -3"), "%s", tl_last_error());
    cr_assert(has("row "), "%s", tl_last_error());
    destroy_all(est, cfg, eng);
    free_data(d);
}

/* In-memory data must carry the engine's ids: W per example, typed. */
Test(mt_estimator_embedding, data_without_the_ids_is_a_named_error)
{
    tl_labeled_data *d = emb_data(64);
    tl_emb_engine *eng = emb_engine(1, 32, TL_EMB_SGD);
    const char *argv[] = {"--devices=1", "--train_batch_size=32", "--train_steps=2"};
    tl_config *cfg;
    tl_estimator *est = make_est(ARGC(argv), argv, eng, emb_model, &cfg);
    tl_train_result tr;
    d->num_ids = 1;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_EINVAL);
    cr_assert(has("the data has 1 embedding ids per example (tl_labeled_data.num_ids); the embedding engine's 2 "
                  "features take 2, feature after feature (\"fa\" 1, \"fb\" 1)"), "%s", tl_last_error());
    d->num_ids = 2;
    int64_t *ids = d->ids;
    d->ids = NULL;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_EINVAL);
    cr_assert(has("num_ids, ids NULL"), "%s", tl_last_error());
    d->ids = ids;
    /* Ids alone: no feature is left for the model. */
    d->num_features = d->feature_shape[0] = 0;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_EINVAL);
    cr_assert(has("the data has 0 feature values per example; the model's features need at least one"), "%s",
              tl_last_error());
    d->num_features = d->feature_shape[0] = NDENSE;
    /* The estimator is not broken by the data's error. */
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    destroy_all(est, cfg, eng);
    free_data(d);
}

Test(mt_estimator_embedding, a_checkpoint_without_the_tables_is_refused)
{
    tl_labeled_data *d = emb_data(64);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--devices=1", "--train_batch_size=32", "--max_steps=2", md};
    tl_emb_engine *eng = emb_engine(1, 32, TL_EMB_ADAGRAD);
    train_once(ARGC(argv), argv, eng, emb_model, d);
    tl_emb_engine_destroy(eng);
    /* The same tables under another optimizer: SGD has no accumulator, but
     * Adam's slots are missing from the checkpoint. */
    eng = emb_engine(1, 32, TL_EMB_ADAM);
    const char *more[] = {"--devices=1", "--train_batch_size=32", "--max_steps=4", md};
    tl_config *cfg;
    tl_estimator *est = make_est(ARGC(more), more, eng, emb_model, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_EINVAL);
    cr_assert(has("embedding tensor 'embedding/a/momenta' is missing"), "%s", tl_last_error());
    destroy_all(est, cfg, eng);
    mtck_drop_dir(dir);
    free_data(d);
}

/* The engine of tiny_table read by feature *f, SGD at lr 1, after one
 * step of model on two examples of nid ids each. */
static tl_emb_engine *one_step_of_two(const tl_emb_feature_config *f, const int64_t *ids, int64_t nid,
                                      const int32_t *labels, tl_model_fn model)
{
    tl_emb_config c = tiny_config(f, 2);
    c.optimizer.learning_rate = 1.0f;
    tl_emb_engine *eng = mtck_emb_engine(&c);
    tl_labeled_data d = tiny_data(2, ids, nid, labels);
    const char *argv[] = {"--devices=1", "--train_batch_size=2", "--train_steps=1"};
    train_once(ARGC(argv), argv, eng, model, &d);
    return eng;
}

/* A feature with output_shape {2}: two ids per example, activations
 * [B, 2, 1]; the logit reads bag 0 only, so only bag 0's ids move. */
static tl_status pair_model(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    return first_of_n_model(g, a, spec, user, 2);
}

Test(mt_estimator_embedding, output_shape_features_take_an_id_per_bag)
{
    tl_emb_feature_config f = {.name = "pair", .table = 0, .num_output_dims = 1, .output_shape = {2}};
    static const int64_t ids[4] = {1, 7, 2, 8}; /* (bag 0, bag 1) per example */
    static const int32_t labels[2] = {1, 0};
    tl_emb_engine *eng = one_step_of_two(&f, ids, 2, labels, pair_model);
    cr_assert(fabsf(tiny_row(eng, 1) - 0.25f) < 1e-7f, "id 1: -(0.5 - 1) / 2");
    cr_assert(fabsf(tiny_row(eng, 2) + 0.25f) < 1e-7f, "id 2: -(0.5 - 0) / 2");
    cr_assert_eq(tiny_row(eng, 7), 0.0f, "bag 1 does not reach the loss");
    cr_assert_eq(tiny_row(eng, 8), 0.0f, "bag 1 does not reach the loss");
    tl_emb_engine_destroy(eng);
}

/* A sequence feature (max_sequence_length 3): three ids per example, -1
 * where a position is absent; activations [B, 3, 1], the logit reads
 * position 0 only, so only position 0's ids move and an absent one is no
 * id at all. */
static tl_status seq_model(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    return first_of_n_model(g, a, spec, user, 3);
}

Test(mt_estimator_embedding, sequence_features_skip_absent_positions)
{
    tl_emb_feature_config f = {.name = "seq", .table = 0, .max_sequence_length = 3};
    static const int64_t ids[6] = {4, -1, 6, 3, 5, -1}; /* positions 0, 1, 2 per example */
    static const int32_t labels[2] = {1, 0};
    tl_emb_engine *eng = one_step_of_two(&f, ids, 3, labels, seq_model);
    cr_assert(fabsf(tiny_row(eng, 4) - 0.25f) < 1e-7f, "id 4: -(0.5 - 1) / 2");
    cr_assert(fabsf(tiny_row(eng, 3) + 0.25f) < 1e-7f, "id 3: -(0.5 - 0) / 2");
    for (int id = 5; id <= 6; id++)
        cr_assert_eq(tiny_row(eng, id), 0.0f, "id %d is at a position the loss does not reach", id);
    tl_emb_engine_destroy(eng);
}

/* ---- ids from an input_fn: tensors named by the embedding features ------- */

/* A CSV file of the given header and rows, read as the input_fn's dataset:
 * one scalar tensor per column (ints as int64), batched. */
typedef struct csv_input {
    char *path;
    tl_csv_column cols[8];
    int ncols;
    bool shuffle;
} csv_input;

static tl_status csv_input_fn(const tl_input_context *ctx, void *user, tl_dataset **out)
{
    const csv_input *c = user;
    tl_csv_options o;
    tl_csv_options_init(&o);
    o.columns = c->cols;
    o.num_columns = c->ncols;
    o.label_column = "label";
    const char *pats[] = {c->path};
    tl_dataset *ds;
    tl_status st = tl_dataset_csv(pats, 1, &o, &ds);
    if (st == TL_OK)
        st = tl_dataset_shard(ds, ctx->total, ctx->index, &ds);
    if (st == TL_OK && c->shuffle && ctx->mode == TL_MODE_TRAIN)
        st = tl_dataset_shuffle(ds, 64, 9, true, &ds);
    if (st == TL_OK && ctx->mode == TL_MODE_TRAIN)
        st = tl_dataset_repeat(ds, -1, &ds);
    if (st == TL_OK)
        st = tl_dataset_batch(ds, ctx->batch_size, ctx->mode != TL_MODE_PREDICT, &ds);
    *out = st == TL_OK ? ds : NULL;
    return st;
}

/* Trains fn over eng for one step of batch examples from a CSV of the
 * columns cols (a header of their names, then rows), the ids by keys;
 * returns train's status. */
static tl_status train_csv_rows(tl_emb_engine *eng, tl_model_fn fn, const tl_csv_column *cols, int ncols,
                                const char *rows, int batch, const char *const *keys, int nkeys)
{
    char *dir = mtck_tmpdir();
    csv_input in = {.path = mtck_join(dir, "data.csv"), .ncols = ncols};
    memcpy(in.cols, cols, (size_t)ncols * sizeof *cols);
    FILE *f = fopen(in.path, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < ncols; i++)
        fprintf(f, "%s%s", i ? "," : "", cols[i].name);
    fprintf(f, "\n%s", rows);
    cr_assert_eq(fclose(f), 0);
    char gb[40];
    snprintf(gb, sizeof gb, "--train_batch_size=%d", batch);
    const char *argv[] = {"--devices=1", gb, "--train_steps=1"};
    tl_config *cfg;
    tl_estimator *est = make_est(ARGC(argv), argv, eng, fn, &cfg);
    tl_input input = {.input_fn = csv_input_fn, .user = &in, .embedding_keys = keys, .num_embedding_keys = nkeys};
    tl_train_result tr;
    tl_status st = tl_estimator_train_input(est, &input, &tr);
    destroy_all(est, cfg, NULL);
    mtck_drop_dir(dir);
    free(in.path);
    return st;
}

/* One step by hand from a dataset: the feature "fa" reads its ids from the
 * tensor `key` (its own name, or another through embedding_keys), and the
 * other integer columns are neither ids nor features. */
static void one_dataset_step(const char *key, const char *const *keys)
{
    tl_emb_feature_config f = {.name = "fa", .table = 0};
    tl_emb_config c = tiny_config(&f, 8);
    c.optimizer.learning_rate = 0.5f; /* SGD */
    tl_emb_engine *eng = mtck_emb_engine(&c);
    char rows[512], what[64];
    int n = 0;
    for (int i = 0; i < 8; i++)
        n += snprintf(rows + n, sizeof rows - (size_t)n, "%d.5,%lld,%d\n", i, (long long)by_hand_ids[i],
                      by_hand_labels[i]);
    const tl_csv_column cols[3] = {{"x0", TL_CSV_FLOAT32}, {key, TL_CSV_INT64}, {"label", TL_CSV_INT64}};
    /* logit_model checks that its features are x0 alone: the id column is
     * not a feature. */
    cr_assert_eq(train_csv_rows(eng, logit_model, cols, 3, rows, 8, keys, keys != NULL ? 1 : 0), TL_OK, "%s",
                 tl_last_error());
    snprintf(what, sizeof what, "key %s", key);
    expect_the_step_by_hand(eng, 8, what);
    tl_emb_engine_destroy(eng);
}

Test(mt_estimator_embedding, an_input_fns_ids_are_the_tensor_named_by_the_feature)
{
    one_dataset_step("fa", NULL);
    static const char *const keys[1] = {"user_id"};
    one_dataset_step("user_id", keys);
}

/* The rows of the CSV of the errors below (x0 float, two int64 columns,
 * label), under a header of the columns' names. */
static const char *const csv_rows = "0.5,1,2,0\n1.5,3,4,1\n2.5,5,6,0\n3.5,7,8,1\n";

/* Trains engine eng's model from the CSV with columns cols; returns the
 * status of the first train. */
static tl_status train_csv(tl_emb_engine *eng, tl_model_fn fn, const tl_csv_column *cols, int ncols,
                           const char *const *keys, int nkeys)
{
    return train_csv_rows(eng, fn, cols, ncols, csv_rows, 2, keys, nkeys);
}
/* A new engine's emb_model1 from the CSV of columns cols fails with
 * TL_EINVAL and a message containing error; returns the engine. */
static tl_emb_engine *csv_fails(const tl_csv_column *cols, const char *error)
{
    tl_emb_engine *eng = emb_engine(1, 2, TL_EMB_SGD);
    cr_assert_eq(train_csv(eng, emb_model1, cols, 4, NULL, 0), TL_EINVAL);
    cr_assert(has(error), "%s", tl_last_error());
    return eng;
}

Test(mt_estimator_embedding, an_input_fns_id_tensors_that_cannot_be_ids_are_named)
{
    tl_csv_column good[4] = {{"x0", TL_CSV_FLOAT32}, {"fa", TL_CSV_INT64}, {"fb", TL_CSV_INT64},
                             {"label", TL_CSV_INT64}};
    tl_emb_engine *eng = emb_engine(1, 2, TL_EMB_SGD);
    /* The default features are x0 alone (emb_model1 checks): fa and fb are
     * the ids. */
    cr_assert_eq(train_csv(eng, emb_model1, good, 4, NULL, 0), TL_OK, "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
    /* Float ids: no id travels as a float. */
    tl_csv_column floats[4] = {{"x0", TL_CSV_FLOAT32}, {"fa", TL_CSV_FLOAT32}, {"fb", TL_CSV_INT64},
                               {"label", TL_CSV_INT64}};
    tl_emb_engine_destroy(csv_fails(floats, "input tensor \"fa\" holds the ids of embedding feature \"fa\" as "
                                            "float32: ids must be int64 or int32"));
    /* A missing id tensor, named with the feature it is for. */
    tl_csv_column no_fb[4] = {{"x0", TL_CSV_FLOAT32}, {"fa", TL_CSV_INT64}, {"fc", TL_CSV_INT64},
                              {"label", TL_CSV_INT64}};
    eng = csv_fails(no_fb, "the input's elements have no id tensor \"fb\" for embedding feature 1 (\"fb\") (they "
                           "have \"x0\", \"fa\", \"fc\", \"label\")");
    /* ... and through embedding_keys: fb's ids are "fc". */
    static const char *const keys[2] = {NULL, "fc"};
    cr_assert_eq(train_csv(eng, emb_model1, no_fb, 4, keys, 2), TL_OK, "%s", tl_last_error());
    cr_assert_eq(train_csv(eng, emb_model1, no_fb, 4, keys, 1), TL_EINVAL);
    cr_assert(has("tl_input.num_embedding_keys is 1 with embedding_keys set; the embedding engine has 2 features"),
              "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
    /* Keys without an engine. */
    cr_assert_eq(train_csv(NULL, emb_model1, good, 4, keys, 2), TL_EINVAL);
    cr_assert(has("tl_input.embedding_keys is set, but the estimator has no embedding engine"), "%s",
              tl_last_error());
    /* Another width: a feature of two bags per example reads one id. */
    tl_emb_table_config t = {.name = "a", .vocabulary_size = 10, .dim = 1, .combiner = TL_EMB_COMBINER_SUM};
    tl_emb_feature_config f = {.name = "fa", .table = 0, .num_output_dims = 1, .output_shape = {2}};
    tl_emb_config c;
    mtck_emb_config1(&c, &t, &f);
    c.batch_size_per_tensor_core = 2;
    eng = mtck_emb_engine(&c);
    cr_assert_eq(train_csv(eng, pair_model, good, 4, NULL, 0), TL_EINVAL);
    cr_assert(has("input tensor \"fa\" has 1 ids per example; embedding feature \"fa\" takes 2 (the product of its "
                  "output_shape): shape it (batch) or (batch, 2)"), "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
}

Test(mt_estimator_embedding, same_bits_from_an_input_fn_for_any_iterations_per_loop_and_across_a_resume)
{
    tl_labeled_data *d = emb_data(320);
    char *dir = mtck_tmpdir(), *path = mtck_join(dir, "data.csv");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    /* The columns in another order than the features': found by name. */
    fprintf(f, "x0,fb,x1,fa,label\n");
    for (int64_t i = 0; i < d->num_examples; i++)
        fprintf(f, "%.9g,%lld,%.9g,%lld,%d\n", (double)d->features[i * 2], (long long)d->ids[i * 2 + 1],
                (double)d->features[i * 2 + 1], (long long)d->ids[i * 2], d->labels[i]);
    cr_assert_eq(fclose(f), 0);
    /* The determinism test's data from an input_fn, shuffled, by name. */
    csv_input in = {.path = path,
                    .cols = {{"x0", TL_CSV_FLOAT32}, {"fb", TL_CSV_INT64}, {"x1", TL_CSV_FLOAT32},
                             {"fa", TL_CSV_INT64}, {"label", TL_CSV_INT64}},
                    .ncols = 5,
                    .shuffle = true};
    tl_input input = {.input_fn = csv_input_fn, .user = &in};
    char *md_dir = mtck_join(dir, "model"), md[400];
    snprintf(md, sizeof md, "--model_dir=%s", md_dir);
    expect_same_bits(NULL, &input, md);
    mtck_rmtree(dir);
    free(md_dir);
    free(path);
    free(dir);
    free_data(d);
}

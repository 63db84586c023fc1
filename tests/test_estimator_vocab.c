/* A table of 2^26 rows (dim 8, SGD) trains from the synthetic Criteo data
 * through the estimator: ids travel as int64 from tl_criteo_synth_load to
 * the engine, so rows above 2^24 — where a float32 would round an odd id
 * to its even neighbour — are the ones updated.
 *
 * Cost: the engine allocates and zero-fills the 2 GiB table (2^26 x 8 x 4
 * bytes), about a second; the training itself is 4 steps of 256 examples.
 * Not a threaded test file (test_mt_*): under TSan the table's shadow would
 * be several times its size. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"

#define V ((int64_t)1 << 26)
#define DIM 8
#define BATCH 256
#define STEPS 4
#define N (BATCH * STEPS)
#define SHARDS (1 << 20) /* retrieve reads a host shard: 64 rows each */

/* logit = Dense(1)([dense features, C1's activation]): every example's row
 * gets a nonzero gradient (the kernel's row of it is nonzero from the first
 * step), so every id trained moves. */
static tl_status wide_model(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    int64_t s[2] = {a->batch_size, DIM};
    tl_t e = tl_embedding_activations(g, 0, s, 2);
    tl_t z = tl_dense(g, tl_concat(g, (tl_t[]){a->features, e}, 2, 1), 1, TL_ACT_NONE, "logits");
    spec->logits = spec->predictions = z;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_sigmoid_xent(g, z, a->labels));
    return tl_graph_status(g);
}

/* Row id of table 0, through the host shard that holds it. */
static void row_of(tl_emb_engine *eng, int64_t id, float out[DIM])
{
    int shard;
    int64_t local;
    tl_emb_shard_of(tl_emb_engine_config(eng)->sharding_strategy, V, SHARDS, id, &shard, &local);
    int64_t rows = tl_emb_shard_rows(V, SHARDS, shard);
    float *buf = malloc((size_t)(rows * DIM) * sizeof *buf);
    cr_assert_not_null(buf);
    float *state[1] = {buf};
    cr_assert_eq(tl_emb_retrieve(eng, 0, NULL, SHARDS, shard, state, 1, rows), TL_OK, "%s", tl_last_error());
    memcpy(out, buf + local * DIM, sizeof(float) * DIM);
    free(buf);
}

static bool zero(const float r[DIM])
{
    for (int k = 0; k < DIM; k++)
        if (r[k] != 0.0f)
            return false;
    return true;
}

static int cmp_id(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static bool seen(const int64_t *sorted, int64_t n, int64_t id)
{
    return bsearch(&id, sorted, (size_t)n, sizeof *sorted, cmp_id) != NULL;
}

Test(estimator_vocab, a_table_of_2_26_rows_trains_rows_above_2_24)
{
    /* One categorical column of 2^26 ids, Zipf-scattered over the whole
     * range (three quarters of it lies above 2^24). */
    tl_criteo_synth_config sc;
    tl_criteo_synth_config_default(&sc);
    sc.seed = 21;
    sc.num_examples = N;
    sc.num_categorical = 1;
    sc.vocab_sizes[0] = V;
    tl_criteo_synth *gen;
    cr_assert_eq(tl_criteo_synth_create(&sc, &gen), TL_OK, "%s", tl_last_error());
    tl_labeled_data *d;
    cr_assert_eq(tl_criteo_synth_load(gen, 0, N, &d), TL_OK, "%s", tl_last_error());
    tl_criteo_synth_destroy(gen);
    cr_assert_eq(d->num_ids, 1);

    tl_emb_table_config t = {.name = "C1", .vocabulary_size = V, .dim = DIM,
                             .initializer = {.kind = TL_EMB_INIT_ZEROS}, .combiner = TL_EMB_COMBINER_SUM};
    tl_emb_feature_config f = {.name = "C1", .table = 0};
    tl_emb_config c;
    mtck_emb_config1(&c, &t, &f);
    c.batch_size_per_tensor_core = BATCH;
    c.optimizer.learning_rate = 0.5f; /* SGD */
    tl_emb_engine *eng = mtck_emb_engine(&c);

    const char *argv[] = {"--devices=1", "--train_batch_size=256", "--train_steps=4", "--iterations_per_loop=2",
                          "--tf_random_seed=3"};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = wide_model;
    o.optimizer.lr.learning_rate = 0.01;
    o.embedding = eng;
    tl_config *cfg;
    tl_estimator *est = mtck_estimator((int)(sizeof argv / sizeof argv[0]), argv, &o, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, STEPS);

    /* N = STEPS x BATCH: one epoch, so every example was trained on. */
    int64_t ids[N];
    memcpy(ids, d->ids, sizeof ids);
    qsort(ids, N, sizeof *ids, cmp_id);
    int64_t big = 0, odd_checked = 0;
    float r[DIM];
    for (int64_t i = 0; i < N; i++) {
        int64_t id = ids[i];
        if (id <= ((int64_t)1 << 24) || (i > 0 && ids[i - 1] == id))
            continue;
        big++;
        row_of(eng, id, r);
        cr_assert(!zero(r), "row %lld (above 2^24) was trained but did not move", (long long)id);
        /* A float32 would have carried an odd id to an even neighbour: the
         * neighbours nobody asked for stay exactly at their zeros. */
        if (id % 2 == 1 && id + 1 < V && !seen(ids, N, id - 1) && !seen(ids, N, id + 1)) {
            row_of(eng, id - 1, r);
            cr_assert(zero(r), "row %lld moved, though only %lld was in the data", (long long)(id - 1),
                      (long long)id);
            row_of(eng, id + 1, r);
            cr_assert(zero(r), "row %lld moved, though only %lld was in the data", (long long)(id + 1),
                      (long long)id);
            odd_checked++;
        }
    }
    cr_assert_gt(big, 100, "only %lld distinct ids above 2^24", (long long)big);
    cr_assert_gt(odd_checked, 50, "only %lld odd ids above 2^24 with unseen neighbours", (long long)odd_checked);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_emb_engine_destroy(eng);
    tl_labeled_data_destroy(d);
}

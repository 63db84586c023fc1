/* embedding/: the same inputs give the same table bits for every shard
 * count and both sharding strategies (owner computes; the sums keep their
 * order), with lazy, non-lazy and accumulation-free optimizers, mixed
 * combiners, two tables of different dims, and duplicate ids; and on one
 * core, whether the send's update sums each row's gradient as it goes (the
 * fused direct apply) or reads the sums stored first (owner apply). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tpuloop/embedding.h"
#include "tpuloop/rng.h"

enum { B = 16, STEPS = 5, V0 = 97, V1 = 31, MAX_C = 2 };

/* The cores of a run, whether they apply their own rows (owner apply), and
 * whether a third table, without gradient accumulation, with a feature that
 * never has an id, stands beside the two: it takes the owners off the merge
 * through the cores' dedup hashes (every table lazy and accumulating) onto
 * the accumulation hash, and changes nothing in the other two; and whether the
 * engine pipelines (step n + 1's ids are enqueued before step n is
 * applied). */
static int C = MAX_C;
static bool owner, extra, pipelined;

typedef struct run_spec {
    tl_emb_algorithm algo;
    bool non_lazy, no_accum;
} run_spec;

/* Zipf-like ids: small ids often. */
static int64_t draw_id(tl_rng *r, int64_t V)
{
    double u = tl_rng_uniform_f64(r);
    return (int64_t)(pow(u, 3.0) * (double)V);
}

/* Runs `steps` steps on C cores and returns both tables' parameters and slots. */
static float *run(const run_spec *rs, int shards, tl_emb_sharding strategy, int steps, size_t *n_out)
{
    tl_emb_optimizer opt;
    tl_emb_optimizer_default(rs->algo, &opt);
    opt.learning_rate = 0.05f;
    opt.use_non_lazy = rs->non_lazy;
    if (rs->no_accum)
        opt.gradient_accumulation_status = TL_EMB_ACCUM_DISABLED;
    tl_emb_optimizer sgd_no_accum; /* keeps the engine off the merge through the dedup hashes */
    tl_emb_optimizer_default(TL_EMB_SGD, &sgd_no_accum);
    sgd_no_accum.gradient_accumulation_status = TL_EMB_ACCUM_DISABLED;
    tl_emb_table_config t[3] = {
        {.name = "a", .vocabulary_size = V0, .dim = 8, .optimizer = &opt, .combiner = TL_EMB_COMBINER_SQRTN},
        {.name = "b", .vocabulary_size = V1, .dim = 3, .optimizer = &opt, .combiner = TL_EMB_COMBINER_MEAN},
        {.name = "z", .vocabulary_size = 5, .dim = 2, .optimizer = &sgd_no_accum}};
    tl_emb_feature_config f[4] = {{.name = "f0", .table = 0}, {.name = "f1", .table = 1}, {.name = "f2", .table = 0},
                                  {.name = "fz", .table = 2}};
    int F = extra ? 4 : 3;
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = t;
    c.num_tables = extra ? 3 : 2;
    c.features = f;
    c.num_features = F;
    c.num_tensor_cores = C;
    c.batch_size_per_tensor_core = B;
    c.num_shards = shards;
    c.sharding_strategy = strategy;
    c.seed = 7;
    c.pipeline_execution_with_tensor_core = pipelined;
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_set_owner_apply(eng, owner), TL_OK, "%s", tl_last_error());
    int dims[4] = {8, 3, 8, 2};
    int64_t vocab[3] = {V0, V1, V0};
    for (int s = 0; s < steps; s++) {
        static int64_t ids[MAX_C][4][B * 4], splits[MAX_C][4][B + 1];
        static float w[MAX_C][4][B * 4], out[MAX_C][4][B * 8], grad[MAX_C][4][B * 8];
        tl_emb_dedup dd[MAX_C];
        for (int core = 0; core < C; core++) {
            tl_rng r;
            tl_rng_init(&r, 11, 3, (uint64_t)core, (uint64_t)s);
            tl_emb_input in[4];
            /* fz: no ids, a zero gradient */
            memset(splits[core][3], 0, sizeof splits[core][3]);
            memset(grad[core][3], 0, sizeof grad[core][3]);
            in[3] = (tl_emb_input){.kind = TL_EMB_INPUT_RAGGED, .ids = ids[core][3], .n = 0,
                                   .row_splits = splits[core][3]};
            for (int fi = 0; fi < 3; fi++) {
                int64_t n = 0;
                splits[core][fi][0] = 0;
                for (int b = 0; b < B; b++) {
                    int len = (int)(tl_rng_u32(&r) % 4); /* 0..3 ids, empty bags included */
                    for (int k = 0; k < len; k++, n++) {
                        ids[core][fi][n] = draw_id(&r, vocab[fi]);
                        w[core][fi][n] = 0.5f + tl_rng_uniform(&r);
                    }
                    splits[core][fi][b + 1] = n;
                }
                in[fi] = (tl_emb_input){.kind = TL_EMB_INPUT_RAGGED, .ids = ids[core][fi], .n = n,
                                        .row_splits = splits[core][fi], .weights = w[core][fi]};
                for (int k = 0; k < B * dims[fi]; k++)
                    grad[core][fi][k] = tl_rng_uniform(&r) - 0.5f;
            }
            cr_assert_eq(tl_emb_enqueue(eng, core, in, F, NULL), TL_OK, "%s", tl_last_error());
        }
        for (int core = C - 1; core >= 0; core--) { /* cores in any order */
            float *outs[4] = {out[core][0], out[core][1], out[core][2], out[core][3]};
            cr_assert_eq(tl_emb_recv_dedup(eng, core, &dd[core]), TL_OK, "%s", tl_last_error());
            cr_assert_eq(tl_emb_recv_activations(eng, core, &dd[core], outs, F), TL_OK, "%s", tl_last_error());
        }
        for (int core = 0; core < C; core++) {
            const float *gs[4] = {grad[core][0], grad[core][1], grad[core][2], grad[core][3]};
            cr_assert_eq(tl_emb_send_gradients(eng, core, &dd[core], gs, F, NULL, 0), TL_OK, "%s", tl_last_error());
        }
        for (int core = 0; core < C && owner; core++)
            cr_assert_eq(tl_emb_apply_owned(eng, core), TL_OK, "%s", tl_last_error());
    }
    int K = tl_emb_num_slots(&opt);
    size_t n = (size_t)(V0 * 8 + V1 * 3) * (size_t)(1 + K);
    float *all = calloc(n, sizeof *all), *p = all;
    int64_t V[2] = {V0, V1};
    int D[2] = {8, 3};
    for (int ti = 0; ti < 2; ti++) {
        float *st[8];
        for (int k = 0; k <= K; k++, p += V[ti] * D[ti])
            st[k] = p;
        cr_assert_eq(tl_emb_retrieve(eng, ti, NULL, 1, 0, st, 1 + K, V[ti]), TL_OK, "%s", tl_last_error());
    }
    tl_emb_engine_destroy(eng);
    *n_out = n;
    return all;
}

Test(embedding_determinism, same_bits_for_every_shard_count_and_strategy)
{
    static const run_spec specs[] = {{TL_EMB_ADAGRAD, false, false}, {TL_EMB_ADAM, true, false},
                                     {TL_EMB_FTRL, false, false},    {TL_EMB_SGD, false, true},
                                     {TL_EMB_LION, true, false},     {TL_EMB_RMSPROP, false, false}};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        size_t n;
        float *ref = run(&specs[i], 1, TL_EMB_DIV_DEFAULT, STEPS, &n);
        size_t n0;
        float *init = run(&specs[i], 1, TL_EMB_DIV_DEFAULT, 0, &n0);
        cr_assert(n0 == n && memcmp(init, ref, n * sizeof *ref) != 0, "%s: the steps changed nothing",
                  tl_emb_algorithm_name(specs[i].algo));
        free(init);
        for (int shards = 1; shards <= 5; shards += 2)
            for (int strat = 0; strat < 2; strat++) {
                size_t m;
                float *got = run(&specs[i], shards, strat ? TL_EMB_MOD : TL_EMB_DIV_DEFAULT, STEPS, &m);
                cr_assert_eq(m, n);
                cr_assert(memcmp(got, ref, n * sizeof *ref) == 0, "%s: %d shards %s differ from 1 shard DIV",
                          tl_emb_algorithm_name(specs[i].algo), shards, strat ? "MOD" : "DIV");
                free(got);
            }
        free(ref);
    }
}

/* One core with lazy tables updates inside the send, each row's gradient
 * summed as it goes; with owner apply the sums are stored by the send and
 * read back by tl_emb_apply_owned. The same operations in the same order:
 * the same bits. */
Test(embedding_determinism, fused_send_update_has_the_bits_of_stored_sums)
{
    static const run_spec specs[] = {{TL_EMB_SGD, false, false}, {TL_EMB_ADAGRAD, false, false},
                                     {TL_EMB_ADAM, false, false}, {TL_EMB_FTRL, false, false}};
    C = 1;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        size_t n, m;
        owner = true;
        float *ref = run(&specs[i], 1, TL_EMB_DIV_DEFAULT, STEPS, &n);
        owner = false;
        float *got = run(&specs[i], 1, TL_EMB_DIV_DEFAULT, STEPS, &m);
        float *init = run(&specs[i], 1, TL_EMB_DIV_DEFAULT, 0, &m);
        cr_assert(memcmp(init, ref, n * sizeof *ref) != 0, "%s: the steps changed nothing",
                  tl_emb_algorithm_name(specs[i].algo));
        cr_assert(memcmp(got, ref, n * sizeof *ref) == 0, "%s: the fused update differs from the stored sums'",
                  tl_emb_algorithm_name(specs[i].algo));
        free(ref);
        free(got);
        free(init);
    }
}

/* Several cores, every table lazy and accumulating: the owners merge each
 * row's sums through the cores' dedup hashes; with a table without
 * accumulation beside them, through the accumulation hash. The same sums in the same order: the
 * same bits, with owner apply, without, and pipelined, where each core's
 * next step is enqueued (its dedup hash built) before the merge of this
 * one. */
Test(embedding_determinism, merge_by_dedup_has_the_bits_of_the_accumulation_hash)
{
    static const run_spec specs[] = {{TL_EMB_SGD, false, false}, {TL_EMB_ADAGRAD, false, false},
                                     {TL_EMB_FTRL, false, false}, {TL_EMB_RMSPROP, false, false}};
    C = MAX_C;
    for (int mode = 0; mode < 3; mode++) /* serial apply, owner apply, pipelined */
        for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
            size_t n, m;
            owner = mode == 1;
            pipelined = mode == 2;
            extra = true;
            float *ref = run(&specs[i], 2, TL_EMB_MOD, STEPS, &n);
            extra = false;
            float *got = run(&specs[i], 2, TL_EMB_MOD, STEPS, &m);
            cr_assert_eq(m, n);
            cr_assert(memcmp(got, ref, n * sizeof *ref) == 0, "%s%s: the merge through the dedup hashes differs",
                      tl_emb_algorithm_name(specs[i].algo),
                      mode == 1 ? " (owner apply)" : mode == 2 ? " (pipelined)" : "");
            free(ref);
            free(got);
        }
    owner = false;
}

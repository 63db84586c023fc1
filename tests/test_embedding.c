/* embedding/: the engine against tpu_embedding.md §12 — sharding (T12),
 * combiners forward and backward (T9), end to end on one and two cores and
 * over shards (T13, T14), accumulation off (T3), pipelining (T15), dedup
 * tuples (T16) — and the order, shape and id errors of §6-§7. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tpuloop/embedding.h"

#define NEAR(x, want)                                                                                       \
    do {                                                                                                    \
        double x_ = (x), w_ = (want);                                                                       \
        cr_assert(fabs(x_ - w_) <= 1e-6 * fmax(fabs(w_), 1.0), "%s = %.9g, want %.9g", #x, x_, w_);        \
    } while (0)

/* ---- T12 ------------------------------------------------------------------ */

Test(embedding, t12_sharding)
{
    static const int64_t div_want[5][3] = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, -1}, {11, 12, -1}};
    static const int64_t mod_want[5][3] = {{0, 5, 10}, {1, 6, 11}, {2, 7, 12}, {3, 8, -1}, {4, 9, -1}};
    static const int64_t sizes[5] = {3, 3, 3, 2, 2};
    for (int s = 0; s < 5; s++)
        cr_assert_eq(tl_emb_shard_rows(13, 5, s), sizes[s]);
    for (int64_t id = 0; id < 13; id++) {
        int sh;
        int64_t local;
        tl_emb_shard_of(TL_EMB_DIV_DEFAULT, 13, 5, id, &sh, &local);
        cr_assert_eq(div_want[sh][local], id, "DIV id %lld -> shard %d local %lld", (long long)id, sh, (long long)local);
        tl_emb_shard_of(TL_EMB_MOD, 13, 5, id, &sh, &local);
        cr_assert_eq(mod_want[sh][local], id, "MOD id %lld -> shard %d local %lld", (long long)id, sh, (long long)local);
    }
    /* tl_emb_shard_id is the inverse: every row of every shard back to its id. */
    for (int s = 0; s < 5; s++)
        for (int64_t l = 0; l < sizes[s]; l++) {
            cr_assert_eq(tl_emb_shard_id(TL_EMB_DIV_DEFAULT, 13, 5, s, l), div_want[s][l]);
            cr_assert_eq(tl_emb_shard_id(TL_EMB_MOD, 13, 5, s, l), mod_want[s][l]);
        }
    int sh;
    int64_t local;
    tl_emb_shard_of(TL_EMB_DIV_DEFAULT, 13, 5, 10, &sh, &local);
    cr_assert(sh == 3 && local == 1);
    tl_emb_shard_of(TL_EMB_MOD, 13, 5, 10, &sh, &local);
    cr_assert(sh == 0 && local == 2);

    /* V = 2 over 3 shards: an empty shard */
    tl_emb_table_config t = {.name = "small", .vocabulary_size = 2, .dim = 1};
    tl_emb_feature_config f = {.table = 0};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = &t;
    c.num_tables = 1;
    c.features = &f;
    c.num_features = 1;
    c.num_shards = 3;
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "All embedding shards must be non-empty, shard ID: 2 is empty, vocabulary size: "
                                      "2, number of shards: 3") != NULL, "%s", tl_last_error());
    t.vocabulary_size = 3; /* padded, as TensorFlow's max(V, num_hosts) */
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
}

/* ---- helpers -------------------------------------------------------------- */

/* Sets table t's parameters to rows[V][D] (one host shard). */
static void load_rows(tl_emb_engine *eng, int t, const float *rows, int64_t V, int nslots, const float *slot0)
{
    const float *state[8] = {rows};
    float *zeros = calloc((size_t)V * 64, sizeof *zeros);
    for (int k = 1; k <= nslots; k++)
        state[k] = k == 1 && slot0 != NULL ? slot0 : zeros;
    cr_assert_eq(tl_emb_load(eng, t, NULL, 1, 0, state, 1 + nslots, V), TL_OK, "%s", tl_last_error());
    free(zeros);
}

static void get_rows(tl_emb_engine *eng, int t, float *rows, int64_t V, int nslots)
{
    float *state[8] = {rows};
    float *scratch = calloc((size_t)V * 64 * 8, sizeof *scratch);
    for (int k = 1; k <= nslots; k++)
        state[k] = scratch + (size_t)(k - 1) * (size_t)V * 64;
    cr_assert_eq(tl_emb_retrieve(eng, t, NULL, 1, 0, state, 1 + nslots, V), TL_OK, "%s", tl_last_error());
    free(scratch);
}

/* One training step on one core: enqueue, dedup, activations, gradients. */
static void step1(tl_emb_engine *eng, int core, const tl_emb_input *in, int n, float *const *out, const float *const *g,
                  const float *lrs, int n_lr)
{
    tl_emb_dedup dd;
    cr_assert_eq(tl_emb_enqueue(eng, core, in, n, "train"), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_recv_dedup(eng, core, &dd), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_recv_activations(eng, core, &dd, out, n), TL_OK, "%s", tl_last_error());
    if (g != NULL)
        cr_assert_eq(tl_emb_send_gradients(eng, core, &dd, g, n, lrs, n_lr), TL_OK, "%s", tl_last_error());
}

/* ---- T9: combiners ------------------------------------------------------------ */

static void t9_case(tl_emb_combiner comb, const int64_t *ids, const float *w, int n, const float *want,
                    const float *want_g3, const float *want_g5)
{
    tl_emb_optimizer sgd;
    tl_emb_optimizer_default(TL_EMB_SGD, &sgd);
    sgd.learning_rate = 1.0f;
    tl_emb_table_config t = {.name = "t", .vocabulary_size = 6, .dim = 2, .optimizer = &sgd, .combiner = comb};
    tl_emb_feature_config f = {.name = "f", .table = 0};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = &t;
    c.num_tables = 1;
    c.features = &f;
    c.num_features = 1;
    c.batch_size_per_tensor_core = 2; /* bag 0 holds the ids, bag 1 is empty */
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
    float rows[12] = {0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4};
    load_rows(eng, 0, rows, 6, 0, NULL);
    int64_t splits[3] = {0, n, n};
    tl_emb_input in = {.kind = TL_EMB_INPUT_RAGGED, .ids = ids, .n = n, .row_splits = splits, .weights = w};
    float out[4] = {9, 9, 9, 9}, g[4] = {1, 1, 1, 1};
    float *outs[1] = {out};
    const float *gs[1] = {g};
    step1(eng, 0, &in, 1, outs, gs, NULL, 0);
    NEAR(out[0], want[0]);
    NEAR(out[1], want[1]);
    NEAR(out[2], 0); /* the empty bag */
    NEAR(out[3], 0);
    float after[12];
    get_rows(eng, 0, after, 6, 0);
    for (int d = 0; d < 2; d++) { /* lr 1: the row moved by its gradient */
        NEAR(rows[6 + d] - after[6 + d], want_g3[d]);
        NEAR(rows[10 + d] - after[10 + d], want_g5[d]);
    }
    tl_emb_engine_destroy(eng);
}

Test(embedding, t9_combiners)
{
    int64_t ids[2] = {3, 5};
    float w[2] = {1, 3};
    t9_case(TL_EMB_COMBINER_SUM, ids, w, 2, (float[]){10, 14}, (float[]){1, 1}, (float[]){3, 3});
    t9_case(TL_EMB_COMBINER_MEAN, ids, w, 2, (float[]){2.5f, 3.5f}, (float[]){0.25f, 0.25f}, (float[]){0.75f, 0.75f});
    t9_case(TL_EMB_COMBINER_SQRTN, ids, w, 2, (float[]){3.162278f, 4.427189f}, (float[]){0.3162278f, 0.3162278f},
            (float[]){0.9486833f, 0.9486833f});
    /* duplicate ids with sqrtn: gains per occurrence before merging, sqrt(2) * e3 */
    int64_t dup[2] = {3, 3};
    t9_case(TL_EMB_COMBINER_SQRTN, dup, NULL, 2, (float[]){1.414214f, 2.828427f}, (float[]){1.414214f, 1.414214f},
            (float[]){0, 0});
}

/* ---- T13 / T14: end to end --------------------------------------------------------- */

/* One table V = 4, D = 2, rows [2i, 2i+1]; f1 (sum) and f2 (mean) on it; B = 2
 * on one core, or B = 1 on each of two cores. */
static tl_emb_engine *t13_engine(tl_emb_algorithm algo, int cores, int shards, tl_emb_sharding strategy)
{
    static tl_emb_optimizer opt;
    tl_emb_optimizer_default(algo, &opt);
    opt.learning_rate = 0.1f;
    opt.initial_accumulator_value = 0.1f;
    static tl_emb_table_config t;
    t = (tl_emb_table_config){.name = "t", .vocabulary_size = 4, .dim = 2, .optimizer = &opt};
    static tl_emb_feature_config f[2];
    f[0] = (tl_emb_feature_config){.name = "f1", .table = 0, .has_combiner = true, .combiner = TL_EMB_COMBINER_SUM};
    f[1] = (tl_emb_feature_config){.name = "f2", .table = 0, .has_combiner = true, .combiner = TL_EMB_COMBINER_MEAN};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = &t;
    c.num_tables = 1;
    c.features = f;
    c.num_features = 2;
    c.num_tensor_cores = cores;
    c.batch_size_per_tensor_core = 2 / cores;
    c.num_shards = shards;
    c.sharding_strategy = strategy;
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
    float rows[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    float acc[8] = {0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
    load_rows(eng, 0, rows, 4, tl_emb_num_slots(&opt), acc);
    return eng;
}

static void t13_run(tl_emb_engine *eng, int cores, float *f1_out, float *f2_out)
{
    float dl1[4] = {1, 0, 0, 1}, dl2[4] = {1, 1, 5, 5};
    if (cores == 1) {
        int64_t s1[3] = {0, 2, 3}, id1[3] = {0, 1, 1}, s2[3] = {0, 2, 2}, id2[2] = {2, 3};
        tl_emb_input in[2] = {{.kind = TL_EMB_INPUT_RAGGED, .ids = id1, .n = 3, .row_splits = s1},
                              {.kind = TL_EMB_INPUT_RAGGED, .ids = id2, .n = 2, .row_splits = s2}};
        float *outs[2] = {f1_out, f2_out};
        const float *gs[2] = {dl1, dl2};
        step1(eng, 0, in, 2, outs, gs, NULL, 0);
        return;
    }
    /* sample 0 on core 0, sample 1 on core 1 (COO there) */
    int64_t s1a[2] = {0, 2}, id1a[2] = {0, 1}, s2a[2] = {0, 2}, id2a[2] = {2, 3};
    int64_t coo1b[2] = {0, 0}, id1b[1] = {1};
    tl_emb_input a[2] = {{.kind = TL_EMB_INPUT_RAGGED, .ids = id1a, .n = 2, .row_splits = s1a},
                         {.kind = TL_EMB_INPUT_RAGGED, .ids = id2a, .n = 2, .row_splits = s2a}};
    tl_emb_input b[2] = {{.kind = TL_EMB_INPUT_COO, .ids = id1b, .n = 1, .indices = coo1b},
                         {.kind = TL_EMB_INPUT_COO, .ids = NULL, .n = 0}};
    float *oa[2] = {f1_out, f2_out}, *ob[2] = {f1_out + 2, f2_out + 2};
    const float *ga[2] = {dl1, dl2}, *gb[2] = {dl1 + 2, dl2 + 2};
    tl_emb_dedup da, db;
    cr_assert_eq(tl_emb_enqueue(eng, 0, a, 2, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_enqueue(eng, 1, b, 2, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_recv_dedup(eng, 1, &db), TL_OK);
    cr_assert_eq(tl_emb_recv_dedup(eng, 0, &da), TL_OK);
    cr_assert_eq(tl_emb_recv_activations(eng, 1, &db, ob, 2), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_recv_activations(eng, 0, &da, oa, 2), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_send_gradients(eng, 1, &db, gb, 2, NULL, 0), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_send_gradients(eng, 0, &da, ga, 2, NULL, 0), TL_OK, "%s", tl_last_error());
}

Test(embedding, t13_t14_end_to_end)
{
    static const float sgd_want[8] = {-0.1f, 1, 1.9f, 2.9f, 3.95f, 4.95f, 5.95f, 6.95f};
    static const float ada_want[8] = {-0.0953463f, 1.0f,      1.9046537f, 2.9046537f,
                                      3.9154846f,  4.9154846f, 5.9154846f, 6.9154846f};
    for (int algo = 0; algo < 2; algo++)
        for (int cores = 1; cores <= 2; cores++)
            for (int shards = 1; shards <= 3; shards++)
                for (int strat = 0; strat < 2; strat++) {
                    tl_emb_engine *eng = t13_engine(algo ? TL_EMB_ADAGRAD : TL_EMB_SGD, cores, shards,
                                                    strat ? TL_EMB_MOD : TL_EMB_DIV_DEFAULT);
                    float f1[4], f2[4];
                    t13_run(eng, cores, f1, f2);
                    static const float f1_want[4] = {2, 4, 2, 3}, f2_want[4] = {5, 6, 0, 0};
                    for (int i = 0; i < 4; i++) {
                        NEAR(f1[i], f1_want[i]);
                        NEAR(f2[i], f2_want[i]);
                    }
                    float rows[8];
                    get_rows(eng, 0, rows, 4, algo);
                    for (int i = 0; i < 8; i++)
                        cr_assert(fabs(rows[i] - (algo ? ada_want : sgd_want)[i]) <= 2e-6 * fmax(1, fabs(rows[i])),
                                  "%s cores %d shards %d %s: row value %d = %.9g, want %.9g", algo ? "Adagrad" : "SGD",
                                  cores, shards, strat ? "MOD" : "DIV", i, rows[i], (algo ? ada_want : sgd_want)[i]);
                    tl_emb_engine_destroy(eng);
                }
}

/* ---- T3: accumulation off --------------------------------------------------------- */

/* T2's engine: one Adagrad table of one row (1, -2), accumulator 0.1, on
 * two cores, with or without gradient accumulation. */
static tl_emb_engine *t2_engine(bool accumulate)
{
    tl_emb_optimizer opt;
    tl_emb_optimizer_default(TL_EMB_ADAGRAD, &opt);
    opt.learning_rate = 0.1f;
    opt.initial_accumulator_value = 0.1f;
    opt.gradient_accumulation_status = accumulate ? TL_EMB_ACCUM_ENABLED : TL_EMB_ACCUM_DISABLED;
    tl_emb_table_config t = {.name = "t", .vocabulary_size = 1, .dim = 2, .optimizer = &opt,
                             .combiner = TL_EMB_COMBINER_SUM};
    tl_emb_feature_config f = {.name = "f", .table = 0};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = &t;
    c.num_tables = 1;
    c.features = &f;
    c.num_features = 1;
    c.num_tensor_cores = 2;
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
    float row[2] = {1, -2}, acc[2] = {0.1f, 0.1f};
    load_rows(eng, 0, row, 1, 1, acc);
    return eng;
}

Test(embedding, t3_accumulation_on_and_off)
{
    for (int off = 0; off < 2; off++) {
        tl_emb_engine *eng = t2_engine(!off);
        int64_t id[1] = {0};
        tl_emb_input in = {.kind = TL_EMB_INPUT_DENSE, .ids = id, .n = 1};
        float g1[2] = {0.2f, -0.4f}, g2[2] = {0.3f, -0.6f}, o[2];
        float *outs[1] = {o};
        const float *ga[1] = {g1}, *gb[1] = {g2};
        tl_emb_dedup d0, d1;
        cr_assert_eq(tl_emb_enqueue(eng, 0, &in, 1, NULL), TL_OK);
        cr_assert_eq(tl_emb_enqueue(eng, 1, &in, 1, NULL), TL_OK);
        cr_assert_eq(tl_emb_recv_dedup(eng, 0, &d0), TL_OK);
        cr_assert_eq(tl_emb_recv_dedup(eng, 1, &d1), TL_OK);
        cr_assert_eq(tl_emb_recv_activations(eng, 0, &d0, outs, 1), TL_OK);
        cr_assert_eq(tl_emb_recv_activations(eng, 1, &d1, outs, 1), TL_OK);
        cr_assert_eq(tl_emb_send_gradients(eng, 1, &d1, gb, 1, NULL, 0), TL_OK); /* order of sends is irrelevant */
        cr_assert_eq(tl_emb_send_gradients(eng, 0, &d0, ga, 1, NULL, 0), TL_OK);
        float state[2][2];
        float *st2[2] = {state[0], state[1]};
        cr_assert_eq(tl_emb_retrieve(eng, 0, NULL, 1, 0, st2, 2, 1), TL_OK, "%s", tl_last_error());
        if (!off) { /* T2 */
            NEAR(state[1][0], 0.35);
            NEAR(state[1][1], 1.1);
            NEAR(state[0][0], 0.9154846);
            NEAR(state[0][1], -1.904654);
        } else { /* core 0's sum, then core 1's */
            NEAR(state[1][0], 0.23);
            NEAR(state[1][1], 0.62);
            NEAR(state[0][0], 0.8839934);
            NEAR(state[0][1], -1.845353);
        }
        tl_emb_engine_destroy(eng);
    }
}

/* A core whose model runs in another process receives its step without
 * activations (outputs NULL, n 0) and sends its gradients: the update is
 * T2's, as when it computed them. */
Test(embedding, a_core_received_without_activations_updates_the_same)
{
    tl_emb_engine *eng = t2_engine(true);
    int64_t id[1] = {0};
    tl_emb_input in = {.kind = TL_EMB_INPUT_DENSE, .ids = id, .n = 1};
    float g1[2] = {0.2f, -0.4f}, g2[2] = {0.3f, -0.6f}, o[2] = {9, 9};
    float *outs[1] = {o};
    const float *ga[1] = {g1}, *gb[1] = {g2};
    tl_emb_dedup d0, d1;
    cr_assert_eq(tl_emb_enqueue(eng, 0, &in, 1, NULL), TL_OK);
    cr_assert_eq(tl_emb_enqueue(eng, 1, &in, 1, NULL), TL_OK);
    cr_assert_eq(tl_emb_recv_dedup(eng, 0, &d0), TL_OK);
    cr_assert_eq(tl_emb_recv_dedup(eng, 1, &d1), TL_OK);
    cr_assert_eq(tl_emb_recv_activations(eng, 1, &d1, NULL, 1), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "outputs is NULL with n 1") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_emb_recv_activations(eng, 0, &d0, outs, 1), TL_OK);
    cr_assert_eq(tl_emb_recv_activations(eng, 1, &d1, NULL, 0), TL_OK, "%s", tl_last_error());
    cr_assert(o[0] == 1 && o[1] == -2, "core 0's activations");
    cr_assert_eq(tl_emb_send_gradients(eng, 1, &d1, gb, 1, NULL, 0), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_send_gradients(eng, 0, &d0, ga, 1, NULL, 0), TL_OK);
    float state[2][2];
    float *st2[2] = {state[0], state[1]};
    cr_assert_eq(tl_emb_retrieve(eng, 0, NULL, 1, 0, st2, 2, 1), TL_OK, "%s", tl_last_error());
    NEAR(state[1][0], 0.35);
    NEAR(state[1][1], 1.1);
    NEAR(state[0][0], 0.9154846);
    NEAR(state[0][1], -1.904654);
    tl_emb_engine_destroy(eng);
}

/* ---- T15: pipelining ------------------------------------------------------------------ */

Test(embedding, t15_pipelining)
{
    for (int pipe = 0; pipe < 2; pipe++) {
        tl_emb_optimizer opt;
        tl_emb_optimizer_default(TL_EMB_SGD, &opt);
        opt.learning_rate = 0.1f;
        tl_emb_table_config t = {.name = "t", .vocabulary_size = 1, .dim = 1, .optimizer = &opt,
                                 .initializer = {.kind = TL_EMB_INIT_CONSTANT, .value = 1}};
        tl_emb_feature_config f = {.name = "f", .table = 0};
        tl_emb_config c;
        tl_emb_config_default(&c);
        c.tables = &t;
        c.num_tables = 1;
        c.features = &f;
        c.num_features = 1;
        c.pipeline_execution_with_tensor_core = pipe;
        tl_emb_engine *eng;
        cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
        int64_t id[1] = {0};
        tl_emb_input in = {.kind = TL_EMB_INPUT_DENSE, .ids = id, .n = 1};
        float g[1] = {1}, o[1];
        float *outs[1] = {o};
        const float *gs[1] = {g};
        static const float want[2][3] = {{1.0f, 0.9f, 0.8f}, {1.0f, 1.0f, 0.9f}};
        for (int s = 0; s < 3; s++) {
            step1(eng, 0, &in, 1, outs, gs, NULL, 0);
            NEAR(o[0], want[pipe][s]);
        }
        float w[1];
        get_rows(eng, 0, w, 1, 0); /* retrieve flushes the pending update */
        NEAR(w[0], 0.7);
        tl_emb_engine_destroy(eng);
    }
}

/* ---- T16: dedup tuples ----------------------------------------------------------------- */

Test(embedding, t16_tuple_mask_split_merge)
{
    bool is_float[4] = {false, false, true, false};
    int32_t mask[4][2];
    int rows = tl_emb_tuple_mask(is_float, 4, mask, 4);
    cr_assert_eq(rows, 3);
    static const int32_t want[3][2] = {{0, 2}, {1, 1}, {0, 1}};
    for (int r = 0; r < 3; r++)
        cr_assert(mask[r][0] == want[r][0] && mask[r][1] == want[r][1], "row %d", r);
    double tuple[4] = {1, 2, 0.1, 3}, floats[1], back[4];
    int64_t ints[3];
    cr_assert_eq(tl_emb_dedup_split(tuple, 4, (const int32_t(*)[2])mask, rows, ints, floats), TL_OK);
    cr_assert(ints[0] == 1 && ints[1] == 2 && ints[2] == 3 && floats[0] == 0.1);
    cr_assert_eq(tl_emb_dedup_merge(ints, floats, (const int32_t(*)[2])mask, rows, back, 4), TL_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(back[i], tuple[i]);
    cr_assert_eq(tl_emb_dedup_split(tuple, 5, (const int32_t(*)[2])mask, rows, ints, floats), TL_EINVAL);
}

/* ---- errors and order ----------------------------------------------------------------- */

static tl_emb_engine *small_engine(tl_emb_bounds_check bounds, tl_emb_mode mode, int seq)
{
    static tl_emb_table_config t;
    t = (tl_emb_table_config){.name = "t", .vocabulary_size = 5, .dim = 3,
                              .initializer = {.kind = TL_EMB_INIT_ROW_ID}, .combiner = TL_EMB_COMBINER_SUM};
    static tl_emb_feature_config f;
    f = (tl_emb_feature_config){.name = "clicks", .table = 0, .max_sequence_length = seq};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = &t;
    c.num_tables = 1;
    c.features = &f;
    c.num_features = 1;
    c.batch_size_per_tensor_core = 2;
    c.bounds_check_mode = bounds;
    c.mode = mode;
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
    return eng;
}

static void expect(tl_status got, tl_status want, const char *frag)
{
    cr_assert_eq(got, want, "status %d, want %d (%s)", got, want, tl_last_error());
    cr_assert(strstr(tl_last_error(), frag) != NULL, "\"%s\" lacks \"%s\"", tl_last_error(), frag);
}

Test(embedding, bounds_check_modes)
{
    int64_t ids[3] = {1, 7, -1}, splits[3] = {0, 2, 3};
    tl_emb_input in = {.kind = TL_EMB_INPUT_RAGGED, .ids = ids, .n = 3, .row_splits = splits};
    tl_emb_engine *eng = small_engine(TL_EMB_BOUNDS_FATAL, TL_EMB_MODE_TRAINING, 0);
    expect(tl_emb_enqueue(eng, 0, &in, 1, NULL), TL_EINVAL,
           "feature \"clicks\" (table \"t\"): id 7 at position 1 is out of range: the vocabulary size is 5");
    /* nothing was enqueued: the next receive finds nothing */
    tl_emb_dedup dd;
    expect(tl_emb_recv_dedup(eng, 0, &dd), TL_ERUNTIME, "nothing enqueued");
    tl_emb_engine_destroy(eng);
    for (int mode = 1; mode <= 2; mode++) {
        eng = small_engine((tl_emb_bounds_check)mode, TL_EMB_MODE_TRAINING, 0);
        float out[6];
        float *outs[1] = {out};
        step1(eng, 0, &in, 1, outs, NULL, NULL, 0);
        /* row id init: row 1 is [1, 1, 1]; the bad ids are dropped, bag 1 is empty */
        for (int d = 0; d < 3; d++) {
            NEAR(out[d], 1);
            NEAR(out[3 + d], 0);
        }
        tl_emb_stats st;
        tl_emb_get_stats(eng, &st);
        cr_assert_eq(st.dropped_ids, 2);
        tl_emb_engine_destroy(eng);
    }
}

Test(embedding, order_and_shape_errors)
{
    tl_emb_engine *eng = small_engine(TL_EMB_BOUNDS_FATAL, TL_EMB_MODE_TRAINING, 0);
    int64_t ids[2] = {1, 2};
    float w[2] = {1, 1};
    tl_emb_input dense = {.kind = TL_EMB_INPUT_DENSE, .ids = ids, .n = 2};
    expect(tl_emb_enqueue(eng, 0, &dense, 2, NULL), TL_EINVAL, "expected 1 inputs, one per feature, got 2");
    expect(tl_emb_enqueue(eng, 1, &dense, 1, NULL), TL_EINVAL, "core 1 is not in [0, 1)");
    expect(tl_emb_enqueue(eng, 0, &dense, 1, "evaluate"), TL_EINVAL, "mode_override \"evaluate\"");
    tl_emb_input weighted = dense;
    weighted.weights = w;
    expect(tl_emb_enqueue(eng, 0, &weighted, 1, NULL), TL_EINVAL, "Weight specified for dense input");
    tl_emb_input short_dense = {.kind = TL_EMB_INPUT_DENSE, .ids = ids, .n = 1};
    expect(tl_emb_enqueue(eng, 0, &short_dense, 1, NULL), TL_EINVAL, "2 ids, got 1");
    int64_t bad_splits[3] = {0, 2, 1};
    tl_emb_input ragged = {.kind = TL_EMB_INPUT_RAGGED, .ids = ids, .n = 2, .row_splits = bad_splits};
    expect(tl_emb_enqueue(eng, 0, &ragged, 1, NULL), TL_EINVAL, "row_splits must start at 0 and end at the 2 ids");
    int64_t coo[4] = {0, 0, 2, 0};
    tl_emb_input badcoo = {.kind = TL_EMB_INPUT_COO, .ids = ids, .n = 2, .indices = coo};
    expect(tl_emb_enqueue(eng, 0, &badcoo, 1, NULL), TL_EINVAL, "COO index 1 is (2, 0)");

    float out[6], g[6] = {0};
    float *outs[1] = {out};
    const float *gs[1] = {g};
    tl_emb_dedup dd, old;
    cr_assert_eq(tl_emb_enqueue(eng, 0, &dense, 1, NULL), TL_OK);
    cr_assert_eq(tl_emb_recv_dedup(eng, 0, &dd), TL_OK);
    expect(tl_emb_send_gradients(eng, 0, &dd, gs, 1, NULL, 0), TL_ERUNTIME, "before receiving its activations");
    cr_assert_eq(tl_emb_recv_activations(eng, 0, &dd, outs, 1), TL_OK);
    expect(tl_emb_recv_activations(eng, 0, &dd, outs, 1), TL_ERUNTIME, "already received");
    expect(tl_emb_send_gradients(eng, 0, &dd, gs, 2, NULL, 0), TL_EINVAL, "expected 1 gradients");
    /* the next step cannot be received before this one is sent */
    cr_assert_eq(tl_emb_enqueue(eng, 0, &dense, 1, NULL), TL_OK);
    tl_emb_dedup next;
    expect(tl_emb_recv_dedup(eng, 0, &next), TL_ERUNTIME, "has not sent the gradients of step 0");
    cr_assert_eq(tl_emb_send_gradients(eng, 0, &dd, gs, 1, NULL, 0), TL_OK, "%s", tl_last_error());
    expect(tl_emb_send_gradients(eng, 0, &dd, gs, 1, NULL, 0), TL_ERUNTIME, "stale");
    old = dd;
    cr_assert_eq(tl_emb_recv_dedup(eng, 0, &next), TL_OK);
    expect(tl_emb_recv_activations(eng, 0, &old, outs, 1), TL_ERUNTIME, "stale or foreign dedup data");
    tl_emb_engine_destroy(eng);

    /* INFERENCE: no gradients */
    eng = small_engine(TL_EMB_BOUNDS_FATAL, TL_EMB_MODE_INFERENCE, 0);
    for (int s = 0; s < 6; s++) { /* more steps than the ring: inference steps are released */
        cr_assert_eq(tl_emb_enqueue(eng, 0, &dense, 1, NULL), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_emb_recv_dedup(eng, 0, &dd), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_emb_recv_activations(eng, 0, &dd, outs, 1), TL_OK, "%s", tl_last_error());
        NEAR(out[0], 1);
        NEAR(out[3], 2);
    }
    expect(tl_emb_send_gradients(eng, 0, &dd, gs, 1, NULL, 0), TL_ERUNTIME,
           "Only in training mode gradients need to be sent");
    tl_emb_engine_destroy(eng);

    /* BACKWARD_PASS_ONLY: no activations, the send applies */
    eng = small_engine(TL_EMB_BOUNDS_FATAL, TL_EMB_MODE_TRAINING, 0);
    cr_assert_eq(tl_emb_enqueue(eng, 0, &dense, 1, "backward_pass_only"), TL_OK);
    cr_assert_eq(tl_emb_recv_dedup(eng, 0, &dd), TL_OK);
    expect(tl_emb_recv_activations(eng, 0, &dd, outs, 1), TL_ERUNTIME, "backward pass only");
    float ones[6] = {1, 1, 1, 1, 1, 1};
    const float *gones[1] = {ones};
    cr_assert_eq(tl_emb_send_gradients(eng, 0, &dd, gones, 1, NULL, 0), TL_OK, "%s", tl_last_error());
    float rows[15];
    get_rows(eng, 0, rows, 5, 0);
    NEAR(rows[3], 1 - 0.01); /* SGD 0.01 on row 1 */
    NEAR(rows[6], 2 - 0.01);
    NEAR(rows[0], 0);
    tl_emb_engine_destroy(eng);
}

Test(embedding, sequence_features)
{
    /* S = 2: element j of row b goes to (b, j); beyond S is truncated; missing positions are zero */
    tl_emb_engine *eng = small_engine(TL_EMB_BOUNDS_FATAL, TL_EMB_MODE_TRAINING, 2);
    int64_t ids[4] = {1, 2, 3, 4}, splits[3] = {0, 3, 4};
    tl_emb_input in = {.kind = TL_EMB_INPUT_RAGGED, .ids = ids, .n = 4, .row_splits = splits};
    float out[12];
    float *outs[1] = {out};
    step1(eng, 0, &in, 1, outs, NULL, NULL, 0);
    static const float want[4] = {1, 2, 4, 0}; /* (0,0) id 1, (0,1) id 2, id 3 truncated, (1,0) id 4, (1,1) empty */
    for (int p = 0; p < 4; p++)
        for (int d = 0; d < 3; d++)
            NEAR(out[p * 3 + d], want[p]);
    tl_emb_engine_destroy(eng);
}

Test(embedding, load_retrieve_errors)
{
    tl_emb_engine *eng = small_engine(TL_EMB_BOUNDS_FATAL, TL_EMB_MODE_TRAINING, 0);
    float buf[15];
    float *st[1] = {buf};
    expect(tl_emb_retrieve(eng, 0, "t", 1, 0, st, 1, 5), TL_EINVAL,
           "exactly one of table_id or table_name must be non-default");
    expect(tl_emb_retrieve(eng, -1, NULL, 1, 0, st, 1, 5), TL_EINVAL,
           "exactly one of table_id or table_name must be non-default");
    expect(tl_emb_retrieve(eng, -1, "t", 0, 0, st, 1, 5), TL_EINVAL,
           "The number of shards for the embedding layer must be > 0. Currently set to: 0");
    expect(tl_emb_retrieve(eng, -1, "t", 2, 2, st, 1, 3), TL_EINVAL, "The value of shard_id must be >= 0 and < 2");
    expect(tl_emb_retrieve(eng, -1, "t", 2, 1, st, 1, 3), TL_EINVAL, "has 2 rows, not 3");
    expect(tl_emb_retrieve(eng, -1, "nope", 1, 0, st, 1, 5), TL_ENOTFOUND, "no embedding table named \"nope\"");
    /* host shards of 2 under DIV: shard 1 holds ids 3, 4 */
    cr_assert_eq(tl_emb_retrieve(eng, -1, "t", 2, 1, st, 1, 2), TL_OK, "%s", tl_last_error());
    NEAR(buf[0], 3);
    NEAR(buf[3], 4);
    tl_emb_engine_destroy(eng);
}

/* ---- dynamic learning rates and hyperparameters ------------------------------ */

/* Two tables on tags 0 and 1 (SGD), a third with a constant rate, and an
 * F2A table whose step counter is tag 2: each reads its own value of the
 * send's list; a short list is an error naming the tag. */
Test(embedding, dynamic_learning_rate_tags)
{
    tl_emb_optimizer o[4];
    for (int i = 0; i < 3; i++)
        tl_emb_optimizer_default(TL_EMB_SGD, &o[i]);
    o[0].lr_tag = 0;
    o[1].lr_tag = 1;
    o[2].learning_rate = 0.5f;
    tl_emb_optimizer_default(TL_EMB_FREQUENCY_AWARE_ADAGRAD, &o[3]);
    o[3].lr_tag = 0;
    o[3].step_counter_tag = 2;
    o[3].initial_accumulator_value = 0.1f;
    tl_emb_table_config t[4];
    tl_emb_feature_config f[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (tl_emb_table_config){.vocabulary_size = 1, .dim = 2, .optimizer = &o[i],
                                     .initializer = {.kind = TL_EMB_INIT_CONSTANT, .value = 1},
                                     .combiner = TL_EMB_COMBINER_SUM};
        f[i] = (tl_emb_feature_config){.table = i};
    }
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = t;
    c.num_tables = 4;
    c.features = f;
    c.num_features = 4;
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
    int64_t id[1] = {0};
    tl_emb_input in[4];
    for (int i = 0; i < 4; i++)
        in[i] = (tl_emb_input){.kind = TL_EMB_INPUT_DENSE, .ids = id, .n = 1};
    float g[2] = {0.5f, -1.0f}, out[4][2];
    float *outs[4] = {out[0], out[1], out[2], out[3]};
    const float *gs[4] = {g, g, g, g};
    tl_emb_dedup dd;
    cr_assert_eq(tl_emb_enqueue(eng, 0, in, 4, NULL), TL_OK);
    cr_assert_eq(tl_emb_recv_dedup(eng, 0, &dd), TL_OK);
    cr_assert_eq(tl_emb_recv_activations(eng, 0, &dd, outs, 4), TL_OK);
    float lrs[3] = {0.1f, 0.2f, 4.0f};
    expect(tl_emb_send_gradients(eng, 0, &dd, gs, 4, lrs, 2), TL_EINVAL, "table \"table_3\"");
    cr_assert_eq(tl_emb_send_gradients(eng, 0, &dd, gs, 4, lrs, 3), TL_OK, "%s", tl_last_error());
    float w[2];
    get_rows(eng, 0, w, 1, 0);
    NEAR(w[0], 1 - 0.1 * 0.5);
    NEAR(w[1], 1 + 0.1);
    get_rows(eng, 1, w, 1, 0);
    NEAR(w[0], 1 - 0.2 * 0.5);
    get_rows(eng, 2, w, 1, 0);
    NEAR(w[0], 1 - 0.5 * 0.5);
    /* F2A (T8's formula): counter 1, a = 0.1 + g^2, scale min((4/1)^0.5, 10) = 2, lr 0.1 */
    float st2[3][2];
    float *sp[3] = {st2[0], st2[1], st2[2]};
    cr_assert_eq(tl_emb_retrieve(eng, 3, NULL, 1, 0, sp, 3, 1), TL_OK, "%s", tl_last_error());
    NEAR(st2[1][0], 0.35);
    NEAR(st2[2][0], 1);
    NEAR(st2[0][0], 1 - 0.1 * 2 * 0.5 / sqrt(0.35));
    NEAR(st2[0][1], 1 + 0.1 * 2 * 1.0 / sqrt(1.1));
    tl_emb_engine_destroy(eng);
}

Test(embedding, too_many_bags_is_an_error)
{
    tl_emb_table_config t = {.name = "t", .vocabulary_size = 10, .dim = 1};
    tl_emb_feature_config f = {.name = "seq", .table = 0, .max_sequence_length = 4096};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = &t;
    c.num_tables = 1;
    c.features = &f;
    c.num_features = 1;
    c.batch_size_per_tensor_core = 1 << 20;
    tl_emb_engine *eng;
    expect(tl_emb_engine_create(&c, &eng), TL_EINVAL,
           "feature 0 (\"seq\"): batch_size_per_tensor_core x max_sequence_length = 4294967296 bags");
}

/* An evaluation batch differs from the training one (TensorFlow builds a
 * TPUEmbedding per mode over the same tables): a step of its own batch has
 * outputs of that batch, and its gradients update the shared rows. */
Test(embedding, step_batch_differs_from_config)
{
    tl_emb_engine *eng = small_engine(TL_EMB_BOUNDS_FATAL, TL_EMB_MODE_TRAINING, 0); /* B = 2, SGD 0.01 */
    const tl_emb_config *c = tl_emb_engine_config(eng);
    cr_assert_eq(c->batch_size_per_tensor_core, 2);
    cr_assert_str_eq(c->tables[0].name, "t");
    cr_assert_str_eq(c->features[0].name, "clicks");
    cr_assert_not_null(c->tables[0].optimizer);
    cr_assert_eq(tl_emb_num_dynamic(eng), 0);
    int64_t ids[5] = {4, 1, 1, 0, 3};
    tl_emb_input in = {.kind = TL_EMB_INPUT_DENSE, .ids = ids, .n = 5};
    expect(tl_emb_enqueue(eng, 0, &in, 1, NULL), TL_EINVAL, "a dense input has one id per sample: 2 ids, got 5");
    expect(tl_emb_enqueue_batch(eng, 0, &in, 1, NULL, -1), TL_EINVAL, "the step's batch must be in [1,");
    cr_assert_eq(tl_emb_enqueue_batch(eng, 0, &in, 1, "inference", 5), TL_OK, "%s", tl_last_error());
    tl_emb_dedup dd;
    float out[15], grad[15];
    float *outs[1] = {out};
    const float *grads[1] = {grad};
    cr_assert_eq(tl_emb_recv_dedup(eng, 0, &dd), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_recv_activations(eng, 0, &dd, outs, 1), TL_OK, "%s", tl_last_error());
    for (int b = 0; b < 5; b++)
        for (int d = 0; d < 3; d++)
            NEAR(out[b * 3 + d], (double)ids[b]); /* row id init */
    /* A training step of 3 samples: row 1 gets two gradients of 1, summed. */
    cr_assert_eq(tl_emb_enqueue_batch(eng, 0, &in, 1, NULL, 3), TL_EINVAL);
    in.n = 3;
    cr_assert_eq(tl_emb_enqueue_batch(eng, 0, &in, 1, NULL, 3), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_recv_dedup(eng, 0, &dd), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_recv_activations(eng, 0, &dd, outs, 1), TL_OK, "%s", tl_last_error());
    for (int k = 0; k < 9; k++)
        grad[k] = 1.0f;
    cr_assert_eq(tl_emb_send_gradients(eng, 0, &dd, grads, 1, NULL, 0), TL_OK, "%s", tl_last_error());
    float rows[15];
    get_rows(eng, 0, rows, 5, 0);
    NEAR(rows[1 * 3], 1 - 0.01 * 2);
    NEAR(rows[4 * 3], 4 - 0.01);
    NEAR(rows[0], 0);
    /* back to the configured batch */
    in.n = 2;
    cr_assert_eq(tl_emb_enqueue(eng, 0, &in, 1, NULL), TL_OK, "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
}

/* FeatureConfig.output_shape: each sample has Π output_shape bags, the
 * output is [B, output_shape..., D], and a COO or ragged input's rows are
 * the bags in row-major order. */
Test(embedding, output_shape_bags)
{
    tl_emb_table_config t = {.name = "t", .vocabulary_size = 9, .dim = 2,
                             .initializer = {.kind = TL_EMB_INIT_ROW_ID}, .combiner = TL_EMB_COMBINER_SUM};
    tl_emb_feature_config f = {.name = "pairs", .table = 0, .num_output_dims = 2, .output_shape = {1, 2}};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = &t;
    c.num_tables = 1;
    c.features = &f;
    c.num_features = 1;
    c.batch_size_per_tensor_core = 2;
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
    float out[8], g[8];
    float *outs[1] = {out};
    const float *gs[1] = {g};
    /* dense: 4 bags of one id */
    int64_t ids[4] = {3, 5, 5, 8};
    tl_emb_input dense = {.kind = TL_EMB_INPUT_DENSE, .ids = ids, .n = 2};
    expect(tl_emb_enqueue(eng, 0, &dense, 1, NULL), TL_EINVAL, "a dense input has one id per sample: 4 ids, got 2");
    dense.n = 4;
    for (int k = 0; k < 8; k++)
        g[k] = 1.0f;
    step1(eng, 0, &dense, 1, outs, gs, NULL, 0);
    for (int k = 0; k < 4; k++)
        NEAR(out[2 * k], (double)ids[k]);
    float rows[18];
    get_rows(eng, 0, rows, 9, 0);
    NEAR(rows[5 * 2], 5 - 0.01 * 2); /* two bags of id 5: summed */
    /* ragged: rows are the 4 bags; bag 2 is empty */
    int64_t rids[5] = {1, 2, 4, 6, 7}, splits[5] = {0, 2, 3, 3, 5};
    tl_emb_input ragged = {.kind = TL_EMB_INPUT_RAGGED, .ids = rids, .n = 5, .row_splits = splits};
    step1(eng, 0, &ragged, 1, outs, gs, NULL, 0);
    NEAR(out[0], 1 + 2);
    NEAR(out[2], 4);
    NEAR(out[4], 0);
    NEAR(out[6], 6 + 7);
    /* COO: (bag, position); a bag beyond 4 is an error */
    int64_t cids[2] = {0, 3}, idx[4] = {1, 0, 4, 0};
    tl_emb_input coo = {.kind = TL_EMB_INPUT_COO, .ids = cids, .n = 2, .indices = idx};
    expect(tl_emb_enqueue(eng, 0, &coo, 1, NULL), TL_EINVAL, "the sample must be in [0, 4)");
    tl_emb_engine_destroy(eng);
    /* not with a sequence; dims >= 1 */
    f.max_sequence_length = 3;
    expect(tl_emb_engine_create(&c, &eng), TL_EINVAL, "output_shape and max_sequence_length 3 are both set");
    f.max_sequence_length = 0;
    f.output_shape[1] = 0;
    expect(tl_emb_engine_create(&c, &eng), TL_EINVAL, "output_shape[2] must be in [1,");
}

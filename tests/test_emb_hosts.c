/*
 * test_emb_hosts.c — embedding rows owned across hosts (tl_emb_config
 * num_hosts / host; tl_emb_export_rows / _import_rows), as the engines of
 * several processes run them, here side by side in one process.
 *
 * What a user relies on: each host's engine holds only its host shard of
 * every table (DIV or MOD over hosts, tpu_embedding.md §8.1), yet the
 * activations each core receives and the tables after training are the
 * bits of one engine holding everything — for lazy, non-lazy and
 * non-accumulating tables, a table smaller than the hosts, and sequence
 * features — and every misuse is an error naming what was wrong.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/embedding.h"

enum { C = 4, B = 5, STEPS = 3, T = 3, F = 3, SEQ = 2 };

/* Three tables: Adagrad (lazy), non-lazy Adam, and SGD over 3 rows (fewer
 * than 4 hosts: some hold none of it). Feature 2 is a sequence. */
typedef struct setup {
    tl_emb_optimizer opt[T];
    tl_emb_table_config tables[T];
    tl_emb_feature_config features[F];
    tl_emb_config cfg;
} setup;

static void make_setup(setup *s, int hosts, int host, int shards, tl_emb_sharding strategy)
{
    memset(s, 0, sizeof *s);
    tl_emb_optimizer_default(TL_EMB_ADAGRAD, &s->opt[0]);
    s->opt[0].learning_rate = 0.1f;
    tl_emb_optimizer_default(TL_EMB_ADAM, &s->opt[1]);
    s->opt[1].learning_rate = 0.05f;
    s->opt[1].use_non_lazy = true;
    s->opt[1].gradient_accumulation_status = TL_EMB_ACCUM_ENABLED;
    tl_emb_optimizer_default(TL_EMB_SGD, &s->opt[2]);
    s->opt[2].learning_rate = 0.5f;
    s->opt[2].gradient_accumulation_status = TL_EMB_ACCUM_DISABLED;
    static const int64_t vocab[T] = {37, 23, 3};
    static const int dims[T] = {4, 3, 2};
    static const char *const names[T] = {"a", "adam", "tiny"};
    for (int t = 0; t < T; t++)
        s->tables[t] = (tl_emb_table_config){.name = names[t], .vocabulary_size = vocab[t], .dim = dims[t],
                                             .optimizer = &s->opt[t], .combiner = TL_EMB_COMBINER_SUM,
                                             .initializer = {.kind = TL_EMB_INIT_UNIFORM, .minval = -1, .maxval = 1}};
    s->features[0] = (tl_emb_feature_config){.name = "fa", .table = 0};
    s->features[1] = (tl_emb_feature_config){.name = "fadam", .table = 1};
    s->features[2] = (tl_emb_feature_config){.name = "ftiny", .table = 2, .max_sequence_length = SEQ};
    tl_emb_config_default(&s->cfg);
    s->cfg.tables = s->tables;
    s->cfg.num_tables = T;
    s->cfg.features = s->features;
    s->cfg.num_features = F;
    s->cfg.num_tensor_cores = C;
    s->cfg.batch_size_per_tensor_core = B;
    s->cfg.num_shards = shards;
    s->cfg.sharding_strategy = strategy;
    s->cfg.num_hosts = hosts;
    s->cfg.host = host;
    s->cfg.seed = 7;
}

static tl_emb_engine *engine(int hosts, int host, int shards, tl_emb_sharding strategy)
{
    setup s;
    make_setup(&s, hosts, host, shards, strategy);
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&s.cfg, &eng), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_set_owner_apply(eng, true), TL_OK);
    return eng;
}

/* Core c's inputs of a step: ids with repeats within and across cores. */
typedef struct step_in {
    int64_t a[B], adam[B], tiny[B * SEQ], tiny_idx[B * SEQ][2];
    int64_t n_tiny;
    tl_emb_input in[F];
    float g[F][B * SEQ * 4];
    const float *gp[F];
} step_in;

static void make_input(step_in *x, int step, int core)
{
    memset(x, 0, sizeof *x);
    for (int b = 0; b < B; b++) {
        x->a[b] = (step * 7 + core * 5 + b * b) % 37;
        x->adam[b] = (step * 3 + core + 2 * b) % 23;
        for (int j = 0; j < SEQ; j++)
            if ((b + j + core) % 3 != 0) {
                x->tiny[x->n_tiny] = (b + step + j) % 3;
                x->tiny_idx[x->n_tiny][0] = b;
                x->tiny_idx[x->n_tiny][1] = j;
                x->n_tiny++;
            }
    }
    x->in[0] = (tl_emb_input){.kind = TL_EMB_INPUT_DENSE, .ids = x->a, .n = B};
    x->in[1] = (tl_emb_input){.kind = TL_EMB_INPUT_DENSE, .ids = x->adam, .n = B};
    x->in[2] = (tl_emb_input){.kind = TL_EMB_INPUT_COO, .ids = x->tiny, .n = x->n_tiny, .indices = &x->tiny_idx[0][0]};
    for (int f = 0; f < F; f++) {
        for (int k = 0; k < B * SEQ * 4; k++)
            x->g[f][k] = (float)((k * 13 + f * 7 + core * 3 + step) % 11) / 8.0f - 0.6f;
        x->gp[f] = x->g[f];
    }
}

/* Activations of every core and step of one engine holding everything. */
typedef struct result {
    float act[STEPS][C][F][B * SEQ * 4];
} result;

/* One engine holding everything, trained; its activations into r. The
 * strategy only says what retrieve's shards are. */
static tl_emb_engine *reference(result *r, tl_emb_sharding strategy)
{
    tl_emb_engine *eng = engine(1, 0, 1, strategy);
    for (int step = 0; step < STEPS; step++) {
        step_in x[C];
        tl_emb_dedup dd[C];
        for (int c = 0; c < C; c++) {
            make_input(&x[c], step, c);
            cr_assert_eq(tl_emb_enqueue(eng, c, x[c].in, F, "training"), TL_OK, "%s", tl_last_error());
        }
        for (int c = 0; c < C; c++) {
            float *outs[F] = {r->act[step][c][0], r->act[step][c][1], r->act[step][c][2]};
            cr_assert_eq(tl_emb_recv_dedup(eng, c, &dd[c]), TL_OK);
            cr_assert_eq(tl_emb_recv_activations(eng, c, &dd[c], outs, F), TL_OK, "%s", tl_last_error());
        }
        for (int c = 0; c < C; c++)
            cr_assert_eq(tl_emb_send_gradients(eng, c, &dd[c], x[c].gp, F, NULL, 0), TL_OK, "%s", tl_last_error());
        for (int c = 0; c < C; c++)
            cr_assert_eq(tl_emb_apply_owned(eng, c), TL_OK, "%s", tl_last_error());
    }
    return eng;
}

/* Table t's host shard h of H (parameters and slots) from eng. */
static float *shard_state(tl_emb_engine *eng, int t, int H, int h, int64_t *floats)
{
    const tl_emb_config *c = tl_emb_engine_config(eng);
    int64_t rows = tl_emb_shard_rows(c->tables[t].vocabulary_size, H, h), dim = c->tables[t].dim;
    int n = 1 + tl_emb_num_slots(c->tables[t].optimizer);
    float *buf = calloc((size_t)(n * rows * dim + 1), sizeof *buf);
    float *state[8];
    for (int k = 0; k < n; k++)
        state[k] = buf + k * rows * dim;
    *floats = 0;
    if (rows == 0) /* a table smaller than the hosts */
        return buf;
    cr_assert_eq(tl_emb_retrieve(eng, t, NULL, H, h, state, n, rows), TL_OK, "%s", tl_last_error());
    *floats = n * rows * dim;
    return buf;
}

/* H engines, core c on host c / (C / H): every engine plays every core;
 * each core's host imports the rows the others hold before its
 * activations, and its gradients reach the others as per-row sums
 * (row_grads) or as the activation gradients themselves. */
static void over_hosts(int H, int shards_per_host, tl_emb_sharding strategy, bool row_grads, const result *want)
{
    static result again;
    tl_emb_engine *ref = reference(&again, strategy);
    tl_emb_engine *eng[C];
    for (int h = 0; h < H; h++)
        eng[h] = engine(H, h, H * shards_per_host, strategy);
    int64_t held = 0;
    for (int h = 0; h < H; h++)
        held += tl_emb_table_bytes(eng[h]);
    cr_assert_eq(held, tl_emb_table_bytes(ref), "the hosts hold every row once");
    for (int step = 0; step < STEPS; step++) {
        step_in x[C];
        tl_emb_dedup dd[C][C]; /* [host][core] */
        for (int c = 0; c < C; c++)
            make_input(&x[c], step, c);
        for (int h = 0; h < H; h++)
            for (int c = 0; c < C; c++) {
                cr_assert_eq(tl_emb_enqueue(eng[h], c, x[c].in, F, "training"), TL_OK, "%s", tl_last_error());
                cr_assert_eq(tl_emb_recv_dedup(eng[h], c, &dd[h][c]), TL_OK);
            }
        for (int c = 0; c < C; c++) {
            int mine = c / (C / H);
            for (int h = 0; h < H; h++) {
                if (h == mine)
                    continue;
                int64_t n, m;
                cr_assert_eq(tl_emb_rows_floats(eng[h], &dd[h][c], h, &n), TL_OK, "%s", tl_last_error());
                cr_assert_eq(tl_emb_rows_floats(eng[mine], &dd[mine][c], h, &m), TL_OK);
                cr_assert_eq(n, m, "host %d exports what core %d's host expects", h, c);
                float *buf = malloc((size_t)(n + 1) * sizeof *buf);
                cr_assert_eq(tl_emb_export_rows(eng[h], &dd[h][c], buf, n), TL_OK, "%s", tl_last_error());
                cr_assert_eq(tl_emb_import_rows(eng[mine], &dd[mine][c], h, buf, n), TL_OK, "%s", tl_last_error());
                free(buf);
            }
            for (int h = 0; h < H; h++) {
                float out[F][B * SEQ * 4] = {{0}}; /* past each feature's floats: zeros, as want's */
                float *outs[F] = {out[0], out[1], out[2]};
                if (h != mine) {
                    cr_assert_eq(tl_emb_recv_activations(eng[h], c, &dd[h][c], NULL, 0), TL_OK);
                    continue;
                }
                cr_assert_eq(tl_emb_recv_activations(eng[h], c, &dd[h][c], outs, F), TL_OK, "%s", tl_last_error());
                for (int f = 0; f < F; f++)
                    cr_assert(memcmp(out[f], want->act[step][c][f], sizeof out[f]) == 0,
                              "%d hosts: core %d step %d feature %d: other activations than one engine", H, c, step,
                              f);
            }
        }
        for (int c = 0; c < C; c++) {
            int mine = c / (C / H);
            cr_assert_eq(tl_emb_send_gradients(eng[mine], c, &dd[mine][c], x[c].gp, F, NULL, 0), TL_OK);
            for (int h = 0; h < H; h++) {
                if (h == mine)
                    continue;
                if (!row_grads) { /* every engine sums the core's activation gradients itself */
                    cr_assert_eq(tl_emb_send_gradients(eng[h], c, &dd[h][c], x[c].gp, F, NULL, 0), TL_OK);
                    continue;
                }
                int64_t n;
                cr_assert_eq(tl_emb_rows_floats(eng[mine], &dd[mine][c], h, &n), TL_OK);
                float *buf = malloc((size_t)(n + 1) * sizeof *buf);
                cr_assert_eq(tl_emb_export_gradients(eng[mine], &dd[mine][c], h, buf, n), TL_OK, "%s",
                             tl_last_error());
                cr_assert_eq(tl_emb_send_row_gradients(eng[h], c, &dd[h][c], buf, n, NULL, 0), TL_OK, "%s",
                             tl_last_error());
                free(buf);
            }
        }
        for (int h = 0; h < H; h++)
            for (int c = 0; c < C; c++)
                cr_assert_eq(tl_emb_apply_owned(eng[h], c), TL_OK, "%s", tl_last_error());
    }
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            int64_t n1, n2;
            float *mine = shard_state(eng[h], t, H, h, &n1), *all = shard_state(ref, t, H, h, &n2);
            cr_assert_eq(n1, n2);
            cr_assert(memcmp(mine, all, (size_t)n1 * sizeof *mine) == 0,
                      "%d hosts (%s): table %d's host shard %d differs from one engine's", H,
                      strategy == TL_EMB_MOD ? "MOD" : "DIV", t, h);
            free(mine);
            free(all);
        }
    for (int h = 0; h < H; h++)
        tl_emb_engine_destroy(eng[h]);
    tl_emb_engine_destroy(ref);
}

Test(emb_hosts, hosts_holding_their_shards_train_the_bits_of_one_engine)
{
    static result want;
    tl_emb_engine_destroy(reference(&want, TL_EMB_DIV_DEFAULT));
    over_hosts(2, 1, TL_EMB_DIV_DEFAULT, true, &want);
    over_hosts(2, 2, TL_EMB_MOD, true, &want);
    over_hosts(4, 1, TL_EMB_DIV_DEFAULT, true, &want);
    over_hosts(4, 1, TL_EMB_MOD, true, &want);
    over_hosts(2, 1, TL_EMB_MOD, false, &want);
}

Test(emb_hosts, a_host_holds_only_its_rows)
{
    setup s;
    make_setup(&s, 2, 1, 2, TL_EMB_DIV_DEFAULT);
    int64_t bytes, per_id;
    cr_assert_eq(tl_emb_config_bytes(&s.cfg, &bytes, &per_id), TL_OK);
    /* host 1 of 2 by DIV: 18 of 37 rows x 4 x (1 + 1 slot); 11 of 23 x 3 x 3
     * (Adam); 1 of 3 x 2 (SGD) */
    cr_assert_eq(bytes, (18 * 4 * 2 + 11 * 3 * 3 + 1 * 2) * 4, "%lld", (long long)bytes);
    tl_emb_engine *eng = engine(2, 1, 2, TL_EMB_DIV_DEFAULT);
    cr_assert_eq(tl_emb_table_bytes(eng), bytes);
    /* Its own shard retrieves; the whole table or host 0's does not. */
    int64_t n;
    free(shard_state(eng, 0, 2, 1, &n));
    float buf[37 * 4 * 2], *state[2] = {buf, buf + 37 * 4};
    cr_assert_eq(tl_emb_retrieve(eng, 0, NULL, 1, 0, state, 2, 37), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "this engine holds host shard 1 of 2") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_emb_load(eng, 0, NULL, 2, 0, (const float *const *)state, 2, 19), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "is host 0's") != NULL, "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
    /* 4 hosts: host 3 holds none of the 3-row table, and says so with 0 rows. */
    eng = engine(4, 3, 4, TL_EMB_DIV_DEFAULT);
    float *none[2] = {buf, buf};
    cr_assert_eq(tl_emb_retrieve(eng, 2, NULL, 4, 3, none, 1, 0), TL_OK, "%s", tl_last_error());
    tl_emb_engine_destroy(eng);
}

Test(emb_hosts, configurations_of_hosts_are_checked)
{
    setup s;
    tl_emb_engine *eng = NULL;
    make_setup(&s, 2, 2, 2, TL_EMB_DIV_DEFAULT);
    cr_assert_eq(tl_emb_engine_create(&s.cfg, &eng), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "host must be in [0, num_hosts 2) (got 2)") != NULL, "%s", tl_last_error());
    make_setup(&s, 2, 0, 3, TL_EMB_DIV_DEFAULT);
    cr_assert_eq(tl_emb_engine_create(&s.cfg, &eng), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "num_shards 3 is not a multiple of num_hosts 2") != NULL, "%s",
              tl_last_error());
    make_setup(&s, -1, 0, 1, TL_EMB_DIV_DEFAULT);
    cr_assert_eq(tl_emb_engine_create(&s.cfg, &eng), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "num_hosts must be >= 1 (got -1)") != NULL, "%s", tl_last_error());
    cr_assert_null(eng);
    /* One host: a table smaller than the shards is TensorFlow's error still. */
    make_setup(&s, 1, 0, 4, TL_EMB_DIV_DEFAULT);
    cr_assert_eq(tl_emb_engine_create(&s.cfg, &eng), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "All embedding shards must be non-empty") != NULL, "%s", tl_last_error());
}

Test(emb_hosts, rows_out_of_order_are_errors_not_garbage)
{
    tl_emb_engine *h0 = engine(2, 0, 2, TL_EMB_MOD), *h1 = engine(2, 1, 2, TL_EMB_MOD);
    step_in x;
    make_input(&x, 0, 0);
    tl_emb_dedup d0, d1;
    float out[F][B * SEQ * 4];
    float *outs[F] = {out[0], out[1], out[2]};
    cr_assert_eq(tl_emb_enqueue(h0, 0, x.in, F, "training"), TL_OK);
    cr_assert_eq(tl_emb_enqueue(h1, 0, x.in, F, "training"), TL_OK);
    cr_assert_eq(tl_emb_recv_dedup(h0, 0, &d0), TL_OK);
    cr_assert_eq(tl_emb_recv_dedup(h1, 0, &d1), TL_OK);
    /* Activations before host 1's rows came. */
    cr_assert_eq(tl_emb_recv_activations(h0, 0, &d0, outs, F), TL_ERUNTIME);
    cr_assert(strstr(tl_last_error(), "were not imported") != NULL, "%s", tl_last_error());
    int64_t n;
    cr_assert_eq(tl_emb_rows_floats(h1, &d1, 1, &n), TL_OK);
    cr_assert_gt(n, 0);
    float *buf = malloc((size_t)n * sizeof *buf);
    cr_assert_eq(tl_emb_export_rows(h1, &d1, buf, n - 1), TL_EINVAL);
    cr_assert_eq(tl_emb_export_rows(h1, &d1, buf, n), TL_OK);
    cr_assert_eq(tl_emb_import_rows(h0, &d0, 1, buf, n + 1), TL_EINVAL);
    cr_assert_eq(tl_emb_import_rows(h0, &d0, 0, buf, 0), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "this engine's own") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_emb_import_rows(h0, &d0, 1, buf, n), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_import_rows(h0, &d0, 1, buf, n), TL_ERUNTIME);
    cr_assert(strstr(tl_last_error(), "already has host 1's rows") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_emb_rows_floats(h0, &d0, 2, &n), TL_EINVAL);
    cr_assert_eq(tl_emb_recv_activations(h0, 0, &d0, outs, F), TL_OK, "%s", tl_last_error());
    /* Gradients: exported after the send only, in the holder's count. */
    cr_assert_eq(tl_emb_recv_activations(h1, 0, &d1, NULL, 0), TL_OK);
    cr_assert_eq(tl_emb_export_gradients(h0, &d0, 1, buf, n), TL_ERUNTIME);
    cr_assert(strstr(tl_last_error(), "has not sent step 0's gradients") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_emb_send_gradients(h0, 0, &d0, x.gp, F, NULL, 0), TL_OK);
    cr_assert_eq(tl_emb_export_gradients(h0, &d0, 1, buf, n), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_send_row_gradients(h1, 0, &d1, buf, n - 1, NULL, 0), TL_EINVAL);
    cr_assert_eq(tl_emb_send_row_gradients(h1, 0, &d1, buf, n, NULL, 0), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_send_row_gradients(h1, 0, &d1, buf, n, NULL, 0), TL_ERUNTIME);
    cr_assert(strstr(tl_last_error(), "already sent") != NULL, "%s", tl_last_error());
    free(buf);
    tl_emb_engine_destroy(h0);
    tl_emb_engine_destroy(h1);
}

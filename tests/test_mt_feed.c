/* The infeed's routing (src/runtime/feed.h): which example of which input_fn
 * invocation reaches which replica and core, for every deployment mode of
 * spec tpu_estimator.md §4.1 on 8 virtual devices over 1, 2 and 4 hosts
 * (vectors T36–T46 scaled to 8 devices), the input_partition_dims tiles of
 * §4.3, and prediction's padding and stop batch (§8). Each invocation's
 * source numbers its examples: example n of invocation i has id
 * i * 100000 + n, its features [id * 10 + j for j in 0..D), its W = 2
 * int64 embedding ids [id * 7 + k for k in 0..W) and label id, so every
 * delivered row says where it came from. The ids go whole to core 0 of a
 * replica, never tiled. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "runtime/feed.h"
#include "tpuloop/tpuloop.h"

#define MAX_CALLS 16
#define W 2 /* embedding ids per example */

/* One invocation's stream. */
typedef struct src {
    int index;
    int64_t next_id;    /* examples given so far */
    int64_t limit;      /* examples it has; -1: endless */
    int64_t calls;      /* get_next calls */
    int64_t cap_seen;   /* the cap (input_fn batch) of its calls */
    int64_t D;
} src;

static tl_status src_next(void *ud, int64_t step, int64_t row0, int64_t cap, const tl_feed_dest *dst, int64_t *rows)
{
    (void)step;
    (void)row0;
    src *s = ud;
    s->calls++;
    s->cap_seen = cap;
    int64_t n = cap;
    if (s->limit >= 0 && s->next_id + n > s->limit)
        n = s->limit - s->next_id > 0 ? s->limit - s->next_id : 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t id = s->index * 100000 + s->next_id + i;
        float *f = tl_feed_dest_row(dst, i, s->D);
        for (int64_t j = 0; j < s->D; j++)
            f[j] = (float)(id * 10 + j);
        if (dst->labels != NULL)
            *tl_feed_dest_label(dst, i) = (int32_t)id;
        int64_t *ids = tl_feed_dest_ids(dst, i, W);
        for (int64_t k = 0; k < W; k++)
            ids[k] = id * 7 + k;
    }
    s->next_id += n;
    *rows = n;
    return TL_OK;
}

static tl_config *cfg_of(int argc, const char **argv)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    tl_status st = tl_config_apply_args(cfg, argc, (char *const *)argv, NULL, NULL);
    cr_assert_eq(st, TL_OK, "flags: %s", tl_last_error());
    st = tl_config_resolve(cfg);
    cr_assert_eq(st, TL_OK, "resolve: %s", tl_last_error());
    return cfg;
}

#define CFG(...) cfg_of((int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), (const char *[]){__VA_ARGS__})

/* A feed of mode over cfg's topology with features (fshape), its sources. */
typedef struct rig {
    tl_config *cfg;
    tl_topology *topo;
    tl_input_plan *plan;
    tl_feed *feed;
    src srcs[MAX_CALLS];
    tl_feed_source sources[MAX_CALLS];
    int R, cores;
    int64_t b, D;
} rig;

static void rig_open(rig *g, tl_config *cfg, tl_mode mode, int frank, const int64_t *fshape,
                     const tl_tensor_partition *fpart, const tl_tensor_partition *lpart, int64_t limit)
{
    memset(g, 0, sizeof *g);
    g->cfg = cfg;
    cr_assert_eq(tl_topology_create(tl_config_get(cfg), NULL, &g->topo), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_input_plan_create(g->topo, tl_config_get(cfg), mode, &g->plan), TL_OK, "%s", tl_last_error());
    cr_assert_leq(g->plan->input_fn_calls, MAX_CALLS);
    g->R = tl_topology_num_replicas(g->topo);
    int ncpr = tl_topology_num_cores_per_replica(g->topo);
    g->cores = ncpr > 0 ? ncpr : 1;
    g->b = g->plan->model_fn_batch_size;
    g->D = 1;
    for (int d = 0; d < frank; d++)
        g->D *= fshape[d];
    tl_feed_spec spec = {.topo = g->topo,
                         .plan = g->plan,
                         .frank = frank,
                         .labels = mode != TL_MODE_PREDICT,
                         .ids = W,
                         .fpart = fpart,
                         .lpart = lpart,
                         .depth = 2,
                         .predict = mode == TL_MODE_PREDICT};
    memcpy(spec.fshape, fshape, (size_t)frank * sizeof *fshape);
    cr_assert_eq(tl_feed_create(&spec, &g->feed), TL_OK, "%s", tl_last_error());
    for (int i = 0; i < g->plan->input_fn_calls; i++) {
        g->srcs[i] = (src){.index = i, .limit = limit, .D = g->D};
        g->sources[i] = (tl_feed_source){src_next, &g->srcs[i], false};
    }
}

static void rig_close(rig *g)
{
    cr_assert_eq(tl_feed_stop(g->feed), TL_OK, "%s", tl_last_error());
    tl_feed_destroy(g->feed);
    tl_input_plan_destroy(g->plan);
    tl_topology_destroy(g->topo);
    tl_config_destroy(g->cfg);
}

/* Runs steps [0, steps) and checks every (replica, core 0) row against
 * expect(r, s, i) — the id it must hold — with whole features and labels. */
typedef int64_t (*expect_fn)(const rig *g, int r, int64_t s, int64_t i);

/* Core 0 of the replica holds row i's W ids of example id; another core none. */
static void check_ids(const tl_feed_batch *b, int r, int c, int64_t s, int64_t i, int64_t id)
{
    cr_assert_eq(b->has_ids, c == 0, "replica %d core %d", r, c);
    if (c != 0) {
        cr_assert_null(b->ids, "replica %d core %d", r, c);
        return;
    }
    for (int64_t k = 0; k < W; k++)
        cr_assert_eq(b->ids[i * W + k], id * 7 + k, "replica %d step %lld row %lld id %lld: %lld, want %lld", r,
                     (long long)s, (long long)i, (long long)k, (long long)b->ids[i * W + k], (long long)(id * 7 + k));
}

static void run_and_check(rig *g, int64_t steps, expect_fn expect)
{
    cr_assert_eq(tl_feed_start(g->feed, g->sources, 0, steps, INT64_MAX), TL_OK, "%s", tl_last_error());
    for (int64_t s = 0; s < steps; s++)
        for (int r = 0; r < g->R; r++)
            for (int c = 0; c < g->cores; c++) {
                tl_feed_batch *b;
                cr_assert_eq(tl_feed_pop(g->feed, r, c, s, NULL, &b, NULL), TL_OK, "%s", tl_last_error());
                cr_assert_eq(b->step, s);
                cr_assert_eq(b->rows, g->b);
                cr_assert_eq(b->real_rows, g->b);
                cr_assert(b->has_features && b->has_labels);
                for (int64_t i = 0; i < g->b; i++) {
                    int64_t id = expect(g, r, s, i);
                    cr_assert_eq(b->labels[i], (int32_t)id, "replica %d core %d step %lld row %lld: label %d, want %lld",
                                 r, c, (long long)s, (long long)i, b->labels[i], (long long)id);
                    for (int64_t j = 0; j < g->D; j++)
                        cr_assert_eq(b->features[i * g->D + j], (float)(id * 10 + j));
                    check_ids(b, r, c, s, i, id);
                }
                tl_feed_release(g->feed, r, c, b);
            }
}

/* Replica r is the j-th of the host batch of the invocation feeding it:
 * with in-order get_next PER_HOST_V1 and V2 give the same assignment. */
static int64_t per_host(const rig *g, int r, int64_t s, int64_t i)
{
    for (int c = 0; c < g->plan->input_fn_calls; c++) {
        const tl_input_call *call = &g->plan->calls[c];
        if (r >= call->first_replica && r < call->first_replica + call->num_replicas) {
            int64_t j = r - call->first_replica;
            return (int64_t)call->index * 100000 + (s * call->num_replicas + j) * g->b + i;
        }
    }
    cr_assert(false, "replica %d is fed by no invocation", r);
    return -1;
}

static int64_t broadcast(const rig *g, int r, int64_t s, int64_t i)
{
    (void)r;
    return s * g->b + i;
}

static int64_t sliced(const rig *g, int r, int64_t s, int64_t i)
{
    return (s * g->R + r) * g->b + i;
}

static const int64_t D3[] = {3};

Test(mt_feed, T36_per_host_v1_two_hosts)
{
    /* T36 on 8 devices: 2 hosts x 4, G 64 -> input_fn x2 of 32, deploy
     * (h, h, 2, 4), model_fn 8; host h's batch split in 4 contiguous chunks. */
    rig g;
    rig_open(&g, CFG("--devices=4", "--num_hosts=2", "--train_batch_size=64"), TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    cr_assert_eq(g.plan->input_fn_calls, 2);
    cr_assert_eq(g.plan->input_fn_batch_size, 32);
    cr_assert_eq(g.b, 8);
    cr_assert_eq(g.plan->calls[1].host, 1);
    cr_assert_eq(g.plan->calls[1].first_replica, 4);
    cr_assert_eq(g.plan->calls[1].num_replicas, 4);
    run_and_check(&g, 3, per_host);
    for (int c = 0; c < 2; c++) {
        cr_assert_eq(g.srcs[c].calls, 3, "one get_next per step");
        cr_assert_eq(g.srcs[c].cap_seen, 32);
    }
    rig_close(&g);
}

Test(mt_feed, T37_per_host_v2_four_hosts)
{
    /* T37: 4 hosts x 2, G 64: input_fn x4 of 8 (G / R), 2 get_next per host
     * per step, the k-th to the host's k-th replica. */
    rig g;
    rig_open(&g, CFG("--devices=2", "--num_hosts=4", "--train_batch_size=64",
                     "--per_host_input_for_training=PER_HOST_V2"),
             TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    cr_assert_eq(g.plan->input_fn_calls, 4);
    cr_assert_eq(g.plan->input_fn_batch_size, 8);
    cr_assert_eq(g.plan->get_next_per_step, 2);
    run_and_check(&g, 3, per_host);
    for (int c = 0; c < 4; c++) {
        cr_assert_eq(g.srcs[c].calls, 6, "two get_next per step, got %lld", (long long)g.srcs[c].calls);
        cr_assert_eq(g.srcs[c].cap_seen, 8);
    }
    rig_close(&g);
}

Test(mt_feed, per_host_v2_parallel_get_next_keeps_the_order)
{
    rig g;
    rig_open(&g, CFG("--devices=4", "--num_hosts=2", "--train_batch_size=32",
                     "--per_host_input_for_training=PER_HOST_V2",
                     "--experimental_allow_per_host_v2_parallel_get_next=true"),
             TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    run_and_check(&g, 4, per_host);
    rig_close(&g);
}

Test(mt_feed, T38_per_shard_v1)
{
    /* T38: one invocation per core, index h * Cph + c, batch G / R. */
    rig g;
    rig_open(&g, CFG("--devices=4", "--num_hosts=2", "--train_batch_size=32",
                     "--per_host_input_for_training=false"),
             TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    cr_assert_eq(g.plan->input_fn_calls, 8);
    cr_assert_eq(g.plan->input_fn_batch_size, 4);
    for (int c = 0; c < 8; c++) {
        cr_assert_eq(g.plan->calls[c].host, c / 4);
        cr_assert_eq(g.plan->calls[c].first_replica, c);
    }
    run_and_check(&g, 3, per_host);
    rig_close(&g);
}

Test(mt_feed, T39_broadcast)
{
    /* T39: one invocation on host 0 with G; every replica gets the whole
     * batch (model_fn batch G). */
    rig g;
    rig_open(&g, CFG("--devices=4", "--num_hosts=2", "--train_batch_size=16",
                     "--per_host_input_for_training=BROADCAST"),
             TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    cr_assert_eq(g.plan->input_fn_calls, 1);
    cr_assert_eq(g.plan->input_fn_batch_size, 16);
    cr_assert_eq(g.b, 16);
    run_and_check(&g, 3, broadcast);
    rig_close(&g);
}

Test(mt_feed, T44_broadcast_takes_an_odd_batch)
{
    rig g;
    rig_open(&g, CFG("--devices=8", "--train_batch_size=127", "--per_host_input_for_training=BROADCAST"),
             TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    cr_assert_eq(g.b, 127);
    run_and_check(&g, 2, broadcast);
    rig_close(&g);
}

Test(mt_feed, T46_sliced_eval)
{
    /* T46: 1 host x 8, eval with SLICED, G 16: input_fn x1 with 16,
     * slice r (2 rows) to replica r. */
    rig g;
    rig_open(&g, CFG("--devices=8", "--train_batch_size=16", "--eval_batch_size=16",
                     "--eval_training_input_configuration=SLICED"),
             TL_MODE_EVAL, 1, D3, NULL, NULL, -1);
    cr_assert_eq(g.plan->input_fn_calls, 1);
    cr_assert_eq(g.plan->input_fn_batch_size, 16);
    cr_assert_eq(g.b, 2);
    run_and_check(&g, 3, sliced);
    rig_close(&g);
}

Test(mt_feed, eval_per_host_v1_on_one_host)
{
    rig g;
    rig_open(&g, CFG("--devices=8", "--train_batch_size=16", "--eval_batch_size=32"), TL_MODE_EVAL, 1, D3, NULL,
             NULL, -1);
    cr_assert_eq(g.plan->input_fn_calls, 1);
    cr_assert_eq(g.b, 4);
    run_and_check(&g, 2, sliced); /* one host: the contiguous split is SLICED's */
    rig_close(&g);
}

Test(mt_feed, T40_per_host_v2_two_cores_per_replica)
{
    /* T40 on 8 devices: 2 hosts x 4, ncpr 2 -> R 4, Rph 2; input_fn x2 of
     * G / R; features replicated to both cores of a replica. */
    rig g;
    rig_open(&g, CFG("--devices=4", "--num_hosts=2", "--train_batch_size=32", "--num_cores_per_replica=2",
                     "--per_host_input_for_training=PER_HOST_V2"),
             TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    cr_assert_eq(g.R, 4);
    cr_assert_eq(g.cores, 2);
    cr_assert_eq(g.plan->input_fn_calls, 2);
    cr_assert_eq(g.plan->input_fn_batch_size, 8);
    run_and_check(&g, 3, per_host);
    rig_close(&g);
}

Test(mt_feed, T41_replicas_span_hosts)
{
    /* T41 on 8 devices: 4 hosts x 2, ncpr 4 > Cph: R 2, one invocation per
     * replica on the host of its core 0 (hosts 0 and 2), batch G / R. */
    rig g;
    rig_open(&g, CFG("--devices=2", "--num_hosts=4", "--train_batch_size=32", "--num_cores_per_replica=4",
                     "--per_host_input_for_training=PER_HOST_V2"),
             TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    cr_assert_eq(g.R, 2);
    cr_assert_eq(g.plan->input_fn_calls, 2);
    cr_assert_eq(g.plan->calls[1].host, 2);
    cr_assert_eq(g.plan->calls[1].first_replica, 1);
    cr_assert_eq(g.plan->input_fn_batch_size, 16);
    run_and_check(&g, 2, per_host);
    rig_close(&g);
}

/* ---- input_partition_dims tiles (§4.3) ------------------------------------ */

/* Checks that core c of every replica holds exactly tile c of the replica's
 * (b, fshape...) features under part, and the labels under lpart. */
static void check_tiles(rig *g, const int64_t *fshape, int frank, const tl_tensor_partition *part,
                        const tl_tensor_partition *lpart, int64_t steps)
{
    int64_t shape[TL_MAX_RANK + 1] = {g->b};
    memcpy(shape + 1, fshape, (size_t)frank * sizeof *fshape);
    int rank = frank + 1;
    cr_assert_eq(tl_feed_start(g->feed, g->sources, 0, steps, INT64_MAX), TL_OK);
    for (int64_t s = 0; s < steps; s++)
        for (int r = 0; r < g->R; r++)
            for (int c = 0; c < g->cores; c++) {
                tl_feed_batch *b;
                cr_assert_eq(tl_feed_pop(g->feed, r, c, s, NULL, &b, NULL), TL_OK);
                int64_t off[TL_MAX_RANK + 1] = {0}, size[TL_MAX_RANK + 1];
                memcpy(size, shape, sizeof size);
                bool has = true;
                if (part->kind == TL_PART_TILED)
                    cr_assert_eq(tl_partition_tile(shape, part->dims, rank, c, off, size), TL_OK);
                else if (part->kind == TL_PART_CORE0)
                    has = c == 0;
                cr_assert_eq(b->has_features, has, "replica %d core %d", r, c);
                if (has) {
                    for (int d = 0; d < rank; d++) {
                        cr_assert_eq(b->f_offset[d], off[d]);
                        cr_assert_eq(b->f_size[d], size[d]);
                    }
                    /* Walk the tile row-major; element (idx) of the replica
                     * tensor is row idx[0]'s feature at the flat index of
                     * idx[1..]. */
                    int64_t n = 1;
                    for (int d = 0; d < rank; d++)
                        n *= size[d];
                    for (int64_t k = 0; k < n; k++) {
                        int64_t rem = k, idx[TL_MAX_RANK + 1];
                        for (int d = rank - 1; d >= 0; d--) {
                            idx[d] = off[d] + rem % size[d];
                            rem /= size[d];
                        }
                        int64_t flat = 0;
                        for (int d = 1; d < rank; d++)
                            flat = flat * shape[d] + idx[d];
                        int64_t id = per_host(g, r, s, idx[0]);
                        cr_assert_eq(b->features[k], (float)(id * 10 + flat),
                                     "replica %d core %d step %lld element %lld", r, c, (long long)s, (long long)k);
                    }
                }
                bool lhas = lpart == NULL || lpart->kind == TL_PART_REPLICATE || c == 0 || lpart->kind == TL_PART_TILED;
                cr_assert_eq(b->has_labels, lhas);
                if (lhas && (lpart == NULL || lpart->kind != TL_PART_TILED))
                    for (int64_t i = 0; i < g->b; i++)
                        cr_assert_eq(b->labels[i], (int32_t)per_host(g, r, s, i));
                /* The ids are not partitioned: the whole block on core 0. */
                for (int64_t i = 0; i < g->b; i++)
                    check_ids(b, r, c, s, i, per_host(g, r, s, i));
                tl_feed_release(g->feed, r, c, b);
            }
}

Test(mt_feed, tiles_row_major_over_four_cores)
{
    /* Images (b, 4, 6) with dims [1, 2, 2]: core c gets tile c of the 2 x 2
     * grid (rows 0-1 / 2-3, columns 0-2 / 3-5); labels None: every core. */
    static const int64_t fs[] = {4, 6};
    tl_tensor_partition part = {TL_PART_TILED, 3, {1, 2, 2}};
    rig g;
    rig_open(&g, CFG("--devices=8", "--train_batch_size=8", "--num_cores_per_replica=4",
                     "--per_host_input_for_training=PER_HOST_V2"),
             TL_MODE_TRAIN, 2, fs, &part, NULL, -1);
    cr_assert_eq(g.R, 2);
    check_tiles(&g, fs, 2, &part, NULL, 3);
    rig_close(&g);
}

Test(mt_feed, uneven_tiles_and_the_batch_split)
{
    /* (b, 5) in [2, 4] over 8 cores: the batch halves, 5 columns as 2, 2, 1, 0. */
    static const int64_t fs[] = {5};
    tl_tensor_partition part = {TL_PART_TILED, 2, {2, 4}};
    rig g;
    rig_open(&g, CFG("--devices=8", "--train_batch_size=4", "--num_cores_per_replica=8",
                     "--per_host_input_for_training=PER_HOST_V2"),
             TL_MODE_TRAIN, 1, fs, &part, NULL, -1);
    cr_assert_eq(g.R, 1);
    check_tiles(&g, fs, 1, &part, NULL, 2);
    rig_close(&g);
}

Test(mt_feed, product_one_goes_to_core_zero_only)
{
    static const int64_t fs[] = {3};
    tl_tensor_partition part = {TL_PART_CORE0, 2, {1, 1}};
    tl_tensor_partition lpart = {TL_PART_CORE0, 1, {1}};
    rig g;
    rig_open(&g, CFG("--devices=8", "--train_batch_size=8", "--num_cores_per_replica=2",
                     "--per_host_input_for_training=PER_HOST_V2"),
             TL_MODE_TRAIN, 1, fs, &part, &lpart, -1);
    check_tiles(&g, fs, 1, &part, &lpart, 2);
    rig_close(&g);
}

Test(mt_feed, tiled_labels)
{
    static const int64_t fs[] = {2};
    tl_tensor_partition part = {TL_PART_REPLICATE, 0, {0}};
    tl_tensor_partition lpart = {TL_PART_TILED, 1, {2}};
    rig g;
    rig_open(&g, CFG("--devices=8", "--train_batch_size=12", "--num_cores_per_replica=2",
                     "--per_host_input_for_training=PER_HOST_V2"),
             TL_MODE_TRAIN, 1, fs, &part, &lpart, -1);
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 0, 2, INT64_MAX), TL_OK);
    for (int64_t s = 0; s < 2; s++)
        for (int r = 0; r < g.R; r++)
            for (int c = 0; c < 2; c++) {
                tl_feed_batch *b;
                cr_assert_eq(tl_feed_pop(g.feed, r, c, s, NULL, &b, NULL), TL_OK);
                cr_assert_eq(b->l_offset, c * 2);
                cr_assert_eq(b->l_size, 1 + (c == 0)); /* b = 3: rows 0-1, then 2 */
                for (int64_t i = 0; i < b->l_size; i++)
                    cr_assert_eq(b->labels[i], (int32_t)per_host(&g, r, s, b->l_offset + i));
                for (int64_t i = 0; i < g.b; i++) /* the ids are not the labels' tiles */
                    check_ids(b, r, c, s, i, per_host(&g, r, s, i));
                tl_feed_release(g.feed, r, c, b);
            }
    rig_close(&g);
}

/* ---- prediction (§8) ------------------------------------------------------ */

Test(mt_feed, predict_pads_then_stops_with_a_copy_of_the_first_batch)
{
    /* T58's shape: 10 examples, G 4 on 2 replicas (1 host): batches of
     * 4, 4, 2 + 2 padding, then the stop batch. */
    rig g;
    rig_open(&g, CFG("--devices=2", "--train_batch_size=4", "--predict_batch_size=4"), TL_MODE_PREDICT, 1, D3, NULL,
             NULL, 10);
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 0, -1, INT64_MAX), TL_OK);
    int64_t real[3][2] = {{2, 2}, {2, 2}, {2, 0}};
    for (int64_t s = 0; s < 4; s++)
        for (int r = 0; r < 2; r++) {
            tl_feed_batch *b;
            cr_assert_eq(tl_feed_pop(g.feed, r, 0, s, NULL, &b, NULL), TL_OK, "%s", tl_last_error());
            cr_assert_eq(b->stopping, s == 3);
            int64_t s0 = s == 3 ? 0 : s; /* the stop batch repeats batch 0 */
            cr_assert_eq(b->real_rows, real[s0][r]);
            for (int64_t i = 0; i < 2; i++) {
                bool is_real = i < real[s0][r];
                cr_assert_eq(b->padding_mask[i], !is_real);
                int64_t id = (s0 * 2 + r) * 2 + i;
                float want = is_real ? (float)(id * 10) : 0.0f;
                cr_assert_eq(b->features[i * 3], want);
                /* a padding row's ids are 0, a valid id of any table */
                for (int64_t k = 0; k < W; k++)
                    cr_assert_eq(b->ids[i * W + k], is_real ? id * 7 + k : 0, "step %lld replica %d row %lld",
                                 (long long)s, r, (long long)i);
            }
            tl_feed_release(g.feed, r, 0, b);
        }
    rig_close(&g);
}

/* With tiles the feed stages the step first: a prediction whose input is
 * empty from the start ends with a stop batch of zeros, ids included, on
 * core 0 only. */
Test(mt_feed, predict_with_tiles_and_no_input_stops_with_zero_ids)
{
    static const int64_t fs[] = {4};
    tl_tensor_partition part = {TL_PART_TILED, 2, {1, 2}};
    rig g;
    rig_open(&g, CFG("--devices=4", "--train_batch_size=4", "--predict_batch_size=4", "--num_cores_per_replica=2",
                     "--per_host_input_for_training=PER_HOST_V2"),
             TL_MODE_PREDICT, 1, fs, &part, NULL, 0);
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 0, -1, INT64_MAX), TL_OK);
    for (int r = 0; r < g.R; r++)
        for (int c = 0; c < 2; c++) {
            tl_feed_batch *b;
            cr_assert_eq(tl_feed_pop(g.feed, r, c, 0, NULL, &b, NULL), TL_OK, "%s", tl_last_error());
            cr_assert(b->stopping, "replica %d core %d", r, c);
            cr_assert_eq(b->real_rows, 0);
            cr_assert_eq(b->has_ids, c == 0);
            for (int64_t i = 0; c == 0 && i < g.b * W; i++)
                cr_assert_eq(b->ids[i], 0);
            tl_feed_release(g.feed, r, c, b);
        }
    rig_close(&g);
}

/* ---- errors ---------------------------------------------------------------- */

static tl_status short_next(void *ud, int64_t step, int64_t row0, int64_t cap, const tl_feed_dest *dst,
                            int64_t *rows)
{
    tl_status st = src_next(ud, step, row0, cap, dst, rows);
    if (step == 1)
        *rows = cap - 1;
    return st;
}

Test(mt_feed, a_short_batch_in_training_is_an_error)
{
    rig g;
    rig_open(&g, CFG("--devices=2", "--train_batch_size=8"), TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    g.sources[0].next = short_next;
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 0, 3, INT64_MAX), TL_OK);
    tl_feed_batch *b;
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(tl_feed_pop(g.feed, r, 0, 0, NULL, &b, NULL), TL_OK);
        tl_feed_release(g.feed, r, 0, b);
    }
    cr_assert_eq(tl_feed_pop(g.feed, 0, 0, 1, NULL, &b, NULL), TL_ERUNTIME);
    const char *msg;
    cr_assert_eq(tl_feed_error(g.feed, &msg), TL_EINVAL);
    cr_assert(strstr(msg, "gave a batch of 7 rows at step 1") != NULL, "%s", msg);
    cr_assert(strstr(msg, "drop_remainder") != NULL, "%s", msg);
    cr_assert_eq(tl_feed_stop(g.feed), TL_EINVAL);
    tl_feed_destroy(g.feed);
    tl_input_plan_destroy(g.plan);
    tl_topology_destroy(g.topo);
    tl_config_destroy(g.cfg);
}

Test(mt_feed, running_out_in_training_is_an_error)
{
    rig g;
    rig_open(&g, CFG("--devices=2", "--train_batch_size=8"), TL_MODE_TRAIN, 1, D3, NULL, NULL, 16);
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 0, 5, INT64_MAX), TL_OK);
    tl_feed_batch *b;
    for (int64_t s = 0; s < 2; s++)
        for (int r = 0; r < 2; r++) {
            cr_assert_eq(tl_feed_pop(g.feed, r, 0, s, NULL, &b, NULL), TL_OK);
            tl_feed_release(g.feed, r, 0, b);
        }
    cr_assert_eq(tl_feed_pop(g.feed, 0, 0, 2, NULL, &b, NULL), TL_ERUNTIME);
    const char *msg;
    cr_assert_eq(tl_feed_error(g.feed, &msg), TL_EINVAL);
    cr_assert(strstr(msg, "ran out of data at step 2") != NULL, "%s", msg);
    cr_assert_eq(tl_feed_stop(g.feed), TL_EINVAL);
    tl_feed_destroy(g.feed);
    tl_input_plan_destroy(g.plan);
    tl_topology_destroy(g.topo);
    tl_config_destroy(g.cfg);
}

Test(mt_feed, a_hold_stops_the_thread_at_the_limit)
{
    rig g;
    rig_open(&g, CFG("--devices=2", "--train_batch_size=8"), TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 0, 10, 2), TL_OK);
    tl_feed_batch *b;
    for (int64_t s = 0; s < 2; s++)
        for (int r = 0; r < 2; r++) {
            cr_assert_eq(tl_feed_pop(g.feed, r, 0, s, NULL, &b, NULL), TL_OK);
            tl_feed_release(g.feed, r, 0, b);
        }
    tl_feed_wait_produced(g.feed, 2);
    /* Held: the source is exactly at the end of step 1, whatever the depth. */
    cr_assert_eq(g.srcs[0].calls, 2);
    tl_feed_allow(g.feed, 4);
    tl_feed_wait_produced(g.feed, 4);
    cr_assert_eq(g.srcs[0].calls, 4);
    rig_close(&g);
}

Test(mt_feed, tiles_from_the_configured_input_partition_dims)
{
    /* The configuration's [[1, 2, 2], None] matched to the features
     * (b, 4, 6) and labels (b) by tl_partition_plan, then fed. */
    tl_config *cfg = CFG("--devices=8", "--train_batch_size=8", "--num_cores_per_replica=4",
                         "--per_host_input_for_training=PER_HOST_V2", "--input_partition_dims=[[1,2,2],null]");
    const tl_run_config *rc = tl_config_get(cfg);
    cr_assert_not_null(rc->tpu.input_partition_dims);
    tl_tensor_desc fd = {NULL, 3, {4, 4, 6}}, ld = {NULL, 1, {4}};
    tl_tensor_struct fs = {TL_STRUCT_TENSOR, 1, &fd}, ls = {TL_STRUCT_TENSOR, 1, &ld};
    tl_tensor_partition fp, lp;
    cr_assert_eq(tl_partition_plan(rc->tpu.input_partition_dims, 4, &fs, &ls, &fp, &lp), TL_OK, "%s",
                 tl_last_error());
    cr_assert_eq(fp.kind, TL_PART_TILED);
    cr_assert_eq(lp.kind, TL_PART_REPLICATE);
    static const int64_t shape[] = {4, 6};
    rig g;
    rig_open(&g, cfg, TL_MODE_TRAIN, 2, shape, &fp, &lp, -1);
    check_tiles(&g, shape, 2, &fp, &lp, 2);
    rig_close(&g);
}

/* ---- pulled: the consumer makes the steps ------------------------------------ */

static void make_pure(rig *g)
{
    for (int i = 0; i < g->plan->input_fn_calls; i++)
        g->sources[i].pure = true;
}

Test(mt_feed, one_consumer_with_pure_sources_pulls_the_same_batches)
{
    rig g;
    rig_open(&g, CFG("--devices=1", "--train_batch_size=8"), TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    make_pure(&g);
    cr_assert_not(tl_feed_pulled(g.feed));
    run_and_check(&g, 5, per_host);
    cr_assert(tl_feed_pulled(g.feed));
    /* Nothing runs ahead of the consumer: 5 steps, 5 get_next. */
    cr_assert_eq(g.srcs[0].calls, 5);
    cr_assert_eq(tl_feed_stop(g.feed), TL_OK);
    cr_assert_not(tl_feed_pulled(g.feed));
    rig_close(&g);

    /* A source that is not pure, or two consumers, keep the thread. */
    rig_open(&g, CFG("--devices=1", "--train_batch_size=8"), TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    run_and_check(&g, 3, per_host);
    cr_assert_not(tl_feed_pulled(g.feed));
    rig_close(&g);
    rig_open(&g, CFG("--devices=2", "--train_batch_size=8"), TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    make_pure(&g);
    run_and_check(&g, 3, per_host);
    cr_assert_not(tl_feed_pulled(g.feed));
    rig_close(&g);
}

Test(mt_feed, a_large_input_keeps_its_thread_where_it_has_a_core)
{
    /* 8 rows of 1024 floats (32 KiB a step): a thread copies them beside the
     * device's, where a core is spare; where the device's threads take every
     * core, the consumer pulls. */
    static const int64_t wide[] = {1024};
    int cpus = tl_available_cpus();
    char threads[64];
    snprintf(threads, sizeof threads, "--intra_op_parallelism_threads=%d", cpus);
    rig g;
    rig_open(&g, CFG("--devices=1", "--train_batch_size=8"), TL_MODE_TRAIN, 1, wide, NULL, NULL, -1);
    make_pure(&g);
    run_and_check(&g, 3, per_host);
    cr_assert_eq(tl_feed_pulled(g.feed), cpus < 2, "%d cpus", cpus);
    rig_close(&g);
    rig_open(&g, CFG("--devices=1", "--train_batch_size=8", threads), TL_MODE_TRAIN, 1, wide, NULL, NULL, -1);
    make_pure(&g);
    run_and_check(&g, 3, per_host);
    cr_assert(tl_feed_pulled(g.feed), "%d cpus, %s", cpus, threads);
    rig_close(&g);
}

Test(mt_feed, a_pulled_feed_pads_stops_and_then_says_so)
{
    /* 5 examples, batch 2: 2, 2, 1 + 1 padding, the stop batch (a copy of
     * the first), then no batch: an error, not a wait for a thread. */
    rig g;
    rig_open(&g, CFG("--devices=1", "--train_batch_size=2", "--predict_batch_size=2"), TL_MODE_PREDICT, 1, D3, NULL,
             NULL, 5);
    make_pure(&g);
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 0, -1, INT64_MAX), TL_OK);
    cr_assert(tl_feed_pulled(g.feed));
    static const int64_t real[] = {2, 2, 1, 2};
    tl_feed_batch *b;
    for (int64_t s = 0; s < 4; s++) {
        cr_assert_eq(tl_feed_pop(g.feed, 0, 0, s, NULL, &b, NULL), TL_OK, "%s", tl_last_error());
        cr_assert_eq(b->stopping, s == 3);
        cr_assert_eq(b->real_rows, real[s]);
        int64_t s0 = s == 3 ? 0 : s;
        for (int64_t i = 0; i < 2; i++) {
            bool is_real = i < real[s];
            cr_assert_eq(b->padding_mask[i], !is_real);
            cr_assert_eq(b->features[i * 3], is_real ? (float)((s0 * 2 + i) * 10) : 0.0f, "step %lld row %lld",
                         (long long)s, (long long)i);
        }
        tl_feed_release(g.feed, 0, 0, b);
    }
    cr_assert_eq(tl_feed_pop(g.feed, 0, 0, 4, NULL, &b, NULL), TL_ERUNTIME);
    cr_assert(strstr(tl_last_error(), "infeed closed before step 4") != NULL, "%s", tl_last_error());
    cr_assert_eq(g.srcs[0].calls, 4);
    rig_close(&g);
}

Test(mt_feed, a_pulled_feed_returns_its_sources_error_and_keeps_it)
{
    rig g;
    rig_open(&g, CFG("--devices=1", "--train_batch_size=8"), TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    make_pure(&g);
    g.sources[0].next = short_next;
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 0, 3, INT64_MAX), TL_OK);
    cr_assert(tl_feed_pulled(g.feed));
    tl_feed_batch *b;
    cr_assert_eq(tl_feed_pop(g.feed, 0, 0, 0, NULL, &b, NULL), TL_OK);
    tl_feed_release(g.feed, 0, 0, b);
    cr_assert_eq(tl_feed_pop(g.feed, 0, 0, 1, NULL, &b, NULL), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "gave a batch of 7 rows at step 1") != NULL, "%s", tl_last_error());
    const char *msg;
    cr_assert_eq(tl_feed_error(g.feed, &msg), TL_EINVAL);
    cr_assert(strstr(msg, "drop_remainder") != NULL, "%s", msg);
    cr_assert_eq(tl_feed_pop(g.feed, 0, 0, 2, NULL, &b, NULL), TL_ERUNTIME); /* closed by the error */
    cr_assert_eq(tl_feed_stop(g.feed), TL_EINVAL);
    tl_feed_destroy(g.feed);
    tl_input_plan_destroy(g.plan);
    tl_topology_destroy(g.topo);
    tl_config_destroy(g.cfg);
}

Test(mt_feed, an_abort_ends_a_pulled_feed)
{
    rig g;
    rig_open(&g, CFG("--devices=1", "--train_batch_size=8"), TL_MODE_TRAIN, 1, D3, NULL, NULL, -1);
    make_pure(&g);
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 0, 10, INT64_MAX), TL_OK);
    tl_feed_batch *b;
    cr_assert_eq(tl_feed_pop(g.feed, 0, 0, 0, NULL, &b, NULL), TL_OK);
    tl_feed_release(g.feed, 0, 0, b);
    tl_feed_abort(g.feed);
    cr_assert_eq(tl_feed_pop(g.feed, 0, 0, 1, NULL, &b, NULL), TL_ERUNTIME);
    cr_assert(strstr(tl_last_error(), "infeed closed before step 1") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_feed_stop(g.feed), TL_OK);
    /* It starts again, pulled, where it is told. */
    cr_assert_eq(tl_feed_start(g.feed, g.sources, 4, 2, INT64_MAX), TL_OK);
    cr_assert(tl_feed_pulled(g.feed));
    cr_assert_eq(tl_feed_pop(g.feed, 0, 0, 4, NULL, &b, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(b->step, 4);
    tl_feed_release(g.feed, 0, 0, b);
    rig_close(&g);
}

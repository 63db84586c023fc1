/* test_shard.c — how input is cut across processes and devices: the SH-*,
 * BW-* and PD-2 vectors of distribution.md §14, with the element ranges each
 * process reads compared batch by batch. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* A world of D devices over P processes and the distribution of process pid:
 * DataParallel over all D devices (R = D), or ModelParallel on a mesh
 * (R, D / R) ["data", "model"]. */
typedef struct world {
    tl_devices *devs;
    tl_mesh *mesh;
    tl_layout_map *map;
    tl_distribution *d;
} world;

static world dp_world(int D, int P, int pid)
{
    world w = {0};
    w.devs = tu_devices(D / P, P, pid);
    w.mesh = tu_mesh1(w.devs, D, "batch");
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.device_mesh = w.mesh;
    o.process = (tl_process){P, pid};
    ASSERT_OK(tl_data_parallel_create(&o, &w.d));
    return w;
}

static world mp_world_opts(int D, int R, int P, int pid, bool legacy)
{
    world w = {0};
    w.devs = tu_devices(D / P, P, pid);
    w.mesh = tu_mesh2(w.devs, R, D / R, "data", "model");
    ASSERT_OK(tl_layout_map_create(w.mesh, TL_MATCH_FULL, &w.map));
    tl_model_parallel_options o;
    tl_model_parallel_options_init(&o);
    o.layout_map = w.map;
    o.process = (tl_process){P, pid};
    o.legacy_shard_id = legacy;
    ASSERT_OK(tl_model_parallel_create(&o, &w.d));
    return w;
}

static world mp_world(int D, int R, int P, int pid)
{
    return mp_world_opts(D, R, P, pid, false);
}

static void world_free(world *w)
{
    tl_distribution_destroy(w->d);
    tl_layout_map_destroy(w->map);
    tl_mesh_destroy(w->mesh);
    tl_devices_destroy(w->devs);
}

static tl_shard_input dataset(int64_t G)
{
    return (tl_shard_input){TL_INPUT_DATASET, G >= 0, G, NULL};
}

/* The batches process w reads of range(n).batch(G), checked against want
 * ({start, end} pairs, nwant of them). */
static void assert_batches(const world *w, tl_keras_version v, int64_t n, int64_t G, const tl_range *want,
                           int nwant)
{
    tl_shard_input in = dataset(G);
    tl_shard_plan plan;
    ASSERT_OK(tl_distribute_dataset_plan(w->d, &in, v, &plan));
    tl_range got[64];
    int64_t count;
    ASSERT_OK(tl_shard_batches(&plan, n, got, 64, &count));
    cr_assert_eq(count, nwant, "pid %d: %lld batches, want %d", tl_distribution_process_id(w->d),
                 (long long)count, nwant);
    for (int i = 0; i < nwant; i++)
        cr_assert(got[i].start == want[i].start && got[i].end == want[i].end,
                  "pid %d batch %d: [%lld, %lld), want [%lld, %lld)", tl_distribution_process_id(w->d), i,
                  (long long)got[i].start, (long long)got[i].end, (long long)want[i].start, (long long)want[i].end);
}

/* ---- process-level sharding (§14.7) ------------------------------------- */

Test(shard, SH_1_single_process_identity)
{
    world w = dp_world(8, 1, 0);
    tl_shard_input unbatched = {TL_INPUT_DATASET, false, -1, NULL};
    tl_shard_plan plan;
    ASSERT_OK(tl_distribute_dataset_plan(w.d, &unbatched, TL_KERAS_3_15, &plan));
    cr_assert_eq(plan.action, TL_SHARD_IDENTITY);
    tl_shard_input list = {TL_INPUT_OTHER, false, -1, "list"};
    ASSERT_OK(tl_distribute_dataset_plan(w.d, &list, TL_KERAS_3_15, &plan));
    cr_assert_eq(plan.action, TL_SHARD_IDENTITY);
    assert_batches(&w, TL_KERAS_3_15, 8, 4, (tl_range[]){{0, 4}, {4, 8}}, 2);
    ASSERT_OK(tl_distribute_dataset_plan(NULL, &list, TL_KERAS_3_15, &plan));
    cr_assert_eq(plan.action, TL_SHARD_IDENTITY);
    world_free(&w);
}

Test(shard, SH_2_auto_shard_off)
{
    world w = dp_world(8, 2, 1);
    tl_distribution_set_auto_shard_dataset(w.d, false);
    tl_shard_plan plan;
    tl_shard_input in = dataset(8);
    ASSERT_OK(tl_distribute_dataset_plan(w.d, &in, TL_KERAS_3_15, &plan));
    cr_assert_eq(plan.action, TL_SHARD_IDENTITY);
    ASSERT_OK(tl_data_adapter_check(w.d, TL_INPUT_ARRAY, TL_KERAS_3_15));
    ASSERT_OK(tl_data_adapter_check(w.d, TL_INPUT_OTHER, TL_KERAS_3_15));
    world_free(&w);
}

Test(shard, SH_3_four_replicas_two_processes)
{
    world w0 = dp_world(4, 2, 0), w1 = dp_world(4, 2, 1);
    assert_batches(&w0, TL_KERAS_3_15, 16, 8, (tl_range[]){{0, 4}, {8, 12}}, 2);
    assert_batches(&w1, TL_KERAS_3_15, 16, 8, (tl_range[]){{4, 8}, {12, 16}}, 2);
    tl_shard_plan plan;
    tl_shard_input in = dataset(8);
    ASSERT_OK(tl_distribute_dataset_plan(w1.d, &in, TL_KERAS_3_15, &plan));
    cr_assert_eq(plan.action, TL_SHARD_SLICE);
    cr_assert_eq(plan.slice_size, 4);
    cr_assert_eq(plan.num_slices, 2);
    cr_assert_eq(plan.slice_index, 1);
    world_free(&w0);
    world_free(&w1);
}

Test(shard, SH_4_batch_not_divisible_by_processes)
{
    world w = dp_world(4, 2, 0);
    tl_shard_input in = dataset(7);
    tl_shard_plan plan;
    ASSERT_ERR(tl_distribute_dataset_plan(w.d, &in, TL_KERAS_3_15, &plan), TL_EINVAL,
               "Global batch size must be divisible by the number of processes. `global_batch_size`=7 and "
               "`num_processes`=2");
    world_free(&w);
}

Test(shard, SH_5_not_a_dataset)
{
    world w = dp_world(8, 2, 0);
    tl_shard_input in = {TL_INPUT_OTHER, true, 3, "list"};
    tl_shard_plan plan;
    ASSERT_ERR(tl_distribute_dataset_plan(w.d, &in, TL_KERAS_3_15, &plan), TL_EINVAL,
               "The dataset type <class 'list'> is not supported for auto-sharding in multi-process setting.");
    in = (tl_shard_input){TL_INPUT_ARRAY, true, 4, NULL};
    ASSERT_ERR(tl_distribute_dataset_plan(w.d, &in, TL_KERAS_3_15, &plan), TL_EINVAL,
               "<class 'numpy.ndarray'> is not supported for auto-sharding");
    world_free(&w);
}

Test(shard, SH_6_unknown_batch_size)
{
    world w = dp_world(8, 2, 0);
    tl_shard_input unbatched = {TL_INPUT_DATASET, false, 16, NULL};
    tl_shard_plan plan;
    ASSERT_ERR(tl_distribute_dataset_plan(w.d, &unbatched, TL_KERAS_3_15, &plan), TL_EINVAL,
               "The batch size of the input dataset is unknown. Please config the batch size for the input "
               "dataset, e.g via `dataset.batch(batch_size)`");
    tl_shard_input unknown = {TL_INPUT_DATASET, true, -1, NULL};
    ASSERT_ERR(tl_distribute_dataset_plan(w.d, &unknown, TL_KERAS_3_15, &plan), TL_EINVAL,
               "The batch size of the input dataset is unknown");
    ASSERT_ERR(tl_distribute_dataset_plan(w.d, &unknown, TL_KERAS_HEAD, &plan), TL_EINVAL,
               "The batch size of the input dataset is unknown");
    world_free(&w);
}

Test(shard, SH_7_one_replica_replicates)
{
    for (int pid = 0; pid < 2; pid++) {
        world w = mp_world(8, 1, 2, pid);
        tl_shard_plan plan;
        tl_shard_input in = dataset(8);
        ASSERT_OK(tl_distribute_dataset_plan(w.d, &in, TL_KERAS_3_15, &plan));
        cr_assert_eq(plan.action, TL_SHARD_REPLICATE);
        assert_batches(&w, TL_KERAS_3_15, 16, 8, (tl_range[]){{0, 8}, {8, 16}}, 2);
        world_free(&w);
    }
}

Test(shard, SH_8_data_parallel_eight_devices_four_processes)
{
    for (int p = 0; p < 4; p++) {
        world w = dp_world(8, 4, p);
        tl_range want[4];
        for (int k = 0; k < 4; k++)
            want[k] = (tl_range){2 * p + 8 * k, 2 * p + 8 * k + 2};
        assert_batches(&w, TL_KERAS_3_15, 32, 8, want, 4);
        world_free(&w);
    }
}

Test(shard, SH_9_model_parallel_replica_counts)
{
    /* first-batch rows per pid for R = 8, 4, 2, 1 on D = 8, P = 4 */
    static const int R[] = {8, 4, 2, 1};
    static const tl_range first[4][4] = {
        {{0, 2}, {2, 4}, {4, 6}, {6, 8}},
        {{0, 2}, {2, 4}, {4, 6}, {6, 8}},
        {{0, 4}, {0, 4}, {4, 8}, {4, 8}},
        {{0, 8}, {0, 8}, {0, 8}, {0, 8}},
    };
    for (int r = 0; r < 4; r++) {
        for (int p = 0; p < 4; p++) {
            world w = mp_world(8, R[r], 4, p);
            tl_range want[4];
            for (int k = 0; k < 4; k++)
                want[k] = (tl_range){first[r][p].start + 8 * k, first[r][p].end + 8 * k};
            assert_batches(&w, TL_KERAS_3_15, 32, 8, want, 4);
            world_free(&w);
        }
    }
}

Test(shard, SH_10_replica_groups)
{
    static const tl_range want[4][2] = {
        {{0, 2}, {4, 6}}, {{0, 2}, {4, 6}}, {{2, 4}, {6, 8}}, {{2, 4}, {6, 8}}};
    for (int p = 0; p < 4; p++) {
        world w = mp_world(8, 2, 4, p);
        assert_batches(&w, TL_KERAS_3_15, 8, 4, want[p], 2);
        world_free(&w);
    }
}

Test(shard, SH_11_partial_last_batch_unequal_steps)
{
    world w0 = dp_world(8, 2, 0), w1 = dp_world(8, 2, 1);
    assert_batches(&w0, TL_KERAS_3_15, 10, 8, (tl_range[]){{0, 4}, {8, 10}}, 2);
    assert_batches(&w1, TL_KERAS_3_15, 10, 8, (tl_range[]){{4, 8}}, 1);
    world_free(&w0);
    world_free(&w1);
}

Test(shard, SH_12_replicas_span_processes)
{
    world w = mp_world(8, 2, 4, 2);
    tl_shard_input in = dataset(6);
    tl_shard_plan plan;
    ASSERT_OK(tl_distribute_dataset_plan(w.d, &in, TL_KERAS_3_15, &plan));
    cr_assert_eq(plan.action, TL_SHARD_SLICE);
    cr_assert_eq(plan.slice_size, 3);
    cr_assert_eq(plan.num_slices, 2);
    cr_assert_eq(plan.slice_index, 1);
    in = dataset(5);
    ASSERT_ERR(tl_distribute_dataset_plan(w.d, &in, TL_KERAS_3_15, &plan), TL_EINVAL,
               "Global batch size must be divisible by the number of replicas. `global_batch_size`=5 and "
               "`num_model_replicas`=2");
    world_free(&w);
}

Test(shard, SH_13_head_num_shards)
{
    world w0 = dp_world(4, 2, 0), w1 = dp_world(4, 2, 1);
    tl_shard_input in = dataset(7);
    tl_shard_plan plan;
    ASSERT_ERR(tl_distribute_dataset_plan(w0.d, &in, TL_KERAS_HEAD, &plan), TL_EINVAL,
               "divisible by the number of shards. `global_batch_size`=7 and `num_shards`=2");
    assert_batches(&w0, TL_KERAS_HEAD, 12, 6, (tl_range[]){{0, 3}, {6, 9}}, 2);
    assert_batches(&w1, TL_KERAS_HEAD, 12, 6, (tl_range[]){{3, 6}, {9, 12}}, 2);
    world_free(&w0);
    world_free(&w1);
}

Test(shard, SH_14_adapter_requires_dataset)
{
    world w = dp_world(8, 2, 0);
    ASSERT_ERR(tl_data_adapter_check(w.d, TL_INPUT_ARRAY, TL_KERAS_3_15), TL_EINVAL,
               "When using a multi-worker distribution with auto-sharding enabled, the data must be provided as "
               "a `tf.data.Dataset` instance. Received: type(x)=<class 'numpy.ndarray'>.");
    cr_assert(strstr(tl_last_error(), "set `distribution.auto_shard_dataset = False`") != NULL);
    ASSERT_OK(tl_data_adapter_check(w.d, TL_INPUT_DATASET, TL_KERAS_3_15));
    ASSERT_OK(tl_data_adapter_check(w.d, TL_INPUT_ARRAY, TL_KERAS_HEAD));
    ASSERT_OK(tl_data_adapter_check(w.d, TL_INPUT_PY_DATASET, TL_KERAS_HEAD));
    ASSERT_ERR(tl_data_adapter_check(w.d, TL_INPUT_OTHER, TL_KERAS_HEAD), TL_EINVAL, "type(x)=<class 'object'>");
    ASSERT_OK(tl_data_adapter_check(NULL, TL_INPUT_OTHER, TL_KERAS_3_15));
    world_free(&w);
}

Test(shard, legacy_shard_id_feeds_the_plan)
{
    /* ID-4's ModelParallel bug as it showed in the data: R = 2, P = 4 */
    static const int want[] = {0, 1, 0, 1};
    for (int p = 0; p < 4; p++) {
        world w = mp_world_opts(8, 2, 4, p, true);
        tl_shard_input in = dataset(8);
        tl_shard_plan plan;
        ASSERT_OK(tl_distribute_dataset_plan(w.d, &in, TL_KERAS_3_15, &plan));
        cr_assert_eq(plan.slice_index, want[p]);
        world_free(&w);
    }
}

Test(shard, head_array_round_robin)
{
    /* 5 batches of 8 over num_data_shards = 4: shard k gets ceil((5 - k) / 4) */
    world w0 = dp_world(8, 4, 0), w1 = dp_world(8, 4, 1);
    tl_shard_input in = {TL_INPUT_ARRAY, true, 8, NULL};
    tl_shard_plan plan;
    ASSERT_OK(tl_distribute_dataset_plan(w1.d, &in, TL_KERAS_HEAD, &plan));
    cr_assert_eq(plan.action, TL_SHARD_ROUND_ROBIN);
    cr_assert_eq(plan.num_slices, 4);
    tl_range got[8];
    int64_t count;
    ASSERT_OK(tl_shard_batches(&plan, 40, got, 8, &count));
    cr_assert_eq(count, 1);
    cr_assert(got[0].start == 8 && got[0].end == 16);
    ASSERT_OK(tl_distribute_dataset_plan(w0.d, &in, TL_KERAS_HEAD, &plan));
    ASSERT_OK(tl_shard_batches(&plan, 40, got, 8, &count));
    cr_assert_eq(count, 2);
    cr_assert(got[1].start == 32 && got[1].end == 40);
    in.kind = TL_INPUT_PY_DATASET;
    ASSERT_ERR(tl_distribute_dataset_plan(w0.d, &in, TL_KERAS_HEAD, &plan), TL_ENOTIMPL, "not modelled");
    world_free(&w0);
    world_free(&w1);
}

Test(shard, base_distribution_cannot_shard)
{
    tl_devices *devs = tu_devices(4, 2, 0);
    tl_mesh *m = tu_mesh1(devs, 8, "batch");
    tl_distribution *d;
    ASSERT_OK(tl_distribution_create(m, "batch", (tl_process){2, 0}, &d));
    tl_shard_input in = dataset(8);
    tl_shard_plan plan;
    ASSERT_ERR(tl_distribute_dataset_plan(d, &in, TL_KERAS_3_15, &plan), TL_ENOTIMPL, "NotImplementedError");
    tl_distribution_destroy(d);
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

Test(shard, batches_argument_checks)
{
    tl_shard_plan plan = {TL_SHARD_SLICE, 8, 3, 2, 0};
    int64_t count;
    ASSERT_ERR(tl_shard_batches(&plan, 16, NULL, 0, &count), TL_EINVAL, "inconsistent plan");
    plan = (tl_shard_plan){TL_SHARD_IDENTITY, -1, -1, 1, 0};
    ASSERT_ERR(tl_shard_batches(&plan, 16, NULL, 0, &count), TL_EINVAL, "must be known");
    plan = (tl_shard_plan){TL_SHARD_IDENTITY, 4, 4, 1, 0};
    ASSERT_OK(tl_shard_batches(&plan, 10, NULL, 0, &count));
    cr_assert_eq(count, 3);
    ASSERT_OK(tl_shard_batches(&plan, 0, NULL, 0, &count));
    cr_assert_eq(count, 0);
    ASSERT_ERR(tl_shard_batches(&plan, -1, NULL, 0, &count), TL_EINVAL, "must be >= 0");
    tl_shard_input in = dataset(8);
    ASSERT_ERR(tl_distribute_dataset_plan(NULL, &in, (tl_keras_version)9, &plan), TL_EINVAL, "version");
    ASSERT_ERR(tl_distribute_dataset_plan(NULL, NULL, TL_KERAS_3_15, &plan), TL_EINVAL, "input is NULL");
}

/* ---- batch_sizes_for_worker (§11.3) -------------------------------------- */

static void assert_sizes(int64_t G, int W, int Rw, int w, const int64_t *want, int n)
{
    int64_t got[16];
    ASSERT_OK(tl_batch_sizes_for_worker(G, W, Rw, w, got, 16));
    for (int i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "(%lld, %d, %d, %d)[%d] = %lld, want %lld", (long long)G, W, Rw, w, i,
                     (long long)got[i], (long long)want[i]);
}

Test(shard, BW_1_two_replicas_per_worker)
{
    assert_sizes(7, 2, 2, 0, (int64_t[]){2, 2, 2, 1}, 4);
    assert_sizes(7, 2, 2, 1, (int64_t[]){2, 1, 2, 2}, 4);
}

Test(shard, BW_2_one_replica_per_worker)
{
    assert_sizes(8, 2, 1, 0, (int64_t[]){4, 4}, 2);
    assert_sizes(9, 2, 1, 1, (int64_t[]){4, 5}, 2);
    assert_sizes(10, 4, 1, 3, (int64_t[]){2, 3, 3, 2}, 4);
    int64_t out[2];
    ASSERT_ERR(tl_batch_sizes_for_worker(8, 4, 1, 0, out, 2), TL_EINVAL, "do not fit");
    ASSERT_ERR(tl_batch_sizes_for_worker(8, 2, 1, 2, out, 2), TL_EINVAL, "worker_index must be in [0, 2)");
    ASSERT_ERR(tl_batch_sizes_for_worker(8, 0, 1, 0, out, 2), TL_EINVAL, "must be >= 1");
}

/* ---- device-level rows (§11.5) ------------------------------------------ */

static tl_range rows_of(const world *w, int64_t local_rows, int L, int dev)
{
    tl_range r;
    ASSERT_OK(tl_device_batch_rows(w->d, local_rows, L, dev, &r));
    return r;
}

Test(shard, PD_2_data_parallel_device_rows)
{
    world w = dp_world(8, 1, 0);
    for (int i = 0; i < 8; i++) {
        tl_range r = rows_of(&w, 16, 8, i);
        cr_assert(r.start == 2 * i && r.end == 2 * i + 2, "device %d: [%lld, %lld)", i, (long long)r.start,
                  (long long)r.end);
    }
    tl_range r;
    ASSERT_ERR(tl_device_batch_rows(w.d, 12, 8, 0, &r), TL_EINVAL, "`per_process_batch_size` should be divisible");
    ASSERT_ERR(tl_device_batch_rows(w.d, 16, 8, 9, &r), TL_ENOTFOUND, "device cpu:9 is not in the mesh");
    world_free(&w);
}

Test(shard, device_rows_across_processes)
{
    /* DataParallel D = 8, P = 4, L = 2: device i holds local rows
     * [2 (i % 2), 2 (i % 2) + 2) of its process's 4 */
    world w = dp_world(8, 4, 0);
    for (int i = 0; i < 8; i++) {
        tl_range r = rows_of(&w, 4, 2, i);
        cr_assert(r.start == 2 * (i % 2) && r.end == r.start + 2);
    }
    world_free(&w);

    /* ModelParallel (2, 4), P = 4, L = 2: replicas span processes, every
     * device holds its process's whole local batch */
    w = mp_world(8, 2, 4, 0);
    for (int i = 0; i < 8; i++) {
        tl_range r = rows_of(&w, 3, 2, i);
        cr_assert(r.start == 0 && r.end == 3);
    }
    world_free(&w);

    /* ModelParallel (4, 2), P = 2, L = 4: each process holds 2 replicas */
    w = mp_world(8, 4, 2, 1);
    for (int i = 0; i < 8; i++) {
        tl_range r = rows_of(&w, 6, 4, i);
        int b = i / 2;
        cr_assert(r.start == 3 * (b % 2) && r.end == r.start + 3, "device %d: [%lld, %lld)", i,
                  (long long)r.start, (long long)r.end);
    }
    world_free(&w);

    /* R = 3 replicas over 2 processes cannot split */
    w = mp_world(6, 3, 2, 0);
    tl_range r;
    ASSERT_ERR(tl_device_batch_rows(w.d, 6, 3, 0, &r), TL_EINVAL,
               "the batch dimension of the mesh should be divisible by the number of processes");
    world_free(&w);
}

Test(shard, device_rows_of_a_foreign_mesh_order)
{
    /* a mesh whose batch rows are not the processes' device blocks */
    tl_devices *devs = tu_devices(2, 2, 0);
    tl_mesh *m;
    ASSERT_OK(tl_mesh_create(devs, (int64_t[]){4}, 1, (const char *[]){"batch"}, 1, (int[]){0, 2, 1, 3}, 4, &m));
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.device_mesh = m;
    o.process = (tl_process){2, 0};
    tl_distribution *d;
    ASSERT_OK(tl_data_parallel_create(&o, &d));
    tl_range r;
    ASSERT_ERR(tl_device_batch_rows(d, 4, 2, 2, &r), TL_EINVAL, "the mesh does not place its process's data");
    ASSERT_ERR(tl_device_batch_rows(d, 4, 1, 3, &r), TL_EINVAL, "belongs to process 3, but there are 2");
    tl_distribution_destroy(d);
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

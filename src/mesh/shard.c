/* shard.c — how input batches are cut: across processes (Keras'
 * distribute_dataset of v3.15.1 and HEAD's data adapters, TensorFlow's legacy
 * batch_sizes_for_worker) and, inside a process, across its devices. */
#include "mesh_int.h"

static const char *input_type_name(const tl_shard_input *in, tl_input_kind kind)
{
    if (in != NULL && in->type_name != NULL)
        return in->type_name;
    switch (kind) {
    case TL_INPUT_DATASET: return "tensorflow.python.data.ops.dataset_ops.DatasetV2";
    case TL_INPUT_ARRAY: return "numpy.ndarray";
    case TL_INPUT_PY_DATASET: return "keras.utils.PyDataset";
    default: return "object";
    }
}

static bool valid_kind(tl_input_kind kind)
{
    return kind == TL_INPUT_DATASET || kind == TL_INPUT_ARRAY || kind == TL_INPUT_PY_DATASET ||
           kind == TL_INPUT_OTHER;
}

static bool sharding_on(const tl_distribution *d)
{
    return d != NULL && tl_distribution_is_multi_process(d) && tl_distribution_auto_shard_dataset(d);
}

tl_status tl_data_adapter_check(const tl_distribution *d, tl_input_kind kind, tl_keras_version version)
{
    if (!valid_kind(kind))
        return tl_error(TL_EINVAL, "unknown input kind %d", (int)kind);
    if (version != TL_KERAS_3_15 && version != TL_KERAS_HEAD)
        return tl_error(TL_EINVAL, "unknown Keras version selector %d", (int)version);
    if (!sharding_on(d))
        return TL_OK;
    bool ok = kind == TL_INPUT_DATASET ||
              (version == TL_KERAS_HEAD && (kind == TL_INPUT_ARRAY || kind == TL_INPUT_PY_DATASET));
    if (ok)
        return TL_OK;
    return tl_error(TL_EINVAL,
                    "When using a multi-worker distribution with auto-sharding enabled, the data must be provided "
                    "as a `tf.data.Dataset` instance. Received: type(x)=<class '%s'>. If the dataset is already "
                    "sharded across workers, then set `distribution.auto_shard_dataset = False`.",
                    input_type_name(NULL, kind));
}

static tl_status unknown_batch(void)
{
    return tl_error(TL_EINVAL, "The batch size of the input dataset is unknown. Please config the batch size for "
                               "the input dataset, e.g via `dataset.batch(batch_size)`");
}

static tl_status not_divisible(int64_t G, const char *what, const char *name, int n)
{
    return tl_error(TL_EINVAL,
                    "Global batch size must be divisible by the number of %s. `global_batch_size`=%lld and "
                    "`%s`=%d",
                    what, (long long)G, name, n);
}

static void slice_plan(tl_shard_plan *out, int64_t G, int S, int index)
{
    *out = (tl_shard_plan){TL_SHARD_SLICE, G, G / S, S, index};
}

/* v3.15.1's Distribution.distribute_dataset, after the identity case. */
static tl_status plan_3_15(const tl_distribution *d, const tl_shard_input *in, tl_shard_plan *out)
{
    if (in->kind != TL_INPUT_DATASET)
        return tl_error(TL_EINVAL,
                        "The dataset type <class '%s'> is not supported for auto-sharding in multi-process "
                        "setting.",
                        input_type_name(in, in->kind));
    int64_t G = in->global_batch;
    if (!in->batched || G < 1)
        return unknown_batch();
    int R = 0;
    tl_status st = tl_distribution_num_model_replicas(d, &R);
    if (st != TL_OK)
        return st;
    int P = tl_distribution_num_processes(d);
    if (R == 1) {
        *out = (tl_shard_plan){TL_SHARD_REPLICATE, G, G, 1, 0};
        return TL_OK;
    }
    if (R >= P) {
        if (G % P != 0)
            return not_divisible(G, "processes", "num_processes", P);
        slice_plan(out, G, P, tl_distribution_process_id(d));
        return TL_OK;
    }
    if (G % R != 0)
        return not_divisible(G, "replicas", "num_model_replicas", R);
    slice_plan(out, G, R, tl_distribution_shard_of(d, tl_distribution_process_id(d), R));
    return TL_OK;
}

/* HEAD's tf.data and NumPy adapters, after the identity case. */
static tl_status plan_head(const tl_distribution *d, const tl_shard_input *in, tl_shard_plan *out)
{
    if (in->kind == TL_INPUT_PY_DATASET || in->kind == TL_INPUT_OTHER)
        return tl_error(TL_ENOTIMPL, "sharding of <class '%s'> input at Keras HEAD is not modelled",
                        input_type_name(in, in->kind));
    int64_t G = in->global_batch;
    if (in->kind == TL_INPUT_DATASET && (!in->batched || G < 1))
        return unknown_batch();
    if (G < 1)
        return tl_error(TL_EINVAL, "batch_size must be >= 1 for array input, got %lld", (long long)G);
    int R = 0, S = 0;
    tl_status st = tl_distribution_num_model_replicas(d, &R);
    if (st == TL_OK)
        st = tl_distribution_num_data_shards(d, &S);
    if (st != TL_OK)
        return st;
    if (R == 1) {
        *out = (tl_shard_plan){TL_SHARD_REPLICATE, G, G, 1, 0};
        return TL_OK;
    }
    int index = tl_distribution_shard_of(d, tl_distribution_process_id(d), R);
    if (in->kind == TL_INPUT_ARRAY) {
        *out = (tl_shard_plan){TL_SHARD_ROUND_ROBIN, G, G, S, index};
        return TL_OK;
    }
    if (G % S != 0)
        return not_divisible(G, "shards", "num_shards", S);
    slice_plan(out, G, S, index);
    return TL_OK;
}

tl_status tl_distribute_dataset_plan(const tl_distribution *d, const tl_shard_input *in,
                                     tl_keras_version version, tl_shard_plan *out)
{
    *out = (tl_shard_plan){TL_SHARD_IDENTITY, -1, -1, 1, 0};
    if (in == NULL)
        return tl_error(TL_EINVAL, "distribute_dataset: the input is NULL");
    if (!valid_kind(in->kind))
        return tl_error(TL_EINVAL, "unknown input kind %d", (int)in->kind);
    if (version != TL_KERAS_3_15 && version != TL_KERAS_HEAD)
        return tl_error(TL_EINVAL, "unknown Keras version selector %d", (int)version);
    int64_t G = in->global_batch >= 1 ? in->global_batch : -1;
    *out = (tl_shard_plan){TL_SHARD_IDENTITY, G, G, 1, 0};
    if (!sharding_on(d))
        return TL_OK;
    tl_shard_plan plan;
    tl_status st = version == TL_KERAS_3_15 ? plan_3_15(d, in, &plan) : plan_head(d, in, &plan);
    if (st == TL_OK)
        *out = plan;
    return st;
}

static void put_range(tl_range *out, int64_t cap, int64_t *count, int64_t start, int64_t end)
{
    if (*count < cap)
        out[*count] = (tl_range){start, end};
    (*count)++;
}

tl_status tl_shard_batches(const tl_shard_plan *plan, int64_t n, tl_range *out, int64_t cap, int64_t *count)
{
    *count = 0;
    if (n < 0 || cap < 0 || (out == NULL && cap > 0))
        return tl_error(TL_EINVAL, "shard batches: n (%lld) and cap (%lld) must be >= 0, with an output for cap > 0",
                        (long long)n, (long long)cap);
    int64_t G = plan->global_batch;
    int S = plan->num_slices, k = plan->slice_index;
    if (G < 1)
        return tl_error(TL_EINVAL, "shard batches: the global batch size must be known and >= 1, got %lld",
                        (long long)G);
    if (S < 1 || k < 0 || k >= S || (plan->action == TL_SHARD_SLICE && (G % S != 0 || plan->slice_size != G / S)))
        return tl_error(TL_EINVAL,
                        "shard batches: inconsistent plan (global_batch=%lld, slice_size=%lld, num_slices=%d, "
                        "slice_index=%d)",
                        (long long)G, (long long)plan->slice_size, S, k);
    switch (plan->action) {
    case TL_SHARD_SLICE: {
        /* rebatch(G / S) is unbatch().batch(G / S) over the whole stream;
         * sub-batch j goes to shard j % S. */
        int64_t g = G / S;
        for (int64_t j = k; j * g < n; j += S)
            put_range(out, cap, count, j * g, j * g + g < n ? j * g + g : n);
        return TL_OK;
    }
    case TL_SHARD_ROUND_ROBIN:
        for (int64_t i = k; i * G < n; i += S)
            put_range(out, cap, count, i * G, i * G + G < n ? i * G + G : n);
        return TL_OK;
    case TL_SHARD_IDENTITY:
    case TL_SHARD_REPLICATE:
        for (int64_t i = 0; i * G < n; i++)
            put_range(out, cap, count, i * G, i * G + G < n ? i * G + G : n);
        return TL_OK;
    }
    return tl_error(TL_EINVAL, "shard batches: unknown action %d", (int)plan->action);
}

tl_status tl_batch_sizes_for_worker(int64_t global_batch, int num_workers, int replicas_per_worker,
                                    int worker_index, int64_t *out, int n)
{
    if (global_batch < 0)
        return tl_error(TL_EINVAL, "global_batch_size must be >= 0, got %lld", (long long)global_batch);
    if (num_workers < 1 || replicas_per_worker < 1)
        return tl_error(TL_EINVAL, "num_workers (%d) and num_replicas_per_worker (%d) must be >= 1", num_workers,
                        replicas_per_worker);
    if (worker_index < 0 || worker_index >= num_workers)
        return tl_error(TL_EINVAL, "worker_index must be in [0, %d), got %d", num_workers, worker_index);
    int64_t N = (int64_t)num_workers * replicas_per_worker;
    if (N > n)
        return tl_error(TL_EINVAL, "batch_sizes_for_worker: %lld sub-batch sizes do not fit in %d entries",
                        (long long)N, n);
    int64_t floor = global_batch / N;
    int64_t num_ceil = global_batch - N * floor;
    int64_t offset = (int64_t)worker_index * replicas_per_worker;
    for (int64_t i = 0; i < N; i++) {
        int64_t j = (i + offset) % N;
        out[i] = j < num_ceil ? floor + 1 : floor;
    }
    return TL_OK;
}

tl_status tl_device_batch_rows(const tl_distribution *d, int64_t local_rows, int local_devices, int device_id,
                               tl_range *rows)
{
    *rows = (tl_range){0, 0};
    if (local_devices < 1 || local_rows < 0)
        return tl_error(TL_EINVAL, "device rows: local_devices (%d) must be >= 1 and local_rows (%lld) >= 0",
                        local_devices, (long long)local_rows);
    int R = 0;
    tl_status st = tl_distribution_num_model_replicas(d, &R);
    if (st != TL_OK)
        return st;
    const tl_mesh *mesh = tl_distribution_mesh(d);
    int a = tl_mesh_axis_index(mesh, tl_distribution_batch_dim_name(d));
    if (a < 0)
        return tl_error(TL_EINVAL, "device rows: batch_dim_name '%s' is not a mesh axis",
                        tl_distribution_batch_dim_name(d));
    int P = tl_distribution_num_processes(d);
    if (R >= P && R % P != 0)
        return tl_error(TL_EINVAL,
                        "If there is more than one replica per process, the batch dimension of the mesh should be "
                        "divisible by the number of processes. Here, batch dimension = %d and number of processes "
                        "= %d",
                        R, P);
    int owner;
    if ((st = tl_mesh_locate(mesh, device_id, local_devices, NULL, &owner)) != TL_OK)
        return st;
    int64_t stride = 1;
    for (int i = a + 1; i < tl_mesh_ndim(mesh); i++)
        stride *= tl_mesh_axis_size(mesh, i);
    int64_t b = (tl_mesh_index_of(mesh, device_id) / stride) % tl_mesh_axis_size(mesh, a);
    if (owner >= P)
        return tl_error(TL_EINVAL, "device cpu:%d belongs to process %d, but there are %d processes "
                                   "(%d devices each)",
                        device_id, owner, P, local_devices);
    int64_t shards = R < P ? R : P;
    int64_t G = local_rows * shards;
    int64_t B = tl_mesh_axis_size(mesh, a);
    if (G % B != 0)
        return tl_error(TL_EINVAL,
                        "`per_process_batch_size` should be divisible by `per_replica_batch_size`: %lld local rows "
                        "make a global batch of %lld, which the %lld blocks of mesh axis '%s' cannot split evenly",
                        (long long)local_rows, (long long)G, (long long)B, tl_distribution_batch_dim_name(d));
    int64_t block = G / B;
    int64_t first = (int64_t)tl_distribution_shard_of(d, owner, R) * local_rows;
    int64_t start = b * block - first;
    if (start < 0 || start + block > local_rows)
        return tl_error(TL_EINVAL,
                        "device cpu:%d holds global rows [%lld, %lld) but its process %d reads rows [%lld, %lld): "
                        "the mesh does not place its process's data on it",
                        device_id, (long long)(b * block), (long long)(b * block + block),
                        owner, (long long)first, (long long)(first + local_rows));
    *rows = (tl_range){start, start + block};
    return TL_OK;
}

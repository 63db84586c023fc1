/*
 * tpuloop/distribution.h — Keras' distribution API: the process a run is
 * (initialize), DataParallel and ModelParallel, the thread's current
 * distribution, and how input batches are cut across processes and devices.
 *
 * A distribution ties a device mesh to a rule for placing data and variables.
 * DataParallel puts the batch dimension of every input on its mesh's first
 * axis and replicates variables; ModelParallel takes its mesh and the variable
 * layouts from a LayoutMap and puts the batch on the axis batch_dim_name.
 * R, the number of model replicas, is the device count for DataParallel and
 * the size of the batch axis for ModelParallel; P is the number of processes.
 * Each process reads shard data_shard_id of every global batch: pid when
 * R >= P, else pid / (P / R), so that the processes of one replica group see
 * the same rows.
 *
 * The rules and messages are Keras 3.15.1's; tl_keras_version selects HEAD's
 * dataset sharding where it differs, and the ModelParallel option
 * legacy_shard_id reproduces the <= 3.14.0 shard id.
 *
 *     tl_data_parallel_options o;
 *     tl_data_parallel_options_init(&o);
 *     o.discover = devs;                        // 8 devices, one process
 *     tl_distribution *dp;
 *     if (tl_data_parallel_create(&o, &dp) != TL_OK)
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *
 *     tl_distribution_scope sc;
 *     tl_distribution_scope_enter(dp, &sc);     // Keras' `with dp.scope():`
 *     tl_layout *l;
 *     tl_distribution_get_data_layout(tl_distribution_current(), (int64_t[]){16, 5}, 2, &l);
 *     // ('batch', None) on the (8,) mesh; l is the caller's
 *     tl_layout_destroy(l);
 *     tl_distribution_scope_exit(&sc);
 *
 *     tl_shard_input in = {TL_INPUT_DATASET, true, 16, NULL};
 *     tl_shard_plan plan;
 *     tl_distribute_dataset_plan(dp, &in, TL_KERAS_3_15, &plan);  // identity: one process
 *     tl_distribution_destroy(dp);
 */
#ifndef TPULOOP_DISTRIBUTION_H
#define TPULOOP_DISTRIBUTION_H

#include "tpuloop/base.h"
#include "tpuloop/devices.h"
#include "tpuloop/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- processes and initialize ------------------------------------------- */

/* The process a run is: num_processes >= 1, 0 <= process_id < num_processes.
 * A run that never initialized is {1, 0}. */
typedef struct tl_process {
    int num_processes;
    int process_id;
} tl_process;

/*
 * What Keras' initialize() hands the backend after the environment fallback:
 * each argument left as None (NULL / -1) is taken from
 * KERAS_DISTRIBUTION_JOB_ADDRESSES, KERAS_DISTRIBUTION_NUM_PROCESSES or
 * KERAS_DISTRIBUTION_PROCESS_ID, only when that variable is present; explicit
 * arguments always win.
 */
typedef struct tl_init_request {
    const char *job_addresses; /* NULL = None; borrowed from the argument or envp */
    int num_processes;         /* -1 = None */
    int process_id;            /* -1 = None */
} tl_init_request;

/*
 * Applies the environment fallback. envp is a NULL-terminated "NAME=value"
 * array (environ), or NULL for an empty environment.
 * Errors (TL_EINVAL): a variable's value is not a decimal integer —
 * "invalid literal for int() with base 10: 'x' (KERAS_DISTRIBUTION_PROCESS_ID)";
 * num_processes or process_id below -1.
 */
TL_API tl_status tl_initialize_resolve(const char *job_addresses, int num_processes, int process_id,
                                       const char *const *envp, tl_init_request *out);

/*
 * Keras' initialize(job_addresses, num_processes, process_id) with the JAX
 * backend's checks, minus the distributed runtime itself:
 *
 *   1. the environment fallback of tl_initialize_resolve;
 *   2. job_addresses non-empty with a ',' is split on ','; with num_processes
 *      given, the entry count must equal it, else TL_EINVAL "The provided
 *      job_addresses ['a:1', 'b:2'] has 2 jobs, but num_processes is 3"; the
 *      coordinator is the first entry. Otherwise the coordinator is the whole
 *      string ("" for None);
 *   3. num_processes defaults to 1 and process_id to 0; TL_EINVAL unless
 *      num_processes >= 1 and 0 <= process_id < num_processes.
 *
 * out receives the process; coordinator (n bytes, may be NULL with n == 0)
 * the coordinator address, TL_EINVAL when it does not fit.
 */
TL_API tl_status tl_initialize(const char *job_addresses, int num_processes, int process_id,
                               const char *const *envp, tl_process *out, char *coordinator, size_t n);

/* ---- distributions ------------------------------------------------------ */

typedef enum {
    TL_DISTRIBUTION_BASE = 0,  /* Keras' abstract Distribution */
    TL_DATA_PARALLEL = 1,
    TL_MODEL_PARALLEL = 2
} tl_distribution_kind;

typedef struct tl_distribution tl_distribution;

typedef struct tl_data_parallel_options {
    const tl_mesh *device_mesh;   /* borrowed; outlives the distribution. Wins over devices */
    const int *devices;           /* (ndevices) device ids, row-major; NULL or 0 entries: discover */
    int ndevices;
    const int64_t *devices_shape; /* (devices_ndim) shape of the device array; NULL: (ndevices,) */
    int devices_ndim;
    const tl_devices *discover;   /* list_devices() when neither is given; checks devices' ids */
    bool auto_shard_dataset;      /* default true */
    tl_process process;           /* default {1, 0} */
} tl_data_parallel_options;

typedef struct tl_model_parallel_options {
    const tl_layout_map *layout_map; /* required; borrowed, outlives the distribution */
    const char *batch_dim_name;      /* NULL or "": the mesh's first axis */
    bool auto_shard_dataset;         /* default true */
    tl_process process;              /* default {1, 0} */
    bool legacy_shard_id;            /* Keras <= 3.14.0: data_shard_id = pid % (P / R) */
} tl_model_parallel_options;

/* Fill in the defaults: everything NULL/0 except auto_shard_dataset = true and
 * process = {1, 0}. */
TL_API void tl_data_parallel_options_init(tl_data_parallel_options *o);
TL_API void tl_model_parallel_options_init(tl_model_parallel_options *o);

/*
 * Keras' DataParallel(device_mesh, devices, auto_shard_dataset). The mesh is,
 * in this order of precedence:
 *   1. o->device_mesh (o->devices is then ignored, as Keras does). A mesh of
 *      more than one axis logs the warning "Expect the input mesh to be 1D, but
 *      received mesh.devices.ndim=2. The first axis will be used for
 *      data-parallel sharding." and uses the first axis;
 *   2. o->devices (ndevices > 0): a mesh of shape devices_shape (default
 *      (ndevices,)) with the single axis "batch" — a 2-D device array thus
 *      fails with "Shape and axis_names should have same size";
 *   3. tl_list_devices(o->discover), as 2.
 * batch_dim_name is the mesh's first axis. A mesh built here is owned by the
 * distribution.
 * Errors: those of tl_mesh_create and tl_list_devices; TL_EINVAL when none of
 * the three sources is given, for a negative ndevices or devices_ndim, and for
 * an invalid process; TL_ENOMEM.
 */
TL_API tl_status tl_data_parallel_create(const tl_data_parallel_options *o, tl_distribution **out);

/*
 * Keras' ModelParallel(layout_map=, batch_dim_name=, auto_shard_dataset=). The
 * mesh is the map's. batch_dim_name is not checked against the mesh here (as
 * in Keras; tl_distribution_num_model_replicas and get_data_layout report it).
 * Errors (TL_EINVAL): no layout_map — "You must specify a layout_map
 * argument."; in a multi-process run with P > R and P % R != 0 — "If
 * `num_processes` is greater than `num_model_replicas`, `num_processes` must
 * be divisible by `num_model_replicas`. Got num_processes=4,
 * num_model_replicas=3." (Keras 3.15's check; 3.14.1's inverted one is not
 * copied); a multi-process batch_dim_name that is not a mesh axis; an invalid
 * process. TL_ENOMEM.
 */
TL_API tl_status tl_model_parallel_create(const tl_model_parallel_options *o, tl_distribution **out);

/*
 * Keras' abstract Distribution(device_mesh, batch_dim_name): its layouts,
 * num_model_replicas, data_shard_id and dataset sharding return TL_ENOTIMPL.
 * mesh is borrowed (required); batch_dim_name may be NULL.
 * Errors: TL_EINVAL for a NULL mesh or an invalid process; TL_ENOMEM.
 */
TL_API tl_status tl_distribution_create(const tl_mesh *mesh, const char *batch_dim_name, tl_process process,
                                        tl_distribution **out);

/* Accepts NULL. When d is this thread's current distribution, the slot is
 * cleared; d must not be current on another thread. */
TL_API void tl_distribution_destroy(tl_distribution *d);

TL_API tl_distribution_kind tl_distribution_kind_of(const tl_distribution *d);
/* The mesh (borrowed or owned by d); valid while d lives. */
TL_API const tl_mesh *tl_distribution_mesh(const tl_distribution *d);
/* The batch axis name (NULL for a base distribution given none). */
TL_API const char *tl_distribution_batch_dim_name(const tl_distribution *d);
/* ModelParallel's layout map; NULL for the other kinds. */
TL_API const tl_layout_map *tl_distribution_layout_map(const tl_distribution *d);
TL_API bool tl_distribution_auto_shard_dataset(const tl_distribution *d);
TL_API void tl_distribution_set_auto_shard_dataset(tl_distribution *d, bool on);
TL_API int tl_distribution_num_processes(const tl_distribution *d);
TL_API int tl_distribution_process_id(const tl_distribution *d);
TL_API bool tl_distribution_is_multi_process(const tl_distribution *d);

/*
 * R: DataParallel, the mesh's device count; ModelParallel, the size of the
 * batch axis. Errors: TL_EINVAL when batch_dim_name is not a mesh axis
 * ("'nope' is not in list"); TL_ENOTIMPL for the base kind.
 */
TL_API tl_status tl_distribution_num_model_replicas(const tl_distribution *d, int *out);

/* The shard of the data this process reads: pid when R >= P, else
 * pid / (P / R) (pid % (P / R) with legacy_shard_id). Errors: those of
 * tl_distribution_num_model_replicas. */
TL_API tl_status tl_distribution_data_shard_id(const tl_distribution *d, int *out);

/* Keras HEAD's num_data_shards: min(R, P). Errors: as above. */
TL_API tl_status tl_distribution_num_data_shards(const tl_distribution *d, int *out);

/*
 * The layout of an input batch of shape (rank): first dimension on
 * batch_dim_name, the others None, on d's mesh. *out is the caller's
 * (tl_layout_destroy). Errors: TL_EINVAL for rank < 1 (Keras: IndexError);
 * "Invalid axis names for Layout" when batch_dim_name is not a mesh axis;
 * TL_ENOTIMPL for the base kind; TL_ENOMEM.
 */
TL_API tl_status tl_distribution_get_data_layout(const tl_distribution *d, const int64_t *shape, int rank,
                                                 tl_layout **out);

/* A variable as the layout rules see it. */
typedef struct tl_variable_desc {
    const char *path;        /* "sequential/dense/kernel"; NULL: no LayoutMap lookup */
    int rank;
    const int64_t *shape;    /* (rank); not used by the rules, kept for callers' checks */
    const tl_layout *layout; /* a layout set on the variable, or NULL */
} tl_variable_desc;

/*
 * The layout a new variable gets: its own layout when set; else (ModelParallel)
 * the LayoutMap's layout for its path; else replicated (rank NULL entries) on
 * d's mesh. *out is a copy the caller destroys.
 * Errors: a LayoutMap lookup error (several keys match); TL_EINVAL for
 * rank < 0; TL_ENOTIMPL for the base kind; TL_ENOMEM.
 */
TL_API tl_status tl_distribution_get_variable_layout(const tl_distribution *d, const tl_variable_desc *v,
                                                     tl_layout **out);

/*
 * The layout an intermediate tensor at path is moved to: DataParallel, none
 * (*out = NULL); ModelParallel, the LayoutMap's (a copy the caller destroys,
 * or NULL). Errors: a LayoutMap lookup error; TL_ENOTIMPL for the base kind;
 * TL_ENOMEM.
 */
TL_API tl_status tl_distribution_get_tensor_layout(const tl_distribution *d, const char *path, tl_layout **out);

/* "<DataParallel device_mesh=<DeviceMesh shape=(8,), axis_names=['batch']>>"
 * (ModelParallel, Distribution likewise); snprintf's contract. */
TL_API int tl_distribution_repr(const tl_distribution *d, char *buf, size_t n);

/* ---- the current distribution (per thread) ------------------------------ */

/* Keras' distribution(): this thread's current distribution, NULL if none. */
TL_API tl_distribution *tl_distribution_current(void);

/* Keras' set_distribution(d): d (borrowed; NULL clears) becomes this thread's
 * current distribution. */
TL_API void tl_distribution_set(tl_distribution *d);

/* Keras' `with d.scope():` — enter makes d current and remembers the previous
 * one in *scope; exit restores it. Call exit on every path out of the block
 * (the early returns of errors included); scopes nest. */
typedef struct tl_distribution_scope {
    tl_distribution *previous;
} tl_distribution_scope;

TL_API void tl_distribution_scope_enter(tl_distribution *d, tl_distribution_scope *scope);
TL_API void tl_distribution_scope_exit(tl_distribution_scope *scope);

/* ---- dataset sharding across processes ---------------------------------- */

/* Which Keras' sharding rules apply. */
typedef enum {
    TL_KERAS_3_15 = 0, /* v3.15.1, the default: distribute_dataset in the base class */
    TL_KERAS_HEAD = 1  /* unreleased: in the data adapters, num_data_shards = min(R, P) */
} tl_keras_version;

/* What the user passed as input. */
typedef enum {
    TL_INPUT_DATASET = 0,    /* a tf.data.Dataset */
    TL_INPUT_ARRAY = 1,      /* NumPy arrays */
    TL_INPUT_PY_DATASET = 2, /* a keras.utils.PyDataset */
    TL_INPUT_OTHER = 3       /* anything else (a Python list, a generator) */
} tl_input_kind;

typedef struct tl_shard_input {
    tl_input_kind kind;
    bool batched;          /* false when a component is unbatched (no shape or rank 0) */
    int64_t global_batch;  /* G, the dataset's batch size; -1 when unknown */
    const char *type_name; /* for messages; NULL: the kind's Python type */
} tl_shard_input;

typedef enum {
    TL_SHARD_IDENTITY = 0,   /* the input unchanged (one process, or auto-sharding off) */
    TL_SHARD_REPLICATE = 1,  /* R == 1: every process reads every global batch */
    TL_SHARD_SLICE = 2,      /* each global batch cut into num_slices; this process reads slice_index */
    TL_SHARD_ROUND_ROBIN = 3 /* HEAD, arrays: batch i goes to process shard i % num_slices */
} tl_shard_action;

typedef struct tl_shard_plan {
    tl_shard_action action;
    int64_t global_batch; /* G (-1 when unknown, IDENTITY only) */
    int64_t slice_size;   /* rows per local batch: G / num_slices for SLICE, G otherwise */
    int num_slices;       /* S: P or R (SLICE), min(R, P) (HEAD); 1 for IDENTITY, REPLICATE */
    int slice_index;      /* the slice this process reads; 0 for IDENTITY, REPLICATE */
} tl_shard_plan;

/*
 * Keras' distribute_dataset (3.15) or the tf.data / array adapter's sharding
 * (HEAD) for d (NULL: no distribution, identity):
 *   one process, or auto_shard_dataset off      IDENTITY
 *   3.15: input not a tf.data.Dataset           TL_EINVAL "The dataset type <class 'list'> is not supported
 *                                               for auto-sharding in multi-process setting."
 *   HEAD: arrays                                ROUND_ROBIN over min(R, P), slice data_shard_id
 *   HEAD: PyDataset, other                      TL_ENOTIMPL (not modelled)
 *   unbatched, or G < 0                         TL_EINVAL "The batch size of the input dataset is unknown. ..."
 *   R == 1                                      REPLICATE
 *   3.15, R >= P: S = P, slice pid, G % P == 0  else TL_EINVAL "Global batch size must be divisible by the number
 *                                               of processes. `global_batch_size`=7 and `num_processes`=2"
 *   3.15, R < P: S = R, slice data_shard_id,    else "... divisible by the number of replicas.
 *                G % R == 0                     `global_batch_size`=5 and `num_model_replicas`=2"
 *   HEAD: S = min(R, P), slice data_shard_id    else "... divisible by the number of shards.
 *                                               `global_batch_size`=7 and `num_shards`=2"
 * Other errors: those of tl_distribution_num_model_replicas; TL_EINVAL for a
 * NULL input or an unknown version or kind.
 */
TL_API tl_status tl_distribute_dataset_plan(const tl_distribution *d, const tl_shard_input *in,
                                            tl_keras_version version, tl_shard_plan *out);

/*
 * The data adapter's check before any sharding (Keras 3.11–3.15): in a
 * multi-process run with auto-sharding on, input that is not a tf.data.Dataset
 * is TL_EINVAL "When using a multi-worker distribution with auto-sharding
 * enabled, the data must be provided as a `tf.data.Dataset` instance.
 * Received: type(x)=<class 'numpy.ndarray'>. ..." HEAD also accepts arrays and
 * PyDataset. d NULL, one process, or auto-sharding off: TL_OK.
 */
TL_API tl_status tl_data_adapter_check(const tl_distribution *d, tl_input_kind kind, tl_keras_version version);

/* A half-open range of element (or row) indices. */
typedef struct tl_range {
    int64_t start;
    int64_t end;
} tl_range;

/*
 * The local batches this process reads from a stream of n elements batched by
 * plan->global_batch (the last global batch may be partial), as element
 * ranges. SLICE is tf.data's rebatch: unbatch().batch(G / S), keeping
 * sub-batches slice_index, slice_index + S, ...; a partial last global batch
 * gives only its first ceil(k / (G / S)) shards a (possibly short) batch, so
 * processes can see different step counts. ROUND_ROBIN keeps batches
 * slice_index, slice_index + S, ... whole.
 * Writes at most cap ranges to out (may be NULL with cap 0) and the total in
 * *count. Errors: TL_EINVAL for n < 0, cap < 0, or a plan whose global_batch is
 * not positive.
 */
TL_API tl_status tl_shard_batches(const tl_shard_plan *plan, int64_t n, tl_range *out, int64_t cap,
                                  int64_t *count);

/*
 * TensorFlow's batch_sizes_for_worker (legacy DataParallel sharding, Keras <=
 * 3.14): the sizes of the N = num_workers * replicas_per_worker sub-batches
 * the worker cuts each global batch into. Worker 0's vector is G % N copies of
 * G / N + 1 followed by G / N; worker w's is that rotated left by
 * w * replicas_per_worker. Writes N sizes to out (n entries available).
 * Errors: TL_EINVAL for a negative G, num_workers or replicas_per_worker < 1,
 * worker_index outside [0, num_workers), n < N.
 */
TL_API tl_status tl_batch_sizes_for_worker(int64_t global_batch, int num_workers, int replicas_per_worker,
                                           int worker_index, int64_t *out, int n);

/*
 * §11.5: which rows of its process's local batch (local_rows rows) the device
 * device_id holds, every process having local_devices devices. The global
 * batch is local_rows * P when R >= P and local_rows * R otherwise; the device
 * at batch-axis coordinate b holds global rows [b * G / R, (b + 1) * G / R),
 * replicated over the other axes; *rows is that range less the first global
 * row of the owning process (device_id / local_devices).
 * Errors (TL_EINVAL): R >= P with R % P != 0 ("... the batch dimension of the
 * mesh should be divisible by the number of processes"); local_rows not
 * divisible by R / P ("`per_process_batch_size` should be divisible by
 * `per_replica_batch_size`"); the device is not in the mesh, its owner is not
 * a process of d, or its rows are not its process's; local_devices < 1 or
 * local_rows < 0; those of tl_distribution_num_model_replicas.
 */
TL_API tl_status tl_device_batch_rows(const tl_distribution *d, int64_t local_rows, int local_devices,
                                      int device_id, tl_range *rows);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_DISTRIBUTION_H */

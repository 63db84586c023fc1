/*
 * tpuloop/topology.h — hosts, devices, replicas and partitions, and the input
 * plan of every mode, with TensorFlow's TPUEstimator rules.
 *
 * From a resolved configuration and the device list, a topology says how many
 * hosts H there are, how many devices each has (Cph), how many replicas R
 * (C / num_cores_per_replica with model parallelism, else C), how many
 * replicas live on a host (Rph, 0 when a replica spans hosts), and for every
 * device its (host, replica, partition). A replica's devices are consecutive:
 * device d belongs to replica d / ncpr as its partition (logical core)
 * d % ncpr.
 *
 * An input plan says, for TRAIN, EVAL or PREDICT, how input_fn is deployed
 * (spec tpu_estimator.md §4.1): how many times it is called, on which host,
 * with which params['batch_size'], which replicas each call feeds, and the
 * batch the model_fn sees — and it runs every check of §4.4 with
 * TensorFlow's message, lazily per mode, as TensorFlow does.
 *
 *     tl_topology *topo;
 *     if (tl_topology_create(tl_config_get(cfg), NULL, &topo) != TL_OK) ...
 *     tl_input_plan *plan;
 *     if (tl_input_plan_create(topo, tl_config_get(cfg), TL_MODE_TRAIN, &plan) != TL_OK)
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *     // PER_HOST_V1 on 4 hosts x 8 devices, G = 512: 4 calls of 128, model_fn 16
 *     tl_input_plan_destroy(plan);
 *     tl_topology_destroy(topo);
 */
#ifndef TPULOOP_TOPOLOGY_H
#define TPULOOP_TOPOLOGY_H

#include "tpuloop/base.h"
#include "tpuloop/config.h"
#include "tpuloop/devices.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_MAX_RANK 8

typedef enum { TL_MODE_TRAIN = 0, TL_MODE_EVAL = 1, TL_MODE_PREDICT = 2 } tl_mode;

/* TensorFlow's ModeKeys: "train", "eval", "infer". */
TL_API const char *tl_mode_name(tl_mode m);

/* Where a device sits. */
typedef struct tl_place {
    int device;    /* global device id */
    int host;
    int replica;
    int partition; /* logical core within the replica, 0 without model parallelism */
} tl_place;

typedef struct tl_topology tl_topology;

/*
 * Builds the topology of a resolved configuration. devs may be NULL: the
 * devices are then made from rc->devices and rc->num_hosts (this process is
 * host 0). Checks, in TensorFlow's order (§4.4): num_cores_per_replica larger
 * than the devices (TL_EINVAL "The num of cores required by the model
 * parallelism ... is larger than the total num of TPU cores in the system"),
 * not dividing them (TL_ERUNTIME), num_shards different from the replicas
 * (TL_EINVAL "TPUConfig.num_shards is not set correctly ..."), and, beyond
 * TensorFlow (whose hosts always hold a power of two cores), a replica that
 * would straddle hosts unevenly (TL_EINVAL). num_shards == 1 without
 * num_cores_per_replica gives TensorFlow's one-core context with its warning.
 * Errors: those, TL_ENOMEM, and tl_devices_create's.
 */
TL_API tl_status tl_topology_create(const tl_run_config *rc, const tl_devices *devs, tl_topology **out);

/* Accepts NULL. */
TL_API void tl_topology_destroy(tl_topology *topo);

TL_API int tl_topology_num_hosts(const tl_topology *topo);
TL_API int tl_topology_devices_per_host(const tl_topology *topo);
TL_API int tl_topology_num_devices(const tl_topology *topo);
/* 0 when num_cores_per_replica is None. */
TL_API int tl_topology_num_cores_per_replica(const tl_topology *topo);
/* TensorFlow's model_parallelism_enabled: use_tpu and num_cores_per_replica set. */
TL_API bool tl_topology_model_parallel(const tl_topology *topo);
TL_API int tl_topology_num_replicas(const tl_topology *topo);
/* 0 when a replica spans hosts. */
TL_API int tl_topology_replicas_per_host(const tl_topology *topo);
/* num_cores_per_replica > devices per host. */
TL_API bool tl_topology_replica_spans_hosts(const tl_topology *topo);
/* TensorFlow's _OneCoreTPUContext (num_shards == 1, no num_cores_per_replica). */
TL_API bool tl_topology_one_core(const tl_topology *topo);
/* Intra-op threads per device (intra_op_parallelism_threads, 0 resolved:
 * the cores of the affinity mask over the host's devices, at least 1). */
TL_API int tl_topology_intra_op_threads(const tl_topology *topo);
/* The core that thread `thread` (1 .. threads - 1; thread 0 is the device's
 * own worker) of device `device` is pinned to: the host's cores left over by
 * its devices, handed out device by device; -1 when none is left (or the
 * device is unpinned or not this host's), and the thread then runs unpinned. */
TL_API int tl_topology_thread_cpu(const tl_topology *topo, int device, int thread);
/* The place of device d, or NULL when d is out of range. */
TL_API const tl_place *tl_topology_place(const tl_topology *topo, int device);
/* The device of (replica, partition), or -1 when out of range. */
TL_API int tl_topology_device_of(const tl_topology *topo, int replica, int partition);
/* The devices object the topology uses (borrowed). */
TL_API const tl_devices *tl_topology_devices(const tl_topology *topo);

/* One input_fn invocation: TensorFlow's current_input_fn_deployment() is
 * (host device, index, total, num_replicas). */
typedef struct tl_input_call {
    int index;         /* invocation index */
    int host;          /* the host that runs it */
    int first_replica; /* it feeds replicas [first_replica, first_replica + num_replicas) */
    int num_replicas;
} tl_input_call;

typedef struct tl_input_plan {
    tl_mode mode;
    bool on_device;              /* false: the plain Estimator path (use_tpu false, or EVAL with eval_on_tpu false) */
    tl_input_mode input_mode;    /* the deployment in effect; PER_SHARD_V1 acts as PER_HOST_V1 outside TRAIN */
    int64_t global_batch_size;   /* -1 when the mode's batch size is None (plain path only) */
    int input_fn_calls;
    int64_t input_fn_batch_size; /* params['batch_size'] of input_fn; -1 when None */
    int64_t model_fn_batch_size; /* params['batch_size'] of model_fn; -1 when None */
    int replicas_per_call;       /* replicas fed by one call (the 4th deploy entry) */
    int get_next_per_step;       /* PER_HOST_V2: get_next calls per input_fn per device step; else 1 */
    const tl_input_call *calls;  /* (input_fn_calls), in invocation order */
} tl_input_plan;

/*
 * The input plan of mode. Checks (§4.4, §10), each with TensorFlow's message:
 * Except-PER_HOST_V2 model parallelism wider than a host; TRAIN batch None
 * ("`train_batch_size` cannot be `None`") or not divisible by the replicas;
 * EVAL/PREDICT batch None or not divisible (also for SLICED, as the spec
 * recommends, where TensorFlow fails later); EVAL / PREDICT on several hosts
 * outside BROADCAST, SLICED and PER_HOST_V2; SLICED on the plain path.
 * Errors: TL_EINVAL, TL_ENOMEM.
 */
TL_API tl_status tl_input_plan_create(const tl_topology *topo, const tl_run_config *rc, tl_mode mode,
                                      tl_input_plan **out);

/* Accepts NULL. */
TL_API void tl_input_plan_destroy(tl_input_plan *plan);

/* The plan's deployment as TensorFlow spells it ("PER_HOST_V2", "SLICED"), or
 * "CPU" for the plain Estimator path, which has none. */
TL_API const char *tl_input_plan_mode_name(const tl_input_plan *plan);

/* ---- input_partition_dims against the input's structure (§4.3) ---------- */

typedef struct tl_tensor_desc {
    const char *name;             /* the key in a dict structure; NULL otherwise */
    int rank;
    int64_t shape[TL_MAX_RANK];   /* static shape, batch dimension first */
} tl_tensor_desc;

typedef enum {
    TL_STRUCT_NONE = 0,   /* no tensors (e.g. no labels) */
    TL_STRUCT_TENSOR = 1, /* a single tensor */
    TL_STRUCT_LIST = 2,   /* a list/tuple of tensors */
    TL_STRUCT_DICT = 3    /* a dict of named tensors */
} tl_struct_kind;

typedef struct tl_tensor_struct {
    tl_struct_kind kind;
    int count;                     /* 1 for TL_STRUCT_TENSOR */
    const tl_tensor_desc *tensors; /* (count) */
} tl_tensor_struct;

typedef enum {
    TL_PART_REPLICATE = 0, /* None: every core of the replica gets the whole tensor */
    TL_PART_CORE0 = 1,     /* dims with product 1: the whole tensor goes to logical core 0 only */
    TL_PART_TILED = 2      /* split into prod(dims) == num_cores_per_replica tiles */
} tl_part_kind;

typedef struct tl_tensor_partition {
    tl_part_kind kind;
    int rank;
    int64_t dims[TL_MAX_RANK]; /* tiles per dimension (TL_PART_TILED, TL_PART_CORE0) */
} tl_tensor_partition;

/*
 * Matches input_partition_dims (pd; NULL means None: everything replicated)
 * against the features and labels, and says how each tensor is split.
 * feature_parts has room for features->count entries and label_parts for
 * labels->count, in the order of the tensors given. Errors (TL_EINVAL) with
 * TensorFlow's messages: a dict whose keys differ ("TPUConfig.input_partition_dims[0]
 * mismatched feature keys. Expected ..., got ..."), another structure mismatch
 * ("... mismatched the structure of features"), a dims list whose length is
 * not the tensor's rank ("Input partition dims must have the same number of
 * dimensions as the `Tensor` to be partitioned").
 */
TL_API tl_status tl_partition_plan(const tl_partition_dims *pd, int64_t num_cores_per_replica,
                                   const tl_tensor_struct *features, const tl_tensor_struct *labels,
                                   tl_tensor_partition *feature_parts, tl_tensor_partition *label_parts);

/*
 * The tile of logical core `core` of a tensor of `shape` split by `dims`
 * (rank entries each). Tiles are numbered in row-major order of the tile grid
 * (dims [2,4] over [[A,B,C,D],[E,F,G,H]] gives cores 0..7 A..H). A dimension of
 * size S split in d goes greedily: chunks of ceil(S/d), then the remainder,
 * then empty chunks (size 5 in 4: 2, 2, 1, 0). Writes offset[] and size[].
 * Errors: TL_EINVAL when core is outside [0, prod(dims)) or a dim is < 1.
 */
TL_API tl_status tl_partition_tile(const int64_t *shape, const int64_t *dims, int rank, int core,
                                   int64_t *offset, int64_t *size);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_TOPOLOGY_H */

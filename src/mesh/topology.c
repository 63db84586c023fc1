/* topology.c — hosts × devices → replicas × partitions, and the input plan
 * of each mode with TensorFlow's deployment rules and checks (spec
 * tpu_estimator.md §0, §4.1, §4.4, §10). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../base/base_int.h"
#include "tpuloop/topology.h"

struct tl_topology {
    tl_devices *owned;     /* devices made here, or NULL */
    const tl_devices *devs;
    int num_hosts;         /* H */
    int per_host;          /* Cph */
    int num_devices;       /* C */
    int ncpr;              /* 0: None */
    bool model_parallel;   /* use_tpu and ncpr set */
    bool spans_hosts;      /* ncpr > Cph */
    bool one_core;
    int num_replicas;      /* R */
    int replicas_per_host; /* Rph, 0 when a replica spans hosts */
    int threads;           /* intra-op threads per device, resolved */
    tl_place *places;      /* (num_devices) */
};

const char *tl_mode_name(tl_mode m)
{
    switch (m) {
    case TL_MODE_TRAIN: return "train";
    case TL_MODE_EVAL: return "eval";
    case TL_MODE_PREDICT: return "infer";
    }
    return "unknown";
}

static tl_status count_replicas(const tl_run_config *rc, tl_topology *t)
{
    const tl_tpu_config *tc = &rc->tpu;
    int C = t->num_devices;
    if (!t->model_parallel) {
        t->num_replicas = C;
        return TL_OK;
    }
    int64_t ncpr = tc->num_cores_per_replica.value;
    if (ncpr > C)
        return tl_error(TL_EINVAL,
                        "The num of cores required by the model parallelism, specified by "
                        "TPUConfig.num_cores_per_replica, is larger than the total num of TPU cores in the system. "
                        "num_cores_per_replica: %lld, num cores in the system: %d",
                        (long long)ncpr, C);
    if (C % ncpr != 0)
        return tl_error(TL_ERUNTIME,
                        "The num of cores in the system (%d) is not divisible by the num of cores (%lld) required "
                        "by the model parallelism, specified by TPUConfig.num_cores_per_replica. This should never "
                        "happen!",
                        C, (long long)ncpr);
    t->num_replicas = (int)(C / ncpr);
    return TL_OK;
}

tl_status tl_topology_create(const tl_run_config *rc, const tl_devices *devs, tl_topology **out)
{
    *out = NULL;
    const tl_tpu_config *tc = &rc->tpu;
    tl_topology *t = tl_calloc(1, sizeof *t);
    if (t == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    if (devs == NULL) {
        if ((st = tl_devices_create((int)rc->devices, (int)rc->num_hosts, 0, &t->owned)) != TL_OK)
            goto fail;
        devs = t->owned;
    }
    t->devs = devs;
    t->ncpr = tc->num_cores_per_replica.set ? (int)tc->num_cores_per_replica.value : 0;

    if (tc->num_shards.set && tc->num_shards.value == 1 && !tc->num_cores_per_replica.set) {
        /* TensorFlow's _OneCoreTPUContext: one host, one core, one replica. */
        tl_log(TL_LOG_WARN, "Setting TPUConfig.num_shards==1 is an unsupported behavior. Please fix as soon as "
                            "possible (leaving num_shards as None.)");
        t->one_core = true;
        t->num_hosts = t->per_host = t->num_devices = t->num_replicas = t->replicas_per_host = 1;
    } else {
        t->num_hosts = tl_devices_num_hosts(devs);
        t->per_host = tl_devices_per_host(devs);
        t->num_devices = tl_devices_count(devs);
        t->model_parallel = rc->use_tpu && t->ncpr > 0;
        t->spans_hosts = t->ncpr > t->per_host;
        if ((st = count_replicas(rc, t)) != TL_OK)
            goto fail;
        if (tc->num_shards.set && tc->num_shards.value != t->num_replicas) {
            st = tl_error(TL_EINVAL,
                          "TPUConfig.num_shards is not set correctly. According to TPU system metadata for "
                          "Tensorflow master (%s): num_replicas should be (%d), got (%lld). For "
                          "non-model-parallelism, num_replicas should be the total num of TPU cores in the system. "
                          "For model-parallelism, the total number of TPU cores should be num_cores_per_replica * "
                          "num_replicas. Please set it accordingly or leave it as `None`",
                          rc->master ? rc->master : "", t->num_replicas, (long long)tc->num_shards.value);
            goto fail;
        }
        if (t->model_parallel && tc->per_host_input_for_training != TL_PER_HOST_V2 && t->ncpr > t->per_host) {
            st = tl_error(TL_EINVAL,
                          "Except the PER_HOST_V2 mode, the num of cores required by model parallelism specified by "
                          "TPUConfig.num_cores_per_replica should be less than or equal to the num_cores_per_host. "
                          "num_cores_per_replica: %d, num_cores_per_host: %d",
                          t->ncpr, t->per_host);
            goto fail;
        }
        /* TPU hosts hold a power of two cores, so TensorFlow never meets a
         * replica that straddles hosts unevenly; virtual device counts can. */
        if (t->model_parallel && ((t->ncpr <= t->per_host && t->per_host % t->ncpr != 0) ||
                                  (t->ncpr > t->per_host && t->ncpr % t->per_host != 0))) {
            st = tl_error(TL_EINVAL,
                          "num_cores_per_replica=%d with %d devices per host: a replica must lie on one host or "
                          "span whole hosts, so one of %d and %d must divide the other",
                          t->ncpr, t->per_host, t->ncpr, t->per_host);
            goto fail;
        }
        t->replicas_per_host = t->model_parallel ? t->num_replicas / t->num_hosts : t->per_host;
    }

    /* 0: the cores of the affinity mask shared among the host's devices. */
    t->threads = (int)rc->intra_op_parallelism_threads;
    if (t->threads == 0) {
        t->threads = tl_available_cpus() / t->per_host;
        t->threads = t->threads < 1 ? 1 : t->threads;
    }
    t->places = tl_calloc((size_t)t->num_devices, sizeof *t->places);
    if (t->places == NULL) {
        st = tl_error_oom();
        goto fail;
    }
    for (int d = 0; d < t->num_devices; d++) {
        tl_place *p = &t->places[d];
        p->device = d;
        p->host = d / t->per_host;
        p->replica = t->model_parallel ? d / t->ncpr : d;
        p->partition = t->model_parallel ? d % t->ncpr : 0;
    }
    *out = t;
    return TL_OK;
fail:
    tl_topology_destroy(t);
    return st;
}

void tl_topology_destroy(tl_topology *topo)
{
    if (topo == NULL)
        return;
    tl_devices_destroy(topo->owned);
    tl_free(topo->places);
    tl_free(topo);
}

int tl_topology_num_hosts(const tl_topology *t) { return t->num_hosts; }
int tl_topology_devices_per_host(const tl_topology *t) { return t->per_host; }
int tl_topology_num_devices(const tl_topology *t) { return t->num_devices; }
int tl_topology_num_cores_per_replica(const tl_topology *t) { return t->ncpr; }
bool tl_topology_model_parallel(const tl_topology *t) { return t->model_parallel; }
int tl_topology_num_replicas(const tl_topology *t) { return t->num_replicas; }
int tl_topology_replicas_per_host(const tl_topology *t) { return t->replicas_per_host; }
bool tl_topology_replica_spans_hosts(const tl_topology *t) { return t->spans_hosts; }
bool tl_topology_one_core(const tl_topology *t) { return t->one_core; }
int tl_topology_intra_op_threads(const tl_topology *t) { return t->threads; }

int tl_topology_thread_cpu(const tl_topology *t, int device, int thread)
{
    const tl_device *d = tl_devices_get(t->devs, device);
    if (d == NULL || d->cpu < 0 || thread < 1 || thread >= t->threads)
        return -1;
    return tl_devices_spare_cpu(t->devs, d->local_index * (t->threads - 1) + thread - 1);
}
const tl_devices *tl_topology_devices(const tl_topology *t) { return t->devs; }

const tl_place *tl_topology_place(const tl_topology *t, int device)
{
    if (device < 0 || device >= t->num_devices)
        return NULL;
    return &t->places[device];
}

int tl_topology_device_of(const tl_topology *t, int replica, int partition)
{
    int width = t->model_parallel ? t->ncpr : 1;
    if (replica < 0 || replica >= t->num_replicas || partition < 0 || partition >= width)
        return -1;
    return replica * width + partition;
}

/* ---- input plans -------------------------------------------------------- */

typedef struct plan_alloc {
    tl_input_plan plan;
    tl_input_call calls[]; /* (plan.input_fn_calls) */
} plan_alloc;

/* A plan with room for ncalls calls; *calls is where to write them. */
static tl_input_plan *plan_new(int ncalls, tl_input_call **calls)
{
    plan_alloc *p = tl_calloc(1, sizeof *p + (size_t)ncalls * sizeof(tl_input_call));
    if (p == NULL)
        return NULL;
    p->plan.input_fn_calls = ncalls;
    p->plan.calls = p->calls;
    p->plan.get_next_per_step = 1;
    *calls = p->calls;
    return &p->plan;
}

void tl_input_plan_destroy(tl_input_plan *plan)
{
    tl_free(plan); /* the plan is the first member of its allocation */
}

const char *tl_input_plan_mode_name(const tl_input_plan *plan)
{
    return plan->on_device ? tl_input_mode_name(plan->input_mode) : "CPU";
}

static const char *mode_word(tl_mode m)
{
    return m == TL_MODE_TRAIN ? "train" : m == TL_MODE_EVAL ? "eval" : "predict";
}

/* §4.4's per-mode checks, in TensorFlow's order. */
static tl_status validate_mode(const tl_topology *t, const tl_run_config *rc, tl_mode mode, tl_opt_int G,
                               bool broadcast)
{
    tl_input_mode ph = rc->tpu.per_host_input_for_training;
    bool v2 = ph == TL_PER_HOST_V2;
    int R = t->num_replicas, H = t->num_hosts;
    if (!G.set) {
        if (mode == TL_MODE_TRAIN)
            return tl_error(TL_EINVAL, "`train_batch_size` cannot be `None` (set --train_batch_size)");
        if (mode == TL_MODE_EVAL)
            return tl_error(TL_EINVAL, "eval_batch_size in TPUEstimator constructor cannot be `None` if .evaluate "
                                       "is running on TPU. (set --eval_batch_size)");
        return tl_error(TL_EINVAL, "predict_batch_size in TPUEstimator constructor cannot be `None` if .predict is "
                                   "running on TPU. (set --predict_batch_size)");
    }
    bool sliced = mode != TL_MODE_TRAIN && rc->tpu.eval_training_input_configuration == TL_SLICED;
    if (G.value % R != 0 && (!broadcast || sliced))
        return tl_error(TL_EINVAL, "%s batch size %lld must be divisible by number of replicas %d%s", mode_word(mode),
                        (long long)G.value, R,
                        sliced ? " (SLICED splits the batch into one equal slice per replica)" : "");
    if (mode == TL_MODE_EVAL) {
        if (H != 1 && !broadcast && !v2)
            return tl_error(TL_EINVAL, "TPUEstimator.evaluate is only supported under three conditions: "
                                       "1. num_hosts=1; 2. BROADCAST mode; 3. PER_HOST_V2 mode. mode: %d; "
                                       "num_hosts: %d; num_replicas=1:%d",
                            (int)ph, H, R);
        /* TensorFlow warns once per evaluate; a process makes this plan
         * several times per evaluate, so it warns once. */
        static atomic_int warned;
        if (H > 1 && v2 && atomic_exchange(&warned, 1) == 0)
            tl_log(TL_LOG_WARN, "Running TPUEstimator.evaluate for input mode PER_HOST_V2 and num_hosts %d", H);
    } else if (mode == TL_MODE_PREDICT) {
        if (H != 1 && !broadcast && !(R == 1 && v2))
            return tl_error(TL_EINVAL, "TPUEstimator.predict is only supported under three conditions: "
                                       "1. num_hosts=1; 2. BROADCAST mode; 3. PER_HOST_V2 mode with "
                                       "num_replicas=1. mode: %d; num_hosts: %d; num_replicas=1:%d",
                            (int)ph, H, R);
    }
    return TL_OK;
}

tl_status tl_input_plan_create(const tl_topology *t, const tl_run_config *rc, tl_mode mode, tl_input_plan **out)
{
    *out = NULL;
    const tl_tpu_config *tc = &rc->tpu;
    tl_opt_int G = mode == TL_MODE_TRAIN  ? rc->train_batch_size
                   : mode == TL_MODE_EVAL ? rc->eval_batch_size
                                          : rc->predict_batch_size;
    /* The one-core context always evaluates on the device (it drops eval_on_tpu). */
    bool on_device = rc->use_tpu && !(mode == TL_MODE_EVAL && !rc->eval_on_tpu && !t->one_core);
    bool sliced = mode != TL_MODE_TRAIN && tc->eval_training_input_configuration == TL_SLICED;

    if (!on_device) {
        if (sliced)
            return tl_error(TL_EINVAL, "Invalid TPUConfig `eval_training_input_configuration` value. SLICED mode only "
                                       "works on use_tpu = True.");
        tl_input_call *calls;
        tl_input_plan *p = plan_new(1, &calls);
        if (p == NULL)
            return tl_error_oom();
        p->mode = mode;
        p->on_device = false;
        p->input_mode = tc->per_host_input_for_training;
        p->global_batch_size = G.set ? G.value : -1;
        p->input_fn_batch_size = p->model_fn_batch_size = p->global_batch_size;
        p->replicas_per_call = 1;
        calls[0] = (tl_input_call){0, 0, 0, 1};
        *out = p;
        return TL_OK;
    }

    tl_input_mode ph = tc->per_host_input_for_training;
    bool broadcast = ph == TL_BROADCAST || sliced; /* is_input_broadcast_with_iterators */
    tl_status st = validate_mode(t, rc, mode, G, broadcast);
    if (st != TL_OK)
        return st;

    int H = t->num_hosts, C = t->num_devices, R = t->num_replicas, Rph = t->replicas_per_host;
    int64_t g = G.value;
    tl_input_plan *p;
    tl_input_call *calls;
    if (mode == TL_MODE_TRAIN && ph == TL_PER_SHARD_V1) {
        /* One call per core, in host then core order. */
        if ((p = plan_new(C, &calls)) == NULL)
            return tl_error_oom();
        p->input_mode = TL_PER_SHARD_V1;
        p->input_fn_batch_size = p->model_fn_batch_size = g / R;
        p->replicas_per_call = 1;
        for (int i = 0; i < C; i++)
            calls[i] = (tl_input_call){i, i / t->per_host, i, 1};
    } else if (broadcast) {
        /* One call on host 0: BROADCAST copies its batch, SLICED splits it. */
        if ((p = plan_new(1, &calls)) == NULL)
            return tl_error_oom();
        p->input_mode = sliced ? TL_SLICED : TL_BROADCAST;
        p->input_fn_batch_size = g;
        p->model_fn_batch_size = sliced ? g / R : g;
        p->replicas_per_call = R;
        calls[0] = (tl_input_call){0, 0, 0, R};
    } else if (t->spans_hosts) {
        /* PER_HOST_V2 with replicas wider than a host: one call per replica,
         * on the host of its logical core 0. */
        if ((p = plan_new(R, &calls)) == NULL)
            return tl_error_oom();
        p->input_mode = ph;
        p->input_fn_batch_size = p->model_fn_batch_size = g / R;
        p->replicas_per_call = 1;
        for (int r = 0; r < R; r++)
            calls[r] = (tl_input_call){r, t->places[tl_topology_device_of(t, r, 0)].host, r, 1};
    } else {
        /* Per host: PER_HOST_V1 splits G/H into Rph chunks; PER_HOST_V2 calls
         * get_next once per replica of the host each step. */
        if ((p = plan_new(H, &calls)) == NULL)
            return tl_error_oom();
        p->input_mode = ph == TL_PER_SHARD_V1 ? TL_PER_HOST_V1 : ph;
        p->input_fn_batch_size = ph == TL_PER_HOST_V2 ? g / R : g / H;
        p->model_fn_batch_size = g / R;
        p->replicas_per_call = Rph;
        if (ph == TL_PER_HOST_V2)
            p->get_next_per_step = Rph > 1 ? Rph : 1;
        for (int h = 0; h < H; h++)
            calls[h] = (tl_input_call){h, h, h * Rph, Rph};
    }
    p->mode = mode;
    p->on_device = true;
    p->global_batch_size = g;
    *out = p;
    return TL_OK;
}

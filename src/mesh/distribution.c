/* distribution.c — Keras' Distribution, DataParallel and ModelParallel: how
 * each is built from its options, the layouts it gives data, variables and
 * intermediate tensors, and the thread's current distribution. */
#include <string.h>

#include "mesh_int.h"

struct tl_distribution {
    tl_distribution_kind kind;
    const tl_mesh *mesh;             /* owned_mesh, or borrowed from the caller or the map */
    tl_mesh *owned_mesh;             /* a mesh DataParallel built itself; NULL otherwise */
    char *batch_dim_name;            /* NULL only for a base distribution given none */
    const tl_layout_map *layout_map; /* ModelParallel's; borrowed */
    bool auto_shard_dataset;
    tl_process process;
    bool legacy_shard_id;
};

/* Keras' distribution(): global_state keeps it per thread. */
static _Thread_local tl_distribution *current_distribution;

static const char *kind_name(tl_distribution_kind k)
{
    switch (k) {
    case TL_DATA_PARALLEL: return "DataParallel";
    case TL_MODEL_PARALLEL: return "ModelParallel";
    default: return "Distribution";
    }
}

static tl_status check_process(tl_process p)
{
    if (p.num_processes < 1 || p.process_id < 0 || p.process_id >= p.num_processes)
        return tl_error(TL_EINVAL,
                        "process: num_processes must be >= 1 and process_id in [0, num_processes); got "
                        "num_processes=%d, process_id=%d",
                        p.num_processes, p.process_id);
    return TL_OK;
}

/* The common tail of every constructor: the object around a mesh. mesh_owned
 * is taken in every case (destroyed on failure). */
static tl_status make(tl_distribution_kind kind, const tl_mesh *mesh, tl_mesh *mesh_owned,
                      const char *batch_dim_name, bool auto_shard, tl_process process, tl_distribution **out)
{
    tl_distribution *d = tl_calloc(1, sizeof *d);
    char *name = batch_dim_name != NULL ? tl_strdup(batch_dim_name) : NULL;
    if (d == NULL || (batch_dim_name != NULL && name == NULL)) {
        tl_free(d);
        tl_free(name);
        tl_mesh_destroy(mesh_owned);
        return tl_error_oom();
    }
    d->kind = kind;
    d->mesh = mesh_owned != NULL ? mesh_owned : mesh;
    d->owned_mesh = mesh_owned;
    d->batch_dim_name = name;
    d->auto_shard_dataset = auto_shard;
    d->process = process;
    *out = d;
    return TL_OK;
}

void tl_data_parallel_options_init(tl_data_parallel_options *o)
{
    *o = (tl_data_parallel_options){0};
    o->auto_shard_dataset = true;
    o->process = (tl_process){1, 0};
}

void tl_model_parallel_options_init(tl_model_parallel_options *o)
{
    *o = (tl_model_parallel_options){0};
    o->auto_shard_dataset = true;
    o->process = (tl_process){1, 0};
}

/* DataParallel's own mesh over an explicit device array: shape = the array's
 * shape, the one axis "batch". */
static tl_status mesh_from_devices(const tl_data_parallel_options *o, tl_mesh **mesh)
{
    static const char *const batch[] = {"batch"};
    int64_t flat = o->ndevices;
    const int64_t *shape = &flat;
    int ndim = 1;
    if (o->devices_shape != NULL) {
        if (o->devices_ndim < 1)
            return tl_error(TL_EINVAL, "DataParallel: devices_ndim must be >= 1 with devices_shape, got %d",
                            o->devices_ndim);
        int64_t product = 1;
        for (int i = 0; i < o->devices_ndim && product <= o->ndevices; i++) {
            int64_t e = o->devices_shape[i];
            product = e < 0 || e > o->ndevices ? -1 : product * e;
            if (product < 0)
                break;
        }
        if (product != o->ndevices) {
            char msg[256];
            tl_sink s = tl_sink_make(msg, sizeof msg);
            tl_sink_pytuple(&s, o->devices_shape, o->devices_ndim);
            return tl_error(TL_EINVAL, "DataParallel: devices_shape=%s does not hold the %d devices given", msg,
                            o->ndevices);
        }
        shape = o->devices_shape;
        ndim = o->devices_ndim;
    }
    return tl_mesh_create(o->discover, shape, ndim, batch, 1, o->devices, o->ndevices, mesh);
}

tl_status tl_data_parallel_create(const tl_data_parallel_options *o, tl_distribution **out)
{
    *out = NULL;
    if (o == NULL)
        return tl_error(TL_EINVAL, "DataParallel: options are NULL (use tl_data_parallel_options_init)");
    tl_status st = check_process(o->process);
    if (st != TL_OK)
        return st;
    if (o->ndevices < 0)
        return tl_error(TL_EINVAL, "DataParallel: ndevices must be >= 0, got %d", o->ndevices);

    if (o->device_mesh != NULL) {
        if (o->devices != NULL && o->ndevices > 0)
            tl_log(TL_LOG_DEBUG, "DataParallel: devices ignored because device_mesh is given");
        int ndim = tl_mesh_ndim(o->device_mesh);
        if (ndim != 1)
            tl_log(TL_LOG_WARN,
                   "Expect the input mesh to be 1D, but received mesh.devices.ndim=%d. The first axis will be "
                   "used for data-parallel sharding.",
                   ndim);
        return make(TL_DATA_PARALLEL, o->device_mesh, NULL, tl_mesh_axis_name(o->device_mesh, 0),
                    o->auto_shard_dataset, o->process, out);
    }

    tl_mesh *mesh = NULL;
    if (o->devices != NULL && o->ndevices > 0) {
        st = mesh_from_devices(o, &mesh);
    } else if (o->discover != NULL) {
        static const char *const batch[] = {"batch"};
        int64_t n = tl_devices_count(o->discover);
        st = tl_mesh_create(o->discover, &n, 1, batch, 1, NULL, 0, &mesh);
    } else {
        st = tl_error(TL_EINVAL, "DataParallel: give a device_mesh, devices, or a device list to discover from");
    }
    if (st != TL_OK)
        return st;
    return make(TL_DATA_PARALLEL, NULL, mesh, "batch", o->auto_shard_dataset, o->process, out);
}

/* The size of the mesh axis batch_dim_name (Keras' axis_names.index). */
static tl_status batch_axis_size(const tl_mesh *mesh, const char *batch_dim_name, int *out)
{
    *out = 0;
    int a = tl_mesh_axis_index(mesh, batch_dim_name);
    if (a < 0) {
        char names[512];
        tl_sink s = tl_sink_make(names, sizeof names);
        tl_sink_puts(&s, "[");
        tl_sink_axis_names(&s, mesh);
        tl_sink_puts(&s, "]");
        return tl_error(TL_EINVAL, "batch_dim_name '%s' is not a mesh axis: '%s' is not in list %s",
                        batch_dim_name != NULL ? batch_dim_name : "None",
                        batch_dim_name != NULL ? batch_dim_name : "None", names);
    }
    *out = (int)tl_mesh_axis_size(mesh, a);
    return TL_OK;
}

tl_status tl_model_parallel_create(const tl_model_parallel_options *o, tl_distribution **out)
{
    *out = NULL;
    if (o == NULL || o->layout_map == NULL)
        return tl_error(TL_EINVAL, "You must specify a layout_map argument.");
    tl_status st = check_process(o->process);
    if (st != TL_OK)
        return st;
    const tl_mesh *mesh = tl_layout_map_mesh(o->layout_map);
    const char *batch = o->batch_dim_name != NULL && o->batch_dim_name[0] != '\0' ? o->batch_dim_name
                                                                                  : tl_mesh_axis_name(mesh, 0);
    int P = o->process.num_processes;
    if (P > 1) {
        int R = 0;
        if ((st = batch_axis_size(mesh, batch, &R)) != TL_OK)
            return st;
        if (P > R && P % R != 0)
            return tl_error(TL_EINVAL,
                            "If `num_processes` is greater than `num_model_replicas`, `num_processes` must be "
                            "divisible by `num_model_replicas`. Got num_processes=%d, num_model_replicas=%d.",
                            P, R);
    }
    st = make(TL_MODEL_PARALLEL, mesh, NULL, batch, o->auto_shard_dataset, o->process, out);
    if (st == TL_OK) {
        (*out)->layout_map = o->layout_map;
        (*out)->legacy_shard_id = o->legacy_shard_id;
    }
    return st;
}

tl_status tl_distribution_create(const tl_mesh *mesh, const char *batch_dim_name, tl_process process,
                                 tl_distribution **out)
{
    *out = NULL;
    if (mesh == NULL)
        return tl_error(TL_EINVAL, "Distribution: device_mesh is NULL");
    tl_status st = check_process(process);
    if (st != TL_OK)
        return st;
    return make(TL_DISTRIBUTION_BASE, mesh, NULL, batch_dim_name, true, process, out);
}

void tl_distribution_destroy(tl_distribution *d)
{
    if (d == NULL)
        return;
    if (current_distribution == d)
        current_distribution = NULL;
    tl_free(d->batch_dim_name);
    tl_mesh_destroy(d->owned_mesh);
    tl_free(d);
}

tl_distribution_kind tl_distribution_kind_of(const tl_distribution *d) { return d->kind; }
const tl_mesh *tl_distribution_mesh(const tl_distribution *d) { return d->mesh; }
const char *tl_distribution_batch_dim_name(const tl_distribution *d) { return d->batch_dim_name; }
const tl_layout_map *tl_distribution_layout_map(const tl_distribution *d) { return d->layout_map; }
bool tl_distribution_auto_shard_dataset(const tl_distribution *d) { return d->auto_shard_dataset; }
void tl_distribution_set_auto_shard_dataset(tl_distribution *d, bool on) { d->auto_shard_dataset = on; }
int tl_distribution_num_processes(const tl_distribution *d) { return d->process.num_processes; }
int tl_distribution_process_id(const tl_distribution *d) { return d->process.process_id; }
bool tl_distribution_is_multi_process(const tl_distribution *d) { return d->process.num_processes > 1; }

static tl_status not_implemented(const char *what)
{
    return tl_error(TL_ENOTIMPL, "Distribution.%s is abstract (NotImplementedError); use DataParallel or "
                                 "ModelParallel",
                    what);
}

tl_status tl_distribution_num_model_replicas(const tl_distribution *d, int *out)
{
    *out = 0;
    switch (d->kind) {
    case TL_DATA_PARALLEL:
        *out = tl_mesh_device_count(d->mesh);
        return TL_OK;
    case TL_MODEL_PARALLEL:
        return batch_axis_size(d->mesh, d->batch_dim_name, out);
    default:
        return not_implemented("num_model_replicas");
    }
}

int tl_distribution_shard_of(const tl_distribution *d, int pid, int R)
{
    int P = d->process.num_processes;
    if (R >= P)
        return pid;
    return d->legacy_shard_id ? pid % (P / R) : pid / (P / R);
}

tl_status tl_distribution_data_shard_id(const tl_distribution *d, int *out)
{
    *out = 0;
    int R = 0;
    tl_status st = tl_distribution_num_model_replicas(d, &R);
    if (st != TL_OK)
        return st;
    *out = tl_distribution_shard_of(d, d->process.process_id, R);
    return TL_OK;
}

tl_status tl_distribution_num_data_shards(const tl_distribution *d, int *out)
{
    *out = 0;
    int R = 0;
    tl_status st = tl_distribution_num_model_replicas(d, &R);
    if (st != TL_OK)
        return st;
    *out = R < d->process.num_processes ? R : d->process.num_processes;
    return TL_OK;
}

/* A new layout on d's mesh: first entry first (may be NULL), the rest None. */
static tl_status layout_on_mesh(const tl_distribution *d, const char *first, int rank, tl_layout **out)
{
    const char **axes = tl_calloc(rank > 0 ? (size_t)rank : 1, sizeof *axes);
    if (axes == NULL)
        return tl_error_oom();
    if (rank > 0)
        axes[0] = first;
    tl_status st = tl_layout_create(axes, rank, d->mesh, out);
    tl_free(axes);
    return st;
}

tl_status tl_distribution_get_data_layout(const tl_distribution *d, const int64_t *shape, int rank,
                                          tl_layout **out)
{
    *out = NULL;
    if (d->kind == TL_DISTRIBUTION_BASE)
        return not_implemented("get_data_layout");
    if (rank < 1) {
        char shp[256];
        tl_sink s = tl_sink_make(shp, sizeof shp);
        tl_sink_pytuple(&s, shape, rank > 0 ? rank : 0);
        return tl_error(TL_EINVAL,
                        "get_data_layout: data_shape=%s has no batch dimension (rank %d); data must have rank "
                        ">= 1 (Keras raises IndexError)",
                        shp, rank);
    }
    return layout_on_mesh(d, d->batch_dim_name, rank, out);
}

tl_status tl_distribution_get_variable_layout(const tl_distribution *d, const tl_variable_desc *v,
                                              tl_layout **out)
{
    *out = NULL;
    if (d->kind == TL_DISTRIBUTION_BASE)
        return not_implemented("get_variable_layout");
    if (v == NULL)
        return tl_error(TL_EINVAL, "get_variable_layout: the variable is NULL");
    if (v->layout != NULL)
        return tl_layout_copy(v->layout, out);
    if (v->rank < 0)
        return tl_error(TL_EINVAL, "get_variable_layout: variable '%s' has rank %d; rank must be >= 0",
                        v->path != NULL ? v->path : "", v->rank);
    if (d->kind == TL_MODEL_PARALLEL && v->path != NULL) {
        const tl_layout *l;
        tl_status st = tl_layout_map_get(d->layout_map, v->path, &l);
        if (st != TL_OK)
            return st;
        if (l != NULL)
            return tl_layout_copy(l, out);
    }
    return layout_on_mesh(d, NULL, v->rank, out);
}

tl_status tl_distribution_get_tensor_layout(const tl_distribution *d, const char *path, tl_layout **out)
{
    *out = NULL;
    if (d->kind == TL_DISTRIBUTION_BASE)
        return not_implemented("get_tensor_layout");
    if (d->kind == TL_DATA_PARALLEL)
        return TL_OK;
    const tl_layout *l;
    tl_status st = tl_layout_map_get(d->layout_map, path, &l);
    if (st != TL_OK || l == NULL)
        return st;
    return tl_layout_copy(l, out);
}

int tl_distribution_repr(const tl_distribution *d, char *buf, size_t n)
{
    tl_sink s = tl_sink_make(buf, n);
    tl_sink_printf(&s, "<%s device_mesh=", kind_name(d->kind));
    tl_mesh_repr_sink(&s, d->mesh);
    tl_sink_puts(&s, ">");
    return tl_sink_result(&s);
}

tl_distribution *tl_distribution_current(void)
{
    return current_distribution;
}

void tl_distribution_set(tl_distribution *d)
{
    current_distribution = d;
}

void tl_distribution_scope_enter(tl_distribution *d, tl_distribution_scope *scope)
{
    scope->previous = current_distribution;
    current_distribution = d;
}

void tl_distribution_scope_exit(tl_distribution_scope *scope)
{
    current_distribution = scope->previous;
}

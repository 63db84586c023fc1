/* mesh.c — Keras' DeviceMesh: an N-D array of device ids with named axes,
 * built by a row-major reshape of a device list. */
#include <stdlib.h>
#include <string.h>

#include "mesh_int.h"

/* The same bound as the device list's: no mesh can be larger. */
#define TL_MESH_MAX_DEVICES (1 << 20)

struct tl_mesh {
    int ndim;
    int64_t *shape;    /* (ndim) axis sizes */
    int64_t *stride;   /* (ndim) row-major strides, in devices */
    char **axis_names; /* (ndim) */
    int ndev;
    int *ids;          /* (ndev) device ids in row-major mesh order */
};

void tl_mesh_destroy(tl_mesh *mesh)
{
    if (mesh == NULL)
        return;
    if (mesh->axis_names != NULL)
        for (int i = 0; i < mesh->ndim; i++)
            tl_free(mesh->axis_names[i]);
    tl_free(mesh->axis_names);
    tl_free(mesh->shape);
    tl_free(mesh->stride);
    tl_free(mesh->ids);
    tl_free(mesh);
}

/* "Received: shape=(4, 2), axis_names=['batch']" — the tail of Keras' first
 * two messages. */
static tl_status shape_names_error(const char *what, const int64_t *shape, int ndim,
                                   const char *const *axis_names, int naxes)
{
    char msg[768];
    tl_sink s = tl_sink_make(msg, sizeof msg);
    tl_sink_printf(&s, "%s Received: shape=", what);
    tl_sink_pytuple(&s, shape, ndim > 0 ? ndim : 0);
    tl_sink_puts(&s, ", axis_names=");
    tl_sink_pylist(&s, axis_names, naxes > 0 ? naxes : 0);
    return tl_error(TL_EINVAL, "%s", msg);
}

/* tpuloop's checks beyond Keras': names present and unique, sizes >= 1. */
static tl_status check_axes(const int64_t *shape, const char *const *axis_names, int ndim)
{
    char msg[768];
    tl_sink s = tl_sink_make(msg, sizeof msg);
    for (int i = 0; i < ndim; i++) {
        if (axis_names[i] == NULL || axis_names[i][0] == '\0') {
            tl_sink_printf(&s, "DeviceMesh axis names must be non-empty strings: axis %d of axis_names=", i);
            tl_sink_pylist(&s, axis_names, ndim);
            tl_sink_puts(&s, " has none");
            return tl_error(TL_EINVAL, "%s", msg);
        }
        for (int j = 0; j < i; j++) {
            if (strcmp(axis_names[i], axis_names[j]) == 0) {
                tl_sink_puts(&s, "DeviceMesh axis names must be unique: ");
                tl_sink_pystr(&s, axis_names[i]);
                tl_sink_puts(&s, " appears twice in axis_names=");
                tl_sink_pylist(&s, axis_names, ndim);
                return tl_error(TL_EINVAL, "%s", msg);
            }
        }
    }
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1) {
            tl_sink_puts(&s, "DeviceMesh axis sizes must be >= 1: shape=");
            tl_sink_pytuple(&s, shape, ndim);
            tl_sink_printf(&s, " gives axis '%s' size %lld", axis_names[i], (long long)shape[i]);
            return tl_error(TL_EINVAL, "%s", msg);
        }
    }
    return TL_OK;
}

/* The product of the shape, or -1 when it is larger than any device list. */
static int64_t shape_product(const int64_t *shape, int ndim)
{
    int64_t p = 1;
    for (int i = 0; i < ndim; i++) {
        p *= shape[i];
        if (p > TL_MESH_MAX_DEVICES)
            return -1;
    }
    return p;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Every id names a device of devs (or is >= 0 without devs), and none twice. */
static tl_status check_ids(const tl_devices *devs, const int *ids, int n)
{
    int count = devs != NULL ? tl_devices_count(devs) : -1;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || (count >= 0 && ids[i] >= count)) {
            if (count >= 0)
                return tl_error(TL_EINVAL, "Device not found: cpu:%d (devices[%d]; only cpu:0 .. cpu:%d exist)",
                                ids[i], i, count - 1);
            return tl_error(TL_EINVAL, "Device not found: cpu:%d (devices[%d]; device ids are >= 0)", ids[i], i);
        }
    }
    int *sorted = tl_alloc_array((size_t)n, sizeof *sorted);
    if (sorted == NULL)
        return tl_error_oom();
    memcpy(sorted, ids, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
    for (int i = 1; i < n; i++) {
        if (sorted[i] == sorted[i - 1]) {
            int dup = sorted[i];
            tl_free(sorted);
            return tl_error(TL_EINVAL, "DeviceMesh devices must be distinct: device cpu:%d appears more than once",
                            dup);
        }
    }
    tl_free(sorted);
    return TL_OK;
}

tl_status tl_mesh_create(const tl_devices *devs, const int64_t *shape, int ndim,
                         const char *const *axis_names, int naxes, const int *device_ids,
                         int ndevice_ids, tl_mesh **out)
{
    *out = NULL;
    if ((shape == NULL && ndim > 0) || (axis_names == NULL && naxes > 0))
        return tl_error(TL_EINVAL, "DeviceMesh: shape or axis_names is NULL with a non-zero length");
    if (ndim <= 0 || naxes <= 0)
        return shape_names_error("Shape and axis_names cannot be empty.", shape, ndim, axis_names, naxes);
    if (ndim != naxes)
        return shape_names_error("Shape and axis_names should have same size.", shape, ndim, axis_names, naxes);
    tl_status st = check_axes(shape, axis_names, ndim);
    if (st != TL_OK)
        return st;
    if (device_ids == NULL && devs == NULL)
        return tl_error(TL_EINVAL, "DeviceMesh: no devices given and no device list to take them from");
    if (device_ids != NULL && ndevice_ids < 0)
        return tl_error(TL_EINVAL, "DeviceMesh: the number of devices must be >= 0, got %d", ndevice_ids);

    int *listed = NULL;
    int nlisted = ndevice_ids;
    if (device_ids == NULL) {
        st = tl_list_devices(devs, NULL, &listed, &nlisted);
        if (st != TL_OK)
            return st;
        device_ids = listed;
    }
    int64_t product = shape_product(shape, ndim);
    if (product != nlisted) {
        char msg[768];
        tl_sink s = tl_sink_make(msg, sizeof msg);
        int64_t dshape = nlisted;
        tl_sink_puts(&s, "Shape does not match the number of devices. Received: shape=");
        tl_sink_pytuple(&s, shape, ndim);
        tl_sink_puts(&s, "; devices.shape=");
        tl_sink_pytuple(&s, &dshape, 1);
        tl_free_ids(listed);
        return tl_error(TL_EINVAL, "%s", msg);
    }
    st = check_ids(devs, device_ids, nlisted);
    if (st != TL_OK) {
        tl_free_ids(listed);
        return st;
    }

    tl_mesh *m = tl_calloc(1, sizeof *m);
    if (m == NULL) {
        tl_free_ids(listed);
        return tl_error_oom();
    }
    m->ndim = ndim;
    m->ndev = nlisted;
    m->shape = tl_alloc_array((size_t)ndim, sizeof *m->shape);
    m->stride = tl_alloc_array((size_t)ndim, sizeof *m->stride);
    m->axis_names = tl_calloc((size_t)ndim, sizeof *m->axis_names);
    m->ids = tl_alloc_array((size_t)nlisted, sizeof *m->ids);
    bool ok = m->shape && m->stride && m->axis_names && m->ids;
    for (int i = 0; ok && i < ndim; i++) {
        m->axis_names[i] = tl_strdup(axis_names[i]);
        ok = m->axis_names[i] != NULL;
    }
    if (!ok) {
        tl_free_ids(listed);
        tl_mesh_destroy(m);
        return tl_error_oom();
    }
    memcpy(m->shape, shape, (size_t)ndim * sizeof *m->shape);
    memcpy(m->ids, device_ids, (size_t)nlisted * sizeof *m->ids);
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        m->stride[i] = stride;
        stride *= shape[i];
    }
    tl_free_ids(listed);
    *out = m;
    return TL_OK;
}

int tl_mesh_ndim(const tl_mesh *mesh) { return mesh->ndim; }
const int64_t *tl_mesh_shape(const tl_mesh *mesh) { return mesh->shape; }
int tl_mesh_device_count(const tl_mesh *mesh) { return mesh->ndev; }
const int *tl_mesh_ids(const tl_mesh *mesh) { return mesh->ids; }

int64_t tl_mesh_axis_size(const tl_mesh *mesh, int i)
{
    return i >= 0 && i < mesh->ndim ? mesh->shape[i] : 0;
}

const char *tl_mesh_axis_name(const tl_mesh *mesh, int i)
{
    return i >= 0 && i < mesh->ndim ? mesh->axis_names[i] : NULL;
}

int tl_mesh_axis_index(const tl_mesh *mesh, const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < mesh->ndim; i++)
        if (strcmp(mesh->axis_names[i], name) == 0)
            return i;
    return -1;
}

int tl_mesh_device_at(const tl_mesh *mesh, int i)
{
    return i >= 0 && i < mesh->ndev ? mesh->ids[i] : -1;
}

int tl_mesh_device_at_coords(const tl_mesh *mesh, const int64_t *coords)
{
    int64_t flat = 0;
    for (int a = 0; a < mesh->ndim; a++) {
        if (coords[a] < 0 || coords[a] >= mesh->shape[a])
            return -1;
        flat += coords[a] * mesh->stride[a];
    }
    return mesh->ids[flat];
}

int tl_mesh_index_of(const tl_mesh *mesh, int device_id)
{
    for (int i = 0; i < mesh->ndev; i++)
        if (mesh->ids[i] == device_id)
            return i;
    return -1;
}

tl_status tl_mesh_locate(const tl_mesh *mesh, int device_id, int local_devices, int64_t *coords, int *process)
{
    if (local_devices < 1)
        return tl_error(TL_EINVAL, "local_devices must be >= 1, got %d", local_devices);
    int idx = tl_mesh_index_of(mesh, device_id);
    if (idx < 0) {
        char msg[512];
        tl_sink s = tl_sink_make(msg, sizeof msg);
        tl_mesh_repr_sink(&s, mesh);
        return tl_error(TL_ENOTFOUND, "device cpu:%d is not in the mesh %s", device_id, msg);
    }
    if (coords != NULL)
        for (int a = 0; a < mesh->ndim; a++)
            coords[a] = (idx / mesh->stride[a]) % mesh->shape[a];
    if (process != NULL)
        *process = device_id / local_devices;
    return TL_OK;
}

void tl_mesh_repr_sink(tl_sink *s, const tl_mesh *mesh)
{
    tl_sink_puts(s, "<DeviceMesh shape=");
    tl_sink_pytuple(s, mesh->shape, mesh->ndim);
    tl_sink_puts(s, ", axis_names=");
    tl_sink_pylist(s, (const char *const *)mesh->axis_names, mesh->ndim);
    tl_sink_puts(s, ">");
}

int tl_mesh_repr(const tl_mesh *mesh, char *buf, size_t n)
{
    tl_sink s = tl_sink_make(buf, n);
    tl_mesh_repr_sink(&s, mesh);
    return tl_sink_result(&s);
}

/* layout.c — Keras' TensorLayout (a mesh axis name or None per tensor
 * dimension) and the block of a tensor each device holds under it. */
#include <string.h>

#include "mesh_int.h"

struct tl_layout {
    int rank;
    char **axes;         /* (rank) a mesh axis name, or NULL for None */
    const tl_mesh *mesh; /* borrowed; NULL until set */
};

void tl_layout_destroy(tl_layout *layout)
{
    if (layout == NULL)
        return;
    if (layout->axes != NULL)
        for (int i = 0; i < layout->rank; i++)
            tl_free(layout->axes[i]);
    tl_free(layout->axes);
    tl_free(layout);
}

/* Keras' _validate_axes: the non-None entries must be mesh axis names. Both
 * sets print in first-seen order (Python's set order is arbitrary). */
static tl_status check_axes(const char *const *axes, int rank, const tl_mesh *mesh)
{
    bool ok = true;
    for (int i = 0; i < rank && ok; i++)
        ok = axes[i] == NULL || tl_mesh_axis_index(mesh, axes[i]) >= 0;
    if (ok)
        return TL_OK;
    char msg[900];
    tl_sink s = tl_sink_make(msg, sizeof msg);
    tl_sink_puts(&s, "Invalid axis names for Layout. Valid axis names: {");
    tl_sink_axis_names(&s, mesh);
    tl_sink_puts(&s, "}, Got {");
    bool first = true;
    for (int i = 0; i < rank; i++) {
        if (axes[i] == NULL)
            continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = axes[j] != NULL && strcmp(axes[j], axes[i]) == 0;
        if (seen)
            continue;
        tl_sink_puts(&s, first ? "" : ", ");
        tl_sink_pystr(&s, axes[i]);
        first = false;
    }
    tl_sink_puts(&s, "}");
    return tl_error(TL_EINVAL, "%s", msg);
}

tl_status tl_layout_create(const char *const *axes, int rank, const tl_mesh *mesh, tl_layout **out)
{
    *out = NULL;
    if (rank < 0)
        return tl_error(TL_EINVAL, "TensorLayout: rank must be >= 0, got %d", rank);
    if (axes == NULL && rank > 0)
        return tl_error(TL_EINVAL, "TensorLayout: axes is NULL for rank %d", rank);
    if (mesh != NULL) {
        tl_status st = check_axes(axes, rank, mesh);
        if (st != TL_OK)
            return st;
    }
    tl_layout *l = tl_calloc(1, sizeof *l);
    if (l == NULL)
        return tl_error_oom();
    l->rank = rank;
    l->mesh = mesh;
    l->axes = tl_calloc((size_t)rank, sizeof *l->axes);
    if (l->axes == NULL) {
        tl_layout_destroy(l);
        return tl_error_oom();
    }
    for (int i = 0; i < rank; i++) {
        if (axes[i] != NULL && (l->axes[i] = tl_strdup(axes[i])) == NULL) {
            tl_layout_destroy(l);
            return tl_error_oom();
        }
    }
    *out = l;
    return TL_OK;
}

tl_status tl_layout_copy(const tl_layout *src, tl_layout **out)
{
    return tl_layout_create((const char *const *)src->axes, src->rank, src->mesh, out);
}

int tl_layout_rank(const tl_layout *layout) { return layout->rank; }
const tl_mesh *tl_layout_mesh(const tl_layout *layout) { return layout->mesh; }

const char *tl_layout_axis(const tl_layout *layout, int i)
{
    return i >= 0 && i < layout->rank ? layout->axes[i] : NULL;
}

tl_status tl_layout_set_mesh(tl_layout *layout, const tl_mesh *mesh)
{
    if (mesh == NULL)
        return tl_error(TL_EINVAL, "TensorLayout: the device mesh to set is NULL");
    if (layout->mesh != NULL) {
        char msg[512];
        tl_sink s = tl_sink_make(msg, sizeof msg);
        tl_mesh_repr_sink(&s, layout->mesh);
        return tl_error(TL_EINVAL, "Cannot override device mesh value. Existing value is %s", msg);
    }
    tl_status st = check_axes((const char *const *)layout->axes, layout->rank, mesh);
    if (st != TL_OK)
        return st;
    layout->mesh = mesh;
    return TL_OK;
}

void tl_layout_repr_sink(tl_sink *s, const tl_layout *layout)
{
    tl_sink_puts(s, "<TensorLayout axes=(");
    for (int i = 0; i < layout->rank; i++) {
        tl_sink_puts(s, i ? ", " : "");
        if (layout->axes[i] == NULL)
            tl_sink_puts(s, "None");
        else
            tl_sink_pystr(s, layout->axes[i]);
    }
    tl_sink_puts(s, layout->rank == 1 ? ",), device_mesh=" : "), device_mesh=");
    if (layout->mesh == NULL)
        tl_sink_puts(s, "None");
    else
        tl_mesh_repr_sink(s, layout->mesh);
    tl_sink_puts(s, ">");
}

int tl_layout_repr(const tl_layout *layout, char *buf, size_t n)
{
    tl_sink s = tl_sink_make(buf, n);
    tl_layout_repr_sink(&s, layout);
    return tl_sink_result(&s);
}

/* The checks JAX's NamedSharding and device_put make before placing a tensor:
 * a mesh, no more layout entries than dimensions, each mesh axis used once,
 * each sharded dimension divisible by its axis size. */
static tl_status check_placeable(const tl_layout *l, const int64_t *shape, int rank)
{
    if (l->mesh == NULL)
        return tl_error(TL_EINVAL, "Cannot create sharding when device mesh is not set for TensorLayout.");
    if (rank < 0 || (shape == NULL && rank > 0))
        return tl_error(TL_EINVAL, "TensorLayout placement: rank must be >= 0 with a shape, got %d", rank);
    char what[768];
    tl_sink s = tl_sink_make(what, sizeof what);
    tl_layout_repr_sink(&s, l);
    if (l->rank > rank) {
        char shp[256];
        tl_sink t = tl_sink_make(shp, sizeof shp);
        tl_sink_pytuple(&t, shape, rank);
        return tl_error(TL_EINVAL, "the layout %s implies a rank of at least %d, but the tensor has rank %d (shape %s)",
                        what, l->rank, rank, shp);
    }
    for (int i = 0; i < l->rank; i++) {
        for (int j = 0; j < i && l->axes[i] != NULL; j++) {
            if (l->axes[j] != NULL && strcmp(l->axes[i], l->axes[j]) == 0)
                return tl_error(TL_EINVAL,
                                "a layout can map every mesh axis to at most one tensor dimension, but %s "
                                "uses '%s' for dimensions %d and %d",
                                what, l->axes[i], j, i);
        }
    }
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0)
            return tl_error(TL_EINVAL, "tensor dimension %d has negative size %lld", d, (long long)shape[d]);
        if (d >= l->rank || l->axes[d] == NULL)
            continue;
        int64_t n = tl_mesh_axis_size(l->mesh, tl_mesh_axis_index(l->mesh, l->axes[d]));
        if (shape[d] % n != 0) {
            char shp[256];
            tl_sink t = tl_sink_make(shp, sizeof shp);
            tl_sink_pytuple(&t, shape, rank);
            return tl_error(TL_EINVAL,
                            "the layout %s implies that the global size of dimension %d should be divisible by "
                            "%lld (the size of mesh axis '%s'), but it is equal to %lld (full shape: %s)",
                            what, d, (long long)n, l->axes[d], (long long)shape[d], shp);
        }
    }
    return TL_OK;
}

/* The block for mesh coordinates given either as coords or as a flat index. */
static void fill_block(const tl_layout *l, const int64_t *shape, int rank, int64_t flat, const int64_t *coords,
                       int64_t *offset, int64_t *size)
{
    const tl_mesh *mesh = l->mesh;
    for (int d = 0; d < rank; d++) {
        offset[d] = 0;
        size[d] = shape[d];
        if (d >= l->rank || l->axes[d] == NULL)
            continue;
        int a = tl_mesh_axis_index(mesh, l->axes[d]);
        int64_t n = tl_mesh_axis_size(mesh, a);
        int64_t c;
        if (coords != NULL) {
            c = coords[a];
        } else {
            int64_t stride = 1;
            for (int b = a + 1; b < tl_mesh_ndim(mesh); b++)
                stride *= tl_mesh_axis_size(mesh, b);
            c = (flat / stride) % n;
        }
        size[d] = shape[d] / n;
        offset[d] = c * size[d];
    }
}

tl_status tl_layout_block(const tl_layout *layout, const int64_t *shape, int rank, int mesh_index,
                          int64_t *offset, int64_t *size)
{
    tl_status st = check_placeable(layout, shape, rank);
    if (st != TL_OK)
        return st;
    int ndev = tl_mesh_device_count(layout->mesh);
    if (mesh_index < 0 || mesh_index >= ndev)
        return tl_error(TL_EINVAL, "mesh index %d is out of range for a mesh of %d devices", mesh_index, ndev);
    fill_block(layout, shape, rank, mesh_index, NULL, offset, size);
    return TL_OK;
}

tl_status tl_layout_block_at(const tl_layout *layout, const int64_t *shape, int rank, const int64_t *coords,
                             int64_t *offset, int64_t *size)
{
    tl_status st = check_placeable(layout, shape, rank);
    if (st != TL_OK)
        return st;
    const tl_mesh *mesh = layout->mesh;
    for (int a = 0; a < tl_mesh_ndim(mesh); a++) {
        if (coords[a] < 0 || coords[a] >= tl_mesh_axis_size(mesh, a))
            return tl_error(TL_EINVAL, "mesh coordinate %lld along axis '%s' is outside [0, %lld)",
                            (long long)coords[a], tl_mesh_axis_name(mesh, a),
                            (long long)tl_mesh_axis_size(mesh, a));
    }
    fill_block(layout, shape, rank, 0, coords, offset, size);
    return TL_OK;
}

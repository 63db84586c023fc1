/*
 * tpuloop/mesh.h — Keras' DeviceMesh, TensorLayout and LayoutMap, and the
 * per-device placement they imply.
 *
 * A mesh arranges device ids in an N-D array with one name per axis, built by
 * a row-major reshape of a device list: with shape (4, 2) the device at mesh
 * coordinates (b, m) is list entry b*2 + m. A layout names, for each dimension
 * of a tensor, the mesh axis it is split over (NULL: the dimension is whole on
 * every device). Dimension i with axis a of size n is cut into n equal
 * contiguous blocks, block k living on every device whose coordinate along a
 * is k; mesh axes the layout does not name replicate the tensor. A LayoutMap
 * maps variable paths ("sequential/dense/kernel") to layouts: an exact key
 * wins, otherwise every key is a regular expression matched against the path.
 *
 * The rules and messages are Keras 3.15.1's (keras.distribution), with the
 * checks Keras leaves out added where the port spec recommends them: duplicate
 * axis names, axis sizes below 1, device ids not in the device list, and LayoutMap
 * keys that are not valid regular expressions are rejected when they are
 * given, not when they are first used.
 *
 *     tl_devices *devs;
 *     tl_devices_create(8, 1, 0, &devs);
 *     const char *names[] = {"batch", "model"};
 *     tl_mesh *mesh;
 *     tl_mesh_create(devs, (int64_t[]){4, 2}, 2, names, 2, NULL, 0, &mesh);
 *
 *     tl_layout_map *map;
 *     tl_layout_map_create(mesh, TL_MATCH_FULL, &map);
 *     tl_layout_map_set_axes(map, ".*dense.*kernel", (const char *[]){NULL, "model"}, 2);
 *     const tl_layout *l;
 *     tl_layout_map_get(map, "sequential/dense_1/kernel", &l);   // (None, 'model')
 *
 *     int64_t off[2], size[2];                  // kernel (16, 8) on device (3, 1)
 *     tl_layout_block(l, (int64_t[]){16, 8}, 2, 3 * 2 + 1, off, size);
 *     // off = {0, 4}, size = {16, 4}
 *
 *     tl_layout_map_destroy(map);
 *     tl_mesh_destroy(mesh);
 *     tl_devices_destroy(devs);
 *
 * Ownership: a layout borrows its mesh and a LayoutMap borrows its mesh; the
 * mesh must outlive both. A LayoutMap owns the layouts put into it.
 */
#ifndef TPULOOP_MESH_H
#define TPULOOP_MESH_H

#include "tpuloop/base.h"
#include "tpuloop/devices.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- DeviceMesh --------------------------------------------------------- */

typedef struct tl_mesh tl_mesh;

/*
 * Keras' DeviceMesh(shape, axis_names, devices).
 *
 *   devs        the job's device list; device ids must name devices of it.
 *               Only read during the call (the mesh copies the ids). May be
 *               NULL when device_ids is given (ids are then only checked to
 *               be >= 0).
 *   shape       (ndim) axis sizes.
 *   axis_names  (naxes) one name per axis.
 *   device_ids  (ndevice_ids) global device ids, reshaped row-major to shape;
 *               NULL (or ndevice_ids == 0 with NULL) takes tl_list_devices(devs)
 *               order. An empty non-NULL list is an empty device list.
 *
 * Checks, in Keras' order, the first failure wins (all TL_EINVAL):
 *   ndim == 0 or naxes == 0   "Shape and axis_names cannot be empty. Received: shape=(), axis_names=['x']"
 *   ndim != naxes             "Shape and axis_names should have same size. Received: ..."
 *   an axis name NULL or "", a name used twice, a size < 1 (tpuloop's checks)
 *   no device list at all     (devs and device_ids both NULL)
 *   product(shape) != number of devices
 *                             "Shape does not match the number of devices. Received: shape=(4, 2); devices.shape=(4,)"
 *   an id outside devs or repeated   "Device not found: cpu:9 ..." / "... appears more than once ..."
 * and TL_ENOMEM. *out is NULL on failure.
 */
TL_API tl_status tl_mesh_create(const tl_devices *devs, const int64_t *shape, int ndim,
                                const char *const *axis_names, int naxes, const int *device_ids,
                                int ndevice_ids, tl_mesh **out);

/* Accepts NULL. Layouts, maps and distributions that borrow the mesh must be
 * destroyed first. */
TL_API void tl_mesh_destroy(tl_mesh *mesh);

TL_API int tl_mesh_ndim(const tl_mesh *mesh);
/* (ndim) axis sizes; valid until the mesh is destroyed. */
TL_API const int64_t *tl_mesh_shape(const tl_mesh *mesh);
/* Axis i's size, or 0 when i is out of range. */
TL_API int64_t tl_mesh_axis_size(const tl_mesh *mesh, int i);
/* Axis i's name, or NULL when i is out of range. */
TL_API const char *tl_mesh_axis_name(const tl_mesh *mesh, int i);
/* The index of the axis called name, or -1 when the mesh has none. */
TL_API int tl_mesh_axis_index(const tl_mesh *mesh, const char *name);
/* The number of devices (product of the shape). */
TL_API int tl_mesh_device_count(const tl_mesh *mesh);
/* The device id at row-major flat index i, or -1 when i is out of range. */
TL_API int tl_mesh_device_at(const tl_mesh *mesh, int i);
/* The device id at coordinates (ndim), or -1 when one is out of range. */
TL_API int tl_mesh_device_at_coords(const tl_mesh *mesh, const int64_t *coords);
/* The row-major flat index of device_id in the mesh, or -1 when it is not in it. */
TL_API int tl_mesh_index_of(const tl_mesh *mesh, int device_id);

/*
 * Where device_id sits: its mesh coordinates (coords, ndim entries; may be
 * NULL) and the process that owns it when every process has local_devices
 * devices (process = device_id / local_devices, JAX's numbering; process may
 * be NULL). Errors: TL_ENOTFOUND when the device is not in the mesh;
 * TL_EINVAL for local_devices < 1.
 */
TL_API tl_status tl_mesh_locate(const tl_mesh *mesh, int device_id, int local_devices,
                                int64_t *coords, int *process);

/*
 * Keras' repr: "<DeviceMesh shape=(4, 2), axis_names=['batch', 'model']>".
 * Writes at most n bytes including the NUL (like snprintf) and returns the
 * length the full text has.
 */
TL_API int tl_mesh_repr(const tl_mesh *mesh, char *buf, size_t n);

/* ---- TensorLayout ------------------------------------------------------- */

typedef struct tl_layout tl_layout;

/*
 * Keras' TensorLayout(axes, device_mesh).
 *
 *   axes   (rank) a mesh axis name per tensor dimension, NULL for None
 *          (the dimension is replicated). May be NULL when rank == 0.
 *   mesh   borrowed, may be NULL (attach one later with tl_layout_set_mesh).
 *
 * With a mesh, every non-NULL entry must be one of its axis names, else
 * TL_EINVAL "Invalid axis names for Layout. Valid axis names: {'data',
 * 'model'}, Got {'data', 'unknown'}". An entry naming two axes (Keras' tuple
 * entry) is not an axis name and fails the same way. Like Keras, the rank is
 * not compared to any tensor and an axis may appear twice (placement rejects
 * that). Other errors: TL_EINVAL for rank < 0; TL_ENOMEM.
 */
TL_API tl_status tl_layout_create(const char *const *axes, int rank, const tl_mesh *mesh, tl_layout **out);

/* A deep copy (same borrowed mesh). Errors: TL_ENOMEM. */
TL_API tl_status tl_layout_copy(const tl_layout *src, tl_layout **out);

/* Accepts NULL. */
TL_API void tl_layout_destroy(tl_layout *layout);

TL_API int tl_layout_rank(const tl_layout *layout);
/* Entry i: an axis name, or NULL for None (and for i out of range). */
TL_API const char *tl_layout_axis(const tl_layout *layout, int i);
/* The mesh, or NULL when none is set. */
TL_API const tl_mesh *tl_layout_mesh(const tl_layout *layout);

/*
 * Keras' `layout.device_mesh = mesh`: allowed only while no mesh is set.
 * Errors (TL_EINVAL): a mesh is already set, even the same one — "Cannot
 * override device mesh value. Existing value is <DeviceMesh ...>"; the axes are
 * not names of mesh — "Invalid axis names for Layout ..." (the layout keeps no
 * mesh); mesh NULL.
 */
TL_API tl_status tl_layout_set_mesh(tl_layout *layout, const tl_mesh *mesh);

/* "<TensorLayout axes=('batch', None), device_mesh=<DeviceMesh ...>>"
 * (device_mesh=None without a mesh); snprintf's contract, as tl_mesh_repr. */
TL_API int tl_layout_repr(const tl_layout *layout, char *buf, size_t n);

/*
 * The block of a tensor of global shape (rank) that the device at mesh flat
 * index mesh_index holds: offset[d] and size[d] for every dimension d (both
 * rank entries). A dimension named after an axis of size n is cut into n equal
 * contiguous blocks; dimensions past the layout's rank, and NULL entries, are
 * whole (JAX's PartitionSpec rule).
 *
 * Errors (TL_EINVAL): no mesh — "Cannot create sharding when device mesh is
 * not set for TensorLayout."; the layout has more entries than the tensor has
 * dimensions; a mesh axis used by two dimensions; a dimension whose size is not
 * divisible by its axis size ("... should be divisible by 8 ... but it is
 * equal to 10"); a negative dimension; mesh_index out of range.
 */
TL_API tl_status tl_layout_block(const tl_layout *layout, const int64_t *shape, int rank, int mesh_index,
                                 int64_t *offset, int64_t *size);

/* As tl_layout_block, for the device at mesh coordinates coords (mesh ndim
 * entries). An out-of-range coordinate is TL_EINVAL. */
TL_API tl_status tl_layout_block_at(const tl_layout *layout, const int64_t *shape, int rank,
                                    const int64_t *coords, int64_t *offset, int64_t *size);

/* ---- LayoutMap ---------------------------------------------------------- */

/*
 * How a stored key is matched against a path once no key equals the path:
 * TL_MATCH_FULL is Keras 3.14+ (re.fullmatch; the default), TL_MATCH_SEARCH is
 * Keras 3.0–3.13 (re.search: the key may match anywhere, so maps written for
 * those versions may omit the leading ".*").
 */
typedef enum { TL_MATCH_FULL = 0, TL_MATCH_SEARCH = 1 } tl_match_mode;

typedef struct tl_layout_map tl_layout_map;

/*
 * An empty map over mesh (borrowed; required).
 * Errors: TL_EINVAL for a NULL mesh or an unknown mode; TL_ENOMEM.
 */
TL_API tl_status tl_layout_map_create(const tl_mesh *mesh, tl_match_mode mode, tl_layout_map **out);

/* Destroys the map and every layout in it. Accepts NULL. */
TL_API void tl_layout_map_destroy(tl_layout_map *map);

TL_API const tl_mesh *tl_layout_map_mesh(const tl_layout_map *map);
TL_API tl_match_mode tl_layout_map_mode(const tl_layout_map *map);

/*
 * Keras' `map[key] = layout`, with key a Python `re` pattern. The map takes
 * ownership of layout in every case: on failure it is destroyed.
 * A layout without a mesh gets the map's (a layout with its own mesh keeps it).
 *
 * Keys are translated to POSIX extended regular expressions when inserted. The
 * supported subset is what variable-path rules use: literals, `.`, `^ $`,
 * groups `( )`, `|`, `* + ?`, `{m}` `{m,}` `{m,n}` `{,n}`, bracket sets
 * `[a-z_]` `[^/]`, the classes `\d \w \s \D \W \S` with their ASCII meaning
 * (only the first three inside brackets), `\n \t \r \f \v`, and
 * backslash-escaped punctuation.
 * Everything else Python accepts but POSIX cannot express is rejected rather
 * than matched differently: lazy and possessive quantifiers (`*?`), `(?...)`
 * groups (non-capturing, lookaround, named, flags), back-references, `\b \A
 * \Z \x..` and other letter escapes, non-ASCII bytes inside brackets.
 * Paths and keys are compared as bytes; `.` also matches a newline.
 *
 * Errors (TL_EINVAL), in Keras' order:
 *   key already in the map   "dense/kernel already exist in the LayoutMap with value <TensorLayout ...>. ..."
 *   layout NULL              "... should be a TensorLayout type, got NULL"
 *   axes not in the mesh     "Invalid axis names for Layout ..."
 *   key not a supported regular expression, naming the key and the reason
 * and TL_EINVAL for a NULL key, TL_ENOMEM.
 */
TL_API tl_status tl_layout_map_set(tl_layout_map *map, const char *key, tl_layout *layout);

/* Keras' tuple form, `map[key] = (None, "model")`: a new layout over axes
 * (rank entries) put under key. Errors: those of tl_layout_create and
 * tl_layout_map_set. */
TL_API tl_status tl_layout_map_set_axes(tl_layout_map *map, const char *key, const char *const *axes, int rank);

/*
 * Keras' `map[path]`: the layout stored under exactly path, else the one key
 * that matches path as a regular expression, else *out = NULL (and TL_OK). The
 * layout stays owned by the map and valid until its key is popped or the map
 * destroyed.
 * Errors: TL_EINVAL when several keys match — "Path 'dense_2/bias' matches
 * multiple layout specification keys: ['.*dense.*bias', '.*bias']. Please make
 * sure each tensor/variable path only matches at most one layout specification
 * key in the LayoutMap." (keys in insertion order); TL_EINVAL for a NULL path.
 */
TL_API tl_status tl_layout_map_get(const tl_layout_map *map, const char *path, const tl_layout **out);

/*
 * Keras' `map.pop(key)`: removes the entry whose key is exactly key and hands
 * its layout to the caller (*out; the caller destroys it). Regular
 * expressions are not applied. Errors: TL_ENOTFOUND ("KeyError: '<key>'") when
 * no key equals key.
 */
TL_API tl_status tl_layout_map_pop(tl_layout_map *map, const char *key, tl_layout **out);

/* The number of entries, and entry i's key and layout in insertion order (NULL
 * for i out of range); valid until the entry is popped or the map destroyed. */
TL_API int tl_layout_map_size(const tl_layout_map *map);
TL_API const char *tl_layout_map_key(const tl_layout_map *map, int i);
TL_API const tl_layout *tl_layout_map_value(const tl_layout_map *map, int i);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_MESH_H */

/*
 * mesh_int.h — what the files of src/mesh/ share: a bounded text sink for
 * Python-style reprs (used both by the public *_repr functions and inside
 * error messages, so neither allocates), the repr of each object, and the
 * Python-regex to POSIX translation of LayoutMap keys.
 */
#ifndef TL_MESH_INT_H
#define TL_MESH_INT_H

#include "../base/base_int.h"
#include "tpuloop/distribution.h"
#include "tpuloop/mesh.h"

/* Text written into a caller's buffer, truncated to fit; len counts what the
 * whole text needs, as snprintf's return value does. */
typedef struct tl_sink {
    char *buf;  /* (cap) NUL-terminated; may be NULL when cap == 0 */
    size_t cap;
    size_t len;
} tl_sink;

tl_sink tl_sink_make(char *buf, size_t cap);
void tl_sink_printf(tl_sink *s, const char *fmt, ...) TL_PRINTF(2, 3);
void tl_sink_puts(tl_sink *s, const char *str);
/* snprintf's return value for the text written so far. */
int tl_sink_result(const tl_sink *s);

/* Python's repr of a str: 'abc', or "it's" when it holds a ' and no ". */
void tl_sink_pystr(tl_sink *s, const char *str);
/* Python's repr of a tuple of ints: (), (8,), (4, 2). */
void tl_sink_pytuple(tl_sink *s, const int64_t *v, int n);
/* Python's repr of a list of str: [], ['batch', 'model']; NULL entries print None. */
void tl_sink_pylist(tl_sink *s, const char *const *v, int n);

/* The mesh's axis names as Python's repr, one after another with ", " between
 * them and no brackets (callers wrap them in [] or {}). */
void tl_sink_axis_names(tl_sink *s, const tl_mesh *mesh);

void tl_mesh_repr_sink(tl_sink *s, const tl_mesh *mesh);
void tl_layout_repr_sink(tl_sink *s, const tl_layout *layout);

/* The ids of the mesh in row-major order: (tl_mesh_device_count). */
const int *tl_mesh_ids(const tl_mesh *mesh);

/* The data shard process pid of d reads when d has R model replicas: pid
 * when R >= P, else its replica group (legacy_shard_id: pid % (P / R)). */
int tl_distribution_shard_of(const tl_distribution *d, int pid, int R);

#endif /* TL_MESH_INT_H */

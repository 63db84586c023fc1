/* dataset_int.h — the inside of a tl_dataset (tpuloop/dataset.h), shared by
 * the dataset_*.c files: the node interface every source and transform
 * implements, owned elements, and the pipeline context. */
#ifndef TL_DATA_DATASET_INT_H
#define TL_DATA_DATASET_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "../base/base_int.h"
#include "tpuloop/dataset.h"

/* An element owned by whoever holds the pointer: the tensors, their data and
 * row lengths are tl_malloc'd; keys and file names are interned in the
 * pipeline's context. A BYTES tensor's data is one block: the tl_bytes
 * array followed by the payload bytes it points into. */
typedef struct ds_elem {
    tl_element pub;
    const char *file; /* where the record came from (interned), NULL for none */
    int64_t record;   /* its index in that file, -1 for none */
    uint64_t offset;  /* its byte offset in that file (uncompressed) */
} ds_elem;

/* What every node of one pipeline shares: interned strings (keys, file
 * names), so that pointers to them live as long as any node does, and the
 * skip counter. Reference-counted by the nodes. */
typedef struct ds_ctx {
    pthread_mutex_t mu;
    char **strs; /* (n) */
    size_t n, cap;
    atomic_llong corrupt_skipped;
    int refs;
} ds_ctx;

/* The node interface. next returns an owned element (NULL at the end);
 * reset starts the node and its input again for a new pass of a repeat,
 * epoch_key naming the pass; save adds the node's state to obj, restore reads
 * it back (the input's state is handled by the caller); pause stops the
 * node's threads between elements (save runs while they are paused) and
 * resume lets them go on; destroy frees the node's own parts. */
typedef struct ds_ops {
    const char *kind;
    tl_status (*next)(tl_dataset *ds, ds_elem **out);
    tl_status (*reset)(tl_dataset *ds, uint64_t epoch_key);
    tl_status (*save)(tl_dataset *ds, json_t *obj);
    tl_status (*restore)(tl_dataset *ds, json_t *obj);
    void (*pause)(tl_dataset *ds);
    void (*resume)(tl_dataset *ds);
    void (*destroy)(tl_dataset *ds);
} ds_ops;

struct tl_dataset {
    const ds_ops *ops;
    tl_dataset *input; /* NULL for a source */
    ds_ctx *ctx;
    void *impl;
    char *desc;        /* kind and parameters, compared on restore */
    ds_elem *current;  /* the element tl_dataset_next returned last */
    bool started;      /* tl_dataset_next was called */
};

/* ---- nodes (dataset.c) ---------------------------------------------------- */

/* A new node with ops, impl and desc (a tl_malloc'd string, taken), over
 * input (taken; NULL for a source, which makes a new context). On failure
 * frees impl with ops->destroy semantics left to the caller: returns NULL
 * and destroys input, desc is freed; the caller frees impl. */
tl_dataset *ds_node_new(const ds_ops *ops, void *impl, char *desc, tl_dataset *input);

/* Pulls the next element from a node (the internal next). */
tl_status ds_pull(tl_dataset *ds, ds_elem **out);

/* Resets a node (and through it its inputs). */
tl_status ds_reset(tl_dataset *ds, uint64_t epoch_key);

/* Finishes a transform constructor: on st != TL_OK destroys in and returns
 * st with *out NULL; otherwise wraps impl into a node over in. */
tl_status ds_finish(tl_status st, const ds_ops *ops, void *impl, char *desc, tl_dataset *in, tl_dataset **out);

/* The interned copy of s (NULL when out of memory). */
const char *ds_intern(ds_ctx *ctx, const char *s);

/* Counts one skipped record and logs it. */
void ds_count_skip(ds_ctx *ctx);

/* ---- elements (dataset.c) -------------------------------------------------- */

ds_elem *ds_elem_new(int num_tensors);
void ds_elem_free(ds_elem *e);

/* Sets t dense of dtype with shape (rank) and allocates its data
 * (uninitialised; for BYTES see ds_tensor_set_bytes). Returns TL_ENOMEM via
 * tl_error_oom. */
tl_status ds_tensor_alloc(tl_tensor *t, const char *key, tl_data_type dtype, int rank, const int64_t *shape);

/* Sets t to a BYTES tensor of the given shape holding copies of vals
 * (count = the shape's product, or num_values when ragged is set by the
 * caller afterwards). */
tl_status ds_tensor_set_bytes(tl_tensor *t, const char *key, int rank, const int64_t *shape, const tl_bytes *vals,
                              int64_t count);

/* Bytes per value of a dtype (sizeof(tl_bytes) for BYTES). */
size_t ds_dtype_size(tl_data_type dt);

/* The number of values in t's data. */
int64_t ds_tensor_count(const tl_tensor *t);

/* "(3, 4)" into buf. */
void ds_format_shape(char *buf, size_t cap, const int64_t *shape, int rank);

/* "file.tfrecord: record 7 at byte offset 120" (or "element" when e has no
 * file) into buf, for messages. */
void ds_where(char *buf, size_t cap, const ds_elem *e);

/* ---- state (dataset_state.c) ------------------------------------------------ */

/* An element as JSON, and back (keys and file interned into ctx). */
json_t *ds_elem_to_json(const ds_elem *e);
tl_status ds_elem_from_json(ds_ctx *ctx, json_t *j, const char *what, ds_elem **out);

/* JSON integer helpers that fail with a message naming what. */
tl_status ds_json_int(json_t *obj, const char *key, const char *what, int64_t *out);
tl_status ds_json_u64(json_t *obj, const char *key, const char *what, uint64_t *out);
tl_status ds_json_bool(json_t *obj, const char *key, const char *what, bool *out);
/* A uint64 as a decimal string (JSON numbers are int64 in jansson). */
json_t *ds_json_u64_new(uint64_t v);

/* ---- source files (dataset_sources.c) --------------------------------------- */

/* Expands patterns into a sorted tl_malloc'd list of tl_strdup'd names. */
tl_status ds_glob(const char *const *patterns, int n, char ***names, size_t *count);
void ds_names_free(char **names, size_t count);

#endif /* TL_DATA_DATASET_INT_H */

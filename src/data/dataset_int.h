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

/* A saved state's element data, written (ds_saver) and read (ds_loader) by
 * dataset_state.c; see there for the format. */
typedef struct ds_saver ds_saver;
typedef struct ds_loader ds_loader;

/* The node interface. next returns an owned element (NULL at the end);
 * reset starts the node and its input again for a new pass of a repeat,
 * epoch_key naming the pass; save adds the node's state to obj (buffered
 * elements through sv, ds_save_slots), restore reads it back (ld,
 * ds_load_slots; the input's state is handled by the caller); pause stops
 * the node's threads between elements (save runs while they are paused) and
 * resume lets them go on; destroy frees the node's own parts. */
typedef struct ds_ops {
    const char *kind;
    tl_status (*next)(tl_dataset *ds, ds_elem **out);
    tl_status (*reset)(tl_dataset *ds, uint64_t epoch_key);
    tl_status (*save)(tl_dataset *ds, json_t *obj, ds_saver *sv);
    tl_status (*restore)(tl_dataset *ds, json_t *obj, ds_loader *ld);
    void (*pause)(tl_dataset *ds);
    void (*resume)(tl_dataset *ds);
    void (*destroy)(tl_dataset *ds);
} ds_ops;

/* Random access, which the sources in memory offer (tensor slices, labeled
 * examples, IDX), and the shuffles, repeats and scales over them pass on: such a
 * node hands out the positions of its elements in its source (its "rows"
 * node), and the elements are made from them only where they are used. A
 * shuffle then holds positions, not copies of the data, so its buffer and
 * its saved state are small (shuffle(60000) over Fashion-MNIST saved 188 MB
 * of pixels with every checkpoint), and a batch copies its rows straight
 * from the source into the batch. The elements, and their order, are
 * next()'s. */
typedef struct ds_access {
    /* The position of the element next() would return now, moving past it
     * without making it; -1 at the end. */
    tl_status (*claim)(tl_dataset *ds, int64_t *index);
    /* The rows node (a source, or a scale that scales its source's rows):
     * the element at a position claim returned, as next() makes it; and
     * the batch of n such elements, as batch() would stack them. */
    tl_status (*fetch)(tl_dataset *src, int64_t index, ds_elem **out);
    tl_status (*gather)(tl_dataset *src, const int64_t *index, int64_t n, ds_elem **out);
} ds_access;

struct tl_dataset {
    const ds_ops *ops;
    const ds_access *access; /* NULL: no random access */
    tl_dataset *rows;        /* with access: the source the positions index (itself for a source) */
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

/* Saving: tl_dataset_save makes a saver, lets every node save into its
 * object of nodes, and ds_state_write makes the state text (tl_malloc'd)
 * of the nodes (borrowed), the skip count and the saver's elements. Errors:
 * TL_EINVAL for a key or file name that is not UTF-8; TL_ENOMEM. */
ds_saver *ds_saver_new(void);
void ds_saver_free(ds_saver *sv);
tl_status ds_state_write(ds_saver *sv, int64_t corrupt_skipped, json_t *nodes, char **text);

/* A list of buffer slots under key in obj: ds_save_slots_begin, one
 * ds_save_slot per slot (e an element, or NULL for an empty slot, as a
 * shuffle buffer's hole), then ds_save_slots_end, which reports the first
 * failure of them all (TL_ENOMEM). A node saves one list at a time. */
void ds_save_slots_begin(ds_saver *sv);
void ds_save_slot(ds_saver *sv, const ds_elem *e);
tl_status ds_save_slots_end(ds_saver *sv, json_t *obj, const char *key);

/* Restoring: ds_state_read parses a state text of either format into *root
 * and *ld (the element data, decoded once; keys and file names interned into
 * ctx). Errors: TL_EINVAL for text that is not a saved state (naming the
 * format, the field and the value); TL_ENOMEM. */
tl_status ds_state_read(ds_ctx *ctx, const char *text, json_t **root, ds_loader **ld);
void ds_loader_free(ds_loader *ld);

/* The slots saved under key in obj: *slots (tl_malloc'd, NULL when *n is
 * 0) gets *n owned elements, NULL for an empty slot. what names the node in
 * messages; more than max slots are refused. Errors: TL_EINVAL for a missing
 * or malformed list (naming the slot and the field); TL_ENOMEM. */
tl_status ds_load_slots(ds_loader *ld, json_t *obj, const char *key, const char *what, int64_t max,
                        ds_elem ***slots, int64_t *n);
/* Frees slots[0..n) and slots. */
void ds_slots_free(ds_elem **slots, int64_t n);

/* The largest dimension, value count or length, and the most tensors per
 * element, a saved state may hold. */
#define DS_STATE_MAX_COUNT ((int64_t)1 << 40)
#define DS_STATE_MAX_TENSORS 65536

/* Decodes the base64 s[0..slen) into dst, which holds cap bytes; *n is how
 * many were written. Returns false for text that is not base64 (padding
 * only at the end) or does not fit. */
bool ds_b64_decode(const char *s, size_t slen, uint8_t *dst, size_t cap, size_t *n);

/* ds_load_slots for a state of format tpuloop.dataset/1 (dataset_state_v1.c). */
tl_status ds_load_slots_v1(ds_ctx *ctx, json_t *obj, const char *key, const char *what, int64_t max,
                           ds_elem ***slots, int64_t *n);

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

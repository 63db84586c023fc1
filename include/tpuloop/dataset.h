/*
 * tpuloop/dataset.h — input pipelines in the manner of tf.data: sources that
 * read records, transforms chained onto them, and one call that hands the
 * runtime's infeed the next element.
 *
 * A dataset yields elements; an element is a fixed list of named tensors
 * (the same keys, dtypes and order for the whole dataset). Sources make
 * datasets from files or memory; each transform takes ownership of its input
 * and returns a new dataset, destroying the input when it fails, so a
 * pipeline is written as tf.data's chain is:
 *
 *     const char *files[] = {"/data/train-*-of-01024"};
 *     tl_tfrecord_options o;
 *     tl_tfrecord_options_init(&o);
 *     o.compression = TL_RECORD_GZIP;
 *     o.cycle_length = 4;                         // 4 files read in turn
 *     tl_feature_spec specs[2] = {
 *         {.key = "x", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_FLOAT, .rank = 1, .shape = {13}},
 *         {.key = "label", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_INT64},
 *     };
 *     tl_dataset *ds;
 *     tl_status st = tl_dataset_from_files(files, 1, &ds);            // the sorted file list
 *     if (st == TL_OK) st = tl_dataset_shard(ds, num_hosts, host_id, &ds);   // files per host
 *     if (st == TL_OK) st = tl_dataset_tfrecord_interleave(ds, &o, &ds);
 *     if (st == TL_OK) st = tl_dataset_shuffle(ds, 10000, seed, true, &ds);
 *     if (st == TL_OK) st = tl_dataset_repeat(ds, -1, &ds);
 *     if (st == TL_OK) st = tl_dataset_parse_example(ds, specs, 2, NULL, &ds);
 *     if (st == TL_OK) st = tl_dataset_batch(ds, 256, true, &ds);
 *     if (st == TL_OK) st = tl_dataset_prefetch(ds, 2, &ds);
 *     if (st != TL_OK) { fprintf(stderr, "error: %s\n", tl_last_error()); return 1; }
 *     const tl_element *e;
 *     while ((st = tl_dataset_next(ds, &e)) == TL_OK && e != NULL) {
 *         const tl_tensor *x = tl_element_find(e, "x");   // float32 (256, 13)
 *         ...
 *     }
 *     tl_dataset_destroy(ds);                                  // the whole chain
 *
 * Semantics are tf.data's, written out where it matters:
 *   - interleave is the deterministic tf.data interleave (see
 *     tl_dataset_tfrecord_interleave); shard keeps element k when
 *     k % num_shards == index; shuffle fills a buffer, outputs a uniformly
 *     random slot and puts the next input element into that slot;
 *   - determinism: the same pipeline with the same seeds yields the same
 *     elements, bit for bit, whatever the prefetch depth, the number of
 *     parse threads or the thread timing. Shuffle draws from tpuloop's
 *     counter-based RNG (rng.h) keyed by (seed, epoch), so with
 *     reshuffle_each_iteration each epoch's order is a pure function of the
 *     seed and the epoch number that repeat() counts;
 *   - position: tl_dataset_save writes the whole pipeline's state as JSON
 *     (files and byte offsets, shuffle buffers and RNG positions, epochs,
 *     counters, elements already prefetched; buffered elements packed as
 *     bytes, so saving costs about what copying them does), and
 *     tl_dataset_restore on a pipeline built the same way continues with
 *     exactly the elements the saved one would have yielded next. It is what
 *     a checkpoint stores;
 *   - errors name the file, the record index and the byte offset (framing
 *     errors) or the key and the record (parse errors). With
 *     skip_corrupt_records a bad record is logged once (TL_LOG_WARN), counted
 *     (tl_dataset_corrupt_skipped) and skipped instead.
 *
 * A dataset is used by one thread at a time. Prefetch and parallel parsing
 * run threads of their own inside it; they are started at the first
 * tl_dataset_next and joined by tl_dataset_destroy.
 */
#ifndef TPULOOP_DATASET_H
#define TPULOOP_DATASET_H

#include "tpuloop/base.h"
#include "tpuloop/data.h"
#include "tpuloop/example.h"
#include "tpuloop/text_data.h"
#include "tpuloop/tfrecord.h" /* tl_record_compression */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_dataset tl_dataset;

typedef enum { TL_DT_FLOAT32 = 1, TL_DT_INT64 = 2, TL_DT_INT32 = 3, TL_DT_BYTES = 4 } tl_data_type;

#define TL_TENSOR_MAX_RANK 8

/* One named component of an element. */
typedef struct tl_tensor {
    const char *key;
    tl_data_type dtype;
    int rank;                           /* 0..8 */
    int64_t shape[TL_TENSOR_MAX_RANK];  /* (rank); after batch() shape[0] is the batch */
    void *data;                         /* float / int64_t / int32_t / tl_bytes, row-major, the shape's
                                           product of them (dense), or num_values of them (ragged) */
    /* Ragged (a VarLen feature): values are data[0..num_values), row_lengths[i]
     * of them belong to row i. Unbatched: rank 1, num_rows 1 (a VarLen
     * sequence feature: rank 2, one row per step). Batched: num_rows = batch,
     * shape = {batch, longest row}. */
    bool ragged;
    int64_t num_values, num_rows;
    int64_t *row_lengths;               /* (num_rows); NULL when not ragged */
} tl_tensor;

/* An element: its tensors in a fixed order for the whole dataset. */
typedef struct tl_element {
    int num_tensors;
    tl_tensor *tensors; /* (num_tensors) */
} tl_element;

/* "float32", "int64", "int32", "bytes"; "?" for a value outside the enum. */
TL_API const char *tl_data_type_name(tl_data_type dt);

/* ======================================================================== */
/* Consuming                                                                */
/* ======================================================================== */

/*
 * The next element into *out, NULL at the end (then TL_OK, and again on
 * every later call). The element and everything it points to belong to ds
 * and stay valid until the next call on ds or its destroy.
 * Errors: whatever a source or transform reports — TL_EPARSE for a corrupt
 * record (naming the file, record index and byte offset) or a record that
 * does not fit its spec (naming the key and the record), TL_EINVAL for
 * elements a transform cannot combine (batch of unequal shapes), TL_EIO,
 * TL_ENOMEM. A failed call leaves *out NULL; calling again goes on with the
 * next element where the source can (a reader error repeats itself).
 */
TL_API tl_status tl_dataset_next(tl_dataset *ds, const tl_element **out);

/* The tensor of e called key, NULL when there is none (or e is NULL). */
TL_API const tl_tensor *tl_element_find(const tl_element *e, const char *key);

/* Destroys ds and every dataset it was made from; joins its threads. NULL is
 * a no-op. */
TL_API void tl_dataset_destroy(tl_dataset *ds);

/*
 * The whole pipeline's position as a JSON text into *json_out (the caller
 * frees it with tl_free_string from config.h). It may be called at any
 * point, also after the end; prefetch and parse threads are paused while it
 * runs. Its cost is about that of copying the buffered elements' bytes (a
 * shuffle buffer of 100 000 small examples: some 10 MB, hundredths of a
 * second).
 *
 * The text, format "tpuloop.dataset/2", is one JSON object, its members in
 * this order:
 *   "format"           "tpuloop.dataset/2"
 *   "corrupt_skipped"  tl_dataset_corrupt_skipped
 *   "nodes"            one object per node, from ds down to its source:
 *                      {"node": its kind and parameters, then its own
 *                      fields (files and byte offsets, epochs, RNG draws,
 *                      counters)}; a node's buffer (shuffle, prefetch, the
 *                      records a parse has taken) is {"slots": n, "at": a,
 *                      "bytes": b}: n slots encoded in bytes [a, a + b) of
 *                      "elements"
 *   "strings"          the keys and file names the elements name, by index
 *   "elements"         base64 of the buffered elements, packed: a slot is a
 *                      byte 0 (empty: a shuffle buffer's hole) or 1 and an
 *                      element: varint file (0 none, else 1 + its string),
 *                      zigzag record index, varint byte offset, varint
 *                      number of tensors, and per tensor varint key (its
 *                      string), byte dtype (tl_data_type), byte rank, varint
 *                      dims, byte ragged (0, 1; when 1: varint num_values,
 *                      varint num_rows, varint row lengths), then the values:
 *                      float32 and int32 4 bytes each, int64 8, all
 *                      little-endian whatever the host; bytes a varint
 *                      length and the bytes. Varints are unsigned LEB128,
 *                      zigzag as protobuf's sint64.
 * The text of format "tpuloop.dataset/1" (tpuloop before this format: the
 * elements as JSON objects inside the nodes) is still restored.
 * Errors: TL_ERUNTIME when a prefetched element is already an error (the
 * message is that error's); TL_EINVAL a key or file name that is not UTF-8;
 * TL_ENOMEM.
 */
TL_API tl_status tl_dataset_save(tl_dataset *ds, char **json_out);

/*
 * Moves a freshly built ds to the position json describes, so that it yields
 * what the saved pipeline would have yielded next. Call it before the first
 * tl_dataset_next. json is a text tl_dataset_save wrote, in either format
 * above; reformatted as JSON (indented, keys reordered) it restores the
 * same, only more slowly once "elements" is no longer the last member.
 * Errors: TL_EINVAL when ds has already been read from, when the text is not
 * a state tl_dataset_save wrote (the message names the field and the value,
 * for elements the list and the slot), or when it was saved from another
 * pipeline (the message names the first node that differs: its kind, its
 * parameters, its files, its seed); TL_EIO / TL_EPARSE when a file cannot be
 * reopened or re-read to the saved position; TL_ENOMEM.
 */
TL_API tl_status tl_dataset_restore(tl_dataset *ds, const char *json);

/* The records skipped by skip_corrupt_records so far, over the whole
 * pipeline (the framing and the parse step together). */
TL_API int64_t tl_dataset_corrupt_skipped(const tl_dataset *ds);

/* ======================================================================== */
/* Sources                                                                  */
/* ======================================================================== */

/*
 * The file names matching patterns[0..n) as a dataset of elements
 * {"filename": bytes scalar}, tf.data's list_files(shuffle=False): each
 * pattern is expanded with glob(3) and its matches sorted (strcmp order);
 * the patterns' lists follow one another in the given order. A pattern with
 * no glob characters names one file, which must exist.
 * Errors: TL_EINVAL n < 1 or a NULL pattern; TL_ENOTFOUND a pattern that
 * matches nothing (the message names it); TL_EIO glob(3) failed; TL_ENOMEM.
 */
TL_API tl_status tl_dataset_from_files(const char *const *patterns, int n, tl_dataset **out);

typedef struct tl_tfrecord_options {
    tl_record_compression compression; /* NONE (tfrecord.h; AUTO: by each file's first bytes) */
    int64_t cycle_length;              /* files read at once, >= 1; 1 (one after another) */
    int64_t block_length;              /* records from a file before moving to the next, >= 1; 1 */
    /* A record whose data CRC fails is skipped, in plain, GZIP and ZLIB
     * files alike (its length CRC vouched for its framing); a bad length
     * CRC, a length past the end of the file, a truncated header or corrupt
     * compressed data end that file (the rest cannot be framed), and reading
     * moves on. Each is logged and counted. */
    bool skip_corrupt_records;         /* false */
} tl_tfrecord_options;

/* The defaults above. */
TL_API void tl_tfrecord_options_init(tl_tfrecord_options *o);

/*
 * The records of the TFRecord files that files yields (elements with a
 * "filename" bytes scalar, as tl_dataset_from_files makes, after any shard
 * or shuffle of the list), as elements {"record": bytes scalar}, read as
 * tf.data's deterministic interleave(cycle_length, block_length) reads:
 *
 *   cycle slots 0..cycle_length-1 start empty; at slot i (i = 0 first):
 *     if it holds an open file: take its next record; after block_length of
 *       them move to slot (i + 1) % cycle_length. If the file is at its end,
 *       close it and move to the next slot at once;
 *     else if files has another name: open it into slot i and read from it
 *       (without moving on);
 *     else move to the next slot; the end comes when files is exhausted
 *     and every slot is empty.
 *
 * So files A (5 records), B (2), C (4) with cycle 2, block 2 read
 * A0 A1 B0 B1 A2 A3 A4 C0 C1 C2 C3. With cycle_length 1 the files are read
 * one after another. Takes ownership of files (destroyed on failure too).
 * o may be NULL for the defaults.
 * Errors: TL_EINVAL cycle_length or block_length < 1, a compression outside
 * the enum; TL_ENOMEM. Reading reports a file that cannot be opened
 * (TL_EIO) and corrupt records (TL_EPARSE), naming file, record and offset.
 */
TL_API tl_status tl_dataset_tfrecord_interleave(tl_dataset *files, const tl_tfrecord_options *o,
                                                tl_dataset **out);

/* tl_dataset_from_files(patterns, n) then tl_dataset_tfrecord_interleave.
 * Errors: those of both. */
TL_API tl_status tl_dataset_tfrecord(const char *const *patterns, int n, const tl_tfrecord_options *o,
                                     tl_dataset **out);

/*
 * Criteo TSV files (text_data.h's reader and transform; o may be NULL for its
 * defaults), the files matching patterns read one after another, as
 * elements {"label": int32 scalar, "dense": float32 (13), "C1": int64
 * scalar, ..., "C26": int64 scalar}: each categorical column's id under
 * Criteo's name for it, as an embedding feature of that name reads it
 * (estimator.h's tl_input).
 * Errors: as tl_dataset_from_files; TL_EINVAL bad options (checked at the
 * first file). Reading reports the reader's errors (file:line: field ...).
 */
TL_API tl_status tl_dataset_criteo(const char *const *patterns, int n, const tl_criteo_options *o,
                                   tl_dataset **out);

/*
 * CSV files with a header (text_data.h; o->columns is required, copied),
 * read one after another, as elements with one scalar tensor per column,
 * keyed by its name: float32 for TL_CSV_FLOAT32, int64 for TL_CSV_INT64
 * (the label column too), bytes for TL_CSV_STRING.
 * Errors: as tl_dataset_from_files; TL_EINVAL o NULL or without columns.
 */
TL_API tl_status tl_dataset_csv(const char *const *patterns, int n, const tl_csv_options *o, tl_dataset **out);

/*
 * An IDX images file (N, dims...) of any element type, and optionally an IDX
 * labels file (N) of an integer type, as elements {"features": float32
 * (dims...) = value * scale, "label": int32 scalar} ("label" absent without
 * a labels file). Both are read whole at creation (tl_idx_read_file).
 * Errors: those of tl_idx_read_file; TL_EINVAL images NULL, scale not finite;
 * TL_EPARSE labels that are not rank 1 of an integer type, counts that
 * differ, a label outside int32.
 */
TL_API tl_status tl_dataset_idx(const char *images, const char *labels, float scale, tl_dataset **out);

/* The examples of d, borrowed (it must outlive the dataset), as elements
 * {"features": float32 (D), "label": int32 scalar}. Errors: TL_EINVAL d NULL. */
TL_API tl_status tl_dataset_labeled(const tl_labeled_data *d, tl_dataset **out);

/*
 * tf.data.Dataset.from_tensor_slices over n dense columns in memory:
 * columns[c] is a float32, int32 or int64 tensor of rank 1..8 whose shape[0]
 * is the number of examples N, the same for every column. Element i is
 * {columns[0].key: row i of column 0, ..., columns[n-1].key: row i of
 * column n-1}, in column order, each of its column's shape without the first
 * dimension (a rank-1 column gives scalars); its values are copied out of the
 * column when the element is read.
 *
 *     float x[6][2][3];  int64_t id[6];               // 6 examples
 *     tl_tensor cols[2] = {
 *         {.key = "x", .dtype = TL_DT_FLOAT32, .rank = 3, .shape = {6, 2, 3}, .data = x},
 *         {.key = "id", .dtype = TL_DT_INT64, .rank = 1, .shape = {6}, .data = id},
 *     };
 *     tl_dataset *ds;
 *     tl_status st = tl_dataset_from_tensor_slices(cols, 2, &ds);   // {x: (2, 3), id: ()}
 *
 * The keys and shapes are copied; the data is BORROWED, not copied: the
 * arrays must stay alive and unchanged as long as the dataset (and every
 * dataset made from it). The position (saved with tl_dataset_save) is the
 * next row and N; a restore refuses a state of another N or another list of
 * keys, shapes and dtypes (the node is "tensor_slices(N examples: key (shape)
 * dtype, ...)"). repeat() starts again at row 0.
 * Errors: TL_EINVAL out NULL, n < 1, columns NULL, a NULL or empty key, a key
 * used twice, a dtype outside the enum, a ragged column, a rank outside
 * 1..8, a negative dimension or more than 2^60 values, data NULL for a
 * column with values, a column whose shape[0] differs from column 0's
 * (naming both keys and both counts); TL_ENOTIMPL a bytes column; TL_ENOMEM.
 * The messages name the column's key and the value.
 */
TL_API tl_status tl_dataset_from_tensor_slices(const tl_tensor *columns, int n, tl_dataset **out);

/* ======================================================================== */
/* Transforms: each takes ownership of in and destroys it when it fails     */
/* ======================================================================== */

/* Keeps element k of in when k % num_shards == index (tf.data's shard).
 * Errors: TL_EINVAL num_shards < 1 or index outside [0, num_shards). */
TL_API tl_status tl_dataset_shard(tl_dataset *in, int64_t num_shards, int64_t index, tl_dataset **out);

/*
 * tf.data's shuffle: fills a buffer of buffer_size elements, outputs a
 * uniformly random one (Philox keyed by seed and, with
 * reshuffle_each_iteration, the epoch) and puts the next input element in
 * its slot; at the end of the input the last buffered element fills the
 * slot. buffer_size 1 keeps the order.
 * Errors: TL_EINVAL buffer_size < 1.
 */
TL_API tl_status tl_dataset_shuffle(tl_dataset *in, int64_t buffer_size, uint64_t seed,
                                    bool reshuffle_each_iteration, tl_dataset **out);

/* Reads in count times (-1: for ever), restarting it at each end; epoch e
 * reshuffles the shuffles below. An epoch that yields nothing ends it (no
 * endless loop over an empty input). Errors: TL_EINVAL count < -1. */
TL_API tl_status tl_dataset_repeat(tl_dataset *in, int64_t count, tl_dataset **out);

/* The first n elements (-1: all). Errors: TL_EINVAL n < -1. */
TL_API tl_status tl_dataset_take(tl_dataset *in, int64_t n, tl_dataset **out);

/* All but the first n elements (-1: none at all). Errors: TL_EINVAL n < -1. */
TL_API tl_status tl_dataset_skip(tl_dataset *in, int64_t n, tl_dataset **out);

/*
 * Combines batch_size consecutive elements: dense tensors are stacked (a new
 * leading dimension; every element must have the same shape), ragged ones
 * concatenated (num_rows = the batch, row_lengths one per element, shape
 * {batch, longest row}). The last, smaller batch is dropped with
 * drop_remainder, as TPUs need static shapes.
 * Errors: TL_EINVAL batch_size < 1. Reading: TL_EINVAL elements of unequal
 * shapes, naming the key, the two shapes and the element; TL_ENOTIMPL a
 * ragged tensor of more than one row (a VarLen sequence feature).
 */
TL_API tl_status tl_dataset_batch(tl_dataset *in, int64_t batch_size, bool drop_remainder, tl_dataset **out);

typedef struct tl_parse_options {
    const char *record_key;     /* the input's bytes scalar to parse; NULL: "record" */
    bool sequence_example;      /* parse tf.SequenceExample; implied by a sequence spec type */
    bool skip_corrupt_records;  /* skip records that do not parse or fit the specs (logged, counted) */
    int num_parallel_calls;     /* threads parsing at once, 1..64 (0: 1); the order stays the input's */
} tl_parse_options;

/*
 * tf.io.parse_single_example over each element's record_key tensor: the
 * output has one tensor per spec, in spec order, keyed by the spec's key:
 * FIXED_LEN dense with the spec's shape; VAR_LEN ragged (rank 1, one row);
 * FIXED_LEN_SEQUENCE dense (steps, shape...); VAR_LEN_SEQUENCE ragged with
 * one row per step. The specs are copied (defaults included). o may be NULL.
 * Errors: TL_EINVAL n < 1, a bad spec (as tl_example_parse_features says),
 * num_parallel_calls outside 0..64. Reading: TL_EINVAL / TL_EPARSE a record
 * that does not parse or fit, naming the file, the record, its offset and
 * the key; TL_EINVAL an input element without a bytes scalar record_key.
 */
TL_API tl_status tl_dataset_parse_example(tl_dataset *in, const tl_feature_spec *specs, int n,
                                          const tl_parse_options *o, tl_dataset **out);

/* Reads up to buffer_size elements ahead of the consumer on a background
 * thread. The elements and their order are those of in.
 * Errors: TL_EINVAL buffer_size < 1. */
TL_API tl_status tl_dataset_prefetch(tl_dataset *in, int64_t buffer_size, tl_dataset **out);

/*
 * map(lambda x: tf.cast(x, tf.float32) * scale) over numeric tensors: the
 * tensors named by keys (num_keys of them), or with keys NULL every float32,
 * int32 or int64 tensor whose key is not in skip (num_skip; e.g. the label
 * and the embedding ids), become float32 with each value times scale (the
 * float product: (float)value * (float)scale). Dense and ragged tensors
 * alike; other tensors pass unchanged. It holds no state of its own. Errors:
 * TL_EINVAL for scale not finite and > 0, a NULL key, keys or skip NULL with
 * a count; at tl_dataset_next, TL_EINVAL for a chosen tensor that is not
 * numeric (named, with the record).
 */
TL_API tl_status tl_dataset_scale(tl_dataset *in, double scale, const char *const *keys, int num_keys,
                                  const char *const *skip, int num_skip, tl_dataset **out);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_DATASET_H */

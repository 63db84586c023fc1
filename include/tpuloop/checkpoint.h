/*
 * tpuloop/checkpoint.h — checkpoint files (safetensors) and the model_dir
 * that holds them (TensorFlow's `checkpoint` index, retention, resume).
 *
 * A checkpoint is one safetensors file of named tensors, readable by
 * Python's `safetensors` and by NumPy, written crash-safe: a temporary file,
 * fsync, rename over the final name, fsync of the directory. A reader checks
 * every byte before it hands out a pointer: the header's bounds and syntax,
 * each tensor's dtype, shape and offsets, that the tensors tile the data
 * section exactly, and two CRC-32C checksums (data and header). A corrupt
 * file is an error that names the file and the exact problem; it is never
 * loaded and never crashes the reader.
 *
 *     tl_ckpt_writer *w;
 *     tl_ckpt_writer_create(&w);
 *     int64_t shape[2] = {784, 256};
 *     tl_ckpt_writer_add(w, "dense/kernel", TL_CKPT_F32, shape, 2, kernel);  // borrowed
 *     tl_ckpt_writer_set_meta(w, "global_step", "200");
 *     if (tl_ckpt_writer_write(w, "/m/model.ckpt-200.safetensors") != TL_OK)
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *     tl_ckpt_writer_destroy(w);
 *
 *     tl_ckpt_reader *r;
 *     if (tl_ckpt_open("/m/model.ckpt-200.safetensors", 0, &r) == TL_OK) {
 *         tl_ckpt_tensor_info t;
 *         if (tl_ckpt_find(r, "dense/kernel", &t) == TL_OK)
 *             memcpy(kernel, t.data, t.bytes);
 *         tl_ckpt_close(r);
 *     }
 *
 * In a model_dir, tl_ckpt_manager does what TensorFlow's Saver does for an
 * Estimator: it names files model.ckpt-<step>.safetensors, keeps the
 * `checkpoint` index, and deletes old checkpoints by keep_checkpoint_max and
 * keep_checkpoint_every_n_hours — only after the new checkpoint and the new
 * index are durable. tl_ckpt_latest_valid finds what to resume from.
 *
 * Thread safety: a writer, reader or manager is used by one thread at a
 * time; different objects are independent. Readers are immutable once open,
 * so one reader may be read from many threads.
 */
#ifndef TPULOOP_CHECKPOINT_H
#define TPULOOP_CHECKPOINT_H

#include "tpuloop/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* The file format                                                          */
/* ======================================================================== */

/*
 * safetensors, as the reference implementation (huggingface/safetensors)
 * writes and reads it:
 *
 *   offset  size  field
 *   0       8     N, the header length, unsigned little-endian
 *   8       N     the header: a JSON object, UTF-8, padded with spaces to a
 *                 multiple of 8 bytes (so the data starts 8-aligned)
 *   8+N     ...   the data section: every tensor's bytes, row-major,
 *                 little-endian, with no gaps, overlaps or trailing bytes
 *
 * The header maps each tensor name to
 *     {"dtype": "F32", "shape": [784, 256], "data_offsets": [begin, end]}
 * (offsets relative to the data section, end - begin = the tensor's bytes)
 * and the optional key "__metadata__" to an object of string values.
 *
 * tpuloop's writer puts "__metadata__" first and fills in
 *     "format": "tpuloop-ckpt", "format_version": "1",
 *     "crc32c": CRC-32C of the whole data section, 8 lowercase hex digits,
 *     "header_crc32c": CRC-32C of the 8 length bytes and the N header bytes
 *                      with this field's own 8 digits read as "00000000",
 * then the caller's keys. Tensors are stored by element size, largest first,
 * and in the order they were added within one size (what the reference
 * writer does to keep every tensor aligned to its element size); so a
 * mapped tensor's data pointer can be read as its C type.
 *
 * Readers (tl_ckpt_open) apply the reference reader's rules and more: the
 * header at most 100 MB (so the writer refuses a larger one) and starting
 * with '{'; no duplicate keys; every
 * entry a known dtype, a shape of non-negative integers (rank <= 64), and
 * offsets [begin, end] with end - begin equal to the shape's bytes, computed
 * without overflow; names non-empty; sorted by offset, the tensors tile the
 * data section exactly; metadata values strings; then the checksums.
 */

/* The safetensors dtypes tpuloop reads and writes. */
typedef enum {
    TL_CKPT_BOOL = 0,
    TL_CKPT_U8,
    TL_CKPT_I8,
    TL_CKPT_F8_E5M2,
    TL_CKPT_F8_E4M3,
    TL_CKPT_I16,
    TL_CKPT_U16,
    TL_CKPT_F16,
    TL_CKPT_BF16,
    TL_CKPT_I32,
    TL_CKPT_U32,
    TL_CKPT_F32,
    TL_CKPT_I64,
    TL_CKPT_U64,
    TL_CKPT_F64,
    TL_CKPT_NUM_DTYPES
} tl_ckpt_dtype;

#define TL_CKPT_MAX_RANK 64
#define TL_CKPT_MAX_HEADER 100000000 /* bytes, the reference reader's limit */
#define TL_CKPT_FORMAT "tpuloop-ckpt"
#define TL_CKPT_FORMAT_VERSION "1"

/* Bytes per element (1, 2, 4 or 8); 0 for a value not in the enum. */
TL_API size_t tl_ckpt_dtype_size(tl_ckpt_dtype dt);

/* The format's name ("F32"); "?" for a value not in the enum. */
TL_API const char *tl_ckpt_dtype_name(tl_ckpt_dtype dt);

/* The dtype called name ("F32"). Errors: TL_EINVAL for an unknown name. */
TL_API tl_status tl_ckpt_dtype_parse(const char *name, tl_ckpt_dtype *out);

/* ======================================================================== */
/* Writing                                                                  */
/* ======================================================================== */

typedef struct tl_ckpt_writer tl_ckpt_writer;

/* A writer with no tensors. Errors: TL_ENOMEM. */
TL_API tl_status tl_ckpt_writer_create(tl_ckpt_writer **out);

/* Frees the writer (not the tensors' data). NULL does nothing. */
TL_API void tl_ckpt_writer_destroy(tl_ckpt_writer *w);

/*
 * Adds a tensor. name and shape are copied; data (the tensor's bytes,
 * row-major, shape[0] * ... * dtype size of them) is borrowed until the
 * writer is written or destroyed. rank 0 is a scalar (shape may be NULL); a
 * zero in shape is an empty tensor (data may be NULL).
 * Errors: TL_EINVAL for an empty name, "__metadata__", a name already added,
 * a name that is not valid UTF-8, an unknown dtype, a rank outside
 * [0, 64], a negative dimension, a size that overflows, or NULL data for a
 * non-empty tensor; TL_ENOMEM.
 */
TL_API tl_status tl_ckpt_writer_add(tl_ckpt_writer *w, const char *name, tl_ckpt_dtype dtype, const int64_t *shape,
                                    int rank, const void *data);

/* Sets a metadata key (copied; a second call replaces the value). Errors:
 * TL_EINVAL for a key the writer fills in ("format", "format_version",
 * "crc32c", "header_crc32c"), an empty key, or text that is not valid UTF-8;
 * TL_ENOMEM. */
TL_API tl_status tl_ckpt_writer_set_meta(tl_ckpt_writer *w, const char *key, const char *value);

/*
 * Writes the checkpoint to path atomically (see the top of the file): when
 * this returns TL_OK the file is complete and durable; on any failure the
 * file at path, if there was one, is exactly as it was and no temporary file
 * is left. The writer can be written again (to another path, or after the
 * cause is fixed).
 * It never writes what a reader would refuse: a header over
 * TL_CKPT_MAX_HEADER is refused before anything is written (store large
 * data as a tensor, e.g. U8 [bytes]), and the temporary file is opened with
 * tl_ckpt_open — every bound and both checksums, from the file — before it
 * is renamed over path.
 * Errors: TL_EINVAL for a header over TL_CKPT_MAX_HEADER, naming the limit,
 * the size and its largest part; TL_EIO naming the file and the system's
 * reason ("No space left on device"), or "the checkpoint written does not
 * read back, so it is not committed: <the reader's reason>"; TL_ENOMEM.
 */
TL_API tl_status tl_ckpt_writer_write(tl_ckpt_writer *w, const char *path);

/* ======================================================================== */
/* Reading                                                                  */
/* ======================================================================== */

typedef struct tl_ckpt_reader tl_ckpt_reader;

/* Flags of tl_ckpt_open. */
enum {
    /* Accept safetensors files that tpuloop did not write: "format",
     * "format_version" and the checksums may be missing (a checksum that is
     * present is still checked). Without it they are required. */
    TL_CKPT_ALLOW_FOREIGN = 1
};

typedef struct tl_ckpt_tensor_info {
    const char *name;
    tl_ckpt_dtype dtype;
    int rank;
    const int64_t *shape; /* (rank) */
    const void *data;     /* (bytes), valid until tl_ckpt_close; NULL when bytes is 0 */
    uint64_t bytes;
    uint64_t offset; /* of data in the data section */
} tl_ckpt_tensor_info;

/*
 * Opens and validates the checkpoint at path (see the format above) and maps
 * it read-only. flags: 0 or TL_CKPT_ALLOW_FOREIGN. The file must not be
 * truncated by another program while it is open (the mapping would fault).
 * Errors (the message begins with path):
 *   TL_ENOTFOUND  the file does not exist;
 *   TL_EIO        it cannot be read;
 *   TL_EPARSE     it is not a valid checkpoint; the message says exactly why,
 *                 e.g. "tensor 'dense/kernel': data_offsets [0, 96] but F32
 *                 [4, 5] needs 80 bytes" or "data checksum mismatch: crc32c
 *                 says 1c2d3e4f, the 1024 data bytes have 9a8b7c6d";
 *   TL_ENOMEM.
 */
TL_API tl_status tl_ckpt_open(const char *path, unsigned flags, tl_ckpt_reader **out);

/* The same from memory: buf (len bytes) is borrowed until tl_ckpt_close;
 * label names it in messages (NULL: "<memory>"). This is the whole parser
 * without files, for tools and fuzzing. Errors as tl_ckpt_open. */
TL_API tl_status tl_ckpt_open_memory(const void *buf, size_t len, const char *label, unsigned flags,
                                     tl_ckpt_reader **out);

/* Closes the reader; every pointer it gave out dies with it. NULL does nothing. */
TL_API void tl_ckpt_close(tl_ckpt_reader *r);

/* The number of tensors. */
TL_API int tl_ckpt_num_tensors(const tl_ckpt_reader *r);

/* Tensor i, in the order of the file's data section. Errors: TL_EINVAL for
 * i outside [0, tl_ckpt_num_tensors). */
TL_API tl_status tl_ckpt_tensor(const tl_ckpt_reader *r, int i, tl_ckpt_tensor_info *info);

/* The tensor called name. Errors: TL_ENOTFOUND naming the file and name. */
TL_API tl_status tl_ckpt_find(const tl_ckpt_reader *r, const char *name, tl_ckpt_tensor_info *info);

/* The metadata value of key, or NULL when absent. Valid until close. */
TL_API const char *tl_ckpt_meta(const tl_ckpt_reader *r, const char *key);

/* The number of metadata entries, and entry i (in the file's order); i out
 * of range gives NULL key and value. */
TL_API int tl_ckpt_num_meta(const tl_ckpt_reader *r);
TL_API void tl_ckpt_meta_at(const tl_ckpt_reader *r, int i, const char **key, const char **value);

/* Whether the file's checksums were present (and so verified): bit 0 the
 * data's, bit 1 the header's. Files tpuloop wrote have both. */
TL_API unsigned tl_ckpt_checksums(const tl_ckpt_reader *r);

/* ======================================================================== */
/* model_dir: file names, the `checkpoint` index, retention, resume         */
/* ======================================================================== */

/*
 * A model_dir holds model.ckpt-<step>.safetensors files and the text file
 * `checkpoint`, TensorFlow's CheckpointState in protobuf text format, paths
 * relative to the directory (Estimator writes them so), oldest first:
 *
 *     model_checkpoint_path: "model.ckpt-300"
 *     all_model_checkpoint_paths: "model.ckpt-100"
 *     all_model_checkpoint_paths: "model.ckpt-200"
 *     all_model_checkpoint_paths: "model.ckpt-300"
 *     all_model_checkpoint_timestamps: 1700000000.5
 *     all_model_checkpoint_timestamps: 1700000600.25
 *     all_model_checkpoint_timestamps: 1700001200
 *     last_preserved_timestamp: 1699999000
 *
 * A path is a checkpoint prefix as in TensorFlow; its file is the prefix
 * plus ".safetensors". The timestamps (seconds since the Epoch, when each
 * checkpoint was written) are fields of the same proto that TF 2's
 * CheckpointManager writes; without them tpuloop uses the files' mtimes, as
 * TF 1's Saver does on recovery.
 */

#define TL_CKPT_INDEX_NAME "checkpoint"
#define TL_CKPT_PREFIX "model.ckpt"
#define TL_CKPT_SUFFIX ".safetensors"

/*
 * Host files. A checkpoint written by H > 1 hosts has one file per host
 * beside the main file: host h writes
 *
 *     model.ckpt-<step>.host-<h>-of-<H>.safetensors     (h, H: 5 digits)
 *
 * (TensorFlow's model.ckpt-<step>.data-00000-of-00002 in spirit) at every
 * save, a tpuloop checkpoint file of its own that holds what only host h
 * has:
 *     "embedding/<table>/..."    its shard of every embedding table (when
 *                                the model has tables), F32 (rows, dim)
 *     "input_datasets"           U8 [bytes], when training reads input_fn
 *                                datasets: the JSON array of one element
 *                                per invocation of the training plan,
 *                                host h's own invocations' tl_dataset_save
 *                                texts and null for every other host's
 * with the metadata
 *     "step"                     the step, as the main file's
 *     "host_file"                h, in decimal
 *     "host_files"               H
 *     "table_sharding_strategy"  "DIV_DEFAULT" or "MOD", with tables only:
 *                                which ids are host h's (tpu_embedding.md
 *                                §8.1)
 * Host 0 writes the main file model.ckpt-<step>.safetensors last, once
 * every host's file is durable, with "host_files" (and, with tables,
 * "table_sharding_strategy") in its metadata: the main file is the commit
 * marker. A main file whose "host_files" is S is complete only with its S
 * host files, each valid and saying the same step, host number and count
 * (and strategy); a main file without the key was written by one host and
 * holds everything itself. Host files are never listed as checkpoints
 * (tl_ckpt_list) and never in the index; the manager deletes them with
 * their checkpoint.
 */
#define TL_CKPT_HOST_INFIX ".host-"
#define TL_CKPT_META_HOST_FILES "host_files"
#define TL_CKPT_META_HOST_FILE "host_file"
#define TL_CKPT_META_TABLE_SHARDING "table_sharding_strategy"
#define TL_CKPT_MAX_HOST_FILES 99999

/* Writes "<model_dir>/model.ckpt-<step>.safetensors" into buf (cap bytes).
 * Errors: TL_EINVAL for a negative step or a buffer too small. */
TL_API tl_status tl_ckpt_path(const char *model_dir, int64_t step, char *buf, size_t cap);

/* Writes the path of host file `host` of num_hosts of the checkpoint file
 * ckpt_path ("<dir>/model.ckpt-200.safetensors", or its prefix without
 * ".safetensors") into buf: "<dir>/model.ckpt-200.host-00001-of-00002
 * .safetensors". Errors: TL_EINVAL for num_hosts outside [1,
 * TL_CKPT_MAX_HOST_FILES], host outside [0, num_hosts), or a buffer too
 * small. */
TL_API tl_status tl_ckpt_host_path(const char *ckpt_path, int host, int num_hosts, char *buf, size_t cap);

/*
 * The host files of the open checkpoint r (read from ckpt_path): 0 in
 * *num_files when it was written by one host (no "host_files" metadata),
 * else S after checking that each of the S host files opens (tl_ckpt_open
 * with flags: every bound and checksum) and says the main file's step,
 * its host number, S and the main file's table_sharding_strategy. Every
 * file is closed again.
 * Errors (the checkpoint is incomplete): TL_EPARSE "checkpoint FILE is
 * incomplete: host file 1 of 2: HOST_FILE: ..." with the host file
 * reader's reason (a missing file, a checksum) or the metadata that
 * disagrees ("__metadata__ step is \"299\", the checkpoint needs \"300\""),
 * or a "host_files" value that is not a number in [1, 99999]; TL_ENOMEM.
 */
TL_API tl_status tl_ckpt_check_host_files(const char *ckpt_path, const tl_ckpt_reader *r, unsigned flags,
                                          int *num_files);

/* TensorFlow's CheckpointState. Paths as written in the file. */
typedef struct tl_ckpt_state {
    char *model_checkpoint_path;             /* the latest; never NULL in a parsed state */
    int num_paths;                           /* kept checkpoints */
    char **all_model_checkpoint_paths;       /* (num_paths), oldest first */
    int num_timestamps;                      /* 0 or num_paths */
    double *all_model_checkpoint_timestamps; /* (num_timestamps) */
    double last_preserved_timestamp;         /* 0 when absent */
} tl_ckpt_state;

/*
 * Parses the text of a `checkpoint` file (len bytes; label names it in
 * messages). Accepts the fields above in any order, '#' comments, and the
 * text format's string escapes. *out is freed with tl_ckpt_state_destroy.
 * Errors: TL_EPARSE naming the line ("checkpoint:3: unknown field 'foo'"),
 * including a missing model_checkpoint_path (TensorFlow's "Invalid
 * checkpoint state"); TL_ENOMEM.
 */
TL_API tl_status tl_ckpt_state_parse(const char *text, size_t len, const char *label, tl_ckpt_state **out);

/* Reads <model_dir>/checkpoint. Errors: TL_ENOTFOUND when there is none,
 * TL_EPARSE, TL_EIO, TL_ENOMEM. */
TL_API tl_status tl_ckpt_state_read(const char *model_dir, tl_ckpt_state **out);

/* Writes st as <model_dir>/checkpoint, atomically. Errors: TL_EINVAL for a
 * NULL model_checkpoint_path or num_timestamps other than 0 or num_paths;
 * TL_EIO; TL_ENOMEM. */
TL_API tl_status tl_ckpt_state_write(const char *model_dir, const tl_ckpt_state *st);

/* The text tl_ckpt_state_write writes, in a new string freed with
 * tl_ckpt_free_string; NULL when out of memory or st is invalid. */
TL_API char *tl_ckpt_state_format(const tl_ckpt_state *st);
TL_API void tl_ckpt_free_string(char *s);

TL_API void tl_ckpt_state_destroy(tl_ckpt_state *st);

/* The steps of the model.ckpt-<step>.safetensors files in model_dir,
 * ascending (whatever the index says). *steps is freed with
 * tl_ckpt_free_steps. Errors: TL_ENOTFOUND when model_dir does not exist,
 * TL_EIO, TL_ENOMEM. */
TL_API tl_status tl_ckpt_list(const char *model_dir, int64_t **steps, int *count);
TL_API void tl_ckpt_free_steps(int64_t *steps);

/*
 * Finds the checkpoint to resume from: the candidates are the index's
 * checkpoints and every model.ckpt-<step>.safetensors in the directory,
 * tried newest step first. One that does not open (truncated, bit-flipped,
 * a metadata "step" that disagrees with its name, ...) or is incomplete (a
 * host file missing or corrupt: tl_ckpt_check_host_files) is skipped
 * with a warning naming the file and why. On success *out is an open reader and
 * *step its step. flags as tl_ckpt_open.
 * Errors: TL_ENOTFOUND when model_dir does not exist or holds no checkpoint
 * ("no checkpoint in DIR": start from scratch); TL_EPARSE when there are
 * checkpoints but none is valid ("none of the 3 checkpoints in DIR is
 * valid; the newest: FILE: WHY") — a run must not silently start over
 * then; TL_EIO when the directory cannot be read; TL_ENOMEM.
 */
TL_API tl_status tl_ckpt_latest_valid(const char *model_dir, unsigned flags, tl_ckpt_reader **out, int64_t *step);

typedef struct tl_ckpt_manager tl_ckpt_manager;

/* keep_checkpoint_every_n_hours None (any negative value means None). */
#define TL_CKPT_KEEP_HOURS_NONE (-1.0)

typedef struct tl_ckpt_manager_options {
    int64_t keep_checkpoint_max;          /* >= 0; 0 (TensorFlow's None or 0) deletes nothing; default 5 */
    double keep_checkpoint_every_n_hours; /* > 0, or TL_CKPT_KEEP_HOURS_NONE; default 10000 */
    /* Wall clock in seconds since the Epoch; NULL for the system's. Tests
     * pass a fake one to cross hour boundaries. */
    double (*clock)(void *ud);
    void *clock_ud;
} tl_ckpt_manager_options;

/* TensorFlow's defaults: keep 5, keep one every 10000 hours. */
TL_API void tl_ckpt_manager_options_init(tl_ckpt_manager_options *o);

/*
 * A manager for model_dir (which must exist). It recovers its list of kept
 * checkpoints as TF's Saver does after a restart: the index's paths whose
 * files exist, with their timestamps (or mtimes); plus any checkpoint newer
 * than the index's latest (a crash between the file and the index). A
 * missing or corrupt index is a warning; then every checkpoint file in the
 * directory is recovered. The keep_checkpoint_every_n_hours clock starts now
 * (TF's Saver starts it when it is built). Temporary files of dead
 * processes (a crash in the middle of a write) are removed. One manager
 * (one process) writes a model_dir at a time; the manager does not check
 * that (the estimator holds tl_ckpt_lock_acquire's lock for it).
 * Errors: TL_EINVAL for keep_checkpoint_max < 0, or hours 0 or NaN;
 * TL_ENOTFOUND when model_dir does not exist; TL_EIO; TL_ENOMEM.
 */
TL_API tl_status tl_ckpt_manager_create(const char *model_dir, const tl_ckpt_manager_options *o,
                                        tl_ckpt_manager **out);

/* NULL does nothing. */
TL_API void tl_ckpt_manager_destroy(tl_ckpt_manager *m);

/*
 * Saves w as model.ckpt-<step>.safetensors (metadata "step" set to step),
 * then the index listing it as the latest, then deletes the checkpoints that
 * fall out — TF 1's Saver (saver.py: _RecordLastCheckpoint,
 * _MaybeDeleteOldCheckpoints), as Estimator configures it:
 *   keep_checkpoint_max N > 0: the new checkpoint joins the list (a step
 *     already in it moves to the end, replaced); while more than N are
 *     listed, the oldest leaves the list. It stays on disk, unlisted, if it
 *     was written after the next keep time (which then moves
 *     keep_checkpoint_every_n_hours on), else its file is deleted. The next
 *     keep time starts as the manager's creation plus the hours; with hours
 *     None it is the creation and never moves, so every checkpoint written
 *     since then stays on disk and only older ones (recovered after a
 *     restart) are deleted.
 *   keep_checkpoint_max 0: no file is deleted; the list stays what the
 *     manager recovered, and the index lists it plus the latest (a fresh
 *     model_dir lists the latest alone), as TF with max_to_keep None or 0.
 * TF retires one checkpoint per save, so a recovered list longer than N
 * (N lowered between runs) stays that long there; here it shrinks to N at
 * once. Deleting happens only after the new checkpoint and index are
 * durable, and a failed delete is a warning.
 * Host files: a deleted checkpoint's host files go with it (main file
 * first). After the commit, host files that no main file commits are
 * deleted too: those of steps without a main file (a save that never
 * committed) and those of this step with another count than w's
 * "host_files" metadata (none when w has none). The caller writes the
 * host files before this call and writes no other ones during it.
 * A failed save leaves the directory as it was (or with a valid new
 * checkpoint that the index does not list yet) and makes the manager
 * sticky-failed: every later save returns the same status ("an earlier save
 * failed: ..."); make a new manager to recover from disk.
 * Errors: TL_EINVAL for a negative step; the writer's and the index's
 * write errors (TL_EIO, TL_ENOMEM).
 */
TL_API tl_status tl_ckpt_manager_save(tl_ckpt_manager *m, tl_ckpt_writer *w, int64_t step);

/* The steps the index lists (all_model_checkpoint_paths), oldest first
 * (count of them in *count); valid until the next call on m. */
TL_API const int64_t *tl_ckpt_manager_steps(const tl_ckpt_manager *m, int *count);

/* ======================================================================== */
/* One trainer per model_dir                                                */
/* ======================================================================== */

/*
 * Two trainers writing one model_dir would interleave their checkpoints and
 * index. A trainer holds the model_dir's lock for as long as it trains —
 * the estimator takes it at its first train and keeps it until
 * tl_estimator_destroy; evaluation and prediction take none, as TensorFlow
 * evaluates while it trains:
 *
 *     tl_ckpt_lock *lk;
 *     if (tl_ckpt_lock_acquire("/m", &lk) == TL_EBUSY)
 *         fprintf(stderr, "%s\n", tl_last_error());
 *         // model_dir /m is in use by another trainer: pid 4242 on host
 *         // trainer-7, started 2024-05-01T12:00:00Z (it holds /m/.tpuloop.lock)...
 *     ...
 *     tl_ckpt_lock_release(lk);
 *
 * The lock is an flock(2) on model_dir/.tpuloop.lock, whose text says who
 * holds it: {"pid": 4242, "host": "trainer-7", "started": "2024-05-01T12:00:00Z"}
 * (the start in ISO 8601, UTC). The kernel releases it when its holder
 * exits, however it exits, so the file a killed trainer leaves is not
 * locked and the next trainer takes it over (logging whose it was). It
 * belongs to the open file, not the process: a second estimator in the same
 * process is refused too; a child made by fork(2) shares its parent's
 * until one of them releases or both exit. On a filesystem that cannot lock
 * (ENOLCK) the lock is granted with a warning that nothing is guarded.
 */
typedef struct tl_ckpt_lock tl_ckpt_lock;

#define TL_CKPT_LOCK_NAME ".tpuloop.lock"

/* Takes model_dir's lock (the directory must exist) and writes the owner
 * record. Errors: TL_EBUSY naming the holder's pid, host and start time
 * (or why the file does not say) and the lock file; TL_ENOTFOUND when
 * model_dir does not exist; TL_EIO when it is not a directory or the lock
 * file cannot be opened or written; TL_EINVAL for a NULL model_dir;
 * TL_ENOMEM. */
TL_API tl_status tl_ckpt_lock_acquire(const char *model_dir, tl_ckpt_lock **out);

/* The lock file's path, valid while lk is. */
TL_API const char *tl_ckpt_lock_path(const tl_ckpt_lock *lk);

/* Empties the owner record and releases the lock. NULL does nothing. */
TL_API void tl_ckpt_lock_release(tl_ckpt_lock *lk);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_CHECKPOINT_H */

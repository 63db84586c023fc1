/*
 * tpuloop/summary.h — TensorBoard event files: writing scalar summaries and
 * reading them back.
 *
 * An event file is what TensorFlow's tf.summary.FileWriter and Estimator
 * write into model_dir and what TensorBoard reads: a TFRecord file whose
 * records are serialized tensorflow.Event protocol buffers. The first event
 * holds only the file's version, "brain.Event:2", and the wall time; each
 * later one holds a step and a Summary, a list of (tag, value) pairs, or a
 * SessionLog. tpuloop writes scalars as TF1 does, in Summary.Value.
 * simple_value (a float32), which every TensorBoard version shows in its
 * Scalars tab.
 *
 * SessionLogs are what TensorFlow's training hooks write about the session:
 * START when training (re)starts, CHECKPOINT (with the checkpoint's path)
 * after each save. TensorBoard acts on START: it drops the events of the
 * same run (directory) with a step at or after the START's step that it
 * read before it — what a crashed run wrote after its last checkpoint, which
 * the resumed run writes again. The estimator writes both (estimator.h).
 *
 * A writer creates a new file in its directory named as TensorFlow's
 * EventsWriter names it (tensorflow/core/util/events_writer.cc, which TF1's
 * FileWriter and Estimator use):
 *
 *     events.out.tfevents.<seconds since the epoch, %010lld>.<hostname>
 *
 * It never overwrites a file: if that name exists (a second writer in the
 * same directory within the same second), it appends ".1", ".2", ... —
 * TensorBoard reads every file whose name contains "tfevents".
 *
 *     tl_summary_writer *w;
 *     if (tl_summary_writer_create("model_dir", &w) != TL_OK) ...
 *     tl_summary_scalar(w, "loss", 100, 0.25f, TL_SUMMARY_NOW);
 *     const char *tags[] = {"accuracy", "loss"};
 *     const float vals[] = {0.91f, 0.27f};
 *     tl_summary_scalars(w, 100, TL_SUMMARY_NOW, 2, tags, vals);   // one event
 *     tl_summary_flush(w);                      // durable: written and fsync'ed
 *     tl_summary_writer_destroy(w);             // flushes and closes too
 *
 *     tl_summary_reader *r;
 *     tl_summary_reader_open(path, &r);
 *     const tl_event *ev;
 *     while (tl_summary_reader_next(r, &ev) == TL_OK && ev != NULL)
 *         for (size_t i = 0; i < ev->num_values; i++)
 *             printf("%lld %s %g\n", (long long)ev->step, ev->values[i].tag,
 *                    ev->values[i].simple_value);
 *     tl_summary_reader_close(r);
 *
 * Writers and readers are used by one thread at a time; different ones are
 * independent. Every error names the file.
 */
#ifndef TPULOOP_SUMMARY_H
#define TPULOOP_SUMMARY_H

#include "tpuloop/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version line of the first event of every event file. */
#define TL_EVENT_VERSION_STRING "brain.Event:2"

/* As a wall_time argument: the current time of the system clock. */
#define TL_SUMMARY_NOW (-1.0)

/* ======================================================================== */
/* Writer                                                                   */
/* ======================================================================== */

typedef struct tl_summary_writer tl_summary_writer;

/*
 * Creates dir (and its parents) when missing, creates a new event file in it
 * (see the naming above), writes the version event with the current time in
 * whole seconds (as TensorFlow does), and makes it durable (fsync).
 * Errors: TL_EINVAL for an empty dir; TL_EIO when the directory or the file
 * cannot be made or written (the message names the path and the system's
 * reason); TL_ENOMEM.
 */
TL_API tl_status tl_summary_writer_create(const char *dir, tl_summary_writer **out);

/* The path of w's event file (dir/events.out.tfevents...), valid while w is. */
TL_API const char *tl_summary_writer_path(const tl_summary_writer *w);

/*
 * Appends one event at step holding one scalar: tag, value as a float32
 * simple_value. wall_time is seconds since the Unix epoch, or TL_SUMMARY_NOW.
 * The event may stay buffered until tl_summary_flush or destroy.
 * Errors: TL_EINVAL for a NULL or empty tag, a tag that is not UTF-8 (protobuf
 * strings must be, or TensorBoard drops the event), or a wall_time that is
 * NaN, infinite or negative other than TL_SUMMARY_NOW; TL_EIO when writing
 * fails (sticky: every later call returns it, as the file may now end in a
 * partial record); TL_ENOMEM.
 */
TL_API tl_status tl_summary_scalar(tl_summary_writer *w, const char *tag, int64_t step, float value,
                                   double wall_time);

/* Appends one event at step holding n scalars, tags[i] = values[i], in that
 * order — how a hook writes several metrics of one step, and how evaluation
 * writes all its metrics. n may be 0 (an empty Summary). Errors: as
 * tl_summary_scalar, naming the index of a bad tag. */
TL_API tl_status tl_summary_scalars(tl_summary_writer *w, int64_t step, double wall_time, size_t n,
                                    const char *const *tags, const float *values);

/* TensorFlow's SessionLog.SessionStatus. */
typedef enum tl_session_status {
    TL_SESSION_STATUS_UNSPECIFIED = 0,
    TL_SESSION_START = 1,
    TL_SESSION_STOP = 2,
    TL_SESSION_CHECKPOINT = 3
} tl_session_status;

/*
 * Appends one event at step holding a SessionLog: status, checkpoint_path
 * and msg (each NULL or "" for none; a CHECKPOINT carries the save path, as
 * CheckpointSaverHook writes "<model_dir>/model.ckpt"). wall_time as in
 * tl_summary_scalar. Errors: TL_EINVAL for a status other than START, STOP
 * or CHECKPOINT, a path or msg that is not UTF-8, a bad wall_time; TL_EIO
 * (sticky); TL_ENOMEM.
 */
TL_API tl_status tl_summary_session_log(tl_summary_writer *w, int64_t step, tl_session_status status,
                                        const char *checkpoint_path, const char *msg, double wall_time);

/* Writes every buffered event and waits until the file is on the device
 * (fsync), as TensorFlow's EventsWriter::Flush does.
 * Errors: TL_EIO naming the file (sticky). */
TL_API tl_status tl_summary_flush(tl_summary_writer *w);

/* Flushes as tl_summary_flush, closes the file and frees w, also when the
 * flush fails. Returns the first error (a sticky one included). NULL returns
 * TL_OK. */
TL_API tl_status tl_summary_writer_destroy(tl_summary_writer *w);

/* ======================================================================== */
/* Reader                                                                   */
/* ======================================================================== */

typedef enum tl_event_kind {
    TL_EVENT_OTHER = 0,        /* graph_def, meta_graph_def, ...: not decoded */
    TL_EVENT_FILE_VERSION = 1, /* file_version is set */
    TL_EVENT_SUMMARY = 2,      /* values[0..num_values) are set */
    TL_EVENT_SESSION_LOG = 3   /* session_status, checkpoint_path and session_msg are set */
} tl_event_kind;

typedef struct tl_summary_value {
    const char *tag;
    /* false for the values tpuloop does not decode: images, histograms,
     * audio, and TF2's tensor-valued scalars */
    bool has_simple_value;
    float simple_value; /* 0 unless has_simple_value */
} tl_summary_value;

/* One event. Every pointer in it is valid until the next call on the reader
 * that returned it. */
typedef struct tl_event {
    uint64_t offset;  /* byte offset of its record in the file */
    uint64_t index;   /* 0 for the first event of the file */
    double wall_time; /* seconds since the epoch */
    int64_t step;
    tl_event_kind kind;
    const char *file_version;       /* TL_EVENT_FILE_VERSION; else NULL */
    size_t num_values;              /* TL_EVENT_SUMMARY; else 0 */
    const tl_summary_value *values; /* (num_values) */
    /* TL_EVENT_SESSION_LOG: the status as written (a value outside the
     * enum is passed on as is), the path and the message ("" when unset);
     * else 0, NULL and NULL. */
    tl_session_status session_status;
    const char *checkpoint_path;
    const char *session_msg;
} tl_event;

typedef struct tl_summary_reader tl_summary_reader;

/* Opens the event file at path. Errors: TL_EIO naming path; TL_ENOMEM. */
TL_API tl_status tl_summary_reader_open(const char *path, tl_summary_reader **out);

/* Reads events from the borrowed bytes data[0..size), which must outlive the
 * reader; name is what messages call them. Errors: TL_ENOMEM. */
TL_API tl_status tl_summary_reader_open_memory(const void *data, size_t size, const char *name,
                                               tl_summary_reader **out);

/*
 * The next event in *ev, or NULL at the end of the file.
 * Errors: TL_EPARSE for a corrupt file — a record whose framing or CRC is
 * wrong (the message says which, with the byte offset), or whose bytes are
 * not an Event; TL_EIO when reading fails; TL_ENOMEM. All name the file. A
 * failed reader keeps returning the same error.
 */
TL_API tl_status tl_summary_reader_next(tl_summary_reader *r, const tl_event **ev);

/* Closes the file and frees r. NULL is a no-op. */
TL_API void tl_summary_reader_close(tl_summary_reader *r);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_SUMMARY_H */

/*
 * tfrecord.h — TFRecord framing: the record format of TensorFlow's
 * TFRecordWriter / tf.data.TFRecordDataset and of TensorBoard event files.
 *
 * A TFRecord file is a plain sequence of records, nothing before, between or
 * after them. One record, field by field (all integers little-endian):
 *
 *   offset    size   field
 *   0         8      length: N, the number of data bytes (uint64)
 *   8         4      masked CRC-32C of the 8 length bytes (uint32)
 *   12        N      data: the payload (a serialized tf.Example, Event, ...)
 *   12 + N    4      masked CRC-32C of the N data bytes (uint32)
 *
 * "Masked" is tl_crc32c_mask (crc32c.h): TensorFlow rotates and offsets each
 * CRC so that a CRC over bytes that contain CRCs stays well mixed.
 *
 * The reader pulls one record at a time from a memory buffer, a file or any
 * byte stream (a callback, which is how a GZIP or ZLIB stream will plug in),
 * so its memory is the largest record, never the file. It checks both CRCs
 * and says precisely what is wrong and where: every error names the file,
 * the record's index and its byte offset, and the fault is also available as
 * a tl_tfrecord_fault for callers that treat some faults differently (a
 * follower of a live event file waits at a truncated last record instead of
 * failing).
 *
 *     tl_tfrecord_reader *r;
 *     if (tl_tfrecord_reader_open("train.tfrecord", &r) != TL_OK) ...
 *     const uint8_t *rec;
 *     size_t n;
 *     tl_status st;
 *     while ((st = tl_tfrecord_next(r, &rec, &n)) == TL_OK && rec != NULL)
 *         use(rec, n);            // valid until the next call on r
 *     if (st != TL_OK)
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *         // error: train.tfrecord: record 7 at byte offset 5120: bad data CRC ...
 *     tl_tfrecord_reader_destroy(r);
 *
 *     tl_tfrecord_writer *w;
 *     tl_tfrecord_writer_open("out.tfrecord", O_CREAT | O_TRUNC, &w);
 *     tl_tfrecord_write(w, bytes, len);
 *     tl_tfrecord_writer_flush(w, true);     // written and fsync'ed
 *     tl_tfrecord_writer_destroy(w);
 *
 * A first record whose length CRC fails is reported as a file that is not
 * TFRecord data ("<name>: not a TFRecord file: the first record's length CRC
 * does not match at byte 0 ..."), still TL_TFRECORD_FAULT_BAD_LENGTH_CRC.
 * Programs outside the library read and write through tpuloop/tfrecord.h.
 *
 * A reader or writer is used by one thread at a time. Errors are sticky: once
 * a call fails, every later call on the same object returns the same status
 * and message (a reader until tl_tfrecord_reader_seek), because the position
 * in the stream is no longer trustworthy.
 */
#ifndef TL_IO_TFRECORD_H
#define TL_IO_TFRECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tpuloop/base.h"

#define TL_TFRECORD_HEADER_SIZE 12 /* length + its CRC */
#define TL_TFRECORD_FOOTER_SIZE 4  /* the data CRC */

/* The default limit on one record's length. Memory grows only as data
 * arrives, so a corrupt length never allocates more than the stream holds;
 * the limit bounds what a legitimately huge (or endless) stream can make the
 * reader hold. TensorFlow's protobufs stop at 2 GiB, so no real record is
 * longer. */
#define TL_TFRECORD_DEFAULT_MAX_RECORD ((uint64_t)1 << 31)

/* What went wrong with the last record a reader tried. */
typedef enum tl_tfrecord_fault {
    TL_TFRECORD_FAULT_NONE = 0,
    TL_TFRECORD_FAULT_TRUNCATED_HEADER, /* the stream ends inside a 12-byte header */
    TL_TFRECORD_FAULT_BAD_LENGTH_CRC,   /* the length bytes do not match their CRC */
    TL_TFRECORD_FAULT_TRUNCATED_DATA,   /* the length runs past the end of the stream */
    TL_TFRECORD_FAULT_BAD_DATA_CRC,     /* the data bytes do not match their CRC */
    TL_TFRECORD_FAULT_TOO_LARGE,        /* the length is over the reader's max_record */
    TL_TFRECORD_FAULT_READ_ERROR        /* the file or stream itself failed */
} tl_tfrecord_fault;

/* Writes a record's 12-byte header for a payload of len bytes into hdr. */
void tl_tfrecord_encode_header(uint8_t hdr[TL_TFRECORD_HEADER_SIZE], uint64_t len);

/* The 4-byte footer (masked CRC-32C of data[0..n)) as stored in the file. */
uint32_t tl_tfrecord_data_crc(const void *data, size_t n);

/* ======================================================================== */
/* Reader                                                                   */
/* ======================================================================== */

typedef struct tl_tfrecord_reader tl_tfrecord_reader;

/*
 * A byte stream for tl_tfrecord_reader_create_stream: reads up to n bytes
 * into buf and sets *got to the count, which is 0 only at the end of the
 * stream (a short read is not the end). On failure it returns a status with
 * tl_error's message, which the reader prefixes with the name and offset.
 */
typedef tl_status (*tl_tfrecord_read_fn)(void *ud, void *buf, size_t n, size_t *got);

/* Opens the file at path for reading.
 * Errors: TL_EIO when it cannot be opened (the message names the path and
 * the system's reason); TL_ENOMEM. */
tl_status tl_tfrecord_reader_open(const char *path, tl_tfrecord_reader **out);

/* Reads records from the borrowed buffer data[0..size), which must outlive
 * the reader; records returned point into it, so nothing is copied. name is
 * what error messages call it (copied). Errors: TL_ENOMEM. */
tl_status tl_tfrecord_reader_create_memory(const void *data, size_t size, const char *name,
                                           tl_tfrecord_reader **out);

/* Reads records from an open stream f from its current position, without
 * closing it (the caller does, after destroying the reader). When f is a
 * regular file its size is used to reject over-long lengths before reading.
 * Errors: TL_ENOMEM. */
tl_status tl_tfrecord_reader_create_file(FILE *f, const char *name, tl_tfrecord_reader **out);

/* Reads records through read_fn(ud, ...), for streams whose length is not
 * known (a decompressor, a pipe). Errors: TL_ENOMEM. */
tl_status tl_tfrecord_reader_create_stream(tl_tfrecord_read_fn read_fn, void *ud, const char *name,
                                           tl_tfrecord_reader **out);

/* Changes the longest record accepted (TL_TFRECORD_DEFAULT_MAX_RECORD until
 * then); a longer one is TL_EPARSE with TL_TFRECORD_FAULT_TOO_LARGE. */
void tl_tfrecord_reader_set_max_record(tl_tfrecord_reader *r, uint64_t max_record);

/* Tells r that its bytes are the output of a `kind` ("GZIP", "ZLIB"; a
 * static string) decompressor, which its messages about a file that is not
 * TFRecord data then say. NULL: the bytes are the file's own. */
void tl_tfrecord_reader_set_decompressed(tl_tfrecord_reader *r, const char *kind);

/* Closes the file tl_tfrecord_reader_open opened and frees r. NULL is a no-op. */
void tl_tfrecord_reader_destroy(tl_tfrecord_reader *r);

/*
 * Reads the next record: *data and *len are its payload, valid until the next
 * call on r; *data is non-NULL for every record, also an empty one. At the
 * end of the stream (no byte left where a record would start) it returns
 * TL_OK with *data NULL and *len 0, and keeps doing so.
 * Errors: TL_EPARSE for a corrupt or truncated record (tl_tfrecord_reader_fault
 * says which kind), TL_EIO when the file or stream fails, TL_ENOMEM. Both
 * name the file, the record's index and its byte offset.
 */
tl_status tl_tfrecord_next(tl_tfrecord_reader *r, const uint8_t **data, size_t *len);

/* The byte offset where the next record starts (after an error: where the
 * failing record starts). */
uint64_t tl_tfrecord_reader_offset(const tl_tfrecord_reader *r);

/* The number of records read so far (the index of the next one). */
uint64_t tl_tfrecord_reader_index(const tl_tfrecord_reader *r);

/* The kind of the last failure, TL_TFRECORD_FAULT_NONE if none. */
tl_tfrecord_fault tl_tfrecord_reader_fault(const tl_tfrecord_reader *r);

/* Steps over the record whose data CRC just failed (tl_tfrecord_reader_fault
 * is TL_TFRECORD_FAULT_BAD_DATA_CRC): its length was vouched for by the
 * length CRC and its bytes were read whole, so the next record starts right
 * after it, in a compressed stream too. Clears the sticky error; the next
 * tl_tfrecord_next reads the record after it. How skip_corrupt_records
 * drops one bad record. Errors: TL_EINVAL for any other state (a bad length
 * or a truncation leaves no trustworthy place to go on from). */
tl_status tl_tfrecord_reader_skip_record(tl_tfrecord_reader *r);

/* Moves to byte offset `offset`, which should be a record's start (one that
 * tl_tfrecord_reader_offset returned), as record number `index`, and clears a
 * sticky error — how a dataset resumes from a saved position and how a
 * follower retries a record that was still being written. Memory readers and
 * regular files only.
 * Errors: TL_EINVAL when offset is past the end of a memory buffer;
 * TL_ENOTIMPL for a stream; TL_EIO when the file cannot seek. */
tl_status tl_tfrecord_reader_seek(tl_tfrecord_reader *r, uint64_t offset, uint64_t index);

/* ======================================================================== */
/* Writer                                                                   */
/* ======================================================================== */

typedef struct tl_tfrecord_writer tl_tfrecord_writer;

/* Opens path for writing with open(2) flags O_WRONLY | O_CLOEXEC | oflags
 * (e.g. O_CREAT | O_TRUNC, O_CREAT | O_EXCL, or O_CREAT | O_APPEND) and mode
 * 0666 before the umask. Errors: TL_EIO naming path and the system's reason
 * (errno is left as open set it, so a caller can tell EEXIST); TL_ENOMEM. */
tl_status tl_tfrecord_writer_open(const char *path, int oflags, tl_tfrecord_writer **out);

/* Appends to the open descriptor fd through a 64 KiB buffer; closes fd on
 * destroy when own_fd. name is what messages call it (copied).
 * Errors: TL_ENOMEM (fd is left open even when own_fd). */
tl_status tl_tfrecord_writer_create_fd(int fd, const char *name, bool own_fd, tl_tfrecord_writer **out);

/* Appends to the stream f through its own buffering, never closing it.
 * Errors: TL_ENOMEM. */
tl_status tl_tfrecord_writer_create_file(FILE *f, const char *name, tl_tfrecord_writer **out);

/* Appends one record holding data[0..n) (n may be 0; data may then be NULL).
 * The bytes may stay buffered until a flush. Errors: TL_EIO naming the file
 * and the system's reason when a write fails (sticky: the file may now end
 * in a partial record). */
tl_status tl_tfrecord_write(tl_tfrecord_writer *w, const void *data, size_t n);

/* Hands every buffered byte to the kernel, and with sync also waits until it
 * is on the device (fsync; a descriptor that cannot sync, such as a pipe, is
 * not an error). Errors: TL_EIO naming the file (sticky). */
tl_status tl_tfrecord_writer_flush(tl_tfrecord_writer *w, bool sync);

/* Bytes written so far through w, buffered ones included. */
uint64_t tl_tfrecord_writer_bytes(const tl_tfrecord_writer *w);

/* Flushes (without sync), closes an owned descriptor and frees w; returns the
 * first error among them, or the sticky one. NULL returns TL_OK. */
tl_status tl_tfrecord_writer_destroy(tl_tfrecord_writer *w);

#endif /* TL_IO_TFRECORD_H */

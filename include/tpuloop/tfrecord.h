/*
 * tpuloop/tfrecord.h — TFRecord files: reading and writing their records,
 * plain or compressed with GZIP or ZLIB, the files tf.io.TFRecordWriter
 * writes and tf.data.TFRecordDataset reads. The names follow TensorFlow's
 * C++ classes, io::RecordReader and io::RecordWriter, and its
 * compression_type strings ("", "GZIP", "ZLIB").
 *
 * A TFRecord file is a plain sequence of records, nothing before, between or
 * after them. One record, field by field (integers little-endian):
 *
 *   offset    size   field
 *   0         8      length: N, the number of data bytes (uint64)
 *   8         4      masked CRC-32C of the 8 length bytes (uint32)
 *   12        N      data: the payload (a serialized tf.train.Example, ...)
 *   12 + N    4      masked CRC-32C of the N data bytes (uint32)
 *
 * "Masked" is TensorFlow's crc32c::Mask: the CRC rotated right by 15 bits
 * plus 0xa282ead8, so that a CRC over bytes that hold CRCs stays well mixed.
 * A GZIP (RFC 1952) or ZLIB (RFC 1950) file is one compressed stream of
 * exactly those bytes; a GZIP file may hold several members one after
 * another (`cat a.gz b.gz`), read as one stream.
 *
 *     #include <stdio.h>
 *     #include <string.h>
 *     #include <tpuloop/tfrecord.h>
 *
 *     // Writes three records to path with GZIP, then reads them back.
 *     static int tfrecord_round_trip(const char *path)
 *     {
 *         tl_record_writer_options o;
 *         tl_record_writer_options_init(&o);
 *         o.compression = TL_RECORD_GZIP;  // tf.io.TFRecordOptions(compression_type="GZIP")
 *         o.atomic = true;                 // nothing stands under path until close succeeds
 *         tl_record_writer *w;
 *         tl_status st = tl_record_writer_open(path, &o, &w);
 *         static const char *const words[] = {"alpha", "beta", "gamma"};
 *         for (int i = 0; st == TL_OK && i < 3; i++)
 *             st = tl_record_writer_write(w, words[i], strlen(words[i]));
 *         if (st == TL_OK)
 *             st = tl_record_writer_close(w);  // the trailer, fsync, rename onto path
 *         else
 *             tl_record_writer_destroy(w);     // the temporary file is removed
 *         if (st != TL_OK) {
 *             fprintf(stderr, "error: %s\n", tl_last_error());
 *             return 1;
 *         }
 *
 *         tl_record_reader *r;
 *         if (tl_record_reader_open(path, TL_RECORD_AUTO, &r) != TL_OK) {  // GZIP, by its first bytes
 *             fprintf(stderr, "error: %s\n", tl_last_error());
 *             return 1;
 *         }
 *         const uint8_t *rec;
 *         size_t n;
 *         while ((st = tl_record_reader_next(r, &rec, &n)) == TL_OK && rec != NULL)
 *             printf("%.*s\n", (int)n, (const char *)rec);  // valid until the next call on r
 *         if (st != TL_OK)
 *             fprintf(stderr, "error: %s\n", tl_last_error());
 *             // error: x.tfrecord.gz: record 7 at byte offset 5120: bad data CRC (...)
 *         tl_record_reader_destroy(r);
 *         return st == TL_OK ? 0 : 1;
 *     }
 *
 * Reading pulls one record at a time, so memory is the largest record (and
 * zlib's window for a compressed file), never the file. Both CRCs of every
 * record are checked, and each failure says what is wrong and where: the
 * file, the record's index, its byte offset and what was expected, e.g.
 *
 *   notes.txt: not a TFRecord file: the first record's length CRC does not
 *   match at byte 0 (a TFRecord file starts with a record's 8-byte length and
 *   its masked CRC-32C; stored 0x2c646c72, computed 0xeaca0225)
 *
 *   day0.tfrecord.gz: read failed near byte offset 8769: GZIP stream
 *   truncated: the file ends at compressed byte offset 1500 (uncompressed
 *   byte offset 8781) before the end of its member's trailer
 *
 * The kind of failure is also a tl_record_fault, for callers that treat some
 * differently: TensorFlow's skip of a corrupt record (skip_corrupt_records)
 * is tl_record_reader_skip_record after TL_RECORD_FAULT_BAD_DATA_CRC. In a
 * compressed file the offsets of records are offsets in the uncompressed
 * bytes, which is where TensorFlow's readers count them too.
 *
 * A reader or writer is used by one thread at a time; different ones may be
 * used at once. Errors are sticky: once a call fails, later calls on the same
 * reader or writer return the same status and message (a reader's until
 * tl_record_reader_skip_record), because the position in the stream can no
 * longer be trusted.
 */
#ifndef TPULOOP_TFRECORD_H
#define TPULOOP_TFRECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuloop/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TensorFlow's compression_type of TFRecord files. */
typedef enum {
    TL_RECORD_NONE = 0, /* plain framing; TensorFlow's "" */
    TL_RECORD_GZIP = 1,
    TL_RECORD_ZLIB = 2,
    TL_RECORD_AUTO = 3 /* readers only: decided per file by its first bytes */
} tl_record_compression;

/* "NONE", "GZIP", "ZLIB" or "AUTO"; "?" for a value outside the enum. */
TL_API const char *tl_record_compression_name(tl_record_compression c);

/* Parses a compression_type string as TensorFlow spells it: "" or "NONE",
 * "GZIP", "ZLIB", "AUTO" (case-sensitive, as TensorFlow's are).
 * Errors: TL_EINVAL for a NULL s or out, or any other string (the message
 * names it and lists what is allowed). */
TL_API tl_status tl_record_compression_parse(const char *s, tl_record_compression *out);

/* ======================================================================== */
/* Reading                                                                  */
/* ======================================================================== */

typedef struct tl_record_reader tl_record_reader;

/* What went wrong with the record a reader last tried. */
typedef enum {
    TL_RECORD_FAULT_NONE = 0,
    TL_RECORD_FAULT_TRUNCATED_HEADER, /* the stream ends inside a record's 12-byte header */
    TL_RECORD_FAULT_BAD_LENGTH_CRC,   /* the length bytes do not match their CRC (or: not a TFRecord file) */
    TL_RECORD_FAULT_TRUNCATED_DATA,   /* the length runs past the end of the stream */
    TL_RECORD_FAULT_BAD_DATA_CRC,     /* the data bytes do not match their CRC: the one fault that can be skipped */
    TL_RECORD_FAULT_TOO_LARGE,        /* the length is over 2 GiB, more than any protobuf holds */
    TL_RECORD_FAULT_READ_ERROR        /* the file failed, or its GZIP or ZLIB stream is corrupt or truncated */
} tl_record_fault;

/*
 * Opens the TFRecord file at path, compressed with `compression`: NONE,
 * GZIP, ZLIB, or AUTO, which looks at the first bytes — a valid record
 * header (its length CRC matches) means NONE, else the GZIP magic 1f 8b 08
 * means GZIP, a valid ZLIB header means ZLIB, and anything else NONE (whose
 * first record then says what is wrong). tl_record_reader_compression tells
 * what was chosen. An empty file holds no records, whatever the compression.
 * Errors: TL_EINVAL for a NULL path or out, or a compression outside the
 * enum; TL_EIO when the file cannot be opened or its first bytes cannot be
 * read (naming path and the system's reason); TL_ENOMEM.
 */
TL_API tl_status tl_record_reader_open(const char *path, tl_record_compression compression, tl_record_reader **out);

/*
 * The same over the bytes data[0..size), which are borrowed: they must
 * outlive the reader, and for NONE the records returned point into them.
 * name is what error messages call the bytes (copied; NULL: "<memory>").
 * Errors: TL_EINVAL for a NULL out, NULL data with size > 0, or a
 * compression outside the enum; TL_ENOMEM.
 */
TL_API tl_status tl_record_reader_create_memory(const void *data, size_t size, const char *name,
                                                tl_record_compression compression, tl_record_reader **out);

/* Closes the file and frees r. NULL is a no-op. */
TL_API void tl_record_reader_destroy(tl_record_reader *r);

/*
 * Reads the next record: *data and *len are its payload, valid until the next
 * call on r; *data is non-NULL for every record, an empty one included. At
 * the end of the file (no byte left where a record would start) it returns
 * TL_OK with *data NULL and *len 0, and keeps doing so.
 * Errors (the message names the file, the record's index and its byte
 * offset; tl_record_reader_fault says which kind): TL_EPARSE for a corrupt
 * or truncated record, a file that is not TFRecord data, or corrupt or
 * truncated GZIP / ZLIB data; TL_EIO when reading the file fails; TL_ENOMEM.
 * On error *data is NULL and *len 0.
 */
TL_API tl_status tl_record_reader_next(tl_record_reader *r, const uint8_t **data, size_t *len);

/* The kind of the last failure; TL_RECORD_FAULT_NONE when the last call
 * succeeded (or failed only for memory). */
TL_API tl_record_fault tl_record_reader_fault(const tl_record_reader *r);

/*
 * Steps over the record whose data CRC just failed (tl_record_reader_fault
 * is TL_RECORD_FAULT_BAD_DATA_CRC): its length was vouched for by the length
 * CRC and its bytes were read whole, so the next record starts right after
 * it, in a compressed file too. Clears the sticky error; the next
 * tl_record_reader_next reads the record after it. This is how TensorFlow's
 * skip of corrupt records drops one record.
 * Errors: TL_EINVAL for any other state (a bad length, a truncation or a
 * corrupt compressed stream leave no trustworthy place to go on from), with
 * the file, the record and its offset.
 */
TL_API tl_status tl_record_reader_skip_record(tl_record_reader *r);

/* The compression being read: as given to open, or what AUTO chose. */
TL_API tl_record_compression tl_record_reader_compression(const tl_record_reader *r);

/* The number of records read (and skipped) so far: the index of the next. */
TL_API uint64_t tl_record_reader_index(const tl_record_reader *r);

/* The byte offset where the next record starts (after an error: where the
 * failing record starts); in a compressed file, in its uncompressed bytes. */
TL_API uint64_t tl_record_reader_offset(const tl_record_reader *r);

/* The compressed bytes consumed so far (0 for NONE): how far into the file
 * a compressed reader is, for progress reports. */
TL_API uint64_t tl_record_reader_compressed_offset(const tl_record_reader *r);

/* ======================================================================== */
/* Writing                                                                  */
/* ======================================================================== */

typedef struct tl_record_writer tl_record_writer;

typedef struct tl_record_writer_options {
    tl_record_compression compression; /* NONE, GZIP or ZLIB (AUTO is for readers); NONE */
    int compression_level;             /* zlib's level 0..9, or -1 for its default (6); -1 */
    /* false: path is created or truncated at open and written as records
     * come, as TFRecordWriter does. true: the records go to a temporary file
     * beside path ("<path>.tmp-<pid>-<n>", mode 0644 before the umask), which
     * tl_record_writer_close syncs and renames onto path, then syncs the
     * directory: path holds either what it held before or every record, even
     * after a crash or a power loss, never a part. */
    bool atomic;                       /* false */
} tl_record_writer_options;

/* The defaults above. */
TL_API void tl_record_writer_options_init(tl_record_writer_options *o);

/*
 * Opens path for writing records with the options o (NULL: the defaults).
 * Errors: TL_EINVAL for a NULL path or out, a compression other than NONE,
 * GZIP or ZLIB, or a compression_level outside -1..9; TL_EIO when the file
 * (or its temporary file) cannot be created, naming it and the system's
 * reason; TL_ENOMEM.
 */
TL_API tl_status tl_record_writer_open(const char *path, const tl_record_writer_options *o,
                                       tl_record_writer **out);

/*
 * Appends one record holding data[0..n) (data may be NULL when n is 0). The
 * bytes may stay buffered until a flush or the close.
 * Errors: TL_EINVAL for NULL data with n > 0, or a writer already finished;
 * TL_EIO naming the file and the system's reason when a write fails (sticky:
 * the file may now end in a partial record); TL_ENOMEM.
 */
TL_API tl_status tl_record_writer_write(tl_record_writer *w, const void *data, size_t n);

/*
 * Makes every record written so far readable from the file (for GZIP and
 * ZLIB a zlib sync flush, 4 or 5 bytes of overhead, so not after every
 * record) and hands it to the kernel; with sync also waits until it is on
 * the device (fsync; a descriptor that cannot sync, such as a pipe, is not an
 * error). A reader of the file as it is now reads these records, and then
 * reports a truncated stream for a compressed file.
 * Errors: TL_EINVAL for a writer already finished; TL_EIO naming the file
 * (sticky).
 */
TL_API tl_status tl_record_writer_flush(tl_record_writer *w, bool sync);

/* Uncompressed bytes written so far: the length of the TFRecord framing. */
TL_API uint64_t tl_record_writer_bytes(const tl_record_writer *w);

/*
 * Completes the file without closing the writer: the GZIP or ZLIB trailer,
 * every byte handed to the kernel, and for an atomic writer synced to the
 * device, still under its temporary name. Later writes are TL_EINVAL. This
 * lets several files be made complete first and renamed only when all of
 * them are (what `tpuloop data convert --shards` does): a failure here
 * leaves every path untouched. Calling it again returns the first result.
 * Errors: TL_EIO naming the file (or the sticky error of an earlier write).
 */
TL_API tl_status tl_record_writer_finish(tl_record_writer *w);

/*
 * Finishes the file (tl_record_writer_finish, unless done), renames an atomic
 * writer's temporary file onto path and syncs the directory, and frees w,
 * whatever happens. Returns the first error; after one an atomic writer's
 * temporary file is removed and path is as it was. NULL returns TL_OK.
 * Errors: TL_EIO naming the file and the system's reason, or the sticky
 * error of an earlier call.
 */
TL_API tl_status tl_record_writer_close(tl_record_writer *w);

/*
 * Frees w without committing: for the error paths of a program that decided
 * not to keep the file. An atomic writer's temporary file is removed and
 * path is left as it was. A non-atomic writer's file is completed as close
 * would (TensorFlow's writer, too, closes its file when it goes away), but
 * errors are not reported: call tl_record_writer_close to see them. NULL is a
 * no-op.
 */
TL_API void tl_record_writer_destroy(tl_record_writer *w);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_TFRECORD_H */

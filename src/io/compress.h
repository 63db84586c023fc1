/*
 * compress.h — GZIP and ZLIB compressed TFRecord files, the files
 * tf.io.TFRecordWriter(path, options="GZIP") and
 * tf.data.TFRecordDataset(files, compression_type="GZIP"/"ZLIB") use.
 *
 * The whole file is one compressed stream (RFC 1952 GZIP or RFC 1950 ZLIB)
 * whose uncompressed bytes are ordinary TFRecord framing (tfrecord.h). The
 * reader decompresses as the records are asked for, so its memory is zlib's
 * 32 KiB window, a 64 KiB input buffer and the largest record, never the
 * file. It behaves as TensorFlow's ZlibInputStream does:
 *
 *   - GZIP: header fields FEXTRA, FNAME, FCOMMENT and FHCRC are accepted
 *     (FHCRC is checked); each member's CRC-32 and ISIZE trailer is checked;
 *     a file of several members one after another (what `cat a.gz b.gz`, or
 *     a GZIP writer appending to its file, makes) reads as one stream. Bytes
 *     after a member that do not start another member are an error, zero
 *     padding included (TensorFlow fails there too; gzip(1) warns).
 *   - ZLIB: one stream with its Adler-32 trailer. Bytes after it are an error
 *     here, where TensorFlow silently ignores them: a second ZLIB stream
 *     (an appending writer) would otherwise lose its records without a word.
 *   - An empty file holds no records, whatever the compression.
 *   - A stream that ends before its trailer is an error even when it ends on
 *     a record boundary, so a truncated copy never passes as a shorter one.
 *
 * Decompression faults reach the caller through tl_tfrecord_next as TL_EPARSE
 * (corrupt data, bad checksums, truncation) with tl_tfrecord_reader_fault
 * TL_TFRECORD_FAULT_READ_ERROR, and the message names the file, the record,
 * and the compressed and uncompressed byte offsets where inflate stopped:
 *
 *   train.gz: read failed near byte offset 152: GZIP data corrupt at
 *   compressed byte offset 1230 (uncompressed byte offset 4096): invalid
 *   distance too far back
 *
 * AUTO looks at the first bytes (tl_tfrecord_sniff_compression): a valid
 * TFRecord header (the length's CRC matches) means NONE, since that happens
 * by chance one time in 2^32; otherwise the GZIP magic 1f 8b 08 means GZIP,
 * a valid ZLIB header (method 8, window <= 32 KiB, check bits, no preset
 * dictionary) means ZLIB, and anything else NONE (whose reader then says
 * what is wrong with the framing).
 *
 *     tl_tfrecord_zreader *z;
 *     if (tl_tfrecord_zreader_open("eval.gz", TL_TFRECORD_AUTO, &z) != TL_OK) ...
 *     tl_tfrecord_reader *r = tl_tfrecord_zreader_records(z);
 *     const uint8_t *rec;
 *     size_t n;
 *     while ((st = tl_tfrecord_next(r, &rec, &n)) == TL_OK && rec != NULL)
 *         use(rec, n);
 *     tl_tfrecord_zreader_destroy(z);          // also frees r
 *
 *     tl_tfrecord_zwriter *w;
 *     tl_tfrecord_zwriter_open("out.gz", O_CREAT | O_TRUNC, TL_TFRECORD_GZIP, -1, &w);
 *     tl_tfrecord_zwriter_write(w, bytes, len);
 *     if (tl_tfrecord_zwriter_destroy(w) != TL_OK) ...   // writes the trailer
 *
 * Why a zreader and not a plain tl_tfrecord_reader: the reader frees nothing
 * it did not allocate, so the decompressor must be owned by something else.
 * A zreader or zwriter is used by one thread at a time.
 *
 * The public face of both is tpuloop/tfrecord.h (tl_record_reader and
 * tl_record_writer, tfrecord_file.c), whose enums have these values; what
 * only the library needs (streams, descriptors, seeking, appending) stays
 * here.
 */
#ifndef TL_IO_COMPRESS_H
#define TL_IO_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfrecord.h"
#include "tpuloop/base.h"

typedef enum tl_tfrecord_compression {
    TL_TFRECORD_NONE = 0, /* plain framing */
    TL_TFRECORD_GZIP,     /* RFC 1952, possibly several members */
    TL_TFRECORD_ZLIB,     /* RFC 1950, one stream */
    TL_TFRECORD_AUTO      /* readers only: decided by the first bytes */
} tl_tfrecord_compression;

/* TensorFlow's name for c: "", "GZIP", "ZLIB", or "AUTO". */
const char *tl_tfrecord_compression_name(tl_tfrecord_compression c);

/* Parses TensorFlow's compression_type strings: "" or "NONE", "GZIP",
 * "ZLIB", "AUTO" (case-sensitive, as TensorFlow's are).
 * Errors: TL_EINVAL naming the string and what is allowed. */
tl_status tl_tfrecord_compression_parse(const char *s, tl_tfrecord_compression *out);

/* The compression the first n bytes of a file suggest (never AUTO); the rule
 * is in the essay above. Fewer than 12 bytes only decide by the magic. */
tl_tfrecord_compression tl_tfrecord_sniff_compression(const uint8_t *head, size_t n);

/* ======================================================================== */
/* Reader                                                                   */
/* ======================================================================== */

typedef struct tl_tfrecord_zreader tl_tfrecord_zreader;

/* Opens the file at path holding records compressed with c.
 * Errors: TL_EINVAL for a c outside the enum; TL_EIO when the file cannot be
 * opened or its first bytes cannot be read for AUTO (naming path and the
 * system's reason); TL_ENOMEM. */
tl_status tl_tfrecord_zreader_open(const char *path, tl_tfrecord_compression c, tl_tfrecord_zreader **out);

/* Reads the compressed bytes data[0..size), borrowed: they must outlive the
 * zreader. name is what messages call it (copied; NULL: "<memory>").
 * Errors: TL_EINVAL for a c outside the enum; TL_ENOMEM. */
tl_status tl_tfrecord_zreader_create_memory(const void *data, size_t size, const char *name,
                                            tl_tfrecord_compression c, tl_tfrecord_zreader **out);

/* Reads compressed bytes through read_fn(ud, ...) (see tl_tfrecord_read_fn),
 * for pipes and sockets. Errors: as tl_tfrecord_zreader_create_memory. */
tl_status tl_tfrecord_zreader_create_stream(tl_tfrecord_read_fn read_fn, void *ud, const char *name,
                                            tl_tfrecord_compression c, tl_tfrecord_zreader **out);

/* The record reader over the decompressed bytes, owned by z: read it with
 * tl_tfrecord_next and friends, never destroy it. Its offsets are
 * uncompressed byte offsets; it cannot seek unless the compression is NONE
 * (a file or memory source). */
tl_tfrecord_reader *tl_tfrecord_zreader_records(tl_tfrecord_zreader *z);

/* The compression in use: c as given, or what AUTO decided (which happens
 * at the first read for a stream source, and at open for files and memory). */
tl_tfrecord_compression tl_tfrecord_zreader_compression(const tl_tfrecord_zreader *z);

/* Compressed bytes consumed by inflate so far (0 for NONE). */
uint64_t tl_tfrecord_zreader_compressed_offset(const tl_tfrecord_zreader *z);

/* Frees z, its reader, and closes a file zreader_open opened. NULL: no-op. */
void tl_tfrecord_zreader_destroy(tl_tfrecord_zreader *z);

/* ======================================================================== */
/* Writer                                                                   */
/* ======================================================================== */

typedef struct tl_tfrecord_zwriter tl_tfrecord_zwriter;

/* Opens path as tl_tfrecord_writer_open does (open(2) flags O_WRONLY |
 * O_CLOEXEC | oflags, mode 0666 before the umask) and writes records
 * compressed with c (NONE, GZIP or ZLIB) at zlib level `level` (-1: zlib's
 * default, 6; 0..9). With O_APPEND a GZIP writer adds a new member, which
 * readers treat as a continuation; a ZLIB one would make an unreadable file
 * and is refused.
 * Errors: TL_EINVAL for c AUTO or outside the enum, level outside -1..9, or
 * ZLIB with O_APPEND; TL_EIO naming path and the system's reason; TL_ENOMEM. */
tl_status tl_tfrecord_zwriter_open(const char *path, int oflags, tl_tfrecord_compression c, int level,
                                   tl_tfrecord_zwriter **out);

/* As tl_tfrecord_zwriter_open onto the open descriptor fd, closed on destroy
 * when own_fd. Errors: TL_EINVAL as above (fd is then left open);
 * TL_ENOMEM. */
tl_status tl_tfrecord_zwriter_create_fd(int fd, const char *name, bool own_fd, tl_tfrecord_compression c, int level,
                                        tl_tfrecord_zwriter **out);

/* Appends one record holding data[0..n) (data may be NULL when n is 0).
 * Errors: TL_EINVAL for NULL data with n > 0; TL_EIO naming the file when a
 * write fails (sticky); TL_ENOMEM. */
tl_status tl_tfrecord_zwriter_write(tl_tfrecord_zwriter *w, const void *data, size_t n);

/* Makes every record written so far decodable from the file (a zlib sync
 * flush: 4 or 5 bytes of overhead, so not after every record), hands it to
 * the kernel, and with sync waits until it is on the device. A reader of the
 * file as it is now reads these records, then reports a truncated stream.
 * Errors: TL_EIO naming the file (sticky). */
tl_status tl_tfrecord_zwriter_flush(tl_tfrecord_zwriter *w, bool sync);

/* Uncompressed bytes written so far (the TFRecord framing's length). */
uint64_t tl_tfrecord_zwriter_bytes(const tl_tfrecord_zwriter *w);

/* Finishes the stream (the GZIP or ZLIB trailer), flushes, closes an owned
 * descriptor and frees w; returns the first error, or the sticky one. A file
 * whose writer was never destroyed reads as truncated. NULL returns TL_OK. */
tl_status tl_tfrecord_zwriter_destroy(tl_tfrecord_zwriter *w);

#endif /* TL_IO_COMPRESS_H */

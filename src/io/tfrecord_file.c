/* tfrecord_file.c — the public TFRecord API (tpuloop/tfrecord.h): a reader
 * and a writer of whole files over the internal zreader and zwriter
 * (compress.h), the writer atomic on request through the file layer's
 * temporary-file-and-rename (file.h). */
#include "tpuloop/tfrecord.h"

#include <fcntl.h>
#include <string.h>

#include "../base/base_int.h"
#include "compress.h"
#include "file.h"

/* The public enums are the internal ones under TensorFlow's names: a value
 * passes between them unchanged. */
_Static_assert((int)TL_RECORD_NONE == (int)TL_TFRECORD_NONE && (int)TL_RECORD_GZIP == (int)TL_TFRECORD_GZIP &&
                   (int)TL_RECORD_ZLIB == (int)TL_TFRECORD_ZLIB && (int)TL_RECORD_AUTO == (int)TL_TFRECORD_AUTO,
               "tl_record_compression and tl_tfrecord_compression differ");
_Static_assert((int)TL_RECORD_FAULT_NONE == (int)TL_TFRECORD_FAULT_NONE &&
                   (int)TL_RECORD_FAULT_TRUNCATED_HEADER == (int)TL_TFRECORD_FAULT_TRUNCATED_HEADER &&
                   (int)TL_RECORD_FAULT_BAD_LENGTH_CRC == (int)TL_TFRECORD_FAULT_BAD_LENGTH_CRC &&
                   (int)TL_RECORD_FAULT_TRUNCATED_DATA == (int)TL_TFRECORD_FAULT_TRUNCATED_DATA &&
                   (int)TL_RECORD_FAULT_BAD_DATA_CRC == (int)TL_TFRECORD_FAULT_BAD_DATA_CRC &&
                   (int)TL_RECORD_FAULT_TOO_LARGE == (int)TL_TFRECORD_FAULT_TOO_LARGE &&
                   (int)TL_RECORD_FAULT_READ_ERROR == (int)TL_TFRECORD_FAULT_READ_ERROR,
               "tl_record_fault and tl_tfrecord_fault differ");

const char *tl_record_compression_name(tl_record_compression c)
{
    switch (c) {
    case TL_RECORD_NONE: return "NONE";
    case TL_RECORD_GZIP: return "GZIP";
    case TL_RECORD_ZLIB: return "ZLIB";
    case TL_RECORD_AUTO: return "AUTO";
    }
    return "?";
}

tl_status tl_record_compression_parse(const char *s, tl_record_compression *out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_record_compression_parse: out is NULL");
    tl_tfrecord_compression c;
    tl_status st = tl_tfrecord_compression_parse(s, &c);
    if (st == TL_OK)
        *out = (tl_record_compression)c;
    return st;
}

static bool known_compression(tl_record_compression c)
{
    return (unsigned)c <= (unsigned)TL_RECORD_AUTO;
}

/* ======================================================================== */
/* Reading                                                                  */
/* ======================================================================== */

struct tl_record_reader {
    tl_tfrecord_zreader *z;
    tl_tfrecord_reader *r; /* z's, borrowed */
};

static tl_status reader_wrap(tl_tfrecord_zreader *z, tl_record_reader **out)
{
    tl_record_reader *r = tl_calloc(1, sizeof *r);
    if (r == NULL) {
        tl_tfrecord_zreader_destroy(z);
        return tl_error_oom();
    }
    r->z = z;
    r->r = tl_tfrecord_zreader_records(z);
    *out = r;
    return TL_OK;
}

tl_status tl_record_reader_open(const char *path, tl_record_compression compression, tl_record_reader **out)
{
    if (out == NULL || path == NULL)
        return tl_error(TL_EINVAL, "tl_record_reader_open: %s is NULL", out == NULL ? "out" : "path");
    *out = NULL;
    if (!known_compression(compression))
        return tl_error(TL_EINVAL, "%s: compression %d is not TL_RECORD_NONE, _GZIP, _ZLIB or _AUTO", path,
                        (int)compression);
    tl_tfrecord_zreader *z;
    tl_status st = tl_tfrecord_zreader_open(path, (tl_tfrecord_compression)compression, &z);
    return st == TL_OK ? reader_wrap(z, out) : st;
}

tl_status tl_record_reader_create_memory(const void *data, size_t size, const char *name,
                                         tl_record_compression compression, tl_record_reader **out)
{
    const char *nm = name != NULL ? name : "<memory>";
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_record_reader_create_memory: out is NULL");
    *out = NULL;
    if (data == NULL && size > 0)
        return tl_error(TL_EINVAL, "%s: NULL data of %zu bytes", nm, size);
    if (!known_compression(compression))
        return tl_error(TL_EINVAL, "%s: compression %d is not TL_RECORD_NONE, _GZIP, _ZLIB or _AUTO", nm,
                        (int)compression);
    tl_tfrecord_zreader *z;
    tl_status st = tl_tfrecord_zreader_create_memory(data, size, nm, (tl_tfrecord_compression)compression, &z);
    return st == TL_OK ? reader_wrap(z, out) : st;
}

void tl_record_reader_destroy(tl_record_reader *r)
{
    if (r == NULL)
        return;
    tl_tfrecord_zreader_destroy(r->z);
    tl_free(r);
}

tl_status tl_record_reader_next(tl_record_reader *r, const uint8_t **data, size_t *len)
{
    return tl_tfrecord_next(r->r, data, len);
}

tl_record_fault tl_record_reader_fault(const tl_record_reader *r)
{
    return (tl_record_fault)tl_tfrecord_reader_fault(r->r);
}

tl_status tl_record_reader_skip_record(tl_record_reader *r)
{
    return tl_tfrecord_reader_skip_record(r->r);
}

tl_record_compression tl_record_reader_compression(const tl_record_reader *r)
{
    return (tl_record_compression)tl_tfrecord_zreader_compression(r->z);
}

uint64_t tl_record_reader_index(const tl_record_reader *r) { return tl_tfrecord_reader_index(r->r); }

uint64_t tl_record_reader_offset(const tl_record_reader *r) { return tl_tfrecord_reader_offset(r->r); }

uint64_t tl_record_reader_compressed_offset(const tl_record_reader *r)
{
    return tl_tfrecord_zreader_compressed_offset(r->z);
}

/* ======================================================================== */
/* Writing                                                                  */
/* ======================================================================== */

struct tl_record_writer {
    char *path;
    tl_tfrecord_zwriter *z; /* NULL once finished */
    bool atomic;
    tl_io_atomic a;         /* atomic: the temporary file, whose descriptor z writes to */
    bool finished;
    uint64_t bytes;         /* once finished: the framing's length */
    tl_status finish_st;    /* finish's result, repeated by later calls */
    char *finish_msg;       /* its message */
};

void tl_record_writer_options_init(tl_record_writer_options *o)
{
    memset(o, 0, sizeof *o);
    o->compression = TL_RECORD_NONE;
    o->compression_level = -1;
    o->atomic = false;
}

tl_status tl_record_writer_open(const char *path, const tl_record_writer_options *o, tl_record_writer **out)
{
    if (out == NULL || path == NULL)
        return tl_error(TL_EINVAL, "tl_record_writer_open: %s is NULL", out == NULL ? "out" : "path");
    *out = NULL;
    tl_record_writer_options defaults;
    if (o == NULL) {
        tl_record_writer_options_init(&defaults);
        o = &defaults;
    }
    if (o->compression != TL_RECORD_NONE && o->compression != TL_RECORD_GZIP && o->compression != TL_RECORD_ZLIB)
        return tl_error(TL_EINVAL, "%s: writer compression must be NONE, GZIP or ZLIB (got %s)", path,
                        o->compression == TL_RECORD_AUTO ? "AUTO, which only readers take"
                                                         : tl_record_compression_name(o->compression));
    if (o->compression_level < -1 || o->compression_level > 9)
        return tl_error(TL_EINVAL, "%s: compression_level must be -1 (zlib's default) or 0..9 (got %d)", path,
                        o->compression_level);
    tl_record_writer *w = tl_calloc(1, sizeof *w);
    if (w == NULL)
        return tl_error_oom();
    w->a.fd = -1;
    w->path = tl_strdup(path);
    if (w->path == NULL) {
        tl_free(w);
        return tl_error_oom();
    }
    tl_status st;
    tl_tfrecord_compression c = (tl_tfrecord_compression)o->compression;
    w->atomic = o->atomic;
    if (!o->atomic) {
        /* As TFRecordWriter: the file is created, or an old one truncated. */
        st = tl_tfrecord_zwriter_open(path, O_CREAT | O_TRUNC, c, o->compression_level, &w->z);
    } else {
        st = tl_io_atomic_begin(&w->a, path);
        if (st == TL_OK)
            st = tl_tfrecord_zwriter_create_fd(w->a.fd, w->a.tmp_path, false, c, o->compression_level, &w->z);
    }
    if (st != TL_OK) {
        tl_io_atomic_abort(&w->a); /* nothing when not begun */
        tl_free(w->path);
        tl_free(w);
        return st;
    }
    *out = w;
    return TL_OK;
}

static tl_status finished_error(const tl_record_writer *w)
{
    return tl_error(TL_EINVAL, "%s: the writer is finished; no record can be added", w->path);
}

tl_status tl_record_writer_write(tl_record_writer *w, const void *data, size_t n)
{
    if (w->finished)
        return finished_error(w);
    return tl_tfrecord_zwriter_write(w->z, data, n);
}

tl_status tl_record_writer_flush(tl_record_writer *w, bool sync)
{
    if (w->finished)
        return finished_error(w);
    return tl_tfrecord_zwriter_flush(w->z, sync);
}

uint64_t tl_record_writer_bytes(const tl_record_writer *w)
{
    return w->finished ? w->bytes : tl_tfrecord_zwriter_bytes(w->z);
}

tl_status tl_record_writer_finish(tl_record_writer *w)
{
    if (w->finished)
        return w->finish_st == TL_OK ? TL_OK
                                     : tl_error(w->finish_st, "%s",
                                                w->finish_msg ? w->finish_msg : "finishing the file failed earlier");
    w->finished = true;
    w->bytes = tl_tfrecord_zwriter_bytes(w->z);
    tl_status st = tl_tfrecord_zwriter_destroy(w->z);
    w->z = NULL;
    /* An atomic writer's file must be on the device before its rename can
     * stand for it; commit syncs again, which then costs nothing. */
    if (st == TL_OK && w->atomic)
        st = tl_io_fsync(w->a.fd, w->a.tmp_path);
    w->finish_st = st;
    if (st != TL_OK)
        w->finish_msg = tl_strdup(tl_last_error());
    return st;
}

tl_status tl_record_writer_close(tl_record_writer *w)
{
    if (w == NULL)
        return TL_OK;
    tl_status st = tl_record_writer_finish(w);
    if (w->atomic) {
        if (st == TL_OK)
            st = tl_io_atomic_commit(&w->a); /* on failure it removes the temporary file */
        else
            tl_io_atomic_abort(&w->a);
    }
    tl_free(w->finish_msg);
    tl_free(w->path);
    tl_free(w);
    return st;
}

void tl_record_writer_destroy(tl_record_writer *w)
{
    if (w == NULL)
        return;
    /* A non-atomic file is completed (its trailer written), as TensorFlow's
     * writer closes its file on destruction; an atomic one is dropped. */
    tl_tfrecord_zwriter_destroy(w->z);
    if (w->atomic)
        tl_io_atomic_abort(&w->a);
    tl_free(w->finish_msg);
    tl_free(w->path);
    tl_free(w);
}

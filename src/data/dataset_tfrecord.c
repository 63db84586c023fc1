/* dataset_tfrecord.c — TFRecord files as a dataset: tf.data's deterministic
 * interleave over a dataset of file names, one tl_tfrecord_zreader per open
 * file, skip_corrupt_records, and positions saved as (file, record index,
 * byte offset). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dataset_int.h"
#include "io/compress.h"

#define MAX_CYCLE 4096

typedef struct slot {
    tl_tfrecord_zreader *z; /* NULL: the slot is empty */
    const char *file;       /* interned */
} slot;

typedef struct tfr_impl {
    tl_tfrecord_options o;
    slot *slots;        /* (cycle_length) */
    int64_t cycle_index;
    int64_t block_index; /* records taken from the current slot in this turn */
    int64_t num_open;
    bool end_of_input;   /* the file names are exhausted */
    bool replaying;      /* a restore re-reads a compressed file up to its saved record */
} tfr_impl;

void tl_tfrecord_options_init(tl_tfrecord_options *o)
{
    memset(o, 0, sizeof *o);
    o->compression = TL_RECORD_NONE;
    o->cycle_length = 1;
    o->block_length = 1;
}

static void slot_close(tfr_impl *t, slot *s)
{
    if (s->z != NULL) {
        tl_tfrecord_zreader_destroy(s->z);
        s->z = NULL;
        t->num_open--;
    }
}

static tl_status slot_open(tl_dataset *ds, tfr_impl *t, slot *s, const char *name)
{
    s->file = ds_intern(ds->ctx, name);
    if (s->file == NULL)
        return tl_error_oom();
    tl_status st = tl_tfrecord_zreader_open(name, (tl_tfrecord_compression)t->o.compression, &s->z);
    if (st != TL_OK)
        return st;
    t->num_open++;
    return TL_OK;
}

/* The next record of s into *out, NULL at the end of the file (also when
 * skip_corrupt_records gives up on the rest of it). */
static tl_status slot_read(tl_dataset *ds, tfr_impl *t, slot *s, ds_elem **out)
{
    tl_tfrecord_reader *r = tl_tfrecord_zreader_records(s->z);
    for (;;) {
        uint64_t index = tl_tfrecord_reader_index(r), offset = tl_tfrecord_reader_offset(r);
        const uint8_t *d;
        size_t n;
        tl_status st = tl_tfrecord_next(r, &d, &n);
        if (st == TL_OK) {
            if (d == NULL)
                return TL_OK;
            const char *key = ds_intern(ds->ctx, "record");
            ds_elem *e = ds_elem_new(1);
            tl_bytes b = {d, n};
            st = key != NULL && e != NULL ? ds_tensor_set_bytes(&e->pub.tensors[0], key, 0, NULL, &b, 1)
                                          : tl_error_oom();
            if (st != TL_OK) {
                ds_elem_free(e);
                return st;
            }
            e->file = s->file;
            e->record = (int64_t)index;
            e->offset = offset;
            *out = e;
            return TL_OK;
        }
        tl_tfrecord_fault fault = tl_tfrecord_reader_fault(r);
        if (!t->o.skip_corrupt_records || st != TL_EPARSE || fault == TL_TFRECORD_FAULT_NONE)
            return st;
        /* A bad data CRC leaves the framing intact: step over that record,
         * in a compressed stream as in a plain file. Anything else leaves no
         * trustworthy place to go on from. A restore replaying a compressed
         * file up to its saved record neither logs nor counts again. */
        if (fault == TL_TFRECORD_FAULT_BAD_DATA_CRC) {
            if (!t->replaying) {
                tl_log(TL_LOG_WARN, "skip_corrupt_records: %s; skipping the record", tl_last_error());
                ds_count_skip(ds->ctx);
            }
            if ((st = tl_tfrecord_reader_skip_record(r)) != TL_OK)
                return st;
            continue;
        }
        if (!t->replaying) {
            tl_log(TL_LOG_WARN, "skip_corrupt_records: %s; skipping the rest of the file", tl_last_error());
            ds_count_skip(ds->ctx);
        }
        return TL_OK;
    }
}

/* A file list element's name: its "filename" tensor, else its first bytes
 * scalar. */
static tl_status element_name(const ds_elem *e, char **name)
{
    const tl_tensor *f = tl_element_find(&e->pub, "filename");
    for (int i = 0; f == NULL && i < e->pub.num_tensors; i++)
        if (e->pub.tensors[i].dtype == TL_DT_BYTES && e->pub.tensors[i].rank == 0)
            f = &e->pub.tensors[i];
    if (f == NULL || f->dtype != TL_DT_BYTES || f->rank != 0 || f->ragged)
        return tl_error(TL_EINVAL, "tfrecord: the file list's elements need a \"filename\" bytes scalar");
    const tl_bytes *b = f->data;
    *name = tl_strndup((const char *)b->data, b->len);
    return *name != NULL ? TL_OK : tl_error_oom();
}

static void advance(tfr_impl *t)
{
    t->block_index = 0;
    t->cycle_index = (t->cycle_index + 1) % t->o.cycle_length;
}

static tl_status tfr_next(tl_dataset *ds, ds_elem **out)
{
    tfr_impl *t = ds->impl;
    while (!t->end_of_input || t->num_open > 0) {
        slot *s = &t->slots[t->cycle_index];
        if (s->z != NULL) {
            tl_status st = slot_read(ds, t, s, out);
            if (st != TL_OK)
                return st;
            if (*out != NULL) {
                if (++t->block_index == t->o.block_length)
                    advance(t);
                return TL_OK;
            }
            slot_close(t, s);
            advance(t);
        } else if (!t->end_of_input) {
            ds_elem *fe;
            tl_status st = ds_pull(ds->input, &fe);
            if (st != TL_OK)
                return st;
            if (fe == NULL) {
                t->end_of_input = true;
                continue;
            }
            char *name;
            st = element_name(fe, &name);
            ds_elem_free(fe);
            if (st != TL_OK)
                return st;
            st = slot_open(ds, t, s, name);
            tl_free(name);
            if (st != TL_OK)
                return st;
        } else {
            advance(t);
        }
    }
    return TL_OK;
}

static void close_all(tfr_impl *t)
{
    for (int64_t i = 0; i < t->o.cycle_length; i++)
        slot_close(t, &t->slots[i]);
    t->cycle_index = t->block_index = 0;
    t->end_of_input = false;
}

static tl_status tfr_reset(tl_dataset *ds, uint64_t epoch_key)
{
    close_all(ds->impl);
    return ds_reset(ds->input, epoch_key);
}

static tl_status tfr_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    (void)sv;
    tfr_impl *t = ds->impl;
    json_t *arr = json_array();
    bool ok = arr != NULL && json_object_set_new(obj, "slots", arr) == 0 &&
              json_object_set_new(obj, "cycle_index", json_integer(t->cycle_index)) == 0 &&
              json_object_set_new(obj, "block_index", json_integer(t->block_index)) == 0 &&
              json_object_set_new(obj, "end_of_input", json_boolean(t->end_of_input)) == 0;
    for (int64_t i = 0; i < t->o.cycle_length && ok; i++) {
        slot *s = &t->slots[i];
        if (s->z == NULL) {
            ok = json_array_append_new(arr, json_null()) == 0;
            continue;
        }
        tl_tfrecord_reader *r = tl_tfrecord_zreader_records(s->z);
        json_t *so = json_object();
        ok = so != NULL && json_array_append_new(arr, so) == 0 &&
             json_object_set_new(so, "file", json_string(s->file)) == 0 &&
             json_object_set_new(so, "record", ds_json_u64_new(tl_tfrecord_reader_index(r))) == 0 &&
             json_object_set_new(so, "offset", ds_json_u64_new(tl_tfrecord_reader_offset(r))) == 0;
    }
    return ok ? TL_OK : tl_error_oom();
}

/* Reopens a file at a saved record: a seek for a plain file, reading up to
 * it for a compressed one (a compressed stream cannot seek). */
static tl_status slot_restore(tl_dataset *ds, tfr_impl *t, slot *s, json_t *so)
{
    const char *file = json_string_value(json_object_get(so, "file"));
    uint64_t record, offset;
    if (file == NULL)
        return tl_error(TL_EINVAL, "restore: tfrecord: a saved slot has no file");
    tl_status st = ds_json_u64(so, "record", "restore: tfrecord", &record);
    if (st == TL_OK)
        st = ds_json_u64(so, "offset", "restore: tfrecord", &offset);
    if (st == TL_OK)
        st = slot_open(ds, t, s, file);
    if (st != TL_OK)
        return st;
    tl_tfrecord_reader *r = tl_tfrecord_zreader_records(s->z);
    if (tl_tfrecord_zreader_compression(s->z) == TL_TFRECORD_NONE)
        return tl_tfrecord_reader_seek(r, offset, record);
    while (tl_tfrecord_reader_index(r) < record) {
        ds_elem *e = NULL;
        t->replaying = true;
        st = slot_read(ds, t, s, &e);
        t->replaying = false;
        if (st != TL_OK)
            return st;
        if (e == NULL)
            return tl_error(TL_EINVAL, "restore: %s ends before record %llu, where the saved state stood", file,
                            (unsigned long long)record);
        ds_elem_free(e);
    }
    return TL_OK;
}

static tl_status tfr_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    (void)ld;
    tfr_impl *t = ds->impl;
    close_all(t);
    json_t *arr = json_object_get(obj, "slots");
    int64_t ci, bi;
    bool end;
    tl_status st = ds_json_int(obj, "cycle_index", "restore: tfrecord", &ci);
    if (st == TL_OK)
        st = ds_json_int(obj, "block_index", "restore: tfrecord", &bi);
    if (st == TL_OK)
        st = ds_json_bool(obj, "end_of_input", "restore: tfrecord", &end);
    if (st != TL_OK)
        return st;
    if (!json_is_array(arr) || (int64_t)json_array_size(arr) != t->o.cycle_length || ci < 0 ||
        ci >= t->o.cycle_length || bi < 0 || bi >= t->o.block_length)
        return tl_error(TL_EINVAL, "restore: tfrecord: the saved cycle does not fit cycle_length %lld, "
                                   "block_length %lld",
                        (long long)t->o.cycle_length, (long long)t->o.block_length);
    for (int64_t i = 0; i < t->o.cycle_length && st == TL_OK; i++) {
        json_t *so = json_array_get(arr, (size_t)i);
        if (!json_is_null(so))
            st = slot_restore(ds, t, &t->slots[i], so);
    }
    if (st != TL_OK) {
        close_all(t);
        return st;
    }
    t->cycle_index = ci;
    t->block_index = bi;
    t->end_of_input = end;
    return TL_OK;
}

static void tfr_destroy(tl_dataset *ds)
{
    tfr_impl *t = ds->impl;
    if (t == NULL)
        return;
    if (t->slots != NULL)
        close_all(t);
    tl_free(t->slots);
    tl_free(t);
}

static const ds_ops tfr_ops = {"tfrecord", tfr_next, tfr_reset, tfr_save, tfr_restore, NULL, NULL, tfr_destroy};

tl_status tl_dataset_tfrecord_interleave(tl_dataset *files, const tl_tfrecord_options *o, tl_dataset **out)
{
    tl_tfrecord_options def;
    tl_tfrecord_options_init(&def);
    if (o == NULL)
        o = &def;
    if (out == NULL) {
        tl_dataset_destroy(files);
        return tl_error(TL_EINVAL, "tl_dataset_tfrecord_interleave: out is NULL");
    }
    tl_status st = TL_OK;
    if (files == NULL)
        st = tl_error(TL_EINVAL, "tl_dataset_tfrecord_interleave: files is NULL");
    else if ((unsigned)o->compression > TL_RECORD_AUTO)
        st = tl_error(TL_EINVAL, "tfrecord: compression must be NONE, GZIP, ZLIB or AUTO (got %d)",
                      (int)o->compression);
    else if (o->cycle_length < 1 || o->cycle_length > MAX_CYCLE)
        st = tl_error(TL_EINVAL, "tfrecord: cycle_length must be in 1..%d (got %lld)", MAX_CYCLE,
                      (long long)o->cycle_length);
    else if (o->block_length < 1)
        st = tl_error(TL_EINVAL, "tfrecord: block_length must be >= 1 (got %lld)", (long long)o->block_length);
    tfr_impl *t = NULL;
    char *desc = NULL;
    if (st == TL_OK) {
        t = tl_calloc(1, sizeof *t);
        if (t != NULL && (t->slots = tl_calloc((size_t)o->cycle_length, sizeof *t->slots)) != NULL) {
            t->o = *o;
            desc = tl_asprintf("tfrecord(compression=%s, cycle_length=%lld, block_length=%lld, "
                               "skip_corrupt_records=%s)",
                               tl_record_compression_name(o->compression), (long long)o->cycle_length,
                               (long long)o->block_length, o->skip_corrupt_records ? "true" : "false");
        }
        if (desc == NULL) {
            tfr_destroy(&(tl_dataset){.impl = t});
            t = NULL;
            st = tl_error_oom();
        }
    }
    st = ds_finish(st, &tfr_ops, t, desc, files, out);
    if (st != TL_OK)
        tfr_destroy(&(tl_dataset){.impl = t});
    return st;
}

tl_status tl_dataset_tfrecord(const char *const *patterns, int n, const tl_tfrecord_options *o, tl_dataset **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_tfrecord: out is NULL");
    tl_dataset *files;
    tl_status st = tl_dataset_from_files(patterns, n, &files);
    if (st != TL_OK) {
        *out = NULL;
        return st;
    }
    return tl_dataset_tfrecord_interleave(files, o, out);
}

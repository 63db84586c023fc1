/* fuzz_dataset_state.c — libFuzzer target for tl_dataset_restore, which reads
 * the input positions a checkpoint carries (its "input_datasets" tensor):
 * outside input, since a checkpoint file may be corrupt or crafted. The
 * first byte picks one of three pipelines built the same way each run —
 *   bit 0 clear: TFRecord file (6 tf.Examples) -> parse -> shuffle(3) -> repeat(2) -> batch(2)
 *   bit 0 set:   in-memory examples -> shard(2, 1) -> shuffle(4) -> take(7) -> skip(1) -> batch(3, keep the remainder)
 *   bit 2 set (bit 0 ignored): in-memory examples -> shuffle(4) -> repeat(2) -> batch(3, keep the remainder),
 *                whose shuffle buffers positions ("indices") and whose batches are gathered from the rows
 * — and bit 1 how the rest is the saved state:
 *   clear: its text, as it is (either format, tpuloop.dataset/1 or /2);
 *   set:   a format-2 text up to its "elements" member, a NUL byte, then the
 *          elements' bytes themselves, which the target base64-encodes and
 *          appends (as ,"elements":"...'}), so that mutations reach the
 *          binary encoding directly rather than through its base64.
 * "@FILE@" in the text stands for the TFRecord file's path (which has this
 * process's id in it). A restore must succeed or fail with a status and a
 * message, and a restored pipeline must read to its end (or to an error)
 * without a crash, a leak or undefined behaviour. A state that restores
 * must also save: that text restored into a fresh pipeline reads the very
 * same elements (the encoding writes back what it read). Seeds are real
 * saved states of both pipelines after 0..5 elements, in both forms (and
 * format-1 states of earlier versions). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/tfrecord.h"
#include "tpuloop/base.h"
#include "tpuloop/config.h"
#include "tpuloop/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static float feats[10 * 2];
static int32_t labels[10];
static tl_labeled_data mem = {10, 2, 3, 1, {2}, feats, labels, NULL, 0};

/* The TFRecord file, once per process. */
static int setup(void)
{
    tl_set_log_level(TL_LOG_OFF);
    for (int i = 0; i < 10; i++) {
        feats[2 * i] = (float)i;
        feats[2 * i + 1] = (float)-i;
        labels[i] = i % 3;
    }
    snprintf(path, sizeof path, "/tmp/fuzz_dataset_state_%d.tfrecord", (int)getpid());
    tl_tfrecord_writer *w;
    tl_example_builder *b;
    if (tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w) != TL_OK || tl_example_builder_create(&b) != TL_OK)
        return -1;
    for (int i = 0; i < 6; i++) {
        float x[2] = {(float)i, 0.5f};
        int64_t y = i % 2;
        const uint8_t *rec;
        size_t len;
        tl_example_builder_reset(b);
        if (tl_example_builder_add_floats(b, "x", x, 2) != TL_OK || tl_example_builder_add_int64s(b, "y", &y, 1) != TL_OK ||
            tl_example_builder_serialize(b, &rec, &len) != TL_OK || tl_tfrecord_write(w, rec, len) != TL_OK)
            return -1;
    }
    tl_example_builder_destroy(b);
    return tl_tfrecord_writer_destroy(w) == TL_OK ? 0 : -1;
}

static tl_status build(int which, tl_dataset **out)
{
    tl_dataset *ds;
    tl_status st;
    if (which == 0) {
        static const tl_feature_spec specs[2] = {
            {.key = "x", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_FLOAT, .rank = 1, .shape = {2}},
            {.key = "y", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_INT64, .rank = 0},
        };
        const char *files[] = {path};
        st = tl_dataset_tfrecord(files, 1, NULL, &ds);
        if (st == TL_OK)
            st = tl_dataset_parse_example(ds, specs, 2, NULL, &ds);
        if (st == TL_OK)
            st = tl_dataset_shuffle(ds, 3, 11, true, &ds);
        if (st == TL_OK)
            st = tl_dataset_repeat(ds, 2, &ds);
        if (st == TL_OK)
            st = tl_dataset_batch(ds, 2, true, &ds);
    } else if (which == 2) {
        st = tl_dataset_labeled(&mem, &ds);
        if (st == TL_OK)
            st = tl_dataset_shuffle(ds, 4, 5, true, &ds);
        if (st == TL_OK)
            st = tl_dataset_repeat(ds, 2, &ds);
        if (st == TL_OK)
            st = tl_dataset_batch(ds, 3, false, &ds);
    } else {
        st = tl_dataset_labeled(&mem, &ds);
        if (st == TL_OK)
            st = tl_dataset_shard(ds, 2, 1, &ds);
        if (st == TL_OK)
            st = tl_dataset_shuffle(ds, 4, 3, false, &ds);
        if (st == TL_OK)
            st = tl_dataset_take(ds, 7, &ds);
        if (st == TL_OK)
            st = tl_dataset_skip(ds, 1, &ds);
        if (st == TL_OK)
            st = tl_dataset_batch(ds, 3, false, &ds);
    }
    *out = st == TL_OK ? ds : NULL;
    return st;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The saved state the input describes (malloc'd), "@FILE@" replaced. */
static char *state_text(const uint8_t *p, size_t n, int raw)
{
    const uint8_t *nul = raw ? memchr(p, '\0', n) : NULL;
    size_t head = nul != NULL ? (size_t)(nul - p) : n;
    const uint8_t *el = nul != NULL ? nul + 1 : NULL;
    size_t eln = nul != NULL ? n - head - 1 : 0;
    size_t cap = head * (strlen(path) + 1) + (eln + 2) / 3 * 4 + 32;
    char *s = malloc(cap), *o = s;
    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < head; i++) {
        if (i + 6 <= head && memcmp(p + i, "@FILE@", 6) == 0) {
            o += strlen(strcpy(o, path));
            i += 5;
        } else {
            *o++ = p[i] != '\0' ? (char)p[i] : ' ';
        }
    }
    if (nul != NULL) {
        o += strlen(strcpy(o, ",\"elements\":\""));
        for (size_t i = 0; i < eln; i += 3) {
            uint32_t v = (uint32_t)el[i] << 16 | (i + 1 < eln ? (uint32_t)el[i + 1] << 8 : 0) |
                         (i + 2 < eln ? el[i + 2] : 0);
            *o++ = B64[v >> 18];
            *o++ = B64[(v >> 12) & 63];
            *o++ = i + 1 < eln ? B64[(v >> 6) & 63] : '=';
            *o++ = i + 2 < eln ? B64[v & 63] : '=';
        }
        o += strlen(strcpy(o, "\"}"));
    }
    *o = '\0';
    return s;
}

/* Whether two elements are the same, value for value. */
static int same_element(const tl_element *a, const tl_element *b)
{
    if (a->num_tensors != b->num_tensors)
        return 0;
    for (int i = 0; i < a->num_tensors; i++) {
        const tl_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->key, y->key) != 0 || x->dtype != y->dtype || x->rank != y->rank || x->ragged != y->ragged ||
            memcmp(x->shape, y->shape, sizeof x->shape) != 0)
            return 0;
        int64_t n = 1;
        if (x->ragged) {
            if (x->num_values != y->num_values || x->num_rows != y->num_rows ||
                memcmp(x->row_lengths, y->row_lengths, (size_t)x->num_rows * sizeof *x->row_lengths) != 0)
                return 0;
            n = x->num_values;
        } else {
            for (int d = 0; d < x->rank; d++)
                n *= x->shape[d];
        }
        if (x->dtype == TL_DT_BYTES) {
            const tl_bytes *u = x->data, *v = y->data;
            for (int64_t k = 0; k < n; k++)
                if (u[k].len != v[k].len || (u[k].len > 0 && memcmp(u[k].data, v[k].data, u[k].len) != 0))
                    return 0;
        } else {
            size_t w = x->dtype == TL_DT_INT64 ? 8 : 4;
            if (n > 0 && memcmp(x->data, y->data, (size_t)n * w) != 0)
                return 0;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready)
        ready = setup() == 0 ? 1 : -1;
    if (ready < 0) {
        fprintf(stderr, "fuzz_dataset_state: cannot write %s\n", path);
        abort();
    }
    if (size == 0)
        return 0;
    int which = data[0] & 4 ? 2 : data[0] & 1;
    char *text = state_text(data + 1, size - 1, data[0] & 2);
    if (text == NULL)
        return 0;
    tl_dataset *ds;
    if (build(which, &ds) != TL_OK)
        abort(); /* the pipelines are valid: building them cannot fail */
    char *again = NULL;
    if (tl_dataset_restore(ds, text) == TL_OK) {
        if (tl_dataset_save(ds, &again) != TL_OK) {
            fprintf(stderr, "a restored state does not save: %s\n", tl_last_error());
            abort();
        }
        tl_dataset *twin;
        if (build(which, &twin) != TL_OK)
            abort();
        if (tl_dataset_restore(twin, again) != TL_OK) {
            fprintf(stderr, "a re-saved state does not restore: %s\n", tl_last_error());
            abort();
        }
        for (int k = 0; k < 64; k++) {
            const tl_element *e, *f;
            tl_status a = tl_dataset_next(ds, &e), b = tl_dataset_next(twin, &f);
            if (a != b || (a == TL_OK && (e == NULL) != (f == NULL)) ||
                (a == TL_OK && e != NULL && !same_element(e, f))) {
                fprintf(stderr, "element %d differs after a re-save\n", k);
                abort();
            }
            if (a != TL_OK || e == NULL)
                break;
        }
        tl_dataset_destroy(twin);
    } else if (tl_last_error()[0] == '\0') {
        abort(); /* every failure says why */
    }
    tl_free_string(again);
    tl_dataset_destroy(ds);
    free(text);
    return 0;
}

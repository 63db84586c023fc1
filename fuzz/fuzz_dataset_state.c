/* fuzz_dataset_state.c — libFuzzer target for tl_dataset_restore, which reads
 * the input positions a checkpoint carries (its "input_datasets" metadata):
 * outside input, since a checkpoint file may be corrupt or crafted. The
 * first byte picks one of two pipelines built the same way each run —
 *   0: TFRecord file (6 tf.Examples) -> parse -> shuffle(3) -> repeat(2) -> batch(2)
 *   1: in-memory examples -> shard(2, 1) -> shuffle(4) -> take(7) -> skip(1) -> batch(3, keep the remainder)
 * — and the rest is the saved state's JSON text. A restore must succeed or
 * fail with a status and a message, and a restored pipeline must read to
 * its end (or to an error) without a crash, a leak or undefined behaviour.
 * Seeds are real saved states of both pipelines after 0..5 elements. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/tfrecord.h"
#include "tpuloop/base.h"
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
    char *text = malloc(size);
    if (text == NULL)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    tl_dataset *ds;
    if (build(data[0] & 1, &ds) != TL_OK)
        abort(); /* the pipelines are valid: building them cannot fail */
    if (tl_dataset_restore(ds, text) == TL_OK) {
        const tl_element *e;
        for (int k = 0; k < 64 && tl_dataset_next(ds, &e) == TL_OK && e != NULL; k++) {
        }
    } else if (tl_last_error()[0] == '\0') {
        abort(); /* every failure says why */
    }
    tl_dataset_destroy(ds);
    free(text);
    return 0;
}

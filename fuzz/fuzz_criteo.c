/* fuzz_criteo.c — libFuzzer target for the Criteo TSV reader: the input is
 * a TSV file read from memory. The first byte picks the options (a small or
 * the default line cap, vocabulary sizes or none), the rest is the text. It
 * is read line by line, going on after errors that leave the reader usable,
 * then again through the batch API. Everything must end in a status, never a
 * crash, a leak or undefined behaviour; every example read must be in range:
 * label 0 or 1, dense values finite and >= 0, ids inside their vocabulary. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/base.h"
#include "tpuloop/text_data.h"

static void check(const tl_criteo_options *o, int32_t label, const float *dense, const int64_t *ids)
{
    if (label != 0 && label != 1)
        __builtin_trap();
    for (int k = 0; k < TL_CRITEO_NUM_DENSE; k++)
        if (!(dense[k] >= 0.0f) || !isfinite(dense[k]))
            __builtin_trap();
    for (int c = 0; c < TL_CRITEO_NUM_CAT; c++)
        if (ids[c] < 0 || (o->vocab_sizes[c] > 0 && ids[c] >= o->vocab_sizes[c]))
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        tl_set_log_level(TL_LOG_OFF);
        quiet = 1;
    }
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    tl_criteo_options o;
    tl_criteo_options_init(&o);
    if (mode & 1)
        o.max_line = 64 + (mode >> 2);
    if (mode & 2)
        for (int c = 0; c < TL_CRITEO_NUM_CAT; c++)
            o.vocab_sizes[c] = (int64_t)c * 1000 + 1;

    tl_criteo_reader *r = NULL;
    if (tl_criteo_reader_create_memory(data, size, "fuzz", &o, &r) != TL_OK)
        __builtin_trap();
    int64_t last_line = 0;
    for (int it = 0; it < 100000; it++) {
        tl_criteo_example ex;
        bool got = false;
        tl_status st = tl_criteo_reader_next(r, &ex, &got);
        int64_t line = tl_criteo_reader_line(r);
        if (line < last_line)
            __builtin_trap();
        if (st != TL_OK) {
            if (got || tl_last_error()[0] == '\0' || (st != TL_EPARSE && st != TL_ENOMEM))
                __builtin_trap();
            if (line == last_line)
                break; /* a sticky error: nothing more to read */
            last_line = line;
            continue;
        }
        last_line = line;
        if (!got)
            break;
        check(&o, ex.label, ex.dense, ex.ids);
    }
    tl_criteo_reader_destroy(r);

    if (tl_criteo_reader_create_memory(data, size, "fuzz", &o, &r) != TL_OK)
        __builtin_trap();
    float dense[4 * TL_CRITEO_NUM_DENSE];
    int64_t ids[4 * TL_CRITEO_NUM_CAT];
    int32_t labels[4];
    for (int it = 0; it < 100000; it++) {
        int64_t got = -1;
        tl_status st = tl_criteo_reader_next_batch(r, 4, dense, ids, labels, &got);
        if (got < 0 || got > 4)
            __builtin_trap();
        for (int64_t i = 0; i < got; i++)
            check(&o, labels[i], dense + i * TL_CRITEO_NUM_DENSE, ids + i * TL_CRITEO_NUM_CAT);
        if (st != TL_OK || got < 4)
            break;
    }
    tl_criteo_reader_destroy(r);
    return 0;
}

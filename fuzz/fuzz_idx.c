/* fuzz_idx.c — libFuzzer target for the IDX reader: the input is an IDX
 * image read from memory, plain or gzip (the reader detects gzip by its
 * magic, so gzip-framed inputs go through inflate). It is read twice: with
 * the default options, and with a 64 KiB size cap and trailing bytes
 * allowed, so the cap and the trailing-bytes warning are reached too.
 * Everything must end in a status, never a crash, a leak or undefined
 * behaviour; a successful read must describe itself consistently. */
#include <stdint.h>
#include <stdlib.h>

#include "tpuloop/base.h"
#include "tpuloop/data.h"

/* The array's accessors agree with each other, and every byte of its data
 * can be read. */
static void check(const tl_idx *a)
{
    size_t esize = tl_idx_dtype_size(tl_idx_type(a));
    int nd = tl_idx_ndim(a);
    if (esize == 0 || nd < 1 || nd > TL_IDX_MAX_NDIM || tl_idx_dim(a, nd) != -1 || tl_idx_data(a) == NULL)
        __builtin_trap();
    /* a zero anywhere makes it empty, however large the dimensions before it */
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        if (tl_idx_dim(a, i) == 0)
            n = 0;
    for (int i = 0; i < nd && n > 0; i++)
        n *= tl_idx_dim(a, i);
    if (n != tl_idx_count(a))
        __builtin_trap();
    const volatile unsigned char *p = tl_idx_data(a);
    unsigned acc = 0;
    for (size_t i = 0; i < (size_t)n * esize; i++)
        acc += p[i];
    (void)acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        tl_set_log_level(TL_LOG_OFF);
        quiet = 1;
    }
    tl_idx *a = NULL;
    if (tl_idx_read_memory(data, size, "fuzz", NULL, &a) == TL_OK)
        check(a);
    else if (a != NULL || tl_last_error()[0] == '\0')
        __builtin_trap(); /* a failure leaves no array and says why */
    tl_idx_destroy(a);

    tl_idx_options o;
    tl_idx_options_init(&o);
    o.max_bytes = 1 << 16;
    o.allow_trailing = true;
    if (tl_idx_read_memory(data, size, "fuzz", &o, &a) == TL_OK)
        check(a);
    tl_idx_destroy(a);
    return 0;
}

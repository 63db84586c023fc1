/* fuzz_positions.c — libFuzzer target for tl_infeed_split_positions, which
 * splits a checkpoint's "input_datasets" tensor (the main file's, or a host
 * file's with null for other hosts' invocations) into one text per input_fn
 * invocation: outside input, since a checkpoint file may be corrupt or
 * crafted, and the tensor is read where it is mapped, with no NUL after it.
 * The bytes are copied into a block of exactly their size, so a read past
 * the end is caught. A split must succeed or fail with a status and a
 * message; on success every element lies inside the text, is not empty,
 * and a JSON null is p NULL. Each element's contents are
 * tl_dataset_restore's to parse (fuzz_dataset_state). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/estimator_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    if (text == NULL)
        return 0;
    if (size > 0)
        memcpy(text, data, size);
    tl_infeed_text *elems = NULL;
    int n = 0;
    tl_status st = tl_infeed_split_positions(text, size, "checkpoint FUZZ", &elems, &n);
    if (st == TL_OK) {
        for (int i = 0; i < n; i++) {
            const tl_infeed_text *e = &elems[i];
            if (e->p == NULL)
                continue;
            if (e->len == 0 || e->p < text || e->p + e->len > text + size)
                abort();
            if (e->len == 4 && memcmp(e->p, "null", 4) == 0)
                abort(); /* a null is p NULL */
        }
    } else if (tl_last_error()[0] == '\0') {
        abort(); /* every failure says why */
    }
    tl_free(elems);
    free(text);
    return 0;
}

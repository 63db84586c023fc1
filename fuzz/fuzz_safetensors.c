/* fuzz_safetensors.c — libFuzzer target for the checkpoint readers. The
 * input is read three ways:
 *   1. as a whole checkpoint file, strict and with TL_CKPT_ALLOW_FOREIGN;
 *   2. as the header alone: an 8-byte length equal to the input's size is
 *      put in front, so mutations of the JSON are not lost to a length
 *      field that no longer matches (the data section is then empty);
 *   3. as the text of a `checkpoint` index; a parsed index must print and
 *      parse back to the same state.
 * Everything must end in a status, never a crash, a leak or undefined
 * behaviour; a failure leaves no object and says why; an open checkpoint
 * describes itself consistently and every byte it points at is readable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/base.h"
#include "tpuloop/checkpoint.h"

/* The tensors lie inside buf, tile the data section in order, and agree
 * with their shapes; every byte can be read. */
static void check(const tl_ckpt_reader *r, const uint8_t *buf, size_t size)
{
    int n = tl_ckpt_num_tensors(r);
    uint64_t at = 0;
    const uint8_t *base = NULL;
    for (int i = 0; i < n; i++) {
        tl_ckpt_tensor_info t;
        if (tl_ckpt_tensor(r, i, &t) != TL_OK || t.offset != at || t.rank < 0 || t.rank > TL_CKPT_MAX_RANK)
            __builtin_trap();
        uint64_t count = 1;
        for (int d = 0; d < t.rank; d++)
            count *= (uint64_t)t.shape[d];
        if (count * tl_ckpt_dtype_size(t.dtype) != t.bytes)
            __builtin_trap();
        if (t.bytes > 0) {
            const uint8_t *p = t.data;
            if (p < buf || p + t.bytes > buf + size || (base != NULL && p != base + t.offset))
                __builtin_trap();
            base = p - t.offset;
            volatile unsigned acc = 0;
            for (uint64_t b = 0; b < t.bytes; b++)
                acc += p[b];
        }
        tl_ckpt_tensor_info f;
        if (tl_ckpt_find(r, t.name, &f) != TL_OK || f.offset != t.offset)
            __builtin_trap();
        at += t.bytes;
    }
    for (int i = 0; i < tl_ckpt_num_meta(r); i++) {
        const char *k, *v;
        tl_ckpt_meta_at(r, i, &k, &v);
        if (k == NULL || v == NULL || tl_ckpt_meta(r, k) == NULL)
            __builtin_trap();
    }
}

static void open_both(const uint8_t *buf, size_t size)
{
    for (unsigned flags = 0; flags <= TL_CKPT_ALLOW_FOREIGN; flags += TL_CKPT_ALLOW_FOREIGN) {
        tl_ckpt_reader *r = NULL;
        if (tl_ckpt_open_memory(buf, size, "fuzz", flags, &r) == TL_OK)
            check(r, buf, size);
        else if (r != NULL || tl_last_error()[0] == '\0')
            __builtin_trap();
        tl_ckpt_close(r);
    }
}

static void index_round_trip(const uint8_t *data, size_t size)
{
    tl_ckpt_state *s = NULL;
    if (tl_ckpt_state_parse((const char *)data, size, "fuzz", &s) != TL_OK) {
        if (s != NULL || tl_last_error()[0] == '\0')
            __builtin_trap();
        return;
    }
    char *text = tl_ckpt_state_format(s);
    tl_ckpt_state *t = NULL;
    if (text == NULL || tl_ckpt_state_parse(text, strlen(text), "fuzz", &t) != TL_OK)
        __builtin_trap();
    if (strcmp(s->model_checkpoint_path, t->model_checkpoint_path) != 0 || s->num_paths != t->num_paths ||
        s->num_timestamps != t->num_timestamps)
        __builtin_trap();
    for (int i = 0; i < s->num_paths; i++)
        if (strcmp(s->all_model_checkpoint_paths[i], t->all_model_checkpoint_paths[i]) != 0)
            __builtin_trap();
    for (int i = 0; i < s->num_timestamps; i++) {
        double a = s->all_model_checkpoint_timestamps[i], b = t->all_model_checkpoint_timestamps[i];
        if (a != b && !(a != a && b != b)) /* NaN prints as nan and reads back as a NaN */
            __builtin_trap();
    }
    tl_ckpt_free_string(text);
    tl_ckpt_state_destroy(t);
    tl_ckpt_state_destroy(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        tl_set_log_level(TL_LOG_OFF);
        quiet = 1;
    }
    open_both(data, size);

    uint8_t *framed = malloc(size + 8);
    if (framed == NULL)
        return 0;
    for (int i = 0; i < 8; i++)
        framed[i] = (uint8_t)((uint64_t)size >> (8 * i));
    memcpy(framed + 8, data, size);
    open_both(framed, size + 8);
    free(framed);

    index_round_trip(data, size);
    return 0;
}

/* fuzz_example.c — libFuzzer target for tf.Example / SequenceExample decoding
 * and feature specs (tpuloop/example.h).
 *
 * Input layout: byte 0 holds the number of specs (its low 2 bits, 0..3);
 * each spec takes 3 bytes (type and dtype; rank and which key; shape and
 * default); the rest is the serialized record. The record is parsed both as
 * an Example and as a SequenceExample; every feature's values are read (so
 * ASan sees any pointer past its array), then the specs are applied, with
 * keys picked from the example's own keys where the spec byte says so, so
 * that kinds, counts and shapes meet real features. Everything must end in
 * a status with a message, never a crash, a leak or undefined behaviour; a
 * success must have the shapes and counts the header promises, and a
 * failure must zero every result. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/base.h"
#include "tpuloop/example.h"

#define CHECK(c)                 \
    do {                         \
        if (!(c))                \
            __builtin_trap();    \
    } while (0)

static volatile uint64_t sink;

static void touch(const tl_feature *f)
{
    uint64_t h = 0;
    for (size_t i = 0; i < f->count; i++) {
        if (f->kind == TL_FEATURE_FLOAT) {
            uint32_t u;
            memcpy(&u, &f->floats[i], 4);
            h += u;
        } else if (f->kind == TL_FEATURE_INT64) {
            h += (uint64_t)f->int64s[i];
        } else if (f->kind == TL_FEATURE_BYTES) {
            CHECK(f->bytes[i].data != NULL);
            if (f->bytes[i].len > 0)
                h += f->bytes[i].data[0] + f->bytes[i].data[f->bytes[i].len - 1];
        } else {
            CHECK(0);
        }
    }
    sink += h;
}

static const char *pick_key(const tl_example *ex, uint8_t sel, bool list)
{
    static const char *const fixed[] = {"a", "i", "f", "s", ""};
    size_t n;
    if (list) {
        const tl_feature_list *ls = tl_example_feature_lists(ex, &n);
        if (n > 0 && (sel & 0x80))
            return ls[(sel & 0x7f) % n].key;
    } else {
        const tl_feature *fs = tl_example_features(ex, &n);
        if (n > 0 && (sel & 0x80))
            return fs[(sel & 0x7f) % n].key;
    }
    return fixed[(sel & 0x7f) % 5];
}

static void check_result(const tl_feature_spec *s, const tl_parsed_feature *o)
{
    CHECK(o->dtype == s->dtype);
    const void *arr = o->floats != NULL ? (const void *)o->floats : o->int64s != NULL ? (const void *)o->int64s
                                                                                       : (const void *)o->bytes;
    CHECK((o->count == 0) == (arr == NULL));
    size_t prod = 1;
    for (int d = 0; d < o->rank; d++)
        prod *= (size_t)o->shape[d];
    if (s->type == TL_SPEC_FIXED_LEN || s->type == TL_SPEC_FIXED_LEN_SEQUENCE) {
        CHECK(o->count == prod);
        CHECK(o->row_lengths == NULL);
    } else {
        int64_t sum = 0, longest = 0;
        for (size_t r = 0; r < o->num_rows; r++) {
            sum += o->row_lengths[r];
            if (o->row_lengths[r] > longest)
                longest = o->row_lengths[r];
        }
        CHECK((size_t)sum == o->count);
        if (s->type == TL_SPEC_VAR_LEN_SEQUENCE)
            CHECK(o->shape[1] == longest && (size_t)o->shape[0] == o->num_rows);
    }
    tl_feature f = {NULL, o->count > 0 ? s->dtype : TL_FEATURE_NONE, o->count, o->floats, o->int64s, o->bytes};
    touch(&f);
}

static void run(const uint8_t *rec, size_t len, bool sequence, const uint8_t *sb, size_t nspecs)
{
    tl_example *ex = NULL;
    tl_status st = sequence ? tl_sequence_example_parse(rec, len, 7, &ex) : tl_example_parse(rec, len, 7, &ex);
    if (st != TL_OK) {
        CHECK(ex == NULL && tl_last_error()[0] != '\0');
        CHECK(st == TL_EPARSE || st == TL_ENOMEM);
        return;
    }
    size_t n;
    const tl_feature *fs = tl_example_features(ex, &n);
    for (size_t i = 0; i < n; i++) {
        CHECK(i == 0 || strcmp(fs[i - 1].key, fs[i].key) < 0);
        CHECK(tl_example_find(ex, fs[i].key) == &fs[i]);
        touch(&fs[i]);
    }
    const tl_feature_list *ls = tl_example_feature_lists(ex, &n);
    CHECK(sequence || n == 0);
    for (size_t i = 0; i < n; i++) {
        CHECK(tl_example_find_list(ex, ls[i].key) == &ls[i]);
        for (size_t j = 0; j < ls[i].count; j++)
            touch(&ls[i].steps[j]);
    }
    static const float fdef[4] = {1, 2, 3, 4};
    static const int64_t idef[4] = {1, 2, 3, 4};
    static const tl_bytes bdef[4] = {{(const uint8_t *)"a", 1}, {(const uint8_t *)"", 0}, {(const uint8_t *)"b", 1},
                                     {(const uint8_t *)"cd", 2}};
    tl_feature_spec specs[3];
    for (size_t i = 0; i < nspecs; i++) {
        const uint8_t *b = sb + 3 * i;
        tl_feature_spec *s = &specs[i];
        memset(s, 0, sizeof *s);
        s->type = (tl_feature_spec_type)(b[0] & 3);
        s->dtype = (tl_feature_kind)((b[0] >> 2) & 3); /* 0 (invalid) now and then */
        bool list = s->type == TL_SPEC_FIXED_LEN_SEQUENCE || s->type == TL_SPEC_VAR_LEN_SEQUENCE;
        s->key = pick_key(ex, b[1], list);
        s->rank = (b[0] >> 4) % 3;
        for (int d = 0; d < s->rank; d++)
            s->shape[d] = (b[2] >> (2 * d)) & 3;
        s->allow_missing = s->type == TL_SPEC_FIXED_LEN_SEQUENCE && (b[0] & 0x40);
        if (s->type == TL_SPEC_FIXED_LEN && (b[0] & 0x80)) {
            size_t elems = 1;
            for (int d = 0; d < s->rank; d++)
                elems *= (size_t)s->shape[d];
            s->default_count = (b[2] & 0x40) || elems > 4 ? 1 : elems;
            s->default_value = s->dtype == TL_FEATURE_FLOAT ? (const void *)fdef
                               : s->dtype == TL_FEATURE_INT64 ? (const void *)idef
                                                              : (const void *)bdef;
        }
    }
    tl_parsed_feature out[3];
    st = tl_example_parse_features(ex, specs, nspecs, out);
    if (st == TL_OK) {
        for (size_t i = 0; i < nspecs; i++)
            check_result(&specs[i], &out[i]);
        tl_parsed_features_free(out, nspecs);
    } else {
        CHECK(st == TL_EINVAL || st == TL_ENOMEM);
        CHECK(tl_last_error()[0] != '\0');
        for (size_t i = 0; i < nspecs; i++)
            CHECK(out[i].count == 0 && out[i].floats == NULL && out[i].int64s == NULL && out[i].bytes == NULL &&
                  out[i].row_lengths == NULL);
    }
    tl_example_destroy(ex);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t nspecs = size > 0 ? data[0] & 3 : 0;
    if (size < 1 + 3 * nspecs)
        nspecs = 0;
    const uint8_t *rec = size > 0 ? data + 1 + 3 * nspecs : data;
    size_t len = size > 0 ? size - 1 - 3 * nspecs : 0;
    run(rec, len, false, data + 1, nspecs);
    run(rec, len, true, data + 1, nspecs);
    return 0;
}

/* sequences.c — token sequences labelled by their majority token, every
 * number a pure function of (seed, index) through the counter-based RNG, so
 * shards are generated independently and identically. The generator is
 * written out step by step in tpuloop/data.h; this file follows it word for
 * word, since changing the order of the draws changes every data set. */
#include <stdio.h>

#include "../base/base_int.h"
#include "data_int.h"
#include "tpuloop/rng.h"

#define MAX_LENGTH 4096
#define MAX_VOCAB (1 << 24) /* every id is exact in float32 */

/* The RNG stream's name (the "op" of tl_rng_init): an ASCII tag, fixed
 * forever. */
#define OP_SEQUENCE 0x73796e2d736571ull /* "syn-seq" */

void tl_synthetic_sequences_spec_init(tl_synthetic_sequences_spec *s)
{
    *s = (tl_synthetic_sequences_spec){.sequence_length = 16, .vocab_size = 16};
}

static tl_status check_spec(const tl_synthetic_sequences_spec *s)
{
    if (s->num_examples < 0)
        return tl_error(TL_EINVAL, "synthetic_sequences spec: num_examples must be >= 0, got %lld",
                        (long long)s->num_examples);
    if (s->sequence_length < 1 || s->sequence_length > MAX_LENGTH)
        return tl_error(TL_EINVAL, "synthetic_sequences spec: sequence_length must be in 1..%d, got %lld", MAX_LENGTH,
                        (long long)s->sequence_length);
    if (s->vocab_size < 2 || s->vocab_size > MAX_VOCAB)
        return tl_error(TL_EINVAL, "synthetic_sequences spec: vocab_size must be in 2..%d, got %lld", MAX_VOCAB,
                        (long long)s->vocab_size);
    return TL_OK;
}

/* floor(u * n / 2^32) of the next word: uniform over [0, n) up to a bias
 * below n / 2^32. */
static int64_t below(tl_rng *r, int64_t n)
{
    return (int64_t)(((uint64_t)tl_rng_u32(r) * (uint64_t)n) >> 32);
}

/* The planted token's count k is drawn from [lo, hi]: lo is the least
 * k >= floor(S/4) + 1 for which the other V - 1 tokens can fill the S - k
 * other positions at most k - 1 times each, hi = max(floor(S/2), lo). */
static void count_range(int64_t s, int64_t v, int64_t *lo, int64_t *hi)
{
    int64_t k = s / 4 + 1;
    while ((v - 1) * (k - 1) < s - k)
        k++;
    *lo = k;
    *hi = s / 2 > k ? s / 2 : k;
}

/* Example i: its tokens into x (S) when x is not NULL, its label returned. */
static int32_t example(const tl_synthetic_sequences_spec *spec, int64_t lo, int64_t hi, uint64_t i, float *x)
{
    int64_t s = spec->sequence_length, v = spec->vocab_size;
    tl_rng r;
    tl_rng_init(&r, spec->seed, OP_SEQUENCE, 0, i);
    int64_t planted = below(&r, v);
    if (x == NULL)
        return (int32_t)planted;
    int64_t k = lo + below(&r, hi - lo + 1);
    for (int64_t j = 0; j < k; j++)
        x[j] = (float)planted;
    for (int64_t j = k; j < s; j++) {
        for (;;) {
            int64_t t = below(&r, v - 1);
            t += t >= planted;
            /* Fewer than k - 1 others placed cannot reach the cap. */
            int64_t seen = 0;
            for (int64_t m = k; j - k >= k - 1 && m < j; m++)
                seen += x[m] == (float)t;
            if (seen < k - 1) {
                x[j] = (float)t;
                break;
            }
        }
    }
    for (int64_t j = s - 1; j > 0; j--) {
        int64_t m = below(&r, j + 1);
        float tmp = x[j];
        x[j] = x[m];
        x[m] = tmp;
    }
    return (int32_t)planted;
}

tl_status tl_synthetic_sequences_generate(const tl_synthetic_sequences_spec *spec, int64_t first, int64_t count,
                                          float *tokens, int32_t *labels)
{
    tl_status st = check_spec(spec);
    if (st != TL_OK)
        return st;
    int64_t n = spec->num_examples, s = spec->sequence_length;
    if (first < 0 || count < 0 || first > n || count > n - first)
        return tl_error(TL_EINVAL, "synthetic_sequences: examples [%lld, %lld + %lld) are not inside [0, %lld)",
                        (long long)first, (long long)first, (long long)count, (long long)n);
    int64_t lo, hi;
    count_range(s, spec->vocab_size, &lo, &hi);
    for (int64_t e = 0; e < count; e++) {
        int32_t y = example(spec, lo, hi, (uint64_t)(first + e), tokens != NULL ? tokens + e * s : NULL);
        if (labels != NULL)
            labels[e] = y;
    }
    return TL_OK;
}

tl_status tl_synthetic_sequences_load(const tl_synthetic_sequences_spec *spec, tl_labeled_data **out)
{
    *out = NULL;
    tl_status st = check_spec(spec);
    if (st != TL_OK)
        return st;
    int64_t n = spec->num_examples, s = spec->sequence_length;
    if ((uint64_t)n > SIZE_MAX / sizeof(float) / (uint64_t)s)
        return tl_error(TL_EINVAL,
                        "synthetic_sequences: %lld sequences of %lld tokens do not fit in memory's address space",
                        (long long)n, (long long)s);
    tl_labeled_data *ld = tl_labeled_data_alloc(n, &s, 1, (int32_t)spec->vocab_size, 0);
    if (ld == NULL)
        return tl_error_oom();
    if ((st = tl_synthetic_sequences_generate(spec, 0, n, ld->features, ld->labels)) != TL_OK) {
        tl_labeled_data_destroy(ld);
        return st;
    }
    *out = ld;
    return TL_OK;
}

/* The synthetic token sequences: their spec checks, determinism, slices
 * equal to the whole, the label as the unique majority token of every
 * example (so counting classifies all of them), the planted count's range,
 * the positions shuffled, pinned bits and allocation-failure unwinding. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"
#include "tpuloop/data.h"

static tl_synthetic_sequences_spec spec_of(int64_t n, int64_t s, int64_t v, uint64_t seed)
{
    tl_synthetic_sequences_spec sp;
    tl_synthetic_sequences_spec_init(&sp);
    sp.num_examples = n;
    sp.sequence_length = s;
    sp.vocab_size = v;
    sp.seed = seed;
    return sp;
}

static tl_labeled_data *load(tl_synthetic_sequences_spec s)
{
    tl_labeled_data *d;
    ASSERT_OK(tl_synthetic_sequences_load(&s, &d));
    return d;
}

static void spec_fails(tl_synthetic_sequences_spec s, const char *frag)
{
    tl_labeled_data *d = (tl_labeled_data *)&d;
    tu_expect_error(tl_synthetic_sequences_load(&s, &d), TL_EINVAL, frag, "tl_synthetic_sequences_load");
    cr_assert_null(d);
    float x[1];
    int32_t y[1];
    tu_expect_error(tl_synthetic_sequences_generate(&s, 0, 0, x, y), TL_EINVAL, frag,
                    "tl_synthetic_sequences_generate");
}

Test(synthetic_sequences, spec_is_checked)
{
    tl_synthetic_sequences_spec s;
    tl_synthetic_sequences_spec_init(&s);
    cr_assert(s.num_examples == 0 && s.sequence_length == 16 && s.vocab_size == 16 && s.seed == 0);
    spec_fails(spec_of(-1, 16, 16, 1), "synthetic_sequences spec: num_examples must be >= 0, got -1");
    spec_fails(spec_of(10, 0, 16, 1), "sequence_length must be in 1..4096, got 0");
    spec_fails(spec_of(10, 4097, 16, 1), "sequence_length must be in 1..4096, got 4097");
    spec_fails(spec_of(10, 16, 1, 1), "vocab_size must be in 2..16777216, got 1");
    spec_fails(spec_of(10, 16, 16777217, 1), "vocab_size must be in 2..16777216, got 16777217");
    tl_synthetic_sequences_spec huge = spec_of(INT64_MAX, 4096, 16, 1);
    tl_labeled_data *d;
    ASSERT_ERR(tl_synthetic_sequences_load(&huge, &d), TL_EINVAL, "do not fit in memory's address space");
}

Test(synthetic_sequences, generate_range_errors)
{
    tl_synthetic_sequences_spec s = spec_of(100, 4, 8, 1);
    float x[4 * 10];
    int32_t y[10];
    ASSERT_ERR(tl_synthetic_sequences_generate(&s, 95, 10, x, y), TL_EINVAL,
               "synthetic_sequences: examples [95, 95 + 10) are not inside [0, 100)");
    ASSERT_ERR(tl_synthetic_sequences_generate(&s, -1, 1, x, y), TL_EINVAL, "not inside [0, 100)");
    ASSERT_ERR(tl_synthetic_sequences_generate(&s, 0, -1, x, y), TL_EINVAL, "not inside");
    ASSERT_ERR(tl_synthetic_sequences_generate(&s, 1, INT64_MAX, x, y), TL_EINVAL, "not inside");
    ASSERT_OK(tl_synthetic_sequences_generate(&s, 100, 0, NULL, NULL));
    ASSERT_OK(tl_synthetic_sequences_generate(&s, 0, 10, NULL, NULL));
}

Test(synthetic_sequences, load_layout)
{
    tl_labeled_data *d = load(spec_of(100, 12, 7, 5));
    cr_assert_eq(d->num_examples, 100);
    cr_assert_eq(d->num_features, 12);
    cr_assert_eq(d->num_classes, 7);
    cr_assert_eq(d->feature_rank, 1);
    cr_assert_eq(d->feature_shape[0], 12);
    cr_assert_null(d->ids);
    cr_assert_eq(d->num_ids, 0);
    tl_labeled_data_destroy(d);
    d = load(spec_of(0, 12, 7, 5));
    cr_assert_eq(d->num_examples, 0);
    tl_labeled_data_destroy(d);
}

Test(synthetic_sequences, same_seed_same_bits_other_seed_other_bits)
{
    tl_labeled_data *a = load(spec_of(500, 16, 16, 77));
    tl_labeled_data *b = load(spec_of(500, 16, 16, 77));
    tl_labeled_data *c = load(spec_of(500, 16, 16, 78));
    cr_assert_eq(memcmp(a->features, b->features, 500 * 16 * sizeof(float)), 0);
    cr_assert_eq(memcmp(a->labels, b->labels, 500 * sizeof(int32_t)), 0);
    cr_assert_neq(memcmp(a->features, c->features, 500 * 16 * sizeof(float)), 0);
    cr_assert_neq(memcmp(a->labels, c->labels, 500 * sizeof(int32_t)), 0);
    tl_labeled_data_destroy(a);
    tl_labeled_data_destroy(b);
    tl_labeled_data_destroy(c);
}

/* Generating [a, b) directly, in pieces, out of order, tokens or labels
 * alone, equals slicing the whole set; so does a spec with a larger N. */
Test(synthetic_sequences, slices_equal_the_whole)
{
    enum { N = 1000, S = 13 };
    tl_synthetic_sequences_spec s = spec_of(N, S, 9, 9);
    tl_labeled_data *all = load(s);
    static float x[N * S];
    int32_t y[N];
    const int64_t cuts[][2] = {{123, 333}, {999, 1}, {0, 1}, {500, 0}, {0, N}, {640, 360}};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        int64_t a = cuts[k][0], n = cuts[k][1];
        memset(x, 0xAB, sizeof x);
        ASSERT_OK(tl_synthetic_sequences_generate(&s, a, n, x, y));
        cr_assert_eq(memcmp(x, all->features + a * S, (size_t)n * S * sizeof(float)), 0, "[%lld, +%lld)",
                     (long long)a, (long long)n);
        cr_assert_eq(memcmp(y, all->labels + a, (size_t)n * sizeof(int32_t)), 0, "[%lld, +%lld)", (long long)a,
                     (long long)n);
    }
    ASSERT_OK(tl_synthetic_sequences_generate(&s, 10, 5, x, NULL));
    cr_assert_eq(memcmp(x, all->features + 10 * S, 5 * S * sizeof(float)), 0, "tokens alone");
    ASSERT_OK(tl_synthetic_sequences_generate(&s, 20, 7, NULL, y));
    cr_assert_eq(memcmp(y, all->labels + 20, 7 * sizeof(int32_t)), 0, "labels alone");
    tl_synthetic_sequences_spec big = s;
    big.num_examples = 1 << 20;
    ASSERT_OK(tl_synthetic_sequences_generate(&big, 900, 100, x, y));
    cr_assert_eq(memcmp(x, all->features + 900 * S, 100 * S * sizeof(float)), 0);
    cr_assert_eq(memcmp(y, all->labels + 900, 100 * sizeof(int32_t)), 0);
    tl_labeled_data_destroy(all);
}

/* Every token an integer id in [0, V), and the label's count above every
 * other token's: counting tokens classifies every example. The label's
 * count is returned in counts[label] for the caller's checks. */
static void check_example(const float *x, int32_t label, int64_t s, int64_t v, int64_t *counts, int64_t i)
{
    cr_assert(label >= 0 && label < v, "example %lld: label %d outside [0, %lld)", (long long)i, label,
              (long long)v);
    memset(counts, 0, (size_t)v * sizeof *counts);
    for (int64_t j = 0; j < s; j++) {
        float t = x[j];
        cr_assert(t >= 0.0f && t < (float)v && t == floorf(t), "example %lld position %lld: token %g",
                  (long long)i, (long long)j, (double)t);
        counts[(int64_t)t]++;
    }
    for (int64_t t = 0; t < v; t++)
        cr_assert(t == label || counts[t] < counts[label],
                  "example %lld: token %lld appears %lld times, the label %d %lld times", (long long)i,
                  (long long)t, (long long)counts[t], label, (long long)counts[label]);
}

Test(synthetic_sequences, the_label_is_the_unique_majority)
{
    /* (S, V, the planted count's range [lo, hi] as data.h defines it) */
    static const int64_t cases[][4] = {
        {16, 16, 5, 8}, /* the defaults: floor(S/4) + 1 .. floor(S/2) */
        {1, 2, 1, 1},   /* one token: it is the majority */
        {2, 2, 2, 2},   /* V = 2 forces lo up to ceil((S + 1) / 2) */
        {64, 2, 33, 33}, {5, 3, 3, 3}, {4, 3, 2, 2}, {33, 1000, 9, 16}, {100, 5, 26, 50}, {7, 50, 2, 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t s = cases[c][0], v = cases[c][1], lo = cases[c][2], hi = cases[c][3];
        enum { N = 2000 };
        tl_labeled_data *d = load(spec_of(N, s, v, 3 + c));
        int64_t *counts = malloc((size_t)v * sizeof *counts);
        int64_t *seen_k = calloc((size_t)hi + 1, sizeof *seen_k);
        int64_t *per_class = calloc((size_t)v, sizeof *per_class);
        int64_t first_is_planted = 0;
        for (int64_t i = 0; i < N; i++) {
            const float *x = d->features + i * s;
            int32_t y = d->labels[i];
            check_example(x, y, s, v, counts, i);
            int64_t k = counts[y];
            cr_assert(k >= lo && k <= hi, "S %lld V %lld example %lld: the planted count %lld is outside [%lld, %lld]",
                      (long long)s, (long long)v, (long long)i, (long long)k, (long long)lo, (long long)hi);
            seen_k[k]++;
            per_class[y]++;
            first_is_planted += x[0] == (float)y;
        }
        /* Every count of the range is drawn, and every class when N >> V. */
        for (int64_t k = lo; k <= hi; k++)
            cr_assert_gt(seen_k[k], 0, "S %lld V %lld: no example with the planted count %lld", (long long)s,
                         (long long)v, (long long)k);
        for (int64_t t = 0; v <= 16 && t < v; t++)
            cr_assert_gt(per_class[t], N / v / 2, "S %lld V %lld: class %lld has %lld examples", (long long)s,
                         (long long)v, (long long)t, (long long)per_class[t]);
        /* Shuffled: the planted token is not always at the front. */
        if (lo < s)
            cr_assert_lt(first_is_planted, N, "S %lld V %lld: position 0 always holds the label", (long long)s,
                         (long long)v);
        free(counts);
        free(seen_k);
        free(per_class);
        tl_labeled_data_destroy(d);
    }
}

/* With S = 16, V = 16 the planted count is uniform over 5..8 and the
 * position of a planted token uniform over the 16: loose chi-square-free
 * bounds that catch a skewed draw or a missing shuffle. */
Test(synthetic_sequences, counts_and_positions_are_uniform)
{
    enum { N = 20000, S = 16, V = 16 };
    tl_labeled_data *d = load(spec_of(N, S, V, 1234));
    int64_t counts[V], by_k[S + 1] = {0}, at[S] = {0}, planted = 0;
    for (int64_t i = 0; i < N; i++) {
        const float *x = d->features + i * S;
        check_example(x, d->labels[i], S, V, counts, i);
        by_k[counts[d->labels[i]]]++;
        for (int j = 0; j < S; j++)
            if (x[j] == (float)d->labels[i]) {
                at[j]++;
                planted++;
            }
    }
    for (int k = 5; k <= 8; k++)
        cr_assert(fabs((double)by_k[k] / N - 0.25) < 0.02, "count %d in %lld of %d examples", k, (long long)by_k[k],
                  N);
    for (int j = 0; j < S; j++)
        cr_assert(fabs((double)at[j] / (double)planted - 1.0 / S) < 0.01, "position %d holds %lld of %lld planted",
                  j, (long long)at[j], (long long)planted);
    tl_labeled_data_destroy(d);
}

/* Pins the generated bits of one spec: a change here changes every data set
 * users made before, which must be a deliberate decision. */
Test(synthetic_sequences, known_answer)
{
    tl_labeled_data *d = load(spec_of(8, 16, 16, 42));
    static const float x0[16] = {8, 3, 2, 8, 5, 8, 12, 8, 8, 9, 4, 12, 8, 9, 8, 8};
    static const int32_t y[8] = {8, 0, 9, 9, 0, 13, 14, 13};
    for (int k = 0; k < 16; k++)
        cr_assert_eq(d->features[k], x0[k], "token %d: %g", k, (double)d->features[k]);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(d->labels[i], y[i], "label %d: %d", i, d->labels[i]);
    tl_labeled_data_destroy(d);
}

static tl_status oom_load(void *ctx)
{
    tl_synthetic_sequences_spec *s = ctx;
    tl_labeled_data *d;
    tl_status st = tl_synthetic_sequences_load(s, &d);
    tl_labeled_data_destroy(d);
    return st;
}

Test(synthetic_sequences, every_allocation_failure_unwinds)
{
    tl_synthetic_sequences_spec s = spec_of(50, 16, 16, 1);
    cr_assert_geq(tu_oom_sweep(oom_load, &s, "tl_synthetic_sequences_load"), 1);
}

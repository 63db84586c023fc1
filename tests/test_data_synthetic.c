/* The synthetic classification set: its spec checks, determinism, slices
 * equal to the whole, the planted model's labels recomputed here from the
 * exposed weights, class balance, label noise, learnability by a plain
 * softmax regression, and allocation-failure unwinding. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"
#include "tpuloop/data.h"

static tl_synthetic_spec spec_of(int64_t n, int64_t d, int32_t c, int64_t h, double noise, uint64_t seed)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = n;
    s.num_features = d;
    s.num_classes = c;
    s.hidden = h;
    s.label_noise = noise;
    s.seed = seed;
    return s;
}

static tl_labeled_data *load(tl_synthetic_spec s)
{
    tl_labeled_data *d;
    ASSERT_OK(tl_synthetic_load(&s, &d));
    return d;
}

static void spec_fails(tl_synthetic_spec s, const char *frag)
{
    tl_synthetic *g = (tl_synthetic *)&g;
    tu_expect_error(tl_synthetic_create(&s, &g), TL_EINVAL, frag, "tl_synthetic_create");
    cr_assert_null(g);
    tl_labeled_data *d = (tl_labeled_data *)&d;
    tu_expect_error(tl_synthetic_load(&s, &d), TL_EINVAL, frag, "tl_synthetic_load");
    cr_assert_null(d);
}

Test(synthetic, spec_is_checked)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    cr_assert_eq(s.num_examples, 0);
    cr_assert_eq(s.hidden, 0);
    cr_assert_eq(s.label_noise, 0.0);
    spec_fails(s, "num_features must be in 1..1048576, got 0");
    spec_fails(spec_of(-1, 4, 2, 0, 0, 1), "num_examples must be >= 0, got -1");
    spec_fails(spec_of(10, 2000000, 2, 0, 0, 1), "num_features must be in 1..1048576, got 2000000");
    spec_fails(spec_of(10, 4, 1, 0, 0, 1), "num_classes must be in 2..65536, got 1");
    spec_fails(spec_of(10, 4, 70000, 0, 0, 1), "num_classes must be in 2..65536, got 70000");
    spec_fails(spec_of(10, 4, 2, -3, 0, 1), "hidden must be 0 (a linear model) or in 1..4096, got -3");
    spec_fails(spec_of(10, 4, 2, 5000, 0, 1), "got 5000");
    spec_fails(spec_of(10, 4, 2, 0, 1.0, 1), "label_noise must be in [0, 1), got 1");
    spec_fails(spec_of(10, 4, 2, 0, -0.1, 1), "label_noise must be in [0, 1), got -0.1");
    spec_fails(spec_of(10, 4, 2, 0, NAN, 1), "label_noise must be in [0, 1), got nan");
    spec_fails(spec_of(10, 1 << 20, 65536, 0, 0, 1), "the planted model would have 68719476736 weights");
    tl_synthetic_spec huge = spec_of(INT64_MAX, 1 << 20, 2, 0, 0, 1);
    tl_labeled_data *d;
    ASSERT_ERR(tl_synthetic_load(&huge, &d), TL_EINVAL, "do not fit in memory's address space");
}

Test(synthetic, load_layout)
{
    tl_labeled_data *d = load(spec_of(100, 7, 3, 0, 0, 5));
    cr_assert_eq(d->num_examples, 100);
    cr_assert_eq(d->num_features, 7);
    cr_assert_eq(d->num_classes, 3);
    cr_assert_eq(d->feature_rank, 1);
    cr_assert_eq(d->feature_shape[0], 7);
    for (int i = 0; i < 100; i++)
        cr_assert(d->labels[i] >= 0 && d->labels[i] < 3);
    tl_labeled_data_destroy(d);
    d = load(spec_of(0, 7, 3, 0, 0, 5));
    cr_assert_eq(d->num_examples, 0);
    tl_labeled_data_destroy(d);
}

Test(synthetic, same_seed_same_bits_other_seed_other_bits)
{
    for (int h = 0; h <= 16; h += 16) {
        tl_labeled_data *a = load(spec_of(500, 24, 6, h, 0.1, 77));
        tl_labeled_data *b = load(spec_of(500, 24, 6, h, 0.1, 77));
        tl_labeled_data *c = load(spec_of(500, 24, 6, h, 0.1, 78));
        cr_assert_eq(memcmp(a->features, b->features, 500 * 24 * sizeof(float)), 0);
        cr_assert_eq(memcmp(a->labels, b->labels, 500 * sizeof(int32_t)), 0);
        cr_assert_neq(memcmp(a->features, c->features, 500 * 24 * sizeof(float)), 0);
        cr_assert_neq(memcmp(a->labels, c->labels, 500 * sizeof(int32_t)), 0);
        tl_labeled_data_destroy(a);
        tl_labeled_data_destroy(b);
        tl_labeled_data_destroy(c);
    }
}

/* Generating [a, b) directly, in pieces, out of order, equals slicing the
 * whole set; so does a generator for a larger N with the same seed. */
Test(synthetic, slices_equal_the_whole)
{
    tl_synthetic_spec s = spec_of(1000, 13, 4, 8, 0.2, 9);
    tl_labeled_data *all = load(s);
    tl_synthetic *g;
    ASSERT_OK(tl_synthetic_create(&s, &g));
    float x[1000 * 13];
    int32_t y[1000];
    const int64_t cuts[][2] = {{123, 333}, {999, 1}, {0, 1}, {500, 0}, {0, 1000}, {640, 360}};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        int64_t a = cuts[k][0], n = cuts[k][1];
        memset(x, 0xAB, sizeof x);
        ASSERT_OK(tl_synthetic_generate(g, a, n, x, y));
        cr_assert_eq(memcmp(x, all->features + a * 13, (size_t)n * 13 * sizeof(float)), 0, "[%lld, +%lld)",
                     (long long)a, (long long)n);
        cr_assert_eq(memcmp(y, all->labels + a, (size_t)n * sizeof(int32_t)), 0, "[%lld, +%lld)", (long long)a,
                     (long long)n);
    }
    /* features only */
    ASSERT_OK(tl_synthetic_generate(g, 10, 5, x, NULL));
    cr_assert_eq(memcmp(x, all->features + 10 * 13, 5 * 13 * sizeof(float)), 0);
    tl_synthetic_destroy(g);

    tl_synthetic_spec big = s;
    big.num_examples = 1 << 20;
    ASSERT_OK(tl_synthetic_create(&big, &g));
    ASSERT_OK(tl_synthetic_generate(g, 900, 100, x, y));
    cr_assert_eq(memcmp(x, all->features + 900 * 13, 100 * 13 * sizeof(float)), 0);
    cr_assert_eq(memcmp(y, all->labels + 900, 100 * sizeof(int32_t)), 0);
    tl_synthetic_destroy(g);
    tl_labeled_data_destroy(all);
}

Test(synthetic, generate_range_errors)
{
    tl_synthetic_spec s = spec_of(100, 3, 2, 0, 0, 1);
    tl_synthetic *g;
    ASSERT_OK(tl_synthetic_create(&s, &g));
    cr_assert_eq(tl_synthetic_get_spec(g)->num_examples, 100);
    float x[3 * 10];
    int32_t y[10];
    ASSERT_ERR(tl_synthetic_generate(g, 95, 10, x, y), TL_EINVAL, "examples [95, 95 + 10) are not inside [0, 100)");
    ASSERT_ERR(tl_synthetic_generate(g, -1, 1, x, y), TL_EINVAL, "not inside [0, 100)");
    ASSERT_ERR(tl_synthetic_generate(g, 0, -1, x, y), TL_EINVAL, "not inside");
    ASSERT_ERR(tl_synthetic_generate(g, 1, INT64_MAX, x, y), TL_EINVAL, "not inside");
    ASSERT_ERR(tl_synthetic_generate(g, 0, 1, NULL, y), TL_EINVAL, "features is NULL");
    ASSERT_OK(tl_synthetic_generate(g, 100, 0, NULL, NULL));
    tl_synthetic_destroy(g);
    tl_synthetic_destroy(NULL);
    tl_labeled_data_destroy(NULL);
}

/* The planted model's logits at x, recomputed from the exposed weights. */
static void logits_of(const tl_synthetic_model *m, const float *x, double *z)
{
    int64_t d = m->num_features, h = m->hidden;
    double hid[64];
    cr_assert_leq(h, 64);
    for (int64_t j = 0; j < h; j++) {
        double s = 0.0;
        for (int64_t k = 0; k < d; k++)
            s += (double)m->w1[j * d + k] * (double)x[k];
        hid[j] = tanh(s + m->b1[j]);
    }
    for (int32_t c = 0; c < m->num_classes; c++) {
        double s = 0.0;
        if (h == 0)
            for (int64_t k = 0; k < d; k++)
                s += (double)m->w1[c * d + k] * (double)x[k];
        else
            for (int64_t j = 0; j < h; j++)
                s += (double)m->w2[c * h + j] * hid[j];
        z[c] = s + (h == 0 ? m->b1[c] : m->b2[c]);
    }
}

/* Without noise the planted model classifies every example as labelled (a
 * numerical tie, within 1e-12, would be the only excuse), each class holds
 * a fair share, and the features look standard normal. */
static void planted_model_is_perfect(int64_t h)
{
    const int64_t n = 20000, d = 32;
    const int32_t c = 10;
    tl_synthetic_spec s = spec_of(n, d, c, h, 0, 2024);
    tl_synthetic *g;
    ASSERT_OK(tl_synthetic_create(&s, &g));
    tl_synthetic_model m = tl_synthetic_model_of(g);
    cr_assert_eq(m.hidden, h);
    cr_assert_eq(m.w2 == NULL, h == 0);
    tl_labeled_data *data = load(s);
    int64_t count[10] = {0}, correct = 0;
    double sum = 0.0, sum2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float *x = data->features + i * d;
        double z[10];
        logits_of(&m, x, z);
        int32_t best = 0;
        for (int32_t k = 1; k < c; k++)
            if (z[k] > z[best])
                best = k;
        int32_t y = data->labels[i];
        correct += best == y || fabs(z[best] - z[y]) < 1e-12;
        count[y]++;
        for (int64_t k = 0; k < d; k++) {
            sum += x[k];
            sum2 += (double)x[k] * x[k];
        }
    }
    cr_assert_eq(correct, n, "the planted model (hidden %lld) gets %lld of %lld", (long long)h, (long long)correct,
                 (long long)n);
    for (int k = 0; k < c; k++)
        cr_assert_gt(count[k], n / c / 3, "class %d has %lld of %lld examples (hidden %lld)", k, (long long)count[k],
                     (long long)n, (long long)h);
    double mean = sum / (double)(n * d), var = sum2 / (double)(n * d) - mean * mean;
    cr_assert(fabs(mean) < 0.01 && fabs(var - 1.0) < 0.02, "features: mean %g, variance %g", mean, var);
    tl_labeled_data_destroy(data);
    tl_synthetic_destroy(g);
}

Test(synthetic, planted_linear_model_is_perfect_and_classes_balanced)
{
    planted_model_is_perfect(0);
}

Test(synthetic, planted_mlp_is_perfect_and_classes_balanced)
{
    planted_model_is_perfect(48);
}

Test(synthetic, linear_last_layer_has_unit_rows_and_zero_bias)
{
    tl_synthetic_spec s = spec_of(1, 9, 4, 0, 0, 3);
    tl_synthetic *g;
    ASSERT_OK(tl_synthetic_create(&s, &g));
    tl_synthetic_model m = tl_synthetic_model_of(g);
    for (int c = 0; c < 4; c++) {
        double n2 = 0.0;
        for (int k = 0; k < 9; k++)
            n2 += (double)m.w1[c * 9 + k] * m.w1[c * 9 + k];
        cr_assert(fabs(n2 - 1.0) < 1e-6, "row %d has squared norm %g", c, n2);
        cr_assert_eq(m.b1[c], 0.0f);
    }
    cr_assert_null(m.b2);
    tl_synthetic_destroy(g);
}

/* With noise p a label differs from the planted one with probability
 * p (C - 1) / C. */
Test(synthetic, label_noise_rate)
{
    const int64_t n = 40000;
    tl_labeled_data *clean = load(spec_of(n, 16, 5, 0, 0.0, 11));
    tl_labeled_data *noisy = load(spec_of(n, 16, 5, 0, 0.3, 11));
    cr_assert_eq(memcmp(clean->features, noisy->features, (size_t)n * 16 * sizeof(float)), 0);
    int64_t changed = 0;
    for (int64_t i = 0; i < n; i++)
        changed += clean->labels[i] != noisy->labels[i];
    double rate = (double)changed / (double)n;
    cr_assert(fabs(rate - 0.3 * 4 / 5) < 0.01, "%.4f of labels changed, want 0.24", rate);
    tl_labeled_data_destroy(clean);
    tl_labeled_data_destroy(noisy);
}

/* The planted model is learnable: softmax regression by plain SGD on 4000
 * examples classifies 1000 examples it never saw at >= 93%. */
Test(synthetic, softmax_regression_learns_it)
{
    enum { N = 5000, TRAIN = 4000, D = 20, C = 5 };
    tl_labeled_data *data = load(spec_of(N, D, C, 0, 0, 31337));
    static float w[C][D], b[C];
    for (int epoch = 0; epoch < 20; epoch++) {
        float lr = 0.5f / (1.0f + (float)epoch);
        for (int i = 0; i < TRAIN; i++) {
            const float *x = data->features + i * D;
            double z[C], zmax = -1e300, sum = 0.0;
            for (int c = 0; c < C; c++) {
                z[c] = b[c];
                for (int k = 0; k < D; k++)
                    z[c] += (double)w[c][k] * x[k];
                zmax = z[c] > zmax ? z[c] : zmax;
            }
            for (int c = 0; c < C; c++)
                sum += (z[c] = exp(z[c] - zmax));
            for (int c = 0; c < C; c++) {
                float gr = (float)(z[c] / sum) - (c == data->labels[i]);
                b[c] -= lr * gr;
                for (int k = 0; k < D; k++)
                    w[c][k] -= lr * gr * x[k];
            }
        }
    }
    int correct = 0;
    for (int i = TRAIN; i < N; i++) {
        const float *x = data->features + i * D;
        int best = 0;
        double zbest = -1e300;
        for (int c = 0; c < C; c++) {
            double z = b[c];
            for (int k = 0; k < D; k++)
                z += (double)w[c][k] * x[k];
            if (z > zbest) {
                zbest = z;
                best = c;
            }
        }
        correct += best == data->labels[i];
    }
    cr_assert_geq(correct, 930, "held-out accuracy %d / 1000", correct);
    tl_labeled_data_destroy(data);
}

/* Pins the generated bits of one spec: a change here changes every data set
 * users made before, which must be a deliberate decision. */
Test(synthetic, known_answer)
{
    tl_labeled_data *d = load(spec_of(16, 4, 3, 0, 0, 42));
    static const float x0[4] = {-0.220280215f, 0.917361498f, 0.225540161f, -1.24596035f};
    static const int32_t y[16] = {1, 0, 2, 2, 1, 2, 0, 0, 2, 0, 1, 0, 1, 2, 0, 1};
    for (int k = 0; k < 4; k++)
        cr_assert(fabsf(d->features[k] - x0[k]) < 1e-6f, "feature %d: %.9g", k, d->features[k]);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(d->labels[i], y[i], "label %d: %d", i, d->labels[i]);
    tl_labeled_data_destroy(d);
}

static tl_status oom_load(void *ctx)
{
    tl_synthetic_spec *s = ctx;
    tl_labeled_data *d;
    tl_status st = tl_synthetic_load(s, &d);
    tl_labeled_data_destroy(d);
    return st;
}

Test(synthetic, every_allocation_failure_unwinds)
{
    tl_synthetic_spec lin = spec_of(50, 6, 3, 0, 0.1, 1), mlp = spec_of(50, 6, 3, 5, 0.1, 1);
    cr_assert_geq(tu_oom_sweep(oom_load, &lin, "tl_synthetic_load (linear)"), 6);
    cr_assert_geq(tu_oom_sweep(oom_load, &mlp, "tl_synthetic_load (hidden)"), 8);
}

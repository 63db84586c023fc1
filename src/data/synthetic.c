/* synthetic.c — classification data labelled by a planted model, every
 * number a pure function of (seed, what, index) through the counter-based
 * RNG, so shards are generated independently and identically. */
#include <math.h>
#include <stdio.h>

#include "../base/base_int.h"
#include "data_int.h"
#include "tpuloop/rng.h"

#define MAX_FEATURES ((int64_t)1 << 20)
#define MAX_CLASSES (1 << 16)
#define MAX_HIDDEN 4096 /* the hidden activations live on the stack: 32 KiB */
#define MAX_MODEL_FLOATS ((int64_t)1 << 28)

/* RNG stream names (the "op" of tl_rng_init): ASCII tags, fixed forever,
 * since changing one changes every generated data set. */
#define OP_MODEL 0x73796e2d6d6f64ull    /* "syn-mod" */
#define OP_FEATURES 0x73796e2d66656174ull /* "syn-feat" */
#define OP_NOISE 0x73796e2d6e6f6973ull  /* "syn-nois" */

struct tl_synthetic {
    tl_synthetic_spec spec;
    float *w1; /* (H, D), or (C, D) when linear */
    float *b1; /* (H), or (C) */
    float *w2; /* (C, H); NULL when linear */
    float *b2; /* (C); NULL when linear */
};

void tl_synthetic_spec_init(tl_synthetic_spec *s)
{
    *s = (tl_synthetic_spec){0};
}

static tl_status check_spec(const tl_synthetic_spec *s)
{
    if (s->num_examples < 0)
        return tl_error(TL_EINVAL, "synthetic spec: num_examples must be >= 0, got %lld", (long long)s->num_examples);
    if (s->num_features < 1 || s->num_features > MAX_FEATURES)
        return tl_error(TL_EINVAL, "synthetic spec: num_features must be in 1..%lld, got %lld",
                        (long long)MAX_FEATURES, (long long)s->num_features);
    if (s->num_classes < 2 || s->num_classes > MAX_CLASSES)
        return tl_error(TL_EINVAL, "synthetic spec: num_classes must be in 2..%d, got %d", MAX_CLASSES,
                        (int)s->num_classes);
    if (s->hidden < 0 || s->hidden > MAX_HIDDEN)
        return tl_error(TL_EINVAL, "synthetic spec: hidden must be 0 (a linear model) or in 1..%d, got %lld",
                        MAX_HIDDEN, (long long)s->hidden);
    if (!(s->label_noise >= 0.0 && s->label_noise < 1.0))
        return tl_error(TL_EINVAL, "synthetic spec: label_noise must be in [0, 1), got %g", s->label_noise);
    int64_t rows = s->hidden ? s->hidden : s->num_classes;
    int64_t floats = rows * s->num_features + (int64_t)s->num_classes * s->hidden;
    if (floats > MAX_MODEL_FLOATS)
        return tl_error(TL_EINVAL,
                        "synthetic spec: the planted model would have %lld weights (num_features %lld, num_classes "
                        "%d, hidden %lld); at most %lld are allowed",
                        (long long)floats, (long long)s->num_features, (int)s->num_classes, (long long)s->hidden,
                        (long long)MAX_MODEL_FLOATS);
    return TL_OK;
}

/* rows x cols normal draws from stream `layer` of the model, times scale;
 * with unit_rows each row is then scaled to length 1. */
static void draw_matrix(float *w, int64_t rows, int64_t cols, uint64_t seed, uint64_t layer, double scale,
                        bool unit_rows)
{
    tl_rng r;
    tl_rng_init(&r, seed, OP_MODEL, layer, 0);
    for (int64_t i = 0; i < rows; i++) {
        float *row = w + i * cols;
        double norm2 = 0.0;
        for (int64_t j = 0; j < cols; j++) {
            row[j] = (float)(tl_rng_normal(&r) * scale);
            norm2 += (double)row[j] * row[j];
        }
        if (unit_rows && norm2 > 0.0) {
            double inv = 1.0 / sqrt(norm2);
            for (int64_t j = 0; j < cols; j++)
                row[j] = (float)(row[j] * inv);
        }
    }
}

tl_status tl_synthetic_create(const tl_synthetic_spec *spec, tl_synthetic **out)
{
    *out = NULL;
    tl_status st = check_spec(spec);
    if (st != TL_OK)
        return st;
    int64_t d = spec->num_features, c = spec->num_classes, h = spec->hidden;
    int64_t rows = h ? h : c;
    tl_synthetic *g = tl_calloc(1, sizeof *g);
    if (g == NULL)
        return tl_error_oom();
    g->spec = *spec;
    g->w1 = tl_alloc_array((size_t)(rows * d), sizeof(float));
    g->b1 = tl_calloc((size_t)rows, sizeof(float));
    if (h > 0) {
        g->w2 = tl_alloc_array((size_t)(c * h), sizeof(float));
        g->b2 = tl_calloc((size_t)c, sizeof(float));
    }
    if (g->w1 == NULL || g->b1 == NULL || (h > 0 && (g->w2 == NULL || g->b2 == NULL))) {
        tl_synthetic_destroy(g);
        return tl_error_oom();
    }
    if (h == 0) {
        draw_matrix(g->w1, c, d, spec->seed, 1, 1.0, true);
    } else {
        draw_matrix(g->w1, h, d, spec->seed, 1, 1.0 / sqrt((double)d), false);
        draw_matrix(g->w2, c, h, spec->seed, 2, 1.0, true);
    }
    *out = g;
    return TL_OK;
}

void tl_synthetic_destroy(tl_synthetic *g)
{
    if (g == NULL)
        return;
    tl_free(g->w1);
    tl_free(g->b1);
    tl_free(g->w2);
    tl_free(g->b2);
    tl_free(g);
}

const tl_synthetic_spec *tl_synthetic_get_spec(const tl_synthetic *g)
{
    return &g->spec;
}

tl_synthetic_model tl_synthetic_model_of(const tl_synthetic *g)
{
    return (tl_synthetic_model){g->spec.num_features, g->spec.num_classes, g->spec.hidden, g->w1, g->b1, g->w2,
                                g->b2};
}

static double dot(const float *w, const float *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)w[i] * (double)x[i];
    return s;
}

/* n standard normals from r. Both Box-Muller outputs of each pair of words
 * are used (tl_rng_normal keeps only the cosine), which halves the cost of
 * the logarithms and square roots that dominate generation. */
static void normals(tl_rng *r, float *x, int64_t n)
{
    for (int64_t j = 0; j < n; j += 2) {
        /* 1 - u keeps the log argument in (0, 1] */
        double u1 = 1.0 - (double)tl_rng_u32(r) * (1.0 / 4294967296.0);
        double u2 = (double)tl_rng_u32(r) * (1.0 / 4294967296.0);
        double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
        x[j] = (float)(rad * cos(th));
        if (j + 1 < n)
            x[j + 1] = (float)(rad * sin(th));
    }
}

/* argmax of the planted model's logits at x; the lowest class wins a tie. */
static int32_t planted_label(const tl_synthetic *g, const float *x)
{
    int64_t d = g->spec.num_features, h = g->spec.hidden;
    int32_t c = g->spec.num_classes;
    double hid[MAX_HIDDEN];
    if (h > 0)
        for (int64_t j = 0; j < h; j++)
            hid[j] = tanh(dot(g->w1 + j * d, x, d) + (double)g->b1[j]);
    int32_t best = 0;
    double best_z = 0.0;
    for (int32_t k = 0; k < c; k++) {
        double z;
        if (h > 0) {
            z = (double)g->b2[k];
            const float *w = g->w2 + (int64_t)k * h;
            double s = 0.0;
            for (int64_t j = 0; j < h; j++)
                s += (double)w[j] * hid[j];
            z += s;
        } else {
            z = dot(g->w1 + (int64_t)k * d, x, d) + (double)g->b1[k];
        }
        if (k == 0 || z > best_z) {
            best = k;
            best_z = z;
        }
    }
    return best;
}

tl_status tl_synthetic_generate(const tl_synthetic *g, int64_t first, int64_t count, float *features,
                                int32_t *labels)
{
    int64_t n = g->spec.num_examples, d = g->spec.num_features;
    if (first < 0 || count < 0 || first > n || count > n - first)
        return tl_error(TL_EINVAL, "synthetic: examples [%lld, %lld + %lld) are not inside [0, %lld)",
                        (long long)first, (long long)first, (long long)count, (long long)n);
    if (features == NULL && count > 0)
        return tl_error(TL_EINVAL, "synthetic: features is NULL; the labels are computed from the features");
    for (int64_t e = 0; e < count; e++) {
        uint64_t i = (uint64_t)(first + e);
        float *x = features + e * d;
        tl_rng r;
        tl_rng_init(&r, g->spec.seed, OP_FEATURES, 0, i);
        normals(&r, x, d);
        if (labels == NULL)
            continue;
        int32_t y = planted_label(g, x);
        if (g->spec.label_noise > 0.0) {
            tl_rng_init(&r, g->spec.seed, OP_NOISE, 0, i);
            if (tl_rng_uniform_f64(&r) < g->spec.label_noise)
                y = (int32_t)(tl_rng_uniform_f64(&r) * g->spec.num_classes);
        }
        labels[e] = y;
    }
    return TL_OK;
}

tl_status tl_synthetic_load(const tl_synthetic_spec *spec, tl_labeled_data **out)
{
    *out = NULL;
    tl_status st = check_spec(spec);
    if (st != TL_OK)
        return st;
    int64_t n = spec->num_examples, d = spec->num_features;
    if ((uint64_t)n > SIZE_MAX / sizeof(float) / (uint64_t)d)
        return tl_error(TL_EINVAL, "synthetic: %lld examples of %lld features do not fit in memory's address space",
                        (long long)n, (long long)d);
    tl_synthetic *g;
    if ((st = tl_synthetic_create(spec, &g)) != TL_OK)
        return st;
    tl_labeled_data *ld = tl_labeled_data_alloc(n, &d, 1, spec->num_classes, 0);
    if (ld == NULL) {
        tl_synthetic_destroy(g);
        return tl_error_oom();
    }
    st = tl_synthetic_generate(g, 0, n, ld->features, ld->labels);
    tl_synthetic_destroy(g);
    if (st != TL_OK) {
        tl_labeled_data_destroy(ld);
        return st;
    }
    *out = ld;
    return TL_OK;
}

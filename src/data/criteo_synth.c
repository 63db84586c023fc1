/* criteo_synth.c — Criteo-shaped click logs labelled by a planted model
 * (tpuloop/criteo_synth.h), every number a pure function of (seed, example,
 * field) through the counter-based RNG, and the exact ROC AUC. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "../base/base_int.h"
#include "data_int.h"
#include "tpuloop/criteo_synth.h"
#include "tpuloop/rng.h"

/* RNG stream names (tl_rng_init's op): ASCII tags, fixed forever, since
 * changing one changes every generated data set. */
#define OP_MODEL 0x6372732d6d6f64ull /* "crs-mod": u_c, w, dense params, offsets */
#define OP_EMB 0x6372732d656d62ull   /* "crs-emb": h_c[id], replica c, step id */
#define OP_EX 0x6372732d6578ull      /* "crs-ex": example fields, replica field, step index */

/* Replica numbers of an example's fields in OP_EX. */
#define FIELD_DENSE 0   /* + j */
#define FIELD_CAT 64    /* + c */
#define FIELD_LABEL 128

/* The smallest prime above 2^32: above every vocabulary, so r -> r A mod V is
 * a bijection of [0, V); (A mod V) r < 2^64 since both are below 2^32. */
#define SCATTER_PRIME 4294967311ull

#define MAX_X 16777215.0 /* 2^24 - 1: dense values stay exact in float */
#define CALIB_N 16384
#define MAX_PAIRS 4
#define W_CAT 0.7071067811865476 /* sqrt(.5) */
#define W_DENSE 0.5               /* sqrt(.25) */
#define W_PAIR 0.5
#define SQRT3 1.7320508075688772

/* Criteo Kaggle's cardinalities (DLRM's day_fea_count), capped at 100000 so
 * a DLRM's tables stay small by default. */
static const int64_t DEFAULT_VOCAB[TL_CRITEO_SYNTH_MAX_CAT] = {
    1460,   583, 100000, 100000, 305,   24, 12517, 633,    3, 93145,  5683, 100000, 3194,
    27,   14992, 100000,     10, 5652, 2173,     4, 100000, 18,   15, 100000,  105, 100000};

typedef struct zipf_feature {
    double hx1, hxn, s; /* rejection-inversion constants (Hörmann & Derflinger) */
    uint64_t mult, offset; /* scatter: id = (rank * mult + offset) mod V */
    uint64_t vocab;
} zipf_feature;

struct tl_criteo_synth {
    tl_criteo_synth_config c;
    zipf_feature cat[TL_CRITEO_SYNTH_MAX_CAT];
    double u[TL_CRITEO_SYNTH_MAX_CAT][TL_CRITEO_SYNTH_MAX_HIDDEN]; /* (C, hidden_dim) unit rows */
    double mu[TL_CRITEO_SYNTH_MAX_DENSE], sigma[TL_CRITEO_SYNTH_MAX_DENSE];
    double t_mean[TL_CRITEO_SYNTH_MAX_DENSE], t_inv_std[TL_CRITEO_SYNTH_MAX_DENSE];
    double w[TL_CRITEO_SYNTH_MAX_DENSE]; /* (num_dense) unit vector */
    int num_pairs;
    double s_mean, s_inv_std, bias;
};

void tl_criteo_synth_config_default(tl_criteo_synth_config *c)
{
    if (c == NULL)
        return;
    memset(c, 0, sizeof *c);
    c->num_examples = (int64_t)1 << 22;
    c->num_dense = TL_CRITEO_SYNTH_MAX_DENSE;
    c->num_categorical = TL_CRITEO_SYNTH_MAX_CAT;
    memcpy(c->vocab_sizes, DEFAULT_VOCAB, sizeof DEFAULT_VOCAB);
    c->zipf_exponent = 1.05;
    c->hidden_dim = 4;
    c->ctr = 0.25;
    c->signal = 1.3;
}

static tl_status check_config(const tl_criteo_synth_config *c)
{
    const char *p = "tl_criteo_synth_config";
    if (c->num_examples < 0)
        return tl_error(TL_EINVAL, "%s.num_examples: must be >= 0 (got %lld)", p, (long long)c->num_examples);
    if (c->num_dense < 0 || c->num_dense > TL_CRITEO_SYNTH_MAX_DENSE)
        return tl_error(TL_EINVAL, "%s.num_dense: must be in 0..%d (got %d)", p, TL_CRITEO_SYNTH_MAX_DENSE,
                        c->num_dense);
    if (c->num_categorical < 0 || c->num_categorical > TL_CRITEO_SYNTH_MAX_CAT)
        return tl_error(TL_EINVAL, "%s.num_categorical: must be in 0..%d (got %d)", p, TL_CRITEO_SYNTH_MAX_CAT,
                        c->num_categorical);
    if (c->num_dense + c->num_categorical == 0)
        return tl_error(TL_EINVAL, "%s: num_dense and num_categorical are both 0; at least one feature is needed", p);
    for (int k = 0; k < c->num_categorical; k++)
        if (c->vocab_sizes[k] < 1 || c->vocab_sizes[k] > TL_CRITEO_SYNTH_MAX_VOCAB)
            return tl_error(TL_EINVAL, "%s.vocab_sizes[%d] (C%d): must be in 1..%lld (got %lld)", p, k, k + 1,
                            (long long)TL_CRITEO_SYNTH_MAX_VOCAB, (long long)c->vocab_sizes[k]);
    if (!(c->zipf_exponent >= 0.0 && c->zipf_exponent <= 10.0))
        return tl_error(TL_EINVAL, "%s.zipf_exponent: must be in [0, 10] (got %g)", p, c->zipf_exponent);
    if (c->hidden_dim < 1 || c->hidden_dim > TL_CRITEO_SYNTH_MAX_HIDDEN)
        return tl_error(TL_EINVAL, "%s.hidden_dim: must be in 1..%d (got %d)", p, TL_CRITEO_SYNTH_MAX_HIDDEN,
                        c->hidden_dim);
    if (!(c->ctr >= 0.001 && c->ctr <= 0.999))
        return tl_error(TL_EINVAL, "%s.ctr: must be in [0.001, 0.999] (got %g)", p, c->ctr);
    if (!(c->signal >= 0.0 && c->signal <= 20.0))
        return tl_error(TL_EINVAL, "%s.signal: must be in [0, 20] (got %g)", p, c->signal);
    return TL_OK;
}

/* ---- Zipf by rejection-inversion ------------------------------------------
 * W. Hörmann, G. Derflinger, "Rejection-inversion to generate variates from
 * monotone discrete distributions" (1996), as Apache Commons RNG writes it:
 * O(1) expected time and no table, so any vocabulary size costs the same. */

static double helper1(double x) /* log1p(x) / x */
{
    return fabs(x) > 1e-8 ? log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

static double helper2(double x) /* expm1(x) / x */
{
    return fabs(x) > 1e-8 ? expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
}

static double zh(double s, double x)
{
    return exp(-s * log(x));
}

static double zh_integral(double s, double x)
{
    double lx = log(x);
    return helper2((1.0 - s) * lx) * lx;
}

static double zh_integral_inverse(double s, double x)
{
    double t = x * (1.0 - s);
    if (t < -1.0)
        t = -1.0;
    return exp(helper1(t) * x);
}

/* A rank in [0, V) with P(r) ∝ (r + 1)^-s. */
static uint64_t zipf_rank(const zipf_feature *z, double s, tl_rng *r)
{
    for (;;) {
        double u = z->hxn + tl_rng_uniform_f64(r) * (z->hx1 - z->hxn);
        double x = zh_integral_inverse(s, u);
        double kd = floor(x + 0.5);
        if (kd < 1.0)
            kd = 1.0;
        else if (kd > (double)z->vocab)
            kd = (double)z->vocab;
        if (kd - x <= z->s || u >= zh_integral(s, kd + 0.5) - zh(s, kd))
            return (uint64_t)kd - 1;
    }
}

/* ---- the planted model ---------------------------------------------------- */

/* h_c[id] from (seed, c, id): hidden_dim uniforms of mean 0 and variance 1,
 * one 32-bit word each. Not normals: this runs 26 times per example, and
 * Box-Muller's log and cos made up most of the generator's time. */
static void hidden_embedding(const tl_criteo_synth *g, int c, uint64_t id, double *h)
{
    tl_rng r;
    tl_rng_init(&r, g->c.seed, OP_EMB, (uint64_t)c, id);
    for (int k = 0; k < g->c.hidden_dim; k++)
        h[k] = SQRT3 * (2.0 * ((double)tl_rng_u32(&r) + 0.5) * (1.0 / 4294967296.0) - 1.0);
}

/* Example `step` (a user index, or a calibration one above 2^63): its raw
 * fields, and the unnormalised score s. */
static double raw_example(const tl_criteo_synth *g, uint64_t step, double *x, int64_t *ids)
{
    const tl_criteo_synth_config *c = &g->c;
    double h[TL_CRITEO_SYNTH_MAX_CAT][TL_CRITEO_SYNTH_MAX_HIDDEN];
    double dense_term = 0.0, cat_term = 0.0, pair_term = 0.0;
    for (int j = 0; j < c->num_dense; j++) {
        tl_rng r;
        tl_rng_init(&r, c->seed, OP_EX, FIELD_DENSE + (uint64_t)j, step);
        double gj = g->mu[j] + g->sigma[j] * tl_rng_normal(&r);
        double v = gj > 0.0 ? floor(expm1(gj)) : 0.0;
        x[j] = v < MAX_X ? v : MAX_X;
        /* what the Criteo reader computes from the written integer */
        double t = (double)logf((float)x[j] + 1.0f);
        dense_term += g->w[j] * (t - g->t_mean[j]) * g->t_inv_std[j];
    }
    for (int k = 0; k < c->num_categorical; k++) {
        const zipf_feature *z = &g->cat[k];
        tl_rng r;
        tl_rng_init(&r, c->seed, OP_EX, FIELD_CAT + (uint64_t)k, step);
        uint64_t rank = zipf_rank(z, c->zipf_exponent, &r);
        uint64_t id = (rank * z->mult + z->offset) % z->vocab;
        ids[k] = (int64_t)id;
        hidden_embedding(g, k, id, h[k]);
        double d = 0.0;
        for (int e = 0; e < c->hidden_dim; e++)
            d += h[k][e] * g->u[k][e];
        cat_term += d;
    }
    for (int p = 0; p < g->num_pairs; p++) {
        double d = 0.0;
        for (int e = 0; e < c->hidden_dim; e++)
            d += h[2 * p][e] * h[2 * p + 1][e];
        pair_term += d;
    }
    double s = W_DENSE * dense_term;
    if (c->num_categorical > 0)
        s += W_CAT * cat_term / sqrt((double)c->num_categorical);
    if (g->num_pairs > 0)
        s += W_PAIR * pair_term / sqrt((double)c->hidden_dim * g->num_pairs);
    return s;
}

static double sigmoid(double z)
{
    return z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
}

static double logit_of(const tl_criteo_synth *g, double s)
{
    return g->bias + g->c.signal * (s - g->s_mean) * g->s_inv_std;
}

/* Calibration examples use steps 2^63 + i, which no user index (< 2^63) reaches. */
static uint64_t calib_step(int64_t i)
{
    return ((uint64_t)1 << 63) + (uint64_t)i;
}

/* Draws the model's parameters, then measures the dense standardisation, the
 * score's mean and std, and solves the bias, on CALIB_N examples. */
static tl_status calibrate(tl_criteo_synth *g)
{
    const tl_criteo_synth_config *c = &g->c;
    double *s = tl_alloc_array(CALIB_N, sizeof(double));
    if (s == NULL)
        return tl_error_oom();
    /* Pass 1: dense statistics (the model's weights are 0 meanwhile, and the
     * standardisation is the identity, so raw_example just draws). */
    double sum[TL_CRITEO_SYNTH_MAX_DENSE] = {0}, sum2[TL_CRITEO_SYNTH_MAX_DENSE] = {0};
    for (int j = 0; j < c->num_dense; j++)
        g->t_inv_std[j] = 1.0;
    double x[TL_CRITEO_SYNTH_MAX_DENSE];
    int64_t ids[TL_CRITEO_SYNTH_MAX_CAT];
    double w_saved[TL_CRITEO_SYNTH_MAX_DENSE];
    memcpy(w_saved, g->w, sizeof w_saved);
    memset(g->w, 0, sizeof g->w);
    for (int64_t i = 0; i < CALIB_N; i++) {
        s[i] = raw_example(g, calib_step(i), x, ids);
        for (int j = 0; j < c->num_dense; j++) {
            double t = (double)logf((float)x[j] + 1.0f);
            sum[j] += t;
            sum2[j] += t * t;
        }
    }
    memcpy(g->w, w_saved, sizeof w_saved);
    for (int j = 0; j < c->num_dense; j++) {
        double m = sum[j] / CALIB_N, var = sum2[j] / CALIB_N - m * m;
        g->t_mean[j] = m;
        g->t_inv_std[j] = var > 1e-12 ? 1.0 / sqrt(var) : 0.0; /* a constant feature carries nothing */
    }
    /* Pass 2: the score with the dense term in place. */
    double ms = 0.0, ms2 = 0.0;
    for (int64_t i = 0; i < CALIB_N; i++) {
        s[i] = raw_example(g, calib_step(i), x, ids);
        ms += s[i];
    }
    ms /= CALIB_N;
    for (int64_t i = 0; i < CALIB_N; i++)
        ms2 += (s[i] - ms) * (s[i] - ms);
    double sd = sqrt(ms2 / CALIB_N);
    g->s_mean = ms;
    g->s_inv_std = sd > 1e-12 ? 1.0 / sd : 0.0;
    /* The mean probability rises with the bias: bisect for ctr. */
    double lo = -60.0, hi = 60.0;
    for (int it = 0; it < 64 && hi - lo > 1e-12; it++) {
        g->bias = 0.5 * (lo + hi);
        double mp = 0.0;
        for (int64_t i = 0; i < CALIB_N; i++)
            mp += sigmoid(logit_of(g, s[i]));
        if (mp / CALIB_N < c->ctr)
            lo = g->bias;
        else
            hi = g->bias;
    }
    g->bias = 0.5 * (lo + hi);
    tl_free(s);
    return TL_OK;
}

static void draw_unit(tl_rng *r, double *v, int n)
{
    double n2 = 0.0;
    for (int i = 0; i < n; i++) {
        v[i] = tl_rng_normal(r);
        n2 += v[i] * v[i];
    }
    double inv = n2 > 0.0 ? 1.0 / sqrt(n2) : 0.0;
    for (int i = 0; i < n; i++)
        v[i] *= inv;
}

tl_status tl_criteo_synth_create(const tl_criteo_synth_config *c, tl_criteo_synth **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_synth_create: out is NULL");
    *out = NULL;
    if (c == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_synth_create: config is NULL");
    tl_status st = check_config(c);
    if (st != TL_OK)
        return st;
    tl_criteo_synth *g = tl_calloc(1, sizeof *g);
    if (g == NULL)
        return tl_error_oom();
    g->c = *c;
    tl_rng r;
    tl_rng_init(&r, c->seed, OP_MODEL, 0, 0);
    for (int k = 0; k < c->num_categorical; k++) {
        zipf_feature *z = &g->cat[k];
        double s = c->zipf_exponent;
        z->vocab = (uint64_t)c->vocab_sizes[k];
        z->hx1 = zh_integral(s, 1.5) - 1.0;
        z->hxn = zh_integral(s, (double)z->vocab + 0.5);
        z->s = 2.0 - zh_integral_inverse(s, zh_integral(s, 2.5) - zh(s, 2.0));
        z->mult = SCATTER_PRIME % z->vocab;
        z->offset = (((uint64_t)tl_rng_u32(&r) << 32) | tl_rng_u32(&r)) % z->vocab;
        draw_unit(&r, g->u[k], c->hidden_dim);
    }
    for (int j = 0; j < c->num_dense; j++) {
        g->mu[j] = -0.5 + 3.5 * tl_rng_uniform_f64(&r);
        g->sigma[j] = 0.5 + 1.5 * tl_rng_uniform_f64(&r);
    }
    draw_unit(&r, g->w, c->num_dense);
    g->num_pairs = c->num_categorical / 2 < MAX_PAIRS ? c->num_categorical / 2 : MAX_PAIRS;
    st = calibrate(g);
    if (st != TL_OK) {
        tl_criteo_synth_destroy(g);
        return st;
    }
    *out = g;
    return TL_OK;
}

void tl_criteo_synth_destroy(tl_criteo_synth *g)
{
    tl_free(g);
}

const tl_criteo_synth_config *tl_criteo_synth_get_config(const tl_criteo_synth *g)
{
    return g != NULL ? &g->c : NULL;
}

double tl_criteo_synth_bias(const tl_criteo_synth *g)
{
    return g != NULL ? g->bias : NAN;
}

/* One user example, unchecked. */
static void make_example(const tl_criteo_synth *g, int64_t index, float *dense, int64_t *ids, int32_t *label,
                         double *prob)
{
    double x[TL_CRITEO_SYNTH_MAX_DENSE];
    int64_t id[TL_CRITEO_SYNTH_MAX_CAT];
    double p = sigmoid(logit_of(g, raw_example(g, (uint64_t)index, x, id)));
    if (dense != NULL)
        for (int j = 0; j < g->c.num_dense; j++)
            dense[j] = (float)x[j];
    if (ids != NULL)
        memcpy(ids, id, (size_t)g->c.num_categorical * sizeof *ids);
    if (label != NULL) {
        tl_rng r;
        tl_rng_init(&r, g->c.seed, OP_EX, FIELD_LABEL, (uint64_t)index);
        *label = tl_rng_uniform_f64(&r) < p;
    }
    if (prob != NULL)
        *prob = p;
}

static tl_status check_range(const tl_criteo_synth *g, int64_t first, int64_t count, const char *fn)
{
    if (g == NULL)
        return tl_error(TL_EINVAL, "%s: the generator is NULL", fn);
    int64_t n = g->c.num_examples;
    if (first < 0 || count < 0 || first > n || count > n - first)
        return tl_error(TL_EINVAL, "%s: examples [%lld, %lld + %lld) are not within [0, num_examples = %lld)", fn,
                        (long long)first, (long long)first, (long long)count, (long long)n);
    return TL_OK;
}

tl_status tl_criteo_synth_example(const tl_criteo_synth *g, int64_t index, float *dense, int64_t *ids,
                                  int32_t *label, double *prob)
{
    if (g == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_synth_example: the generator is NULL");
    if (index < 0 || index >= g->c.num_examples)
        return tl_error(TL_EINVAL, "tl_criteo_synth_example: index must be in [0, num_examples = %lld) (got %lld)",
                        (long long)g->c.num_examples, (long long)index);
    make_example(g, index, dense, ids, label, prob);
    return TL_OK;
}

tl_status tl_criteo_synth_generate(const tl_criteo_synth *g, int64_t first, int64_t count, float *dense,
                                   int64_t *ids, int32_t *labels, double *probs)
{
    tl_status st = check_range(g, first, count, "tl_criteo_synth_generate");
    if (st != TL_OK)
        return st;
    int nd = g->c.num_dense, nc = g->c.num_categorical;
    for (int64_t i = 0; i < count; i++)
        make_example(g, first + i, dense != NULL ? dense + i * nd : NULL, ids != NULL ? ids + i * nc : NULL,
                     labels != NULL ? labels + i : NULL, probs != NULL ? probs + i : NULL);
    return TL_OK;
}

tl_status tl_criteo_synth_write_tsv(const tl_criteo_synth *g, const char *path, int64_t first, int64_t count)
{
    tl_status st = check_range(g, first, count, "tl_criteo_synth_write_tsv");
    if (st != TL_OK)
        return st;
    if (path == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_synth_write_tsv: path is NULL");
    if (g->c.num_dense != TL_CRITEO_SYNTH_MAX_DENSE || g->c.num_categorical != TL_CRITEO_SYNTH_MAX_CAT)
        return tl_error(TL_EINVAL,
                        "tl_criteo_synth_write_tsv: Criteo TSV has 13 dense and 26 categorical features; the "
                        "generator has num_dense %d and num_categorical %d",
                        g->c.num_dense, g->c.num_categorical);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return tl_error(TL_EIO, "%s: cannot create: %s", path, strerror(errno));
    for (int64_t i = 0; i < count; i++) {
        float dense[TL_CRITEO_SYNTH_MAX_DENSE];
        int64_t ids[TL_CRITEO_SYNTH_MAX_CAT];
        int32_t label;
        make_example(g, first + i, dense, ids, &label, NULL);
        fputc('0' + label, f);
        for (int j = 0; j < TL_CRITEO_SYNTH_MAX_DENSE; j++)
            fprintf(f, "\t%ld", (long)dense[j]); /* exact: below 2^24 */
        for (int k = 0; k < TL_CRITEO_SYNTH_MAX_CAT; k++)
            fprintf(f, "\t%llx", (unsigned long long)ids[k]);
        if (fputc('\n', f) == EOF)
            break;
    }
    int bad = ferror(f);
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad)
        return tl_error(TL_EIO, "%s: write failed: %s", path, strerror(e));
    return TL_OK;
}

tl_status tl_criteo_synth_oracle_auc(const tl_criteo_synth *g, int64_t first, int64_t count, double *auc)
{
    if (auc != NULL)
        *auc = NAN;
    tl_status st = check_range(g, first, count, "tl_criteo_synth_oracle_auc");
    if (st != TL_OK)
        return st;
    if (auc == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_synth_oracle_auc: auc is NULL");
    double *p = tl_alloc_array(count > 0 ? (size_t)count : 1, sizeof *p);
    int32_t *y = tl_alloc_array(count > 0 ? (size_t)count : 1, sizeof *y);
    if (p == NULL || y == NULL) {
        tl_free(p);
        tl_free(y);
        return tl_error_oom();
    }
    for (int64_t i = 0; i < count; i++)
        make_example(g, first + i, NULL, NULL, &y[i], &p[i]);
    *auc = tl_auc(p, y, count);
    tl_free(p);
    tl_free(y);
    return isnan(*auc) ? tl_last_status() : TL_OK;
}


tl_status tl_criteo_synth_load(const tl_criteo_synth *g, int64_t first, int64_t count, tl_labeled_data **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_synth_load: out is NULL");
    *out = NULL;
    if (g == NULL || first < 0 || count < 0 || first > g->c.num_examples - count)
        return tl_error(TL_EINVAL, "tl_criteo_synth_load: examples [%lld, %lld + %lld) are not in [0, %lld)",
                        (long long)first, (long long)first, (long long)count,
                        (long long)(g ? g->c.num_examples : 0));
    int nd = g->c.num_dense, nc = g->c.num_categorical;
    /* The ids go straight into the data's int64 ids: no float copy, so no
     * vocabulary is too large for them. */
    int64_t shape[1] = {nd};
    tl_labeled_data *d = tl_labeled_data_alloc(count, shape, 1, 2, nc);
    tl_status st = d == NULL ? tl_error_oom() : TL_OK;
    if (st == TL_OK) /* the raw integers, then the reader's transform in place */
        st = tl_criteo_synth_generate(g, first, count, nd ? d->features : NULL, d->ids, d->labels, NULL);
    for (int64_t i = 0; st == TL_OK && i < count * nd; i++)
        d->features[i] = logf(d->features[i] + 1.0f);
    if (st != TL_OK) {
        tl_labeled_data_destroy(d);
        return st;
    }
    *out = d;
    return TL_OK;
}

/* norm.c — layer norm and batch norm, forward and backward, and their
 * float64 twins. The summation orders are the ones norm.h documents. */
#include <math.h>

#include "../base/base_int.h"
#include "kernels.h"
#include "norm.h"

/* Channels of batch norm handled together: a float64 accumulator each per
 * statistic, on the stack (kernels allocate nothing). */
#define CHUNK 256

/* ---- layer norm ------------------------------------------------------------ */

/* Sum of a contiguous run in kernels.h's order: TL_K_LANES float64 partials. */
static double sum_run(int64_t n, const float *restrict x)
{
    double part[TL_K_LANES] = {0};
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            part[l] += (double)x[i + l];
    for (int l = 0; i < n; i++, l++)
        part[l] += (double)x[i];
    double s = 0.0;
    for (int l = 0; l < TL_K_LANES; l++)
        s += part[l];
    return s;
}

/* Sum of (x - mean)² over a run, in the same order. */
static double sq_dev_run(int64_t n, const float *restrict x, double mean)
{
    double part[TL_K_LANES] = {0};
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++) {
            double v = (double)x[i + l] - mean;
            part[l] += v * v;
        }
    for (int l = 0; i < n; i++, l++) {
        double v = (double)x[i] - mean;
        part[l] += v * v;
    }
    double s = 0.0;
    for (int l = 0; l < TL_K_LANES; l++)
        s += part[l];
    return s;
}

/* A row's mean and rsqrt(var + eps), two passes. */
static void row_stats(int64_t d, const float *restrict x, double eps, double *mean, double *rstd)
{
    double m = sum_run(d, x) / (double)d;
    *mean = m;
    *rstd = 1.0 / sqrt(sq_dev_run(d, x, m) / (double)d + eps);
}

TL_VECTOR_CLONES void tl_k_layer_norm(int64_t rows, int64_t d, double eps, const float *restrict x,
                                      const float *restrict gamma, const float *restrict beta, float *restrict y)
{
    TL_ASSERT(rows >= 0 && d >= 0);
    if (d == 0)
        return;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * d;
        float *restrict yr = y + r * d;
        double mean, rstd;
        row_stats(d, xr, eps, &mean, &rstd);
        int64_t j = 0;
        for (; j + TL_K_LANES <= d; j += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++)
                yr[j + l] = (float)(((double)xr[j + l] - mean) * rstd * (double)gamma[j + l] + (double)beta[j + l]);
        for (; j < d; j++)
            yr[j] = (float)(((double)xr[j] - mean) * rstd * (double)gamma[j] + (double)beta[j]);
    }
}

TL_VECTOR_CLONES void tl_k_layer_norm_grad(int64_t rows, int64_t d, double eps, const float *restrict x,
                                           const float *restrict gamma, const float *restrict dy, float *restrict dx,
                                           float *restrict dgamma, float *restrict dbeta, double *restrict work)
{
    TL_ASSERT(rows >= 0 && d >= 0);
    bool params = dgamma != NULL || dbeta != NULL;
    TL_ASSERT(!params || work != NULL || d == 0);
    if (d == 0)
        return;
    double *restrict accg = work, *restrict accb = params ? work + d : NULL;
    if (params)
        for (int64_t j = 0; j < 2 * d; j++)
            work[j] = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * d, *restrict dyr = dy + r * d;
        double mean, rstd;
        row_stats(d, xr, eps, &mean, &rstd);
        if (params) {
            int64_t j = 0;
            for (; j + TL_K_LANES <= d; j += TL_K_LANES)
                for (int l = 0; l < TL_K_LANES; l++) {
                    double g = (double)dyr[j + l];
                    accg[j + l] += g * (((double)xr[j + l] - mean) * rstd);
                    accb[j + l] += g;
                }
            for (; j < d; j++) {
                double g = (double)dyr[j];
                accg[j] += g * (((double)xr[j] - mean) * rstd);
                accb[j] += g;
            }
        }
        if (dx == NULL)
            continue;
        /* mean over the row of g = dy·gamma and of g·xhat, in the lanes' order. */
        double pg[TL_K_LANES] = {0}, pgx[TL_K_LANES] = {0};
        int64_t j = 0;
        for (; j + TL_K_LANES <= d; j += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++) {
                double g = (double)dyr[j + l] * (double)gamma[j + l];
                pg[l] += g;
                pgx[l] += g * (((double)xr[j + l] - mean) * rstd);
            }
        for (int l = 0; j < d; j++, l++) {
            double g = (double)dyr[j] * (double)gamma[j];
            pg[l] += g;
            pgx[l] += g * (((double)xr[j] - mean) * rstd);
        }
        double sg = 0.0, sgx = 0.0;
        for (int l = 0; l < TL_K_LANES; l++) {
            sg += pg[l];
            sgx += pgx[l];
        }
        double mg = sg / (double)d, mgx = sgx / (double)d;
        float *restrict dxr = dx + r * d;
        for (j = 0; j + TL_K_LANES <= d; j += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++) {
                double g = (double)dyr[j + l] * (double)gamma[j + l];
                double xhat = ((double)xr[j + l] - mean) * rstd;
                dxr[j + l] = (float)(rstd * (g - mg - xhat * mgx));
            }
        for (; j < d; j++) {
            double g = (double)dyr[j] * (double)gamma[j];
            double xhat = ((double)xr[j] - mean) * rstd;
            dxr[j] = (float)(rstd * (g - mg - xhat * mgx));
        }
    }
    for (int64_t j = 0; dgamma != NULL && j < d; j++)
        dgamma[j] = (float)accg[j];
    for (int64_t j = 0; dbeta != NULL && j < d; j++)
        dbeta[j] = (float)accb[j];
}

/* ---- batch norm: a chunk of channels, a tile of rows at a time --------------- */

#if defined(__GNUC__)
#define SPAN_INLINE static inline __attribute__((always_inline)) /* into each clone of its caller */
#else
#define SPAN_INLINE static inline
#endif

/* Rows per block of the statistics: a block of a chunk (at most 32 rows of
 * 256 channels, 32 KiB) is read from memory once and again from L1. */
#define STAT_BLOCK 32
/* Floats a tile holds at least, when a chunk is whole rows: 16 channels go
 * 4 rows a tile, so the inner loops run 64 floats, not 16. */
#define TILE_MIN 64
#define TILE_MAX (CHUNK + TILE_MIN)

/* Channels [c0, c0 + w) of x (rows, c), walked a tile of k rows at a time:
 * when the chunk is whole rows (w == c), k rows are t = k·w contiguous
 * floats, element i of a tile being channel i mod w. Rows past the last
 * whole tile go one at a time. Per-channel arrays are repeated k times
 * (repeat) to line up with a tile, and per-channel sums kept as t partials
 * (one per row of the tile) fold back in order (fold). */
typedef struct chunk {
    int64_t c, c0, w; /* row stride, first channel, channels */
    int64_t k, t;     /* rows and floats per tile */
} chunk;

static chunk chunk_of(int64_t c, int64_t c0, int64_t w)
{
    chunk ch = {c, c0, w, 1, w};
    if (w == c && w < TILE_MIN) {
        ch.k = (TILE_MIN + w - 1) / w;
        ch.t = ch.k * w;
    }
    return ch;
}

/* out may be v (in place: copy q > 0 reads only v[0, w)). */
SPAN_INLINE void repeat(const chunk *ch, const double *v, double *out)
{
    for (int64_t q = 0; q < ch->k; q++)
        for (int64_t j = 0; j < ch->w; j++)
            out[q * ch->w + j] = v[j];
}

/* out[j] = acc[j] + acc[w + j] + ... + acc[(k-1)·w + j], in that order. */
SPAN_INLINE void fold(const chunk *ch, const double *restrict acc, double *restrict out)
{
    for (int64_t j = 0; j < ch->w; j++)
        out[j] = acc[j];
    for (int64_t q = 1; q < ch->k; q++)
        for (int64_t j = 0; j < ch->w; j++)
            out[j] += acc[q * ch->w + j];
}

SPAN_INLINE void zero(int64_t n, double *restrict a)
{
    for (int64_t i = 0; i < n; i++)
        a[i] = 0.0;
}

/* The spans: n floats of a tile (n = t) or of one row (n = w), with the
 * repeated per-channel arrays. */
SPAN_INLINE void span_sum(int64_t n, const float *restrict x, double *restrict acc)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] += (double)x[i];
}

SPAN_INLINE void span_sq_dev(int64_t n, const float *restrict x, const double *restrict m, double *restrict acc)
{
    for (int64_t i = 0; i < n; i++) {
        double v = (double)x[i] - m[i];
        acc[i] += v * v;
    }
}

/* y = (x - m)·rstd·gamma + beta, then max(y, 0) when relu (a NaN stays NaN,
 * as tl_k_relu). */
SPAN_INLINE void span_normalise(int64_t n, const float *restrict x, const double *restrict m,
                                const double *restrict rstd, const double *restrict gm, const double *restrict bt,
                                bool relu, float *restrict y)
{
    if (relu) {
        for (int64_t i = 0; i < n; i++) {
            float v = (float)(((double)x[i] - m[i]) * rstd[i] * gm[i] + bt[i]);
            y[i] = v < 0.0f ? 0.0f : v;
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = (float)(((double)x[i] - m[i]) * rstd[i] * gm[i] + bt[i]);
    }
}

/* The gradient reaching the batch norm: dy without a fused ReLU, else dy
 * where the ReLU passed its input and 0 elsewhere (tl_k_relu_grad's rule),
 * written to gated. The ReLU's input is recomputed from x exactly as
 * span_normalise made it, so the gate is the forward's bit for bit and y is
 * not read. */
SPAN_INLINE const float *span_gate(int64_t n, bool relu, const float *restrict x, const double *restrict m,
                                   const double *restrict rstd, const double *restrict gm,
                                   const double *restrict bt, const float *restrict dy, float *restrict gated)
{
    if (!relu)
        return dy;
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(((double)x[i] - m[i]) * rstd[i] * gm[i] + bt[i]);
        float d = dy[i]; /* loaded whatever the branch, as tl_k_relu_grad, to vectorise */
        gated[i] = v > 0.0f ? d : 0.0f;
    }
    return gated;
}

SPAN_INLINE void span_grad_sums(int64_t n, const float *restrict x, const float *restrict g,
                                const double *restrict m, const double *restrict rstd, double *restrict s1,
                                double *restrict s2)
{
    for (int64_t i = 0; i < n; i++) {
        s1[i] += (double)g[i];
        s2[i] += (double)g[i] * (((double)x[i] - m[i]) * rstd[i]);
    }
}

/* dx = a·(g - s1 - xhat·s2), with s1 and s2 already divided by the rows. */
SPAN_INLINE void span_dx(int64_t n, const float *restrict x, const float *restrict g, const double *restrict m,
                         const double *restrict rstd, const double *restrict a, const double *restrict s1,
                         const double *restrict s2, float *restrict dx)
{
    for (int64_t i = 0; i < n; i++) {
        double xhat = ((double)x[i] - m[i]) * rstd[i];
        dx[i] = (float)(a[i] * ((double)g[i] - s1[i] - xhat * s2[i]));
    }
}

/* Per-channel mean and sum of squared deviations (var: M2, not yet divided
 * by rows) of a chunk in one pass over memory: each block of STAT_BLOCK
 * rows (the last may be shorter) gets its own mean and sum of squared
 * deviations, two passes over the block, and the blocks merge in order by
 * Chan, Golub and LeVeque's update (norm.h). rows > 0. */
SPAN_INLINE void chunk_stats(const chunk *ch, int64_t rows, const float *restrict x, double *restrict mean,
                             double *restrict var)
{
    double acc[TILE_MAX], bm[TILE_MAX], bq[CHUNK];
    int64_t n = 0, c = ch->c, c0 = ch->c0, w = ch->w, k = ch->k, t = ch->t;
    for (int64_t r0 = 0; r0 < rows; r0 += STAT_BLOCK) {
        int64_t nb = rows - r0 < STAT_BLOCK ? rows - r0 : STAT_BLOCK, r;
        zero(t, acc);
        for (r = r0; r + k <= r0 + nb; r += k)
            span_sum(t, x + r * c + c0, acc);
        for (; r < r0 + nb; r++)
            span_sum(w, x + r * c + c0, acc);
        fold(ch, acc, bm);
        for (int64_t j = 0; j < w; j++)
            bm[j] /= (double)nb; /* the block's mean */
        repeat(ch, bm, bm);      /* in place: copy q reads row 0 only */
        zero(t, acc);
        for (r = r0; r + k <= r0 + nb; r += k)
            span_sq_dev(t, x + r * c + c0, bm, acc);
        for (; r < r0 + nb; r++)
            span_sq_dev(w, x + r * c + c0, bm, acc);
        fold(ch, acc, bq);
        if (n == 0) {
            for (int64_t j = 0; j < w; j++) {
                mean[j] = bm[j];
                var[j] = bq[j];
            }
        } else {
            double total = (double)(n + nb), wb = (double)nb / total, wx = (double)n * (double)nb / total;
            for (int64_t j = 0; j < w; j++) {
                double delta = bm[j] - mean[j];
                mean[j] += delta * wb;
                var[j] += bq[j] + delta * delta * wx;
            }
        }
        n += nb;
    }
}

/* y of a chunk from its mean and rstd (w each), gamma and beta (all c). */
SPAN_INLINE void chunk_normalise(const chunk *ch, int64_t rows, const float *restrict x,
                                 const double *restrict mean, const double *restrict rstd,
                                 const float *restrict gamma, const float *restrict beta, bool relu,
                                 float *restrict y)
{
    double m[TILE_MAX], rs[TILE_MAX], gm[TILE_MAX], bt[TILE_MAX];
    int64_t c = ch->c, c0 = ch->c0, w = ch->w, k = ch->k, t = ch->t, r;
    for (int64_t j = 0; j < w; j++) {
        gm[j] = (double)gamma[c0 + j];
        bt[j] = (double)beta[c0 + j];
    }
    repeat(ch, mean, m);
    repeat(ch, rstd, rs);
    repeat(ch, gm, gm);
    repeat(ch, bt, bt);
    for (r = 0; r + k <= rows; r += k)
        span_normalise(t, x + r * c + c0, m, rs, gm, bt, relu, y + r * c + c0);
    for (; r < rows; r++)
        span_normalise(w, x + r * c + c0, m, rs, gm, bt, relu, y + r * c + c0);
}

/* The per-channel arrays of a chunk's backward pass, repeated over a tile:
 * the mean, rstd, and gamma and beta for the fused ReLU's gate. */
typedef struct grad_arrays {
    double m[TILE_MAX], rstd[TILE_MAX], gm[TILE_MAX], bt[TILE_MAX];
} grad_arrays;

SPAN_INLINE void grad_arrays_fill(const chunk *ch, const double *restrict mean, const double *restrict rstd,
                                  const float *restrict gamma, const float *restrict beta, grad_arrays *ga)
{
    for (int64_t j = 0; j < ch->w; j++) {
        ga->gm[j] = (double)gamma[ch->c0 + j];
        ga->bt[j] = beta != NULL ? (double)beta[ch->c0 + j] : 0.0;
    }
    repeat(ch, mean, ga->m);
    repeat(ch, rstd, ga->rstd);
    repeat(ch, ga->gm, ga->gm);
    repeat(ch, ga->bt, ga->bt);
}

/* s1 = sum g, s2 = sum g·xhat over the rows of a chunk (w each), with g dy
 * gated by the fused ReLU when relu: t partials, folded. */
SPAN_INLINE void chunk_grad_sums(const chunk *ch, int64_t rows, const float *restrict x, bool relu,
                                 const float *restrict dy, const grad_arrays *ga, double *restrict s1,
                                 double *restrict s2)
{
    double a1[TILE_MAX], a2[TILE_MAX];
    float gated[TILE_MAX];
    int64_t c = ch->c, c0 = ch->c0, w = ch->w, k = ch->k, t = ch->t, r;
    zero(t, a1);
    zero(t, a2);
    for (r = 0; r + k <= rows; r += k) {
        int64_t at = r * c + c0;
        const float *g = span_gate(t, relu, x + at, ga->m, ga->rstd, ga->gm, ga->bt, dy + at, gated);
        span_grad_sums(t, x + at, g, ga->m, ga->rstd, a1, a2);
    }
    for (; r < rows; r++) {
        int64_t at = r * c + c0;
        const float *g = span_gate(w, relu, x + at, ga->m, ga->rstd, ga->gm, ga->bt, dy + at, gated);
        span_grad_sums(w, x + at, g, ga->m, ga->rstd, a1, a2);
    }
    fold(ch, a1, s1);
    fold(ch, a2, s2);
}

TL_VECTOR_CLONES void tl_k_batch_norm_train(int64_t rows, int64_t c, double eps, const float *restrict x,
                                            const float *restrict gamma, const float *restrict beta, bool relu,
                                            float *restrict y, double *restrict mean, double *restrict var)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    if (rows == 0) {
        for (int64_t j = 0; j < c; j++)
            mean[j] = var[j] = NAN; /* 0/0, as tf.reduce_mean of nothing */
        return;
    }
    double rstd[CHUNK];
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        int64_t w = c - c0 < CHUNK ? c - c0 : CHUNK;
        chunk ch = chunk_of(c, c0, w);
        chunk_stats(&ch, rows, x, mean + c0, var + c0);
        for (int64_t j = 0; j < w; j++) {
            var[c0 + j] /= (double)rows;
            rstd[j] = 1.0 / sqrt(var[c0 + j] + eps);
        }
        chunk_normalise(&ch, rows, x, mean + c0, rstd, gamma, beta, relu, y);
    }
}

/* Channels [c0, c0 + w) of c as a chunk, w = min(CHUNK, c - c0), with
 * rstd[j] = 1/sqrt(var[c0 + j] + eps) for each. */
SPAN_INLINE chunk rstd_chunk(int64_t c, int64_t c0, const double *restrict var, double eps, double *restrict rstd)
{
    int64_t w = c - c0 < CHUNK ? c - c0 : CHUNK;
    for (int64_t j = 0; j < w; j++)
        rstd[j] = 1.0 / sqrt(var[c0 + j] + eps);
    return chunk_of(c, c0, w);
}

/* dx of a chunk: a·(g - s1/n - xhat·s2/n), a = gamma·rstd, with s1 and s2
 * the chunk's sums (w each) over the n rows of the whole batch. */
SPAN_INLINE void chunk_dx(const chunk *ch, int64_t rows, double n, const float *restrict x, bool relu,
                          const float *restrict dy, const float *restrict gamma, const grad_arrays *ga,
                          const double *restrict rstd, const double *restrict s1, const double *restrict s2,
                          float *restrict dx)
{
    double a[TILE_MAX], m1[TILE_MAX], m2[TILE_MAX];
    float gated[TILE_MAX];
    int64_t c = ch->c, c0 = ch->c0, w = ch->w, r;
    for (int64_t j = 0; j < w; j++) {
        a[j] = (double)gamma[c0 + j] * rstd[j];
        m1[j] = s1[j] / n;
        m2[j] = s2[j] / n;
    }
    repeat(ch, a, a);
    repeat(ch, m1, m1);
    repeat(ch, m2, m2);
    for (r = 0; r + ch->k <= rows; r += ch->k) {
        int64_t at = r * c + c0;
        const float *g = span_gate(ch->t, relu, x + at, ga->m, ga->rstd, ga->gm, ga->bt, dy + at, gated);
        span_dx(ch->t, x + at, g, ga->m, ga->rstd, a, m1, m2, dx + at);
    }
    for (; r < rows; r++) {
        int64_t at = r * c + c0;
        const float *g = span_gate(w, relu, x + at, ga->m, ga->rstd, ga->gm, ga->bt, dy + at, gated);
        span_dx(w, x + at, g, ga->m, ga->rstd, a, m1, m2, dx + at);
    }
}

TL_VECTOR_CLONES void tl_k_batch_norm_train_grad(int64_t rows, int64_t c, double eps, const float *restrict x,
                                                 const float *restrict gamma, const float *restrict beta,
                                                 const double *restrict mean, const double *restrict var, bool relu,
                                                 const float *restrict dy, float *restrict dx,
                                                 float *restrict dgamma, float *restrict dbeta)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    grad_arrays ga;
    double rstd[CHUNK], s1[TILE_MAX], s2[TILE_MAX];
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        chunk ch = rstd_chunk(c, c0, var, eps, rstd);
        grad_arrays_fill(&ch, mean + c0, rstd, gamma, relu ? beta : NULL, &ga);
        chunk_grad_sums(&ch, rows, x, relu, dy, &ga, s1, s2);
        for (int64_t j = 0; dbeta != NULL && j < ch.w; j++)
            dbeta[c0 + j] = (float)s1[j];
        for (int64_t j = 0; dgamma != NULL && j < ch.w; j++)
            dgamma[c0 + j] = (float)s2[j];
        if (dx != NULL)
            chunk_dx(&ch, rows, (double)rows, x, relu, dy, gamma, &ga, rstd, s1, s2, dx);
    }
}

/* ---- a batch split over cores: the pieces of the two kernels above ------------ */

TL_VECTOR_CLONES void tl_k_batch_norm_stats(int64_t rows, int64_t c, const float *restrict x, double *restrict mean,
                                            double *restrict m2)
{
    TL_ASSERT(rows > 0 && c >= 0);
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        int64_t w = c - c0 < CHUNK ? c - c0 : CHUNK;
        chunk ch = chunk_of(c, c0, w);
        chunk_stats(&ch, rows, x, mean + c0, m2 + c0);
    }
}

void tl_k_batch_norm_merge(int64_t c, int64_t n, double *restrict mean, double *restrict m2, int64_t nb,
                           const double *restrict mean_b, const double *restrict m2_b)
{
    TL_ASSERT(n > 0 && nb > 0);
    double total = (double)(n + nb), wb = (double)nb / total, wx = (double)n * (double)nb / total;
    for (int64_t j = 0; j < c; j++) {
        double delta = mean_b[j] - mean[j];
        mean[j] += delta * wb;
        m2[j] += m2_b[j] + delta * delta * wx;
    }
}

TL_VECTOR_CLONES void tl_k_batch_norm_apply(int64_t rows, int64_t c, double eps, const float *restrict x,
                                            const float *restrict gamma, const float *restrict beta,
                                            const double *restrict mean, const double *restrict var, bool relu,
                                            float *restrict y)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    double rstd[CHUNK];
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        chunk ch = rstd_chunk(c, c0, var, eps, rstd);
        chunk_normalise(&ch, rows, x, mean + c0, rstd, gamma, beta, relu, y);
    }
}

TL_VECTOR_CLONES void tl_k_batch_norm_grad_sums(int64_t rows, int64_t c, double eps, const float *restrict x,
                                                const float *restrict gamma, const float *restrict beta,
                                                const double *restrict mean, const double *restrict var, bool relu,
                                                const float *restrict dy, double *restrict s1, double *restrict s2)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    grad_arrays ga;
    double rstd[CHUNK];
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        chunk ch = rstd_chunk(c, c0, var, eps, rstd);
        grad_arrays_fill(&ch, mean + c0, rstd, gamma, relu ? beta : NULL, &ga);
        chunk_grad_sums(&ch, rows, x, relu, dy, &ga, s1 + c0, s2 + c0);
    }
}

TL_VECTOR_CLONES void tl_k_batch_norm_grad_apply(int64_t rows, int64_t c, double eps, int64_t n,
                                                 const float *restrict x, const float *restrict gamma,
                                                 const float *restrict beta, const double *restrict mean,
                                                 const double *restrict var, bool relu, const float *restrict dy,
                                                 const double *restrict s1, const double *restrict s2,
                                                 float *restrict dx)
{
    TL_ASSERT(rows >= 0 && c >= 0 && n > 0);
    grad_arrays ga;
    double rstd[CHUNK];
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        chunk ch = rstd_chunk(c, c0, var, eps, rstd);
        grad_arrays_fill(&ch, mean + c0, rstd, gamma, relu ? beta : NULL, &ga);
        chunk_dx(&ch, rows, (double)n, x, relu, dy, gamma, &ga, rstd, s1 + c0, s2 + c0, dx);
    }
}

TL_VECTOR_CLONES void tl_k_batch_norm_infer(int64_t rows, int64_t c, double eps, const float *restrict x,
                                            const float *restrict gamma, const float *restrict beta,
                                            const float *restrict mean, const float *restrict var, bool relu,
                                            float *restrict y)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    double m[CHUNK], rstd[CHUNK];
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        int64_t w = c - c0 < CHUNK ? c - c0 : CHUNK;
        chunk ch = chunk_of(c, c0, w);
        for (int64_t j = 0; j < w; j++) {
            m[j] = (double)mean[c0 + j];
            rstd[j] = 1.0 / sqrt((double)var[c0 + j] + eps);
        }
        chunk_normalise(&ch, rows, x, m, rstd, gamma, beta, relu, y);
    }
}

TL_VECTOR_CLONES void tl_k_batch_norm_infer_grad(int64_t rows, int64_t c, double eps, const float *restrict x,
                                                 const float *restrict gamma, const float *restrict mean,
                                                 const float *restrict var, const float *restrict dy,
                                                 float *restrict dx, float *restrict dgamma, float *restrict dbeta,
                                                 float *restrict dmean, float *restrict dvar)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    grad_arrays ga;
    double m[CHUNK], rstd[CHUNK], s1[CHUNK], s2[CHUNK], a[CHUNK];
    bool sums = dgamma != NULL || dbeta != NULL || dmean != NULL || dvar != NULL;
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        int64_t w = c - c0 < CHUNK ? c - c0 : CHUNK;
        chunk ch = chunk_of(c, c0, w);
        for (int64_t j = 0; j < w; j++) {
            m[j] = (double)mean[c0 + j];
            rstd[j] = 1.0 / sqrt((double)var[c0 + j] + eps);
            a[j] = (double)gamma[c0 + j] * rstd[j];
        }
        if (sums) {
            grad_arrays_fill(&ch, m, rstd, gamma, NULL, &ga);
            chunk_grad_sums(&ch, rows, x, false, dy, &ga, s1, s2);
            for (int64_t j = 0; dbeta != NULL && j < w; j++)
                dbeta[c0 + j] = (float)s1[j];
            for (int64_t j = 0; dgamma != NULL && j < w; j++)
                dgamma[c0 + j] = (float)s2[j];
            for (int64_t j = 0; dmean != NULL && j < w; j++)
                dmean[c0 + j] = (float)(-a[j] * s1[j]);
            for (int64_t j = 0; dvar != NULL && j < w; j++)
                dvar[c0 + j] = (float)(-0.5 * a[j] * rstd[j] * s2[j]);
        }
        for (int64_t r = 0; dx != NULL && r < rows; r++) {
            const float *restrict dyr = dy + r * c + c0;
            float *restrict dxr = dx + r * c + c0;
            for (int64_t j = 0; j < w; j++)
                dxr[j] = (float)((double)dyr[j] * a[j]);
        }
    }
}

void tl_k_moving_update(int64_t c, double momentum, double scale, const float *restrict stat,
                        const float *restrict moving, float *restrict upd)
{
    TL_ASSERT(c >= 0);
    const double k = (1.0 - momentum) * scale;
    for (int64_t j = 0; j < c; j++)
        upd[j] = (float)(k * ((double)stat[j] - (double)moving[j]));
}

/* ---- float64 twins: one accumulator, increasing index ------------------------ */

static void row_stats_ref(int64_t d, const double *restrict x, double eps, double *mean, double *rstd)
{
    double s = 0.0;
    for (int64_t j = 0; j < d; j++)
        s += x[j];
    double m = s / (double)d, v = 0.0;
    for (int64_t j = 0; j < d; j++)
        v += (x[j] - m) * (x[j] - m);
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)d + eps);
}

void tl_k_layer_norm_ref(int64_t rows, int64_t d, double eps, const double *restrict x,
                         const double *restrict gamma, const double *restrict beta, double *restrict y)
{
    for (int64_t r = 0; r < rows && d > 0; r++) {
        double mean, rstd;
        row_stats_ref(d, x + r * d, eps, &mean, &rstd);
        for (int64_t j = 0; j < d; j++)
            y[r * d + j] = (x[r * d + j] - mean) * rstd * gamma[j] + beta[j];
    }
}

void tl_k_layer_norm_grad_ref(int64_t rows, int64_t d, double eps, const double *restrict x,
                              const double *restrict gamma, const double *restrict dy, double *restrict dx,
                              double *restrict dgamma, double *restrict dbeta)
{
    for (int64_t j = 0; j < d; j++) {
        if (dgamma != NULL)
            dgamma[j] = 0.0;
        if (dbeta != NULL)
            dbeta[j] = 0.0;
    }
    for (int64_t r = 0; r < rows && d > 0; r++) {
        const double *xr = x + r * d, *dyr = dy + r * d;
        double mean, rstd, sg = 0.0, sgx = 0.0;
        row_stats_ref(d, xr, eps, &mean, &rstd);
        for (int64_t j = 0; j < d; j++) {
            double xhat = (xr[j] - mean) * rstd, g = dyr[j] * gamma[j];
            sg += g;
            sgx += g * xhat;
            if (dgamma != NULL)
                dgamma[j] += dyr[j] * xhat;
            if (dbeta != NULL)
                dbeta[j] += dyr[j];
        }
        for (int64_t j = 0; dx != NULL && j < d; j++) {
            double xhat = (xr[j] - mean) * rstd, g = dyr[j] * gamma[j];
            dx[r * d + j] = rstd * (g - sg / (double)d - xhat * (sgx / (double)d));
        }
    }
}

/* Channel k's mean and biased variance over the rows, two passes. */
static void channel_stats_ref(int64_t rows, int64_t c, int64_t k, const double *restrict x, double *mean,
                              double *var)
{
    double s = 0.0;
    for (int64_t r = 0; r < rows; r++)
        s += x[r * c + k];
    double m = s / (double)rows, v = 0.0;
    for (int64_t r = 0; r < rows; r++)
        v += (x[r * c + k] - m) * (x[r * c + k] - m);
    *mean = m;
    *var = v / (double)rows;
}

void tl_k_batch_norm_train_ref(int64_t rows, int64_t c, double eps, const double *restrict x,
                               const double *restrict gamma, const double *restrict beta, double *restrict y,
                               double *restrict mean_out, double *restrict var_out)
{
    for (int64_t k = 0; k < c; k++) {
        double mean, var;
        channel_stats_ref(rows, c, k, x, &mean, &var);
        double rstd = 1.0 / sqrt(var + eps);
        for (int64_t r = 0; r < rows; r++)
            y[r * c + k] = (x[r * c + k] - mean) * rstd * gamma[k] + beta[k];
        if (mean_out != NULL)
            mean_out[k] = mean;
        if (var_out != NULL)
            var_out[k] = var;
    }
}

void tl_k_batch_norm_train_grad_ref(int64_t rows, int64_t c, double eps, const double *restrict x,
                                    const double *restrict gamma, const double *restrict dy, double *restrict dx,
                                    double *restrict dgamma, double *restrict dbeta)
{
    const double n = (double)rows;
    for (int64_t k = 0; k < c; k++) {
        double mean, var, s1 = 0.0, s2 = 0.0;
        channel_stats_ref(rows, c, k, x, &mean, &var);
        double rstd = 1.0 / sqrt(var + eps);
        for (int64_t r = 0; r < rows; r++) {
            s1 += dy[r * c + k];
            s2 += dy[r * c + k] * ((x[r * c + k] - mean) * rstd);
        }
        if (dbeta != NULL)
            dbeta[k] = s1;
        if (dgamma != NULL)
            dgamma[k] = s2;
        for (int64_t r = 0; dx != NULL && r < rows; r++) {
            double xhat = (x[r * c + k] - mean) * rstd;
            dx[r * c + k] = gamma[k] * rstd * (dy[r * c + k] - s1 / n - xhat * (s2 / n));
        }
    }
}

void tl_k_batch_norm_infer_ref(int64_t rows, int64_t c, double eps, const double *restrict x,
                               const double *restrict gamma, const double *restrict beta,
                               const double *restrict mean, const double *restrict var, double *restrict y)
{
    for (int64_t k = 0; k < c; k++) {
        double rstd = 1.0 / sqrt(var[k] + eps);
        for (int64_t r = 0; r < rows; r++)
            y[r * c + k] = (x[r * c + k] - mean[k]) * rstd * gamma[k] + beta[k];
    }
}

void tl_k_batch_norm_infer_grad_ref(int64_t rows, int64_t c, double eps, const double *restrict x,
                                    const double *restrict gamma, const double *restrict mean,
                                    const double *restrict var, const double *restrict dy, double *restrict dx,
                                    double *restrict dgamma, double *restrict dbeta, double *restrict dmean,
                                    double *restrict dvar)
{
    for (int64_t k = 0; k < c; k++) {
        double rstd = 1.0 / sqrt(var[k] + eps), s1 = 0.0, s2 = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            s1 += dy[r * c + k];
            s2 += dy[r * c + k] * ((x[r * c + k] - mean[k]) * rstd);
            if (dx != NULL)
                dx[r * c + k] = dy[r * c + k] * (gamma[k] * rstd);
        }
        if (dbeta != NULL)
            dbeta[k] = s1;
        if (dgamma != NULL)
            dgamma[k] = s2;
        if (dmean != NULL)
            dmean[k] = -gamma[k] * rstd * s1;
        if (dvar != NULL)
            dvar[k] = -0.5 * gamma[k] * rstd * rstd * s2;
    }
}

void tl_k_moving_update_ref(int64_t c, double momentum, double scale, const double *restrict stat,
                            const double *restrict moving, double *restrict upd)
{
    for (int64_t j = 0; j < c; j++)
        upd[j] = (1.0 - momentum) * (stat[j] - moving[j]) * scale;
}

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

void tl_k_layer_norm(int64_t rows, int64_t d, double eps, const float *restrict x, const float *restrict gamma,
                     const float *restrict beta, float *restrict y)
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

void tl_k_layer_norm_grad(int64_t rows, int64_t d, double eps, const float *restrict x,
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

/* ---- batch norm: a chunk of channels at a time ------------------------------ */

/* Per-channel statistics of channels [c0, c0 + w): mean and the biased
 * variance over the rows, rows added in order, two passes. */
static void chunk_stats(int64_t rows, int64_t c, int64_t c0, int64_t w, const float *restrict x,
                        double *restrict mean, double *restrict var)
{
    for (int64_t j = 0; j < w; j++)
        mean[j] = var[j] = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * c + c0;
        int64_t j = 0;
        for (; j + TL_K_LANES <= w; j += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++)
                mean[j + l] += (double)xr[j + l];
        for (; j < w; j++)
            mean[j] += (double)xr[j];
    }
    for (int64_t j = 0; j < w; j++)
        mean[j] /= (double)rows;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * c + c0;
        int64_t j = 0;
        for (; j + TL_K_LANES <= w; j += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++) {
                double v = (double)xr[j + l] - mean[j + l];
                var[j + l] += v * v;
            }
        for (; j < w; j++) {
            double v = (double)xr[j] - mean[j];
            var[j] += v * v;
        }
    }
    for (int64_t j = 0; j < w; j++)
        var[j] /= (double)rows;
}

/* y = (x - mean)·rstd·gamma + beta over channels [c0, c0 + w). */
static void chunk_normalise(int64_t rows, int64_t c, int64_t c0, int64_t w, const float *restrict x,
                            const double *restrict mean, const double *restrict rstd, const float *restrict gamma,
                            const float *restrict beta, float *restrict y)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * c + c0;
        float *restrict yr = y + r * c + c0;
        int64_t j = 0;
        for (; j + TL_K_LANES <= w; j += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++)
                yr[j + l] = (float)(((double)xr[j + l] - mean[j + l]) * rstd[j + l] * (double)gamma[c0 + j + l] +
                                    (double)beta[c0 + j + l]);
        for (; j < w; j++)
            yr[j] = (float)(((double)xr[j] - mean[j]) * rstd[j] * (double)gamma[c0 + j] + (double)beta[c0 + j]);
    }
}

/* s1 = sum dy, s2 = sum dy·xhat over the rows, channels [c0, c0 + w). */
static void chunk_grad_sums(int64_t rows, int64_t c, int64_t c0, int64_t w, const float *restrict x,
                            const float *restrict dy, const double *restrict mean, const double *restrict rstd,
                            double *restrict s1, double *restrict s2)
{
    for (int64_t j = 0; j < w; j++)
        s1[j] = s2[j] = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * c + c0, *restrict dyr = dy + r * c + c0;
        int64_t j = 0;
        for (; j + TL_K_LANES <= w; j += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++) {
                double g = (double)dyr[j + l];
                s1[j + l] += g;
                s2[j + l] += g * (((double)xr[j + l] - mean[j + l]) * rstd[j + l]);
            }
        for (; j < w; j++) {
            double g = (double)dyr[j];
            s1[j] += g;
            s2[j] += g * (((double)xr[j] - mean[j]) * rstd[j]);
        }
    }
}

void tl_k_batch_norm_train(int64_t rows, int64_t c, double eps, const float *restrict x,
                           const float *restrict gamma, const float *restrict beta, float *restrict y,
                           float *restrict mean_out, float *restrict var_out)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    double mean[CHUNK], var[CHUNK], rstd[CHUNK];
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        int64_t w = c - c0 < CHUNK ? c - c0 : CHUNK;
        chunk_stats(rows, c, c0, w, x, mean, var);
        for (int64_t j = 0; j < w; j++)
            rstd[j] = 1.0 / sqrt(var[j] + eps);
        chunk_normalise(rows, c, c0, w, x, mean, rstd, gamma, beta, y);
        for (int64_t j = 0; mean_out != NULL && j < w; j++)
            mean_out[c0 + j] = (float)mean[j];
        for (int64_t j = 0; var_out != NULL && j < w; j++)
            var_out[c0 + j] = (float)var[j];
    }
}

void tl_k_batch_norm_train_grad(int64_t rows, int64_t c, double eps, const float *restrict x,
                                const float *restrict gamma, const float *restrict dy, float *restrict dx,
                                float *restrict dgamma, float *restrict dbeta, float *restrict mean_out,
                                float *restrict var_out)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    double mean[CHUNK], var[CHUNK], rstd[CHUNK], s1[CHUNK], s2[CHUNK], a[CHUNK];
    bool grads = dx != NULL || dgamma != NULL || dbeta != NULL;
    const double n = (double)rows;
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        int64_t w = c - c0 < CHUNK ? c - c0 : CHUNK;
        chunk_stats(rows, c, c0, w, x, mean, var);
        for (int64_t j = 0; mean_out != NULL && j < w; j++)
            mean_out[c0 + j] = (float)mean[j];
        for (int64_t j = 0; var_out != NULL && j < w; j++)
            var_out[c0 + j] = (float)var[j];
        if (!grads)
            continue;
        for (int64_t j = 0; j < w; j++)
            rstd[j] = 1.0 / sqrt(var[j] + eps);
        chunk_grad_sums(rows, c, c0, w, x, dy, mean, rstd, s1, s2);
        for (int64_t j = 0; dbeta != NULL && j < w; j++)
            dbeta[c0 + j] = (float)s1[j];
        for (int64_t j = 0; dgamma != NULL && j < w; j++)
            dgamma[c0 + j] = (float)s2[j];
        if (dx == NULL)
            continue;
        /* dx = a·(dy - s1/n - xhat·s2/n), a = gamma·rstd. */
        for (int64_t j = 0; j < w; j++) {
            a[j] = (double)gamma[c0 + j] * rstd[j];
            s1[j] /= n;
            s2[j] /= n;
        }
        for (int64_t r = 0; r < rows; r++) {
            const float *restrict xr = x + r * c + c0, *restrict dyr = dy + r * c + c0;
            float *restrict dxr = dx + r * c + c0;
            int64_t j = 0;
            for (; j + TL_K_LANES <= w; j += TL_K_LANES)
                for (int l = 0; l < TL_K_LANES; l++) {
                    double xhat = ((double)xr[j + l] - mean[j + l]) * rstd[j + l];
                    dxr[j + l] = (float)(a[j + l] * ((double)dyr[j + l] - s1[j + l] - xhat * s2[j + l]));
                }
            for (; j < w; j++) {
                double xhat = ((double)xr[j] - mean[j]) * rstd[j];
                dxr[j] = (float)(a[j] * ((double)dyr[j] - s1[j] - xhat * s2[j]));
            }
        }
    }
}

void tl_k_batch_norm_infer(int64_t rows, int64_t c, double eps, const float *restrict x,
                           const float *restrict gamma, const float *restrict beta, const float *restrict mean,
                           const float *restrict var, float *restrict y)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    double m[CHUNK], rstd[CHUNK];
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        int64_t w = c - c0 < CHUNK ? c - c0 : CHUNK;
        for (int64_t j = 0; j < w; j++) {
            m[j] = (double)mean[c0 + j];
            rstd[j] = 1.0 / sqrt((double)var[c0 + j] + eps);
        }
        chunk_normalise(rows, c, c0, w, x, m, rstd, gamma, beta, y);
    }
}

void tl_k_batch_norm_infer_grad(int64_t rows, int64_t c, double eps, const float *restrict x,
                                const float *restrict gamma, const float *restrict mean, const float *restrict var,
                                const float *restrict dy, float *restrict dx, float *restrict dgamma,
                                float *restrict dbeta, float *restrict dmean, float *restrict dvar)
{
    TL_ASSERT(rows >= 0 && c >= 0);
    double m[CHUNK], rstd[CHUNK], s1[CHUNK], s2[CHUNK], a[CHUNK];
    bool sums = dgamma != NULL || dbeta != NULL || dmean != NULL || dvar != NULL;
    for (int64_t c0 = 0; c0 < c; c0 += CHUNK) {
        int64_t w = c - c0 < CHUNK ? c - c0 : CHUNK;
        for (int64_t j = 0; j < w; j++) {
            m[j] = (double)mean[c0 + j];
            rstd[j] = 1.0 / sqrt((double)var[c0 + j] + eps);
            a[j] = (double)gamma[c0 + j] * rstd[j];
        }
        if (sums) {
            chunk_grad_sums(rows, c, c0, w, x, dy, m, rstd, s1, s2);
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
            int64_t j = 0;
            for (; j + TL_K_LANES <= w; j += TL_K_LANES)
                for (int l = 0; l < TL_K_LANES; l++)
                    dxr[j + l] = (float)((double)dyr[j + l] * a[j + l]);
            for (; j < w; j++)
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

/* losses.c — sparse softmax cross-entropy (per example and mean), sigmoid
 * cross-entropy with logits and mean squared error, their gradients, and the
 * float64 twins. */
#include <inttypes.h>
#include <math.h>

#include "../base/base_int.h"
#include "kernels.h"

/* ---- sparse softmax cross-entropy ---------------------------------------------- */

/* The first example whose label is outside [0, classes) is an error, as TF's
 * InvalidArgument. Checked before anything is written. */
static tl_status check_labels(const char *what, int64_t batch, int64_t classes, const int32_t *restrict labels)
{
    TL_ASSERT(batch >= 0 && classes >= 0);
    for (int64_t b = 0; b < batch; b++)
        if (labels[b] < 0 || labels[b] >= classes)
            return tl_error(TL_EINVAL,
                            "%s: example %" PRId64 " has label %" PRId32
                            ", which is outside the valid range of [0, %" PRId64 ")",
                            what, b, labels[b], classes);
    return TL_OK;
}

static float row_max(int64_t classes, const float *restrict z)
{
    float m = z[0];
    for (int64_t c = 1; c < classes; c++)
        m = z[c] > m ? z[c] : m;
    return m;
}

/* logsumexp(z) - z[label] of one row, in float64 from float32 exponentials. */
static double row_loss(int64_t classes, const float *restrict z, int32_t label)
{
    const float m = row_max(classes, z);
    double s = 0.0;
    for (int64_t c = 0; c < classes; c++)
        s += (double)expf(z[c] - m);
    return log(s) - ((double)z[label] - (double)m);
}

/* g = scale·(softmax(z) - onehot(label)) for one row. */
static void row_grad(int64_t classes, const float *restrict z, int32_t label, double scale, float *restrict g)
{
    const float m = row_max(classes, z);
    double s = 0.0;
    for (int64_t c = 0; c < classes; c++) {
        float e = expf(z[c] - m);
        g[c] = e;
        s += (double)e;
    }
    const float k = (float)(scale / s);
    int64_t c = 0;
    for (; c + TL_K_LANES <= classes; c += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            g[c + l] *= k;
    for (; c < classes; c++)
        g[c] *= k;
    g[label] -= (float)scale;
}

tl_status tl_k_softmax_xent(int64_t batch, int64_t classes, const float *restrict logits,
                            const int32_t *restrict labels, float *restrict loss)
{
    tl_status st = check_labels("sparse_softmax_cross_entropy", batch, classes, labels);
    if (st != TL_OK)
        return st;
    for (int64_t b = 0; b < batch; b++)
        loss[b] = (float)row_loss(classes, logits + b * classes, labels[b]);
    return TL_OK;
}

tl_status tl_k_softmax_xent_grad(int64_t batch, int64_t classes, const float *restrict logits,
                                 const int32_t *restrict labels, const float *restrict dloss,
                                 float *restrict dlogits)
{
    tl_status st = check_labels("sparse_softmax_cross_entropy_grad", batch, classes, labels);
    if (st != TL_OK)
        return st;
    for (int64_t b = 0; b < batch; b++)
        row_grad(classes, logits + b * classes, labels[b], (double)dloss[b], dlogits + b * classes);
    return TL_OK;
}

tl_status tl_k_softmax_xent_mean(int64_t batch, int64_t classes, const float *restrict logits,
                                 const int32_t *restrict labels, float *restrict loss)
{
    tl_status st = check_labels("sparse_softmax_cross_entropy", batch, classes, labels);
    if (st != TL_OK)
        return st;
    double s = 0.0;
    for (int64_t b = 0; b < batch; b++)
        s += row_loss(classes, logits + b * classes, labels[b]);
    loss[0] = (float)(s / (double)batch);
    return TL_OK;
}

tl_status tl_k_softmax_xent_mean_grad(int64_t batch, int64_t classes, const float *restrict logits,
                                      const int32_t *restrict labels, const float *restrict dloss,
                                      float *restrict dlogits)
{
    tl_status st = check_labels("sparse_softmax_cross_entropy_grad", batch, classes, labels);
    if (st != TL_OK)
        return st;
    const double scale = (double)dloss[0] / (double)batch;
    for (int64_t b = 0; b < batch; b++)
        row_grad(classes, logits + b * classes, labels[b], scale, dlogits + b * classes);
    return TL_OK;
}

/* The twins: softmax written out in float64. */
static double row_loss_ref(int64_t classes, const double *restrict z, int32_t label)
{
    double m = z[0];
    for (int64_t c = 1; c < classes; c++)
        if (z[c] > m)
            m = z[c];
    double s = 0.0;
    for (int64_t c = 0; c < classes; c++)
        s += exp(z[c] - m);
    return log(s) + m - z[label];
}

static void row_grad_ref(int64_t classes, const double *restrict z, int32_t label, double scale,
                         double *restrict g)
{
    double m = z[0];
    for (int64_t c = 1; c < classes; c++)
        if (z[c] > m)
            m = z[c];
    double s = 0.0;
    for (int64_t c = 0; c < classes; c++)
        s += exp(z[c] - m);
    for (int64_t c = 0; c < classes; c++)
        g[c] = scale * (exp(z[c] - m) / s - (c == label ? 1.0 : 0.0));
}

tl_status tl_k_softmax_xent_ref(int64_t batch, int64_t classes, const double *restrict logits,
                                const int32_t *restrict labels, double *restrict loss)
{
    tl_status st = check_labels("sparse_softmax_cross_entropy", batch, classes, labels);
    if (st != TL_OK)
        return st;
    for (int64_t b = 0; b < batch; b++)
        loss[b] = row_loss_ref(classes, logits + b * classes, labels[b]);
    return TL_OK;
}

tl_status tl_k_softmax_xent_grad_ref(int64_t batch, int64_t classes, const double *restrict logits,
                                     const int32_t *restrict labels, const double *restrict dloss,
                                     double *restrict dlogits)
{
    tl_status st = check_labels("sparse_softmax_cross_entropy_grad", batch, classes, labels);
    if (st != TL_OK)
        return st;
    for (int64_t b = 0; b < batch; b++)
        row_grad_ref(classes, logits + b * classes, labels[b], dloss[b], dlogits + b * classes);
    return TL_OK;
}

tl_status tl_k_softmax_xent_mean_ref(int64_t batch, int64_t classes, const double *restrict logits,
                                     const int32_t *restrict labels, double *restrict loss)
{
    tl_status st = check_labels("sparse_softmax_cross_entropy", batch, classes, labels);
    if (st != TL_OK)
        return st;
    double s = 0.0;
    for (int64_t b = 0; b < batch; b++)
        s += row_loss_ref(classes, logits + b * classes, labels[b]);
    loss[0] = s / (double)batch;
    return TL_OK;
}

tl_status tl_k_softmax_xent_mean_grad_ref(int64_t batch, int64_t classes, const double *restrict logits,
                                          const int32_t *restrict labels, const double *restrict dloss,
                                          double *restrict dlogits)
{
    tl_status st = check_labels("sparse_softmax_cross_entropy_grad", batch, classes, labels);
    if (st != TL_OK)
        return st;
    for (int64_t b = 0; b < batch; b++)
        row_grad_ref(classes, logits + b * classes, labels[b], dloss[0] / (double)batch, dlogits + b * classes);
    return TL_OK;
}

/* ---- sigmoid cross-entropy with logits --------------------------------------------- */

void tl_k_sigmoid_xent(int64_t n, const float *restrict x, const float *restrict z, float *restrict loss)
{
    TL_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++)
        loss[i] = fmaxf(x[i], 0.0f) - x[i] * z[i] + log1pf(expf(-fabsf(x[i])));
}

void tl_k_sigmoid_xent_grad(int64_t n, const float *restrict x, const float *restrict z,
                            const float *restrict dloss, float *restrict dx)
{
    TL_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++)
        dx[i] = dloss[i] * (1.0f / (1.0f + expf(-x[i])) - z[i]);
}

void tl_k_sigmoid_xent_ref(int64_t n, const double *restrict x, const double *restrict z, double *restrict loss)
{
    for (int64_t i = 0; i < n; i++)
        loss[i] = fmax(x[i], 0.0) - x[i] * z[i] + log1p(exp(-fabs(x[i])));
}

void tl_k_sigmoid_xent_grad_ref(int64_t n, const double *restrict x, const double *restrict z,
                                const double *restrict dloss, double *restrict dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dloss[i] * (1.0 / (1.0 + exp(-x[i])) - z[i]);
}

/* The int32 form: a (batch, 1) logit per example and a 0/1 label, as
 * TensorFlow's binary head. A label other than 0 or 1 is data the loss has no
 * meaning for: an error, as sparse softmax's out-of-range label. */
static tl_status check_binary(const char *what, int64_t n, const int32_t *restrict labels)
{
    TL_ASSERT(n >= 0);
    for (int64_t b = 0; b < n; b++)
        if (labels[b] != 0 && labels[b] != 1)
            return tl_error(TL_EINVAL, "%s: example %" PRId64 " has label %" PRId32 ", which is not 0 or 1", what,
                            b, labels[b]);
    return TL_OK;
}

tl_status tl_k_sigmoid_xent_i32(int64_t n, const float *restrict x, const int32_t *restrict labels,
                                float *restrict loss)
{
    tl_status st = check_binary("sigmoid_cross_entropy", n, labels);
    if (st != TL_OK)
        return st;
    /* The float form's expression with z = (float)label: the same bits. */
    for (int64_t i = 0; i < n; i++)
        loss[i] = fmaxf(x[i], 0.0f) - x[i] * (float)labels[i] + log1pf(expf(-fabsf(x[i])));
    return TL_OK;
}

tl_status tl_k_sigmoid_xent_i32_grad(int64_t n, const float *restrict x, const int32_t *restrict labels,
                                     const float *restrict dloss, float *restrict dx)
{
    tl_status st = check_binary("sigmoid_cross_entropy_grad", n, labels);
    if (st != TL_OK)
        return st;
    for (int64_t i = 0; i < n; i++)
        dx[i] = dloss[i] * (1.0f / (1.0f + expf(-x[i])) - (float)labels[i]);
    return TL_OK;
}

tl_status tl_k_sigmoid_xent_i32_ref(int64_t n, const double *restrict x, const int32_t *restrict labels,
                                    double *restrict loss)
{
    tl_status st = check_binary("sigmoid_cross_entropy", n, labels);
    if (st != TL_OK)
        return st;
    for (int64_t i = 0; i < n; i++)
        loss[i] = fmax(x[i], 0.0) - x[i] * (double)labels[i] + log1p(exp(-fabs(x[i])));
    return TL_OK;
}

tl_status tl_k_sigmoid_xent_i32_grad_ref(int64_t n, const double *restrict x, const int32_t *restrict labels,
                                         const double *restrict dloss, double *restrict dx)
{
    tl_status st = check_binary("sigmoid_cross_entropy_grad", n, labels);
    if (st != TL_OK)
        return st;
    for (int64_t i = 0; i < n; i++)
        dx[i] = dloss[i] * (1.0 / (1.0 + exp(-x[i])) - (double)labels[i]);
    return TL_OK;
}

/* ---- mean squared error ---------------------------------------------------------------- */

void tl_k_mse(int64_t n, const float *restrict p, const float *restrict t, float *restrict loss)
{
    TL_ASSERT(n >= 0);
    /* tl_k_sum's order over the float64 squares of exact differences. */
    double part[TL_K_LANES] = {0};
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++) {
            double d = (double)p[i + l] - (double)t[i + l];
            part[l] += d * d;
        }
    for (int l = 0; i < n; i++, l++) {
        double d = (double)p[i] - (double)t[i];
        part[l] += d * d;
    }
    double s = 0.0;
    for (int l = 0; l < TL_K_LANES; l++)
        s += part[l];
    loss[0] = (float)(s / (double)n);
}

void tl_k_mse_grad(int64_t n, const float *restrict p, const float *restrict t, const float *restrict dloss,
                   float *restrict dp)
{
    TL_ASSERT(n >= 0);
    if (n == 0)
        return;
    const float k = (float)(2.0 * (double)dloss[0] / (double)n);
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            dp[i + l] = k * (p[i + l] - t[i + l]);
    for (; i < n; i++)
        dp[i] = k * (p[i] - t[i]);
}

void tl_k_mse_ref(int64_t n, const double *restrict p, const double *restrict t, double *restrict loss)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (p[i] - t[i]) * (p[i] - t[i]);
    loss[0] = s / (double)n;
}

void tl_k_mse_grad_ref(int64_t n, const double *restrict p, const double *restrict t,
                       const double *restrict dloss, double *restrict dp)
{
    for (int64_t i = 0; i < n; i++)
        dp[i] = dloss[0] * 2.0 * (p[i] - t[i]) / (double)n;
}

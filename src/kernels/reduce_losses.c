/* reduce_losses.c — the reduce family's losses: softmax cross-entropy with
 * dense or sparse labels and label smoothing, the Huber loss and in_top_k,
 * their gradients and the float64 twins (reduce_losses.h). */
#include <float.h>
#include <inttypes.h>
#include <math.h>

#include "../base/base_int.h"
#include "kernels_int.h"
#include "reduce_losses.h"

/* ---- softmax cross-entropy ------------------------------------------------------------ */

static tl_status check_xent(const char *what, int64_t batch, int64_t classes, double smoothing)
{
    TL_ASSERT(batch >= 0 && classes >= 0);
    if (!(smoothing >= 0.0 && smoothing <= 1.0))
        return tl_error(TL_EINVAL, "%s: label_smoothing must be in [0, 1], got %g", what, smoothing);
    if (batch > 0 && classes == 0)
        return tl_error(TL_EINVAL, "%s: %" PRId64 " examples of 0 classes", what, batch);
    return TL_OK;
}

static int64_t label_of(bool wide, const void *restrict labels, int64_t b)
{
    return wide ? ((const int64_t *)labels)[b] : (int64_t)((const int32_t *)labels)[b];
}

/* The first example whose label is outside [0, classes), in tl_k_softmax_xent's words. */
static tl_status check_labels(const char *what, int64_t batch, int64_t classes, bool wide,
                              const void *restrict labels)
{
    for (int64_t b = 0; b < batch; b++) {
        int64_t l = label_of(wide, labels, b);
        if (l < 0 || l >= classes)
            return tl_error(TL_EINVAL,
                            "%s: example %" PRId64 " has label %" PRId64
                            ", which is outside the valid range of [0, %" PRId64 ")",
                            what, b, l, classes);
    }
    return TL_OK;
}

/* A row's labels: the dense row, or the one-hot of `hot` when dense is NULL;
 * l·a + b when smooth, in float32 as tf.compat.v1.losses does. */
typedef struct row_labels {
    const float *dense;
    int64_t hot;
    bool smooth;
    float a, b;
} row_labels;

static row_labels smoothed(double smoothing, int64_t classes)
{
    row_labels L = {NULL, 0, smoothing > 0.0, (float)(1.0 - smoothing), (float)smoothing / (float)classes};
    return L;
}

static inline float label_at(const row_labels *L, int64_t c)
{
    float l = L->dense != NULL ? L->dense[c] : (c == L->hot ? 1.0f : 0.0f);
    return L->smooth ? l * L->a + L->b : l;
}

/* losses.c's row maximum: the first maximum of the row. */
static float row_max(int64_t classes, const float *restrict z)
{
    float m = z[0];
    for (int64_t c = 1; c < classes; c++)
        m = z[c] > m ? z[c] : m;
    return m;
}

static double row_sumexp(int64_t classes, const float *restrict z, float m)
{
    double s = 0.0;
    for (int64_t c = 0; c < classes; c++)
        s += (double)expf(z[c] - m);
    return s;
}

static float dense_row_loss(int64_t classes, const float *restrict z, const row_labels *L)
{
    const float m = row_max(classes, z);
    const double lse = log(row_sumexp(classes, z, m));
    double acc = 0.0;
    for (int64_t c = 0; c < classes; c++)
        acc += (double)label_at(L, c) * (lse - ((double)z[c] - (double)m));
    return (float)acc;
}

/* dz = dl·(softmax(z) - l'), dlab = dl·(1 - s)·(-log_softmax(z)); either may be NULL. */
static void dense_row_grad(int64_t classes, const float *restrict z, const row_labels *L, double dl,
                           float *restrict dz, float *restrict dlab)
{
    const float m = row_max(classes, z);
    const double s = row_sumexp(classes, z, m);
    if (dz != NULL)
        for (int64_t c = 0; c < classes; c++)
            dz[c] = (float)(dl * ((double)expf(z[c] - m) / s - (double)label_at(L, c)));
    if (dlab != NULL) {
        const double k = dl * (L->smooth ? (double)L->a : 1.0), lse = log(s);
        for (int64_t c = 0; c < classes; c++)
            dlab[c] = (float)(k * (lse - ((double)z[c] - (double)m)));
    }
}

/* losses.c's row_loss and row_grad, the same arithmetic for int64 labels. */
static double sparse_row_loss(int64_t classes, const float *restrict z, int64_t label)
{
    const float m = row_max(classes, z);
    return log(row_sumexp(classes, z, m)) - ((double)z[label] - (double)m);
}

static void sparse_row_grad(int64_t classes, const float *restrict z, int64_t label, double scale,
                            float *restrict g)
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

tl_status tl_k_softmax_xent_dense(int64_t batch, int64_t classes, double smoothing, const float *restrict logits,
                                  const float *restrict labels, float *restrict loss)
{
    tl_status st = check_xent("softmax_cross_entropy", batch, classes, smoothing);
    if (st != TL_OK)
        return st;
    row_labels L = smoothed(smoothing, classes);
    for (int64_t b = 0; b < batch; b++) {
        L.dense = labels + b * classes;
        loss[b] = dense_row_loss(classes, logits + b * classes, &L);
    }
    return TL_OK;
}

tl_status tl_k_softmax_xent_dense_grad(int64_t batch, int64_t classes, double smoothing,
                                       const float *restrict logits, const float *restrict labels,
                                       const float *restrict dloss, float *restrict dlogits,
                                       float *restrict dlabels)
{
    tl_status st = check_xent("softmax_cross_entropy_grad", batch, classes, smoothing);
    if (st != TL_OK)
        return st;
    row_labels L = smoothed(smoothing, classes);
    for (int64_t b = 0; b < batch; b++) {
        L.dense = labels + b * classes;
        dense_row_grad(classes, logits + b * classes, &L, (double)dloss[b],
                       dlogits == NULL ? NULL : dlogits + b * classes, dlabels == NULL ? NULL : dlabels + b * classes);
    }
    return TL_OK;
}

tl_status tl_k_sparse_xent(int64_t batch, int64_t classes, double smoothing, const float *restrict logits,
                           bool wide, const void *restrict labels, float *restrict loss)
{
    const char *what = "sparse_softmax_cross_entropy";
    tl_status st = check_xent(what, batch, classes, smoothing);
    if (st != TL_OK)
        return st;
    if (smoothing == 0.0 && !wide)
        return tl_k_softmax_xent(batch, classes, logits, labels, loss);
    if ((st = check_labels(what, batch, classes, wide, labels)) != TL_OK)
        return st;
    row_labels L = smoothed(smoothing, classes);
    for (int64_t b = 0; b < batch; b++) {
        const float *restrict z = logits + b * classes;
        L.hot = label_of(wide, labels, b);
        loss[b] = L.smooth ? dense_row_loss(classes, z, &L) : (float)sparse_row_loss(classes, z, L.hot);
    }
    return TL_OK;
}

tl_status tl_k_sparse_xent_grad(int64_t batch, int64_t classes, double smoothing, const float *restrict logits,
                                bool wide, const void *restrict labels, const float *restrict dloss,
                                float *restrict dlogits)
{
    const char *what = "sparse_softmax_cross_entropy_grad";
    tl_status st = check_xent(what, batch, classes, smoothing);
    if (st != TL_OK)
        return st;
    if (smoothing == 0.0 && !wide)
        return tl_k_softmax_xent_grad(batch, classes, logits, labels, dloss, dlogits);
    if ((st = check_labels(what, batch, classes, wide, labels)) != TL_OK)
        return st;
    row_labels L = smoothed(smoothing, classes);
    for (int64_t b = 0; b < batch; b++) {
        const float *restrict z = logits + b * classes;
        L.hot = label_of(wide, labels, b);
        if (L.smooth)
            dense_row_grad(classes, z, &L, (double)dloss[b], dlogits + b * classes, NULL);
        else
            sparse_row_grad(classes, z, L.hot, (double)dloss[b], dlogits + b * classes);
    }
    return TL_OK;
}

/* The twins: labels smoothed in float64, softmax written out. labels_row
 * NULL: the one-hot of hot. */
static double ref_label(const double *labels_row, int64_t hot, double smoothing, int64_t classes, int64_t c)
{
    double l = labels_row != NULL ? labels_row[c] : (c == hot ? 1.0 : 0.0);
    return smoothing > 0.0 ? l * (1.0 - smoothing) + smoothing / (double)classes : l;
}

/* log sum exp of the row, max-shifted. */
static double ref_row_lse(int64_t classes, const double *z)
{
    double m = z[0], s = 0.0;
    for (int64_t c = 1; c < classes; c++)
        m = max_nan(m, z[c]);
    for (int64_t c = 0; c < classes; c++)
        s += exp(z[c] - m);
    return log(s) + m;
}

static void ref_xent(int64_t batch, int64_t classes, double smoothing, const double *logits, const double *labels,
                     bool wide, const void *hot, double *loss)
{
    for (int64_t b = 0; b < batch; b++) {
        const double *z = logits + b * classes, *l = labels == NULL ? NULL : labels + b * classes;
        int64_t h = hot == NULL ? -1 : label_of(wide, hot, b);
        double lse = ref_row_lse(classes, z), acc = 0.0;
        for (int64_t c = 0; c < classes; c++)
            acc += ref_label(l, h, smoothing, classes, c) * (lse - z[c]);
        loss[b] = acc;
    }
}

static void ref_xent_grad(int64_t batch, int64_t classes, double smoothing, const double *logits,
                          const double *labels, bool wide, const void *hot, const double *dloss, double *dlogits,
                          double *dlabels)
{
    for (int64_t b = 0; b < batch; b++) {
        const double *z = logits + b * classes, *l = labels == NULL ? NULL : labels + b * classes;
        int64_t h = hot == NULL ? -1 : label_of(wide, hot, b);
        double lse = ref_row_lse(classes, z);
        for (int64_t c = 0; c < classes; c++) {
            if (dlogits != NULL)
                dlogits[b * classes + c] = dloss[b] * (exp(z[c] - lse) - ref_label(l, h, smoothing, classes, c));
            if (dlabels != NULL)
                dlabels[b * classes + c] = dloss[b] * (1.0 - smoothing) * (lse - z[c]);
        }
    }
}

tl_status tl_k_softmax_xent_dense_ref(int64_t batch, int64_t classes, double smoothing,
                                      const double *restrict logits, const double *restrict labels,
                                      double *restrict loss)
{
    tl_status st = check_xent("softmax_cross_entropy", batch, classes, smoothing);
    if (st == TL_OK)
        ref_xent(batch, classes, smoothing, logits, labels, false, NULL, loss);
    return st;
}

tl_status tl_k_softmax_xent_dense_grad_ref(int64_t batch, int64_t classes, double smoothing,
                                           const double *restrict logits, const double *restrict labels,
                                           const double *restrict dloss, double *restrict dlogits,
                                           double *restrict dlabels)
{
    tl_status st = check_xent("softmax_cross_entropy_grad", batch, classes, smoothing);
    if (st == TL_OK)
        ref_xent_grad(batch, classes, smoothing, logits, labels, false, NULL, dloss, dlogits, dlabels);
    return st;
}

tl_status tl_k_sparse_xent_ref(int64_t batch, int64_t classes, double smoothing, const double *restrict logits,
                               bool wide, const void *restrict labels, double *restrict loss)
{
    const char *what = "sparse_softmax_cross_entropy";
    tl_status st = check_xent(what, batch, classes, smoothing);
    if (st == TL_OK && (st = check_labels(what, batch, classes, wide, labels)) == TL_OK)
        ref_xent(batch, classes, smoothing, logits, NULL, wide, labels, loss);
    return st;
}

tl_status tl_k_sparse_xent_grad_ref(int64_t batch, int64_t classes, double smoothing,
                                    const double *restrict logits, bool wide, const void *restrict labels,
                                    const double *restrict dloss, double *restrict dlogits)
{
    const char *what = "sparse_softmax_cross_entropy_grad";
    tl_status st = check_xent(what, batch, classes, smoothing);
    if (st == TL_OK && (st = check_labels(what, batch, classes, wide, labels)) == TL_OK)
        ref_xent_grad(batch, classes, smoothing, logits, NULL, wide, labels, dloss, dlogits, NULL);
    return st;
}

/* ---- Huber ------------------------------------------------------------------------------ */

static tl_status check_delta(const char *what, int64_t n, double delta)
{
    TL_ASSERT(n >= 0);
    /* Range first: converting a double beyond FLT_MAX to float is undefined. */
    if (!(delta > 0.0 && delta <= FLT_MAX && (float)delta > 0.0f))
        return tl_error(TL_EINVAL, "%s: delta must be a positive finite float32 number, got %g", what, delta);
    return TL_OK;
}

tl_status tl_k_huber(int64_t n, double delta, const float *restrict p, const float *restrict t,
                     float *restrict loss)
{
    tl_status st = check_delta("huber", n, delta);
    if (st != TL_OK)
        return st;
    const float d = (float)delta;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(p[i] - t[i]), q = a <= d ? a : d;
        loss[i] = 0.5f * (q * q) + d * (a - q);
    }
    return TL_OK;
}

tl_status tl_k_huber_grad(int64_t n, double delta, const float *restrict p, const float *restrict t,
                          const float *restrict dloss, float *restrict dp, float *restrict dt)
{
    tl_status st = check_delta("huber_grad", n, delta);
    if (st != TL_OK)
        return st;
    const float d = (float)delta;
    for (int64_t i = 0; i < n; i++) {
        float x = p[i] - t[i], g = dloss[i] * (x > d ? d : x < -d ? -d : x);
        if (dp != NULL)
            dp[i] = g;
        if (dt != NULL)
            dt[i] = -g;
    }
    return TL_OK;
}

tl_status tl_k_huber_ref(int64_t n, double delta, const double *restrict p, const double *restrict t,
                         double *restrict loss)
{
    tl_status st = check_delta("huber", n, delta);
    if (st != TL_OK)
        return st;
    for (int64_t i = 0; i < n; i++) {
        double x = p[i] - t[i];
        loss[i] = fabs(x) <= delta ? 0.5 * x * x : delta * (fabs(x) - 0.5 * delta);
    }
    return TL_OK;
}

tl_status tl_k_huber_grad_ref(int64_t n, double delta, const double *restrict p, const double *restrict t,
                              const double *restrict dloss, double *restrict dp, double *restrict dt)
{
    tl_status st = check_delta("huber_grad", n, delta);
    if (st != TL_OK)
        return st;
    for (int64_t i = 0; i < n; i++) {
        double x = p[i] - t[i], g = dloss[i] * fmin(fmax(x, -delta), delta);
        if (dp != NULL)
            dp[i] = g;
        if (dt != NULL)
            dt[i] = -g;
    }
    return TL_OK;
}

/* ---- in_top_k --------------------------------------------------------------------------- */

static tl_status check_k(int64_t batch, int64_t classes, int64_t k)
{
    TL_ASSERT(batch >= 0 && classes >= 0);
    if (k < 0)
        return tl_error(TL_EINVAL, "in_top_k: k must be >= 0, got %" PRId64, k);
    return TL_OK;
}

tl_status tl_k_in_top_k(int64_t batch, int64_t classes, int64_t k, const float *restrict predictions, bool wide,
                        const void *restrict targets, float *restrict out)
{
    tl_status st = check_k(batch, classes, k);
    if (st != TL_OK)
        return st;
    for (int64_t b = 0; b < batch; b++) {
        const float *restrict row = predictions + b * classes;
        int64_t t = label_of(wide, targets, b), more = 0;
        bool in = false;
        if (t >= 0 && t < classes && isfinite(row[t])) {
            for (int64_t c = 0; c < classes && more < k; c++)
                more += row[c] > row[t];
            in = more < k;
        }
        out[b] = in ? 1.0f : 0.0f;
    }
    return TL_OK;
}

tl_status tl_k_in_top_k_ref(int64_t batch, int64_t classes, int64_t k, const double *restrict predictions,
                            bool wide, const void *restrict targets, double *restrict out)
{
    tl_status st = check_k(batch, classes, k);
    if (st != TL_OK)
        return st;
    for (int64_t b = 0; b < batch; b++) {
        const double *row = predictions + b * classes;
        int64_t t = label_of(wide, targets, b), more = 0;
        if (t < 0 || t >= classes || !isfinite(row[t])) {
            out[b] = 0.0;
            continue;
        }
        for (int64_t c = 0; c < classes; c++)
            if (row[c] > row[t])
                more++;
        out[b] = more < k ? 1.0 : 0.0;
    }
    return TL_OK;
}

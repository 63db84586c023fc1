/*
 * reduce_axes.h — the kernels of the reduce family (src/graph/ops_reduce.c):
 * sums, means, maxima, minima and logsumexp over any set of axes, arg max /
 * arg min, softmax and log-softmax along an axis, softmax cross-entropy with
 * dense or sparse labels and label smoothing, the Huber loss and in_top_k,
 * each with the kernels its gradient needs and a float64 twin (`_ref`).
 *
 * The conventions are kernels.h's: row-major float32, caller-allocated
 * outputs, `restrict`, nothing allocated, fixed-order float64 sums, two tiers
 * of failure. Integer outputs and labels are int32, or int64 where `wide` is
 * true (the graph's TL_I64: two float-sized slots per element).
 *
 * ---- reductions over axes
 *
 * x has `rank` dimensions `shape` (rank <= TL_K_AXES_MAX_RANK, sizes >= 0)
 * and bit d of `axes` says axis d is reduced; y holds the product of the kept
 * dimensions, in x's row-major order of them (keepdims only changes the
 * shape the graph gives y, never its bytes). The geometry is normalised
 * first: axes of size 1 are dropped and neighbouring axes that are both
 * reduced or both kept are merged, so contiguous reduced axes become the
 * (outer, reduced, inner) blocks of tl_k_sum_axis; other sets leave
 * alternating kept and reduced blocks, walked by a general strided loop.
 * The innermost merged block decides the order of every sum (fixed, so the
 * same inputs give the same bits):
 *
 *  - innermost block kept (inner > 1 contiguous outputs): each output adds
 *    its terms in increasing row-major order of the reduced axes into one
 *    float64 accumulator — tl_k_sum_axis' strided order;
 *  - innermost block reduced (runs of L contiguous terms): each run is summed
 *    as tl_k_sum does (TL_K_LANES float64 partials, term i into partial
 *    i mod TL_K_LANES, partials added in order), and the runs' sums are added
 *    in increasing row-major order of the other reduced axes into one float64
 *    accumulator.
 *
 * So reduced axes that are contiguous give tl_k_sum_axis' bits, and all axes
 * tl_k_sum's. Sums and means are rounded once to float32; a mean divides the
 * float64 sum by the count first. Maxima and minima propagate NaN (a NaN
 * among the terms gives NaN), as XLA's max and min do; an empty reduction
 * gives 0 (sum), NaN (mean), -inf (max), +inf (min), -inf (logsumexp).
 *
 * logsumexp is tf.reduce_logsumexp: with m the maximum of the terms, and
 * m replaced by 0 where it is not finite (TF's quirk: a +inf term gives +inf
 * and a row of -inf gives -inf, not NaN), y = log(sum exp(x - m)) + m, the
 * exponentials float32 (expf) summed in float64 in increasing row-major order
 * of the reduced axes (one accumulator, in both orders above).
 *
 * Gradients: sum and mean broadcast dy back (mean divides by the count in
 * float64, rounded once). max and min use TF's _MaxGrad / _MinGrad: the
 * gradient is shared equally among the terms equal to the output y,
 * dx = (x == y ? 1 : 0) / count(x == y) · dy in float32 (a NaN output
 * matches nothing: 0 / 0, so NaN reaches every term, as TF). logsumexp's is
 * dy · exp(x - m) / sum exp(x - m), m and the sum recomputed as the forward
 * pass does.
 */
#ifndef TL_KERNELS_REDUCE_AXES_H
#define TL_KERNELS_REDUCE_AXES_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels.h"

#define TL_K_AXES_MAX_RANK 8

void tl_k_reduce_sum_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                          float *restrict y);
void tl_k_reduce_sum_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                              double *restrict y);
void tl_k_reduce_mean_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                           float *restrict y);
void tl_k_reduce_mean_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                               double *restrict y);
void tl_k_reduce_max_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                          float *restrict y);
void tl_k_reduce_max_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                              double *restrict y);
void tl_k_reduce_min_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                          float *restrict y);
void tl_k_reduce_min_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                              double *restrict y);
void tl_k_logsumexp_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                         float *restrict y);
void tl_k_logsumexp_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                             double *restrict y);

/* dx (x's shape) from dy (y's). */
void tl_k_reduce_sum_axes_grad(int rank, const int64_t *shape, uint32_t axes, const float *restrict dy,
                               float *restrict dx);
void tl_k_reduce_sum_axes_grad_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict dy,
                                   double *restrict dx);
void tl_k_reduce_mean_axes_grad(int rank, const int64_t *shape, uint32_t axes, const float *restrict dy,
                                float *restrict dx);
void tl_k_reduce_mean_axes_grad_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict dy,
                                    double *restrict dx);
/* max's and min's alike: y is the forward output (the max or the min). */
void tl_k_reduce_extreme_axes_grad(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                                   const float *restrict y, const float *restrict dy, float *restrict dx);
void tl_k_reduce_extreme_axes_grad_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                                       const double *restrict y, const double *restrict dy, double *restrict dx);
void tl_k_logsumexp_axes_grad(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                              const float *restrict dy, float *restrict dx);
/* The twin takes the forward output: dx = dy · exp(x - y). */
void tl_k_logsumexp_axes_grad_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                                  const double *restrict y, const double *restrict dy, double *restrict dx);

/* ---- arg max / arg min --------------------------------------------------------
 *
 * x viewed as (outer, axis, inner); idx (outer, inner) the index along the
 * axis of the largest (smallest) element, int64 when wide, else int32. Ties
 * give the first index, as TF. NaN counts as larger (smaller) than every
 * number, so the first NaN's index is returned — the element
 * tl_k_reduce_max_axes returns (NaN), as numpy's argmax.
 *
 * Errors: TL_EINVAL when the axis is empty and there is something to
 * index (TF: "Reduction axis 0 is empty"); nothing is written.
 */
tl_status tl_k_argmax(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, bool wide,
                      void *restrict idx);
tl_status tl_k_argmin(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, bool wide,
                      void *restrict idx);
tl_status tl_k_argmax_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x,
                          int64_t *restrict idx);
tl_status tl_k_argmin_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x,
                          int64_t *restrict idx);

/* ---- softmax and log-softmax along an axis --------------------------------------
 *
 * x, y (outer, axis, inner), normalised along the middle axis. With m the
 * maximum along the axis (float32), e = expf(x - m) and s the float64 sum of
 * the e in increasing index: softmax y = e / s, log_softmax
 * y = (x - m) - log s, both in float64 and rounded once. The shift keeps
 * logits of 1e4 finite. A NaN, or a row whose maximum is infinite, gives
 * NaN, as TF.
 *
 * Backward from the output y, as TF's _SoftmaxGrad and _LogSoftmaxGrad:
 * softmax dx = (dy - sum(dy·y)) · y, log_softmax dx = dy - exp(y)·sum(dy),
 * the sums float64 in increasing index.
 */
void tl_k_softmax(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, float *restrict y);
void tl_k_softmax_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x, double *restrict y);
void tl_k_softmax_grad(int64_t outer, int64_t axis, int64_t inner, const float *restrict y,
                       const float *restrict dy, float *restrict dx);
void tl_k_softmax_grad_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict y,
                           const double *restrict dy, double *restrict dx);
void tl_k_log_softmax(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, float *restrict y);
void tl_k_log_softmax_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x,
                          double *restrict y);
void tl_k_log_softmax_grad(int64_t outer, int64_t axis, int64_t inner, const float *restrict y,
                           const float *restrict dy, float *restrict dx);
void tl_k_log_softmax_grad_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict y,
                               const double *restrict dy, double *restrict dx);

/* ---- softmax cross-entropy --------------------------------------------------------
 *
 * logits (batch, classes); loss (batch). With smoothing s > 0 the labels l
 * become l' = l·(1 - s) + s / classes, in float32 as
 * tf.compat.v1.losses.softmax_cross_entropy computes them
 * (l·(float)(1 - s) + (float)s / (float)classes); with s == 0 they are used
 * as given. loss[b] = sum over c of l'[c]·(log sum exp(z - m) - (z[c] - m)),
 * m the row maximum, the exponentials expf summed in float64 and the loss
 * terms added in float64, classes in order.
 *
 * Gradients, as TF's SoftmaxCrossEntropyWithLogits: dlogits =
 * dloss·(softmax(z) - l'), which is the gradient only where each row of l'
 * sums to 1 (TF's documented condition on labels; it holds for one-hot or
 * probability rows, smoothed or not); dlabels = -dloss·log_softmax(z)·(1 - s),
 * the exact gradient (the loss is linear in the labels).
 *
 * Errors: TL_EINVAL when s is not in [0, 1] (NaN included); nothing is
 * written.
 */
tl_status tl_k_softmax_xent_dense(int64_t batch, int64_t classes, double smoothing, const float *restrict logits,
                                  const float *restrict labels, float *restrict loss);
tl_status tl_k_softmax_xent_dense_ref(int64_t batch, int64_t classes, double smoothing,
                                      const double *restrict logits, const double *restrict labels,
                                      double *restrict loss);
/* dlogits and dlabels (batch, classes), overwritten; either may be NULL. */
tl_status tl_k_softmax_xent_dense_grad(int64_t batch, int64_t classes, double smoothing,
                                       const float *restrict logits, const float *restrict labels,
                                       const float *restrict dloss, float *restrict dlogits,
                                       float *restrict dlabels);
tl_status tl_k_softmax_xent_dense_grad_ref(int64_t batch, int64_t classes, double smoothing,
                                           const double *restrict logits, const double *restrict labels,
                                           const double *restrict dloss, double *restrict dlogits,
                                           double *restrict dlabels);

/*
 * The same with integer labels (batch), int64 when wide, else int32: l is
 * one-hot. With s == 0 the loss and gradient are tl_k_softmax_xent's, bit
 * for bit (int32 labels call it; int64 labels run the same arithmetic); with
 * s > 0 they are tl_k_softmax_xent_dense's on the one-hot labels, bit for bit.
 *
 * Errors: TL_EINVAL when s is not in [0, 1], or when a label is outside
 * [0, classes), naming the first such example and its label as
 * tl_k_softmax_xent does ("sparse_softmax_cross_entropy: example 3 has label
 * 7, which is outside the valid range of [0, 5)"); nothing is written.
 */
tl_status tl_k_sparse_xent(int64_t batch, int64_t classes, double smoothing, const float *restrict logits,
                           bool wide, const void *restrict labels, float *restrict loss);
tl_status tl_k_sparse_xent_ref(int64_t batch, int64_t classes, double smoothing, const double *restrict logits,
                               bool wide, const void *restrict labels, double *restrict loss);
tl_status tl_k_sparse_xent_grad(int64_t batch, int64_t classes, double smoothing, const float *restrict logits,
                                bool wide, const void *restrict labels, const float *restrict dloss,
                                float *restrict dlogits);
tl_status tl_k_sparse_xent_grad_ref(int64_t batch, int64_t classes, double smoothing,
                                    const double *restrict logits, bool wide, const void *restrict labels,
                                    const double *restrict dloss, double *restrict dlogits);

/* ---- Huber loss ---------------------------------------------------------------------
 *
 * Elementwise over n: x = p - t, loss = 0.5·x² if |x| <= delta, else
 * delta·(|x| - 0.5·delta), computed as tf.compat.v1.losses.huber_loss does in
 * float32 (q = min(|x|, delta), loss = 0.5·q·q + delta·(|x| - q), delta
 * rounded to float32). dp = dloss·clip(x, -delta, delta), dt = -dp.
 *
 * Errors: TL_EINVAL when delta is not a positive finite number; nothing is
 * written.
 */
tl_status tl_k_huber(int64_t n, double delta, const float *restrict p, const float *restrict t,
                     float *restrict loss);
tl_status tl_k_huber_ref(int64_t n, double delta, const double *restrict p, const double *restrict t,
                         double *restrict loss);
/* dp and dt (n), overwritten; either may be NULL. */
tl_status tl_k_huber_grad(int64_t n, double delta, const float *restrict p, const float *restrict t,
                          const float *restrict dloss, float *restrict dp, float *restrict dt);
tl_status tl_k_huber_grad_ref(int64_t n, double delta, const double *restrict p, const double *restrict t,
                              const double *restrict dloss, double *restrict dp, double *restrict dt);

/* ---- in_top_k -----------------------------------------------------------------------
 *
 * predictions (batch, classes), targets (batch) int64 when wide else int32;
 * out[b] = 1 when target t = targets[b] is in [0, classes), predictions[b, t]
 * is finite, and fewer than k classes have a prediction strictly greater than
 * it; else 0. So classes tied at the k-th value all count as in the top k,
 * and an out-of-range target gives 0, as TF's InTopK kernel.
 *
 * Errors: TL_EINVAL when k < 0; nothing is written.
 */
tl_status tl_k_in_top_k(int64_t batch, int64_t classes, int64_t k, const float *restrict predictions, bool wide,
                        const void *restrict targets, float *restrict out);
tl_status tl_k_in_top_k_ref(int64_t batch, int64_t classes, int64_t k, const double *restrict predictions,
                            bool wide, const void *restrict targets, double *restrict out);

#endif /* TL_KERNELS_REDUCE_AXES_H */

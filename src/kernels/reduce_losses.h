/*
 * reduce_losses.h — the losses of the reduce family (src/graph/ops_reduce.c):
 * softmax cross-entropy with dense or sparse labels and label smoothing, the
 * Huber loss and in_top_k, each with the kernels its gradient needs and a
 * float64 twin (`_ref`). The reductions, arg max / arg min and softmax are in
 * reduce_axes.h.
 *
 * The conventions are kernels.h's: row-major float32, caller-allocated
 * outputs, `restrict`, nothing allocated, fixed-order float64 sums, two tiers
 * of failure. Integer labels and targets are int32, or int64 where `wide` is
 * true (the graph's TL_I64: two float-sized slots per element).
 */
#ifndef TL_KERNELS_REDUCE_LOSSES_H
#define TL_KERNELS_REDUCE_LOSSES_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels.h"

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

#endif /* TL_KERNELS_REDUCE_LOSSES_H */

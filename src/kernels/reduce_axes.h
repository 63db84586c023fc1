/*
 * reduce_axes.h — the kernels of the reduce family (src/graph/ops_reduce.c):
 * sums, means, maxima, minima and logsumexp over any set of axes, arg max /
 * arg min, softmax and log-softmax along an axis, each with the kernels its
 * gradient needs and a float64 twin (`_ref`). The family's losses are in
 * reduce_losses.h.
 *
 * The conventions are kernels.h's: row-major float32, caller-allocated
 * outputs, `restrict`, nothing allocated, fixed-order float64 sums, two tiers
 * of failure. Integer outputs are int32, or int64 where `wide` is true (the
 * graph's TL_I64: two float-sized slots per element).
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

#endif /* TL_KERNELS_REDUCE_AXES_H */

/*
 * kernels.h — the CPU compute kernels a step program runs: GEMM, bias and
 * activations, losses, reductions, concat / slice, dropout and DLRM's pairwise
 * dot, each with the kernels its gradient needs.
 *
 * Conventions shared by every kernel here:
 *
 *  - Buffers are row-major float32, sizes are int64_t, and every output is
 *    allocated by the caller. A kernel allocates nothing and keeps no state:
 *    it runs inside the device loop, where the step program has planned every
 *    buffer at compile time. Where a kernel needs room it says so and takes it
 *    from the caller.
 *  - Pointers are `restrict`: an output never overlaps an input (the buffer
 *    planner gives each tensor its own range). A buffer of zero elements may be
 *    NULL.
 *  - Forward kernels write their output; backward kernels (`_grad`) overwrite
 *    theirs unless a parameter (`beta`, `accumulate`) says otherwise. A
 *    gradient reaching a tensor from several consumers is summed with
 *    tl_k_accumulate.
 *  - Every fast kernel has a reference twin (`_ref`): float64 in, float64 out,
 *    the obvious loops, nothing clever. Tests compare each fast kernel with its
 *    twin, and each backward twin with central finite differences of the
 *    forward twin.
 *  - Two tiers of failure, as STYLE.md: what depends on run-time data or on a
 *    geometry computed from user shapes (a label, a dropout rate, GEMM sizes,
 *    a slice window) returns a tl_status with a message naming the value and
 *    the allowed range, and leaves the outputs untouched; a negative element
 *    count can only come from a bug in the caller and is a TL_ASSERT.
 *  - Deterministic: no threads (a caller may run a tl_k_gemm in pieces on
 *    several, below), no atomics, and every sum adds its terms in an
 *    order fixed by the code (stated at each reduction), so the same inputs
 *    give the same bits on the same machine. Loops are written in blocks of
 *    TL_K_LANES independent elements so gcc -O2 vectorises them (its cheap
 *    cost model at -O2 only vectorises loops whose trip count it knows).
 *
 * GEMM goes through CBLAS (OpenBLAS). OpenBLAS starts its own thread pool by
 * default; the runtime pins one BLAS thread per device worker — each device is
 * already a thread, and a pool per device would oversubscribe the cores — by
 * calling tl_k_blas_single_thread() once before the workers start. Tests do
 * the same.
 *
 * A dense layer y = relu(x·W + b) and its gradients, x (B, in), W (in, out):
 *
 *     tl_k_matmul(false, false, B, out, in, 1.0f, x, W, 0.0f, z);   // z = x·W
 *     tl_k_bias_add(B, out, z, b, h);
 *     tl_k_relu(B * out, h, y);
 *     ...
 *     tl_k_relu_grad(B * out, y, dy, dh);                  // from the output y
 *     tl_k_bias_add_grad(B, out, dh, db);                   // column sums, rows in order
 *     tl_k_matmul(false, true, B, in, out, 1.0f, dh, W, 0.0f, dx);   // dx = dh·Wᵀ
 *     tl_k_matmul(true, false, in, out, B, 1.0f, x, dh, 0.0f, dW);   // dW = xᵀ·dh
 *
 * (tl_k_matmul_grad makes the last two calls for any transpose flags.)
 */
#ifndef TL_KERNELS_H
#define TL_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "tpuloop/base.h"
#include "tpuloop/rng.h"

/* Elements per block of the vectorisable loops. */
#define TL_K_LANES 8

/* Pins OpenBLAS to one thread (openblas_set_num_threads(1)). Call once per
 * process before device workers start; not thread-safe. */
void tl_k_blas_single_thread(void);

/* ---- matmul ----------------------------------------------------------------
 *
 * C = alpha·op(A)·op(B) + beta·C with op(A) (m, k), op(B) (k, n), C (m, n),
 * all contiguous row-major: A is stored (m, k), or (k, m) when trans_a; B is
 * (k, n), or (n, k) when trans_b. With beta == 0, C is only written (NaN in it
 * does not leak through), as BLAS defines. k == 0 gives C = beta·C.
 *
 * Errors: TL_EINVAL when m, n or k is negative or above what the BLAS integer
 * holds (INT32_MAX for OpenBLAS without ILP64); C is untouched.
 */
tl_status tl_k_matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *restrict a, const float *restrict b, float beta, float *restrict c);
void tl_k_matmul_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                     const double *restrict a, const double *restrict b, double beta, double *restrict c);

/*
 * The gradients of C = alpha·op(A)·op(B) given dC (m, n): dA (A's stored
 * shape) and dB (B's stored shape), each written as dX = dX_new + beta·dX
 * (beta 0: overwrite, 1: accumulate, as a shared weight's gradient wants).
 * Either of da, db may be NULL to skip it. For the dense layer (no
 * transposes) this is dA = alpha·dC·Bᵀ and dB = alpha·Aᵀ·dC.
 *
 * Errors: as tl_k_matmul.
 */
tl_status tl_k_matmul_grad(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                           const float *restrict a, const float *restrict b, const float *restrict dc,
                           float beta, float *restrict da, float *restrict db);
void tl_k_matmul_grad_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                          const double *restrict a, const double *restrict b, const double *restrict dc,
                          double beta, double *restrict da, double *restrict db);

/*
 * A GEMM as a value, C = alpha·op(A)·op(B) + beta·C with tl_k_matmul's
 * layouts, for a caller that runs it in pieces on several threads (a
 * device's intra-op threads, graph/exec.c). tl_k_gemm_parts says into how
 * many pieces (at most max_parts) it splits with the bits of the whole call:
 * 1 when any piece would be too small for that (or for the split to pay).
 * Piece `part` of nparts then writes its own rows (or columns) of C, and the
 * pieces may run at once. tl_k_gemm_check is tl_k_matmul's check of the
 * sizes; check before splitting. tl_k_matmul_grad_gemms gives the GEMMs of
 * tl_k_matmul_grad (each only when its output is not NULL).
 */
typedef struct tl_k_gemm {
    bool ta, tb;
    int64_t m, n, k;
    float alpha;
    const float *a, *b;
    float beta;
    float *c;
} tl_k_gemm;

tl_status tl_k_gemm_check(const tl_k_gemm *g);
int tl_k_gemm_parts(const tl_k_gemm *g, int max_parts);
void tl_k_gemm_part(const tl_k_gemm *g, int part, int nparts);
/* The rows [*r0, *r1) and columns [*c0, *c1) of C that piece `part` writes. */
void tl_k_gemm_piece(const tl_k_gemm *g, int part, int nparts, int64_t *r0, int64_t *r1, int64_t *c0, int64_t *c1);
void tl_k_matmul_grad_gemms(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                            const float *a, const float *b, const float *dc, float beta, float *da, float *db,
                            tl_k_gemm *gda, tl_k_gemm *gdb);

/* ---- bias, activations, accumulation --------------------------------------
 *
 * Elementwise kernels over n elements. Backward kernels of sigmoid, tanh and
 * relu take the forward OUTPUT y, as TensorFlow's SigmoidGrad / TanhGrad /
 * ReluGrad do: sigmoid' = y(1 - y), tanh' = 1 - y², relu' = (y > 0), so
 * relu'(0) = 0. (relu's y > 0 iff x > 0, so x may be passed instead.) relu
 * passes NaN through, as XLA's max does.
 */

/* y[r, c] = x[r, c] + bias[c]; x, y (rows, cols), bias (cols). */
void tl_k_bias_add(int64_t rows, int64_t cols, const float *restrict x, const float *restrict bias,
                   float *restrict y);
void tl_k_bias_add_ref(int64_t rows, int64_t cols, const double *restrict x, const double *restrict bias,
                       double *restrict y);
/* dbias[c] = sum over r of dy[r, c], rows 0..rows-1 in order into a float64
 * accumulator (tl_k_sum_axis(1, rows, cols)). The gradient of x is dy itself. */
void tl_k_bias_add_grad(int64_t rows, int64_t cols, const float *restrict dy, float *restrict dbias);
void tl_k_bias_add_grad_ref(int64_t rows, int64_t cols, const double *restrict dy, double *restrict dbias);

/*
 * A dense layer's epilogue on a block of its GEMM's output, for a caller
 * that runs the GEMM in pieces (tl_k_gemm_parts) and finishes each piece
 * while it is in cache: the columns [c0, c1) of every row of y (rows, ld),
 * in place, become y + bias[c] and, with relu, relu of that: the bits of
 * tl_k_bias_add then tl_k_relu. Its gradient on the same columns: dy, in
 * place, gated by y > 0 when relu (tl_k_relu_grad's rule, y the output),
 * and dbias[c] (when not NULL) its column sums, rows in order into float64
 * accumulators: the bits of tl_k_bias_add_grad.
 */
void tl_k_bias_relu_cols(int64_t rows, int64_t ld, int64_t c0, int64_t c1, const float *restrict bias, bool relu,
                         float *y);
void tl_k_bias_relu_grad_cols(int64_t rows, int64_t ld, int64_t c0, int64_t c1, const float *restrict y, bool relu,
                              float *restrict dy, float *restrict dbias);

void tl_k_relu(int64_t n, const float *restrict x, float *restrict y);
void tl_k_relu_ref(int64_t n, const double *restrict x, double *restrict y);
void tl_k_relu_grad(int64_t n, const float *restrict y, const float *restrict dy, float *restrict dx);
void tl_k_relu_grad_ref(int64_t n, const double *restrict y, const double *restrict dy, double *restrict dx);
/* A residual sum and its ReLU in one pass (the compiler's fusion of
 * relu(a + b), program.h): y = relu(a + b), the bits of tl_k_relu of the
 * float32 sum. Backward, dx0 = dx1 = (y > 0 ? dy : 0), tl_k_relu_grad's
 * rule, to both terms (either may be NULL). */
void tl_k_add_relu(int64_t n, const float *restrict a, const float *restrict b, float *restrict y);
void tl_k_add_relu_grad(int64_t n, const float *restrict y, const float *restrict dy, float *restrict dx0,
                        float *restrict dx1);

void tl_k_sigmoid(int64_t n, const float *restrict x, float *restrict y);
void tl_k_sigmoid_ref(int64_t n, const double *restrict x, double *restrict y);
void tl_k_sigmoid_grad(int64_t n, const float *restrict y, const float *restrict dy, float *restrict dx);
void tl_k_sigmoid_grad_ref(int64_t n, const double *restrict y, const double *restrict dy, double *restrict dx);

void tl_k_tanh(int64_t n, const float *restrict x, float *restrict y);
void tl_k_tanh_ref(int64_t n, const double *restrict x, double *restrict y);
void tl_k_tanh_grad(int64_t n, const float *restrict y, const float *restrict dy, float *restrict dx);
void tl_k_tanh_grad_ref(int64_t n, const double *restrict y, const double *restrict dy, double *restrict dx);

/* acc[i] += x[i]: summing the gradients a tensor gets from several consumers. */
void tl_k_accumulate(int64_t n, const float *restrict x, float *restrict acc);
void tl_k_accumulate_ref(int64_t n, const double *restrict x, double *restrict acc);

/* ---- dropout ----------------------------------------------------------------
 *
 * TensorFlow's dropout: y = x · scale · keep with scale = 1 / (1 - rate) and
 * keep = (u >= rate), u uniform in [0, 1). As in TF, where rate is a Python
 * float, scale is worked out in float64 and rounded to float32, and u is a
 * float32 compared with rate rounded to float32. Element i draws u from
 * 32-bit word offset + i of the stream (tl_rng_uniform: 24 bits), whatever
 * position *stream is at, so the mask is a pure function of the stream — the
 * caller initialises it at (seed, op, replica, step) — and of the element's
 * global index (offset lets a partition of a tensor draw the same bits as the
 * whole). The mask (n) is kept as 0 / 1 bytes in caller memory for the
 * backward pass, dx = dy · scale · mask.
 *
 * Errors: TL_EINVAL when rate is not in [0, 1) (NaN included); nothing is
 * written.
 */
tl_status tl_k_dropout(int64_t n, double rate, const tl_rng *stream, uint64_t offset, const float *restrict x,
                       float *restrict y, uint8_t *restrict mask);
/* The twin seeks to each element's word on its own and scales in float64. */
tl_status tl_k_dropout_ref(int64_t n, double rate, const tl_rng *stream, uint64_t offset,
                           const double *restrict x, double *restrict y, uint8_t *restrict mask);
tl_status tl_k_dropout_grad(int64_t n, double rate, const uint8_t *restrict mask, const float *restrict dy,
                            float *restrict dx);
tl_status tl_k_dropout_grad_ref(int64_t n, double rate, const uint8_t *restrict mask, const double *restrict dy,
                                double *restrict dx);

/* ---- losses -----------------------------------------------------------------
 *
 * Sparse softmax cross-entropy (TF's sparse_softmax_cross_entropy_with_logits):
 * logits (batch, classes), labels (batch) int32, loss (batch) with
 * loss[b] = logsumexp(z_b) - z_b[label_b], computed as log(sum exp(z - max))
 * - (z[label] - max) so no exp overflows; the row sum of exponentials is a
 * float64 accumulator over classes in order. The gradient with respect to the
 * logits is dloss[b] · (softmax(z_b) - onehot(label_b)); the backward kernel
 * recomputes softmax from the logits, so nothing is kept between the passes.
 * The _mean kernels are the scalar mean over the batch (per-example losses
 * added in example order in float64) and its gradient, scaled by dloss / batch;
 * an empty batch gives NaN, as tf.reduce_mean.
 *
 * Errors: TL_EINVAL when a label is outside [0, classes), naming the first
 * such example and its label (TF raises InvalidArgument); labels are checked
 * before anything is written.
 */
tl_status tl_k_softmax_xent(int64_t batch, int64_t classes, const float *restrict logits,
                            const int32_t *restrict labels, float *restrict loss);
tl_status tl_k_softmax_xent_ref(int64_t batch, int64_t classes, const double *restrict logits,
                                const int32_t *restrict labels, double *restrict loss);
/* dlogits (batch, classes) from dloss (batch). */
tl_status tl_k_softmax_xent_grad(int64_t batch, int64_t classes, const float *restrict logits,
                                 const int32_t *restrict labels, const float *restrict dloss,
                                 float *restrict dlogits);
tl_status tl_k_softmax_xent_grad_ref(int64_t batch, int64_t classes, const double *restrict logits,
                                     const int32_t *restrict labels, const double *restrict dloss,
                                     double *restrict dlogits);
/* loss (1). */
tl_status tl_k_softmax_xent_mean(int64_t batch, int64_t classes, const float *restrict logits,
                                 const int32_t *restrict labels, float *restrict loss);
tl_status tl_k_softmax_xent_mean_ref(int64_t batch, int64_t classes, const double *restrict logits,
                                     const int32_t *restrict labels, double *restrict loss);
/* dlogits (batch, classes) from dloss (1). */
tl_status tl_k_softmax_xent_mean_grad(int64_t batch, int64_t classes, const float *restrict logits,
                                      const int32_t *restrict labels, const float *restrict dloss,
                                      float *restrict dlogits);
tl_status tl_k_softmax_xent_mean_grad_ref(int64_t batch, int64_t classes, const double *restrict logits,
                                          const int32_t *restrict labels, const double *restrict dloss,
                                          double *restrict dlogits);

/*
 * Sigmoid cross-entropy with logits x and targets z (TF's
 * sigmoid_cross_entropy_with_logits), elementwise over n:
 * loss = max(x, 0) - x·z + log(1 + exp(-|x|)), which never overflows;
 * dx = dloss · (sigmoid(x) - z). (The targets' gradient, -dloss·x, is not
 * provided: targets are data.)
 */
void tl_k_sigmoid_xent(int64_t n, const float *restrict x, const float *restrict z, float *restrict loss);
void tl_k_sigmoid_xent_ref(int64_t n, const double *restrict x, const double *restrict z, double *restrict loss);
void tl_k_sigmoid_xent_grad(int64_t n, const float *restrict x, const float *restrict z,
                            const float *restrict dloss, float *restrict dx);
void tl_k_sigmoid_xent_grad_ref(int64_t n, const double *restrict x, const double *restrict z,
                                const double *restrict dloss, double *restrict dx);

/*
 * The same loss with int32 labels (n), each 0 or 1: TensorFlow's binary head,
 * one logit per example. loss and dx as above with z = label, in the same
 * float32 expression, so a 0/1 label gives the float form's bits.
 *
 * Errors: TL_EINVAL when a label is neither 0 nor 1, naming the first such
 * example and its label; labels are checked before anything is written.
 */
tl_status tl_k_sigmoid_xent_i32(int64_t n, const float *restrict x, const int32_t *restrict labels,
                                float *restrict loss);
tl_status tl_k_sigmoid_xent_i32_ref(int64_t n, const double *restrict x, const int32_t *restrict labels,
                                    double *restrict loss);
tl_status tl_k_sigmoid_xent_i32_grad(int64_t n, const float *restrict x, const int32_t *restrict labels,
                                     const float *restrict dloss, float *restrict dx);
tl_status tl_k_sigmoid_xent_i32_grad_ref(int64_t n, const double *restrict x, const int32_t *restrict labels,
                                         const double *restrict dloss, double *restrict dx);

/*
 * Mean squared error over n elements: loss (1) = mean of (p - t)², summed in
 * the order of tl_k_sum; dp = dloss · 2(p - t) / n (the targets' gradient is
 * its negation). n == 0 gives NaN.
 */
void tl_k_mse(int64_t n, const float *restrict p, const float *restrict t, float *restrict loss);
void tl_k_mse_ref(int64_t n, const double *restrict p, const double *restrict t, double *restrict loss);
void tl_k_mse_grad(int64_t n, const float *restrict p, const float *restrict t, const float *restrict dloss,
                   float *restrict dp);
void tl_k_mse_grad_ref(int64_t n, const double *restrict p, const double *restrict t,
                       const double *restrict dloss, double *restrict dp);

/* ---- reductions ---------------------------------------------------------------
 *
 * Summation order, fixed by the code so results are reproducible bit for bit:
 *  - a contiguous run (tl_k_sum, tl_k_mean, and the axis kernels when
 *    inner == 1) keeps TL_K_LANES float64 partial sums, element i going to
 *    partial i mod TL_K_LANES in increasing i; the partials are then added
 *    0, 1, ..., TL_K_LANES-1 and the result rounded once to float32;
 *  - a strided reduction (axis kernels with inner > 1) adds x[o, 0, i],
 *    x[o, 1, i], ... in increasing axis index into one float64 accumulator per
 *    output, rounded once.
 * Means divide the float64 sum by the count before rounding; an empty
 * reduction sums to 0 and has mean NaN (0/0), as tf.reduce_mean.
 *
 * The axis kernels view x as (outer, axis, inner) and reduce the middle
 * dimension to y (outer, inner): the rows of an (R, C) matrix are
 * (R, C, 1), its columns (1, R, C). Backward is a broadcast of dy.
 */
void tl_k_sum(int64_t n, const float *restrict x, float *restrict y);
void tl_k_sum_ref(int64_t n, const double *restrict x, double *restrict y);
void tl_k_mean(int64_t n, const float *restrict x, float *restrict y);
void tl_k_mean_ref(int64_t n, const double *restrict x, double *restrict y);
/* dx[i] = dy[0] (sum) or dy[0] / n (mean). */
void tl_k_sum_grad(int64_t n, const float *restrict dy, float *restrict dx);
void tl_k_sum_grad_ref(int64_t n, const double *restrict dy, double *restrict dx);
void tl_k_mean_grad(int64_t n, const float *restrict dy, float *restrict dx);
void tl_k_mean_grad_ref(int64_t n, const double *restrict dy, double *restrict dx);

void tl_k_sum_axis(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, float *restrict y);
void tl_k_sum_axis_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x, double *restrict y);
void tl_k_mean_axis(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, float *restrict y);
void tl_k_mean_axis_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x,
                        double *restrict y);
/* dx[o, a, i] = dy[o, i] (sum) or dy[o, i] / axis (mean). */
void tl_k_sum_axis_grad(int64_t outer, int64_t axis, int64_t inner, const float *restrict dy,
                        float *restrict dx);
void tl_k_sum_axis_grad_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict dy,
                            double *restrict dx);
void tl_k_mean_axis_grad(int64_t outer, int64_t axis, int64_t inner, const float *restrict dy,
                         float *restrict dx);
void tl_k_mean_axis_grad_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict dy,
                             double *restrict dx);

/* ---- concat and slice -----------------------------------------------------------
 *
 * A row-major tensor cut at an axis is viewed as (outer, axis, inner): outer
 * is the product of the dimensions before the axis, inner of those after, so
 * each (o, a) holds a contiguous run of inner elements.
 *
 * Slice: y (outer, size, inner) = x (outer, axis, inner) [:, begin:begin+size, :].
 * Its gradient scatters dy into the window of dx: with accumulate false, dx
 * is overwritten (zero outside the window); with accumulate true, dy is added
 * into the window and the rest of dx is left alone.
 *
 * Concat: y (outer, sum of sizes[j], inner) joins count inputs xs[j]
 * (outer, sizes[j], inner) along the axis; its gradient slices dy back into
 * dxs[j] (overwritten).
 *
 * Errors: TL_EINVAL for a negative outer, inner, axis, size or count, a window
 * outside [0, axis), or sizes[j] < 0; nothing is written.
 */
tl_status tl_k_slice(int64_t outer, int64_t axis, int64_t inner, int64_t begin, int64_t size,
                     const float *restrict x, float *restrict y);
tl_status tl_k_slice_ref(int64_t outer, int64_t axis, int64_t inner, int64_t begin, int64_t size,
                         const double *restrict x, double *restrict y);
tl_status tl_k_slice_grad(int64_t outer, int64_t axis, int64_t inner, int64_t begin, int64_t size,
                          const float *restrict dy, bool accumulate, float *restrict dx);
tl_status tl_k_slice_grad_ref(int64_t outer, int64_t axis, int64_t inner, int64_t begin, int64_t size,
                              const double *restrict dy, bool accumulate, double *restrict dx);

tl_status tl_k_concat(int64_t outer, int64_t inner, int64_t count, const int64_t *sizes,
                      const float *const *xs, float *restrict y);
tl_status tl_k_concat_ref(int64_t outer, int64_t inner, int64_t count, const int64_t *sizes,
                          const double *const *xs, double *restrict y);
tl_status tl_k_concat_grad(int64_t outer, int64_t inner, int64_t count, const int64_t *sizes,
                           const float *restrict dy, float *const *dxs);
tl_status tl_k_concat_grad_ref(int64_t outer, int64_t inner, int64_t count, const int64_t *sizes,
                               const double *restrict dy, double *const *dxs);

/* ---- pairwise dot (DLRM's interaction) -----------------------------------------
 *
 * t (batch, f, d) holds f feature vectors of dimension d per example.
 * tl_k_pairwise_dot writes z (batch, f, f), z[b, i, j] = <t[b, i, :], t[b, j, :]>;
 * tl_k_pairwise_dot_tril writes only the strictly lower triangle (i > j) in row
 * order — (1,0), (2,0), (2,1), (3,0), ... — as z (batch, f(f-1)/2), which is
 * DLRM's interaction without self-interaction. Each dot product keeps
 * TL_K_LANES float32 partial sums (component c to partial c mod TL_K_LANES)
 * added 0..TL_K_LANES-1; z[b, j, i] is a copy of z[b, i, j], so z is exactly
 * symmetric.
 *
 * Backward: dt[b, i, :] = sum over j of (dz[b, i, j] + dz[b, j, i]) · t[b, j, :],
 * j in increasing order (for the triangle, dz of the pairs (i, j) and (j, i)
 * that exist). dt is overwritten.
 *
 * The _parts forms take the stack as the nparts tensors it concatenates,
 * without building it: part k is (batch, width[k]), width[k] a multiple of d
 * (0 allowed), the widths adding up to f·d; vector i of example b is the
 * i-th run of d floats of the example's rows across the parts. The same
 * sums in the same order: tl_k_pairwise_dot_tril is the one-part case. The
 * gradient's dx[k] has part k's shape; dx[k] NULL skips that part.
 */
void tl_k_pairwise_dot(int64_t batch, int64_t f, int64_t d, const float *restrict t, float *restrict z);
void tl_k_pairwise_dot_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t, double *restrict z);
void tl_k_pairwise_dot_grad(int64_t batch, int64_t f, int64_t d, const float *restrict t,
                            const float *restrict dz, float *restrict dt);
void tl_k_pairwise_dot_grad_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t,
                                const double *restrict dz, double *restrict dt);
void tl_k_pairwise_dot_tril(int64_t batch, int64_t f, int64_t d, const float *restrict t, float *restrict z);
void tl_k_pairwise_dot_tril_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t,
                                double *restrict z);
void tl_k_pairwise_dot_tril_grad(int64_t batch, int64_t f, int64_t d, const float *restrict t,
                                 const float *restrict dz, float *restrict dt);
void tl_k_pairwise_dot_tril_grad_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t,
                                     const double *restrict dz, double *restrict dt);
void tl_k_pairwise_dot_tril_parts(int64_t batch, int64_t f, int64_t d, int nparts, const float *const *x,
                                  const int64_t *width, float *restrict z);
void tl_k_pairwise_dot_tril_parts_grad(int64_t batch, int64_t f, int64_t d, int nparts, const float *const *x,
                                       const int64_t *width, const float *restrict dz, float *const *dx);

#endif /* TL_KERNELS_H */

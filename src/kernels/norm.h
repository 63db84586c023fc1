/*
 * norm.h — the normalisation kernels: layer norm over the last axis and
 * batch norm over every axis but the last (channels-last, as Keras), each
 * with its backward kernel and float64 twins. The conventions are those of
 * kernels.h: caller-allocated row-major float32 buffers, `restrict`, nothing
 * allocated, `_ref` twins in float64 with the obvious loops, negative sizes a
 * TL_ASSERT. No kernel here can fail on data, so they return nothing.
 *
 * Both normalise y = (x - mean)·rsqrt(var + eps)·gamma + beta with the
 * biased variance (divided by the count, not count - 1). The variance is
 * computed in two passes, the mean first and then the mean of the squared
 * deviations (batch norm: per block of rows, merged; below), never as
 * E[x²] - E[x]², which loses every digit when |mean| is
 * large next to the spread (x in [1e6, 1e6 + 1) in float32). The statistics
 * and every element's arithmetic are float64; each output is rounded once to
 * float32.
 *
 * Summation order, fixed by the code so results are the same bits run to run:
 *  - over a row of layer norm (d contiguous elements): TL_K_LANES float64
 *    partials, element j to partial j mod TL_K_LANES, added 0..TL_K_LANES-1
 *    (kernels.h's contiguous order);
 *  - over rows: layer norm's gamma / beta gradients, one float64
 *    accumulator per channel, rows added in increasing order; batch norm's
 *    sums, a tile of rows at a time with per-row partials folded in order,
 *    and its statistics per block of 32 rows, the blocks merged in order
 *    (below).
 * The twins keep one accumulator and add in increasing index.
 *
 * Backward kernels overwrite their outputs; any output pointer may be NULL to
 * skip it (a gradient nobody wants).
 *
 * A layer norm over (rows, d) and its gradients:
 *
 *     tl_k_layer_norm(rows, d, 1e-3, x, gamma, beta, y);
 *     ...
 *     tl_k_layer_norm_grad(rows, d, 1e-3, x, gamma, dy, dx, dgamma, dbeta, work);   // work: 2·d doubles
 */
#ifndef TL_KERNELS_NORM_H
#define TL_KERNELS_NORM_H

#include <stdbool.h>
#include <stdint.h>

/* ---- layer norm ------------------------------------------------------------
 *
 * x, y (rows, d); gamma, beta (d). Row r is normalised by its own mean and
 * variance over its d elements. d == 0 writes nothing.
 *
 * Backward, with xhat = (x - mean)·rstd, rstd = rsqrt(var + eps), g = dy·gamma:
 *     dx     = rstd·(g - mean_j(g) - xhat·mean_j(g·xhat))   per row
 *     dgamma = sum over rows of dy·xhat,   dbeta = sum over rows of dy.
 * The fast kernel accumulates dgamma and dbeta in float64 in work (2·d
 * doubles, caller's; untouched when both are NULL, and then may be NULL).
 */
void tl_k_layer_norm(int64_t rows, int64_t d, double eps, const float *restrict x, const float *restrict gamma,
                     const float *restrict beta, float *restrict y);
void tl_k_layer_norm_ref(int64_t rows, int64_t d, double eps, const double *restrict x,
                         const double *restrict gamma, const double *restrict beta, double *restrict y);
void tl_k_layer_norm_grad(int64_t rows, int64_t d, double eps, const float *restrict x,
                          const float *restrict gamma, const float *restrict dy, float *restrict dx,
                          float *restrict dgamma, float *restrict dbeta, double *restrict work);
void tl_k_layer_norm_grad_ref(int64_t rows, int64_t d, double eps, const double *restrict x,
                              const double *restrict gamma, const double *restrict dy, double *restrict dx,
                              double *restrict dgamma, double *restrict dbeta);

/* ---- batch norm ------------------------------------------------------------
 *
 * x, y (rows, c): rows is the product of every dimension but the last (batch,
 * height, width for NHWC), c the channels; gamma, beta (c).
 *
 * Training uses the batch statistics: mean[k] and the biased var[k] over the
 * rows, float64, which the forward kernel writes (c doubles each; the graph
 * keeps them beside the op's value for the backward pass and the moving
 * averages). rows == 0 gives NaN statistics (0/0, as tf.reduce_mean).
 *
 * The statistics take one pass over memory and keep the two-pass accuracy:
 * each block of 32 rows (the last may be shorter) gets its mean, then the
 * sum of its squared deviations from it (the block, at most 32 KiB, is read
 * again from L1), and the blocks merge in row order by Chan, Golub and
 * LeVeque's update: with n rows so far and a block of nb, delta = mean_b -
 * mean, mean += delta·nb/(n + nb), M2 += M2_b + delta²·n·nb/(n + nb). No
 * E[x²] - E[x]² anywhere, so x in [1e6, 1e6 + 1) keeps every digit.
 *
 * Sums over rows run a tile at a time: with 16 channels, say, 4 rows (64
 * floats) form one vector loop, each row of the tile its own float64
 * partial per channel (c < 64: ceil(64/c) rows a tile; c >= 64: one), the
 * partials added in row-of-tile order at the end, rows past the last whole
 * tile into the first. The statistics' blocks of 32 rows sum the same way.
 *
 * relu fuses the ReLU that follows the layer (Keras' Conv → BN → ReLU; the
 * compiler fuses relu(batch_norm(x)) when nothing else reads the batch
 * norm's value): y = max(normalised, 0), the bits of tl_k_relu of the
 * unfused output. Backward (relu true, beta given) gates dy as
 * tl_k_relu_grad does, g = normalised > 0 ? dy : 0, recomputing the
 * normalised value from x bit for bit rather than reading y, so the fused
 * gradient is the unfused one bit for bit (beta may be NULL without relu).
 * With xhat = (x - mean)·rstd, rstd = 1/sqrt(var + eps), n = rows:
 *     dbeta  = sum g,   dgamma = sum g·xhat,
 *     dx     = gamma·rstd·(g - dbeta/n - xhat·dgamma/n),
 * the sums over rows tiled as above.
 */
void tl_k_batch_norm_train(int64_t rows, int64_t c, double eps, const float *restrict x,
                           const float *restrict gamma, const float *restrict beta, bool relu, float *restrict y,
                           double *restrict mean, double *restrict var);
void tl_k_batch_norm_train_ref(int64_t rows, int64_t c, double eps, const double *restrict x,
                               const double *restrict gamma, const double *restrict beta, double *restrict y,
                               double *restrict mean_out, double *restrict var_out);
void tl_k_batch_norm_train_grad(int64_t rows, int64_t c, double eps, const float *restrict x,
                                const float *restrict gamma, const float *restrict beta, const double *restrict mean,
                                const double *restrict var, bool relu, const float *restrict dy, float *restrict dx,
                                float *restrict dgamma, float *restrict dbeta);
void tl_k_batch_norm_train_grad_ref(int64_t rows, int64_t c, double eps, const double *restrict x,
                                    const double *restrict gamma, const double *restrict dy, double *restrict dx,
                                    double *restrict dgamma, double *restrict dbeta);

/*
 * A batch split over the cores of a replica (graph/partition.h): the pieces
 * of the two kernels above, each core over its own rows, with the cores'
 * statistics and sums combined between them by the caller in core order.
 *   stats       mean and M2 (the sum of squared deviations, not divided)
 *               of the rows, as _train makes them (rows > 0);
 *   merge       (n, mean, m2) += (nb, mean_b, m2_b), Chan, Golub and
 *               LeVeque's update as between _train's blocks;
 *   apply       y from the batch's mean and biased var, as _train writes it;
 *   grad_sums   s1 = sum g, s2 = sum g·xhat over the rows (dbeta, dgamma);
 *   grad_apply  dx from the sums over the whole batch of n rows.
 * On one core (n = rows), stats, var = m2/rows, apply give _train's bits,
 * and grad_sums then grad_apply _train_grad's.
 */
void tl_k_batch_norm_stats(int64_t rows, int64_t c, const float *restrict x, double *restrict mean,
                           double *restrict m2);
void tl_k_batch_norm_merge(int64_t c, int64_t n, double *restrict mean, double *restrict m2, int64_t nb,
                           const double *restrict mean_b, const double *restrict m2_b);
void tl_k_batch_norm_apply(int64_t rows, int64_t c, double eps, const float *restrict x,
                           const float *restrict gamma, const float *restrict beta, const double *restrict mean,
                           const double *restrict var, bool relu, float *restrict y);
void tl_k_batch_norm_grad_sums(int64_t rows, int64_t c, double eps, const float *restrict x,
                               const float *restrict gamma, const float *restrict beta, const double *restrict mean,
                               const double *restrict var, bool relu, const float *restrict dy, double *restrict s1,
                               double *restrict s2);
void tl_k_batch_norm_grad_apply(int64_t rows, int64_t c, double eps, int64_t n, const float *restrict x,
                                const float *restrict gamma, const float *restrict beta, const double *restrict mean,
                                const double *restrict var, bool relu, const float *restrict dy,
                                const double *restrict s1, const double *restrict s2, float *restrict dx);

/*
 * Inference (a frozen batch norm): fixed statistics mean and var, so every
 * row is independent. Backward through the fixed statistics:
 *     dx = dy·gamma·rstd,   dgamma = sum dy·xhat,   dbeta = sum dy,
 *     dmean = -gamma·rstd·sum dy,   dvar = -gamma·rstd²·sum(dy·xhat) / 2
 * (dmean and dvar for statistics that are tensors with a gradient; the
 * layer's moving statistics are state variables and get none). relu fuses
 * a following ReLU into the forward as above; the compiler fuses a frozen
 * batch norm only in programs without a backward pass.
 */
void tl_k_batch_norm_infer(int64_t rows, int64_t c, double eps, const float *restrict x,
                           const float *restrict gamma, const float *restrict beta, const float *restrict mean,
                           const float *restrict var, bool relu, float *restrict y);
void tl_k_batch_norm_infer_ref(int64_t rows, int64_t c, double eps, const double *restrict x,
                               const double *restrict gamma, const double *restrict beta,
                               const double *restrict mean, const double *restrict var, double *restrict y);
void tl_k_batch_norm_infer_grad(int64_t rows, int64_t c, double eps, const float *restrict x,
                                const float *restrict gamma, const float *restrict mean, const float *restrict var,
                                const float *restrict dy, float *restrict dx, float *restrict dgamma,
                                float *restrict dbeta, float *restrict dmean, float *restrict dvar);
void tl_k_batch_norm_infer_grad_ref(int64_t rows, int64_t c, double eps, const double *restrict x,
                                    const double *restrict gamma, const double *restrict mean,
                                    const double *restrict var, const double *restrict dy, double *restrict dx,
                                    double *restrict dgamma, double *restrict dbeta, double *restrict dmean,
                                    double *restrict dvar);

/*
 * A moving average's update over c entries, as the runtime adds it to the
 * state variable: upd = (1 - momentum)·(stat - moving)·scale, in float64
 * rounded once, so moving + upd is Keras' moving·momentum + stat·(1 -
 * momentum) when scale is 1 (scale 1/R averages R replicas' updates).
 */
void tl_k_moving_update(int64_t c, double momentum, double scale, const float *restrict stat,
                        const float *restrict moving, float *restrict upd);
void tl_k_moving_update_ref(int64_t c, double momentum, double scale, const double *restrict stat,
                            const double *restrict moving, double *restrict upd);

#endif /* TL_KERNELS_NORM_H */

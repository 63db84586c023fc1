/*
 * batch_matmul.h — batched GEMM with NumPy broadcasting of the batch
 * dimensions (TensorFlow's BatchMatMulV2, tf.linalg.matmul), its gradients,
 * and their float64 twins. The conventions are kernels.h's: row-major,
 * caller-allocated outputs, restrict, no allocation, two tiers of failure,
 * deterministic.
 *
 * A is (..., M, K), or (..., K, M) when adj_a; B is (..., K, N), or (..., N, K)
 * when adj_b (float32 adjoint is the transpose). The batch dimensions "..."
 * of A and B are aligned on the right, the shorter padded with 1s on the
 * left, and each pair must be equal or have a 1 (which repeats that operand
 * along the other's dimension); C is (batch..., M, N) with batch... the
 * broadcast dimensions. Attention's scores and context, Q (B, H, S, D),
 * K and V (B, H, S, D):
 *
 *     tl_k_bmm s;
 *     tl_k_bmm_init(&s, q_shape, 4, k_shape, 4, false, true);   // Q·Kᵀ
 *     tl_k_batch_matmul(&s, q, k, scores);                      // (B, H, S, S)
 *     tl_k_bmm_init(&s, scores_shape, 4, v_shape, 4, false, false);
 *     tl_k_batch_matmul(&s, probs, v, ctx);                     // (B, H, S, D)
 *
 * Order: output matrix o = 0, 1, ... in row-major order of the broadcast
 * batch dimensions, one tl_k_matmul per matrix, so a single matrix (no batch
 * dimensions, or all 1) gives tl_k_matmul's bits. The gradient of an operand
 * repeated along a broadcast dimension is the sum of its matrices' gradients,
 * added in increasing o by GEMM's beta = 1 into the first (written with the
 * caller's beta): a float32 running sum whose order the code fixes.
 *
 * The twins are the definitions written out in float64: every element of C
 * (or of dA, dB) a plain sum over k (and over the output matrices that read
 * it), the batch indices decoded from o by division.
 */
#ifndef TL_KERNELS_BATCH_MATMUL_H
#define TL_KERNELS_BATCH_MATMUL_H

#include "kernels.h"
#include "tpuloop/topology.h" /* TL_MAX_RANK */

/* The geometry of one batched matmul. Built by tl_k_bmm_init from the
 * operands' shapes, or by hand (the kernels check it). */
typedef struct tl_k_bmm {
    int batch_rank;                  /* batch dimensions after padding, 0..TL_MAX_RANK - 2 */
    int64_t a_batch[TL_MAX_RANK - 2]; /* (batch_rank) A's batch dims, 1 where A is repeated */
    int64_t b_batch[TL_MAX_RANK - 2]; /* (batch_rank) B's */
    int64_t m, n, k;                 /* op(A) (m, k), op(B) (k, n), each C matrix (m, n) */
    bool adj_a, adj_b;               /* A stored (k, m), B stored (n, k) */
} tl_k_bmm;

/*
 * Fills s from A's shape (a_rank dims) and B's, each of rank 2..TL_MAX_RANK,
 * and the adjoint flags; c_shape (may be NULL) gets C's shape, of rank
 * max(a_rank, b_rank).
 *
 * Errors: TL_EINVAL when a rank is outside [2, TL_MAX_RANK], a dimension is
 * negative, the inner dimensions differ, or a batch dimension pair is neither
 * equal nor has a 1; the message names the operand and the dimensions.
 */
tl_status tl_k_bmm_init(tl_k_bmm *s, const int64_t *a_shape, int a_rank, const int64_t *b_shape, int b_rank,
                        bool adj_a, bool adj_b, int64_t *c_shape);

/* The number of matrices in A, B and C (the products of their batch
 * dimensions); s must be valid. */
int64_t tl_k_bmm_a_count(const tl_k_bmm *s);
int64_t tl_k_bmm_b_count(const tl_k_bmm *s);
int64_t tl_k_bmm_c_count(const tl_k_bmm *s);

/*
 * C = op(A)·op(B) matrix by matrix; C is only written (beta 0).
 *
 * Errors: TL_EINVAL when s is inconsistent (batch_rank outside
 * [0, TL_MAX_RANK - 2], a negative dimension, a batch pair that does not
 * broadcast) or m, n, k exceed the BLAS integer (tl_k_matmul's rule);
 * nothing is written.
 */
tl_status tl_k_batch_matmul(const tl_k_bmm *s, const float *restrict a, const float *restrict b,
                            float *restrict c);
tl_status tl_k_batch_matmul_ref(const tl_k_bmm *s, const double *restrict a, const double *restrict b,
                                double *restrict c);

/*
 * The gradients given dC: dA (A's shape) and dB (B's shape), each written as
 * dX = dX_new + beta·dX (beta 0: overwrite, 1: accumulate, as a tensor used by
 * several ops wants), dX_new summed over the output matrices that read each
 * matrix of X. Either of da, db may be NULL to skip it. Per matrix this is
 * tl_k_matmul_grad: dA = dC·op(B)ᵀ (transposed back when adj_a), dB =
 * op(A)ᵀ·dC (transposed back when adj_b). With no output matrices (a zero
 * batch dimension) dX = beta·dX.
 *
 * Errors: as tl_k_batch_matmul; nothing is written.
 */
tl_status tl_k_batch_matmul_grad(const tl_k_bmm *s, const float *restrict a, const float *restrict b,
                                 const float *restrict dc, float beta, float *restrict da, float *restrict db);
tl_status tl_k_batch_matmul_grad_ref(const tl_k_bmm *s, const double *restrict a, const double *restrict b,
                                     const double *restrict dc, double beta, double *restrict da,
                                     double *restrict db);

#endif /* TL_KERNELS_BATCH_MATMUL_H */

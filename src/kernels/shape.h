/*
 * shape.h — the kernels that move elements without arithmetic, and the sums
 * their gradients need: transpose, broadcast, tile, constant pad (shape.c),
 * gather and one-hot (shape_gather.c); ops_shape.c traces and runs them.
 *
 * The conventions of kernels.h hold: row-major float32 buffers allocated by
 * the caller, restrict pointers, nothing allocated, a float64 twin (`_ref`)
 * of every kernel, and each sum in a stated order. A shape is int64_t dims
 * (rank of them, every dim >= 0; rank 0 is a scalar of one element). A
 * geometry that cannot be — a negative dim, perm not a permutation, x not
 * broadcastable to y, an index outside its range — returns TL_EINVAL with a
 * message naming it, and nothing is written.
 *
 * The layer's transpose of a (B, T, H, D) activation to (B, H, T, D) and back:
 *
 *     const int64_t s[4] = {B, T, H, D};
 *     const int perm[4] = {0, 2, 1, 3};
 *     tl_k_transpose(4, s, perm, x, y);            // y (B, H, T, D), D-runs memcpy'd
 *     ...
 *     tl_k_transpose_grad(4, s, perm, dy, dx);     // dx (B, T, H, D)
 */
#ifndef TL_KERNELS_SHAPE_H
#define TL_KERNELS_SHAPE_H

#include <stdint.h>

#include "kernels.h"
#include "tpuloop/topology.h" /* TL_MAX_RANK */

/* Dims a shape kernel takes: tile views its x of rank r as 2r dims. */
#define TL_K_MAX_DIMS (2 * TL_MAX_RANK)

/* ---- transpose ---------------------------------------------------------------
 *
 * y[i_0, ..., i_{r-1}] with y's dim d = x's dim perm[d], so y's index d walks
 * x's axis perm[d] (tf.transpose). rank <= TL_K_MAX_DIMS; perm holds 0..rank-1
 * once each. Size-1 dims are dropped and x-adjacent dims that stay adjacent
 * merged first, so the innermost contiguous run of x that is also contiguous
 * in y is copied as one block; an identity permutation is one memcpy.
 *
 * The gradient is the transpose of dy by the inverse permutation: dx of x's
 * shape (shape, overwritten) from dy of y's.
 */
tl_status tl_k_transpose(int rank, const int64_t *shape, const int *perm, const float *restrict x,
                         float *restrict y);
tl_status tl_k_transpose_ref(int rank, const int64_t *shape, const int *perm, const double *restrict x,
                             double *restrict y);
tl_status tl_k_transpose_grad(int rank, const int64_t *shape, const int *perm, const float *restrict dy,
                              float *restrict dx);
tl_status tl_k_transpose_grad_ref(int rank, const int64_t *shape, const int *perm, const double *restrict dy,
                                  double *restrict dx);

/* ---- broadcast and tile ------------------------------------------------------
 *
 * Broadcast: x of xshape to y of yshape, both of rank dims (the caller pads
 * x's shape with leading 1s, NumPy's right alignment); every xshape[d] is
 * yshape[d] or 1, and y[i] = x[i with the index of each size-1 axis of x set
 * to 0].
 *
 * Its gradient sums dy over the broadcast axes: dx[j] is the sum of the dy
 * elements that x[j] was copied to, added in increasing row-major order of dy
 * into a float64 accumulator and rounded once; dx (xshape) is overwritten.
 *
 * Tile (tf.tile): y of shape xshape[d]·multiples[d] holds multiples[d] copies
 * of x along each axis; rank <= TL_MAX_RANK, multiples >= 0. It is the
 * broadcast of x viewed as (1, x0, 1, x1, ...) to (m0, x0, m1, x1, ...), so
 * its gradient sums the tiles of dy in that broadcast's order: increasing
 * row-major order of dy, float64, rounded once.
 */
tl_status tl_k_broadcast(int rank, const int64_t *xshape, const int64_t *yshape, const float *restrict x,
                         float *restrict y);
tl_status tl_k_broadcast_ref(int rank, const int64_t *xshape, const int64_t *yshape, const double *restrict x,
                             double *restrict y);
tl_status tl_k_broadcast_grad(int rank, const int64_t *xshape, const int64_t *yshape, const float *restrict dy,
                              float *restrict dx);
tl_status tl_k_broadcast_grad_ref(int rank, const int64_t *xshape, const int64_t *yshape,
                                  const double *restrict dy, double *restrict dx);

tl_status tl_k_tile(int rank, const int64_t *xshape, const int64_t *multiples, const float *restrict x,
                    float *restrict y);
tl_status tl_k_tile_ref(int rank, const int64_t *xshape, const int64_t *multiples, const double *restrict x,
                        double *restrict y);
tl_status tl_k_tile_grad(int rank, const int64_t *xshape, const int64_t *multiples, const float *restrict dy,
                         float *restrict dx);
tl_status tl_k_tile_grad_ref(int rank, const int64_t *xshape, const int64_t *multiples,
                             const double *restrict dy, double *restrict dx);

/* ---- constant pad ------------------------------------------------------------
 *
 * tf.pad in CONSTANT mode: y of shape xshape[d] + pads[2d] + pads[2d + 1]
 * holds x at offset pads[2d] on each axis and value everywhere else; pads
 * (rank, 2) are (before, after) pairs, each >= 0; rank <= TL_K_MAX_DIMS.
 * (value is rounded to float32 in the fast kernel.) The gradient is dy's
 * interior, dx (xshape) = dy[pads[0] : pads[0] + xshape[0], ...], overwritten.
 */
tl_status tl_k_pad(int rank, const int64_t *xshape, const int64_t *pads, double value, const float *restrict x,
                   float *restrict y);
tl_status tl_k_pad_ref(int rank, const int64_t *xshape, const int64_t *pads, double value,
                       const double *restrict x, double *restrict y);
tl_status tl_k_pad_grad(int rank, const int64_t *xshape, const int64_t *pads, const float *restrict dy,
                        float *restrict dx);
tl_status tl_k_pad_grad_ref(int rank, const int64_t *xshape, const int64_t *pads, const double *restrict dy,
                            double *restrict dx);

/* ---- gather and one-hot -------------------------------------------------------
 *
 * An index tensor: int32 or int64 elements (exactly one of i32, i64 is
 * non-NULL), n of them, and the tensor's shape, which only the messages use
 * to name a position as TensorFlow does: "indices[1,2] = 7 is not in [0, 5)"
 * (shape NULL or rank 1: "indices[5]"; rank 0: "indices").
 */
typedef struct tl_k_indices {
    const int32_t *i32; /* (n) or NULL */
    const int64_t *i64; /* (n) or NULL */
    int64_t n;
    int rank;
    const int64_t *shape; /* (rank), or NULL */
} tl_k_indices;

/*
 * Gather (tf.gather, batch_dims 0) along the middle axis of params viewed as
 * (outer, axis, inner): y (outer, n, inner), y[o, j, :] = x[o, idx[j], :],
 * each row one memcpy.
 *
 * The gradient scatters dy back: dx (outer, axis, inner) is zeroed, then
 * dx[o, idx[j], :] += dy[o, j, :] for j in increasing order, in float32 — a
 * row gathered k times gets its k gradients added in index order (as TF's
 * unsorted segment sum on CPU), so the result is the same bits every run.
 *
 * Errors: TL_EINVAL for an index outside [0, axis): "gather: indices[3] = 7
 * is not in [0, 5)", the first such in index order (TF raises
 * InvalidArgument on CPU; on GPU it writes zeros). Indices are checked before
 * anything is written, in both directions.
 */
tl_status tl_k_gather(int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *idx, const float *restrict x,
                      float *restrict y);
tl_status tl_k_gather_ref(int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *idx,
                          const double *restrict x, double *restrict y);
tl_status tl_k_gather_grad(int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *idx,
                           const float *restrict dy, float *restrict dx);
tl_status tl_k_gather_grad_ref(int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *idx,
                               const double *restrict dy, double *restrict dx);

/*
 * One-hot (tf.one_hot) with the new axis of size depth between the indices'
 * dims viewed as (outer, inner), idx->n == outer·inner: y (outer, depth,
 * inner), y[o, d, i] = on if idx[o·inner + i] == d, else off. An index
 * outside [0, depth) — -1 say — gives a row of off and no error, as
 * TensorFlow. No gradient (the indices are integers).
 */
tl_status tl_k_one_hot(int64_t outer, int64_t depth, int64_t inner, const tl_k_indices *idx, double on, double off,
                       float *restrict y);
tl_status tl_k_one_hot_ref(int64_t outer, int64_t depth, int64_t inner, const tl_k_indices *idx, double on,
                           double off, double *restrict y);

#endif /* TL_KERNELS_SHAPE_H */

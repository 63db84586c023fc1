/*
 * spatial.h — the arithmetic of spatial partitioning (num_cores_per_replica
 * with input_partition_dims, spec tpu_estimator.md §4.3): a 4-D NHWC tensor
 * split over the C cores of a replica by a tile grid, the region of the
 * input that a tile of a window op's output reads (its own tile and a halo
 * from its neighbours), the convolution or pooling geometry of that tile,
 * and the halo exchange itself as copies between the cores' tile buffers.
 *
 * Tiles. A grid (gn, gh, gw, gc) of C = gn·gh·gw·gc cores splits a shape as
 * tl_partition_tile does: core k holds tile k of the row-major grid, a
 * dimension of S split in d goes in chunks of ceil(S/d), then the rest, then
 * empty chunks (5 in 4: 2, 2, 1, 0). A window op's output is split by the
 * same grid, by the same rule, over the output's shape: core k computes
 * output tile k from the input region it reads.
 *
 * Regions. Output rows [o0, o1) of a window of k taps, dilation apart,
 * stride apart, with pad_before rows of padding before the image, read the
 * padded input rows [o0·s - pad_before, (o1 - 1)·s - pad_before + keff),
 * keff = (k - 1)·dilation + 1. Of those, the rows inside the image [0, in)
 * are the region; the rest are padding, before (pad_lo) and after (pad_hi)
 * it. A convolution or pool of the region with pad_lo and pad_hi is the
 * output tile: the same windows over the same elements, so padding counts
 * (or not, for the pools) exactly as in the whole op.
 *
 * Exchange. Each core's region may reach into other cores' tiles (the
 * halo); gather copies it from every tile it overlaps, in core order. The
 * backward pass has each core's gradient with respect to its region, which
 * overlaps other cores' tiles; reduce gives a core the gradient of its own
 * tile as the sum over cores 0, 1, ..., C-1, in that order, of what their
 * regions' gradients hold for it: the same bits whatever the threads' timing.
 * Both only read the other cores' buffers, so cores of one process run them
 * after a barrier without locks.
 */
#ifndef TL_GRAPH_SPATIAL_H
#define TL_GRAPH_SPATIAL_H

#include <stdbool.h>
#include <stdint.h>

#include "../kernels/conv.h"
#include "tpuloop/base.h"

/* A box of a 4-D NHWC tensor: offset and size per dimension. */
typedef struct tl_box {
    int64_t off[4], size[4];
} tl_box;

/* Elements of the box (0 when any size is 0). */
int64_t tl_box_count(const tl_box *b);

/* Core core's tile of shape split by grid (tl_partition_tile's rule).
 * Errors: TL_EINVAL for a grid entry < 1 or core outside [0, prod(grid)). */
tl_status tl_spatial_tile(const int64_t shape[4], const int64_t grid[4], int core, tl_box *out);

/* Output rows [o0, o1) of a window read input rows [*i0, *i1) of [0, in),
 * with *pad_lo padded rows before them and *pad_hi after (see "Regions").
 * An empty range (o0 == o1) reads nothing: all four are 0. */
void tl_spatial_reach(int64_t in, int64_t k, int64_t stride, int64_t dilation, int64_t pad_before, int64_t o0,
                      int64_t o1, int64_t *i0, int64_t *i1, int64_t *pad_lo, int64_t *pad_hi);

/*
 * The geometry of the output tile out (a box of cv's output, all of its
 * channels) as a convolution of its own: local reads the region *need of
 * cv's input (all channels) with the padding the region lacks, and writes
 * out's shape. An empty out gives an empty need and local->oh or ->ow 0:
 * nothing to compute. The engine is cv's.
 */
void tl_spatial_conv_tile(const tl_k_conv_geom *cv, const tl_box *out, tl_k_conv_geom *local, tl_box *need);
/* The same for pooling (out and need share their channels). */
void tl_spatial_pool_tile(const tl_k_pool_geom *pl, const tl_box *out, tl_k_pool_geom *local, tl_box *need);

/*
 * Fills region (need's shape, NHWC, row-major) from the tiles of ncores
 * cores: tiles[q] held in bufs[q] (tiles[q]'s shape). Every element of need
 * must lie in some tile (the tiles of a grid cover the tensor).
 */
void tl_spatial_gather(const tl_box *need, int ncores, const tl_box *tiles, const float *const *bufs,
                       float *region);

/*
 * out (mine's shape) = the sum over cores p = 0 .. ncores-1, in that order,
 * of rgrad[p] (the gradient of core p's region needs[p], in its shape) where
 * it overlaps mine; 0 where no region does.
 */
void tl_spatial_reduce(const tl_box *mine, int ncores, const tl_box *needs, const float *const *rgrads, float *out);

/* out (mine's shape) += src (box's shape) where the two boxes overlap. */
void tl_spatial_accumulate(const tl_box *mine, const tl_box *box, const float *src, float *out);

/*
 * TL_OP_SPMD_CONV (ops_spmd_conv.c): the output rows [*i0, *i1) of the
 * output tile rows [o0, o1) of conv cv whose windows read only the input
 * tile rows [t0, t1) (or the image's padding): the interior, convolved from
 * the tile in place; the others need rows of other cores' tiles.
 */
void tl_spmd_conv_interior(const tl_k_conv_geom *cv, int64_t t0, int64_t t1, int64_t o0, int64_t o1, int64_t *i0,
                           int64_t *i1);

#endif /* TL_GRAPH_SPATIAL_H */

/*
 * partition.h — SPMD partitioning of a traced graph over the cores of one
 * replica (num_cores_per_replica with input_partition_dims; issue 16).
 *
 * The partitioner rewrites a graph, once per core, into the graph that core
 * runs: the same ops in the same order on its share of the data, with the
 * collectives (ops_spmd.c) that keep the math equal to the unpartitioned
 * graph's. One input, an NHWC image batch (or (batch, h, w) images, as
 * (batch, h, w, 1)), is split by a grid (gn, gh, gw, gc) as
 * tl_partition_tile splits it (spatial.h); every other input is whole on
 * every core. A reshape that adds or drops the images' trailing 1 keeps
 * the tiles. Each value is then either a tile (split by the grid, as its
 * producer's output) or whole (the same bits on every core):
 *
 *   op on tiles                    this core runs
 *   ---------------------------    ----------------------------------------------
 *   conv2d, depthwise_conv2d       the halo gather of x (TL_OP_SPMD_HALO), then the conv of
 *     (channels not split)         the region with the padding it lacks: the output tile;
 *                                  on row tiles of tl_partition_inplace_min floats an image,
 *                                  the conv of the tile in place and of small regions at its
 *                                  edges (TL_OP_SPMD_CONV, ops_spmd_conv.c): no whole copy
 *   max_pool2d, avg_pool2d         the same with the pool
 *   batch_norm (channels whole)    training: the statistics and the gradient's sums of
 *                                  every core's rows, merged in core order: a tile (its
 *                                  moving statistics' update is whole); frozen: a tile
 *   global_avg_pool2d              the tile's sum, summed over the cores (TL_OP_SPMD_SUM),
 *     (batch, channels not split)    times 1 / (h·w): whole
 *   element-wise ops, bias_add,    the op on the tiles, where every tiled operand has the
 *     activations, casts             output's tiling and every whole one broadcasts only
 *                                  over dimensions the grid does not split: a tile
 *   anything else                  its tiled inputs gathered whole (TL_OP_SPMD_GATHER),
 *                                  then the op as traced: whole (correct, slower; counted
 *                                  in gathered, and the plan says so)
 *
 * Gradients follow the ops: a halo's gradient reduces back onto the tiles in
 * core order, a gather's is each core's tile of dy, a sum's is dy. A
 * variable read by an op on tiles gets a partial gradient on each core (the
 * replica's gradient is their sum); one read only by whole ops gets the
 * whole gradient on every core (the replica's gradient is any one core's):
 * var_partial says which. A variable read both ways is refused for now.
 *
 * Every tile must hold at least one element: a grid that leaves a core an
 * empty tile of some value (5 rows in 4: 2, 2, 1, 0) is an error naming the
 * value and the dimension.
 */
/*
 * Tensor parallelism (partition_tp.c). With ModelParallel layouts the cores
 * split variables instead: a variable laid out with the model axis on
 * dimension d is read as this core's chunk along d (TL_OP_SPMD_SLICE, by
 * the tiles' rule: 10 in 4 is 3, 3, 3, 1), and every input is whole on
 * every core. A value is then whole or split along one dimension:
 *
 *   op                             this core runs
 *   ---------------------------    ----------------------------------------------
 *   matmul(x, kernel (None, m))    x @ its columns: split along the last dimension
 *   matmul(x, kernel (m, None))    x's chunk of columns @ its rows: a partial of the
 *                                  product, summed over the cores (TL_OP_SPMD_SUM): whole
 *   matmul(x split by rows, w)     its rows @ w: split by rows
 *   element-wise ops, bias_add     on the chunks, every whole operand sliced to the chunk
 *                                  or, where it broadcasts over the split, read whole
 *   transpose, reshape             the split follows the dimension (a reshape keeps it
 *                                  only where the chunks stay whole rows: heads)
 *   batch_matmul                   both split along the same batch dimension: local
 *   softmax, layer norm, reduce    over dimensions other than the split one: local
 *   gather (embedding lookup)      a table split along its columns: split output
 *   anything else                  its split inputs gathered whole (TL_OP_SPMD_GATHER)
 *
 * That is Megatron's layout: a column-split dense, the heads of attention
 * whose query, key and value kernels are column-split, and a row-split
 * output projection run with one sum per pair. A whole value read by ops on
 * split ones gets a share of its gradient on each core: its fan-out
 * (TL_OP_SPMD_FANOUT) sums them in core order, and a slice's gradient is
 * every core's chunk put together, so every gradient a core holds for a
 * whole value is the whole gradient (var_partial is false throughout). A
 * split variable's slice is the exception: its gradient is the core's own
 * chunk alone, which the replica's gradient takes from that core
 * (tl_partition_add_partials). Variables live whole in the replica's store
 * and are saved whole: a checkpoint moves between any number of cores.
 */

#ifndef TL_GRAPH_PARTITION_H
#define TL_GRAPH_PARTITION_H

#include "graph_int.h"

typedef struct tl_partition {
    tl_graph *g;        /* this core's graph (owned), on the source graph's variable store */
    tl_t *map;          /* (source nodes) the node of g holding each source value: its tile or whole */
    bool *tiled;        /* (source nodes) whether map[i] is a tile (a chunk, with tensor parallelism) */
    bool *var_partial;  /* (variables) the gradient on a core is a partial of the replica's */
    int8_t *var_split;  /* (variables) tensor parallelism: the dimension a variable is split along (a core's
                           gradient holds only its chunk), -1 whole; NULL with spatial tiles */
    int gathered;       /* ops with no rule for tiles, whose inputs were gathered whole (tensor parallelism:
                           the split values gathered whole) */
} tl_partition;

/*
 * Partitions src for core `core` of the grid (gn, gh, gw, gc; the cores
 * number prod(grid)), with input `input` (a float32 input of src: images,
 * NHWC or (batch, h, w))
 * split by the grid. Errors (TL_EINVAL): input not such an input, a grid
 * entry < 1 or more than TL_SPMD_MAX_CORES cores, an empty tile, a variable
 * read by ops on tiles and by whole ops; TL_ENOMEM.
 */
tl_status tl_partition_graph(const tl_graph *src, tl_t input, const int64_t grid[4], int core, tl_partition *out);
/*
 * Partitions src for core `core` of ncores splitting its variables:
 * var_split[v] is the dimension of variable v split over the cores, -1
 * whole. Errors (TL_EINVAL): ncores outside [1, TL_SPMD_MAX_CORES], a split
 * dimension beyond the variable's rank, a value some core gets an empty
 * chunk of; TL_ENOMEM.
 */
/* The least floats of one image's rows in a core's tile for which a conv
 * on row tiles reads the tile in place (TL_OP_SPMD_CONV) instead of
 * gathering a region (TL_OP_SPMD_HALO): 32768. A knob for the tests. */
extern int64_t tl_partition_inplace_min;

/* Appends to g a copy of node nd (of another graph: its op, dtype,
 * attributes, variable) on inputs in with the given shape. */
tl_t tl_partition_add_like(tl_graph *g, const tl_node *nd, const tl_t *in, const int64_t *shape, int rank);
/* The name of op in a plan or a message ("conv2d"; "op" for the unnamed). */
const char *tl_partition_op_name(tl_op_kind op);

tl_status tl_partition_tensor(const tl_graph *src, const int8_t *var_split, int ncores, int core, tl_partition *out);
void tl_partition_free(tl_partition *pt);

/* The replica's gradient from its cores' (grads[q], each the variable
 * slab of vars): out holds core 0's, and gets every partial variable's
 * (pt->var_partial, any core's partition) entries of cores 1 .. ncores-1
 * added in core order, and every split variable's (pt->var_split) chunk q
 * from core q. A whole variable keeps core 0's. */
void tl_partition_add_partials(const tl_partition *pt, const tl_vars *vars, int ncores, const float *const *grads,
                               float *out);
/* Its tensor-parallel half: chunk q of each split variable from grads[q]. */
void tl_partition_take_chunks(const tl_partition *pt, const tl_vars *vars, int ncores, const float *const *grads,
                              float *out);

#endif /* TL_GRAPH_PARTITION_H */

/*
 * graph_int.h — the traced graph and the model's variable store.
 *
 * A graph is an array of nodes in creation order, which is a topological
 * order: an op can only name tensors that exist. Each node has a static shape;
 * the compiler (compile.c) plans one buffer per node and the autodiff pass
 * walks the nodes backwards.
 *
 * Variables live in a store shared by every graph of a model (one per mode and
 * batch shape), so TRAIN, EVAL and PREDICT read the same parameters. The store
 * keeps them in one slab in name order (the order params_digest uses), carved
 * into per-variable pointers — llm.c's layout.
 */
#ifndef TL_GRAPH_INT_H
#define TL_GRAPH_INT_H

#include "../base/base_int.h"
#include "tpuloop/graph.h"

#define TL_MAX_OP_INPUTS 32 /* program.h first_write holds a bit per input */
#define TL_GRAPH_MAX_NODES (1 << 20)
#define TL_NODE_IATTRS (2 * TL_MAX_RANK + 4) /* room for pad's (before, after) per axis */
#define TL_SPMD_MAX_CORES 128 /* the cores of a partitioned replica: num_cores_per_replica's largest value */

typedef enum {
    TL_OP_INPUT = 0,  /* features or labels, fed by the infeed */
    TL_OP_VARIABLE,
    TL_OP_MATMUL,     /* iattr[0] transpose_a, iattr[1] transpose_b */
    TL_OP_BIAS_ADD,
    TL_OP_RELU,
    TL_OP_SIGMOID,
    TL_OP_TANH,
    TL_OP_SOFTMAX_XENT,
    TL_OP_SIGMOID_XENT,
    TL_OP_MSE,
    TL_OP_CONCAT,     /* iattr[0] axis */
    TL_OP_RESHAPE,
    TL_OP_SLICE,      /* iattr[0] axis, iattr[1] begin, iattr[2] size */
    TL_OP_SUM,
    TL_OP_MEAN,
    TL_OP_DROPOUT,    /* fattr[0] rate; iattr[0] the op's RNG stream id */
    TL_OP_PAIRWISE_DOT,
    TL_OP_EMBEDDING,  /* an embedding feature's activations, written by the runtime; iattr[0] the feature.
                         Its gradient is what the runtime sends back to the embedding engine. */

    /* The op families of ops_*.c: each family's kinds lie strictly between
     * its FIRST_ and LAST_ markers, and ops.c sends them to the family's
     * forward and backward (tl_op_family in ops.h). */
    TL_OP_EW_FIRST_,     /* ops_elementwise.c: broadcasting binary, unary math, activations, casts */
    TL_OP_EW_CONSTANT,   /* fattr[0] the value; no inputs */
    TL_OP_EW_ADD,        /* the binary ops: in[0] x, in[1] y, broadcast; no attributes */
    TL_OP_EW_SUB,
    TL_OP_EW_MUL,
    TL_OP_EW_DIV,
    TL_OP_EW_MAXIMUM,
    TL_OP_EW_MINIMUM,
    TL_OP_EW_POW,
    TL_OP_EW_NEG,        /* the unary ops: in[0] x; no attributes unless said */
    TL_OP_EW_ABS,
    TL_OP_EW_EXP,
    TL_OP_EW_LOG,
    TL_OP_EW_SQRT,
    TL_OP_EW_RSQRT,
    TL_OP_EW_SQUARE,
    TL_OP_EW_CLIP,       /* fattr[0] lo, fattr[1] hi */
    TL_OP_EW_GELU,       /* the erf form */
    TL_OP_EW_GELU_TANH,  /* gelu(approximate=True) */
    TL_OP_EW_SILU,
    TL_OP_EW_LEAKY_RELU, /* fattr[0] alpha */
    TL_OP_EW_ELU,        /* fattr[0] alpha */
    TL_OP_EW_SOFTPLUS,
    TL_OP_EW_EQUAL,      /* the comparisons: in[0] x, in[1] y of one dtype, broadcast; a float32 0/1 mask */
    TL_OP_EW_NOT_EQUAL,
    TL_OP_EW_LESS,
    TL_OP_EW_LESS_EQUAL,
    TL_OP_EW_GREATER,
    TL_OP_EW_GREATER_EQUAL,
    TL_OP_EW_WHERE,      /* in[0] cond (float32 or int32), in[1] x, in[2] y, broadcast */
    TL_OP_EW_CAST,       /* in[0] x; from its dtype to the node's */
    TL_OP_EW_LAST_,

    TL_OP_SHAPE_FIRST_,  /* ops_shape.c: transpose, expand/squeeze, broadcast_to, gather, one_hot, pad, tile ... */
    TL_OP_TRANSPOSE,     /* iattr[0..rank) perm: y's dim d is x's dim perm[d] */
    TL_OP_EXPAND_DIMS,   /* iattr[0] the new axis (>= 0); a view of x (ops.h) */
    TL_OP_SQUEEZE,       /* no attributes (the shapes tell); a view of x */
    TL_OP_BROADCAST_TO,  /* no attributes: x's shape right-aligned to the node's */
    TL_OP_GATHER,        /* iattr[0] axis of params (>= 0); in[0] params, in[1] int32 / int64 indices */
    TL_OP_ONE_HOT,       /* iattr[0] depth, iattr[1] the new axis (>= 0); fattr[0] on, fattr[1] off */
    TL_OP_PAD,           /* iattr[2d], iattr[2d + 1] axis d's (before, after); fattr[0] the constant */
    TL_OP_TILE,          /* iattr[0..rank) multiples */
    TL_OP_SHAPE_LAST_,

    TL_OP_REDUCE_FIRST_, /* ops_reduce.c: reductions over axes, arg max/min, softmax family, losses, metrics */
    TL_OP_REDUCE_SUM,         /* iattr[0] the reduced axes of x, bit d for axis d; iattr[1] keepdims */
    TL_OP_REDUCE_MEAN,        /* iattr as TL_OP_REDUCE_SUM */
    TL_OP_REDUCE_MAX,         /* iattr as TL_OP_REDUCE_SUM */
    TL_OP_REDUCE_MIN,         /* iattr as TL_OP_REDUCE_SUM */
    TL_OP_REDUCE_LOGSUMEXP,   /* iattr as TL_OP_REDUCE_SUM */
    TL_OP_REDUCE_ARGMAX,      /* iattr[0] axis, in [0, rank of x); the node's dtype is output_type */
    TL_OP_REDUCE_ARGMIN,      /* iattr[0] axis, as TL_OP_REDUCE_ARGMAX */
    TL_OP_REDUCE_SOFTMAX,     /* iattr[0] axis, in [0, rank) */
    TL_OP_REDUCE_LOG_SOFTMAX, /* iattr[0] axis, in [0, rank) */
    TL_OP_REDUCE_XENT_DENSE,  /* fattr[0] label_smoothing; in[0] logits, in[1] float32 labels */
    TL_OP_REDUCE_XENT_SPARSE, /* fattr[0] label_smoothing; in[0] logits, in[1] int32 or int64 labels */
    TL_OP_REDUCE_HUBER,       /* fattr[0] delta; in[0] predictions, in[1] labels */
    TL_OP_REDUCE_IN_TOP_K,    /* iattr[0] k; in[0] predictions, in[1] int32 or int64 targets */
    TL_OP_REDUCE_LAST_,

    TL_OP_NORM_FIRST_,   /* ops_norm.c: layer norm, batch norm */
    TL_OP_LAYER_NORM,    /* in: x, gamma, beta; fattr[0] epsilon; over the last axis */
    TL_OP_BATCH_NORM,    /* in: x, gamma, beta, moving_mean, moving_variance; fattr[0] momentum,
                            fattr[1] epsilon; iattr[0] training (batch statistics, moving updates); iattr[1]
                            the statistics are those of every core of a partitioned replica (partition.h) */
    TL_OP_NORM_LAST_,

    TL_OP_LINALG_FIRST_, /* ops_linalg.c: batched matmul */
    TL_OP_BATCH_MATMUL,  /* iattr[0] adj_a, iattr[1] adj_b */
    TL_OP_LINALG_LAST_,

    TL_OP_VISION_FIRST_, /* ops_vision.c: conv2d, pooling, resize (oneDNN) */
    TL_OP_CONV2D,        /* in (x, filter); iattr[0..1] kernel (h, w), [2] groups, [3..4] strides, [5..6] dilations,
                            [7..10] padding (top, left, bottom, right), [11] 1 for depthwise_conv2d's filter shape */
    TL_OP_MAX_POOL2D,    /* iattr[0..1] ksize (h, w), [2..3] strides, [4..7] padding (top, left, bottom, right) */
    TL_OP_AVG_POOL2D,    /* as TL_OP_MAX_POOL2D; global_avg_pool2d is one over the whole image, shaped
                            (batch, c) or (batch, 1, 1, c) */
    TL_OP_RESIZE,        /* iattr[0] tl_resize_method; the output size is the node's shape */
    TL_OP_VISION_LAST_,

    TL_OP_SPMD_FIRST_,   /* ops_spmd.c: the collectives of a core's share of a partitioned replica (partition.h) */
    TL_OP_SPMD_HALO,     /* in[0] this core's tile of an NHWC tensor; iattr[0..3] the region's offset, [4..7] its
                            size, [8..11] the whole tensor's shape, [12..15] the core grid: the value is the region,
                            gathered from every core's tile (spatial.h); the gradient reduces back in core order */
    TL_OP_SPMD_GATHER,   /* iattr as TL_OP_SPMD_HALO with the region the whole tensor; its gradient is this core's
                            tile of dy (dy is the same on every core) */
    TL_OP_SPMD_SUM,      /* in[0] this core's partial; the value is the sum over the cores in core order; dx = dy */
    TL_OP_SPMD_SLICE,    /* in[0] a whole tensor; iattr as TL_OP_SPMD_HALO with the region this core's tile: the
                            value is the tile; dx is every core's dy put together (an all-gather), or with
                            iattr[16] 1 (a split variable's) this core's dy in its chunk alone */
    TL_OP_SPMD_FANOUT,   /* in[0] a whole tensor read by ops on split ones: the value is x; dx is the sum over the
                            cores of dy in core order (each core's dy is its share of x's gradient) */
    TL_OP_SPMD_CONV,     /* in (x, filter): x a row tile; a conv2d's output tile reading x in place and only the
                            rows past its edges from the other cores (ops_spmd_conv.c for the attributes) */
    TL_OP_SPMD_LAST_,

    TL_OP_COUNT_
} tl_op_kind;

typedef struct tl_node {
    tl_op_kind op;
    tl_dtype dtype;
    int rank;
    int64_t shape[TL_MAX_RANK];
    int64_t size;                 /* elements */
    int nin;
    tl_t in[TL_MAX_OP_INPUTS];
    int64_t iattr[TL_NODE_IATTRS]; /* the op's integer attributes, as its kind says */
    double fattr[4];
    int var;                      /* TL_OP_VARIABLE: index in the store */
    bool needs_grad;              /* depends on a variable */
} tl_node;

typedef struct tl_var {
    char *name;
    int rank;
    int64_t shape[TL_MAX_RANK];
    int64_t size;
    tl_initializer init;
    bool trainable;               /* false: a state variable (tl_state_variable), no optimizer */
    int64_t offset;               /* in the parameter slab, once laid out */
} tl_var;

/* The variables of a model. */
typedef struct tl_vars {
    tl_var *v;                    /* (n), in creation order */
    int n, cap;
    bool frozen;                  /* laid out: no new variables */
    int64_t total;                /* elements in the slab */
    int *by_name;                 /* (n) indices sorted by name */
} tl_vars;

struct tl_graph {
    tl_vars *vars;                /* borrowed */
    tl_mode mode;
    tl_node *nodes;
    int n, cap;
    int dropout_ops;              /* stream ids handed out */
    tl_status status;
    char err[512];
};

tl_status tl_vars_create(tl_vars **out);
void tl_vars_destroy(tl_vars *vars);
/* Finds the variable `name` (same shape and trainability required) or adds
 * it; *idx is its index. tl_vars_add adds trainable variables. */
tl_status tl_vars_add(tl_vars *vars, const char *name, const int64_t *shape, int rank, tl_initializer init, int *idx);
tl_status tl_vars_add_ex(tl_vars *vars, const char *name, const int64_t *shape, int rank, tl_initializer init,
                         bool trainable, int *idx);
/* Lays the variables out in name order; returns the slab size in elements. */
tl_status tl_vars_layout(tl_vars *vars);
/* Fills the parameter slab (vars->total floats) with every initializer. */
void tl_vars_initialize(const tl_vars *vars, uint64_t seed, float *params);

tl_status tl_graph_create(tl_vars *vars, tl_mode mode, tl_graph **out);
void tl_graph_destroy(tl_graph *g);
/* An infeed input of the given dtype and shape. */
tl_t tl_graph_input(tl_graph *g, tl_dtype dtype, const int64_t *shape, int rank);
const tl_node *tl_graph_node(const tl_graph *g, tl_t t);

/* ---- what the ops' tracing code shares (graph.c) ----------------------------- */

/* Records the first error in g (sticky) and returns TL_T_INVALID. Messages
 * name the op, the argument, what it got and what was allowed:
 * "add: y has shape (4, 3), which does not broadcast with x (4, 5)". */
tl_t tl_graph_failf(tl_graph *g, tl_status st, const char *fmt, ...) TL_PRINTF(3, 4);
/* Appends a node of the given kind, dtype, shape and inputs; TL_T_INVALID
 * (and the error recorded) on a bad shape or out of memory. The node's
 * attributes are zero; set them on g->nodes[t] after. */
tl_t tl_graph_add(tl_graph *g, tl_op_kind op, tl_dtype dtype, const int64_t *shape, int rank, const tl_t *in, int nin);
/* t is a tensor of g, and g has no error. */
bool tl_graph_valid(const tl_graph *g, tl_t t);
/* t if it is a float32 tensor of g, else TL_T_INVALID with "op: what is not
 * a tensor of this graph" or "op: what must be float32". */
tl_t tl_graph_need_f32(tl_graph *g, tl_t t, const char *op, const char *what);
/* "(4, 3)", "(5,)", "()" into buf. */
const char *tl_shape_str(const int64_t *shape, int rank, char *buf, size_t n);
/* "float32", "int32", "int64". */
const char *tl_dtype_name(tl_dtype dt);
/* Float-sized slots one element of dt takes in the activation slab (int64: 2). */
int tl_dtype_slots(tl_dtype dt);

#endif /* TL_GRAPH_INT_H */

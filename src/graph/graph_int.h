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

#define TL_MAX_OP_INPUTS 16
#define TL_GRAPH_MAX_NODES (1 << 20)

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
    int64_t iattr[4];
    double fattr[2];
    int var;                      /* TL_OP_VARIABLE: index in the store */
    bool needs_grad;              /* depends on a variable */
} tl_node;

typedef struct tl_var {
    char *name;
    int rank;
    int64_t shape[TL_MAX_RANK];
    int64_t size;
    tl_initializer init;
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
/* Finds the variable `name` (same shape required) or adds it; *idx is its index. */
tl_status tl_vars_add(tl_vars *vars, const char *name, const int64_t *shape, int rank, tl_initializer init, int *idx);
/* Lays the variables out in name order; returns the slab size in elements. */
tl_status tl_vars_layout(tl_vars *vars);
/* Fills the parameter slab (vars->total floats) with every initializer. */
void tl_vars_initialize(const tl_vars *vars, uint64_t seed, float *params);

tl_status tl_graph_create(tl_vars *vars, tl_mode mode, tl_graph **out);
void tl_graph_destroy(tl_graph *g);
/* An infeed input of the given dtype and shape. */
tl_t tl_graph_input(tl_graph *g, tl_dtype dtype, const int64_t *shape, int rank);
const tl_node *tl_graph_node(const tl_graph *g, tl_t t);

#endif /* TL_GRAPH_INT_H */

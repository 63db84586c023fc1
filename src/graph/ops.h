/*
 * ops.h — how an op family plugs into tracing, planning and running.
 *
 * The 18 first ops live in graph.c / exec.c. Every later op belongs to a
 * family file, src/graph/ops_<family>.c, which holds the family's public
 * constructors (tpuloop/graph.h), and its forward and backward passes. Its
 * kinds lie strictly between the family's markers in tl_op_kind
 * (graph_int.h), and ops.c sends each node of such a kind to its family:
 *
 *     forward(p, e, i)          writes node i's value from its inputs' values;
 *     backward(p, e, i, &cur)   reads node i's gradient dy and writes or adds
 *                               each wanted input gradient (tl_op_dst/finish);
 *     scratch(g, i)             floats of e->scratch the op needs beyond the
 *                               staging of its input gradients (0 if NULL);
 *     view(g, i)                the node's value is its input 0's bytes (a
 *                               reshape-like op: expand_dims, squeeze); NULL: never;
 *     aux(g, i)                 floats the forward pass keeps beside the value
 *                               for the backward pass (tl_exec_aux), 0 if NULL:
 *                               batch norm's statistics.
 *
 * A backward pass writes input k's gradient through
 *
 *     float *d = tl_op_dst(p, e, i, k, &cur);   // the gradient, or scratch when
 *     ...write d...                             // another op wrote it already
 *     tl_op_finish(p, e, i, k, d);              // adds the scratch in
 *
 * and takes scratch of its own after those with tl_op_scratch(e, &cur, n).
 * Nothing in a forward or backward pass allocates.
 */
#ifndef TL_GRAPH_OPS_H
#define TL_GRAPH_OPS_H

#include "program.h"

typedef struct tl_op_family {
    const char *name;
    tl_op_kind first, last; /* the family's kinds are first < kind < last */
    tl_status (*forward)(const tl_program *p, tl_exec *e, int i);
    tl_status (*backward)(const tl_program *p, tl_exec *e, int i, int64_t *cursor);
    int64_t (*scratch)(const tl_graph *g, int i);
    bool (*view)(const tl_graph *g, int i);
    int64_t (*aux)(const tl_graph *g, int i);
} tl_op_family;

extern const tl_op_family tl_ops_elementwise, tl_ops_shape, tl_ops_reduce, tl_ops_norm, tl_ops_linalg,
    tl_ops_vision, tl_ops_spmd;

/* The family of kind, or NULL for the first ops (graph.c / exec.c). */
const tl_op_family *tl_op_family_of(tl_op_kind kind);

/* ---- for the families' forward and backward passes (exec.c) ---------------- */

/* Node t's gradient (the program must compute one: tl_op_wants). */
float *tl_op_grad(const tl_program *p, const tl_exec *e, tl_t t);
/* Whether op i's input k gets a gradient. */
bool tl_op_wants(const tl_program *p, int i, int k);
/* Whether op i is the first to write input k's gradient (then it overwrites;
 * else it adds). For kernels that accumulate themselves (GEMM's beta). */
bool tl_op_first(const tl_program *p, int i, int k);
/* Where op i writes input k's gradient: the gradient itself when i writes it
 * first, else scratch at *cursor that tl_op_finish adds in. */
float *tl_op_dst(const tl_program *p, const tl_exec *e, int i, int k, int64_t *cursor);
void tl_op_finish(const tl_program *p, const tl_exec *e, int i, int k, float *d);
/* n floats of the op's own scratch, after what *cursor has handed out. */
float *tl_op_scratch(const tl_exec *e, int64_t *cursor, int64_t n);

/* For an op of a partitioned replica's core (ops_spmd.c): TL_EINVAL unless
 * e runs on one; and the meeting of the replica's cores at its barrier
 * (TL_ERUNTIME when another core failed and broke it). */
tl_status tl_op_spmd_check(const tl_exec *e);
tl_status tl_op_spmd_meet(const tl_exec *e);
/* TL_OP_SPMD_CONV (ops_spmd_conv.c), for ops_spmd.c's family. */
tl_status tl_spmd_conv_forward(const tl_program *p, tl_exec *e, int i);
tl_status tl_spmd_conv_backward(const tl_program *p, tl_exec *e, int i, int64_t *cursor);
int64_t tl_spmd_conv_scratch(const tl_graph *g, int i);
int64_t tl_spmd_conv_aux(const tl_graph *g, int i);

/* Splits nd's shape at axis into (outer, shape[axis], inner). */
void tl_op_around(const tl_node *nd, int axis, int64_t *outer, int64_t *inner);

#endif /* TL_GRAPH_OPS_H */

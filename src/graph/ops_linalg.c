/* ops_linalg.c — batched matmul (tf.linalg.matmul, BatchMatMulV2) with
 * broadcast batch dimensions: tracing, forward and backward. tl_einsum
 * (einsum.c) traces into this op and the shape, reduce and element-wise ones. */
#include "../kernels/batch_matmul.h"
#include "ops.h"

#define SHAPE(node, buf) tl_shape_str((node)->shape, (node)->rank, buf, sizeof buf)

tl_t tl_batch_matmul(tl_graph *g, tl_t a, tl_t b, bool adj_a, bool adj_b)
{
    if (tl_graph_need_f32(g, a, "batch_matmul", "a") < 0 || tl_graph_need_f32(g, b, "batch_matmul", "b") < 0)
        return TL_T_INVALID;
    const tl_node *x = &g->nodes[a], *y = &g->nodes[b];
    char s1[96], s2[96], s3[96], s4[96];
    if (x->rank < 2 || y->rank < 2) {
        const tl_node *bad = x->rank < 2 ? x : y;
        return tl_graph_failf(g, TL_EINVAL, "batch_matmul: %s has shape %s, rank %d; the operands need rank >= 2",
                              bad == x ? "a" : "b", SHAPE(bad, s1), bad->rank);
    }
    int64_t ka = x->shape[x->rank - (adj_a ? 2 : 1)], kb = y->shape[y->rank - (adj_b ? 1 : 2)];
    if (ka != kb)
        return tl_graph_failf(g, TL_EINVAL,
                              "batch_matmul: inner dimensions differ: a %s%s gives K = %lld, b %s%s gives K = %lld",
                              SHAPE(x, s1), adj_a ? "^T" : "", (long long)ka, SHAPE(y, s2), adj_b ? "^T" : "",
                              (long long)kb);
    int rank = x->rank > y->rank ? x->rank : y->rank;
    for (int d = 0; d < rank - 2; d++) {
        int dx = d - (rank - x->rank), dy = d - (rank - y->rank);
        int64_t nx = dx >= 0 ? x->shape[dx] : 1, ny = dy >= 0 ? y->shape[dy] : 1;
        if (nx != ny && nx != 1 && ny != 1)
            return tl_graph_failf(g, TL_EINVAL,
                                  "batch_matmul: b %s has batch dimensions %s, which do not broadcast with a's %s "
                                  "of %s",
                                  SHAPE(y, s1), tl_shape_str(y->shape, y->rank - 2, s2, sizeof s2),
                                  tl_shape_str(x->shape, x->rank - 2, s3, sizeof s3), SHAPE(x, s4));
    }
    tl_k_bmm s;
    int64_t shape[TL_MAX_RANK];
    tl_status st = tl_k_bmm_init(&s, x->shape, x->rank, y->shape, y->rank, adj_a, adj_b, shape);
    TL_ASSERT(st == TL_OK); /* the shapes were checked above */
    tl_t in[2] = {a, b};
    tl_t t = tl_graph_add(g, TL_OP_BATCH_MATMUL, TL_F32, shape, rank, in, 2);
    if (t >= 0) {
        g->nodes[t].iattr[0] = adj_a;
        g->nodes[t].iattr[1] = adj_b;
    }
    return t;
}

/* Node i's geometry, from its inputs' shapes (checked when traced). */
static tl_k_bmm geometry(const tl_graph *g, int i)
{
    const tl_node *nd = &g->nodes[i], *a = &g->nodes[nd->in[0]], *b = &g->nodes[nd->in[1]];
    TL_ASSERT(nd->op == TL_OP_BATCH_MATMUL);
    tl_k_bmm s;
    tl_status st = tl_k_bmm_init(&s, a->shape, a->rank, b->shape, b->rank, nd->iattr[0], nd->iattr[1], NULL);
    TL_ASSERT(st == TL_OK);
    return s;
}

static tl_status forward(const tl_program *p, tl_exec *e, int i)
{
    const tl_node *nd = &p->g->nodes[i];
    tl_k_bmm s = geometry(p->g, i);
    return tl_k_batch_matmul(&s, tl_exec_value(p, e, nd->in[0]), tl_exec_value(p, e, nd->in[1]),
                             tl_exec_value(p, e, i));
}

/* Each input's gradient goes straight into its buffer, GEMM's beta choosing
 * overwrite (this op writes it first) or add: no scratch, even for x·xᵀ. */
static tl_status backward(const tl_program *p, tl_exec *e, int i, int64_t *cursor)
{
    (void)cursor;
    const tl_node *nd = &p->g->nodes[i];
    tl_k_bmm s = geometry(p->g, i);
    const float *a = tl_exec_value(p, e, nd->in[0]), *b = tl_exec_value(p, e, nd->in[1]);
    const float *dy = tl_op_grad(p, e, i);
    tl_status st = TL_OK;
    if (tl_op_wants(p, i, 0))
        st = tl_k_batch_matmul_grad(&s, a, b, dy, tl_op_first(p, i, 0) ? 0.0f : 1.0f, tl_op_grad(p, e, nd->in[0]),
                                    NULL);
    if (st == TL_OK && tl_op_wants(p, i, 1))
        st = tl_k_batch_matmul_grad(&s, a, b, dy, tl_op_first(p, i, 1) ? 0.0f : 1.0f, NULL,
                                    tl_op_grad(p, e, nd->in[1]));
    return st;
}

const tl_op_family tl_ops_linalg = {"linalg", TL_OP_LINALG_FIRST_, TL_OP_LINALG_LAST_, forward, backward,
                                    NULL, NULL, NULL};

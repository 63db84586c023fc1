/* ops_elementwise.c — broadcasting binary ops, unary math, activations,
 * comparisons, where, casts and constants: tracing (tpuloop/graph.h) and the
 * family's forward and backward passes (ops.h) over the kernels of
 * kernels/elementwise_bcast.h. */
#include <math.h>
#include <string.h>

#include "../kernels/elementwise_bcast.h"
#include "ops.h"

/* The kinds of each group lie in the order of the kernels' enums. */
_Static_assert(TL_OP_EW_POW - TL_OP_EW_ADD == TL_K_POW && TL_K_BINOP_COUNT_ == TL_K_POW + 1,
               "binary kinds follow tl_k_binop");
_Static_assert(TL_OP_EW_SOFTPLUS - TL_OP_EW_NEG == TL_K_SOFTPLUS &&
                   TL_OP_EW_GELU_TANH - TL_OP_EW_NEG == TL_K_GELU_TANH &&
                   TL_OP_EW_CLIP - TL_OP_EW_NEG == TL_K_CLIP && TL_K_UNOP_COUNT_ == TL_K_SOFTPLUS + 1,
               "unary kinds follow tl_k_unop");
_Static_assert(TL_OP_EW_GREATER_EQUAL - TL_OP_EW_EQUAL == TL_K_GREATER_EQUAL &&
                   TL_K_CMPOP_COUNT_ == TL_K_GREATER_EQUAL + 1,
               "comparison kinds follow tl_k_cmpop");

static bool is_binary(tl_op_kind k) { return k >= TL_OP_EW_ADD && k <= TL_OP_EW_POW; }
static bool is_unary(tl_op_kind k) { return k >= TL_OP_EW_NEG && k <= TL_OP_EW_SOFTPLUS; }
static bool is_compare(tl_op_kind k) { return k >= TL_OP_EW_EQUAL && k <= TL_OP_EW_GREATER_EQUAL; }

/* The kernels' element type of a graph dtype. */
static tl_k_elem elem(tl_dtype dt)
{
    switch (dt) {
    case TL_F32: return TL_K_F32;
    case TL_I32: return TL_K_I32;
    case TL_I64: return TL_K_I64;
    }
    TL_ASSERT(!"elem: unknown dtype");
    return TL_K_F32;
}

static tl_k_shape kshape(const tl_node *nd)
{
    tl_k_shape s;
    memset(&s, 0, sizeof s);
    s.rank = nd->rank;
    memcpy(s.dim, nd->shape, (size_t)nd->rank * sizeof *s.dim);
    return s;
}

#define SHAPE(node, buf) tl_shape_str((node)->shape, (node)->rank, buf, sizeof buf)

/* ---- tracing ------------------------------------------------------------------------ */

static bool need_tensor(tl_graph *g, tl_t t, const char *op, const char *what)
{
    if (tl_graph_valid(g, t))
        return true;
    if (g->status == TL_OK)
        tl_graph_failf(g, TL_EINVAL, "%s: %s is not a tensor of this graph", op, what);
    return false;
}

static bool need_f32(tl_graph *g, tl_t t, const char *op, const char *what)
{
    if (!need_tensor(g, t, op, what))
        return false;
    if (g->nodes[t].dtype != TL_F32) {
        tl_graph_failf(g, TL_EINVAL, "%s: %s must be float32, got %s", op, what, tl_dtype_name(g->nodes[t].dtype));
        return false;
    }
    return true;
}

/* The broadcast of x's and y's shapes, or the error naming both. */
static bool broadcast(tl_graph *g, const char *op, tl_t x, tl_t y, tl_k_shape *out)
{
    tl_k_shape xs = kshape(&g->nodes[x]), ys = kshape(&g->nodes[y]);
    if (tl_k_bcast_shape(&xs, &ys, out))
        return true;
    char s1[160], s2[160];
    tl_graph_failf(g, TL_EINVAL, "%s: y has shape %s, which does not broadcast with x %s", op,
                   SHAPE(&g->nodes[y], s1), SHAPE(&g->nodes[x], s2));
    return false;
}

static tl_t binary(tl_graph *g, tl_op_kind kind, const char *op, tl_t x, tl_t y)
{
    tl_k_shape out;
    if (!need_f32(g, x, op, "x") || !need_f32(g, y, op, "y") || !broadcast(g, op, x, y, &out))
        return TL_T_INVALID;
    tl_t in[2] = {x, y};
    return tl_graph_add(g, kind, TL_F32, out.dim, out.rank, in, 2);
}

tl_t tl_add(tl_graph *g, tl_t x, tl_t y) { return binary(g, TL_OP_EW_ADD, "add", x, y); }
tl_t tl_sub(tl_graph *g, tl_t x, tl_t y) { return binary(g, TL_OP_EW_SUB, "sub", x, y); }
tl_t tl_mul(tl_graph *g, tl_t x, tl_t y) { return binary(g, TL_OP_EW_MUL, "mul", x, y); }
tl_t tl_div(tl_graph *g, tl_t x, tl_t y) { return binary(g, TL_OP_EW_DIV, "div", x, y); }
tl_t tl_maximum(tl_graph *g, tl_t x, tl_t y) { return binary(g, TL_OP_EW_MAXIMUM, "maximum", x, y); }
tl_t tl_minimum(tl_graph *g, tl_t x, tl_t y) { return binary(g, TL_OP_EW_MINIMUM, "minimum", x, y); }
tl_t tl_pow(tl_graph *g, tl_t x, tl_t y) { return binary(g, TL_OP_EW_POW, "pow", x, y); }

tl_t tl_constant(tl_graph *g, double value, const int64_t *shape, int rank)
{
    if (g->status != TL_OK)
        return TL_T_INVALID;
    if (rank < 0 || rank > TL_MAX_RANK)
        return tl_graph_failf(g, TL_EINVAL, "constant: rank %d is outside [0, %d]", rank, TL_MAX_RANK);
    if (rank > 0 && shape == NULL)
        return tl_graph_failf(g, TL_EINVAL, "constant: shape is NULL with rank %d", rank);
    for (int d = 0; d < rank; d++)
        if (shape[d] < 1)
            return tl_graph_failf(g, TL_EINVAL, "constant: dimension %d has size %lld; sizes must be >= 1", d,
                                  (long long)shape[d]);
    tl_t t = tl_graph_add(g, TL_OP_EW_CONSTANT, TL_F32, shape, rank, NULL, 0);
    if (t >= 0)
        g->nodes[t].fattr[0] = value;
    return t;
}

static tl_t unary(tl_graph *g, tl_op_kind kind, const char *op, tl_t x, double a, double b)
{
    if (!need_f32(g, x, op, "x"))
        return TL_T_INVALID;
    tl_t t = tl_graph_add(g, kind, TL_F32, g->nodes[x].shape, g->nodes[x].rank, &x, 1);
    if (t >= 0) {
        g->nodes[t].fattr[0] = a;
        g->nodes[t].fattr[1] = b;
    }
    return t;
}

tl_t tl_neg(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_NEG, "neg", x, 0, 0); }
tl_t tl_abs(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_ABS, "abs", x, 0, 0); }
tl_t tl_exp(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_EXP, "exp", x, 0, 0); }
tl_t tl_ln(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_LOG, "ln", x, 0, 0); }
tl_t tl_sqrt(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_SQRT, "sqrt", x, 0, 0); }
tl_t tl_rsqrt(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_RSQRT, "rsqrt", x, 0, 0); }
tl_t tl_square(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_SQUARE, "square", x, 0, 0); }
tl_t tl_silu(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_SILU, "silu", x, 0, 0); }
tl_t tl_swish(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_SILU, "swish", x, 0, 0); }
tl_t tl_softplus(tl_graph *g, tl_t x) { return unary(g, TL_OP_EW_SOFTPLUS, "softplus", x, 0, 0); }

tl_t tl_gelu(tl_graph *g, tl_t x, bool approximate)
{
    return unary(g, approximate ? TL_OP_EW_GELU_TANH : TL_OP_EW_GELU, "gelu", x, 0, 0);
}

tl_t tl_clip(tl_graph *g, tl_t x, double lo, double hi)
{
    if (!need_f32(g, x, "clip", "x"))
        return TL_T_INVALID;
    /* The bounds become float32 tensors in TensorFlow: compare them so. */
    float l = (float)lo, h = (float)hi;
    if (isnan(l) || isnan(h) || l > h)
        return tl_graph_failf(g, TL_EINVAL, "clip: lo %g and hi %g must be numbers with lo <= hi", lo, hi);
    return unary(g, TL_OP_EW_CLIP, "clip", x, l, h);
}

static tl_t with_alpha(tl_graph *g, tl_op_kind kind, const char *op, tl_t x, double alpha)
{
    if (!need_f32(g, x, op, "x"))
        return TL_T_INVALID;
    if (!isfinite((float)alpha))
        return tl_graph_failf(g, TL_EINVAL, "%s: alpha must be a finite float32, got %g", op, alpha);
    return unary(g, kind, op, x, (float)alpha, 0);
}

tl_t tl_leaky_relu(tl_graph *g, tl_t x, double alpha)
{
    return with_alpha(g, TL_OP_EW_LEAKY_RELU, "leaky_relu", x, alpha);
}
tl_t tl_elu(tl_graph *g, tl_t x, double alpha) { return with_alpha(g, TL_OP_EW_ELU, "elu", x, alpha); }

static tl_t compare(tl_graph *g, tl_op_kind kind, const char *op, tl_t x, tl_t y)
{
    if (!need_tensor(g, x, op, "x") || !need_tensor(g, y, op, "y"))
        return TL_T_INVALID;
    tl_dtype dx = g->nodes[x].dtype, dy = g->nodes[y].dtype;
    if (dx != dy)
        return tl_graph_failf(g, TL_EINVAL, "%s: x is %s and y is %s; both must be float32, both int32 or both int64",
                              op, tl_dtype_name(dx), tl_dtype_name(dy));
    tl_k_shape out;
    if (!broadcast(g, op, x, y, &out))
        return TL_T_INVALID;
    tl_t in[2] = {x, y};
    tl_t t = tl_graph_add(g, kind, TL_F32, out.dim, out.rank, in, 2);
    if (t >= 0)
        g->nodes[t].needs_grad = false; /* a step function: no gradient flows back */
    return t;
}

tl_t tl_equal(tl_graph *g, tl_t x, tl_t y) { return compare(g, TL_OP_EW_EQUAL, "equal", x, y); }
tl_t tl_not_equal(tl_graph *g, tl_t x, tl_t y) { return compare(g, TL_OP_EW_NOT_EQUAL, "not_equal", x, y); }
tl_t tl_less(tl_graph *g, tl_t x, tl_t y) { return compare(g, TL_OP_EW_LESS, "less", x, y); }
tl_t tl_less_equal(tl_graph *g, tl_t x, tl_t y) { return compare(g, TL_OP_EW_LESS_EQUAL, "less_equal", x, y); }
tl_t tl_greater(tl_graph *g, tl_t x, tl_t y) { return compare(g, TL_OP_EW_GREATER, "greater", x, y); }
tl_t tl_greater_equal(tl_graph *g, tl_t x, tl_t y)
{
    return compare(g, TL_OP_EW_GREATER_EQUAL, "greater_equal", x, y);
}

tl_t tl_where(tl_graph *g, tl_t cond, tl_t x, tl_t y)
{
    if (!need_tensor(g, cond, "where", "cond") || !need_f32(g, x, "where", "x") || !need_f32(g, y, "where", "y"))
        return TL_T_INVALID;
    const tl_node *c = &g->nodes[cond];
    if (c->dtype != TL_F32 && c->dtype != TL_I32)
        return tl_graph_failf(g, TL_EINVAL, "where: cond must be a float32 mask or int32, got %s",
                              tl_dtype_name(c->dtype));
    tl_k_shape cs = kshape(c), xs = kshape(&g->nodes[x]), ys = kshape(&g->nodes[y]), cx, out;
    char s1[160], s2[160];
    if (!tl_k_bcast_shape(&cs, &xs, &cx))
        return tl_graph_failf(g, TL_EINVAL, "where: x has shape %s, which does not broadcast with cond %s",
                              SHAPE(&g->nodes[x], s1), SHAPE(c, s2));
    if (!tl_k_bcast_shape(&cx, &ys, &out))
        return tl_graph_failf(g, TL_EINVAL, "where: y has shape %s, which does not broadcast with cond and x %s",
                              SHAPE(&g->nodes[y], s1), tl_shape_str(cx.dim, cx.rank, s2, sizeof s2));
    tl_t in[3] = {cond, x, y};
    return tl_graph_add(g, TL_OP_EW_WHERE, TL_F32, out.dim, out.rank, in, 3);
}

tl_t tl_cast(tl_graph *g, tl_t x, tl_dtype to)
{
    if (!need_tensor(g, x, "cast", "x"))
        return TL_T_INVALID;
    if (to != TL_F32 && to != TL_I32 && to != TL_I64)
        return tl_graph_failf(g, TL_EINVAL, "cast: to must be TL_F32, TL_I32 or TL_I64, got %d", (int)to);
    if (g->nodes[x].dtype == to)
        return x; /* tf.cast to the same dtype is the identity */
    /* To an integer the node carries no gradient (tl_graph_add); from one the
     * input carries none to pass on. */
    return tl_graph_add(g, TL_OP_EW_CAST, to, g->nodes[x].shape, g->nodes[x].rank, &x, 1);
}

/* ---- running ------------------------------------------------------------------------ */

/* The broadcast plan of node nd's inputs (shapes checked when it was traced). */
static tl_status plan(const tl_graph *g, const tl_node *nd, tl_k_bcast *b)
{
    tl_k_shape s[TL_K_BCAST_MAX_IN];
    TL_ASSERT(nd->nin <= TL_K_BCAST_MAX_IN);
    for (int k = 0; k < nd->nin; k++)
        s[k] = kshape(&g->nodes[nd->in[k]]);
    return tl_k_bcast_init(b, nd->nin, s);
}

static tl_status forward(const tl_program *p, tl_exec *e, int i)
{
    const tl_graph *g = p->g;
    const tl_node *nd = &g->nodes[i];
    float *z = tl_exec_value(p, e, i);
    tl_k_bcast b;
    tl_status st = TL_OK;
    if (nd->op == TL_OP_EW_CONSTANT) {
        tl_k_constant(nd->size, (float)nd->fattr[0], z);
    } else if (is_unary(nd->op)) {
        tl_k_unary((tl_k_unop)(nd->op - TL_OP_EW_NEG), nd->size, (float)nd->fattr[0], (float)nd->fattr[1],
                   tl_exec_value(p, e, nd->in[0]), z);
    } else if (nd->op == TL_OP_EW_CAST) {
        tl_k_cast(nd->size, elem(g->nodes[nd->in[0]].dtype), tl_exec_value(p, e, nd->in[0]), elem(nd->dtype), z);
    } else if (p->fuse[i] == TL_FUSE_RELU) { /* relu(a + b), one shape (compile.c) */
        tl_k_add_relu(nd->size, tl_exec_value(p, e, nd->in[0]), tl_exec_value(p, e, nd->in[1]), z);
    } else if ((st = plan(g, nd, &b)) != TL_OK) {
        return st;
    } else if (is_binary(nd->op)) {
        tl_k_binary((tl_k_binop)(nd->op - TL_OP_EW_ADD), &b, tl_exec_value(p, e, nd->in[0]),
                    tl_exec_value(p, e, nd->in[1]), z);
    } else if (is_compare(nd->op)) {
        tl_k_compare((tl_k_cmpop)(nd->op - TL_OP_EW_EQUAL), elem(g->nodes[nd->in[0]].dtype), &b,
                     tl_exec_value(p, e, nd->in[0]), tl_exec_value(p, e, nd->in[1]), z);
    } else {
        TL_ASSERT(nd->op == TL_OP_EW_WHERE);
        tl_k_where(&b, elem(g->nodes[nd->in[0]].dtype), tl_exec_value(p, e, nd->in[0]), tl_exec_value(p, e, nd->in[1]),
                   tl_exec_value(p, e, nd->in[2]), z);
    }
    return st;
}

static tl_status backward(const tl_program *p, tl_exec *e, int i, int64_t *cur)
{
    const tl_graph *g = p->g;
    const tl_node *nd = &g->nodes[i];
    const float *dz = tl_op_grad(p, e, i);
    if (is_unary(nd->op)) {
        if (tl_op_wants(p, i, 0)) {
            float *dx = tl_op_dst(p, e, i, 0, cur);
            tl_k_unary_grad((tl_k_unop)(nd->op - TL_OP_EW_NEG), nd->size, (float)nd->fattr[0], (float)nd->fattr[1],
                            tl_exec_value(p, e, nd->in[0]), tl_exec_value(p, e, i), dz, dx);
            tl_op_finish(p, e, i, 0, dx);
        }
        return TL_OK;
    }
    /* Constants, comparisons and casts carry no gradient (the planner gives
     * them none); what is left broadcasts. */
    TL_ASSERT(is_binary(nd->op) || nd->op == TL_OP_EW_WHERE);
    if (p->fuse[i] == TL_FUSE_RELU) { /* relu(a + b): dz gated by the ReLU to both terms */
        float *d0 = tl_op_wants(p, i, 0) ? tl_op_dst(p, e, i, 0, cur) : NULL;
        float *d1 = tl_op_wants(p, i, 1) ? tl_op_dst(p, e, i, 1, cur) : NULL;
        tl_k_add_relu_grad(nd->size, tl_exec_value(p, e, i), dz, d0, d1);
        if (d0 != NULL)
            tl_op_finish(p, e, i, 0, d0);
        if (d1 != NULL)
            tl_op_finish(p, e, i, 1, d1);
        return TL_OK;
    }
    tl_k_bcast b;
    tl_status st = plan(g, nd, &b);
    if (st != TL_OK)
        return st;
    float *d[TL_K_BCAST_MAX_IN] = {NULL, NULL, NULL};
    for (int k = 0; k < nd->nin; k++)
        if (tl_op_wants(p, i, k))
            d[k] = tl_op_dst(p, e, i, k, cur);
    float *scratch = tl_op_scratch(e, cur, tl_k_binary_grad_scratch(&b));
    if (is_binary(nd->op)) {
        tl_k_binary_grad((tl_k_binop)(nd->op - TL_OP_EW_ADD), &b, tl_exec_value(p, e, nd->in[0]),
                         tl_exec_value(p, e, nd->in[1]), dz, d[0], d[1], scratch);
    } else {
        if (d[0] != NULL) /* a float32 mask computed from variables: its gradient is zero */
            memset(d[0], 0, (size_t)g->nodes[nd->in[0]].size * sizeof *d[0]);
        tl_k_where_grad(&b, elem(g->nodes[nd->in[0]].dtype), tl_exec_value(p, e, nd->in[0]), dz, d[1], d[2], scratch);
    }
    for (int k = 0; k < nd->nin; k++)
        if (d[k] != NULL)
            tl_op_finish(p, e, i, k, d[k]);
    return TL_OK;
}

/* The broadcast ops stage the terms of a broadcast input's gradient and its
 * float64 sums. */
static int64_t scratch(const tl_graph *g, int i)
{
    const tl_node *nd = &g->nodes[i];
    tl_k_bcast b;
    if (!(is_binary(nd->op) || nd->op == TL_OP_EW_WHERE) || plan(g, nd, &b) != TL_OK)
        return 0;
    return tl_k_binary_grad_scratch(&b);
}

const tl_op_family tl_ops_elementwise = {"elementwise", TL_OP_EW_FIRST_, TL_OP_EW_LAST_, forward, backward,
                                         scratch, NULL, NULL};

/* ops_reduce.c — reductions over axes, argmax / argmin, softmax / log_softmax / logsumexp, losses and metrics:
 * their constructors (tpuloop/graph.h), and forward and backward passes over the kernels of
 * kernels/reduce_axes.h and kernels/reduce_losses.h. No op of the family needs scratch: the backward kernels
 * recompute what they need (row maxima, sums of exponentials) from the inputs and the op's output. */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "../kernels/reduce_axes.h"
#include "../kernels/reduce_losses.h"
#include "ops.h"

_Static_assert(TL_MAX_RANK <= TL_K_AXES_MAX_RANK, "the kernels take every rank a graph holds");
_Static_assert(TL_MAX_RANK <= 32, "reduced axes are a 32-bit mask");

#define SHAPE(node, buf) tl_shape_str((node)->shape, (node)->rank, buf, sizeof buf)

/* "(2, -1)", "(0,)": the axes as the caller gave them, the first 16. */
static const char *axes_str(const int *axes, int naxes, char *buf, size_t n)
{
    size_t off = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < naxes && i < 16 && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%d", i ? ", " : "", axes[i]);
    if (off < n)
        snprintf(buf + off, n - off, naxes > 16 ? ", ...)" : naxes == 1 ? ",)" : ")");
    return buf;
}

/* axis in [-rank, rank) made non-negative; -1 (and the error recorded) when out of range. */
static int axis_of(tl_graph *g, const char *op, tl_t x, int axis)
{
    const tl_node *a = &g->nodes[x];
    char s[96];
    if (a->rank == 0) {
        tl_graph_failf(g, TL_EINVAL, "%s: x has shape (), a scalar; it needs rank >= 1 (got axis %d)", op, axis);
        return -1;
    }
    if (axis < -a->rank || axis >= a->rank) {
        tl_graph_failf(g, TL_EINVAL, "%s: axis %d is outside [%d, %d) for x of shape %s", op, axis, -a->rank, a->rank,
                       SHAPE(a, s));
        return -1;
    }
    return axis < 0 ? axis + a->rank : axis;
}

/* The reduced axes of x as a mask (naxes 0: all); false (and the error recorded) on a bad axis. */
static bool axes_mask(tl_graph *g, const char *op, tl_t x, const int *axes, int naxes, uint32_t *mask)
{
    const tl_node *a = &g->nodes[x];
    char s1[96], s2[160];
    if (naxes < 0) {
        tl_graph_failf(g, TL_EINVAL, "%s: naxes must be >= 0 (0 reduces every axis), got %d", op, naxes);
        return false;
    }
    if (naxes > 0 && axes == NULL) {
        tl_graph_failf(g, TL_EINVAL, "%s: axes is NULL but naxes is %d", op, naxes);
        return false;
    }
    if (naxes == 0) {
        *mask = a->rank == 0 ? 0u : (uint32_t)((1ull << a->rank) - 1);
        return true;
    }
    uint32_t m = 0;
    for (int i = 0; i < naxes; i++) {
        int d = axes[i];
        if (d < -a->rank || d >= a->rank) {
            tl_graph_failf(g, TL_EINVAL, "%s: axis %d is outside [%d, %d) for x of shape %s", op, d, -a->rank,
                           a->rank, SHAPE(a, s1));
            return false;
        }
        d = d < 0 ? d + a->rank : d;
        if ((m >> d) & 1u) {
            tl_graph_failf(g, TL_EINVAL, "%s: axes %s name axis %d of x %s twice", op,
                           axes_str(axes, naxes, s2, sizeof s2), d, SHAPE(a, s1));
            return false;
        }
        m |= 1u << d;
    }
    *mask = m;
    return true;
}

static tl_t reduction(tl_graph *g, tl_op_kind kind, const char *op, tl_t x, const int *axes, int naxes,
                      bool keepdims)
{
    uint32_t mask;
    if (tl_graph_need_f32(g, x, op, "x") < 0 || !axes_mask(g, op, x, axes, naxes, &mask))
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    int64_t shape[TL_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < a->rank; d++)
        if (!((mask >> d) & 1u))
            shape[rank++] = a->shape[d];
        else if (keepdims)
            shape[rank++] = 1;
    tl_t t = tl_graph_add(g, kind, TL_F32, shape, rank, &x, 1);
    if (t >= 0) {
        g->nodes[t].iattr[0] = mask;
        g->nodes[t].iattr[1] = keepdims;
    }
    return t;
}

tl_t tl_reduce_sum(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims)
{
    return reduction(g, TL_OP_REDUCE_SUM, "reduce_sum", x, axes, naxes, keepdims);
}

tl_t tl_reduce_mean(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims)
{
    return reduction(g, TL_OP_REDUCE_MEAN, "reduce_mean", x, axes, naxes, keepdims);
}

tl_t tl_reduce_max(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims)
{
    return reduction(g, TL_OP_REDUCE_MAX, "reduce_max", x, axes, naxes, keepdims);
}

tl_t tl_reduce_min(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims)
{
    return reduction(g, TL_OP_REDUCE_MIN, "reduce_min", x, axes, naxes, keepdims);
}

tl_t tl_logsumexp(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims)
{
    return reduction(g, TL_OP_REDUCE_LOGSUMEXP, "logsumexp", x, axes, naxes, keepdims);
}

static tl_t arg_extreme(tl_graph *g, tl_op_kind kind, const char *op, tl_t x, int axis, tl_dtype output_type)
{
    if (tl_graph_need_f32(g, x, op, "x") < 0)
        return TL_T_INVALID;
    if (output_type != TL_I32 && output_type != TL_I64)
        return tl_graph_failf(g, TL_EINVAL, "%s: output_type must be int32 or int64, got %s", op,
                              tl_dtype_name(output_type));
    int d = axis_of(g, op, x, axis);
    if (d < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    char s[96];
    if (output_type == TL_I32 && a->shape[d] > INT32_MAX)
        return tl_graph_failf(g, TL_EINVAL, "%s: axis %d of x %s has %lld elements, more than an int32 index reaches; "
                              "use output_type int64", op, axis, SHAPE(a, s), (long long)a->shape[d]);
    int64_t shape[TL_MAX_RANK];
    int rank = 0;
    for (int k = 0; k < a->rank; k++)
        if (k != d)
            shape[rank++] = a->shape[k];
    tl_t t = tl_graph_add(g, kind, output_type, shape, rank, &x, 1);
    if (t >= 0)
        g->nodes[t].iattr[0] = d;
    return t;
}

tl_t tl_argmax(tl_graph *g, tl_t x, int axis, tl_dtype output_type)
{
    return arg_extreme(g, TL_OP_REDUCE_ARGMAX, "argmax", x, axis, output_type);
}

tl_t tl_argmin(tl_graph *g, tl_t x, int axis, tl_dtype output_type)
{
    return arg_extreme(g, TL_OP_REDUCE_ARGMIN, "argmin", x, axis, output_type);
}

static tl_t softmax_like(tl_graph *g, tl_op_kind kind, const char *op, tl_t x, int axis)
{
    if (tl_graph_need_f32(g, x, op, "x") < 0)
        return TL_T_INVALID;
    int d = axis_of(g, op, x, axis);
    if (d < 0)
        return TL_T_INVALID;
    tl_t t = tl_graph_add(g, kind, TL_F32, g->nodes[x].shape, g->nodes[x].rank, &x, 1);
    if (t >= 0)
        g->nodes[t].iattr[0] = d;
    return t;
}

tl_t tl_softmax(tl_graph *g, tl_t x, int axis)
{
    return softmax_like(g, TL_OP_REDUCE_SOFTMAX, "softmax", x, axis);
}

tl_t tl_log_softmax(tl_graph *g, tl_t x, int axis)
{
    return softmax_like(g, TL_OP_REDUCE_LOG_SOFTMAX, "log_softmax", x, axis);
}

/* logits float32 of rank >= 1 and label_smoothing in [0, 1]. */
static bool check_logits(tl_graph *g, const char *op, tl_t logits, double label_smoothing)
{
    if (tl_graph_need_f32(g, logits, op, "logits") < 0)
        return false;
    if (g->nodes[logits].rank == 0) {
        tl_graph_failf(g, TL_EINVAL, "%s: logits has shape (), a scalar; it needs rank >= 1 (classes last)", op);
        return false;
    }
    if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
        tl_graph_failf(g, TL_EINVAL, "%s: label_smoothing must be in [0, 1], got %g", op, label_smoothing);
        return false;
    }
    return true;
}

static bool same_shape(const tl_node *a, const tl_node *b)
{
    return a->rank == b->rank && memcmp(a->shape, b->shape, (size_t)a->rank * sizeof *a->shape) == 0;
}

tl_t tl_softmax_xent_dense(tl_graph *g, tl_t logits, tl_t labels, double label_smoothing)
{
    const char *op = "softmax_xent_dense";
    if (!check_logits(g, op, logits, label_smoothing) || tl_graph_need_f32(g, labels, op, "labels") < 0)
        return TL_T_INVALID;
    const tl_node *z = &g->nodes[logits], *l = &g->nodes[labels];
    char s1[96], s2[96];
    if (!same_shape(z, l))
        return tl_graph_failf(g, TL_EINVAL, "%s: labels %s must have the shape of logits %s", op, SHAPE(l, s2),
                              SHAPE(z, s1));
    tl_t in[2] = {logits, labels};
    tl_t t = tl_graph_add(g, TL_OP_REDUCE_XENT_DENSE, TL_F32, z->shape, z->rank - 1, in, 2);
    if (t >= 0)
        g->nodes[t].fattr[0] = label_smoothing;
    return t;
}

/* labels int32 or int64 of shape want[0..rank-1] (a's shape without its last axis when last). */
static bool check_int_labels(tl_graph *g, const char *op, const char *what, tl_t labels, tl_t of, bool last)
{
    if (!tl_graph_valid(g, labels)) {
        if (g->status == TL_OK)
            tl_graph_failf(g, TL_EINVAL, "%s: %s are not a tensor of this graph (no labels in PREDICT)", op, what);
        return false;
    }
    const tl_node *a = &g->nodes[of], *l = &g->nodes[labels];
    char s1[96], s2[96], s3[96];
    if (l->dtype != TL_I32 && l->dtype != TL_I64) {
        tl_graph_failf(g, TL_EINVAL, "%s: %s must be int32 or int64, got %s", op, what, tl_dtype_name(l->dtype));
        return false;
    }
    int rank = last ? a->rank - 1 : 1;
    if (l->rank != rank || memcmp(l->shape, a->shape, (size_t)rank * sizeof *a->shape) != 0) {
        tl_graph_failf(g, TL_EINVAL, "%s: %s %s must have shape %s, %s of %s %s", op, what, SHAPE(l, s1),
                       tl_shape_str(a->shape, rank, s2, sizeof s2),
                       last ? "the shape without the last axis" : "the first dimension",
                       last ? "logits" : "predictions", SHAPE(a, s3));
        return false;
    }
    return true;
}

tl_t tl_sparse_softmax_xent(tl_graph *g, tl_t logits, tl_t labels, double label_smoothing)
{
    const char *op = "sparse_softmax_xent";
    if (!check_logits(g, op, logits, label_smoothing) || !check_int_labels(g, op, "labels", labels, logits, true))
        return TL_T_INVALID;
    tl_t in[2] = {logits, labels};
    tl_t t = tl_graph_add(g, TL_OP_REDUCE_XENT_SPARSE, TL_F32, g->nodes[logits].shape, g->nodes[logits].rank - 1,
                          in, 2);
    if (t >= 0)
        g->nodes[t].fattr[0] = label_smoothing;
    return t;
}

tl_t tl_huber(tl_graph *g, tl_t predictions, tl_t labels, double delta)
{
    const char *op = "huber";
    if (tl_graph_need_f32(g, predictions, op, "predictions") < 0 || tl_graph_need_f32(g, labels, op, "labels") < 0)
        return TL_T_INVALID;
    const tl_node *p = &g->nodes[predictions], *l = &g->nodes[labels];
    char s1[96], s2[96];
    if (!same_shape(p, l))
        return tl_graph_failf(g, TL_EINVAL, "%s: labels %s must have the shape of predictions %s", op, SHAPE(l, s2),
                              SHAPE(p, s1));
    /* As the kernel: delta must survive the rounding to float32. */
    if (!(delta > 0.0 && delta <= FLT_MAX && (float)delta > 0.0f))
        return tl_graph_failf(g, TL_EINVAL, "%s: delta must be a positive finite float32 number, got %g", op, delta);
    tl_t in[2] = {predictions, labels};
    tl_t t = tl_graph_add(g, TL_OP_REDUCE_HUBER, TL_F32, p->shape, p->rank, in, 2);
    if (t >= 0)
        g->nodes[t].fattr[0] = delta;
    return t;
}

tl_t tl_in_top_k(tl_graph *g, tl_t predictions, tl_t targets, int k)
{
    const char *op = "in_top_k";
    if (tl_graph_need_f32(g, predictions, op, "predictions") < 0)
        return TL_T_INVALID;
    const tl_node *p = &g->nodes[predictions];
    char s[96];
    if (p->rank != 2)
        return tl_graph_failf(g, TL_EINVAL, "%s: predictions must be (batch, classes), got %s", op, SHAPE(p, s));
    if (!check_int_labels(g, op, "targets", targets, predictions, false))
        return TL_T_INVALID;
    if (k < 0)
        return tl_graph_failf(g, TL_EINVAL, "%s: k must be >= 0, got %d", op, k);
    tl_t in[2] = {predictions, targets};
    tl_t t = tl_graph_add(g, TL_OP_REDUCE_IN_TOP_K, TL_F32, p->shape, 1, in, 2);
    if (t >= 0) {
        g->nodes[t].iattr[0] = k;
        g->nodes[t].needs_grad = false; /* a metric: a constant to the backward pass */
    }
    return t;
}

/* ---- running ------------------------------------------------------------------------------ */

static float *val(const tl_program *p, const tl_exec *e, tl_t t)
{
    return tl_exec_value(p, e, t);
}

/* (batch, classes) of logits (..., classes). */
static void rows_of(const tl_node *z, int64_t *batch, int64_t *classes)
{
    *classes = z->shape[z->rank - 1];
    *batch = z->size / *classes;
}

static tl_status forward(const tl_program *p, tl_exec *e, int i)
{
    const tl_graph *g = p->g;
    const tl_node *nd = &g->nodes[i], *x = &g->nodes[nd->in[0]];
    const float *xv = val(p, e, nd->in[0]);
    float *y = val(p, e, i);
    const uint32_t axes = (uint32_t)nd->iattr[0];
    const int axis = (int)nd->iattr[0];
    const bool wide = nd->nin > 1 && g->nodes[nd->in[1]].dtype == TL_I64;
    int64_t outer, inner, batch, classes;
    switch (nd->op) {
    case TL_OP_REDUCE_SUM: tl_k_reduce_sum_axes(x->rank, x->shape, axes, xv, y); return TL_OK;
    case TL_OP_REDUCE_MEAN: tl_k_reduce_mean_axes(x->rank, x->shape, axes, xv, y); return TL_OK;
    case TL_OP_REDUCE_MAX: tl_k_reduce_max_axes(x->rank, x->shape, axes, xv, y); return TL_OK;
    case TL_OP_REDUCE_MIN: tl_k_reduce_min_axes(x->rank, x->shape, axes, xv, y); return TL_OK;
    case TL_OP_REDUCE_LOGSUMEXP: tl_k_logsumexp_axes(x->rank, x->shape, axes, xv, y); return TL_OK;
    case TL_OP_REDUCE_ARGMAX:
    case TL_OP_REDUCE_ARGMIN:
        tl_op_around(x, axis, &outer, &inner);
        return (nd->op == TL_OP_REDUCE_ARGMAX ? tl_k_argmax : tl_k_argmin)(outer, x->shape[axis], inner, xv,
                                                                           nd->dtype == TL_I64, y);
    case TL_OP_REDUCE_SOFTMAX:
    case TL_OP_REDUCE_LOG_SOFTMAX:
        tl_op_around(x, axis, &outer, &inner);
        (nd->op == TL_OP_REDUCE_SOFTMAX ? tl_k_softmax : tl_k_log_softmax)(outer, x->shape[axis], inner, xv, y);
        return TL_OK;
    case TL_OP_REDUCE_XENT_DENSE:
        rows_of(x, &batch, &classes);
        return tl_k_softmax_xent_dense(batch, classes, nd->fattr[0], xv, val(p, e, nd->in[1]), y);
    case TL_OP_REDUCE_XENT_SPARSE:
        rows_of(x, &batch, &classes);
        return tl_k_sparse_xent(batch, classes, nd->fattr[0], xv, wide, val(p, e, nd->in[1]), y);
    case TL_OP_REDUCE_HUBER: return tl_k_huber(nd->size, nd->fattr[0], xv, val(p, e, nd->in[1]), y);
    case TL_OP_REDUCE_IN_TOP_K:
        return tl_k_in_top_k(x->shape[0], x->shape[1], nd->iattr[0], xv, wide, val(p, e, nd->in[1]), y);
    default: break;
    }
    TL_ASSERT(!"a kind of the reduce family");
    return TL_EINVAL;
}

static tl_status backward(const tl_program *p, tl_exec *e, int i, int64_t *cursor)
{
    const tl_graph *g = p->g;
    const tl_node *nd = &g->nodes[i], *x = &g->nodes[nd->in[0]];
    const float *dy = tl_op_grad(p, e, i), *xv = val(p, e, nd->in[0]), *y = val(p, e, i);
    const uint32_t axes = (uint32_t)nd->iattr[0];
    const int axis = (int)nd->iattr[0];
    int64_t outer, inner, batch, classes;
    /* Every input gradient's destination first: tl_op_dst hands out the staging scratch. */
    float *d0 = tl_op_wants(p, i, 0) ? tl_op_dst(p, e, i, 0, cursor) : NULL;
    float *d1 = nd->nin > 1 && tl_op_wants(p, i, 1) ? tl_op_dst(p, e, i, 1, cursor) : NULL;
    tl_status st = TL_OK;
    switch (nd->op) {
    case TL_OP_REDUCE_SUM:
    case TL_OP_REDUCE_MEAN:
    case TL_OP_REDUCE_MAX:
    case TL_OP_REDUCE_MIN:
    case TL_OP_REDUCE_LOGSUMEXP:
        if (d0 == NULL)
            break;
        if (nd->op == TL_OP_REDUCE_SUM)
            tl_k_reduce_sum_axes_grad(x->rank, x->shape, axes, dy, d0);
        else if (nd->op == TL_OP_REDUCE_MEAN)
            tl_k_reduce_mean_axes_grad(x->rank, x->shape, axes, dy, d0);
        else if (nd->op == TL_OP_REDUCE_LOGSUMEXP)
            tl_k_logsumexp_axes_grad(x->rank, x->shape, axes, xv, dy, d0);
        else
            tl_k_reduce_extreme_axes_grad(x->rank, x->shape, axes, xv, y, dy, d0);
        break;
    case TL_OP_REDUCE_SOFTMAX:
    case TL_OP_REDUCE_LOG_SOFTMAX:
        if (d0 == NULL)
            break;
        tl_op_around(x, axis, &outer, &inner);
        (nd->op == TL_OP_REDUCE_SOFTMAX ? tl_k_softmax_grad : tl_k_log_softmax_grad)(outer, x->shape[axis], inner,
                                                                                     y, dy, d0);
        break;
    case TL_OP_REDUCE_XENT_DENSE:
        rows_of(x, &batch, &classes);
        st = tl_k_softmax_xent_dense_grad(batch, classes, nd->fattr[0], xv, val(p, e, nd->in[1]), dy, d0, d1);
        break;
    case TL_OP_REDUCE_XENT_SPARSE:
        if (d0 == NULL)
            break;
        rows_of(x, &batch, &classes);
        st = tl_k_sparse_xent_grad(batch, classes, nd->fattr[0], xv, g->nodes[nd->in[1]].dtype == TL_I64,
                                   val(p, e, nd->in[1]), dy, d0);
        break;
    case TL_OP_REDUCE_HUBER:
        st = tl_k_huber_grad(nd->size, nd->fattr[0], xv, val(p, e, nd->in[1]), dy, d0, d1);
        break;
    default:
        /* argmax, argmin (integer results) and in_top_k (needs_grad false) never get a gradient. */
        TL_ASSERT(!"a differentiable kind of the reduce family");
        break;
    }
    if (st != TL_OK)
        return st;
    if (d0 != NULL)
        tl_op_finish(p, e, i, 0, d0);
    if (d1 != NULL)
        tl_op_finish(p, e, i, 1, d1);
    return TL_OK;
}

const tl_op_family tl_ops_reduce = {"reduce", TL_OP_REDUCE_FIRST_, TL_OP_REDUCE_LAST_, forward, backward,
                                    NULL, NULL, NULL};

/* ops_shape.c — transpose, expand_dims / squeeze, broadcast_to, gather,
 * one_hot, split, stack, pad, tile: their tracing (shape checks, sticky
 * errors) and their forward and backward passes on the kernels of
 * kernels/shape.h. split traces as slices and stack as expand_dims + concat,
 * so they have no kind of their own. */
#include <stdio.h>
#include <string.h>

#include "../kernels/shape.h"
#include "ops.h"

#define SHAPE(node, buf) tl_shape_str((node)->shape, (node)->rank, buf, sizeof buf)

/* ---- tracing helpers ------------------------------------------------------------ */

/* t if it is a tensor of g (any dtype), else TL_T_INVALID and the error. */
static tl_t need_tensor(tl_graph *g, tl_t t, const char *op, const char *what)
{
    if (tl_graph_valid(g, t))
        return t;
    return g->status == TL_OK ? tl_graph_failf(g, TL_EINVAL, "%s: %s is not a tensor of this graph", op, what)
                              : TL_T_INVALID;
}

static tl_t need_indices(tl_graph *g, tl_t t, const char *op)
{
    if (need_tensor(g, t, op, "indices") < 0)
        return TL_T_INVALID;
    tl_dtype dt = g->nodes[t].dtype;
    if (dt != TL_I32 && dt != TL_I64)
        return tl_graph_failf(g, TL_EINVAL, "%s: indices must be int32 or int64, got %s", op, tl_dtype_name(dt));
    return t;
}

/* Python's axis in [-n, n) made >= 0; false when outside. */
static bool wrap_axis(int *axis, int n)
{
    if (*axis < -n || *axis >= n)
        return false;
    if (*axis < 0)
        *axis += n;
    return true;
}

/* ---- transpose ------------------------------------------------------------------- */

tl_t tl_transpose(tl_graph *g, tl_t x, const int *perm, int n)
{
    if (tl_graph_need_f32(g, x, "transpose", "x") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    const int rank = a->rank;
    char s1[96];
    int p[TL_MAX_RANK];
    if (perm == NULL) { /* TF's default: the axes reversed */
        for (int d = 0; d < rank; d++)
            p[d] = rank - 1 - d;
    } else {
        if (n != rank)
            return tl_graph_failf(g, TL_EINVAL, "transpose: perm has %d axes; x %s has rank %d", n, SHAPE(a, s1), rank);
        bool seen[TL_MAX_RANK] = {false}, ok = true;
        for (int d = 0; d < rank; d++) {
            p[d] = perm[d];
            ok = ok && wrap_axis(&p[d], rank) && !seen[p[d]];
            if (ok)
                seen[p[d]] = true;
        }
        if (!ok) {
            char list[160];
            size_t off = (size_t)snprintf(list, sizeof list, "(");
            for (int d = 0; d < rank && off < sizeof list; d++)
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", d ? ", " : "", perm[d]);
            if (off < sizeof list)
                snprintf(list + off, sizeof list - off, rank == 1 ? ",)" : ")");
            return tl_graph_failf(g, TL_EINVAL, "transpose: perm %s is not a permutation of 0..%d", list, rank - 1);
        }
    }
    int64_t shape[TL_MAX_RANK];
    for (int d = 0; d < rank; d++)
        shape[d] = a->shape[p[d]];
    tl_t t = tl_graph_add(g, TL_OP_TRANSPOSE, TL_F32, shape, rank, &x, 1);
    if (t >= 0)
        for (int d = 0; d < rank; d++)
            g->nodes[t].iattr[d] = p[d];
    return t;
}

/* ---- expand_dims and squeeze: views ---------------------------------------------- */

tl_t tl_expand_dims(tl_graph *g, tl_t x, int axis)
{
    if (need_tensor(g, x, "expand_dims", "x") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    char s1[96];
    if (a->rank >= TL_MAX_RANK)
        return tl_graph_failf(g, TL_EINVAL, "expand_dims: x %s has rank %d already, the most a tensor may have",
                              SHAPE(a, s1), a->rank);
    int ax = axis;
    if (!wrap_axis(&ax, a->rank + 1))
        return tl_graph_failf(g, TL_EINVAL, "expand_dims: axis %d is outside [%d, %d] for x %s", axis, -a->rank - 1,
                              a->rank, SHAPE(a, s1));
    int64_t shape[TL_MAX_RANK];
    for (int d = 0, k = 0; d <= a->rank; d++)
        shape[d] = d == ax ? 1 : a->shape[k++];
    tl_t t = tl_graph_add(g, TL_OP_EXPAND_DIMS, a->dtype, shape, a->rank + 1, &x, 1);
    if (t >= 0)
        g->nodes[t].iattr[0] = ax;
    return t;
}

tl_t tl_squeeze(tl_graph *g, tl_t x, const int *axes, int n)
{
    if (need_tensor(g, x, "squeeze", "x") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    char s1[96];
    if (n < 0 || (n > 0 && axes == NULL))
        return tl_graph_failf(g, TL_EINVAL, "squeeze: %d axes given%s", n, n > 0 ? " but axes is NULL" : "");
    bool drop[TL_MAX_RANK] = {false};
    for (int k = 0; k < n; k++) {
        int ax = axes[k];
        if (!wrap_axis(&ax, a->rank))
            return tl_graph_failf(g, TL_EINVAL, "squeeze: axis %d is outside [%d, %d) for x %s", axes[k], -a->rank,
                                  a->rank, SHAPE(a, s1));
        if (a->shape[ax] != 1)
            return tl_graph_failf(g, TL_EINVAL, "squeeze: dim %d of x %s has size %lld, not 1", ax, SHAPE(a, s1),
                                  (long long)a->shape[ax]);
        drop[ax] = true; /* a repeated axis is harmless, as TF */
    }
    int64_t shape[TL_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < a->rank; d++)
        if (!(n == 0 ? a->shape[d] == 1 : drop[d]))
            shape[rank++] = a->shape[d];
    return tl_graph_add(g, TL_OP_SQUEEZE, a->dtype, shape, rank, &x, 1);
}

/* ---- broadcast_to, tile, pad ------------------------------------------------------- */

tl_t tl_broadcast_to(tl_graph *g, tl_t x, const int64_t *shape, int rank)
{
    if (tl_graph_need_f32(g, x, "broadcast_to", "x") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    char s1[96], s2[96];
    if (rank < a->rank || rank > TL_MAX_RANK || (rank > 0 && shape == NULL))
        return tl_graph_failf(g, TL_EINVAL, "broadcast_to: the target's rank %d is outside [%d, %d], x being %s", rank,
                              a->rank, TL_MAX_RANK, SHAPE(a, s1));
    for (int d = 0; d < rank; d++)
        if (shape[d] < 1)
            return tl_graph_failf(g, TL_EINVAL, "broadcast_to: target dim %d is %lld; dims must be >= 1", d,
                                  (long long)shape[d]);
    for (int d = 0; d < a->rank; d++) {
        int64_t xd = a->shape[d], yd = shape[rank - a->rank + d];
        if (xd != yd && xd != 1)
            return tl_graph_failf(g, TL_EINVAL,
                                  "broadcast_to: x %s does not broadcast to %s: dim %d of x is %lld, the target's %lld",
                                  SHAPE(a, s1), tl_shape_str(shape, rank, s2, sizeof s2), d, (long long)xd,
                                  (long long)yd);
    }
    return tl_graph_add(g, TL_OP_BROADCAST_TO, TL_F32, shape, rank, &x, 1);
}

tl_t tl_tile(tl_graph *g, tl_t x, const int64_t *multiples)
{
    if (tl_graph_need_f32(g, x, "tile", "x") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    char s1[96];
    if (a->rank > 0 && multiples == NULL)
        return tl_graph_failf(g, TL_EINVAL, "tile: multiples is NULL for x %s", SHAPE(a, s1));
    int64_t shape[TL_MAX_RANK];
    for (int d = 0; d < a->rank; d++) {
        if (multiples[d] < 1)
            return tl_graph_failf(g, TL_EINVAL, "tile: multiples[%d] is %lld for x %s; multiples must be >= 1", d,
                                  (long long)multiples[d], SHAPE(a, s1));
        if (multiples[d] > ((int64_t)1 << 40) / a->shape[d])
            return tl_graph_failf(g, TL_EINVAL, "tile: multiples[%d] = %lld makes dim %d of x %s too large", d,
                                  (long long)multiples[d], d, SHAPE(a, s1));
        shape[d] = a->shape[d] * multiples[d];
    }
    tl_t t = tl_graph_add(g, TL_OP_TILE, TL_F32, shape, a->rank, &x, 1);
    if (t >= 0)
        for (int d = 0; d < a->rank; d++)
            g->nodes[t].iattr[d] = multiples[d];
    return t;
}

tl_t tl_pad(tl_graph *g, tl_t x, const int64_t *paddings, double constant_value)
{
    if (tl_graph_need_f32(g, x, "pad", "x") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    char s1[96];
    if (a->rank > 0 && paddings == NULL)
        return tl_graph_failf(g, TL_EINVAL, "pad: paddings is NULL for x %s", SHAPE(a, s1));
    int64_t shape[TL_MAX_RANK];
    for (int d = 0; d < a->rank; d++) {
        int64_t before = paddings[2 * d], after = paddings[2 * d + 1];
        if (before < 0 || after < 0)
            return tl_graph_failf(g, TL_EINVAL, "pad: paddings[%d] = (%lld, %lld) for x %s; paddings must be >= 0", d,
                                  (long long)before, (long long)after, SHAPE(a, s1));
        if (before > ((int64_t)1 << 40) || after > ((int64_t)1 << 40))
            return tl_graph_failf(g, TL_EINVAL, "pad: paddings[%d] = (%lld, %lld) make a tensor of more than 2^40 "
                                  "elements", d, (long long)before, (long long)after);
        shape[d] = a->shape[d] + before + after;
    }
    tl_t t = tl_graph_add(g, TL_OP_PAD, TL_F32, shape, a->rank, &x, 1);
    if (t >= 0) {
        for (int d = 0; d < 2 * a->rank; d++)
            g->nodes[t].iattr[d] = paddings[d];
        g->nodes[t].fattr[0] = constant_value;
    }
    return t;
}

/* ---- gather and one_hot ----------------------------------------------------------- */

tl_t tl_gather(tl_graph *g, tl_t params, tl_t indices, int axis)
{
    if (tl_graph_need_f32(g, params, "gather", "params") < 0 || need_indices(g, indices, "gather") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[params], *ix = &g->nodes[indices];
    char s1[96], s2[96];
    if (a->rank < 1)
        return tl_graph_failf(g, TL_EINVAL, "gather: params must have rank >= 1, got %s", SHAPE(a, s1));
    int ax = axis;
    if (!wrap_axis(&ax, a->rank))
        return tl_graph_failf(g, TL_EINVAL, "gather: axis %d is outside [%d, %d) for params %s", axis, -a->rank,
                              a->rank, SHAPE(a, s1));
    int rank = a->rank - 1 + ix->rank;
    if (rank > TL_MAX_RANK)
        return tl_graph_failf(g, TL_EINVAL, "gather: params %s and indices %s give rank %d, over the %d allowed",
                              SHAPE(a, s1), SHAPE(ix, s2), rank, TL_MAX_RANK);
    int64_t shape[TL_MAX_RANK];
    int r = 0;
    for (int d = 0; d < ax; d++)
        shape[r++] = a->shape[d];
    for (int d = 0; d < ix->rank; d++)
        shape[r++] = ix->shape[d];
    for (int d = ax + 1; d < a->rank; d++)
        shape[r++] = a->shape[d];
    tl_t in[2] = {params, indices};
    tl_t t = tl_graph_add(g, TL_OP_GATHER, TL_F32, shape, rank, in, 2);
    if (t >= 0)
        g->nodes[t].iattr[0] = ax;
    return t;
}

tl_t tl_one_hot(tl_graph *g, tl_t indices, int64_t depth, double on_value, double off_value, int axis)
{
    if (need_indices(g, indices, "one_hot") < 0)
        return TL_T_INVALID;
    const tl_node *ix = &g->nodes[indices];
    char s1[96];
    if (depth < 1)
        return tl_graph_failf(g, TL_EINVAL, "one_hot: depth must be >= 1, got %lld", (long long)depth);
    if (ix->rank >= TL_MAX_RANK)
        return tl_graph_failf(g, TL_EINVAL, "one_hot: indices %s have rank %d; the result would exceed rank %d",
                              SHAPE(ix, s1), ix->rank, TL_MAX_RANK);
    /* TF's rule: -1 is the last position; no other negative axis. */
    if (axis < -1 || axis > ix->rank)
        return tl_graph_failf(g, TL_EINVAL, "one_hot: axis must be -1 or in [0, %d] for indices %s, got %d", ix->rank,
                              SHAPE(ix, s1), axis);
    int ax = axis == -1 ? ix->rank : axis;
    int64_t shape[TL_MAX_RANK];
    for (int d = 0, k = 0; d <= ix->rank; d++)
        shape[d] = d == ax ? depth : ix->shape[k++];
    tl_t t = tl_graph_add(g, TL_OP_ONE_HOT, TL_F32, shape, ix->rank + 1, &indices, 1);
    if (t >= 0) {
        g->nodes[t].iattr[0] = depth;
        g->nodes[t].iattr[1] = ax;
        g->nodes[t].fattr[0] = on_value;
        g->nodes[t].fattr[1] = off_value;
    }
    return t;
}

/* ---- split and stack: slices, expand_dims and concat -------------------------------- */

static tl_status split_fail(tl_graph *g, tl_t *out, int num)
{
    for (int k = 0; out != NULL && k < num; k++)
        out[k] = TL_T_INVALID;
    return g->status;
}

tl_status tl_split(tl_graph *g, tl_t x, int num, int axis, tl_t *out)
{
    if (tl_graph_need_f32(g, x, "split", "x") < 0)
        return split_fail(g, out, num);
    const tl_node *a = &g->nodes[x];
    char s1[96];
    if (out == NULL || num < 1) {
        tl_graph_failf(g, TL_EINVAL, "split: num must be >= 1 with room in out for each part, got %d%s", num,
                       out == NULL ? " and out NULL" : "");
        return split_fail(g, out, num);
    }
    int ax = axis;
    if (!wrap_axis(&ax, a->rank)) {
        tl_graph_failf(g, TL_EINVAL, "split: axis %d is outside [%d, %d) for x %s", axis, -a->rank, a->rank,
                       SHAPE(a, s1));
        return split_fail(g, out, num);
    }
    if (a->shape[ax] % num != 0) {
        tl_graph_failf(g, TL_EINVAL, "split: dim %d of x %s has size %lld, which does not divide into %d equal parts",
                       ax, SHAPE(a, s1), (long long)a->shape[ax], num);
        return split_fail(g, out, num);
    }
    const int64_t part = a->shape[ax] / num;
    int64_t begin = 0;
    for (int k = 0; k < num; k++, begin += part)
        out[k] = tl_slice(g, x, ax, begin, part);
    return g->status == TL_OK ? TL_OK : split_fail(g, out, num);
}

tl_status tl_split_sizes(tl_graph *g, tl_t x, const int64_t *sizes, int num, int axis, tl_t *out)
{
    if (tl_graph_need_f32(g, x, "split", "x") < 0)
        return split_fail(g, out, num);
    const tl_node *a = &g->nodes[x];
    char s1[96];
    if (out == NULL || sizes == NULL || num < 1) {
        tl_graph_failf(g, TL_EINVAL, "split: num must be >= 1 with sizes and out for each part, got %d%s%s", num,
                       sizes == NULL ? " and sizes NULL" : "", out == NULL ? " and out NULL" : "");
        return split_fail(g, out, num);
    }
    int ax = axis;
    if (!wrap_axis(&ax, a->rank)) {
        tl_graph_failf(g, TL_EINVAL, "split: axis %d is outside [%d, %d) for x %s", axis, -a->rank, a->rank,
                       SHAPE(a, s1));
        return split_fail(g, out, num);
    }
    const int64_t dim = a->shape[ax];
    int64_t known = 0;
    int inferred = -1;
    for (int k = 0; k < num; k++) {
        if (sizes[k] == -1 && inferred < 0) {
            inferred = k;
            continue;
        }
        if (sizes[k] < 1 || sizes[k] > dim) {
            tl_graph_failf(g, TL_EINVAL, "split: sizes[%d] is %lld; each size must be in [1, %lld] (one may be -1, "
                           "inferred) for dim %d of x %s", k, (long long)sizes[k], (long long)dim, ax, SHAPE(a, s1));
            return split_fail(g, out, num);
        }
        known += sizes[k];
    }
    if (known > dim || (inferred < 0 && known != dim) || (inferred >= 0 && known == dim)) {
        tl_graph_failf(g, TL_EINVAL, "split: sizes add up to %lld%s, not to dim %d of x %s, which is %lld",
                       (long long)known, inferred >= 0 ? " besides the -1" : "", ax, SHAPE(a, s1), (long long)dim);
        return split_fail(g, out, num);
    }
    int64_t begin = 0;
    for (int k = 0; k < num; k++) {
        int64_t size = k == inferred ? dim - known : sizes[k];
        out[k] = tl_slice(g, x, ax, begin, size);
        begin += size;
    }
    return g->status == TL_OK ? TL_OK : split_fail(g, out, num);
}

tl_t tl_stack(tl_graph *g, const tl_t *xs, int n, int axis)
{
    if (g->status != TL_OK)
        return TL_T_INVALID;
    if (n < 1 || n > TL_MAX_OP_INPUTS)
        return tl_graph_failf(g, TL_EINVAL, "stack: %d inputs; 1..%d are allowed", n, TL_MAX_OP_INPUTS);
    if (xs == NULL)
        return tl_graph_failf(g, TL_EINVAL, "stack: xs is NULL for %d inputs", n);
    char name[32];
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof name, "xs[%d]", k);
        if (tl_graph_need_f32(g, xs[k], "stack", name) < 0)
            return TL_T_INVALID;
    }
    const tl_node *first = &g->nodes[xs[0]];
    char s1[96], s2[96];
    for (int k = 1; k < n; k++) {
        const tl_node *x = &g->nodes[xs[k]];
        if (x->rank != first->rank || memcmp(x->shape, first->shape, (size_t)x->rank * sizeof *x->shape) != 0)
            return tl_graph_failf(g, TL_EINVAL, "stack: xs[%d] has shape %s, not %s as xs[0]", k, SHAPE(x, s1),
                                  SHAPE(first, s2));
    }
    if (first->rank >= TL_MAX_RANK)
        return tl_graph_failf(g, TL_EINVAL, "stack: the inputs %s have rank %d already, the most a tensor may have",
                              SHAPE(first, s1), first->rank);
    int ax = axis;
    if (!wrap_axis(&ax, first->rank + 1))
        return tl_graph_failf(g, TL_EINVAL, "stack: axis %d is outside [%d, %d] for inputs %s", axis,
                              -first->rank - 1, first->rank, SHAPE(first, s1));
    tl_t parts[TL_MAX_OP_INPUTS];
    for (int k = 0; k < n; k++)
        parts[k] = tl_expand_dims(g, xs[k], ax);
    return tl_concat(g, parts, n, ax);
}

/* ---- running ---------------------------------------------------------------------- */

static tl_k_indices indices_of(const tl_program *p, const tl_exec *e, tl_t t)
{
    const tl_node *nd = &p->g->nodes[t];
    const float *v = tl_exec_value(p, e, t);
    tl_k_indices ix = {NULL, NULL, nd->size, nd->rank, nd->shape};
    if (nd->dtype == TL_I64)
        ix.i64 = (const int64_t *)(const void *)v;
    else
        ix.i32 = (const int32_t *)(const void *)v;
    return ix;
}

static void perm_of(const tl_node *nd, int *perm)
{
    for (int d = 0; d < nd->rank; d++)
        perm[d] = (int)nd->iattr[d];
}

/* x's shape with leading 1s up to the broadcast's rank. */
static void aligned_shape(const tl_node *x, int rank, int64_t *shape)
{
    for (int d = 0; d < rank; d++)
        shape[d] = d < rank - x->rank ? 1 : x->shape[d - (rank - x->rank)];
}

static tl_status forward(const tl_program *p, tl_exec *e, int i)
{
    const tl_graph *g = p->g;
    const tl_node *nd = &g->nodes[i], *x = &g->nodes[nd->in[0]];
    float *y = tl_exec_value(p, e, i);
    const float *xv = tl_exec_value(p, e, nd->in[0]);
    int perm[TL_MAX_RANK];
    int64_t shape[TL_MAX_RANK];
    switch (nd->op) {
    case TL_OP_TRANSPOSE:
        perm_of(nd, perm);
        return tl_k_transpose(x->rank, x->shape, perm, xv, y);
    case TL_OP_EXPAND_DIMS:
    case TL_OP_SQUEEZE:
        if (p->val_off[i] != p->val_off[nd->in[0]]) /* a variable's view is a copy */
            memcpy(y, xv, (size_t)(nd->size * tl_dtype_slots(nd->dtype)) * sizeof *y);
        return TL_OK;
    case TL_OP_BROADCAST_TO:
        aligned_shape(x, nd->rank, shape);
        return tl_k_broadcast(nd->rank, shape, nd->shape, xv, y);
    case TL_OP_GATHER: {
        int axis = (int)nd->iattr[0];
        int64_t outer, inner;
        tl_op_around(x, axis, &outer, &inner);
        tl_k_indices ix = indices_of(p, e, nd->in[1]);
        return tl_k_gather(outer, x->shape[axis], inner, &ix, xv, y);
    }
    case TL_OP_ONE_HOT: {
        int64_t outer, inner;
        tl_op_around(nd, (int)nd->iattr[1], &outer, &inner);
        tl_k_indices ix = indices_of(p, e, nd->in[0]);
        return tl_k_one_hot(outer, nd->iattr[0], inner, &ix, nd->fattr[0], nd->fattr[1], y);
    }
    case TL_OP_PAD:
        return tl_k_pad(x->rank, x->shape, nd->iattr, nd->fattr[0], xv, y);
    case TL_OP_TILE:
        return tl_k_tile(x->rank, x->shape, nd->iattr, xv, y);
    default:
        TL_ASSERT(!"a kind of the shape family without a forward pass");
        return TL_ENOTIMPL;
    }
}

static tl_status backward(const tl_program *p, tl_exec *e, int i, int64_t *cursor)
{
    const tl_graph *g = p->g;
    const tl_node *nd = &g->nodes[i], *x = &g->nodes[nd->in[0]];
    /* Only params (input 0) ever gets a gradient: gather's and one_hot's
     * indices are integers. */
    if (!tl_op_wants(p, i, 0) || nd->op == TL_OP_ONE_HOT)
        return TL_OK;
    if ((nd->op == TL_OP_EXPAND_DIMS || nd->op == TL_OP_SQUEEZE) && p->grad_off[i] == p->grad_off[nd->in[0]])
        return TL_OK; /* a view sharing its input's gradient */
    const float *dy = tl_op_grad(p, e, i);
    float *dx = tl_op_dst(p, e, i, 0, cursor);
    int perm[TL_MAX_RANK];
    int64_t shape[TL_MAX_RANK];
    tl_status st = TL_OK;
    switch (nd->op) {
    case TL_OP_TRANSPOSE:
        perm_of(nd, perm);
        st = tl_k_transpose_grad(x->rank, x->shape, perm, dy, dx);
        break;
    case TL_OP_EXPAND_DIMS:
    case TL_OP_SQUEEZE:
        memcpy(dx, dy, (size_t)nd->size * sizeof *dx);
        break;
    case TL_OP_BROADCAST_TO:
        aligned_shape(x, nd->rank, shape);
        st = tl_k_broadcast_grad(nd->rank, shape, nd->shape, dy, dx);
        break;
    case TL_OP_GATHER: {
        int axis = (int)nd->iattr[0];
        int64_t outer, inner;
        tl_op_around(x, axis, &outer, &inner);
        tl_k_indices ix = indices_of(p, e, nd->in[1]);
        st = tl_k_gather_grad(outer, x->shape[axis], inner, &ix, dy, dx);
        break;
    }
    case TL_OP_PAD:
        st = tl_k_pad_grad(x->rank, x->shape, nd->iattr, dy, dx);
        break;
    case TL_OP_TILE:
        st = tl_k_tile_grad(x->rank, x->shape, nd->iattr, dy, dx);
        break;
    default:
        TL_ASSERT(!"a kind of the shape family without a backward pass");
        return TL_ENOTIMPL;
    }
    if (st == TL_OK)
        tl_op_finish(p, e, i, 0, dx);
    return st;
}

static bool view(const tl_graph *g, int i)
{
    return g->nodes[i].op == TL_OP_EXPAND_DIMS || g->nodes[i].op == TL_OP_SQUEEZE;
}

const tl_op_family tl_ops_shape = {"shape", TL_OP_SHAPE_FIRST_, TL_OP_SHAPE_LAST_, forward, backward, NULL, view, NULL};

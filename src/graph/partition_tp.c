/* partition_tp.c — a traced graph rewritten for one core of a replica whose
 * cores split its variables: tensor parallelism from ModelParallel layouts
 * (partition.h, "Tensor parallelism").
 *
 * A value here is whole (the same bits on every core) or split along one
 * dimension d over the C cores, core q holding chunk q by the tiles' rule.
 * A split value of shape s is, in memory, the 4-D tensor (prod s[0..d),
 * s[d], prod s[d+1..), 1) split by the grid (1, C, 1, 1): the collectives of
 * ops_spmd.c and the arithmetic of spatial.h serve it as they serve images.
 */
#include <stdio.h>
#include <string.h>

#include "partition.h"
#include "spatial.h"

typedef struct tctx {
    const tl_graph *src;
    tl_graph *g;
    const int8_t *var_split;
    int C, core;
    tl_partition *pt;
    int8_t *sd;     /* (source nodes) the dimension map[i] is split along; -1: whole */
    tl_t *whole;    /* (source nodes) a split value gathered whole, once */
    tl_t *fan;      /* (source nodes) a whole value's fan-out to split ops, once */
} tctx;

/* s as the 4-D tensor it is in memory when split along d. */
static void fold(const int64_t *s, int rank, int d, int64_t s4[4])
{
    s4[0] = s4[1] = s4[2] = s4[3] = 1;
    for (int k = 0; k < rank; k++)
        s4[k < d ? 0 : k == d ? 1 : 2] *= s[k];
}

static const int64_t *grid_of(const tctx *c, int64_t grid[4])
{
    grid[0] = grid[2] = grid[3] = 1;
    grid[1] = c->C;
    return grid;
}

/* Core q's chunk of dimension d of shape s: the box of the folded tensor. */
static tl_box chunk_of(const tctx *c, const int64_t *s, int rank, int d, int q)
{
    int64_t s4[4], grid[4];
    fold(s, rank, d, s4);
    tl_box b;
    tl_status st = tl_spatial_tile(s4, grid_of(c, grid), q, &b);
    TL_ASSERT(st == TL_OK); /* C and q were checked */
    (void)st;
    return b;
}

static void node_name(const tctx *c, int i, char *buf, size_t n)
{
    const tl_node *nd = &c->src->nodes[i];
    if (nd->op == TL_OP_VARIABLE)
        snprintf(buf, n, "variable %s", c->src->vars->v[nd->var].name);
    else
        snprintf(buf, n, "the value of node %d", i);
}

/* This core's shape of source value i split along d; an error when a core's
 * chunk is empty. */
static tl_status local_shape(const tctx *c, int i, const int64_t *s, int rank, int d, int64_t *out)
{
    memcpy(out, s, (size_t)rank * sizeof *out);
    for (int q = 0; q < c->C; q++) {
        tl_box b = chunk_of(c, s, rank, d, q);
        if (b.size[1] == 0) {
            char what[200];
            node_name(c, i, what, sizeof what);
            return tl_error(TL_EINVAL, "partition: %s: dimension %d of size %lld split over %d cores leaves core %d "
                                       "an empty share; every core needs at least one element",
                            what, d, (long long)s[d], c->C, q);
        }
        if (q == c->core)
            out[d] = b.size[1];
    }
    return TL_OK;
}

/* A collective on x, whose whole value has shape s (rank) split along d:
 * its region is the box (this core's chunk or the whole), its shape shape. */
static tl_t add_coll(tctx *c, tl_op_kind op, tl_t x, const int64_t *s, int rank, int d, const tl_box *box,
                     const int64_t *shape)
{
    tl_t t = tl_graph_add(c->g, op, TL_F32, shape, rank, &x, 1);
    if (t >= 0) {
        int64_t *a = c->g->nodes[t].iattr, s4[4], grid[4];
        fold(s, rank, d, s4);
        memcpy(a, box->off, 4 * sizeof *a);
        memcpy(a + 4, box->size, 4 * sizeof *a);
        memcpy(a + 8, s4, 4 * sizeof *a);
        memcpy(a + 12, grid_of(c, grid), 4 * sizeof *a);
    }
    return t;
}

static tl_t add_like(tctx *c, const tl_node *nd, const tl_t *in, const int64_t *shape, int rank)
{
    return tl_partition_add_like(c->g, nd, in, shape, rank);
}

/* Source value v whole on this core: gathered once when it is split. */
static tl_t whole_of(tctx *c, tl_t v)
{
    if (c->sd[v] < 0)
        return c->pt->map[v];
    if (c->whole[v] < 0) {
        const tl_node *nd = &c->src->nodes[v];
        int64_t s4[4];
        fold(nd->shape, nd->rank, c->sd[v], s4);
        tl_box all = {{0, 0, 0, 0}, {s4[0], s4[1], s4[2], s4[3]}};
        c->whole[v] = add_coll(c, TL_OP_SPMD_GATHER, c->pt->map[v], nd->shape, nd->rank, c->sd[v], &all, nd->shape);
        c->pt->gathered++;
    }
    return c->whole[v];
}

/* Source value v read whole by an op on split values, which gives each
 * core a share of v's gradient: the fan-out sums them (a split v is
 * gathered first). A value with no gradient is read as it is. */
static tl_t fan_of(tctx *c, tl_t v)
{
    tl_t t = whole_of(c, v);
    if (t < 0 || !c->g->nodes[t].needs_grad)
        return t;
    if (c->fan[v] < 0) {
        const tl_node *nd = &c->src->nodes[v];
        c->fan[v] = tl_graph_add(c->g, TL_OP_SPMD_FANOUT, TL_F32, nd->shape, nd->rank, &t, 1);
    }
    return c->fan[v];
}

/* This core's chunk of whole source value v along d (its gradient is every
 * core's put together). */
static tl_status slice_of(tctx *c, tl_t v, int d, tl_t *out)
{
    const tl_node *nd = &c->src->nodes[v];
    int64_t shape[TL_MAX_RANK];
    tl_status st = local_shape(c, v, nd->shape, nd->rank, d, shape);
    if (st != TL_OK)
        return st;
    tl_box mine = chunk_of(c, nd->shape, nd->rank, d, c->core);
    *out = add_coll(c, TL_OP_SPMD_SLICE, c->pt->map[v], nd->shape, nd->rank, d, &mine, shape);
    return TL_OK;
}

/* Node i on its inputs in, split along d (its local shape) or whole (-1). */
static tl_status emit(tctx *c, int i, const tl_t *in, int d)
{
    const tl_node *nd = &c->src->nodes[i];
    int64_t shape[TL_MAX_RANK];
    memcpy(shape, nd->shape, (size_t)nd->rank * sizeof *shape);
    if (d >= 0) {
        tl_status st = local_shape(c, i, nd->shape, nd->rank, d, shape);
        if (st != TL_OK)
            return st;
    }
    c->pt->map[i] = add_like(c, nd, in, shape, nd->rank);
    c->sd[i] = (int8_t)d;
    c->pt->tiled[i] = d >= 0;
    return TL_OK;
}

/* The rows of a split along d whose chunks are the same elements as those
 * of dimension e of the reshape's output: -1 when there is none. */
static int reshape_dim(const tctx *c, const tl_node *x, int d, const tl_node *y)
{
    int64_t outer = 1, o = 1;
    for (int k = 0; k < d; k++)
        outer *= x->shape[k];
    int e = 0;
    while (e < y->rank && o < outer)
        o *= y->shape[e++];
    if (o != outer || e >= y->rank)
        return -1;
    int64_t xin = 1, yin = 1;
    for (int k = d + 1; k < x->rank; k++)
        xin *= x->shape[k];
    for (int k = e + 1; k < y->rank; k++)
        yin *= y->shape[k];
    for (int q = 0; q < c->C; q++) {
        tl_box a = chunk_of(c, x->shape, x->rank, d, q), b = chunk_of(c, y->shape, y->rank, e, q);
        if (a.off[1] * xin != b.off[1] * yin || a.size[1] * xin != b.size[1] * yin)
            return -1;
    }
    return e;
}

static bool elementwise(const tl_node *nd)
{
    tl_op_kind op = nd->op;
    return (op > TL_OP_EW_FIRST_ && op < TL_OP_EW_LAST_ && op != TL_OP_EW_CONSTANT) || op == TL_OP_RELU ||
           op == TL_OP_SIGMOID || op == TL_OP_TANH || op == TL_OP_BIAS_ADD;
}

/* An element-wise op on split inputs: split along the output's dimension
 * they align with (right-aligned, as broadcasting), each whole input sliced
 * along it or, where it broadcasts over it, fanned out. false: no such
 * dimension (the caller gathers). */
static tl_status elementwise_on_splits(tctx *c, int i, bool *done)
{
    const tl_node *nd = &c->src->nodes[i];
    int d = -1;
    *done = false;
    for (int k = 0; k < nd->nin; k++) {
        const tl_node *x = &c->src->nodes[nd->in[k]];
        int s = c->sd[nd->in[k]];
        if (s < 0)
            continue;
        int e = s + (nd->rank - x->rank);
        if ((d >= 0 && e != d) || x->shape[s] != nd->shape[e])
            return TL_OK;
        d = e;
    }
    tl_t in[TL_MAX_OP_INPUTS];
    for (int k = 0; k < nd->nin; k++) {
        tl_t v = nd->in[k];
        const tl_node *x = &c->src->nodes[v];
        int j = d - (nd->rank - x->rank);
        if (c->sd[v] >= 0) {
            in[k] = c->pt->map[v];
        } else if (j < 0 || x->shape[j] == 1) {
            in[k] = fan_of(c, v);
        } else if (x->dtype == TL_F32) {
            tl_status st = slice_of(c, v, j, &in[k]);
            if (st != TL_OK)
                return st;
        } else {
            return TL_OK;
        }
    }
    *done = true;
    return emit(c, i, in, d);
}

/* matmul(a, b) with a split or b a split kernel (no transposes): column-
 * split b gives a split product; a row-split b, with a split along its
 * columns or sliced so, gives each core a partial of the whole product,
 * summed over the cores (TL_OP_SPMD_SUM). */
static tl_status matmul_on_splits(tctx *c, int i, bool *done)
{
    const tl_node *nd = &c->src->nodes[i];
    tl_t a = nd->in[0], b = nd->in[1];
    int sa = c->sd[a], sb = c->sd[b];
    *done = false;
    if (nd->iattr[0] || nd->iattr[1] || nd->rank != 2)
        return TL_OK;
    tl_t in[2];
    if (sb == 1 && sa != 0) { /* a split a is gathered first */
        in[0] = fan_of(c, a);
        in[1] = c->pt->map[b];
        *done = true;
        return emit(c, i, in, 1);
    }
    if (sa == 0 && sb < 0) {
        in[0] = c->pt->map[a];
        in[1] = fan_of(c, b);
        *done = true;
        return emit(c, i, in, 0);
    }
    if (sb != 0 || sa == 0)
        return TL_OK;
    if (sa == 1) {
        in[0] = c->pt->map[a];
    } else {
        tl_status st = slice_of(c, a, 1, &in[0]);
        if (st != TL_OK)
            return st;
    }
    in[1] = c->pt->map[b];
    tl_t part = add_like(c, nd, in, nd->shape, 2);
    c->pt->map[i] = tl_graph_add(c->g, TL_OP_SPMD_SUM, TL_F32, nd->shape, 2, &part, 1);
    c->sd[i] = -1;
    *done = true;
    return TL_OK;
}

/* The ops that run on split values as they are, the split moving to the
 * output's dimension *d: -1 when i has no such rule here. */
static int passes_split(const tctx *c, const tl_node *nd)
{
    int s = c->sd[nd->in[0]];
    const tl_node *x = &c->src->nodes[nd->in[0]];
    switch (nd->op) {
    case TL_OP_TRANSPOSE:
        for (int e = 0; e < nd->rank; e++)
            if (nd->iattr[e] == s)
                return e;
        return -1;
    case TL_OP_RESHAPE: return reshape_dim(c, x, s, nd);
    case TL_OP_REDUCE_SOFTMAX:
    case TL_OP_REDUCE_LOG_SOFTMAX: return nd->iattr[0] != s ? s : -1;
    case TL_OP_LAYER_NORM: return s != x->rank - 1 ? s : -1;
    case TL_OP_REDUCE_SUM:
    case TL_OP_REDUCE_MEAN:
    case TL_OP_REDUCE_MAX:
    case TL_OP_REDUCE_MIN: {
        if (nd->iattr[0] >> s & 1)
            return -1;
        int e = s;
        for (int k = 0; k < s && !nd->iattr[1]; k++)
            e -= (int)(nd->iattr[0] >> k & 1);
        return e;
    }
    default: return -1;
    }
}

static tl_status node(tctx *c, int i)
{
    const tl_node *nd = &c->src->nodes[i];
    tl_partition *pt = c->pt;
    tl_t in[TL_MAX_OP_INPUTS];
    bool any = false, done = false;
    for (int k = 0; k < nd->nin; k++)
        any |= c->sd[nd->in[k]] >= 0;
    if (nd->op == TL_OP_VARIABLE && c->var_split[nd->var] >= 0) {
        int d = c->var_split[nd->var];
        if (d >= nd->rank)
            return tl_error(TL_EINVAL, "partition: variable %s of rank %d cannot be split along dimension %d",
                            c->src->vars->v[nd->var].name, nd->rank, d);
        pt->map[i] = add_like(c, nd, NULL, nd->shape, nd->rank);
        c->sd[i] = -1;
        tl_t t;
        tl_status st = slice_of(c, i, d, &t);
        if (st == TL_OK && t >= 0)
            c->g->nodes[t].iattr[16] = 1; /* its gradient: this core's chunk alone */
        pt->map[i] = t;
        c->sd[i] = (int8_t)d;
        pt->tiled[i] = true;
        return st;
    }
    if (!any) {
        for (int k = 0; k < nd->nin; k++)
            in[k] = pt->map[nd->in[k]];
        return emit(c, i, in, -1);
    }
    tl_status st = TL_OK;
    if (nd->op == TL_OP_MATMUL)
        st = matmul_on_splits(c, i, &done);
    else if (elementwise(nd))
        st = elementwise_on_splits(c, i, &done);
    if (st != TL_OK || done)
        return st;
    if (nd->op == TL_OP_BATCH_MATMUL && nd->nin == 2) {
        int sa = c->sd[nd->in[0]], sb = c->sd[nd->in[1]];
        const tl_node *a = &c->src->nodes[nd->in[0]], *b = &c->src->nodes[nd->in[1]];
        if (sa == sb && a->rank == nd->rank && b->rank == nd->rank && sa < nd->rank - 2) {
            in[0] = pt->map[nd->in[0]];
            in[1] = pt->map[nd->in[1]];
            return emit(c, i, in, sa);
        }
    } else if (nd->op == TL_OP_GATHER && c->sd[nd->in[0]] >= 0 && c->sd[nd->in[1]] < 0) {
        /* An embedding table split along anything but the looked-up axis. */
        int s = c->sd[nd->in[0]], axis = (int)nd->iattr[0], irank = c->src->nodes[nd->in[1]].rank;
        if (s != axis) {
            in[0] = pt->map[nd->in[0]];
            in[1] = pt->map[nd->in[1]];
            return emit(c, i, in, s < axis ? s : s - 1 + irank);
        }
    } else if (nd->nin >= 1 && c->sd[nd->in[0]] >= 0) {
        int e = passes_split(c, nd);
        bool rest_whole = true;
        for (int k = 1; k < nd->nin; k++)
            rest_whole &= c->sd[nd->in[k]] < 0;
        if (e >= 0 && rest_whole) {
            in[0] = pt->map[nd->in[0]];
            for (int k = 1; k < nd->nin; k++)
                in[k] = fan_of(c, nd->in[k]); /* layer norm's gamma and beta, over the split rows */
            return emit(c, i, in, e);
        }
    }
    for (int k = 0; k < nd->nin; k++)
        in[k] = whole_of(c, nd->in[k]);
    return emit(c, i, in, -1);
}

tl_status tl_partition_tensor(const tl_graph *src, const int8_t *var_split, int ncores, int core, tl_partition *out)
{
    memset(out, 0, sizeof *out);
    if (ncores < 1 || ncores > TL_SPMD_MAX_CORES || core < 0 || core >= ncores)
        return tl_error(TL_EINVAL, "partition: core %d of %d cores (1 to %d)", core, ncores, TL_SPMD_MAX_CORES);
    if (src->status != TL_OK)
        return tl_error(src->status, "%s", src->err);
    size_t n = (size_t)(src->n ? src->n : 1);
    tctx c = {src, NULL, var_split, ncores, core, out, tl_alloc_array(n, 1), tl_alloc_array(n, sizeof(tl_t)),
              tl_alloc_array(n, sizeof(tl_t))};
    out->map = tl_alloc_array(n, sizeof *out->map);
    out->tiled = tl_calloc(n, sizeof *out->tiled);
    out->var_partial = tl_calloc((size_t)(src->vars->n ? src->vars->n : 1), sizeof *out->var_partial);
    out->var_split = tl_alloc_array((size_t)(src->vars->n ? src->vars->n : 1), 1);
    if (out->var_split != NULL && src->vars->n > 0)
        memcpy(out->var_split, var_split, (size_t)src->vars->n);
    tl_status st = c.sd == NULL || c.whole == NULL || c.fan == NULL || out->map == NULL || out->tiled == NULL ||
                           out->var_partial == NULL || out->var_split == NULL
                       ? tl_error_oom()
                       : tl_graph_create(src->vars, src->mode, &out->g);
    c.g = out->g;
    for (int i = 0; st == TL_OK && i < src->n; i++) {
        c.sd[i] = -1;
        c.whole[i] = c.fan[i] = TL_T_INVALID;
    }
    for (int i = 0; st == TL_OK && i < src->n; i++) {
        st = node(&c, i);
        if (st == TL_OK && out->g->status != TL_OK)
            st = tl_error(out->g->status, "partition: %s", out->g->err);
    }
    if (st == TL_OK)
        out->g->dropout_ops = src->dropout_ops;
    tl_free(c.sd);
    tl_free(c.whole);
    tl_free(c.fan);
    if (st != TL_OK)
        tl_partition_free(out);
    return st;
}

void tl_partition_take_chunks(const tl_partition *pt, const tl_vars *vars, int ncores, const float *const *grads,
                              float *out)
{
    tctx c = {.C = ncores};
    for (int v = 0; v < vars->n; v++) {
        int d = pt->var_split[v];
        if (d < 0)
            continue;
        const tl_var *var = &vars->v[v];
        int64_t s4[4];
        fold(var->shape, var->rank, d, s4);
        for (int q = 1; q < ncores; q++) {
            tl_box b = chunk_of(&c, var->shape, var->rank, d, q);
            for (int64_t a = 0; a < s4[0]; a++) {
                int64_t at = var->offset + (a * s4[1] + b.off[1]) * s4[2];
                memcpy(out + at, grads[q] + at, (size_t)(b.size[1] * s4[2]) * sizeof *out);
            }
        }
    }
}

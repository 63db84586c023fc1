/* partition.c — a traced graph rewritten for one core of a partitioned
 * replica (partition.h). */
#include <stdio.h>
#include <string.h>

#include "partition.h"
#include "spatial.h"

typedef struct pctx {
    const tl_graph *src;
    tl_graph *g;
    const int64_t *grid;
    int core;
    tl_partition *pt;
    tl_t *gathered;  /* (source nodes) the whole value of a tiled one, once gathered */
    bool *on_tiles;  /* (source nodes) the op ran on tiles */
} pctx;

/* The gradient a core holds for a value (partition.h). */
enum { GRAD_NONE = 0, GRAD_WHOLE, GRAD_PARTIAL, GRAD_TILE };

const char *tl_partition_op_name(tl_op_kind op)
{
    switch (op) {
    case TL_OP_INPUT: return "input";
    case TL_OP_VARIABLE: return "variable";
    case TL_OP_CONV2D: return "conv2d";
    case TL_OP_MAX_POOL2D: return "max_pool2d";
    case TL_OP_AVG_POOL2D: return "avg_pool2d";
    case TL_OP_MATMUL: return "matmul";
    case TL_OP_BATCH_MATMUL: return "batch_matmul";
    case TL_OP_LAYER_NORM: return "layer_norm";
    case TL_OP_BATCH_NORM: return "batch_norm";
    case TL_OP_RESHAPE: return "reshape";
    case TL_OP_TRANSPOSE: return "transpose";
    case TL_OP_GATHER: return "gather";
    case TL_OP_REDUCE_SOFTMAX: return "softmax";
    case TL_OP_REDUCE_MEAN: return "reduce_mean";
    case TL_OP_REDUCE_SUM: return "reduce_sum";
    case TL_OP_SOFTMAX_XENT: return "softmax_cross_entropy";
    case TL_OP_EW_ADD: return "add";
    case TL_OP_EW_MUL: return "multiply";
    case TL_OP_BIAS_ADD: return "bias_add";
    default: return "op";
    }
}

/* A tiled value's shape as NHWC: (batch, h, w) images are (batch, h, w, 1). */
static void shape4(const tl_node *nd, int64_t out[4])
{
    out[3] = 1;
    memcpy(out, nd->shape, (size_t)nd->rank * sizeof *out);
}

/* This core's tile of a value of shape (rank 4), or an error when it is empty. */
static tl_status tile_of(const pctx *c, int i, const int64_t *shape, tl_box *b)
{
    tl_status st = tl_spatial_tile(shape, c->grid, c->core, b);
    if (st != TL_OK)
        return st;
    for (int d = 0; d < 4; d++)
        if (b->size[d] == 0)
            return tl_error(TL_EINVAL, "partition: %s node %d: dimension %d of size %lld split in %lld leaves core %d "
                                       "an empty tile; every core needs at least one element",
                            tl_partition_op_name(c->src->nodes[i].op), i, d, (long long)shape[d],
                            (long long)c->grid[d], c->core);
    return TL_OK;
}

tl_t tl_partition_add_like(tl_graph *g, const tl_node *nd, const tl_t *in, const int64_t *shape, int rank)
{
    tl_t t = tl_graph_add(g, nd->op, nd->dtype, shape, rank, in, nd->nin);
    if (t >= 0) {
        tl_node *m = &g->nodes[t];
        memcpy(m->iattr, nd->iattr, sizeof m->iattr);
        memcpy(m->fattr, nd->fattr, sizeof m->fattr);
        m->var = nd->var;
        if (nd->nin == 0)
            m->needs_grad = nd->needs_grad; /* a variable's or an embedding's, set by its constructor */
    }
    return t;
}

static tl_t add_like(pctx *c, const tl_node *nd, const tl_t *in, const int64_t *shape, int rank)
{
    return tl_partition_add_like(c->g, nd, in, shape, rank);
}

/* A collective over the whole tensor of shape (NHWC): box is the region,
 * shaped as a tensor of rank (4, or 3 for (batch, h, w) images). */
static tl_t add_spmd(pctx *c, tl_op_kind op, tl_t x, const tl_box *box, const int64_t *whole, int rank)
{
    tl_t t = tl_graph_add(c->g, op, TL_F32, box->size, rank, &x, 1);
    if (t >= 0) {
        int64_t *a = c->g->nodes[t].iattr;
        memcpy(a, box->off, 4 * sizeof *a);
        memcpy(a + 4, box->size, 4 * sizeof *a);
        memcpy(a + 8, whole, 4 * sizeof *a);
        memcpy(a + 12, c->grid, 4 * sizeof *a);
    }
    return t;
}

/* Source value v whole on this core: gathered once when it is a tile. */
static tl_t whole_of(pctx *c, tl_t v)
{
    if (!c->pt->tiled[v])
        return c->pt->map[v];
    if (c->gathered[v] < 0) {
        const tl_node *nd = &c->src->nodes[v];
        int64_t s4[4];
        shape4(nd, s4);
        tl_box all = {{0, 0, 0, 0}, {s4[0], s4[1], s4[2], s4[3]}};
        c->gathered[v] = add_spmd(c, TL_OP_SPMD_GATHER, c->pt->map[v], &all, s4, nd->rank);
    }
    return c->gathered[v];
}

static bool elementwise(tl_op_kind op)
{
    return (op > TL_OP_EW_FIRST_ && op < TL_OP_EW_LAST_ && op != TL_OP_EW_CONSTANT) || op == TL_OP_RELU ||
           op == TL_OP_SIGMOID || op == TL_OP_TANH || op == TL_OP_BIAS_ADD;
}

/* Whether element-wise node nd runs on tiles: each tiled input has the
 * output's shape, each whole one broadcasts over every split dimension. */
static bool tiles_fit(const pctx *c, const tl_node *nd)
{
    if (nd->rank != 4)
        return false;
    for (int k = 0; k < nd->nin; k++) {
        const tl_node *x = &c->src->nodes[nd->in[k]];
        if (c->pt->tiled[nd->in[k]]) {
            if (memcmp(x->shape, nd->shape, 4 * sizeof *x->shape) != 0)
                return false;
            continue;
        }
        for (int d = 0; d < 4; d++) {
            int j = d - (4 - x->rank); /* right-aligned, as broadcasting */
            if (c->grid[d] > 1 && j >= 0 && x->shape[j] != 1)
                return false;
        }
    }
    return true;
}

/* The whole op's geometry, from a conv node of the source. */
static void conv_geom(const tl_graph *g, const tl_node *nd, tl_k_conv_geom *cv)
{
    const int64_t *x = g->nodes[nd->in[0]].shape, *a = nd->iattr;
    *cv = (tl_k_conv_geom){.n = x[0], .h = x[1], .w = x[2], .c = x[3], .kh = a[0], .kw = a[1], .o = nd->shape[3],
                           .groups = a[2], .stride_h = a[3], .stride_w = a[4], .dilation_h = a[5],
                           .dilation_w = a[6], .pad_top = a[7], .pad_left = a[8], .pad_bottom = a[9],
                           .pad_right = a[10], .oh = nd->shape[1], .ow = nd->shape[2], .impl = TL_K_CONV_AUTO};
}

static void pool_geom(const tl_graph *g, const tl_node *nd, tl_k_pool_geom *pl)
{
    const int64_t *x = g->nodes[nd->in[0]].shape, *a = nd->iattr;
    *pl = (tl_k_pool_geom){.n = x[0], .h = x[1], .w = x[2], .c = x[3], .kh = a[0], .kw = a[1], .stride_h = a[2],
                           .stride_w = a[3], .pad_top = a[4], .pad_left = a[5], .pad_bottom = a[6],
                           .pad_right = a[7], .oh = nd->rank == 4 ? nd->shape[1] : 1,
                           .ow = nd->rank == 4 ? nd->shape[2] : 1};
}

int64_t tl_partition_inplace_min = 32768;

/* Whether conv nd runs as TL_OP_SPMD_CONV on every core: rows (and images)
 * split, each core's tile rows of an image at least
 * tl_partition_inplace_min floats, and an interior on every core. */
static bool conv_in_place(const pctx *c, const tl_node *nd, const tl_k_conv_geom *cv)
{
    const int64_t *xs = c->src->nodes[nd->in[0]].shape;
    int64_t cores = c->grid[0] * c->grid[1];
    if (c->grid[2] != 1 || c->grid[3] != 1 || c->grid[1] == 1)
        return false;
    for (int q = 0; q < cores; q++) {
        tl_box in, out;
        if (tl_spatial_tile(xs, c->grid, q, &in) != TL_OK || tl_spatial_tile(nd->shape, c->grid, q, &out) != TL_OK)
            return false;
        int64_t i0, i1;
        tl_spmd_conv_interior(cv, in.off[1], in.off[1] + in.size[1], out.off[1], out.off[1] + out.size[1], &i0, &i1);
        if (i1 <= i0 || in.size[1] * xs[2] * xs[3] < tl_partition_inplace_min)
            return false;
    }
    return true;
}

/* conv nd as TL_OP_SPMD_CONV on this core's tile (ops_spmd_conv.c). */
static void conv_on_tile(pctx *c, int i, const tl_box *out)
{
    const tl_node *nd = &c->src->nodes[i];
    const int64_t *xs = c->src->nodes[nd->in[0]].shape;
    tl_box in;
    tl_status st = tl_spatial_tile(xs, c->grid, c->core, &in);
    TL_ASSERT(st == TL_OK); /* conv_in_place tiled it */
    (void)st;
    tl_t x[2] = {c->pt->map[nd->in[0]], c->pt->map[nd->in[1]]};
    tl_t t = tl_graph_add(c->g, TL_OP_SPMD_CONV, TL_F32, out->size, 4, x, 2);
    if (t >= 0) {
        int64_t *a = c->g->nodes[t].iattr;
        memcpy(a, nd->iattr, 12 * sizeof *a);
        a[12] = xs[1], a[13] = nd->shape[1], a[14] = in.off[1], a[15] = out->off[1];
        a[16] = c->grid[0], a[17] = c->grid[1], a[18] = xs[0];
    }
    c->pt->map[i] = t;
    c->pt->tiled[i] = true;
}

/* A conv or pool on a tiled x: the halo gather, then the op on the region
 * (a conv that can reads its tile in place instead: conv_in_place). */
static tl_status window_on_tiles(pctx *c, int i)
{
    const tl_node *nd = &c->src->nodes[i];
    const int64_t *xs = c->src->nodes[nd->in[0]].shape;
    tl_box out, need;
    tl_status st = tile_of(c, i, nd->shape, &out);
    if (st != TL_OK)
        return st;
    if (nd->op == TL_OP_CONV2D) {
        tl_k_conv_geom cv;
        conv_geom(c->src, nd, &cv);
        if (conv_in_place(c, nd, &cv)) {
            conv_on_tile(c, i, &out);
            return TL_OK;
        }
    }
    int64_t pads[4];
    if (nd->op == TL_OP_CONV2D) {
        tl_k_conv_geom cv, local;
        conv_geom(c->src, nd, &cv);
        tl_spatial_conv_tile(&cv, &out, &local, &need);
        int64_t p[4] = {local.pad_top, local.pad_left, local.pad_bottom, local.pad_right};
        memcpy(pads, p, sizeof pads);
    } else {
        tl_k_pool_geom pl, local;
        pool_geom(c->src, nd, &pl);
        tl_spatial_pool_tile(&pl, &out, &local, &need);
        int64_t p[4] = {local.pad_top, local.pad_left, local.pad_bottom, local.pad_right};
        memcpy(pads, p, sizeof pads);
    }
    tl_t in[2] = {add_spmd(c, TL_OP_SPMD_HALO, c->pt->map[nd->in[0]], &need, xs, 4),
                  nd->nin > 1 ? c->pt->map[nd->in[1]] : TL_T_INVALID};
    tl_t t = add_like(c, nd, in, out.size, 4);
    if (t >= 0)
        memcpy(c->g->nodes[t].iattr + (nd->op == TL_OP_CONV2D ? 7 : 4), pads, sizeof pads);
    c->pt->map[i] = t;
    c->pt->tiled[i] = true;
    return TL_OK;
}

/* global_avg_pool2d of a tiled x: the tile's sum, summed over the cores,
 * times 1 / (h·w). */
static void global_mean_on_tiles(pctx *c, int i)
{
    const tl_node *nd = &c->src->nodes[i];
    const int64_t *xs = c->src->nodes[nd->in[0]].shape;
    const int axes[2] = {1, 2};
    tl_t s = tl_reduce_sum(c->g, c->pt->map[nd->in[0]], axes, 2, nd->rank == 4);
    tl_t t = TL_T_INVALID;
    if (s >= 0)
        t = tl_graph_add(c->g, TL_OP_SPMD_SUM, TL_F32, c->g->nodes[s].shape, c->g->nodes[s].rank, &s, 1);
    if (t >= 0)
        t = tl_mul(c->g, t, tl_constant(c->g, 1.0 / (double)(xs[1] * xs[2]), NULL, 0));
    c->pt->map[i] = t;
    c->pt->tiled[i] = false;
}

static bool global_avg_pool(const tl_graph *g, const tl_node *nd)
{
    const int64_t *xs = g->nodes[nd->in[0]].shape, *a = nd->iattr;
    return nd->op == TL_OP_AVG_POOL2D && a[0] == xs[1] && a[1] == xs[2] && a[4] == 0 && a[5] == 0 && a[6] == 0 &&
           a[7] == 0;
}

/* Source node i run as it is on this core's tiles of its inputs (and
 * their whole values where they are whole): its output is a tile. */
static tl_status op_on_tiles(pctx *c, int i)
{
    const tl_node *nd = &c->src->nodes[i];
    tl_t in[TL_MAX_OP_INPUTS];
    tl_box b;
    tl_status st = tile_of(c, i, nd->shape, &b);
    if (st != TL_OK)
        return st;
    for (int k = 0; k < nd->nin; k++)
        in[k] = c->pt->map[nd->in[k]];
    c->pt->map[i] = add_like(c, nd, in, b.size, 4);
    c->pt->tiled[i] = true;
    c->on_tiles[i] = true;
    return TL_OK;
}

/* Whether reshape nd only adds or drops the trailing 1 of NHWC images. */
static bool same_images(const pctx *c, const tl_node *nd)
{
    const tl_node *x = &c->src->nodes[nd->in[0]];
    int64_t a[4], b[4];
    if ((nd->rank != 3 && nd->rank != 4) || (x->rank != 3 && x->rank != 4))
        return false;
    shape4(nd, a);
    shape4(x, b);
    return memcmp(a, b, sizeof a) == 0;
}

static bool bn_inputs_whole(const pctx *c, const tl_node *nd)
{
    for (int k = 1; k < nd->nin; k++)
        if (c->pt->tiled[nd->in[k]])
            return false;
    return nd->rank == 4;
}

static tl_status node(pctx *c, int i, tl_t input)
{
    const tl_node *nd = &c->src->nodes[i];
    tl_partition *pt = c->pt;
    tl_t in[TL_MAX_OP_INPUTS];
    bool any = false;
    for (int k = 0; k < nd->nin; k++)
        any |= pt->tiled[nd->in[k]];
    if (i == input || (nd->op == TL_OP_RESHAPE && pt->tiled[nd->in[0]] && same_images(c, nd))) {
        /* The input's tile; a reshape of (batch, h, w) images to (batch,
         * h, w, 1) or back keeps it. */
        int64_t s4[4];
        shape4(nd, s4);
        tl_box b;
        tl_status st = tile_of(c, i, s4, &b);
        if (st != TL_OK)
            return st;
        in[0] = nd->nin > 0 ? pt->map[nd->in[0]] : TL_T_INVALID;
        pt->map[i] = add_like(c, nd, in, b.size, nd->rank);
        pt->tiled[i] = true;
        c->on_tiles[i] = nd->nin > 0;
        return TL_OK;
    }
    bool window = nd->op == TL_OP_CONV2D || nd->op == TL_OP_MAX_POOL2D || nd->op == TL_OP_AVG_POOL2D;
    if (any && window && pt->tiled[nd->in[0]] && (nd->nin < 2 || !pt->tiled[nd->in[1]])) {
        c->on_tiles[i] = true;
        if (global_avg_pool(c->src, nd)) {
            if (c->grid[0] == 1 && c->grid[3] == 1) {
                global_mean_on_tiles(c, i);
                return TL_OK;
            }
        } else if (nd->op != TL_OP_CONV2D || c->grid[3] == 1) {
            return window_on_tiles(c, i);
        }
        /* A conv over split channels, or a global mean whose cores hold
         * other examples or channels: gathered below. */
        c->on_tiles[i] = false;
    }
    if (any && nd->op == TL_OP_BATCH_NORM && pt->tiled[nd->in[0]] && c->grid[3] == 1 && bn_inputs_whole(c, nd)) {
        /* Per channel over the rows of every core: a training batch norm
         * takes the replica's statistics (ops_norm.c), a frozen one is
         * element-wise. */
        tl_status st = op_on_tiles(c, i);
        if (st == TL_OK && pt->map[i] >= 0 && nd->iattr[0])
            c->g->nodes[pt->map[i]].iattr[1] = 1;
        return st;
    }
    if (any && elementwise(nd->op) && tiles_fit(c, nd))
        return op_on_tiles(c, i);
    for (int k = 0; k < nd->nin; k++)
        in[k] = whole_of(c, nd->in[k]);
    pt->gathered += any;
    pt->map[i] = add_like(c, nd, in, nd->shape, nd->rank);
    pt->tiled[i] = false;
    return TL_OK;
}

/* Which variables get partial gradients: walks the source backwards from
 * every value, merging what each consumer passes its inputs (partition.h). */
static tl_status classify_vars(pctx *c)
{
    const tl_graph *src = c->src;
    uint8_t *gk = tl_calloc((size_t)(src->n ? src->n : 1), 1);
    if (gk == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    for (int i = src->n - 1; i >= 0 && st == TL_OK; i--) {
        const tl_node *nd = &src->nodes[i];
        uint8_t out = gk[i] != GRAD_NONE ? gk[i] : GRAD_WHOLE; /* an output nobody reads: the loss, whole */
        for (int k = 0; k < nd->nin; k++) {
            tl_t v = nd->in[k];
            uint8_t give = c->pt->tiled[v] ? GRAD_TILE : c->on_tiles[i] ? GRAD_PARTIAL : out;
            if (nd->op == TL_OP_BATCH_NORM && nd->iattr[0] && k >= 3)
                give = GRAD_WHOLE; /* the moving statistics' update: from the replica's statistics, on every core */
            if (give == GRAD_TILE)
                continue;
            if (gk[v] != GRAD_NONE && gk[v] != give) {
                char what[160];
                if (src->nodes[v].op == TL_OP_VARIABLE)
                    snprintf(what, sizeof what, "variable %s", src->vars->v[src->nodes[v].var].name);
                else
                    snprintf(what, sizeof what, "the value of node %d", v);
                st = tl_error(TL_EINVAL, "partition: %s is read both by ops on tiles and by whole ops; a value used "
                                         "both ways is not partitioned yet", what);
                break;
            }
            gk[v] = give;
        }
    }
    for (int i = 0; i < src->n && st == TL_OK; i++)
        if (src->nodes[i].op == TL_OP_VARIABLE)
            c->pt->var_partial[src->nodes[i].var] = gk[i] == GRAD_PARTIAL;
    tl_free(gk);
    return st;
}

tl_status tl_partition_graph(const tl_graph *src, tl_t input, const int64_t grid[4], int core, tl_partition *out)
{
    memset(out, 0, sizeof *out);
    int64_t cores = 1;
    for (int d = 0; d < 4; d++) {
        if (grid[d] < 1 || grid[d] > TL_SPMD_MAX_CORES)
            return tl_error(TL_EINVAL, "partition: grid dimension %d is %lld; it must be in [1, %d]", d,
                            (long long)grid[d], TL_SPMD_MAX_CORES);
        cores *= grid[d];
    }
    if (cores > TL_SPMD_MAX_CORES || core < 0 || core >= cores)
        return tl_error(TL_EINVAL, "partition: core %d of a grid of %lld cores (at most %d)", core, (long long)cores,
                        TL_SPMD_MAX_CORES);
    const tl_node *x = tl_graph_node(src, input);
    if (x == NULL || x->op != TL_OP_INPUT || (x->rank != 4 && x->rank != 3) || x->dtype != TL_F32)
        return tl_error(TL_EINVAL, "partition: the partitioned input must be a float32 input of images, (batch, "
                                   "height, width, channels) or (batch, height, width)");
    if (x->rank == 3 && grid[3] != 1)
        return tl_error(TL_EINVAL, "partition: images (batch, height, width) have no channels to split; grid[3] "
                                   "is %lld", (long long)grid[3]);
    if (src->status != TL_OK)
        return tl_error(src->status, "%s", src->err);
    size_t n = (size_t)(src->n ? src->n : 1);
    pctx c = {src, NULL, grid, core, out, tl_alloc_array(n, sizeof(tl_t)), tl_calloc(n, sizeof(bool))};
    out->map = tl_alloc_array(n, sizeof *out->map);
    out->tiled = tl_calloc(n, sizeof *out->tiled);
    out->var_partial = tl_calloc((size_t)(src->vars->n ? src->vars->n : 1), sizeof *out->var_partial);
    tl_status st = c.gathered == NULL || c.on_tiles == NULL || out->map == NULL || out->tiled == NULL ||
                           out->var_partial == NULL
                       ? tl_error_oom()
                       : tl_graph_create(src->vars, src->mode, &out->g);
    c.g = out->g;
    for (int i = 0; st == TL_OK && i < src->n; i++)
        c.gathered[i] = TL_T_INVALID;
    for (int i = 0; st == TL_OK && i < src->n; i++) {
        st = node(&c, i, input);
        if (st == TL_OK && out->g->status != TL_OK)
            st = tl_error(out->g->status, "partition: %s", out->g->err);
    }
    if (st == TL_OK)
        out->g->dropout_ops = src->dropout_ops;
    if (st == TL_OK)
        st = classify_vars(&c);
    tl_free(c.gathered);
    tl_free(c.on_tiles);
    if (st != TL_OK)
        tl_partition_free(out);
    return st;
}

void tl_partition_free(tl_partition *pt)
{
    if (pt->g != NULL)
        tl_graph_destroy(pt->g);
    tl_free(pt->map);
    tl_free(pt->tiled);
    tl_free(pt->var_partial);
    tl_free(pt->var_split);
    memset(pt, 0, sizeof *pt);
}

void tl_partition_add_partials(const tl_partition *pt, const tl_vars *vars, int ncores, const float *const *grads,
                               float *out)
{
    if (pt->var_split != NULL)
        tl_partition_take_chunks(pt, vars, ncores, grads, out);
    for (int v = 0; v < vars->n; v++) {
        if (!pt->var_partial[v])
            continue;
        const tl_var *var = &vars->v[v];
        for (int q = 1; q < ncores; q++)
            for (int64_t k = 0; k < var->size; k++)
                out[var->offset + k] += grads[q][var->offset + k];
    }
}

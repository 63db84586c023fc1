/* ops_spmd.c — the collectives a partitioned replica's cores run inside
 * their programs (partition.h): the halo gather of a spatially split tensor
 * and its core-ordered reduce, the gather of a whole tensor, the sum of the
 * cores' partials, and the two of tensor parallelism: a whole tensor's
 * slice (all-gather of the gradient) and its fan-out to split ops (sum of
 * the gradient). Node i is the same op in every core's program, so a
 * core finds another core's input or gradient of op i at that core's own
 * offsets (e->spmd->progs, ->peers).
 *
 * Each collective meets the other cores at the replica's barrier before it
 * reads their buffers and again after, so no core writes a buffer (its next
 * step's) while another still reads it. */
#include <string.h>

#include "ops.h"
#include "../base/thread.h"
#include "spatial.h"

_Static_assert(TL_NODE_IATTRS >= 17, "a HALO or GATHER node keeps 16 integers, a SLICE 17");

/* The whole tensor's shape and the grid of a HALO or GATHER node. */
static const int64_t *whole_shape(const tl_node *nd)
{
    return nd->iattr + 8;
}

static const int64_t *grid(const tl_node *nd)
{
    return nd->iattr + 12;
}

static tl_box region_of(const tl_node *nd)
{
    tl_box b;
    memcpy(b.off, nd->iattr, sizeof b.off);
    memcpy(b.size, nd->iattr + 4, sizeof b.size);
    return b;
}

tl_status tl_op_spmd_meet(const tl_exec *e)
{
    if (tl_barrier_wait(e->spmd->barrier) != TL_WAIT_OK)
        return tl_error(TL_ERUNTIME, "spmd: the replica's barrier was broken: another core of the replica failed");
    return TL_OK;
}

tl_status tl_op_spmd_check(const tl_exec *e)
{
    if (e->spmd == NULL || e->spmd->ncores < 1 || e->spmd->ncores > TL_SPMD_MAX_CORES)
        return tl_error(TL_EINVAL, "spmd: a partitioned program runs only on a replica's cores (1 to %d), each with "
                                   "its tl_spmd", TL_SPMD_MAX_CORES);
    return TL_OK;
}

static tl_status meet(const tl_exec *e)
{
    return tl_op_spmd_meet(e);
}

/* Core q's tile of the whole tensor of a HALO / GATHER node. */
static tl_box tile_of(const tl_node *nd, int q)
{
    tl_box b;
    tl_status st = tl_spatial_tile(whole_shape(nd), grid(nd), q, &b);
    TL_ASSERT(st == TL_OK); /* the partitioner made the grid */
    (void)st;
    return b;
}

/* The whole tensor of a HALO / GATHER / SLICE node as a box. */
static tl_box whole_box(const tl_node *nd)
{
    tl_box b = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    memcpy(b.size, whole_shape(nd), sizeof b.size);
    return b;
}

static tl_status forward(const tl_program *p, tl_exec *e, int i)
{
    const tl_node *nd = &p->g->nodes[i];
    tl_status st = tl_op_spmd_check(e);
    if (st != TL_OK)
        return st;
    if (nd->op == TL_OP_SPMD_CONV)
        return tl_spmd_conv_forward(p, e, i);
    float *y = tl_exec_value(p, e, i);
    const float *x = tl_exec_value(p, e, nd->in[0]);
    if (nd->op == TL_OP_SPMD_FANOUT || nd->op == TL_OP_SPMD_SLICE) { /* this core's own data: no meeting */
        tl_box all = whole_box(nd), mine = region_of(nd);
        if (nd->op == TL_OP_SPMD_FANOUT)
            memcpy(y, x, (size_t)nd->size * sizeof *y);
        else
            tl_spatial_gather(&mine, 1, &all, &x, y);
        return TL_OK;
    }
    if ((st = meet(e)) != TL_OK)
        return st;
    const tl_spmd *sp = e->spmd;
    const float *bufs[TL_SPMD_MAX_CORES];
    for (int q = 0; q < sp->ncores; q++)
        bufs[q] = tl_exec_value(sp->progs[q], sp->peers[q], nd->in[0]);
    if (nd->op == TL_OP_SPMD_SUM) {
        memcpy(y, bufs[0], (size_t)nd->size * sizeof *y);
        for (int q = 1; q < sp->ncores; q++)
            for (int64_t k = 0; k < nd->size; k++)
                y[k] += bufs[q][k];
    } else {
        tl_box tiles[TL_SPMD_MAX_CORES], need = region_of(nd);
        for (int q = 0; q < sp->ncores; q++)
            tiles[q] = tile_of(nd, q);
        tl_spatial_gather(&need, sp->ncores, tiles, bufs, y);
    }
    return meet(e);
}

static tl_status backward(const tl_program *p, tl_exec *e, int i, int64_t *cursor)
{
    const tl_node *nd = &p->g->nodes[i];
    tl_status st = tl_op_spmd_check(e);
    if (st != TL_OK)
        return st;
    if (nd->op == TL_OP_SPMD_CONV)
        return tl_spmd_conv_backward(p, e, i, cursor);
    const tl_spmd *sp = e->spmd;
    const float *dy = tl_op_grad(p, e, i);
    /* Every core runs the same backward ops: those whose input wants no
     * gradient skip the barriers on every core alike. */
    if (!tl_op_wants(p, i, 0))
        return TL_OK;
    const tl_node *x = &p->g->nodes[nd->in[0]];
    float *dx = tl_op_dst(p, e, i, 0, cursor);
    switch (nd->op) {
    case TL_OP_SPMD_SUM: memcpy(dx, dy, (size_t)x->size * sizeof *dx); break;
    case TL_OP_SPMD_GATHER: {
        tl_box all = region_of(nd), mine = tile_of(nd, sp->core);
        tl_spatial_gather(&mine, 1, &all, &dy, dx);
        break;
    }
    case TL_OP_SPMD_SLICE:
        if (nd->iattr[16]) { /* a split variable's: its chunk, which the replica's gradient takes from here */
            tl_box all = whole_box(nd), mine = region_of(nd);
            if (!(p->first_write[i] & 1u))
                memset(dx, 0, (size_t)x->size * sizeof *dx); /* (staged: the rest adds nothing) */
            tl_spatial_gather(&all, 1, &mine, &dy, dx);
            break;
        }
        /* fall through */
    case TL_OP_SPMD_FANOUT: {
        if ((st = meet(e)) != TL_OK)
            return st;
        const float *dys[TL_SPMD_MAX_CORES];
        tl_box tiles[TL_SPMD_MAX_CORES], all = whole_box(nd);
        for (int q = 0; q < sp->ncores; q++) {
            dys[q] = tl_op_grad(sp->progs[q], sp->peers[q], i);
            tiles[q] = region_of(&sp->progs[q]->g->nodes[i]);
        }
        if (nd->op == TL_OP_SPMD_SLICE) {
            tl_spatial_gather(&all, sp->ncores, tiles, dys, dx);
        } else {
            memcpy(dx, dys[0], (size_t)x->size * sizeof *dx);
            for (int q = 1; q < sp->ncores; q++)
                for (int64_t k = 0; k < x->size; k++)
                    dx[k] += dys[q][k];
        }
        st = meet(e);
        break;
    }
    default: { /* TL_OP_SPMD_HALO */
        if ((st = meet(e)) != TL_OK)
            return st;
        tl_box needs[TL_SPMD_MAX_CORES], mine = tile_of(nd, sp->core);
        const float *rgrads[TL_SPMD_MAX_CORES];
        for (int q = 0; q < sp->ncores; q++) {
            needs[q] = region_of(&sp->progs[q]->g->nodes[i]);
            rgrads[q] = tl_op_grad(sp->progs[q], sp->peers[q], i);
        }
        tl_spatial_reduce(&mine, sp->ncores, needs, rgrads, dx);
        st = meet(e);
        break;
    }
    }
    tl_op_finish(p, e, i, 0, dx);
    return st;
}

static int64_t scratch(const tl_graph *g, int i)
{
    return g->nodes[i].op == TL_OP_SPMD_CONV ? tl_spmd_conv_scratch(g, i) : 0;
}

static int64_t aux(const tl_graph *g, int i)
{
    return g->nodes[i].op == TL_OP_SPMD_CONV ? tl_spmd_conv_aux(g, i) : 0;
}

const tl_op_family tl_ops_spmd = {"spmd", TL_OP_SPMD_FIRST_, TL_OP_SPMD_LAST_, forward, backward, scratch, NULL,
                                  aux};

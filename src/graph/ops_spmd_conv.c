/* ops_spmd_conv.c — TL_OP_SPMD_CONV: a convolution on the row tiles of a
 * partitioned replica (partition.h) that reads its own tile in place.
 *
 * The halo path (TL_OP_SPMD_HALO, then the conv on the region) copies the
 * whole tile into the region every pass. Here the output tile's rows split
 * three ways:
 *
 *   top      rows [o0, i0) whose windows reach above the tile: convolved
 *            from a small region (their rows, gathered from every core's
 *            tile) with all the tile's images at once;
 *   interior rows [i0, i1) whose windows lie in the tile (or the image's
 *            padding): convolved from the tile itself, image by image (an
 *            image's rows are contiguous in the tile and in the output);
 *   bottom   rows [i1, o1), as the top.
 *
 * The two regions stay in the node's aux floats, with their gradients
 * beside them, so the backward pass needs no gathering again and the other
 * cores read the regions' gradients there. The backward pass: dy's
 * boundary rows give the regions' gradients; the interior's gradient is
 * written into dx image by image, the rows it does not reach zeroed; then
 * every core's region gradients are added into dx where they overlap this
 * core's tile, in core order (top before bottom). The filter's gradient is
 * the sum of the interior's, image after image, the top's and the
 * bottom's: a partial of the replica's, as the halo path's.
 *
 * The node: in (x tile, filter); shape the output tile; iattr[0..11] the
 * whole conv's attributes (TL_OP_CONV2D's), [12] its input's rows H, [13]
 * its output's rows OH, [14] the input tile's first row, [15] the output
 * tile's first row, [16..17] the grid's batch and row splits, [18] the
 * whole batch. Columns and channels are not split. */
#include <string.h>

#include "../kernels/conv.h"
#include "ops.h"
#include "spatial.h"

_Static_assert(TL_NODE_IATTRS >= 19, "an SPMD_CONV node keeps 19 integers");

typedef struct sconv {
    tl_k_conv_geom whole, inner, top, bot;
    int64_t n, ht, w, c, oht, ow, o;     /* the tile's x (n, ht, w, c), y (n, oht, ow, o) */
    int64_t t0, o0, i0, i1;              /* rows: input tile from t0, output tile from o0, interior [i0, i1) */
    int64_t ra;                          /* the interior's first input row (whole coordinates) */
    tl_box rtop, rbot;                   /* the regions (whole coordinates) */
    int64_t topn, botn;                  /* floats of each region */
    int64_t filter;                      /* floats of the filter */
} sconv;

/* The geometry of rows [a, b) of the whole conv's output from the rows it
 * reads, in nimg images: *region the input rows (whole coordinates). */
static tl_k_conv_geom rows_geom(const tl_k_conv_geom *cv, int64_t a, int64_t b, int64_t nimg, int64_t *r0,
                                int64_t *r1)
{
    tl_k_conv_geom g = *cv;
    int64_t lo, hi;
    tl_spatial_reach(cv->h, cv->kh, cv->stride_h, cv->dilation_h, cv->pad_top, a, b, r0, r1, &lo, &hi);
    g.n = nimg, g.h = *r1 - *r0, g.oh = b - a, g.pad_top = lo, g.pad_bottom = hi;
    return g;
}

void tl_spmd_conv_interior(const tl_k_conv_geom *cv, int64_t t0, int64_t t1, int64_t o0, int64_t o1, int64_t *i0,
                           int64_t *i1)
{
    int64_t keff = (cv->kh - 1) * cv->dilation_h + 1, a = o0, b = o1;
    if (t0 > 0) { /* windows from row t0 on (at the image's top, any) */
        int64_t first = (t0 + cv->pad_top + cv->stride_h - 1) / cv->stride_h;
        a = first > a ? first : a;
    }
    if (t1 < cv->h) { /* up to row t1 (at its bottom, any) */
        int64_t room = t1 + cv->pad_top - keff;
        int64_t last = room >= 0 ? room / cv->stride_h + 1 : 0;
        b = last < b ? last : b;
    }
    a = a < o1 ? a : o1;
    *i0 = a, *i1 = b > a ? b : a;
}

static void plan(const tl_graph *g, const tl_node *nd, sconv *s)
{
    const tl_node *x = &g->nodes[nd->in[0]], *f = &g->nodes[nd->in[1]];
    const int64_t *a = nd->iattr;
    memset(s, 0, sizeof *s);
    s->n = x->shape[0], s->ht = x->shape[1], s->w = x->shape[2], s->c = x->shape[3];
    s->oht = nd->shape[1], s->ow = nd->shape[2], s->o = nd->shape[3];
    s->t0 = a[14], s->o0 = a[15];
    s->filter = f->size;
    s->whole = (tl_k_conv_geom){.n = s->n, .h = a[12], .w = s->w, .c = s->c, .kh = a[0], .kw = a[1], .o = s->o,
                                .groups = a[2], .stride_h = a[3], .stride_w = a[4], .dilation_h = a[5],
                                .dilation_w = a[6], .pad_top = a[7], .pad_left = a[8], .pad_bottom = a[9],
                                .pad_right = a[10], .oh = a[13], .ow = s->ow, .impl = TL_K_CONV_AUTO};
    const tl_k_conv_geom *cv = &s->whole;
    int64_t o1 = s->o0 + s->oht;
    tl_spmd_conv_interior(cv, s->t0, s->t0 + s->ht, s->o0, o1, &s->i0, &s->i1);
    int64_t r0, r1;
    s->inner = rows_geom(cv, s->i0, s->i1, 1, &r0, &r1);
    s->ra = r0;
    s->top = rows_geom(cv, s->o0, s->i0, s->n, &r0, &r1);
    s->rtop = (tl_box){{0, r0, 0, 0}, {s->n, r1 - r0, s->w, s->c}};
    s->bot = rows_geom(cv, s->i1, o1, s->n, &r0, &r1);
    s->rbot = (tl_box){{0, r0, 0, 0}, {s->n, r1 - r0, s->w, s->c}};
    s->topn = s->i0 > s->o0 ? tl_box_count(&s->rtop) : 0;
    s->botn = o1 > s->i1 ? tl_box_count(&s->rbot) : 0;
}

/* The batch offset of core q's tile (the regions' batch coordinate). */
static tl_box tile_box(const tl_node *nd, const sconv *s, int q)
{
    const int64_t *a = nd->iattr;
    int64_t whole[4] = {a[18], a[12], s->w, s->c}, grid[4] = {a[16], a[17], 1, 1};
    tl_box b;
    tl_status st = tl_spatial_tile(whole, grid, q, &b);
    TL_ASSERT(st == TL_OK); /* the partitioner made the grid */
    (void)st;
    return b;
}

int64_t tl_spmd_conv_aux(const tl_graph *g, int i)
{
    sconv s;
    plan(g, &g->nodes[i], &s);
    return 2 * (s.topn + s.botn);
}

/* Floats of the boundary rows of y (or dy): top then bottom. */
static int64_t edge_floats(const sconv *s)
{
    return s->n * (s->oht - (s->i1 - s->i0)) * s->ow * s->o;
}

int64_t tl_spmd_conv_scratch(const tl_graph *g, int i)
{
    sconv s;
    plan(g, &g->nodes[i], &s);
    int64_t most = 0;
    const tl_k_conv_geom *gs[3] = {&s.inner, &s.top, &s.bot};
    bool on[3] = {s.i1 > s.i0, s.topn > 0, s.botn > 0};
    for (int k = 0; k < 3; k++)
        for (int pass = 0; on[k] && pass < 3; pass++) {
            int64_t f = 0;
            if (tl_k_conv2d_scratch(gs[k], (tl_k_conv_pass)pass, &f) == TL_OK && f > most)
                most = f;
            tl_clear_error(); /* an engine without a kernel fails the pass itself, with its message */
        }
    return edge_floats(&s) + 2 * s.filter + most + 16;
}

/* Rows [a, b) of every image of t (nimg images of rows rows of width
 * floats) from the contiguous buffer c (rows_out), or into it (rows_in). */
static void rows_out(float *t, int64_t rows, int64_t a, int64_t b, int64_t nimg, int64_t width, const float *c)
{
    for (int64_t n = 0; n < nimg; n++)
        memcpy(t + (n * rows + a) * width, c + n * (b - a) * width, (size_t)((b - a) * width) * sizeof *t);
}

static void rows_in(const float *t, int64_t rows, int64_t a, int64_t b, int64_t nimg, int64_t width, float *c)
{
    for (int64_t n = 0; n < nimg; n++)
        memcpy(c + n * (b - a) * width, t + (n * rows + a) * width, (size_t)((b - a) * width) * sizeof *c);
}

/* The regions from every core's tile, into aux. */
static void gather_regions(const tl_program *p, const tl_exec *e, int i, const sconv *s, float *aux)
{
    const tl_spmd *sp = e->spmd;
    const tl_node *nd = &p->g->nodes[i];
    tl_box tiles[TL_SPMD_MAX_CORES], mine = tile_box(nd, s, sp->core);
    const float *bufs[TL_SPMD_MAX_CORES];
    for (int q = 0; q < sp->ncores; q++) {
        tiles[q] = tile_box(&sp->progs[q]->g->nodes[i], s, q);
        bufs[q] = tl_exec_value(sp->progs[q], sp->peers[q], sp->progs[q]->g->nodes[i].in[0]);
    }
    tl_box top = s->rtop, bot = s->rbot;
    top.off[0] = bot.off[0] = mine.off[0];
    if (s->topn > 0)
        tl_spatial_gather(&top, sp->ncores, tiles, bufs, aux);
    if (s->botn > 0)
        tl_spatial_gather(&bot, sp->ncores, tiles, bufs, aux + s->topn);
}

tl_status tl_spmd_conv_forward(const tl_program *p, tl_exec *e, int i)
{
    const tl_node *nd = &p->g->nodes[i];
    sconv s;
    plan(p->g, nd, &s);
    float *y = tl_exec_value(p, e, i), *aux = tl_exec_aux(p, e, i);
    const float *x = tl_exec_value(p, e, nd->in[0]), *f = tl_exec_value(p, e, nd->in[1]);
    tl_status st = tl_op_spmd_meet(e);
    if (st != TL_OK)
        return st;
    gather_regions(p, e, i, &s, aux);
    if ((st = tl_op_spmd_meet(e)) != TL_OK)
        return st;
    float *edge = e->scratch, *scr = e->scratch + edge_floats(&s) + 2 * s.filter;
    int64_t room = p->scratch_floats - edge_floats(&s) - 2 * s.filter, xw = s.w * s.c, yw = s.ow * s.o;
    for (int64_t n = 0; n < s.n && s.i1 > s.i0 && st == TL_OK; n++)
        st = tl_k_conv2d(&s.inner, x + (n * s.ht + s.ra - s.t0) * xw, f, y + (n * s.oht + s.i0 - s.o0) * yw, scr,
                         room);
    int64_t nt = s.i0 - s.o0, nb = s.o0 + s.oht - s.i1;
    if (st == TL_OK && s.topn > 0 && (st = tl_k_conv2d(&s.top, aux, f, edge, scr, room)) == TL_OK)
        rows_out(y, s.oht, 0, nt, s.n, yw, edge);
    if (st == TL_OK && s.botn > 0 && (st = tl_k_conv2d(&s.bot, aux + s.topn, f, edge, scr, room)) == TL_OK)
        rows_out(y, s.oht, s.oht - nb, s.oht, s.n, yw, edge);
    return st;
}

tl_status tl_spmd_conv_backward(const tl_program *p, tl_exec *e, int i, int64_t *cursor)
{
    const tl_node *nd = &p->g->nodes[i];
    const tl_spmd *sp = e->spmd;
    sconv s;
    plan(p->g, nd, &s);
    const float *dy = tl_op_grad(p, e, i), *f = tl_exec_value(p, e, nd->in[1]);
    const float *x = tl_exec_value(p, e, nd->in[0]);
    float *aux = tl_exec_aux(p, e, i), *gtop = aux + s.topn + s.botn, *gbot = gtop + s.topn;
    bool want_x = tl_op_wants(p, i, 0), want_f = tl_op_wants(p, i, 1);
    float *dx = want_x ? tl_op_dst(p, e, i, 0, cursor) : NULL, *df = want_f ? tl_op_dst(p, e, i, 1, cursor) : NULL;
    int64_t nt = s.i0 - s.o0, nb = s.o0 + s.oht - s.i1, xw = s.w * s.c, yw = s.ow * s.o;
    float *edge = tl_op_scratch(e, cursor, edge_floats(&s));
    float *dwt = tl_op_scratch(e, cursor, s.filter), *dwa = tl_op_scratch(e, cursor, s.filter);
    float *scr = e->scratch + *cursor;
    int64_t room = p->scratch_floats - *cursor;
    tl_status st = TL_OK;
    float *etop = edge, *ebot = edge + s.n * nt * yw; /* dy's top and bottom rows, contiguous */
    rows_in(dy, s.oht, 0, nt, s.n, yw, etop);
    rows_in(dy, s.oht, s.oht - nb, s.oht, s.n, yw, ebot);
    if (want_f) { /* interior image after image, then top, then bottom */
        bool first = true;
        for (int64_t n = 0; n < s.n && s.i1 > s.i0 && st == TL_OK; n++) {
            st = tl_k_conv2d_grad_filter(&s.inner, x + (n * s.ht + s.ra - s.t0) * xw,
                                         dy + (n * s.oht + s.i0 - s.o0) * yw, first ? dwa : dwt, scr, room);
            if (!first)
                for (int64_t k = 0; k < s.filter; k++)
                    dwa[k] += dwt[k];
            first = false;
        }
        const tl_k_conv_geom *eg[2] = {&s.top, &s.bot};
        const float *ex[2] = {aux, aux + s.topn}, *ed[2] = {etop, ebot};
        bool on[2] = {s.topn > 0, s.botn > 0};
        for (int k = 0; k < 2 && st == TL_OK; k++) {
            if (!on[k])
                continue;
            st = tl_k_conv2d_grad_filter(eg[k], ex[k], ed[k], first ? dwa : dwt, scr, room);
            if (!first)
                for (int64_t j = 0; j < s.filter; j++)
                    dwa[j] += dwt[j];
            first = false;
        }
        if (st == TL_OK) {
            if (first)
                memset(dwa, 0, (size_t)s.filter * sizeof *dwa);
            memcpy(df, dwa, (size_t)s.filter * sizeof *df);
            tl_op_finish(p, e, i, 1, df);
        }
    }
    if (!want_x)
        return st; /* (the same on every core: none meets) */
    if (st == TL_OK && s.topn > 0)
        st = tl_k_conv2d_grad_input(&s.top, etop, f, gtop, scr, room);
    if (st == TL_OK && s.botn > 0)
        st = tl_k_conv2d_grad_input(&s.bot, ebot, f, gbot, scr, room);
    /* The interior's gradient, image by image; the rows it does not reach 0. */
    int64_t a = s.ra - s.t0, b = a + s.inner.h;
    for (int64_t n = 0; n < s.n && st == TL_OK; n++) {
        float *img = dx + n * s.ht * xw;
        if (s.i1 > s.i0)
            st = tl_k_conv2d_grad_input(&s.inner, dy + (n * s.oht + s.i0 - s.o0) * yw, f, img + a * xw, scr, room);
        else
            a = b = 0;
        memset(img, 0, (size_t)(a * xw) * sizeof *img);
        memset(img + b * xw, 0, (size_t)((s.ht - b) * xw) * sizeof *img);
    }
    /* Meet even after a failure, so no core waits for this one. */
    tl_status mt = tl_op_spmd_meet(e);
    if (st == TL_OK)
        st = mt;
    if (st != TL_OK)
        return st;
    tl_box mine = tile_box(nd, &s, sp->core);
    for (int q = 0; q < sp->ncores; q++) {
        const tl_node *qn = &sp->progs[q]->g->nodes[i];
        sconv qs;
        plan(sp->progs[q]->g, qn, &qs);
        const float *qa = tl_exec_aux(sp->progs[q], sp->peers[q], i);
        tl_box qm = tile_box(qn, &qs, q), top = qs.rtop, bot = qs.rbot;
        top.off[0] = bot.off[0] = qm.off[0];
        if (qs.topn > 0)
            tl_spatial_accumulate(&mine, &top, qa + qs.topn + qs.botn, dx);
        if (qs.botn > 0)
            tl_spatial_accumulate(&mine, &bot, qa + 2 * qs.topn + qs.botn, dx);
    }
    st = tl_op_spmd_meet(e);
    tl_op_finish(p, e, i, 0, dx);
    return st;
}

/* shape.c — transpose, broadcast / tile and constant pad (shape.h), and
 * their float64 twins; gather and one-hot are in shape_gather.c. The fast
 * kernels first simplify the geometry — drop size-1 dims, merge dims that
 * move together — then walk the output with an odometer over all but the
 * innermost dim, whose run is a memcpy or a fill wherever it is contiguous.
 * The twins map each output index to its input index, element by element. */
#include <inttypes.h>
#include <string.h>

#include "../base/base_int.h"
#include "kernels_int.h"
#include "shape.h"

/* float64 accumulators of a broadcast gradient's chunk (stack, not VLA). */
#define CHUNK 64

/* ---- checks ------------------------------------------------------------------------ */

static tl_status check_shape(const char *what, const char *name, int rank, int max, const int64_t *shape)
{
    if (rank < 0 || rank > max)
        return tl_error(TL_EINVAL, "%s: rank %d is outside [0, %d]", what, rank, max);
    for (int d = 0; d < rank; d++)
        if (shape[d] < 0)
            return tl_error(TL_EINVAL, "%s: %s dim %d is %" PRId64 "; dims must be >= 0", what, name, d, shape[d]);
    return TL_OK;
}

static int64_t product(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    return n;
}

static tl_status check_perm(const char *what, int rank, const int64_t *shape, const int *perm)
{
    tl_status st = check_shape(what, "x", rank, TL_K_MAX_DIMS, shape);
    if (st != TL_OK)
        return st;
    bool seen[TL_K_MAX_DIMS] = {false};
    for (int d = 0; d < rank; d++) {
        if (perm[d] < 0 || perm[d] >= rank || seen[perm[d]])
            return tl_error(TL_EINVAL, "%s: perm[%d] = %d: perm must hold 0..%d once each", what, d, perm[d],
                            rank - 1);
        seen[perm[d]] = true;
    }
    return TL_OK;
}

static tl_status check_broadcast(const char *what, int rank, const int64_t *xshape, const int64_t *yshape)
{
    tl_status st = check_shape(what, "x", rank, TL_K_MAX_DIMS, xshape);
    if (st == TL_OK)
        st = check_shape(what, "y", rank, TL_K_MAX_DIMS, yshape);
    if (st != TL_OK)
        return st;
    for (int d = 0; d < rank; d++)
        if (xshape[d] != yshape[d] && xshape[d] != 1)
            return tl_error(TL_EINVAL, "%s: x dim %d is %" PRId64 ", which does not broadcast to %" PRId64, what, d,
                            xshape[d], yshape[d]);
    return TL_OK;
}

/* x (1, x0, 1, x1, ...) and y (m0, x0, m1, x1, ...): tile as a broadcast. */
static tl_status tile_view(const char *what, int rank, const int64_t *xshape, const int64_t *multiples,
                           int64_t *xv, int64_t *yv)
{
    tl_status st = check_shape(what, "x", rank, TL_MAX_RANK, xshape);
    if (st != TL_OK)
        return st;
    for (int d = 0; d < rank; d++) {
        if (multiples[d] < 0)
            return tl_error(TL_EINVAL, "%s: multiples[%d] is %" PRId64 "; multiples must be >= 0", what, d,
                            multiples[d]);
        xv[2 * d] = 1;
        yv[2 * d] = multiples[d];
        xv[2 * d + 1] = yv[2 * d + 1] = xshape[d];
    }
    return TL_OK;
}

static tl_status check_pad(const char *what, int rank, const int64_t *xshape, const int64_t *pads, int64_t *yshape)
{
    tl_status st = check_shape(what, "x", rank, TL_K_MAX_DIMS, xshape);
    if (st != TL_OK)
        return st;
    for (int d = 0; d < rank; d++) {
        if (pads[2 * d] < 0 || pads[2 * d + 1] < 0)
            return tl_error(TL_EINVAL, "%s: paddings of axis %d are (%" PRId64 ", %" PRId64 "); they must be >= 0",
                            what, d, pads[2 * d], pads[2 * d + 1]);
        yshape[d] = xshape[d] + pads[2 * d] + pads[2 * d + 1];
    }
    return TL_OK;
}

/* ---- the odometer --------------------------------------------------------------------- */

/* An index over n dims, each with its own stride into some buffer; off is
 * the index's offset. */
typedef struct odometer {
    int n;
    int64_t dim[TL_K_MAX_DIMS];
    int64_t stride[TL_K_MAX_DIMS];
    int64_t at[TL_K_MAX_DIMS];
    int64_t off;
} odometer;

static void odo_add(odometer *o, int64_t dim, int64_t stride)
{
    o->dim[o->n] = dim;
    o->stride[o->n] = stride;
    o->at[o->n] = 0;
    o->n++;
}

/* Steps to the next index in row-major order; false after the last (the
 * odometer is then back at 0). An odometer of no dims has one index. */
static bool odo_next(odometer *o)
{
    for (int d = o->n - 1; d >= 0; d--) {
        o->at[d]++;
        o->off += o->stride[d];
        if (o->at[d] < o->dim[d])
            return true;
        o->off -= o->at[d] * o->stride[d];
        o->at[d] = 0;
    }
    return false;
}

/* ---- transpose ------------------------------------------------------------------------- */

/* Drops x's size-1 dims and merges x-adjacent dims that stay adjacent in y:
 * x becomes (dims[0..*m)), y's dim d is x's merged dim p[d]. */
static void simplify_perm(int rank, const int64_t *shape, const int *perm, int *m, int64_t *dims, int *p)
{
    int keep[TL_K_MAX_DIMS], k = 0, q[TL_K_MAX_DIMS];
    for (int a = 0; a < rank; a++)
        keep[a] = shape[a] == 1 ? -1 : k++;
    int nq = 0;
    for (int d = 0; d < rank; d++)
        if (keep[perm[d]] >= 0)
            q[nq++] = keep[perm[d]]; /* y's kept dims, as kept x dims */
    int64_t kdims[TL_K_MAX_DIMS];
    for (int a = 0; a < rank; a++)
        if (keep[a] >= 0)
            kdims[keep[a]] = shape[a];
    /* Groups of y-consecutive dims that are x-consecutive; group_of[x dim]. */
    int start[TL_K_MAX_DIMS], ngroups = 0, group_of[TL_K_MAX_DIMS];
    for (int d = 0; d < nq; d++) {
        if (d == 0 || q[d] != q[d - 1] + 1)
            start[ngroups++] = q[d];
        group_of[q[d]] = ngroups - 1;
    }
    /* Merged x dims in x order: walk x's kept dims, a new dim at each group's start. */
    int rank_of_group[TL_K_MAX_DIMS];
    *m = 0;
    for (int a = 0; a < k; a++) {
        int gi = group_of[a];
        if (start[gi] == a) {
            rank_of_group[gi] = *m;
            dims[(*m)++] = kdims[a];
        } else {
            dims[*m - 1] *= kdims[a];
        }
    }
    for (int gi = 0; gi < ngroups; gi++)
        p[gi] = rank_of_group[gi];
}

static void transpose_f32(int rank, const int64_t *shape, const int *perm, const float *restrict x,
                          float *restrict y)
{
    if (product(rank, shape) == 0)
        return;
    int m, p[TL_K_MAX_DIMS];
    int64_t dims[TL_K_MAX_DIMS], xstride[TL_K_MAX_DIMS];
    simplify_perm(rank, shape, perm, &m, dims, p);
    if (m == 0) {
        y[0] = x[0];
        return;
    }
    xstride[m - 1] = 1;
    for (int a = m - 2; a >= 0; a--)
        xstride[a] = xstride[a + 1] * dims[a + 1];
    odometer o = {0};
    for (int d = 0; d + 1 < m; d++)
        odo_add(&o, dims[p[d]], xstride[p[d]]);
    const int64_t run = dims[p[m - 1]], step = xstride[p[m - 1]];
    float *restrict dst = y;
    do {
        const float *restrict src = x + o.off;
        if (step == 1) { /* x's innermost run is y's: one block */
            copy_run(dst, src, run);
        } else {
            for (int64_t j = 0; j < run; j++)
                dst[j] = src[j * step];
        }
        dst += run;
    } while (odo_next(&o));
}

tl_status tl_k_transpose(int rank, const int64_t *shape, const int *perm, const float *restrict x,
                         float *restrict y)
{
    tl_status st = check_perm("transpose", rank, shape, perm);
    if (st != TL_OK)
        return st;
    transpose_f32(rank, shape, perm, x, y);
    return TL_OK;
}

/* y's shape and the inverse permutation: dx = transpose(dy, inverse). */
static void invert(int rank, const int64_t *shape, const int *perm, int64_t *yshape, int *inv)
{
    for (int d = 0; d < rank; d++) {
        yshape[d] = shape[perm[d]];
        inv[perm[d]] = d;
    }
}

tl_status tl_k_transpose_grad(int rank, const int64_t *shape, const int *perm, const float *restrict dy,
                              float *restrict dx)
{
    tl_status st = check_perm("transpose_grad", rank, shape, perm);
    if (st != TL_OK)
        return st;
    int64_t yshape[TL_K_MAX_DIMS];
    int inv[TL_K_MAX_DIMS];
    invert(rank, shape, perm, yshape, inv);
    transpose_f32(rank, yshape, inv, dy, dx);
    return TL_OK;
}

/* ---- broadcast and tile --------------------------------------------------------------- */

/* A broadcast with y's size-1 dims dropped and neighbours of the same kind
 * merged: dim d of y has size dim[d]; x has it too (kept) or has 1 (bcast). */
typedef struct bview {
    int m;
    int64_t dim[TL_K_MAX_DIMS];
    bool bcast[TL_K_MAX_DIMS];
    int64_t xstride[TL_K_MAX_DIMS]; /* 0 on broadcast dims */
    int64_t ystride[TL_K_MAX_DIMS];
} bview;

static void simplify_broadcast(int rank, const int64_t *xshape, const int64_t *yshape, bview *v)
{
    v->m = 0;
    for (int d = 0; d < rank; d++) {
        if (yshape[d] == 1)
            continue;
        bool b = xshape[d] == 1;
        if (v->m > 0 && v->bcast[v->m - 1] == b) {
            v->dim[v->m - 1] *= yshape[d];
        } else {
            v->dim[v->m] = yshape[d];
            v->bcast[v->m] = b;
            v->m++;
        }
    }
    int64_t xs = 1, ys = 1;
    for (int d = v->m - 1; d >= 0; d--) {
        v->ystride[d] = ys;
        ys *= v->dim[d];
        v->xstride[d] = v->bcast[d] ? 0 : xs;
        xs *= v->bcast[d] ? 1 : v->dim[d];
    }
}

static void broadcast_f32(int rank, const int64_t *xshape, const int64_t *yshape, const float *restrict x,
                          float *restrict y)
{
    if (product(rank, yshape) == 0)
        return;
    bview v;
    simplify_broadcast(rank, xshape, yshape, &v);
    if (v.m == 0) {
        y[0] = x[0];
        return;
    }
    odometer o = {0};
    for (int d = 0; d + 1 < v.m; d++)
        odo_add(&o, v.dim[d], v.xstride[d]);
    const int64_t run = v.dim[v.m - 1];
    const bool fill = v.bcast[v.m - 1];
    float *restrict dst = y;
    do {
        if (fill)
            fill_run(dst, x[o.off], run);
        else
            copy_run(dst, x + o.off, run);
        dst += run;
    } while (odo_next(&o));
}

static void broadcast_grad_f32(int rank, const int64_t *xshape, const int64_t *yshape, const float *restrict dy,
                               float *restrict dx)
{
    const int64_t nx = product(rank, xshape);
    if (product(rank, yshape) == 0) { /* x copied nowhere: its gradient is 0 */
        if (nx > 0)
            memset(dx, 0, (size_t)nx * sizeof *dx);
        return;
    }
    bview v;
    simplify_broadcast(rank, xshape, yshape, &v);
    if (v.m == 0) {
        dx[0] = dy[0];
        return;
    }
    /* kept: the kept dims but the innermost; b: the broadcast dims but the
     * innermost, each stepping through dy. */
    odometer kept = {0}, b = {0};
    for (int d = 0; d + 1 < v.m; d++)
        odo_add(v.bcast[d] ? &b : &kept, v.dim[d], v.ystride[d]);
    const int64_t run = v.dim[v.m - 1];
    float *restrict out = dx;
    if (v.bcast[v.m - 1]) {
        /* Each dx element sums contiguous runs of dy, in order. */
        do {
            double acc = 0.0;
            do {
                const float *restrict src = dy + kept.off + b.off;
                for (int64_t j = 0; j < run; j++)
                    acc += (double)src[j];
            } while (odo_next(&b));
            *out++ = (float)acc;
        } while (odo_next(&kept));
        return;
    }
    /* The innermost dim is kept: a chunk of dx at a time, each element's
     * terms still in increasing dy order. */
    do {
        for (int64_t c0 = 0; c0 < run; c0 += CHUNK) {
            const int64_t c = run - c0 < CHUNK ? run - c0 : CHUNK;
            double acc[CHUNK] = {0.0};
            do {
                const float *restrict src = dy + kept.off + b.off + c0;
                for (int64_t j = 0; j < c; j++)
                    acc[j] += (double)src[j];
            } while (odo_next(&b));
            for (int64_t j = 0; j < c; j++)
                out[c0 + j] = (float)acc[j];
        }
        out += run;
    } while (odo_next(&kept));
}

tl_status tl_k_broadcast(int rank, const int64_t *xshape, const int64_t *yshape, const float *restrict x,
                         float *restrict y)
{
    tl_status st = check_broadcast("broadcast", rank, xshape, yshape);
    if (st != TL_OK)
        return st;
    broadcast_f32(rank, xshape, yshape, x, y);
    return TL_OK;
}

tl_status tl_k_broadcast_grad(int rank, const int64_t *xshape, const int64_t *yshape, const float *restrict dy,
                              float *restrict dx)
{
    tl_status st = check_broadcast("broadcast_grad", rank, xshape, yshape);
    if (st != TL_OK)
        return st;
    broadcast_grad_f32(rank, xshape, yshape, dy, dx);
    return TL_OK;
}

tl_status tl_k_tile(int rank, const int64_t *xshape, const int64_t *multiples, const float *restrict x,
                    float *restrict y)
{
    int64_t xv[TL_K_MAX_DIMS], yv[TL_K_MAX_DIMS];
    tl_status st = tile_view("tile", rank, xshape, multiples, xv, yv);
    if (st != TL_OK)
        return st;
    broadcast_f32(2 * rank, xv, yv, x, y);
    return TL_OK;
}

tl_status tl_k_tile_grad(int rank, const int64_t *xshape, const int64_t *multiples, const float *restrict dy,
                         float *restrict dx)
{
    int64_t xv[TL_K_MAX_DIMS], yv[TL_K_MAX_DIMS];
    tl_status st = tile_view("tile_grad", rank, xshape, multiples, xv, yv);
    if (st != TL_OK)
        return st;
    broadcast_grad_f32(2 * rank, xv, yv, dy, dx);
    return TL_OK;
}

/* ---- constant pad --------------------------------------------------------------------- */

/* Copies x's rows (all dims but the innermost) to the same rows of y's
 * interior (to_y), or y's interior rows back to x's (the gradient). */
static void pad_rows(int rank, const int64_t *xshape, const int64_t *pads, const int64_t *yshape, bool to_y,
                     const float *restrict src, float *restrict dst)
{
    int64_t ystride[TL_K_MAX_DIMS], base = 0, s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        ystride[d] = s;
        base += pads[2 * d] * s;
        s *= yshape[d];
    }
    odometer o = {0};
    for (int d = 0; d + 1 < rank; d++)
        odo_add(&o, xshape[d], ystride[d]);
    const int64_t run = rank > 0 ? xshape[rank - 1] : 1;
    int64_t xo = 0;
    do {
        const int64_t yo = base + o.off;
        copy_run(dst + (to_y ? yo : xo), src + (to_y ? xo : yo), run);
        xo += run;
    } while (odo_next(&o));
}

tl_status tl_k_pad(int rank, const int64_t *xshape, const int64_t *pads, double value, const float *restrict x,
                   float *restrict y)
{
    int64_t yshape[TL_K_MAX_DIMS];
    tl_status st = check_pad("pad", rank, xshape, pads, yshape);
    if (st != TL_OK)
        return st;
    fill_run(y, (float)value, product(rank, yshape));
    if (product(rank, xshape) == 0)
        return TL_OK;
    pad_rows(rank, xshape, pads, yshape, true, x, y);
    return TL_OK;
}

tl_status tl_k_pad_grad(int rank, const int64_t *xshape, const int64_t *pads, const float *restrict dy,
                        float *restrict dx)
{
    int64_t yshape[TL_K_MAX_DIMS];
    tl_status st = check_pad("pad_grad", rank, xshape, pads, yshape);
    if (st != TL_OK)
        return st;
    if (product(rank, xshape) == 0)
        return TL_OK;
    pad_rows(rank, xshape, pads, yshape, false, dy, dx);
    return TL_OK;
}

/* ---- float64 twins: one element at a time -------------------------------------------- */

/* Row-major multi-index of linear position i in shape. */
static void unravel(int rank, const int64_t *shape, int64_t i, int64_t *at)
{
    for (int d = rank - 1; d >= 0; d--) {
        at[d] = i % shape[d];
        i /= shape[d];
    }
}

static int64_t ravel(int rank, const int64_t *shape, const int64_t *at)
{
    int64_t i = 0;
    for (int d = 0; d < rank; d++)
        i = i * shape[d] + at[d];
    return i;
}

tl_status tl_k_transpose_ref(int rank, const int64_t *shape, const int *perm, const double *restrict x,
                             double *restrict y)
{
    tl_status st = check_perm("transpose", rank, shape, perm);
    if (st != TL_OK)
        return st;
    int64_t yshape[TL_K_MAX_DIMS], yat[TL_K_MAX_DIMS], xat[TL_K_MAX_DIMS];
    for (int d = 0; d < rank; d++)
        yshape[d] = shape[perm[d]];
    const int64_t n = product(rank, shape);
    for (int64_t i = 0; i < n; i++) {
        unravel(rank, yshape, i, yat);
        for (int d = 0; d < rank; d++)
            xat[perm[d]] = yat[d];
        y[i] = x[ravel(rank, shape, xat)];
    }
    return TL_OK;
}

tl_status tl_k_transpose_grad_ref(int rank, const int64_t *shape, const int *perm, const double *restrict dy,
                                  double *restrict dx)
{
    tl_status st = check_perm("transpose_grad", rank, shape, perm);
    if (st != TL_OK)
        return st;
    /* dx[x index] = dy[y index]: the forward map read the other way. */
    int64_t yshape[TL_K_MAX_DIMS], yat[TL_K_MAX_DIMS], xat[TL_K_MAX_DIMS];
    for (int d = 0; d < rank; d++)
        yshape[d] = shape[perm[d]];
    const int64_t n = product(rank, shape);
    for (int64_t i = 0; i < n; i++) {
        unravel(rank, shape, i, xat);
        for (int d = 0; d < rank; d++)
            yat[d] = xat[perm[d]];
        dx[i] = dy[ravel(rank, yshape, yat)];
    }
    return TL_OK;
}

/* x's linear index of y's element at yat, for a broadcast. */
static int64_t broadcast_source(int rank, const int64_t *xshape, const int64_t *yat)
{
    int64_t i = 0;
    for (int d = 0; d < rank; d++)
        i = i * xshape[d] + (xshape[d] == 1 ? 0 : yat[d]);
    return i;
}

tl_status tl_k_broadcast_ref(int rank, const int64_t *xshape, const int64_t *yshape, const double *restrict x,
                             double *restrict y)
{
    tl_status st = check_broadcast("broadcast", rank, xshape, yshape);
    if (st != TL_OK)
        return st;
    int64_t at[TL_K_MAX_DIMS];
    const int64_t n = product(rank, yshape);
    for (int64_t i = 0; i < n; i++) {
        unravel(rank, yshape, i, at);
        y[i] = x[broadcast_source(rank, xshape, at)];
    }
    return TL_OK;
}

tl_status tl_k_broadcast_grad_ref(int rank, const int64_t *xshape, const int64_t *yshape,
                                  const double *restrict dy, double *restrict dx)
{
    tl_status st = check_broadcast("broadcast_grad", rank, xshape, yshape);
    if (st != TL_OK)
        return st;
    const int64_t nx = product(rank, xshape), n = product(rank, yshape);
    for (int64_t j = 0; j < nx; j++)
        dx[j] = 0.0;
    int64_t at[TL_K_MAX_DIMS];
    for (int64_t i = 0; i < n; i++) {
        unravel(rank, yshape, i, at);
        dx[broadcast_source(rank, xshape, at)] += dy[i];
    }
    return TL_OK;
}

/* x's linear index of y's element at yat, for a tile. */
static int64_t tile_source(int rank, const int64_t *xshape, const int64_t *yat)
{
    int64_t i = 0;
    for (int d = 0; d < rank; d++)
        i = i * xshape[d] + yat[d] % xshape[d];
    return i;
}

tl_status tl_k_tile_ref(int rank, const int64_t *xshape, const int64_t *multiples, const double *restrict x,
                        double *restrict y)
{
    int64_t xv[TL_K_MAX_DIMS], yv[TL_K_MAX_DIMS], yshape[TL_MAX_RANK], at[TL_MAX_RANK];
    tl_status st = tile_view("tile", rank, xshape, multiples, xv, yv);
    if (st != TL_OK)
        return st;
    for (int d = 0; d < rank; d++)
        yshape[d] = xshape[d] * multiples[d];
    const int64_t n = product(rank, yshape);
    for (int64_t i = 0; i < n; i++) {
        unravel(rank, yshape, i, at);
        y[i] = x[tile_source(rank, xshape, at)];
    }
    return TL_OK;
}

tl_status tl_k_tile_grad_ref(int rank, const int64_t *xshape, const int64_t *multiples,
                             const double *restrict dy, double *restrict dx)
{
    int64_t xv[TL_K_MAX_DIMS], yv[TL_K_MAX_DIMS], yshape[TL_MAX_RANK], at[TL_MAX_RANK];
    tl_status st = tile_view("tile_grad", rank, xshape, multiples, xv, yv);
    if (st != TL_OK)
        return st;
    for (int d = 0; d < rank; d++)
        yshape[d] = xshape[d] * multiples[d];
    const int64_t nx = product(rank, xshape), n = product(rank, yshape);
    for (int64_t j = 0; j < nx; j++)
        dx[j] = 0.0;
    for (int64_t i = 0; i < n; i++) {
        unravel(rank, yshape, i, at);
        dx[tile_source(rank, xshape, at)] += dy[i];
    }
    return TL_OK;
}

/* y's linear index of x's element at xat, for a pad. */
static int64_t pad_target(int rank, const int64_t *yshape, const int64_t *pads, const int64_t *xat)
{
    int64_t i = 0;
    for (int d = 0; d < rank; d++)
        i = i * yshape[d] + xat[d] + pads[2 * d];
    return i;
}

tl_status tl_k_pad_ref(int rank, const int64_t *xshape, const int64_t *pads, double value,
                       const double *restrict x, double *restrict y)
{
    int64_t yshape[TL_K_MAX_DIMS], at[TL_K_MAX_DIMS];
    tl_status st = check_pad("pad", rank, xshape, pads, yshape);
    if (st != TL_OK)
        return st;
    const int64_t ny = product(rank, yshape), nx = product(rank, xshape);
    for (int64_t i = 0; i < ny; i++)
        y[i] = value;
    for (int64_t j = 0; j < nx; j++) {
        unravel(rank, xshape, j, at);
        y[pad_target(rank, yshape, pads, at)] = x[j];
    }
    return TL_OK;
}

tl_status tl_k_pad_grad_ref(int rank, const int64_t *xshape, const int64_t *pads, const double *restrict dy,
                            double *restrict dx)
{
    int64_t yshape[TL_K_MAX_DIMS], at[TL_K_MAX_DIMS];
    tl_status st = check_pad("pad_grad", rank, xshape, pads, yshape);
    if (st != TL_OK)
        return st;
    const int64_t nx = product(rank, xshape);
    for (int64_t j = 0; j < nx; j++) {
        unravel(rank, xshape, j, at);
        dx[j] = dy[pad_target(rank, yshape, pads, at)];
    }
    return TL_OK;
}

/* vision_pool.c — max and average pooling on NHWC images and their
 * gradients through oneDNN, and the float64 twins (conv.h). */
#include <string.h>

#include "../base/base_int.h"
#include "conv.h"
#include "vision_dnnl.h"

bool tl_k_pool2d_init(tl_k_pool_geom *pl, const int64_t x[4], const int64_t ksize[2], const int64_t strides[2],
                      bool same)
{
    memset(pl, 0, sizeof *pl);
    pl->n = x[0], pl->h = x[1], pl->w = x[2], pl->c = x[3];
    pl->kh = ksize[0], pl->kw = ksize[1], pl->stride_h = strides[0], pl->stride_w = strides[1];
    return tl_k_window(pl->h, pl->kh, pl->stride_h, 1, same, &pl->oh, &pl->pad_top, &pl->pad_bottom) &&
           tl_k_window(pl->w, pl->kw, pl->stride_w, 1, same, &pl->ow, &pl->pad_left, &pl->pad_right);
}

static void check(const tl_k_pool_geom *pl)
{
    TL_ASSERT(pl->n >= 1 && pl->h >= 1 && pl->w >= 1 && pl->c >= 1 && pl->kh >= 1 && pl->kw >= 1);
    TL_ASSERT(pl->stride_h >= 1 && pl->stride_w >= 1);
    /* Every window holds an element of the image: padding shorter than the window. */
    TL_ASSERT(pl->pad_top >= 0 && pl->pad_top < pl->kh && pl->pad_bottom >= 0 && pl->pad_bottom < pl->kh);
    TL_ASSERT(pl->pad_left >= 0 && pl->pad_left < pl->kw && pl->pad_right >= 0 && pl->pad_right < pl->kw);
    TL_ASSERT(pl->oh == (pl->h + pl->pad_top + pl->pad_bottom - pl->kh) / pl->stride_h + 1);
    TL_ASSERT(pl->ow == (pl->w + pl->pad_left + pl->pad_right - pl->kw) / pl->stride_w + 1);
}

/* ---- oneDNN --------------------------------------------------------------------- */

typedef enum { MAX_FWD = 0, MAX_BWD, AVG_FWD, AVG_BWD } pool_kind;

static const char *const kind_name[4] = {"max_pool2d", "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad"};

typedef struct pool_ctx {
    const tl_k_pool_geom *pl;
    pool_kind kind;
} pool_ctx;

static dnnl_status_t pool_pd(const tl_vd_plan *p, const tl_k_pool_geom *pl, bool max, dnnl_prop_kind_t prop,
                             dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *out)
{
    dnnl_memory_desc_t x = tl_vd_nhwc(pl->n, pl->c, pl->h, pl->w), y = tl_vd_nhwc(pl->n, pl->c, pl->oh, pl->ow);
    dnnl_dims_t strides = {pl->stride_h, pl->stride_w}, kernel = {pl->kh, pl->kw}, dil = {0, 0};
    dnnl_dims_t padl = {pl->pad_top, pl->pad_left}, padr = {pl->pad_bottom, pl->pad_right};
    dnnl_alg_kind_t alg = max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t d;
    dnnl_status_t s = hint == NULL
                          ? dnnl_pooling_v2_forward_desc_init(&d, prop, alg, &x, &y, strides, kernel, dil, padl, padr)
                          : dnnl_pooling_v2_backward_desc_init(&d, alg, &x, &y, strides, kernel, dil, padl, padr);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(out, &d, attr, p->engine, hint);
    return s;
}

/* Slots: forward (x, y); max backward (x, dy, dx); avg backward (dy, dx). The
 * max backward runs the forward again for its workspace (the argmax), which
 * lives in scratch: nothing is kept between the passes. */
static tl_status pool_build(tl_vd_plan *p, const void *arg)
{
    const pool_ctx *ctx = arg;
    const tl_k_pool_geom *pl = ctx->pl;
    bool max = ctx->kind == MAX_FWD || ctx->kind == MAX_BWD, bwd = ctx->kind == MAX_BWD || ctx->kind == AVG_BWD;
    dnnl_primitive_attr_t attr = tl_vd_attr(p);
    if (attr == NULL)
        return tl_last_status();
    dnnl_primitive_desc_t fwd = NULL, back = NULL;
    dnnl_status_t s = pool_pd(p, pl, max, bwd ? dnnl_forward_training : dnnl_forward_inference, attr, NULL, &fwd);
    if (s == dnnl_success && bwd)
        s = pool_pd(p, pl, max, dnnl_forward_training, attr, fwd, &back);
    dnnl_primitive_attr_destroy(attr);
    tl_status st = s == dnnl_success ? TL_OK : tl_vd_fail(p, s, "pooling primitive descriptor");
    dnnl_memory_desc_t x = tl_vd_nhwc(pl->n, pl->c, pl->h, pl->w), y = tl_vd_nhwc(pl->n, pl->c, pl->oh, pl->ow);
    int m[5];
    if (st == TL_OK && !bwd) {
        if ((m[0] = tl_vd_mem(p, &x, 0)) < 0 || (m[1] = tl_vd_mem(p, &y, 1)) < 0)
            st = tl_last_status();
        else
            st = tl_vd_step_add(p, fwd, 2, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, m);
    } else if (st == TL_OK && max) {
        const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(fwd, dnnl_query_workspace_md, 0);
        if ((m[0] = tl_vd_mem(p, &x, 0)) < 0 || (m[1] = tl_vd_mem(p, &y, TL_VD_SCRATCH)) < 0 ||
            (m[2] = tl_vd_mem(p, ws, TL_VD_SCRATCH)) < 0 || (m[3] = tl_vd_mem(p, &y, 1)) < 0 ||
            (m[4] = tl_vd_mem(p, &x, 2)) < 0)
            st = tl_last_status();
        if (st == TL_OK)
            st = tl_vd_step_add(p, fwd, 3, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_WORKSPACE}, m);
        if (st == TL_OK)
            st = tl_vd_step_add(p, back, 3, (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WORKSPACE, DNNL_ARG_DIFF_SRC},
                                (const int[]){m[3], m[2], m[4]});
    } else if (st == TL_OK) {
        if ((m[0] = tl_vd_mem(p, &y, 0)) < 0 || (m[1] = tl_vd_mem(p, &x, 1)) < 0)
            st = tl_last_status();
        else
            st = tl_vd_step_add(p, back, 2, (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC}, m);
    }
    dnnl_primitive_desc_destroy(fwd);
    dnnl_primitive_desc_destroy(back);
    return st;
}

static tl_status pool_plan(const tl_k_pool_geom *pl, pool_kind kind, tl_vd_plan **out)
{
    check(pl);
    int64_t key[15] = {
        (int64_t)kind, pl->n,       pl->h,        pl->w,          pl->c,         pl->kh, pl->kw, pl->stride_h,
        pl->stride_w,  pl->pad_top, pl->pad_left, pl->pad_bottom, pl->pad_right, pl->oh, pl->ow,
    };
    pool_ctx ctx = {pl, kind};
    return tl_vd_get(key, sizeof key, kind_name[kind], pool_build, &ctx, out);
}

static tl_status pool_run(const tl_k_pool_geom *pl, pool_kind kind, void *a, void *b, void *c, float *scratch,
                          int64_t scratch_floats)
{
    tl_vd_plan *p;
    tl_status st = pool_plan(pl, kind, &p);
    if (st != TL_OK)
        return st;
    void *slots[3] = {a, b, c};
    return tl_vd_run(p, slots, scratch, scratch_floats * (int64_t)sizeof(float));
}

tl_status tl_k_pool2d_scratch(const tl_k_pool_geom *pl, bool max, bool backward, int64_t *floats)
{
    *floats = 0;
    tl_vd_plan *p;
    tl_status st = pool_plan(pl, (pool_kind)((max ? 0 : 2) + (backward ? 1 : 0)), &p);
    if (st == TL_OK)
        *floats = (p->scratch_bytes + (int64_t)sizeof(float) - 1) / (int64_t)sizeof(float);
    return st;
}

tl_status tl_k_max_pool2d(const tl_k_pool_geom *pl, const float *restrict x, float *restrict y, float *restrict scratch,
                          int64_t scratch_floats)
{
    return pool_run(pl, MAX_FWD, (void *)x, y, NULL, scratch, scratch_floats);
}

tl_status tl_k_max_pool2d_grad(const tl_k_pool_geom *pl, const float *restrict x, const float *restrict dy,
                               float *restrict dx, float *restrict scratch, int64_t scratch_floats)
{
    return pool_run(pl, MAX_BWD, (void *)x, (void *)dy, dx, scratch, scratch_floats);
}

tl_status tl_k_avg_pool2d(const tl_k_pool_geom *pl, const float *restrict x, float *restrict y, float *restrict scratch,
                          int64_t scratch_floats)
{
    return pool_run(pl, AVG_FWD, (void *)x, y, NULL, scratch, scratch_floats);
}

tl_status tl_k_avg_pool2d_grad(const tl_k_pool_geom *pl, const float *restrict dy, float *restrict dx,
                               float *restrict scratch, int64_t scratch_floats)
{
    return pool_run(pl, AVG_BWD, (void *)dy, dx, NULL, scratch, scratch_floats);
}

/* ---- float64 twins ------------------------------------------------------------------ */

/* The window of output (i, j) clipped to the image: rows [*r0, *r1), columns [*c0, *c1). */
static void window(const tl_k_pool_geom *pl, int64_t i, int64_t j, int64_t *r0, int64_t *r1, int64_t *c0, int64_t *c1)
{
    int64_t top = i * pl->stride_h - pl->pad_top, left = j * pl->stride_w - pl->pad_left;
    *r0 = top > 0 ? top : 0;
    *r1 = top + pl->kh < pl->h ? top + pl->kh : pl->h;
    *c0 = left > 0 ? left : 0;
    *c1 = left + pl->kw < pl->w ? left + pl->kw : pl->w;
}

/* The index in x of the first maximum of output (b, i, j, ch)'s window. */
static int64_t argmax(const tl_k_pool_geom *pl, const double *x, int64_t b, int64_t i, int64_t j, int64_t ch)
{
    int64_t r0, r1, c0, c1, best = -1;
    window(pl, i, j, &r0, &r1, &c0, &c1);
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) {
            int64_t at = ((b * pl->h + r) * pl->w + c) * pl->c + ch;
            if (best < 0 || x[at] > x[best])
                best = at;
        }
    return best;
}

void tl_k_max_pool2d_ref(const tl_k_pool_geom *pl, const double *restrict x, double *restrict y)
{
    check(pl);
    for (int64_t b = 0; b < pl->n; b++)
        for (int64_t i = 0; i < pl->oh; i++)
            for (int64_t j = 0; j < pl->ow; j++)
                for (int64_t ch = 0; ch < pl->c; ch++)
                    y[((b * pl->oh + i) * pl->ow + j) * pl->c + ch] = x[argmax(pl, x, b, i, j, ch)];
}

void tl_k_max_pool2d_grad_ref(const tl_k_pool_geom *pl, const double *restrict x, const double *restrict dy,
                              double *restrict dx)
{
    check(pl);
    memset(dx, 0, (size_t)(pl->n * pl->h * pl->w * pl->c) * sizeof *dx);
    for (int64_t b = 0; b < pl->n; b++)
        for (int64_t i = 0; i < pl->oh; i++)
            for (int64_t j = 0; j < pl->ow; j++)
                for (int64_t ch = 0; ch < pl->c; ch++)
                    dx[argmax(pl, x, b, i, j, ch)] += dy[((b * pl->oh + i) * pl->ow + j) * pl->c + ch];
}

void tl_k_avg_pool2d_ref(const tl_k_pool_geom *pl, const double *restrict x, double *restrict y)
{
    check(pl);
    for (int64_t b = 0; b < pl->n; b++)
        for (int64_t i = 0; i < pl->oh; i++)
            for (int64_t j = 0; j < pl->ow; j++) {
                int64_t r0, r1, c0, c1;
                window(pl, i, j, &r0, &r1, &c0, &c1);
                for (int64_t ch = 0; ch < pl->c; ch++) {
                    double s = 0.0;
                    for (int64_t r = r0; r < r1; r++)
                        for (int64_t c = c0; c < c1; c++)
                            s += x[((b * pl->h + r) * pl->w + c) * pl->c + ch];
                    y[((b * pl->oh + i) * pl->ow + j) * pl->c + ch] = s / (double)((r1 - r0) * (c1 - c0));
                }
            }
}

void tl_k_avg_pool2d_grad_ref(const tl_k_pool_geom *pl, const double *restrict dy, double *restrict dx)
{
    check(pl);
    memset(dx, 0, (size_t)(pl->n * pl->h * pl->w * pl->c) * sizeof *dx);
    for (int64_t b = 0; b < pl->n; b++)
        for (int64_t i = 0; i < pl->oh; i++)
            for (int64_t j = 0; j < pl->ow; j++) {
                int64_t r0, r1, c0, c1;
                window(pl, i, j, &r0, &r1, &c0, &c1);
                double count = (double)((r1 - r0) * (c1 - c0));
                for (int64_t ch = 0; ch < pl->c; ch++) {
                    double g = dy[((b * pl->oh + i) * pl->ow + j) * pl->c + ch] / count;
                    for (int64_t r = r0; r < r1; r++)
                        for (int64_t c = c0; c < c1; c++)
                            dx[((b * pl->h + r) * pl->w + c) * pl->c + ch] += g;
                }
            }
}

/* conv.c — 2-D convolution on NHWC images and its gradients: oneDNN plans,
 * the im2col + GEMM path, and the float64 twins (conv.h). */
#include <string.h>

#include "../base/base_int.h"
#include "conv.h"
#include "kernels.h"
#include "vision_dnnl.h"

/* im2col columns per chunk of images, at most (unless one image needs more):
 * 4 MiB, which keeps a chunk's columns in L2/L3 while GEMM reads them. */
#define GEMM_CHUNK_FLOATS ((int64_t)1 << 20)

bool tl_k_window(int64_t in, int64_t k, int64_t stride, int64_t dilation, bool same, int64_t *out,
                 int64_t *pad_before, int64_t *pad_after)
{
    int64_t keff = (k - 1) * dilation + 1;
    if (same) {
        *out = (in + stride - 1) / stride;
        int64_t total = (*out - 1) * stride + keff - in;
        total = total > 0 ? total : 0;
        *pad_before = total / 2;
        *pad_after = total - total / 2;
        return true;
    }
    if (keff > in)
        return false;
    *out = (in - keff) / stride + 1;
    *pad_before = *pad_after = 0;
    return true;
}

bool tl_k_conv2d_init(tl_k_conv_geom *cv, const int64_t x[4], const int64_t f[4], int64_t groups,
                      const int64_t strides[2], const int64_t dilations[2], bool same)
{
    memset(cv, 0, sizeof *cv);
    cv->n = x[0], cv->h = x[1], cv->w = x[2], cv->c = x[3];
    cv->kh = f[0], cv->kw = f[1], cv->o = f[3], cv->groups = groups;
    cv->stride_h = strides[0], cv->stride_w = strides[1];
    cv->dilation_h = dilations[0], cv->dilation_w = dilations[1];
    return tl_k_window(cv->h, cv->kh, cv->stride_h, cv->dilation_h, same, &cv->oh, &cv->pad_top, &cv->pad_bottom) &&
           tl_k_window(cv->w, cv->kw, cv->stride_w, cv->dilation_w, same, &cv->ow, &cv->pad_left, &cv->pad_right);
}

static void check(const tl_k_conv_geom *cv)
{
    TL_ASSERT(cv->n >= 1 && cv->h >= 1 && cv->w >= 1 && cv->c >= 1 && cv->kh >= 1 && cv->kw >= 1 && cv->o >= 1);
    TL_ASSERT(cv->groups >= 1 && cv->c % cv->groups == 0 && cv->o % cv->groups == 0);
    TL_ASSERT(cv->stride_h >= 1 && cv->stride_w >= 1 && cv->dilation_h >= 1 && cv->dilation_w >= 1);
    TL_ASSERT(cv->pad_top >= 0 && cv->pad_left >= 0 && cv->pad_bottom >= 0 && cv->pad_right >= 0);
    TL_ASSERT(cv->oh == (cv->h + cv->pad_top + cv->pad_bottom - (cv->kh - 1) * cv->dilation_h - 1) / cv->stride_h + 1);
    TL_ASSERT(cv->ow == (cv->w + cv->pad_left + cv->pad_right - (cv->kw - 1) * cv->dilation_w - 1) / cv->stride_w + 1);
}

/* ---- which engine --------------------------------------------------------------- */

/* 1x1, stride 1, no padding: x itself is the im2col matrix. */
static bool pointwise(const tl_k_conv_geom *cv)
{
    return cv->kh == 1 && cv->kw == 1 && cv->stride_h == 1 && cv->stride_w == 1 && cv->pad_top == 0 &&
           cv->pad_left == 0 && cv->pad_bottom == 0 && cv->pad_right == 0;
}

tl_k_conv_impl tl_k_conv2d_engine(const tl_k_conv_geom *cv, tl_k_conv_pass pass)
{
    (void)pass; /* the measured rule (conv.h's table) sends every pass to oneDNN */
    return cv->impl != TL_K_CONV_AUTO ? cv->impl : TL_K_CONV_DNNL;
}

static bool on_dnnl(tl_k_conv_impl impl)
{
    return impl == TL_K_CONV_DNNL || impl == TL_K_CONV_DNNL_BLOCKED;
}

/* ---- oneDNN --------------------------------------------------------------------- */

typedef struct conv_plan_ctx {
    const tl_k_conv_geom *cv;
    tl_k_conv_pass pass;
} conv_plan_ctx;

/* The layouts a plan asks oneDNN for: the user's NHWC and HWIO (plain),
 * NHWC images with the filter in oneDNN's choice (nhwc), or its choice for
 * all three (blocked: x and y reordered in and out). */
typedef enum { LAYOUT_PLAIN, LAYOUT_NHWC, LAYOUT_BLOCKED } conv_layout;

static void conv_mds(const tl_k_conv_geom *cv, conv_layout layout, dnnl_memory_desc_t *x, dnnl_memory_desc_t *f,
                     dnnl_memory_desc_t *y)
{
    dnnl_dims_t xd = {cv->n, cv->c, cv->h, cv->w}, yd = {cv->n, cv->o, cv->oh, cv->ow};
    dnnl_format_tag_t images = layout == LAYOUT_BLOCKED ? dnnl_format_tag_any : dnnl_nhwc;
    bool any = layout != LAYOUT_PLAIN; /* the filter's */
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(x, 4, xd, dnnl_f32, images);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_tag(y, 4, yd, dnnl_f32, images);
    if (s == dnnl_success && cv->groups == 1) {
        dnnl_dims_t fd = {cv->o, cv->c, cv->kh, cv->kw};
        s = dnnl_memory_desc_init_by_tag(f, 4, fd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_hwio);
    } else if (s == dnnl_success) {
        /* TF's (kh, kw, c/g, o) with o = g·(o/g): oneDNN's (g, o/g, c/g, kh, kw) laid out h, w, i, g, o. */
        int64_t g = cv->groups;
        dnnl_dims_t fd = {g, cv->o / g, cv->c / g, cv->kh, cv->kw};
        s = dnnl_memory_desc_init_by_tag(f, 5, fd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_hwigo);
    }
    TL_ASSERT(s == dnnl_success); /* positive dims, known layouts */
}

/* The pass's primitive descriptor, with the forward one as its hint. */
static dnnl_status_t conv_pd(const tl_vd_plan *p, const tl_k_conv_geom *cv, tl_k_conv_pass pass,
                             conv_layout layout, dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *out)
{
    dnnl_memory_desc_t x, f, y;
    conv_mds(cv, layout, &x, &f, &y);
    dnnl_dims_t strides = {cv->stride_h, cv->stride_w};
    dnnl_dims_t dil = {cv->dilation_h - 1, cv->dilation_w - 1}; /* oneDNN counts the gaps */
    dnnl_dims_t pl = {cv->pad_top, cv->pad_left}, pr = {cv->pad_bottom, cv->pad_right};
    dnnl_convolution_desc_t fd, bd;
    dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
                                                                 &x, &f, NULL, &y, strides, dil, pl, pr);
    if (s != dnnl_success)
        return s;
    dnnl_primitive_desc_t fwd;
    s = dnnl_primitive_desc_create(&fwd, &fd, attr, p->engine, NULL);
    if (s != dnnl_success || pass == TL_K_CONV_FORWARD) {
        *out = s == dnnl_success ? fwd : NULL;
        return s;
    }
    if (pass == TL_K_CONV_GRAD_INPUT)
        s = dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &x, &f, &y, strides, dil,
                                                             pl, pr);
    else
        s = dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &x, &f, NULL, &y,
                                                                strides, dil, pl, pr);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(out, &bd, attr, p->engine, fwd);
    dnnl_primitive_desc_destroy(fwd);
    return s;
}

/* Plans beyond the three passes: the forward that leaves its blocked x in
 * a caller's buffer (slots x, f, y, kept), and both gradients at once
 * (slots x, f, dy, dx, df, kept), reading x from kept or not. */
enum { PLAN_FORWARD_KEEP = 3, PLAN_BACKWARD, PLAN_BACKWARD_KEPT };

/* Whether pd runs oneDNN's reference loops (its "ref:" kernels), which it
 * falls back to where it has no JIT kernel for the layouts asked. */
static bool reference_kernel(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl != NULL &&
           strncmp(impl, "ref", 3) == 0;
}

/* A pass's primitive descriptor into *pd. TL_K_CONV_DNNL: NHWC images read
 * and written in place, where oneDNN has a JIT kernel for them (conv.h's
 * "Layouts"); else, and for TL_K_CONV_DNNL_BLOCKED, the blocked layouts of
 * its choice; the plain ones if it has none for this geometry. */
static tl_status pass_pd(const tl_vd_plan *p, const tl_k_conv_geom *cv, tl_k_conv_pass pass,
                         dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd)
{
    dnnl_status_t s = dnnl_unimplemented;
    if (tl_k_conv2d_engine(cv, pass) == TL_K_CONV_DNNL) {
        s = conv_pd(p, cv, pass, LAYOUT_NHWC, attr, pd);
        if (s == dnnl_success && reference_kernel(*pd)) {
            dnnl_primitive_desc_destroy(*pd);
            s = dnnl_unimplemented;
        }
    }
    if (s == dnnl_unimplemented)
        s = conv_pd(p, cv, pass, LAYOUT_BLOCKED, attr, pd);
    if (s == dnnl_unimplemented)
        s = conv_pd(p, cv, pass, LAYOUT_PLAIN, attr, pd);
    return s == dnnl_success ? TL_OK : tl_vd_fail(p, s, "convolution primitive descriptor");
}

/* Whether the forward's reordered x (fwd_src) is the one the filter
 * gradient wants: then the forward can leave it (PLAN_FORWARD_KEEP) for
 * PLAN_BACKWARD_KEPT. */
static bool keepable(const tl_vd_plan *p, const tl_k_conv_geom *cv, dnnl_primitive_attr_t attr,
                     const dnnl_memory_desc_t *fwd_src)
{
    dnnl_memory_desc_t ux, uf, uy;
    conv_mds(cv, LAYOUT_PLAIN, &ux, &uf, &uy);
    if (dnnl_memory_desc_equal(fwd_src, &ux))
        return false; /* no reorder: nothing to keep */
    dnnl_primitive_desc_t pd;
    if (pass_pd(p, cv, TL_K_CONV_GRAD_FILTER, attr, &pd) != TL_OK) {
        tl_clear_error(); /* the filter gradient's own plan reports it */
        return false;
    }
    bool same = dnnl_memory_desc_equal(fwd_src, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0));
    dnnl_primitive_desc_destroy(pd);
    return same;
}

/* PLAN_BACKWARD(_KEPT): the input gradient, then the filter gradient on the
 * same reordered dy (when both kernels want one layout) and on x from slot
 * 5 (kept) or reordered from slot 0. */
static tl_status build_backward(tl_vd_plan *p, const tl_k_conv_geom *cv, bool kept, dnnl_primitive_attr_t attr)
{
    dnnl_primitive_desc_t pd_d = NULL, pd_w = NULL;
    tl_status st = pass_pd(p, cv, TL_K_CONV_GRAD_INPUT, attr, &pd_d);
    if (st == TL_OK)
        st = pass_pd(p, cv, TL_K_CONV_GRAD_FILTER, attr, &pd_w);
    dnnl_memory_desc_t ux, uf, uy;
    conv_mds(cv, LAYOUT_PLAIN, &ux, &uf, &uy);
    int d[3] = {0, 0, 0}, w[3] = {0, 0, 0};
    if (st == TL_OK) {
        d[0] = tl_vd_input(p, dnnl_primitive_desc_query_md(pd_d, dnnl_query_diff_dst_md, 0), &uy, 2);
        d[1] = d[0] < 0 ? d[0] : tl_vd_input(p, dnnl_primitive_desc_query_md(pd_d, dnnl_query_weights_md, 0), &uf, 1);
        d[2] = d[1] < 0 ? d[1]
                        : tl_vd_output(p, dnnl_primitive_desc_query_md(pd_d, dnnl_query_diff_src_md, 0), &ux, 3);
        st = d[2] < 0 ? (tl_status)d[2] : TL_OK;
    }
    if (st == TL_OK)
        st = tl_vd_step_add(p, pd_d, 3, (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC}, d);
    if (st == TL_OK)
        st = tl_vd_output_done(p, d[2], &ux, 3);
    if (st == TL_OK) {
        const dnnl_memory_desc_t *src = dnnl_primitive_desc_query_md(pd_w, dnnl_query_src_md, 0);
        const dnnl_memory_desc_t *ddst = dnnl_primitive_desc_query_md(pd_w, dnnl_query_diff_dst_md, 0), *have;
        w[0] = kept ? tl_vd_mem(p, src, 5) : tl_vd_input(p, src, &ux, 0);
        dnnl_memory_get_memory_desc(p->mem[d[0]], &have);
        w[1] = w[0] < 0 ? w[0] : dnnl_memory_desc_equal(ddst, have) ? d[0] : tl_vd_input(p, ddst, &uy, 2);
        w[2] = w[1] < 0 ? w[1]
                        : tl_vd_output(p, dnnl_primitive_desc_query_md(pd_w, dnnl_query_diff_weights_md, 0), &uf, 4);
        st = w[2] < 0 ? (tl_status)w[2] : TL_OK;
    }
    if (st == TL_OK)
        st = tl_vd_step_add(p, pd_w, 3, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}, w);
    if (st == TL_OK)
        st = tl_vd_output_done(p, w[2], &uf, 4);
    if (pd_d != NULL)
        dnnl_primitive_desc_destroy(pd_d);
    if (pd_w != NULL)
        dnnl_primitive_desc_destroy(pd_w);
    return st;
}

/* Slots: forward (x, f, y; PLAN_FORWARD_KEEP adds kept); grad_input (dy,
 * f, dx); grad_filter (x, dy, df). */
static tl_status conv_build(tl_vd_plan *p, const void *arg)
{
    const conv_plan_ctx *ctx = arg;
    const tl_k_conv_geom *cv = ctx->cv;
    dnnl_primitive_attr_t attr = tl_vd_attr(p);
    if (attr == NULL)
        return tl_last_status();
    if ((int)ctx->pass >= PLAN_BACKWARD) {
        tl_status st = build_backward(p, cv, (int)ctx->pass == PLAN_BACKWARD_KEPT, attr);
        dnnl_primitive_attr_destroy(attr);
        return st;
    }
    bool keep = (int)ctx->pass == PLAN_FORWARD_KEEP;
    tl_k_conv_pass pass = keep ? TL_K_CONV_FORWARD : ctx->pass;
    dnnl_primitive_desc_t pd;
    tl_status pst = pass_pd(p, cv, pass, attr, &pd);
    if (pst == TL_OK && keep)
        keep = keepable(p, cv, attr, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0));
    dnnl_primitive_attr_destroy(attr);
    if (pst != TL_OK)
        return pst;
    dnnl_memory_desc_t ux, uf, uy;
    conv_mds(cv, LAYOUT_PLAIN, &ux, &uf, &uy);
    static const dnnl_query_t q[3][3] = {
        {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
        {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md},
        {dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md},
    };
    static const int args[3][3] = {
        {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
        {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
        {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS},
    };
    const dnnl_memory_desc_t *user[3][3] = {{&ux, &uf, &uy}, {&uy, &uf, &ux}, {&ux, &uy, &uf}};
    int k = (int)pass, mem[3];
    tl_status st = TL_OK;
    for (int a = 0; a < 2 && st == TL_OK; a++) {
        const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, q[k][a], 0);
        mem[a] = keep && a == 0 ? tl_vd_input_into(p, want, user[k][a], a, 3) : tl_vd_input(p, want, user[k][a], a);
        st = mem[a] < 0 ? (tl_status)mem[a] : TL_OK;
    }
    if (st == TL_OK) {
        mem[2] = tl_vd_output(p, dnnl_primitive_desc_query_md(pd, q[k][2], 0), user[k][2], 2);
        st = mem[2] < 0 ? (tl_status)mem[2] : TL_OK;
    }
    if (st == TL_OK)
        st = tl_vd_step_add(p, pd, 3, args[k], mem);
    if (st == TL_OK)
        st = tl_vd_output_done(p, mem[2], user[k][2], 2);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

static const char *const pass_name[6] = {"conv2d", "conv2d_grad_input", "conv2d_grad_filter",
                                         "conv2d",  "conv2d_backward",   "conv2d_backward"};

/* pass: a tl_k_conv_pass or a PLAN_* kind. */
static tl_status conv_plan(const tl_k_conv_geom *cv, int pass, tl_vd_plan **out)
{
    int64_t key[20] = {
        (int64_t)pass, (int64_t)tl_k_conv2d_engine(cv, TL_K_CONV_FORWARD), cv->n, cv->h, cv->w, cv->c, cv->kh, cv->kw, cv->o, cv->groups, cv->stride_h, cv->stride_w,
        cv->dilation_h, cv->dilation_w, cv->pad_top, cv->pad_left, cv->pad_bottom, cv->pad_right, cv->oh, cv->ow,
    };
    conv_plan_ctx ctx = {cv, (tl_k_conv_pass)pass};
    return tl_vd_get(key, sizeof key, pass_name[pass], conv_build, &ctx, out);
}

static tl_status dnnl_run(const tl_k_conv_geom *cv, tl_k_conv_pass pass, const float *a, const float *b, float *out,
                          float *scratch, int64_t scratch_floats)
{
    tl_vd_plan *p;
    tl_status st = conv_plan(cv, pass, &p);
    if (st != TL_OK)
        return st;
    void *slots[3] = {(void *)a, (void *)b, out};
    return tl_vd_run(p, slots, scratch, scratch_floats * (int64_t)sizeof(float));
}

/* ---- im2col + GEMM ---------------------------------------------------------------- */

static int64_t gemm_k(const tl_k_conv_geom *cv)
{
    return cv->kh * cv->kw * cv->c;
}

/* Images per chunk: the columns of at most GEMM_CHUNK_FLOATS, one image at least. */
static int64_t gemm_chunk(const tl_k_conv_geom *cv)
{
    int64_t per = cv->oh * cv->ow * gemm_k(cv);
    int64_t nb = GEMM_CHUNK_FLOATS / per;
    return nb < 1 ? 1 : nb > cv->n ? cv->n : nb;
}

static int64_t gemm_scratch(const tl_k_conv_geom *cv)
{
    return pointwise(cv) ? 0 : gemm_chunk(cv) * cv->oh * cv->ow * gemm_k(cv);
}

/* cols (nb·oh·ow, kh·kw·c) of images b0 .. b0+nb-1: row (b, i, j) holds the
 * window at output (i, j), taps in (u, v, channel) order, zero in the padding. */
static void im2col(const tl_k_conv_geom *cv, int64_t b0, int64_t nb, const float *restrict x, float *restrict cols)
{
    int64_t c = cv->c, k = gemm_k(cv);
    size_t bytes = (size_t)c * sizeof(float);
    for (int64_t b = b0; b < b0 + nb; b++)
        for (int64_t i = 0; i < cv->oh; i++)
            for (int64_t j = 0; j < cv->ow; j++) {
                float *row = cols + (((b - b0) * cv->oh + i) * cv->ow + j) * k;
                for (int64_t u = 0; u < cv->kh; u++) {
                    int64_t yi = i * cv->stride_h - cv->pad_top + u * cv->dilation_h;
                    for (int64_t v = 0; v < cv->kw; v++) {
                        int64_t xj = j * cv->stride_w - cv->pad_left + v * cv->dilation_w;
                        float *dst = row + (u * cv->kw + v) * c;
                        if (yi < 0 || yi >= cv->h || xj < 0 || xj >= cv->w)
                            memset(dst, 0, bytes);
                        else
                            memcpy(dst, x + ((b * cv->h + yi) * cv->w + xj) * c, bytes);
                    }
                }
            }
}

/* dx of images b0 .. b0+nb-1 = the columns' gradient scattered back, added
 * in row order, then (u, v) order: dx is zeroed first. */
static void col2im(const tl_k_conv_geom *cv, int64_t b0, int64_t nb, const float *restrict dcols, float *restrict dx)
{
    int64_t c = cv->c, k = gemm_k(cv);
    memset(dx + b0 * cv->h * cv->w * c, 0, (size_t)(nb * cv->h * cv->w * c) * sizeof(float));
    for (int64_t b = b0; b < b0 + nb; b++)
        for (int64_t i = 0; i < cv->oh; i++)
            for (int64_t j = 0; j < cv->ow; j++) {
                const float *row = dcols + (((b - b0) * cv->oh + i) * cv->ow + j) * k;
                for (int64_t u = 0; u < cv->kh; u++) {
                    int64_t yi = i * cv->stride_h - cv->pad_top + u * cv->dilation_h;
                    if (yi < 0 || yi >= cv->h)
                        continue;
                    for (int64_t v = 0; v < cv->kw; v++) {
                        int64_t xj = j * cv->stride_w - cv->pad_left + v * cv->dilation_w;
                        if (xj < 0 || xj >= cv->w)
                            continue;
                        const float *src = row + (u * cv->kw + v) * c;
                        float *dst = dx + ((b * cv->h + yi) * cv->w + xj) * c;
                        for (int64_t ch = 0; ch < c; ch++)
                            dst[ch] += src[ch];
                    }
                }
            }
}

static tl_status gemm_run(const tl_k_conv_geom *cv, tl_k_conv_pass pass, const float *a, const float *b, float *out,
                          float *scratch, int64_t scratch_floats)
{
    if (cv->groups != 1)
        return tl_error(TL_EINVAL, "%s: the im2col + GEMM engine takes groups 1 only (got %lld)", pass_name[pass],
                        (long long)cv->groups);
    int64_t need = gemm_scratch(cv);
    if (scratch_floats < need)
        return tl_error(TL_EINVAL, "%s: %lld floats of scratch given, im2col needs %lld", pass_name[pass],
                        (long long)scratch_floats, (long long)need);
    int64_t k = gemm_k(cv), o = cv->o, rows_per_image = cv->oh * cv->ow;
    if (pointwise(cv)) {
        int64_t m = cv->n * rows_per_image;
        switch (pass) { /* y = x·f, dx = dy·fᵀ, df = xᵀ·dy */
        case TL_K_CONV_FORWARD: return tl_k_matmul(false, false, m, o, k, 1.0f, a, b, 0.0f, out);
        case TL_K_CONV_GRAD_INPUT: return tl_k_matmul(false, true, m, k, o, 1.0f, a, b, 0.0f, out);
        case TL_K_CONV_GRAD_FILTER: return tl_k_matmul(true, false, k, o, m, 1.0f, a, b, 0.0f, out);
        }
    }
    int64_t chunk = gemm_chunk(cv);
    tl_status st = TL_OK;
    for (int64_t b0 = 0; b0 < cv->n && st == TL_OK; b0 += chunk) {
        int64_t nb = cv->n - b0 < chunk ? cv->n - b0 : chunk, m = nb * rows_per_image;
        switch (pass) {
        case TL_K_CONV_FORWARD: /* a = x, b = f, out = y */
            im2col(cv, b0, nb, a, scratch);
            st = tl_k_matmul(false, false, m, o, k, 1.0f, scratch, b, 0.0f, out + b0 * rows_per_image * o);
            break;
        case TL_K_CONV_GRAD_INPUT: /* a = dy, b = f, out = dx */
            st = tl_k_matmul(false, true, m, k, o, 1.0f, a + b0 * rows_per_image * o, b, 0.0f, scratch);
            col2im(cv, b0, nb, scratch, out);
            break;
        case TL_K_CONV_GRAD_FILTER: /* a = x, b = dy, out = df, summed over the chunks in order */
            im2col(cv, b0, nb, a, scratch);
            st = tl_k_matmul(true, false, k, o, m, 1.0f, scratch, b + b0 * rows_per_image * o, b0 == 0 ? 0.0f : 1.0f,
                             out);
            break;
        }
    }
    return st;
}

/* ---- the kernels ------------------------------------------------------------------ */

tl_status tl_k_conv2d_scratch(const tl_k_conv_geom *cv, tl_k_conv_pass pass, int64_t *floats)
{
    check(cv);
    *floats = 0;
    if (tl_k_conv2d_engine(cv, pass) == TL_K_CONV_GEMM) {
        if (cv->groups != 1)
            return tl_error(TL_EINVAL, "%s: the im2col + GEMM engine takes groups 1 only (got %lld)",
                            pass_name[pass], (long long)cv->groups);
        *floats = gemm_scratch(cv);
        return TL_OK;
    }
    tl_vd_plan *p;
    tl_status st = conv_plan(cv, pass, &p);
    if (st == TL_OK)
        *floats = (p->scratch_bytes + (int64_t)sizeof(float) - 1) / (int64_t)sizeof(float);
    return st;
}

static tl_status run(const tl_k_conv_geom *cv, tl_k_conv_pass pass, const float *a, const float *b, float *out,
                     float *scratch, int64_t scratch_floats)
{
    check(cv);
    if (tl_k_conv2d_engine(cv, pass) == TL_K_CONV_GEMM)
        return gemm_run(cv, pass, a, b, out, scratch, scratch_floats);
    return dnnl_run(cv, pass, a, b, out, scratch, scratch_floats);
}

tl_status tl_k_conv2d(const tl_k_conv_geom *cv, const float *restrict x, const float *restrict f, float *restrict y,
                      float *restrict scratch, int64_t scratch_floats)
{
    return run(cv, TL_K_CONV_FORWARD, x, f, y, scratch, scratch_floats);
}

tl_status tl_k_conv2d_grad_input(const tl_k_conv_geom *cv, const float *restrict dy, const float *restrict f,
                                 float *restrict dx, float *restrict scratch, int64_t scratch_floats)
{
    return run(cv, TL_K_CONV_GRAD_INPUT, dy, f, dx, scratch, scratch_floats);
}

tl_status tl_k_conv2d_grad_filter(const tl_k_conv_geom *cv, const float *restrict x, const float *restrict dy,
                                  float *restrict df, float *restrict scratch, int64_t scratch_floats)
{
    return run(cv, TL_K_CONV_GRAD_FILTER, x, dy, df, scratch, scratch_floats);
}

/* ---- the forward that keeps x, both gradients at once ------------------------------ */

bool tl_k_conv2d_all_dnnl(const tl_k_conv_geom *cv)
{
    return on_dnnl(tl_k_conv2d_engine(cv, TL_K_CONV_FORWARD)) && on_dnnl(tl_k_conv2d_engine(cv, TL_K_CONV_GRAD_INPUT)) &&
           on_dnnl(tl_k_conv2d_engine(cv, TL_K_CONV_GRAD_FILTER));
}

tl_status tl_k_conv2d_kept(const tl_k_conv_geom *cv, int64_t *floats)
{
    check(cv);
    *floats = 0;
    if (!tl_k_conv2d_all_dnnl(cv))
        return TL_OK;
    tl_vd_plan *p;
    tl_status st = conv_plan(cv, PLAN_FORWARD_KEEP, &p);
    if (st == TL_OK)
        *floats = (p->kept_bytes + (int64_t)sizeof(float) - 1) / (int64_t)sizeof(float);
    return st;
}

tl_status tl_k_conv2d_keep_scratch(const tl_k_conv_geom *cv, int64_t *floats)
{
    check(cv);
    tl_vd_plan *p;
    tl_status st = conv_plan(cv, PLAN_FORWARD_KEEP, &p);
    *floats = st == TL_OK ? (p->scratch_bytes + (int64_t)sizeof(float) - 1) / (int64_t)sizeof(float) : 0;
    return st;
}

tl_status tl_k_conv2d_keep(const tl_k_conv_geom *cv, const float *restrict x, const float *restrict f,
                           float *restrict y, float *restrict kept, float *restrict scratch, int64_t scratch_floats)
{
    check(cv);
    if (!tl_k_conv2d_all_dnnl(cv))
        return tl_error(TL_EINVAL, "conv2d: keeping x for the filter gradient takes oneDNN for every pass");
    tl_vd_plan *p;
    tl_status st = conv_plan(cv, PLAN_FORWARD_KEEP, &p);
    if (st != TL_OK)
        return st;
    void *slots[4] = {(void *)x, (void *)f, y, kept};
    return tl_vd_run(p, slots, scratch, scratch_floats * (int64_t)sizeof(float));
}

tl_status tl_k_conv2d_backward_scratch(const tl_k_conv_geom *cv, bool kept, int64_t *floats)
{
    check(cv);
    *floats = 0;
    tl_vd_plan *p;
    tl_status st = conv_plan(cv, kept ? PLAN_BACKWARD_KEPT : PLAN_BACKWARD, &p);
    if (st == TL_OK)
        *floats = (p->scratch_bytes + (int64_t)sizeof(float) - 1) / (int64_t)sizeof(float);
    return st;
}

tl_status tl_k_conv2d_backward(const tl_k_conv_geom *cv, const float *restrict x, const float *restrict kept,
                               const float *restrict f, const float *restrict dy, float *restrict dx,
                               float *restrict df, float *restrict scratch, int64_t scratch_floats)
{
    check(cv);
    if (!tl_k_conv2d_all_dnnl(cv))
        return tl_error(TL_EINVAL, "conv2d_backward: both gradients at once take oneDNN for every pass");
    tl_vd_plan *p;
    tl_status st = conv_plan(cv, kept != NULL ? PLAN_BACKWARD_KEPT : PLAN_BACKWARD, &p);
    if (st != TL_OK)
        return st;
    void *slots[6] = {(void *)x, (void *)f, (void *)dy, dx, df, (void *)kept};
    return tl_vd_run(p, slots, scratch, scratch_floats * (int64_t)sizeof(float));
}

/* ---- float64 twins: the sums written out ------------------------------------------- */

/* Every product x[·]·f[·] of the convolution, in (b, i, j, q, u, v, r) order,
 * accumulated into y (forward), dx or df as pass says; the output is zeroed
 * first. a and b are the pass's inputs as in gemm_run. */
static void conv_ref(const tl_k_conv_geom *cv, tl_k_conv_pass pass, const double *restrict a,
                     const double *restrict b, double *restrict out)
{
    check(cv);
    int64_t cg = cv->c / cv->groups, og = cv->o / cv->groups;
    int64_t size = pass == TL_K_CONV_FORWARD      ? cv->n * cv->oh * cv->ow * cv->o
                   : pass == TL_K_CONV_GRAD_INPUT ? cv->n * cv->h * cv->w * cv->c
                                                  : cv->kh * cv->kw * cg * cv->o;
    memset(out, 0, (size_t)size * sizeof *out);
    for (int64_t n = 0; n < cv->n; n++)
        for (int64_t i = 0; i < cv->oh; i++)
            for (int64_t j = 0; j < cv->ow; j++)
                for (int64_t q = 0; q < cv->o; q++)
                    for (int64_t u = 0; u < cv->kh; u++)
                        for (int64_t v = 0; v < cv->kw; v++) {
                            int64_t yi = i * cv->stride_h - cv->pad_top + u * cv->dilation_h;
                            int64_t xj = j * cv->stride_w - cv->pad_left + v * cv->dilation_w;
                            if (yi < 0 || yi >= cv->h || xj < 0 || xj >= cv->w)
                                continue;
                            for (int64_t r = 0; r < cg; r++) {
                                int64_t xi = ((n * cv->h + yi) * cv->w + xj) * cv->c + q / og * cg + r;
                                int64_t fi = ((u * cv->kw + v) * cg + r) * cv->o + q;
                                int64_t yo = ((n * cv->oh + i) * cv->ow + j) * cv->o + q;
                                switch (pass) {
                                case TL_K_CONV_FORWARD: out[yo] += a[xi] * b[fi]; break;     /* a = x, b = f */
                                case TL_K_CONV_GRAD_INPUT: out[xi] += a[yo] * b[fi]; break;  /* a = dy, b = f */
                                case TL_K_CONV_GRAD_FILTER: out[fi] += a[xi] * b[yo]; break; /* a = x, b = dy */
                                }
                            }
                        }
}

void tl_k_conv2d_ref(const tl_k_conv_geom *cv, const double *restrict x, const double *restrict f, double *restrict y)
{
    conv_ref(cv, TL_K_CONV_FORWARD, x, f, y);
}

void tl_k_conv2d_grad_input_ref(const tl_k_conv_geom *cv, const double *restrict dy, const double *restrict f,
                                double *restrict dx)
{
    conv_ref(cv, TL_K_CONV_GRAD_INPUT, dy, f, dx);
}

void tl_k_conv2d_grad_filter_ref(const tl_k_conv_geom *cv, const double *restrict x, const double *restrict dy,
                                 double *restrict df)
{
    conv_ref(cv, TL_K_CONV_GRAD_FILTER, x, dy, df);
}

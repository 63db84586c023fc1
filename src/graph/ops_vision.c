/* ops_vision.c — conv2d, depthwise_conv2d, pooling and resize on NHWC
 * images: tracing with TF's shape rules, and the forward and backward passes
 * through the kernels of kernels/conv.h (oneDNN, im2col + GEMM, C loops).
 *
 * A node keeps its geometry in iattr (graph_int.h), so a pass rebuilds the
 * kernels' geometry struct from the node alone. oneDNN plans are built when
 * the program is compiled (the scratch hook asks each pass its scratch size,
 * on the compiling thread) and again by each device thread at its first step
 * (plans are per thread, kernels/vision_dnnl.h); after that a step allocates
 * nothing of tpuloop's. */
#include <string.h>

#include "../kernels/conv.h"
#include "ops.h"

#define SHAPE(node, buf) tl_shape_str((node)->shape, (node)->rank, buf, sizeof buf)
#define ATTR_MAX ((int64_t)1 << 30) /* bound on a window, stride or dilation: no overflow in the arithmetic */

/* t if it is a 4-D float32 tensor of g, else TL_T_INVALID with the error. */
static tl_t need_image(tl_graph *g, tl_t t, const char *op, const char *what, const char *dims)
{
    if (tl_graph_need_f32(g, t, op, what) < 0)
        return TL_T_INVALID;
    const tl_node *nd = &g->nodes[t];
    char s[96];
    if (nd->rank != 4)
        return tl_graph_failf(g, TL_EINVAL, "%s: %s must be 4-D %s, got %s", op, what, dims, SHAPE(nd, s));
    return t;
}

#define X_DIMS "(batch, height, width, channels)"

/* A pair of attributes (h, w): 0 → 1 when zero_is_one, each in [1, ATTR_MAX]. */
static bool pair_ok(tl_graph *g, const char *op, const char *what, const int64_t *in, bool zero_is_one, int64_t out[2])
{
    if (in == NULL) {
        tl_graph_failf(g, TL_EINVAL, "%s: %s is NULL; give (height, width)", op, what);
        return false;
    }
    for (int k = 0; k < 2; k++) {
        out[k] = in[k] == 0 && zero_is_one ? 1 : in[k];
        if (out[k] < 1 || out[k] > ATTR_MAX) {
            tl_graph_failf(g, TL_EINVAL, "%s: %s (%lld, %lld) must each be in [1, 2^30]", op, what, (long long)in[0],
                           (long long)in[1]);
            return false;
        }
    }
    return true;
}

static bool padding_ok(tl_graph *g, const char *op, tl_padding padding)
{
    if (padding == TL_PAD_VALID || padding == TL_PAD_SAME)
        return true;
    tl_graph_failf(g, TL_EINVAL, "%s: padding %d is neither TL_PAD_VALID nor TL_PAD_SAME", op, (int)padding);
    return false;
}

/* ---- tracing ------------------------------------------------------------------- */

static tl_t conv(tl_graph *g, const char *op, tl_t x, tl_t filter, const tl_conv2d_attrs *attrs, bool depthwise)
{
    if (need_image(g, x, op, "x", X_DIMS) < 0 ||
        need_image(g, filter, op, "filter",
                   depthwise ? "(height, width, in_channels, multiplier)"
                             : "(height, width, in_channels / groups, out_channels)") < 0)
        return TL_T_INVALID;
    tl_conv2d_attrs a = attrs != NULL ? *attrs : (tl_conv2d_attrs){{0, 0}, {0, 0}, TL_PAD_VALID, 0};
    int64_t strides[2], dilations[2];
    if (!pair_ok(g, op, "strides", a.strides, true, strides) ||
        !pair_ok(g, op, "dilations", a.dilations, true, dilations) || !padding_ok(g, op, a.padding))
        return TL_T_INVALID;
    const tl_node *xn = &g->nodes[x], *fn = &g->nodes[filter];
    char s1[96], s2[96];
    int64_t c = xn->shape[3], groups, fshape[4]; /* the filter as (kh, kw, c / groups, o) */
    memcpy(fshape, fn->shape, sizeof fshape);
    if (depthwise) {
        if (a.groups != 0 && a.groups != 1)
            return tl_graph_failf(g, TL_EINVAL, "%s: groups must be 0 or 1 (the groups are x's channels), got %lld",
                                  op, (long long)a.groups);
        if (fshape[2] != c)
            return tl_graph_failf(g, TL_EINVAL,
                                  "%s: filter %s must have x's %lld channels as its third dimension; x is %s", op,
                                  SHAPE(fn, s1), (long long)c, SHAPE(xn, s2));
        groups = c;
        fshape[2] = 1;
        fshape[3] = c * fn->shape[3];
    } else {
        groups = a.groups == 0 ? 1 : a.groups;
        if (groups < 1 || groups > c || c % groups != 0)
            return tl_graph_failf(g, TL_EINVAL, "%s: groups %lld does not divide the %lld channels of x %s", op,
                                  (long long)a.groups, (long long)c, SHAPE(xn, s1));
        if (fshape[2] != c / groups)
            return tl_graph_failf(g, TL_EINVAL,
                                  "%s: filter %s has %lld input channels; x %s with groups %lld needs %lld", op,
                                  SHAPE(fn, s1), (long long)fshape[2], SHAPE(xn, s2), (long long)groups,
                                  (long long)(c / groups));
        if (fshape[3] % groups != 0)
            return tl_graph_failf(g, TL_EINVAL, "%s: groups %lld does not divide the %lld output channels of filter %s",
                                  op, (long long)groups, (long long)fshape[3], SHAPE(fn, s1));
    }
    if (fshape[0] > ATTR_MAX || fshape[1] > ATTR_MAX)
        return tl_graph_failf(g, TL_EINVAL, "%s: filter %s: a window above 2^30", op, SHAPE(fn, s1));
    tl_k_conv_geom cv;
    if (!tl_k_conv2d_init(&cv, xn->shape, fshape, groups, strides, dilations, a.padding == TL_PAD_SAME))
        return tl_graph_failf(g, TL_EINVAL,
                              "%s: with VALID padding, the %lld x %lld window of filter %s (dilations %lld, %lld) "
                              "does not fit in the %lld x %lld image of x %s",
                              op, (long long)((fshape[0] - 1) * dilations[0] + 1),
                              (long long)((fshape[1] - 1) * dilations[1] + 1), SHAPE(fn, s1), (long long)dilations[0],
                              (long long)dilations[1], (long long)xn->shape[1], (long long)xn->shape[2], SHAPE(xn, s2));
    int64_t shape[4] = {cv.n, cv.oh, cv.ow, cv.o};
    tl_t in[2] = {x, filter};
    tl_t t = tl_graph_add(g, TL_OP_CONV2D, TL_F32, shape, 4, in, 2);
    if (t >= 0) {
        int64_t *ia = g->nodes[t].iattr;
        const int64_t v[12] = {cv.kh,         cv.kw,      cv.groups,   cv.stride_h,   cv.stride_w,  cv.dilation_h,
                               cv.dilation_w, cv.pad_top, cv.pad_left, cv.pad_bottom, cv.pad_right, depthwise};
        memcpy(ia, v, sizeof v);
    }
    return t;
}

tl_t tl_conv2d(tl_graph *g, tl_t x, tl_t filter, const tl_conv2d_attrs *attrs)
{
    return conv(g, "conv2d", x, filter, attrs, false);
}

tl_t tl_depthwise_conv2d(tl_graph *g, tl_t x, tl_t filter, const tl_conv2d_attrs *attrs)
{
    return conv(g, "depthwise_conv2d", x, filter, attrs, true);
}

/* A pooling node over windows of ksize, shaped (batch, oh, ow, c), or as
 * shape says when it is not NULL (global_avg_pool2d). */
static tl_t pool(tl_graph *g, tl_op_kind kind, const char *op, tl_t x, const int64_t *ksize, const int64_t *strides,
                 tl_padding padding, const int64_t *shape, int rank)
{
    if (need_image(g, x, op, "x", X_DIMS) < 0)
        return TL_T_INVALID;
    int64_t k[2], s[2];
    if (!pair_ok(g, op, "ksize", ksize, false, k) || !pair_ok(g, op, "strides", strides, false, s) ||
        !padding_ok(g, op, padding))
        return TL_T_INVALID;
    const tl_node *xn = &g->nodes[x];
    char s1[96];
    tl_k_pool_geom pl;
    if (!tl_k_pool2d_init(&pl, xn->shape, k, s, padding == TL_PAD_SAME))
        return tl_graph_failf(g, TL_EINVAL, "%s: with VALID padding, the %lld x %lld window does not fit in the "
                                            "%lld x %lld image of x %s",
                              op, (long long)k[0], (long long)k[1], (long long)xn->shape[1], (long long)xn->shape[2],
                              SHAPE(xn, s1));
    int64_t own[4] = {pl.n, pl.oh, pl.ow, pl.c};
    tl_t t = tl_graph_add(g, kind, TL_F32, shape != NULL ? shape : own, shape != NULL ? rank : 4, &x, 1);
    if (t >= 0) {
        const int64_t v[8] = {pl.kh,      pl.kw,       pl.stride_h,   pl.stride_w,
                              pl.pad_top, pl.pad_left, pl.pad_bottom, pl.pad_right};
        memcpy(g->nodes[t].iattr, v, sizeof v);
    }
    return t;
}

tl_t tl_max_pool2d(tl_graph *g, tl_t x, const int64_t ksize[2], const int64_t strides[2], tl_padding padding)
{
    return pool(g, TL_OP_MAX_POOL2D, "max_pool2d", x, ksize, strides, padding, NULL, 0);
}

tl_t tl_avg_pool2d(tl_graph *g, tl_t x, const int64_t ksize[2], const int64_t strides[2], tl_padding padding)
{
    return pool(g, TL_OP_AVG_POOL2D, "avg_pool2d", x, ksize, strides, padding, NULL, 0);
}

tl_t tl_global_avg_pool2d(tl_graph *g, tl_t x, bool keepdims)
{
    if (need_image(g, x, "global_avg_pool2d", "x", X_DIMS) < 0)
        return TL_T_INVALID;
    const int64_t *d = g->nodes[x].shape;
    int64_t k[2] = {d[1], d[2]}, one[2] = {1, 1};
    int64_t kept[4] = {d[0], 1, 1, d[3]}, flat[2] = {d[0], d[3]};
    return pool(g, TL_OP_AVG_POOL2D, "global_avg_pool2d", x, k, one, TL_PAD_VALID, keepdims ? kept : flat,
                keepdims ? 4 : 2);
}

tl_t tl_resize(tl_graph *g, tl_t x, int64_t out_h, int64_t out_w, tl_resize_method method)
{
    if (need_image(g, x, "resize", "x", X_DIMS) < 0)
        return TL_T_INVALID;
    if (out_h < 1 || out_w < 1 || out_h > ATTR_MAX || out_w > ATTR_MAX)
        return tl_graph_failf(g, TL_EINVAL, "resize: the size (%lld, %lld) must be in [1, 2^30] on each axis",
                              (long long)out_h, (long long)out_w);
    if (method != TL_RESIZE_BILINEAR && method != TL_RESIZE_NEAREST)
        return tl_graph_failf(g, TL_EINVAL, "resize: method %d is neither TL_RESIZE_BILINEAR nor TL_RESIZE_NEAREST",
                              (int)method);
    const int64_t *d = g->nodes[x].shape;
    int64_t shape[4] = {d[0], out_h, out_w, d[3]};
    tl_t t = tl_graph_add(g, TL_OP_RESIZE, TL_F32, shape, 4, &x, 1);
    if (t >= 0)
        g->nodes[t].iattr[0] = method;
    return t;
}

/* ---- geometry of a node --------------------------------------------------------- */

static tl_k_conv_geom conv_of(const tl_graph *g, const tl_node *nd)
{
    const tl_node *x = &g->nodes[nd->in[0]];
    const int64_t *ia = nd->iattr;
    tl_k_conv_geom cv = {
        .n = x->shape[0], .h = x->shape[1], .w = x->shape[2], .c = x->shape[3],
        .kh = ia[0], .kw = ia[1], .o = nd->shape[3], .groups = ia[2],
        .stride_h = ia[3], .stride_w = ia[4], .dilation_h = ia[5], .dilation_w = ia[6],
        .pad_top = ia[7], .pad_left = ia[8], .pad_bottom = ia[9], .pad_right = ia[10],
        .oh = nd->shape[1], .ow = nd->shape[2], .impl = TL_K_CONV_AUTO,
    };
    return cv;
}

static tl_k_pool_geom pool_of(const tl_graph *g, const tl_node *nd)
{
    const tl_node *x = &g->nodes[nd->in[0]];
    const int64_t *ia = nd->iattr;
    tl_k_pool_geom pl = {
        .n = x->shape[0], .h = x->shape[1], .w = x->shape[2], .c = x->shape[3],
        .kh = ia[0], .kw = ia[1], .stride_h = ia[2], .stride_w = ia[3],
        .pad_top = ia[4], .pad_left = ia[5], .pad_bottom = ia[6], .pad_right = ia[7],
    };
    pl.oh = (pl.h + pl.pad_top + pl.pad_bottom - pl.kh) / pl.stride_h + 1;
    pl.ow = (pl.w + pl.pad_left + pl.pad_right - pl.kw) / pl.stride_w + 1;
    return pl;
}

static tl_k_resize_geom resize_of(const tl_graph *g, const tl_node *nd)
{
    const tl_node *x = &g->nodes[nd->in[0]];
    tl_k_resize_geom rs = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], nd->shape[1], nd->shape[2],
                      nd->iattr[0] == TL_RESIZE_NEAREST};
    return rs;
}

/* ---- running -------------------------------------------------------------------- */

/* Whether conv node nd of a training graph runs its forward and both
 * gradients as a pair on oneDNN (conv.h): the forward keeps its blocked x,
 * the backward computes dx and df in one plan. */
static bool conv_pair(const tl_graph *g, const tl_node *nd, const tl_k_conv_geom *cv)
{
    return g->mode == TL_MODE_TRAIN && nd->needs_grad && g->nodes[nd->in[0]].needs_grad &&
           g->nodes[nd->in[1]].needs_grad && tl_k_conv2d_all_dnnl(cv);
}

/* Floats of the blocked x a pair's forward keeps (0: none). */
static int64_t conv_kept(const tl_graph *g, const tl_node *nd, const tl_k_conv_geom *cv)
{
    int64_t f = 0;
    if (conv_pair(g, nd, cv) && tl_k_conv2d_kept(cv, &f) != TL_OK) {
        tl_clear_error(); /* the plain passes then, which fail with the reason */
        f = 0;
    }
    return f;
}

/* The kept blocked x in node i's aux, 64-byte aligned (aux has 16 floats
 * more), or NULL: none kept, or the program planned no room for it (its plan
 * failed on the compiling thread), and then the plain passes run. */
static float *kept_of(const tl_program *p, const tl_exec *e, int i, int64_t kept)
{
    if (kept == 0 || p->aux_floats[i] < kept + 16)
        return NULL;
    uintptr_t a = ((uintptr_t)tl_exec_aux(p, e, i) + 63) & ~(uintptr_t)63;
    return (float *)a;
}

static int64_t aux(const tl_graph *g, int i)
{
    const tl_node *nd = &g->nodes[i];
    if (nd->op != TL_OP_CONV2D)
        return 0;
    tl_k_conv_geom cv = conv_of(g, nd);
    int64_t kept = conv_kept(g, nd, &cv);
    return kept > 0 ? kept + 16 : 0;
}

static tl_status forward(const tl_program *p, tl_exec *e, int i)
{
    const tl_graph *g = p->g;
    const tl_node *nd = &g->nodes[i];
    float *y = tl_exec_value(p, e, i), *x = tl_exec_value(p, e, nd->in[0]);
    switch (nd->op) {
    case TL_OP_CONV2D: {
        tl_k_conv_geom cv = conv_of(g, nd);
        float *kept = kept_of(p, e, i, conv_kept(g, nd, &cv));
        if (kept != NULL)
            return tl_k_conv2d_keep(&cv, x, tl_exec_value(p, e, nd->in[1]), y, kept, e->scratch, p->scratch_floats);
        return tl_k_conv2d(&cv, x, tl_exec_value(p, e, nd->in[1]), y, e->scratch, p->scratch_floats);
    }
    case TL_OP_MAX_POOL2D:
    case TL_OP_AVG_POOL2D: {
        tl_k_pool_geom pl = pool_of(g, nd);
        return nd->op == TL_OP_MAX_POOL2D ? tl_k_max_pool2d(&pl, x, y, e->scratch, p->scratch_floats)
                                          : tl_k_avg_pool2d(&pl, x, y, e->scratch, p->scratch_floats);
    }
    case TL_OP_RESIZE: {
        tl_k_resize_geom rs = resize_of(g, nd);
        tl_k_resize2d(&rs, x, y);
        return TL_OK;
    }
    default: break;
    }
    TL_ASSERT(!"a vision op kind without a forward pass");
    return TL_ERUNTIME;
}

static tl_status backward(const tl_program *p, tl_exec *e, int i, int64_t *cursor)
{
    const tl_graph *g = p->g;
    const tl_node *nd = &g->nodes[i];
    const float *dy = tl_op_grad(p, e, i), *x = tl_exec_value(p, e, nd->in[0]);
    tl_status st = TL_OK;
    switch (nd->op) {
    case TL_OP_CONV2D: {
        tl_k_conv_geom cv = conv_of(g, nd);
        float *dx = tl_op_wants(p, i, 0) ? tl_op_dst(p, e, i, 0, cursor) : NULL;
        float *df = tl_op_wants(p, i, 1) ? tl_op_dst(p, e, i, 1, cursor) : NULL;
        float *own = tl_op_scratch(e, cursor, 0);
        int64_t room = p->scratch_floats - *cursor;
        if (dx != NULL && df != NULL && conv_pair(g, nd, &cv)) {
            st = tl_k_conv2d_backward(&cv, x, kept_of(p, e, i, conv_kept(g, nd, &cv)), tl_exec_value(p, e, nd->in[1]),
                                      dy, dx, df, own, room);
            tl_op_finish(p, e, i, 0, dx);
            tl_op_finish(p, e, i, 1, df);
            return st;
        }
        if (dx != NULL) {
            st = tl_k_conv2d_grad_input(&cv, dy, tl_exec_value(p, e, nd->in[1]), dx, own, room);
            tl_op_finish(p, e, i, 0, dx);
        }
        if (st == TL_OK && df != NULL) {
            st = tl_k_conv2d_grad_filter(&cv, x, dy, df, own, room);
            tl_op_finish(p, e, i, 1, df);
        }
        return st;
    }
    case TL_OP_MAX_POOL2D:
    case TL_OP_AVG_POOL2D:
    case TL_OP_RESIZE: {
        if (!tl_op_wants(p, i, 0))
            return TL_OK;
        float *dx = tl_op_dst(p, e, i, 0, cursor);
        float *own = tl_op_scratch(e, cursor, 0);
        int64_t room = p->scratch_floats - *cursor;
        if (nd->op == TL_OP_RESIZE) {
            tl_k_resize_geom rs = resize_of(g, nd);
            tl_k_resize2d_grad(&rs, dy, dx);
        } else {
            tl_k_pool_geom pl = pool_of(g, nd);
            st = nd->op == TL_OP_MAX_POOL2D ? tl_k_max_pool2d_grad(&pl, x, dy, dx, own, room)
                                            : tl_k_avg_pool2d_grad(&pl, dy, dx, own, room);
        }
        tl_op_finish(p, e, i, 0, dx);
        return st;
    }
    default: break;
    }
    TL_ASSERT(!"a vision op kind without a backward pass");
    return TL_ERUNTIME;
}

/* The op's own scratch, beyond its staged input gradients: the largest of
 * its passes (a backward one only in a graph that trains, for an input that
 * may want the gradient). A pass whose plan oneDNN cannot build asks for
 * nothing here and fails with its reason when it runs. */
static int64_t scratch(const tl_graph *g, int i)
{
    const tl_node *nd = &g->nodes[i];
    bool train = g->mode == TL_MODE_TRAIN && nd->needs_grad;
    int64_t most = 0, f;
    switch (nd->op) {
    case TL_OP_CONV2D: {
        tl_k_conv_geom cv = conv_of(g, nd);
        bool want[3] = {true, train && g->nodes[nd->in[0]].needs_grad, train && g->nodes[nd->in[1]].needs_grad};
        for (int pass = 0; pass < 3; pass++)
            if (want[pass] && tl_k_conv2d_scratch(&cv, (tl_k_conv_pass)pass, &f) == TL_OK && f > most)
                most = f;
        if (conv_pair(g, nd, &cv)) { /* both backward plans: the one without kept x reorders x in scratch */
            if (tl_k_conv2d_keep_scratch(&cv, &f) == TL_OK && f > most)
                most = f;
            for (int kept = 0; kept < 2; kept++)
                if (tl_k_conv2d_backward_scratch(&cv, kept, &f) == TL_OK && f > most)
                    most = f;
        }
        break;
    }
    case TL_OP_MAX_POOL2D:
    case TL_OP_AVG_POOL2D: {
        tl_k_pool_geom pl = pool_of(g, nd);
        for (int pass = 0; pass < (train ? 2 : 1); pass++)
            if (tl_k_pool2d_scratch(&pl, nd->op == TL_OP_MAX_POOL2D, pass == 1, &f) == TL_OK && f > most)
                most = f;
        break;
    }
    default: break;
    }
    tl_clear_error();
    return most;
}

const tl_op_family tl_ops_vision = {"vision", TL_OP_VISION_FIRST_, TL_OP_VISION_LAST_, forward, backward, scratch,
                                    NULL, aux};

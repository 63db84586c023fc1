/* The vision kernels (src/kernels/conv.h): convolution on both engines,
 * pooling and resize against their float64 twins, the twins' gradients
 * against finite differences, TF's tie and edge rules on worked examples,
 * and the same bits on a second run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv.h"
#include "test_kernels_util.h"

TestSuite(ops_vision_kernels, .init = tk_setup, .timeout = 120);

/* ---- convolution ------------------------------------------------------------------ */

static const tk_conv_case conv_cases[] = {
    {{2, 5, 5, 3}, {3, 3, 3, 4}, 1, {1, 1}, {1, 1}, true, "3x3 stride 1 SAME, odd size"},
    {{2, 6, 6, 4}, {3, 3, 4, 5}, 1, {2, 2}, {1, 1}, true, "in 6, k 3, stride 2 SAME: pad 0 before, 1 after"},
    {{1, 7, 6, 3}, {3, 2, 3, 4}, 1, {2, 2}, {1, 1}, false, "3x2 stride 2 VALID, odd and even"},
    {{2, 8, 7, 4}, {3, 3, 4, 4}, 1, {1, 1}, {2, 2}, true, "dilation 2 SAME"},
    {{1, 9, 8, 2}, {3, 2, 2, 3}, 1, {1, 2}, {2, 1}, false, "dilation (2, 1), strides (1, 2) VALID"},
    {{2, 6, 5, 4}, {3, 3, 2, 6}, 2, {1, 1}, {1, 1}, true, "groups 2"},
    {{2, 6, 6, 3}, {3, 3, 1, 6}, 3, {1, 1}, {1, 1}, true, "depthwise, multiplier 2"},
    {{1, 7, 7, 4}, {3, 3, 1, 4}, 4, {2, 2}, {1, 1}, true, "depthwise stride 2 SAME"},
    {{2, 4, 4, 8}, {1, 1, 8, 8}, 1, {1, 1}, {1, 1}, false, "1x1"},
    {{2, 7, 7, 8}, {1, 1, 8, 16}, 1, {2, 2}, {1, 1}, true, "1x1 stride 2 projection"},
    {{1, 8, 8, 3}, {2, 2, 3, 2}, 1, {2, 2}, {1, 1}, true, "2x2 stride 2 SAME on an even size: no padding"},
    {{1, 5, 5, 2}, {4, 4, 2, 3}, 1, {1, 1}, {1, 1}, true, "even kernel SAME: pad 1 before, 2 after"},
    {{3, 3, 3, 1}, {3, 3, 1, 1}, 1, {1, 1}, {1, 1}, false, "one output pixel"},
};

static int64_t conv_x_size(const tl_k_conv_geom *cv) { return cv->n * cv->h * cv->w * cv->c; }
static int64_t conv_f_size(const tl_k_conv_geom *cv) { return cv->kh * cv->kw * (cv->c / cv->groups) * cv->o; }
static int64_t conv_y_size(const tl_k_conv_geom *cv) { return cv->n * cv->oh * cv->ow * cv->o; }

static void abs_of(int64_t n, const double *a, double *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = fabs(a[i]);
}

static float *scratch_for(const tl_k_conv_geom *cv, tl_k_conv_pass pass, int64_t *floats)
{
    cr_assert_eq(tl_k_conv2d_scratch(cv, pass, floats), TL_OK, "%s", tl_last_error());
    return tk_alloc((size_t)(*floats + 1) * sizeof(float));
}

/* Every pass of cv on engine impl against the twins, each bounded by the
 * twin on |inputs| (the sum of |terms|). */
static void check_conv(const tk_conv_case *cc, tl_k_conv_impl impl)
{
    tl_k_conv_geom cv;
    cr_assert(tl_k_conv2d_init(&cv, cc->x, cc->f, cc->groups, cc->strides, cc->dilations, cc->same), "%s", cc->name);
    cv.impl = impl;
    int64_t nx = conv_x_size(&cv), nf = conv_f_size(&cv), ny = conv_y_size(&cv);
    tk_buf x = tk_rand(nx, 1, -1, 1), f = tk_rand(nf, 2, -1, 1), dy = tk_rand(ny, 3, -1, 1);
    tk_buf y = tk_zeros(ny), dx = tk_zeros(nx), df = tk_zeros(nf);
    double *ax = tk_alloc((size_t)nx * sizeof(double)), *af = tk_alloc((size_t)nf * sizeof(double));
    double *ady = tk_alloc((size_t)ny * sizeof(double));
    double *by = tk_alloc((size_t)ny * sizeof(double)), *bx = tk_alloc((size_t)nx * sizeof(double));
    double *bf = tk_alloc((size_t)nf * sizeof(double));
    abs_of(nx, x.d, ax);
    abs_of(nf, f.d, af);
    abs_of(ny, dy.d, ady);
    char what[160];
    int64_t s;
    float *scratch = scratch_for(&cv, TL_K_CONV_FORWARD, &s);
    cr_assert_eq(tl_k_conv2d(&cv, x.f, f.f, y.f, scratch, s), TL_OK, "%s: %s", cc->name, tl_last_error());
    free(scratch);
    tl_k_conv2d_ref(&cv, x.d, f.d, y.d);
    tl_k_conv2d_ref(&cv, ax, af, by);
    snprintf(what, sizeof what, "conv2d %s (engine %d)", cc->name, (int)tl_k_conv2d_engine(&cv, TL_K_CONV_FORWARD));
    tk_assert_bounded(ny, y.f, y.d, by, 1e-6, what);

    scratch = scratch_for(&cv, TL_K_CONV_GRAD_INPUT, &s);
    cr_assert_eq(tl_k_conv2d_grad_input(&cv, dy.f, f.f, dx.f, scratch, s), TL_OK, "%s: %s", cc->name,
                 tl_last_error());
    free(scratch);
    tl_k_conv2d_grad_input_ref(&cv, dy.d, f.d, dx.d);
    tl_k_conv2d_grad_input_ref(&cv, ady, af, bx);
    snprintf(what, sizeof what, "conv2d_grad_input %s (engine %d)", cc->name,
             (int)tl_k_conv2d_engine(&cv, TL_K_CONV_GRAD_INPUT));
    tk_assert_bounded(nx, dx.f, dx.d, bx, 1e-6, what);

    scratch = scratch_for(&cv, TL_K_CONV_GRAD_FILTER, &s);
    cr_assert_eq(tl_k_conv2d_grad_filter(&cv, x.f, dy.f, df.f, scratch, s), TL_OK, "%s: %s", cc->name,
                 tl_last_error());
    free(scratch);
    tl_k_conv2d_grad_filter_ref(&cv, x.d, dy.d, df.d);
    tl_k_conv2d_grad_filter_ref(&cv, ax, ady, bf);
    snprintf(what, sizeof what, "conv2d_grad_filter %s (engine %d)", cc->name,
             (int)tl_k_conv2d_engine(&cv, TL_K_CONV_GRAD_FILTER));
    tk_assert_bounded(nf, df.f, df.d, bf, 1e-6, what);

    tk_free(&x), tk_free(&f), tk_free(&dy), tk_free(&y), tk_free(&dx), tk_free(&df);
    free(ax), free(af), free(ady), free(by), free(bx), free(bf);
}

Test(ops_vision_kernels, conv_onednn_matches_twin)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        check_conv(&conv_cases[i], TL_K_CONV_DNNL);
}

Test(ops_vision_kernels, conv_onednn_blocked_matches_twin)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        check_conv(&conv_cases[i], TL_K_CONV_DNNL_BLOCKED);
}

Test(ops_vision_kernels, conv_gemm_matches_twin)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        if (conv_cases[i].groups == 1)
            check_conv(&conv_cases[i], TL_K_CONV_GEMM);
}

Test(ops_vision_kernels, conv_auto_matches_twin)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        check_conv(&conv_cases[i], TL_K_CONV_AUTO);
}

/* The training pair (conv.h) on oneDNN's blocked layouts: the forward that
 * keeps its blocked x and both gradients in one plan give the bits of the
 * three passes apart, with and without the kept x. */
static void check_pair(const int64_t xs[4], const int64_t fs[4], int64_t stride)
{
    tl_k_conv_geom cv;
    cr_assert(tl_k_conv2d_init(&cv, xs, fs, 1, (int64_t[]){stride, stride}, (int64_t[]){1, 1}, true));
    int64_t kept;
    cv.impl = TL_K_CONV_DNNL;
    cr_assert_eq(tl_k_conv2d_kept(&cv, &kept), TL_OK, "%s", tl_last_error());
    cr_assert_eq(kept, 0, "oneDNN reads and writes NHWC in place: no reordered x to keep");
    cv.impl = TL_K_CONV_DNNL_BLOCKED;
    int64_t nx = conv_x_size(&cv), nf = conv_f_size(&cv), ny = conv_y_size(&cv), s, s2;
    tk_buf x = tk_rand(nx, 11, -1, 1), f = tk_rand(nf, 12, -1, 1), dy = tk_rand(ny, 13, -1, 1);
    tk_buf y = tk_zeros(ny), y2 = tk_zeros(ny), dx = tk_zeros(nx), dx2 = tk_zeros(nx), dx3 = tk_zeros(nx);
    tk_buf df = tk_zeros(nf), df2 = tk_zeros(nf), df3 = tk_zeros(nf);
    cr_assert_eq(tl_k_conv2d_kept(&cv, &kept), TL_OK, "%s", tl_last_error());
    cr_assert_gt(kept, 0, "16 channels go to oneDNN's blocked layout, which both kernels read");
    float *k = tk_alloc((size_t)kept * sizeof(float));
    float *scratch = scratch_for(&cv, TL_K_CONV_FORWARD, &s);
    cr_assert_eq(tl_k_conv2d(&cv, x.f, f.f, y.f, scratch, s), TL_OK, "%s", tl_last_error());
    free(scratch);
    cr_assert_eq(tl_k_conv2d_keep_scratch(&cv, &s), TL_OK);
    scratch = tk_alloc((size_t)(s + 1) * sizeof(float));
    cr_assert_eq(tl_k_conv2d_keep(&cv, x.f, f.f, y2.f, k, scratch, s), TL_OK, "%s", tl_last_error());
    free(scratch);
    tk_assert_same_bits(ny, y2.f, y.f, "conv2d_keep y");
    scratch = scratch_for(&cv, TL_K_CONV_GRAD_INPUT, &s);
    cr_assert_eq(tl_k_conv2d_grad_input(&cv, dy.f, f.f, dx.f, scratch, s), TL_OK, "%s", tl_last_error());
    free(scratch);
    scratch = scratch_for(&cv, TL_K_CONV_GRAD_FILTER, &s);
    cr_assert_eq(tl_k_conv2d_grad_filter(&cv, x.f, dy.f, df.f, scratch, s), TL_OK, "%s", tl_last_error());
    free(scratch);
    cr_assert_eq(tl_k_conv2d_backward_scratch(&cv, true, &s), TL_OK);
    cr_assert_eq(tl_k_conv2d_backward_scratch(&cv, false, &s2), TL_OK);
    cr_assert_lt(s, s2, "the kept x needs no scratch of its own");
    scratch = tk_alloc((size_t)(s2 + 1) * sizeof(float));
    cr_assert_eq(tl_k_conv2d_backward(&cv, x.f, k, f.f, dy.f, dx2.f, df2.f, scratch, s), TL_OK, "%s",
                 tl_last_error());
    cr_assert_eq(tl_k_conv2d_backward(&cv, x.f, NULL, f.f, dy.f, dx3.f, df3.f, scratch, s2), TL_OK, "%s",
                 tl_last_error());
    free(scratch);
    tk_assert_same_bits(nx, dx2.f, dx.f, "conv2d_backward dx (kept x)");
    tk_assert_same_bits(nf, df2.f, df.f, "conv2d_backward df (kept x)");
    tk_assert_same_bits(nx, dx3.f, dx.f, "conv2d_backward dx");
    tk_assert_same_bits(nf, df3.f, df.f, "conv2d_backward df");
    free(k);
    tk_free(&x), tk_free(&f), tk_free(&dy), tk_free(&y), tk_free(&y2), tk_free(&dx), tk_free(&dx2), tk_free(&dx3);
    tk_free(&df), tk_free(&df2), tk_free(&df3);
}

Test(ops_vision_kernels, conv_training_pair_has_the_bits_of_the_passes_apart)
{
    check_pair((int64_t[]){4, 12, 12, 16}, (int64_t[]){3, 3, 16, 16}, 1);
    check_pair((int64_t[]){3, 11, 11, 16}, (int64_t[]){3, 3, 16, 24}, 2);
}

Test(ops_vision_kernels, conv_training_pair_refuses_other_engines)
{
    tl_k_conv_geom cv;
    cr_assert(tl_k_conv2d_init(&cv, (int64_t[]){1, 4, 4, 8}, (int64_t[]){1, 1, 8, 8}, 1, (int64_t[]){1, 1},
                               (int64_t[]){1, 1}, true));
    cv.impl = TL_K_CONV_GEMM;
    int64_t kept;
    cr_assert_eq(tl_k_conv2d_kept(&cv, &kept), TL_OK);
    cr_assert_eq(kept, 0, "GEMM keeps nothing");
    float x[128] = {0}, f[64] = {0}, dy[128] = {0}, dx[128], df[64];
    cr_assert_eq(tl_k_conv2d_backward(&cv, x, NULL, f, dy, dx, df, NULL, 0), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "take oneDNN for every pass") != NULL, "%s", tl_last_error());
}

/* The GEMM engine splits a batch whose columns pass 2^20 floats into chunks
 * and sums the filter gradient over them. */
Test(ops_vision_kernels, conv_gemm_chunks_the_batch)
{
    /* 784 rows x 36 taps per image: 37 images a chunk, so two chunks. */
    const tk_conv_case big = {{40, 28, 28, 4}, {3, 3, 4, 4}, 1, {1, 1}, {1, 1}, true, "28x28x4, batch 40 in 2 chunks"};
    check_conv(&big, TL_K_CONV_GEMM);
}

Test(ops_vision_kernels, conv_gemm_refuses_groups)
{
    tl_k_conv_geom cv;
    cr_assert(tl_k_conv2d_init(&cv, (int64_t[]){1, 4, 4, 4}, (int64_t[]){3, 3, 2, 4}, 2, (int64_t[]){1, 1},
                               (int64_t[]){1, 1}, true));
    cv.impl = TL_K_CONV_GEMM;
    int64_t s;
    cr_assert_eq(tl_k_conv2d_scratch(&cv, TL_K_CONV_FORWARD, &s), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "groups 1 only (got 2)") != NULL, "%s", tl_last_error());
}

Test(ops_vision_kernels, conv_scratch_too_small_is_an_error)
{
    tl_k_conv_geom cv;
    cr_assert(tl_k_conv2d_init(&cv, (int64_t[]){2, 6, 6, 16}, (int64_t[]){3, 3, 16, 16}, 1, (int64_t[]){1, 1},
                               (int64_t[]){1, 1}, true));
    cv.impl = TL_K_CONV_DNNL;
    int64_t s;
    cr_assert_eq(tl_k_conv2d_scratch(&cv, TL_K_CONV_FORWARD, &s), TL_OK, "%s", tl_last_error());
    cr_assert(s > 0, "oneDNN's blocked layout goes through scratch");
    tk_buf x = tk_rand(2 * 36 * 16, 1, -1, 1), f = tk_rand(9 * 256, 2, -1, 1), y = tk_zeros(2 * 36 * 16);
    float *scratch = tk_alloc((size_t)s * sizeof(float));
    cr_assert_eq(tl_k_conv2d(&cv, x.f, f.f, y.f, scratch, s - 16), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "bytes of scratch given, the plan needs") != NULL, "%s", tl_last_error());
    free(scratch);
    tk_free(&x), tk_free(&f), tk_free(&y);
}

/* TF's windows: output sizes and the odd padding after. */
Test(ops_vision_kernels, window_follows_tf)
{
    int64_t out, before, after;
    cr_assert(tl_k_window(6, 3, 2, 1, true, &out, &before, &after));
    cr_assert(out == 3 && before == 0 && after == 1, "in 6 k 3 s 2 SAME: %lld (%lld, %lld)", (long long)out,
              (long long)before, (long long)after);
    cr_assert(tl_k_window(5, 4, 1, 1, true, &out, &before, &after));
    cr_assert(out == 5 && before == 1 && after == 2);
    cr_assert(tl_k_window(7, 3, 1, 2, true, &out, &before, &after)); /* dilated window of 5 */
    cr_assert(out == 7 && before == 2 && after == 2);
    cr_assert(tl_k_window(6, 1, 2, 1, true, &out, &before, &after)); /* negative pad clamps to 0 */
    cr_assert(out == 3 && before == 0 && after == 0);
    cr_assert(tl_k_window(7, 3, 2, 1, false, &out, &before, &after));
    cr_assert(out == 3 && before == 0 && after == 0);
    cr_assert(!tl_k_window(4, 3, 1, 2, false, &out, &before, &after)); /* window 5 > 4 */
}

/* ---- the twins against finite differences ------------------------------------------ */

typedef struct conv_fd {
    tl_k_conv_geom cv;
    const double *fixed; /* f for the x check, x for the f check */
} conv_fd;

static void conv_fwd_x(const double *x, double *y, void *ctx)
{
    const conv_fd *c = ctx;
    tl_k_conv2d_ref(&c->cv, x, c->fixed, y);
}

static void conv_fwd_f(const double *f, double *y, void *ctx)
{
    const conv_fd *c = ctx;
    tl_k_conv2d_ref(&c->cv, c->fixed, f, y);
}

Test(ops_vision_kernels, conv_twin_grads_match_finite_differences)
{
    const tk_conv_case cases[] = {
        {{1, 6, 6, 2}, {3, 3, 2, 3}, 1, {2, 2}, {1, 1}, true, "stride 2 SAME, asymmetric"},
        {{2, 5, 4, 4}, {2, 3, 2, 4}, 2, {1, 1}, {2, 1}, true, "groups 2, dilation (2, 1)"},
        {{1, 4, 4, 2}, {3, 3, 1, 4}, 2, {1, 1}, {1, 1}, false, "depthwise VALID"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const tk_conv_case *cc = &cases[i];
        conv_fd c;
        cr_assert(tl_k_conv2d_init(&c.cv, cc->x, cc->f, cc->groups, cc->strides, cc->dilations, cc->same));
        int64_t nx = conv_x_size(&c.cv), nf = conv_f_size(&c.cv), ny = conv_y_size(&c.cv);
        tk_buf x = tk_rand(nx, 4, -1, 1), f = tk_rand(nf, 5, -1, 1), dy = tk_rand(ny, 6, -1, 1);
        double *dx = tk_alloc((size_t)nx * sizeof(double)), *df = tk_alloc((size_t)nf * sizeof(double));
        tl_k_conv2d_grad_input_ref(&c.cv, dy.d, f.d, dx);
        tl_k_conv2d_grad_filter_ref(&c.cv, x.d, dy.d, df);
        c.fixed = f.d;
        tk_check_grad(conv_fwd_x, &c, nx, ny, x.d, dy.d, dx, cc->name);
        c.fixed = x.d;
        tk_check_grad(conv_fwd_f, &c, nf, ny, f.d, dy.d, df, cc->name);
        tk_free(&x), tk_free(&f), tk_free(&dy);
        free(dx), free(df);
    }
}

/* A hand-worked 1x1 example: the filter mixes channels, per pixel. */
Test(ops_vision_kernels, conv_worked_example)
{
    tl_k_conv_geom cv;
    /* x (1, 1, 3, 1) = [1, 2, 3], filter (1, 2, 1, 1) = [10, 1], VALID: [12, 23]. */
    cr_assert(tl_k_conv2d_init(&cv, (int64_t[]){1, 1, 3, 1}, (int64_t[]){1, 2, 1, 1}, 1, (int64_t[]){1, 1},
                               (int64_t[]){1, 1}, false));
    const float x[3] = {1, 2, 3}, f[2] = {10, 1};
    float y[2];
    for (int impl = TL_K_CONV_DNNL; impl <= TL_K_CONV_GEMM; impl++) {
        cv.impl = (tl_k_conv_impl)impl;
        int64_t s;
        float *scratch = scratch_for(&cv, TL_K_CONV_FORWARD, &s);
        cr_assert_eq(tl_k_conv2d(&cv, x, f, y, scratch, s), TL_OK, "%s", tl_last_error());
        cr_assert(y[0] == 12 && y[1] == 23, "engine %d: [%g, %g]", impl, (double)y[0], (double)y[1]);
        free(scratch);
    }
    /* SAME with k 2 pads one zero after: [12, 23, 30]. */
    cr_assert(tl_k_conv2d_init(&cv, (int64_t[]){1, 1, 3, 1}, (int64_t[]){1, 2, 1, 1}, 1, (int64_t[]){1, 1},
                               (int64_t[]){1, 1}, true));
    cr_assert(cv.ow == 3 && cv.pad_left == 0 && cv.pad_right == 1);
    float y3[3];
    int64_t s;
    float *scratch = scratch_for(&cv, TL_K_CONV_FORWARD, &s);
    cr_assert_eq(tl_k_conv2d(&cv, x, f, y3, scratch, s), TL_OK, "%s", tl_last_error());
    cr_assert(y3[0] == 12 && y3[1] == 23 && y3[2] == 30, "[%g, %g, %g]", (double)y3[0], (double)y3[1], (double)y3[2]);
    free(scratch);
}

/* ---- pooling ---------------------------------------------------------------------------- */

static const tk_pool_case pool_cases[] = {
    {{2, 6, 6, 3}, {2, 2}, {2, 2}, false, "2x2 stride 2 VALID"},
    {{2, 7, 7, 3}, {3, 3}, {2, 2}, true, "3x3 stride 2 SAME, overlapping"},
    {{1, 5, 6, 4}, {2, 2}, {2, 2}, true, "SAME on odd height: a 1-row edge window"},
    {{1, 6, 5, 2}, {3, 2}, {1, 2}, false, "3x2 strides (1, 2) VALID"},
    {{2, 3, 3, 8}, {5, 5}, {1, 1}, true, "window larger than the image, SAME"},
    {{3, 4, 4, 5}, {4, 4}, {1, 1}, false, "global"},
};

static void check_pool(const tk_pool_case *pc, bool max, const double *xvals)
{
    tl_k_pool_geom pl;
    cr_assert(tl_k_pool2d_init(&pl, pc->x, pc->k, pc->s, pc->same), "%s", pc->name);
    int64_t nx = pl.n * pl.h * pl.w * pl.c, ny = pl.n * pl.oh * pl.ow * pl.c;
    tk_buf x = tk_rand(nx, 7, -1, 1), dy = tk_rand(ny, 8, -1, 1), y = tk_zeros(ny), dx = tk_zeros(nx);
    if (xvals != NULL)
        for (int64_t i = 0; i < nx; i++)
            x.d[i] = x.f[i] = (float)xvals[i];
    char what[160];
    int64_t s0, s1;
    cr_assert_eq(tl_k_pool2d_scratch(&pl, max, false, &s0), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_k_pool2d_scratch(&pl, max, true, &s1), TL_OK, "%s", tl_last_error());
    float *scratch = tk_alloc((size_t)(s0 > s1 ? s0 : s1) * sizeof(float) + 4);
    if (max) {
        cr_assert_eq(tl_k_max_pool2d(&pl, x.f, y.f, scratch, s0), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_k_max_pool2d_grad(&pl, x.f, dy.f, dx.f, scratch, s1), TL_OK, "%s", tl_last_error());
        tl_k_max_pool2d_ref(&pl, x.d, y.d);
        tl_k_max_pool2d_grad_ref(&pl, x.d, dy.d, dx.d);
    } else {
        cr_assert_eq(tl_k_avg_pool2d(&pl, x.f, y.f, scratch, s0), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_k_avg_pool2d_grad(&pl, dy.f, dx.f, scratch, s1), TL_OK, "%s", tl_last_error());
        tl_k_avg_pool2d_ref(&pl, x.d, y.d);
        tl_k_avg_pool2d_grad_ref(&pl, dy.d, dx.d);
    }
    snprintf(what, sizeof what, "%s_pool2d %s", max ? "max" : "avg", pc->name);
    tk_assert_close(ny, y.f, y.d, max ? 0.0 : 1e-6, max ? 0.0 : 1e-6, what);
    snprintf(what, sizeof what, "%s_pool2d_grad %s", max ? "max" : "avg", pc->name);
    tk_assert_close(nx, dx.f, dx.d, 1e-6, 1e-6, what);
    free(scratch);
    tk_free(&x), tk_free(&dy), tk_free(&y), tk_free(&dx);
}

Test(ops_vision_kernels, pools_match_twins)
{
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        check_pool(&pool_cases[i], true, NULL);
        check_pool(&pool_cases[i], false, NULL);
    }
}

/* Inputs of a few integer values: windows full of ties, overlapping. The
 * gradient must go to each window's first maximum in row-major order, as
 * TF's MaxPoolGrad (the twin's rule), exactly. */
Test(ops_vision_kernels, max_pool_ties_go_to_the_first_maximum)
{
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        const tk_pool_case *pc = &pool_cases[i];
        int64_t nx = pc->x[0] * pc->x[1] * pc->x[2] * pc->x[3];
        double *v = tk_alloc((size_t)nx * sizeof(double));
        for (int64_t k = 0; k < nx; k++)
            v[k] = (double)((k * 7 / 3) % 3); /* 0, 2, 1, 0, 2, ... with runs */
        check_pool(pc, true, v);
        for (int64_t k = 0; k < nx; k++)
            v[k] = 1.0; /* all tied */
        check_pool(pc, true, v);
        free(v);
    }
    /* By hand: a 2x2 window of equal values sends everything to its top left. */
    tl_k_pool_geom pl;
    cr_assert(tl_k_pool2d_init(&pl, (int64_t[]){1, 2, 3, 1}, (int64_t[]){2, 2}, (int64_t[]){1, 1}, false));
    const float x[6] = {5, 5, 5, 5, 5, 5}, dy[2] = {1, 10};
    float dx[6];
    int64_t s;
    cr_assert_eq(tl_k_pool2d_scratch(&pl, true, true, &s), TL_OK);
    float *scratch = tk_alloc((size_t)s * sizeof(float));
    cr_assert_eq(tl_k_max_pool2d_grad(&pl, x, dy, dx, scratch, s), TL_OK, "%s", tl_last_error());
    const float want[6] = {1, 10, 0, 0, 0, 0};
    for (int k = 0; k < 6; k++)
        cr_assert_eq(dx[k], want[k], "dx[%d] = %g, want %g", k, (double)dx[k], (double)want[k]);
    free(scratch);
}

/* TF's avg_pool with SAME divides an edge window by the elements inside the
 * image: x 3x3 = 1..9, 2x2 stride 2 SAME pads one row and column after. */
Test(ops_vision_kernels, avg_pool_same_divides_by_the_valid_elements)
{
    tl_k_pool_geom pl;
    cr_assert(tl_k_pool2d_init(&pl, (int64_t[]){1, 3, 3, 1}, (int64_t[]){2, 2}, (int64_t[]){2, 2}, true));
    cr_assert(pl.oh == 2 && pl.pad_top == 0 && pl.pad_bottom == 1);
    const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, want[4] = {3, 4.5f, 7.5f, 9};
    float y[4];
    int64_t s;
    cr_assert_eq(tl_k_pool2d_scratch(&pl, false, false, &s), TL_OK);
    float *scratch = tk_alloc((size_t)s * sizeof(float) + 4);
    cr_assert_eq(tl_k_avg_pool2d(&pl, x, y, scratch, s), TL_OK, "%s", tl_last_error());
    for (int k = 0; k < 4; k++)
        cr_assert_eq(y[k], want[k], "y[%d] = %g, want %g", k, (double)y[k], (double)want[k]);
    /* The gradient: each window's dy / count on its elements. */
    const float dy[4] = {4, 2, 2, 1}, dwant[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float dx[9];
    cr_assert_eq(tl_k_pool2d_scratch(&pl, false, true, &s), TL_OK);
    free(scratch);
    scratch = tk_alloc((size_t)s * sizeof(float) + 4);
    cr_assert_eq(tl_k_avg_pool2d_grad(&pl, dy, dx, scratch, s), TL_OK, "%s", tl_last_error());
    for (int k = 0; k < 9; k++)
        cr_assert_eq(dx[k], dwant[k], "dx[%d] = %g", k, (double)dx[k]);
    free(scratch);
}

typedef struct pool_fd {
    tl_k_pool_geom pl;
    bool max;
} pool_fd;

static void pool_fwd(const double *x, double *y, void *ctx)
{
    const pool_fd *c = ctx;
    if (c->max)
        tl_k_max_pool2d_ref(&c->pl, x, y);
    else
        tl_k_avg_pool2d_ref(&c->pl, x, y);
}

Test(ops_vision_kernels, pool_twin_grads_match_finite_differences)
{
    for (int max = 0; max < 2; max++) {
        pool_fd c = {.max = max};
        cr_assert(tl_k_pool2d_init(&c.pl, (int64_t[]){2, 5, 5, 2}, (int64_t[]){3, 3}, (int64_t[]){2, 2}, true));
        int64_t nx = 2 * 25 * 2, ny = 2 * c.pl.oh * c.pl.ow * 2;
        /* Distinct values far apart (no max flips within the step h). */
        tk_buf x = tk_rand(nx, 9, -1, 1), dy = tk_rand(ny, 10, -1, 1);
        for (int64_t i = 0; i < nx; i++)
            x.d[i] = (double)((i * 37) % nx) / (double)nx;
        double *dx = tk_alloc((size_t)nx * sizeof(double));
        if (max)
            tl_k_max_pool2d_grad_ref(&c.pl, x.d, dy.d, dx);
        else
            tl_k_avg_pool2d_grad_ref(&c.pl, dy.d, dx);
        tk_check_grad(pool_fwd, &c, nx, ny, x.d, dy.d, dx, max ? "max_pool2d" : "avg_pool2d");
        free(dx);
        tk_free(&x), tk_free(&dy);
    }
}

/* ---- resize ------------------------------------------------------------------------------ */

static const int64_t resize_cases[][6] = {
    /* n, h, w, c, oh, ow */
    {2, 4, 5, 3, 8, 10}, {2, 8, 10, 3, 4, 5}, {1, 5, 7, 2, 3, 11}, {1, 6, 9, 4, 9, 6},
    {1, 1, 1, 3, 4, 2},  {2, 3, 3, 1, 3, 3},  {1, 7, 3, 2, 2, 1},
};

Test(ops_vision_kernels, resize_matches_twin)
{
    for (size_t i = 0; i < sizeof resize_cases / sizeof resize_cases[0]; i++)
        for (int nearest = 0; nearest < 2; nearest++) {
            const int64_t *r = resize_cases[i];
            tl_k_resize_geom rs = {r[0], r[1], r[2], r[3], r[4], r[5], nearest};
            int64_t nx = r[0] * r[1] * r[2] * r[3], ny = r[0] * r[4] * r[5] * r[3];
            tk_buf x = tk_rand(nx, 11, -1, 1), dy = tk_rand(ny, 12, -1, 1), y = tk_zeros(ny), dx = tk_zeros(nx);
            tl_k_resize2d(&rs, x.f, y.f);
            tl_k_resize2d_ref(&rs, x.d, y.d);
            tl_k_resize2d_grad(&rs, dy.f, dx.f);
            tl_k_resize2d_grad_ref(&rs, dy.d, dx.d);
            char what[96];
            snprintf(what, sizeof what, "resize %s case %zu", nearest ? "nearest" : "bilinear", i);
            tk_assert_close(ny, y.f, y.d, nearest ? 0.0 : 1e-6, nearest ? 0.0 : 1e-6, what);
            tk_assert_close(nx, dx.f, dx.d, 1e-6, 1e-6, what);
            tk_free(&x), tk_free(&dy), tk_free(&y), tk_free(&dx);
        }
}

static void resize_fwd(const double *x, double *y, void *ctx)
{
    tl_k_resize2d_ref(ctx, x, y);
}

Test(ops_vision_kernels, resize_twin_grads_match_finite_differences)
{
    for (size_t i = 0; i < 4; i++)
        for (int nearest = 0; nearest < 2; nearest++) {
            const int64_t *r = resize_cases[i];
            tl_k_resize_geom rs = {r[0], r[1], r[2], r[3], r[4], r[5], nearest};
            int64_t nx = r[0] * r[1] * r[2] * r[3], ny = r[0] * r[4] * r[5] * r[3];
            tk_buf x = tk_rand(nx, 13, -1, 1), dy = tk_rand(ny, 14, -1, 1);
            double *dx = tk_alloc((size_t)nx * sizeof(double));
            tl_k_resize2d_grad_ref(&rs, dy.d, dx);
            tk_check_grad(resize_fwd, &rs, nx, ny, x.d, dy.d, dx, nearest ? "resize nearest" : "resize bilinear");
            free(dx);
            tk_free(&x), tk_free(&dy);
        }
}

/* TF2's rules by hand: nearest floor((i + 0.5)·in/out), bilinear at
 * (i + 0.5)·in/out - 0.5 clamped. */
Test(ops_vision_kernels, resize_worked_examples)
{
    const float four[4] = {1, 2, 3, 4}, two[2] = {10, 20}, ramp[2] = {0, 1};
    float y[4];
    tl_k_resize_geom down = {1, 1, 4, 1, 1, 2, true};
    tl_k_resize2d(&down, four, y);
    cr_assert(y[0] == 2 && y[1] == 4, "nearest 4 -> 2: [%g, %g]", (double)y[0], (double)y[1]);
    tl_k_resize_geom up = {1, 1, 2, 1, 1, 3, true};
    tl_k_resize2d(&up, two, y);
    cr_assert(y[0] == 10 && y[1] == 20 && y[2] == 20, "nearest 2 -> 3: [%g, %g, %g]", (double)y[0], (double)y[1],
              (double)y[2]);
    tl_k_resize_geom lin = {1, 1, 2, 1, 1, 4, false};
    tl_k_resize2d(&lin, ramp, y);
    cr_assert(y[0] == 0 && y[1] == 0.25f && y[2] == 0.75f && y[3] == 1, "bilinear 2 -> 4: [%g, %g, %g, %g]",
              (double)y[0], (double)y[1], (double)y[2], (double)y[3]);
    /* Its gradient: the weights of each output summed per input. */
    const float dy[4] = {1, 1, 1, 1};
    float dx[2];
    tl_k_resize2d_grad(&lin, dy, dx);
    cr_assert(dx[0] == 2 && dx[1] == 2, "[%g, %g]", (double)dx[0], (double)dx[1]);
}

/* ---- the same bits twice -------------------------------------------------------------------- */

Test(ops_vision_kernels, same_bits_twice)
{
    const tk_conv_case cc[] = {
        {{8, 14, 14, 16}, {3, 3, 16, 16}, 1, {1, 1}, {1, 1}, true, "14x14 3x3 16->16"},
        {{8, 14, 14, 16}, {3, 3, 16, 32}, 1, {2, 2}, {1, 1}, true, "3x3 stride 2 16->32"},
        {{8, 14, 14, 16}, {1, 1, 16, 32}, 1, {2, 2}, {1, 1}, true, "1x1 stride 2"},
        {{4, 9, 9, 8}, {3, 3, 1, 16}, 8, {1, 1}, {1, 1}, true, "depthwise"},
    };
    for (size_t i = 0; i < sizeof cc / sizeof cc[0]; i++) {
        tl_k_conv_geom cv;
        cr_assert(tl_k_conv2d_init(&cv, cc[i].x, cc[i].f, cc[i].groups, cc[i].strides, cc[i].dilations, cc[i].same));
        int64_t nx = conv_x_size(&cv), nf = conv_f_size(&cv), ny = conv_y_size(&cv);
        tk_buf x = tk_rand(nx, 15, -1, 1), f = tk_rand(nf, 16, -1, 1), dy = tk_rand(ny, 17, -1, 1);
        float *out[2][3];
        for (int run = 0; run < 2; run++) {
            out[run][0] = tk_alloc((size_t)ny * sizeof(float));
            out[run][1] = tk_alloc((size_t)nx * sizeof(float));
            out[run][2] = tk_alloc((size_t)nf * sizeof(float));
            for (int pass = 0; pass < 3; pass++) {
                int64_t s;
                float *scratch = scratch_for(&cv, (tl_k_conv_pass)pass, &s);
                /* Garbage in the scratch must not matter. */
                for (int64_t k = 0; k < s; k++)
                    scratch[k] = run ? NAN : 1e30f;
                tl_status st = pass == 0   ? tl_k_conv2d(&cv, x.f, f.f, out[run][0], scratch, s)
                               : pass == 1 ? tl_k_conv2d_grad_input(&cv, dy.f, f.f, out[run][1], scratch, s)
                                           : tl_k_conv2d_grad_filter(&cv, x.f, dy.f, out[run][2], scratch, s);
                cr_assert_eq(st, TL_OK, "%s", tl_last_error());
                free(scratch);
            }
        }
        tk_assert_same_bits(ny, out[0][0], out[1][0], cc[i].name);
        tk_assert_same_bits(nx, out[0][1], out[1][1], cc[i].name);
        tk_assert_same_bits(nf, out[0][2], out[1][2], cc[i].name);
        for (int run = 0; run < 2; run++)
            for (int k = 0; k < 3; k++)
                free(out[run][k]);
        tk_free(&x), tk_free(&f), tk_free(&dy);
    }
}

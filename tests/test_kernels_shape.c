/* Kernels: slice and concat along an axis, and DLRM's pairwise dot
 * interaction, against their float64 twins and finite differences. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_kernels_util.h"

#define ASSERT_ERROR(call, frag)                                                                             \
    do {                                                                                                     \
        tl_status st_ = (call);                                                                              \
        cr_assert_eq(st_, TL_EINVAL, "%s: got %s (%s)", #call, tl_err_name(st_), tl_last_error());          \
        cr_assert(strstr(tl_last_error(), (frag)) != NULL, "message \"%s\" lacks \"%s\"", tl_last_error(), \
                  (frag));                                                                                   \
    } while (0)

/* ---- slice and concat ------------------------------------------------------------- */

TestSuite(k_copy, .init = tk_setup);

/* (outer, axis, inner, begin, size) */
static const int64_t windows[][5] = {
    {1, 1, 1, 0, 1}, {3, 7, 1, 2, 4}, {17, 64, 7, 0, 64}, {2, 784, 3, 783, 1}, {4, 5, 6, 5, 0}, {0, 3, 2, 1, 1},
    {1, 128, 784, 10, 100},
};

Test(k_copy, slice_and_grad_match_twins)
{
    for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
        int64_t o = windows[w][0], a = windows[w][1], in = windows[w][2], b = windows[w][3], s = windows[w][4];
        tk_buf x = tk_rand(o * a * in, 1, -1, 1), y = tk_zeros(o * s * in), dy = tk_rand(o * s * in, 2, -1, 1);
        tk_buf dx = tk_rand(o * a * in, 3, -1, 1), acc = tk_rand(o * a * in, 4, -1, 1);
        cr_assert_eq(tl_k_slice(o, a, in, b, s, x.f, y.f), TL_OK);
        cr_assert_eq(tl_k_slice_ref(o, a, in, b, s, x.d, y.d), TL_OK);
        tk_assert_close(o * s * in, y.f, y.d, 0.0, 0.0, "slice");
        cr_assert_eq(tl_k_slice_grad(o, a, in, b, s, dy.f, false, dx.f), TL_OK);
        cr_assert_eq(tl_k_slice_grad_ref(o, a, in, b, s, dy.d, false, dx.d), TL_OK);
        tk_assert_close(o * a * in, dx.f, dx.d, 0.0, 0.0, "slice_grad");
        cr_assert_eq(tl_k_slice_grad(o, a, in, b, s, dy.f, true, acc.f), TL_OK);
        cr_assert_eq(tl_k_slice_grad_ref(o, a, in, b, s, dy.d, true, acc.d), TL_OK);
        tk_assert_close(o * a * in, acc.f, acc.d, 1e-7, 2e-7, "slice_grad accumulate");
        tk_free(&x);
        tk_free(&y);
        tk_free(&dy);
        tk_free(&dx);
        tk_free(&acc);
    }
}

Test(k_copy, concat_and_grad_match_twins)
{
    const int64_t sizes[][4] = {{1, 1, 1, 1}, {3, 0, 7, 64}, {784, 1, 13, 2}};
    const int64_t outers[] = {1, 3, 17}, inners[] = {1, 7, 4};
    for (int si = 0; si < 3; si++)
        for (int oi = 0; oi < 3; oi++) {
            int64_t o = outers[oi], in = inners[(si + oi) % 3], total = 0;
            tk_buf xs[4], dxs[4];
            const float *xf[4];
            const double *xd[4];
            float *dxf[4];
            double *dxd[4];
            for (int j = 0; j < 4; j++) {
                xs[j] = tk_rand(o * sizes[si][j] * in, 10 + (uint64_t)j, -1, 1);
                dxs[j] = tk_zeros(o * sizes[si][j] * in);
                xf[j] = xs[j].f;
                xd[j] = xs[j].d;
                dxf[j] = dxs[j].f;
                dxd[j] = dxs[j].d;
                total += sizes[si][j];
            }
            tk_buf y = tk_zeros(o * total * in), dy = tk_rand(o * total * in, 20, -1, 1);
            cr_assert_eq(tl_k_concat(o, in, 4, sizes[si], xf, y.f), TL_OK);
            cr_assert_eq(tl_k_concat_ref(o, in, 4, sizes[si], xd, y.d), TL_OK);
            tk_assert_close(o * total * in, y.f, y.d, 0.0, 0.0, "concat");
            cr_assert_eq(tl_k_concat_grad(o, in, 4, sizes[si], dy.f, dxf), TL_OK);
            cr_assert_eq(tl_k_concat_grad_ref(o, in, 4, sizes[si], dy.d, dxd), TL_OK);
            for (int j = 0; j < 4; j++) {
                tk_assert_close(o * sizes[si][j] * in, dxs[j].f, dxs[j].d, 0.0, 0.0, "concat_grad");
                tk_free(&xs[j]);
                tk_free(&dxs[j]);
            }
            tk_free(&y);
            tk_free(&dy);
        }
}

/* A worked example: (2, 3) and (2, 1) joined on axis 1, then sliced back. */
Test(k_copy, concat_then_slice_round_trips)
{
    const float a[6] = {1, 2, 3, 4, 5, 6}, b[2] = {7, 8};
    const int64_t sizes[2] = {3, 1};
    float y[8], back[6];
    cr_assert_eq(tl_k_concat(2, 1, 2, sizes, (const float *const[]){a, b}, y), TL_OK);
    const float want[8] = {1, 2, 3, 7, 4, 5, 6, 8};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(y[i], want[i], "y[%d] = %g", i, (double)y[i]);
    cr_assert_eq(tl_k_slice(2, 4, 1, 0, 3, y, back), TL_OK);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(back[i], a[i]);
}

typedef struct slice_ctx {
    int64_t outer, axis, inner, begin, size;
} slice_ctx;

static void slice_fwd(const double *x, double *y, void *ctx)
{
    const slice_ctx *c = ctx;
    cr_assert_eq(tl_k_slice_ref(c->outer, c->axis, c->inner, c->begin, c->size, x, y), TL_OK);
}

typedef struct concat_ctx {
    int64_t outer, inner, sizes[3];
} concat_ctx;

/* x = the three inputs end to end. */
static void concat_fwd(const double *x, double *y, void *ctx)
{
    const concat_ctx *c = ctx;
    const double *parts[3] = {x, x + c->outer * c->sizes[0] * c->inner,
                              x + c->outer * (c->sizes[0] + c->sizes[1]) * c->inner};
    cr_assert_eq(tl_k_concat_ref(c->outer, c->inner, 3, c->sizes, parts, y), TL_OK);
}

Test(k_copy, grads_match_finite_differences)
{
    slice_ctx s = {3, 7, 2, 2, 4};
    int64_t nx = s.outer * s.axis * s.inner, ny = s.outer * s.size * s.inner;
    tk_buf x = tk_rand(nx, 1, -1, 1), dy = tk_rand(ny, 2, -1, 1);
    double *dx = tk_alloc((size_t)nx * sizeof(double));
    cr_assert_eq(tl_k_slice_grad_ref(s.outer, s.axis, s.inner, s.begin, s.size, dy.d, false, dx), TL_OK);
    tk_check_grad(slice_fwd, &s, nx, ny, x.d, dy.d, dx, "slice");
    free(dx);
    tk_free(&x);
    tk_free(&dy);

    concat_ctx c = {2, 3, {1, 4, 2}};
    int64_t n = c.outer * 7 * c.inner;
    tk_buf cx = tk_rand(n, 3, -1, 1), cdy = tk_rand(n, 4, -1, 1);
    double *cdx = tk_alloc((size_t)n * sizeof(double));
    double *parts[3] = {cdx, cdx + c.outer * 1 * c.inner, cdx + c.outer * 5 * c.inner};
    cr_assert_eq(tl_k_concat_grad_ref(c.outer, c.inner, 3, c.sizes, cdy.d, parts), TL_OK);
    tk_check_grad(concat_fwd, &c, n, n, cx.d, cdy.d, cdx, "concat");
    free(cdx);
    tk_free(&cx);
    tk_free(&cdy);
}

Test(k_copy, bad_geometry_is_an_error_and_writes_nothing)
{
    const float x[12] = {0};
    float y[12];
    for (int i = 0; i < 12; i++)
        y[i] = 7;
    ASSERT_ERROR(tl_k_slice(2, 3, 2, 2, 2, x, y), "slice: begin 2 and size 2 must select a window inside [0, 3)");
    ASSERT_ERROR(tl_k_slice(2, 3, 2, -1, 1, x, y), "begin -1");
    ASSERT_ERROR(tl_k_slice(2, 3, 2, 0, -1, x, y), "size -1");
    ASSERT_ERROR(tl_k_slice(-2, 3, 2, 0, 1, x, y), "got (-2, 3, 2)");
    ASSERT_ERROR(tl_k_slice_grad(2, 3, 2, 1, 3, x, false, y), "slice_grad: begin 1 and size 3");
    ASSERT_ERROR(tl_k_slice(1, INT64_MAX, 1, INT64_MAX, INT64_MAX, x, y), "must select a window");
    const int64_t bad[2] = {2, -1};
    ASSERT_ERROR(tl_k_concat(2, 1, 2, bad, (const float *const[]){x, x}, y), "concat: sizes[1] must be >= 0, got -1");
    ASSERT_ERROR(tl_k_concat(2, 1, -1, bad, NULL, y), "count must be >= 0, got -1");
    ASSERT_ERROR(tl_k_concat_grad(2, -4, 0, bad, x, NULL), "concat_grad: outer and inner must be >= 0");
    for (int i = 0; i < 12; i++)
        cr_assert_eq(y[i], 7.0f, "y[%d] was written", i);
}

/* ---- pairwise dot ---------------------------------------------------------------------- */

TestSuite(k_interaction, .init = tk_setup);

/* (batch, f, d): DLRM's 27 features of 16 and 64, odd sizes, and f = 1. */
static const int64_t interactions[][3] = {
    {1, 1, 1}, {3, 2, 7}, {17, 27, 16}, {4, 27, 64}, {2, 5, 1}, {1, 9, 13}, {128, 8, 128},
};

/* |z - z_ref| within 1e-5 of the sum of |products|, as GEMM. */
static void check_dots(bool tril, int64_t batch, int64_t f, int64_t d)
{
    int64_t nz = tril ? batch * f * (f - 1) / 2 : batch * f * f;
    tk_buf t = tk_rand(batch * f * d, 1, -1, 1), z = tk_zeros(nz), dz = tk_rand(nz, 2, -1, 1);
    tk_buf dt = tk_zeros(batch * f * d);
    double *bound = tk_alloc((size_t)(nz > 0 ? nz : 1) * sizeof(double));
    double *abs_t = tk_alloc((size_t)(batch * f * d) * sizeof(double));
    for (int64_t i = 0; i < batch * f * d; i++)
        abs_t[i] = fabs(t.d[i]);
    (tril ? tl_k_pairwise_dot_tril : tl_k_pairwise_dot)(batch, f, d, t.f, z.f);
    (tril ? tl_k_pairwise_dot_tril_ref : tl_k_pairwise_dot_ref)(batch, f, d, t.d, z.d);
    (tril ? tl_k_pairwise_dot_tril_ref : tl_k_pairwise_dot_ref)(batch, f, d, abs_t, bound);
    for (int64_t i = 0; i < nz; i++)
        bound[i] += 1e-30;
    tk_assert_bounded(nz, z.f, z.d, bound, 1e-5, tril ? "pairwise_dot_tril" : "pairwise_dot");
    (tril ? tl_k_pairwise_dot_tril_grad : tl_k_pairwise_dot_grad)(batch, f, d, t.f, dz.f, dt.f);
    (tril ? tl_k_pairwise_dot_tril_grad_ref : tl_k_pairwise_dot_grad_ref)(batch, f, d, t.d, dz.d, dt.d);
    /* Each of the (at most 2f) terms is below 1 in magnitude. */
    double *gbound = tk_alloc((size_t)(batch * f * d) * sizeof(double));
    for (int64_t i = 0; i < batch * f * d; i++)
        gbound[i] = 2.0 * (double)f + 1e-30;
    tk_assert_bounded(batch * f * d, dt.f, dt.d, gbound, 1e-6, tril ? "pairwise_dot_tril_grad" : "pairwise_dot_grad");
    free(bound);
    free(abs_t);
    free(gbound);
    tk_free(&t);
    tk_free(&z);
    tk_free(&dz);
    tk_free(&dt);
}

Test(k_interaction, matches_twins)
{
    for (size_t s = 0; s < sizeof interactions / sizeof interactions[0]; s++) {
        check_dots(false, interactions[s][0], interactions[s][1], interactions[s][2]);
        check_dots(true, interactions[s][0], interactions[s][1], interactions[s][2]);
    }
}

/* DLRM's order: (1,0), (2,0), (2,1); and the full matrix is exactly symmetric. */
Test(k_interaction, triangle_order_and_symmetry)
{
    const float t[3] = {1, 2, 3}; /* batch 1, f 3, d 1 */
    float tri[3], full[9];
    tl_k_pairwise_dot_tril(1, 3, 1, t, tri);
    cr_assert_eq(tri[0], 2.0f);
    cr_assert_eq(tri[1], 3.0f);
    cr_assert_eq(tri[2], 6.0f);
    tl_k_pairwise_dot(1, 3, 1, t, full);
    const float want[9] = {1, 2, 3, 2, 4, 6, 3, 6, 9};
    for (int i = 0; i < 9; i++)
        cr_assert_eq(full[i], want[i]);
    tk_buf r = tk_rand(2 * 27 * 19, 5, -1, 1), z = tk_zeros(2 * 27 * 27);
    tl_k_pairwise_dot(2, 27, 19, r.f, z.f);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 27; i++)
            for (int j = 0; j < 27; j++)
                cr_assert(memcmp(&z.f[(b * 27 + i) * 27 + j], &z.f[(b * 27 + j) * 27 + i], sizeof(float)) == 0);
    tk_free(&r);
    tk_free(&z);
}

typedef struct dot_ctx {
    int64_t batch, f, d;
    bool tril;
} dot_ctx;

static void dot_fwd(const double *x, double *y, void *ctx)
{
    const dot_ctx *c = ctx;
    (c->tril ? tl_k_pairwise_dot_tril_ref : tl_k_pairwise_dot_ref)(c->batch, c->f, c->d, x, y);
}

Test(k_interaction, grads_match_finite_differences)
{
    const int64_t shapes[][3] = {{1, 1, 1}, {2, 4, 3}, {1, 5, 7}, {3, 2, 1}};
    for (int s = 0; s < 4; s++)
        for (int tril = 0; tril < 2; tril++) {
            dot_ctx c = {shapes[s][0], shapes[s][1], shapes[s][2], tril};
            int64_t nx = c.batch * c.f * c.d;
            int64_t ny = tril ? c.batch * c.f * (c.f - 1) / 2 : c.batch * c.f * c.f;
            tk_buf x = tk_rand(nx, 1, -1, 1), dy = tk_rand(ny, 2, -1, 1);
            double *dx = tk_alloc((size_t)nx * sizeof(double));
            (tril ? tl_k_pairwise_dot_tril_grad_ref : tl_k_pairwise_dot_grad_ref)(c.batch, c.f, c.d, x.d, dy.d, dx);
            tk_check_grad(dot_fwd, &c, nx, ny, x.d, dy.d, dx, tril ? "pairwise_dot_tril" : "pairwise_dot");
            free(dx);
            tk_free(&x);
            tk_free(&dy);
        }
}

Test(k_interaction, same_inputs_same_bits)
{
    const int64_t batch = 16, f = 27, d = 64, nz = batch * f * (f - 1) / 2;
    tk_buf t = tk_rand(batch * f * d, 1, -1, 1), z1 = tk_zeros(nz), z2 = tk_zeros(nz), dz = tk_rand(nz, 2, -1, 1);
    tk_buf g1 = tk_zeros(batch * f * d), g2 = tk_zeros(batch * f * d);
    tl_k_pairwise_dot_tril(batch, f, d, t.f, z1.f);
    tl_k_pairwise_dot_tril(batch, f, d, t.f, z2.f);
    tk_assert_same_bits(nz, z1.f, z2.f, "interaction twice");
    tl_k_pairwise_dot_tril_grad(batch, f, d, t.f, dz.f, g1.f);
    tl_k_pairwise_dot_tril_grad(batch, f, d, t.f, dz.f, g2.f);
    tk_assert_same_bits(batch * f * d, g1.f, g2.f, "interaction gradient twice");
    tk_free(&t);
    tk_free(&z1);
    tk_free(&z2);
    tk_free(&dz);
    tk_free(&g1);
    tk_free(&g2);
}

/* The stack given as its parts (widths d, 0, 3d, d and 22d: DLRM's 27
 * vectors with an empty part): the bits of the built stack, the gradient
 * written into each part, and a part whose dx is NULL left alone; at d = 64
 * an example's vectors are copied side by side first, at d = 160 they are
 * too many (27 x 160 floats) and are read in place. */
static void parts_case(int64_t d)
{
    const int64_t batch = 5, f = 27, nz = batch * f * (f - 1) / 2;
    const int64_t width[5] = {d, 0, 3 * d, d, 22 * d};
    tk_buf t = tk_rand(batch * f * d, 1, -1, 1), dz = tk_rand(nz, 2, -1, 1);
    tk_buf z1 = tk_zeros(nz), z2 = tk_zeros(nz), g1 = tk_zeros(batch * f * d);
    float *part[5], *grad[5];
    for (int k = 0; k < 5; k++) {
        part[k] = tk_alloc((size_t)(batch * width[k] + 1) * sizeof(float));
        grad[k] = tk_alloc((size_t)(batch * width[k] + 1) * sizeof(float));
    }
    /* Row b of the stack is the parts' rows b side by side. */
    for (int64_t b = 0, o; b < batch; b++) {
        o = 0;
        for (int k = 0; k < 5; o += width[k], k++)
            memcpy(part[k] + b * width[k], t.f + b * f * d + o, (size_t)width[k] * sizeof(float));
    }
    tl_k_pairwise_dot_tril(batch, f, d, t.f, z1.f);
    tl_k_pairwise_dot_tril_parts(batch, f, d, 5, (const float *const *)part, width, z2.f);
    tk_assert_same_bits(nz, z1.f, z2.f, "the interaction of the parts");
    tl_k_pairwise_dot_tril_grad(batch, f, d, t.f, dz.f, g1.f);
    for (int64_t i = 0; i < batch * width[2]; i++)
        grad[2][i] = 7.0f;
    float *dx[5] = {grad[0], grad[1], NULL, grad[3], grad[4]};
    tl_k_pairwise_dot_tril_parts_grad(batch, f, d, 5, (const float *const *)part, width, dz.f, dx);
    for (int64_t b = 0, o; b < batch; b++) {
        o = 0;
        for (int k = 0; k < 5; o += width[k], k++)
            if (k != 2)
                tk_assert_same_bits(width[k], g1.f + b * f * d + o, grad[k] + b * width[k], "a part's gradient");
    }
    for (int64_t i = 0; i < batch * width[2]; i++)
        cr_assert_eq(grad[2][i], 7.0f, "a part without a gradient is not written");
    for (int k = 0; k < 5; k++) {
        free(part[k]);
        free(grad[k]);
    }
    tk_free(&t);
    tk_free(&dz);
    tk_free(&z1);
    tk_free(&z2);
    tk_free(&g1);
}

Test(k_interaction, parts_give_the_bits_of_the_stack)
{
    parts_case(64);
    parts_case(160);
}

/* The documented sums, written out in float: each dot product's partials
 * (component c into partial c mod TL_K_LANES) added from 0 in order, and
 * each gradient component from 0 over j in increasing order. The kernels
 * must give exactly these bits, at d of 64, 16 and the rest of each. */
Test(k_interaction, triangle_sums_in_the_documented_order)
{
    /* The forward's three ways: the first six in a tile of vector pairs
     * (padded to multiples of 8 vectors and of 8 components, at most 4,096
     * floats); 27 x 130 copied side by side (3,510 floats, 32 x 136 padded);
     * the last two, more than 4,096 floats an example, read in place. The
     * backward takes columns in 16s four vectors at a time at d = 16 (7
     * vectors: four, then three one by one) and d = 100 (the 16s past 64). */
    const int64_t shapes[][3] = {{3, 27, 64}, {2, 9, 100}, {2, 7, 16}, {3, 5, 13}, {2, 4, 3},
                                 {1, 30, 72}, {2, 27, 130}, {2, 33, 130}, {1, 70, 64}};
    for (int s = 0; s < 9; s++) {
        int64_t batch = shapes[s][0], f = shapes[s][1], d = shapes[s][2], pairs = f * (f - 1) / 2;
        tk_buf t = tk_rand(batch * f * d, 3, -1, 1), dz = tk_rand(batch * pairs, 4, -1, 1);
        tk_buf z = tk_zeros(batch * pairs), dt = tk_zeros(batch * f * d);
        float *want_z = tk_alloc((size_t)(batch * pairs) * sizeof(float));
        float *want_dt = tk_alloc((size_t)(batch * f * d) * sizeof(float));
        for (int64_t b = 0, p = 0; b < batch; b++)
            for (int64_t i = 1; i < f; i++)
                for (int64_t j = 0; j < i; j++, p++) {
                    float part[TL_K_LANES] = {0}, sum = 0.0f;
                    for (int64_t c = 0; c < d; c++)
                        part[c % TL_K_LANES] += t.f[(b * f + i) * d + c] * t.f[(b * f + j) * d + c];
                    for (int l = 0; l < TL_K_LANES; l++)
                        sum += part[l];
                    want_z[p] = sum;
                }
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < f; i++)
                for (int64_t c = 0; c < d; c++) {
                    float acc = 0.0f;
                    for (int64_t j = 0; j < f; j++)
                        if (j != i)
                            acc += dz.f[b * pairs + (j < i ? i * (i - 1) / 2 + j : j * (j - 1) / 2 + i)] *
                                   t.f[(b * f + j) * d + c];
                    want_dt[(b * f + i) * d + c] = acc;
                }
        tl_k_pairwise_dot_tril(batch, f, d, t.f, z.f);
        tl_k_pairwise_dot_tril_grad(batch, f, d, t.f, dz.f, dt.f);
        tk_assert_same_bits(batch * pairs, z.f, want_z, "the dots, in the documented order");
        tk_assert_same_bits(batch * f * d, dt.f, want_dt, "the gradient, in the documented order");
        free(want_z);
        free(want_dt);
        tk_free(&t);
        tk_free(&dz);
        tk_free(&z);
        tk_free(&dt);
    }
}

/* The reduce family's kernels (src/kernels/reduce_axes.h, reduce_losses.h): each float32
 * kernel against its float64 twin, each backward twin against central
 * finite differences of its forward twin, the summation orders against the
 * existing tl_k_sum / tl_k_sum_axis bit for bit, and worked examples: tied
 * maxima, large logits, label smoothing, TF's in_top_k example. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/reduce_axes.h"
#include "kernels/reduce_losses.h"
#include "test_kernels_util.h"

#define ASSERT_ERROR(call, frag)                                                                             \
    do {                                                                                                     \
        tl_status st_ = (call);                                                                              \
        cr_assert_eq(st_, TL_EINVAL, "%s: got %s (%s)", #call, tl_err_name(st_), tl_last_error());          \
        cr_assert(strstr(tl_last_error(), (frag)) != NULL, "message \"%s\" lacks \"%s\"", tl_last_error(), \
                  (frag));                                                                                   \
    } while (0)

TestSuite(ops_reduce_kernels, .init = tk_setup);

/* ---- reductions over axes ---------------------------------------------------------- */

typedef struct axes_case {
    int rank;
    int64_t shape[TL_K_AXES_MAX_RANK];
    uint32_t axes;
} axes_case;

/* Contiguous and non-contiguous axis sets, size-1 axes, every axis and none,
 * rank 0 to 5, and inner runs longer than the kernels' 256-wide chunks. */
static const axes_case cases[] = {
    {0, {0}, 0x0},
    {1, {7}, 0x1},
    {1, {19}, 0x0},
    {2, {5, 9}, 0x1},
    {2, {5, 9}, 0x2},
    {2, {5, 9}, 0x3},
    {3, {3, 4, 5}, 0x2},
    {3, {3, 4, 5}, 0x5},
    {3, {3, 4, 5}, 0x0},
    {3, {3, 1, 5}, 0x2},
    {4, {2, 3, 4, 5}, 0x5},   /* {0, 2} */
    {4, {2, 3, 4, 5}, 0xa},   /* {1, 3} */
    {4, {2, 3, 4, 5}, 0x6},   /* {1, 2}: contiguous */
    {4, {2, 3, 4, 5}, 0xf},
    {4, {3, 1, 4, 1}, 0x6},   /* size-1 axes reduced and kept */
    {4, {1, 6, 1, 5}, 0x5},   /* only size-1 axes reduced */
    {5, {2, 3, 2, 3, 2}, 0x15},
    {5, {2, 3, 2, 3, 2}, 0x0a},
    {3, {3, 2, 300}, 0x2},    /* inner 300 > 256 */
    {2, {600, 3}, 0x2},
    {3, {2, 530, 3}, 0x5},
};

static int64_t case_size(const axes_case *c, bool kept)
{
    int64_t n = 1;
    for (int d = 0; d < c->rank; d++)
        if (((c->axes >> d) & 1u) != kept)
            n *= c->shape[d];
    return n;
}

typedef struct reduce_ctx {
    const axes_case *c;
    void (*fwd)(int, const int64_t *, uint32_t, const double *restrict, double *restrict);
} reduce_ctx;

static void reduce_fwd(const double *x, double *y, void *ctx)
{
    const reduce_ctx *r = ctx;
    r->fwd(r->c->rank, r->c->shape, r->c->axes, x, y);
}

Test(ops_reduce_kernels, reductions_match_twins)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const axes_case *c = &cases[k];
        int64_t nout = case_size(c, true), n = nout * case_size(c, false);
        tk_buf x = tk_rand(n, 1 + k, -1, 1), y = tk_zeros(nout), dy = tk_rand(nout, 50 + k, -1, 1);
        tk_buf dx = tk_zeros(n), ax = tk_zeros(n), bound = tk_zeros(nout);
        for (int64_t i = 0; i < n; i++)
            ax.d[i] = fabs(x.d[i]);
        tl_k_reduce_sum_axes_ref(c->rank, c->shape, c->axes, ax.d, bound.d);
        for (int64_t o = 0; o < nout; o++)
            bound.d[o] += 1e-30;

        tl_k_reduce_sum_axes(c->rank, c->shape, c->axes, x.f, y.f);
        tl_k_reduce_sum_axes_ref(c->rank, c->shape, c->axes, x.d, y.d);
        tk_assert_bounded(nout, y.f, y.d, bound.d, 1e-7, "reduce_sum");
        tl_k_reduce_mean_axes(c->rank, c->shape, c->axes, x.f, y.f);
        tl_k_reduce_mean_axes_ref(c->rank, c->shape, c->axes, x.d, y.d);
        for (int64_t o = 0; o < nout; o++)
            bound.d[o] /= (double)case_size(c, false);
        tk_assert_bounded(nout, y.f, y.d, bound.d, 1e-7, "reduce_mean");
        tl_k_reduce_max_axes(c->rank, c->shape, c->axes, x.f, y.f);
        tl_k_reduce_max_axes_ref(c->rank, c->shape, c->axes, x.d, y.d);
        tk_assert_close(nout, y.f, y.d, 0, 0, "reduce_max");
        tl_k_reduce_extreme_axes_grad(c->rank, c->shape, c->axes, x.f, y.f, dy.f, dx.f);
        tl_k_reduce_extreme_axes_grad_ref(c->rank, c->shape, c->axes, x.d, y.d, dy.d, dx.d);
        tk_assert_close(n, dx.f, dx.d, 1e-7, 0, "reduce_max grad");
        tl_k_reduce_min_axes(c->rank, c->shape, c->axes, x.f, y.f);
        tl_k_reduce_min_axes_ref(c->rank, c->shape, c->axes, x.d, y.d);
        tk_assert_close(nout, y.f, y.d, 0, 0, "reduce_min");
        tl_k_reduce_extreme_axes_grad(c->rank, c->shape, c->axes, x.f, y.f, dy.f, dx.f);
        tl_k_reduce_extreme_axes_grad_ref(c->rank, c->shape, c->axes, x.d, y.d, dy.d, dx.d);
        tk_assert_close(n, dx.f, dx.d, 1e-7, 0, "reduce_min grad");
        tl_k_logsumexp_axes(c->rank, c->shape, c->axes, x.f, y.f);
        tl_k_logsumexp_axes_ref(c->rank, c->shape, c->axes, x.d, y.d);
        tk_assert_close(nout, y.f, y.d, 1e-6, 1e-6, "logsumexp");
        tl_k_logsumexp_axes_grad(c->rank, c->shape, c->axes, x.f, dy.f, dx.f);
        tl_k_logsumexp_axes_grad_ref(c->rank, c->shape, c->axes, x.d, y.d, dy.d, dx.d);
        tk_assert_close(n, dx.f, dx.d, 1e-5, 1e-7, "logsumexp grad");
        tl_k_reduce_sum_axes_grad(c->rank, c->shape, c->axes, dy.f, dx.f);
        tl_k_reduce_sum_axes_grad_ref(c->rank, c->shape, c->axes, dy.d, dx.d);
        tk_assert_close(n, dx.f, dx.d, 0, 0, "reduce_sum grad");
        tl_k_reduce_mean_axes_grad(c->rank, c->shape, c->axes, dy.f, dx.f);
        tl_k_reduce_mean_axes_grad_ref(c->rank, c->shape, c->axes, dy.d, dx.d);
        tk_assert_close(n, dx.f, dx.d, 1e-7, 0, "reduce_mean grad");
        tk_free(&x);
        tk_free(&y);
        tk_free(&dy);
        tk_free(&dx);
        tk_free(&ax);
        tk_free(&bound);
    }
}

/* Every backward twin against finite differences of its forward twin, on
 * the cases small enough to difference. */
Test(ops_reduce_kernels, reduction_grads_match_finite_differences)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const axes_case *c = &cases[k];
        int64_t nout = case_size(c, true), n = nout * case_size(c, false);
        if (n > 400)
            continue;
        tk_buf x = tk_rand(n, 100 + k, -2, 2), y = tk_zeros(nout), dy = tk_rand(nout, 200 + k, -1, 1);
        tk_buf dx = tk_zeros(n);
        reduce_ctx r = {c, tl_k_reduce_sum_axes_ref};
        tl_k_reduce_sum_axes_grad_ref(c->rank, c->shape, c->axes, dy.d, dx.d);
        tk_check_grad(reduce_fwd, &r, n, nout, x.d, dy.d, dx.d, "reduce_sum");
        r.fwd = tl_k_reduce_mean_axes_ref;
        tl_k_reduce_mean_axes_grad_ref(c->rank, c->shape, c->axes, dy.d, dx.d);
        tk_check_grad(reduce_fwd, &r, n, nout, x.d, dy.d, dx.d, "reduce_mean");
        r.fwd = tl_k_reduce_max_axes_ref;
        tl_k_reduce_max_axes_ref(c->rank, c->shape, c->axes, x.d, y.d);
        tl_k_reduce_extreme_axes_grad_ref(c->rank, c->shape, c->axes, x.d, y.d, dy.d, dx.d);
        tk_check_grad(reduce_fwd, &r, n, nout, x.d, dy.d, dx.d, "reduce_max");
        r.fwd = tl_k_reduce_min_axes_ref;
        tl_k_reduce_min_axes_ref(c->rank, c->shape, c->axes, x.d, y.d);
        tl_k_reduce_extreme_axes_grad_ref(c->rank, c->shape, c->axes, x.d, y.d, dy.d, dx.d);
        tk_check_grad(reduce_fwd, &r, n, nout, x.d, dy.d, dx.d, "reduce_min");
        r.fwd = tl_k_logsumexp_axes_ref;
        tl_k_logsumexp_axes_ref(c->rank, c->shape, c->axes, x.d, y.d);
        tl_k_logsumexp_axes_grad_ref(c->rank, c->shape, c->axes, x.d, y.d, dy.d, dx.d);
        tk_check_grad(reduce_fwd, &r, n, nout, x.d, dy.d, dx.d, "logsumexp");
        tk_free(&x);
        tk_free(&y);
        tk_free(&dy);
        tk_free(&dx);
    }
}

/* Contiguous reduced axes are tl_k_sum_axis' blocks, all axes tl_k_sum: the
 * same bits, forward and backward, size-1 axes or not. */
Test(ops_reduce_kernels, sum_order_is_the_existing_kernels)
{
    /* (rank, shape, axes) and the (outer, axis, inner) it must equal */
    const struct {
        axes_case c;
        int64_t outer, axis, inner;
    } same[] = {
        {{3, {5, 37, 3}, 0x2}, 5, 37, 3},     {{2, {5, 37}, 0x2}, 5, 37, 1},
        {{4, {4, 3, 5, 2}, 0x6}, 4, 15, 2},   {{3, {5, 1, 37}, 0x6}, 5, 37, 1},
        {{3, {2, 3, 700}, 0x3}, 1, 6, 700},   {{4, {2, 1, 3, 4}, 0xf}, 1, 24, 1},
        {{2, {1000, 3}, 0x1}, 1, 1000, 3},    {{1, {1001}, 0x1}, 1, 1001, 1},
    };
    for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
        const axes_case *c = &same[k].c;
        int64_t o = same[k].outer, a = same[k].axis, in = same[k].inner, n = o * a * in;
        tk_buf x = tk_rand(n, 300 + k, -1, 1), y = tk_zeros(o * in), want = tk_zeros(o * in);
        tk_buf dy = tk_rand(o * in, 400 + k, -1, 1), dx = tk_zeros(n), dwant = tk_zeros(n);
        tl_k_reduce_sum_axes(c->rank, c->shape, c->axes, x.f, y.f);
        tl_k_sum_axis(o, a, in, x.f, want.f);
        tk_assert_same_bits(o * in, y.f, want.f, "reduce_sum vs tl_k_sum_axis");
        tl_k_reduce_mean_axes(c->rank, c->shape, c->axes, x.f, y.f);
        tl_k_mean_axis(o, a, in, x.f, want.f);
        tk_assert_same_bits(o * in, y.f, want.f, "reduce_mean vs tl_k_mean_axis");
        tl_k_reduce_sum_axes_grad(c->rank, c->shape, c->axes, dy.f, dx.f);
        tl_k_sum_axis_grad(o, a, in, dy.f, dwant.f);
        tk_assert_same_bits(n, dx.f, dwant.f, "reduce_sum grad vs tl_k_sum_axis_grad");
        tl_k_reduce_mean_axes_grad(c->rank, c->shape, c->axes, dy.f, dx.f);
        tl_k_mean_axis_grad(o, a, in, dy.f, dwant.f);
        tk_assert_same_bits(n, dx.f, dwant.f, "reduce_mean grad vs tl_k_mean_axis_grad");
        if (o * in == 1) {
            tl_k_sum(n, x.f, want.f);
            tl_k_reduce_sum_axes(c->rank, c->shape, c->axes, x.f, y.f);
            tk_assert_same_bits(1, y.f, want.f, "reduce_sum of every axis vs tl_k_sum");
        }
        tk_free(&x);
        tk_free(&y);
        tk_free(&want);
        tk_free(&dy);
        tk_free(&dx);
        tk_free(&dwant);
    }
}

/* TF's _MaxGrad: tied maxima share the gradient equally, on a contiguous
 * axis and on the non-contiguous axes {0, 2}. */
Test(ops_reduce_kernels, tied_maxima_share_the_gradient)
{
    const int64_t s2[2] = {2, 4};
    const float x[8] = {1, 3, 3, 2, 5, 5, 5, 5}, dy[2] = {1, 2};
    float y[2], dx[8];
    tl_k_reduce_max_axes(2, s2, 0x2, x, y);
    cr_assert(y[0] == 3 && y[1] == 5);
    tl_k_reduce_extreme_axes_grad(2, s2, 0x2, x, y, dy, dx);
    const float want[8] = {0, 0.5f, 0.5f, 0, 0.5f, 0.5f, 0.5f, 0.5f};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(dx[i], want[i], "max: dx[%d] = %g, want %g", i, (double)dx[i], (double)want[i]);
    tl_k_reduce_min_axes(2, s2, 0x2, x, y);
    cr_assert(y[0] == 1 && y[1] == 5);
    tl_k_reduce_extreme_axes_grad(2, s2, 0x2, x, y, dy, dx);
    const float wmin[8] = {1, 0, 0, 0, 0.5f, 0.5f, 0.5f, 0.5f};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(dx[i], wmin[i], "min: dx[%d] = %g, want %g", i, (double)dx[i], (double)wmin[i]);

    /* x (2, 2, 3) reduced over {0, 2} to (2,): output j takes x[:, j, :]. */
    const int64_t s3[3] = {2, 2, 3};
    const float x3[12] = {4, 1, 4, 0, 0, 0, 2, 4, 3, 0, 0, 1};
    const float dy3[2] = {3, 6};
    float y3[2], dx3[12];
    double x3d[12], y3d[2], dy3d[2] = {3, 6}, dx3d[12];
    tl_k_reduce_max_axes(3, s3, 0x5, x3, y3);
    cr_assert(y3[0] == 4 && y3[1] == 1, "y = (%g, %g)", (double)y3[0], (double)y3[1]);
    tl_k_reduce_extreme_axes_grad(3, s3, 0x5, x3, y3, dy3, dx3);
    const float w3[12] = {1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 6};
    for (int i = 0; i < 12; i++) {
        cr_assert_eq(dx3[i], w3[i], "{0, 2}: dx[%d] = %g, want %g", i, (double)dx3[i], (double)w3[i]);
        x3d[i] = x3[i];
    }
    tl_k_reduce_max_axes_ref(3, s3, 0x5, x3d, y3d);
    tl_k_reduce_extreme_axes_grad_ref(3, s3, 0x5, x3d, y3d, dy3d, dx3d);
    tk_assert_close(12, dx3, dx3d, 0, 0, "{0, 2} twin");
}

/* NaN propagates through max and min; the gradient of a NaN output is NaN
 * everywhere in its reduction (0 / 0, as TF); empty reductions give the
 * identities. */
Test(ops_reduce_kernels, nan_and_empty_reductions)
{
    const int64_t s[2] = {2, 3};
    const float x[6] = {1, NAN, 7, -1, -2, -3}, dy[2] = {1, 1};
    float y[2], dx[6];
    tl_k_reduce_max_axes(2, s, 0x2, x, y);
    cr_assert(isnan(y[0]) && y[1] == -1);
    tl_k_reduce_min_axes(2, s, 0x2, x, y);
    cr_assert(isnan(y[0]) && y[1] == -3);
    tl_k_reduce_extreme_axes_grad(2, s, 0x2, x, y, dy, dx);
    for (int i = 0; i < 3; i++)
        cr_assert(isnan(dx[i]), "dx[%d] = %g", i, (double)dx[i]);
    cr_assert(dx[3] == 0 && dx[4] == 0 && dx[5] == 1);
    /* The NaN in the other order and on the strided path. */
    const float xt[6] = {NAN, 1, 2, 3, 4, 5};
    float yt[3];
    tl_k_reduce_max_axes(2, s, 0x1, xt, yt);
    cr_assert(isnan(yt[0]) && yt[1] == 4 && yt[2] == 5);

    const int64_t empty[2] = {3, 0};
    float z[3];
    tl_k_reduce_sum_axes(2, empty, 0x2, NULL, z);
    cr_assert(z[0] == 0 && z[2] == 0);
    tl_k_reduce_mean_axes(2, empty, 0x2, NULL, z);
    cr_assert(isnan(z[1]));
    tl_k_reduce_max_axes(2, empty, 0x2, NULL, z);
    cr_assert(isinf(z[0]) && z[0] < 0);
    tl_k_reduce_min_axes(2, empty, 0x2, NULL, z);
    cr_assert(isinf(z[0]) && z[0] > 0);
    tl_k_logsumexp_axes(2, empty, 0x2, NULL, z);
    cr_assert(isinf(z[0]) && z[0] < 0);
}

/* tf.reduce_logsumexp: log 4 from (0, log 3); 1e4 + log 2 from two 1e4; the
 * non-finite shift is 0, so +inf gives +inf and -inf rows give -inf. */
Test(ops_reduce_kernels, logsumexp_values)
{
    const int64_t s[2] = {4, 2};
    const float x[8] = {0, (float)log(3.0), 1e4f, 1e4f, INFINITY, 1, -INFINITY, -INFINITY};
    float y[4];
    tl_k_logsumexp_axes(2, s, 0x2, x, y);
    cr_assert(fabs(y[0] - 1.3862943611198906) < 1e-6, "%.9g", (double)y[0]);
    cr_assert(y[1] == 10000.69314718056f || fabs(y[1] - 10000.69314718056) < 1e-3, "%.9g", (double)y[1]);
    cr_assert(isinf(y[2]) && y[2] > 0, "%g", (double)y[2]);
    cr_assert(isinf(y[3]) && y[3] < 0, "%g", (double)y[3]);
    const float dy[4] = {1, 1, 1, 1};
    float dx[8];
    tl_k_logsumexp_axes_grad(2, s, 0x2, x, dy, dx);
    cr_assert(fabs(dx[0] - 0.25) < 1e-7 && fabs(dx[1] - 0.75) < 1e-7, "%g %g", (double)dx[0], (double)dx[1]);
    cr_assert(dx[2] == 0.5f && dx[3] == 0.5f, "%g %g", (double)dx[2], (double)dx[3]);
}

/* ---- arg max / arg min ------------------------------------------------------------- */

Test(ops_reduce_kernels, argmax_argmin_match_twins)
{
    const int64_t geoms[][3] = {{1, 1, 1}, {4, 7, 1}, {3, 5, 6}, {1, 9, 300}, {2, 1, 5}, {7, 64, 3}};
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
        int64_t o = geoms[k][0], a = geoms[k][1], in = geoms[k][2];
        tk_buf x = tk_rand(o * a * in, 500 + k, -1, 1);
        /* Ties: every third element rounded to a coarse grid. */
        for (int64_t i = 0; i < o * a * in; i += 3) {
            x.f[i] = roundf(x.f[i] * 2) / 2;
            x.d[i] = x.f[i];
        }
        int64_t *want = tk_alloc((size_t)(o * in) * sizeof *want), *got64 = tk_alloc((size_t)(o * in) * sizeof *got64);
        int32_t *got32 = tk_alloc((size_t)(o * in) * sizeof *got32);
        for (int min = 0; min < 2; min++) {
            cr_assert_eq((min ? tl_k_argmin_ref : tl_k_argmax_ref)(o, a, in, x.d, want), TL_OK);
            cr_assert_eq((min ? tl_k_argmin : tl_k_argmax)(o, a, in, x.f, true, got64), TL_OK);
            cr_assert_eq((min ? tl_k_argmin : tl_k_argmax)(o, a, in, x.f, false, got32), TL_OK);
            for (int64_t j = 0; j < o * in; j++) {
                cr_assert_eq(got64[j], want[j], "%s (%lld, %lld, %lld) [%lld]", min ? "argmin" : "argmax",
                             (long long)o, (long long)a, (long long)in, (long long)j);
                cr_assert_eq(got32[j], (int32_t)want[j]);
                /* The index's value is the extreme, and no earlier index holds it. */
                int64_t oo = j / in, ii = j % in;
                double v = x.d[(oo * a + want[j]) * in + ii];
                for (int64_t q = 0; q < a; q++) {
                    double u = x.d[(oo * a + q) * in + ii];
                    cr_assert(min ? u >= v : u <= v);
                    cr_assert(q >= want[j] || u != v, "a tie before the returned index");
                }
            }
        }
        free(want);
        free(got64);
        free(got32);
        tk_free(&x);
    }
}

Test(ops_reduce_kernels, argmax_ties_nan_and_empty_axis)
{
    const float x[4] = {1, 3, 3, 0}, xn[4] = {1, NAN, 5, NAN};
    int64_t i64;
    int32_t i32;
    cr_assert_eq(tl_k_argmax(1, 4, 1, x, true, &i64), TL_OK);
    cr_assert_eq(i64, 1, "the first of the tied maxima");
    cr_assert_eq(tl_k_argmin(1, 3, 1, x + 1, false, &i32), TL_OK);
    cr_assert_eq(i32, 2);
    cr_assert_eq(tl_k_argmax(1, 4, 1, xn, false, &i32), TL_OK);
    cr_assert_eq(i32, 1, "the first NaN");
    cr_assert_eq(tl_k_argmin(1, 4, 1, xn, false, &i32), TL_OK);
    cr_assert_eq(i32, 1, "the first NaN");
    i32 = -7;
    ASSERT_ERROR(tl_k_argmax(2, 0, 3, x, false, &i32), "argmax: the reduced axis is empty in (2, 0, 3)");
    cr_assert_eq(i32, -7);
}

/* ---- softmax and log-softmax --------------------------------------------------------- */

typedef struct softmax_ctx {
    int64_t outer, axis, inner;
    bool log_form;
} softmax_ctx;

static void softmax_fwd(const double *x, double *y, void *ctx)
{
    const softmax_ctx *c = ctx;
    (c->log_form ? tl_k_log_softmax_ref : tl_k_softmax_ref)(c->outer, c->axis, c->inner, x, y);
}

Test(ops_reduce_kernels, softmax_matches_twins_and_finite_differences)
{
    const int64_t geoms[][3] = {{1, 1, 1}, {4, 7, 1}, {3, 5, 6}, {1, 4, 300}, {2, 10, 1}, {5, 1, 3}};
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
        int64_t o = geoms[k][0], a = geoms[k][1], in = geoms[k][2], n = o * a * in;
        tk_buf x = tk_rand(n, 600 + k, -4, 4), y = tk_zeros(n), dy = tk_rand(n, 700 + k, -1, 1), dx = tk_zeros(n);
        for (int lf = 0; lf < 2; lf++) {
            softmax_ctx c = {o, a, in, lf};
            (lf ? tl_k_log_softmax : tl_k_softmax)(o, a, in, x.f, y.f);
            (lf ? tl_k_log_softmax_ref : tl_k_softmax_ref)(o, a, in, x.d, y.d);
            tk_assert_close(n, y.f, y.d, 1e-6, 1e-7, lf ? "log_softmax" : "softmax");
            (lf ? tl_k_log_softmax_grad : tl_k_softmax_grad)(o, a, in, y.f, dy.f, dx.f);
            (lf ? tl_k_log_softmax_grad_ref : tl_k_softmax_grad_ref)(o, a, in, y.d, dy.d, dx.d);
            tk_assert_close(n, dx.f, dx.d, 1e-5, 2e-6 * (double)a, lf ? "log_softmax grad" : "softmax grad");
            if (n <= 400)
                tk_check_grad(softmax_fwd, &c, n, n, x.d, dy.d, dx.d, lf ? "log_softmax" : "softmax");
        }
        tk_free(&x);
        tk_free(&y);
        tk_free(&dy);
        tk_free(&dx);
    }
}

/* Logits of 1e4 (on the contiguous and the strided path): finite, the
 * softmax rows sum to 1, log_softmax is the exact shift. */
Test(ops_reduce_kernels, softmax_of_large_logits_stays_finite)
{
    const float x[6] = {1e4f, 1e4f - 1, -1e4f, 1e4f, 9999, 1e4f};
    float y[6], l[6];
    double want[6], xd[6];
    for (int i = 0; i < 6; i++)
        xd[i] = x[i];
    for (int strided = 0; strided < 2; strided++) {
        int64_t o = strided ? 1 : 2, a = 3, in = strided ? 2 : 1;
        tl_k_softmax(o, a, in, x, y);
        tl_k_softmax_ref(o, a, in, xd, want);
        tk_assert_close(6, y, want, 1e-6, 1e-7, "softmax of 1e4");
        tl_k_log_softmax(o, a, in, x, l);
        tl_k_log_softmax_ref(o, a, in, xd, want);
        tk_assert_close(6, l, want, 1e-6, 1e-6, "log_softmax of 1e4");
        for (int i = 0; i < 6; i++)
            cr_assert(isfinite(y[i]) && isfinite(l[i]), "element %d: %g, %g", i, (double)y[i], (double)l[i]);
    }
    tl_k_softmax(2, 3, 1, x, y);
    cr_assert(fabs((double)y[0] + y[1] + y[2] - 1) < 1e-6 && y[2] == 0);
    cr_assert(fabs(y[0] - 1 / (1 + exp(-1.0))) < 1e-6, "%.9g", (double)y[0]);
}

/* ---- softmax cross-entropy ------------------------------------------------------------ */

typedef struct xent_ctx {
    int64_t batch, classes;
    double s;
    bool sparse, wide;
    const void *hot;
} xent_ctx;

/* x = logits then (dense) labels. */
static void xent_fwd(const double *x, double *y, void *ctx)
{
    const xent_ctx *c = ctx;
    if (c->sparse)
        cr_assert_eq(tl_k_sparse_xent_ref(c->batch, c->classes, c->s, x, c->wide, c->hot, y), TL_OK);
    else
        cr_assert_eq(tl_k_softmax_xent_dense_ref(c->batch, c->classes, c->s, x, x + c->batch * c->classes, y),
                     TL_OK);
}

/* Rows of labels that are probability distributions (TF's condition). */
static tk_buf prob_rows(int64_t batch, int64_t classes, uint64_t tag)
{
    tk_buf l = tk_rand(batch * classes, tag, 0, 1);
    for (int64_t b = 0; b < batch; b++) {
        double s = 0;
        for (int64_t c = 0; c < classes; c++)
            s += l.f[b * classes + c];
        for (int64_t c = 0; c < classes; c++) {
            l.f[b * classes + c] = (float)(l.f[b * classes + c] / s);
            l.d[b * classes + c] = l.f[b * classes + c];
        }
    }
    return l;
}

Test(ops_reduce_kernels, dense_xent_matches_twins_and_finite_differences)
{
    const int64_t geoms[][2] = {{1, 1}, {4, 3}, {7, 10}, {2, 300}};
    const double smooth[] = {0.0, 0.1, 1.0};
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++)
        for (size_t si = 0; si < 3; si++) {
            int64_t b = geoms[k][0], c = geoms[k][1], n = b * c;
            double s = smooth[si];
            tk_buf x = tk_rand(2 * n, 800 + k, -3, 3), lab = prob_rows(b, c, 900 + k);
            memcpy(x.f + n, lab.f, (size_t)n * sizeof(float));
            memcpy(x.d + n, lab.d, (size_t)n * sizeof(double));
            tk_buf loss = tk_zeros(b), dl = tk_rand(b, 950 + k, -1, 1), dx = tk_zeros(2 * n);
            cr_assert_eq(tl_k_softmax_xent_dense(b, c, s, x.f, x.f + n, loss.f), TL_OK);
            cr_assert_eq(tl_k_softmax_xent_dense_ref(b, c, s, x.d, x.d + n, loss.d), TL_OK);
            tk_assert_close(b, loss.f, loss.d, 1e-6, 1e-6, "softmax_xent_dense");
            cr_assert_eq(tl_k_softmax_xent_dense_grad(b, c, s, x.f, x.f + n, dl.f, dx.f, dx.f + n), TL_OK);
            cr_assert_eq(tl_k_softmax_xent_dense_grad_ref(b, c, s, x.d, x.d + n, dl.d, dx.d, dx.d + n), TL_OK);
            tk_assert_close(2 * n, dx.f, dx.d, 1e-5, 1e-7, "softmax_xent_dense grad");
            /* Either gradient alone gives the same bits. */
            tk_buf only = tk_zeros(n);
            cr_assert_eq(tl_k_softmax_xent_dense_grad(b, c, s, x.f, x.f + n, dl.f, only.f, NULL), TL_OK);
            tk_assert_same_bits(n, only.f, dx.f, "dlogits alone");
            cr_assert_eq(tl_k_softmax_xent_dense_grad(b, c, s, x.f, x.f + n, dl.f, NULL, only.f), TL_OK);
            tk_assert_same_bits(n, only.f, dx.f + n, "dlabels alone");
            if (n <= 100) {
                xent_ctx ctx = {b, c, s, false, false, NULL};
                tk_check_grad(xent_fwd, &ctx, 2 * n, b, x.d, dl.d, dx.d, "softmax_xent_dense");
            }
            tk_free(&only);
            tk_free(&x);
            tk_free(&lab);
            tk_free(&loss);
            tk_free(&dl);
            tk_free(&dx);
        }
}

/* Label smoothing 0.3 over 3 classes by hand: labels (0, 0, 1) become
 * (0.1, 0.1, 0.8); logits (1, 2, 3) have logsumexp 3.40760596444438, so the
 * loss is 3.4076... - (0.1 + 0.2 + 2.4) and the gradients are
 * softmax - (0.1, 0.1, 0.8) and 0.7·(lse - z). */
Test(ops_reduce_kernels, label_smoothing_by_hand)
{
    const float z[3] = {1, 2, 3}, l[3] = {0, 0, 1}, dl = 1;
    const int32_t hot32 = 2;
    const int64_t hot64 = 2;
    float loss, dz[3], dlab[3];
    cr_assert_eq(tl_k_softmax_xent_dense(1, 3, 0.3, z, l, &loss), TL_OK);
    cr_assert(fabs(loss - 0.7076059644443801) < 1e-6, "loss %.9g", (double)loss);
    cr_assert_eq(tl_k_softmax_xent_dense_grad(1, 3, 0.3, z, l, &dl, dz, dlab), TL_OK);
    const double wz[3] = {-0.009969426829619515, 0.1447284710547977, -0.13475904422517793};
    const double wl[3] = {1.685324175111066, 0.9853241751110661, 0.28532417511106606};
    tk_assert_close(3, dz, wz, 1e-5, 1e-7, "dlogits by hand");
    tk_assert_close(3, dlab, wl, 1e-6, 0, "dlabels by hand");
    /* The sparse form with label 2, either width: the dense form's bits. */
    float sloss, sdz[3];
    cr_assert_eq(tl_k_sparse_xent(1, 3, 0.3, z, false, &hot32, &sloss), TL_OK);
    tk_assert_same_bits(1, &sloss, &loss, "sparse int32 smoothed");
    cr_assert_eq(tl_k_sparse_xent(1, 3, 0.3, z, true, &hot64, &sloss), TL_OK);
    tk_assert_same_bits(1, &sloss, &loss, "sparse int64 smoothed");
    cr_assert_eq(tl_k_sparse_xent_grad(1, 3, 0.3, z, true, &hot64, &dl, sdz), TL_OK);
    tk_assert_same_bits(3, sdz, dz, "sparse grad smoothed");
}

/* TF's logits gradient is softmax - labels even where the labels do not sum
 * to 1 (where it is not the loss's gradient): (0, 0) against (1, 1). */
Test(ops_reduce_kernels, dense_xent_gradient_is_tfs_formula)
{
    const float z[2] = {0, 0}, l[2] = {1, 1}, dl = 1;
    float loss, dz[2];
    cr_assert_eq(tl_k_softmax_xent_dense(1, 2, 0, z, l, &loss), TL_OK);
    cr_assert(fabs(loss - 2 * log(2.0)) < 1e-6);
    cr_assert_eq(tl_k_softmax_xent_dense_grad(1, 2, 0, z, l, &dl, dz, NULL), TL_OK);
    cr_assert(dz[0] == -0.5f && dz[1] == -0.5f, "%g %g", (double)dz[0], (double)dz[1]);
}

Test(ops_reduce_kernels, sparse_xent_is_the_existing_kernel_without_smoothing)
{
    const int64_t b = 37, c = 11;
    tk_buf z = tk_rand(b * c, 1000, -20, 20), dl = tk_rand(b, 1001, -1, 1);
    int32_t l32[37];
    int64_t l64[37];
    for (int i = 0; i < b; i++)
        l64[i] = l32[i] = (int32_t)((i * 7) % c);
    float want[37], got[37], gwant[37 * 11], ggot[37 * 11];
    cr_assert_eq(tl_k_softmax_xent(b, c, z.f, l32, want), TL_OK);
    cr_assert_eq(tl_k_softmax_xent_grad(b, c, z.f, l32, dl.f, gwant), TL_OK);
    for (int wide = 0; wide < 2; wide++) {
        const void *l = wide ? (const void *)l64 : (const void *)l32;
        cr_assert_eq(tl_k_sparse_xent(b, c, 0.0, z.f, wide, l, got), TL_OK);
        tk_assert_same_bits(b, got, want, wide ? "int64 loss" : "int32 loss");
        cr_assert_eq(tl_k_sparse_xent_grad(b, c, 0.0, z.f, wide, l, dl.f, ggot), TL_OK);
        tk_assert_same_bits(b * c, ggot, gwant, wide ? "int64 grad" : "int32 grad");
    }
    tk_free(&z);
    tk_free(&dl);
}

Test(ops_reduce_kernels, sparse_xent_matches_twins_and_finite_differences)
{
    const int64_t b = 6, c = 5;
    const double smooth[] = {0.0, 0.2};
    int32_t l32[6] = {0, 4, 2, 2, 1, 3};
    int64_t l64[6] = {0, 4, 2, 2, 1, 3};
    for (int si = 0; si < 2; si++)
        for (int wide = 0; wide < 2; wide++) {
            const void *l = wide ? (const void *)l64 : (const void *)l32;
            tk_buf z = tk_rand(b * c, 1100, -3, 3), loss = tk_zeros(b), dl = tk_rand(b, 1101, -1, 1);
            tk_buf dz = tk_zeros(b * c);
            cr_assert_eq(tl_k_sparse_xent(b, c, smooth[si], z.f, wide, l, loss.f), TL_OK);
            cr_assert_eq(tl_k_sparse_xent_ref(b, c, smooth[si], z.d, wide, l, loss.d), TL_OK);
            tk_assert_close(b, loss.f, loss.d, 1e-6, 1e-6, "sparse xent");
            cr_assert_eq(tl_k_sparse_xent_grad(b, c, smooth[si], z.f, wide, l, dl.f, dz.f), TL_OK);
            cr_assert_eq(tl_k_sparse_xent_grad_ref(b, c, smooth[si], z.d, wide, l, dl.d, dz.d), TL_OK);
            tk_assert_close(b * c, dz.f, dz.d, 1e-5, 1e-7, "sparse xent grad");
            xent_ctx ctx = {b, c, smooth[si], true, wide, l};
            tk_check_grad(xent_fwd, &ctx, b * c, b, z.d, dl.d, dz.d, "sparse xent");
            tk_free(&z);
            tk_free(&loss);
            tk_free(&dl);
            tk_free(&dz);
        }
}

Test(ops_reduce_kernels, sparse_xent_bad_label_is_an_error_and_writes_nothing)
{
    const float z[6] = {0};
    const int32_t l32[2] = {1, 3};
    const int64_t l64[2] = {-1, 0};
    const float dl[2] = {1, 1};
    float out[6] = {7, 7, 7, 7, 7, 7};
    ASSERT_ERROR(tl_k_sparse_xent(2, 3, 0.0, z, false, l32, out),
                 "sparse_softmax_cross_entropy: example 1 has label 3, which is outside the valid range of [0, 3)");
    ASSERT_ERROR(tl_k_sparse_xent(2, 3, 0.1, z, false, l32, out), "example 1 has label 3");
    ASSERT_ERROR(tl_k_sparse_xent(2, 3, 0.0, z, true, l64, out),
                 "sparse_softmax_cross_entropy: example 0 has label -1, which is outside the valid range of [0, 3)");
    ASSERT_ERROR(tl_k_sparse_xent_grad(2, 3, 0.5, z, true, l64, dl, out),
                 "sparse_softmax_cross_entropy_grad: example 0 has label -1");
    ASSERT_ERROR(tl_k_sparse_xent(2, 3, 1.5, z, false, l32, out), "label_smoothing must be in [0, 1], got 1.5");
    ASSERT_ERROR(tl_k_softmax_xent_dense(2, 3, -0.1, z, z, out), "label_smoothing must be in [0, 1], got -0.1");
    ASSERT_ERROR(tl_k_softmax_xent_dense(2, 3, NAN, z, z, out), "label_smoothing must be in [0, 1], got nan");
    for (int i = 0; i < 6; i++)
        cr_assert_eq(out[i], 7.0f, "out[%d] was written", i);
}

/* ---- Huber ------------------------------------------------------------------------------ */

typedef struct huber_ctx {
    int64_t n;
    double delta;
} huber_ctx;

/* x = predictions then labels. */
static void huber_fwd(const double *x, double *y, void *ctx)
{
    const huber_ctx *c = ctx;
    cr_assert_eq(tl_k_huber_ref(c->n, c->delta, x, x + c->n, y), TL_OK);
}

Test(ops_reduce_kernels, huber_matches_twins_and_finite_differences)
{
    const double deltas[] = {1.0, 0.5, 3.0};
    for (int k = 0; k < 3; k++) {
        int64_t n = 50;
        huber_ctx c = {n, deltas[k]};
        tk_buf x = tk_rand(2 * n, 1200 + (uint64_t)k, -3, 3), loss = tk_zeros(n), dl = tk_rand(n, 1210, -1, 1);
        tk_buf dx = tk_zeros(2 * n);
        cr_assert_eq(tl_k_huber(n, c.delta, x.f, x.f + n, loss.f), TL_OK);
        cr_assert_eq(tl_k_huber_ref(n, c.delta, x.d, x.d + n, loss.d), TL_OK);
        tk_assert_close(n, loss.f, loss.d, 1e-6, 1e-7, "huber");
        cr_assert_eq(tl_k_huber_grad(n, c.delta, x.f, x.f + n, dl.f, dx.f, dx.f + n), TL_OK);
        cr_assert_eq(tl_k_huber_grad_ref(n, c.delta, x.d, x.d + n, dl.d, dx.d, dx.d + n), TL_OK);
        tk_assert_close(2 * n, dx.f, dx.d, 1e-6, 1e-7, "huber grad");
        tk_check_grad(huber_fwd, &c, 2 * n, n, x.d, dl.d, dx.d, "huber");
        tk_free(&x);
        tk_free(&loss);
        tk_free(&dl);
        tk_free(&dx);
    }
}

Test(ops_reduce_kernels, huber_values_by_hand)
{
    /* x = 0.5, 3, -2 with delta 1, 1, 0.5: 0.125, 2.5, 0.5·(2 - 0.25). */
    const float p[3] = {1.5f, 3, -1}, t[3] = {1, 0, 1}, dl[3] = {1, 1, 2};
    float loss[3], dp[3], dt[3];
    cr_assert_eq(tl_k_huber(2, 1.0, p, t, loss), TL_OK);
    cr_assert_eq(tl_k_huber(1, 0.5, p + 2, t + 2, loss + 2), TL_OK);
    cr_assert(loss[0] == 0.125f && loss[1] == 2.5f && loss[2] == 0.875f, "%g %g %g", (double)loss[0],
              (double)loss[1], (double)loss[2]);
    cr_assert_eq(tl_k_huber_grad(2, 1.0, p, t, dl, dp, dt), TL_OK);
    cr_assert_eq(tl_k_huber_grad(1, 0.5, p + 2, t + 2, dl + 2, dp + 2, NULL), TL_OK);
    cr_assert(dp[0] == 0.5f && dp[1] == 1 && dp[2] == -1, "%g %g %g", (double)dp[0], (double)dp[1], (double)dp[2]);
    cr_assert(dt[0] == -0.5f && dt[1] == -1);
    float keep = 7;
    ASSERT_ERROR(tl_k_huber(1, 0.0, p, t, &keep), "huber: delta must be a positive finite float32 number, got 0");
    ASSERT_ERROR(tl_k_huber(1, INFINITY, p, t, &keep), "got inf");
    ASSERT_ERROR(tl_k_huber_grad(1, -1, p, t, dl, &keep, NULL), "huber_grad: delta");
    cr_assert_eq(keep, 7.0f);
}

/* ---- in_top_k --------------------------------------------------------------------------- */

/* TF's documented example, then ties at the k-th value, out-of-range and
 * non-finite targets, and k = 0. */
Test(ops_reduce_kernels, in_top_k_tf_example_and_edges)
{
    const float pred[12] = {1.2f, -0.3f, 2.8f, 5.2f, 0.1f, 0, 0, 0, 0, 0.5f, 0.3f, 0.3f};
    const int32_t t32[3] = {0, 1, 3};
    const int64_t t64[3] = {0, 1, 3};
    float out[3];
    cr_assert_eq(tl_k_in_top_k(3, 4, 2, pred, false, t32, out), TL_OK);
    cr_assert(out[0] == 0 && out[1] == 1 && out[2] == 1, "%g %g %g", (double)out[0], (double)out[1], (double)out[2]);
    cr_assert_eq(tl_k_in_top_k(3, 4, 2, pred, true, t64, out), TL_OK);
    cr_assert(out[0] == 0 && out[1] == 1 && out[2] == 1);
    /* Row 1 has three classes tied at 0 behind 0.1: all in the top 2. */
    const int32_t tied[3] = {2, 3, 2};
    cr_assert_eq(tl_k_in_top_k(3, 4, 2, pred, false, tied, out), TL_OK);
    cr_assert(out[0] == 1 && out[1] == 1 && out[2] == 1);
    cr_assert_eq(tl_k_in_top_k(3, 4, 1, pred, false, tied, out), TL_OK);
    cr_assert(out[0] == 0 && out[1] == 0 && out[2] == 0);
    const int64_t bad[3] = {4, -1, INT64_MAX};
    cr_assert_eq(tl_k_in_top_k(3, 4, 4, pred, true, bad, out), TL_OK);
    cr_assert(out[0] == 0 && out[1] == 0 && out[2] == 0, "an out-of-range target is not in the top k");
    const int32_t each[4] = {0, 1, 2, 3};
    float o4[4];
    cr_assert_eq(tl_k_in_top_k(4, 4, 4, (const float[16]){NAN, 0, 0, 0, 0, INFINITY, 0, 0, 0, 0, -INFINITY, 0,
                                                          NAN, INFINITY, 0, 1},
                               false, each, o4),
                 TL_OK);
    cr_assert(o4[0] == 0 && o4[1] == 0 && o4[2] == 0, "a non-finite target prediction is never in the top k");
    cr_assert(o4[3] == 1, "NaN elsewhere does not count as greater; inf does (1 greater < k 4)");
    cr_assert_eq(tl_k_in_top_k(3, 4, 0, pred, false, t32, out), TL_OK);
    cr_assert(out[0] == 0 && out[1] == 0 && out[2] == 0);
    out[0] = 7;
    ASSERT_ERROR(tl_k_in_top_k(3, 4, -1, pred, false, t32, out), "in_top_k: k must be >= 0, got -1");
    cr_assert_eq(out[0], 7.0f);
}

Test(ops_reduce_kernels, in_top_k_matches_twin)
{
    const int64_t b = 40, c = 9;
    tk_buf p = tk_rand(b * c, 1300, -1, 1), out = tk_zeros(b);
    for (int64_t i = 0; i < b * c; i += 2) { /* many ties */
        p.f[i] = roundf(p.f[i] * 2) / 2;
        p.d[i] = p.f[i];
    }
    int64_t t[40];
    for (int i = 0; i < b; i++)
        t[i] = (i * 5) % 11 - 1; /* some out of range */
    for (int64_t k = 0; k <= c + 1; k++) {
        cr_assert_eq(tl_k_in_top_k(b, c, k, p.f, true, t, out.f), TL_OK);
        cr_assert_eq(tl_k_in_top_k_ref(b, c, k, p.d, true, t, out.d), TL_OK);
        tk_assert_close(b, out.f, out.d, 0, 0, "in_top_k");
    }
    tk_free(&p);
    tk_free(&out);
}

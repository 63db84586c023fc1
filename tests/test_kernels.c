/* Kernels (src/kernels/): GEMM, bias, activations and reductions, each fast
 * kernel against its float64 twin and each backward twin against central
 * finite differences of its forward twin (h = 1e-6, tolerance 1e-6 relative,
 * test_kernels_util.h). Losses and dropout are in test_kernels_loss.c, concat
 * / slice / pairwise dot in test_kernels_shape.c.
 *
 * Tolerances against the twins: sums of products (GEMM, pairwise dot) within
 * 1e-5 of the sum of |terms| elementwise (float32 accumulation over k = 784);
 * float64-accumulated reductions within 1e-7 relative (the final rounding);
 * elementwise kernels within a few float32 ulps (1e-6 relative or less);
 * copies and relu exactly. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_kernels_util.h"

/* ---- matmul -------------------------------------------------------------------- */

TestSuite(k_matmul, .init = tk_setup, .timeout = 120);

/* (m, n, k) with 1s, odd sizes and the MLP's three GEMMs (batch 128,
 * 784 → 256): forward (128, 256, 784), dW (784, 256, 128), dx (128, 784, 256). */
static const int64_t gemm_shapes[][3] = {
    {1, 1, 1}, {3, 7, 1}, {1, 10, 784}, {17, 64, 7}, {3, 1, 784},
    {128, 256, 784}, {784, 256, 128}, {128, 784, 256}, {17, 7, 64},
};

/* Checks one shape, flags, alpha and beta: C starts as random values, the
 * tolerance is 1e-5 of |alpha|·|op(A)|·|op(B)| + |beta|·|C| elementwise. */
static void check_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta)
{
    tk_buf a = tk_rand(m * k, 1, -1, 1), b = tk_rand(k * n, 2, -1, 1), c = tk_rand(m * n, 3, -1, 1);
    double *want = tk_alloc((size_t)(m * n) * sizeof(double));
    double *bound = tk_alloc((size_t)(m * n) * sizeof(double));
    double *abs_a = tk_alloc((size_t)(m * k) * sizeof(double));
    double *abs_b = tk_alloc((size_t)(k * n) * sizeof(double));
    for (int64_t i = 0; i < m * k; i++)
        abs_a[i] = fabs(a.d[i]);
    for (int64_t i = 0; i < k * n; i++)
        abs_b[i] = fabs(b.d[i]);
    memcpy(want, c.d, (size_t)(m * n) * sizeof(double));
    for (int64_t i = 0; i < m * n; i++)
        bound[i] = fabs((double)beta) * fabs(c.d[i]);
    tl_k_matmul_ref(ta, tb, m, n, k, alpha, a.d, b.d, beta, want);
    tl_k_matmul_ref(ta, tb, m, n, k, fabs((double)alpha), abs_a, abs_b, 1.0, bound);
    for (int64_t i = 0; i < m * n; i++)
        bound[i] += 1e-30; /* an exact zero result must still match */
    cr_assert_eq(tl_k_matmul(ta, tb, m, n, k, alpha, a.f, b.f, beta, c.f), TL_OK, "%s", tl_last_error());
    char what[128];
    snprintf(what, sizeof what, "matmul ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g", ta, tb, (long long)m,
             (long long)n, (long long)k, (double)alpha, (double)beta);
    tk_assert_bounded(m * n, c.f, want, bound, 1e-5, what);
    free(want);
    free(bound);
    free(abs_a);
    free(abs_b);
    tk_free(&a);
    tk_free(&b);
    tk_free(&c);
}

Test(k_matmul, matches_twin_all_transposes_and_shapes)
{
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            check_gemm(t & 1, t & 2, gemm_shapes[s][0], gemm_shapes[s][1], gemm_shapes[s][2], 1.0f, 0.0f);
}

Test(k_matmul, alpha_and_accumulating_beta)
{
    for (int t = 0; t < 4; t++) {
        check_gemm(t & 1, t & 2, 17, 7, 64, 0.5f, 1.0f);
        check_gemm(t & 1, t & 2, 3, 64, 7, -2.0f, 0.25f);
    }
}

Test(k_matmul, beta_zero_does_not_read_c)
{
    tk_buf a = tk_rand(6, 1, -1, 1), b = tk_rand(6, 2, -1, 1);
    float c[4] = {NAN, INFINITY, NAN, -INFINITY};
    cr_assert_eq(tl_k_matmul(false, false, 2, 2, 3, 1.0f, a.f, b.f, 0.0f, c), TL_OK);
    for (int i = 0; i < 4; i++)
        cr_assert(isfinite(c[i]), "C[%d] = %g leaked through beta = 0", i, (double)c[i]);
    tk_free(&a);
    tk_free(&b);
}

Test(k_matmul, k_zero_scales_c_by_beta)
{
    float c[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_eq(tl_k_matmul(true, false, 2, 3, 0, 1.0f, NULL, NULL, 0.5f, c), TL_OK);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(c[i], 0.5f * (float)(i + 1));
    cr_assert_eq(tl_k_matmul(false, true, 2, 3, 0, 1.0f, NULL, NULL, 0.0f, c), TL_OK);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(c[i], 0.0f);
    cr_assert_eq(tl_k_matmul(false, false, 0, 3, 5, 1.0f, NULL, NULL, 0.0f, NULL), TL_OK);
}

Test(k_matmul, bad_dimensions_are_errors_and_leave_c_alone)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {9, 9, 9, 9}, da[4], db[4];
    cr_assert_eq(tl_k_matmul(false, false, -1, 2, 2, 1.0f, a, b, 0.0f, c), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "matmul: m must be in [0, ") != NULL, "%s", tl_last_error());
    cr_assert(strstr(tl_last_error(), "got -1") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_k_matmul(false, false, 2, 2, (int64_t)1 << 40, 1.0f, a, b, 0.0f, c), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "k must be in") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_k_matmul_grad(false, false, 2, -3, 2, 1.0f, a, b, c, 0.0f, da, db), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "matmul_grad: n must be in") != NULL, "%s", tl_last_error());
    for (int i = 0; i < 4; i++)
        cr_assert_eq(c[i], 9.0f);
}

/* The fast gradient against its twin, for every flag pair, with beta 0 and 1. */
Test(k_matmul, grad_matches_twin)
{
    const int64_t shapes[][3] = {{1, 1, 1}, {17, 7, 64}, {128, 10, 256}, {3, 64, 17}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 8; t++) {
            bool ta = t & 1, tb = t & 2;
            float beta = (t & 4) ? 1.0f : 0.0f;
            int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            tk_buf a = tk_rand(m * k, 4, -1, 1), b = tk_rand(k * n, 5, -1, 1), dc = tk_rand(m * n, 6, -1, 1);
            tk_buf da = tk_rand(m * k, 7, -1, 1), db = tk_rand(k * n, 8, -1, 1);
            tl_k_matmul_grad_ref(ta, tb, m, n, k, 0.75, a.d, b.d, dc.d, beta, da.d, db.d);
            cr_assert_eq(tl_k_matmul_grad(ta, tb, m, n, k, 0.75f, a.f, b.f, dc.f, beta, da.f, db.f), TL_OK);
            /* Every term is at most 1 in magnitude, so (m or k) + 1 bounds the sums. */
            double *bound_a = tk_alloc((size_t)(m * k) * sizeof(double));
            double *bound_b = tk_alloc((size_t)(k * n) * sizeof(double));
            for (int64_t i = 0; i < m * k; i++)
                bound_a[i] = (double)n + 1.0;
            for (int64_t i = 0; i < k * n; i++)
                bound_b[i] = (double)m + 1.0;
            tk_assert_bounded(m * k, da.f, da.d, bound_a, 1e-6, "matmul_grad dA");
            tk_assert_bounded(k * n, db.f, db.d, bound_b, 1e-6, "matmul_grad dB");
            free(bound_a);
            free(bound_b);
            tk_free(&a);
            tk_free(&b);
            tk_free(&dc);
            tk_free(&da);
            tk_free(&db);
        }
}

Test(k_matmul, grad_skips_null_outputs)
{
    tk_buf a = tk_rand(6, 1, -1, 1), b = tk_rand(6, 2, -1, 1), dc = tk_rand(4, 3, -1, 1), db = tk_zeros(6);
    cr_assert_eq(tl_k_matmul_grad(false, false, 2, 2, 3, 1.0f, a.f, b.f, dc.f, 0.0f, NULL, db.f), TL_OK);
    tl_k_matmul_grad_ref(false, false, 2, 2, 3, 1.0, a.d, b.d, dc.d, 0.0, NULL, db.d);
    tk_assert_close(6, db.f, db.d, 1e-6, 1e-6, "dB only");
    tk_free(&a);
    tk_free(&b);
    tk_free(&dc);
    tk_free(&db);
}

typedef struct gemm_ctx {
    bool ta, tb;
    int64_t m, n, k;
    double alpha;
} gemm_ctx;

/* x = [A | B] → C = alpha·op(A)·op(B). */
static void gemm_fwd(const double *x, double *y, void *ctx)
{
    const gemm_ctx *g = ctx;
    tl_k_matmul_ref(g->ta, g->tb, g->m, g->n, g->k, g->alpha, x, x + g->m * g->k, 0.0, y);
}

Test(k_matmul, grad_twin_matches_finite_differences)
{
    const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {4, 1, 6}, {1, 7, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            gemm_ctx g = {t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], 0.7};
            int64_t na = g.m * g.k, nb = g.k * g.n;
            tk_buf x = tk_rand(na + nb, 10, -1, 1), dy = tk_rand(g.m * g.n, 11, -1, 1);
            double *dx = tk_alloc((size_t)(na + nb) * sizeof(double));
            tl_k_matmul_grad_ref(g.ta, g.tb, g.m, g.n, g.k, g.alpha, x.d, x.d + na, dy.d, 0.0, dx, dx + na);
            tk_check_grad(gemm_fwd, &g, na + nb, g.m * g.n, x.d, dy.d, dx, "matmul");
            free(dx);
            tk_free(&x);
            tk_free(&dy);
        }
}

Test(k_matmul, same_inputs_same_bits)
{
    tk_buf a = tk_rand(128 * 784, 1, -1, 1), b = tk_rand(784 * 256, 2, -1, 1);
    tk_buf c1 = tk_zeros(128 * 256), c2 = tk_zeros(128 * 256);
    cr_assert_eq(tl_k_matmul(false, false, 128, 256, 784, 1.0f, a.f, b.f, 0.0f, c1.f), TL_OK);
    cr_assert_eq(tl_k_matmul(false, false, 128, 256, 784, 1.0f, a.f, b.f, 0.0f, c2.f), TL_OK);
    tk_assert_same_bits(128 * 256, c1.f, c2.f, "matmul twice");
    tk_free(&a);
    tk_free(&b);
    tk_free(&c1);
    tk_free(&c2);
}

/* ---- bias add and activations ------------------------------------------------ */

TestSuite(k_elementwise, .init = tk_setup);

static const int64_t batches[] = {1, 3, 17, 128};
static const int64_t dims[] = {1, 7, 64, 784};

Test(k_elementwise, bias_add_and_grad_match_twins)
{
    for (int bi = 0; bi < 4; bi++)
        for (int di = 0; di < 4; di++) {
            int64_t rows = batches[bi], cols = dims[di];
            tk_buf x = tk_rand(rows * cols, 1, -2, 2), bias = tk_rand(cols, 2, -2, 2), y = tk_zeros(rows * cols);
            tk_buf db = tk_zeros(cols);
            tl_k_bias_add(rows, cols, x.f, bias.f, y.f);
            tl_k_bias_add_ref(rows, cols, x.d, bias.d, y.d);
            tk_assert_close(rows * cols, y.f, y.d, 1e-7, 5e-7, "bias_add");
            tl_k_bias_add_grad(rows, cols, x.f, db.f);
            tl_k_bias_add_grad_ref(rows, cols, x.d, db.d);
            /* One float64 accumulator: only the final rounding differs. */
            tk_assert_close(cols, db.f, db.d, 1e-7, 1e-12, "bias_add_grad");
            tk_free(&x);
            tk_free(&bias);
            tk_free(&y);
            tk_free(&db);
        }
}

typedef struct shape2 {
    int64_t rows, cols;
} shape2;

/* x = [x (rows, cols) | bias (cols)] → y. */
static void bias_fwd(const double *x, double *y, void *ctx)
{
    const shape2 *s = ctx;
    tl_k_bias_add_ref(s->rows, s->cols, x, x + s->rows * s->cols, y);
}

Test(k_elementwise, bias_add_grad_matches_finite_differences)
{
    shape2 s = {5, 7};
    int64_t n = s.rows * s.cols;
    tk_buf x = tk_rand(n + s.cols, 1, -1, 1), dy = tk_rand(n, 2, -1, 1);
    double *dx = tk_alloc((size_t)(n + s.cols) * sizeof(double));
    memcpy(dx, dy.d, (size_t)n * sizeof(double)); /* the gradient of x is dy itself */
    tl_k_bias_add_grad_ref(s.rows, s.cols, dy.d, dx + n);
    tk_check_grad(bias_fwd, &s, n + s.cols, n, x.d, dy.d, dx, "bias_add");
    free(dx);
    tk_free(&x);
    tk_free(&dy);
}

typedef void (*act_fn)(int64_t, const float *restrict, float *restrict);
typedef void (*act_ref_fn)(int64_t, const double *restrict, double *restrict);
typedef void (*act_grad_fn)(int64_t, const float *restrict, const float *restrict, float *restrict);
typedef void (*act_grad_ref_fn)(int64_t, const double *restrict, const double *restrict, double *restrict);

typedef struct activation {
    const char *name;
    act_fn fwd;
    act_ref_fn fwd_ref;
    act_grad_fn grad;
    act_grad_ref_fn grad_ref;
    double rtol, atol; /* forward against the twin */
} activation;

static const activation activations[] = {
    {"relu", tl_k_relu, tl_k_relu_ref, tl_k_relu_grad, tl_k_relu_grad_ref, 0.0, 0.0},
    {"sigmoid", tl_k_sigmoid, tl_k_sigmoid_ref, tl_k_sigmoid_grad, tl_k_sigmoid_grad_ref, 4e-7, 1e-9},
    {"tanh", tl_k_tanh, tl_k_tanh_ref, tl_k_tanh_grad, tl_k_tanh_grad_ref, 4e-7, 1e-9},
};

Test(k_elementwise, activations_match_twins)
{
    for (size_t a = 0; a < sizeof activations / sizeof activations[0]; a++) {
        const activation *act = &activations[a];
        for (int bi = 0; bi < 4; bi++)
            for (int di = 0; di < 4; di++) {
                int64_t n = batches[bi] * dims[di];
                tk_buf x = tk_rand(n, 1, -6, 6), y = tk_zeros(n), dy = tk_rand(n, 2, -1, 1), dx = tk_zeros(n);
                act->fwd(n, x.f, y.f);
                act->fwd_ref(n, x.d, y.d);
                tk_assert_close(n, y.f, y.d, act->rtol, act->atol, act->name);
                /* The backward kernels start from the float32 forward output. */
                for (int64_t i = 0; i < n; i++)
                    y.d[i] = y.f[i];
                act->grad(n, y.f, dy.f, dx.f);
                act->grad_ref(n, y.d, dy.d, dx.d);
                tk_assert_close(n, dx.f, dx.d, 1e-6, 1e-7, act->name);
                tk_free(&x);
                tk_free(&y);
                tk_free(&dy);
                tk_free(&dx);
            }
    }
}

static void act_fwd(const double *x, double *y, void *ctx)
{
    const activation *act = ctx;
    act->fwd_ref(17, x, y);
}

Test(k_elementwise, activation_grads_match_finite_differences)
{
    for (size_t a = 0; a < sizeof activations / sizeof activations[0]; a++) {
        const activation *act = &activations[a];
        tk_buf x = tk_rand(17, 3, -4, 4), dy = tk_rand(17, 4, -1, 1);
        for (int i = 0; i < 17; i++)
            if (fabs(x.d[i]) < 1e-3) /* relu has no derivative at 0 */
                x.d[i] = 0.5;
        double y[17], dx[17];
        act->fwd_ref(17, x.d, y);
        act->grad_ref(17, y, dy.d, dx);
        tk_check_grad(act_fwd, (void *)act, 17, 17, x.d, dy.d, dx, act->name);
        tk_free(&x);
        tk_free(&dy);
    }
}

Test(k_elementwise, relu_edges)
{
    const float x[4] = {0.0f, -0.0f, NAN, -INFINITY};
    float y[4], dx[4];
    tl_k_relu(4, x, y);
    cr_assert_eq(y[0], 0.0f);
    cr_assert_eq(y[1], 0.0f);
    cr_assert(isnan(y[2]), "relu(NaN) is NaN, as XLA's max");
    cr_assert_eq(y[3], 0.0f);
    const float dy[4] = {1, 1, 1, 1};
    tl_k_relu_grad(4, y, dy, dx);
    cr_assert_eq(dx[0], 0.0f, "relu'(0) = 0 as TensorFlow");
    cr_assert_eq(dx[1], 0.0f);
    cr_assert_eq(dx[3], 0.0f);
}

Test(k_elementwise, sigmoid_and_tanh_saturate_without_nan)
{
    const float x[4] = {-100.0f, 100.0f, -1e30f, 1e30f};
    float s[4], t[4];
    tl_k_sigmoid(4, x, s);
    tl_k_tanh(4, x, t);
    cr_assert(s[0] >= 0.0f && s[0] < 1e-40f, "sigmoid(-100) = %g", (double)s[0]);
    cr_assert_eq(s[1], 1.0f);
    cr_assert_eq(s[2], 0.0f);
    cr_assert_eq(s[3], 1.0f);
    cr_assert_eq(t[0], -1.0f);
    cr_assert_eq(t[3], 1.0f);
}

/* A negative count can only be a caller's bug: TL_ASSERT traps, as STYLE.md's
 * second tier, instead of silently doing nothing. */
Test(k_elementwise, negative_count_is_an_assertion, .signal = SIGILL)
{
    float x = 1.0f, y;
    cr_assert_not_null(freopen("/dev/null", "w", stderr)); /* the expected report stays out of the log */
    tl_k_relu(-1, &x, &y);
}

Test(k_elementwise, accumulate_matches_twin)
{
    for (int di = 0; di < 4; di++) {
        int64_t n = 17 * dims[di];
        tk_buf x = tk_rand(n, 1, -1, 1), acc = tk_rand(n, 2, -1, 1);
        tl_k_accumulate(n, x.f, acc.f);
        tl_k_accumulate_ref(n, x.d, acc.d);
        tk_assert_close(n, acc.f, acc.d, 1e-7, 2e-7, "accumulate");
        tk_free(&x);
        tk_free(&acc);
    }
}

/* ---- reductions -------------------------------------------------------------- */

TestSuite(k_reduce, .init = tk_setup);

Test(k_reduce, sum_and_mean_match_twins)
{
    const int64_t ns[] = {1, 7, 17, 64, 784, 128 * 784};
    for (int i = 0; i < 6; i++) {
        tk_buf x = tk_rand(ns[i], 1, -1, 1);
        float s, m;
        double sd, md;
        tl_k_sum(ns[i], x.f, &s);
        tl_k_sum_ref(ns[i], x.d, &sd);
        tl_k_mean(ns[i], x.f, &m);
        tl_k_mean_ref(ns[i], x.d, &md);
        /* float64 partials: only the final rounding to float32 differs. */
        tk_assert_close(1, &s, &sd, 1e-7, 1e-12, "sum");
        tk_assert_close(1, &m, &md, 1e-7, 1e-12, "mean");
        tk_free(&x);
    }
}

Test(k_reduce, empty_sum_is_zero_and_empty_mean_is_nan)
{
    float s = 1.0f, m = 1.0f;
    tl_k_sum(0, NULL, &s);
    tl_k_mean(0, NULL, &m);
    cr_assert_eq(s, 0.0f);
    cr_assert(isnan(m), "mean of nothing is NaN, as tf.reduce_mean");
}

Test(k_reduce, axis_reductions_match_twins)
{
    /* (outer, axis, inner): rows and columns of a matrix, a middle axis, empty axes. */
    const int64_t views[][3] = {{128, 784, 1}, {1, 128, 784}, {17, 1, 7}, {3, 7, 64},  {1, 1, 1},
                                {7, 0, 3},     {1, 17, 300},  {64, 3, 1}, {0, 5, 5},   {3, 17, 257}};
    for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
        int64_t o = views[v][0], a = views[v][1], in = views[v][2];
        tk_buf x = tk_rand(o * a * in, 1, -1, 1), y = tk_zeros(o * in), ym = tk_zeros(o * in);
        tk_buf dy = tk_rand(o * in, 2, -1, 1), dx = tk_zeros(o * a * in);
        tl_k_sum_axis(o, a, in, x.f, y.f);
        tl_k_sum_axis_ref(o, a, in, x.d, y.d);
        tk_assert_close(o * in, y.f, y.d, 1e-7, 1e-12, "sum_axis");
        tl_k_mean_axis(o, a, in, x.f, ym.f);
        tl_k_mean_axis_ref(o, a, in, x.d, ym.d);
        if (a > 0)
            tk_assert_close(o * in, ym.f, ym.d, 1e-7, 1e-12, "mean_axis");
        else
            for (int64_t i = 0; i < o * in; i++)
                cr_assert(isnan(ym.f[i]));
        tl_k_sum_axis_grad(o, a, in, dy.f, dx.f);
        tl_k_sum_axis_grad_ref(o, a, in, dy.d, dx.d);
        tk_assert_close(o * a * in, dx.f, dx.d, 0.0, 0.0, "sum_axis_grad");
        tl_k_mean_axis_grad(o, a, in, dy.f, dx.f);
        tl_k_mean_axis_grad_ref(o, a, in, dy.d, dx.d);
        tk_assert_close(o * a * in, dx.f, dx.d, 1e-7, 1e-12, "mean_axis_grad");
        tk_free(&x);
        tk_free(&y);
        tk_free(&ym);
        tk_free(&dy);
        tk_free(&dx);
    }
}

typedef struct view3 {
    int64_t outer, axis, inner;
    bool mean;
} view3;

static void axis_fwd(const double *x, double *y, void *ctx)
{
    const view3 *v = ctx;
    (v->mean ? tl_k_mean_axis_ref : tl_k_sum_axis_ref)(v->outer, v->axis, v->inner, x, y);
}

static void all_fwd(const double *x, double *y, void *ctx)
{
    const view3 *v = ctx;
    (v->mean ? tl_k_mean_ref : tl_k_sum_ref)(v->outer * v->axis * v->inner, x, y);
}

Test(k_reduce, grads_match_finite_differences)
{
    const view3 views[] = {{3, 5, 1, false}, {1, 4, 6, true}, {2, 3, 4, false}, {2, 3, 4, true}, {1, 1, 1, true}};
    for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
        view3 w = views[v];
        int64_t n = w.outer * w.axis * w.inner, ny = w.outer * w.inner;
        tk_buf x = tk_rand(n, 1, -1, 1), dy = tk_rand(ny, 2, -1, 1);
        double *dx = tk_alloc((size_t)n * sizeof(double));
        (w.mean ? tl_k_mean_axis_grad_ref : tl_k_sum_axis_grad_ref)(w.outer, w.axis, w.inner, dy.d, dx);
        tk_check_grad(axis_fwd, &w, n, ny, x.d, dy.d, dx, w.mean ? "mean_axis" : "sum_axis");
        (w.mean ? tl_k_mean_grad_ref : tl_k_sum_grad_ref)(n, dy.d, dx);
        tk_check_grad(all_fwd, &w, n, 1, x.d, dy.d, dx, w.mean ? "mean" : "sum");
        free(dx);
        tk_free(&x);
        tk_free(&dy);
    }
}

Test(k_reduce, full_grads_match_twins)
{
    const int64_t n = 17 * 64;
    const float dy = 0.375f;
    const double dyd = dy;
    tk_buf dx = tk_zeros(n);
    tl_k_sum_grad(n, &dy, dx.f);
    tl_k_sum_grad_ref(n, &dyd, dx.d);
    tk_assert_close(n, dx.f, dx.d, 0.0, 0.0, "sum_grad");
    tl_k_mean_grad(n, &dy, dx.f);
    tl_k_mean_grad_ref(n, &dyd, dx.d);
    tk_assert_close(n, dx.f, dx.d, 1e-7, 0.0, "mean_grad");
    tk_free(&dx);
}

/* The documented order, not merely some order: eight float64 partials,
 * element i into partial i mod 8. 2^60 in partial 0 swallows the 1s added to
 * it but not those in other partials, which a plain running sum would lose. */
Test(k_reduce, sum_order_is_the_documented_one)
{
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = 1.0f;
    x[0] = 0x1p60f;
    x[8] = -0x1p60f;
    float s;
    tl_k_sum(16, x, &s);
    /* Partial 0: 2^60 + (-2^60) = 0; partials 1..7: 2 each. */
    cr_assert_eq(s, 14.0f, "sum is %g", (double)s);
    /* The tail after the last full block continues the rotation: of ten
     * elements, 8 joins partial 0 and 9 partial 1. */
    x[9] = 1.0f;
    tl_k_sum(10, x, &s);
    cr_assert_eq(s, 8.0f, "sum of ten is %g", (double)s);
    tl_k_sum_axis(2, 10, 1, (const float[20]){0x1p60f, 1, 1, 1, 1, 1, 1, 1, -0x1p60f, 1, [10] = 1}, (float[2]){0}); /* compiles the row path */
}

Test(k_reduce, same_inputs_same_bits)
{
    tk_buf x = tk_rand(128 * 784, 1, -1, 1), y1 = tk_zeros(784), y2 = tk_zeros(784);
    tl_k_sum_axis(1, 128, 784, x.f, y1.f);
    tl_k_sum_axis(1, 128, 784, x.f, y2.f);
    tk_assert_same_bits(784, y1.f, y2.f, "column sums twice");
    tl_k_sum(128 * 784, x.f, y1.f);
    tl_k_sum(128 * 784, x.f, y2.f);
    tk_assert_same_bits(1, y1.f, y2.f, "sum twice");
    tk_free(&x);
    tk_free(&y1);
    tk_free(&y2);
}

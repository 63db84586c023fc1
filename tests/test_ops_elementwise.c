/* Kernels of the element-wise family (src/kernels/elementwise_bcast.h): the
 * broadcast plan, binary ops, unary math and activations, comparisons, where
 * and casts, each float32 kernel against its float64 twin and each backward
 * twin against finite differences of the forward twin. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/elementwise_bcast.h"
#include "test_kernels_util.h"

TestSuite(ops_elementwise, .init = tk_setup);

static int64_t numel(const tl_k_shape *s)
{
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++)
        n *= s->dim[d];
    return n;
}

/* ---- the plan --------------------------------------------------------------------- */

static tl_k_bcast plan2(tl_k_shape a, tl_k_shape b)
{
    tl_k_shape s[2] = {a, b};
    tl_k_bcast p;
    cr_assert_eq(tl_k_bcast_init(&p, 2, s), TL_OK, "%s", tl_last_error());
    return p;
}

static void assert_loops(const tl_k_bcast *b, int rank, const int64_t *dim, const int64_t *sx, const int64_t *sy)
{
    cr_assert_eq(b->rank, rank, "%d merged loops, want %d", b->rank, rank);
    for (int d = 0; d < rank; d++) {
        cr_assert_eq(b->dim[d], dim[d], "loop %d has %lld, want %lld", d, (long long)b->dim[d], (long long)dim[d]);
        cr_assert_eq(b->stride[0][d], sx[d], "x stride %d: %lld, want %lld", d, (long long)b->stride[0][d],
                     (long long)sx[d]);
        cr_assert_eq(b->stride[1][d], sy[d], "y stride %d: %lld, want %lld", d, (long long)b->stride[1][d],
                     (long long)sy[d]);
    }
}

Test(ops_elementwise, plan_shapes_strides_and_merging)
{
    /* (4, 1, 5) + (3, 1) → (4, 3, 5): nothing merges. */
    tl_k_bcast b = plan2((tl_k_shape){3, {4, 1, 5}}, (tl_k_shape){2, {3, 1}});
    cr_assert_eq(b.out.rank, 3);
    cr_assert(b.out.dim[0] == 4 && b.out.dim[1] == 3 && b.out.dim[2] == 5);
    cr_assert_eq(b.size, 60);
    assert_loops(&b, 3, (int64_t[]){4, 3, 5}, (int64_t[]){5, 0, 1}, (int64_t[]){0, 1, 0});
    /* Same shapes: one contiguous run. */
    b = plan2((tl_k_shape){3, {2, 3, 4}}, (tl_k_shape){3, {2, 3, 4}});
    assert_loops(&b, 1, (int64_t[]){24}, (int64_t[]){1}, (int64_t[]){1});
    /* A scalar, and (1,), with a matrix: one run with a stride-0 operand. */
    b = plan2((tl_k_shape){0, {0}}, (tl_k_shape){2, {2, 3}});
    assert_loops(&b, 1, (int64_t[]){6}, (int64_t[]){0}, (int64_t[]){1});
    b = plan2((tl_k_shape){1, {1}}, (tl_k_shape){2, {2, 3}});
    cr_assert(b.out.rank == 2 && b.out.dim[0] == 2 && b.out.dim[1] == 3);
    assert_loops(&b, 1, (int64_t[]){6}, (int64_t[]){0}, (int64_t[]){1});
    /* A bias row and a column. */
    b = plan2((tl_k_shape){2, {4, 6}}, (tl_k_shape){1, {6}});
    assert_loops(&b, 2, (int64_t[]){4, 6}, (int64_t[]){6, 1}, (int64_t[]){0, 1});
    b = plan2((tl_k_shape){2, {4, 6}}, (tl_k_shape){2, {4, 1}});
    assert_loops(&b, 2, (int64_t[]){4, 6}, (int64_t[]){6, 1}, (int64_t[]){1, 0});
    /* Size-1 dimensions drop out and what they separated merges:
     * (2, 1, 3, 5) + (2, 1, 1, 5)... y skips axis 2 only. */
    b = plan2((tl_k_shape){5, {2, 1, 3, 1, 5}}, (tl_k_shape){5, {2, 1, 1, 1, 5}});
    assert_loops(&b, 3, (int64_t[]){2, 3, 5}, (int64_t[]){15, 5, 1}, (int64_t[]){5, 0, 1});
    /* Scalars only: one element. */
    b = plan2((tl_k_shape){0, {0}}, (tl_k_shape){1, {1}});
    cr_assert(b.out.rank == 1 && b.size == 1);
    assert_loops(&b, 1, (int64_t[]){1}, (int64_t[]){0}, (int64_t[]){0});
    /* Output shape is symmetric in the operands. */
    tl_k_shape out;
    cr_assert(tl_k_bcast_shape(&(tl_k_shape){2, {3, 1}}, &(tl_k_shape){3, {4, 1, 5}}, &out));
    cr_assert(out.rank == 3 && out.dim[0] == 4 && out.dim[1] == 3 && out.dim[2] == 5);
    cr_assert(!tl_k_bcast_shape(&(tl_k_shape){2, {4, 5}}, &(tl_k_shape){2, {4, 3}}, &out));
}

Test(ops_elementwise, plan_errors_name_the_operand)
{
    tl_k_bcast b;
    tl_k_shape s[3] = {{2, {4, 5}}, {2, {4, 3}}, {0, {0}}};
    cr_assert_eq(tl_k_bcast_init(&b, 2, s), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "broadcast: operand 1 has shape (4, 3), which does not broadcast with (4, 5)");
    tl_k_shape w[3] = {{2, {4, 1}}, {1, {5}}, {1, {3}}};
    cr_assert_eq(tl_k_bcast_init(&b, 3, w), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "broadcast: operand 2 has shape (3,), which does not broadcast with (4, 5)");
    tl_k_shape neg[2] = {{1, {-2}}, {0, {0}}};
    cr_assert_eq(tl_k_bcast_init(&b, 2, neg), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "operand 0 has dimension 0 of size -2") != NULL, "%s", tl_last_error());
    tl_k_shape deep[2] = {{TL_MAX_RANK + 1, {0}}, {0, {0}}};
    cr_assert_eq(tl_k_bcast_init(&b, 2, deep), TL_EINVAL);
}

/* ---- binary ops ------------------------------------------------------------------------ */

/* Operand pairs: broadcasting every way, rank 0 to 5, long runs with tails. */
static const tl_k_shape pairs[][2] = {
    {{3, {4, 1, 5}}, {2, {3, 1}}},
    {{0, {0}}, {2, {3, 4}}},
    {{2, {3, 4}}, {0, {0}}},
    {{1, {1}}, {2, {2, 3}}},
    {{2, {3, 37}}, {2, {3, 37}}},
    {{2, {4, 6}}, {1, {6}}},
    {{1, {6}}, {2, {4, 6}}},
    {{2, {4, 6}}, {2, {4, 1}}},
    {{2, {1, 19}}, {2, {17, 1}}},
    {{5, {2, 1, 3, 1, 2}}, {5, {1, 4, 1, 5, 1}}},
    {{5, {2, 3, 1, 2, 9}}, {3, {3, 1, 9}}},
    {{0, {0}}, {0, {0}}},
    {{2, {1, 1}}, {1, {1}}},
};
#define NPAIRS (sizeof pairs / sizeof pairs[0])

static const char *const binop_names[TL_K_BINOP_COUNT_] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"};

/* x and y for op: pow's base positive, div's divisor away from 0. */
static void binary_inputs(tl_k_binop op, int64_t nx, int64_t ny, uint64_t tag, tk_buf *x, tk_buf *y)
{
    *x = op == TL_K_POW ? tk_rand(nx, tag, 0.5, 2.0) : tk_rand(nx, tag, -2.0, 2.0);
    *y = op == TL_K_DIV ? tk_rand(ny, tag + 1, 0.5, 2.0) : tk_rand(ny, tag + 1, -2.0, 2.0);
}

Test(ops_elementwise, binary_matches_twin)
{
    for (int op = 0; op < TL_K_BINOP_COUNT_; op++)
        for (size_t s = 0; s < NPAIRS; s++) {
            const tl_k_shape *xs = &pairs[s][0], *ys = &pairs[s][1];
            tl_k_bcast b = plan2(*xs, *ys);
            tk_buf x, y, z = tk_zeros(b.size);
            binary_inputs(op, numel(xs), numel(ys), 10 + s, &x, &y);
            tl_k_binary(op, &b, x.f, y.f, z.f);
            tl_k_binary_ref(op, xs, ys, x.d, y.d, z.d);
            /* One rounding for + - * /, exact for max / min, ~1 ulp for powf. */
            tk_assert_close(b.size, z.f, z.d, op == TL_K_POW ? 4e-7 : 1.2e-7, 0.0, binop_names[op]);
            tk_free(&x);
            tk_free(&y);
            tk_free(&z);
        }
}

Test(ops_elementwise, binary_grad_matches_twin)
{
    for (int op = 0; op < TL_K_BINOP_COUNT_; op++)
        for (size_t s = 0; s < NPAIRS; s++) {
            const tl_k_shape *xs = &pairs[s][0], *ys = &pairs[s][1];
            tl_k_bcast b = plan2(*xs, *ys);
            int64_t nx = numel(xs), ny = numel(ys);
            tk_buf x, y, dz = tk_rand(b.size, 30 + s, -1, 1), dx = tk_zeros(nx), dy = tk_zeros(ny);
            binary_inputs(op, nx, ny, 10 + s, &x, &y);
            float *scratch = tk_alloc((size_t)tl_k_binary_grad_scratch(&b) * sizeof(float));
            tl_k_binary_grad(op, &b, x.f, y.f, dz.f, dx.f, dy.f, scratch);
            tl_k_binary_grad_ref(op, xs, ys, x.d, y.d, dz.d, dx.d, dy.d);
            /* Each of the size/n terms summed into an element is below 8 in
             * magnitude and within 4 float32 roundings (2.4e-7) of its twin. */
            tk_assert_close(nx, dx.f, dx.d, 1e-6, 2e-6 * (double)(b.size / nx), binop_names[op]);
            tk_assert_close(ny, dy.f, dy.d, 1e-6, 2e-6 * (double)(b.size / ny), binop_names[op]);
            /* One gradient alone is the same bits. */
            tk_buf only = tk_zeros(ny);
            tl_k_binary_grad(op, &b, x.f, y.f, dz.f, NULL, only.f, scratch);
            tk_assert_same_bits(ny, only.f, dy.f, "dy alone");
            free(scratch);
            tk_free(&only);
            tk_free(&x);
            tk_free(&y);
            tk_free(&dz);
            tk_free(&dx);
            tk_free(&dy);
        }
}

typedef struct bin_ctx {
    tl_k_binop op;
    tl_k_shape xs, ys;
} bin_ctx;

/* x and y end to end. */
static void binary_fwd(const double *xy, double *z, void *ctx)
{
    const bin_ctx *c = ctx;
    tl_k_binary_ref(c->op, &c->xs, &c->ys, xy, xy + numel(&c->xs), z);
}

Test(ops_elementwise, binary_grads_match_finite_differences)
{
    const size_t picks[] = {0, 1, 3, 5, 8, 9, 11};
    for (int op = 0; op < TL_K_BINOP_COUNT_; op++)
        for (size_t p = 0; p < sizeof picks / sizeof picks[0]; p++) {
            bin_ctx c = {op, pairs[picks[p]][0], pairs[picks[p]][1]};
            tl_k_shape out;
            cr_assert(tl_k_bcast_shape(&c.xs, &c.ys, &out));
            int64_t nx = numel(&c.xs), ny = numel(&c.ys), nz = numel(&out);
            tk_buf x, y, dz = tk_rand(nz, 40 + p, -1, 1);
            binary_inputs(op, nx, ny, 50 + p, &x, &y);
            double *xy = tk_alloc((size_t)(nx + ny) * sizeof(double));
            double *dxy = tk_alloc((size_t)(nx + ny) * sizeof(double));
            memcpy(xy, x.d, (size_t)nx * sizeof(double));
            memcpy(xy + nx, y.d, (size_t)ny * sizeof(double));
            tl_k_binary_grad_ref(op, &c.xs, &c.ys, x.d, y.d, dz.d, dxy, dxy + nx);
            tk_check_grad(binary_fwd, &c, nx + ny, nz, xy, dz.d, dxy, binop_names[op]);
            free(xy);
            free(dxy);
            tk_free(&x);
            tk_free(&y);
            tk_free(&dz);
        }
}

/* Ties, NaN, division by zero, pow's log at x <= 0, worked by hand. */
Test(ops_elementwise, binary_edges)
{
    tl_k_bcast b = plan2((tl_k_shape){1, {4}}, (tl_k_shape){1, {4}});
    const float x[4] = {1, 2, NAN, 3}, y[4] = {1, NAN, 0, 3}, dz[4] = {1, 1, 1, 1};
    float z[4], dx[4], dy[4];
    tl_k_binary(TL_K_MAXIMUM, &b, x, y, z);
    cr_assert(z[0] == 1 && isnan(z[1]) && isnan(z[2]) && z[3] == 3);
    tl_k_binary(TL_K_MINIMUM, &b, x, y, z);
    cr_assert(z[0] == 1 && isnan(z[1]) && isnan(z[2]) && z[3] == 3);
    /* A tie sends everything to x, for maximum and for minimum. */
    for (int op = TL_K_MAXIMUM; op <= TL_K_MINIMUM; op++) {
        tl_k_binary_grad(op, &b, x, y, dz, dx, dy, NULL);
        cr_assert(dx[0] == 1 && dy[0] == 0 && dx[3] == 1 && dy[3] == 0, "%s tie", binop_names[op]);
    }
    const float num[4] = {1, -1, 0, 2}, zero[4] = {0, 0, 0, 0};
    tl_k_binary(TL_K_DIV, &b, num, zero, z);
    cr_assert(isinf(z[0]) && z[0] > 0 && isinf(z[1]) && z[1] < 0 && isnan(z[2]));
    /* pow: dy is 0 where x <= 0 and x^y is finite, NaN where x^y is not. */
    const float px[4] = {-2, 0, 4, 0}, py[4] = {2, 3, 0.5f, -1};
    tl_k_binary(TL_K_POW, &b, px, py, z);
    cr_assert(z[0] == 4 && z[1] == 0 && z[2] == 2 && isinf(z[3]));
    tl_k_binary_grad(TL_K_POW, &b, px, py, dz, dx, dy, NULL);
    cr_assert(dy[0] == 0 && dy[1] == 0 && isnan(dy[3]), "pow dy %g %g %g", (double)dy[0], (double)dy[1], (double)dy[3]);
    cr_assert(fabsf(dy[2] - 2.0f * logf(4.0f)) < 1e-6f && dx[0] == -4 && dx[2] == 0.25f);
}

/* A broadcast operand's gradient is the sum of its terms in output order;
 * long sums stay accurate (float64) and the bits repeat. */
Test(ops_elementwise, broadcast_gradient_sums)
{
    tl_k_bcast b = plan2((tl_k_shape){2, {1000, 7}}, (tl_k_shape){1, {7}});
    tk_buf x = tk_rand(7000, 1, -1, 1), y = tk_rand(7, 2, -1, 1), dz = tk_rand(7000, 3, -1, 1);
    tk_buf dy1 = tk_zeros(7), dy2 = tk_zeros(7);
    cr_assert_eq(tl_k_binary_grad_scratch(&b), 7000 + 2 * 7 + 1);
    float *scratch = tk_alloc((size_t)(tl_k_binary_grad_scratch(&b) + 1) * sizeof(float)); /* two alignments */
    tl_k_binary_grad(TL_K_ADD, &b, x.f, y.f, dz.f, NULL, dy1.f, scratch);
    tl_k_binary_grad(TL_K_ADD, &b, x.f, y.f, dz.f, NULL, dy2.f, scratch + 1);
    tk_assert_same_bits(7, dy1.f, dy2.f, "sums twice");
    for (int c = 0; c < 7; c++) {
        double s = 0;
        for (int r = 0; r < 1000; r++)
            s += dz.d[r * 7 + c];
        cr_assert_eq(dy1.f[c], (float)s, "column %d: %.9g, want %.9g", c, (double)dy1.f[c], s);
    }
    cr_assert_eq(tl_k_binary_grad_scratch(&(tl_k_bcast){.nin = 2, .size = 6, .in_size = {6, 6}}), 0);
    free(scratch);
    tk_free(&x);
    tk_free(&y);
    tk_free(&dz);
    tk_free(&dy1);
    tk_free(&dy2);
}

/* ---- unary ops ---------------------------------------------------------------------------- */

static const char *const unop_names[TL_K_UNOP_COUNT_] = {
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "square", "clip", "gelu", "gelu_tanh", "silu", "leaky_relu", "elu",
    "softplus"};

/* Parameters (rounded to float32 as the graph passes them) and the input range. */
static void unary_setup(tl_k_unop op, double *a, double *b, double *lo, double *hi)
{
    *a = op == TL_K_CLIP ? -0.5 : op == TL_K_LEAKY_RELU ? 0.2 : op == TL_K_ELU ? 1.5 : 0.0;
    *b = op == TL_K_CLIP ? 0.75 : 0.0;
    *a = (float)*a;
    bool positive = op == TL_K_LOG || op == TL_K_SQRT || op == TL_K_RSQRT;
    *lo = positive ? 0.1 : -4.0;
    *hi = 4.0;
}

Test(ops_elementwise, unary_and_grad_match_twins)
{
    const int64_t sizes[] = {0, 1, 7, 8, 37, 1000};
    for (int op = 0; op < TL_K_UNOP_COUNT_; op++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int64_t n = sizes[s];
            double a, b, lo, hi;
            unary_setup(op, &a, &b, &lo, &hi);
            tk_buf x = tk_rand(n, 60 + s, lo, hi), y = tk_zeros(n), dy = tk_rand(n, 70 + s, -1, 1), dx = tk_zeros(n);
            tl_k_unary(op, n, (float)a, (float)b, x.f, y.f);
            tl_k_unary_ref(op, n, a, b, x.d, y.d);
            /* Library functions within a few ulp; atol for results near 0
             * (gelu, silu, softplus of large negatives, elu). */
            tk_assert_close(n, y.f, y.d, 1e-6, 1e-7, unop_names[op]);
            /* The backward kernels read the forward output: give each its own. */
            tk_buf yf = tk_zeros(n);
            for (int64_t i = 0; i < n; i++)
                yf.d[i] = yf.f[i] = y.f[i];
            tl_k_unary_grad(op, n, (float)a, (float)b, x.f, y.f, dy.f, dx.f);
            tl_k_unary_grad_ref(op, n, a, b, x.d, yf.d, dy.d, dx.d);
            tk_assert_close(n, dx.f, dx.d, 2e-6, 2e-7, unop_names[op]);
            tk_free(&x);
            tk_free(&y);
            tk_free(&yf);
            tk_free(&dy);
            tk_free(&dx);
        }
}

typedef struct un_ctx {
    tl_k_unop op;
    double a, b;
    int64_t n;
} un_ctx;

static void unary_fwd(const double *x, double *y, void *ctx)
{
    const un_ctx *c = ctx;
    tl_k_unary_ref(c->op, c->n, c->a, c->b, x, y);
}

Test(ops_elementwise, unary_grads_match_finite_differences)
{
    for (int op = 0; op < TL_K_UNOP_COUNT_; op++) {
        un_ctx c = {op, 0, 0, 41};
        double lo, hi;
        unary_setup(op, &c.a, &c.b, &lo, &hi);
        tk_buf x = tk_rand(c.n, 80, lo, hi), y = tk_zeros(c.n), dy = tk_rand(c.n, 81, -1, 1), dx = tk_zeros(c.n);
        /* Keep away from the kinks (0 and the clip bounds) by more than the step. */
        for (int64_t i = 0; i < c.n; i++)
            cr_assert(fabs(x.d[i]) > 1e-4 && fabs(x.d[i] - c.a) > 1e-4 && fabs(x.d[i] - c.b) > 1e-4);
        tl_k_unary_ref(op, c.n, c.a, c.b, x.d, y.d);
        tl_k_unary_grad_ref(op, c.n, c.a, c.b, x.d, y.d, dy.d, dx.d);
        tk_check_grad(unary_fwd, &c, c.n, c.n, x.d, dy.d, dx.d, unop_names[op]);
        tk_free(&x);
        tk_free(&y);
        tk_free(&dy);
        tk_free(&dx);
    }
}

static float un1(tl_k_unop op, float a, float b, float x)
{
    float y;
    tl_k_unary(op, 1, a, b, &x, &y);
    return y;
}

static float un_grad1(tl_k_unop op, float a, float b, float x)
{
    float y = un1(op, a, b, x), dy = 1, dx;
    tl_k_unary_grad(op, 1, a, b, &x, &y, &dy, &dx);
    return dx;
}

/* TensorFlow's values at the edges. */
Test(ops_elementwise, unary_edges)
{
    cr_assert(isinf(un1(TL_K_LOG, 0, 0, 0.0f)) && un1(TL_K_LOG, 0, 0, 0.0f) < 0);
    cr_assert(isnan(un1(TL_K_LOG, 0, 0, -1.0f)));
    cr_assert(isnan(un1(TL_K_SQRT, 0, 0, -1.0f)));
    cr_assert(isinf(un1(TL_K_RSQRT, 0, 0, 0.0f)));
    cr_assert(isinf(un_grad1(TL_K_SQRT, 0, 0, 0.0f)));
    cr_assert_eq(un_grad1(TL_K_ABS, 0, 0, 0.0f), 0.0f, "sign(0) = 0");
    cr_assert_eq(un_grad1(TL_K_ABS, 0, 0, -3.0f), -1.0f);
    /* clip passes the gradient at its bounds, NaN through its value. */
    cr_assert_eq(un_grad1(TL_K_CLIP, -1, 1, -1.0f), 1.0f);
    cr_assert_eq(un_grad1(TL_K_CLIP, -1, 1, 1.0f), 1.0f);
    cr_assert_eq(un_grad1(TL_K_CLIP, -1, 1, 1.5f), 0.0f);
    cr_assert_eq(un1(TL_K_CLIP, -1, 1, -7.0f), -1.0f);
    cr_assert(isnan(un1(TL_K_CLIP, -1, 1, NAN)));
    /* leaky_relu and elu have slope alpha at 0. */
    cr_assert_eq(un_grad1(TL_K_LEAKY_RELU, 0.2f, 0, 0.0f), 0.2f);
    cr_assert_eq(un1(TL_K_LEAKY_RELU, 0.2f, 0, -5.0f), -1.0f);
    cr_assert_eq(un_grad1(TL_K_ELU, 1.5f, 0, 0.0f), 1.5f);
    cr_assert_eq(un_grad1(TL_K_ELU, 1.0f, 0, 2.0f), 1.0f);
    cr_assert(fabsf(un1(TL_K_ELU, 1.5f, 0, -30.0f) + 1.5f) < 1e-6f);
    /* softplus neither overflows nor loses large inputs. */
    cr_assert_eq(un1(TL_K_SOFTPLUS, 0, 0, 100.0f), 100.0f);
    cr_assert(un1(TL_K_SOFTPLUS, 0, 0, -100.0f) >= 0 && un1(TL_K_SOFTPLUS, 0, 0, -100.0f) < 1e-40f);
    cr_assert_eq(un_grad1(TL_K_SOFTPLUS, 0, 0, -200.0f), 0.0f);
    cr_assert(fabsf(un1(TL_K_SOFTPLUS, 0, 0, 0.0f) - logf(2.0f)) < 1e-7f);
    /* tf.nn.gelu(1.0) and gelu(1.0, approximate=True), silu(1). */
    cr_assert(fabsf(un1(TL_K_GELU, 0, 0, 1.0f) - 0.8413447f) < 1e-6f);
    cr_assert(fabsf(un1(TL_K_GELU_TANH, 0, 0, 1.0f) - 0.8411920f) < 1e-6f);
    cr_assert(fabsf(un1(TL_K_SILU, 0, 0, 1.0f) - 0.7310586f) < 1e-6f);
    cr_assert_eq(un1(TL_K_GELU, 0, 0, -20.0f), -0.0f);
}

/* ---- comparisons and where ----------------------------------------------------------------- */

static const char *const cmp_names[TL_K_CMPOP_COUNT_] = {"equal", "not_equal", "less", "less_equal", "greater",
                                                        "greater_equal"};

Test(ops_elementwise, compare_f32_matches_twin)
{
    for (int op = 0; op < TL_K_CMPOP_COUNT_; op++)
        for (size_t s = 0; s < NPAIRS; s++) {
            const tl_k_shape *xs = &pairs[s][0], *ys = &pairs[s][1];
            tl_k_bcast b = plan2(*xs, *ys);
            /* Few distinct values, so equal pairs occur. */
            tk_buf x = tk_rand(numel(xs), 90 + s, -2, 2), y = tk_rand(numel(ys), 91 + s, -2, 2), z = tk_zeros(b.size);
            for (int64_t i = 0; i < x.n; i++)
                x.d[i] = x.f[i] = roundf(x.f[i]);
            for (int64_t i = 0; i < y.n; i++)
                y.d[i] = y.f[i] = roundf(y.f[i]);
            tl_k_compare(op, TL_K_F32, &b, x.f, y.f, z.f);
            tl_k_compare_ref(op, xs, ys, x.d, y.d, z.d);
            tk_assert_close(b.size, z.f, z.d, 0, 0, cmp_names[op]);
            tk_free(&x);
            tk_free(&y);
            tk_free(&z);
        }
}

Test(ops_elementwise, compare_integers_exactly)
{
    /* 2^53 and 2^53 + 1 are one double; as int64 they differ. */
    const int64_t big = (int64_t)1 << 53;
    const int64_t x64[3] = {big, big + 1, -5}, y64[1] = {big};
    tl_k_bcast b = plan2((tl_k_shape){1, {3}}, (tl_k_shape){0, {0}});
    float z[3];
    tl_k_compare(TL_K_EQUAL, TL_K_I64, &b, x64, y64, z);
    cr_assert(z[0] == 1 && z[1] == 0 && z[2] == 0);
    tl_k_compare(TL_K_GREATER, TL_K_I64, &b, x64, y64, z);
    cr_assert(z[0] == 0 && z[1] == 1 && z[2] == 0);
    /* int32 (2, 3) against a column (2, 1). */
    const int32_t x32[6] = {1, 2, 3, 4, 5, 6}, y32[2] = {2, 5};
    b = plan2((tl_k_shape){2, {2, 3}}, (tl_k_shape){2, {2, 1}});
    float w[6];
    tl_k_compare(TL_K_LESS_EQUAL, TL_K_I32, &b, x32, y32, w);
    const float want[6] = {1, 1, 0, 1, 1, 0};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(w[i], want[i], "less_equal [%d] = %g", i, (double)w[i]);
    tl_k_compare(TL_K_NOT_EQUAL, TL_K_I32, &b, x32, y32, w);
    const float ne[6] = {1, 0, 1, 1, 0, 1};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(w[i], ne[i], "not_equal [%d] = %g", i, (double)w[i]);
    /* NaN: false but for not_equal. */
    const float nan1[1] = {NAN};
    b = plan2((tl_k_shape){0, {0}}, (tl_k_shape){0, {0}});
    for (int op = 0; op < TL_K_CMPOP_COUNT_; op++) {
        tl_k_compare(op, TL_K_F32, &b, nan1, nan1, z);
        cr_assert_eq(z[0], op == TL_K_NOT_EQUAL ? 1.0f : 0.0f, "%s(NaN, NaN)", cmp_names[op]);
    }
}

/* (cond, x, y) shapes for where. */
static const tl_k_shape triples[][3] = {
    {{2, {4, 5}}, {2, {4, 5}}, {2, {4, 5}}},
    {{2, {4, 1}}, {1, {5}}, {0, {0}}},
    {{1, {5}}, {2, {4, 1}}, {2, {4, 5}}},
    {{0, {0}}, {2, {3, 2}}, {1, {2}}},
    {{3, {2, 1, 3}}, {2, {4, 1}}, {1, {3}}},
    {{5, {1, 2, 1, 3, 1}}, {5, {2, 1, 2, 1, 4}}, {1, {1}}},
};
#define NTRIPLES (sizeof triples / sizeof triples[0])

static tl_k_bcast plan3(const tl_k_shape *s)
{
    tl_k_bcast b;
    cr_assert_eq(tl_k_bcast_init(&b, 3, s), TL_OK, "%s", tl_last_error());
    return b;
}

Test(ops_elementwise, where_and_grad_match_twins)
{
    for (size_t t = 0; t < NTRIPLES; t++)
        for (int as_int = 0; as_int < 2; as_int++) {
            const tl_k_shape *s = triples[t];
            tl_k_bcast b = plan3(s);
            int64_t nc = numel(&s[0]), nx = numel(&s[1]), ny = numel(&s[2]);
            tk_buf c = tk_rand(nc, 100 + t, -1, 1), x = tk_rand(nx, 101 + t, -1, 1), y = tk_rand(ny, 102 + t, -1, 1);
            tk_buf z = tk_zeros(b.size), dz = tk_rand(b.size, 103 + t, -1, 1), dx = tk_zeros(nx), dy = tk_zeros(ny);
            int32_t *ci = tk_alloc((size_t)nc * sizeof(int32_t));
            for (int64_t i = 0; i < nc; i++) { /* about half true; NaN counts as true */
                c.f[i] = c.f[i] > 0 ? (i % 3 == 0 ? NAN : c.f[i]) : 0.0f;
                c.d[i] = c.f[i];
                ci[i] = c.f[i] != 0 ? (int32_t)(i + 1) * (i % 2 ? -1 : 1) : 0;
            }
            tl_k_elem dt = as_int ? TL_K_I32 : TL_K_F32;
            const void *cond = as_int ? (const void *)ci : (const void *)c.f;
            tl_k_where(&b, dt, cond, x.f, y.f, z.f);
            tl_k_where_ref(&s[0], &s[1], &s[2], c.d, x.d, y.d, z.d);
            tk_assert_close(b.size, z.f, z.d, 0, 0, "where");
            float *scratch = tk_alloc((size_t)tl_k_binary_grad_scratch(&b) * sizeof(float));
            tl_k_where_grad(&b, dt, cond, dz.f, dx.f, dy.f, scratch);
            tl_k_where_grad_ref(&s[0], &s[1], &s[2], c.d, dz.d, dx.d, dy.d);
            tk_assert_close(nx, dx.f, dx.d, 1e-6, 1e-7 * (double)(b.size / nx), "where dx");
            tk_assert_close(ny, dy.f, dy.d, 1e-6, 1e-7 * (double)(b.size / ny), "where dy");
            free(scratch);
            free(ci);
            tk_free(&c);
            tk_free(&x);
            tk_free(&y);
            tk_free(&z);
            tk_free(&dz);
            tk_free(&dx);
            tk_free(&dy);
        }
}

typedef struct where_ctx {
    const tl_k_shape *s;
    const double *cond;
} where_ctx;

static void where_fwd(const double *xy, double *z, void *ctx)
{
    const where_ctx *c = ctx;
    tl_k_where_ref(&c->s[0], &c->s[1], &c->s[2], c->cond, xy, xy + numel(&c->s[1]), z);
}

Test(ops_elementwise, where_grad_matches_finite_differences)
{
    for (size_t t = 0; t < NTRIPLES; t++) {
        const tl_k_shape *s = triples[t];
        tl_k_shape out;
        cr_assert(tl_k_bcast_shape(&s[0], &s[1], &out) && tl_k_bcast_shape(&out, &s[2], &out));
        int64_t nc = numel(&s[0]), nx = numel(&s[1]), ny = numel(&s[2]), nz = numel(&out);
        tk_buf c = tk_rand(nc, 110 + t, -1, 1), xy = tk_rand(nx + ny, 111 + t, -1, 1), dz = tk_rand(nz, 112, -1, 1);
        for (int64_t i = 0; i < nc; i++)
            c.d[i] = c.d[i] > 0 ? 1.0 : 0.0;
        double *dxy = tk_alloc((size_t)(nx + ny) * sizeof(double));
        tl_k_where_grad_ref(&s[0], &s[1], &s[2], c.d, dz.d, dxy, dxy + nx);
        where_ctx ctx = {s, c.d};
        tk_check_grad(where_fwd, &ctx, nx + ny, nz, xy.d, dz.d, dxy, "where");
        free(dxy);
        tk_free(&c);
        tk_free(&xy);
        tk_free(&dz);
    }
}

/* ---- casts and constants ---------------------------------------------------------------------- */

Test(ops_elementwise, cast_float_to_int_truncates_and_saturates)
{
    const float f[10] = {2.7f, -2.7f, 3e9f, -3e9f, NAN, INFINITY, -INFINITY, 2147483520.0f, -2147483648.0f, -0.5f};
    int32_t i32[10];
    tl_k_cast(10, TL_K_F32, f, TL_K_I32, i32);
    const int32_t w32[10] = {2, -2, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 2147483520, INT32_MIN, 0};
    for (int i = 0; i < 10; i++)
        cr_assert_eq(i32[i], w32[i], "float32 %g → int32 %d, want %d", (double)f[i], i32[i], w32[i]);
    int64_t i64[10];
    tl_k_cast(10, TL_K_F32, f, TL_K_I64, i64);
    const int64_t w64[10] = {2, -2, 3000000000, -3000000000, 0, INT64_MAX, INT64_MIN, 2147483520, -2147483648, 0};
    for (int i = 0; i < 10; i++)
        cr_assert_eq(i64[i], w64[i], "float32 %g → int64 %lld", (double)f[i], (long long)i64[i]);
    const float huge[3] = {1e19f, -1e19f, 9.0e18f};
    tl_k_cast(3, TL_K_F32, huge, TL_K_I64, i64);
    cr_assert(i64[0] == INT64_MAX && i64[1] == INT64_MIN && i64[2] == (int64_t)9.0e18f);
}

Test(ops_elementwise, cast_between_integers_and_to_float)
{
    const int64_t w[5] = {((int64_t)1 << 32) + 5, (int64_t)1 << 31, -1, ((int64_t)3 << 31) + 1, INT64_MIN};
    int32_t n[5];
    tl_k_cast(5, TL_K_I64, w, TL_K_I32, n);
    const int32_t want[5] = {5, INT32_MIN, -1, INT32_MIN + 1, 0};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(n[i], want[i], "int64 %lld → int32 %d, want %d", (long long)w[i], n[i], want[i]);
    int64_t back[5];
    tl_k_cast(5, TL_K_I32, n, TL_K_I64, back);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(back[i], (int64_t)want[i]);
    /* Round to nearest even: 2^24 + 1 → 2^24, 2^53 + 1 → 2^53, 2^24 + 3 → 2^24 + 4. */
    const int32_t a[3] = {16777217, 16777219, -7};
    float f[3];
    tl_k_cast(3, TL_K_I32, a, TL_K_F32, f);
    cr_assert(f[0] == 16777216.0f && f[1] == 16777220.0f && f[2] == -7.0f);
    const int64_t b[2] = {((int64_t)1 << 53) + 1, -((int64_t)1 << 40)};
    tl_k_cast(2, TL_K_I64, b, TL_K_F32, f);
    cr_assert(f[0] == 9007199254740992.0f && f[1] == -1099511627776.0f);
    /* Round trips of what fits. */
    const int32_t labels[4] = {0, 1, 2, -9};
    float lf[4];
    int32_t again[4];
    tl_k_cast(4, TL_K_I32, labels, TL_K_F32, lf);
    tl_k_cast(4, TL_K_F32, lf, TL_K_I32, again);
    cr_assert(memcmp(labels, again, sizeof labels) == 0);
    /* The same dtype copies; nothing to do for n = 0. */
    tl_k_cast(4, TL_K_I32, labels, TL_K_I32, again);
    cr_assert(memcmp(labels, again, sizeof labels) == 0);
    tl_k_cast(0, TL_K_F32, NULL, TL_K_I64, NULL);
}

Test(ops_elementwise, constant_fills)
{
    float y[19];
    tl_k_constant(19, (float)0.1, y);
    for (int i = 0; i < 19; i++)
        cr_assert_eq(y[i], 0.1f);
    tl_k_constant(0, 1.0f, NULL);
}

/* The shape family's kernels (src/kernels/shape.h): transpose, broadcast,
 * tile, pad, gather and one-hot against their float64 twins, every backward
 * twin against finite differences of its forward twin, and bad geometry. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/shape.h"
#include "test_kernels_util.h"

#define ASSERT_ERROR(call, frag)                                                                             \
    do {                                                                                                     \
        tl_status st_ = (call);                                                                              \
        cr_assert_eq(st_, TL_EINVAL, "%s: got %s (%s)", #call, tl_err_name(st_), tl_last_error());          \
        cr_assert(strstr(tl_last_error(), (frag)) != NULL, "message \"%s\" lacks \"%s\"", tl_last_error(), \
                  (frag));                                                                                   \
    } while (0)

TestSuite(ops_shape_kernels, .init = tk_setup);

static int64_t numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    return n;
}

/* ---- transpose --------------------------------------------------------------------- */

/* Forward and backward against the twins, exactly (they only move elements),
 * and the backward undoing the forward. */
static void check_transpose(int rank, const int64_t *shape, const int *perm)
{
    int64_t n = numel(rank, shape);
    tk_buf x = tk_rand(n, 1, -1, 1), y = tk_zeros(n), back = tk_zeros(n), dy = tk_rand(n, 2, -1, 1),
           dx = tk_zeros(n);
    cr_assert_eq(tl_k_transpose(rank, shape, perm, x.f, y.f), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_k_transpose_ref(rank, shape, perm, x.d, y.d), TL_OK);
    tk_assert_close(n, y.f, y.d, 0.0, 0.0, "transpose");
    cr_assert_eq(tl_k_transpose_grad(rank, shape, perm, dy.f, dx.f), TL_OK);
    cr_assert_eq(tl_k_transpose_grad_ref(rank, shape, perm, dy.d, dx.d), TL_OK);
    tk_assert_close(n, dx.f, dx.d, 0.0, 0.0, "transpose_grad");
    cr_assert_eq(tl_k_transpose_grad(rank, shape, perm, y.f, back.f), TL_OK);
    tk_assert_same_bits(n, back.f, x.f, "transpose_grad of transpose");
    tk_free(&x);
    tk_free(&y);
    tk_free(&back);
    tk_free(&dy);
    tk_free(&dx);
}

/* Every permutation of rank (Heap's algorithm), checked on shape. */
static void all_perms(int rank, const int64_t *shape)
{
    int perm[8], c[8] = {0};
    for (int d = 0; d < rank; d++)
        perm[d] = d;
    check_transpose(rank, shape, perm);
    for (int i = 1; i < rank;) {
        if (c[i] < i) {
            int j = i % 2 ? c[i] : 0, t = perm[j];
            perm[j] = perm[i];
            perm[i] = t;
            check_transpose(rank, shape, perm);
            c[i]++;
            i = 1;
        } else {
            c[i++] = 0;
        }
    }
}

Test(ops_shape_kernels, transpose_every_permutation_ranks_1_to_4)
{
    const int64_t r1[1] = {7}, r2[2] = {3, 5}, r3[3] = {2, 3, 4}, r3b[3] = {1, 5, 1}, r4[4] = {2, 1, 3, 4},
                  r4b[4] = {3, 4, 5, 6}, r2b[2] = {1, 1};
    all_perms(1, r1);
    all_perms(2, r2);
    all_perms(2, r2b);
    all_perms(3, r3);
    all_perms(3, r3b);
    all_perms(4, r4);
    all_perms(4, r4b);
}

Test(ops_shape_kernels, transpose_ranks_0_5_8_and_16)
{
    float x = 3.5f, y = 0;
    double xd = 3.5, yd = 0;
    cr_assert_eq(tl_k_transpose(0, NULL, NULL, &x, &y), TL_OK);
    cr_assert_eq(tl_k_transpose_ref(0, NULL, NULL, &xd, &yd), TL_OK);
    cr_assert(y == 3.5f && yd == 3.5);
    const int64_t s5[5] = {2, 3, 1, 4, 5};
    const int p5[][5] = {{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {0, 2, 1, 4, 3}, {3, 4, 0, 1, 2}, {1, 0, 4, 2, 3}};
    for (int k = 0; k < 5; k++)
        check_transpose(5, s5, p5[k]);
    const int64_t s8[8] = {2, 3, 2, 1, 2, 3, 2, 2};
    const int p8[][8] = {{7, 6, 5, 4, 3, 2, 1, 0}, {0, 1, 2, 3, 4, 5, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5}};
    for (int k = 0; k < 3; k++)
        check_transpose(8, s8, p8[k]);
    int64_t s16[TL_K_MAX_DIMS];
    int p16[TL_K_MAX_DIMS];
    for (int d = 0; d < TL_K_MAX_DIMS; d++) {
        s16[d] = d % 3 == 0 ? 2 : 1 + d % 2;
        p16[d] = (d * 5) % TL_K_MAX_DIMS; /* 5 is prime to 16 */
    }
    check_transpose(TL_K_MAX_DIMS, s16, p16);
}

/* A worked example: the innermost run kept whole, (2, 2, 3) -> (2, 2, 3) with
 * the outer two axes swapped. */
Test(ops_shape_kernels, transpose_worked_example)
{
    const float x[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const int64_t s[3] = {2, 2, 3};
    float y[12];
    cr_assert_eq(tl_k_transpose(3, s, (const int[]){1, 0, 2}, x, y), TL_OK);
    const float want[12] = {0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11};
    for (int i = 0; i < 12; i++)
        cr_assert_eq(y[i], want[i], "y[%d] = %g", i, (double)y[i]);
    const int64_t m[2] = {2, 3};
    cr_assert_eq(tl_k_transpose(2, m, (const int[]){1, 0}, x, y), TL_OK);
    const float want2[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(y[i], want2[i], "y[%d] = %g", i, (double)y[i]);
}

typedef struct perm_ctx {
    int rank;
    int64_t shape[5];
    int perm[5];
} perm_ctx;

static void transpose_fwd(const double *x, double *y, void *ctx)
{
    const perm_ctx *c = ctx;
    cr_assert_eq(tl_k_transpose_ref(c->rank, c->shape, c->perm, x, y), TL_OK);
}

Test(ops_shape_kernels, transpose_grad_matches_finite_differences)
{
    const perm_ctx cases[] = {{2, {3, 4}, {1, 0}}, {3, {2, 1, 3}, {2, 0, 1}}, {4, {2, 3, 2, 2}, {3, 1, 0, 2}}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const perm_ctx *c = &cases[k];
        int64_t n = numel(c->rank, c->shape);
        tk_buf x = tk_rand(n, 3, -1, 1), dy = tk_rand(n, 4, -1, 1), dx = tk_zeros(n);
        cr_assert_eq(tl_k_transpose_grad_ref(c->rank, c->shape, c->perm, dy.d, dx.d), TL_OK);
        tk_check_grad(transpose_fwd, (void *)c, n, n, x.d, dy.d, dx.d, "transpose");
        tk_free(&x);
        tk_free(&dy);
        tk_free(&dx);
    }
}

/* ---- broadcast and tile -------------------------------------------------------------- */

typedef struct bcast_case {
    int rank;
    int64_t x[5], y[5];
} bcast_case;

static const bcast_case bcasts[] = {
    {0, {0}, {0}},
    {1, {1}, {5}},
    {1, {3}, {3}},
    {2, {1, 4}, {3, 4}},
    {2, {3, 1}, {3, 4}},
    {2, {1, 1}, {2, 3}},
    {2, {1, 130}, {3, 130}}, /* chunks of 64 and a tail */
    {2, {1, 1}, {1, 1}},
    {3, {2, 1, 3}, {2, 4, 3}},
    {3, {1, 3, 1}, {5, 3, 7}},
    {4, {1, 3, 1, 5}, {2, 3, 4, 5}},
    {5, {2, 1, 1, 1, 3}, {2, 3, 1, 4, 3}},
    {5, {1, 2, 1, 2, 1}, {3, 2, 3, 2, 3}},
};

static void check_broadcast(const bcast_case *c)
{
    int64_t nx = numel(c->rank, c->x), ny = numel(c->rank, c->y);
    tk_buf x = tk_rand(nx, 5, -1, 1), y = tk_zeros(ny), dy = tk_rand(ny, 6, -1, 1), dx = tk_zeros(nx);
    cr_assert_eq(tl_k_broadcast(c->rank, c->x, c->y, x.f, y.f), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_k_broadcast_ref(c->rank, c->x, c->y, x.d, y.d), TL_OK);
    tk_assert_close(ny, y.f, y.d, 0.0, 0.0, "broadcast");
    cr_assert_eq(tl_k_broadcast_grad(c->rank, c->x, c->y, dy.f, dx.f), TL_OK);
    cr_assert_eq(tl_k_broadcast_grad_ref(c->rank, c->x, c->y, dy.d, dx.d), TL_OK);
    /* The same float64 sum in the same order, rounded once. */
    tk_assert_close(nx, dx.f, dx.d, 6e-8, 1e-12, "broadcast_grad");
    tk_free(&x);
    tk_free(&y);
    tk_free(&dy);
    tk_free(&dx);
}

Test(ops_shape_kernels, broadcast_and_grad_match_twins)
{
    for (size_t k = 0; k < sizeof bcasts / sizeof bcasts[0]; k++)
        check_broadcast(&bcasts[k]);
}

/* x copied nowhere (a dim of 0 in y) has gradient 0, not stale memory. */
Test(ops_shape_kernels, broadcast_to_empty_zeroes_the_gradient)
{
    const int64_t xs[2] = {2, 1}, ys[2] = {2, 0};
    float dx[2] = {7, 7}, y[1] = {9};
    const float x[2] = {1, 2};
    cr_assert_eq(tl_k_broadcast(2, xs, ys, x, y), TL_OK);
    cr_assert_eq(y[0], 9.0f);
    cr_assert_eq(tl_k_broadcast_grad(2, xs, ys, NULL, dx), TL_OK);
    cr_assert(dx[0] == 0.0f && dx[1] == 0.0f);
}

typedef struct tile_case {
    int rank;
    int64_t x[5], m[5];
} tile_case;

static const tile_case tiles[] = {
    {0, {0}, {0}},
    {1, {3}, {2}},
    {1, {1}, {5}},
    {2, {2, 3}, {1, 1}},
    {2, {2, 3}, {3, 2}},
    {2, {1, 70}, {2, 1}},
    {3, {2, 1, 3}, {2, 3, 1}},
    {4, {1, 2, 1, 3}, {3, 1, 2, 2}},
    {5, {2, 1, 2, 1, 2}, {1, 2, 2, 3, 1}},
};

static void tile_shape(const tile_case *c, int64_t *y)
{
    for (int d = 0; d < c->rank; d++)
        y[d] = c->x[d] * c->m[d];
}

Test(ops_shape_kernels, tile_and_grad_match_twins)
{
    for (size_t k = 0; k < sizeof tiles / sizeof tiles[0]; k++) {
        const tile_case *c = &tiles[k];
        int64_t ys[5];
        tile_shape(c, ys);
        int64_t nx = numel(c->rank, c->x), ny = numel(c->rank, ys);
        tk_buf x = tk_rand(nx, 7, -1, 1), y = tk_zeros(ny), dy = tk_rand(ny, 8, -1, 1), dx = tk_zeros(nx);
        cr_assert_eq(tl_k_tile(c->rank, c->x, c->m, x.f, y.f), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_k_tile_ref(c->rank, c->x, c->m, x.d, y.d), TL_OK);
        tk_assert_close(ny, y.f, y.d, 0.0, 0.0, "tile");
        cr_assert_eq(tl_k_tile_grad(c->rank, c->x, c->m, dy.f, dx.f), TL_OK);
        cr_assert_eq(tl_k_tile_grad_ref(c->rank, c->x, c->m, dy.d, dx.d), TL_OK);
        tk_assert_close(nx, dx.f, dx.d, 6e-8, 1e-12, "tile_grad");
        tk_free(&x);
        tk_free(&y);
        tk_free(&dy);
        tk_free(&dx);
    }
}

Test(ops_shape_kernels, tile_worked_example)
{
    const float x[4] = {1, 2, 3, 4}; /* (2, 2) */
    const int64_t s[2] = {2, 2}, m[2] = {2, 3};
    float y[24], dx[4];
    cr_assert_eq(tl_k_tile(2, s, m, x, y), TL_OK);
    const float want[24] = {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4};
    for (int i = 0; i < 24; i++)
        cr_assert_eq(y[i], want[i], "y[%d] = %g", i, (double)y[i]);
    float ones[24];
    for (int i = 0; i < 24; i++)
        ones[i] = 1;
    cr_assert_eq(tl_k_tile_grad(2, s, m, ones, dx), TL_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(dx[i], 6.0f, "each element is in 6 tiles, dx[%d] = %g", i, (double)dx[i]);
}

static void broadcast_fwd(const double *x, double *y, void *ctx)
{
    const bcast_case *c = ctx;
    cr_assert_eq(tl_k_broadcast_ref(c->rank, c->x, c->y, x, y), TL_OK);
}

static void tile_fwd(const double *x, double *y, void *ctx)
{
    const tile_case *c = ctx;
    cr_assert_eq(tl_k_tile_ref(c->rank, c->x, c->m, x, y), TL_OK);
}

Test(ops_shape_kernels, broadcast_and_tile_grads_match_finite_differences)
{
    for (size_t k = 0; k < sizeof bcasts / sizeof bcasts[0]; k++) {
        const bcast_case *c = &bcasts[k];
        int64_t nx = numel(c->rank, c->x), ny = numel(c->rank, c->y);
        if (ny > 200)
            continue;
        tk_buf x = tk_rand(nx, 9, -1, 1), dy = tk_rand(ny, 10, -1, 1), dx = tk_zeros(nx);
        cr_assert_eq(tl_k_broadcast_grad_ref(c->rank, c->x, c->y, dy.d, dx.d), TL_OK);
        tk_check_grad(broadcast_fwd, (void *)c, nx, ny, x.d, dy.d, dx.d, "broadcast");
        tk_free(&x);
        tk_free(&dy);
        tk_free(&dx);
    }
    for (size_t k = 0; k < sizeof tiles / sizeof tiles[0]; k++) {
        const tile_case *c = &tiles[k];
        int64_t ys[5];
        tile_shape(c, ys);
        int64_t nx = numel(c->rank, c->x), ny = numel(c->rank, ys);
        tk_buf x = tk_rand(nx, 11, -1, 1), dy = tk_rand(ny, 12, -1, 1), dx = tk_zeros(nx);
        cr_assert_eq(tl_k_tile_grad_ref(c->rank, c->x, c->m, dy.d, dx.d), TL_OK);
        tk_check_grad(tile_fwd, (void *)c, nx, ny, x.d, dy.d, dx.d, "tile");
        tk_free(&x);
        tk_free(&dy);
        tk_free(&dx);
    }
}

/* ---- pad ---------------------------------------------------------------------------- */

typedef struct pad_case {
    int rank;
    int64_t x[5], pads[10];
    double value;
} pad_case;

static const pad_case pads[] = {
    {0, {0}, {0}, 1.0},
    {1, {3}, {1, 2}, 0.0},
    {2, {2, 3}, {0, 0, 0, 0}, -1.0},
    {2, {2, 3}, {1, 0, 2, 3}, 0.25},
    {3, {1, 2, 1}, {0, 1, 2, 0, 1, 1}, 5.0},
    {4, {2, 1, 3, 2}, {1, 1, 0, 2, 0, 0, 3, 1}, -2.5},
    {5, {1, 2, 1, 2, 3}, {1, 0, 0, 1, 1, 1, 0, 0, 2, 2}, 0.5},
};

static void pad_shape(const pad_case *c, int64_t *y)
{
    for (int d = 0; d < c->rank; d++)
        y[d] = c->x[d] + c->pads[2 * d] + c->pads[2 * d + 1];
}

Test(ops_shape_kernels, pad_and_grad_match_twins)
{
    for (size_t k = 0; k < sizeof pads / sizeof pads[0]; k++) {
        const pad_case *c = &pads[k];
        int64_t ys[5];
        pad_shape(c, ys);
        int64_t nx = numel(c->rank, c->x), ny = numel(c->rank, ys);
        tk_buf x = tk_rand(nx, 13, -1, 1), y = tk_zeros(ny), dy = tk_rand(ny, 14, -1, 1), dx = tk_zeros(nx);
        cr_assert_eq(tl_k_pad(c->rank, c->x, c->pads, c->value, x.f, y.f), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_k_pad_ref(c->rank, c->x, c->pads, c->value, x.d, y.d), TL_OK);
        tk_assert_close(ny, y.f, y.d, 0.0, 0.0, "pad");
        cr_assert_eq(tl_k_pad_grad(c->rank, c->x, c->pads, dy.f, dx.f), TL_OK);
        cr_assert_eq(tl_k_pad_grad_ref(c->rank, c->x, c->pads, dy.d, dx.d), TL_OK);
        tk_assert_close(nx, dx.f, dx.d, 0.0, 0.0, "pad_grad");
        tk_free(&x);
        tk_free(&y);
        tk_free(&dy);
        tk_free(&dx);
    }
}

Test(ops_shape_kernels, pad_worked_example)
{
    const float x[2] = {1, 2}; /* (1, 2) padded ((1, 0), (1, 2)) with 9 */
    const int64_t s[2] = {1, 2}, p[4] = {1, 0, 1, 2};
    float y[10];
    cr_assert_eq(tl_k_pad(2, s, p, 9.0, x, y), TL_OK);
    const float want[10] = {9, 9, 9, 9, 9, 9, 1, 2, 9, 9};
    for (int i = 0; i < 10; i++)
        cr_assert_eq(y[i], want[i], "y[%d] = %g", i, (double)y[i]);
}

static void pad_fwd(const double *x, double *y, void *ctx)
{
    const pad_case *c = ctx;
    cr_assert_eq(tl_k_pad_ref(c->rank, c->x, c->pads, c->value, x, y), TL_OK);
}

Test(ops_shape_kernels, pad_grad_matches_finite_differences)
{
    for (size_t k = 0; k < sizeof pads / sizeof pads[0]; k++) {
        const pad_case *c = &pads[k];
        int64_t ys[5];
        pad_shape(c, ys);
        int64_t nx = numel(c->rank, c->x), ny = numel(c->rank, ys);
        tk_buf x = tk_rand(nx, 15, -1, 1), dy = tk_rand(ny, 16, -1, 1), dx = tk_zeros(nx);
        cr_assert_eq(tl_k_pad_grad_ref(c->rank, c->x, c->pads, dy.d, dx.d), TL_OK);
        tk_check_grad(pad_fwd, (void *)c, nx, ny, x.d, dy.d, dx.d, "pad");
        tk_free(&x);
        tk_free(&dy);
        tk_free(&dx);
    }
}

/* ---- gather and one-hot ----------------------------------------------------------------- */

static tl_k_indices idx32(const int32_t *v, int64_t n)
{
    return (tl_k_indices){v, NULL, n, 1, NULL};
}

static tl_k_indices idx64(const int64_t *v, int64_t n)
{
    return (tl_k_indices){NULL, v, n, 1, NULL};
}

/* (outer, axis, inner) and the indices, with repeats. */
static void check_gather(int64_t outer, int64_t axis, int64_t inner, const tl_k_indices *ix)
{
    int64_t nx = outer * axis * inner, ny = outer * ix->n * inner;
    tk_buf x = tk_rand(nx, 17, -1, 1), y = tk_zeros(ny), dy = tk_rand(ny, 18, -1, 1), dx = tk_filled(nx, 99);
    cr_assert_eq(tl_k_gather(outer, axis, inner, ix, x.f, y.f), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_k_gather_ref(outer, axis, inner, ix, x.d, y.d), TL_OK);
    tk_assert_close(ny, y.f, y.d, 0.0, 0.0, "gather");
    cr_assert_eq(tl_k_gather_grad(outer, axis, inner, ix, dy.f, dx.f), TL_OK);
    cr_assert_eq(tl_k_gather_grad_ref(outer, axis, inner, ix, dy.d, dx.d), TL_OK);
    /* float32 adds of at most a few terms below 1. */
    tk_assert_close(nx, dx.f, dx.d, 1e-6, 1e-6, "gather_grad");
    tk_free(&x);
    tk_free(&y);
    tk_free(&dy);
    tk_free(&dx);
}

Test(ops_shape_kernels, gather_and_grad_match_twins_int32_and_int64)
{
    const int32_t i32[] = {3, 0, 3, 1, 4, 3, 0};
    const int64_t i64[] = {3, 0, 3, 1, 4, 3, 0};
    const int64_t views[][3] = {{1, 5, 1}, {1, 5, 7}, {3, 5, 1}, {2, 5, 70}, {4, 6, 3}};
    for (int v = 0; v < 5; v++) {
        tl_k_indices a = idx32(i32, 7), b = idx64(i64, 7), one = idx32(i32 + 4, 1), none = idx32(i32, 0);
        check_gather(views[v][0], views[v][1], views[v][2], &a);
        check_gather(views[v][0], views[v][1], views[v][2], &b);
        check_gather(views[v][0], views[v][1], views[v][2], &one);
        check_gather(views[v][0], views[v][1], views[v][2], &none);
    }
}

/* Index 2 gathered three times gets the sum of its three gradients; rows not
 * gathered get 0. */
Test(ops_shape_kernels, gather_grad_adds_repeated_indices_in_order)
{
    const int32_t ix[4] = {2, 0, 2, 2};
    const float dy[8] = {1, 10, 2, 20, 3, 30, 4, 40}; /* (4, 2) */
    float dx[8];
    for (int i = 0; i < 8; i++)
        dx[i] = 123;
    tl_k_indices k = idx32(ix, 4);
    cr_assert_eq(tl_k_gather_grad(1, 4, 2, &k, dy, dx), TL_OK);
    const float want[8] = {2, 20, 0, 0, 8, 80, 0, 0};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(dx[i], want[i], "dx[%d] = %g", i, (double)dx[i]);
}

typedef struct gather_ctx {
    int64_t outer, axis, inner;
    tl_k_indices ix;
} gather_ctx;

static void gather_fwd(const double *x, double *y, void *ctx)
{
    const gather_ctx *c = ctx;
    cr_assert_eq(tl_k_gather_ref(c->outer, c->axis, c->inner, &c->ix, x, y), TL_OK);
}

Test(ops_shape_kernels, gather_grad_matches_finite_differences)
{
    const int64_t ix[6] = {1, 1, 0, 3, 1, 2};
    gather_ctx c = {2, 4, 3, idx64(ix, 6)};
    int64_t nx = c.outer * c.axis * c.inner, ny = c.outer * 6 * c.inner;
    tk_buf x = tk_rand(nx, 19, -1, 1), dy = tk_rand(ny, 20, -1, 1), dx = tk_zeros(nx);
    cr_assert_eq(tl_k_gather_grad_ref(c.outer, c.axis, c.inner, &c.ix, dy.d, dx.d), TL_OK);
    tk_check_grad(gather_fwd, &c, nx, ny, x.d, dy.d, dx.d, "gather");
    tk_free(&x);
    tk_free(&dy);
    tk_free(&dx);
}

Test(ops_shape_kernels, gather_index_out_of_range_is_an_error_and_writes_nothing)
{
    const float x[10] = {0};
    float y[12], dx[10];
    for (int i = 0; i < 12; i++)
        y[i] = 7;
    for (int i = 0; i < 10; i++)
        dx[i] = 7;
    const int32_t bad[4] = {0, 1, 4, 7};
    tl_k_indices k = idx32(bad, 4);
    ASSERT_ERROR(tl_k_gather(2, 5, 1, &k, x, y), "gather: indices[3] = 7 is not in [0, 5)");
    ASSERT_ERROR(tl_k_gather_grad(2, 5, 1, &k, x, dx), "gather_grad: indices[3] = 7 is not in [0, 5)");
    const int64_t neg[4] = {0, -1, 0, 0}, shape[2] = {2, 2};
    tl_k_indices m = {NULL, neg, 4, 2, shape};
    ASSERT_ERROR(tl_k_gather(2, 5, 1, &m, x, y), "gather: indices[0,1] = -1 is not in [0, 5)");
    const int64_t big[1] = {INT64_MAX};
    tl_k_indices s = {NULL, big, 1, 0, shape};
    ASSERT_ERROR(tl_k_gather(2, 5, 1, &s, x, y), "gather: indices = 9223372036854775807 is not in [0, 5)");
    ASSERT_ERROR(tl_k_gather_ref(2, 5, 1, &k, (const double[10]){0}, (double[12]){0}), "indices[3] = 7");
    for (int i = 0; i < 12; i++)
        cr_assert_eq(y[i], 7.0f, "y[%d] was written", i);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(dx[i], 7.0f, "dx[%d] was written", i);
}

/* TF's documented example: depth 3, on 5, off 0; -1 gives a row of off. */
Test(ops_shape_kernels, one_hot_follows_tensorflow_example)
{
    const int32_t ix[4] = {0, 2, -1, 1};
    tl_k_indices k = idx32(ix, 4);
    float y[12];
    cr_assert_eq(tl_k_one_hot(4, 3, 1, &k, 5.0, 0.0, y), TL_OK); /* axis -1: (4, 3) */
    const float last[12] = {5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 5, 0};
    for (int i = 0; i < 12; i++)
        cr_assert_eq(y[i], last[i], "y[%d] = %g", i, (double)y[i]);
    cr_assert_eq(tl_k_one_hot(1, 3, 4, &k, 0.0, 3.0, y), TL_OK); /* axis 0: (3, 4) */
    const float first[12] = {0, 3, 3, 3, 3, 3, 3, 0, 3, 0, 3, 3};
    for (int i = 0; i < 12; i++)
        cr_assert_eq(y[i], first[i], "y[%d] = %g", i, (double)y[i]);
}

Test(ops_shape_kernels, one_hot_matches_twin)
{
    const int64_t ix[12] = {0, 5, 2, -1, 3, 3, 6, 1, 4, 0, -7, 2};
    const int64_t views[][2] = {{12, 1}, {1, 12}, {3, 4}, {4, 3}, {6, 2}};
    for (int v = 0; v < 5; v++) {
        tl_k_indices k = idx64(ix, 12);
        int64_t n = views[v][0] * 6 * views[v][1];
        tk_buf y = tk_zeros(n);
        cr_assert_eq(tl_k_one_hot(views[v][0], 6, views[v][1], &k, 0.75, -0.5, y.f), TL_OK);
        cr_assert_eq(tl_k_one_hot_ref(views[v][0], 6, views[v][1], &k, 0.75, -0.5, y.d), TL_OK);
        tk_assert_close(n, y.f, y.d, 0.0, 0.0, "one_hot");
        tk_free(&y);
    }
}

/* ---- bad geometry --------------------------------------------------------------------- */

Test(ops_shape_kernels, bad_geometry_is_an_error_and_writes_nothing)
{
    const float x[24] = {0};
    float y[64];
    for (int i = 0; i < 64; i++)
        y[i] = 7;
    const int64_t s3[3] = {2, 3, 4};
    ASSERT_ERROR(tl_k_transpose(3, s3, (const int[]){0, 0, 1}, x, y),
                 "transpose: perm[1] = 0: perm must hold 0..2 once each");
    ASSERT_ERROR(tl_k_transpose(3, s3, (const int[]){0, 3, 1}, x, y), "perm[1] = 3");
    ASSERT_ERROR(tl_k_transpose_grad(-1, s3, NULL, x, y), "transpose_grad: rank -1 is outside [0, 16]");
    const int64_t neg[2] = {2, -3};
    ASSERT_ERROR(tl_k_transpose(2, neg, (const int[]){1, 0}, x, y), "transpose: x dim 1 is -3; dims must be >= 0");
    const int64_t xs[2] = {2, 3}, ys[2] = {2, 4};
    ASSERT_ERROR(tl_k_broadcast(2, xs, ys, x, y), "broadcast: x dim 1 is 3, which does not broadcast to 4");
    ASSERT_ERROR(tl_k_broadcast_grad(2, xs, ys, x, y), "broadcast_grad: x dim 1 is 3");
    ASSERT_ERROR(tl_k_tile(2, xs, (const int64_t[]){1, -2}, x, y), "tile: multiples[1] is -2");
    ASSERT_ERROR(tl_k_tile(9, xs, xs, x, y), "tile: rank 9 is outside [0, 8]");
    ASSERT_ERROR(tl_k_pad(2, xs, (const int64_t[]){0, 1, -1, 0}, 0.0, x, y),
                 "pad: paddings of axis 1 are (-1, 0); they must be >= 0");
    ASSERT_ERROR(tl_k_pad_grad(2, xs, (const int64_t[]){-1, 0, 0, 0}, x, y), "pad_grad: paddings of axis 0");
    const int32_t ix[3] = {0, 1, 2};
    tl_k_indices k = idx32(ix, 3);
    ASSERT_ERROR(tl_k_one_hot(2, 3, 2, &k, 1, 0, y), "one_hot: 3 indices do not fill (outer 2, inner 2)");
    ASSERT_ERROR(tl_k_one_hot(-1, 3, 2, &k, 1, 0, y), "one_hot: (outer, depth, inner) must not be negative");
    ASSERT_ERROR(tl_k_gather(1, -5, 1, &k, x, y), "gather: the (outer, axis, inner) view");
    for (int i = 0; i < 64; i++)
        cr_assert_eq(y[i], 7.0f, "y[%d] was written", i);
}

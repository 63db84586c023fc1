/* Spatial partitioning's arithmetic (src/graph/spatial.h): convolutions and
 * pools computed tile by tile over the cores of a grid — each core's region
 * gathered from the others' tiles (its halo), the op run on the region with
 * the padding the region lacks, the input gradients of the regions reduced
 * back onto the tiles in core order, the filter gradients summed over the
 * cores — equal the whole op's float64 twin to float tolerance, forward and
 * both gradients, at grids [1,2,1,1], [1,1,2,1], [1,2,2,1], [1,4,1,1] and
 * [2,1,2,1], on sizes that split unevenly and into empty tiles. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/spatial.h"
#include "test_kernels_util.h"

TestSuite(spatial, .init = tk_setup);

enum { MAXC = 8 };

static const int64_t grids[][4] = {{1, 2, 1, 1}, {1, 1, 2, 1}, {1, 2, 2, 1}, {1, 4, 1, 1}, {2, 1, 2, 1}};
enum { NGRIDS = sizeof grids / sizeof grids[0] };

static int cores_of(const int64_t g[4])
{
    return (int)(g[0] * g[1] * g[2] * g[3]);
}

static tl_box whole(const int64_t shape[4])
{
    tl_box b = {{0, 0, 0, 0}, {shape[0], shape[1], shape[2], shape[3]}};
    return b;
}

static void abs_of(int64_t n, const double *a, double *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = fabs(a[i]);
}

/* The tiles of a tensor (shape, values v) over the grid's cores, each in a
 * buffer of its own: what each core holds. */
static void split(const int64_t shape[4], const int64_t grid[4], const float *v, tl_box *tiles, float **bufs)
{
    tl_box all = whole(shape);
    for (int k = 0; k < cores_of(grid); k++) {
        cr_assert_eq(tl_spatial_tile(shape, grid, k, &tiles[k]), TL_OK);
        bufs[k] = tk_alloc((size_t)tl_box_count(&tiles[k]) * sizeof(float) + 4);
        tl_spatial_gather(&tiles[k], 1, &all, &v, bufs[k]);
    }
}

static void free_all(int n, float **bufs)
{
    for (int k = 0; k < n; k++)
        free(bufs[k]);
}

static float *scratch_conv(const tl_k_conv_geom *cv, tl_k_conv_pass pass, int64_t *floats)
{
    cr_assert_eq(tl_k_conv2d_scratch(cv, pass, floats), TL_OK, "%s", tl_last_error());
    return tk_alloc((size_t)(*floats + 1) * sizeof(float));
}

static const tk_conv_case conv_cases[] = {
    {{2, 8, 8, 4}, {3, 3, 4, 4}, 1, {1, 1}, {1, 1}, true, "3x3 SAME on 8x8"},
    {{2, 7, 5, 3}, {3, 3, 3, 4}, 1, {1, 1}, {1, 1}, true, "3x3 SAME on 7x5: uneven tiles, an empty one at 4"},
    {{2, 9, 9, 4}, {3, 3, 4, 5}, 1, {2, 2}, {1, 1}, true, "3x3 stride 2 SAME on 9x9"},
    {{1, 10, 8, 3}, {3, 3, 3, 4}, 1, {2, 2}, {1, 1}, true, "3x3 stride 2 SAME on even sizes: pad 0 before, 1 after"},
    {{1, 11, 9, 2}, {3, 2, 2, 3}, 1, {2, 1}, {1, 2}, false, "3x2 strides (2, 1) dilations (1, 2) VALID"},
    {{2, 9, 8, 4}, {3, 3, 4, 3}, 1, {1, 1}, {2, 2}, true, "dilation 2 SAME: a halo of 2"},
    {{1, 8, 8, 6}, {3, 3, 1, 6}, 6, {1, 1}, {1, 1}, true, "depthwise"},
    {{2, 8, 7, 8}, {1, 1, 8, 4}, 1, {2, 2}, {1, 1}, true, "1x1 stride 2: no halo"},
    {{1, 9, 9, 2}, {5, 5, 2, 3}, 1, {1, 1}, {1, 1}, true, "5x5 SAME: a halo of 2"},
};

/* One conv case at one grid: forward, input and filter gradients. */
static void check_conv_tiles(const tk_conv_case *cc, const int64_t grid[4])
{
    tl_k_conv_geom cv;
    cr_assert(tl_k_conv2d_init(&cv, cc->x, cc->f, cc->groups, cc->strides, cc->dilations, cc->same));
    int C = cores_of(grid);
    int64_t ys[4] = {cv.n, cv.oh, cv.ow, cv.o};
    int64_t nx = cc->x[0] * cc->x[1] * cc->x[2] * cc->x[3];
    int64_t nf = cv.kh * cv.kw * (cv.c / cv.groups) * cv.o, ny = ys[0] * ys[1] * ys[2] * ys[3];
    int64_t most = nx > ny ? nx : ny;
    most = most > nf ? most : nf;
    tk_buf x = tk_rand(nx, 21, -1, 1), f = tk_rand(nf, 22, -1, 1), dy = tk_rand(ny, 23, -1, 1);
    char what[200];

    tl_box in_t[MAXC], out_t[MAXC], need[MAXC];
    tl_k_conv_geom local[MAXC];
    float *xt[MAXC], *dyt[MAXC], *region[MAXC], *yt[MAXC], *rgrad[MAXC], *dxt[MAXC];
    split(cc->x, grid, x.f, in_t, xt);
    split(ys, grid, dy.f, out_t, dyt);
    float *df = calloc((size_t)nf, sizeof(float)), *dfk = tk_alloc((size_t)nf * sizeof(float));
    for (int k = 0; k < C; k++) {
        tl_spatial_conv_tile(&cv, &out_t[k], &local[k], &need[k]);
        region[k] = tk_alloc((size_t)tl_box_count(&need[k]) * sizeof(float) + 4);
        rgrad[k] = tk_alloc((size_t)tl_box_count(&need[k]) * sizeof(float) + 4);
        yt[k] = tk_alloc((size_t)tl_box_count(&out_t[k]) * sizeof(float) + 4);
        tl_spatial_gather(&need[k], C, in_t, (const float *const *)xt, region[k]);
        if (tl_box_count(&out_t[k]) == 0)
            continue; /* an empty tile computes nothing */
        int64_t s;
        float *scratch = scratch_conv(&local[k], TL_K_CONV_FORWARD, &s);
        cr_assert_eq(tl_k_conv2d(&local[k], region[k], f.f, yt[k], scratch, s), TL_OK, "%s", tl_last_error());
        free(scratch);
        scratch = scratch_conv(&local[k], TL_K_CONV_GRAD_INPUT, &s);
        cr_assert_eq(tl_k_conv2d_grad_input(&local[k], dyt[k], f.f, rgrad[k], scratch, s), TL_OK, "%s",
                     tl_last_error());
        free(scratch);
        scratch = scratch_conv(&local[k], TL_K_CONV_GRAD_FILTER, &s);
        cr_assert_eq(tl_k_conv2d_grad_filter(&local[k], region[k], dyt[k], dfk, scratch, s), TL_OK, "%s",
                     tl_last_error());
        free(scratch);
        for (int64_t i = 0; i < nf; i++)
            df[i] += dfk[i]; /* the cross-core sum, in core order */
    }
    /* The empty tiles' regions are empty: they add nothing to the reduce. */
    for (int k = 0; k < C; k++) {
        dxt[k] = tk_alloc((size_t)tl_box_count(&in_t[k]) * sizeof(float) + 4);
        tl_spatial_reduce(&in_t[k], C, need, (const float *const *)rgrad, dxt[k]);
    }
    tl_box yall = whole(ys), xall = whole(cc->x);
    float *y = tk_alloc((size_t)ny * sizeof(float)), *dx = tk_alloc((size_t)nx * sizeof(float));
    tl_spatial_gather(&yall, C, out_t, (const float *const *)yt, y);
    tl_spatial_gather(&xall, C, in_t, (const float *const *)dxt, dx);

    double *want = tk_alloc((size_t)most * sizeof(double)), *bound = tk_alloc((size_t)most * sizeof(double));
    double *ax = tk_alloc((size_t)nx * sizeof(double)), *af = tk_alloc((size_t)nf * sizeof(double));
    double *ady = tk_alloc((size_t)ny * sizeof(double));
    abs_of(nx, x.d, ax), abs_of(nf, f.d, af), abs_of(ny, dy.d, ady);
    char g[48];
    snprintf(g, sizeof g, "[%lld,%lld,%lld,%lld]", (long long)grid[0], (long long)grid[1], (long long)grid[2],
             (long long)grid[3]);
    tl_k_conv2d_ref(&cv, x.d, f.d, want);
    tl_k_conv2d_ref(&cv, ax, af, bound);
    snprintf(what, sizeof what, "conv2d %s at %s", cc->name, g);
    tk_assert_bounded(ny, y, want, bound, 1e-6, what);
    tl_k_conv2d_grad_input_ref(&cv, dy.d, f.d, want);
    tl_k_conv2d_grad_input_ref(&cv, ady, af, bound);
    snprintf(what, sizeof what, "conv2d_grad_input %s at %s", cc->name, g);
    tk_assert_bounded(nx, dx, want, bound, 1e-6, what);
    tl_k_conv2d_grad_filter_ref(&cv, x.d, dy.d, want);
    tl_k_conv2d_grad_filter_ref(&cv, ax, ady, bound);
    snprintf(what, sizeof what, "conv2d_grad_filter %s at %s", cc->name, g);
    tk_assert_bounded(nf, df, want, bound, 1e-6, what);

    free_all(C, xt), free_all(C, dyt), free_all(C, region), free_all(C, rgrad), free_all(C, yt), free_all(C, dxt);
    free(df), free(dfk), free(y), free(dx), free(want), free(bound), free(ax), free(af), free(ady);
    tk_free(&x), tk_free(&f), tk_free(&dy);
}

Test(spatial, conv_tiles_equal_the_whole_conv)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        for (int gi = 0; gi < NGRIDS; gi++)
            check_conv_tiles(&conv_cases[i], grids[gi]);
}

static const tk_pool_case pool_cases[] = {
    {{2, 8, 8, 3}, {2, 2}, {2, 2}, false, "2x2 stride 2 VALID"},
    {{2, 9, 7, 3}, {3, 3}, {2, 2}, true, "3x3 stride 2 SAME, overlapping windows across tiles"},
    {{1, 7, 6, 4}, {3, 3}, {1, 1}, true, "3x3 stride 1 SAME: padding excluded at the image's edges only"},
    {{2, 5, 5, 2}, {5, 5}, {1, 1}, true, "a window larger than a tile"},
};

static void check_pool_tiles(const tk_pool_case *pc, bool max, const int64_t grid[4])
{
    tl_k_pool_geom pl;
    cr_assert(tl_k_pool2d_init(&pl, pc->x, pc->k, pc->s, pc->same));
    int C = cores_of(grid);
    int64_t ys[4] = {pl.n, pl.oh, pl.ow, pl.c};
    int64_t nx = pl.n * pl.h * pl.w * pl.c, ny = ys[0] * ys[1] * ys[2] * ys[3];
    tk_buf x = tk_rand(nx, 31, -1, 1), dy = tk_rand(ny, 32, -1, 1);
    tl_box in_t[MAXC], out_t[MAXC], need[MAXC];
    tl_k_pool_geom local[MAXC];
    float *xt[MAXC], *dyt[MAXC], *region[MAXC], *yt[MAXC], *rgrad[MAXC], *dxt[MAXC];
    split(pc->x, grid, x.f, in_t, xt);
    split(ys, grid, dy.f, out_t, dyt);
    for (int k = 0; k < C; k++) {
        tl_spatial_pool_tile(&pl, &out_t[k], &local[k], &need[k]);
        region[k] = tk_alloc((size_t)tl_box_count(&need[k]) * sizeof(float) + 4);
        rgrad[k] = tk_alloc((size_t)tl_box_count(&need[k]) * sizeof(float) + 4);
        yt[k] = tk_alloc((size_t)tl_box_count(&out_t[k]) * sizeof(float) + 4);
        tl_spatial_gather(&need[k], C, in_t, (const float *const *)xt, region[k]);
        if (tl_box_count(&out_t[k]) == 0)
            continue;
        int64_t s0, s1;
        cr_assert_eq(tl_k_pool2d_scratch(&local[k], max, false, &s0), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_k_pool2d_scratch(&local[k], max, true, &s1), TL_OK, "%s", tl_last_error());
        float *scratch = tk_alloc((size_t)(s0 > s1 ? s0 : s1) * sizeof(float) + 4);
        if (max) {
            cr_assert_eq(tl_k_max_pool2d(&local[k], region[k], yt[k], scratch, s0), TL_OK, "%s", tl_last_error());
            cr_assert_eq(tl_k_max_pool2d_grad(&local[k], region[k], dyt[k], rgrad[k], scratch, s1), TL_OK, "%s",
                         tl_last_error());
        } else {
            cr_assert_eq(tl_k_avg_pool2d(&local[k], region[k], yt[k], scratch, s0), TL_OK, "%s", tl_last_error());
            cr_assert_eq(tl_k_avg_pool2d_grad(&local[k], dyt[k], rgrad[k], scratch, s1), TL_OK, "%s",
                         tl_last_error());
        }
        free(scratch);
    }
    for (int k = 0; k < C; k++) {
        dxt[k] = tk_alloc((size_t)tl_box_count(&in_t[k]) * sizeof(float) + 4);
        tl_spatial_reduce(&in_t[k], C, need, (const float *const *)rgrad, dxt[k]);
    }
    tl_box yall = whole(ys), xall = whole(pc->x);
    float *y = tk_alloc((size_t)ny * sizeof(float)), *dx = tk_alloc((size_t)nx * sizeof(float));
    tl_spatial_gather(&yall, C, out_t, (const float *const *)yt, y);
    tl_spatial_gather(&xall, C, in_t, (const float *const *)dxt, dx);
    tk_buf want_y = tk_zeros(ny), want_dx = tk_zeros(nx);
    if (max) {
        tl_k_max_pool2d_ref(&pl, x.d, want_y.d);
        tl_k_max_pool2d_grad_ref(&pl, x.d, dy.d, want_dx.d);
    } else {
        tl_k_avg_pool2d_ref(&pl, x.d, want_y.d);
        tl_k_avg_pool2d_grad_ref(&pl, dy.d, want_dx.d);
    }
    char what[200];
    snprintf(what, sizeof what, "%s_pool2d %s at [%lld,%lld,%lld,%lld]", max ? "max" : "avg", pc->name,
             (long long)grid[0], (long long)grid[1], (long long)grid[2], (long long)grid[3]);
    tk_assert_close(ny, y, want_y.d, max ? 0.0 : 1e-6, max ? 0.0 : 1e-6, what);
    tk_assert_close(nx, dx, want_dx.d, 1e-6, 1e-6, what);
    free_all(C, xt), free_all(C, dyt), free_all(C, region), free_all(C, rgrad), free_all(C, yt), free_all(C, dxt);
    free(y), free(dx);
    tk_free(&x), tk_free(&dy), tk_free(&want_y), tk_free(&want_dx);
}

Test(spatial, pool_tiles_equal_the_whole_pool)
{
    static const int64_t channel_split[4] = {1, 2, 1, 2}; /* pools are per channel: channels split too */
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++)
        for (int max = 0; max < 2; max++) {
            for (int gi = 0; gi < NGRIDS; gi++)
                check_pool_tiles(&pool_cases[i], max, grids[gi]);
            check_pool_tiles(&pool_cases[i], max, channel_split);
        }
}

/* The reach of one axis on worked examples. */
Test(spatial, reach_worked_examples)
{
    int64_t i0, i1, lo, hi;
    /* 3 taps, stride 1, SAME on 8 (pad 1): output rows [4, 8) read [3, 8) and one padded row after. */
    tl_spatial_reach(8, 3, 1, 1, 1, 4, 8, &i0, &i1, &lo, &hi);
    cr_assert(i0 == 3 && i1 == 8 && lo == 0 && hi == 1, "[%lld, %lld) pad %lld %lld", (long long)i0,
              (long long)i1, (long long)lo, (long long)hi);
    /* The same, rows [0, 4): the padded row before, and a halo of one row after. */
    tl_spatial_reach(8, 3, 1, 1, 1, 0, 4, &i0, &i1, &lo, &hi);
    cr_assert(i0 == 0 && i1 == 5 && lo == 1 && hi == 0);
    /* Stride 2 SAME on 10 (pad 0 before, 1 after): output rows [3, 5) read [6, 10) and the padded row. */
    tl_spatial_reach(10, 3, 2, 1, 0, 3, 5, &i0, &i1, &lo, &hi);
    cr_assert(i0 == 6 && i1 == 10 && lo == 0 && hi == 1);
    /* Dilation 2 (reach 5), VALID on 9: output rows [2, 3) read [2, 7). */
    tl_spatial_reach(9, 3, 1, 2, 0, 2, 3, &i0, &i1, &lo, &hi);
    cr_assert(i0 == 2 && i1 == 7 && lo == 0 && hi == 0);
    /* An empty output range reads nothing. */
    tl_spatial_reach(9, 3, 1, 1, 1, 4, 4, &i0, &i1, &lo, &hi);
    cr_assert(i0 == 0 && i1 == 0 && lo == 0 && hi == 0);
}

/* reduce sums the regions in core order: with values whose sum depends on
 * the order in float32, the result is that order's. */
Test(spatial, reduce_sums_in_core_order)
{
    const int64_t shape[4] = {1, 2, 1, 1};
    tl_box mine = whole(shape);
    tl_box needs[3] = {mine, mine, mine};
    float a = 1e8f, b = -1e8f, c = 1.0f;
    float ga[2] = {a, 0}, gb[2] = {b, 0}, gc[2] = {c, 0};
    const float *rg[3] = {ga, gb, gc};
    float out[2];
    tl_spatial_reduce(&mine, 3, needs, rg, out);
    cr_assert(out[0] == (a + b) + c && out[0] == 1.0f, "%g", (double)out[0]); /* a + (b + c) would be 0 */
    cr_assert(out[1] == 0.0f);
}

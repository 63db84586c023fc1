/*
 * test_kernels_util.h — what the kernel tests (tests/test_kernels*.c) share:
 * random inputs from tl_rng in float32 with exact float64 copies, tolerance
 * checks of a fast kernel against its float64 twin, and the central
 * finite-difference check of a backward twin against its forward twin.
 * test_kernels_util.c holds no tests.
 */
#ifndef TPULOOP_TESTS_KERNELS_UTIL_H
#define TPULOOP_TESTS_KERNELS_UTIL_H

#include <criterion/criterion.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* A suite .init: one OpenBLAS thread, as the runtime runs it. */
void tk_setup(void);

/* n values as float32 (f) and the same values as float64 (d). */
typedef struct tk_buf {
    float *f;  /* (n) */
    double *d; /* (n) */
    int64_t n;
} tk_buf;

/* Uniform in [lo, hi) from the tl_rng stream (seed 2024, op tag), rounded to
 * float32; d holds the rounded values exactly. */
tk_buf tk_rand(int64_t n, uint64_t tag, double lo, double hi);
tk_buf tk_zeros(int64_t n);
/* f and d filled with value. */
tk_buf tk_filled(int64_t n, double value);
void tk_free(tk_buf *b);
/* malloc that fails the test when out of memory; at least one byte. */
void *tk_alloc(size_t bytes);

/* A convolution test case: x (n, h, w, c), f (kh, kw, c / groups, o), and
 * what tl_k_conv2d_init takes besides. */
typedef struct tk_conv_case {
    int64_t x[4], f[4];
    int64_t groups, strides[2], dilations[2];
    bool same;
    const char *name;
} tk_conv_case;

/* A pooling test case: x (n, h, w, c), window k and strides s (h, w). */
typedef struct tk_pool_case {
    int64_t x[4], k[2], s[2];
    bool same;
    const char *name;
} tk_pool_case;

/* |got[i] - want[i]| <= atol + rtol·|want[i]| for every i; what names the
 * check in the failure message. */
void tk_assert_close(int64_t n, const float *got, const double *want, double rtol, double atol, const char *what);

/* |got[i] - want[i]| <= rtol·bound[i]: for sums of products, whose rounding
 * error scales with the sum of |terms| (bound), not with the result. */
void tk_assert_bounded(int64_t n, const float *got, const double *want, const double *bound, double rtol,
                       const char *what);

/* got and want are the same bits. */
void tk_assert_same_bits(int64_t n, const float *got, const float *want, const char *what);

/*
 * The finite-difference check. fwd(x, y, ctx) is a float64 forward twin from
 * nx inputs to ny outputs. For L(x) = sum_k dy[k]·y[k], dx (nx) must match
 * the central differences (L(x + h·e_i) - L(x - h·e_i)) / 2h, h = 1e-6, within
 * 1e-6·max(1, |fd|).
 */
typedef void (*tk_forward)(const double *x, double *y, void *ctx);
void tk_check_grad(tk_forward fwd, void *ctx, int64_t nx, int64_t ny, const double *x, const double *dy,
                   const double *dx, const char *what);

#define TK_FD_STEP 1e-6
#define TK_FD_TOL 1e-6

#endif /* TPULOOP_TESTS_KERNELS_UTIL_H */

/* test_kernels_util.c — the helpers of test_kernels_util.h; no tests. */
#include "test_kernels_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/rng.h"

void tk_setup(void)
{
    tl_k_blas_single_thread();
}

void *tk_alloc(size_t bytes)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    cr_assert_not_null(p, "out of memory allocating %zu bytes", bytes);
    return p;
}

static tk_buf buf_new(int64_t n)
{
    tk_buf b = {.n = n};
    b.f = tk_alloc((size_t)n * sizeof(float));
    b.d = tk_alloc((size_t)n * sizeof(double));
    return b;
}

tk_buf tk_rand(int64_t n, uint64_t tag, double lo, double hi)
{
    tk_buf b = buf_new(n);
    tl_rng r;
    tl_rng_init(&r, 2024, tag, 0, 0);
    for (int64_t i = 0; i < n; i++) {
        b.f[i] = (float)(lo + (hi - lo) * tl_rng_uniform_f64(&r));
        b.d[i] = b.f[i];
    }
    return b;
}

tk_buf tk_filled(int64_t n, double value)
{
    tk_buf b = buf_new(n);
    for (int64_t i = 0; i < n; i++) {
        b.f[i] = (float)value;
        b.d[i] = b.f[i];
    }
    return b;
}

tk_buf tk_zeros(int64_t n)
{
    return tk_filled(n, 0.0);
}

void tk_free(tk_buf *b)
{
    free(b->f);
    free(b->d);
    b->f = NULL;
    b->d = NULL;
}

void tk_assert_close(int64_t n, const float *got, const double *want, double rtol, double atol, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        cr_assert(err <= atol + rtol * fabs(want[i]), "%s: element %lld is %.9g, want %.12g (error %.3g > %.3g)",
                  what, (long long)i, (double)got[i], want[i], err, atol + rtol * fabs(want[i]));
    }
}

void tk_assert_bounded(int64_t n, const float *got, const double *want, const double *bound, double rtol,
                       const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        cr_assert(err <= rtol * bound[i], "%s: element %lld is %.9g, want %.12g (error %.3g, %.3g of the bound %.3g)",
                  what, (long long)i, (double)got[i], want[i], err, bound[i] > 0 ? err / bound[i] : INFINITY,
                  bound[i]);
    }
}

void tk_assert_same_bits(int64_t n, const float *got, const float *want, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        cr_assert(memcmp(&got[i], &want[i], sizeof(float)) == 0, "%s: element %lld differs: %a vs %a", what,
                  (long long)i, (double)got[i], (double)want[i]);
}

static double weighted(int64_t ny, const double *y, const double *dy)
{
    double s = 0.0;
    for (int64_t k = 0; k < ny; k++)
        s += dy[k] * y[k];
    return s;
}

void tk_check_grad(tk_forward fwd, void *ctx, int64_t nx, int64_t ny, const double *x, const double *dy,
                   const double *dx, const char *what)
{
    double *xp = tk_alloc((size_t)nx * sizeof(double));
    double *y = tk_alloc((size_t)ny * sizeof(double));
    memcpy(xp, x, (size_t)nx * sizeof(double));
    for (int64_t i = 0; i < nx; i++) {
        xp[i] = x[i] + TK_FD_STEP;
        fwd(xp, y, ctx);
        double up = weighted(ny, y, dy);
        xp[i] = x[i] - TK_FD_STEP;
        fwd(xp, y, ctx);
        double down = weighted(ny, y, dy);
        xp[i] = x[i];
        double fd = (up - down) / (2.0 * TK_FD_STEP);
        double tol = TK_FD_TOL * fmax(1.0, fabs(fd));
        if (!(fabs(fd - dx[i]) <= tol)) {
            free(xp);
            free(y);
            cr_assert_fail("%s: d/dx[%lld] is %.12g, finite differences give %.12g (error %.3g > %.3g)", what,
                           (long long)i, dx[i], fd, fabs(fd - dx[i]), tol);
        }
    }
    free(xp);
    free(y);
}

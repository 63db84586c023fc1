/* Kernels of the norm family (src/kernels/norm.h): layer norm and batch norm,
 * training and inference, against their float64 twins, and the twins'
 * gradients against central finite differences — the batch-norm gradient
 * through the batch statistics included, with one channel and with a mean
 * far from zero (x in [100, 101)) where E[x²] - E[x]² would lose the
 * variance. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/norm.h"
#include "test_kernels_util.h"

TestSuite(ops_norm_kernels, .init = tk_setup);

#define EPS 1e-3

/* (rows, d) or (rows, c): size-1 dims, a chunk's edge (256 channels) crossed,
 * tails that are not a multiple of TL_K_LANES. */
static const int64_t shapes[][2] = {{1, 1}, {7, 1}, {1, 9}, {3, 7}, {5, 8}, {17, 33}, {2, 300}, {3, 520}, {64, 3}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* ---- layer norm ----------------------------------------------------------------- */

static void layer_norm_vs_twin(int64_t rows, int64_t d, double lo, double hi, double tol)
{
    int64_t n = rows * d;
    tk_buf x = tk_rand(n, 1, lo, hi), gamma = tk_rand(d, 2, 0.5, 1.5), beta = tk_rand(d, 3, -1, 1);
    tk_buf y = tk_zeros(n), dy = tk_rand(n, 4, -1, 1), dx = tk_zeros(n), dg = tk_zeros(d), db = tk_zeros(d);
    tk_buf dx2 = tk_zeros(n), dg2 = tk_zeros(d);
    double *work = tk_alloc((size_t)(2 * d) * sizeof(double));
    tl_k_layer_norm(rows, d, EPS, x.f, gamma.f, beta.f, y.f);
    tl_k_layer_norm_ref(rows, d, EPS, x.d, gamma.d, beta.d, y.d);
    tk_assert_close(n, y.f, y.d, tol, tol, "layer_norm");
    tl_k_layer_norm_grad(rows, d, EPS, x.f, gamma.f, dy.f, dx.f, dg.f, db.f, work);
    tl_k_layer_norm_grad_ref(rows, d, EPS, x.d, gamma.d, dy.d, dx.d, dg.d, db.d);
    tk_assert_close(n, dx.f, dx.d, tol, tol, "layer_norm_grad dx");
    tk_assert_close(d, dg.f, dg.d, tol, tol, "layer_norm_grad dgamma");
    tk_assert_close(d, db.f, db.d, tol, tol, "layer_norm_grad dbeta");
    /* Skipped outputs change nothing in the others. */
    tl_k_layer_norm_grad(rows, d, EPS, x.f, gamma.f, dy.f, dx2.f, NULL, NULL, NULL);
    tk_assert_same_bits(n, dx2.f, dx.f, "layer_norm_grad dx alone");
    tl_k_layer_norm_grad(rows, d, EPS, x.f, gamma.f, dy.f, NULL, dg2.f, NULL, work);
    tk_assert_same_bits(d, dg2.f, dg.f, "layer_norm_grad dgamma alone");
    free(work);
    tk_free(&x), tk_free(&gamma), tk_free(&beta), tk_free(&y), tk_free(&dy), tk_free(&dx), tk_free(&dg);
    tk_free(&db), tk_free(&dx2), tk_free(&dg2);
}

Test(ops_norm_kernels, layer_norm_matches_twin)
{
    for (size_t s = 0; s < NSHAPES; s++)
        layer_norm_vs_twin(shapes[s][0], shapes[s][1], -2, 2, 1e-6);
    layer_norm_vs_twin(0, 5, -1, 1, 0); /* no rows: nothing to write */
}

Test(ops_norm_kernels, layer_norm_is_stable_far_from_zero)
{
    layer_norm_vs_twin(6, 40, 100, 101, 1e-6);
    /* float32 spacing is 1/16 at 1e6: the spread is 16, the mean 1e6. */
    layer_norm_vs_twin(4, 64, 1e6, 1e6 + 16, 1e-6);
}

/* A row of one element normalises to beta; its x gets no gradient. */
Test(ops_norm_kernels, layer_norm_of_one_element_is_beta)
{
    const float x[3] = {5, -2, 1e6}, gamma[1] = {3}, beta[1] = {0.25f}, dy[3] = {1, 2, 3};
    float y[3], dx[3], dg[1], db[1];
    double work[2];
    tl_k_layer_norm(3, 1, EPS, x, gamma, beta, y);
    tl_k_layer_norm_grad(3, 1, EPS, x, gamma, dy, dx, dg, db, work);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(y[i], 0.25f, "y[%d] = %g", i, (double)y[i]);
        cr_assert_eq(dx[i], 0.0f, "dx[%d] = %g", i, (double)dx[i]);
    }
    cr_assert_eq(dg[0], 0.0f);
    cr_assert_eq(db[0], 6.0f);
}

typedef struct norm_ctx {
    int64_t rows, d;
} norm_ctx;

/* x = (x (rows, d), gamma (d), beta (d)) end to end. */
static void layer_norm_fwd(const double *in, double *y, void *ctx)
{
    const norm_ctx *c = ctx;
    tl_k_layer_norm_ref(c->rows, c->d, EPS, in, in + c->rows * c->d, in + c->rows * c->d + c->d, y);
}

static void layer_norm_fd(int64_t rows, int64_t d, double lo, double hi)
{
    norm_ctx c = {rows, d};
    int64_t n = rows * d, nin = n + 2 * d;
    tk_buf in = tk_rand(nin, 10, lo, hi), dy = tk_rand(n, 11, -1, 1), din = tk_zeros(nin);
    tk_buf g = tk_rand(2 * d, 12, -1.5, 1.5); /* gamma, beta: anything, signs included */
    memcpy(in.d + n, g.d, (size_t)(2 * d) * sizeof(double));
    tl_k_layer_norm_grad_ref(rows, d, EPS, in.d, in.d + n, dy.d, din.d, din.d + n, din.d + n + d);
    tk_check_grad(layer_norm_fwd, &c, nin, n, in.d, dy.d, din.d, "layer_norm_grad_ref");
    tk_free(&in), tk_free(&dy), tk_free(&din), tk_free(&g);
}

Test(ops_norm_kernels, layer_norm_twin_gradient_matches_finite_differences)
{
    layer_norm_fd(3, 5, -2, 2);
    layer_norm_fd(2, 1, -2, 2);
    layer_norm_fd(1, 9, -1, 1);
    layer_norm_fd(4, 3, 100, 101);
}

/* ---- batch norm, training --------------------------------------------------------- */

static void batch_norm_train_vs_twin(int64_t rows, int64_t c, double lo, double hi, double tol)
{
    int64_t n = rows * c;
    tk_buf x = tk_rand(n, 20, lo, hi), gamma = tk_rand(c, 21, 0.5, 1.5), beta = tk_rand(c, 22, -1, 1);
    tk_buf y = tk_zeros(n), mean = tk_zeros(c), var = tk_zeros(c), dy = tk_rand(n, 23, -1, 1);
    tk_buf dx = tk_zeros(n), dg = tk_zeros(c), db = tk_zeros(c), dx2 = tk_zeros(n);
    double *stat = tk_alloc((size_t)(2 * c) * sizeof(double)); /* the kernel's float64 mean, then variance */
    tl_k_batch_norm_train(rows, c, EPS, x.f, gamma.f, beta.f, false, y.f, stat, stat + c);
    tl_k_batch_norm_train_ref(rows, c, EPS, x.d, gamma.d, beta.d, y.d, mean.d, var.d);
    for (int64_t j = 0; j < c; j++) {
        mean.f[j] = (float)stat[j];
        var.f[j] = (float)stat[c + j];
    }
    tk_assert_close(n, y.f, y.d, tol, tol, "batch_norm_train");
    tk_assert_close(c, mean.f, mean.d, tol, 0, "batch_norm_train mean");
    tk_assert_close(c, var.f, var.d, tol, 0, "batch_norm_train var");
    tl_k_batch_norm_train_grad(rows, c, EPS, x.f, gamma.f, NULL, stat, stat + c, false, dy.f, dx.f, dg.f, db.f);
    tl_k_batch_norm_train_grad_ref(rows, c, EPS, x.d, gamma.d, dy.d, dx.d, dg.d, db.d);
    tk_assert_close(n, dx.f, dx.d, tol, tol, "batch_norm_train_grad dx");
    tk_assert_close(c, dg.f, dg.d, tol, tol, "batch_norm_train_grad dgamma");
    tk_assert_close(c, db.f, db.d, tol, tol, "batch_norm_train_grad dbeta");
    tl_k_batch_norm_train_grad(rows, c, EPS, x.f, gamma.f, NULL, stat, stat + c, false, dy.f, dx2.f, NULL, NULL);
    tk_assert_same_bits(n, dx2.f, dx.f, "batch_norm_train_grad dx alone");
    tk_free(&x), tk_free(&gamma), tk_free(&beta), tk_free(&y), tk_free(&mean), tk_free(&var), tk_free(&dy);
    tk_free(&dx), tk_free(&dg), tk_free(&db), tk_free(&dx2);
    free(stat);
}

Test(ops_norm_kernels, batch_norm_train_matches_twin)
{
    for (size_t s = 0; s < NSHAPES; s++)
        batch_norm_train_vs_twin(shapes[s][0], shapes[s][1], -2, 2, 1e-6);
    batch_norm_train_vs_twin(1000, 5, -2, 2, 1e-6); /* 32 blocks of rows merged, the last of 8 */
}

Test(ops_norm_kernels, batch_norm_is_stable_far_from_zero)
{
    batch_norm_train_vs_twin(40, 6, 100, 101, 1e-6);
    batch_norm_train_vs_twin(64, 3, 1e6, 1e6 + 16, 1e-6);
    batch_norm_train_vs_twin(999, 4, 1e6, 1e6 + 1, 1e-6);
}

/* x = 1e6 + k/16 for k = 0..rows-1 over the rows of one channel: the mean is
 * 1e6 + (rows - 1)/32 and the biased variance (rows² - 1) / 12 / 256 exactly
 * (16 rows: one block; 64: two blocks merged, exactly in float64); the
 * float32 results must be those values rounded. */
Test(ops_norm_kernels, batch_norm_variance_is_exact_at_a_large_offset)
{
    for (int rows = 16; rows <= 64; rows += 48) {
        float x[64], gamma[1] = {1}, beta[1] = {0}, y[64];
        double stat[2];
        for (int k = 0; k < rows; k++)
            x[k] = 1e6f + (float)k / 16.0f;
        tl_k_batch_norm_train(rows, 1, EPS, x, gamma, beta, false, y, &stat[0], &stat[1]);
        cr_assert_eq(stat[0], 1e6 + (rows - 1) / 32.0, "rows %d: mean %.17g", rows, stat[0]);
        cr_assert_eq(stat[1], ((double)rows * rows - 1.0) / 12.0 / 256.0, "rows %d: var %.17g", rows, stat[1]);
    }
}

Test(ops_norm_kernels, batch_norm_of_no_rows_has_nan_statistics)
{
    double stat[4];
    tl_k_batch_norm_train(0, 2, EPS, NULL, (const float[]){1, 1}, (const float[]){0, 0}, false, NULL, stat, stat + 2);
    cr_assert(isnan(stat[0]) && isnan(stat[3]));
}

/* The ReLU fused into batch norm (Conv → BN → ReLU, as the compiler fuses
 * it) gives the bits of the two ops apart, forward and backward. */
Test(ops_norm_kernels, batch_norm_fused_relu_is_relu_of_batch_norm_bit_for_bit)
{
    for (size_t s = 0; s < NSHAPES; s++) {
        int64_t rows = shapes[s][0], c = shapes[s][1], n = rows * c;
        tk_buf x = tk_rand(n, 50, -2, 2), gamma = tk_rand(c, 51, -1.5, 1.5), beta = tk_rand(c, 52, -1, 1);
        tk_buf y = tk_zeros(n), z = tk_zeros(n), fused = tk_zeros(n), dz = tk_rand(n, 53, -1, 1), g = tk_zeros(n);
        tk_buf dx = tk_zeros(n), dg = tk_zeros(c), db = tk_zeros(c), fdx = tk_zeros(n), fdg = tk_zeros(c);
        tk_buf fdb = tk_zeros(c);
        double *stat = tk_alloc((size_t)(4 * c) * sizeof(double));
        tl_k_batch_norm_train(rows, c, EPS, x.f, gamma.f, beta.f, false, y.f, stat, stat + c);
        tl_k_relu(n, y.f, z.f);
        tl_k_batch_norm_train(rows, c, EPS, x.f, gamma.f, beta.f, true, fused.f, stat + 2 * c, stat + 3 * c);
        tk_assert_same_bits(n, fused.f, z.f, "fused relu forward");
        tl_k_relu_grad(n, z.f, dz.f, g.f);
        tl_k_batch_norm_train_grad(rows, c, EPS, x.f, gamma.f, beta.f, stat, stat + c, false, g.f, dx.f, dg.f, db.f);
        tl_k_batch_norm_train_grad(rows, c, EPS, x.f, gamma.f, beta.f, stat, stat + c, true, dz.f, fdx.f, fdg.f,
                                   fdb.f);
        tk_assert_same_bits(n, fdx.f, dx.f, "fused relu dx");
        tk_assert_same_bits(c, fdg.f, dg.f, "fused relu dgamma");
        tk_assert_same_bits(c, fdb.f, db.f, "fused relu dbeta");
        tk_free(&x), tk_free(&gamma), tk_free(&beta), tk_free(&y), tk_free(&z), tk_free(&fused), tk_free(&dz);
        tk_free(&g), tk_free(&dx), tk_free(&dg), tk_free(&db), tk_free(&fdx), tk_free(&fdg), tk_free(&fdb);
        free(stat);
    }
}

/* The split-batch pieces (norm.h): on one core they give _train's and
 * _train_grad's bits; with the rows split in three uneven parts, merged and
 * summed in order, they match the float64 twin as _train does. */
Test(ops_norm_kernels, batch_norm_pieces_over_split_rows)
{
    for (size_t s = 0; s < NSHAPES; s++) {
        int64_t rows = shapes[s][0], c = shapes[s][1], n = rows * c;
        tk_buf x = tk_rand(n, 60, -2, 2), gamma = tk_rand(c, 61, -1.5, 1.5), beta = tk_rand(c, 62, -1, 1);
        tk_buf dy = tk_rand(n, 63, -1, 1), y = tk_zeros(n), y2 = tk_zeros(n), dx = tk_zeros(n), dx2 = tk_zeros(n);
        tk_buf dg = tk_zeros(c), db = tk_zeros(c);
        double *st = tk_alloc((size_t)(8 * c) * sizeof(double)), *mean = st, *var = st + c, *m = st + 2 * c;
        double *m2 = st + 3 * c, *s1 = st + 4 * c, *s2 = st + 5 * c, *pm = st + 6 * c, *pq = st + 7 * c;
        for (int relu = 0; relu < 2; relu++) {
            tl_k_batch_norm_train(rows, c, EPS, x.f, gamma.f, beta.f, relu, y.f, mean, var);
            tl_k_batch_norm_train_grad(rows, c, EPS, x.f, gamma.f, beta.f, mean, var, relu, dy.f, dx.f, dg.f, db.f);
            tl_k_batch_norm_stats(rows, c, x.f, m, m2);
            for (int64_t j = 0; j < c; j++) {
                cr_assert(m[j] == mean[j] && m2[j] / (double)rows == var[j], "channel %lld", (long long)j);
                m2[j] /= (double)rows;
            }
            tl_k_batch_norm_apply(rows, c, EPS, x.f, gamma.f, beta.f, m, m2, relu, y2.f);
            tk_assert_same_bits(n, y2.f, y.f, "apply on one core");
            tl_k_batch_norm_grad_sums(rows, c, EPS, x.f, gamma.f, beta.f, m, m2, relu, dy.f, s1, s2);
            for (int64_t j = 0; j < c; j++)
                cr_assert((float)s1[j] == db.f[j] && (float)s2[j] == dg.f[j], "sums, channel %lld", (long long)j);
            tl_k_batch_norm_grad_apply(rows, c, EPS, rows, x.f, gamma.f, beta.f, m, m2, relu, dy.f, s1, s2, dx2.f);
            tk_assert_same_bits(n, dx2.f, dx.f, "grad_apply on one core");
        }
        if (rows < 3)
            goto next;
        /* Three parts of rows/2, rows/3 and the rest, as three cores hold them. */
        int64_t part[3] = {rows / 2, rows / 3, rows - rows / 2 - rows / 3}, at[3] = {0, rows / 2, rows / 2 + rows / 3};
        tl_k_batch_norm_stats(part[0], c, x.f, m, m2);
        for (int q = 1; q < 3; q++) {
            tl_k_batch_norm_stats(part[q], c, x.f + at[q] * c, pm, pq);
            tl_k_batch_norm_merge(c, at[q], m, m2, part[q], pm, pq);
        }
        for (int64_t j = 0; j < c; j++)
            m2[j] /= (double)rows;
        tl_k_batch_norm_train_ref(rows, c, EPS, x.d, gamma.d, beta.d, y.d, mean, var);
        for (int64_t j = 0; j < c; j++)
            cr_assert(fabs(m[j] - mean[j]) <= 1e-12 + 1e-12 * fabs(mean[j]) &&
                          fabs(m2[j] - var[j]) <= 1e-12 + 1e-10 * var[j],
                      "merged statistics, channel %lld: %.17g %.17g against %.17g %.17g", (long long)j, m[j], m2[j],
                      mean[j], var[j]);
        for (int q = 0; q < 3; q++)
            tl_k_batch_norm_apply(part[q], c, EPS, x.f + at[q] * c, gamma.f, beta.f, m, m2, false, y2.f + at[q] * c);
        tk_assert_close(n, y2.f, y.d, 1e-5, 1e-5, "apply over three parts");
        for (int64_t j = 0; j < c; j++)
            s1[j] = s2[j] = 0;
        for (int q = 0; q < 3; q++) {
            tl_k_batch_norm_grad_sums(part[q], c, EPS, x.f + at[q] * c, gamma.f, beta.f, m, m2, false,
                                      dy.f + at[q] * c, pm, pq);
            for (int64_t j = 0; j < c; j++) {
                s1[j] += pm[j];
                s2[j] += pq[j];
            }
        }
        for (int q = 0; q < 3; q++)
            tl_k_batch_norm_grad_apply(part[q], c, EPS, rows, x.f + at[q] * c, gamma.f, beta.f, m, m2, false,
                                       dy.f + at[q] * c, s1, s2, dx2.f + at[q] * c);
        tl_k_batch_norm_train_grad_ref(rows, c, EPS, x.d, gamma.d, dy.d, dx.d, dg.d, db.d);
        tk_assert_close(n, dx2.f, dx.d, 1e-4, 1e-5, "grad_apply over three parts");
    next:
        tk_free(&x), tk_free(&gamma), tk_free(&beta), tk_free(&dy), tk_free(&y), tk_free(&y2), tk_free(&dx);
        tk_free(&dx2), tk_free(&dg), tk_free(&db);
        free(st);
    }
}

static void batch_norm_train_fwd(const double *in, double *y, void *ctx)
{
    const norm_ctx *c = ctx;
    tl_k_batch_norm_train_ref(c->rows, c->d, EPS, in, in + c->rows * c->d, in + c->rows * c->d + c->d, y, NULL,
                              NULL);
}

static void batch_norm_train_fd(int64_t rows, int64_t ch, double lo, double hi)
{
    norm_ctx c = {rows, ch};
    int64_t n = rows * ch, nin = n + 2 * ch;
    tk_buf in = tk_rand(nin, 30, lo, hi), dy = tk_rand(n, 31, -1, 1), din = tk_zeros(nin);
    tk_buf g = tk_rand(2 * ch, 32, -1.5, 1.5);
    memcpy(in.d + n, g.d, (size_t)(2 * ch) * sizeof(double));
    tl_k_batch_norm_train_grad_ref(rows, ch, EPS, in.d, in.d + n, dy.d, din.d, din.d + n, din.d + n + ch);
    tk_check_grad(batch_norm_train_fwd, &c, nin, n, in.d, dy.d, din.d, "batch_norm_train_grad_ref");
    tk_free(&in), tk_free(&dy), tk_free(&din), tk_free(&g);
}

Test(ops_norm_kernels, batch_norm_train_twin_gradient_matches_finite_differences)
{
    batch_norm_train_fd(6, 1, -2, 2); /* one channel */
    batch_norm_train_fd(4, 3, -2, 2);
    batch_norm_train_fd(10, 2, -1, 1);
    batch_norm_train_fd(1, 3, -1, 1); /* one row: var 0, dx 0 */
    batch_norm_train_fd(6, 3, 100, 101);
}

/* ---- batch norm, inference ---------------------------------------------------------- */

static void batch_norm_infer_vs_twin(int64_t rows, int64_t c)
{
    int64_t n = rows * c;
    tk_buf x = tk_rand(n, 40, -2, 2), gamma = tk_rand(c, 41, 0.5, 1.5), beta = tk_rand(c, 42, -1, 1);
    tk_buf mean = tk_rand(c, 43, -0.5, 0.5), var = tk_rand(c, 44, 0.2, 2), y = tk_zeros(n), dy = tk_rand(n, 45, -1, 1);
    tk_buf dx = tk_zeros(n), dg = tk_zeros(c), db = tk_zeros(c), dm = tk_zeros(c), dv = tk_zeros(c);
    tl_k_batch_norm_infer(rows, c, EPS, x.f, gamma.f, beta.f, mean.f, var.f, false, y.f);
    tl_k_batch_norm_infer_ref(rows, c, EPS, x.d, gamma.d, beta.d, mean.d, var.d, y.d);
    tk_assert_close(n, y.f, y.d, 1e-6, 1e-6, "batch_norm_infer");
    tl_k_batch_norm_infer_grad(rows, c, EPS, x.f, gamma.f, mean.f, var.f, dy.f, dx.f, dg.f, db.f, dm.f, dv.f);
    tl_k_batch_norm_infer_grad_ref(rows, c, EPS, x.d, gamma.d, mean.d, var.d, dy.d, dx.d, dg.d, db.d, dm.d, dv.d);
    tk_assert_close(n, dx.f, dx.d, 1e-6, 1e-6, "batch_norm_infer_grad dx");
    tk_assert_close(c, dg.f, dg.d, 1e-6, 1e-6, "batch_norm_infer_grad dgamma");
    tk_assert_close(c, db.f, db.d, 1e-6, 1e-6, "batch_norm_infer_grad dbeta");
    tk_assert_close(c, dm.f, dm.d, 1e-6, 1e-6, "batch_norm_infer_grad dmean");
    tk_assert_close(c, dv.f, dv.d, 1e-6, 1e-6, "batch_norm_infer_grad dvar");
    tk_free(&x), tk_free(&gamma), tk_free(&beta), tk_free(&mean), tk_free(&var), tk_free(&y), tk_free(&dy);
    tk_free(&dx), tk_free(&dg), tk_free(&db), tk_free(&dm), tk_free(&dv);
}

Test(ops_norm_kernels, batch_norm_infer_matches_twin)
{
    for (size_t s = 0; s < NSHAPES; s++)
        batch_norm_infer_vs_twin(shapes[s][0], shapes[s][1]);
}

/* x = (x, gamma, beta, mean, var) end to end. */
static void batch_norm_infer_fwd(const double *in, double *y, void *ctx)
{
    const norm_ctx *c = ctx;
    int64_t n = c->rows * c->d;
    tl_k_batch_norm_infer_ref(c->rows, c->d, EPS, in, in + n, in + n + c->d, in + n + 2 * c->d, in + n + 3 * c->d,
                              y);
}

Test(ops_norm_kernels, batch_norm_infer_twin_gradient_matches_finite_differences)
{
    const int64_t cases[][2] = {{5, 1}, {4, 3}, {1, 2}};
    for (int k = 0; k < 3; k++) {
        norm_ctx c = {cases[k][0], cases[k][1]};
        int64_t n = c.rows * c.d, nin = n + 4 * c.d;
        tk_buf in = tk_rand(nin, 50, -1.5, 1.5), dy = tk_rand(n, 51, -1, 1), din = tk_zeros(nin);
        for (int64_t j = 0; j < c.d; j++)
            in.d[n + 3 * c.d + j] = 0.3 + fabs(in.d[n + 3 * c.d + j]); /* variances > 0 */
        tl_k_batch_norm_infer_grad_ref(c.rows, c.d, EPS, in.d, in.d + n, in.d + n + 2 * c.d, in.d + n + 3 * c.d, dy.d,
                                       din.d, din.d + n, din.d + n + c.d, din.d + n + 2 * c.d, din.d + n + 3 * c.d);
        tk_check_grad(batch_norm_infer_fwd, &c, nin, n, in.d, dy.d, din.d, "batch_norm_infer_grad_ref");
        tk_free(&in), tk_free(&dy), tk_free(&din);
    }
}

/* ---- the moving averages' update ------------------------------------------------------ */

Test(ops_norm_kernels, moving_update_matches_twin_and_keras_rule)
{
    const int64_t c = 37;
    tk_buf stat = tk_rand(c, 60, -3, 3), moving = tk_rand(c, 61, -3, 3), upd = tk_zeros(c);
    const double momenta[] = {0.99, 0.9, 0.0, 1.0};
    for (int m = 0; m < 4; m++)
        for (double scale = 0.25; scale <= 1.0; scale *= 4) {
            tl_k_moving_update(c, momenta[m], scale, stat.f, moving.f, upd.f);
            tl_k_moving_update_ref(c, momenta[m], scale, stat.d, moving.d, upd.d);
            tk_assert_close(c, upd.f, upd.d, 1e-7, 1e-9, "moving_update");
            for (int64_t j = 0; scale == 1.0 && j < c; j++) {
                double keras = moving.d[j] * momenta[m] + stat.d[j] * (1.0 - momenta[m]);
                cr_assert(fabs(moving.d[j] + upd.d[j] - keras) < 1e-12, "moving + update is not Keras' average");
            }
        }
    tk_free(&stat), tk_free(&moving), tk_free(&upd);
}

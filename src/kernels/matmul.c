/* matmul.c — GEMM through CBLAS with transpose flags, its gradients, and
 * their float64 twins. */
#include <cblas.h>
#include <inttypes.h>

#include "../base/base_int.h"
#include "../base/thread.h"
#include "kernels.h"

/* The largest dimension the BLAS integer can carry. */
#define BLAS_DIM_MAX ((int64_t)(sizeof(blasint) >= 8 ? INT64_MAX : INT32_MAX))

void tl_k_blas_single_thread(void)
{
    openblas_set_num_threads(1);
}

static tl_status check_dims(const char *what, int64_t m, int64_t n, int64_t k)
{
    const int64_t dims[3] = {m, n, k};
    static const char *const names[3] = {"m", "n", "k"};
    for (int i = 0; i < 3; i++)
        if (dims[i] < 0 || dims[i] > BLAS_DIM_MAX)
            return tl_error(TL_EINVAL, "%s: %s must be in [0, %" PRId64 "], got %" PRId64, what, names[i],
                            BLAS_DIM_MAX, dims[i]);
    return TL_OK;
}

/* C = beta·C over count elements; beta == 0 writes zeros (BLAS's rule). */
static void scale_c(int64_t count, float beta, float *restrict c)
{
    if (beta == 0.0f) {
        for (int64_t i = 0; i < count; i++)
            c[i] = 0.0f;
    } else if (beta != 1.0f) {
        for (int64_t i = 0; i < count; i++)
            c[i] *= beta;
    }
}

/* The BLAS call itself, dims already checked. */
static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *restrict a,
                 const float *restrict b, float beta, float *restrict c)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0) {
        /* BLAS would ask for leading dimensions >= 1 of empty operands;
         * the answer is beta·C either way. */
        scale_c(m * n, beta, c);
        return;
    }
    blasint lda = (blasint)(ta ? m : k), ldb = (blasint)(tb ? k : n);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, alpha, a, lda, b, ldb, beta, c, (blasint)n);
}

tl_status tl_k_matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *restrict a, const float *restrict b, float beta, float *restrict c)
{
    tl_status st = check_dims("matmul", m, n, k);
    if (st != TL_OK)
        return st;
    gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
    return TL_OK;
}

/* ---- a GEMM in pieces --------------------------------------------------- */

/* The fewest multiply-adds a piece may have. OpenBLAS 0.3 sends a product of
 * up to 1e6 multiply-adds (m·n·k) to its small-matrix kernels, which add in
 * another order than its blocked path; above that every element of C is the
 * blocked path's sum over k in one order, whatever rows or columns of C a
 * call covers. Pieces above this bound (with a margin) give the bits of the
 * whole call: tests/test_kernels_gemm_parts.c checks it over random shapes. */
#define GEMM_PIECE_MIN_MACS ((int64_t)1 << 21)
/* Pieces start at a multiple of the widest micro-kernel tile (16 floats). */
#define GEMM_PIECE_ALIGN 16

/* The dimension a GEMM is split along: rows of C when it has more rows than
 * columns (each piece then packs all of op(B) and a share of op(A)), else
 * its columns. */
static int64_t split_dim(const tl_k_gemm *g)
{
    return g->m > g->n ? g->m : g->n;
}

int tl_k_gemm_parts(const tl_k_gemm *g, int max_parts)
{
    if (g->k == 0 || g->m == 0 || g->n == 0)
        return 1;
    int64_t dim = split_dim(g), other = g->m > g->n ? g->n : g->m;
    for (int p = max_parts; p > 1; p--) {
        /* The last piece is the smallest (the others are whole multiples
         * of the alignment), and none may be empty. */
        int64_t lo, hi;
        tl_team_range(dim, GEMM_PIECE_ALIGN, p - 1, p, &lo, &hi);
        if (hi > lo && (hi - lo) * other * g->k >= GEMM_PIECE_MIN_MACS)
            return p;
    }
    return 1;
}

void tl_k_gemm_piece(const tl_k_gemm *g, int part, int nparts, int64_t *r0, int64_t *r1, int64_t *c0, int64_t *c1)
{
    *r0 = *c0 = 0;
    *r1 = g->m;
    *c1 = g->n;
    if (nparts > 1)
        tl_team_range(split_dim(g), GEMM_PIECE_ALIGN, part, nparts, g->m > g->n ? r0 : c0, g->m > g->n ? r1 : c1);
}

void tl_k_gemm_part(const tl_k_gemm *g, int part, int nparts)
{
    if (nparts == 1) {
        gemm(g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a, g->b, g->beta, g->c);
        return;
    }
    int64_t lo, hi;
    tl_team_range(split_dim(g), GEMM_PIECE_ALIGN, part, nparts, &lo, &hi);
    if (hi <= lo)
        return;
    blasint lda = (blasint)(g->ta ? g->m : g->k), ldb = (blasint)(g->tb ? g->k : g->n);
    CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans, tb = g->tb ? CblasTrans : CblasNoTrans;
    if (g->m > g->n) { /* rows lo..hi of C: rows of op(A) */
        const float *a = g->ta ? g->a + lo : g->a + lo * g->k;
        cblas_sgemm(CblasRowMajor, ta, tb, (blasint)(hi - lo), (blasint)g->n, (blasint)g->k, g->alpha, a, lda, g->b,
                    ldb, g->beta, g->c + lo * g->n, (blasint)g->n);
    } else { /* columns lo..hi of C: columns of op(B) */
        const float *b = g->tb ? g->b + lo * g->k : g->b + lo;
        cblas_sgemm(CblasRowMajor, ta, tb, (blasint)g->m, (blasint)(hi - lo), (blasint)g->k, g->alpha, g->a, lda, b,
                    ldb, g->beta, g->c + lo, (blasint)g->n);
    }
}

tl_status tl_k_gemm_check(const tl_k_gemm *g)
{
    return check_dims("matmul", g->m, g->n, g->k);
}

void tl_k_matmul_grad_gemms(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                            const float *a, const float *b, const float *dc, float beta, float *da, float *db,
                            tl_k_gemm *gda, tl_k_gemm *gdb)
{
    if (da != NULL) {
        if (!trans_a) /* dA (m, k) = dC·op(B)ᵀ */
            *gda = (tl_k_gemm){false, !trans_b, m, k, n, alpha, dc, b, beta, da};
        else /* dA (k, m) = op(B)·dCᵀ */
            *gda = (tl_k_gemm){trans_b, true, k, m, n, alpha, b, dc, beta, da};
    }
    if (db != NULL) {
        if (!trans_b) /* dB (k, n) = op(A)ᵀ·dC */
            *gdb = (tl_k_gemm){!trans_a, false, k, n, m, alpha, a, dc, beta, db};
        else /* dB (n, k) = dCᵀ·op(A) */
            *gdb = (tl_k_gemm){true, trans_a, n, k, m, alpha, dc, a, beta, db};
    }
}

/*
 * With op(A) (m, k), op(B) (k, n) and dC (m, n):
 *   d op(A) = alpha·dC·op(B)ᵀ   and   d op(B) = alpha·op(A)ᵀ·dC,
 * transposed back when A or B is stored transposed. Each case is one GEMM
 * whose operands are the stored A, B and dC with the flags worked out below.
 */
tl_status tl_k_matmul_grad(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                           const float *restrict a, const float *restrict b, const float *restrict dc,
                           float beta, float *restrict da, float *restrict db)
{
    tl_status st = check_dims("matmul_grad", m, n, k);
    if (st != TL_OK)
        return st;
    tl_k_gemm gda, gdb;
    tl_k_matmul_grad_gemms(trans_a, trans_b, m, n, k, alpha, a, b, dc, beta, da, db, &gda, &gdb);
    if (da != NULL)
        tl_k_gemm_part(&gda, 0, 1);
    if (db != NULL)
        tl_k_gemm_part(&gdb, 0, 1);
    return TL_OK;
}

/* ---- float64 twins: the definitions written out ---------------------------- */

/* op(A)[i, p] and op(B)[p, j] read from the stored layouts. */
static double op_a(const double *a, bool ta, int64_t m, int64_t k, int64_t i, int64_t p)
{
    return ta ? a[p * m + i] : a[i * k + p];
}

static double op_b(const double *b, bool tb, int64_t k, int64_t n, int64_t p, int64_t j)
{
    return tb ? b[j * k + p] : b[p * n + j];
}

/* out = v + beta·out, not reading out when beta == 0. */
static void store(double *out, double v, double beta)
{
    *out = beta == 0.0 ? v : v + beta * *out;
}

void tl_k_matmul_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                     const double *restrict a, const double *restrict b, double beta, double *restrict c)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t p = 0; p < k; p++)
                s += op_a(a, trans_a, m, k, i, p) * op_b(b, trans_b, k, n, p, j);
            store(&c[i * n + j], alpha * s, beta);
        }
}

void tl_k_matmul_grad_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                          const double *restrict a, const double *restrict b, const double *restrict dc,
                          double beta, double *restrict da, double *restrict db)
{
    /* d op(A)[i, p] = alpha·sum_j dC[i, j]·op(B)[p, j], stored at A's (i, p). */
    if (da != NULL)
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++) {
                double s = 0.0;
                for (int64_t j = 0; j < n; j++)
                    s += dc[i * n + j] * op_b(b, trans_b, k, n, p, j);
                store(trans_a ? &da[p * m + i] : &da[i * k + p], alpha * s, beta);
            }
    /* d op(B)[p, j] = alpha·sum_i op(A)[i, p]·dC[i, j], stored at B's (p, j). */
    if (db != NULL)
        for (int64_t p = 0; p < k; p++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0.0;
                for (int64_t i = 0; i < m; i++)
                    s += op_a(a, trans_a, m, k, i, p) * dc[i * n + j];
                store(trans_b ? &db[j * k + p] : &db[p * n + j], alpha * s, beta);
            }
}

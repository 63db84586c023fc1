/* batch_matmul.c — batched GEMM over broadcast batch dimensions, one
 * tl_k_matmul per output matrix, its gradients, and their float64 twins. */
#include "batch_matmul.h"

#include <cblas.h>
#include <inttypes.h>

#include "../base/base_int.h"

/* The largest dimension the BLAS integer can carry (matmul.c's rule). */
#define BLAS_DIM_MAX ((int64_t)(sizeof(blasint) >= 8 ? INT64_MAX : INT32_MAX))
#define MAX_BATCH (TL_MAX_RANK - 2)

/* Every field in range and every batch pair broadcasting. */
static tl_status check(const tl_k_bmm *s, const char *what)
{
    if (s->batch_rank < 0 || s->batch_rank > MAX_BATCH)
        return tl_error(TL_EINVAL, "%s: batch_rank must be in [0, %d], got %d", what, MAX_BATCH, s->batch_rank);
    const int64_t dims[3] = {s->m, s->n, s->k};
    static const char *const names[3] = {"m", "n", "k"};
    for (int i = 0; i < 3; i++)
        if (dims[i] < 0 || dims[i] > BLAS_DIM_MAX)
            return tl_error(TL_EINVAL, "%s: %s must be in [0, %" PRId64 "], got %" PRId64, what, names[i],
                            BLAS_DIM_MAX, dims[i]);
    for (int d = 0; d < s->batch_rank; d++) {
        int64_t x = s->a_batch[d], y = s->b_batch[d];
        if (x < 0 || y < 0)
            return tl_error(TL_EINVAL, "%s: batch dimension %d is negative (a %" PRId64 ", b %" PRId64 ")", what, d,
                            x, y);
        if (x != y && x != 1 && y != 1)
            return tl_error(TL_EINVAL,
                            "%s: batch dimension %d is %" PRId64 " in a and %" PRId64
                            " in b; each pair must be equal or have a 1",
                            what, d, x, y);
    }
    return TL_OK;
}

static int64_t product(const int64_t *dims, int n)
{
    int64_t p = 1;
    for (int d = 0; d < n; d++)
        p *= dims[d];
    return p;
}

int64_t tl_k_bmm_a_count(const tl_k_bmm *s)
{
    return product(s->a_batch, s->batch_rank);
}

int64_t tl_k_bmm_b_count(const tl_k_bmm *s)
{
    return product(s->b_batch, s->batch_rank);
}

int64_t tl_k_bmm_c_count(const tl_k_bmm *s)
{
    int64_t p = 1;
    for (int d = 0; d < s->batch_rank; d++)
        p *= s->a_batch[d] == 1 ? s->b_batch[d] : s->a_batch[d];
    return p;
}

tl_status tl_k_bmm_init(tl_k_bmm *s, const int64_t *a_shape, int a_rank, const int64_t *b_shape, int b_rank,
                        bool adj_a, bool adj_b, int64_t *c_shape)
{
    const char *what = "batch_matmul";
    const int ranks[2] = {a_rank, b_rank};
    for (int x = 0; x < 2; x++)
        if (ranks[x] < 2 || ranks[x] > TL_MAX_RANK)
            return tl_error(TL_EINVAL, "%s: %s has rank %d; ranks 2..%d are allowed", what, x ? "b" : "a", ranks[x],
                            TL_MAX_RANK);
    int rank = a_rank > b_rank ? a_rank : b_rank;
    s->batch_rank = rank - 2;
    s->adj_a = adj_a;
    s->adj_b = adj_b;
    /* Right-aligned: batch dim d of the output is dim d - (rank - x_rank) of x, or 1 before x's first. */
    for (int d = 0; d < rank - 2; d++) {
        int da = d - (rank - a_rank), db = d - (rank - b_rank);
        s->a_batch[d] = da >= 0 ? a_shape[da] : 1;
        s->b_batch[d] = db >= 0 ? b_shape[db] : 1;
    }
    int64_t a0 = a_shape[a_rank - 2], a1 = a_shape[a_rank - 1];
    int64_t b0 = b_shape[b_rank - 2], b1 = b_shape[b_rank - 1];
    s->m = adj_a ? a1 : a0;
    s->k = adj_a ? a0 : a1;
    int64_t kb = adj_b ? b1 : b0;
    s->n = adj_b ? b0 : b1;
    if (s->k != kb)
        return tl_error(TL_EINVAL, "%s: inner dimensions differ: op(a) has k = %" PRId64 ", op(b) has k = %" PRId64,
                        what, s->k, kb);
    tl_status st = check(s, what);
    if (st != TL_OK)
        return st;
    if (c_shape != NULL) {
        for (int d = 0; d < rank - 2; d++)
            c_shape[d] = s->a_batch[d] == 1 ? s->b_batch[d] : s->a_batch[d];
        c_shape[rank - 2] = s->m;
        c_shape[rank - 1] = s->n;
    }
    return TL_OK;
}

/* ---- the walk over output matrices ------------------------------------------ */

/* Output batch dims, and A's and B's strides in matrices along them: 0 where
 * the operand is repeated. */
typedef struct walk {
    int rank;
    int64_t out[MAX_BATCH], sa[MAX_BATCH], sb[MAX_BATCH];
    int64_t idx[MAX_BATCH]; /* the current output matrix's batch index */
} walk;

static void walk_init(walk *w, const tl_k_bmm *s)
{
    w->rank = s->batch_rank;
    int64_t pa = 1, pb = 1;
    for (int d = s->batch_rank - 1; d >= 0; d--) {
        w->out[d] = s->a_batch[d] == 1 ? s->b_batch[d] : s->a_batch[d];
        w->sa[d] = s->a_batch[d] == 1 ? 0 : pa;
        w->sb[d] = s->b_batch[d] == 1 ? 0 : pb;
        pa *= s->a_batch[d];
        pb *= s->b_batch[d];
        w->idx[d] = 0;
    }
}

/* The matrix of A (which 0) or B (which 1) output matrix idx reads. */
static int64_t walk_src(const walk *w, int which)
{
    const int64_t *st = which == 0 ? w->sa : w->sb;
    int64_t off = 0;
    for (int d = 0; d < w->rank; d++)
        off += w->idx[d] * st[d];
    return off;
}

/* Whether the current output matrix is the first (in output order) to read its
 * matrix of A (which 0) or B (which 1): index 0 along every repeated dim. */
static bool walk_first(const walk *w, int which)
{
    const int64_t *st = which == 0 ? w->sa : w->sb;
    for (int d = 0; d < w->rank; d++)
        if (st[d] == 0 && w->idx[d] != 0)
            return false;
    return true;
}

/* Row-major increment of the batch index. */
static void walk_next(walk *w)
{
    for (int d = w->rank - 1; d >= 0; d--) {
        if (++w->idx[d] < w->out[d])
            return;
        w->idx[d] = 0;
    }
}

/* x = beta·x over count elements; beta 0 writes zeros (BLAS's rule). */
static void scale(int64_t count, float beta, float *restrict x)
{
    if (beta == 0.0f) {
        for (int64_t i = 0; i < count; i++)
            x[i] = 0.0f;
    } else if (beta != 1.0f) {
        for (int64_t i = 0; i < count; i++)
            x[i] *= beta;
    }
}

tl_status tl_k_batch_matmul(const tl_k_bmm *s, const float *restrict a, const float *restrict b,
                            float *restrict c)
{
    tl_status st = check(s, "batch_matmul");
    if (st != TL_OK)
        return st;
    int64_t count = tl_k_bmm_c_count(s), ma = s->m * s->k, mb = s->k * s->n, mc = s->m * s->n;
    if (count == 0 || mc == 0)
        return TL_OK;
    if (s->k == 0) { /* A and B are empty (maybe NULL): C = 0 */
        scale(count * mc, 0.0f, c);
        return TL_OK;
    }
    walk w;
    walk_init(&w, s);
    for (int64_t o = 0; o < count; o++) {
        st = tl_k_matmul(s->adj_a, s->adj_b, s->m, s->n, s->k, 1.0f, a + walk_src(&w, 0) * ma,
                         b + walk_src(&w, 1) * mb, 0.0f, c + o * mc);
        TL_ASSERT(st == TL_OK); /* the dimensions were checked above */
        walk_next(&w);
    }
    return TL_OK;
}

tl_status tl_k_batch_matmul_grad(const tl_k_bmm *s, const float *restrict a, const float *restrict b,
                                 const float *restrict dc, float beta, float *restrict da, float *restrict db)
{
    tl_status st = check(s, "batch_matmul_grad");
    if (st != TL_OK)
        return st;
    int64_t count = tl_k_bmm_c_count(s), ma = s->m * s->k, mb = s->k * s->n, mc = s->m * s->n;
    /* dA sums over n, dB over m: with that sum or the output empty, dX = beta·dX. */
    if (da != NULL && ma > 0 && (count == 0 || s->n == 0)) {
        scale(tl_k_bmm_a_count(s) * ma, beta, da);
        da = NULL;
    }
    if (db != NULL && mb > 0 && (count == 0 || s->m == 0)) {
        scale(tl_k_bmm_b_count(s) * mb, beta, db);
        db = NULL;
    }
    if (da != NULL && ma > 0) {
        walk w;
        walk_init(&w, s);
        for (int64_t o = 0; o < count; o++) {
            int64_t ia = walk_src(&w, 0);
            st = tl_k_matmul_grad(s->adj_a, s->adj_b, s->m, s->n, s->k, 1.0f, a + ia * ma,
                                  b + walk_src(&w, 1) * mb, dc + o * mc, walk_first(&w, 0) ? beta : 1.0f,
                                  da + ia * ma, NULL);
            TL_ASSERT(st == TL_OK);
            walk_next(&w);
        }
    }
    if (db != NULL && mb > 0) {
        walk w;
        walk_init(&w, s);
        for (int64_t o = 0; o < count; o++) {
            int64_t ib = walk_src(&w, 1);
            st = tl_k_matmul_grad(s->adj_a, s->adj_b, s->m, s->n, s->k, 1.0f, a + walk_src(&w, 0) * ma,
                                  b + ib * mb, dc + o * mc, walk_first(&w, 1) ? beta : 1.0f, NULL, db + ib * mb);
            TL_ASSERT(st == TL_OK);
            walk_next(&w);
        }
    }
    return TL_OK;
}

/* ---- float64 twins: the definitions written out ---------------------------- */

/* The matrices of A and B that output matrix o reads, o decoded by division. */
static void decode(const tl_k_bmm *s, int64_t o, int64_t *ia, int64_t *ib)
{
    int64_t pa = 1, pb = 1;
    *ia = *ib = 0;
    for (int d = s->batch_rank - 1; d >= 0; d--) {
        int64_t out = s->a_batch[d] == 1 ? s->b_batch[d] : s->a_batch[d];
        int64_t i = o % out;
        o /= out;
        if (s->a_batch[d] != 1)
            *ia += i * pa;
        if (s->b_batch[d] != 1)
            *ib += i * pb;
        pa *= s->a_batch[d];
        pb *= s->b_batch[d];
    }
}

/* op(A)[i, p] of matrix A (stored (m, k), or (k, m) when adjoint), and op(B)[p, j]. */
static double op_a(const tl_k_bmm *s, const double *a, int64_t i, int64_t p)
{
    return s->adj_a ? a[p * s->m + i] : a[i * s->k + p];
}

static double op_b(const tl_k_bmm *s, const double *b, int64_t p, int64_t j)
{
    return s->adj_b ? b[j * s->k + p] : b[p * s->n + j];
}

tl_status tl_k_batch_matmul_ref(const tl_k_bmm *s, const double *restrict a, const double *restrict b,
                                double *restrict c)
{
    tl_status st = check(s, "batch_matmul");
    if (st != TL_OK)
        return st;
    int64_t count = tl_k_bmm_c_count(s), ma = s->m * s->k, mb = s->k * s->n, mc = s->m * s->n;
    for (int64_t o = 0; o < count; o++) {
        int64_t ia, ib;
        decode(s, o, &ia, &ib);
        for (int64_t i = 0; i < s->m; i++)
            for (int64_t j = 0; j < s->n; j++) {
                double sum = 0.0;
                for (int64_t p = 0; p < s->k; p++)
                    sum += op_a(s, a + ia * ma, i, p) * op_b(s, b + ib * mb, p, j);
                c[o * mc + i * s->n + j] = sum;
            }
    }
    return TL_OK;
}

tl_status tl_k_batch_matmul_grad_ref(const tl_k_bmm *s, const double *restrict a, const double *restrict b,
                                     const double *restrict dc, double beta, double *restrict da,
                                     double *restrict db)
{
    tl_status st = check(s, "batch_matmul_grad");
    if (st != TL_OK)
        return st;
    int64_t count = tl_k_bmm_c_count(s), ma = s->m * s->k, mb = s->k * s->n, mc = s->m * s->n;
    /* d op(A)[x, i, p] = sum over o reading x, j of dC[o, i, j]·op(B)[ib(o), p, j]. */
    for (int64_t x = 0; da != NULL && x < tl_k_bmm_a_count(s); x++)
        for (int64_t i = 0; i < s->m; i++)
            for (int64_t p = 0; p < s->k; p++) {
                double sum = 0.0;
                for (int64_t o = 0; o < count; o++) {
                    int64_t ia, ib;
                    decode(s, o, &ia, &ib);
                    if (ia != x)
                        continue;
                    for (int64_t j = 0; j < s->n; j++)
                        sum += dc[o * mc + i * s->n + j] * op_b(s, b + ib * mb, p, j);
                }
                double *out = &da[x * ma + (s->adj_a ? p * s->m + i : i * s->k + p)];
                *out = beta == 0.0 ? sum : sum + beta * *out;
            }
    /* d op(B)[x, p, j] = sum over o reading x, i of op(A)[ia(o), i, p]·dC[o, i, j]. */
    for (int64_t x = 0; db != NULL && x < tl_k_bmm_b_count(s); x++)
        for (int64_t p = 0; p < s->k; p++)
            for (int64_t j = 0; j < s->n; j++) {
                double sum = 0.0;
                for (int64_t o = 0; o < count; o++) {
                    int64_t ia, ib;
                    decode(s, o, &ia, &ib);
                    if (ib != x)
                        continue;
                    for (int64_t i = 0; i < s->m; i++)
                        sum += op_a(s, a + ia * ma, i, p) * dc[o * mc + i * s->n + j];
                }
                double *out = &db[x * mb + (s->adj_b ? j * s->k + p : p * s->n + j)];
                *out = beta == 0.0 ? sum : sum + beta * *out;
            }
    return TL_OK;
}

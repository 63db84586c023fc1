/* Kernels of the linalg family (src/kernels/batch_matmul.c): the batched
 * matmul and its gradients against their float64 twins on broadcast batch
 * shapes of rank 2..5 with every adjoint combination, the backward twin
 * against central finite differences of the forward twin, the bits of
 * tl_k_matmul for one matrix, and the geometry's errors.
 *
 * Tolerance against the twins: 1e-5 of the sum of |terms| elementwise (the
 * twin run on |A|, |B|, |dC|), as test_kernels.c's GEMM: float32 sums of up
 * to 512 products here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/batch_matmul.h"
#include "test_kernels_util.h"

TestSuite(ops_linalg_k, .init = tk_setup, .timeout = 120);

/* An operand pair in the non-adjoint layout: a (..., M, K), b (..., K, N). */
typedef struct bmm_case {
    int ra, rb;
    int64_t a[6], b[6];
} bmm_case;

static const bmm_case cases[] = {
    {2, 2, {3, 4}, {4, 5}},                          /* plain matrices */
    {4, 2, {8, 4, 16, 32}, {32, 64}},                /* b repeated over (8, 4) */
    {4, 3, {8, 1, 16, 32}, {4, 32, 16}},             /* each side repeated along one dim */
    {2, 4, {5, 3}, {2, 3, 3, 4}},                    /* a repeated over (2, 3) */
    {4, 4, {2, 3, 5, 4}, {2, 3, 4, 5}},              /* attention-shaped, no broadcast */
    {5, 5, {2, 1, 3, 4, 5}, {1, 2, 1, 5, 3}},        /* rank 5, 1s on both sides */
    {5, 3, {5, 1, 1, 2, 3}, {4, 3, 1}},              /* rank 5 x 3, N = 1 */
    {3, 2, {3, 1, 1}, {1, 1}},                       /* M = K = N = 1 */
    {3, 3, {1, 1, 1}, {6, 1, 2}},                    /* a: a single 1x1 repeated 6 times */
};

/* The stored shape of an operand: its last two dims swapped when adjoint. */
static void stored(const int64_t *dims, int rank, bool adj, int64_t *out)
{
    memcpy(out, dims, (size_t)rank * sizeof *dims);
    if (adj) {
        out[rank - 2] = dims[rank - 1];
        out[rank - 1] = dims[rank - 2];
    }
}

static int64_t elems(const int64_t *dims, int rank)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

static double *abs_of(const double *x, int64_t n)
{
    double *y = tk_alloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++)
        y[i] = fabs(x[i]);
    return y;
}

/* Forward and both gradients of one case against the twins; the gradients
 * with beta (0: into NaN, which must not leak; 1 and 0.5: into random values). */
static void check_case(const bmm_case *c, bool adj_a, bool adj_b, float beta)
{
    int64_t sa[6], sb[6], sc[6];
    stored(c->a, c->ra, adj_a, sa);
    stored(c->b, c->rb, adj_b, sb);
    tl_k_bmm s;
    cr_assert_eq(tl_k_bmm_init(&s, sa, c->ra, sb, c->rb, adj_a, adj_b, sc), TL_OK, "%s", tl_last_error());
    int rc = c->ra > c->rb ? c->ra : c->rb;
    int64_t na = elems(sa, c->ra), nb = elems(sb, c->rb), nc = elems(sc, rc);
    cr_assert_eq(tl_k_bmm_a_count(&s) * s.m * s.k, na);
    cr_assert_eq(tl_k_bmm_b_count(&s) * s.k * s.n, nb);
    cr_assert_eq(tl_k_bmm_c_count(&s) * s.m * s.n, nc);
    char what[192];
    snprintf(what, sizeof what, "case (%lld, ..., %lld) x (%lld, ..., %lld) adj_a=%d adj_b=%d beta=%g",
             (long long)c->a[0], (long long)c->a[c->ra - 1], (long long)c->b[0], (long long)c->b[c->rb - 1], adj_a,
             adj_b, (double)beta);

    tk_buf a = tk_rand(na, 1, -1, 1), b = tk_rand(nb, 2, -1, 1), y = tk_filled(nc, NAN), dy = tk_rand(nc, 3, -1, 1);
    double *aa = abs_of(a.d, na), *ab = abs_of(b.d, nb), *ady = abs_of(dy.d, nc);
    double *bound = tk_alloc((size_t)nc * sizeof *bound);
    cr_assert_eq(tl_k_batch_matmul(&s, a.f, b.f, y.f), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_k_batch_matmul_ref(&s, a.d, b.d, y.d), TL_OK);
    cr_assert_eq(tl_k_batch_matmul_ref(&s, aa, ab, bound), TL_OK);
    tk_assert_bounded(nc, y.f, y.d, bound, 1e-5, what);

    tk_buf da = beta == 0.0f ? tk_filled(na, NAN) : tk_rand(na, 4, -1, 1);
    tk_buf db = beta == 0.0f ? tk_filled(nb, NAN) : tk_rand(nb, 5, -1, 1);
    double *bda = abs_of(da.d, na), *bdb = abs_of(db.d, nb);
    if (beta == 0.0f) {
        memset(bda, 0, (size_t)na * sizeof *bda);
        memset(bdb, 0, (size_t)nb * sizeof *bdb);
    }
    cr_assert_eq(tl_k_batch_matmul_grad(&s, a.f, b.f, dy.f, beta, da.f, db.f), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_k_batch_matmul_grad_ref(&s, a.d, b.d, dy.d, beta, da.d, db.d), TL_OK);
    cr_assert_eq(tl_k_batch_matmul_grad_ref(&s, aa, ab, ady, fabs((double)beta), bda, bdb), TL_OK);
    tk_assert_bounded(na, da.f, da.d, bda, 1e-5, what);
    tk_assert_bounded(nb, db.f, db.d, bdb, 1e-5, what);

    free(aa);
    free(ab);
    free(ady);
    free(bound);
    free(bda);
    free(bdb);
    tk_free(&a);
    tk_free(&b);
    tk_free(&y);
    tk_free(&dy);
    tk_free(&da);
    tk_free(&db);
}

Test(ops_linalg_k, forward_and_grads_match_twins_every_adjoint)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int adj = 0; adj < 4; adj++)
            check_case(&cases[i], adj & 1, adj & 2, 0.0f);
}

Test(ops_linalg_k, grads_accumulate_with_beta)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case(&cases[i], false, true, 1.0f);
        check_case(&cases[i], true, false, 0.5f);
    }
}

/* The example shapes of the header, and the output shapes of broadcasting. */
Test(ops_linalg_k, broadcast_output_shapes)
{
    tl_k_bmm s;
    int64_t c[8];
    const int64_t a1[4] = {8, 4, 16, 32}, b1[2] = {32, 64};
    cr_assert_eq(tl_k_bmm_init(&s, a1, 4, b1, 2, false, false, c), TL_OK);
    cr_assert(c[0] == 8 && c[1] == 4 && c[2] == 16 && c[3] == 64);
    cr_assert_eq(tl_k_bmm_c_count(&s), 32);
    cr_assert_eq(tl_k_bmm_b_count(&s), 1);
    const int64_t a2[4] = {8, 1, 16, 32}, b2[3] = {4, 32, 16};
    cr_assert_eq(tl_k_bmm_init(&s, a2, 4, b2, 3, false, false, c), TL_OK);
    cr_assert(c[0] == 8 && c[1] == 4 && c[2] == 16 && c[3] == 16);
    cr_assert_eq(s.batch_rank, 2);
    cr_assert(s.a_batch[0] == 8 && s.a_batch[1] == 1 && s.b_batch[0] == 1 && s.b_batch[1] == 4);
    const int64_t q[4] = {2, 3, 5, 4};
    cr_assert_eq(tl_k_bmm_init(&s, q, 4, q, 4, false, true, c), TL_OK); /* Q·Kᵀ */
    cr_assert(c[0] == 2 && c[1] == 3 && c[2] == 5 && c[3] == 5);
    cr_assert(s.m == 5 && s.n == 5 && s.k == 4);
    cr_assert_eq(tl_k_bmm_init(&s, q, 4, q, 4, true, false, c), TL_OK); /* Qᵀ·K */
    cr_assert(c[2] == 4 && c[3] == 4 && s.k == 5);
}

/* Two 2-D operands are one tl_k_matmul, and the gradients tl_k_matmul_grad:
 * the same bits. Every output matrix is tl_k_matmul on the matrices it reads. */
Test(ops_linalg_k, one_matrix_gives_matmul_bits)
{
    for (int adj = 0; adj < 4; adj++) {
        bool ta = adj & 1, tb = adj & 2;
        const int64_t m = 17, n = 9, k = 33;
        int64_t sa[2] = {ta ? k : m, ta ? m : k}, sb[2] = {tb ? n : k, tb ? k : n};
        tl_k_bmm s;
        cr_assert_eq(tl_k_bmm_init(&s, sa, 2, sb, 2, ta, tb, NULL), TL_OK);
        tk_buf a = tk_rand(m * k, 11, -1, 1), b = tk_rand(k * n, 12, -1, 1), dc = tk_rand(m * n, 13, -1, 1);
        tk_buf c1 = tk_zeros(m * n), c2 = tk_zeros(m * n);
        tk_buf da1 = tk_rand(m * k, 14, -1, 1), da2 = tk_rand(m * k, 14, -1, 1);
        tk_buf db1 = tk_rand(k * n, 15, -1, 1), db2 = tk_rand(k * n, 15, -1, 1);
        cr_assert_eq(tl_k_batch_matmul(&s, a.f, b.f, c1.f), TL_OK);
        cr_assert_eq(tl_k_matmul(ta, tb, m, n, k, 1.0f, a.f, b.f, 0.0f, c2.f), TL_OK);
        tk_assert_same_bits(m * n, c1.f, c2.f, "batch_matmul vs matmul");
        for (int beta = 0; beta < 2; beta++) {
            cr_assert_eq(tl_k_batch_matmul_grad(&s, a.f, b.f, dc.f, (float)beta, da1.f, db1.f), TL_OK);
            cr_assert_eq(tl_k_matmul_grad(ta, tb, m, n, k, 1.0f, a.f, b.f, dc.f, (float)beta, da2.f, db2.f), TL_OK);
            tk_assert_same_bits(m * k, da1.f, da2.f, "batch_matmul_grad dA vs matmul_grad");
            tk_assert_same_bits(k * n, db1.f, db2.f, "batch_matmul_grad dB vs matmul_grad");
        }
        tk_free(&a);
        tk_free(&b);
        tk_free(&dc);
        tk_free(&c1);
        tk_free(&c2);
        tk_free(&da1);
        tk_free(&da2);
        tk_free(&db1);
        tk_free(&db2);
    }

    /* (2, 1, 3, 4) x (3, 4, 5): output matrix (i, j) is a[i]·b[j]. */
    const int64_t sa[4] = {2, 1, 3, 4}, sb[3] = {3, 4, 5};
    tl_k_bmm s;
    cr_assert_eq(tl_k_bmm_init(&s, sa, 4, sb, 3, false, false, NULL), TL_OK);
    tk_buf a = tk_rand(2 * 12, 21, -1, 1), b = tk_rand(3 * 20, 22, -1, 1), c = tk_zeros(6 * 15), one = tk_zeros(15);
    cr_assert_eq(tl_k_batch_matmul(&s, a.f, b.f, c.f), TL_OK);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            cr_assert_eq(tl_k_matmul(false, false, 3, 5, 4, 1.0f, a.f + i * 12, b.f + j * 20, 0.0f, one.f), TL_OK);
            tk_assert_same_bits(15, c.f + (i * 3 + j) * 15, one.f, "output matrix");
        }
    tk_free(&a);
    tk_free(&b);
    tk_free(&c);
    tk_free(&one);
}

Test(ops_linalg_k, repeated_runs_give_the_same_bits)
{
    const int64_t sa[4] = {8, 1, 16, 32}, sb[3] = {4, 32, 16};
    tl_k_bmm s;
    cr_assert_eq(tl_k_bmm_init(&s, sa, 4, sb, 3, false, false, NULL), TL_OK);
    int64_t na = 8 * 16 * 32, nb = 4 * 32 * 16, nc = 8 * 4 * 16 * 16;
    tk_buf a = tk_rand(na, 31, -1, 1), b = tk_rand(nb, 32, -1, 1), dc = tk_rand(nc, 33, -1, 1);
    tk_buf c[2] = {tk_zeros(nc), tk_zeros(nc)}, da[2] = {tk_zeros(na), tk_zeros(na)};
    tk_buf db[2] = {tk_zeros(nb), tk_zeros(nb)};
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(tl_k_batch_matmul(&s, a.f, b.f, c[r].f), TL_OK);
        cr_assert_eq(tl_k_batch_matmul_grad(&s, a.f, b.f, dc.f, 0.0f, da[r].f, db[r].f), TL_OK);
    }
    tk_assert_same_bits(nc, c[0].f, c[1].f, "c");
    tk_assert_same_bits(na, da[0].f, da[1].f, "da");
    tk_assert_same_bits(nb, db[0].f, db[1].f, "db");
    tk_free(&a);
    tk_free(&b);
    tk_free(&dc);
    for (int r = 0; r < 2; r++) {
        tk_free(&c[r]);
        tk_free(&da[r]);
        tk_free(&db[r]);
    }
}

/* ---- finite differences ----------------------------------------------------- */

typedef struct fd_ctx {
    tl_k_bmm s;
    int64_t na; /* x = a's elements then b's */
} fd_ctx;

static void bmm_fwd(const double *x, double *y, void *ctx)
{
    const fd_ctx *c = ctx;
    cr_assert_eq(tl_k_batch_matmul_ref(&c->s, x, x + c->na, y), TL_OK);
}

Test(ops_linalg_k, grad_twin_matches_finite_differences)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bmm_case *bc = &cases[i];
        int64_t sa[6], sb[6], sc[6];
        for (int adj = 0; adj < 4; adj++) {
            bool adj_a = adj & 1, adj_b = adj & 2;
            stored(bc->a, bc->ra, adj_a, sa);
            stored(bc->b, bc->rb, adj_b, sb);
            fd_ctx ctx;
            cr_assert_eq(tl_k_bmm_init(&ctx.s, sa, bc->ra, sb, bc->rb, adj_a, adj_b, sc), TL_OK);
            int64_t na = elems(sa, bc->ra), nb = elems(sb, bc->rb);
            int64_t nc = elems(sc, bc->ra > bc->rb ? bc->ra : bc->rb);
            if (na + nb > 700)
                continue; /* two forward twins per element: keep it quick */
            ctx.na = na;
            tk_buf x = tk_rand(na + nb, 40 + (uint64_t)i, -1, 1), dy = tk_rand(nc, 50, -1, 1);
            double *dx = tk_alloc((size_t)(na + nb) * sizeof *dx);
            cr_assert_eq(tl_k_batch_matmul_grad_ref(&ctx.s, x.d, x.d + na, dy.d, 0.0, dx, dx + na), TL_OK);
            char what[96];
            snprintf(what, sizeof what, "batch_matmul case %zu adj_a=%d adj_b=%d", i, adj_a, adj_b);
            tk_check_grad(bmm_fwd, &ctx, na + nb, nc, x.d, dy.d, dx, what);
            free(dx);
            tk_free(&x);
            tk_free(&dy);
        }
    }
}

/* ---- edges and errors ------------------------------------------------------- */

/* A zero batch dimension: no output matrices, so dA = beta·dA. K = 0: C = 0. */
Test(ops_linalg_k, empty_batch_and_empty_inner_dimension)
{
    tl_k_bmm s = {.batch_rank = 1, .a_batch = {1}, .b_batch = {0}, .m = 2, .n = 3, .k = 4};
    cr_assert_eq(tl_k_bmm_c_count(&s), 0);
    float a[8] = {0}, da[8];
    double ad[8] = {0}, dad[8];
    for (int i = 0; i < 8; i++) {
        da[i] = NAN;
        dad[i] = NAN;
    }
    cr_assert_eq(tl_k_batch_matmul_grad(&s, a, NULL, NULL, 0.0f, da, NULL), TL_OK);
    cr_assert_eq(tl_k_batch_matmul_grad_ref(&s, ad, NULL, NULL, 0.0, dad, NULL), TL_OK);
    for (int i = 0; i < 8; i++)
        cr_assert(da[i] == 0.0f && dad[i] == 0.0, "da[%d] = %g, twin %g", i, (double)da[i], dad[i]);
    for (int i = 0; i < 8; i++) {
        da[i] = 2.0f;
        dad[i] = 2.0;
    }
    cr_assert_eq(tl_k_batch_matmul_grad(&s, a, NULL, NULL, 0.5f, da, NULL), TL_OK);
    cr_assert_eq(tl_k_batch_matmul_grad_ref(&s, ad, NULL, NULL, 0.5, dad, NULL), TL_OK);
    for (int i = 0; i < 8; i++)
        cr_assert(da[i] == 1.0f && dad[i] == 1.0, "da[%d] = %g, twin %g", i, (double)da[i], dad[i]);

    tl_k_bmm z = {.batch_rank = 1, .a_batch = {2}, .b_batch = {1}, .m = 2, .n = 3, .k = 0};
    float c[12];
    for (int i = 0; i < 12; i++)
        c[i] = NAN;
    cr_assert_eq(tl_k_batch_matmul(&z, NULL, NULL, c), TL_OK);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(c[i], 0.0f);
    double cd[12];
    cr_assert_eq(tl_k_batch_matmul_ref(&z, NULL, NULL, cd), TL_OK);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(cd[i], 0.0);
}

#define ASSERT_ERROR(call, frag)                                                                             \
    do {                                                                                                     \
        tl_status st_ = (call);                                                                              \
        cr_assert_eq(st_, TL_EINVAL, "%s: got %s (%s)", #call, tl_err_name(st_), tl_last_error());          \
        cr_assert(strstr(tl_last_error(), (frag)) != NULL, "message \"%s\" lacks \"%s\"", tl_last_error(), \
                  (frag));                                                                                   \
    } while (0)

Test(ops_linalg_k, bad_geometry_is_an_error_and_writes_nothing)
{
    tl_k_bmm s;
    const int64_t v[1] = {5}, m34[2] = {3, 4}, m56[2] = {5, 6}, a3[3] = {8, 3, 4}, b3[3] = {4, 4, 2};
    ASSERT_ERROR(tl_k_bmm_init(&s, v, 1, m34, 2, false, false, NULL), "batch_matmul: a has rank 1; ranks 2..8");
    ASSERT_ERROR(tl_k_bmm_init(&s, m34, 2, v, 1, false, false, NULL), "batch_matmul: b has rank 1");
    ASSERT_ERROR(tl_k_bmm_init(&s, m34, 2, m56, 2, false, false, NULL),
                 "batch_matmul: inner dimensions differ: op(a) has k = 4, op(b) has k = 5");
    ASSERT_ERROR(tl_k_bmm_init(&s, m34, 2, m56, 2, false, true, NULL), "op(b) has k = 6");
    ASSERT_ERROR(tl_k_bmm_init(&s, a3, 3, b3, 3, false, false, NULL),
                 "batch_matmul: batch dimension 0 is 8 in a and 4 in b; each pair must be equal or have a 1");

    float c[4] = {1, 2, 3, 4}, a[4] = {0}, b[4] = {0}, dc[4] = {0}, da[4] = {5, 5, 5, 5};
    double cd[4] = {1, 2, 3, 4}, xd[4] = {0};
    tl_k_bmm bad = {.batch_rank = 7, .m = 1, .n = 1, .k = 1};
    ASSERT_ERROR(tl_k_batch_matmul(&bad, a, b, c), "batch_matmul: batch_rank must be in [0, 6], got 7");
    ASSERT_ERROR(tl_k_batch_matmul_ref(&bad, xd, xd, cd), "batch_rank must be in [0, 6]");
    tl_k_bmm nb = {.batch_rank = 1, .a_batch = {2}, .b_batch = {3}, .m = 1, .n = 1, .k = 1};
    ASSERT_ERROR(tl_k_batch_matmul(&nb, a, b, c), "batch dimension 0 is 2 in a and 3 in b");
    ASSERT_ERROR(tl_k_batch_matmul_grad(&nb, a, b, dc, 0.0f, da, NULL),
                 "batch_matmul_grad: batch dimension 0 is 2 in a and 3 in b");
    tl_k_bmm neg = {.batch_rank = 0, .m = -1, .n = 1, .k = 1};
    ASSERT_ERROR(tl_k_batch_matmul(&neg, a, b, c), "batch_matmul: m must be in [0, ");
    ASSERT_ERROR(tl_k_batch_matmul_grad_ref(&neg, xd, xd, xd, 0.0, cd, NULL), "m must be in [0, ");
    tl_k_bmm negb = {.batch_rank = 1, .a_batch = {-1}, .b_batch = {1}, .m = 1, .n = 1, .k = 1};
    ASSERT_ERROR(tl_k_batch_matmul(&negb, a, b, c), "batch dimension 0 is negative");
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(c[i], (float)(i + 1), "c written on error");
        cr_assert_eq(cd[i], (double)(i + 1), "cd written on error");
        cr_assert_eq(da[i], 5.0f, "da written on error");
    }
}

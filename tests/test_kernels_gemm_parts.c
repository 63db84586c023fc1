/* test_kernels_gemm_parts.c — a GEMM in pieces (kernels.h, tl_k_gemm_parts)
 * gives the bits of the whole call: the promise that lets a device's
 * intra-op threads split its GEMMs without changing what it trains. It rests
 * on OpenBLAS adding each element of C in one order on its blocked path
 * whatever part of C a call covers, so it is checked here over random
 * shapes, transposes, alphas and betas; a BLAS that broke it would fail
 * here, not silently in a training run. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/thread.h"
#include "kernels/kernels.h"
#include "tpuloop/rng.h"

static float *random_floats(tl_rng *r, int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    cr_assert_not_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)tl_rng_uniform(r) - 0.5f;
    return p;
}

/* The whole call and its pieces (run one after the other; they write
 * disjoint parts of C) agree bit for bit; returns the number of pieces. */
static int check_pieces(tl_rng *r, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                        int max_parts)
{
    float *a = random_floats(r, m * k), *b = random_floats(r, k * n), *c0 = random_floats(r, m * n);
    float *whole = malloc((size_t)(m * n) * sizeof *whole), *pieces = malloc((size_t)(m * n) * sizeof *pieces);
    cr_assert(whole != NULL && pieces != NULL);
    memcpy(whole, c0, (size_t)(m * n) * sizeof *whole);
    memcpy(pieces, c0, (size_t)(m * n) * sizeof *pieces);
    cr_assert_eq(tl_k_matmul(ta, tb, m, n, k, alpha, a, b, beta, whole), TL_OK);
    tl_k_gemm g = {ta, tb, m, n, k, alpha, a, b, beta, pieces};
    cr_assert_eq(tl_k_gemm_check(&g), TL_OK);
    int parts = tl_k_gemm_parts(&g, max_parts);
    cr_assert(parts >= 1 && parts <= max_parts, "%d parts of at most %d", parts, max_parts);
    for (int p = parts - 1; p >= 0; p--) /* any order */
        tl_k_gemm_part(&g, p, parts);
    cr_assert(memcmp(whole, pieces, (size_t)(m * n) * sizeof *whole) == 0,
              "%lld x %lld x %lld (ta %d, tb %d, alpha %g, beta %g) in %d pieces differs from one call", (long long)m,
              (long long)n, (long long)k, ta, tb, alpha, beta, parts);
    free(a);
    free(b);
    free(c0);
    free(whole);
    free(pieces);
    return parts;
}

Test(k_gemm_parts, pieces_have_the_bits_of_one_call_over_random_shapes)
{
    tl_rng r;
    tl_rng_init(&r, 7, 1, 0, 0);
    int split = 0;
    for (int t = 0; t < 160; t++) {
        int64_t m = 1 + (int64_t)(tl_rng_uniform(&r) * 700), n = 1 + (int64_t)(tl_rng_uniform(&r) * 700);
        int64_t k = 1 + (int64_t)(tl_rng_uniform(&r) * 900);
        bool ta = tl_rng_uniform(&r) < 0.5, tb = tl_rng_uniform(&r) < 0.5;
        static const float betas[3] = {0.0f, 1.0f, 0.5f};
        float beta = betas[t % 3], alpha = t % 4 == 0 ? 0.25f : 1.0f;
        split += check_pieces(&r, ta, tb, m, n, k, alpha, beta, 2 + t % 3) > 1;
    }
    cr_assert(split >= 60, "only %d of 160 random GEMMs were split: the test checks too little", split);
}

Test(k_gemm_parts, the_mlp_step_s_gemms_split_in_two)
{
    /* The main job's MLP at batch 128 (784-256-256-10): forward, the
     * gradients of the inputs and of the kernels. The 10-wide layer's are
     * too small to split. */
    static const int64_t shapes[][3] = {{128, 256, 784}, {128, 256, 256}, {784, 256, 128},
                                        {256, 256, 128}, {128, 256, 256}};
    tl_rng r;
    tl_rng_init(&r, 8, 1, 0, 0);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int f = 0; f < 4; f++)
            cr_assert_eq(check_pieces(&r, f & 1, f & 2, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 0.0f, 2), 2);
    cr_assert_eq(check_pieces(&r, false, false, 128, 10, 256, 1.0f, 0.0f, 2), 1);
    cr_assert_eq(check_pieces(&r, true, false, 256, 10, 128, 1.0f, 0.0f, 2), 1);
}

Test(k_gemm_parts, small_and_empty_gemms_stay_whole)
{
    tl_rng r;
    tl_rng_init(&r, 9, 1, 0, 0);
    cr_assert_eq(check_pieces(&r, false, false, 64, 64, 64, 1.0f, 0.0f, 4), 1);
    cr_assert_eq(check_pieces(&r, false, false, 16, 4096, 16, 1.0f, 0.0f, 4), 1);
    cr_assert_eq(check_pieces(&r, false, false, 512, 512, 0, 1.0f, 0.5f, 4), 1); /* k = 0: C = beta C */
    tl_k_gemm none = {false, false, 0, 512, 512, 1.0f, NULL, NULL, 0.0f, NULL};
    cr_assert_eq(tl_k_gemm_parts(&none, 4), 1);
    tl_k_gemm_part(&none, 0, 1); /* nothing to write */
    cr_assert_eq(check_pieces(&r, false, false, 2048, 2048, 8, 1.0f, 0.0f, 1), 1); /* one thread */
}

Test(k_gemm_parts, bad_sizes_are_errors_before_any_split)
{
    tl_k_gemm g = {false, false, -1, 8, 8, 1.0f, NULL, NULL, 0.0f, NULL};
    cr_assert_eq(tl_k_gemm_check(&g), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "m must be in [0,") != NULL, "%s", tl_last_error());
}

Test(k_gemm_parts, team_range_covers_n_in_aligned_pieces)
{
    for (int64_t n = 0; n < 300; n += 7)
        for (int parts = 1; parts <= 5; parts++) {
            int64_t at = 0;
            for (int p = 0; p < parts; p++) {
                int64_t lo, hi;
                tl_team_range(n, 16, p, parts, &lo, &hi);
                cr_assert_eq(lo, at, "n %lld part %d of %d starts at %lld, not %lld", (long long)n, p, parts,
                             (long long)lo, (long long)at);
                cr_assert(hi >= lo && (lo % 16 == 0 || lo == n));
                at = hi;
            }
            cr_assert_eq(at, n);
        }
}

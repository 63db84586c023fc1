/* Kernels: losses (sparse softmax cross-entropy, sigmoid cross-entropy, MSE)
 * and dropout, against their float64 twins and finite differences, with the
 * error cases TensorFlow raises. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_kernels_util.h"

#define ASSERT_ERROR(call, frag)                                                                             \
    do {                                                                                                     \
        tl_status st_ = (call);                                                                              \
        cr_assert_eq(st_, TL_EINVAL, "%s: got %s (%s)", #call, tl_err_name(st_), tl_last_error());          \
        cr_assert(strstr(tl_last_error(), (frag)) != NULL, "message \"%s\" lacks \"%s\"", tl_last_error(), \
                  (frag));                                                                                   \
    } while (0)

/* ---- sparse softmax cross-entropy --------------------------------------------- */

TestSuite(k_softmax_xent, .init = tk_setup);

static int32_t *rand_labels(int64_t batch, int64_t classes, uint64_t tag)
{
    int32_t *l = tk_alloc((size_t)batch * sizeof(int32_t));
    tl_rng r;
    tl_rng_init(&r, 99, tag, 0, 0);
    for (int64_t b = 0; b < batch; b++)
        l[b] = (int32_t)(tl_rng_u32(&r) % (uint32_t)classes);
    return l;
}

Test(k_softmax_xent, matches_twins)
{
    const int64_t batches[] = {1, 3, 17, 128}, classes[] = {1, 2, 7, 10, 64, 784};
    for (int bi = 0; bi < 4; bi++)
        for (int ci = 0; ci < 6; ci++) {
            int64_t b = batches[bi], c = classes[ci];
            tk_buf z = tk_rand(b * c, 1, -8, 8), loss = tk_zeros(b), dloss = tk_rand(b, 2, -1, 1);
            tk_buf g = tk_zeros(b * c), mean = tk_zeros(1), gm = tk_zeros(b * c);
            int32_t *labels = rand_labels(b, c, 3);
            cr_assert_eq(tl_k_softmax_xent(b, c, z.f, labels, loss.f), TL_OK);
            cr_assert_eq(tl_k_softmax_xent_ref(b, c, z.d, labels, loss.d), TL_OK);
            tk_assert_close(b, loss.f, loss.d, 1e-6, 1e-6, "softmax_xent");
            cr_assert_eq(tl_k_softmax_xent_grad(b, c, z.f, labels, dloss.f, g.f), TL_OK);
            cr_assert_eq(tl_k_softmax_xent_grad_ref(b, c, z.d, labels, dloss.d, g.d), TL_OK);
            tk_assert_close(b * c, g.f, g.d, 1e-6, 1e-7, "softmax_xent_grad");
            cr_assert_eq(tl_k_softmax_xent_mean(b, c, z.f, labels, mean.f), TL_OK);
            cr_assert_eq(tl_k_softmax_xent_mean_ref(b, c, z.d, labels, mean.d), TL_OK);
            tk_assert_close(1, mean.f, mean.d, 1e-6, 1e-6, "softmax_xent_mean");
            cr_assert_eq(tl_k_softmax_xent_mean_grad(b, c, z.f, labels, dloss.f, gm.f), TL_OK);
            cr_assert_eq(tl_k_softmax_xent_mean_grad_ref(b, c, z.d, labels, dloss.d, gm.d), TL_OK);
            tk_assert_close(b * c, gm.f, gm.d, 1e-6, 1e-8, "softmax_xent_mean_grad");
            free(labels);
            tk_free(&z);
            tk_free(&loss);
            tk_free(&dloss);
            tk_free(&g);
            tk_free(&mean);
            tk_free(&gm);
        }
}

/* Values worked out by hand (and by tf.nn.sparse_softmax_cross_entropy_with_logits). */
Test(k_softmax_xent, known_values)
{
    const float z[6] = {1, 2, 3, 0, 0, 0};
    const int32_t labels[2] = {2, 1};
    float loss[2], g[6], mean;
    cr_assert_eq(tl_k_softmax_xent(2, 3, z, labels, loss), TL_OK);
    cr_assert_float_eq(loss[0], 0.40760596f, 1e-7); /* log(e + e² + e³) - 3 */
    cr_assert_float_eq(loss[1], 1.0986123f, 1e-7);  /* log 3 */
    cr_assert_eq(tl_k_softmax_xent_mean(2, 3, z, labels, &mean), TL_OK);
    cr_assert_float_eq(mean, (0.40760596f + 1.0986123f) / 2, 1e-7);
    const float ones[2] = {1, 1};
    cr_assert_eq(tl_k_softmax_xent_grad(2, 3, z, labels, ones, g), TL_OK);
    cr_assert_float_eq(g[0], 0.09003057f, 1e-7);
    cr_assert_float_eq(g[2], 0.66524096f - 1.0f, 1e-7);
    cr_assert_float_eq(g[4], 1.0f / 3 - 1.0f, 1e-7);
}

/* Subtracting the row max keeps logits of ±1e4 finite, where exp overflows. */
Test(k_softmax_xent, stable_for_large_logits)
{
    const float z[4] = {1e4f, -1e4f, -1e4f, 1e4f};
    const int32_t labels[2] = {1, 1};
    float loss[2], g[4];
    const float ones[2] = {1, 1};
    cr_assert_eq(tl_k_softmax_xent(2, 2, z, labels, loss), TL_OK);
    cr_assert_float_eq(loss[0], 2e4f, 1e-3);
    cr_assert_float_eq(loss[1], 0.0f, 1e-7);
    cr_assert_eq(tl_k_softmax_xent_grad(2, 2, z, labels, ones, g), TL_OK);
    cr_assert_float_eq(g[0], 1.0f, 1e-7);
    cr_assert_float_eq(g[1], -1.0f, 1e-7);
    cr_assert_float_eq(g[3], 0.0f, 1e-7);
}

typedef struct xent_ctx {
    int64_t batch, classes;
    const int32_t *labels;
    bool mean;
} xent_ctx;

static void xent_fwd(const double *x, double *y, void *ctx)
{
    const xent_ctx *c = ctx;
    tl_status st = (c->mean ? tl_k_softmax_xent_mean_ref : tl_k_softmax_xent_ref)(c->batch, c->classes, x,
                                                                                 c->labels, y);
    cr_assert_eq(st, TL_OK);
}

Test(k_softmax_xent, grads_match_finite_differences)
{
    const int64_t shapes[][2] = {{1, 1}, {3, 7}, {4, 10}, {1, 2}};
    for (int s = 0; s < 4; s++)
        for (int mean = 0; mean < 2; mean++) {
            xent_ctx c = {shapes[s][0], shapes[s][1], NULL, mean};
            int32_t *labels = rand_labels(c.batch, c.classes, 4);
            c.labels = labels;
            int64_t n = c.batch * c.classes, ny = mean ? 1 : c.batch;
            tk_buf z = tk_rand(n, 5, -3, 3), dy = tk_rand(ny, 6, -1, 1);
            double *dz = tk_alloc((size_t)n * sizeof(double));
            if (mean)
                cr_assert_eq(tl_k_softmax_xent_mean_grad_ref(c.batch, c.classes, z.d, labels, dy.d, dz), TL_OK);
            else
                cr_assert_eq(tl_k_softmax_xent_grad_ref(c.batch, c.classes, z.d, labels, dy.d, dz), TL_OK);
            tk_check_grad(xent_fwd, &c, n, ny, z.d, dy.d, dz, mean ? "softmax_xent_mean" : "softmax_xent");
            free(dz);
            free(labels);
            tk_free(&z);
            tk_free(&dy);
        }
}

/* A label outside [0, classes) is TF's InvalidArgument: an error naming the
 * example and the label, and nothing is written. */
Test(k_softmax_xent, bad_labels_are_errors)
{
    const float z[12] = {0};
    const int32_t high[3] = {0, 3, 4}, negative[3] = {1, -1, 0};
    float loss[3] = {7, 7, 7}, g[12], dloss[3] = {1, 1, 1};
    for (int i = 0; i < 12; i++)
        g[i] = 7;
    ASSERT_ERROR(tl_k_softmax_xent(3, 4, z, high, loss), "example 2 has label 4");
    cr_assert(strstr(tl_last_error(), "outside the valid range of [0, 4)") != NULL, "%s", tl_last_error());
    ASSERT_ERROR(tl_k_softmax_xent(3, 4, z, negative, loss), "example 1 has label -1");
    ASSERT_ERROR(tl_k_softmax_xent_mean(3, 4, z, high, loss), "example 2 has label 4");
    ASSERT_ERROR(tl_k_softmax_xent_grad(3, 4, z, negative, dloss, g), "example 1 has label -1");
    ASSERT_ERROR(tl_k_softmax_xent_mean_grad(3, 4, z, high, dloss, g), "example 2 has label 4");
    double zd[12] = {0}, ld[3];
    ASSERT_ERROR(tl_k_softmax_xent_ref(3, 4, zd, high, ld), "example 2 has label 4");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(loss[i], 7.0f, "loss[%d] was written", i);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(g[i], 7.0f, "dlogits[%d] was written", i);
}

Test(k_softmax_xent, empty_batch_mean_is_nan)
{
    float mean = 0.0f;
    cr_assert_eq(tl_k_softmax_xent_mean(0, 10, NULL, NULL, &mean), TL_OK);
    cr_assert(isnan(mean));
}

Test(k_softmax_xent, same_inputs_same_bits)
{
    tk_buf z = tk_rand(128 * 10, 1, -5, 5), g1 = tk_zeros(128 * 10), g2 = tk_zeros(128 * 10);
    int32_t *labels = rand_labels(128, 10, 2);
    const float one = 1.0f;
    float m1, m2;
    cr_assert_eq(tl_k_softmax_xent_mean(128, 10, z.f, labels, &m1), TL_OK);
    cr_assert_eq(tl_k_softmax_xent_mean(128, 10, z.f, labels, &m2), TL_OK);
    tk_assert_same_bits(1, &m1, &m2, "mean loss twice");
    cr_assert_eq(tl_k_softmax_xent_mean_grad(128, 10, z.f, labels, &one, g1.f), TL_OK);
    cr_assert_eq(tl_k_softmax_xent_mean_grad(128, 10, z.f, labels, &one, g2.f), TL_OK);
    tk_assert_same_bits(128 * 10, g1.f, g2.f, "gradient twice");
    free(labels);
    tk_free(&z);
    tk_free(&g1);
    tk_free(&g2);
}

/* ---- sigmoid cross-entropy and MSE ------------------------------------------------ */

TestSuite(k_losses, .init = tk_setup);

Test(k_losses, sigmoid_xent_matches_twins)
{
    const int64_t ns[] = {1, 7, 17 * 64, 128 * 7};
    for (int i = 0; i < 4; i++) {
        int64_t n = ns[i];
        tk_buf x = tk_rand(n, 1, -10, 10), z = tk_rand(n, 2, 0, 1), loss = tk_zeros(n);
        tk_buf dl = tk_rand(n, 3, -1, 1), dx = tk_zeros(n);
        tl_k_sigmoid_xent(n, x.f, z.f, loss.f);
        tl_k_sigmoid_xent_ref(n, x.d, z.d, loss.d);
        tk_assert_close(n, loss.f, loss.d, 1e-6, 1e-6, "sigmoid_xent");
        tl_k_sigmoid_xent_grad(n, x.f, z.f, dl.f, dx.f);
        tl_k_sigmoid_xent_grad_ref(n, x.d, z.d, dl.d, dx.d);
        tk_assert_close(n, dx.f, dx.d, 1e-6, 1e-7, "sigmoid_xent_grad");
        tk_free(&x);
        tk_free(&z);
        tk_free(&loss);
        tk_free(&dl);
        tk_free(&dx);
    }
}

Test(k_losses, sigmoid_xent_is_stable_and_known)
{
    const float x[4] = {0.0f, 200.0f, -200.0f, 2.0f}, z[4] = {1.0f, 0.0f, 1.0f, 0.25f};
    float loss[4];
    tl_k_sigmoid_xent(4, x, z, loss);
    cr_assert_float_eq(loss[0], 0.6931472f, 1e-7); /* log 2 */
    cr_assert_float_eq(loss[1], 200.0f, 1e-4);     /* where log(1 - sigmoid(200)) would be -inf */
    cr_assert_float_eq(loss[2], 200.0f, 1e-4);
    cr_assert_float_eq(loss[3], 2.0f - 0.5f + 0.126928f, 1e-6);
}

/* The int32 form: the float form's bits for 0/1 labels, its float64 twin,
 * and finite differences of the twin. */
typedef struct i32_ctx {
    int64_t n;
    const int32_t *labels;
} i32_ctx;

static void sxent_i32_fwd(const double *x, double *y, void *ctx)
{
    const i32_ctx *c = ctx;
    cr_assert_eq(tl_k_sigmoid_xent_i32_ref(c->n, x, c->labels, y), TL_OK);
}

Test(k_losses, sigmoid_xent_i32_matches_float_form_and_twins)
{
    const int64_t ns[] = {1, 7, 1000};
    for (int i = 0; i < 3; i++) {
        int64_t n = ns[i];
        tk_buf x = tk_rand(n, 1, -10, 10), zf = tk_zeros(n), dl = tk_rand(n, 3, -1, 1);
        tk_buf loss = tk_zeros(n), lossf = tk_zeros(n), dx = tk_zeros(n), dxf = tk_zeros(n);
        int32_t *labels = rand_labels(n, 2, 4);
        for (int64_t k = 0; k < n; k++)
            zf.f[k] = (float)labels[k];
        cr_assert_eq(tl_k_sigmoid_xent_i32(n, x.f, labels, loss.f), TL_OK);
        tl_k_sigmoid_xent(n, x.f, zf.f, lossf.f);
        tk_assert_same_bits(n, loss.f, lossf.f, "int32 and float labels");
        cr_assert_eq(tl_k_sigmoid_xent_i32_ref(n, x.d, labels, loss.d), TL_OK);
        tk_assert_close(n, loss.f, loss.d, 1e-6, 1e-6, "sigmoid_xent_i32");
        cr_assert_eq(tl_k_sigmoid_xent_i32_grad(n, x.f, labels, dl.f, dx.f), TL_OK);
        tl_k_sigmoid_xent_grad(n, x.f, zf.f, dl.f, dxf.f);
        tk_assert_same_bits(n, dx.f, dxf.f, "int32 and float labels' gradient");
        cr_assert_eq(tl_k_sigmoid_xent_i32_grad_ref(n, x.d, labels, dl.d, dx.d), TL_OK);
        tk_assert_close(n, dx.f, dx.d, 1e-6, 1e-7, "sigmoid_xent_i32_grad");
        i32_ctx c = {n, labels};
        tk_check_grad(sxent_i32_fwd, &c, n, n, x.d, dl.d, dx.d, "sigmoid_xent_i32");
        free(labels);
        tk_free(&x);
        tk_free(&zf);
        tk_free(&dl);
        tk_free(&loss);
        tk_free(&lossf);
        tk_free(&dx);
        tk_free(&dxf);
    }
}

/* A label neither 0 nor 1 is an error naming the example and the label,
 * and nothing is written. */
Test(k_losses, sigmoid_xent_i32_bad_labels_are_errors)
{
    const float x[3] = {0.5f, -1.0f, 2.0f}, dloss[3] = {1, 1, 1};
    const int32_t two[3] = {0, 1, 2}, negative[3] = {1, -1, 0};
    float loss[3] = {7, 7, 7}, g[3] = {7, 7, 7};
    ASSERT_ERROR(tl_k_sigmoid_xent_i32(3, x, two, loss),
                 "sigmoid_cross_entropy: example 2 has label 2, which is not 0 or 1");
    ASSERT_ERROR(tl_k_sigmoid_xent_i32_grad(3, x, negative, dloss, g), "example 1 has label -1");
    double xd[3] = {0}, ld[3], gd[3], dld[3] = {1, 1, 1};
    ASSERT_ERROR(tl_k_sigmoid_xent_i32_ref(3, xd, two, ld), "example 2 has label 2");
    ASSERT_ERROR(tl_k_sigmoid_xent_i32_grad_ref(3, xd, negative, dld, gd), "example 1 has label -1");
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(loss[i], 7.0f, "loss[%d] was written", i);
        cr_assert_eq(g[i], 7.0f, "dx[%d] was written", i);
    }
}

typedef struct pair_ctx {
    int64_t n;
    const double *other; /* targets */
} pair_ctx;

static void sxent_fwd(const double *x, double *y, void *ctx)
{
    const pair_ctx *c = ctx;
    tl_k_sigmoid_xent_ref(c->n, x, c->other, y);
}

static void mse_fwd(const double *x, double *y, void *ctx)
{
    const pair_ctx *c = ctx;
    tl_k_mse_ref(c->n, x, c->other, y);
}

Test(k_losses, grads_match_finite_differences)
{
    const int64_t n = 23;
    tk_buf x = tk_rand(n, 1, -5, 5), z = tk_rand(n, 2, 0, 1), dl = tk_rand(n, 3, -1, 1);
    double dx[23];
    pair_ctx c = {n, z.d};
    tl_k_sigmoid_xent_grad_ref(n, x.d, z.d, dl.d, dx);
    tk_check_grad(sxent_fwd, &c, n, n, x.d, dl.d, dx, "sigmoid_xent");
    tl_k_mse_grad_ref(n, x.d, z.d, dl.d, dx); /* dl.d[0] is the scalar's gradient */
    tk_check_grad(mse_fwd, &c, n, 1, x.d, dl.d, dx, "mse");
    tk_free(&x);
    tk_free(&z);
    tk_free(&dl);
}

Test(k_losses, mse_matches_twins)
{
    const int64_t ns[] = {1, 7, 17 * 64, 128 * 784};
    for (int i = 0; i < 4; i++) {
        int64_t n = ns[i];
        tk_buf p = tk_rand(n, 1, -2, 2), t = tk_rand(n, 2, -2, 2), dp = tk_zeros(n);
        float loss;
        double lossd;
        const float dl = 1.5f;
        const double dld = 1.5;
        tl_k_mse(n, p.f, t.f, &loss);
        tl_k_mse_ref(n, p.d, t.d, &lossd);
        tk_assert_close(1, &loss, &lossd, 1e-7, 1e-12, "mse");
        tl_k_mse_grad(n, p.f, t.f, &dl, dp.f);
        tl_k_mse_grad_ref(n, p.d, t.d, &dld, dp.d);
        tk_assert_close(n, dp.f, dp.d, 1e-6, 1e-12, "mse_grad");
        tk_free(&p);
        tk_free(&t);
        tk_free(&dp);
    }
    float empty = 0.0f;
    tl_k_mse(0, NULL, NULL, &empty);
    cr_assert(isnan(empty), "mean of nothing is NaN");
}

/* ---- dropout ---------------------------------------------------------------------- */

TestSuite(k_dropout, .init = tk_setup);

Test(k_dropout, matches_twin_bit_for_bit_in_mask)
{
    const int64_t ns[] = {1, 7, 17 * 64, 128 * 784};
    const double rates[] = {0.0, 0.1, 0.5, 0.9};
    for (int i = 0; i < 4; i++)
        for (int r = 0; r < 4; r++) {
            int64_t n = ns[i];
            tl_rng stream;
            tl_rng_init(&stream, 42, 7, 3, 1000 + (uint64_t)r);
            tl_rng_u32(&stream); /* the stream's position must not matter */
            tk_buf x = tk_rand(n, 1, -1, 1), y = tk_zeros(n), dy = tk_rand(n, 2, -1, 1), dx = tk_zeros(n);
            uint8_t *mask = tk_alloc((size_t)n), *mask_ref = tk_alloc((size_t)n);
            cr_assert_eq(tl_k_dropout(n, rates[r], &stream, 5, x.f, y.f, mask), TL_OK);
            cr_assert_eq(tl_k_dropout_ref(n, rates[r], &stream, 5, x.d, y.d, mask_ref), TL_OK);
            cr_assert(memcmp(mask, mask_ref, (size_t)n) == 0, "masks differ at n=%lld rate=%g", (long long)n,
                      rates[r]);
            tk_assert_close(n, y.f, y.d, 2e-7, 0.0, "dropout");
            cr_assert_eq(tl_k_dropout_grad(n, rates[r], mask, dy.f, dx.f), TL_OK);
            cr_assert_eq(tl_k_dropout_grad_ref(n, rates[r], mask, dy.d, dx.d), TL_OK);
            tk_assert_close(n, dx.f, dx.d, 2e-7, 0.0, "dropout_grad");
            free(mask);
            free(mask_ref);
            tk_free(&x);
            tk_free(&y);
            tk_free(&dy);
            tk_free(&dx);
        }
}

Test(k_dropout, keeps_about_one_minus_rate_and_scales)
{
    const int64_t n = 100000;
    tl_rng stream;
    tl_rng_init(&stream, 1, 2, 0, 0);
    tk_buf x = tk_filled(n, 1.0), y = tk_zeros(n);
    uint8_t *mask = tk_alloc((size_t)n);
    cr_assert_eq(tl_k_dropout(n, 0.3, &stream, 0, x.f, y.f, mask), TL_OK);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        kept += mask[i];
        cr_assert(mask[i] <= 1);
        cr_assert_eq(y.f[i], mask[i] ? (float)(1.0 / 0.7) : 0.0f, "y[%lld] = %g", (long long)i, (double)y.f[i]);
    }
    /* Binomial(1e5, 0.7): sd 145, so ±1000 is a 7-sigma band. */
    cr_assert(llabs(kept - 70000) < 1000, "kept %lld of %lld", (long long)kept, (long long)n);
    cr_assert_eq(tl_k_dropout(n, 0.0, &stream, 0, x.f, y.f, mask), TL_OK);
    for (int64_t i = 0; i < n; i++)
        cr_assert(mask[i] == 1 && y.f[i] == 1.0f, "rate 0 drops nothing");
    free(mask);
    tk_free(&x);
    tk_free(&y);
}

/* The mask is a pure function of (stream, global index): a partition that
 * starts at offset draws what the whole tensor draws there, and a different
 * step gives a different mask. */
Test(k_dropout, mask_depends_only_on_stream_and_index)
{
    const int64_t n = 1000;
    tl_rng s1, s2;
    tl_rng_init(&s1, 9, 4, 2, 77);
    tl_rng_init(&s2, 9, 4, 2, 78);
    tk_buf x = tk_rand(n, 1, -1, 1), y = tk_zeros(n), y2 = tk_zeros(n);
    uint8_t whole[1000], part[1000], again[1000], other[1000];
    cr_assert_eq(tl_k_dropout(n, 0.5, &s1, 0, x.f, y.f, whole), TL_OK);
    cr_assert_eq(tl_k_dropout(n - 333, 0.5, &s1, 333, x.f + 333, y2.f + 333, part + 333), TL_OK);
    cr_assert(memcmp(whole + 333, part + 333, (size_t)(n - 333)) == 0, "partition at offset 333 differs");
    tk_assert_same_bits(n - 333, y.f + 333, y2.f + 333, "partition outputs");
    cr_assert_eq(tl_k_dropout(n, 0.5, &s1, 0, x.f, y2.f, again), TL_OK);
    cr_assert(memcmp(whole, again, (size_t)n) == 0, "same stream, different mask");
    tk_assert_same_bits(n, y.f, y2.f, "dropout twice");
    cr_assert_eq(tl_k_dropout(n, 0.5, &s2, 0, x.f, y2.f, other), TL_OK);
    cr_assert(memcmp(whole, other, (size_t)n) != 0, "the next step drew the same mask");
    tk_free(&x);
    tk_free(&y);
    tk_free(&y2);
}

/* keep iff u >= rate, u the element's 24-bit uniform: a rate equal to
 * element 3's u keeps it, the next float above drops it. */
Test(k_dropout, keeps_when_uniform_equals_rate)
{
    tl_rng stream, probe;
    tl_rng_init(&stream, 11, 12, 13, 14);
    probe = stream;
    tl_rng_seek(&probe, 3);
    float u = tl_rng_uniform(&probe);
    const float x[4] = {1, 1, 1, 1};
    float y[4];
    uint8_t mask[4], mask_ref[4];
    double xd[4] = {1, 1, 1, 1}, yd[4];
    cr_assert_eq(tl_k_dropout(4, u, &stream, 0, x, y, mask), TL_OK);
    cr_assert_eq(tl_k_dropout_ref(4, u, &stream, 0, xd, yd, mask_ref), TL_OK);
    cr_assert(mask[3] == 1 && mask_ref[3] == 1, "u == rate must keep (u = %a)", (double)u);
    float above = nextafterf(u, 1.0f);
    cr_assert_eq(tl_k_dropout(4, above, &stream, 0, x, y, mask), TL_OK);
    cr_assert_eq(tl_k_dropout_ref(4, above, &stream, 0, xd, yd, mask_ref), TL_OK);
    cr_assert(mask[3] == 0 && mask_ref[3] == 0, "u < rate must drop");
}

typedef struct drop_ctx {
    int64_t n;
    double rate;
    const tl_rng *stream;
} drop_ctx;

static void drop_fwd(const double *x, double *y, void *ctx)
{
    const drop_ctx *c = ctx;
    uint8_t mask[64];
    cr_assert_eq(tl_k_dropout_ref(c->n, c->rate, c->stream, 0, x, y, mask), TL_OK);
}

Test(k_dropout, grad_matches_finite_differences)
{
    tl_rng stream;
    tl_rng_init(&stream, 3, 1, 0, 5);
    drop_ctx c = {37, 0.4, &stream};
    tk_buf x = tk_rand(c.n, 1, -1, 1), dy = tk_rand(c.n, 2, -1, 1);
    double y[37], dx[37];
    uint8_t mask[37];
    cr_assert_eq(tl_k_dropout_ref(c.n, c.rate, &stream, 0, x.d, y, mask), TL_OK);
    cr_assert_eq(tl_k_dropout_grad_ref(c.n, c.rate, mask, dy.d, dx), TL_OK);
    tk_check_grad(drop_fwd, &c, c.n, c.n, x.d, dy.d, dx, "dropout");
    tk_free(&x);
    tk_free(&dy);
}

Test(k_dropout, bad_rate_is_an_error_and_writes_nothing)
{
    tl_rng stream;
    tl_rng_init(&stream, 1, 1, 1, 1);
    const float x[3] = {1, 2, 3};
    float y[3] = {7, 7, 7};
    uint8_t mask[3] = {7, 7, 7};
    ASSERT_ERROR(tl_k_dropout(3, 1.0, &stream, 0, x, y, mask), "rate must be a float in the range [0, 1), got 1");
    ASSERT_ERROR(tl_k_dropout(3, -0.1, &stream, 0, x, y, mask), "got -0.1");
    ASSERT_ERROR(tl_k_dropout(3, NAN, &stream, 0, x, y, mask), "got nan");
    ASSERT_ERROR(tl_k_dropout_grad(3, 1.5, mask, x, y), "dropout_grad: rate must be");
    double xd[3] = {1, 2, 3}, yd[3];
    ASSERT_ERROR(tl_k_dropout_ref(3, 2.0, &stream, 0, xd, yd, mask), "got 2");
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(y[i], 7.0f);
        cr_assert_eq(mask[i], 7);
    }
}

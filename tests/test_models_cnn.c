/* The built-in cnn model_fn's loss: label_smoothing gives Keras' smoothed
 * sparse cross-entropy of its own logits (recomputed here in float64 from
 * them), 0 gives the plain one, and a value outside [0, 1] is refused with
 * the param named. (The fusion tests, tests/test_graph_fusion.c, and the
 * job's training run, tests/test_mt_cnn.c, cover the rest of the model.) */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_models_util.h"
#include "tpuloop/models.h"

enum { B = 3, H = 6, W = 6, C = 4 }; /* 3 images of 6x6, 4 classes */

static traced trace(const char *params)
{
    traced t = tm_trace_begin(TL_MODE_TRAIN);
    int64_t xs[3] = {B, H, W}, ls[1] = {B};
    t.args.features = tl_graph_input(t.g, TL_F32, xs, 3);
    t.args.labels = tl_graph_input(t.g, TL_I32, ls, 1);
    t.args.batch_size = B;
    t.args.params_json = params;
    t.st = tl_model_cnn(t.g, &t.args, &t.spec, NULL);
    return t;
}

/* The loss of the model with params on fixed images and labels, and the
 * loss recomputed in float64 from its logits with smoothing s. */
static void loss_and_expected(const char *params, double s, double *loss, double *expected)
{
    traced t = trace(params);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    tl_program *p;
    float *params_v = tm_compile(&t, &p);
    tl_exec e;
    tm_exec_alloc(&e, p, t.vars, params_v);
    float *x = tl_exec_value(p, &e, t.args.features);
    for (int i = 0; i < B * H * W; i++)
        x[i] = (float)((i * 37) % 11) / 11.0f;
    int32_t *y = (int32_t *)tl_exec_value(p, &e, t.args.labels);
    for (int b = 0; b < B; b++)
        y[b] = (b * 3 + 1) % C;
    *loss = tm_loss(p, &e, t.spec.loss);
    const float *z = tl_exec_value(p, &e, t.spec.logits);
    double sum = 0;
    for (int b = 0; b < B; b++) {
        double m = z[b * C];
        for (int j = 1; j < C; j++)
            m = fmax(m, z[b * C + j]);
        double lse = 0;
        for (int j = 0; j < C; j++)
            lse += exp(z[b * C + j] - m);
        lse = m + log(lse);
        for (int j = 0; j < C; j++) {
            double q = (j == y[b] ? 1.0 - s : 0.0) + s / C;
            sum -= q * (z[b * C + j] - lse);
        }
    }
    *expected = sum / B;
    tm_exec_free(&e);
    free(params_v);
    tl_program_destroy(p);
    tm_untrace(&t);
}

Test(models_cnn, label_smoothing_is_keras_smoothed_cross_entropy)
{
    double plain, plain_want, smooth, smooth_want;
    loss_and_expected("{\"filters\": [4, 8], \"num_classes\": 4}", 0.0, &plain, &plain_want);
    loss_and_expected("{\"filters\": [4, 8], \"num_classes\": 4, \"label_smoothing\": 0.2}", 0.2, &smooth,
                      &smooth_want);
    cr_assert(fabs(plain - plain_want) <= 1e-5 * fabs(plain_want), "plain: %.9g, want %.9g", plain, plain_want);
    cr_assert(fabs(smooth - smooth_want) <= 1e-5 * fabs(smooth_want), "smoothed: %.9g, want %.9g", smooth,
              smooth_want);
    cr_assert(fabs(smooth - plain) > 1e-3, "smoothing 0.2 changes the loss: %.9g against %.9g", smooth, plain);
}

Test(models_cnn, label_smoothing_out_of_range_is_refused)
{
    const char *bad[] = {"1.5", "-0.1", "\"0.1\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char params[96];
        snprintf(params, sizeof params, "{\"label_smoothing\": %s}", bad[i]);
        traced t = trace(params);
        cr_assert_eq(t.st, TL_EINVAL, "%s", params);
        char want[96];
        snprintf(want, sizeof want, "cnn: params label_smoothing must be a number in [0, 1], got %s", bad[i]);
        cr_assert(strstr(tl_graph_error(t.g), want) != NULL, "%s", tl_graph_error(t.g));
        tm_untrace(&t);
    }
}

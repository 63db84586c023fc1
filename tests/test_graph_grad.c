/* Autodiff through whole graphs: every variable's gradient from the backward
 * pass against central finite differences of the forward pass. The kernels'
 * own float64 gradient checks are in test_kernels*.c; this checks the wiring:
 * which gradient goes where, accumulation over several consumers, views,
 * slices and concatenations. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/rng.h"

#include "test_graph_util.h"

static tl_t mlp(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)target;
    tl_t h = tl_dense(g, x, 5, TL_ACT_TANH, "a");
    h = tl_dense(g, h, 5, TL_ACT_SIGMOID, "b");
    tl_t logits = tl_dense(g, h, 3, TL_ACT_NONE, "c");
    return tl_mean(g, tl_softmax_xent(g, logits, labels));
}

static tl_t shared_weights(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    /* The same variable used twice: its gradient is the sum of both uses. */
    (void)labels;
    int64_t ws[2] = {6, 6}, bs[1] = {6};
    tl_t w = tl_variable(g, "w", ws, 2, (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0});
    tl_t b = tl_variable(g, "b", bs, 1, (tl_initializer){TL_INIT_UNIFORM, -0.5, 0.5});
    tl_t h = tl_relu(g, tl_bias_add(g, tl_matmul(g, x, w, false, false), b));
    tl_t y = tl_bias_add(g, tl_matmul(g, h, w, false, true), b);
    return tl_mse(g, y, target);
}

static tl_t views(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    /* concat, slice, reshape and the pairwise dot, ending in sigmoid xent. */
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_TANH, "d");
    tl_t c = tl_concat(g, (tl_t[]){h, x, tl_slice(g, h, 1, 2, 3)}, 3, 1); /* (4, 15) */
    int64_t s3[3] = {4, 5, 3};
    tl_t p = tl_pairwise_dot(g, tl_reshape(g, c, s3, 3)); /* (4, 10) */
    tl_t z = tl_dense(g, p, 6, TL_ACT_NONE, "e");
    return tl_mean(g, tl_sigmoid_xent(g, z, target));
}

static tl_t with_dropout(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)target;
    tl_t h = tl_dropout(g, tl_dense(g, x, 8, TL_ACT_RELU, "f"), 0.25);
    return tl_mean(g, tl_softmax_xent(g, tl_dense(g, h, 3, TL_ACT_NONE, "g"), labels));
}

Test(graph_grad, mlp_tanh_sigmoid_softmax) { tg_check_gradients(mlp, TL_MODE_TRAIN); }
Test(graph_grad, shared_variable_and_transpose_mse) { tg_check_gradients(shared_weights, TL_MODE_TRAIN); }
Test(graph_grad, concat_slice_reshape_pairwise_sigmoid_xent) { tg_check_gradients(views, TL_MODE_TRAIN); }
Test(graph_grad, dropout_mask_is_fixed_within_a_step) { tg_check_gradients(with_dropout, TL_MODE_TRAIN); }

Test(graph_grad, every_gradient_is_written_each_step)
{
    tg_fixture f = tg_setup(mlp, TL_MODE_TRAIN);
    tg_loss_at(&f);
    for (int64_t i = 0; i < f.vars->total; i++)
        f.e.param_grad[i] = 123.0f; /* stale values from a previous step */
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK);
    for (int64_t i = 0; i < f.vars->total; i++)
        cr_assert(f.e.param_grad[i] != 123.0f, "gradient %lld was not written", (long long)i);
    tg_teardown(&f);
}

Test(graph_grad, bad_label_is_an_error_not_a_crash)
{
    tg_fixture f = tg_setup(mlp, TL_MODE_TRAIN);
    int32_t *lv = (int32_t *)tl_exec_value(f.p, &f.e, 1);
    lv[2] = 7;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "label 7"), "%s", tl_last_error());
    tg_teardown(&f);
}

/* ---- sigmoid cross-entropy with int32 0/1 labels -------------------------- */

static tl_t binary(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)target;
    tl_t h = tl_dense(g, x, 5, TL_ACT_TANH, "a");
    tl_t logit = tl_dense(g, h, 1, TL_ACT_NONE, "b"); /* (4, 1) */
    return tl_mean(g, tl_sigmoid_xent(g, logit, labels));
}

Test(graph_grad, sigmoid_xent_int_labels) { tg_check_gradients_labels(binary, TL_MODE_TRAIN, 2); }

/* The logits themselves a variable z (4, 1), so its gradient is dL/dz. */
static tl_t logit_variable(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x;
    (void)target;
    int64_t zs[2] = {4, 1};
    tl_t z = tl_variable(g, "z", zs, 2, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    return tl_mean(g, tl_sigmoid_xent(g, z, labels));
}

/* The mean log loss -mean(y log p + (1 - y) log(1 - p)), p = sigmoid(z),
 * worked by hand; a logit of 100 with label 0 costs 100, not inf; and the
 * gradient is (sigmoid(z) - y) / batch. */
Test(graph_grad, sigmoid_xent_int_labels_value)
{
    tg_fixture f = tg_setup_labels(logit_variable, TL_MODE_TRAIN, 2);
    const float z[4] = {0.0f, 2.0f, -3.0f, 100.0f};
    const int32_t y[4] = {1, 0, 1, 0};
    memcpy(f.params, z, sizeof z);
    memcpy(tl_exec_value(f.p, &f.e, 1), y, sizeof y);
    /* log 2, log(1 + e^2), log(1 + e^3), 100 */
    const double want = (0.69314718056 + 2.12692801104 + 3.04858735157 + 100.0) / 4;
    double got = tg_loss_at(&f);
    cr_assert(fabs(got - want) < 1e-5 * want, "mean log loss %.9g, want %.9g", got, want);
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    const double dz[4] = {(0.5 - 1) / 4, (0.88079707798 - 0) / 4, (0.04742587318 - 1) / 4, 1.0 / 4};
    for (int i = 0; i < 4; i++)
        cr_assert(fabs(f.e.param_grad[i] - dz[i]) < 1e-6, "dL/dz[%d] = %.9g, want %.9g", i, f.e.param_grad[i], dz[i]);
    tg_teardown(&f);
}

/* The float form with the same labels as floats gives the same bits. */
static tl_t float_twin(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    tl_t z = tl_dense(g, x, 1, TL_ACT_NONE, "z");                        /* (4, 1) */
    int64_t s41[2] = {4, 1};
    tl_t by_int = tl_reshape(g, tl_sigmoid_xent(g, z, labels), s41, 2);  /* (4,) viewed as (4, 1) */
    tl_t by_float = tl_sigmoid_xent(g, z, tl_slice(g, target, 1, 0, 1)); /* (4, 1) */
    return tl_mean(g, tl_concat(g, (tl_t[]){by_int, by_float}, 2, 1));
}

Test(graph_grad, sigmoid_xent_int_and_float_labels_agree)
{
    tg_fixture f = tg_setup_labels(float_twin, TL_MODE_TRAIN, 2);
    float *target = tl_exec_value(f.p, &f.e, 2);
    const int32_t *y = (const int32_t *)tl_exec_value(f.p, &f.e, 1);
    for (int b = 0; b < 4; b++)
        target[b * 6] = (float)y[b];
    tg_loss_at(&f);
    const tl_node *cat = &f.g->nodes[f.g->nodes[f.p->loss].in[0]];
    const float *a = tl_exec_value(f.p, &f.e, cat->in[0]), *b = tl_exec_value(f.p, &f.e, cat->in[1]);
    for (int i = 0; i < 4; i++)
        cr_assert(a[i] == b[i] && a[i] > 0, "example %d: int form %.9g, float form %.9g", i, a[i], b[i]);
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    tg_teardown(&f);
}

/* A label other than 0 or 1 fails the step, forward and backward, naming
 * the example and the label. */
Test(graph_grad, sigmoid_xent_bad_label_is_an_error)
{
    tg_fixture f = tg_setup_labels(binary, TL_MODE_TRAIN, 2);
    int32_t *lv = (int32_t *)tl_exec_value(f.p, &f.e, 1);
    tg_loss_at(&f);
    lv[3] = 3;
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "example 3 has label 3, which is not 0 or 1"), "%s", tl_last_error());
    lv[3] = 0;
    lv[2] = -1;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "sigmoid_cross_entropy: example 2 has label -1"), "%s", tl_last_error());
    tg_teardown(&f);
}

/* ---- embedding activations ----------------------------------------------- */

/* A DLRM-shaped graph: two embedding features (4, 3) stacked with a dense
 * projection of x into (4, 3, 3), the pairwise dot, a top layer, sigmoid
 * cross-entropy. The activations' gradients (what the runtime sends to the
 * embedding engine) against finite differences of the loss; a third
 * feature the loss does not use has no gradient. */
Test(graph_grad, embedding_activations)
{
    tl_vars *vars;
    tl_graph *g;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
    int64_t xs[2] = {4, 6}, es[2] = {4, 3}, ts[2] = {4, 1};
    tl_t x = tl_graph_input(g, TL_F32, xs, 2);
    tl_t target = tl_graph_input(g, TL_F32, ts, 2);
    tl_t e0 = tl_embedding_activations(g, 0, es, 2), e1 = tl_embedding_activations(g, 1, es, 2);
    tl_t unused = tl_embedding_activations(g, 2, es, 2);
    cr_assert(tl_embedding_activations(g, 1, es, 2) < 0);
    cr_assert_eq(tl_graph_status(g), TL_EINVAL);
    cr_assert(strstr(tl_graph_error(g), "feature 1 is already in the graph") != NULL, "%s", tl_graph_error(g));
    tl_graph_destroy(g);

    /* again, without the mistake */
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
    x = tl_graph_input(g, TL_F32, xs, 2);
    target = tl_graph_input(g, TL_F32, ts, 2);
    e0 = tl_embedding_activations(g, 0, es, 2);
    e1 = tl_embedding_activations(g, 1, es, 2);
    unused = tl_embedding_activations(g, 2, es, 2);
    tl_t bottom = tl_dense(g, x, 3, TL_ACT_RELU, "bottom");
    tl_t stack = tl_concat(g, (tl_t[]){bottom, e0, e1}, 3, 1); /* (4, 9) */
    int64_t s3[3] = {4, 3, 3};
    tl_t inter = tl_pairwise_dot(g, tl_reshape(g, stack, s3, 3)); /* (4, 3) */
    tl_t top = tl_dense(g, tl_concat(g, (tl_t[]){inter, bottom}, 2, 1), 1, TL_ACT_NONE, "top");
    tl_t loss = tl_mean(g, tl_sigmoid_xent(g, top, target));
    cr_assert_eq(tl_graph_status(g), TL_OK, "%s", tl_graph_error(g));
    cr_assert_eq(tl_vars_layout(vars), TL_OK);
    tl_program *p;
    cr_assert_eq(tl_program_compile(g, loss, true, &p), TL_OK, "%s", tl_last_error());
    float *params = calloc((size_t)vars->total, sizeof(float));
    tl_vars_initialize(vars, 5, params);
    tl_exec e = {0};
    e.act = calloc((size_t)p->act_floats + 1, sizeof(float));
    e.grad = calloc((size_t)p->grad_floats + 1, sizeof(float));
    e.mask = calloc((size_t)p->mask_bytes + 1, 1);
    e.scratch = calloc((size_t)p->scratch_floats + 1, sizeof(float));
    e.param_grad = calloc((size_t)vars->total, sizeof(float));
    e.params = params;
    e.loss_scale = 1.0f;
    tl_rng r;
    tl_rng_init(&r, 7, 1, 0, 0);
    float *xv = tl_exec_value(p, &e, x), *tv = tl_exec_value(p, &e, target);
    float *ev[2] = {tl_exec_value(p, &e, e0), tl_exec_value(p, &e, e1)};
    for (int i = 0; i < 24; i++)
        xv[i] = (float)tl_rng_normal(&r);
    for (int i = 0; i < 4; i++)
        tv[i] = (float)(i % 2);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 12; i++)
            ev[k][i] = (float)tl_rng_normal(&r) * 0.5f;
    cr_assert_eq(tl_program_forward(p, &e), TL_OK);
    cr_assert_eq(tl_program_backward(p, &e), TL_OK);
    cr_assert_null(tl_exec_grad(p, &e, unused), "the loss does not use feature 2");
    double num2 = 0, diff2 = 0;
    for (int k = 0; k < 2; k++) {
        const float *ga = tl_exec_grad(p, &e, k ? e1 : e0);
        cr_assert_not_null(ga);
        float analytic[12];
        memcpy(analytic, ga, sizeof analytic);
        for (int i = 0; i < 12; i++) {
            const float h = 1e-2f;
            float keep = ev[k][i];
            ev[k][i] = keep + h;
            cr_assert_eq(tl_program_forward(p, &e), TL_OK);
            double up = *tl_exec_value(p, &e, loss);
            ev[k][i] = keep - h;
            cr_assert_eq(tl_program_forward(p, &e), TL_OK);
            double down = *tl_exec_value(p, &e, loss);
            ev[k][i] = keep;
            double numeric = (up - down) / (2.0 * h), d = numeric - analytic[i];
            num2 += numeric * numeric;
            diff2 += d * d;
        }
    }
    cr_assert(num2 > 0, "the loss must depend on the activations");
    cr_assert(sqrt(diff2 / num2) < 1e-2, "relative gradient error %g", sqrt(diff2 / num2));
    free(params);
    free(e.act);
    free(e.grad);
    free(e.mask);
    free(e.scratch);
    free(e.param_grad);
    tl_program_destroy(p);
    tl_graph_destroy(g);
    tl_vars_destroy(vars);
}

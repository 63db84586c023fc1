/* test_graph_util.c — the whole-graph fixture of test_graph_util.h. Holds no tests. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph_util.h"
#include "tpuloop/rng.h"

/* Traces build() on inputs x (4, 6), int labels (4,) in [0, classes) and a
 * float target, compiles with backward, and fills inputs and parameters. */
tg_fixture tg_setup_labels(tg_builder build, tl_mode mode, int classes)
{
    tg_fixture f;
    memset(&f, 0, sizeof f);
    cr_assert_eq(tl_vars_create(&f.vars), TL_OK);
    cr_assert_eq(tl_graph_create(f.vars, mode, &f.g), TL_OK);
    int64_t xs[2] = {4, 6}, ls[1] = {4};
    tl_t x = tl_graph_input(f.g, TL_F32, xs, 2);
    tl_t labels = tl_graph_input(f.g, TL_I32, ls, 1);
    tl_t target = tl_graph_input(f.g, TL_F32, xs, 2);
    tl_t loss = build(f.g, x, labels, target);
    cr_assert_eq(tl_graph_status(f.g), TL_OK, "%s", tl_graph_error(f.g));
    cr_assert_eq(tl_vars_layout(f.vars), TL_OK);
    cr_assert_eq(tl_program_compile(f.g, loss, true, &f.p), TL_OK, "%s", tl_last_error());
    f.params = calloc((size_t)f.vars->total, sizeof(float));
    tl_vars_initialize(f.vars, 5, f.params);
    f.e.act = calloc((size_t)f.p->act_floats + 1, sizeof(float));
    f.e.grad = calloc((size_t)f.p->grad_floats + 1, sizeof(float));
    f.e.mask = calloc((size_t)f.p->mask_bytes + 1, 1);
    f.e.scratch = calloc((size_t)f.p->scratch_floats + 1, sizeof(float));
    f.e.param_grad = calloc((size_t)f.vars->total, sizeof(float));
    f.e.params = f.params;
    f.e.seed = 9;
    f.e.step = 3;
    f.e.loss_scale = 1.0f;
    tl_rng r;
    tl_rng_init(&r, 1, 2, 3, 4);
    float *xv = tl_exec_value(f.p, &f.e, x), *tv = tl_exec_value(f.p, &f.e, target);
    for (int i = 0; i < 24; i++) {
        xv[i] = (float)tl_rng_normal(&r);
        tv[i] = tl_rng_uniform(&r);
    }
    int32_t *lv = (int32_t *)tl_exec_value(f.p, &f.e, labels);
    for (int i = 0; i < 4; i++)
        lv[i] = i % classes;
    return f;
}

tg_fixture tg_setup(tg_builder build, tl_mode mode)
{
    return tg_setup_labels(build, mode, 3);
}

void tg_teardown(tg_fixture *f)
{
    free(f->params);
    free(f->e.act);
    free(f->e.grad);
    free(f->e.mask);
    free(f->e.scratch);
    free(f->e.param_grad);
    tl_program_destroy(f->p);
    tl_graph_destroy(f->g);
    tl_vars_destroy(f->vars);
}

double tg_loss_at(tg_fixture *f)
{
    cr_assert_eq(tl_program_forward(f->p, &f->e), TL_OK, "%s", tl_last_error());
    return *tl_exec_value(f->p, &f->e, f->p->loss);
}

/* Every parameter's analytic gradient against (L(p+h) - L(p-h)) / 2h, with
 * labels in [0, classes). */
void tg_check_gradients_labels(tg_builder build, tl_mode mode, int classes)
{
    tg_fixture f = tg_setup_labels(build, mode, classes);
    tg_loss_at(&f);
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    double num2 = 0, diff2 = 0;
    for (int64_t i = 0; i < f.vars->total; i++) {
        const float h = 1e-2f;
        float keep = f.params[i];
        f.params[i] = keep + h;
        double up = tg_loss_at(&f);
        f.params[i] = keep - h;
        double down = tg_loss_at(&f);
        f.params[i] = keep;
        double numeric = (up - down) / (2.0 * h);
        double d = numeric - f.e.param_grad[i];
        num2 += numeric * numeric;
        diff2 += d * d;
    }
    cr_assert(num2 > 0, "the loss must depend on the parameters");
    cr_assert(sqrt(diff2 / num2) < 1e-2, "relative gradient error %g", sqrt(diff2 / num2));
    tg_teardown(&f);
}

void tg_check_gradients(tg_builder build, tl_mode mode)
{
    tg_check_gradients_labels(build, mode, 3);
}


/* The norm family through the tracer, planner and executor: layer norm and
 * batch norm (training and frozen) in whole graphs against finite
 * differences, the moving-average updates a training batch norm writes into
 * its state variables' param_grad entries, EVAL graphs reading the moving
 * statistics by name, and the shape errors' messages. The kernels' own checks
 * are in test_ops_norm_kernels.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph_util.h"
#include "tpuloop/rng.h"

/* ---- whole graphs against finite differences ------------------------------------ */

static tl_t ln_after_dense(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_NONE, "dense");
    tl_t y = tl_layer_norm(g, h, 1e-3, "layer_normalization");
    return tl_mse(g, tl_dense(g, tl_tanh(g, y), 6, TL_ACT_NONE, "dense_1"), target);
}

/* The dense output feeds the layer norm and the concat (its gradient is
 * summed), and one variable is both gamma and beta (summed inside the op). */
static tl_t ln_input_used_twice(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_TANH, "dense");
    int64_t d = 6;
    tl_t gb = tl_variable(g, "gb", &d, 1, (tl_initializer){TL_INIT_UNIFORM, 0.5, 1.5});
    tl_t y = tl_layer_norm_op(g, h, gb, gb, -1, 1e-3);
    tl_t both = tl_concat(g, (tl_t[]){y, h}, 2, 1); /* (4, 12) */
    return tl_mse(g, tl_dense(g, both, 6, TL_ACT_NONE, "dense_1"), target);
}

/* Rank 3, normalised over the last axis of (4, 2, 3). */
static tl_t ln_rank3(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    int64_t s3[3] = {4, 2, 3}, s2[2] = {4, 6};
    tl_t h = tl_reshape(g, tl_dense(g, x, 6, TL_ACT_NONE, "dense"), s3, 3);
    tl_t y = tl_layer_norm_op(g, h, tl_variable(g, "g", &s3[2], 1, (tl_initializer){TL_INIT_UNIFORM, 0.5, 1.5}),
                              tl_variable(g, "b", &s3[2], 1, (tl_initializer){TL_INIT_UNIFORM, -1, 1}), 2, 1e-3);
    return tl_mse(g, tl_reshape(g, y, s2, 2), target);
}

Test(ops_norm, layer_norm_after_dense_gradients) { tg_check_gradients(ln_after_dense, TL_MODE_TRAIN); }
Test(ops_norm, layer_norm_input_used_twice_gradients) { tg_check_gradients(ln_input_used_twice, TL_MODE_TRAIN); }
Test(ops_norm, layer_norm_rank3_gradients) { tg_check_gradients(ln_rank3, TL_MODE_TRAIN); }

static tl_t bn_after_dense(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_NONE, "dense");
    tl_t y = tl_batch_norm(g, h, 0.99, 1e-3, "batch_normalization");
    return tl_mse(g, tl_dense(g, tl_tanh(g, y), 6, TL_ACT_NONE, "dense_1"), target);
}

/* NHWC (2, 2, 3, 2): two channels over 12 rows, through a matmul after. */
static tl_t bn_rank4(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    int64_t s4[4] = {2, 2, 3, 2}, s2[2] = {4, 6}, ws[2] = {6, 6};
    tl_t h = tl_reshape(g, tl_dense(g, x, 6, TL_ACT_TANH, "dense"), s4, 4);
    tl_t y = tl_reshape(g, tl_batch_norm(g, h, 0.9, 1e-3, "bn"), s2, 2);
    tl_t w = tl_variable(g, "w", ws, 2, (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0});
    return tl_mse(g, tl_matmul(g, y, w, false, false), target);
}

/* One channel over all 24 elements. */
static tl_t bn_one_channel(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    int64_t s1[2] = {24, 1}, s2[2] = {4, 6};
    tl_t h = tl_reshape(g, tl_dense(g, x, 6, TL_ACT_TANH, "dense"), s1, 2);
    tl_t y = tl_reshape(g, tl_batch_norm(g, h, 0.99, 1e-3, "bn"), s2, 2);
    return tl_mse(g, tl_dense(g, y, 6, TL_ACT_NONE, "dense_1"), target);
}

/* The dense output feeds the batch norm and the concat. */
static tl_t bn_input_used_twice(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_TANH, "dense");
    tl_t y = tl_batch_norm(g, h, 0.99, 1e-3, "bn");
    tl_t both = tl_concat(g, (tl_t[]){h, y}, 2, 1);
    return tl_mse(g, tl_dense(g, both, 6, TL_ACT_NONE, "dense_1"), target);
}

/* A frozen batch norm in a TRAIN graph whose statistics are trainable
 * variables: gradients reach all five inputs. */
static tl_t bn_frozen(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    int64_t c = 6;
    tl_t h = tl_dense(g, x, 6, TL_ACT_TANH, "dense");
    tl_t gamma = tl_variable(g, "gamma", &c, 1, (tl_initializer){TL_INIT_UNIFORM, 0.5, 1.5});
    tl_t beta = tl_variable(g, "beta", &c, 1, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t mean = tl_variable(g, "mean", &c, 1, (tl_initializer){TL_INIT_UNIFORM, -0.5, 0.5});
    tl_t var = tl_variable(g, "var", &c, 1, (tl_initializer){TL_INIT_UNIFORM, 0.5, 1.5});
    tl_t y = tl_batch_norm_op(g, h, gamma, beta, mean, var, 0.99, 1e-3, false);
    return tl_mse(g, tl_dense(g, tl_concat(g, (tl_t[]){y, h}, 2, 1), 6, TL_ACT_NONE, "dense_1"), target);
}

/* Training on the raw input: nothing before the op needs a gradient, gamma
 * and beta are the only trainable inputs. */
static tl_t bn_on_input(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t y = tl_batch_norm(g, x, 0.99, 1e-3, "bn");
    return tl_mse(g, tl_tanh(g, y), target);
}

Test(ops_norm, batch_norm_after_dense_gradients) { tg_check_gradients(bn_after_dense, TL_MODE_TRAIN); }
Test(ops_norm, batch_norm_rank4_gradients) { tg_check_gradients(bn_rank4, TL_MODE_TRAIN); }
Test(ops_norm, batch_norm_one_channel_gradients) { tg_check_gradients(bn_one_channel, TL_MODE_TRAIN); }
Test(ops_norm, batch_norm_input_used_twice_gradients) { tg_check_gradients(bn_input_used_twice, TL_MODE_TRAIN); }
Test(ops_norm, batch_norm_frozen_gradients) { tg_check_gradients(bn_frozen, TL_MODE_TRAIN); }
Test(ops_norm, batch_norm_on_input_gradients) { tg_check_gradients(bn_on_input, TL_MODE_TRAIN); }

/* ---- the moving statistics ---------------------------------------------------------- */

static int var_index(const tl_vars *vars, const char *name)
{
    for (int i = 0; i < vars->n; i++)
        if (strcmp(vars->v[i].name, name) == 0)
            return i;
    cr_assert_fail("no variable %s", name);
    return -1;
}

static float *param(tg_fixture *f, const char *name)
{
    return f->params + f->vars->v[var_index(f->vars, name)].offset;
}

static float *update(tg_fixture *f, const char *name)
{
    return f->e.param_grad + f->vars->v[var_index(f->vars, name)].offset;
}

static const tl_node *only_batch_norm(const tl_graph *g)
{
    const tl_node *bn = NULL;
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == TL_OP_BATCH_NORM) {
            cr_assert_null(bn, "two batch norms");
            bn = &g->nodes[i];
        }
    cr_assert_not_null(bn);
    return bn;
}

/* The batch mean and biased variance of channel k of node x's value, float64. */
static void stats_f64(tg_fixture *f, tl_t x, int64_t k, double *mean, double *var)
{
    const tl_node *nd = tl_graph_node(f->g, x);
    int64_t c = nd->shape[nd->rank - 1], rows = nd->size / c;
    const float *v = tl_exec_value(f->p, &f->e, x);
    double s = 0, s2 = 0;
    for (int64_t r = 0; r < rows; r++)
        s += v[r * c + k];
    *mean = s / (double)rows;
    for (int64_t r = 0; r < rows; r++)
        s2 += (v[r * c + k] - *mean) * (v[r * c + k] - *mean);
    *var = s2 / (double)rows;
}

static tl_t bn_momentum_09(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    int64_t s4[4] = {2, 2, 3, 2}, s2[2] = {4, 6};
    tl_t h = tl_reshape(g, tl_dense(g, x, 6, TL_ACT_TANH, "dense"), s4, 4);
    tl_t y = tl_reshape(g, tl_batch_norm(g, h, 0.9, 1e-3, "bn"), s2, 2);
    return tl_mse(g, y, target);
}

/* Forward and backward with state_scale 1 (one replica) and 0.5 (two): each
 * moving statistic's entry is (1 - momentum)·(batch stat - moving)·scale,
 * the variance the biased one, and moving + entry is Keras' average. */
Test(ops_norm, batch_norm_writes_moving_average_updates)
{
    tg_fixture f = tg_setup(bn_momentum_09, TL_MODE_TRAIN);
    const tl_node *bn = only_batch_norm(f.g);
    cr_assert(bn->iattr[0], "a TRAIN graph's layer trains");
    float *mm = param(&f, "bn/moving_mean"), *mv = param(&f, "bn/moving_variance");
    cr_assert(mm[0] == 0.0f && mm[1] == 0.0f && mv[0] == 1.0f && mv[1] == 1.0f, "Keras' initial values");
    cr_assert(param(&f, "bn/gamma")[1] == 1.0f && param(&f, "bn/beta")[1] == 0.0f);
    mm[0] = 0.25f, mm[1] = -0.5f, mv[0] = 2.0f, mv[1] = 0.125f;
    const float scales[2] = {1.0f, 0.5f};
    for (int s = 0; s < 2; s++) {
        f.e.state_scale = scales[s];
        tg_loss_at(&f);
        /* Stale values in the entries must be overwritten, not added to. */
        update(&f, "bn/moving_mean")[0] = 1e3f;
        cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK, "%s", tl_last_error());
        for (int64_t k = 0; k < 2; k++) {
            double mean, var;
            stats_f64(&f, bn->in[0], k, &mean, &var);
            double want_m = 0.1 * (mean - mm[k]) * scales[s], want_v = 0.1 * (var - mv[k]) * scales[s];
            float got_m = update(&f, "bn/moving_mean")[k], got_v = update(&f, "bn/moving_variance")[k];
            cr_assert(fabs(got_m - want_m) <= 1e-6 * (1 + fabs(want_m)), "mean update %d: %.9g, want %.9g", (int)k,
                      (double)got_m, want_m);
            cr_assert(fabs(got_v - want_v) <= 1e-6 * (1 + fabs(want_v)), "variance update %d: %.9g, want %.9g",
                      (int)k, (double)got_v, want_v);
            if (scales[s] == 1.0f) {
                cr_assert(fabs(mm[k] + got_m - (0.9 * mm[k] + 0.1 * mean)) < 1e-6);
                cr_assert(fabs(mv[k] + got_v - (0.9 * mv[k] + 0.1 * var)) < 1e-6);
            }
        }
        /* The moving values are not what the step normalised with. */
        cr_assert(fabs(update(&f, "bn/moving_variance")[0]) > 1e-3);
    }
    tg_teardown(&f);
}

/* A TRAIN graph normalises with the batch statistics, whatever the moving
 * ones hold; an EVAL graph over the same variables (found by name) with the
 * moving ones, and computes no update. */
static tl_t bn_layer(tl_graph *g, tl_t x)
{
    return tl_batch_norm(g, x, 0.99, 1e-3, "batch_normalization");
}

Test(ops_norm, eval_graph_uses_the_moving_statistics)
{
    tl_vars *vars;
    tl_graph *gt, *ge;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &gt), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_EVAL, &ge), TL_OK);
    int64_t xs[3] = {5, 2, 3};
    tl_t xt = tl_graph_input(gt, TL_F32, xs, 3), xe = tl_graph_input(ge, TL_F32, xs, 3);
    tl_t yt = bn_layer(gt, xt), ye = bn_layer(ge, xe);
    tl_t lt = tl_sum(gt, yt);
    cr_assert_eq(tl_graph_status(gt), TL_OK, "%s", tl_graph_error(gt));
    cr_assert_eq(tl_graph_status(ge), TL_OK, "%s", tl_graph_error(ge));
    cr_assert_eq(vars->n, 4, "one set of variables for both graphs");
    cr_assert_not(ge->nodes[ye].iattr[0], "an EVAL graph's layer is frozen");
    cr_assert_eq(tl_vars_layout(vars), TL_OK);
    tl_program *pt, *pe;
    cr_assert_eq(tl_program_compile(gt, lt, true, &pt), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_program_compile(ge, TL_T_INVALID, false, &pe), TL_OK, "%s", tl_last_error());

    float *params = calloc((size_t)vars->total, sizeof(float));
    tl_vars_initialize(vars, 5, params);
    const char *names[4] = {"batch_normalization/gamma", "batch_normalization/beta",
                            "batch_normalization/moving_mean", "batch_normalization/moving_variance"};
    const float values[4][3] = {{1.5f, -0.5f, 2.0f}, {0.25f, 0.0f, -1.0f}, {0.5f, -0.25f, 3.0f}, {4.0f, 0.5f, 0.0625f}};
    for (int v = 0; v < 4; v++)
        memcpy(params + vars->v[var_index(vars, names[v])].offset, values[v], sizeof values[v]);
    tl_exec et = {0}, ee = {0};
    et.act = calloc((size_t)pt->act_floats + 1, sizeof(float));
    et.grad = calloc((size_t)pt->grad_floats + 1, sizeof(float));
    et.scratch = calloc((size_t)pt->scratch_floats + 1, sizeof(float));
    et.param_grad = calloc((size_t)vars->total, sizeof(float));
    et.params = params;
    et.loss_scale = et.state_scale = 1.0f;
    ee.act = calloc((size_t)pe->act_floats + 1, sizeof(float));
    ee.scratch = calloc((size_t)pe->scratch_floats + 1, sizeof(float));
    ee.params = params;
    tl_rng r;
    tl_rng_init(&r, 7, 8, 9, 10);
    float *xv = tl_exec_value(pt, &et, xt), *xev = tl_exec_value(pe, &ee, xe);
    for (int i = 0; i < 30; i++)
        xv[i] = xev[i] = 10.0f + 3.0f * (float)tl_rng_normal(&r);
    cr_assert_eq(tl_program_forward(pt, &et), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_program_forward(pe, &ee), TL_OK, "%s", tl_last_error());
    const float *ytv = tl_exec_value(pt, &et, yt), *yev = tl_exec_value(pe, &ee, ye);
    for (int k = 0; k < 3; k++) {
        double s = 0, s2 = 0;
        for (int i = 0; i < 10; i++)
            s += xv[i * 3 + k];
        double mean = s / 10;
        for (int i = 0; i < 10; i++)
            s2 += (xv[i * 3 + k] - mean) * (xv[i * 3 + k] - mean);
        double var = s2 / 10;
        for (int i = 0; i < 10; i++) {
            double x = xv[i * 3 + k];
            double train = (x - mean) / sqrt(var + 1e-3) * values[0][k] + values[1][k];
            double eval = (x - values[2][k]) / sqrt(values[3][k] + 1e-3) * values[0][k] + values[1][k];
            cr_assert(fabs(ytv[i * 3 + k] - train) <= 1e-5 * (1 + fabs(train)), "train y[%d, %d] %.9g, want %.9g", i,
                      k, (double)ytv[i * 3 + k], train);
            cr_assert(fabs(yev[i * 3 + k] - eval) <= 1e-5 * (1 + fabs(eval)), "eval y[%d, %d] %.9g, want %.9g", i, k,
                      (double)yev[i * 3 + k], eval);
        }
    }
    /* The TRAIN program's backward writes the updates; the moving values
     * themselves stay as they are (the runtime adds the updates). */
    cr_assert_eq(tl_program_backward(pt, &et), TL_OK, "%s", tl_last_error());
    const float *um = et.param_grad + vars->v[var_index(vars, names[2])].offset;
    cr_assert(fabs(um[0]) > 1e-3, "the moving mean moves (%g)", (double)um[0]);
    cr_assert_eq(params[vars->v[var_index(vars, names[2])].offset], 0.5f);

    free(params);
    free(et.act), free(et.grad), free(et.scratch), free(et.param_grad);
    free(ee.act), free(ee.scratch);
    tl_program_destroy(pt);
    tl_program_destroy(pe);
    tl_graph_destroy(gt);
    tl_graph_destroy(ge);
    tl_vars_destroy(vars);
}

/* An EVAL graph may use one layer twice (no updates there); a frozen layer
 * gives state variables no gradient and x its own. */
Test(ops_norm, frozen_layer_twice_in_eval_is_fine)
{
    tl_vars *vars;
    tl_graph *g;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_EVAL, &g), TL_OK);
    int64_t xs[2] = {4, 3};
    tl_t x = tl_graph_input(g, TL_F32, xs, 2);
    tl_t y = tl_batch_norm(g, tl_batch_norm(g, x, 0.99, 1e-3, "bn"), 0.99, 1e-3, "bn");
    cr_assert_neq(y, TL_T_INVALID, "%s", tl_graph_error(g));
    cr_assert_eq(vars->n, 4);
    tl_graph_destroy(g);
    tl_vars_destroy(vars);
}

/* ---- errors ------------------------------------------------------------------------- */

typedef struct traced {
    tl_vars *vars;
    tl_graph *g;
    tl_t x; /* (4, 6) */
} traced;

static traced trace(tl_mode mode)
{
    traced t;
    cr_assert_eq(tl_vars_create(&t.vars), TL_OK);
    cr_assert_eq(tl_graph_create(t.vars, mode, &t.g), TL_OK);
    int64_t xs[2] = {4, 6};
    t.x = tl_graph_input(t.g, TL_F32, xs, 2);
    return t;
}

/* The op failed with exactly msg, and the next op returns TL_T_INVALID. */
static void expect_error(traced *t, tl_t got, const char *msg)
{
    cr_assert_eq(got, TL_T_INVALID);
    cr_assert_eq(tl_graph_status(t->g), TL_EINVAL);
    cr_assert_str_eq(tl_graph_error(t->g), msg);
    cr_assert_eq(tl_layer_norm(t->g, t->x, 1e-3, "later"), TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(t->g), msg, "the first error stays");
    tl_graph_destroy(t->g);
    tl_vars_destroy(t->vars);
}

static tl_t vec(traced *t, const char *name, int64_t n, bool state)
{
    return state ? tl_state_variable(t->g, name, &n, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0})
                 : tl_variable(t->g, name, &n, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0});
}

Test(ops_norm, layer_norm_errors)
{
    traced t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_layer_norm_op(t.g, t.x, vec(&t, "g", 5, false), vec(&t, "b", 6, false), -1, 1e-3),
                 "layer_norm: gamma has shape (5,), which is not (6,), the last dimension of x (4, 6)");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_layer_norm_op(t.g, t.x, vec(&t, "g", 6, false), vec(&t, "b", 4, false), 1, 1e-3),
                 "layer_norm: beta has shape (4,), which is not (6,), the last dimension of x (4, 6)");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_layer_norm_op(t.g, t.x, vec(&t, "g", 6, false), vec(&t, "b", 6, false), 0, 1e-3),
                 "layer_norm: axis 0 is not supported for x (4, 6); only the last axis (-1 or 1) is normalised");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_layer_norm_op(t.g, t.x, vec(&t, "g", 6, false), vec(&t, "b", 6, false), -2, 1e-3),
                 "layer_norm: axis -2 is not supported for x (4, 6); only the last axis (-1 or 1) is normalised");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_layer_norm_op(t.g, t.x, vec(&t, "g", 6, false), vec(&t, "b", 6, false), -1, -1.0),
                 "layer_norm: epsilon must be finite and >= 0, got -1");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_layer_norm(t.g, tl_mean(t.g, t.x), 1e-3, "ln"),
                 "layer_norm ln: x must have rank >= 1, got shape ()");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_layer_norm_op(t.g, tl_sum(t.g, t.x), t.x, t.x, -1, 1e-3),
                 "layer_norm: x must have rank >= 1, got shape ()");
    t = trace(TL_MODE_TRAIN);
    char longname[300];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    expect_error(&t, tl_layer_norm(t.g, t.x, 1e-3, longname),
                 "layer_norm: name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...' is too long");
    t = trace(TL_MODE_TRAIN);
    int64_t ls = 4;
    tl_t ints = tl_graph_input(t.g, TL_I32, &ls, 1);
    expect_error(&t, tl_layer_norm(t.g, ints, 1e-3, "ln"), "layer_norm: x must be float32");
    /* An invalid input gives an invalid output. */
    t = trace(TL_MODE_TRAIN);
    tl_t bad = tl_reshape(t.g, t.x, (int64_t[]){5}, 1);
    cr_assert_eq(tl_layer_norm(t.g, bad, 1e-3, "ln"), TL_T_INVALID);
    cr_assert_eq(tl_layer_norm_op(t.g, bad, bad, bad, -1, 1e-3), TL_T_INVALID);
    expect_error(&t, tl_batch_norm(t.g, bad, 0.99, 1e-3, "bn"),
                 "reshape: cannot reshape (4, 6) (24 elements) to (5,)");
}

Test(ops_norm, batch_norm_errors)
{
    traced t = trace(TL_MODE_TRAIN);
    expect_error(&t,
                 tl_batch_norm_op(t.g, t.x, vec(&t, "g", 3, false), vec(&t, "b", 6, false), vec(&t, "m", 6, true),
                                  vec(&t, "v", 6, true), 0.99, 1e-3, true),
                 "batch_norm: gamma has shape (3,), which is not (6,), the channels of x (4, 6)");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t,
                 tl_batch_norm_op(t.g, t.x, vec(&t, "g", 6, false), vec(&t, "b", 6, false), vec(&t, "m", 6, true),
                                  t.x, 0.99, 1e-3, false),
                 "batch_norm: moving_variance has shape (4, 6), which is not (6,), the channels of x (4, 6)");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_batch_norm(t.g, tl_mean(t.g, t.x), 0.99, 1e-3, "bn"),
                 "batch_norm bn: x must have rank >= 1, got shape ()");
    t = trace(TL_MODE_TRAIN);
    tl_t s = tl_sum(t.g, t.x);
    expect_error(&t, tl_batch_norm_op(t.g, s, s, s, s, s, 0.99, 1e-3, false),
                 "batch_norm: x must have rank >= 1 (channels last), got shape ()");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_batch_norm(t.g, t.x, 1.5, 1e-3, "bn"), "batch_norm: momentum must be in [0, 1], got 1.5");
    t = trace(TL_MODE_TRAIN);
    expect_error(&t, tl_batch_norm(t.g, t.x, 0.99, NAN, "bn"), "batch_norm: epsilon must be finite and >= 0, got nan");
    /* Training needs state variables to update. */
    t = trace(TL_MODE_TRAIN);
    expect_error(&t,
                 tl_batch_norm_op(t.g, t.x, vec(&t, "g", 6, false), vec(&t, "b", 6, false), vec(&t, "m", 6, false),
                                  vec(&t, "v", 6, true), 0.99, 1e-3, true),
                 "batch_norm: moving_mean must be a state variable (tl_state_variable) when training, to take the "
                 "moving-average update; got the trainable variable m");
    t = trace(TL_MODE_TRAIN);
    tl_t g6 = vec(&t, "g", 6, false);
    expect_error(&t,
                 tl_batch_norm_op(t.g, t.x, g6, vec(&t, "b", 6, false), vec(&t, "m", 6, true),
                                  tl_relu(t.g, g6), 0.99, 1e-3, true),
                 "batch_norm: moving_variance must be a state variable (tl_state_variable) when training, to take "
                 "the moving-average update; got a computed tensor");
    t = trace(TL_MODE_TRAIN);
    tl_t m = vec(&t, "m", 6, true);
    expect_error(&t, tl_batch_norm_op(t.g, t.x, vec(&t, "g", 6, false), vec(&t, "b", 6, false), m, m, 0.99, 1e-3, true),
                 "batch_norm: moving_mean and moving_variance are the same state variable m; each takes its own "
                 "update");
    /* Two training batch norms on one moving variable: two updates a step. */
    t = trace(TL_MODE_TRAIN);
    cr_assert_neq(tl_batch_norm(t.g, t.x, 0.99, 1e-3, "bn"), TL_T_INVALID, "%s", tl_graph_error(t.g));
    expect_error(&t, tl_batch_norm(t.g, t.x, 0.99, 1e-3, "bn"),
                 "batch_norm: state variable bn/moving_mean is already updated by another training batch_norm of "
                 "this graph; one update per step");
    t = trace(TL_MODE_TRAIN);
    tl_t mv = vec(&t, "mv", 6, true);
    cr_assert_neq(tl_batch_norm_op(t.g, t.x, vec(&t, "g", 6, false), vec(&t, "b", 6, false), vec(&t, "m1", 6, true),
                                   mv, 0.9, 1e-3, true),
                  TL_T_INVALID, "%s", tl_graph_error(t.g));
    expect_error(&t,
                 tl_batch_norm_op(t.g, t.x, vec(&t, "g", 6, false), vec(&t, "b", 6, false), mv,
                                  vec(&t, "v2", 6, true), 0.9, 1e-3, true),
                 "batch_norm: state variable mv is already updated by another training batch_norm of this graph; "
                 "one update per step");
    /* A frozen one may read statistics a training one updates. */
    t = trace(TL_MODE_TRAIN);
    cr_assert_neq(tl_batch_norm(t.g, t.x, 0.99, 1e-3, "bn"), TL_T_INVALID);
    cr_assert_neq(tl_batch_norm_op(t.g, t.x, vec(&t, "bn/gamma", 6, false), vec(&t, "bn/beta", 6, false),
                                   vec(&t, "bn/moving_mean", 6, true), vec(&t, "bn/moving_variance", 6, true), 0.99,
                                   1e-3, false),
                  TL_T_INVALID, "%s", tl_graph_error(t.g));
    expect_error(&t, tl_batch_norm_op(t.g, TL_T_INVALID, t.x, t.x, t.x, t.x, 0.99, 1e-3, false),
                 "batch_norm: x is not a tensor of this graph");
}

/* The shape family through the tracer, planner and executor: whole-graph
 * gradients against finite differences (chains of the ops, inputs used
 * twice), values of each op, views sharing their input's bytes, int64
 * indices, gather's run-time range error, and the tracing errors' text. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph_util.h"

TestSuite(ops_shape);

/* ---- whole-graph gradients -------------------------------------------------------- */

/* transpose (explicit, negative and default perm), expand_dims / squeeze
 * (views, and copies of a variable), broadcast_to; h and k used twice. */
static tl_t transpose_views(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_TANH, "a");                           /* (4, 6) */
    tl_t r = tl_reshape(g, h, (const int64_t[]){4, 2, 3}, 3);
    tl_t t = tl_transpose(g, r, (const int[]){2, 0, -2}, 3);                 /* (3, 4, 2) */
    tl_t s = tl_squeeze(g, tl_expand_dims(g, t, 1), NULL, 0);               /* (3, 4, 2) */
    tl_t u = tl_transpose(g, s, NULL, 0);                                   /* (2, 4, 3) */
    tl_t v = tl_reshape(g, u, (const int64_t[]){4, 6}, 2);
    tl_t k = tl_variable(g, "k", (const int64_t[]){6}, 1, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t kb = tl_broadcast_to(g, tl_expand_dims(g, k, 0), (const int64_t[]){4, 6}, 2);
    tl_t kk = tl_squeeze(g, tl_expand_dims(g, tl_expand_dims(g, k, -1), 0), (const int[]){0, -1}, 2); /* (6,) */
    tl_t c = tl_concat(g, (const tl_t[]){v, h, kb}, 3, 1);                  /* (4, 18) */
    tl_t z = tl_bias_add(g, tl_dense(g, c, 6, TL_ACT_SIGMOID, "b"), kk);
    return tl_mse(g, z, target);
}

/* gather along axes 0 and 1, with int32 indices that repeat (labels are
 * 0, 1, 2, 0) and rank-2 indices along axis 1; one_hot beside them. */
static tl_t gathers(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    tl_t table = tl_variable(g, "table", (const int64_t[]){5, 6}, 2, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t rows = tl_gather(g, table, labels, 0);                              /* (4, 6) */
    tl_t cols = tl_gather(g, table, labels, -1);                             /* (5, 4) */
    tl_t p3 = tl_variable(g, "p3", (const int64_t[]){2, 3, 2}, 3, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t idx2 = tl_expand_dims(g, tl_expand_dims(g, labels, 0), -1);         /* (1, 4, 1) int32 */
    tl_t g2 = tl_gather(g, p3, idx2, 1);                                     /* (2, 1, 4, 1, 2) */
    tl_t g2r = tl_transpose(g, tl_reshape(g, g2, (const int64_t[]){2, 4, 2}, 3), (const int[]){1, 0, 2}, 3);
    tl_t oh = tl_one_hot(g, labels, 6, 1.0, 0.0, -1);                        /* (4, 6) */
    tl_t c = tl_concat(g, (const tl_t[]){rows, tl_transpose(g, cols, NULL, 0), oh, x,
                                         tl_reshape(g, g2r, (const int64_t[]){4, 4}, 2)}, 5, 1); /* (4, 27) */
    tl_t z = tl_dense(g, c, 6, TL_ACT_TANH, "g");
    return tl_mse(g, z, target);
}

/* split (equal and sized), stack, pad, tile; h split three ways. */
static tl_t pieces(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_TANH, "p");                           /* (4, 6) */
    tl_t parts[3], sized[2];
    tl_split(g, h, 3, -1, parts);                                            /* 3 × (4, 2) */
    tl_split_sizes(g, h, (const int64_t[]){-1, 2}, 2, 1, sized);             /* (4, 4), (4, 2) */
    tl_t st = tl_stack(g, parts, 3, 1);                                      /* (4, 3, 2) */
    tl_t pd = tl_pad(g, st, (const int64_t[]){0, 0, 1, 0, 0, 1}, 0.5);       /* (4, 4, 3) */
    tl_t tl2 = tl_tile(g, sized[1], (const int64_t[]){1, 2});                /* (4, 4) */
    tl_t tl3 = tl_tile(g, tl_expand_dims(g, tl2, -1), (const int64_t[]){1, 1, 3}); /* (4, 4, 3) */
    tl_t q = tl_stack(g, (const tl_t[]){sized[0], tl2}, 2, -1);              /* (4, 4, 2) */
    tl_t c = tl_concat(g, (const tl_t[]){pd, tl3, q}, 3, 2);                 /* (4, 4, 8) */
    tl_t z = tl_dense(g, tl_reshape(g, c, (const int64_t[]){4, 32}, 2), 6, TL_ACT_SIGMOID, "q");
    return tl_mse(g, z, target);
}

/* The shape ops straight on variables, whose gradients live in the
 * parameter slab: v feeds transpose, pad and expand_dims (a copy, as a
 * variable's view is), so its gradient adds up three ways. */
static tl_t on_variables(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x;
    tl_t v = tl_variable(g, "v", (const int64_t[]){2, 3}, 2, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t b = tl_variable(g, "b", (const int64_t[]){3, 1}, 2, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t t = tl_reshape(g, tl_transpose(g, v, NULL, 0), (const int64_t[]){1, 6}, 2);
    tl_t tt = tl_tile(g, t, (const int64_t[]){4, 1});                                         /* (4, 6) */
    tl_t bb = tl_reshape(g, tl_broadcast_to(g, b, (const int64_t[]){4, 3, 2}, 3), (const int64_t[]){4, 6}, 2);
    tl_t pv = tl_pad(g, v, (const int64_t[]){1, 1, 0, 0}, -1.0);                              /* (4, 3) */
    tl_t gv = tl_gather(g, pv, labels, 0);                                                    /* (4, 3) */
    tl_t sq = tl_squeeze(g, tl_expand_dims(g, v, 0), NULL, 0);                                /* (2, 3) */
    tl_t st = tl_tile(g, tl_reshape(g, sq, (const int64_t[]){1, 6}, 2), (const int64_t[]){4, 1});
    tl_t y = tl_tanh(g, tl_concat(g, (const tl_t[]){tt, bb, gv, st}, 4, 1));                 /* (4, 21) */
    return tl_mse(g, tl_dense(g, y, 6, TL_ACT_NONE, "o"), target);
}

Test(ops_shape, gradients_transpose_views_broadcast) { tg_check_gradients(transpose_views, TL_MODE_TRAIN); }
Test(ops_shape, gradients_gather_repeated_indices_one_hot) { tg_check_gradients(gathers, TL_MODE_TRAIN); }
Test(ops_shape, gradients_split_stack_pad_tile) { tg_check_gradients(pieces, TL_MODE_TRAIN); }
Test(ops_shape, gradients_ops_on_variables_used_three_times) { tg_check_gradients(on_variables, TL_MODE_TRAIN); }

/* ---- a graph of one's own ------------------------------------------------------------ */

static void fx_begin(tg_fixture *f, tl_mode mode)
{
    memset(f, 0, sizeof *f);
    cr_assert_eq(tl_vars_create(&f->vars), TL_OK);
    cr_assert_eq(tl_graph_create(f->vars, mode, &f->g), TL_OK);
}

/* Compiles (with a backward pass when loss is valid) and lays out memory. */
static void fx_compile(tg_fixture *f, tl_t loss)
{
    cr_assert_eq(tl_graph_status(f->g), TL_OK, "%s", tl_graph_error(f->g));
    cr_assert_eq(tl_vars_layout(f->vars), TL_OK);
    cr_assert_eq(tl_program_compile(f->g, loss, loss >= 0, &f->p), TL_OK, "%s", tl_last_error());
    f->params = calloc((size_t)f->vars->total + 1, sizeof(float));
    tl_vars_initialize(f->vars, 5, f->params);
    f->e.act = calloc((size_t)f->p->act_floats + 1, sizeof(float));
    f->e.grad = calloc((size_t)f->p->grad_floats + 1, sizeof(float));
    f->e.mask = calloc((size_t)f->p->mask_bytes + 1, 1);
    f->e.scratch = calloc((size_t)f->p->scratch_floats + 1, sizeof(float));
    f->e.param_grad = calloc((size_t)f->vars->total + 1, sizeof(float));
    f->e.params = f->params;
    f->e.loss_scale = 1.0f;
}

static void assert_shape(const tl_graph *g, tl_t t, int rank, const int64_t *want)
{
    int64_t dims[TL_MAX_RANK];
    cr_assert_eq(tl_rank(g, t, dims), rank, "rank %d, want %d", tl_rank(g, t, NULL), rank);
    for (int d = 0; d < rank; d++)
        cr_assert_eq(dims[d], want[d], "dim %d is %lld, want %lld", d, (long long)dims[d], (long long)want[d]);
}

static void assert_values(const tg_fixture *f, tl_t t, int n, const float *want, const char *what)
{
    const float *v = tl_exec_value(f->p, &f->e, t);
    for (int i = 0; i < n; i++)
        cr_assert_eq(v[i], want[i], "%s[%d] is %g, want %g", what, i, (double)v[i], (double)want[i]);
}

/* ---- values -------------------------------------------------------------------------- */

/* Each op on x = (2, 3) holding 0..5, by hand. */
Test(ops_shape, values_of_each_op)
{
    tg_fixture f;
    fx_begin(&f, TL_MODE_PREDICT);
    tl_graph *g = f.g;
    tl_t x = tl_graph_input(g, TL_F32, (const int64_t[]){2, 3}, 2);
    tl_t lab = tl_graph_input(g, TL_I32, (const int64_t[]){3}, 1);
    tl_t i64 = tl_graph_input(g, TL_I64, (const int64_t[]){2, 2}, 2);
    tl_t tr = tl_transpose(g, x, NULL, 0);
    tl_t bc = tl_broadcast_to(g, x, (const int64_t[]){2, 2, 3}, 3);
    tl_t ti = tl_tile(g, x, (const int64_t[]){1, 2});
    tl_t pd = tl_pad(g, x, (const int64_t[]){0, 1, 1, 0}, 9.0);
    tl_t oh = tl_one_hot(g, lab, 3, 1.0, 0.0, 0);
    tl_t oh_last = tl_one_hot(g, lab, 4, 2.0, -1.0, -1);
    tl_t sp[2];
    cr_assert_eq(tl_split_sizes(g, x, (const int64_t[]){1, -1}, 2, 1, sp), TL_OK);
    tl_t halves[2];
    cr_assert_eq(tl_split(g, x, 2, 0, halves), TL_OK);
    tl_t sk = tl_stack(g, (const tl_t[]){x, tr}, 1, 0);
    tl_t sk2 = tl_stack(g, halves, 2, -1);
    tl_t ga = tl_gather(g, x, i64, 1);
    tl_t one = tl_graph_input(g, TL_I32, (const int64_t[]){1}, 1);
    tl_t ga0 = tl_gather(g, x, tl_squeeze(g, one, NULL, 0), -2); /* a scalar index drops the axis */
    fx_compile(&f, TL_T_INVALID);
    float *xv = tl_exec_value(f.p, &f.e, x);
    for (int i = 0; i < 6; i++)
        xv[i] = (float)i;
    int32_t *lv = (int32_t *)tl_exec_value(f.p, &f.e, lab);
    lv[0] = 2, lv[1] = -1, lv[2] = 0;
    int64_t *iv = (int64_t *)tl_exec_value(f.p, &f.e, i64);
    iv[0] = 2, iv[1] = 0, iv[2] = 1, iv[3] = 1;
    *(int32_t *)tl_exec_value(f.p, &f.e, one) = 1;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    assert_shape(g, tr, 2, (const int64_t[]){3, 2});
    assert_values(&f, tr, 6, (const float[]){0, 3, 1, 4, 2, 5}, "transpose");
    assert_values(&f, bc, 12, (const float[]){0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, "broadcast_to");
    assert_shape(g, ti, 2, (const int64_t[]){2, 6});
    assert_values(&f, ti, 12, (const float[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}, "tile");
    assert_shape(g, pd, 2, (const int64_t[]){3, 4});
    assert_values(&f, pd, 12, (const float[]){9, 0, 1, 2, 9, 3, 4, 5, 9, 9, 9, 9}, "pad");
    assert_shape(g, oh, 2, (const int64_t[]){3, 3});
    assert_values(&f, oh, 9, (const float[]){0, 0, 1, 0, 0, 0, 1, 0, 0}, "one_hot axis 0");
    assert_shape(g, oh_last, 2, (const int64_t[]){3, 4});
    assert_values(&f, oh_last, 12, (const float[]){-1, -1, 2, -1, -1, -1, -1, -1, 2, -1, -1, -1}, "one_hot");
    assert_shape(g, sp[0], 2, (const int64_t[]){2, 1});
    assert_values(&f, sp[0], 2, (const float[]){0, 3}, "split_sizes 0");
    assert_shape(g, sp[1], 2, (const int64_t[]){2, 2});
    assert_values(&f, sp[1], 4, (const float[]){1, 2, 4, 5}, "split_sizes 1");
    assert_values(&f, halves[1], 3, (const float[]){3, 4, 5}, "split 1");
    assert_shape(g, sk, 3, (const int64_t[]){1, 2, 3});
    assert_values(&f, sk, 6, (const float[]){0, 1, 2, 3, 4, 5}, "stack of one");
    assert_shape(g, sk2, 3, (const int64_t[]){1, 3, 2});
    assert_values(&f, sk2, 6, (const float[]){0, 3, 1, 4, 2, 5}, "stack on the last axis");
    assert_shape(g, ga, 3, (const int64_t[]){2, 2, 2});
    assert_values(&f, ga, 8, (const float[]){2, 0, 1, 1, 5, 3, 4, 4}, "gather int64 rank-2 indices, axis 1");
    assert_shape(g, ga0, 1, (const int64_t[]){3});
    assert_values(&f, ga0, 3, (const float[]){3, 4, 5}, "gather of a scalar index");
    tg_teardown(&f);
}

/* ---- views ------------------------------------------------------------------------------ */

/* expand_dims and squeeze of an activation are its bytes (value and
 * gradient); of a variable, a copy whose gradient is copied back. */
Test(ops_shape, expand_dims_and_squeeze_are_views)
{
    tg_fixture f;
    fx_begin(&f, TL_MODE_TRAIN);
    tl_graph *g = f.g;
    tl_t x = tl_graph_input(g, TL_F32, (const int64_t[]){3, 2}, 2);
    tl_t w = tl_variable(g, "w", (const int64_t[]){2, 2}, 2, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t h = tl_matmul(g, x, w, false, false);                       /* (3, 2) */
    tl_t e = tl_expand_dims(g, h, 0);                                 /* (1, 3, 2) */
    tl_t s = tl_squeeze(g, e, (const int[]){-3}, 1);                  /* (3, 2) */
    tl_t we = tl_expand_dims(g, w, -1);                               /* (2, 2, 1): a copy */
    tl_t ws = tl_squeeze(g, we, NULL, 0);                             /* its view */
    tl_t m = tl_matmul(g, tl_tanh(g, s), ws, false, true);            /* w used twice */
    tl_t loss = tl_sum(g, tl_tanh(g, m));
    fx_compile(&f, loss);
    assert_shape(g, e, 3, (const int64_t[]){1, 3, 2});
    assert_shape(g, we, 3, (const int64_t[]){2, 2, 1});
    cr_assert_eq(f.p->val_off[e], f.p->val_off[h]);
    cr_assert_eq(f.p->val_off[s], f.p->val_off[h]);
    cr_assert_eq(f.p->grad_off[s], f.p->grad_off[h]);
    cr_assert_eq(f.p->grad_off[e], f.p->grad_off[h]);
    cr_assert(f.p->val_off[we] >= 0, "a variable's view is a copy in the activation slab");
    cr_assert_eq(f.p->val_off[ws], f.p->val_off[we]);
    cr_assert(f.p->grad_off[we] >= 0);
    float *xv = tl_exec_value(f.p, &f.e, x);
    for (int i = 0; i < 6; i++)
        xv[i] = 0.25f * (float)(i - 2);
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    cr_assert(memcmp(tl_exec_value(f.p, &f.e, ws), tl_exec_value(f.p, &f.e, w), 4 * sizeof(float)) == 0);
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    /* w's gradient by hand: m = tanh(x·w)·wᵀ, loss = sum tanh(m). */
    const float *wv = tl_exec_value(f.p, &f.e, w);
    double a[3][2], dm[3][2], dw[2][2] = {{0}}, da[3][2];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 2; c++)
            a[r][c] = tanh((double)xv[2 * r] * wv[c] + (double)xv[2 * r + 1] * wv[2 + c]);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 2; c++) {
            double mm = a[r][0] * wv[2 * c] + a[r][1] * wv[2 * c + 1];
            dm[r][c] = 1.0 - tanh(mm) * tanh(mm);
        }
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 2; k++) {
            da[r][k] = dm[r][0] * wv[k] + dm[r][1] * wv[2 + k];
            for (int c = 0; c < 2; c++)
                dw[c][k] += dm[r][c] * a[r][k]; /* through ws = w: m[r][c] = sum_k a[r][k] w[c][k] */
        }
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 2; j++) /* through h = x·w: h[r][k] = sum_j x[r][j] w[j][k] */
                dw[j][k] += da[r][k] * (1.0 - a[r][k] * a[r][k]) * xv[2 * r + j];
    const float *gw = tl_exec_grad(f.p, &f.e, w);
    for (int i = 0; i < 4; i++)
        cr_assert(fabs(gw[i] - dw[i / 2][i % 2]) < 1e-5, "dw[%d] = %g, want %g", i, (double)gw[i], dw[i / 2][i % 2]);
    tg_teardown(&f);
}

/* ---- int64 indices and gather's run-time range error ------------------------------------- */

static tl_t int64_gather_graph(tg_fixture *f, tl_t *idx, tl_t *y)
{
    fx_begin(f, TL_MODE_TRAIN);
    tl_t table = tl_variable(f->g, "table", (const int64_t[]){5, 3}, 2, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    *idx = tl_graph_input(f->g, TL_I64, (const int64_t[]){2, 2}, 2);
    *y = tl_gather(f->g, table, *idx, 0); /* (2, 2, 3) */
    tl_t loss = tl_sum(f->g, *y);
    fx_compile(f, loss);
    return table;
}

/* Rows gathered k times get k; the values are the table's rows. */
Test(ops_shape, gather_int64_indices_values_and_gradient)
{
    tg_fixture f;
    tl_t idx, y;
    tl_t table = int64_gather_graph(&f, &idx, &y);
    assert_shape(f.g, y, 3, (const int64_t[]){2, 2, 3});
    int64_t *iv = (int64_t *)tl_exec_value(f.p, &f.e, idx);
    iv[0] = 4, iv[1] = 0, iv[2] = 4, iv[3] = 4;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    const float *tv = tl_exec_value(f.p, &f.e, table), *yv = tl_exec_value(f.p, &f.e, y);
    for (int j = 0; j < 4; j++)
        for (int c = 0; c < 3; c++)
            cr_assert_eq(yv[3 * j + c], tv[3 * iv[j] + c]);
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    const float *gt = tl_exec_grad(f.p, &f.e, table);
    const float want[5] = {1, 0, 0, 0, 3};
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 3; c++)
            cr_assert_eq(gt[3 * r + c], want[r], "d table[%d][%d] = %g", r, c, (double)gt[3 * r + c]);
    tg_teardown(&f);
}

/* TF CPU's InvalidArgument: the position, the index and the range; the
 * output keeps what it held. An int64 index read as int32 would be 4 here. */
Test(ops_shape, gather_index_out_of_range_fails_the_step)
{
    tg_fixture f;
    tl_t idx, y;
    int64_gather_graph(&f, &idx, &y);
    int64_t *iv = (int64_t *)tl_exec_value(f.p, &f.e, idx);
    float *yv = tl_exec_value(f.p, &f.e, y);
    for (int i = 0; i < 12; i++)
        yv[i] = 42.0f;
    iv[0] = 1, iv[1] = 0, iv[2] = 7, iv[3] = 2;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "gather: indices[1,0] = 7 is not in [0, 5)");
    iv[2] = ((int64_t)1 << 32) + 4;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "gather: indices[1,0] = 4294967300 is not in [0, 5)");
    iv[2] = 3, iv[3] = -1;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "gather: indices[1,1] = -1 is not in [0, 5)");
    for (int i = 0; i < 12; i++)
        cr_assert_eq(yv[i], 42.0f, "y[%d] was written", i);
    iv[3] = 2;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    tg_teardown(&f);
}

Test(ops_shape, gather_int32_index_out_of_range_names_the_position)
{
    tg_fixture f;
    fx_begin(&f, TL_MODE_PREDICT);
    tl_t p = tl_graph_input(f.g, TL_F32, (const int64_t[]){2, 3}, 2);
    tl_t idx = tl_graph_input(f.g, TL_I32, (const int64_t[]){4}, 1);
    tl_t y = tl_gather(f.g, p, idx, 1);
    fx_compile(&f, TL_T_INVALID);
    int32_t *iv = (int32_t *)tl_exec_value(f.p, &f.e, idx);
    iv[0] = 0, iv[1] = 2, iv[2] = 1, iv[3] = 3;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "gather: indices[3] = 3 is not in [0, 3)");
    (void)y;
    tg_teardown(&f);
}

/* ---- tracing errors ------------------------------------------------------------------------ */

typedef struct eg {
    tl_vars *vars;
    tl_graph *g;
    tl_t x23, x234, i3, s0;
} eg;

static eg eg_new(void)
{
    eg e;
    cr_assert_eq(tl_vars_create(&e.vars), TL_OK);
    cr_assert_eq(tl_graph_create(e.vars, TL_MODE_TRAIN, &e.g), TL_OK);
    e.x23 = tl_graph_input(e.g, TL_F32, (const int64_t[]){2, 3}, 2);
    e.x234 = tl_graph_input(e.g, TL_F32, (const int64_t[]){2, 3, 4}, 3);
    e.i3 = tl_graph_input(e.g, TL_I32, (const int64_t[]){3}, 1);
    e.s0 = tl_graph_input(e.g, TL_F32, NULL, 0);
    return e;
}

/* Every op of the family on valid inputs, after an error: all TL_T_INVALID. */
static void all_invalid(eg *e)
{
    tl_graph *g = e->g;
    tl_t out[2] = {0, 0};
    cr_assert_eq(tl_transpose(g, e->x23, NULL, 0), TL_T_INVALID);
    cr_assert_eq(tl_expand_dims(g, e->x23, 0), TL_T_INVALID);
    cr_assert_eq(tl_squeeze(g, e->x23, NULL, 0), TL_T_INVALID);
    cr_assert_eq(tl_broadcast_to(g, e->x23, (const int64_t[]){2, 3}, 2), TL_T_INVALID);
    cr_assert_eq(tl_gather(g, e->x23, e->i3, 1), TL_T_INVALID);
    cr_assert_eq(tl_one_hot(g, e->i3, 4, 1, 0, -1), TL_T_INVALID);
    cr_assert_neq(tl_split(g, e->x23, 2, 0, out), TL_OK);
    cr_assert(out[0] == TL_T_INVALID && out[1] == TL_T_INVALID);
    cr_assert_neq(tl_split_sizes(g, e->x23, (const int64_t[]){1, 2}, 2, 1, out), TL_OK);
    cr_assert(out[0] == TL_T_INVALID && out[1] == TL_T_INVALID);
    cr_assert_eq(tl_stack(g, (const tl_t[]){e->x23, e->x23}, 2, 0), TL_T_INVALID);
    cr_assert_eq(tl_pad(g, e->x23, (const int64_t[]){0, 0, 0, 0}, 0), TL_T_INVALID);
    cr_assert_eq(tl_tile(g, e->x23, (const int64_t[]){1, 1}), TL_T_INVALID);
}

/* got is TL_T_INVALID, the graph's error is msg (exactly), and it stays so
 * while every later op returns TL_T_INVALID. */
#define EXPECT_ERROR(build, msg)                                                                              \
    do {                                                                                                      \
        eg e = eg_new();                                                                                      \
        tl_t got_ = (build);                                                                                  \
        cr_assert_eq(got_, TL_T_INVALID, "%s returned %d", #build, got_);                                     \
        cr_assert_eq(tl_graph_status(e.g), TL_EINVAL, "%s", #build);                                          \
        cr_assert_str_eq(tl_graph_error(e.g), (msg));                                                         \
        all_invalid(&e);                                                                                      \
        cr_assert_str_eq(tl_graph_error(e.g), (msg), "the first error must stay");                           \
        tl_graph_destroy(e.g);                                                                                \
        tl_vars_destroy(e.vars);                                                                              \
    } while (0)

static tl_t split_t(tl_graph *g, tl_t x, int num, int axis)
{
    tl_t out[8];
    tl_status st = tl_split(g, x, num, axis, out);
    for (int k = 0; k < num && k < 8; k++)
        cr_assert_eq(out[k], TL_T_INVALID, "out[%d] after a failed split", k);
    return st == TL_OK ? 0 : TL_T_INVALID;
}

static tl_t split_sizes_t(tl_graph *g, tl_t x, const int64_t *sizes, int num, int axis)
{
    tl_t out[8];
    tl_status st = tl_split_sizes(g, x, sizes, num, axis, out);
    for (int k = 0; k < num && k < 8; k++)
        cr_assert_eq(out[k], TL_T_INVALID, "out[%d] after a failed split", k);
    return st == TL_OK ? 0 : TL_T_INVALID;
}

Test(ops_shape, tracing_errors_name_op_argument_and_values)
{
    EXPECT_ERROR(tl_transpose(e.g, e.x234, (const int[]){0, 0, 1}, 3),
                 "transpose: perm (0, 0, 1) is not a permutation of 0..2");
    EXPECT_ERROR(tl_transpose(e.g, e.x234, (const int[]){0, 3, 1}, 3),
                 "transpose: perm (0, 3, 1) is not a permutation of 0..2");
    EXPECT_ERROR(tl_transpose(e.g, e.x234, (const int[]){1, 0}, 2), "transpose: perm has 2 axes; x (2, 3, 4) has rank 3");
    EXPECT_ERROR(tl_transpose(e.g, e.i3, NULL, 0), "transpose: x must be float32");
    EXPECT_ERROR(tl_transpose(e.g, 999, NULL, 0), "transpose: x is not a tensor of this graph");
    EXPECT_ERROR(tl_expand_dims(e.g, e.x234, 4), "expand_dims: axis 4 is outside [-4, 3] for x (2, 3, 4)");
    EXPECT_ERROR(tl_expand_dims(e.g, e.x23, -4), "expand_dims: axis -4 is outside [-3, 2] for x (2, 3)");
    EXPECT_ERROR(tl_expand_dims(e.g, TL_T_INVALID, 0), "expand_dims: x is not a tensor of this graph");
    EXPECT_ERROR(tl_squeeze(e.g, e.x23, (const int[]){1}, 1), "squeeze: dim 1 of x (2, 3) has size 3, not 1");
    EXPECT_ERROR(tl_squeeze(e.g, e.x23, (const int[]){-3}, 1), "squeeze: axis -3 is outside [-2, 2) for x (2, 3)");
    EXPECT_ERROR(tl_broadcast_to(e.g, e.x23, (const int64_t[]){4, 2, 5}, 3),
                 "broadcast_to: x (2, 3) does not broadcast to (4, 2, 5): dim 1 of x is 3, the target's 5");
    EXPECT_ERROR(tl_broadcast_to(e.g, e.x23, (const int64_t[]){6}, 1),
                 "broadcast_to: the target's rank 1 is outside [2, 8], x being (2, 3)");
    EXPECT_ERROR(tl_broadcast_to(e.g, e.x23, (const int64_t[]){0, 3}, 2),
                 "broadcast_to: target dim 0 is 0; dims must be >= 1");
    EXPECT_ERROR(tl_gather(e.g, e.x23, e.x23, 0), "gather: indices must be int32 or int64, got float32");
    EXPECT_ERROR(tl_gather(e.g, e.i3, e.i3, 0), "gather: params must be float32");
    EXPECT_ERROR(tl_gather(e.g, e.x23, e.i3, 2), "gather: axis 2 is outside [-2, 2) for params (2, 3)");
    EXPECT_ERROR(tl_gather(e.g, e.s0, e.i3, 0), "gather: params must have rank >= 1, got ()");
    EXPECT_ERROR(tl_one_hot(e.g, e.i3, 0, 1, 0, -1), "one_hot: depth must be >= 1, got 0");
    EXPECT_ERROR(tl_one_hot(e.g, e.i3, 4, 1, 0, -2), "one_hot: axis must be -1 or in [0, 1] for indices (3,), got -2");
    EXPECT_ERROR(tl_one_hot(e.g, e.i3, 4, 1, 0, 2), "one_hot: axis must be -1 or in [0, 1] for indices (3,), got 2");
    EXPECT_ERROR(tl_one_hot(e.g, e.x23, 4, 1, 0, -1), "one_hot: indices must be int32 or int64, got float32");
    EXPECT_ERROR(split_t(e.g, e.x23, 2, 1),
                 "split: dim 1 of x (2, 3) has size 3, which does not divide into 2 equal parts");
    EXPECT_ERROR(split_t(e.g, e.x23, 0, 1), "split: num must be >= 1 with room in out for each part, got 0");
    EXPECT_ERROR(split_t(e.g, e.x23, 1, 2), "split: axis 2 is outside [-2, 2) for x (2, 3)");
    EXPECT_ERROR(split_sizes_t(e.g, e.x23, (const int64_t[]){1, 1}, 2, -1),
                 "split: sizes add up to 2, not to dim 1 of x (2, 3), which is 3");
    EXPECT_ERROR(split_sizes_t(e.g, e.x23, (const int64_t[]){-1, -1}, 2, 1),
                 "split: sizes[1] is -1; each size must be in [1, 3] (one may be -1, inferred) for dim 1 of x (2, 3)");
    EXPECT_ERROR(split_sizes_t(e.g, e.x23, (const int64_t[]){3, -1}, 2, 1),
                 "split: sizes add up to 3 besides the -1, not to dim 1 of x (2, 3), which is 3");
    EXPECT_ERROR(split_sizes_t(e.g, e.x23, (const int64_t[]){0, 3}, 2, 1),
                 "split: sizes[0] is 0; each size must be in [1, 3] (one may be -1, inferred) for dim 1 of x (2, 3)");
    EXPECT_ERROR(tl_stack(e.g, (const tl_t[]){e.x23, e.x234}, 2, 0),
                 "stack: xs[1] has shape (2, 3, 4), not (2, 3) as xs[0]");
    EXPECT_ERROR(tl_stack(e.g, (const tl_t[]){e.x23, e.x23}, 2, 3), "stack: axis 3 is outside [-3, 2] for inputs (2, 3)");
    EXPECT_ERROR(tl_stack(e.g, (const tl_t[]){e.x23}, 0, 0), "stack: 0 inputs; 1..32 are allowed");
    EXPECT_ERROR(tl_stack(e.g, NULL, 2, 0), "stack: xs is NULL for 2 inputs");
    EXPECT_ERROR(tl_stack(e.g, (const tl_t[]){e.x23}, 33, 0), "stack: 33 inputs; 1..32 are allowed");
    EXPECT_ERROR(tl_stack(e.g, (const tl_t[]){e.x23, e.i3}, 2, 0), "stack: xs[1] must be float32");
    EXPECT_ERROR(tl_pad(e.g, e.x23, (const int64_t[]){0, 0, 0, -1}, 0.0),
                 "pad: paddings[1] = (0, -1) for x (2, 3); paddings must be >= 0");
    EXPECT_ERROR(tl_tile(e.g, e.x23, (const int64_t[]){0, 1}),
                 "tile: multiples[0] is 0 for x (2, 3); multiples must be >= 1");
}

/* TL_MAX_RANK: expand_dims, stack and gather may not exceed it. */
Test(ops_shape, rank_limits)
{
    const int64_t ones[TL_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 2};
    EXPECT_ERROR(tl_expand_dims(e.g, tl_graph_input(e.g, TL_F32, ones, TL_MAX_RANK), 0),
                 "expand_dims: x (1, 1, 1, 1, 1, 1, 1, 2) has rank 8 already, the most a tensor may have");
    EXPECT_ERROR(tl_gather(e.g, tl_graph_input(e.g, TL_F32, ones, 5),
                           tl_graph_input(e.g, TL_I64, ones, 5), 0),
                 "gather: params (1, 1, 1, 1, 1) and indices (1, 1, 1, 1, 1) give rank 9, over the 8 allowed");
    EXPECT_ERROR(tl_one_hot(e.g, tl_graph_input(e.g, TL_I32, ones, TL_MAX_RANK), 2, 1, 0, -1),
                 "one_hot: indices (1, 1, 1, 1, 1, 1, 1, 2) have rank 8; the result would exceed rank 8");
    /* At the limit itself, fine: squeeze every 1 of a rank-8 tensor. */
    eg e = eg_new();
    tl_t s = tl_squeeze(e.g, tl_graph_input(e.g, TL_F32, ones, TL_MAX_RANK), NULL, 0);
    assert_shape(e.g, s, 1, (const int64_t[]){2});
    tl_graph_destroy(e.g);
    tl_vars_destroy(e.vars);
}

/* graph.h's example: heads split off the last axis, stacked and transposed
 * back are x reshaped to (batch, T, H, D). */
Test(ops_shape, header_example_split_stack_transpose_is_a_reshape)
{
    tg_fixture f;
    fx_begin(&f, TL_MODE_PREDICT);
    tl_graph *g = f.g;
    tl_t x = tl_graph_input(g, TL_F32, (const int64_t[]){2, 3, 8}, 3);
    tl_t heads[4];
    tl_split(g, x, 4, -1, heads);                                /* 4 × (batch, T, D) */
    tl_t s = tl_stack(g, heads, 4, 1);                           /* (batch, 4, T, D) */
    tl_t t = tl_transpose(g, s, (const int[]){0, 2, 1, 3}, 4);   /* (batch, T, 4, D) */
    assert_shape(g, t, 4, (const int64_t[]){2, 3, 4, 2});
    fx_compile(&f, TL_T_INVALID);
    float *xv = tl_exec_value(f.p, &f.e, x);
    for (int i = 0; i < 48; i++)
        xv[i] = (float)i;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    assert_values(&f, t, 48, xv, "the heads back in place");
    tg_teardown(&f);
}

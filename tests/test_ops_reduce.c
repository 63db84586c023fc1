/* The reduce family through the tracer, planner and executor: every
 * parameter's gradient against finite differences of whole graphs that chain
 * the family's ops (inputs used several times, views, strided axes), the
 * shapes the constructors give, the sparse loss against tl_softmax_xent bit
 * for bit, run-time label errors, the integer and metric ops' values, and the
 * constructors' error messages. The kernels' own checks are in
 * test_ops_reduce_kernels.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph_util.h"

/* t flattened to (size,). */
static tl_t flat(tl_graph *g, tl_t t)
{
    int64_t n = 1, d[TL_MAX_RANK];
    int rank = tl_rank(g, t, d);
    for (int i = 0; i < rank; i++)
        n *= d[i];
    return tl_reshape(g, t, &n, 1);
}

/* The n tensors flattened and joined into one (1, total) row. */
static tl_t join(tl_graph *g, const tl_t *ts, int n)
{
    tl_t f[TL_MAX_OP_INPUTS];
    for (int i = 0; i < n; i++)
        f[i] = flat(g, ts[i]);
    tl_t v = tl_concat(g, f, n, 0);
    int64_t d[1], row[2] = {1, 0};
    tl_rank(g, v, d);
    row[1] = d[0];
    return tl_reshape(g, v, row, 2);
}

/* A (1, 5) slice of the target: what the projections regress onto. */
static tl_t target_row(tl_graph *g, tl_t target)
{
    return tl_slice(g, tl_slice(g, target, 0, 0, 1), 1, 0, 5);
}

/* Every reduction on a rank-4 view of a hidden layer, over contiguous and
 * non-contiguous axes, with and without keepdims, and over every axis; the
 * view is used five times and the layer once more directly. */
static tl_t reductions(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 8, TL_ACT_TANH, "a"); /* (4, 8) */
    int64_t s4[4] = {2, 2, 2, 4};
    tl_t r = tl_reshape(g, h, s4, 4);
    tl_t parts[6] = {
        tl_reduce_sum(g, r, (const int[]){0, 2}, 2, false), /* (2, 4) */
        tl_reduce_max(g, r, (const int[]){1, -1}, 2, true), /* (2, 1, 2, 1) */
        tl_reduce_min(g, r, (const int[]){3}, 1, false),    /* (2, 2, 2) */
        tl_reduce_mean(g, r, NULL, 0, false),               /* () */
        tl_logsumexp(g, r, (const int[]){-2, 0}, 2, true),  /* (1, 2, 1, 4) */
        tl_reduce_mean(g, h, (const int[]){0}, 1, true),    /* (1, 8) */
    };
    tl_t y = tl_dense(g, join(g, parts, 6), 5, TL_ACT_TANH, "b");
    return tl_mse(g, y, target_row(g, target));
}

Test(ops_reduce, reductions_gradients) { tg_check_gradients(reductions, TL_MODE_TRAIN); }

/* softmax along the batch axis (strided) and the last, log_softmax and
 * logsumexp of the same logits. */
static tl_t softmaxes(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t z = tl_dense(g, x, 5, TL_ACT_NONE, "z"); /* (4, 5) */
    tl_t parts[4] = {
        tl_softmax(g, z, 0),
        tl_log_softmax(g, z, -1),
        tl_logsumexp(g, z, (const int[]){1}, 1, false),
        tl_softmax(g, tl_reduce_sum(g, z, (const int[]){0}, 1, true), 1), /* (1, 5) */
    };
    tl_t y = tl_dense(g, join(g, parts, 4), 5, TL_ACT_TANH, "w");
    return tl_mse(g, y, target_row(g, target));
}

Test(ops_reduce, softmax_log_softmax_logsumexp_gradients) { tg_check_gradients(softmaxes, TL_MODE_TRAIN); }

/* The losses: dense labels that carry a gradient (a softmax of another
 * layer), the logits used both as logits and through their own softmax as
 * labels, sparse with smoothing, and Huber with both sides variables and
 * with one tensor as both sides. */
static tl_t losses(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)target;
    tl_t z = tl_dense(g, x, 3, TL_ACT_NONE, "z"); /* (4, 3) */
    tl_t q = tl_dense(g, x, 3, TL_ACT_TANH, "q");
    tl_t parts[5] = {
        tl_softmax_xent_dense(g, z, tl_softmax(g, q, -1), 0.1),
        tl_softmax_xent_dense(g, z, tl_softmax(g, z, -1), 0.0),
        tl_sparse_softmax_xent(g, z, labels, 0.2),
        tl_reduce_sum(g, tl_huber(g, z, q, 0.5), (const int[]){1}, 1, false),
        tl_reduce_sum(g, tl_huber(g, q, q, 1.0), (const int[]){-1}, 1, false),
    };
    return tl_mean(g, join(g, parts, 5));
}

Test(ops_reduce, losses_gradients_with_inputs_used_twice) { tg_check_gradients(losses, TL_MODE_TRAIN); }

/* int64 labels from argmax of the data, over rank-3 logits. */
static tl_t int64_labels(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    int64_t s3[3] = {2, 2, 6};
    tl_t z = tl_reshape(g, tl_dense(g, x, 6, TL_ACT_NONE, "z"), s3, 3);
    tl_t l64 = tl_argmax(g, tl_reshape(g, target, s3, 3), -1, TL_I64); /* (2, 2) */
    return tl_mean(g, tl_sparse_softmax_xent(g, z, l64, 0.0));
}

Test(ops_reduce, sparse_xent_int64_rank3_gradients) { tg_check_gradients(int64_labels, TL_MODE_TRAIN); }

/* ---- values ------------------------------------------------------------------------- */

static tl_t find(const tl_graph *g, tl_op_kind op, int nth)
{
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == op && nth-- == 0)
            return i;
    cr_assert_fail("no node of kind %d", (int)op);
    return TL_T_INVALID;
}

/* The logits of a 6-class layer scored three ways: tl_softmax_xent with
 * int32 labels, and the sparse loss with int32 and int64 labels of the same
 * values (argmax of the target) — the same bits. */
static tl_t three_ways(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t z = tl_dense(g, x, 6, TL_ACT_NONE, "z");
    tl_t a32 = tl_argmax(g, target, 1, TL_I32), a64 = tl_argmax(g, target, 1, TL_I64);
    tl_t parts[3] = {tl_softmax_xent(g, z, a32), tl_sparse_softmax_xent(g, z, a32, 0.0),
                     tl_sparse_softmax_xent(g, z, a64, 0.0)};
    return tl_mean(g, tl_concat(g, parts, 3, 0));
}

static tl_t existing_only(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    return tl_mean(g, tl_softmax_xent(g, tl_dense(g, x, 6, TL_ACT_NONE, "z"), tl_argmax(g, target, 1, TL_I32)));
}

static tl_t sparse_only(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    return tl_mean(g, tl_sparse_softmax_xent(g, tl_dense(g, x, 6, TL_ACT_NONE, "z"),
                                             tl_argmax(g, target, 1, TL_I64), 0.0));
}

Test(ops_reduce, sparse_xent_is_softmax_xent_bit_for_bit)
{
    tg_fixture f = tg_setup(three_ways, TL_MODE_TRAIN);
    tg_loss_at(&f);
    const tl_node *cat = &f.g->nodes[f.g->nodes[f.p->loss].in[0]];
    const float *a = tl_exec_value(f.p, &f.e, cat->in[0]), *b = tl_exec_value(f.p, &f.e, cat->in[1]),
                *c = tl_exec_value(f.p, &f.e, cat->in[2]);
    for (int i = 0; i < 4; i++)
        cr_assert(memcmp(&a[i], &b[i], 4) == 0 && memcmp(&a[i], &c[i], 4) == 0 && a[i] > 0,
                  "example %d: %a %a %a", i, (double)a[i], (double)b[i], (double)c[i]);
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    tg_teardown(&f);

    tg_fixture e = tg_setup(existing_only, TL_MODE_TRAIN), s = tg_setup(sparse_only, TL_MODE_TRAIN);
    cr_assert(tg_loss_at(&e) == tg_loss_at(&s));
    cr_assert_eq(tl_program_backward(e.p, &e.e), TL_OK);
    cr_assert_eq(tl_program_backward(s.p, &s.e), TL_OK);
    cr_assert_eq(e.vars->total, s.vars->total);
    cr_assert(memcmp(e.e.param_grad, s.e.param_grad, (size_t)e.vars->total * sizeof(float)) == 0,
              "the parameters' gradients differ");
    tg_teardown(&e);
    tg_teardown(&s);
}

static tl_t smoothed_sparse(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)target;
    return tl_mean(g, tl_sparse_softmax_xent(g, tl_dense(g, x, 3, TL_ACT_NONE, "z"), labels, 0.1));
}

/* A label outside [0, classes) fails the step, forward and backward, naming
 * the example and the label. */
Test(ops_reduce, sparse_xent_bad_label_is_a_step_error)
{
    tg_fixture f = tg_setup(smoothed_sparse, TL_MODE_TRAIN);
    int32_t *lv = (int32_t *)tl_exec_value(f.p, &f.e, 1);
    tg_loss_at(&f);
    lv[3] = 3;
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "sparse_softmax_cross_entropy_grad: example 3 has label 3, which is outside "
                                      "the valid range of [0, 3)"),
              "%s", tl_last_error());
    lv[3] = 0;
    lv[1] = -2;
    cr_assert_eq(tl_program_forward(f.p, &f.e), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "sparse_softmax_cross_entropy: example 1 has label -2"), "%s", tl_last_error());
    tg_teardown(&f);
}

/* Logits set by hand: argmax / argmin values in both widths, in_top_k, and
 * in_top_k fed into the loss as a constant (no gradient through it). */
static tl_t metrics(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x;
    (void)target;
    int64_t zs[2] = {4, 3};
    tl_t z = tl_variable(g, "z", zs, 2, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    tl_argmax(g, z, 1, TL_I64);
    tl_argmin(g, z, 0, TL_I32);
    tl_t hit = tl_in_top_k(g, z, labels, 2);
    tl_t parts[2] = {tl_sparse_softmax_xent(g, z, labels, 0.0), hit};
    return tl_mean(g, tl_concat(g, parts, 2, 0));
}

Test(ops_reduce, argmax_argmin_in_top_k_values)
{
    tg_fixture f = tg_setup(metrics, TL_MODE_TRAIN);
    /* labels are 0, 1, 2, 0 */
    const float z[12] = {3, 1, 2, /**/ 5, 5, 0, /**/ 0, 1, 2, /**/ 1, 4, 4};
    memcpy(f.params, z, sizeof z);
    tg_loss_at(&f);
    const int64_t *am = (const int64_t *)tl_exec_value(f.p, &f.e, find(f.g, TL_OP_REDUCE_ARGMAX, 0));
    const int32_t *an = (const int32_t *)tl_exec_value(f.p, &f.e, find(f.g, TL_OP_REDUCE_ARGMIN, 0));
    const int64_t want_max[4] = {0, 0, 2, 1};
    const int32_t want_min[3] = {2, 0, 1};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(am[i], want_max[i], "argmax[%d] = %lld", i, (long long)am[i]);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(an[i], want_min[i], "argmin[%d] = %d", i, an[i]);
    tl_t hit = find(f.g, TL_OP_REDUCE_IN_TOP_K, 0);
    const float *h = tl_exec_value(f.p, &f.e, hit);
    /* row 0: label 0 is the max; row 1: label 1 ties the max; row 2: label 2
     * the max; row 3: label 0 is below two tied 4s. */
    const float want_hit[4] = {1, 1, 1, 0};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(h[i], want_hit[i], "in_top_k[%d] = %g", i, (double)h[i]);
    cr_assert(f.p->grad_off[hit] == TL_OFF_NONE, "in_top_k has no gradient");
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    /* The gradient is the loss term's alone: (softmax - onehot) / 8. */
    double s = exp(3.0) + exp(1.0) + exp(2.0);
    cr_assert(fabs(f.e.param_grad[0] - (exp(3.0) / s - 1) / 8) < 1e-6, "%g", (double)f.e.param_grad[0]);
    tg_teardown(&f);
}

/* ---- shapes and errors ---------------------------------------------------------------- */

typedef struct graph_box {
    tl_vars *vars;
    tl_graph *g;
    tl_t x;   /* (2, 3, 4) float32 */
    tl_t i32; /* (4,) int32 */
    tl_t f46; /* (4, 6) float32 */
} graph_box;

static graph_box box_new(void)
{
    graph_box b;
    cr_assert_eq(tl_vars_create(&b.vars), TL_OK);
    cr_assert_eq(tl_graph_create(b.vars, TL_MODE_TRAIN, &b.g), TL_OK);
    int64_t s3[3] = {2, 3, 4}, s1[1] = {4}, s2[2] = {4, 6};
    b.x = tl_graph_input(b.g, TL_F32, s3, 3);
    b.i32 = tl_graph_input(b.g, TL_I32, s1, 1);
    b.f46 = tl_graph_input(b.g, TL_F32, s2, 2);
    return b;
}

static void box_free(graph_box *b)
{
    tl_graph_destroy(b->g);
    tl_vars_destroy(b->vars);
}

static void assert_shape(tl_graph *g, tl_t t, int rank, const int64_t *want)
{
    cr_assert(t >= 0, "%s", tl_graph_error(g));
    int64_t d[TL_MAX_RANK];
    cr_assert_eq(tl_rank(g, t, d), rank);
    for (int i = 0; i < rank; i++)
        cr_assert_eq(d[i], want[i], "dimension %d is %lld, want %lld", i, (long long)d[i], (long long)want[i]);
}

Test(ops_reduce, shapes)
{
    graph_box b = box_new();
    tl_graph *g = b.g;
    assert_shape(g, tl_reduce_sum(g, b.x, (const int[]){0, 2}, 2, true), 3, (const int64_t[]){1, 3, 1});
    assert_shape(g, tl_reduce_sum(g, b.x, (const int[]){0, -1}, 2, false), 1, (const int64_t[]){3});
    assert_shape(g, tl_reduce_mean(g, b.x, NULL, 0, true), 3, (const int64_t[]){1, 1, 1});
    assert_shape(g, tl_reduce_max(g, b.x, NULL, 0, false), 0, NULL);
    assert_shape(g, tl_reduce_min(g, b.x, (const int[]){1}, 1, false), 2, (const int64_t[]){2, 4});
    assert_shape(g, tl_logsumexp(g, b.x, (const int[]){2, 1, 0}, 3, true), 3, (const int64_t[]){1, 1, 1});
    tl_t r1 = tl_reduce_sum(g, b.x, (const int[]){1}, 1, false);
    assert_shape(g, tl_reduce_sum(g, tl_reduce_sum(g, r1, (const int[]){0}, 1, false), (const int[]){0}, 1, false),
                 0, NULL); /* rank 1 to rank 0 */
    tl_t scalar = tl_reduce_sum(g, b.x, NULL, 0, false);
    assert_shape(g, tl_reduce_mean(g, scalar, NULL, 0, true), 0, NULL); /* a scalar's every axis: none */
    assert_shape(g, tl_argmax(g, b.x, 1, TL_I64), 2, (const int64_t[]){2, 4});
    assert_shape(g, tl_argmin(g, b.x, -1, TL_I32), 2, (const int64_t[]){2, 3});
    assert_shape(g, tl_softmax(g, b.x, 1), 3, (const int64_t[]){2, 3, 4});
    assert_shape(g, tl_log_softmax(g, b.x, -3), 3, (const int64_t[]){2, 3, 4});
    assert_shape(g, tl_softmax_xent_dense(g, b.x, tl_softmax(g, b.x, -1), 0.5), 2, (const int64_t[]){2, 3});
    assert_shape(g, tl_sparse_softmax_xent(g, b.f46, b.i32, 0), 1, (const int64_t[]){4});
    tl_t row = tl_reduce_sum(g, b.f46, (const int[]){0}, 1, false); /* (6,) */
    assert_shape(g, tl_sparse_softmax_xent(g, row, tl_argmax(g, row, 0, TL_I64), 0), 0, NULL);
    assert_shape(g, tl_huber(g, b.x, b.x, 1.0), 3, (const int64_t[]){2, 3, 4});
    assert_shape(g, tl_in_top_k(g, b.f46, b.i32, 3), 1, (const int64_t[]){4});
    cr_assert_eq(g->nodes[tl_argmax(g, b.x, 0, TL_I64)].dtype, TL_I64);
    box_free(&b);
}

typedef tl_t (*bad_op)(graph_box *b);

/* op fails with a message holding frag, and every op of the family after it
 * returns TL_T_INVALID. */
static void expect_error(bad_op op, const char *frag)
{
    graph_box b = box_new();
    tl_graph *g = b.g;
    cr_assert_eq(op(&b), TL_T_INVALID, "expected \"%s\"", frag);
    cr_assert_eq(tl_graph_status(g), TL_EINVAL);
    cr_assert(strstr(tl_graph_error(g), frag) != NULL, "message \"%s\" lacks \"%s\"", tl_graph_error(g), frag);
    const int ax[1] = {0};
    cr_assert_eq(tl_reduce_sum(g, b.x, ax, 1, false), TL_T_INVALID);
    cr_assert_eq(tl_reduce_mean(g, b.x, NULL, 0, false), TL_T_INVALID);
    cr_assert_eq(tl_reduce_max(g, b.x, NULL, 0, false), TL_T_INVALID);
    cr_assert_eq(tl_reduce_min(g, b.x, NULL, 0, false), TL_T_INVALID);
    cr_assert_eq(tl_logsumexp(g, b.x, NULL, 0, false), TL_T_INVALID);
    cr_assert_eq(tl_argmax(g, b.x, 0, TL_I32), TL_T_INVALID);
    cr_assert_eq(tl_argmin(g, b.x, 0, TL_I64), TL_T_INVALID);
    cr_assert_eq(tl_softmax(g, b.x, 0), TL_T_INVALID);
    cr_assert_eq(tl_log_softmax(g, b.x, 0), TL_T_INVALID);
    cr_assert_eq(tl_softmax_xent_dense(g, b.f46, b.f46, 0), TL_T_INVALID);
    cr_assert_eq(tl_sparse_softmax_xent(g, b.f46, b.i32, 0), TL_T_INVALID);
    cr_assert_eq(tl_huber(g, b.x, b.x, 1), TL_T_INVALID);
    cr_assert_eq(tl_in_top_k(g, b.f46, b.i32, 1), TL_T_INVALID);
    cr_assert(strstr(tl_graph_error(g), frag) != NULL, "the first error stays");
    box_free(&b);
}

static tl_t e_out_of_range(graph_box *b) { return tl_reduce_sum(b->g, b->x, (const int[]){3}, 1, false); }
static tl_t e_repeated(graph_box *b) { return tl_reduce_max(b->g, b->x, (const int[]){2, -1}, 2, true); }
static tl_t e_naxes(graph_box *b) { return tl_reduce_mean(b->g, b->x, NULL, -1, false); }
static tl_t e_null_axes(graph_box *b) { return tl_reduce_min(b->g, b->x, NULL, 2, false); }
static tl_t e_lse_axis(graph_box *b) { return tl_logsumexp(b->g, b->x, (const int[]){0, -4}, 2, false); }
static tl_t e_int_x(graph_box *b) { return tl_reduce_sum(b->g, b->i32, NULL, 0, false); }
static tl_t e_not_a_tensor(graph_box *b) { return tl_reduce_sum(b->g, 999, NULL, 0, false); }
static tl_t e_invalid_x(graph_box *b) { return tl_softmax(b->g, TL_T_INVALID, 0); }
static tl_t e_output_type(graph_box *b) { return tl_argmax(b->g, b->x, 0, TL_F32); }
static tl_t e_argmin_axis(graph_box *b) { return tl_argmin(b->g, b->x, 5, TL_I32); }
static tl_t e_argmax_scalar(graph_box *b)
{
    return tl_argmax(b->g, tl_reduce_sum(b->g, b->x, NULL, 0, false), 0, TL_I64);
}
static tl_t e_softmax_axis(graph_box *b) { return tl_softmax(b->g, b->x, 3); }
static tl_t e_log_softmax_scalar(graph_box *b)
{
    return tl_log_softmax(b->g, tl_reduce_sum(b->g, b->x, NULL, 0, false), -1);
}
static tl_t e_dense_shape(graph_box *b)
{
    int64_t s[3] = {2, 3, 5};
    return tl_softmax_xent_dense(b->g, b->x, tl_graph_input(b->g, TL_F32, s, 3), 0);
}
static tl_t e_dense_smoothing(graph_box *b) { return tl_softmax_xent_dense(b->g, b->x, b->x, 1.5); }
static tl_t e_dense_int(graph_box *b) { return tl_softmax_xent_dense(b->g, b->f46, b->i32, 0); }
static tl_t e_sparse_float(graph_box *b) { return tl_sparse_softmax_xent(b->g, b->f46, b->f46, 0); }
static tl_t e_sparse_shape(graph_box *b) { return tl_sparse_softmax_xent(b->g, b->x, b->i32, 0); }
static tl_t e_sparse_predict(graph_box *b) { return tl_sparse_softmax_xent(b->g, b->f46, TL_T_INVALID, 0); }
static tl_t e_sparse_smoothing(graph_box *b) { return tl_sparse_softmax_xent(b->g, b->f46, b->i32, -0.5); }
static tl_t e_huber_shape(graph_box *b) { return tl_huber(b->g, b->x, b->f46, 1); }
static tl_t e_huber_delta(graph_box *b) { return tl_huber(b->g, b->x, b->x, 0); }
static tl_t e_top_k_rank(graph_box *b) { return tl_in_top_k(b->g, b->x, b->i32, 1); }
static tl_t e_top_k_targets(graph_box *b)
{
    int64_t s[1] = {2};
    return tl_in_top_k(b->g, b->f46, tl_graph_input(b->g, TL_I32, s, 1), 1);
}
static tl_t e_top_k_k(graph_box *b) { return tl_in_top_k(b->g, b->f46, b->i32, -1); }

Test(ops_reduce, errors_name_the_argument)
{
    expect_error(e_out_of_range, "reduce_sum: axis 3 is outside [-3, 3) for x of shape (2, 3, 4)");
    expect_error(e_repeated, "reduce_max: axes (2, -1) name axis 2 of x (2, 3, 4) twice");
    expect_error(e_naxes, "reduce_mean: naxes must be >= 0 (0 reduces every axis), got -1");
    expect_error(e_null_axes, "reduce_min: axes is NULL but naxes is 2");
    expect_error(e_lse_axis, "logsumexp: axis -4 is outside [-3, 3) for x of shape (2, 3, 4)");
    expect_error(e_int_x, "reduce_sum: x must be float32");
    expect_error(e_not_a_tensor, "reduce_sum: x is not a tensor of this graph");
    expect_error(e_invalid_x, "softmax: x is not a tensor of this graph");
    expect_error(e_output_type, "argmax: output_type must be int32 or int64, got float32");
    expect_error(e_argmin_axis, "argmin: axis 5 is outside [-3, 3) for x of shape (2, 3, 4)");
    expect_error(e_argmax_scalar, "argmax: x has shape (), a scalar; it needs rank >= 1 (got axis 0)");
    expect_error(e_softmax_axis, "softmax: axis 3 is outside [-3, 3) for x of shape (2, 3, 4)");
    expect_error(e_log_softmax_scalar, "log_softmax: x has shape (), a scalar");
    expect_error(e_dense_shape, "softmax_xent_dense: labels (2, 3, 5) must have the shape of logits (2, 3, 4)");
    expect_error(e_dense_smoothing, "softmax_xent_dense: label_smoothing must be in [0, 1], got 1.5");
    expect_error(e_dense_int, "softmax_xent_dense: labels must be float32");
    expect_error(e_sparse_float, "sparse_softmax_xent: labels must be int32 or int64, got float32");
    expect_error(e_sparse_shape, "sparse_softmax_xent: labels (4,) must have shape (2, 3), the shape without the "
                                 "last axis of logits (2, 3, 4)");
    expect_error(e_sparse_predict, "sparse_softmax_xent: labels are not a tensor of this graph (no labels in PREDICT)");
    expect_error(e_sparse_smoothing, "sparse_softmax_xent: label_smoothing must be in [0, 1], got -0.5");
    expect_error(e_huber_shape, "huber: labels (4, 6) must have the shape of predictions (2, 3, 4)");
    expect_error(e_huber_delta, "huber: delta must be a positive finite float32 number, got 0");
    expect_error(e_top_k_rank, "in_top_k: predictions must be (batch, classes), got (2, 3, 4)");
    expect_error(e_top_k_targets, "in_top_k: targets (2,) must have shape (4,), the first dimension of "
                                  "predictions (4, 6)");
    expect_error(e_top_k_k, "in_top_k: k must be >= 0, got -1");
}

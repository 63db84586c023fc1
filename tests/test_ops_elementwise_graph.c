/* The element-wise ops through the tracer, planner and executor: every
 * variable's gradient against finite differences of the loss (wiring,
 * broadcast reductions, inputs used twice), values of small graphs worked by
 * hand, int64 through the activation slab, and the tracing errors. The
 * kernels' own twin and finite-difference tests are in test_ops_elementwise.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph_util.h"

static tl_initializer uniform(double lo, double hi)
{
    return (tl_initializer){TL_INIT_UNIFORM, lo, hi};
}

static tl_t scalar(tl_graph *g, double v)
{
    return tl_constant(g, v, NULL, 0);
}

/* ---- gradients through whole graphs ------------------------------------------------- */

/* + - * / with a row, a column, a (1, 6) and a scalar variable; q and r are
 * each used twice, c and w are both inputs of one op (w of a tie, whose
 * gradient all goes to x). */
static tl_t arithmetic(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    int64_t row[1] = {6}, col[2] = {4, 1}, wide[2] = {1, 6};
    tl_t w = tl_variable(g, "w", row, 1, uniform(-1, 1));
    tl_t b = tl_variable(g, "b", col, 2, uniform(-1, 1));
    tl_t c = tl_variable(g, "c", wide, 2, uniform(0.5, 1.5));
    tl_t s = tl_variable(g, "s", row, 0, uniform(0.5, 1.5)); /* a scalar (vars.c copies 0 dims from shape) */
    tl_t h = tl_add(g, tl_mul(g, x, tl_maximum(g, w, w)), b);         /* (4, 6) */
    tl_t q = tl_div(g, h, tl_add(g, tl_mul(g, c, c), scalar(g, 1)));  /* / (1, 6) */
    tl_t r = tl_sub(g, q, tl_mul(g, s, q));
    r = tl_add(g, r, tl_mul(g, r, scalar(g, 0.5)));
    return tl_mse(g, r, target);
}

/* pow with a broadcast exponent and a scalar one, exp, log, sqrt, rsqrt, abs, neg. */
static tl_t powers(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    int64_t row[1] = {6}, col[2] = {4, 1};
    tl_t e = tl_variable(g, "e", row, 1, uniform(0.5, 1.5));
    tl_t a = tl_variable(g, "a", col, 2, uniform(0.5, 1.5));
    tl_t base = tl_add(g, tl_square(g, x), scalar(g, 0.5));
    tl_t p = tl_pow(g, base, e);                                    /* (4, 6) ^ (6,) */
    tl_t q = tl_pow(g, a, scalar(g, 2));                            /* (4, 1) */
    tl_t r = tl_add(g, p, tl_mul(g, q, tl_exp(g, tl_neg(g, tl_abs(g, x)))));
    tl_t t = tl_ln(g, tl_add(g, tl_sqrt(g, a), tl_rsqrt(g, tl_add(g, tl_square(g, e), scalar(g, 1)))));
    return tl_mse(g, tl_add(g, r, t), target);                      /* (4, 6) + (4, 6) */
}

/* Every activation on one dense layer's output, summed. */
static tl_t activations(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_NONE, "d");
    tl_t a = tl_add(g, tl_gelu(g, h, false), tl_gelu(g, h, true));
    a = tl_add(g, a, tl_silu(g, h));
    a = tl_add(g, a, tl_swish(g, tl_mul(g, h, scalar(g, 0.5))));
    a = tl_add(g, a, tl_leaky_relu(g, h, 0.2));
    a = tl_add(g, a, tl_elu(g, h, 1.5));
    a = tl_add(g, a, tl_softplus(g, h));
    a = tl_add(g, a, tl_clip(g, h, -0.5, 0.75));
    a = tl_sub(g, a, tl_neg(g, h));
    return tl_mse(g, a, target);
}

/* maximum / minimum against broadcast variables, a where on a comparison's
 * mask and one on an int32 column made from the labels. */
static tl_t selections(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    int64_t row[1] = {6}, col[2] = {4, 1};
    tl_t w = tl_variable(g, "w", row, 1, uniform(-1, 1));
    tl_t b = tl_variable(g, "b", col, 2, uniform(-1, 1));
    tl_t h = tl_dense(g, x, 6, TL_ACT_NONE, "m");
    tl_t m = tl_maximum(g, h, w), n = tl_minimum(g, h, b);
    tl_t v = tl_where(g, tl_greater(g, h, scalar(g, 0)), m, n);
    tl_t cond = tl_cast(g, tl_reshape(g, tl_cast(g, labels, TL_F32), col, 2), TL_I32); /* (4, 1): 0 1 2 0 */
    v = tl_where(g, cond, v, tl_mul(g, v, scalar(g, 2)));
    return tl_mse(g, v, target);
}

/* A factor made by casting x through int64 and back multiplies a dense
 * output; f32 → f32 casts are the identity. */
static tl_t casts(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t k = tl_cast(g, tl_cast(g, tl_mul(g, x, scalar(g, 10)), TL_I64), TL_F32);
    tl_t h = tl_cast(g, tl_dense(g, x, 6, TL_ACT_TANH, "k"), TL_F32);
    return tl_mse(g, tl_mul(g, h, tl_mul(g, k, scalar(g, 0.1))), target);
}

Test(ops_elementwise_graph, arithmetic_broadcast_gradients) { tg_check_gradients(arithmetic, TL_MODE_TRAIN); }
Test(ops_elementwise_graph, pow_exp_log_sqrt_gradients) { tg_check_gradients(powers, TL_MODE_TRAIN); }
Test(ops_elementwise_graph, activation_gradients) { tg_check_gradients(activations, TL_MODE_TRAIN); }
Test(ops_elementwise_graph, maximum_minimum_where_gradients) { tg_check_gradients(selections, TL_MODE_TRAIN); }
Test(ops_elementwise_graph, cast_gradients) { tg_check_gradients(casts, TL_MODE_TRAIN); }

/* where's cond is a float tensor that depends on a variable: it gets a zero
 * gradient, written every step (no stale values reach the variable). */
static tl_t mask_from_variable(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    int64_t row[1] = {6};
    tl_t v = tl_variable(g, "v", row, 1, uniform(-1, 1));
    tl_t h = tl_dense(g, x, 6, TL_ACT_NONE, "h");
    tl_t cond = tl_sigmoid(g, v); /* never 0: always true */
    return tl_mse(g, tl_where(g, cond, h, tl_mul(g, h, scalar(g, 3))), target);
}

Test(ops_elementwise_graph, where_gives_its_cond_a_zero_gradient)
{
    tg_check_gradients(mask_from_variable, TL_MODE_TRAIN);
    tg_fixture f = tg_setup(mask_from_variable, TL_MODE_TRAIN);
    tg_loss_at(&f);
    for (int64_t i = 0; i < f.p->grad_floats; i++)
        f.e.grad[i] = NAN; /* stale garbage from a previous step */
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK, "%s", tl_last_error());
    int idx = -1;
    for (int k = 0; k < f.vars->n; k++)
        if (strcmp(f.vars->v[k].name, "v") == 0)
            idx = k;
    cr_assert(idx >= 0);
    for (int64_t i = 0; i < 6; i++)
        cr_assert_eq(f.e.param_grad[f.vars->v[idx].offset + i], 0.0f, "v's gradient [%lld]", (long long)i);
    tg_teardown(&f);
}

/* ---- values ------------------------------------------------------------------------------ */

static tl_t g_half, g_i64, g_back, g_lt, g_sel, g_ge_i64, g_lab;

/* Values to read back (the loss is only there to compile a program). */
static tl_t values(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)target;
    g_half = tl_mul(g, x, scalar(g, 0.5));
    g_i64 = tl_cast(g, tl_mul(g, x, scalar(g, 3e9)), TL_I64);
    g_back = tl_cast(g, g_i64, TL_F32);
    g_lt = tl_less(g, x, scalar(g, 0));
    g_sel = tl_where(g, g_lt, tl_neg(g, x), x); /* |x| */
    g_lab = tl_cast(g, labels, TL_I64);
    int64_t col[2] = {4, 1};
    tl_t lab = tl_cast(g, tl_reshape(g, tl_cast(g, labels, TL_F32), col, 2), TL_I64); /* (4, 1) */
    g_ge_i64 = tl_greater_equal(g, g_i64, lab); /* (4, 6) against (4, 1) */
    int64_t one = 1;
    tl_t w = tl_variable(g, "w", &one, 1, uniform(-1, 1));
    return tl_sum(g, tl_mul(g, g_back, w));
}

Test(ops_elementwise_graph, values_through_a_graph)
{
    tg_fixture f = tg_setup(values, TL_MODE_TRAIN);
    tg_loss_at(&f);
    const float *x = tl_exec_value(f.p, &f.e, 0);
    const float *half = tl_exec_value(f.p, &f.e, g_half), *back = tl_exec_value(f.p, &f.e, g_back);
    const float *lt = tl_exec_value(f.p, &f.e, g_lt), *sel = tl_exec_value(f.p, &f.e, g_sel);
    const float *ge = tl_exec_value(f.p, &f.e, g_ge_i64);
    const int64_t *i64 = (const int64_t *)tl_exec_value(f.p, &f.e, g_i64);
    const int64_t *lab = (const int64_t *)tl_exec_value(f.p, &f.e, g_lab);
    for (int i = 0; i < 24; i++) {
        cr_assert_eq(half[i], x[i] * 0.5f);
        /* Beyond int32: the int64 slots hold every bit. */
        float big = x[i] * 3e9f;
        int64_t want = (int64_t)truncf(big);
        cr_assert_eq(i64[i], want, "int64 [%d] = %lld, want %lld", i, (long long)i64[i], (long long)want);
        cr_assert_eq(back[i], (float)want);
        cr_assert_eq(lt[i], x[i] < 0 ? 1.0f : 0.0f);
        cr_assert_eq(sel[i], fabsf(x[i]));
        cr_assert_eq(ge[i], i64[i] >= (int64_t)(i / 6 % 3) ? 1.0f : 0.0f);
    }
    for (int i = 0; i < 4; i++)
        cr_assert_eq(lab[i], i % 3);
    tg_teardown(&f);
}

/* A constant is written by its forward pass every step. */
static tl_t constant_loss(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    int64_t s[2] = {2, 3}, one = 1;
    tl_t c = tl_constant(g, 0.1, s, 2);
    tl_t w = tl_variable(g, "w", &one, 1, (tl_initializer){TL_INIT_CONSTANT, 1, 0});
    return tl_sum(g, tl_mul(g, c, w));
}

Test(ops_elementwise_graph, constant_is_written_each_step)
{
    tg_fixture f = tg_setup(constant_loss, TL_MODE_TRAIN);
    float *c = tl_exec_value(f.p, &f.e, 3);
    for (int i = 0; i < 6; i++)
        c[i] = 99.0f;
    f.params[0] = 2.0f;
    double loss = tg_loss_at(&f);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(c[i], 0.1f);
    cr_assert(fabs(loss - 6 * 0.1f * 2.0) < 1e-6, "loss %g", loss);
    cr_assert_eq(tl_program_backward(f.p, &f.e), TL_OK);
    cr_assert(fabsf(f.e.param_grad[0] - 0.6f) < 1e-6f, "dw %g", (double)f.e.param_grad[0]);
    tg_teardown(&f);
}

/* ---- tracing errors ------------------------------------------------------------------------ */

typedef struct trace {
    tl_vars *vars;
    tl_graph *g;
    tl_t x, y, l, s;
} trace;

static trace trace_new(void)
{
    trace t;
    cr_assert_eq(tl_vars_create(&t.vars), TL_OK);
    cr_assert_eq(tl_graph_create(t.vars, TL_MODE_TRAIN, &t.g), TL_OK);
    int64_t xs[2] = {4, 5}, ys[2] = {4, 3}, ls[1] = {4}, ss[1] = {3};
    t.x = tl_graph_input(t.g, TL_F32, xs, 2);
    t.y = tl_graph_input(t.g, TL_F32, ys, 2);
    t.l = tl_graph_input(t.g, TL_I32, ls, 1);
    t.s = tl_graph_input(t.g, TL_F32, ss, 1);
    return t;
}

static void trace_free(trace *t)
{
    tl_graph_destroy(t->g);
    tl_vars_destroy(t->vars);
}

#define ASSERT_TRACE_ERROR(expr, msg)                                                                      \
    do {                                                                                                   \
        trace t_ = trace_new();                                                                            \
        trace *t = &t_;                                                                                    \
        tl_t r_ = (expr);                                                                                  \
        cr_assert_eq(r_, TL_T_INVALID, "%s returned %d", #expr, (int)r_);                                  \
        cr_assert_eq(tl_graph_status(t->g), TL_EINVAL);                                                    \
        cr_assert_str_eq(tl_graph_error(t->g), (msg));                                                     \
        cr_assert_eq(tl_mul(t->g, t->x, t->x), TL_T_INVALID, "a later op must return TL_T_INVALID");       \
        cr_assert_str_eq(tl_graph_error(t->g), (msg), "the first error stays");                            \
        trace_free(t);                                                                                     \
    } while (0)

Test(ops_elementwise_graph, tracing_errors_name_op_argument_and_value)
{
    ASSERT_TRACE_ERROR(tl_add(t->g, t->x, t->y), "add: y has shape (4, 3), which does not broadcast with x (4, 5)");
    ASSERT_TRACE_ERROR(tl_pow(t->g, t->s, t->x), "pow: y has shape (4, 5), which does not broadcast with x (3,)");
    ASSERT_TRACE_ERROR(tl_sub(t->g, t->x, t->l), "sub: y must be float32, got int32");
    ASSERT_TRACE_ERROR(tl_exp(t->g, t->l), "exp: x must be float32, got int32");
    ASSERT_TRACE_ERROR(tl_gelu(t->g, tl_cast(t->g, t->x, TL_I64), true), "gelu: x must be float32, got int64");
    ASSERT_TRACE_ERROR(tl_less(t->g, t->l, t->x),
                       "less: x is int32 and y is float32; both must be float32, both int32 or both int64");
    ASSERT_TRACE_ERROR(tl_equal(t->g, t->x, t->y), "equal: y has shape (4, 3), which does not broadcast with x (4, 5)");
    ASSERT_TRACE_ERROR(tl_where(t->g, tl_cast(t->g, t->x, TL_I64), t->x, t->x),
                       "where: cond must be a float32 mask or int32, got int64");
    ASSERT_TRACE_ERROR(tl_where(t->g, t->x, t->x, t->s),
                       "where: y has shape (3,), which does not broadcast with cond and x (4, 5)");
    ASSERT_TRACE_ERROR(tl_where(t->g, t->s, t->x, t->x),
                       "where: x has shape (4, 5), which does not broadcast with cond (3,)");
    ASSERT_TRACE_ERROR(tl_where(t->g, t->x, t->l, t->x), "where: x must be float32, got int32");
    ASSERT_TRACE_ERROR(tl_cast(t->g, t->x, (tl_dtype)7), "cast: to must be TL_F32, TL_I32 or TL_I64, got 7");
    ASSERT_TRACE_ERROR(tl_clip(t->g, t->x, 1, 0), "clip: lo 1 and hi 0 must be numbers with lo <= hi");
    ASSERT_TRACE_ERROR(tl_clip(t->g, t->x, NAN, 0), "clip: lo nan and hi 0 must be numbers with lo <= hi");
    ASSERT_TRACE_ERROR(tl_leaky_relu(t->g, t->x, NAN), "leaky_relu: alpha must be a finite float32, got nan");
    ASSERT_TRACE_ERROR(tl_elu(t->g, t->x, 1e300), "elu: alpha must be a finite float32, got 1e+300");
    ASSERT_TRACE_ERROR(tl_constant(t->g, 1, (int64_t[]){2, 0}, 2),
                       "constant: dimension 1 has size 0; sizes must be >= 1");
    ASSERT_TRACE_ERROR(tl_constant(t->g, 1, NULL, 2), "constant: shape is NULL with rank 2");
    ASSERT_TRACE_ERROR(tl_constant(t->g, 1, NULL, TL_MAX_RANK + 1), "constant: rank 9 is outside [0, 8]");
    ASSERT_TRACE_ERROR(tl_sqrt(t->g, 1000), "sqrt: x is not a tensor of this graph");
}

typedef tl_t (*op1)(tl_graph *, tl_t);
typedef tl_t (*op2)(tl_graph *, tl_t, tl_t);

Test(ops_elementwise_graph, invalid_in_invalid_out)
{
    const op1 unary[] = {tl_neg, tl_abs, tl_exp, tl_ln, tl_sqrt, tl_rsqrt, tl_square, tl_silu, tl_swish, tl_softplus};
    const op2 binary[] = {tl_add, tl_sub, tl_mul, tl_div, tl_maximum, tl_minimum, tl_pow, tl_equal,
                          tl_not_equal, tl_less, tl_less_equal, tl_greater, tl_greater_equal};
    trace t = trace_new();
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++)
        cr_assert_eq(unary[i](t.g, TL_T_INVALID), TL_T_INVALID, "unary op %zu", i);
    for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++) {
        cr_assert_eq(binary[i](t.g, TL_T_INVALID, t.x), TL_T_INVALID, "binary op %zu", i);
        cr_assert_eq(binary[i](t.g, t.x, TL_T_INVALID), TL_T_INVALID, "binary op %zu", i);
    }
    cr_assert_eq(tl_gelu(t.g, TL_T_INVALID, false), TL_T_INVALID);
    cr_assert_eq(tl_clip(t.g, TL_T_INVALID, 0, 1), TL_T_INVALID);
    cr_assert_eq(tl_leaky_relu(t.g, TL_T_INVALID, 0.2), TL_T_INVALID);
    cr_assert_eq(tl_elu(t.g, TL_T_INVALID, 1), TL_T_INVALID);
    cr_assert_eq(tl_where(t.g, TL_T_INVALID, t.x, t.x), TL_T_INVALID);
    cr_assert_eq(tl_where(t.g, t.x, t.x, TL_T_INVALID), TL_T_INVALID);
    cr_assert_eq(tl_cast(t.g, TL_T_INVALID, TL_I32), TL_T_INVALID);
    cr_assert_eq(tl_constant(t.g, 1, NULL, 0), TL_T_INVALID, "a graph with an error makes no constant");
    cr_assert_str_eq(tl_graph_error(t.g), "neg: x is not a tensor of this graph");
    trace_free(&t);
}

/* Shapes of results: broadcasting, where of three, casts keep shape and set dtype. */
Test(ops_elementwise_graph, result_shapes_and_dtypes)
{
    trace t = trace_new();
    int64_t d[TL_MAX_RANK], c31[3] = {4, 1, 5}, c2[2] = {3, 1};
    tl_t a = tl_constant(t.g, 1, c31, 3), b = tl_constant(t.g, 2, c2, 2);
    cr_assert_eq(tl_rank(t.g, tl_add(t.g, a, b), d), 3);
    cr_assert(d[0] == 4 && d[1] == 3 && d[2] == 5);
    cr_assert_eq(tl_rank(t.g, tl_mul(t.g, t.x, scalar(t.g, 0.5)), d), 2);
    cr_assert(d[0] == 4 && d[1] == 5);
    cr_assert_eq(tl_rank(t.g, scalar(t.g, 3), NULL), 0);
    tl_t w = tl_where(t.g, tl_greater(t.g, t.s, scalar(t.g, 0)), tl_constant(t.g, 1, c2, 2), scalar(t.g, 0));
    cr_assert_eq(tl_rank(t.g, w, d), 2);
    cr_assert(d[0] == 3 && d[1] == 3);
    tl_t i = tl_cast(t.g, t.x, TL_I64);
    cr_assert_eq(tl_graph_node(t.g, i)->dtype, TL_I64);
    cr_assert_eq(tl_cast(t.g, i, TL_I64), i);
    cr_assert_eq(tl_cast(t.g, t.x, TL_F32), t.x);
    cr_assert_eq(tl_graph_node(t.g, tl_less(t.g, i, i))->dtype, TL_F32);
    cr_assert_eq(tl_graph_status(t.g), TL_OK, "%s", tl_graph_error(t.g));
    trace_free(&t);
}

/* tl_batch_matmul through the tracer, planner and executor: output shapes,
 * values against the float64 twin, gradients against finite differences of
 * whole graphs (an operand used twice, broadcasting on either side, every
 * adjoint combination, attention's Q·Kᵀ·V), the bits of tl_matmul for 2-D
 * operands, and the tracing errors. The kernels' own checks are in
 * test_ops_linalg_kernels.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/batch_matmul.h"
#include "test_graph_util.h"
#include "test_kernels_util.h"

TestSuite(ops_linalg, .init = tk_setup, .timeout = 120);

static const tl_initializer uniform = {TL_INIT_UNIFORM, -1.0, 1.0};

static tl_t var(tl_graph *g, const char *name, const int64_t *shape, int rank)
{
    return tl_variable(g, name, shape, rank, uniform);
}

/* ---- shapes and values ------------------------------------------------------ */

typedef struct traced {
    tl_vars *vars;
    tl_graph *g;
} traced;

static traced trace_new(void)
{
    traced t;
    cr_assert_eq(tl_vars_create(&t.vars), TL_OK);
    cr_assert_eq(tl_graph_create(t.vars, TL_MODE_TRAIN, &t.g), TL_OK);
    return t;
}

static void trace_free(traced *t)
{
    tl_graph_destroy(t->g);
    tl_vars_destroy(t->vars);
}

/* tl_batch_matmul of inputs of the given shapes has shape want (rank wr). */
static void assert_shape(const int64_t *sa, int ra, const int64_t *sb, int rb, bool adj_a, bool adj_b,
                         const int64_t *want, int wr)
{
    traced t = trace_new();
    tl_t y = tl_batch_matmul(t.g, tl_graph_input(t.g, TL_F32, sa, ra), tl_graph_input(t.g, TL_F32, sb, rb), adj_a,
                             adj_b);
    cr_assert(y >= 0, "%s", tl_graph_error(t.g));
    int64_t got[TL_MAX_RANK];
    cr_assert_eq(tl_rank(t.g, y, got), wr);
    for (int i = 0; i < wr; i++)
        cr_assert_eq(got[i], want[i], "dim %d is %lld, want %lld", i, (long long)got[i], (long long)want[i]);
    trace_free(&t);
}

Test(ops_linalg, output_shapes_broadcast_the_batch)
{
    assert_shape((int64_t[]){8, 4, 16, 32}, 4, (int64_t[]){32, 64}, 2, false, false, (int64_t[]){8, 4, 16, 64}, 4);
    assert_shape((int64_t[]){8, 1, 16, 32}, 4, (int64_t[]){4, 32, 16}, 3, false, false, (int64_t[]){8, 4, 16, 16}, 4);
    assert_shape((int64_t[]){2, 3, 5, 4}, 4, (int64_t[]){2, 3, 5, 4}, 4, false, true, (int64_t[]){2, 3, 5, 5}, 4);
    assert_shape((int64_t[]){2, 3, 5, 4}, 4, (int64_t[]){2, 3, 5, 4}, 4, true, false, (int64_t[]){2, 3, 4, 4}, 4);
    assert_shape((int64_t[]){7, 3}, 2, (int64_t[]){2, 1, 5, 7}, 4, true, true, (int64_t[]){2, 1, 3, 5}, 4);
    assert_shape((int64_t[]){3, 4}, 2, (int64_t[]){4, 5}, 2, false, false, (int64_t[]){3, 5}, 2);
    assert_shape((int64_t[]){1, 2, 1, 3, 4}, 5, (int64_t[]){6, 4, 2}, 3, false, false,
                 (int64_t[]){1, 2, 6, 3, 2}, 5);
}

/* A forward-only program on two inputs; the result against the twin. */
static void check_values(const int64_t *sa, int ra, const int64_t *sb, int rb, bool adj_a, bool adj_b)
{
    traced t = trace_new();
    tl_t a = tl_graph_input(t.g, TL_F32, sa, ra), b = tl_graph_input(t.g, TL_F32, sb, rb);
    tl_t y = tl_batch_matmul(t.g, a, b, adj_a, adj_b);
    cr_assert(y >= 0, "%s", tl_graph_error(t.g));
    tl_program *p;
    cr_assert_eq(tl_program_compile(t.g, TL_T_INVALID, false, &p), TL_OK, "%s", tl_last_error());
    tl_exec e = {0};
    e.act = tk_alloc((size_t)p->act_floats * sizeof(float));
    const tl_node *na = tl_graph_node(t.g, a), *nb = tl_graph_node(t.g, b), *ny = tl_graph_node(t.g, y);
    tk_buf va = tk_rand(na->size, 61, -1, 1), vb = tk_rand(nb->size, 62, -1, 1);
    memcpy(tl_exec_value(p, &e, a), va.f, (size_t)na->size * sizeof(float));
    memcpy(tl_exec_value(p, &e, b), vb.f, (size_t)nb->size * sizeof(float));
    cr_assert_eq(tl_program_forward(p, &e), TL_OK, "%s", tl_last_error());

    tl_k_bmm s;
    cr_assert_eq(tl_k_bmm_init(&s, sa, ra, sb, rb, adj_a, adj_b, NULL), TL_OK);
    double *want = tk_alloc((size_t)ny->size * sizeof(double)), *bound = tk_alloc((size_t)ny->size * sizeof(double));
    for (int64_t i = 0; i < na->size; i++)
        va.d[i] = fabs(va.d[i]);
    for (int64_t i = 0; i < nb->size; i++)
        vb.d[i] = fabs(vb.d[i]);
    cr_assert_eq(tl_k_batch_matmul_ref(&s, va.d, vb.d, bound), TL_OK);
    for (int64_t i = 0; i < na->size; i++)
        va.d[i] = va.f[i];
    for (int64_t i = 0; i < nb->size; i++)
        vb.d[i] = vb.f[i];
    cr_assert_eq(tl_k_batch_matmul_ref(&s, va.d, vb.d, want), TL_OK);
    tk_assert_bounded(ny->size, tl_exec_value(p, &e, y), want, bound, 1e-5, "batch_matmul through the executor");
    free(want);
    free(bound);
    tk_free(&va);
    tk_free(&vb);
    free(e.act);
    tl_program_destroy(p);
    trace_free(&t);
}

Test(ops_linalg, forward_matches_twin_through_the_executor)
{
    for (int adj = 0; adj < 4; adj++) {
        bool ta = adj & 1, tb = adj & 2;
        check_values((int64_t[]){8, 4, 16, 32}, 4, (int64_t[]){tb ? 64 : 32, tb ? 32 : 64}, 2, false, tb);
        check_values((int64_t[]){8, 1, ta ? 32 : 16, ta ? 16 : 32}, 4, (int64_t[]){4, 32, 16}, 3, ta, false);
        int64_t k = ta ? 4 : 5; /* a stored (..., 4, 5) */
        check_values((int64_t[]){2, 1, 3, 4, 5}, 5, (int64_t[]){1, 2, 1, tb ? 3 : k, tb ? k : 3}, 5, ta, tb);
        int64_t k2 = ta ? 6 : 7; /* a stored (6, 7) */
        check_values((int64_t[]){6, 7}, 2, (int64_t[]){tb ? 3 : k2, tb ? k2 : 3}, 2, ta, tb);
    }
}

/* ---- gradients of whole graphs ---------------------------------------------- */

/* x·xᵀ: one variable as both operands; the second write adds by GEMM's beta. */
static tl_t self_outer(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_t v = var(g, "v", (int64_t[]){3, 4, 5}, 3);
    return tl_mean(g, tl_tanh(g, tl_batch_matmul(g, v, v, false, true))); /* (3, 4, 4) */
}

Test(ops_linalg, operand_used_twice_x_xt) { tg_check_gradients(self_outer, TL_MODE_TRAIN); }

/* Attention without the softmax: batch 2, heads 3, seq 5, dim 4. */
static tl_t attention(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    const int64_t s[4] = {2, 3, 5, 4};
    tl_t q = var(g, "q", s, 4), k = var(g, "k", s, 4), v = var(g, "v", s, 4);
    tl_t scores = tl_batch_matmul(g, q, k, false, true); /* (2, 3, 5, 5) */
    tl_t ctx = tl_batch_matmul(g, tl_tanh(g, scores), v, false, false); /* (2, 3, 5, 4) */
    return tl_mean(g, tl_tanh(g, ctx));
}

Test(ops_linalg, attention_q_kt_v) { tg_check_gradients(attention, TL_MODE_TRAIN); }

/* Each operand repeated along one batch dimension of the other: (3, 1, 5, 4)
 * x (2, 4, 6) -> (3, 2, 5, 6), in the adjoint combination `adjoint` says
 * (bit 0: a, bit 1: b); the operands stored transposed accordingly. */
static int adjoint;

static tl_t broadcast_both(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    bool ta = adjoint & 1, tb = adjoint & 2;
    tl_t a = var(g, "a", (int64_t[]){3, 1, ta ? 4 : 5, ta ? 5 : 4}, 4);
    tl_t b = var(g, "b", (int64_t[]){2, tb ? 6 : 4, tb ? 4 : 6}, 3);
    return tl_mean(g, tl_tanh(g, tl_batch_matmul(g, a, b, ta, tb)));
}

Test(ops_linalg, broadcast_on_either_side_every_adjoint)
{
    for (adjoint = 0; adjoint < 4; adjoint++)
        tg_check_gradients(broadcast_both, TL_MODE_TRAIN);
}

/* Rank 5 with 1s on both sides: (2, 1, 3, 2, 3) x (1, 2, 1, 3, 2). */
static tl_t rank5(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_t a = var(g, "a", (int64_t[]){2, 1, 3, 2, 3}, 5), b = var(g, "b", (int64_t[]){1, 2, 1, 3, 2}, 5);
    return tl_mean(g, tl_tanh(g, tl_batch_matmul(g, a, b, false, false)));
}

Test(ops_linalg, rank5_broadcast) { tg_check_gradients(rank5, TL_MODE_TRAIN); }

/* A weight w (6, 3) repeated over the batch of the input, twice: h =
 * tanh(x·w), y = h·wᵀ against the target; w's gradient from two ops, each
 * summed over the batch. */
static tl_t shared_broadcast(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t w = var(g, "w", (int64_t[]){6, 3}, 2);
    tl_t x3 = tl_reshape(g, x, (int64_t[]){2, 2, 6}, 3);
    tl_t h = tl_tanh(g, tl_batch_matmul(g, x3, w, false, false));     /* (2, 2, 3) */
    tl_t y = tl_batch_matmul(g, h, w, false, true);                    /* (2, 2, 6) */
    return tl_mse(g, tl_reshape(g, y, (int64_t[]){4, 6}, 2), target);
}

Test(ops_linalg, shared_weight_broadcast_over_the_batch) { tg_check_gradients(shared_broadcast, TL_MODE_TRAIN); }

/* One intermediate h read three times, twice through a reshape (a view that
 * shares h's gradient buffer): h3·h3ᵀ adds twice into the buffer h·w wrote. */
static tl_t through_views(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_t h = tl_tanh(g, var(g, "h", (int64_t[]){4, 6}, 2));
    tl_t h3 = tl_reshape(g, h, (int64_t[]){2, 2, 6}, 3);
    tl_t y1 = tl_batch_matmul(g, h3, h3, false, true); /* (2, 2, 2) */
    tl_t y2 = tl_batch_matmul(g, h, var(g, "w", (int64_t[]){6, 3}, 2), false, false); /* (4, 3) */
    tl_t parts[2] = {tl_reshape(g, y1, (int64_t[]){8}, 1), tl_reshape(g, y2, (int64_t[]){12}, 1)};
    return tl_mean(g, tl_tanh(g, tl_concat(g, parts, 2, 0)));
}

Test(ops_linalg, gradient_through_a_view_from_three_reads) { tg_check_gradients(through_views, TL_MODE_TRAIN); }

/* ---- 2-D operands: tl_matmul's bits ----------------------------------------- */

static bool use_batch;

static tl_t two_layers(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels, (void)target;
    tl_t w1 = var(g, "w1", (int64_t[]){5, 6}, 2), w2 = var(g, "w2", (int64_t[]){5, 6}, 2);
    tl_t (*mm)(tl_graph *, tl_t, tl_t, bool, bool) = use_batch ? tl_batch_matmul : tl_matmul;
    tl_t h = tl_tanh(g, mm(g, x, w1, false, true)); /* (4, 5) */
    tl_t y = mm(g, h, w2, false, false);             /* (4, 6) */
    tl_t z = mm(g, y, h, true, false);               /* (6, 5): h used twice */
    tl_t u = mm(g, z, w1, true, true);               /* (5, 5): w1 used twice */
    tl_t parts[2] = {tl_reshape(g, y, (int64_t[]){24}, 1), tl_reshape(g, u, (int64_t[]){25}, 1)};
    tl_t flat = tl_concat(g, parts, 2, 0);
    return tl_mean(g, tl_tanh(g, flat));
}

Test(ops_linalg, two_d_operands_give_matmul_bits)
{
    use_batch = false;
    tg_fixture m = tg_setup(two_layers, TL_MODE_TRAIN);
    use_batch = true;
    tg_fixture b = tg_setup(two_layers, TL_MODE_TRAIN);
    cr_assert_eq(m.g->n, b.g->n);
    tg_loss_at(&m);
    tg_loss_at(&b);
    cr_assert_eq(tl_program_backward(m.p, &m.e), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_program_backward(b.p, &b.e), TL_OK, "%s", tl_last_error());
    int bmm = 0;
    for (int i = 0; i < m.g->n; i++) {
        const tl_node *nm = &m.g->nodes[i], *nb = &b.g->nodes[i];
        cr_assert_eq(nm->size, nb->size);
        bmm += nb->op == TL_OP_BATCH_MATMUL;
        if (nm->dtype != TL_F32)
            continue;
        tk_assert_same_bits(nm->size, tl_exec_value(b.p, &b.e, i), tl_exec_value(m.p, &m.e, i), "node value");
        const float *gm = tl_exec_grad(m.p, &m.e, i), *gb = tl_exec_grad(b.p, &b.e, i);
        cr_assert_eq(gm == NULL, gb == NULL);
        if (gm != NULL)
            tk_assert_same_bits(nm->size, gb, gm, "node gradient");
    }
    cr_assert_eq(bmm, 4);
    tk_assert_same_bits(m.vars->total, b.e.param_grad, m.e.param_grad, "parameter gradients");
    tg_teardown(&m);
    tg_teardown(&b);
    tg_check_gradients(two_layers, TL_MODE_TRAIN);
}

/* ---- errors ----------------------------------------------------------------- */

/* tl_batch_matmul on inputs of the given shapes fails with msg; the graph
 * stays failed and a later valid op returns TL_T_INVALID. */
static void assert_fails(const int64_t *sa, int ra, tl_dtype ta, const int64_t *sb, int rb, bool adj_a, bool adj_b,
                         const char *msg)
{
    traced t = trace_new();
    tl_t a = tl_graph_input(t.g, ta, sa, ra), b = tl_graph_input(t.g, TL_F32, sb, rb);
    cr_assert_eq(tl_batch_matmul(t.g, a, b, adj_a, adj_b), TL_T_INVALID);
    cr_assert_eq(tl_graph_status(t.g), TL_EINVAL);
    cr_assert_str_eq(tl_graph_error(t.g), msg);
    tl_t ok = tl_batch_matmul(t.g, b, b, false, true);
    cr_assert_eq(ok, TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(t.g), msg, "the first error stays");
    trace_free(&t);
}

Test(ops_linalg, tracing_errors_name_the_shapes)
{
    assert_fails((int64_t[]){5}, 1, TL_F32, (int64_t[]){5, 3}, 2, false, false,
                 "batch_matmul: a has shape (5,), rank 1; the operands need rank >= 2");
    assert_fails((int64_t[]){2, 5}, 2, TL_F32, (int64_t[]){5}, 1, false, false,
                 "batch_matmul: b has shape (5,), rank 1; the operands need rank >= 2");
    assert_fails((int64_t[]){2, 3, 4}, 3, TL_F32, (int64_t[]){2, 5, 6}, 3, false, true,
                 "batch_matmul: inner dimensions differ: a (2, 3, 4) gives K = 4, b (2, 5, 6)^T gives K = 6");
    assert_fails((int64_t[]){2, 4, 3}, 3, TL_F32, (int64_t[]){2, 5, 6}, 3, true, false,
                 "batch_matmul: inner dimensions differ: a (2, 4, 3)^T gives K = 4, b (2, 5, 6) gives K = 5");
    assert_fails((int64_t[]){8, 3, 16, 32}, 4, TL_F32, (int64_t[]){4, 32, 16}, 3, false, false,
                 "batch_matmul: b (4, 32, 16) has batch dimensions (4,), which do not broadcast with a's (8, 3) of "
                 "(8, 3, 16, 32)");
    assert_fails((int64_t[]){2, 1, 3, 4}, 4, TL_F32, (int64_t[]){3, 2, 4, 5}, 4, false, false,
                 "batch_matmul: b (3, 2, 4, 5) has batch dimensions (3, 2), which do not broadcast with a's (2, 1) of "
                 "(2, 1, 3, 4)");
    assert_fails((int64_t[]){3, 4}, 2, TL_I32, (int64_t[]){4, 5}, 2, false, false, "batch_matmul: a must be float32");

    /* An invalid handle, in a graph with no error yet, and after one. */
    traced t = trace_new();
    tl_t b = tl_graph_input(t.g, TL_F32, (int64_t[]){4, 5}, 2);
    cr_assert_eq(tl_batch_matmul(t.g, b, TL_T_INVALID, false, false), TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(t.g), "batch_matmul: b is not a tensor of this graph");
    cr_assert_eq(tl_batch_matmul(t.g, TL_T_INVALID, b, false, false), TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(t.g), "batch_matmul: b is not a tensor of this graph");
    trace_free(&t);
}

/* Tracing: shapes, sticky errors, variables shared across graphs, and
 * initializers that depend only on the seed and the variable's name. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/program.h"

typedef struct {
    tl_vars *vars;
    tl_graph *g;
} traced;

static traced trace_begin(tl_mode mode)
{
    traced t;
    cr_assert_eq(tl_vars_create(&t.vars), TL_OK);
    cr_assert_eq(tl_graph_create(t.vars, mode, &t.g), TL_OK);
    return t;
}

static void trace_end(traced *t)
{
    tl_graph_destroy(t->g);
    tl_vars_destroy(t->vars);
}

static tl_t input2(tl_graph *g, int64_t a, int64_t b)
{
    int64_t shape[2] = {a, b};
    return tl_graph_input(g, TL_F32, shape, 2);
}

Test(graph, mlp_shapes)
{
    traced t = trace_begin(TL_MODE_TRAIN);
    tl_t x = input2(t.g, 128, 784);
    int64_t lshape[1] = {128};
    tl_t labels = tl_graph_input(t.g, TL_I32, lshape, 1);
    tl_t h = tl_dense(t.g, x, 256, TL_ACT_RELU, "dense");
    h = tl_dense(t.g, h, 256, TL_ACT_RELU, "dense_1");
    tl_t logits = tl_dense(t.g, h, 10, TL_ACT_NONE, "dense_2");
    tl_t loss = tl_mean(t.g, tl_softmax_xent(t.g, logits, labels));
    cr_assert_eq(tl_graph_status(t.g), TL_OK, "%s", tl_graph_error(t.g));
    int64_t d[TL_MAX_RANK];
    cr_assert_eq(tl_rank(t.g, logits, d), 2);
    cr_assert_eq(d[0], 128);
    cr_assert_eq(d[1], 10);
    cr_assert_eq(tl_rank(t.g, loss, d), 0);
    cr_assert_eq(t.vars->n, 6);
    cr_assert_eq(tl_vars_layout(t.vars), TL_OK);
    cr_assert_eq(t.vars->total, 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
    trace_end(&t);
}

Test(graph, errors_are_sticky_and_name_the_shapes)
{
    traced t = trace_begin(TL_MODE_TRAIN);
    tl_t a = input2(t.g, 4, 3), b = input2(t.g, 5, 2);
    tl_t c = tl_matmul(t.g, a, b, false, false);
    cr_assert_eq(c, TL_T_INVALID);
    cr_assert_eq(tl_graph_status(t.g), TL_EINVAL);
    cr_assert(strstr(tl_graph_error(t.g), "matmul: inner dimensions differ: (4, 3) x (5, 2)"), "%s",
              tl_graph_error(t.g));
    /* Everything after the first error is invalid and keeps the first message. */
    tl_t d = tl_relu(t.g, tl_matmul(t.g, a, b, false, true));
    cr_assert_eq(d, TL_T_INVALID);
    cr_assert(strstr(tl_graph_error(t.g), "(4, 3) x (5, 2)"));
    trace_end(&t);
}

Test(graph, shape_checks)
{
    static const struct {
        const char *frag;
        int which;
    } cases[] = {
        {"bias_add: bias", 0},   {"softmax_xent: logits must be", 1}, {"reshape: cannot reshape", 2},
        {"slice: [3, 5) is outside", 3}, {"concat: input 1 has shape", 4}, {"dropout: rate must be in [0, 1)", 5},
        {"pairwise_dot: x must be", 6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        traced t = trace_begin(TL_MODE_TRAIN);
        tl_t x = input2(t.g, 4, 3);
        int64_t s7[1] = {7}, s5[2] = {5, 2};
        switch (cases[i].which) {
        case 0: tl_bias_add(t.g, x, tl_variable(t.g, "b", s7, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0})); break;
        case 1: tl_softmax_xent(t.g, x, input2(t.g, 4, 1)); break;
        case 2: tl_reshape(t.g, x, s5, 2); break;
        case 3: tl_slice(t.g, x, 1, 3, 2); break;
        case 4: tl_concat(t.g, (tl_t[]){x, input2(t.g, 5, 3)}, 2, 1); break;
        case 5: tl_dropout(t.g, x, 1.0); break;
        case 6: tl_pairwise_dot(t.g, x); break;
        }
        cr_assert_eq(tl_graph_status(t.g), TL_EINVAL, "case %zu", i);
        cr_assert(strstr(tl_graph_error(t.g), cases[i].frag), "case %zu: %s", i, tl_graph_error(t.g));
        trace_end(&t);
    }
}

/* sigmoid_xent's two forms: float labels of logits' shape give the
 * per-element loss; int32 (batch,) labels with (batch, 1) logits give the
 * per-example loss (batch,). Anything else is an error naming both shapes. */
Test(graph, sigmoid_xent_forms_and_shapes)
{
    traced t = trace_begin(TL_MODE_TRAIN);
    int64_t d[TL_MAX_RANK], b4[1] = {4}, b5[1] = {5};
    tl_t z = input2(t.g, 4, 1), labels = tl_graph_input(t.g, TL_I32, b4, 1);
    tl_t per_example = tl_sigmoid_xent(t.g, z, labels);
    cr_assert_eq(tl_rank(t.g, per_example, d), 1);
    cr_assert_eq(d[0], 4);
    tl_t per_element = tl_sigmoid_xent(t.g, z, input2(t.g, 4, 1));
    cr_assert_eq(tl_rank(t.g, per_element, d), 2);
    cr_assert(d[0] == 4 && d[1] == 1);
    cr_assert_eq(tl_rank(t.g, tl_mean(t.g, per_example), d), 0);
    cr_assert_eq(tl_graph_status(t.g), TL_OK, "%s", tl_graph_error(t.g));
    trace_end(&t);

    static const struct {
        int which;
        const char *frag;
    } cases[] = {
        {0, "sigmoid_xent: with int32 labels, logits must be (batch, 1) and labels (batch,); got (4, 3) and (4,)"},
        {1, "got (4, 1) and (5,)"},
        {2, "got (4, 1) and (4, 1)"},
        {3, "sigmoid_xent: labels are not a tensor of this graph"},
        {4, "sigmoid_xent: logits (4, 1) and labels (4, 2) must have the same shape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t = trace_begin(TL_MODE_TRAIN);
        tl_t x = input2(t.g, 4, 1);
        int64_t s41[2] = {4, 1};
        switch (cases[i].which) {
        case 0: tl_sigmoid_xent(t.g, input2(t.g, 4, 3), tl_graph_input(t.g, TL_I32, b4, 1)); break;
        case 1: tl_sigmoid_xent(t.g, x, tl_graph_input(t.g, TL_I32, b5, 1)); break;
        case 2: tl_sigmoid_xent(t.g, x, tl_graph_input(t.g, TL_I32, s41, 2)); break;
        case 3: tl_sigmoid_xent(t.g, x, TL_T_INVALID); break;
        case 4: tl_sigmoid_xent(t.g, x, input2(t.g, 4, 2)); break;
        }
        cr_assert_eq(tl_graph_status(t.g), TL_EINVAL, "case %zu", i);
        cr_assert(strstr(tl_graph_error(t.g), cases[i].frag), "case %zu: %s", i, tl_graph_error(t.g));
        trace_end(&t);
    }
}

Test(graph, concat_slice_reshape_pairwise_shapes)
{
    traced t = trace_begin(TL_MODE_TRAIN);
    tl_t a = input2(t.g, 4, 3), b = input2(t.g, 4, 5);
    int64_t d[TL_MAX_RANK];
    tl_t c = tl_concat(t.g, (tl_t[]){a, b}, 2, -1);
    cr_assert_eq(tl_rank(t.g, c, d), 2);
    cr_assert_eq(d[1], 8);
    tl_t s = tl_slice(t.g, c, 1, 2, 4);
    cr_assert_eq(tl_rank(t.g, s, d), 2);
    cr_assert_eq(d[1], 4);
    int64_t r3[3] = {4, 8, 2};
    tl_t r = tl_reshape(t.g, tl_concat(t.g, (tl_t[]){c, c}, 2, 1), r3, 3);
    tl_t p = tl_pairwise_dot(t.g, r);
    cr_assert_eq(tl_rank(t.g, p, d), 2);
    cr_assert_eq(d[0], 4);
    cr_assert_eq(d[1], 28);
    cr_assert_eq(tl_graph_status(t.g), TL_OK, "%s", tl_graph_error(t.g));
    trace_end(&t);
}

Test(graph, dropout_is_identity_outside_training)
{
    traced t = trace_begin(TL_MODE_EVAL);
    tl_t x = input2(t.g, 4, 3);
    cr_assert_eq(tl_dropout(t.g, x, 0.5), x);
    trace_end(&t);
    t = trace_begin(TL_MODE_TRAIN);
    x = input2(t.g, 4, 3);
    cr_assert_neq(tl_dropout(t.g, x, 0.5), x);
    trace_end(&t);
}

Test(graph, variables_are_shared_across_graphs_by_name)
{
    tl_vars *vars;
    tl_graph *train, *eval;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &train), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_EVAL, &eval), TL_OK);
    tl_dense(train, input2(train, 128, 20), 5, TL_ACT_NONE, "d");
    tl_dense(eval, input2(eval, 64, 20), 5, TL_ACT_NONE, "d");
    cr_assert_eq(vars->n, 2, "the eval graph reuses d/kernel and d/bias");
    /* Same name, other shape: an error naming the variable. */
    tl_dense(eval, input2(eval, 64, 21), 5, TL_ACT_NONE, "d");
    cr_assert_eq(tl_graph_status(eval), TL_EINVAL);
    cr_assert(strstr(tl_graph_error(eval), "variable d/kernel already exists with another shape"), "%s",
              tl_graph_error(eval));
    tl_graph_destroy(train);
    tl_graph_destroy(eval);
    tl_vars_destroy(vars);
}

/* Initial values of a model whose variables are created in the given order. */
static float *init_values(const char *const *names, int n, uint64_t seed, tl_vars **vout)
{
    tl_vars *vars;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    int64_t shape[2] = {200, 100};
    for (int i = 0; i < n; i++) {
        int idx;
        tl_initializer init = {TL_INIT_GLOROT_UNIFORM, 0, 0};
        if (strstr(names[i], "he"))
            init = (tl_initializer){TL_INIT_HE_NORMAL, 0, 0};
        if (strstr(names[i], "tn"))
            init = (tl_initializer){TL_INIT_TRUNCATED_NORMAL, 1.0, 0.5};
        cr_assert_eq(tl_vars_add(vars, names[i], shape, 2, init, &idx), TL_OK);
    }
    cr_assert_eq(tl_vars_layout(vars), TL_OK);
    float *p = malloc((size_t)vars->total * sizeof *p);
    tl_vars_initialize(vars, seed, p);
    *vout = vars;
    return p;
}

Test(graph, initializers_depend_on_seed_and_name_not_order)
{
    const char *ab[3] = {"glorot", "he", "tn"}, *ba[3] = {"tn", "he", "glorot"};
    tl_vars *v1, *v2, *v3;
    float *p1 = init_values(ab, 3, 7, &v1), *p2 = init_values(ba, 3, 7, &v2), *p3 = init_values(ab, 3, 8, &v3);
    cr_assert_eq(memcmp(p1, p2, (size_t)v1->total * sizeof *p1), 0, "creation order must not matter");
    cr_assert_neq(memcmp(p1, p3, (size_t)v1->total * sizeof *p1), 0, "the seed must matter");
    /* Layout is by name: "glorot" < "he" < "tn". */
    const int64_t n = 200 * 100;
    double limit = sqrt(6.0 / 300.0), s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        cr_assert(fabsf(p1[i]) <= limit);
        s2 += (double)p1[i] * p1[i];
    }
    cr_assert(fabs(s2 / n - limit * limit / 3) < 0.05 * limit * limit / 3, "glorot variance %g", s2 / n);
    s = s2 = 0;
    for (int64_t i = n; i < 2 * n; i++) {
        s += p1[i];
        s2 += (double)p1[i] * p1[i];
    }
    cr_assert(fabs(sqrt(s2 / n) - sqrt(2.0 / 200)) < 0.03 * sqrt(2.0 / 200), "he stddev %g", sqrt(s2 / n));
    for (int64_t i = 2 * n; i < 3 * n; i++)
        cr_assert(p1[i] >= 1.0f - 1.0f - 1e-6f && p1[i] <= 2.0f + 1e-6f, "truncated at 2 stddev: %g", p1[i]);
    free(p1);
    free(p2);
    free(p3);
    tl_vars_destroy(v1);
    tl_vars_destroy(v2);
    tl_vars_destroy(v3);
}

Test(graph, layout_is_in_name_order)
{
    tl_vars *vars;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    int64_t shape[1] = {3};
    for (int i = 0; i < 37; i++) {
        char name[32];
        snprintf(name, sizeof name, "v%02d", (i * 17) % 37); /* every name once, out of order */
        int idx;
        cr_assert_eq(tl_vars_add(vars, name, shape, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0}, &idx), TL_OK);
    }
    cr_assert_eq(tl_vars_layout(vars), TL_OK);
    for (int k = 0; k < 37; k++) {
        const tl_var *v = &vars->v[vars->by_name[k]];
        char want[32];
        snprintf(want, sizeof want, "v%02d", k);
        cr_assert_str_eq(v->name, want);
        cr_assert_eq(v->offset, 3 * k, "offsets follow name order");
    }
    tl_vars_destroy(vars);
}

/* An op whose shape is its input's must keep it when adding the op grows the
 * node array (64, 128, 256 nodes): the sanitizer run catches a read of the
 * old array, and the shapes here a wrong copy. */
Test(graph, shapes_survive_the_node_array_growing)
{
    traced t = trace_begin(TL_MODE_TRAIN);
    int64_t bshape[1] = {7};
    tl_t bias = tl_graph_input(t.g, TL_F32, bshape, 1);
    tl_t x = input2(t.g, 5, 7);
    for (int i = 0; i < 300; i++) {
        x = tl_bias_add(t.g, x, bias); /* shape from x's node */
        cr_assert_eq(tl_graph_status(t.g), TL_OK, "%s", tl_graph_error(t.g));
        const tl_node *nd = tl_graph_node(t.g, x);
        cr_assert(nd->rank == 2 && nd->shape[0] == 5 && nd->shape[1] == 7, "node %d: rank %d [%lld, %lld]", (int)x,
                  nd->rank, (long long)nd->shape[0], (long long)nd->shape[1]);
    }
    trace_end(&t);
}

/* A state variable: in the slab and the store like any variable, but the
 * loss's gradient never reaches it and no op through it needs one. */
Test(graph, state_variable_takes_no_gradient)
{
    tl_vars *vars;
    tl_graph *g;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
    int64_t s[2] = {2, 3};
    tl_t x = tl_variable(g, "w", s, 2, (tl_initializer){TL_INIT_CONSTANT, 1, 0});
    tl_t m = tl_state_variable(g, "moving", s, 2, (tl_initializer){TL_INIT_CONSTANT, 2, 0});
    tl_t y = tl_concat(g, (tl_t[]){x, m}, 2, 0);
    tl_t loss = tl_sum(g, y);
    cr_assert_eq(tl_graph_status(g), TL_OK, "%s", tl_graph_error(g));
    cr_assert(vars->v[g->nodes[x].var].trainable);
    cr_assert_not(vars->v[g->nodes[m].var].trainable);
    cr_assert_eq(tl_vars_layout(vars), TL_OK);
    tl_program *p;
    cr_assert_eq(tl_program_compile(g, loss, true, &p), TL_OK, "%s", tl_last_error());
    cr_assert_neq(p->grad_off[x], TL_OFF_NONE);
    cr_assert_eq(p->grad_off[m], TL_OFF_NONE);
    /* Its param_grad entries are zeroed each step: nothing else writes them. */
    bool zeroed = false;
    for (int k = 0; k < p->nzero_vars; k++)
        zeroed |= p->zero_vars[k] == g->nodes[m].var;
    cr_assert(zeroed);
    tl_program_destroy(p);
    /* A name keeps its kind in every graph of the model. */
    tl_graph *g2;
    cr_assert_eq(tl_graph_create(vars, TL_MODE_EVAL, &g2), TL_OK);
    cr_assert_eq(tl_variable(g2, "moving", s, 2, (tl_initializer){TL_INIT_ZEROS, 0, 0}), TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(g2), "variable moving exists as a state variable; it cannot also be a trainable one");
    tl_graph_destroy(g2);
    tl_graph_destroy(g);
    tl_vars_destroy(vars);
}

/* A scalar variable needs no shape array (TL_MAX_RANK dims of nothing). */
Test(graph, scalar_variable_without_a_shape_array)
{
    tl_vars *vars;
    tl_graph *g;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
    tl_t s = tl_variable(g, "scale", NULL, 0, (tl_initializer){TL_INIT_CONSTANT, 2, 0});
    cr_assert_eq(tl_variable(g, "scale", NULL, 0, (tl_initializer){TL_INIT_CONSTANT, 2, 0}), s);
    cr_assert_eq(tl_graph_status(g), TL_OK, "%s", tl_graph_error(g));
    cr_assert_eq(tl_rank(g, s, NULL), 0);
    tl_graph_destroy(g);
    tl_vars_destroy(vars);
}

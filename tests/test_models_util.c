/* test_models_util.c — the built-in models' test fixture of test_models_util.h. Holds no tests. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "test_models_util.h"

traced tm_trace_begin(tl_mode mode)
{
    traced t;
    memset(&t, 0, sizeof t);
    cr_assert_eq(tl_vars_create(&t.vars), TL_OK);
    cr_assert_eq(tl_graph_create(t.vars, mode, &t.g), TL_OK);
    t.args.mode = mode;
    t.spec.loss = t.spec.logits = t.spec.predictions = TL_T_INVALID;
    return t;
}

void tm_untrace(traced *t)
{
    tl_graph_destroy(t->g);
    tl_vars_destroy(t->vars);
}

const tl_var *tm_find_var(const tl_vars *vars, const char *name)
{
    for (int i = 0; i < vars->n; i++)
        if (strcmp(vars->v[i].name, name) == 0)
            return &vars->v[i];
    return NULL;
}

void tm_assert_var(const tl_vars *vars, const char *name, int64_t d0, int64_t d1)
{
    const tl_var *v = tm_find_var(vars, name);
    cr_assert_not_null(v, "no variable %s", name);
    cr_assert_eq(v->rank, d1 ? 2 : 1, "%s", name);
    cr_assert_eq(v->shape[0], d0, "%s: dim 0 is %lld", name, (long long)v->shape[0]);
    if (d1)
        cr_assert_eq(v->shape[1], d1, "%s: dim 1 is %lld", name, (long long)v->shape[1]);
}

tl_t tm_leaf(const tl_graph *g, int f)
{
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == TL_OP_EMBEDDING && g->nodes[i].iattr[0] == f)
            return i;
    return TL_T_INVALID;
}

float *tm_compile(traced *t, tl_program **p)
{
    cr_assert_eq(tl_vars_layout(t->vars), TL_OK);
    cr_assert_eq(tl_program_compile(t->g, t->spec.loss, true, p), TL_OK, "%s", tl_last_error());
    float *params = calloc((size_t)t->vars->total, sizeof(float));
    tl_vars_initialize(t->vars, 11, params);
    return params;
}

void tm_exec_alloc(tl_exec *e, const tl_program *p, const tl_vars *vars, float *params)
{
    memset(e, 0, sizeof *e); /* no team, no SPMD core: what is not set here is zero */
    e->act = calloc((size_t)p->act_floats + 1, sizeof(float));
    e->grad = calloc((size_t)p->grad_floats + 1, sizeof(float));
    e->mask = calloc((size_t)p->mask_bytes + 1, 1);
    e->scratch = calloc((size_t)p->scratch_floats + 1, sizeof(float));
    e->param_grad = calloc((size_t)vars->total, sizeof(float));
    e->params = params;
    e->loss_scale = 1.0f;
}

void tm_exec_free(tl_exec *e)
{
    free(e->act);
    free(e->grad);
    free(e->mask);
    free(e->scratch);
    free(e->param_grad);
}

double tm_loss(tl_program *p, tl_exec *e, tl_t loss)
{
    cr_assert_eq(tl_program_forward(p, e), TL_OK, "%s", tl_last_error());
    return *tl_exec_value(p, e, loss);
}

const float *tm_param(const tl_vars *vars, const float *params, const char *name)
{
    const tl_var *v = tm_find_var(vars, name);
    cr_assert_not_null(v, "no variable %s", name);
    return params + v->offset;
}

/* test_mt_spmd_util.c — see test_mt_spmd_util.h. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/program.h"
#include "test_mt_spmd_util.h"

static void feed(const tl_program *p, tl_exec *e, const tl_graph *g, const spmdt_feed *f)
{
    const tl_node *nd = &g->nodes[f->t];
    memcpy(tl_exec_value(p, e, f->t), f->data, (size_t)(nd->size * tl_dtype_slots(nd->dtype)) * sizeof(float));
}

float spmdt_run_whole(const tl_graph *g, tl_t loss, const float *params, const spmdt_feed *feeds, int nfeeds,
                      float *grad)
{
    tl_program *p;
    cr_assert_eq(tl_program_compile_fused(g, loss, true, NULL, 0, &p), TL_OK, "%s", tl_last_error());
    int64_t total = g->vars->total;
    size_t floats = (size_t)(p->act_floats + p->grad_floats + p->scratch_floats + total + 4);
    float *buf = calloc(floats, sizeof(float));
    uint8_t *mask = calloc((size_t)p->mask_bytes + 1, 1);
    cr_assert(buf != NULL && mask != NULL);
    tl_exec e = {.act = buf, .grad = buf + p->act_floats, .scratch = buf + p->act_floats + p->grad_floats,
                 .param_grad = buf + p->act_floats + p->grad_floats + p->scratch_floats, .mask = mask,
                 .params = params, .loss_scale = 1.0f, .state_scale = 1.0f};
    for (int k = 0; k < nfeeds; k++)
        feed(p, &e, g, &feeds[k]);
    cr_assert_eq(tl_program_forward(p, &e), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_program_backward(p, &e), TL_OK, "%s", tl_last_error());
    float l = *tl_exec_value(p, &e, loss);
    memcpy(grad, e.param_grad, (size_t)total * sizeof(float));
    free(buf), free(mask);
    tl_program_destroy(p);
    return l;
}

float spmdt_step(tl_spmd_run *r, tl_t loss, const spmdt_feed *feeds, int nfeeds, float *grad, const char *what)
{
    for (int k = 0; k < nfeeds; k++)
        tl_spmd_run_feed(r, feeds[k].t, feeds[k].data);
    cr_assert_eq(tl_spmd_run_step(r), TL_OK, "%s: %s", what, tl_last_error());
    float l = tl_spmd_run_loss(r);
    for (int q = 1; q < tl_spmd_run_cores(r); q++) {
        const tl_partition *pt = tl_spmd_run_partition(r, q);
        float lq = *tl_exec_value(tl_spmd_run_program(r, q), tl_spmd_run_exec(r, q), pt->map[loss]);
        cr_assert(memcmp(&lq, &l, sizeof l) == 0, "%s: core %d's loss %.9g, core 0's %.9g", what, q, (double)lq,
                  (double)l);
    }
    tl_spmd_run_grad(r, grad);
    return l;
}

void spmdt_assert_grads(const tl_vars *vars, const float *want, const float *got, double rel, double abs,
                        const char *what)
{
    for (int v = 0; v < vars->n; v++) {
        const tl_var *var = &vars->v[v];
        double top = 0, err = 0;
        for (int64_t k = 0; k < var->size; k++) {
            top = fmax(top, fabs(want[var->offset + k]));
            err = fmax(err, fabs((double)got[var->offset + k] - want[var->offset + k]));
        }
        cr_assert(top > 0, "%s has a gradient", var->name);
        cr_assert(err <= rel * top + abs, "%s: %s's gradient is off by %.3g of its %.3g", what, var->name, err, top);
    }
}

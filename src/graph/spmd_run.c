/* spmd_run.c — a partitioned replica's cores on threads of their own
 * (spmd_run.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../base/thread.h"
#include "spatial.h"
#include "spmd_run.h"

typedef struct run_core {
    struct tl_spmd_run *run;
    tl_partition pt;
    tl_program *p;
    tl_exec e;
    tl_spmd sp;
    float *bufs;
    uint8_t *mask;
    tl_thread th;
    tl_status st;
    char err[512];
} run_core;

struct tl_spmd_run {
    int n;
    int64_t grid[4];
    tl_t input;
    const int8_t *var_split; /* tensor parallelism (the caller's); NULL: spatial */
    const tl_graph *src;
    tl_t loss;
    bool backward, pin, barrier_ready;
    tl_barrier barrier;
    run_core *cores;
    const tl_program **progs;
    const tl_exec **peers;
};

static tl_status core_init(tl_spmd_run *r, int q, const float *params)
{
    run_core *c = &r->cores[q];
    c->run = r;
    tl_status st = r->var_split != NULL ? tl_partition_tensor(r->src, r->var_split, r->n, q, &c->pt)
                                        : tl_partition_graph(r->src, r->input, r->grid, q, &c->pt);
    if (st != TL_OK)
        return st;
    tl_t loss = r->loss >= 0 ? c->pt.map[r->loss] : TL_T_INVALID;
    if ((st = tl_program_compile_fused(c->pt.g, loss, r->backward, NULL, 0, &c->p)) != TL_OK)
        return st;
    const tl_program *p = c->p;
    int64_t floats = p->act_floats + p->grad_floats + p->scratch_floats + r->src->vars->total + 16;
    c->bufs = tl_calloc((size_t)floats, sizeof(float));
    c->mask = tl_calloc((size_t)p->mask_bytes + 64, 1);
    if (c->bufs == NULL || c->mask == NULL)
        return tl_error_oom();
    c->e = (tl_exec){.act = c->bufs, .grad = c->bufs + p->act_floats, .mask = c->mask,
                     .scratch = c->bufs + p->act_floats + p->grad_floats, .params = params,
                     .param_grad = c->bufs + p->act_floats + p->grad_floats + p->scratch_floats,
                     .loss_scale = 1.0f, .state_scale = 1.0f, .spmd = &c->sp};
    c->sp = (tl_spmd){r->n, q, &r->barrier, r->progs, r->peers};
    r->progs[q] = c->p;
    r->peers[q] = &c->e;
    return TL_OK;
}

static tl_status create(const tl_graph *g, tl_t input, const int8_t *var_split, tl_t loss, bool backward,
                        const int64_t grid[4], const float *params, tl_spmd_run **out)
{
    *out = NULL;
    int64_t n = grid[0] * grid[1] * grid[2] * grid[3];
    if (grid[0] < 1 || grid[1] < 1 || grid[2] < 1 || grid[3] < 1 || n > TL_SPMD_MAX_CORES)
        return tl_error(TL_EINVAL, "spmd_run: grid [%lld, %lld, %lld, %lld] must have every entry >= 1 and 1 to %d "
                                   "cores in all", (long long)grid[0], (long long)grid[1], (long long)grid[2],
                        (long long)grid[3], TL_SPMD_MAX_CORES);
    tl_spmd_run *r = tl_calloc(1, sizeof *r);
    if (r == NULL)
        return tl_error_oom();
    r->n = (int)n;
    memcpy(r->grid, grid, sizeof r->grid);
    r->src = g;
    r->input = input;
    r->var_split = var_split;
    r->loss = backward ? loss : (loss >= 0 ? loss : TL_T_INVALID);
    r->backward = backward;
    r->cores = tl_calloc((size_t)n, sizeof *r->cores);
    r->progs = tl_calloc((size_t)n, sizeof *r->progs);
    r->peers = tl_calloc((size_t)n, sizeof *r->peers);
    /* Cores that each have a CPU wait at the barrier spinning a while (as
     * the estimator's workers), not asleep: a step meets there often. */
    int64_t spin = r->n <= tl_available_cpus() ? 20000 : 0;
    tl_status st = r->cores == NULL || r->progs == NULL || r->peers == NULL ? tl_error_oom()
                                                                             : tl_barrier_init(&r->barrier, r->n, spin);
    r->barrier_ready = st == TL_OK;
    for (int q = 0; q < r->n && st == TL_OK; q++)
        st = core_init(r, q, params);
    if (st != TL_OK) {
        tl_spmd_run_destroy(r);
        return st;
    }
    *out = r;
    return TL_OK;
}

tl_status tl_spmd_run_create(const tl_graph *g, tl_t input, tl_t loss, bool backward, const int64_t grid[4],
                             const float *params, tl_spmd_run **out)
{
    return create(g, input, NULL, loss, backward, grid, params, out);
}

tl_status tl_spmd_run_create_tensor(const tl_graph *g, const int8_t *var_split, int ncores, tl_t loss, bool backward,
                                    const float *params, tl_spmd_run **out)
{
    const int64_t grid[4] = {1, ncores, 1, 1};
    return create(g, TL_T_INVALID, var_split, loss, backward, grid, params, out);
}

void tl_spmd_run_destroy(tl_spmd_run *r)
{
    if (r == NULL)
        return;
    for (int q = 0; r->cores != NULL && q < r->n; q++) {
        run_core *c = &r->cores[q];
        tl_free(c->bufs);
        tl_free(c->mask);
        tl_program_destroy(c->p);
        tl_partition_free(&c->pt);
    }
    if (r->barrier_ready)
        tl_barrier_close(&r->barrier);
    tl_free(r->cores);
    tl_free(r->progs);
    tl_free(r->peers);
    tl_free(r);
}

int tl_spmd_run_cores(const tl_spmd_run *r)
{
    return r->n;
}

void tl_spmd_run_pin(tl_spmd_run *r, bool pin)
{
    r->pin = pin;
}

const tl_partition *tl_spmd_run_partition(const tl_spmd_run *r, int q)
{
    return &r->cores[q].pt;
}

const tl_program *tl_spmd_run_program(const tl_spmd_run *r, int q)
{
    return r->cores[q].p;
}

const tl_exec *tl_spmd_run_exec(const tl_spmd_run *r, int q)
{
    return &r->cores[q].e;
}

void tl_spmd_run_feed(tl_spmd_run *r, tl_t t, const void *whole)
{
    const tl_node *nd = &r->src->nodes[t];
    for (int q = 0; q < r->n; q++) {
        run_core *c = &r->cores[q];
        float *dst = tl_exec_value(c->p, &c->e, c->pt.map[t]);
        if (c->pt.tiled[t]) {
            int64_t s4[4] = {nd->shape[0], nd->shape[1], nd->shape[2], nd->rank == 4 ? nd->shape[3] : 1};
            tl_box all = {{0, 0, 0, 0}, {s4[0], s4[1], s4[2], s4[3]}}, tile;
            tl_status st = tl_spatial_tile(s4, r->grid, q, &tile);
            TL_ASSERT(st == TL_OK); /* the partitioner tiled it by this grid */
            (void)st;
            const float *src = whole;
            tl_spatial_gather(&tile, 1, &all, &src, dst);
        } else {
            memcpy(dst, whole, (size_t)(nd->size * tl_dtype_slots(nd->dtype)) * sizeof(float));
        }
    }
}

static void *core_main(void *arg)
{
    run_core *c = arg;
    if (c->run->pin) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (cpus > 0 && tl_thread_pin_self((int)(c->sp.core % cpus)) != TL_OK)
            tl_clear_error(); /* unpinned: slower, the same bits */
    }
    c->st = tl_program_forward(c->p, &c->e);
    if (c->st == TL_OK && c->run->backward)
        c->st = tl_program_backward(c->p, &c->e);
    if (c->st != TL_OK) {
        snprintf(c->err, sizeof c->err, "core %d: %s", c->sp.core, tl_last_error());
        tl_barrier_break(&c->run->barrier); /* the other cores stop waiting for this one */
    }
    return NULL;
}

tl_status tl_spmd_run_step(tl_spmd_run *r)
{
    int started = 0;
    tl_status st = TL_OK;
    for (int q = 0; q < r->n && st == TL_OK; q++) {
        r->cores[q].st = TL_OK;
        st = tl_thread_start(&r->cores[q].th, core_main, &r->cores[q]);
        started += st == TL_OK;
    }
    if (st != TL_OK)
        tl_barrier_break(&r->barrier);
    for (int q = 0; q < started; q++)
        tl_thread_join(&r->cores[q].th, NULL);
    if (st != TL_OK)
        return st;
    /* The root cause: the first core that failed other than at the barrier
     * another core broke, else the first that failed. */
    int first = -1;
    for (int q = 0; q < r->n && first < 0; q++)
        if (r->cores[q].st != TL_OK && r->cores[q].st != TL_ERUNTIME)
            first = q;
    for (int q = 0; q < r->n && first < 0; q++)
        if (r->cores[q].st != TL_OK)
            first = q;
    return first < 0 ? TL_OK : tl_error(r->cores[first].st, "%s", r->cores[first].err);
}

float tl_spmd_run_loss(const tl_spmd_run *r)
{
    const run_core *c = &r->cores[0];
    return *tl_exec_value(c->p, &c->e, c->pt.map[r->loss]);
}

void tl_spmd_run_grad(const tl_spmd_run *r, float *out)
{
    const float *grads[TL_SPMD_MAX_CORES];
    for (int q = 0; q < r->n; q++)
        grads[q] = r->cores[q].e.param_grad;
    memcpy(out, grads[0], (size_t)r->src->vars->total * sizeof *out);
    tl_partition_add_partials(&r->cores[0].pt, r->src->vars, r->n, grads, out);
}

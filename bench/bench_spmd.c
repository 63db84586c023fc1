/* bench_spmd.c — why spatial partitioning exists (issue 16): the built-in
 * cnn (filters 16, 32, 64) on large synthetic images, one replica's
 * training step whole on one core (C = 1) and partitioned over C = 2 and 4
 * cores by rows (grid [1, C, 1, 1], src/graph/partition.h), each core a
 * thread pinned to CPU core mod the machine's CPUs (src/graph/spmd_run.h).
 *
 * Per C it prints one JSON line: each core's activation and gradient
 * buffers (the compiled program's slabs, MiB: the peak, since a program
 * plans every buffer at compile time), their ratio to C = 1's, and the step
 * time (median and min-max ms over the rounds, each round a few steps, the
 * C values alternating within a round), with its ratio to C = 1's. On a
 * machine of 2 CPUs, C = 4 runs two threads a CPU. The targets of the issue
 * are in the line: activations at C = 4 <= 0.3x C = 1's, the step at C = 2
 * <= 0.6x C = 1's.
 *
 * bench_spmd [SIZE [BATCH [ROUNDS]]]: images SIZE x SIZE (default 256),
 * BATCH per replica (default 4), ROUNDS (default 5).
 *
 * Then tensor parallelism: the built-in Transformer (d_model 256, 8 heads,
 * d_ff 1024, 2 layers, 16 sequences of 64 tokens) with Megatron's layout over
 * 2 cores (tl_partition_tensor) against its whole step on one ("spmd_tp"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/thread.h"
#include "graph/spmd_run.h"
#include "kernels/kernels.h"
#include "tpuloop/models.h"
#include "util/bench_util.h"

enum { NC = 3, STEPS = 2 };
static const int cores[NC] = {1, 2, 4};

typedef struct net {
    tl_vars *vars;
    tl_graph *g;
    tl_t x, labels, loss;
    float *params, *xv;
    int32_t *yv;
} net;

static void die(const char *what)
{
    fprintf(stderr, "bench_spmd: %s: %s\n", what, tl_last_error());
    exit(1);
}

/* model_fn fn (named what) with params on inputs x (xshape, xrank; its
 * first dimension the batch) holding ((i * 7919) % mod) * scale and labels
 * b % 10, its variables initialised. */
static void build_net(net *n, tl_model_fn fn, const char *what, const char *params, const int64_t *xshape,
                      int xrank, int64_t mod, float scale)
{
    int64_t batch = xshape[0], count = 1;
    for (int d = 0; d < xrank; d++)
        count *= xshape[d];
    memset(n, 0, sizeof *n);
    if (tl_vars_create(&n->vars) != TL_OK || tl_graph_create(n->vars, TL_MODE_TRAIN, &n->g) != TL_OK)
        die("graph");
    n->x = tl_graph_input(n->g, TL_F32, xshape, xrank);
    n->labels = tl_graph_input(n->g, TL_I32, (int64_t[]){batch}, 1);
    tl_model_args a = {TL_MODE_TRAIN, n->x, n->labels, batch, params, 0};
    tl_model_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.loss = spec.logits = spec.predictions = TL_T_INVALID;
    if (fn(n->g, &a, &spec, NULL) != TL_OK || tl_vars_layout(n->vars) != TL_OK) {
        fprintf(stderr, "bench_spmd: %s: %s\n", what, tl_graph_error(n->g));
        exit(1);
    }
    n->loss = spec.loss;
    n->params = calloc((size_t)n->vars->total, sizeof(float));
    n->xv = malloc((size_t)count * sizeof(float));
    n->yv = malloc((size_t)batch * sizeof(int32_t));
    if (n->params == NULL || n->xv == NULL || n->yv == NULL)
        die("out of memory");
    tl_vars_initialize(n->vars, 42, n->params);
    for (int64_t i = 0; i < count; i++)
        n->xv[i] = (float)((i * 7919) % mod) * scale;
    for (int64_t b = 0; b < batch; b++)
        n->yv[b] = (int32_t)(b % 10);
}

/* The cnn on batch images size x size. */
static void build(net *n, int64_t size, int64_t batch)
{
    build_net(n, tl_model_cnn, "cnn", "{\"filters\": [16, 32, 64]}", (int64_t[]){batch, size, size, 1}, 4, 255,
              1.0f / 255.0f);
}

/* The built-in Transformer (d_model 256, 8 heads, d_ff 1024, 2 layers) on
 * batch sequences of seq tokens from 64. */
static void build_transformer(net *n, int64_t seq, int64_t batch)
{
    build_net(n, tl_model_transformer, "transformer",
              "{\"d_model\": 256, \"num_heads\": 8, \"num_layers\": 2, \"d_ff\": 1024, \"vocab_size\": 64, "
              "\"num_classes\": 10}",
              (int64_t[]){batch, seq}, 2, 64, 1.0f);
}

/* Megatron's layout of the Transformer's variables (partition.h). */
static int8_t *megatron(const tl_vars *vars)
{
    static const struct {
        const char *suffix;
        int dim;
    } rules[] = {{"query/kernel", 1}, {"query/bias", 0},  {"key/kernel", 1},      {"key/bias", 0},
                 {"value/kernel", 1}, {"value/bias", 0},  {"output/kernel", 0},   {"ffn/dense/kernel", 1},
                 {"ffn/dense/bias", 0}, {"ffn/dense_1/kernel", 0}};
    int8_t *split = malloc((size_t)vars->n);
    if (split == NULL)
        die("out of memory");
    for (int v = 0; v < vars->n; v++) {
        size_t a = strlen(vars->v[v].name);
        split[v] = -1;
        for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
            size_t b = strlen(rules[r].suffix);
            if (a >= b && strcmp(vars->v[v].name + a - b, rules[r].suffix) == 0)
                split[v] = (int8_t)rules[r].dim;
        }
    }
    return split;
}

static void net_free(net *n)
{
    free(n->params), free(n->xv), free(n->yv);
    tl_graph_destroy(n->g);
    tl_vars_destroy(n->vars);
}

/* C = 1: the whole program on one thread of its own, pinned to CPU 0, as
 * a device worker runs it. */
typedef struct whole {
    tl_program *p;
    tl_exec e;
    float *bufs;
    uint8_t *mask;
} whole;

static void whole_init(whole *w, const net *n)
{
    if (tl_program_compile_fused(n->g, n->loss, true, NULL, 0, &w->p) != TL_OK)
        die("compile");
    const tl_program *p = w->p;
    w->bufs = calloc((size_t)(p->act_floats + p->grad_floats + p->scratch_floats + n->vars->total), sizeof(float));
    w->mask = calloc((size_t)p->mask_bytes + 1, 1);
    if (w->bufs == NULL || w->mask == NULL)
        die("out of memory");
    w->e = (tl_exec){.act = w->bufs, .grad = w->bufs + p->act_floats, .mask = w->mask,
                     .scratch = w->bufs + p->act_floats + p->grad_floats, .params = n->params,
                     .param_grad = w->bufs + p->act_floats + p->grad_floats + p->scratch_floats,
                     .loss_scale = 1.0f, .state_scale = 1.0f};
    memcpy(tl_exec_value(p, &w->e, n->x), n->xv, (size_t)n->g->nodes[n->x].size * sizeof(float));
    memcpy(tl_exec_value(p, &w->e, n->labels), n->yv, (size_t)n->g->nodes[n->labels].size * sizeof(int32_t));
}

static void *whole_step(void *arg)
{
    whole *w = arg;
    if (tl_thread_pin_self(0) != TL_OK)
        tl_clear_error();
    if (tl_program_forward(w->p, &w->e) != TL_OK || tl_program_backward(w->p, &w->e) != TL_OK)
        die("step");
    return NULL;
}

static double mib(int64_t floats)
{
    return (double)floats * sizeof(float) / (1024.0 * 1024.0);
}

/* Times rounds of STEPS steps of the whole program (k = 0) and of runs[k]
 * (k = 1 .. nc-1), the order rotating each round: ms[k][r] in ms a step. */
static void measure(whole *w, tl_spmd_run *const *runs, int nc, int rounds, double **ms)
{
    for (int r = -1; r < rounds; r++) /* round -1 warms up: plans, page faults */
        for (int j = 0; j < nc; j++) {
            int k = (r + 1 + j) % nc;
            double t0 = bench_now();
            for (int s = 0; s < STEPS; s++) {
                if (k == 0) {
                    tl_thread th;
                    if (tl_thread_start(&th, whole_step, w) != TL_OK)
                        die("thread");
                    tl_thread_join(&th, NULL);
                } else if (tl_spmd_run_step(runs[k]) != TL_OK) {
                    die("step");
                }
            }
            if (r >= 0)
                ms[k][r] = (bench_now() - t0) * 1e3 / STEPS;
        }
}

/* The median, min and max of ms[0 .. rounds) as JSON. */
static void print_ms(double *ms, int rounds, double base)
{
    double lo = ms[0], hi = ms[0];
    for (int r = 1; r < rounds; r++) {
        lo = ms[r] < lo ? ms[r] : lo;
        hi = ms[r] > hi ? ms[r] : hi;
    }
    double med = bench_median(ms, (size_t)rounds);
    printf("\"step_ms\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, \"step_vs_c1\": %.3f", med, lo, hi,
           med / base);
}

/* The largest core's activations and gradients of a run, MiB. */
static void run_mib(const tl_spmd_run *r, double *act, double *grad)
{
    *act = *grad = 0;
    for (int q = 0; q < tl_spmd_run_cores(r); q++) {
        const tl_program *p = tl_spmd_run_program(r, q);
        *act = mib(p->act_floats) > *act ? mib(p->act_floats) : *act;
        *grad = mib(p->grad_floats) > *grad ? mib(p->grad_floats) : *grad;
    }
}

/* Tensor parallelism: the Transformer's step with Megatron's layout over 2
 * cores against its whole step on one. */
static void transformer_tp(int rounds)
{
    enum { SEQ = 64, BATCH = 16 };
    net n;
    build_transformer(&n, SEQ, BATCH);
    whole w;
    whole_init(&w, &n);
    int8_t *split = megatron(n.vars);
    tl_spmd_run *runs[2] = {NULL, NULL};
    if (tl_spmd_run_create_tensor(n.g, split, 2, n.loss, true, n.params, &runs[1]) != TL_OK)
        die("partition");
    tl_spmd_run_pin(runs[1], true);
    tl_spmd_run_feed(runs[1], n.x, n.xv);
    tl_spmd_run_feed(runs[1], n.labels, n.yv);
    double act, grad, ms0[1000], ms1[1000], *ms[2] = {ms0, ms1};
    run_mib(runs[1], &act, &grad);
    measure(&w, runs, 2, rounds, ms);
    double base = bench_median(ms0, (size_t)rounds);
    for (int k = 0; k < 2; k++) {
        printf("{\"bench\": \"spmd_tp\", \"model\": \"transformer\", \"d_model\": 256, \"heads\": 8, \"d_ff\": 1024, "
               "\"layers\": 2, \"sequence\": %d, \"batch\": %d, \"cores_per_replica\": %d, \"layout\": \"%s\", "
               "\"gathered\": %d, \"activations_mib_per_core\": %.1f, \"gradients_mib_per_core\": %.1f, ",
               SEQ, BATCH, k + 1, k ? "megatron" : "whole", k ? tl_spmd_run_partition(runs[1], 0)->gathered : 0,
               k ? act : mib(w.p->act_floats), k ? grad : mib(w.p->grad_floats));
        print_ms(ms[k], rounds, base);
        printf(", \"rounds\": %d, \"steps_per_round\": %d}\n", rounds, STEPS);
    }
    tl_spmd_run_destroy(runs[1]);
    free(split);
    tl_program_destroy(w.p);
    free(w.bufs), free(w.mask);
    net_free(&n);
}

int main(int argc, char **argv)
{
    int64_t size = argc > 1 ? atoll(argv[1]) : 256, batch = argc > 2 ? atoll(argv[2]) : 4;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (size < 16 || size > 4096 || batch < 1 || batch > 1024 || rounds < 1 || rounds > 1000) {
        fprintf(stderr, "usage: bench_spmd [SIZE in [16, 4096] [BATCH in [1, 1024] [ROUNDS in [1, 1000]]]]\n");
        return 2;
    }
    tl_k_blas_single_thread();
    net n;
    build(&n, size, batch);
    whole w;
    whole_init(&w, &n);
    tl_spmd_run *runs[NC] = {NULL};
    double act[NC], grad[NC], *ms[NC];
    act[0] = mib(w.p->act_floats);
    grad[0] = mib(w.p->grad_floats);
    for (int k = 1; k < NC; k++) {
        int64_t grid[4] = {1, cores[k], 1, 1};
        if (tl_spmd_run_create(n.g, n.x, n.loss, true, grid, n.params, &runs[k]) != TL_OK)
            die("partition");
        tl_spmd_run_pin(runs[k], true);
        tl_spmd_run_feed(runs[k], n.x, n.xv);
        tl_spmd_run_feed(runs[k], n.labels, n.yv);
        run_mib(runs[k], &act[k], &grad[k]);
    }
    for (int k = 0; k < NC; k++)
        if ((ms[k] = calloc((size_t)rounds, sizeof(double))) == NULL)
            die("out of memory");
    measure(&w, runs, NC, rounds, ms);
    double base = bench_median(ms[0], (size_t)rounds);
    for (int k = 0; k < NC; k++) {
        double med = bench_median(ms[k], (size_t)rounds);
        printf("{\"bench\": \"spmd\", \"model\": \"cnn\", \"image\": %lld, \"batch\": %lld, \"cores_per_replica\": %d, "
               "\"grid\": [1, %d, 1, 1], \"gathered_ops\": %d, \"activations_mib_per_core\": %.1f, "
               "\"gradients_mib_per_core\": %.1f, \"activations_vs_c1\": %.3f, ",
               (long long)size, (long long)batch, cores[k], cores[k],
               k == 0 ? 0 : tl_spmd_run_partition(runs[k], 0)->gathered, act[k], grad[k], act[k] / act[0]);
        print_ms(ms[k], rounds, base);
        printf(", \"rounds\": %d, \"steps_per_round\": %d", rounds, STEPS);
        if (cores[k] == 4)
            printf(", \"target_activations_vs_c1\": 0.3, \"target_met\": %s",
                   act[k] / act[0] <= 0.3 ? "true" : "false");
        if (cores[k] == 2)
            printf(", \"target_step_vs_c1\": 0.6, \"target_met\": %s", med / base <= 0.6 ? "true" : "false");
        printf("}\n");
        free(ms[k]);
    }
    for (int k = 1; k < NC; k++)
        tl_spmd_run_destroy(runs[k]);
    tl_program_destroy(w.p);
    free(w.bufs), free(w.mask);
    net_free(&n);
    transformer_tp(rounds);
    return 0;
}

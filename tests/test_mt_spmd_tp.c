/* Tensor parallelism (src/graph/partition_tp.c, partition.h) run for real:
 * a replica's C cores are C threads, each holding its chunk of the split
 * variables, meeting in the slices, fan-outs, sums and gathers of
 * ops_spmd.c. A Megatron MLP block (column-split then row-split dense,
 * with a residual and a layer norm around it) and the built-in Transformer
 * (attention's query, key and value kernels column-split by heads, its
 * output and the feed-forward's second kernel row-split) give the
 * unpartitioned program's loss and every variable's gradient to float
 * tolerance at C = 2, 3 and 4, uneven chunks included; the same bits on a
 * second run; every core the same loss. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/partition.h"
#include "graph/program.h"
#include "graph/spmd_run.h"
#include "test_mt_spmd_util.h"
#include "tpuloop/graph.h"
#include "tpuloop/models.h"

enum { B = 3, K = 6, F = 10, CLASSES = 4, S = 5, VOCAB = 11 };

typedef struct model {
    tl_vars *vars;
    tl_graph *g;
    tl_t x, labels, loss;
    float *params, *xv;
    int32_t yv[B];
    int8_t *split; /* (variables) the dimension split over the cores, -1 whole */
} model;

/* x -> in (whole) -> h + Dense(K)(relu(Dense(F)(h))) -> LayerNorm -> logits. */
static tl_t mlp_block(tl_graph *g, tl_t x, tl_t labels)
{
    tl_t h = tl_dense(g, x, K, TL_ACT_TANH, "in");
    tl_t f = tl_dense(g, tl_dense(g, h, F, TL_ACT_RELU, "mlp/dense"), K, TL_ACT_NONE, "mlp/dense_1");
    tl_t n = tl_layer_norm(g, tl_add(g, h, f), 1e-3, "norm");
    tl_t logits = tl_dense(g, n, CLASSES, TL_ACT_NONE, "logits");
    return tl_mean(g, tl_softmax_xent(g, logits, labels));
}

static tl_t transformer(tl_graph *g, tl_t x, tl_t labels)
{
    tl_model_args a = {TL_MODE_TRAIN, x, labels, B,
                       "{\"d_model\": 16, \"num_heads\": 4, \"num_layers\": 2, \"d_ff\": 30, \"vocab_size\": 11, "
                       "\"num_classes\": 4}",
                       0};
    tl_model_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.loss = spec.logits = spec.predictions = TL_T_INVALID;
    cr_assert_eq(tl_model_transformer(g, &a, &spec, NULL), TL_OK, "%s", tl_graph_error(g));
    return spec.loss;
}

/* A variable whose name ends with one of the suffixes is split along its
 * dimension. */
typedef struct rule {
    const char *suffix;
    int dim;
} rule;

static void set_splits(model *m, const rule *rules, int n)
{
    for (int v = 0; v < m->vars->n; v++) {
        const char *name = m->vars->v[v].name;
        m->split[v] = -1;
        for (int r = 0; r < n; r++) {
            size_t a = strlen(name), b = strlen(rules[r].suffix);
            if (a >= b && strcmp(name + a - b, rules[r].suffix) == 0)
                m->split[v] = (int8_t)rules[r].dim;
        }
    }
}

static void model_build(model *m, tl_t (*net)(tl_graph *, tl_t, tl_t), const int64_t *xshape, int xrank)
{
    memset(m, 0, sizeof *m);
    cr_assert_eq(tl_vars_create(&m->vars), TL_OK);
    cr_assert_eq(tl_graph_create(m->vars, TL_MODE_TRAIN, &m->g), TL_OK);
    m->x = tl_graph_input(m->g, TL_F32, xshape, xrank);
    m->labels = tl_graph_input(m->g, TL_I32, (int64_t[]){B}, 1);
    m->loss = net(m->g, m->x, m->labels);
    cr_assert_eq(tl_graph_status(m->g), TL_OK, "%s", tl_graph_error(m->g));
    cr_assert_eq(tl_vars_layout(m->vars), TL_OK);
    m->params = calloc((size_t)m->vars->total, sizeof(float));
    tl_vars_initialize(m->vars, 7, m->params);
    int64_t n = m->g->nodes[m->x].size;
    m->xv = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) /* token ids for the transformer, values for the MLP: both fit [0, VOCAB) */
        m->xv[i] = (float)((i * 7919) % VOCAB);
    for (int b = 0; b < B; b++)
        m->yv[b] = (b * 3 + 1) % CLASSES;
    m->split = malloc((size_t)m->vars->n);
}

static void model_free(model *m)
{
    free(m->params), free(m->xv), free(m->split);
    tl_graph_destroy(m->g);
    tl_vars_destroy(m->vars);
}

/* The replica of C cores splitting m's variables: its loss and gradient;
 * *gathered: core 0's gathers. */
static float run_split(const model *m, int C, float *grad, int *gathered)
{
    tl_spmd_run *r;
    cr_assert_eq(tl_spmd_run_create_tensor(m->g, m->split, C, m->loss, true, m->params, &r), TL_OK, "%s",
                 tl_last_error());
    spmdt_feed feeds[2] = {{m->x, m->xv}, {m->labels, m->yv}};
    char what[32];
    snprintf(what, sizeof what, "C %d", C);
    float loss = spmdt_step(r, m->loss, feeds, 2, grad, what);
    *gathered = tl_spmd_run_partition(r, 0)->gathered;
    tl_spmd_run_destroy(r);
    return loss;
}

/* m split over each of cores[0..n) against the whole program: the loss and
 * every variable's gradient to float tolerance, the same bits on a second
 * run, gathers[i] values gathered at cores[i]. */
static void check_cores(const model *m, const int *cores, const int *gathers, int n)
{
    size_t bytes = (size_t)m->vars->total * sizeof(float);
    float *want = malloc(bytes), *got = malloc(bytes), *again = malloc(bytes);
    spmdt_feed feeds[2] = {{m->x, m->xv}, {m->labels, m->yv}};
    float loss = spmdt_run_whole(m->g, m->loss, m->params, feeds, 2, want);
    for (int i = 0; i < n; i++) {
        int C = cores[i], gathered;
        float l = run_split(m, C, got, &gathered);
        cr_assert_eq(gathered, gathers[i], "C %d: %d values gathered", C, gathered);
        cr_assert(fabsf(l - loss) <= 1e-5f * fabsf(loss), "C %d: loss %.9g, whole %.9g", C, (double)l,
                  (double)loss);
        char what[32];
        snprintf(what, sizeof what, "C %d", C);
        /* (+ 1e-8: the key's bias, which softmax cancels, has a gradient of rounding only) */
        spmdt_assert_grads(m->vars, want, got, 2e-5, 1e-8, what);
        float l2 = run_split(m, C, again, &gathered);
        cr_assert(memcmp(&l, &l2, sizeof l) == 0 && memcmp(got, again, bytes) == 0,
                  "C %d: a second run gives the same bits", C);
    }
    free(want), free(got), free(again);
}

/* Column-split then row-split: one sum per block, no gather; F = 10 splits
 * unevenly in 3 (4, 4, 2) and 4 (3, 3, 3, 1). The input dense and the
 * residual read h whole, so its gradient takes the fan-out's sum. */
Test(spmd_tp, megatron_mlp_block_equals_the_whole)
{
    model m;
    model_build(&m, mlp_block, (int64_t[]){B, 5}, 2);
    static const rule rules[] = {{"mlp/dense/kernel", 1}, {"mlp/dense/bias", 0}, {"mlp/dense_1/kernel", 0}};
    set_splits(&m, rules, 3);
    static const int cores[] = {2, 3, 4}, gathers[] = {0, 0, 0};
    check_cores(&m, cores, gathers, 3);
    model_free(&m);
}

/* The built-in Transformer with Megatron's layout: 4 heads over 2 and 4
 * cores, d_ff 30 (15 + 15; 8, 8, 8, 6). No value is gathered whole. */
Test(spmd_tp, megatron_transformer_equals_the_whole)
{
    model m;
    model_build(&m, transformer, (int64_t[]){B, S}, 2);
    static const rule rules[] = {
        {"attention/query/kernel", 1}, {"attention/query/bias", 0}, {"attention/key/kernel", 1},
        {"attention/key/bias", 0},     {"attention/value/kernel", 1}, {"attention/value/bias", 0},
        {"attention/output/kernel", 0}, {"ffn/dense/kernel", 1},     {"ffn/dense/bias", 0},
        {"ffn/dense_1/kernel", 0}};
    set_splits(&m, rules, 10);
    static const int cores[] = {2, 4}, gathers[] = {0, 0};
    check_cores(&m, cores, gathers, 2);
    model_free(&m);
}

/* Embeddings split by columns (Keras' (None, "model")): each core looks up
 * its columns and the sum with the positions runs on the chunks (the
 * positions sliced). The first layer's whole projections gather the
 * embedded tokens whole (1); the residual sum runs on the chunks again,
 * and its layer norm, over the split dimension, gathers it (2). */
Test(spmd_tp, split_embeddings_and_uneven_heads_equal_the_whole)
{
    model m;
    model_build(&m, transformer, (int64_t[]){B, S}, 2);
    static const rule rules[] = {{"embedding/embeddings", 1}, {"ffn/dense/kernel", 1}, {"ffn/dense_1/kernel", 0}};
    set_splits(&m, rules, 3);
    static const int cores[] = {2, 3}, gathers[] = {2, 2};
    check_cores(&m, cores, gathers, 2);
    model_free(&m);
}

/* A split that leaves a core nothing is refused, naming the variable. */
Test(spmd_tp, an_empty_chunk_is_refused)
{
    model m;
    model_build(&m, mlp_block, (int64_t[]){B, 5}, 2);
    static const rule rules[] = {{"in/kernel", 1}};
    set_splits(&m, rules, 1);
    tl_partition pt;
    cr_assert_eq(tl_partition_tensor(m.g, m.split, 8, 0, &pt), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "variable in/kernel: dimension 1 of size 6 split over 8 cores leaves core 6 "
                                      "an empty share") != NULL,
              "%s", tl_last_error());
    model_free(&m);
}

/* The compiler's fusions (src/graph/program.h): the cnn model's
 * relu(batch_norm(conv)) layers and relu(main + shortcut) residual sums,
 * and dense layers' matmul → bias add (→ ReLU), also in pieces on several
 * threads, compiled fused give the bits of the same graph compiled op by
 * op — loss, logits, every gradient and the moving averages' updates,
 * training and evaluation — and a value a caller keeps is never fused
 * away. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/thread.h"
#include "graph/program.h"
#include "tpuloop/models.h"
#include "tpuloop/rng.h"

/* Memory for a compiled program p of vars: initialized parameters (seed)
 * and the exec's slabs. */
static float *exec_memory(const tl_program *p, tl_vars *vars, uint64_t seed, tl_exec *e)
{
    float *params = calloc((size_t)vars->total, sizeof(float));
    tl_vars_initialize(vars, seed, params);
    e->act = calloc((size_t)p->act_floats + 1, sizeof(float));
    e->grad = calloc((size_t)p->grad_floats + 1, sizeof(float));
    e->scratch = calloc((size_t)p->scratch_floats + 1, sizeof(float));
    e->param_grad = calloc((size_t)vars->total, sizeof(float));
    e->params = params;
    e->loss_scale = e->state_scale = 1.0f;
    return params;
}

static void free_compiled(float *params, tl_exec *e, tl_program *p, tl_graph *g, tl_vars *vars)
{
    free(params);
    free(e->act), free(e->grad), free(e->scratch), free(e->param_grad);
    tl_program_destroy(p);
    tl_graph_destroy(g);
    tl_vars_destroy(vars);
}

/* Nodes of p fused as kind. */
static int fused(const tl_program *p, tl_fuse kind)
{
    int n = 0;
    for (int i = 0; i < p->g->n; i++)
        n += p->fuse[i] == kind;
    return n;
}

/* One traced cnn (batch 4 of 10x10 images, filters 4, 8) on memory of its
 * own, compiled op by op (fused false) or with the fusions. */
typedef struct fx {
    tl_vars *vars;
    tl_graph *g;
    tl_program *p;
    tl_exec e;
    float *params;
    tl_model_spec spec;
    tl_t x, labels;
} fx;

static fx setup(tl_mode mode, bool fused, const tl_t *extra_keep)
{
    fx f;
    memset(&f, 0, sizeof f);
    cr_assert_eq(tl_vars_create(&f.vars), TL_OK);
    cr_assert_eq(tl_graph_create(f.vars, mode, &f.g), TL_OK);
    int64_t xs[3] = {4, 10, 10}, ls[1] = {4};
    f.x = tl_graph_input(f.g, TL_F32, xs, 3);
    f.labels = tl_graph_input(f.g, TL_I32, ls, 1);
    tl_model_args a = {mode, f.x, f.labels, 4, "{\"filters\": [4, 8], \"batch_norm_momentum\": 0.9}", 0};
    f.spec.loss = f.spec.logits = f.spec.predictions = TL_T_INVALID;
    cr_assert_eq(tl_model_cnn(f.g, &a, &f.spec, NULL), TL_OK, "%s", tl_graph_error(f.g));
    cr_assert_eq(tl_vars_layout(f.vars), TL_OK);
    bool train = mode == TL_MODE_TRAIN;
    tl_t keep[2] = {f.spec.logits, extra_keep != NULL ? *extra_keep : TL_T_INVALID};
    tl_status st = fused ? tl_program_compile_fused(f.g, f.spec.loss, train, keep, 2, &f.p)
                         : tl_program_compile(f.g, f.spec.loss, train, &f.p);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    f.params = exec_memory(f.p, f.vars, 5, &f.e);
    tl_rng r;
    tl_rng_init(&r, 11, 12, 13, 14);
    float *xv = tl_exec_value(f.p, &f.e, f.x);
    for (int i = 0; i < 400; i++)
        xv[i] = tl_rng_uniform(&r);
    int32_t *lv = (int32_t *)tl_exec_value(f.p, &f.e, f.labels);
    for (int i = 0; i < 4; i++)
        lv[i] = (i * 3) % 10;
    return f;
}

static void teardown(fx *f)
{
    free_compiled(f->params, &f->e, f->p, f->g, f->vars);
}

static void same_bits(const float *a, const float *b, int64_t n, const char *what)
{
    cr_assert(memcmp(a, b, (size_t)n * sizeof(float)) == 0, "%s differs fused and op by op", what);
}

Test(graph_fusion, cnn_training_step_has_the_same_bits_fused)
{
    fx op = setup(TL_MODE_TRAIN, false, NULL), fu = setup(TL_MODE_TRAIN, true, NULL);
    cr_assert_eq(fused(op.p, TL_FUSE_RELU), 0, "tl_program_compile fuses nothing");
    /* The stem's and each block's first conv → BN → ReLU, and each block's
     * relu(main + shortcut); the second BN of a block feeds the sum. */
    cr_assert_eq(fused(fu.p, TL_FUSE_RELU), 5, "fused %d", fused(fu.p, TL_FUSE_RELU));
    cr_assert_eq(fused(fu.p, TL_FUSE_BIAS), 1, "the logits' dense layer adds its bias in its matmul");
    cr_assert_eq(fused(fu.p, TL_FUSE_INTO), 6);
    cr_assert_lt(fu.p->act_floats, op.p->act_floats, "a fused ReLU has no buffer of its own");
    for (int step = 0; step < 2; step++) { /* the second step from the first's parameters */
        cr_assert_eq(tl_program_forward(op.p, &op.e), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_program_forward(fu.p, &fu.e), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_program_backward(op.p, &op.e), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_program_backward(fu.p, &fu.e), TL_OK, "%s", tl_last_error());
        same_bits(tl_exec_value(op.p, &op.e, op.spec.loss), tl_exec_value(fu.p, &fu.e, fu.spec.loss), 1, "loss");
        same_bits(tl_exec_value(op.p, &op.e, op.spec.logits), tl_exec_value(fu.p, &fu.e, fu.spec.logits), 40,
                  "logits");
        /* Every variable's gradient and every moving-average update. */
        same_bits(op.e.param_grad, fu.e.param_grad, op.vars->total, "param_grad");
        for (int64_t i = 0; i < op.vars->total; i++) {
            op.params[i] -= 0.1f * op.e.param_grad[i];
            fu.params[i] -= 0.1f * fu.e.param_grad[i];
        }
    }
    teardown(&op);
    teardown(&fu);
}

Test(graph_fusion, cnn_evaluation_has_the_same_bits_fused)
{
    fx op = setup(TL_MODE_EVAL, false, NULL), fu = setup(TL_MODE_EVAL, true, NULL);
    cr_assert_eq(fused(fu.p, TL_FUSE_RELU), 5, "a frozen batch norm fuses where nothing runs backward");
    cr_assert_eq(tl_program_forward(op.p, &op.e), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_program_forward(fu.p, &fu.e), TL_OK, "%s", tl_last_error());
    same_bits(tl_exec_value(op.p, &op.e, op.spec.logits), tl_exec_value(fu.p, &fu.e, fu.spec.logits), 40, "logits");
    same_bits(tl_exec_value(op.p, &op.e, op.spec.loss), tl_exec_value(fu.p, &fu.e, fu.spec.loss), 1, "loss");
    teardown(&op);
    teardown(&fu);
}

/* The stem's batch norm, kept by the caller (an outfed tensor, say), keeps
 * its own value: that ReLU is not fused, the other four are. */
Test(graph_fusion, a_kept_value_is_not_fused_away)
{
    fx probe = setup(TL_MODE_TRAIN, true, NULL);
    tl_t stem_bn = TL_T_INVALID;
    for (int i = 0; i < probe.g->n && stem_bn == TL_T_INVALID; i++)
        if (probe.p->fuse[i] == TL_FUSE_RELU)
            stem_bn = i;
    teardown(&probe);
    cr_assert_neq(stem_bn, TL_T_INVALID);
    fx op = setup(TL_MODE_TRAIN, false, NULL), fu = setup(TL_MODE_TRAIN, true, &stem_bn);
    cr_assert_eq(fu.p->fuse[stem_bn], TL_FUSE_NONE);
    cr_assert_eq(fused(fu.p, TL_FUSE_RELU), 4);
    cr_assert_eq(tl_program_forward(op.p, &op.e), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_program_forward(fu.p, &fu.e), TL_OK, "%s", tl_last_error());
    int64_t n = op.g->nodes[stem_bn].size;
    const float *v = tl_exec_value(fu.p, &fu.e, stem_bn);
    bool negative = false;
    for (int64_t i = 0; i < n; i++)
        negative |= v[i] < 0.0f;
    cr_assert(negative, "the batch norm's own value, before the ReLU");
    same_bits(tl_exec_value(op.p, &op.e, stem_bn), v, n, "the kept batch norm");
    teardown(&op);
    teardown(&fu);
}

/* ---- dense layers: matmul → bias add (→ ReLU) as one op ----------------- */

/* A traced MLP of batch B over F features: a ReLU layer of H1, a tanh layer
 * of H2 (its bias added by the matmul, its tanh apart) and logits of 5, on
 * memory of its own; with `threads` > 1 the exec has a team and the GEMMs
 * large enough run in pieces. */
typedef struct dfx {
    tl_vars *vars;
    tl_graph *g;
    tl_program *p;
    tl_exec e;
    float *params;
    tl_t loss, logits, product;
    int64_t nlogits;
    tl_t stack, emb[2]; /* the stacked dot's graph (below); else TL_T_INVALID */
} dfx;

/* f's traced training step compiled fused (keeping the logits and `extra`)
 * or op by op, on memory of its own with parameters from seed. */
static void compile_training(dfx *f, bool fused, tl_t extra, uint64_t seed)
{
    cr_assert_eq(tl_graph_status(f->g), TL_OK, "%s", tl_graph_error(f->g));
    cr_assert_eq(tl_vars_layout(f->vars), TL_OK);
    tl_t keep[2] = {f->logits, extra};
    tl_status st = fused ? tl_program_compile_fused(f->g, f->loss, true, keep, 2, &f->p)
                         : tl_program_compile(f->g, f->loss, true, &f->p);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    f->params = exec_memory(f->p, f->vars, seed, &f->e);
}

static dfx dense_setup(bool fused, int threads, int64_t B, int64_t F, int64_t H1, int64_t H2, bool keep_product);

/* Layer 1 of the MLP below written out, its bias made after the matmul:
 * LATE_COMPUTED, a reshape of a variable (as a partitioner's slice of a
 * bias may be), which the matmul cannot add, since it is computed after the
 * matmul runs; LATE_VARIABLE, the variable itself (as the Python front
 * end's tf.layers.dense made it), which is there before anything runs. */
enum { LATE_NONE, LATE_COMPUTED, LATE_VARIABLE };

static tl_t late_bias_layer(tl_graph *g, tl_t x, int64_t H1, int how)
{
    int64_t ks[2] = {tl_graph_node(g, x)->shape[1], H1}, bs[2] = {1, H1}, flat[1] = {H1};
    tl_t w = tl_variable(g, "dense/kernel", ks, 2, (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0});
    tl_t z = tl_matmul(g, x, w, false, false);
    if (how == LATE_VARIABLE)
        return tl_relu(g, tl_bias_add(g, z, tl_variable(g, "dense/bias", flat, 1,
                                                          (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0})));
    tl_t b = tl_variable(g, "dense/bias", bs, 2, (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0});
    return tl_relu(g, tl_bias_add(g, z, tl_reshape(g, b, flat, 1)));
}

static int late_bias;

static dfx dense_setup(bool fused, int threads, int64_t B, int64_t F, int64_t H1, int64_t H2, bool keep_product)
{
    dfx f;
    memset(&f, 0, sizeof f);
    cr_assert_eq(tl_vars_create(&f.vars), TL_OK);
    cr_assert_eq(tl_graph_create(f.vars, TL_MODE_TRAIN, &f.g), TL_OK);
    int64_t xs[2] = {B, F}, ls[1] = {B};
    tl_t x = tl_graph_input(f.g, TL_F32, xs, 2), labels = tl_graph_input(f.g, TL_I32, ls, 1);
    tl_t h = late_bias != LATE_NONE ? late_bias_layer(f.g, x, H1, late_bias)
                                    : tl_dense(f.g, x, H1, TL_ACT_RELU, "dense");
    h = tl_dense(f.g, h, H2, TL_ACT_TANH, "dense_1");
    f.logits = tl_dense(f.g, h, 5, TL_ACT_NONE, "logits");
    f.product = tl_graph_node(f.g, f.logits)->in[0]; /* the logits' matmul */
    f.loss = tl_mean(f.g, tl_softmax_xent(f.g, f.logits, labels));
    f.nlogits = B * 5;
    f.stack = f.emb[0] = f.emb[1] = TL_T_INVALID;
    compile_training(&f, fused, keep_product ? f.product : TL_T_INVALID, 6);
    if (threads > 1)
        cr_assert_eq(tl_team_create(threads, NULL, 0, &f.e.team), TL_OK, "%s", tl_last_error());
    tl_rng r;
    tl_rng_init(&r, 21, 22, 23, 24);
    float *xv = tl_exec_value(f.p, &f.e, x);
    for (int64_t i = 0; i < B * F; i++)
        xv[i] = tl_rng_uniform(&r) - 0.5f;
    int32_t *lv = (int32_t *)tl_exec_value(f.p, &f.e, labels);
    for (int64_t i = 0; i < B; i++)
        lv[i] = (int32_t)((i * 7) % 5);
    return f;
}

static void dense_teardown(dfx *f)
{
    tl_team_destroy(f->e.team);
    free_compiled(f->params, &f->e, f->p, f->g, f->vars);
}

/* Two training steps op by op and fused: the same loss, logits and
 * gradients of every variable (and of the embedding activations there are). */
static void dense_same_bits(dfx *op, dfx *fu)
{
    for (int step = 0; step < 2; step++) {
        cr_assert_eq(tl_program_forward(op->p, &op->e), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_program_forward(fu->p, &fu->e), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_program_backward(op->p, &op->e), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_program_backward(fu->p, &fu->e), TL_OK, "%s", tl_last_error());
        same_bits(tl_exec_value(op->p, &op->e, op->loss), tl_exec_value(fu->p, &fu->e, fu->loss), 1, "loss");
        same_bits(tl_exec_value(op->p, &op->e, op->logits), tl_exec_value(fu->p, &fu->e, fu->logits), op->nlogits,
                  "logits");
        same_bits(op->e.param_grad, fu->e.param_grad, op->vars->total, "param_grad");
        for (int k = 0; k < 2 && op->emb[k] != TL_T_INVALID; k++)
            same_bits(tl_exec_grad(op->p, &op->e, op->emb[k]), tl_exec_grad(fu->p, &fu->e, fu->emb[k]),
                      op->g->nodes[op->emb[k]].size, "an embedding activation's gradient");
        for (int64_t i = 0; i < op->vars->total; i++) {
            op->params[i] -= 0.5f * op->e.param_grad[i];
            fu->params[i] -= 0.5f * fu->e.param_grad[i];
        }
    }
}

Test(graph_fusion, dense_layers_fuse_their_bias_and_relu_with_the_same_bits)
{
    dfx op = dense_setup(false, 1, 16, 12, 24, 20, false), fu = dense_setup(true, 1, 16, 12, 24, 20, false);
    cr_assert_eq(fused(op.p, TL_FUSE_BIAS) + fused(op.p, TL_FUSE_BIAS_RELU), 0);
    cr_assert_eq(fused(fu.p, TL_FUSE_BIAS_RELU), 1, "the ReLU layer");
    cr_assert_eq(fused(fu.p, TL_FUSE_BIAS), 2, "the tanh layer's and the logits' biases");
    cr_assert_eq(fused(fu.p, TL_FUSE_INTO), 4, "3 bias adds and a ReLU run nothing");
    cr_assert_lt(fu.p->act_floats, op.p->act_floats);
    dense_same_bits(&op, &fu);
    dense_teardown(&op);
    dense_teardown(&fu);
}

Test(graph_fusion, dense_layers_split_over_threads_with_the_same_bits)
{
    /* 128 x 600 → 512 → 256: GEMMs large enough for pieces, forward and
     * backward, their epilogues on each piece, the bias gradients split by
     * columns, a layer's two alike gradient GEMMs side by side (whole on 2
     * threads; one in pieces beside the other on 3). */
    for (int threads = 2; threads <= 3; threads++) {
        dfx op = dense_setup(false, 1, 128, 600, 512, 256, false);
        dfx fu = dense_setup(true, threads, 128, 600, 512, 256, false);
        cr_assert_eq(fused(fu.p, TL_FUSE_BIAS_RELU), 1);
        dense_same_bits(&op, &fu);
        dense_teardown(&op);
        dense_teardown(&fu);
    }
}

Test(graph_fusion, a_kept_product_keeps_its_bias_apart)
{
    dfx op = dense_setup(false, 1, 16, 12, 24, 20, true), fu = dense_setup(true, 1, 16, 12, 24, 20, true);
    cr_assert_eq(fu.p->fuse[fu.product], TL_FUSE_NONE, "a caller reads the logits' matmul");
    cr_assert_eq(fused(fu.p, TL_FUSE_BIAS), 1, "the tanh layer's");
    dense_same_bits(&op, &fu);
    same_bits(tl_exec_value(op.p, &op.e, op.product), tl_exec_value(fu.p, &fu.e, fu.product), 16 * 5,
              "the kept product");
    dense_teardown(&op);
    dense_teardown(&fu);
}

/* The MLP with its first layer's bias made after the matmul (`how`): the
 * first layer fused with its ReLU or not, the other two with their biases,
 * and the bits of op by op. */
static void late_bias_case(int how, int first_fused, const char *why)
{
    late_bias = how;
    dfx op = dense_setup(false, 1, 16, 12, 24, 20, false), fu = dense_setup(true, 1, 16, 12, 24, 20, false);
    late_bias = LATE_NONE;
    cr_assert_eq(fused(fu.p, TL_FUSE_BIAS_RELU), first_fused, "%s", why);
    cr_assert_eq(fused(fu.p, TL_FUSE_BIAS), 2);
    dense_same_bits(&op, &fu);
    dense_teardown(&op);
    dense_teardown(&fu);
}

Test(graph_fusion, a_bias_computed_after_its_matmul_is_added_apart)
{
    late_bias_case(LATE_COMPUTED, 0, "the first layer's bias is computed after its matmul");
}

Test(graph_fusion, a_bias_variable_made_after_its_matmul_is_fused)
{
    late_bias_case(LATE_VARIABLE, 1, "the first layer's bias is a variable: there before the matmul");
}

/* ---- a matmul's two gradient GEMMs at once ---------------------------------- */

/* loss = mean(xent(x · (w · w), labels)), w (N, N): the inner matmul's two
 * gradients are one tensor's, so its GEMMs must run in turn; every other
 * pair may run at once. One step's gradients on `threads` threads. */
static float *self_product_grads(int threads, int64_t N)
{
    tl_vars *vars;
    tl_graph *g;
    tl_program *p;
    tl_exec e;
    memset(&e, 0, sizeof e);
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
    int64_t xs[2] = {64, N}, ls[1] = {64}, ws[2] = {N, N};
    tl_t x = tl_graph_input(g, TL_F32, xs, 2), labels = tl_graph_input(g, TL_I32, ls, 1);
    tl_t w = tl_variable(g, "w", ws, 2, (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0});
    tl_t loss = tl_mean(g, tl_softmax_xent(g, tl_matmul(g, x, tl_matmul(g, w, w, false, false), false, false), labels));
    cr_assert_eq(tl_graph_status(g), TL_OK, "%s", tl_graph_error(g));
    cr_assert_eq(tl_vars_layout(vars), TL_OK);
    cr_assert_eq(tl_program_compile_fused(g, loss, true, NULL, 0, &p), TL_OK, "%s", tl_last_error());
    float *params = exec_memory(p, vars, 7, &e);
    /* Helpers that spin between jobs start their part at once: two GEMMs
     * wrongly paired would then write the one gradient at the same time. */
    if (threads > 1)
        cr_assert_eq(tl_team_create(threads, NULL, 100000000, &e.team), TL_OK, "%s", tl_last_error());
    tl_rng r;
    tl_rng_init(&r, 31, 32, 33, 34);
    float *xv = tl_exec_value(p, &e, x);
    for (int64_t i = 0; i < 64 * N; i++)
        xv[i] = tl_rng_uniform(&r) - 0.5f;
    int32_t *lv = (int32_t *)tl_exec_value(p, &e, labels);
    for (int64_t i = 0; i < 64; i++)
        lv[i] = (int32_t)((i * 5) % N);
    cr_assert_eq(tl_program_forward(p, &e), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_program_backward(p, &e), TL_OK, "%s", tl_last_error());
    float *grads = malloc((size_t)vars->total * sizeof *grads);
    memcpy(grads, e.param_grad, (size_t)vars->total * sizeof *grads);
    tl_team_destroy(e.team);
    free_compiled(params, &e, p, g, vars);
    return grads;
}

Test(graph_fusion, a_matmul_of_a_tensor_by_itself_keeps_its_bits_on_threads)
{
    /* 96 x 96 x 96: the gradient GEMMs are too small to split, and would
     * run one on each thread if paired; 256: both split into pieces. */
    static const int64_t sizes[] = {96, 256};
    for (int k = 0; k < 2; k++) {
        int64_t N = sizes[k];
        float *one = self_product_grads(1, N);
        for (int threads = 2; threads <= 3; threads++) {
            float *more = self_product_grads(threads, N);
            same_bits(one, more, N * N, threads == 2 ? "w's gradient, 2 threads" : "w's gradient, 3 threads");
            free(more);
        }
        free(one);
    }
}

Test(graph_fusion, small_dense_layers_pair_their_gradients_with_the_same_bits)
{
    /* No GEMM here is large enough to split: each matmul's two gradient
     * GEMMs run at once, one on each thread. */
    dfx op = dense_setup(false, 1, 16, 12, 24, 20, false), fu = dense_setup(true, 2, 16, 12, 24, 20, false);
    dense_same_bits(&op, &fu);
    dense_teardown(&op);
    dense_teardown(&fu);
}

/* ---- DLRM's interaction: the stack a pairwise dot reads is never built ---- */

/* B = 6 examples and a stack of 7 vectors of 4, concatenated from a ReLU
 * layer of 8 over the raw features (2 vectors; the top concatenation reads
 * it too, as DLRM's bottom MLP output), embedding activations of 4 and 12,
 * and the raw features (4, no gradient); the pairwise dot beside the ReLU
 * layer into logits of 5. d = 7 reshapes the same 28 columns into 4
 * vectors that straddle the parts. */
static dfx stack_setup(bool fused, int64_t d, bool keep_stack)
{
    enum { B = 6 };
    dfx f;
    memset(&f, 0, sizeof f);
    cr_assert_eq(tl_vars_create(&f.vars), TL_OK);
    cr_assert_eq(tl_graph_create(f.vars, TL_MODE_TRAIN, &f.g), TL_OK);
    int64_t xs[2] = {B, 4}, ls[1] = {B}, e0s[2] = {B, 4}, e1s[2] = {B, 12}, ss[3] = {B, 28 / d, d};
    tl_t x = tl_graph_input(f.g, TL_F32, xs, 2), labels = tl_graph_input(f.g, TL_I32, ls, 1);
    tl_t h = tl_dense(f.g, x, 8, TL_ACT_RELU, "bottom");
    f.emb[0] = tl_embedding_activations(f.g, 0, e0s, 2);
    f.emb[1] = tl_embedding_activations(f.g, 1, e1s, 2);
    f.stack = tl_concat(f.g, (tl_t[]){h, f.emb[0], x, f.emb[1]}, 4, 1);
    tl_t z = tl_pairwise_dot(f.g, tl_reshape(f.g, f.stack, ss, 3));
    f.logits = tl_dense(f.g, tl_concat(f.g, (tl_t[]){h, z}, 2, 1), 5, TL_ACT_NONE, "top");
    f.loss = tl_mean(f.g, tl_softmax_xent(f.g, f.logits, labels));
    f.nlogits = B * 5;
    f.product = TL_T_INVALID;
    compile_training(&f, fused, keep_stack ? f.stack : TL_T_INVALID, 8);
    tl_rng r;
    tl_rng_init(&r, 41, 42, 43, 44);
    float *xv = tl_exec_value(f.p, &f.e, x), *e0v = tl_exec_value(f.p, &f.e, f.emb[0]);
    float *e1v = tl_exec_value(f.p, &f.e, f.emb[1]);
    for (int64_t i = 0; i < B * 4; i++)
        xv[i] = tl_rng_uniform(&r) - 0.5f, e0v[i] = tl_rng_uniform(&r) - 0.5f;
    for (int64_t i = 0; i < B * 12; i++)
        e1v[i] = tl_rng_uniform(&r) - 0.5f;
    int32_t *lv = (int32_t *)tl_exec_value(f.p, &f.e, labels);
    for (int64_t i = 0; i < B; i++)
        lv[i] = (int32_t)((i * 3) % 5);
    return f;
}

Test(graph_fusion, a_pairwise_dot_reads_its_stack_from_the_parts_with_the_same_bits)
{
    dfx op = stack_setup(false, 4, false), fu = stack_setup(true, 4, false);
    cr_assert_eq(fused(op.p, TL_FUSE_STACK) + fused(op.p, TL_FUSE_ELIDED), 0);
    cr_assert_eq(fused(fu.p, TL_FUSE_STACK), 1);
    cr_assert_eq(fused(fu.p, TL_FUSE_ELIDED), 2, "the concatenation and the reshape run nothing");
    cr_assert_eq(fu.p->fuse[fu.stack], TL_FUSE_ELIDED);
    cr_assert_leq(fu.p->act_floats + 6 * 28, op.p->act_floats, "the stack has no buffer");
    cr_assert_leq(fu.p->grad_floats + 6 * 28, op.p->grad_floats, "nor a gradient");
    dense_same_bits(&op, &fu);
    dense_teardown(&op);
    dense_teardown(&fu);
}

Test(graph_fusion, a_stack_that_is_kept_or_straddles_its_parts_is_built)
{
    for (int c = 0; c < 2; c++) {
        int64_t d = c == 0 ? 4 : 7;
        dfx op = stack_setup(false, d, c == 0), fu = stack_setup(true, d, c == 0);
        cr_assert_eq(fused(fu.p, TL_FUSE_STACK) + fused(fu.p, TL_FUSE_ELIDED), 0, "%s",
                     c == 0 ? "a caller reads the stack" : "vectors of 7 straddle the parts");
        dense_same_bits(&op, &fu);
        if (c == 0)
            same_bits(tl_exec_value(op.p, &op.e, op.stack), tl_exec_value(fu.p, &fu.e, fu.stack), 6 * 28,
                      "the kept stack");
        dense_teardown(&op);
        dense_teardown(&fu);
    }
}

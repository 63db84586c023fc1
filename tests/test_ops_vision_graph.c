/* The vision ops through the tracer, planner and executor: every variable's
 * gradient against finite differences of the loss, values against the
 * kernels' twins and worked examples, the same bits on a second run and on
 * another thread, no allocation after the first step, and the shape errors'
 * messages. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv.h"
#include "kernels/kernels.h"
#include "test_graph_util.h"

static void setup(void)
{
    tl_k_blas_single_thread();
}

TestSuite(ops_vision_graph, .init = setup, .timeout = 120);

static const tl_initializer uniform = {TL_INIT_UNIFORM, -1, 1};

static tl_t var4(tl_graph *g, const char *name, int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t s[4] = {a, b, c, d};
    return tl_variable(g, name, s, 4, uniform);
}

/* mean(sigmoid(t)) over all of t: a scalar whose gradient differs per element. */
static tl_t loss_of(tl_graph *g, tl_t t)
{
    const tl_node *nd = tl_graph_node(g, t);
    if (nd == NULL || tl_graph_status(g) != TL_OK)
        return TL_T_INVALID;
    int64_t n = nd->size;
    return tl_mean(g, tl_sigmoid(g, tl_reshape(g, t, &n, 1)));
}

/* Several tensors into one loss: their flattened concatenation. */
static tl_t loss_of_all(tl_graph *g, const tl_t *ts, int n)
{
    tl_t flat[8];
    for (int i = 0; i < n; i++) {
        const tl_node *nd = tl_graph_node(g, ts[i]);
        if (nd == NULL || tl_graph_status(g) != TL_OK)
            return TL_T_INVALID;
        int64_t size = nd->size;
        flat[i] = tl_reshape(g, ts[i], &size, 1);
    }
    return loss_of(g, tl_concat(g, flat, n, 0));
}

/* The fixture's x (4, 6) as a one-channel image (1, 4, 6, 1): an input, so
 * no gradient is wanted for it. */
static tl_t image_of(tl_graph *g, tl_t x)
{
    int64_t s[4] = {1, 4, 6, 1};
    return tl_reshape(g, x, s, 4);
}

/* ---- gradients of the whole graph ------------------------------------------------- */

static tl_t conv_same_stride2(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_conv2d_attrs a = {.strides = {2, 2}, .padding = TL_PAD_SAME}; /* 6 → 3, pad 0 before, 1 after */
    tl_t y = tl_conv2d(g, var4(g, "img", 2, 6, 6, 3), var4(g, "f", 3, 3, 3, 4), &a);
    return loss_of(g, y);
}

static tl_t conv_valid_dilated_grouped(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_conv2d_attrs a = {.dilations = {2, 1}, .groups = 2, .padding = TL_PAD_VALID};
    tl_t y = tl_conv2d(g, var4(g, "img", 2, 7, 5, 4), var4(g, "f", 3, 2, 2, 6), &a);
    return loss_of(g, y);
}

static tl_t depthwise(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_conv2d_attrs a = {.strides = {1, 2}, .padding = TL_PAD_SAME};
    tl_t y = tl_depthwise_conv2d(g, var4(g, "img", 2, 5, 5, 3), var4(g, "f", 3, 3, 3, 2), &a);
    return loss_of(g, y);
}

/* The input image needs no gradient; the 1x1 stride-2 projection of the
 * intermediate h (the GEMM engine) and a 3x3 conv both read h, whose
 * gradient adds up; the filter f is used twice. */
static tl_t shared_uses(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels, (void)target;
    tl_conv2d_attrs same = {.padding = TL_PAD_SAME}, proj = {.strides = {2, 2}, .padding = TL_PAD_SAME};
    tl_t f = var4(g, "f", 3, 3, 2, 2);
    tl_t h = tl_tanh(g, tl_conv2d(g, tl_conv2d(g, image_of(g, x), var4(g, "f0", 1, 1, 1, 2), &same), f, &same));
    tl_t a = tl_conv2d(g, h, var4(g, "p", 1, 1, 2, 3), &proj); /* (1, 2, 3, 3) */
    tl_t b = tl_conv2d(g, h, f, &same);                          /* (1, 4, 6, 2) */
    tl_t c = tl_avg_pool2d(g, h, (int64_t[]){2, 2}, (int64_t[]){1, 1}, TL_PAD_VALID);
    return loss_of_all(g, (tl_t[]){a, b, c}, 3);
}

/* max_pool of x·f (a 1x1 conv of the input image with f): for f away from 0
 * the window's argmax is x's (or its argmin), the same at f ± h, so the loss
 * is smooth in f and finite differences apply. */
static tl_t max_pools(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels, (void)target;
    tl_t y = tl_conv2d(g, image_of(g, x), var4(g, "f", 1, 1, 1, 3), NULL); /* (1, 4, 6, 3) */
    tl_t a = tl_max_pool2d(g, y, (int64_t[]){2, 2}, (int64_t[]){2, 2}, TL_PAD_VALID);
    tl_t b = tl_max_pool2d(g, y, (int64_t[]){3, 3}, (int64_t[]){2, 2}, TL_PAD_SAME); /* overlapping windows */
    return loss_of_all(g, (tl_t[]){a, b}, 2);
}

static tl_t avg_pools(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_t img = var4(g, "img", 2, 5, 6, 3);
    tl_t a = tl_avg_pool2d(g, img, (int64_t[]){2, 2}, (int64_t[]){2, 2}, TL_PAD_SAME);
    tl_t b = tl_avg_pool2d(g, img, (int64_t[]){3, 2}, (int64_t[]){1, 2}, TL_PAD_VALID);
    tl_t c = tl_global_avg_pool2d(g, img, false);
    tl_t d = tl_global_avg_pool2d(g, img, true);
    return loss_of_all(g, (tl_t[]){a, b, c, d}, 4);
}

static tl_t resizes(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_t img = var4(g, "img", 2, 3, 4, 2);
    tl_t a = tl_resize(g, img, 7, 5, TL_RESIZE_BILINEAR);
    tl_t b = tl_resize(g, img, 2, 3, TL_RESIZE_BILINEAR);
    tl_t c = tl_resize(g, img, 6, 9, TL_RESIZE_NEAREST);
    tl_t d = tl_resize(g, img, 2, 2, TL_RESIZE_NEAREST);
    return loss_of_all(g, (tl_t[]){a, b, c, d}, 4);
}

/* A training conv on oneDNN runs as the pair (conv.h): one plan computes
 * both gradients. oneDNN reads the NHWC image in place, so the forward
 * keeps no reordered copy of it. */
static tl_t conv_training_pair(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_conv2d_attrs a = {.padding = TL_PAD_SAME};
    tl_t y = tl_conv2d(g, var4(g, "img", 2, 5, 5, 16), var4(g, "f", 3, 3, 16, 8), &a);
    return loss_of(g, y);
}

Test(ops_vision_graph, conv2d_training_pair_gradients)
{
    tg_fixture f = tg_setup(conv_training_pair, TL_MODE_TRAIN);
    int conv = -1;
    for (int i = 0; i < f.g->n; i++)
        conv = f.g->nodes[i].op == TL_OP_CONV2D ? i : conv;
    cr_assert_eq(f.p->aux_floats[conv], 0, "NHWC in place: no blocked image to keep for the filter gradient");
    tg_teardown(&f);
    tg_check_gradients(conv_training_pair, TL_MODE_TRAIN);
}

Test(ops_vision_graph, conv2d_same_stride2_gradients) { tg_check_gradients(conv_same_stride2, TL_MODE_TRAIN); }
Test(ops_vision_graph, conv2d_valid_dilated_grouped_gradients)
{
    tg_check_gradients(conv_valid_dilated_grouped, TL_MODE_TRAIN);
}
Test(ops_vision_graph, depthwise_conv2d_gradients) { tg_check_gradients(depthwise, TL_MODE_TRAIN); }
Test(ops_vision_graph, tensors_used_twice_add_their_gradients) { tg_check_gradients(shared_uses, TL_MODE_TRAIN); }
Test(ops_vision_graph, max_pool2d_gradients) { tg_check_gradients(max_pools, TL_MODE_TRAIN); }
Test(ops_vision_graph, avg_and_global_pool_gradients) { tg_check_gradients(avg_pools, TL_MODE_TRAIN); }
Test(ops_vision_graph, resize_gradients) { tg_check_gradients(resizes, TL_MODE_TRAIN); }

/* ---- values ------------------------------------------------------------------------ */

/* A forward-only program of op(x) on an input x of xs, with a variable
 * filter of fs when fs is not NULL; returns the output after one run. */
typedef tl_t (*unary_op)(tl_graph *g, tl_t x, tl_t f);

typedef struct run1 {
    tl_vars *vars;
    tl_graph *g;
    tl_program *p;
    tl_exec e;
    float *params;
    tl_t x, f, y;
} run1;

static run1 run_op(unary_op op, const int64_t xs[4], const float *xv, const int64_t *fs, const float *fv)
{
    run1 r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(tl_vars_create(&r.vars), TL_OK);
    cr_assert_eq(tl_graph_create(r.vars, TL_MODE_PREDICT, &r.g), TL_OK);
    r.x = tl_graph_input(r.g, TL_F32, xs, 4);
    r.f = fs != NULL ? tl_variable(r.g, "f", fs, 4, uniform) : TL_T_INVALID;
    r.y = op(r.g, r.x, r.f);
    cr_assert_eq(tl_graph_status(r.g), TL_OK, "%s", tl_graph_error(r.g));
    cr_assert_eq(tl_vars_layout(r.vars), TL_OK);
    cr_assert_eq(tl_program_compile(r.g, TL_T_INVALID, false, &r.p), TL_OK, "%s", tl_last_error());
    r.params = calloc((size_t)r.vars->total + 1, sizeof(float));
    if (fs != NULL)
        memcpy(r.params, fv, (size_t)r.vars->total * sizeof(float));
    r.e.act = calloc((size_t)r.p->act_floats + 1, sizeof(float));
    r.e.scratch = calloc((size_t)r.p->scratch_floats + 1, sizeof(float));
    r.e.params = r.params;
    memcpy(tl_exec_value(r.p, &r.e, r.x), xv, (size_t)(xs[0] * xs[1] * xs[2] * xs[3]) * sizeof(float));
    cr_assert_eq(tl_program_forward(r.p, &r.e), TL_OK, "%s", tl_last_error());
    return r;
}

static void run_free(run1 *r)
{
    free(r->params);
    free(r->e.act);
    free(r->e.scratch);
    tl_program_destroy(r->p);
    tl_graph_destroy(r->g);
    tl_vars_destroy(r->vars);
}

static tl_t op_depthwise(tl_graph *g, tl_t x, tl_t f) { return tl_depthwise_conv2d(g, x, f, NULL); }
static tl_t op_grouped(tl_graph *g, tl_t x, tl_t f)
{
    tl_conv2d_attrs a = {.groups = 2};
    return tl_conv2d(g, x, f, &a);
}
static tl_t op_global(tl_graph *g, tl_t x, tl_t f)
{
    (void)f;
    return tl_global_avg_pool2d(g, x, false);
}
static tl_t op_global_keep(tl_graph *g, tl_t x, tl_t f)
{
    (void)f;
    return tl_global_avg_pool2d(g, x, true);
}

/* tf.nn.depthwise_conv2d: output channel k·m + j is x[k]·filter[k][j]. */
Test(ops_vision_graph, depthwise_channel_order_is_tf)
{
    const int64_t xs[4] = {1, 1, 1, 2}, fs[4] = {1, 1, 2, 2};
    const float x[2] = {1, 2}, f[4] = {10, 20, 30, 40}, want[4] = {10, 20, 60, 80};
    run1 r = run_op(op_depthwise, xs, x, fs, f);
    int64_t d[4];
    cr_assert_eq(tl_rank(r.g, r.y, d), 4);
    cr_assert(d[3] == 4, "c·m = 4 output channels, got %lld", (long long)d[3]);
    const float *y = tl_exec_value(r.p, &r.e, r.y);
    for (int k = 0; k < 4; k++)
        cr_assert_eq(y[k], want[k], "y[%d] = %g, want %g", k, (double)y[k], (double)want[k]);
    run_free(&r);
}

/* tf.nn.depthwise_conv2d's documented example: x (1, 3, 2, 1), kernel
 * (2, 1, 1, 2), VALID. */
Test(ops_vision_graph, depthwise_tf_doc_example)
{
    const int64_t xs[4] = {1, 3, 2, 1}, fs[4] = {2, 1, 1, 2};
    const float x[6] = {1, 2, 3, 4, 5, 6}, f[4] = {1, 2, 3, 4}, want[8] = {10, 14, 14, 20, 18, 26, 22, 32};
    run1 r = run_op(op_depthwise, xs, x, fs, f);
    int64_t d[4];
    tl_rank(r.g, r.y, d);
    cr_assert(d[0] == 1 && d[1] == 2 && d[2] == 2 && d[3] == 2);
    const float *y = tl_exec_value(r.p, &r.e, r.y);
    for (int k = 0; k < 8; k++)
        cr_assert_eq(y[k], want[k], "y[%d] = %g, want %g", k, (double)y[k], (double)want[k]);
    run_free(&r);
}

/* Keras' Conv2D(groups=2): output channels split in halves, each seeing half
 * the input channels. */
Test(ops_vision_graph, grouped_channels_are_tf)
{
    const int64_t xs[4] = {1, 1, 1, 4}, fs[4] = {1, 1, 2, 2};
    const float x[4] = {1, 2, 3, 4}, f[4] = {1, 10, 100, 1000}; /* f[r][q] */
    run1 r = run_op(op_grouped, xs, x, fs, f);
    const float *y = tl_exec_value(r.p, &r.e, r.y);
    cr_assert(y[0] == 1 * 1 + 2 * 100 && y[1] == 3 * 10 + 4 * 1000, "[%g, %g]", (double)y[0], (double)y[1]);
    run_free(&r);
}

Test(ops_vision_graph, global_avg_pool_shapes_and_values)
{
    const int64_t xs[4] = {2, 2, 3, 2};
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    /* Channel 0 of image 0 holds 0, 2, ..., 10: mean 5. */
    const float want[4] = {5, 6, 17, 18};
    for (int keep = 0; keep < 2; keep++) {
        run1 r = run_op(keep ? op_global_keep : op_global, xs, x, NULL, NULL);
        int64_t d[4];
        int rank = tl_rank(r.g, r.y, d);
        if (keep)
            cr_assert(rank == 4 && d[0] == 2 && d[1] == 1 && d[2] == 1 && d[3] == 2);
        else
            cr_assert(rank == 2 && d[0] == 2 && d[1] == 2);
        const float *y = tl_exec_value(r.p, &r.e, r.y);
        for (int k = 0; k < 4; k++)
            cr_assert_eq(y[k], want[k], "y[%d] = %g, want %g", k, (double)y[k], (double)want[k]);
        run_free(&r);
    }
}

Test(ops_vision_graph, output_shapes_follow_tf)
{
    tl_vars *vars;
    tl_graph *g;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
    int64_t xs[4] = {2, 7, 6, 3}, d[4];
    tl_t x = tl_graph_input(g, TL_F32, xs, 4);
    tl_conv2d_attrs s2 = {.strides = {2, 2}, .padding = TL_PAD_SAME}, v = {.strides = {2, 3}};
    tl_t f = var4(g, "f", 3, 3, 3, 8);
    cr_assert_eq(tl_rank(g, tl_conv2d(g, x, f, &s2), d), 4);
    cr_assert(d[0] == 2 && d[1] == 4 && d[2] == 3 && d[3] == 8, "SAME: ceil(7/2), ceil(6/2)");
    tl_rank(g, tl_conv2d(g, x, f, &v), d);
    cr_assert(d[1] == 3 && d[2] == 2, "VALID: ceil((7-2)/2), ceil((6-2)/3): got %lld, %lld", (long long)d[1],
              (long long)d[2]);
    tl_rank(g, tl_max_pool2d(g, x, (int64_t[]){3, 3}, (int64_t[]){2, 2}, TL_PAD_VALID), d);
    cr_assert(d[1] == 3 && d[2] == 2 && d[3] == 3);
    tl_rank(g, tl_resize(g, x, 11, 1, TL_RESIZE_NEAREST), d);
    cr_assert(d[0] == 2 && d[1] == 11 && d[2] == 1 && d[3] == 3);
    cr_assert_eq(tl_graph_status(g), TL_OK, "%s", tl_graph_error(g));
    tl_graph_destroy(g);
    tl_vars_destroy(vars);
}

/* ---- the same bits, and no allocation after the first step ---------------------------- */

static tl_t small_cnn(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)target;
    tl_conv2d_attrs same = {.padding = TL_PAD_SAME}, down = {.strides = {2, 2}, .padding = TL_PAD_SAME};
    tl_t h = tl_relu(g, tl_conv2d(g, var4(g, "img", 4, 12, 12, 3), var4(g, "c1", 3, 3, 3, 16), &same));
    tl_t r = tl_conv2d(g, h, var4(g, "proj", 1, 1, 16, 16), &down);
    h = tl_relu(g, tl_conv2d(g, h, var4(g, "c2", 3, 3, 16, 16), &down));
    h = tl_max_pool2d(g, h, (int64_t[]){2, 2}, (int64_t[]){1, 1}, TL_PAD_SAME);
    h = tl_concat(g, (tl_t[]){h, r}, 2, 3);
    h = tl_resize(g, h, 4, 4, TL_RESIZE_BILINEAR);
    h = tl_global_avg_pool2d(g, h, false); /* (4, 32) */
    return tl_mean(g, tl_softmax_xent(g, tl_dense(g, h, 3, TL_ACT_NONE, "out"), labels));
}

static void step(tg_fixture *f)
{
    cr_assert_eq(tl_program_forward(f->p, &f->e), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_program_backward(f->p, &f->e), TL_OK, "%s", tl_last_error());
}

static void *step_thread(void *arg)
{
    step(arg);
    return NULL;
}

Test(ops_vision_graph, same_bits_twice_and_on_another_thread)
{
    tg_fixture f = tg_setup(small_cnn, TL_MODE_TRAIN);
    int64_t n = f.vars->total;
    float *first = malloc((size_t)n * sizeof(float)), *loss = malloc(3 * sizeof(float));
    step(&f);
    memcpy(first, f.e.param_grad, (size_t)n * sizeof(float));
    loss[0] = *tl_exec_value(f.p, &f.e, f.p->loss);
    memset(f.e.param_grad, 0xff, (size_t)n * sizeof(float)); /* NaNs: every gradient must be rewritten */
    step(&f);
    loss[1] = *tl_exec_value(f.p, &f.e, f.p->loss);
    cr_assert(memcmp(first, f.e.param_grad, (size_t)n * sizeof(float)) == 0, "the second step's gradients differ");
    /* A fresh thread builds its own oneDNN plans: still the same bits. */
    memset(f.e.param_grad, 0xff, (size_t)n * sizeof(float));
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, step_thread, &f), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    loss[2] = *tl_exec_value(f.p, &f.e, f.p->loss);
    cr_assert(memcmp(first, f.e.param_grad, (size_t)n * sizeof(float)) == 0, "another thread's gradients differ");
    cr_assert(memcmp(&loss[0], &loss[1], sizeof(float)) == 0 && memcmp(&loss[0], &loss[2], sizeof(float)) == 0);
    free(first);
    free(loss);
    tg_teardown(&f);
}

/* Two replicas' steps at once, as two device workers run them: each its own
 * buffers, the parameters shared; oneDNN's process-wide primitive cache is
 * shared too. Both get the single-threaded run's bits. */
typedef struct replica {
    const tg_fixture *f;
    tl_exec e;
} replica;

static void *replica_step(void *arg)
{
    replica *r = arg;
    for (int k = 0; k < 2; k++) {
        if (tl_program_forward(r->f->p, &r->e) != TL_OK || tl_program_backward(r->f->p, &r->e) != TL_OK)
            return (void *)1;
    }
    return NULL;
}

Test(ops_vision_graph, concurrent_replicas_same_bits)
{
    tg_fixture f = tg_setup(small_cnn, TL_MODE_TRAIN);
    step(&f);
    int64_t n = f.vars->total;
    replica r[2];
    pthread_t t[2];
    for (int k = 0; k < 2; k++) {
        r[k].f = &f;
        r[k].e = f.e;
        r[k].e.act = malloc((size_t)f.p->act_floats * sizeof(float) + 4);
        r[k].e.grad = malloc((size_t)f.p->grad_floats * sizeof(float) + 4);
        r[k].e.scratch = malloc((size_t)f.p->scratch_floats * sizeof(float) + 4);
        r[k].e.param_grad = malloc((size_t)n * sizeof(float));
        memcpy(r[k].e.act, f.e.act, (size_t)f.p->act_floats * sizeof(float)); /* the inputs */
    }
    for (int k = 0; k < 2; k++)
        cr_assert_eq(pthread_create(&t[k], NULL, replica_step, &r[k]), 0);
    for (int k = 0; k < 2; k++) {
        void *ret;
        cr_assert_eq(pthread_join(t[k], &ret), 0);
        cr_assert_null(ret, "replica %d failed: %s", k, tl_last_error());
        cr_assert(memcmp(r[k].e.param_grad, f.e.param_grad, (size_t)n * sizeof(float)) == 0,
                  "replica %d's gradients differ from the single-threaded step's", k);
        free(r[k].e.act);
        free(r[k].e.grad);
        free(r[k].e.scratch);
        free(r[k].e.param_grad);
    }
    tg_teardown(&f);
}

static long hook_calls;
static void *count_malloc(size_t size, void *ud)
{
    (void)ud;
    __atomic_fetch_add(&hook_calls, 1, __ATOMIC_RELAXED);
    return malloc(size);
}
static void *count_realloc(void *p, size_t size, void *ud)
{
    (void)ud;
    __atomic_fetch_add(&hook_calls, 1, __ATOMIC_RELAXED);
    return realloc(p, size);
}
static void count_free(void *p, void *ud)
{
    (void)ud;
    free(p);
}

/* The first step builds the oneDNN plans; later ones allocate nothing
 * through tpuloop's allocator. (oneDNN's own transient allocations inside
 * dnnl_primitive_execute are not tpuloop's; bench/bench_conv.c counts them.) */
Test(ops_vision_graph, no_allocation_after_the_first_step)
{
    tl_allocator a = {count_malloc, count_realloc, count_free, NULL};
    tl_set_allocator(&a);
    tg_fixture f = tg_setup(small_cnn, TL_MODE_TRAIN);
    step(&f);
    long before = hook_calls;
    for (int k = 0; k < 3; k++)
        step(&f);
    cr_assert_eq(hook_calls, before, "%ld allocations in 3 steps after the first", hook_calls - before);
    tg_teardown(&f);
    tl_set_allocator(NULL);
}

/* ---- shape errors ------------------------------------------------------------------------- */

typedef struct err_graph {
    tl_vars *vars;
    tl_graph *g;
    tl_t x, x2d, xi;
} err_graph;

static err_graph err_setup(void)
{
    err_graph e;
    cr_assert_eq(tl_vars_create(&e.vars), TL_OK);
    cr_assert_eq(tl_graph_create(e.vars, TL_MODE_TRAIN, &e.g), TL_OK);
    int64_t xs[4] = {2, 6, 6, 3}, s2[2] = {4, 6};
    e.x = tl_graph_input(e.g, TL_F32, xs, 4);
    e.x2d = tl_graph_input(e.g, TL_F32, s2, 2);
    e.xi = tl_graph_input(e.g, TL_I32, xs, 4);
    return e;
}

static void err_teardown(err_graph *e)
{
    tl_graph_destroy(e->g);
    tl_vars_destroy(e->vars);
}

/* got must be TL_T_INVALID with the graph's error containing frag, and a
 * later op on a valid tensor returns TL_T_INVALID too. */
static void expect_error(err_graph *e, tl_t got, const char *frag)
{
    cr_assert_eq(got, TL_T_INVALID, "expected an error containing \"%s\"", frag);
    cr_assert_eq(tl_graph_status(e->g), TL_EINVAL);
    cr_assert(strstr(tl_graph_error(e->g), frag) != NULL, "message \"%s\" lacks \"%s\"", tl_graph_error(e->g), frag);
    cr_assert_eq(tl_max_pool2d(e->g, e->x, (int64_t[]){2, 2}, (int64_t[]){2, 2}, TL_PAD_VALID), TL_T_INVALID);
    cr_assert_eq(tl_conv2d(e->g, e->x, e->x, NULL), TL_T_INVALID);
    cr_assert_eq(tl_resize(e->g, e->x, 3, 3, TL_RESIZE_NEAREST), TL_T_INVALID);
    cr_assert(strstr(tl_graph_error(e->g), frag) != NULL, "the first error is kept");
}

#define ERROR_CASE(name, call_expr, frag)                                                                    \
    Test(ops_vision_graph, name)                                                                             \
    {                                                                                                        \
        err_graph e = err_setup();                                                                           \
        tl_graph *g = e.g;                                                                                   \
        (void)g;                                                                                             \
        expect_error(&e, (call_expr), (frag));                                                               \
        err_teardown(&e);                                                                                    \
    }

ERROR_CASE(error_rank_not_4, tl_conv2d(g, e.x2d, var4(g, "f", 3, 3, 3, 4), NULL),
           "conv2d: x must be 4-D (batch, height, width, channels), got (4, 6)")
ERROR_CASE(error_filter_rank, tl_conv2d(g, e.x, e.x2d, NULL),
           "conv2d: filter must be 4-D (height, width, in_channels / groups, out_channels), got (4, 6)")
ERROR_CASE(error_filter_channels, tl_conv2d(g, e.x, var4(g, "f", 3, 3, 4, 8), NULL),
           "conv2d: filter (3, 3, 4, 8) has 4 input channels; x (2, 6, 6, 3) with groups 1 needs 3")
ERROR_CASE(error_grouped_filter_channels,
           tl_conv2d(g, e.x, var4(g, "f", 3, 3, 3, 6), &(tl_conv2d_attrs){.groups = 3}),
           "conv2d: filter (3, 3, 3, 6) has 3 input channels; x (2, 6, 6, 3) with groups 3 needs 1")
ERROR_CASE(error_groups_do_not_divide_channels,
           tl_conv2d(g, e.x, var4(g, "f", 3, 3, 1, 4), &(tl_conv2d_attrs){.groups = 2}),
           "conv2d: groups 2 does not divide the 3 channels of x (2, 6, 6, 3)")
ERROR_CASE(error_groups_do_not_divide_outputs,
           tl_conv2d(g, e.x, var4(g, "f", 3, 3, 1, 4), &(tl_conv2d_attrs){.groups = 3}),
           "conv2d: groups 3 does not divide the 4 output channels of filter (3, 3, 1, 4)")
ERROR_CASE(error_negative_groups, tl_conv2d(g, e.x, var4(g, "f", 3, 3, 3, 4), &(tl_conv2d_attrs){.groups = -1}),
           "conv2d: groups -1 does not divide the 3 channels of x (2, 6, 6, 3)")
ERROR_CASE(error_strides, tl_conv2d(g, e.x, var4(g, "f", 3, 3, 3, 4), &(tl_conv2d_attrs){.strides = {1, -2}}),
           "conv2d: strides (1, -2) must each be in [1, 2^30]")
ERROR_CASE(error_padding, tl_conv2d(g, e.x, var4(g, "f", 3, 3, 3, 4), &(tl_conv2d_attrs){.padding = 7}),
           "conv2d: padding 7 is neither TL_PAD_VALID nor TL_PAD_SAME")
ERROR_CASE(error_valid_window_too_big,
           tl_conv2d(g, e.x, var4(g, "f", 3, 3, 3, 4), &(tl_conv2d_attrs){.dilations = {3, 1}}),
           "conv2d: with VALID padding, the 7 x 3 window of filter (3, 3, 3, 4) (dilations 3, 1) does not fit in "
           "the 6 x 6 image of x (2, 6, 6, 3)")
ERROR_CASE(error_not_float, tl_conv2d(g, e.xi, var4(g, "f", 3, 3, 3, 4), NULL), "conv2d: x must be float32")
ERROR_CASE(error_depthwise_channels, tl_depthwise_conv2d(g, e.x, var4(g, "f", 3, 3, 4, 2), NULL),
           "depthwise_conv2d: filter (3, 3, 4, 2) must have x's 3 channels as its third dimension; x is (2, 6, 6, 3)")
ERROR_CASE(error_depthwise_groups,
           tl_depthwise_conv2d(g, e.x, var4(g, "f", 3, 3, 3, 2), &(tl_conv2d_attrs){.groups = 3}),
           "depthwise_conv2d: groups must be 0 or 1 (the groups are x's channels), got 3")
ERROR_CASE(error_pool_rank, tl_avg_pool2d(g, e.x2d, (int64_t[]){2, 2}, (int64_t[]){2, 2}, TL_PAD_SAME),
           "avg_pool2d: x must be 4-D (batch, height, width, channels), got (4, 6)")
ERROR_CASE(error_pool_ksize, tl_max_pool2d(g, e.x, (int64_t[]){0, 2}, (int64_t[]){2, 2}, TL_PAD_SAME),
           "max_pool2d: ksize (0, 2) must each be in [1, 2^30]")
ERROR_CASE(error_pool_valid_too_big, tl_max_pool2d(g, e.x, (int64_t[]){7, 2}, (int64_t[]){1, 1}, TL_PAD_VALID),
           "max_pool2d: with VALID padding, the 7 x 2 window does not fit in the 6 x 6 image of x (2, 6, 6, 3)")
ERROR_CASE(error_pool_padding, tl_avg_pool2d(g, e.x, (int64_t[]){2, 2}, (int64_t[]){2, 2}, (tl_padding)2),
           "avg_pool2d: padding 2 is neither TL_PAD_VALID nor TL_PAD_SAME")
ERROR_CASE(error_global_rank, tl_global_avg_pool2d(g, e.x2d, true),
           "global_avg_pool2d: x must be 4-D (batch, height, width, channels), got (4, 6)")
ERROR_CASE(error_resize_size, tl_resize(g, e.x, 0, 4, TL_RESIZE_BILINEAR),
           "resize: the size (0, 4) must be in [1, 2^30] on each axis")
ERROR_CASE(error_resize_method, tl_resize(g, e.x, 4, 4, (tl_resize_method)5),
           "resize: method 5 is neither TL_RESIZE_BILINEAR nor TL_RESIZE_NEAREST")
ERROR_CASE(error_resize_rank, tl_resize(g, e.x2d, 4, 4, TL_RESIZE_NEAREST),
           "resize: x must be 4-D (batch, height, width, channels), got (4, 6)")

/* Every op given TL_T_INVALID returns TL_T_INVALID (and names it when it
 * is the first error). */
Test(ops_vision_graph, invalid_inputs_give_invalid)
{
    err_graph e = err_setup();
    tl_t f = var4(e.g, "f", 3, 3, 3, 4);
    cr_assert_eq(tl_conv2d(e.g, TL_T_INVALID, f, NULL), TL_T_INVALID);
    cr_assert(strstr(tl_graph_error(e.g), "conv2d: x is not a tensor of this graph") != NULL, "%s",
              tl_graph_error(e.g));
    cr_assert_eq(tl_conv2d(e.g, e.x, TL_T_INVALID, NULL), TL_T_INVALID);
    cr_assert_eq(tl_depthwise_conv2d(e.g, TL_T_INVALID, f, NULL), TL_T_INVALID);
    cr_assert_eq(tl_max_pool2d(e.g, TL_T_INVALID, (int64_t[]){2, 2}, (int64_t[]){2, 2}, TL_PAD_VALID), TL_T_INVALID);
    cr_assert_eq(tl_avg_pool2d(e.g, TL_T_INVALID, (int64_t[]){2, 2}, (int64_t[]){2, 2}, TL_PAD_VALID), TL_T_INVALID);
    cr_assert_eq(tl_global_avg_pool2d(e.g, TL_T_INVALID, false), TL_T_INVALID);
    cr_assert_eq(tl_resize(e.g, TL_T_INVALID, 2, 2, TL_RESIZE_NEAREST), TL_T_INVALID);
    err_teardown(&e);
}

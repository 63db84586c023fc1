/* SPMD partitioning (src/graph/partition.h) run for real: a replica's C
 * cores are C threads, each running its own core's program over its tile of
 * the images, meeting in the halo gathers, gathers and sums of ops_spmd.c.
 * The loss and every variable's gradient equal the unpartitioned program's
 * to float tolerance at grids [1,2,1,1], [1,1,2,1], [1,2,2,1], [1,4,1,1] and
 * [2,1,2,1], on an image size that splits unevenly; every core holds the
 * same bits of the loss; two runs give the same bits. */
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

enum { B = 2, H = 13, W = 9, CIN = 3, CLASSES = 4, MAXCORES = 4 }; /* 13 rows: no empty tile in 4 at any layer */

/* A BN-free conv net over every rule of the partitioner: convs (3x3 SAME,
 * 3x3 stride 2, 1x1), a max pool with overlapping windows, a residual add,
 * a bias and ReLUs on tiles, global average pooling, then whole ops. */
static tl_t conv_net(tl_graph *g, tl_t x, tl_t labels)
{
    tl_initializer glorot = {TL_INIT_GLOROT_UNIFORM, 0, 0};
    tl_conv2d_attrs same = {.strides = {1, 1}, .dilations = {1, 1}, .padding = TL_PAD_SAME, .groups = 1};
    tl_conv2d_attrs down = {.strides = {2, 2}, .dilations = {1, 1}, .padding = TL_PAD_SAME, .groups = 1};
    tl_t f1 = tl_variable(g, "c1/kernel", (int64_t[]){3, 3, CIN, 6}, 4, glorot);
    tl_t b1 = tl_variable(g, "c1/bias", (int64_t[]){6}, 1, (tl_initializer){TL_INIT_CONSTANT, 0.1, 0});
    tl_t h = tl_relu(g, tl_bias_add(g, tl_conv2d(g, x, f1, &same), b1));
    tl_t f2 = tl_variable(g, "c2/kernel", (int64_t[]){3, 3, 6, 6}, 4, glorot);
    tl_t r = tl_relu(g, tl_add(g, tl_conv2d(g, h, f2, &same), h));
    tl_t p = tl_max_pool2d(g, r, (int64_t[]){3, 3}, (int64_t[]){2, 2}, TL_PAD_SAME);
    tl_t f3 = tl_variable(g, "c3/kernel", (int64_t[]){3, 3, 6, 8}, 4, glorot);
    tl_t f4 = tl_variable(g, "c4/kernel", (int64_t[]){1, 1, 8, 8}, 4, glorot);
    tl_t q = tl_conv2d(g, tl_relu(g, tl_conv2d(g, p, f3, &down)), f4, &same);
    tl_t logits = tl_dense(g, tl_global_avg_pool2d(g, q, false), CLASSES, TL_ACT_NONE, "dense");
    return tl_mean(g, tl_softmax_xent(g, logits, labels));
}

typedef struct model {
    tl_vars *vars;
    tl_graph *g;
    tl_t x, labels, loss;
    float *params, *xv;
    int32_t yv[B];
} model;

/* The built-in cnn (tpuloop/models.h): conv, batch norm and ReLU stem, two
 * residual stages, the second strided with a 1x1 shortcut. */
static tl_t cnn(tl_graph *g, tl_t x, tl_t labels)
{
    tl_model_args a = {TL_MODE_TRAIN, x, labels, B, "{\"filters\": [4, 8], \"num_classes\": 4}", 0};
    tl_model_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.loss = spec.logits = spec.predictions = TL_T_INVALID;
    cr_assert_eq(tl_model_cnn(g, &a, &spec, NULL), TL_OK, "%s", tl_graph_error(g));
    return spec.loss;
}

/* images of rank 4 (B, H, W, CIN), or of rank 3 (B, H, W) with images3. */
static void model_build_ex(model *m, tl_t (*net)(tl_graph *, tl_t, tl_t), bool images3)
{
    memset(m, 0, sizeof *m);
    cr_assert_eq(tl_vars_create(&m->vars), TL_OK);
    cr_assert_eq(tl_graph_create(m->vars, TL_MODE_TRAIN, &m->g), TL_OK);
    m->x = tl_graph_input(m->g, TL_F32, (int64_t[]){B, H, W, CIN}, images3 ? 3 : 4);
    m->labels = tl_graph_input(m->g, TL_I32, (int64_t[]){B}, 1);
    m->loss = net(m->g, m->x, m->labels);
    cr_assert_eq(tl_graph_status(m->g), TL_OK, "%s", tl_graph_error(m->g));
    cr_assert_eq(tl_vars_layout(m->vars), TL_OK);
    m->params = calloc((size_t)m->vars->total, sizeof(float));
    tl_vars_initialize(m->vars, 7, m->params);
    m->xv = malloc(B * H * W * CIN * sizeof(float));
    for (int i = 0; i < B * H * W * CIN; i++)
        m->xv[i] = (float)((i * 7919) % 23 - 11) / 11.0f;
    for (int b = 0; b < B; b++)
        m->yv[b] = (b * 3 + 1) % CLASSES;
}

static void model_build(model *m, tl_t (*net)(tl_graph *, tl_t, tl_t))
{
    model_build_ex(m, net, false);
}

static void model_free(model *m)
{
    free(m->params);
    free(m->xv);
    tl_graph_destroy(m->g);
    tl_vars_destroy(m->vars);
}

/* Runs the partitioned replica at grid (its cores on threads,
 * tl_spmd_run): its loss and its gradient into grad (vars->total). */
static float run_partitioned(const model *m, const int64_t grid[4], float *grad, int *gathered)
{
    tl_spmd_run *r;
    cr_assert_eq(tl_spmd_run_create(m->g, m->x, m->loss, true, grid, m->params, &r), TL_OK, "%s", tl_last_error());
    spmdt_feed feeds[2] = {{m->x, m->xv}, {m->labels, m->yv}};
    float loss = spmdt_step(r, m->loss, feeds, 2, grad, "partitioned");
    *gathered = tl_spmd_run_partition(r, 0)->gathered;
    tl_spmd_run_destroy(r);
    return loss;
}

static float run_whole(const model *m, float *grad)
{
    spmdt_feed feeds[2] = {{m->x, m->xv}, {m->labels, m->yv}};
    return spmdt_run_whole(m->g, m->loss, m->params, feeds, 2, grad);
}

/* The partitioned replica against the whole program, at every grid: the
 * loss, every variable's gradient (and a state variable's update) to float
 * tolerance, the same bits on a second run; gathers counts the ops
 * gathered at each grid. */
static void check_grids(tl_t (*net)(tl_graph *, tl_t, tl_t), const int *gathers, bool images3)
{
    static const int64_t grids[][4] = {{1, 2, 1, 1}, {1, 1, 2, 1}, {1, 2, 2, 1}, {1, 4, 1, 1}, {2, 1, 2, 1}};
    model m;
    model_build_ex(&m, net, images3);
    float *want = malloc((size_t)m.vars->total * sizeof(float));
    float *got = malloc((size_t)m.vars->total * sizeof(float)), *again = malloc((size_t)m.vars->total * sizeof(float));
    float loss = run_whole(&m, want);
    for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++) {
        const int64_t *g = grids[gi];
        char gs[48];
        snprintf(gs, sizeof gs, "[%lld,%lld,%lld,%lld]", (long long)g[0], (long long)g[1], (long long)g[2],
                 (long long)g[3]);
        int gathered;
        float l = run_partitioned(&m, g, got, &gathered);
        cr_assert_eq(gathered, gathers[gi], "grid %s: %d ops gathered", gs, gathered);
        cr_assert(fabsf(l - loss) <= 1e-5f * fabsf(loss), "grid %s: loss %.9g, whole %.9g", gs, (double)l,
                  (double)loss);
        spmdt_assert_grads(m.vars, want, got, 2e-5, 0, gs);
        float l2 = run_partitioned(&m, g, again, &gathered);
        cr_assert(memcmp(&l, &l2, sizeof l) == 0 && memcmp(got, again, (size_t)m.vars->total * sizeof(float)) == 0,
                  "grid %s: a second run gives the same bits", gs);
    }
    free(want), free(got), free(again);
    model_free(&m);
}

Test(spmd, partitioned_conv_net_equals_the_whole)
{
    /* Every op has a rule for tiles, but global pooling with the batch
     * split gathers (its cores hold other examples). */
    static const int gathers[] = {0, 0, 0, 0, 1};
    check_grids(conv_net, gathers, false);
}

/* The cnn's batch norms take the replica's statistics: their gradients
 * and the moving statistics' updates equal the whole program's. */
Test(spmd, partitioned_cnn_equals_the_whole)
{
    static const int gathers[] = {0, 0, 0, 0, 1};
    check_grids(cnn, gathers, false);
}

/* Images (batch, height, width), as the Fashion-MNIST job feeds them: the
 * cnn's reshape to (batch, height, width, 1) keeps the tiles. */
Test(spmd, partitioned_cnn_on_rank3_images_equals_the_whole)
{
    static const int gathers[] = {0, 0, 0, 0, 1};
    check_grids(cnn, gathers, true);
}

/* A value read by ops on tiles and by whole ops is refused, naming it. */
Test(spmd, a_variable_read_both_ways_is_refused)
{
    tl_vars *vars;
    tl_graph *g;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
    tl_t x = tl_graph_input(g, TL_F32, (int64_t[]){1, 4, 4, 2}, 4);
    tl_t s = tl_variable(g, "scale", (int64_t[]){2}, 1, (tl_initializer){TL_INIT_CONSTANT, 1, 0});
    tl_t y = tl_mul(g, x, s);                     /* on tiles */
    tl_t z = tl_mul(g, tl_global_avg_pool2d(g, y, false), s); /* whole */
    tl_t loss = tl_mean(g, z);
    cr_assert_eq(tl_graph_status(g), TL_OK, "%s", tl_graph_error(g));
    (void)loss;
    tl_partition pt;
    cr_assert_eq(tl_partition_graph(g, x, (int64_t[]){1, 2, 1, 1}, 0, &pt), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "variable scale is read both by ops on tiles and by whole ops") != NULL, "%s",
              tl_last_error());
    tl_graph_destroy(g);
    tl_vars_destroy(vars);
}

/* A grid that leaves a core no rows is refused, naming the dimension. */
Test(spmd, an_empty_tile_is_refused)
{
    tl_vars *vars;
    tl_graph *g;
    cr_assert_eq(tl_vars_create(&vars), TL_OK);
    cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
    tl_t x = tl_graph_input(g, TL_F32, (int64_t[]){1, 5, 4, 2}, 4);
    tl_t loss = tl_mean(g, tl_relu(g, x));
    cr_assert_eq(tl_graph_status(g), TL_OK);
    (void)loss;
    tl_partition pt;
    cr_assert_eq(tl_partition_graph(g, x, (int64_t[]){1, 4, 1, 1}, 3, &pt), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "dimension 1 of size 5 split in 4 leaves core 3 an empty tile") != NULL, "%s",
              tl_last_error());
    tl_graph_destroy(g);
    tl_vars_destroy(vars);
}

/* A core that fails (here a label outside the classes, which every core's
 * loss reads) ends the step on every core, none left waiting at the
 * barrier, and the step reports the failure's own message. */
Test(spmd, a_failing_core_ends_the_step_with_its_message)
{
    model m;
    model_build(&m, conv_net);
    m.yv[1] = CLASSES + 3;
    tl_spmd_run *r;
    cr_assert_eq(tl_spmd_run_create(m.g, m.x, m.loss, true, (int64_t[]){1, 2, 2, 1}, m.params, &r), TL_OK, "%s",
                 tl_last_error());
    tl_spmd_run_feed(r, m.x, m.xv);
    tl_spmd_run_feed(r, m.labels, m.yv);
    cr_assert_eq(tl_spmd_run_step(r), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "label 7") != NULL, "%s", tl_last_error());
    tl_spmd_run_destroy(r);
    model_free(&m);
}

/* Convs on row tiles reading their tile in place (TL_OP_SPMD_CONV: the
 * interior from the tile, the rows past its edges from small gathered
 * regions), made to run at these small sizes: the same results as the
 * whole program at every grid (grids that split columns keep the halo
 * path), and core 0 of [1, 2, 1, 1] runs them. */
Test(spmd, convs_reading_their_tiles_in_place_equal_the_whole)
{
    int64_t was = tl_partition_inplace_min;
    tl_partition_inplace_min = 1;
    static const int conv_gathers[] = {0, 0, 0, 0, 1}, cnn_gathers[] = {0, 0, 0, 0, 1};
    check_grids(conv_net, conv_gathers, false);
    check_grids(cnn, cnn_gathers, false);
    model m;
    model_build(&m, cnn);
    tl_partition pt;
    cr_assert_eq(tl_partition_graph(m.g, m.x, (int64_t[]){1, 2, 1, 1}, 0, &pt), TL_OK, "%s", tl_last_error());
    int in_place = 0, halos = 0;
    for (int i = 0; i < pt.g->n; i++) {
        in_place += pt.g->nodes[i].op == TL_OP_SPMD_CONV;
        halos += pt.g->nodes[i].op == TL_OP_SPMD_HALO;
    }
    cr_assert(in_place >= 3, "%d convs read their tile in place, %d gather halos", in_place, halos);
    tl_partition_free(&pt);
    /* Images and rows split together: each core's regions are of its images. */
    float *want = malloc((size_t)m.vars->total * sizeof(float)), *got = malloc((size_t)m.vars->total * sizeof(float));
    float loss = run_whole(&m, want);
    int gathered;
    float l = run_partitioned(&m, (int64_t[]){2, 2, 1, 1}, got, &gathered);
    cr_assert(fabsf(l - loss) <= 1e-5f * fabsf(loss), "[2,2,1,1]: loss %.9g, whole %.9g", (double)l, (double)loss);
    spmdt_assert_grads(m.vars, want, got, 2e-5, 0, "[2,2,1,1]");
    free(want), free(got);
    model_free(&m);
    tl_partition_inplace_min = was;
}

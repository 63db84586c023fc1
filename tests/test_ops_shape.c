/* The shape family through the tracer, planner and executor: whole-graph
 * gradients against finite differences (chains of the ops, inputs used
 * twice), values of each op, views sharing their input's bytes, int64
 * indices, gather's run-time range error, and the tracing errors' text. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph_util.h"

TestSuite(ops_shape);

/* ---- whole-graph gradients -------------------------------------------------------- */

/* transpose (explicit, negative and default perm), expand_dims / squeeze
 * (views, and copies of a variable), broadcast_to; h and k used twice. */
static tl_t transpose_views(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_TANH, "a");                           /* (4, 6) */
    tl_t r = tl_reshape(g, h, (const int64_t[]){4, 2, 3}, 3);
    tl_t t = tl_transpose(g, r, (const int[]){2, 0, -2}, 3);                 /* (3, 4, 2) */
    tl_t s = tl_squeeze(g, tl_expand_dims(g, t, 1), NULL, 0);               /* (3, 4, 2) */
    tl_t u = tl_transpose(g, s, NULL, 0);                                   /* (2, 4, 3) */
    tl_t v = tl_reshape(g, u, (const int64_t[]){4, 6}, 2);
    tl_t k = tl_variable(g, "k", (const int64_t[]){6}, 1, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t kb = tl_broadcast_to(g, tl_expand_dims(g, k, 0), (const int64_t[]){4, 6}, 2);
    tl_t kk = tl_squeeze(g, tl_expand_dims(g, tl_expand_dims(g, k, -1), 0), (const int[]){0, -1}, 2); /* (6,) */
    tl_t c = tl_concat(g, (const tl_t[]){v, h, kb}, 3, 1);                  /* (4, 18) */
    tl_t z = tl_bias_add(g, tl_dense(g, c, 6, TL_ACT_SIGMOID, "b"), kk);
    return tl_mse(g, z, target);
}

/* gather along axes 0 and 1, with int32 indices that repeat (labels are
 * 0, 1, 2, 0) and rank-2 indices along axis 1; one_hot beside them. */
static tl_t gathers(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    tl_t table = tl_variable(g, "table", (const int64_t[]){5, 6}, 2, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t rows = tl_gather(g, table, labels, 0);                              /* (4, 6) */
    tl_t cols = tl_gather(g, table, labels, -1);                             /* (5, 4) */
    tl_t p3 = tl_variable(g, "p3", (const int64_t[]){2, 3, 2}, 3, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t idx2 = tl_expand_dims(g, tl_expand_dims(g, labels, 0), -1);         /* (1, 4, 1) int32 */
    tl_t g2 = tl_gather(g, p3, idx2, 1);                                     /* (2, 1, 4, 1, 2) */
    tl_t g2r = tl_transpose(g, tl_reshape(g, g2, (const int64_t[]){2, 4, 2}, 3), (const int[]){1, 0, 2}, 3);
    tl_t oh = tl_one_hot(g, labels, 6, 1.0, 0.0, -1);                        /* (4, 6) */
    tl_t c = tl_concat(g, (const tl_t[]){rows, tl_transpose(g, cols, NULL, 0), oh, x,
                                         tl_reshape(g, g2r, (const int64_t[]){4, 4}, 2)}, 5, 1); /* (4, 27) */
    tl_t z = tl_dense(g, c, 6, TL_ACT_TANH, "g");
    return tl_mse(g, z, target);
}

/* split (equal and sized), stack, pad, tile; h split three ways. */
static tl_t pieces(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t h = tl_dense(g, x, 6, TL_ACT_TANH, "p");                           /* (4, 6) */
    tl_t parts[3], sized[2];
    tl_split(g, h, 3, -1, parts);                                            /* 3 × (4, 2) */
    tl_split_sizes(g, h, (const int64_t[]){-1, 2}, 2, 1, sized);             /* (4, 4), (4, 2) */
    tl_t st = tl_stack(g, parts, 3, 1);                                      /* (4, 3, 2) */
    tl_t pd = tl_pad(g, st, (const int64_t[]){0, 0, 1, 0, 0, 1}, 0.5);       /* (4, 4, 3) */
    tl_t tl2 = tl_tile(g, sized[1], (const int64_t[]){1, 2});                /* (4, 4) */
    tl_t tl3 = tl_tile(g, tl_expand_dims(g, tl2, -1), (const int64_t[]){1, 1, 3}); /* (4, 4, 3) */
    tl_t q = tl_stack(g, (const tl_t[]){sized[0], tl2}, 2, -1);              /* (4, 4, 2) */
    tl_t c = tl_concat(g, (const tl_t[]){pd, tl3, q}, 3, 2);                 /* (4, 4, 8) */
    tl_t z = tl_dense(g, tl_reshape(g, c, (const int64_t[]){4, 32}, 2), 6, TL_ACT_SIGMOID, "q");
    return tl_mse(g, z, target);
}

/* The shape ops straight on variables, whose gradients live in the
 * parameter slab: v feeds transpose, pad and expand_dims (a copy, as a
 * variable's view is), so its gradient adds up three ways. */
static tl_t on_variables(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x;
    tl_t v = tl_variable(g, "v", (const int64_t[]){2, 3}, 2, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t b = tl_variable(g, "b", (const int64_t[]){3, 1}, 2, (tl_initializer){TL_INIT_UNIFORM, -1, 1});
    tl_t t = tl_reshape(g, tl_transpose(g, v, NULL, 0), (const int64_t[]){1, 6}, 2);
    tl_t tt = tl_tile(g, t, (const int64_t[]){4, 1});                                         /* (4, 6) */
    tl_t bb = tl_reshape(g, tl_broadcast_to(g, b, (const int64_t[]){4, 3, 2}, 3), (const int64_t[]){4, 6}, 2);
    tl_t pv = tl_pad(g, v, (const int64_t[]){1, 1, 0, 0}, -1.0);                              /* (4, 3) */
    tl_t gv = tl_gather(g, pv, labels, 0);                                                    /* (4, 3) */
    tl_t sq = tl_squeeze(g, tl_expand_dims(g, v, 0), NULL, 0);                                /* (2, 3) */
    tl_t st = tl_tile(g, tl_reshape(g, sq, (const int64_t[]){1, 6}, 2), (const int64_t[]){4, 1});
    tl_t y = tl_tanh(g, tl_concat(g, (const tl_t[]){tt, bb, gv, st}, 4, 1));                 /* (4, 21) */
    return tl_mse(g, tl_dense(g, y, 6, TL_ACT_NONE, "o"), target);
}

Test(ops_shape, gradients_transpose_views_broadcast) { tg_check_gradients(transpose_views, TL_MODE_TRAIN); }
Test(ops_shape, gradients_gather_repeated_indices_one_hot) { tg_check_gradients(gathers, TL_MODE_TRAIN); }
Test(ops_shape, gradients_split_stack_pad_tile) { tg_check_gradients(pieces, TL_MODE_TRAIN); }
Test(ops_shape, gradients_ops_on_variables_used_three_times) { tg_check_gradients(on_variables, TL_MODE_TRAIN); }

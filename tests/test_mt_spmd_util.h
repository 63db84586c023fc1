/*
 * test_mt_spmd_util.h — what the partitioner's threaded tests share
 * (test_mt_spmd.c: spatial tiles; test_mt_spmd_tp.c: tensor parallelism):
 * the unpartitioned program run once as the reference, one step of a
 * partitioned replica with every core's loss checked, and the comparison
 * of two gradients variable by variable. test_mt_spmd_util.c holds no
 * tests; it uses only the assertion macros of the TSan stand-in.
 */
#ifndef TPULOOP_TESTS_MT_SPMD_UTIL_H
#define TPULOOP_TESTS_MT_SPMD_UTIL_H

#include "graph/spmd_run.h"

/* An input of the graph and its whole value (float32, or int32 labels). */
typedef struct spmdt_feed {
    tl_t t;
    const void *data;
} spmdt_feed;

/* g's unpartitioned program, forward and backward, on params: its loss,
 * and its gradient (the variable slab) into grad. */
float spmdt_run_whole(const tl_graph *g, tl_t loss, const float *params, const spmdt_feed *feeds, int nfeeds,
                      float *grad);

/* One step of r fed feeds: every core holds core 0's loss bits (what names
 * the run in a failure); the replica's gradient into grad; the loss. */
float spmdt_step(tl_spmd_run *r, tl_t loss, const spmdt_feed *feeds, int nfeeds, float *grad, const char *what);

/* Each variable's gradient in got is within rel of its largest entry in
 * want (+ abs), and want has one. */
void spmdt_assert_grads(const tl_vars *vars, const float *want, const float *got, double rel, double abs,
                        const char *what);

#endif /* TPULOOP_TESTS_MT_SPMD_UTIL_H */

/*
 * spmd_run.h — one partitioned replica run by itself (partition.h): each of
 * its C cores' programs on a thread of its own, over buffers of its own,
 * meeting at one barrier. What the tests of the partitioner and
 * bench/bench_spmd.c run; the estimator's device workers are to hold the
 * same per-core state (a partition, a program, a tl_exec and its tl_spmd).
 *
 *     tl_spmd_run *r;
 *     tl_spmd_run_create(g, images, loss, true, grid, params, &r);
 *     tl_spmd_run_feed(r, images, whole_images);   // each core its tile
 *     tl_spmd_run_feed(r, labels, whole_labels);   // each core a copy
 *     tl_spmd_run_step(r);                         // forward and backward
 *     tl_spmd_run_grad(r, grad);                   // the replica's gradient
 *
 * Core q's thread is pinned to CPU q mod (the CPUs this process may use)
 * when pin is set (tl_spmd_run_pin), else it runs where the OS puts it.
 */
#ifndef TL_GRAPH_SPMD_RUN_H
#define TL_GRAPH_SPMD_RUN_H

#include "partition.h"
#include "program.h"

typedef struct tl_spmd_run tl_spmd_run;

/* Partitions g over grid with input `input` split (tl_partition_graph) and
 * compiles each core's program with its loss (backward: with gradients);
 * params is the parameter slab of g's variables, read-only. Errors: those
 * of the partitioner and the compiler; TL_ENOMEM. */
tl_status tl_spmd_run_create(const tl_graph *g, tl_t input, tl_t loss, bool backward, const int64_t grid[4],
                             const float *params, tl_spmd_run **out);
/* The same for a replica of ncores cores splitting g's variables
 * (tl_partition_tensor; var_split is borrowed for the run's life): every
 * input is fed whole to every core. */
tl_status tl_spmd_run_create_tensor(const tl_graph *g, const int8_t *var_split, int ncores, tl_t loss, bool backward,
                                    const float *params, tl_spmd_run **out);
void tl_spmd_run_destroy(tl_spmd_run *r);

int tl_spmd_run_cores(const tl_spmd_run *r);
void tl_spmd_run_pin(tl_spmd_run *r, bool pin);
/* Core q's partition (its graph, map and var_partial) and program. */
const tl_partition *tl_spmd_run_partition(const tl_spmd_run *r, int q);
const tl_program *tl_spmd_run_program(const tl_spmd_run *r, int q);
const tl_exec *tl_spmd_run_exec(const tl_spmd_run *r, int q);

/* Gives every core source tensor t of g from its whole value: the
 * partitioned input's tile, or a copy (int32 tensors as their bytes). */
void tl_spmd_run_feed(tl_spmd_run *r, tl_t t, const void *whole);

/* One step on every core: the forward pass, then the backward pass when
 * the programs have one. Errors: the first core's failure (the others stop
 * at the barrier, which it breaks), with its message. */
tl_status tl_spmd_run_step(tl_spmd_run *r);

/* The loss after a step (every core holds the same bits). */
float tl_spmd_run_loss(const tl_spmd_run *r);
/* The replica's gradient (g's variable slab) after a step: the sum over
 * the cores, in core order, of a variable's partials, or core 0's whole. */
void tl_spmd_run_grad(const tl_spmd_run *r, float *out);

#endif /* TL_GRAPH_SPMD_RUN_H */

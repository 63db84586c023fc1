/*
 * test_graph_util.h — a whole graph on a replica's memory, for the tests of
 * ops through the tracer, planner and executor (tests/test_graph_grad.c,
 * tests/test_ops_*.c). test_graph_util.c holds no tests.
 */
#ifndef TPULOOP_TESTS_GRAPH_UTIL_H
#define TPULOOP_TESTS_GRAPH_UTIL_H

#include "graph/program.h"

typedef struct tg_fixture {
    tl_vars *vars;
    tl_graph *g;
    tl_program *p;
    tl_exec e;
    float *params;
} tg_fixture;

/* Returns the scalar loss of a graph built on inputs x (4, 6) float32 normal,
 * labels (4,) int32 and target (4, 6) float32 uniform [0, 1). */
typedef tl_t (*tg_builder)(tl_graph *g, tl_t x, tl_t labels, tl_t target);

/* Traces build(), compiles it with a backward pass, initialises parameters
 * (seed 5) and fills the inputs; labels are i % classes. */
tg_fixture tg_setup_labels(tg_builder build, tl_mode mode, int classes);
tg_fixture tg_setup(tg_builder build, tl_mode mode); /* classes 3 */
void tg_teardown(tg_fixture *f);
/* Runs the forward pass (asserting success) and returns the loss. */
double tg_loss_at(tg_fixture *f);

/* Every parameter's gradient from the backward pass against central
 * differences of the loss (h = 1e-2, relative RMS error < 1e-2). */
void tg_check_gradients_labels(tg_builder build, tl_mode mode, int classes);
void tg_check_gradients(tg_builder build, tl_mode mode);

#endif /* TPULOOP_TESTS_GRAPH_UTIL_H */

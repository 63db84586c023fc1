/*
 * test_models_util.h — what the tests of the built-in models share
 * (tests/test_models_dcn.c, _dlrm.c, _transformer.c): a model_fn's traced
 * graph, its variables by name, and its compiled program's buffers, forward
 * loss and parameters. test_models_util.c holds no tests.
 */
#ifndef TPULOOP_TESTS_MODELS_UTIL_H
#define TPULOOP_TESTS_MODELS_UTIL_H

#include "graph/program.h"
#include "tpuloop/models.h"

/* A model_fn called on a fresh graph: its arguments, spec and status. */
typedef struct traced {
    tl_vars *vars;
    tl_graph *g;
    tl_model_args args;
    tl_model_spec spec;
    tl_status st;
} traced;

/* A zeroed traced with its variables and graph (mode) created, the spec's
 * tensors invalid and args.mode set. */
traced tm_trace_begin(tl_mode mode);
void tm_untrace(traced *t);

const tl_var *tm_find_var(const tl_vars *vars, const char *name);
/* Asserts variable name has shape (d0) when d1 is 0, else (d0, d1). */
void tm_assert_var(const tl_vars *vars, const char *name, int64_t d0, int64_t d1);
/* The embedding leaf of feature f, or TL_T_INVALID. */
tl_t tm_leaf(const tl_graph *g, int f);

/* Lays out t's variables, compiles its loss with backward into *p and
 * returns the parameters as the runtime draws them (seed 11). */
float *tm_compile(traced *t, tl_program **p);
/* e's buffers for p, on params, loss_scale 1; tm_exec_free frees them. */
void tm_exec_alloc(tl_exec *e, const tl_program *p, const tl_vars *vars, float *params);
void tm_exec_free(tl_exec *e);
/* Runs the forward pass (asserting success) and returns the loss. */
double tm_loss(tl_program *p, tl_exec *e, tl_t loss);
/* Variable name's values in params (asserting it exists). */
const float *tm_param(const tl_vars *vars, const float *params, const char *name);

#endif /* TPULOOP_TESTS_MODELS_UTIL_H */

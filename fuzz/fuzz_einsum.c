/* fuzz_einsum.c — libFuzzer target for tl_einsum's equation parser and
 * lowering. The first bytes pick 1 to 3 operands of rank 0..4 with dims
 * 1..3 (so most equations can fit some shapes), the rest is the equation,
 * NUL-terminated in a block of exactly its size. Tracing must succeed or
 * leave an error message in the graph; on success the result must be a
 * float32 tensor of the graph and the program must compile and run, with
 * a backward pass, on zero-filled inputs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/program.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    int n = 1 + data[0] % 3;
    size_t used = 1;
    int64_t shapes[3][4];
    int ranks[3];
    for (int k = 0; k < n; k++) {
        uint8_t b = data[used++];
        ranks[k] = b % 5;
        for (int d = 0; d < ranks[k]; d++)
            shapes[k][d] = 1 + (b >> (2 + d)) % 3;
    }
    if (used > size)
        return 0;
    size_t len = size - used;
    char *eq = malloc(len + 1);
    if (eq == NULL)
        return 0;
    memcpy(eq, data + used, len);
    eq[len] = '\0';
    tl_vars *vars = NULL;
    tl_graph *g = NULL;
    if (tl_vars_create(&vars) != TL_OK || tl_graph_create(vars, TL_MODE_TRAIN, &g) != TL_OK)
        abort();
    tl_t xs[3];
    static const char *const names[3] = {"a", "b", "c"};
    for (int k = 0; k < n; k++)
        xs[k] = tl_variable(g, names[k], shapes[k], ranks[k], (tl_initializer){TL_INIT_CONSTANT, 0.5, 0});
    tl_t y = tl_einsum(g, eq, xs, n);
    if (y == TL_T_INVALID) {
        if (tl_graph_status(g) == TL_OK || tl_graph_error(g)[0] == '\0')
            abort(); /* every failure says why */
    } else {
        const tl_node *nd = tl_graph_node(g, y);
        if (nd == NULL || nd->dtype != TL_F32)
            abort();
        tl_t loss = tl_sum(g, y);
        tl_program *p = NULL;
        if (tl_graph_status(g) != TL_OK || tl_vars_layout(vars) != TL_OK ||
            tl_program_compile(g, loss, true, &p) != TL_OK)
            abort();
        tl_exec e;
        memset(&e, 0, sizeof e);
        float *params = calloc((size_t)vars->total + 1, sizeof(float));
        e.act = calloc((size_t)p->act_floats + 1, sizeof(float));
        e.grad = calloc((size_t)p->grad_floats + 1, sizeof(float));
        e.mask = calloc((size_t)p->mask_bytes + 1, 1);
        e.scratch = calloc((size_t)p->scratch_floats + 1, sizeof(float));
        e.param_grad = calloc((size_t)vars->total + 1, sizeof(float));
        e.params = params;
        e.loss_scale = 1.0f;
        if (params == NULL || e.act == NULL || e.grad == NULL || e.mask == NULL || e.scratch == NULL ||
            e.param_grad == NULL)
            abort();
        if (tl_program_forward(p, &e) != TL_OK || tl_program_backward(p, &e) != TL_OK)
            abort();
        free(params), free(e.act), free(e.grad), free(e.mask), free(e.scratch), free(e.param_grad);
        tl_program_destroy(p);
    }
    tl_graph_destroy(g);
    tl_vars_destroy(vars);
    free(eq);
    return 0;
}

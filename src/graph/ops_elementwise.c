/* ops_elementwise.c — broadcasting binary ops, unary math, activations, casts. */
#include "ops.h"

static tl_status forward(const tl_program *p, tl_exec *e, int i)
{
    (void)p, (void)e, (void)i;
    return tl_error(TL_ENOTIMPL, "elementwise: no op of this family is built yet");
}

static tl_status backward(const tl_program *p, tl_exec *e, int i, int64_t *cursor)
{
    (void)p, (void)e, (void)i, (void)cursor;
    return tl_error(TL_ENOTIMPL, "elementwise: no op of this family is built yet");
}

const tl_op_family tl_ops_elementwise = {"elementwise", TL_OP_EW_FIRST_, TL_OP_EW_LAST_, forward, backward, NULL, NULL};

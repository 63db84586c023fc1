/* ops.c — which family runs a node of a later op (ops.h). */
#include "ops.h"

static const tl_op_family *const families[] = {
    &tl_ops_elementwise, &tl_ops_shape, &tl_ops_reduce, &tl_ops_norm, &tl_ops_linalg, &tl_ops_vision,
    &tl_ops_spmd,
};

const tl_op_family *tl_op_family_of(tl_op_kind kind)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        if (kind > families[f]->first && kind < families[f]->last)
            return families[f];
    return NULL;
}

/* tensor_parallel.c — Keras' ModelParallel layouts as the estimator reads
 * them (options.distribution): the mesh's batch axis is the replicas, its
 * model axis the cores of a replica, and a variable whose layout names the
 * model axis on a dimension is split along it over those cores
 * (graph/partition.h, tensor parallelism). */
#include <stdio.h>
#include <string.h>

#include "estimator_int.h"

tl_status tl_est_tp_check(tl_estimator *est, const tl_distribution *d)
{
    est->model_axis = -1;
    if (d == NULL || tl_distribution_kind_of(d) != TL_MODEL_PARALLEL)
        return TL_OK;
    const tl_mesh *mesh = tl_distribution_mesh(d);
    const char *batch = tl_distribution_batch_dim_name(d);
    int b = batch != NULL ? tl_mesh_axis_index(mesh, batch) : -1, nd = tl_mesh_ndim(mesh);
    char shape[256];
    tl_mesh_repr(mesh, shape, sizeof shape);
    if (b < 0 || tl_mesh_axis_size(mesh, b) != est->R)
        return tl_error(TL_EINVAL, "distribution: ModelParallel's batch axis '%s' must be a mesh axis of the %d "
                                   "replicas; the mesh is %s",
                        batch != NULL ? batch : "", est->R, shape);
    if (nd != 2)
        return tl_error(TL_EINVAL, "distribution: ModelParallel's mesh must have two axes, the batch axis '%s' of the "
                                   "%d replicas and a model axis of the %d cores of a replica; the mesh is %s",
                        batch, est->R, est->C, shape);
    est->model_axis = 1 - b;
    if (tl_mesh_axis_size(mesh, est->model_axis) != est->C)
        return tl_error(TL_EINVAL, "distribution: ModelParallel's model axis '%s' must have num_cores_per_replica "
                                   "(%d) devices; the mesh is %s",
                        tl_mesh_axis_name(mesh, est->model_axis), est->C, shape);
    est->dist = d;
    return TL_OK;
}

/* Variable v's split dimension from its layout (-1: whole). */
static tl_status split_of(const tl_estimator *est, const tl_var *v, int8_t *out)
{
    const tl_mesh *mesh = tl_distribution_mesh(est->dist);
    const char *model = tl_mesh_axis_name(mesh, est->model_axis);
    tl_variable_desc desc = {v->name, v->rank, v->shape, NULL};
    tl_layout *l;
    tl_status st = tl_distribution_get_variable_layout(est->dist, &desc, &l);
    if (st != TL_OK)
        return st;
    *out = -1;
    int rank = tl_layout_rank(l);
    if (rank != v->rank)
        st = tl_error(TL_EINVAL, "layout_map: variable %s has %d dimensions; its layout has %d entries", v->name,
                      v->rank, rank);
    for (int i = 0; i < rank && st == TL_OK; i++) {
        const char *axis = tl_layout_axis(l, i);
        if (axis == NULL)
            continue;
        if (strcmp(axis, model) != 0)
            st = tl_error(TL_EINVAL, "layout_map: variable %s's layout puts dimension %d on the mesh axis '%s'; a "
                                     "replica holds its variables, so only the model axis '%s' may split them",
                          v->name, i, axis, model);
        else if (*out >= 0)
            st = tl_error(TL_EINVAL, "layout_map: variable %s's layout splits dimensions %d and %d over '%s'; one "
                                     "dimension may be split",
                          v->name, *out, i, model);
        else
            *out = (int8_t)i;
    }
    tl_layout_destroy(l);
    return st;
}

tl_status tl_est_tp_splits(tl_estimator *est, const int8_t **out)
{
    const tl_vars *vars = est->vars;
    int8_t *s = tl_realloc(est->var_split, (size_t)(vars->n ? vars->n : 1));
    if (s == NULL)
        return tl_error_oom();
    est->var_split = s;
    for (int v = 0; v < vars->n; v++) {
        tl_status st = split_of(est, &vars->v[v], &s[v]);
        if (st != TL_OK)
            return st;
    }
    *out = s;
    return TL_OK;
}

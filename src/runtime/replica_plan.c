/* replica_plan.c — tl_estimator_partition_plan: how the cores of a replica
 * split its training program (graph/partition.h), read off the partitions
 * the estimator runs, for `tpuloop config`. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../graph/spatial.h"
#include "estimator_int.h"

static json_t *ints(const int64_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static bool spmd(tl_op_kind op)
{
    return op > TL_OP_SPMD_FIRST_ && op < TL_OP_SPMD_LAST_;
}

/* The first op that reads node i, through collectives; g->n for none. */
static int consumer(const tl_graph *g, int i)
{
    for (int j = i + 1; j < g->n; j++) {
        bool reads = false;
        for (int k = 0; k < g->nodes[j].nin; k++)
            reads |= g->nodes[j].in[k] == i;
        if (reads && !spmd(g->nodes[j].op))
            return j;
        if (reads)
            i = j;
    }
    return g->n;
}

/* Core 0's collectives: their count per kind, and per kind the ops they
 * serve (the first op reading them). */
static json_t *collectives(const tl_graph *g)
{
    static const struct {
        tl_op_kind op;
        const char *name;
    } kinds[] = {{TL_OP_SPMD_HALO, "halo"},   {TL_OP_SPMD_GATHER, "gather"},  {TL_OP_SPMD_SUM, "sum"},
                 {TL_OP_SPMD_SLICE, "slice"}, {TL_OP_SPMD_FANOUT, "fanout"},
                 {TL_OP_SPMD_CONV, "conv_in_place"}};
    json_t *out = json_object();
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int n = 0;
        json_t *by = json_object();
        for (int i = 0; i < g->n; i++) {
            if (g->nodes[i].op != kinds[k].op)
                continue;
            n++;
            int j = consumer(g, i);
            const char *name = j < g->n ? tl_partition_op_name(g->nodes[j].op) : "the end";
            json_t *c = json_object_get(by, name);
            json_object_set_new(by, name, json_integer(c != NULL ? json_integer_value(c) + 1 : 1));
        }
        json_object_set_new(out, kinds[k].name, json_pack("{s:i, s:o}", "count", n, "before", by));
    }
    return out;
}

static json_t *spatial(const tl_estimator *est, const tl_mode_prog *m)
{
    const tl_node *x = &m->src->nodes[m->src_features];
    int64_t s4[4] = {x->shape[0], x->shape[1], x->shape[2], x->rank == 4 ? x->shape[3] : 1};
    json_t *tiles = json_array();
    for (int q = 0; q < est->C; q++) {
        tl_box b;
        if (tl_spatial_tile(s4, est->grid, q, &b) == TL_OK)
            json_array_append_new(tiles, json_pack("{s:i, s:o, s:o}", "core", q, "offset", ints(b.off, x->rank),
                                                   "size", ints(b.size, x->rank)));
    }
    return json_pack("{s:o, s:o, s:o}", "features", ints(x->shape, x->rank), "grid", ints(est->grid, x->rank),
                     "tiles", tiles);
}

static json_t *split_variables(const tl_estimator *est, const tl_mode_prog *m)
{
    json_t *vars = json_array();
    for (int i = 0; i < m->src->n; i++) {
        const tl_node *nd = &m->src->nodes[i];
        if (nd->op != TL_OP_VARIABLE || !m->part[0].tiled[i])
            continue;
        int d = est->var_split[nd->var];
        json_t *chunks = json_array();
        for (int q = 0; q < est->C; q++)
            json_array_append_new(chunks, json_integer(m->part[q].g->nodes[m->part[q].map[i]].shape[d]));
        json_array_append_new(vars, json_pack("{s:s, s:o, s:i, s:o}", "name", est->vars->v[nd->var].name, "shape",
                                              ints(nd->shape, nd->rank), "split_dim", d, "chunks", chunks));
    }
    return vars;
}

tl_status tl_estimator_partition_plan(tl_estimator *est, const tl_labeled_data *data, const tl_input *input,
                                      char **json)
{
    *json = NULL;
    if (est->C < 2)
        return tl_error(TL_EINVAL, "partition plan: a replica of one core is not partitioned (num_cores_per_replica "
                                   "is %d)", est->C);
    if ((data == NULL) == (input == NULL))
        return tl_error(TL_EINVAL, "partition plan: give the training data or its input, one of them");
    tl_status st = data != NULL ? tl_est_prepare(est, data) : tl_est_input_prepare(est, TL_MODE_TRAIN, input);
    if (st != TL_OK)
        return st;
    const tl_mode_prog *m = &est->train;
    json_t *acts = json_array();
    for (int q = 0; q < est->C; q++)
        json_array_append_new(acts, json_integer(m->cp[q]->act_floats * (int64_t)sizeof(float)));
    json_t *root = json_pack("{s:i, s:s, s:I, s:o, s:i, s:o}", "cores", est->C, "kind",
                             est->dist != NULL ? "tensor" : "spatial", "batch", (json_int_t)m->batch,
                             "activation_bytes", acts, "gathered", m->part[0].gathered, "collectives",
                             collectives(m->part[0].g));
    if (root != NULL && est->dist != NULL)
        json_object_set_new(root, "variables", split_variables(est, m));
    else if (root != NULL)
        json_object_set_new(root, "spatial", spatial(est, m));
    char *text = root != NULL ? json_dumps(root, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    json_decref(root);
    *json = text != NULL ? tl_strdup(text) : NULL;
    free(text);
    return *json != NULL ? TL_OK : tl_error_oom();
}

/* ops_norm.c — layer norm and batch norm (channels last): tracing with shape
 * checks, the forward and backward passes over kernels/norm.h, and the
 * moving-average updates a training batch norm writes into its state
 * variables' param_grad entries (program.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../kernels/norm.h"
#include "ops.h"

#define SHAPE(node, buf) tl_shape_str((node)->shape, (node)->rank, buf, sizeof buf)

/* ---- tracing ---------------------------------------------------------------- */

/* t is a float32 (n,) tensor; else the error "op: what has shape (5,), which
 * is not (6,), the <of> x (4, 6)". */
static bool need_vector(tl_graph *g, tl_t t, const char *op, const char *what, int64_t n, const char *of, tl_t x)
{
    if (tl_graph_need_f32(g, t, op, what) < 0)
        return false;
    const tl_node *v = &g->nodes[t], *xn = &g->nodes[x];
    if (v->rank == 1 && v->shape[0] == n)
        return true;
    char s1[96], s2[96], s3[96];
    tl_graph_failf(g, TL_EINVAL, "%s: %s has shape %s, which is not %s, the %s x %s", op, what, SHAPE(v, s1),
                   tl_shape_str(&n, 1, s2, sizeof s2), of, SHAPE(xn, s3));
    return false;
}

static bool need_epsilon(tl_graph *g, const char *op, double epsilon)
{
    if (isfinite(epsilon) && epsilon >= 0.0)
        return true;
    tl_graph_failf(g, TL_EINVAL, "%s: epsilon must be finite and >= 0, got %g", op, epsilon);
    return false;
}

tl_t tl_layer_norm_op(tl_graph *g, tl_t x, tl_t gamma, tl_t beta, int axis, double epsilon)
{
    const char *op = "layer_norm";
    if (tl_graph_need_f32(g, x, op, "x") < 0)
        return TL_T_INVALID;
    const tl_node *xn = &g->nodes[x];
    char s1[96];
    if (xn->rank < 1)
        return tl_graph_failf(g, TL_EINVAL, "%s: x must have rank >= 1, got shape ()", op);
    if (axis != -1 && axis != xn->rank - 1)
        return tl_graph_failf(g, TL_EINVAL,
                              "%s: axis %d is not supported for x %s; only the last axis (-1 or %d) is normalised",
                              op, axis, SHAPE(xn, s1), xn->rank - 1);
    int64_t d = xn->shape[xn->rank - 1];
    if (!need_vector(g, gamma, op, "gamma", d, "last dimension of", x) ||
        !need_vector(g, beta, op, "beta", d, "last dimension of", x) || !need_epsilon(g, op, epsilon))
        return TL_T_INVALID;
    tl_t in[3] = {x, gamma, beta};
    tl_t t = tl_graph_add(g, TL_OP_LAYER_NORM, TL_F32, g->nodes[x].shape, g->nodes[x].rank, in, 3);
    if (t >= 0)
        g->nodes[t].fattr[0] = epsilon;
    return t;
}

/* A training batch norm's statistic: a state variable no other training
 * batch norm of g updates. */
static bool need_state(tl_graph *g, tl_t t, const char *what)
{
    const tl_node *v = &g->nodes[t];
    if (v->op != TL_OP_VARIABLE || g->vars->v[v->var].trainable) {
        tl_graph_failf(g, TL_EINVAL,
                       "batch_norm: %s must be a state variable (tl_state_variable) when training, to take the "
                       "moving-average update; got %s%s",
                       what, v->op == TL_OP_VARIABLE ? "the trainable variable " : "a computed tensor",
                       v->op == TL_OP_VARIABLE ? g->vars->v[v->var].name : "");
        return false;
    }
    for (int i = 0; i < g->n; i++) {
        const tl_node *b = &g->nodes[i];
        if (b->op == TL_OP_BATCH_NORM && b->iattr[0] && (b->in[3] == t || b->in[4] == t)) {
            tl_graph_failf(g, TL_EINVAL,
                           "batch_norm: state variable %s is already updated by another training batch_norm of "
                           "this graph; one update per step",
                           g->vars->v[v->var].name);
            return false;
        }
    }
    return true;
}

tl_t tl_batch_norm_op(tl_graph *g, tl_t x, tl_t gamma, tl_t beta, tl_t moving_mean, tl_t moving_variance,
                      double momentum, double epsilon, bool training)
{
    const char *op = "batch_norm";
    if (tl_graph_need_f32(g, x, op, "x") < 0)
        return TL_T_INVALID;
    const tl_node *xn = &g->nodes[x];
    if (xn->rank < 1)
        return tl_graph_failf(g, TL_EINVAL, "%s: x must have rank >= 1 (channels last), got shape ()", op);
    int64_t c = xn->shape[xn->rank - 1];
    if (!need_vector(g, gamma, op, "gamma", c, "channels of", x) ||
        !need_vector(g, beta, op, "beta", c, "channels of", x) ||
        !need_vector(g, moving_mean, op, "moving_mean", c, "channels of", x) ||
        !need_vector(g, moving_variance, op, "moving_variance", c, "channels of", x) ||
        !need_epsilon(g, op, epsilon))
        return TL_T_INVALID;
    if (!(momentum >= 0.0 && momentum <= 1.0))
        return tl_graph_failf(g, TL_EINVAL, "%s: momentum must be in [0, 1], got %g", op, momentum);
    if (training) {
        if (!need_state(g, moving_mean, "moving_mean") || !need_state(g, moving_variance, "moving_variance"))
            return TL_T_INVALID;
        if (moving_mean == moving_variance)
            return tl_graph_failf(g, TL_EINVAL,
                                  "%s: moving_mean and moving_variance are the same state variable %s; each takes "
                                  "its own update",
                                  op, g->vars->v[g->nodes[moving_mean].var].name);
    }
    tl_t in[5] = {x, gamma, beta, moving_mean, moving_variance};
    tl_t t = tl_graph_add(g, TL_OP_BATCH_NORM, TL_F32, g->nodes[x].shape, g->nodes[x].rank, in, 5);
    if (t >= 0) {
        tl_node *nd = &g->nodes[t];
        nd->fattr[0] = momentum;
        nd->fattr[1] = epsilon;
        nd->iattr[0] = training;
        /* Its backward pass writes the moving statistics' updates, so it runs
         * whenever the loss depends on y, even when nothing before it
         * depends on a variable. */
        nd->needs_grad |= training;
    }
    return t;
}

/* "<name>/<leaf>" into buf; false (and the graph's error) when too long. */
static bool var_name(tl_graph *g, const char *op, const char *name, const char *leaf, char *buf, size_t n)
{
    int len = snprintf(buf, n, "%s/%s", name, leaf);
    if (len >= 0 && (size_t)len < n)
        return true;
    tl_graph_failf(g, TL_EINVAL, "%s: name '%.40s...' is too long", op, name);
    return false;
}

/* The last dimension of x for a layer, or -1 with the graph's error. */
static int64_t last_dim(tl_graph *g, tl_t x, const char *op, const char *name)
{
    if (tl_graph_need_f32(g, x, op, "x") < 0)
        return -1;
    const tl_node *xn = &g->nodes[x];
    if (xn->rank < 1) {
        tl_graph_failf(g, TL_EINVAL, "%s %s: x must have rank >= 1, got shape ()", op, name);
        return -1;
    }
    return xn->shape[xn->rank - 1];
}

tl_t tl_layer_norm(tl_graph *g, tl_t x, double epsilon, const char *name)
{
    int64_t d = last_dim(g, x, "layer_norm", name);
    char gname[256], bname[256];
    if (d < 0 || !var_name(g, "layer_norm", name, "gamma", gname, sizeof gname) ||
        !var_name(g, "layer_norm", name, "beta", bname, sizeof bname))
        return TL_T_INVALID;
    tl_t gamma = tl_variable(g, gname, &d, 1, (tl_initializer){TL_INIT_CONSTANT, 1.0, 0});
    tl_t beta = tl_variable(g, bname, &d, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    return tl_layer_norm_op(g, x, gamma, beta, -1, epsilon);
}

tl_t tl_batch_norm(tl_graph *g, tl_t x, double momentum, double epsilon, const char *name)
{
    int64_t c = last_dim(g, x, "batch_norm", name);
    char gname[256], bname[256], mname[256], vname[256];
    if (c < 0 || !var_name(g, "batch_norm", name, "gamma", gname, sizeof gname) ||
        !var_name(g, "batch_norm", name, "beta", bname, sizeof bname) ||
        !var_name(g, "batch_norm", name, "moving_mean", mname, sizeof mname) ||
        !var_name(g, "batch_norm", name, "moving_variance", vname, sizeof vname))
        return TL_T_INVALID;
    tl_t gamma = tl_variable(g, gname, &c, 1, (tl_initializer){TL_INIT_CONSTANT, 1.0, 0});
    tl_t beta = tl_variable(g, bname, &c, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    tl_t mean = tl_state_variable(g, mname, &c, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    tl_t var = tl_state_variable(g, vname, &c, 1, (tl_initializer){TL_INIT_CONSTANT, 1.0, 0});
    return tl_batch_norm_op(g, x, gamma, beta, mean, var, momentum, epsilon, g->mode == TL_MODE_TRAIN);
}

/* ---- running ------------------------------------------------------------------ */

static float *val(const tl_program *p, const tl_exec *e, tl_t t)
{
    return tl_exec_value(p, e, t);
}

/* The width of the normalised (layer norm) or channel (batch norm) axis. */
static int64_t last(const tl_node *nd)
{
    return nd->shape[nd->rank - 1];
}

/* s rounded up to 8 bytes: doubles in float buffers (4-byte aligned at
 * least), which hold 2n + 1 floats for n doubles. */
static double *align_doubles(float *s)
{
    uintptr_t a = ((uintptr_t)s + sizeof(double) - 1) & ~(uintptr_t)(sizeof(double) - 1);
    return (double *)a;
}

/* n doubles of the op's scratch. */
static double *scratch_doubles(const tl_exec *e, int64_t *cursor, int64_t n)
{
    return align_doubles(tl_op_scratch(e, cursor, 2 * n + 1));
}

/* Whether batch norm node nd takes its statistics over the rows of every
 * core of a partitioned replica (partition.h): iattr[1]. */
static bool spmd_bn(const tl_node *nd)
{
    return nd->op == TL_OP_BATCH_NORM && nd->iattr[0] && nd->iattr[1];
}

/* Op i's kept statistics (aux): the mean, then the variance, c doubles
 * each; on a partitioned replica then this core's mean and M2, and its
 * backward sums s1 and s2, c doubles each, which the other cores read. */
static double *kept_stats(const tl_program *p, const tl_exec *e, int i, int64_t c)
{
    TL_ASSERT(p->aux_floats[i] >= 2 * ((spmd_bn(&p->g->nodes[i]) ? 6 : 2) * c) + 1); /* planned by aux() below */
    return align_doubles(tl_exec_aux(p, e, i));
}

/* A training batch norm's statistics, kept from forward to backward (aux):
 * the batch mean and variance, c doubles each (and the partials above). */
static int64_t aux(const tl_graph *g, int i)
{
    const tl_node *nd = &g->nodes[i];
    return nd->op == TL_OP_BATCH_NORM && nd->iattr[0] ? 2 * ((spmd_bn(nd) ? 6 : 2) * last(nd)) + 1 : 0;
}

static int64_t scratch(const tl_graph *g, int i)
{
    const tl_node *nd = &g->nodes[i];
    switch (nd->op) {
    case TL_OP_LAYER_NORM: return 2 * (2 * last(nd)) + 1; /* dgamma, dbeta accumulators */
    case TL_OP_BATCH_NORM: /* the statistics as float32; the replica's sums as doubles */
        return nd->iattr[0] ? 2 * last(nd) + (spmd_bn(nd) ? 2 * (2 * last(nd)) + 1 : 0) : 0;
    default: return 0;
    }
}

/* Rows of node i's x on core q of the replica. */
static int64_t rows_on(const tl_spmd *sp, int q, int i)
{
    const tl_node *nd = &sp->progs[q]->g->nodes[i];
    return nd->size / last(nd);
}

/* The replica's batch statistics into st (mean, var) from every core's
 * mean and M2 (st + 2c, st + 3c on each), merged in core order. */
static tl_status spmd_stats(tl_exec *e, int i, int64_t c, double *st)
{
    const tl_spmd *sp = e->spmd;
    tl_status s = tl_op_spmd_meet(e);
    if (s != TL_OK)
        return s;
    const double *first = kept_stats(sp->progs[0], sp->peers[0], i, c);
    int64_t n = rows_on(sp, 0, i);
    memcpy(st, first + 2 * c, (size_t)(2 * c) * sizeof *st);
    for (int q = 1; q < sp->ncores; q++) {
        const double *o = kept_stats(sp->progs[q], sp->peers[q], i, c);
        int64_t nb = rows_on(sp, q, i);
        tl_k_batch_norm_merge(c, n, st, st + c, nb, o + 2 * c, o + 3 * c);
        n += nb;
    }
    for (int64_t j = 0; j < c; j++)
        st[c + j] /= (double)n;
    return tl_op_spmd_meet(e);
}

static tl_status forward(const tl_program *p, tl_exec *e, int i)
{
    const tl_node *nd = &p->g->nodes[i];
    int64_t c = last(nd), rows = nd->size / c;
    const float *x = val(p, e, nd->in[0]), *gamma = val(p, e, nd->in[1]), *beta = val(p, e, nd->in[2]);
    float *y = val(p, e, i);
    switch (nd->op) {
    case TL_OP_LAYER_NORM:
        tl_k_layer_norm(rows, c, nd->fattr[0], x, gamma, beta, y);
        return TL_OK;
    case TL_OP_BATCH_NORM: {
        bool relu = p->fuse[i] == TL_FUSE_RELU; /* y is the ReLU's value too */
        if (spmd_bn(nd)) { /* the statistics of the replica's rows, on every core */
            double *st = kept_stats(p, e, i, c);
            tl_status sst = tl_op_spmd_check(e);
            tl_k_batch_norm_stats(rows, c, x, st + 2 * c, st + 3 * c);
            if (sst != TL_OK || (sst = spmd_stats(e, i, c, st)) != TL_OK)
                return sst;
            tl_k_batch_norm_apply(rows, c, nd->fattr[1], x, gamma, beta, st, st + c, relu, y);
        } else if (nd->iattr[0]) {
            double *mean = kept_stats(p, e, i, c);
            tl_k_batch_norm_train(rows, c, nd->fattr[1], x, gamma, beta, relu, y, mean, mean + c);
        } else {
            tl_k_batch_norm_infer(rows, c, nd->fattr[1], x, gamma, beta, val(p, e, nd->in[3]), val(p, e, nd->in[4]),
                                  relu, y);
        }
        return TL_OK;
    }
    default:
        TL_ASSERT(!"a norm op kind without a forward pass");
        return TL_EINVAL;
    }
}

/* The gradients of inputs 0..n-1 that are wanted (NULL for the others). */
static void dsts(const tl_program *p, const tl_exec *e, int i, int n, int64_t *cursor, float **d)
{
    for (int k = 0; k < n; k++)
        d[k] = tl_op_wants(p, i, k) ? tl_op_dst(p, e, i, k, cursor) : NULL;
}

static void finish(const tl_program *p, const tl_exec *e, int i, int n, float **d)
{
    for (int k = 0; k < n; k++)
        if (d[k] != NULL)
            tl_op_finish(p, e, i, k, d[k]);
}

/* Writes state variable t's update from the batch statistic stat. */
static void moving_update(const tl_program *p, const tl_exec *e, tl_t t, double momentum, const float *stat)
{
    const tl_node *v = &p->g->nodes[t];
    float *upd = e->param_grad + p->g->vars->v[v->var].offset;
    tl_k_moving_update(v->size, momentum, (double)e->state_scale, stat, val(p, e, t), upd);
}

/* A partitioned replica's batch norm gradient on this core: its own sums
 * s1, s2 (into stat + 4c, + 5c), the replica's in core order, dx from
 * those, and this core's partials of dgamma (s2) and dbeta (s1). */
static tl_status spmd_grad(const tl_program *p, tl_exec *e, int i, int64_t c, double *stat, bool relu,
                           const float *dy, float **d, int64_t *cursor)
{
    const tl_node *nd = &p->g->nodes[i];
    const tl_spmd *sp = e->spmd;
    int64_t rows = nd->size / c, n = 0;
    const float *x = val(p, e, nd->in[0]), *gamma = val(p, e, nd->in[1]), *beta = val(p, e, nd->in[2]);
    double *s1 = stat + 4 * c, *s2 = stat + 5 * c;
    tl_status st = tl_op_spmd_check(e);
    if (st != TL_OK)
        return st;
    tl_k_batch_norm_grad_sums(rows, c, nd->fattr[1], x, gamma, beta, stat, stat + c, relu, dy, s1, s2);
    if ((st = tl_op_spmd_meet(e)) != TL_OK)
        return st;
    double *t1 = scratch_doubles(e, cursor, 2 * c), *t2 = t1 + c;
    memset(t1, 0, (size_t)(2 * c) * sizeof *t1);
    for (int q = 0; q < sp->ncores; q++) {
        const double *o = kept_stats(sp->progs[q], sp->peers[q], i, c);
        for (int64_t j = 0; j < c; j++) {
            t1[j] += o[4 * c + j];
            t2[j] += o[5 * c + j];
        }
        n += rows_on(sp, q, i);
    }
    if ((st = tl_op_spmd_meet(e)) != TL_OK)
        return st;
    for (int64_t j = 0; d[2] != NULL && j < c; j++)
        d[2][j] = (float)s1[j];
    for (int64_t j = 0; d[1] != NULL && j < c; j++)
        d[1][j] = (float)s2[j];
    if (d[0] != NULL)
        tl_k_batch_norm_grad_apply(rows, c, nd->fattr[1], n, x, gamma, beta, stat, stat + c, relu, dy, t1, t2, d[0]);
    return TL_OK;
}

static tl_status backward(const tl_program *p, tl_exec *e, int i, int64_t *cursor)
{
    const tl_node *nd = &p->g->nodes[i];
    int64_t c = last(nd), rows = nd->size / c;
    const float *x = val(p, e, nd->in[0]), *gamma = val(p, e, nd->in[1]);
    const float *dy = tl_op_grad(p, e, i);
    float *d[5];
    switch (nd->op) {
    case TL_OP_LAYER_NORM: {
        dsts(p, e, i, 3, cursor, d);
        double *work = d[1] != NULL || d[2] != NULL ? scratch_doubles(e, cursor, 2 * c) : NULL;
        tl_k_layer_norm_grad(rows, c, nd->fattr[0], x, gamma, dy, d[0], d[1], d[2], work);
        finish(p, e, i, 3, d);
        return TL_OK;
    }
    case TL_OP_BATCH_NORM:
        if (nd->iattr[0]) {
            dsts(p, e, i, 3, cursor, d);
            double *stat = kept_stats(p, e, i, c); /* the forward's mean, then variance */
            bool relu = p->fuse[i] == TL_FUSE_RELU;
            if (spmd_bn(nd)) {
                tl_status st = spmd_grad(p, e, i, c, stat, relu, dy, d, cursor);
                if (st != TL_OK)
                    return st;
            } else {
                tl_k_batch_norm_train_grad(rows, c, nd->fattr[1], x, gamma, val(p, e, nd->in[2]), stat, stat + c,
                                           relu, dy, d[0], d[1], d[2]);
            }
            finish(p, e, i, 3, d);
            float *mean = tl_op_scratch(e, cursor, c), *var = tl_op_scratch(e, cursor, c);
            for (int64_t j = 0; j < c; j++) {
                mean[j] = (float)stat[j];
                var[j] = (float)stat[c + j];
            }
            moving_update(p, e, nd->in[3], nd->fattr[0], mean);
            moving_update(p, e, nd->in[4], nd->fattr[0], var);
        } else {
            dsts(p, e, i, 5, cursor, d);
            tl_k_batch_norm_infer_grad(rows, c, nd->fattr[1], x, gamma, val(p, e, nd->in[3]), val(p, e, nd->in[4]),
                                       dy, d[0], d[1], d[2], d[3], d[4]);
            finish(p, e, i, 5, d);
        }
        return TL_OK;
    default:
        TL_ASSERT(!"a norm op kind without a backward pass");
        return TL_EINVAL;
    }
}

const tl_op_family tl_ops_norm = {"norm", TL_OP_NORM_FIRST_, TL_OP_NORM_LAST_, forward, backward, scratch, NULL, aux};

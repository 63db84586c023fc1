/* graph.c — tracing: each op checks its inputs' shapes, records a node and
 * returns its handle. The first error is kept in the graph (sticky) and every
 * later op returns TL_T_INVALID, so a model_fn needs one check at its end. */
#include <stdio.h>
#include <string.h>

#include "graph_int.h"

tl_status tl_graph_create(tl_vars *vars, tl_mode mode, tl_graph **out)
{
    *out = NULL;
    tl_graph *g = tl_calloc(1, sizeof *g);
    if (g == NULL)
        return tl_error_oom();
    g->vars = vars;
    g->mode = mode;
    *out = g;
    return TL_OK;
}

void tl_graph_destroy(tl_graph *g)
{
    if (g == NULL)
        return;
    tl_free(g->nodes);
    tl_free(g);
}

tl_status tl_graph_status(const tl_graph *g)
{
    return g->status;
}

const char *tl_graph_error(const tl_graph *g)
{
    return g->err;
}

tl_t tl_graph_failf(tl_graph *g, tl_status st, const char *fmt, ...)
{
    if (g->status == TL_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->err, sizeof g->err, fmt, ap);
        va_end(ap);
        g->status = st;
    }
    tl_error(g->status, "%s", g->err);
    return TL_T_INVALID;
}

tl_status tl_graph_fail(tl_graph *g, tl_status st, const char *msg)
{
    tl_graph_failf(g, st == TL_OK ? TL_EINVAL : st, "%s", msg);
    return g->status;
}

bool tl_graph_valid(const tl_graph *g, tl_t t)
{
    return g->status == TL_OK && t >= 0 && t < g->n;
}

const tl_node *tl_graph_node(const tl_graph *g, tl_t t)
{
    return (t >= 0 && t < g->n) ? &g->nodes[t] : NULL;
}

const char *tl_shape_str(const int64_t *shape, int rank, char *buf, size_t n)
{
    size_t off = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (off < n)
        snprintf(buf + off, n - off, rank == 1 ? ",)" : ")");
    return buf;
}

const char *tl_dtype_name(tl_dtype dt)
{
    switch (dt) {
    case TL_F32: return "float32";
    case TL_I32: return "int32";
    case TL_I64: return "int64";
    }
    return "an unknown dtype";
}

int tl_dtype_slots(tl_dtype dt)
{
    return dt == TL_I64 ? 2 : 1;
}

#define SHAPE(node, buf) tl_shape_str((node)->shape, (node)->rank, buf, sizeof buf)

tl_t tl_graph_add(tl_graph *g, tl_op_kind op, tl_dtype dtype, const int64_t *shape, int rank, const tl_t *in, int nin)
{
    if (g->status != TL_OK)
        return TL_T_INVALID;
    if (rank < 0 || rank > TL_MAX_RANK)
        return tl_graph_failf(g, TL_EINVAL, "rank %d is outside [0, %d]", rank, TL_MAX_RANK);
    /* shape may point into g->nodes (an input's shape), which the growth
     * below moves: copy it first. */
    int64_t dims[TL_MAX_RANK];
    if (rank > 0)
        memcpy(dims, shape, (size_t)rank * sizeof *shape);
    shape = dims;
    int64_t size = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 1)
            return tl_graph_failf(g, TL_EINVAL, "dimension %d has size %lld; sizes must be >= 1", i, (long long)shape[i]);
        if (size > ((int64_t)1 << 40) / shape[i])
            return tl_graph_failf(g, TL_EINVAL, "a tensor of more than 2^40 elements");
        size *= shape[i];
    }
    if (g->n == g->cap) {
        if (g->cap >= TL_GRAPH_MAX_NODES)
            return tl_graph_failf(g, TL_EINVAL, "the graph has more than %d nodes", TL_GRAPH_MAX_NODES);
        int cap = g->cap ? g->cap * 2 : 64;
        tl_node *p = tl_realloc(g->nodes, (size_t)cap * sizeof *p);
        if (p == NULL)
            return tl_graph_failf(g, TL_ENOMEM, "out of memory");
        g->nodes = p;
        g->cap = cap;
    }
    tl_node *nd = &g->nodes[g->n];
    memset(nd, 0, sizeof *nd);
    nd->op = op;
    nd->dtype = dtype;
    nd->rank = rank;
    if (rank > 0)
        memcpy(nd->shape, shape, (size_t)rank * sizeof *shape);
    nd->size = size;
    nd->nin = nin;
    nd->var = -1;
    for (int i = 0; i < nin; i++) {
        nd->in[i] = in[i];
        nd->needs_grad |= g->nodes[in[i]].needs_grad;
    }
    nd->needs_grad &= dtype == TL_F32; /* integers carry no gradient */
    return g->n++;
}

int tl_rank(const tl_graph *g, tl_t t, int64_t *dims)
{
    if (t < 0 || t >= g->n)
        return -1;
    const tl_node *nd = &g->nodes[t];
    if (dims != NULL)
        memcpy(dims, nd->shape, (size_t)nd->rank * sizeof *dims);
    return nd->rank;
}

tl_t tl_graph_input(tl_graph *g, tl_dtype dtype, const int64_t *shape, int rank)
{
    return tl_graph_add(g, TL_OP_INPUT, dtype, shape, rank, NULL, 0);
}

tl_t tl_embedding_activations(tl_graph *g, int feature, const int64_t *shape, int rank)
{
    if (g == NULL || g->status != TL_OK)
        return TL_T_INVALID;
    if (feature < 0)
        return tl_graph_failf(g, TL_EINVAL, "embedding_activations: feature must be >= 0 (got %d)", feature);
    /* The exact shape is the engine's, checked by the runtime that binds it. */
    if (shape == NULL || rank < 2)
        return tl_graph_failf(g, TL_EINVAL, "embedding_activations: feature %d needs shape [B, D], [B, S, D] or [B, "
                                  "output_shape..., D] (rank >= 2; got rank %d)", feature, rank);
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == TL_OP_EMBEDDING && g->nodes[i].iattr[0] == feature)
            return tl_graph_failf(g, TL_EINVAL, "embedding_activations: feature %d is already in the graph", feature);
    tl_t t = tl_graph_add(g, TL_OP_EMBEDDING, TL_F32, shape, rank, NULL, 0);
    if (t >= 0) {
        g->nodes[t].iattr[0] = feature;
        g->nodes[t].needs_grad = true; /* its gradient leaves the program */
    }
    return t;
}

static tl_t variable(tl_graph *g, const char *name, const int64_t *shape, int rank, tl_initializer init,
                     bool trainable)
{
    if (g->status != TL_OK)
        return TL_T_INVALID;
    int idx;
    tl_status st = tl_vars_add_ex(g->vars, name, shape, rank, init, trainable, &idx);
    if (st != TL_OK)
        return tl_graph_failf(g, st, "%s", tl_last_error());
    for (int i = 0; i < g->n; i++) /* one node per variable per graph */
        if (g->nodes[i].op == TL_OP_VARIABLE && g->nodes[i].var == idx)
            return i;
    tl_t t = tl_graph_add(g, TL_OP_VARIABLE, TL_F32, shape, rank, NULL, 0);
    if (t >= 0) {
        g->nodes[t].var = idx;
        g->nodes[t].needs_grad = trainable; /* a state variable is no path for the loss's gradient */
    }
    return t;
}

tl_t tl_variable(tl_graph *g, const char *name, const int64_t *shape, int rank, tl_initializer init)
{
    return variable(g, name, shape, rank, init, true);
}

tl_t tl_state_variable(tl_graph *g, const char *name, const int64_t *shape, int rank, tl_initializer init)
{
    return variable(g, name, shape, rank, init, false);
}

tl_t tl_graph_need_f32(tl_graph *g, tl_t t, const char *op, const char *what)
{
    if (!tl_graph_valid(g, t))
        return g->status == TL_OK ? tl_graph_failf(g, TL_EINVAL, "%s: %s is not a tensor of this graph", op, what) : TL_T_INVALID;
    if (g->nodes[t].dtype != TL_F32)
        return tl_graph_failf(g, TL_EINVAL, "%s: %s must be float32", op, what);
    return t;
}

tl_t tl_matmul(tl_graph *g, tl_t a, tl_t b, bool transpose_a, bool transpose_b)
{
    if (tl_graph_need_f32(g, a, "matmul", "a") < 0 || tl_graph_need_f32(g, b, "matmul", "b") < 0)
        return TL_T_INVALID;
    const tl_node *x = &g->nodes[a], *y = &g->nodes[b];
    char s1[96], s2[96];
    if (x->rank != 2 || y->rank != 2)
        return tl_graph_failf(g, TL_EINVAL, "matmul: both operands must be 2-D, got %s and %s", SHAPE(x, s1), SHAPE(y, s2));
    int64_t m = transpose_a ? x->shape[1] : x->shape[0], k = transpose_a ? x->shape[0] : x->shape[1];
    int64_t k2 = transpose_b ? y->shape[1] : y->shape[0], n = transpose_b ? y->shape[0] : y->shape[1];
    if (k != k2)
        return tl_graph_failf(g, TL_EINVAL, "matmul: inner dimensions differ: %s%s x %s%s", SHAPE(x, s1),
                    transpose_a ? "^T" : "", SHAPE(y, s2), transpose_b ? "^T" : "");
    tl_t in[2] = {a, b};
    int64_t shape[2] = {m, n};
    tl_t t = tl_graph_add(g, TL_OP_MATMUL, TL_F32, shape, 2, in, 2);
    if (t >= 0) {
        g->nodes[t].iattr[0] = transpose_a;
        g->nodes[t].iattr[1] = transpose_b;
    }
    return t;
}

tl_t tl_bias_add(tl_graph *g, tl_t x, tl_t bias)
{
    if (tl_graph_need_f32(g, x, "bias_add", "x") < 0 || tl_graph_need_f32(g, bias, "bias_add", "bias") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x], *b = &g->nodes[bias];
    char s1[96], s2[96];
    if (a->rank < 1 || b->rank != 1 || b->shape[0] != a->shape[a->rank - 1])
        return tl_graph_failf(g, TL_EINVAL, "bias_add: bias %s must be 1-D with the last dimension of x %s", SHAPE(b, s2),
                    SHAPE(a, s1));
    tl_t in[2] = {x, bias};
    return tl_graph_add(g, TL_OP_BIAS_ADD, TL_F32, a->shape, a->rank, in, 2);
}

static tl_t unary(tl_graph *g, tl_op_kind op, const char *name, tl_t x)
{
    if (tl_graph_need_f32(g, x, name, "x") < 0)
        return TL_T_INVALID;
    return tl_graph_add(g, op, TL_F32, g->nodes[x].shape, g->nodes[x].rank, &x, 1);
}

tl_t tl_relu(tl_graph *g, tl_t x) { return unary(g, TL_OP_RELU, "relu", x); }
tl_t tl_sigmoid(tl_graph *g, tl_t x) { return unary(g, TL_OP_SIGMOID, "sigmoid", x); }
tl_t tl_tanh(tl_graph *g, tl_t x) { return unary(g, TL_OP_TANH, "tanh", x); }

tl_t tl_softmax_xent(tl_graph *g, tl_t logits, tl_t labels)
{
    if (tl_graph_need_f32(g, logits, "softmax_xent", "logits") < 0)
        return TL_T_INVALID;
    if (!tl_graph_valid(g, labels))
        return tl_graph_failf(g, TL_EINVAL, "softmax_xent: labels are not a tensor of this graph (no labels in PREDICT)");
    const tl_node *z = &g->nodes[logits], *l = &g->nodes[labels];
    char s1[96], s2[96];
    if (z->rank != 2 || l->rank != 1 || l->shape[0] != z->shape[0] || l->dtype != TL_I32)
        return tl_graph_failf(g, TL_EINVAL, "softmax_xent: logits must be (batch, classes) and labels int32 (batch,); got %s and %s%s",
                    SHAPE(z, s1), SHAPE(l, s2), l->dtype != TL_I32 ? " float32" : "");
    tl_t in[2] = {logits, labels};
    return tl_graph_add(g, TL_OP_SOFTMAX_XENT, TL_F32, z->shape, 1, in, 2);
}

tl_t tl_sigmoid_xent(tl_graph *g, tl_t logits, tl_t labels)
{
    if (tl_graph_need_f32(g, logits, "sigmoid_xent", "logits") < 0)
        return TL_T_INVALID;
    if (!tl_graph_valid(g, labels))
        return tl_graph_failf(g, TL_EINVAL, "sigmoid_xent: labels are not a tensor of this graph (no labels in PREDICT)");
    const tl_node *z = &g->nodes[logits], *l = &g->nodes[labels];
    char s1[96], s2[96];
    if (l->dtype == TL_I32) {
        /* The binary head's form: one logit per example, 0/1 labels. */
        if (z->rank != 2 || z->shape[1] != 1 || l->rank != 1 || l->shape[0] != z->shape[0])
            return tl_graph_failf(g, TL_EINVAL,
                        "sigmoid_xent: with int32 labels, logits must be (batch, 1) and labels (batch,); "
                        "got %s and %s",
                        SHAPE(z, s1), SHAPE(l, s2));
        tl_t in[2] = {logits, labels};
        return tl_graph_add(g, TL_OP_SIGMOID_XENT, TL_F32, z->shape, 1, in, 2);
    }
    if (z->size != l->size || z->rank != l->rank)
        return tl_graph_failf(g, TL_EINVAL, "sigmoid_xent: logits %s and labels %s must have the same shape", SHAPE(z, s1),
                    SHAPE(l, s2));
    tl_t in[2] = {logits, labels};
    return tl_graph_add(g, TL_OP_SIGMOID_XENT, TL_F32, z->shape, z->rank, in, 2);
}

tl_t tl_mse(tl_graph *g, tl_t a, tl_t b)
{
    if (tl_graph_need_f32(g, a, "mse", "a") < 0 || tl_graph_need_f32(g, b, "mse", "b") < 0)
        return TL_T_INVALID;
    const tl_node *x = &g->nodes[a], *y = &g->nodes[b];
    char s1[96], s2[96];
    if (x->size != y->size || x->rank != y->rank)
        return tl_graph_failf(g, TL_EINVAL, "mse: %s and %s must have the same shape", SHAPE(x, s1), SHAPE(y, s2));
    tl_t in[2] = {a, b};
    return tl_graph_add(g, TL_OP_MSE, TL_F32, NULL, 0, in, 2);
}

tl_t tl_concat(tl_graph *g, const tl_t *xs, int n, int axis)
{
    if (g->status != TL_OK)
        return TL_T_INVALID;
    if (n < 1 || n > TL_MAX_OP_INPUTS)
        return tl_graph_failf(g, TL_EINVAL, "concat: %d inputs; 1..%d are allowed", n, TL_MAX_OP_INPUTS);
    for (int i = 0; i < n; i++)
        if (tl_graph_need_f32(g, xs[i], "concat", "an input") < 0)
            return TL_T_INVALID;
    const tl_node *first = &g->nodes[xs[0]];
    if (axis < 0)
        axis += first->rank;
    if (axis < 0 || axis >= first->rank)
        return tl_graph_failf(g, TL_EINVAL, "concat: axis %d is outside the rank %d of the inputs", axis, first->rank);
    int64_t shape[TL_MAX_RANK];
    memcpy(shape, first->shape, sizeof shape);
    shape[axis] = 0;
    for (int i = 0; i < n; i++) {
        const tl_node *x = &g->nodes[xs[i]];
        char s1[96], s2[96];
        bool same = x->rank == first->rank;
        for (int d = 0; same && d < x->rank; d++)
            same = d == axis || x->shape[d] == first->shape[d];
        if (!same)
            return tl_graph_failf(g, TL_EINVAL, "concat: input %d has shape %s, not compatible with %s along axis %d", i,
                        SHAPE(x, s1), SHAPE(first, s2), axis);
        shape[axis] += x->shape[axis];
    }
    tl_t t = tl_graph_add(g, TL_OP_CONCAT, TL_F32, shape, first->rank, xs, n);
    if (t >= 0)
        g->nodes[t].iattr[0] = axis;
    return t;
}

tl_t tl_reshape(tl_graph *g, tl_t x, const int64_t *shape, int rank)
{
    if (tl_graph_need_f32(g, x, "reshape", "x") < 0)
        return TL_T_INVALID;
    if (rank < 0 || rank > TL_MAX_RANK)
        return tl_graph_failf(g, TL_EINVAL, "reshape: rank %d is outside [0, %d]", rank, TL_MAX_RANK);
    int64_t size = 1;
    for (int i = 0; i < rank; i++)
        size = shape[i] > 0 && size <= INT64_MAX / shape[i] ? size * shape[i] : -1;
    const tl_node *a = &g->nodes[x];
    char s1[96], s2[96];
    if (size != a->size)
        return tl_graph_failf(g, TL_EINVAL, "reshape: cannot reshape %s (%lld elements) to %s", SHAPE(a, s1),
                    (long long)a->size, tl_shape_str(shape, rank, s2, sizeof s2));
    return tl_graph_add(g, TL_OP_RESHAPE, TL_F32, shape, rank, &x, 1);
}

tl_t tl_slice(tl_graph *g, tl_t x, int axis, int64_t begin, int64_t size)
{
    if (tl_graph_need_f32(g, x, "slice", "x") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    char s1[96];
    if (axis < 0)
        axis += a->rank;
    if (axis < 0 || axis >= a->rank)
        return tl_graph_failf(g, TL_EINVAL, "slice: axis %d is outside the rank %d of %s", axis, a->rank, SHAPE(a, s1));
    if (begin < 0 || size < 1 || begin > a->shape[axis] - size)
        return tl_graph_failf(g, TL_EINVAL, "slice: [%lld, %lld) is outside [0, %lld) on axis %d of %s", (long long)begin,
                    (long long)(begin + size), (long long)a->shape[axis], axis, SHAPE(a, s1));
    int64_t shape[TL_MAX_RANK];
    memcpy(shape, a->shape, sizeof shape);
    shape[axis] = size;
    tl_t t = tl_graph_add(g, TL_OP_SLICE, TL_F32, shape, a->rank, &x, 1);
    if (t >= 0) {
        g->nodes[t].iattr[0] = axis;
        g->nodes[t].iattr[1] = begin;
        g->nodes[t].iattr[2] = size;
    }
    return t;
}

tl_t tl_sum(tl_graph *g, tl_t x)
{
    if (tl_graph_need_f32(g, x, "sum", "x") < 0)
        return TL_T_INVALID;
    return tl_graph_add(g, TL_OP_SUM, TL_F32, NULL, 0, &x, 1);
}

tl_t tl_mean(tl_graph *g, tl_t x)
{
    if (tl_graph_need_f32(g, x, "mean", "x") < 0)
        return TL_T_INVALID;
    return tl_graph_add(g, TL_OP_MEAN, TL_F32, NULL, 0, &x, 1);
}

tl_t tl_dropout(tl_graph *g, tl_t x, double rate)
{
    if (tl_graph_need_f32(g, x, "dropout", "x") < 0)
        return TL_T_INVALID;
    if (!(rate >= 0.0 && rate < 1.0))
        return tl_graph_failf(g, TL_EINVAL, "dropout: rate must be in [0, 1), got %g", rate);
    int stream = g->dropout_ops++; /* numbered in trace order: the same in every mode's graph */
    if (g->mode != TL_MODE_TRAIN || rate == 0.0)
        return x;
    tl_t t = tl_graph_add(g, TL_OP_DROPOUT, TL_F32, g->nodes[x].shape, g->nodes[x].rank, &x, 1);
    if (t >= 0) {
        g->nodes[t].fattr[0] = rate;
        g->nodes[t].iattr[0] = stream;
    }
    return t;
}

tl_t tl_pairwise_dot(tl_graph *g, tl_t x)
{
    if (tl_graph_need_f32(g, x, "pairwise_dot", "x") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    char s1[96];
    if (a->rank != 3 || a->shape[1] < 2)
        return tl_graph_failf(g, TL_EINVAL, "pairwise_dot: x must be (batch, features >= 2, dim), got %s", SHAPE(a, s1));
    int64_t f = a->shape[1];
    int64_t shape[2] = {a->shape[0], f * (f - 1) / 2};
    return tl_graph_add(g, TL_OP_PAIRWISE_DOT, TL_F32, shape, 2, &x, 1);
}

tl_t tl_dense(tl_graph *g, tl_t x, int64_t units, tl_activation act, const char *name)
{
    if (tl_graph_need_f32(g, x, "dense", "x") < 0)
        return TL_T_INVALID;
    const tl_node *a = &g->nodes[x];
    char s1[96];
    if (a->rank != 2)
        return tl_graph_failf(g, TL_EINVAL, "dense %s: x must be (batch, features), got %s", name, SHAPE(a, s1));
    if (units < 1)
        return tl_graph_failf(g, TL_EINVAL, "dense %s: units must be >= 1, got %lld", name, (long long)units);
    char kname[256], bname[256];
    if (snprintf(kname, sizeof kname, "%s/kernel", name) >= (int)sizeof kname ||
        snprintf(bname, sizeof bname, "%s/bias", name) >= (int)sizeof bname)
        return tl_graph_failf(g, TL_EINVAL, "dense: name '%.40s...' is too long", name);
    int64_t kshape[2] = {a->shape[1], units}, bshape[1] = {units};
    tl_t w = tl_variable(g, kname, kshape, 2, (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0});
    tl_t b = tl_variable(g, bname, bshape, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    tl_t y = tl_bias_add(g, tl_matmul(g, x, w, false, false), b);
    switch (act) {
    case TL_ACT_RELU: return tl_relu(g, y);
    case TL_ACT_SIGMOID: return tl_sigmoid(g, y);
    case TL_ACT_TANH: return tl_tanh(g, y);
    case TL_ACT_NONE: return y;
    }
    return tl_graph_failf(g, TL_EINVAL, "dense %s: unknown activation %d", name, (int)act);
}

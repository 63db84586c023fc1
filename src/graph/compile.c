/* compile.c — planning a step program: which nodes need gradients, and where
 * every value, gradient and dropout mask lives. One buffer per node (no reuse
 * yet): simple, and the MLP's activations are small next to its parameters. */
#include <string.h>

#include "ops.h"

static int64_t round_up(int64_t x, int64_t a)
{
    return (x + a - 1) / a * a;
}

/* Node i's value (and gradient) are its input 0's bytes: a reshape, or a
 * family op that says it is a view. */
static bool is_view(const tl_graph *g, int i)
{
    const tl_node *nd = &g->nodes[i];
    if (nd->op == TL_OP_RESHAPE)
        return true;
    const tl_op_family *f = tl_op_family_of(nd->op);
    return f != NULL && f->view != NULL && f->view(g, i);
}

/* Whether node i's value and gradient are its input 0's: a view, or an op
 * fused into its producer. */
static bool aliases_input(const tl_program *p, int i)
{
    return is_view(p->g, i) || p->fuse[i] == TL_FUSE_INTO;
}

/* Floats a family op keeps beside its value (ops.h). */
static int64_t op_aux(const tl_graph *g, int i)
{
    const tl_op_family *f = tl_op_family_of(g->nodes[i].op);
    return f != NULL && f->aux != NULL ? f->aux(g, i) : 0;
}

/* Whether node t has node a's dtype and shape. */
static bool same_shape(const tl_graph *g, tl_t t, tl_t a)
{
    const tl_node *x = &g->nodes[t], *y = &g->nodes[a];
    return x->dtype == y->dtype && x->rank == y->rank &&
           memcmp(x->shape, y->shape, (size_t)x->rank * sizeof x->shape[0]) == 0;
}

/* Whether op b can apply the ReLU that consumes it: a batch norm (a frozen
 * one only without a backward pass), or a float32 sum of two tensors of its
 * own shape (a residual connection; no broadcasting). */
static bool takes_relu(const tl_graph *g, tl_t b, bool backward)
{
    const tl_node *nd = &g->nodes[b];
    if (nd->op == TL_OP_BATCH_NORM)
        return nd->iattr[0] || !backward;
    return nd->op == TL_OP_EW_ADD && nd->dtype == TL_F32 && same_shape(g, nd->in[0], b) &&
           same_shape(g, nd->in[1], b);
}

/* The fusions (program.h): relu(batch_norm(x)) and relu(a + b) where the
 * batch norm's or the sum's value has no other reader. */
static void plan_fusion(tl_program *p, tl_t loss, bool backward, const tl_t *keep, int nkeep)
{
    const tl_graph *g = p->g;
    int *uses = tl_calloc((size_t)(g->n ? g->n : 1), sizeof *uses);
    if (uses == NULL)
        return; /* no fusion: the same results, slower */
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            uses[g->nodes[i].in[k]]++;
    if (loss >= 0)
        uses[loss]++;
    for (int k = 0; k < nkeep; k++)
        if (keep[k] >= 0 && keep[k] < g->n)
            uses[keep[k]]++;
    for (int i = 0; i < g->n; i++) {
        const tl_node *r = &g->nodes[i];
        if (r->op != TL_OP_RELU)
            continue;
        tl_t b = r->in[0];
        if (uses[b] == 1 && takes_relu(g, b, backward)) {
            p->fuse[b] = TL_FUSE_RELU;
            p->fuse[i] = TL_FUSE_INTO;
        }
    }
    /* Dense layers: a float32 matmul read only by a bias add, whose bias
     * nothing else reads (its gradient is written here alone) and is a
     * variable or comes before the matmul (there before the matmul reads
     * it, and its backward, if it has one, after the matmul's writes its
     * gradient), and whose product needs a gradient whenever the sum does
     * (the matmul's backward does the bias add's); a ReLU that alone reads
     * the sum joins them. */
    for (int i = 0; i < g->n; i++) {
        const tl_node *b = &g->nodes[i];
        if (b->op != TL_OP_BIAS_ADD || b->dtype != TL_F32)
            continue;
        tl_t m = b->in[0];
        const tl_node *mm = &g->nodes[m];
        bool bias_there = b->in[1] < m || g->nodes[b->in[1]].op == TL_OP_VARIABLE;
        if (mm->op != TL_OP_MATMUL || mm->dtype != TL_F32 || uses[m] != 1 || uses[b->in[1]] != 1 || !bias_there ||
            p->fuse[m] != TL_FUSE_NONE || (b->needs_grad && !mm->needs_grad))
            continue;
        tl_t relu = TL_T_INVALID;
        for (int j = i + 1; j < g->n && uses[i] == 1 && relu == TL_T_INVALID; j++)
            if (g->nodes[j].op == TL_OP_RELU && g->nodes[j].in[0] == i && p->fuse[j] == TL_FUSE_NONE)
                relu = j;
        p->fuse[m] = relu != TL_T_INVALID ? TL_FUSE_BIAS_RELU : TL_FUSE_BIAS;
        p->bias_add[m] = i;
        p->fuse[i] = TL_FUSE_INTO;
        if (relu != TL_T_INVALID)
            p->fuse[relu] = TL_FUSE_INTO;
    }
    /* DLRM's interaction: a pairwise dot of the reshape of a concatenation
     * along axis 1 of rank-2 parts, each a whole number of the dot's
     * vectors, where only the dot reads the reshape and only the reshape
     * the concatenation. */
    for (int i = 0; i < g->n; i++) {
        const tl_node *dot = &g->nodes[i];
        if (dot->op != TL_OP_PAIRWISE_DOT || p->fuse[i] != TL_FUSE_NONE)
            continue;
        tl_t r = dot->in[0], c = g->nodes[r].in[0];
        if (g->nodes[r].op != TL_OP_RESHAPE || uses[r] != 1 || p->fuse[r] != TL_FUSE_NONE)
            continue;
        const tl_node *cat = &g->nodes[c];
        if (cat->op != TL_OP_CONCAT || uses[c] != 1 || cat->rank != 2 || cat->iattr[0] != 1 ||
            p->fuse[c] != TL_FUSE_NONE)
            continue;
        int64_t d = g->nodes[r].shape[2];
        bool whole = d > 0;
        for (int k = 0; k < cat->nin && whole; k++)
            whole = g->nodes[cat->in[k]].shape[1] % d == 0 && g->nodes[cat->in[k]].op != TL_OP_SPMD_HALO;
        if (!whole)
            continue;
        p->fuse[i] = TL_FUSE_STACK;
        p->fuse[r] = p->fuse[c] = TL_FUSE_ELIDED;
    }
    tl_free(uses);
}

tl_t tl_program_stack_of(const tl_program *p, int i)
{
    TL_ASSERT(p->fuse[i] == TL_FUSE_STACK);
    return p->g->nodes[p->g->nodes[i].in[0]].in[0];
}

/* Marks the transient values (program.h): halo gathers read only by the
 * next node and not kept. Returns the floats of the largest. */
static int64_t plan_transient(tl_program *p, tl_t loss, const tl_t *keep, int nkeep)
{
    const tl_graph *g = p->g;
    int *uses = tl_calloc((size_t)(g->n ? g->n : 1), sizeof *uses);
    if (uses == NULL)
        return 0; /* none transient: more memory, the same results */
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            uses[g->nodes[i].in[k]] += g->nodes[i].in[k] == i - 1 ? 1 : 2; /* another reader counts twice */
    if (loss >= 0)
        uses[loss] += 2;
    for (int k = 0; k < nkeep; k++)
        if (keep[k] >= 0 && keep[k] < g->n)
            uses[keep[k]] += 2;
    int64_t most = 0;
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == TL_OP_SPMD_HALO && uses[i] == 1) {
            p->remat[i] = 1;
            most = g->nodes[i].size > most ? g->nodes[i].size : most;
        }
    tl_free(uses);
    return most;
}

/* Counts the backward write of node i's input k's gradient, walking the
 * nodes in backward order: the first write overwrites (first_write's bit),
 * a later one adds through scratch. Returns the scratch floats it needs. */
static int64_t plan_write(tl_program *p, bool *seen, bool *var_seen, int i, int k)
{
    const tl_graph *g = p->g;
    tl_t in = g->nodes[i].in[k];
    if (p->grad_off[in] == TL_OFF_NONE)
        return 0;
    /* A reshape shares its input's gradient buffer: count writes there. */
    tl_t owner = in;
    while (aliases_input(p, owner) && p->grad_off[owner] == p->grad_off[g->nodes[owner].in[0]])
        owner = g->nodes[owner].in[0];
    bool *flag = g->nodes[owner].op == TL_OP_VARIABLE ? &var_seen[g->nodes[owner].var] : &seen[owner];
    if (*flag)
        return g->nodes[in].size;
    *flag = true;
    p->first_write[i] |= 1u << k;
    return 0;
}

/* Floats of scratch a family op asks for (ops.h). */
static int64_t op_scratch(const tl_graph *g, int i)
{
    const tl_op_family *f = tl_op_family_of(g->nodes[i].op);
    return f != NULL && f->scratch != NULL ? f->scratch(g, i) : 0;
}

tl_status tl_program_compile(const tl_graph *g, tl_t loss, bool backward, tl_program **out)
{
    return tl_program_compile_fused(g, loss, backward, NULL, -1, out);
}

/* nkeep < 0: keep every value (no fusion). */
tl_status tl_program_compile_fused(const tl_graph *g, tl_t loss, bool backward, const tl_t *keep, int nkeep,
                                   tl_program **out)
{
    *out = NULL;
    if (g->status != TL_OK)
        return tl_error(g->status, "%s", g->err);
    if (backward) {
        const tl_node *l = tl_graph_node(g, loss);
        if (l == NULL || l->rank != 0 || l->dtype != TL_F32)
            return tl_error(TL_EINVAL, "the loss must be a scalar float32 tensor of the graph");
    }
    tl_program *p = tl_calloc(1, sizeof *p);
    if (p == NULL)
        return tl_error_oom();
    int n = g->n;
    bool *reach = tl_calloc((size_t)(n ? n : 1), sizeof *reach);
    p->val_off = tl_alloc_array((size_t)(n ? n : 1), sizeof *p->val_off);
    p->grad_off = tl_alloc_array((size_t)(n ? n : 1), sizeof *p->grad_off);
    p->mask_off = tl_alloc_array((size_t)(n ? n : 1), sizeof *p->mask_off);
    p->fuse = tl_calloc((size_t)(n ? n : 1), sizeof *p->fuse);
    p->aux_floats = tl_calloc((size_t)(n ? n : 1), sizeof *p->aux_floats);
    p->bias_add = tl_alloc_array((size_t)(n ? n : 1), sizeof *p->bias_add);
    if (reach == NULL || p->val_off == NULL || p->grad_off == NULL || p->mask_off == NULL || p->fuse == NULL ||
        p->aux_floats == NULL || p->bias_add == NULL) {
        tl_free(reach);
        tl_program_destroy(p);
        return tl_error_oom();
    }
    p->g = g;
    p->loss = loss;
    p->backward = backward;
    for (int i = 0; i < n; i++)
        p->bias_add[i] = TL_T_INVALID;
    if (nkeep >= 0)
        plan_fusion(p, backward ? loss : TL_T_INVALID, backward, keep, nkeep);
    p->remat = tl_calloc((size_t)(n ? n : 1), sizeof *p->remat);
    if (p->remat == NULL) {
        tl_free(reach);
        tl_program_destroy(p);
        return tl_error_oom();
    }
    int64_t transient = plan_transient(p, loss, keep, nkeep), shared_val = -1, shared_grad = -1;

    /* Nodes the loss depends on, walking back from it. */
    if (backward) {
        reach[loss] = true;
        for (int i = n - 1; i >= 0; i--)
            if (reach[i])
                for (int k = 0; k < g->nodes[i].nin; k++)
                    reach[g->nodes[i].in[k]] = true;
    }

    int64_t act = 0, grad = 0, mask = 0, scratch = 0;
    for (int i = 0; i < n; i++) {
        const tl_node *nd = &g->nodes[i];
        if (p->fuse[i] == TL_FUSE_ELIDED) {
            p->val_off[i] = p->grad_off[i] = p->mask_off[i] = TL_OFF_NONE; /* never built (program.h) */
            continue;
        }
        if (nd->op == TL_OP_VARIABLE) {
            p->val_off[i] = TL_OFF_PARAM;
        } else if (aliases_input(p, i) && p->val_off[nd->in[0]] >= 0) {
            p->val_off[i] = p->val_off[nd->in[0]]; /* a view: same bytes (a variable's reshape is a copy) */
        } else if (p->remat[i]) {
            if (shared_val < 0) {
                shared_val = act;
                act += round_up(transient, 16);
            }
            p->val_off[i] = shared_val;
        } else {
            p->val_off[i] = act;
            act += round_up(nd->size * tl_dtype_slots(nd->dtype), 16); /* 64-byte aligned within the slab */
            p->aux_floats[i] = op_aux(g, i);
            act += round_up(p->aux_floats[i], 16); /* tl_exec_aux */
        }
        p->grad_off[i] = TL_OFF_NONE;
        if (backward && reach[i] && nd->needs_grad) {
            if (nd->op == TL_OP_VARIABLE) {
                p->grad_off[i] = TL_OFF_PARAM;
            } else if (aliases_input(p, i) && p->grad_off[nd->in[0]] >= 0) {
                p->grad_off[i] = p->grad_off[nd->in[0]];
            } else if (p->remat[i]) {
                if (shared_grad < 0) {
                    shared_grad = grad;
                    grad += round_up(transient, 16);
                }
                p->grad_off[i] = shared_grad;
            } else {
                p->grad_off[i] = grad;
                grad += round_up(nd->size, 16);
            }
        }
        p->mask_off[i] = TL_OFF_NONE;
        if (nd->op == TL_OP_DROPOUT) {
            p->mask_off[i] = mask;
            mask += round_up(nd->size, 64);
        }
        int64_t own = op_scratch(g, i);
        scratch = own > scratch ? own : scratch;
        /* The per-example losses' row maxima / softmax need one row of scratch. */
        if (nd->op == TL_OP_SOFTMAX_XENT && nd->size > 0) {
            int64_t classes = g->nodes[nd->in[0]].shape[1];
            scratch = classes > scratch ? classes : scratch;
        }
    }
    /* Which backward op writes each gradient first (it overwrites; later ones
     * add), and the scratch a later writer needs to add through. */
    p->first_write = tl_calloc((size_t)(n ? n : 1), sizeof *p->first_write);
    bool *seen = tl_calloc((size_t)(n ? n : 1), sizeof *seen);
    bool *var_seen = tl_calloc((size_t)(g->vars->n ? g->vars->n : 1), sizeof *var_seen);
    p->zero_vars = tl_calloc((size_t)(g->vars->n ? g->vars->n : 1), sizeof *p->zero_vars);
    if (p->first_write == NULL || seen == NULL || var_seen == NULL || p->zero_vars == NULL) {
        tl_free(reach);
        tl_free(seen);
        tl_free(var_seen);
        tl_program_destroy(p);
        return tl_error_oom();
    }
    for (int i = n - 1; backward && i >= 0; i--) {
        const tl_node *nd = &g->nodes[i];
        /* A view shares its input's gradient, as does a fused bias add
         * (whose bias's gradient its matmul writes, as the bias add's). */
        bool shares = aliases_input(p, i) && p->grad_off[i] == p->grad_off[nd->in[0]];
        bool fused_bias = shares && nd->op == TL_OP_BIAS_ADD;
        if (p->grad_off[i] == TL_OFF_NONE || (shares && !fused_bias))
            continue;
        int64_t later = op_scratch(g, i); /* the op's own, taken after the staged gradients */
        for (int k = shares ? 1 : 0; k < nd->nin; k++)
            later += plan_write(p, seen, var_seen, i, k);
        /* A stacked dot writes its concatenation's inputs' gradients, as the
         * concatenation would, here. */
        for (int k = 0; p->fuse[i] == TL_FUSE_STACK && k < g->nodes[tl_program_stack_of(p, i)].nin; k++)
            later += plan_write(p, seen, var_seen, tl_program_stack_of(p, i), k);
        /* concat's backward writes every input's slice somewhere, even one
         * without a gradient. */
        for (int k = 0; nd->op == TL_OP_CONCAT && k < nd->nin; k++)
            if (p->grad_off[nd->in[k]] == TL_OFF_NONE)
                later += g->nodes[nd->in[k]].size;
        scratch = later > scratch ? later : scratch;
    }
    for (int v = 0; backward && v < g->vars->n; v++)
        if (!var_seen[v])
            p->zero_vars[p->nzero_vars++] = v;
    tl_free(seen);
    tl_free(var_seen);
    tl_free(reach);
    p->act_floats = act;
    p->grad_floats = grad;
    p->mask_bytes = mask;
    p->scratch_floats = scratch;
    *out = p;
    return TL_OK;
}

void tl_program_destroy(tl_program *p)
{
    if (p == NULL)
        return;
    tl_free(p->val_off);
    tl_free(p->grad_off);
    tl_free(p->mask_off);
    tl_free(p->first_write);
    tl_free(p->zero_vars);
    tl_free(p->fuse);
    tl_free(p->aux_floats);
    tl_free(p->remat);
    tl_free(p->bias_add);
    tl_free(p);
}

float *tl_exec_value(const tl_program *p, const tl_exec *e, tl_t t)
{
    const tl_node *nd = &p->g->nodes[t];
    TL_ASSERT(p->val_off[t] != TL_OFF_NONE); /* an elided stack has no value */
    if (p->val_off[t] == TL_OFF_PARAM)
        return (float *)e->params + p->g->vars->v[nd->var].offset;
    return e->act + p->val_off[t];
}

float *tl_exec_aux(const tl_program *p, const tl_exec *e, tl_t t)
{
    const tl_node *nd = &p->g->nodes[t];
    TL_ASSERT(p->val_off[t] >= 0);
    return e->act + p->val_off[t] + round_up(nd->size * tl_dtype_slots(nd->dtype), 16);
}

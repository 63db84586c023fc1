/* exec.c — running a compiled program on one replica: the forward pass, then
 * the reverse-mode backward pass, each a walk over the nodes calling the
 * kernels of kernels/. Nothing here allocates. A backward op overwrites the
 * gradient it writes first (planned in compile.c) and adds into it after. */
#include <string.h>

#include "../base/thread.h"
#include "../kernels/kernels.h"
#include "ops.h"

/* The stream id keying dropout's random numbers; distinct from variables'. */
#define TL_DROPOUT_STREAM_BASE 0x44524f504f555400ull

static float *val(const tl_program *p, const tl_exec *e, tl_t t)
{
    return tl_exec_value(p, e, t);
}

/* A GEMM on the device's intra-op threads, in as many pieces as keep the
 * bits of one call (tl_k_gemm_parts); alone when it has none. A fused dense
 * layer's piece then adds the bias to its block (and applies the ReLU). */
typedef struct gemm_job {
    const tl_k_gemm *g;
    int nparts;
    const float *bias; /* NULL: no epilogue */
    bool relu;
} gemm_job;

static void gemm_piece(void *ctx, int part, int nparts)
{
    (void)nparts;
    const gemm_job *j = ctx;
    if (part >= j->nparts)
        return;
    tl_k_gemm_part(j->g, part, j->nparts);
    if (j->bias != NULL) {
        int64_t r0, r1, c0, c1;
        tl_k_gemm_piece(j->g, part, j->nparts, &r0, &r1, &c0, &c1);
        tl_k_bias_relu_cols(r1 - r0, j->g->n, c0, c1, j->bias, j->relu, j->g->c + r0 * j->g->n);
    }
}

static tl_status run_gemm(const tl_exec *e, const tl_k_gemm *g, const float *bias, bool relu)
{
    tl_status st = tl_k_gemm_check(g);
    if (st != TL_OK)
        return st;
    gemm_job j = {g, tl_k_gemm_parts(g, tl_team_size(e->team)), bias, relu};
    if (j.nparts == 1)
        gemm_piece(&j, 0, 1);
    else
        tl_team_run(e->team, gemm_piece, &j);
    return TL_OK;
}

/* The float range [p, p + n). */
typedef struct span {
    const float *lo, *hi;
} span;

static bool overlap(span x, span y)
{
    return x.lo < y.hi && y.lo < x.hi;
}

static span c_of(const tl_k_gemm *g)
{
    return (span){g->c, g->c + g->m * g->n};
}

/* Whether g reads or writes anything h writes. */
static bool touches(const tl_k_gemm *g, const tl_k_gemm *h)
{
    span a = {g->a, g->a + g->m * g->k}, b = {g->b, g->b + g->k * g->n};
    return overlap(a, c_of(h)) || overlap(b, c_of(h)) || overlap(c_of(g), c_of(h));
}

/* A matmul's two gradient GEMMs in one team job: piece i of g on part i,
 * piece j of h on part h_first + j. Each piece is the call it is alone: the
 * bits of running them in turn. */
typedef struct pair_job {
    gemm_job g, h;
    int h_first;
} pair_job;

static void pair_piece(void *ctx, int part, int nparts)
{
    pair_job *j = ctx;
    if (part < j->g.nparts)
        gemm_piece(&j->g, part, nparts);
    int hp = part - j->h_first;
    if (hp >= 0 && hp < j->h.nparts)
        gemm_piece(&j->h, hp, nparts);
}

static int64_t macs(const tl_k_gemm *g)
{
    return g->m * g->n * g->k;
}

/* g then h, or both at once on the team when neither touches what the
 * other writes (distinct gradients; always, unless a matmul multiplies a
 * tensor by itself). */
static tl_status run_gemm_pair(const tl_exec *e, const tl_k_gemm *g, const tl_k_gemm *h)
{
    tl_status st = tl_k_gemm_check(g);
    if (st == TL_OK)
        st = tl_k_gemm_check(h);
    if (st != TL_OK)
        return st;
    int threads = tl_team_size(e->team);
    if (threads == 1 || touches(g, h) || touches(h, g)) {
        if ((st = run_gemm(e, g, NULL, false)) == TL_OK)
            st = run_gemm(e, h, NULL, false);
        return st;
    }
    /* Side by side, g on the first half of the team and h on the rest, when
     * their work is alike (within 1.5x) or either is too small to split:
     * pieces of a GEMM pack its shared operand again each, and two whole
     * GEMMs pack nothing twice. Otherwise each in pieces over all of it, h's
     * on the last parts, so that two split ones share a join. */
    int gp = tl_k_gemm_parts(g, threads), hp = tl_k_gemm_parts(h, threads);
    int64_t small = macs(g) < macs(h) ? macs(g) : macs(h), large = macs(g) < macs(h) ? macs(h) : macs(g);
    pair_job j;
    if (gp == 1 || hp == 1 || 2 * large <= 3 * small) {
        int half = (threads + 1) / 2;
        j = (pair_job){{g, tl_k_gemm_parts(g, half), NULL, false}, {h, tl_k_gemm_parts(h, threads - half), NULL, false},
                       half};
    } else {
        j = (pair_job){{g, gp, NULL, false}, {h, hp, NULL, false}, threads - hp};
    }
    tl_team_run(e->team, pair_piece, &j);
    return TL_OK;
}

/* A fused dense layer's backward before its GEMMs: dy (rows, cols) gated in
 * place by the ReLU, and the bias's gradient, split by columns. */
typedef struct bias_grad_job {
    int64_t rows, cols;
    const float *y;
    bool relu;
    float *dy, *dbias;
} bias_grad_job;

/* Fewer elements than this are done on one thread. */
#define BIAS_GRAD_SPLIT_MIN 16384

static void bias_grad_piece(void *ctx, int part, int nparts)
{
    const bias_grad_job *j = ctx;
    int64_t c0, c1;
    tl_team_range(j->cols, 16, part, nparts, &c0, &c1);
    if (c1 > c0)
        tl_k_bias_relu_grad_cols(j->rows, j->cols, c0, c1, j->y, j->relu, j->dy, j->dbias);
}

static void bias_grad(const tl_exec *e, const bias_grad_job *j)
{
    if (j->rows * j->cols < BIAS_GRAD_SPLIT_MIN)
        bias_grad_piece((void *)j, 0, 1);
    else
        tl_team_run(e->team, bias_grad_piece, (void *)j);
}

float *tl_exec_grad(const tl_program *p, const tl_exec *e, tl_t t)
{
    if (t < 0 || t >= p->g->n || p->grad_off[t] == TL_OFF_NONE)
        return NULL;
    const tl_node *nd = &p->g->nodes[t];
    if (p->grad_off[t] == TL_OFF_PARAM)
        return e->param_grad + p->g->vars->v[nd->var].offset;
    return e->grad + p->grad_off[t];
}

float *tl_op_grad(const tl_program *p, const tl_exec *e, tl_t t)
{
    const tl_node *nd = &p->g->nodes[t];
    if (p->grad_off[t] == TL_OFF_PARAM)
        return e->param_grad + p->g->vars->v[nd->var].offset;
    return e->grad + p->grad_off[t];
}

void tl_op_around(const tl_node *nd, int axis, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++)
        *outer *= nd->shape[d];
    for (int d = axis + 1; d < nd->rank; d++)
        *inner *= nd->shape[d];
}

/* The inputs of the concatenation a stacked pairwise dot, node i, reads
 * (program.h): their values and widths. */
typedef struct stack_parts {
    int n;
    const float *x[TL_MAX_OP_INPUTS];
    int64_t width[TL_MAX_OP_INPUTS];
} stack_parts;

static void stack_parts_of(const tl_program *p, const tl_exec *e, int i, stack_parts *sp)
{
    const tl_node *cat = &p->g->nodes[tl_program_stack_of(p, i)];
    sp->n = cat->nin;
    for (int k = 0; k < cat->nin; k++) {
        sp->x[k] = val(p, e, cat->in[k]);
        sp->width[k] = p->g->nodes[cat->in[k]].shape[1];
    }
}

/* A stacked dot's backward: the gradients of the concatenation's inputs,
 * written as the concatenation's backward would write them. */
static void stacked_dot_backward(const tl_program *p, const tl_exec *e, int i, const float *dy, int64_t *cur)
{
    tl_t c = tl_program_stack_of(p, i);
    const tl_node *cat = &p->g->nodes[c], *x = &p->g->nodes[p->g->nodes[i].in[0]];
    stack_parts sp;
    stack_parts_of(p, e, i, &sp);
    float *dx[TL_MAX_OP_INPUTS];
    bool any = false;
    for (int k = 0; k < cat->nin; k++) {
        dx[k] = tl_op_wants(p, c, k) ? tl_op_dst(p, e, c, k, cur) : NULL;
        any = any || dx[k] != NULL;
    }
    if (!any)
        return;
    tl_k_pairwise_dot_tril_parts_grad(x->shape[0], x->shape[1], x->shape[2], sp.n, sp.x, sp.width, dy, dx);
    for (int k = 0; k < cat->nin; k++)
        if (dx[k] != NULL)
            tl_op_finish(p, e, c, k, dx[k]);
}

tl_status tl_program_forward(const tl_program *p, tl_exec *e)
{
    const tl_graph *g = p->g;
    for (int i = 0; i < g->n; i++) {
        const tl_node *nd = &g->nodes[i];
        if (p->fuse[i] == TL_FUSE_INTO || p->fuse[i] == TL_FUSE_ELIDED)
            continue; /* its producer wrote its value, or it has none */
        float *y = val(p, e, i);
        tl_status st = TL_OK;
        switch (nd->op) {
        case TL_OP_INPUT:
        case TL_OP_VARIABLE:
        case TL_OP_EMBEDDING:
            break;
        case TL_OP_MATMUL: {
            const tl_node *a = &g->nodes[nd->in[0]];
            bool ta = nd->iattr[0], tb = nd->iattr[1];
            int64_t k = ta ? a->shape[0] : a->shape[1];
            tl_k_gemm mm = {ta, tb, nd->shape[0], nd->shape[1], k, 1.0f, val(p, e, nd->in[0]), val(p, e, nd->in[1]),
                            0.0f, y};
            tl_t b = p->bias_add[i]; /* a fused dense layer (program.h) */
            st = run_gemm(e, &mm, b != TL_T_INVALID ? val(p, e, g->nodes[b].in[1]) : NULL,
                          p->fuse[i] == TL_FUSE_BIAS_RELU);
            break;
        }
        case TL_OP_BIAS_ADD: {
            int64_t cols = nd->shape[nd->rank - 1];
            tl_k_bias_add(nd->size / cols, cols, val(p, e, nd->in[0]), val(p, e, nd->in[1]), y);
            break;
        }
        case TL_OP_RELU: tl_k_relu(nd->size, val(p, e, nd->in[0]), y); break;
        case TL_OP_SIGMOID: tl_k_sigmoid(nd->size, val(p, e, nd->in[0]), y); break;
        case TL_OP_TANH: tl_k_tanh(nd->size, val(p, e, nd->in[0]), y); break;
        case TL_OP_SOFTMAX_XENT: {
            const tl_node *z = &g->nodes[nd->in[0]];
            st = tl_k_softmax_xent(z->shape[0], z->shape[1], val(p, e, nd->in[0]),
                                   (const int32_t *)val(p, e, nd->in[1]), y);
            break;
        }
        case TL_OP_SIGMOID_XENT:
            if (g->nodes[nd->in[1]].dtype == TL_I32)
                st = tl_k_sigmoid_xent_i32(nd->size, val(p, e, nd->in[0]), (const int32_t *)val(p, e, nd->in[1]), y);
            else
                tl_k_sigmoid_xent(nd->size, val(p, e, nd->in[0]), val(p, e, nd->in[1]), y);
            break;
        case TL_OP_MSE: tl_k_mse(g->nodes[nd->in[0]].size, val(p, e, nd->in[0]), val(p, e, nd->in[1]), y); break;
        case TL_OP_CONCAT: {
            int axis = (int)nd->iattr[0];
            int64_t outer, inner, sizes[TL_MAX_OP_INPUTS];
            const float *xs[TL_MAX_OP_INPUTS];
            tl_op_around(nd, axis, &outer, &inner);
            for (int k = 0; k < nd->nin; k++) {
                sizes[k] = g->nodes[nd->in[k]].shape[axis];
                xs[k] = val(p, e, nd->in[k]);
            }
            st = tl_k_concat(outer, inner, nd->nin, sizes, xs, y);
            break;
        }
        case TL_OP_RESHAPE:
            if (p->val_off[i] != p->val_off[nd->in[0]])
                memcpy(y, val(p, e, nd->in[0]), (size_t)nd->size * sizeof *y);
            break;
        case TL_OP_SLICE: {
            const tl_node *x = &g->nodes[nd->in[0]];
            int axis = (int)nd->iattr[0];
            int64_t outer, inner;
            tl_op_around(x, axis, &outer, &inner);
            st = tl_k_slice(outer, x->shape[axis], inner, nd->iattr[1], nd->iattr[2], val(p, e, nd->in[0]), y);
            break;
        }
        case TL_OP_SUM: tl_k_sum(g->nodes[nd->in[0]].size, val(p, e, nd->in[0]), y); break;
        case TL_OP_MEAN: tl_k_mean(g->nodes[nd->in[0]].size, val(p, e, nd->in[0]), y); break;
        case TL_OP_DROPOUT: {
            tl_rng r;
            tl_rng_init(&r, e->seed, TL_DROPOUT_STREAM_BASE + (uint64_t)nd->iattr[0], (uint64_t)e->replica,
                        (uint64_t)e->step);
            st = tl_k_dropout(nd->size, nd->fattr[0], &r, 0, val(p, e, nd->in[0]), y, e->mask + p->mask_off[i]);
            break;
        }
        case TL_OP_PAIRWISE_DOT: {
            const tl_node *x = &g->nodes[nd->in[0]];
            if (p->fuse[i] == TL_FUSE_STACK) { /* the stack's parts, where they are (program.h) */
                stack_parts sp;
                stack_parts_of(p, e, i, &sp);
                tl_k_pairwise_dot_tril_parts(x->shape[0], x->shape[1], x->shape[2], sp.n, sp.x, sp.width, y);
            } else {
                tl_k_pairwise_dot_tril(x->shape[0], x->shape[1], x->shape[2], val(p, e, nd->in[0]), y);
            }
            break;
        }
        default:
            st = tl_op_family_of(nd->op)->forward(p, e, i);
            break;
        }
        if (st != TL_OK)
            return st;
    }
    return TL_OK;
}

float *tl_op_dst(const tl_program *p, const tl_exec *e, int i, int k, int64_t *cursor)
{
    tl_t in = p->g->nodes[i].in[k];
    if (p->first_write[i] & (1u << k))
        return tl_op_grad(p, e, in);
    float *s = e->scratch + *cursor;
    *cursor += p->g->nodes[in].size;
    return s;
}

void tl_op_finish(const tl_program *p, const tl_exec *e, int i, int k, float *d)
{
    if (!(p->first_write[i] & (1u << k))) {
        tl_t in = p->g->nodes[i].in[k];
        tl_k_accumulate(p->g->nodes[in].size, d, tl_op_grad(p, e, in));
    }
}

bool tl_op_wants(const tl_program *p, int i, int k)
{
    return p->grad_off[p->g->nodes[i].in[k]] != TL_OFF_NONE;
}

bool tl_op_first(const tl_program *p, int i, int k)
{
    return (p->first_write[i] >> k) & 1u;
}

float *tl_op_scratch(const tl_exec *e, int64_t *cursor, int64_t n)
{
    float *s = e->scratch + *cursor;
    *cursor += n;
    return s;
}

tl_status tl_program_backward(const tl_program *p, tl_exec *e)
{
    const tl_graph *g = p->g;
    TL_ASSERT(p->backward);
    for (int v = 0; v < p->nzero_vars; v++) {
        const tl_var *var = &g->vars->v[p->zero_vars[v]];
        memset(e->param_grad + var->offset, 0, (size_t)var->size * sizeof(float));
    }
    if (p->grad_off[p->loss] == TL_OFF_NONE)
        return TL_OK; /* the loss depends on no variable */
    *tl_op_grad(p, e, p->loss) = e->loss_scale;
    for (int i = p->loss; i >= 0; i--) {
        const tl_node *nd = &g->nodes[i];
        if (p->grad_off[i] == TL_OFF_NONE || p->fuse[i] == TL_FUSE_INTO)
            continue; /* no gradient, or its producer's backward does its work */
        tl_status st = TL_OK;
        /* A transient input's value is gathered again (program.h). */
        for (int k = 0; k < nd->nin && st == TL_OK; k++)
            if (p->remat[nd->in[k]])
                st = tl_op_family_of(g->nodes[nd->in[k]].op)->forward(p, e, nd->in[k]);
        if (st != TL_OK)
            return st;
        const float *dy = tl_op_grad(p, e, i);
        int64_t cur = 0;
        float *d0, *d1;
        switch (nd->op) {
        case TL_OP_INPUT:
        case TL_OP_VARIABLE:
        case TL_OP_EMBEDDING:
            break;
        case TL_OP_MATMUL: {
            const tl_node *a = &g->nodes[nd->in[0]];
            bool ta = nd->iattr[0], tb = nd->iattr[1];
            int64_t k = ta ? a->shape[0] : a->shape[1];
            tl_t b = p->bias_add[i];
            if (b != TL_T_INVALID) { /* a fused dense layer: the ReLU's and the bias add's backward first */
                bias_grad_job bj = {nd->shape[0], nd->shape[1], val(p, e, i), p->fuse[i] == TL_FUSE_BIAS_RELU,
                                    tl_op_grad(p, e, i), tl_op_wants(p, b, 1) ? tl_op_dst(p, e, b, 1, &cur) : NULL};
                bias_grad(e, &bj);
                if (bj.dbias != NULL)
                    tl_op_finish(p, e, b, 1, bj.dbias);
            }
            /* matmul_grad accumulates with beta = 1: no scratch needed. */
            float *da = tl_op_wants(p, i, 0) ? tl_op_grad(p, e, nd->in[0]) : NULL;
            float *db = tl_op_wants(p, i, 1) ? tl_op_grad(p, e, nd->in[1]) : NULL;
            tl_k_gemm gda, gdb;
            tl_k_matmul_grad_gemms(ta, tb, nd->shape[0], nd->shape[1], k, 1.0f, val(p, e, nd->in[0]),
                                   val(p, e, nd->in[1]), dy, (p->first_write[i] & 1u) ? 0.0f : 1.0f, da, NULL, &gda,
                                   NULL);
            tl_k_matmul_grad_gemms(ta, tb, nd->shape[0], nd->shape[1], k, 1.0f, val(p, e, nd->in[0]),
                                   val(p, e, nd->in[1]), dy, (p->first_write[i] & 2u) ? 0.0f : 1.0f, NULL, db, NULL,
                                   &gdb);
            if (da != NULL && db != NULL)
                st = run_gemm_pair(e, &gda, &gdb);
            else if (da != NULL)
                st = run_gemm(e, &gda, NULL, false);
            else if (db != NULL)
                st = run_gemm(e, &gdb, NULL, false);
            break;
        }
        case TL_OP_BIAS_ADD: {
            int64_t cols = nd->shape[nd->rank - 1];
            if (tl_op_wants(p, i, 0)) {
                d0 = tl_op_dst(p, e, i, 0, &cur);
                memcpy(d0, dy, (size_t)nd->size * sizeof *d0);
                tl_op_finish(p, e, i, 0, d0);
            }
            if (tl_op_wants(p, i, 1)) {
                d1 = tl_op_dst(p, e, i, 1, &cur);
                tl_k_bias_add_grad(nd->size / cols, cols, dy, d1);
                tl_op_finish(p, e, i, 1, d1);
            }
            break;
        }
        case TL_OP_RELU:
        case TL_OP_SIGMOID:
        case TL_OP_TANH:
            if (tl_op_wants(p, i, 0)) {
                d0 = tl_op_dst(p, e, i, 0, &cur);
                if (nd->op == TL_OP_RELU)
                    tl_k_relu_grad(nd->size, val(p, e, i), dy, d0);
                else if (nd->op == TL_OP_SIGMOID)
                    tl_k_sigmoid_grad(nd->size, val(p, e, i), dy, d0);
                else
                    tl_k_tanh_grad(nd->size, val(p, e, i), dy, d0);
                tl_op_finish(p, e, i, 0, d0);
            }
            break;
        case TL_OP_SOFTMAX_XENT:
            if (tl_op_wants(p, i, 0)) {
                const tl_node *z = &g->nodes[nd->in[0]];
                d0 = tl_op_dst(p, e, i, 0, &cur);
                st = tl_k_softmax_xent_grad(z->shape[0], z->shape[1], val(p, e, nd->in[0]),
                                            (const int32_t *)val(p, e, nd->in[1]), dy, d0);
                tl_op_finish(p, e, i, 0, d0);
            }
            break;
        case TL_OP_SIGMOID_XENT:
            if (tl_op_wants(p, i, 0)) {
                d0 = tl_op_dst(p, e, i, 0, &cur);
                if (g->nodes[nd->in[1]].dtype == TL_I32)
                    st = tl_k_sigmoid_xent_i32_grad(nd->size, val(p, e, nd->in[0]),
                                                    (const int32_t *)val(p, e, nd->in[1]), dy, d0);
                else
                    tl_k_sigmoid_xent_grad(nd->size, val(p, e, nd->in[0]), val(p, e, nd->in[1]), dy, d0);
                tl_op_finish(p, e, i, 0, d0);
            }
            break;
        case TL_OP_MSE:
            for (int k = 0; k < 2; k++) {
                if (!tl_op_wants(p, i, k))
                    continue;
                /* d/da of mean((a-b)^2) is 2(a-b)/N; d/db is its negation. */
                int64_t m = g->nodes[nd->in[k]].size;
                d0 = tl_op_dst(p, e, i, k, &cur);
                tl_k_mse_grad(m, val(p, e, nd->in[k]), val(p, e, nd->in[1 - k]), dy, d0);
                tl_op_finish(p, e, i, k, d0);
            }
            break;
        case TL_OP_CONCAT: {
            int axis = (int)nd->iattr[0];
            int64_t outer, inner, sizes[TL_MAX_OP_INPUTS];
            float *dxs[TL_MAX_OP_INPUTS];
            tl_op_around(nd, axis, &outer, &inner);
            for (int k = 0; k < nd->nin; k++) {
                sizes[k] = g->nodes[nd->in[k]].shape[axis];
                dxs[k] = tl_op_wants(p, i, k) ? tl_op_dst(p, e, i, k, &cur) : NULL;
            }
            for (int k = 0; k < nd->nin; k++)
                if (dxs[k] == NULL) { /* no gradient wanted: written to scratch and dropped */
                    dxs[k] = e->scratch + cur;
                    cur += g->nodes[nd->in[k]].size;
                }
            st = tl_k_concat_grad(outer, inner, nd->nin, sizes, dy, dxs);
            for (int k = 0; k < nd->nin; k++)
                if (tl_op_wants(p, i, k))
                    tl_op_finish(p, e, i, k, dxs[k]);
            break;
        }
        case TL_OP_RESHAPE:
            if (tl_op_wants(p, i, 0) && p->grad_off[i] != p->grad_off[nd->in[0]]) {
                d0 = tl_op_dst(p, e, i, 0, &cur);
                memcpy(d0, dy, (size_t)nd->size * sizeof *d0);
                tl_op_finish(p, e, i, 0, d0);
            }
            break;
        case TL_OP_SLICE:
            if (tl_op_wants(p, i, 0)) {
                const tl_node *x = &g->nodes[nd->in[0]];
                int axis = (int)nd->iattr[0];
                int64_t outer, inner;
                tl_op_around(x, axis, &outer, &inner);
                bool first = p->first_write[i] & 1u;
                st = tl_k_slice_grad(outer, x->shape[axis], inner, nd->iattr[1], nd->iattr[2], dy, !first,
                                     tl_op_grad(p, e, nd->in[0]));
            }
            break;
        case TL_OP_SUM:
        case TL_OP_MEAN:
            if (tl_op_wants(p, i, 0)) {
                int64_t m = g->nodes[nd->in[0]].size;
                d0 = tl_op_dst(p, e, i, 0, &cur);
                if (nd->op == TL_OP_SUM)
                    tl_k_sum_grad(m, dy, d0);
                else
                    tl_k_mean_grad(m, dy, d0);
                tl_op_finish(p, e, i, 0, d0);
            }
            break;
        case TL_OP_DROPOUT:
            if (tl_op_wants(p, i, 0)) {
                d0 = tl_op_dst(p, e, i, 0, &cur);
                st = tl_k_dropout_grad(nd->size, nd->fattr[0], e->mask + p->mask_off[i], dy, d0);
                tl_op_finish(p, e, i, 0, d0);
            }
            break;
        case TL_OP_PAIRWISE_DOT:
            if (p->fuse[i] == TL_FUSE_STACK) {
                stacked_dot_backward(p, e, i, dy, &cur);
            } else if (tl_op_wants(p, i, 0)) {
                const tl_node *x = &g->nodes[nd->in[0]];
                d0 = tl_op_dst(p, e, i, 0, &cur);
                tl_k_pairwise_dot_tril_grad(x->shape[0], x->shape[1], x->shape[2], val(p, e, nd->in[0]), dy, d0);
                tl_op_finish(p, e, i, 0, d0);
            }
            break;
        default:
            st = tl_op_family_of(nd->op)->backward(p, e, i, &cur);
            break;
        }
        if (st != TL_OK)
            return st;
    }
    return TL_OK;
}

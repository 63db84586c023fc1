/*
 * einsum.c — tf.einsum traced as the ops it stands for: no op kind and no
 * kernel of its own, so its gradients are those of the ops below.
 *
 * An equation names each operand's axes by labels (a-z, A-Z). Labels that
 * appear in one operand only and not in the output are summed first
 * (tl_reduce_sum). The operands are then folded left to right, each pair
 * (the product so far, the next operand) split by label into
 *
 *     batch       in both, and kept (in the output or a later operand)
 *     contracted  in both, not kept
 *     free        in one of the two (always kept: the rest were summed)
 *
 * and multiplied as one tl_batch_matmul of (batch, free_a, contracted) by
 * (batch, contracted, free_b), each side transposed only when its axes are
 * not already in one of the two orders GEMM takes (the adjoint flags cover
 * the other), and with the batch, free and contracted labels each merged into
 * one dimension by tl_reshape (a view). A pair with nothing to contract is a
 * broadcast tl_mul instead. The product's axes are (batch, free_a, free_b);
 * a last tl_transpose puts them in the output's order.
 */
#include <stdio.h>
#include <string.h>

#include "graph_int.h"

#define SHAPE(node, buf) tl_shape_str((node)->shape, (node)->rank, buf, sizeof buf)

#define NLABELS 52      /* a-z, A-Z */
#define MAX_OPERANDS 3
/* Long enough for any equation a valid call can have: three operands and
 * an output of rank <= TL_MAX_RANK, their commas and the arrow. */
#define MAX_EQUATION 64

/* A label's index in masks and tables: a-z 0..25, A-Z 26..51; -1 for others. */
static int label_index(char c)
{
    if (c >= 'a' && c <= 'z')
        return c - 'a';
    if (c >= 'A' && c <= 'Z')
        return 26 + (c - 'A');
    return -1;
}

static char label_char(int l)
{
    return (char)(l < 26 ? 'a' + l : 'A' + (l - 26));
}

static int popcount(uint64_t m)
{
    int n = 0;
    for (; m != 0; m &= m - 1)
        n++;
    return n;
}

/* The parsed equation: each term's labels as written, without spaces. */
typedef struct equation {
    int nterms;
    char term[MAX_OPERANDS][MAX_EQUATION + 1];
    char out[MAX_EQUATION + 1];
    bool explicit_out;
} equation;

/* One operand, or the product so far: a tensor and each axis's label. */
typedef struct factor {
    tl_t t;
    int rank;
    int label[TL_MAX_RANK];
} factor;

static uint64_t mask_of(const factor *f)
{
    uint64_t m = 0;
    for (int d = 0; d < f->rank; d++)
        m |= (uint64_t)1 << f->label[d];
    return m;
}

/* Splits eq (spaces dropped, as tf.einsum does) into terms and the output. */
static bool parse(tl_graph *g, const char *eq, equation *e)
{
    char s[MAX_EQUATION + 1];
    size_t n = 0;
    for (const char *c = eq; *c != '\0'; c++) {
        if (*c == ' ')
            continue;
        if (n == MAX_EQUATION) {
            tl_graph_failf(g, TL_EINVAL,
                           "einsum: equation '%.40s...' is longer than %d characters, which no operands of rank <= %d "
                           "need",
                           eq, MAX_EQUATION, TL_MAX_RANK);
            return false;
        }
        s[n++] = *c;
    }
    s[n] = '\0';
    if (strchr(s, '.') != NULL) {
        tl_graph_failf(g, TL_EINVAL, "einsum: equation '%s' has an ellipsis ('...'), which is not supported", eq);
        return false;
    }
    memset(e, 0, sizeof *e);
    char *arrow = strstr(s, "->");
    if (arrow != NULL) {
        if (strstr(arrow + 2, "->") != NULL) {
            tl_graph_failf(g, TL_EINVAL, "einsum: equation '%s' has more than one '->'", eq);
            return false;
        }
        e->explicit_out = true;
        memcpy(e->out, arrow + 2, strlen(arrow + 2) + 1);
        *arrow = '\0';
    }
    for (const char *c = e->out; *c != '\0'; c++)
        if (label_index(*c) < 0) {
            tl_graph_failf(g, TL_EINVAL, "einsum: equation '%s' has '%c' in the output; labels are a-z and A-Z", eq,
                           *c);
            return false;
        }
    const char *term = s;
    for (const char *c = s;; c++) {
        if (*c != ',' && *c != '\0') {
            if (label_index(*c) < 0) {
                tl_graph_failf(g, TL_EINVAL,
                               "einsum: equation '%s' has '%c' among the operands' labels; labels are a-z and A-Z", eq,
                               *c);
                return false;
            }
            continue;
        }
        if (e->nterms == MAX_OPERANDS) {
            tl_graph_failf(g, TL_EINVAL, "einsum: equation '%s' has more than %d operands", eq, MAX_OPERANDS);
            return false;
        }
        memcpy(e->term[e->nterms], term, (size_t)(c - term));
        e->term[e->nterms][c - term] = '\0';
        e->nterms++;
        if (*c == '\0')
            return true;
        term = c + 1;
    }
}

/* x transposed so that its axes carry the labels order[0..rank). */
static bool permute(tl_graph *g, factor *x, const int *order)
{
    int perm[TL_MAX_RANK];
    bool same = true;
    for (int d = 0; d < x->rank; d++) {
        int src = 0;
        while (x->label[src] != order[d])
            src++;
        perm[d] = src;
        same = same && src == d;
    }
    if (same)
        return true;
    x->t = tl_transpose(g, x->t, perm, x->rank);
    memcpy(x->label, order, (size_t)x->rank * sizeof *order);
    return x->t >= 0;
}

/* x with the axes whose labels are not in keep summed away. */
static bool sum_out(tl_graph *g, factor *x, uint64_t keep)
{
    int axes[TL_MAX_RANK], naxes = 0, rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (keep >> x->label[d] & 1)
            x->label[rank++] = x->label[d];
        else
            axes[naxes++] = d;
    }
    if (naxes == 0)
        return true;
    x->t = tl_reduce_sum(g, x->t, axes, naxes, false);
    x->rank = rank;
    return x->t >= 0;
}

/* The labels of x in mask, in x's axis order, appended to list at *n. */
static void labels_in(const factor *x, uint64_t mask, int *list, int *n)
{
    for (int d = 0; d < x->rank; d++)
        if (mask >> x->label[d] & 1)
            list[(*n)++] = x->label[d];
}

static int64_t product_of(const int *labels, int n, const int64_t *size)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= size[labels[i]];
    return p;
}

/* Whether x's labels are the concatenation of the three lists. */
static bool in_order(const factor *x, const int *l1, int n1, const int *l2, int n2, const int *l3, int n3)
{
    int order[TL_MAX_RANK], n = 0;
    for (int i = 0; i < n1; i++)
        order[n++] = l1[i];
    for (int i = 0; i < n2; i++)
        order[n++] = l2[i];
    for (int i = 0; i < n3; i++)
        order[n++] = l3[i];
    return n == x->rank && memcmp(order, x->label, (size_t)n * sizeof *order) == 0;
}

/* t reshaped to shape, or t itself when it has that shape already. */
static tl_t reshaped(tl_graph *g, tl_t t, const int64_t *shape, int rank)
{
    const tl_node *nd = &g->nodes[t];
    if (nd->rank == rank && memcmp(nd->shape, shape, (size_t)rank * sizeof *shape) == 0)
        return t;
    return tl_reshape(g, t, shape, rank);
}

/* x as (batch, p, q): transposed to those labels' order, then reshaped to
 * rank 3 (or 2 without batch labels). */
static tl_t as_matrices(tl_graph *g, factor *x, const int *bl, int nb, const int *pl, int np, const int *ql, int nq,
                        const int64_t *size)
{
    int order[TL_MAX_RANK], n = 0;
    for (int i = 0; i < nb; i++)
        order[n++] = bl[i];
    for (int i = 0; i < np; i++)
        order[n++] = pl[i];
    for (int i = 0; i < nq; i++)
        order[n++] = ql[i];
    if (!permute(g, x, order))
        return TL_T_INVALID;
    int64_t shape[3];
    int rank = 0;
    if (nb > 0)
        shape[rank++] = product_of(bl, nb, size);
    shape[rank++] = product_of(pl, np, size);
    shape[rank++] = product_of(ql, nq, size);
    return reshaped(g, x->t, shape, rank);
}

/* x transposed to (batch, free) and reshaped with `ones` axes of size 1
 * before (at_end false) or after (at_end true) its free axes. */
static tl_t padded(tl_graph *g, factor *x, const int *bl, int nb, const int *fl, int nf, int ones, bool at_end,
                   const int64_t *size)
{
    int order[TL_MAX_RANK], n = 0;
    int64_t shape[TL_MAX_RANK];
    for (int i = 0; i < nb; i++)
        order[n++] = bl[i];
    for (int i = 0; i < nf; i++)
        order[n++] = fl[i];
    if (!permute(g, x, order))
        return TL_T_INVALID;
    int rank = 0;
    for (int i = 0; i < nb; i++)
        shape[rank++] = size[bl[i]];
    for (int i = 0; i < ones && !at_end; i++)
        shape[rank++] = 1;
    for (int i = 0; i < nf; i++)
        shape[rank++] = size[fl[i]];
    for (int i = 0; i < ones && at_end; i++)
        shape[rank++] = 1;
    return reshaped(g, x->t, shape, rank);
}

/* a ← a·b summed over their shared labels not in keep; a's labels become
 * (batch, free_a, free_b). Every label of a and b not in the other is in
 * keep (sum_out ran first). */
static bool contract(tl_graph *g, factor *a, factor b, uint64_t keep, const int64_t *size)
{
    uint64_t ma = mask_of(a), mb = mask_of(&b);
    int bl[TL_MAX_RANK], cl[TL_MAX_RANK], fa[TL_MAX_RANK], fb[TL_MAX_RANK];
    int nb = 0, nc = 0, nfa = 0, nfb = 0;
    labels_in(a, ma & mb & keep, bl, &nb);
    labels_in(a, ma & mb & ~keep, cl, &nc);
    labels_in(a, ma & ~mb, fa, &nfa);
    labels_in(&b, mb & ~ma, fb, &nfb);
    tl_t y;
    if (nc == 0) {
        /* Nothing to sum: a (batch, free_a, 1...) times b (batch, 1..., free_b). */
        tl_t x1 = padded(g, a, bl, nb, fa, nfa, nfb, true, size);
        tl_t x2 = x1 < 0 ? TL_T_INVALID : padded(g, &b, bl, nb, fb, nfb, nfa, false, size);
        y = x2 < 0 ? TL_T_INVALID : tl_mul(g, x1, x2);
    } else {
        /* The order GEMM reads without a transpose, if either fits. */
        bool adj_a = !in_order(a, bl, nb, fa, nfa, cl, nc) && in_order(a, bl, nb, cl, nc, fa, nfa);
        bool adj_b = !in_order(&b, bl, nb, cl, nc, fb, nfb) && in_order(&b, bl, nb, fb, nfb, cl, nc);
        tl_t x1 = adj_a ? as_matrices(g, a, bl, nb, cl, nc, fa, nfa, size)
                        : as_matrices(g, a, bl, nb, fa, nfa, cl, nc, size);
        tl_t x2 = x1 < 0    ? TL_T_INVALID
                  : adj_b ? as_matrices(g, &b, bl, nb, fb, nfb, cl, nc, size)
                          : as_matrices(g, &b, bl, nb, cl, nc, fb, nfb, size);
        y = x2 < 0 ? TL_T_INVALID : tl_batch_matmul(g, x1, x2, adj_a, adj_b);
        int64_t shape[TL_MAX_RANK];
        int rank = 0;
        for (int i = 0; i < nb; i++)
            shape[rank++] = size[bl[i]];
        for (int i = 0; i < nfa; i++)
            shape[rank++] = size[fa[i]];
        for (int i = 0; i < nfb; i++)
            shape[rank++] = size[fb[i]];
        if (y >= 0)
            y = reshaped(g, y, shape, rank);
    }
    a->t = y;
    a->rank = 0;
    for (int i = 0; i < nb; i++)
        a->label[a->rank++] = bl[i];
    for (int i = 0; i < nfa; i++)
        a->label[a->rank++] = fa[i];
    for (int i = 0; i < nfb; i++)
        a->label[a->rank++] = fb[i];
    return y >= 0;
}

tl_t tl_einsum(tl_graph *g, const char *equation_str, const tl_t *xs, int n)
{
    if (n < 1 || n > MAX_OPERANDS)
        return tl_graph_failf(g, TL_EINVAL, "einsum: %d operands; 1 to %d are allowed", n, MAX_OPERANDS);
    if (xs == NULL)
        return tl_graph_failf(g, TL_EINVAL, "einsum: xs is NULL");
    for (int k = 0; k < n; k++) {
        char what[32];
        snprintf(what, sizeof what, "operand %d", k);
        if (tl_graph_need_f32(g, xs[k], "einsum", what) < 0)
            return TL_T_INVALID;
    }
    if (equation_str == NULL)
        return tl_graph_failf(g, TL_EINVAL, "einsum: equation is NULL");
    equation e;
    if (!parse(g, equation_str, &e))
        return TL_T_INVALID;
    if (e.nterms != n)
        return tl_graph_failf(g, TL_EINVAL, "einsum: equation '%s' has %d operand%s but %d tensor%s given",
                              equation_str, e.nterms, e.nterms == 1 ? "" : "s", n, n == 1 ? " is" : "s are");

    /* Each operand's labels against its shape; every label's size. */
    factor f[MAX_OPERANDS];
    int64_t size[NLABELS];
    int owner[NLABELS], count[NLABELS] = {0};
    char s1[96], s2[96];
    for (int k = 0; k < n; k++) {
        const tl_node *x = &g->nodes[xs[k]];
        const char *t = e.term[k];
        int len = (int)strlen(t);
        if (len != x->rank)
            return tl_graph_failf(g, TL_EINVAL,
                                  "einsum: operand %d has rank %d but the equation gives it %d label%s '%s'", k,
                                  x->rank, len, len == 1 ? "" : "s", t);
        f[k].t = xs[k];
        f[k].rank = x->rank;
        for (int d = 0; d < len; d++) {
            int l = label_index(t[d]);
            if (strchr(t + d + 1, t[d]) != NULL)
                return tl_graph_failf(g, TL_EINVAL,
                                      "einsum: operand %d has label '%c' twice in '%s'; a repeated label (a diagonal) "
                                      "is not supported",
                                      k, t[d], t);
            if (count[l] > 0 && size[l] != x->shape[d]) {
                const tl_node *o = &g->nodes[xs[owner[l]]];
                return tl_graph_failf(g, TL_EINVAL,
                                      "einsum: label '%c' has size %lld in operand %d %s but %lld in operand %d %s",
                                      t[d], (long long)size[l], owner[l], SHAPE(o, s1), (long long)x->shape[d], k,
                                      SHAPE(x, s2));
            }
            if (count[l] == 0) {
                size[l] = x->shape[d];
                owner[l] = k;
            }
            count[l]++;
            f[k].label[d] = l;
        }
    }

    /* The output: as written, or the labels that appear once, sorted (ASCII:
     * A-Z before a-z, as tf.einsum's sorted()). */
    uint64_t out_mask = 0;
    int out[NLABELS], nout = 0;
    if (e.explicit_out) {
        for (const char *c = e.out; *c != '\0'; c++) {
            int l = label_index(*c);
            if (out_mask >> l & 1)
                return tl_graph_failf(g, TL_EINVAL, "einsum: the output '%s' has label '%c' twice", e.out, *c);
            if (count[l] == 0)
                return tl_graph_failf(g, TL_EINVAL, "einsum: output label '%c' of '%s' is in no operand", *c,
                                      equation_str);
            out_mask |= (uint64_t)1 << l;
            out[nout++] = l;
        }
    } else {
        for (char c = 'A'; c <= 'z'; c++) {
            int l = label_index(c);
            if (l >= 0 && count[l] == 1) {
                out_mask |= (uint64_t)1 << l;
                out[nout++] = l;
            }
        }
    }
    if (nout > TL_MAX_RANK) {
        char o[NLABELS + 1];
        for (int i = 0; i < nout; i++)
            o[i] = label_char(out[i]);
        o[nout] = '\0';
        return tl_graph_failf(g, TL_EINVAL, "einsum: the output '%s' has %d labels; tensors have rank <= %d", o, nout,
                              TL_MAX_RANK);
    }

    /* Labels that one operand has, and no other operand nor the output, are
     * summed first; every product the fold makes must fit a tensor's rank. */
    uint64_t all[MAX_OPERANDS], keep[MAX_OPERANDS], later[MAX_OPERANDS + 1] = {0};
    for (int k = 0; k < n; k++)
        all[k] = mask_of(&f[k]);
    for (int k = n - 1; k >= 0; k--)
        later[k] = later[k + 1] | all[k];
    for (int k = 0; k < n; k++) {
        keep[k] = out_mask;
        for (int j = 0; j < n; j++)
            keep[k] |= j != k ? all[j] : 0;
    }
    uint64_t acc = all[0] & keep[0];
    for (int k = 1; k < n; k++) {
        acc = (acc | (all[k] & keep[k])) & (out_mask | later[k + 1]);
        if (popcount(acc) > TL_MAX_RANK)
            return tl_graph_failf(g, TL_EINVAL,
                                  "einsum: '%s' multiplies operands 0..%d into %d axes; tensors have rank <= %d",
                                  equation_str, k, popcount(acc), TL_MAX_RANK);
    }

    for (int k = 0; k < n; k++)
        if (!sum_out(g, &f[k], keep[k]))
            return TL_T_INVALID;
    factor y = f[0];
    for (int k = 1; k < n; k++)
        if (!contract(g, &y, f[k], out_mask | later[k + 1], size))
            return TL_T_INVALID;
    return permute(g, &y, out) ? y.t : TL_T_INVALID;
}

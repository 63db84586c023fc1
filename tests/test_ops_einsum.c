/* tl_einsum through the tracer, planner and executor: values and shapes
 * against a float64 einsum written out as loops, on the patterns attention
 * and common models use (two and three operands, implicit outputs, sums,
 * outer products, scalars); the bits of tl_batch_matmul where the equation
 * is one, with no transpose traced; gradients of whole graphs against finite
 * differences, an operand used twice included; and the tracing errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph_util.h"
#include "test_kernels_util.h"

TestSuite(ops_einsum, .init = tk_setup, .timeout = 120);

static const tl_initializer uniform = {TL_INIT_UNIFORM, -1.0, 1.0};

/* ---- the float64 twin ------------------------------------------------------- */

/* An explicit equation ("ab,bc->ac") split into its terms. */
typedef struct twin_eq {
    int n;
    char term[3][16];
    char out[16];
} twin_eq;

static twin_eq twin_parse(const char *eq)
{
    twin_eq e;
    memset(&e, 0, sizeof e);
    const char *arrow = strstr(eq, "->");
    cr_assert(arrow != NULL, "the twin takes explicit equations: %s", eq);
    strncpy(e.out, arrow + 2, sizeof e.out - 1);
    size_t len = 0;
    for (const char *c = eq; c <= arrow; c++) {
        if (c == arrow || *c == ',') {
            e.term[e.n][len] = '\0';
            e.n++;
            len = 0;
        } else {
            e.term[e.n][len++] = *c;
        }
    }
    return e;
}

/* y[out] = sum over all labels of the product of the operands, and bound the
 * same sum of |products| (the scale of the float32 result's rounding). The
 * labels' sizes come from the shapes; ysize gets y's element count and
 * yshape (if not NULL) its shape. */
static void twin(const char *eq, const int64_t *const *shapes, const double *const *xs, double *y, double *bound,
                 int64_t *ysize, int64_t *yshape)
{
    twin_eq e = twin_parse(eq);
    int64_t size[128] = {0}, at[128] = {0};
    char labels[64];
    int nl = 0;
    for (int k = 0; k < e.n; k++)
        for (int d = 0; e.term[k][d] != '\0'; d++) {
            unsigned char c = (unsigned char)e.term[k][d];
            if (size[c] == 0)
                labels[nl++] = (char)c;
            size[c] = shapes[k][d];
        }
    int64_t ny = 1;
    for (int d = 0; e.out[d] != '\0'; d++) {
        ny *= size[(unsigned char)e.out[d]];
        if (yshape != NULL)
            yshape[d] = size[(unsigned char)e.out[d]];
    }
    *ysize = ny;
    for (int64_t i = 0; i < ny; i++)
        y[i] = bound[i] = 0.0;
    for (;;) {
        double p = 1.0, b = 1.0;
        for (int k = 0; k < e.n; k++) {
            int64_t idx = 0;
            for (int d = 0; e.term[k][d] != '\0'; d++)
                idx = idx * shapes[k][d] + at[(unsigned char)e.term[k][d]];
            p *= xs[k][idx];
            b *= fabs(xs[k][idx]);
        }
        int64_t o = 0;
        for (int d = 0; e.out[d] != '\0'; d++)
            o = o * size[(unsigned char)e.out[d]] + at[(unsigned char)e.out[d]];
        y[o] += p;
        bound[o] += b;
        int l = nl - 1;
        for (; l >= 0; l--) {
            unsigned char c = (unsigned char)labels[l];
            if (++at[c] < size[c])
                break;
            at[c] = 0;
        }
        if (l < 0)
            break;
    }
}

Test(ops_einsum, the_twin_is_right_on_a_worked_example)
{
    /* (1 2; 3 4)·(5 6; 7 8) = (19 22; 43 50); the trace of that is 69. */
    const double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    const int64_t s[2] = {2, 2};
    const int64_t *shapes[2] = {s, s};
    const double *xs[2] = {a, b};
    double y[4], bound[4];
    int64_t ny;
    twin("ij,jk->ik", shapes, xs, y, bound, &ny, NULL);
    cr_assert_eq(ny, 4);
    cr_assert(y[0] == 19 && y[1] == 22 && y[2] == 43 && y[3] == 50);
    twin("ij,ji->", shapes, xs, y, bound, &ny, NULL);
    cr_assert(ny == 1 && y[0] == 69, "got %g", y[0]);
}

/* ---- values through the executor -------------------------------------------- */

typedef struct traced {
    tl_vars *vars;
    tl_graph *g;
} traced;

static traced trace_new(void)
{
    traced t;
    cr_assert_eq(tl_vars_create(&t.vars), TL_OK);
    cr_assert_eq(tl_graph_create(t.vars, TL_MODE_TRAIN, &t.g), TL_OK);
    return t;
}

static void trace_free(traced *t)
{
    tl_graph_destroy(t->g);
    tl_vars_destroy(t->vars);
}

/* tl_einsum(eq) of n random inputs of the given shapes, run forward, against
 * twin_eq (eq itself when NULL: an explicit equation) in float64; the result's
 * shape too. Returns nothing: asserts. */
static void check_values(const char *eq, const char *twin_equation, int n, const int64_t *const *shapes,
                         const int *ranks)
{
    traced t = trace_new();
    tl_t in[3];
    for (int k = 0; k < n; k++)
        in[k] = tl_graph_input(t.g, TL_F32, shapes[k], ranks[k]);
    tl_t y = tl_einsum(t.g, eq, in, n);
    cr_assert(y >= 0, "%s: %s", eq, tl_graph_error(t.g));
    tl_program *p;
    cr_assert_eq(tl_program_compile(t.g, TL_T_INVALID, false, &p), TL_OK, "%s", tl_last_error());
    tl_exec e = {0};
    e.act = calloc((size_t)p->act_floats + 1, sizeof(float));
    e.mask = calloc((size_t)p->mask_bytes + 1, 1);
    e.scratch = calloc((size_t)p->scratch_floats + 1, sizeof(float));
    tk_buf v[3];
    const double *xd[3];
    for (int k = 0; k < n; k++) {
        const tl_node *nd = tl_graph_node(t.g, in[k]);
        v[k] = tk_rand(nd->size, 70 + (uint64_t)k, -1, 1);
        memcpy(tl_exec_value(p, &e, in[k]), v[k].f, (size_t)nd->size * sizeof(float));
        xd[k] = v[k].d;
    }
    cr_assert_eq(tl_program_forward(p, &e), TL_OK, "%s", tl_last_error());

    const tl_node *ny = tl_graph_node(t.g, y);
    double *want = tk_alloc((size_t)ny->size * sizeof(double)), *bound = tk_alloc((size_t)ny->size * sizeof(double));
    int64_t size, shape[TL_MAX_RANK];
    const char *te = twin_equation != NULL ? twin_equation : eq;
    twin(te, shapes, xd, want, bound, &size, shape);
    const char *arrow = strstr(te, "->");
    int rank = (int)strlen(arrow + 2);
    cr_assert_eq(ny->rank, rank, "%s: rank %d, want %d", eq, ny->rank, rank);
    for (int d = 0; d < rank; d++)
        cr_assert_eq(ny->shape[d], shape[d], "%s: dim %d is %lld, want %lld", eq, d, (long long)ny->shape[d],
                     (long long)shape[d]);
    cr_assert_eq(ny->size, size);
    tk_assert_bounded(size, tl_exec_value(p, &e, y), want, bound, 1e-5, eq);
    free(want);
    free(bound);
    for (int k = 0; k < n; k++)
        tk_free(&v[k]);
    free(e.act);
    free(e.mask);
    free(e.scratch);
    tl_program_destroy(p);
    trace_free(&t);
}

#define SHAPES(...) ((const int64_t *const[]){__VA_ARGS__})
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define RANKS(...) ((const int[]){__VA_ARGS__})

Test(ops_einsum, attention_and_batched_products)
{
    check_values("bij,bjk->bik", NULL, 2, SHAPES(DIMS(3, 4, 5), DIMS(3, 5, 6)), RANKS(3, 3));
    check_values("bhqd,bhkd->bhqk", NULL, 2, SHAPES(DIMS(2, 3, 5, 4), DIMS(2, 3, 7, 4)), RANKS(4, 4));
    check_values("bhqk,bhkd->bhqd", NULL, 2, SHAPES(DIMS(2, 3, 5, 7), DIMS(2, 3, 7, 4)), RANKS(4, 4));
    /* The same with the heads last, as Keras' MultiHeadAttention writes them. */
    check_values("bqhd,bkhd->bhqk", NULL, 2, SHAPES(DIMS(2, 5, 3, 4), DIMS(2, 7, 3, 4)), RANKS(4, 4));
    check_values("bhqk,bkhd->bqhd", NULL, 2, SHAPES(DIMS(2, 3, 5, 7), DIMS(2, 7, 3, 4)), RANKS(4, 4));
    /* A dense layer on a sequence, and its kernel's gradient's shape. */
    check_values("bsi,io->bso", NULL, 2, SHAPES(DIMS(2, 3, 6), DIMS(6, 5)), RANKS(3, 2));
    check_values("bsi,bso->io", NULL, 2, SHAPES(DIMS(2, 3, 6), DIMS(2, 3, 5)), RANKS(3, 3));
}

Test(ops_einsum, one_operand_transposes_and_sums)
{
    check_values("ij->ji", NULL, 1, SHAPES(DIMS(3, 5)), RANKS(2));
    check_values("ij->", NULL, 1, SHAPES(DIMS(3, 5)), RANKS(2));
    check_values("ij->j", NULL, 1, SHAPES(DIMS(3, 5)), RANKS(2));
    check_values("abcd->dca", NULL, 1, SHAPES(DIMS(2, 3, 4, 5)), RANKS(4));
    check_values("abc->cab", NULL, 1, SHAPES(DIMS(2, 3, 4)), RANKS(3));
    check_values("ij->ij", NULL, 1, SHAPES(DIMS(3, 5)), RANKS(2));
    check_values("->", NULL, 1, SHAPES(DIMS(0)), RANKS(0));
}

Test(ops_einsum, vectors_dots_and_outer_products)
{
    check_values("ij,j->i", NULL, 2, SHAPES(DIMS(4, 6), DIMS(6)), RANKS(2, 1));
    check_values("j,jk->k", NULL, 2, SHAPES(DIMS(6), DIMS(6, 3)), RANKS(1, 2));
    check_values("bi,bi->b", NULL, 2, SHAPES(DIMS(5, 7), DIMS(5, 7)), RANKS(2, 2));
    check_values("i,i->", NULL, 2, SHAPES(DIMS(9), DIMS(9)), RANKS(1, 1));
    check_values("ij,ij->", NULL, 2, SHAPES(DIMS(3, 4), DIMS(3, 4)), RANKS(2, 2));
    /* No label contracted: a broadcast multiply. */
    check_values("i,j->ij", NULL, 2, SHAPES(DIMS(4), DIMS(5)), RANKS(1, 1));
    check_values("bi,bj->bij", NULL, 2, SHAPES(DIMS(3, 4), DIMS(3, 5)), RANKS(2, 2));
    check_values("bi,bi->bi", NULL, 2, SHAPES(DIMS(3, 4), DIMS(3, 4)), RANKS(2, 2));
    check_values("ij,jk->kji", NULL, 2, SHAPES(DIMS(2, 3), DIMS(3, 4)), RANKS(2, 2));
    check_values(",ij->ji", NULL, 2, SHAPES(DIMS(0), DIMS(3, 4)), RANKS(0, 2));
    /* Labels of one operand only, summed before the product. */
    check_values("abc,cd->d", NULL, 2, SHAPES(DIMS(2, 3, 4), DIMS(4, 5)), RANKS(3, 2));
    check_values("ab,cd->bc", NULL, 2, SHAPES(DIMS(2, 3), DIMS(4, 5)), RANKS(2, 2));
    /* Contracted axes that are not the last, several of them. */
    check_values("kbi,jik->bj", NULL, 2, SHAPES(DIMS(3, 2, 4), DIMS(5, 4, 3)), RANKS(3, 3));
}

Test(ops_einsum, three_operands_fold_left_to_right)
{
    check_values("ijk,ikl,ilm->ijm", NULL, 3, SHAPES(DIMS(2, 3, 4), DIMS(2, 4, 5), DIMS(2, 5, 3)), RANKS(3, 3, 3));
    check_values("ij,jk,kl->il", NULL, 3, SHAPES(DIMS(2, 3), DIMS(3, 4), DIMS(4, 5)), RANKS(2, 2, 2));
    /* i links operands 0 and 2 past operand 1: kept by the first product. */
    check_values("ij,jk,ki->", NULL, 3, SHAPES(DIMS(3, 4), DIMS(4, 5), DIMS(5, 3)), RANKS(2, 2, 2));
    check_values("bi,ij,bj->b", NULL, 3, SHAPES(DIMS(4, 3), DIMS(3, 5), DIMS(4, 5)), RANKS(2, 2, 2));
    check_values("ij,jxk,kl->li", NULL, 3, SHAPES(DIMS(2, 3), DIMS(3, 6, 4), DIMS(4, 5)), RANKS(2, 3, 2));
    check_values("i,j,k->ijk", NULL, 3, SHAPES(DIMS(2), DIMS(3), DIMS(4)), RANKS(1, 1, 1));
}

Test(ops_einsum, implicit_output_is_the_sorted_labels_seen_once)
{
    check_values("ij,jk", "ij,jk->ik", 2, SHAPES(DIMS(3, 4), DIMS(4, 5)), RANKS(2, 2));
    check_values("ji", "ji->ij", 1, SHAPES(DIMS(3, 4)), RANKS(2));
    /* A-Z sort before a-z, as Python's sorted() in tf.einsum. */
    check_values("ba,aC", "ba,aC->Cb", 2, SHAPES(DIMS(3, 4), DIMS(4, 5)), RANKS(2, 2));
    /* Every label twice: a scalar. */
    check_values("i,i", "i,i->", 2, SHAPES(DIMS(7), DIMS(7)), RANKS(1, 1));
    /* b, h and d twice: summed, unlike "bhqd,bhkd->bhqk". */
    check_values("bhqd,bhkd", "bhqd,bhkd->kq", 2, SHAPES(DIMS(2, 3, 5, 4), DIMS(2, 3, 7, 4)), RANKS(4, 4));
    check_values("ij,jk,kl", "ij,jk,kl->il", 3, SHAPES(DIMS(2, 3), DIMS(3, 4), DIMS(4, 5)), RANKS(2, 2, 2));
    /* Spaces are ignored, as tf.einsum. */
    check_values(" ij , jk -> ki ", "ij,jk->ki", 2, SHAPES(DIMS(3, 4), DIMS(4, 5)), RANKS(2, 2));
}

/* ---- what it traces ----------------------------------------------------------- */

/* How many nodes of kind op g holds. */
static int count_ops(const tl_graph *g, tl_op_kind op)
{
    int c = 0;
    for (tl_t t = 0; tl_graph_node(g, t) != NULL; t++)
        c += tl_graph_node(g, t)->op == op;
    return c;
}

/* einsum(eq, a, b) is tl_batch_matmul(a, b, adj_a, adj_b) bit for bit, with
 * no transpose traced (the adjoint flags take the operands as they lie). */
static void assert_matmul_bits(const char *eq, const int64_t *sa, int ra, const int64_t *sb, int rb, bool adj_a,
                               bool adj_b)
{
    traced t = trace_new();
    tl_t a = tl_graph_input(t.g, TL_F32, sa, ra), b = tl_graph_input(t.g, TL_F32, sb, rb);
    tl_t y = tl_einsum(t.g, eq, (tl_t[]){a, b}, 2);
    cr_assert(y >= 0, "%s: %s", eq, tl_graph_error(t.g));
    cr_assert_eq(count_ops(t.g, TL_OP_TRANSPOSE), 0, "%s traces a transpose", eq);
    cr_assert_eq(count_ops(t.g, TL_OP_BATCH_MATMUL), 1);
    tl_t z = tl_batch_matmul(t.g, a, b, adj_a, adj_b);
    cr_assert(z >= 0, "%s", tl_graph_error(t.g));
    tl_program *p;
    cr_assert_eq(tl_program_compile(t.g, TL_T_INVALID, false, &p), TL_OK, "%s", tl_last_error());
    tl_exec e = {0};
    e.act = calloc((size_t)p->act_floats + 1, sizeof(float));
    e.scratch = calloc((size_t)p->scratch_floats + 1, sizeof(float));
    const tl_node *na = tl_graph_node(t.g, a), *nb = tl_graph_node(t.g, b), *nz = tl_graph_node(t.g, z);
    tk_buf va = tk_rand(na->size, 81, -1, 1), vb = tk_rand(nb->size, 82, -1, 1);
    memcpy(tl_exec_value(p, &e, a), va.f, (size_t)na->size * sizeof(float));
    memcpy(tl_exec_value(p, &e, b), vb.f, (size_t)nb->size * sizeof(float));
    cr_assert_eq(tl_program_forward(p, &e), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_graph_node(t.g, y)->size, nz->size);
    tk_assert_same_bits(nz->size, tl_exec_value(p, &e, y), tl_exec_value(p, &e, z), eq);
    tk_free(&va);
    tk_free(&vb);
    free(e.act);
    free(e.scratch);
    tl_program_destroy(p);
    trace_free(&t);
}

Test(ops_einsum, a_matmul_equation_is_batch_matmul_bit_for_bit)
{
    assert_matmul_bits("bij,bjk->bik", DIMS(3, 4, 5), 3, DIMS(3, 5, 6), 3, false, false);
    assert_matmul_bits("bhqd,bhkd->bhqk", DIMS(2, 3, 5, 4), 4, DIMS(2, 3, 7, 4), 4, false, true);
    assert_matmul_bits("bhqk,bhkd->bhqd", DIMS(2, 3, 5, 7), 4, DIMS(2, 3, 7, 4), 4, false, false);
    assert_matmul_bits("bji,bjk->bik", DIMS(3, 5, 4), 3, DIMS(3, 5, 6), 3, true, false);
    assert_matmul_bits("ji,kj->ik", DIMS(5, 4), 2, DIMS(6, 5), 2, true, true);
}

Test(ops_einsum, an_equation_that_changes_nothing_returns_the_operand)
{
    traced t = trace_new();
    tl_t x = tl_graph_input(t.g, TL_F32, DIMS(3, 4), 2);
    cr_assert_eq(tl_einsum(t.g, "ij->ij", &x, 1), x);
    cr_assert_eq(tl_einsum(t.g, "ab", &x, 1), x);
    cr_assert_eq(tl_graph_status(t.g), TL_OK);
    trace_free(&t);
}

/* ---- gradients of whole graphs ---------------------------------------------- */

static tl_t var(tl_graph *g, const char *name, const int64_t *shape, int rank)
{
    return tl_variable(g, name, shape, rank, uniform);
}

static tl_t loss_of(tl_graph *g, tl_t y)
{
    return tl_mean(g, tl_tanh(g, y));
}

/* Attention: scores Q·Kᵀ, softmax, times V, with the heads in front. */
static tl_t attention(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    const int64_t s[4] = {2, 3, 5, 4};
    tl_t q = var(g, "q", s, 4), k = var(g, "k", s, 4), v = var(g, "v", s, 4);
    tl_t scores = tl_einsum(g, "bhqd,bhkd->bhqk", (tl_t[]){q, k}, 2);
    tl_t p = tl_softmax(g, scores, -1);
    return loss_of(g, tl_einsum(g, "bhqk,bhkd->bhqd", (tl_t[]){p, v}, 2));
}

Test(ops_einsum, attention_gradients) { tg_check_gradients(attention, TL_MODE_TRAIN); }

/* The heads after the sequence, as Keras' MultiHeadAttention's einsums. */
static tl_t attention_heads_last(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels, (void)target;
    tl_t w = var(g, "w", (int64_t[]){6, 2, 3}, 3);            /* (in, heads, dim) */
    tl_t seq = tl_reshape(g, x, (int64_t[]){2, 2, 6}, 3);     /* (b, s, in) */
    tl_t h = tl_einsum(g, "bsi,ihd->bshd", (tl_t[]){seq, w}, 2);
    tl_t scores = tl_einsum(g, "bqhd,bkhd->bhqk", (tl_t[]){h, h}, 2);
    tl_t o = tl_einsum(g, "bhqk,bkhd->bqhd", (tl_t[]){tl_softmax(g, scores, -1), h}, 2);
    return loss_of(g, o);
}

Test(ops_einsum, attention_heads_last_gradients) { tg_check_gradients(attention_heads_last, TL_MODE_TRAIN); }

/* One variable as both operands: its gradient adds up from two reads. */
static tl_t used_twice(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_t v = var(g, "v", (int64_t[]){3, 4}, 2);
    tl_t gram = tl_einsum(g, "ij,kj->ik", (tl_t[]){v, v}, 2);
    tl_t dots = tl_einsum(g, "bi,bi->b", (tl_t[]){v, v}, 2);
    tl_t outer = tl_einsum(g, "i,j->ij", (tl_t[]){dots, dots}, 2);
    return tl_add(g, loss_of(g, gram), loss_of(g, outer));
}

Test(ops_einsum, operand_used_twice) { tg_check_gradients(used_twice, TL_MODE_TRAIN); }

/* The three-operand chain, and one where operand 0 meets operand 2 past 1. */
static tl_t three(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)x, (void)labels, (void)target;
    tl_t a = var(g, "a", (int64_t[]){2, 3, 4}, 3), b = var(g, "b", (int64_t[]){2, 4, 5}, 3);
    tl_t c = var(g, "c", (int64_t[]){2, 5, 3}, 3);
    tl_t y = tl_einsum(g, "ijk,ikl,ilm->ijm", (tl_t[]){a, b, c}, 3);
    tl_t m = var(g, "m", (int64_t[]){3, 4}, 2), n = var(g, "n", (int64_t[]){4, 5}, 2);
    tl_t o = var(g, "o", (int64_t[]){5, 3}, 2);
    tl_t tr = tl_einsum(g, "ij,jk,ki->", (tl_t[]){m, n, o}, 3);
    return tl_add(g, loss_of(g, y), loss_of(g, tr));
}

Test(ops_einsum, three_operand_gradients) { tg_check_gradients(three, TL_MODE_TRAIN); }

/* A dense layer on the features, sums of one operand's labels, transposes,
 * a scalar operand and an implicit output. */
static tl_t mixed(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)labels;
    tl_t w = var(g, "w", (int64_t[]){6, 5}, 2), u = var(g, "u", (int64_t[]){2, 3, 5}, 3);
    tl_t s = var(g, "s", NULL, 0);
    tl_t h = tl_einsum(g, "bi,io->bo", (tl_t[]){x, w}, 2);          /* (4, 5) */
    tl_t r = tl_einsum(g, "abo,co->ac", (tl_t[]){u, h}, 2);         /* b summed first: (2, 4) */
    tl_t t = tl_einsum(g, "ij->ji", &target, 1);                      /* (6, 4) */
    tl_t z = tl_einsum(g, ",ac,ic", (tl_t[]){s, r, t}, 3);            /* implicit "ai": (2, 6) */
    tl_t all = tl_einsum(g, "ij->", &w, 1);
    return tl_add(g, loss_of(g, z), loss_of(g, all));
}

Test(ops_einsum, sums_transposes_scalars_implicit_gradients) { tg_check_gradients(mixed, TL_MODE_TRAIN); }

/* ---- tracing errors ---------------------------------------------------------- */

/* tl_einsum(eq) on inputs of the given shapes fails with msg; the error
 * stays, and later einsums return TL_T_INVALID. */
static void assert_fails(const char *eq, int n, const int64_t *const *shapes, const int *ranks, const char *msg)
{
    traced t = trace_new();
    tl_t in[4];
    for (int k = 0; k < n && k < 4; k++)
        in[k] = tl_graph_input(t.g, TL_F32, shapes[k], ranks[k]);
    cr_assert_eq(tl_einsum(t.g, eq, in, n), TL_T_INVALID, "%s", eq);
    cr_assert_eq(tl_graph_status(t.g), TL_EINVAL);
    cr_assert_str_eq(tl_graph_error(t.g), msg);
    tl_t ok = tl_graph_input(t.g, TL_F32, DIMS(2, 2), 2);
    cr_assert_eq(tl_einsum(t.g, "ij,jk->ik", (tl_t[]){ok, ok}, 2), TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(t.g), msg, "the first error stays");
    trace_free(&t);
}

Test(ops_einsum, equation_errors_name_what_is_wrong)
{
    const int64_t *const two[2] = {DIMS(2, 3), DIMS(3, 4)};
    const int r2[2] = {2, 2};
    assert_fails("ij,jk,kl->il", 2, two, r2, "einsum: equation 'ij,jk,kl->il' has 3 operands but 2 tensors are given");
    assert_fails("ij->ij", 2, two, r2, "einsum: equation 'ij->ij' has 1 operand but 2 tensors are given");
    assert_fails("ij,j$->i", 2, two, r2,
                 "einsum: equation 'ij,j$->i' has '$' among the operands' labels; labels are a-z and A-Z");
    assert_fails("ij,jk->i-k", 2, two, r2,
                 "einsum: equation 'ij,jk->i-k' has '-' in the output; labels are a-z and A-Z");
    assert_fails("ij,jk>ik", 2, two, r2,
                 "einsum: equation 'ij,jk>ik' has '>' among the operands' labels; labels are a-z and A-Z");
    assert_fails("ij,jk->ik->ki", 2, two, r2, "einsum: equation 'ij,jk->ik->ki' has more than one '->'");
    assert_fails("...ij,...jk->...ik", 2, two, r2,
                 "einsum: equation '...ij,...jk->...ik' has an ellipsis ('...'), which is not supported");
    assert_fails("ij,jk,kl,lm->im", 2, two, r2, "einsum: equation 'ij,jk,kl,lm->im' has more than 3 operands");
    assert_fails("ijk,jk->ik", 2, two, r2, "einsum: operand 0 has rank 2 but the equation gives it 3 labels 'ijk'");
    assert_fails("ij,j->i", 2, two, r2, "einsum: operand 1 has rank 2 but the equation gives it 1 label 'j'");
    assert_fails("ij,kj->ik", 2, two, r2,
                 "einsum: label 'j' has size 3 in operand 0 (2, 3) but 4 in operand 1 (3, 4)");
    assert_fails("ij,jk->ikk", 2, two, r2, "einsum: the output 'ikk' has label 'k' twice");
    assert_fails("ij,jk->iz", 2, two, r2, "einsum: output label 'z' of 'ij,jk->iz' is in no operand");

    const int64_t *const square[1] = {DIMS(3, 3)};
    assert_fails("ii->i", 1, square, (const int[]){2},
                 "einsum: operand 0 has label 'i' twice in 'ii'; a repeated label (a diagonal) is not supported");

    const int64_t *const three[3] = {DIMS(3, 4), DIMS(4, 5), DIMS(5, 6)};
    assert_fails("ij,jk,lk->il", 3, three, (const int[]){2, 2, 2},
                 "einsum: label 'k' has size 5 in operand 1 (4, 5) but 6 in operand 2 (5, 6)");

    /* Ranks past TL_MAX_RANK (8): the result, and the first product of three. */
    const int64_t *const wide[2] = {DIMS(2, 2, 2, 2, 2), DIMS(2, 2, 2, 2, 2)};
    assert_fails("abcde,fghij->abcdefghij", 2, wide, (const int[]){5, 5},
                 "einsum: the output 'abcdefghij' has 10 labels; tensors have rank <= 8");
    const int64_t *const wide3[3] = {DIMS(2, 2, 2, 2, 2), DIMS(2, 2, 2, 2, 2), DIMS(2, 2, 2, 2, 2, 2, 2, 2)};
    assert_fails("abcde,fghij,abcdefgh->ij", 3, wide3, (const int[]){5, 5, 8},
                 "einsum: 'abcde,fghij,abcdefgh->ij' multiplies operands 0..1 into 10 axes; tensors have rank <= 8");
}

Test(ops_einsum, argument_errors)
{
    const int64_t *const one[1] = {DIMS(2, 3)};
    const int r1[1] = {2};
    assert_fails("ij->ji", 0, one, r1, "einsum: 0 operands; 1 to 3 are allowed");
    assert_fails("ij,ij,ij,ij->ji", 4, (const int64_t *const[]){DIMS(2, 3), DIMS(2, 3), DIMS(2, 3), DIMS(2, 3)},
                 (const int[]){2, 2, 2, 2}, "einsum: 4 operands; 1 to 3 are allowed");
    assert_fails(NULL, 1, one, r1, "einsum: equation is NULL");
    char eq[80];
    memset(eq, 'a', sizeof eq - 1);
    eq[sizeof eq - 1] = '\0';
    assert_fails(eq, 1, one, r1,
                 "einsum: equation 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is longer than 64 characters, which "
                 "no operands of rank <= 8 need");

    traced t = trace_new();
    cr_assert_eq(tl_einsum(t.g, "ij->ji", NULL, 1), TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(t.g), "einsum: xs is NULL");
    trace_free(&t);

    t = trace_new();
    tl_t f = tl_graph_input(t.g, TL_F32, DIMS(2, 3), 2), i = tl_graph_input(t.g, TL_I32, DIMS(3), 1);
    cr_assert_eq(tl_einsum(t.g, "ij,j->i", (tl_t[]){f, i}, 2), TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(t.g), "einsum: operand 1 must be float32");
    trace_free(&t);

    /* An invalid handle, in a graph with no error yet, and after one. */
    t = trace_new();
    f = tl_graph_input(t.g, TL_F32, DIMS(2, 3), 2);
    cr_assert_eq(tl_einsum(t.g, "ij,jk->ik", (tl_t[]){f, TL_T_INVALID}, 2), TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(t.g), "einsum: operand 1 is not a tensor of this graph");
    cr_assert_eq(tl_einsum(t.g, "ij->ji", &f, 1), TL_T_INVALID);
    cr_assert_str_eq(tl_graph_error(t.g), "einsum: operand 1 is not a tensor of this graph");
    trace_free(&t);
}

/* The built-in DLRM model_fn: traced and compiled as the runtime does, its
 * shapes and variables, its configuration errors, its forward value against a
 * plain float64 recomputation of the network from the variables, and every
 * gradient (variables and embedding activations) against finite
 * differences. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_models_util.h"
#include "tpuloop/models.h"
#include "tpuloop/rng.h"

/* The features are the dense inputs only (WIDTH = ND): the embedding ids
 * travel apart, to the engine. */
enum { B = 4, ND = 3, NF = 3, DIM = 4, WIDTH = ND };

/* The brief's small model: 3 dense columns, 3 features of dim 4, bottom
 * [8, 4], top [8]. */
static tl_dlrm_config small(void)
{
    tl_dlrm_config c;
    memset(&c, 0, sizeof c);
    c.num_dense = ND;
    c.num_bottom = 2;
    c.bottom[0] = 8;
    c.bottom[1] = DIM;
    c.num_top = 1;
    c.top[0] = 8;
    c.num_features = NF;
    for (int f = 0; f < NF; f++)
        c.dims[f] = DIM;
    return c;
}

/* Calls tl_model_dlrm on features (batch, width) and labels as the runtime
 * passes them: int32 (batch,), or float32 (batch, 1) with float_labels. */
static traced trace(const tl_dlrm_config *c, tl_mode mode, int64_t batch, int64_t width, bool float_labels)
{
    traced t = tm_trace_begin(mode);
    int64_t fs[2] = {batch, width}, ls[2] = {batch, 1};
    t.args.features = tl_graph_input(t.g, TL_F32, fs, 2);
    t.args.labels = mode == TL_MODE_PREDICT ? TL_T_INVALID
                    : float_labels          ? tl_graph_input(t.g, TL_F32, ls, 2)
                                            : tl_graph_input(t.g, TL_I32, ls, 1);
    t.args.batch_size = batch;
    t.st = tl_model_dlrm(t.g, &t.args, &t.spec, (void *)c);
    return t;
}

Test(models_dlrm, shapes_and_variables)
{
    tl_dlrm_config c = small();
    traced t = trace(&c, TL_MODE_TRAIN, B, WIDTH, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    int64_t d[TL_MAX_RANK];
    cr_assert_eq(tl_rank(t.g, t.spec.logits, d), 2);
    cr_assert(d[0] == B && d[1] == 1, "logits (%lld, %lld)", (long long)d[0], (long long)d[1]);
    cr_assert_eq(t.spec.predictions, t.spec.logits);
    cr_assert_eq(tl_rank(t.g, t.spec.loss, NULL), 0);
    cr_assert_eq(t.vars->n, 8);
    tm_assert_var(t.vars, "bottom_mlp/dense/kernel", ND, 8);
    tm_assert_var(t.vars, "bottom_mlp/dense/bias", 8, 0);
    tm_assert_var(t.vars, "bottom_mlp/dense_1/kernel", 8, DIM);
    tm_assert_var(t.vars, "bottom_mlp/dense_1/bias", DIM, 0);
    /* top input: x (4) and the (3+1)·3/2 = 6 pairwise dots */
    tm_assert_var(t.vars, "top_mlp/dense/kernel", DIM + 6, 8);
    tm_assert_var(t.vars, "top_mlp/dense/bias", 8, 0);
    tm_assert_var(t.vars, "top_mlp/logits/kernel", 8, 1);
    tm_assert_var(t.vars, "top_mlp/logits/bias", 1, 0);
    for (int f = 0; f < NF; f++) {
        tl_t e = tm_leaf(t.g, f);
        cr_assert_neq(e, TL_T_INVALID, "no activations for feature %d", f);
        cr_assert_eq(tl_rank(t.g, e, d), 2);
        cr_assert(d[0] == B && d[1] == DIM);
    }
    cr_assert_eq(tm_leaf(t.g, NF), TL_T_INVALID);
    tm_untrace(&t);

    /* PREDICT: no labels, no loss, the logits as predictions */
    t = trace(&c, TL_MODE_PREDICT, B, WIDTH, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    cr_assert_eq(t.spec.loss, TL_T_INVALID);
    cr_assert_eq(t.spec.predictions, t.spec.logits);
    tm_untrace(&t);

    /* Float (batch, 1) labels take sigmoid_xent's float form. */
    t = trace(&c, TL_MODE_EVAL, B, WIDTH, true);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    cr_assert_eq(tl_rank(t.g, t.spec.loss, NULL), 0);
    tm_untrace(&t);
}

/* 64 features is more than one tl_concat takes: the stack is joined in
 * groups, and the interaction is still (batch, 65·64/2). */
Test(models_dlrm, most_features_and_none)
{
    tl_dlrm_config c = small();
    c.num_features = TL_DLRM_MAX_FEATURES;
    for (int f = 0; f < c.num_features; f++)
        c.dims[f] = DIM;
    traced t = trace(&c, TL_MODE_TRAIN, 2, ND, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    tm_assert_var(t.vars, "top_mlp/dense/kernel", DIM + 65 * 64 / 2, 8);
    for (int f = 0; f < 64; f++)
        cr_assert_neq(tm_leaf(t.g, f), TL_T_INVALID, "feature %d", f);
    tm_untrace(&t);

    /* num_dense 0: the features' whole width, every feature an embedding
     * feature all the same (no id columns among the features). */
    c = small();
    c.num_dense = 0;
    t = trace(&c, TL_MODE_TRAIN, B, WIDTH, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    tm_assert_var(t.vars, "bottom_mlp/dense/kernel", WIDTH, c.bottom[0]);
    tm_untrace(&t);
    /* num_dense below the width: the first columns. */
    c = small();
    c.num_dense = ND - 1;
    t = trace(&c, TL_MODE_TRAIN, B, WIDTH, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    tm_assert_var(t.vars, "bottom_mlp/dense/kernel", ND - 1, c.bottom[0]);
    tm_untrace(&t);

    /* No features: no interaction, the top MLP sees the bottom's output. */
    c = small();
    c.num_features = 0;
    c.num_top = 0;
    t = trace(&c, TL_MODE_TRAIN, B, ND, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    cr_assert_eq(t.vars->n, 6);
    tm_assert_var(t.vars, "top_mlp/logits/kernel", DIM, 1);
    cr_assert_eq(tm_leaf(t.g, 0), TL_T_INVALID);
    tm_untrace(&t);
}

Test(models_dlrm, configuration_errors)
{
    static const struct {
        int which;
        const char *frag;
    } cases[] = {
        {0, "dlrm: num_dense must be in [1, 3] (the features' width), or 0 for all of them; got -1"},
        {1, "dlrm: num_dense must be in [1, 3] (the features' width), or 0 for all of them; got 7"},
        {2, "dlrm: num_bottom must be in [1, 16], got 0"},
        {3, "dlrm: num_bottom must be in [1, 16], got 17"},
        {4, "dlrm: num_top must be in [0, 16], got 17"},
        {5, "dlrm: num_features must be in [0, 64], got 65"},
        {6, "dlrm: num_features must be in [0, 64], got -1"},
        {7, "dlrm: bottom_mlp's last width 4 must equal feature 2's embedding dim 16"},
        {8, "dlrm: bottom[0] must be >= 1, got 0"},
        {9, "dlrm: top[0] must be >= 1, got -3"},
        {10, "dlrm: features must be (batch, columns)"},
        {11, "dlrm: the model needs a tl_dlrm_config"},
        {12, "dlrm: dims[1] must be >= 1, got 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_dlrm_config c = small();
        const tl_dlrm_config *user = &c;
        switch (cases[i].which) {
        case 0: c.num_dense = -1; break;
        case 1: c.num_dense = 7; break;
        case 2: c.num_bottom = 0; break;
        case 3: c.num_bottom = 17; break;
        case 4: c.num_top = 17; break;
        case 5: c.num_features = 65; break;
        case 6: c.num_features = -1; break;
        case 7: c.dims[2] = 16; break;
        case 8: c.bottom[0] = 0; break;
        case 9: c.top[0] = -3; break;
        case 10: break;
        case 11: user = NULL; break;
        case 12: c.dims[1] = 0; break;
        }
        tl_vars *vars;
        tl_graph *g;
        cr_assert_eq(tl_vars_create(&vars), TL_OK);
        cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
        int64_t fs[3] = {B, WIDTH, 1}, ls[1] = {B};
        tl_model_args a = {.mode = TL_MODE_TRAIN, .batch_size = B};
        a.features = tl_graph_input(g, TL_F32, fs, cases[i].which == 10 ? 3 : 2);
        a.labels = tl_graph_input(g, TL_I32, ls, 1);
        tl_model_spec spec = {.loss = TL_T_INVALID, .logits = TL_T_INVALID, .predictions = TL_T_INVALID};
        cr_assert_eq(tl_model_dlrm(g, &a, &spec, (void *)user), TL_EINVAL, "case %zu", i);
        cr_assert_eq(tl_graph_status(g), TL_EINVAL, "case %zu", i);
        cr_assert(strstr(tl_graph_error(g), cases[i].frag), "case %zu: %s", i, tl_graph_error(g));
        cr_assert_eq(vars->n, 0, "case %zu: no variables made before the check", i);
        tl_graph_destroy(g);
        tl_vars_destroy(vars);
    }
}

/* ---- running the compiled model ------------------------------------------- */

typedef struct {
    traced t;
    tl_program *p;
    tl_exec e;
    float *params;
    float *features; /* (B, WIDTH) */
    int32_t *labels; /* (B) */
    float *emb[NF];  /* each (B, DIM) */
} model;

/* The small model compiled with backward, parameters drawn as the runtime
 * draws them with random biases (zeros would hide their wiring), random dense
 * inputs, random activations and labels 1, 0, 0, 1. */
static model build(void)
{
    model m;
    memset(&m, 0, sizeof m);
    tl_dlrm_config c = small();
    m.t = trace(&c, TL_MODE_TRAIN, B, WIDTH, false);
    cr_assert_eq(m.t.st, TL_OK, "%s", tl_graph_error(m.t.g));
    m.params = tm_compile(&m.t, &m.p);
    tl_rng r;
    tl_rng_init(&r, 3, 1, 4, 1);
    for (int i = 0; i < m.t.vars->n; i++) {
        const tl_var *v = &m.t.vars->v[i];
        if (strstr(v->name, "/bias"))
            for (int64_t k = 0; k < v->size; k++)
                m.params[v->offset + k] = (float)(0.2 * tl_rng_uniform(&r) - 0.1);
    }
    tm_exec_alloc(&m.e, m.p, m.t.vars, m.params);
    m.features = tl_exec_value(m.p, &m.e, m.t.args.features);
    m.labels = (int32_t *)tl_exec_value(m.p, &m.e, m.t.args.labels);
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < ND; j++)
            m.features[b * WIDTH + j] = (float)tl_rng_normal(&r);
        m.labels[b] = (b == 0 || b == 3) ? 1 : 0;
    }
    for (int f = 0; f < NF; f++) {
        tl_t e = tm_leaf(m.t.g, f);
        m.emb[f] = tl_exec_value(m.p, &m.e, e);
        for (int k = 0; k < B * DIM; k++)
            m.emb[f][k] = (float)(0.5 * tl_rng_normal(&r));
    }
    return m;
}

static void destroy(model *m)
{
    free(m->params);
    tm_exec_free(&m->e);
    tl_program_destroy(m->p);
    tm_untrace(&m->t);
}

static double loss(model *m)
{
    return tm_loss(m->p, &m->e, m->t.spec.loss);
}

/* ---- the float64 recomputation ---- */

static const float *param(const model *m, const char *name)
{
    return tm_param(m->t.vars, m->params, name);
}

/* y (out) = x (in) · name/kernel + name/bias, then ReLU when relu. */
static void dense_ref(const model *m, const char *name, const double *x, int in, int out, bool relu, double *y)
{
    char k[64], b[64];
    snprintf(k, sizeof k, "%s/kernel", name);
    snprintf(b, sizeof b, "%s/bias", name);
    const float *w = param(m, k), *bias = param(m, b);
    for (int o = 0; o < out; o++) {
        double s = bias[o];
        for (int i = 0; i < in; i++)
            s += x[i] * (double)w[i * out + o];
        y[o] = relu && s < 0 ? 0.0 : s;
    }
}

/* The per-example logits and the mean log loss, written from the paper. */
static double reference(const model *m, double *logit)
{
    double total = 0;
    for (int b = 0; b < B; b++) {
        double x0[ND], h[8], x[DIM];
        for (int j = 0; j < ND; j++)
            x0[j] = m->features[b * WIDTH + j];
        dense_ref(m, "bottom_mlp/dense", x0, ND, 8, true, h);
        dense_ref(m, "bottom_mlp/dense_1", h, 8, DIM, true, x);
        const double *vec[NF + 1];
        double e[NF][DIM];
        vec[0] = x;
        for (int f = 0; f < NF; f++) {
            for (int k = 0; k < DIM; k++)
                e[f][k] = m->emb[f][b * DIM + k];
            vec[f + 1] = e[f];
        }
        double top_in[DIM + 6], t[8], z;
        int n = 0;
        for (int k = 0; k < DIM; k++)
            top_in[n++] = x[k];
        for (int i = 1; i <= NF; i++) /* pairs (i, j), j < i, in row order */
            for (int j = 0; j < i; j++) {
                double s = 0;
                for (int k = 0; k < DIM; k++)
                    s += vec[i][k] * vec[j][k];
                top_in[n++] = s;
            }
        dense_ref(m, "top_mlp/dense", top_in, DIM + 6, 8, true, t);
        dense_ref(m, "top_mlp/logits", t, 8, 1, false, &z);
        logit[b] = z;
        double p = 1.0 / (1.0 + exp(-z));
        total += m->labels[b] ? -log(p) : -log1p(-p);
    }
    return total / B;
}

Test(models_dlrm, forward_matches_a_float64_recomputation)
{
    model m = build();
    double want_logit[B];
    double want = reference(&m, want_logit), got = loss(&m);
    const float *logit = tl_exec_value(m.p, &m.e, m.t.spec.logits);
    for (int b = 0; b < B; b++)
        cr_assert(fabs(logit[b] - want_logit[b]) < 1e-5 * (1 + fabs(want_logit[b])), "logit %d: %.9g, want %.9g", b,
                  logit[b], want_logit[b]);
    cr_assert(fabs(got - want) < 1e-5 * want, "loss %.9g, want %.9g", got, want);
    cr_assert(want > 0.05, "a loss that tells something (%g)", want);
    destroy(&m);
}

/* Every variable's and every embedding activation's gradient against
 * central differences of the compiled forward pass. */
Test(models_dlrm, gradients_match_finite_differences)
{
    model m = build();
    loss(&m);
    cr_assert_eq(tl_program_backward(m.p, &m.e), TL_OK, "%s", tl_last_error());
    const float h = 1e-3f;
    double num2 = 0, diff2 = 0;
    for (int64_t i = 0; i < m.t.vars->total; i++) {
        float keep = m.params[i];
        m.params[i] = keep + h;
        double up = loss(&m);
        m.params[i] = keep - h;
        double down = loss(&m);
        m.params[i] = keep;
        double numeric = (up - down) / (2.0 * h), d = numeric - m.e.param_grad[i];
        num2 += numeric * numeric;
        diff2 += d * d;
    }
    cr_assert(num2 > 0, "the loss must depend on the parameters");
    cr_assert(sqrt(diff2 / num2) < 1e-2, "variables: relative gradient error %g", sqrt(diff2 / num2));

    num2 = diff2 = 0;
    for (int f = 0; f < NF; f++) {
        const float *g = tl_exec_grad(m.p, &m.e, tm_leaf(m.t.g, f));
        cr_assert_not_null(g, "feature %d's activations get a gradient", f);
        float analytic[B * DIM];
        memcpy(analytic, g, sizeof analytic); /* forward passes below leave it alone, but be plain */
        double f2 = 0;
        for (int k = 0; k < B * DIM; k++) {
            float keep = m.emb[f][k];
            m.emb[f][k] = keep + h;
            double up = loss(&m);
            m.emb[f][k] = keep - h;
            double down = loss(&m);
            m.emb[f][k] = keep;
            double numeric = (up - down) / (2.0 * h), d = numeric - analytic[k];
            num2 += numeric * numeric;
            f2 += numeric * numeric;
            diff2 += d * d;
        }
        cr_assert(f2 > 0, "the loss must depend on feature %d", f);
    }
    cr_assert(sqrt(diff2 / num2) < 1e-2, "activations: relative gradient error %g", sqrt(diff2 / num2));
    destroy(&m);
}

/* A label that is neither 0 nor 1 fails the step with the example named. */
Test(models_dlrm, bad_label_fails_the_step)
{
    model m = build();
    m.labels[2] = 2;
    cr_assert_eq(tl_program_forward(m.p, &m.e), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "example 2 has label 2, which is not 0 or 1"), "%s", tl_last_error());
    destroy(&m);
}

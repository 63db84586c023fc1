/* The built-in DCN-v2 model_fn: traced and compiled as the runtime does, its
 * shapes and variables, its configuration errors, its forward value against a
 * plain float64 recomputation of the paper's equations from the variables,
 * every gradient (variables and embedding activations) against finite
 * differences, and the model without embeddings through the whole-graph
 * fixture of test_graph_util.h. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph_util.h"
#include "test_models_util.h"
#include "tpuloop/models.h"
#include "tpuloop/rng.h"

/* The features are the dense inputs only (WIDTH = ND): the embedding ids
 * travel apart, to the engine. Three features of different dims (DCN
 * concatenates them, so they need not agree): x0 is D = 3 + 2 + 3 + 4 wide. */
enum { B = 4, ND = 3, NF = 3, WIDTH = ND, D = 12, DEEP = 8 };
static const int dims[NF] = {2, 3, 4};

/* 3 dense columns, 3 features, 2 cross layers, deep [8]. */
static tl_dcn_config small(void)
{
    tl_dcn_config c;
    memset(&c, 0, sizeof c);
    c.num_dense = ND;
    c.num_cross = 2;
    c.num_deep = 1;
    c.deep[0] = DEEP;
    c.num_features = NF;
    for (int f = 0; f < NF; f++)
        c.dims[f] = dims[f];
    return c;
}

/* Calls tl_model_dcn on features (batch, width) and labels as the runtime
 * passes them: int32 (batch,), or float32 (batch, 1) with float_labels. */
static traced trace(const tl_dcn_config *c, tl_mode mode, int64_t batch, int64_t width, bool float_labels)
{
    traced t = tm_trace_begin(mode);
    int64_t fs[2] = {batch, width}, ls[2] = {batch, 1};
    t.args.features = tl_graph_input(t.g, TL_F32, fs, 2);
    t.args.labels = mode == TL_MODE_PREDICT ? TL_T_INVALID
                    : float_labels          ? tl_graph_input(t.g, TL_F32, ls, 2)
                                            : tl_graph_input(t.g, TL_I32, ls, 1);
    t.args.batch_size = batch;
    t.st = tl_model_dcn(t.g, &t.args, &t.spec, (void *)c);
    return t;
}

Test(models_dcn, shapes_and_variables)
{
    tl_dcn_config c = small();
    traced t = trace(&c, TL_MODE_TRAIN, B, WIDTH, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    int64_t d[TL_MAX_RANK];
    cr_assert_eq(tl_rank(t.g, t.spec.logits, d), 2);
    cr_assert(d[0] == B && d[1] == 1, "logits (%lld, %lld)", (long long)d[0], (long long)d[1]);
    cr_assert_eq(t.spec.predictions, t.spec.logits);
    cr_assert_eq(tl_rank(t.g, t.spec.loss, NULL), 0);
    cr_assert_eq(t.vars->n, 8);
    tm_assert_var(t.vars, "cross/dense/kernel", D, D); /* full rank: (D, D) */
    tm_assert_var(t.vars, "cross/dense/bias", D, 0);
    tm_assert_var(t.vars, "cross_1/dense/kernel", D, D);
    tm_assert_var(t.vars, "cross_1/dense/bias", D, 0);
    tm_assert_var(t.vars, "deep/dense/kernel", D, DEEP);
    tm_assert_var(t.vars, "deep/dense/bias", DEEP, 0);
    tm_assert_var(t.vars, "logits/kernel", DEEP, 1);
    tm_assert_var(t.vars, "logits/bias", 1, 0);
    for (int f = 0; f < NF; f++) {
        tl_t e = tm_leaf(t.g, f);
        cr_assert_neq(e, TL_T_INVALID, "no activations for feature %d", f);
        cr_assert_eq(tl_rank(t.g, e, d), 2);
        cr_assert(d[0] == B && d[1] == dims[f], "feature %d: (%lld, %lld)", f, (long long)d[0], (long long)d[1]);
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

/* 64 features is more than one tl_concat takes: x0 is joined in groups and
 * is still the whole width. */
Test(models_dcn, most_features_and_none)
{
    tl_dcn_config c = small();
    c.num_features = TL_DCN_MAX_FEATURES;
    for (int f = 0; f < c.num_features; f++)
        c.dims[f] = 1 + f % 3;
    int64_t width = ND;
    for (int f = 0; f < c.num_features; f++)
        width += c.dims[f];
    traced t = trace(&c, TL_MODE_TRAIN, 2, ND, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    tm_assert_var(t.vars, "cross_1/dense/kernel", width, width);
    tm_assert_var(t.vars, "deep/dense/kernel", width, DEEP);
    for (int f = 0; f < 64; f++)
        cr_assert_neq(tm_leaf(t.g, f), TL_T_INVALID, "feature %d", f);
    tm_untrace(&t);

    /* num_dense 0: the features' whole width; below it, the first columns. */
    c = small();
    c.num_dense = 0;
    t = trace(&c, TL_MODE_TRAIN, B, WIDTH, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    tm_assert_var(t.vars, "cross/dense/kernel", D, D);
    tm_untrace(&t);
    c = small();
    c.num_dense = ND - 1;
    t = trace(&c, TL_MODE_TRAIN, B, WIDTH, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    tm_assert_var(t.vars, "cross/dense/kernel", D - 1, D - 1);
    tm_untrace(&t);

    /* No features, no cross layers, no deep network: logistic regression
     * on the dense inputs. */
    c = small();
    c.num_features = 0;
    c.num_cross = 0;
    c.num_deep = 0;
    t = trace(&c, TL_MODE_TRAIN, B, ND, false);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    cr_assert_eq(t.vars->n, 2);
    tm_assert_var(t.vars, "logits/kernel", ND, 1);
    cr_assert_eq(tm_leaf(t.g, 0), TL_T_INVALID);
    tm_untrace(&t);
}

Test(models_dcn, configuration_errors)
{
    static const struct {
        int which;
        const char *frag;
    } cases[] = {
        {0, "dcn: num_dense must be in [1, 3] (the features' width), or 0 for all of them; got -1"},
        {1, "dcn: num_dense must be in [1, 3] (the features' width), or 0 for all of them; got 7"},
        {2, "dcn: num_cross must be in [0, 16], got -1"},
        {3, "dcn: num_cross must be in [0, 16], got 17"},
        {4, "dcn: num_deep must be in [0, 16], got 17"},
        {5, "dcn: num_features must be in [0, 64], got 65"},
        {6, "dcn: num_features must be in [0, 64], got -1"},
        {7, "dcn: deep[0] must be >= 1, got 0"},
        {8, "dcn: dims[1] must be >= 1, got 0"},
        {9, "dcn: features must be (batch, columns), the dense inputs; got rank 3"},
        {10, "dcn: the model needs a tl_dcn_config"},
        {11, "dcn: num_deep must be in [0, 16], got -2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_dcn_config c = small();
        const tl_dcn_config *user = &c;
        switch (cases[i].which) {
        case 0: c.num_dense = -1; break;
        case 1: c.num_dense = 7; break;
        case 2: c.num_cross = -1; break;
        case 3: c.num_cross = 17; break;
        case 4: c.num_deep = 17; break;
        case 5: c.num_features = 65; break;
        case 6: c.num_features = -1; break;
        case 7: c.deep[0] = 0; break;
        case 8: c.dims[1] = 0; break;
        case 9: break;
        case 10: user = NULL; break;
        case 11: c.num_deep = -2; break;
        }
        tl_vars *vars;
        tl_graph *g;
        cr_assert_eq(tl_vars_create(&vars), TL_OK);
        cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
        int64_t fs[3] = {B, WIDTH, 1}, ls[1] = {B};
        tl_model_args a = {.mode = TL_MODE_TRAIN, .batch_size = B};
        a.features = tl_graph_input(g, TL_F32, fs, cases[i].which == 9 ? 3 : 2);
        a.labels = tl_graph_input(g, TL_I32, ls, 1);
        tl_model_spec spec = {.loss = TL_T_INVALID, .logits = TL_T_INVALID, .predictions = TL_T_INVALID};
        cr_assert_eq(tl_model_dcn(g, &a, &spec, (void *)user), TL_EINVAL, "case %zu", i);
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
    float *emb[NF];  /* each (B, dims[f]) */
} model;

/* The small model compiled with backward, parameters drawn as the runtime
 * draws them with random biases (zeros would hide their wiring), random dense
 * inputs, random activations and labels 1, 0, 0, 1. */
static model build(void)
{
    model m;
    memset(&m, 0, sizeof m);
    tl_dcn_config c = small();
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
        for (int k = 0; k < B * dims[f]; k++)
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

/* The per-example logits and the mean log loss, written from the paper:
 * x_{l+1} = x0 ⊙ (W_l x_l + b_l) + x_l, then the deep network and the logit. */
static double reference(const model *m, double *logit)
{
    double total = 0;
    for (int b = 0; b < B; b++) {
        double x0[D], x[D], y[D], h[DEEP], z;
        int n = 0;
        for (int j = 0; j < ND; j++)
            x0[n++] = m->features[b * WIDTH + j];
        for (int f = 0; f < NF; f++)
            for (int k = 0; k < dims[f]; k++)
                x0[n++] = m->emb[f][b * dims[f] + k];
        cr_assert_eq(n, D);
        memcpy(x, x0, sizeof x);
        dense_ref(m, "cross/dense", x, D, D, false, y);
        for (int i = 0; i < D; i++)
            x[i] = x0[i] * y[i] + x[i];
        dense_ref(m, "cross_1/dense", x, D, D, false, y);
        for (int i = 0; i < D; i++)
            x[i] = x0[i] * y[i] + x[i];
        dense_ref(m, "deep/dense", x, D, DEEP, true, h);
        dense_ref(m, "logits", h, DEEP, 1, false, &z);
        logit[b] = z;
        double p = 1.0 / (1.0 + exp(-z));
        total += m->labels[b] ? -log(p) : -log1p(-p);
    }
    return total / B;
}

Test(models_dcn, forward_matches_a_float64_recomputation)
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
 * central differences of the compiled forward pass. x0 is read by every
 * cross layer, so its activations' gradients sum over them. */
Test(models_dcn, gradients_match_finite_differences)
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
        float analytic[B * 4];
        memcpy(analytic, g, sizeof(float) * (size_t)(B * dims[f]));
        double f2 = 0;
        for (int k = 0; k < B * dims[f]; k++) {
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
Test(models_dcn, bad_label_fails_the_step)
{
    model m = build();
    m.labels[2] = 2;
    cr_assert_eq(tl_program_forward(m.p, &m.e), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "example 2 has label 2, which is not 0 or 1"), "%s", tl_last_error());
    destroy(&m);
}

/* ---- through the whole-graph fixture ---- */

/* The model without embedding features on the fixture's x (4, 6), labels
 * i % 2: x0 is x, read by every cross layer. */
static tl_t dcn_on_x(tl_graph *g, tl_t x, tl_t labels, int num_cross, int num_deep)
{
    tl_dcn_config c;
    memset(&c, 0, sizeof c);
    c.num_cross = num_cross;
    c.num_deep = num_deep;
    for (int i = 0; i < num_deep; i++)
        c.deep[i] = 5 - i;
    tl_model_args a = {.mode = TL_MODE_TRAIN, .features = x, .labels = labels, .batch_size = 4};
    tl_model_spec spec = {.loss = TL_T_INVALID, .logits = TL_T_INVALID, .predictions = TL_T_INVALID};
    cr_assert_eq(tl_model_dcn(g, &a, &spec, &c), TL_OK, "%s", tl_graph_error(g));
    return spec.loss;
}

/* The cross network alone, then the logit. */
static tl_t cross_only(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)target;
    return dcn_on_x(g, x, labels, 3, 0);
}

/* Cross layers, then a deep layer (one: the fixture's step h = 1e-2 would
 * cross a kink of a second ReLU layer's). */
static tl_t cross_and_deep(tl_graph *g, tl_t x, tl_t labels, tl_t target)
{
    (void)target;
    return dcn_on_x(g, x, labels, 3, 1);
}

Test(models_dcn, whole_graph_gradients)
{
    tg_check_gradients_labels(cross_only, TL_MODE_TRAIN, 2);
    tg_check_gradients_labels(cross_and_deep, TL_MODE_TRAIN, 2);
}

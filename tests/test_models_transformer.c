/* The built-in Transformer model_fn: traced and compiled as the runtime does,
 * its shapes and Keras variable names, its params' errors, its forward value
 * against a plain float64 recomputation of the architecture written in
 * tpuloop/models.h from the variables, every gradient against finite
 * differences; then trained by the job on synthetic_sequences to the
 * majority task's oracle, and to the same bits for every
 * iterations_per_loop. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli_util.h"
#include "testutil.h"
#include "tpuloop/job.h"
#include "test_models_util.h"
#include "tpuloop/models.h"
#include "tpuloop/rng.h"

/* The small model: 2 sequences of 4 tokens from 6, d 4 in 2 heads, 2
 * layers, ff 8, 3 classes. */
enum { B = 2, S = 4, V = 6, D = 4, H = 2, DK = D / H, FF = 8, C = 3, L = 2 };
#define SMALL "{\"d_model\": 4, \"num_heads\": 2, \"num_layers\": 2, \"d_ff\": 8, \"num_classes\": 3}"

/* Calls tl_model_transformer on features (batch, s) (rank 3 with a trailing
 * 1 when frank is 3) and int32 labels (batch,), as the runtime passes them. */
static traced trace(const char *params, const tl_transformer_data *data, tl_mode mode, int64_t batch, int64_t s,
                    int frank)
{
    traced t = tm_trace_begin(mode);
    int64_t fs[3] = {batch, s, 1}, ls[1] = {batch};
    t.args.features = tl_graph_input(t.g, TL_F32, fs, frank);
    t.args.labels = mode == TL_MODE_PREDICT ? TL_T_INVALID : tl_graph_input(t.g, TL_I32, ls, 1);
    t.args.batch_size = batch;
    t.args.params_json = params;
    t.st = tl_model_transformer(t.g, &t.args, &t.spec, (void *)data);
    return t;
}

static void assert_dense(const tl_vars *vars, const char *name, int64_t in, int64_t out)
{
    char k[96], b[96];
    snprintf(k, sizeof k, "%s/kernel", name);
    snprintf(b, sizeof b, "%s/bias", name);
    tm_assert_var(vars, k, in, out);
    tm_assert_var(vars, b, out, 0);
}

static void assert_norm(const tl_vars *vars, const char *name, int64_t d)
{
    char gm[96], bt[96];
    snprintf(gm, sizeof gm, "%s/gamma", name);
    snprintf(bt, sizeof bt, "%s/beta", name);
    tm_assert_var(vars, gm, d, 0);
    tm_assert_var(vars, bt, d, 0);
}

/* Every variable of an L-layer model, by its Keras name and shape. */
static void assert_variables(const tl_vars *vars, int64_t v, int64_t s, int64_t d, int64_t ff, int64_t c, int layers)
{
    cr_assert_eq(vars->n, 2 + 16 * layers + 2, "%d variables", vars->n);
    tm_assert_var(vars, "embedding/embeddings", v, d);
    tm_assert_var(vars, "position_embedding/embeddings", s, d);
    char name[96];
    for (int i = 0; i < layers; i++) {
        static const char *const parts[] = {"query", "key", "value", "output"};
        for (int p = 0; p < 4; p++) {
            snprintf(name, sizeof name, "layer_%d/attention/%s", i, parts[p]);
            assert_dense(vars, name, d, d);
        }
        snprintf(name, sizeof name, "layer_%d/attention_norm", i);
        assert_norm(vars, name, d);
        snprintf(name, sizeof name, "layer_%d/ffn/dense", i);
        assert_dense(vars, name, d, ff);
        snprintf(name, sizeof name, "layer_%d/ffn/dense_1", i);
        assert_dense(vars, name, ff, d);
        snprintf(name, sizeof name, "layer_%d/ffn_norm", i);
        assert_norm(vars, name, d);
    }
    assert_dense(vars, "logits", d, c);
}

Test(models_transformer, shapes_and_variables)
{
    tl_transformer_data data = {V};
    traced t = trace(SMALL, &data, TL_MODE_TRAIN, B, S, 2);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    int64_t d[TL_MAX_RANK];
    cr_assert_eq(tl_rank(t.g, t.spec.logits, d), 2);
    cr_assert(d[0] == B && d[1] == C, "logits (%lld, %lld)", (long long)d[0], (long long)d[1]);
    cr_assert_eq(t.spec.predictions, t.spec.logits);
    cr_assert_eq(tl_rank(t.g, t.spec.loss, NULL), 0);
    assert_variables(t.vars, V, S, D, FF, C, L);
    tm_untrace(&t);

    /* PREDICT: no labels, no loss, the logits as predictions. */
    t = trace(SMALL, &data, TL_MODE_PREDICT, B, S, 2);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    cr_assert_eq(t.spec.loss, TL_T_INVALID);
    cr_assert_eq(t.spec.predictions, t.spec.logits);
    tm_untrace(&t);

    /* The defaults: d 32, 2 heads, 2 layers, ff 4 d, V 16 without data,
     * the data's V with it, C = V. */
    t = trace("{}", NULL, TL_MODE_EVAL, 3, 16, 2);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    assert_variables(t.vars, 16, 16, 32, 128, 16, 2);
    tm_untrace(&t);
    tl_transformer_data wide = {40};
    t = trace(NULL, &wide, TL_MODE_TRAIN, 3, 5, 2);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    assert_variables(t.vars, 40, 5, 32, 128, 40, 2);
    tm_untrace(&t);

    /* No layers: embeddings, the mean and the logits; one head; a vocab
     * above the data's. */
    t = trace("{\"num_layers\": 0, \"d_model\": 6, \"num_heads\": 1, \"vocab_size\": 50}", &data, TL_MODE_TRAIN, 2,
              7, 2);
    cr_assert_eq(t.st, TL_OK, "%s", tl_graph_error(t.g));
    assert_variables(t.vars, 50, 7, 6, 24, 50, 0);
    tm_untrace(&t);
}

Test(models_transformer, params_errors)
{
    static const struct {
        const char *params;
        int64_t data_vocab;
        int frank;
        const char *frag;
    } cases[] = {
        {"{\"d_model\": 0}", 0, 2, "transformer: params d_model must be an int in [1, 65536], got 0"},
        {"{\"d_model\": 8, \"num_heads\": 16}", 0, 2, "transformer: params num_heads must be an int in [1, 8], got 16"},
        {"{\"num_heads\": 0}", 0, 2, "transformer: params num_heads must be an int in [1, 32], got 0"},
        {"{\"num_layers\": 65}", 0, 2, "transformer: params num_layers must be an int in [0, 64], got 65"},
        {"{\"d_ff\": 1.5}", 0, 2, "transformer: params d_ff must be an int in [1, 1048576], got 1.5"},
        {"{\"vocab_size\": 1}", 0, 2, "transformer: params vocab_size must be an int in [2, 16777216], got 1"},
        {"{\"num_classes\": \"ten\"}", 0, 2,
         "transformer: params num_classes must be an int in [2, 16777216], got \"ten\""},
        {"{\"num_classes\": 16777217}", 0, 2, "params num_classes must be an int in [2, 16777216], got 16777217"},
        {"{\"d_model\": 30, \"num_heads\": 4}", 0, 2,
         "transformer: params d_model 30 is not divisible by num_heads 4 (each head takes d_model / num_heads)"},
        {"{\"vocab_size\": 5}", 6, 2, "transformer: params vocab_size 5 is below the data's 6 (its token ids reach 5)"},
        {"{}", 0, 3, "transformer: features must be token ids (batch, sequence_length); got rank 3"},
        {"{}", -1, 2, "transformer: the data's vocab_size must be in [0, 16777216] (0: unknown), got -1"},
        {"{}", 0, 0, "transformer: features are not a tensor of this graph"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_transformer_data data = {cases[i].data_vocab};
        tl_vars *vars;
        tl_graph *g;
        cr_assert_eq(tl_vars_create(&vars), TL_OK);
        cr_assert_eq(tl_graph_create(vars, TL_MODE_TRAIN, &g), TL_OK);
        int64_t fs[3] = {B, S, 1}, ls[1] = {B};
        tl_model_args a = {.mode = TL_MODE_TRAIN, .batch_size = B, .params_json = cases[i].params};
        a.features = cases[i].frank == 0 ? TL_T_INVALID : tl_graph_input(g, TL_F32, fs, cases[i].frank);
        a.labels = tl_graph_input(g, TL_I32, ls, 1);
        tl_model_spec spec = {.loss = TL_T_INVALID, .logits = TL_T_INVALID, .predictions = TL_T_INVALID};
        cr_assert_eq(tl_model_transformer(g, &a, &spec, &data), TL_EINVAL, "case %zu", i);
        cr_assert_eq(tl_graph_status(g), TL_EINVAL, "case %zu", i);
        cr_assert(strstr(tl_graph_error(g), cases[i].frag), "case %zu: %s", i, tl_graph_error(g));
        cr_assert_eq(vars->n, 0, "case %zu: no variables made before the check", i);
        cr_assert_eq(spec.loss, TL_T_INVALID, "case %zu", i);
        /* Sticky: a later op returns TL_T_INVALID. */
        cr_assert_eq(tl_constant(g, 1.0, NULL, 0), TL_T_INVALID, "case %zu", i);
        tl_graph_destroy(g);
        tl_vars_destroy(vars);
    }
}

/* ---- running the compiled model ------------------------------------------- */

typedef struct {
    traced t;
    tl_transformer_data data;
    tl_program *p;
    tl_exec e;
    float *params;
    float *features; /* (B, S) token ids */
    int32_t *labels; /* (B) */
} model;

/* The small model compiled with backward, parameters drawn as the runtime
 * draws them, then random biases, gammas and betas (their initial zeros and
 * ones would hide their wiring), random tokens and labels. */
static model build(void)
{
    model m;
    memset(&m, 0, sizeof m);
    m.data.vocab_size = V;
    m.t = trace(SMALL, &m.data, TL_MODE_TRAIN, B, S, 2);
    cr_assert_eq(m.t.st, TL_OK, "%s", tl_graph_error(m.t.g));
    m.params = tm_compile(&m.t, &m.p);
    tl_rng r;
    tl_rng_init(&r, 3, 1, 4, 1);
    for (int i = 0; i < m.t.vars->n; i++) {
        const tl_var *v = &m.t.vars->v[i];
        bool bias = strstr(v->name, "/bias") || strstr(v->name, "/beta"), gamma = strstr(v->name, "/gamma");
        for (int64_t k = 0; (bias || gamma) && k < v->size; k++)
            m.params[v->offset + k] = (float)((gamma ? 1.0 : 0.0) + 0.4 * tl_rng_uniform(&r) - 0.2);
        /* Embeddings of a usual size: the attention then is not uniform. */
        for (int64_t k = 0; strstr(v->name, "embeddings") && k < v->size; k++)
            m.params[v->offset + k] = (float)tl_rng_normal(&r);
    }
    tm_exec_alloc(&m.e, m.p, m.t.vars, m.params);
    m.e.state_scale = 1.0f;
    m.features = tl_exec_value(m.p, &m.e, m.t.args.features);
    m.labels = (int32_t *)tl_exec_value(m.p, &m.e, m.t.args.labels);
    static const float tokens[B * S] = {0, 5, 2, 5, 3, 3, 1, 4}; /* every id 0..5 occurs */
    memcpy(m.features, tokens, sizeof tokens);
    m.labels[0] = 2;
    m.labels[1] = 0;
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

/* ---- the float64 recomputation, from models.h's description ---- */

static const float *param(const model *m, const char *name)
{
    return tm_param(m->t.vars, m->params, name);
}

/* y (n, out) = x (n, in) · name/kernel + name/bias. */
static void dense_ref(const model *m, const char *name, const double *x, int n, int in, int out, double *y)
{
    char k[96], b[96];
    snprintf(k, sizeof k, "%s/kernel", name);
    snprintf(b, sizeof b, "%s/bias", name);
    const float *w = param(m, k), *bias = param(m, b);
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double s = bias[o];
            for (int i = 0; i < in; i++)
                s += x[r * in + i] * (double)w[i * out + o];
            y[r * out + o] = s;
        }
}

/* x (S, D) = LayerNorm(x + y) with name/gamma, name/beta, epsilon 1e-3. */
static void add_norm_ref(const model *m, const char *name, double *x, const double *y)
{
    char gn[96], bn[96];
    snprintf(gn, sizeof gn, "%s/gamma", name);
    snprintf(bn, sizeof bn, "%s/beta", name);
    const float *gamma = param(m, gn), *beta = param(m, bn);
    for (int i = 0; i < S; i++) {
        double *row = x + i * D, mean = 0, var = 0;
        for (int k = 0; k < D; k++) {
            row[k] += y[i * D + k];
            mean += row[k] / D;
        }
        for (int k = 0; k < D; k++)
            var += (row[k] - mean) * (row[k] - mean) / D;
        for (int k = 0; k < D; k++)
            row[k] = (row[k] - mean) / sqrt(var + 1e-3) * gamma[k] + beta[k];
    }
}

/* The logits (B, C) and the mean cross-entropy. */
static double reference(const model *m, double *logits)
{
    const float *emb = param(m, "embedding/embeddings"), *pos = param(m, "position_embedding/embeddings");
    double total = 0;
    char name[96];
    for (int b = 0; b < B; b++) {
        double x[S * D];
        for (int i = 0; i < S; i++)
            for (int k = 0; k < D; k++)
                x[i * D + k] = (double)emb[(int)m->features[b * S + i] * D + k] + pos[i * D + k];
        for (int l = 0; l < L; l++) {
            double q[S * D], kk[S * D], v[S * D], a[S * D], o[S * D], f[S * FF], y[S * D];
            snprintf(name, sizeof name, "layer_%d/attention/query", l);
            dense_ref(m, name, x, S, D, D, q);
            snprintf(name, sizeof name, "layer_%d/attention/key", l);
            dense_ref(m, name, x, S, D, D, kk);
            snprintf(name, sizeof name, "layer_%d/attention/value", l);
            dense_ref(m, name, x, S, D, D, v);
            for (int h = 0; h < H; h++)
                for (int i = 0; i < S; i++) {
                    double sc[S], mx = -INFINITY, z = 0;
                    for (int j = 0; j < S; j++) {
                        sc[j] = 0;
                        for (int k = 0; k < DK; k++)
                            sc[j] += q[i * D + h * DK + k] * kk[j * D + h * DK + k];
                        sc[j] /= sqrt((double)DK);
                        mx = fmax(mx, sc[j]);
                    }
                    for (int j = 0; j < S; j++)
                        z += exp(sc[j] - mx);
                    for (int k = 0; k < DK; k++) {
                        double s = 0;
                        for (int j = 0; j < S; j++)
                            s += exp(sc[j] - mx) / z * v[j * D + h * DK + k];
                        a[i * D + h * DK + k] = s;
                    }
                }
            snprintf(name, sizeof name, "layer_%d/attention/output", l);
            dense_ref(m, name, a, S, D, D, o);
            snprintf(name, sizeof name, "layer_%d/attention_norm", l);
            add_norm_ref(m, name, x, o);
            snprintf(name, sizeof name, "layer_%d/ffn/dense", l);
            dense_ref(m, name, x, S, D, FF, f);
            for (int k = 0; k < S * FF; k++)
                f[k] = 0.5 * f[k] * (1.0 + erf(f[k] / sqrt(2.0)));
            snprintf(name, sizeof name, "layer_%d/ffn/dense_1", l);
            dense_ref(m, name, f, S, FF, D, y);
            snprintf(name, sizeof name, "layer_%d/ffn_norm", l);
            add_norm_ref(m, name, x, y);
        }
        double pooled[D] = {0};
        for (int i = 0; i < S; i++)
            for (int k = 0; k < D; k++)
                pooled[k] += x[i * D + k] / S;
        double *z = logits + b * C, mx = -INFINITY, sum = 0;
        dense_ref(m, "logits", pooled, 1, D, C, z);
        for (int c = 0; c < C; c++)
            mx = fmax(mx, z[c]);
        for (int c = 0; c < C; c++)
            sum += exp(z[c] - mx);
        total += log(sum) + mx - z[m->labels[b]];
    }
    return total / B;
}

Test(models_transformer, forward_matches_a_float64_recomputation)
{
    model m = build();
    double want_logits[B * C];
    double want = reference(&m, want_logits), got = loss(&m);
    const float *logits = tl_exec_value(m.p, &m.e, m.t.spec.logits);
    double spread = 0;
    for (int k = 0; k < B * C; k++) {
        cr_assert(fabs(logits[k] - want_logits[k]) < 1e-5 * (1 + fabs(want_logits[k])), "logit %d: %.9g, want %.9g",
                  k, logits[k], want_logits[k]);
        spread = fmax(spread, fabs(want_logits[k] - want_logits[0]));
    }
    cr_assert(fabs(got - want) < 1e-5 * want, "loss %.9g, want %.9g", got, want);
    cr_assert(spread > 0.05, "logits that tell something (spread %g)", spread);
    destroy(&m);
}

/* Every variable's gradient against central differences of the compiled
 * forward pass. */
Test(models_transformer, gradients_match_finite_differences)
{
    model m = build();
    loss(&m);
    cr_assert_eq(tl_program_backward(m.p, &m.e), TL_OK, "%s", tl_last_error());
    const float h = 1e-3f;
    for (int v = 0; v < m.t.vars->n; v++) {
        const tl_var *var = &m.t.vars->v[v];
        double num2 = 0, diff2 = 0;
        for (int64_t i = var->offset; i < var->offset + var->size; i++) {
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
        if (strstr(var->name, "attention/key/bias")) {
            /* It adds q·b to a whole row of scores, which softmax ignores. */
            cr_assert(sqrt(diff2) < 1e-3, "%s: gradient error %g", var->name, sqrt(diff2));
            continue;
        }
        cr_assert(num2 > 1e-6, "%s: the loss must depend on it", var->name);
        cr_assert(sqrt(diff2 / num2) < 1e-2, "%s: relative gradient error %g", var->name, sqrt(diff2 / num2));
    }
    destroy(&m);
}

/* ---- trained by the job --------------------------------------------------- */

#define TRAIN_JSON(extra)                                                                                           \
    "{'train_batch_size': 32, 'eval_batch_size': 256, 'eval_steps': 8, 'tf_random_seed': 5, 'devices': 2, "         \
    "'log_step_count_steps': null, 'model': {'model_name': 'transformer', 'learning_rate': 0.003}, "              \
    "'params': {'d_model': 16, 'num_heads': 2, 'num_layers': 1}, 'input': {'dataset': 'synthetic_sequences', "      \
    "'synthetic_examples': 9600, 'synthetic_eval_examples': 2048, 'synthetic_vocab': 8}" extra "}"

/* Trains the small configuration with flags "--name=value"... applied over
 * it; returns the evaluation and the parameters' digest. */
static tl_job_evaluation train(const char *ipl, const char *steps, char digest[65])
{
    tl_config *cfg = tu_from_json(TRAIN_JSON(""));
    tu_set_flag(cfg, "iterations_per_loop", ipl);
    tu_set_flag(cfg, "train_steps", steps);
    tu_resolve_ok(cfg);
    tl_job_options o;
    tl_job_options_init(&o);
    o.train = true;
    tl_job *job;
    ASSERT_OK(tl_job_create(cfg, &o, &job));
    tl_job_train_result tr;
    ASSERT_OK(tl_job_train(job, &tr));
    tl_job_evaluation ev;
    ASSERT_OK(tl_job_evaluate(job, NULL, &ev));
    ASSERT_OK(tl_job_params_digest(job, digest));
    tl_job_destroy(job);
    tl_config_destroy(cfg);
    return ev;
}

/* The majority token is learned to near the oracle's 100% in a few hundred
 * steps of a one-layer model. */
Test(models_transformer, learns_the_majority_token)
{
    char digest[65];
    tl_job_evaluation ev = train("50", "300", digest);
    cr_assert_eq(ev.result.examples, 2048);
    cr_assert_geq(ev.result.accuracy, 0.95, "eval accuracy %.4f after 300 steps (the oracle's is 1)",
                  ev.result.accuracy);
}

/* The same bits whatever the device loop's length. */
Test(models_transformer, params_digest_is_independent_of_iterations_per_loop)
{
    char one[65], seven[65];
    train("1", "14", one);
    train("7", "14", seven);
    cr_assert_str_eq(one, seven, "iterations_per_loop 7 trained other bits than 1");
}

/* configs/transformer_sequences.json resolves and runs (shortened here; in
 * full it reaches >= 99% in one epoch). */
Test(models_transformer, the_config_file_runs)
{
    tc_result r = tc_run(NULL, "train configs/transformer_sequences.json --train_steps=20 --synthetic_examples=2000 "
                               "--synthetic_eval_examples=1000 --eval_steps=1 --iterations_per_loop=10");
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *j = tc_json(&r);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 20);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "eval"), "examples")), 1000);
    cr_assert(strstr(r.err, "training transformer on 2000 examples"), "%s", r.err);
    json_decref(j);
    tc_done(&r);
}

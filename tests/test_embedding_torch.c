/* The combiners against torch.nn.EmbeddingBag (tests/ref/embbag_ref.py,
 * float64): sum, sum with per-sample weights, mean — the forward output and
 * the gradient each row receives, to 1e-6 relative (normwise over the
 * output, and over the gradient). The gradient is read back exactly with
 * the Assign optimizer (w = g). The script runs with /usr/bin/python3 from
 * the repository root; a missing torch fails the test. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tpuloop/embedding.h"

#define PYTHON "/usr/bin/python3"
enum { V = 50, D = 8, B = 6 };

static json_t *reference(void)
{
    cr_assert(access(PYTHON, X_OK) == 0, "%s is missing: the reference needs Debian's python3 with torch", PYTHON);
    return tu_run_json(PYTHON " tests/ref/embbag_ref.py", "tests/ref/embbag_ref.py");
}

static double max_abs_list(json_t *rows, double *scale)
{
    double m = 0;
    for (size_t i = 0; i < json_array_size(rows); i++)
        for (size_t d = 0; d < json_array_size(json_array_get(rows, i)); d++)
            m = fmax(m, fabs(json_real_value(json_array_get(json_array_get(rows, i), d))));
    *scale = m;
    return m;
}

static void run_case(json_t *ref, const char *name, tl_emb_combiner comb, bool weighted)
{
    tl_emb_optimizer assign;
    tl_emb_optimizer_default(TL_EMB_ASSIGN, &assign);
    tl_emb_table_config t = {.name = "t", .vocabulary_size = V, .dim = D, .optimizer = &assign, .combiner = comb};
    tl_emb_feature_config f = {.name = "f", .table = 0};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = &t;
    c.num_tables = 1;
    c.features = &f;
    c.num_features = 1;
    c.batch_size_per_tensor_core = B;
    tl_emb_engine *eng;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK, "%s", tl_last_error());
    static float table[V * D], grad_rows[V * D];
    for (int r = 0; r < V; r++)
        for (int d = 0; d < D; d++)
            table[r * D + d] = (float)(0.5 * cos(0.7 * (r * D + d) + 0.3));
    const float *state[1] = {table};
    cr_assert_eq(tl_emb_load(eng, 0, NULL, 1, 0, state, 1, V), TL_OK, "%s", tl_last_error());
    int64_t ids[32], splits[B + 1];
    float w[32];
    int n = 0;
    for (int b = 0; b < B; b++) {
        splits[b] = n;
        for (int k = 0; k < (3 * b) % 5; k++, n++) {
            ids[n] = (7 * b + 13 * k) % V;
            w[n] = (float)(0.25 + 0.1 * ((b + k) % 7));
        }
    }
    splits[B] = n;
    tl_emb_input in = {.kind = TL_EMB_INPUT_RAGGED, .ids = ids, .n = n, .row_splits = splits,
                       .weights = weighted ? w : NULL};
    float out[B * D], dl[B * D];
    for (int i = 0; i < B * D; i++)
        dl[i] = (float)sin(0.37 * i);
    float *outs[1] = {out};
    const float *gs[1] = {dl};
    tl_emb_dedup dd;
    cr_assert_eq(tl_emb_enqueue(eng, 0, &in, 1, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_recv_dedup(eng, 0, &dd), TL_OK);
    cr_assert_eq(tl_emb_recv_activations(eng, 0, &dd, outs, 1), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_emb_send_gradients(eng, 0, &dd, gs, 1, NULL, 0), TL_OK, "%s", tl_last_error());
    float *st[1] = {grad_rows};
    cr_assert_eq(tl_emb_retrieve(eng, 0, NULL, 1, 0, st, 1, V), TL_OK, "%s", tl_last_error());
    tl_emb_engine_destroy(eng);

    json_t *cs = json_object_get(ref, name);
    cr_assert_not_null(cs, "the reference lacks case %s", name);
    json_t *rout = json_object_get(cs, "out"), *rgrad = json_object_get(cs, "grad");
    double scale, err = 0;
    max_abs_list(rout, &scale);
    for (int b = 0; b < B; b++)
        for (int d = 0; d < D; d++)
            err = fmax(err, fabs(out[b * D + d] - json_real_value(json_array_get(json_array_get(rout, b), d))));
    cr_assert(err <= 1e-6 * scale, "%s: forward max error %.3g of scale %.3g", name, err, scale);
    double gscale, gerr = 0;
    max_abs_list(rgrad, &gscale);
    /* rows no occurrence touched keep their initial values under Assign: only touched rows are gradients */
    bool touched[V] = {false};
    for (int k = 0; k < n; k++)
        touched[ids[k]] = true;
    int checked = 0;
    for (int r = 0; r < V; r++)
        for (int d = 0; d < D && touched[r]; d++, checked++)
            gerr = fmax(gerr, fabs(grad_rows[r * D + d] - json_real_value(json_array_get(json_array_get(rgrad, r), d))));
    cr_assert_gt(checked, 0);
    cr_assert(gerr <= 1e-6 * gscale, "%s: gradient max error %.3g of scale %.3g", name, gerr, gscale);
    printf("embbag vs torch %s: forward %.2e, gradient %.2e (relative to max)\n", name, err / scale, gerr / gscale);
}

Test(embedding_torch, combiners_match_embedding_bag)
{
    json_t *ref = reference();
    run_case(ref, "sum", TL_EMB_COMBINER_SUM, false);
    run_case(ref, "sum_weighted", TL_EMB_COMBINER_SUM, true);
    run_case(ref, "mean", TL_EMB_COMBINER_MEAN, false);
    json_decref(ref);
}

/* The example code of the public headers, compiled and run: graph.h's
 * model_fn traced and trained by the estimator on Fashion-MNIST-shaped data
 * (features (batch, 28, 28)) in TRAIN, EVAL and PREDICT, and tfrecord.h's
 * round trip. Each copy below sits between BEGIN and END markers and must
 * stay identical to the text in its header: a test reads both files and
 * compares them line by line, so an example that drifts from the API (or a
 * copy that drifts from its example) fails here. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tpuloop/tpuloop.h"

/* ---- the copies (keep them identical to the headers' text) ----------------- */

/* BEGIN graph.h example */
static tl_status mlp(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    // The features keep the data's shape: (batch, 28, 28) for Fashion-MNIST,
    // (batch, D) for synthetic data. Dense layers take (batch, features).
    int64_t d[TL_MAX_RANK];
    int rank = tl_rank(g, a->features, d);
    int64_t flat[2] = {a->batch_size, 1};
    for (int i = 1; i < rank; i++)
        flat[1] *= d[i];
    tl_t h = tl_reshape(g, a->features, flat, 2);          // (batch, 784)
    h = tl_dense(g, h, 256, TL_ACT_RELU, "dense");          // dense/kernel, dense/bias
    h = tl_dense(g, h, 256, TL_ACT_RELU, "dense_1");
    tl_t logits = tl_dense(g, h, 10, TL_ACT_NONE, "dense_2");
    spec->logits = logits;
    if (a->mode != TL_MODE_PREDICT)                         // PREDICT has no labels
        spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    return tl_graph_status(g);
}
/* END graph.h example */

/* BEGIN tfrecord.h example */
#include <stdio.h>
#include <string.h>
#include <tpuloop/tfrecord.h>

// Writes three records to path with GZIP, then reads them back.
static int tfrecord_round_trip(const char *path)
{
    tl_record_writer_options o;
    tl_record_writer_options_init(&o);
    o.compression = TL_RECORD_GZIP;  // tf.io.TFRecordOptions(compression_type="GZIP")
    o.atomic = true;                 // nothing stands under path until close succeeds
    tl_record_writer *w;
    tl_status st = tl_record_writer_open(path, &o, &w);
    static const char *const words[] = {"alpha", "beta", "gamma"};
    for (int i = 0; st == TL_OK && i < 3; i++)
        st = tl_record_writer_write(w, words[i], strlen(words[i]));
    if (st == TL_OK)
        st = tl_record_writer_close(w);  // the trailer, fsync, rename onto path
    else
        tl_record_writer_destroy(w);     // the temporary file is removed
    if (st != TL_OK) {
        fprintf(stderr, "error: %s\n", tl_last_error());
        return 1;
    }

    tl_record_reader *r;
    if (tl_record_reader_open(path, TL_RECORD_AUTO, &r) != TL_OK) {  // GZIP, by its first bytes
        fprintf(stderr, "error: %s\n", tl_last_error());
        return 1;
    }
    const uint8_t *rec;
    size_t n;
    while ((st = tl_record_reader_next(r, &rec, &n)) == TL_OK && rec != NULL)
        printf("%.*s\n", (int)n, (const char *)rec);  // valid until the next call on r
    if (st != TL_OK)
        fprintf(stderr, "error: %s\n", tl_last_error());
        // error: x.tfrecord.gz: record 7 at byte offset 5120: bad data CRC (...)
    tl_record_reader_destroy(r);
    return st == TL_OK ? 0 : 1;
}
/* END tfrecord.h example */

/* ---- the copies are the headers' text ----------------------------------------- */

/* The example in a header's comment that starts with the line `first`:
 * its lines with the comment's " *     " taken off (a blank comment line
 * " *" is a blank line), up to and including the line "}" that closes it. */
static char *header_example(const char *header, const char *first)
{
    char *text = (char *)tu_slurp(header, NULL);
    char want[256];
    snprintf(want, sizeof want, "\n *     %s\n", first);
    const char *p = strstr(text, want);
    cr_assert_not_null(p, "%s: no example starting with \"%s\"", header, first);
    p++;
    size_t cap = strlen(p) + 1, len = 0;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    for (;;) {
        const char *nl = strchr(p, '\n');
        cr_assert_not_null(nl, "%s: the example never closes", header);
        size_t n = (size_t)(nl - p);
        const char *line;
        size_t ln;
        if (n >= 7 && strncmp(p, " *     ", 7) == 0) {
            line = p + 7;
            ln = n - 7;
        } else if (n == 2 && strncmp(p, " *", 2) == 0) {
            line = p;
            ln = 0;
        } else {
            cr_assert_fail("%s: a line inside the example is not \" *     code\": %.*s", header, (int)n, p);
        }
        memcpy(out + len, line, ln);
        len += ln;
        out[len++] = '\n';
        p = nl + 1;
        if (ln == 1 && line[0] == '}')
            break;
    }
    out[len] = '\0';
    free(text);
    return out;
}

/* The lines of this file between "BEGIN <name> example" and its END. */
static char *copy_in_test(const char *name)
{
    char *text = (char *)tu_slurp(__FILE__, NULL);
    char begin[128], end[128];
    snprintf(begin, sizeof begin, "/* BEGIN %s example */\n", name);
    snprintf(end, sizeof end, "/* END %s example */\n", name);
    char *b = strstr(text, begin);
    cr_assert_not_null(b, "no BEGIN marker for %s", name);
    b += strlen(begin);
    char *e = strstr(b, end);
    cr_assert_not_null(e, "no END marker for %s", name);
    char *out = strndup(b, (size_t)(e - b));
    free(text);
    return out;
}

/* The copy named name is the header's example that starts with first. */
static void expect_same(const char *header, const char *first, const char *name)
{
    char *h = header_example(header, first);
    char *c = copy_in_test(name);
    cr_assert_str_eq(c, h, "the copy of the %s example in %s differs from the header's; update the copy:\n%s", name,
                     __FILE__, h);
    free(h);
    free(c);
}

Test(header_examples, copies_match_the_headers)
{
    expect_same("include/tpuloop/graph.h",
                "static tl_status mlp(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)", "graph.h");
    expect_same("include/tpuloop/tfrecord.h", "#include <stdio.h>", "tfrecord.h");
}

/* ---- and they run ------------------------------------------------------------------ */

/* graph.h's model_fn through the estimator on data shaped as Fashion-MNIST:
 * it traces in every mode, trains, evaluates and predicts (batch, 10). */
Test(header_examples, graph_example_trains_evaluates_and_predicts)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = 96;
    s.num_features = 28 * 28;
    s.num_classes = 10;
    s.seed = 5;
    tl_labeled_data *data;
    cr_assert_eq(tl_synthetic_load(&s, &data), TL_OK, "%s", tl_last_error());
    data->feature_rank = 2; /* as tl_fashion_mnist_load gives them */
    data->feature_shape[0] = 28;
    data->feature_shape[1] = 28;

    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char *argv[] = {"--devices=2", "--train_batch_size=32", "--eval_batch_size=32", "--predict_batch_size=32",
                    "--train_steps=3", "--eval_steps=2", "--iterations_per_loop=2", "--tf_random_seed=1"};
    cr_assert_eq(tl_config_apply_args(cfg, 8, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mlp;
    tl_estimator *est;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_OK, "%s", tl_last_error());
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, data, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 3);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, data, &er), TL_OK, "%s", tl_last_error());
    tl_predict_result pr;
    cr_assert_eq(tl_estimator_predict(est, data, &pr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(pr.num_examples, 96);
    cr_assert_eq(pr.width, 10, "the logits of 10 classes");
    tl_predict_result_free(&pr);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(data);
}

Test(header_examples, tfrecord_example_round_trips)
{
    char dir[] = "/tmp/tl_hdr_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/x.tfrecord.gz", dir);
    cr_redirect_stdout();
    cr_assert_eq(tfrecord_round_trip(path), 0);
    fflush(stdout);
    cr_assert_stdout_eq_str("alpha\nbeta\ngamma\n");
    /* What it wrote: three GZIP records. */
    tl_record_reader *r;
    cr_assert_eq(tl_record_reader_open(path, TL_RECORD_AUTO, &r), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_record_reader_compression(r), TL_RECORD_GZIP);
    static const char *const want[] = {"alpha", "beta", "gamma"};
    for (int i = 0; i < 3; i++) {
        const uint8_t *rec;
        size_t n;
        cr_assert_eq(tl_record_reader_next(r, &rec, &n), TL_OK);
        cr_assert(rec != NULL && n == strlen(want[i]) && memcmp(rec, want[i], n) == 0, "record %d", i);
    }
    tl_record_reader_destroy(r);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(rmdir(dir), 0, "the atomic write left no temporary file");
}

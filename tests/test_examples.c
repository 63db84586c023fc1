/* The programs of examples/ run as a user would run them: the built binaries
 * (TPULOOP_EXAMPLES, the directory the Makefile builds them in, else
 * build/examples) with a few flags, their output read back. custom_model
 * trains its MLP-Mixer for a few dozen steps on Fashion-MNIST (Debian's
 * dataset-fashion-mnist, as the rest of the suite) and must beat chance by
 * far; on synthetic data its numbers must be the run's; a bad flag must fail
 * with the configuration's message. The README's "Ops" section, which
 * points at the example, must name every op of graph.h. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_cli_util.h"

typedef struct run {
    int status; /* the exit status; -1 when it did not exit */
    char *out, *err;
} run;

/* Runs examples/<name> with args, without the environment's device count. */
static run run_example(const char *name, const char *args)
{
    const char *dir = getenv("TPULOOP_EXAMPLES");
    char out[] = "/tmp/tpuloop-example-out-XXXXXX", err[] = "/tmp/tpuloop-example-err-XXXXXX";
    int fo = mkstemp(out), fe = mkstemp(err);
    cr_assert(fo >= 0 && fe >= 0);
    close(fo);
    close(fe);
    char *cmd = NULL;
    cr_assert(asprintf(&cmd, "env -u TPULOOP_DEVICE_COUNT -u TF_CONFIG %s/%s %s >%s 2>%s", dir ? dir : "build/examples",
                       name, args, out, err) > 0);
    int rc = system(cmd);
    free(cmd);
    run r = {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, tc_slurp(out), tc_slurp(err)};
    unlink(out);
    unlink(err);
    cr_assert(r.out != NULL && r.err != NULL);
    /* Under the sanitizer build the example is instrumented too. */
    cr_assert(!strstr(r.err, "Sanitizer") && !strstr(r.err, "runtime error:"), "%s %s:\n%s", name, args, r.err);
    return r;
}

static void done(run *r)
{
    free(r->out);
    free(r->err);
}

/* The last line's numbers: "accuracy A on N test examples (loss L) after S steps". */
typedef struct result {
    double accuracy, loss;
    long long examples, steps;
} result;

static result final_line(const run *r)
{
    cr_assert_eq(r->status, 0, "custom_model failed (exit %d):\n%s%s", r->status, r->out, r->err);
    const char *line = strstr(r->out, "\naccuracy ");
    cr_assert_not_null(line, "no accuracy line in:\n%s", r->out);
    result x;
    cr_assert_eq(sscanf(line + 1, "accuracy %lf on %lld test examples (loss %lf) after %lld steps", &x.accuracy,
                        &x.examples, &x.loss, &x.steps),
                 4, "a malformed accuracy line in:\n%s", r->out);
    return x;
}

#define SMALL "--devices=2 --train_batch_size=32 --eval_batch_size=256 --eval_steps=2 --iterations_per_loop=10 " \
              "--log_step_count_steps=10"

Test(examples, custom_model_learns_fashion_mnist)
{
    run r = run_example("custom_model", SMALL " --train_steps=50");
    result x = final_line(&r);
    cr_assert_eq(x.steps, 50);
    cr_assert_eq(x.examples, 512, "2 eval steps of 256");
    /* Chance is 0.1 and the loss of a uniform guess ln 10 = 2.30; 50 steps of
     * batch 32 reach about 0.73 and 1.18. */
    cr_assert(x.accuracy > 0.5, "accuracy %g after 50 steps:\n%s", x.accuracy, r.out);
    cr_assert(x.loss < 1.8, "loss %g after 50 steps:\n%s", x.loss, r.out);
    /* A progress line at every logging boundary: steps 10, 20, ..., 50. */
    for (int s = 10; s <= 50; s += 10) {
        char want[32];
        snprintf(want, sizeof want, "step %d: loss ", s);
        cr_assert_not_null(strstr(r.out, want), "no \"%s\" in:\n%s", want, r.out);
    }
    done(&r);
}

Test(examples, custom_model_reads_synthetic_data)
{
    run r = run_example("custom_model", SMALL " --train_steps=20 --dataset=synthetic --synthetic_examples=1024 "
                                              "--synthetic_eval_examples=512");
    result x = final_line(&r);
    cr_assert_eq(x.steps, 20);
    cr_assert_eq(x.examples, 512);
    cr_assert(x.accuracy >= 0 && x.accuracy <= 1 && x.loss > 0 && x.loss < 10, "%s", r.out);
    done(&r);
    /* 40 features do not cut into 28 rows: the reshape's error, from the graph. */
    r = run_example("custom_model", SMALL " --train_steps=1 --dataset=synthetic --synthetic_examples=64 "
                                          "--synthetic_eval_examples=512 --synthetic_num_features=40");
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "custom_model: error: ") && strstr(r.err, "reshape: cannot reshape (16, 40)"), "%s", r.err);
    done(&r);
}

Test(examples, custom_model_refuses_a_bad_flag)
{
    run r = run_example("custom_model", "--train_step=5");
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "custom_model: error: ") && strstr(r.err, "did you mean train_steps?"), "%s", r.err);
    done(&r);
    r = run_example("custom_model", "--dataset=criteo --files=x.tsv");
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, "dataset 'criteo': this example reads fashion_mnist or synthetic"), "%s", r.err);
    done(&r);
}

/* Every op constructor of graph.h — `TL_API tl_t tl_x(tl_graph *g, ...` or
 * `TL_API tl_status tl_x(tl_graph *g, ...` but the graph's own tl_graph_* —
 * appears as `tl_x` in the README's "### Ops" section: an op added to the
 * header and not to the README fails here. */
Test(examples, readme_lists_every_op)
{
    char *header = tc_slurp("include/tpuloop/graph.h"), *readme = tc_slurp("README.md");
    cr_assert(header != NULL && readme != NULL, "the tests run from the repository's root");
    char *ops = strstr(readme, "\n### Ops\n");
    cr_assert_not_null(ops, "README.md has no \"### Ops\" section");
    char *end = strstr(ops + 1, "\n## ");
    if (end != NULL)
        *end = '\0';
    int n = 0;
    for (const char *p = header; (p = strstr(p, "\nTL_API ")) != NULL;) {
        p += 8;
        const char *name;
        if (strncmp(p, "tl_t tl_", 8) == 0)
            name = p + 5;
        else if (strncmp(p, "tl_status tl_", 13) == 0)
            name = p + 10;
        else
            continue;
        size_t len = strcspn(name, "(");
        if (strncmp(name + len, "(tl_graph *g", 12) != 0 || strncmp(name, "tl_graph_", 9) == 0)
            continue;
        char want[96];
        cr_assert_lt(len, sizeof want - 3);
        snprintf(want, sizeof want, "`%.*s`", (int)len, name);
        cr_assert_not_null(strstr(ops, want), "the README's Ops section does not list %s (graph.h declares it)", want);
        n++;
    }
    cr_assert_geq(n, 85, "only %d ops found in graph.h: has its declaration style changed?", n);
    free(header);
    free(readme);
}

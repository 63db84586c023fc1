/* train.c — `tpuloop train`: the configuration's model on its dataset, in
 * device loops on every device of the machine, then evaluation, then one JSON
 * summary line with params_digest. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"

typedef struct progress {
    int64_t final_step;
    int64_t global_batch;
    bool tty;
} progress;

static void on_log(int64_t step, double loss, double steps_per_sec, double examples_per_sec, void *user)
{
    const progress *p = user;
    double eta = steps_per_sec > 0 ? (double)(p->final_step - step) / steps_per_sec : 0;
    if (p->tty) {
        int width = 30, done = p->final_step > 0 ? (int)(width * step / p->final_step) : 0;
        char bar[64];
        for (int i = 0; i < width; i++)
            bar[i] = i < done ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r[%s] step %lld/%lld  loss %.4f  %.1f steps/s  %.0f examples/s  %.0fs left   ", bar,
                (long long)step, (long long)p->final_step, loss, steps_per_sec, examples_per_sec, eta);
        if (step >= p->final_step)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "step %lld/%lld loss = %.6f, global_step/sec: %.2f, examples/sec: %.0f, time left: %.0fs\n",
                (long long)step, (long long)p->final_step, loss, steps_per_sec, examples_per_sec, eta);
    }
}

/* The data of a run: owned datasets, and the train and test views into them. */
typedef struct run_data {
    tl_labeled_data *owned[2];
    tl_labeled_data train, test; /* views: they borrow the owned arrays */
} run_data;

static void run_data_free(run_data *d)
{
    tl_labeled_data_destroy(d->owned[0]);
    tl_labeled_data_destroy(d->owned[1]);
    memset(d, 0, sizeof *d);
}

/* The dataset of the "input" section, or synthetic data shaped like it when
 * Fashion-MNIST is not installed: 70000 examples of one planted model, the
 * first 60000 to train and the last 10000 to test. */
static tl_status load_data(const tl_run_config *rc, run_data *d)
{
    memset(d, 0, sizeof *d);
    if (strcmp(rc->input.dataset, "fashion_mnist") == 0) {
        tl_status st = tl_mnist_load(rc->input.data_dir, "train", &d->owned[0]);
        if (st == TL_OK)
            st = tl_mnist_load(rc->input.data_dir, "test", &d->owned[1]);
        if (st == TL_OK) {
            d->train = *d->owned[0];
            d->test = *d->owned[1];
            return TL_OK;
        }
        run_data_free(d);
        if (st != TL_EIO)
            return st;
        fprintf(stderr, "warning: %s\nwarning: training on synthetic data shaped like Fashion-MNIST instead\n",
                tl_last_error());
    }
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = 70000;
    s.num_features = 784;
    s.num_classes = 10;
    s.seed = rc->tf_random_seed.set ? (uint64_t)rc->tf_random_seed.value : 0;
    tl_status st = tl_synthetic_load(&s, &d->owned[0]);
    if (st != TL_OK)
        return st;
    const tl_labeled_data *all = d->owned[0];
    d->train = d->test = *all;
    d->train.num_examples = 60000;
    d->test.num_examples = 10000;
    d->test.features += 60000 * all->num_features;
    d->test.labels += 60000;
    return TL_OK;
}

static tl_status optimizer_of(const tl_model_config *m, tl_optimizer_config *o)
{
    static const struct {
        const char *name;
        tl_optimizer_kind kind;
    } names[] = {{"sgd", TL_OPTIM_SGD}, {"momentum", TL_OPTIM_MOMENTUM}, {"adagrad", TL_OPTIM_ADAGRAD},
                 {"adam", TL_OPTIM_ADAM}, {"rmsprop", TL_OPTIM_RMSPROP}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(m->optimizer, names[i].name) != 0)
            continue;
        tl_optimizer_config_default(names[i].kind, o);
        o->lr.learning_rate = m->learning_rate;
        if (names[i].kind == TL_OPTIM_MOMENTUM)
            o->momentum = 0.9;
        if (names[i].kind == TL_OPTIM_RMSPROP)
            o->momentum = 0.0;
        return tl_optimizer_config_validate(o);
    }
    return TL_EINVAL;
}

/* Writes one row per example: its index, the argmax class and the softmax
 * probabilities of its logits; CSV when the path ends in ".csv", else JSON
 * Lines. Returns 0 or errno. */
static int write_predictions(const char *path, const tl_predict_result *pr)
{
    size_t len = strlen(path);
    bool csv = len >= 4 && strcmp(path + len - 4, ".csv") == 0;
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return errno;
    int64_t w = pr->width;
    if (csv) {
        fprintf(f, "index,class");
        for (int64_t c = 0; c < w; c++)
            fprintf(f, ",p%lld", (long long)c);
        fputc('\n', f);
    }
    for (int64_t i = 0; i < pr->num_examples; i++) {
        const float *z = pr->values + i * w;
        int64_t best = 0;
        double mx = z[0], sum = 0;
        for (int64_t c = 1; c < w; c++)
            if (z[c] > z[best])
                best = c;
        mx = z[best];
        for (int64_t c = 0; c < w; c++)
            sum += exp((double)z[c] - mx);
        fprintf(f, csv ? "%lld,%lld" : "{\"index\":%lld,\"class\":%lld,\"probabilities\":[", (long long)i,
                (long long)best);
        for (int64_t c = 0; c < w; c++)
            fprintf(f, "%s%.6g", csv || c ? "," : "", exp((double)z[c] - mx) / sum);
        fputs(csv ? "\n" : "]}\n", f);
    }
    int err = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && err == 0)
        err = errno;
    return err;
}

int cli_train(int argc, char **argv)
{
    static const char *const allowed[] = {"--summary_json=", "--predict", "--predictions_out=", NULL};
    bool seen[3] = {false, false, false};
    tl_config *cfg;
    int rc = cli_load_config(argc, argv, allowed, true, &cfg, seen, 3);
    if (rc != 0)
        return rc;
    const char *summary_path = NULL, *predictions_path = "predictions.jsonl";
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--summary_json=", 15) == 0)
            summary_path = argv[i] + 15;
        if (strncmp(argv[i], "--predictions_out=", 18) == 0)
            predictions_path = argv[i] + 18;
    }
    bool predict = seen[1] || seen[2];
    if (predict && !tl_config_get(cfg)->predict_batch_size.set) {
        tl_config_destroy(cfg);
        return cli_usage_error("--predict needs predict_batch_size in the configuration (e.g. "
                               "--predict_batch_size=1000)");
    }

    run_data data;
    tl_estimator *est = NULL;
    tl_status st = load_data(tl_config_get(cfg), &data);
    const tl_labeled_data *train = &data.train, *test = &data.test;
    if (st != TL_OK) {
        rc = cli_fail(st);
        goto out;
    }
    /* epochs become train_steps when neither train_steps nor max_steps is set. */
    const tl_run_config *r = tl_config_get(cfg);
    if (!r->train_steps.set && !r->max_steps.set && r->input.epochs.set && r->train_batch_size.set) {
        char text[32];
        snprintf(text, sizeof text, "%lld",
                 (long long)(r->input.epochs.value * (train->num_examples / r->train_batch_size.value)));
        if ((st = tl_config_set(cfg, "train_steps", text, TL_SOURCE_FLAG)) != TL_OK ||
            (st = tl_config_resolve(cfg)) != TL_OK) {
            rc = cli_fail(st);
            goto out;
        }
        r = tl_config_get(cfg);
    }
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = tl_model_mlp;
    o.reduce_sum = r->model.reduce_sum;
    o.user = (void *)&r->model;
    if (optimizer_of(&r->model, &o.optimizer) != TL_OK) {
        rc = cli_fail(TL_EINVAL);
        goto out;
    }
    progress prog = {r->train_steps.set ? r->train_steps.value : r->max_steps.set ? r->max_steps.value : 0,
                     r->train_batch_size.set ? r->train_batch_size.value : 0, isatty(STDERR_FILENO) != 0};
    o.on_log = on_log;
    o.log_user = &prog;
    if ((st = tl_estimator_create(cfg, &o, &est)) != TL_OK) {
        rc = cli_fail(st);
        goto out;
    }
    tl_train_result tr;
    tl_ipl ipl = r->tpu.iterations_per_loop;
    int devices = (int)(r->devices ? r->devices : tl_available_cpus());
    fprintf(stderr, "training %s on %lld examples: %lld steps of %lld on %d device%s, iterations_per_loop %lld%s\n",
            r->model.model_name, (long long)train->num_examples, (long long)prog.final_step,
            (long long)prog.global_batch, devices, devices == 1 ? "" : "s", (long long)ipl.value,
            ipl.unit == TL_IPL_COUNT ? " steps" : " s");
    if ((st = tl_estimator_train(est, train, &tr)) != TL_OK) {
        rc = cli_fail(st);
        goto out;
    }
    json_t *summary = json_object();
    json_object_set_new(summary, "global_step", json_integer(tr.global_step));
    json_object_set_new(summary, "loss", json_real(tr.loss));
    json_object_set_new(summary, "loss_mean", json_real(tr.loss_mean));
    json_object_set_new(summary, "examples_per_sec", json_real(tr.examples_per_sec));
    json_object_set_new(summary, "train_seconds", json_real(tr.seconds));
    if (r->eval_batch_size.set && r->eval_steps.set) {
        tl_eval_result er;
        if ((st = tl_estimator_evaluate(est, test, &er)) != TL_OK) {
            json_decref(summary);
            rc = cli_fail(st);
            goto out;
        }
        json_object_set_new(summary, "eval", json_pack("{s:f, s:f, s:I, s:I}", "loss", er.loss, "accuracy",
                                                       er.accuracy, "examples", (json_int_t)er.examples,
                                                       "global_step", (json_int_t)er.global_step));
        fprintf(stderr, "evaluation at step %lld: accuracy %.4f, loss %.4f over %lld examples\n",
                (long long)er.global_step, er.accuracy, er.loss, (long long)er.examples);
    }
    if (predict) {
        tl_predict_result pr;
        if ((st = tl_estimator_predict(est, test, &pr)) != TL_OK) {
            json_decref(summary);
            rc = cli_fail(st);
            goto out;
        }
        int err = write_predictions(predictions_path, &pr);
        tl_predict_result_free(&pr);
        if (err != 0) {
            json_decref(summary);
            fprintf(stderr, "error: cannot write --predictions_out=%s: %s\n", predictions_path, strerror(err));
            rc = EXIT_RUNTIME;
            goto out;
        }
        json_object_set_new(summary, "predictions", json_pack("{s:s, s:I}", "path", predictions_path, "rows",
                                                              (json_int_t)test->num_examples));
        fprintf(stderr, "wrote %lld predictions to %s\n", (long long)test->num_examples, predictions_path);
    }
    char digest[65];
    tl_estimator_params_digest(est, digest);
    json_object_set_new(summary, "params_digest", json_string(digest));
    char *line = json_dumps(summary, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(summary);
    if (line == NULL) {
        rc = cli_fail(TL_ENOMEM);
        goto out;
    }
    printf("%s\n", line);
    if (summary_path != NULL) {
        FILE *f = fopen(summary_path, "w");
        if (f == NULL || fprintf(f, "%s\n", line) < 0 || fclose(f) != 0) {
            fprintf(stderr, "error: cannot write --summary_json=%s: %s\n", summary_path, strerror(errno));
            rc = EXIT_RUNTIME;
        }
    }
    free(line);
out:
    tl_estimator_destroy(est);
    run_data_free(&data);
    tl_config_destroy(cfg);
    return rc;
}

/* job.c — what `train`, `evaluate` and `predict` share: the configuration,
 * the dataset with its train and test views, the estimator wired to the
 * built-in model, the progress line, the prediction writer and the summary
 * line. One place, so the three commands build the same estimator from the
 * same flags and write the same files, and a checkpoint trained by one is
 * read back by the others with the same variables. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_fail_runtime(tl_status st)
{
    fprintf(stderr, "error: %s\n", tl_last_error()[0] ? tl_last_error() : tl_strerror(st));
    return EXIT_RUNTIME;
}

const char *cli_flag_value(int argc, char **argv, const char *prefix)
{
    const char *v = NULL;
    size_t n = strlen(prefix);
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], prefix, n) == 0)
            v = argv[i] + n; /* the last one wins, as for configuration flags */
    return v;
}

static void on_log(int64_t step, double loss, double steps_per_sec, double examples_per_sec, void *user)
{
    const cli_progress *p = user;
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

/* The dataset of the "input" section, or synthetic data shaped like it when
 * Fashion-MNIST is not installed: 70000 examples of one planted model, the
 * first 60000 to train and the last 10000 to test. Without need_train only
 * Fashion-MNIST's test split is read (the synthetic set is made whole, so its
 * test examples are the same ones train tests on). */
static tl_status load_data(const tl_run_config *rc, bool need_train, cli_job *job)
{
    if (strcmp(rc->input.dataset, "criteo_synthetic") == 0)
        return cli_criteo_synthetic(rc, need_train, job);
    if (strcmp(rc->input.dataset, "fashion_mnist") == 0) {
        tl_status st = need_train ? tl_mnist_load(rc->input.data_dir, "train", &job->owned[0]) : TL_OK;
        if (st == TL_OK)
            st = tl_mnist_load(rc->input.data_dir, "test", &job->owned[1]);
        if (st == TL_OK) {
            if (need_train)
                job->train = *job->owned[0];
            job->test = *job->owned[1];
            return TL_OK;
        }
        tl_labeled_data_destroy(job->owned[0]);
        tl_labeled_data_destroy(job->owned[1]);
        job->owned[0] = job->owned[1] = NULL;
        if (st != TL_EIO)
            return st;
        fprintf(stderr, "warning: %s\nwarning: using synthetic data shaped like Fashion-MNIST instead\n",
                tl_last_error());
    }
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = 70000;
    s.num_features = 784;
    s.num_classes = 10;
    s.seed = rc->tf_random_seed.set ? (uint64_t)rc->tf_random_seed.value : 0;
    tl_status st = tl_synthetic_load(&s, &job->owned[0]);
    if (st != TL_OK)
        return st;
    const tl_labeled_data *all = job->owned[0];
    job->train = job->test = *all;
    job->train.num_examples = 60000;
    job->test.num_examples = 10000;
    job->test.features += 60000 * all->num_features;
    job->test.labels += 60000;
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

int cli_job_config(cli_job *job, int argc, char **argv, const char *const *allowed, bool *seen, int nseen)
{
    memset(job, 0, sizeof *job);
    int rc = cli_load_config(argc, argv, allowed, true, &job->cfg, seen, nseen);
    if (rc == 0)
        job->r = tl_config_get(job->cfg);
    return rc;
}

int cli_job_build(cli_job *job, bool need_train)
{
    bool files = cli_is_file_dataset(job->r);
    tl_status st = files ? TL_OK : load_data(job->r, need_train, job);
    if (st != TL_OK)
        return cli_fail(st);
    /* epochs become train_steps when neither train_steps nor max_steps is set:
     * epochs x (examples // train_batch_size). A file dataset's examples are
     * counted once by reading its files through (TFRecord framing only; set
     * train_steps to skip the pass). */
    const tl_run_config *r = tl_config_get(job->cfg);
    if (need_train && !r->train_steps.set && !r->max_steps.set && r->input.epochs.set && r->train_batch_size.set) {
        int64_t examples = job->train.num_examples;
        if (files) {
            fprintf(stderr, "counting the records of files for epochs (set train_steps to skip this)\n");
            if ((st = cli_files_count(job, &examples)) != TL_OK)
                return cli_fail(st);
            if (examples < r->train_batch_size.value) {
                fprintf(stderr, "error: epochs: files hold %lld examples, less than one batch of train_batch_size "
                        "%lld\n", (long long)examples, (long long)r->train_batch_size.value);
                return EXIT_BAD_INPUT;
            }
        }
        char text[32];
        snprintf(text, sizeof text, "%lld", (long long)(r->input.epochs.value * (examples / r->train_batch_size.value)));
        if ((st = tl_config_set(job->cfg, "train_steps", text, TL_SOURCE_FLAG)) != TL_OK ||
            (st = tl_config_resolve(job->cfg)) != TL_OK)
            return cli_fail(st);
        r = tl_config_get(job->cfg);
    }
    job->r = r;
    int rc = files ? cli_files_open(job, need_train) : 0;
    if (rc != 0)
        return rc;
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = tl_model_mlp;
    o.reduce_sum = r->model.reduce_sum;
    o.user = (void *)&r->model;
    if (optimizer_of(&r->model, &o.optimizer) != TL_OK)
        return cli_fail(TL_EINVAL);
    if ((rc = cli_job_embedding(job, &o)) != 0)
        return rc;
    job->prog.final_step = r->train_steps.set ? r->train_steps.value : r->max_steps.set ? r->max_steps.value : 0;
    job->prog.tty = isatty(STDERR_FILENO) != 0;
    o.on_log = on_log;
    o.log_user = &job->prog;
    if ((st = tl_estimator_create(job->cfg, &o, &job->est)) != TL_OK)
        return cli_fail(st);
    return 0;
}

void cli_job_close(cli_job *job)
{
    tl_estimator_destroy(job->est);
    tl_emb_engine_destroy(job->emb); /* after the estimator that borrows it */
    cli_files_close(job);
    tl_labeled_data_destroy(job->owned[0]);
    tl_labeled_data_destroy(job->owned[1]);
    tl_config_destroy(job->cfg);
    memset(job, 0, sizeof *job);
}

int cli_restore(cli_job *job, const char *checkpoint, bool required, char *used, size_t cap, int64_t *step)
{
    const char *dir = job->r->model_dir;
    *step = -1;
    used[0] = '\0';
    if (checkpoint != NULL) {
        /* A TensorFlow user names a checkpoint by its prefix ("model.ckpt-200");
         * the file is the prefix plus ".safetensors". */
        snprintf(used, cap, "%s", checkpoint);
        if (access(used, F_OK) != 0) {
            int n = snprintf(used, cap, "%s%s", checkpoint, TL_CKPT_SUFFIX);
            if (n < 0 || (size_t)n >= cap || access(used, F_OK) != 0)
                snprintf(used, cap, "%s", checkpoint);
        }
    } else if (dir == NULL) {
        if (!required)
            return 0;
        return cli_usage_error("there is no checkpoint to load: set model_dir (--model_dir=DIR) or "
                               "--checkpoint=FILE");
    } else {
        /* The command looks the checkpoint up itself, rather than letting
         * the estimator do it, to know which file and step it restores (the
         * estimator loads them only when the model is traced). */
        tl_ckpt_reader *r;
        tl_status st = tl_ckpt_latest_valid(dir, 0, &r, step);
        if (st == TL_ENOTFOUND) {
            if (!required)
                return 0;
            fprintf(stderr, "error: Could not find trained model in model_dir: %s.\n", dir);
            return EXIT_RUNTIME;
        }
        if (st != TL_OK)
            return cli_fail_runtime(st);
        tl_ckpt_close(r);
        if ((st = tl_ckpt_path(dir, *step, used, cap)) != TL_OK)
            return cli_fail_runtime(st);
    }
    tl_status st = tl_estimator_restore(job->est, used);
    if (st != TL_OK)
        return cli_fail_runtime(st);
    return 0;
}

json_t *cli_eval_json(const cli_job *job, const tl_eval_result *er)
{
    json_t *j = json_pack("{s:f, s:f}", "loss", er->loss, "accuracy", er->accuracy);
    if (j != NULL && er->has_auc)
        json_object_set_new(j, "auc", json_real(er->auc));
    if (j != NULL && job->has_oracle)
        json_object_set_new(j, "oracle_auc", json_real(job->oracle_auc));
    if (j != NULL) {
        json_object_set_new(j, "examples", json_integer(er->examples));
        json_object_set_new(j, "global_step", json_integer(er->global_step));
    }
    return j;
}

void cli_eval_log(const cli_job *job, const tl_eval_result *er)
{
    char auc[96] = "";
    if (er->has_auc && job->has_oracle)
        snprintf(auc, sizeof auc, ", auc %.4f (the planted model's: %.4f)", er->auc, job->oracle_auc);
    else if (er->has_auc)
        snprintf(auc, sizeof auc, ", auc %.4f", er->auc);
    fprintf(stderr, "evaluation at step %lld: accuracy %.4f, loss %.4f%s over %lld examples\n",
            (long long)er->global_step, er->accuracy, er->loss, auc, (long long)er->examples);
}

int cli_write_predictions(const char *path, const tl_predict_result *pr)
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

int cli_predict_to(cli_job *job, const char *path, json_t *summary, int64_t *global_step)
{
    tl_predict_result pr;
    tl_status st = cli_job_predict(job, &pr);
    if (st != TL_OK)
        return cli_fail(st);
    int err = cli_write_predictions(path, &pr);
    int64_t rows = pr.num_examples;
    *global_step = pr.global_step;
    tl_predict_result_free(&pr);
    if (err != 0) {
        fprintf(stderr, "error: cannot write --predictions_out=%s: %s\n", path, strerror(err));
        return EXIT_RUNTIME;
    }
    json_object_set_new(summary, "predictions", json_pack("{s:s, s:I}", "path", path, "rows", (json_int_t)rows));
    fprintf(stderr, "wrote %lld predictions to %s\n", (long long)rows, path);
    return 0;
}

int cli_print_summary(cli_job *job, json_t *summary, const char *summary_path)
{
    char digest[65];
    tl_status st = tl_estimator_params_digest(job->est, digest);
    if (st != TL_OK) {
        json_decref(summary);
        return cli_fail(st);
    }
    json_object_set_new(summary, "params_digest", json_string(digest));
    char *line = json_dumps(summary, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(summary);
    if (line == NULL)
        return cli_fail(TL_ENOMEM);
    int rc = 0;
    printf("%s\n", line);
    fflush(stdout);
    if (summary_path != NULL) {
        FILE *f = fopen(summary_path, "w");
        int err = f == NULL ? errno : 0;
        if (f != NULL && fprintf(f, "%s\n", line) < 0)
            err = errno ? errno : EIO;
        if (f != NULL && fclose(f) != 0 && err == 0)
            err = errno;
        if (err != 0) {
            fprintf(stderr, "error: cannot write --summary_json=%s: %s\n", summary_path, strerror(err));
            rc = EXIT_RUNTIME;
        }
    }
    free(line);
    return rc;
}

/* run.c — what `train`, `evaluate` and `predict` share over the job layer
 * (tpuloop/job.h): the configuration, the job with its progress and start
 * lines, the restore's exit statuses, the evaluation line and JSON, the
 * prediction file and the summary line. The job does the work; this file
 * only prints. */
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

/* "1h 02m", "3m 07s", "42s". */
static void duration(double secs, char *buf, size_t cap)
{
    long long s = secs < 0 ? 0 : secs > 1e9 ? 1000000000LL : (long long)(secs + 0.5);
    if (s >= 3600)
        snprintf(buf, cap, "%lldh %02lldm", s / 3600, s / 60 % 60);
    else if (s >= 60)
        snprintf(buf, cap, "%lldm %02llds", s / 60, s % 60);
    else
        snprintf(buf, cap, "%llds", s);
}

/* One line per loss log (TensorFlow's LoggingTensorHook): the step, the last
 * step's loss and the mean over the steps since the previous line, and the
 * latest rate (StepCounterHook's) with the time left, once there is one. */
static void on_progress(const tl_train_log *lg, int64_t final_step, void *user)
{
    const cli_run *run = user;
    if (!lg->log_loss)
        return; /* a rate alone: the next loss line shows it */
    char total[32] = "", rate[96] = "", left[48] = "";
    if (final_step >= 0)
        snprintf(total, sizeof total, "/%lld", (long long)final_step);
    if (lg->has_rate) {
        snprintf(rate, sizeof rate, ", %.1f steps/s, %.0f examples/s", lg->steps_per_sec, lg->examples_per_sec);
        if (final_step >= 0 && lg->steps_per_sec > 0) {
            char d[24];
            duration((double)(final_step - lg->step) / lg->steps_per_sec, d, sizeof d);
            snprintf(left, sizeof left, ", %s left", d);
        }
    }
    if (run->tty) {
        int width = 30, done = final_step > 0 ? (int)(width * lg->step / final_step) : 0;
        char bar[64];
        for (int i = 0; i < width; i++)
            bar[i] = i < done ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r[%s] step %lld%s  loss %.4f (mean %.4f)%s%s   ", final_step > 0 ? bar : "",
                (long long)lg->step, total, lg->loss, lg->loss_mean, rate, left);
        if (final_step >= 0 && lg->step >= final_step)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "step %lld%s loss = %.6f (mean %.6f over %lld steps)%s%s\n", (long long)lg->step, total,
                lg->loss, lg->loss_mean, (long long)lg->loss_steps, rate, left);
    }
}

static void on_train_start(const tl_job_train_start *s, void *user)
{
    (void)user;
    if (s->restored_from != NULL)
        fprintf(stderr, "resuming from %s (step %lld)\n", s->restored_from, (long long)s->from_step);
    char what[64], end[48];
    if (s->examples >= 0)
        snprintf(what, sizeof what, "%lld examples", (long long)s->examples);
    else
        snprintf(what, sizeof what, "%s files", s->dataset);
    if (s->final_step >= 0)
        snprintf(end, sizeof end, "to step %lld", (long long)s->final_step);
    else
        snprintf(end, sizeof end, "to the end of the input");
    char hosts[96] = "";
    if (s->num_replicas > 0 && s->num_replicas < s->num_devices) /* model parallelism */
        snprintf(hosts, sizeof hosts, " (%d replica%s of %d cores)", s->num_replicas, s->num_replicas == 1 ? "" : "s",
                 s->num_devices / s->num_replicas);
    if (s->num_hosts > 1)
        snprintf(hosts + strlen(hosts), sizeof hosts - strlen(hosts), " (%d hosts)", s->num_hosts);
    char tables[96] = "";
    if (s->table_bytes > 0 && s->host_table_bytes < s->table_bytes)
        snprintf(tables, sizeof tables, "; embedding tables %.2f MiB, at most %.2f MiB per host",
                 (double)s->table_bytes / 1048576.0, (double)s->host_table_bytes / 1048576.0);
    else if (s->table_bytes > 0)
        snprintf(tables, sizeof tables, "; embedding tables %.2f MiB", (double)s->table_bytes / 1048576.0);
    fprintf(stderr, "training %s on %s: %s, batches of %lld on %d device%s%s, iterations_per_loop %lld%s%s\n",
            s->model_name, what, end, (long long)s->global_batch_size, s->num_devices, s->num_devices == 1 ? "" : "s",
            hosts, (long long)s->iterations_per_loop.value,
            s->iterations_per_loop.unit == TL_IPL_COUNT ? " steps" : " s", tables);
}

/* num_hosts is the number of processes the launcher started (1 without
 * one): the default, and a model_dir's value (a deployment is not the
 * model's: a run may resume on more or fewer hosts), give way to it. Under
 * a launcher a value the user gave must equal it; alone, a value the user
 * gave runs that many hosts side by side in this process. */
static int hosts_config(tl_config *cfg)
{
    int P = cli_hosts_count();
    const tl_run_config *r = tl_config_get(cfg);
    cli_hosts_name(r->tpu.tpu_job_name);
    if (cli_hosts() != NULL)
        (void)tl_comm_set_timeout(cli_hosts(), (double)r->host_timeout_secs);
    if (r->num_hosts == P)
        return 0;
    tl_config_source src;
    const char *from = "default";
    if (tl_config_source_of(cfg, "num_hosts", &src, &from) != TL_OK)
        return cli_fail(TL_EUNKNOWN);
    bool given = src == TL_SOURCE_FILE || src == TL_SOURCE_ENV || src == TL_SOURCE_FLAG;
    if (given && cli_hosts() == NULL)
        return 0;
    if (given)
        return cli_usage_error("num_hosts is %lld (%s) but the launcher started %d process%s, one per host: start "
                               "%lld (mpirun -np %lld), or leave num_hosts out", (long long)r->num_hosts, from, P,
                               P == 1 ? "" : "es", (long long)r->num_hosts, (long long)r->num_hosts);
    char text[16];
    snprintf(text, sizeof text, "%d", P);
    tl_status st = tl_config_set(cfg, "num_hosts", text, TL_SOURCE_ENV);
    if (st == TL_OK)
        st = tl_config_resolve(cfg);
    return st == TL_OK ? 0 : cli_fail(st);
}

int cli_run_config(cli_run *run, int argc, char **argv, const char *const *allowed, bool *seen, int nseen)
{
    memset(run, 0, sizeof *run);
    tl_status st = cli_hosts_join();
    if (st != TL_OK)
        return cli_fail(st);
    int rc = cli_load_config(argc, argv, allowed, true, &run->cfg, seen, nseen);
    if (rc == 0)
        rc = hosts_config(run->cfg);
    if (rc == 0)
        run->r = tl_config_get(run->cfg);
    return rc;
}

static void on_evaluation(const tl_job_evaluation *ev, void *user)
{
    (void)user;
    cli_eval_log(ev);
}

int cli_run_create(cli_run *run, bool train, bool tae)
{
    tl_job_options o;
    tl_job_options_init(&o);
    o.train = train;
    o.train_and_evaluate = tae;
    if (tae)
        o.on_evaluation = on_evaluation;
    o.on_train_start = on_train_start;
    o.on_progress = on_progress;
    o.user = run;
    o.hosts = cli_hosts();
    run->tty = isatty(STDERR_FILENO) != 0;
    tl_status st = tl_job_create(run->cfg, &o, &run->job);
    return st == TL_OK ? 0 : cli_fail(st);
}

void cli_run_close(cli_run *run)
{
    tl_job_destroy(run->job);
    tl_config_destroy(run->cfg);
    memset(run, 0, sizeof *run);
}

int cli_run_restore(cli_run *run, const char *checkpoint, char *used, size_t cap, int64_t *step)
{
    tl_status st = tl_job_restore(run->job, checkpoint, used, cap, step);
    if (st == TL_OK)
        return 0;
    if (checkpoint == NULL && run->r->model_dir == NULL)
        return cli_usage_error("%s", tl_last_error());
    return cli_fail_runtime(st);
}

json_t *cli_eval_json(const tl_job_evaluation *ev)
{
    const tl_eval_result *er = &ev->result;
    json_t *j = json_pack("{s:f, s:f}", "loss", er->loss, "accuracy", er->accuracy);
    if (j != NULL && er->has_auc)
        json_object_set_new(j, "auc", json_real(er->auc));
    if (j != NULL && ev->has_oracle_auc)
        json_object_set_new(j, "oracle_auc", json_real(ev->oracle_auc));
    if (j != NULL) {
        json_object_set_new(j, "examples", json_integer(er->examples));
        json_object_set_new(j, "global_step", json_integer(er->global_step));
    }
    return j;
}

void cli_eval_log(const tl_job_evaluation *ev)
{
    if (!cli_host0())
        return;
    const tl_eval_result *er = &ev->result;
    char auc[96] = "";
    if (er->has_auc && ev->has_oracle_auc)
        snprintf(auc, sizeof auc, ", auc %.4f (the planted model's: %.4f)", er->auc, ev->oracle_auc);
    else if (er->has_auc)
        snprintf(auc, sizeof auc, ", auc %.4f", er->auc);
    fprintf(stderr, "evaluation at step %lld: accuracy %.4f, loss %.4f%s over %lld examples\n",
            (long long)er->global_step, er->accuracy, er->loss, auc, (long long)er->examples);
}

int cli_predict_to(cli_run *run, const char *path, json_t *summary, int64_t *global_step)
{
    tl_predict_result pr;
    tl_status st = tl_job_predict(run->job, NULL, &pr);
    if (st != TL_OK)
        return cli_fail(st);
    st = cli_host0() ? tl_job_write_predictions(path, &pr) : TL_OK; /* host 0 writes */
    int64_t rows = pr.num_examples;
    *global_step = pr.global_step;
    tl_predict_result_free(&pr);
    if (st != TL_OK)
        return cli_fail(st);
    json_object_set_new(summary, "predictions", json_pack("{s:s, s:I}", "path", path, "rows", (json_int_t)rows));
    if (cli_host0())
        fprintf(stderr, "wrote %lld predictions to %s\n", (long long)rows, path);
    return 0;
}

int cli_print_summary(cli_run *run, json_t *summary, const char *summary_path)
{
    char digest[65];
    tl_status st = tl_job_params_digest(run->job, digest);
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
    if (!cli_host0()) { /* host 0 prints the run's result */
        free(line);
        return 0;
    }
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

/* train.c — `tpuloop train`: the configuration's model on its dataset, in
 * device loops on every device of the machine, then evaluation, then one JSON
 * summary line with params_digest.
 *
 * With a model_dir, training resumes from its latest valid checkpoint and
 * saves as the configuration says; SIGTERM or SIGINT stops it at the next
 * loop boundary after a checkpoint (graceful shutdown: the line then says
 * "stopped": true and the command exits 0), and a second SIGINT quits at
 * once. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* ---- graceful stop ------------------------------------------------------ */

/* A signal handler reaches only what is global: the estimator to stop, set
 * while tl_estimator_train runs, and how many handlers are inside it now
 * (the handler may run on any thread, so clearing the target is not enough:
 * handlers_running lets the clearing side wait out one that loaded it
 * before). Both are lock-free atomics, which are async-signal-safe. */
static _Atomic(tl_estimator *) stop_target;
static atomic_int handlers_running;

static void on_stop_signal(int sig)
{
    int saved_errno = errno;
    atomic_fetch_add(&handlers_running, 1);
    tl_estimator *est = atomic_load(&stop_target);
    if (est != NULL) {
        tl_estimator_request_stop(est);
        static const char term[] = "\ntpuloop: SIGTERM: stopping at the next loop boundary\n";
        static const char intr[] = "\ntpuloop: SIGINT: stopping at the next loop boundary "
                                   "(press Ctrl-C again to quit at once)\n";
        ssize_t n = sig == SIGINT ? write(STDERR_FILENO, intr, sizeof intr - 1)
                                  : write(STDERR_FILENO, term, sizeof term - 1);
        (void)n;
    }
    atomic_fetch_sub(&handlers_running, 1);
    errno = saved_errno;
}

typedef struct stop_handlers {
    struct sigaction old_int, old_term;
    bool have_int, have_term;
} stop_handlers;

/* Installs the handler for sig unless the signal is ignored (a job started
 * in the background by a non-interactive shell ignores SIGINT, and should go
 * on ignoring it). */
static bool install_one(int sig, int flags, struct sigaction *old)
{
    if (sigaction(sig, NULL, old) != 0 || old->sa_handler == SIG_IGN)
        return false;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    /* SA_RESTART: a checkpoint's write or fsync on the thread that takes the
     * signal must not fail with EINTR. */
    sa.sa_flags = SA_RESTART | flags;
    return sigaction(sig, &sa, NULL) == 0;
}

static void stop_handlers_install(tl_estimator *est, stop_handlers *h)
{
    atomic_store(&stop_target, est);
    /* SA_RESETHAND: the first SIGINT asks for a graceful stop and restores
     * the default action, so a second one quits at once. SIGTERM always asks
     * (a supervisor escalates to SIGKILL by itself). */
    h->have_int = install_one(SIGINT, SA_RESETHAND, &h->old_int);
    h->have_term = install_one(SIGTERM, 0, &h->old_term);
}

static void stop_handlers_remove(stop_handlers *h)
{
    if (h->have_int)
        sigaction(SIGINT, &h->old_int, NULL);
    if (h->have_term)
        sigaction(SIGTERM, &h->old_term, NULL);
    atomic_store(&stop_target, NULL);
    while (atomic_load(&handlers_running) > 0)
        sched_yield();
}

/* ---- tpuloop train ------------------------------------------------------ */

static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* `train`, or with tae `train_and_evaluate`. */
static int train(int argc, char **argv, bool tae)
{
    static const char *const allowed[] = {"--summary_json=", "--predict", "--predictions_out=", NULL};
    bool seen[3] = {false, false, false};
    cli_run run;
    int rc = cli_run_config(&run, argc, argv, allowed, seen, 3);
    bool predict = seen[1] || seen[2];
    const char *out = cli_flag_value(argc, argv, "--predictions_out=");
    out = out ? out : "predictions.jsonl";
    if (rc == 0 && predict && !run.r->predict_batch_size.set)
        rc = cli_usage_error("--predict needs predict_batch_size in the configuration (e.g. "
                             "--predict_batch_size=1000)");
    if (rc == 0 && predict && tl_job_check_predictions_path(out) != TL_OK)
        rc = cli_usage_error("--%s", tl_last_error());
    if (rc == 0)
        rc = cli_run_create(&run, true, tae);
    if (rc != 0) {
        cli_run_close(&run);
        return rc;
    }
    const tl_run_config *r = run.r;
    tl_job_train_result jr;
    tl_job_evaluation last;
    stop_handlers handlers;
    stop_handlers_install(tl_job_estimator(run.job), &handlers);
    tl_status st = tae ? tl_job_train_and_evaluate(run.job, &jr, &last) : tl_job_train(run.job, &jr);
    stop_handlers_remove(&handlers);
    if (st != TL_OK) {
        rc = cli_fail(st);
        cli_run_close(&run);
        return rc;
    }
    const tl_train_result *tr = &jr.train;
    if (tr->skipped && cli_host0()) /* host 0 reports */
        fprintf(stderr, "Skipping training since max_steps has already saved.\n");
    if (tr->stopped && cli_host0())
        fprintf(stderr, "stopped at step %lld on request%s\n", (long long)tr->global_step,
                r->model_dir ? "; the next `tpuloop train` resumes from there" : "");
    if (tr->end_of_input && cli_host0())
        fprintf(stderr, "the input ended at step %lld (%lld epoch%s read)\n", (long long)tr->global_step,
                (long long)r->input.epochs.value, r->input.epochs.value == 1 ? "" : "s");
    json_t *summary = json_object();
    json_object_set_new(summary, "global_step", json_integer(tr->global_step));
    json_object_set_new(summary, "loss", real_or_null(tr->loss));
    json_object_set_new(summary, "loss_mean", real_or_null(tr->loss_mean));
    json_object_set_new(summary, "examples_per_sec", real_or_null(tr->examples_per_sec));
    json_object_set_new(summary, "train_seconds", real_or_null(tr->seconds));
    json_object_set_new(summary, "infeed_start_seconds", real_or_null(tr->infeed_start_seconds));
    json_object_set_new(summary, "infeed_wait_seconds", real_or_null(tr->infeed_wait_seconds));
    json_object_set_new(summary, "stopped", json_boolean(tr->stopped));
    json_object_set_new(summary, "skipped", json_boolean(tr->skipped));
    json_object_set_new(summary, "end_of_input", json_boolean(tr->end_of_input));
    json_object_set_new(summary, "model_dir", r->model_dir ? json_string(r->model_dir) : json_null());
    json_object_set_new(summary, "restored_from_step",
                        jr.restored_from_step >= 0 ? json_integer(jr.restored_from_step) : json_null());
    /* A stopped run was asked to end: it evaluates and predicts nothing.
     * Nor does a run whose evaluation TensorFlow's rules forbid (the
     * training is done and saved; `tpuloop evaluate` would fail the same). */
    bool evaluate = !tae && !tr->stopped && r->eval_batch_size.set && (r->eval_steps.set || !r->use_tpu || !r->eval_on_tpu);
    if (evaluate && tl_estimator_check_mode(tl_job_estimator(run.job), TL_MODE_EVAL) != TL_OK) {
        if (cli_host0()) /* every host decides the same */
            fprintf(stderr, "warning: not evaluating after training: %s\n", tl_last_error());
        evaluate = false;
    }
    if (evaluate) {
        tl_job_evaluation ev;
        if ((st = tl_job_evaluate(run.job, NULL, &ev)) != TL_OK) {
            json_decref(summary);
            rc = cli_fail(st);
            cli_run_close(&run);
            return rc;
        }
        json_object_set_new(summary, "eval", cli_eval_json(&ev));
        cli_eval_log(&ev);
    }
    if (tae) {
        int n = tl_job_evaluations(run.job);
        const char *best = tl_job_best_export(run.job);
        json_object_set_new(summary, "evaluations", json_integer(n));
        json_object_set_new(summary, "eval", n > 0 ? cli_eval_json(&last) : json_null());
        json_object_set_new(summary, "best_export", best != NULL ? json_string(best) : json_null());
    }
    if (!tr->stopped && predict) {
        int64_t step;
        if ((rc = cli_predict_to(&run, out, summary, &step)) != 0) {
            json_decref(summary);
            cli_run_close(&run);
            return rc;
        }
    }
    rc = cli_print_summary(&run, summary, cli_flag_value(argc, argv, "--summary_json="));
    cli_run_close(&run);
    return rc;
}

int cli_train(int argc, char **argv)
{
    return train(argc, argv, false);
}

int cli_train_and_evaluate(int argc, char **argv)
{
    return train(argc, argv, true);
}

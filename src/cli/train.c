/* train.c — `tpuloop train`: the configuration's model on its dataset, in
 * device loops on every device of the machine, then evaluation, then one JSON
 * summary line with params_digest.
 *
 * With a model_dir, training resumes from its latest valid checkpoint and
 * saves as the configuration says; SIGTERM or SIGINT stops it at the next
 * loop boundary after a checkpoint (graceful shutdown: the line then says
 * "stopped": true and the command exits 0), and a second SIGINT quits at
 * once. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

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
    /* Ctrl-C and SIGTERM stop at the next loop boundary, after a checkpoint. */
    tl_status st = tl_estimator_stop_signals_install(tl_job_estimator(run.job));
    if (st == TL_OK) {
        st = tae ? tl_job_train_and_evaluate(run.job, &jr, &last) : tl_job_train(run.job, &jr);
        (void)tl_estimator_stop_signals_remove();
    }
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

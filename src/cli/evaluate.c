/* evaluate.c — `tpuloop evaluate`: Estimator.evaluate on a checkpoint. The
 * job is built from the configuration as `train` builds it, loads the
 * latest valid checkpoint of model_dir or the one --checkpoint names,
 * evaluates eval_steps batches of the test split (a file dataset's
 * eval_files, or its files when eval_files is null), and prints the metrics
 * as one JSON line — the same fields as train's "eval" — with the checkpoint
 * it used and the evaluated parameters' params_digest. The runtime writes
 * the evaluation's events under model_dir/eval. */
#include <stdio.h>

#include "cli.h"

int cli_evaluate(int argc, char **argv)
{
    static const char *const allowed[] = {"--checkpoint=", "--summary_json=", NULL};
    bool seen[2] = {false, false};
    cli_run run;
    char used[4096];
    int64_t step;
    int rc = cli_run_config(&run, argc, argv, allowed, seen, 2);
    if (rc == 0)
        rc = cli_run_create(&run, false, false);
    if (rc == 0)
        rc = cli_run_restore(&run, cli_flag_value(argc, argv, "--checkpoint="), used, sizeof used, &step);
    if (rc == 0) {
        tl_job_evaluation ev;
        tl_status st = tl_job_evaluate(run.job, NULL, &ev);
        if (st != TL_OK) {
            rc = cli_fail(st);
        } else {
            cli_eval_log(&ev);
            json_t *summary = cli_eval_json(&ev);
            json_object_set_new(summary, "checkpoint", json_string(used));
            json_object_set_new(summary, "model_dir", run.r->model_dir ? json_string(run.r->model_dir) : json_null());
            rc = cli_print_summary(&run, summary, cli_flag_value(argc, argv, "--summary_json="));
        }
    }
    cli_run_close(&run);
    return rc;
}

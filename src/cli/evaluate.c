/* evaluate.c — `tpuloop evaluate`: Estimator.evaluate on a checkpoint. The
 * estimator is built from the configuration as `train` builds it (job.c),
 * loads the latest valid checkpoint of model_dir or the one --checkpoint
 * names, evaluates eval_steps batches of the test split (a file dataset's
 * eval_files, or its files when eval_files is null), and prints the
 * metrics as one JSON line — the same fields as train's "eval" — with the
 * checkpoint it used and the evaluated parameters' params_digest. The
 * runtime writes the evaluation's events under model_dir/eval. */
#include <stdio.h>

#include "cli.h"

int cli_evaluate(int argc, char **argv)
{
    static const char *const allowed[] = {"--checkpoint=", "--summary_json=", NULL};
    bool seen[2] = {false, false};
    cli_job job;
    char used[4096];
    int64_t step;
    int rc = cli_job_config(&job, argc, argv, allowed, seen, 2);
    if (rc == 0)
        rc = cli_job_build(&job, false);
    if (rc == 0)
        rc = cli_restore(&job, cli_flag_value(argc, argv, "--checkpoint="), true, used, sizeof used, &step);
    if (rc == 0) {
        tl_eval_result er;
        tl_status st = cli_job_evaluate(&job, &er);
        if (st != TL_OK) {
            rc = cli_fail(st);
        } else {
            cli_eval_log(&job, &er);
            json_t *summary = cli_eval_json(&job, &er);
            json_object_set_new(summary, "checkpoint", json_string(used));
            json_object_set_new(summary, "model_dir", job.r->model_dir ? json_string(job.r->model_dir) : json_null());
            rc = cli_print_summary(&job, summary, cli_flag_value(argc, argv, "--summary_json="));
        }
    }
    cli_job_close(&job);
    return rc;
}

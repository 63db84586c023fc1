/* predict.c — `tpuloop predict`: Estimator.predict on a checkpoint. The job
 * is built from the configuration as `train` builds it, loads the latest
 * valid checkpoint of model_dir or the one --checkpoint names, predicts
 * every example of the test split, and writes the file `train --predict`
 * writes (CSV for a .csv path, JSON Lines for .jsonl or .json; default
 * predictions.jsonl), then one JSON summary line. */
#include <stdio.h>

#include "cli.h"

int cli_predict(int argc, char **argv)
{
    static const char *const allowed[] = {"--checkpoint=", "--predictions_out=", "--summary_json=", NULL};
    bool seen[3] = {false, false, false};
    cli_run run;
    char used[4096];
    int64_t step;
    const char *out = cli_flag_value(argc, argv, "--predictions_out=");
    out = out ? out : "predictions.jsonl";
    int rc = cli_run_config(&run, argc, argv, allowed, seen, 3);
    if (rc == 0 && !run.r->predict_batch_size.set)
        rc = cli_usage_error("predict needs predict_batch_size in the configuration (e.g. --predict_batch_size=1000)");
    if (rc == 0 && tl_job_check_predictions_path(out) != TL_OK)
        rc = cli_usage_error("--%s", tl_last_error());
    if (rc == 0)
        rc = cli_run_create(&run, false, false);
    if (rc == 0)
        rc = cli_run_restore(&run, cli_flag_value(argc, argv, "--checkpoint="), used, sizeof used, &step);
    if (rc == 0) {
        json_t *summary = json_object();
        json_object_set_new(summary, "global_step", json_integer(step));
        json_object_set_new(summary, "checkpoint", json_string(used));
        json_object_set_new(summary, "model_dir", run.r->model_dir ? json_string(run.r->model_dir) : json_null());
        rc = cli_predict_to(&run, out, summary, &step);
        if (rc == 0) {
            /* The step the parameters have, whichever file they came from. */
            json_object_set_new(summary, "global_step", json_integer(step));
            rc = cli_print_summary(&run, summary, cli_flag_value(argc, argv, "--summary_json="));
        } else {
            json_decref(summary);
        }
    }
    cli_run_close(&run);
    return rc;
}

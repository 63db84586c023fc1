/* predict.c — `tpuloop predict`: Estimator.predict on a checkpoint. The
 * estimator is built from the configuration as `train` builds it (job.c),
 * loads the latest valid checkpoint of model_dir or the one --checkpoint
 * names, predicts every example of the test split, and writes the file
 * `train --predict` writes (CSV for a .csv path, else JSON Lines; default
 * predictions.jsonl), then one JSON summary line. */
#include <stdio.h>

#include "cli.h"

int cli_predict(int argc, char **argv)
{
    static const char *const allowed[] = {"--checkpoint=", "--predictions_out=", "--summary_json=", NULL};
    bool seen[3] = {false, false, false};
    cli_job job;
    char used[4096];
    int64_t step;
    int rc = cli_job_config(&job, argc, argv, allowed, seen, 3);
    if (rc == 0 && !job.r->predict_batch_size.set)
        rc = cli_usage_error("predict needs predict_batch_size in the configuration (e.g. --predict_batch_size=1000)");
    if (rc == 0)
        rc = cli_job_build(&job, false);
    if (rc == 0)
        rc = cli_restore(&job, cli_flag_value(argc, argv, "--checkpoint="), true, used, sizeof used, &step);
    if (rc == 0) {
        const char *out = cli_flag_value(argc, argv, "--predictions_out=");
        json_t *summary = json_object();
        json_object_set_new(summary, "global_step", json_integer(step));
        json_object_set_new(summary, "checkpoint", json_string(used));
        json_object_set_new(summary, "model_dir", job.r->model_dir ? json_string(job.r->model_dir) : json_null());
        rc = cli_predict_to(&job, out ? out : "predictions.jsonl", summary, &step);
        if (rc == 0) {
            /* The step the parameters have, whichever file they came from. */
            json_object_set_new(summary, "global_step", json_integer(step));
            rc = cli_print_summary(&job, summary, cli_flag_value(argc, argv, "--summary_json="));
        } else {
            json_decref(summary);
        }
    }
    cli_job_close(&job);
    return rc;
}

/* summaries.c — TensorBoard summaries of the estimator (spec
 * tpu_estimator.md §3.3): training events in model_dir — "loss" and a
 * SessionLog START per train() as SummarySaverHook writes them, a SessionLog
 * CHECKPOINT per save as CheckpointSaverHook does, "global_step/sec" and
 * "examples/sec" as ExamplesPerSecondHook does — and every evaluation metric in model_dir/eval
 * at the evaluated step, as Estimator.evaluate does. Host thread only, at
 * loop boundaries. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "estimator_int.h"

tl_status tl_est_summaries_open(tl_estimator *est)
{
    if (est->model_dir == NULL || est->host > 0) /* host 0 writes model_dir */
        return TL_OK;
    tl_status st = TL_OK;
    if (est->summary == NULL)
        st = tl_summary_writer_create(est->model_dir, &est->summary);
    /* SummarySaverHook's START, once per train(), at the step of its first
     * summary: the global step after the first step. TensorBoard drops what
     * it read of this run at that step and after — the events a crashed run
     * wrote past the checkpoint this one resumes from — and keeps those at
     * the restored step, which describe the restored state. (TensorFlow
     * writes it after the first session.run, which on a TPU is a whole
     * device loop; the step after the restored one purges exactly the
     * orphans whatever iterations_per_loop is.) */
    if (st == TL_OK)
        st = tl_summary_session_log(est->summary, est->global_step + 1, TL_SESSION_START, NULL, NULL, TL_SUMMARY_NOW);
    return st;
}

tl_status tl_est_summaries_checkpoint(tl_estimator *est)
{
    if (est->summary == NULL)
        return TL_OK;
    /* CheckpointSaverHook's: the save path, not the file (the step is the
     * event's). */
    char *path = tl_asprintf("%s/" TL_CKPT_PREFIX, est->model_dir);
    if (path == NULL)
        return tl_error_oom();
    tl_status st = tl_summary_session_log(est->summary, est->global_step, TL_SESSION_CHECKPOINT, path, NULL,
                                          TL_SUMMARY_NOW);
    tl_free(path);
    return st;
}

tl_summary_writer *tl_estimator_summary_writer(tl_estimator *est)
{
    return est->summary;
}

/* SummarySaverHook is evaluated at loop boundaries: it writes on the first
 * loop of each train() (its timer's first trigger) and then once the global
 * step reaches the next multiple of save_summary_steps, on the post-loop step
 * (the schedule's rule for checkpoints, without TensorFlow's stale pre-check).
 * Null or 0 means no SummarySaverHook, and no rate summaries either. */
tl_status tl_est_summaries_after_loop(tl_estimator *est, int64_t prev_step, bool first_loop, double loss,
                                      double steps_per_sec, double examples_per_sec)
{
    const tl_opt_int every = est->rc.save_summary_steps;
    if (est->summary == NULL || !every.set || every.value <= 0)
        return TL_OK;
    int64_t gs = est->global_step;
    tl_status st = TL_OK;
    if (first_loop || gs / every.value > prev_step / every.value)
        st = tl_summary_scalar(est->summary, "loss", gs, (float)loss, TL_SUMMARY_NOW);
    if (st == TL_OK && steps_per_sec >= 0) {
        const char *tags[] = {"global_step/sec", "examples/sec"};
        const float values[] = {(float)steps_per_sec, (float)examples_per_sec};
        st = tl_summary_scalars(est->summary, gs, TL_SUMMARY_NOW, 2, tags, values);
    }
    return st;
}

tl_status tl_est_summaries_flush(tl_estimator *est)
{
    return est->summary != NULL ? tl_summary_flush(est->summary) : TL_OK;
}

tl_status tl_est_summaries_eval(tl_estimator *est, const tl_eval_result *res)
{
    if (est->model_dir == NULL || est->host > 0)
        return TL_OK;
    tl_status st;
    if (est->eval_summary == NULL) {
        char *dir = tl_asprintf("%s/eval", est->model_dir);
        if (dir == NULL)
            return tl_error_oom();
        st = tl_summary_writer_create(dir, &est->eval_summary);
        tl_free(dir);
        if (st != TL_OK)
            return st;
    }
    /* Every metric of the result, in one event at the evaluated step
     * (Estimator's _write_dict_to_summary; it leaves out global_step). */
    const char *tags[3 + TL_MAX_METRICS];
    float values[3 + TL_MAX_METRICS];
    size_t n = 0;
    tags[n] = "loss";
    values[n++] = (float)res->loss;
    if (!isnan(res->accuracy)) { /* NaN: the EVAL spec has no logits */
        tags[n] = "accuracy";
        values[n++] = (float)res->accuracy;
    }
    if (res->has_auc) {
        tags[n] = "auc";
        values[n++] = (float)res->auc;
    }
    for (int i = 0; i < res->num_metrics; i++) {
        bool dup = false; /* metric_fn's own "accuracy" or "auc" is written once, as computed above */
        for (size_t k = 0; k < n && !dup; k++)
            dup = strcmp(tags[k], res->metrics[i].name) == 0;
        if (!dup) {
            tags[n] = res->metrics[i].name;
            values[n++] = (float)res->metrics[i].value;
        }
    }
    st = tl_summary_scalars(est->eval_summary, res->global_step, TL_SUMMARY_NOW, n, tags, values);
    if (st == TL_OK)
        st = tl_summary_flush(est->eval_summary);
    return st;
}

void tl_est_summaries_close(tl_estimator *est)
{
    tl_summary_writer *ws[2] = {est->summary, est->eval_summary};
    for (int i = 0; i < 2; i++)
        if (ws[i] != NULL && tl_summary_writer_destroy(ws[i]) != TL_OK)
            tl_log(TL_LOG_WARN, "closing the event file: %s", tl_last_error());
    est->summary = est->eval_summary = NULL;
}

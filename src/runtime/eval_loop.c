/* eval_loop.c — the host side of evaluate (spec tpu_estimator.md §7: one
 * device loop of eval_steps, then host_call and the metric updates in step
 * order, the metric values once, the AUC of a binary model) and predict (§8:
 * padded last batch, the stop batch, one row per example in input order). */
#include <math.h>
#include <string.h>

#include "estimator_int.h"

/* Concatenates the replicas' scored examples step by step in replica order
 * (the order of §7's outfeed) and computes the AUC. */
static tl_status gather_auc(tl_estimator *est, int64_t steps, tl_eval_result *res)
{
    int64_t b = est->eval.batch, n = steps * b * est->R;
    tl_scored *all = tl_malloc((size_t)n * sizeof *all);
    if (all == NULL)
        return tl_error_oom();
    for (int64_t s = 0; s < steps; s++)
        for (int r = 0; r < est->R; r++)
            memcpy(all + (s * est->R + r) * b, est->workers[r].scored + s * b, (size_t)b * sizeof *all);
    res->has_auc = tl_roc_auc(all, n, &res->auc);
    tl_free(all);
    return TL_OK;
}

tl_status tl_estimator_evaluate(tl_estimator *est, const tl_labeled_data *data, tl_eval_result *res)
{
    memset(res, 0, sizeof *res);
    const tl_run_config *rc = &est->rc;
    if (!rc->eval_batch_size.set)
        return tl_error(TL_EINVAL, "eval_batch_size in TPUEstimator constructor cannot be `None` if .evaluate is "
                                   "running on TPU. (set eval_batch_size)");
    if (!rc->eval_steps.set)
        return tl_error(TL_EINVAL, "Evaluate `steps` must be set on TPU. Cannot be `None`. (set eval_steps)");
    tl_status st = tl_est_prepare(est, data);
    if (st != TL_OK)
        return st;
    int64_t G = est->eval.batch * est->R, steps = rc->eval_steps.value;
    if (data->num_examples < steps * G)
        return tl_error(TL_EINVAL, "evaluation needs %lld batches of %lld examples but the data has %lld examples "
                                   "(%lld whole batches)",
                        (long long)steps, (long long)G, (long long)data->num_examples,
                        (long long)(data->num_examples / G));
    est->data = data;
    int64_t C = est->eval.g->nodes[est->eval.logits].shape[1];
    int64_t per_replica = steps * est->eval.batch;
    for (int r = 0; C == 2 && r < est->R; r++) {
        tl_worker *w = &est->workers[r];
        if (w->scored_cap < per_replica) {
            tl_scored *p = tl_realloc(w->scored, (size_t)per_replica * sizeof *p);
            if (p == NULL)
                return tl_error_oom();
            w->scored = p;
            w->scored_cap = per_replica;
        }
    }
    /* Every step's outfeed stays in the area until the loop ends (the host
     * visits only then), so it is sized for all of them now. */
    const tl_outfeed_plan *pl = &est->eval.out;
    if ((st = tl_outfeed_reserve(est, steps * pl->record)) != TL_OK)
        return st;
    if ((st = tl_infeed_start(est, CMD_EVAL, 0, steps)) != TL_OK)
        return st;
    st = tl_est_device_loop(est, CMD_EVAL, 0, steps);
    tl_infeed_stop(est);
    if (st != TL_OK)
        return st;
    /* §7: per step, the outfeed thread's host_call and metric update ops in
     * step order; the metric values once at the end. */
    for (int64_t k = 0; k < steps; k++) {
        const float *record = est->outfeed + k * pl->record;
        if ((st = tl_outfeed_host_call(est, pl, record, est->global_step)) != TL_OK ||
            (st = tl_outfeed_metric_update(est, pl, record, k)) != TL_OK)
            return st;
    }
    if ((st = tl_metric_results(&est->opt, res->metrics, &res->num_metrics)) != TL_OK) {
        memset(res, 0, sizeof *res);
        return st;
    }
    res->auc = NAN;
    if (C == 2 && (st = gather_auc(est, steps, res)) != TL_OK)
        return st;
    double sum = 0;
    int64_t correct = 0;
    for (int r = 0; r < est->R; r++) { /* replica order */
        sum += est->workers[r].eval_loss_sum;
        correct += est->workers[r].eval_correct;
    }
    res->global_step = est->global_step;
    res->steps = steps;
    res->examples = steps * G;
    res->loss = sum / (double)(steps * est->R);
    res->loss_replica0 = est->workers[0].eval_loss_sum / (double)steps;
    res->accuracy = (double)correct / (double)res->examples;
    /* Estimator writes every metric into model_dir/eval at the evaluated
     * step, for TensorBoard beside the training curves. */
    return tl_est_summaries_eval(est, res);
}

tl_status tl_estimator_predict(tl_estimator *est, const tl_labeled_data *data, tl_predict_result *res)
{
    memset(res, 0, sizeof *res);
    if (!est->rc.predict_batch_size.set)
        return tl_error(TL_EINVAL, "predict_batch_size in TPUEstimator constructor cannot be `None` if .predict is "
                                   "running on TPU. (set predict_batch_size)");
    tl_status st = tl_est_prepare(est, data);
    if (st != TL_OK)
        return st;
    if (!est->have_predict)
        return tl_error(TL_EINVAL, "predict_batch_size was set after the model was first traced; set it in the "
                                   "configuration the estimator was created with");
    int64_t G = est->predict.batch * est->R, n = data->num_examples;
    int64_t batches = (n + G - 1) / G;
    float *out = tl_alloc_array((size_t)(n ? n : 1) * (size_t)est->pred_width, sizeof(float));
    if (out == NULL)
        return tl_error_oom();
    /* No examples: no first batch to repeat as the stop batch, so nothing
     * runs and the result is empty. */
    if (n > 0) {
        est->data = data;
        est->pred_out = out;
        if ((st = tl_infeed_start(est, CMD_PREDICT, 0, batches)) == TL_OK) {
            st = tl_est_device_loop(est, CMD_PREDICT, 0, batches + 1);
            tl_infeed_stop(est);
        }
        est->pred_out = NULL;
        if (st != TL_OK) {
            tl_free(out);
            return st;
        }
    }
    res->values = out;
    res->num_examples = n;
    res->width = est->pred_width;
    res->device_steps = n > 0 ? est->workers[0].steps_run : 0;
    res->padded_rows = batches * G - n;
    res->global_step = est->global_step;
    return TL_OK;
}

void tl_predict_result_free(tl_predict_result *res)
{
    if (res == NULL)
        return;
    tl_free(res->values);
    res->values = NULL;
}

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

static tl_status evaluate_impl(tl_estimator *est, const tl_labeled_data *data, const tl_input *in,
                               tl_eval_result *res)
{
    memset(res, 0, sizeof *res);
    const tl_run_config *rc = &est->rc;
    if (!rc->eval_batch_size.set)
        return tl_error(TL_EINVAL, "eval_batch_size in TPUEstimator constructor cannot be `None` if .evaluate is "
                                   "running on TPU. (set eval_batch_size)");
    if (!rc->eval_steps.set)
        return tl_error(TL_EINVAL, "Evaluate `steps` must be set on TPU. Cannot be `None`. (set eval_steps)");
    tl_status st = data != NULL ? tl_est_prepare(est, data) : tl_est_input_prepare(est, TL_MODE_EVAL, in);
    if (st != TL_OK)
        return st;
    if (!est->have_eval && (st = tl_est_plan_error(est, TL_MODE_EVAL)) != TL_OK)
        return st;
    if (!est->have_eval)
        return tl_error(TL_EINVAL, "eval_batch_size was set after the model was first traced; set it in the "
                                   "configuration the estimator was created with");
    /* Examples per step, all replicas (BROADCAST's share one batch). */
    int64_t G = est->infeed.plan[TL_MODE_EVAL]->global_batch_size, steps = rc->eval_steps.value;
    if (data != NULL && data->num_examples < steps * G)
        return tl_error(TL_EINVAL, "evaluation needs %lld batches of %lld examples but the data has %lld examples "
                                   "(%lld whole batches)",
                        (long long)steps, (long long)G, (long long)data->num_examples,
                        (long long)(data->num_examples / G));
    est->data = data;
    int64_t C = est->eval.g->nodes[est->eval.logits].shape[1];
    int64_t per_replica = steps * est->eval.batch;
    for (int r = 0; C <= 2 && r < est->R; r++) {
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
    if (in != NULL && (st = tl_infeed_open_datasets(est, TL_MODE_EVAL, in)) != TL_OK)
        return st;
    if ((st = tl_infeed_start(est, CMD_EVAL, 0, steps)) != TL_OK) {
        tl_infeed_close_datasets(est);
        return st;
    }
    st = tl_est_device_loop(est, CMD_EVAL, 0, steps);
    tl_status ist = tl_infeed_stop(est);
    tl_infeed_close_datasets(est);
    if (st == TL_OK)
        st = ist;
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
    if (C <= 2 && (st = gather_auc(est, steps, res)) != TL_OK)
        return st;
    double sum = 0;
    int64_t correct = 0;
    for (int r = 0; r < est->R; r++) { /* replica order */
        sum += est->workers[r].eval_loss_sum;
        correct += est->workers[r].eval_correct;
    }
    res->global_step = est->global_step;
    res->steps = steps;
    res->examples = steps * est->eval.batch * est->R;
    res->loss = sum / (double)(steps * est->R);
    res->loss_replica0 = est->workers[0].eval_loss_sum / (double)steps;
    res->accuracy = (double)correct / (double)res->examples;
    /* Estimator writes every metric into model_dir/eval at the evaluated
     * step, for TensorBoard beside the training curves. */
    return tl_est_summaries_eval(est, res);
}

tl_status tl_estimator_evaluate(tl_estimator *est, const tl_labeled_data *data, tl_eval_result *res)
{
    if (data == NULL) {
        memset(res, 0, sizeof *res);
        return tl_error(TL_EINVAL, "tl_estimator_evaluate: data is NULL");
    }
    return evaluate_impl(est, data, NULL, res);
}

tl_status tl_estimator_evaluate_input(tl_estimator *est, const tl_input *in, tl_eval_result *res)
{
    if (in == NULL) {
        memset(res, 0, sizeof *res);
        return tl_error(TL_EINVAL, "tl_estimator_evaluate_input: in is NULL");
    }
    return evaluate_impl(est, NULL, in, res);
}

/* Room for n steps of predictions (host thread, between loops). */
static tl_status reserve_predictions(tl_estimator *est, int64_t n)
{
    if (n <= est->pred_cap)
        return TL_OK;
    int64_t per = est->R * est->predict.batch * est->pred_width;
    float *area = tl_realloc(est->pred_area, (size_t)(n * per) * sizeof *area);
    if (area == NULL)
        return tl_error_oom();
    est->pred_area = area;
    int64_t *rows = tl_realloc(est->pred_rows, (size_t)(n * est->R) * sizeof *rows);
    if (rows == NULL)
        return tl_error_oom();
    est->pred_rows = rows;
    est->pred_cap = n;
    return TL_OK;
}

/* §8 in device loops of iterations_per_loop steps: after each, the host
 * appends the real rows in (step, replica) order — the input order — and
 * stops after the loop that ran the stop batch. */
static tl_status predict_impl(tl_estimator *est, const tl_labeled_data *data, const tl_input *in,
                              tl_predict_result *res)
{
    memset(res, 0, sizeof *res);
    if (!est->rc.predict_batch_size.set)
        return tl_error(TL_EINVAL, "predict_batch_size in TPUEstimator constructor cannot be `None` if .predict is "
                                   "running on TPU. (set predict_batch_size)");
    tl_status st = data != NULL ? tl_est_prepare(est, data) : tl_est_input_prepare(est, TL_MODE_PREDICT, in);
    if (st != TL_OK)
        return st;
    if (!est->have_predict && (st = tl_est_plan_error(est, TL_MODE_PREDICT)) != TL_OK)
        return st;
    if (!est->have_predict)
        return tl_error(TL_EINVAL, "predict_batch_size was set after the model was first traced; set it in the "
                                   "configuration the estimator was created with");
    /* No examples in memory: no first batch to repeat as the stop batch, so
     * nothing runs and the result is empty. */
    if (data != NULL && data->num_examples == 0) {
        res->values = tl_malloc(sizeof(float));
        res->width = est->pred_width;
        res->global_step = est->global_step;
        return res->values != NULL ? TL_OK : tl_error_oom();
    }
    const tl_ipl *ipl = &est->rc.tpu.iterations_per_loop;
    int64_t n = ipl->unit == TL_IPL_COUNT && ipl->value > 0 ? ipl->value : 100;
    if ((st = reserve_predictions(est, n)) != TL_OK)
        return st;
    est->data = data;
    if (in != NULL && (st = tl_infeed_open_datasets(est, TL_MODE_PREDICT, in)) != TL_OK)
        return st;
    if ((st = tl_infeed_start(est, CMD_PREDICT, 0, -1)) != TL_OK) {
        tl_infeed_close_datasets(est);
        return st;
    }
    int64_t b = est->predict.batch, W = est->pred_width, cap = 0, len = 0, steps = 0, padded = 0;
    float *out = NULL;
    for (bool done = false; !done && st == TL_OK;) {
        if ((st = tl_est_device_loop(est, CMD_PREDICT, steps, n)) != TL_OK)
            break;
        const tl_worker *w0 = &est->workers[0];
        int64_t ran = w0->steps_run;
        bool bc = est->infeed.plan[TL_MODE_PREDICT]->input_mode == TL_BROADCAST;
        for (int64_t i = 0; i < ran && st == TL_OK; i++) {
            bool stop_step = w0->pred_stopped && i == ran - 1;
            for (int r = 0; r < est->R; r++) {
                int64_t rows = est->pred_rows[i * est->R + r];
                if (!stop_step && (!bc || r == 0))
                    padded += b - rows;
                if (len + rows > cap) {
                    int64_t ncap = cap ? cap : 1024;
                    while (ncap < len + rows)
                        ncap *= 2;
                    float *p = tl_realloc(out, (size_t)(ncap * W) * sizeof *p);
                    if (p == NULL) {
                        st = tl_error_oom();
                        break;
                    }
                    out = p;
                    cap = ncap;
                }
                memcpy(out + len * W, est->pred_area + (i * est->R + r) * b * W, (size_t)(rows * W) * sizeof *out);
                len += rows;
            }
        }
        steps += ran;
        done = w0->pred_stopped;
    }
    tl_status ist = tl_infeed_stop(est);
    tl_infeed_close_datasets(est);
    if (st == TL_OK)
        st = ist;
    if (st == TL_OK && out == NULL && (out = tl_malloc(sizeof(float))) == NULL)
        st = tl_error_oom();
    if (st != TL_OK) {
        tl_free(out);
        return st;
    }
    res->values = out;
    res->num_examples = len;
    res->width = W;
    res->device_steps = steps;
    res->padded_rows = padded;
    res->global_step = est->global_step;
    return TL_OK;
}

tl_status tl_estimator_predict(tl_estimator *est, const tl_labeled_data *data, tl_predict_result *res)
{
    if (data == NULL) {
        memset(res, 0, sizeof *res);
        return tl_error(TL_EINVAL, "tl_estimator_predict: data is NULL");
    }
    return predict_impl(est, data, NULL, res);
}

tl_status tl_estimator_predict_input(tl_estimator *est, const tl_input *in, tl_predict_result *res)
{
    if (in == NULL) {
        memset(res, 0, sizeof *res);
        return tl_error(TL_EINVAL, "tl_estimator_predict_input: in is NULL");
    }
    return predict_impl(est, NULL, in, res);
}

void tl_predict_result_free(tl_predict_result *res)
{
    if (res == NULL)
        return;
    tl_free(res->values);
    res->values = NULL;
}

/* eval_loop.c — the host side of evaluate (spec tpu_estimator.md §7: one
 * device loop of eval_steps, then host_call and the metric updates in step
 * order, the metric values once, the AUC of a binary model) and predict (§8:
 * padded last batch, the stop batch, one row per example in input order). */
#include <math.h>
#include <string.h>

#include "estimator_int.h"

/* An error every host meets alike: it ends no other host's call. */
#define SAME(st) tl_est_hosts_same(est, (st))

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

/* The other hosts' replicas' scored examples (`per` each) into their
 * workers' arrays, merged as hosts.c merges. */
static tl_status merge_scored(tl_estimator *est, int64_t per)
{
    _Static_assert(sizeof(tl_scored) % sizeof(int64_t) == 0, "merged in int64 words");
    if (est->H == 1 || per == 0)
        return TL_OK;
    tl_scored *all = tl_calloc((size_t)(est->R * per), sizeof *all);
    if (all == NULL)
        return tl_error_oom();
    for (int r = est->first; r < est->first + est->Rl; r++)
        memcpy(all + r * per, est->workers[r].scored, (size_t)per * sizeof *all);
    tl_status st = tl_est_hosts_merge(est, all, est->R * per * (int64_t)(sizeof *all / sizeof(int64_t)));
    for (int r = 0; r < est->R && st == TL_OK; r++)
        if (!tl_est_local_replica(est, r))
            memcpy(est->workers[r].scored, all + r * per, (size_t)per * sizeof *all);
    tl_free(all);
    return st;
}

/* Room for n scored examples in replica 0's array (host, between loops). */
static tl_status reserve_scored(tl_worker *w, int64_t n)
{
    if (w->scored_cap >= n)
        return TL_OK;
    tl_scored *p = tl_realloc(w->scored, (size_t)n * sizeof *p);
    if (p == NULL)
        return tl_error_oom();
    w->scored = p;
    w->scored_cap = n;
    return TL_OK;
}

/* What replica 0 counted in a loop, added to the call's totals; its
 * accumulators are cleared for the next (the short batch's, on the host). */
typedef struct cpu_totals {
    double loss_sum;
    int64_t correct, examples;
    tl_scored *scored; /* (len) every evaluated example, in order */
    int64_t len, cap;
} cpu_totals;

static tl_status take_counts(tl_worker *w, cpu_totals *t, int64_t examples)
{
    t->loss_sum += w->eval_loss_sum;
    t->correct += w->eval_correct;
    t->examples += examples;
    if (w->scored_len > 0) {
        if (t->len + w->scored_len > t->cap) {
            int64_t cap = t->cap ? 2 * t->cap : 1024;
            while (cap < t->len + w->scored_len)
                cap *= 2;
            tl_scored *p = tl_realloc(t->scored, (size_t)cap * sizeof *p);
            if (p == NULL)
                return tl_error_oom();
            t->scored = p;
            t->cap = cap;
        }
        memcpy(t->scored + t->len, w->scored, (size_t)w->scored_len * sizeof *t->scored);
        t->len += w->scored_len;
    }
    w->eval_loss_sum = 0;
    w->eval_correct = 0;
    w->scored_len = 0;
    return TL_OK;
}

/* The classes of the EVAL spec's logits; 0 without logits (then no
 * accuracy and no AUC). */
static int64_t eval_classes(const tl_estimator *est)
{
    return est->eval.logits == TL_T_INVALID ? 0 : est->eval.g->nodes[est->eval.logits].shape[1];
}

/*
 * The plain Estimator's evaluate (use_tpu false, or eval_on_tpu false):
 * replica 0 alone runs the global batch, in loops of iterations_per_loop
 * steps (100 in time mode; the bits do not depend on it), until `steps`
 * batches or the end of the input, whichever comes first. A last batch that
 * comes short is evaluated at its own size, as TensorFlow's dynamic-batch
 * graph evaluates it: its mean loss counts as one batch's, as
 * tf.metrics.mean over the batches' losses counts it.
 */
static tl_status evaluate_cpu(tl_estimator *est, const tl_labeled_data *data, const tl_input *in, int64_t steps,
                              tl_eval_result *res)
{
    const tl_mode_prog *m = &est->eval;
    tl_worker *w = &est->workers[0];
    int64_t b = m->batch, C = eval_classes(est);
    tl_ipl ipl = est->rc.tpu.iterations_per_loop;
    int64_t chunk = ipl.unit == TL_IPL_COUNT ? ipl.value : 100;
    if (est->part_features == NULL) {
        est->part_features = tl_malloc((size_t)(b * est->D) * sizeof(float));
        est->part_labels = tl_malloc((size_t)b * sizeof(int32_t));
        if (est->part_features == NULL || est->part_labels == NULL)
            return tl_error_oom();
    }
    tl_status st = TL_OK;
    if (in != NULL && (st = tl_infeed_open_datasets(est, TL_MODE_EVAL, in)) != TL_OK)
        return st;
    if ((st = tl_infeed_start(est, CMD_EVAL, data, 0, steps == INT64_MAX ? -1 : steps)) != TL_OK) {
        tl_infeed_close_datasets(est, TL_MODE_EVAL);
        return st;
    }
    cpu_totals t = {0};
    int64_t k = 0;
    while (k < steps && st == TL_OK) {
        int64_t n = steps - k < chunk ? steps - k : chunk;
        const tl_outfeed_plan *pl = &m->out;
        est->part_rows = 0;
        if ((st = tl_outfeed_reserve(est, n * pl->record)) != TL_OK ||
            (C >= 1 && C <= 2 && (st = reserve_scored(w, n * b)) != TL_OK) ||
            (st = tl_est_device_loop(est, CMD_EVAL, k, n)) != TL_OK)
            break;
        int64_t ran = w->steps_run;
        bool ended = w->ended;
        for (int64_t i = 0; i < ran && st == TL_OK; i++) {
            const float *record = est->outfeed + i * pl->record;
            if ((st = tl_outfeed_host_call(est, pl, record, est->global_step)) == TL_OK)
                st = tl_outfeed_metric_update(est, pl, record, k + i);
        }
        if (st == TL_OK)
            st = take_counts(w, &t, ran * b);
        k += ran;
        if (st == TL_OK && ended && est->part_rows > 0) {
            int64_t r = est->part_rows;
            if ((st = tl_est_eval_partial(est, k)) == TL_OK &&
                (st = tl_outfeed_host_call(est, &est->eval_part.out, est->outfeed, est->global_step)) == TL_OK &&
                (st = tl_outfeed_metric_update(est, &est->eval_part.out, est->outfeed, k)) == TL_OK)
                st = take_counts(w, &t, r);
            k++;
        }
        if (ended)
            break;
    }
    tl_status ist = tl_infeed_stop(est);
    tl_infeed_close_datasets(est, TL_MODE_EVAL);
    if (st == TL_OK)
        st = ist;
    if (st == TL_OK && k == 0)
        st = tl_error(TL_EINVAL, "evaluation: the input has no examples");
    if (st == TL_OK)
        st = tl_metric_results(&est->opt, res->metrics, &res->num_metrics);
    if (st != TL_OK) {
        tl_free(t.scored);
        memset(res, 0, sizeof *res);
        return st;
    }
    res->auc = NAN;
    if (C >= 1 && C <= 2)
        res->has_auc = tl_roc_auc(t.scored, t.len, &res->auc);
    tl_free(t.scored);
    res->global_step = est->global_step;
    res->steps = k;
    res->examples = t.examples;
    res->loss = t.loss_sum / (double)k;
    res->loss_replica0 = res->loss;
    res->accuracy = C > 0 ? (double)t.correct / (double)t.examples : NAN;
    return tl_est_summaries_eval(est, res);
}

static tl_status evaluate_run(tl_estimator *est, const tl_labeled_data *data, const tl_input *in,
                              tl_eval_result *res)
{
    memset(res, 0, sizeof *res);
    const tl_run_config *rc = &est->rc;
    if (!rc->eval_batch_size.set)
        return SAME(tl_error(TL_EINVAL, "eval_batch_size in TPUEstimator constructor cannot be `None` if .evaluate is "
                                   "running on TPU. (set eval_batch_size)"));
    /* The plain Estimator's path (use_tpu false, or eval_on_tpu false off
     * the one-core context) needs no eval_steps: it reads to the end. */
    bool cpu = !rc->use_tpu || (!rc->eval_on_tpu && !tl_topology_one_core(est->topo));
    if (!rc->eval_steps.set && !cpu)
        return SAME(tl_error(TL_EINVAL, "Evaluate `steps` must be set on TPU. Cannot be `None`. (set eval_steps)"));
    tl_status st = data != NULL ? tl_est_prepare(est, data) : tl_est_input_prepare(est, TL_MODE_EVAL, in);
    if (st != TL_OK)
        return st;
    if (est->have_eval && est->eval_cpu)
        return evaluate_cpu(est, data, in, rc->eval_steps.set ? rc->eval_steps.value : INT64_MAX, res);
    if (!est->have_eval && (st = tl_est_plan_error(est, TL_MODE_EVAL)) != TL_OK)
        return SAME(st);
    if (!est->have_eval)
        return SAME(tl_error(TL_EINVAL, "eval_batch_size was set after the model was first traced; set it in the "
                                        "configuration the estimator was created with"));
    /* Examples per step, all replicas (BROADCAST's share one batch). */
    int64_t G = est->infeed.plan[TL_MODE_EVAL]->global_batch_size, steps = rc->eval_steps.value;
    if (data != NULL && data->num_examples < steps * G)
        return SAME(tl_error(TL_EINVAL, "evaluation needs %lld batches of %lld examples but the data has %lld "
                                        "examples (%lld whole batches)",
                             (long long)steps, (long long)G, (long long)data->num_examples,
                             (long long)(data->num_examples / G)));
    int64_t C = eval_classes(est);
    int64_t per_replica = steps * est->eval.batch;
    for (int r = 0; C >= 1 && C <= 2 && r < est->R; r++) {
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
    int64_t words = (steps * pl->record + 1) / 2;
    if (est->H > 1 && words > 0) /* merged after the loop: zeros where other hosts write */
        memset(est->outfeed, 0, (size_t)words * 2 * sizeof *est->outfeed);
    if (in != NULL && (st = tl_infeed_open_datasets(est, TL_MODE_EVAL, in)) != TL_OK)
        return st;
    if ((st = tl_infeed_start(est, CMD_EVAL, data, 0, steps)) != TL_OK) {
        tl_infeed_close_datasets(est, TL_MODE_EVAL);
        return st;
    }
    st = tl_est_device_loop(est, CMD_EVAL, 0, steps);
    tl_status ist = tl_infeed_stop(est);
    tl_infeed_close_datasets(est, TL_MODE_EVAL);
    if (st == TL_OK)
        st = ist;
    if (st == TL_OK)
        st = tl_est_hosts_merge(est, est->outfeed, words);
    if (st == TL_OK && C >= 1 && C <= 2)
        st = merge_scored(est, per_replica);
    if (st != TL_OK)
        return st;
    /* §7: per step, the outfeed thread's host_call and metric update ops in
     * step order; the metric values once at the end. Over several hosts
     * every host gets every replica's tensors: host_call runs on host 0,
     * the metrics on every host (the same values). */
    for (int64_t k = 0; k < steps; k++) {
        const float *record = est->outfeed + k * pl->record;
        if ((est->host == 0 && (st = tl_outfeed_host_call(est, pl, record, est->global_step)) != TL_OK) ||
            (st = tl_outfeed_metric_update(est, pl, record, k)) != TL_OK)
            return st;
    }
    if ((st = tl_metric_results(&est->opt, res->metrics, &res->num_metrics)) != TL_OK) {
        memset(res, 0, sizeof *res);
        return st;
    }
    res->auc = NAN;
    if (C >= 1 && C <= 2 && (st = gather_auc(est, steps, res)) != TL_OK)
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
    res->accuracy = C > 0 ? (double)correct / (double)res->examples : NAN;
    /* Estimator writes every metric into model_dir/eval at the evaluated
     * step, for TensorBoard beside the training curves. */
    return tl_est_summaries_eval(est, res);
}

/* An error on one host ends the call on every host (hosts.c). */
static tl_status evaluate_impl(tl_estimator *est, const tl_labeled_data *data, const tl_input *in,
                               tl_eval_result *res)
{
    return tl_est_hosts_fail(est, evaluate_run(est, data, in, res));
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
    /* + 1: whole int64 words, as hosts merge it */
    float *area = tl_realloc(est->pred_area, (size_t)(n * per + 1) * sizeof *area);
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
static tl_status predict_run(tl_estimator *est, const tl_labeled_data *data, const tl_input *in,
                             tl_predict_result *res)
{
    memset(res, 0, sizeof *res);
    if (!est->rc.predict_batch_size.set)
        return SAME(tl_error(TL_EINVAL, "predict_batch_size in TPUEstimator constructor cannot be `None` if .predict is "
                                   "running on TPU. (set predict_batch_size)"));
    tl_status st = data != NULL ? tl_est_prepare(est, data) : tl_est_input_prepare(est, TL_MODE_PREDICT, in);
    if (st != TL_OK)
        return st;
    if (!est->have_predict && (st = tl_est_plan_error(est, TL_MODE_PREDICT)) != TL_OK)
        return SAME(st);
    if (!est->have_predict)
        return SAME(tl_error(TL_EINVAL, "predict_batch_size was set after the model was first traced; set it in "
                                        "the configuration the estimator was created with"));
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
    if (in != NULL && (st = tl_infeed_open_datasets(est, TL_MODE_PREDICT, in)) != TL_OK)
        return st;
    if ((st = tl_infeed_start(est, CMD_PREDICT, data, 0, -1)) != TL_OK) {
        tl_infeed_close_datasets(est, TL_MODE_PREDICT);
        return st;
    }
    int64_t b = est->predict.batch, W = est->pred_width, cap = 0, len = 0, steps = 0, padded = 0;
    float *out = NULL;
    int64_t area_words = (n * est->R * b * W + 1) / 2;
    for (bool done = false; !done && st == TL_OK;) {
        if (est->H > 1) { /* merged after the loop: zeros where other hosts write */
            memset(est->pred_rows, 0, (size_t)(n * est->R) * sizeof *est->pred_rows);
            memset(est->pred_area, 0, (size_t)area_words * 2 * sizeof *est->pred_area);
        }
        if ((st = tl_est_device_loop(est, CMD_PREDICT, steps, n)) != TL_OK ||
            (st = tl_est_hosts_merge(est, est->pred_rows, n * est->R)) != TL_OK ||
            (st = tl_est_hosts_merge(est, est->pred_area, area_words)) != TL_OK)
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
    tl_infeed_close_datasets(est, TL_MODE_PREDICT);
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

/* An error on one host ends the call on every host (hosts.c). */
static tl_status predict_impl(tl_estimator *est, const tl_labeled_data *data, const tl_input *in,
                              tl_predict_result *res)
{
    return tl_est_hosts_fail(est, predict_run(est, data, in, res));
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

/* eval_metrics.c — evaluation metrics beyond loss and accuracy: the exact
 * ROC AUC of a binary classifier, and the checks on what a user's metric_fn
 * (spec tpu_estimator.md §7) returns. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimator_int.h"

static int by_score(const void *a, const void *b)
{
    double x = ((const tl_scored *)a)->score, y = ((const tl_scored *)b)->score;
    return (x > y) - (x < y);
}

bool tl_roc_auc(tl_scored *items, int64_t n, double *auc)
{
    *auc = NAN;
    int64_t pos = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(items[i].score))
            return false;
        pos += items[i].label == 1;
    }
    int64_t neg = n - pos;
    if (pos == 0 || neg == 0)
        return false;
    qsort(items, (size_t)n, sizeof *items, by_score);
    /* Ranks are 1-based; a run of equal scores i .. j-1 shares the average
     * rank (i + 1 + j) / 2, which is what makes ties count one half. */
    double pos_rank_sum = 0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i + 1, run_pos = items[i].label == 1;
        while (j < n && items[j].score == items[i].score)
            run_pos += items[j++].label == 1;
        pos_rank_sum += (double)run_pos * 0.5 * (double)(i + 1 + j);
        i = j;
    }
    double u = pos_rank_sum - 0.5 * (double)pos * (double)(pos + 1);
    *auc = u / ((double)pos * (double)neg);
    return true;
}

tl_status tl_metric_results(const tl_estimator_options *o, tl_metric *out, int *n)
{
    *n = 0;
    if (o->metric_result == NULL)
        return TL_OK;
    memset(out, 0, TL_MAX_METRICS * sizeof *out);
    int got = 0;
    tl_clear_error();
    tl_status st = o->metric_result(out, TL_MAX_METRICS, &got, o->metric_user);
    if (st != TL_OK)
        return tl_callback_failed(st, "metric_result");
    if (got < 0 || got > TL_MAX_METRICS)
        return tl_error(TL_EINVAL, "metric_result: the number of metrics must be in [0, %d], got %d", TL_MAX_METRICS,
                        got);
    for (int i = 0; i < got; i++) {
        const char *name = out[i].name;
        if (memchr(name, '\0', sizeof out[i].name) == NULL)
            return tl_error(TL_EINVAL, "metric_result: metric %d's name is not NUL-terminated within %zu bytes", i,
                            sizeof out[i].name);
        if (name[0] == '\0')
            return tl_error(TL_EINVAL, "metric_result: metric %d has an empty name", i);
        /* Estimator adds these two itself (_verify_and_create_loss_metric and
         * evaluate's global_step), with these messages. */
        if (strcmp(name, "loss") == 0)
            return tl_error(TL_EINVAL, "Metric with name \"loss\" is not allowed, because Estimator already "
                                       "defines a default metric with the same name.");
        if (strcmp(name, "global_step") == 0)
            return tl_error(TL_EINVAL, "Metric with name `global_step` is not allowed, because Estimator already "
                                       "defines a default metric with the same name.");
        for (int k = 0; k < i; k++)
            if (strcmp(out[k].name, name) == 0)
                return tl_error(TL_EINVAL, "metric_result: metrics %d and %d are both named \"%s\"", k, i, name);
    }
    *n = got;
    return TL_OK;
}

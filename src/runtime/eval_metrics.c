/* eval_metrics.c — the checks on what a user's metric_fn (spec
 * tpu_estimator.md §7) returns. The ROC AUC of a binary model is
 * tl_roc_auc in data/auc.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimator_int.h"

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

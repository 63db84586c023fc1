/* auc.c — the exact ROC AUC of a binary classifier, written once: the
 * estimator's evaluation and the synthetic data's oracle both use it. */
#include <math.h>
#include <stdlib.h>

#include "../base/base_int.h"
#include "data_int.h"
#include "tpuloop/criteo_synth.h"

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

double tl_auc(const double *score, const int32_t *label, int64_t n)
{
    if (score == NULL || label == NULL) {
        tl_error(TL_EINVAL, "tl_auc: %s is NULL", score == NULL ? "score" : "label");
        return NAN;
    }
    int64_t pos = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(score[i])) {
            tl_error(TL_EINVAL, "tl_auc: score[%lld] is NaN", (long long)i);
            return NAN;
        }
        pos += label[i] == 1;
    }
    int64_t neg = n > 0 ? n - pos : 0;
    if (pos == 0 || neg == 0) {
        tl_error(TL_EINVAL, "tl_auc: no AUC exists without both classes (%lld positives, %lld negatives)",
                 (long long)pos, (long long)neg);
        return NAN;
    }
    tl_scored *it = tl_alloc_array((size_t)n, sizeof *it);
    if (it == NULL) {
        tl_error_oom();
        return NAN;
    }
    for (int64_t i = 0; i < n; i++)
        it[i] = (tl_scored){score[i], label[i]};
    double auc;
    tl_roc_auc(it, n, &auc); /* both classes and no NaN: checked above */
    tl_free(it);
    return auc;
}

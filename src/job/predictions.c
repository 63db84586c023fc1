/* predictions.c — tl_job_write_predictions: one row per example, its index,
 * the predicted class and the class probabilities, as CSV or JSON Lines. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_int.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The class probabilities of one example's logits z (w of them) into p,
 * and the argmax class. One logit is a binary model: P(class 1) =
 * sigmoid(z), the class z > 0, as the evaluation counts it. */
static int64_t probabilities(const float *z, int64_t w, double *p)
{
    if (w == 1) {
        double p1 = 1.0 / (1.0 + exp(-(double)z[0]));
        p[0] = 1.0 - p1;
        p[1] = p1;
        return z[0] > 0;
    }
    int64_t best = 0;
    for (int64_t c = 1; c < w; c++)
        if (z[c] > z[best])
            best = c;
    double mx = z[best], sum = 0;
    for (int64_t c = 0; c < w; c++)
        sum += exp((double)z[c] - mx);
    for (int64_t c = 0; c < w; c++)
        p[c] = exp((double)z[c] - mx) / sum;
    return best;
}

tl_status tl_job_check_predictions_path(const char *path)
{
    if (!ends_with(path, ".csv") && !ends_with(path, ".jsonl") && !ends_with(path, ".json")) {
        const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
        return tl_error(TL_EINVAL, "predictions_out: '%s' %s%s; tpuloop writes CSV (.csv) or JSON Lines (.jsonl, "
                                   ".json)", path, dot != NULL && (slash == NULL || dot > slash) ? "is a " : "has no",
                        dot != NULL && (slash == NULL || dot > slash) ? dot : " extension");
    }
    return TL_OK;
}

tl_status tl_job_write_predictions(const char *path, const tl_predict_result *res)
{
    tl_status st = tl_job_check_predictions_path(path);
    if (st != TL_OK)
        return st;
    bool csv = ends_with(path, ".csv");
    int64_t w = res->width, classes = w == 1 ? 2 : w;
    double *p = malloc((size_t)(classes > 0 ? classes : 1) * sizeof *p);
    if (p == NULL)
        return tl_error(TL_ENOMEM, "predictions_out: out of memory for %lld classes", (long long)classes);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        free(p);
        return tl_error(TL_EIO, "predictions_out: cannot write %s: %s", path, strerror(errno));
    }
    if (csv) {
        fprintf(f, "index,class");
        for (int64_t c = 0; c < classes; c++)
            fprintf(f, ",p%lld", (long long)c);
        fputc('\n', f);
    }
    for (int64_t i = 0; i < res->num_examples; i++) {
        int64_t best = probabilities(res->values + i * w, w, p);
        fprintf(f, csv ? "%lld,%lld" : "{\"index\":%lld,\"class\":%lld,\"probabilities\":[", (long long)i,
                (long long)best);
        for (int64_t c = 0; c < classes; c++)
            fprintf(f, "%s%.6g", csv || c ? "," : "", p[c]);
        fputs(csv ? "\n" : "]}\n", f);
    }
    free(p);
    int err = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && err == 0)
        err = errno;
    if (err != 0)
        return tl_error(TL_EIO, "predictions_out: cannot write %s: %s", path, strerror(err));
    return TL_OK;
}

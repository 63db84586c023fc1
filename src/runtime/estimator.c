/* estimator.c — time mode's IterationCountEstimator (spec tpu_estimator.md
 * §1.2), reproduced to the bit: the decisions (freeze, rounding) sit on
 * thresholds, so the sums run in numpy's order (naive, oldest sample first)
 * and in doubles. */
#include <math.h>

#include "../base/base_int.h"
#include "schedule.h"

typedef struct tl_ice_sample {
    double runtime_s;
    int64_t steps;
    double step_time_s; /* runtime_s / steps */
} tl_ice_sample;

struct tl_iter_estimator {
    int capacity;
    int head; /* index of the oldest sample */
    int len;
    int64_t sample_count; /* accepted samples, never reset */
    double last;          /* previous estimate; min_iterations = 1 to start */
    bool exclude_first;
    bool first_dropped;
    tl_ice_sample *ring; /* (capacity) */
};

/* TensorFlow's _min_iterations. */
#define TL_ICE_MIN_ITERATIONS 1.0
/* _is_step_time_stable: an absolute bound in seconds, whatever the step time. */
#define TL_ICE_STABLE_STD_S 0.03

tl_status tl_iter_estimator_create(int capacity, bool exclude_first_sample, tl_iter_estimator **out)
{
    *out = NULL;
    if (capacity <= 0)
        return tl_error(TL_EINVAL, "IterationCountEstimator `capacity` must be positive. Actual:%d.", capacity);
    tl_iter_estimator *e = tl_calloc(1, sizeof *e);
    if (e == NULL)
        return tl_error_oom();
    e->ring = tl_calloc((size_t)capacity, sizeof *e->ring);
    if (e->ring == NULL) {
        tl_free(e);
        return tl_error_oom();
    }
    e->capacity = capacity;
    e->last = TL_ICE_MIN_ITERATIONS;
    e->exclude_first = exclude_first_sample;
    *out = e;
    return TL_OK;
}

void tl_iter_estimator_destroy(tl_iter_estimator *e)
{
    if (e == NULL)
        return;
    tl_free(e->ring);
    tl_free(e);
}

bool tl_iter_estimator_update(tl_iter_estimator *e, double runtime_s, int64_t steps)
{
    /* TensorFlow tests `runtime_secs <= 0.0`, which NaN passes; a NaN or an
     * infinity would then sit in the ring for `capacity` loops and make every
     * estimate NaN, so they are ignored like the other invalid samples. */
    if (!(runtime_s > 0.0) || !isfinite(runtime_s)) {
        tl_log(TL_LOG_DEBUG, "Invalid `runtime_secs`. Value must be positive. Actual:%.3f.", runtime_s);
        return false;
    }
    if (steps <= 0) {
        tl_log(TL_LOG_DEBUG, "Invalid samples `count`. Value must be positive. Actual:%lld.", (long long)steps);
        return false;
    }
    if (e->exclude_first && !e->first_dropped) {
        e->first_dropped = true;
        return false;
    }
    int slot;
    if (e->len == e->capacity) {
        slot = e->head;
        e->head = (e->head + 1) % e->capacity;
    } else {
        slot = (e->head + e->len) % e->capacity;
        e->len++;
    }
    e->ring[slot].runtime_s = runtime_s;
    e->ring[slot].steps = steps;
    e->ring[slot].step_time_s = runtime_s / (double)steps;
    e->sample_count++;
    return true;
}

static const tl_ice_sample *sample_at(const tl_iter_estimator *e, int i) /* i = 0: oldest */
{
    return &e->ring[(e->head + i) % e->capacity];
}

/* Python's check without its errors: get() only calls it with a positive
 * runtime and a positive target. */
static bool within_percentage(double actual, double target, double percentage)
{
    return fabs(target - actual) / target <= percentage * 0.01;
}

tl_status tl_diff_less_than_percentage(double actual, double target, double percentage, bool *out)
{
    if (actual == 0)
        return tl_error(TL_EINVAL, "Invalid `actual` value. Value must not be zero.");
    if (target == 0)
        return tl_error(TL_EINVAL, "Invalid `target` value. Value must not be zero.");
    *out = within_percentage(actual, target, percentage);
    return TL_OK;
}

tl_status tl_iter_estimator_get(tl_iter_estimator *e, double total_secs, int64_t *out)
{
    if (!(total_secs > 0) || !isfinite(total_secs))
        return tl_error(TL_EINVAL, "Invalid `total_secs`. It must be positive number. Actual:%g", total_secs);
    if (e->len == 0) {
        *out = (int64_t)TL_ICE_MIN_ITERATIONS;
        return TL_OK;
    }

    /* np.mean / np.std over axis 0 of the (len, 3) array: a running sum from
     * the oldest row, divided by len; std is sqrt(mean((x - mean)^2)). */
    double sum_rt = 0, sum_st = 0;
    for (int i = 0; i < e->len; i++) {
        sum_rt += sample_at(e, i)->runtime_s;
        sum_st += sample_at(e, i)->step_time_s;
    }
    double mean_rt = sum_rt / e->len;
    double mean_st = sum_st / e->len;
    double ss = 0;
    for (int i = 0; i < e->len; i++) {
        double d = sample_at(e, i)->step_time_s - mean_st;
        ss += d * d;
    }
    double std_st = sqrt(ss / e->len);

    double projected = total_secs / mean_st;
    double delta = projected - e->last;
    double newest_rt = sample_at(e, e->len - 1)->runtime_s;
    bool on_target = within_percentage(newest_rt, total_secs, 10) || within_percentage(mean_rt, total_secs, 5);
    bool stable = std_st < TL_ICE_STABLE_STD_S && e->sample_count > e->capacity;
    if (on_target && stable)
        delta = 0;
    e->last += delta;
    if (!(e->last >= TL_ICE_MIN_ITERATIONS)) /* also catches NaN */
        e->last = TL_ICE_MIN_ITERATIONS;

    /* int(last + 0.5): last >= 1, so truncation is floor. Python's int is
     * unbounded; an estimate past int64 (a step time near the smallest
     * double) saturates, and the caller takes min() with the steps left. */
    double rounded = floor(e->last + 0.5);
    *out = rounded >= 0x1p63 ? INT64_MAX : (int64_t)rounded;
    tl_log(TL_LOG_DEBUG,
           "IterationCountEstimator -- target_runtime:%.3fs. last_runtime:%.3fs. mean_runtime:%.3fs. "
           "std_step_time:%.3f. mean_step_time:%.3fs. delta_steps:%.2f. next_steps:%.2f.",
           total_secs, newest_rt, mean_rt, std_st, mean_st, delta, e->last);
    return TL_OK;
}

int64_t tl_iter_estimator_sample_count(const tl_iter_estimator *e) { return e->sample_count; }
int tl_iter_estimator_size(const tl_iter_estimator *e) { return e->len; }
double tl_iter_estimator_last(const tl_iter_estimator *e) { return e->last; }

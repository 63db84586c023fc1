/* schedule.c — the host loop's decisions at loop boundaries: loop sizes and
 * stop (_TPUStopAtStepHook), checkpoints (CheckpointSaverHook), logging
 * (LoggingTensorHook, ExamplesPerSecondHook), host_call firing and the eval
 * loop. Spec tpu_estimator.md §3.1–§3.3, §6, §7; the time-mode estimator is
 * in estimator.c. */
#include "../base/base_int.h"
#include "schedule.h"

/* ---- training loop sizes ------------------------------------------------ */

struct tl_train_schedule {
    tl_ipl ipl;
    int64_t final_step;
    int64_t global_step; /* last reported (start step at first) */
    int64_t next_n;      /* size of the loop about to run; 0 when done */
    int64_t loops;
    bool done;
    bool skipped;
    tl_iter_estimator *est; /* (time mode only) */
};

/* min(final - gs, ipl or the estimate); gs < final. */
static int64_t loop_size(tl_train_schedule *s, int64_t gs)
{
    int64_t remaining = s->final_step - gs;
    int64_t want = s->ipl.value;
    if (s->est != NULL) {
        tl_status st = tl_iter_estimator_get(s->est, (double)s->ipl.value, &want);
        TL_ASSERT(st == TL_OK); /* ipl.value >= 1 was checked at creation */
    }
    return remaining < want ? remaining : want;
}

tl_status tl_train_schedule_create(tl_ipl ipl, tl_opt_int steps, tl_opt_int max_steps, int64_t start_step,
                                   const tl_train_schedule_opts *opts, tl_train_schedule **out)
{
    *out = NULL;
    /* Estimator.train's checks come first, then TPUEstimator's "both None". */
    if (steps.set && max_steps.set)
        return tl_error(TL_EINVAL, "Can not provide both steps and max_steps.");
    if (steps.set && steps.value <= 0)
        return tl_error(TL_EINVAL, "Must specify steps > 0, given: %lld", (long long)steps.value);
    if (max_steps.set && max_steps.value <= 0)
        return tl_error(TL_EINVAL, "Must specify max_steps > 0, given: %lld", (long long)max_steps.value);
    if (!steps.set && !max_steps.set)
        return tl_error(TL_EINVAL, "For TPU training, one of `steps` or `max_steps` must be set. "
                                   "Cannot be both `None`.");
    if (ipl.unit != TL_IPL_COUNT && ipl.unit != TL_IPL_SECONDS)
        return tl_error(TL_EINVAL, "iterations_per_loop unit must be count or seconds, got %d", (int)ipl.unit);
    if (ipl.value < 1)
        return tl_error(TL_EINVAL, "iterations_per_loop must be positive, got %lld", (long long)ipl.value);
    if (start_step < 0)
        return tl_error(TL_EINVAL, "train: the global step at start must be >= 0, got %lld", (long long)start_step);
    if (steps.set && steps.value > INT64_MAX - start_step)
        return tl_error(TL_EINVAL, "train: global step %lld + steps %lld is past the largest step %lld",
                        (long long)start_step, (long long)steps.value, (long long)INT64_MAX);
    int capacity = TL_ESTIMATOR_DEFAULT_CAPACITY;
    bool exclude_first = false;
    if (opts != NULL) {
        if (opts->estimator_capacity < 0)
            return tl_error(TL_EINVAL, "IterationCountEstimator `capacity` must be positive. Actual:%d.",
                            opts->estimator_capacity);
        if (opts->estimator_capacity > 0)
            capacity = opts->estimator_capacity;
        exclude_first = opts->exclude_first_sample;
    }

    tl_train_schedule *s = tl_calloc(1, sizeof *s);
    if (s == NULL)
        return tl_error_oom();
    s->ipl = ipl;
    s->global_step = start_step;
    if (max_steps.set && max_steps.value <= start_step) {
        /* Estimator.train compares with the checkpoint's step before building
         * anything: no session, no checkpoint, no loop. */
        s->final_step = max_steps.value;
        s->skipped = true;
        s->done = true;
        *out = s;
        return TL_OK;
    }
    s->final_step = max_steps.set ? max_steps.value : start_step + steps.value;
    if (ipl.unit == TL_IPL_SECONDS) {
        tl_status st = tl_iter_estimator_create(capacity, exclude_first, &s->est);
        if (st != TL_OK) {
            tl_free(s);
            return st;
        }
    }
    s->next_n = loop_size(s, start_step);
    *out = s;
    return TL_OK;
}

void tl_train_schedule_destroy(tl_train_schedule *s)
{
    if (s == NULL)
        return;
    tl_iter_estimator_destroy(s->est);
    tl_free(s);
}

tl_status tl_train_schedule_after_loop(tl_train_schedule *s, int64_t global_step, double elapsed_s, int64_t *next_n)
{
    *next_n = 0;
    if (s->done)
        return tl_error(TL_ERUNTIME, "train: a loop was reported after training stopped at global step %lld "
                                     "(final step %lld)",
                        (long long)s->global_step, (long long)s->final_step);
    if (global_step <= s->global_step)
        return tl_error(TL_ERUNTIME, "train: global step did not advance during a loop of %lld steps "
                                     "(%lld before, %lld after); training would never reach step %lld",
                        (long long)s->next_n, (long long)s->global_step, (long long)global_step,
                        (long long)s->final_step);
    if (s->est != NULL)
        tl_iter_estimator_update(s->est, elapsed_s, s->next_n);
    s->global_step = global_step;
    s->loops++;
    if (global_step >= s->final_step) {
        s->done = true;
        s->next_n = 0;
    } else {
        s->next_n = loop_size(s, global_step);
    }
    *next_n = s->next_n;
    return TL_OK;
}

int64_t tl_train_schedule_next(const tl_train_schedule *s) { return s->next_n; }
int64_t tl_train_schedule_final_step(const tl_train_schedule *s) { return s->final_step; }
int64_t tl_train_schedule_global_step(const tl_train_schedule *s) { return s->global_step; }
int64_t tl_train_schedule_loops(const tl_train_schedule *s) { return s->loops; }
bool tl_train_schedule_done(const tl_train_schedule *s) { return s->done; }
bool tl_train_schedule_skipped(const tl_train_schedule *s) { return s->skipped; }
const tl_iter_estimator *tl_train_schedule_estimator(const tl_train_schedule *s) { return s->est; }

/* ---- checkpoints --------------------------------------------------------- */

/* step >= last + every (every > 0) without overflowing: a sum past INT64_MAX
 * is a step no int64 reaches. */
static bool reached(int64_t step, int64_t last, int64_t every)
{
    return last <= INT64_MAX - every && step >= last + every;
}

tl_status tl_ckpt_schedule_init(tl_ckpt_schedule *c, tl_opt_int save_steps, tl_opt_int save_secs)
{
    *c = (tl_ckpt_schedule){0};
    if (save_steps.set && save_secs.set)
        return tl_error(TL_EINVAL, "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.");
    if (save_steps.set && save_steps.value < 0)
        return tl_error(TL_EINVAL, "save_checkpoints_steps must be >= 0, got %lld", (long long)save_steps.value);
    if (save_secs.set && save_secs.value < 0)
        return tl_error(TL_EINVAL, "save_checkpoints_secs must be >= 0, got %lld", (long long)save_secs.value);
    /* TPUEstimator adds the hook iff `save_checkpoints_secs or
     * save_checkpoints_steps`: 0 counts as None. */
    if (save_steps.set && save_steps.value > 0) {
        c->enabled = true;
        c->every_steps = save_steps.value;
    } else if (save_secs.set && save_secs.value > 0) {
        c->enabled = true;
        c->every_secs = (double)save_secs.value;
    }
    return TL_OK;
}

static void ckpt_record(tl_ckpt_schedule *c, int64_t gs, double now)
{
    c->saved = true;
    c->last_step = gs;
    c->last_time = now;
}

bool tl_ckpt_schedule_at_start(tl_ckpt_schedule *c, int64_t global_step, double now)
{
    if (!c->enabled)
        return false;
    ckpt_record(c, global_step, now);
    return true;
}

/* SecondOrStepTimer.should_trigger_for_step, on the post-loop step. */
bool tl_ckpt_schedule_after_loop(tl_ckpt_schedule *c, int64_t global_step, double now)
{
    if (!c->enabled)
        return false;
    bool due;
    if (!c->saved)
        due = true;
    else if (global_step == c->last_step)
        due = false;
    else if (c->every_secs > 0)
        due = now >= c->last_time + c->every_secs;
    else
        due = reached(global_step, c->last_step, c->every_steps);
    if (due)
        ckpt_record(c, global_step, now);
    return due;
}

bool tl_ckpt_schedule_at_end(tl_ckpt_schedule *c, int64_t global_step, double now, bool graceful_shutdown)
{
    if (!c->enabled && !graceful_shutdown)
        return false;
    if (c->saved && c->last_step == global_step)
        return false;
    ckpt_record(c, global_step, now);
    return true;
}

/* ---- logging cadence ---------------------------------------------------- */

tl_status tl_log_schedule_init(tl_log_schedule *l, tl_ipl ipl, tl_opt_int log_step_count_steps)
{
    *l = (tl_log_schedule){0};
    if (ipl.value < 1)
        return tl_error(TL_EINVAL, "iterations_per_loop must be positive, got %lld", (long long)ipl.value);
    if (ipl.unit == TL_IPL_SECONDS) {
        /* TPUEstimator's constructor replaces log_step_count_steps by
         * log_every_n_secs = ipl in time mode, so the hooks exist even when
         * log_step_count_steps is None. */
        l->enabled = true;
        l->by_time = true;
        l->every_secs = (double)ipl.value;
        l->steps_per_run = 1;
        return TL_OK;
    }
    if (!log_step_count_steps.set || log_step_count_steps.value <= 0)
        return TL_OK;
    /* int(math.ceil(float(L) / ipl)), without the float or the overflow. */
    int64_t every = (log_step_count_steps.value - 1) / ipl.value + 1;
    l->enabled = true;
    l->every_loops = every;
    l->every_steps = every;
    l->steps_per_run = ipl.value;
    return TL_OK;
}

void tl_log_schedule_after_loop(tl_log_schedule *l, int64_t global_step, double now, tl_log_event *ev)
{
    *ev = (tl_log_event){0};
    if (!l->enabled)
        return;
    int64_t loop = l->loops++; /* LoggingTensorHook's _iter_count before this run */

    /* LoggingTensorHook: its timer counts loops, so "same step" never recurs. */
    bool loss;
    if (!l->loss_fired)
        loss = true;
    else if (l->by_time)
        loss = now >= l->loss_last_time + l->every_secs;
    else
        loss = reached(loop, l->loss_last_loop, l->every_loops);
    if (loss) {
        l->loss_fired = true;
        l->loss_last_loop = loop;
        l->loss_last_time = now;
        ev->log_loss = true;
    }

    /* StepCounterHook: its pre-check on stale_step + steps_per_run can never
     * reject a loop the real check accepts (the stale step is at most the
     * post-loop one and the loop at most steps_per_run long), so only the
     * post-loop step matters. */
    bool rate;
    if (!l->rate_fired)
        rate = true;
    else if (global_step == l->rate_last_step)
        rate = false;
    else if (l->by_time)
        rate = now >= l->rate_last_time + l->every_secs;
    else
        rate = reached(global_step, l->rate_last_step, l->every_steps);
    if (rate) {
        if (l->rate_fired) { /* the first trigger only records */
            ev->log_rate = true;
            ev->rate_steps = global_step - l->rate_last_step;
            ev->rate_secs = now - l->rate_last_time;
        }
        l->rate_fired = true;
        l->rate_last_step = global_step;
        l->rate_last_time = now;
    }
}

/* ---- host_call and eval --------------------------------------------------- */

tl_status tl_host_call_check_every_n(int64_t every_n)
{
    if (every_n < 1)
        return tl_error(TL_EINVAL, "experimental_host_call_every_n_steps must be >= 1, got %lld", (long long)every_n);
    return TL_OK;
}

bool tl_host_call_fires(int64_t i, int64_t every_n)
{
    TL_ASSERT(every_n >= 1 && i >= 0);
    return i % every_n == 0;
}

int64_t tl_host_call_count(int64_t n, int64_t every_n)
{
    TL_ASSERT(every_n >= 1);
    if (n <= 0)
        return 0;
    return (n - 1) / every_n + 1;
}

tl_status tl_eval_loop_size(tl_opt_int steps, int64_t *n)
{
    if (!steps.set)
        return tl_error(TL_EINVAL, "Evaluate `steps` must be set on TPU. Cannot be `None`.");
    if (steps.value <= 0)
        return tl_error(TL_EINVAL, "Eval steps must be positive, got %lld", (long long)steps.value);
    *n = steps.value;
    return TL_OK;
}

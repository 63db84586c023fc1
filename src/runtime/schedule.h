/*
 * schedule.h — when the host loop does what: the size of every device loop,
 * when to checkpoint, when to log, which loop-local steps outfeed host_call
 * tensors. Spec: tpu_estimator.md §1.2, §3.1–§3.3, §6, §7, §12.
 *
 * TPUEstimator's host never sees a step in the middle of a device loop; all
 * its decisions happen at loop boundaries, from the post-loop global step and
 * the clock. Here those decisions are pure state machines: no threads, no
 * I/O, no clock reads. The runtime passes in the global step it read back and
 * the time it measured, and does whatever the schedule answers. That keeps
 * every rule of TensorFlow's hooks (_TPUStopAtStepHook,
 * IterationCountEstimator, CheckpointSaverHook, LoggingTensorHook,
 * ExamplesPerSecondHook) testable by simulation, to the step.
 *
 *     tl_train_schedule *s;
 *     if (tl_train_schedule_create(rc->tpu.iterations_per_loop, rc->train_steps,
 *                                  rc->max_steps, restored_step, NULL, &s) != TL_OK)
 *         return tl_last_status();
 *     if (tl_train_schedule_skipped(s))
 *         tl_log(TL_LOG_INFO, "%s", TL_TRAIN_SKIP_MESSAGE);
 *     tl_ckpt_schedule ck;
 *     tl_log_schedule lg;
 *     tl_ckpt_schedule_init(&ck, rc->save_checkpoints_steps, rc->save_checkpoints_secs);
 *     tl_log_schedule_init(&lg, rc->tpu.iterations_per_loop, rc->log_step_count_steps);
 *     if (!tl_train_schedule_skipped(s) && tl_ckpt_schedule_at_start(&ck, restored_step, now()))
 *         save(restored_step);
 *     for (int64_t n = tl_train_schedule_next(s); n > 0;) {
 *         double t0 = now();
 *         run_device_loop(n);                 // global step advances by n
 *         double t1 = now();
 *         int64_t gs = read_global_step();
 *         if (tl_train_schedule_after_loop(s, gs, t1 - t0, &n) != TL_OK)
 *             break;                          // the step did not advance
 *         tl_log_event ev;
 *         tl_log_schedule_after_loop(&lg, gs, t1, &ev);
 *         if (tl_ckpt_schedule_after_loop(&ck, gs, t1))
 *             save(gs);
 *     }
 *     int64_t gs = tl_train_schedule_global_step(s);
 *     if (!tl_train_schedule_skipped(s) && tl_ckpt_schedule_at_end(&ck, gs, now(), shutdown_requested))
 *         save(gs);
 *     tl_train_schedule_destroy(s);
 *
 * Times are seconds on any monotonic clock, as doubles; only differences
 * matter. Nothing here is thread-safe: one host loop owns each object.
 */
#ifndef TL_RUNTIME_SCHEDULE_H
#define TL_RUNTIME_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include "tpuloop/base.h"
#include "tpuloop/config.h"

/* ---- time mode: the iteration-count estimator (§1.2) --------------------- */

/*
 * TensorFlow's IterationCountEstimator, reproduced exactly: a FIFO ring of
 * the last `capacity` loops, each (runtime_s, steps, step_time = runtime_s /
 * steps); a count of accepted samples that is never reset; and `last`, the
 * previous estimate as a real number, starting at 1.
 *
 * get(T) projects T / mean step time (the unweighted mean of the per-loop step
 * times, so a one-step compile loop weighs as much as a 300-step loop) and
 * moves `last` there, unless the loop time is already on target and stable:
 * (the newest runtime within 10 % of T, or the mean runtime within 5 %) and
 * the population standard deviation of the step times below 0.03 s (an
 * absolute threshold, whatever the step time) and more than `capacity`
 * samples accepted so far; then `last` stays. The answer is
 * floor(max(last, 1) + 0.5); an empty ring answers 1.
 *
 * The first loop includes compilation, so its sample drags the mean for
 * `capacity` more loops (T14: 1,1,1,1,2,2,...,10 over 21 loops, then 300).
 * exclude_first_sample (spec §12 recommendation 6, off by default for
 * compatibility) drops the first accepted sample: it neither enters the ring
 * nor counts towards `capacity`.
 */
#define TL_ESTIMATOR_DEFAULT_CAPACITY 20

typedef struct tl_iter_estimator tl_iter_estimator;

/*
 * Makes an estimator with room for capacity samples.
 * Errors: TL_EINVAL "IterationCountEstimator `capacity` must be positive.
 * Actual:<c>." for capacity <= 0; TL_ENOMEM.
 */
tl_status tl_iter_estimator_create(int capacity, bool exclude_first_sample, tl_iter_estimator **out);

/* Frees e; NULL is fine. */
void tl_iter_estimator_destroy(tl_iter_estimator *e);

/*
 * Records that a loop of steps steps took runtime_s seconds. Returns false,
 * and changes nothing, for runtime_s <= 0 or steps <= 0 (TensorFlow ignores
 * those with a debug log) and for a runtime that is NaN or infinite (which
 * TensorFlow would accept and be poisoned by). Also returns false for the
 * sample dropped by exclude_first_sample. True when the sample entered the
 * ring, evicting the oldest one when full.
 */
bool tl_iter_estimator_update(tl_iter_estimator *e, double runtime_s, int64_t steps);

/*
 * The number of steps the next loop should run to take total_secs seconds,
 * into *out (>= 1; INT64_MAX if the projection does not fit). Updates the
 * estimator's `last`, so two calls in a row can differ only through a freeze.
 * Errors: TL_EINVAL "Invalid `total_secs`. It must be positive number.
 * Actual:<T>" for total_secs <= 0 or not finite; *out is then untouched.
 */
tl_status tl_iter_estimator_get(tl_iter_estimator *e, double total_secs, int64_t *out);

/* Samples accepted since creation (never reset, unlike the ring). */
int64_t tl_iter_estimator_sample_count(const tl_iter_estimator *e);

/* Samples in the ring now (<= capacity). */
int tl_iter_estimator_size(const tl_iter_estimator *e);

/* The previous estimate as a real number (1.0 before any get). */
double tl_iter_estimator_last(const tl_iter_estimator *e);

/*
 * IterationCountEstimator._diff_less_than_percentage: *out = |target -
 * actual| / target <= percentage * 0.01, in doubles as Python computes it (a
 * negative target makes the ratio negative, hence true).
 * Errors (TL_EINVAL, checked in this order): "Invalid `actual` value. Value
 * must not be zero." when actual == 0 (this is T19's (0, 10, 5) case);
 * "Invalid `target` value. Value must not be zero." when target == 0.
 */
tl_status tl_diff_less_than_percentage(double actual, double target, double percentage, bool *out);

/* ---- training loop sizes and stop (§3.1, _TPUStopAtStepHook) ------------ */

#define TL_TRAIN_SKIP_MESSAGE "Skipping training since max_steps has already saved."

typedef struct tl_train_schedule_opts {
    int estimator_capacity;    /* time mode; 0 means TL_ESTIMATOR_DEFAULT_CAPACITY */
    bool exclude_first_sample; /* time mode; see tl_iter_estimator */
} tl_train_schedule_opts;

typedef struct tl_train_schedule tl_train_schedule;

/*
 * Plans train(steps | max_steps) from start_step, the global step after
 * restore. final = start_step + steps (relative) or max_steps (absolute).
 * The first loop runs min(final - start_step, ipl) steps in count mode, and
 * min(final - start_step, 1) in time mode (the estimator starts empty).
 *
 * max_steps <= start_step is not an error: the schedule is created "skipped"
 * (tl_train_schedule_skipped true, next 0, done) and the runtime logs
 * TL_TRAIN_SKIP_MESSAGE and trains nothing — no checkpoint, no loop.
 *
 * opts may be NULL for the defaults.
 * Errors (TL_EINVAL), in TensorFlow's order: "Can not provide both steps and
 * max_steps."; "Must specify steps > 0, given: N"; "Must specify max_steps >
 * 0, given: N"; "For TPU training, one of `steps` or `max_steps` must be set.
 * Cannot be both `None`."; an iterations_per_loop value < 1; start_step < 0;
 * start_step + steps beyond INT64_MAX; a negative estimator_capacity.
 * TL_ENOMEM.
 */
tl_status tl_train_schedule_create(tl_ipl ipl, tl_opt_int steps, tl_opt_int max_steps, int64_t start_step,
                                   const tl_train_schedule_opts *opts, tl_train_schedule **out);

/* Frees s; NULL is fine. */
void tl_train_schedule_destroy(tl_train_schedule *s);

/*
 * Called after every device loop with the global step read back after it and
 * the wall time of the loop (time mode feeds it to the estimator with the
 * loop's size; count mode ignores it; TensorFlow measures from before_run to
 * after_run, so the first loop's time includes compilation). Stores the next
 * loop's size in *next_n: 0 once global_step >= final (stop), otherwise
 * min(final - global_step, ipl) or, in time mode, min(final - global_step,
 * estimate).
 * Errors: TL_ERUNTIME "global step did not advance ..." when global_step is
 * not past the previous step (spec §12 recommendation 3: TensorFlow would loop
 * forever); TL_ERUNTIME when the schedule is already done. On error nothing
 * changes and *next_n is 0.
 */
tl_status tl_train_schedule_after_loop(tl_train_schedule *s, int64_t global_step, double elapsed_s, int64_t *next_n);

/* The size of the loop to run next; 0 when done or skipped. */
int64_t tl_train_schedule_next(const tl_train_schedule *s);

/* The step after which training stops (max_steps when skipped). */
int64_t tl_train_schedule_final_step(const tl_train_schedule *s);

/* The global step last reported (start_step before the first loop). */
int64_t tl_train_schedule_global_step(const tl_train_schedule *s);

/* Loops completed so far. */
int64_t tl_train_schedule_loops(const tl_train_schedule *s);

bool tl_train_schedule_done(const tl_train_schedule *s);
bool tl_train_schedule_skipped(const tl_train_schedule *s);

/* The time-mode estimator (NULL in count mode), for logs and tests. */
const tl_iter_estimator *tl_train_schedule_estimator(const tl_train_schedule *s);

/* ---- checkpoints (§3.2, CheckpointSaverHook + SecondOrStepTimer) -------- */

/*
 * Saves at the start (the restored step), after a loop when due, and at the
 * end unless the final step was just saved. Due in steps mode iff the
 * post-loop step >= last saved + save_checkpoints_steps (spec §12
 * recommendation 5: the real post-loop step, never TensorFlow's stale
 * pre-check), so the effective period is ceil(save_steps / ipl) * ipl with
 * full loops; in secs mode iff now >= last save time + save_checkpoints_secs.
 * Never twice for the same step. With neither set (or both 0: TensorFlow
 * tests truthiness) there is no checkpoint hook ("Bypassing TPUEstimator
 * hook"): the only save is a graceful-shutdown one at the end.
 *
 * Each query that answers true records a save at that step and time: the
 * caller must then save.
 */
typedef struct tl_ckpt_schedule {
    bool enabled;        /* a checkpoint hook exists */
    int64_t every_steps; /* > 0 in steps mode, else 0 */
    double every_secs;   /* > 0 in secs mode, else 0 */
    bool saved;          /* some save has been recorded */
    int64_t last_step;   /* step of the last save, when saved */
    double last_time;    /* time of the last save, when saved */
} tl_ckpt_schedule;

/*
 * Errors (TL_EINVAL): "`save_checkpoints_steps` and `save_checkpoints_secs`
 * cannot be both set."; a negative value ("save_checkpoints_steps must be >=
 * 0, got N" and likewise for secs). On error *c is disabled.
 */
tl_status tl_ckpt_schedule_init(tl_ckpt_schedule *c, tl_opt_int save_steps, tl_opt_int save_secs);

/* True (save now) when the hook exists: the state at the restored step. */
bool tl_ckpt_schedule_at_start(tl_ckpt_schedule *c, int64_t global_step, double now);

/* True when a save is due after a loop that ended at global_step. */
bool tl_ckpt_schedule_after_loop(tl_ckpt_schedule *c, int64_t global_step, double now);

/*
 * True at the end of training when global_step was not the last step saved
 * and either the hook exists or graceful_shutdown (a preemption notice: the
 * graceful-shutdown hook saves model_dir/model.ckpt even without a checkpoint
 * hook).
 */
bool tl_ckpt_schedule_at_end(tl_ckpt_schedule *c, int64_t global_step, double now, bool graceful_shutdown);

/* ---- logging cadence (§3.3) --------------------------------------------- */

/*
 * Two hooks, both evaluated at loop boundaries.
 *
 * Loss: LoggingTensorHook({loss, step}) counts session.runs (loops). Count
 * mode: every L' = ceil(log_step_count_steps / ipl) loops, starting with
 * loop 1 (L=100, ipl=10 logs at steps 10, 110, 210, ...). Time mode: after
 * loop 1, then after the first loop that ends >= ipl seconds after the last
 * log.
 *
 * Rate: ExamplesPerSecondHook (a StepCounterHook) counts global steps. Count
 * mode: every L' global steps (so every loop when ipl >= L'); time mode:
 * every ipl seconds. Its first trigger only records the step and time; each
 * later one reports the steps and seconds since the previous trigger, from
 * which the runtime logs "global_step/sec: x" and "examples/sec: G*x" (L=100,
 * ipl=2: records at 2, logs at 52, 102, 152, ...).
 *
 * Deviation: TensorFlow's LoggingTensorHook decides a time-mode loss log in
 * before_run, i.e. by the clock at the start of the loop; here both hooks use
 * the post-loop clock, so "every ipl seconds" means what it says.
 *
 * In count mode log_step_count_steps None (or <= 0) disables both hooks. In
 * time mode they always exist: TensorFlow's constructor drops
 * log_step_count_steps for log_every_n_secs = ipl before testing for None.
 */
typedef struct tl_log_schedule {
    bool enabled;
    bool by_time;          /* time mode: every_secs; count mode: every_loops / every_steps */
    int64_t every_loops;   /* L' (count mode) */
    int64_t every_steps;   /* rate period in global steps, = L' (count mode) */
    int64_t steps_per_run; /* ipl (count mode), 1 in time mode */
    double every_secs;     /* ipl seconds (time mode) */
    int64_t loops;         /* loops completed so far */
    bool loss_fired;
    int64_t loss_last_loop; /* 0-based index of the loop last logged */
    double loss_last_time;
    bool rate_fired;
    int64_t rate_last_step;
    double rate_last_time;
} tl_log_schedule;

typedef struct tl_log_event {
    bool log_loss;      /* log "loss = <replica 0's last loss>, step = <global step>" */
    bool log_rate;      /* log global_step/sec = rate_steps / rate_secs */
    int64_t rate_steps; /* steps since the previous rate trigger (when log_rate) */
    double rate_secs;   /* seconds since the previous rate trigger (when log_rate; may be 0 on a coarse clock) */
} tl_log_event;

/* Errors: TL_EINVAL "iterations_per_loop must be positive, got N" for a
 * value < 1. On error *l is disabled. */
tl_status tl_log_schedule_init(tl_log_schedule *l, tl_ipl ipl, tl_opt_int log_step_count_steps);

/* What to log after a loop that ended at global_step at time now. */
void tl_log_schedule_after_loop(tl_log_schedule *l, int64_t global_step, double now, tl_log_event *ev);

/* ---- host_call outfeed (§6) --------------------------------------------- */

/* Errors: TL_EINVAL "experimental_host_call_every_n_steps must be >= 1, got
 * N" (spec §12 recommendation 2; TensorFlow would divide by zero). */
tl_status tl_host_call_check_every_n(int64_t every_n);

/* Whether loop-local step i (0-based, reset every loop) outfeeds:
 * i % every_n == 0. Training only; evaluation outfeeds every step
 * (every_n = 1). every_n must be >= 1 (checked above). */
bool tl_host_call_fires(int64_t i, int64_t every_n);

/* How many steps of a loop of n steps outfeed: ceil(n / every_n). */
int64_t tl_host_call_count(int64_t n, int64_t every_n);

/* ---- evaluation (§7) ---------------------------------------------------- */

/*
 * evaluate(steps) on devices ignores iterations_per_loop and runs one loop of
 * steps steps: *n = steps.
 * Errors (TL_EINVAL): "Evaluate `steps` must be set on TPU. Cannot be
 * `None`."; "Eval steps must be positive, got N".
 */
tl_status tl_eval_loop_size(tl_opt_int steps, int64_t *n);

#endif /* TL_RUNTIME_SCHEDULE_H */

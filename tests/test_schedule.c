/* The host loop's loop sizes: spec tpu_estimator.md §1.2 and §3.1, test
 * vectors T14–T23 (the time-mode estimator and _TPUStopAtStepHook), checked by
 * simulating loops with a fake clock. Expectations marked "reference" were
 * produced by running TensorFlow's IterationCountEstimator code (numpy) on the
 * same scenario. Checkpoints, logging, host_call and eval: test_schedule_hooks.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "runtime/schedule.h"
#include "testutil.h"

#define NONE ((tl_opt_int){false, 0})
#define SOME(v) ((tl_opt_int){true, (v)})
#define COUNT(n) ((tl_ipl){TL_IPL_COUNT, (n)})
#define SECONDS(n) ((tl_ipl){TL_IPL_SECONDS, (n)})

static void quiet(void) { tl_set_log_level(TL_LOG_OFF); }

TestSuite(host_loop, .init = quiet);

/* ---- helpers ------------------------------------------------------------ */

static tl_iter_estimator *new_estimator(int capacity, bool exclude_first)
{
    tl_iter_estimator *e;
    ASSERT_OK(tl_iter_estimator_create(capacity, exclude_first, &e));
    return e;
}

static int64_t est_get(tl_iter_estimator *e, double total_secs)
{
    int64_t n = -1;
    ASSERT_OK(tl_iter_estimator_get(e, total_secs, &n));
    return n;
}

/* Seconds a loop of n steps takes, loop k being 0-based. */
typedef double (*loop_time_fn)(int k, int64_t n);

/*
 * Drives the estimator as _TPUStopAtStepHook does with unlimited steps: the
 * first size comes from the empty estimator, then after every loop
 * update(time, n) and get(T). Writes the sizes of `loops` loops into sizes.
 */
static void simulate_estimator(tl_iter_estimator *e, double T, loop_time_fn time_of, int loops, int64_t *sizes)
{
    int64_t n = est_get(e, T);
    for (int k = 0; k < loops; k++) {
        sizes[k] = n;
        tl_iter_estimator_update(e, time_of(k, n), n);
        n = est_get(e, T);
    }
}

static void assert_sizes(const int64_t *got, const int64_t *want, int count, const char *what)
{
    for (int k = 0; k < count; k++)
        cr_assert_eq(got[k], want[k], "%s: loop %d has %lld steps, want %lld", what, k + 1, (long long)got[k],
                     (long long)want[k]);
}

static tl_train_schedule *new_train(tl_ipl ipl, tl_opt_int steps, tl_opt_int max_steps, int64_t start)
{
    tl_train_schedule *s;
    ASSERT_OK(tl_train_schedule_create(ipl, steps, max_steps, start, NULL, &s));
    return s;
}

/* Runs a count-mode schedule to the end, the global step advancing by each
 * loop's size; returns the number of loops and fills sizes and the post-loop
 * steps (each up to cap). */
static int run_train(tl_train_schedule *s, int64_t *sizes, int64_t *steps, int cap)
{
    int loops = 0;
    int64_t gs = tl_train_schedule_global_step(s);
    for (int64_t n = tl_train_schedule_next(s); n > 0;) {
        cr_assert_lt(loops, cap, "more than %d loops", cap);
        sizes[loops] = n;
        gs += n;
        steps[loops] = gs;
        loops++;
        ASSERT_OK(tl_train_schedule_after_loop(s, gs, 1.0, &n));
    }
    cr_assert(tl_train_schedule_done(s));
    return loops;
}

/* ---- T14–T19: the time-mode estimator ----------------------------------- */

static double t14_time(int k, int64_t n) { return k == 0 ? 60.0 : (double)n * 0.1; }

Test(host_loop, t14_compile_loop_pollutes_the_mean_for_twenty_loops)
{
    static const int64_t want[21] = {1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10};
    tl_iter_estimator *e = new_estimator(TL_ESTIMATOR_DEFAULT_CAPACITY, false);
    int64_t sizes[40] = {0};
    simulate_estimator(e, 30.0, t14_time, 40, sizes);
    assert_sizes(sizes, want, 21, "T14");
    for (int k = 21; k < 40; k++) /* the compile sample is evicted by the 21st update */
        cr_assert_eq(sizes[k], 300, "T14: loop %d has %lld steps, want 300", k + 1, (long long)sizes[k]);
    cr_assert_eq(tl_iter_estimator_size(e), 20);
    cr_assert_eq(tl_iter_estimator_sample_count(e), 40);
    tl_iter_estimator_destroy(e);
}

Test(host_loop, t14_through_the_train_schedule_in_time_mode)
{
    /* The same run through _TPUStopAtStepHook's logic, limited to 3200 steps:
     * the 21 ramp loops take 102 steps, then 300 per loop, then the rest. */
    tl_train_schedule *s = new_train(SECONDS(30), SOME(3200), NONE, 0);
    cr_assert_not_null(tl_train_schedule_estimator(s));
    cr_assert_eq(tl_train_schedule_next(s), 1, "the first loop comes from the empty estimator");
    int64_t gs = 0, n = tl_train_schedule_next(s);
    int64_t sizes[64] = {0};
    int loops = 0;
    while (n > 0) {
        cr_assert_lt(loops, 64);
        sizes[loops] = n;
        gs += n;
        ASSERT_OK(tl_train_schedule_after_loop(s, gs, t14_time(loops, n), &n));
        loops++;
    }
    static const int64_t ramp[21] = {1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10};
    assert_sizes(sizes, ramp, 21, "T14 via schedule");
    /* 102 + 10 * 300 = 3102, then 98 left. */
    cr_assert_eq(loops, 32, "loops %d", loops);
    for (int k = 21; k < 31; k++)
        cr_assert_eq(sizes[k], 300, "loop %d: %lld", k + 1, (long long)sizes[k]);
    cr_assert_eq(sizes[31], 98);
    cr_assert_eq(gs, 3200);
    cr_assert_eq(tl_train_schedule_loops(s), 32);
    tl_train_schedule_destroy(s);
}

Test(host_loop, t14_excluding_the_compile_sample_converges_at_once)
{
    /* Spec §12 recommendation 6 (opt-in): the 60 s loop never enters the mean. */
    tl_iter_estimator *e = new_estimator(TL_ESTIMATOR_DEFAULT_CAPACITY, true);
    int64_t sizes[6] = {0};
    simulate_estimator(e, 30.0, t14_time, 6, sizes);
    static const int64_t want[6] = {1, 1, 300, 300, 300, 300};
    assert_sizes(sizes, want, 6, "T14 without the compile sample");
    cr_assert_eq(tl_iter_estimator_sample_count(e), 5, "the dropped sample is not counted");

    tl_train_schedule *s;
    tl_train_schedule_opts o = {.exclude_first_sample = true};
    ASSERT_OK(tl_train_schedule_create(SECONDS(30), SOME(1000), NONE, 0, &o, &s));
    int64_t n;
    ASSERT_OK(tl_train_schedule_after_loop(s, 1, 60.0, &n));
    cr_assert_eq(n, 1);
    ASSERT_OK(tl_train_schedule_after_loop(s, 2, 0.1, &n));
    cr_assert_eq(n, 300);
    tl_train_schedule_destroy(s);
    tl_iter_estimator_destroy(e);
}

static double t15_time(int k, int64_t n)
{
    (void)k;
    return (double)n * 0.5;
}

Test(host_loop, t15_no_compile_converges_after_one_loop)
{
    tl_iter_estimator *e = new_estimator(20, false);
    int64_t sizes[30] = {0};
    simulate_estimator(e, 10.0, t15_time, 30, sizes);
    cr_assert_eq(sizes[0], 1);
    for (int k = 1; k < 30; k++)
        cr_assert_eq(sizes[k], 20, "T15: loop %d has %lld steps", k + 1, (long long)sizes[k]);
    tl_iter_estimator_destroy(e);
}

Test(host_loop, t16_capacity_five)
{
    tl_iter_estimator *e = new_estimator(5, false);
    cr_assert(tl_iter_estimator_update(e, 5.0, 1));
    cr_assert_eq(est_get(e, 10), 2);
    cr_assert(tl_iter_estimator_update(e, 5.0, 1));
    cr_assert_eq(est_get(e, 15), 3);
    cr_assert(tl_iter_estimator_update(e, 5.0, 1));
    cr_assert_eq(est_get(e, 10), 2);
    tl_iter_estimator_destroy(e);
}

Test(host_loop, t17_empty_estimator_answers_one)
{
    tl_iter_estimator *e = new_estimator(20, false);
    cr_assert_eq(est_get(e, 1), 1);
    cr_assert_eq(est_get(e, 10), 1);
    cr_assert_eq(est_get(e, 36000), 1);
    cr_assert_eq(tl_iter_estimator_last(e), 1.0);
    tl_iter_estimator_destroy(e);
}

Test(host_loop, t18_invalid_samples_are_ignored_and_bad_targets_rejected)
{
    tl_iter_estimator *e = new_estimator(20, false);
    cr_assert_not(tl_iter_estimator_update(e, 0, 0));
    cr_assert_not(tl_iter_estimator_update(e, 0, 1));
    cr_assert_not(tl_iter_estimator_update(e, -1.0, 5));
    cr_assert_not(tl_iter_estimator_update(e, 1.0, 0));
    cr_assert_not(tl_iter_estimator_update(e, 1.0, -3));
    cr_assert_not(tl_iter_estimator_update(e, NAN, 1), "NaN would poison the mean");
    cr_assert_not(tl_iter_estimator_update(e, INFINITY, 1));
    cr_assert_eq(tl_iter_estimator_size(e), 0);
    cr_assert_eq(tl_iter_estimator_sample_count(e), 0);

    int64_t n = 77;
    ASSERT_ERR(tl_iter_estimator_get(e, 0, &n), TL_EINVAL, "Invalid `total_secs`");
    ASSERT_ERR(tl_iter_estimator_get(e, -1, &n), TL_EINVAL, "It must be positive number. Actual:-1");
    ASSERT_ERR(tl_iter_estimator_get(e, NAN, &n), TL_EINVAL, "Invalid `total_secs`");
    cr_assert_eq(n, 77, "a failed get leaves the output alone");
    /* Rejected even with samples (the check comes first). */
    tl_iter_estimator_update(e, 1.0, 1);
    ASSERT_ERR(tl_iter_estimator_get(e, 0, &n), TL_EINVAL, "Invalid `total_secs`");
    tl_iter_estimator_destroy(e);
}

Test(host_loop, t19_diff_less_than_percentage)
{
    bool r = false;
    ASSERT_OK(tl_diff_less_than_percentage(9.5, 10, 5, &r));
    cr_assert(r, "(9.5, 10, 5): exactly 5 %% is within");
    ASSERT_OK(tl_diff_less_than_percentage(10.5, 10, 5, &r));
    cr_assert(r, "(10.5, 10, 5)");
    ASSERT_OK(tl_diff_less_than_percentage(10.6, 10, 5, &r));
    cr_assert_not(r, "(10.6, 10, 5)");
    /* T19's ValueError: TensorFlow raises for a zero `actual` first, then for
     * a zero `target`. */
    ASSERT_ERR(tl_diff_less_than_percentage(0, 10, 5, &r), TL_EINVAL, "Invalid `actual` value. Value must not be zero.");
    ASSERT_ERR(tl_diff_less_than_percentage(10, 0, 5, &r), TL_EINVAL, "Invalid `target` value. Value must not be zero.");
    ASSERT_ERR(tl_diff_less_than_percentage(0, 0, 5, &r), TL_EINVAL, "`actual`");
    /* A negative target makes the ratio negative: true, as in Python. */
    ASSERT_OK(tl_diff_less_than_percentage(5, -10, 5, &r));
    cr_assert(r);
}

Test(host_loop, estimator_capacity_must_be_positive)
{
    tl_iter_estimator *e = (tl_iter_estimator *)&e;
    ASSERT_ERR(tl_iter_estimator_create(0, false, &e), TL_EINVAL,
               "IterationCountEstimator `capacity` must be positive. Actual:0.");
    cr_assert_null(e);
    ASSERT_ERR(tl_iter_estimator_create(-3, false, &e), TL_EINVAL, "Actual:-3.");
    tl_iter_estimator_destroy(NULL);
}

Test(host_loop, estimator_rounds_half_up_and_never_below_one)
{
    tl_iter_estimator *e = new_estimator(5, false);
    tl_iter_estimator_update(e, 4.0, 1); /* 10 / 4 = 2.5 -> 3 */
    cr_assert_eq(est_get(e, 10), 3);
    tl_iter_estimator_destroy(e);

    e = new_estimator(5, false);
    tl_iter_estimator_update(e, 100.0, 1); /* 0.1 -> last = max(0.1, 1) */
    cr_assert_eq(est_get(e, 10), 1);
    cr_assert_eq(tl_iter_estimator_last(e), 1.0);
    tl_iter_estimator_update(e, 8.0, 2); /* mean of 100 and 4 s/step = 52: 10 / 52 -> 1 */
    cr_assert_eq(est_get(e, 10), 1);
    tl_iter_estimator_destroy(e);
}

Test(host_loop, estimator_mean_is_unweighted_over_loops)
{
    /* One loop of 1 step at 1 s and one of 99 steps at 0.01 s/step: the
     * unweighted mean step time is 0.505 s, not 1.99 / 100. */
    tl_iter_estimator *e = new_estimator(20, false);
    tl_iter_estimator_update(e, 1.0, 1);
    tl_iter_estimator_update(e, 0.99, 99);
    cr_assert_eq(est_get(e, 10.1), 20); /* 10.1 / 0.505 = 20 */
    tl_iter_estimator_destroy(e);
}

Test(host_loop, estimator_ring_evicts_fifo)
{
    tl_iter_estimator *e = new_estimator(3, false);
    tl_iter_estimator_update(e, 100.0, 1);
    tl_iter_estimator_update(e, 1.0, 1);
    tl_iter_estimator_update(e, 1.0, 1);
    cr_assert_eq(est_get(e, 34), 1); /* mean 34 s/step */
    tl_iter_estimator_update(e, 1.0, 1); /* evicts the 100 s sample */
    cr_assert_eq(tl_iter_estimator_size(e), 3);
    cr_assert_eq(tl_iter_estimator_sample_count(e), 4);
    cr_assert_eq(est_get(e, 34), 34);
    tl_iter_estimator_destroy(e);
}

Test(host_loop, estimator_saturates_past_int64)
{
    tl_iter_estimator *e = new_estimator(20, false);
    /* A step time that underflows to a denormal: the projection is
     * infinite; Python's int() would raise, here it saturates. */
    cr_assert(tl_iter_estimator_update(e, 1e-300, INT64_MAX));
    cr_assert_eq(est_get(e, 3600), INT64_MAX);
    tl_iter_estimator_destroy(e);
}

/* The freeze: after more than `capacity` samples, a loop time on target and a
 * step-time std below 0.03 s keep the previous estimate. */
static double shift_small(int k, int64_t n) { return (double)n * (k < 25 ? 0.5 : 0.54); }
static double shift_large(int k, int64_t n) { return (double)n * (k < 25 ? 5.0 : 5.4); }
static double shift_early(int k, int64_t n) { return (double)n * (k < 5 ? 0.5 : 0.54); }

Test(host_loop, estimator_freezes_when_on_target_and_stable)
{
    /* Reference: step time 0.5 s -> 0.54 s at loop 26, T = 10 s. Loops take
     * 10.8 s (within 10 %) and the step-time std stays <= 0.02 s: frozen at
     * 20 although 10 / 0.54 would round to 19. */
    tl_iter_estimator *e = new_estimator(20, false);
    int64_t sizes[60] = {0};
    simulate_estimator(e, 10.0, shift_small, 60, sizes);
    cr_assert_eq(sizes[0], 1);
    for (int k = 1; k < 60; k++)
        cr_assert_eq(sizes[k], 20, "loop %d: %lld", k + 1, (long long)sizes[k]);
    tl_iter_estimator_destroy(e);
}

Test(host_loop, estimator_std_threshold_is_absolute)
{
    /* Reference: the same 8 % shift with ten times the step time (5 s ->
     * 5.4 s, T = 100 s): the std reaches 0.2 s, so no freeze, and the
     * estimate moves to 19 at loop 33. */
    tl_iter_estimator *e = new_estimator(20, false);
    int64_t sizes[60] = {0};
    simulate_estimator(e, 100.0, shift_large, 60, sizes);
    cr_assert_eq(sizes[0], 1);
    for (int k = 1; k < 32; k++)
        cr_assert_eq(sizes[k], 20, "loop %d: %lld", k + 1, (long long)sizes[k]);
    for (int k = 32; k < 60; k++)
        cr_assert_eq(sizes[k], 19, "loop %d: %lld", k + 1, (long long)sizes[k]);
    tl_iter_estimator_destroy(e);
}

Test(host_loop, estimator_does_not_freeze_before_capacity_samples)
{
    /* Reference: the small shift at loop 6, while sample_count <= 20: the
     * estimate follows the projection to 19 at loop 9 (and freezes there). */
    tl_iter_estimator *e = new_estimator(20, false);
    int64_t sizes[60] = {0};
    simulate_estimator(e, 10.0, shift_early, 60, sizes);
    static const int64_t head[9] = {1, 20, 20, 20, 20, 20, 20, 20, 19};
    assert_sizes(sizes, head, 9, "early shift");
    for (int k = 9; k < 60; k++)
        cr_assert_eq(sizes[k], 19, "loop %d: %lld", k + 1, (long long)sizes[k]);
    tl_iter_estimator_destroy(e);
}

Test(host_loop, estimator_freeze_needs_more_than_capacity_samples)
{
    /* Reference, K = 3, T = 10 s: two loops of 20 steps in 10 s, then two of
     * 20 in 10.4 s (on target, std < 0.03 s). With exactly K samples the
     * estimate still moves (to 10 / 0.50667 = 19.7368...); with K + 1 it
     * freezes instead of moving to 10 / 0.51333 = 19.48. */
    tl_iter_estimator *e = new_estimator(3, false);
    for (int i = 0; i < 2; i++) {
        tl_iter_estimator_update(e, 10.0, 20);
        cr_assert_eq(est_get(e, 10), 20);
    }
    tl_iter_estimator_update(e, 10.4, 20);
    cr_assert_eq(est_get(e, 10), 20);
    double moved = tl_iter_estimator_last(e);
    cr_assert(fabs(moved - 19.736842105263158) < 1e-12, "last %.17g", moved);
    tl_iter_estimator_update(e, 10.4, 20);
    cr_assert_eq(est_get(e, 10), 20);
    cr_assert_eq(tl_iter_estimator_last(e), moved, "frozen: last %.17g", tl_iter_estimator_last(e));
    tl_iter_estimator_destroy(e);
}

Test(host_loop, estimator_freezes_on_the_mean_runtime_too)
{
    /* Reference, K = 3, T = 10 s. Three loops of 19 steps in 9.5 s, then 20
     * in 11.1 s: the newest runtime is 11 % off, but the mean runtime 10.03 s
     * is within 5 % and the std 0.026 s, so `last` stays 20. */
    tl_iter_estimator *e = new_estimator(3, false);
    for (int i = 0; i < 3; i++)
        tl_iter_estimator_update(e, 9.5, 19);
    cr_assert_eq(est_get(e, 10), 20);
    tl_iter_estimator_update(e, 11.1, 20);
    cr_assert_eq(est_get(e, 10), 20);
    cr_assert_eq(tl_iter_estimator_last(e), 20.0);
    tl_iter_estimator_destroy(e);

    /* Three loops of 20 in 10.4 s, then 20 in 11.1 s: the mean runtime 10.63 s
     * is 6.3 % off, so no freeze: last goes from 19.23 to 18.81. */
    e = new_estimator(3, false);
    for (int i = 0; i < 3; i++)
        tl_iter_estimator_update(e, 10.4, 20);
    cr_assert_eq(est_get(e, 10), 19);
    tl_iter_estimator_update(e, 11.1, 20);
    cr_assert_eq(est_get(e, 10), 19);
    cr_assert(fabs(tl_iter_estimator_last(e) - 18.808777429467085) < 1e-12, "last %.17g", tl_iter_estimator_last(e));
    tl_iter_estimator_destroy(e);
}

/* ---- T20–T23: loop sizes and stop --------------------------------------- */

Test(host_loop, t20_ipl4_steps10)
{
    tl_train_schedule *s = new_train(COUNT(4), SOME(10), NONE, 0);
    cr_assert_null(tl_train_schedule_estimator(s));
    cr_assert_eq(tl_train_schedule_final_step(s), 10);
    int64_t sizes[8] = {0}, steps[8] = {0};
    int loops = run_train(s, sizes, steps, 8);
    cr_assert_eq(loops, 3, "stop after 3 session.runs");
    assert_sizes(sizes, (const int64_t[]){4, 4, 2}, 3, "T20 sizes");
    assert_sizes(steps, (const int64_t[]){4, 8, 10}, 3, "T20 steps");
    cr_assert_eq(tl_train_schedule_next(s), 0);
    tl_train_schedule_destroy(s);
}

Test(host_loop, t21_steps_are_relative_to_the_restored_step)
{
    tl_train_schedule *s = new_train(COUNT(4), SOME(10), NONE, 6);
    cr_assert_eq(tl_train_schedule_final_step(s), 16);
    int64_t sizes[8] = {0}, steps[8] = {0};
    int loops = run_train(s, sizes, steps, 8);
    cr_assert_eq(loops, 3);
    assert_sizes(sizes, (const int64_t[]){4, 4, 2}, 3, "T21 sizes");
    assert_sizes(steps, (const int64_t[]){10, 14, 16}, 3, "T21 steps");
    tl_train_schedule_destroy(s);
}

Test(host_loop, t22_max_steps_is_absolute)
{
    tl_train_schedule *s = new_train(COUNT(4), NONE, SOME(10), 6);
    cr_assert_eq(tl_train_schedule_final_step(s), 10);
    int64_t sizes[8] = {0}, steps[8] = {0};
    int loops = run_train(s, sizes, steps, 8);
    cr_assert_eq(loops, 1);
    cr_assert_eq(sizes[0], 4);
    cr_assert_eq(steps[0], 10);
    tl_train_schedule_destroy(s);
}

Test(host_loop, t23_max_steps_already_reached_skips_training)
{
    tl_train_schedule *s = new_train(COUNT(4), NONE, SOME(10), 10);
    cr_assert(tl_train_schedule_skipped(s));
    cr_assert(tl_train_schedule_done(s));
    cr_assert_eq(tl_train_schedule_next(s), 0);
    cr_assert_eq(tl_train_schedule_loops(s), 0);
    cr_assert_str_eq(TL_TRAIN_SKIP_MESSAGE, "Skipping training since max_steps has already saved.");
    int64_t n = 5;
    ASSERT_ERR(tl_train_schedule_after_loop(s, 11, 1.0, &n), TL_ERUNTIME, "after training stopped");
    cr_assert_eq(n, 0);
    tl_train_schedule_destroy(s);

    s = new_train(SECONDS(30), NONE, SOME(10), 25); /* past it, time mode too */
    cr_assert(tl_train_schedule_skipped(s));
    cr_assert_null(tl_train_schedule_estimator(s));
    tl_train_schedule_destroy(s);

    s = new_train(COUNT(4), NONE, SOME(11), 10); /* one step short: not skipped */
    cr_assert_not(tl_train_schedule_skipped(s));
    cr_assert_eq(tl_train_schedule_next(s), 1);
    tl_train_schedule_destroy(s);
}

Test(host_loop, train_arguments_are_checked_in_tensorflows_order)
{
    tl_train_schedule *s = (tl_train_schedule *)&s;
    ASSERT_ERR(tl_train_schedule_create(COUNT(4), SOME(0), SOME(-1), 0, NULL, &s), TL_EINVAL,
               "Can not provide both steps and max_steps.");
    cr_assert_null(s);
    ASSERT_ERR(tl_train_schedule_create(COUNT(4), SOME(0), NONE, 0, NULL, &s), TL_EINVAL,
               "Must specify steps > 0, given: 0");
    ASSERT_ERR(tl_train_schedule_create(COUNT(4), NONE, SOME(-5), 0, NULL, &s), TL_EINVAL,
               "Must specify max_steps > 0, given: -5");
    ASSERT_ERR(tl_train_schedule_create(COUNT(4), NONE, NONE, 0, NULL, &s), TL_EINVAL,
               "For TPU training, one of `steps` or `max_steps` must be set. Cannot be both `None`.");
    ASSERT_ERR(tl_train_schedule_create(COUNT(0), SOME(10), NONE, 0, NULL, &s), TL_EINVAL,
               "iterations_per_loop must be positive, got 0");
    ASSERT_ERR(tl_train_schedule_create(SECONDS(-1), SOME(10), NONE, 0, NULL, &s), TL_EINVAL,
               "iterations_per_loop must be positive, got -1");
    ASSERT_ERR(tl_train_schedule_create(COUNT(4), SOME(10), NONE, -1, NULL, &s), TL_EINVAL, "got -1");
    ASSERT_ERR(tl_train_schedule_create(COUNT(4), SOME(INT64_MAX), NONE, 1, NULL, &s), TL_EINVAL,
               "past the largest step");
    tl_train_schedule_opts o = {.estimator_capacity = -2};
    ASSERT_ERR(tl_train_schedule_create(SECONDS(30), SOME(10), NONE, 0, &o, &s), TL_EINVAL, "Actual:-2.");
    cr_assert_null(s);
    tl_train_schedule_destroy(NULL);
}

Test(host_loop, loop_larger_than_what_remains)
{
    tl_train_schedule *s = new_train(COUNT(100), SOME(7), NONE, 3);
    int64_t sizes[4] = {0}, steps[4] = {0};
    cr_assert_eq(run_train(s, sizes, steps, 4), 1);
    cr_assert_eq(sizes[0], 7);
    cr_assert_eq(steps[0], 10);
    tl_train_schedule_destroy(s);

    /* Exactly one step left after full loops. */
    s = new_train(COUNT(3), SOME(7), NONE, 0);
    int loops = run_train(s, sizes, steps, 4);
    cr_assert_eq(loops, 3);
    assert_sizes(sizes, (const int64_t[]){3, 3, 1}, 3, "3,3,1");
    tl_train_schedule_destroy(s);
}

Test(host_loop, final_step_reached_exactly_stops_without_an_extra_loop)
{
    tl_train_schedule *s = new_train(COUNT(5), SOME(10), NONE, 0);
    int64_t n;
    ASSERT_OK(tl_train_schedule_after_loop(s, 5, 1.0, &n));
    cr_assert_eq(n, 5);
    cr_assert_not(tl_train_schedule_done(s));
    ASSERT_OK(tl_train_schedule_after_loop(s, 10, 1.0, &n));
    cr_assert_eq(n, 0);
    cr_assert(tl_train_schedule_done(s));
    cr_assert_eq(tl_train_schedule_loops(s), 2);
    tl_train_schedule_destroy(s);
}

Test(host_loop, overshooting_the_final_step_stops)
{
    /* gs >= final, not ==: a model that advances the step faster still stops. */
    tl_train_schedule *s = new_train(COUNT(4), SOME(10), NONE, 0);
    int64_t n;
    ASSERT_OK(tl_train_schedule_after_loop(s, 12, 1.0, &n));
    cr_assert_eq(n, 0);
    cr_assert(tl_train_schedule_done(s));
    tl_train_schedule_destroy(s);
}

Test(host_loop, a_loop_without_progress_is_an_error)
{
    tl_train_schedule *s = new_train(COUNT(4), SOME(10), NONE, 6);
    int64_t n = 99;
    ASSERT_ERR(tl_train_schedule_after_loop(s, 6, 1.0, &n), TL_ERUNTIME, "global step did not advance");
    cr_assert_eq(n, 0);
    ASSERT_ERR(tl_train_schedule_after_loop(s, 5, 1.0, &n), TL_ERUNTIME, "(6 before, 5 after)");
    /* Nothing changed: the same loop can still be reported. */
    cr_assert_eq(tl_train_schedule_global_step(s), 6);
    cr_assert_eq(tl_train_schedule_next(s), 4);
    cr_assert_eq(tl_train_schedule_loops(s), 0);
    ASSERT_OK(tl_train_schedule_after_loop(s, 10, 1.0, &n));
    cr_assert_eq(n, 4);
    tl_train_schedule_destroy(s);
}

Test(host_loop, int64_steps)
{
    /* Final step at INT64_MAX, loops of 2^62. */
    tl_train_schedule *s = new_train(COUNT(INT64_C(1) << 62), NONE, SOME(INT64_MAX), 0);
    int64_t sizes[4] = {0}, steps[4] = {0};
    cr_assert_eq(run_train(s, sizes, steps, 4), 2);
    cr_assert_eq(sizes[0], INT64_C(1) << 62);
    cr_assert_eq(sizes[1], (INT64_C(1) << 62) - 1);
    cr_assert_eq(steps[1], INT64_MAX);
    tl_train_schedule_destroy(s);

    /* Relative steps ending exactly at INT64_MAX, ipl larger than them. */
    s = new_train(COUNT(INT64_MAX), SOME(10), NONE, INT64_MAX - 10);
    cr_assert_eq(tl_train_schedule_final_step(s), INT64_MAX);
    cr_assert_eq(tl_train_schedule_next(s), 10);
    tl_train_schedule_destroy(s);

    /* Time mode with an estimate past the steps left. */
    s = new_train(SECONDS(3600), SOME(INT64_C(5000000000)), NONE, 0);
    int64_t n;
    ASSERT_OK(tl_train_schedule_after_loop(s, 1, 1e-6, &n)); /* 3.6e9 steps per hour */
    cr_assert_eq(n, INT64_C(3600000000));
    ASSERT_OK(tl_train_schedule_after_loop(s, 1 + n, 3600.0, &n));
    cr_assert_eq(n, INT64_C(5000000000) - 1 - INT64_C(3600000000));
    tl_train_schedule_destroy(s);
}

Test(host_loop, time_mode_last_loop_is_cut_to_the_steps_left)
{
    tl_train_schedule *s = new_train(SECONDS(10), SOME(25), NONE, 0);
    int64_t n;
    ASSERT_OK(tl_train_schedule_after_loop(s, 1, 0.5, &n)); /* 20 per loop */
    cr_assert_eq(n, 20);
    ASSERT_OK(tl_train_schedule_after_loop(s, 21, 10.0, &n));
    cr_assert_eq(n, 4);
    ASSERT_OK(tl_train_schedule_after_loop(s, 25, 2.0, &n));
    cr_assert_eq(n, 0);
    /* The estimator saw the sizes actually run: 1, 20, 4. */
    cr_assert_eq(tl_iter_estimator_sample_count(tl_train_schedule_estimator(s)), 3);
    tl_train_schedule_destroy(s);

    s = new_train(SECONDS(10), SOME(1), NONE, 0); /* one step: one loop */
    cr_assert_eq(tl_train_schedule_next(s), 1);
    ASSERT_OK(tl_train_schedule_after_loop(s, 1, 60.0, &n));
    cr_assert_eq(n, 0);
    tl_train_schedule_destroy(s);
}

static tl_status create_time_schedule(void *ctx)
{
    (void)ctx;
    tl_train_schedule *s;
    tl_status st = tl_train_schedule_create(SECONDS(30), SOME(100), NONE, 0, NULL, &s);
    if (st != TL_OK)
        return st;
    int64_t n;
    st = tl_train_schedule_after_loop(s, 1, 1.0, &n);
    tl_train_schedule_destroy(s);
    return st;
}

Test(host_loop, train_schedule_unwinds_on_allocation_failure)
{
    cr_assert_geq(tu_oom_sweep(create_time_schedule, NULL, "time-mode schedule"), 2);
}

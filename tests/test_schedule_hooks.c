/* The host loop's hook schedules: checkpoints, logging cadence, host_call
 * firing and the eval loop — spec tpu_estimator.md §3.2, §3.3, §6, §7 and test
 * vectors T26–T32, T53, checked by simulating loops with a fake clock. Loop
 * sizes and the time-mode estimator are in test_schedule.c. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "runtime/schedule.h"
#include "testutil.h"

#define NONE ((tl_opt_int){false, 0})
#define SOME(v) ((tl_opt_int){true, (v)})
#define COUNT(n) ((tl_ipl){TL_IPL_COUNT, (n)})
#define SECONDS(n) ((tl_ipl){TL_IPL_SECONDS, (n)})

static void quiet(void) { tl_set_log_level(TL_LOG_OFF); }

TestSuite(host_hooks, .init = quiet);

static void assert_sizes(const int64_t *got, const int64_t *want, int count, const char *what)
{
    for (int k = 0; k < count; k++)
        cr_assert_eq(got[k], want[k], "%s: entry %d is %lld, want %lld", what, k, (long long)got[k],
                     (long long)want[k]);
}

static tl_train_schedule *new_train(tl_ipl ipl, tl_opt_int steps, tl_opt_int max_steps, int64_t start)
{
    tl_train_schedule *s;
    ASSERT_OK(tl_train_schedule_create(ipl, steps, max_steps, start, NULL, &s));
    return s;
}

/* ---- T26–T28: checkpoints ----------------------------------------------- */

/* Trains steps steps from 0 in loops of ipl, each loop taking loop_secs,
 * and records the steps at which checkpoints are saved. */
static int simulate_checkpoints(tl_ckpt_schedule *c, int64_t ipl, int64_t steps, double loop_secs, bool graceful,
                                int64_t *saved, int cap)
{
    tl_train_schedule *s = new_train(COUNT(ipl), SOME(steps), NONE, 0);
    int count = 0;
    double now = 0;
    if (tl_ckpt_schedule_at_start(c, 0, now))
        saved[count++] = 0;
    int64_t gs = 0;
    for (int64_t n = tl_train_schedule_next(s); n > 0;) {
        gs += n;
        now += loop_secs;
        ASSERT_OK(tl_train_schedule_after_loop(s, gs, loop_secs, &n));
        if (tl_ckpt_schedule_after_loop(c, gs, now)) {
            cr_assert_lt(count, cap);
            saved[count++] = gs;
        }
    }
    if (tl_ckpt_schedule_at_end(c, gs, now, graceful)) {
        cr_assert_lt(count, cap);
        saved[count++] = gs;
    }
    tl_train_schedule_destroy(s);
    return count;
}

Test(host_hooks, t26_checkpoint_every_loop_without_a_duplicate_at_the_end)
{
    tl_ckpt_schedule c;
    ASSERT_OK(tl_ckpt_schedule_init(&c, SOME(100), NONE));
    int64_t saved[32] = {0};
    int n = simulate_checkpoints(&c, 100, 1000, 1.0, false, saved, 32);
    cr_assert_eq(n, 11, "saves: %d", n);
    for (int i = 0; i < 11; i++)
        cr_assert_eq(saved[i], 100 * i, "save %d at %lld", i, (long long)saved[i]);
}

Test(host_hooks, t27_checkpoint_period_rounds_up_to_whole_loops)
{
    tl_ckpt_schedule c;
    ASSERT_OK(tl_ckpt_schedule_init(&c, SOME(250), NONE));
    int64_t saved[32] = {0};
    int n = simulate_checkpoints(&c, 100, 1000, 1.0, false, saved, 32);
    cr_assert_eq(n, 5, "saves: %d", n);
    assert_sizes(saved, (const int64_t[]){0, 300, 600, 900, 1000}, 5, "T27 checkpoint steps");
}

Test(host_hooks, t28_no_checkpoint_hook)
{
    tl_ckpt_schedule c;
    ASSERT_OK(tl_ckpt_schedule_init(&c, NONE, NONE));
    cr_assert_not(c.enabled);
    int64_t saved[32] = {0};
    cr_assert_eq(simulate_checkpoints(&c, 100, 1000, 1.0, false, saved, 32), 0);

    /* The graceful-shutdown save still happens. */
    ASSERT_OK(tl_ckpt_schedule_init(&c, NONE, NONE));
    int n = simulate_checkpoints(&c, 100, 1000, 1.0, true, saved, 32);
    cr_assert_eq(n, 1);
    cr_assert_eq(saved[0], 1000);

    /* Zero is as good as None (TensorFlow tests truthiness). */
    ASSERT_OK(tl_ckpt_schedule_init(&c, SOME(0), NONE));
    cr_assert_not(c.enabled);
    ASSERT_OK(tl_ckpt_schedule_init(&c, NONE, SOME(0)));
    cr_assert_not(c.enabled);
}

Test(host_hooks, checkpoint_arguments)
{
    tl_ckpt_schedule c;
    ASSERT_ERR(tl_ckpt_schedule_init(&c, SOME(100), SOME(600)), TL_EINVAL,
               "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.");
    cr_assert_not(c.enabled);
    ASSERT_ERR(tl_ckpt_schedule_init(&c, SOME(-1), NONE), TL_EINVAL, "save_checkpoints_steps must be >= 0, got -1");
    ASSERT_ERR(tl_ckpt_schedule_init(&c, NONE, SOME(-600)), TL_EINVAL, "save_checkpoints_secs must be >= 0, got -600");
}

Test(host_hooks, checkpoint_by_time)
{
    /* 600 s; loops of 100 steps taking 250 s each: due at 750 s (step 300),
     * 1500 s (600), 2250 s (900), then the end at 1000. */
    tl_ckpt_schedule c;
    ASSERT_OK(tl_ckpt_schedule_init(&c, NONE, SOME(600)));
    int64_t saved[32] = {0};
    int n = simulate_checkpoints(&c, 100, 1000, 250.0, false, saved, 32);
    cr_assert_eq(n, 5, "saves: %d", n);
    assert_sizes(saved, (const int64_t[]){0, 300, 600, 900, 1000}, 5, "checkpoint by time");

    /* Due by the clock but at the step just saved: no second save. */
    ASSERT_OK(tl_ckpt_schedule_init(&c, NONE, SOME(10)));
    cr_assert(tl_ckpt_schedule_at_start(&c, 5, 0));
    cr_assert_not(tl_ckpt_schedule_after_loop(&c, 5, 100));
    cr_assert_not(tl_ckpt_schedule_at_end(&c, 5, 200, true));
}

Test(host_hooks, checkpoint_with_a_short_last_loop)
{
    tl_ckpt_schedule c;
    ASSERT_OK(tl_ckpt_schedule_init(&c, SOME(4), NONE));
    int64_t saved[32] = {0};
    int n = simulate_checkpoints(&c, 4, 10, 1.0, false, saved, 32);
    cr_assert_eq(n, 4);
    assert_sizes(saved, (const int64_t[]){0, 4, 8, 10}, 4, "ipl 4, steps 10");

    /* Without a start save (a runtime that skips it) the first check is due. */
    ASSERT_OK(tl_ckpt_schedule_init(&c, SOME(1000), NONE));
    cr_assert(tl_ckpt_schedule_after_loop(&c, 3, 0));
    cr_assert_not(tl_ckpt_schedule_after_loop(&c, 6, 0));
    /* A period past the largest step is never due (no overflow); the end
     * still saves. */
    ASSERT_OK(tl_ckpt_schedule_init(&c, SOME(INT64_MAX), NONE));
    cr_assert(tl_ckpt_schedule_at_start(&c, 5, 0));
    cr_assert_not(tl_ckpt_schedule_after_loop(&c, INT64_MAX, 0));
    cr_assert(tl_ckpt_schedule_at_end(&c, INT64_MAX, 0, false));
}

/* ---- T29–T31: logging ---------------------------------------------------- */

typedef struct log_trace {
    int64_t loss[256];
    int nloss;
    int64_t rate[256];
    int64_t rate_steps[256];
    double rate_secs[256];
    int nrate;
} log_trace;

/* Loops of ipl steps (count) up to steps, each taking loop_secs. */
static void simulate_logging(tl_log_schedule *l, int64_t ipl, int64_t steps, double loop_secs, log_trace *t)
{
    memset(t, 0, sizeof *t);
    double now = 0;
    for (int64_t gs = 0; gs < steps;) {
        gs += ipl < steps - gs ? ipl : steps - gs;
        now += loop_secs;
        tl_log_event ev;
        tl_log_schedule_after_loop(l, gs, now, &ev);
        if (ev.log_loss) {
            cr_assert_lt(t->nloss, 256);
            t->loss[t->nloss++] = gs;
        }
        if (ev.log_rate) {
            cr_assert_lt(t->nrate, 256);
            t->rate[t->nrate] = gs;
            t->rate_steps[t->nrate] = ev.rate_steps;
            t->rate_secs[t->nrate] = ev.rate_secs;
            t->nrate++;
        }
    }
}

Test(host_hooks, t29_log_every_100_steps_with_ipl_10)
{
    tl_log_schedule l;
    ASSERT_OK(tl_log_schedule_init(&l, COUNT(10), SOME(100)));
    cr_assert_eq(l.every_loops, 10);
    log_trace t;
    simulate_logging(&l, 10, 1000, 2.0, &t);
    cr_assert_eq(t.nloss, 10);
    for (int i = 0; i < t.nloss; i++) /* 10, 110, 210, ... */
        cr_assert_eq(t.loss[i], 10 + 100 * i, "loss log %d at %lld", i, (long long)t.loss[i]);
    cr_assert_eq(t.nrate, 99, "rate logs: %d", t.nrate);
    for (int i = 0; i < t.nrate; i++) { /* 20, 30, 40, ...: every loop, the first one only recorded */
        cr_assert_eq(t.rate[i], 20 + 10 * i, "rate log %d at %lld", i, (long long)t.rate[i]);
        cr_assert_eq(t.rate_steps[i], 10);
        cr_assert_eq(t.rate_secs[i], 2.0);
    }
}

Test(host_hooks, t30_defaults_log_every_50_loops_of_2)
{
    tl_log_schedule l;
    ASSERT_OK(tl_log_schedule_init(&l, COUNT(2), SOME(100)));
    cr_assert_eq(l.every_loops, 50);
    cr_assert_eq(l.every_steps, 50);
    log_trace t;
    simulate_logging(&l, 2, 400, 0.5, &t);
    assert_sizes(t.loss, (const int64_t[]){2, 102, 202, 302}, 4, "T30 loss");
    cr_assert_eq(t.nloss, 4);
    assert_sizes(t.rate, (const int64_t[]){52, 102, 152, 202, 252, 302, 352}, 7, "T30 rate");
    cr_assert_eq(t.nrate, 7);
    cr_assert_eq(t.rate_steps[0], 50);
    cr_assert_eq(t.rate_secs[0], 12.5);
}

Test(host_hooks, t31_time_mode_logs_every_ipl_seconds)
{
    tl_log_schedule l;
    ASSERT_OK(tl_log_schedule_init(&l, SECONDS(30), SOME(100)));
    cr_assert(l.by_time);
    /* Loops of 10 s ending at 10, 20, ..., 200 s (the step advances 7 per loop). */
    tl_log_event ev;
    int64_t loss_at[16] = {0}, rate_at[16] = {0};
    int nl = 0, nr = 0;
    for (int k = 1; k <= 20; k++) {
        tl_log_schedule_after_loop(&l, 7 * k, 10.0 * k, &ev);
        if (ev.log_loss)
            loss_at[nl++] = 10 * k;
        if (ev.log_rate) {
            cr_assert_eq(ev.rate_secs, 30.0);
            cr_assert_eq(ev.rate_steps, 21);
            rate_at[nr++] = 10 * k;
        }
    }
    /* Loss at the first loop, then every 30 s; the rate hook records at 10 s
     * and logs every 30 s after. */
    assert_sizes(loss_at, (const int64_t[]){10, 40, 70, 100, 130, 160, 190}, 7, "T31 loss (s)");
    cr_assert_eq(nl, 7);
    assert_sizes(rate_at, (const int64_t[]){40, 70, 100, 130, 160, 190}, 6, "T31 rate (s)");
    cr_assert_eq(nr, 6);

    /* In time mode the hooks exist even with log_step_count_steps None. */
    ASSERT_OK(tl_log_schedule_init(&l, SECONDS(30), NONE));
    cr_assert(l.enabled);
}

Test(host_hooks, logging_disabled_and_short_periods)
{
    tl_log_schedule l;
    ASSERT_OK(tl_log_schedule_init(&l, COUNT(10), NONE));
    log_trace t;
    simulate_logging(&l, 10, 100, 1.0, &t);
    cr_assert_eq(t.nloss + t.nrate, 0, "no logging hooks when L is None");

    /* L < ipl: L' = 1, every loop. */
    ASSERT_OK(tl_log_schedule_init(&l, COUNT(10), SOME(5)));
    cr_assert_eq(l.every_loops, 1);
    simulate_logging(&l, 10, 50, 1.0, &t);
    cr_assert_eq(t.nloss, 5);
    cr_assert_eq(t.nrate, 4);

    /* L not a multiple of ipl: ceil(250 / 100) = 3 loops. */
    ASSERT_OK(tl_log_schedule_init(&l, COUNT(100), SOME(250)));
    cr_assert_eq(l.every_loops, 3);
    simulate_logging(&l, 100, 1000, 1.0, &t);
    assert_sizes(t.loss, (const int64_t[]){100, 400, 700, 1000}, 4, "L=250 ipl=100 loss");
    cr_assert_eq(t.nloss, 4);
    /* The rate period is 3 global steps, so every loop after the first. */
    cr_assert_eq(t.nrate, 9);

    /* The same step twice (a loop that did not advance) never re-logs the rate. */
    ASSERT_OK(tl_log_schedule_init(&l, COUNT(1), SOME(1)));
    tl_log_event ev;
    tl_log_schedule_after_loop(&l, 1, 1.0, &ev);
    tl_log_schedule_after_loop(&l, 1, 2.0, &ev);
    cr_assert_not(ev.log_rate);
    cr_assert(ev.log_loss);

    ASSERT_ERR(tl_log_schedule_init(&l, COUNT(0), SOME(100)), TL_EINVAL, "iterations_per_loop must be positive");
    cr_assert_not(l.enabled);
}

/* ---- T32: host_call, T53: eval ------------------------------------------ */

Test(host_hooks, t32_host_call_every_n)
{
    int64_t fired[10] = {0};
    int n = 0;
    for (int64_t i = 0; i < 10; i++)
        if (tl_host_call_fires(i, 4))
            fired[n++] = i;
    cr_assert_eq(n, 3);
    assert_sizes(fired, (const int64_t[]){0, 4, 8}, 3, "every_n=4, ipl=10");
    cr_assert_eq(tl_host_call_count(10, 4), 3);
    cr_assert_eq(tl_host_call_count(10, 1), 10);
    for (int64_t i = 0; i < 10; i++)
        cr_assert(tl_host_call_fires(i, 1));
    /* Loop-local: the short last loop of 2 fires once, at its step 0. */
    cr_assert_eq(tl_host_call_count(2, 4), 1);
    cr_assert_eq(tl_host_call_count(0, 4), 0);
    cr_assert_eq(tl_host_call_count(8, 4), 2);
    cr_assert_eq(tl_host_call_count(INT64_MAX, 1), INT64_MAX);

    ASSERT_OK(tl_host_call_check_every_n(1));
    ASSERT_ERR(tl_host_call_check_every_n(0), TL_EINVAL, "experimental_host_call_every_n_steps must be >= 1, got 0");
    ASSERT_ERR(tl_host_call_check_every_n(-2), TL_EINVAL, "got -2");
}

Test(host_hooks, t53_eval_is_one_loop_of_steps)
{
    int64_t n = 0;
    ASSERT_OK(tl_eval_loop_size(SOME(6), &n)); /* ipl=4 is not consulted */
    cr_assert_eq(n, 6);
    ASSERT_ERR(tl_eval_loop_size(NONE, &n), TL_EINVAL, "Evaluate `steps` must be set on TPU. Cannot be `None`.");
    ASSERT_ERR(tl_eval_loop_size(SOME(-321), &n), TL_EINVAL, "Eval steps must be positive, got -321");
    ASSERT_ERR(tl_eval_loop_size(SOME(0), &n), TL_EINVAL, "got 0");
    cr_assert_eq(n, 6);
}

/*
 * test_thread.c — the thread primitives of base/ on one thread: the clock,
 * argument errors, the barrier of one thread and a broken barrier, timed
 * waits that expire (also when a spin budget outlasts the deadline), the
 * queue's order, capacity and close semantics, and creation under
 * allocation failure. The threaded behaviour is in
 * test_mt_thread.c.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "base/thread.h"
#include "testutil.h"

Test(thread, clock_is_monotonic_and_counts_nanoseconds)
{
    int64_t a = tl_now_ns();
    struct timespec ts = {0, 2000000}; /* 2 ms */
    nanosleep(&ts, NULL);
    int64_t b = tl_now_ns();
    cr_assert_geq(b - a, 2000000, "slept 2 ms, the clock moved %lld ns", (long long)(b - a));
    cr_assert_lt(b - a, 2000000000, "slept 2 ms, the clock moved %lld ns", (long long)(b - a));
    for (int i = 0; i < 1000; i++) {
        int64_t c = tl_now_ns();
        cr_assert_geq(c, b, "the clock went back");
        b = c;
    }
}

Test(thread, clock_deadlines_saturate)
{
    int64_t now = tl_now_ns();
    cr_assert_eq(tl_deadline_after_ns(INT64_MAX), TL_NO_DEADLINE);
    cr_assert_eq(tl_deadline_after_ns(INT64_MAX - 5), TL_NO_DEADLINE);
    int64_t d = tl_deadline_after_ns(-5);
    cr_assert(d >= now && d < now + 1000000000, "a negative wait is now");
    d = tl_deadline_after_ns(1000000000);
    cr_assert(d >= now + 1000000000 && d < now + 2000000000);
}

Test(thread, barrier_init_rejects_bad_arguments)
{
    tl_barrier b;
    ASSERT_ERR(tl_barrier_init(&b, 0, 0), TL_EINVAL, "count must be >= 1, got 0");
    ASSERT_ERR(tl_barrier_init(&b, -3, 0), TL_EINVAL, "got -3");
    ASSERT_ERR(tl_barrier_init(&b, 2, -1), TL_EINVAL, "spin_ns must be >= 0, got -1");
}

Test(thread, barrier_one_thread_never_waits)
{
    tl_barrier b;
    ASSERT_OK(tl_barrier_init(&b, 1, 0));
    for (int i = 0; i < 100; i++)
        cr_assert_eq(tl_barrier_wait(&b), TL_WAIT_OK);
    cr_assert_not(tl_barrier_is_broken(&b));
    tl_barrier_close(&b);
}

Test(thread, barrier_broken_stays_broken)
{
    tl_barrier b;
    ASSERT_OK(tl_barrier_init(&b, 1, 100));
    tl_barrier_break(&b);
    tl_barrier_break(&b); /* idempotent */
    cr_assert(tl_barrier_is_broken(&b));
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tl_barrier_wait(&b), TL_WAIT_BROKEN, "even a one-thread barrier stays broken");
        cr_assert_eq(tl_barrier_wait_until(&b, 0), TL_WAIT_BROKEN);
    }
    tl_barrier_close(&b);
}

Test(thread, barrier_timed_wait_expires_and_withdraws)
{
    tl_barrier b;
    ASSERT_OK(tl_barrier_init(&b, 2, 50));
    int64_t t0 = tl_now_ns();
    cr_assert_eq(tl_barrier_wait_until(&b, tl_deadline_after_ns(20000000)), TL_WAIT_TIMEOUT);
    int64_t waited = tl_now_ns() - t0;
    cr_assert_geq(waited, 20000000, "returned after %lld ns, before the 20 ms deadline", (long long)waited);
    /* A deadline in the past is one attempt, and the withdrawals left the
     * round empty: two more timeouts, not an opened round. */
    cr_assert_eq(tl_barrier_wait_until(&b, 0), TL_WAIT_TIMEOUT);
    cr_assert_eq(tl_barrier_wait_until(&b, tl_now_ns()), TL_WAIT_TIMEOUT);
    tl_barrier_close(&b);
}

Test(thread, queue_create_rejects_bad_arguments)
{
    tl_queue *q = (tl_queue *)1;
    ASSERT_ERR(tl_queue_create(0, 8, &q), TL_EINVAL, "capacity must be >= 1, got 0");
    cr_assert_null(q);
    ASSERT_ERR(tl_queue_create(4, 0, &q), TL_EINVAL, "item_size must be >= 1, got 0");
    ASSERT_ERR(tl_queue_create(SIZE_MAX / 2, 16, &q), TL_EINVAL, "overflows");
    cr_assert_null(q);
    tl_queue_destroy(NULL);
}

Test(thread, queue_fifo_with_wrap_around)
{
    tl_queue *q;
    ASSERT_OK(tl_queue_create(3, sizeof(int), &q));
    cr_assert_eq(tl_queue_capacity(q), 3);
    int next_in = 0, next_out = 0;
    /* Interleaved pushes and pops walk the ring past its end many times. */
    for (int round = 0; round < 20; round++) {
        while (tl_queue_len(q) < 3) {
            cr_assert_eq(tl_queue_push(q, &next_in), TL_WAIT_OK);
            next_in++;
        }
        for (int k = 0; k < 1 + round % 3; k++) {
            int v = -1;
            cr_assert_eq(tl_queue_pop(q, &v), TL_WAIT_OK);
            cr_assert_eq(v, next_out, "popped %d, want %d", v, next_out);
            next_out++;
        }
    }
    tl_queue_destroy(q);
}

Test(thread, queue_items_are_copied_whole)
{
    typedef struct {
        double a;
        char tag[13];
    } item;
    tl_queue *q;
    ASSERT_OK(tl_queue_create(2, sizeof(item), &q));
    item in = {3.5, "hello, queue"};
    cr_assert_eq(tl_queue_push(q, &in), TL_WAIT_OK);
    in.a = 0;
    in.tag[0] = 'X'; /* the queue holds its own copy */
    item out;
    cr_assert_eq(tl_queue_pop(q, &out), TL_WAIT_OK);
    cr_assert_eq(out.a, 3.5);
    cr_assert_str_eq(out.tag, "hello, queue");
    tl_queue_destroy(q);
}

Test(thread, queue_full_and_empty_time_out)
{
    tl_queue *q;
    ASSERT_OK(tl_queue_create(2, sizeof(int), &q));
    int v = 1, out = 0;
    cr_assert_eq(tl_queue_pop_until(q, &out, 0), TL_WAIT_TIMEOUT, "empty: a past deadline does not block");
    int64_t t0 = tl_now_ns();
    cr_assert_eq(tl_queue_pop_until(q, &out, tl_deadline_after_ns(10000000)), TL_WAIT_TIMEOUT);
    cr_assert_geq(tl_now_ns() - t0, 10000000, "returned before the deadline");
    cr_assert_eq(tl_queue_push_until(q, &v, 0), TL_WAIT_OK, "room: a past deadline still pushes");
    v = 2;
    cr_assert_eq(tl_queue_push_until(q, &v, 0), TL_WAIT_OK);
    v = 3;
    cr_assert_eq(tl_queue_push_until(q, &v, tl_deadline_after_ns(5000000)), TL_WAIT_TIMEOUT, "full");
    cr_assert_eq(tl_queue_len(q), 2, "a timed-out push adds nothing");
    cr_assert_eq(tl_queue_pop_until(q, &out, 0), TL_WAIT_OK);
    cr_assert_eq(out, 1);
    tl_queue_destroy(q);
}

Test(thread, queue_spin_rejects_a_negative_budget)
{
    tl_queue *q;
    ASSERT_OK(tl_queue_create(2, sizeof(int), &q));
    ASSERT_ERR(tl_queue_set_spin(q, -1), TL_EINVAL, "spin_ns must be >= 0, got -1");
    ASSERT_OK(tl_queue_set_spin(q, 0));
    ASSERT_OK(tl_queue_set_spin(q, INT64_MAX)); /* no overflow in the spin's end */
    int v = 7, out = 0;
    cr_assert_eq(tl_queue_push(q, &v), TL_WAIT_OK, "a queue with room never spins");
    cr_assert_eq(tl_queue_pop(q, &out), TL_WAIT_OK);
    cr_assert_eq(out, 7);
    tl_queue_destroy(q);
}

Test(thread, a_deadline_cuts_a_queue_spin_short)
{
    /* A 10 s budget, a 20 ms deadline: the wait ends at the deadline. */
    tl_queue *q;
    ASSERT_OK(tl_queue_create(1, sizeof(int), &q));
    ASSERT_OK(tl_queue_set_spin(q, 10000000000LL));
    int v = 1;
    int64_t t0 = tl_now_ns();
    cr_assert_eq(tl_queue_pop_until(q, &v, tl_deadline_after_ns(20000000)), TL_WAIT_TIMEOUT);
    int64_t waited = tl_now_ns() - t0;
    cr_assert_geq(waited, 20000000, "returned after %lld ns, before the deadline", (long long)waited);
    cr_assert_lt(waited, 5000000000LL, "spun out its budget: %lld ns", (long long)waited);
    cr_assert_eq(tl_queue_push(q, &v), TL_WAIT_OK);
    t0 = tl_now_ns();
    cr_assert_eq(tl_queue_push_until(q, &v, tl_deadline_after_ns(20000000)), TL_WAIT_TIMEOUT, "full");
    waited = tl_now_ns() - t0;
    cr_assert(waited >= 20000000 && waited < 5000000000LL, "a full queue waited %lld ns", (long long)waited);
    tl_queue_destroy(q);
}

Test(thread, a_deadline_cuts_a_barrier_spin_short)
{
    tl_barrier b;
    ASSERT_OK(tl_barrier_init(&b, 2, 10000000000LL));
    int64_t t0 = tl_now_ns();
    cr_assert_eq(tl_barrier_wait_until(&b, tl_deadline_after_ns(20000000)), TL_WAIT_TIMEOUT);
    int64_t waited = tl_now_ns() - t0;
    cr_assert(waited >= 20000000 && waited < 5000000000LL, "waited %lld ns for a 20 ms deadline", (long long)waited);
    tl_barrier_close(&b);
}

Test(thread, queue_close_refuses_pushes_and_drains_pops)
{
    tl_queue *q;
    ASSERT_OK(tl_queue_create(4, sizeof(int), &q));
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tl_queue_push(q, &i), TL_WAIT_OK);
    tl_queue_close(q);
    tl_queue_close(q); /* idempotent */
    int v = 99;
    cr_assert_eq(tl_queue_push(q, &v), TL_WAIT_CLOSED);
    cr_assert_eq(tl_queue_push_until(q, &v, 0), TL_WAIT_CLOSED);
    cr_assert_eq(tl_queue_len(q), 3, "a refused push adds nothing");
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tl_queue_pop(q, &v), TL_WAIT_OK, "a closed queue still hands out item %d", i);
        cr_assert_eq(v, i);
    }
    cr_assert_eq(tl_queue_pop(q, &v), TL_WAIT_CLOSED, "closed and empty");
    cr_assert_eq(tl_queue_pop_until(q, &v, tl_deadline_after_ns(1000000000)), TL_WAIT_CLOSED,
                 "closed and empty returns at once, not at the deadline");
    tl_queue_destroy(q);
}

static tl_status make_queue(void *ctx)
{
    (void)ctx;
    tl_queue *q;
    tl_status st = tl_queue_create(16, 24, &q);
    if (st != TL_OK)
        return st;
    tl_queue_destroy(q);
    return TL_OK;
}

Test(thread, queue_creation_unwinds_on_allocation_failure)
{
    cr_assert_eq(tu_oom_sweep(make_queue, NULL, "tl_queue_create"), 2);
}

Test(thread, pin_rejects_cpus_out_of_range)
{
    ASSERT_ERR(tl_thread_pin_self(-1), TL_EINVAL, "cpu must be in [0, ");
    ASSERT_ERR(tl_thread_pin_self(CPU_SETSIZE), TL_EINVAL, "got 1024");
    tl_thread t = {.started = false};
    ASSERT_ERR(tl_thread_pin(&t, 0), TL_EINVAL, "not started");
    ASSERT_ERR(tl_thread_join(&t, NULL), TL_EINVAL, "not started");
    ASSERT_ERR(tl_thread_start(&t, NULL, NULL), TL_EINVAL, "start function is NULL");
    cr_assert_not(t.started);
}

Test(thread, pin_outside_the_affinity_mask_is_a_status)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int outside = -1;
    for (int c = CPU_SETSIZE - 1; c >= 0 && outside < 0; c--)
        if (!CPU_ISSET(c, &set))
            outside = c;
    cr_assert_geq(outside, 0, "every CPU is in the mask");
    char frag[48];
    snprintf(frag, sizeof frag, "cannot pin to cpu %d", outside);
    ASSERT_ERR(tl_thread_pin_self(outside), TL_ERUNTIME, frag);
    /* The refused pin changed nothing. */
    cpu_set_t after;
    CPU_ZERO(&after);
    cr_assert_eq(sched_getaffinity(0, sizeof after, &after), 0);
    cr_assert(CPU_EQUAL(&set, &after));
}

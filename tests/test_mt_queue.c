/*
 * test_mt_queue.c — the bounded queue under real threads (also a
 * ThreadSanitizer target), with its spin budget on and off: exact FIFO order
 * from one producer at capacities 1 (where a lock-free ring most easily
 * confuses full with free), 3 and 64; many producers and consumers with
 * items of an odd size; a close that lands among pushes in flight (nothing
 * admitted is lost, nothing refused appears); a close that wakes spinning
 * and sleeping waiters; a spin that runs out and sleeps; timed and untimed
 * waiters on one queue; and ping-pong hand-offs, where a lost wake-up shows
 * as a timeout rather than a hang.
 *
 * Worker threads never assert: they record what went wrong, and the test
 * thread asserts after joining them.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/thread.h"

/* A spin budget far longer than any test: a wait that spins ends by the
 * event it polls for, never by the budget. */
#define LONG_SPIN 10000000000LL
#define SPIN 20000 /* the runtime's budget */
/* How long a wait in these tests may take before it counts as lost. */
#define LOST_NS 10000000000LL

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static tl_queue *make_queue(size_t capacity, size_t item_size, int64_t spin_ns)
{
    tl_queue *q = NULL;
    cr_assert_eq(tl_queue_create(capacity, item_size, &q), TL_OK);
    cr_assert_eq(tl_queue_set_spin(q, spin_ns), TL_OK);
    return q;
}

/* ---- one producer, one consumer ------------------------------------------ */

#define SPSC_ITEMS 20000

typedef struct spsc_run {
    tl_queue *q;
    char err[128];
} spsc_run;

static void *spsc_producer(void *arg)
{
    spsc_run *run = arg;
    for (uint64_t i = 0; i < SPSC_ITEMS; i++)
        if (tl_queue_push(run->q, &i) != TL_WAIT_OK)
            return (void *)"a push failed";
    tl_queue_close(run->q);
    return NULL;
}

static void *spsc_consumer(void *arg)
{
    spsc_run *run = arg;
    uint64_t v, expect = 0;
    tl_wait_result r;
    while ((r = tl_queue_pop_until(run->q, &v, tl_deadline_after_ns(LOST_NS))) == TL_WAIT_OK) {
        if (v != expect) {
            snprintf(run->err, sizeof run->err, "got %llu where %llu was due", (unsigned long long)v,
                     (unsigned long long)expect);
            return NULL;
        }
        expect++;
    }
    if (r != TL_WAIT_CLOSED || expect != SPSC_ITEMS)
        snprintf(run->err, sizeof run->err, "ended with %d after %llu items", (int)r, (unsigned long long)expect);
    return NULL;
}

Test(mt_queue, one_producer_keeps_exact_order_at_every_capacity_spinning_or_not)
{
    static const size_t caps[] = {1, 3, 64};
    static const int64_t spins[] = {0, SPIN};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        for (size_t s = 0; s < sizeof spins / sizeof spins[0]; s++) {
            spsc_run run = {make_queue(caps[c], sizeof(uint64_t), spins[s]), ""};
            tl_thread p, k;
            cr_assert_eq(tl_thread_start(&k, spsc_consumer, &run), TL_OK);
            cr_assert_eq(tl_thread_start(&p, spsc_producer, &run), TL_OK);
            void *perr = NULL;
            cr_assert_eq(tl_thread_join(&p, &perr), TL_OK);
            cr_assert_eq(tl_thread_join(&k, NULL), TL_OK);
            cr_assert_null(perr, "capacity %zu, spin %lld: %s", caps[c], (long long)spins[s], (const char *)perr);
            cr_assert_str_eq(run.err, "", "capacity %zu, spin %lld: %s", caps[c], (long long)spins[s], run.err);
            cr_assert_eq(tl_queue_len(run.q), 0);
            tl_queue_destroy(run.q);
        }
    }
}

/* ---- many producers and consumers ---------------------------------------- */

#define NPROD 4
#define NCONS 4
#define PER_PRODUCER 3000

/* 13 bytes: the cells round up, the copies must not. */
typedef struct odd_item {
    unsigned char producer;
    unsigned char seq[4]; /* little-endian */
    unsigned char fill[8]; /* producer ^ seq, checked on the way out */
} odd_item;

static odd_item make_item(int producer, int seq)
{
    odd_item it;
    it.producer = (unsigned char)producer;
    for (int b = 0; b < 4; b++)
        it.seq[b] = (unsigned char)(seq >> (8 * b));
    for (int b = 0; b < 8; b++)
        it.fill[b] = (unsigned char)(producer ^ seq ^ b);
    return it;
}

static int item_seq(const odd_item *it)
{
    return it->seq[0] | it->seq[1] << 8 | it->seq[2] << 16 | it->seq[3] << 24;
}

typedef struct mpmc_run mpmc_run;

typedef struct mpmc_thread {
    int id;
    mpmc_run *run;
    int ok_pushes;                           /* producer: pushes that returned OK */
    int last[NPROD];                         /* consumer: last seq per producer */
    unsigned char seen[NPROD][PER_PRODUCER]; /* consumer: times each item came */
    char err[128];
} mpmc_thread;

struct mpmc_run {
    tl_queue *q;
    int per_producer; /* items each producer tries to push */
    mpmc_thread w[NPROD + NCONS];
};

static void *mpmc_producer(void *arg)
{
    mpmc_thread *w = arg;
    for (int s = 0; s < w->run->per_producer; s++) {
        odd_item it = make_item(w->id, s);
        tl_wait_result r = tl_queue_push(w->run->q, &it);
        if (r == TL_WAIT_CLOSED)
            return NULL;
        if (r != TL_WAIT_OK) {
            snprintf(w->err, sizeof w->err, "push %d returned %d", s, (int)r);
            return NULL;
        }
        w->ok_pushes++;
    }
    return NULL;
}

static void *mpmc_consumer(void *arg)
{
    mpmc_thread *w = arg;
    for (int p = 0; p < NPROD; p++)
        w->last[p] = -1;
    odd_item it;
    tl_wait_result r;
    while ((r = tl_queue_pop_until(w->run->q, &it, tl_deadline_after_ns(LOST_NS))) == TL_WAIT_OK) {
        int p = it.producer, s = item_seq(&it);
        if (p >= NPROD || s < 0 || s >= PER_PRODUCER) {
            snprintf(w->err, sizeof w->err, "bad item (%d, %d)", p, s);
            return NULL;
        }
        odd_item want = make_item(p, s);
        if (memcmp(&it, &want, sizeof it) != 0) {
            snprintf(w->err, sizeof w->err, "item (%d, %d) arrived torn", p, s);
            return NULL;
        }
        if (s <= w->last[p]) {
            snprintf(w->err, sizeof w->err, "producer %d: item %d after %d", p, s, w->last[p]);
            return NULL;
        }
        w->last[p] = s;
        w->seen[p][s]++;
    }
    if (r != TL_WAIT_CLOSED)
        snprintf(w->err, sizeof w->err, "a pop returned %d", (int)r);
    return NULL;
}

/* Runs NPROD producers and NCONS consumers on one queue. close_after_us < 0:
 * the producers push everything, then the queue is closed; otherwise it is
 * closed that long after the start, among the pushes. Then checks that every
 * admitted push came out exactly once, in its producer's order, and that no
 * refused one did. */
static void run_mpmc(size_t capacity, int64_t spin_ns, int per_producer, long close_after_us)
{
    mpmc_run *run = calloc(1, sizeof *run);
    cr_assert_not_null(run);
    run->q = make_queue(capacity, sizeof(odd_item), spin_ns);
    run->per_producer = per_producer;
    tl_thread th[NPROD + NCONS];
    for (int i = 0; i < NPROD + NCONS; i++) {
        run->w[i].id = i < NPROD ? i : i - NPROD;
        run->w[i].run = run;
        cr_assert_eq(tl_thread_start(&th[i], i < NPROD ? mpmc_producer : mpmc_consumer, &run->w[i]), TL_OK);
    }
    if (close_after_us >= 0) {
        sleep_us(close_after_us);
        tl_queue_close(run->q);
    }
    for (int i = 0; i < NPROD; i++)
        cr_assert_eq(tl_thread_join(&th[i], NULL), TL_OK);
    tl_queue_close(run->q);
    for (int i = NPROD; i < NPROD + NCONS; i++)
        cr_assert_eq(tl_thread_join(&th[i], NULL), TL_OK);
    for (int i = 0; i < NPROD + NCONS; i++)
        cr_assert_str_eq(run->w[i].err, "", "spin %lld, %s %d: %s", (long long)spin_ns,
                         i < NPROD ? "producer" : "consumer", run->w[i].id, run->w[i].err);
    for (int p = 0; p < NPROD; p++) {
        int admitted = run->w[p].ok_pushes;
        if (close_after_us < 0)
            cr_assert_eq(admitted, per_producer);
        for (int s = 0; s < per_producer; s++) {
            int times = 0;
            for (int c = 0; c < NCONS; c++)
                times += run->w[NPROD + c].seen[p][s];
            cr_assert_eq(times, s < admitted ? 1 : 0, "spin %lld: item (%d, %d) came %d times (%d admitted)",
                         (long long)spin_ns, p, s, times, admitted);
        }
    }
    cr_assert_eq(tl_queue_len(run->q), 0);
    tl_queue_destroy(run->q);
    free(run);
}

Test(mt_queue, many_producers_and_consumers_spinning_deliver_each_item_once_in_order)
{
    run_mpmc(8, SPIN, PER_PRODUCER, -1);
    run_mpmc(1, SPIN, PER_PRODUCER / 4, -1);
}

Test(mt_queue, many_producers_and_consumers_sleeping_deliver_each_item_once_in_order)
{
    run_mpmc(8, 0, PER_PRODUCER, -1);
}

Test(mt_queue, close_among_pushes_loses_no_admitted_item_and_lets_in_no_refused_one)
{
    /* The producers try more than they can push in the time, so the close
     * lands among pushes in flight. */
    run_mpmc(4, 0, PER_PRODUCER, 300);
    run_mpmc(4, SPIN, PER_PRODUCER, 300);
    run_mpmc(1, SPIN, PER_PRODUCER, 100);
}

/* ---- close and deadlines under waiting threads --------------------------- */

typedef struct waiter {
    tl_queue *q;
    bool push;
    tl_wait_result res;
    int64_t waited_ns;
} waiter;

static void *wait_on(void *arg)
{
    waiter *w = arg;
    int v = 5;
    int64_t t0 = tl_now_ns();
    w->res = w->push ? tl_queue_push(w->q, &v) : tl_queue_pop(w->q, &v);
    w->waited_ns = tl_now_ns() - t0;
    return NULL;
}

Test(mt_queue, close_wakes_spinning_and_sleeping_pushers_and_poppers)
{
    /* [spin][push]: an empty queue for each popper, a full one for each
     * pusher; the spinning ones are still spinning at the close. */
    waiter w[2][2];
    tl_thread th[2][2];
    for (int s = 0; s < 2; s++) {
        for (int p = 0; p < 2; p++) {
            w[s][p] = (waiter){make_queue(2, sizeof(int), s ? LONG_SPIN : 0), p == 1, TL_WAIT_OK, 0};
            int one = 1;
            for (int k = 0; p == 1 && k < 2; k++)
                cr_assert_eq(tl_queue_push(w[s][p].q, &one), TL_WAIT_OK);
            cr_assert_eq(tl_thread_start(&th[s][p], wait_on, &w[s][p]), TL_OK);
        }
    }
    sleep_us(20000);
    for (int s = 0; s < 2; s++)
        for (int p = 0; p < 2; p++)
            tl_queue_close(w[s][p].q);
    for (int s = 0; s < 2; s++) {
        for (int p = 0; p < 2; p++) {
            cr_assert_eq(tl_thread_join(&th[s][p], NULL), TL_OK);
            cr_assert_eq(w[s][p].res, TL_WAIT_CLOSED, "%s %s: returned %d", s ? "spinning" : "sleeping",
                         p ? "pusher" : "popper", (int)w[s][p].res);
            cr_assert_lt(w[s][p].waited_ns, LONG_SPIN / 2, "%s %s waited out its spin",
                         s ? "spinning" : "sleeping", p ? "pusher" : "popper");
            int v = 0;
            for (int k = 0; p == 1 && k < 2; k++)
                cr_assert_eq(tl_queue_pop(w[s][p].q, &v), TL_WAIT_OK, "the items before the close stay");
            cr_assert_eq(tl_queue_pop(w[s][p].q, &v), TL_WAIT_CLOSED);
            tl_queue_destroy(w[s][p].q);
        }
    }
}

typedef struct late_push {
    tl_queue *q;
    long delay_us;
} late_push;

static void *push_late(void *arg)
{
    late_push *lp = arg;
    sleep_us(lp->delay_us);
    int v = 42;
    tl_queue_push(lp->q, &v);
    return NULL;
}

Test(mt_queue, a_spin_that_runs_out_sleeps_and_the_push_wakes_it)
{
    /* 1 ms of spinning, then a sleep; the push comes at 50 ms. */
    late_push lp = {make_queue(2, sizeof(int), 1000000), 50000};
    tl_thread th;
    cr_assert_eq(tl_thread_start(&th, push_late, &lp), TL_OK);
    int v = 0;
    int64_t t0 = tl_now_ns();
    cr_assert_eq(tl_queue_pop_until(lp.q, &v, tl_deadline_after_ns(LOST_NS)), TL_WAIT_OK);
    cr_assert_lt(tl_now_ns() - t0, LOST_NS / 2, "woken by the push, not the deadline");
    cr_assert_eq(v, 42);
    cr_assert_eq(tl_thread_join(&th, NULL), TL_OK);
    tl_queue_destroy(lp.q);
}

/* ---- timed and untimed waiters, hand-offs --------------------------------- */

#define MIXED_ITEMS 20000

typedef struct mixed_run {
    tl_queue *q;
    atomic_long got;     /* items popped by both consumers */
    atomic_long timeouts; /* of the timed consumer */
    char err[2][128];
} mixed_run;

static void *timed_consumer(void *arg)
{
    mixed_run *run = arg;
    int v;
    for (;;) {
        /* Deadlines of 0-100 µs: many expire, some while a push is on its
         * way, which must not strand the untimed consumer's wake-up. */
        tl_wait_result r = tl_queue_pop_until(run->q, &v, tl_deadline_after_ns(100000));
        if (r == TL_WAIT_CLOSED)
            return NULL;
        if (r == TL_WAIT_TIMEOUT)
            atomic_fetch_add(&run->timeouts, 1);
        else if (r == TL_WAIT_OK)
            atomic_fetch_add(&run->got, 1);
        else {
            snprintf(run->err[0], sizeof run->err[0], "a timed pop returned %d", (int)r);
            return NULL;
        }
    }
}

static void *untimed_consumer(void *arg)
{
    mixed_run *run = arg;
    int v;
    tl_wait_result r;
    while ((r = tl_queue_pop_until(run->q, &v, tl_deadline_after_ns(LOST_NS))) == TL_WAIT_OK)
        atomic_fetch_add(&run->got, 1);
    if (r != TL_WAIT_CLOSED)
        snprintf(run->err[1], sizeof run->err[1], "an untimed pop returned %d: a lost wake-up", (int)r);
    return NULL;
}

Test(mt_queue, timed_waiters_that_expire_strand_no_untimed_waiter)
{
    for (int spin = 0; spin < 2; spin++) {
        mixed_run *run = calloc(1, sizeof *run);
        cr_assert_not_null(run);
        run->q = make_queue(2, sizeof(int), spin ? SPIN : 0);
        tl_thread a, b;
        cr_assert_eq(tl_thread_start(&a, timed_consumer, run), TL_OK);
        cr_assert_eq(tl_thread_start(&b, untimed_consumer, run), TL_OK);
        for (int i = 0; i < MIXED_ITEMS; i++) {
            cr_assert_eq(tl_queue_push(run->q, &i), TL_WAIT_OK);
            if (i % 1000 == 0)
                sleep_us(200); /* let both consumers fall asleep */
        }
        tl_queue_close(run->q);
        cr_assert_eq(tl_thread_join(&a, NULL), TL_OK);
        cr_assert_eq(tl_thread_join(&b, NULL), TL_OK);
        cr_assert_str_eq(run->err[0], "", "spin %d: %s", spin, run->err[0]);
        cr_assert_str_eq(run->err[1], "", "spin %d: %s", spin, run->err[1]);
        cr_assert_eq(atomic_load(&run->got), MIXED_ITEMS, "spin %d", spin);
        tl_queue_destroy(run->q);
        free(run);
    }
}

#define ROUND_TRIPS 20000

typedef struct ping_run {
    tl_queue *there, *back; /* capacity 1 each */
    char err[128];
} ping_run;

static void *ponger(void *arg)
{
    ping_run *run = arg;
    int v;
    for (int i = 0; i < ROUND_TRIPS; i++) {
        tl_wait_result r = tl_queue_pop_until(run->there, &v, tl_deadline_after_ns(LOST_NS));
        if (r != TL_WAIT_OK || v != i) {
            snprintf(run->err, sizeof run->err, "round %d: pop %d, value %d", i, (int)r, v);
            return NULL;
        }
        v = -v;
        if (tl_queue_push(run->back, &v) != TL_WAIT_OK) {
            snprintf(run->err, sizeof run->err, "round %d: the push back failed", i);
            return NULL;
        }
    }
    return NULL;
}

Test(mt_queue, ping_pong_loses_no_wake_up_with_any_mix_of_spinning)
{
    /* Every hand-off here finds the other side waiting (or about to wait),
     * the case where a wake-up can fall between a check and a sleep. */
    for (int mix = 0; mix < 4; mix++) {
        ping_run run = {make_queue(1, sizeof(int), mix & 1 ? SPIN : 0), make_queue(1, sizeof(int), mix & 2 ? SPIN : 0),
                        ""};
        tl_thread th;
        cr_assert_eq(tl_thread_start(&th, ponger, &run), TL_OK);
        char err[128] = "";
        for (int i = 0; i < ROUND_TRIPS && err[0] == '\0'; i++) {
            int v = i;
            if (tl_queue_push(run.there, &v) != TL_WAIT_OK)
                snprintf(err, sizeof err, "round %d: the push failed", i);
            else if (tl_queue_pop_until(run.back, &v, tl_deadline_after_ns(LOST_NS)) != TL_WAIT_OK || v != -i)
                snprintf(err, sizeof err, "round %d: no answer, or %d", i, v);
        }
        if (err[0] != '\0') { /* unblock the ponger */
            tl_queue_close(run.there);
            tl_queue_close(run.back);
        }
        cr_assert_eq(tl_thread_join(&th, NULL), TL_OK);
        cr_assert_str_eq(err, "", "spin there %d, back %d: %s", mix & 1, mix >> 1, err);
        cr_assert_str_eq(run.err, "", "spin there %d, back %d: %s", mix & 1, mix >> 1, run.err);
        tl_queue_destroy(run.there);
        tl_queue_destroy(run.back);
    }
}

typedef struct len_run {
    tl_queue *q;
    atomic_bool done;
    size_t max_len;
} len_run;

static void *len_watcher(void *arg)
{
    len_run *run = arg;
    while (!atomic_load(&run->done)) {
        size_t n = tl_queue_len(run->q);
        if (n > run->max_len)
            run->max_len = n;
    }
    return NULL;
}

static void *drainer(void *arg)
{
    tl_queue *q = arg;
    int v;
    while (tl_queue_pop(q, &v) == TL_WAIT_OK)
        ;
    return NULL;
}

Test(mt_queue, len_stays_within_the_capacity_under_traffic)
{
    len_run run = {make_queue(3, sizeof(int), SPIN), false, 0};
    tl_thread w, d;
    cr_assert_eq(tl_thread_start(&w, len_watcher, &run), TL_OK);
    cr_assert_eq(tl_thread_start(&d, drainer, run.q), TL_OK);
    for (int i = 0; i < SPSC_ITEMS; i++)
        cr_assert_eq(tl_queue_push(run.q, &i), TL_WAIT_OK);
    tl_queue_close(run.q);
    cr_assert_eq(tl_thread_join(&d, NULL), TL_OK);
    atomic_store(&run.done, true);
    cr_assert_eq(tl_thread_join(&w, NULL), TL_OK);
    cr_assert_leq(run.max_len, 3);
    cr_assert_eq(tl_queue_len(run.q), 0);
    tl_queue_destroy(run.q);
}

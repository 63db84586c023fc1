/*
 * test_mt_thread.c — base/'s thread primitives under real threads (also a
 * ThreadSanitizer target): the barrier over thousands of rounds, with and
 * without spinning and with more threads than cores; breaking a barrier
 * under waiting threads; the queue under producers and consumers; close
 * waking blocked pushers and poppers; start, join and pinning.
 *
 * Worker threads never assert: they record what went wrong, and the test
 * thread asserts after joining them.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/thread.h"
#include "test_mt_cpu_util.h"

#define MAXT 8

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ---- barrier -------------------------------------------------------------- */

typedef struct barrier_run barrier_run;

typedef struct barrier_thread {
    int id;
    barrier_run *run;
    char err[128];
} barrier_thread;

struct barrier_run {
    tl_barrier bar;
    int nthreads;
    int rounds;
    int cells[2][MAXT]; /* written by thread t in its round, parity by round */
    barrier_thread w[MAXT];
};

/* Each round, every thread writes its cell and then, after the barrier,
 * reads everyone's: a barrier that let a thread through early would show an
 * old value (and ThreadSanitizer a race). Cells alternate by parity, so one
 * barrier a round suffices: a thread cannot write round r + 2 before all
 * have passed round r + 1's barrier, after reading round r. */
static void *barrier_worker(void *arg)
{
    barrier_thread *w = arg;
    barrier_run *run = w->run;
    for (int r = 0; r < run->rounds; r++) {
        run->cells[r & 1][w->id] = r;
        if (tl_barrier_wait(&run->bar) != TL_WAIT_OK) {
            snprintf(w->err, sizeof w->err, "round %d: the wait failed", r);
            return NULL;
        }
        for (int t = 0; t < run->nthreads; t++) {
            if (run->cells[r & 1][t] != r) {
                snprintf(w->err, sizeof w->err, "round %d: thread %d's cell holds %d", r, t,
                         run->cells[r & 1][t]);
                return NULL;
            }
        }
    }
    return NULL;
}

static void run_barrier_rounds(int nthreads, int rounds, int64_t spin_ns)
{
    barrier_run *run = calloc(1, sizeof *run);
    cr_assert_not_null(run);
    run->nthreads = nthreads;
    run->rounds = rounds;
    cr_assert_eq(tl_barrier_init(&run->bar, nthreads, spin_ns), TL_OK);
    tl_thread th[MAXT];
    for (int t = 0; t < nthreads; t++) {
        run->w[t].id = t;
        run->w[t].run = run;
        cr_assert_eq(tl_thread_start(&th[t], barrier_worker, &run->w[t]), TL_OK);
    }
    for (int t = 0; t < nthreads; t++)
        cr_assert_eq(tl_thread_join(&th[t], NULL), TL_OK);
    for (int t = 0; t < nthreads; t++)
        cr_assert_str_eq(run->w[t].err, "", "%d threads, spin %lld ns, thread %d: %s", nthreads, (long long)spin_ns,
                         t, run->w[t].err);
    tl_barrier_close(&run->bar);
    free(run);
}

Test(mt_thread, barrier_two_threads_5000_rounds_sleeping)
{
    run_barrier_rounds(2, 5000, 0);
}

Test(mt_thread, barrier_two_threads_5000_rounds_spinning)
{
    run_barrier_rounds(2, 5000, 20000);
}

Test(mt_thread, barrier_four_threads_3000_rounds)
{
    run_barrier_rounds(4, 3000, 0);
}

Test(mt_thread, barrier_eight_threads_2000_rounds_spinning_oversubscribed)
{
    /* More threads than cores on small machines: spinning must not decide
     * anything, only cost time. */
    run_barrier_rounds(8, 2000, 5000);
}

typedef struct break_run break_run;

typedef struct break_thread {
    break_run *run;
    tl_wait_result res, again;
} break_thread;

struct break_run {
    tl_barrier bar;
    atomic_int returned;
    break_thread w[3];
};

static void *break_waiter(void *arg)
{
    break_thread *w = arg;
    w->res = tl_barrier_wait(&w->run->bar);
    w->again = tl_barrier_wait(&w->run->bar);
    atomic_fetch_add(&w->run->returned, 1);
    return NULL;
}

Test(mt_thread, barrier_break_releases_waiters)
{
    /* Three threads wait on a barrier of four; the fourth never comes and
     * the test thread breaks the barrier instead. */
    break_run *br = calloc(1, sizeof *br);
    cr_assert_not_null(br);
    cr_assert_eq(tl_barrier_init(&br->bar, 4, 100), TL_OK);
    tl_thread th[3];
    for (int t = 0; t < 3; t++) {
        br->w[t].run = br;
        cr_assert_eq(tl_thread_start(&th[t], break_waiter, &br->w[t]), TL_OK);
    }
    sleep_us(20000);
    cr_assert_eq(atomic_load(&br->returned), 0, "a thread passed a barrier that lacks a thread");
    tl_barrier_break(&br->bar);
    for (int t = 0; t < 3; t++)
        cr_assert_eq(tl_thread_join(&th[t], NULL), TL_OK);
    for (int t = 0; t < 3; t++) {
        cr_assert_eq(br->w[t].res, TL_WAIT_BROKEN, "thread %d: %d", t, br->w[t].res);
        cr_assert_eq(br->w[t].again, TL_WAIT_BROKEN, "thread %d's next wait: %d", t, br->w[t].again);
    }
    tl_barrier_close(&br->bar);
    free(br);
}

typedef struct timed_run {
    tl_barrier bar;
    tl_wait_result first, second;
} timed_run;

static void *timed_partner(void *arg)
{
    timed_run *tr = arg;
    tr->second = tl_barrier_wait_until(&tr->bar, tl_deadline_after_ns(10000000000LL));
    return NULL;
}

Test(mt_thread, barrier_timeout_leaves_it_usable)
{
    timed_run *tr = calloc(1, sizeof *tr);
    cr_assert_not_null(tr);
    cr_assert_eq(tl_barrier_init(&tr->bar, 2, 0), TL_OK);
    tr->first = tl_barrier_wait_until(&tr->bar, tl_deadline_after_ns(5000000));
    cr_assert_eq(tr->first, TL_WAIT_TIMEOUT);
    /* After the withdrawal, a round still needs both threads. */
    tl_thread th;
    cr_assert_eq(tl_thread_start(&th, timed_partner, tr), TL_OK);
    cr_assert_eq(tl_barrier_wait_until(&tr->bar, tl_deadline_after_ns(10000000000LL)), TL_WAIT_OK);
    cr_assert_eq(tl_thread_join(&th, NULL), TL_OK);
    cr_assert_eq(tr->second, TL_WAIT_OK);
    tl_barrier_close(&tr->bar);
    free(tr);
}

/* ---- queue ---------------------------------------------------------------- */

#define NPROD 3
#define NCONS 3
#define PER_PRODUCER 4000

typedef struct queue_run queue_run;

typedef struct queue_thread {
    int id;
    queue_run *run;
    int last[NPROD];                         /* consumer: last seq seen per producer */
    unsigned char seen[NPROD][PER_PRODUCER]; /* consumer: times each item came */
    long got;
    char err[128];
} queue_thread;

struct queue_run {
    tl_queue *q;
    queue_thread w[NPROD + NCONS];
};

typedef struct qitem {
    int producer;
    int seq;
} qitem;

static void *producer(void *arg)
{
    queue_thread *w = arg;
    for (int s = 0; s < PER_PRODUCER; s++) {
        qitem it = {w->id, s};
        if (tl_queue_push(w->run->q, &it) != TL_WAIT_OK) {
            snprintf(w->err, sizeof w->err, "push %d failed", s);
            return NULL;
        }
        if (s % 512 == 0)
            sched_yield();
    }
    return NULL;
}

static void *consumer(void *arg)
{
    queue_thread *w = arg;
    for (int p = 0; p < NPROD; p++)
        w->last[p] = -1;
    qitem it;
    while (tl_queue_pop(w->run->q, &it) == TL_WAIT_OK) {
        if (it.producer < 0 || it.producer >= NPROD || it.seq < 0 || it.seq >= PER_PRODUCER) {
            snprintf(w->err, sizeof w->err, "bad item (%d, %d)", it.producer, it.seq);
            return NULL;
        }
        if (it.seq <= w->last[it.producer]) {
            snprintf(w->err, sizeof w->err, "producer %d: item %d after %d", it.producer, it.seq,
                     w->last[it.producer]);
            return NULL;
        }
        w->last[it.producer] = it.seq;
        w->seen[it.producer][it.seq]++;
        w->got++;
    }
    return NULL;
}

Test(mt_thread, queue_delivers_each_item_once_in_producer_order)
{
    queue_run *run = calloc(1, sizeof *run);
    cr_assert_not_null(run);
    cr_assert_eq(tl_queue_create(4, sizeof(qitem), &run->q), TL_OK);
    tl_thread th[NPROD + NCONS];
    for (int i = 0; i < NPROD + NCONS; i++) {
        run->w[i].id = i < NPROD ? i : i - NPROD;
        run->w[i].run = run;
        cr_assert_eq(tl_thread_start(&th[i], i < NPROD ? producer : consumer, &run->w[i]), TL_OK);
    }
    for (int i = 0; i < NPROD; i++)
        cr_assert_eq(tl_thread_join(&th[i], NULL), TL_OK);
    /* Consumers drain what is left, then see the close. */
    tl_queue_close(run->q);
    for (int i = NPROD; i < NPROD + NCONS; i++)
        cr_assert_eq(tl_thread_join(&th[i], NULL), TL_OK);
    long total = 0;
    for (int i = 0; i < NPROD + NCONS; i++) {
        cr_assert_str_eq(run->w[i].err, "", "%s %d: %s", i < NPROD ? "producer" : "consumer", run->w[i].id,
                         run->w[i].err);
        total += run->w[i].got;
    }
    cr_assert_eq(total, (long)NPROD * PER_PRODUCER);
    for (int p = 0; p < NPROD; p++) {
        for (int s = 0; s < PER_PRODUCER; s++) {
            int times = 0;
            for (int c = 0; c < NCONS; c++)
                times += run->w[NPROD + c].seen[p][s];
            cr_assert_eq(times, 1, "item (%d, %d) delivered %d times", p, s, times);
        }
    }
    cr_assert_eq(tl_queue_len(run->q), 0);
    tl_queue_destroy(run->q);
    free(run);
}

typedef struct close_run {
    tl_queue *full, *empty;
    tl_wait_result push_res, pop_res, timed_pop_res;
    int popped;
} close_run;

static void *blocked_pusher(void *arg)
{
    close_run *cr = arg;
    int v = 7;
    cr->push_res = tl_queue_push(cr->full, &v);
    return NULL;
}

static void *blocked_popper(void *arg)
{
    close_run *cr = arg;
    int v;
    cr->pop_res = tl_queue_pop(cr->empty, &v);
    return NULL;
}

Test(mt_thread, queue_close_wakes_blocked_pushers_and_poppers)
{
    close_run *cr = calloc(1, sizeof *cr);
    cr_assert_not_null(cr);
    cr_assert_eq(tl_queue_create(1, sizeof(int), &cr->full), TL_OK);
    cr_assert_eq(tl_queue_create(1, sizeof(int), &cr->empty), TL_OK);
    int one = 1;
    cr_assert_eq(tl_queue_push(cr->full, &one), TL_WAIT_OK);
    tl_thread a, b;
    cr_assert_eq(tl_thread_start(&a, blocked_pusher, cr), TL_OK);
    cr_assert_eq(tl_thread_start(&b, blocked_popper, cr), TL_OK);
    sleep_us(20000); /* let both block */
    tl_queue_close(cr->full);
    tl_queue_close(cr->empty);
    cr_assert_eq(tl_thread_join(&a, NULL), TL_OK);
    cr_assert_eq(tl_thread_join(&b, NULL), TL_OK);
    cr_assert_eq(cr->push_res, TL_WAIT_CLOSED, "a push blocked on a full queue returns closed");
    cr_assert_eq(cr->pop_res, TL_WAIT_CLOSED, "a pop blocked on an empty queue returns closed");
    int v = 0;
    cr_assert_eq(tl_queue_pop(cr->full, &v), TL_WAIT_OK, "the item pushed before the close is still there");
    cr_assert_eq(v, 1);
    cr_assert_eq(tl_queue_pop(cr->full, &v), TL_WAIT_CLOSED);
    tl_queue_destroy(cr->full);
    tl_queue_destroy(cr->empty);
    free(cr);
}

static void *late_pusher(void *arg)
{
    sleep_us(10000);
    int v = 42;
    tl_queue_push((tl_queue *)arg, &v);
    return NULL;
}

Test(mt_thread, timed_pop_wakes_on_a_push_before_the_deadline)
{
    tl_queue *q;
    cr_assert_eq(tl_queue_create(2, sizeof(int), &q), TL_OK);
    tl_thread th;
    cr_assert_eq(tl_thread_start(&th, late_pusher, q), TL_OK);
    int v = 0;
    int64_t t0 = tl_now_ns();
    cr_assert_eq(tl_queue_pop_until(q, &v, tl_deadline_after_ns(10000000000LL)), TL_WAIT_OK);
    cr_assert_lt(tl_now_ns() - t0, 5000000000LL, "woke by the push, not the deadline");
    cr_assert_eq(v, 42);
    cr_assert_eq(tl_thread_join(&th, NULL), TL_OK);
    tl_queue_destroy(q);
}

/* ---- threads -------------------------------------------------------------- */

static void *times_two(void *arg)
{
    return (void *)(2 * (intptr_t)arg);
}

Test(mt_thread, start_and_join_return_the_result)
{
    tl_thread th[4];
    for (intptr_t i = 0; i < 4; i++)
        cr_assert_eq(tl_thread_start(&th[i], times_two, (void *)(i + 10)), TL_OK);
    for (intptr_t i = 0; i < 4; i++) {
        void *ret = NULL;
        cr_assert_eq(tl_thread_join(&th[i], &ret), TL_OK);
        cr_assert_eq((intptr_t)ret, 2 * (i + 10));
        cr_assert_eq(tl_thread_join(&th[i], NULL), TL_EINVAL, "a second join is an error, not a crash");
    }
}

typedef struct pin_run {
    int cpu;
    tl_status st;
    int ran_on;
    tl_barrier pinned; /* the test thread pins, then lets the worker look */
} pin_run;

static void *report_cpu(void *arg)
{
    pin_run *pr = arg;
    tl_barrier_wait(&pr->pinned);
    pr->ran_on = sched_getcpu();
    return NULL;
}

static void *pin_self(void *arg)
{
    pin_run *pr = arg;
    pr->st = tl_thread_pin_self(pr->cpu);
    pr->ran_on = sched_getcpu();
    return NULL;
}

Test(mt_thread, pinning_moves_a_thread_to_its_cpu)
{
    int last = tmc_last_cpu();

    pin_run pr = {.cpu = last, .st = TL_EINVAL, .ran_on = -1};
    tl_thread th;
    cr_assert_eq(tl_thread_start(&th, pin_self, &pr), TL_OK);
    cr_assert_eq(tl_thread_join(&th, NULL), TL_OK);
    cr_assert_eq(pr.st, TL_OK, "pinning to cpu %d: %s", last, tl_strerror(pr.st));
    cr_assert_eq(pr.ran_on, last, "pinned to cpu %d, ran on %d", last, pr.ran_on);

    pin_run other = {.cpu = last, .ran_on = -1};
    cr_assert_eq(tl_barrier_init(&other.pinned, 2, 0), TL_OK);
    cr_assert_eq(tl_thread_start(&th, report_cpu, &other), TL_OK);
    cr_assert_eq(tl_thread_pin(&th, last), TL_OK);
    cr_assert_eq(tl_barrier_wait(&other.pinned), TL_WAIT_OK);
    cr_assert_eq(tl_thread_join(&th, NULL), TL_OK);
    cr_assert_eq(other.ran_on, last, "pinned by another thread to cpu %d, ran on %d", last, other.ran_on);
    tl_barrier_close(&other.pinned);
}

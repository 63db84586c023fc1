/*
 * thread.h — thread primitives for the parts of tpuloop that run threads:
 * a reusable barrier, a bounded blocking queue, a start/join wrapper with
 * pinning, and the monotonic clock. Internal to the library (runtime/ and
 * comm/ use it); nothing here is public API.
 *
 * Device workers meet at a barrier between the phases of a step, and the
 * host hands batches to them through bounded queues. Both objects are made
 * once, before a device loop starts, and never allocate afterwards; both can
 * be shut down from any thread (tl_barrier_break, tl_queue_close) so that a
 * failing worker never leaves the others blocked for ever.
 *
 *     tl_barrier b;
 *     if (tl_barrier_init(&b, nthreads, 20000) != TL_OK) ...  // spin 20 µs
 *     // in each of the nthreads threads, once per round:
 *     write_my_part(round);
 *     if (tl_barrier_wait(&b) != TL_WAIT_OK) ...   // broken: give up
 *     read_everyones_part(round);                    // sees every write above
 *     ...
 *     tl_barrier_close(&b);
 *
 *     tl_queue *q;
 *     if (tl_queue_create(4, sizeof(batch *), &q) != TL_OK) ...
 *     tl_queue_set_spin(q, 20000);  // both sides have a core of their own
 *     tl_queue_push(q, &b);                      // producer; blocks while full
 *     while (tl_queue_pop(q, &b) == TL_WAIT_OK)  // consumer; blocks while empty
 *         use(b);
 *     tl_queue_close(q);   // producer side: the consumer drains, then stops
 *     tl_queue_destroy(q);
 *
 * Waits return a tl_wait_result rather than a tl_status: a closed queue or a
 * broken barrier is how a pipeline ends, not an error with a message.
 *
 * Deadlines are absolute times of tl_now_ns(); TL_NO_DEADLINE waits for ever
 * and a deadline already past makes a single attempt without blocking.
 */
#ifndef TL_BASE_THREAD_H
#define TL_BASE_THREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuloop/base.h"

/* ---- clock ---------------------------------------------------------------- */

/* Nanoseconds of CLOCK_MONOTONIC: only differences mean anything. */
int64_t tl_now_ns(void);

/* A deadline that is never reached. */
#define TL_NO_DEADLINE INT64_MAX

/* tl_now_ns() + ns, saturating at TL_NO_DEADLINE (ns < 0 counts as 0). */
int64_t tl_deadline_after_ns(int64_t ns);

/* ---- wait results --------------------------------------------------------- */

typedef enum tl_wait_result {
    TL_WAIT_OK = 0,      /* the barrier opened; the item was pushed or popped */
    TL_WAIT_CLOSED = 1,  /* the queue is closed (and, for pop, empty) */
    TL_WAIT_BROKEN = 2,  /* the barrier was broken by tl_barrier_break */
    TL_WAIT_TIMEOUT = 3  /* the deadline passed first; nothing happened */
} tl_wait_result;

/* ---- barrier -------------------------------------------------------------- */

/*
 * A reusable barrier for a fixed number of threads: generation counting
 * under a mutex and a condition variable, with an optional short spin before
 * sleeping. Everything a thread wrote before its wait is visible to every
 * thread after the wait returns TL_WAIT_OK.
 *
 * Caller-allocated (embed it in the object that owns the threads); the fields
 * are private.
 */
typedef struct tl_barrier {
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* on CLOCK_MONOTONIC, for timed waits */
    int count;            /* threads per round */
    int arrived;          /* of this round; under mu */
    int sleepers;         /* threads in pthread_cond_*wait; under mu */
    int64_t spin_ns;      /* how long to poll gen before sleeping */
    atomic_uint gen;      /* round number; written under mu, polled without */
    atomic_bool broken;   /* written under mu, polled without */
} tl_barrier;

/*
 * Makes a barrier for count threads. A waiter polls for the round to end for
 * up to spin_ns nanoseconds (or until its deadline, if sooner) before it
 * sleeps (0: sleep at once). Spinning only pays when every thread has a core
 * of its own: a round then takes about 0.1 µs instead of the 5-10 µs of a
 * futex sleep and wake-up. With more threads than cores, pass 0: a spinner
 * burns the core that the thread it waits for needs (after its first 2 µs a
 * spinner yields the core at every poll, which bounds the harm but not the
 * waste). A barrier of one thread never locks or waits. Errors: TL_EINVAL
 * for count < 1 or spin_ns < 0; TL_ERUNTIME when the mutex or condition
 * variable cannot be made (nothing is left to close).
 */
tl_status tl_barrier_init(tl_barrier *b, int count, int64_t spin_ns);

/* Frees what tl_barrier_init made. No thread may be waiting. */
void tl_barrier_close(tl_barrier *b);

/*
 * Waits until all count threads have called it in this round, then returns
 * TL_WAIT_OK in each. TL_WAIT_BROKEN once the barrier is broken (at once, or
 * as soon as tl_barrier_break is called while waiting; a round that opened
 * before the break still returns TL_WAIT_OK to all its threads).
 */
tl_wait_result tl_barrier_wait(tl_barrier *b);

/*
 * tl_barrier_wait with a deadline (tl_now_ns() time). TL_WAIT_TIMEOUT when it
 * passes before the round opens: the thread is withdrawn from the round, so
 * the barrier stays consistent and the thread may wait again; usually the
 * caller breaks the barrier instead, since the others cannot finish the round
 * without it.
 */
tl_wait_result tl_barrier_wait_until(tl_barrier *b, int64_t deadline_ns);

/*
 * Breaks the barrier for good: every waiting thread and every later wait
 * returns TL_WAIT_BROKEN. Callable from any thread, also one that does not
 * take part, any number of times.
 */
void tl_barrier_break(tl_barrier *b);

/* True once tl_barrier_break was called. */
bool tl_barrier_is_broken(tl_barrier *b);

/* ---- bounded queue -------------------------------------------------------- */

/*
 * A bounded FIFO of fixed-size items, copied in and out, for any number of
 * producers and consumers. Items from one producer leave in the order that
 * producer pushed them. All memory is allocated by tl_queue_create.
 *
 * A push or pop that finds room or an item takes no lock and makes no system
 * call (a lock-free ring); one that must wait polls for up to the queue's
 * spin budget (tl_queue_set_spin, 0 by default), then sleeps, and the other
 * side wakes it. The wake-up costs both sides a futex call and the sleeper
 * 5-10 µs; spinning avoids it when the two sides run on cores of their own.
 */
typedef struct tl_queue tl_queue;

/*
 * Makes a queue of at most capacity items of item_size bytes each (for
 * pointers, item_size = sizeof(void *) and push &ptr). Errors: TL_EINVAL for
 * capacity < 1, item_size < 1 or a total size over SIZE_MAX; TL_ENOMEM;
 * TL_ERUNTIME when a mutex or condition variable cannot be made. On error
 * *out is NULL and nothing leaks.
 */
tl_status tl_queue_create(size_t capacity, size_t item_size, tl_queue **out);

/* Frees the queue. Accepts NULL. No thread may be using it. */
void tl_queue_destroy(tl_queue *q);

/*
 * Sets how long a push that finds the queue full, or a pop that finds it
 * empty, polls for the other side before it sleeps: spin_ns nanoseconds (0,
 * the default: sleep at once; a wait with an earlier deadline spins only up
 * to it). As for tl_barrier_init, spinning pays only when the thread on the
 * other side has a core of its own: a hand-off then takes about 0.2 µs
 * instead of a sleep and a wake-up (5-10 µs); with more busy threads than
 * cores, leave it 0 (a spin yields the core at every poll after its first
 * 2 µs, which bounds the harm). Callable at any time, from any thread; waits that already spin keep
 * their budget. Errors: TL_EINVAL for spin_ns < 0 (the budget is unchanged).
 */
tl_status tl_queue_set_spin(tl_queue *q, int64_t spin_ns);

/*
 * Copies item_size bytes from item to the tail, waiting while the queue is
 * full. TL_WAIT_OK, or TL_WAIT_CLOSED when the queue is (or becomes, while
 * waiting) closed; then nothing is pushed.
 */
tl_wait_result tl_queue_push(tl_queue *q, const void *item);

/* tl_queue_push with a deadline; TL_WAIT_TIMEOUT when the queue stayed full. */
tl_wait_result tl_queue_push_until(tl_queue *q, const void *item, int64_t deadline_ns);

/*
 * Copies the head item to item (item_size bytes) and removes it, waiting while
 * the queue is empty. A closed queue still hands out what it holds:
 * TL_WAIT_CLOSED comes only when it is closed and empty.
 */
tl_wait_result tl_queue_pop(tl_queue *q, void *item);

/* tl_queue_pop with a deadline; TL_WAIT_TIMEOUT when the queue stayed empty. */
tl_wait_result tl_queue_pop_until(tl_queue *q, void *item, int64_t deadline_ns);

/*
 * Closes the queue: waiting and later pushes return TL_WAIT_CLOSED, waiting
 * pops return once the items are gone. Callable from any thread, any number of
 * times; a closed queue cannot be reopened.
 */
void tl_queue_close(tl_queue *q);

/* The number of items in the queue now (a snapshot). */
size_t tl_queue_len(tl_queue *q);

/* The capacity given at creation. */
size_t tl_queue_capacity(const tl_queue *q);

/* ---- threads -------------------------------------------------------------- */

/* A started thread. Caller-allocated; the fields are private. */
typedef struct tl_thread {
    pthread_t handle;
    bool started; /* set by tl_thread_start, cleared by tl_thread_join */
} tl_thread;

/*
 * Starts fn(arg) on a new thread. Errors: TL_EINVAL for a NULL fn;
 * TL_ERUNTIME when the system cannot make a thread (the message has the
 * reason); then t is left not started.
 */
tl_status tl_thread_start(tl_thread *t, void *(*fn)(void *), void *arg);

/*
 * Waits for the thread to end and stores fn's return value in *result (when
 * result is not NULL). Errors: TL_EINVAL for a thread that is not started (or
 * already joined); TL_ERUNTIME when pthread_join fails.
 */
tl_status tl_thread_join(tl_thread *t, void **result);

/*
 * Pins a started thread, or the calling thread, to one CPU. Failing to pin is
 * not fatal: a caller logs the status and runs unpinned. Errors: TL_EINVAL for
 * cpu outside [0, CPU_SETSIZE) or a thread that is not started; TL_ERUNTIME
 * when the system refuses (for example, a CPU outside the affinity mask).
 */
tl_status tl_thread_pin(tl_thread *t, int cpu);
tl_status tl_thread_pin_self(int cpu);

/* ---- team ----------------------------------------------------------------- */

/*
 * A fork-join team: the thread that owns it and nthreads - 1 helpers, which
 * run the parts of one job at a time (a device's intra-op threads). The owner
 * calls tl_team_run(t, fn, ctx): every member runs fn(ctx, part, nthreads)
 * for its own part (the owner part 0), and the call returns when every part
 * has returned, with every part's writes visible. A job cannot fail: the
 * caller checks what could go wrong before it splits the work.
 *
 *     tl_team *t;
 *     if (tl_team_create(2, cpus, 20000, &t) != TL_OK) ...   // owner + 1 helper
 *     tl_team_run(t, scale_part, &job);    // scale_part(&job, 0, 2) here, (&job, 1, 2) there
 *     tl_team_destroy(t);
 *
 * A team is driven by one thread at a time (not necessarily the one that made
 * it). NULL is a team of one: tl_team_run(NULL, ...) runs fn(ctx, 0, 1).
 */
typedef struct tl_team tl_team;
typedef void (*tl_team_fn)(void *ctx, int part, int nparts);

/*
 * Starts nthreads - 1 helpers, helper i pinned to cpus[i] when cpus is not
 * NULL and cpus[i] >= 0 (a pin that fails is logged and the helper runs
 * unpinned). A helper between jobs polls for spin_ns before it sleeps (0:
 * sleep at once; see tl_barrier_init for when spinning pays). nthreads == 1
 * makes no thread. Errors: TL_EINVAL for nthreads < 1 or spin_ns < 0;
 * TL_ENOMEM; TL_ERUNTIME when a thread cannot start (those started are
 * stopped; *out is NULL).
 */
tl_status tl_team_create(int nthreads, const int *cpus, int64_t spin_ns, tl_team **out);

/* Stops and joins the helpers and frees the team. Accepts NULL. */
void tl_team_destroy(tl_team *t);

/* Members, the owner included; 1 for NULL. */
int tl_team_size(const tl_team *t);

/* Runs fn(ctx, part, size) on every member and waits for them all. */
void tl_team_run(tl_team *t, tl_team_fn fn, void *ctx);

/* The range [*lo, *hi) of part `part` of n items split in nparts pieces of
 * whole multiples of `align` items (the last piece takes the rest; a piece
 * may be empty). align >= 1. */
void tl_team_range(int64_t n, int64_t align, int part, int nparts, int64_t *lo, int64_t *hi);

/* Copies of fewer bytes run on one thread: below this, a second core's
 * memory requests do not pay the join. */
#define TL_TEAM_COPY_MIN_BYTES 65536

/* memcpy(dst, src, bytes), in pieces on the team's members when the copy
 * has TL_TEAM_COPY_MIN_BYTES or more. */
void tl_team_copy(tl_team *t, void *dst, const void *src, size_t bytes);

#endif /* TL_BASE_THREAD_H */

/* thread.c — the barrier, the bounded queue, thread start/join/pin and the
 * monotonic clock (see thread.h). Nothing here allocates after creation. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "base_int.h"
#include "thread.h"

/* ---- clock ---------------------------------------------------------------- */

int64_t tl_now_ns(void)
{
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail on Linux with a valid pointer. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t tl_deadline_after_ns(int64_t ns)
{
    int64_t now = tl_now_ns();
    if (ns <= 0)
        return now;
    return ns > TL_NO_DEADLINE - now ? TL_NO_DEADLINE : now + ns;
}

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

/* One wait on cv until signalled or deadline; returns pthread's code. The
 * caller re-checks its predicate either way (spurious wake-ups, and a timed
 * out waiter may have absorbed a signal meant for the predicate). */
static int cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns)
{
    if (deadline_ns == TL_NO_DEADLINE)
        return pthread_cond_wait(cv, mu);
    if (deadline_ns <= tl_now_ns())
        return ETIMEDOUT;
    struct timespec ts = to_timespec(deadline_ns);
    return pthread_cond_timedwait(cv, mu, &ts);
}

/* A condition variable whose timed waits use CLOCK_MONOTONIC, so that a
 * change of the wall clock moves no deadline. */
static int monotonic_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/*
 * The bounded poll before a sleep, shared by the barrier and the queue.
 * Spinning saves the two futex calls of a sleep and a wake-up (5-10 µs) when
 * the other side is a few microseconds away; it never decides a result.
 *
 * For the first POLITE_AFTER_NS a poll is a pause instruction; after that,
 * each poll first offers the core to any other runnable thread with
 * sched_yield. Where threads outnumber cores (the host thread, the workers
 * and the infeed on two cores), the thread on this core may be the very one
 * being waited for, and a plain spin would hold it off for the rest of the
 * budget; alone on its core, the yield returns at once, a few hundred ns. The
 * clock is read every 64 pauses, as a pause costs from a few to 140 cycles by
 * CPU, so only time bounds the spin portably, and at every yield.
 */
#define POLITE_AFTER_NS 2000

typedef struct spinner {
    int64_t until;  /* the end of the spin */
    int64_t polite; /* when the yields start */
    unsigned polls;
    bool yielding;
} spinner;

/* Starts a spin of spin_ns (> 0) that ends by deadline_ns at the latest. */
static void spinner_start(spinner *sp, int64_t spin_ns, int64_t deadline_ns)
{
    int64_t now = tl_now_ns();
    sp->until = spin_ns > TL_NO_DEADLINE - now ? TL_NO_DEADLINE : now + spin_ns;
    if (sp->until > deadline_ns)
        sp->until = deadline_ns;
    sp->polite = now + POLITE_AFTER_NS;
    sp->polls = 0;
    sp->yielding = false;
}

/* Waits one poll; false once the spin is over (then the caller polls once
 * more, or not, and sleeps). */
static bool spinner_next(spinner *sp)
{
    if (sp->yielding)
        sched_yield();
    else
        cpu_relax();
    if (!sp->yielding && ++sp->polls % 64 != 0)
        return true;
    int64_t now = tl_now_ns();
    sp->yielding = now >= sp->polite;
    return now < sp->until;
}

/* ---- barrier -------------------------------------------------------------- */

tl_status tl_barrier_init(tl_barrier *b, int count, int64_t spin_ns)
{
    if (count < 1)
        return tl_error(TL_EINVAL, "barrier: count must be >= 1, got %d", count);
    if (spin_ns < 0)
        return tl_error(TL_EINVAL, "barrier: spin_ns must be >= 0, got %lld", (long long)spin_ns);
    int rc = pthread_mutex_init(&b->mu, NULL);
    if (rc != 0)
        return tl_error(TL_ERUNTIME, "barrier: cannot make a mutex: %s", strerror(rc));
    rc = monotonic_cond_init(&b->cv);
    if (rc != 0) {
        pthread_mutex_destroy(&b->mu);
        return tl_error(TL_ERUNTIME, "barrier: cannot make a condition variable: %s", strerror(rc));
    }
    b->count = count;
    b->arrived = 0;
    b->sleepers = 0;
    b->spin_ns = spin_ns;
    atomic_init(&b->gen, 0);
    atomic_init(&b->broken, false);
    return TL_OK;
}

void tl_barrier_close(tl_barrier *b)
{
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
}

tl_wait_result tl_barrier_wait_until(tl_barrier *b, int64_t deadline_ns)
{
    /* A round of one opens at once: no lock, which saves a training step
     * of one replica the cost of its collectives' barriers. */
    if (b->count == 1)
        return atomic_load_explicit(&b->broken, memory_order_relaxed) ? TL_WAIT_BROKEN : TL_WAIT_OK;
    pthread_mutex_lock(&b->mu);
    if (atomic_load_explicit(&b->broken, memory_order_relaxed)) {
        pthread_mutex_unlock(&b->mu);
        return TL_WAIT_BROKEN;
    }
    unsigned gen = atomic_load_explicit(&b->gen, memory_order_relaxed);
    if (++b->arrived == b->count) {
        b->arrived = 0;
        /* release: a spinner that sees the new round also sees every write
         * made before the other threads' arrivals (they went through mu). */
        atomic_store_explicit(&b->gen, gen + 1, memory_order_release);
        if (b->sleepers > 0)
            pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        return TL_WAIT_OK;
    }
    pthread_mutex_unlock(&b->mu);

    if (b->spin_ns > 0) {
        spinner sp;
        spinner_start(&sp, b->spin_ns, deadline_ns);
        do {
            if (atomic_load_explicit(&b->gen, memory_order_acquire) != gen)
                return TL_WAIT_OK;
            if (atomic_load_explicit(&b->broken, memory_order_relaxed))
                break;
        } while (spinner_next(&sp));
    }

    tl_wait_result res = TL_WAIT_OK;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        /* The round is checked before the break: a round that opened before
         * tl_barrier_break was called succeeded for all of its threads. */
        if (atomic_load_explicit(&b->gen, memory_order_relaxed) != gen)
            break;
        if (atomic_load_explicit(&b->broken, memory_order_relaxed)) {
            res = TL_WAIT_BROKEN;
            break;
        }
        b->sleepers++;
        int rc = cond_wait_until(&b->cv, &b->mu, deadline_ns);
        b->sleepers--;
        if (rc == ETIMEDOUT && atomic_load_explicit(&b->gen, memory_order_relaxed) == gen &&
            !atomic_load_explicit(&b->broken, memory_order_relaxed)) {
            b->arrived--; /* withdraw from the round */
            res = TL_WAIT_TIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&b->mu);
    return res;
}

tl_wait_result tl_barrier_wait(tl_barrier *b)
{
    return tl_barrier_wait_until(b, TL_NO_DEADLINE);
}

void tl_barrier_break(tl_barrier *b)
{
    pthread_mutex_lock(&b->mu);
    atomic_store_explicit(&b->broken, true, memory_order_relaxed);
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

bool tl_barrier_is_broken(tl_barrier *b)
{
    return atomic_load_explicit(&b->broken, memory_order_relaxed);
}

/* ---- bounded queue -------------------------------------------------------- */

/*
 * Dmitry Vyukov's bounded MPMC ring, with a sleeping path bolted on.
 *
 * Cell pos % capacity carries a sequence number that says whose turn it is:
 * seq == 2 pos means "empty, for the push at position pos", 2 pos + 1 "full,
 * for the pop at pos", and a pop at pos hands the cell on to the push at
 * pos + capacity by storing 2 (pos + capacity). (Vyukov's pos and pos + 1
 * cannot tell full from free when the capacity is 1.) A pusher claims
 * position pos by moving the tail past it with a CAS, copies the item, then
 * publishes the cell's seq (release); a popper claims the head the same way
 * once the cell shows 2 pos + 1 (acquire). Items therefore leave in claim
 * order, which keeps each producer's items in its order, and the item bytes
 * need no lock.
 *
 * Closing sets the low bit of the tail (which holds 2 × pos + closed): a push
 * whose CAS meets the bit fails, so the tail freezes at the last push that
 * was admitted, and a popper knows the queue is drained exactly when its head
 * reaches that frozen tail, even if the last pushes are still copying.
 *
 * Waiting: a failed attempt retries in a poll loop for spin_ns (only worth it
 * when the other side runs on another core), then sleeps on a condition
 * variable. A sleeper counts itself in the waiters of its side and re-tries
 * under the mutex before it sleeps; a successful push or pop reads the other
 * side's count after publishing its cell and takes the mutex only when it is
 * non-zero. Both pairs (count, then cell; cell, then count) are seq_cst, so
 * at least one of the two sees the other: either the sleeper finds the item
 * or the publisher finds the sleeper, and since the sleeper holds the mutex
 * from its count until it is inside the wait, the wake-up cannot fall in
 * between. With nobody asleep, a push or pop makes no system call.
 *
 * Positions are 62-bit counters (twice them must fit in a seq); at a push
 * per nanosecond they last 146 years, so their wrap-around is not handled.
 */

/* 64 bytes between fields that different threads write, so that the head,
 * the tail and the read-mostly fields do not share a cache line. */
#define CACHE_LINE 64

typedef struct queue_cell {
    _Atomic uint64_t seq;
    unsigned char item[]; /* (item_size) */
} queue_cell;

struct tl_queue {
    /* Read by every call; written at creation, by tl_queue_set_spin, and by
     * threads going to sleep or waking up. */
    size_t capacity;
    size_t item_size;
    size_t stride;       /* bytes per cell: the seq, the item, rounded up */
    unsigned char *ring; /* (capacity, stride) queue_cells */
    _Atomic int64_t spin_ns;
    atomic_int pop_waiters;  /* poppers in the sleeping path */
    atomic_int push_waiters; /* pushers in the sleeping path */
    char pad0[CACHE_LINE];
    _Atomic uint64_t head; /* the next position to pop */
    char pad1[CACHE_LINE];
    _Atomic uint64_t tail; /* 2 × the next position to push, + 1 once closed */
    char pad2[CACHE_LINE];
    pthread_mutex_t mu;       /* only for sleeping and waking */
    pthread_cond_t not_full;  /* pushers sleep here */
    pthread_cond_t not_empty; /* poppers sleep here */
};

/* What an attempt returns when it would have to wait. */
#define TRY_AGAIN (-1)

static inline queue_cell *cell_at(const tl_queue *q, uint64_t pos)
{
    return (queue_cell *)(q->ring + (size_t)(pos % q->capacity) * q->stride);
}

tl_status tl_queue_create(size_t capacity, size_t item_size, tl_queue **out)
{
    *out = NULL;
    if (capacity < 1)
        return tl_error(TL_EINVAL, "queue: capacity must be >= 1, got %zu", capacity);
    if (item_size < 1)
        return tl_error(TL_EINVAL, "queue: item_size must be >= 1, got %zu", item_size);
    const size_t align = _Alignof(queue_cell);
    if (item_size > SIZE_MAX - sizeof(queue_cell) - align ||
        capacity > SIZE_MAX / ((sizeof(queue_cell) + item_size + align - 1) / align * align))
        return tl_error(TL_EINVAL, "queue: capacity %zu x item_size %zu overflows", capacity, item_size);
    size_t stride = (sizeof(queue_cell) + item_size + align - 1) / align * align;
    tl_queue *q = tl_calloc(1, sizeof *q);
    if (q == NULL)
        return tl_error_oom();
    q->ring = tl_alloc_array(capacity, stride);
    if (q->ring == NULL) {
        tl_free(q);
        return tl_error_oom();
    }
    const char *what = "mutex";
    int rc = pthread_mutex_init(&q->mu, NULL);
    if (rc != 0)
        goto fail_mutex;
    what = "condition variable";
    rc = monotonic_cond_init(&q->not_full);
    if (rc != 0)
        goto fail_full;
    rc = monotonic_cond_init(&q->not_empty);
    if (rc != 0)
        goto fail_empty;
    q->capacity = capacity;
    q->item_size = item_size;
    q->stride = stride;
    for (size_t k = 0; k < capacity; k++)
        atomic_init(&cell_at(q, k)->seq, 2 * (uint64_t)k);
    atomic_init(&q->spin_ns, 0);
    atomic_init(&q->pop_waiters, 0);
    atomic_init(&q->push_waiters, 0);
    atomic_init(&q->head, 0);
    atomic_init(&q->tail, 0);
    *out = q;
    return TL_OK;

fail_empty:
    pthread_cond_destroy(&q->not_full);
fail_full:
    pthread_mutex_destroy(&q->mu);
fail_mutex:
    tl_free(q->ring);
    tl_free(q);
    return tl_error(TL_ERUNTIME, "queue: cannot make a %s: %s", what, strerror(rc));
}

void tl_queue_destroy(tl_queue *q)
{
    if (q == NULL)
        return;
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    pthread_mutex_destroy(&q->mu);
    tl_free(q->ring);
    tl_free(q);
}

tl_status tl_queue_set_spin(tl_queue *q, int64_t spin_ns)
{
    if (spin_ns < 0)
        return tl_error(TL_EINVAL, "queue: spin_ns must be >= 0, got %lld", (long long)spin_ns);
    atomic_store_explicit(&q->spin_ns, spin_ns, memory_order_relaxed);
    return TL_OK;
}

/* One push without waiting: TL_WAIT_OK, TL_WAIT_CLOSED, or TRY_AGAIN when
 * the cell at the tail is not free yet (the queue is full, or the pop of the
 * previous round is still copying out). */
static int try_push(tl_queue *q, const void *item)
{
    uint64_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
    for (;;) {
        if (t & 1)
            return TL_WAIT_CLOSED;
        uint64_t pos = t >> 1;
        queue_cell *c = cell_at(q, pos);
        /* seq_cst: a pusher about to sleep must see a pop that saw no sleeper
         * (see the top of this section). */
        int64_t dif = (int64_t)(atomic_load_explicit(&c->seq, memory_order_seq_cst) - 2 * pos);
        if (dif == 0) {
            /* On failure t is reloaded: another push got pos, or the close. */
            if (atomic_compare_exchange_weak_explicit(&q->tail, &t, t + 2, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                memcpy(c->item, item, q->item_size);
                atomic_store_explicit(&c->seq, 2 * pos + 1, memory_order_seq_cst);
                return TL_WAIT_OK;
            }
        } else if (dif < 0) {
            return TRY_AGAIN;
        } else {
            t = atomic_load_explicit(&q->tail, memory_order_acquire); /* pos was taken meanwhile */
        }
    }
}

/* One pop without waiting: TL_WAIT_OK, TL_WAIT_CLOSED (closed and drained),
 * or TRY_AGAIN when the cell at the head holds no item yet. */
static int try_pop(tl_queue *q, void *item)
{
    uint64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    for (;;) {
        queue_cell *c = cell_at(q, pos);
        int64_t dif = (int64_t)(atomic_load_explicit(&c->seq, memory_order_seq_cst) - (2 * pos + 1));
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                memcpy(item, c->item, q->item_size);
                atomic_store_explicit(&c->seq, 2 * (pos + q->capacity), memory_order_seq_cst);
                return TL_WAIT_OK;
            }
        } else if (dif < 0) {
            /* No item at pos. Drained for good when the tail is frozen there:
             * the head never passes the tail, so a stale pos cannot match. */
            uint64_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
            return (t & 1) && (t >> 1) == pos ? TL_WAIT_CLOSED : TRY_AGAIN;
        } else {
            pos = atomic_load_explicit(&q->head, memory_order_relaxed);
        }
    }
}

static int attempt(tl_queue *q, bool push, const void *in, void *out)
{
    return push ? try_push(q, in) : try_pop(q, out);
}

/* After a push or pop: wakes the other side if any of it sleeps. */
static void wake(tl_queue *q, bool pushed)
{
    atomic_int *waiters = pushed ? &q->pop_waiters : &q->push_waiters;
    if (atomic_load_explicit(waiters, memory_order_seq_cst) == 0)
        return;
    /* Under the mutex: a sleeper that counted itself is then either inside
     * the wait or not yet at its re-try, which will see the cell. Broadcast,
     * since waiters that time out may not take what they were woken for. */
    pthread_mutex_lock(&q->mu);
    pthread_cond_broadcast(pushed ? &q->not_empty : &q->not_full);
    pthread_mutex_unlock(&q->mu);
}

static tl_wait_result queue_wait(tl_queue *q, bool push, const void *in, void *out, int64_t deadline_ns)
{
    int r = attempt(q, push, in, out);
    if (r == TRY_AGAIN && deadline_ns != TL_NO_DEADLINE && deadline_ns <= tl_now_ns())
        return TL_WAIT_TIMEOUT;
    int64_t spin = atomic_load_explicit(&q->spin_ns, memory_order_relaxed);
    if (r == TRY_AGAIN && spin > 0) {
        spinner sp;
        spinner_start(&sp, spin, deadline_ns);
        while (r == TRY_AGAIN && spinner_next(&sp))
            r = attempt(q, push, in, out);
    }
    if (r == TRY_AGAIN) {
        atomic_int *waiters = push ? &q->push_waiters : &q->pop_waiters;
        pthread_cond_t *cv = push ? &q->not_full : &q->not_empty;
        pthread_mutex_lock(&q->mu);
        atomic_fetch_add_explicit(waiters, 1, memory_order_seq_cst);
        while ((r = attempt(q, push, in, out)) == TRY_AGAIN) {
            if (cond_wait_until(cv, &q->mu, deadline_ns) == ETIMEDOUT) {
                r = attempt(q, push, in, out);
                if (r == TRY_AGAIN)
                    r = TL_WAIT_TIMEOUT;
                break;
            }
        }
        atomic_fetch_sub_explicit(waiters, 1, memory_order_relaxed);
        pthread_mutex_unlock(&q->mu);
    }
    if (r == TL_WAIT_OK)
        wake(q, push);
    return (tl_wait_result)r;
}

tl_wait_result tl_queue_push_until(tl_queue *q, const void *item, int64_t deadline_ns)
{
    return queue_wait(q, true, item, NULL, deadline_ns);
}

tl_wait_result tl_queue_push(tl_queue *q, const void *item)
{
    return queue_wait(q, true, item, NULL, TL_NO_DEADLINE);
}

tl_wait_result tl_queue_pop_until(tl_queue *q, void *item, int64_t deadline_ns)
{
    return queue_wait(q, false, NULL, item, deadline_ns);
}

tl_wait_result tl_queue_pop(tl_queue *q, void *item)
{
    return queue_wait(q, false, NULL, item, TL_NO_DEADLINE);
}

void tl_queue_close(tl_queue *q)
{
    atomic_fetch_or_explicit(&q->tail, 1, memory_order_seq_cst);
    /* Every sleeper re-tries under the mutex before it sleeps, so taking it
     * here orders each one either before (it is woken) or after (it sees the
     * bit) the close. */
    pthread_mutex_lock(&q->mu);
    pthread_cond_broadcast(&q->not_full);
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

size_t tl_queue_len(tl_queue *q)
{
    /* The head first: the tail read after it is never behind it. */
    uint64_t h = atomic_load_explicit(&q->head, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&q->tail, memory_order_acquire) >> 1;
    uint64_t n = t - h;
    return n > q->capacity ? q->capacity : (size_t)n;
}

size_t tl_queue_capacity(const tl_queue *q)
{
    return q->capacity;
}

/* ---- threads -------------------------------------------------------------- */

tl_status tl_thread_start(tl_thread *t, void *(*fn)(void *), void *arg)
{
    t->started = false;
    if (fn == NULL)
        return tl_error(TL_EINVAL, "thread: the start function is NULL");
    int rc = pthread_create(&t->handle, NULL, fn, arg);
    if (rc != 0)
        return tl_error(TL_ERUNTIME, "thread: cannot start a thread: %s", strerror(rc));
    t->started = true;
    return TL_OK;
}

tl_status tl_thread_join(tl_thread *t, void **result)
{
    if (!t->started)
        return tl_error(TL_EINVAL, "thread: join of a thread that is not started (or already joined)");
    void *ret = NULL;
    int rc = pthread_join(t->handle, &ret);
    if (rc != 0)
        return tl_error(TL_ERUNTIME, "thread: join failed: %s", strerror(rc));
    t->started = false;
    if (result != NULL)
        *result = ret;
    return TL_OK;
}

static tl_status pin(pthread_t th, int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return tl_error(TL_EINVAL, "thread: cpu must be in [0, %d), got %d", CPU_SETSIZE, cpu);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(th, sizeof set, &set);
    if (rc != 0)
        return tl_error(TL_ERUNTIME, "thread: cannot pin to cpu %d: %s", cpu, strerror(rc));
    return TL_OK;
}

tl_status tl_thread_pin(tl_thread *t, int cpu)
{
    if (!t->started)
        return tl_error(TL_EINVAL, "thread: cannot pin a thread that is not started");
    return pin(t->handle, cpu);
}

tl_status tl_thread_pin_self(int cpu)
{
    return pin(pthread_self(), cpu);
}

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

    /* Spinning saves the two futex calls of a sleep and a wake-up when the
     * others are a few microseconds away; it never decides the result. The
     * clock is read every 64 polls: a pause instruction costs from a few to
     * 140 cycles by CPU, so only time bounds the spin portably. */
    if (b->spin_ns > 0) {
        int64_t until = tl_deadline_after_ns(b->spin_ns);
        for (unsigned i = 1;; i++) {
            if (atomic_load_explicit(&b->gen, memory_order_acquire) != gen)
                return TL_WAIT_OK;
            if (atomic_load_explicit(&b->broken, memory_order_relaxed))
                break;
            cpu_relax();
            if (i % 64 == 0 && tl_now_ns() >= until)
                break;
        }
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

struct tl_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_full;  /* pushers wait here */
    pthread_cond_t not_empty; /* poppers wait here */
    size_t capacity;
    size_t item_size;
    size_t head;   /* slot of the oldest item */
    size_t len;    /* items held */
    bool closed;
    unsigned char *ring; /* (capacity, item_size) */
};

tl_status tl_queue_create(size_t capacity, size_t item_size, tl_queue **out)
{
    *out = NULL;
    if (capacity < 1)
        return tl_error(TL_EINVAL, "queue: capacity must be >= 1, got %zu", capacity);
    if (item_size < 1)
        return tl_error(TL_EINVAL, "queue: item_size must be >= 1, got %zu", item_size);
    if (capacity > SIZE_MAX / item_size)
        return tl_error(TL_EINVAL, "queue: capacity %zu x item_size %zu overflows", capacity, item_size);
    tl_queue *q = tl_calloc(1, sizeof *q);
    if (q == NULL)
        return tl_error_oom();
    q->ring = tl_alloc_array(capacity, item_size);
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

tl_wait_result tl_queue_push_until(tl_queue *q, const void *item, int64_t deadline_ns)
{
    pthread_mutex_lock(&q->mu);
    while (!q->closed && q->len == q->capacity) {
        int rc = cond_wait_until(&q->not_full, &q->mu, deadline_ns);
        if (rc == ETIMEDOUT && !q->closed && q->len == q->capacity) {
            pthread_mutex_unlock(&q->mu);
            return TL_WAIT_TIMEOUT;
        }
    }
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return TL_WAIT_CLOSED;
    }
    size_t tail = (q->head + q->len) % q->capacity;
    memcpy(q->ring + tail * q->item_size, item, q->item_size);
    q->len++;
    /* One item wakes one popper; close() is what wakes them all. */
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return TL_WAIT_OK;
}

tl_wait_result tl_queue_push(tl_queue *q, const void *item)
{
    return tl_queue_push_until(q, item, TL_NO_DEADLINE);
}

tl_wait_result tl_queue_pop_until(tl_queue *q, void *item, int64_t deadline_ns)
{
    pthread_mutex_lock(&q->mu);
    while (!q->closed && q->len == 0) {
        int rc = cond_wait_until(&q->not_empty, &q->mu, deadline_ns);
        if (rc == ETIMEDOUT && !q->closed && q->len == 0) {
            pthread_mutex_unlock(&q->mu);
            return TL_WAIT_TIMEOUT;
        }
    }
    if (q->len == 0) { /* closed and drained */
        pthread_mutex_unlock(&q->mu);
        return TL_WAIT_CLOSED;
    }
    memcpy(item, q->ring + q->head * q->item_size, q->item_size);
    q->head = (q->head + 1) % q->capacity;
    q->len--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return TL_WAIT_OK;
}

tl_wait_result tl_queue_pop(tl_queue *q, void *item)
{
    return tl_queue_pop_until(q, item, TL_NO_DEADLINE);
}

void tl_queue_close(tl_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->not_full);
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

size_t tl_queue_len(tl_queue *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->len;
    pthread_mutex_unlock(&q->mu);
    return n;
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

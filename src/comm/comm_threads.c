/* comm_threads.c — the collectives among threads of one process.
 *
 * Every rank's buffers are visible to every thread, so nothing is staged:
 * each call publishes its arguments in a slot, meets the others at the entry
 * barrier, checks that all slots agree, does its share of the work straight
 * between the ranks' buffers, and meets them again at the exit barrier so
 * that no buffer is reused while another rank still reads or writes it.
 *
 * Only the entry barrier can be broken (by a failure or an abort) or time
 * out. Its rounds are all or nothing: either every rank passes or none does.
 * Once every rank has passed, the rest of the call is work that cannot
 * block, so every rank reaches the exit barrier, and it is never broken: a
 * rank whose call has returned is sure that no other rank still touches its
 * buffers, even when the communicator failed meanwhile. (Breaking the exit
 * barrier would let a rank return, and free its buffers, while another still
 * writes into them.)
 *
 * The shares never overlap and do not depend on timing. In a reduction rank
 * r owns chunk r (tl_comm_chunk): it sums that chunk over ranks 0..R-1 in
 * index order, a tile at a time on the stack, and writes the result to the
 * chunk of every rank's recv (all-reduce) or to its own recv
 * (reduce-scatter). A tile is read from every send before it is written to
 * any recv, and only rank r touches chunk r, so in-place calls are safe.
 *
 * Slots are double-buffered by call parity: a rank can be one call ahead
 * (publishing call k+1 while a slower one still reads the slots of call k)
 * but not two, since that needs everyone at call k+1's entry barrier.
 */
#include <stdio.h>
#include <string.h>

#include "../base/thread.h"
#include "comm_int.h"
#include "tpuloop/devices.h"

/* How long a rank polls a barrier before sleeping, when every rank has a
 * core of its own. A sleep and wake-up costs 5-10 µs; spinning for a few
 * times that bounds the loss when the others are late, and a longer spin
 * only hurts on a shared machine (measured: 0.1 µs a round spinning against
 * 6.5 µs sleeping, two ranks on two cores). */
#define SPIN_NS 20000

/* Elements per stack tile of a reduction (4 KiB for 8-byte types). */
#define TILE 512

/* One rank's own counters, padded so that ranks do not share a cache line. */
typedef struct rank_state {
    int64_t seq;          /* calls made; only the thread in the call touches it */
    atomic_llong waits;   /* barrier waits entered; read by a rank that times out */
    atomic_int busy;      /* a thread is inside a call as this rank */
    char pad[128 - sizeof(int64_t) - sizeof(atomic_llong) - sizeof(atomic_int)];
} rank_state;

struct tl_comm_group {
    tl_barrier enter;    /* broken when the communicator fails; timed */
    tl_barrier leave;    /* never broken; see the top of the file */
    tl_comm_call *slots; /* (2, n): slots of even and odd calls */
    rank_state *ranks;   /* (n) */
    int n, first;        /* its ranks are first .. first + n - 1 */
    int *rank_of;        /* (n) first + q, for messages */
};

/* ---- waiting -------------------------------------------------------------- */

/* Lists the ranks whose wait count is below w (those that have not reached
 * the wait this rank is in) into buf. */
static void list_missing(const tl_comm_group *t, int64_t w, char *buf, size_t cap)
{
    size_t used = 0;
    int listed = 0, more = 0;
    buf[0] = '\0';
    for (int q = 0; q < t->n; q++) {
        if (atomic_load_explicit(&t->ranks[q].waits, memory_order_relaxed) >= w)
            continue;
        if (listed < 16 && used + 16 < cap) {
            int n = snprintf(buf + used, cap - used, "%s%d", listed ? ", " : "", t->first + q);
            used += n > 0 ? (size_t)n : 0;
            listed++;
        } else {
            more++;
        }
    }
    if (more > 0 && used + 24 < cap)
        snprintf(buf + used, cap - used, " and %d more", more);
    if (listed == 0)
        snprintf(buf, cap, "none (they arrived as the time ran out)");
}

/* Meets the other ranks at the entry barrier. Returns TL_OK, or the
 * communicator's error: the one it already has, or a timeout this rank
 * reports. */
static tl_status meet(tl_comm *c, tl_comm_group *t, int l, tl_coll coll)
{
    int64_t w = atomic_fetch_add_explicit(&t->ranks[l].waits, 1, memory_order_relaxed) + 1;
    int64_t timeout = atomic_load_explicit(&c->timeout_ns, memory_order_relaxed);
    /* A lone rank never waits (its barrier opens at once): no clock read. */
    int64_t deadline = timeout > 0 && t->n > 1 ? tl_deadline_after_ns(timeout) : TL_NO_DEADLINE;
    tl_wait_result res = tl_barrier_wait_until(&t->enter, deadline);
    if (res == TL_WAIT_OK)
        return TL_OK;
    if (res == TL_WAIT_TIMEOUT) {
        char missing[160];
        list_missing(t, w, missing, sizeof missing);
        return tl_comm_fail(c, TL_ERUNTIME, "%s: rank %d timed out after %.3f s waiting for rank(s) %s",
                            tl_comm_coll_name(coll), t->first + l, (double)timeout / 1e9, missing);
    }
    return tl_comm_raise(c);
}

/* ---- the cross-rank check ------------------------------------------------- */

/* Appends "rank 0 <verb> v0, rank q <verb> v, ..." to buf: rank 0 and every
 * rank whose value differs from rank 0's, as many as fit. */
static void list_values(const tl_comm_call *s, int size, const int *rank_of, int64_t (*field)(const tl_comm_call *),
                        const char *(*show)(int64_t, char *, size_t), const char *verb, char *buf, size_t cap)
{
    int64_t v0 = field(&s[0]);
    char text[32];
    size_t used = strlen(buf);
    for (int q = 0; q < size; q++) {
        int64_t v = field(&s[q]);
        if (q > 0 && v == v0)
            continue;
        if (used + 72 >= cap) { /* room for one more entry or the ellipsis */
            snprintf(buf + used, cap - used, ", ...");
            return;
        }
        int n = snprintf(buf + used, cap - used, "%srank %d %s %s", q ? ", " : "", rank_of[q], verb,
                         show(v, text, sizeof text));
        used += n > 0 ? (size_t)n : 0;
    }
}

static int64_t f_coll(const tl_comm_call *s) { return s->coll; }
static int64_t f_count(const tl_comm_call *s) { return s->count; }
static int64_t f_dtype(const tl_comm_call *s) { return s->dtype; }
static int64_t f_op(const tl_comm_call *s) { return s->op; }
static int64_t f_root(const tl_comm_call *s) { return s->root; }

static const char *show_int(int64_t v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%lld", (long long)v);
    return buf;
}
static const char *show_coll(int64_t v, char *buf, size_t cap)
{
    (void)buf, (void)cap;
    return tl_comm_coll_name((tl_coll)v);
}
static const char *show_dtype(int64_t v, char *buf, size_t cap)
{
    (void)buf, (void)cap;
    return tl_comm_dtype_name((tl_comm_dtype)v);
}
static const char *show_op(int64_t v, char *buf, size_t cap)
{
    (void)buf, (void)cap;
    return tl_comm_op_name((tl_reduce_op)v);
}

/* Every rank runs this on the same slots and so reaches the same verdict and
 * the same message; the first to report it fails the communicator. */
tl_status tl_comm_check_calls(tl_comm *c, const tl_comm_call *s, int n, const int *rank_of)
{
    static const struct {
        const char *what, *verb;
        int64_t (*field)(const tl_comm_call *);
        const char *(*show)(int64_t, char *, size_t);
    } checks[] = {
        {"the collective", "called", f_coll, show_coll},
        {"count", "passed", f_count, show_int},
        {"dtype", "passed", f_dtype, show_dtype},
        {"op", "passed", f_op, show_op},
        {"root", "passed", f_root, show_int},
    };
    tl_coll coll = s[0].coll;
    for (size_t i = 0; i < TL_ARRAY_LEN(checks); i++) {
        if (i > 0 && coll == TL_COLL_BARRIER)
            break;
        if (checks[i].field == f_op && coll != TL_COLL_ALL_REDUCE && coll != TL_COLL_REDUCE_SCATTER)
            continue;
        if (checks[i].field == f_root && coll != TL_COLL_BROADCAST)
            continue;
        int q = 1;
        while (q < n && checks[i].field(&s[q]) == checks[i].field(&s[0]))
            q++;
        if (q == n)
            continue;
        char msg[TL_COMM_MSG_MAX];
        snprintf(msg, sizeof msg, "%s: ranks disagree on %s: ", tl_comm_coll_name(coll), checks[i].what);
        list_values(s, n, rank_of, checks[i].field, checks[i].show, checks[i].verb, msg, sizeof msg);
        return tl_comm_fail(c, TL_EINVAL, "%s", msg);
    }
    return TL_OK;
}

/* ---- the work ------------------------------------------------------------- */

/* Runs body for j in [0, m), written twice so that full tiles (m == TILE)
 * have a constant trip count: GCC's -O2 vectoriser needs one. */
#define FOR_TILE(j, m, body)                                   \
    do {                                                       \
        if ((m) == TILE) {                                     \
            for (int64_t j = 0; j < TILE; j++) {               \
                body;                                          \
            }                                                  \
        } else {                                               \
            for (int64_t j = 0; j < (m); j++) {                \
                body;                                          \
            }                                                  \
        }                                                      \
    } while (0)

/* How a mean divides the sum by R. For R a power of two, multiplying by the
 * exact 1/R gives the same bits as dividing (both round the same real
 * number once) and costs far less. */
typedef enum { SCALE_NONE, SCALE_MUL, SCALE_DIV } scale_mode;

/* A mean's scaling of m <= TILE sums in acc by R. */
#define SCALE_TILE(T, acc, m, scale, R)              \
    do {                                             \
        if ((scale) == SCALE_MUL) {                  \
            const T inv = (T)1 / (T)(R);             \
            FOR_TILE(j, m, (acc)[j] *= inv);         \
        } else if ((scale) == SCALE_DIV) {           \
            const T div = (T)(R);                    \
            FOR_TILE(j, m, (acc)[j] /= div);         \
        }                                            \
    } while (0)

/* Folds m <= TILE elements at offset off of the n calls' send into acc:
 * acc = in (x_0 when in is NULL); acc += x_q; ... in index order, then a
 * mean's scaling by R when last. The vectoriser works across elements,
 * never across ranks, so each element's sum keeps its order. */
#define DEFINE_FOLD_TILE(name, T)                                                                            \
    static void name(const tl_comm_call *s, int n, const T *in, int64_t off, int64_t m, scale_mode scale, int R, \
                     T *restrict acc)                                                                        \
    {                                                                                                        \
        int q = 0;                                                                                           \
        if (in == NULL)                                                                                      \
            in = (const T *)s[q++].send + off;                                                               \
        FOR_TILE(j, m, acc[j] = in[j]);                                                                      \
        for (; q < n; q++) {                                                                                 \
            const T *x = (const T *)s[q].send + off;                                                         \
            FOR_TILE(j, m, acc[j] += x[j]);                                                                  \
        }                                                                                                    \
        SCALE_TILE(T, acc, m, scale, R);                                                                     \
    }

DEFINE_FOLD_TILE(fold_tile_f32, float)
DEFINE_FOLD_TILE(fold_tile_f64, double)
/* Sums of int64 wrap: added as uint64_t, where overflow is defined (and
 * there is no integer mean, so the scaling never runs). */
DEFINE_FOLD_TILE(fold_tile_u64, uint64_t)

void tl_comm_fold(const tl_comm_call *s, int n, const void *in, int64_t off, int64_t m, bool last, int R,
                  void *out)
{
    tl_comm_dtype dtype = s[0].dtype;
    scale_mode scale = SCALE_NONE;
    if (last && s[0].op == TL_REDUCE_MEAN)
        scale = (R & (R - 1)) == 0 ? SCALE_MUL : SCALE_DIV;
    size_t es = tl_comm_dtype_size(dtype);
    union {
        float f32[TILE];
        double f64[TILE];
        uint64_t u64[TILE];
    } acc;
    for (int64_t b = 0; b < m; b += TILE) {
        int64_t k = m - b < TILE ? m - b : TILE;
        const char *inb = in != NULL ? (const char *)in + (size_t)b * es : NULL;
        switch (dtype) {
        case TL_COMM_F32: fold_tile_f32(s, n, (const float *)inb, off + b, k, scale, R, acc.f32); break;
        case TL_COMM_F64: fold_tile_f64(s, n, (const double *)inb, off + b, k, scale, R, acc.f64); break;
        case TL_COMM_I64: fold_tile_u64(s, n, (const uint64_t *)inb, off + b, k, SCALE_NONE, R, acc.u64); break;
        }
        memcpy((char *)out + (size_t)b * es, &acc, (size_t)k * es);
    }
}

void tl_comm_fold_arrays(tl_comm_dtype dtype, tl_reduce_op op, const void *const *x, int n, int64_t m, int R,
                         void *out)
{
    /* The arrays as the sends of n calls. */
    TL_ASSERT(n >= 1 && n <= TL_COMM_FOLD_MAX);
    tl_comm_call xs[TL_COMM_FOLD_MAX];
    for (int q = 0; q < n; q++)
        xs[q] = (tl_comm_call){.dtype = dtype, .op = op, .send = x[q]};
    tl_comm_fold(xs, n, NULL, 0, m, true, R, out);
}

/* Writes m reduced elements from acc to offset off of every rank's recv
 * (all-reduce) or to offset off - chunk_off of this rank's (reduce-scatter). */
static void put_tile(const tl_comm_call *s, int size, int rank, int64_t off, int64_t chunk_off, const void *acc,
                     int64_t m, size_t es)
{
    if (s[rank].coll == TL_COLL_REDUCE_SCATTER) {
        memcpy((char *)s[rank].recv + (size_t)(off - chunk_off) * es, acc, (size_t)m * es);
        return;
    }
    for (int q = 0; q < size; q++)
        memcpy((char *)s[q].recv + (size_t)off * es, acc, (size_t)m * es);
}

static void reduce(const tl_comm_call *s, int size, int rank)
{
    int64_t off, len;
    tl_comm_chunk(s[rank].count, size, rank, &off, &len);
    scale_mode scale = SCALE_NONE;
    if (s[rank].op == TL_REDUCE_MEAN)
        scale = (size & (size - 1)) == 0 ? SCALE_MUL : SCALE_DIV;
    union {
        float f32[TILE];
        double f64[TILE];
        uint64_t u64[TILE];
    } acc;
    for (int64_t b = off; b < off + len; b += TILE) {
        int64_t m = off + len - b < TILE ? off + len - b : TILE;
        switch (s[rank].dtype) {
        case TL_COMM_F32: fold_tile_f32(s, size, NULL, b, m, scale, size, acc.f32); break;
        case TL_COMM_F64: fold_tile_f64(s, size, NULL, b, m, scale, size, acc.f64); break;
        case TL_COMM_I64: fold_tile_u64(s, size, NULL, b, m, SCALE_NONE, size, acc.u64); break;
        }
        put_tile(s, size, rank, b, off, &acc, m, tl_comm_dtype_size(s[rank].dtype));
    }
}

/* Pulls every rank's block into this rank's recv: each rank writes only its
 * own memory. */
static void gather(const tl_comm_call *s, int size, int rank)
{
    size_t bytes = (size_t)s[rank].count * tl_comm_dtype_size(s[rank].dtype);
    if (bytes == 0)
        return;
    for (int q = 0; q < size; q++) {
        char *dst = (char *)s[rank].recv + (size_t)q * bytes;
        if (dst != s[q].send)
            memcpy(dst, s[q].send, bytes);
    }
}

tl_status tl_comm_a2a_check(tl_comm *c, const tl_comm_call *s, int n)
{
    for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++)
            if (s[r].scounts[q] != s[q].rcounts[r])
                return tl_comm_fail(c, TL_EINVAL, "tl_comm_all_to_all_v: rank %d sends %lld elements to rank %d, "
                                    "which expects %lld", r, (long long)s[r].scounts[q], q,
                                    (long long)s[q].rcounts[r]);
    return TL_OK;
}

/* Pulls every rank's block for this rank into its recv. */
static void all_to_all(const tl_comm_call *s, int size, int rank)
{
    size_t es = tl_comm_dtype_size(s[rank].dtype);
    for (int q = 0; q < size; q++) {
        int64_t n = s[rank].rcounts[q];
        if (n > 0)
            memcpy((char *)s[rank].recv + (size_t)tl_comm_a2a_recv_offset(&s[rank], q) * es,
                   (const char *)s[q].send + (size_t)tl_comm_a2a_send_offset(&s[q], rank) * es, (size_t)n * es);
    }
}

static void broadcast(const tl_comm_call *s, int rank)
{
    int root = s[rank].root;
    size_t bytes = (size_t)s[rank].count * tl_comm_dtype_size(s[rank].dtype);
    if (rank != root && bytes > 0 && s[rank].recv != s[root].recv)
        memcpy(s[rank].recv, s[root].recv, bytes);
}

/* ---- the group ---------------------------------------------------------- */

tl_status tl_comm_group_enter(tl_comm *c, tl_comm_group *g, int l, const tl_comm_call *call, tl_comm_call **slots)
{
    /* The barrier counts arrivals, not ranks: two threads passing the same
     * rank would open it with another rank's slot stale. The first one
     * cannot leave before the second arrives, so the second always sees
     * the flag. */
    if (atomic_exchange_explicit(&g->ranks[l].busy, 1, memory_order_acquire))
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d is already in a call on another thread",
                            tl_comm_coll_name(call->coll), g->first + l);
    int64_t seq = g->ranks[l].seq++;
    tl_comm_call *s = g->slots + (size_t)(seq & 1) * (size_t)g->n;
    s[l] = *call;
    tl_status st = meet(c, g, l, call->coll);
    if (st == TL_OK && g->n > 1) /* a lone rank agrees with itself */
        st = tl_comm_check_calls(c, s, g->n, g->rank_of);
    if (st != TL_OK) {
        atomic_store_explicit(&g->ranks[l].busy, 0, memory_order_release);
        return st;
    }
    *slots = s;
    return TL_OK;
}

void tl_comm_group_leave(tl_comm_group *g, int l, bool wait)
{
    if (wait) {
        tl_wait_result res = tl_barrier_wait(&g->leave);
        TL_ASSERT(res == TL_WAIT_OK);
    }
    atomic_store_explicit(&g->ranks[l].busy, 0, memory_order_release);
}

void tl_comm_group_wake(tl_comm_group *g)
{
    tl_barrier_break(&g->enter);
}

void tl_comm_group_destroy(tl_comm_group *g)
{
    if (g == NULL)
        return;
    tl_barrier_close(&g->enter);
    tl_barrier_close(&g->leave);
    tl_free(g->slots);
    tl_free(g->ranks);
    tl_free(g->rank_of);
    tl_free(g);
}

tl_status tl_comm_group_create(int n, int first, tl_comm_group **out)
{
    *out = NULL;
    tl_comm_group *g = tl_calloc(1, sizeof *g);
    if (g == NULL)
        return tl_error_oom();
    g->n = n;
    g->first = first;
    g->slots = tl_calloc(2 * (size_t)n, sizeof *g->slots);
    g->ranks = tl_calloc((size_t)n, sizeof *g->ranks);
    g->rank_of = tl_calloc((size_t)n, sizeof *g->rank_of);
    if (g->slots == NULL || g->ranks == NULL || g->rank_of == NULL) {
        tl_free(g->slots);
        tl_free(g->ranks);
        tl_free(g->rank_of);
        tl_free(g);
        return tl_error_oom();
    }
    for (int q = 0; q < n; q++) {
        g->rank_of[q] = first + q;
        atomic_init(&g->ranks[q].waits, 0);
        atomic_init(&g->ranks[q].busy, 0);
    }
    /* With more ranks than cores, a spinner burns the core that the rank it
     * waits for needs. */
    int64_t spin = n <= tl_available_cpus() ? SPIN_NS : 0;
    tl_status st = tl_barrier_init(&g->enter, n, spin);
    if (st == TL_OK && (st = tl_barrier_init(&g->leave, n, spin)) != TL_OK)
        tl_barrier_close(&g->enter);
    if (st != TL_OK) {
        tl_free(g->slots);
        tl_free(g->ranks);
        tl_free(g->rank_of);
        tl_free(g);
        return st;
    }
    *out = g;
    return TL_OK;
}

/* ---- the backend ---------------------------------------------------------- */

static tl_status threads_run(tl_comm *c, int rank, const tl_comm_call *call)
{
    tl_comm_group *g = c->impl;
    tl_comm_call *s;
    tl_status st = tl_comm_group_enter(c, g, rank, call, &s);
    if (st != TL_OK)
        return st;
    switch (call->coll) {
    case TL_COLL_ALL_REDUCE:
    case TL_COLL_REDUCE_SCATTER: reduce(s, c->size, rank); break;
    case TL_COLL_ALL_GATHER: gather(s, c->size, rank); break;
    case TL_COLL_BROADCAST: broadcast(s, rank); break;
    case TL_COLL_ALL_TO_ALL:
        /* Every rank checks every pair, so all reach one verdict. */
        st = tl_comm_a2a_check(c, s, c->size);
        if (st == TL_OK)
            all_to_all(s, c->size, rank);
        break;
    case TL_COLL_BARRIER: break;
    }
    /* Returns TL_OK even if the communicator failed during the work: the
     * call did complete, on every rank; the next call reports the failure.
     * A barrier has no work, so nothing to wait for. */
    tl_comm_group_leave(g, rank, call->coll != TL_COLL_BARRIER);
    return st;
}

static void threads_wake(tl_comm *c)
{
    tl_comm_group_wake(c->impl);
}

static void threads_destroy(tl_comm *c)
{
    tl_comm_group_destroy(c->impl);
}

static const tl_comm_backend threads_backend = {threads_run, threads_wake, threads_destroy};

tl_status tl_comm_create_threads(int size, tl_comm **out)
{
    *out = NULL;
    if (size < 1 || size > TL_COMM_MAX_RANKS)
        return tl_error(TL_EINVAL, "tl_comm_create_threads: size must be in [1, %d], got %d", TL_COMM_MAX_RANKS,
                        size);
    tl_comm *c;
    tl_status st = tl_comm_alloc(TL_COMM_THREADS, size, &c);
    if (st != TL_OK)
        return st;
    tl_comm_group *g;
    if ((st = tl_comm_group_create(size, 0, &g)) != TL_OK) {
        tl_comm_destroy(c);
        return st;
    }
    c->impl = g;
    c->be = &threads_backend;
    *out = c;
    return TL_OK;
}

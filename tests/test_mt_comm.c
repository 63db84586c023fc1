/*
 * test_mt_comm.c — the thread communicator with real ranks (also a
 * ThreadSanitizer target).
 *
 * Reductions are checked bit for bit against a sequential sum in rank order
 * computed here, on every rank, for R in {1, 2, 3, 4, 8} and n in {0, 1, 7,
 * R - 1, 1000, 4099}, 50 times each with random delays (sleeps and busy
 * loops drawn from tl_rng) so that the ranks arrive in ever different orders.
 * The inputs mix magnitudes over 2^±12, so a different summation order would
 * change the bits (one test checks that it does). Then all-gather,
 * broadcast and reduce-scatter, mixed back to back; ranks that disagree;
 * bad arguments, abort and timeouts releasing ranks that wait.
 *
 * Ranks never assert: each records its first problem, and the test thread
 * asserts after joining them.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/thread.h"
#include "tpuloop/comm.h"
#include "tpuloop/rng.h"

#define MAXR 8
#define MAXN 4099
#define REPS 50
#define POOL (MAXN + REPS) /* a rank's values; rep k reads the window at k */

static const int rank_counts[] = {1, 2, 3, 4, 8};
#define NRANK_COUNTS ((int)(sizeof rank_counts / sizeof rank_counts[0]))

/* ---- harness -------------------------------------------------------------- */

typedef struct rank_ctx rank_ctx;
typedef void (*rank_fn)(rank_ctx *);

struct rank_ctx {
    int rank, size;
    tl_comm *comm;
    void *shared;       /* the test's data */
    rank_fn fn;
    tl_rng jitter;
    char err[320];       /* the first problem this rank saw; "" if none */
    tl_status st[2];     /* statuses the error tests record */
    char msg[2][400];
    int64_t returned_ns; /* when the recorded call returned */
    uint32_t sink;       /* what jitter's busy loop computes */
};

/* Records the rank's first problem and aborts the communicator, so that
 * the other ranks stop waiting for this one and the test fails, not hangs. */
static void rank_fail(rank_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void rank_fail(rank_ctx *r, const char *fmt, ...)
{
    if (r->err[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, sizeof r->err, fmt, ap);
        va_end(ap);
    }
    tl_comm_abort(r->comm, TL_ERUNTIME, "a rank of the test failed");
}

#define FAIL rank_fail

/* A communicator whose ranks give up after a minute, so that a bug shows as
 * a failed test rather than a hung one. */
static tl_comm *new_comm(int size)
{
    tl_comm *comm = NULL;
    cr_assert_eq(tl_comm_create_threads(size, &comm), TL_OK);
    cr_assert_eq(tl_comm_set_timeout(comm, 60), TL_OK);
    return comm;
}

static void *rank_main(void *arg)
{
    rank_ctx *r = arg;
    r->fn(r);
    return NULL;
}

/* Runs fn on ranks 0..nthreads-1 of comm, each on its own thread, and joins
 * them. nthreads below the size leaves ranks missing; above it, the threads
 * past the last rank are helpers that play no rank (rank >= size). */
static void run_ranks(tl_comm *comm, int nthreads, rank_fn fn, void *shared, rank_ctx *ctx)
{
    tl_thread th[MAXR + 1];
    cr_assert_leq(nthreads, MAXR + 1);
    for (int i = 0; i < nthreads; i++) {
        memset(&ctx[i], 0, sizeof ctx[i]);
        ctx[i].rank = i;
        ctx[i].size = tl_comm_size(comm);
        ctx[i].comm = comm;
        ctx[i].shared = shared;
        ctx[i].fn = fn;
        tl_rng_init(&ctx[i].jitter, 0x5eed, 77, (uint64_t)i, (uint64_t)tl_comm_size(comm));
    }
    for (int i = 0; i < nthreads; i++)
        cr_assert_eq(tl_thread_start(&th[i], rank_main, &ctx[i]), TL_OK);
    for (int i = 0; i < nthreads; i++)
        cr_assert_eq(tl_thread_join(&th[i], NULL), TL_OK);
}

static void assert_no_rank_failed(const rank_ctx *ctx, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(ctx[i].err, "", "%s, R=%d, rank %d: %s", what, ctx[i].size, i, ctx[i].err);
}

/* A short random pause: a sleep of 1-8 µs (more, in practice), a busy loop,
 * or nothing. */
static void jitter(rank_ctx *r)
{
    uint32_t u = tl_rng_u32(&r->jitter);
    if ((u & 3) == 0) {
        struct timespec ts = {0, 1000 * (long)(1 + (u >> 2) % 8)};
        nanosleep(&ts, NULL);
    } else if ((u & 3) == 1) {
        uint32_t spin = 0;
        for (uint32_t i = 0; i < (u >> 2) % 3000; i++)
            spin += i * i;
        r->sink += spin; /* keeps the loop */
    }
}

/* ---- the values ----------------------------------------------------------- */

/* POOL values per rank of each type, of mixed signs and magnitudes. */
typedef struct pools {
    float f32[MAXR][POOL];
    double f64[MAXR][POOL];
    int64_t i64[MAXR][POOL];
} pools;

static pools *make_pools(void)
{
    pools *p = malloc(sizeof *p);
    cr_assert_not_null(p);
    for (int q = 0; q < MAXR; q++) {
        tl_rng g;
        tl_rng_init(&g, 2024, 1, (uint64_t)q, 0);
        for (int i = 0; i < POOL; i++) {
            uint32_t u = tl_rng_u32(&g), v = tl_rng_u32(&g);
            /* sign, exponent 127 +- 12, 23 random mantissa bits */
            uint32_t fbits = (u & 0x80000000u) | (uint32_t)(115 + (u >> 23) % 25) << 23 | (v & 0x7fffff);
            memcpy(&p->f32[q][i], &fbits, sizeof fbits);
            uint64_t w = (uint64_t)tl_rng_u32(&g) << 32 | tl_rng_u32(&g);
            uint64_t dbits = (uint64_t)(u & 0x80000000u) << 32 | (uint64_t)(1011 + (u >> 23) % 25) << 52 |
                             (w & 0xfffffffffffffull);
            memcpy(&p->f64[q][i], &dbits, sizeof dbits);
            p->i64[q][i] = (int64_t)(w ^ ((uint64_t)v << 17)); /* large: sums wrap */
        }
    }
    return p;
}

/* The reduction of element i of window rep over ranks 0..R-1 in order, as a
 * plain loop computes it. */
static void expect_elem(const pools *p, tl_comm_dtype dt, tl_reduce_op op, int R, int rep, int64_t i, void *out)
{
    switch (dt) {
    case TL_COMM_F32: {
        float acc = p->f32[0][rep + i];
        for (int q = 1; q < R; q++)
            acc += p->f32[q][rep + i];
        if (op == TL_REDUCE_MEAN)
            acc /= (float)R;
        memcpy(out, &acc, sizeof acc);
        break;
    }
    case TL_COMM_F64: {
        double acc = p->f64[0][rep + i];
        for (int q = 1; q < R; q++)
            acc += p->f64[q][rep + i];
        if (op == TL_REDUCE_MEAN)
            acc /= (double)R;
        memcpy(out, &acc, sizeof acc);
        break;
    }
    case TL_COMM_I64: {
        uint64_t acc = (uint64_t)p->i64[0][rep + i];
        for (int q = 1; q < R; q++)
            acc += (uint64_t)p->i64[q][rep + i];
        memcpy(out, &acc, sizeof acc);
        break;
    }
    }
}

static const void *window(const pools *p, tl_comm_dtype dt, int q, int rep)
{
    switch (dt) {
    case TL_COMM_F32: return &p->f32[q][rep];
    case TL_COMM_F64: return &p->f64[q][rep];
    default: return &p->i64[q][rep];
    }
}

static size_t esize(tl_comm_dtype dt)
{
    return dt == TL_COMM_F32 ? 4 : 8;
}

/* got (n elements from element first of the reduction) has the bits of the
 * sequential reduction; otherwise records the first difference. */
static bool check_reduced(rank_ctx *r, const pools *p, tl_comm_dtype dt, tl_reduce_op op, int rep,
                          int64_t first, int64_t n, const void *got, const char *what)
{
    size_t es = esize(dt);
    for (int64_t i = 0; i < n; i++) {
        unsigned char want[8];
        expect_elem(p, dt, op, r->size, rep, first + i, want);
        if (memcmp(want, (const unsigned char *)got + i * (int64_t)es, es) != 0) {
            double w = 0, g = 0;
            if (dt == TL_COMM_F32) {
                float a, b;
                memcpy(&a, want, 4);
                memcpy(&b, (const char *)got + i * 4, 4);
                w = a, g = b;
            } else if (dt == TL_COMM_F64) {
                memcpy(&w, want, 8);
                memcpy(&g, (const char *)got + i * 8, 8);
            }
            FAIL(r, "%s %s n=%lld rep %d: element %lld is %.9g, want %.9g (bitwise)", what, op ? "MEAN" : "SUM",
                 (long long)n, rep, (long long)(first + i), g, w);
            return false;
        }
    }
    return true;
}

/* ---- all-reduce, bit for bit ---------------------------------------------- */

typedef struct ar_case {
    const pools *p;
    tl_comm_dtype dt;
    int reps;
} ar_case;

static void all_reduce_ranks(rank_ctx *r)
{
    const ar_case *c = r->shared;
    const pools *p = c->p;
    size_t es = esize(c->dt);
    unsigned char *buf = malloc(MAXN * 8), *out = malloc(MAXN * 8);
    if (buf == NULL || out == NULL) {
        FAIL(r, "out of memory");
        goto done;
    }
    const int64_t sizes[] = {0, 1, 7, r->size - 1, 1000, MAXN};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int64_t n = sizes[si];
        for (int op = TL_REDUCE_SUM; op <= TL_REDUCE_MEAN; op++) {
            if (op == TL_REDUCE_MEAN && c->dt == TL_COMM_I64)
                continue;
            for (int rep = 0; rep < c->reps; rep++) {
                const void *mine = window(p, c->dt, r->rank, rep);
                /* Odd reps reduce in place, even ones from the (shared,
                 * read-only) pool into a poisoned buffer. */
                bool in_place = rep & 1;
                void *dst = in_place ? buf : out;
                if (in_place)
                    memcpy(buf, mine, (size_t)n * es);
                else
                    memset(out, 0xA5, (size_t)n * es);
                jitter(r);
                tl_status st = tl_comm_all_reduce(r->comm, r->rank, in_place ? buf : mine, dst, n, c->dt,
                                                  (tl_reduce_op)op);
                if (st != TL_OK) {
                    FAIL(r, "all_reduce n=%lld rep %d: %s: %s", (long long)n, rep, tl_err_name(st), tl_last_error());
                    goto done;
                }
                if (!check_reduced(r, p, c->dt, (tl_reduce_op)op, rep, 0, n, dst, "all_reduce"))
                    goto done;
            }
        }
    }
done:
    free(buf);
    free(out);
}

static void all_reduce_for_every_size(tl_comm_dtype dt, int reps)
{
    pools *p = make_pools();
    ar_case c = {p, dt, reps};
    rank_ctx ctx[MAXR + 1];
    for (int k = 0; k < NRANK_COUNTS; k++) {
        int R = rank_counts[k];
        tl_comm *comm = new_comm(R);
        run_ranks(comm, R, all_reduce_ranks, &c, ctx);
        assert_no_rank_failed(ctx, R, "all_reduce");
        cr_assert_eq(tl_comm_status(comm), TL_OK);
        tl_comm_destroy(comm);
    }
    free(p);
}

Test(mt_comm, all_reduce_f32_is_the_sequential_sum_bit_for_bit)
{
    all_reduce_for_every_size(TL_COMM_F32, REPS);
}

Test(mt_comm, all_reduce_f64_is_the_sequential_sum_bit_for_bit)
{
    all_reduce_for_every_size(TL_COMM_F64, 8);
}

Test(mt_comm, all_reduce_i64_wraps_like_the_sequential_sum)
{
    all_reduce_for_every_size(TL_COMM_I64, 4);
}

Test(mt_comm, the_inputs_would_expose_a_different_order)
{
    /* The bitwise checks mean something only if the order matters: summing
     * the same values from rank R-1 down to 0 changes some results. */
    pools *p = make_pools();
    int differ = 0;
    for (int i = 0; i < MAXN; i++) {
        float fwd = p->f32[0][i], back = p->f32[MAXR - 1][i];
        for (int q = 1; q < MAXR; q++)
            fwd += p->f32[q][i];
        for (int q = MAXR - 2; q >= 0; q--)
            back += p->f32[q][i];
        differ += memcmp(&fwd, &back, sizeof fwd) != 0;
    }
    cr_assert_gt(differ, MAXN / 10, "only %d of %d sums depend on the order", differ, MAXN);
    free(p);
}

/* ---- the other collectives, back to back ---------------------------------- */

static void mixed_ranks(rank_ctx *r)
{
    const pools *p = r->shared;
    const int R = r->size;
    float *recv = malloc(sizeof(float) * MAXN * MAXR), *buf = malloc(sizeof(float) * MAXN);
    if (recv == NULL || buf == NULL) {
        FAIL(r, "out of memory");
        goto done;
    }
    const int64_t counts[] = {0, 1, 7, R - 1, 1000, MAXN};
    for (int rep = 0; rep < 8; rep++) {
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            int64_t n = counts[ci];
            const float *mine = p->f32[r->rank] + rep;
            tl_status st;

            /* all-gather: odd reps in place */
            bool in_place = rep & 1;
            memset(recv, 0xA5, sizeof(float) * (size_t)(n * R));
            if (in_place)
                memcpy(recv + r->rank * n, mine, sizeof(float) * (size_t)n);
            jitter(r);
            st = tl_comm_all_gather(r->comm, r->rank, in_place ? recv + r->rank * n : mine, recv, n, TL_COMM_F32);
            if (st != TL_OK) {
                FAIL(r, "all_gather n=%lld: %s", (long long)n, tl_last_error());
                goto done;
            }
            for (int q = 0; q < R; q++) {
                if (memcmp(recv + q * n, p->f32[q] + rep, sizeof(float) * (size_t)n) != 0) {
                    FAIL(r, "all_gather n=%lld rep %d: block %d is not rank %d's", (long long)n, rep, q, q);
                    goto done;
                }
            }

            /* broadcast from a root that moves round the ranks */
            int root = (rep + (int)ci) % R;
            if (r->rank == root)
                memcpy(buf, mine, sizeof(float) * (size_t)n);
            else
                memset(buf, 0xA5, sizeof(float) * (size_t)n);
            jitter(r);
            st = tl_comm_broadcast(r->comm, r->rank, buf, n, TL_COMM_F32, root);
            if (st != TL_OK) {
                FAIL(r, "broadcast n=%lld: %s", (long long)n, tl_last_error());
                goto done;
            }
            if (memcmp(buf, p->f32[root] + rep, sizeof(float) * (size_t)n) != 0) {
                FAIL(r, "broadcast n=%lld rep %d from %d: not the root's values", (long long)n, rep, root);
                goto done;
            }

            jitter(r);
            st = tl_comm_barrier(r->comm, r->rank);
            if (st != TL_OK) {
                FAIL(r, "barrier: %s", tl_last_error());
                goto done;
            }

            /* reduce-scatter: this rank's chunk of the all-reduce */
            tl_reduce_op op = (tl_reduce_op)(rep & 1);
            int64_t off, len;
            tl_comm_chunk(n, R, r->rank, &off, &len);
            memset(buf, 0xA5, sizeof(float) * (size_t)n);
            jitter(r);
            st = tl_comm_reduce_scatter(r->comm, r->rank, mine, buf, n, TL_COMM_F32, op);
            if (st != TL_OK) {
                FAIL(r, "reduce_scatter n=%lld: %s", (long long)n, tl_last_error());
                goto done;
            }
            if (!check_reduced(r, p, TL_COMM_F32, op, rep, off, len, buf, "reduce_scatter"))
                goto done;
            unsigned char *after = (unsigned char *)(buf + len);
            for (int64_t i = 0; i < (n - len) * 4; i++) {
                if (after[i] != 0xA5) {
                    FAIL(r, "reduce_scatter n=%lld: wrote past its chunk of %lld", (long long)n, (long long)len);
                    goto done;
                }
            }
        }
    }
done:
    free(recv);
    free(buf);
}

Test(mt_comm, all_gather_broadcast_reduce_scatter_mixed)
{
    pools *p = make_pools();
    rank_ctx ctx[MAXR + 1];
    for (int k = 0; k < NRANK_COUNTS; k++) {
        int R = rank_counts[k];
        tl_comm *comm = new_comm(R);
        run_ranks(comm, R, mixed_ranks, p, ctx);
        assert_no_rank_failed(ctx, R, "mixed collectives");
        tl_comm_destroy(comm);
    }
    free(p);
}

/* ---- ranks that disagree -------------------------------------------------- */

enum { K_BARRIER, K_ALL_REDUCE, K_BROADCAST };

/* What each of 4 ranks calls after good_calls good all-reduces, and the one
 * message every rank must get from that call and from a barrier after it. */
typedef struct disagree_case {
    const char *name;
    int kind[4];
    int64_t count[4];
    tl_comm_dtype dtype[4];
    tl_reduce_op op[4];
    int root[4];
    bool null_send[4];
    int good_calls;
    const char *want;
} disagree_case;

#define F4 {TL_COMM_F32, TL_COMM_F32, TL_COMM_F32, TL_COMM_F32}
#define SUM4 {TL_REDUCE_SUM, TL_REDUCE_SUM, TL_REDUCE_SUM, TL_REDUCE_SUM}
#define AR4 {K_ALL_REDUCE, K_ALL_REDUCE, K_ALL_REDUCE, K_ALL_REDUCE}
#define N4 {100, 100, 100, 100}

static const disagree_case disagree_cases[] = {
    {"count", AR4, {100, 100, 99, 100}, F4, SUM4, {0}, {false}, 7,
     "tl_comm_all_reduce: ranks disagree on count: rank 0 passed 100, rank 2 passed 99"},
    {"op", AR4, N4, F4, {TL_REDUCE_SUM, TL_REDUCE_MEAN, TL_REDUCE_SUM, TL_REDUCE_SUM}, {0}, {false}, 0,
     "tl_comm_all_reduce: ranks disagree on op: rank 0 passed SUM, rank 1 passed MEAN"},
    {"dtype", AR4, N4, {TL_COMM_F64, TL_COMM_F32, TL_COMM_F32, TL_COMM_F32}, SUM4, {0}, {false}, 2,
     "tl_comm_all_reduce: ranks disagree on dtype: rank 0 passed f64, rank 1 passed f32, rank 2 passed f32, "
     "rank 3 passed f32"},
    {"collective", {K_ALL_REDUCE, K_ALL_REDUCE, K_ALL_REDUCE, K_BARRIER}, N4, F4, SUM4, {0}, {false}, 3,
     "tl_comm_all_reduce: ranks disagree on the collective: rank 0 called tl_comm_all_reduce, "
     "rank 3 called tl_comm_barrier"},
    {"root", {K_BROADCAST, K_BROADCAST, K_BROADCAST, K_BROADCAST}, N4, F4, SUM4, {0, 2, 0, 1}, {false}, 1,
     "tl_comm_broadcast: ranks disagree on root: rank 0 passed 0, rank 1 passed 2, rank 3 passed 1"},
    /* Not a disagreement: one rank's own bad argument releases the others. */
    {"bad argument", AR4, N4, F4, SUM4, {0}, {false, false, true, false}, 5,
     "tl_comm_all_reduce: rank 2: send is NULL with count 100"},
};

static void disagree_ranks(rank_ctx *r)
{
    const disagree_case *dc = r->shared;
    double buf[128] = {0};
    for (int k = 0; k < dc->good_calls; k++) {
        jitter(r);
        tl_status st = tl_comm_all_reduce(r->comm, r->rank, buf, buf, 100, TL_COMM_F32, TL_REDUCE_SUM);
        if (st != TL_OK) {
            FAIL(r, "good call %d: %s", k, tl_last_error());
            return;
        }
    }
    int q = r->rank;
    jitter(r);
    switch (dc->kind[q]) {
    case K_BARRIER: r->st[0] = tl_comm_barrier(r->comm, q); break;
    case K_ALL_REDUCE:
        r->st[0] = tl_comm_all_reduce(r->comm, q, dc->null_send[q] ? NULL : buf, buf, dc->count[q], dc->dtype[q],
                                      dc->op[q]);
        break;
    default: r->st[0] = tl_comm_broadcast(r->comm, q, buf, dc->count[q], dc->dtype[q], dc->root[q]); break;
    }
    snprintf(r->msg[0], sizeof r->msg[0], "%s", tl_last_error());
    r->st[1] = tl_comm_barrier(r->comm, q);
    snprintf(r->msg[1], sizeof r->msg[1], "%s", tl_last_error());
}

Test(mt_comm, disagreement_fails_every_rank_with_one_message)
{
    for (size_t i = 0; i < sizeof disagree_cases / sizeof disagree_cases[0]; i++) {
        const disagree_case *dc = &disagree_cases[i];
        tl_comm *comm = new_comm(4);
        rank_ctx ctx[MAXR + 1];
        run_ranks(comm, 4, disagree_ranks, (void *)dc, ctx);
        assert_no_rank_failed(ctx, 4, dc->name);
        for (int q = 0; q < 4; q++) {
            cr_assert_eq(ctx[q].st[0], TL_EINVAL, "%s: rank %d got %s: %s", dc->name, q, tl_err_name(ctx[q].st[0]),
                         ctx[q].msg[0]);
            cr_assert_str_eq(ctx[q].msg[0], dc->want, "%s: rank %d", dc->name, q);
            cr_assert_eq(ctx[q].st[1], TL_EINVAL, "%s: rank %d's next call", dc->name, q);
            cr_assert_str_eq(ctx[q].msg[1], dc->want, "%s: rank %d's next call", dc->name, q);
        }
        cr_assert_str_eq(tl_comm_errmsg(comm), dc->want);
        tl_comm_destroy(comm);
    }
}

/* ---- abort and timeouts --------------------------------------------------- */

typedef struct abort_case {
    atomic_llong abort_ns; /* when the abort was called */
} abort_case;

/* Ranks 0-2 wait in a barrier for rank 3, whose step "fails": it aborts
 * instead of coming. */
static void abort_from_rank(rank_ctx *r)
{
    abort_case *ac = r->shared;
    if (r->rank == 3) {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
        atomic_store(&ac->abort_ns, tl_now_ns());
        r->st[0] = tl_comm_abort(r->comm, TL_ERUNTIME, "rank 3: step 7 failed");
    } else {
        r->st[0] = tl_comm_barrier(r->comm, r->rank);
    }
    r->returned_ns = tl_now_ns();
    snprintf(r->msg[0], sizeof r->msg[0], "%s", tl_last_error());
    float x[3] = {1, 2, 3};
    r->st[1] = tl_comm_all_reduce(r->comm, r->rank, x, x, 3, TL_COMM_F32, TL_REDUCE_SUM);
    snprintf(r->msg[1], sizeof r->msg[1], "%s", tl_last_error());
}

Test(mt_comm, abort_by_a_rank_releases_the_ranks_in_a_barrier)
{
    const char *want = "communicator aborted: rank 3: step 7 failed";
    abort_case ac;
    atomic_init(&ac.abort_ns, 0);
    tl_comm *comm = new_comm(4);
    rank_ctx ctx[MAXR + 1];
    run_ranks(comm, 4, abort_from_rank, &ac, ctx);
    for (int q = 0; q < 4; q++) {
        cr_assert_eq(ctx[q].st[0], TL_ERUNTIME, "rank %d: %s", q, ctx[q].msg[0]);
        cr_assert_str_eq(ctx[q].msg[0], want, "rank %d", q);
        cr_assert_eq(ctx[q].st[1], TL_ERUNTIME, "rank %d's next call", q);
        cr_assert_str_eq(ctx[q].msg[1], want, "rank %d's next call", q);
        cr_assert_geq(ctx[q].returned_ns, atomic_load(&ac.abort_ns), "rank %d left the barrier before the abort", q);
    }
    tl_comm_destroy(comm);
}

/* Every rank runs collectives until one fails; a helper thread that is no
 * rank aborts the communicator meanwhile, so the abort lands in any phase.
 * x lives on each rank's stack on purpose: a rank that returned while
 * another still wrote its chunk into x would crash this test. */
static void loop_until_abort(rank_ctx *r)
{
    if (r->rank >= r->size) {
        struct timespec ts = {0, 30000000};
        nanosleep(&ts, NULL);
        tl_comm_abort(r->comm, TL_EIO, "host: input failed");
        return;
    }
    float x[1000] = {0};
    for (long k = 0; k < 100000000; k++) {
        jitter(r);
        tl_status st = (k % 3 == 2) ? tl_comm_barrier(r->comm, r->rank)
                                    : tl_comm_all_reduce(r->comm, r->rank, x, x, 1000, TL_COMM_F32, TL_REDUCE_MEAN);
        if (st != TL_OK) {
            r->st[0] = st;
            snprintf(r->msg[0], sizeof r->msg[0], "%s", tl_last_error());
            return;
        }
    }
    FAIL(r, "never saw the abort");
}

Test(mt_comm, abort_from_another_thread_stops_ranks_in_any_phase)
{
    for (int k = 1; k < NRANK_COUNTS; k++) {
        int R = rank_counts[k];
        tl_comm *comm = new_comm(R);
        rank_ctx ctx[MAXR + 1];
        run_ranks(comm, R + 1, loop_until_abort, NULL, ctx);
        assert_no_rank_failed(ctx, R, "abort");
        for (int q = 0; q < R; q++) {
            cr_assert_eq(ctx[q].st[0], TL_EIO, "R=%d rank %d: %s", R, q, ctx[q].msg[0]);
            cr_assert_str_eq(ctx[q].msg[0], "communicator aborted: host: input failed", "R=%d rank %d", R, q);
        }
        tl_comm_destroy(comm);
    }
}

/* Threads 0, 1 and 2 play ranks 0, 1 and 0: rank 2 never comes, and the
 * barrier, which counts arrivals, must not open on two rank 0s. */
static void duplicate_rank(rank_ctx *r)
{
    int rank = r->rank == 2 ? 0 : r->rank;
    float x[8] = {0};
    r->st[0] = tl_comm_all_reduce(r->comm, rank, x, x, 8, TL_COMM_F32, TL_REDUCE_SUM);
    snprintf(r->msg[0], sizeof r->msg[0], "%s", tl_last_error());
}

Test(mt_comm, two_threads_playing_one_rank_fail_every_rank)
{
    tl_comm *comm = new_comm(3);
    rank_ctx ctx[MAXR + 1];
    run_ranks(comm, 3, duplicate_rank, NULL, ctx);
    for (int q = 0; q < 3; q++) {
        cr_assert_eq(ctx[q].st[0], TL_EINVAL, "thread %d: %s", q, ctx[q].msg[0]);
        cr_assert_str_eq(ctx[q].msg[0], "tl_comm_all_reduce: rank 0 is already in a call on another thread",
                         "thread %d", q);
    }
    tl_comm_destroy(comm);
}

static void two_of_three(rank_ctx *r)
{
    r->st[0] = tl_comm_barrier(r->comm, r->rank);
    snprintf(r->msg[0], sizeof r->msg[0], "%s", tl_last_error());
}

Test(mt_comm, timeout_releases_the_ranks_that_came)
{
    tl_comm *comm = new_comm(3);
    cr_assert_eq(tl_comm_set_timeout(comm, 0.05), TL_OK);
    rank_ctx ctx[MAXR + 1];
    run_ranks(comm, 2, two_of_three, NULL, ctx); /* rank 2 never comes */
    for (int q = 0; q < 2; q++) {
        cr_assert_eq(ctx[q].st[0], TL_ERUNTIME, "rank %d: %s", q, ctx[q].msg[0]);
        cr_assert(strstr(ctx[q].msg[0], "timed out after 0.050 s waiting for rank(s) 2") != NULL, "rank %d: %s", q,
                  ctx[q].msg[0]);
        cr_assert_str_eq(ctx[q].msg[0], ctx[0].msg[0], "every rank gets the same message");
    }
    /* The latecomer gets it too. */
    cr_assert_eq(tl_comm_barrier(comm, 2), TL_ERUNTIME);
    cr_assert_str_eq(tl_last_error(), ctx[0].msg[0]);
    tl_comm_destroy(comm);
}

/* ---- all-to-all ------------------------------------------------------------- */

/* Rank r sends (r + q) % 3 + q elements to rank q, element i being
 * r * 1000000 + q * 1000 + i, packed (rep 0) or at spread-out offsets
 * (rep 1), 20 times with jitter. */
static int64_t a2a_count(int r, int q)
{
    return (r + q) % 3 + q;
}

static void a2a_ranks(rank_ctx *r)
{
    int R = r->size, me = r->rank;
    int64_t sc[MAXR], so[MAXR], rc[MAXR], ro[MAXR], stot = 0, rtot = 0;
    for (int q = 0; q < R; q++) {
        sc[q] = a2a_count(me, q);
        rc[q] = a2a_count(q, me);
        so[q] = stot * 2 + 1; /* gaps between the blocks when spread out */
        ro[q] = rtot * 2 + 3;
        stot += sc[q];
        rtot += rc[q];
    }
    int64_t send[256], recv[256]; /* R = 8 sends at most 44, spread over at most 2 x 44 + 9 */
    for (int rep = 0; rep < 20; rep++) {
        bool spread = rep % 2 == 1;
        memset(send, 0, sizeof send);
        int64_t off = 0;
        for (int q = 0; q < R; q++) {
            int64_t at = spread ? so[q] : off;
            for (int64_t i = 0; i < sc[q]; i++)
                send[at + i] = (int64_t)me * 1000000 + q * 1000 + i;
            off += sc[q];
        }
        memset(recv, 0xff, sizeof recv);
        jitter(r);
        tl_status st = tl_comm_all_to_all_v(r->comm, me, send, sc, spread ? so : NULL, recv, rc, spread ? ro : NULL,
                                            TL_COMM_I64);
        if (st != TL_OK) {
            FAIL(r, "all_to_all_v: %s", tl_last_error());
            return;
        }
        off = 0;
        for (int q = 0; q < R; q++) {
            int64_t at = spread ? ro[q] : off;
            for (int64_t i = 0; i < rc[q]; i++)
                if (recv[at + i] != (int64_t)q * 1000000 + me * 1000 + i) {
                    FAIL(r, "rep %d: element %lld from rank %d is %lld", rep, (long long)i, q, (long long)recv[at + i]);
                    return;
                }
            off += rc[q];
        }
    }
}

Test(mt_comm, all_to_all_v_delivers_every_block_packed_or_spread)
{
    for (int ci = 0; ci < NRANK_COUNTS; ci++) {
        int R = rank_counts[ci];
        tl_comm *comm = new_comm(R);
        rank_ctx ctx[MAXR + 1];
        run_ranks(comm, R, a2a_ranks, NULL, ctx);
        assert_no_rank_failed(ctx, R, "all_to_all_v");
        tl_comm_destroy(comm);
    }
}

/* Rank 2 expects one element fewer from rank 1 than rank 1 sends. */
static void a2a_mismatch(rank_ctx *r)
{
    int64_t sc[4] = {1, 1, 1, 1}, rc[4] = {1, 1, 1, 1}, send[4] = {0}, recv[4] = {0};
    if (r->rank == 2)
        rc[1] = 0;
    r->st[0] = tl_comm_all_to_all_v(r->comm, r->rank, send, sc, NULL, recv, rc, NULL, TL_COMM_I64);
    snprintf(r->msg[0], sizeof r->msg[0], "%s", tl_last_error());
    r->st[1] = tl_comm_barrier(r->comm, r->rank);
}

Test(mt_comm, all_to_all_v_counts_that_do_not_pair_fail_every_rank)
{
    tl_comm *comm = new_comm(4);
    rank_ctx ctx[MAXR + 1];
    run_ranks(comm, 4, a2a_mismatch, NULL, ctx);
    static const char want[] = "tl_comm_all_to_all_v: rank 1 sends 1 elements to rank 2, which expects 0";
    for (int q = 0; q < 4; q++) {
        cr_assert_eq(ctx[q].st[0], TL_EINVAL, "rank %d: %s", q, ctx[q].msg[0]);
        cr_assert_str_eq(ctx[q].msg[0], want, "rank %d", q);
        cr_assert_eq(ctx[q].st[1], TL_EINVAL, "rank %d's next call", q);
    }
    tl_comm_destroy(comm);
}

/* team.c — a fork-join team of threads (thread.h): two barriers per job,
 * the owner taking part 0. */
#include <string.h>

#include "base_int.h"
#include "thread.h"

typedef struct helper {
    struct tl_team *team;
    int part;
    int cpu; /* -1: unpinned */
    tl_thread thread;
} helper;

struct tl_team {
    int n;
    tl_barrier start, end; /* the job is posted / every part returned */
    tl_team_fn fn;         /* the job; written by the owner before start */
    void *ctx;
    int started;           /* helpers running */
    helper *helpers;       /* (n - 1) */
};

static void *helper_main(void *arg)
{
    helper *h = arg;
    tl_team *t = h->team;
    if (h->cpu >= 0 && tl_thread_pin_self(h->cpu) != TL_OK)
        tl_log(TL_LOG_DEBUG, "intra-op thread %d runs unpinned: %s", h->part, tl_last_error());
    tl_fp_set_kernel_env(); /* the owner's kernels' environment (base_int.h) */
    /* A broken start barrier is the team's end (tl_team_destroy). */
    while (tl_barrier_wait(&t->start) == TL_WAIT_OK) {
        t->fn(t->ctx, h->part, t->n);
        if (tl_barrier_wait(&t->end) != TL_WAIT_OK)
            break;
    }
    return NULL;
}

tl_status tl_team_create(int nthreads, const int *cpus, int64_t spin_ns, tl_team **out)
{
    *out = NULL;
    if (nthreads < 1)
        return tl_error(TL_EINVAL, "a team needs nthreads >= 1, got %d", nthreads);
    if (spin_ns < 0)
        return tl_error(TL_EINVAL, "a team's spin must be >= 0 ns, got %lld", (long long)spin_ns);
    tl_team *t = tl_calloc(1, sizeof *t);
    if (t == NULL)
        return tl_error_oom();
    t->n = nthreads;
    if (nthreads == 1) {
        *out = t;
        return TL_OK;
    }
    t->helpers = tl_calloc((size_t)(nthreads - 1), sizeof *t->helpers);
    if (t->helpers == NULL) {
        tl_free(t);
        return tl_error_oom();
    }
    tl_status st = tl_barrier_init(&t->start, nthreads, spin_ns);
    if (st == TL_OK && (st = tl_barrier_init(&t->end, nthreads, spin_ns)) != TL_OK)
        tl_barrier_close(&t->start);
    if (st != TL_OK) {
        tl_free(t->helpers);
        tl_free(t);
        return st;
    }
    for (int i = 0; i < nthreads - 1; i++) {
        helper *h = &t->helpers[i];
        h->team = t;
        h->part = i + 1;
        h->cpu = cpus != NULL ? cpus[i] : -1;
        if ((st = tl_thread_start(&h->thread, helper_main, h)) != TL_OK) {
            tl_team_destroy(t);
            return st;
        }
        t->started++;
    }
    *out = t;
    return TL_OK;
}

void tl_team_destroy(tl_team *t)
{
    if (t == NULL)
        return;
    if (t->n > 1) {
        tl_barrier_break(&t->start);
        for (int i = 0; i < t->started; i++)
            (void)tl_thread_join(&t->helpers[i].thread, NULL);
        tl_barrier_close(&t->start);
        tl_barrier_close(&t->end);
    }
    tl_free(t->helpers);
    tl_free(t);
}

int tl_team_size(const tl_team *t)
{
    return t == NULL ? 1 : t->n;
}

void tl_team_run(tl_team *t, tl_team_fn fn, void *ctx)
{
    if (t == NULL || t->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    t->fn = fn;
    t->ctx = ctx;
    /* Neither wait can fail: only tl_team_destroy breaks a barrier, and
     * the owner is here, not there. */
    tl_wait_result r = tl_barrier_wait(&t->start);
    TL_ASSERT(r == TL_WAIT_OK);
    fn(ctx, 0, t->n);
    r = tl_barrier_wait(&t->end);
    TL_ASSERT(r == TL_WAIT_OK);
}

typedef struct team_copy {
    char *dst;
    const char *src;
    size_t bytes;
} team_copy;

static void copy_piece(void *ctx, int part, int nparts)
{
    const team_copy *c = ctx;
    int64_t lo, hi;
    tl_team_range((int64_t)c->bytes, 64, part, nparts, &lo, &hi);
    if (hi > lo)
        memcpy(c->dst + lo, c->src + lo, (size_t)(hi - lo));
}

void tl_team_copy(tl_team *t, void *dst, const void *src, size_t bytes)
{
    team_copy c = {dst, src, bytes};
    tl_team_run(bytes >= TL_TEAM_COPY_MIN_BYTES ? t : NULL, copy_piece, &c);
}

void tl_team_range(int64_t n, int64_t align, int part, int nparts, int64_t *lo, int64_t *hi)
{
    TL_ASSERT(align >= 1 && nparts >= 1 && part >= 0 && part < nparts && n >= 0);
    if (nparts == 1) { /* a team of one, every kernel of a step: no divisions */
        *lo = 0;
        *hi = n;
        return;
    }
    int64_t per = (n + nparts - 1) / nparts;
    per = (per + align - 1) / align * align;
    int64_t a = per * part, b = a + per;
    *lo = a < n ? a : n;
    *hi = part == nparts - 1 || b > n ? n : b;
}

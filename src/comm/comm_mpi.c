/* comm_mpi.c — the collectives among blocks of threads in processes joined
 * by MPI (the order they keep is described in tpuloop/comm.h).
 *
 * A call first runs inside the process, as the threads backend does: the
 * process's ranks publish their arguments in a group (comm_threads.c), meet
 * and agree. Then the thread playing the process's first rank, the leader,
 * does the process's part of the work while the others wait at the group's
 * exit barrier: it exchanges the call's arguments with every other process
 * (which is also the barrier), then moves the data, reading and writing the
 * local ranks' buffers straight from their slots.
 *
 * Only point-to-point messages cross processes, every one nonblocking and
 * waited for in one loop (idle) that also looks for another process's
 * failure notice, checks this communicator's own failure and the timeout.
 * So a failure anywhere ends the call everywhere, and a leader that gives up
 * cancels the receives it posted: no message lands in a rank's buffer after
 * its call has returned.
 *
 * A reduction streams SEG-byte segments, at most K of them in flight per
 * stream, through four per-segment steps (reduce_chain): the running sums
 * arrive from the previous process into a staging slot (p > 0), are folded
 * with the local ranks' elements in rank order, go on to the next process
 * (p < P - 1) or, at the last process, become the result, which travels back
 * along the chain P-1 -> 0 -> 1 -> ... -> P-2.
 */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/thread.h"
#include "comm_int.h"

/* Segment size of the pipelined streams, and segments in flight per stream.
 * Large enough that a message costs its bytes, not its latency (over TCP
 * too); small enough that the streams fill quickly. Measured by make bench
 * (bench_comm) against 256 KiB x 8 and 512 KiB x 8: at 4 MiB over TCP
 * loopback 0.84 and 1.03 of MPI_Allreduce, 1 MiB x 4 1.16. The staging
 * memory is 3 K SEG, 12 MiB. */
#define SEG (1024 * 1024)
#define K 4
/* The largest single message: counts of MPI calls are ints. */
#define MAX_MSG (1 << 30)

enum { TAG_DESC = 1, TAG_SUMS, TAG_RESULT, TAG_GATHER, TAG_ABORT, TAG_COUNTS, TAG_VERDICT, TAG_A2A };

/* A call's arguments as processes compare them. */
enum { D_COLL, D_COUNT, D_DTYPE, D_OP, D_ROOT, D_N };

/* A notice: the status, then the message. */
typedef struct notice {
    int32_t status;
    char msg[TL_COMM_MSG_MAX];
} notice;

typedef struct mpi_impl {
    tl_comm_group *g;
    MPI_Comm comm;       /* our duplicate; MPI_ERRORS_RETURN */
    int P, p;
    int *first;          /* (P + 1): process q plays ranks first[q] .. first[q + 1] - 1 */
    int *rank_of;        /* (P): first[q], for messages */
    tl_status work;      /* the leader's verdict on the current call */
    atomic_int noticed;  /* the other processes were told of our failure */
    notice notice;       /* what they were told */
    int64_t (*desc)[D_N]; /* (P) the call's arguments of every process */
    tl_comm_call *calls; /* (P) the same, for tl_comm_check_calls */
    MPI_Request *dreq;   /* (2 P) the exchange of arguments */
    char *stage;         /* the chain's (3, K, SEG): sums in, sums out, results;
                            or the owners' (P, K, SEG): elements from each process */
    MPI_Request in[K], out[K], res_in[K], res_out[K];
    MPI_Request *sreq, *rreq; /* (P, K) the owners' sends to and receives from each process */
    int64_t *cnt;        /* (4, P) the owners' counters per process */
    MPI_Request *areq;   /* (2, local, size) an all-to-all's messages */
    size_t stage_bytes;
} mpi_impl;

/* ---- MPI itself ------------------------------------------------------------ */

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;

/* Set when any communicator of this process fails. */
static atomic_int any_failed;

/* MPI_Finalize waits for every process: after a failure, when another
 * process may never get there, the process exits without it, and mpirun
 * ends the others (it ends a job whose process exits without finalising). */
static void finalize_at_exit(void)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!done && !atomic_load(&any_failed))
        MPI_Finalize();
}

static tl_status mpi_error(int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    return tl_error(TL_EIO, "tl_comm_create_mpi: %s: %s", what, text);
}

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    }
    return "an unknown level";
}

/* Initialises MPI unless it is, and checks that any thread may call it. */
static tl_status ensure_mpi(void)
{
    pthread_mutex_lock(&init_mu);
    int inited = 0, done = 0, level = 0;
    tl_status st = TL_OK;
    MPI_Finalized(&done);
    MPI_Initialized(&inited);
    if (done) {
        st = tl_error(TL_EINVAL, "tl_comm_create_mpi: MPI has been finalized");
    } else if (!inited) {
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &level);
        if (rc != MPI_SUCCESS)
            st = mpi_error(rc, "MPI_Init_thread");
        else
            atexit(finalize_at_exit);
    } else {
        MPI_Query_thread(&level);
    }
    if (st == TL_OK && level < MPI_THREAD_MULTIPLE)
        st = tl_error(TL_EINVAL,
                      "tl_comm_create_mpi: MPI runs with %s; tpuloop needs MPI_THREAD_MULTIPLE "
                      "(initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), or let tpuloop do it)",
                      thread_level_name(level));
    pthread_mutex_unlock(&init_mu);
    return st;
}

/* ---- failing together -------------------------------------------------------- */

/* Tells every other process that this communicator failed (once). */
static void tell_others(tl_comm *c, mpi_impl *m)
{
    if (atomic_exchange(&m->noticed, 1))
        return;
    notice *n = &m->notice; /* lives until the communicator is destroyed */
    n->status = (int32_t)tl_comm_status(c);
    snprintf(n->msg, sizeof n->msg, "%s", tl_comm_errmsg(c));
    int len = (int)(offsetof(notice, msg) + strlen(n->msg) + 1);
    for (int q = 0; q < m->P; q++) {
        if (q == m->p)
            continue;
        MPI_Request r;
        if (MPI_Isend(n, len, MPI_BYTE, q, TAG_ABORT, m->comm, &r) == MPI_SUCCESS)
            MPI_Request_free(&r);
    }
}

static void mpi_wake(tl_comm *c)
{
    mpi_impl *m = c->impl;
    atomic_store(&any_failed, 1);
    tl_comm_group_wake(m->g);
    tell_others(c, m);
}

static tl_status fail_mpi(tl_comm *c, tl_coll coll, int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    return tl_comm_fail(c, TL_EIO, "%s: process %d: %s failed: %s", tl_comm_coll_name(coll), c->process, what, text);
}

/* The wait of one call: the deadline moves on with every message that
 * arrives, so the timeout bounds a silence, not the call. */
typedef struct waiter {
    tl_comm *c;
    mpi_impl *m;
    tl_coll coll;
    int64_t timeout, deadline;
    int spins;
} waiter;

static void waiter_progress(waiter *w)
{
    w->spins = 0;
    if (w->timeout > 0)
        w->deadline = tl_deadline_after_ns(w->timeout);
}

/* Called when nothing moved: TL_OK to go on polling, or the communicator's
 * error (our own failure, another process's notice, or a timeout waiting
 * for process peer). */
static tl_status idle(waiter *w, int peer)
{
    tl_comm *c = w->c;
    mpi_impl *m = w->m;
    if (tl_comm_status(c) != TL_OK)
        return tl_comm_raise(c);
    int flag = 0;
    MPI_Status ms;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_ABORT, m->comm, &flag, &ms) == MPI_SUCCESS && flag) {
        notice n;
        memset(&n, 0, sizeof n);
        int q = ms.MPI_SOURCE;
        MPI_Recv(&n, (int)sizeof n, MPI_BYTE, q, TAG_ABORT, m->comm, MPI_STATUS_IGNORE);
        n.msg[sizeof n.msg - 1] = '\0';
        tl_status st = n.status < 0 ? (tl_status)n.status : TL_ERUNTIME;
        atomic_store(&m->noticed, 1); /* q told everyone */
        return tl_comm_fail(c, st, "process %d (ranks %d to %d): %s", q, m->first[q], m->first[q + 1] - 1, n.msg);
    }
    if (w->timeout > 0 && tl_now_ns() > w->deadline) {
        if (peer < 0)
            return tl_comm_fail(c, TL_ERUNTIME, "%s: process %d timed out after %.3f s waiting for the others",
                                tl_comm_coll_name(w->coll), m->p, (double)w->timeout / 1e9);
        return tl_comm_fail(c, TL_ERUNTIME,
                            "%s: process %d timed out after %.3f s waiting for process %d (ranks %d to %d)",
                            tl_comm_coll_name(w->coll), m->p, (double)w->timeout / 1e9, peer, m->first[peer],
                            m->first[peer + 1] - 1);
    }
    /* Spin a little, then let the others run: on a shared or oversubscribed
     * machine the process we wait for may need this core. */
    if (++w->spins > 64)
        sched_yield();
    return TL_OK;
}

/* Tests request *r: true when it is done (or was never posted). */
static bool done(waiter *w, MPI_Request *r, tl_status *st, const char *what)
{
    if (*r == MPI_REQUEST_NULL)
        return true;
    int flag = 0;
    int rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        *st = fail_mpi(w->c, w->coll, rc, what);
        return false;
    }
    if (flag)
        waiter_progress(w);
    return flag != 0;
}

/* Waits for request *r, from or to process peer. */
static tl_status wait_one(waiter *w, MPI_Request *r, int peer, const char *what)
{
    tl_status st = TL_OK;
    while (!done(w, r, &st, what)) {
        if (st != TL_OK || (st = idle(w, peer)) != TL_OK)
            return st;
    }
    return TL_OK;
}

/* After a failure: receives are cancelled and waited for, so that nothing
 * lands in a buffer later; sends are let go. */
static void abandon(MPI_Request *r, int n, bool recv)
{
    for (int i = 0; i < n; i++) {
        if (r[i] == MPI_REQUEST_NULL)
            continue;
        if (recv) {
            MPI_Cancel(&r[i]);
            MPI_Wait(&r[i], MPI_STATUS_IGNORE);
        } else {
            MPI_Request_free(&r[i]);
        }
        r[i] = MPI_REQUEST_NULL;
    }
}

static void abandon_all(mpi_impl *m)
{
    abandon(m->dreq, m->P, true);
    abandon(m->dreq + m->P, m->P, false);
    abandon(m->in, K, true);
    abandon(m->res_in, K, true);
    abandon(m->out, K, false);
    abandon(m->res_out, K, false);
    if (m->sreq != NULL) {
        abandon(m->rreq, m->P * K, true);
        abandon(m->sreq, m->P * K, false);
    }
    if (m->areq != NULL) {
        size_t n = (size_t)m->first[m->p + 1] - (size_t)m->first[m->p];
        abandon(m->areq, (int)(n * (size_t)m->first[m->P]), true);
        abandon(m->areq + n * (size_t)m->first[m->P], (int)(n * (size_t)m->first[m->P]), false);
    }
}

static tl_status post(waiter *w, bool recv, void *buf, int64_t bytes, int peer, int tag, MPI_Request *r)
{
    int rc = recv ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, w->m->comm, r)
                  : MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, w->m->comm, r);
    return rc == MPI_SUCCESS ? TL_OK : fail_mpi(w->c, w->coll, rc, recv ? "MPI_Irecv" : "MPI_Isend");
}

/* ---- the exchange of arguments ------------------------------------------------ */

/* Every process sends its call's arguments to every other and compares what
 * it gets: the same verdict everywhere. Returns only once every process has
 * entered the call, so it is the barrier too. */
static tl_status exchange(waiter *w, const tl_comm_call *call)
{
    mpi_impl *m = w->m;
    int64_t *mine = m->desc[m->p];
    mine[D_COLL] = call->coll;
    mine[D_COUNT] = call->count;
    mine[D_DTYPE] = call->dtype;
    mine[D_OP] = call->op;
    mine[D_ROOT] = call->root;
    tl_status st = TL_OK;
    for (int q = 0; q < m->P && st == TL_OK; q++) {
        if (q == m->p)
            continue;
        st = post(w, true, m->desc[q], sizeof m->desc[q], q, TAG_DESC, &m->dreq[q]);
        if (st == TL_OK)
            st = post(w, false, mine, sizeof m->desc[q], q, TAG_DESC, &m->dreq[m->P + q]);
    }
    for (int q = 0; q < m->P && st == TL_OK; q++) {
        st = wait_one(w, &m->dreq[q], q, "receiving the call's arguments");
        if (st == TL_OK)
            st = wait_one(w, &m->dreq[m->P + q], q, "sending the call's arguments");
    }
    if (st != TL_OK)
        return st;
    for (int q = 0; q < m->P; q++) {
        const int64_t *d = m->desc[q];
        m->calls[q] = (tl_comm_call){.coll = (tl_coll)d[D_COLL], .count = d[D_COUNT],
                                     .dtype = (tl_comm_dtype)d[D_DTYPE], .op = (tl_reduce_op)d[D_OP],
                                     .root = (int)d[D_ROOT]};
    }
    /* Every process compares the same table: a disagreement fails each of
     * them the same way, with no notices. */
    for (int q = 1; q < m->P; q++) {
        if (memcmp(m->desc[q], m->desc[0], sizeof m->desc[0]) != 0) {
            atomic_store(&m->noticed, 1);
            return tl_comm_check_calls(w->c, m->calls, m->P, m->rank_of);
        }
    }
    return TL_OK;
}

/* ---- the reductions ------------------------------------------------------------- */

/* Copies what segment [b, b + len) of the result holds of each local rank's
 * part into its recv: all of it for an all-reduce, the overlap with its
 * chunk for a reduce-scatter. skip is a local rank already written. */
static void deliver(const tl_comm *c, const tl_comm_call *s, const void *res, int64_t b, int64_t len, int skip)
{
    size_t es = tl_comm_dtype_size(s[0].dtype);
    for (int l = 0; l < c->local; l++) {
        if (l == skip)
            continue;
        if (s[0].coll == TL_COLL_ALL_REDUCE) {
            char *dst = (char *)s[l].recv + (size_t)b * es;
            if (dst != res)
                memcpy(dst, res, (size_t)len * es);
            continue;
        }
        int64_t off, n;
        tl_comm_chunk(s[0].count, c->size, c->first + l, &off, &n);
        int64_t lo = off > b ? off : b, hi = off + n < b + len ? off + n : b + len;
        if (lo < hi)
            memcpy((char *)s[l].recv + (size_t)(lo - off) * es, (const char *)res + (size_t)(lo - b) * es,
                   (size_t)(hi - lo) * es);
    }
}

/*
 * The chain. Segment i's steps, each waiting for the one before: (a) p > 0
 * posts the receive of its running sums into in-slot i % K; (b) once they
 * are there (and out-slot i % K is free) folds them with the local ranks'
 * elements: p < P - 1 into the out-slot, sent on to p + 1; the last process
 * into the result (rank 0's recv for an all-reduce, the result slot for a
 * reduce-scatter), delivered locally and sent to the next on the result
 * chain; (c) the others receive the result once their fold of the segment
 * has read its elements, deliver it and pass it on.
 */
static tl_status reduce_chain(waiter *w, const tl_comm_call *s)
{
    tl_comm *c = w->c;
    mpi_impl *m = w->m;
    int P = m->P, p = m->p;
    bool last = p == P - 1, all = s[0].coll == TL_COLL_ALL_REDUCE;
    int prev = p - 1, next = last ? -1 : p + 1;
    /* The result chain: P-1 -> 0 -> 1 -> ... -> P-2. */
    int rprev = last ? -1 : (p == 0 ? P - 1 : p - 1);
    int rnext = P == 1 ? -1 : last ? 0 : (p + 1 < P - 1 ? p + 1 : -1);
    size_t es = tl_comm_dtype_size(s[0].dtype);
    int64_t per = SEG / (int64_t)es, count = s[0].count;
    int64_t S = (count + per - 1) / per;
    char *in_slot = m->stage, *out_slot = m->stage + (size_t)K * SEG, *res_slot = m->stage + (size_t)2 * K * SEG;
    /* Segments past each step: sums posted and folded; results posted and got. */
    int64_t posted = 0, folded = 0, rposted = 0, got = 0;
    tl_status st = TL_OK;
#define SEGB(i) ((i) * per)
#define SEGN(i) ((i) == S - 1 ? count - (i) * per : per)
    for (;;) {
        bool moved = false;
        /* (a) */
        while (p > 0 && posted < S && posted < folded + K) {
            int k = (int)(posted % K);
            if ((st = post(w, true, in_slot + (size_t)k * SEG, SEGN(posted) * (int64_t)es, prev, TAG_SUMS,
                           &m->in[k])) != TL_OK)
                return st;
            posted++;
            moved = true;
        }
        /* (b) */
        while (folded < S) {
            int k = (int)(folded % K);
            int64_t b = SEGB(folded), n = SEGN(folded);
            if (p > 0 && (folded >= posted || !done(w, &m->in[k], &st, "receiving sums")))
                break;
            if (!last && !done(w, &m->out[k], &st, "sending sums"))
                break;
            /* At most K segments ahead of the results: out-slot i % K then
             * still holds segment i when (c) posts its result's receive. */
            if (!last && folded >= got + K)
                break;
            if (last && !done(w, &m->res_out[k], &st, "sending the result"))
                break;
            const void *in = p > 0 ? in_slot + (size_t)k * SEG : NULL;
            if (!last) {
                /* A lone first rank's sums are its elements: sent as they are. */
                char *sums = (char *)s[0].send + (size_t)b * es;
                if (p > 0 || c->local > 1) {
                    sums = out_slot + (size_t)k * SEG;
                    tl_comm_fold(s, c->local, in, b, n, false, c->size, sums);
                }
                if ((st = post(w, false, sums, n * (int64_t)es, next, TAG_SUMS, &m->out[k])) != TL_OK)
                    return st;
            } else {
                char *res = all ? (char *)s[0].recv + (size_t)b * es : res_slot + (size_t)k * SEG;
                tl_comm_fold(s, c->local, in, b, n, true, c->size, res);
                deliver(c, s, res, b, n, all ? 0 : -1);
                if (rnext >= 0 &&
                    (st = post(w, false, res, n * (int64_t)es, rnext, TAG_RESULT, &m->res_out[k])) != TL_OK)
                    return st;
                got++;
            }
            folded++;
            moved = true;
        }
        if (st != TL_OK)
            return st;
        /* (c) */
        while (!last && rposted < folded && rposted < got + K) {
            int k = (int)(rposted % K);
            if (!done(w, &m->res_out[k], &st, "passing the result on")) /* the slot's last use */
                break;
            /* The sums may have been sent from the send buffer, which an
             * in-place call's result overwrites. */
            if (!done(w, &m->out[k], &st, "sending sums"))
                break;
            char *res = all ? (char *)s[0].recv + (size_t)SEGB(rposted) * es : res_slot + (size_t)k * SEG;
            if ((st = post(w, true, res, SEGN(rposted) * (int64_t)es, rprev, TAG_RESULT, &m->res_in[k])) != TL_OK)
                return st;
            rposted++;
            moved = true;
        }
        while (!last && got < rposted) {
            int k = (int)(got % K);
            int64_t b = SEGB(got), n = SEGN(got);
            if (!done(w, &m->res_in[k], &st, "receiving the result"))
                break;
            char *res = all ? (char *)s[0].recv + (size_t)b * es : res_slot + (size_t)k * SEG;
            deliver(c, s, res, b, n, all ? 0 : -1);
            if (rnext >= 0 && (st = post(w, false, res, n * (int64_t)es, rnext, TAG_RESULT, &m->res_out[k])) != TL_OK)
                return st;
            got++;
            moved = true;
        }
        if (st != TL_OK)
            return st;
        if (folded == S && got == S) {
            bool quiet = true;
            for (int k = 0; k < K && quiet; k++)
                quiet = done(w, &m->out[k], &st, "sending sums") && done(w, &m->res_out[k], &st, "sending the result");
            if (st != TL_OK)
                return st;
            if (quiet)
                return TL_OK;
        }
        if (!moved) {
            int peer = p > 0 && folded < S ? prev : (!last && got < S ? rprev : (next >= 0 ? next : rnext));
            if ((st = idle(w, peer)) != TL_OK)
                return st;
        }
    }
#undef SEGB
#undef SEGN
}

/*
 * The owners, when every process plays one rank (P <= OWNER_MAX): process q
 * owns chunk q (tl_comm_chunk), as rank q does in the threads backend. Each
 * process sends every owner its elements of the owner's chunk; the owner
 * folds the P arrays of each segment in rank order as they arrive (an
 * owner holds each process's elements, not partial sums, so its order is
 * free) and, for an all-reduce, sends the result to every process. Each
 * process sends and receives (P-1)/P of the buffer twice, as a ring does,
 * and the adding is shared out.
 */
#define OWNER_MAX 4

static int64_t segs(int64_t len, int64_t per)
{
    return (len + per - 1) / per;
}

/* The staging slot k for the elements from process q (slots of the other
 * processes only: P - 1 <= 3 of them fit in the chain's 3 K slots). */
static char *owner_slot(const mpi_impl *m, int q, int k)
{
    int qi = q < m->p ? q : q - 1;
    return m->stage + ((size_t)qi * K + (size_t)k) * SEG;
}

/* One phase of the owners: with gather false, chunk q of our elements goes
 * to each process q and the segments of ours are folded as they come;
 * with gather true, our result goes to every process and theirs comes
 * straight into recv. Per process and direction, segments of SEG bytes,
 * K in flight: spost[q] and rpost[q] segments posted, rdone[q] received. */
static tl_status owner_phase(waiter *w, const tl_comm_call *s, bool gather)
{
    tl_comm *c = w->c;
    mpi_impl *m = w->m;
    int P = m->P, p = m->p, tag = gather ? TAG_RESULT : TAG_SUMS;
    size_t es = tl_comm_dtype_size(s[0].dtype);
    int64_t per = SEG / (int64_t)es, count = s[0].count;
    int64_t moff, mlen;
    tl_comm_chunk(count, P, p, &moff, &mlen);
    int64_t *spost = m->cnt, *rpost = m->cnt + P, *rdone = m->cnt + 2 * P;
    memset(m->cnt, 0, 4 * (size_t)P * sizeof *m->cnt);
    int64_t mine = segs(mlen, per), folded = 0;
    char *recv = s[0].recv;
    bool all = s[0].coll == TL_COLL_ALL_REDUCE;
    tl_status st = TL_OK;
    for (;;) {
        bool moved = false, finished = true;
        int peer = -1;
        for (int q = 0; q < P; q++) {
            if (q == p)
                continue;
            int64_t qoff, qlen;
            tl_comm_chunk(count, P, q, &qoff, &qlen);
            /* What goes to q and what comes from q: their offsets in the
             * buffer and lengths. */
            int64_t soff = gather ? moff : qoff, slen = gather ? mlen : qlen;
            int64_t roff = gather ? qoff : moff, rlen = gather ? qlen : mlen;
            const char *sbase = gather ? recv : (const char *)s[0].send;
            int64_t sn = segs(slen, per), rn = segs(rlen, per);
            MPI_Request *sr = m->sreq + (size_t)q * K, *rr = m->rreq + (size_t)q * K;
            while (spost[q] < sn) {
                int k = (int)(spost[q] % K);
                if (!done(w, &sr[k], &st, "sending elements"))
                    break;
                int64_t b = spost[q] * per, n = slen - b < per ? slen - b : per;
                if ((st = post(w, false, (char *)sbase + (size_t)(soff + b) * es, n * (int64_t)es, q, tag, &sr[k])) !=
                    TL_OK)
                    return st;
                spost[q]++;
                moved = true;
            }
            /* A slot is reused only once its previous segment is folded
             * (phase 1) or received (phase 2). */
            while (st == TL_OK && rpost[q] < rn && rpost[q] < (gather ? rdone[q] : folded) + K) {
                int k = (int)(rpost[q] % K);
                int64_t b = rpost[q] * per, n = rlen - b < per ? rlen - b : per;
                char *dst = gather ? recv + (size_t)(roff + b) * es : owner_slot(m, q, k);
                if ((st = post(w, true, dst, n * (int64_t)es, q, tag, &rr[k])) != TL_OK)
                    return st;
                rpost[q]++;
                moved = true;
            }
            while (st == TL_OK && rdone[q] < rpost[q] && done(w, &rr[rdone[q] % K], &st, "receiving elements")) {
                rdone[q]++;
                moved = true;
            }
            bool sent = spost[q] == sn;
            for (int k = 0; k < K && sent && st == TL_OK; k++)
                sent = done(w, &sr[k], &st, "sending elements");
            if (st != TL_OK)
                return st;
            if (!sent || rdone[q] < rn) {
                finished = false;
                if (peer < 0)
                    peer = q;
            }
        }
        while (!gather && folded < mine) {
            bool ready = true;
            for (int q = 0; q < P && ready; q++)
                ready = q == p || rdone[q] > folded;
            if (!ready)
                break;
            int k = (int)(folded % K);
            int64_t b = folded * per, n = mlen - b < per ? mlen - b : per;
            const void *x[OWNER_MAX];
            for (int q = 0; q < P; q++)
                x[q] = q == p ? (const char *)s[0].send + (size_t)(moff + b) * es : owner_slot(m, q, k);
            char *out = all ? recv + (size_t)(moff + b) * es : recv + (size_t)b * es;
            tl_comm_fold_arrays(s[0].dtype, s[0].op, x, P, n, c->size, out);
            folded++;
            moved = true;
        }
        if (!gather && folded < mine)
            finished = false;
        if (finished)
            return TL_OK;
        if (!moved && (st = idle(w, peer)) != TL_OK)
            return st;
    }
}

static tl_status reduce_owner(waiter *w, const tl_comm_call *s)
{
    tl_status st = owner_phase(w, s, false);
    if (st == TL_OK && s[0].coll == TL_COLL_ALL_REDUCE)
        st = owner_phase(w, s, true);
    return st;
}

/* ---- all-gather and broadcast --------------------------------------------------- */

/* Sends bytes at sbuf to process to and receives bytes at rbuf from process
 * from, in messages of at most MAX_MSG bytes, both at once. */
static tl_status swap(waiter *w, const void *sbuf, int64_t sbytes, int to, void *rbuf, int64_t rbytes, int from,
                      int tag)
{
    mpi_impl *m = w->m;
    tl_status st = TL_OK;
    for (int64_t o = 0; st == TL_OK && (o < sbytes || o < rbytes); o += MAX_MSG) {
        int64_t sn = sbytes - o < MAX_MSG ? sbytes - o : MAX_MSG, rn = rbytes - o < MAX_MSG ? rbytes - o : MAX_MSG;
        if (rbuf != NULL && rn > 0)
            st = post(w, true, (char *)rbuf + o, rn, from, tag, &m->in[0]);
        if (st == TL_OK && sbuf != NULL && sn > 0)
            st = post(w, false, (char *)sbuf + o, sn, to, tag, &m->out[0]);
        if (st == TL_OK)
            st = wait_one(w, &m->in[0], from, "receiving");
        if (st == TL_OK)
            st = wait_one(w, &m->out[0], to, "sending");
    }
    return st;
}

/* The local ranks' blocks into rank 0's recv, then the processes' blocks
 * around the ring (step k sends the block of process p - k, receives that
 * of p - k - 1), then rank 0's recv to the others. */
static tl_status all_gather(waiter *w, const tl_comm_call *s)
{
    tl_comm *c = w->c;
    mpi_impl *m = w->m;
    size_t bytes = (size_t)s[0].count * tl_comm_dtype_size(s[0].dtype);
    char *recv = s[0].recv;
    for (int l = 0; l < c->local && bytes > 0; l++) {
        char *dst = recv + (size_t)(c->first + l) * bytes;
        if (dst != s[l].send)
            memcpy(dst, s[l].send, bytes);
    }
    int P = m->P, p = m->p;
    for (int k = 0; k < P - 1 && bytes > 0; k++) {
        int sq = (p - k + P) % P, rq = (p - k - 1 + P) % P;
        tl_status st = swap(w, recv + (size_t)m->first[sq] * bytes, (int64_t)bytes * (m->first[sq + 1] - m->first[sq]),
                            (p + 1) % P, recv + (size_t)m->first[rq] * bytes,
                            (int64_t)bytes * (m->first[rq + 1] - m->first[rq]), (p - 1 + P) % P, TAG_GATHER);
        if (st != TL_OK)
            return st;
    }
    for (int l = 1; l < c->local && bytes > 0; l++) {
        for (int q = 0; q < c->size; q++) {
            char *dst = (char *)s[l].recv + (size_t)q * bytes;
            if (dst != s[l].send || q != c->first + l) /* in place: its own block is there */
                memcpy(dst, recv + (size_t)q * bytes, bytes);
        }
    }
    return TL_OK;
}

/* Along the chain from the root's process: each receives the buffer from
 * the one before and passes it on, in one message per MAX_MSG bytes. */
static tl_status broadcast(waiter *w, const tl_comm_call *s)
{
    tl_comm *c = w->c;
    mpi_impl *m = w->m;
    int root = s[0].root, P = m->P, p = m->p, rp = 0;
    while (root >= m->first[rp + 1])
        rp++;
    size_t bytes = (size_t)s[0].count * tl_comm_dtype_size(s[0].dtype);
    int rl = root - c->first; /* the root's local rank, if it is ours */
    char *buf = p == rp ? s[rl].recv : s[0].recv;
    int dist = (p - rp + P) % P; /* position on the chain */
    int from = dist > 0 ? (p - 1 + P) % P : -1, to = dist < P - 1 ? (p + 1) % P : -1;
    tl_status st = TL_OK;
    if (from >= 0)
        st = swap(w, NULL, 0, -1, buf, (int64_t)bytes, from, TAG_RESULT);
    if (st == TL_OK && to >= 0)
        st = swap(w, buf, (int64_t)bytes, to, NULL, 0, -1, TAG_RESULT);
    if (st != TL_OK)
        return st;
    for (int l = 0; l < c->local && bytes > 0; l++)
        if (s[l].recv != buf)
            memcpy(s[l].recv, buf, bytes);
    return TL_OK;
}

/* ---- all-to-all ------------------------------------------------------------------ */

/* Waits for n requests at r, to or from process peer. */
static tl_status wait_n(waiter *w, MPI_Request *r, int n, int peer, const char *what)
{
    tl_status st = TL_OK;
    for (int i = 0; i < n && st == TL_OK; i++)
        st = wait_one(w, &r[i], peer, what);
    return st;
}

/*
 * First the counts: each process sends every other its ranks' send counts
 * for that process's ranks and checks them against its own receive counts;
 * then the verdicts, so that every process fails alike, naming the first
 * pair in rank order that does not match. Then the blocks: one message per
 * pair of ranks in different processes, posted on both sides in the order
 * (sending rank, receiving rank); pairs inside a process are copied.
 */
static tl_status all_to_all_mpi(waiter *w, const tl_comm_call *s)
{
    tl_comm *c = w->c;
    mpi_impl *m = w->m;
    int P = m->P, p = m->p, L = c->local, R = c->size, first = c->first;
    size_t es = tl_comm_dtype_size(s[0].dtype);
    /* Counts out to q at out + L * first[q], in from q at in + L * first[q]:
     * row = sending rank, column = receiving rank. */
    int64_t *out = (int64_t *)m->stage, *in = out + (size_t)L * R;
    tl_status st = TL_OK;
    for (int q = 0; q < P && st == TL_OK; q++) {
        if (q == p)
            continue;
        int Lq = m->first[q + 1] - m->first[q];
        int64_t *o = out + (size_t)L * m->first[q], *i = in + (size_t)L * m->first[q];
        for (int l = 0; l < L; l++)
            for (int j = 0; j < Lq; j++)
                o[(size_t)l * Lq + j] = s[l].scounts[m->first[q] + j];
        st = post(w, true, i, (int64_t)((size_t)L * Lq * 8), q, TAG_COUNTS, &m->dreq[q]);
        if (st == TL_OK)
            st = post(w, false, o, (int64_t)((size_t)L * Lq * 8), q, TAG_COUNTS, &m->dreq[P + q]);
    }
    for (int q = 0; q < P && st == TL_OK; q++) {
        st = wait_one(w, &m->dreq[q], q, "receiving counts");
        if (st == TL_OK)
            st = wait_one(w, &m->dreq[P + q], q, "sending counts");
    }
    if (st != TL_OK)
        return st;
    /* This process's verdict on the pairs that end here: the first in rank
     * order whose counts differ, or whose block is too big for a message. */
    int64_t *mine = m->desc[p];
    mine[0] = 0;
    for (int g = 0; g < R && mine[0] == 0; g++) {
        int gq = 0;
        while (g >= m->first[gq + 1])
            gq++;
        for (int l = 0; l < L && mine[0] == 0; l++) {
            int64_t sent;
            if (gq == p) {
                sent = s[g - first].scounts[first + l];
            } else { /* process gq's rows are its ranks, its columns ours */
                sent = in[(size_t)L * m->first[gq] + (size_t)(g - m->first[gq]) * (size_t)L + (size_t)l];
            }
            int64_t want = s[l].rcounts[g];
            if (sent != want || (gq != p && (uint64_t)want * es > (uint64_t)MAX_MSG)) {
                mine[0] = sent != want ? 1 : 2;
                mine[1] = g;
                mine[2] = first + l;
                mine[3] = sent;
                mine[4] = want;
            }
        }
    }
    for (int q = 0; q < P && st == TL_OK; q++) {
        if (q == p)
            continue;
        st = post(w, true, m->desc[q], sizeof m->desc[q], q, TAG_VERDICT, &m->dreq[q]);
        if (st == TL_OK)
            st = post(w, false, mine, sizeof m->desc[q], q, TAG_VERDICT, &m->dreq[P + q]);
    }
    for (int q = 0; q < P && st == TL_OK; q++) {
        st = wait_one(w, &m->dreq[q], q, "receiving the verdict");
        if (st == TL_OK)
            st = wait_one(w, &m->dreq[P + q], q, "sending the verdict");
    }
    if (st != TL_OK)
        return st;
    for (int q = 0; q < P; q++) {
        const int64_t *v = m->desc[q];
        if (v[0] == 0)
            continue;
        atomic_store(&m->noticed, 1); /* every process fails alike */
        if (v[0] == 1)
            return tl_comm_fail(c, TL_EINVAL, "tl_comm_all_to_all_v: rank %lld sends %lld elements to rank %lld, "
                                "which expects %lld", (long long)v[1], (long long)v[3], (long long)v[2],
                                (long long)v[4]);
        return tl_comm_fail(c, TL_EINVAL, "tl_comm_all_to_all_v: rank %lld sends %lld elements to rank %lld in "
                            "another process; at most %d bytes between two ranks", (long long)v[1],
                            (long long)v[3], (long long)v[2], MAX_MSG);
    }
    /* The blocks. */
    MPI_Request *rr = m->areq, *sr = m->areq + (size_t)L * R;
    int nr = 0, ns = 0;
    for (int g = 0; g < R && st == TL_OK; g++) {
        bool local = g >= first && g < first + L;
        int gq = 0;
        while (g >= m->first[gq + 1])
            gq++;
        for (int l = 0; l < L && st == TL_OK; l++) {
            int64_t n = s[l].rcounts[g];
            if (n == 0)
                continue;
            char *dst = (char *)s[l].recv + (size_t)tl_comm_a2a_recv_offset(&s[l], g) * es;
            if (local)
                memcpy(dst, (const char *)s[g - first].send + (size_t)tl_comm_a2a_send_offset(&s[g - first], first + l) * es,
                       (size_t)n * es);
            else
                st = post(w, true, dst, n * (int64_t)es, gq, TAG_A2A, &rr[nr++]);
        }
    }
    for (int l = 0; l < L && st == TL_OK; l++) {
        for (int g = 0; g < R && st == TL_OK; g++) {
            int64_t n = s[l].scounts[g];
            if (n == 0 || (g >= first && g < first + L))
                continue;
            int gq = 0;
            while (g >= m->first[gq + 1])
                gq++;
            const char *src = (const char *)s[l].send + (size_t)tl_comm_a2a_send_offset(&s[l], g) * es;
            st = post(w, false, (void *)src, n * (int64_t)es, gq, TAG_A2A, &sr[ns++]);
        }
    }
    if (st == TL_OK)
        st = wait_n(w, rr, nr, -1, "receiving blocks");
    if (st == TL_OK)
        st = wait_n(w, sr, ns, -1, "sending blocks");
    return st;
}

/* ---- the backend -------------------------------------------------------------- */

static tl_status work(tl_comm *c, mpi_impl *m, const tl_comm_call *s)
{
    int64_t timeout = atomic_load_explicit(&c->timeout_ns, memory_order_relaxed);
    waiter w = {c, m, s[0].coll, timeout, 0, 0};
    waiter_progress(&w);
    tl_status st = exchange(&w, &s[0]);
    if (st == TL_OK) {
        switch (s[0].coll) {
        case TL_COLL_ALL_REDUCE:
        case TL_COLL_REDUCE_SCATTER:
            st = c->size == m->P && m->P <= OWNER_MAX && m->P > 1 ? reduce_owner(&w, s) : reduce_chain(&w, s);
            break;
        case TL_COLL_ALL_GATHER: st = all_gather(&w, s); break;
        case TL_COLL_BROADCAST: st = broadcast(&w, s); break;
        case TL_COLL_ALL_TO_ALL: st = all_to_all_mpi(&w, s); break;
        case TL_COLL_BARRIER: break;
        }
    }
    if (st != TL_OK)
        abandon_all(m);
    return st;
}

static tl_status mpi_run(tl_comm *c, int rank, const tl_comm_call *call)
{
    mpi_impl *m = c->impl;
    int l = rank - c->first;
    tl_comm_call *s;
    tl_status st = tl_comm_group_enter(c, m->g, l, call, &s);
    if (st != TL_OK)
        return st;
    if (l == 0)
        m->work = work(c, m, s);
    tl_comm_group_leave(m->g, l, true);
    /* The leader wrote work before the barrier; the next call's leader
     * cannot write it before this rank has entered that call. */
    return m->work == TL_OK ? TL_OK : tl_comm_raise(c);
}

static void mpi_destroy(tl_comm *c)
{
    mpi_impl *m = c->impl;
    if (m == NULL)
        return;
    int done_ = 0;
    MPI_Finalized(&done_);
    if (!done_ && m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    tl_comm_group_destroy(m->g);
    tl_free(m->first);
    tl_free(m->rank_of);
    tl_free(m->desc);
    tl_free(m->calls);
    tl_free(m->dreq);
    tl_free(m->stage);
    tl_free(m->sreq);
    tl_free(m->rreq);
    tl_free(m->cnt);
    tl_free(m->areq);
    tl_free(m);
}

static const tl_comm_backend mpi_backend = {mpi_run, mpi_wake, mpi_destroy};

/* A communicator over a duplicate of base (tl_comm_create_mpi). */
static tl_status create_over(MPI_Comm base, int local_ranks, tl_comm **out)
{
    tl_status st = TL_OK;
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(base, &comm);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int P = 0, p = 0;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &p);
    /* Every process learns every block before any checks, so all reach the
     * same verdict. */
    int *locals = tl_calloc((size_t)P, sizeof *locals);
    int mine = local_ranks, ok = locals != NULL;
    int all_ok = 0;
    rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (rc == MPI_SUCCESS && all_ok)
        rc = MPI_Allgather(&mine, 1, MPI_INT, locals, 1, MPI_INT, comm);
    if (rc != MPI_SUCCESS || !all_ok) {
        tl_free(locals);
        MPI_Comm_free(&comm);
        return rc != MPI_SUCCESS ? mpi_error(rc, "MPI_Allgather") : tl_error_oom();
    }
    int64_t total = 0;
    for (int q = 0; q < P && st == TL_OK; q++) {
        if (locals[q] < 1)
            st = tl_error(TL_EINVAL, "tl_comm_create_mpi: local_ranks must be >= 1, got %d on process %d", locals[q], q);
        total += locals[q];
    }
    if (st == TL_OK && total > TL_COMM_MAX_RANKS)
        st = tl_error(TL_EINVAL, "tl_comm_create_mpi: %d processes play %lld ranks; at most %d", P, (long long)total,
                      TL_COMM_MAX_RANKS);
    tl_comm *c = NULL;
    mpi_impl *m = NULL;
    if (st == TL_OK)
        st = tl_comm_alloc(TL_COMM_MPI, (int)total, &c);
    if (st == TL_OK && (m = tl_calloc(1, sizeof *m)) == NULL)
        st = tl_error_oom();
    if (st != TL_OK) {
        tl_free(locals);
        MPI_Comm_free(&comm);
        tl_comm_destroy(c);
        return st;
    }
    m->comm = comm;
    m->P = P;
    m->p = p;
    atomic_init(&m->noticed, 0);
    for (int k = 0; k < K; k++)
        m->in[k] = m->out[k] = m->res_in[k] = m->res_out[k] = MPI_REQUEST_NULL;
    c->impl = m;
    c->be = &mpi_backend;
    m->first = tl_calloc((size_t)P + 1, sizeof *m->first);
    m->rank_of = tl_calloc((size_t)P, sizeof *m->rank_of);
    m->desc = tl_calloc((size_t)P, sizeof *m->desc);
    m->calls = tl_calloc((size_t)P, sizeof *m->calls);
    m->dreq = tl_calloc(2 * (size_t)P, sizeof *m->dreq);
    /* The chain's slots; the owners' (P <= OWNER_MAX) fit in as many; an
     * all-to-all's counts need 2 local size of them. */
    size_t a2a = 2 * (size_t)local_ranks * (size_t)total * sizeof(int64_t);
    m->stage_bytes = a2a > (size_t)3 * K * SEG ? a2a : (size_t)3 * K * SEG;
    m->stage = tl_malloc(m->stage_bytes);
    m->areq = tl_calloc(2 * (size_t)local_ranks * (size_t)total, sizeof *m->areq);
    m->sreq = tl_calloc((size_t)P * K, sizeof *m->sreq);
    m->rreq = tl_calloc((size_t)P * K, sizeof *m->rreq);
    m->cnt = tl_calloc(4 * (size_t)P, sizeof *m->cnt);
    if (m->first == NULL || m->rank_of == NULL || m->desc == NULL || m->calls == NULL || m->dreq == NULL ||
        m->stage == NULL || m->sreq == NULL || m->rreq == NULL || m->cnt == NULL || m->areq == NULL) {
        tl_free(locals);
        tl_comm_destroy(c);
        return tl_error_oom();
    }
    for (int q = 0; q < P; q++) {
        m->first[q + 1] = m->first[q] + locals[q];
        m->rank_of[q] = m->first[q];
    }
    for (int q = 0; q < 2 * P; q++)
        m->dreq[q] = MPI_REQUEST_NULL;
    for (int i = 0; i < P * K; i++)
        m->sreq[i] = m->rreq[i] = MPI_REQUEST_NULL;
    for (size_t i = 0; i < 2 * (size_t)local_ranks * (size_t)total; i++)
        m->areq[i] = MPI_REQUEST_NULL;
    tl_free(locals);
    c->processes = P;
    c->process = p;
    c->first = m->first[p];
    c->local = local_ranks;
    if ((st = tl_comm_group_create(local_ranks, c->first, &m->g)) != TL_OK) {
        tl_comm_destroy(c);
        return st;
    }
    *out = c;
    return TL_OK;
}

tl_status tl_comm_create_mpi(const void *mpi_comm, int local_ranks, tl_comm **out)
{
    *out = NULL;
    tl_status st = ensure_mpi();
    if (st != TL_OK)
        return st;
    return create_over(mpi_comm != NULL ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD, local_ranks, out);
}

tl_status tl_comm_mpi_create_like(const tl_comm *comm, int local_ranks, tl_comm **out)
{
    *out = NULL;
    const mpi_impl *m = comm->impl;
    return create_over(m->comm, local_ranks, out);
}

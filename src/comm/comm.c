/* comm.c — the communicator front end: argument checks, the sticky error
 * (LMDB's MDB_PANIC: the first failure is kept and returned by every later
 * call on every rank) and dispatch to the backend. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm_int.h"

const char *tl_comm_coll_name(tl_coll coll)
{
    switch (coll) {
    case TL_COLL_BARRIER: return "tl_comm_barrier";
    case TL_COLL_ALL_REDUCE: return "tl_comm_all_reduce";
    case TL_COLL_REDUCE_SCATTER: return "tl_comm_reduce_scatter";
    case TL_COLL_ALL_GATHER: return "tl_comm_all_gather";
    case TL_COLL_BROADCAST: return "tl_comm_broadcast";
    case TL_COLL_ALL_TO_ALL: return "tl_comm_all_to_all_v";
    }
    return "tl_comm_?";
}

size_t tl_comm_dtype_size(tl_comm_dtype dtype)
{
    return dtype == TL_COMM_F32 ? 4 : 8;
}

const char *tl_comm_dtype_name(tl_comm_dtype dtype)
{
    switch (dtype) {
    case TL_COMM_F32: return "f32";
    case TL_COMM_F64: return "f64";
    case TL_COMM_I64: return "i64";
    }
    return "?";
}

const char *tl_comm_op_name(tl_reduce_op op)
{
    switch (op) {
    case TL_REDUCE_SUM: return "SUM";
    case TL_REDUCE_MEAN: return "MEAN";
    }
    return "?";
}

tl_status tl_comm_alloc(tl_comm_kind kind, int size, tl_comm **out)
{
    *out = NULL;
    tl_comm *c = tl_calloc(1, sizeof *c);
    if (c == NULL)
        return tl_error_oom();
    int rc = pthread_mutex_init(&c->mu, NULL);
    if (rc != 0) {
        tl_free(c);
        return tl_error(TL_ERUNTIME, "communicator: cannot make a mutex: %s", strerror(rc));
    }
    c->kind = kind;
    c->size = size;
    c->processes = 1;
    c->local = size;
    atomic_init(&c->timeout_ns, 0);
    atomic_init(&c->status, TL_OK);
    *out = c;
    return TL_OK;
}

void tl_comm_destroy(tl_comm *comm)
{
    if (comm == NULL)
        return;
    if (comm->be != NULL)
        comm->be->destroy(comm);
    pthread_mutex_destroy(&comm->mu);
    tl_free(comm);
}

int tl_comm_size(const tl_comm *comm)
{
    return comm->size;
}

tl_comm_kind tl_comm_get_kind(const tl_comm *comm)
{
    return comm->kind;
}

int tl_comm_processes(const tl_comm *comm)
{
    return comm->processes;
}

int tl_comm_process(const tl_comm *comm)
{
    return comm->process;
}

int tl_comm_first_rank(const tl_comm *comm)
{
    return comm->first;
}

int tl_comm_local_ranks(const tl_comm *comm)
{
    return comm->local;
}

tl_status tl_comm_create_like(const tl_comm *comm, int local_ranks, tl_comm **out)
{
    *out = NULL;
    if (comm == NULL)
        return tl_error(TL_EINVAL, "tl_comm_create_like: comm is NULL");
    if (comm->kind == TL_COMM_MPI)
        return tl_comm_mpi_create_like(comm, local_ranks, out);
    return tl_comm_create_threads(local_ranks, out);
}

tl_status tl_comm_raise(tl_comm *c)
{
    /* acquire: pairs with the release in tl_comm_fail, so msg is complete. */
    tl_status st = (tl_status)atomic_load_explicit(&c->status, memory_order_acquire);
    TL_ASSERT(st != TL_OK);
    return tl_error(st, "%s", c->msg);
}

tl_status tl_comm_fail(tl_comm *c, tl_status st, const char *fmt, ...)
{
    TL_ASSERT(st != TL_OK);
    pthread_mutex_lock(&c->mu);
    if (atomic_load_explicit(&c->status, memory_order_relaxed) == TL_OK) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(c->msg, sizeof c->msg, fmt, ap);
        va_end(ap);
        if (n < 0)
            c->msg[0] = '\0';
        atomic_store_explicit(&c->status, st, memory_order_release);
    }
    pthread_mutex_unlock(&c->mu);
    c->be->wake(c);
    return tl_comm_raise(c);
}

tl_status tl_comm_abort(tl_comm *comm, tl_status st, const char *msg)
{
    if (comm == NULL)
        return tl_error(TL_EINVAL, "tl_comm_abort: comm is NULL");
    if (st == TL_OK)
        st = TL_ERUNTIME;
    return tl_comm_fail(comm, st, "communicator aborted: %s", msg != NULL ? msg : "");
}

tl_status tl_comm_status(const tl_comm *comm)
{
    return (tl_status)atomic_load_explicit(&comm->status, memory_order_acquire);
}

const char *tl_comm_errmsg(const tl_comm *comm)
{
    return tl_comm_status(comm) == TL_OK ? "" : comm->msg;
}

tl_status tl_comm_set_timeout(tl_comm *comm, double seconds)
{
    if (comm == NULL)
        return tl_error(TL_EINVAL, "tl_comm_set_timeout: comm is NULL");
    if (!isfinite(seconds) || seconds < 0)
        return tl_error(TL_EINVAL, "tl_comm_set_timeout: seconds must be a finite number >= 0, got %g", seconds);
    /* Past about 292 years the deadline saturates: the same as no timeout. */
    int64_t ns = seconds >= 9.0e9 ? INT64_MAX : (int64_t)(seconds * 1e9);
    if (seconds > 0 && ns == 0)
        ns = 1;
    atomic_store_explicit(&comm->timeout_ns, ns, memory_order_relaxed);
    return TL_OK;
}

tl_status tl_comm_chunk(int64_t n, int size, int rank, int64_t *offset, int64_t *len)
{
    *offset = *len = 0;
    if (size < 1)
        return tl_error(TL_EINVAL, "tl_comm_chunk: size must be >= 1, got %d", size);
    if (rank < 0 || rank >= size)
        return tl_error(TL_EINVAL, "tl_comm_chunk: rank must be in [0, %d), got %d", size, rank);
    if (n < 0)
        return tl_error(TL_EINVAL, "tl_comm_chunk: n must be >= 0, got %lld", (long long)n);
    int64_t base = n / size, extra = n % size;
    *offset = rank * base + (rank < extra ? rank : extra);
    *len = base + (rank < extra ? 1 : 0);
    return TL_OK;
}

int64_t tl_comm_a2a_send_offset(const tl_comm_call *sq, int r)
{
    if (sq->soffs != NULL)
        return sq->soffs[r];
    int64_t off = 0;
    for (int q = 0; q < r; q++)
        off += sq->scounts[q];
    return off;
}

int64_t tl_comm_a2a_recv_offset(const tl_comm_call *sr, int q)
{
    if (sr->roffs != NULL)
        return sr->roffs[q];
    int64_t off = 0;
    for (int i = 0; i < q; i++)
        off += sr->rcounts[i];
    return off;
}

/* An all-to-all's own arguments: the count arrays, counts and offsets >= 0,
 * and buffers where elements go. */
static tl_status check_all_to_all(tl_comm *c, int rank, const tl_comm_call *call)
{
    const char *name = "tl_comm_all_to_all_v";
    if (call->scounts == NULL || call->rcounts == NULL)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: %s is NULL; it needs one count per rank (%d)", name, rank,
                            call->scounts == NULL ? "send_counts" : "recv_counts", c->size);
    const int64_t *arrays[4] = {call->scounts, call->soffs, call->rcounts, call->roffs};
    static const char *const names[4] = {"send_counts", "send_offsets", "recv_counts", "recv_offsets"};
    int64_t total[2] = {0, 0};
    for (int a = 0; a < 4; a++) {
        for (int q = 0; arrays[a] != NULL && q < c->size; q++) {
            if (arrays[a][q] < 0 || arrays[a][q] > INT64_MAX / 8 / c->size)
                return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: %s[%d] must be in [0, %lld], got %lld", name, rank,
                                    names[a], q, (long long)(INT64_MAX / 8 / c->size), (long long)arrays[a][q]);
            if (a % 2 == 0)
                total[a / 2] += arrays[a][q];
        }
    }
    if (total[0] > 0 && call->send == NULL)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: send is NULL with %lld elements to send", name, rank,
                            (long long)total[0]);
    if (total[1] > 0 && call->recv == NULL)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: recv is NULL with %lld elements to receive", name, rank,
                            (long long)total[1]);
    return c->be->run(c, rank, call);
}

/* The checks every collective makes on its own arguments before it meets
 * the others. A failure fails the communicator: the other ranks are, or will
 * be, waiting for this one. */
static tl_status run(tl_comm *c, int rank, const tl_comm_call *call)
{
    const char *name = tl_comm_coll_name(call->coll);
    if (c == NULL)
        return tl_error(TL_EINVAL, "%s: comm is NULL", name);
    if (atomic_load_explicit(&c->status, memory_order_acquire) != TL_OK)
        return tl_comm_raise(c);
    if (rank < 0 || rank >= c->size)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank must be in [0, %d), got %d", name, c->size, rank);
    if (rank < c->first || rank >= c->first + c->local)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d is played by another process: process %d plays ranks %d to %d",
                            name, rank, c->process, c->first, c->first + c->local - 1);
    if (call->coll == TL_COLL_BARRIER)
        return c->be->run(c, rank, call);

    if (call->dtype != TL_COMM_F32 && call->dtype != TL_COMM_F64 && call->dtype != TL_COMM_I64)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: dtype must be TL_COMM_F32, TL_COMM_F64 or TL_COMM_I64, got %d",
                            name, rank, (int)call->dtype);
    bool reduces = call->coll == TL_COLL_ALL_REDUCE || call->coll == TL_COLL_REDUCE_SCATTER;
    if (reduces && call->op != TL_REDUCE_SUM && call->op != TL_REDUCE_MEAN)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: op must be TL_REDUCE_SUM or TL_REDUCE_MEAN, got %d", name,
                            rank, (int)call->op);
    if (reduces && call->op == TL_REDUCE_MEAN && call->dtype == TL_COMM_I64)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: TL_REDUCE_MEAN needs a floating dtype, got i64", name, rank);
    if (call->count < 0)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: count must be >= 0, got %lld", name, rank,
                            (long long)call->count);
    /* all_gather's recv holds count * size elements of up to 8 bytes. */
    int64_t max_count = INT64_MAX / 8 / c->size;
    if (call->count > max_count)
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: count must be <= %lld for %d ranks, got %lld", name, rank,
                            (long long)max_count, c->size, (long long)call->count);
    if (call->coll == TL_COLL_BROADCAST && (call->root < 0 || call->root >= c->size))
        return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: root must be in [0, %d), got %d", name, rank, c->size,
                            call->root);
    if (call->coll == TL_COLL_ALL_TO_ALL)
        return check_all_to_all(c, rank, call);
    if (call->count > 0) {
        bool has_send = call->coll != TL_COLL_BROADCAST;
        if (has_send && call->send == NULL)
            return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: send is NULL with count %lld", name, rank,
                                (long long)call->count);
        /* reduce_scatter leaves nothing with a rank whose chunk is empty. */
        int64_t off, len = call->count;
        if (call->coll == TL_COLL_REDUCE_SCATTER)
            tl_comm_chunk(call->count, c->size, rank, &off, &len);
        if (call->recv == NULL && len > 0)
            return tl_comm_fail(c, TL_EINVAL, "%s: rank %d: %s is NULL with count %lld", name, rank,
                                call->coll == TL_COLL_BROADCAST ? "buf" : "recv", (long long)call->count);
    }
    return c->be->run(c, rank, call);
}

tl_status tl_comm_barrier(tl_comm *comm, int rank)
{
    tl_comm_call call = {.coll = TL_COLL_BARRIER};
    return run(comm, rank, &call);
}

tl_status tl_comm_all_reduce(tl_comm *comm, int rank, const void *send, void *recv, int64_t count,
                             tl_comm_dtype dtype, tl_reduce_op op)
{
    tl_comm_call call = {.coll = TL_COLL_ALL_REDUCE, .dtype = dtype, .op = op, .count = count, .send = send, .recv = recv};
    return run(comm, rank, &call);
}

tl_status tl_comm_reduce_scatter(tl_comm *comm, int rank, const void *send, void *recv, int64_t count,
                                 tl_comm_dtype dtype, tl_reduce_op op)
{
    tl_comm_call call = {.coll = TL_COLL_REDUCE_SCATTER, .dtype = dtype, .op = op, .count = count, .send = send,
                         .recv = recv};
    return run(comm, rank, &call);
}

tl_status tl_comm_all_gather(tl_comm *comm, int rank, const void *send, void *recv, int64_t count,
                             tl_comm_dtype dtype)
{
    tl_comm_call call = {.coll = TL_COLL_ALL_GATHER, .dtype = dtype, .count = count, .send = send, .recv = recv};
    return run(comm, rank, &call);
}

tl_status tl_comm_all_to_all_v(tl_comm *comm, int rank, const void *send, const int64_t *send_counts,
                               const int64_t *send_offsets, void *recv, const int64_t *recv_counts,
                               const int64_t *recv_offsets, tl_comm_dtype dtype)
{
    tl_comm_call call = {.coll = TL_COLL_ALL_TO_ALL, .dtype = dtype, .send = send, .recv = recv,
                         .scounts = send_counts, .soffs = send_offsets, .rcounts = recv_counts,
                         .roffs = recv_offsets};
    return run(comm, rank, &call);
}

tl_status tl_comm_broadcast(tl_comm *comm, int rank, void *buf, int64_t count, tl_comm_dtype dtype, int root)
{
    tl_comm_call call = {.coll = TL_COLL_BROADCAST, .dtype = dtype, .root = root, .count = count, .recv = buf};
    return run(comm, rank, &call);
}

/*
 * comm_int.h — what the communicator front end (comm.c) and its backends
 * share. The front end checks a call's own arguments, keeps the sticky error
 * and dispatches; a backend moves the data and checks that the ranks agree.
 * A new backend (MPI, hierarchical) is a tl_comm_backend and a create
 * function; the public calls stay as they are.
 */
#ifndef TL_COMM_INT_H
#define TL_COMM_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "../base/base_int.h"
#include "tpuloop/comm.h"

#define TL_COMM_MSG_MAX 768

/* The collectives, for dispatch and for the cross-rank check. */
typedef enum {
    TL_COLL_BARRIER = 0,
    TL_COLL_ALL_REDUCE,
    TL_COLL_REDUCE_SCATTER,
    TL_COLL_ALL_GATHER,
    TL_COLL_BROADCAST,
    TL_COLL_ALL_TO_ALL
} tl_coll;

/* One rank's call, as the front end checked it. Fields a collective does not
 * use are 0 / NULL, so that comparing calls field by field is meaningful. */
typedef struct tl_comm_call {
    tl_coll coll;
    tl_comm_dtype dtype;
    tl_reduce_op op;   /* reductions only */
    int root;          /* broadcast only */
    int64_t count;     /* elements, as the public call takes it */
    const void *send;  /* NULL for barrier and broadcast */
    void *recv;        /* the broadcast buffer for broadcast */
    /* all-to-all only: (size) elements to and from each rank, and where */
    const int64_t *scounts, *soffs, *rcounts, *roffs;
} tl_comm_call;

typedef struct tl_comm_backend {
    /* Runs one checked call on rank rank. Returns TL_OK, or the
     * communicator's error (failing it first where the backend found the
     * problem, through tl_comm_fail). */
    tl_status (*run)(tl_comm *c, int rank, const tl_comm_call *call);
    /* Releases every rank waiting inside run; called once the communicator
     * has failed, possibly many times, from any thread. */
    void (*wake)(tl_comm *c);
    /* Frees c->impl. */
    void (*destroy)(tl_comm *c);
} tl_comm_backend;

struct tl_comm {
    const tl_comm_backend *be;
    void *impl;               /* the backend's state */
    tl_comm_kind kind;
    int size;
    int processes, process;   /* 1 and 0 but for MPI */
    int first, local;         /* this process plays ranks first .. first + local - 1 */
    atomic_llong timeout_ns;  /* 0: wait for ever */
    pthread_mutex_t mu;       /* orders the first failure */
    atomic_int status;        /* TL_OK until the first failure; then for good */
    char msg[TL_COMM_MSG_MAX]; /* written once, before status (release) */
};

/*
 * The front end's half of creation: allocates the communicator with size and
 * kind set, status TL_OK, and its mutex made; the backend then sets be and
 * impl. tl_comm_destroy frees it whether or not be is set. Errors: TL_ENOMEM,
 * TL_ERUNTIME.
 */
/* tl_comm_create_like for an MPI communicator (comm_mpi.c). */
tl_status tl_comm_mpi_create_like(const tl_comm *comm, int local_ranks, tl_comm **out);

tl_status tl_comm_alloc(tl_comm_kind kind, int size, tl_comm **out);

/*
 * Fails the communicator with st and the formatted message unless it has
 * failed already (the first error stays), wakes the ranks waiting in the
 * backend, and returns the communicator's error as tl_comm_raise does.
 */
tl_status tl_comm_fail(tl_comm *c, tl_status st, const char *fmt, ...) TL_PRINTF(3, 4);

/* Sets the communicator's error (status and message) as this thread's last
 * error and returns the status. Only for a failed communicator. */
tl_status tl_comm_raise(tl_comm *c);

/* "tl_comm_all_reduce" and so on. */
const char *tl_comm_coll_name(tl_coll coll);

/* Bytes per element of a valid dtype. */
size_t tl_comm_dtype_size(tl_comm_dtype dtype);

/* "f32", "f64", "i64"; "SUM", "MEAN": for messages. */
const char *tl_comm_dtype_name(tl_comm_dtype dtype);
const char *tl_comm_op_name(tl_reduce_op op);

/* ---- the threads of one process (comm_threads.c) ----------------------------
 *
 * A group is the n threads of this process that play ranks first ..
 * first + n - 1 of a communicator: the threads backend is one group of every
 * rank, the MPI backend one group per process. A call enters (publishes its
 * arguments, meets the group's other ranks at a barrier that a failure
 * breaks and the timeout bounds, checks that they agree), does its work
 * between the ranks' buffers, and leaves (a barrier that is never broken,
 * so that no rank's buffers are touched once its call has returned). */
typedef struct tl_comm_group tl_comm_group;

/* Errors: TL_ENOMEM, TL_ERUNTIME. */
tl_status tl_comm_group_create(int n, int first, tl_comm_group **out);
void tl_comm_group_destroy(tl_comm_group *g);

/* Enters call as local rank l (its rank is first + l): TL_OK with *slots
 * the n calls of the group, in local rank order; or the communicator's
 * error, and then the call is over for this rank (no leave). */
tl_status tl_comm_group_enter(tl_comm *c, tl_comm_group *g, int l, const tl_comm_call *call,
                              tl_comm_call **slots);

/* Ends local rank l's call; waits for the group's other ranks unless wait
 * is false (a barrier, which has no work after its entry). Every rank of
 * the group makes the same choice. */
void tl_comm_group_leave(tl_comm_group *g, int l, bool wait);

/* The largest n of tl_comm_fold_arrays. */
#define TL_COMM_FOLD_MAX 16

/* out = x[0] + x[1] + ... + x[n-1] element by element, m elements, in that
 * order, then a mean's division by R (op TL_REDUCE_MEAN). n <= TL_COMM_FOLD_MAX;
 * out may be one of the x (each tile is read whole before it is written). */
void tl_comm_fold_arrays(tl_comm_dtype dtype, tl_reduce_op op, const void *const *x, int n, int64_t m, int R,
                         void *out);

/* Where rank q's elements for rank r start in its send buffer (s holds every
 * rank's call), and where rank r's from rank q start in its recv: the
 * offsets given, else the counts before them packed in rank order. */
int64_t tl_comm_a2a_send_offset(const tl_comm_call *sq, int r);
int64_t tl_comm_a2a_recv_offset(const tl_comm_call *sr, int q);

/* Checks an all-to-all's counts: every pair's send and receive counts must
 * match. s holds the n calls of ranks rank_of[0..n) (n = size: every rank);
 * fails the communicator naming the first pair that does not. */
tl_status tl_comm_a2a_check(tl_comm *c, const tl_comm_call *s, int n);

/* Fails the communicator when the n calls s disagree on the collective or its
 * arguments, naming rank_of[q] for call q; TL_OK when they agree. */
tl_status tl_comm_check_calls(tl_comm *c, const tl_comm_call *s, int n, const int *rank_of);

/* Releases the ranks waiting to enter (the communicator has failed). */
void tl_comm_group_wake(tl_comm_group *g);

/*
 * Folds m elements at offset off of the n calls' send buffers into out, in
 * the fixed order: out = in, or the first call's elements when in is NULL;
 * then += each call's elements in index order; then, when last and the op
 * is TL_REDUCE_MEAN, divided by R as the threads backend divides. The dtype
 * and op are s[0]'s. out may be a call's send (an in-place call): each
 * tile is read whole before it is written.
 */
void tl_comm_fold(const tl_comm_call *s, int n, const void *in, int64_t off, int64_t m, bool last, int R,
                  void *out);

#endif /* TL_COMM_INT_H */

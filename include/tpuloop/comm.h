/*
 * tpuloop/comm.h — collectives: barrier, all-reduce, reduce-scatter,
 * all-gather, broadcast and all-to-all among the ranks of a communicator.
 *
 * A communicator joins R ranks. Every collective is called by every rank,
 * in the same order, with the same count, type, operation and root; each
 * call names the calling rank. The ranks are threads of this process
 * (tl_comm_create_threads), whose collectives run through the ranks' own
 * buffers, which every thread can see; or blocks of threads in several
 * processes joined by MPI (tl_comm_create_mpi): each process plays a
 * contiguous block of ranks with its threads, the work inside a process goes
 * through shared memory and only what crosses processes travels by MPI.
 *
 *     // in each of the R worker threads; rank is 0..R-1:
 *     float *grad = my_gradient(rank);    // (n) this rank's gradient
 *     tl_status st = tl_comm_all_reduce(comm, rank, grad, grad, n, TL_COMM_F32, TL_REDUCE_MEAN);
 *     if (st != TL_OK) {                   // every rank gets the same error
 *         fprintf(stderr, "%s\n", tl_last_error());
 *         return st;
 *     }
 *     // grad now holds the same bits on every rank
 *
 * Reductions have a fixed order. The n elements are split into R contiguous
 * chunks (tl_comm_chunk); rank r reduces chunk r as a sequential sum over
 * ranks in index order, acc = x_0; acc += x_1; ... acc += x_{R-1}, in the
 * element type, and for TL_REDUCE_MEAN divides the sum by R (a division, not
 * a multiplication by 1/R: the mean is the correctly rounded quotient of that
 * sum). Every rank then gets those bits. So the result depends on the values
 * and R only, never on thread timing or on how the ranks are spread over
 * processes, and equals a plain loop over the ranks: 1 process of 4 ranks,
 * 2 of 2 and 4 of 1 give the same bits.
 *
 * A communicator fails as a whole (LMDB's MDB_PANIC). When a collective
 * fails — ranks disagree on what they called (a different collective, count,
 * type, operation or root: the message names the ranks and values), a rank
 * passes a bad argument, a rank waits past the timeout, or any thread calls
 * tl_comm_abort — the communicator keeps that first error: calls waiting for
 * the others and every later call on every rank return the same status and
 * message, at once, instead of waiting for ranks that will never come. A call
 * that every rank has already entered is past waiting: it finishes moving
 * the data and returns TL_OK on every rank, and the next call reports the
 * failure. So when a call returns, whatever its status, no other rank
 * touches that rank's buffers any more.
 *
 * No collective allocates: what a communicator needs is made by its create.
 */
#ifndef TPULOOP_COMM_H
#define TPULOOP_COMM_H

#include "tpuloop/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_comm tl_comm;

/* How the ranks are joined. Values are append-only. */
typedef enum {
    TL_COMM_THREADS = 0, /* threads of this process, through shared memory */
    TL_COMM_MPI = 1      /* processes joined by MPI, each a block of threads */
} tl_comm_kind;

/* Element types of collectives. Values are append-only. */
typedef enum {
    TL_COMM_F32 = 0, /* float */
    TL_COMM_F64 = 1, /* double */
    TL_COMM_I64 = 2  /* int64_t; sums wrap around on overflow (two's complement) */
} tl_comm_dtype;

/* Reduction operations. Values are append-only. */
typedef enum {
    TL_REDUCE_SUM = 0,
    TL_REDUCE_MEAN = 1 /* sum / R; floating types only */
} tl_reduce_op;

/* The largest number of ranks a communicator can have. */
#define TL_COMM_MAX_RANKS 4096

/*
 * Makes a communicator of size ranks that are threads of this process. Each
 * of them calls the collectives with its rank, 0..size-1; a rank is a role,
 * not a thread id, so any thread may play it, one at a time. Errors:
 * TL_EINVAL for size outside [1, TL_COMM_MAX_RANKS]; TL_ENOMEM; TL_ERUNTIME
 * when a mutex or condition variable cannot be made. On error *out is NULL.
 */
TL_API tl_status tl_comm_create_threads(int size, tl_comm **out);

/*
 * Makes a communicator of the processes of an MPI communicator, each playing
 * local_ranks ranks with its threads: process p plays the local_ranks ranks
 * that follow those of processes 0..p-1, in MPI rank order (processes may
 * play different numbers of ranks). Collective: every process of the MPI
 * communicator calls it, and each gets the same size, the sum of local_ranks.
 *
 * mpi_comm points to the MPI_Comm to join (it is duplicated: tpuloop's
 * messages never meet the program's), or is NULL for MPI_COMM_WORLD. MPI
 * must allow calls from any thread: a program that initialises MPI itself
 * calls MPI_Init_thread with MPI_THREAD_MULTIPLE, before this and before any
 * other thread calls MPI, and MPI_Finalize after destroying its
 * communicators. When MPI is not initialised, this initialises it so and
 * finalises it at exit (as mpi4py does); without mpirun that is a singleton:
 * one process, no daemon.
 *
 *     // each process of `mpirun -np 2 ./prog`, with 2 worker threads each:
 *     tl_comm *comm;
 *     if (tl_comm_create_mpi(NULL, 2, &comm) != TL_OK) { ... }
 *     int first = tl_comm_first_rank(comm);   // 0 on process 0, 2 on process 1
 *     // worker thread i calls the collectives as rank first + i
 *
 * Errors: on every process alike, TL_EINVAL for a local_ranks < 1 on any
 * process (naming it and the value) or a total above TL_COMM_MAX_RANKS;
 * on the process concerned, TL_EINVAL for MPI without MPI_THREAD_MULTIPLE,
 * TL_EIO when MPI fails (its message), TL_ENOMEM or TL_ERUNTIME (the other
 * processes then wait in their first call until their timeout, if one is
 * set: a process without a communicator cannot send notices).
 * On error *out is NULL.
 *
 * How the fixed order is kept across processes. When every process plays
 * one rank (up to 4 processes), process q owns chunk q of the buffer, as
 * rank q does among threads: every process sends it its elements of that
 * chunk, the owner adds the R arrays in rank order as their segments
 * arrive, and an all-reduce then sends each owner's result to every
 * process. That moves (P-1)/P of the buffer each way twice, as a ring does.
 * Otherwise the elements move along the chain of processes 0 -> 1 -> ... ->
 * P-1, in segments that are in flight at once: process p receives the
 * running sums of the ranks before its block, adds its own ranks' elements
 * in rank order and sends them on, so the last process holds x_0 + x_1 +
 * ... + x_{R-1} summed in exactly the threads backend's order; the results
 * travel on along the chain (P-1 -> 0 -> 1 -> ... -> P-2). A process sends
 * at most the whole buffer twice (its sums, the results it passes on)
 * where a ring sends 2(P-1)/P of it: as much with two processes, at most
 * P/(P-1) times as much with more. (A tree or a ring would add the ranks in
 * another grouping, and float addition is not associative.) All-gather
 * passes the processes' blocks around the ring; broadcast runs along the
 * chain from the root's process. Each call first exchanges its arguments
 * with every process, so disagreeing processes fail with a message naming
 * them, as the threads backend's ranks do.
 *
 * Failures end every process: MPI errors return (MPI_ERRORS_RETURN on the
 * duplicated communicator) and fail the communicator; a process whose
 * communicator fails tells every other process, which fails with "process p
 * (ranks a to b): <the message>"; with a timeout set, a process that waits
 * longer than it for a message fails naming the process it waited for.
 * After a failure a rank's receive buffers are no longer written, but MPI
 * may still read its send buffers until the communicator is destroyed. Nor
 * should the program call MPI_Finalize, which waits for every process (a
 * silent one never comes): a process that exits without it makes mpirun end
 * the others, and when tpuloop initialised MPI it skips the finalising.
 */
TL_API tl_status tl_comm_create_mpi(const void *mpi_comm, int local_ranks, tl_comm **out);

/* The processes the communicator joins (1 for threads), this process's index
 * among them, and the ranks it plays: first .. first + local - 1 (every rank
 * for threads). comm must not be NULL. */
TL_API int tl_comm_processes(const tl_comm *comm);
TL_API int tl_comm_process(const tl_comm *comm);
TL_API int tl_comm_first_rank(const tl_comm *comm);
TL_API int tl_comm_local_ranks(const tl_comm *comm);

/*
 * Makes a communicator of the same processes as comm, each playing
 * local_ranks ranks, with messages of its own (tl_comm_create_mpi's rules;
 * for threads, tl_comm_create_threads(local_ranks)). Collective for MPI:
 * every process calls it, from one thread each. This is how a program that
 * joined its processes once, one rank each (the hosts), gives its replicas
 * a communicator: the estimator does so with tl_estimator_options.hosts.
 * Errors: those of tl_comm_create_mpi or tl_comm_create_threads; TL_EINVAL
 * for a NULL comm. On error *out is NULL.
 */
TL_API tl_status tl_comm_create_like(const tl_comm *comm, int local_ranks, tl_comm **out);

/* Frees the communicator. Accepts NULL. No rank may be inside a call. */
TL_API void tl_comm_destroy(tl_comm *comm);

/* The number of ranks, and how they are joined. comm must not be NULL. */
TL_API int tl_comm_size(const tl_comm *comm);
TL_API tl_comm_kind tl_comm_get_kind(const tl_comm *comm);

/*
 * Makes a rank that waits longer than seconds for the others fail the
 * communicator with TL_ERUNTIME, naming the ranks it waited for. 0 (the
 * default) waits for ever. Callable at any time from any thread; applies to
 * waits that start afterwards. Errors: TL_EINVAL for a negative or non-finite
 * value (the communicator is not failed by that).
 */
TL_API tl_status tl_comm_set_timeout(tl_comm *comm, double seconds);

/*
 * The part of n elements that rank owns in reductions: *offset and *len of
 * chunk rank of size contiguous chunks, the first n % size of them one element
 * longer. It is also what tl_comm_reduce_scatter leaves with each rank.
 * Errors: TL_EINVAL for size < 1, rank outside [0, size) or n < 0 (then
 * *offset and *len are 0).
 */
TL_API tl_status tl_comm_chunk(int64_t n, int size, int rank, int64_t *offset, int64_t *len);

/*
 * Returns when every rank has called it. Errors, for this and every
 * collective below: the communicator's error if it has failed (before or
 * during the call); TL_EINVAL for a NULL comm (which fails nothing) or a rank
 * outside [0, size) or played by another process (which fails the
 * communicator: the others would wait for ever); TL_EINVAL when the ranks disagree on the collective or its
 * arguments, or when two threads are inside a call as the same rank at once;
 * TL_ERUNTIME on a timeout.
 */
TL_API tl_status tl_comm_barrier(tl_comm *comm, int rank);

/*
 * Reduces count elements of dtype from send of every rank into recv of
 * every rank, in the fixed order described above. recv may equal send (in
 * place); otherwise a rank's recv must not overlap any rank's send or recv.
 * Buffers of count 0 may be NULL. Errors, besides those of tl_comm_barrier
 * (each fails the communicator): TL_EINVAL for count < 0, a NULL buffer, an
 * unknown dtype or op, or TL_REDUCE_MEAN on TL_COMM_I64.
 */
TL_API tl_status tl_comm_all_reduce(tl_comm *comm, int rank, const void *send, void *recv, int64_t count,
                                    tl_comm_dtype dtype, tl_reduce_op op);

/*
 * Reduces count elements from send of every rank, as tl_comm_all_reduce does,
 * and leaves with each rank only its chunk: recv holds the len elements of
 * tl_comm_chunk(count, size, rank), which are bitwise the same as those
 * elements of an all-reduce. recv must not overlap any rank's send. Errors:
 * those of tl_comm_all_reduce.
 */
TL_API tl_status tl_comm_reduce_scatter(tl_comm *comm, int rank, const void *send, void *recv, int64_t count,
                                        tl_comm_dtype dtype, tl_reduce_op op);

/*
 * Concatenates the count elements of send of each rank in rank order into
 * recv of every rank, which holds count * size elements. send may be
 * recv + rank * count (in place); otherwise recv must not overlap any rank's
 * send or recv. Errors: those of tl_comm_barrier, and TL_EINVAL for count < 0,
 * a NULL buffer or an unknown dtype (each fails the communicator).
 */
TL_API tl_status tl_comm_all_gather(tl_comm *comm, int rank, const void *send, void *recv, int64_t count,
                                    tl_comm_dtype dtype);

/*
 * Copies count elements of buf of rank root into buf of every other rank.
 * Errors: those of tl_comm_barrier, and TL_EINVAL for count < 0, a NULL
 * buffer, an unknown dtype or a root outside [0, size) (each fails the
 * communicator).
 */
TL_API tl_status tl_comm_broadcast(tl_comm *comm, int rank, void *buf, int64_t count, tl_comm_dtype dtype,
                                   int root);

/*
 * Sends each rank its own elements: rank r sends send_counts[q] elements,
 * starting at element send_offsets[q] of send, to rank q, and receives
 * recv_counts[q] elements from rank q into recv at element recv_offsets[q]
 * (MPI_Alltoallv, and what embedding lookups send to the rows' owners).
 * The arrays hold one entry per rank; NULL offsets pack the blocks in rank
 * order (the offsets are the counts before them). Counts must pair up:
 * rank r's send_counts[q] equals rank q's recv_counts[r]; every rank checks
 * every pair before any element moves. Blocks a rank receives must not
 * overlap each other or any rank's send. Errors: those of tl_comm_barrier;
 * TL_EINVAL for a NULL count array, a negative count or offset, a NULL
 * buffer with elements to move, an unknown dtype, and on every rank for a
 * pair whose counts differ ("rank 3 sends 5 elements to rank 0, which
 * expects 4"); each fails the communicator.
 */
TL_API tl_status tl_comm_all_to_all_v(tl_comm *comm, int rank, const void *send, const int64_t *send_counts,
                                      const int64_t *send_offsets, void *recv, const int64_t *recv_counts,
                                      const int64_t *recv_offsets, tl_comm_dtype dtype);

/*
 * Fails the communicator with st (an error status; TL_OK is taken as
 * TL_ERUNTIME) and the message "communicator aborted: <msg>": ranks waiting in
 * a collective return at once, and every later call returns it. Any thread may
 * call it, rank or not, for example a rank whose step failed, so that the
 * others do not wait for it. When the communicator has already failed, the
 * first error stays. Returns the communicator's error (the first one).
 */
TL_API tl_status tl_comm_abort(tl_comm *comm, tl_status st, const char *msg);

/* TL_OK, or the error the communicator failed with. comm must not be NULL. */
TL_API tl_status tl_comm_status(const tl_comm *comm);

/* The message of that error, "" while the communicator is healthy. The
 * pointer lives as long as the communicator; the text never changes once set. */
TL_API const char *tl_comm_errmsg(const tl_comm *comm);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_COMM_H */

/*
 * test_comm.c — the communicator on one thread: creation errors and
 * unwinding, the chunk arithmetic, every collective on a communicator of one
 * rank, argument errors and the sticky failure they cause, abort, and a
 * timeout reported with the ranks that never came. The threaded behaviour is
 * in test_mt_comm.c.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "testutil.h"
#include "tpuloop/comm.h"

static tl_comm *comm_of(int size)
{
    tl_comm *c = NULL;
    ASSERT_OK(tl_comm_create_threads(size, &c));
    cr_assert_not_null(c);
    return c;
}

/* The communicator has failed with want and a message containing frag, and
 * every kind of later call returns exactly that status and message. */
static void assert_failed_for_good(tl_comm *c, tl_status want, const char *frag)
{
    cr_assert_eq(tl_comm_status(c), want, "status %s, want %s", tl_err_name(tl_comm_status(c)), tl_err_name(want));
    const char *msg = tl_comm_errmsg(c);
    cr_assert(strstr(msg, frag) != NULL, "message \"%s\" lacks \"%s\"", msg, frag);
    float x[2] = {1, 2};
    tl_clear_error();
    cr_assert_eq(tl_comm_barrier(c, 0), want);
    cr_assert_str_eq(tl_last_error(), msg);
    tl_clear_error();
    cr_assert_eq(tl_comm_all_reduce(c, 0, x, x, 2, TL_COMM_F32, TL_REDUCE_SUM), want);
    cr_assert_str_eq(tl_last_error(), msg);
    cr_assert(x[0] == 1 && x[1] == 2, "a failed call must not touch the buffers");
    tl_clear_error();
    cr_assert_eq(tl_comm_broadcast(c, 0, x, 2, TL_COMM_F32, 0), want);
    cr_assert_str_eq(tl_last_error(), msg);
    tl_clear_error();
    /* Even a call with bad arguments reports the first error, not its own. */
    cr_assert_eq(tl_comm_all_gather(c, 99, NULL, NULL, -1, TL_COMM_F64), want);
    cr_assert_str_eq(tl_last_error(), msg);
    cr_assert_eq(tl_comm_abort(c, TL_EIO, "later"), want, "the first error stays");
    cr_assert_str_eq(tl_comm_errmsg(c), msg);
}

Test(comm, create_rejects_bad_sizes)
{
    tl_comm *c = (tl_comm *)1;
    ASSERT_ERR(tl_comm_create_threads(0, &c), TL_EINVAL, "size must be in [1, 4096], got 0");
    cr_assert_null(c);
    ASSERT_ERR(tl_comm_create_threads(-2, &c), TL_EINVAL, "got -2");
    ASSERT_ERR(tl_comm_create_threads(4097, &c), TL_EINVAL, "got 4097");
    cr_assert_null(c);
    tl_comm_destroy(NULL);
}

static tl_status make_comm(void *ctx)
{
    tl_comm *c;
    tl_status st = tl_comm_create_threads(*(int *)ctx, &c);
    if (st != TL_OK)
        return st;
    tl_comm_destroy(c);
    return TL_OK;
}

Test(comm, creation_unwinds_on_allocation_failure)
{
    int size = 8;
    /* The communicator, the group, its slots, rank counters and rank names. */
    cr_assert_eq(tu_oom_sweep(make_comm, &size, "tl_comm_create_threads"), 5);
}

Test(comm, accessors)
{
    tl_comm *c = comm_of(3);
    cr_assert_eq(tl_comm_size(c), 3);
    cr_assert_eq(tl_comm_get_kind(c), TL_COMM_THREADS);
    /* One process, which plays every rank. */
    cr_assert_eq(tl_comm_processes(c), 1);
    cr_assert_eq(tl_comm_process(c), 0);
    cr_assert_eq(tl_comm_first_rank(c), 0);
    cr_assert_eq(tl_comm_local_ranks(c), 3);
    cr_assert_eq(tl_comm_status(c), TL_OK);
    cr_assert_str_eq(tl_comm_errmsg(c), "");
    tl_comm_destroy(c);
}

Test(comm, chunks_tile_the_buffer_evenly)
{
    /* 10 over 4: the first 10 % 4 = 2 chunks are one longer. */
    static const int64_t want[4][2] = {{0, 3}, {3, 3}, {6, 2}, {8, 2}};
    for (int r = 0; r < 4; r++) {
        int64_t off, len;
        tl_comm_chunk(10, 4, r, &off, &len);
        cr_assert(off == want[r][0] && len == want[r][1], "chunk %d: (%lld, %lld)", r, (long long)off,
                  (long long)len);
    }
    static const int64_t ns[] = {0, 1, 2, 7, 8, 9, 1000, 4099};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        for (int size = 1; size <= 9; size++) {
            int64_t next = 0, lmin = INT64_MAX, lmax = 0;
            for (int r = 0; r < size; r++) {
                int64_t off, len;
                tl_comm_chunk(ns[i], size, r, &off, &len);
                cr_assert_eq(off, next, "n %lld, size %d, rank %d: a gap or overlap", (long long)ns[i], size, r);
                next = off + len;
                lmin = len < lmin ? len : lmin;
                lmax = len > lmax ? len : lmax;
            }
            cr_assert_eq(next, ns[i], "n %lld, size %d: the chunks do not cover it", (long long)ns[i], size);
            cr_assert_leq(lmax - lmin, 1, "n %lld, size %d: uneven chunks", (long long)ns[i], size);
        }
    }
}

Test(comm, chunk_rejects_bad_arguments)
{
    int64_t off = 5, len = 5;
    ASSERT_ERR(tl_comm_chunk(10, 0, 0, &off, &len), TL_EINVAL, "tl_comm_chunk: size must be >= 1, got 0");
    cr_assert(off == 0 && len == 0, "a failed call leaves an empty chunk");
    ASSERT_ERR(tl_comm_chunk(10, 4, 4, &off, &len), TL_EINVAL, "rank must be in [0, 4), got 4");
    ASSERT_ERR(tl_comm_chunk(10, 4, -1, &off, &len), TL_EINVAL, "got -1");
    ASSERT_ERR(tl_comm_chunk(-3, 4, 0, &off, &len), TL_EINVAL, "n must be >= 0, got -3");
    ASSERT_OK(tl_comm_chunk(0, 4, 3, &off, &len));
    cr_assert(off == 0 && len == 0);
}

Test(comm, one_rank_collectives)
{
    tl_comm *c = comm_of(1);
    float x[3] = {1.5f, -2.0f, 1e-8f}, y[3] = {0};
    ASSERT_OK(tl_comm_barrier(c, 0));
    ASSERT_OK(tl_comm_all_reduce(c, 0, x, y, 3, TL_COMM_F32, TL_REDUCE_SUM));
    cr_assert(memcmp(x, y, sizeof x) == 0);
    ASSERT_OK(tl_comm_all_reduce(c, 0, x, x, 3, TL_COMM_F32, TL_REDUCE_MEAN));
    cr_assert(x[0] == 1.5f && x[1] == -2.0f && x[2] == 1e-8f, "the mean of one rank is the value");
    double d[2] = {0.1, 0.2}, dr[2];
    ASSERT_OK(tl_comm_reduce_scatter(c, 0, d, dr, 2, TL_COMM_F64, TL_REDUCE_MEAN));
    cr_assert(dr[0] == 0.1 && dr[1] == 0.2);
    int64_t g[4] = {7, 8, -1, -1};
    ASSERT_OK(tl_comm_all_gather(c, 0, g, g + 2, 2, TL_COMM_I64));
    cr_assert(g[2] == 7 && g[3] == 8);
    ASSERT_OK(tl_comm_all_gather(c, 0, g, g, 2, TL_COMM_I64)); /* in place */
    cr_assert(g[0] == 7 && g[1] == 8);
    ASSERT_OK(tl_comm_broadcast(c, 0, g, 4, TL_COMM_I64, 0));
    /* Count 0 takes NULL buffers. */
    ASSERT_OK(tl_comm_all_reduce(c, 0, NULL, NULL, 0, TL_COMM_F32, TL_REDUCE_SUM));
    ASSERT_OK(tl_comm_all_gather(c, 0, NULL, NULL, 0, TL_COMM_F32));
    ASSERT_OK(tl_comm_broadcast(c, 0, NULL, 0, TL_COMM_F32, 0));
    ASSERT_OK(tl_comm_reduce_scatter(c, 0, NULL, NULL, 0, TL_COMM_F64, TL_REDUCE_SUM));
    cr_assert_eq(tl_comm_status(c), TL_OK);
    tl_comm_destroy(c);
}

Test(comm, int64_sums_wrap_without_undefined_behaviour)
{
    tl_comm *c = comm_of(1);
    int64_t x[2] = {INT64_MAX, INT64_MIN};
    ASSERT_OK(tl_comm_all_reduce(c, 0, x, x, 2, TL_COMM_I64, TL_REDUCE_SUM));
    cr_assert(x[0] == INT64_MAX && x[1] == INT64_MIN);
    tl_comm_destroy(c);
}

Test(comm, null_comm_is_an_error_without_a_crash)
{
    float x = 0;
    ASSERT_ERR(tl_comm_barrier(NULL, 0), TL_EINVAL, "tl_comm_barrier: comm is NULL");
    ASSERT_ERR(tl_comm_all_reduce(NULL, 0, &x, &x, 1, TL_COMM_F32, TL_REDUCE_SUM), TL_EINVAL,
               "tl_comm_all_reduce: comm is NULL");
    ASSERT_ERR(tl_comm_abort(NULL, TL_EIO, "x"), TL_EINVAL, "comm is NULL");
    ASSERT_ERR(tl_comm_set_timeout(NULL, 1), TL_EINVAL, "comm is NULL");
}

/* Each bad argument fails the call with TL_EINVAL naming the rank, the
 * argument and the value, and then the communicator for good. */
typedef struct bad_call {
    const char *what;
    int kind; /* 0 barrier, 1 all_reduce, 2 reduce_scatter, 3 all_gather, 4 broadcast,
                 5 all_to_all_v with counts {count, 1} (count -99: NULL) */
    int rank;
    int64_t count;
    int dtype, op, root;
    bool null_send, null_recv;
    const char *frag;
} bad_call;

static const bad_call bad_calls[] = {
    {"rank too large", 0, 2, 0, 0, 0, 0, false, false, "tl_comm_barrier: rank must be in [0, 2), got 2"},
    {"negative rank", 1, -1, 4, 0, 0, 0, false, false, "tl_comm_all_reduce: rank must be in [0, 2), got -1"},
    {"negative count", 1, 0, -4, 0, 0, 0, false, false, "tl_comm_all_reduce: rank 0: count must be >= 0, got -4"},
    {"huge count", 3, 1, INT64_MAX / 8, 0, 0, 0, false, false, "count must be <= "},
    {"unknown dtype", 1, 1, 4, 7, 0, 0, false, false,
     "rank 1: dtype must be TL_COMM_F32, TL_COMM_F64 or TL_COMM_I64, got 7"},
    {"unknown op", 2, 0, 4, 0, 5, 0, false, false,
     "tl_comm_reduce_scatter: rank 0: op must be TL_REDUCE_SUM or TL_REDUCE_MEAN, got 5"},
    {"mean of int64", 1, 0, 4, 2, 1, 0, false, false, "TL_REDUCE_MEAN needs a floating dtype, got i64"},
    {"NULL send", 1, 0, 4, 0, 0, 0, true, false, "rank 0: send is NULL with count 4"},
    {"NULL recv", 3, 1, 4, 1, 0, 0, false, true, "tl_comm_all_gather: rank 1: recv is NULL with count 4"},
    {"NULL buf", 4, 0, 4, 0, 0, 0, false, true, "tl_comm_broadcast: rank 0: buf is NULL with count 4"},
    {"root out of range", 4, 1, 4, 0, 0, 2, false, false, "tl_comm_broadcast: rank 1: root must be in [0, 2), got 2"},
    {"negative root", 4, 0, 4, 0, 0, -1, false, false, "root must be in [0, 2), got -1"},
    {"NULL counts", 5, 0, -99, 0, 0, 0, false, false,
     "tl_comm_all_to_all_v: rank 0: send_counts is NULL; it needs one count per rank (2)"},
    {"negative count to a rank", 5, 1, -3, 0, 0, 0, false, false,
     "tl_comm_all_to_all_v: rank 1: send_counts[0] must be in [0, "},
    {"NULL send with elements", 5, 0, 4, 0, 0, 0, true, false,
     "tl_comm_all_to_all_v: rank 0: send is NULL with 5 elements to send"},
};

static tl_status call_bad(tl_comm *c, const bad_call *b, void *buf)
{
    const void *send = b->null_send ? NULL : buf;
    void *recv = b->null_recv ? NULL : buf;
    tl_comm_dtype dt = (tl_comm_dtype)b->dtype;
    tl_reduce_op op = (tl_reduce_op)b->op;
    switch (b->kind) {
    case 0: return tl_comm_barrier(c, b->rank);
    case 1: return tl_comm_all_reduce(c, b->rank, send, recv, b->count, dt, op);
    case 2: return tl_comm_reduce_scatter(c, b->rank, send, recv, b->count, dt, op);
    case 3: return tl_comm_all_gather(c, b->rank, send, recv, b->count, dt);
    case 4: return tl_comm_broadcast(c, b->rank, recv, b->count, dt, b->root);
    default: {
        int64_t counts[2] = {b->count, 1};
        const int64_t *sc = b->count == -99 ? NULL : counts;
        return tl_comm_all_to_all_v(c, b->rank, send, sc, NULL, recv, counts, NULL, dt);
    }
    }
}

Test(comm, bad_arguments_fail_the_communicator)
{
    double buf[16] = {0};
    for (size_t i = 0; i < sizeof bad_calls / sizeof bad_calls[0]; i++) {
        const bad_call *b = &bad_calls[i];
        tl_comm *c = comm_of(2);
        tl_status st = call_bad(c, b, buf);
        cr_assert_eq(st, TL_EINVAL, "%s: got %s (%s)", b->what, tl_err_name(st), tl_last_error());
        cr_assert(strstr(tl_last_error(), b->frag) != NULL, "%s: message \"%s\" lacks \"%s\"", b->what,
                  tl_last_error(), b->frag);
        assert_failed_for_good(c, TL_EINVAL, b->frag);
        tl_comm_destroy(c);
    }
}

Test(comm, reduce_scatter_takes_null_recv_for_an_empty_chunk)
{
    /* 1 element over 2 ranks: rank 1's chunk is empty. Run on a one-thread
     * check only: rank 1's argument check passes and the failure, if any,
     * would come from the call itself. */
    tl_comm *c = comm_of(2);
    tl_comm_set_timeout(c, 0.01);
    float x = 1;
    tl_status st = tl_comm_reduce_scatter(c, 1, &x, NULL, 1, TL_COMM_F32, TL_REDUCE_SUM);
    cr_assert_eq(st, TL_ERUNTIME, "the arguments pass; only rank 0's absence fails it: %s", tl_last_error());
    cr_assert(strstr(tl_last_error(), "timed out") != NULL, "%s", tl_last_error());
    tl_comm_destroy(c);
}

Test(comm, abort_fails_the_communicator_for_good)
{
    tl_comm *c = comm_of(4);
    cr_assert_eq(tl_comm_abort(c, TL_EIO, "rank 2: reading the batch failed"), TL_EIO);
    cr_assert_str_eq(tl_last_error(), "communicator aborted: rank 2: reading the batch failed");
    assert_failed_for_good(c, TL_EIO, "communicator aborted: rank 2: reading the batch failed");
    tl_comm_destroy(c);

    c = comm_of(1);
    cr_assert_eq(tl_comm_abort(c, TL_OK, NULL), TL_ERUNTIME, "an abort with TL_OK is still a failure");
    assert_failed_for_good(c, TL_ERUNTIME, "communicator aborted: ");
    tl_comm_destroy(c);
}

Test(comm, set_timeout_checks_its_value)
{
    tl_comm *c = comm_of(2);
    ASSERT_ERR(tl_comm_set_timeout(c, -1), TL_EINVAL, "seconds must be a finite number >= 0, got -1");
    ASSERT_ERR(tl_comm_set_timeout(c, NAN), TL_EINVAL, "got nan");
    ASSERT_ERR(tl_comm_set_timeout(c, INFINITY), TL_EINVAL, "got inf");
    cr_assert_eq(tl_comm_status(c), TL_OK, "a bad timeout does not fail the communicator");
    ASSERT_OK(tl_comm_set_timeout(c, 0));
    ASSERT_OK(tl_comm_set_timeout(c, 1e300)); /* saturates: for ever */
    ASSERT_OK(tl_comm_set_timeout(c, 1e-12)); /* rounds up to 1 ns, not to "for ever" */
    tl_comm_destroy(c);
}

Test(comm, timeout_names_the_missing_ranks)
{
    /* Rank 0 calls; ranks 1 and 2 never do. */
    tl_comm *c = comm_of(3);
    ASSERT_OK(tl_comm_set_timeout(c, 0.02));
    float x[4] = {0};
    tl_status st = tl_comm_all_reduce(c, 0, x, x, 4, TL_COMM_F32, TL_REDUCE_SUM);
    cr_assert_eq(st, TL_ERUNTIME, "got %s: %s", tl_err_name(st), tl_last_error());
    cr_assert_str_eq(tl_last_error(),
                     "tl_comm_all_reduce: rank 0 timed out after 0.020 s waiting for rank(s) 1, 2");
    /* A latecomer gets the same error at once. */
    assert_failed_for_good(c, TL_ERUNTIME, "waiting for rank(s) 1, 2");
    tl_comm_destroy(c);
}

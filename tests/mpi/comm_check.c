/*
 * comm_check.c — the MPI communicator, run by tests/test_mpi.c under
 * `mpirun -np P` with L worker threads per process (rank = first + thread).
 *
 *     comm_check L check     every collective, checked bit for bit against
 *                            the fixed-order fold computed here; prints one
 *                            line "process p: ok digest <hex>" where the
 *                            digest covers every result, so layouts (1 x 4,
 *                            2 x 2, 4 x 1) can be compared
 *     comm_check L disagree  the last process's ranks pass another count
 *     comm_check L mismatch  an all-to-all whose last rank expects nothing
 *                            from rank 1, which sends it one element
 *     comm_check L abort     the last process's first rank aborts instead
 *     comm_check L stall     the last process never calls (the others time out)
 *
 * Every process prints "process p: error: <message>" for a failed call and
 * exits 1; 0 when every check passed. Not a Criterion test: MPI processes
 * are started by mpirun, not forked by a test runner.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpuloop/tpuloop.h"

#define MAXL 16

typedef enum { CHECK, DISAGREE, MISMATCH, ABORT, STALL } mode;

static tl_comm *comm;
static mode how;
static int R, P, p, first, L;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int failures;
static uint64_t digest = 1469598103934665603ull; /* FNV-1a over every result */

/* A wrong result: what, and the element or block. */
static void fail(const char *what, long long at)
{
    pthread_mutex_lock(&mu);
    failures++;
    printf("process %d: FAILED: %s %lld\n", p, what, at);
    pthread_mutex_unlock(&mu);
}

static void hash(const void *buf, size_t n)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        digest = (digest ^ b[i]) * 1099511628211ull;
}

/* Element i of rank g: magnitudes from 1e-4 to 1e4, both signs, so that the
 * order of a float sum shows in its bits. */
static double value(int g, int64_t i, int salt)
{
    uint64_t x = (uint64_t)g * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull + (uint64_t)salt;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    double u = (double)(x >> 11) / 9007199254740992.0;
    double mag[] = {1e-4, 1e-2, 1.0, 1e2, 1e4};
    return (u - 0.5) * mag[(x >> 3) % 5];
}

static void fill(tl_comm_dtype dt, void *buf, int64_t n, int g, int salt)
{
    for (int64_t i = 0; i < n; i++) {
        double v = value(g, i, salt);
        if (dt == TL_COMM_F32)
            ((float *)buf)[i] = (float)v;
        else if (dt == TL_COMM_F64)
            ((double *)buf)[i] = v;
        else
            ((int64_t *)buf)[i] = (int64_t)(v * 1e15);
    }
}

static size_t esize(tl_comm_dtype dt)
{
    return dt == TL_COMM_F32 ? 4 : 8;
}

/* The fixed-order fold of element i over every rank, computed here. */
static void expect(tl_comm_dtype dt, tl_reduce_op op, int64_t i, int salt, void *out)
{
    if (dt == TL_COMM_F32) {
        float acc = (float)value(0, i, salt);
        for (int g = 1; g < R; g++)
            acc += (float)value(g, i, salt);
        if (op == TL_REDUCE_MEAN)
            acc = (R & (R - 1)) == 0 ? acc * (1.0f / (float)R) : acc / (float)R;
        memcpy(out, &acc, 4);
    } else if (dt == TL_COMM_F64) {
        double acc = value(0, i, salt);
        for (int g = 1; g < R; g++)
            acc += value(g, i, salt);
        if (op == TL_REDUCE_MEAN)
            acc = (R & (R - 1)) == 0 ? acc * (1.0 / (double)R) : acc / (double)R;
        memcpy(out, &acc, 8);
    } else {
        uint64_t acc = 0;
        for (int g = 0; g < R; g++)
            acc += (uint64_t)(int64_t)(value(g, i, salt) * 1e15);
        memcpy(out, &acc, 8);
    }
}

static bool ok(tl_status st, const char *what)
{
    if (st == TL_OK)
        return true;
    pthread_mutex_lock(&mu);
    failures++;
    printf("process %d: error: %s\n", p, tl_last_error());
    (void)what;
    pthread_mutex_unlock(&mu);
    return false;
}

/* One reduction of n elements by rank g, in place or not; checks every
 * element the rank gets. */
static bool reduction(int g, bool scatter, tl_comm_dtype dt, tl_reduce_op op, int64_t n, bool in_place, int salt)
{
    size_t es = esize(dt);
    char *send = malloc((size_t)n * es + 8), *recv = malloc((size_t)n * es + 8);
    fill(dt, send, n, g, salt);
    int64_t off = 0, len = n;
    if (scatter)
        tl_comm_chunk(n, R, g, &off, &len);
    tl_status st = scatter ? tl_comm_reduce_scatter(comm, g, send, recv, n, dt, op)
                           : tl_comm_all_reduce(comm, g, send, in_place ? send : recv, n, dt, op);
    if (!ok(st, "reduction")) {
        free(send);
        free(recv);
        return false;
    }
    const char *got = scatter ? recv : in_place ? send : recv;
    for (int64_t i = 0; i < len; i++) {
        char want[8];
        expect(dt, op, off + i, salt, want);
        if (memcmp(got + (size_t)i * es, want, es) != 0) {
            fail(scatter ? "reduce_scatter: not the fixed-order sum at element"
                         : "all_reduce: not the fixed-order sum at element",
                 (long long)(off + i));
            break;
        }
    }
    if (g == 0 && !scatter) {
        pthread_mutex_lock(&mu);
        hash(got, (size_t)n * es);
        pthread_mutex_unlock(&mu);
    }
    free(send);
    free(recv);
    return true;
}

static bool gather(int g, int64_t n, bool in_place)
{
    int64_t *recv = malloc((size_t)(n * R) * 8 + 8);
    int64_t *send = in_place ? recv + (size_t)g * (size_t)n : malloc((size_t)n * 8 + 8);
    for (int64_t i = 0; i < n; i++)
        send[i] = (int64_t)g * 1000003 + i;
    bool good = ok(tl_comm_all_gather(comm, g, send, recv, n, TL_COMM_I64), "all_gather");
    for (int q = 0; good && q < R; q++)
        for (int64_t i = 0; i < n; i++)
            if (recv[(size_t)q * (size_t)n + (size_t)i] != (int64_t)q * 1000003 + i) {
                fail("all_gather: wrong block", (long long)q);
                q = R;
                break;
            }
    if (!in_place)
        free(send);
    free(recv);
    return good;
}

static bool bcast(int g, int64_t n, int root)
{
    double *buf = malloc((size_t)n * 8 + 8);
    for (int64_t i = 0; i < n; i++)
        buf[i] = g == root ? value(root, i, 7) : -1.0;
    bool good = ok(tl_comm_broadcast(comm, g, buf, n, TL_COMM_F64, root), "broadcast");
    for (int64_t i = 0; good && i < n; i++)
        if (buf[i] != value(root, i, 7)) {
            fail("broadcast: not the root's element", (long long)i);
            break;
        }
    free(buf);
    return good;
}

/* Rank g sends (g + q) % 3 + q elements to rank q, element i being
 * g * 1000000 + q * 1000 + i; packed, then at spread-out offsets. */
static bool a2a(int g, bool spread)
{
    int64_t *sc = calloc((size_t)R, 8), *so = calloc((size_t)R, 8), *rc = calloc((size_t)R, 8),
            *ro = calloc((size_t)R, 8), st = 0, rt = 0;
    for (int q = 0; q < R; q++) {
        sc[q] = (g + q) % 3 + q;
        rc[q] = (q + g) % 3 + g;
        so[q] = 2 * st + 1;
        ro[q] = 2 * rt + 3;
        st += sc[q];
        rt += rc[q];
    }
    int64_t *send = calloc((size_t)(2 * st + 8), 8), *recv = calloc((size_t)(2 * rt + 8), 8);
    for (int q = 0, off = 0; q < R; off += (int)sc[q], q++)
        for (int64_t i = 0; i < sc[q]; i++)
            send[(spread ? so[q] : off) + i] = (int64_t)g * 1000000 + q * 1000 + i;
    bool good = ok(tl_comm_all_to_all_v(comm, g, send, sc, spread ? so : NULL, recv, rc, spread ? ro : NULL,
                                        TL_COMM_I64),
                   "all_to_all_v");
    for (int q = 0, off = 0; good && q < R; off += (int)rc[q], q++)
        for (int64_t i = 0; i < rc[q]; i++)
            if (recv[(spread ? ro[q] : off) + i] != (int64_t)q * 1000000 + g * 1000 + i) {
                fail("all_to_all_v: wrong block from rank", q);
                good = false;
                break;
            }
    free(sc);
    free(so);
    free(rc);
    free(ro);
    free(send);
    free(recv);
    return good;
}

static void *rank_main(void *arg)
{
    int g = (int)(intptr_t)arg;
    bool lastp = p == P - 1;
    if (how == DISAGREE) {
        ok(tl_comm_all_reduce(comm, g, &(float){1}, &(float){0}, lastp ? 2 : 1, TL_COMM_F32, TL_REDUCE_SUM), "d");
        return NULL;
    }
    if (how == MISMATCH) {
        /* one element to every rank, but the last rank expects none from rank 1 */
        int64_t *sc = calloc((size_t)R, 8), *rc = calloc((size_t)R, 8), *buf = calloc((size_t)R, 8);
        for (int q = 0; q < R; q++)
            sc[q] = rc[q] = 1;
        if (g == R - 1)
            rc[1] = 0;
        ok(tl_comm_all_to_all_v(comm, g, buf, sc, NULL, buf, rc, NULL, TL_COMM_I64), "a2a");
        free(sc);
        free(rc);
        free(buf);
        return NULL;
    }
    if (how == ABORT) {
        if (lastp && g == first)
            tl_comm_abort(comm, TL_EIO, "rank failed reading its input");
        else
            ok(tl_comm_barrier(comm, g), "barrier");
        return NULL;
    }
    if (how == STALL) {
        if (lastp)
            pause(); /* until mpirun ends it */
        ok(tl_comm_barrier(comm, g), "barrier");
        return NULL;
    }
    static const int64_t sizes[] = {0, 1, 7, 65536, 1000003};
    static const tl_comm_dtype dts[] = {TL_COMM_F32, TL_COMM_F64, TL_COMM_I64};
    int salt = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t di = 0; di < 3; di++)
            for (int op = 0; op < 2; op++) {
                if (dts[di] == TL_COMM_I64 && op == TL_REDUCE_MEAN)
                    continue;
                salt++;
                if (!reduction(g, false, dts[di], (tl_reduce_op)op, sizes[si], false, salt) ||
                    !reduction(g, false, dts[di], (tl_reduce_op)op, sizes[si], true, salt) ||
                    !reduction(g, true, dts[di], (tl_reduce_op)op, sizes[si], false, salt))
                    return NULL;
            }
    /* More segments than the streams keep in flight (1 MiB, 4 of them). */
    if (!reduction(g, false, TL_COMM_F64, TL_REDUCE_SUM, 3000001, true, 99) ||
        !reduction(g, true, TL_COMM_F64, TL_REDUCE_MEAN, 3000001, false, 98))
        return NULL;
    if (!a2a(g, false) || !a2a(g, true))
        return NULL;
    if (!gather(g, 0, false) || !gather(g, 3, false) || !gather(g, 300001, true))
        return NULL;
    if (!bcast(g, 1, 0) || !bcast(g, 500000, R - 1) || !bcast(g, 1000, R / 2))
        return NULL;
    ok(tl_comm_barrier(comm, g), "barrier");
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) < 1 || atoi(argv[1]) > MAXL) {
        fprintf(stderr, "usage: comm_check L check|disagree|mismatch|abort|stall\n");
        return 2;
    }
    L = atoi(argv[1]);
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line out before mpirun may end the process */
    how = strcmp(argv[2], "disagree") == 0 ? DISAGREE
          : strcmp(argv[2], "mismatch") == 0 ? MISMATCH
          : strcmp(argv[2], "abort") == 0  ? ABORT
          : strcmp(argv[2], "stall") == 0  ? STALL
                                           : CHECK;
    if (tl_comm_create_mpi(NULL, L, &comm) != TL_OK) {
        printf("error: %s\n", tl_last_error());
        return 1;
    }
    R = tl_comm_size(comm);
    P = tl_comm_processes(comm);
    p = tl_comm_process(comm);
    first = tl_comm_first_rank(comm);
    if (how == STALL)
        tl_comm_set_timeout(comm, 3.0);
    pthread_t t[MAXL];
    for (int l = 0; l < L; l++)
        pthread_create(&t[l], NULL, rank_main, (void *)(intptr_t)(first + l));
    for (int l = 0; l < L; l++)
        pthread_join(t[l], NULL);
    tl_comm_destroy(comm);
    if (failures == 0)
        printf("process %d: ok digest %016" PRIx64 " (%d processes, ranks %d to %d of %d)\n", p, digest, P, first,
               first + L - 1, R);
    fflush(stdout);
    /* mpirun ends the job when the first process exits after a failure: give
     * the others a moment to report theirs. */
    if (failures > 0)
        sleep(1);
    return failures == 0 ? 0 : 1;
}

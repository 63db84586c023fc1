/* bench_comm.c — tpuloop's all-reduce across processes (tl_comm_create_mpi,
 * one rank per process) against plain MPI_Allreduce in the same processes,
 * 2 processes, float sums of 4 MiB and 64 MiB, over shared memory and over
 * TCP loopback (--mca btl tcp,self). Rounds alternate between the two, so
 * a busy machine slows both alike; each round is ITERS calls between two
 * barriers, timed by the slowest process. The figure is algorithm bandwidth,
 * bytes / seconds per call, as ../shared/bench/mpi_allreduce.c and
 * torch_ddp.py report it; the ratio tpuloop / MPI is given per round, with
 * its min and max.
 *
 * Started plainly it runs itself under mpirun, once per transport, and
 * prints process 0's JSON lines. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/tpuloop.h"
#include "util/bench_util.h"

enum { ROUNDS = 7 };

static double timed(tl_comm *comm, int rank, const float *send, float *recv, int n, int iters, bool ours)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) {
        if (ours) {
            if (tl_comm_all_reduce(comm, rank, send, recv, n, TL_COMM_F32, TL_REDUCE_SUM) != TL_OK) {
                fprintf(stderr, "bench_comm: %s\n", tl_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        } else {
            MPI_Allreduce(send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    double t = bench_now() - t0, tmax = 0;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

static void print_list(const char *key, const double *v, int n)
{
    printf("\"%s\": [", key);
    for (int r = 0; r < n; r++)
        printf("%s%.3f", r ? ", " : "", v[r]);
    printf("], ");
}

static int worker(const char *transport)
{
    int level = 0;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &level);
    tl_comm *comm;
    if (tl_comm_create_mpi(NULL, 1, &comm) != TL_OK) {
        fprintf(stderr, "bench_comm: %s\n", tl_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int rank = tl_comm_first_rank(comm), P = tl_comm_processes(comm);
    static const int mib[] = {4, 64};
    for (int s = 0; s < 2; s++) {
        size_t bytes = (size_t)mib[s] << 20;
        int n = (int)(bytes / sizeof(float)), iters = mib[s] == 4 ? 50 : 5;
        float *send = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes);
        for (int i = 0; i < n; i++)
            send[i] = (float)(rank + 1) * 1e-3f * (float)(i % 1000);
        timed(comm, rank, send, a, n, 2, true); /* warm-up: pages, connections */
        timed(comm, rank, send, b, n, 2, false);
        double ours[ROUNDS], mpi[ROUNDS], ratio[ROUNDS], sorted[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            bool first_ours = r % 2 == 0;
            double t1 = timed(comm, rank, send, first_ours ? a : b, n, iters, first_ours);
            double t2 = timed(comm, rank, send, first_ours ? b : a, n, iters, !first_ours);
            double to = first_ours ? t1 : t2, tm = first_ours ? t2 : t1;
            ours[r] = (double)bytes * iters / to / 1e9;
            mpi[r] = (double)bytes * iters / tm / 1e9;
            ratio[r] = ours[r] / mpi[r];
        }
        /* Both sums of these values are exact in float, so the results agree. */
        bool same = memcmp(a, b, bytes) == 0;
        if (rank == 0) {
            memcpy(sorted, ratio, sizeof ratio);
            double med = bench_median(sorted, ROUNDS);
            printf("{\"bench\": \"comm_allreduce\", \"transport\": \"%s\", \"processes\": %d, \"mib\": %d, "
                   "\"iters\": %d, \"unit\": \"GB/s algbw\", ",
                   transport, P, mib[s], iters);
            print_list("tpuloop", ours, ROUNDS);
            print_list("mpi_allreduce", mpi, ROUNDS);
            print_list("ratio", ratio, ROUNDS);
            printf("\"ratio_median\": %.3f, \"ratio_min\": %.3f, \"ratio_max\": %.3f, \"target\": 0.9, "
                   "\"same_result\": %s}\n",
                   med, sorted[0], sorted[ROUNDS - 1], same ? "true" : "false");
            fflush(stdout);
        }
        free(send);
        free(a);
        free(b);
    }
    tl_comm_destroy(comm);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--worker") == 0)
        return worker(argv[2]);
    static const struct {
        const char *name, *mca;
    } transports[] = {{"shared_memory", ""}, {"tcp_loopback", "--mca btl tcp,self"}};
    for (size_t t = 0; t < 2; t++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "timeout -k 5 600 mpirun --allow-run-as-root --oversubscribe -np 2 %s %s --worker %s </dev/null",
                 transports[t].mca, argv[0], transports[t].name);
        fflush(stdout);
        int rc = system(cmd);
        if (rc != 0) {
            fprintf(stderr, "bench_comm: %s failed (%d)\n", cmd, rc);
            return 1;
        }
    }
    return 0;
}

/* bench_hosts.c — training throughput on 1 host of 2 devices against 2
 * hosts of 1 device each (2 MPI processes, `mpirun -np 2 tpuloop train`),
 * for the MLP on Fashion-MNIST and for DLRM on Criteo-shaped data: the same
 * 2 replicas, the same bits (tests/test_mpi_train.c), so the ratio is what
 * crossing processes costs. Rounds alternate between the two layouts, so a
 * busy machine slows both alike; the figure is the run's own
 * "examples_per_sec" (the training loops, not the data loading). The MLP is
 * the workload of ../shared/bench/torch_ddp.py's DDP run (784-256-256-10,
 * SGD, global batch 256, 1 thread per process), which run_peers.sh runs in
 * the same `make bench`.
 *
 * The command is BUILD/bin/tpuloop beside this program's BUILD/bench. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/bench_util.h"

enum { ROUNDS = 5 };

static char cli[4096];

/* examples_per_sec of one run, or -1 (and a message) when it failed. */
static double run(const char *launch, const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 600 %s %s %s "
             "</dev/null 2>/dev/null",
             launch, cli, args);
    FILE *f = popen(cmd, "r");
    char line[16384] = "";
    double eps = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        json_t *j = json_loads(line, 0, NULL);
        if (j != NULL && json_is_number(json_object_get(j, "examples_per_sec")))
            eps = json_number_value(json_object_get(j, "examples_per_sec"));
        json_decref(j);
    }
    if (f == NULL || pclose(f) != 0 || eps < 0) {
        fprintf(stderr, "bench_hosts: failed: %s\n", cmd);
        return -1;
    }
    return eps;
}

static void list(const char *key, const double *v, int n)
{
    printf("\"%s\": [", key);
    for (int r = 0; r < n; r++)
        printf("%s%.1f", r ? ", " : "", v[r]);
    printf("], ");
}

static int workload(const char *name, const char *args)
{
    char one[8192], two[8192];
    snprintf(one, sizeof one, "%s --devices=2", args);
    snprintf(two, sizeof two, "%s --devices=1", args);
    double a[ROUNDS], b[ROUNDS], ratio[ROUNDS], sorted[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        bool first_one = r % 2 == 0;
        double x = run(first_one ? "" : "mpirun -np 2", first_one ? one : two);
        double y = run(first_one ? "mpirun -np 2" : "", first_one ? two : one);
        a[r] = first_one ? x : y;
        b[r] = first_one ? y : x;
        if (a[r] <= 0 || b[r] <= 0)
            return 1;
        ratio[r] = b[r] / a[r];
    }
    printf("{\"bench\": \"hosts_%s\", \"unit\": \"examples/s\", ", name);
    list("one_host_2_devices", a, ROUNDS);
    list("two_hosts_1_device", b, ROUNDS);
    memcpy(sorted, ratio, sizeof ratio);
    double med = bench_median(sorted, ROUNDS);
    printf("\"ratio\": [");
    for (int r = 0; r < ROUNDS; r++)
        printf("%s%.3f", r ? ", " : "", ratio[r]);
    printf("], \"ratio_median\": %.3f, \"ratio_min\": %.3f, \"ratio_max\": %.3f, ", med, sorted[0],
           sorted[ROUNDS - 1]);
    memcpy(sorted, a, sizeof a);
    double ma = bench_median(sorted, ROUNDS);
    memcpy(sorted, b, sizeof b);
    printf("\"one_host_median\": %.1f, \"two_hosts_median\": %.1f}\n", ma, bench_median(sorted, ROUNDS));
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *slash = strrchr(argv[0], '/');
    snprintf(cli, sizeof cli, "%.*s/../bin/tpuloop", slash ? (int)(slash - argv[0]) : 1, slash ? argv[0] : ".");
    int rc = workload("mlp", "train configs/mlp_fashion_mnist.json --optimizer=sgd --learning_rate=0.1 "
                             "--train_batch_size=256 --train_steps=1500 --iterations_per_loop=100 "
                             "--eval_batch_size=null --epochs=null --log_step_count_steps=100000");
    if (rc == 0)
        rc = workload("dlrm", "train examples/dlrm_synthetic.json --synthetic_examples=262144 "
                              "--train_batch_size=512 --train_steps=400 --iterations_per_loop=100 "
                              "--eval_batch_size=null --epochs=null");
    return rc;
}

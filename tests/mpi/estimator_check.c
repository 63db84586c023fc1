/*
 * estimator_check.c — the estimator over MPI processes through the public C
 * API, run by tests/test_mpi_train.c under `mpirun -np H` (or alone, with
 * the hosts side by side in one process):
 *
 *     estimator_check MODE DEVICES H [mpi]
 *
 * trains a small MLP 24 steps with per_host_input_for_training MODE (or
 * SLICED: PER_HOST_V1 and eval_training_input_configuration SLICED) on H
 * hosts of DEVICES devices, evaluates 4 steps (over several hosts with
 * PER_HOST_V2, BROADCAST or SLICED), predicts 150 examples (over several
 * hosts with BROADCAST), and prints, as host h (every line prefixed "host
 * h: "):
 *
 *     call MODE HOST INDEX TOTAL REPLICAS FIRST BATCH   each input_fn invocation it ran
 *     digest HEX LOSS EVAL_LOSS                         params_digest, the last step's and the evaluation's loss
 *     predict N CHECKSUM                                the predictions (or the error)
 *     error MESSAGE                                     a failed call (exit 1)
 *
 * With "mpi" the process joins the hosts (tl_comm_create_mpi, one rank per
 * process) and runs host tl_comm_process(hosts) alone; without it, it is
 * every host. Not a Criterion test: mpirun starts it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/tpuloop.h"

#define N 2048
#define D 6

static int me;
static tl_labeled_data data;
/* What a failure frees before exiting (the sanitizer run checks leaks). */
static tl_comm *hosts;
static tl_config *cfg;
static tl_estimator *est;

/* Every invocation reads the same examples, from its own offset: what each
 * replica sees depends on the invocation that feeds it, as in TensorFlow. */
static tl_status input_fn(const tl_input_context *c, void *user, tl_dataset **out)
{
    (void)user;
    printf("host %d: call %s %d %d %d %d %d %lld\n", me, tl_mode_name(c->mode), c->host, c->index, c->total,
           c->num_replicas, c->first_replica, (long long)c->batch_size);
    tl_dataset *ds = NULL, *sk = NULL, *rep = NULL;
    tl_status st = tl_dataset_labeled(&data, &ds);
    if (st == TL_OK)
        st = tl_dataset_skip(ds, 97 * (int64_t)c->index, &sk);
    ds = NULL;
    /* Prediction reads 150 examples once (a short last batch). */
    if (st == TL_OK)
        st = c->mode == TL_MODE_PREDICT ? tl_dataset_take(sk, 150, &rep) : tl_dataset_repeat(sk, -1, &rep);
    sk = NULL;
    if (st == TL_OK)
        st = tl_dataset_batch(rep, c->batch_size, c->mode != TL_MODE_PREDICT, out);
    return st;
}

static int fail(const char *what)
{
    printf("host %d: error %s: %s\n", me, what, tl_last_error());
    fflush(stdout);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_comm_destroy(hosts);
    free(data.features);
    free(data.labels);
    return 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 4) {
        fprintf(stderr, "usage: estimator_check MODE DEVICES H [mpi]\n");
        return 2;
    }
    /* SLICED: PER_HOST_V1 training, SLICED evaluation. */
    const char *mode = argv[1];
    bool sliced = strcmp(mode, "SLICED") == 0;
    int devices = atoi(argv[2]), H = atoi(argv[3]);
    if (argc > 4 && strcmp(argv[4], "mpi") == 0) {
        if (tl_comm_create_mpi(NULL, 1, &hosts) != TL_OK)
            return fail("tl_comm_create_mpi");
        me = tl_comm_process(hosts);
    }
    float *x = malloc(sizeof(float) * N * D);
    int32_t *y = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++) {
        float s = 0;
        for (int k = 0; k < D; k++) {
            x[i * D + k] = (float)((i * 7919 + k * 104729) % 1000) / 500.0f - 1.0f;
            s += x[i * D + k] * (float)(k + 1);
        }
        y[i] = s > 0;
    }
    data = (tl_labeled_data){N, D, 2, 1, {D}, x, y, NULL, 0};
    char json[2048];
    snprintf(json, sizeof json,
             "{\"train_batch_size\": 64, \"train_steps\": 24, \"eval_batch_size\": 32, \"eval_steps\": 4,"
             " \"predict_batch_size\": 32, \"tf_random_seed\": 11,"
             " \"devices\": %d, \"num_hosts\": %d, \"tpu_config\": {\"iterations_per_loop\": 8,"
             " \"per_host_input_for_training\": \"%s\", \"eval_training_input_configuration\": \"%s\"},"
             " \"model\": {\"model_name\": \"mlp\", \"hidden_units\": [8], \"learning_rate\": 0.05}}",
             devices, H, sliced ? "PER_HOST_V1" : mode, sliced ? "SLICED" : "PER_HOST_V1");
    if (tl_config_create(&cfg) != TL_OK || tl_config_load_json(cfg, json, strlen(json), "check") != TL_OK ||
        tl_config_resolve(cfg) != TL_OK)
        return fail("config");
    const tl_run_config *rc = tl_config_get(cfg);
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = tl_model_mlp;
    o.user = (void *)&rc->model;
    o.optimizer.lr.learning_rate = 0.05;
    o.hosts = hosts;
    if (tl_estimator_create(cfg, &o, &est) != TL_OK)
        return fail("create");
    tl_input in = {.input_fn = input_fn};
    tl_train_result tr;
    if (tl_estimator_train_input(est, &in, &tr) != TL_OK)
        return fail("train");
    char hex[65];
    if (tl_estimator_params_digest(est, hex) != TL_OK)
        return fail("digest");
    tl_eval_result er;
    tl_status st = tl_estimator_evaluate_input(est, &in, &er);
    if (st != TL_OK)
        printf("host %d: evaluate %s\n", me, tl_last_error());
    printf("host %d: digest %s %.9g %.9g\n", me, hex, tr.loss, st == TL_OK ? er.loss : -1.0);
    /* Prediction: every example once, in input order (its checksum). */
    tl_predict_result pr;
    if ((st = tl_estimator_predict_input(est, &in, &pr)) == TL_OK) {
        double sum = 0;
        for (int64_t i = 0; i < pr.num_examples * pr.width; i++)
            sum += (double)pr.values[i] * (double)(i % 7 + 1);
        printf("host %d: predict %lld %.9g\n", me, (long long)pr.num_examples, sum);
        tl_predict_result_free(&pr);
    } else {
        printf("host %d: predict %s\n", me, tl_last_error());
    }
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_comm_destroy(hosts);
    free(x);
    free(y);
    return 0;
}

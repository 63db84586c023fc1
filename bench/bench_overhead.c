/* bench_overhead.c — the host's cost per training step: a tiny MLP 10-10-2
 * (ReLU, SGD 0.01, batch 1, one device) on synthetic data, where the step's
 * arithmetic is a few hundred flops and the time is nearly all overhead, at
 * iterations_per_loop 1 (the host wakes the worker, waits for it and runs the
 * loop-boundary work — NaN check, logging schedule — after every step) and
 * 1000 (the worker runs 1000 steps without returning). The difference is what
 * one host round trip costs. PyTorch's peer is shared/bench/torch_overhead.py
 * (a 10-10-1 regression at batch 1, SGD): there every step is a host step.
 *
 * Each figure is the wall time of a tl_estimator_train call of STEPS steps
 * divided by STEPS, the median of REPS calls after one warm-up call on the
 * same estimator. Prints one JSON line per iterations_per_loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpuloop/tpuloop.h"
#include "util/bench_util.h"

enum { REPS = 5, STEPS = 20000 };

static const char config_json[] =
    "{\"train_batch_size\": 1, \"tf_random_seed\": 1, \"devices\": 1, \"log_step_count_steps\": 100,"
    " \"params\": {\"num_classes\": 2},"
    " \"model\": {\"model_name\": \"mlp\", \"hidden_units\": [10], \"activation\": \"relu\","
    " \"optimizer\": \"sgd\", \"learning_rate\": 0.01}}";

/* Microseconds per step at iterations_per_loop ipl, in run order, in us[REPS]. */
static tl_status measure(const tl_labeled_data *data, int ipl, double us[REPS])
{
    tl_config *cfg = NULL;
    tl_estimator *est = NULL;
    char text[32];
    tl_status st = tl_config_create(&cfg);
    if (st == TL_OK)
        st = tl_config_load_json(cfg, config_json, sizeof config_json - 1, "bench_overhead.json");
    snprintf(text, sizeof text, "%d", ipl);
    if (st == TL_OK)
        st = tl_config_set(cfg, "iterations_per_loop", text, TL_SOURCE_FLAG);
    snprintf(text, sizeof text, "%d", STEPS);
    if (st == TL_OK)
        st = tl_config_set(cfg, "train_steps", text, TL_SOURCE_FLAG);
    if (st == TL_OK)
        st = tl_config_resolve(cfg);
    if (st == TL_OK) {
        tl_estimator_options o;
        tl_estimator_options_init(&o);
        o.model_fn = tl_model_mlp;
        o.user = (void *)&tl_config_get(cfg)->model;
        tl_optimizer_config_default(TL_OPTIM_SGD, &o.optimizer);
        o.optimizer.lr.learning_rate = 0.01;
        o.on_log = bench_quiet_log;
        st = tl_estimator_create(cfg, &o, &est);
    }
    tl_train_result tr;
    if (st == TL_OK)
        st = tl_estimator_train(est, data, &tr); /* warm-up: traces, compiles, starts the worker */
    for (int r = 0; r < REPS && st == TL_OK; r++) {
        double t0 = bench_now();
        st = tl_estimator_train(est, data, &tr);
        us[r] = (bench_now() - t0) / STEPS * 1e6;
    }
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    return st;
}

int main(void)
{
    tl_set_log_level(TL_LOG_ERROR);
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = 1 << 16;
    s.num_features = 10;
    s.num_classes = 2;
    s.seed = 1;
    tl_labeled_data *data;
    if (tl_synthetic_load(&s, &data) != TL_OK) {
        fprintf(stderr, "bench_overhead: %s\n", tl_last_error());
        return 1;
    }
    static const int ipls[] = {1, 1000};
    double med[2];
    for (int i = 0; i < 2; i++) {
        double us[REPS];
        if (measure(data, ipls[i], us) != TL_OK) {
            fprintf(stderr, "bench_overhead: iterations_per_loop=%d: %s\n", ipls[i], tl_last_error());
            tl_labeled_data_destroy(data);
            return 1;
        }
        printf("{\"bench\": \"tpuloop_overhead\", \"what\": \"train_step\", \"model\": \"10-10-2\", \"batch\": 1, "
               "\"devices\": 1, \"opt\": \"sgd\", \"iterations_per_loop\": %d, \"steps_per_rep\": %d, "
               "\"unit\": \"us/step\", \"reps\": [",
               ipls[i], STEPS);
        for (int r = 0; r < REPS; r++)
            printf("%s%.3f", r ? ", " : "", us[r]);
        (void)bench_median(us, REPS); /* sorted: [0] min, [REPS-1] max */
        med[i] = us[REPS / 2];
        printf("], \"median\": %.3f, \"min\": %.3f, \"max\": %.3f}\n", us[REPS / 2], us[0], us[REPS - 1]);
        fflush(stdout);
    }
    printf("{\"bench\": \"tpuloop_overhead\", \"what\": \"host_round_trip\", \"unit\": \"us/step\", "
           "\"ipl1_minus_ipl1000\": %.3f}\n",
           med[0] - med[1]);
    tl_labeled_data_destroy(data);
    return 0;
}

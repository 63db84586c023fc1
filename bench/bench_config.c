/* bench_config.c — what `tpuloop config` costs: resolving a configuration
 * from a JSON file's text and flags, building a 4-host x 8-device topology and
 * the train and eval input plans. There is no peer to compare with (TensorFlow
 * is not installed here), so this reports tpuloop's own figure: the time a
 * training job spends before its first step on configuration. Prints one JSON
 * line with the median of 7 repetitions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpuloop/tpuloop.h"
#include "util/bench_util.h"

static const char config_json[] =
    "{\"model_dir\": \"/tmp/m\", \"train_batch_size\": 1024, \"eval_batch_size\": 512,"
    " \"save_checkpoints_steps\": 1000,"
    " \"tpu_config\": {\"iterations_per_loop\": \"1h\", \"num_cores_per_replica\": 2,"
    " \"per_host_input_for_training\": \"PER_HOST_V2\", \"input_partition_dims\": [[1, 2, 1, 1], null]}}";

static char *const flags[] = {"--devices=8", "--num_hosts=4", "--tf_random_seed=7"};

/* One full resolution; returns 0 on success. */
static int once(void)
{
    tl_config *cfg;
    tl_topology *topo = NULL;
    int rc = 1;
    if (tl_config_create(&cfg) != TL_OK)
        return 1;
    if (tl_config_load_json(cfg, config_json, sizeof config_json - 1, "bench.json") != TL_OK ||
        tl_config_apply_args(cfg, 3, flags, NULL, NULL) != TL_OK || tl_config_resolve(cfg) != TL_OK ||
        tl_topology_create(tl_config_get(cfg), NULL, &topo) != TL_OK)
        goto out;
    for (int m = TL_MODE_TRAIN; m <= TL_MODE_EVAL; m++) { /* predict needs one host */
        tl_input_plan *p;
        if (tl_input_plan_create(topo, tl_config_get(cfg), (tl_mode)m, &p) != TL_OK)
            goto out;
        tl_input_plan_destroy(p);
    }
    rc = 0;
out:
    tl_topology_destroy(topo);
    tl_config_destroy(cfg);
    return rc;
}

int main(void)
{
    tl_set_log_level(TL_LOG_ERROR);
    if (once() != 0) {
        fprintf(stderr, "bench_config: %s\n", tl_last_error());
        return 1;
    }
    enum { REPS = 7 };
    double per_op[REPS];
    for (int r = 0; r < REPS; r++) {
        long iters = 0;
        double t0 = bench_now(), t;
        do {
            for (int i = 0; i < 200; i++)
                if (once() != 0)
                    return 1;
            iters += 200;
            t = bench_now();
        } while (t - t0 < 0.2);
        per_op[r] = (t - t0) / (double)iters;
    }
    (void)bench_median(per_op, REPS); /* sorted: [0] min, [REPS-1] max */
    printf("{\"bench\": \"config_resolve_topology_plans\", \"devices\": 32, \"median_us\": %.2f, "
           "\"per_second\": %.0f, \"peer\": null}\n",
           per_op[REPS / 2] * 1e6, 1.0 / per_op[REPS / 2]);
    return 0;
}

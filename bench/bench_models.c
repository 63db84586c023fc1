/* bench_models.c — tpuloop's training speed on the mlp, cnn and transformer
 * built-in models, the figures bench/peers' PyTorch 2.x, JAX and Keras
 * programs are held against (bench/run_peers.sh alternates them round by
 * round):
 *
 *   mlp          the main job's MLP 784-256-256-10 (ReLU, Adam 1e-3), global
 *                batch 128 at any device count, Fashion-MNIST's training
 *                split, 468 steps (one epoch, as bench/peers/mlp_*.py time)
 *                per call: examples/s, "tpuloop_mlp_rounds" lines (bench_mlp
 *                measures the same apart, with its TFRecord runs);
 *   cnn          the small ResNet of configs/cnn_fashion_mnist.json (filters
 *                16, 32, 64; Adam 1e-3), batch 128 per device, Fashion-MNIST's
 *                training split: examples/s, "tpuloop_cnn" lines;
 *   transformer  2 post-LN layers, d_model 128, 4 heads, d_ff 512, on
 *                synthetic_sequences of 64 tokens from a vocabulary of 64,
 *                global batch 32 at any device count (as the PyTorch peer):
 *                ms per training step, "tpuloop_transformer" lines.
 *
 *     bench_models                                  a note: make bench runs it from run_peers.sh
 *     bench_models MODEL DEVICES [STEPS REPS WARMUP_CALLS]   one figure (rounds_models.sh)
 *
 * Each figure runs in its own child process (its peak RSS its own): WARMUP
 * untimed calls of tl_estimator_train (the first also traces, compiles and
 * starts the workers), then REPS timed calls, each of STEPS steps
 * (train_steps, counted from the call's start as TPUEstimator.train(steps))
 * on the same estimator; iterations_per_loop is STEPS, so a call is one
 * device loop. Prints one JSON line with the median,
 * min and max over the repetitions. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tpuloop/tpuloop.h"
#include "util/bench_util.h"

enum { MAX_REPS = 64 };

typedef struct bench_model {
    const char *name;    /* mlp, cnn, transformer */
    const char *line;    /* the JSON lines' "bench" */
    const char *config;  /* the configuration, less devices, steps and batch */
    int batch_per_device;/* 0: a fixed global batch */
    int global_batch;
    bool per_example;    /* examples/s, else ms/step */
    int steps, reps, warmup; /* warmup: untimed calls of steps */
} bench_model;

static const bench_model models[] = {
    {"mlp", "tpuloop_mlp_rounds",
     "{\"tf_random_seed\": 42, \"log_step_count_steps\": 1000000,"
     " \"model\": {\"model_name\": \"mlp\", \"hidden_units\": [256, 256], \"activation\": \"relu\","
     " \"optimizer\": \"adam\", \"learning_rate\": 0.001}}",
     0, 128, true, 468, 5, 1},
    {"cnn", "tpuloop_cnn",
     "{\"tf_random_seed\": 42, \"log_step_count_steps\": 1000000,"
     " \"params\": {\"filters\": [16, 32, 64], \"batch_norm_momentum\": 0.99},"
     " \"model\": {\"model_name\": \"cnn\", \"optimizer\": \"adam\", \"learning_rate\": 0.001}}",
     128, 0, true, 30, 5, 1},
    {"transformer", "tpuloop_transformer",
     "{\"tf_random_seed\": 42, \"log_step_count_steps\": 1000000,"
     " \"params\": {\"d_model\": 128, \"num_heads\": 4, \"num_layers\": 2, \"d_ff\": 512},"
     " \"model\": {\"model_name\": \"transformer\", \"optimizer\": \"adam\", \"learning_rate\": 0.001},"
     " \"input\": {\"dataset\": \"synthetic_sequences\", \"synthetic_sequence_length\": 64,"
     " \"synthetic_vocab\": 64, \"synthetic_examples\": 8192}}",
     0, 32, false, 50, 5, 1},
};

static tl_status set_int(tl_config *cfg, const char *key, long long v)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", v);
    return tl_config_set(cfg, key, text, TL_SOURCE_FLAG);
}

/* The training data: Fashion-MNIST's training split (synthetic images of
 * its shape where the package is missing, said on stderr), or the job's
 * synthetic_sequences. */
static tl_status load(const bench_model *m, const tl_config *cfg, tl_labeled_data **out, const char **dataset)
{
    if (strcmp(m->name, "transformer") != 0) {
        *dataset = "fashion_mnist";
        tl_status st = tl_mnist_load(NULL, "train", out);
        if (st != TL_EIO)
            return st;
        fprintf(stderr, "bench_models: %s; timing synthetic data shaped like Fashion-MNIST\n", tl_last_error());
        *dataset = "synthetic_60000x28x28";
        tl_synthetic_spec s;
        tl_synthetic_spec_init(&s);
        s.num_examples = 60000;
        s.num_features = 784;
        s.num_classes = 10;
        if ((st = tl_synthetic_load(&s, out)) == TL_OK) {
            (*out)->feature_rank = 2;
            (*out)->feature_shape[0] = (*out)->feature_shape[1] = 28;
        }
        return st;
    }
    *dataset = "synthetic_sequences_64x64";
    const tl_run_config *r = tl_config_get(cfg);
    tl_synthetic_sequences_spec s;
    tl_synthetic_sequences_spec_init(&s);
    s.num_examples = r->input.synthetic_examples.value;
    s.sequence_length = r->input.synthetic_sequence_length.value;
    s.vocab_size = r->input.synthetic_vocab.value;
    s.seed = 42;
    return tl_synthetic_sequences_load(&s, out);
}

/* One figure, in the child; returns the exit status. */
static int run(const bench_model *m, int devices, int threads, int steps, int reps, int warmup)
{
    tl_config *cfg = NULL;
    tl_estimator *est = NULL;
    tl_labeled_data *data = NULL;
    const char *dataset = "";
    int64_t batch = m->batch_per_device > 0 ? (int64_t)m->batch_per_device * devices : m->global_batch;
    double secs[MAX_REPS];
    tl_status st = tl_config_create(&cfg);
    if (st == TL_OK)
        st = tl_config_load_json(cfg, m->config, strlen(m->config), "bench_models.json");
    if (st == TL_OK)
        st = set_int(cfg, "devices", devices);
    if (st == TL_OK)
        st = set_int(cfg, "intra_op_parallelism_threads", threads);
    if (st == TL_OK)
        st = set_int(cfg, "train_batch_size", batch);
    if (st == TL_OK)
        st = set_int(cfg, "iterations_per_loop", steps);
    if (st == TL_OK)
        st = set_int(cfg, "train_steps", steps);
    if (st == TL_OK)
        st = tl_config_resolve(cfg);
    if (st == TL_OK)
        st = load(m, cfg, &data, &dataset);
    tl_transformer_data td = {.vocab_size = 64};
    if (st == TL_OK) {
        tl_estimator_options o;
        tl_estimator_options_init(&o);
        if (strcmp(m->name, "mlp") == 0) {
            o.model_fn = tl_model_mlp;
            o.user = (void *)&tl_config_get(cfg)->model;
        } else if (strcmp(m->name, "cnn") == 0) {
            o.model_fn = tl_model_cnn;
        } else {
            o.model_fn = tl_model_transformer;
            o.user = &td;
        }
        tl_optimizer_config_default(TL_OPTIM_ADAM, &o.optimizer);
        o.optimizer.lr.learning_rate = 1e-3;
        o.on_log = bench_quiet_log;
        st = tl_estimator_create(cfg, &o, &est);
    }
    tl_train_result tr = {0};
    for (int w = 0; w < warmup && st == TL_OK; w++)
        st = tl_estimator_train(est, data, &tr);
    for (int r = 0; r < reps && st == TL_OK; r++) {
        double t0 = bench_now();
        st = tl_estimator_train(est, data, &tr);
        secs[r] = bench_now() - t0;
    }
    if (st != TL_OK) {
        fprintf(stderr, "bench_models: %s at %d devices x %d threads: %s\n", m->name, devices, threads,
                tl_last_error());
        tl_estimator_destroy(est);
        tl_labeled_data_destroy(data);
        tl_config_destroy(cfg);
        return 1;
    }
    double v[MAX_REPS];
    bool per_example = m->per_example;
    for (int r = 0; r < reps; r++)
        v[r] = per_example ? (double)batch * steps / secs[r] : 1e3 * secs[r] / steps;
    double med = bench_median(v, (size_t)reps); /* sorted: v[0] min, v[reps - 1] max */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"bench\": \"%s\", \"model\": \"%s\", \"dataset\": \"%s\", \"devices\": %d, \"intra_op_threads\": %d, "
           "\"threads\": %d, \"layout\": \"%dx%d\", "
           "\"batch\": %lld, \"steps_per_rep\": %d, \"warmup_calls\": %d, \"reps\": %d, \"median\": %.2f, "
           "\"min\": %.2f, \"max\": %.2f, \"unit\": \"%s\", \"last_loss\": %.4f, \"maxrss_mib\": %.1f}\n",
           m->line, m->name, dataset, devices, threads, devices * threads, devices, threads, (long long)batch,
           steps, warmup, reps, med, v[0], v[reps - 1], per_example ? "examples/s" : "ms/step", tr.loss,
           (double)ru.ru_maxrss / 1024.0);
    fflush(stdout);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(data);
    tl_config_destroy(cfg);
    return 0;
}

static int in_child(const bench_model *m, int devices, int threads, int steps, int reps, int warmup)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0)
        _exit(run(m, devices, threads, steps, reps, warmup));
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return 1;
    return WEXITSTATUS(status);
}

static int arg(const char *s, int lo, int hi, const char *what)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "bench_models: %s must be an int in [%d, %d], got '%s'\n", what, lo, hi, s);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    if (argc == 1) { /* make bench's loop: the figures come in alternating rounds with the peers */
        printf("{\"bench\": \"tpuloop_models\", \"note\": \"mlp, cnn and transformer figures come from "
               "bench/run_peers.sh, in rounds alternating with the peers\"}\n");
        return 0;
    }
    const bench_model *m = NULL;
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++)
        if (strcmp(argv[1], models[k].name) == 0)
            m = &models[k];
    if (m == NULL || argc < 3 || argc > 6) {
        fprintf(stderr, "usage: bench_models [mlp|cnn|transformer DEVICES[xTHREADS] [STEPS REPS WARMUP_CALLS]]\n"
                        "  DEVICESxTHREADS: replicas of DEVICES devices, each on THREADS intra-op threads (1x2)\n");
        return 2;
    }
    char layout[32];
    snprintf(layout, sizeof layout, "%s", argv[2]);
    char *x = strchr(layout, 'x');
    if (x != NULL)
        *x = '\0';
    int devices = arg(layout, 1, 64, "DEVICES");
    int threads = x != NULL ? arg(x + 1, 1, 64, "THREADS") : 1;
    int steps = argc > 3 ? arg(argv[3], 1, 1000000, "STEPS") : m->steps;
    int reps = argc > 4 ? arg(argv[4], 1, MAX_REPS, "REPS") : m->reps;
    int warmup = argc > 5 ? arg(argv[5], 0, 1000, "WARMUP_CALLS") : m->warmup;
    return in_child(m, devices, threads, steps, reps, warmup);
}

/* bench_mlp.c — tpuloop's training throughput on the main job: the MLP
 * 784-256-256-10 (ReLU, Adam 1e-3, global batch 128, iterations_per_loop 100)
 * on Fashion-MNIST, at 1 and at 2 devices, through the public API the way
 * `tpuloop train` wires it (src/cli/train.c).
 *
 * Each device count runs in its own child process, so that its peak resident
 * memory (ru_maxrss, data included) is its own and the two runs share no warm
 * caches or threads. In a child: one warm-up epoch (468 steps, which also
 * traces, compiles and starts the workers), then REPS timed epochs on the same
 * estimator; one epoch is what PyTorch's peer (shared/bench/torch_mlp.py)
 * times per repetition, shuffle and batch gather included on both sides.
 * Prints one JSON line per device count with the median of the repetitions.
 * Falls back to synthetic data shaped like Fashion-MNIST, and says so, where
 * the dataset package is missing.
 *
 * Three more runs train the same model from a TFRecord file of tf.Example
 * ("image" float_list 784, "label" int64) holding the training split,
 * through the input pipeline a TensorFlow user would write, via
 * tl_estimator_train_input, and report the replicas' infeed wait beside the
 * throughput: the pipeline keeps up when the wait is a small fraction of the
 * run and the throughput matches the in-memory run's. The wait for a call's
 * first batch (the shuffle buffer filling) is reported apart. At 1 and 2
 * devices the pipeline is that of TensorFlow's TPU reference models — read,
 * repeat, parse (2 threads), shuffle (buffer 10000), batch, prefetch(4) — and
 * at 1 device once more with shuffle before repeat ("shuffle_each_epoch"),
 * which refills the buffer at every epoch, in TensorFlow as here: its wait
 * is that refill, which no prefetch of 4 batches can hide.
 *
 * A last line gives the ceiling that GEMM alone sets at one thread: the
 * eight single-precision GEMMs of one training step (three forward, three
 * weight gradients, two input gradients; the first layer's input needs
 * none), called straight on OpenBLAS with the step's shapes, as examples/s.
 * No step can beat it without doing less arithmetic, so it tells how much
 * of a step is GEMM and how much everything else. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "io/tfrecord.h"
#include "tpuloop/dataset.h"
#include "tpuloop/tpuloop.h"
#include "util/bench_util.h"

enum { REPS = 5, STEPS = 468 }; /* 468 = 60000 / 128: one epoch, drop_remainder */
enum { EPOCHS_TF = 3 };          /* epochs per TFRecord rep */

static const char config_json[] =
    "{\"train_batch_size\": 128, \"tf_random_seed\": 42, \"log_step_count_steps\": 100,"
    " \"tpu_config\": {\"iterations_per_loop\": 100},"
    " \"model\": {\"model_name\": \"mlp\", \"hidden_units\": [256, 256], \"activation\": \"relu\","
    " \"optimizer\": \"adam\", \"learning_rate\": 0.001}}";

/* Loads the training split, and the test split too when as_cli, as `tpuloop
 * train` does. Loading the test split frees a buffer of a few MiB, which
 * raises glibc's dynamic mmap threshold and changes where the estimator's
 * arrays land. The estimator now staggers its parameter and slot arrays
 * itself (a page-aligned layout cost 4K aliasing: the Adam update took twice
 * as long); the no-test-split run keeps that case in view so a regression
 * shows. */
static tl_status load(bool as_cli, tl_labeled_data **train, tl_labeled_data **test, const char **name)
{
    *name = "fashion_mnist";
    *test = NULL;
    tl_status st = tl_mnist_load(NULL, "train", train);
    if (st == TL_OK && as_cli)
        st = tl_mnist_load(NULL, "test", test);
    if (st != TL_EIO)
        return st;
    tl_labeled_data_destroy(*train);
    *train = NULL;
    fprintf(stderr, "bench_mlp: %s; timing synthetic data shaped like Fashion-MNIST\n", tl_last_error());
    *name = "synthetic_60000x784";
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = 60000;
    s.num_features = 784;
    s.num_classes = 10;
    return tl_synthetic_load(&s, train);
}

/* The training split as TFRecord of tf.Example, written once by the parent. */
static char tfrecord_path[256];

static tl_status write_tfrecord(const tl_labeled_data *d, const char *path)
{
    tl_tfrecord_writer *w = NULL;
    tl_example_builder *b = NULL;
    tl_status st = tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w);
    if (st == TL_OK)
        st = tl_example_builder_create(&b);
    for (int64_t i = 0; i < d->num_examples && st == TL_OK; i++) {
        int64_t label = d->labels[i];
        const uint8_t *data;
        size_t len;
        tl_example_builder_reset(b);
        st = tl_example_builder_add_floats(b, "image", d->features + i * d->num_features, (size_t)d->num_features);
        if (st == TL_OK)
            st = tl_example_builder_add_int64s(b, "label", &label, 1);
        if (st == TL_OK)
            st = tl_example_builder_serialize(b, &data, &len);
        if (st == TL_OK)
            st = tl_tfrecord_write(w, data, len);
    }
    tl_example_builder_destroy(b);
    tl_status cst = tl_tfrecord_writer_destroy(w);
    return st != TL_OK ? st : cst;
}

/* What a TPUEstimator user's input_fn does with such a file; *user is true
 * for shuffle before repeat. */
static tl_status tfrecord_input_fn(const tl_input_context *ctx, void *user, tl_dataset **out)
{
    bool each_epoch = *(const bool *)user;
    const char *files[] = {tfrecord_path};
    static const tl_feature_spec specs[2] = {
        {.key = "image", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_FLOAT, .rank = 1, .shape = {784}},
        {.key = "label", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_INT64, .rank = 0},
    };
    tl_parse_options po = {.num_parallel_calls = 2};
    tl_dataset *ds;
    tl_status st = tl_dataset_tfrecord(files, 1, NULL, &ds);
    if (st == TL_OK)
        st = tl_dataset_shard(ds, ctx->total, ctx->index, &ds);
    if (st == TL_OK && !each_epoch)
        st = tl_dataset_repeat(ds, -1, &ds);
    if (st == TL_OK)
        st = tl_dataset_parse_example(ds, specs, 2, &po, &ds);
    if (st == TL_OK)
        st = tl_dataset_shuffle(ds, 10000, 42, true, &ds);
    if (st == TL_OK && each_epoch)
        st = tl_dataset_repeat(ds, -1, &ds);
    if (st == TL_OK)
        st = tl_dataset_batch(ds, ctx->batch_size, true, &ds);
    if (st == TL_OK)
        st = tl_dataset_prefetch(ds, 4, &ds);
    *out = st == TL_OK ? ds : NULL;
    return st;
}

/* One device count, in the child; returns the exit status. */
static int run(int devices, bool as_cli, bool from_tfrecord, bool each_epoch)
{
    tl_config *cfg = NULL;
    tl_estimator *est = NULL;
    tl_labeled_data *train = NULL, *test = NULL;
    const char *dataset;
    char text[32];
    int rc = 1;
    snprintf(text, sizeof text, "%d", devices);
    tl_status st = tl_config_create(&cfg);
    if (st == TL_OK)
        st = tl_config_load_json(cfg, config_json, sizeof config_json - 1, "bench_mlp.json");
    if (st == TL_OK)
        st = tl_config_set(cfg, "devices", text, TL_SOURCE_FLAG);
    int64_t steps = from_tfrecord ? (int64_t)STEPS * EPOCHS_TF : STEPS;
    snprintf(text, sizeof text, "%lld", (long long)steps);
    if (st == TL_OK)
        st = tl_config_set(cfg, "train_steps", text, TL_SOURCE_FLAG);
    if (st == TL_OK)
        st = tl_config_resolve(cfg);
    if (st == TL_OK)
        st = load(as_cli, &train, &test, &dataset);
    if (st == TL_OK) {
        tl_estimator_options o;
        tl_estimator_options_init(&o);
        o.model_fn = tl_model_mlp;
        o.user = (void *)&tl_config_get(cfg)->model;
        tl_optimizer_config_default(TL_OPTIM_ADAM, &o.optimizer);
        o.optimizer.lr.learning_rate = 1e-3;
        o.on_log = bench_quiet_log;
        st = tl_estimator_create(cfg, &o, &est);
    }
    tl_train_result tr;
    tl_input in = {.input_fn = tfrecord_input_fn, .user = &each_epoch,
                   .feature_keys = (const char *const[]){"image"}, .num_feature_keys = 1};
    if (st == TL_OK) /* warm-up: the first call traces, compiles and starts the workers */
        st = from_tfrecord ? tl_estimator_train_input(est, &in, &tr) : tl_estimator_train(est, train, &tr);
    double eps[REPS], own[REPS], wait[REPS], start[REPS], loss = 0;
    /* A TFRecord rep is one train() of EPOCHS_TF epochs: every call runs
     * input_fn afresh and fills the 10000-example shuffle buffer before its
     * first batch, as TensorFlow does, and a user trains far longer than
     * one epoch per call. */
    for (int r = 0; r < REPS && st == TL_OK; r++) {
        double t0 = bench_now();
        st = from_tfrecord ? tl_estimator_train_input(est, &in, &tr) : tl_estimator_train(est, train, &tr);
        double s = bench_now() - t0;
        eps[r] = (double)steps * 128.0 / s;
        own[r] = tr.examples_per_sec;
        wait[r] = tr.infeed_wait_seconds / s;
        start[r] = tr.infeed_start_seconds / s;
        loss = tr.loss;
    }
    if (st != TL_OK) {
        fprintf(stderr, "bench_mlp: devices=%d: %s\n", devices, tl_last_error());
        goto out;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"bench\": \"%s\", \"model\": \"784-256-256-10\", \"opt\": \"adam\", \"batch\": 128, "
           "\"devices\": %d, \"iterations_per_loop\": 100, \"dataset\": \"%s\", \"test_split_loaded\": %s, "
           "\"steps_per_rep\": %d, \"warmup_steps\": %d, \"reps\": [",
           from_tfrecord ? "tpuloop_mlp_tfrecord" : "tpuloop_mlp", devices, dataset, as_cli ? "true" : "false",
           (int)steps, (int)steps);
    for (int r = 0; r < REPS; r++)
        printf("%s%.1f", r ? ", " : "", eps[r]);
    printf("], ");
    (void)bench_median(eps, REPS); /* sorted: [0] min, [REPS-1] max */
    (void)bench_median(own, REPS); /* sorted: [0] min, [REPS-1] max */
    (void)bench_median(wait, REPS);
    (void)bench_median(start, REPS);
    /* The replicas' mean wait as a fraction of the rep: for the first batch
     * of the call (opening the file, filling the 10000-example shuffle
     * buffer) and for every later batch (the pipeline falling behind). */
    if (from_tfrecord)
        printf("\"pipeline\": \"%s\", \"infeed_start_fraction_median\": %.4f, \"infeed_wait_fraction_median\": %.4f, "
               "\"infeed_wait_fraction_max\": %.4f, ",
               each_epoch ? "shuffle_each_epoch" : "repeat_then_shuffle", start[REPS / 2], wait[REPS / 2],
               wait[REPS - 1]);
    printf("\"median\": %.1f, \"min\": %.1f, \"max\": %.1f, \"unit\": \"examples/s\", "
           "\"median_train_result_examples_per_sec\": %.1f, \"global_step\": %lld, \"last_loss\": %.4f, "
           "\"maxrss_mib\": %.1f}\n",
           eps[REPS / 2], eps[0], eps[REPS - 1], own[REPS / 2], (long long)tr.global_step, loss,
           (double)ru.ru_maxrss / 1024.0);
    rc = 0;
out:
    fflush(stdout);
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(train);
    tl_labeled_data_destroy(test);
    tl_config_destroy(cfg);
    return rc;
}

/* The GEMM-only ceiling of one training step at batch 128, one thread. */
static void gemm_floor(void)
{
    enum { B = 128, REPEAT = 400 };
    static const int dims[4] = {784, 256, 256, 10};
    /* Separate outputs, so that the inputs keep their small values (a
     * gradient written over a weight would grow into denormals and slow the
     * GEMMs for the wrong reason). */
    size_t most = (size_t)784 * 256;
    float *buf = calloc(5 * most, sizeof *buf);
    if (buf == NULL) {
        fprintf(stderr, "bench_mlp: out of memory\n");
        return;
    }
    float *x = buf, *w = buf + most, *y = buf + 2 * most, *dw = buf + 3 * most, *dx = buf + 4 * most;
    for (size_t i = 0; i < most; i++) {
        x[i] = (float)(i % 17) * 0.01f;
        w[i] = (float)(i % 13) * 0.01f - 0.06f;
        y[i] = (float)(i % 11) * 0.01f - 0.05f;
    }
    double t[5];
    for (int rep = 0; rep < 5; rep++) {
        double t0 = bench_now();
        for (int it = 0; it < REPEAT; it++)
            for (int l = 0; l < 3; l++) {
                int in = dims[l], out = dims[l + 1];
                /* forward x·W, dW = xᵀ·dy, dx = dy·Wᵀ, row-major as the program calls them */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, out, in, 1.0f, x, in, w, out, 0.0f, dx, out);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, B, 1.0f, x, in, y, out, 0.0f, dw, out);
                if (l > 0)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, in, out, 1.0f, y, out, w, out, 0.0f, dx,
                                in);
            }
        t[rep] = (bench_now() - t0) / REPEAT;
    }
    double med = bench_median(t, 5);
    printf("{\"bench\": \"tpuloop_mlp\", \"what\": \"gemm_floor\", \"model\": \"784-256-256-10\", \"batch\": %d, "
           "\"threads\": 1, \"gemms_per_step\": 8, \"step_us\": %.1f, \"unit\": \"examples/s\", \"median\": %.1f}\n",
           B, med * 1e6, B / med);
    fflush(stdout);
    free(buf);
}

int main(void)
{
    tl_set_log_level(TL_LOG_ERROR);
    static const struct {
        int devices;
        bool as_cli, tfrecord, each_epoch;
    } runs[] = {{1, true, false, false}, {2, true, false, false}, {1, false, false, false},
                {1, true, true, false},  {2, true, true, false},  {1, true, true, true}};
    /* The TFRecord file of the training split, in a directory removed at the end. */
    char dir[] = "/tmp/tpuloop_bench_mlp_XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("bench_mlp: mkdtemp");
        return 1;
    }
    snprintf(tfrecord_path, sizeof tfrecord_path, "%s/train.tfrecord", dir);
    {
        tl_labeled_data *train = NULL, *test = NULL;
        const char *name;
        tl_status st = load(false, &train, &test, &name);
        if (st == TL_OK)
            st = write_tfrecord(train, tfrecord_path);
        tl_labeled_data_destroy(train);
        if (st != TL_OK) {
            fprintf(stderr, "bench_mlp: writing %s: %s\n", tfrecord_path, tl_last_error());
            unlink(tfrecord_path);
            rmdir(dir);
            return 1;
        }
    }
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("bench_mlp: fork");
            return 1;
        }
        if (pid == 0)
            _exit(run(runs[i].devices, runs[i].as_cli, runs[i].tfrecord, runs[i].each_epoch));
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_mlp: the run at %d device(s) failed\n", runs[i].devices);
            unlink(tfrecord_path);
            rmdir(dir);
            return 1;
        }
    }
    unlink(tfrecord_path);
    rmdir(dir);
    openblas_set_num_threads(1);
    gemm_floor();
    return 0;
}

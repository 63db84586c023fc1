/* bench_dlrm.c — tpuloop's training throughput on a DLRM, the workload of
 * PyTorch's peer (shared/bench/torch_dlrm.py, run by run_peers.sh in the
 * same `make bench`), through the public API only: the embedding engine
 * (tpuloop/embedding.h), the built-in tl_model_dlrm (tpuloop/models.h) and
 * the estimator (tpuloop/estimator.h) that drives both, as a TPUEstimator
 * user with TPUEmbedding would wire them.
 *
 * The model, as the peer's: 13 dense features into the bottom MLP
 * 13-512-256-64 (ReLU after each layer), 26 tables "C1".."C26" of 100,000 ×
 * 64 float32 with one id per example and the sum combiner, the dot
 * interaction of the 27 vectors (351 pairwise dots) beside the bottom MLP's
 * output, the top MLP 415-512-256-1 (ReLU but on the logit), the mean
 * sigmoid cross-entropy. Global batch 2048 (1024 per replica at 2 devices),
 * iterations_per_loop 10.
 *
 * Optimizers, as the peer's: "adagrad" — Adagrad lr 0.01 on the dense
 * variables (the estimator's optimizer) and on the tables (the engine's);
 * "sgd" — SGD lr 0.1 on both. Each keeps TensorFlow's defaults where
 * PyTorch's differ: Adagrad's accumulators start at 0.1 (PyTorch: 0, with
 * eps 1e-10), which changes no work. The tables start uniform in
 * [-1/8, 1/8) (PyTorch's EmbeddingBag: N(0, 1)), the dense kernels Glorot
 * uniform as tl_dense makes them (PyTorch's Linear: Kaiming uniform):
 * values change no work either.
 *
 * The data: 8 batches' worth (16,384 examples), as the peer's 8
 * pre-generated batches: per example 13 values log1p(exponential(10)) (the
 * features), then 26 ids uniform in [0, 100000) (int64, the data's ids, one
 * per table in feature order), and a label 1 with probability 0.25. Drawn from splitmix64, not
 * numpy's generator: same distributions, other values. The estimator draws
 * its batches from a permutation of the examples per epoch (the infeed
 * thread gathers the rows), where the peer cycles its batches in order.
 *
 * Each (optimizer, devices) runs in its own child process, so that its peak
 * resident memory (ru_maxrss: tables, slots, data and all) is its own: the
 * engine is created (init_s), then one warm-up train of STEPS steps (which
 * traces, compiles and starts the workers; the peer warms up 3 steps), then
 * REPS reps of one tl_estimator_train of STEPS steps each (train_steps is
 * relative: every call trains STEPS more on the same estimator), timed
 * around the call: examples/s = STEPS × 2048 / seconds, as the peer times
 * STEPS steps per rep. One JSON line per (optimizer, devices) with the
 * median of the reps, the median step_ms, the replicas' infeed wait as a
 * fraction of the rep, and maxrss_mib against tl_emb_table_bytes. Then,
 * where the 2-device runs ran, one line "what": "gemm_floor": the examples/s
 * that the step's dense GEMMs alone allow on these cores ("median"), and
 * with the least traffic of its table rows added ("gemm_and_rows_median";
 * step_floor below): ceilings no implementation of the step can pass.
 *
 * Runs in about a minute. */
#define _GNU_SOURCE /* pthread_setaffinity_np */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cblas.h>

#include "tpuloop/tpuloop.h"
#include "util/bench_util.h"

enum { TABLES = 26, ROWS = 100000, DIM = 64, DENSE = 13 };
enum { BATCH = 2048, NBATCH = 8, EXAMPLES = NBATCH * BATCH, REPS = 5, STEPS = 10 };

/* ---- data ------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s)
{
    return (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* features (EXAMPLES, DENSE): the dense values; ids (EXAMPLES, TABLES);
 * labels (EXAMPLES) 0/1. */
static bool make_data(tl_labeled_data *d)
{
    memset(d, 0, sizeof *d);
    d->features = malloc((size_t)EXAMPLES * DENSE * sizeof *d->features);
    d->ids = malloc((size_t)EXAMPLES * TABLES * sizeof *d->ids);
    d->labels = malloc((size_t)EXAMPLES * sizeof *d->labels);
    if (d->features == NULL || d->ids == NULL || d->labels == NULL)
        return false;
    d->num_examples = EXAMPLES;
    d->num_features = DENSE;
    d->num_ids = TABLES;
    d->num_classes = 2;
    d->feature_rank = 1;
    d->feature_shape[0] = DENSE;
    uint64_t seed = 20240601;
    for (int64_t i = 0; i < EXAMPLES; i++) {
        float *row = d->features + i * DENSE;
        for (int k = 0; k < DENSE; k++) /* exponential(scale 10) by inversion; 1 - u is in (0, 1] */
            row[k] = (float)log1p(-10.0 * log(1.0 - uniform01(&seed)));
        for (int t = 0; t < TABLES; t++)
            d->ids[i * TABLES + t] = (int64_t)(splitmix64(&seed) % ROWS);
        d->labels[i] = uniform01(&seed) < 0.25 ? 1 : 0;
    }
    return true;
}

/* ---- one (optimizer, devices), in the child ---------------------------------------- */

static tl_status make_config(int devices, tl_config **out)
{
    char dev[48], ipl[48], steps[48];
    snprintf(dev, sizeof dev, "--devices=%d", devices);
    snprintf(ipl, sizeof ipl, "--iterations_per_loop=%d", STEPS);
    snprintf(steps, sizeof steps, "--train_steps=%d", STEPS);
    char batch[] = "--train_batch_size=2048", seed[] = "--tf_random_seed=42";
    char *const argv[] = {dev, batch, ipl, steps, seed};
    tl_status st = tl_config_create(out);
    if (st == TL_OK)
        st = tl_config_apply_args(*out, (int)(sizeof argv / sizeof argv[0]), argv, NULL, NULL);
    if (st == TL_OK)
        st = tl_config_resolve(*out);
    return st;
}

static tl_status make_engine(bool adagrad, int devices, tl_emb_engine **out)
{
    static char names[TABLES][16];
    tl_emb_table_config tc[TABLES];
    tl_emb_feature_config fc[TABLES];
    for (int t = 0; t < TABLES; t++) {
        snprintf(names[t], sizeof names[t], "C%d", t + 1);
        /* Uniform in +-1/sqrt(dim): the default truncated normal takes
         * three times as long to fill these tables (about 10 s), untimed
         * but in the bench's run time, and values change no work. */
        tc[t] = (tl_emb_table_config){.name = names[t], .vocabulary_size = ROWS, .dim = DIM,
                                      .combiner = TL_EMB_COMBINER_SUM,
                                      .initializer = {.kind = TL_EMB_INIT_UNIFORM, .minval = -0.125, .maxval = 0.125}};
        fc[t] = (tl_emb_feature_config){.name = names[t], .table = t};
    }
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = tc;
    c.num_tables = TABLES;
    c.features = fc;
    c.num_features = TABLES;
    tl_emb_optimizer_default(adagrad ? TL_EMB_ADAGRAD : TL_EMB_SGD, &c.optimizer);
    c.optimizer.learning_rate = adagrad ? 0.01f : 0.1f;
    c.num_tensor_cores = devices; /* one per replica, as the estimator requires */
    c.batch_size_per_tensor_core = BATCH / devices;
    c.num_shards = 1;
    c.seed = 42;
    return tl_emb_engine_create(&c, out);
}

static int run(bool adagrad, int devices)
{
    const char *oname = adagrad ? "adagrad" : "sgd";
    tl_labeled_data data;
    tl_config *cfg = NULL;
    tl_emb_engine *eng = NULL;
    tl_estimator *est = NULL;
    int rc = 1;
    if (!make_data(&data)) {
        fprintf(stderr, "bench_dlrm: out of memory for the data\n");
        free(data.features);
        free(data.ids);
        free(data.labels);
        return 1;
    }
    tl_status st = make_config(devices, &cfg);
    double t0 = bench_now();
    if (st == TL_OK)
        st = make_engine(adagrad, devices, &eng);
    double init_s = bench_now() - t0;

    tl_dlrm_config dlrm = {.num_dense = DENSE, .num_bottom = 3, .bottom = {512, 256, DIM},
                           .num_top = 2, .top = {512, 256}, .num_features = TABLES};
    for (int f = 0; f < TABLES; f++)
        dlrm.dims[f] = DIM;
    if (st == TL_OK) {
        tl_estimator_options o;
        tl_estimator_options_init(&o);
        o.model_fn = tl_model_dlrm;
        o.user = &dlrm;
        tl_optimizer_config_default(adagrad ? TL_OPTIM_ADAGRAD : TL_OPTIM_SGD, &o.optimizer);
        o.optimizer.lr.learning_rate = adagrad ? 0.01 : 0.1;
        o.on_log = bench_quiet_log;
        o.embedding = eng;
        st = tl_estimator_create(cfg, &o, &est);
    }
    tl_train_result tr;
    t0 = bench_now();
    if (st == TL_OK) /* warm-up: the first call traces, compiles and starts the workers */
        st = tl_estimator_train(est, &data, &tr);
    double warm_s = bench_now() - t0;
    double eps[REPS], ms[REPS], wait[REPS], loss = 0;
    for (int r = 0; r < REPS && st == TL_OK; r++) {
        t0 = bench_now();
        st = tl_estimator_train(est, &data, &tr);
        double s = bench_now() - t0;
        eps[r] = (double)STEPS * BATCH / s;
        ms[r] = s * 1e3 / STEPS;
        wait[r] = tr.infeed_wait_seconds / s;
        loss = tr.loss;
    }
    if (st != TL_OK) {
        fprintf(stderr, "bench_dlrm: %s at %d device(s): %s\n", oname, devices, tl_last_error());
        goto out;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double maxrss = (double)ru.ru_maxrss / 1024.0;
    double table_mib = (double)tl_emb_table_bytes(eng) / 1048576.0;
    printf("{\"bench\": \"tpuloop_dlrm\", \"opt\": \"%s\", \"devices\": %d, \"batch\": %d, \"tables\": %d, "
           "\"rows\": %d, \"dim\": %d, \"bottom\": \"13-512-256-64\", \"top\": \"415-512-256-1\", "
           "\"iterations_per_loop\": %d, \"steps_per_rep\": %d, \"warmup_steps\": %d, \"warmup_s\": %.2f, "
           "\"init_s\": %.2f, \"reps\": [",
           oname, devices, BATCH, TABLES, ROWS, DIM, STEPS, STEPS, STEPS, warm_s, init_s);
    for (int r = 0; r < REPS; r++)
        printf("%s%.1f", r ? ", " : "", eps[r]);
    printf("], \"step_ms\": [");
    for (int r = 0; r < REPS; r++)
        printf("%s%.2f", r ? ", " : "", ms[r]);
    printf("], ");
    (void)bench_median(eps, REPS); /* sorted: [0] min, [REPS-1] max */
    (void)bench_median(ms, REPS);
    (void)bench_median(wait, REPS);
    printf("\"unit\": \"examples/s\", \"median\": %.1f, \"min\": %.1f, \"max\": %.1f, \"step_ms_median\": %.2f, "
           "\"infeed_wait_fraction_median\": %.4f, \"global_step\": %lld, \"last_loss\": %.4f, "
           "\"maxrss_mib\": %.1f, \"table_mib\": %.1f, \"rss_over_tables\": %.4f}\n",
           eps[REPS / 2], eps[0], eps[REPS - 1], ms[REPS / 2], wait[REPS / 2], (long long)tr.global_step, loss,
           maxrss, table_mib, maxrss / table_mib);
    rc = 0;
out:
    fflush(stdout);
    tl_estimator_destroy(est);
    tl_emb_engine_destroy(eng); /* after the estimator, which borrows it */
    tl_config_destroy(cfg);
    free(data.features);
    free(data.ids);
    free(data.labels);
    return rc;
}

/* ---- the ceilings: the GEMMs alone, and with the table rows ------------------------- */

/* What the step's dense GEMMs alone allow at 2 devices: one thread per
 * replica, each pinned to its CPU as the devices are, each running its
 * replica's GEMMs (batch 1024) at the same time, in the step's order: the
 * forward x·W layer by layer, then from the top down dW = xᵀ·dy and
 * dx = dy·Wᵀ (but for the first layer, whose input is the data). The
 * buffers are laid out as the step's: a layer's output is the next one's
 * input and a layer's dx the gradient of the one below, the top MLP reads
 * its own input (the concatenation) and the bottom MLP's gradient comes
 * from the interaction; every weight and weight gradient is its own. The
 * interaction, the embedding, the element-wise work and the optimizers are
 * left out, so no implementation of this step on OpenBLAS can beat it on
 * these cores. The top MLP's input is the bottom MLP's output beside the 27
 * vectors' (TABLES + 1)·TABLES/2 pairwise dots.
 *
 * Then, in the same loop and timed apart, the least the step's tables
 * must move: each replica reads its 1024 examples' 26 rows (the forward's
 * lookups, into an activation buffer) and updates as SGD as many rows of
 * its own (the owners' split: the ids of its parity, drawn afresh), each
 * row read and written once, fetched 16 rows ahead. The tables are the
 * run's, 26 × 100,000 × 64 floats, shared by both threads, on huge pages
 * where the kernel gives them, as the engine asks; the ids are uniform, as
 * the run's. No dedup, no sums of repeated rows, no slots. */
enum { FLOOR_B = BATCH / 2, FLOOR_REPEAT = 40, TOP_IN = DIM + (TABLES + 1) * TABLES / 2 };
enum { FLOOR_ROWS = FLOOR_B * TABLES, FLOOR_AHEAD = 16, LAYERS = 6, TOP = 3 };
static const int floor_layers[LAYERS][2] = {{DENSE, 512}, {512, 256}, {256, DIM}, {TOP_IN, 512}, {512, 256}, {256, 1}};

/* Layer l: input x (B × in), weights w (in × out), output y (B × out), the
 * output's gradient dy, the weights' dw, the input's dx. */
typedef struct floor_net {
    float *x[LAYERS], *w[LAYERS], *y[LAYERS], *dy[LAYERS], *dw[LAYERS], *dx[LAYERS];
} floor_net;

/* The floats floor_wire lays out from base (NULL: counts them). */
static size_t floor_wire(float *base, floor_net *n)
{
    size_t at = 0, b = FLOOR_B;
    for (int l = 0; l < LAYERS; l++) {
        size_t in = (size_t)floor_layers[l][0], out = (size_t)floor_layers[l][1];
        if (l == 0 || l == TOP) { /* the data, or the concatenation */
            n->x[l] = base + at;
            at += b * in;
        } else {
            n->x[l] = n->y[l - 1];
        }
        n->w[l] = base + at;
        n->dw[l] = base + at + in * out;
        n->y[l] = base + at + 2 * in * out;
        at += 2 * in * out + b * out;
    }
    for (int l = LAYERS - 1; l >= 0; l--) {
        size_t in = (size_t)floor_layers[l][0], out = (size_t)floor_layers[l][1];
        if (l == LAYERS - 1 || l == TOP - 1) { /* from the loss, or from the interaction */
            n->dy[l] = base + at;
            at += b * out;
        } else {
            n->dy[l] = n->dx[l + 1];
        }
        n->dx[l] = base + at;
        at += b * in;
    }
    return at;
}

static void floor_gemms(const floor_net *n)
{
    int b = FLOOR_B;
    for (int l = 0; l < LAYERS; l++) {
        int in = floor_layers[l][0], out = floor_layers[l][1];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, out, in, 1.0f, n->x[l], in, n->w[l], out, 0.0f,
                    n->y[l], out);
    }
    for (int l = LAYERS - 1; l >= 0; l--) {
        int in = floor_layers[l][0], out = floor_layers[l][1];
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, b, 1.0f, n->x[l], in, n->dy[l], out, 0.0f,
                    n->dw[l], out);
        if (l != 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, in, out, 1.0f, n->dy[l], out, n->w[l], out, 0.0f,
                        n->dx[l], in);
    }
}

struct floor_arg {
    int cpu;
    pthread_barrier_t *start;
    float *tables; /* TABLES × ROWS × DIM */
    double gemm_s, rows_s; /* a step's, averaged; -1 when out of memory */
};

/* One step's lookups, then its updates: ids[FLOOR_ROWS] example-major as
 * the data's, own[FLOOR_ROWS] the rows this replica updates, from g. */
static void floor_rows(float *tables, const uint32_t *ids, const uint32_t *own, float *act, const float *g)
{
    for (int e = 0; e < FLOOR_ROWS; e++) {
        if (e + FLOOR_AHEAD < FLOOR_ROWS)
            __builtin_prefetch(tables + ((size_t)((e + FLOOR_AHEAD) % TABLES) * ROWS + ids[e + FLOOR_AHEAD]) * DIM);
        memcpy(act + (size_t)e * DIM, tables + ((size_t)(e % TABLES) * ROWS + ids[e]) * DIM, DIM * sizeof *act);
    }
    for (int e = 0; e < FLOOR_ROWS; e++) {
        if (e + FLOOR_AHEAD < FLOOR_ROWS)
            __builtin_prefetch(tables + ((size_t)((e + FLOOR_AHEAD) % TABLES) * ROWS + own[e + FLOOR_AHEAD]) * DIM, 1);
        float *row = tables + ((size_t)(e % TABLES) * ROWS + own[e]) * DIM;
        for (int c = 0; c < DIM; c++)
            row[c] -= 0.1f * g[(size_t)e * DIM + c];
    }
}

static void *floor_thread(void *p)
{
    struct floor_arg *a = p;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(a->cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort, as the devices' pinning */
    floor_net net;
    size_t nf = floor_wire(NULL, &net), nid = (size_t)FLOOR_REPEAT * FLOOR_ROWS;
    float *buf = malloc((nf + 2 * (size_t)FLOOR_ROWS * DIM) * sizeof *buf);
    uint32_t *ids = malloc(2 * nid * sizeof *ids);
    a->gemm_s = a->rows_s = -1;
    pthread_barrier_wait(a->start);
    if (buf == NULL || ids == NULL) {
        free(buf);
        free(ids);
        return NULL;
    }
    floor_wire(buf, &net);
    /* Small values that stay small: the weights ±0.06, every other buffer
     * below 0.17 (the chained ones are overwritten by the first step). */
    for (size_t i = 0; i < nf; i++)
        buf[i] = (float)(i % 13) * 0.01f - 0.06f;
    float *act = buf + nf, *g = act + (size_t)FLOOR_ROWS * DIM;
    for (size_t i = 0; i < (size_t)FLOOR_ROWS * DIM; i++)
        g[i] = (float)(i % 7) * 1e-4f;
    uint64_t seed = 7 + (uint64_t)a->cpu;
    for (size_t i = 0; i < nid; i++) {
        ids[i] = (uint32_t)(splitmix64(&seed) % ROWS);
        ids[nid + i] = (uint32_t)(splitmix64(&seed) % (ROWS / 2) * 2 + (uint64_t)a->cpu);
    }
    double gemm = 0, rows = 0;
    for (int it = 0; it < FLOOR_REPEAT; it++) {
        double t0 = bench_now();
        floor_gemms(&net);
        double t1 = bench_now();
        floor_rows(a->tables, ids + (size_t)it * FLOOR_ROWS, ids + nid + (size_t)it * FLOOR_ROWS, act, g);
        gemm += t1 - t0;
        rows += bench_now() - t1;
    }
    a->gemm_s = gemm / FLOOR_REPEAT;
    a->rows_s = rows / FLOOR_REPEAT;
    free(buf);
    free(ids);
    return NULL;
}

/* One JSON line: the medians over 5 reps of the slower thread's GEMM time
 * and of its rows' time per step. */
static int step_floor(void)
{
    openblas_set_num_threads(1);
    size_t n = (size_t)TABLES * ROWS * DIM;
    float *tables = mmap(NULL, n * sizeof *tables, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tables == MAP_FAILED) {
        fprintf(stderr, "bench_dlrm: out of memory for the floor's tables\n");
        return 1;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(tables, n * sizeof *tables, MADV_HUGEPAGE); /* a hint, as the engine's */
#endif
    for (size_t i = 0; i < n; i++) /* touched, so that no page is first faulted in a timed loop */
        tables[i] = (float)(i % 251) * 1e-3f - 0.125f;
    double t[5], r[5], both[5];
    for (int rep = 0; rep < 5; rep++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 2);
        struct floor_arg a[2] = {{.cpu = 0, .start = &start, .tables = tables},
                                 {.cpu = 1, .start = &start, .tables = tables}};
        pthread_t th;
        if (pthread_create(&th, NULL, floor_thread, &a[1]) != 0) {
            fprintf(stderr, "bench_dlrm: cannot start the floor's second thread\n");
            pthread_barrier_destroy(&start);
            munmap(tables, n * sizeof *tables);
            return 1;
        }
        floor_thread(&a[0]);
        pthread_join(th, NULL);
        pthread_barrier_destroy(&start);
        if (a[0].gemm_s < 0 || a[1].gemm_s < 0) {
            fprintf(stderr, "bench_dlrm: out of memory for the floor\n");
            munmap(tables, n * sizeof *tables);
            return 1;
        }
        t[rep] = a[0].gemm_s > a[1].gemm_s ? a[0].gemm_s : a[1].gemm_s;
        r[rep] = a[0].rows_s > a[1].rows_s ? a[0].rows_s : a[1].rows_s;
        double b0 = a[0].gemm_s + a[0].rows_s, b1 = a[1].gemm_s + a[1].rows_s;
        both[rep] = b0 > b1 ? b0 : b1;
    }
    munmap(tables, n * sizeof *tables);
    double med = bench_median(t, 5), rmed = bench_median(r, 5), bmed = bench_median(both, 5);
    printf("{\"bench\": \"tpuloop_dlrm\", \"what\": \"gemm_floor\", \"devices\": 2, \"batch\": %d, "
           "\"bottom\": \"13-512-256-64\", \"top\": \"415-512-256-1\", \"gemms_per_step\": 17, "
           "\"step_ms\": %.3f, \"unit\": \"examples/s\", \"median\": %.1f, "
           "\"rows_per_replica\": %d, \"rows_ms\": %.3f, \"gemm_and_rows_step_ms\": %.3f, "
           "\"gemm_and_rows_median\": %.1f}\n",
           BATCH, med * 1e3, BATCH / med, FLOOR_ROWS, rmed * 1e3, bmed * 1e3, BATCH / bmed);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    /* --devices=1 or 2: only those runs (make bench's rounds against the
     * peers take 2); by default both. */
    int only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--devices=1") == 0 || strcmp(argv[i], "--devices=2") == 0) {
            only = argv[i][10] - '0';
            continue;
        }
        fprintf(stderr, "bench_dlrm: \"%s\": the only argument is --devices=1 or --devices=2\n", argv[i]);
        return 2;
    }
    tl_set_log_level(TL_LOG_ERROR);
    static const struct {
        bool adagrad;
        int devices;
    } runs[] = {{true, 1}, {true, 2}, {false, 1}, {false, 2}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        if (only != 0 && runs[i].devices != only)
            continue;
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("bench_dlrm: fork");
            return 1;
        }
        if (pid == 0)
            _exit(run(runs[i].adagrad, runs[i].devices));
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_dlrm: the %s run at %d device(s) failed\n", runs[i].adagrad ? "adagrad" : "sgd",
                    runs[i].devices);
            return 1;
        }
    }
    return only == 1 ? 0 : step_floor();
}

/* bench_embedding.c — the embedding engine (tpuloop/embedding.h) on the
 * workload of PyTorch's peers (shared/bench/torch_embbag.py, and FBGEMM's
 * fused TBE in bench/peers/embedding_fbgemm.py, run by run_peers.sh in the
 * same `make bench`): 8 tables of 1,000,000 rows × 64 float32, sum
 * combiner, one feature per table, global batch 4096; bags of 1 and of 20
 * ids (ragged input); Zipf ids; SGD (lr 0.01) and Adagrad (lr 0.01, initial
 * accumulator 0.1). On 1 core (1 shard, one thread) and on 2 (2 shards, a
 * thread each, 2048 examples per core: the global batch's halves).
 *
 *     bench_embedding [--opts=sgd,adagrad] [--cores=1,2]   (default: all)
 *
 * A step is what a training loop calls per step, per core: enqueue,
 * recv_dedup, recv_activations, send_gradients; on 1 core the update runs
 * inside the send, on 2 each core then applies the rows it owns once both
 * have sent (tl_emb_apply_owned, owner apply, as the estimator's replicas
 * do), the cores meeting at a spinning barrier. The gradients are a fixed
 * buffer of small values (the model that would make them is not the
 * engine's work; PyTorch's peer computes an MSE loss, a small dense op
 * beside the embedding traffic).
 *
 * Ids, as torch_embbag.py draws them: P(rank k) ∝ 1/k^1.05 over all rows,
 * ranks scattered over the table by a fixed permutation (the same for every
 * table), each table's ids drawn independently; 8 pre-generated batches
 * (not timed), cycled. The distribution is the peer's, the draws are not
 * (numpy's generator is not reproduced), so unique rows per step agree to
 * sampling noise; both sides print theirs.
 *
 * Each (optimizer, cores) runs in its own child process, so that its peak resident
 * memory (ru_maxrss) is its own: the tables are initialized with zeros
 * (not timed; init_s says how long it took: the uniform initializer takes
 * about three times as long, and values do not change the work), then bag
 * 1 and bag 20 each get a warm-up of >= 0.5 s, then REPS reps of N >= 4
 * steps, N sized from the warm-up to about 1 s a rep. Per (optimizer,
 * cores, bag) one JSON line with the median of the reps:
 *
 *   median            M lookups/s (ids per second), the unit of the peer
 *   unique_rows_M_per_s  unique (table, id) rows of the global batch,
 *                     updated per second (counted on the ids before the
 *                     run; on 1 core checked against tl_emb_get_stats)
 *   eff_GBps_median   the bytes the engine must move at the least, per
 *                     second: each occurrence reads its row's 256 B of
 *                     parameters once in the forward gather, and each unique
 *                     row's parameters and slots (256 B × (1 + slots)) are
 *                     read and written once by the update:
 *                       bytes = 256 × (lookups + 2 × (1 + slots) × unique).
 *                     The gradients the model hands in (B × 64 floats per
 *                     table, read sequentially) and the engine's own
 *                     workspace are not counted. torch_embbag.py counts the
 *                     same way, so the two eff_GBps compare directly.
 *   gather_*          the machine's random-row gather bandwidth, measured in
 *                     the same process after the engine is gone: 256-byte
 *                     rows at uniform random indices of a 2 GiB buffer,
 *                     copied into a 4096-row buffer, software prefetch 16
 *                     rows ahead, on as many threads as the engine had
 *                     cores (each its share of the visits, at once) —
 *                     shared/bench/gather.c's mode 0
 *                     — with MADV_HUGEPAGE (the reference; the best the
 *                     machine does) and without (4 KiB pages, what a plain
 *                     malloc gets where THP is "madvise").
 *   eff_fraction_of_gather   eff_GBps / the huge-page gather GB/s (target
 *                     >= 0.6); lookup_fraction_of_gather, lookups/s over
 *                     gathered rows/s, is the stricter reading.
 *   maxrss_mib        peak resident memory of the child (ids and buffers
 *                     of the bench included, the gather's buffer not: read
 *                     before it), against tl_emb_table_bytes (tables and
 *                     slots): rss_over_tables (target <= 1.10);
 *                     engine_rss_over_tables leaves out what the process
 *                     held before the engine was made (rss_before_engine_mib:
 *                     the ids, activations and gradients of the bench).
 *   workspace_mib     tl_emb_workspace_bytes after the run.
 *   anon_huge_pages_mib  transparent huge pages the engine's tables got
 *                     (AnonHugePages while it lives), against the gather's.
 *
 * Runs in about a minute. */
#define _GNU_SOURCE /* MADV_HUGEPAGE */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base_int.h"
#include "base/thread.h"
#include "tpuloop/embedding.h"
#include "tpuloop/tpuloop.h"
#include "util/bench_util.h"

enum { TABLES = 8, ROWS = 1000000, DIM = 64, BATCH = 4096, NBATCH = 8, REPS = 5, ROW_BYTES = DIM * 4 };
enum { NBAGS = 2, MAX_CORES = 2 };
static const int bag_sizes[NBAGS] = {1, 20};

/* ---- ids ------------------------------------------------------------------- */

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

/* Pre-generated ids: ids[bag][batch][table] holds BATCH × bag ids. */
static int64_t *ids[NBAGS][NBATCH][TABLES];
static int64_t *row_splits[NBAGS]; /* (BATCH + 1) */
static int64_t uniques[NBAGS][NBATCH]; /* distinct (table, id) of each global batch */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The distinct ids of v[0..n), counted on a sorted copy in tmp. */
static int64_t count_distinct(const int64_t *v, size_t n, int64_t *tmp)
{
    memcpy(tmp, v, n * sizeof *tmp);
    qsort(tmp, n, sizeof *tmp, cmp_i64);
    int64_t d = 0;
    for (size_t k = 0; k < n; k++)
        d += k == 0 || tmp[k] != tmp[k - 1];
    return d;
}

/* Draws every batch as numpy's searchsorted over the CDF does (the first
 * rank whose CDF is >= u), then scatters the rank by the permutation. */
static bool make_ids(void)
{
    double *cdf = malloc((size_t)ROWS * sizeof *cdf);
    int64_t *perm = malloc((size_t)ROWS * sizeof *perm);
    if (cdf == NULL || perm == NULL) {
        free(cdf);
        free(perm);
        return false;
    }
    double sum = 0;
    for (int k = 0; k < ROWS; k++)
        cdf[k] = sum += pow((double)(k + 1), -1.05);
    for (int k = 0; k < ROWS; k++)
        cdf[k] /= sum;
    uint64_t seed = 12345;
    for (int k = 0; k < ROWS; k++)
        perm[k] = k;
    for (int k = ROWS - 1; k > 0; k--) { /* Fisher–Yates */
        int j = (int)(splitmix64(&seed) % (uint64_t)(k + 1));
        int64_t t = perm[k];
        perm[k] = perm[j];
        perm[j] = t;
    }
    int64_t *tmp = malloc((size_t)BATCH * (size_t)bag_sizes[NBAGS - 1] * sizeof *tmp);
    bool ok = tmp != NULL;
    for (int b = 0; b < NBAGS && ok; b++) {
        size_t n = (size_t)BATCH * (size_t)bag_sizes[b];
        row_splits[b] = malloc((BATCH + 1) * sizeof(int64_t));
        ok = row_splits[b] != NULL;
        for (int r = 0; ok && r <= BATCH; r++)
            row_splits[b][r] = (int64_t)r * bag_sizes[b];
        for (int i = 0; i < NBATCH && ok; i++)
            for (int t = 0; t < TABLES && ok; t++) {
                int64_t *v = ids[b][i][t] = malloc(n * sizeof *v);
                if ((ok = v != NULL))
                    for (size_t k = 0; k < n; k++) {
                        double u = uniform01(&seed);
                        size_t lo = 0, hi = ROWS - 1; /* clip to the last rank, as the peer */
                        while (lo < hi) {
                            size_t mid = (lo + hi) / 2;
                            if (cdf[mid] >= u)
                                hi = mid;
                            else
                                lo = mid + 1;
                        }
                        v[k] = perm[lo];
                    }
                if (ok)
                    uniques[b][i] += count_distinct(v, n, tmp);
            }
    }
    free(tmp);
    free(cdf);
    free(perm);
    return ok;
}

/* ---- memory -------------------------------------------------------------------- */

/* Current resident memory in MiB (0 when /proc is missing). */
static double rss_now_mib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

/* AnonHugePages of the process in MiB (-1 when unknown): whether the
 * engine's tables got transparent huge pages. */
static double anon_huge_mib(void)
{
    double kib = -1;
    char line[256];
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "AnonHugePages:", 14) == 0)
            kib = strtod(line + 14, NULL);
    if (f != NULL)
        fclose(f);
    return kib < 0 ? -1 : kib / 1024.0;
}

/* ---- the random-row gather limit ---------------------------------------------- */

enum { GATHER_PF = 16, GATHER_REPS = 5 };
static const size_t gather_bytes = (size_t)2 << 30;
static const size_t gather_visits = (size_t)8 << 20;

typedef struct gather_arg {
    const float *table;
    const uint32_t *idx; /* visits [0, n) */
    size_t n;
    float *buf; /* BATCH rows */
    double sink;
} gather_arg;

static void *gather_run(void *p)
{
    gather_arg *a = p;
    for (size_t b0 = 0; b0 < a->n; b0 += BATCH) {
        size_t end = b0 + BATCH < a->n ? b0 + BATCH : a->n;
        for (size_t i = b0; i < end; i++) {
            if (i + GATHER_PF < a->n) {
                const char *r = (const char *)(a->table + (size_t)a->idx[i + GATHER_PF] * DIM);
                for (int l = 0; l < 4; l++)
                    __builtin_prefetch(r + 64 * l, 0, 3);
            }
            memcpy(a->buf + (i - b0) * DIM, a->table + (size_t)a->idx[i] * DIM, ROW_BYTES);
        }
        a->sink += a->buf[b0 % ((size_t)BATCH * DIM)];
    }
    return NULL;
}

/* Rows per second of the median rep, or 0 when memory is short; *huge_mib
 * the process's transparent huge pages while the buffer is mapped. With
 * several threads each gathers its share of the visits into its own buffer,
 * at once, as the engine's cores do. */
static double gather_rows_per_s(bool huge, int threads, double *huge_mib)
{
    size_t rows = gather_bytes / ROW_BYTES;
    float *table = mmap(NULL, gather_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint32_t *idx = malloc(gather_visits * sizeof *idx);
    float *buf = aligned_alloc(64, (size_t)MAX_CORES * BATCH * ROW_BYTES);
    double r = 0, sink = 0;
    if (table == MAP_FAILED || idx == NULL || buf == NULL)
        goto out;
    if (huge)
        (void)madvise(table, gather_bytes, MADV_HUGEPAGE); /* a hint: where refused, the figure says so */
    for (size_t i = 0; i < rows; i++)
        for (int k = 0; k < DIM; k++)
            table[i * DIM + k] = (float)(i & 1023) + (float)k;
    memset(buf, 0, (size_t)MAX_CORES * BATCH * ROW_BYTES);
    *huge_mib = anon_huge_mib();
    uint64_t seed = 777;
    for (size_t i = 0; i < gather_visits; i++)
        idx[i] = (uint32_t)(splitmix64(&seed) % rows);
    double t[GATHER_REPS];
    size_t share = gather_visits / (size_t)threads;
    for (int rep = -1; rep < GATHER_REPS; rep++) { /* rep -1: warm-up */
        gather_arg a[MAX_CORES];
        tl_thread th[MAX_CORES];
        int started = 1;
        for (int c = 0; c < threads; c++)
            a[c] = (gather_arg){table, idx + (size_t)c * share, share, buf + (size_t)c * BATCH * DIM, 0};
        double t0 = bench_now();
        for (int c = 1; c < threads && started == c; c++) /* up to the first that cannot start */
            started += tl_thread_start(&th[c], gather_run, &a[c]) == TL_OK;
        gather_run(&a[0]);
        for (int c = 1; c < started; c++)
            tl_thread_join(&th[c], NULL);
        if (started < threads) { /* no thread: no figure */
            r = 0;
            goto out;
        }
        if (rep >= 0)
            t[rep] = bench_now() - t0;
        for (int c = 0; c < threads; c++)
            sink += a[c].sink;
    }
    r = (double)(share * (size_t)threads) / bench_median(t, GATHER_REPS);
    if (sink == 12345.678) /* keeps the copies */
        fprintf(stderr, "bench_embedding: %g\n", sink);
out:
    if (table != MAP_FAILED)
        munmap(table, gather_bytes);
    free(idx);
    free(buf);
    return r;
}

/* ---- one optimizer, in the child --------------------------------------------------- */

typedef struct result {
    double lookups[REPS], uniques[REPS], steps[REPS], gbps[REPS];
    int warmup_steps, steps_per_rep;
    double unique_per_step;
} result;

/* ---- the step on C cores ---------------------------------------------------------- */

/* What the C cores share: the engine, the step's inputs (core c enqueues
 * in[c], its slice of the global batch), each core's activations and
 * gradients, and their barrier. As a training loop with one replica per
 * core calls the engine: enqueue, recv_dedup, recv_activations,
 * send_gradients, then (several cores) every core applies the rows it owns
 * once all have sent, as src/runtime/emb_steps.c does; the barrier spins
 * 20 µs before it sleeps, as the estimator's replicas' do. A core that
 * fails breaks it, which stops the others. */
typedef struct cores cores;

typedef struct core_arg {
    cores *k;
    int c;
} core_arg;

struct cores {
    tl_emb_engine *eng;
    int C;
    const tl_emb_input *in[MAX_CORES];
    float *const *out[MAX_CORES];
    const float *const *grads[MAX_CORES];
    tl_barrier bar;
    bool bar_ready;
    int started; /* threads running cores 1..started */
    tl_thread th[MAX_CORES];
    core_arg args[MAX_CORES];
};

static tl_status core_step(cores *k, int c)
{
    tl_emb_dedup dd;
    tl_emb_engine *eng = k->eng;
    tl_status st = tl_emb_enqueue(eng, c, k->in[c], TABLES, "training");
    if (st == TL_OK)
        st = tl_emb_recv_dedup(eng, c, &dd);
    if (st == TL_OK)
        st = tl_emb_recv_activations(eng, c, &dd, k->out[c], TABLES);
    if (st == TL_OK)
        st = tl_emb_send_gradients(eng, c, &dd, k->grads[c], TABLES, NULL, 0);
    if (k->C == 1 || st != TL_OK)
        return st;
    if (tl_barrier_wait(&k->bar) != TL_WAIT_OK) /* every core sent */
        return tl_error(TL_ERUNTIME, "another core failed");
    return tl_emb_apply_owned(eng, c);
}

/* Cores 1..C-1: a step whenever core 0 (the main thread) starts one. */
static void *core_main(void *p)
{
    core_arg *a = p;
    tl_fp_set_kernel_env(); /* as the estimator's device threads run the engine */
    while (tl_barrier_wait(&a->k->bar) == TL_WAIT_OK) { /* the step's inputs are set, the last step applied */
        if (core_step(a->k, a->c) != TL_OK) {
            fprintf(stderr, "bench_embedding: core %d: %s\n", a->c, tl_last_error());
            tl_barrier_break(&a->k->bar);
        }
    }
    return NULL;
}

/* One step of every core; the inputs of core c are in[c]. */
static tl_status step(cores *k, const tl_emb_input *const *in)
{
    for (int c = 0; c < k->C; c++)
        k->in[c] = in[c];
    if (k->C > 1 && tl_barrier_wait(&k->bar) != TL_WAIT_OK)
        return tl_error(TL_ERUNTIME, "another core failed");
    tl_status st = core_step(k, 0);
    if (st != TL_OK && k->C > 1)
        tl_barrier_break(&k->bar);
    return st;
}

static tl_status cores_start(cores *k)
{
    k->started = 0;
    tl_fp_set_kernel_env(); /* core 0 is this thread */
    if (k->C == 1)
        return TL_OK;
    tl_status st = tl_barrier_init(&k->bar, k->C, 20000);
    k->bar_ready = st == TL_OK;
    for (int c = 1; c < k->C && st == TL_OK; c++) {
        k->args[c] = (core_arg){k, c};
        if ((st = tl_thread_start(&k->th[c], core_main, &k->args[c])) == TL_OK)
            k->started = c;
    }
    return st;
}

/* Stops the cores' threads (breaking their barrier), after cores_start. */
static void cores_stop(cores *k)
{
    if (!k->bar_ready)
        return;
    tl_barrier_break(&k->bar);
    for (int c = 1; c <= k->started; c++)
        tl_thread_join(&k->th[c], NULL);
    tl_barrier_close(&k->bar);
}

static tl_status run_bag(cores *k, int b, int slots, result *res)
{
    /* Core c enqueues rows [c B/C, (c + 1) B/C) of the global batch: the
     * same ids at every core count. */
    int C = k->C, Bc = BATCH / C;
    tl_emb_input in[NBATCH][MAX_CORES][TABLES];
    const tl_emb_input *inp[NBATCH][MAX_CORES];
    int64_t n = (int64_t)BATCH * bag_sizes[b];
    for (int i = 0; i < NBATCH; i++)
        for (int c = 0; c < C; c++) {
            for (int t = 0; t < TABLES; t++)
                in[i][c][t] = (tl_emb_input){.kind = TL_EMB_INPUT_RAGGED,
                                             .ids = ids[b][i][t] + (int64_t)c * Bc * bag_sizes[b],
                                             .n = (int64_t)Bc * bag_sizes[b], .row_splits = row_splits[b]};
            inp[i][c] = in[i][c];
        }
    tl_status st = TL_OK;
    int64_t j = 0;
    double t0 = bench_now(), dt = 0;
    while (st == TL_OK && (j < 3 || dt < 0.5)) {
        st = step(k, inp[j++ % NBATCH]);
        dt = bench_now() - t0;
    }
    if (st != TL_OK)
        return st;
    res->warmup_steps = (int)j;
    int steps = (int)(1.0 / (dt / (double)j));
    steps = steps < 4 ? 4 : steps > 5000 ? 5000 : steps;
    res->steps_per_rep = steps;
    double ids_per_step = (double)n * TABLES, total_unique = 0;
    for (int r = 0; r < REPS && st == TL_OK; r++) {
        tl_emb_stats s0, s1;
        tl_emb_get_stats(k->eng, &s0);
        double unique = 0; /* the global batches' distinct rows: each is updated once, at any C */
        for (int i = 0; i < steps; i++)
            unique += (double)uniques[b][(j + i) % NBATCH];
        double r0 = bench_now();
        for (int i = 0; i < steps && st == TL_OK; i++)
            st = step(k, inp[j++ % NBATCH]);
        double s = bench_now() - r0;
        tl_emb_get_stats(k->eng, &s1);
        double lookups = (double)(s1.lookups - s0.lookups);
        if (st == TL_OK && (lookups != ids_per_step * steps ||
                            (C == 1 && (double)(s1.unique_rows - s0.unique_rows) != unique))) {
            fprintf(stderr, "bench_embedding: the engine counted %.0f lookups and %.0f unique rows, %.0f and %.0f "
                            "expected\n", lookups, (double)(s1.unique_rows - s0.unique_rows), ids_per_step * steps,
                    unique);
            return TL_ERUNTIME;
        }
        total_unique += unique;
        res->lookups[r] = lookups / s / 1e6;
        res->uniques[r] = unique / s / 1e6;
        res->steps[r] = steps / s;
        res->gbps[r] = ROW_BYTES * (lookups + 2.0 * (1 + slots) * unique) / s / 1e9;
    }
    res->unique_per_step = total_unique / ((double)REPS * steps);
    return st;
}

static void print_reps(const char *key, const double *v)
{
    printf("\"%s\": [", key);
    for (int r = 0; r < REPS; r++)
        printf("%s%.4f", r ? ", " : "", v[r]);
    printf("], ");
}

static int run(tl_emb_algorithm alg, int C)
{
    tl_emb_table_config tc[TABLES];
    tl_emb_feature_config fc[TABLES];
    tl_emb_optimizer opt;
    tl_emb_optimizer_default(alg, &opt);
    opt.learning_rate = 0.01f;
    if (alg == TL_EMB_ADAGRAD)
        opt.initial_accumulator_value = 0.1f;
    for (int t = 0; t < TABLES; t++) {
        tc[t] = (tl_emb_table_config){.vocabulary_size = ROWS, .dim = DIM, .combiner = TL_EMB_COMBINER_SUM,
                                      .initializer = {.kind = TL_EMB_INIT_ZEROS}};
        fc[t] = (tl_emb_feature_config){.table = t};
    }
    tl_emb_config cfg;
    tl_emb_config_default(&cfg);
    cfg.tables = tc;
    cfg.num_tables = TABLES;
    cfg.features = fc;
    cfg.num_features = TABLES;
    cfg.optimizer = opt;
    cfg.num_tensor_cores = C;
    cfg.batch_size_per_tensor_core = BATCH / C;
    cfg.num_shards = C;
    cfg.seed = 42;

    /* Activations and gradients: one [B, 64] buffer per feature each, core
     * c's its rows [c B/C, (c + 1) B/C). */
    float *act = malloc((size_t)TABLES * BATCH * DIM * sizeof *act);
    float *grad = malloc((size_t)TABLES * BATCH * DIM * sizeof *grad);
    if (act == NULL || grad == NULL) {
        fprintf(stderr, "bench_embedding: out of memory\n");
        return 1;
    }
    float *out[MAX_CORES][TABLES];
    const float *grads[MAX_CORES][TABLES];
    for (size_t i = 0; i < (size_t)TABLES * BATCH * DIM; i++)
        grad[i] = 1e-3f * (float)((int)(i % 17) - 8); /* small, signed, no denormals under either rule */
    memset(act, 0, (size_t)TABLES * BATCH * DIM * sizeof *act);
    for (int c = 0; c < C; c++)
        for (int t = 0; t < TABLES; t++) {
            size_t at = ((size_t)t * BATCH + (size_t)c * (BATCH / C)) * DIM;
            out[c][t] = act + at;
            grads[c][t] = grad + at;
        }

    double rss_before = rss_now_mib();
    tl_emb_engine *eng = NULL;
    double t0 = bench_now();
    tl_status st = tl_emb_engine_create(&cfg, &eng);
    double init_s = bench_now() - t0;
    int slots = tl_emb_num_slots(&opt);
    result res[NBAGS];
    cores k = {.eng = eng, .C = C};
    for (int c = 0; c < C; c++) {
        k.out[c] = out[c];
        k.grads[c] = grads[c];
    }
    if (st == TL_OK && C > 1)
        st = tl_emb_set_owner_apply(eng, true);
    if (st == TL_OK) {
        st = cores_start(&k);
        for (int b = 0; b < NBAGS && st == TL_OK; b++)
            st = run_bag(&k, b, slots, &res[b]);
        cores_stop(&k);
    }
    if (st != TL_OK) {
        fprintf(stderr, "bench_embedding: %s: %s\n", tl_emb_algorithm_name(alg), tl_last_error());
        tl_emb_engine_destroy(eng);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double huge_mib = anon_huge_mib();
    double table_mib = (double)tl_emb_table_bytes(eng) / 1048576.0;
    double ws_mib = (double)tl_emb_workspace_bytes(eng) / 1048576.0;
    double maxrss = (double)ru.ru_maxrss / 1024.0;
    tl_emb_engine_destroy(eng);
    free(act);
    free(grad);

    double g_huge_mib = 0, g_4k_mib = 0;
    double g_huge = gather_rows_per_s(true, C, &g_huge_mib), g_4k = gather_rows_per_s(false, C, &g_4k_mib);
    if (g_huge <= 0 || g_4k <= 0) {
        fprintf(stderr, "bench_embedding: no memory for the gather's %zu-byte buffer\n", gather_bytes);
        return 1;
    }
    double g_gbps = g_huge * ROW_BYTES / 1e9;
    const char *oname = alg == TL_EMB_SGD ? "sgd" : "adagrad";
    for (int b = 0; b < NBAGS; b++) {
        result *r = &res[b];
        printf("{\"bench\": \"tpuloop_embedding\", \"opt\": \"%s\", \"dist\": \"zipf\", \"bag\": %d, \"tables\": %d, "
               "\"rows\": %d, \"dim\": %d, \"batch\": %d, \"cores\": %d, \"shards\": %d, \"threads\": %d, "
               "\"input\": \"ragged\", \"combiner\": \"sum\", \"initializer\": \"zeros\", "
               "\"init_s\": %.2f, \"ids_per_step\": %d, \"unique_rows_per_step\": %.0f, \"optimizer_slots\": %d, "
               "\"warmup_steps\": %d, \"steps_per_rep\": %d, ",
               oname, bag_sizes[b], TABLES, ROWS, DIM, BATCH, C, C, C, init_s, BATCH * bag_sizes[b] * TABLES,
               r->unique_per_step, slots, r->warmup_steps, r->steps_per_rep);
        print_reps("reps", r->lookups);
        print_reps("eff_GBps", r->gbps);
        double ups = bench_median(r->uniques, REPS), sps = bench_median(r->steps, REPS);
        double gb = bench_median(r->gbps, REPS), lk = bench_median(r->lookups, REPS);
        printf("\"unit\": \"M lookups/s (enqueue+dedup+activations+gradients+update)\", \"median\": %.4f, "
               "\"min\": %.4f, \"max\": %.4f, \"unique_rows_M_per_s\": %.4f, \"steps_per_s\": %.2f, "
               "\"step_ms\": %.3f, \"eff_GBps_median\": %.3f, \"gather_Mrows_per_s\": %.2f, "
               "\"gather_GBps\": %.3f, \"gather_4k_pages_Mrows_per_s\": %.2f, \"eff_fraction_of_gather\": %.4f, "
               "\"lookup_fraction_of_gather\": %.4f, \"maxrss_mib\": %.1f, \"rss_before_engine_mib\": %.1f, "
               "\"table_mib\": %.1f, \"rss_over_tables\": %.4f, \"engine_rss_over_tables\": %.4f, "
               "\"workspace_mib\": %.1f, \"anon_huge_pages_mib\": %.1f, \"gather_anon_huge_pages_mib\": %.1f}\n",
               lk, r->lookups[0], r->lookups[REPS - 1], ups, sps, 1e3 / sps, gb, g_huge / 1e6, g_gbps, g_4k / 1e6,
               gb / g_gbps, lk * 1e6 / g_huge, maxrss, rss_before, table_mib, maxrss / table_mib,
               (maxrss - rss_before) / table_mib, ws_mib, huge_mib, g_huge_mib);
    }
    fflush(stdout);
    return 0;
}

/* The comma-separated list of arg after prefix as a mask of what names[]
 * holds (bit i: names[i]); 0 for a name not in it. */
static unsigned parse_list(const char *arg, const char *const *names, int n)
{
    unsigned mask = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < n && strcmp(tok, names[i]) != 0)
            i++;
        if (i == n)
            return 0;
        mask |= 1u << i;
    }
    return mask;
}

int main(int argc, char **argv)
{
    static const char *const opt_names[] = {"sgd", "adagrad"}, *const core_names[] = {"1", "2"};
    static const tl_emb_algorithm algs[] = {TL_EMB_SGD, TL_EMB_ADAGRAD};
    unsigned opts = 3, cores_mask = 3;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--opts=", 7) == 0 && (opts = parse_list(argv[i] + 7, opt_names, 2)) != 0)
            continue;
        if (strncmp(argv[i], "--cores=", 8) == 0 && (cores_mask = parse_list(argv[i] + 8, core_names, 2)) != 0)
            continue;
        fprintf(stderr, "bench_embedding: \"%s\": the arguments are --opts=sgd,adagrad (either or both) and "
                        "--cores=1,2 (either or both)\n", argv[i]);
        return 2;
    }
    tl_set_log_level(TL_LOG_ERROR);
    if (!make_ids()) {
        fprintf(stderr, "bench_embedding: out of memory for the ids\n");
        return 1;
    }
    for (int C = 1; C <= MAX_CORES; C++)
        for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
            if (!(cores_mask >> (C - 1) & 1) || !(opts >> i & 1))
                continue;
            fflush(stdout);
            pid_t pid = fork();
            if (pid < 0) {
                perror("bench_embedding: fork");
                return 1;
            }
            if (pid == 0)
                _exit(run(algs[i], C));
            int status;
            if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "bench_embedding: the %s run on %d cores failed\n", tl_emb_algorithm_name(algs[i]), C);
                return 1;
            }
        }
    return 0;
}

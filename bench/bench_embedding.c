/* bench_embedding.c — the embedding engine (tpuloop/embedding.h) on the
 * workload of PyTorch's peer (shared/bench/torch_embbag.py, run by
 * run_peers.sh in the same `make bench`): 8 tables of 1,000,000 rows × 64
 * float32, sum combiner, one feature per table, batch 4096 on 1 core and 1
 * shard, one thread; bags of 1 and of 20 ids (ragged input); Zipf ids;
 * SGD (lr 0.01) and Adagrad (lr 0.01, initial accumulator 0.1).
 *
 * A step is what a training loop calls per step: enqueue, recv_dedup,
 * recv_activations, send_gradients; the update runs inside the send. The
 * gradients are a fixed buffer of small values (the model that would make
 * them is not the engine's work; PyTorch's peer computes an MSE loss, a
 * small dense op beside the embedding traffic).
 *
 * Ids, as torch_embbag.py draws them: P(rank k) ∝ 1/k^1.05 over all rows,
 * ranks scattered over the table by a fixed permutation (the same for every
 * table), each table's ids drawn independently; 8 pre-generated batches
 * (not timed), cycled. The distribution is the peer's, the draws are not
 * (numpy's generator is not reproduced), so unique rows per step agree to
 * sampling noise; both sides print theirs.
 *
 * Each optimizer runs in its own child process, so that its peak resident
 * memory (ru_maxrss) is its own: the tables are initialized with zeros
 * (not timed; init_s says how long it took: the uniform initializer takes
 * about three times as long, and values do not change the work), then bag
 * 1 and bag 20 each get a warm-up of >= 0.5 s, then REPS reps of N >= 4
 * steps, N sized from the warm-up to about 1 s a rep. Per (optimizer, bag) one JSON line
 * with the median of the reps:
 *
 *   median            M lookups/s (ids per second), the unit of the peer
 *   unique_rows_M_per_s  unique (table, id) rows updated per second
 *                     (tl_emb_get_stats' unique_rows over the rep)
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
 *                     rows ahead, 1 thread — shared/bench/gather.c's mode 0
 *                     — with MADV_HUGEPAGE (the reference; the best the
 *                     machine does) and without (4 KiB pages, what a plain
 *                     malloc gets where THP is "madvise").
 *   eff_fraction_of_gather   eff_GBps / the huge-page gather GB/s (target
 *                     >= 0.5); lookup_fraction_of_gather, lookups/s over
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

#include "tpuloop/embedding.h"
#include "tpuloop/tpuloop.h"
#include "util/bench_util.h"

enum { TABLES = 8, ROWS = 1000000, DIM = 64, BATCH = 4096, NBATCH = 8, REPS = 5, ROW_BYTES = DIM * 4 };
enum { NBAGS = 2 };
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
    bool ok = true;
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
            }
    }
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

/* Rows per second of the median rep, or 0 when memory is short; *huge_mib
 * the process's transparent huge pages while the buffer is mapped. */
static double gather_rows_per_s(bool huge, double *huge_mib)
{
    size_t rows = gather_bytes / ROW_BYTES;
    float *table = mmap(NULL, gather_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint32_t *idx = malloc(gather_visits * sizeof *idx);
    float *buf = aligned_alloc(64, (size_t)BATCH * ROW_BYTES);
    double r = 0, sink = 0;
    if (table == MAP_FAILED || idx == NULL || buf == NULL)
        goto out;
    if (huge)
        (void)madvise(table, gather_bytes, MADV_HUGEPAGE); /* a hint: where refused, the figure says so */
    for (size_t i = 0; i < rows; i++)
        for (int k = 0; k < DIM; k++)
            table[i * DIM + k] = (float)(i & 1023) + (float)k;
    memset(buf, 0, (size_t)BATCH * ROW_BYTES);
    *huge_mib = anon_huge_mib();
    uint64_t seed = 777;
    for (size_t i = 0; i < gather_visits; i++)
        idx[i] = (uint32_t)(splitmix64(&seed) % rows);
    double t[GATHER_REPS];
    for (int rep = -1; rep < GATHER_REPS; rep++) { /* rep -1: warm-up */
        double t0 = bench_now();
        for (size_t b0 = 0; b0 < gather_visits; b0 += BATCH) {
            for (size_t i = b0; i < b0 + BATCH; i++) {
                if (i + GATHER_PF < gather_visits) {
                    const char *p = (const char *)(table + (size_t)idx[i + GATHER_PF] * DIM);
                    for (int l = 0; l < 4; l++)
                        __builtin_prefetch(p + 64 * l, 0, 3);
                }
                memcpy(buf + (i - b0) * DIM, table + (size_t)idx[i] * DIM, ROW_BYTES);
            }
            sink += buf[b0 % ((size_t)BATCH * DIM)];
        }
        if (rep >= 0)
            t[rep] = bench_now() - t0;
    }
    r = (double)gather_visits / bench_median(t, GATHER_REPS);
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

static tl_status step(tl_emb_engine *eng, const tl_emb_input *in, float *const *out, const float *const *grads)
{
    tl_emb_dedup dd;
    tl_status st = tl_emb_enqueue(eng, 0, in, TABLES, "training");
    if (st == TL_OK)
        st = tl_emb_recv_dedup(eng, 0, &dd);
    if (st == TL_OK)
        st = tl_emb_recv_activations(eng, 0, &dd, out, TABLES);
    if (st == TL_OK)
        st = tl_emb_send_gradients(eng, 0, &dd, grads, TABLES, NULL, 0);
    return st;
}

static tl_status run_bag(tl_emb_engine *eng, int b, int slots, float *const *out, const float *const *grads,
                         result *res)
{
    tl_emb_input in[NBATCH][TABLES];
    int64_t n = (int64_t)BATCH * bag_sizes[b];
    for (int i = 0; i < NBATCH; i++)
        for (int t = 0; t < TABLES; t++)
            in[i][t] = (tl_emb_input){.kind = TL_EMB_INPUT_RAGGED, .ids = ids[b][i][t], .n = n,
                                      .row_splits = row_splits[b]};
    tl_status st = TL_OK;
    int64_t k = 0;
    double t0 = bench_now(), dt = 0;
    while (st == TL_OK && (k < 3 || dt < 0.5)) {
        st = step(eng, in[k++ % NBATCH], out, grads);
        dt = bench_now() - t0;
    }
    if (st != TL_OK)
        return st;
    res->warmup_steps = (int)k;
    int steps = (int)(1.0 / (dt / (double)k));
    steps = steps < 4 ? 4 : steps > 5000 ? 5000 : steps;
    res->steps_per_rep = steps;
    double ids_per_step = (double)n * TABLES, total_unique = 0;
    for (int r = 0; r < REPS && st == TL_OK; r++) {
        tl_emb_stats s0, s1;
        tl_emb_get_stats(eng, &s0);
        double r0 = bench_now();
        for (int i = 0; i < steps && st == TL_OK; i++)
            st = step(eng, in[k++ % NBATCH], out, grads);
        double s = bench_now() - r0;
        tl_emb_get_stats(eng, &s1);
        double lookups = (double)(s1.lookups - s0.lookups), unique = (double)(s1.unique_rows - s0.unique_rows);
        if (st == TL_OK && lookups != ids_per_step * steps) {
            fprintf(stderr, "bench_embedding: the engine counted %.0f lookups, %.0f expected\n", lookups,
                    ids_per_step * steps);
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

static int run(tl_emb_algorithm alg)
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
    cfg.num_tensor_cores = 1;
    cfg.batch_size_per_tensor_core = BATCH;
    cfg.num_shards = 1;
    cfg.seed = 42;

    /* Activations and gradients: one [B, 64] buffer per feature each. */
    float *act = malloc((size_t)TABLES * BATCH * DIM * sizeof *act);
    float *grad = malloc((size_t)TABLES * BATCH * DIM * sizeof *grad);
    if (act == NULL || grad == NULL) {
        fprintf(stderr, "bench_embedding: out of memory\n");
        return 1;
    }
    float *out[TABLES];
    const float *grads[TABLES];
    for (size_t i = 0; i < (size_t)TABLES * BATCH * DIM; i++)
        grad[i] = 1e-3f * (float)((int)(i % 17) - 8); /* small, signed, no denormals under either rule */
    memset(act, 0, (size_t)TABLES * BATCH * DIM * sizeof *act);
    for (int t = 0; t < TABLES; t++) {
        out[t] = act + (size_t)t * BATCH * DIM;
        grads[t] = grad + (size_t)t * BATCH * DIM;
    }

    double rss_before = rss_now_mib();
    tl_emb_engine *eng = NULL;
    double t0 = bench_now();
    tl_status st = tl_emb_engine_create(&cfg, &eng);
    double init_s = bench_now() - t0;
    int slots = tl_emb_num_slots(&opt);
    result res[NBAGS];
    for (int b = 0; b < NBAGS && st == TL_OK; b++)
        st = run_bag(eng, b, slots, out, grads, &res[b]);
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
    double g_huge = gather_rows_per_s(true, &g_huge_mib), g_4k = gather_rows_per_s(false, &g_4k_mib);
    if (g_huge <= 0 || g_4k <= 0) {
        fprintf(stderr, "bench_embedding: no memory for the gather's %zu-byte buffer\n", gather_bytes);
        return 1;
    }
    double g_gbps = g_huge * ROW_BYTES / 1e9;
    const char *oname = alg == TL_EMB_SGD ? "sgd" : "adagrad";
    for (int b = 0; b < NBAGS; b++) {
        result *r = &res[b];
        printf("{\"bench\": \"tpuloop_embedding\", \"opt\": \"%s\", \"dist\": \"zipf\", \"bag\": %d, \"tables\": %d, "
               "\"rows\": %d, \"dim\": %d, \"batch\": %d, \"cores\": 1, \"shards\": 1, \"threads\": 1, "
               "\"input\": \"ragged\", \"combiner\": \"sum\", \"initializer\": \"zeros\", "
               "\"init_s\": %.2f, \"ids_per_step\": %d, \"unique_rows_per_step\": %.0f, \"optimizer_slots\": %d, "
               "\"warmup_steps\": %d, \"steps_per_rep\": %d, ",
               oname, bag_sizes[b], TABLES, ROWS, DIM, BATCH, init_s, BATCH * bag_sizes[b] * TABLES,
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

int main(void)
{
    tl_set_log_level(TL_LOG_ERROR);
    if (!make_ids()) {
        fprintf(stderr, "bench_embedding: out of memory for the ids\n");
        return 1;
    }
    static const tl_emb_algorithm algs[] = {TL_EMB_SGD, TL_EMB_ADAGRAD};
    for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("bench_embedding: fork");
            return 1;
        }
        if (pid == 0)
            _exit(run(algs[i]));
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_embedding: the %s run failed\n", tl_emb_algorithm_name(algs[i]));
            return 1;
        }
    }
    return 0;
}

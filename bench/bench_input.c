/* bench_input.c — the input pipeline's throughput: TFRecord framing with
 * both CRCs checked, the same records GZIP-compressed, and tf.Example
 * records parsed into dense features, against Python's protobuf on the same
 * file.
 *
 * Two files are written once, into a fresh directory under /tmp (TMPDIR when
 * set) that is removed at the end:
 *   criteo    300,000 Criteo-shaped tf.Examples (protobuf-c, the TFRecord
 *             writer): "label" int64, 13 float features "I1".."I13" and 26
 *             int64 features "C1".."C26", one value each (~700 bytes a
 *             record); also written GZIP-compressed (zlib's default level).
 *   large     1 GiB of 64 KiB random payloads, for raw bytes a second.
 * Each figure runs once to warm the page cache, then REPS times; the line
 * gives every repetition and the median:
 *   read_crc        tl_tfrecord_reader_open + tl_tfrecord_next to the end
 *                   (length and data CRC-32C checked): MB/s of file bytes
 *                   and records/s, for both files.
 *   read_crc_gzip   the same through tl_tfrecord_zreader: MB/s of
 *                   uncompressed and of compressed bytes, and records/s.
 *   parse_example   read + tl_example_parse + destroy: records/s.
 *   parse_features  read + tl_example_parse + tl_example_parse_features with
 *                   40 FixedLen scalar specs + free: records/s, what a
 *                   training input pipeline does per record.
 * MB/s is 10^6 bytes a second. Then the Python peer (bench/py_input.py;
 * TPULOOP_BENCH_INPUT_PEER overrides the path, TPULOOP_BENCH_PYTHON the
 * interpreter, default /usr/bin/python3) reads the criteo file while it still
 * exists and prints its own lines; where it cannot run, one "skipped" line
 * says why. Both sides print checksums of the values they pulled out, so a
 * ratio never compares different work.
 *
 *     bench_input [read] [gzip] [parse] [peer]    (no argument: all four)
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/compress.h"
#include "io/tfrecord.h"
#include "tpuloop/example.h"
#include "tpuloop/example.pb-c.h"
#include "util/bench_util.h"

enum { REPS = 5, CRITEO_RECORDS = 300000, N_DENSE = 13, N_CAT = 26, N_FEAT = 1 + N_DENSE + N_CAT };
#define LARGE_PAYLOAD ((size_t)64 << 10)
#define LARGE_RECORDS 16384 /* 1 GiB of payload */

static char keys[N_FEAT][8]; /* "label", "I1".."I13", "C1".."C26" */

/* The values' checksums: integers summed mod 2^64, floats (small whole
 * numbers, so every sum is exact in a double) summed. */
typedef struct checksum {
    uint64_t ints;
    double floats;
} checksum;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_input: %s: %s\n", what, tl_last_error());
    return 1;
}

static double file_bytes(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (double)sb.st_size : 0;
}

/* Writes the criteo file plain and GZIP-compressed; *sum gets the checksum
 * of every value written. */
static int write_criteo(const char *path, const char *gz_path, checksum *sum)
{
    tl_tfrecord_writer *w = NULL;
    tl_tfrecord_zwriter *z = NULL;
    if (tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w) != TL_OK)
        return fail("open criteo");
    if (tl_tfrecord_zwriter_open(gz_path, O_CREAT | O_TRUNC, TL_TFRECORD_GZIP, -1, &z) != TL_OK) {
        tl_tfrecord_writer_destroy(w);
        return fail("open criteo.gz");
    }
    int64_t ints[1 + N_CAT];
    float floats[N_DENSE];
    Tpuloop__Int64List il[1 + N_CAT];
    Tpuloop__FloatList fl[N_DENSE];
    Tpuloop__Feature feat[N_FEAT];
    Tpuloop__Features__FeatureEntry ent[N_FEAT];
    Tpuloop__Features__FeatureEntry *entp[N_FEAT];
    for (int k = 0; k < N_FEAT; k++) {
        tpuloop__feature__init(&feat[k]);
        tpuloop__features__feature_entry__init(&ent[k]);
        ent[k].key = keys[k];
        ent[k].value = &feat[k];
        entp[k] = &ent[k];
        if (k >= 1 && k <= N_DENSE) {
            Tpuloop__FloatList *f = &fl[k - 1];
            tpuloop__float_list__init(f);
            f->n_value = 1;
            f->value = &floats[k - 1];
            feat[k].kind_case = TPULOOP__FEATURE__KIND_FLOAT_LIST;
            feat[k].float_list = f;
        } else {
            int j = k == 0 ? 0 : k - N_DENSE;
            tpuloop__int64_list__init(&il[j]);
            il[j].n_value = 1;
            il[j].value = &ints[j];
            feat[k].kind_case = TPULOOP__FEATURE__KIND_INT64_LIST;
            feat[k].int64_list = &il[j];
        }
    }
    Tpuloop__Features fs = TPULOOP__FEATURES__INIT;
    fs.n_feature = N_FEAT;
    fs.feature = entp;
    Tpuloop__Example ex = TPULOOP__EXAMPLE__INIT;
    ex.features = &fs;
    uint8_t buf[4096];
    uint64_t seed = 42;
    int rc = 0;
    for (int i = 0; i < CRITEO_RECORDS && rc == 0; i++) {
        uint64_t u = splitmix(&seed);
        ints[0] = (u & 3) == 0; /* a click one time in four */
        for (int d = 0; d < N_DENSE; d++) {
            /* counts: mostly small, a few in the thousands */
            u = splitmix(&seed);
            floats[d] = (float)((u & 0xff) >> (u >> 61 & 7)) * (float)(1 + (u >> 8 & 15));
            sum->floats += floats[d];
        }
        for (int c = 1; c <= N_CAT; c++)
            ints[c] = (int64_t)(splitmix(&seed) & 0xffffffffu); /* 32-bit hashes, as Criteo's */
        for (int c = 0; c <= N_CAT; c++)
            sum->ints += (uint64_t)ints[c];
        size_t n = tpuloop__example__get_packed_size(&ex);
        if (n > sizeof buf) {
            fprintf(stderr, "bench_input: a record of %zu bytes\n", n);
            rc = 1;
            break;
        }
        tpuloop__example__pack(&ex, buf);
        if (tl_tfrecord_write(w, buf, n) != TL_OK)
            rc = fail("write criteo");
        else if (tl_tfrecord_zwriter_write(z, buf, n) != TL_OK)
            rc = fail("write criteo.gz");
    }
    if (tl_tfrecord_writer_destroy(w) != TL_OK && rc == 0)
        rc = fail("close criteo");
    if (tl_tfrecord_zwriter_destroy(z) != TL_OK && rc == 0)
        rc = fail("close criteo.gz");
    return rc;
}

static int write_large(const char *path)
{
    tl_tfrecord_writer *w;
    if (tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w) != TL_OK)
        return fail("open large");
    uint64_t *buf = malloc(LARGE_PAYLOAD);
    if (buf == NULL) {
        tl_tfrecord_writer_destroy(w);
        fprintf(stderr, "bench_input: out of memory\n");
        return 1;
    }
    uint64_t seed = 7;
    for (size_t i = 0; i < LARGE_PAYLOAD / 8; i++)
        buf[i] = splitmix(&seed);
    int rc = 0;
    for (int i = 0; i < LARGE_RECORDS && rc == 0; i++) {
        buf[(size_t)i % (LARGE_PAYLOAD / 8)] = splitmix(&seed); /* no two records alike */
        if (tl_tfrecord_write(w, buf, LARGE_PAYLOAD) != TL_OK)
            rc = fail("write large");
    }
    free(buf);
    if (tl_tfrecord_writer_destroy(w) != TL_OK && rc == 0)
        rc = fail("close large");
    return rc;
}

/* What one pass over a file does. */
typedef enum { PASS_READ, PASS_READ_GZIP, PASS_PARSE, PASS_FEATURES } pass_kind;

static tl_feature_spec specs[N_FEAT];

static void init_specs(void)
{
    for (int k = 0; k < N_FEAT; k++) {
        specs[k] = (tl_feature_spec){.key = keys[k],
                                     .type = TL_SPEC_FIXED_LEN,
                                     .dtype = k >= 1 && k <= N_DENSE ? TL_FEATURE_FLOAT : TL_FEATURE_INT64,
                                     .rank = 0};
    }
}

/* One pass over path: *records and *bytes (uncompressed framing) read, and
 * with PASS_FEATURES the checksum of the values. Returns 0 on success. */
static int one_pass(const char *path, pass_kind kind, uint64_t *records, uint64_t *bytes, checksum *sum)
{
    tl_tfrecord_zreader *z = NULL;
    tl_tfrecord_reader *r = NULL;
    tl_status st;
    if (kind == PASS_READ_GZIP) {
        st = tl_tfrecord_zreader_open(path, TL_TFRECORD_GZIP, &z);
        r = st == TL_OK ? tl_tfrecord_zreader_records(z) : NULL;
    } else {
        st = tl_tfrecord_reader_open(path, &r);
    }
    if (st != TL_OK)
        return fail("open");
    const uint8_t *rec;
    size_t n;
    uint64_t count = 0;
    tl_parsed_feature out[N_FEAT];
    *sum = (checksum){0, 0};
    while ((st = tl_tfrecord_next(r, &rec, &n)) == TL_OK && rec != NULL) {
        if (kind == PASS_PARSE || kind == PASS_FEATURES) {
            tl_example *ex;
            st = tl_example_parse(rec, n, count, &ex);
            if (st == TL_OK && kind == PASS_FEATURES) {
                st = tl_example_parse_features(ex, specs, N_FEAT, out);
                if (st == TL_OK) {
                    for (int k = 0; k < N_FEAT; k++) {
                        if (out[k].dtype == TL_FEATURE_FLOAT)
                            sum->floats += out[k].floats[0];
                        else
                            sum->ints += (uint64_t)out[k].int64s[0];
                    }
                    tl_parsed_features_free(out, N_FEAT);
                }
            }
            tl_example_destroy(ex);
            if (st != TL_OK)
                break;
        }
        count++;
    }
    *records = count;
    *bytes = tl_tfrecord_reader_offset(r);
    if (z != NULL)
        tl_tfrecord_zreader_destroy(z);
    else
        tl_tfrecord_reader_destroy(r);
    return st == TL_OK ? 0 : fail("read");
}

/* Runs a pass once to warm up and REPS times timed; prints its line. */
static int measure(const char *what, const char *file, const char *path, pass_kind kind, double compressed,
                   const checksum *want)
{
    double secs[REPS];
    uint64_t records = 0, bytes = 0;
    checksum sum;
    for (int r = -1; r < REPS; r++) {
        double t0 = bench_now();
        if (one_pass(path, kind, &records, &bytes, &sum) != 0)
            return 1;
        if (r >= 0)
            secs[r] = bench_now() - t0;
    }
    if (kind == PASS_FEATURES && (sum.ints != want->ints || sum.floats != want->floats)) {
        fprintf(stderr, "bench_input: the parsed values' checksums differ from the written ones\n");
        return 1;
    }
    printf("{\"bench\": \"tpuloop_input\", \"what\": \"%s\", \"file\": \"%s\", \"records\": %llu, \"bytes\": %llu, "
           "\"unit\": \"%s\", \"reps\": [",
           what, file, (unsigned long long)records, (unsigned long long)bytes,
           kind == PASS_PARSE || kind == PASS_FEATURES ? "records/s" : "MB/s");
    for (int r = 0; r < REPS; r++) {
        double v = kind == PASS_PARSE || kind == PASS_FEATURES ? (double)records / secs[r] : (double)bytes / secs[r] / 1e6;
        printf("%s%.1f", r ? ", " : "", v);
    }
    double t = bench_median(secs, REPS); /* sorted: [0] fastest */
    if (kind == PASS_PARSE || kind == PASS_FEATURES)
        printf("], \"median\": %.1f, \"min\": %.1f, \"max\": %.1f, \"us_per_record\": %.3f, \"MB_per_s\": %.1f",
               (double)records / t, (double)records / secs[REPS - 1], (double)records / secs[0],
               t / (double)records * 1e6, (double)bytes / t / 1e6);
    else
        printf("], \"median\": %.1f, \"min\": %.1f, \"max\": %.1f, \"records_per_s\": %.1f", (double)bytes / t / 1e6,
               (double)bytes / secs[REPS - 1] / 1e6, (double)bytes / secs[0] / 1e6, (double)records / t);
    if (kind == PASS_READ_GZIP)
        printf(", \"compressed_bytes\": %.0f, \"compressed_MB_per_s\": %.1f", compressed, compressed / t / 1e6);
    if (kind == PASS_FEATURES)
        printf(", \"specs\": %d, \"checksum_ints\": %llu, \"checksum_floats\": %.1f", N_FEAT,
               (unsigned long long)sum.ints, sum.floats);
    printf("}\n");
    fflush(stdout);
    return 0;
}

/* Runs the Python peer on the criteo file, its lines going to our stdout. */
static void run_peer(const char *path, const checksum *want)
{
    const char *py = getenv("TPULOOP_BENCH_PYTHON") ? getenv("TPULOOP_BENCH_PYTHON") : "/usr/bin/python3";
    const char *script = getenv("TPULOOP_BENCH_INPUT_PEER") ? getenv("TPULOOP_BENCH_INPUT_PEER") : "bench/py_input.py";
    if (access(script, R_OK) != 0) {
        printf("{\"bench\": \"py_input\", \"skipped\": \"%s not found (run from the repository root, or set "
               "TPULOOP_BENCH_INPUT_PEER)\"}\n",
               script);
        fflush(stdout);
        return;
    }
    char ints[32], floats[64];
    snprintf(ints, sizeof ints, "%llu", (unsigned long long)want->ints);
    snprintf(floats, sizeof floats, "%.1f", want->floats);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(py, py, script, path, ints, floats, (char *)NULL);
        printf("{\"bench\": \"py_input\", \"skipped\": \"cannot run %s\"}\n", py);
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("{\"bench\": \"py_input\", \"failed\": \"%s %s exited with status %d\"}\n", py, script, status);
        fflush(stdout);
    }
}

/* Whether figure `what` was asked for: all of them when argv names none. */
static bool wanted(int argc, char **argv, const char *what)
{
    if (argc < 2)
        return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], what) == 0)
            return true;
    return false;
}

static int run(const char *dir, int argc, char **argv)
{
    char criteo[600], gz[600], large[600];
    snprintf(criteo, sizeof criteo, "%s/criteo.tfrecord", dir);
    snprintf(gz, sizeof gz, "%s/criteo.tfrecord.gz", dir);
    snprintf(large, sizeof large, "%s/large.tfrecord", dir);
    checksum want = {0, 0};
    int rc = write_criteo(criteo, gz, &want);
    if (rc == 0 && wanted(argc, argv, "read")) {
        rc = write_large(large);
        if (rc == 0)
            rc = measure("read_crc", "large_64KiB", large, PASS_READ, 0, NULL);
        unlink(large); /* 1 GiB: gone as soon as it is measured */
        if (rc == 0)
            rc = measure("read_crc", "criteo", criteo, PASS_READ, 0, NULL);
    }
    if (rc == 0 && wanted(argc, argv, "gzip"))
        rc = measure("read_crc_gzip", "criteo", gz, PASS_READ_GZIP, file_bytes(gz), NULL);
    if (rc == 0 && wanted(argc, argv, "parse")) {
        rc = measure("parse_example", "criteo", criteo, PASS_PARSE, 0, NULL);
        if (rc == 0)
            rc = measure("parse_features", "criteo", criteo, PASS_FEATURES, 0, &want);
    }
    if (rc == 0 && wanted(argc, argv, "peer"))
        run_peer(criteo, &want);
    unlink(criteo);
    unlink(gz);
    return rc;
}

int main(int argc, char **argv)
{
    tl_set_log_level(TL_LOG_ERROR);
    snprintf(keys[0], sizeof keys[0], "label");
    for (int d = 0; d < N_DENSE; d++)
        snprintf(keys[1 + d], sizeof keys[0], "I%d", d + 1);
    for (int c = 0; c < N_CAT; c++)
        snprintf(keys[1 + N_DENSE + c], sizeof keys[0], "C%d", c + 1);
    init_specs();
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tpuloop-bench-input-XXXXXX", tmp);
    if (mkdtemp(dir) == NULL) {
        perror("bench_input: mkdtemp");
        return 1;
    }
    int rc = run(dir, argc, argv);
    rmdir(dir);
    return rc;
}

/* bench_ckpt.c — checkpoint throughput for a 1 GiB model: 16 float32
 * tensors of 64 MiB written as one safetensors file and read back.
 *
 *   write: tl_ckpt_writer_write — header, data with its CRC-32C computed on
 *          the way, the header rewritten, fsync, rename, fsync of the
 *          directory: the whole crash-safe commit, so the figure includes
 *          the time the disk takes to make the file durable.
 *   read:  tl_ckpt_open (map, validate, CRC-32C of every byte) and a memcpy
 *          of every tensor into the model's own buffers, as a restore does,
 *          then close. The file was just written, so it is read from the
 *          page cache: this is the CPU cost of a restore, not the disk's.
 *
 * GB/s is 10^9 bytes of tensor data a second; each figure is the median of
 * 3 repetitions after one warm-up. The files live in a fresh directory
 * under /tmp (TMPDIR when set), removed at the end. Prints one JSON line per
 * figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpuloop/checkpoint.h"
#include "util/bench_util.h"

enum { REPS = 3, TENSORS = 16 };
#define TENSOR_FLOATS ((size_t)16 << 20) /* 64 MiB */
#define TOTAL_BYTES ((double)TENSORS * TENSOR_FLOATS * sizeof(float))

static void print_figure(const char *what, double *gbps)
{
    printf("{\"bench\": \"tpuloop_ckpt\", \"what\": \"%s\", \"tensors\": %d, \"bytes\": %.0f, \"unit\": \"GB/s\", "
           "\"reps\": [",
           what, TENSORS, TOTAL_BYTES);
    for (int r = 0; r < REPS; r++)
        printf("%s%.3f", r ? ", " : "", gbps[r]);
    (void)bench_median(gbps, REPS); /* sorted: [0] min, [REPS-1] max */
    printf("], \"median\": %.3f, \"min\": %.3f, \"max\": %.3f}\n", gbps[REPS / 2], gbps[0], gbps[REPS - 1]);
    fflush(stdout);
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_ckpt: %s: %s\n", what, tl_last_error());
    return 1;
}

static int run(const char *path, float **src, float **dst)
{
    tl_ckpt_writer *w;
    if (tl_ckpt_writer_create(&w) != TL_OK)
        return fail("writer");
    for (int t = 0; t < TENSORS; t++) {
        char name[32];
        snprintf(name, sizeof name, "layer_%02d/kernel", t);
        int64_t shape[2] = {4096, (int64_t)(TENSOR_FLOATS / 4096)};
        if (tl_ckpt_writer_add(w, name, TL_CKPT_F32, shape, 2, src[t]) != TL_OK) {
            tl_ckpt_writer_destroy(w);
            return fail("add");
        }
    }
    double wr[REPS], rd[REPS];
    for (int r = -1; r < REPS; r++) { /* r = -1: warm-up */
        double t0 = bench_now();
        if (tl_ckpt_writer_write(w, path) != TL_OK) {
            tl_ckpt_writer_destroy(w);
            return fail("write");
        }
        double t1 = bench_now();
        tl_ckpt_reader *rd_ = NULL;
        if (tl_ckpt_open(path, 0, &rd_) != TL_OK) {
            tl_ckpt_writer_destroy(w);
            return fail("open");
        }
        for (int t = 0; t < TENSORS; t++) {
            tl_ckpt_tensor_info info;
            char name[32];
            snprintf(name, sizeof name, "layer_%02d/kernel", t);
            if (tl_ckpt_find(rd_, name, &info) != TL_OK) {
                tl_ckpt_close(rd_);
                tl_ckpt_writer_destroy(w);
                return fail("find");
            }
            memcpy(dst[t], info.data, info.bytes);
        }
        tl_ckpt_close(rd_);
        double t2 = bench_now();
        if (r >= 0) {
            wr[r] = TOTAL_BYTES / (t1 - t0) / 1e9;
            rd[r] = TOTAL_BYTES / (t2 - t1) / 1e9;
        }
    }
    tl_ckpt_writer_destroy(w);
    for (int t = 0; t < TENSORS; t++)
        if (memcmp(src[t], dst[t], TENSOR_FLOATS * sizeof(float)) != 0) {
            fprintf(stderr, "bench_ckpt: tensor %d read back different\n", t);
            return 1;
        }
    print_figure("write", wr);
    print_figure("read", rd);
    return 0;
}

int main(void)
{
    tl_set_log_level(TL_LOG_ERROR);
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tpuloop-bench-ckpt-XXXXXX", tmp);
    if (mkdtemp(dir) == NULL) {
        perror("bench_ckpt: mkdtemp");
        return 1;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/model.ckpt-1.safetensors", dir);
    float *src[TENSORS] = {0}, *dst[TENSORS] = {0};
    int rc = 0;
    for (int t = 0; t < TENSORS && rc == 0; t++) {
        src[t] = malloc(TENSOR_FLOATS * sizeof(float));
        dst[t] = malloc(TENSOR_FLOATS * sizeof(float));
        if (src[t] == NULL || dst[t] == NULL) {
            fprintf(stderr, "bench_ckpt: out of memory for 2 GiB of tensors\n");
            rc = 1;
            break;
        }
        for (size_t i = 0; i < TENSOR_FLOATS; i++)
            src[t][i] = (float)(i % 1000) * 0.001f + (float)t;
        memset(dst[t], 0, TENSOR_FLOATS * sizeof(float));
    }
    if (rc == 0)
        rc = run(path, src, dst);
    for (int t = 0; t < TENSORS; t++) {
        free(src[t]);
        free(dst[t]);
    }
    unlink(path);
    rmdir(dir);
    return rc;
}

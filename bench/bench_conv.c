/* bench_conv.c — the convolution engines of src/kernels/conv.h on a small
 * CNN's shapes (batch 128, NHWC, one thread): oneDNN on the NHWC images in
 * place, oneDNN on its blocked layouts (reordering the images in and out)
 * and im2col + OpenBLAS GEMM (tl_k_matmul), forward and both gradients.
 *
 * Each (shape, pass) runs ROUNDS rounds after a warm-up call of each engine
 * (which builds oneDNN's plan); a round times one call of each engine, in
 * an order rotated each round, so drift and a noisy neighbour hit all alike.
 * Prints one JSON line per (shape, pass): min and max milliseconds of each
 * engine, the faster by the minimum, and the engine the AUTO rule picks
 * (tl_k_conv2d_engine), and the heap allocations one call of each engine
 * makes after the warm-up — all of them: malloc and friends are counted
 * here, so oneDNN's and libstdc++'s own show up (-1 under a sanitizer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv.h"
#include "kernels/kernels.h"
#include "util/bench_util.h"

enum { ROUNDS = 9, BATCH = 128 }; /* bench_conv N: N rounds instead */

/* ---- counting allocations ------------------------------------------------------
 * glibc's allocator under its __libc_ names, with a counter in front; not
 * under a sanitizer, which brings its own malloc. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COUNT_ALLOCS 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static long allocs;
/* Exported from the executable (the build hides symbols by default), so
 * the shared libraries' calls land here. */
#define EXPORT __attribute__((visibility("default")))
EXPORT void *malloc(size_t n);
EXPORT void *calloc(size_t n, size_t size);
EXPORT void *realloc(void *p, size_t n);
EXPORT int posix_memalign(void **p, size_t align, size_t n);
EXPORT void *aligned_alloc(size_t align, size_t n);
EXPORT void *memalign(size_t align, size_t n);
void *malloc(size_t n)
{
    __atomic_fetch_add(&allocs, 1, __ATOMIC_RELAXED);
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t size)
{
    __atomic_fetch_add(&allocs, 1, __ATOMIC_RELAXED);
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n)
{
    __atomic_fetch_add(&allocs, 1, __ATOMIC_RELAXED);
    return __libc_realloc(p, n);
}
int posix_memalign(void **p, size_t align, size_t n)
{
    __atomic_fetch_add(&allocs, 1, __ATOMIC_RELAXED);
    *p = __libc_memalign(align, n);
    return *p != NULL || n == 0 ? 0 : 12; /* ENOMEM */
}
void *aligned_alloc(size_t align, size_t n)
{
    __atomic_fetch_add(&allocs, 1, __ATOMIC_RELAXED);
    return __libc_memalign(align, n);
}
void *memalign(size_t align, size_t n)
{
    __atomic_fetch_add(&allocs, 1, __ATOMIC_RELAXED);
    return __libc_memalign(align, n);
}
#endif

typedef struct shape {
    const char *name;
    int64_t h, c, k, o, stride;
} shape;

static const shape shapes[] = {
    {"28x28x1 3x3 1->16", 28, 1, 3, 16, 1}, /* the stem */
    {"28x28x16 3x3 16->16", 28, 16, 3, 16, 1}, {"14x14x32 3x3 32->32", 14, 32, 3, 32, 1},
    {"7x7x64 3x3 64->64", 7, 64, 3, 64, 1},    {"28x28x16 1x1/2 16->32", 28, 16, 1, 32, 2},
    {"14x14x32 1x1/2 32->64", 14, 32, 1, 64, 2}, {"28x28x16 3x3/2 16->32", 28, 16, 3, 32, 2},
    {"14x14x32 3x3/2 32->64", 14, 32, 3, 64, 2},
    /* Beside the CNN's: where the 7x7x64 forward's GEMM edge comes from. */
    {"14x14x64 3x3 64->64", 14, 64, 3, 64, 1}, {"7x7x32 3x3 32->32", 7, 32, 3, 32, 1},
};

static const char *const pass_names[3] = {"forward", "grad_input", "grad_filter"};

typedef struct bufs {
    float *x, *f, *y, *scratch;
    int64_t scratch_floats;
} bufs;

static float *filled(int64_t n, float v)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (p == NULL) {
        fprintf(stderr, "bench_conv: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        p[i] = v * (float)((i * 7919) % 17 - 8) / 8.0f;
    return p;
}

/* The engines compared: oneDNN on NHWC in place, oneDNN on its blocked
 * layouts (reorders in and out), im2col + GEMM. */
static const struct {
    tl_k_conv_impl impl;
    const char *name;
} engines[] = {
    {TL_K_CONV_DNNL, "onednn"},
    {TL_K_CONV_DNNL_BLOCKED, "onednn_blocked"},
    {TL_K_CONV_GEMM, "im2col_gemm"},
};
enum { NENGINES = sizeof engines / sizeof engines[0] };

static const char *engine_name(tl_k_conv_impl impl)
{
    for (int e = 0; e < NENGINES; e++)
        if (engines[e].impl == impl)
            return engines[e].name;
    return "?";
}

static tl_status call(const tl_k_conv_geom *cv, int pass, bufs *b)
{
    switch (pass) {
    case 0: return tl_k_conv2d(cv, b->x, b->f, b->y, b->scratch, b->scratch_floats);
    case 1: return tl_k_conv2d_grad_input(cv, b->y, b->f, b->x, b->scratch, b->scratch_floats);
    default: return tl_k_conv2d_grad_filter(cv, b->x, b->y, b->f, b->scratch, b->scratch_floats);
    }
}

static double timed(const tl_k_conv_geom *cv, int pass, bufs *b)
{
    double t0 = bench_now();
    tl_status st = call(cv, pass, b);
    double ms = (bench_now() - t0) * 1e3;
    if (st != TL_OK) {
        fprintf(stderr, "bench_conv: %s\n", tl_last_error());
        exit(1);
    }
    return ms;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : ROUNDS;
    rounds = rounds >= 1 && rounds <= 1000 ? rounds : ROUNDS;
    tl_k_blas_single_thread();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        tl_k_conv_geom cv[NENGINES];
        const int64_t x[4] = {BATCH, sh->h, sh->h, sh->c}, f[4] = {sh->k, sh->k, sh->c, sh->o};
        const int64_t strides[2] = {sh->stride, sh->stride}, dil[2] = {1, 1};
        for (int e = 0; e < NENGINES; e++) {
            tl_k_conv2d_init(&cv[e], x, f, 1, strides, dil, true);
            cv[e].impl = engines[e].impl;
        }
        bufs b;
        b.x = filled(BATCH * sh->h * sh->h * sh->c, 1.0f);
        b.f = filled(sh->k * sh->k * sh->c * sh->o, 0.1f);
        b.y = filled(BATCH * cv[0].oh * cv[0].ow * sh->o, 1.0f);
        for (int pass = 0; pass < 3; pass++) {
            b.scratch_floats = 0;
            for (int e = 0; e < NENGINES; e++) {
                int64_t need;
                if (tl_k_conv2d_scratch(&cv[e], (tl_k_conv_pass)pass, &need) != TL_OK) {
                    fprintf(stderr, "bench_conv: %s\n", tl_last_error());
                    return 1;
                }
                b.scratch_floats = need > b.scratch_floats ? need : b.scratch_floats;
            }
            b.scratch = filled(b.scratch_floats + 1, 0.0f);
            double lo[NENGINES], hi[NENGINES];
            for (int e = 0; e < NENGINES; e++) {
                lo[e] = 1e30;
                hi[e] = 0;
                timed(&cv[e], pass, &b); /* warm-up: plans, page faults */
            }
            for (int r = 0; r < rounds; r++)
                for (int k = 0; k < NENGINES; k++) {
                    int e = (r + k) % NENGINES; /* rotate which engine goes first */
                    double ms = timed(&cv[e], pass, &b);
                    lo[e] = ms < lo[e] ? ms : lo[e];
                    hi[e] = ms > hi[e] ? ms : hi[e];
                }
            tl_k_conv_geom autocv = cv[0];
            autocv.impl = TL_K_CONV_AUTO;
            tl_k_conv_impl pick = tl_k_conv2d_engine(&autocv, (tl_k_conv_pass)pass);
            long count[NENGINES];
            int best = 0;
            for (int e = 0; e < NENGINES; e++) {
                count[e] = -1;
#ifdef COUNT_ALLOCS
                long before = allocs;
                call(&cv[e], pass, &b);
                count[e] = allocs - before;
#endif
                best = lo[e] < lo[best] ? e : best;
            }
            printf("{\"bench\": \"conv\", \"shape\": \"%s\", \"batch\": %d, \"pass\": \"%s\", \"rounds\": %d",
                   sh->name, BATCH, pass_names[pass], rounds);
            for (int e = 0; e < NENGINES; e++)
                printf(", \"%s_ms\": [%.2f, %.2f]", engines[e].name, lo[e], hi[e]);
            printf(", \"faster\": \"%s\", \"auto\": \"%s\", \"allocations_per_call\": {", engines[best].name,
                   engine_name(pick));
            for (int e = 0; e < NENGINES; e++)
                printf("%s\"%s\": %ld", e ? ", " : "", engines[e].name, count[e]);
            printf("}}\n");
            fflush(stdout);
            free(b.scratch);
        }
        free(b.x);
        free(b.f);
        free(b.y);
    }
    return 0;
}

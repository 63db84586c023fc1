/*
 * conv.h — the vision kernels on NHWC float32 images: 2-D convolution
 * (grouped and depthwise included) and its two gradients, max and average
 * pooling and their gradients, and resizing (nearest, bilinear) and its
 * gradient, each with its float64 twin. The conventions of kernels.h hold
 * (caller-allocated buffers, restrict, `_ref` twins, two tiers of failure,
 * deterministic results); what differs is said here.
 *
 * Shapes follow TensorFlow: images x (n, h, w, c), filters (kh, kw, c /
 * groups, o) — TF's HWIO — and windows padded by TF's rule for each spatial
 * axis (tl_k_window): VALID has no padding and out = ceil((in - keff + 1) /
 * stride); SAME has out = ceil(in / stride) and pads pad_total = max((out -
 * 1)·stride + keff - in, 0), pad_total / 2 before and the odd one after, with
 * keff = (k - 1)·dilation + 1.
 *
 * Engines. Convolution and pooling run on oneDNN 2.6 (vision_dnnl.h: plans
 * built once per thread and geometry, one thread, user scratchpad); an
 * im2col + OpenBLAS GEMM (tl_k_matmul) engine does the convolutions on
 * request, measured against it by bench/bench_conv.c — see "Which engine"
 * below. Resize is plain C loops: TF's index and weight arithmetic is
 * float32 in a fixed order that oneDNN's resampling does not reproduce (it
 * maps coordinates as round((y + 0.5)·in/out - 0.5) and weights its two
 * neighbours differently), and the loops are memory-bound anyway.
 *
 * Scratch. oneDNN's passes reorder the HWIO filter (and, on its blocked
 * layouts, the images) into its layouts and back, and the GEMM passes lay
 * out im2col columns; both live in the caller's scratch, whose size
 * (floats) tl_k_conv2d_scratch and tl_k_pool2d_scratch tell. The first call
 * on a thread for a geometry builds its plan (allocating); later calls
 * allocate nothing of tpuloop's (oneDNN's execute makes a few transient
 * allocations of its own per call; see vision_dnnl.h).
 *
 * Determinism. oneDNN runs single-threaded in the calling thread
 * (omp_set_num_threads(1) on that thread before any primitive is created or
 * run), its kernels accumulate in an order fixed by the plan, the im2col
 * GEMM path chunks the batch by a size fixed by the geometry, and OpenBLAS
 * has one thread (tl_k_blas_single_thread): the same inputs give the same
 * bits on the same machine. Another CPU may pick other oneDNN kernels (AVX2
 * against AVX-512) and round differently.
 *
 * Layouts. oneDNN's convolutions read x and write y (and dy, dx) as NHWC
 * in place, with only the filter reordered into its layout, wherever it has
 * a JIT kernel for NHWC (every geometry tried on AVX2 and AVX-512, grouped
 * and depthwise included; a "ref:" kernel counts as none): TL_K_CONV_DNNL.
 * Where it has none, the pass falls back to its blocked layouts (nChw16c on
 * AVX-512, nChw8c on AVX2), reordering the images in and out; the training
 * pair below then shares those reorders between the passes.
 * TL_K_CONV_DNNL_BLOCKED asks for the blocked layouts always, for the tests
 * and bench_conv.
 *
 * Which engine. bench/bench_conv.c, `bench_conv 9`: batch 128, SAME, one
 * thread, 9 rotating rounds, minimum ms, on a 2-core Intel Xeon VM with
 * AVX-512 (oneDNN 2.6's jit:avx512_core and brgconv kernels), then the same
 * run under ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN's jit:avx2; OpenBLAS keeps its
 * AVX-512 GEMM). NHWC is oneDNN in place, blocked its own layouts with the
 * reorders, GEMM im2col + OpenBLAS:
 *
 *                                           AVX-512                AVX2
 *   shape                 pass          NHWC blocked   GEMM     NHWC blocked   GEMM
 *   28x28x1 3x3 1->16     forward       0.52   0.71   2.98     0.43   0.86   3.00
 *   28x28x1 3x3 1->16     grad_input    2.41   3.28   2.91     2.22   2.88   2.80
 *   28x28x1 3x3 1->16     grad_filter   0.24   0.68   3.11     0.45   2.60   3.17
 *   28x28x16 3x3 16->16   forward       2.71   3.39   8.00     5.10   6.16   7.90
 *   28x28x16 3x3 16->16   grad_input    2.43   3.27   8.28     3.92   4.96   8.78
 *   28x28x16 3x3 16->16   grad_filter   2.05   3.46   8.77     4.25   5.13   8.57
 *   14x14x32 3x3 32->32   forward       2.24   2.71   5.12     3.58   4.07   5.03
 *   14x14x32 3x3 32->32   grad_input    2.50   2.74   5.35     3.41   3.92   5.35
 *   14x14x32 3x3 32->32   grad_filter   2.20   2.73   5.73     3.89   4.28   5.31
 *   7x7x64 3x3 64->64     forward       2.23   2.33   3.97     3.62   3.84   3.79
 *   7x7x64 3x3 64->64     grad_input    2.20   2.21   3.75     3.36   3.50   3.49
 *   7x7x64 3x3 64->64     grad_filter   2.24   2.52   4.08     3.67   3.79   3.82
 *   28x28x16 1x1/2 16->32 forward       0.41   0.95   0.63     0.42   1.05   0.61
 *   28x28x16 1x1/2 16->32 grad_input    0.35   1.05   0.79     0.50   1.12   0.79
 *   28x28x16 1x1/2 16->32 grad_filter   0.34   0.95   0.66     0.50   1.10   0.65
 *   14x14x32 1x1/2 32->64 forward       0.23   0.51   0.33     0.27   0.62   0.31
 *   14x14x32 1x1/2 32->64 grad_input    0.22   0.57   0.42     0.37   0.69   0.41
 *   14x14x32 1x1/2 32->64 grad_filter   0.22   0.54   0.38     0.33   0.67   0.36
 *   28x28x16 3x3/2 16->32 forward       1.28   1.82   2.87     1.82   2.57   2.66
 *   28x28x16 3x3/2 16->32 grad_input    1.35   2.00   3.08     2.05   2.67   2.89
 *   28x28x16 3x3/2 16->32 grad_filter   1.48   2.08   3.18     2.36   2.77   2.93
 *   14x14x32 3x3/2 32->64 forward       1.28   1.44   1.98     1.93   2.30   1.87
 *   14x14x32 3x3/2 32->64 grad_input    1.36   1.71   2.09     2.21   2.45   2.01
 *   14x14x32 3x3/2 32->64 grad_filter   1.53   1.76   2.15     2.11   2.31   2.00
 *   14x14x64 3x3 64->64   forward       8.94  10.34  16.37    14.38  15.83  15.45
 *   14x14x64 3x3 64->64   grad_input   10.82  10.49  15.26    13.59  14.74  14.42
 *   14x14x64 3x3 64->64   grad_filter   8.61  10.71  15.37    15.43  16.42  15.30
 *   7x7x32 3x3 32->32     forward       0.49   0.54   1.19     0.88   0.95   1.18
 *   7x7x32 3x3 32->32     grad_input    0.48   0.53   1.22     0.81   0.87   1.22
 *   7x7x32 3x3 32->32     grad_filter   0.52   0.64   1.27     0.90   0.96   1.29
 *
 * So (tl_k_conv2d_engine): oneDNN for every pass of every geometry. On
 * AVX-512 its NHWC kernels lead everywhere, by 1.1-4x over GEMM and up to
 * 2.8x over its own blocked layouts (the reorders cost more than the
 * kernels save); on AVX2 they lead or tie (within 10 %: GEMM is ahead on
 * the 14x14x32/2 passes by 3-9 %). The CNN's training step gets 1.2x
 * faster than with the blocked layouts and GEMM for 1x1 and the c >= 32
 * filter gradients (the rule measured on an AVX2 AMD EPYC before, where
 * only the blocked layouts were tried). The im2col + GEMM engine stays for
 * TL_K_CONV_GEMM: the tests hold oneDNN against it.
 *
 * Errors: a geometry that does not fit (a negative size, a window larger
 * than the padded input) is a bug in the caller (TL_ASSERT): the graph
 * checks shapes when the op is traced. oneDNN failures return TL_ENOMEM,
 * TL_ENOTIMPL or TL_ERUNTIME naming the kernel and the oneDNN call; a scratch
 * smaller than the plan needs returns TL_EINVAL.
 */
#ifndef TL_KERNELS_CONV_H
#define TL_KERNELS_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "tpuloop/base.h"

/*
 * TF's window on one spatial axis: the output size and the padding before
 * and after for an input of size in, a window of k taps dilation apart and
 * the stride, SAME or VALID (see the top). False when VALID and the dilated
 * window is larger than in (TF: "Computed output size would be negative");
 * k, stride, dilation >= 1 and in >= 1 are the caller's to check.
 */
bool tl_k_window(int64_t in, int64_t k, int64_t stride, int64_t dilation, bool same, int64_t *out,
                 int64_t *pad_before, int64_t *pad_after);

/* ---- convolution ------------------------------------------------------------
 *
 * y[b, i, j, q] = sum over (u, v, r) of
 *     x[b, i·sh - pt + u·dh, j·sw - pl + v·dw, g·cg + r] · f[u, v, r, q]
 * with cg = c / groups input channels per group, q's group g = q / (o /
 * groups), and x zero outside the image (the padding). groups == c with o =
 * c·m is TF's depthwise_conv2d with multiplier m: its filter (kh, kw, c, m)
 * has the bytes of (kh, kw, 1, c·m), output channel r·m + s.
 *
 * Gradients, all overwriting their output: dx (n, h, w, c) from dy (n, oh,
 * ow, o) and f; df (kh, kw, cg, o) from x and dy.
 */
typedef enum {
    TL_K_CONV_AUTO = 0, /* the faster engine for the pass, as measured (see the top) */
    TL_K_CONV_DNNL,     /* oneDNN, on NHWC images in place where it can (see "Layouts" at the top) */
    TL_K_CONV_DNNL_BLOCKED, /* oneDNN on its blocked layouts, images reordered in and out */
    TL_K_CONV_GEMM      /* im2col + tl_k_matmul; groups == 1 only */
} tl_k_conv_impl;

typedef enum { TL_K_CONV_FORWARD = 0, TL_K_CONV_GRAD_INPUT, TL_K_CONV_GRAD_FILTER } tl_k_conv_pass;

typedef struct tl_k_conv_geom {
    int64_t n, h, w, c;               /* x (n, h, w, c) */
    int64_t kh, kw, o, groups;        /* f (kh, kw, c / groups, o) */
    int64_t stride_h, stride_w;       /* >= 1 */
    int64_t dilation_h, dilation_w;   /* >= 1 */
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int64_t oh, ow;                   /* y (n, oh, ow, o) */
    tl_k_conv_impl impl;
} tl_k_conv_geom;

/* The geometry of x (n, h, w, c) convolved with f (kh, kw, c / groups, o),
 * padding by TF's SAME or VALID rule; false when VALID does not fit. */
bool tl_k_conv2d_init(tl_k_conv_geom *cv, const int64_t x[4], const int64_t f[4], int64_t groups,
                      const int64_t strides[2], const int64_t dilations[2], bool same);

/* The engine a pass runs on (AUTO resolved). */
tl_k_conv_impl tl_k_conv2d_engine(const tl_k_conv_geom *cv, tl_k_conv_pass pass);
/* Whether the forward and both gradients run on oneDNN (either layout). */
bool tl_k_conv2d_all_dnnl(const tl_k_conv_geom *cv);

/*
 * Floats of scratch the pass needs, into *floats. Builds (and caches, on
 * the calling thread) the pass's oneDNN plan. Errors: those of oneDNN
 * (TL_ENOTIMPL for a geometry it has no kernel for, TL_ENOMEM), TL_EINVAL for
 * TL_K_CONV_GEMM with groups > 1.
 */
tl_status tl_k_conv2d_scratch(const tl_k_conv_geom *cv, tl_k_conv_pass pass, int64_t *floats);

tl_status tl_k_conv2d(const tl_k_conv_geom *cv, const float *restrict x, const float *restrict f, float *restrict y,
                      float *restrict scratch, int64_t scratch_floats);
tl_status tl_k_conv2d_grad_input(const tl_k_conv_geom *cv, const float *restrict dy, const float *restrict f,
                                 float *restrict dx, float *restrict scratch, int64_t scratch_floats);
tl_status tl_k_conv2d_grad_filter(const tl_k_conv_geom *cv, const float *restrict x, const float *restrict dy,
                                  float *restrict df, float *restrict scratch, int64_t scratch_floats);
/*
 * The training step's pair, on oneDNN for every pass (else TL_EINVAL). On
 * its blocked layouts (see "Layouts" at the top), oneDNN reorders x (n, h,
 * w, c) for the forward and again for the filter gradient, and dy for each
 * gradient. The forward tl_k_conv2d_keep leaves its blocked x in kept
 * (tl_k_conv2d_kept floats; 0 when the two kernels want different layouts
 * or x needs no reorder, as on NHWC in place, and then kept is not written), and tl_k_conv2d_backward computes dx and df in
 * one plan, reordering dy once when both kernels want one layout and reading
 * x from kept (NULL: from x). The primitives are those of the separate
 * passes: the same bits as tl_k_conv2d, _grad_input and _grad_filter. The
 * _scratch functions give each plan's floats, as tl_k_conv2d_scratch.
 */
tl_status tl_k_conv2d_kept(const tl_k_conv_geom *cv, int64_t *floats);
tl_status tl_k_conv2d_keep_scratch(const tl_k_conv_geom *cv, int64_t *floats);
tl_status tl_k_conv2d_keep(const tl_k_conv_geom *cv, const float *restrict x, const float *restrict f,
                           float *restrict y, float *restrict kept, float *restrict scratch, int64_t scratch_floats);
tl_status tl_k_conv2d_backward_scratch(const tl_k_conv_geom *cv, bool kept, int64_t *floats);
tl_status tl_k_conv2d_backward(const tl_k_conv_geom *cv, const float *restrict x, const float *restrict kept,
                               const float *restrict f, const float *restrict dy, float *restrict dx,
                               float *restrict df, float *restrict scratch, int64_t scratch_floats);

void tl_k_conv2d_ref(const tl_k_conv_geom *cv, const double *restrict x, const double *restrict f,
                     double *restrict y);
void tl_k_conv2d_grad_input_ref(const tl_k_conv_geom *cv, const double *restrict dy, const double *restrict f,
                                double *restrict dx);
void tl_k_conv2d_grad_filter_ref(const tl_k_conv_geom *cv, const double *restrict x, const double *restrict dy,
                                 double *restrict df);

/* ---- pooling ------------------------------------------------------------------
 *
 * Max and average over kh x kw windows, stride apart, per channel; padding
 * never counts: a max is taken over the window's elements inside the image,
 * and an average divides by their number (TF's avg_pool with SAME, which is
 * oneDNN's avg_exclude_padding). With TF's rule a window always holds at
 * least one element of the image.
 *
 * max_pool's gradient sends each dy to the first maximum of its window in
 * row-major (u, v) order, as TensorFlow's CPU MaxPoolGrad does (its forward
 * scan replaces the running maximum only on a strictly greater value);
 * several windows that pick the same element add up. avg_pool's gradient
 * spreads dy / count over the window's elements. NaN: not specified.
 */
typedef struct tl_k_pool_geom {
    int64_t n, h, w, c;               /* x (n, h, w, c) */
    int64_t kh, kw, stride_h, stride_w;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int64_t oh, ow;                   /* y (n, oh, ow, c) */
} tl_k_pool_geom;

bool tl_k_pool2d_init(tl_k_pool_geom *pl, const int64_t x[4], const int64_t ksize[2], const int64_t strides[2],
                      bool same);

/* Floats of scratch for the forward (backward false) or backward pass of max
 * (max true) or average pooling. Errors: those of oneDNN. */
tl_status tl_k_pool2d_scratch(const tl_k_pool_geom *pl, bool max, bool backward, int64_t *floats);

tl_status tl_k_max_pool2d(const tl_k_pool_geom *pl, const float *restrict x, float *restrict y,
                          float *restrict scratch, int64_t scratch_floats);
tl_status tl_k_max_pool2d_grad(const tl_k_pool_geom *pl, const float *restrict x, const float *restrict dy,
                               float *restrict dx, float *restrict scratch, int64_t scratch_floats);
tl_status tl_k_avg_pool2d(const tl_k_pool_geom *pl, const float *restrict x, float *restrict y,
                          float *restrict scratch, int64_t scratch_floats);
tl_status tl_k_avg_pool2d_grad(const tl_k_pool_geom *pl, const float *restrict dy, float *restrict dx,
                               float *restrict scratch, int64_t scratch_floats);
void tl_k_max_pool2d_ref(const tl_k_pool_geom *pl, const double *restrict x, double *restrict y);
void tl_k_max_pool2d_grad_ref(const tl_k_pool_geom *pl, const double *restrict x, const double *restrict dy,
                              double *restrict dx);
void tl_k_avg_pool2d_ref(const tl_k_pool_geom *pl, const double *restrict x, double *restrict y);
void tl_k_avg_pool2d_grad_ref(const tl_k_pool_geom *pl, const double *restrict dy, double *restrict dx);

/* ---- resize -------------------------------------------------------------------
 *
 * tf.image.resize (TF2: half_pixel_centers, no align_corners, no
 * antialias) of x (n, h, w, c) to y (n, oh, ow, c), per axis with scale =
 * (float)in / (float)out, all in float32 as TF's CPU kernels:
 *  - nearest: source index min(floor((i + 0.5f)·scale), in - 1);
 *  - bilinear: s = (i + 0.5f)·scale - 0.5f, lo = max(floor(s), 0), hi =
 *    min(ceil(s), in - 1), t = s - floor(s); top = a + (b - a)·tx, bottom
 *    likewise, y = top + (bottom - top)·ty (TF's compute_lerp).
 * Gradients (TF's ResizeNearestNeighborGrad / ResizeBilinearGrad): dx
 * overwritten; each dy[b, i, j, ch] is added in increasing (b, i, j) order,
 * bilinear's as dy·(1-ty)·(1-tx), dy·(1-ty)·tx, dy·ty·(1-tx), dy·ty·tx to
 * (lo, lo), (lo, hi), (hi, lo), (hi, hi) — TF's order, so the bits are TF's.
 * The twins compute the indices and lerps the same float32 way (they are the
 * op's definition) and the values in float64.
 */
typedef struct tl_k_resize_geom {
    int64_t n, h, w, c;   /* x (n, h, w, c) */
    int64_t oh, ow;       /* y (n, oh, ow, c) */
    bool nearest;         /* else bilinear */
} tl_k_resize_geom;

void tl_k_resize2d(const tl_k_resize_geom *rs, const float *restrict x, float *restrict y);
void tl_k_resize2d_grad(const tl_k_resize_geom *rs, const float *restrict dy, float *restrict dx);
void tl_k_resize2d_ref(const tl_k_resize_geom *rs, const double *restrict x, double *restrict y);
void tl_k_resize2d_grad_ref(const tl_k_resize_geom *rs, const double *restrict dy, double *restrict dx);

#endif /* TL_KERNELS_CONV_H */

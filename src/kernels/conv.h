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
 * built once per thread and geometry, one thread, user scratchpad), except
 * the convolution passes that an im2col + OpenBLAS GEMM (tl_k_matmul) does
 * faster, measured by bench/bench_conv.c — see "Which engine" below. Resize
 * is plain C loops: TF's index and weight arithmetic is float32 in a fixed
 * order that oneDNN's resampling does not reproduce (it maps coordinates as
 * round((y + 0.5)·in/out - 0.5) and weights its two neighbours differently),
 * and the loops are memory-bound anyway.
 *
 * Scratch. oneDNN's passes reorder NHWC / HWIO into its blocked layouts and
 * back, and the GEMM passes lay out im2col columns; both live in the
 * caller's scratch, whose size (floats) tl_k_conv2d_scratch and
 * tl_k_pool2d_scratch tell. The first call on a thread for a geometry builds
 * its plan (allocating); later calls allocate nothing of tpuloop's (oneDNN's
 * execute makes a few transient allocations of its own per call; see
 * vision_dnnl.h).
 *
 * Determinism. oneDNN runs single-threaded in the calling thread
 * (omp_set_num_threads(1) on that thread before any primitive is created or
 * run), its kernels accumulate in an order fixed by the plan, the im2col
 * GEMM path chunks the batch by a size fixed by the geometry, and OpenBLAS
 * has one thread (tl_k_blas_single_thread): the same inputs give the same
 * bits on the same machine. Another CPU may pick other oneDNN kernels (AVX2
 * against AVX-512) and round differently.
 *
 * Which engine. bench/bench_conv.c, `bench_conv 30`: batch 128, SAME, one
 * thread, 30 alternating rounds, ms min-max, on the 2-core AMD EPYC (Zen 3,
 * AVX2; oneDNN picks jit:avx2 on its blocked nChw8c layouts, plus reorders)
 * this was written on, shared with other builds (load ~12): only the
 * minima mean much, and they move by a third between runs. The CNN's shapes,
 * then two more to place the line:
 *
 *     shape                  pass          oneDNN        im2col+GEMM   AUTO
 *     28x28x16 3x3 16->16    forward       16.27-25.13   22.73-46.20   oneDNN
 *     28x28x16 3x3 16->16    grad_input     7.30-21.48   33.11-54.07   oneDNN
 *     28x28x16 3x3 16->16    grad_filter   12.64-27.69   20.38-43.19   oneDNN
 *     14x14x32 3x3 32->32    forward        7.79-33.90   12.07-29.39   oneDNN
 *     14x14x32 3x3 32->32    grad_input     9.49-18.04   18.65-26.62   oneDNN
 *     14x14x32 3x3 32->32    grad_filter   11.59-21.11   10.98-29.25   GEMM
 *     7x7x64 3x3 64->64      forward        6.29-34.94   11.40-35.12   oneDNN
 *     7x7x64 3x3 64->64      grad_input     9.59-27.99   15.75-46.17   oneDNN
 *     7x7x64 3x3 64->64      grad_filter   15.41-30.03   15.42-34.11   GEMM
 *     28x28x16 1x1/2 16->32  forward        1.93-14.32    1.74-12.78   GEMM
 *     28x28x16 1x1/2 16->32  grad_input     1.76-10.55    1.30-11.79   GEMM
 *     28x28x16 1x1/2 16->32  grad_filter    2.27-12.99    1.63-14.06   GEMM
 *     14x14x32 1x1/2 32->64  forward        0.91-9.66     0.70-9.25    GEMM
 *     14x14x32 1x1/2 32->64  grad_input     0.99-9.64     0.88-9.41    GEMM
 *     14x14x32 1x1/2 32->64  grad_filter    0.95-13.42    0.71-11.63   GEMM
 *     28x28x16 3x3/2 16->32  forward        7.23-24.27   10.99-33.38   oneDNN
 *     28x28x16 3x3/2 16->32  grad_input     8.34-18.87   18.11-30.88   oneDNN
 *     28x28x16 3x3/2 16->32  grad_filter    9.58-25.96   10.52-42.42   oneDNN
 *     14x14x32 3x3/2 32->64  forward        8.37-22.17    8.34-20.59   oneDNN
 *     14x14x32 3x3/2 32->64  grad_input     4.12-21.89    7.42-24.71   oneDNN
 *     14x14x32 3x3/2 32->64  grad_filter    8.36-29.28    8.54-27.66   GEMM
 *     14x14x64 3x3 64->64    forward       52.10-119.77  69.42-129.00  oneDNN
 *     14x14x64 3x3 64->64    grad_input    49.19-72.29   54.53-112.65  oneDNN
 *     14x14x64 3x3 64->64    grad_filter   64.60-95.26   60.45-95.02   GEMM
 *     7x7x32 3x3 32->32      forward        1.48-9.72     2.04-14.70   oneDNN
 *     7x7x32 3x3 32->32      grad_input     1.25-10.48    2.34-17.08   oneDNN
 *     7x7x32 3x3 32->32      grad_filter    1.74-9.82     1.75-18.12   GEMM
 *
 * So (tl_k_conv2d_engine): oneDNN for the forward and input gradient of
 * every 3x3 (ahead in every run, by up to 4.5x; the closest, the 7x7x64
 * and 14x14x32/2 forwards, came within 10% in one of three runs); im2col +
 * GEMM for 1x1 convolutions (x itself, or a strided gather of it, is the
 * GEMM operand: a tie within the noise on forward and input gradient, ahead
 * on the filter gradient) and for the filter gradient with c >= 32 (a tie
 * within the noise, 0.95-1.1x; at c = 16, oneDNN is 1.1-1.6x ahead). Ties go
 * to GEMM because it allocates nothing per call, where oneDNN's execute
 * makes 14-15 small transient allocations of its own (the bench counts
 * them). Groups > 1 (grouped, depthwise) always run on oneDNN.
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
 * The training step's pair, on oneDNN for every pass (else TL_EINVAL):
 * oneDNN reorders x (n, h, w, c) to its blocked layout for the forward and
 * again for the filter gradient, and dy for each gradient. The forward
 * tl_k_conv2d_keep leaves its blocked x in kept (tl_k_conv2d_kept floats; 0
 * when the two kernels want different layouts or x needs no reorder, and
 * then kept is not written), and tl_k_conv2d_backward computes dx and df in
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

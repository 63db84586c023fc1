/*
 * elementwise_bcast.h — element-wise math with NumPy / TensorFlow
 * broadcasting: binary arithmetic, unary math and activations, comparisons,
 * where, casts and constants, each with the kernels its gradient needs.
 * (elementwise_unary.c holds the unary math and activations,
 * elementwise_bcast.c the rest.)
 *
 * The conventions are kernels.h's: row-major buffers allocated by the caller,
 * `restrict` pointers, no allocation, float64 `_ref` twins with the obvious
 * loops, fixed summation orders, two tiers of failure.
 *
 * Broadcasting (NumPy's rules, TensorFlow's BCast): shapes are aligned at
 * their last dimension; each pair of aligned dimensions must be equal or one
 * of them 1; the result has the larger rank and, per dimension, the larger
 * size. (5,) with (4, 1) gives (4, 5); (4, 1, 5) with (3, 1) gives (4, 3, 5);
 * a scalar () goes with anything.
 *
 * tl_k_bcast_init plans the loops once per call site: the output shape, and
 * per operand its element strides in output order, 0 on a broadcast axis.
 * Output dimensions of size 1 are dropped and adjacent dimensions that every
 * operand walks contiguously (or skips together) are merged, so same-shape
 * operands become one run, a (B, C) + (C,) bias add two loops and a
 * tensor-times-scalar one run with a stride-0 operand. The kernels walk the
 * plan row by row (the innermost merged dimension); a row has its own loop
 * for the all-contiguous case and for one operand broadcast along it.
 *
 * A gradient flowing to a broadcast operand is summed over its broadcast
 * axes. Summation order, fixed by the code: for each element of the operand,
 * the terms of the output positions that read it are added in increasing
 * output (row-major) index into a float64 accumulator, rounded once to
 * float32. The terms are float32 (dz times the op's local derivative, in
 * float32) and are staged in caller scratch together with the accumulators:
 * tl_k_binary_grad_scratch / tl_k_where_grad_scratch say how many floats.
 *
 *     tl_k_shape s[2] = {{2, {4, 6}}, {1, {6}}};
 *     tl_k_bcast b;
 *     tl_k_bcast_init(&b, 2, s);                        // output (4, 6)
 *     tl_k_binary(TL_K_MUL, &b, x, w, z);               // z = x * w
 *     tl_k_binary_grad(TL_K_MUL, &b, x, w, dz, dx, dw, scratch); // dw summed over rows
 */
#ifndef TL_KERNELS_ELEMENTWISE_BCAST_H
#define TL_KERNELS_ELEMENTWISE_BCAST_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels.h"
#include "tpuloop/topology.h" /* TL_MAX_RANK */

/* The element types of the kernels that take more than float32 (the graph
 * maps its tl_dtype onto them one to one; kernels/ knows nothing of graphs). */
typedef enum { TL_K_F32 = 0, TL_K_I32 = 1, TL_K_I64 = 2 } tl_k_elem;

/* Operands of one broadcasting kernel: where's cond, x and y. */
#define TL_K_BCAST_MAX_IN 3

/* A shape: rank 0 is a scalar of one element. */
typedef struct tl_k_shape {
    int rank;
    int64_t dim[TL_MAX_RANK]; /* (rank) */
} tl_k_shape;

/* The loops of one broadcast (tl_k_bcast_init fills it; read-only after). */
typedef struct tl_k_bcast {
    tl_k_shape out;                       /* the broadcast shape */
    int nin;                              /* operands */
    int64_t size;                         /* output elements */
    int64_t in_size[TL_K_BCAST_MAX_IN];   /* each operand's elements */
    int rank;                             /* merged loop dimensions, >= 1 */
    int64_t dim[TL_MAX_RANK];             /* (rank) */
    int64_t stride[TL_K_BCAST_MAX_IN][TL_MAX_RANK]; /* (nin, rank) elements, 0 where broadcast */
    int64_t out_stride[TL_MAX_RANK];      /* (rank) the output's own, contiguous */
} tl_k_bcast;

/*
 * The broadcast shape of a and b into *out; false (out untouched) when some
 * aligned pair of dimensions differs and neither is 1.
 */
bool tl_k_bcast_shape(const tl_k_shape *a, const tl_k_shape *b, tl_k_shape *out);

/*
 * Plans the broadcast of nin (1..TL_K_BCAST_MAX_IN) operand shapes. Dimensions
 * may be 0 (an empty output: the kernels do nothing).
 *
 * Errors: TL_EINVAL when a rank is outside [0, TL_MAX_RANK], a dimension is
 * negative, or the shapes do not broadcast ("broadcast: operand 1 has shape
 * (4, 3), which does not broadcast with (4, 5)"); *b is then unspecified.
 */
tl_status tl_k_bcast_init(tl_k_bcast *b, int nin, const tl_k_shape *in);

/* ---- binary arithmetic --------------------------------------------------------
 *
 * z = op(x, y) with x and y broadcast to z's shape, IEEE float32 arithmetic
 * (x / 0 is ±inf or NaN, as TensorFlow). maximum and minimum propagate NaN, as
 * TensorFlow >= 2.4 on CPU and XLA. pow is powf(x, y).
 *
 * Gradients, as TensorFlow's (math_grad.py), each summed over the operand's
 * broadcast axes:
 *   add: dx = dz, dy = dz;          sub: dx = dz, dy = -dz;
 *   mul: dx = dz·y, dy = dz·x;      div: dx = dz / y, dy = dz·((-x / y) / y);
 *   maximum: dx = dz where x >= y, else dy = dz (a tie goes to x);
 *   minimum: dx = dz where x <= y, else dy = dz (a tie goes to x);
 *   pow: dx = dz·y·x^(y-1), dy = dz·x^y·log(x) where x > 0, else dy = 0.
 * dx or dy may be NULL to skip it; each written one is overwritten.
 */
typedef enum {
    TL_K_ADD = 0,
    TL_K_SUB,
    TL_K_MUL,
    TL_K_DIV,
    TL_K_MAXIMUM,
    TL_K_MINIMUM,
    TL_K_POW,
    TL_K_BINOP_COUNT_
} tl_k_binop;

/* b planned for (x, y); z (b->size). */
void tl_k_binary(tl_k_binop op, const tl_k_bcast *b, const float *restrict x, const float *restrict y,
                 float *restrict z);
/* The twin broadcasts by index arithmetic from the unmerged shapes. */
void tl_k_binary_ref(tl_k_binop op, const tl_k_shape *xs, const tl_k_shape *ys, const double *restrict x,
                     const double *restrict y, double *restrict z);

/* Floats of scratch tl_k_binary_grad and tl_k_where_grad need for plan b: 0
 * when no operand is broadcast, else the output's size plus room for the
 * float64 accumulators of the largest broadcast operand. */
int64_t tl_k_binary_grad_scratch(const tl_k_bcast *b);
void tl_k_binary_grad(tl_k_binop op, const tl_k_bcast *b, const float *restrict x, const float *restrict y,
                      const float *restrict dz, float *restrict dx, float *restrict dy, float *restrict scratch);
void tl_k_binary_grad_ref(tl_k_binop op, const tl_k_shape *xs, const tl_k_shape *ys, const double *restrict x,
                          const double *restrict y, const double *restrict dz, double *restrict dx,
                          double *restrict dy);

/* ---- unary math and activations ---------------------------------------------------
 *
 * y = f(x) over n elements, with parameters a and b where the op has them.
 * Backward kernels take both x and the forward output y and write
 * dx = dy·f'(x) (overwritten). As TensorFlow:
 *   neg -x;  abs |x|, f' = sign(x) (0 at 0);  exp, f' = y;  log, f' = 1/x;
 *   sqrt, f' = 0.5 / y;  rsqrt 1/sqrt(x), f' = -0.5·y³;  square x², f' = 2x;
 *     log and sqrt of negatives give NaN, log(0) = -inf, rsqrt(0) = inf.
 *   clip (a = lo, b = hi): max(min(x, hi), lo), NaN passes through;
 *     f' = 1 where lo <= x <= hi (bounds included), else 0;
 *   gelu: 0.5·x·(1 + erf(x/√2)); gelu_tanh: 0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³)
 *     — TF's expressions, evaluated as 0.5·x·erfc(-x/√2) and x·sigmoid(2u), which
 *     are equal and do not cancel for x < 0 (the twins keep TF's forms);
 *   silu (swish): x·sigmoid(x), f' = s·(1 + x·(1 - s)) with s = sigmoid(x);
 *   leaky_relu (a = alpha): x if x > 0 else alpha·x, f' = 1 if x > 0 else alpha;
 *   elu (a = alpha): x if x > 0 else alpha·(exp(x) - 1), f' = 1 if x > 0 else alpha·exp(x)
 *     (so alpha at 0, as Keras' ELU through tf.nn.elu's gradient);
 *   softplus: log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)), which never
 *     overflows; f' = sigmoid(x).
 */
typedef enum {
    TL_K_NEG = 0,
    TL_K_ABS,
    TL_K_EXP,
    TL_K_LOG,
    TL_K_SQRT,
    TL_K_RSQRT,
    TL_K_SQUARE,
    TL_K_CLIP,
    TL_K_GELU,
    TL_K_GELU_TANH,
    TL_K_SILU,
    TL_K_LEAKY_RELU,
    TL_K_ELU,
    TL_K_SOFTPLUS,
    TL_K_UNOP_COUNT_
} tl_k_unop;

void tl_k_unary(tl_k_unop op, int64_t n, float a, float b, const float *restrict x, float *restrict y);
void tl_k_unary_ref(tl_k_unop op, int64_t n, double a, double b, const double *restrict x, double *restrict y);
void tl_k_unary_grad(tl_k_unop op, int64_t n, float a, float b, const float *restrict x, const float *restrict y,
                     const float *restrict dy, float *restrict dx);
void tl_k_unary_grad_ref(tl_k_unop op, int64_t n, double a, double b, const double *restrict x,
                         const double *restrict y, const double *restrict dy, double *restrict dx);

/* ---- comparisons, where -------------------------------------------------------------
 *
 * z = 1.0f where x op y, else 0.0f (TensorFlow gives bool; a float mask
 * multiplies and feeds tl_k_where). x and y both of dtype dt (float32, int32
 * or int64), compared in that type: int64 values above 2^53 compare exactly.
 * Any comparison with NaN is false except not_equal, as IEEE.
 */
typedef enum {
    TL_K_EQUAL = 0,
    TL_K_NOT_EQUAL,
    TL_K_LESS,
    TL_K_LESS_EQUAL,
    TL_K_GREATER,
    TL_K_GREATER_EQUAL,
    TL_K_CMPOP_COUNT_
} tl_k_cmpop;

void tl_k_compare(tl_k_cmpop op, tl_k_elem dt, const tl_k_bcast *b, const void *restrict x, const void *restrict y,
                  float *restrict z);
void tl_k_compare_ref(tl_k_cmpop op, const tl_k_shape *xs, const tl_k_shape *ys, const double *restrict x,
                      const double *restrict y, double *restrict z);

/*
 * z = cond ? x : y with cond, x, y broadcast together (TensorFlow's
 * where_v2); cond is float32 (true where nonzero, NaN included) or int32
 * (true where nonzero), as cond_dt says. Backward: dx = dz where cond, dy = dz
 * elsewhere, each summed over its broadcast axes (either may be NULL).
 */
void tl_k_where(const tl_k_bcast *b, tl_k_elem cond_dt, const void *restrict cond, const float *restrict x,
                const float *restrict y, float *restrict z);
void tl_k_where_ref(const tl_k_shape *cs, const tl_k_shape *xs, const tl_k_shape *ys, const double *restrict cond,
                    const double *restrict x, const double *restrict y, double *restrict z);
/* b planned for (cond, x, y); scratch as tl_k_binary_grad_scratch(b). */
void tl_k_where_grad(const tl_k_bcast *b, tl_k_elem cond_dt, const void *restrict cond, const float *restrict dz,
                     float *restrict dx, float *restrict dy, float *restrict scratch);
void tl_k_where_grad_ref(const tl_k_shape *cs, const tl_k_shape *xs, const tl_k_shape *ys,
                         const double *restrict cond, const double *restrict dz, double *restrict dx,
                         double *restrict dy);

/* ---- casts and constants --------------------------------------------------------------
 *
 * tl_k_cast converts n elements of dtype from (x) to dtype to (y); int64
 * elements are int64_t. float → int truncates toward zero, as TensorFlow; a
 * value outside the integer's range saturates to its minimum or maximum and
 * NaN gives 0, as XLA does (TensorFlow's CPU kernel leaves these to the C++
 * cast, which is undefined; on x86 it gives INT_MIN). int → float rounds to
 * nearest even; int64 → int32 keeps the low 32 bits (wraps modulo 2^32), as
 * TensorFlow's static_cast; the same dtype copies.
 */
void tl_k_cast(int64_t n, tl_k_elem from, const void *restrict x, tl_k_elem to, void *restrict y);

/* y[i] = value over n elements. */
void tl_k_constant(int64_t n, float value, float *restrict y);

#endif /* TL_KERNELS_ELEMENTWISE_BCAST_H */

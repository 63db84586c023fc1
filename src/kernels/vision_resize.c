/* vision_resize.c — tf.image.resize (nearest, bilinear; TF2's half-pixel
 * centers) on NHWC images, its gradient, and the float64 twins (conv.h). */
#include <math.h>
#include <string.h>

#include "../base/base_int.h"
#include "conv.h"

/* Where output index i of an axis reads, as TF's CPU kernels work it out in
 * float32. Nearest: one index. Bilinear: lo, hi and the weight t of hi. */
typedef struct tap {
    int64_t lo, hi;
    float t;
} tap;

static float scale_of(int64_t in, int64_t out)
{
    return (float)in / (float)out;
}

static tap tap_of(bool nearest, int64_t i, int64_t in, float scale)
{
    tap tp;
    if (nearest) {
        int64_t k = (int64_t)floorf(((float)i + 0.5f) * scale);
        k = k < in - 1 ? k : in - 1;
        tp.lo = tp.hi = k > 0 ? k : 0;
        tp.t = 0.0f;
        return tp;
    }
    float s = ((float)i + 0.5f) * scale - 0.5f, fl = floorf(s);
    int64_t lo = (int64_t)fl, hi = (int64_t)ceilf(s);
    tp.lo = lo > 0 ? lo : 0;
    tp.hi = hi < in - 1 ? hi : in - 1;
    tp.t = s - fl;
    return tp;
}

static void check(const tl_k_resize_geom *rs)
{
    TL_ASSERT(rs->n >= 1 && rs->h >= 1 && rs->w >= 1 && rs->c >= 1 && rs->oh >= 1 && rs->ow >= 1);
}

void tl_k_resize2d(const tl_k_resize_geom *rs, const float *restrict x, float *restrict y)
{
    check(rs);
    float sh = scale_of(rs->h, rs->oh), sw = scale_of(rs->w, rs->ow);
    int64_t c = rs->c;
    for (int64_t b = 0; b < rs->n; b++)
        for (int64_t i = 0; i < rs->oh; i++) {
            tap ty = tap_of(rs->nearest, i, rs->h, sh);
            const float *top = x + (b * rs->h + ty.lo) * rs->w * c, *bot = x + (b * rs->h + ty.hi) * rs->w * c;
            for (int64_t j = 0; j < rs->ow; j++) {
                tap tx = tap_of(rs->nearest, j, rs->w, sw);
                float *out = y + ((b * rs->oh + i) * rs->ow + j) * c;
                if (rs->nearest) {
                    memcpy(out, top + tx.lo * c, (size_t)c * sizeof *out);
                    continue;
                }
                const float *tl = top + tx.lo * c, *tr = top + tx.hi * c, *bl = bot + tx.lo * c, *br = bot + tx.hi * c;
                for (int64_t ch = 0; ch < c; ch++) {
                    float t = tl[ch] + (tr[ch] - tl[ch]) * tx.t;
                    float d = bl[ch] + (br[ch] - bl[ch]) * tx.t;
                    out[ch] = t + (d - t) * ty.t;
                }
            }
        }
}

void tl_k_resize2d_grad(const tl_k_resize_geom *rs, const float *restrict dy, float *restrict dx)
{
    check(rs);
    float sh = scale_of(rs->h, rs->oh), sw = scale_of(rs->w, rs->ow);
    int64_t c = rs->c;
    memset(dx, 0, (size_t)(rs->n * rs->h * rs->w * c) * sizeof *dx);
    for (int64_t b = 0; b < rs->n; b++)
        for (int64_t i = 0; i < rs->oh; i++) {
            tap ty = tap_of(rs->nearest, i, rs->h, sh);
            float *top = dx + (b * rs->h + ty.lo) * rs->w * c, *bot = dx + (b * rs->h + ty.hi) * rs->w * c;
            float iy = 1.0f - ty.t;
            for (int64_t j = 0; j < rs->ow; j++) {
                tap tx = tap_of(rs->nearest, j, rs->w, sw);
                const float *g = dy + ((b * rs->oh + i) * rs->ow + j) * c;
                if (rs->nearest) {
                    float *d = top + tx.lo * c;
                    for (int64_t ch = 0; ch < c; ch++)
                        d[ch] += g[ch];
                    continue;
                }
                float ix = 1.0f - tx.t;
                float *tl = top + tx.lo * c, *tr = top + tx.hi * c, *bl = bot + tx.lo * c, *br = bot + tx.hi * c;
                /* TF's order, one element at a time: the four corners may be
                 * the same element, so no vector of them is independent. */
                for (int64_t ch = 0; ch < c; ch++) {
                    tl[ch] += g[ch] * iy * ix;
                    tr[ch] += g[ch] * iy * tx.t;
                    bl[ch] += g[ch] * ty.t * ix;
                    br[ch] += g[ch] * ty.t * tx.t;
                }
            }
        }
}

/* ---- float64 twins: TF's float32 taps, float64 values --------------------------------- */

void tl_k_resize2d_ref(const tl_k_resize_geom *rs, const double *restrict x, double *restrict y)
{
    check(rs);
    float sh = scale_of(rs->h, rs->oh), sw = scale_of(rs->w, rs->ow);
    for (int64_t b = 0; b < rs->n; b++)
        for (int64_t i = 0; i < rs->oh; i++)
            for (int64_t j = 0; j < rs->ow; j++) {
                tap ty = tap_of(rs->nearest, i, rs->h, sh), tx = tap_of(rs->nearest, j, rs->w, sw);
                double wy = ty.t, wx = tx.t;
                for (int64_t ch = 0; ch < rs->c; ch++) {
#define X(r, q) x[((b * rs->h + (r)) * rs->w + (q)) * rs->c + ch]
                    y[((b * rs->oh + i) * rs->ow + j) * rs->c + ch] =
                        (1 - wy) * ((1 - wx) * X(ty.lo, tx.lo) + wx * X(ty.lo, tx.hi)) +
                        wy * ((1 - wx) * X(ty.hi, tx.lo) + wx * X(ty.hi, tx.hi));
#undef X
                }
            }
}

void tl_k_resize2d_grad_ref(const tl_k_resize_geom *rs, const double *restrict dy, double *restrict dx)
{
    check(rs);
    float sh = scale_of(rs->h, rs->oh), sw = scale_of(rs->w, rs->ow);
    memset(dx, 0, (size_t)(rs->n * rs->h * rs->w * rs->c) * sizeof *dx);
    for (int64_t b = 0; b < rs->n; b++)
        for (int64_t i = 0; i < rs->oh; i++)
            for (int64_t j = 0; j < rs->ow; j++) {
                tap ty = tap_of(rs->nearest, i, rs->h, sh), tx = tap_of(rs->nearest, j, rs->w, sw);
                double wy = ty.t, wx = tx.t;
                for (int64_t ch = 0; ch < rs->c; ch++) {
                    double g = dy[((b * rs->oh + i) * rs->ow + j) * rs->c + ch];
#define DX(r, q) dx[((b * rs->h + (r)) * rs->w + (q)) * rs->c + ch]
                    DX(ty.lo, tx.lo) += g * (1 - wy) * (1 - wx);
                    DX(ty.lo, tx.hi) += g * (1 - wy) * wx;
                    DX(ty.hi, tx.lo) += g * wy * (1 - wx);
                    DX(ty.hi, tx.hi) += g * wy * wx;
#undef DX
                }
            }
}

/* interaction.c — DLRM's pairwise dot interaction: all dot products between
 * the f feature vectors of each example (full matrix or strictly lower
 * triangle), their gradients, and the float64 twins.
 *
 * Direct loops rather than a GEMM per example: f and d are small in DLRM
 * (f ≈ 27, d = 16..128), where a BLAS call per example costs more than its
 * arithmetic, and the dot product's summation order is then fixed by this
 * file rather than by whichever BLAS kernel the machine selects. */
#include <string.h>

#include "../base/base_int.h"
#include "kernels.h"

/* <a, b> with TL_K_LANES float partial sums (component c into partial
 * c mod TL_K_LANES), added in order: independent lanes vectorise without
 * reassociating anything. */
static inline __attribute__((always_inline)) float dot_lanes(int64_t d, const float *restrict a,
                                                             const float *restrict b)
{
    float part[TL_K_LANES] = {0};
    int64_t c = 0;
    for (; c + TL_K_LANES <= d; c += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            part[l] += a[c + l] * b[c + l];
    for (int l = 0; c < d; c++, l++)
        part[l] += a[c] * b[c];
    float s = 0.0f;
    for (int l = 0; l < TL_K_LANES; l++)
        s += part[l];
    return s;
}

/* y += w·x over d elements. */
static void axpy(int64_t d, float w, const float *restrict x, float *restrict y)
{
    int64_t c = 0;
    for (; c + TL_K_LANES <= d; c += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            y[c + l] += w * x[c + l];
    for (; c < d; c++)
        y[c] += w * x[c];
}

static void zero(int64_t d, float *restrict y)
{
    for (int64_t c = 0; c < d; c++)
        y[c] = 0.0f;
}

/* Index of the pair (i, j), i > j, in the row-order triangle. */
static int64_t tril_index(int64_t i, int64_t j)
{
    return i * (i - 1) / 2 + j;
}

void tl_k_pairwise_dot(int64_t batch, int64_t f, int64_t d, const float *restrict t, float *restrict z)
{
    TL_ASSERT(batch >= 0 && f >= 0 && d >= 0);
    for (int64_t b = 0; b < batch; b++) {
        const float *restrict tb = t + b * f * d;
        float *restrict zb = z + b * f * f;
        for (int64_t i = 0; i < f; i++)
            for (int64_t j = 0; j <= i; j++) {
                float v = dot_lanes(d, tb + i * d, tb + j * d);
                zb[i * f + j] = v;
                zb[j * f + i] = v;
            }
    }
}

void tl_k_pairwise_dot_grad(int64_t batch, int64_t f, int64_t d, const float *restrict t,
                            const float *restrict dz, float *restrict dt)
{
    TL_ASSERT(batch >= 0 && f >= 0 && d >= 0);
    for (int64_t b = 0; b < batch; b++) {
        const float *restrict tb = t + b * f * d;
        const float *restrict dzb = dz + b * f * f;
        for (int64_t i = 0; i < f; i++) {
            float *restrict dti = dt + (b * f + i) * d;
            zero(d, dti);
            for (int64_t j = 0; j < f; j++)
                axpy(d, dzb[i * f + j] + dzb[j * f + i], tb + j * d, dti);
        }
    }
}

/* A walk over the stacked vectors of one example b, part by part: the
 * vectors of part k are its row b, x[k][b·width[k] .. + width[k]), d floats
 * at a time. Parts of width 0 hold none. */
typedef struct vec_walk {
    const float *const *x;
    const int64_t *width;
    int nparts, k;
    int64_t b, d;
    const float *at, *end; /* this vector; the end of part k's row */
} vec_walk;

/* From the start of part k on, to the first part that holds a vector. */
static inline void walk_part(vec_walk *w, int k)
{
    for (w->k = k; w->k < w->nparts && w->width[w->k] == 0; w->k++) {
    }
    if (w->k < w->nparts) {
        w->at = w->x[w->k] + w->b * w->width[w->k];
        w->end = w->at + w->width[w->k];
    }
}

static inline vec_walk walk_first(int nparts, const float *const *x, const int64_t *width, int64_t b, int64_t d)
{
    vec_walk w = {x, width, nparts, 0, b, d, NULL, NULL};
    walk_part(&w, 0);
    return w;
}

static inline void walk_next(vec_walk *w)
{
    w->at += w->d;
    if (w->at == w->end)
        walk_part(w, w->k + 1);
}

static void check_parts(int64_t batch, int64_t f, int64_t d, int nparts, const int64_t *width)
{
    TL_ASSERT(batch >= 0 && f >= 0 && d >= 0 && nparts >= 1);
    int64_t total = 0;
    for (int k = 0; k < nparts; k++) {
        TL_ASSERT(width[k] >= 0 && (d == 0 ? width[k] == 0 : width[k] % d == 0));
        total += width[k];
    }
    TL_ASSERT(total == f * d);
    (void)total;
}

/* 8 floats, read unaligned through a float pointer (may_alias: they are
 * floats): one lane per partial sum of dot_lanes. */
typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t vi8 __attribute__((vector_size(32)));
/* 16 floats, read and written unaligned through a float pointer (may_alias:
 * they are floats). */
typedef float v16 __attribute__((vector_size(64), aligned(4), may_alias));
typedef int32_t vi16 __attribute__((vector_size(64)));
_Static_assert(TL_K_LANES == 8, "dot4 keeps the TL_K_LANES partial sums of a dot product in the lanes of a v8");

/* Four dot products of a with b[0..3] at once, each as dot_lanes adds it:
 * lane l of s_q is pair q's partial l. The transpose puts partial l of the
 * four pairs side by side, so the partials are added 0..7 for the four at
 * once (lanes 0..3 of the sum; the rest is not used). */
static inline __attribute__((always_inline)) void dot4(int64_t d, const float *restrict a,
                                                       const float *const *b, float *restrict out)
{
    const float *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
    v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int64_t c = 0;
    for (; c + TL_K_LANES <= d; c += TL_K_LANES) {
        v8 x = *(const v8 *)(a + c);
        s0 = s0 + x * *(const v8 *)(b0 + c);
        s1 = s1 + x * *(const v8 *)(b1 + c);
        s2 = s2 + x * *(const v8 *)(b2 + c);
        s3 = s3 + x * *(const v8 *)(b3 + c);
    }
    if (c < d) {
        /* The rest: component c + l into partial l, the other lanes adding
         * 0·0, which leaves a partial as it is (a partial that starts at +0
         * is never -0). */
        float x[TL_K_LANES] = {0}, y[4][TL_K_LANES] = {{0}};
        for (int64_t l = 0; c + l < d; l++) {
            x[l] = a[c + l];
            y[0][l] = b0[c + l];
            y[1][l] = b1[c + l];
            y[2][l] = b2[c + l];
            y[3][l] = b3[c + l];
        }
        v8 xv = *(const v8 *)x;
        s0 = s0 + xv * *(const v8 *)y[0];
        s1 = s1 + xv * *(const v8 *)y[1];
        s2 = s2 + xv * *(const v8 *)y[2];
        s3 = s3 + xv * *(const v8 *)y[3];
    }
    /* u0 = partials 0 and 4 of pairs 0..3, u1 = 1 and 5, u2 = 2 and 6, u3 = 3 and 7. */
    v8 t0 = __builtin_shuffle(s0, s1, (vi8){0, 8, 1, 9, 4, 12, 5, 13});
    v8 t1 = __builtin_shuffle(s0, s1, (vi8){2, 10, 3, 11, 6, 14, 7, 15});
    v8 t2 = __builtin_shuffle(s2, s3, (vi8){0, 8, 1, 9, 4, 12, 5, 13});
    v8 t3 = __builtin_shuffle(s2, s3, (vi8){2, 10, 3, 11, 6, 14, 7, 15});
    v8 u0 = __builtin_shuffle(t0, t2, (vi8){0, 1, 8, 9, 4, 5, 12, 13});
    v8 u1 = __builtin_shuffle(t0, t2, (vi8){2, 3, 10, 11, 6, 7, 14, 15});
    v8 u2 = __builtin_shuffle(t1, t3, (vi8){0, 1, 8, 9, 4, 5, 12, 13});
    v8 u3 = __builtin_shuffle(t1, t3, (vi8){2, 3, 10, 11, 6, 7, 14, 15});
    const vi8 high = {4, 5, 6, 7, 4, 5, 6, 7};
    v8 sum = (v8){0} + u0;
    sum = sum + u1;
    sum = sum + u2;
    sum = sum + u3;
    sum = sum + __builtin_shuffle(u0, high);
    sum = sum + __builtin_shuffle(u1, high);
    sum = sum + __builtin_shuffle(u2, high);
    sum = sum + __builtin_shuffle(u3, high);
    out[0] = sum[0];
    out[1] = sum[1];
    out[2] = sum[2];
    out[3] = sum[3];
}

/* The most floats of an example's vectors copied side by side before its
 * sums (16 KiB; DLRM's 27 x 64 is 1,728). Parts in buffers of their own sit
 * at one offset modulo the page, so that an example's vectors read in place
 * crowd the same few cache sets; a copy is cheaper than the misses. */
enum { TILE_FLOATS = 4096 };

/* Example `parts`' vectors copied into buf when they fit: the walk over
 * the copy (one part, tile[0] == buf, of *width floats), else `parts`. */
static inline vec_walk tiled(vec_walk parts, int64_t f, int64_t d, float *buf, const float *const *tile,
                             int64_t *width)
{
    if (f * d > TILE_FLOATS)
        return parts;
    for (int64_t i = 0; i < f; i++, walk_next(&parts))
        memcpy(buf + i * d, parts.at, (size_t)d * sizeof *buf);
    *width = f * d;
    return walk_first(1, tile, width, 0, d);
}

/* ---- the forward from a tile of row pairs ---------------------------------------------- */

/* An example's vectors, padded with zeros to K = ceil(d/8) chunks of 8 and
 * to a multiple of 8 vectors, two by two: chunk k of vectors 2q and 2q + 1
 * side by side in the 16 floats at (q·K + k)·16. A padded component adds
 * 0·0 to its partial, which leaves it as it is (a partial that starts at +0
 * is never -0), so the sums are dot_lanes'. The padding vectors are only
 * read for sums that are not kept; zeros, so that nothing unset is read. */
static inline int64_t pair_tile_floats(int64_t f, int64_t d)
{
    return ((f + 7) & ~(int64_t)7) * ((d + 7) & ~(int64_t)7);
}

static inline __attribute__((always_inline)) void pair_tile(vec_walk w, int64_t f, int64_t d, float *restrict tile)
{
    int64_t K = (d + 7) / 8, fp = (f + 7) & ~(int64_t)7;
    for (int64_t r = 0; r < f; r++, walk_next(&w)) {
        float *dst = tile + (r / 2) * K * 16 + (r % 2) * 8;
        int64_t c = 0;
        for (; c + 8 <= d; c += 8)
            *(v8 *)(dst + c * 2) = *(const v8 *)(w.at + c);
        if (c < d) {
            v8 rest = {0};
            for (int64_t l = 0; c + l < d; l++)
                rest[l] = w.at[c + l];
            *(v8 *)(dst + c * 2) = rest;
        }
    }
    for (int64_t r = f; r < fp; r++)
        for (int64_t k = 0; k < K; k++)
            *(v8 *)(tile + (r / 2) * K * 16 + (r % 2) * 8 + k * 16) = (v8){0};
}

/* Pairs (i, j0 .. j0 + 7): each pair's 8 partials, as dot_lanes keeps them,
 * in half a vector (pairs 2q and 2q + 1 in a_q), then the partials of the
 * eight put side by side (partial l of pair p in lane p of the low half of
 * z_(l mod 4), or of its high half for l >= 4) and added 0..7 in order. */
static inline __attribute__((always_inline)) void dot8(int64_t K, const v16 *restrict xi, const v16 *restrict y,
                                                       v8 *restrict out)
{
    v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (int64_t k = 0; k < K; k++) {
        v16 x = xi[k];
        a0 = a0 + x * y[k];
        a1 = a1 + x * y[K + k];
        a2 = a2 + x * y[2 * K + k];
        a3 = a3 + x * y[3 * K + k];
    }
    /* d0: partials 0, 4, 1, 5 of pairs 0..3, a quarter each; d1: 2, 6, 3, 7.
     * e0, e1: the same of pairs 4..7. */
    const vi16 lo = {0, 8, 16, 24, 4, 12, 20, 28, 1, 9, 17, 25, 5, 13, 21, 29};
    const vi16 hi = {2, 10, 18, 26, 6, 14, 22, 30, 3, 11, 19, 27, 7, 15, 23, 31};
    v16 d0 = __builtin_shuffle(a0, a1, lo), d1 = __builtin_shuffle(a0, a1, hi);
    v16 e0 = __builtin_shuffle(a2, a3, lo), e1 = __builtin_shuffle(a2, a3, hi);
    /* z_m: partial m of pairs 0..7, then partial m + 4. */
    const vi16 even = {0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23};
    const vi16 odd = {8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31};
    v16 z0 = __builtin_shuffle(d0, e0, even), z1 = __builtin_shuffle(d0, e0, odd);
    v16 z2 = __builtin_shuffle(d1, e1, even), z3 = __builtin_shuffle(d1, e1, odd);
    v16 s = z0 + z1; /* the low half: partial 0 + partial 1, ... */
    s = s + z2;
    s = s + z3;
    v8 t = __builtin_shufflevector(s, s, 0, 1, 2, 3, 4, 5, 6, 7);
    t = t + __builtin_shufflevector(z0, z0, 8, 9, 10, 11, 12, 13, 14, 15);
    t = t + __builtin_shufflevector(z1, z1, 8, 9, 10, 11, 12, 13, 14, 15);
    t = t + __builtin_shufflevector(z2, z2, 8, 9, 10, 11, 12, 13, 14, 15);
    *out = t + __builtin_shufflevector(z3, z3, 8, 9, 10, 11, 12, 13, 14, 15);
}

/* One example's pairs in row order, eight of a row at a time (the last
 * eight of a row may reach past it into vectors that are there, or zero
 * pads: their sums are not kept). */
TL_VECTOR_CLONES static void tril_example_pairs(int64_t f, int64_t d, vec_walk parts, float *restrict zb)
{
    v16 tile[TILE_FLOATS / 16] __attribute__((aligned(64))), xi[TILE_FLOATS / 64] __attribute__((aligned(64)));
    int64_t K = (d + 7) / 8;
    pair_tile(parts, f, d, (float *)tile);
    float *zi = zb;
    for (int64_t i = 1; i < f; zi += i, i++) {
        const float *x = (const float *)tile + (i / 2) * K * 16 + (i % 2) * 8;
        for (int64_t k = 0; k < K; k++) {
            v8 c = *(const v8 *)(x + k * 16);
            xi[k] = __builtin_shufflevector(c, c, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
        }
        for (int64_t j = 0; j < i; j += 8) {
            if (j + 8 <= i) {
                dot8(K, xi, tile + (j / 2) * K, (v8 *)(zi + j));
            } else {
                v8 t;
                dot8(K, xi, tile + (j / 2) * K, &t);
                for (int64_t q = 0; q < i - j; q++)
                    zi[j + q] = t[q];
            }
        }
    }
}

/* One example's pairs in row order, four of a row at a time: where the
 * pair tile would not fit, from a copy side by side or in place. */
TL_VECTOR_CLONES static void tril_example(int64_t f, int64_t d, vec_walk parts, float *restrict zb)
{
    float buf[TILE_FLOATS];
    const float *tile[1] = {buf};
    int64_t width;
    vec_walk first = tiled(parts, f, d, buf, tile, &width);
    int64_t p = 0;
    vec_walk wi = first;
    for (int64_t i = 0; i < f; i++, walk_next(&wi)) {
        vec_walk wj = first;
        int64_t j = 0;
        for (; j + 4 <= i; j += 4, p += 4) {
            const float *b[4];
            for (int q = 0; q < 4; q++, walk_next(&wj))
                b[q] = wj.at;
            dot4(d, wi.at, b, zb + p);
        }
        for (; j < i; j++, walk_next(&wj))
            zb[p++] = dot_lanes(d, wi.at, wj.at);
    }
}

void tl_k_pairwise_dot_tril_parts(int64_t batch, int64_t f, int64_t d, int nparts, const float *const *x,
                                  const int64_t *width, float *restrict z)
{
    check_parts(batch, f, d, nparts, width);
    const int64_t pairs = f * (f - 1) / 2;
    if (d == 0) { /* no vectors to walk: every dot is the empty sum */
        for (int64_t p = 0; p < batch * pairs; p++)
            z[p] = 0.0f;
        return;
    }
    bool paired = pair_tile_floats(f, d) <= TILE_FLOATS;
    for (int64_t b = 0; b < batch; b++) {
        vec_walk w = walk_first(nparts, x, width, b, d);
        if (paired)
            tril_example_pairs(f, d, w, z + b * pairs);
        else
            tril_example(f, d, w, z + b * pairs);
    }
}

void tl_k_pairwise_dot_tril(int64_t batch, int64_t f, int64_t d, const float *restrict t, float *restrict z)
{
    const float *parts[1] = {t};
    int64_t width = f * d;
    tl_k_pairwise_dot_tril_parts(batch, f, d, 1, parts, &width, z);
}

/* Columns [c, c + n) of one example's dt_i, n 64, 16 or below 16: the sum
 * over j != i in increasing order of dz(pair i, j) · t_j, from 0, each
 * column's terms added one by one as axpy would add them, but in registers
 * rather than through memory. */
static inline __attribute__((always_inline)) void grad_cols(vec_walk first, int64_t f, int64_t i,
                                                            const float *restrict dzb, int64_t c, int64_t n,
                                                            float *restrict out)
{
    v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    float r[16] = {0};
    vec_walk w = first;
    for (int64_t j = 0; j < f; j++, walk_next(&w)) {
        if (j == i)
            continue; /* no pair (i, i) */
        /* j < i: the pair (i, j); j > i: the pair (j, i). */
        float s = dzb[j < i ? tril_index(i, j) : tril_index(j, i)];
        const float *t = w.at + c;
        if (n == 64) {
            a0 = a0 + s * *(const v16 *)t;
            a1 = a1 + s * *(const v16 *)(t + 16);
            a2 = a2 + s * *(const v16 *)(t + 32);
            a3 = a3 + s * *(const v16 *)(t + 48);
        } else if (n == 16) {
            a0 = a0 + s * *(const v16 *)t;
        } else {
            for (int64_t l = 0; l < n; l++)
                r[l] += s * t[l];
        }
    }
    if (n == 64) {
        *(v16 *)(out + c) = a0;
        *(v16 *)(out + c + 16) = a1;
        *(v16 *)(out + c + 32) = a2;
        *(v16 *)(out + c + 48) = a3;
    } else if (n == 16) {
        *(v16 *)(out + c) = a0;
    } else {
        for (int64_t l = 0; l < n; l++)
            out[c + l] = r[l];
    }
}

/* Dz of the pairs of vector i, in j order: ci[j] = dz(i, j) for j < i,
 * dz(j, i) for j > i (ci[i] is not read). */
static inline __attribute__((always_inline)) void coef_row(const float *restrict dzb, int64_t f, int64_t i,
                                                           float *restrict ci)
{
    const float *zi = dzb + tril_index(i, 0);
    for (int64_t j = 0; j < i; j++)
        ci[j] = zi[j];
    for (int64_t j = i + 1; j < f; j++)
        ci[j] = dzb[tril_index(j, i)];
}

/* The most vectors an example may have for its gradients to be taken four
 * at a time (their dz rows on the stack). */
enum { FOUR_MAX_F = 256 };

/* Columns [c, c + 16) of vectors rows[0..3]'s gradients from the tile
 * (vector j at tile + j·d), each as grad_cols sums it: coef[q·f + j] is dz
 * of the pair of rows[q] and j. The four share every load of t_j, and their
 * sums are independent, where one vector's 16 columns are a single chain. */
static inline __attribute__((always_inline)) void grad_cols_four(const float *restrict tile, int64_t f, int64_t d,
                                                                 const int64_t *rows, const float *restrict coef,
                                                                 int64_t c, float *const *out)
{
    v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    const float *c0 = coef, *c1 = coef + f, *c2 = coef + 2 * f, *c3 = coef + 3 * f;
    for (int64_t j = 0; j < f; j++) {
        v16 t = *(const v16 *)(tile + j * d + c);
        if (j != rows[0])
            a0 = a0 + c0[j] * t;
        if (j != rows[1])
            a1 = a1 + c1[j] * t;
        if (j != rows[2])
            a2 = a2 + c2[j] * t;
        if (j != rows[3])
            a3 = a3 + c3[j] * t;
    }
    *(v16 *)(out[0] + c) = a0;
    *(v16 *)(out[1] + c) = a1;
    *(v16 *)(out[2] + c) = a2;
    *(v16 *)(out[3] + c) = a3;
}

/* One example's gradients: the vectors read from a tile (above), each
 * gradient written into its part's. Their columns in 16s (DLRM's dims of
 * 16 and 32, the rest past a multiple of 64) are taken four vectors at a
 * time where the tile holds the vectors. */
TL_VECTOR_CLONES static void tril_grad_example(int64_t f, int64_t d, vec_walk parts, const float *restrict dzb,
                                               float *const *dx)
{
    float buf[TILE_FLOATS], coef[4 * FOUR_MAX_F];
    const float *tile[1] = {buf};
    int64_t width;
    vec_walk first = tiled(parts, f, d, buf, tile, &width);
    bool four = first.x == tile && f <= FOUR_MAX_F && d % 64 >= 16;
    vec_walk wi = parts;
    for (int64_t i = 0; i < f;) {
        /* The next (up to) four vectors that want a gradient. */
        int64_t rows[4];
        float *out[4];
        int n = 0;
        for (; i < f && n < 4; i++, walk_next(&wi))
            if (dx[wi.k] != NULL) { /* else no gradient wanted for this part */
                rows[n] = i;
                out[n++] = dx[wi.k] + (wi.at - wi.x[wi.k]); /* the same place in part k's gradient */
            }
        /* Columns [0, end64) in 64s, [end64, end16) in 16s, then the rest. */
        int64_t end64 = d / 64 * 64, end16 = end64 + (d - end64) / 16 * 16;
        for (int q = 0; q < n; q++)
            for (int64_t c = 0; c < end64; c += 64)
                grad_cols(first, f, rows[q], dzb, c, 64, out[q]);
        if (four && n == 4) {
            for (int q = 0; q < 4; q++)
                coef_row(dzb, f, rows[q], coef + q * f);
            for (int64_t c = end64; c < end16; c += 16)
                grad_cols_four(buf, f, d, rows, coef, c, out);
        } else {
            for (int q = 0; q < n; q++)
                for (int64_t c = end64; c < end16; c += 16)
                    grad_cols(first, f, rows[q], dzb, c, 16, out[q]);
        }
        for (int q = 0; q < n && end16 < d; q++)
            grad_cols(first, f, rows[q], dzb, end16, d - end16, out[q]);
    }
}

void tl_k_pairwise_dot_tril_parts_grad(int64_t batch, int64_t f, int64_t d, int nparts, const float *const *x,
                                       const int64_t *width, const float *restrict dz, float *const *dx)
{
    check_parts(batch, f, d, nparts, width);
    if (d == 0)
        return;
    const int64_t pairs = f * (f - 1) / 2;
    for (int64_t b = 0; b < batch; b++)
        tril_grad_example(f, d, walk_first(nparts, x, width, b, d), dz + b * pairs, dx);
}

void tl_k_pairwise_dot_tril_grad(int64_t batch, int64_t f, int64_t d, const float *restrict t,
                                 const float *restrict dz, float *restrict dt)
{
    const float *parts[1] = {t};
    float *grads[1] = {dt};
    int64_t width = f * d;
    tl_k_pairwise_dot_tril_parts_grad(batch, f, d, 1, parts, &width, dz, grads);
}

/* ---- float64 twins: the definitions written out ------------------------------------- */

static double dot_ref(int64_t d, const double *a, const double *b)
{
    double s = 0.0;
    for (int64_t c = 0; c < d; c++)
        s += a[c] * b[c];
    return s;
}

void tl_k_pairwise_dot_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t, double *restrict z)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < f; i++)
            for (int64_t j = 0; j < f; j++)
                z[(b * f + i) * f + j] = dot_ref(d, t + (b * f + i) * d, t + (b * f + j) * d);
}

void tl_k_pairwise_dot_tril_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t,
                                double *restrict z)
{
    const int64_t pairs = f * (f - 1) / 2;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 1; i < f; i++)
            for (int64_t j = 0; j < i; j++)
                z[b * pairs + tril_index(i, j)] = dot_ref(d, t + (b * f + i) * d, t + (b * f + j) * d);
}

void tl_k_pairwise_dot_grad_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t,
                                const double *restrict dz, double *restrict dt)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < f; i++)
            for (int64_t c = 0; c < d; c++) {
                double s = 0.0;
                for (int64_t j = 0; j < f; j++)
                    s += dz[(b * f + i) * f + j] * t[(b * f + j) * d + c];
                for (int64_t j = 0; j < f; j++)
                    s += dz[(b * f + j) * f + i] * t[(b * f + j) * d + c];
                dt[(b * f + i) * d + c] = s;
            }
}

void tl_k_pairwise_dot_tril_grad_ref(int64_t batch, int64_t f, int64_t d, const double *restrict t,
                                     const double *restrict dz, double *restrict dt)
{
    const int64_t pairs = f * (f - 1) / 2;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < f; i++)
            for (int64_t c = 0; c < d; c++) {
                double s = 0.0;
                for (int64_t j = 0; j < i; j++)
                    s += dz[b * pairs + tril_index(i, j)] * t[(b * f + j) * d + c];
                for (int64_t k = i + 1; k < f; k++)
                    s += dz[b * pairs + tril_index(k, i)] * t[(b * f + k) * d + c];
                dt[(b * f + i) * d + c] = s;
            }
}

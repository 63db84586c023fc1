/* reduce_axes.c — the reduce family's kernels: reductions over any set of
 * axes, logsumexp, arg max / arg min, softmax and log-softmax, their
 * gradients and the float64 twins (the losses are in reduce_losses.c). The
 * summation orders are the ones reduce_axes.h documents; changing one
 * changes results bit for bit. */
#include <math.h>
#include <string.h>

#include "../base/base_int.h"
#include "kernels_int.h"
#include "reduce_axes.h"

/* Outputs reduced together when the innermost block is kept: an accumulator
 * each, on the stack (kernels allocate nothing), as reduce.c's strided case. */
#define CHUNK 256

/* ---- the normalised geometry -------------------------------------------------------- */

/* x after dropping axes of size 1 and merging neighbours that are both kept
 * or both reduced: the innermost merged block (run), and the kept and
 * reduced blocks outside it with their strides in x. */
typedef struct geom {
    int nk, nr;
    int64_t kdim[TL_K_AXES_MAX_RANK], kstride[TL_K_AXES_MAX_RANK];
    int64_t rdim[TL_K_AXES_MAX_RANK], rstride[TL_K_AXES_MAX_RANK];
    int64_t run;       /* elements of the innermost block, contiguous in x */
    bool run_reduced;  /* the innermost block is reduced (runs of terms) or kept (inner outputs) */
    int64_t kept;      /* product of kdim */
    int64_t reduced;   /* product of rdim */
} geom;

static void geom_init(geom *gm, int rank, const int64_t *shape, uint32_t axes)
{
    TL_ASSERT(rank >= 0 && rank <= TL_K_AXES_MAX_RANK);
    TL_ASSERT((axes >> rank) == 0);
    int64_t dim[TL_K_AXES_MAX_RANK];
    bool red[TL_K_AXES_MAX_RANK];
    int m = 0;
    for (int d = 0; d < rank; d++) {
        TL_ASSERT(shape[d] >= 0);
        if (shape[d] == 1)
            continue;
        bool r = (axes >> d) & 1u;
        if (m > 0 && red[m - 1] == r) {
            dim[m - 1] *= shape[d];
        } else {
            dim[m] = shape[d];
            red[m] = r;
            m++;
        }
    }
    if (m == 0) { /* a scalar, or only size-1 axes: one output of one term */
        dim[0] = 1;
        red[0] = false;
        m = 1;
    }
    int64_t stride[TL_K_AXES_MAX_RANK];
    stride[m - 1] = 1;
    for (int j = m - 2; j >= 0; j--)
        stride[j] = stride[j + 1] * dim[j + 1];
    memset(gm, 0, sizeof *gm);
    gm->run = dim[m - 1];
    gm->run_reduced = red[m - 1];
    gm->kept = gm->reduced = 1;
    for (int j = 0; j < m - 1; j++) {
        if (red[j]) {
            gm->rdim[gm->nr] = dim[j];
            gm->rstride[gm->nr++] = stride[j];
            gm->reduced *= dim[j];
        } else {
            gm->kdim[gm->nk] = dim[j];
            gm->kstride[gm->nk++] = stride[j];
            gm->kept *= dim[j];
        }
    }
}

/* The offset of the next index of a row-major counter over n blocks (the
 * last fastest), from the current one. */
static int64_t step(int n, const int64_t *dim, const int64_t *stride, int64_t *ctr, int64_t off)
{
    for (int j = n - 1; j >= 0; j--) {
        off += stride[j];
        if (++ctr[j] < dim[j])
            return off;
        off -= stride[j] * dim[j];
        ctr[j] = 0;
    }
    return off;
}

/* ---- the innermost block kept: w outputs at a time, one accumulator each ---------------- */

typedef enum { R_SUM, R_MAX, R_MIN, R_SUMEXP, R_COUNT_EQ } reduction;

/* acc[c] (w of them, starting at x + base) combined over every reduced
 * index in increasing row-major order. R_SUMEXP adds expf(x - shift[c]);
 * R_COUNT_EQ counts x == target[c]. */
static void rows(const geom *gm, reduction op, const float *restrict x, int64_t base, int64_t w,
                 const float *restrict aux, double *restrict acc)
{
    int64_t ctr[TL_K_AXES_MAX_RANK] = {0}, off = 0;
    for (int64_t r = 0; r < gm->reduced; r++) {
        const float *restrict row = x + base + off;
        switch (op) {
        case R_SUM:
            for (int64_t c = 0; c < w; c++)
                acc[c] += (double)row[c];
            break;
        case R_MAX:
            for (int64_t c = 0; c < w; c++)
                acc[c] = max_nan(acc[c], (double)row[c]);
            break;
        case R_MIN:
            for (int64_t c = 0; c < w; c++)
                acc[c] = min_nan(acc[c], (double)row[c]);
            break;
        case R_SUMEXP:
            for (int64_t c = 0; c < w; c++)
                acc[c] += (double)expf(row[c] - aux[c]);
            break;
        case R_COUNT_EQ:
            for (int64_t c = 0; c < w; c++)
                acc[c] += row[c] == aux[c] ? 1.0 : 0.0;
            break;
        }
        off = step(gm->nr, gm->rdim, gm->rstride, ctr, off);
    }
}

static double initial(reduction op)
{
    return op == R_MAX ? -INFINITY : op == R_MIN ? INFINITY : 0.0;
}

/* ---- the innermost block reduced: runs of contiguous terms --------------------------- */

/* tl_k_sum's order over one run: TL_K_LANES partials, added in order. */
static double run_sum(int64_t n, const float *restrict x)
{
    double part[TL_K_LANES] = {0};
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            part[l] += (double)x[i + l];
    for (int l = 0; i < n; i++, l++)
        part[l] += (double)x[i];
    double s = 0.0;
    for (int l = 0; l < TL_K_LANES; l++)
        s += part[l];
    return s;
}

/* One output's terms, the runs in increasing row-major order of the other
 * reduced blocks. R_SUM adds the runs' run_sum; the others go term by term
 * into one accumulator. */
static double runs(const geom *gm, reduction op, const float *restrict x, int64_t base, float aux)
{
    int64_t ctr[TL_K_AXES_MAX_RANK] = {0}, off = 0, n = gm->run;
    double acc = initial(op);
    for (int64_t r = 0; r < gm->reduced; r++) {
        const float *restrict run = x + base + off;
        switch (op) {
        case R_SUM:
            acc = r == 0 ? run_sum(n, run) : acc + run_sum(n, run);
            break;
        case R_MAX:
            for (int64_t i = 0; i < n; i++)
                acc = max_nan(acc, (double)run[i]);
            break;
        case R_MIN:
            for (int64_t i = 0; i < n; i++)
                acc = min_nan(acc, (double)run[i]);
            break;
        case R_SUMEXP:
            for (int64_t i = 0; i < n; i++)
                acc += (double)expf(run[i] - aux);
            break;
        case R_COUNT_EQ:
            for (int64_t i = 0; i < n; i++)
                acc += run[i] == aux ? 1.0 : 0.0;
            break;
        }
        off = step(gm->nr, gm->rdim, gm->rstride, ctr, off);
    }
    return acc;
}

/* ---- forward ----------------------------------------------------------------------------- */

typedef enum { F_SUM, F_MEAN, F_MAX, F_MIN, F_LSE } forward_op;

/* TF's reduce_logsumexp shift: the maximum where finite, else 0. */
static float lse_shift(double m)
{
    return isfinite(m) ? (float)m : 0.0f;
}

static void reduce_forward(forward_op op, int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                           float *restrict y)
{
    geom gm;
    geom_init(&gm, rank, shape, axes);
    const reduction first = op == F_MAX ? R_MAX : op == F_MIN ? R_MIN : op == F_LSE ? R_MAX : R_SUM;
    const double count = (double)gm.reduced * (gm.run_reduced ? (double)gm.run : 1.0);
    if (count == 0.0) { /* no terms: the identities, x (empty, maybe NULL) untouched */
        const float v = op == F_SUM ? 0.0f : op == F_MEAN ? NAN : op == F_MIN ? INFINITY : -INFINITY;
        for (int64_t o = 0; o < gm.kept * (gm.run_reduced ? 1 : gm.run); o++)
            y[o] = v;
        return;
    }
    int64_t ctr[TL_K_AXES_MAX_RANK] = {0}, koff = 0;
    for (int64_t k = 0; k < gm.kept; k++) {
        if (gm.run_reduced) {
            double v = runs(&gm, first, x, koff, 0.0f);
            if (op == F_LSE) {
                float shift = lse_shift(v);
                v = log(runs(&gm, R_SUMEXP, x, koff, shift)) + (double)shift;
            } else if (op == F_MEAN) {
                v /= count;
            }
            y[k] = (float)v;
        } else {
            double acc[CHUNK], sum[CHUNK];
            float shift[CHUNK];
            for (int64_t c0 = 0; c0 < gm.run; c0 += CHUNK) {
                int64_t w = gm.run - c0 < CHUNK ? gm.run - c0 : CHUNK;
                float *restrict yo = y + k * gm.run + c0;
                for (int64_t c = 0; c < w; c++)
                    acc[c] = initial(first);
                rows(&gm, first, x, koff + c0, w, NULL, acc);
                if (op == F_LSE) {
                    for (int64_t c = 0; c < w; c++) {
                        shift[c] = lse_shift(acc[c]);
                        sum[c] = 0.0;
                    }
                    rows(&gm, R_SUMEXP, x, koff + c0, w, shift, sum);
                    for (int64_t c = 0; c < w; c++)
                        yo[c] = (float)(log(sum[c]) + (double)shift[c]);
                } else {
                    for (int64_t c = 0; c < w; c++)
                        yo[c] = (float)(op == F_MEAN ? acc[c] / count : acc[c]);
                }
            }
        }
        koff = step(gm.nk, gm.kdim, gm.kstride, ctr, koff);
    }
}

void tl_k_reduce_sum_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                          float *restrict y)
{
    reduce_forward(F_SUM, rank, shape, axes, x, y);
}

void tl_k_reduce_mean_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                           float *restrict y)
{
    reduce_forward(F_MEAN, rank, shape, axes, x, y);
}

void tl_k_reduce_max_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                          float *restrict y)
{
    reduce_forward(F_MAX, rank, shape, axes, x, y);
}

void tl_k_reduce_min_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                          float *restrict y)
{
    reduce_forward(F_MIN, rank, shape, axes, x, y);
}

void tl_k_logsumexp_axes(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                         float *restrict y)
{
    reduce_forward(F_LSE, rank, shape, axes, x, y);
}

/* ---- backward ---------------------------------------------------------------------------- */

typedef enum { B_FILL, B_EXTREME, B_LSE } backward_op;

/* Writes one output's w terms of dx at base: B_FILL v; B_EXTREME
 * (x == a ? 1 : 0) / n · v in float32; B_LSE v · expf(x - a) / n. */
static void write_terms(backward_op op, int64_t w, const float *restrict x, float a, double n, float v,
                        float *restrict dx)
{
    switch (op) {
    case B_FILL: {
        int64_t i = 0;
        for (; i + TL_K_LANES <= w; i += TL_K_LANES)
            for (int l = 0; l < TL_K_LANES; l++)
                dx[i + l] = v;
        for (; i < w; i++)
            dx[i] = v;
        break;
    }
    case B_EXTREME: {
        const float cnt = (float)n;
        for (int64_t i = 0; i < w; i++)
            dx[i] = ((x[i] == a ? 1.0f : 0.0f) / cnt) * v;
        break;
    }
    case B_LSE:
        for (int64_t i = 0; i < w; i++)
            dx[i] = (float)((double)v * ((double)expf(x[i] - a) / n));
        break;
    }
}

/* dx from dy: for B_EXTREME y is the forward output; for B_LSE the shift
 * and the sum are recomputed from x. */
static void reduce_backward(backward_op op, bool mean, int rank, const int64_t *shape, uint32_t axes,
                            const float *restrict x, const float *restrict y, const float *restrict dy,
                            float *restrict dx)
{
    geom gm;
    geom_init(&gm, rank, shape, axes);
    const double count = (double)gm.reduced * (gm.run_reduced ? (double)gm.run : 1.0);
    if (count == 0.0)
        return; /* dx has no elements */
    int64_t kctr[TL_K_AXES_MAX_RANK] = {0}, koff = 0;
    for (int64_t k = 0; k < gm.kept; k++) {
        if (gm.run_reduced) {
            float a = 0.0f, v = dy[k];
            double n = 0.0;
            if (op == B_FILL && mean)
                v = (float)((double)dy[k] / count);
            if (op == B_EXTREME) {
                a = y[k];
                n = runs(&gm, R_COUNT_EQ, x, koff, a);
            } else if (op == B_LSE) {
                a = lse_shift(runs(&gm, R_MAX, x, koff, 0.0f));
                n = runs(&gm, R_SUMEXP, x, koff, a);
            }
            int64_t rctr[TL_K_AXES_MAX_RANK] = {0}, roff = 0;
            for (int64_t r = 0; r < gm.reduced; r++) {
                int64_t at = koff + roff;
                write_terms(op, gm.run, x == NULL ? NULL : x + at, a, n, v, dx + at);
                roff = step(gm.nr, gm.rdim, gm.rstride, rctr, roff);
            }
        } else {
            double n[CHUNK];
            float a[CHUNK], v[CHUNK];
            for (int64_t c0 = 0; c0 < gm.run; c0 += CHUNK) {
                int64_t w = gm.run - c0 < CHUNK ? gm.run - c0 : CHUNK;
                const float *restrict dyo = dy + k * gm.run + c0;
                for (int64_t c = 0; c < w; c++) {
                    v[c] = op == B_FILL && mean ? (float)((double)dyo[c] / count) : dyo[c];
                    n[c] = 0.0;
                    a[c] = 0.0f;
                }
                if (op == B_EXTREME) {
                    memcpy(a, y + k * gm.run + c0, (size_t)w * sizeof *a);
                    rows(&gm, R_COUNT_EQ, x, koff + c0, w, a, n);
                } else if (op == B_LSE) {
                    for (int64_t c = 0; c < w; c++)
                        n[c] = -INFINITY;
                    rows(&gm, R_MAX, x, koff + c0, w, NULL, n);
                    for (int64_t c = 0; c < w; c++) {
                        a[c] = lse_shift(n[c]);
                        n[c] = 0.0;
                    }
                    rows(&gm, R_SUMEXP, x, koff + c0, w, a, n);
                }
                int64_t rctr[TL_K_AXES_MAX_RANK] = {0}, roff = 0;
                for (int64_t r = 0; r < gm.reduced; r++) {
                    float *restrict d = dx + koff + roff + c0;
                    const float *restrict xr = x == NULL ? NULL : x + koff + roff + c0;
                    switch (op) {
                    case B_FILL:
                        memcpy(d, v, (size_t)w * sizeof *d);
                        break;
                    case B_EXTREME:
                        for (int64_t c = 0; c < w; c++)
                            d[c] = ((xr[c] == a[c] ? 1.0f : 0.0f) / (float)n[c]) * v[c];
                        break;
                    case B_LSE:
                        for (int64_t c = 0; c < w; c++)
                            d[c] = (float)((double)v[c] * ((double)expf(xr[c] - a[c]) / n[c]));
                        break;
                    }
                    roff = step(gm.nr, gm.rdim, gm.rstride, rctr, roff);
                }
            }
        }
        koff = step(gm.nk, gm.kdim, gm.kstride, kctr, koff);
    }
}

void tl_k_reduce_sum_axes_grad(int rank, const int64_t *shape, uint32_t axes, const float *restrict dy,
                               float *restrict dx)
{
    reduce_backward(B_FILL, false, rank, shape, axes, NULL, NULL, dy, dx);
}

void tl_k_reduce_mean_axes_grad(int rank, const int64_t *shape, uint32_t axes, const float *restrict dy,
                                float *restrict dx)
{
    reduce_backward(B_FILL, true, rank, shape, axes, NULL, NULL, dy, dx);
}

void tl_k_reduce_extreme_axes_grad(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                                   const float *restrict y, const float *restrict dy, float *restrict dx)
{
    reduce_backward(B_EXTREME, false, rank, shape, axes, x, y, dy, dx);
}

void tl_k_logsumexp_axes_grad(int rank, const int64_t *shape, uint32_t axes, const float *restrict x,
                              const float *restrict dy, float *restrict dx)
{
    reduce_backward(B_LSE, false, rank, shape, axes, x, NULL, dy, dx);
}

/* ---- the reductions' float64 twins: every element in increasing flat index -------------- */

static int64_t ref_size(int rank, const int64_t *shape, uint32_t axes, bool kept)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        if (((axes >> d) & 1u) != kept)
            n *= shape[d];
    return n;
}

/* The output index of x's element i: its coordinates on the kept axes. */
static int64_t ref_out(int rank, const int64_t *shape, uint32_t axes, int64_t i)
{
    int64_t o = 0, mul = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int64_t c = i % shape[d];
        i /= shape[d];
        if (!((axes >> d) & 1u)) {
            o += c * mul;
            mul *= shape[d];
        }
    }
    return o;
}

typedef enum { T_SUM, T_MAX, T_MIN } ref_op;

static void ref_reduce(ref_op op, int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                       double *restrict y)
{
    int64_t nout = ref_size(rank, shape, axes, true), n = nout * ref_size(rank, shape, axes, false);
    for (int64_t o = 0; o < nout; o++)
        y[o] = op == T_MAX ? -INFINITY : op == T_MIN ? INFINITY : 0.0;
    for (int64_t i = 0; i < n; i++) {
        int64_t o = ref_out(rank, shape, axes, i);
        if (op == T_SUM)
            y[o] += x[i];
        else if (isnan(y[o]))
            continue;
        else if (isnan(x[i]) || (op == T_MAX ? x[i] > y[o] : x[i] < y[o]))
            y[o] = x[i];
    }
}

void tl_k_reduce_sum_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                              double *restrict y)
{
    ref_reduce(T_SUM, rank, shape, axes, x, y);
}

void tl_k_reduce_mean_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                               double *restrict y)
{
    ref_reduce(T_SUM, rank, shape, axes, x, y);
    int64_t nout = ref_size(rank, shape, axes, true);
    double count = (double)ref_size(rank, shape, axes, false);
    for (int64_t o = 0; o < nout; o++)
        y[o] /= count;
}

void tl_k_reduce_max_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                              double *restrict y)
{
    ref_reduce(T_MAX, rank, shape, axes, x, y);
}

void tl_k_reduce_min_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                              double *restrict y)
{
    ref_reduce(T_MIN, rank, shape, axes, x, y);
}

/* Each output on its own: its maximum, then its sum of exponentials. */
void tl_k_logsumexp_axes_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                             double *restrict y)
{
    int64_t nout = ref_size(rank, shape, axes, true), n = nout * ref_size(rank, shape, axes, false);
    ref_reduce(T_MAX, rank, shape, axes, x, y);
    for (int64_t o = 0; o < nout; o++) {
        double m = isfinite(y[o]) ? y[o] : 0.0, s = 0.0;
        for (int64_t i = 0; i < n; i++)
            if (ref_out(rank, shape, axes, i) == o)
                s += exp(x[i] - m);
        y[o] = log(s) + m;
    }
}

void tl_k_reduce_sum_axes_grad_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict dy,
                                   double *restrict dx)
{
    int64_t n = ref_size(rank, shape, axes, true) * ref_size(rank, shape, axes, false);
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[ref_out(rank, shape, axes, i)];
}

void tl_k_reduce_mean_axes_grad_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict dy,
                                    double *restrict dx)
{
    int64_t n = ref_size(rank, shape, axes, true) * ref_size(rank, shape, axes, false);
    double count = (double)ref_size(rank, shape, axes, false);
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[ref_out(rank, shape, axes, i)] / count;
}

void tl_k_reduce_extreme_axes_grad_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                                       const double *restrict y, const double *restrict dy, double *restrict dx)
{
    int64_t nout = ref_size(rank, shape, axes, true), n = nout * ref_size(rank, shape, axes, false);
    for (int64_t o = 0; o < nout; o++) {
        double count = 0.0;
        for (int64_t i = 0; i < n; i++)
            if (ref_out(rank, shape, axes, i) == o && x[i] == y[o])
                count += 1.0;
        for (int64_t i = 0; i < n; i++)
            if (ref_out(rank, shape, axes, i) == o)
                dx[i] = (x[i] == y[o] ? 1.0 : 0.0) / count * dy[o];
    }
}

void tl_k_logsumexp_axes_grad_ref(int rank, const int64_t *shape, uint32_t axes, const double *restrict x,
                                  const double *restrict y, const double *restrict dy, double *restrict dx)
{
    int64_t n = ref_size(rank, shape, axes, true) * ref_size(rank, shape, axes, false);
    for (int64_t i = 0; i < n; i++) {
        int64_t o = ref_out(rank, shape, axes, i);
        dx[i] = dy[o] * exp(x[i] - y[o]);
    }
}

/* ---- arg max / arg min ------------------------------------------------------------------ */

/* b replaces the best so far when it is NaN (and the best is not), or
 * strictly beyond it: ties keep the first index. */
static inline bool better(bool min, double b, double best)
{
    if (best != best)
        return false;
    return b != b || (min ? b < best : b > best);
}

static tl_status check_axis(const char *what, int64_t outer, int64_t axis, int64_t inner)
{
    TL_ASSERT(outer >= 0 && axis >= 0 && inner >= 0);
    if (axis == 0 && outer > 0 && inner > 0)
        return tl_error(TL_EINVAL, "%s: the reduced axis is empty in (%lld, 0, %lld): no index to return", what,
                        (long long)outer, (long long)inner);
    return TL_OK;
}

static void put(bool wide, void *restrict idx, int64_t at, int64_t v)
{
    if (wide)
        ((int64_t *)idx)[at] = v;
    else
        ((int32_t *)idx)[at] = (int32_t)v;
}

static tl_status arg_extreme(const char *what, bool min, int64_t outer, int64_t axis, int64_t inner,
                             const float *restrict x, bool wide, void *restrict idx)
{
    tl_status st = check_axis(what, outer, axis, inner);
    if (st != TL_OK)
        return st;
    float best[CHUNK];
    int64_t at[CHUNK];
    for (int64_t o = 0; o < outer; o++) {
        const float *restrict xo = x + o * axis * inner;
        for (int64_t i0 = 0; i0 < inner; i0 += CHUNK) {
            int64_t w = inner - i0 < CHUNK ? inner - i0 : CHUNK;
            for (int64_t c = 0; c < w; c++) {
                best[c] = xo[i0 + c];
                at[c] = 0;
            }
            for (int64_t a = 1; a < axis; a++) {
                const float *restrict row = xo + a * inner + i0;
                for (int64_t c = 0; c < w; c++)
                    if (better(min, row[c], best[c])) {
                        best[c] = row[c];
                        at[c] = a;
                    }
            }
            for (int64_t c = 0; c < w; c++)
                put(wide, idx, o * inner + i0 + c, at[c]);
        }
    }
    return TL_OK;
}

tl_status tl_k_argmax(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, bool wide,
                      void *restrict idx)
{
    return arg_extreme("argmax", false, outer, axis, inner, x, wide, idx);
}

tl_status tl_k_argmin(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, bool wide,
                      void *restrict idx)
{
    return arg_extreme("argmin", true, outer, axis, inner, x, wide, idx);
}

static tl_status arg_extreme_ref(const char *what, bool min, int64_t outer, int64_t axis, int64_t inner,
                                 const double *restrict x, int64_t *restrict idx)
{
    tl_status st = check_axis(what, outer, axis, inner);
    if (st != TL_OK)
        return st;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t found = 0;
            for (int64_t a = 1; a < axis; a++)
                if (better(min, x[(o * axis + a) * inner + i], x[(o * axis + found) * inner + i]))
                    found = a;
            idx[o * inner + i] = found;
        }
    return TL_OK;
}

tl_status tl_k_argmax_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x,
                          int64_t *restrict idx)
{
    return arg_extreme_ref("argmax", false, outer, axis, inner, x, idx);
}

tl_status tl_k_argmin_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x,
                          int64_t *restrict idx)
{
    return arg_extreme_ref("argmin", true, outer, axis, inner, x, idx);
}

/* ---- softmax and log-softmax ------------------------------------------------------------ */

/* Rows of the (outer, axis, inner) view, w of them side by side starting at
 * column i0 of block o: the maximum m (float32, NaN winning) and the float64
 * sum s of expf(x - m), along the axis in order. */
static void row_stats(int64_t axis, int64_t inner, const float *restrict xo, int64_t w, float *restrict m,
                      double *restrict s)
{
    for (int64_t c = 0; c < w; c++) {
        m[c] = -INFINITY;
        s[c] = 0.0;
    }
    for (int64_t a = 0; a < axis; a++)
        for (int64_t c = 0; c < w; c++)
            m[c] = (float)max_nan(m[c], xo[a * inner + c]);
    for (int64_t a = 0; a < axis; a++)
        for (int64_t c = 0; c < w; c++)
            s[c] += (double)expf(xo[a * inner + c] - m[c]);
}

static void softmax_fwd(bool log_form, int64_t outer, int64_t axis, int64_t inner, const float *restrict x,
                        float *restrict y)
{
    TL_ASSERT(outer >= 0 && axis >= 0 && inner >= 0);
    if (axis == 0)
        return; /* nothing to normalise (and x may be NULL) */
    float m[CHUNK];
    double s[CHUNK], ls[CHUNK];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i0 = 0; i0 < inner; i0 += CHUNK) {
            int64_t w = inner - i0 < CHUNK ? inner - i0 : CHUNK;
            const float *restrict xo = x + o * axis * inner + i0;
            float *restrict yo = y + o * axis * inner + i0;
            row_stats(axis, inner, xo, w, m, s);
            if (log_form) {
                for (int64_t c = 0; c < w; c++)
                    ls[c] = log(s[c]);
                for (int64_t a = 0; a < axis; a++)
                    for (int64_t c = 0; c < w; c++)
                        yo[a * inner + c] = (float)(((double)xo[a * inner + c] - (double)m[c]) - ls[c]);
            } else {
                for (int64_t a = 0; a < axis; a++)
                    for (int64_t c = 0; c < w; c++)
                        yo[a * inner + c] = (float)((double)expf(xo[a * inner + c] - m[c]) / s[c]);
            }
        }
}

static void softmax_bwd(bool log_form, int64_t outer, int64_t axis, int64_t inner, const float *restrict y,
                        const float *restrict dy, float *restrict dx)
{
    TL_ASSERT(outer >= 0 && axis >= 0 && inner >= 0);
    if (axis == 0)
        return;
    double s[CHUNK];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i0 = 0; i0 < inner; i0 += CHUNK) {
            int64_t w = inner - i0 < CHUNK ? inner - i0 : CHUNK, base = o * axis * inner + i0;
            const float *restrict yo = y + base, *restrict dyo = dy + base;
            float *restrict dxo = dx + base;
            for (int64_t c = 0; c < w; c++)
                s[c] = 0.0;
            for (int64_t a = 0; a < axis; a++)
                for (int64_t c = 0; c < w; c++)
                    s[c] += log_form ? (double)dyo[a * inner + c]
                                     : (double)dyo[a * inner + c] * (double)yo[a * inner + c];
            for (int64_t a = 0; a < axis; a++)
                for (int64_t c = 0; c < w; c++) {
                    int64_t j = a * inner + c;
                    dxo[j] = log_form ? (float)((double)dyo[j] - (double)expf(yo[j]) * s[c])
                                      : (float)(((double)dyo[j] - s[c]) * (double)yo[j]);
                }
        }
}

void tl_k_softmax(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, float *restrict y)
{
    softmax_fwd(false, outer, axis, inner, x, y);
}

void tl_k_log_softmax(int64_t outer, int64_t axis, int64_t inner, const float *restrict x, float *restrict y)
{
    softmax_fwd(true, outer, axis, inner, x, y);
}

void tl_k_softmax_grad(int64_t outer, int64_t axis, int64_t inner, const float *restrict y,
                       const float *restrict dy, float *restrict dx)
{
    softmax_bwd(false, outer, axis, inner, y, dy, dx);
}

void tl_k_log_softmax_grad(int64_t outer, int64_t axis, int64_t inner, const float *restrict y,
                           const float *restrict dy, float *restrict dx)
{
    softmax_bwd(true, outer, axis, inner, y, dy, dx);
}

static void softmax_fwd_ref(bool log_form, int64_t outer, int64_t axis, int64_t inner, const double *restrict x,
                            double *restrict y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *xo = x + o * axis * inner + i;
            double *yo = y + o * axis * inner + i;
            double m = -INFINITY, s = 0.0;
            for (int64_t a = 0; a < axis; a++)
                m = max_nan(m, xo[a * inner]);
            for (int64_t a = 0; a < axis; a++)
                s += exp(xo[a * inner] - m);
            for (int64_t a = 0; a < axis; a++)
                yo[a * inner] = log_form ? xo[a * inner] - m - log(s) : exp(xo[a * inner] - m) / s;
        }
}

static void softmax_bwd_ref(bool log_form, int64_t outer, int64_t axis, int64_t inner, const double *restrict y,
                            const double *restrict dy, double *restrict dx)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * axis * inner + i;
            double s = 0.0;
            for (int64_t a = 0; a < axis; a++)
                s += log_form ? dy[base + a * inner] : dy[base + a * inner] * y[base + a * inner];
            for (int64_t a = 0; a < axis; a++) {
                int64_t j = base + a * inner;
                dx[j] = log_form ? dy[j] - exp(y[j]) * s : (dy[j] - s) * y[j];
            }
        }
}

void tl_k_softmax_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x, double *restrict y)
{
    softmax_fwd_ref(false, outer, axis, inner, x, y);
}

void tl_k_log_softmax_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict x,
                          double *restrict y)
{
    softmax_fwd_ref(true, outer, axis, inner, x, y);
}

void tl_k_softmax_grad_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict y,
                           const double *restrict dy, double *restrict dx)
{
    softmax_bwd_ref(false, outer, axis, inner, y, dy, dx);
}

void tl_k_log_softmax_grad_ref(int64_t outer, int64_t axis, int64_t inner, const double *restrict y,
                               const double *restrict dy, double *restrict dx)
{
    softmax_bwd_ref(true, outer, axis, inner, y, dy, dx);
}

/* spatial.c — tiles, halo regions and the halo exchange of spatial
 * partitioning (spatial.h). */
#include <string.h>

#include "../base/base_int.h"
#include "graph_int.h"
#include "spatial.h"
#include "tpuloop/topology.h"

int64_t tl_box_count(const tl_box *b)
{
    return b->size[0] * b->size[1] * b->size[2] * b->size[3];
}

tl_status tl_spatial_tile(const int64_t shape[4], const int64_t grid[4], int core, tl_box *out)
{
    return tl_partition_tile(shape, grid, 4, core, out->off, out->size);
}

void tl_spatial_reach(int64_t in, int64_t k, int64_t stride, int64_t dilation, int64_t pad_before, int64_t o0,
                      int64_t o1, int64_t *i0, int64_t *i1, int64_t *pad_lo, int64_t *pad_hi)
{
    TL_ASSERT(o0 <= o1 && k >= 1 && stride >= 1 && dilation >= 1);
    if (o0 == o1) {
        *i0 = *i1 = *pad_lo = *pad_hi = 0;
        return;
    }
    int64_t lo = o0 * stride - pad_before, hi = (o1 - 1) * stride - pad_before + (k - 1) * dilation + 1;
    *i0 = lo > 0 ? lo : 0;
    *i1 = hi < in ? hi : in;
    if (*i1 < *i0)
        *i1 = *i0; /* windows wholly in the padding: no rows read */
    *pad_lo = *i0 - lo;
    *pad_hi = hi - *i1;
}

/* A window op's spatial geometry: the input's size, taps, strides,
 * dilations and padding before, per axis (h, w). */
typedef struct window {
    int64_t in[2], k[2], stride[2], dilation[2], pad_before[2];
} window;

/* The region of the input the output tile out reads, in need's batch and
 * spatial dimensions (its channels are the caller's), and the padding it
 * lacks, (top, left, bottom, right) in pads; false (need and pads zero)
 * when out is empty. */
static bool region(const window *wd, const tl_box *out, tl_box *need, int64_t pads[4])
{
    memset(need, 0, sizeof *need);
    memset(pads, 0, 4 * sizeof *pads);
    if (tl_box_count(out) == 0)
        return false;
    need->off[0] = out->off[0];
    need->size[0] = out->size[0];
    for (int a = 0; a < 2; a++) {
        int64_t i0, i1, o0 = out->off[1 + a];
        tl_spatial_reach(wd->in[a], wd->k[a], wd->stride[a], wd->dilation[a], wd->pad_before[a], o0,
                         o0 + out->size[1 + a], &i0, &i1, &pads[a], &pads[2 + a]);
        need->off[1 + a] = i0;
        need->size[1 + a] = i1 - i0;
    }
    return true;
}

void tl_spatial_conv_tile(const tl_k_conv_geom *cv, const tl_box *out, tl_k_conv_geom *local, tl_box *need)
{
    TL_ASSERT(out->off[3] == 0 && (out->size[3] == cv->o || tl_box_count(out) == 0));
    window wd = {{cv->h, cv->w}, {cv->kh, cv->kw}, {cv->stride_h, cv->stride_w}, {cv->dilation_h, cv->dilation_w},
                 {cv->pad_top, cv->pad_left}};
    int64_t pads[4];
    *local = *cv;
    if (region(&wd, out, need, pads))
        need->size[3] = cv->c;
    local->n = out->size[0], local->oh = out->size[1], local->ow = out->size[2];
    local->h = need->size[1], local->w = need->size[2];
    local->pad_top = pads[0], local->pad_left = pads[1], local->pad_bottom = pads[2], local->pad_right = pads[3];
}

void tl_spatial_pool_tile(const tl_k_pool_geom *pl, const tl_box *out, tl_k_pool_geom *local, tl_box *need)
{
    window wd = {{pl->h, pl->w}, {pl->kh, pl->kw}, {pl->stride_h, pl->stride_w}, {1, 1}, {pl->pad_top, pl->pad_left}};
    int64_t pads[4];
    *local = *pl;
    if (region(&wd, out, need, pads)) {
        need->off[3] = out->off[3];
        need->size[3] = out->size[3];
    }
    local->n = out->size[0], local->oh = out->size[1], local->ow = out->size[2], local->c = out->size[3];
    local->h = need->size[1], local->w = need->size[2];
    local->pad_top = pads[0], local->pad_left = pads[1], local->pad_bottom = pads[2], local->pad_right = pads[3];
}

/* a ∩ b into *out; false when empty. */
static bool intersect(const tl_box *a, const tl_box *b, tl_box *out)
{
    for (int d = 0; d < 4; d++) {
        int64_t lo = a->off[d] > b->off[d] ? a->off[d] : b->off[d];
        int64_t ea = a->off[d] + a->size[d], eb = b->off[d] + b->size[d];
        int64_t hi = ea < eb ? ea : eb;
        if (hi <= lo)
            return false;
        out->off[d] = lo;
        out->size[d] = hi - lo;
    }
    return true;
}

/* Where element (n, h, w, c) of the tensor sits in a buffer holding box b. */
static int64_t at(const tl_box *b, int64_t n, int64_t h, int64_t w, int64_t c)
{
    return (((n - b->off[0]) * b->size[1] + (h - b->off[1])) * b->size[2] + (w - b->off[2])) * b->size[3] +
           (c - b->off[3]);
}

/* The part of the tensor in both src (held in s) and dst (held in d):
 * copied, or added to d when add. part = src ∩ dst. */
static void move(const tl_box *part, const tl_box *src, const float *restrict s, const tl_box *dst,
                 float *restrict d, bool add)
{
    /* A run: the part's channels, or whole rows of w when every box has all
     * the channels the part has. */
    bool rows = part->size[3] == src->size[3] && part->size[3] == dst->size[3];
    int64_t run = rows ? part->size[2] * part->size[3] : part->size[3];
    int64_t ws = rows ? 1 : part->size[2];
    for (int64_t n = part->off[0]; n < part->off[0] + part->size[0]; n++)
        for (int64_t h = part->off[1]; h < part->off[1] + part->size[1]; h++)
            for (int64_t k = 0; k < ws; k++) {
                int64_t w = part->off[2] + k, c = part->off[3];
                const float *from = s + at(src, n, h, w, c);
                float *to = d + at(dst, n, h, w, c);
                if (add)
                    for (int64_t i = 0; i < run; i++)
                        to[i] += from[i];
                else
                    memcpy(to, from, (size_t)run * sizeof *to);
            }
}

void tl_spatial_gather(const tl_box *need, int ncores, const tl_box *tiles, const float *const *bufs,
                       float *region)
{
    tl_box part;
    for (int q = 0; q < ncores; q++)
        if (intersect(need, &tiles[q], &part))
            move(&part, &tiles[q], bufs[q], need, region, false);
}

static bool same_box(const tl_box *a, const tl_box *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/*
 * The sum starts from a base: the first core whose region covers all of
 * mine (mostly this core's own) is copied, not added to zeros, and the
 * others are added in core order. An element's sum is then the same as in
 * core order from zero when at most one core before the base reaches it:
 * the base and that core's terms trade places in one commutative addition
 * (0 + x is x, up to the sign of a zero). Where two cores before the base
 * overlap (a halo wider than a tile), the sum runs from zeros.
 */
void tl_spatial_reduce(const tl_box *mine, int ncores, const tl_box *needs, const float *const *rgrads, float *out)
{
    tl_box parts[TL_SPMD_MAX_CORES], both;
    bool has[TL_SPMD_MAX_CORES];
    int base = -1;
    TL_ASSERT(ncores >= 1 && ncores <= TL_SPMD_MAX_CORES);
    for (int p = 0; p < ncores; p++) {
        has[p] = intersect(mine, &needs[p], &parts[p]);
        if (base < 0 && has[p] && same_box(&parts[p], mine))
            base = p;
    }
    for (int p = 0; p < base; p++)
        for (int r = p + 1; r < base; r++)
            if (has[p] && has[r] && intersect(&parts[p], &parts[r], &both))
                base = -1;
    if (base >= 0)
        move(&parts[base], &needs[base], rgrads[base], mine, out, false);
    else
        memset(out, 0, (size_t)tl_box_count(mine) * sizeof *out);
    for (int p = 0; p < ncores; p++)
        if (has[p] && p != base)
            move(&parts[p], &needs[p], rgrads[p], mine, out, true);
}

void tl_spatial_accumulate(const tl_box *mine, const tl_box *box, const float *src, float *out)
{
    tl_box part;
    if (intersect(mine, box, &part))
        move(&part, box, src, mine, out, true);
}

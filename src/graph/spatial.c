/* spatial.c — tiles, halo regions and the halo exchange of spatial
 * partitioning (spatial.h). */
#include <string.h>

#include "../base/base_int.h"
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

/* The region of one spatial axis and the local padding around it. */
static void axis(int64_t in, int64_t k, int64_t stride, int64_t dilation, int64_t pad_before, int64_t o0,
                 int64_t osize, int64_t *off, int64_t *size, int64_t *pad_lo, int64_t *pad_hi)
{
    int64_t i0, i1;
    tl_spatial_reach(in, k, stride, dilation, pad_before, o0, o0 + osize, &i0, &i1, pad_lo, pad_hi);
    *off = i0;
    *size = i1 - i0;
}

void tl_spatial_conv_tile(const tl_k_conv_geom *cv, const tl_box *out, tl_k_conv_geom *local, tl_box *need)
{
    TL_ASSERT(out->off[3] == 0 && (out->size[3] == cv->o || tl_box_count(out) == 0));
    *local = *cv;
    memset(need, 0, sizeof *need);
    local->n = out->size[0];
    local->oh = out->size[1];
    local->ow = out->size[2];
    if (tl_box_count(out) == 0) {
        local->h = local->w = 0;
        local->pad_top = local->pad_bottom = local->pad_left = local->pad_right = 0;
        return;
    }
    need->off[0] = out->off[0];
    need->size[0] = out->size[0];
    axis(cv->h, cv->kh, cv->stride_h, cv->dilation_h, cv->pad_top, out->off[1], out->size[1], &need->off[1],
         &need->size[1], &local->pad_top, &local->pad_bottom);
    axis(cv->w, cv->kw, cv->stride_w, cv->dilation_w, cv->pad_left, out->off[2], out->size[2], &need->off[2],
         &need->size[2], &local->pad_left, &local->pad_right);
    need->size[3] = cv->c;
    local->h = need->size[1];
    local->w = need->size[2];
}

void tl_spatial_pool_tile(const tl_k_pool_geom *pl, const tl_box *out, tl_k_pool_geom *local, tl_box *need)
{
    *local = *pl;
    memset(need, 0, sizeof *need);
    local->n = out->size[0];
    local->oh = out->size[1];
    local->ow = out->size[2];
    local->c = out->size[3];
    if (tl_box_count(out) == 0) {
        local->h = local->w = 0;
        local->pad_top = local->pad_bottom = local->pad_left = local->pad_right = 0;
        return;
    }
    need->off[0] = out->off[0];
    need->size[0] = out->size[0];
    axis(pl->h, pl->kh, pl->stride_h, 1, pl->pad_top, out->off[1], out->size[1], &need->off[1], &need->size[1],
         &local->pad_top, &local->pad_bottom);
    axis(pl->w, pl->kw, pl->stride_w, 1, pl->pad_left, out->off[2], out->size[2], &need->off[2], &need->size[2],
         &local->pad_left, &local->pad_right);
    need->off[3] = out->off[3];
    need->size[3] = out->size[3];
    local->h = need->size[1];
    local->w = need->size[2];
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

void tl_spatial_reduce(const tl_box *mine, int ncores, const tl_box *needs, const float *const *rgrads, float *out)
{
    memset(out, 0, (size_t)tl_box_count(mine) * sizeof *out);
    tl_box part;
    for (int p = 0; p < ncores; p++)
        if (intersect(mine, &needs[p], &part))
            move(&part, &needs[p], rgrads[p], mine, out, true);
}

/* feed.c — the infeed thread and its routing of input_fn invocations to
 * replicas and cores (feed.h; spec tpu_estimator.md §4.1, §4.3, §8). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "feed.h"

struct tl_feed {
    tl_feed_spec spec;
    tl_input_plan plan;              /* a copy; calls points into `calls` */
    tl_input_call *calls;            /* (plan.input_fn_calls) */
    int R, cores;                    /* replicas; cores per replica (1 without model parallelism) */
    int r_lo, r_hi;                  /* the replicas this process feeds (spec.host) */
    int64_t b, D, W;                 /* model_fn batch; features and ids per example */
    bool broadcast;                  /* BROADCAST: every replica gets the whole host batch */
    int slots;                       /* get_next calls per step, all invocations */
    int64_t cap;                     /* rows per get_next (input_fn's batch) */
    float *stage_f;                  /* (slots * cap, D) one step's host batches */
    int32_t *stage_l;                /* (slots * cap) */
    int64_t *stage_i;                /* (slots * cap, W) */
    int64_t *stage_rows;             /* (slots) */
    tl_feed_batch *bufs;             /* (R * cores * depth) */
    tl_feed_batch *firsts;           /* (R * cores) prediction: the first step's batches */
    void *slab;
    int64_t *id_slab;                /* the core-0 buffers' id blocks */
    tl_queue **full, **free_list;    /* (R * cores) */
    tl_feed_batch **cur;             /* (R) one core a replica: the step's buffers */
    float **dst_f;                   /* (chunks) a get_next's destinations */
    int32_t **dst_l;
    int64_t **dst_i;
    /* The thread. */
    tl_thread thread;
    bool running;
    const tl_feed_source *sources;
    int64_t first, count;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t sleep_ns;                /* before the first step */
    bool holdable;                   /* started with a limit: per-step hand-shakes with the host */
    int64_t limit;                   /* produce steps below this */
    int64_t produced;                /* every step below this is in the queues */
    bool ended, closed;
    /* Pulled (tl_feed_start): no thread and no queue; the consumer makes
     * step `next` when it pops it, into its queue's first buffer, which it
     * gives back before its next pop. All but `shut` are the consumer's. */
    bool pulled;
    int64_t next, last;
    tl_team *team;                   /* the consumer's, during its pop */
    tl_feed_batch *ready;            /* the step made, not yet popped */
    atomic_bool shut;                /* aborted or stopped (the host's) */
    tl_status err;
    char errmsg[512];
};

static int64_t prod(const int64_t *v, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= v[i];
    return p;
}

tl_status tl_feed_create(const tl_feed_spec *spec, tl_feed **out)
{
    *out = NULL;
    const tl_input_plan *p = spec->plan;
    if (spec->depth < 1 || spec->frank < 0 || spec->frank > TL_MAX_RANK - 1)
        return tl_error(TL_EINVAL, "feed: depth %d and feature rank %d must be >= 1 and in [0, %d]", spec->depth,
                        spec->frank, TL_MAX_RANK - 1);
    if (spec->ids < 0)
        return tl_error(TL_EINVAL, "feed: ids per example must be >= 0, got %lld", (long long)spec->ids);
    if (p->input_fn_calls < 1 || p->model_fn_batch_size < 1 || (!p->on_device && p->input_fn_calls != 1))
        return tl_error(TL_EINVAL, "feed: the input plan of %s has no input (%s, %d input_fn calls, batch %lld)",
                        tl_mode_name(p->mode), tl_input_plan_mode_name(p), p->input_fn_calls,
                        (long long)p->model_fn_batch_size);
    int ncpr = tl_topology_num_cores_per_replica(spec->topo);
    int cores = ncpr > 0 && p->on_device ? ncpr : 1;
    if (spec->fpart != NULL && spec->fpart->kind != TL_PART_REPLICATE && spec->fpart->rank != spec->frank + 1)
        return tl_error(TL_EINVAL, "feed: the features' partition has rank %d; the features (batch, ...) have rank %d",
                        spec->fpart->rank, spec->frank + 1);
    if (spec->lpart != NULL && spec->lpart->kind != TL_PART_REPLICATE && spec->lpart->rank != 1)
        return tl_error(TL_EINVAL, "feed: the labels' partition has rank %d; the labels (batch) have rank 1",
                        spec->lpart->rank);
    tl_feed *f = tl_calloc(1, sizeof *f);
    if (f == NULL)
        return tl_error_oom();
    f->spec = *spec;
    f->plan = *p;
    /* The CPU path: replica 0 alone, with the whole batch, untiled. */
    f->R = p->on_device ? tl_topology_num_replicas(spec->topo) : 1;
    f->cores = cores;
    f->r_lo = 0;
    f->r_hi = f->R;
    if (spec->only_host && p->on_device) {
        f->r_lo = INT32_MAX;
        f->r_hi = 0;
        for (int i = 0; i < p->input_fn_calls; i++)
            if (p->calls[i].host == spec->host) {
                int a = p->calls[i].first_replica, b = a + p->calls[i].num_replicas;
                f->r_lo = a < f->r_lo ? a : f->r_lo;
                f->r_hi = b > f->r_hi ? b : f->r_hi;
            }
        if (f->r_lo >= f->r_hi)
            f->r_lo = f->r_hi = 0;
    }
    f->b = p->model_fn_batch_size;
    f->D = prod(spec->fshape, spec->frank);
    f->W = spec->ids;
    f->broadcast = p->on_device && p->input_mode == TL_BROADCAST;
    if (!p->on_device)
        f->spec.fpart = f->spec.lpart = NULL;
    f->cap = p->input_fn_batch_size;
    f->slots = p->input_fn_calls * p->get_next_per_step;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    int nq = f->R * cores;
    size_t nbuf = (size_t)nq * (size_t)spec->depth + (spec->predict ? (size_t)nq : 0);
    /* Each buffer: features (b * D), labels (b), padding_mask (b); a
     * core-0 buffer also ids (b * W), in a slab of their own (int64). */
    size_t per = (size_t)(f->b * f->D + 2 * f->b);
    size_t id_bufs = nbuf / (size_t)cores;
    f->calls = tl_calloc((size_t)p->input_fn_calls, sizeof *f->calls);
    f->stage_f = tl_calloc((size_t)(f->slots * f->cap * f->D) + 1, sizeof(float));
    f->stage_l = tl_calloc((size_t)(f->slots * f->cap) + 1, sizeof(int32_t));
    f->stage_i = tl_calloc((size_t)(f->slots * f->cap * f->W) + 1, sizeof(int64_t));
    f->stage_rows = tl_calloc((size_t)f->slots, sizeof(int64_t));
    f->bufs = tl_calloc(nbuf, sizeof *f->bufs);
    f->slab = tl_calloc(nbuf * per + 1, sizeof(float));
    f->id_slab = tl_calloc(id_bufs * (size_t)(f->b * f->W) + 1, sizeof(int64_t));
    f->full = tl_calloc((size_t)nq, sizeof *f->full);
    f->free_list = tl_calloc((size_t)nq, sizeof *f->free_list);
    f->cur = tl_calloc((size_t)f->R, sizeof *f->cur);
    f->dst_f = tl_calloc((size_t)f->R + 1, sizeof *f->dst_f);
    f->dst_l = tl_calloc((size_t)f->R + 1, sizeof *f->dst_l);
    f->dst_i = tl_calloc((size_t)f->R + 1, sizeof *f->dst_i);
    if (f->cur == NULL || f->dst_f == NULL || f->dst_l == NULL || f->dst_i == NULL || f->calls == NULL ||
        f->stage_f == NULL || f->stage_l == NULL || f->stage_i == NULL || f->stage_rows == NULL || f->bufs == NULL ||
        f->slab == NULL || f->id_slab == NULL || f->full == NULL || f->free_list == NULL) {
        tl_feed_destroy(f);
        return tl_error_oom();
    }
    memcpy(f->calls, p->calls, (size_t)p->input_fn_calls * sizeof *f->calls);
    f->plan.calls = f->calls;
    float *cur = f->slab;
    int64_t *icur = f->id_slab;
    for (size_t i = 0; i < nbuf; i++) {
        f->bufs[i].features = cur;
        f->bufs[i].labels = spec->labels ? (int32_t *)(cur + f->b * f->D) : NULL;
        f->bufs[i].padding_mask = (int32_t *)(cur + f->b * f->D + f->b);
        cur += per;
        /* Buffer i serves queue i / depth (the prediction firsts: queue
         * i - nq * depth); queue q is core q % cores of its replica. */
        size_t queued = (size_t)nq * (size_t)spec->depth;
        size_t q = i < queued ? i / (size_t)spec->depth : i - queued;
        if (f->W > 0 && q % (size_t)cores == 0) {
            f->bufs[i].ids = icur;
            icur += f->b * f->W;
        }
    }
    if (spec->predict)
        f->firsts = f->bufs + (size_t)nq * (size_t)spec->depth;
    *out = f;
    return TL_OK;
}

static void destroy_queues(tl_feed *f)
{
    for (int q = 0; f->full != NULL && q < f->R * f->cores; q++) {
        tl_queue_destroy(f->full[q]);
        tl_queue_destroy(f->free_list[q]);
        f->full[q] = f->free_list[q] = NULL;
    }
}

void tl_feed_destroy(tl_feed *f)
{
    if (f == NULL)
        return;
    (void)tl_feed_stop(f);
    destroy_queues(f);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    tl_free(f->calls);
    tl_free(f->stage_f);
    tl_free(f->stage_l);
    tl_free(f->stage_i);
    tl_free(f->stage_rows);
    tl_free(f->bufs);
    tl_free(f->slab);
    tl_free(f->id_slab);
    tl_free(f->full);
    tl_free(f->free_list);
    tl_free(f->cur);
    tl_free(f->dst_f);
    tl_free(f->dst_l);
    tl_free(f->dst_i);
    tl_free(f);
}

/* ---- the thread ---------------------------------------------------------- */

static void close_queues(tl_feed *f)
{
    atomic_store_explicit(&f->shut, true, memory_order_relaxed);
    for (int q = 0; q < f->R * f->cores; q++) {
        if (f->full[q] != NULL)
            tl_queue_close(f->full[q]);
        if (f->free_list[q] != NULL)
            tl_queue_close(f->free_list[q]);
    }
}

static void set_closed(tl_feed *f)
{
    pthread_mutex_lock(&f->mu);
    f->closed = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void fail(tl_feed *f, tl_status st)
{
    pthread_mutex_lock(&f->mu);
    if (f->err == TL_OK) {
        f->err = st;
        snprintf(f->errmsg, sizeof f->errmsg, "%s", tl_last_error());
    }
    pthread_mutex_unlock(&f->mu);
    close_queues(f);
    set_closed(f);
}

/* Copies the block at off of size (rank dims) out of the row-major tensor
 * src of shape into dst, contiguous. */
static void copy_tile(const char *src, const int64_t *shape, int rank, const int64_t *off, const int64_t *size,
                      size_t elem, char *dst)
{
    if (prod(size, rank) == 0)
        return;
    int64_t idx[TL_MAX_RANK + 1] = {0};
    int64_t inner = rank > 0 ? size[rank - 1] : 1;
    for (;;) {
        int64_t at = 0;
        for (int d = 0; d < rank; d++)
            at = at * shape[d] + off[d] + (d < rank - 1 ? idx[d] : 0);
        memcpy(dst, src + at * (int64_t)elem, (size_t)inner * elem);
        dst += inner * (int64_t)elem;
        int d = rank - 2;
        while (d >= 0 && ++idx[d] == size[d])
            idx[d--] = 0;
        if (d < 0)
            return;
    }
}

/* The tile of a tensor of shape (rank) that core gets under part: whole,
 * none (*has false) or tile `core`. */
static void tile_of(const tl_tensor_partition *part, int core, const int64_t *shape, int rank, bool *has,
                    int64_t *off, int64_t *size)
{
    *has = true;
    for (int d = 0; d < rank; d++) {
        off[d] = 0;
        size[d] = shape[d];
    }
    if (part == NULL || part->kind == TL_PART_REPLICATE)
        return;
    if (part->kind == TL_PART_CORE0) {
        *has = core == 0;
        return;
    }
    tl_status st = tl_partition_tile(shape, part->dims, rank, core, off, size);
    TL_ASSERT(st == TL_OK); /* dims were checked by tl_partition_plan */
}

/* Fills (replica r, core c)'s buffer for step s from b rows of features,
 * labels and ids, of which `real` are real. */
static void fill_buffer(tl_feed *f, int c, const float *feat, const int32_t *lab, const int64_t *ids, int64_t real,
                        int64_t s, tl_feed_batch *out)
{
    int64_t shape[TL_MAX_RANK + 1] = {f->b};
    memcpy(shape + 1, f->spec.fshape, (size_t)f->spec.frank * sizeof *shape);
    int rank = f->spec.frank + 1;
    out->step = s;
    out->rows = f->b;
    out->real_rows = real;
    out->stopping = false;
    out->end = false;
    tile_of(f->spec.fpart, c, shape, rank, &out->has_features, out->f_offset, out->f_size);
    if (out->has_features)
        copy_tile((const char *)feat, shape, rank, out->f_offset, out->f_size, sizeof(float), (char *)out->features);
    out->has_labels = false;
    if (f->spec.labels) {
        tile_of(f->spec.lpart, c, shape, 1, &out->has_labels, &out->l_offset, &out->l_size);
        if (out->has_labels)
            memcpy(out->labels, lab + out->l_offset, (size_t)out->l_size * sizeof *lab);
    }
    out->has_ids = out->ids != NULL;
    if (out->has_ids)
        memcpy(out->ids, ids, (size_t)(f->b * f->W) * sizeof *ids);
    for (int64_t i = 0; i < f->b; i++)
        out->padding_mask[i] = i >= real;
}

/* src and dst are buffers of the same core: both hold ids or neither. */
static void copy_batch(const tl_feed *f, const tl_feed_batch *src, tl_feed_batch *dst)
{
    float *fe = dst->features;
    int32_t *la = dst->labels, *pm = dst->padding_mask;
    int64_t *ids = dst->ids;
    *dst = *src;
    dst->features = fe;
    dst->labels = la;
    dst->padding_mask = pm;
    dst->ids = ids;
    memcpy(fe, src->features, (size_t)(f->b * f->D) * sizeof *fe);
    if (la != NULL)
        memcpy(la, src->labels, (size_t)f->b * sizeof *la);
    memcpy(pm, src->padding_mask, (size_t)f->b * sizeof *pm);
    if (ids != NULL)
        memcpy(ids, src->ids, (size_t)(f->b * f->W) * sizeof *ids);
}

/* A free buffer of queue q; a pulled feed's is always its first. */
static tl_wait_result take_free(tl_feed *f, int q, tl_feed_batch **b)
{
    if (!f->pulled)
        return tl_queue_pop(f->free_list[q], b);
    if (atomic_load_explicit(&f->shut, memory_order_relaxed))
        return TL_WAIT_CLOSED;
    *b = &f->bufs[q * f->spec.depth];
    return TL_WAIT_OK;
}

/* Hands (r, c) its batch of step s: takes a free buffer, fills it (from
 * rows, or as the stop batch when stop), pushes it. False when closed. */
static bool deliver(tl_feed *f, int r, int c, int64_t s, const float *feat, const int32_t *lab, const int64_t *ids,
                    int64_t real, bool stop, bool end)
{
    int q = r * f->cores + c;
    tl_feed_batch *b;
    if (take_free(f, q, &b) != TL_WAIT_OK)
        return false;
    if (stop) {
        if (s > f->first) {
            copy_batch(f, &f->firsts[q], b);
        } else { /* no first batch to repeat: zeros, all padding */
            fill_buffer(f, c, f->stage_f, f->stage_l, f->stage_i, 0, s, b);
            memset(b->features, 0, (size_t)(f->b * f->D) * sizeof(float));
            if (b->ids != NULL)
                memset(b->ids, 0, (size_t)(f->b * f->W) * sizeof(int64_t));
        }
        b->step = s;
        b->stopping = true;
    } else {
        fill_buffer(f, c, feat, lab, ids, real, s, b);
        b->end = end;
        if (f->spec.predict && s == f->first)
            copy_batch(f, b, &f->firsts[q]);
    }
    return tl_queue_push(f->full[q], &b) == TL_WAIT_OK;
}

/* Checks what get_next i (of invocation call) returned. */
static tl_status check_rows(const tl_feed *f, const tl_input_call *call, int64_t s, tl_status st, int64_t rows)
{
    const tl_input_plan *p = &f->plan;
    if (st != TL_OK)
        return tl_error(st, "input_fn invocation %d (host %d), step %lld: %s", call->index, call->host, (long long)s,
                        tl_last_error());
    if (rows < 0 || rows > f->cap)
        return tl_error(TL_ERUNTIME, "input_fn invocation %d returned %lld rows for a batch of %lld", call->index,
                        (long long)rows, (long long)f->cap);
    if (!f->spec.predict && rows == 0 && !f->spec.may_end)
        return tl_error(TL_EINVAL, "input_fn invocation %d (host %d) ran out of data at step %lld: training and "
                                   "evaluation need %lld steps (repeat() the dataset, or ask for fewer steps)",
                        call->index, call->host, (long long)s, (long long)(f->first + f->count));
    if (!f->spec.predict && !f->spec.pad_short && rows != f->cap && rows != 0)
        return tl_error(TL_EINVAL, "input_fn invocation %d (host %d) gave a batch of %lld rows at step %lld; the %s "
                                   "input plan needs %lld (params['batch_size']): the features must have static "
                                   "shape, so batch with drop_remainder",
                        call->index, call->host, (long long)rows, (long long)s, tl_input_plan_mode_name(p),
                        (long long)f->cap);
    return TL_OK;
}

/* Whether this process runs invocation call (spec.host). */
static bool mine(const tl_feed *f, const tl_input_call *call)
{
    return !f->spec.only_host || !f->plan.on_device || call->host == f->spec.host;
}

/* The replica fed by chunk j of get_next k of invocation call. */
static int replica_of(const tl_feed *f, const tl_input_call *call, int k, int64_t j)
{
    int64_t chunks = f->broadcast ? 1 : f->cap / f->b;
    return call->first_replica + (int)(k * chunks + j);
}

/* ---- with tiles: one staging area, then every core's tile ---------------- */

/* Reads every get_next of step s into the stage. *all_empty: every source
 * was at its end. */
static tl_status read_step(tl_feed *f, int64_t s, bool *all_empty, bool *any_empty)
{
    const tl_input_plan *p = &f->plan;
    int gn = p->get_next_per_step;
    *all_empty = true;
    *any_empty = false;
    for (int i = 0; i < p->input_fn_calls; i++) {
        const tl_input_call *call = &p->calls[i];
        if (!mine(f, call))
            continue;
        for (int k = 0; k < gn; k++) {
            int slot = i * gn + k;
            float *fe = f->stage_f + (int64_t)slot * f->cap * f->D;
            int32_t *la = f->stage_l + (int64_t)slot * f->cap;
            int64_t *ii = f->stage_i + (int64_t)slot * f->cap * f->W;
            tl_feed_dest dst = {&fe, f->spec.labels ? &la : NULL, f->W > 0 ? &ii : NULL, f->cap, NULL};
            int64_t row0 = f->broadcast ? 0 : (int64_t)replica_of(f, call, k, 0) * f->b;
            int64_t rows = -1;
            tl_status st = f->sources[i].next(f->sources[i].ud, s, row0, f->cap, &dst, &rows);
            st = check_rows(f, call, s, st, rows);
            if (st != TL_OK)
                return st;
            if (rows < f->cap) { /* prediction: zero padding rows */
                memset(fe + rows * f->D, 0, (size_t)((f->cap - rows) * f->D) * sizeof *fe);
                memset(la + rows, 0, (size_t)(f->cap - rows) * sizeof *la);
                memset(ii + rows * f->W, 0, (size_t)((f->cap - rows) * f->W) * sizeof *ii);
            }
            f->stage_rows[slot] = rows;
            if (rows > 0)
                *all_empty = false;
            else
                *any_empty = true;
        }
    }
    return TL_OK;
}

/* Routes the staged step s to every (replica, core); end marks every batch
 * as the input's end. */
static bool route_step(tl_feed *f, int64_t s, bool stop, bool end)
{
    const tl_input_plan *p = &f->plan;
    int gn = p->get_next_per_step;
    int64_t chunks = f->broadcast ? 1 : f->cap / f->b;
    for (int i = 0; i < p->input_fn_calls; i++) {
        const tl_input_call *call = &p->calls[i];
        if (!mine(f, call))
            continue;
        for (int k = 0; k < gn; k++) {
            int slot = i * gn + k;
            const float *fe = f->stage_f + (int64_t)slot * f->cap * f->D;
            const int32_t *la = f->stage_l + (int64_t)slot * f->cap;
            const int64_t *ii = f->stage_i + (int64_t)slot * f->cap * f->W;
            int64_t rows = f->stage_rows[slot];
            if (f->broadcast) {
                for (int r = call->first_replica; r < call->first_replica + call->num_replicas; r++)
                    for (int c = 0; c < f->cores; c++)
                        if (!deliver(f, r, c, s, fe, la, ii, end ? 0 : rows, stop, end))
                            return false;
                continue;
            }
            for (int64_t j = 0; j < chunks; j++) {
                int r = replica_of(f, call, k, j);
                int64_t real = rows - j * f->b;
                real = real < 0 ? 0 : real > f->b ? f->b : real;
                for (int c = 0; c < f->cores; c++)
                    if (!deliver(f, r, c, s, fe + j * f->b * f->D, la + j * f->b, ii + j * f->b * f->W,
                                 end ? 0 : real, stop, end))
                        return false;
            }
        }
    }
    return true;
}

/* ---- one core a replica: straight into the replicas' buffers ------------- */

/* Marks replica buffer b as step s with `real` real rows of b, zeroing the
 * padding rows. */
static void finish_buffer(const tl_feed *f, int64_t s, int64_t real, tl_feed_batch *b)
{
    b->step = s;
    b->rows = f->b;
    b->real_rows = real;
    b->stopping = false;
    b->end = false;
    b->has_features = true;
    b->has_labels = f->spec.labels;
    b->f_offset[0] = 0;
    b->f_size[0] = f->b;
    for (int d = 0; d < f->spec.frank; d++) {
        b->f_offset[d + 1] = 0;
        b->f_size[d + 1] = f->spec.fshape[d];
    }
    b->l_offset = 0;
    b->l_size = f->b;
    b->has_ids = b->ids != NULL;
    if (real < f->b) {
        memset(b->features + real * f->D, 0, (size_t)((f->b - real) * f->D) * sizeof(float));
        if (b->labels != NULL)
            memset(b->labels + real, 0, (size_t)(f->b - real) * sizeof(int32_t));
        if (b->ids != NULL)
            memset(b->ids + real * f->W, 0, (size_t)((f->b - real) * f->W) * sizeof(int64_t));
    }
    for (int64_t i = 0; i < f->b; i++)
        b->padding_mask[i] = i >= real;
}

/* Step s without tiles: every replica's free buffer first, then each
 * get_next writes its rows into the buffers of the replicas it feeds (one
 * copy), BROADCAST copies to the rest. *ok false when the feed closed; a
 * source's error is returned. */
static tl_status direct_step(tl_feed *f, int64_t s, bool *ok, bool *stop, bool *end)
{
    const tl_input_plan *p = &f->plan;
    int gn = p->get_next_per_step;
    int64_t chunks = f->broadcast ? 1 : f->cap / f->b;
    *ok = false;
    *stop = false;
    *end = false;
    for (int r = f->r_lo; r < f->r_hi; r++)
        if (take_free(f, r, &f->cur[r]) != TL_WAIT_OK)
            return TL_OK;
    bool any = false, empty = false;
    for (int i = 0; i < p->input_fn_calls; i++) {
        const tl_input_call *call = &p->calls[i];
        if (!mine(f, call))
            continue;
        for (int k = 0; k < gn; k++) {
            for (int64_t j = 0; j < chunks; j++) {
                tl_feed_batch *b = f->cur[replica_of(f, call, k, j)];
                f->dst_f[j] = b->features;
                f->dst_l[j] = b->labels;
                f->dst_i[j] = b->ids;
            }
            tl_feed_dest dst = {f->dst_f, f->spec.labels ? f->dst_l : NULL, f->W > 0 ? f->dst_i : NULL, f->b,
                                f->pulled ? f->team : NULL};
            int64_t row0 = f->broadcast ? 0 : (int64_t)replica_of(f, call, k, 0) * f->b;
            int64_t rows = -1;
            tl_status st = f->sources[i].next(f->sources[i].ud, s, row0, f->cap, &dst, &rows);
            st = check_rows(f, call, s, st, rows);
            if (st != TL_OK)
                return st;
            f->stage_rows[i * gn + k] = rows;
            any |= rows > 0;
            empty |= rows == 0;
        }
    }
    *stop = f->spec.predict && !any;
    *end = f->spec.may_end && empty;
    for (int i = 0; i < p->input_fn_calls; i++) {
        const tl_input_call *call = &p->calls[i];
        if (!mine(f, call))
            continue;
        for (int k = 0; k < gn; k++) {
            int64_t rows = f->stage_rows[i * gn + k];
            for (int64_t j = 0; j < chunks; j++) {
                int64_t real = rows - j * f->b;
                real = *end ? 0 : real < 0 ? 0 : real > f->b ? f->b : real;
                finish_buffer(f, s, real, f->cur[replica_of(f, call, k, j)]);
            }
            if (f->broadcast)
                for (int r = call->first_replica + 1; r < call->first_replica + call->num_replicas; r++)
                    copy_batch(f, f->cur[call->first_replica], f->cur[r]);
        }
    }
    for (int r = f->r_lo; r < f->r_hi; r++) {
        tl_feed_batch *b = f->cur[r];
        if (*stop) {
            if (s > f->first)
                copy_batch(f, &f->firsts[r], b); /* the stop batch repeats the first */
            b->step = s;
            b->stopping = true;
        } else if (f->spec.predict && s == f->first) {
            copy_batch(f, b, &f->firsts[r]);
        }
        b->end = *end;
        if (f->pulled)
            f->ready = b;
        else if (tl_queue_push(f->full[r], &b) != TL_WAIT_OK)
            return TL_OK;
    }
    *ok = true;
    return TL_OK;
}

/* Makes step s: every (replica, core) of this process gets its batch. *ok
 * false when the queues closed first; *done when the input stops (the
 * prediction's stop batch) or ends there. A source's error is returned. */
static tl_status make_step(tl_feed *f, int64_t s, bool *ok, bool *done)
{
    bool stop = false, end = false;
    tl_status st;
    if (f->cores == 1) {
        st = direct_step(f, s, ok, &stop, &end);
    } else {
        bool empty, any_empty;
        st = read_step(f, s, &empty, &any_empty);
        stop = f->spec.predict && empty;
        end = f->spec.may_end && any_empty;
        *ok = st == TL_OK && route_step(f, s, stop, end);
    }
    *done = stop || end;
    return st;
}

static void *feed_main(void *arg)
{
    tl_feed *f = arg;
    int64_t last = f->count < 0 ? INT64_MAX : f->first + f->count;
    if (f->sleep_ns > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t secs = f->sleep_ns / 1000000000, ns = ts.tv_nsec + f->sleep_ns % 1000000000;
        ts.tv_sec = secs > INT32_MAX ? INT32_MAX + ts.tv_sec : ts.tv_sec + secs + ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_mutex_lock(&f->mu);
        while (!f->closed && pthread_cond_timedwait(&f->cv, &f->mu, &ts) == 0) {
        }
        bool closed = f->closed;
        pthread_mutex_unlock(&f->mu);
        if (closed)
            return NULL;
    }
    for (int64_t s = f->first; s < last; s++) {
        /* Only a held feed synchronises with the host per step; otherwise
         * the queues alone pace it (and closing them stops it). */
        if (f->holdable) {
            pthread_mutex_lock(&f->mu);
            while (s >= f->limit && !f->closed)
                pthread_cond_wait(&f->cv, &f->mu);
            bool closed = f->closed;
            pthread_mutex_unlock(&f->mu);
            if (closed)
                return NULL;
        }
        bool ok, done;
        tl_status st = make_step(f, s, &ok, &done);
        if (st != TL_OK) {
            fail(f, st);
            return NULL;
        }
        if (!ok)
            return NULL;
        if (f->holdable) {
            pthread_mutex_lock(&f->mu);
            f->produced = s + 1;
            pthread_cond_broadcast(&f->cv);
            pthread_mutex_unlock(&f->mu);
        }
        if (done)
            break;
    }
    pthread_mutex_lock(&f->mu);
    f->ended = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* ---- the consumers' side ------------------------------------------------- */

/* A step's input under this many bytes costs less to copy on the consumer's
 * thread than to hand over from another: a hand-off is a few cache-line
 * transfers and a wake-up, ~0.2-0.5 us here, the time of copying ~16 KiB. */
#define PULL_ALWAYS_BYTES 16384

/* Whether the consumer makes the steps itself: it is this process's only
 * one, nothing holds or delays the feed, every source it runs is pure, and
 * a thread would not pay: it would have no core of its own beside the
 * device's threads, or the step's input is small. */
static bool pullable(const tl_feed *f)
{
    if (f->cores != 1 || f->r_hi - f->r_lo != 1 || f->holdable || f->sleep_ns > 0)
        return false;
    for (int i = 0; i < f->plan.input_fn_calls; i++)
        if (mine(f, &f->plan.calls[i]) && !f->sources[i].pure)
            return false;
    int device_threads = tl_topology_devices_per_host(f->spec.topo) * tl_topology_intra_op_threads(f->spec.topo);
    int64_t bytes = f->b * (f->D * (int64_t)sizeof(float) + (int64_t)sizeof(int32_t) + f->W * (int64_t)sizeof(int64_t));
    return device_threads + 1 > tl_available_cpus() || bytes < PULL_ALWAYS_BYTES;
}

tl_status tl_feed_start(tl_feed *f, const tl_feed_source *sources, int64_t first, int64_t count, int64_t limit)
{
    TL_ASSERT(!f->running);
    int nq = f->R * f->cores;
    int depth = f->spec.depth;
    tl_status st = TL_OK;
    /* A closed queue stays closed: fresh queues every start. */
    destroy_queues(f);
    f->sources = sources;
    f->first = first;
    f->count = count;
    f->limit = limit;
    f->holdable = limit != INT64_MAX;
    f->produced = first;
    f->ended = f->closed = false;
    f->err = TL_OK;
    f->errmsg[0] = '\0';
    f->pulled = pullable(f);
    f->ready = NULL;
    atomic_store_explicit(&f->shut, false, memory_order_relaxed);
    f->next = first;
    f->last = count < 0 ? INT64_MAX : first + count;
    if (f->pulled) {
        f->running = true;
        return TL_OK;
    }
    int64_t spin = nq + 1 <= tl_available_cpus() ? 20000 : 0;
    for (int q = 0; q < nq && st == TL_OK; q++) {
        if ((st = tl_queue_create((size_t)depth, sizeof(tl_feed_batch *), &f->full[q])) == TL_OK)
            st = tl_queue_create((size_t)depth, sizeof(tl_feed_batch *), &f->free_list[q]);
        if (st != TL_OK)
            break;
        (void)tl_queue_set_spin(f->full[q], spin);
        (void)tl_queue_set_spin(f->free_list[q], spin);
        for (int k = 0; k < depth; k++) {
            tl_feed_batch *b = &f->bufs[q * depth + k];
            tl_wait_result w = tl_queue_push(f->free_list[q], &b);
            TL_ASSERT(w == TL_WAIT_OK);
        }
    }
    if (st == TL_OK)
        st = tl_thread_start(&f->thread, feed_main, f);
    if (st != TL_OK) {
        destroy_queues(f);
        return st;
    }
    f->running = true;
    return TL_OK;
}

bool tl_feed_pulled(const tl_feed *f)
{
    return f->running && f->pulled;
}

void tl_feed_set_sleep(tl_feed *f, int64_t ns)
{
    f->sleep_ns = ns;
}

void tl_feed_allow(tl_feed *f, int64_t limit)
{
    pthread_mutex_lock(&f->mu);
    if (limit > f->limit)
        f->limit = limit;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

void tl_feed_wait_produced(tl_feed *f, int64_t step)
{
    pthread_mutex_lock(&f->mu);
    while (f->running && f->produced < step && !f->ended && !f->closed)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static tl_status closed_before(int64_t step, int replica, int core)
{
    return tl_error(TL_ERUNTIME, "infeed closed before step %lld reached replica %d core %d", (long long)step,
                    replica, core);
}

/* A pulled feed's pop: makes step (the next one) and takes its batch. */
static tl_status pull(tl_feed *f, int replica, int core, int64_t step, tl_team *team, tl_feed_batch **out)
{
    if (step == f->next && step < f->last) {
        bool ok, done;
        f->next++;
        f->team = team;
        tl_status st = make_step(f, step, &ok, &done);
        f->team = NULL;
        if (st != TL_OK) {
            fail(f, st); /* keeps tl_last_error(), the source's message */
            return st;
        }
        if (done)
            f->last = f->next;
    }
    /* Past the last step, after an abort, or a step out of order: no batch
     * is coming, and no thread that could bring one. */
    if (f->ready == NULL || f->ready->step != step)
        return closed_before(step, replica, core);
    *out = f->ready;
    f->ready = NULL;
    return TL_OK;
}

tl_status tl_feed_pop(tl_feed *f, int replica, int core, int64_t step, tl_team *team, tl_feed_batch **out,
                      int64_t *waited_ns)
{
    if (f->pulled)
        return pull(f, replica, core, step, team, out);
    tl_queue *q = f->full[replica * f->cores + core];
    tl_wait_result w;
    if (waited_ns != NULL) {
        /* Only a wait is timed: a ready batch costs no clock read. */
        w = tl_queue_pop_until(q, out, 0);
        if (w == TL_WAIT_TIMEOUT) {
            int64_t t0 = tl_now_ns();
            w = tl_queue_pop(q, out);
            *waited_ns += tl_now_ns() - t0;
        }
    } else {
        w = tl_queue_pop(q, out);
    }
    if (w != TL_WAIT_OK)
        return closed_before(step, replica, core);
    TL_ASSERT((*out)->step == step);
    return TL_OK;
}

void tl_feed_release(tl_feed *f, int replica, int core, tl_feed_batch *b)
{
    /* Never full: the consumer holds one of the depth buffers of its queue.
     * A closed list means the feed is ending; the buffer is not needed. */
    if (!f->pulled)
        (void)tl_queue_push(f->free_list[replica * f->cores + core], &b);
}

void tl_feed_abort(tl_feed *f)
{
    if (!f->running)
        return;
    close_queues(f);
    set_closed(f);
}

tl_status tl_feed_stop(tl_feed *f)
{
    if (!f->running)
        return TL_OK;
    close_queues(f);
    set_closed(f);
    if (!f->pulled)
        tl_thread_join(&f->thread, NULL);
    f->running = false;
    if (f->err != TL_OK)
        return tl_error(f->err, "%s", f->errmsg);
    return TL_OK;
}

tl_status tl_feed_error(tl_feed *f, const char **msg)
{
    pthread_mutex_lock(&f->mu);
    tl_status st = f->err;
    pthread_mutex_unlock(&f->mu);
    if (msg != NULL)
        *msg = f->errmsg;
    return st;
}

/* infeed.c — the input thread of the estimator (spec tpu_estimator.md §3.1):
 * one per host, it cuts each global batch into the replicas' slices, in step
 * order, into preallocated buffers, and runs ahead of the workers by the
 * depth of their bounded queues. */
#define _GNU_SOURCE
#include <string.h>

#include "estimator_int.h"

/* ---- input order: a permutation per epoch without storage ---------------- */

static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The position-th example of epoch `epoch`'s shuffle of [0, n): a 4-round
 * Feistel network over the smallest even-bit power of two >= n, cycle-walked
 * into range. A pure function of (seed, epoch, position), so the order never
 * depends on who cuts the batches or how far ahead. */
static int64_t shuffled(uint64_t seed, int64_t epoch, int64_t position, int64_t n)
{
    int bits = 2;
    while (((int64_t)1 << bits) < n)
        bits += 2;
    int half = bits / 2;
    uint64_t mask = ((uint64_t)1 << half) - 1;
    uint64_t key = mix64(seed ^ mix64((uint64_t)epoch + 0x5348554646ull));
    uint64_t x = (uint64_t)position;
    do {
        uint64_t l = x >> half, r = x & mask;
        for (int round = 0; round < 4; round++) {
            uint64_t f = mix64(r ^ key ^ ((uint64_t)round << 56)) & mask;
            uint64_t t = r;
            r = l ^ f;
            l = t;
        }
        x = (l << half) | r;
    } while (x >= (uint64_t)n);
    return (int64_t)x;
}

/* Fills b with replica rank's rows of global batch `step`: training draws
 * positions of the epoch's permutation, evaluation takes the data in order. */
static void fill(const tl_estimator *est, tl_cmd_kind cmd, int rank, int64_t step, tl_batch_buf *b)
{
    const tl_labeled_data *d = est->data;
    const tl_mode_prog *m = cmd == CMD_TRAIN ? &est->train : &est->eval;
    int64_t G = m->batch * est->R, D = est->D;
    uint64_t seed = est->rc.tf_random_seed.set ? (uint64_t)est->rc.tf_random_seed.value : 0;
    int64_t epoch = 0, in_epoch = step;
    if (cmd == CMD_TRAIN) {
        epoch = step / est->steps_per_epoch;
        in_epoch = step % est->steps_per_epoch;
    }
    for (int64_t i = 0; i < m->batch; i++) {
        int64_t pos = in_epoch * G + (int64_t)rank * m->batch + i;
        int64_t ex = cmd == CMD_TRAIN ? shuffled(seed, epoch, pos, d->num_examples) : pos;
        memcpy(b->features + i * D, d->features + ex * D, (size_t)D * sizeof *b->features);
        b->labels[i] = d->labels[ex];
    }
    b->step = step;
    b->stopping = false;
    b->real_rows = m->batch;
}

/* §8: predict batch `step` is examples [step * G, (step + 1) * G) in order,
 * zero rows (padding_mask 1) past the end; batch `last` is the stop batch, a
 * copy of batch 0 with stopping set (TensorFlow runs it and drops its
 * outputs). Labels are not read: prediction data need not have them. */
static void fill_predict(const tl_estimator *est, int rank, int64_t step, int64_t last, tl_batch_buf *b)
{
    const tl_labeled_data *d = est->data;
    int64_t B = est->predict.batch, G = B * est->R, D = est->D;
    int64_t first = (step == last ? 0 : step * G) + (int64_t)rank * B;
    b->real_rows = 0;
    for (int64_t i = 0; i < B; i++) {
        int64_t ex = first + i;
        bool real = ex < d->num_examples;
        if (real)
            memcpy(b->features + i * D, d->features + ex * D, (size_t)D * sizeof *b->features);
        else
            memset(b->features + i * D, 0, (size_t)D * sizeof *b->features);
        b->padding_mask[i] = !real;
        b->real_rows += real;
    }
    b->step = step;
    b->stopping = step == last;
}

static void close_all(tl_infeed *f, int R)
{
    for (int r = 0; r < R; r++) {
        if (f->full && f->full[r])
            tl_queue_close(f->full[r]);
        if (f->free_list && f->free_list[r])
            tl_queue_close(f->free_list[r]);
    }
    if (f->stop)
        tl_queue_close(f->stop);
}

static void *infeed_main(void *arg)
{
    tl_estimator *est = arg;
    tl_infeed *f = &est->infeed;
    if (f->sleep_ns > 0) {
        /* initial_infeed_sleep_secs: the stop queue is never pushed, so this
         * waits out the deadline unless tl_infeed_stop closes it. */
        char unused;
        if (tl_queue_pop_until(f->stop, &unused, tl_deadline_after_ns(f->sleep_ns)) != TL_WAIT_TIMEOUT)
            return NULL;
    }
    /* Prediction ends with the stop batch, one past the data's batches. */
    int64_t end = f->first + f->count + (f->cmd == CMD_PREDICT);
    for (int64_t s = f->first; s < end; s++) {
        for (int r = 0; r < est->R; r++) {
            tl_batch_buf *b;
            if (tl_queue_pop(f->free_list[r], &b) != TL_WAIT_OK)
                return NULL;
            if (f->cmd == CMD_PREDICT)
                fill_predict(est, r, s, f->first + f->count, b);
            else
                fill(est, f->cmd, r, s, b);
            if (tl_queue_push(f->full[r], &b) != TL_WAIT_OK)
                return NULL;
        }
    }
    return NULL;
}

tl_status tl_infeed_init(tl_estimator *est, int depth, int64_t max_batch)
{
    tl_infeed *f = &est->infeed;
    int R = est->R;
    int64_t per = max_batch * est->D + 2 * max_batch; /* labels and padding_mask take a float's room */
    f->depth = depth;
    f->slab = tl_calloc((size_t)(R * depth) * (size_t)per, sizeof(float));
    f->bufs = tl_calloc((size_t)(R * depth), sizeof *f->bufs);
    f->full = tl_calloc((size_t)R, sizeof *f->full);
    f->free_list = tl_calloc((size_t)R, sizeof *f->free_list);
    if (f->slab == NULL || f->bufs == NULL || f->full == NULL || f->free_list == NULL)
        return tl_error_oom();
    for (int i = 0; i < R * depth; i++) {
        f->bufs[i].features = f->slab + (int64_t)i * per;
        f->bufs[i].labels = (int32_t *)(f->bufs[i].features + max_batch * est->D);
        f->bufs[i].padding_mask = (int32_t *)(f->bufs[i].features + max_batch * est->D + max_batch);
    }
    return TL_OK;
}

static void destroy_queues(tl_infeed *f, int R)
{
    for (int r = 0; f->full && r < R; r++) {
        tl_queue_destroy(f->full[r]);
        tl_queue_destroy(f->free_list[r]);
        f->full[r] = f->free_list[r] = NULL;
    }
    tl_queue_destroy(f->stop);
    f->stop = NULL;
}

tl_status tl_infeed_start(tl_estimator *est, tl_cmd_kind cmd, int64_t first, int64_t count)
{
    tl_infeed *f = &est->infeed;
    int R = est->R;
    tl_status st = TL_OK;
    /* A closed queue stays closed, so every call gets fresh queues; the
     * buffers they carry are the same. */
    for (int r = 0; r < R && st == TL_OK; r++) {
        if ((st = tl_queue_create((size_t)f->depth, sizeof(tl_batch_buf *), &f->full[r])) == TL_OK)
            st = tl_queue_create((size_t)f->depth, sizeof(tl_batch_buf *), &f->free_list[r]);
        if (st == TL_OK) {
            /* The workers and this thread each have a core while a loop runs
             * (the host sleeps in the done barrier): hand-offs spin. */
            int64_t spin = R + 1 <= tl_available_cpus() ? 20000 : 0;
            (void)tl_queue_set_spin(f->full[r], spin); /* spin >= 0: cannot fail */
            (void)tl_queue_set_spin(f->free_list[r], spin);
        }
        for (int k = 0; k < f->depth && st == TL_OK; k++) {
            tl_batch_buf *b = &f->bufs[r * f->depth + k];
            tl_wait_result w = tl_queue_push(f->free_list[r], &b);
            TL_ASSERT(w == TL_WAIT_OK);
        }
    }
    if (st == TL_OK)
        st = tl_queue_create(1, 1, &f->stop);
    if (st != TL_OK) {
        destroy_queues(f, R);
        return st;
    }
    f->cmd = cmd;
    f->first = first;
    f->count = count;
    int64_t secs = est->rc.tpu.initial_infeed_sleep_secs;
    f->sleep_ns = secs <= 0 ? 0 : secs >= INT64_MAX / 1000000000 ? INT64_MAX : secs * 1000000000;
    if ((st = tl_thread_start(&f->thread, infeed_main, est)) != TL_OK) {
        destroy_queues(f, R);
        return st;
    }
    f->running = true;
    return TL_OK;
}

void tl_infeed_stop(tl_estimator *est)
{
    tl_infeed *f = &est->infeed;
    if (!f->running)
        return;
    close_all(f, est->R);
    tl_thread_join(&f->thread, NULL);
    f->running = false;
    destroy_queues(f, est->R);
}

void tl_infeed_abort(tl_estimator *est)
{
    /* The queues live from tl_infeed_start to tl_infeed_stop, which the host
     * calls only after every worker is past the loop. */
    if (est->infeed.running)
        close_all(&est->infeed, est->R);
}

void tl_infeed_free(tl_estimator *est)
{
    tl_infeed *f = &est->infeed;
    tl_infeed_stop(est);
    tl_free(f->slab);
    tl_free(f->bufs);
    tl_free(f->full);
    tl_free(f->free_list);
}

tl_status tl_infeed_pop(tl_estimator *est, int rank, int64_t step, tl_batch_buf **out)
{
    if (tl_queue_pop(est->infeed.full[rank], out) != TL_WAIT_OK)
        return tl_error(TL_ERUNTIME, "infeed closed before step %lld reached replica %d", (long long)step, rank);
    TL_ASSERT((*out)->step == step);
    return TL_OK;
}

void tl_infeed_release(tl_estimator *est, int rank, tl_batch_buf *b)
{
    /* Never full: the replica holds one of the depth buffers it owns. A
     * closed list means the pipeline is ending; the buffer is not needed. */
    (void)tl_queue_push(est->infeed.free_list[rank], &b);
}

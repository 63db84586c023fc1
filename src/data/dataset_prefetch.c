/* dataset_prefetch.c — prefetch: one producer thread reads the input ahead
 * of the consumer into a ring of buffer_size elements. The producer is the
 * input's only reader, so the order is the input's. A save pauses it
 * between elements and writes the ring with the input's state. */
#include <string.h>

#include "../base/thread.h"
#include "dataset_int.h"

#define MAX_PREFETCH ((int64_t)1 << 20)

typedef struct prefetch_impl {
    int64_t cap;
    ds_elem **ring;     /* (cap) */
    int64_t head, count;
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* any change; broadcast */
    bool sync_ok;
    tl_thread th;
    bool started, stop, paused, busy;
    bool done;          /* the producer saw the end or failed */
    tl_status fail_st;  /* its failure, repeated by every later call */
    char *fail_msg;
} prefetch_impl;

static void *producer(void *arg)
{
    tl_dataset *ds = arg;
    prefetch_impl *p = ds->impl;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && (p->paused || p->count == p->cap))
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop)
            break;
        p->busy = true;
        pthread_mutex_unlock(&p->mu);
        ds_elem *e = NULL;
        tl_status st = ds_pull(ds->input, &e);
        char *msg = st != TL_OK ? tl_strdup(tl_last_error()) : NULL;
        pthread_mutex_lock(&p->mu);
        p->busy = false;
        if (st != TL_OK || e == NULL) {
            p->done = true;
            p->fail_st = st;
            p->fail_msg = msg;
            pthread_cond_broadcast(&p->cv);
            break;
        }
        p->ring[(p->head + p->count) % p->cap] = e;
        p->count++;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void producer_stop(prefetch_impl *p)
{
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    tl_thread_join(&p->th, NULL);
    p->started = false;
    p->stop = false;
}

static void ring_clear(prefetch_impl *p)
{
    for (int64_t i = 0; i < p->count; i++) {
        ds_elem_free(p->ring[(p->head + i) % p->cap]);
        p->ring[(p->head + i) % p->cap] = NULL;
    }
    p->head = p->count = 0;
    p->done = false;
    p->fail_st = TL_OK;
    tl_free(p->fail_msg);
    p->fail_msg = NULL;
}

static tl_status prefetch_next(tl_dataset *ds, ds_elem **out)
{
    prefetch_impl *p = ds->impl;
    if (!p->started && !p->done) {
        tl_status st = tl_thread_start(&p->th, producer, ds);
        if (st != TL_OK)
            return st;
        p->started = true;
    }
    pthread_mutex_lock(&p->mu);
    while (p->count == 0 && !p->done)
        pthread_cond_wait(&p->cv, &p->mu);
    tl_status st = TL_OK;
    if (p->count > 0) {
        *out = p->ring[p->head];
        p->ring[p->head] = NULL;
        p->head = (p->head + 1) % p->cap;
        p->count--;
        pthread_cond_broadcast(&p->cv);
    } else if (p->fail_st != TL_OK) {
        st = tl_error(p->fail_st, "%s", p->fail_msg != NULL ? p->fail_msg : "out of memory");
    }
    pthread_mutex_unlock(&p->mu);
    return st;
}

static tl_status prefetch_reset(tl_dataset *ds, uint64_t epoch_key)
{
    prefetch_impl *p = ds->impl;
    producer_stop(p);
    ring_clear(p);
    return ds_reset(ds->input, epoch_key);
}

static void prefetch_pause(tl_dataset *ds)
{
    prefetch_impl *p = ds->impl;
    pthread_mutex_lock(&p->mu);
    p->paused = true;
    while (p->busy)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static void prefetch_resume(tl_dataset *ds)
{
    prefetch_impl *p = ds->impl;
    pthread_mutex_lock(&p->mu);
    p->paused = false;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Runs paused: the producer is between elements, so the ring and the
 * input's state agree. */
static tl_status prefetch_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    prefetch_impl *p = ds->impl;
    if (p->count == 0 && p->fail_st != TL_OK)
        return tl_error(TL_ERUNTIME, "save: the pipeline already failed: %s", p->fail_msg);
    ds_save_slots_begin(sv);
    for (int64_t i = 0; i < p->count; i++)
        ds_save_slot(sv, p->ring[(p->head + i) % p->cap]);
    return ds_save_slots_end(sv, obj, "buffer");
}

static tl_status prefetch_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    prefetch_impl *p = ds->impl;
    ds_elem **slots;
    int64_t n;
    tl_status st = ds_load_slots(ld, obj, "buffer", "restore: prefetch", MAX_PREFETCH, &slots, &n);
    for (int64_t i = 0; i < n && st == TL_OK; i++)
        if (slots[i] == NULL)
            st = tl_error(TL_EINVAL, "restore: prefetch: saved slot %lld is empty; a prefetch buffer holds elements",
                          (long long)i);
    if (st != TL_OK) {
        ds_slots_free(slots, n);
        return st;
    }
    producer_stop(p);
    ring_clear(p);
    /* A state saved with a deeper prefetch still restores: the ring grows to
     * hold what was saved. */
    if (n > p->cap) {
        ds_elem **r = tl_calloc((size_t)n, sizeof *r);
        if (r == NULL) {
            ds_slots_free(slots, n);
            return tl_error_oom();
        }
        tl_free(p->ring);
        p->ring = r;
        p->cap = n;
    }
    if (n > 0)
        memcpy(p->ring, slots, (size_t)n * sizeof *slots);
    tl_free(slots);
    p->count = n;
    return TL_OK;
}

static void prefetch_destroy(tl_dataset *ds)
{
    prefetch_impl *p = ds->impl;
    if (p == NULL)
        return;
    if (p->sync_ok) {
        producer_stop(p);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
    }
    if (p->ring != NULL)
        ring_clear(p);
    tl_free(p->ring);
    tl_free(p);
}

static const ds_ops prefetch_ops = {"prefetch",    prefetch_next,   prefetch_reset,  prefetch_save,
                                    prefetch_restore, prefetch_pause, prefetch_resume, prefetch_destroy};

tl_status tl_dataset_prefetch(tl_dataset *in, int64_t buffer_size, tl_dataset **out)
{
    if (out == NULL) {
        tl_dataset_destroy(in);
        return tl_error(TL_EINVAL, "prefetch: out is NULL");
    }
    tl_status st = TL_OK;
    if (in == NULL)
        st = tl_error(TL_EINVAL, "prefetch: the input dataset is NULL");
    else if (buffer_size < 1 || buffer_size > MAX_PREFETCH)
        st = tl_error(TL_EINVAL, "prefetch: buffer_size must be in 1..%lld (got %lld)", (long long)MAX_PREFETCH,
                      (long long)buffer_size);
    prefetch_impl *p = NULL;
    char *desc = NULL;
    if (st == TL_OK) {
        p = tl_calloc(1, sizeof *p);
        /* The depth is not part of the pipeline's identity: a state saved
         * with one depth restores into another if its buffer fits. */
        desc = tl_strdup("prefetch");
        if (p != NULL) {
            p->cap = buffer_size;
            p->ring = tl_calloc((size_t)buffer_size, sizeof *p->ring);
        }
        if (p == NULL || p->ring == NULL || desc == NULL) {
            st = tl_error_oom();
        } else if (pthread_mutex_init(&p->mu, NULL) != 0) {
            st = tl_error(TL_ERUNTIME, "prefetch: cannot make a mutex");
        } else if (pthread_cond_init(&p->cv, NULL) != 0) {
            pthread_mutex_destroy(&p->mu);
            st = tl_error(TL_ERUNTIME, "prefetch: cannot make a condition variable");
        } else {
            p->sync_ok = true;
        }
    }
    st = ds_finish(st, &prefetch_ops, p, desc, in, out);
    if (st != TL_OK)
        prefetch_destroy(&(tl_dataset){.impl = p});
    return st;
}

/* step.c — one step of the engine: enqueue (inputs into bags, gains and
 * unique rows), the dedup data, activations, gradient send, and the update
 * applied once per touched row by the row's owner.
 *
 * Determinism. Every sum has a fixed order: a bag's activation adds its
 * occurrences in input order; a unique row's gradient on a core adds its
 * occurrences in input order (features ascending); a row's step gradient
 * adds the cores' sums in ascending core order. None of these orders
 * depends on the number of shards or the sharding strategy, so neither do
 * the bits. */
#include <math.h>
#include <string.h>

#include "emb_int.h"

/* ---- per-core buffers ------------------------------------------------------ */

void emb_core_free(emb_core *c)
{
    for (int k = 0; k < EMB_RING; k++) {
        emb_core_step *s = &c->ring[k];
        emb_buf *b[] = {&s->feat_off, &s->occ_bag, &s->occ_uniq, &s->occ_gain, &s->u_table,
                        &s->u_id,     &s->u_ptr,   &s->u_goff,   &s->grad,     &s->ints};
        for (size_t j = 0; j < TL_ARRAY_LEN(b); j++)
            emb_buf_free(b[j]);
    }
    emb_buf_free(&c->hash);
    emb_buf_free(&c->bagsum);
}

/* ---- the dedup hash ----------------------------------------------------------- */

/* Open addressing over one array of entries, so a probe is one cache miss. */
static inline uint64_t hash_key(int32_t table, int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9e3779b97f4a7c15ull ^ ((uint64_t)(uint32_t)table * 0xc2b2ae3d27d4eb4full);
    return h ^ (h >> 29);
}

/* Room for n keys at load <= 1/2, every entry empty (table -1). */
static tl_status hash_prepare(emb_buf *h, size_t *cap, int64_t n)
{
    size_t want = 64;
    while (want < (size_t)n * 2)
        want *= 2;
    tl_status st = emb_reserve(h, want * sizeof(emb_hent));
    if (st != TL_OK)
        return st;
    *cap = want;
    memset(h->p, 0xff, want * sizeof(emb_hent));
    return TL_OK;
}

/* The value of (table, id), or a new entry holding `fresh` when absent
 * (*added true). */
static inline int32_t hash_find_or_add(emb_hent *h, size_t cap, int32_t table, int64_t id, int32_t fresh, bool *added)
{
    size_t mask = cap - 1, i = (size_t)hash_key(table, id) & mask;
    for (;; i = (i + 1) & mask) {
        if (h[i].table < 0) {
            h[i] = (emb_hent){id, table, fresh};
            *added = true;
            return fresh;
        }
        if (h[i].table == table && h[i].id == id) {
            *added = false;
            return h[i].val;
        }
    }
}

static inline int32_t hash_get(const emb_hent *h, size_t cap, int32_t table, int64_t id)
{
    size_t mask = cap - 1, i = (size_t)hash_key(table, id) & mask;
    for (;; i = (i + 1) & mask) {
        if (h[i].table < 0)
            return -1;
        if (h[i].table == table && h[i].id == id)
            return h[i].val;
    }
}

/* Core c's slot holding step, or NULL. */
static emb_core_step *find_slot(emb_core *c, int64_t step)
{
    for (int k = 0; k < EMB_RING; k++)
        if (c->ring[k].state != CS_FREE && c->ring[k].step == step)
            return &c->ring[k];
    return NULL;
}

/* Prefetches the n floats at p (for writing when w). */
static inline void prefetch_row(const float *p, int64_t n, int w)
{
    for (int64_t k = 0; k < n; k += 16) {
        if (w)
            __builtin_prefetch(p + k, 1, 3);
        else
            __builtin_prefetch(p + k, 0, 3);
    }
}

TL_VECTOR_CLONES static void axpy(float *restrict y, const float *restrict x, float a, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

TL_VECTOR_CLONES static void scale_into(float *restrict y, const float *restrict x, float a, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = a * x[i];
}

TL_VECTOR_CLONES static void add_into(float *restrict y, const float *restrict x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += x[i];
}

/* ---- enqueue ------------------------------------------------------------------ */

static tl_status parse_mode(const tl_emb_engine *eng, const char *m, tl_emb_mode *out)
{
    if (m == NULL || strcmp(m, "unspecified") == 0)
        *out = eng->cfg.mode;
    else if (strcmp(m, "inference") == 0)
        *out = TL_EMB_MODE_INFERENCE;
    else if (strcmp(m, "training") == 0 || strcmp(m, "train") == 0)
        *out = TL_EMB_MODE_TRAINING;
    else if (strcmp(m, "backward_pass_only") == 0)
        *out = TL_EMB_MODE_BACKWARD_PASS_ONLY;
    else
        return tl_error(TL_EINVAL, "mode_override \"%s\" is not one of unspecified, inference, training (train), "
                                   "backward_pass_only", m);
    return TL_OK;
}

/* Accepts or drops one occurrence (feature f, bag, id, weight). */
typedef struct builder {
    tl_emb_engine *eng;
    emb_core *core;
    emb_core_step *s;
    int64_t dropped;
    int64_t batch;  /* the step's B */
} builder;

static tl_status add_occ(builder *b, int f, int64_t pos, int64_t bag, int64_t id, float w)
{
    const tl_emb_engine *eng = b->eng;
    const emb_feature *fe = &eng->features[f];
    const emb_table *t = &eng->tables[fe->table];
    if (id < 0 || id >= t->vocab) {
        if (eng->cfg.bounds_check_mode == TL_EMB_BOUNDS_FATAL)
            return tl_error(TL_EINVAL, "feature \"%s\" (table \"%s\"): id %lld at position %lld is out of range: the "
                                       "vocabulary size is %lld (bounds_check_mode FATAL; WARNING or IGNORE drop it)",
                            fe->name, t->name, (long long)id, (long long)pos, (long long)t->vocab);
        if (eng->cfg.bounds_check_mode == TL_EMB_BOUNDS_WARNING && b->dropped == 0)
            tl_log(TL_LOG_WARN, "embedding: feature \"%s\": id %lld at position %lld is outside [0, %lld); dropped",
                   fe->name, (long long)id, (long long)pos, (long long)t->vocab);
        b->dropped++;
        return TL_OK;
    }
    emb_core_step *s = b->s;
    emb_core *c = b->core;
    bool added;
    int32_t u = hash_find_or_add(c->hash.p, c->hcap, fe->table, id, (int32_t)s->n_unique, &added);
    if (added) {
        ((int32_t *)s->u_table.p)[u] = fe->table;
        ((int64_t *)s->u_id.p)[u] = id;
        ((float **)s->u_ptr.p)[u] = emb_row(eng, t, id);
        s->n_unique++;
    }
    int64_t k = s->n_occ++;
    ((int32_t *)s->occ_bag.p)[k] = (int32_t)bag;
    ((int32_t *)s->occ_uniq.p)[k] = u;
    ((float *)s->occ_gain.p)[k] = w;
    return TL_OK;
}

/* The dedup hash's entry for an id PF occurrences ahead, fetched early:
 * the hash outgrows the caches at large batches and each probe would miss. */
enum { PF = 8 };

static inline void prefetch_id(const builder *b, int32_t table, const int64_t *ids, int64_t k, int64_t n)
{
    if (k + PF < n) {
        const emb_hent *h = b->core->hash.p;
        __builtin_prefetch(&h[(size_t)hash_key(table, ids[k + PF]) & (b->core->hcap - 1)], 1, 3);
    }
}

/* Feature f's input into occurrences with weights (gains come after). */
static tl_status add_feature(builder *b, int f, const tl_emb_input *in)
{
    const emb_feature *fe = &b->eng->features[f];
    /* Rows of a COO or ragged input: the samples, or with an output_shape
     * each sample's bags (a sequence feature's positions are columns). */
    int64_t S = fe->seq, bags = emb_bags(fe, b->batch), B = S > 0 ? b->batch : bags;
    if (in->n < 0 || (in->n > 0 && in->ids == NULL))
        return tl_error(TL_EINVAL, "feature \"%s\": %lld ids%s", fe->name, (long long)in->n,
                        in->n > 0 ? " but ids is NULL" : "");
    tl_status st = TL_OK;
    switch (in->kind) {
    case TL_EMB_INPUT_DENSE:
        if (in->weights != NULL)
            return tl_error(TL_EINVAL, "Weight specified for dense input feature \"%s\", which is not allowed", fe->name);
        if (in->n != bags)
            return tl_error(TL_EINVAL, "feature \"%s\": a dense input has one id per %s: %lld ids, got %lld", fe->name,
                            S > 0 ? "(sample, position)" : "sample", (long long)bags, (long long)in->n);
        for (int64_t k = 0; k < in->n && st == TL_OK; k++)
        {
            prefetch_id(b, fe->table, in->ids, k, in->n);
            st = add_occ(b, f, k, k, in->ids[k], 1.0f);
        }
        return st;
    case TL_EMB_INPUT_COO:
        if (in->n > 0 && in->indices == NULL)
            return tl_error(TL_EINVAL, "feature \"%s\": a COO input without indices", fe->name);
        for (int64_t k = 0; k < in->n && st == TL_OK; k++) {
            int64_t smp = in->indices[2 * k], pos = in->indices[2 * k + 1];
            if (smp < 0 || smp >= B || pos < 0)
                return tl_error(TL_EINVAL, "feature \"%s\": COO index %lld is (%lld, %lld): the sample must be in "
                                           "[0, %lld) and the position >= 0", fe->name, (long long)k, (long long)smp,
                                (long long)pos, (long long)B);
            if (S > 0 && pos >= S)
                continue; /* truncated to max_sequence_length */
            prefetch_id(b, fe->table, in->ids, k, in->n);
            st = add_occ(b, f, k, S > 0 ? smp * S + pos : smp, in->ids[k], in->weights ? in->weights[k] : 1.0f);
        }
        return st;
    case TL_EMB_INPUT_RAGGED: {
        const int64_t *rs = in->row_splits;
        if (rs == NULL)
            return tl_error(TL_EINVAL, "feature \"%s\": a ragged input without row_splits", fe->name);
        if (rs[0] != 0 || rs[B] != in->n)
            return tl_error(TL_EINVAL, "feature \"%s\": row_splits must start at 0 and end at the %lld ids (got %lld "
                                       "and %lld over %lld rows)", fe->name, (long long)in->n, (long long)rs[0],
                            (long long)rs[B], (long long)B);
        for (int64_t r = 0; r < B && st == TL_OK; r++) {
            if (rs[r + 1] < rs[r])
                return tl_error(TL_EINVAL, "feature \"%s\": row_splits decrease at row %lld (%lld then %lld)",
                                fe->name, (long long)r, (long long)rs[r], (long long)rs[r + 1]);
            for (int64_t k = rs[r]; k < rs[r + 1] && st == TL_OK; k++) {
                int64_t j = k - rs[r];
                if (S > 0 && j >= S)
                    break;
                prefetch_id(b, fe->table, in->ids, k, in->n);
                st = add_occ(b, f, k, S > 0 ? r * S + j : r, in->ids[k], in->weights ? in->weights[k] : 1.0f);
            }
        }
        return st;
    }
    }
    return tl_error(TL_EINVAL, "feature \"%s\": input kind %d is not DENSE, COO or RAGGED", fe->name, (int)in->kind);
}

/* Weights into gains, per bag, before any merging (§6.4, T9). */
static tl_status gains(builder *b, int f, int64_t from, int64_t to)
{
    const emb_feature *fe = &b->eng->features[f];
    tl_emb_combiner comb = fe->combiner;
    float *g = (float *)b->s->occ_gain.p + from;
    const int32_t *bag = (const int32_t *)b->s->occ_bag.p + from;
    int64_t n = to - from;
    if (fe->seq > 0) { /* a sequence position is its own bag, gain 1 */
        for (int64_t k = 0; k < n; k++)
            g[k] = 1.0f;
        return TL_OK;
    }
    if (comb == TL_EMB_COMBINER_SUM)
        return TL_OK;
    int64_t bags = emb_bags(fe, b->batch);
    tl_status st = emb_reserve(&b->core->bagsum, (size_t)bags * sizeof(double));
    if (st != TL_OK)
        return st;
    double *sum = b->core->bagsum.p;
    memset(sum, 0, (size_t)bags * sizeof *sum);
    for (int64_t k = 0; k < n; k++)
        sum[bag[k]] += comb == TL_EMB_COMBINER_MEAN ? (double)g[k] : (double)g[k] * g[k];
    for (int64_t k = 0; k < n; k++) {
        double d = comb == TL_EMB_COMBINER_MEAN ? sum[bag[k]] : sqrt(sum[bag[k]]);
        g[k] = d != 0 ? (float)(g[k] / d) : 0.0f;
    }
    int64_t zero = 0;
    for (int64_t k = 0; k < n; k++)
        if (sum[bag[k]] == 0) {
            zero++;
            sum[bag[k]] = -1; /* count each bag once */
        }
    if (zero > 0) {
        pthread_mutex_lock(&b->eng->mu);
        b->eng->stats.zero_weight_bags += zero;
        pthread_mutex_unlock(&b->eng->mu);
    }
    return TL_OK;
}

tl_status tl_emb_enqueue(tl_emb_engine *eng, int core, const tl_emb_input *inputs, int n, const char *mode_override)
{
    return tl_emb_enqueue_batch(eng, core, inputs, n, mode_override, 0);
}

tl_status tl_emb_enqueue_batch(tl_emb_engine *eng, int core, const tl_emb_input *inputs, int n,
                               const char *mode_override, int64_t batch)
{
    if (eng == NULL)
        return tl_error(TL_EINVAL, "embedding: enqueue on a NULL engine");
    if (batch == 0)
        batch = eng->cfg.batch_size_per_tensor_core;
    if (batch < 1 || batch > INT32_MAX / 2)
        return tl_error(TL_EINVAL, "embedding: the step's batch must be in [1, %d] (0: batch_size_per_tensor_core), "
                                   "got %lld", INT32_MAX / 2, (long long)batch);
    for (int f = 0; f < eng->cfg.num_features; f++)
        if (emb_bags(&eng->features[f], batch) >= INT32_MAX / 2)
            return tl_error(TL_EINVAL, "embedding: feature \"%s\": a batch of %lld gives %lld bags; at most %d are "
                                       "allowed", eng->features[f].name, (long long)batch,
                            (long long)emb_bags(&eng->features[f], batch), INT32_MAX / 2 - 1);
    if (core < 0 || core >= eng->cfg.num_tensor_cores)
        return tl_error(TL_EINVAL, "embedding: core %d is not in [0, %d)", core, eng->cfg.num_tensor_cores);
    int F = eng->cfg.num_features;
    if (n != F || inputs == NULL)
        return tl_error(TL_EINVAL, "embedding: expected %d inputs, one per feature, got %d%s", F, n,
                        inputs == NULL ? " (NULL)" : "");
    tl_emb_mode mode = TL_EMB_MODE_UNSPECIFIED;
    tl_status st = parse_mode(eng, mode_override, &mode);
    if (st != TL_OK)
        return st;
    emb_core *c = &eng->cores[core];
    int64_t step = c->next_enqueue;
    /* Slots are freed by the update, on whichever core's thread completes a
     * step; the lowest free one is reused, so a core that finishes each step
     * before the next keeps one slot's buffers warm. */
    emb_core_step *s = NULL;
    int64_t oldest = INT64_MAX;
    pthread_mutex_lock(&eng->mu);
    for (int k = 0; k < EMB_RING; k++) {
        if (c->ring[k].state == CS_FREE && s == NULL)
            s = &c->ring[k];
        else if (c->ring[k].state != CS_FREE && c->ring[k].step < oldest)
            oldest = c->ring[k].step;
    }
    pthread_mutex_unlock(&eng->mu);
    if (s == NULL)
        return tl_error(TL_ERUNTIME, "embedding: core %d already has %d steps in flight (step %lld is not done): "
                                     "receive and send them first", core, EMB_RING, (long long)oldest);
    int64_t total = 0;
    for (int f = 0; f < F; f++)
        total += inputs[f].n > 0 ? inputs[f].n : 0;
    if (total >= INT32_MAX / 2) /* occurrences and unique rows are numbered in int32, the dedup data too */
        return tl_error(TL_EINVAL, "embedding: core %d enqueued %lld ids in one step; at most %d are allowed", core,
                        (long long)total, INT32_MAX / 2 - 1);
    if ((st = hash_prepare(&c->hash, &c->hcap, total)) != TL_OK ||
        (st = emb_reserve(&s->feat_off, (size_t)(F + 1) * sizeof(int64_t))) != TL_OK ||
        (st = emb_reserve(&s->occ_bag, (size_t)(total + 1) * sizeof(int32_t))) != TL_OK ||
        (st = emb_reserve(&s->occ_uniq, (size_t)(total + 1) * sizeof(int32_t))) != TL_OK ||
        (st = emb_reserve(&s->occ_gain, (size_t)(total + 1) * sizeof(float))) != TL_OK ||
        (st = emb_reserve(&s->u_table, (size_t)(total + 1) * sizeof(int32_t))) != TL_OK ||
        (st = emb_reserve(&s->u_id, (size_t)(total + 1) * sizeof(int64_t))) != TL_OK ||
        (st = emb_reserve(&s->u_ptr, (size_t)(total + 1) * sizeof(float *))) != TL_OK)
        return st;
    s->n_occ = s->n_unique = 0;
    builder b = {eng, c, s, 0, batch};
    s->batch = batch;
    int64_t *off = s->feat_off.p;
    for (int f = 0; f < F; f++) {
        off[f] = s->n_occ;
        if ((st = add_feature(&b, f, &inputs[f])) != TL_OK || (st = gains(&b, f, off[f], s->n_occ)) != TL_OK)
            return st;
    }
    off[F] = s->n_occ;
    /* The dedup data's integers: unique rows per table, then (bag, unique) per occurrence. */
    int T = eng->cfg.num_tables;
    if ((st = emb_reserve(&s->ints, (size_t)(T + 2 * s->n_occ) * sizeof(int32_t))) != TL_OK)
        return st;
    int32_t *ints = s->ints.p;
    memset(ints, 0, (size_t)T * sizeof *ints);
    for (int64_t u = 0; u < s->n_unique; u++)
        ints[((int32_t *)s->u_table.p)[u]]++;
    for (int64_t k = 0; k < s->n_occ; k++) {
        ints[T + 2 * k] = ((int32_t *)s->occ_bag.p)[k];
        ints[T + 2 * k + 1] = ((int32_t *)s->occ_uniq.p)[k];
    }
    pthread_mutex_lock(&eng->mu);
    emb_step_rec *r = &eng->recs[step % EMB_RING];
    if (r->step != step) {
        if (r->step >= 0) {
            pthread_mutex_unlock(&eng->mu);
            return tl_error(TL_ERUNTIME, "embedding: core %d enqueued step %lld while step %lld is not done on every "
                                         "core (at most %d steps in flight)", core, (long long)step,
                            (long long)r->step, EMB_RING);
        }
        r->step = step;
        r->mode = mode;
        r->enqueued = r->activated = r->sent = 0;
        r->n_lr = 0;
    } else if (r->mode != mode) {
        pthread_mutex_unlock(&eng->mu);
        return tl_error(TL_EINVAL, "embedding: core %d enqueued step %lld in mode %d but another core in mode %d: "
                                   "every core must use the same mode in a step", core, (long long)step, (int)mode,
                        (int)r->mode);
    }
    r->enqueued++;
    eng->stats.dropped_ids += b.dropped;
    eng->stats.lookups += s->n_occ;
    eng->stats.unique_rows += s->n_unique;
    s->step = step;
    s->mode = mode;
    s->state = CS_ENQUEUED;
    pthread_mutex_unlock(&eng->mu);
    c->next_enqueue++;
    return TL_OK;
}

/* ---- receive --------------------------------------------------------------------- */

/* Releases core c's slot of step (an INFERENCE step's, at its next receive). */
static void release_slot(emb_core *c, int64_t step)
{
    emb_core_step *s = find_slot(c, step);
    if (s != NULL)
        s->state = CS_FREE;
}

tl_status tl_emb_recv_dedup(tl_emb_engine *eng, int core, tl_emb_dedup *out)
{
    if (eng == NULL || out == NULL)
        return tl_error(TL_EINVAL, "embedding: recv_dedup with a NULL engine or out");
    if (core < 0 || core >= eng->cfg.num_tensor_cores)
        return tl_error(TL_EINVAL, "embedding: core %d is not in [0, %d)", core, eng->cfg.num_tensor_cores);
    emb_core *c = &eng->cores[core];
    pthread_mutex_lock(&eng->mu);
    if (c->last_received >= 0) {
        emb_core_step *p = find_slot(c, c->last_received);
        if (p != NULL && p->mode != TL_EMB_MODE_INFERENCE && p->state != CS_SENT) {
            pthread_mutex_unlock(&eng->mu);
            return tl_error(TL_ERUNTIME, "embedding: core %d has not sent the gradients of step %lld (mode "
                                         "training): send them before receiving the next step", core,
                            (long long)c->last_received);
        }
    }
    int64_t step = c->next_recv;
    emb_core_step *s = find_slot(c, step);
    if (s == NULL || s->state != CS_ENQUEUED) {
        pthread_mutex_unlock(&eng->mu);
        return tl_error(TL_ERUNTIME, "embedding: core %d has nothing enqueued for step %lld", core, (long long)step);
    }
    emb_core_step *prev = c->last_received >= 0 ? find_slot(c, c->last_received) : NULL;
    if (prev != NULL && prev->mode == TL_EMB_MODE_INFERENCE)
        prev->state = CS_FREE;
    s->state = CS_RECEIVED;
    pthread_mutex_unlock(&eng->mu);
    c->last_received = step;
    c->next_recv++;
    *out = (tl_emb_dedup){core, step, s->ints.p, eng->cfg.num_tables + 2 * s->n_occ, s->occ_gain.p, s->n_occ};
    return TL_OK;
}

/* Under mu (slot states change on other cores' threads). */
static tl_status check_dedup(const tl_emb_engine *eng, int core, const tl_emb_dedup *dd, emb_core_step **out)
{
    if (dd == NULL)
        return tl_error(TL_EINVAL, "embedding: the dedup data is NULL");
    if (core < 0 || core >= eng->cfg.num_tensor_cores)
        return tl_error(TL_EINVAL, "embedding: core %d is not in [0, %d)", core, eng->cfg.num_tensor_cores);
    emb_core *c = (emb_core *)&eng->cores[core];
    emb_core_step *s = dd->step >= 0 ? find_slot(c, dd->step) : NULL;
    if (dd->core != core || s == NULL || s->ints.p != (const void *)dd->ints || dd->step != c->last_received)
        return tl_error(TL_ERUNTIME, "embedding: core %d was given stale or foreign dedup data (core %d, step %lld; the "
                                     "core's current step is %lld)", core, dd->core, (long long)dd->step,
                        (long long)c->last_received);
    *out = s;
    return TL_OK;
}

/* Under mu: applies the pipelined pending step when every core sent it and
 * every core has its next step's activations. */
static void maybe_apply_pending(tl_emb_engine *eng)
{
    if (eng->pending < 0)
        return;
    const emb_step_rec *next = &eng->recs[(eng->pending + 1) % EMB_RING];
    if (next->step == eng->pending + 1 && next->activated == eng->cfg.num_tensor_cores) {
        int64_t p = eng->pending;
        eng->pending = -1;
        emb_apply_step(eng, p);
    }
}

tl_status tl_emb_recv_activations(tl_emb_engine *eng, int core, const tl_emb_dedup *dd, float *const *outputs, int n)
{
    if (eng == NULL)
        return tl_error(TL_EINVAL, "embedding: recv_activations on a NULL engine");
    emb_core_step *s;
    pthread_mutex_lock(&eng->mu);
    tl_status st = check_dedup(eng, core, dd, &s);
    core_state state = st == TL_OK ? s->state : CS_FREE;
    pthread_mutex_unlock(&eng->mu);
    if (st != TL_OK)
        return st;
    if (n != eng->cfg.num_features || outputs == NULL)
        return tl_error(TL_EINVAL, "embedding: expected %d outputs, one per feature, got %d", eng->cfg.num_features, n);
    for (int f = 0; f < n; f++)
        if (outputs[f] == NULL)
            return tl_error(TL_EINVAL, "embedding: output %d (feature \"%s\") is NULL", f, eng->features[f].name);
    if (s->mode == TL_EMB_MODE_BACKWARD_PASS_ONLY)
        return tl_error(TL_ERUNTIME, "embedding: step %lld was enqueued for the backward pass only: it has no "
                                     "activations", (long long)s->step);
    if (state != CS_RECEIVED)
        return tl_error(TL_ERUNTIME, "embedding: core %d already received step %lld's activations", core,
                        (long long)s->step);
    /* Every earlier training step must be applied (pipelined: all but the previous one). */
    pthread_mutex_lock(&eng->mu);
    for (int k = 0; k < EMB_RING; k++) {
        const emb_step_rec *r = &eng->recs[k];
        bool allowed = eng->cfg.pipeline_execution_with_tensor_core && r->step == s->step - 1;
        if (r->step >= 0 && r->step < s->step && r->mode != TL_EMB_MODE_INFERENCE && !allowed) {
            int64_t missing = r->step;
            pthread_mutex_unlock(&eng->mu);
            return tl_error(TL_ERUNTIME, "embedding: core %d asked for step %lld's activations before every core sent "
                                         "step %lld's gradients", core, (long long)s->step, (long long)missing);
        }
    }
    pthread_mutex_unlock(&eng->mu);
    for (int f = 0; f < n; f++) {
        const emb_feature *fe = &eng->features[f];
        const emb_table *t = &eng->tables[fe->table];
        int D = t->dim;
        float *out = outputs[f];
        memset(out, 0, (size_t)emb_bags(fe, s->batch) * (size_t)D * sizeof *out);
        const int64_t *off = s->feat_off.p;
        const int32_t *bag = s->occ_bag.p, *uq = s->occ_uniq.p;
        const float *gain = s->occ_gain.p;
        float *const *rows = s->u_ptr.p;
        bool quant = t->opt.simulated_quantization.enabled;
        float tmp[256];
        for (int64_t k = off[f]; k < off[f + 1]; k++) {
            if (k + 16 < off[f + 1])
                prefetch_row(rows[uq[k + 16]], D, 0);
            float *o = out + (int64_t)bag[k] * D;
            const float *row = rows[uq[k]];
            float gk = gain[k];
            if (!quant) {
                axpy(o, row, gk, D);
                continue;
            }
            for (int d0 = 0; d0 < D; d0 += 256) { /* quantize a copy, in chunks */
                int m = D - d0 < 256 ? D - d0 : 256;
                memcpy(tmp, row + d0, (size_t)m * sizeof *tmp);
                tl_emb_quantize(&t->opt, tmp, m);
                for (int d = 0; d < m; d++)
                    o[d0 + d] += gk * tmp[d];
            }
        }
    }
    pthread_mutex_lock(&eng->mu);
    s->state = CS_ACTIVATED;
    emb_step_rec *r = &eng->recs[s->step % EMB_RING];
    r->activated++;
    if (r->mode == TL_EMB_MODE_INFERENCE && r->activated == eng->cfg.num_tensor_cores)
        r->step = -1; /* nothing to apply */
    else
        maybe_apply_pending(eng);
    pthread_mutex_unlock(&eng->mu);
    return TL_OK;
}

/* ---- send --------------------------------------------------------------------------- */

tl_status tl_emb_send_gradients(tl_emb_engine *eng, int core, const tl_emb_dedup *dd, const float *const *grads, int n,
                                const float *learning_rates, int n_lr)
{
    if (eng == NULL)
        return tl_error(TL_EINVAL, "embedding: send_gradients on a NULL engine");
    emb_core_step *s;
    pthread_mutex_lock(&eng->mu);
    tl_status st = check_dedup(eng, core, dd, &s);
    core_state state = st == TL_OK ? s->state : CS_FREE;
    pthread_mutex_unlock(&eng->mu);
    if (st != TL_OK)
        return st;
    if (s->mode == TL_EMB_MODE_INFERENCE)
        return tl_error(TL_ERUNTIME, "embedding: Only in training mode gradients need to be sent (core %d, step %lld "
                                     "was enqueued for inference)", core, (long long)s->step);
    if (state == CS_SENT)
        return tl_error(TL_ERUNTIME, "embedding: core %d already sent step %lld's gradients", core, (long long)s->step);
    if (state != CS_ACTIVATED && !(s->mode == TL_EMB_MODE_BACKWARD_PASS_ONLY && state == CS_RECEIVED))
        return tl_error(TL_ERUNTIME, "embedding: core %d sent step %lld's gradients before receiving its activations",
                        core, (long long)s->step);
    if (n != eng->cfg.num_features || grads == NULL)
        return tl_error(TL_EINVAL, "embedding: expected %d gradients, one per feature (the activations' list), got %d",
                        eng->cfg.num_features, n);
    if (n_lr < 0 || (n_lr > 0 && learning_rates == NULL))
        return tl_error(TL_EINVAL, "embedding: %d learning rates%s", n_lr, n_lr > 0 ? " but the list is NULL" : "");
    for (int f = 0; f < n; f++)
        if (grads[f] == NULL)
            return tl_error(TL_EINVAL, "embedding: gradient %d (feature \"%s\") is NULL", f, eng->features[f].name);
    for (int i = 0; i < eng->cfg.num_tables; i++) {
        tl_emb_step es;
        if ((st = tl_emb_step_prepare(&eng->tables[i].opt, learning_rates, n_lr, &es)) != TL_OK)
            return tl_error(st, "table \"%s\": %s", eng->tables[i].name, tl_last_error());
    }
    /* Per unique row: Σ gain · dL/d(out), occurrences in order. */
    const int32_t *ut = s->u_table.p;
    if ((st = emb_reserve(&s->u_goff, (size_t)(s->n_unique + 1) * sizeof(int64_t))) != TL_OK)
        return st;
    int64_t *goff = s->u_goff.p;
    goff[0] = 0;
    for (int64_t u = 0; u < s->n_unique; u++)
        goff[u + 1] = goff[u] + eng->tables[ut[u]].dim;
    if ((st = emb_reserve(&s->grad, (size_t)(goff[s->n_unique] + 1) * sizeof(float))) != TL_OK)
        return st;
    float *g = s->grad.p;
    const int64_t *off = s->feat_off.p;
    const int32_t *bag = s->occ_bag.p, *uq = s->occ_uniq.p;
    const float *gain = s->occ_gain.p;
    /* Unique rows were numbered in this very order of occurrences, so a row's
     * first occurrence is the one whose number is the next new one: it
     * writes, later ones add (0 + x is x: the same bits as zeroing first). */
    int64_t next_new = 0;
    for (int f = 0; f < n; f++) {
        int D = eng->tables[eng->features[f].table].dim;
        for (int64_t k = off[f]; k < off[f + 1]; k++) {
            float *gu = g + goff[uq[k]];
            const float *d = grads[f] + (int64_t)bag[k] * D;
            if (uq[k] == next_new) {
                scale_into(gu, d, gain[k], D);
                next_new++;
            } else {
                axpy(gu, d, gain[k], D);
            }
        }
    }
    pthread_mutex_lock(&eng->mu);
    emb_step_rec *r = &eng->recs[s->step % EMB_RING];
    if (r->sent == 0 && n_lr > 0) {
        float *lrs = tl_realloc(r->lrs, (size_t)n_lr * sizeof *lrs);
        if (lrs == NULL) {
            pthread_mutex_unlock(&eng->mu);
            return tl_error_oom();
        }
        memcpy(lrs, learning_rates, (size_t)n_lr * sizeof *lrs);
        r->lrs = lrs;
    }
    if (r->sent == 0)
        r->n_lr = n_lr;
    if (r->sent + 1 == eng->cfg.num_tensor_cores) {
        /* this send completes the step: its update's workspace first */
        core_state was = s->state;
        s->state = CS_SENT; /* counted by the reserve as sent */
        if ((st = emb_apply_reserve(eng, s->step)) != TL_OK) {
            s->state = was;
            pthread_mutex_unlock(&eng->mu);
            return st;
        }
    }
    s->state = CS_SENT;
    r->sent++;
    if (r->sent == eng->cfg.num_tensor_cores) {
        if (!eng->cfg.pipeline_execution_with_tensor_core || r->mode == TL_EMB_MODE_BACKWARD_PASS_ONLY) {
            emb_apply_step(eng, s->step);
        } else {
            eng->pending = s->step;
            maybe_apply_pending(eng);
        }
    }
    pthread_mutex_unlock(&eng->mu);
    return TL_OK;
}

tl_status tl_emb_flush(tl_emb_engine *eng)
{
    if (eng == NULL)
        return tl_error(TL_EINVAL, "embedding: flush on a NULL engine");
    pthread_mutex_lock(&eng->mu);
    if (eng->pending >= 0) {
        int64_t p = eng->pending;
        eng->pending = -1;
        emb_apply_step(eng, p);
    }
    pthread_mutex_unlock(&eng->mu);
    return TL_OK;
}

/* ---- the update ------------------------------------------------------------------------ */

/* Under mu, before the send that completes `step` is committed (its slot
 * already marked sent): the workspace of its update, so that the update
 * itself cannot fail. */
tl_status emb_apply_reserve(tl_emb_engine *eng, int64_t step)
{
    int C = eng->cfg.num_tensor_cores;
    int64_t total = 0, gtotal = 0;
    for (int c = 0; c < C; c++) {
        const emb_core_step *s = find_slot(&eng->cores[c], step);
        TL_ASSERT(s != NULL);
        total += s->n_unique;
        gtotal += s->n_unique > 0 ? ((const int64_t *)s->u_goff.p)[s->n_unique] : 0;
    }
    size_t hcap = 64;
    while (!emb_direct(eng) && hcap < (size_t)total * 2)
        hcap *= 2;
    tl_status st;
    if (emb_direct(eng)) /* no accumulation workspace: the core's sums are the step's */
        total = gtotal = 0;
    if ((st = emb_reserve(&eng->acc_h, hcap * sizeof(emb_hent))) != TL_OK ||
        (st = emb_reserve(&eng->acc_off, (size_t)(total + 1) * sizeof(int64_t))) != TL_OK ||
        (st = emb_reserve(&eng->acc_g, (size_t)(gtotal + 1) * sizeof(float))) != TL_OK ||
        (st = emb_reserve(&eng->acc_at, (size_t)(total + 1) * sizeof(int32_t))) != TL_OK ||
        (st = emb_reserve(&eng->acc_aid, (size_t)(total + 1) * sizeof(int64_t))) != TL_OK ||
        (st = emb_reserve(&eng->acc_arow, (size_t)(total + 1) * sizeof(float *))) != TL_OK ||
        (st = emb_reserve(&eng->acc_steps, (size_t)eng->cfg.num_tables * sizeof(tl_emb_step))) != TL_OK)
        return st;
    eng->acc_hcap = hcap;
    return TL_OK;
}

/* Table t's pipeline on one row (its slots follow it), from gradient g. */
static inline void update(const emb_table *t, const tl_emb_step *es, float *row, float *g)
{
    float *slots[TL_EMB_MAX_SLOTS];
    for (int k = 0; k < t->slots; k++)
        slots[k] = row + (int64_t)(k + 1) * t->dim;
    tl_emb_update_row(&t->opt, es, row, g, slots, t->dim);
}

enum { AHEAD = 8 }; /* rows prefetched ahead of the update */

/* Under mu, after emb_apply_reserve. Sums every core's gradients per row in
 * ascending core order, then runs each table's pipeline once per touched
 * row (every row for non-lazy tables); tables without accumulation take
 * each core's sum in turn. With one core and only lazy tables the core's
 * sums are the step's and are applied in place. Frees the cores' slots of
 * the step. */
void emb_apply_step(tl_emb_engine *eng, int64_t step)
{
    emb_step_rec *r = &eng->recs[step % EMB_RING];
    int T = eng->cfg.num_tables, C = eng->cfg.num_tensor_cores;
    tl_emb_step *pes = eng->acc_steps.p;
    for (int i = 0; i < T; i++)
        (void)tl_emb_step_prepare(&eng->tables[i].opt, r->lrs, r->n_lr, &pes[i]); /* checked at send */
    if (emb_direct(eng)) {
        emb_core_step *s = find_slot(&eng->cores[0], step);
        const int32_t *ut = s->u_table.p;
        const int64_t *goff = s->u_goff.p;
        float *const *uptr = s->u_ptr.p;
        float *g = s->grad.p;
        for (int64_t u = 0; u < s->n_unique; u++) {
            if (u + AHEAD < s->n_unique)
                prefetch_row(uptr[u + AHEAD], eng->tables[ut[u + AHEAD]].stride, 1);
            update(&eng->tables[ut[u]], &pes[ut[u]], uptr[u], g + goff[u]);
        }
        goto done;
    }
    emb_hent *h = eng->acc_h.p;
    int32_t *a_table = eng->acc_at.p;
    int64_t *aoff = eng->acc_off.p, *a_id = eng->acc_aid.p;
    float *ag = eng->acc_g.p, **a_row = eng->acc_arow.p;
    int64_t na = 0, used = 0;
    memset(h, 0xff, eng->acc_hcap * sizeof *h);
    for (int c = 0; c < C; c++) {
        emb_core_step *s = find_slot(&eng->cores[c], step);
        const int32_t *ut = s->u_table.p;
        const int64_t *uid = s->u_id.p, *goff = s->u_goff.p;
        float *const *uptr = s->u_ptr.p;
        float *g = s->grad.p;
        for (int64_t u = 0; u < s->n_unique; u++) {
            const emb_table *t = &eng->tables[ut[u]];
            float *gu = g + goff[u];
            if (!tl_emb_optimizer_accumulates(&t->opt)) {
                update(t, &pes[ut[u]], uptr[u], gu);
                continue;
            }
            bool added;
            int32_t a = hash_find_or_add(h, eng->acc_hcap, ut[u], uid[u], (int32_t)na, &added);
            if (added) {
                a_table[na] = ut[u];
                a_id[na] = uid[u];
                a_row[na] = uptr[u];
                aoff[na] = used;
                memcpy(ag + used, gu, (size_t)t->dim * sizeof *ag);
                used += t->dim;
                na++;
            } else {
                add_into(ag + aoff[a], gu, t->dim);
            }
        }
    }
    for (int64_t a = 0; a < na; a++) {
        if (a + AHEAD < na)
            prefetch_row(a_row[a + AHEAD], eng->tables[a_table[a + AHEAD]].stride, 1);
        const emb_table *t = &eng->tables[a_table[a]];
        if (tl_emb_optimizer_is_lazy(&t->opt))
            update(t, &pes[a_table[a]], a_row[a], ag + aoff[a]);
    }
    /* Non-lazy tables: every row, g = 0 where nothing arrived. */
    for (int i = 0; i < T; i++) {
        const emb_table *t = &eng->tables[i];
        if (tl_emb_optimizer_is_lazy(&t->opt))
            continue;
        float *zero = eng->zero_g.p;
        for (int64_t id = 0; id < t->vocab; id++) {
            int32_t a = hash_get(h, eng->acc_hcap, i, id);
            float *row = emb_row(eng, t, id);
            if (a >= 0) {
                update(t, &pes[i], row, ag + aoff[a]);
            } else {
                memset(zero, 0, (size_t)t->dim * sizeof *zero); /* the update clips g in place */
                update(t, &pes[i], row, zero);
            }
        }
    }
done:
    eng->stats.steps_applied++;
    for (int c = 0; c < C; c++)
        release_slot(&eng->cores[c], step);
    eng->applied_through = step;
    r->step = -1;
}

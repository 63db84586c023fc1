/* step.c — one step of the engine: enqueue (inputs into bags, gains and
 * unique rows), the dedup data, activations and the gradient send (the
 * update it completes is update.c's).
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
        emb_buf *b[] = {&s->feat_off, &s->occ_gain, &s->u_table, &s->u_id,   &s->u_ptr, &s->u_goff, &s->grad,
                        &s->ints,     &s->in_order, &s->u_host,  &s->remote, &s->hash,  &s->h_base, &s->h_shift};
        for (size_t j = 0; j < TL_ARRAY_LEN(b); j++)
            emb_buf_free(b[j]);
    }
    emb_buf_free(&c->bagsum);
}

/* ---- the dedup hash ----------------------------------------------------------- */

/* One region per table of at least twice the table's ids in this step (load
 * <= 1/2), every slot empty. A region of 4-byte slots sized to its table
 * stays in the caches where one hash of 16-byte (table, id) entries over
 * the whole step would not. */
static tl_status dedup_prepare(const tl_emb_engine *eng, emb_core_step *s, const tl_emb_input *inputs)
{
    int T = eng->cfg.num_tables, F = eng->cfg.num_features;
    tl_status st;
    if ((st = emb_reserve(&s->h_base, (size_t)T * sizeof(size_t))) != TL_OK ||
        (st = emb_reserve(&s->h_shift, (size_t)T * sizeof(int))) != TL_OK)
        return st;
    size_t *base = s->h_base.p, total = 0;
    int *shift = s->h_shift.p;
    memset(base, 0, (size_t)T * sizeof *base); /* the tables' ids first */
    for (int f = 0; f < F; f++)
        base[eng->features[f].table] += inputs[f].n > 0 ? (size_t)inputs[f].n : 0;
    for (int t = 0; t < T; t++) {
        int lg = 4;
        while (((size_t)1 << lg) < 2 * base[t])
            lg++;
        base[t] = total;
        shift[t] = 64 - lg;
        total += (size_t)1 << lg;
    }
    if ((st = emb_reserve(&s->hash, total * sizeof(int32_t))) != TL_OK)
        return st;
    memset(s->hash.p, 0xff, total * sizeof(int32_t));
    return TL_OK;
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
    int32_t *pair;  /* (2 n_occ) the dedup data's (bag, unique) per occurrence */
    int32_t *per_table; /* (T) the dedup data's unique rows per table */
    /* the current feature's table and its region of the dedup hash */
    const emb_feature *fe;
    const emb_table *t;
    int32_t table;
    int32_t *h;
    size_t mask;
    int shift;
} builder;

static void builder_feature(builder *b, int f)
{
    const emb_core_step *s = b->s;
    b->fe = &b->eng->features[f];
    b->table = b->fe->table;
    b->t = &b->eng->tables[b->table];
    b->shift = ((const int *)s->h_shift.p)[b->table];
    b->h = (int32_t *)s->hash.p + ((const size_t *)s->h_base.p)[b->table];
    b->mask = ((size_t)1 << (64 - b->shift)) - 1;
}

/* An id outside its table's vocabulary: an error (FATAL), or dropped. */
static tl_status drop_id(builder *b, int64_t pos, int64_t id)
{
    const tl_emb_engine *eng = b->eng;
    const emb_feature *fe = b->fe;
    const emb_table *t = b->t;
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

/* The dedup hash's slot for an id PF occurrences ahead, fetched early: the
 * region of a large step's table outgrows the inner caches. */
enum { PF = 32 };

/* Occurrence k of ids (n of them), in bag with weight w: its unique row,
 * found or added, then its (bag, unique) and gain. */
static inline tl_status add_occ(builder *b, const int64_t *ids, int64_t k, int64_t n, int64_t bag, float w)
{
    if (k + PF < n)
        __builtin_prefetch(&b->h[emb_dedup_slot(ids[k + PF], b->shift)], 1, 3);
    int64_t id = ids[k];
    if (id < 0 || id >= b->t->vocab)
        return drop_id(b, k, id);
    emb_core_step *s = b->s;
    int64_t *uid = s->u_id.p;
    int32_t u;
    for (size_t i = emb_dedup_slot(id, b->shift);; i = (i + 1) & b->mask) {
        u = b->h[i];
        if (u < 0) { /* a new unique row */
            u = (int32_t)s->n_unique++;
            b->h[i] = u;
            ((int32_t *)s->u_table.p)[u] = b->table;
            uid[u] = id;
            ((float **)s->u_ptr.p)[u] = emb_row(b->eng, b->t, id);
            b->per_table[b->table]++;
            break;
        }
        if (uid[u] == id) /* the region is the table's: the id is the key */
            break;
    }
    int64_t o = s->n_occ++;
    b->pair[2 * o] = (int32_t)bag;
    b->pair[2 * o + 1] = u;
    ((float *)s->occ_gain.p)[o] = w;
    return TL_OK;
}

/* Feature f's input into occurrences with weights (gains come after). */
static tl_status add_feature(builder *b, int f, const tl_emb_input *in)
{
    builder_feature(b, f);
    const emb_feature *fe = b->fe;
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
            st = add_occ(b, in->ids, k, in->n, k, 1.0f);
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
            st = add_occ(b, in->ids, k, in->n, S > 0 ? smp * S + pos : smp, in->weights ? in->weights[k] : 1.0f);
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
                st = add_occ(b, in->ids, k, in->n, S > 0 ? r * S + j : r, in->weights ? in->weights[k] : 1.0f);
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
    const int32_t *pair = b->pair + 2 * from; /* bag k is pair[2 k] */
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
        sum[pair[2 * k]] += comb == TL_EMB_COMBINER_MEAN ? (double)g[k] : (double)g[k] * g[k];
    for (int64_t k = 0; k < n; k++) {
        double d = comb == TL_EMB_COMBINER_MEAN ? sum[pair[2 * k]] : sqrt(sum[pair[2 * k]]);
        g[k] = d != 0 ? (float)(g[k] / d) : 0.0f;
    }
    int64_t zero = 0;
    for (int64_t k = 0; k < n; k++)
        if (sum[pair[2 * k]] == 0) {
            zero++;
            sum[pair[2 * k]] = -1; /* count each bag once */
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

/* Several hosts: the host holding each unique row of the step, and room
 * for the rows held elsewhere (their u_ptr is NULL until imported). */
static tl_status mark_hosts(const tl_emb_engine *eng, emb_core_step *s)
{
    tl_status st = emb_reserve(&s->u_host, (size_t)(s->n_unique + 1) * sizeof(int32_t));
    if (st != TL_OK)
        return st;
    const int32_t *ut = s->u_table.p;
    const int64_t *uid = s->u_id.p;
    int32_t *uh = s->u_host.p;
    int64_t floats = 0, local;
    s->n_missing = 0;
    for (int64_t u = 0; u < s->n_unique; u++) {
        const emb_table *t = &eng->tables[ut[u]];
        uh[u] = emb_host_of(eng, t, uid[u], &local);
        if (uh[u] != eng->cfg.host) {
            floats += t->dim;
            s->n_missing++;
        }
    }
    return emb_reserve(&s->remote, (size_t)(floats + 1) * sizeof(float));
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
    int T = eng->cfg.num_tables;
    if ((st = dedup_prepare(eng, s, inputs)) != TL_OK ||
        (st = emb_reserve(&s->feat_off, (size_t)(F + 1) * sizeof(int64_t))) != TL_OK ||
        (st = emb_reserve(&s->ints, (size_t)(T + 2 * total) * sizeof(int32_t))) != TL_OK ||
        (st = emb_reserve(&s->occ_gain, (size_t)(total + 1) * sizeof(float))) != TL_OK ||
        (st = emb_reserve(&s->in_order, (size_t)F * sizeof(bool))) != TL_OK ||
        (st = emb_reserve(&s->u_table, (size_t)(total + 1) * sizeof(int32_t))) != TL_OK ||
        (st = emb_reserve(&s->u_id, (size_t)(total + 1) * sizeof(int64_t))) != TL_OK ||
        (st = emb_reserve(&s->u_ptr, (size_t)(total + 1) * sizeof(float *))) != TL_OK)
        return st;
    s->n_occ = s->n_unique = 0;
    /* The dedup data's integers are written as the occurrences come: unique
     * rows per table, then (bag, unique) per occurrence. */
    memset(s->ints.p, 0, (size_t)T * sizeof(int32_t));
    builder b = {.eng = eng, .core = c, .s = s, .batch = batch, .pair = emb_occ(s, T), .per_table = s->ints.p};
    s->batch = batch;
    int64_t *off = s->feat_off.p;
    for (int f = 0; f < F; f++) {
        off[f] = s->n_occ;
        if ((st = add_feature(&b, f, &inputs[f])) != TL_OK || (st = gains(&b, f, off[f], s->n_occ)) != TL_OK)
            return st;
        bool in_order = true; /* dense and ragged inputs come bag by bag; COO may not */
        if (inputs[f].kind == TL_EMB_INPUT_COO)
            for (int64_t k = off[f] + 1; k < s->n_occ && in_order; k++)
                in_order = b.pair[2 * k] >= b.pair[2 * (k - 1)];
        ((bool *)s->in_order.p)[f] = in_order;
    }
    off[F] = s->n_occ;
    if (eng->cfg.num_hosts > 1 && (st = mark_hosts(eng, s)) != TL_OK)
        return st;
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
        r->enqueued = r->activated = r->sent = r->parts = 0;
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

tl_status tl_emb_recv_dedup(tl_emb_engine *eng, int core, tl_emb_dedup *out)
{
    if (eng == NULL || out == NULL)
        return tl_error(TL_EINVAL, "embedding: recv_dedup with a NULL engine or out");
    if (core < 0 || core >= eng->cfg.num_tensor_cores)
        return tl_error(TL_EINVAL, "embedding: core %d is not in [0, %d)", core, eng->cfg.num_tensor_cores);
    emb_core *c = &eng->cores[core];
    pthread_mutex_lock(&eng->mu);
    if (c->last_received >= 0) {
        emb_core_step *p = emb_find_slot(c, c->last_received);
        if (p != NULL && p->mode != TL_EMB_MODE_INFERENCE && p->state != CS_SENT) {
            pthread_mutex_unlock(&eng->mu);
            return tl_error(TL_ERUNTIME, "embedding: core %d has not sent the gradients of step %lld (mode "
                                         "training): send them before receiving the next step", core,
                            (long long)c->last_received);
        }
    }
    int64_t step = c->next_recv;
    emb_core_step *s = emb_find_slot(c, step);
    if (s == NULL || s->state != CS_ENQUEUED) {
        pthread_mutex_unlock(&eng->mu);
        return tl_error(TL_ERUNTIME, "embedding: core %d has nothing enqueued for step %lld", core, (long long)step);
    }
    emb_core_step *prev = c->last_received >= 0 ? emb_find_slot(c, c->last_received) : NULL;
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
    emb_core_step *s = dd->step >= 0 ? emb_find_slot(c, dd->step) : NULL;
    if (dd->core != core || s == NULL || s->ints.p != (const void *)dd->ints || dd->step != c->last_received)
        return tl_error(TL_ERUNTIME, "embedding: core %d was given stale or foreign dedup data (core %d, step %lld; the "
                                     "core's current step is %lld)", core, dd->core, (long long)dd->step,
                        (long long)c->last_received);
    *out = s;
    return TL_OK;
}

/* Every training step before `step` is applied (pipelined: all but the
 * previous one), as reading the tables for step needs. */
static tl_status earlier_applied(tl_emb_engine *eng, int core, int64_t step, const char *what)
{
    pthread_mutex_lock(&eng->mu);
    for (int k = 0; k < EMB_RING; k++) {
        const emb_step_rec *r = &eng->recs[k];
        bool allowed = eng->cfg.pipeline_execution_with_tensor_core && r->step == step - 1;
        if (r->step >= 0 && r->step < step && r->mode != TL_EMB_MODE_INFERENCE && !allowed) {
            int64_t missing = r->step;
            pthread_mutex_unlock(&eng->mu);
            return tl_error(TL_ERUNTIME, "embedding: core %d asked for step %lld's %s before every core sent step "
                                         "%lld's gradients", core, (long long)step, what, (long long)missing);
        }
    }
    pthread_mutex_unlock(&eng->mu);
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
        emb_apply_step(eng, p, NULL);
    }
}

/* Rows of the forward fetched this many occurrences ahead (across
 * features), so that many of the rows' misses are in flight. */
enum { FWD_AHEAD = 16 };

/* Occurrences [from, to) of a feature of dim D into its output out (bags
 * rows): each bag adds its occurrences in order onto zeros. When the bags
 * come in order, a bag's first occurrence writes 0 + g x (the bits of adding
 * onto zeros) and the bags between are zeroed then, so the output is written
 * once rather than cleared first. One call per feature, so the rows' loops
 * are inlined in each vector width's clone. */
TL_VECTOR_CLONES static void forward_feature(float *restrict out, int64_t bags, int D, const int32_t *restrict pair,
                                             const float *restrict gain, float *const *restrict rows, int64_t from,
                                             int64_t to, int64_t n_occ, bool in_order)
{
    int64_t next = 0; /* the bags below are written */
    if (!in_order) {
        memset(out, 0, (size_t)bags * (size_t)D * sizeof *out);
        next = bags;
    }
    for (int64_t k = from; k < to; k++) {
        if (k + FWD_AHEAD < n_occ)
            emb_prefetch(rows[pair[2 * (k + FWD_AHEAD) + 1]], D);
        int64_t b = pair[2 * k];
        float *restrict o = out + b * D;
        const float *restrict x = rows[pair[2 * k + 1]];
        float g = gain[k];
        if (b >= next) {
            if (b > next)
                memset(out + next * D, 0, (size_t)(b - next) * (size_t)D * sizeof *out);
            for (int d = 0; d < D; d++)
                o[d] = 0.0f + g * x[d];
            next = b + 1;
        } else {
            for (int d = 0; d < D; d++)
                o[d] += g * x[d];
        }
    }
    if (next < bags)
        memset(out + next * D, 0, (size_t)(bags - next) * (size_t)D * sizeof *out);
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
    if (outputs == NULL && n != 0)
        return tl_error(TL_EINVAL, "embedding: outputs is NULL with n %d (NULL receives no activations: n 0)", n);
    if (outputs != NULL && n != eng->cfg.num_features)
        return tl_error(TL_EINVAL, "embedding: expected %d outputs, one per feature, got %d", eng->cfg.num_features, n);
    for (int f = 0; outputs != NULL && f < n; f++)
        if (outputs[f] == NULL)
            return tl_error(TL_EINVAL, "embedding: output %d (feature \"%s\") is NULL", f, eng->features[f].name);
    if (s->mode == TL_EMB_MODE_BACKWARD_PASS_ONLY)
        return tl_error(TL_ERUNTIME, "embedding: step %lld was enqueued for the backward pass only: it has no "
                                     "activations", (long long)s->step);
    if (state != CS_RECEIVED)
        return tl_error(TL_ERUNTIME, "embedding: core %d already received step %lld's activations", core,
                        (long long)s->step);
    if ((st = earlier_applied(eng, core, s->step, "activations")) != TL_OK)
        return st;
    if (outputs != NULL && s->n_missing > 0)
        return tl_error(TL_ERUNTIME, "embedding: core %d's step %lld reads %lld rows that other hosts hold and that "
                                     "were not imported (tl_emb_import_rows)", core, (long long)s->step,
                        (long long)s->n_missing);
    const int32_t *pair = emb_occ(s, eng->cfg.num_tables);
    const int64_t *off = s->feat_off.p;
    const float *gain = s->occ_gain.p;
    float *const *rows = s->u_ptr.p;
    for (int f = 0; outputs != NULL && f < n; f++) {
        const emb_feature *fe = &eng->features[f];
        const emb_table *t = &eng->tables[fe->table];
        int D = t->dim;
        float *out = outputs[f];
        int64_t bags = emb_bags(fe, s->batch);
        if (!t->opt.simulated_quantization.enabled) {
            forward_feature(out, bags, D, pair, gain, rows, off[f], off[f + 1], s->n_occ,
                            ((const bool *)s->in_order.p)[f]);
            continue;
        }
        memset(out, 0, (size_t)bags * (size_t)D * sizeof *out);
        float tmp[256];
        for (int64_t k = off[f]; k < off[f + 1]; k++) {
            if (k + FWD_AHEAD < s->n_occ)
                emb_prefetch(rows[pair[2 * (k + FWD_AHEAD) + 1]], D);
            float *o = out + (int64_t)pair[2 * k] * D;
            const float *row = rows[pair[2 * k + 1]];
            float gk = gain[k];
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

/* ---- rows held by other hosts ----------------------------------------------------- */

/* dd's step (checked as current) and the floats of its unique rows held by
 * host. */
static tl_status rows_of(tl_emb_engine *eng, const tl_emb_dedup *dd, int host, emb_core_step **out, int64_t *floats)
{
    if (eng == NULL)
        return tl_error(TL_EINVAL, "embedding: rows of another host on a NULL engine");
    if (host < 0 || host >= eng->cfg.num_hosts)
        return tl_error(TL_EINVAL, "embedding: host %d is not in [0, num_hosts %d)", host, eng->cfg.num_hosts);
    pthread_mutex_lock(&eng->mu);
    tl_status st = check_dedup(eng, dd != NULL ? dd->core : -1, dd, out);
    pthread_mutex_unlock(&eng->mu);
    if (st != TL_OK)
        return st;
    const emb_core_step *s = *out;
    const int32_t *ut = s->u_table.p, *uh = s->u_host.p;
    int64_t n = 0;
    for (int64_t u = 0; u < s->n_unique; u++)
        if (eng->cfg.num_hosts == 1 || uh[u] == host)
            n += eng->tables[ut[u]].dim;
    *floats = n;
    return TL_OK;
}

tl_status tl_emb_rows_floats(tl_emb_engine *eng, const tl_emb_dedup *dd, int host, int64_t *floats)
{
    emb_core_step *s;
    return rows_of(eng, dd, host, &s, floats);
}

tl_status tl_emb_export_rows(tl_emb_engine *eng, const tl_emb_dedup *dd, float *out, int64_t floats)
{
    emb_core_step *s;
    int64_t n;
    tl_status st = rows_of(eng, dd, eng != NULL ? eng->cfg.host : 0, &s, &n);
    if (st != TL_OK)
        return st;
    if (floats != n || (n > 0 && out == NULL))
        return tl_error(TL_EINVAL, "embedding: core %d's step %lld has %lld floats of rows on this host; the export "
                                   "was given room for %lld", dd->core, (long long)dd->step, (long long)n,
                        (long long)floats);
    if ((st = earlier_applied(eng, dd->core, dd->step, "rows")) != TL_OK)
        return st;
    const int32_t *ut = s->u_table.p, *uh = s->u_host.p;
    float *const *uptr = s->u_ptr.p;
    for (int64_t u = 0; u < s->n_unique; u++) {
        if (eng->cfg.num_hosts > 1 && uh[u] != eng->cfg.host)
            continue;
        int D = eng->tables[ut[u]].dim;
        memcpy(out, uptr[u], (size_t)D * sizeof *out);
        out += D;
    }
    return TL_OK;
}

tl_status tl_emb_import_rows(tl_emb_engine *eng, const tl_emb_dedup *dd, int host, const float *rows, int64_t floats)
{
    emb_core_step *s;
    int64_t n;
    tl_status st = rows_of(eng, dd, host, &s, &n);
    if (st != TL_OK)
        return st;
    if (host == eng->cfg.host)
        return tl_error(TL_EINVAL, "embedding: host %d is this engine's own: its rows are not imported", host);
    if (floats != n || (n > 0 && rows == NULL))
        return tl_error(TL_EINVAL, "embedding: core %d's step %lld has %lld floats of rows on host %d; %lld were "
                                   "given", dd->core, (long long)dd->step, (long long)n, host, (long long)floats);
    const int32_t *ut = s->u_table.p, *uh = s->u_host.p;
    float **uptr = s->u_ptr.p;
    float *remote = s->remote.p;
    int64_t at = 0; /* the remote rows in unique order, every other host's */
    for (int64_t u = 0; u < s->n_unique; u++) {
        if (uh[u] == eng->cfg.host)
            continue;
        int D = eng->tables[ut[u]].dim;
        if (uh[u] == host) {
            if (uptr[u] != NULL)
                return tl_error(TL_ERUNTIME, "embedding: core %d's step %lld already has host %d's rows", dd->core,
                                (long long)dd->step, host);
            memcpy(remote + at, rows, (size_t)D * sizeof *rows);
            uptr[u] = remote + at;
            rows += D;
            s->n_missing--;
        }
        at += D;
    }
    return TL_OK;
}

/* ---- send --------------------------------------------------------------------------- */

/* Occurrences ahead whose row sums gradient_feature fetches early. */
enum { GRAD_AHEAD = 16 };

/* Occurrences [from, to) of a feature of dim D, with dL/d(out) dy, into the
 * unique rows' sums g (row u at goff[u]). Unique rows were numbered in this
 * very order of occurrences, so a row's first occurrence is the one whose
 * number is the next new one: it writes, later ones add. Returns the next
 * new number. */
TL_VECTOR_CLONES static int64_t gradient_feature(float *restrict g, const int64_t *restrict goff,
                                                 const float *restrict dy, int D, const int32_t *restrict pair,
                                                 const float *restrict gain, int64_t from, int64_t to, int64_t next_new)
{
    for (int64_t k = from; k < to; k++) {
        if (k + GRAD_AHEAD < to) { /* a repeated row's sum is anywhere in g */
            const float *ahead = g + goff[pair[2 * (k + GRAD_AHEAD) + 1]];
            for (int i = 0; i < D; i += 16)
                __builtin_prefetch(ahead + i, 1, 3);
        }
        int32_t u = pair[2 * k + 1];
        float *restrict gu = g + goff[u];
        const float *restrict d = dy + (int64_t)pair[2 * k] * D;
        float a = gain[k];
        if (u == next_new) {
            for (int i = 0; i < D; i++)
                gu[i] = a * d[i];
            next_new++;
        } else {
            for (int i = 0; i < D; i++)
                gu[i] += a * d[i];
        }
    }
    return next_new;
}

/* Room for the step's gradient per unique row: row u's at goff[u]. */
static tl_status gradient_room(const tl_emb_engine *eng, emb_core_step *s)
{
    const int32_t *ut = s->u_table.p;
    tl_status st;
    if ((st = emb_reserve(&s->u_goff, (size_t)(s->n_unique + 1) * sizeof(int64_t))) != TL_OK)
        return st;
    int64_t *goff = s->u_goff.p;
    goff[0] = 0;
    for (int64_t u = 0; u < s->n_unique; u++)
        goff[u + 1] = goff[u] + eng->tables[ut[u]].dim;
    return emb_reserve(&s->grad, (size_t)(goff[s->n_unique] + 1) * sizeof(float));
}

/* The step's gradients per unique row on the core (s->grad): Σ gain ·
 * dL/d(out), occurrences in order. */
static tl_status gradients_summed(tl_emb_engine *eng, emb_core_step *s, const float *const *grads)
{
    tl_status st = gradient_room(eng, s);
    if (st != TL_OK)
        return st;
    const int64_t *goff = s->u_goff.p;
    float *g = s->grad.p;
    const int64_t *off = s->feat_off.p;
    const int32_t *pair = emb_occ(s, eng->cfg.num_tables);
    const float *gain = s->occ_gain.p;
    int64_t next_new = 0;
    for (int f = 0; f < eng->cfg.num_features; f++)
        next_new = gradient_feature(g, goff, grads[f], eng->tables[eng->features[f].table].dim, pair, gain, off[f],
                                    off[f + 1], next_new);
    return TL_OK;
}

/* The checks of a send of core's dd step, before anything changes: *out its
 * slot. */
static tl_status send_check(tl_emb_engine *eng, int core, const tl_emb_dedup *dd, const float *learning_rates,
                            int n_lr, emb_core_step **out)
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
    if (n_lr < 0 || (n_lr > 0 && learning_rates == NULL))
        return tl_error(TL_EINVAL, "embedding: %d learning rates%s", n_lr, n_lr > 0 ? " but the list is NULL" : "");
    for (int i = 0; i < eng->cfg.num_tables; i++) {
        tl_emb_step es;
        if ((st = tl_emb_step_prepare(&eng->tables[i].opt, learning_rates, n_lr, &es)) != TL_OK)
            return tl_error(st, "table \"%s\": %s", eng->tables[i].name, tl_last_error());
    }
    *out = s;
    return TL_OK;
}

/* The send of s, its gradients summed (or, fused, the send's grads, which
 * the apply sums row by row): counted, and the step applied when it is the
 * last (without owner apply). */
static tl_status send_commit(tl_emb_engine *eng, emb_core_step *s, const float *learning_rates, int n_lr,
                             const float *const *fused)
{
    tl_status st;
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
    if (r->sent + 1 == eng->cfg.num_tensor_cores && !eng->owner_apply) {
        /* this send completes the step: its update's workspace first */
        core_state was = s->state;
        s->state = CS_SENT; /* counted by the reserve as sent */
        if ((st = emb_apply_reserve(eng, s->step, 0, 1, &eng->ws[0])) != TL_OK) {
            s->state = was;
            pthread_mutex_unlock(&eng->mu);
            return st;
        }
    }
    s->state = CS_SENT;
    r->sent++;
    if (r->sent == eng->cfg.num_tensor_cores && !eng->owner_apply) {
        if (!eng->cfg.pipeline_execution_with_tensor_core || r->mode == TL_EMB_MODE_BACKWARD_PASS_ONLY) {
            emb_apply_step(eng, s->step, fused);
        } else {
            eng->pending = s->step;
            maybe_apply_pending(eng);
        }
    }
    pthread_mutex_unlock(&eng->mu);
    return TL_OK;
}

tl_status tl_emb_send_gradients(tl_emb_engine *eng, int core, const tl_emb_dedup *dd, const float *const *grads, int n,
                                const float *learning_rates, int n_lr)
{
    emb_core_step *s;
    tl_status st = send_check(eng, core, dd, learning_rates, n_lr, &s);
    if (st != TL_OK)
        return st;
    if (n != eng->cfg.num_features || grads == NULL)
        return tl_error(TL_EINVAL, "embedding: expected %d gradients, one per feature (the activations' list), got %d",
                        eng->cfg.num_features, n);
    for (int f = 0; f < n; f++)
        if (grads[f] == NULL)
            return tl_error(TL_EINVAL, "embedding: gradient %d (feature \"%s\") is NULL", f, eng->features[f].name);
    /* A direct engine applies this step inside this send: the sums are
     * made row by row by the apply, from grads, and never stored. */
    bool fused = emb_direct(eng) && !eng->owner_apply &&
                 (!eng->cfg.pipeline_execution_with_tensor_core || s->mode == TL_EMB_MODE_BACKWARD_PASS_ONLY);
    if (!fused && (st = gradients_summed(eng, s, grads)) != TL_OK)
        return st;
    return send_commit(eng, s, learning_rates, n_lr, fused ? grads : NULL);
}

tl_status tl_emb_export_gradients(tl_emb_engine *eng, const tl_emb_dedup *dd, int host, float *out, int64_t floats)
{
    emb_core_step *s;
    int64_t n;
    tl_status st = rows_of(eng, dd, host, &s, &n);
    if (st != TL_OK)
        return st;
    pthread_mutex_lock(&eng->mu);
    bool sent = s->state == CS_SENT;
    pthread_mutex_unlock(&eng->mu);
    if (!sent || s->u_goff.p == NULL)
        return tl_error(TL_ERUNTIME, "embedding: core %d has not sent step %lld's gradients: nothing to export",
                        dd->core, (long long)dd->step);
    if (floats != n || (n > 0 && out == NULL))
        return tl_error(TL_EINVAL, "embedding: core %d's step %lld has %lld floats of rows on host %d; the export was "
                                   "given room for %lld", dd->core, (long long)dd->step, (long long)n, host,
                        (long long)floats);
    const int32_t *ut = s->u_table.p, *uh = s->u_host.p;
    const int64_t *goff = s->u_goff.p;
    const float *g = s->grad.p;
    for (int64_t u = 0; u < s->n_unique; u++) {
        if (eng->cfg.num_hosts > 1 && uh[u] != host)
            continue;
        int D = eng->tables[ut[u]].dim;
        memcpy(out, g + goff[u], (size_t)D * sizeof *out);
        out += D;
    }
    return TL_OK;
}

tl_status tl_emb_send_row_gradients(tl_emb_engine *eng, int core, const tl_emb_dedup *dd, const float *grads,
                                    int64_t floats, const float *learning_rates, int n_lr)
{
    emb_core_step *s;
    tl_status st = send_check(eng, core, dd, learning_rates, n_lr, &s);
    int64_t n;
    if (st != TL_OK || (st = rows_of(eng, dd, eng->cfg.host, &s, &n)) != TL_OK)
        return st;
    if (floats != n || (n > 0 && grads == NULL))
        return tl_error(TL_EINVAL, "embedding: core %d's step %lld has %lld floats of rows on this host; %lld "
                                   "gradients were given", core, (long long)dd->step, (long long)n, (long long)floats);
    /* The held rows' sums as given; the others' are never read (each
     * engine updates the rows it holds). */
    if ((st = gradient_room(eng, s)) != TL_OK)
        return st;
    const int32_t *ut = s->u_table.p, *uh = s->u_host.p;
    const int64_t *goff = s->u_goff.p;
    float *g = s->grad.p;
    for (int64_t u = 0; u < s->n_unique; u++) {
        if (eng->cfg.num_hosts > 1 && uh[u] != eng->cfg.host)
            continue;
        int D = eng->tables[ut[u]].dim;
        memcpy(g + goff[u], grads, (size_t)D * sizeof *g);
        grads += D;
    }
    return send_commit(eng, s, learning_rates, n_lr, NULL);
}

tl_status tl_emb_flush(tl_emb_engine *eng)
{
    if (eng == NULL)
        return tl_error(TL_EINVAL, "embedding: flush on a NULL engine");
    pthread_mutex_lock(&eng->mu);
    if (eng->pending >= 0) {
        int64_t p = eng->pending;
        eng->pending = -1;
        emb_apply_step(eng, p, NULL);
    }
    pthread_mutex_unlock(&eng->mu);
    return TL_OK;
}

/* ---- owner apply ------------------------------------------------------------------- */

tl_status tl_emb_set_owner_apply(tl_emb_engine *eng, bool on)
{
    if (eng == NULL)
        return tl_error(TL_EINVAL, "embedding: set_owner_apply on a NULL engine");
    if (on && eng->cfg.pipeline_execution_with_tensor_core)
        return tl_error(TL_EINVAL, "embedding: owner apply is not available with pipeline_execution_with_tensor_core "
                                   "(its update runs after the next step's activations)");
    pthread_mutex_lock(&eng->mu);
    bool busy = false;
    for (int k = 0; k < EMB_RING; k++)
        busy = busy || (eng->recs[k].step >= 0 && eng->recs[k].mode != TL_EMB_MODE_INFERENCE);
    if (!busy)
        eng->owner_apply = on;
    pthread_mutex_unlock(&eng->mu);
    if (busy)
        return tl_error(TL_ERUNTIME, "embedding: set_owner_apply while a training step is in flight: finish it first");
    return TL_OK;
}

tl_status tl_emb_apply_owned(tl_emb_engine *eng, int core)
{
    if (eng == NULL)
        return tl_error(TL_EINVAL, "embedding: apply_owned on a NULL engine");
    int C = eng->cfg.num_tensor_cores;
    if (core < 0 || core >= C)
        return tl_error(TL_EINVAL, "embedding: core %d is not in [0, %d)", core, C);
    if (!eng->owner_apply)
        return tl_error(TL_ERUNTIME, "embedding: apply_owned without owner apply: the send that completes a step "
                                     "applies it (tl_emb_set_owner_apply)");
    int64_t step = eng->cores[core].last_received;
    pthread_mutex_lock(&eng->mu);
    emb_step_rec *r = step >= 0 ? &eng->recs[step % EMB_RING] : NULL;
    const char *why = NULL;
    if (r == NULL || r->step != step || r->mode == TL_EMB_MODE_INFERENCE)
        why = "has no training step to apply";
    else if (eng->part_done[core] == step)
        why = "already applied its rows of";
    else if (r->sent != C)
        why = "cannot apply yet: not every core has sent";
    pthread_mutex_unlock(&eng->mu);
    if (why != NULL)
        return tl_error(TL_ERUNTIME, "embedding: core %d %s step %lld (%d of %d cores sent)", core, why,
                        (long long)step, r != NULL && r->step == step ? r->sent : 0, C);
    /* Every core sent: the step's slots and gradients no longer change, and
     * this core's rows are its own. */
    tl_status st = emb_apply_reserve(eng, step, core, C, &eng->ws[core]);
    if (st != TL_OK)
        return st;
    emb_apply_part(eng, step, core, C, &eng->ws[core], NULL);
    pthread_mutex_lock(&eng->mu);
    eng->part_done[core] = step;
    if (++r->parts == C)
        emb_apply_finish(eng, step);
    pthread_mutex_unlock(&eng->mu);
    return TL_OK;
}

/* infeed.c — the estimator's input: its sources for the feed (feed.h) — the
 * in-memory data of tl_estimator_train & co, cut from the global batches of
 * a shuffled epoch, or the datasets an input_fn returns per invocation of
 * the mode's input plan (spec tpu_estimator.md §4.1) — and the positions of
 * those datasets that checkpoints carry. Both write each example's
 * embedding ids as int64 beside its features: from tl_labeled_data.ids, or
 * from the element tensors named by the embedding features. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "estimator_int.h"
#include "tpuloop/dataset.h"

/* ---- in-memory data: a permutation per epoch without storage ------------- */

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

struct tl_mem_source {
    const tl_estimator *est;
    const tl_labeled_data *data;
    tl_cmd_kind cmd;
    int64_t G; /* rows of a global batch */
};

/* One copy of in-memory rows: rows [0, n) of the destination are examples
 * at positions pos0 + i, of the epoch's permutation when training. The next
 * global batch's rows are at next_pos0 + i of next_epoch's. */
typedef struct mem_copy {
    const tl_mem_source *m;
    const tl_feed_dest *dst;
    int64_t n, pos0, epoch;
    int64_t next_pos0, next_epoch;
} mem_copy;

/* Asks for the first lines of the examples the next step's rows
 * [lo, hi) will read. A training batch gathers examples from anywhere in
 * the data, so each row's first touch misses the caches: a batch of one
 * row waits ~0.1 us on it every step, longer than a small step computes.
 * Fetched a step ahead, the wait overlaps this step's work. */
static void prefetch_next(const mem_copy *c, uint64_t seed, int64_t lo, int64_t hi)
{
    const tl_labeled_data *d = c->m->data;
    int64_t D = d->num_features;
    for (int64_t i = lo; i < hi; i++) {
        int64_t ex = shuffled(seed, c->next_epoch, c->next_pos0 + i, d->num_examples);
        const float *row = d->features + ex * D;
        __builtin_prefetch(row, 0, 3);
        __builtin_prefetch(row + D - 1, 0, 3); /* the line it ends on, for a row across two */
        if (d->labels != NULL)
            __builtin_prefetch(d->labels + ex, 0, 3);
    }
}

static void mem_rows(void *ctx, int part, int nparts)
{
    const mem_copy *c = ctx;
    const tl_labeled_data *d = c->m->data;
    const tl_feed_dest *dst = c->dst;
    int64_t D = d->num_features, W = c->m->est->emb_width;
    uint64_t seed = c->m->est->rc.tf_random_seed.set ? (uint64_t)c->m->est->rc.tf_random_seed.value : 0;
    int64_t lo, hi;
    tl_team_range(c->n, 1, part, nparts, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int64_t pos = c->pos0 + i;
        int64_t ex = c->m->cmd == CMD_TRAIN ? shuffled(seed, c->epoch, pos, d->num_examples) : pos;
        memcpy(tl_feed_dest_row(dst, i, D), d->features + ex * D, (size_t)D * sizeof(float));
        if (dst->labels != NULL)
            *tl_feed_dest_label(dst, i) = d->labels[ex];
        if (dst->ids != NULL)
            memcpy(tl_feed_dest_ids(dst, i, W), d->ids + ex * W, (size_t)W * sizeof(int64_t));
    }
    if (c->m->cmd == CMD_TRAIN)
        prefetch_next(c, seed, lo, hi);
}

/* Rows [row0, row0 + cap) of global batch `step`: training draws positions
 * of the epoch's permutation, evaluation takes the data in order,
 * prediction too, ending where the data does. A batch of
 * TL_TEAM_COPY_MIN_BYTES or more is copied on the destination's team, when
 * it has one (the rows are gathered from anywhere in the data: the copy
 * waits on memory, which two cores wait on in parallel). */
static tl_status mem_next(void *ud, int64_t step, int64_t row0, int64_t cap, const tl_feed_dest *dst, int64_t *rows)
{
    const tl_mem_source *m = ud;
    const tl_labeled_data *d = m->data;
    int64_t n = cap, epoch = 0, in_epoch = step;
    if (m->cmd == CMD_TRAIN) {
        epoch = step / m->est->steps_per_epoch;
        in_epoch = step % m->est->steps_per_epoch;
    } else {
        /* Evaluation on devices never reads past the data (checked before);
         * on the CPU path it ends where the data does, as prediction. */
        int64_t left = d->num_examples - (step * m->G + row0);
        n = left < 0 ? 0 : left < cap ? left : cap;
    }
    mem_copy c = {m, dst, n, in_epoch * m->G + row0, epoch, 0, 0};
    if (m->cmd == CMD_TRAIN) {
        c.next_epoch = (step + 1) / m->est->steps_per_epoch;
        c.next_pos0 = (step + 1) % m->est->steps_per_epoch * m->G + row0;
    }
    int64_t bytes = n * (d->num_features * (int64_t)sizeof(float) + m->est->emb_width * (int64_t)sizeof(int64_t));
    tl_team_run(bytes >= TL_TEAM_COPY_MIN_BYTES ? dst->team : NULL, mem_rows, &c);
    *rows = n;
    return TL_OK;
}

/* ---- datasets ------------------------------------------------------------ */

/* Where the model's features, label and embedding ids are in a dataset's
 * elements. */
typedef struct tl_key_layout {
    int nf;           /* feature tensors */
    int *fidx;        /* (nf) their index in the element */
    int64_t *fwidth;  /* (nf) values per example */
    int lidx;         /* the label's index, -1 without one */
    int64_t D;
    int frank;
    int64_t fshape[TL_MAX_RANK];
    int nid;          /* embedding features (0 without an engine) */
    int *iidx;        /* (nid) the index of each one's id tensor */
    int64_t *iwidth;  /* (nid) its ids per example, W_f */
    int64_t W;        /* Σ W_f */
} tl_key_layout;

struct tl_ds_source {
    tl_dataset *ds;
    const tl_input *in;
    const tl_emb_config *emb; /* NULL without an embedding engine */
    int index;        /* invocation */
    bool labels;
    int64_t D;        /* the traced width */
    tl_key_layout lay;
};

static const char *label_key(const tl_input *in)
{
    return in->label_key != NULL ? in->label_key : "label";
}

static bool numeric(tl_data_type t)
{
    return t == TL_DT_FLOAT32 || t == TL_DT_INT32 || t == TL_DT_INT64;
}

static int find_key(const tl_element *e, const char *key)
{
    for (int i = 0; i < e->num_tensors; i++)
        if (strcmp(e->tensors[i].key, key) == 0)
            return i;
    return -1;
}

/* "the input's elements have no <what> tensor "key"<after> (they have ...)" */
static tl_status no_key_for(const tl_element *e, const char *what, const char *key, const char *after)
{
    tl_strbuf sb = {0};
    for (int i = 0; i < e->num_tensors; i++)
        tl_strbuf_appendf(&sb, "%s\"%s\"", i ? ", " : "", e->tensors[i].key);
    tl_status st = tl_error(TL_EINVAL, "the input's elements have no %s tensor \"%s\"%s (they have %s)", what, key,
                            after, sb.len ? sb.data : "none");
    tl_strbuf_free(&sb);
    return st;
}

static tl_status no_key(const tl_element *e, const char *what, const char *key)
{
    return no_key_for(e, what, key, "");
}

static void layout_free(tl_key_layout *l)
{
    tl_free(l->fidx);
    tl_free(l->fwidth);
    tl_free(l->iidx);
    tl_free(l->iwidth);
    memset(l, 0, sizeof *l);
}

/* Values per example of a batched tensor: the product of its dims after
 * the batch. */
static int64_t row_width(const tl_tensor *t)
{
    int64_t w = 1;
    for (int d = 1; d < t->rank; d++)
        w *= t->shape[d];
    return w;
}

/* The key of embedding feature f's ids. */
static const char *id_key(const tl_input *in, const tl_emb_config *c, int f)
{
    return in->embedding_keys != NULL && in->embedding_keys[f] != NULL ? in->embedding_keys[f]
                                                                       : c->features[f].name;
}

/* Why id tensor t cannot carry feature fc's ids (W_f per example), as an
 * error; TL_OK when it can. */
static tl_status check_ids(const tl_tensor *t, const tl_emb_feature_config *fc, int64_t want)
{
    if (t->ragged)
        return tl_error(TL_ENOTIMPL, "input tensor \"%s\" (the ids of embedding feature \"%s\") is ragged (a "
                                     "VarLenFeature): ragged ids are not supported yet; parse it as a "
                                     "FixedLenFeature of %lld value%s%s", t->key, fc->name, (long long)want,
                        want == 1 ? "" : "s", fc->max_sequence_length > 0 ? ", -1 where a position is absent" : "");
    if (t->dtype != TL_DT_INT64 && t->dtype != TL_DT_INT32)
        return tl_error(TL_EINVAL, "input tensor \"%s\" holds the ids of embedding feature \"%s\" as %s: ids must "
                                   "be int64 or int32 (an id never travels as a float)",
                        t->key, fc->name, tl_data_type_name(t->dtype));
    if (t->rank < 1)
        return tl_error(TL_EINVAL, "input tensor \"%s\" (the ids of embedding feature \"%s\") is a scalar, not a "
                                   "batch: batch the dataset", t->key, fc->name);
    int64_t w = row_width(t);
    if (w != want)
        return tl_error(TL_EINVAL, "input tensor \"%s\" has %lld ids per example; embedding feature \"%s\" takes "
                                   "%lld (%s): shape it (batch) or (batch, %lld)",
                        t->key, (long long)w, fc->name, (long long)want,
                        fc->max_sequence_length > 0 ? "its max_sequence_length"
                        : fc->num_output_dims > 0   ? "the product of its output_shape"
                                                    : "one id per example",
                        (long long)want);
    return TL_OK;
}

/* Finds the id tensor of every embedding feature of c in element e. */
static tl_status ids_layout(const tl_element *e, const tl_input *in, const tl_emb_config *c, tl_key_layout *l)
{
    if (c == NULL) {
        if (in->embedding_keys != NULL)
            return tl_error(TL_EINVAL, "tl_input.embedding_keys is set, but the estimator has no embedding engine "
                                       "(tl_estimator_options.embedding)");
        return TL_OK;
    }
    int F = c->num_features;
    if ((in->embedding_keys != NULL && in->num_embedding_keys != F) ||
        (in->embedding_keys == NULL && in->num_embedding_keys != 0))
        return tl_error(TL_EINVAL, "tl_input.num_embedding_keys is %d with embedding_keys %s; the embedding engine "
                                   "has %d features, one key each (or embedding_keys NULL and 0: their names)",
                        in->num_embedding_keys, in->embedding_keys != NULL ? "set" : "NULL", F);
    l->iidx = tl_calloc((size_t)F + 1, sizeof *l->iidx);
    l->iwidth = tl_calloc((size_t)F + 1, sizeof *l->iwidth);
    if (l->iidx == NULL || l->iwidth == NULL)
        return tl_error_oom();
    for (int f = 0; f < F; f++) {
        const tl_emb_feature_config *fc = &c->features[f];
        const char *key = id_key(in, c, f);
        int i = find_key(e, key);
        if (i < 0) {
            char after[160];
            snprintf(after, sizeof after, " for embedding feature %d (\"%s\")", f, fc->name);
            return no_key_for(e, "id", key, after);
        }
        int64_t want = tl_est_emb_width(fc);
        tl_status st = check_ids(&e->tensors[i], fc, want);
        if (st != TL_OK)
            return st;
        l->iidx[l->nid] = i;
        l->iwidth[l->nid++] = want;
        l->W += want;
    }
    return TL_OK;
}

static bool is_id_tensor(const tl_key_layout *l, int i)
{
    for (int k = 0; k < l->nid; k++)
        if (l->iidx[k] == i)
            return true;
    return false;
}

/* Finds in's feature, label and (with an engine's config c) id tensors in
 * element e. */
static tl_status layout_of(const tl_element *e, const tl_input *in, bool need_label, const tl_emb_config *c,
                           tl_key_layout *l)
{
    memset(l, 0, sizeof *l);
    l->lidx = find_key(e, label_key(in));
    if (need_label && l->lidx < 0)
        return no_key(e, "label", label_key(in));
    tl_status st = ids_layout(e, in, c, l);
    if (st != TL_OK) {
        layout_free(l);
        return st;
    }
    int cap = in->feature_keys != NULL ? in->num_feature_keys : e->num_tensors;
    l->fidx = tl_calloc((size_t)cap + 1, sizeof *l->fidx);
    l->fwidth = tl_calloc((size_t)cap + 1, sizeof *l->fwidth);
    if (l->fidx == NULL || l->fwidth == NULL) {
        layout_free(l);
        return tl_error_oom();
    }
    if (in->feature_keys != NULL) {
        for (int k = 0; k < in->num_feature_keys; k++) {
            int i = find_key(e, in->feature_keys[k]);
            if (i < 0) {
                st = no_key(e, "feature", in->feature_keys[k]);
                layout_free(l);
                return st;
            }
            l->fidx[l->nf++] = i;
        }
    } else {
        /* The ids are the embedding's input, not the model's features. */
        for (int i = 0; i < e->num_tensors; i++)
            if (i != l->lidx && numeric(e->tensors[i].dtype) && !e->tensors[i].ragged && !is_id_tensor(l, i))
                l->fidx[l->nf++] = i;
    }
    if (l->nf == 0) {
        layout_free(l);
        return tl_error(TL_EINVAL, "the input's elements have no dense numeric feature tensor besides the label "
                                   "\"%s\"%s", label_key(in), c != NULL ? " and the embedding ids" : "");
    }
    for (int k = 0; k < l->nf; k++) {
        const tl_tensor *t = &e->tensors[l->fidx[k]];
        if (!numeric(t->dtype) || t->ragged || t->rank < 1) {
            st = tl_error(TL_EINVAL, "input tensor \"%s\" cannot be a model feature: it is %s%s; features are "
                                     "dense float32, int32 or int64 batches (batch, ...)",
                          t->key, t->ragged ? "ragged" : t->dtype == TL_DT_BYTES ? "bytes" : "",
                          t->rank < 1 ? "a scalar, not a batch" : "");
            layout_free(l);
            return st;
        }
        int64_t w = row_width(t);
        l->fwidth[k] = w;
        l->D += w;
    }
    const tl_tensor *t0 = &e->tensors[l->fidx[0]];
    if (l->nf == 1 && t0->rank >= 2 && t0->rank - 1 <= TL_MAX_RANK - 1) {
        l->frank = t0->rank - 1;
        memcpy(l->fshape, t0->shape + 1, (size_t)l->frank * sizeof *l->fshape);
    } else {
        l->frank = 1;
        l->fshape[0] = l->D;
    }
    return TL_OK;
}

static void convert(const tl_tensor *t, int64_t row, int64_t w, float *dst)
{
    switch (t->dtype) {
    case TL_DT_FLOAT32:
        memcpy(dst, (const float *)t->data + row * w, (size_t)w * sizeof *dst);
        break;
    case TL_DT_INT32:
        for (int64_t j = 0; j < w; j++)
            dst[j] = (float)((const int32_t *)t->data)[row * w + j];
        break;
    case TL_DT_INT64:
        for (int64_t j = 0; j < w; j++)
            dst[j] = (float)((const int64_t *)t->data)[row * w + j];
        break;
    default:
        TL_ASSERT(!"not a numeric tensor");
    }
}

/* Writes the n rows' ids of element e into dst: feature after feature,
 * int64 as they are, int32 widened; nothing is checked per id (the
 * engine's bounds check is the one check). */
static tl_status copy_ids(const tl_ds_source *s, const tl_element *e, int64_t n, const tl_feed_dest *dst)
{
    const tl_key_layout *l = &s->lay;
    int64_t off = 0;
    for (int k = 0; k < l->nid; k++) {
        const tl_tensor *t = &e->tensors[l->iidx[k]];
        int64_t w = l->iwidth[k];
        tl_status st = check_ids(t, &s->emb->features[k], w);
        if (st == TL_OK && t->shape[0] != n)
            st = tl_error(TL_EINVAL, "input tensor \"%s\" (the ids of embedding feature \"%s\") has %lld rows; the "
                                     "features have %lld", t->key, s->emb->features[k].name,
                          (long long)t->shape[0], (long long)n);
        if (st != TL_OK)
            return st;
        for (int64_t i = 0; i < n; i++) {
            int64_t *row = tl_feed_dest_ids(dst, i, l->W) + off;
            if (t->dtype == TL_DT_INT64) {
                memcpy(row, (const int64_t *)t->data + i * w, (size_t)w * sizeof *row);
            } else {
                const int32_t *v = (const int32_t *)t->data + i * w;
                for (int64_t j = 0; j < w; j++)
                    row[j] = v[j];
            }
        }
        off += w;
    }
    return TL_OK;
}

static tl_status ds_next(void *ud, int64_t step, int64_t row0, int64_t cap, const tl_feed_dest *dst, int64_t *rows)
{
    (void)step;
    (void)row0;
    tl_ds_source *s = ud;
    const tl_element *e;
    tl_status st = tl_dataset_next(s->ds, &e);
    if (st != TL_OK)
        return st;
    *rows = 0;
    if (e == NULL)
        return TL_OK;
    if (s->lay.fidx == NULL) {
        if ((st = layout_of(e, s->in, s->labels, s->emb, &s->lay)) != TL_OK)
            return st;
        if (s->lay.D != s->D)
            return tl_error(TL_EINVAL, "the input's features have %lld values per example; the model was traced for "
                                       "%lld",
                            (long long)s->lay.D, (long long)s->D);
    }
    const tl_key_layout *l = &s->lay;
    const tl_tensor *t0 = &e->tensors[l->fidx[0]];
    int64_t n = t0->shape[0];
    if (n > cap)
        return tl_error(TL_EINVAL, "input tensor \"%s\" has a batch of %lld rows; params['batch_size'] is %lld",
                        t0->key, (long long)n, (long long)cap);
    for (int k = 0; k < l->nf; k++) {
        const tl_tensor *t = &e->tensors[l->fidx[k]];
        int64_t w = row_width(t);
        if (t->rank < 1 || t->shape[0] != n || w != l->fwidth[k] || !numeric(t->dtype) || t->ragged)
            return tl_error(TL_EINVAL, "input tensor \"%s\" changed shape: %lld rows of %lld values, where the first "
                                       "element had %lld values per row and \"%s\" %lld rows",
                            t->key, (long long)(t->rank ? t->shape[0] : 0), (long long)w, (long long)l->fwidth[k],
                            t0->key, (long long)n);
    }
    if (l->nf == 1 && t0->dtype == TL_DT_FLOAT32) {
        /* One float tensor: whole chunks at a time. */
        for (int64_t i = 0; i < n; i += dst->chunk) {
            int64_t m = n - i < dst->chunk ? n - i : dst->chunk;
            memcpy(tl_feed_dest_row(dst, i, l->D), (const float *)t0->data + i * l->D, (size_t)(m * l->D) * sizeof(float));
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            float *row = tl_feed_dest_row(dst, i, l->D);
            for (int k = 0; k < l->nf; k++) {
                convert(&e->tensors[l->fidx[k]], i, l->fwidth[k], row);
                row += l->fwidth[k];
            }
        }
    }
    if (dst->ids != NULL && (st = copy_ids(s, e, n, dst)) != TL_OK)
        return st;
    if (dst->labels != NULL) {
        const tl_tensor *t = &e->tensors[l->lidx];
        bool ok = (t->dtype == TL_DT_INT32 || t->dtype == TL_DT_INT64) && !t->ragged &&
                  (t->rank == 1 || (t->rank == 2 && t->shape[1] == 1)) && t->shape[0] == n;
        if (!ok)
            return tl_error(TL_EINVAL, "input label \"%s\" must be int32 or int64 with one value per example (%lld "
                                       "rows)",
                            t->key, (long long)n);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = t->dtype == TL_DT_INT32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
            if (v < INT32_MIN || v > INT32_MAX)
                return tl_error(TL_EINVAL, "input label \"%s\" row %lld is %lld, outside int32", t->key, (long long)i,
                                (long long)v);
            *tl_feed_dest_label(dst, i) = (int32_t)v;
        }
    }
    *rows = n;
    return TL_OK;
}

static tl_input_context context_of(const tl_input_plan *p, int i)
{
    tl_input_context c = {p->mode,
                          p->input_fn_batch_size,
                          p->calls[i].host,
                          p->calls[i].index,
                          p->input_fn_calls,
                          p->calls[i].num_replicas,
                          p->calls[i].first_replica};
    return c;
}

static tl_status call_input_fn(const tl_input *in, const tl_input_plan *p, int i, tl_dataset **out)
{
    *out = NULL;
    tl_input_context c = context_of(p, i);
    /* A user's input_fn may fail without a message: then the status's name. */
    tl_clear_error();
    tl_status st = in->input_fn(&c, in->user, out);
    if (st == TL_OK && *out == NULL)
        st = tl_error(TL_EINVAL, "input_fn returned no dataset");
    if (st != TL_OK) {
        tl_dataset_destroy(*out);
        *out = NULL;
        return tl_error(st, "input_fn (%s, invocation %d of %d, host %d): %s", tl_mode_name(p->mode), c.index,
                        c.total, c.host, tl_last_error()[0] ? tl_last_error() : tl_strerror(st));
    }
    return TL_OK;
}

/* Over several hosts every host takes host 0's example shape; one that
 * probed its own (frank >= 0) must have found the same. */
static tl_status shared_shape(tl_estimator *est, int *frank, int64_t *fshape)
{
    if (est->H == 1)
        return TL_OK;
    int64_t v[1 + TL_MAX_RANK] = {*frank};
    for (int d = 0; d < *frank; d++)
        v[1 + d] = fshape[d];
    tl_status st = tl_est_hosts_bcast(est, v, 1 + TL_MAX_RANK);
    if (st != TL_OK)
        return st;
    bool same = *frank < 0 || v[0] == *frank;
    for (int d = 0; same && d < *frank; d++)
        same = v[1 + d] == fshape[d];
    if (!same)
        return tl_error(TL_EINVAL, "host %d's input_fn gives examples of %d feature dimensions (the first %lld), host "
                                   "0's of %lld (the first %lld): every host's input must have the same shape",
                        est->host, *frank, (long long)(*frank > 0 ? fshape[0] : 0), (long long)v[0],
                        (long long)(v[0] > 0 ? v[1] : 0));
    *frank = (int)v[0];
    for (int d = 0; d < *frank; d++)
        fshape[d] = v[1 + d];
    return TL_OK;
}

tl_status tl_infeed_input_shape(tl_estimator *est, tl_mode mode, const tl_input *in, int *frank, int64_t *fshape)
{
    if (in == NULL || in->input_fn == NULL)
        return tl_error(TL_EINVAL, "tl_input.input_fn is required");
    tl_input_plan *p;
    tl_status st = tl_input_plan_create(est->topo, &est->rc, mode, &p);
    if (st != TL_OK)
        return st;
    tl_dataset *ds;
    int first = 0; /* this host's first invocation */
    while (first < p->input_fn_calls && !tl_est_local_call(est, &p->calls[first]))
        first++;
    if (first == p->input_fn_calls) { /* none: host 0's invocation feeds this host */
        tl_input_plan_destroy(p);
        *frank = -1;
        return shared_shape(est, frank, fshape);
    }
    if ((st = call_input_fn(in, p, first, &ds)) != TL_OK) {
        tl_input_plan_destroy(p);
        return st;
    }
    const tl_element *e = NULL;
    if ((st = tl_dataset_next(ds, &e)) == TL_OK && e == NULL)
        st = tl_error(TL_EINVAL, "input_fn (%s, invocation 0): the dataset is empty", tl_mode_name(mode));
    tl_key_layout l;
    const tl_emb_config *c = tl_emb_engine_config(est->opt.embedding);
    if (st == TL_OK && (st = layout_of(e, in, mode != TL_MODE_PREDICT, c, &l)) == TL_OK) {
        *frank = l.frank;
        memcpy(fshape, l.fshape, (size_t)l.frank * sizeof *fshape);
        layout_free(&l);
    }
    tl_dataset_destroy(ds);
    tl_input_plan_destroy(p);
    return st != TL_OK ? st : shared_shape(est, frank, fshape);
}

void tl_infeed_close_datasets(tl_estimator *est, tl_mode mode)
{
    tl_infeed_call *f = &est->infeed.call[mode];
    for (int i = 0; f->ds != NULL && i < f->ncalls; i++) {
        /* skip_corrupt_records: each skip was logged where it happened;
         * the total goes beside them. */
        int64_t skipped = f->ds[i].ds != NULL ? tl_dataset_corrupt_skipped(f->ds[i].ds) : 0;
        if (skipped > 0)
            tl_log(TL_LOG_WARN, "input_fn invocation %d skipped %lld corrupt record%s", i, (long long)skipped,
                   skipped == 1 ? "" : "s");
        tl_dataset_destroy(f->ds[i].ds);
        layout_free(&f->ds[i].lay);
    }
    tl_free(f->ds);
    f->ds = NULL;
}

tl_status tl_infeed_open_datasets(tl_estimator *est, tl_mode mode, const tl_input *in)
{
    tl_infeed_call *f = &est->infeed.call[mode];
    tl_infeed_close_datasets(est, mode);
    const tl_input_plan *p = est->infeed.plan[mode];
    TL_ASSERT(p != NULL);
    f->ds = tl_calloc((size_t)p->input_fn_calls, sizeof *f->ds);
    if (f->ds == NULL)
        return tl_error_oom();
    f->ncalls = p->input_fn_calls;
    for (int i = 0; i < p->input_fn_calls; i++) {
        tl_ds_source *s = &f->ds[i];
        s->in = in;
        s->emb = tl_emb_engine_config(est->opt.embedding);
        s->index = i;
        s->labels = mode != TL_MODE_PREDICT;
        s->D = est->D;
        if (!tl_est_local_call(est, &p->calls[i]))
            continue;
        tl_status st = call_input_fn(in, p, i, &s->ds);
        if (st != TL_OK) {
            tl_infeed_close_datasets(est, mode);
            return st;
        }
    }
    return TL_OK;
}

/* The positions are one JSON array of the datasets' tl_dataset_save texts,
 * joined and split as text: with a large shuffle buffer a text is megabytes,
 * and parsing it only to write it out again cost seconds. tl_dataset_restore
 * parses each element in full. Each host saves only its own invocations'
 * datasets (the others' are not open here): null stands for the others. */
tl_status tl_infeed_save_positions(tl_estimator *est, int64_t step, char **json)
{
    static const char null_text[] = "null";
    tl_infeed_call *f = &est->infeed.call[TL_MODE_TRAIN];
    *json = NULL;
    if (f->ds == NULL)
        return TL_OK;
    tl_feed *train = est->infeed.cur_mode == TL_MODE_TRAIN ? est->infeed.cur : est->infeed.outer;
    if (train != NULL)
        tl_feed_wait_produced(train, step);
    char **texts = tl_calloc((size_t)f->ncalls + 1, sizeof *texts);
    tl_status st = texts != NULL ? TL_OK : tl_error_oom();
    for (int i = 0; i < f->ncalls && st == TL_OK; i++)
        if (f->ds[i].ds != NULL)
            st = tl_dataset_save(f->ds[i].ds, &texts[i]);
    size_t total = 2 + (size_t)f->ncalls;
    for (int i = 0; i < f->ncalls && st == TL_OK; i++)
        total += texts[i] != NULL ? strlen(texts[i]) : sizeof null_text - 1;
    char *out = st == TL_OK ? tl_malloc(total + 1) : NULL;
    if (st == TL_OK && out == NULL)
        st = tl_error_oom();
    if (st == TL_OK) {
        char *p = out;
        *p++ = '[';
        for (int i = 0; i < f->ncalls; i++) {
            if (i > 0)
                *p++ = ',';
            const char *t = texts[i] != NULL ? texts[i] : null_text;
            size_t n = strlen(t);
            memcpy(p, t, n);
            p += n;
        }
        *p++ = ']';
        *p = '\0';
        *json = out;
    }
    for (int i = 0; texts != NULL && i < f->ncalls; i++)
        tl_free(texts[i]);
    tl_free(texts);
    return st;
}

static const char *skip_json_space(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Where the JSON value starting at p ends: past its closing bracket or
 * quote, or at the ',' or ']' after a bare scalar; NULL when the text
 * (which ends at end) ends first. It follows strings and bracket depth
 * only, as finding the element's extent needs no more. */
static const char *json_value_end(const char *p, const char *end)
{
    int depth = 0;
    for (; p < end; p++) {
        switch (*p) {
        case '\0':
            return NULL;
        case '"':
            for (p++;; p++) {
                while (p < end && *p != '"' && *p != '\\' && *p != '\0')
                    p++;
                if (p < end && *p == '"')
                    break;
                if (p >= end || *p == '\0' || ++p >= end || *p == '\0')
                    return NULL;
            }
            if (depth == 0)
                return p + 1;
            break;
        case '[':
        case '{':
            depth++;
            break;
        case ']':
        case '}':
            if (depth == 0)
                return p;
            if (--depth == 0)
                return p + 1;
            break;
        case ',':
            if (depth == 0)
                return p;
            break;
        default:
            break;
        }
    }
    return NULL;
}

/* Whether [p, p + len) is the JSON null, give or take trailing space. */
static bool is_null(const char *p, size_t len)
{
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\n' || p[len - 1] == '\r'))
        len--;
    return len == 4 && memcmp(p, "null", 4) == 0;
}

tl_status tl_infeed_split_positions(const char *text, size_t bytes, const char *what, tl_infeed_text **elems,
                                    int *count)
{
    *elems = NULL;
    *count = 0;
    const char *end = text + bytes, *p = skip_json_space(text, end), *bad = NULL;
    tl_infeed_text *v = NULL;
    int n = 0, cap = 0;
    if (p == end || *p != '[')
        bad = "it does not start with '['";
    else if ((p = skip_json_space(p + 1, end)) < end && *p != ']')
        for (;;) {
            const char *e = json_value_end(p, end);
            if (e == NULL || e == p) {
                bad = e == NULL ? "the text ends inside an element" : "an element is empty";
                break;
            }
            if (n == cap) {
                int ncap = cap ? 2 * cap : 16;
                tl_infeed_text *nv = n < INT32_MAX / 2 ? tl_realloc(v, (size_t)ncap * sizeof *nv) : NULL;
                if (nv == NULL) {
                    tl_free(v);
                    return tl_error_oom();
                }
                v = nv;
                cap = ncap;
            }
            v[n].p = is_null(p, (size_t)(e - p)) ? NULL : p;
            v[n++].len = (size_t)(e - p);
            p = skip_json_space(e, end);
            if (p < end && *p == ',') {
                p = skip_json_space(p + 1, end);
            } else if (p < end && *p == ']') {
                break;
            } else {
                bad = p == end ? "the text ends inside the array" : "elements are not separated by ','";
                break;
            }
        }
    else if (p == end)
        bad = "the text ends inside the array";
    if (bad == NULL && skip_json_space(p + 1, end) != end)
        bad = "text follows the array";
    if (bad != NULL) {
        tl_free(v);
        return tl_error(TL_EPARSE, "%s: input_datasets is not a JSON array: %s (at byte %zu)", what, bad,
                        (size_t)(p - text));
    }
    *elems = v;
    *count = n;
    return TL_OK;
}

tl_status tl_infeed_restore_positions(tl_estimator *est, const char *what, const tl_infeed_text *texts, int n)
{
    tl_infeed_call *f = &est->infeed.call[TL_MODE_TRAIN];
    /* Every check first, so that nothing moves unless every dataset can. */
    if (n != f->ncalls)
        return tl_error(TL_EINVAL, "%s holds the positions of %d input datasets; this input plan has %d invocations "
                                   "(the deployment or topology changed)", what, n, f->ncalls);
    for (int i = 0; i < n; i++)
        if (f->ds[i].ds != NULL && texts[i].p == NULL)
            return tl_error(TL_EINVAL, "%s holds no position for input dataset %d of %d (null), which this host "
                                       "reads", what, i, n);
    tl_status st = TL_OK;
    for (int i = 0; i < f->ncalls && st == TL_OK; i++) {
        if (f->ds[i].ds == NULL) /* another host's */
            continue;
        char *text = tl_strndup(texts[i].p, texts[i].len);
        st = text != NULL ? tl_dataset_restore(f->ds[i].ds, text) : tl_error_oom();
        tl_free(text);
        if (st != TL_OK)
            st = tl_error(st, "restoring input dataset %d: %s", i, tl_last_error());
    }
    return st;
}

/* ---- the feeds ----------------------------------------------------------- */

static tl_mode mode_of(tl_cmd_kind cmd)
{
    return cmd == CMD_TRAIN ? TL_MODE_TRAIN : cmd == CMD_EVAL ? TL_MODE_EVAL : TL_MODE_PREDICT;
}

tl_status tl_infeed_init(tl_estimator *est, int depth)
{
    tl_infeed *f = &est->infeed;
    f->depth = depth;
    bool traced[3] = {true, est->have_eval, est->have_predict};
    for (int m = 0; m < 3; m++) {
        if (!traced[m])
            continue;
        tl_status st = tl_input_plan_create(est->topo, &est->rc, (tl_mode)m, &f->plan[m]);
        if (st != TL_OK)
            return st;
        tl_feed_spec spec = {.topo = est->topo,
                             .plan = f->plan[m],
                             .frank = est->frank,
                             .labels = m != TL_MODE_PREDICT,
                             .ids = est->emb_width,
                             .depth = depth,
                             .predict = m == TL_MODE_PREDICT,
                             .may_end = m == TL_MODE_TRAIN || (m == TL_MODE_EVAL && !f->plan[m]->on_device),
                             .pad_short = m == TL_MODE_EVAL && !f->plan[m]->on_device,
                             .only_host = est->H > 1,
                             .host = est->host,
                             /* A replica of several cores: each its tile of the features, the labels whole. */
                             .fpart = est->C > 1 ? &est->fpart : NULL,
                             .lpart = est->C > 1 ? &est->lpart : NULL};
        memcpy(spec.fshape, est->fshape, sizeof spec.fshape);
        if ((st = tl_feed_create(&spec, &f->feed[m])) != TL_OK)
            return st;
    }
    for (int m = 0; m < 3; m++) {
        if (f->plan[m] == NULL)
            continue;
        int calls = f->plan[m]->input_fn_calls;
        f->call[m].sources = tl_calloc((size_t)calls, sizeof *f->call[m].sources);
        f->call[m].mem = tl_calloc((size_t)calls, sizeof *f->call[m].mem);
        if (f->call[m].sources == NULL || f->call[m].mem == NULL)
            return tl_error_oom();
    }
    return TL_OK;
}

tl_status tl_infeed_start(tl_estimator *est, tl_cmd_kind cmd, const tl_labeled_data *data, int64_t first,
                          int64_t count)
{
    tl_infeed *f = &est->infeed;
    tl_mode mode = mode_of(cmd);
    const tl_input_plan *p = f->plan[mode];
    tl_infeed_call *c = &f->call[mode];
    /* Only an evaluation interrupts a running (training) feed. */
    TL_ASSERT(p != NULL && (f->cur == NULL || (f->outer == NULL && mode == TL_MODE_EVAL && f->cur_mode != mode)));
    for (int i = 0; i < p->input_fn_calls; i++) {
        if (c->ds != NULL) {
            c->sources[i] = (tl_feed_source){ds_next, &c->ds[i], false};
        } else {
            c->mem[i] = (tl_mem_source){est, data, cmd, p->global_batch_size};
            c->sources[i] = (tl_feed_source){mem_next, &c->mem[i], true};
        }
    }
    /* A dataset's position is only known where the feed stands: training
     * holds it at each loop's end so a checkpoint there is exact. The
     * in-memory order is a function of the step, so it runs ahead freely. */
    c->hold = cmd == CMD_TRAIN && c->ds != NULL;
    int64_t secs = est->rc.tpu.initial_infeed_sleep_secs;
    f->sleep_ns = secs <= 0 ? 0 : secs >= INT64_MAX / 1000000000 ? INT64_MAX : secs * 1000000000;
    tl_feed_set_sleep(f->feed[mode], f->cur == NULL ? f->sleep_ns : 0);
    tl_status st = tl_feed_start(f->feed[mode], c->sources, first, count, c->hold ? first : INT64_MAX);
    if (st != TL_OK)
        return st;
    if (f->cur != NULL) {
        f->outer = f->cur;
        f->outer_mode = f->cur_mode;
        f->outer_first = f->first;
    }
    f->cur = f->feed[mode];
    f->cur_mode = mode;
    f->first = first;
    return TL_OK;
}

void tl_infeed_allow(tl_estimator *est, int64_t limit)
{
    tl_infeed *f = &est->infeed;
    if (f->cur != NULL && f->call[f->cur_mode].hold)
        tl_feed_allow(f->cur, limit);
}

tl_status tl_infeed_stop(tl_estimator *est)
{
    tl_infeed *f = &est->infeed;
    if (f->cur == NULL)
        return TL_OK;
    tl_status st = tl_feed_stop(f->cur);
    f->cur = f->outer;
    f->cur_mode = f->outer_mode;
    f->first = f->outer_first;
    f->outer = NULL;
    return st;
}

tl_status tl_infeed_failed(tl_estimator *est)
{
    const char *msg;
    tl_status st = est->infeed.cur != NULL ? tl_feed_error(est->infeed.cur, &msg) : TL_OK;
    return st == TL_OK ? TL_OK : tl_error(st, "%s", msg);
}

void tl_infeed_abort(tl_estimator *est)
{
    /* The feed runs from tl_infeed_start to tl_infeed_stop, which the host
     * calls only after every worker is past the loop. */
    if (est->infeed.cur != NULL)
        tl_feed_abort(est->infeed.cur);
}

void tl_infeed_free(tl_estimator *est)
{
    tl_infeed *f = &est->infeed;
    while (f->cur != NULL)
        (void)tl_infeed_stop(est);
    for (int m = 0; m < 3; m++) {
        tl_infeed_close_datasets(est, (tl_mode)m);
        tl_feed_destroy(f->feed[m]);
        tl_input_plan_destroy(f->plan[m]);
        tl_free(f->call[m].sources);
        tl_free(f->call[m].mem);
        f->feed[m] = NULL;
        f->plan[m] = NULL;
    }
}

tl_status tl_infeed_pop(tl_estimator *est, int rank, int64_t step, tl_team *team, tl_feed_batch **out,
                        int64_t *waited_ns)
{
    return tl_feed_pop(est->infeed.cur, rank, 0, step, team, out, waited_ns);
}

void tl_infeed_release(tl_estimator *est, int rank, tl_feed_batch *b)
{
    tl_feed_release(est->infeed.cur, rank, 0, b);
}

tl_status tl_infeed_pop_core(tl_estimator *est, int replica, int core, int64_t step, tl_team *team,
                             tl_feed_batch **out, int64_t *waited_ns)
{
    return tl_feed_pop(est->infeed.cur, replica, core, step, team, out, waited_ns);
}

void tl_infeed_release_core(tl_estimator *est, int replica, int core, tl_feed_batch *b)
{
    tl_feed_release(est->infeed.cur, replica, core, b);
}

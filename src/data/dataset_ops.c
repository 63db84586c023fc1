/* dataset_ops.c — the transforms that only move elements around: shard,
 * take, skip, repeat and shuffle. */
#include <string.h>

#include "dataset_int.h"
#include "tpuloop/rng.h"

/* The RNG stream of shuffle ("shuf"), apart from every other op's. */
#define SHUFFLE_OP 0x73687566u

/* ---- shard, take, skip: a count and a limit ------------------------------------ */

typedef enum { K_SHARD, K_TAKE, K_SKIP } count_kind;

typedef struct count_impl {
    count_kind kind;
    int64_t n, index; /* shard: num_shards, index; take/skip: n */
    int64_t seen;     /* input elements consumed (shard, skip) or output (take) */
} count_impl;

static tl_status count_next(tl_dataset *ds, ds_elem **out)
{
    count_impl *c = ds->impl;
    for (;;) {
        if (c->kind == K_TAKE && c->n >= 0 && c->seen >= c->n)
            return TL_OK;
        ds_elem *e;
        tl_status st = ds_pull(ds->input, &e);
        if (st != TL_OK || e == NULL)
            return st;
        int64_t k = c->seen++;
        bool keep = c->kind == K_TAKE || (c->kind == K_SHARD && k % c->n == c->index) ||
                    (c->kind == K_SKIP && c->n >= 0 && k >= c->n);
        if (c->kind == K_SKIP && c->seen > c->n && c->n >= 0)
            c->seen = c->n; /* saturate: only "done skipping" matters */
        if (keep) {
            *out = e;
            return TL_OK;
        }
        ds_elem_free(e);
    }
}

static tl_status count_reset(tl_dataset *ds, uint64_t epoch_key)
{
    ((count_impl *)ds->impl)->seen = 0;
    return ds_reset(ds->input, epoch_key);
}

static tl_status count_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    (void)sv;
    return json_object_set_new(obj, "seen", json_integer(((count_impl *)ds->impl)->seen)) == 0 ? TL_OK
                                                                                              : tl_error_oom();
}

static tl_status count_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    (void)ld;
    int64_t seen;
    tl_status st = ds_json_int(obj, "seen", "restore: shard/take/skip", &seen);
    if (st == TL_OK && seen < 0)
        st = tl_error(TL_EINVAL, "restore: shard/take/skip: negative count %lld", (long long)seen);
    if (st == TL_OK)
        ((count_impl *)ds->impl)->seen = seen;
    return st;
}

static void plain_destroy(tl_dataset *ds)
{
    tl_free(ds->impl);
}

static const ds_ops count_ops = {"count", count_next, count_reset, count_save, count_restore, NULL, NULL,
                                 plain_destroy};

static tl_status count_make(tl_dataset *in, count_kind kind, int64_t n, int64_t index, tl_dataset **out,
                            tl_status st, char *desc)
{
    if (out == NULL) {
        tl_free(desc);
        tl_dataset_destroy(in);
        return tl_error(TL_EINVAL, "dataset transform: out is NULL");
    }
    if (st == TL_OK && in == NULL)
        st = tl_error(TL_EINVAL, "dataset transform: the input dataset is NULL");
    count_impl *c = NULL;
    if (st == TL_OK) {
        c = tl_calloc(1, sizeof *c);
        if (c == NULL || desc == NULL)
            st = tl_error_oom();
        else
            *c = (count_impl){kind, n, index, 0};
    }
    st = ds_finish(st, &count_ops, c, desc, in, out);
    if (st != TL_OK)
        tl_free(c);
    return st;
}

tl_status tl_dataset_shard(tl_dataset *in, int64_t num_shards, int64_t index, tl_dataset **out)
{
    tl_status st = TL_OK;
    if (num_shards < 1)
        st = tl_error(TL_EINVAL, "shard: num_shards must be >= 1 (got %lld)", (long long)num_shards);
    else if (index < 0 || index >= num_shards)
        st = tl_error(TL_EINVAL, "shard: index must be in [0, num_shards) = [0, %lld) (got %lld)",
                      (long long)num_shards, (long long)index);
    char *desc = st == TL_OK ? tl_asprintf("shard(num_shards=%lld, index=%lld)", (long long)num_shards,
                                           (long long)index)
                             : NULL;
    return count_make(in, K_SHARD, num_shards, index, out, st, desc);
}

tl_status tl_dataset_take(tl_dataset *in, int64_t n, tl_dataset **out)
{
    tl_status st = n < -1 ? tl_error(TL_EINVAL, "take: count must be >= -1 (-1: all) (got %lld)", (long long)n)
                          : TL_OK;
    char *desc = st == TL_OK ? tl_asprintf("take(count=%lld)", (long long)n) : NULL;
    return count_make(in, K_TAKE, n, 0, out, st, desc);
}

tl_status tl_dataset_skip(tl_dataset *in, int64_t n, tl_dataset **out)
{
    tl_status st = n < -1 ? tl_error(TL_EINVAL, "skip: count must be >= -1 (-1: all) (got %lld)", (long long)n)
                          : TL_OK;
    char *desc = st == TL_OK ? tl_asprintf("skip(count=%lld)", (long long)n) : NULL;
    return count_make(in, K_SKIP, n, 0, out, st, desc);
}

/* ---- repeat -------------------------------------------------------------------- */

typedef struct repeat_impl {
    int64_t count;      /* -1: for ever */
    uint64_t key;       /* this node's own pass, from a repeat above (0 at the top) */
    int64_t epoch;      /* the pass of the input being read */
    bool got_any;       /* this epoch yielded an element */
    bool done;
} repeat_impl;

/* The key of epoch e of a repeat whose own pass is key: distinct for
 * distinct (key, e), and 0 for neither, so a shuffle reads its seed's first
 * order only outside any repeat. */
static uint64_t epoch_key(uint64_t key, int64_t e)
{
    uint64_t x = key * 0x100000001b3ull + (uint64_t)e + 1;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 29);
}

/* The next element of the passes (*out), or over random access its
 * position (*index, -1 at the end; out NULL). */
static tl_status repeat_step(tl_dataset *ds, ds_elem **out, int64_t *index)
{
    repeat_impl *r = ds->impl;
    if (index != NULL)
        *index = -1;
    while (!r->done && (r->count < 0 || r->epoch < r->count)) {
        tl_status st = index != NULL ? ds->input->access->claim(ds->input, index) : ds_pull(ds->input, out);
        if (st != TL_OK)
            return st;
        if (index != NULL ? *index >= 0 : *out != NULL) {
            r->got_any = true;
            return TL_OK;
        }
        if (!r->got_any) {
            r->done = true; /* an empty pass: the next would be empty too */
            break;
        }
        r->epoch++;
        r->got_any = false;
        if (r->count >= 0 && r->epoch >= r->count)
            break;
        if ((st = ds_reset(ds->input, epoch_key(r->key, r->epoch))) != TL_OK)
            return st;
    }
    return TL_OK;
}

static tl_status repeat_next(tl_dataset *ds, ds_elem **out)
{
    return repeat_step(ds, out, NULL);
}

static tl_status repeat_claim(tl_dataset *ds, int64_t *index)
{
    return repeat_step(ds, NULL, index);
}

static const ds_access repeat_access = {repeat_claim, NULL, NULL};

static tl_status repeat_reset(tl_dataset *ds, uint64_t key)
{
    repeat_impl *r = ds->impl;
    r->key = key;
    r->epoch = 0;
    r->got_any = false;
    r->done = false;
    return ds_reset(ds->input, epoch_key(key, 0));
}

static tl_status repeat_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    (void)sv;
    repeat_impl *r = ds->impl;
    bool ok = json_object_set_new(obj, "epoch", json_integer(r->epoch)) == 0 &&
              json_object_set_new(obj, "key", ds_json_u64_new(r->key)) == 0 &&
              json_object_set_new(obj, "got_any", json_boolean(r->got_any)) == 0 &&
              json_object_set_new(obj, "done", json_boolean(r->done)) == 0;
    return ok ? TL_OK : tl_error_oom();
}

static tl_status repeat_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    (void)ld;
    repeat_impl *r = ds->impl;
    tl_status st = ds_json_int(obj, "epoch", "restore: repeat", &r->epoch);
    if (st == TL_OK)
        st = ds_json_u64(obj, "key", "restore: repeat", &r->key);
    if (st == TL_OK)
        st = ds_json_bool(obj, "got_any", "restore: repeat", &r->got_any);
    if (st == TL_OK)
        st = ds_json_bool(obj, "done", "restore: repeat", &r->done);
    return st;
}

static const ds_ops repeat_ops = {"repeat", repeat_next, repeat_reset, repeat_save, repeat_restore, NULL, NULL,
                                  plain_destroy};

tl_status tl_dataset_repeat(tl_dataset *in, int64_t count, tl_dataset **out)
{
    if (out == NULL) {
        tl_dataset_destroy(in);
        return tl_error(TL_EINVAL, "repeat: out is NULL");
    }
    tl_status st = TL_OK;
    if (in == NULL)
        st = tl_error(TL_EINVAL, "repeat: the input dataset is NULL");
    else if (count < -1)
        st = tl_error(TL_EINVAL, "repeat: count must be >= -1 (-1: for ever) (got %lld)", (long long)count);
    repeat_impl *r = NULL;
    char *desc = NULL;
    if (st == TL_OK) {
        r = tl_calloc(1, sizeof *r);
        desc = tl_asprintf("repeat(count=%lld)", (long long)count);
        if (r == NULL || desc == NULL)
            st = tl_error_oom();
        else
            r->count = count;
    }
    /* The input's first pass is epoch 0 of this repeat. */
    if (st == TL_OK)
        st = ds_reset(in, epoch_key(0, 0));
    const ds_access *access = in != NULL ? in->access : NULL;
    tl_dataset *rows = in != NULL ? in->rows : NULL;
    st = ds_finish(st, &repeat_ops, r, desc, in, out);
    if (st != TL_OK) {
        tl_free(r);
        return st;
    }
    if (access != NULL) {
        (*out)->access = &repeat_access;
        (*out)->rows = rows;
    }
    return TL_OK;
}

/* ---- shuffle --------------------------------------------------------------------- */

typedef struct shuffle_impl {
    int64_t size;          /* buffer_size */
    uint64_t seed;
    bool reshuffle;
    uint64_t key;          /* the epoch key from the repeat above */
    /* Slot i holds an element (buf[i]), or, over an input with random
     * access (ds_access), the index of one (idx[i] >= 0, buf[i] NULL), made
     * only when it is output: the same elements in the same order. */
    ds_elem **buf;         /* (size) */
    int64_t *idx;          /* (size) -1: no index; NULL without random access */
    int64_t count;         /* slots in use */
    int64_t hole;          /* the slot the last output left, to refill first; -1 none */
    bool input_done;
    uint64_t draws;        /* random indices drawn in this epoch */
} shuffle_impl;

static void shuffle_clear(shuffle_impl *s)
{
    for (int64_t i = 0; i < s->count; i++) {
        ds_elem_free(s->buf[i]);
        s->buf[i] = NULL;
        if (s->idx != NULL)
            s->idx[i] = -1;
    }
    s->count = 0;
    s->hole = -1;
    s->input_done = false;
    s->draws = 0;
}

/* Draw number k of the epoch: a pure function of (seed, epoch, k), so a
 * restored shuffle draws exactly what the saved one would have. */
static int64_t shuffle_pick(shuffle_impl *s)
{
    tl_rng r;
    tl_rng_init(&r, s->seed, SHUFFLE_OP, s->reshuffle ? s->key : 0, 0);
    tl_rng_seek(&r, 2 * s->draws++);
    uint64_t hi = tl_rng_u32(&r), lo = tl_rng_u32(&r);
    return (int64_t)(((hi << 32) | lo) % (uint64_t)s->count);
}

/* The next input element into slot i: an element, or its index over
 * random access; *got false at the end of the input. */
static tl_status shuffle_take(tl_dataset *ds, int64_t i, bool *got)
{
    shuffle_impl *s = ds->impl;
    if (s->idx != NULL) {
        int64_t j;
        tl_status st = ds->input->access->claim(ds->input, &j);
        *got = st == TL_OK && j >= 0;
        if (*got)
            s->idx[i] = j;
        return st;
    }
    ds_elem *e = NULL;
    tl_status st = ds_pull(ds->input, &e);
    *got = e != NULL;
    if (*got)
        s->buf[i] = e;
    return st;
}

/* The buffer holds count elements in slots [0, count); the slot the last
 * output left (hole) is empty until the next call refills it with the next
 * input element, or, at the end of the input, with the last slot's. Picks
 * the slot to output into *slot (-1 at the end), which becomes the hole. */
static tl_status shuffle_advance(tl_dataset *ds, int64_t *slot)
{
    shuffle_impl *s = ds->impl;
    tl_status st;
    *slot = -1;
    if (s->hole >= 0) {
        bool got = false;
        if (!s->input_done) {
            if ((st = shuffle_take(ds, s->hole, &got)) != TL_OK)
                return st;
            s->input_done = !got;
        }
        if (!got) {
            s->count--;
            s->buf[s->hole] = s->buf[s->count];
            s->buf[s->count] = NULL;
            if (s->idx != NULL) {
                s->idx[s->hole] = s->idx[s->count];
                s->idx[s->count] = -1;
            }
        }
        s->hole = -1;
    }
    while (!s->input_done && s->count < s->size) {
        bool got;
        if ((st = shuffle_take(ds, s->count, &got)) != TL_OK)
            return st;
        if (got)
            s->count++;
        else
            s->input_done = true;
    }
    if (s->count == 0)
        return TL_OK;
    *slot = s->hole = shuffle_pick(s);
    return TL_OK;
}

/* Over random access: the position of the next element (-1 at the end); the
 * buffer holds positions only (shuffle_restore makes saved elements
 * positions). */
static tl_status shuffle_claim(tl_dataset *ds, int64_t *index)
{
    shuffle_impl *s = ds->impl;
    int64_t i;
    tl_status st = shuffle_advance(ds, &i);
    *index = st == TL_OK && i >= 0 ? s->idx[i] : -1;
    if (i >= 0)
        s->idx[i] = -1;
    return st;
}

static tl_status shuffle_next(tl_dataset *ds, ds_elem **out)
{
    shuffle_impl *s = ds->impl;
    if (s->idx != NULL) { /* the element is made now, from its position */
        int64_t j;
        tl_status st = shuffle_claim(ds, &j);
        return st != TL_OK || j < 0 ? st : ds->rows->access->fetch(ds->rows, j, out);
    }
    int64_t i;
    tl_status st = shuffle_advance(ds, &i);
    if (st == TL_OK && i >= 0) {
        *out = s->buf[i];
        s->buf[i] = NULL;
    }
    return st;
}

static const ds_access shuffle_access = {shuffle_claim, NULL, NULL};

static tl_status shuffle_reset(tl_dataset *ds, uint64_t key)
{
    shuffle_impl *s = ds->impl;
    shuffle_clear(s);
    s->key = key;
    return ds_reset(ds->input, key);
}

static tl_status shuffle_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    shuffle_impl *s = ds->impl;
    bool ok = json_object_set_new(obj, "key", ds_json_u64_new(s->key)) == 0 &&
              json_object_set_new(obj, "draws", ds_json_u64_new(s->draws)) == 0 &&
              json_object_set_new(obj, "hole", json_integer(s->hole)) == 0 &&
              json_object_set_new(obj, "input_done", json_boolean(s->input_done)) == 0;
    /* Slots held as indices are saved as them, under "indices" (-1 where a
     * slot holds an element or is the hole), and empty in "buffer". */
    json_t *ix = s->idx != NULL ? json_array() : NULL;
    for (int64_t i = 0; ok && ix != NULL && i < s->count; i++)
        ok = json_array_append_new(ix, json_integer(s->idx[i])) == 0;
    if (ix != NULL && ok)
        ok = json_object_set(obj, "indices", ix) == 0;
    json_decref(ix);
    if (!ok || (s->idx != NULL && ix == NULL))
        return tl_error_oom();
    /* The hole's slot is saved empty, so the indices stay those the RNG
     * draws refer to. */
    ds_save_slots_begin(sv);
    for (int64_t i = 0; i < s->count; i++)
        ds_save_slot(sv, s->buf[i]);
    return ds_save_slots_end(sv, obj, "buffer");
}

/* The "indices" of a saved shuffle (none in states of a shuffle without
 * random access, or of tpuloop before it): -1 or a position each. */
static tl_status shuffle_restore_indices(const shuffle_impl *s, const tl_dataset *ds, json_t *obj, int64_t n)
{
    json_t *ix = json_object_get(obj, "indices");
    if (ix == NULL)
        return TL_OK;
    if (s->idx == NULL || ds->input->access == NULL)
        return tl_error(TL_EINVAL, "restore: shuffle: the saved buffer holds positions of a source in memory; this "
                                   "input has none");
    if (!json_is_array(ix) || (int64_t)json_array_size(ix) != n)
        return tl_error(TL_EINVAL, "restore: shuffle: \"indices\" must be an array of %lld integers", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        json_t *v = json_array_get(ix, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < -1)
            return tl_error(TL_EINVAL, "restore: shuffle: indices[%lld] must be an integer >= -1", (long long)i);
        s->idx[i] = json_integer_value(v);
    }
    return TL_OK;
}

static tl_status shuffle_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    shuffle_impl *s = ds->impl;
    shuffle_clear(s);
    int64_t hole;
    tl_status st = ds_json_u64(obj, "key", "restore: shuffle", &s->key);
    if (st == TL_OK)
        st = ds_json_u64(obj, "draws", "restore: shuffle", &s->draws);
    if (st == TL_OK)
        st = ds_json_int(obj, "hole", "restore: shuffle", &hole);
    if (st == TL_OK)
        st = ds_json_bool(obj, "input_done", "restore: shuffle", &s->input_done);
    ds_elem **slots = NULL;
    int64_t n = 0;
    if (st == TL_OK)
        st = ds_load_slots(ld, obj, "buffer", "restore: shuffle", s->size, &slots, &n);
    if (st == TL_OK)
        st = shuffle_restore_indices(s, ds, obj, n);
    /* Every slot holds an element or an index but the hole, which holds neither. */
    for (int64_t i = 0; i < n && st == TL_OK; i++) {
        bool index = s->idx != NULL && s->idx[i] >= 0, elem = slots[i] != NULL;
        if (index && elem)
            st = tl_error(TL_EINVAL, "restore: shuffle: saved slot %lld holds both an element and index %lld",
                          (long long)i, (long long)s->idx[i]);
        else if ((index || elem) == (i == hole))
            st = tl_error(TL_EINVAL, "restore: shuffle: saved slot %lld is %s, but the hole is %lld", (long long)i,
                          index || elem ? "in use" : "empty", (long long)hole);
    }
    if (st == TL_OK && (hole < -1 || hole >= n))
        st = tl_error(TL_EINVAL, "restore: shuffle: the hole is slot %lld of a saved buffer of %lld (allowed: -1 "
                                 "none, or a slot)",
                      (long long)hole, (long long)n);
    if (st != TL_OK) {
        ds_slots_free(slots, n);
        for (int64_t i = 0; s->idx != NULL && i < s->size; i++)
            s->idx[i] = -1;
        return st;
    }
    /* Over random access the buffer holds positions only: a saved element
     * (tpuloop before random access wrote them) is its source position,
     * which such a source records in each element. */
    for (int64_t i = 0; i < n; i++) {
        if (s->idx != NULL && slots[i] != NULL) {
            s->idx[i] = slots[i]->record;
            ds_elem_free(slots[i]);
        } else {
            s->buf[i] = slots[i];
        }
    }
    tl_free(slots);
    s->count = n;
    s->hole = hole;
    return TL_OK;
}

static void shuffle_destroy(tl_dataset *ds)
{
    shuffle_impl *s = ds->impl;
    if (s == NULL)
        return;
    if (s->buf != NULL)
        shuffle_clear(s);
    tl_free(s->buf);
    tl_free(s->idx);
    tl_free(s);
}

static const ds_ops shuffle_ops = {"shuffle", shuffle_next, shuffle_reset, shuffle_save, shuffle_restore, NULL,
                                   NULL, shuffle_destroy};

#define MAX_SHUFFLE_BUFFER ((int64_t)1 << 30)

tl_status tl_dataset_shuffle(tl_dataset *in, int64_t buffer_size, uint64_t seed, bool reshuffle_each_iteration,
                             tl_dataset **out)
{
    if (out == NULL) {
        tl_dataset_destroy(in);
        return tl_error(TL_EINVAL, "shuffle: out is NULL");
    }
    tl_status st = TL_OK;
    if (in == NULL)
        st = tl_error(TL_EINVAL, "shuffle: the input dataset is NULL");
    else if (buffer_size < 1 || buffer_size > MAX_SHUFFLE_BUFFER)
        st = tl_error(TL_EINVAL, "shuffle: buffer_size must be in 1..%lld (got %lld)", (long long)MAX_SHUFFLE_BUFFER,
                      (long long)buffer_size);
    shuffle_impl *s = NULL;
    char *desc = NULL;
    if (st == TL_OK) {
        s = tl_calloc(1, sizeof *s);
        desc = tl_asprintf("shuffle(buffer_size=%lld, seed=%llu, reshuffle_each_iteration=%s)",
                           (long long)buffer_size, (unsigned long long)seed,
                           reshuffle_each_iteration ? "true" : "false");
        if (s != NULL) {
            s->size = buffer_size;
            s->seed = seed;
            s->reshuffle = reshuffle_each_iteration;
            s->hole = -1;
            /* Grown as elements arrive would save little: the buffer fills
             * before the first output. */
            s->buf = tl_calloc((size_t)buffer_size, sizeof *s->buf);
            if (in->access != NULL && (s->idx = tl_malloc((size_t)buffer_size * sizeof *s->idx)) != NULL)
                for (int64_t i = 0; i < buffer_size; i++)
                    s->idx[i] = -1;
        }
        if (s == NULL || s->buf == NULL || desc == NULL || (in->access != NULL && s->idx == NULL))
            st = tl_error_oom();
    }
    const ds_access *access = in != NULL ? in->access : NULL;
    tl_dataset *rows = in != NULL ? in->rows : NULL;
    st = ds_finish(st, &shuffle_ops, s, desc, in, out);
    if (st != TL_OK) {
        shuffle_destroy(&(tl_dataset){.impl = s});
        return st;
    }
    if (access != NULL) {
        (*out)->access = &shuffle_access;
        (*out)->rows = rows;
    }
    return TL_OK;
}

/* dataset_parse.c — the parse step: tf.Example / SequenceExample records
 * into tensors by a feature spec, on the consumer's thread or on
 * num_parallel_calls worker threads whose results leave in input order.
 *
 * The parallel form: a worker claims a run of up to RUN sequence numbers and
 * pulls their records under pull_mu, so that number s is always the s-th
 * record; it parses them outside every lock and leaves the results in ring
 * slots s % W with one wake-up for the run; the consumer takes slot
 * `consumed` when it is done. Workers run at most W records ahead of the
 * consumer and claim only when a whole run fits, so that hand-offs cost one
 * lock and one wake-up per run, not per record. The elements, and so the
 * bits, are those of the serial form whatever the timing. */
#include <stdio.h>
#include <string.h>

#include "../base/thread.h"
#include "dataset_int.h"

#define MAX_PARALLEL 64
#define RUN 16 /* records a worker claims at once */

typedef enum { SLOT_EMPTY = 0, SLOT_DONE } slot_state;

typedef struct pslot {
    slot_state state;
    ds_elem *raw;   /* the input element, kept until consumed (a save writes it) */
    ds_elem *res;   /* the parsed element; NULL when skipped or failed */
    bool end;       /* the input ended here */
    tl_status st;   /* a failure, with its message */
    char *msg;
} pslot;

typedef struct parse_impl {
    tl_feature_spec *specs;    /* (n) copies: keys interned, defaults owned */
    void **defaults;           /* (n) the copies' default values, freed at destroy */
    int n;
    const char *record_key;    /* interned */
    bool sequence, skip;
    int threads;

    /* the parallel form */
    pthread_mutex_t mu, pull_mu;
    pthread_cond_t done_cv;    /* a run was published or a worker went idle: the consumer waits */
    pthread_cond_t space_cv;   /* ring space, resume or stop: workers wait */
    int sync_ok;               /* how many of mu, pull_mu, done_cv, space_cv were made */
    int idle;                  /* workers waiting on space_cv */
    tl_thread *th;             /* (threads) */
    bool started, stop, paused;
    int active;                /* workers between taking a number and leaving a result */
    pslot *ring;               /* (W) */
    int64_t W, next_seq, consumed;
    bool input_ended;
    tl_status fail_st;         /* a failed pull: every later call repeats it */
    char *fail_msg;
    ds_elem **replay;          /* (n_replay) restored records to parse before the ring */
    int64_t n_replay, replay_pos;
} parse_impl;

/* ---- one record -------------------------------------------------------------- */

static tl_data_type dtype_of(tl_feature_kind k)
{
    return k == TL_FEATURE_FLOAT ? TL_DT_FLOAT32 : k == TL_FEATURE_INT64 ? TL_DT_INT64 : TL_DT_BYTES;
}

/* Moves parsed feature f into tensor t (its arrays are taken; bytes copied). */
static tl_status take_feature(const tl_feature_spec *spec, tl_parsed_feature *f, tl_tensor *t)
{
    tl_status st;
    int rank = f->rank < TL_TENSOR_MAX_RANK ? f->rank : TL_TENSOR_MAX_RANK;
    if (f->rank > TL_TENSOR_MAX_RANK)
        return tl_error(TL_EINVAL, "parse: \"%s\" has rank %d; tensors have at most %d", spec->key, f->rank,
                        TL_TENSOR_MAX_RANK);
    if (f->dtype == TL_FEATURE_BYTES) {
        st = ds_tensor_set_bytes(t, spec->key, rank, f->shape, f->bytes, (int64_t)f->count);
    } else {
        memset(t, 0, sizeof *t);
        t->key = spec->key;
        t->dtype = dtype_of(f->dtype);
        t->rank = rank;
        memcpy(t->shape, f->shape, (size_t)rank * sizeof t->shape[0]);
        void **arr = f->dtype == TL_FEATURE_FLOAT ? (void **)&f->floats : (void **)&f->int64s;
        t->data = *arr;
        *arr = NULL;
        if (t->data == NULL && (t->data = tl_malloc(1)) == NULL)
            return tl_error_oom();
        st = TL_OK;
    }
    if (st != TL_OK)
        return st;
    if (spec->type == TL_SPEC_VAR_LEN || spec->type == TL_SPEC_VAR_LEN_SEQUENCE) {
        t->ragged = true;
        t->num_values = (int64_t)f->count;
        t->num_rows = (int64_t)f->num_rows;
        t->row_lengths = f->row_lengths;
        f->row_lengths = NULL;
        if (t->row_lengths == NULL && (t->row_lengths = tl_calloc(1, sizeof *t->row_lengths)) == NULL)
            return tl_error_oom();
    }
    return TL_OK;
}

/* Parses raw into *out. With skip_corrupt_records a bad record is logged,
 * counted and gives *out NULL with TL_OK. */
static tl_status parse_one(tl_dataset *ds, parse_impl *p, const ds_elem *raw, ds_elem **out)
{
    *out = NULL;
    char where[600];
    ds_where(where, sizeof where, raw);
    const tl_tensor *rec = tl_element_find(&raw->pub, p->record_key);
    if (rec == NULL || rec->dtype != TL_DT_BYTES || rec->rank != 0 || rec->ragged)
        return tl_error(TL_EINVAL, "parse: %s has no bytes scalar \"%s\" to parse", where, p->record_key);
    const tl_bytes *b = rec->data;
    uint64_t index = raw->record >= 0 ? (uint64_t)raw->record : 0;
    tl_example *ex = NULL;
    tl_parsed_feature *f = tl_calloc((size_t)p->n, sizeof *f);
    ds_elem *e = NULL;
    if (f == NULL)
        return tl_error_oom();
    tl_status st = p->sequence ? tl_sequence_example_parse(b->data, b->len, index, &ex)
                               : tl_example_parse(b->data, b->len, index, &ex);
    if (st == TL_OK)
        st = tl_example_parse_features(ex, p->specs, (size_t)p->n, f);
    if (st == TL_OK) {
        e = ds_elem_new(p->n);
        if (e == NULL)
            st = tl_error_oom();
        for (int i = 0; st == TL_OK && i < p->n; i++)
            st = take_feature(&p->specs[i], &f[i], &e->pub.tensors[i]);
    }
    tl_parsed_features_free(f, (size_t)p->n);
    tl_free(f);
    tl_example_destroy(ex);
    if (st == TL_OK) {
        e->file = raw->file;
        e->record = raw->record;
        e->offset = raw->offset;
        *out = e;
        return TL_OK;
    }
    ds_elem_free(e);
    if (st == TL_ENOMEM || !p->skip)
        return tl_error(st, "%s: %s", where, tl_last_error());
    tl_log(TL_LOG_WARN, "skip_corrupt_records: %s: %s; skipping the record", where, tl_last_error());
    ds_count_skip(ds->ctx);
    return TL_OK;
}

/* ---- the parallel form ---------------------------------------------------------- */

static void slot_clear(pslot *s)
{
    ds_elem_free(s->raw);
    ds_elem_free(s->res);
    tl_free(s->msg);
    memset(s, 0, sizeof *s);
}

/* Ring space for a whole run, so that a worker never claims a sliver. */
static bool run_fits(const parse_impl *p)
{
    return p->W - (p->next_seq - p->consumed) >= RUN;
}

static void *worker(void *arg)
{
    tl_dataset *ds = arg;
    parse_impl *p = ds->impl;
    ds_elem *raw[RUN], *res[RUN];
    tl_status st[RUN];
    char *msg[RUN];
    for (;;) {
        pthread_mutex_lock(&p->pull_mu);
        pthread_mutex_lock(&p->mu);
        while (!p->stop && (p->paused || p->input_ended || !run_fits(p))) {
            p->idle++;
            pthread_cond_wait(&p->space_cv, &p->mu);
            p->idle--;
        }
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            pthread_mutex_unlock(&p->pull_mu);
            break;
        }
        int64_t s0 = p->next_seq;
        p->next_seq += RUN;
        p->active++;
        pthread_mutex_unlock(&p->mu);

        int k = 0; /* records pulled; the last may end the input (NULL or a failure) */
        bool ended = false;
        while (k < RUN && !ended) {
            raw[k] = res[k] = NULL;
            st[k] = ds_pull(ds->input, &raw[k]);
            msg[k] = st[k] != TL_OK ? tl_strdup(tl_last_error()) : NULL;
            ended = st[k] != TL_OK || raw[k] == NULL;
            k++;
        }
        if (ended) {
            pthread_mutex_lock(&p->mu);
            p->input_ended = true;
            pthread_mutex_unlock(&p->mu);
        }
        pthread_mutex_unlock(&p->pull_mu);

        for (int i = 0; i < k; i++)
            if (st[i] == TL_OK && raw[i] != NULL && (st[i] = parse_one(ds, p, raw[i], &res[i])) != TL_OK)
                msg[i] = tl_strdup(tl_last_error());
        pthread_mutex_lock(&p->mu);
        for (int i = 0; i < RUN; i++) {
            pslot *slot = &p->ring[(s0 + i) % p->W];
            if (i < k)
                *slot = (pslot){SLOT_DONE, raw[i], res[i], st[i] == TL_OK && raw[i] == NULL, st[i], msg[i]};
            else /* numbers claimed past the end */
                *slot = (pslot){.state = SLOT_DONE, .end = true};
        }
        p->active--;
        pthread_cond_broadcast(&p->done_cv);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

static void workers_stop(parse_impl *p)
{
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->space_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->threads; i++)
        if (p->th[i].started)
            tl_thread_join(&p->th[i], NULL);
    p->started = false;
    p->stop = false;
}

static tl_status workers_start(tl_dataset *ds, parse_impl *p)
{
    for (int i = 0; i < p->threads; i++) {
        tl_status st = tl_thread_start(&p->th[i], worker, ds);
        if (st != TL_OK) {
            p->started = true;
            workers_stop(p);
            return st;
        }
    }
    p->started = true;
    return TL_OK;
}

static tl_status parallel_next(tl_dataset *ds, parse_impl *p, ds_elem **out)
{
    if (!p->started) {
        tl_status st = workers_start(ds, p);
        if (st != TL_OK)
            return st;
    }
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->consumed == p->next_seq && p->input_ended) {
            tl_status st = p->fail_st;
            pthread_mutex_unlock(&p->mu);
            return st != TL_OK ? tl_error(st, "%s", p->fail_msg != NULL ? p->fail_msg : "out of memory") : TL_OK;
        }
        pslot *slot = &p->ring[p->consumed % p->W];
        if (slot->state != SLOT_DONE) {
            pthread_cond_wait(&p->done_cv, &p->mu);
            continue;
        }
        pslot got = *slot;
        memset(slot, 0, sizeof *slot);
        p->consumed++;
        bool pull_failed = got.st != TL_OK && got.raw == NULL;
        if (pull_failed) {
            p->fail_st = got.st;
            p->fail_msg = got.msg;
            got.msg = NULL;
        }
        if (p->idle > 0 && run_fits(p))
            pthread_cond_signal(&p->space_cv);
        pthread_mutex_unlock(&p->mu);
        if (got.end || (got.st == TL_OK && got.res == NULL)) {
            slot_clear(&got); /* the end, or a skipped record */
            pthread_mutex_lock(&p->mu);
            continue;
        }
        tl_status st = got.st;
        if (st != TL_OK)
            tl_error(st, "%s", pull_failed ? p->fail_msg : got.msg != NULL ? got.msg : "out of memory");
        *out = got.res;
        got.res = NULL;
        slot_clear(&got);
        return st;
    }
}

/* ---- the node ------------------------------------------------------------------- */

static tl_status parse_next(tl_dataset *ds, ds_elem **out)
{
    parse_impl *p = ds->impl;
    while (p->replay_pos < p->n_replay) {
        ds_elem *raw = p->replay[p->replay_pos];
        p->replay[p->replay_pos++] = NULL;
        tl_status st = parse_one(ds, p, raw, out);
        ds_elem_free(raw);
        if (st != TL_OK || *out != NULL)
            return st;
    }
    if (p->threads > 1)
        return parallel_next(ds, p, out);
    for (;;) {
        ds_elem *raw;
        tl_status st = ds_pull(ds->input, &raw);
        if (st != TL_OK || raw == NULL)
            return st;
        st = parse_one(ds, p, raw, out);
        ds_elem_free(raw);
        if (st != TL_OK || *out != NULL)
            return st;
    }
}

static void replay_clear(parse_impl *p)
{
    for (int64_t i = p->replay_pos; i < p->n_replay; i++)
        ds_elem_free(p->replay[i]);
    tl_free(p->replay);
    p->replay = NULL;
    p->n_replay = p->replay_pos = 0;
}

static void ring_clear(parse_impl *p)
{
    for (int64_t i = 0; p->ring != NULL && i < p->W; i++)
        slot_clear(&p->ring[i]);
    p->next_seq = p->consumed = 0;
    p->input_ended = false;
    p->fail_st = TL_OK;
    tl_free(p->fail_msg);
    p->fail_msg = NULL;
}

static tl_status parse_reset(tl_dataset *ds, uint64_t epoch_key)
{
    parse_impl *p = ds->impl;
    workers_stop(p);
    ring_clear(p);
    replay_clear(p);
    return ds_reset(ds->input, epoch_key);
}

static void parse_pause(tl_dataset *ds)
{
    parse_impl *p = ds->impl;
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->paused = true;
    while (p->active > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static void parse_resume(tl_dataset *ds)
{
    parse_impl *p = ds->impl;
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->paused = false;
    pthread_cond_broadcast(&p->space_cv);
    pthread_mutex_unlock(&p->mu);
}

/* The records taken from the input and not yet handed on are saved raw and
 * parsed again after a restore (a parse is a pure function of the record). */
static tl_status parse_save(tl_dataset *ds, json_t *obj, ds_saver *sv)
{
    parse_impl *p = ds->impl;
    ds_save_slots_begin(sv);
    for (int64_t i = p->replay_pos; i < p->n_replay; i++)
        ds_save_slot(sv, p->replay[i]);
    if (p->fail_st != TL_OK)
        return tl_error(TL_ERUNTIME, "save: the pipeline already failed: %s", p->fail_msg);
    for (int64_t s = p->consumed; s < p->next_seq; s++) {
        pslot *slot = &p->ring[s % p->W];
        if (slot->st != TL_OK && slot->raw == NULL)
            return tl_error(TL_ERUNTIME, "save: the pipeline already failed: %s", slot->msg);
        if (slot->raw != NULL)
            ds_save_slot(sv, slot->raw);
    }
    return ds_save_slots_end(sv, obj, "pending");
}

static tl_status parse_restore(tl_dataset *ds, json_t *obj, ds_loader *ld)
{
    parse_impl *p = ds->impl;
    ds_elem **slots;
    int64_t n;
    tl_status st = ds_load_slots(ld, obj, "pending", "restore: parse", INT64_MAX, &slots, &n);
    for (int64_t i = 0; i < n && st == TL_OK; i++)
        if (slots[i] == NULL)
            st = tl_error(TL_EINVAL, "restore: parse: saved slot %lld is empty; \"pending\" holds records",
                          (long long)i);
    if (st != TL_OK) {
        ds_slots_free(slots, n);
        return st;
    }
    replay_clear(p);
    p->replay = slots;
    p->n_replay = n;
    return TL_OK;
}

static void parse_destroy(tl_dataset *ds)
{
    parse_impl *p = ds->impl;
    if (p == NULL)
        return;
    if (p->sync_ok == 4)
        workers_stop(p);
    if (p->sync_ok > 0)
        pthread_mutex_destroy(&p->mu);
    if (p->sync_ok > 1)
        pthread_mutex_destroy(&p->pull_mu);
    if (p->sync_ok > 2)
        pthread_cond_destroy(&p->done_cv);
    if (p->sync_ok > 3)
        pthread_cond_destroy(&p->space_cv);
    ring_clear(p);
    replay_clear(p);
    tl_free(p->ring);
    tl_free(p->th);
    for (int i = 0; p->defaults != NULL && i < p->n; i++)
        tl_free(p->defaults[i]);
    tl_free(p->defaults);
    tl_free(p->specs);
    tl_free(p);
}

static const ds_ops parse_ops = {"parse", parse_next, parse_reset, parse_save, parse_restore, parse_pause,
                                 parse_resume, parse_destroy};

/* Copies spec i's default (bytes values and their bytes in one block). */
static tl_status copy_default(parse_impl *p, int i)
{
    tl_feature_spec *s = &p->specs[i];
    if (s->default_value == NULL || s->default_count == 0)
        return TL_OK;
    size_t n = s->default_count, size;
    if (s->dtype == TL_FEATURE_BYTES) {
        const tl_bytes *b = s->default_value;
        size = n * sizeof(tl_bytes);
        for (size_t k = 0; k < n; k++)
            size += b[k].len;
        uint8_t *block = tl_malloc(size + 1);
        if (block == NULL)
            return tl_error_oom();
        tl_bytes *nb = (tl_bytes *)(void *)block;
        uint8_t *pool = block + n * sizeof(tl_bytes);
        for (size_t k = 0; k < n; k++) {
            if (b[k].len > 0)
                memcpy(pool, b[k].data, b[k].len);
            nb[k] = (tl_bytes){pool, b[k].len};
            pool += b[k].len;
        }
        p->defaults[i] = block;
    } else {
        size = n * (s->dtype == TL_FEATURE_FLOAT ? sizeof(float) : sizeof(int64_t));
        if ((p->defaults[i] = tl_malloc(size)) == NULL)
            return tl_error_oom();
        memcpy(p->defaults[i], s->default_value, size);
    }
    s->default_value = p->defaults[i];
    return TL_OK;
}

static tl_status parse_setup(tl_dataset *in, parse_impl *p, const tl_feature_spec *specs, int n,
                             const tl_parse_options *o)
{
    p->n = n;
    p->skip = o->skip_corrupt_records;
    p->threads = o->num_parallel_calls > 0 ? o->num_parallel_calls : 1;
    p->sequence = o->sequence_example;
    p->record_key = ds_intern(in->ctx, o->record_key != NULL ? o->record_key : "record");
    p->specs = tl_calloc((size_t)n, sizeof *p->specs);
    p->defaults = tl_calloc((size_t)n, sizeof *p->defaults);
    if (p->record_key == NULL || p->specs == NULL || p->defaults == NULL)
        return tl_error_oom();
    for (int i = 0; i < n; i++) {
        p->specs[i] = specs[i];
        if (specs[i].key == NULL)
            return tl_error(TL_EINVAL, "parse: specs[%d] has no key", i);
        if ((p->specs[i].key = ds_intern(in->ctx, specs[i].key)) == NULL)
            return tl_error_oom();
        if (specs[i].type == TL_SPEC_FIXED_LEN_SEQUENCE || specs[i].type == TL_SPEC_VAR_LEN_SEQUENCE)
            p->sequence = true;
        tl_status st = copy_default(p, i);
        if (st != TL_OK)
            return st;
    }
    /* The specs are checked once here with an empty example, so that a bad
     * spec fails at construction rather than at the first record. */
    tl_example *ex;
    tl_status st = p->sequence ? tl_sequence_example_parse("", 0, 0, &ex) : tl_example_parse("", 0, 0, &ex);
    if (st != TL_OK)
        return st;
    tl_parsed_feature *f = tl_calloc((size_t)n, sizeof *f);
    if (f == NULL) {
        tl_example_destroy(ex);
        return tl_error_oom();
    }
    st = tl_example_parse_features(ex, p->specs, (size_t)n, f);
    tl_parsed_features_free(f, (size_t)n);
    tl_free(f);
    tl_example_destroy(ex);
    /* Only errors about the specs themselves matter here: an empty record
     * lacks every required feature. */
    if (st != TL_OK && strstr(tl_last_error(), "specs[") != NULL)
        return tl_error(st, "parse: %s", tl_last_error());
    if (p->threads > 1) {
        p->W = 2 * RUN * (int64_t)p->threads; /* each worker can have a run out and one ready */
        p->ring = tl_calloc((size_t)p->W, sizeof *p->ring);
        p->th = tl_calloc((size_t)p->threads, sizeof *p->th);
        if (p->ring == NULL || p->th == NULL)
            return tl_error_oom();
        if (pthread_mutex_init(&p->mu, NULL) != 0 || (p->sync_ok++, pthread_mutex_init(&p->pull_mu, NULL) != 0) ||
            (p->sync_ok++, pthread_cond_init(&p->done_cv, NULL) != 0) ||
            (p->sync_ok++, pthread_cond_init(&p->space_cv, NULL) != 0))
            return tl_error(TL_ERUNTIME, "parse: cannot make a mutex or condition variable");
        p->sync_ok++;
    }
    return TL_OK;
}

tl_status tl_dataset_parse_example(tl_dataset *in, const tl_feature_spec *specs, int n, const tl_parse_options *o,
                                   tl_dataset **out)
{
    if (out == NULL) {
        tl_dataset_destroy(in);
        return tl_error(TL_EINVAL, "parse: out is NULL");
    }
    tl_parse_options def = {0};
    if (o == NULL)
        o = &def;
    tl_status st = TL_OK;
    if (in == NULL)
        st = tl_error(TL_EINVAL, "parse: the input dataset is NULL");
    else if (specs == NULL || n < 1 || n > 65536)
        st = tl_error(TL_EINVAL, "parse: need 1..65536 feature specs (got %d%s)", n, specs == NULL ? ", NULL" : "");
    else if (o->num_parallel_calls < 0 || o->num_parallel_calls > MAX_PARALLEL)
        st = tl_error(TL_EINVAL, "parse: num_parallel_calls must be in 0..%d (got %d)", MAX_PARALLEL,
                      o->num_parallel_calls);
    parse_impl *p = NULL;
    char *desc = NULL;
    if (st == TL_OK) {
        p = tl_calloc(1, sizeof *p);
        st = p != NULL ? parse_setup(in, p, specs, n, o) : tl_error_oom();
    }
    if (st == TL_OK) {
        tl_strbuf sb = {0};
        tl_strbuf_appendf(&sb, "parse(%s", p->sequence ? "SequenceExample" : "Example");
        for (int i = 0; i < n; i++)
            tl_strbuf_appendf(&sb, ", %s:%d:%d", p->specs[i].key, (int)p->specs[i].type, (int)p->specs[i].dtype);
        tl_strbuf_appendf(&sb, ", skip_corrupt_records=%s)", p->skip ? "true" : "false");
        desc = tl_strbuf_take(&sb);
        if (desc == NULL)
            st = tl_error_oom();
    }
    st = ds_finish(st, &parse_ops, p, desc, in, out);
    if (st != TL_OK)
        parse_destroy(&(tl_dataset){.impl = p});
    return st;
}

/* engine.c — the engine's tables: configuration checks, storage (one
 * block per table shard, each row followed by its slots), initializers,
 * load / retrieve by host shard, and counters. */
#define _GNU_SOURCE /* MADV_HUGEPAGE, MAP_ANONYMOUS */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "emb_int.h"
#include "tpuloop/rng.h"

/* The RNG stream of the initializers ("EMBI"), keyed by table and row, so a
 * row's values do not depend on the shards. */
#define INIT_OP 0x454d4249u

tl_status emb_reserve(emb_buf *b, size_t bytes)
{
    if (bytes <= b->cap)
        return TL_OK;
    /* exact the first time (a step's size repeats), then a quarter more */
    size_t cap = b->cap == 0 ? bytes : b->cap + b->cap / 4;
    if (cap < bytes)
        cap = bytes;
    void *p = tl_realloc(b->p, cap);
    if (p == NULL)
        return tl_error_oom();
    b->p = p;
    b->cap = cap;
    return TL_OK;
}

void emb_buf_free(emb_buf *b)
{
    tl_free(b->p);
    b->p = NULL;
    b->cap = 0;
}

void tl_emb_config_default(tl_emb_config *c)
{
    memset(c, 0, sizeof *c);
    tl_emb_optimizer_default(TL_EMB_SGD, &c->optimizer);
    c->mode = TL_EMB_MODE_TRAINING;
    c->num_tensor_cores = 1;
    c->batch_size_per_tensor_core = 1;
    c->num_shards = 1;
}

/* ---- checks ------------------------------------------------------------------ */

static tl_status check_init(const tl_emb_table_config *t, const char *name)
{
    const tl_emb_initializer *in = &t->initializer;
    switch (in->kind) {
    case TL_EMB_INIT_TRUNCATED_NORMAL:
        if (!isfinite(in->mean) || !isfinite(in->stddev) || in->stddev < 0)
            return tl_error(TL_EINVAL, "table \"%s\": truncated normal initializer needs a finite mean and stddev >= 0 "
                                       "(0: 1/sqrt(dim)); got mean %g, stddev %g", name, in->mean, in->stddev);
        return TL_OK;
    case TL_EMB_INIT_ZEROS:
    case TL_EMB_INIT_ROW_ID:
        return TL_OK;
    case TL_EMB_INIT_CONSTANT:
        if (!isfinite(in->value))
            return tl_error(TL_EINVAL, "table \"%s\": constant initializer value must be finite (got %g)", name,
                            in->value);
        return TL_OK;
    case TL_EMB_INIT_UNIFORM:
        if (!isfinite(in->minval) || !isfinite(in->maxval) || in->minval > in->maxval)
            return tl_error(TL_EINVAL, "table \"%s\": uniform initializer needs finite minval <= maxval (got %g, %g)",
                            name, in->minval, in->maxval);
        return TL_OK;
    }
    return tl_error(TL_EINVAL, "table \"%s\": initializer kind %d is not one of truncated_normal, zeros, constant, "
                               "uniform, row_id", name, (int)in->kind);
}

static tl_status check_config(const tl_emb_config *c)
{
    if (c->mode != TL_EMB_MODE_INFERENCE && c->mode != TL_EMB_MODE_TRAINING && c->mode != TL_EMB_MODE_BACKWARD_PASS_ONLY)
        return tl_error(TL_EINVAL, "TPUEmbeddingConfiguration.mode is INVALID.  Must be INFERENCE, TRAINING, or "
                                   "BACKWARD_PASS_ONLY (got %d)", (int)c->mode);
    if (c->num_tables < 1 || c->tables == NULL)
        return tl_error(TL_EINVAL, "embedding: need at least one table (got %d)", c->num_tables);
    if (c->num_features < 1 || c->features == NULL)
        return tl_error(TL_EINVAL, "embedding: need at least one feature (got %d)", c->num_features);
    if (c->num_tensor_cores < 1)
        return tl_error(TL_EINVAL, "embedding: num_tensor_cores must be >= 1 (got %d)", c->num_tensor_cores);
    if (c->batch_size_per_tensor_core < 1)
        return tl_error(TL_EINVAL, "embedding: batch_size_per_tensor_core must be >= 1 (got %d)",
                        c->batch_size_per_tensor_core);
    if (c->num_shards < 1)
        return tl_error(TL_EINVAL, "The number of shards for the embedding layer must be > 0. Currently set to: %d",
                        c->num_shards);
    int H = c->num_hosts > 0 ? c->num_hosts : 1;
    if (c->num_hosts < 0)
        return tl_error(TL_EINVAL, "embedding: num_hosts must be >= 1 (got %d)", c->num_hosts);
    if (c->host < 0 || c->host >= H)
        return tl_error(TL_EINVAL, "embedding: host must be in [0, num_hosts %d) (got %d)", H, c->host);
    if (c->num_shards % H != 0)
        return tl_error(TL_EINVAL, "embedding: num_shards %d is not a multiple of num_hosts %d: each host holds "
                                   "num_shards / num_hosts shards", c->num_shards, H);
    if (c->sharding_strategy != TL_EMB_DIV_DEFAULT && c->sharding_strategy != TL_EMB_MOD)
        return tl_error(TL_EINVAL, "embedding: sharding_strategy must be DIV_DEFAULT or MOD (got %d)",
                        (int)c->sharding_strategy);
    if (c->bounds_check_mode < TL_EMB_BOUNDS_FATAL || c->bounds_check_mode > TL_EMB_BOUNDS_IGNORE)
        return tl_error(TL_EINVAL, "embedding: bounds_check_mode must be FATAL, WARNING or IGNORE (got %d)",
                        (int)c->bounds_check_mode);
    for (int i = 0; i < c->num_tables; i++) {
        const tl_emb_table_config *t = &c->tables[i];
        char dflt[32];
        snprintf(dflt, sizeof dflt, "table_%d", i);
        const char *name = t->name != NULL ? t->name : dflt;
        if (t->vocabulary_size < 1)
            return tl_error(TL_EINVAL, "table \"%s\": vocabulary_size must be >= 1 (got %lld)", name,
                            (long long)t->vocabulary_size);
        if (t->dim < 1)
            return tl_error(TL_EINVAL, "table \"%s\": dim must be >= 1 (got %d)", name, t->dim);
        if (t->combiner != TL_EMB_COMBINER_MEAN && t->combiner != TL_EMB_COMBINER_SUM &&
            t->combiner != TL_EMB_COMBINER_SQRTN)
            return tl_error(TL_EINVAL, "Argument `combiner` must be one of ('mean', 'sum', 'sqrtn'); table \"%s\" has %d",
                            name, (int)t->combiner);
        /* With several hosts a table smaller than the hosts leaves some empty
         * (TensorFlow 2 skips zero-size shards). */
        if (t->vocabulary_size < c->num_shards && H == 1)
            for (int s = 0; s < c->num_shards; s++)
                if (tl_emb_shard_rows(t->vocabulary_size, c->num_shards, s) == 0)
                    return tl_error(TL_EINVAL, "All embedding shards must be non-empty, shard ID: %d is empty, "
                                               "vocabulary size: %lld, number of shards: %d (table \"%s\")",
                                    s, (long long)t->vocabulary_size, c->num_shards, name);
        tl_status st = check_init(t, name);
        if (st != TL_OK)
            return st;
        const tl_emb_optimizer *o = t->optimizer != NULL ? t->optimizer : &c->optimizer;
        if ((st = tl_emb_optimizer_validate(o)) != TL_OK)
            return tl_error(st, "table \"%s\": %s", name, tl_last_error());
        if (o->algorithm == TL_EMB_FREQUENCY_ESTIMATOR && t->dim != 1)
            return tl_error(TL_EINVAL, "table \"%s\": FrequencyEstimator needs dim 1 (got %d)", name, t->dim);
        for (int j = 0; j < i; j++) {
            char other[32];
            snprintf(other, sizeof other, "table_%d", j);
            const char *oname = c->tables[j].name != NULL ? c->tables[j].name : other;
            if (strcmp(oname, name) == 0)
                return tl_error(TL_EINVAL, "Multiple tables with name %s found.", name);
        }
    }
    for (int f = 0; f < c->num_features; f++) {
        const tl_emb_feature_config *fc = &c->features[f];
        if (fc->table < 0 || fc->table >= c->num_tables)
            return tl_error(TL_EINVAL, "feature %d (\"%s\"): table %d is not in [0, %d)", f,
                            fc->name ? fc->name : "", fc->table, c->num_tables);
        if (fc->has_combiner && fc->combiner != TL_EMB_COMBINER_MEAN && fc->combiner != TL_EMB_COMBINER_SUM &&
            fc->combiner != TL_EMB_COMBINER_SQRTN)
            return tl_error(TL_EINVAL, "Argument `combiner` must be one of ('mean', 'sum', 'sqrtn'); feature %d has %d",
                            f, (int)fc->combiner);
        if (fc->num_output_dims < 0 || fc->num_output_dims > TL_EMB_MAX_OUTPUT_DIMS)
            return tl_error(TL_EINVAL, "feature %d (\"%s\"): output_shape has %d dims after the batch; at most %d are "
                                       "allowed", f, fc->name ? fc->name : "", fc->num_output_dims,
                            TL_EMB_MAX_OUTPUT_DIMS);
        if (fc->num_output_dims > 0 && fc->max_sequence_length > 0)
            return tl_error(TL_EINVAL, "feature %d (\"%s\"): output_shape and max_sequence_length %d are both set; a "
                                       "sequence feature's output is [B, S, D]", f, fc->name ? fc->name : "",
                            fc->max_sequence_length);
        int64_t per = fc->max_sequence_length > 0 ? fc->max_sequence_length : 1;
        for (int d = 0; d < fc->num_output_dims; d++) {
            if (fc->output_shape[d] < 1 || fc->output_shape[d] > INT32_MAX)
                return tl_error(TL_EINVAL, "feature %d (\"%s\"): output_shape[%d] must be in [1, %d] (got %lld)", f,
                                fc->name ? fc->name : "", d + 1, INT32_MAX, (long long)fc->output_shape[d]);
            per *= fc->output_shape[d];
            if (per > INT32_MAX)
                break;
        }
        int64_t bags = per > INT32_MAX ? per : (int64_t)c->batch_size_per_tensor_core * per;
        if (bags > INT32_MAX)
            return tl_error(TL_EINVAL, "feature %d (\"%s\"): batch_size_per_tensor_core x %s = %lld bags; at most %d "
                                       "are allowed", f, fc->name ? fc->name : "",
                            fc->num_output_dims ? "output_shape" : "max_sequence_length", (long long)bags, INT32_MAX);
        if (fc->max_sequence_length < 0)
            return tl_error(TL_EINVAL, "feature %d (\"%s\"): max_sequence_length must be >= 0 (got %d)", f,
                            fc->name ? fc->name : "", fc->max_sequence_length);
    }
    /* Dynamic tags must be exactly {0..K-1} (§2.3). */
    int used[64] = {0}, max_tag = -1;
    for (int i = 0; i < c->num_tables; i++) {
        const tl_emb_optimizer *o = c->tables[i].optimizer != NULL ? c->tables[i].optimizer : &c->optimizer;
        int tags[2] = {o->lr_tag, o->algorithm == TL_EMB_FREQUENCY_AWARE_ADAGRAD ? o->step_counter_tag : -1};
        for (int k = 0; k < 2; k++) {
            if (tags[k] < 0)
                continue;
            if (tags[k] >= 64)
                return tl_error(TL_EINVAL, "embedding: dynamic tag %d is too large (at most 63)", tags[k]);
            used[tags[k]] = 1;
            max_tag = tags[k] > max_tag ? tags[k] : max_tag;
        }
    }
    for (int k = 0; k <= max_tag; k++)
        if (!used[k])
            return tl_error(TL_EINVAL, "embedding: the dynamic learning-rate tags must be 0..%d without gaps; tag %d "
                                       "is unused", max_tag, k);
    return TL_OK;
}

/* ---- storage ----------------------------------------------------------------- */

/* Shard blocks of at least this many bytes are mapped on their own and
 * asked for transparent huge pages: random row gathers over a table of
 * gigabytes miss the TLB on almost every row with 4 KiB pages. */
#define HUGE_BLOCK (8u << 20)
#define HUGE_PAGE (2u << 20)

static float *block_alloc(size_t bytes)
{
    if (bytes < HUGE_BLOCK)
        return tl_malloc(bytes);
    size_t len = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE); /* a hint: 4 KiB pages still work */
#endif
    return p;
}

static void block_free(float *p, size_t bytes)
{
    if (p == NULL)
        return;
    if (bytes < HUGE_BLOCK)
        tl_free(p);
    else
        munmap(p, (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
}

/* Rows of table V's host shard in cfg c (all of them with one host). */
static int64_t held_rows(const tl_emb_config *c, int64_t V)
{
    return c->num_hosts > 1 ? tl_emb_shard_rows(V, c->num_hosts, c->host) : V;
}

static size_t block_bytes(const emb_table *t, int s)
{
    return (size_t)t->shard_rows[s] * (size_t)t->stride * sizeof(float);
}

static void init_row(const tl_emb_engine *eng, int ti, const emb_table *t, int64_t id, float *row)
{
    const tl_emb_initializer *in = &t->init;
    switch (in->kind) {
    case TL_EMB_INIT_ZEROS:
        memset(row, 0, (size_t)t->dim * sizeof *row);
        break;
    case TL_EMB_INIT_CONSTANT:
        for (int d = 0; d < t->dim; d++)
            row[d] = (float)in->value;
        break;
    case TL_EMB_INIT_ROW_ID:
        for (int d = 0; d < t->dim; d++)
            row[d] = (float)(in->offset + (double)id);
        break;
    case TL_EMB_INIT_UNIFORM: {
        tl_rng r;
        tl_rng_init(&r, eng->cfg.seed, INIT_OP + (uint64_t)ti, (uint64_t)id, 0);
        for (int d = 0; d < t->dim; d++)
            row[d] = (float)(in->minval + (in->maxval - in->minval) * tl_rng_uniform_f64(&r));
        break;
    }
    case TL_EMB_INIT_TRUNCATED_NORMAL: {
        tl_rng r;
        tl_rng_init(&r, eng->cfg.seed, INIT_OP + (uint64_t)ti, (uint64_t)id, 0);
        double sd = in->stddev > 0 ? in->stddev : 1.0 / sqrt((double)t->dim);
        for (int d = 0; d < t->dim; d++) {
            double x;
            do
                x = tl_rng_normal(&r);
            while (fabs(x) > 2.0);
            row[d] = (float)(in->mean + sd * x);
        }
        break;
    }
    }
    for (int k = 0; k < t->slots; k++) {
        float v = tl_emb_slot_init(&t->opt, k);
        float *s = row + (int64_t)(k + 1) * t->dim;
        for (int d = 0; d < t->dim; d++)
            s[d] = v;
    }
}

/* Table i from the caller's config tc (with its names and optimizers). */
static tl_status make_table(tl_emb_engine *eng, int i, const tl_emb_table_config *tc, const tl_emb_optimizer *global)
{
    const tl_emb_config *c = &eng->cfg;
    emb_table *t = &eng->tables[i];
    t->name = tc->name != NULL ? tl_strdup(tc->name) : tl_asprintf("table_%d", i);
    if (t->name == NULL)
        return tl_error_oom();
    t->vocab = tc->vocabulary_size;
    t->dim = tc->dim;
    t->opt = tc->optimizer != NULL ? *tc->optimizer : *global;
    t->slots = tl_emb_num_slots(&t->opt);
    t->stride = (int64_t)t->dim * (1 + t->slots);
    t->combiner = tc->combiner;
    t->init = tc->initializer;
    t->held = held_rows(c, t->vocab);
    t->nloc = c->num_shards / c->num_hosts;
    t->shard = tl_calloc((size_t)t->nloc, sizeof *t->shard);
    t->shard_rows = tl_calloc((size_t)t->nloc, sizeof *t->shard_rows);
    if (t->shard == NULL || t->shard_rows == NULL)
        return tl_error_oom();
    for (int s = 0; s < t->nloc; s++) {
        int64_t rows = tl_emb_shard_rows(t->held, t->nloc, s);
        t->shard_rows[s] = rows;
        if (rows == 0)
            continue; /* a host shard smaller than its shards */
        if ((uint64_t)rows > SIZE_MAX / sizeof(float) / (uint64_t)t->stride)
            return tl_error(TL_ENOMEM, "table \"%s\": %lld rows of %lld floats do not fit in memory", t->name,
                            (long long)rows, (long long)t->stride);
        t->shard[s] = block_alloc(block_bytes(t, s));
        if (t->shard[s] == NULL)
            return tl_error(TL_ENOMEM, "table \"%s\": cannot allocate shard %d (%lld rows x %lld floats)", t->name, s,
                            (long long)rows, (long long)t->stride);
        for (int64_t l = 0; l < rows; l++) {
            int64_t id = tl_emb_shard_id(c->sharding_strategy, t->held, t->nloc, s, l);
            if (c->num_hosts > 1)
                id = tl_emb_shard_id(c->sharding_strategy, t->vocab, c->num_hosts, c->host, id);
            init_row(eng, i, t, id, t->shard[s] + l * t->stride);
        }
    }
    return TL_OK;
}

tl_status tl_emb_engine_create(const tl_emb_config *cfg, tl_emb_engine **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "embedding: out is NULL");
    *out = NULL;
    if (cfg == NULL)
        return tl_error(TL_EINVAL, "embedding: cfg is NULL");
    tl_status st = check_config(cfg);
    if (st != TL_OK)
        return st;
    tl_emb_engine *eng = tl_calloc(1, sizeof *eng);
    if (eng == NULL)
        return tl_error_oom();
    eng->cfg = *cfg;
    if (eng->cfg.num_hosts == 0)
        eng->cfg.num_hosts = 1;
    eng->applied_through = -1;
    eng->pending = -1;
    for (int k = 0; k < EMB_RING; k++)
        eng->recs[k].step = -1;
    int T = cfg->num_tables, F = cfg->num_features, C = cfg->num_tensor_cores;
    eng->tables = tl_calloc((size_t)T, sizeof *eng->tables);
    eng->features = tl_calloc((size_t)F, sizeof *eng->features);
    eng->table_cfgs = tl_calloc((size_t)T, sizeof *eng->table_cfgs);
    eng->feature_cfgs = tl_calloc((size_t)F, sizeof *eng->feature_cfgs);
    eng->cores = tl_calloc((size_t)C, sizeof *eng->cores);
    eng->ws = tl_calloc((size_t)C, sizeof *eng->ws);
    eng->part_done = tl_calloc((size_t)C, sizeof *eng->part_done);
    if (eng->tables == NULL || eng->features == NULL || eng->table_cfgs == NULL || eng->feature_cfgs == NULL ||
        eng->cores == NULL || eng->ws == NULL || eng->part_done == NULL) {
        tl_emb_engine_destroy(eng);
        return tl_error_oom();
    }
    memcpy(eng->table_cfgs, cfg->tables, (size_t)T * sizeof *eng->table_cfgs);
    memcpy(eng->feature_cfgs, cfg->features, (size_t)F * sizeof *eng->feature_cfgs);
    eng->cfg.tables = eng->table_cfgs;
    eng->cfg.features = eng->feature_cfgs;
    if (pthread_mutex_init(&eng->mu, NULL) != 0) {
        tl_emb_engine_destroy(eng);
        return tl_error(TL_ERUNTIME, "embedding: cannot make a mutex");
    }
    eng->mu_ok = true;
    for (int i = 0; i < T && st == TL_OK; i++) {
        eng->table_cfgs[i].name = NULL; /* the copies' strings live in emb_table */
        eng->table_cfgs[i].optimizer = NULL;
        st = make_table(eng, i, &cfg->tables[i], &cfg->optimizer);
    }
    for (int f = 0; f < F && st == TL_OK; f++) {
        emb_feature *fe = &eng->features[f];
        fe->table = cfg->features[f].table;
        fe->seq = cfg->features[f].max_sequence_length;
        fe->per = fe->seq > 0 ? fe->seq : 1;
        for (int d = 0; d < cfg->features[f].num_output_dims; d++)
            fe->per *= cfg->features[f].output_shape[d];
        fe->combiner = cfg->features[f].has_combiner ? cfg->features[f].combiner : eng->tables[fe->table].combiner;
        fe->name = cfg->features[f].name != NULL ? tl_strdup(cfg->features[f].name) : tl_asprintf("feature_%d", f);
        eng->feature_cfgs[f].name = NULL;
        if (fe->name == NULL)
            st = tl_error_oom();
    }
    for (int c = 0; c < C; c++) {
        eng->cores[c].last_received = -1;
        eng->part_done[c] = -1;
    }
    eng->direct = C == 1 && eng->cfg.num_hosts == 1;
    eng->merge_by_dedup = C > 1;
    for (int i = 0; i < T && st == TL_OK; i++) {
        const tl_emb_optimizer *o = &eng->tables[i].opt;
        eng->direct = eng->direct && tl_emb_optimizer_is_lazy(o);
        eng->merge_by_dedup = eng->merge_by_dedup && tl_emb_optimizer_is_lazy(o) && tl_emb_optimizer_accumulates(o);
    }
    if (st != TL_OK) {
        tl_emb_engine_destroy(eng);
        return st;
    }
    /* The copied config, whole for tl_emb_engine_config: names and optimizers
     * point into the tables and features (which own them). */
    for (int i = 0; i < T; i++) {
        eng->table_cfgs[i].name = eng->tables[i].name;
        eng->table_cfgs[i].optimizer = &eng->tables[i].opt;
    }
    for (int f = 0; f < F; f++)
        eng->feature_cfgs[f].name = eng->features[f].name;
    *out = eng;
    return TL_OK;
}

const tl_emb_config *tl_emb_engine_config(const tl_emb_engine *eng)
{
    return eng != NULL ? &eng->cfg : NULL;
}

int tl_emb_num_dynamic(const tl_emb_engine *eng)
{
    int n = 0;
    for (int i = 0; eng != NULL && i < eng->cfg.num_tables; i++) {
        const tl_emb_optimizer *o = &eng->tables[i].opt;
        if (o->lr_tag + 1 > n)
            n = o->lr_tag + 1;
        if (o->algorithm == TL_EMB_FREQUENCY_AWARE_ADAGRAD && o->step_counter_tag + 1 > n)
            n = o->step_counter_tag + 1;
    }
    return n;
}

void tl_emb_engine_destroy(tl_emb_engine *eng)
{
    if (eng == NULL)
        return;
    for (int i = 0; eng->tables != NULL && i < eng->cfg.num_tables; i++) {
        emb_table *t = &eng->tables[i];
        for (int s = 0; t->shard != NULL && s < t->nloc; s++)
            block_free(t->shard[s], block_bytes(t, s));
        tl_free(t->shard);
        tl_free(t->shard_rows);
        tl_free(t->name);
    }
    for (int f = 0; eng->features != NULL && f < eng->cfg.num_features; f++)
        tl_free(eng->features[f].name);
    for (int c = 0; eng->cores != NULL && c < eng->cfg.num_tensor_cores; c++)
        emb_core_free(&eng->cores[c]);
    for (int k = 0; k < EMB_RING; k++)
        tl_free(eng->recs[k].lrs);
    for (int c = 0; eng->ws != NULL && c < eng->cfg.num_tensor_cores; c++)
        emb_apply_ws_free(&eng->ws[c]);
    tl_free(eng->ws);
    tl_free(eng->part_done);
    if (eng->mu_ok)
        pthread_mutex_destroy(&eng->mu);
    tl_free(eng->tables);
    tl_free(eng->features);
    tl_free(eng->table_cfgs);
    tl_free(eng->feature_cfgs);
    tl_free(eng->cores);
    tl_free(eng);
}

tl_status tl_emb_config_bytes(const tl_emb_config *cfg, int64_t *table_bytes, int64_t *bytes_per_id)
{
    if (cfg == NULL || table_bytes == NULL || bytes_per_id == NULL)
        return tl_error(TL_EINVAL, "embedding: tl_emb_config_bytes with a NULL argument");
    tl_status st = check_config(cfg);
    if (st != TL_OK)
        return st;
    int64_t total = 0, max_dim = 1;
    for (int i = 0; i < cfg->num_tables; i++) {
        const tl_emb_table_config *t = &cfg->tables[i];
        const tl_emb_optimizer *o = t->optimizer != NULL ? t->optimizer : &cfg->optimizer;
        total += held_rows(cfg, t->vocabulary_size) * t->dim * (int64_t)sizeof(float) * (1 + tl_emb_num_slots(o));
        max_dim = t->dim > max_dim ? t->dim : max_dim;
    }
    /* per occurrence: gain, the two dedup ints (bag, unique); per unique
     * row: table, id, row pointer, gradient offset, the gradient; the dedup
     * hash (under four 4-byte slots per id); the step's accumulation: hash
     * (under four 4-byte slots per id), the sum's pointer, table, id, row. */
    int64_t occ = 4 + 8, uniq = 4 + 8 + 8 + 8 + 4 * max_dim, hash = 4 * 4;
    int64_t acc = 4 * 4 + 8 + 4 + 8 + 8;
    *table_bytes = total;
    *bytes_per_id = occ + uniq + hash + acc;
    return TL_OK;
}

int64_t tl_emb_table_bytes(const tl_emb_engine *eng)
{
    int64_t n = 0;
    for (int i = 0; eng != NULL && i < eng->cfg.num_tables; i++)
        n += eng->tables[i].held * eng->tables[i].stride * (int64_t)sizeof(float);
    return n;
}

int64_t tl_emb_workspace_bytes(const tl_emb_engine *eng)
{
    int64_t n = 0;
    for (int c = 0; eng != NULL && c < eng->cfg.num_tensor_cores; c++) {
        const emb_core *co = &eng->cores[c];
        n += (int64_t)co->bagsum.cap;
        for (int k = 0; k < EMB_RING; k++) {
            const emb_core_step *s = &co->ring[k];
            const emb_buf *b[] = {&s->feat_off, &s->occ_gain, &s->u_table, &s->u_id,   &s->u_ptr,
                                  &s->u_goff,   &s->grad,     &s->ints,    &s->in_order, &s->u_host,
                                  &s->remote,   &s->hash,     &s->h_base,  &s->h_shift};
            for (size_t j = 0; j < TL_ARRAY_LEN(b); j++)
                n += (int64_t)b[j]->cap;
        }
    }
    for (int c = 0; eng != NULL && c < eng->cfg.num_tensor_cores; c++)
        n += emb_apply_ws_bytes(&eng->ws[c]);
    return n;
}

void tl_emb_get_stats(const tl_emb_engine *eng, tl_emb_stats *out)
{
    memset(out, 0, sizeof *out);
    if (eng == NULL)
        return;
    pthread_mutex_lock((pthread_mutex_t *)&eng->mu);
    *out = eng->stats;
    pthread_mutex_unlock((pthread_mutex_t *)&eng->mu);
}

/* ---- load / retrieve ------------------------------------------------------------ */

static tl_status find_table(const tl_emb_engine *eng, int table, const char *name, const emb_table **out)
{
    bool by_id = table >= 0, by_name = name != NULL && name[0] != '\0';
    if (by_id == by_name)
        return tl_error(TL_EINVAL, "exactly one of table_id or table_name must be non-default");
    if (by_id) {
        if (table >= eng->cfg.num_tables)
            return tl_error(TL_EINVAL, "table_id %d is not in [0, %d)", table, eng->cfg.num_tables);
        *out = &eng->tables[table];
        return TL_OK;
    }
    for (int i = 0; i < eng->cfg.num_tables; i++)
        if (strcmp(eng->tables[i].name, name) == 0) {
            *out = &eng->tables[i];
            return TL_OK;
        }
    return tl_error(TL_ENOTFOUND, "no embedding table named \"%s\"", name);
}

static tl_status load_or_retrieve(tl_emb_engine *eng, int table, const char *name, int num_shards, int shard_id,
                                  float *const *state, int n_state, int64_t rows, bool load)
{
    if (eng == NULL || state == NULL)
        return tl_error(TL_EINVAL, "embedding: %s with a NULL engine or state", load ? "load" : "retrieve");
    const emb_table *t = NULL;
    tl_status st = find_table(eng, table, name, &t);
    if (st != TL_OK)
        return st;
    if (num_shards <= 0)
        return tl_error(TL_EINVAL, "The number of shards for the embedding layer must be > 0. Currently set to: %d",
                        num_shards);
    if (shard_id < 0 || shard_id >= num_shards)
        return tl_error(TL_EINVAL, "The value of shard_id must be >= 0 and < %d (got %d)", num_shards, shard_id);
    if (n_state != 1 + t->slots)
        return tl_error(TL_EINVAL, "table \"%s\" (%s) has the parameters and %d slots: %d tensors, not %d", t->name,
                        tl_emb_algorithm_name(t->opt.algorithm), t->slots, 1 + t->slots, n_state);
    int64_t want = tl_emb_shard_rows(t->vocab, num_shards, shard_id);
    if (want == 0 && rows == 0 && eng->cfg.num_hosts > 1)
        return TL_OK; /* a host of no rows of a small table */
    if (want == 0)
        return tl_error(TL_EINVAL, "All embedding shards must be non-empty, shard ID: %d is empty, vocabulary size: "
                                   "%lld, number of shards: %d", shard_id, (long long)t->vocab, num_shards);
    if (rows != want)
        return tl_error(TL_EINVAL, "table \"%s\" shard %d of %d has %lld rows, not %lld", t->name, shard_id,
                        num_shards, (long long)want, (long long)rows);
    for (int k = 0; k < n_state; k++)
        if (state[k] == NULL)
            return tl_error(TL_EINVAL, "table \"%s\": state[%d] is NULL", t->name, k);
    /* With several hosts: the shard's rows must be this engine's. */
    for (int64_t l = 0; eng->cfg.num_hosts > 1 && l < rows; l++) {
        int64_t id = tl_emb_shard_id(eng->cfg.sharding_strategy, t->vocab, num_shards, shard_id, l), hl;
        int h = emb_host_of(eng, t, id, &hl);
        if (h != eng->cfg.host)
            return tl_error(TL_EINVAL, "table \"%s\": this engine holds host shard %d of %d; row %lld (id %lld) of "
                                       "shard %d of %d is host %d's", t->name, eng->cfg.host, eng->cfg.num_hosts,
                            (long long)l, (long long)id, shard_id, num_shards, h);
    }
    if (!load && (st = tl_emb_flush(eng)) != TL_OK)
        return st;
    for (int64_t l = 0; l < rows; l++) {
        float *row = emb_row(eng, t, tl_emb_shard_id(eng->cfg.sharding_strategy, t->vocab, num_shards, shard_id, l));
        for (int k = 0; k < n_state; k++) {
            float *mine = row + (int64_t)k * t->dim, *theirs = state[k] + l * t->dim;
            if (load)
                memcpy(mine, theirs, (size_t)t->dim * sizeof(float));
            else
                memcpy(theirs, mine, (size_t)t->dim * sizeof(float));
        }
    }
    return TL_OK;
}

tl_status tl_emb_load(tl_emb_engine *eng, int table, const char *table_name, int num_shards, int shard_id,
                      const float *const *state, int n_state, int64_t rows)
{
    return load_or_retrieve(eng, table, table_name, num_shards, shard_id, (float *const *)state, n_state, rows, true);
}

tl_status tl_emb_retrieve(tl_emb_engine *eng, int table, const char *table_name, int num_shards, int shard_id,
                          float *const *state, int n_state, int64_t rows)
{
    return load_or_retrieve(eng, table, table_name, num_shards, shard_id, state, n_state, rows, false);
}

/* ---- dedup tuples ------------------------------------------------------------------ */

int tl_emb_tuple_mask(const bool *is_float, int n, int32_t (*mask)[2], int cap)
{
    int rows = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && is_float[j] == is_float[i])
            j++;
        if (rows < cap) {
            mask[rows][0] = is_float[i] ? 1 : 0;
            mask[rows][1] = j - i;
        }
        rows++;
        i = j;
    }
    return rows;
}

static tl_status check_mask(const int32_t (*mask)[2], int rows, int n)
{
    int64_t total = 0;
    for (int r = 0; r < rows; r++) {
        if ((mask[r][0] != 0 && mask[r][0] != 1) || mask[r][1] < 0)
            return tl_error(TL_EINVAL, "tuple_mask row %d is [%d, %d]: want [0 or 1, length >= 0]", r, mask[r][0],
                            mask[r][1]);
        total += mask[r][1];
    }
    if (total != n)
        return tl_error(TL_EINVAL, "tuple_mask covers %lld elements, the tuple has %d", (long long)total, n);
    return TL_OK;
}

tl_status tl_emb_dedup_split(const double *values, int n, const int32_t (*mask)[2], int mask_rows, int64_t *ints,
                             double *floats)
{
    tl_status st = check_mask(mask, mask_rows, n);
    if (st != TL_OK)
        return st;
    int64_t ni = 0, nf = 0, at = 0;
    for (int r = 0; r < mask_rows; r++)
        for (int k = 0; k < mask[r][1]; k++, at++) {
            if (mask[r][0] == 0)
                ints[ni++] = (int64_t)values[at];
            else
                floats[nf++] = values[at];
        }
    return TL_OK;
}

tl_status tl_emb_dedup_merge(const int64_t *ints, const double *floats, const int32_t (*mask)[2], int mask_rows,
                             double *values, int n)
{
    tl_status st = check_mask(mask, mask_rows, n);
    if (st != TL_OK)
        return st;
    int64_t ni = 0, nf = 0, at = 0;
    for (int r = 0; r < mask_rows; r++)
        for (int k = 0; k < mask[r][1]; k++, at++)
            values[at] = mask[r][0] == 0 ? (double)ints[ni++] : floats[nf++];
    return TL_OK;
}

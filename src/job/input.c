/* input.c — the file datasets of the "input" section (tfrecord, criteo, csv,
 * idx) as the input_fn the job hands the estimator to train and evaluate;
 * prediction reads eval_files through the same input_fn in PREDICT mode.
 *
 * One input_fn invocation (ctx: index of total, mode, batch_size) builds
 *
 *   tfrecord: files -> [shard files] -> interleave -> [shard records] -> parse_example
 *   criteo, csv: [this shard's files] -> reader -> [shard records]
 *   idx:      images + labels -> [shard records]
 *   then:     TRAIN: shuffle (when shuffle_buffer_size) -> repeat (epochs times, or without end);
 *             then batch (drop_remainder but in PREDICT, whose last batch the estimator pads)
 *             -> prefetch
 *
 * Training with epochs ends where the repeated input does, as
 * Estimator.train ends at OutOfRange: the datasets' positions are saved
 * with every checkpoint, so a resumed run finishes the same pass.
 *
 * Sharding: with at least `total` files each invocation reads the files i
 * with i % total == index (tf.data's shard over the file list: no record is
 * read twice and each invocation reads only its files); with fewer files
 * every invocation reads all of them and keeps every total-th record after
 * the interleave, before parsing — correct, but each reads the whole input.
 * idx is always sharded by record (its two files are one table).
 *
 * The shuffle is seeded by tf_random_seed (0 when null), repeat's epoch
 * number reshuffles it, and the estimator saves every invocation's position
 * with each checkpoint, so a resumed run reads what the uninterrupted one
 * would have. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_int.h"

/* What an input_fn of one mode reads: the patterns, and the files they
 * match in order (for sharding by file). */
struct tl_job_files {
    tl_job *job;
    const char *const *patterns; /* (npatterns) borrowed from the configuration */
    int npatterns;
    char **names;                /* (nnames) the matched files, glob-escaped */
    int nnames;
};

bool tl_job_is_file_dataset(const tl_run_config *r)
{
    const char *d = r->input.dataset;
    return strcmp(d, "tfrecord") == 0 || strcmp(d, "criteo") == 0 || strcmp(d, "csv") == 0 || strcmp(d, "idx") == 0;
}

static void files_free(struct tl_job_files *f)
{
    if (f == NULL)
        return;
    for (int i = 0; i < f->nnames; i++)
        free(f->names[i]);
    free(f->names);
    free(f);
}

/* name with glob(3)'s special characters escaped, so that as a pattern it
 * matches exactly that file. malloc'd; NULL when out of memory. */
static char *glob_escape(const char *name, size_t len)
{
    char *s = malloc(2 * len + 1), *p = s;
    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (strchr("*?[]\\", name[i]) != NULL)
            *p++ = '\\';
        *p++ = name[i];
    }
    *p = '\0';
    return s;
}

/* The files the patterns match, in tl_dataset_from_files' order. */
static tl_status files_expand(struct tl_job_files *f)
{
    tl_dataset *ds;
    tl_status st = tl_dataset_from_files(f->patterns, f->npatterns, &ds);
    if (st != TL_OK)
        return st;
    const tl_element *e;
    int cap = 0;
    while ((st = tl_dataset_next(ds, &e)) == TL_OK && e != NULL) {
        const tl_tensor *t = tl_element_find(e, "filename");
        if (t == NULL || t->dtype != TL_DT_BYTES) {
            st = TL_ERUNTIME; /* dataset.h promises a "filename" bytes scalar */
            break;
        }
        const tl_bytes *b = t->data;
        if (f->nnames == cap) {
            cap = cap ? 2 * cap : 16;
            char **n = realloc(f->names, (size_t)cap * sizeof *n);
            if (n == NULL) {
                st = TL_ENOMEM;
                break;
            }
            f->names = n;
        }
        if ((f->names[f->nnames] = glob_escape((const char *)b->data, b->len)) == NULL) {
            st = TL_ENOMEM;
            break;
        }
        f->nnames++;
    }
    tl_dataset_destroy(ds);
    return st;
}

static tl_record_compression compression_of(const char *c)
{
    if (strcmp(c, "GZIP") == 0)
        return TL_RECORD_GZIP;
    if (strcmp(c, "ZLIB") == 0)
        return TL_RECORD_ZLIB;
    if (strcmp(c, "AUTO") == 0)
        return TL_RECORD_AUTO;
    return TL_RECORD_NONE;
}

static void tfrecord_options(const tl_input_config *in, tl_tfrecord_options *o)
{
    tl_tfrecord_options_init(o);
    o->compression = compression_of(in->compression);
    o->cycle_length = in->cycle_length;
    o->block_length = in->block_length;
    o->skip_corrupt_records = in->skip_corrupt_records;
}

static void criteo_options(const tl_input_config *in, tl_criteo_options *o)
{
    tl_criteo_options_init(o);
    for (int c = 0; in->vocab_sizes != NULL && c < TL_CRITEO_NUM_CAT; c++)
        o->vocab_sizes[c] = in->vocab_sizes[c];
}

static void csv_options(const tl_input_config *in, tl_csv_options *o)
{
    tl_csv_options_init(o);
    o->columns = in->csv_columns;
    o->num_columns = in->num_csv_columns;
    o->label_column = in->label_column ? in->label_column : in->label_key;
}

/* The records (or parsed examples) of shard index of total, before shuffle,
 * repeat and batch. total 1 reads everything. */
static tl_status source(const struct tl_job_files *f, int total, int index, tl_dataset **out)
{
    const tl_input_config *in = &f->job->r->input;
    const char *d = in->dataset;
    bool by_file = total > 1 && f->nnames >= total && strcmp(d, "idx") != 0;
    bool by_record = total > 1 && !by_file;
    tl_dataset *ds = NULL;
    tl_status st;
    *out = NULL;
    if (strcmp(d, "tfrecord") == 0) {
        tl_tfrecord_options o;
        tfrecord_options(in, &o);
        tl_parse_options po = {.skip_corrupt_records = in->skip_corrupt_records,
                               .num_parallel_calls = (int)in->num_parallel_calls};
        if ((st = tl_dataset_from_files(f->patterns, f->npatterns, &ds)) != TL_OK ||
            (by_file && (st = tl_dataset_shard(ds, total, index, &ds)) != TL_OK) ||
            (st = tl_dataset_tfrecord_interleave(ds, &o, &ds)) != TL_OK ||
            (by_record && (st = tl_dataset_shard(ds, total, index, &ds)) != TL_OK) ||
            (st = tl_dataset_parse_example(ds, in->features, in->num_features, &po, &ds)) != TL_OK)
            return st; /* a failing transform destroyed its input */
        *out = ds;
        return TL_OK;
    }
    if (strcmp(d, "idx") == 0) {
        st = tl_dataset_idx(f->patterns[0], f->npatterns > 1 ? f->patterns[1] : NULL, 1.0f, &ds);
    } else {
        /* This shard's files, each as a pattern matching only itself. */
        const char **mine = f->npatterns > 0 ? (const char **)f->patterns : NULL;
        int n = f->npatterns;
        const char **sub = NULL;
        if (by_file) {
            if ((sub = malloc((size_t)f->nnames * sizeof *sub)) == NULL)
                return TL_ENOMEM;
            n = 0;
            for (int i = index; i < f->nnames; i += total)
                sub[n++] = f->names[i];
            mine = sub;
        }
        if (strcmp(d, "criteo") == 0) {
            tl_criteo_options o;
            criteo_options(in, &o);
            st = tl_dataset_criteo(mine, n, &o, &ds);
        } else {
            tl_csv_options o;
            csv_options(in, &o);
            st = tl_dataset_csv(mine, n, &o, &ds);
        }
        free(sub);
    }
    if (st != TL_OK)
        return st;
    if (by_record && (st = tl_dataset_shard(ds, total, index, &ds)) != TL_OK)
        return st;
    *out = ds;
    return TL_OK;
}

/* The input section's scale over the model's features: feature_keys, or
 * every numeric tensor but the label and the embedding features' ids. */
static tl_status scale_features(const tl_job *job, tl_dataset *ds, tl_dataset **out)
{
    const tl_input_config *in = &job->r->input;
    if (in->feature_keys != NULL)
        return tl_dataset_scale(ds, in->scale, in->feature_keys, in->num_feature_keys, NULL, 0, out);
    const tl_emb_config *e = job->emb_spec != NULL ? tl_emb_spec_config(job->emb_spec) : NULL;
    int n = 1 + (e != NULL ? e->num_features : 0);
    const char **skip = calloc((size_t)n, sizeof *skip);
    if (skip == NULL) {
        tl_dataset_destroy(ds);
        return tl_error(TL_ENOMEM, "out of memory");
    }
    skip[0] = job->train_input.label_key != NULL ? job->train_input.label_key : job->eval_input.label_key;
    if (skip[0] == NULL)
        skip[0] = "label";
    char names[64][32];
    for (int i = 1; i < n; i++) {
        const char *name = e->features[i - 1].name;
        if (name == NULL && i - 1 < 64) { /* the engine's default name */
            snprintf(names[i - 1], sizeof names[0], "feature_%d", i - 1);
            name = names[i - 1];
        }
        skip[i] = name != NULL ? name : "";
    }
    tl_status st = tl_dataset_scale(ds, in->scale, NULL, 0, skip, n, out);
    free(skip);
    return st;
}

/* The input_fn of `train`, `evaluate` and `predict`. */
static tl_status input_fn(const tl_input_context *ctx, void *user, tl_dataset **out)
{
    const struct tl_job_files *f = user;
    const tl_run_config *r = f->job->r;
    const tl_input_config *in = &r->input;
    tl_dataset *ds;
    tl_status st = source(f, ctx->total, ctx->index, &ds);
    if (st == TL_OK && in->scale != 1.0)
        st = scale_features(f->job, ds, &ds);
    if (st != TL_OK)
        return st;
    uint64_t seed = r->tf_random_seed.set ? (uint64_t)r->tf_random_seed.value : 0;
    /* Training shuffles and repeats; evaluation and prediction read the
     * files in order, and prediction keeps the last, short batch (the
     * estimator pads it, as TPUEstimator does). */
    bool train = ctx->mode == TL_MODE_TRAIN;
    if ((train && in->shuffle_buffer_size.set &&
         (st = tl_dataset_shuffle(ds, in->shuffle_buffer_size.value, seed, in->reshuffle_each_iteration, &ds)) !=
             TL_OK) ||
        (train && (st = tl_dataset_repeat(ds, in->epochs.set ? in->epochs.value : -1, &ds)) != TL_OK) ||
        (st = tl_dataset_batch(ds, ctx->batch_size, ctx->mode != TL_MODE_PREDICT, &ds)) != TL_OK ||
        (in->prefetch > 0 && (st = tl_dataset_prefetch(ds, in->prefetch, &ds)) != TL_OK))
        return st;
    *out = ds;
    return TL_OK;
}

static tl_status files_open(tl_job *job, const char *const *patterns, int n, tl_input *input,
                            struct tl_job_files **out)
{
    struct tl_job_files *f = calloc(1, sizeof *f);
    if (f == NULL)
        return tl_error(TL_ENOMEM, "out of memory");
    *f = (struct tl_job_files){job, patterns, n, NULL, 0};
    tl_status st = strcmp(job->r->input.dataset, "idx") == 0 ? TL_OK : files_expand(f);
    if (st != TL_OK) {
        files_free(f);
        return st;
    }
    const tl_input_config *in = &job->r->input;
    *input = (tl_input){.input_fn = input_fn,
                        .user = f,
                        .feature_keys = in->feature_keys,
                        .num_feature_keys = in->num_feature_keys,
                        .label_key = strcmp(in->dataset, "csv") == 0 && in->label_column ? in->label_column
                                                                                         : in->label_key};
    *out = f;
    return TL_OK;
}

tl_status tl_job_files_open(tl_job *job)
{
    const tl_input_config *in = &job->r->input;
    tl_status st = TL_OK;
    job->file_input = true;
    if (job->opt.train)
        st = files_open(job, in->files, in->num_files, &job->train_input, &job->files[0]);
    if (st == TL_OK && in->eval_files != NULL)
        st = files_open(job, in->eval_files, in->num_eval_files, &job->eval_input, &job->files[1]);
    else if (st == TL_OK)
        st = files_open(job, in->files, in->num_files, &job->eval_input, &job->files[1]);
    return st;
}

void tl_job_files_close(tl_job *job)
{
    files_free(job->files[0]);
    files_free(job->files[1]);
    job->files[0] = job->files[1] = NULL;
}

int tl_job_files_list(const tl_job *job, int split, const char *const **names)
{
    const struct tl_job_files *f = job->files[split];
    *names = f != NULL ? (const char *const *)f->names : NULL;
    return f != NULL ? f->nnames : 0;
}

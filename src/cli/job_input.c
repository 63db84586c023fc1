/* job_input.c — the file datasets of the "input" section (tfrecord, criteo,
 * csv, idx) as the input_fn `train` and `evaluate` hand the estimator, the
 * record count that `epochs` needs, and the in-memory copy of eval_files
 * that `predict` reads (tl_estimator_predict takes memory only).
 *
 * One input_fn invocation (ctx: index of total, mode, batch_size) builds
 *
 *   tfrecord: files -> [shard files] -> interleave -> [shard records] -> parse_example
 *   criteo, csv: [this shard's files] -> reader -> [shard records]
 *   idx:      images + labels -> [shard records]
 *   then:     shuffle (when shuffle_buffer_size) -> repeat (TRAIN) -> batch(drop_remainder) -> prefetch
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

#include "cli.h"

/* What an input_fn of one mode reads: the patterns, and the files they
 * match in order (for sharding by file). */
struct cli_files {
    cli_job *job;
    const char *const *patterns; /* (npatterns) borrowed from the configuration */
    int npatterns;
    char **names;                /* (nnames) the matched files, glob-escaped */
    int nnames;
};

bool cli_is_file_dataset(const tl_run_config *r)
{
    const char *d = r->input.dataset;
    return strcmp(d, "tfrecord") == 0 || strcmp(d, "criteo") == 0 || strcmp(d, "csv") == 0 || strcmp(d, "idx") == 0;
}

static void files_free(struct cli_files *f)
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
static tl_status files_expand(struct cli_files *f)
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
static tl_status source(const struct cli_files *f, int total, int index, tl_dataset **out)
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
        st = tl_dataset_idx(f->patterns[0], f->npatterns > 1 ? f->patterns[1] : NULL, (float)in->idx_scale, &ds);
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

/* The input_fn of `train` and `evaluate`. */
static tl_status input_fn(const tl_input_context *ctx, void *user, tl_dataset **out)
{
    const struct cli_files *f = user;
    const tl_run_config *r = f->job->r;
    const tl_input_config *in = &r->input;
    tl_dataset *ds;
    tl_status st = source(f, ctx->total, ctx->index, &ds);
    if (st != TL_OK)
        return st;
    uint64_t seed = r->tf_random_seed.set ? (uint64_t)r->tf_random_seed.value : 0;
    if ((in->shuffle_buffer_size.set &&
         (st = tl_dataset_shuffle(ds, in->shuffle_buffer_size.value, seed, in->reshuffle_each_iteration, &ds)) !=
             TL_OK) ||
        (ctx->mode == TL_MODE_TRAIN && (st = tl_dataset_repeat(ds, -1, &ds)) != TL_OK) ||
        (st = tl_dataset_batch(ds, ctx->batch_size, true, &ds)) != TL_OK ||
        (in->prefetch > 0 && (st = tl_dataset_prefetch(ds, in->prefetch, &ds)) != TL_OK))
        return st;
    *out = ds;
    return TL_OK;
}

/* Returns an exit status. */
static int files_open(cli_job *job, const char *const *patterns, int n, tl_input *input, struct cli_files **out)
{
    struct cli_files *f = calloc(1, sizeof *f);
    if (f == NULL)
        return cli_fail(TL_ENOMEM);
    *f = (struct cli_files){job, patterns, n, NULL, 0};
    tl_status st = strcmp(job->r->input.dataset, "idx") == 0 ? TL_OK : files_expand(f);
    if (st != TL_OK) {
        files_free(f);
        return cli_fail(st);
    }
    const tl_input_config *in = &job->r->input;
    *input = (tl_input){.input_fn = input_fn,
                        .user = f,
                        .feature_keys = in->feature_keys,
                        .num_feature_keys = in->num_feature_keys,
                        .label_key = strcmp(in->dataset, "csv") == 0 && in->label_column ? in->label_column
                                                                                         : in->label_key};
    *out = f;
    return 0;
}

int cli_files_open(cli_job *job, bool need_train)
{
    const tl_input_config *in = &job->r->input;
    int rc = 0;
    job->file_input = true;
    if (need_train)
        rc = files_open(job, in->files, in->num_files, &job->train_input, &job->files[0]);
    if (rc == 0 && in->eval_files != NULL)
        rc = files_open(job, in->eval_files, in->num_eval_files, &job->eval_input, &job->files[1]);
    else if (rc == 0)
        rc = files_open(job, in->files, in->num_files, &job->eval_input, &job->files[1]);
    return rc;
}

void cli_files_close(cli_job *job)
{
    files_free(job->files[0]);
    files_free(job->files[1]);
    free(job->mem_features);
    free(job->mem_labels);
}

tl_status cli_files_count(cli_job *job, int64_t *count)
{
    const tl_input_config *in = &job->r->input;
    struct cli_files f = {job, in->files, in->num_files, NULL, 0};
    tl_dataset *ds;
    *count = 0;
    tl_status st;
    if (strcmp(in->dataset, "tfrecord") == 0) {
        /* Framing only: a record is counted without being parsed. */
        tl_tfrecord_options o;
        tfrecord_options(in, &o);
        st = tl_dataset_tfrecord(in->files, in->num_files, &o, &ds);
    } else {
        st = source(&f, 1, 0, &ds);
    }
    if (st != TL_OK)
        return st;
    const tl_element *e;
    while ((st = tl_dataset_next(ds, &e)) == TL_OK && e != NULL)
        ++*count;
    tl_dataset_destroy(ds);
    return st;
}

tl_status cli_job_train(cli_job *job, tl_train_result *tr)
{
    if (job->file_input)
        return tl_estimator_train_input(job->est, &job->train_input, tr);
    return tl_estimator_train(job->est, &job->train, tr);
}

tl_status cli_job_evaluate(cli_job *job, tl_eval_result *er)
{
    if (job->file_input)
        return tl_estimator_evaluate_input(job->est, &job->eval_input, er);
    return tl_estimator_evaluate(job->est, &job->test, er);
}

/* ---- predict: eval_files into memory ------------------------------------ */

/* The command's own errors are printed here (the library's error message
 * cannot be set from outside it); the status then only carries the exit code. */
static tl_status usage(tl_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static tl_status usage(tl_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return st;
}

static bool numeric(tl_data_type t)
{
    return t == TL_DT_FLOAT32 || t == TL_DT_INT32 || t == TL_DT_INT64;
}

static int64_t size_of(const tl_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= t->shape[d];
    return n;
}

/* The feature tensors of e in order (the estimator's rule: feature_keys, or
 * every dense numeric tensor but the label), into idx (room for
 * e->num_tensors + num_feature_keys). */
static tl_status feature_layout(const tl_input *input, const tl_element *e, int *idx, int *n)
{
    *n = 0;
    if (input->feature_keys != NULL) {
        for (int k = 0; k < input->num_feature_keys; k++) {
            int i = 0;
            while (i < e->num_tensors && strcmp(e->tensors[i].key, input->feature_keys[k]) != 0)
                i++;
            if (i == e->num_tensors)
                return usage(TL_EINVAL, "eval_files: the examples have no feature tensor \"%s\"",
                             input->feature_keys[k]);
            idx[(*n)++] = i;
        }
    } else {
        for (int i = 0; i < e->num_tensors; i++)
            if (strcmp(e->tensors[i].key, input->label_key) != 0 && numeric(e->tensors[i].dtype) &&
                !e->tensors[i].ragged)
                idx[(*n)++] = i;
    }
    for (int k = 0; k < *n; k++) {
        const tl_tensor *t = &e->tensors[idx[k]];
        if (!numeric(t->dtype) || t->ragged)
            return usage(TL_EINVAL, "input tensor \"%s\" cannot be a model feature: it is %s", t->key,
                         t->ragged ? "ragged" : "bytes");
    }
    if (*n == 0)
        return usage(TL_EINVAL, "eval_files: the examples have no dense numeric feature tensor besides the label "
                                "\"%s\"", input->label_key);
    return TL_OK;
}

static float value_at(const tl_tensor *t, int64_t j)
{
    switch (t->dtype) {
    case TL_DT_FLOAT32: return ((const float *)t->data)[j];
    case TL_DT_INT32: return (float)((const int32_t *)t->data)[j];
    default: return (float)((const int64_t *)t->data)[j];
    }
}

/* The examples of e into row (D values); the first example fixes each
 * feature tensor's width (widths, nf of them). */
static tl_status copy_example(const tl_element *e, const int *idx, int nf, const int64_t *widths, int64_t n,
                              float *row)
{
    for (int k = 0; k < nf; k++) {
        const tl_tensor *x = &e->tensors[idx[k]];
        int64_t w = size_of(x);
        if (w != widths[k])
            return usage(TL_EINVAL, "eval_files: example %lld's tensor \"%s\" has %lld values, example 0's %lld",
                         (long long)n, x->key, (long long)w, (long long)widths[k]);
        for (int64_t j = 0; j < w; j++)
            row[j] = value_at(x, j);
        row += w;
    }
    return TL_OK;
}

/* Reads eval_files (the whole of them, in file order: no shard, shuffle or
 * repeat) into job->test. Returns an exit status. */
int cli_files_load(cli_job *job)
{
    if (job->test.features != NULL)
        return 0;
    const tl_input *input = &job->eval_input;
    tl_dataset *ds;
    tl_status st = source(job->files[1], 1, 0, &ds);
    if (st != TL_OK)
        return cli_fail(st);
    const tl_element *e;
    int *idx = NULL, nf = 0;
    int64_t *widths = NULL, D = 0, n = 0, cap = 0;
    int32_t max_label = 1;
    bool own_error = false;
    tl_labeled_data *t = &job->test;
    while ((st = tl_dataset_next(ds, &e)) == TL_OK && e != NULL) {
        if (idx == NULL) {
            size_t room = (size_t)e->num_tensors + (size_t)input->num_feature_keys + 1;
            idx = malloc(room * sizeof *idx);
            widths = malloc(room * sizeof *widths);
            if (idx == NULL || widths == NULL) {
                st = TL_ENOMEM;
                break;
            }
            if ((st = feature_layout(input, e, idx, &nf)) != TL_OK) {
                own_error = true;
                break;
            }
            for (int k = 0; k < nf; k++)
                D += widths[k] = size_of(&e->tensors[idx[k]]);
            const tl_tensor *t0 = &e->tensors[idx[0]];
            t->feature_rank = 1;
            t->feature_shape[0] = D;
            if (nf == 1 && t0->rank >= 1 && t0->rank <= TL_MAX_FEATURE_RANK) {
                t->feature_rank = t0->rank;
                memcpy(t->feature_shape, t0->shape, (size_t)t0->rank * sizeof *t0->shape);
            }
            t->num_features = D;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            float *x = realloc(job->mem_features, (size_t)cap * (size_t)(D ? D : 1) * sizeof *x);
            if (x != NULL)
                job->mem_features = x;
            int32_t *y = x != NULL ? realloc(job->mem_labels, (size_t)cap * sizeof *y) : NULL;
            if (y == NULL) {
                st = TL_ENOMEM;
                break;
            }
            job->mem_labels = y;
        }
        if ((st = copy_example(e, idx, nf, widths, n, job->mem_features + n * D)) != TL_OK) {
            own_error = true;
            break;
        }
        /* Predict ignores the labels; an example without one gets 0. */
        const tl_tensor *l = tl_element_find(e, input->label_key);
        int32_t label = l != NULL && numeric(l->dtype) && size_of(l) >= 1 ? (int32_t)value_at(l, 0) : 0;
        job->mem_labels[n++] = label;
        if (label > max_label)
            max_label = label;
    }
    free(idx);
    free(widths);
    tl_dataset_destroy(ds);
    if (st != TL_OK)
        return own_error ? EXIT_BAD_INPUT : cli_fail(st);
    if (n == 0) {
        fprintf(stderr, "error: eval_files hold no examples to predict\n");
        return EXIT_BAD_INPUT;
    }
    t->num_examples = n;
    t->num_classes = max_label + 1;
    t->features = job->mem_features;
    t->labels = job->mem_labels;
    return 0;
}

/* data_convert.c — `tpuloop data convert`: IDX, CSV or Criteo TSV into a
 * TFRecord file (or shards) of tf.Example, written with tl_example_builder.
 *
 *   tpuloop data convert --from=idx IMAGES [--labels=LABELS] --out=F
 *   tpuloop data convert --from=csv IN... --columns=NAME:TYPE,... [--label_column=NAME] --out=F
 *   tpuloop data convert --from=criteo IN... [--vocab_sizes=V|V1,...,V26] --out=F
 *   common: [--compression=GZIP|ZLIB|NONE] [--shards=N]
 *
 * The features, per source:
 *   idx     "image": the example's elements, flattened row-major (an (N, 28,
 *           28) file gives 784 values): int64_list for the integer types (u8,
 *           i8, i16, i32: exact, and packed varints are smaller than floats),
 *           float_list for f32 and f64 (f64 rounded to float32, the only
 *           float a tf.Example holds); "label": int64_list of one value from
 *           an integer IDX file of shape (N), when --labels is given.
 *   csv     one feature per column, named as in the header: float_list for
 *           float columns, int64_list for int64, bytes_list for string; the
 *           --label_column (an int64 column) is written as "label", the key
 *           the other two sources use.
 *   criteo  "label": int64_list (0 or 1); "dense": float_list of 13, after
 *           the reader's transform logf(max(x, 0) + 1); "C1" .. "C26":
 *           int64_list of one id each, modulo --vocab_sizes where set. These
 *           are the tensors the Criteo dataset hands the pipeline, so a
 *           reader of the TFRecord gets the same values with no transform
 *           of its own, and each column's ids reach the embedding feature of
 *           its name.
 *
 * Output: --compression, else GZIP when the name ends in ".gz", else NONE.
 * With --shards=N the examples go round-robin (example i to shard i % N,
 * so reading the shards interleaved gives back the input order) into N
 * files named as Beam's WriteToTFRecord names shards (prefix, the tag
 * -SSSSS-of-NNNNN, suffix), the suffix being the name's extensions that say
 * what the file is — a record extension (.tfrecord, .tfrecords, .tfrec,
 * .tfr), then a compression one (.gz, .zlib), either or both:
 *
 *   --out=data/train.tfrecord.gz --shards=8   data/train-00000-of-00008.tfrecord.gz ... -00007-of-00008...
 *   --out=data/train --shards=8               data/train-00000-of-00008 ...
 *   --out=data_tfrecord.gz --shards=2         data_tfrecord-00000-of-00002.gz (TFX's ExampleGen names)
 *
 * so the glob PREFIX-*-of-0000N.EXT ("data/train-*-of-00008.tfrecord.gz")
 * names exactly the shards, and the extensions stay last for the tools that
 * go by them.
 *
 * Atomic: each file is written through an atomic tl_record_writer (a
 * temporary file beside it, "<name>.tmp-<pid>-<n>"). Only after every input
 * has been read and every file finished and synced without error are they
 * renamed to their names; on any error the temporary files are removed, so
 * nothing half-written ever stands under an output name (an interrupted run
 * leaves only its .tmp- files). A summary JSON line goes to stdout.
 *
 * Exit status as main.c's rule: 2 for bad arguments and bad input data
 * (TL_EPARSE, TL_EINVAL from the readers), 1 when a file cannot be read or
 * written. Everything here goes through the public API (tpuloop/tfrecord.h
 * writes the files). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

#define MAX_SHARDS 10000

typedef struct convert_args {
    const char *from, *out, *labels, *label_column, *columns, *vocab_sizes;
    char **inputs; /* (ninputs) */
    int ninputs;
    tl_record_compression comp;
    bool comp_given;
    int shards; /* 0: one file named --out */
} convert_args;

/* ---- the output files ------------------------------------------------------ */

typedef struct shard {
    char *path;
    tl_record_writer *w; /* atomic; NULL once closed */
    uint64_t records;
} shard;

typedef struct sink {
    shard *s; /* (n) */
    int n;
    uint64_t records;
    tl_example_builder *b;
    char err[1024]; /* the message of a failure found here; "" when the library's (tl_last_error) */
} sink;

/* Records a failure of this file's own checks in k->err and returns st. */
static tl_status failf(sink *k, tl_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static tl_status failf(sink *k, tl_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->err, sizeof k->err, fmt, ap);
    va_end(ap);
    return st;
}

/* The length of name[0..len) without a final suffix from list, when one
 * ends it and something of the file name is left before it. */
static size_t strip_suffix(const char *name, size_t len, size_t base, const char *const *list)
{
    for (; *list != NULL; list++) {
        size_t n = strlen(*list);
        if (len > base + n && memcmp(name + len - n, *list, n) == 0)
            return len - n;
    }
    return len;
}

/* The name of shard i of n for out: Beam's prefix-SSSSS-of-NNNNN-suffix,
 * the suffix being out's record and compression extensions (see above). */
static char *shard_name(const char *out, int i, int n)
{
    static const char *const compressed[] = {".gz", ".zlib", NULL};
    static const char *const records[] = {".tfrecords", ".tfrecord", ".tfrec", ".tfr", NULL};
    const char *slash = strrchr(out, '/');
    size_t len = strlen(out), base = slash != NULL ? (size_t)(slash + 1 - out) : 0;
    size_t stem = strip_suffix(out, strip_suffix(out, len, base, compressed), base, records);
    size_t cap = len + 32;
    char *p = malloc(cap);
    if (p != NULL)
        snprintf(p, cap, "%.*s-%05d-of-%05d%s", (int)stem, out, i, n, out + stem);
    return p;
}

/* Drops every file not yet renamed: the atomic writers remove their
 * temporary files, and the names keep what they held. */
static void sink_abort(sink *k)
{
    for (int i = 0; i < k->n; i++) {
        tl_record_writer_destroy(k->s[i].w);
        free(k->s[i].path);
    }
    free(k->s);
    tl_example_builder_destroy(k->b);
    memset(k, 0, sizeof *k);
}

static tl_status sink_open(sink *k, const convert_args *a)
{
    int n = a->shards > 0 ? a->shards : 1;
    memset(k, 0, sizeof *k);
    k->s = calloc((size_t)n, sizeof *k->s);
    if (k->s == NULL)
        return TL_ENOMEM;
    k->n = n;
    tl_record_writer_options o;
    tl_record_writer_options_init(&o);
    o.compression = a->comp;
    o.atomic = true;
    tl_status st = tl_example_builder_create(&k->b);
    for (int i = 0; i < n && st == TL_OK; i++) {
        shard *s = &k->s[i];
        s->path = a->shards > 0 ? shard_name(a->out, i, n) : strdup(a->out);
        if (s->path == NULL) {
            st = TL_ENOMEM;
            break;
        }
        st = tl_record_writer_open(s->path, &o, &s->w);
    }
    return st;
}

static tl_status sink_write(sink *k)
{
    const uint8_t *rec;
    size_t len;
    tl_status st = tl_example_builder_serialize(k->b, &rec, &len);
    if (st != TL_OK)
        return st;
    shard *s = &k->s[k->records % (uint64_t)k->n];
    if ((st = tl_record_writer_write(s->w, rec, len)) != TL_OK)
        return st;
    s->records++;
    k->records++;
    return TL_OK;
}

/* Finishes every file (trailer, sync) and only then renames each to its
 * name, so that a failure while finishing leaves every name as it was.
 * Adds "files" and "bytes" to summary. On error the caller aborts. */
static tl_status sink_commit(sink *k, json_t *summary)
{
    tl_status st = TL_OK;
    for (int i = 0; i < k->n && st == TL_OK; i++)
        st = tl_record_writer_finish(k->s[i].w);
    for (int i = 0; i < k->n && st == TL_OK; i++) {
        st = tl_record_writer_close(k->s[i].w);
        k->s[i].w = NULL;
    }
    if (st != TL_OK)
        return st;
    json_t *files = json_array();
    long long total = 0;
    for (int i = 0; i < k->n; i++) {
        struct stat sb;
        long long bytes = stat(k->s[i].path, &sb) == 0 ? (long long)sb.st_size : -1;
        total += bytes > 0 ? bytes : 0;
        json_array_append_new(files, json_pack("{s:s, s:I, s:I}", "path", k->s[i].path, "records",
                                               (json_int_t)k->s[i].records, "bytes", (json_int_t)bytes));
    }
    json_object_set_new(summary, "files", files);
    json_object_set_new(summary, "bytes", json_integer(total));
    return TL_OK;
}

static void sink_close(sink *k)
{
    for (int i = 0; i < k->n; i++)
        free(k->s[i].path);
    free(k->s);
    tl_example_builder_destroy(k->b);
}

/* ---- the sources ---------------------------------------------------------- */

static bool idx_integer(tl_idx_dtype t)
{
    return t == TL_IDX_U8 || t == TL_IDX_I8 || t == TL_IDX_I16 || t == TL_IDX_I32;
}

/* Element i of a as int64 (integer types) or double. */
static int64_t idx_int(const tl_idx *a, int64_t i)
{
    const void *d = tl_idx_data(a);
    switch (tl_idx_type(a)) {
    case TL_IDX_U8: return ((const uint8_t *)d)[i];
    case TL_IDX_I8: return ((const int8_t *)d)[i];
    case TL_IDX_I16: return ((const int16_t *)d)[i];
    case TL_IDX_I32: return ((const int32_t *)d)[i];
    default: return 0;
    }
}

static tl_status convert_idx(const convert_args *a, sink *k)
{
    tl_idx *img = NULL, *lab = NULL;
    int64_t *ibuf = NULL;
    float *fbuf = NULL;
    tl_status st = tl_idx_read_file(a->inputs[0], NULL, &img);
    if (st == TL_OK && a->labels != NULL)
        st = tl_idx_read_file(a->labels, NULL, &lab);
    if (st != TL_OK)
        goto out;
    int64_t n = tl_idx_dim(img, 0), per = n > 0 ? tl_idx_count(img) / n : 0;
    if (lab != NULL && (tl_idx_ndim(lab) != 1 || tl_idx_dim(lab, 0) != n || !idx_integer(tl_idx_type(lab)))) {
        st = failf(k, TL_EINVAL, "%s: labels must be an integer IDX file of shape (%lld) to match %s; got %s of %d "
                      "dimension%s, the first %lld",
                      a->labels, (long long)n, a->inputs[0], tl_idx_dtype_name(tl_idx_type(lab)), tl_idx_ndim(lab),
                      tl_idx_ndim(lab) == 1 ? "" : "s", (long long)tl_idx_dim(lab, 0));
        goto out;
    }
    bool ints = idx_integer(tl_idx_type(img));
    size_t bytes = (size_t)(per > 0 ? per : 1) * (ints ? sizeof *ibuf : sizeof *fbuf);
    if (ints)
        ibuf = malloc(bytes);
    else
        fbuf = malloc(bytes);
    if (ibuf == NULL && fbuf == NULL) {
        st = TL_ENOMEM;
        goto out;
    }
    for (int64_t i = 0; i < n && st == TL_OK; i++) {
        tl_example_builder_reset(k->b);
        for (int64_t j = 0; j < per; j++) {
            int64_t e = i * per + j;
            if (ints)
                ibuf[j] = idx_int(img, e);
            else if (tl_idx_type(img) == TL_IDX_F32)
                fbuf[j] = ((const float *)tl_idx_data(img))[e];
            else
                fbuf[j] = (float)((const double *)tl_idx_data(img))[e];
        }
        st = ints ? tl_example_builder_add_int64s(k->b, "image", ibuf, (size_t)per)
                  : tl_example_builder_add_floats(k->b, "image", fbuf, (size_t)per);
        if (st == TL_OK && lab != NULL) {
            int64_t y = idx_int(lab, i);
            st = tl_example_builder_add_int64s(k->b, "label", &y, 1);
        }
        if (st == TL_OK)
            st = sink_write(k);
    }
out:
    free(ibuf);
    free(fbuf);
    tl_idx_destroy(img);
    tl_idx_destroy(lab);
    return st;
}

/* Parses "name:type,..." into cols (names point into the copy *buf). */
static int parse_columns(const char *spec, tl_csv_column **cols, int *n, char **buf)
{
    *buf = strdup(spec);
    int cap = 1;
    for (const char *p = spec; *p; p++)
        cap += *p == ',';
    *cols = calloc((size_t)cap, sizeof **cols);
    if (*buf == NULL || *cols == NULL) {
        fprintf(stderr, "error: out of memory\n");
        return EXIT_RUNTIME;
    }
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(*buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(tok, ':');
        if (colon == NULL || colon == tok)
            return cli_usage_error("--columns: '%s' is not NAME:TYPE (TYPE float, int64 or string)", tok);
        *colon = '\0';
        const char *t = colon + 1;
        tl_csv_type type;
        if (strcmp(t, "float") == 0 || strcmp(t, "float32") == 0)
            type = TL_CSV_FLOAT32;
        else if (strcmp(t, "int64") == 0 || strcmp(t, "int") == 0)
            type = TL_CSV_INT64;
        else if (strcmp(t, "string") == 0 || strcmp(t, "bytes") == 0)
            type = TL_CSV_STRING;
        else
            return cli_usage_error("--columns: column '%s' has type '%s'; allowed: float, int64, string", tok, t);
        (*cols)[(*n)++] = (tl_csv_column){tok, type};
    }
    if (*n == 0)
        return cli_usage_error("--columns needs at least one NAME:TYPE");
    return 0;
}

static tl_status convert_csv(const convert_args *a, const tl_csv_column *cols, int ncols, sink *k)
{
    tl_csv_options o;
    tl_csv_options_init(&o);
    o.columns = cols;
    o.num_columns = ncols;
    o.label_column = a->label_column;
    tl_status st = TL_OK;
    for (int f = 0; f < a->ninputs && st == TL_OK; f++) {
        tl_csv_reader *r;
        if ((st = tl_csv_reader_create_file(a->inputs[f], &o, &r)) != TL_OK)
            break;
        bool got;
        while ((st = tl_csv_reader_next(r, &got)) == TL_OK && got) {
            tl_example_builder_reset(k->b);
            for (int c = 0; c < ncols && st == TL_OK; c++) {
                bool is_label = a->label_column != NULL && strcmp(cols[c].name, a->label_column) == 0;
                const char *key = is_label ? "label" : cols[c].name;
                if (cols[c].type == TL_CSV_FLOAT32) {
                    float v = tl_csv_reader_float(r, c);
                    st = tl_example_builder_add_floats(k->b, key, &v, 1);
                } else if (cols[c].type == TL_CSV_INT64) {
                    int64_t v = tl_csv_reader_int64(r, c);
                    st = tl_example_builder_add_int64s(k->b, key, &v, 1);
                } else {
                    tl_bytes v;
                    v.data = (const uint8_t *)tl_csv_reader_string(r, c, &v.len);
                    st = tl_example_builder_add_bytes(k->b, key, &v, 1);
                }
            }
            if (st == TL_OK)
                st = sink_write(k);
            if (st != TL_OK)
                break;
        }
        tl_csv_reader_destroy(r);
    }
    return st;
}

static int parse_vocab(const char *spec, tl_criteo_options *o)
{
    char *end;
    int n = 0;
    const char *p = spec;
    for (;;) {
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno != 0 || v < 0 || (*end != ',' && *end != '\0') || n == TL_CRITEO_NUM_CAT)
            return cli_usage_error("--vocab_sizes must be one size >= 0 or %d comma-separated sizes (got '%s')",
                                   TL_CRITEO_NUM_CAT, spec);
        o->vocab_sizes[n++] = v;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    if (n == 1)
        for (int c = 1; c < TL_CRITEO_NUM_CAT; c++)
            o->vocab_sizes[c] = o->vocab_sizes[0];
    else if (n != TL_CRITEO_NUM_CAT)
        return cli_usage_error("--vocab_sizes has %d sizes; give one (for every column) or %d", n,
                               TL_CRITEO_NUM_CAT);
    return 0;
}

/* Criteo's names of its categorical columns. */
static const char *const criteo_cat_keys[TL_CRITEO_NUM_CAT] = {
    "C1",  "C2",  "C3",  "C4",  "C5",  "C6",  "C7",  "C8",  "C9",  "C10", "C11", "C12", "C13",
    "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21", "C22", "C23", "C24", "C25", "C26"};

static tl_status convert_criteo(const convert_args *a, const tl_criteo_options *o, sink *k)
{
    tl_status st = TL_OK;
    for (int f = 0; f < a->ninputs && st == TL_OK; f++) {
        tl_criteo_reader *r;
        if ((st = tl_criteo_reader_create_file(a->inputs[f], o, &r)) != TL_OK)
            break;
        tl_criteo_example ex;
        bool got;
        while ((st = tl_criteo_reader_next(r, &ex, &got)) == TL_OK && got) {
            int64_t label = ex.label;
            tl_example_builder_reset(k->b);
            st = tl_example_builder_add_int64s(k->b, "label", &label, 1);
            if (st == TL_OK)
                st = tl_example_builder_add_floats(k->b, "dense", ex.dense, TL_CRITEO_NUM_DENSE);
            for (int c = 0; c < TL_CRITEO_NUM_CAT && st == TL_OK; c++)
                st = tl_example_builder_add_int64s(k->b, criteo_cat_keys[c], &ex.ids[c], 1);
            if (st == TL_OK)
                st = sink_write(k);
            if (st != TL_OK)
                break;
        }
        tl_criteo_reader_destroy(r);
    }
    return st;
}

/* ---- data convert ----------------------------------------------------------- */

static int parse_args(int argc, char **argv, convert_args *a)
{
    memset(a, 0, sizeof *a);
    a->inputs = argv;
    static const char *const names[] = {"--from=", "--out=", "--labels=", "--label_column=", "--columns=",
                                        "--vocab_sizes="};
    const char **slots[] = {&a->from, &a->out, &a->labels, &a->label_column, &a->columns, &a->vocab_sizes};
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        bool done = false;
        for (size_t k = 0; k < sizeof names / sizeof *names && !done; k++)
            if (strncmp(s, names[k], strlen(names[k])) == 0) {
                *slots[k] = s + strlen(names[k]);
                done = true;
            }
        if (done)
            continue;
        if (strncmp(s, "--compression=", 14) == 0) {
            if (tl_record_compression_parse(s + 14, &a->comp) != TL_OK || a->comp == TL_RECORD_AUTO)
                return cli_usage_error("--compression must be GZIP, ZLIB or NONE (got '%s')", s + 14);
            a->comp_given = true;
        } else if (strncmp(s, "--shards=", 9) == 0) {
            char *end;
            errno = 0;
            long v = strtol(s + 9, &end, 10);
            if (s[9] == '\0' || *end != '\0' || errno != 0 || v < 1 || v > MAX_SHARDS)
                return cli_usage_error("--shards must be a whole number in 1..%d (got '%s')", MAX_SHARDS, s + 9);
            a->shards = (int)v;
        } else if (strncmp(s, "--", 2) == 0) {
            return cli_usage_error("unknown option '%s' for `tpuloop data convert`", s);
        } else {
            a->inputs[a->ninputs++] = argv[i];
        }
    }
    if (a->from == NULL)
        return cli_usage_error("`tpuloop data convert` needs --from=idx, --from=csv or --from=criteo");
    bool idx = strcmp(a->from, "idx") == 0, csv = strcmp(a->from, "csv") == 0, criteo = strcmp(a->from, "criteo") == 0;
    if (!idx && !csv && !criteo)
        return cli_usage_error("--from must be idx, csv or criteo (got '%s')", a->from);
    if (a->out == NULL || a->out[0] == '\0')
        return cli_usage_error("`tpuloop data convert` needs --out=FILE.tfrecord");
    if (a->ninputs == 0)
        return cli_usage_error("`tpuloop data convert --from=%s` needs an INPUT file", a->from);
    if (idx && a->ninputs > 1)
        return cli_usage_error("--from=idx takes one images file (and --labels=FILE); got %d inputs", a->ninputs);
    if (!idx && a->labels != NULL)
        return cli_usage_error("--labels is for --from=idx; --from=%s reads the label from its rows", a->from);
    if (!csv && (a->columns != NULL || a->label_column != NULL))
        return cli_usage_error("--%s is for --from=csv", a->columns != NULL ? "columns" : "label_column");
    if (csv && a->columns == NULL)
        return cli_usage_error("--from=csv needs --columns=NAME:TYPE,... (TYPE float, int64 or string), in the "
                               "header's order");
    if (!criteo && a->vocab_sizes != NULL)
        return cli_usage_error("--vocab_sizes is for --from=criteo");
    size_t len = strlen(a->out);
    if (!a->comp_given)
        a->comp = len > 3 && strcmp(a->out + len - 3, ".gz") == 0 ? TL_RECORD_GZIP : TL_RECORD_NONE;
    return 0;
}

int cli_data_convert(int argc, char **argv)
{
    convert_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc;
    tl_csv_column *cols = NULL;
    char *colbuf = NULL;
    int ncols = 0;
    tl_criteo_options co;
    tl_criteo_options_init(&co);
    if (a.columns != NULL && (rc = parse_columns(a.columns, &cols, &ncols, &colbuf)) != 0)
        goto out;
    if (a.label_column != NULL) {
        for (int c = 0; c < ncols; c++)
            if (strcmp(cols[c].name, "label") == 0 && strcmp(a.label_column, "label") != 0) {
                rc = cli_usage_error("--label_column=%s is written as \"label\", but another column is named "
                                     "\"label\"",
                                     a.label_column);
                goto out;
            }
    }
    if (a.vocab_sizes != NULL && (rc = parse_vocab(a.vocab_sizes, &co)) != 0)
        goto out;
    sink k;
    tl_status st = sink_open(&k, &a);
    if (st == TL_OK) {
        if (strcmp(a.from, "idx") == 0)
            st = convert_idx(&a, &k);
        else if (strcmp(a.from, "csv") == 0)
            st = convert_csv(&a, cols, ncols, &k);
        else
            st = convert_criteo(&a, &co, &k);
    }
    json_t *summary = json_object();
    json_object_set_new(summary, "from", json_string(a.from));
    json_t *inputs = json_array();
    for (int i = 0; i < a.ninputs; i++)
        json_array_append_new(inputs, json_string(a.inputs[i]));
    json_object_set_new(summary, "inputs", inputs);
    json_object_set_new(summary, "records", json_integer((json_int_t)k.records));
    json_object_set_new(summary, "compression", json_string(tl_record_compression_name(a.comp)));
    if (st == TL_OK)
        st = sink_commit(&k, summary);
    if (st != TL_OK) {
        if (k.err[0] != '\0' || st == TL_ENOMEM)
            fprintf(stderr, "error: %s\n", st == TL_ENOMEM ? "out of memory" : k.err);
        rc = k.err[0] != '\0' || st == TL_ENOMEM ? (tl_status_is_input_error(st) ? EXIT_BAD_INPUT : EXIT_RUNTIME)
                                                 : cli_fail(st);
        sink_abort(&k);
        json_decref(summary);
        goto out;
    }
    sink_close(&k);
    json_dumpf(summary, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
    putchar('\n');
    json_decref(summary);
out:
    free(cols);
    free(colbuf);
    return rc;
}

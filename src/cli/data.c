/* data.c — `tpuloop data inspect FILE...` (and the dispatch to `data
 * convert`, data_convert.c).
 *
 * inspect reads every record of each TFRecord file once, as a TensorFlow
 * input pipeline would, and reports what a user asks before training on it:
 * the compression (AUTO, by the first bytes as tl_record_reader_open
 * decides, unless --compression names it), the record count, the bytes on
 * disk and in the records, whether every length and data CRC is valid (and,
 * if not, the first bad record with its byte offset), and the feature
 * schema over all
 * records: each key with its kind, how many records have it, and the least
 * and most values a record gives it. With --records=N it also prints the
 * first N records as JSON.
 *
 * Example or SequenceExample: every record is parsed as a SequenceExample,
 * which reads an Example's bytes too (an Example is field 1, Features; a
 * SequenceExample is field 1, its context Features, and field 2, its
 * FeatureLists), and when that fails as an Example (to which a field 2 is
 * an unknown field). A file is a SequenceExample file when any record has a
 * feature list, else an Example file; a record that parses as neither (an
 * event file's records, say) is counted in unparsed_records, which is a
 * finding, not a failure: inspect checks the framing.
 *
 * The report, per file (--json: {"files": [...], "valid": every file's}):
 * file; compression ("NONE", "GZIP", "ZLIB"; null when the file could not
 * be opened); file_bytes on disk; records; record_bytes, the payloads'
 * sum; valid; error, the first failure (for a bad record: the file, the
 * record's index and byte offset, uncompressed in a GZIP or ZLIB file, with
 * the compressed offset beside it); message_type ("tf.Example",
 * "tf.SequenceExample", "unknown" when no record parses, null for an empty
 * file); unparsed_records and parse_error (the first); the schema,
 * "features" (for a SequenceExample file "context" and "feature_lists"),
 * each key with kind (int64_list, float_list or bytes_list; "empty" when
 * every one is a Feature with no kind; "mixed" for several list kinds),
 * kinds (how many of each, "empty" included), records (how many have the
 * key), min_values and max_values (in one record; for a feature list in one
 * step, and min_steps, max_steps in one record); with --records,
 * first_records. Without --json the same as text, then the record lines;
 * a file's error is not in its text report but on stderr, once.
 *
 * The record lines, keys sorted (strcmp order):
 *   {"features": {"age": {"int64_list": [29]}, "name": {"bytes_list": ["Ym9i"]}}}
 *   {"context": {...}, "feature_lists": {"s": [{"bytes_list": ["MTA1MDE="]}, ...]}}
 * a Feature with no kind is {}; bytes are base64 (RFC 4648, padded); int64
 * values are JSON integers, exact; floats are written with 9 significant
 * digits, which gives back the float32's bits when read as a double and
 * rounded to float, and the non-finite ones, which JSON cannot hold, as the
 * strings "nan", "inf" and "-inf" (a NaN's sign and payload are not kept).
 * A record that is not an Example is {"error": "<why>"}.
 *
 * Exit status: 0 when every file was read to its end with valid CRCs; 2
 * for bad arguments; 1 when a file cannot be used — missing, unreadable,
 * not TFRecord data, corrupt or truncated — as `ckpt inspect` exits 1 for a
 * corrupt checkpoint. Each such file's error goes to stderr once ("error:
 * <file>: ..."), and the report of the other files, and of the failing one
 * up to its bad record, is printed anyway.
 *
 * Everything here goes through the public API (tpuloop/tfrecord.h reads
 * the files, tpuloop/example.h parses the records). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* ---- per-key statistics ------------------------------------------------- */

typedef struct key_stats {
    char *key;
    uint64_t kinds[4];       /* records (feature lists: steps) per tl_feature_kind */
    uint64_t records;        /* records that have the key */
    uint64_t min_values;     /* values in one record (lists: in one step) */
    uint64_t max_values;
    uint64_t min_steps, max_steps; /* feature lists only */
} key_stats;

typedef struct key_table {
    key_stats *s; /* (n) sorted by key */
    size_t n, cap;
} key_table;

/* The stats of key, added in order when absent; NULL out of memory. */
static key_stats *table_get(key_table *t, const char *key)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->s[mid].key, key);
        if (c == 0)
            return &t->s[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        key_stats *s = realloc(t->s, cap * sizeof *s);
        if (s == NULL)
            return NULL;
        t->s = s;
        t->cap = cap;
    }
    char *k = strdup(key);
    if (k == NULL)
        return NULL;
    memmove(&t->s[lo + 1], &t->s[lo], (t->n - lo) * sizeof *t->s);
    t->n++;
    t->s[lo] = (key_stats){.key = k, .min_values = UINT64_MAX, .min_steps = UINT64_MAX};
    return &t->s[lo];
}

static void table_free(key_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->s[i].key);
    free(t->s);
}

static void count_values(key_stats *s, const tl_feature *f)
{
    s->kinds[f->kind]++;
    if (f->count < s->min_values)
        s->min_values = f->count;
    if (f->count > s->max_values)
        s->max_values = f->count;
}

/* ---- one file ------------------------------------------------------------ */

typedef struct file_report {
    const char *path;
    tl_record_compression comp;
    bool opened;            /* the file could be opened (else only st and error are set) */
    int64_t file_bytes;     /* -1 when unknown */
    uint64_t records, record_bytes;
    tl_status st;           /* TL_OK, or why the file could not be read to its end */
    char *error;            /* its message */
    uint64_t sequences;     /* records with a feature list */
    uint64_t unparsed;      /* records that are neither Example nor SequenceExample */
    char *parse_error;      /* the first one's message */
    key_table features, lists;
    uint8_t **saved;        /* (nsaved) the first records' bytes, for --records */
    size_t *saved_len;      /* (nsaved) */
    size_t nsaved;
} file_report;

static void report_free(file_report *r)
{
    free(r->error);
    free(r->parse_error);
    table_free(&r->features);
    table_free(&r->lists);
    for (size_t i = 0; i < r->nsaved; i++)
        free(r->saved[i]);
    free(r->saved);
    free(r->saved_len);
}

/* Parses a record as a SequenceExample, else as an Example (a field 2 that
 * is not FeatureLists fails the first and is an unknown field to the
 * second); the error, when both fail, is the Example parser's. */
static tl_status parse_record(const uint8_t *rec, size_t n, uint64_t index, tl_example **ex)
{
    tl_status st = tl_sequence_example_parse(rec, n, index, ex);
    if (st == TL_OK || st == TL_ENOMEM)
        return st;
    return tl_example_parse(rec, n, index, ex);
}

/* Adds one parsed record's features and feature lists to the tables. */
static tl_status add_example(file_report *r, const tl_example *ex)
{
    size_t n;
    const tl_feature *fs = tl_example_features(ex, &n);
    for (size_t i = 0; i < n; i++) {
        key_stats *s = table_get(&r->features, fs[i].key);
        if (s == NULL)
            return TL_ENOMEM;
        s->records++;
        count_values(s, &fs[i]);
    }
    const tl_feature_list *ls = tl_example_feature_lists(ex, &n);
    if (n > 0)
        r->sequences++;
    for (size_t i = 0; i < n; i++) {
        key_stats *s = table_get(&r->lists, ls[i].key);
        if (s == NULL)
            return TL_ENOMEM;
        s->records++;
        if (ls[i].count < s->min_steps)
            s->min_steps = ls[i].count;
        if (ls[i].count > s->max_steps)
            s->max_steps = ls[i].count;
        for (size_t k = 0; k < ls[i].count; k++)
            count_values(s, &ls[i].steps[k]);
    }
    return TL_OK;
}

static tl_status save_record(file_report *r, const uint8_t *rec, size_t n)
{
    uint8_t **s = realloc(r->saved, (r->nsaved + 1) * sizeof *s);
    if (s != NULL)
        r->saved = s;
    size_t *l = realloc(r->saved_len, (r->nsaved + 1) * sizeof *l);
    if (l != NULL)
        r->saved_len = l;
    uint8_t *copy = malloc(n > 0 ? n : 1);
    if (s == NULL || l == NULL || copy == NULL) {
        free(copy);
        return TL_ENOMEM;
    }
    memcpy(copy, rec, n);
    r->saved[r->nsaved] = copy;
    r->saved_len[r->nsaved++] = n;
    return TL_OK;
}

/* Reads the file through; a failure of the file is kept in r (st, error),
 * and only running out of memory is returned. */
static tl_status read_file(file_report *r, tl_record_compression comp, int64_t keep)
{
    struct stat sb;
    r->file_bytes = stat(r->path, &sb) == 0 ? (int64_t)sb.st_size : -1;
    tl_record_reader *rd;
    tl_status st = tl_record_reader_open(r->path, comp, &rd);
    if (st != TL_OK) {
        r->st = st;
        r->error = strdup(tl_last_error());
        return st == TL_ENOMEM ? st : TL_OK;
    }
    r->opened = true;
    r->comp = tl_record_reader_compression(rd);
    const uint8_t *rec;
    size_t n;
    while ((st = tl_record_reader_next(rd, &rec, &n)) == TL_OK && rec != NULL) {
        uint64_t index = r->records++;
        r->record_bytes += n;
        if ((int64_t)index < keep && (st = save_record(r, rec, n)) != TL_OK)
            break;
        tl_example *ex;
        tl_status pst = parse_record(rec, n, index, &ex);
        if (pst == TL_ENOMEM) {
            st = pst;
            break;
        }
        if (pst != TL_OK) {
            if (r->unparsed++ == 0)
                r->parse_error = strdup(tl_last_error());
            continue;
        }
        st = add_example(r, ex);
        tl_example_destroy(ex);
        if (st != TL_OK)
            break;
    }
    if (st != TL_OK && st != TL_ENOMEM) {
        r->st = st;
        r->error = strdup(tl_last_error());
        st = TL_OK;
    }
    tl_record_reader_destroy(rd);
    return st;
}

/* ---- JSON of records ----------------------------------------------------- */

/* Whether s is valid UTF-8 (what jansson accepts as a string). */
static bool utf8_ok(const unsigned char *s)
{
    while (*s) {
        int n = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 : (*s & 0xf0) == 0xe0 ? 2 : (*s & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0 || (n == 1 && *s < 0xc2))
            return false;
        s++;
        for (int i = 0; i < n; i++, s++)
            if ((*s & 0xc0) != 0x80)
                return false;
    }
    return true;
}

/* Sets o[key] = v; a key that is not UTF-8 (feature names are bytes) gets
 * U+FFFD for each byte >= 0x80, so the output stays JSON. */
static void set_key(json_t *o, const char *key, json_t *v)
{
    if (utf8_ok((const unsigned char *)key)) {
        json_object_set_new(o, key, v);
        return;
    }
    size_t n = strlen(key);
    char *k = malloc(3 * n + 1), *p = k;
    if (k == NULL) {
        json_decref(v);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)key[i] < 0x80) {
            *p++ = key[i];
        } else {
            memcpy(p, "\xef\xbf\xbd", 3);
            p += 3;
        }
    }
    *p = '\0';
    json_object_set_new(o, k, v);
    free(k);
}

static json_t *base64(const uint8_t *d, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = malloc(4 * ((n + 2) / 3) + 1), *p = s;
    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
        *p++ = tab[v >> 18];
        *p++ = tab[(v >> 12) & 63];
        *p++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *p++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *p = '\0';
    json_t *j = json_string(s);
    free(s);
    return j;
}

static json_t *float_json(float f)
{
    if (isnan(f))
        return json_string("nan");
    if (isinf(f))
        return json_string(f > 0 ? "inf" : "-inf");
    return json_real((double)f);
}

/* {"int64_list": [...]} and the like; {} for a Feature with no kind. */
static json_t *feature_json(const tl_feature *f)
{
    json_t *o = json_object(), *a = json_array();
    for (size_t i = 0; i < f->count; i++) {
        if (f->kind == TL_FEATURE_FLOAT)
            json_array_append_new(a, float_json(f->floats[i]));
        else if (f->kind == TL_FEATURE_INT64)
            json_array_append_new(a, json_integer(f->int64s[i]));
        else if (f->kind == TL_FEATURE_BYTES)
            json_array_append_new(a, base64(f->bytes[i].data, f->bytes[i].len));
    }
    if (f->kind == TL_FEATURE_NONE)
        json_decref(a);
    else
        json_object_set_new(o, tl_feature_kind_name(f->kind), a);
    return o;
}

static json_t *features_json(const tl_example *ex)
{
    json_t *o = json_object();
    size_t n;
    const tl_feature *fs = tl_example_features(ex, &n);
    for (size_t i = 0; i < n; i++)
        set_key(o, fs[i].key, feature_json(&fs[i]));
    return o;
}

/* One record as its JSON line's value. */
static json_t *record_json(const uint8_t *rec, size_t n, uint64_t index, bool sequence)
{
    tl_example *ex;
    if (parse_record(rec, n, index, &ex) != TL_OK)
        return json_pack("{s:s}", "error", tl_last_error());
    json_t *o = json_object();
    if (!sequence) {
        json_object_set_new(o, "features", features_json(ex));
    } else {
        json_object_set_new(o, "context", features_json(ex));
        json_t *lists = json_object();
        size_t nl;
        const tl_feature_list *ls = tl_example_feature_lists(ex, &nl);
        for (size_t i = 0; i < nl; i++) {
            json_t *steps = json_array();
            for (size_t k = 0; k < ls[i].count; k++)
                json_array_append_new(steps, feature_json(&ls[i].steps[k]));
            set_key(lists, ls[i].key, steps);
        }
        json_object_set_new(o, "feature_lists", lists);
    }
    tl_example_destroy(ex);
    return o;
}

/* How the record lines are dumped: one line, ", " and ": " between items,
 * keys in insertion (sorted) order, floats to 9 significant digits. */
#define RECORD_FLAGS (JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9))

/* ---- the report ---------------------------------------------------------- */

static const char *message_type(const file_report *r)
{
    if (r->records == 0)
        return NULL;
    if (r->unparsed == r->records)
        return "unknown";
    return r->sequences > 0 ? "tf.SequenceExample" : "tf.Example";
}

/* The kind of a key: its one kind apart from empty Features, "empty" when
 * it has no other, "mixed" when it has several. */
static const char *kind_of(const key_stats *s)
{
    const char *kind = NULL;
    for (int k = TL_FEATURE_BYTES; k <= TL_FEATURE_INT64; k++) {
        if (s->kinds[k] == 0)
            continue;
        if (kind != NULL)
            return "mixed";
        kind = tl_feature_kind_name((tl_feature_kind)k);
    }
    return kind ? kind : "empty";
}

static json_t *table_json(const key_table *t, bool lists)
{
    json_t *o = json_object();
    for (size_t i = 0; i < t->n; i++) {
        const key_stats *s = &t->s[i];
        json_t *kinds = json_object();
        for (int k = 0; k < 4; k++)
            if (s->kinds[k] > 0)
                json_object_set_new(kinds, k == 0 ? "empty" : tl_feature_kind_name((tl_feature_kind)k),
                                    json_integer((json_int_t)s->kinds[k]));
        json_t *e = json_object();
        json_object_set_new(e, "kind", json_string(kind_of(s)));
        json_object_set_new(e, "kinds", kinds);
        json_object_set_new(e, "records", json_integer((json_int_t)s->records));
        if (lists) {
            json_object_set_new(e, "min_steps", json_integer((json_int_t)s->min_steps));
            json_object_set_new(e, "max_steps", json_integer((json_int_t)s->max_steps));
        }
        /* A list whose every step is absent has no per-step counts. */
        bool any = s->min_values != UINT64_MAX;
        json_object_set_new(e, "min_values", any ? json_integer((json_int_t)s->min_values) : json_null());
        json_object_set_new(e, "max_values", any ? json_integer((json_int_t)s->max_values) : json_null());
        set_key(o, s->key, e);
    }
    return o;
}

static json_t *report_json(const file_report *r)
{
    const char *type = message_type(r);
    bool seq = type != NULL && strcmp(type, "tf.SequenceExample") == 0;
    json_t *o = json_object();
    json_object_set_new(o, "file", json_string(r->path));
    json_object_set_new(o, "compression", r->opened ? json_string(tl_record_compression_name(r->comp)) : json_null());
    json_object_set_new(o, "file_bytes", r->file_bytes >= 0 ? json_integer(r->file_bytes) : json_null());
    json_object_set_new(o, "records", json_integer((json_int_t)r->records));
    json_object_set_new(o, "record_bytes", json_integer((json_int_t)r->record_bytes));
    json_object_set_new(o, "valid", json_boolean(r->st == TL_OK));
    json_object_set_new(o, "error", r->error ? json_string(r->error) : json_null());
    json_object_set_new(o, "message_type", type ? json_string(type) : json_null());
    json_object_set_new(o, "unparsed_records", json_integer((json_int_t)r->unparsed));
    json_object_set_new(o, "parse_error", r->parse_error ? json_string(r->parse_error) : json_null());
    json_object_set_new(o, seq ? "context" : "features", table_json(&r->features, false));
    if (seq)
        json_object_set_new(o, "feature_lists", table_json(&r->lists, true));
    return o;
}

static void print_table_text(const key_table *t, bool lists)
{
    int w = 8;
    for (size_t i = 0; i < t->n; i++)
        if ((int)strlen(t->s[i].key) > w)
            w = (int)strlen(t->s[i].key) > 40 ? 40 : (int)strlen(t->s[i].key);
    printf("    %-*s  %-10s  %10s  %s%s\n", w, "key", "kind", "records", lists ? "steps     " : "",
           lists ? "values/step" : "values/record");
    for (size_t i = 0; i < t->n; i++) {
        const key_stats *s = &t->s[i];
        char steps[48] = "", vals[48], empty[48] = "";
        if (lists)
            snprintf(steps, sizeof steps, "%llu..%-6llu", (unsigned long long)s->min_steps,
                     (unsigned long long)s->max_steps);
        if (s->min_values == UINT64_MAX)
            snprintf(vals, sizeof vals, "-");
        else
            snprintf(vals, sizeof vals, "%llu..%llu", (unsigned long long)s->min_values,
                     (unsigned long long)s->max_values);
        if (s->kinds[0] > 0 && strcmp(kind_of(s), "empty") != 0)
            snprintf(empty, sizeof empty, "  (%llu empty Feature%s)", (unsigned long long)s->kinds[0],
                     s->kinds[0] == 1 ? "" : "s");
        printf("    %-*s  %-10s  %10llu  %s%s%s\n", w, s->key, kind_of(s), (unsigned long long)s->records, steps,
               vals, empty);
    }
}

/* The error itself goes to stderr, once (inspect); this says only where
 * the report stops. */
static void print_report_text(const file_report *r)
{
    const char *type = message_type(r);
    printf("%s\n", r->path);
    if (!r->opened) {
        printf("  cannot be read\n");
        return;
    }
    printf("  compression %s, %lld bytes on disk; %llu record%s, %llu bytes of records\n",
           tl_record_compression_name(r->comp), (long long)r->file_bytes, (unsigned long long)r->records, r->records == 1 ? "" : "s",
           (unsigned long long)r->record_bytes);
    if (r->st == TL_OK)
        printf("  every record's CRCs are valid\n");
    else
        printf("  INVALID after %llu good record%s\n", (unsigned long long)r->records, r->records == 1 ? "" : "s");
    if (type != NULL)
        printf("  message type %s", type);
    if (r->unparsed > 0)
        printf("; %llu record%s not an Example (the first: %s)", (unsigned long long)r->unparsed,
               r->unparsed == 1 ? " is" : "s are", r->parse_error);
    if (type != NULL)
        printf("\n");
    if (type == NULL || strcmp(type, "unknown") == 0)
        return;
    bool seq = strcmp(type, "tf.SequenceExample") == 0;
    printf("  %s (%zu key%s):\n", seq ? "context" : "features", r->features.n, r->features.n == 1 ? "" : "s");
    print_table_text(&r->features, false);
    if (seq) {
        printf("  feature lists (%zu key%s):\n", r->lists.n, r->lists.n == 1 ? "" : "s");
        print_table_text(&r->lists, true);
    }
}

/* ---- data inspect -------------------------------------------------------- */

static int inspect(int argc, char **argv)
{
    bool json = false;
    int64_t keep = 0;
    tl_record_compression comp = TL_RECORD_AUTO;
    int nfiles = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--json") == 0) {
            json = true;
        } else if (strncmp(s, "--records=", 10) == 0) {
            char *end;
            errno = 0;
            long long v = strtoll(s + 10, &end, 10);
            if (s[10] == '\0' || *end != '\0' || errno != 0 || v < 0)
                return cli_usage_error("--records must be a whole number >= 0 (got '%s')", s + 10);
            keep = v;
        } else if (strncmp(s, "--compression=", 14) == 0) {
            if (tl_record_compression_parse(s + 14, &comp) != TL_OK)
                return cli_usage_error("--compression must be AUTO, GZIP, ZLIB or NONE (got '%s')", s + 14);
        } else if (strncmp(s, "--", 2) == 0) {
            return cli_usage_error("unknown option '%s' for `tpuloop data inspect`", s);
        } else {
            argv[nfiles++] = argv[i]; /* the files, in place, in order */
        }
    }
    if (nfiles == 0)
        return cli_usage_error("`tpuloop data inspect` needs at least one TFRecord FILE");
    int rc = 0;
    json_t *files = json_array();
    for (int i = 0; i < nfiles; i++) {
        file_report r = {.path = argv[i], .comp = comp == TL_RECORD_AUTO ? TL_RECORD_NONE : comp};
        tl_status st = read_file(&r, comp, keep);
        if (st != TL_OK) {
            report_free(&r);
            json_decref(files);
            fprintf(stderr, "error: out of memory reading %s\n", argv[i]);
            return EXIT_RUNTIME;
        }
        const char *type = message_type(&r);
        bool seq = type != NULL && strcmp(type, "tf.SequenceExample") == 0;
        json_t *shown = json_array();
        for (size_t k = 0; k < r.nsaved; k++)
            json_array_append_new(shown, record_json(r.saved[k], r.saved_len[k], k, seq));
        if (json) {
            json_t *o = report_json(&r);
            if (keep > 0)
                json_object_set(o, "first_records", shown);
            json_array_append_new(files, o);
        } else {
            print_report_text(&r);
            for (size_t k = 0; k < json_array_size(shown); k++) {
                json_dumpf(json_array_get(shown, k), stdout, RECORD_FLAGS);
                putchar('\n');
            }
        }
        json_decref(shown);
        if (r.st != TL_OK) {
            /* A file that exists but cannot be used is a runtime failure, as
             * a corrupt checkpoint is in `ckpt inspect`: only arguments are
             * exit 2. */
            fflush(stdout); /* the report first, then its error, in a terminal and in a log */
            fprintf(stderr, "error: %s\n", r.error ? r.error : tl_strerror(r.st));
            rc = EXIT_RUNTIME;
        }
        report_free(&r);
    }
    if (json) {
        bool valid = rc == 0;
        json_t *root = json_pack("{s:o, s:b}", "files", files, "valid", valid);
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        putchar('\n');
        json_decref(root);
    } else {
        json_decref(files);
    }
    return rc;
}

int cli_data(int argc, char **argv)
{
    if (argc >= 1 && strcmp(argv[0], "inspect") == 0)
        return inspect(argc - 1, argv + 1);
    if (argc >= 1 && strcmp(argv[0], "convert") == 0)
        return cli_data_convert(argc - 1, argv + 1);
    if (argc >= 1)
        return cli_usage_error("unknown subcommand 'data %s'; use `data inspect FILE...` or `data convert ...`",
                               argv[0]);
    return cli_usage_error("`tpuloop data` needs a subcommand: `data inspect FILE...` or `data convert ...`");
}

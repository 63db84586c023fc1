/* ckpt.c — `tpuloop ckpt list MODEL_DIR` and `tpuloop ckpt inspect FILE`.
 *
 * list is what TensorFlow's get_checkpoint_state shows and what a user asks
 * before a resume: every checkpoint file of the directory and every one the
 * `checkpoint` index names, each opened and checked as a resume would check
 * it, with the reason when it is not valid, which one the index calls the
 * latest and which one a resume would load (the newest valid file: the
 * directory, not the index, is the authority — see tl_ckpt_latest_valid).
 *
 * inspect is TensorFlow's inspect_checkpoint: the metadata, the checksums,
 * every tensor's name, dtype and shape, the host files of a checkpoint
 * written by several hosts (checkpoint.h), and with --tensor=NAME its values —
 * summarised (the first ones, min, max, mean) unless --all_values; a U8
 * vector of text (the input pipeline's position) as text too. It takes a
 * file or TensorFlow's checkpoint prefix (model_dir/model.ckpt-200).
 *
 * Both read through the public checkpoint API only, never write, and exit 1
 * when the directory or the file cannot be used (a corrupt checkpoint is a
 * fact about the disk, not a usage error). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

/* Tensors with more elements than this are summarised unless --all_values. */
#define SHOW_ALL_UP_TO 20
#define SHOW_FIRST 10

/* ---- arguments ---------------------------------------------------------- */

/* The options of a subcommand: each "--x" (a switch) or "--x=" (a value). */
typedef struct ckpt_args {
    const char *positional; /* the one operand */
    bool json, all_values;
    const char *tensor;
} ckpt_args;

static int parse_args(const char *cmd, int argc, char **argv, bool allow_tensor, ckpt_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--json") == 0)
            a->json = true;
        else if (allow_tensor && strcmp(s, "--all_values") == 0)
            a->all_values = true;
        else if (allow_tensor && strncmp(s, "--tensor=", 9) == 0)
            a->tensor = s + 9;
        else if (strncmp(s, "--", 2) == 0)
            return cli_usage_error("unknown option '%s' for `tpuloop ckpt %s`", s, cmd);
        else if (a->positional != NULL)
            return cli_usage_error("unexpected argument '%s' for `tpuloop ckpt %s`", s, cmd);
        else
            a->positional = s;
    }
    if (a->positional == NULL)
        return cli_usage_error("`tpuloop ckpt %s` needs %s", cmd, allow_tensor ? "a checkpoint FILE" : "a MODEL_DIR");
    if (a->tensor != NULL && a->tensor[0] == '\0')
        return cli_usage_error("--tensor= needs a tensor name");
    return 0;
}

/* The reader's message without the leading "PATH: " (a table names the file
 * in its own column). */
static const char *without_path(const char *msg, const char *path)
{
    size_t n = strlen(path);
    return strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0 ? msg + n + 2 : msg;
}

static void print_json(json_t *root)
{
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    putchar('\n');
    json_decref(root);
}

/* ---- ckpt list ---------------------------------------------------------- */

typedef struct ckpt_row {
    int64_t step;
    bool exists;      /* the file is there */
    int64_t bytes;    /* its size; -1 when missing */
    bool valid;
    char *error;      /* why not valid (malloc'd); NULL when valid */
    bool in_index;    /* all_model_checkpoint_paths lists it */
    bool latest;      /* model_checkpoint_path names it */
    double timestamp; /* when written (the index's, else the mtime); NAN unknown */
    int host_files;   /* its host files (several hosts wrote it); 0: one host's, everything inside */
} ckpt_row;

typedef struct ckpt_table {
    ckpt_row *rows; /* (n), by step */
    int n, cap;
} ckpt_table;

/* The row of step, added (in step order) when absent; NULL out of memory. */
static ckpt_row *table_row(ckpt_table *t, int64_t step)
{
    int i = 0;
    while (i < t->n && t->rows[i].step < step)
        i++;
    if (i < t->n && t->rows[i].step == step)
        return &t->rows[i];
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        ckpt_row *r = realloc(t->rows, (size_t)cap * sizeof *r);
        if (r == NULL)
            return NULL;
        t->rows = r;
        t->cap = cap;
    }
    memmove(&t->rows[i + 1], &t->rows[i], (size_t)(t->n - i) * sizeof *t->rows);
    t->n++;
    t->rows[i] = (ckpt_row){.step = step, .bytes = -1, .timestamp = NAN};
    return &t->rows[i];
}

/* A step written in canonical decimal (no sign, no leading zero), whole. */
static bool step_digits(const char *d, int64_t *step)
{
    if (*d < '0' || *d > '9' || (d[0] == '0' && d[1] != '\0'))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(d, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *step = v;
    return true;
}

/* The step of an index path "model.ckpt-<step>" (any directory before it);
 * false when it is not one. */
static bool prefix_step(const char *prefix, int64_t *step)
{
    const char *base = strrchr(prefix, '/');
    base = base ? base + 1 : prefix;
    static const char head[] = TL_CKPT_PREFIX "-";
    return strncmp(base, head, sizeof head - 1) == 0 && step_digits(base + sizeof head - 1, step);
}

/* Opens the row's file as a resume would: valid, or the reason. */
static tl_status check_row(const char *dir, ckpt_row *row)
{
    char path[4096];
    tl_status st = tl_ckpt_path(dir, row->step, path, sizeof path);
    if (st != TL_OK)
        return st;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        row->error = strdup("listed in the index, but the file is missing");
        return row->error ? TL_OK : TL_ENOMEM;
    }
    row->exists = true;
    row->bytes = (int64_t)sb.st_size;
    if (isnan(row->timestamp))
        row->timestamp = (double)sb.st_mtim.tv_sec + 1e-9 * (double)sb.st_mtim.tv_nsec;
    tl_ckpt_reader *r;
    st = tl_ckpt_open(path, 0, &r);
    if (st == TL_ENOMEM)
        return st;
    if (st == TL_OK) {
        const char *ms = tl_ckpt_meta(r, "step");
        char want[32];
        snprintf(want, sizeof want, "%lld", (long long)row->step);
        if (ms != NULL && strcmp(ms, want) != 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "__metadata__ step '%.64s' but the file name says %s", ms, want);
            row->error = strdup(msg);
        } else if ((st = tl_ckpt_check_host_files(path, r, 0, &row->host_files)) == TL_OK) {
            row->valid = true;
        } else if (st != TL_ENOMEM) {
            row->error = strdup(tl_last_error()); /* incomplete: names the host file */
        } else {
            tl_ckpt_close(r);
            return st;
        }
        tl_ckpt_close(r);
    } else {
        row->error = strdup(without_path(tl_last_error(), path));
    }
    return row->valid || row->error ? TL_OK : TL_ENOMEM;
}

/* The index's paths into rows; a path that names no model.ckpt-<step> is a
 * warning. */
static tl_status add_index(ckpt_table *t, const tl_ckpt_state *cs, const char *dir)
{
    for (int i = 0; i < cs->num_paths; i++) {
        int64_t step;
        if (!prefix_step(cs->all_model_checkpoint_paths[i], &step)) {
            fprintf(stderr, "warning: %s/checkpoint lists '%s', which is not a %s-<step> checkpoint\n", dir,
                    cs->all_model_checkpoint_paths[i], TL_CKPT_PREFIX);
            continue;
        }
        ckpt_row *row = table_row(t, step);
        if (row == NULL)
            return TL_ENOMEM;
        row->in_index = true;
        if (cs->num_timestamps == cs->num_paths)
            row->timestamp = cs->all_model_checkpoint_timestamps[i];
    }
    int64_t latest;
    if (prefix_step(cs->model_checkpoint_path, &latest)) {
        ckpt_row *row = table_row(t, latest);
        if (row == NULL)
            return TL_ENOMEM;
        row->latest = true;
    }
    return TL_OK;
}

static void format_time(double t, char *buf, size_t cap)
{
    struct tm tm;
    time_t s = (time_t)t;
    if (isnan(t) || gmtime_r(&s, &tm) == NULL || strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, cap, "-");
}

static void print_list_text(const char *dir, const ckpt_table *t, const tl_ckpt_state *cs, const char *index_error,
                            const ckpt_row *resume)
{
    int files = 0;
    for (int i = 0; i < t->n; i++)
        files += t->rows[i].exists;
    printf("model_dir %s: %d checkpoint file%s\n", dir, files, files == 1 ? "" : "s");
    if (cs != NULL)
        printf("  index: `checkpoint` names %s as the latest and keeps %d\n", cs->model_checkpoint_path,
               cs->num_paths);
    else
        printf("  index: %s\n", index_error ? index_error : "none (no `checkpoint` file)");
    if (resume != NULL)
        printf("  a resume restores step %lld (%s-%lld%s)\n", (long long)resume->step, TL_CKPT_PREFIX,
               (long long)resume->step, TL_CKPT_SUFFIX);
    else
        printf("  a resume %s\n", files ? "fails: no checkpoint is valid" : "starts from scratch");
    if (t->n == 0)
        return;
    printf("  %10s  %-36s %12s  %-19s  %s\n", "step", "file", "bytes", "written (UTC)", "status");
    for (int i = 0; i < t->n; i++) {
        const ckpt_row *r = &t->rows[i];
        char file[64], when[32], bytes[24];
        snprintf(file, sizeof file, "%s-%lld%s", TL_CKPT_PREFIX, (long long)r->step, TL_CKPT_SUFFIX);
        format_time(r->timestamp, when, sizeof when);
        if (r->exists)
            snprintf(bytes, sizeof bytes, "%lld", (long long)r->bytes);
        else
            snprintf(bytes, sizeof bytes, "-");
        char hosts[64] = "";
        if (r->valid && r->host_files > 0)
            snprintf(hosts, sizeof hosts, " (with %d host file%s)", r->host_files, r->host_files == 1 ? "" : "s");
        printf("  %10lld  %-36s %12s  %-19s  %s%s%s%s%s\n", (long long)r->step, file, bytes, when,
               r->valid ? "valid" : "INVALID: ", r->valid ? hosts : r->error,
               r->latest ? "; latest in the index" : "",
               cs != NULL && !r->in_index && !r->latest ? "; not in the index" : "",
               r == resume ? "; a resume loads this one" : "");
    }
}

static json_t *list_json(const char *dir, const ckpt_table *t, const tl_ckpt_state *cs, const char *index_error,
                         const ckpt_row *resume)
{
    json_t *rows = json_array();
    for (int i = 0; i < t->n; i++) {
        const ckpt_row *r = &t->rows[i];
        char file[64], path[4096];
        snprintf(file, sizeof file, "%s-%lld%s", TL_CKPT_PREFIX, (long long)r->step, TL_CKPT_SUFFIX);
        if (tl_ckpt_path(dir, r->step, path, sizeof path) != TL_OK)
            snprintf(path, sizeof path, "%s", file);
        json_t *o = json_object();
        json_object_set_new(o, "step", json_integer(r->step));
        json_object_set_new(o, "file", json_string(file));
        json_object_set_new(o, "path", json_string(path));
        json_object_set_new(o, "exists", json_boolean(r->exists));
        json_object_set_new(o, "bytes", r->exists ? json_integer(r->bytes) : json_null());
        json_object_set_new(o, "timestamp", isnan(r->timestamp) ? json_null() : json_real(r->timestamp));
        json_object_set_new(o, "valid", json_boolean(r->valid));
        json_object_set_new(o, "error", r->error ? json_string(r->error) : json_null());
        json_object_set_new(o, "in_index", json_boolean(r->in_index));
        json_object_set_new(o, "latest", json_boolean(r->latest));
        json_object_set_new(o, "host_files", json_integer(r->host_files));
        json_array_append_new(rows, o);
    }
    json_t *root = json_object();
    json_object_set_new(root, "model_dir", json_string(dir));
    json_object_set_new(root, "index", cs ? json_string(cs->model_checkpoint_path) : json_null());
    json_object_set_new(root, "index_error", index_error ? json_string(index_error) : json_null());
    json_object_set_new(root, "resume_step", resume ? json_integer(resume->step) : json_null());
    json_object_set_new(root, "checkpoints", rows);
    return root;
}

static int ckpt_list(int argc, char **argv)
{
    ckpt_args a;
    int rc = parse_args("list", argc, argv, false, &a);
    if (rc != 0)
        return rc;
    const char *dir = a.positional;
    int64_t *steps = NULL;
    int n = 0;
    tl_status st = tl_ckpt_list(dir, &steps, &n);
    if (st != TL_OK)
        return cli_fail_runtime(st);
    ckpt_table t = {0};
    tl_ckpt_state *cs = NULL;
    char *index_error = NULL;
    for (int i = 0; i < n && st == TL_OK; i++)
        st = table_row(&t, steps[i]) ? TL_OK : TL_ENOMEM;
    tl_ckpt_free_steps(steps);
    if (st == TL_OK) {
        st = tl_ckpt_state_read(dir, &cs);
        if (st == TL_OK) {
            st = add_index(&t, cs, dir);
        } else if (st == TL_ENOTFOUND || st == TL_EPARSE || st == TL_EIO) {
            /* A corrupt index does not stop a resume (the files do), so it
             * is a finding to show, not a failure. */
            if (st != TL_ENOTFOUND) {
                index_error = strdup(tl_last_error());
                fprintf(stderr, "warning: %s\n", tl_last_error());
            }
            st = TL_OK;
        }
    }
    const ckpt_row *resume = NULL;
    for (int i = 0; i < t.n && st == TL_OK; i++)
        st = check_row(dir, &t.rows[i]);
    for (int i = t.n - 1; i >= 0 && resume == NULL; i--)
        if (t.rows[i].valid)
            resume = &t.rows[i];
    if (st != TL_OK) {
        rc = cli_fail_runtime(st);
    } else if (a.json) {
        print_json(list_json(dir, &t, cs, index_error, resume));
    } else {
        print_list_text(dir, &t, cs, index_error, resume);
    }
    for (int i = 0; i < t.n; i++)
        free(t.rows[i].error);
    free(t.rows);
    free(index_error);
    tl_ckpt_state_destroy(cs);
    return rc;
}

/* ---- ckpt inspect ------------------------------------------------------- */

/* One element, as the widest type of its kind. */
typedef struct elem {
    enum { ELEM_REAL, ELEM_INT, ELEM_UINT } kind;
    double d; /* every kind, for the statistics */
    int64_t i;
    uint64_t u;
} elem;

static float half_to_float(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

/* F8 E4M3FN: bias 7, no infinities, S.1111.111 is NaN. */
static float e4m3_to_float(uint8_t b)
{
    int e = (b >> 3) & 0xf, m = b & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : (e == 15 && m == 7) ? NAN : ldexpf((float)(m | 8), e - 10);
    return b & 0x80 ? -v : v;
}

static elem elem_at(const tl_ckpt_tensor_info *t, uint64_t k)
{
    const unsigned char *p = (const unsigned char *)t->data + k * tl_ckpt_dtype_size(t->dtype);
    elem e = {ELEM_REAL, 0, 0, 0};
    /* memcpy: a foreign file's tensors need not be aligned. The format is
     * little-endian, as are the hosts tpuloop runs on. */
#define LOAD(type, field, kind_)                                                                                   \
    do {                                                                                                           \
        type v_;                                                                                                   \
        memcpy(&v_, p, sizeof v_);                                                                                 \
        e.kind = kind_;                                                                                            \
        e.field = v_;                                                                                              \
        e.d = (double)v_;                                                                                          \
    } while (0)
    switch (t->dtype) {
    case TL_CKPT_BOOL: LOAD(uint8_t, u, ELEM_UINT); break;
    case TL_CKPT_U8: LOAD(uint8_t, u, ELEM_UINT); break;
    case TL_CKPT_I8: LOAD(int8_t, i, ELEM_INT); break;
    case TL_CKPT_I16: LOAD(int16_t, i, ELEM_INT); break;
    case TL_CKPT_U16: LOAD(uint16_t, u, ELEM_UINT); break;
    case TL_CKPT_I32: LOAD(int32_t, i, ELEM_INT); break;
    case TL_CKPT_U32: LOAD(uint32_t, u, ELEM_UINT); break;
    case TL_CKPT_I64: LOAD(int64_t, i, ELEM_INT); break;
    case TL_CKPT_U64: LOAD(uint64_t, u, ELEM_UINT); break;
    case TL_CKPT_F32: LOAD(float, d, ELEM_REAL); break;
    case TL_CKPT_F64: LOAD(double, d, ELEM_REAL); break;
    case TL_CKPT_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        e.d = half_to_float(h);
        break;
    }
    case TL_CKPT_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        uint32_t bits = (uint32_t)h << 16;
        float f;
        memcpy(&f, &bits, 4);
        e.d = f;
        break;
    }
    case TL_CKPT_F8_E5M2: e.d = half_to_float((uint16_t)(p[0] << 8)); break; /* the top byte of an F16 */
    case TL_CKPT_F8_E4M3: e.d = e4m3_to_float(p[0]); break;
    default: break;
    }
#undef LOAD
    return e;
}

/* The shortest text that reads back as the same value: of a double for F64,
 * of a float for the narrower types (every F16, BF16 and F8 is a float). */
static void print_elem(elem e, tl_ckpt_dtype dt)
{
    if (e.kind == ELEM_INT) {
        printf("%lld", (long long)e.i);
        return;
    }
    if (e.kind == ELEM_UINT) {
        printf("%llu", (unsigned long long)e.u);
        return;
    }
    bool f64 = dt == TL_CKPT_F64;
    int p = f64 ? 17 : 9;
    for (int q = 1; isfinite(e.d) && q < p; q++) {
        char b[40];
        snprintf(b, sizeof b, "%.*g", q, e.d);
        double back = strtod(b, NULL);
        if (f64 ? back == e.d : (float)back == (float)e.d) {
            p = q;
            break;
        }
    }
    /* As Python's repr: no exponent below 1e16 (%g uses one when the
     * exponent reaches the precision: "6e+01" for 60). */
    int x = e.d != 0 && isfinite(e.d) ? (int)floor(log10(fabs(e.d))) : 0;
    if (x >= p && x < 16)
        p = x + 1;
    printf("%.*g", p, e.d);
}

static json_t *elem_json(elem e)
{
    if (e.kind == ELEM_INT)
        return json_integer(e.i);
    if (e.kind == ELEM_UINT)
        return e.u <= (uint64_t)INT64_MAX ? json_integer((json_int_t)e.u) : json_real((double)e.u);
    /* JSON has no NaN or infinity; Python's json module spells them so. */
    if (isnan(e.d))
        return json_string("NaN");
    if (isinf(e.d))
        return json_string(e.d > 0 ? "Infinity" : "-Infinity");
    return json_real(e.d);
}

static uint64_t elements_of(const tl_ckpt_tensor_info *t)
{
    size_t size = tl_ckpt_dtype_size(t->dtype);
    return size ? t->bytes / size : 0;
}

static void shape_text(const tl_ckpt_tensor_info *t, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->rank && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

static json_t *shape_json(const tl_ckpt_tensor_info *t)
{
    json_t *a = json_array();
    for (int d = 0; d < t->rank; d++)
        json_array_append_new(a, json_integer(t->shape[d]));
    return a;
}

/* min, max and mean over the values that are not NaN; nan counts those. */
typedef struct tensor_stats {
    elem min, max;
    double mean;
    uint64_t nan, counted;
} tensor_stats;

static tensor_stats stats_of(const tl_ckpt_tensor_info *t)
{
    tensor_stats s = {0};
    double sum = 0;
    uint64_t n = elements_of(t);
    for (uint64_t k = 0; k < n; k++) {
        elem e = elem_at(t, k);
        if (isnan(e.d)) {
            s.nan++;
            continue;
        }
        if (s.counted == 0 || e.d < s.min.d)
            s.min = e;
        if (s.counted == 0 || e.d > s.max.d)
            s.max = e;
        sum += e.d;
        s.counted++;
    }
    s.mean = s.counted ? sum / (double)s.counted : NAN;
    return s;
}

/* A U8 vector of printable ASCII text — as the estimator's "input_datasets",
 * the input pipeline's position in JSON — is shown as text too. */
#define SHOW_TEXT 200

static bool is_text(const tl_ckpt_tensor_info *t)
{
    if (t->dtype != TL_CKPT_U8 || t->rank != 1 || t->bytes == 0)
        return false;
    const unsigned char *p = t->data;
    for (uint64_t i = 0; i < t->bytes; i++)
        if (p[i] < 0x20 ? p[i] != '\n' && p[i] != '\t' && p[i] != '\r' : p[i] >= 0x7f)
            return false;
    return true;
}

static size_t text_shown(const tl_ckpt_tensor_info *t, bool all)
{
    return all || t->bytes <= SHOW_TEXT ? (size_t)t->bytes : SHOW_TEXT;
}

static void print_tensor_values(const tl_ckpt_tensor_info *t, bool all)
{
    char shape[512];
    shape_text(t, shape, sizeof shape);
    uint64_t n = elements_of(t);
    printf("tensor_name:  %s\n", t->name);
    printf("  dtype %s, shape %s, %llu element%s, %llu bytes\n", tl_ckpt_dtype_name(t->dtype), shape,
           (unsigned long long)n, n == 1 ? "" : "s", (unsigned long long)t->bytes);
    bool every = all || n <= SHOW_ALL_UP_TO;
    uint64_t shown = every ? n : SHOW_FIRST;
    if (n > 0)
        printf("  %s:", every ? "values" : "first values");
    for (uint64_t k = 0; k < shown; k++) {
        printf(k % 10 == 0 && k > 0 ? "\n    " : " ");
        print_elem(elem_at(t, k), t->dtype);
    }
    if (n > 0)
        printf("%s\n", every ? "" : " ...");
    if (is_text(t)) {
        size_t k = text_shown(t, all);
        printf("  text: %.*s%s\n", (int)k, (const char *)t->data, k < t->bytes ? " ..." : "");
    }
    if (n > 1) {
        tensor_stats s = stats_of(t);
        printf("  min ");
        if (s.counted) {
            print_elem(s.min, t->dtype);
            printf("  max ");
            print_elem(s.max, t->dtype);
            printf("  mean %.9g", s.mean);
        } else {
            printf("-  max -  mean -");
        }
        if (s.nan)
            printf("  NaN %llu", (unsigned long long)s.nan);
        printf("\n");
    }
}

static json_t *tensor_values_json(const tl_ckpt_tensor_info *t, bool all)
{
    uint64_t n = elements_of(t);
    bool every = all || n <= SHOW_ALL_UP_TO;
    uint64_t shown = every ? n : SHOW_FIRST;
    json_t *vals = json_array();
    for (uint64_t k = 0; k < shown; k++)
        json_array_append_new(vals, elem_json(elem_at(t, k)));
    tensor_stats s = stats_of(t);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(t->name));
    json_object_set_new(o, "dtype", json_string(tl_ckpt_dtype_name(t->dtype)));
    json_object_set_new(o, "shape", shape_json(t));
    json_object_set_new(o, "elements", json_integer((json_int_t)n));
    json_object_set_new(o, every ? "values" : "first_values", vals);
    json_object_set_new(o, "min", s.counted ? elem_json(s.min) : json_null());
    json_object_set_new(o, "max", s.counted ? elem_json(s.max) : json_null());
    json_object_set_new(o, "mean", s.counted ? elem_json((elem){ELEM_REAL, s.mean, 0, 0}) : json_null());
    json_object_set_new(o, "nan", json_integer((json_int_t)s.nan));
    if (is_text(t))
        json_object_set_new(o, "text", json_stringn((const char *)t->data, text_shown(t, all)));
    return o;
}

static const char *checksum_status(const tl_ckpt_reader *r, unsigned bit)
{
    return tl_ckpt_checksums(r) & bit ? "verified" : "absent";
}

/* The host files a checkpoint of several hosts names (checkpoint.h, "Host
 * files"): each one's path, and whether it opens and is that checkpoint's;
 * NULL for a checkpoint without any. The count is n. */
typedef struct host_file {
    char path[4200];
    bool valid;
    char *error; /* malloc'd; NULL when valid */
} host_file;

static host_file *host_files(const char *path, const tl_ckpt_reader *r, int *n)
{
    *n = 0;
    const char *ms = tl_ckpt_meta(r, TL_CKPT_META_HOST_FILES);
    char *end;
    errno = 0;
    long v = ms != NULL ? strtol(ms, &end, 10) : 0;
    if (ms == NULL || errno != 0 || *end != '\0' || v < 1 || v > TL_CKPT_MAX_HOST_FILES)
        return NULL;
    host_file *f = calloc((size_t)v, sizeof *f);
    if (f == NULL)
        return NULL;
    const char *step = tl_ckpt_meta(r, "step");
    for (int s = 0; s < (int)v; s++) {
        if (tl_ckpt_host_path(path, s, (int)v, f[s].path, sizeof f[s].path) != TL_OK) {
            f[s].error = strdup(tl_last_error());
            continue;
        }
        tl_ckpt_reader *sr;
        if (tl_ckpt_open(f[s].path, 0, &sr) != TL_OK) {
            f[s].error = strdup(without_path(tl_last_error(), f[s].path));
            continue;
        }
        const char *ss = tl_ckpt_meta(sr, "step"), *sh = tl_ckpt_meta(sr, TL_CKPT_META_HOST_FILE);
        char want[24];
        snprintf(want, sizeof want, "%d", s);
        if (step != NULL && (ss == NULL || strcmp(ss, step) != 0))
            f[s].error = strdup("its step is not the checkpoint's");
        else if (sh == NULL || strcmp(sh, want) != 0)
            f[s].error = strdup("its __metadata__ " TL_CKPT_META_HOST_FILE " is not its number");
        else
            f[s].valid = true;
        tl_ckpt_close(sr);
    }
    *n = (int)v;
    return f;
}

static void free_host_files(host_file *f, int n)
{
    for (int s = 0; f != NULL && s < n; s++)
        free(f[s].error);
    free(f);
}

static void print_inspect_text(const char *path, const tl_ckpt_reader *r, int64_t file_bytes)
{
    int nt = tl_ckpt_num_tensors(r);
    uint64_t data = 0;
    for (int i = 0; i < nt; i++) {
        tl_ckpt_tensor_info t;
        if (tl_ckpt_tensor(r, i, &t) == TL_OK)
            data += t.bytes;
    }
    const char *step = tl_ckpt_meta(r, "step"), *fmt = tl_ckpt_meta(r, "format"),
               *ver = tl_ckpt_meta(r, "format_version");
    printf("checkpoint %s (%lld bytes)\n", path, (long long)file_bytes);
    printf("  step %s, format %s version %s\n", step ? step : "-", fmt ? fmt : "- (not written by tpuloop)",
           ver ? ver : "-");
    printf("  checksums: data crc32c %s, header crc32c %s\n", checksum_status(r, 1), checksum_status(r, 2));
    printf("  metadata:\n");
    for (int i = 0; i < tl_ckpt_num_meta(r); i++) {
        const char *k, *v;
        tl_ckpt_meta_at(r, i, &k, &v);
        printf("    %s: %s\n", k, v);
    }
    printf("  %d tensor%s, %llu bytes of data:\n", nt, nt == 1 ? "" : "s", (unsigned long long)data);
    for (int i = 0; i < nt; i++) {
        tl_ckpt_tensor_info t;
        char shape[512];
        if (tl_ckpt_tensor(r, i, &t) != TL_OK)
            continue;
        shape_text(&t, shape, sizeof shape);
        printf("    %s (%s) %s%s\n", t.name, tl_ckpt_dtype_name(t.dtype), shape, is_text(&t) ? " text" : "");
    }
    int nh;
    host_file *f = host_files(path, r, &nh);
    if (nh > 0) {
        bool tables = tl_ckpt_meta(r, TL_CKPT_META_TABLE_SHARDING) != NULL;
        printf("  %d host file%s, each with its host's %sinput positions (`tpuloop ckpt inspect` each):\n", nh,
               nh == 1 ? "" : "s", tables ? "shard of the embedding tables and " : "");
        for (int s = 0; s < nh; s++)
            printf("    %s: %s%s\n", f[s].path, f[s].valid ? "valid" : "INVALID: ",
                   f[s].valid ? "" : f[s].error ? f[s].error : "out of memory");
    }
    free_host_files(f, nh);
}

static json_t *inspect_json(const char *path, const tl_ckpt_reader *r, int64_t file_bytes)
{
    json_t *meta = json_object(), *tensors = json_array();
    for (int i = 0; i < tl_ckpt_num_meta(r); i++) {
        const char *k, *v;
        tl_ckpt_meta_at(r, i, &k, &v);
        json_object_set_new(meta, k, json_string(v));
    }
    for (int i = 0; i < tl_ckpt_num_tensors(r); i++) {
        tl_ckpt_tensor_info t;
        if (tl_ckpt_tensor(r, i, &t) != TL_OK)
            continue;
        json_array_append_new(tensors, json_pack("{s:s, s:s, s:o, s:I, s:I}", "name", t.name, "dtype",
                                                 tl_ckpt_dtype_name(t.dtype), "shape", shape_json(&t), "elements",
                                                 (json_int_t)elements_of(&t), "bytes", (json_int_t)t.bytes));
    }
    const char *step = tl_ckpt_meta(r, "step"), *ver = tl_ckpt_meta(r, "format_version");
    int64_t s = 0;
    bool have_step = step != NULL && step_digits(step, &s);
    json_t *root = json_object();
    json_object_set_new(root, "file", json_string(path));
    json_object_set_new(root, "bytes", json_integer(file_bytes));
    json_object_set_new(root, "step", have_step ? json_integer(s) : json_null());
    json_object_set_new(root, "format_version", ver ? json_string(ver) : json_null());
    json_object_set_new(root, "checksums",
                        json_pack("{s:s, s:s}", "data", checksum_status(r, 1), "header", checksum_status(r, 2)));
    json_object_set_new(root, "metadata", meta);
    json_object_set_new(root, "tensors", tensors);
    int nh;
    host_file *f = host_files(path, r, &nh);
    json_t *files = json_array();
    for (int i = 0; i < nh; i++)
        json_array_append_new(files, json_pack("{s:s, s:b, s:o}", "path", f[i].path, "valid", f[i].valid, "error",
                                               f[i].error ? json_string(f[i].error) : json_null()));
    free_host_files(f, nh);
    json_object_set_new(root, "host_files", files);
    return root;
}

static int ckpt_inspect(int argc, char **argv)
{
    ckpt_args a;
    int rc = parse_args("inspect", argc, argv, true, &a);
    if (rc != 0)
        return rc;
    /* A TensorFlow user names a checkpoint by its prefix
     * ("model_dir/model.ckpt-200"), as predict's --checkpoint= takes it: the
     * file is the prefix plus ".safetensors" when the prefix itself is not
     * a file. */
    const char *path = a.positional;
    struct stat sb;
    char *with_suffix = NULL;
    if (stat(path, &sb) != 0 && errno == ENOENT) {
        size_t n = strlen(path) + sizeof TL_CKPT_SUFFIX;
        with_suffix = malloc(n);
        if (with_suffix == NULL)
            return cli_fail_runtime(TL_ENOMEM);
        snprintf(with_suffix, n, "%s" TL_CKPT_SUFFIX, path);
        if (stat(with_suffix, &sb) == 0)
            path = with_suffix;
    }
    tl_ckpt_reader *r;
    /* Any safetensors file may be inspected; a checksum it has is checked. */
    tl_status st = tl_ckpt_open(path, TL_CKPT_ALLOW_FOREIGN, &r);
    if (st != TL_OK) {
        free(with_suffix);
        return cli_fail_runtime(st);
    }
    int64_t file_bytes = stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
    tl_ckpt_tensor_info t;
    if (a.tensor != NULL && (st = tl_ckpt_find(r, a.tensor, &t)) != TL_OK) {
        const char *ms = tl_ckpt_meta(r, TL_CKPT_META_HOST_FILES);
        if (ms != NULL && (strncmp(a.tensor, "embedding/", 10) == 0 || strcmp(a.tensor, "input_datasets") == 0))
            tl_error(st, "%s (this checkpoint's %s are in its %s host files: inspect those)", tl_last_error(),
                     a.tensor[0] == 'e' ? "embedding tables" : "input positions", ms);
        rc = cli_fail_runtime(st);
    } else if (a.json) {
        json_t *root = inspect_json(path, r, file_bytes);
        if (a.tensor != NULL)
            json_object_set_new(root, "tensor", tensor_values_json(&t, a.all_values));
        print_json(root);
    } else if (a.tensor != NULL) {
        print_tensor_values(&t, a.all_values);
    } else {
        print_inspect_text(path, r, file_bytes);
    }
    tl_ckpt_close(r);
    free(with_suffix);
    return rc;
}

int cli_ckpt(int argc, char **argv)
{
    if (argc >= 1 && strcmp(argv[0], "list") == 0)
        return ckpt_list(argc - 1, argv + 1);
    if (argc >= 1 && strcmp(argv[0], "inspect") == 0)
        return ckpt_inspect(argc - 1, argv + 1);
    if (argc >= 1)
        return cli_usage_error("unknown subcommand 'ckpt %s'; use `ckpt list MODEL_DIR` or `ckpt inspect FILE`",
                               argv[0]);
    return cli_usage_error("`tpuloop ckpt` needs a subcommand: `ckpt list MODEL_DIR` or `ckpt inspect FILE`");
}

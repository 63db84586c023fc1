/* csv.c — the RFC 4180 CSV reader of tpuloop/text_data.h.
 *
 * A byte-at-a-time state machine over a window (a 64 KiB file buffer, or the
 * caller's memory), because a quoted field may span lines, so records cannot
 * be found by searching for newlines. Each record is unescaped into one
 * buffer, its fields NUL-terminated, which grows with the longest record seen
 * up to max_record: memory is bounded by the record cap, not the file.
 *
 * Errors in a value or in the field count leave the reader after the record,
 * where reading can go on. Errors in the quoting are sticky, since after a
 * stray quote there is no reliable place to resume. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base_int.h"
#include "tpuloop/text_data.h"

#define WINDOW ((size_t)1 << 16)
#define SHOW_MAX 40
#define C_EOF (-1)
#define NO_PUSH (-2)

struct tl_csv_reader {
    char *name;
    FILE *f;           /* NULL for memory */
    char *own;         /* (WINDOW) the file buffer */
    const char *buf;   /* own, or the caller's bytes */
    size_t start, end; /* unread bytes */
    bool eof;
    int push;          /* a byte read ahead and given back, or NO_PUSH */
    bool ioerr;        /* a read failed; errno kept in ioerrno */
    int ioerrno;
    size_t raw;        /* bytes of the current record so far */
    bool toolong;      /* raw passed max_record */

    int ncol;
    tl_csv_column *cols; /* (ncol), names owned */
    int label;           /* column index, or -1 */
    int nfeat;
    char delim;
    size_t max_record;

    char *rec;         /* (rec_cap) the unescaped fields, each NUL-terminated */
    size_t rec_cap, used;
    size_t *off, *len; /* (ncol) field k is rec[off[k], off[k] + len[k]) */
    float *fv;         /* (ncol) parsed float32 columns */
    int64_t *iv;       /* (ncol) parsed int64 columns */
    int nf;            /* fields in the current record (may exceed ncol) */
    bool have;         /* a valid current record */

    int64_t line;      /* newlines consumed */
    int64_t rec_line;  /* where the current record begins */
    tl_status sticky;
    char *sticky_msg;
};

void tl_csv_options_init(tl_csv_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof *o);
    o->delimiter = ',';
    o->max_record = TL_CSV_DEFAULT_MAX_RECORD;
}

static const char *type_name(tl_csv_type t)
{
    switch (t) {
    case TL_CSV_FLOAT32:
        return "float32";
    case TL_CSV_INT64:
        return "int64";
    case TL_CSV_STRING:
        return "string";
    }
    return "unknown";
}

static void show(tl_strbuf *sb, const char *p, size_t n)
{
    tl_strbuf_append(sb, "\"");
    for (size_t i = 0; i < n && i < SHOW_MAX; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\')
            tl_strbuf_appendf(sb, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            tl_strbuf_append_n(sb, &p[i], 1);
        else
            tl_strbuf_appendf(sb, "\\x%02x", c);
    }
    tl_strbuf_append(sb, n > SHOW_MAX ? "\"..." : "\"");
}

static tl_status make_sticky(tl_csv_reader *r, tl_status st)
{
    r->sticky = st;
    tl_free(r->sticky_msg);
    r->sticky_msg = tl_strdup(tl_last_error());
    return st;
}

/* ---- bytes ---------------------------------------------------------------- */

static int get(tl_csv_reader *r)
{
    int c;
    if (r->push != NO_PUSH) {
        c = r->push;
        r->push = NO_PUSH;
        return c;
    }
    if (r->start == r->end) {
        if (r->eof || r->toolong)
            return C_EOF;
        size_t n = fread(r->own, 1, WINDOW, r->f);
        if (n == 0) {
            if (ferror(r->f)) {
                r->ioerr = true;
                r->ioerrno = errno;
            }
            r->eof = true;
            return C_EOF;
        }
        r->start = 0;
        r->end = n;
    }
    if (++r->raw > r->max_record) {
        r->toolong = true; /* ends the record here; the caller reports it */
        return C_EOF;
    }
    return (unsigned char)r->buf[r->start++];
}

/* Appends a byte of field nf (dropped past the last column: the record is
 * wrong anyway and only its field count is reported). */
static bool put(tl_csv_reader *r, char c)
{
    if (r->nf >= r->ncol)
        return true;
    if (r->used == r->rec_cap) {
        size_t cap = r->rec_cap < 256 ? 256 : r->rec_cap * 2;
        char *p = tl_realloc(r->rec, cap);
        if (p == NULL)
            return false;
        r->rec = p;
        r->rec_cap = cap;
    }
    r->rec[r->used++] = c;
    return true;
}

/* ---- records -------------------------------------------------------------- */

/* The quoting error message for field k at the current line. */
static tl_status quote_error(tl_csv_reader *r, const char *what, int c)
{
    char shown[8];
    if (c >= 0x20 && c < 0x7f)
        snprintf(shown, sizeof shown, "'%c'", c);
    else
        snprintf(shown, sizeof shown, "\\x%02x", (unsigned)c & 0xffu);
    return make_sticky(r, tl_error(TL_EPARSE, "%s:%lld: field %d: %s (got %s)", r->name, (long long)r->line + 1,
                                   r->nf + 1, what, shown));
}

/* Reads one record into rec/off/len/nf; *have false at the end of input. */
static tl_status read_record(tl_csv_reader *r, bool *have)
{
    *have = false;
    r->have = false;
    int c;
    for (;;) { /* skip blank lines */
        r->raw = 0;
        r->rec_line = r->line + 1;
        c = get(r);
        if (c == '\r') {
            int c2 = get(r);
            if (c2 == '\n')
                c = '\n';
            else
                r->push = c2;
        }
        if (c != '\n')
            break;
        r->line++;
    }
    if (c == C_EOF && !r->toolong) {
        if (r->ioerr)
            return make_sticky(r, tl_error(TL_EIO, "%s:%lld: read error: %s", r->name, (long long)r->rec_line,
                                           strerror(r->ioerrno)));
        return TL_OK;
    }
    r->used = 0;
    r->nf = 0;
    for (;;) { /* one field per turn; c is its first byte */
        if (r->nf < r->ncol)
            r->off[r->nf] = r->used;
        if (c == '"') {
            int64_t qline = r->line + 1;
            for (;;) {
                c = get(r);
                if (c == C_EOF) {
                    if (r->toolong || r->ioerr)
                        break;
                    return make_sticky(r, tl_error(TL_EPARSE,
                                                   "%s:%lld: field %d: the quoted field that begins on line %lld "
                                                   "has no closing quote",
                                                   r->name, (long long)r->line + 1, r->nf + 1, (long long)qline));
                }
                if (c == '"') {
                    c = get(r);
                    if (c != '"')
                        break; /* c follows the closing quote */
                }
                if (c == '\n')
                    r->line++;
                if (!put(r, (char)c))
                    return tl_error_oom();
            }
            if (c == '\r') {
                int c2 = get(r);
                if (c2 != '\n')
                    return quote_error(r, "expected a delimiter or the end of the record after a closing quote",
                                       c);
                c = '\n';
            }
            if (c != r->delim && c != '\n' && c != C_EOF)
                return quote_error(r, "expected a delimiter or the end of the record after a closing quote", c);
        } else {
            while (c != r->delim && c != '\n' && c != C_EOF) {
                if (c == '"')
                    return quote_error(r, "a quote inside an unquoted field (quote the whole field, doubling "
                                          "the quote)", c);
                if (c == '\r') {
                    int c2 = get(r);
                    if (c2 == '\n') {
                        c = '\n';
                        break;
                    }
                    r->push = c2;
                }
                if (!put(r, (char)c))
                    return tl_error_oom();
                c = get(r);
            }
        }
        if (!put(r, '\0'))
            return tl_error_oom();
        if (r->nf < r->ncol)
            r->len[r->nf] = r->used - r->off[r->nf] - 1;
        if (r->nf < INT32_MAX)
            r->nf++;
        if (c != r->delim)
            break;
        c = get(r);
    }
    if (r->toolong)
        return make_sticky(r, tl_error(TL_EPARSE, "%s:%lld: the record is longer than tl_csv_options.max_record, "
                                                  "%zu bytes",
                                       r->name, (long long)r->rec_line, r->max_record));
    if (r->ioerr)
        return make_sticky(r, tl_error(TL_EIO, "%s:%lld: read error: %s", r->name, (long long)r->line + 1,
                                       strerror(r->ioerrno)));
    if (c == '\n')
        r->line++;
    *have = true;
    return TL_OK;
}

/* ---- values --------------------------------------------------------------- */

static tl_status value_error(const tl_csv_reader *r, int k, const char *what)
{
    tl_strbuf sb = {0};
    show(&sb, r->rec + r->off[k], r->len[k]);
    if (sb.failed) {
        tl_strbuf_free(&sb);
        return tl_error_oom();
    }
    tl_status st = tl_error(TL_EPARSE, "%s:%lld: column %d (\"%s\", %s): expected %s (got %s)", r->name,
                            (long long)r->rec_line, k + 1, r->cols[k].name, type_name(r->cols[k].type), what,
                            sb.data);
    tl_strbuf_free(&sb);
    return st;
}

static tl_status parse_values(tl_csv_reader *r)
{
    if (r->nf != r->ncol)
        return tl_error(TL_EPARSE, "%s:%lld: expected %d field%s, got %d", r->name, (long long)r->rec_line,
                        r->ncol, r->ncol == 1 ? "" : "s", r->nf);
    for (int k = 0; k < r->ncol; k++) {
        const char *s = r->rec + r->off[k];
        size_t n = r->len[k];
        bool clean = n > 0 && strlen(s) == n; /* no NUL inside */
        if (r->cols[k].type == TL_CSV_FLOAT32) {
            /* strtof skips leading space; a field with any is not a number here */
            if (!clean || s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r' || s[0] == '\f' ||
                s[0] == '\v')
                return value_error(r, k, "a number");
            char *e;
            errno = 0;
            float v = strtof(s, &e);
            if (e != s + n)
                return value_error(r, k, "a number");
            if (errno == ERANGE && isinf(v))
                return value_error(r, k, "a number in float32's range");
            r->fv[k] = v;
        } else if (r->cols[k].type == TL_CSV_INT64) {
            if (!clean || tl_parse_int64(s, &r->iv[k]) != 0)
                return value_error(r, k, "a decimal integer in int64's range");
        }
    }
    return TL_OK;
}

/* ---- create / destroy ----------------------------------------------------- */

static tl_status check_options(const tl_csv_options *o)
{
    if (o == NULL)
        return tl_error(TL_EINVAL, "tl_csv_options: NULL (the columns must be given)");
    if (o->columns == NULL || o->num_columns < 1 || o->num_columns > TL_CSV_MAX_COLUMNS)
        return tl_error(TL_EINVAL, "tl_csv_options.num_columns: must be 1..%d with columns set (got %d%s)",
                        TL_CSV_MAX_COLUMNS, o->num_columns, o->columns == NULL ? ", columns NULL" : "");
    if (o->delimiter == '"' || o->delimiter == '\r' || o->delimiter == '\n' || o->delimiter == '\0')
        return tl_error(TL_EINVAL, "tl_csv_options.delimiter: must not be '\"', CR, LF or NUL (got 0x%02x)",
                        (unsigned)(unsigned char)o->delimiter);
    if (o->max_record > ((size_t)1 << 30))
        return tl_error(TL_EINVAL, "tl_csv_options.max_record: must be at most 1 GiB (got %zu)", o->max_record);
    for (int k = 0; k < o->num_columns; k++) {
        const tl_csv_column *c = &o->columns[k];
        if (c->name == NULL)
            return tl_error(TL_EINVAL, "tl_csv_options.columns[%d].name: NULL", k);
        if (c->type != TL_CSV_FLOAT32 && c->type != TL_CSV_INT64 && c->type != TL_CSV_STRING)
            return tl_error(TL_EINVAL, "tl_csv_options.columns[%d].type: must be TL_CSV_FLOAT32, TL_CSV_INT64 "
                                       "or TL_CSV_STRING (got %d)",
                            k, (int)c->type);
        for (int j = 0; j < k; j++)
            if (strcmp(o->columns[j].name, c->name) == 0)
                return tl_error(TL_EINVAL, "tl_csv_options.columns[%d].name: \"%s\" is also column %d", k,
                                c->name, j);
    }
    if (o->label_column != NULL) {
        int k = 0;
        while (k < o->num_columns && strcmp(o->columns[k].name, o->label_column) != 0)
            k++;
        if (k == o->num_columns)
            return tl_error(TL_EINVAL, "tl_csv_options.label_column: \"%s\" is not one of the columns",
                            o->label_column);
        if (o->columns[k].type != TL_CSV_INT64)
            return tl_error(TL_EINVAL, "tl_csv_options.label_column: \"%s\" must be TL_CSV_INT64 (it is %s)",
                            o->label_column, type_name(o->columns[k].type));
    }
    return TL_OK;
}

void tl_csv_reader_destroy(tl_csv_reader *r)
{
    if (r == NULL)
        return;
    if (r->f != NULL)
        fclose(r->f);
    if (r->cols != NULL)
        for (int k = 0; k < r->ncol; k++)
            tl_free((char *)r->cols[k].name);
    tl_free(r->cols);
    tl_free(r->own);
    tl_free(r->name);
    tl_free(r->rec);
    tl_free(r->off);
    tl_free(r->len);
    tl_free(r->fv);
    tl_free(r->iv);
    tl_free(r->sticky_msg);
    tl_free(r);
}

static tl_status reader_new(const char *name, const tl_csv_options *o, tl_csv_reader **out)
{
    tl_status st = check_options(o);
    if (st != TL_OK)
        return st;
    tl_csv_reader *r = tl_calloc(1, sizeof *r);
    if (r == NULL)
        return tl_error_oom();
    r->push = NO_PUSH;
    r->label = -1;
    r->delim = o->delimiter;
    r->max_record = o->max_record != 0 ? o->max_record : TL_CSV_DEFAULT_MAX_RECORD;
    size_t n = (size_t)o->num_columns;
    r->name = tl_strdup(name);
    r->cols = tl_calloc(n, sizeof *r->cols);
    r->off = tl_calloc(n, sizeof *r->off);
    r->len = tl_calloc(n, sizeof *r->len);
    r->fv = tl_calloc(n, sizeof *r->fv);
    r->iv = tl_calloc(n, sizeof *r->iv);
    if (r->name == NULL || r->cols == NULL || r->off == NULL || r->len == NULL || r->fv == NULL || r->iv == NULL) {
        tl_csv_reader_destroy(r);
        return tl_error_oom();
    }
    for (int k = 0; k < o->num_columns; k++) {
        r->cols[k].type = o->columns[k].type;
        r->cols[k].name = tl_strdup(o->columns[k].name);
        r->ncol = k + 1; /* so destroy frees the names made so far */
        if (r->cols[k].name == NULL) {
            tl_csv_reader_destroy(r);
            return tl_error_oom();
        }
        if (o->label_column != NULL && strcmp(o->columns[k].name, o->label_column) == 0)
            r->label = k;
        else if (o->columns[k].type != TL_CSV_STRING)
            r->nfeat++;
    }
    *out = r;
    return TL_OK;
}

/* Reads the header and checks it against the columns. */
static tl_status read_header(tl_csv_reader *r)
{
    bool have;
    tl_status st = read_record(r, &have);
    if (st != TL_OK)
        return st;
    if (!have)
        return tl_error(TL_EPARSE, "%s: empty input; expected a header line", r->name);
    if (r->nf != r->ncol)
        return tl_error(TL_EPARSE, "%s:%lld: the header has %d field%s; expected %d", r->name,
                        (long long)r->rec_line, r->nf, r->nf == 1 ? "" : "s", r->ncol);
    for (int k = 0; k < r->ncol; k++) {
        const char *s = r->rec + r->off[k];
        if (r->len[k] != strlen(r->cols[k].name) || memcmp(s, r->cols[k].name, r->len[k]) != 0) {
            tl_strbuf sb = {0};
            show(&sb, s, r->len[k]);
            if (sb.failed) {
                tl_strbuf_free(&sb);
                return tl_error_oom();
            }
            st = tl_error(TL_EPARSE, "%s:%lld: header column %d is %s; expected \"%s\"", r->name,
                          (long long)r->rec_line, k + 1, sb.data, r->cols[k].name);
            tl_strbuf_free(&sb);
            return st;
        }
    }
    return TL_OK;
}

tl_status tl_csv_reader_create_file(const char *path, const tl_csv_options *opts, tl_csv_reader **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_csv_reader_create_file: out is NULL");
    *out = NULL;
    if (path == NULL)
        return tl_error(TL_EINVAL, "tl_csv_reader_create_file: path is NULL");
    tl_csv_reader *r;
    tl_status st = reader_new(path, opts, &r);
    if (st != TL_OK)
        return st;
    r->own = tl_malloc(WINDOW);
    if (r->own == NULL) {
        tl_csv_reader_destroy(r);
        return tl_error(TL_ENOMEM, "%s: out of memory for the read buffer", path);
    }
    r->buf = r->own;
    r->f = fopen(path, "rb");
    if (r->f == NULL) {
        int e = errno;
        tl_csv_reader_destroy(r);
        return tl_error(TL_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    if ((st = read_header(r)) != TL_OK) {
        tl_csv_reader_destroy(r);
        return st;
    }
    *out = r;
    return TL_OK;
}

tl_status tl_csv_reader_create_memory(const void *data, size_t size, const char *name, const tl_csv_options *opts,
                                      tl_csv_reader **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_csv_reader_create_memory: out is NULL");
    *out = NULL;
    if (data == NULL && size > 0)
        return tl_error(TL_EINVAL, "tl_csv_reader_create_memory: data is NULL with size %zu", size);
    tl_csv_reader *r;
    tl_status st = reader_new(name != NULL ? name : "<memory>", opts, &r);
    if (st != TL_OK)
        return st;
    r->buf = data != NULL ? data : "";
    r->end = size;
    r->eof = true;
    if ((st = read_header(r)) != TL_OK) {
        tl_csv_reader_destroy(r);
        return st;
    }
    *out = r;
    return TL_OK;
}

/* ---- reading -------------------------------------------------------------- */

static tl_status next_one(tl_csv_reader *r, bool *got)
{
    *got = false;
    r->have = false;
    if (r->sticky != TL_OK)
        return r->sticky_msg != NULL ? tl_error(r->sticky, "%s", r->sticky_msg) : tl_error_oom();
    bool have = false;
    tl_status st = read_record(r, &have);
    if (st != TL_OK || !have)
        return st;
    if ((st = parse_values(r)) != TL_OK)
        return st;
    r->have = true;
    *got = true;
    return TL_OK;
}

tl_status tl_csv_reader_next(tl_csv_reader *r, bool *got)
{
    if (r == NULL || got == NULL)
        return tl_error(TL_EINVAL, "tl_csv_reader_next: %s is NULL", r == NULL ? "r" : "got");
    return next_one(r, got);
}

static bool col_ok(const tl_csv_reader *r, int col, tl_csv_type t)
{
    return r != NULL && r->have && col >= 0 && col < r->ncol && r->cols[col].type == t;
}

float tl_csv_reader_float(const tl_csv_reader *r, int col)
{
    return col_ok(r, col, TL_CSV_FLOAT32) ? r->fv[col] : 0.0f;
}

int64_t tl_csv_reader_int64(const tl_csv_reader *r, int col)
{
    return col_ok(r, col, TL_CSV_INT64) ? r->iv[col] : 0;
}

const char *tl_csv_reader_string(const tl_csv_reader *r, int col, size_t *len)
{
    if (!col_ok(r, col, TL_CSV_STRING))
        return NULL;
    if (len != NULL)
        *len = r->len[col];
    return r->rec + r->off[col];
}

int tl_csv_reader_num_features(const tl_csv_reader *r)
{
    return r != NULL ? r->nfeat : 0;
}

int64_t tl_csv_reader_line(const tl_csv_reader *r)
{
    return r != NULL ? r->rec_line : 0;
}

tl_status tl_csv_reader_next_batch(tl_csv_reader *r, int64_t batch, float *features, int32_t *labels,
                                   int64_t *got)
{
    if (got != NULL)
        *got = 0;
    if (r == NULL || got == NULL)
        return tl_error(TL_EINVAL, "tl_csv_reader_next_batch: %s is NULL", r == NULL ? "r" : "got");
    if (r->label < 0)
        return tl_error(TL_EINVAL, "tl_csv_reader_next_batch: no tl_csv_options.label_column was configured");
    if (batch < 0)
        return tl_error(TL_EINVAL, "tl_csv_reader_next_batch: batch must be >= 0 (got %lld)", (long long)batch);
    if (batch > 0 && ((features == NULL && r->nfeat > 0) || labels == NULL))
        return tl_error(TL_EINVAL, "tl_csv_reader_next_batch: %s is NULL", labels == NULL ? "labels" : "features");
    for (int64_t i = 0; i < batch; i++) {
        bool have;
        tl_status st = next_one(r, &have);
        if (st != TL_OK || !have)
            return st;
        int64_t y = r->iv[r->label];
        if (y < INT32_MIN || y > INT32_MAX) {
            r->have = false;
            return value_error(r, r->label, "a label in int32's range");
        }
        float *row = r->nfeat > 0 ? features + i * r->nfeat : NULL;
        int j = 0;
        for (int k = 0; k < r->ncol && row != NULL; k++) {
            if (k == r->label || r->cols[k].type == TL_CSV_STRING)
                continue;
            row[j++] = r->cols[k].type == TL_CSV_FLOAT32 ? r->fv[k] : (float)r->iv[k];
        }
        labels[i] = (int32_t)y;
        *got = i + 1;
    }
    return TL_OK;
}

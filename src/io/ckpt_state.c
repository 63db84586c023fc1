/* ckpt_state.c — TensorFlow's `checkpoint` index: CheckpointState
 * (tensorflow/python/training/checkpoint_state.proto) in protobuf text
 * format, parsed and written the way Python's text_format does:
 *
 *   message CheckpointState {
 *     string model_checkpoint_path = 1;
 *     repeated string all_model_checkpoint_paths = 2;
 *     repeated double all_model_checkpoint_timestamps = 3;
 *     double last_preserved_timestamp = 4;
 *   }
 *
 * Fields are printed in field-number order, strings C-escaped with
 * non-printable bytes as octal (text_format's as_utf8=False), doubles in
 * their shortest round-trip form. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base_int.h"
#include "file.h"
#include "tpuloop/checkpoint.h"

#define INDEX_MAX_BYTES ((size_t)16 << 20)

typedef struct lexer {
    const char *p, *end;
    int line;
    const char *label;
} lexer;

static tl_status lex_error(const lexer *lx, const char *what)
{
    return tl_error(TL_EPARSE, "%s:%d: %s", lx->label, lx->line, what);
}

static void skip_space(lexer *lx)
{
    while (lx->p < lx->end) {
        char c = *lx->p;
        if (c == '\n')
            lx->line++;
        if (c == '#') {
            while (lx->p < lx->end && *lx->p != '\n')
                lx->p++;
            continue;
        }
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v')
            break;
        lx->p++;
    }
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void put_utf8(tl_strbuf *sb, unsigned long cp)
{
    unsigned char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xc0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xe0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xf0 | (cp >> 18));
        b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    tl_strbuf_append_n(sb, b, n);
}

/* One quoted literal ('...' or "...") with text_format's escapes, appended
 * to sb. lx->p is at the opening quote. */
static tl_status lex_string_part(lexer *lx, tl_strbuf *sb)
{
    char q = *lx->p++;
    while (lx->p < lx->end && *lx->p != q) {
        char c = *lx->p++;
        if (c == '\n')
            return lex_error(lx, "string runs past the end of the line");
        if (c == '\0')
            return lex_error(lx, "NUL byte in a string");
        if (c != '\\') {
            tl_strbuf_append_n(sb, &c, 1);
            continue;
        }
        if (lx->p >= lx->end)
            break;
        char e = *lx->p++;
        unsigned long v = 0;
        int digits = 0;
        switch (e) {
        case 'n': v = '\n'; break;
        case 'r': v = '\r'; break;
        case 't': v = '\t'; break;
        case 'a': v = '\a'; break;
        case 'b': v = '\b'; break;
        case 'f': v = '\f'; break;
        case 'v': v = '\v'; break;
        case '\\': case '\'': case '"': case '?': v = (unsigned char)e; break;
        case 'x':
            for (; digits < 2 && lx->p < lx->end && hexval(*lx->p) >= 0; digits++)
                v = v * 16 + (unsigned long)hexval(*lx->p++);
            if (digits == 0)
                return lex_error(lx, "\\x without hex digits");
            break;
        case 'u': case 'U': {
            int want = e == 'u' ? 4 : 8;
            for (; digits < want && lx->p < lx->end && hexval(*lx->p) >= 0; digits++)
                v = v * 16 + (unsigned long)hexval(*lx->p++);
            if (digits != want || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
                return lex_error(lx, "bad \\u escape");
            put_utf8(sb, v);
            continue;
        }
        default:
            if (e < '0' || e > '7')
                return lex_error(lx, "unknown escape in a string");
            v = (unsigned long)(e - '0');
            for (digits = 1; digits < 3 && lx->p < lx->end && *lx->p >= '0' && *lx->p <= '7'; digits++)
                v = v * 8 + (unsigned long)(*lx->p++ - '0');
            if (v > 255)
                return lex_error(lx, "octal escape above \\377");
        }
        if (v == 0)
            return lex_error(lx, "NUL byte in a string");
        char b = (char)v;
        tl_strbuf_append_n(sb, &b, 1);
    }
    if (lx->p >= lx->end)
        return lex_error(lx, "unterminated string");
    lx->p++;
    return TL_OK;
}

/* A string value: one or more adjacent literals, concatenated. */
static tl_status lex_string(lexer *lx, char **out)
{
    *out = NULL;
    if (lx->p >= lx->end || (*lx->p != '"' && *lx->p != '\''))
        return lex_error(lx, "expected a quoted string");
    tl_strbuf sb = {0};
    tl_strbuf_append(&sb, "");
    tl_status st = TL_OK;
    do {
        st = lex_string_part(lx, &sb);
        if (st == TL_OK)
            skip_space(lx);
    } while (st == TL_OK && lx->p < lx->end && (*lx->p == '"' || *lx->p == '\''));
    if (st == TL_OK && sb.failed)
        st = tl_error_oom();
    if (st != TL_OK) {
        tl_strbuf_free(&sb);
        return st;
    }
    *out = tl_strbuf_take(&sb);
    return *out ? TL_OK : tl_error_oom();
}

static tl_status lex_double(lexer *lx, double *out)
{
    char tok[64];
    size_t n = 0;
    while (lx->p < lx->end && n + 1 < sizeof tok && *lx->p != '\0' && strchr("+-.0123456789eEinfatyINFATY", *lx->p))
        tok[n++] = *lx->p++;
    tok[n] = '\0';
    char *endp = tok;
    double v = n ? strtod(tok, &endp) : 0;
    /* text format's float suffix: "1.5f" */
    if (endp != tok && (*endp == 'f' || *endp == 'F') && endp[1] == '\0')
        endp++;
    if (n == 0 || endp == tok || *endp != '\0')
        return lex_error(lx, "expected a number");
    *out = v;
    return TL_OK;
}

static tl_status push_str(char ***arr, int *n, char *s)
{
    char **na = tl_realloc(*arr, ((size_t)*n + 1) * sizeof *na);
    if (na == NULL) {
        tl_free(s);
        return tl_error_oom();
    }
    *arr = na;
    na[(*n)++] = s;
    return TL_OK;
}

static tl_status push_double(double **arr, int *n, double v)
{
    double *na = tl_realloc(*arr, ((size_t)*n + 1) * sizeof *na);
    if (na == NULL)
        return tl_error_oom();
    *arr = na;
    na[(*n)++] = v;
    return TL_OK;
}

static tl_status parse_field(lexer *lx, tl_ckpt_state *s)
{
    const char *id = lx->p;
    while (lx->p < lx->end && (*lx->p == '_' || (*lx->p >= 'a' && *lx->p <= 'z') || (*lx->p >= 'A' && *lx->p <= 'Z') ||
                               (lx->p > id && *lx->p >= '0' && *lx->p <= '9')))
        lx->p++;
    size_t len = (size_t)(lx->p - id);
    if (len == 0)
        return lex_error(lx, "expected a field name");
    char name[48];
    snprintf(name, sizeof name, "%.*s", (int)(len < 40 ? len : 40), id);
    skip_space(lx);
    if (lx->p >= lx->end || *lx->p != ':')
        return tl_error(TL_EPARSE, "%s:%d: expected ':' after '%s'", lx->label, lx->line, name);
    lx->p++;
    skip_space(lx);
    tl_status st;
#define IS(f) (len == sizeof(f) - 1 && memcmp(id, f, len) == 0)
    if (IS("model_checkpoint_path")) {
        char *v;
        st = lex_string(lx, &v);
        if (st == TL_OK) {
            tl_free(s->model_checkpoint_path); /* a repeated scalar: the last wins, as in protobuf */
            s->model_checkpoint_path = v;
        }
    } else if (IS("all_model_checkpoint_paths")) {
        char *v;
        st = lex_string(lx, &v);
        if (st == TL_OK)
            st = push_str(&s->all_model_checkpoint_paths, &s->num_paths, v);
    } else if (IS("all_model_checkpoint_timestamps")) {
        double v;
        st = lex_double(lx, &v);
        if (st == TL_OK)
            st = push_double(&s->all_model_checkpoint_timestamps, &s->num_timestamps, v);
    } else if (IS("last_preserved_timestamp")) {
        st = lex_double(lx, &s->last_preserved_timestamp);
    } else {
        return tl_error(TL_EPARSE, "%s:%d: unknown field '%s'", lx->label, lx->line, name);
    }
#undef IS
    if (st != TL_OK)
        return st;
    skip_space(lx);
    if (lx->p < lx->end && (*lx->p == ',' || *lx->p == ';'))
        lx->p++;
    return TL_OK;
}

tl_status tl_ckpt_state_parse(const char *text, size_t len, const char *label, tl_ckpt_state **out)
{
    *out = NULL;
    tl_ckpt_state *s = tl_calloc(1, sizeof *s);
    if (s == NULL)
        return tl_error_oom();
    lexer lx = {text, text + len, 1, label ? label : TL_CKPT_INDEX_NAME};
    tl_status st = TL_OK;
    for (;;) {
        skip_space(&lx);
        if (lx.p >= lx.end)
            break;
        st = parse_field(&lx, s);
        if (st != TL_OK)
            break;
    }
    if (st == TL_OK && (s->model_checkpoint_path == NULL || s->model_checkpoint_path[0] == '\0'))
        st = tl_error(TL_EPARSE, "%s: no model_checkpoint_path (TensorFlow: Invalid checkpoint state)", lx.label);
    if (st == TL_OK && s->num_timestamps != 0 && s->num_timestamps != s->num_paths)
        st = tl_error(TL_EPARSE, "%s: %d all_model_checkpoint_timestamps for %d all_model_checkpoint_paths", lx.label,
                      s->num_timestamps, s->num_paths);
    if (st != TL_OK) {
        tl_ckpt_state_destroy(s);
        return st;
    }
    *out = s;
    return TL_OK;
}

void tl_ckpt_state_destroy(tl_ckpt_state *s)
{
    if (s == NULL)
        return;
    tl_free(s->model_checkpoint_path);
    for (int i = 0; i < s->num_paths; i++)
        tl_free(s->all_model_checkpoint_paths[i]);
    tl_free(s->all_model_checkpoint_paths);
    tl_free(s->all_model_checkpoint_timestamps);
    tl_free(s);
}

/* text_format's CEscape (as_utf8=False). */
static void put_escaped(tl_strbuf *sb, const char *s)
{
    tl_strbuf_append(sb, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '\n': tl_strbuf_append(sb, "\\n"); break;
        case '\r': tl_strbuf_append(sb, "\\r"); break;
        case '\t': tl_strbuf_append(sb, "\\t"); break;
        case '"': tl_strbuf_append(sb, "\\\""); break;
        case '\'': tl_strbuf_append(sb, "\\'"); break;
        case '\\': tl_strbuf_append(sb, "\\\\"); break;
        default:
            if (*p < 0x20 || *p >= 0x7f)
                tl_strbuf_appendf(sb, "\\%03o", *p);
            else
                tl_strbuf_append_n(sb, p, 1);
        }
    }
    tl_strbuf_append(sb, "\"");
}

/* The shortest %g that reads back as the same double (Python's repr). */
static void put_double(tl_strbuf *sb, double v)
{
    if (isnan(v)) {
        tl_strbuf_append(sb, "nan");
        return;
    }
    if (isinf(v)) {
        tl_strbuf_append(sb, v > 0 ? "inf" : "-inf");
        return;
    }
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    tl_strbuf_append(sb, buf);
}

char *tl_ckpt_state_format(const tl_ckpt_state *s)
{
    if (s == NULL || s->model_checkpoint_path == NULL || s->num_paths < 0 ||
        (s->num_timestamps != 0 && s->num_timestamps != s->num_paths))
        return NULL;
    tl_strbuf sb = {0};
    tl_strbuf_append(&sb, "model_checkpoint_path: ");
    put_escaped(&sb, s->model_checkpoint_path);
    tl_strbuf_append(&sb, "\n");
    for (int i = 0; i < s->num_paths; i++) {
        tl_strbuf_append(&sb, "all_model_checkpoint_paths: ");
        put_escaped(&sb, s->all_model_checkpoint_paths[i]);
        tl_strbuf_append(&sb, "\n");
    }
    for (int i = 0; i < s->num_timestamps; i++) {
        tl_strbuf_append(&sb, "all_model_checkpoint_timestamps: ");
        put_double(&sb, s->all_model_checkpoint_timestamps[i]);
        tl_strbuf_append(&sb, "\n");
    }
    if (s->last_preserved_timestamp != 0) {
        tl_strbuf_append(&sb, "last_preserved_timestamp: ");
        put_double(&sb, s->last_preserved_timestamp);
        tl_strbuf_append(&sb, "\n");
    }
    if (sb.failed) {
        tl_strbuf_free(&sb);
        return NULL;
    }
    return tl_strbuf_take(&sb);
}

void tl_ckpt_free_string(char *s)
{
    tl_free(s);
}

static char *index_path(const char *dir)
{
    size_t n = strlen(dir);
    return tl_asprintf("%s%s" TL_CKPT_INDEX_NAME, dir, n > 0 && dir[n - 1] == '/' ? "" : "/");
}

tl_status tl_ckpt_state_read(const char *model_dir, tl_ckpt_state **out)
{
    *out = NULL;
    char *path = index_path(model_dir);
    if (path == NULL)
        return tl_error_oom();
    char *text;
    size_t len;
    tl_status st = tl_io_read_file(path, INDEX_MAX_BYTES, &text, &len);
    if (st == TL_EINVAL) /* larger than any index tpuloop writes */
        st = tl_error(TL_EPARSE, "%s", tl_last_error());
    if (st == TL_OK) {
        st = tl_ckpt_state_parse(text, len, path, out);
        tl_free(text);
    }
    tl_free(path);
    return st;
}

tl_status tl_ckpt_state_write(const char *model_dir, const tl_ckpt_state *s)
{
    if (s->model_checkpoint_path == NULL)
        return tl_error(TL_EINVAL, "checkpoint state: model_checkpoint_path is NULL");
    if (s->num_paths < 0 || (s->num_timestamps != 0 && s->num_timestamps != s->num_paths))
        return tl_error(TL_EINVAL, "checkpoint state: %d timestamps for %d paths (must be 0 or equal)",
                        s->num_timestamps, s->num_paths);
    char *text = tl_ckpt_state_format(s);
    char *path = index_path(model_dir);
    tl_status st = text && path ? tl_io_write_file_atomic(path, text, strlen(text)) : tl_error_oom();
    tl_free(text);
    tl_free(path);
    return st;
}

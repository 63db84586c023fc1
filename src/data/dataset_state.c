/* dataset_state.c — the text of a saved pipeline state (tl_dataset_save,
 * tl_dataset_restore): its JSON envelope, the elements buffered in it
 * (shuffle and prefetch buffers, records waiting to be parsed), and the JSON
 * helpers the nodes' save and restore share.
 *
 * Format "tpuloop.dataset/2" (documented field by field at tl_dataset_save in
 * tpuloop/dataset.h) came when buffers of 10^5 elements had to be saved with
 * every checkpoint: the nodes' own fields stay JSON, and every buffered
 * element is packed into one byte string (varints, values little-endian,
 * keys and file names by index into "strings"), base64'd once as the last
 * member, "elements". A node's list of slots is {"slots": n, "at": a,
 * "bytes": b} into it. Saving writes the bytes and the base64 straight into
 * the text; restoring cuts "elements" off before the JSON parser sees the
 * text and decodes the bytes directly, checking every count against the
 * bytes left before it allocates.
 *
 * Format "tpuloop.dataset/1" (earlier versions: every element a JSON object
 * inside its node) is read by dataset_state_v1.c. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dataset_int.h"

#define FORMAT_1 "tpuloop.dataset/1"
#define FORMAT_2 "tpuloop.dataset/2"

/* ---- base64 ------------------------------------------------------------------ */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Writes the base64 of p[0..n) to out, (n + 2) / 3 * 4 characters. */
static void b64_encode(const uint8_t *p, size_t n, char *out)
{
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *out++ = B64[v >> 18];
        *out++ = B64[(v >> 12) & 63];
        *out++ = B64[(v >> 6) & 63];
        *out++ = B64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *out++ = B64[v >> 18];
        *out++ = B64[(v >> 12) & 63];
        *out++ = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        *out++ = '=';
    }
}

/* The value of each base64 character, -1 for the others. */
static signed char b64_table[256];
static pthread_once_t b64_once = PTHREAD_ONCE_INIT;

static void b64_table_init(void)
{
    memset(b64_table, -1, sizeof b64_table);
    for (int i = 0; i < 64; i++)
        b64_table[(unsigned char)B64[i]] = (signed char)i;
}

static bool is_b64(char c)
{
    return b64_table[(unsigned char)c] >= 0 || c == '=';
}

bool ds_b64_decode(const char *s, size_t slen, uint8_t *dst, size_t cap, size_t *n)
{
    pthread_once(&b64_once, b64_table_init);
    *n = 0;
    if (slen % 4 != 0)
        return false;
    size_t o = 0;
    for (size_t i = 0; i < slen; i += 4) {
        const unsigned char *q = (const unsigned char *)s + i;
        int a = b64_table[q[0]], b = b64_table[q[1]], c = b64_table[q[2]], d = b64_table[q[3]];
        int pad = 0;
        if (i + 4 == slen && q[3] == '=') {
            pad = q[2] == '=' ? 2 : 1;
            d = 0;
            if (pad == 2)
                c = 0;
        }
        if ((a | b | c | d) < 0 || o + 3 - (size_t)pad > cap)
            return false;
        uint32_t w = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        dst[o++] = (uint8_t)(w >> 16);
        if (pad < 2)
            dst[o++] = (uint8_t)(w >> 8);
        if (pad < 1)
            dst[o++] = (uint8_t)w;
    }
    *n = o;
    return true;
}

/* ---- JSON helpers --------------------------------------------------------------- */

json_t *ds_json_u64_new(uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return json_string(buf);
}

tl_status ds_json_int(json_t *obj, const char *key, const char *what, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return tl_error(TL_EINVAL, "%s: the saved state lacks the integer \"%s\"", what, key);
    *out = (int64_t)json_integer_value(v);
    return TL_OK;
}

tl_status ds_json_u64(json_t *obj, const char *key, const char *what, uint64_t *out)
{
    const char *s = json_string_value(json_object_get(obj, key));
    int64_t v;
    if (s == NULL)
        return tl_error(TL_EINVAL, "%s: the saved state lacks \"%s\"", what, key);
    /* Values past INT64_MAX come back through the unsigned parse. */
    char *end;
    unsigned long long u = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || *s == '-') {
        if (tl_parse_int64(s, &v) != 0)
            return tl_error(TL_EINVAL, "%s: \"%s\" is not an unsigned integer (\"%s\")", what, key, s);
        u = (unsigned long long)v;
    }
    *out = (uint64_t)u;
    return TL_OK;
}

tl_status ds_json_bool(json_t *obj, const char *key, const char *what, bool *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_boolean(v))
        return tl_error(TL_EINVAL, "%s: the saved state lacks the boolean \"%s\"", what, key);
    *out = json_is_true(v);
    return TL_OK;
}

/* ---- values in little-endian order ------------------------------------------------- */

static bool host_little_endian(void)
{
    const uint32_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Copies count values of width bytes from src to dst, turning host order
 * into little-endian order or back (the same swap both ways). */
static void copy_le(uint8_t *dst, const uint8_t *src, size_t count, size_t width)
{
    if (host_little_endian()) {
        if (count > 0)
            memcpy(dst, src, count * width);
        return;
    }
    for (size_t i = 0; i < count; i++)
        for (size_t k = 0; k < width; k++)
            dst[i * width + k] = src[i * width + width - 1 - k];
}

static uint64_t zigzag(int64_t v)
{
    return v < 0 ? ~((uint64_t)v << 1) : (uint64_t)v << 1;
}

static int64_t unzigzag(uint64_t u)
{
    return (u & 1) ? -(int64_t)(u >> 1) - 1 : (int64_t)(u >> 1);
}

/* ---- saving ---------------------------------------------------------------------- */

struct ds_saver {
    uint8_t *buf; /* (len) the element data */
    size_t len, cap;
    const char **strs; /* (nstr) the strings, in order of first use */
    size_t nstr, scap;
    /* Open addressing from a string's pointer to 1 + its index (0: empty):
     * keys and file names are interned, so equal strings are one pointer. */
    size_t *slot_of;
    size_t hcap; /* a power of two */
    size_t list_at;
    int64_t list_n;
    bool failed; /* out of memory since the list began */
};

ds_saver *ds_saver_new(void)
{
    return tl_calloc(1, sizeof(ds_saver));
}

void ds_saver_free(ds_saver *sv)
{
    if (sv == NULL)
        return;
    tl_free(sv->buf);
    tl_free(sv->strs);
    tl_free(sv->slot_of);
    tl_free(sv);
}

static size_t ptr_hash(const char *s, size_t mask)
{
    return (size_t)(((uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

static bool strings_grow(ds_saver *sv)
{
    size_t cap = sv->hcap ? sv->hcap * 2 : 64;
    size_t *t = tl_calloc(cap, sizeof *t);
    if (t == NULL)
        return false;
    for (size_t i = 0; i < sv->nstr; i++) {
        size_t h = ptr_hash(sv->strs[i], cap - 1);
        while (t[h] != 0)
            h = (h + 1) & (cap - 1);
        t[h] = i + 1;
    }
    tl_free(sv->slot_of);
    sv->slot_of = t;
    sv->hcap = cap;
    return true;
}

/* s's index in the string table, added when new; SIZE_MAX when out of
 * memory. */
static size_t string_index(ds_saver *sv, const char *s)
{
    if (sv->hcap > 0) {
        size_t h = ptr_hash(s, sv->hcap - 1);
        for (; sv->slot_of[h] != 0; h = (h + 1) & (sv->hcap - 1))
            if (sv->strs[sv->slot_of[h] - 1] == s)
                return sv->slot_of[h] - 1;
    }
    if ((sv->nstr + 1) * 2 > sv->hcap && !strings_grow(sv))
        return SIZE_MAX;
    if (sv->nstr == sv->scap) {
        size_t cap = sv->scap ? sv->scap * 2 : 16;
        const char **p = tl_realloc(sv->strs, cap * sizeof *p);
        if (p == NULL)
            return SIZE_MAX;
        sv->strs = p;
        sv->scap = cap;
    }
    size_t h = ptr_hash(s, sv->hcap - 1);
    while (sv->slot_of[h] != 0)
        h = (h + 1) & (sv->hcap - 1);
    sv->strs[sv->nstr] = s;
    sv->slot_of[h] = ++sv->nstr;
    return sv->nstr - 1;
}

static bool reserve(ds_saver *sv, size_t extra)
{
    if (extra <= sv->cap - sv->len)
        return true;
    size_t cap = sv->cap ? sv->cap : 4096;
    while (cap - sv->len < extra) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    uint8_t *p = tl_realloc(sv->buf, cap);
    if (p == NULL)
        return false;
    sv->buf = p;
    sv->cap = cap;
    return true;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

#define VARINT_MAX 10

/* At most the bytes an element's encoding takes. */
static size_t elem_bound(const ds_elem *e)
{
    size_t b = 1 + 4 * VARINT_MAX;
    for (int i = 0; i < e->pub.num_tensors; i++) {
        const tl_tensor *t = &e->pub.tensors[i];
        b += VARINT_MAX + 3 + (size_t)t->rank * VARINT_MAX;
        if (t->ragged)
            b += 2 * VARINT_MAX + (size_t)t->num_rows * VARINT_MAX;
        size_t n = (size_t)ds_tensor_count(t);
        if (t->dtype == TL_DT_BYTES) {
            const tl_bytes *v = t->data;
            for (size_t k = 0; k < n; k++)
                b += VARINT_MAX + v[k].len;
        } else {
            b += n * ds_dtype_size(t->dtype);
        }
    }
    return b;
}

void ds_save_slots_begin(ds_saver *sv)
{
    sv->list_at = sv->len;
    sv->list_n = 0;
    sv->failed = false;
}

void ds_save_slot(ds_saver *sv, const ds_elem *e)
{
    if (sv->failed)
        return;
    sv->list_n++;
    if (!reserve(sv, e != NULL ? elem_bound(e) : 1)) {
        sv->failed = true;
        return;
    }
    uint8_t *p = sv->buf + sv->len;
    *p++ = e != NULL;
    if (e == NULL) {
        sv->len++;
        return;
    }
    size_t file = e->file != NULL ? string_index(sv, e->file) : 0;
    if (file == SIZE_MAX) {
        sv->failed = true;
        return;
    }
    p = put_varint(p, e->file != NULL ? file + 1 : 0);
    p = put_varint(p, zigzag(e->record));
    p = put_varint(p, e->offset);
    p = put_varint(p, (uint64_t)e->pub.num_tensors);
    for (int i = 0; i < e->pub.num_tensors; i++) {
        const tl_tensor *t = &e->pub.tensors[i];
        size_t key = string_index(sv, t->key);
        if (key == SIZE_MAX) {
            sv->failed = true;
            return;
        }
        p = put_varint(p, key);
        *p++ = (uint8_t)t->dtype;
        *p++ = (uint8_t)t->rank;
        for (int d = 0; d < t->rank; d++)
            p = put_varint(p, (uint64_t)t->shape[d]);
        *p++ = t->ragged;
        if (t->ragged) {
            p = put_varint(p, (uint64_t)t->num_values);
            p = put_varint(p, (uint64_t)t->num_rows);
            for (int64_t r = 0; r < t->num_rows; r++)
                p = put_varint(p, (uint64_t)t->row_lengths[r]);
        }
        size_t n = (size_t)ds_tensor_count(t);
        if (t->dtype == TL_DT_BYTES) {
            const tl_bytes *v = t->data;
            for (size_t k = 0; k < n; k++) {
                p = put_varint(p, v[k].len);
                if (v[k].len > 0)
                    memcpy(p, v[k].data, v[k].len);
                p += v[k].len;
            }
        } else {
            size_t w = ds_dtype_size(t->dtype);
            copy_le(p, t->data, n, w);
            p += n * w;
        }
    }
    sv->len = (size_t)(p - sv->buf);
}

tl_status ds_save_slots_end(ds_saver *sv, json_t *obj, const char *key)
{
    if (sv->failed)
        return tl_error_oom();
    json_t *l = json_object();
    bool ok = l != NULL && json_object_set_new(obj, key, l) == 0 &&
              json_object_set_new(l, "slots", json_integer(sv->list_n)) == 0 &&
              json_object_set_new(l, "at", json_integer((json_int_t)sv->list_at)) == 0 &&
              json_object_set_new(l, "bytes", json_integer((json_int_t)(sv->len - sv->list_at))) == 0;
    return ok ? TL_OK : tl_error_oom();
}

static const char ELEMENTS_KEY[] = "\"elements\"";

tl_status ds_state_write(ds_saver *sv, int64_t corrupt_skipped, json_t *nodes, char **text)
{
    *text = NULL;
    json_t *root = json_object(), *strs = json_array();
    bool ok = root != NULL && strs != NULL && json_object_set_new(root, "format", json_string(FORMAT_2)) == 0 &&
              json_object_set_new(root, "corrupt_skipped", json_integer((json_int_t)corrupt_skipped)) == 0 &&
              json_object_set(root, "nodes", nodes) == 0 && json_object_set(root, "strings", strs) == 0;
    tl_status st = ok ? TL_OK : tl_error_oom();
    for (size_t i = 0; i < sv->nstr && st == TL_OK; i++) {
        json_t *s = json_string(sv->strs[i]);
        if (s == NULL) {
            /* json_string refuses text that is not UTF-8, or fails to
             * allocate: the unchecked twin tells which. */
            json_t *raw = json_stringn_nocheck(sv->strs[i], strlen(sv->strs[i]));
            st = raw == NULL ? tl_error_oom()
                             : tl_error(TL_EINVAL, "tl_dataset_save: the key or file name \"%s\" is not UTF-8; a "
                                                   "saved state is JSON",
                                        sv->strs[i]);
            json_decref(raw);
        } else if (json_array_append_new(strs, s) != 0) {
            st = tl_error_oom();
        }
    }
    json_decref(strs);
    char *head = st == TL_OK ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (st != TL_OK)
        return st;
    if (head == NULL)
        return tl_error_oom();
    /* head is {...}: the elements go in as its last member, written here
     * rather than through a JSON string of megabytes. */
    size_t hlen = strlen(head);
    TL_ASSERT(hlen >= 2 && head[hlen - 1] == '}');
    size_t b64 = (sv->len + 2) / 3 * 4;
    size_t klen = sizeof ELEMENTS_KEY - 1;
    char *out = tl_malloc(hlen - 1 + 1 + klen + 2 + b64 + 2 + 1);
    if (out == NULL) {
        free(head); /* jansson's own allocation */
        return tl_error_oom();
    }
    char *p = out;
    memcpy(p, head, hlen - 1);
    p += hlen - 1;
    free(head);
    *p++ = ',';
    memcpy(p, ELEMENTS_KEY, klen);
    p += klen;
    *p++ = ':';
    *p++ = '"';
    b64_encode(sv->buf, sv->len, p);
    p += b64;
    *p++ = '"';
    *p++ = '}';
    *p = '\0';
    *text = out;
    return TL_OK;
}

/* ---- restoring --------------------------------------------------------------------- */

struct ds_loader {
    int version; /* 1 or 2 */
    ds_ctx *ctx;
    uint8_t *data; /* (len) version 2: the decoded "elements" */
    size_t len;
    const char **strs; /* (nstr) version 2: "strings", interned */
    size_t nstr;
};

void ds_loader_free(ds_loader *ld)
{
    if (ld == NULL)
        return;
    tl_free(ld->data);
    tl_free(ld->strs);
    tl_free(ld);
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Finds "elements": "<base64>" as the last member of the object text[0..len)
 * (JSON whitespace allowed between the tokens): *open and *close are the
 * indices of the string's quotes. In valid JSON the match cannot lie inside
 * a string: a quote there would be escaped, and a backslash is neither
 * base64 nor ':'. */
static bool find_elements(const char *s, size_t len, size_t *open, size_t *close)
{
    size_t i = len;
    while (i > 0 && is_ws(s[i - 1]))
        i--;
    if (i == 0 || s[--i] != '}')
        return false;
    while (i > 0 && is_ws(s[i - 1]))
        i--;
    if (i == 0 || s[--i] != '"')
        return false;
    *close = i;
    while (i > 0 && is_b64(s[i - 1]))
        i--;
    if (i == 0 || s[--i] != '"')
        return false;
    *open = i;
    while (i > 0 && is_ws(s[i - 1]))
        i--;
    if (i == 0 || s[--i] != ':')
        return false;
    while (i > 0 && is_ws(s[i - 1]))
        i--;
    size_t klen = sizeof ELEMENTS_KEY - 1;
    if (i < klen || memcmp(s + i - klen, ELEMENTS_KEY, klen) != 0)
        return false;
    i -= klen;
    while (i > 0 && is_ws(s[i - 1]))
        i--;
    return i > 0 && (s[i - 1] == ',' || s[i - 1] == '{');
}

static tl_status read_v2(ds_loader *ld, json_t *root, const char *b64, size_t b64len)
{
    const char *what = "tl_dataset_restore";
    json_t *strs = json_object_get(root, "strings");
    if (!json_is_array(strs))
        return tl_error(TL_EINVAL, "%s: the saved state (%s) lacks its \"strings\" array", what, FORMAT_2);
    ld->nstr = json_array_size(strs);
    ld->strs = tl_alloc_array(ld->nstr > 0 ? ld->nstr : 1, sizeof *ld->strs);
    if (ld->strs == NULL)
        return tl_error_oom();
    for (size_t i = 0; i < ld->nstr; i++) {
        const char *s = json_string_value(json_array_get(strs, i));
        if (s == NULL)
            return tl_error(TL_EINVAL, "%s: \"strings\"[%zu] is not a string", what, i);
        if ((ld->strs[i] = ds_intern(ld->ctx, s)) == NULL)
            return tl_error_oom();
    }
    size_t cap = b64len / 4 * 3;
    ld->data = tl_malloc(cap > 0 ? cap : 1);
    if (ld->data == NULL)
        return tl_error_oom();
    if (!ds_b64_decode(b64, b64len, ld->data, cap, &ld->len))
        return tl_error(TL_EINVAL, "%s: \"elements\" is not base64 (%zu characters)", what, b64len);
    return TL_OK;
}

tl_status ds_state_read(ds_ctx *ctx, const char *text, json_t **root_out, ds_loader **ld_out)
{
    *root_out = NULL;
    *ld_out = NULL;
    pthread_once(&b64_once, b64_table_init);
    size_t len = strlen(text), open = 0, close = 0;
    bool split = find_elements(text, len, &open, &close);
    json_error_t jerr;
    json_t *root;
    if (split) {
        /* The object without the elements' characters: "elements": "". */
        char *head = tl_malloc(open + 4);
        if (head == NULL)
            return tl_error_oom();
        memcpy(head, text, open + 1);
        memcpy(head + open + 1, "\"}", 3);
        root = json_loads(head, 0, &jerr);
        tl_free(head);
    } else {
        root = json_loads(text, 0, &jerr);
    }
    if (root == NULL)
        return tl_error(TL_EINVAL, "tl_dataset_restore: not a saved dataset state: %s at line %d column %d",
                        jerr.text, jerr.line, jerr.column);
    ds_loader *ld = tl_calloc(1, sizeof *ld);
    if (ld == NULL) {
        json_decref(root);
        return tl_error_oom();
    }
    ld->ctx = ctx;
    tl_status st = TL_OK;
    const char *fmt = json_string_value(json_object_get(root, "format"));
    json_t *elements = json_object_get(root, "elements");
    if (fmt != NULL && strcmp(fmt, FORMAT_1) == 0) {
        ld->version = 1;
    } else if (fmt != NULL && strcmp(fmt, FORMAT_2) == 0) {
        ld->version = 2;
        if (!json_is_string(elements) || (split && json_string_length(elements) > 0))
            st = tl_error(TL_EINVAL, "tl_dataset_restore: the saved state (%s) lacks its \"elements\" string, or "
                                     "has two",
                          FORMAT_2);
        else if (split)
            st = read_v2(ld, root, text + open + 1, close - open - 1);
        else
            st = read_v2(ld, root, json_string_value(elements), json_string_length(elements));
    } else {
        st = tl_error(TL_EINVAL,
                      "tl_dataset_restore: not a saved dataset state (format \"%s\", expected \"%s\" or \"%s\")",
                      fmt != NULL ? fmt : "", FORMAT_2, FORMAT_1);
    }
    if (st != TL_OK) {
        ds_loader_free(ld);
        json_decref(root);
        return st;
    }
    *root_out = root;
    *ld_out = ld;
    return TL_OK;
}

void ds_slots_free(ds_elem **slots, int64_t n)
{
    for (int64_t i = 0; slots != NULL && i < n; i++)
        ds_elem_free(slots[i]);
    tl_free(slots);
}

/* ---- version 2: the element encoding ------------------------------------------------ */

/* A reader over one list's bytes; why is the first problem found, oom set
 * when it was an allocation. */
typedef struct reader {
    const uint8_t *p, *end;
    char why[200];
    bool oom;
} reader;

static bool fail(reader *r, const char *fmt, ...) TL_PRINTF(2, 3);

static bool fail(reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    return false;
}

static bool fail_oom(reader *r)
{
    r->oom = true;
    return false;
}

static size_t left(const reader *r)
{
    return (size_t)(r->end - r->p);
}

/* A varint of at most max into *out. */
static bool get_varint(reader *r, const char *field, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        if (r->p == r->end)
            return fail(r, "%s: the data ends inside it", field);
        uint8_t b = *r->p++;
        if (shift == 63 && b > 1)
            return fail(r, "%s: a varint past 64 bits", field);
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    if (v > max)
        return fail(r, "%s is %" PRIu64 ", at most %" PRIu64 " allowed", field, v, max);
    *out = v;
    return true;
}

static bool get_byte(reader *r, const char *field, uint8_t *out)
{
    if (r->p == r->end)
        return fail(r, "%s: the data ends before it", field);
    *out = *r->p++;
    return true;
}

static bool get_tensor(ds_loader *ld, reader *r, tl_tensor *t)
{
    uint64_t key = 0, u = 0;
    uint8_t dtype = 0, rank = 0, ragged = 0;
    if (ld->nstr == 0)
        return fail(r, "a tensor's key: \"strings\" is empty");
    if (!get_varint(r, "key", ld->nstr - 1, &key) || !get_byte(r, "dtype", &dtype) || !get_byte(r, "rank", &rank))
        return false;
    t->key = ld->strs[key];
    if (dtype < TL_DT_FLOAT32 || dtype > TL_DT_BYTES)
        return fail(r, "tensor \"%s\": dtype %u (allowed: 1 float32, 2 int64, 3 int32, 4 bytes)", t->key,
                    (unsigned)dtype);
    if (rank > TL_TENSOR_MAX_RANK)
        return fail(r, "tensor \"%s\": rank %u (allowed: 0..%d)", t->key, (unsigned)rank, TL_TENSOR_MAX_RANK);
    t->dtype = (tl_data_type)dtype;
    t->rank = rank;
    for (int d = 0; d < t->rank; d++) {
        if (!get_varint(r, "a dimension", (uint64_t)DS_STATE_MAX_COUNT, &u))
            return false;
        t->shape[d] = (int64_t)u;
    }
    if (!get_byte(r, "ragged", &ragged))
        return false;
    if (ragged > 1)
        return fail(r, "tensor \"%s\": ragged %u (allowed: 0, 1)", t->key, (unsigned)ragged);
    t->ragged = ragged;
    int64_t n = 1;
    if (t->ragged) {
        uint64_t values = 0, rows = 0;
        if (!get_varint(r, "num_values", (uint64_t)DS_STATE_MAX_COUNT, &values) ||
            !get_varint(r, "num_rows", left(r), &rows))
            return false;
        t->num_values = (int64_t)values;
        t->num_rows = (int64_t)rows;
        t->row_lengths = tl_alloc_array((size_t)rows + 1, sizeof *t->row_lengths);
        if (t->row_lengths == NULL)
            return fail_oom(r);
        uint64_t sum = 0;
        for (uint64_t k = 0; k < rows; k++) {
            if (!get_varint(r, "a row length", values - sum, &u))
                return false;
            t->row_lengths[k] = (int64_t)u;
            sum += u;
        }
        if (sum != values)
            return fail(r, "tensor \"%s\": row lengths summing to %" PRIu64 ", not num_values %" PRIu64, t->key, sum,
                        values);
        n = t->num_values;
    } else {
        for (int d = 0; d < t->rank; d++) {
            if (t->shape[d] != 0 && n > DS_STATE_MAX_COUNT / t->shape[d])
                return fail(r, "tensor \"%s\": more than %" PRId64 " values", t->key, DS_STATE_MAX_COUNT);
            n *= t->shape[d];
        }
    }
    if (t->dtype == TL_DT_BYTES) {
        /* One byte of length at least per value. */
        if ((uint64_t)n > left(r))
            return fail(r, "tensor \"%s\": %" PRId64 " values in %zu bytes", t->key, n, left(r));
        const uint8_t *start = r->p;
        size_t total = 0;
        for (int64_t k = 0; k < n; k++) {
            if (!get_varint(r, "a bytes length", UINT64_MAX, &u))
                return false;
            if (u > left(r))
                return fail(r, "tensor \"%s\": value %" PRId64 " of %" PRIu64 " bytes, %zu left", t->key, k, u,
                            left(r));
            r->p += u;
            total += (size_t)u;
        }
        size_t head = (size_t)n * sizeof(tl_bytes);
        uint8_t *block = tl_malloc(head + total + 1);
        if (block == NULL)
            return fail_oom(r);
        t->data = block;
        tl_bytes *b = (tl_bytes *)(void *)block;
        uint8_t *pool = block + head;
        reader again = {start, r->p, "", false};
        for (int64_t k = 0; k < n; k++) {
            bool ok = get_varint(&again, "a bytes length", UINT64_MAX, &u);
            TL_ASSERT(ok); /* the first pass read the same bytes */
            memcpy(pool, again.p, (size_t)u);
            again.p += u;
            b[k].data = pool;
            b[k].len = (size_t)u;
            pool += u;
        }
    } else {
        size_t w = ds_dtype_size(t->dtype);
        if ((uint64_t)n > left(r) / w)
            return fail(r, "tensor \"%s\": %" PRId64 " values of %zu bytes in %zu bytes", t->key, n, w, left(r));
        t->data = tl_malloc(n > 0 ? (size_t)n * w : 1);
        if (t->data == NULL)
            return fail_oom(r);
        copy_le(t->data, r->p, (size_t)n, w);
        r->p += (size_t)n * w;
    }
    return true;
}

/* The next slot into *out (NULL for an empty one). */
static bool get_slot(ds_loader *ld, reader *r, ds_elem **out)
{
    *out = NULL;
    uint8_t tag = 0;
    uint64_t file = 0, record = 0, offset = 0, nt = 0;
    if (!get_byte(r, "the slot's tag", &tag))
        return false;
    if (tag == 0)
        return true;
    if (tag != 1)
        return fail(r, "tag %u (allowed: 0 an empty slot, 1 an element)", (unsigned)tag);
    /* A tensor takes 4 bytes at least. */
    if (!get_varint(r, "file", ld->nstr, &file) || !get_varint(r, "record", UINT64_MAX, &record) ||
        !get_varint(r, "offset", UINT64_MAX, &offset) ||
        !get_varint(r, "the number of tensors", left(r) / 4 < DS_STATE_MAX_TENSORS ? left(r) / 4 : DS_STATE_MAX_TENSORS, &nt))
        return false;
    ds_elem *e = ds_elem_new((int)nt);
    if (e == NULL)
        return fail_oom(r);
    e->file = file > 0 ? ld->strs[file - 1] : NULL;
    e->record = unzigzag(record);
    e->offset = offset;
    for (int i = 0; i < e->pub.num_tensors; i++)
        if (!get_tensor(ld, r, &e->pub.tensors[i])) {
            ds_elem_free(e);
            return false;
        }
    *out = e;
    return true;
}

/* ---- lists of slots ------------------------------------------------------------------ */

tl_status ds_load_slots(ds_loader *ld, json_t *obj, const char *key, const char *what, int64_t max,
                        ds_elem ***slots, int64_t *n)
{
    *slots = NULL;
    *n = 0;
    if (ld->version == 1)
        return ds_load_slots_v1(ld->ctx, obj, key, what, max, slots, n);
    json_t *l = json_object_get(obj, key);
    int64_t count = 0, at = 0, bytes = 0;
    if (!json_is_object(l))
        return tl_error(TL_EINVAL, "%s: the saved state lacks its \"%s\" list", what, key);
    tl_status st = ds_json_int(l, "slots", what, &count);
    if (st == TL_OK)
        st = ds_json_int(l, "at", what, &at);
    if (st == TL_OK)
        st = ds_json_int(l, "bytes", what, &bytes);
    if (st != TL_OK)
        return st;
    if (count < 0 || count > max)
        return tl_error(TL_EINVAL, "%s: the saved \"%s\" holds %lld elements; 0..%lld fit", what, key,
                        (long long)count, (long long)max);
    if (at < 0 || (uint64_t)at > ld->len || bytes < 0 || (uint64_t)bytes > ld->len - (uint64_t)at)
        return tl_error(TL_EINVAL, "%s: the saved \"%s\" list of %lld slots at byte %lld (%lld bytes) lies outside "
                                   "the %zu bytes of \"elements\"",
                        what, key, (long long)count, (long long)at, (long long)bytes, ld->len);
    if (count > bytes)
        return tl_error(TL_EINVAL, "%s: the saved \"%s\" list has %lld slots in %lld bytes (a slot takes a byte at "
                                   "least)",
                        what, key, (long long)count, (long long)bytes);
    if (count == 0 && bytes == 0)
        return TL_OK;
    ds_elem **s = tl_calloc(count > 0 ? (size_t)count : 1, sizeof *s);
    if (s == NULL)
        return tl_error_oom();
    reader r = {ld->data + at, ld->data + at + bytes, "", false};
    int64_t i = 0;
    for (; i < count; i++)
        if (!get_slot(ld, &r, &s[i]))
            break;
    if (i == count && r.p != r.end)
        fail(&r, "%zu bytes after the last slot", left(&r));
    if (i < count || r.p != r.end) {
        ds_slots_free(s, count);
        if (r.oom)
            return tl_error_oom();
        return tl_error(TL_EINVAL, "%s: saved \"%s\", slot %lld: %s", what, key, (long long)i, r.why);
    }
    *slots = s;
    *n = count;
    return TL_OK;
}

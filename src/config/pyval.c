/* pyval.c — how Python prints a value, so that tpuloop's messages read like
 * TensorFlow's ("got 2.5", "must be int, got <class 'float'>"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

const char *tl_py_type(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_INTEGER: return "<class 'int'>";
    case JSON_REAL: return "<class 'float'>";
    case JSON_STRING: return "<class 'str'>";
    case JSON_TRUE:
    case JSON_FALSE: return "<class 'bool'>";
    case JSON_NULL: return "<class 'NoneType'>";
    case JSON_ARRAY: return "<class 'list'>";
    case JSON_OBJECT: return "<class 'dict'>";
    }
    return "<class 'object'>";
}

/* Python's repr of a float: the shortest decimal that reads back the same,
 * with ".0" when it would otherwise look like an int. */
static void py_float(double d, char *buf, size_t n)
{
    if (d != d) {
        snprintf(buf, n, "nan");
        return;
    }
    if (d > 1.7976931348623157e308 || d < -1.7976931348623157e308) {
        snprintf(buf, n, d > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    if (strpbrk(buf, ".eEn") == NULL && strlen(buf) + 2 < n)
        strcat(buf, ".0");
}

static void py_repr(const json_t *v, tl_strbuf *sb, bool top)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        tl_strbuf_appendf(sb, "%lld", (long long)json_integer_value(v));
        return;
    case JSON_REAL:
        py_float(json_real_value(v), num, sizeof num);
        tl_strbuf_append(sb, num);
        return;
    case JSON_STRING:
        if (top)
            tl_strbuf_append(sb, json_string_value(v));
        else
            tl_strbuf_appendf(sb, "'%s'", json_string_value(v));
        return;
    case JSON_TRUE: tl_strbuf_append(sb, "True"); return;
    case JSON_FALSE: tl_strbuf_append(sb, "False"); return;
    case JSON_NULL: tl_strbuf_append(sb, "None"); return;
    case JSON_ARRAY: {
        tl_strbuf_append(sb, "[");
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (i > 0)
                tl_strbuf_append(sb, ", ");
            py_repr(e, sb, false);
        }
        tl_strbuf_append(sb, "]");
        return;
    }
    case JSON_OBJECT: {
        tl_strbuf_append(sb, "{");
        const char *k;
        json_t *e;
        bool first = true;
        json_object_foreach((json_t *)v, k, e) {
            tl_strbuf_appendf(sb, "%s'%s': ", first ? "" : ", ", k);
            py_repr(e, sb, false);
            first = false;
        }
        tl_strbuf_append(sb, "}");
        return;
    }
    }
}

bool tl_py_str(const json_t *v, char *buf, size_t n)
{
    tl_strbuf sb = {0};
    py_repr(v, &sb, true);
    char *s = tl_strbuf_take(&sb);
    if (n == 0) {
        tl_free(s);
        return s != NULL;
    }
    if (s == NULL) {
        snprintf(buf, n, "<value>");
        return false;
    }
    snprintf(buf, n, "%s", s);
    if (strlen(s) >= n && n > 4)
        memcpy(buf + n - 4, "...", 4);
    tl_free(s);
    return true;
}

/* pyregex.c — Python `re` patterns (LayoutMap keys, warm_start_vars) turned
 * into POSIX extended regular expressions: the subset variable-path rules
 * use is translated, and what POSIX would match differently is rejected with
 * the reason. Character sets are rebuilt from a 128-entry membership table
 * so that POSIX's ordering rules for ']' '-' '^' '[' inside brackets never
 * bite. It lives in base/ because config/ (warm_start_vars, checked at
 * resolve) and mesh/ (LayoutMap) both need it. */
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "base_int.h"

typedef struct rx {
    const char *what; /* names the pattern in messages: "LayoutMap key" */
    const char *pat;
    size_t i;     /* read position in pat */
    tl_strbuf sb; /* the ERE being written */
} rx;

static tl_status rx_error(const rx *r, size_t at, const char *what)
{
    return tl_error(TL_EINVAL, "%s '%s' is not a supported regular expression: %s at position %zu", r->what,
                    r->pat, what, at);
}

static bool is_alnum(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Adds the members of Python's \d \w \s (ASCII) to set. */
static void add_class(bool set[128], int cls)
{
    switch (cls) {
    case 'd':
        for (int c = '0'; c <= '9'; c++)
            set[c] = true;
        break;
    case 'w':
        for (int c = 0; c < 128; c++)
            if (is_alnum(c) || c == '_')
                set[c] = true;
        break;
    default: /* 's' */
        for (const char *p = " \t\n\r\f\v"; *p; p++)
            set[(int)*p] = true;
        break;
    }
}

static int control_escape(int c)
{
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    default: return -1;
    }
}

static bool is_bracket_special(int c)
{
    return c == ']' || c == '-' || c == '^' || c == '[';
}

/* Writes set as a POSIX bracket expression: ']' first, '[' then '^' then '-'
 * last, and '^' never right after the opening bracket. */
static void emit_set(tl_strbuf *sb, const bool set[128], bool neg)
{
    int others = 0;
    for (int c = 1; c < 128; c++)
        others += set[c] && !is_bracket_special(c);
    bool rb = set[']'], dash = set['-'], caret = set['^'], lb = set['['];
    if (!neg && caret && !rb && !dash && !lb && others == 0) {
        tl_strbuf_append(sb, "\\^");
        return;
    }
    tl_strbuf_append(sb, neg ? "[^" : "[");
    if (rb)
        tl_strbuf_append(sb, "]");
    for (int c = 1; c < 128; c++) {
        if (!set[c] || is_bracket_special(c))
            continue;
        int e = c;
        while (e + 1 < 128 && set[e + 1] && !is_bracket_special(e + 1))
            e++;
        if (e - c >= 2)
            tl_strbuf_appendf(sb, "%c-%c", c, e);
        else
            for (int k = c; k <= e; k++)
                tl_strbuf_appendf(sb, "%c", k);
        c = e;
    }
    if (lb)
        tl_strbuf_append(sb, "[");
    if (caret && !rb && others == 0 && !lb && dash) {
        tl_strbuf_append(sb, "-^]");
        return;
    }
    if (caret)
        tl_strbuf_append(sb, "^");
    if (dash)
        tl_strbuf_append(sb, "-");
    tl_strbuf_append(sb, "]");
}

/* One member of a bracket set at r->i: a character (*ch) or a class (*cls =
 * 'd', 'w' or 's'). */
static tl_status set_item(rx *r, int *ch, int *cls)
{
    size_t at = r->i;
    unsigned char c = (unsigned char)r->pat[r->i];
    *ch = -1;
    *cls = 0;
    if (c == '\0')
        return rx_error(r, at, "unterminated character set");
    if (c >= 128)
        return rx_error(r, at, "a non-ASCII character inside [...] is not supported");
    r->i++;
    if (c != '\\') {
        *ch = c;
        return TL_OK;
    }
    unsigned char e = (unsigned char)r->pat[r->i];
    if (e == '\0')
        return rx_error(r, at, "bad escape (end of pattern)");
    r->i++;
    if (e == 'd' || e == 'w' || e == 's') {
        *cls = e;
        return TL_OK;
    }
    if (e == 'D' || e == 'W' || e == 'S')
        return rx_error(r, at, "a negated class (\\D, \\W, \\S) inside [...] is not supported");
    if (control_escape(e) >= 0) {
        *ch = control_escape(e);
        return TL_OK;
    }
    if (e >= 128 || is_alnum(e)) {
        char what[64];
        snprintf(what, sizeof what, "the escape \\%c inside [...] is not supported", e >= 128 ? '?' : e);
        return rx_error(r, at, what);
    }
    *ch = e;
    return TL_OK;
}

/* A Python bracket set; r->i is just past the '['. */
static tl_status translate_set(rx *r)
{
    size_t start = r->i - 1;
    bool set[128] = {false};
    bool neg = false;
    if (r->pat[r->i] == '^') {
        neg = true;
        r->i++;
    }
    bool first = true;
    for (;;) {
        if (r->pat[r->i] == '\0')
            return rx_error(r, start, "unterminated character set");
        if (r->pat[r->i] == ']' && !first) {
            r->i++;
            break;
        }
        first = false;
        size_t at = r->i;
        int lo, lo_cls;
        tl_status st = set_item(r, &lo, &lo_cls);
        if (st != TL_OK)
            return st;
        if (r->pat[r->i] == '-' && r->pat[r->i + 1] != ']' && r->pat[r->i + 1] != '\0') {
            r->i++;
            int hi, hi_cls;
            if ((st = set_item(r, &hi, &hi_cls)) != TL_OK)
                return st;
            if (lo_cls || hi_cls || hi < lo)
                return rx_error(r, at, "bad character range");
            for (int c = lo; c <= hi; c++)
                set[c] = true;
        } else if (lo_cls) {
            add_class(set, lo_cls);
        } else {
            set[lo] = true;
        }
    }
    emit_set(&r->sb, set, neg);
    return TL_OK;
}

static void emit_literal(tl_strbuf *sb, unsigned char c)
{
    if (c != '\0' && strchr(".[()*+?{|^$\\", c) != NULL)
        tl_strbuf_appendf(sb, "\\%c", c);
    else
        tl_strbuf_appendf(sb, "%c", c);
}

/* A Python escape outside brackets; r->i is at the backslash. */
static tl_status translate_escape(rx *r)
{
    size_t at = r->i;
    unsigned char e = (unsigned char)r->pat[r->i + 1];
    if (e == '\0')
        return rx_error(r, at, "bad escape (end of pattern)");
    r->i += 2;
    if (strchr("dwsDWS", e) != NULL) {
        bool set[128] = {false};
        add_class(set, e | 0x20);
        emit_set(&r->sb, set, e < 'a');
        return TL_OK;
    }
    if (control_escape(e) >= 0) {
        emit_literal(&r->sb, (unsigned char)control_escape(e));
        return TL_OK;
    }
    if (is_alnum(e)) {
        char what[96];
        snprintf(what, sizeof what,
                 "the escape \\%c is not supported (no word boundaries, anchors, back-references or "
                 "code escapes)", e);
        return rx_error(r, at, what);
    }
    emit_literal(&r->sb, e);
    return TL_OK;
}

static bool read_digits(const char *p, size_t *i, long *v)
{
    size_t s = *i;
    *v = 0;
    while (p[*i] >= '0' && p[*i] <= '9') {
        if (*v < 100000)
            *v = *v * 10 + (p[*i] - '0');
        (*i)++;
    }
    return *i > s;
}

/* Python's `{`: a repeat {m} {m,} {m,n} {,n} {,} when it parses as one, else
 * a literal '{'. Returns 1 for a repeat (written as ERE), 0 for a literal. */
static int parse_repeat(rx *r, long *min, long *max, bool *unbounded)
{
    const char *p = r->pat;
    size_t i = r->i + 1;
    if (p[i] == '}')
        return 0;
    long lo = 0, hi = 0;
    bool has_lo = read_digits(p, &i, &lo), has_hi;
    if (p[i] == ',') {
        i++;
        has_hi = read_digits(p, &i, &hi);
    } else {
        has_hi = has_lo;
        hi = lo;
    }
    if (p[i] != '}')
        return 0;
    *min = has_lo ? lo : 0;
    *max = hi;
    *unbounded = !has_hi;
    r->i = i + 1;
    return 1;
}

static tl_status translate(rx *r)
{
    bool atom = false;     /* a quantifier may follow */
    bool quantified = false; /* the previous token was a quantifier */
    int depth = 0;
    while (r->pat[r->i] != '\0') {
        size_t at = r->i;
        unsigned char c = (unsigned char)r->pat[r->i];
        bool quant = c == '*' || c == '+' || c == '?';
        long min = 0, max = 0;
        bool unbounded = false;
        if (c == '{' && parse_repeat(r, &min, &max, &unbounded))
            quant = true;
        else if (quant)
            r->i++;
        if (quant) {
            if (quantified && c == '?')
                return rx_error(r, at, "a lazy quantifier (*? +? ?? {m,n}?) is not supported");
            if (quantified && c == '+')
                return rx_error(r, at, "a possessive quantifier (*+ ++ ?+) is not supported");
            if (quantified)
                return rx_error(r, at, "multiple repeat");
            if (!atom)
                return rx_error(r, at, "nothing to repeat");
            if (c != '{')
                tl_strbuf_appendf(&r->sb, "%c", c);
            else if (!unbounded && max < min)
                return rx_error(r, at, "min repeat greater than max repeat");
            else if (unbounded)
                tl_strbuf_appendf(&r->sb, "{%ld,}", min);
            else if (min == max)
                tl_strbuf_appendf(&r->sb, "{%ld}", min);
            else
                tl_strbuf_appendf(&r->sb, "{%ld,%ld}", min, max);
            quantified = true;
            continue;
        }
        quantified = false;
        tl_status st = TL_OK;
        switch (c) {
        case '\\':
            st = translate_escape(r);
            atom = true;
            break;
        case '[':
            r->i++;
            st = translate_set(r);
            atom = true;
            break;
        case '(':
            if (r->pat[r->i + 1] == '?')
                return rx_error(r, at,
                                "'(?' groups (non-capturing, lookahead, lookbehind, named, inline flags) "
                                "are not supported");
            tl_strbuf_append(&r->sb, "(");
            r->i++;
            depth++;
            atom = false;
            break;
        case ')':
            if (depth == 0)
                return rx_error(r, at, "unbalanced parenthesis");
            tl_strbuf_append(&r->sb, ")");
            r->i++;
            depth--;
            atom = true;
            break;
        case '.':
            tl_strbuf_append(&r->sb, ".");
            r->i++;
            atom = true;
            break;
        case '|':
        case '^':
        case '$':
            tl_strbuf_appendf(&r->sb, "%c", c);
            r->i++;
            atom = false;
            break;
        case '{':
            tl_strbuf_append(&r->sb, "\\{");
            r->i++;
            atom = true;
            break;
        default:
            emit_literal(&r->sb, c);
            r->i++;
            atom = true;
            break;
        }
        if (st != TL_OK)
            return st;
    }
    if (depth != 0)
        return rx_error(r, r->i, "missing ), unterminated subpattern");
    return TL_OK;
}

tl_status tl_pyregex_translate_named(const char *what, const char *pat, bool full, char **out)
{
    *out = NULL;
    rx r = {what, pat, 0, {0}};
    if (full)
        tl_strbuf_append(&r.sb, "^(");
    tl_status st = translate(&r);
    if (st != TL_OK) {
        tl_strbuf_free(&r.sb);
        return st;
    }
    if (full)
        tl_strbuf_append(&r.sb, ")$");
    char *s = tl_strbuf_take(&r.sb);
    if (s == NULL)
        return tl_error_oom();
    *out = s;
    return TL_OK;
}

tl_status tl_pyregex_translate(const char *pat, bool full, char **out)
{
    return tl_pyregex_translate_named("LayoutMap key", pat, full, out);
}

tl_status tl_pyregex_check_match(const char *what, const char *pat)
{
    char *ere;
    tl_status st = tl_pyregex_translate_named(what, pat, false, &ere);
    if (st != TL_OK)
        return st;
    /* re.match anchors at the start only; compiling the anchored form also
     * catches what the POSIX engine refuses after translation (a repeat
     * count above RE_DUP_MAX). */
    char *anchored = tl_asprintf("^(%s)", ere);
    tl_free(ere);
    if (anchored == NULL)
        return tl_error_oom();
    regex_t re;
    int rc = regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB);
    tl_free(anchored);
    if (rc == REG_ESPACE)
        return tl_error_oom();
    if (rc != 0) {
        char why[256];
        regerror(rc, &re, why, sizeof why);
        return tl_error(TL_EINVAL, "%s '%s' is not a supported regular expression: %s", what, pat, why);
    }
    regfree(&re);
    return TL_OK;
}

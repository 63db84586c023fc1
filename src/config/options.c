/* options.c — the option table, generated from options.def, and the option
 * nearest to a misspelt name (tl_config_suggest). */
#include <stdint.h>
#include <string.h>

#include "config_int.h"

const tl_option tl_options[TL_NUM_OPTIONS] = {
#define TL_OPTION(name, section, kind, nullable, def, min, max, env, allowed, help) \
    [TL_OPT_ID_##name] = {#name, section, kind, nullable, def, min, max, env, allowed, help},
#include "options.def"
#undef TL_OPTION
};

int tl_option_find(const char *name)
{
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        const tl_option *o = &tl_options[i];
        if (strcmp(name, o->name) == 0)
            return i;
        if (o->section != NULL) {
            size_t n = strlen(o->section);
            if (strncmp(name, o->section, n) == 0 && name[n] == '.' && strcmp(name + n + 1, o->name) == 0)
                return i;
        }
    }
    return -1;
}

/* ---- did you mean ---------------------------------------------------------- */

/* Longest name compared; a longer one is no typo of an option. */
#define SUGGEST_MAX 128

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* The edit distance of a[0..n) and b, case-insensitive, counting an
 * insertion, a deletion, a substitution and a swap of two neighbours as one
 * edit each (optimal string alignment): typos of flags are mostly those. */
static int distance(const char *a, size_t n, const char *b)
{
    size_t m = strlen(b);
    if (m > SUGGEST_MAX)
        return INT32_MAX;
    int rows[3][SUGGEST_MAX + 1];
    int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= m; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int ai = lower((unsigned char)a[i - 1]), bj = lower((unsigned char)b[j - 1]);
            int best = prev[j - 1] + (ai != bj);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ai == lower((unsigned char)b[j - 2]) && lower((unsigned char)a[i - 2]) == bj &&
                prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        int *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[m];
}

tl_status tl_config_suggest(const char *name, const char **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_config_suggest: out is NULL");
    *out = NULL;
    if (name == NULL)
        return tl_error(TL_EINVAL, "tl_config_suggest: name is NULL");
    /* "--flag=value" and "section.key" are matched by the option's leaf name. */
    const char *p = strncmp(name, "--", 2) == 0 ? name + 2 : name;
    const char *dot = strrchr(p, '.');
    const char *eq = strchr(p, '=');
    if (dot != NULL && (eq == NULL || dot < eq))
        p = dot + 1;
    size_t n = eq != NULL && eq >= p ? (size_t)(eq - p) : strlen(p);
    if (n == 0 || n > SUGGEST_MAX)
        return TL_OK;
    int limit = (int)(n / 4) > 2 ? (int)(n / 4) : 2;
    int best = limit + 1;
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        int d = distance(p, n, tl_options[i].name);
        if (d < best) {
            best = d;
            *out = tl_options[i].name;
        }
    }
    return TL_OK;
}

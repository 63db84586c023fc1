/* parse.c — numbers from text with whole-string and range checks
 * (strtoll + end pointer + errno, never atoi). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "base_int.h"

int tl_parse_int64(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q))
            return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE)
        return -2;
    if (end == NULL || *end != '\0')
        return -1;
    *out = (int64_t)v;
    return 0;
}

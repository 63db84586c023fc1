/* ipl.c — TensorFlow's iterations_per_loop grammar, without its regex quirks.
 *
 * TensorFlow matches str(value) against ^(?P<value>[1-9]\d*)((?P<suffix>[s|m|h])$|$).
 * Python's `$` also matches before one trailing newline and the class [s|m|h]
 * also admits '|', so "5\n" and "5|" are accepted there by accident; the spec
 * recommends rejecting both, and this parser does: the whole string must be
 * [1-9][0-9]* optionally followed by exactly one of s, m, h. */
#include <string.h>

#include "../base/base_int.h"
#include "tpuloop/config.h"

/* TensorFlow's text, "anypositive" included, then the value received. */
#define IPL_ERROR                                                                               \
    "Invalid TPUConfig `iterations_per_loop` value. Value must be positive integer value or "  \
    "time-based value `<N><s|m|h>` where <N> is anypositive integer and `s`, `m`, `h` are "     \
    "unit of time in seconds, minutes, hours respectively. Examples of valid values: `3600s`, " \
    "`60m`, `1h`. (got '%s')"

tl_status tl_parse_iterations_per_loop(const char *text, tl_ipl *out)
{
    const char *p = text;
    if (*p < '1' || *p > '9')
        return tl_error(TL_EINVAL, IPL_ERROR, text);
    int64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        int d = *p - '0';
        if (v > (INT64_MAX - d) / 10)
            return tl_error(TL_EINVAL, IPL_ERROR " (the number overflows 64 bits; it must be positive and at most %lld)",
                            text, (long long)INT64_MAX);
        v = v * 10 + d;
    }
    int64_t mult = 0;
    tl_ipl_unit unit = TL_IPL_COUNT;
    if (*p == '\0') {
        mult = 1;
    } else if (p[1] == '\0' && (*p == 's' || *p == 'm' || *p == 'h')) {
        unit = TL_IPL_SECONDS;
        mult = *p == 's' ? 1 : *p == 'm' ? 60 : 3600;
    } else {
        return tl_error(TL_EINVAL, IPL_ERROR, text);
    }
    if (v > INT64_MAX / mult)
        return tl_error(TL_EINVAL, IPL_ERROR " (overflows 64 bits once converted to seconds)", text);
    out->unit = unit;
    out->value = v * mult;
    return TL_OK;
}

/* options.c — the option table, generated from options.def. */
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

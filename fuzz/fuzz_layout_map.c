/* fuzz_layout_map.c — libFuzzer target for LayoutMap keys: Python-style
 * regular expressions translated to POSIX (pyregex.c), stored, matched and
 * popped, in both full-match (Keras >= 3.14) and search (<= 3.13) modes.
 *
 * Input: lines. The first byte picks the mode. Each line "+KEY" inserts KEY
 * with a layout on the mesh axis named by the byte after '+' ('d' data, 'm'
 * model, anything else None), "-KEY" pops KEY, any other line is a path to
 * look up. Every outcome must be a status, never a crash or a leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/tpuloop.h"

#define MAX_LINES 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    tl_match_mode mode = (data[0] & 1) ? TL_MATCH_SEARCH : TL_MATCH_FULL;
    char *buf = malloc(size);
    if (buf == NULL)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';

    tl_devices *devs = NULL;
    tl_mesh *mesh = NULL;
    tl_layout_map *map = NULL;
    static const int64_t shape[2] = {2, 2};
    static const char *const axes[2] = {"data", "model"};
    if (tl_devices_create(4, 1, 0, &devs) != TL_OK || tl_mesh_create(devs, shape, 2, axes, 2, NULL, 0, &mesh) != TL_OK ||
        tl_layout_map_create(mesh, mode, &map) != TL_OK)
        goto out;

    char *line = buf;
    for (int n = 0; n < MAX_LINES && line != NULL; n++) {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        if (line[0] == '+' && line[1] != '\0') {
            const char *axis = line[1] == 'd' ? "data" : line[1] == 'm' ? "model" : NULL;
            const char *layout_axes[2] = {NULL, axis};
            tl_layout_map_set_axes(map, line + 2, layout_axes, 2);
        } else if (line[0] == '-') {
            tl_layout *popped = NULL;
            if (tl_layout_map_pop(map, line + 1, &popped) == TL_OK)
                tl_layout_destroy(popped);
        } else {
            const tl_layout *found = NULL;
            tl_layout_map_get(map, line, &found);
        }
        line = nl ? nl + 1 : NULL;
    }
    for (int i = 0; i < tl_layout_map_size(map); i++)
        if (tl_layout_map_key(map, i) == NULL || tl_layout_map_value(map, i) == NULL)
            __builtin_trap();
out:
    tl_layout_map_destroy(map);
    tl_mesh_destroy(mesh);
    tl_devices_destroy(devs);
    free(buf);
    return 0;
}

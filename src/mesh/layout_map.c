/* layout_map.c — Keras' LayoutMap: an insertion-ordered map from variable
 * path patterns to layouts. An exact key wins; otherwise every key is a
 * regular expression, compiled once at insertion. */
#include <regex.h>
#include <string.h>

#include "mesh_int.h"

typedef struct entry {
    char *key;
    tl_layout *layout; /* owned */
    regex_t *re;       /* key translated to POSIX and compiled; its own
                          allocation, since POSIX does not promise a
                          regex_t may be moved */
} entry;

struct tl_layout_map {
    const tl_mesh *mesh; /* borrowed */
    tl_match_mode mode;
    int n;
    int cap;
    entry *e; /* (cap), the first n in insertion order */
};

tl_status tl_layout_map_create(const tl_mesh *mesh, tl_match_mode mode, tl_layout_map **out)
{
    *out = NULL;
    if (mesh == NULL)
        return tl_error(TL_EINVAL, "LayoutMap: device_mesh is NULL; a LayoutMap needs a DeviceMesh");
    if (mode != TL_MATCH_FULL && mode != TL_MATCH_SEARCH)
        return tl_error(TL_EINVAL, "LayoutMap: match mode must be TL_MATCH_FULL or TL_MATCH_SEARCH, got %d",
                        (int)mode);
    tl_layout_map *m = tl_calloc(1, sizeof *m);
    if (m == NULL)
        return tl_error_oom();
    m->mesh = mesh;
    m->mode = mode;
    *out = m;
    return TL_OK;
}

static void entry_free(entry *e)
{
    if (e->re != NULL)
        regfree(e->re);
    tl_free(e->re);
    tl_free(e->key);
    tl_layout_destroy(e->layout);
}

void tl_layout_map_destroy(tl_layout_map *map)
{
    if (map == NULL)
        return;
    for (int i = 0; i < map->n; i++)
        entry_free(&map->e[i]);
    tl_free(map->e);
    tl_free(map);
}

const tl_mesh *tl_layout_map_mesh(const tl_layout_map *map) { return map->mesh; }
tl_match_mode tl_layout_map_mode(const tl_layout_map *map) { return map->mode; }
int tl_layout_map_size(const tl_layout_map *map) { return map->n; }

const char *tl_layout_map_key(const tl_layout_map *map, int i)
{
    return i >= 0 && i < map->n ? map->e[i].key : NULL;
}

const tl_layout *tl_layout_map_value(const tl_layout_map *map, int i)
{
    return i >= 0 && i < map->n ? map->e[i].layout : NULL;
}

static int find_key(const tl_layout_map *map, const char *key)
{
    for (int i = 0; i < map->n; i++)
        if (strcmp(map->e[i].key, key) == 0)
            return i;
    return -1;
}

/* Compiles key into re. On failure the thread's error names the key. */
static tl_status compile_key(const tl_layout_map *map, const char *key, regex_t *re)
{
    char *ere = NULL;
    tl_status st = tl_pyregex_translate(key, map->mode == TL_MATCH_FULL, &ere);
    if (st != TL_OK)
        return st;
    int rc = regcomp(re, ere, REG_EXTENDED | REG_NOSUB);
    tl_free(ere);
    if (rc == REG_ESPACE)
        return tl_error_oom();
    if (rc != 0) {
        char why[256];
        regerror(rc, re, why, sizeof why);
        return tl_error(TL_EINVAL, "LayoutMap key '%s' is not a supported regular expression: %s", key, why);
    }
    return TL_OK;
}

static tl_status add_entry(tl_layout_map *map, const char *key, tl_layout *layout)
{
    if (map->n == map->cap) {
        int cap = map->cap ? 2 * map->cap : 8;
        entry *e = tl_realloc(map->e, (size_t)cap * sizeof *e);
        if (e == NULL)
            return tl_error_oom();
        map->e = e;
        map->cap = cap;
    }
    entry ent = {tl_strdup(key), NULL, tl_malloc(sizeof(regex_t))};
    if (ent.key == NULL || ent.re == NULL) {
        tl_free(ent.key);
        tl_free(ent.re);
        return tl_error_oom();
    }
    tl_status st = compile_key(map, key, ent.re);
    if (st != TL_OK) {
        tl_free(ent.key);
        tl_free(ent.re);
        return st;
    }
    ent.layout = layout;
    map->e[map->n++] = ent;
    return TL_OK;
}

tl_status tl_layout_map_set(tl_layout_map *map, const char *key, tl_layout *layout)
{
    if (key == NULL) {
        tl_layout_destroy(layout);
        return tl_error(TL_EINVAL, "LayoutMap: the key is NULL");
    }
    int dup = find_key(map, key);
    if (dup >= 0) {
        char old[768];
        tl_sink s = tl_sink_make(old, sizeof old);
        tl_layout_repr_sink(&s, map->e[dup].layout);
        tl_layout_destroy(layout);
        return tl_error(TL_EINVAL,
                        "%s already exist in the LayoutMap with value %s. Please make sure to not use "
                        "duplicated keys.",
                        key, old);
    }
    if (layout == NULL)
        return tl_error(TL_EINVAL, "None should be a TensorLayout type, got NULL (LayoutMap key '%s')", key);
    tl_status st = TL_OK;
    if (tl_layout_mesh(layout) == NULL)
        st = tl_layout_set_mesh(layout, map->mesh);
    if (st == TL_OK)
        st = add_entry(map, key, layout);
    if (st != TL_OK)
        tl_layout_destroy(layout);
    return st;
}

tl_status tl_layout_map_set_axes(tl_layout_map *map, const char *key, const char *const *axes, int rank)
{
    tl_layout *l;
    tl_status st = tl_layout_create(axes, rank, NULL, &l);
    if (st != TL_OK)
        return st;
    return tl_layout_map_set(map, key, l);
}

static bool matches(const entry *e, const char *path)
{
    return regexec(e->re, path, 0, NULL, 0) == 0;
}

tl_status tl_layout_map_get(const tl_layout_map *map, const char *path, const tl_layout **out)
{
    *out = NULL;
    if (path == NULL)
        return tl_error(TL_EINVAL, "LayoutMap: the path to look up is NULL");
    int exact = find_key(map, path);
    if (exact >= 0) {
        *out = map->e[exact].layout;
        return TL_OK;
    }
    int found = -1, count = 0;
    for (int i = 0; i < map->n; i++) {
        if (matches(&map->e[i], path)) {
            if (found < 0)
                found = i;
            count++;
        }
    }
    if (count == 1)
        *out = map->e[found].layout;
    if (count <= 1)
        return TL_OK;
    char keys[768];
    tl_sink s = tl_sink_make(keys, sizeof keys);
    tl_sink_puts(&s, "[");
    for (int i = found, k = 0; i < map->n; i++) {
        if (!matches(&map->e[i], path))
            continue;
        tl_sink_puts(&s, k++ ? ", " : "");
        tl_sink_pystr(&s, map->e[i].key);
    }
    tl_sink_puts(&s, "]");
    return tl_error(TL_EINVAL,
                    "Path '%s' matches multiple layout specification keys: %s. Please make sure each "
                    "tensor/variable path only matches at most one layout specification key in the LayoutMap.",
                    path, keys);
}

tl_status tl_layout_map_pop(tl_layout_map *map, const char *key, tl_layout **out)
{
    *out = NULL;
    int i = key != NULL ? find_key(map, key) : -1;
    if (i < 0) {
        char k[512];
        tl_sink s = tl_sink_make(k, sizeof k);
        if (key != NULL)
            tl_sink_pystr(&s, key);
        else
            tl_sink_puts(&s, "None");
        return tl_error(TL_ENOTFOUND, "KeyError: %s (pop takes a key exactly as set; patterns are not applied)",
                        k);
    }
    *out = map->e[i].layout;
    map->e[i].layout = NULL;
    entry_free(&map->e[i]);
    memmove(&map->e[i], &map->e[i + 1], (size_t)(map->n - i - 1) * sizeof *map->e);
    map->n--;
    return TL_OK;
}

/* config.c — the configuration object and its sources: defaults, a JSON
 * file, the environment and --flags. Values are recorded raw with their
 * source; resolve.c interprets them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config_int.h"

void tl_config_clear_resolved(tl_config *cfg)
{
    tl_free(cfg->s_tpu_job_name);
    tl_free(cfg->s_model_dir);
    tl_free(cfg->s_master);
    tl_free(cfg->s_evaluation_master);
    tl_free(cfg->s_params);
    tl_free(cfg->s_warm_start_from);
    tl_free(cfg->s_embedding_json);
    tl_free(cfg->s_embedding_config);
    tl_free(cfg->s_layout_map_json);
    cfg->s_embedding_json = cfg->s_embedding_config = cfg->s_layout_map_json = NULL;
    tl_free(cfg->s_warm_start_vars);
    tl_partition_dims_destroy(cfg->pdims);
    tl_input_store_free(cfg->input);
    cfg->input = NULL;
    cfg->s_tpu_job_name = cfg->s_model_dir = cfg->s_master = NULL;
    cfg->s_evaluation_master = cfg->s_params = NULL;
    cfg->s_warm_start_from = cfg->s_warm_start_vars = NULL;
    cfg->pdims = NULL;
    cfg->resolved = false;
}

tl_status tl_config_create(tl_config **out)
{
    *out = NULL;
    tl_config *cfg = tl_calloc(1, sizeof *cfg);
    if (cfg == NULL)
        return tl_error_oom();
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        json_error_t err;
        cfg->raw[i] = json_loads(tl_options[i].default_json, JSON_DECODE_ANY, &err);
        if (cfg->raw[i] == NULL) {
            tl_config_destroy(cfg);
            return tl_error_oom(); /* the table's literals are valid JSON */
        }
        cfg->source[i] = TL_SOURCE_DEFAULT;
    }
    *out = cfg;
    return TL_OK;
}

void tl_config_destroy(tl_config *cfg)
{
    if (cfg == NULL)
        return;
    tl_config_clear_resolved(cfg);
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        json_decref(cfg->raw[i]);
        tl_free(cfg->origin[i]);
    }
    tl_config_model_dir_clear(cfg);
    tl_free(cfg->tf_config);
    tl_free(cfg);
}

void tl_free_string(char *s)
{
    tl_free(s);
}

/* Replaces option id's raw value (taking the reference v) and its source. */
static tl_status put(tl_config *cfg, int id, json_t *v, tl_config_source source, const char *origin)
{
    char *o = origin ? tl_strdup(origin) : NULL;
    if (origin != NULL && o == NULL) {
        json_decref(v);
        return tl_error_oom();
    }
    tl_config_clear_resolved(cfg);
    json_decref(cfg->raw[id]);
    tl_free(cfg->origin[id]);
    cfg->raw[id] = v;
    cfg->source[id] = source;
    cfg->origin[id] = o;
    return TL_OK;
}

/* "unknown option 'x' [in where]; did you mean y? ...": in a file (where
 * set) y is the nearest option's file key ("tpu_config.num_shards"), else
 * its name. */
static tl_status unknown_option(const char *name, const char *where)
{
    const char *near = NULL;
    char hint[160] = "";
    if (tl_config_suggest(name, &near) == TL_OK && near != NULL) {
        const char *section = tl_options[tl_option_find(near)].section;
        snprintf(hint, sizeof hint, "; did you mean %s%s%s?", where && section ? section : "",
                 where && section ? "." : "", near);
    }
    return tl_error(TL_EUNKNOWN, "unknown option '%s'%s%s%s; `tpuloop help config` lists them", name,
                    where ? " in " : "", where ? where : "", hint);
}

/* A flag's or an environment variable's text as a value of option o. */
static tl_status value_from_text(const tl_option *o, const char *name, const char *text, json_t **out)
{
    *out = NULL;
    bool is_none = strcmp(text, "None") == 0 || strcmp(text, "null") == 0;
    if (o->kind == TL_OPT_IPL || (o->kind == TL_OPT_STRING && !is_none)) {
        *out = json_string(text);
        if (*out == NULL)
            return tl_error(TL_EINVAL, "%s: the value is not valid UTF-8", name);
        return TL_OK;
    }
    if (is_none) {
        *out = json_null();
        return TL_OK;
    }
    if (strcmp(text, "True") == 0 || strcmp(text, "true") == 0) {
        *out = json_true();
        return TL_OK;
    }
    if (strcmp(text, "False") == 0 || strcmp(text, "false") == 0) {
        *out = json_false();
        return TL_OK;
    }
    json_error_t err;
    *out = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
    if (*out != NULL)
        return TL_OK;
    if (o->kind == TL_OPT_PDIMS || o->kind == TL_OPT_OBJECT)
        return tl_error(TL_EPARSE, "%s: malformed JSON at column %d: %s (got %s)", name, err.column, err.text,
                        text);
    *out = json_string(text);
    if (*out == NULL)
        return tl_error(TL_EINVAL, "%s: the value is not valid UTF-8", name);
    return TL_OK;
}

static const char *source_word(tl_config_source s)
{
    switch (s) {
    case TL_SOURCE_FILE: return "file";
    case TL_SOURCE_ENV: return "env";
    case TL_SOURCE_FLAG: return "flag";
    default: return "default";
    }
}

tl_status tl_config_set(tl_config *cfg, const char *name, const char *text, tl_config_source source)
{
    /* A model_dir's values come only from its file, and only where nothing
     * above them set a value: setting one here could override a flag. */
    if (source == TL_SOURCE_MODEL_DIR || (int)source < TL_SOURCE_DEFAULT || (int)source > TL_SOURCE_MODEL_DIR)
        return tl_error(TL_EINVAL, "tl_config_set: source %d is not TL_SOURCE_DEFAULT, _FILE, _ENV or _FLAG (model_dir "
                        "values come from tl_config_load_model_dir)", (int)source);
    int id = tl_option_find(name);
    if (id < 0)
        return unknown_option(name, NULL);
    json_t *v;
    tl_status st = value_from_text(&tl_options[id], tl_options[id].name, text, &v);
    if (st != TL_OK)
        return st;
    char origin[256];
    if (source == TL_SOURCE_FLAG)
        snprintf(origin, sizeof origin, "flag --%s", tl_options[id].name);
    else
        snprintf(origin, sizeof origin, "%s %s", source_word(source), tl_options[id].name);
    return put(cfg, id, v, source, origin);
}

/* True when key names a section of the option table ("tpu_config", "model", ...). */
static bool is_section(const char *key)
{
    for (int i = 0; i < TL_NUM_OPTIONS; i++)
        if (tl_options[i].section != NULL && strcmp(tl_options[i].section, key) == 0)
            return true;
    return false;
}

/* Finds the option of key in section (NULL: top level) or reports it. */
static tl_status find_in_section(const char *section, const char *key, const char *origin, int *id)
{
    *id = -1;
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        if (strcmp(tl_options[i].name, key) != 0)
            continue;
        const char *s = tl_options[i].section;
        if ((s == NULL) == (section == NULL) && (s == NULL || strcmp(s, section) == 0)) {
            *id = i;
            return TL_OK;
        }
        if (s != NULL && strcmp(s, "tpu_config") == 0 && section == NULL)
            return tl_error(TL_EUNKNOWN, "unknown key '%s' at the top level of %s: it is a TPUConfig field; "
                            "nest it under \"tpu_config\"", key, origin);
        if (section != NULL && strcmp(section, "tpu_config") == 0 && s == NULL)
            return tl_error(TL_EUNKNOWN, "unknown key 'tpu_config.%s' in %s: it is not a TPUConfig field; "
                            "put it at the top level", key, origin);
        if (s != NULL)
            return tl_error(TL_EUNKNOWN, "unknown key '%s%s%s' in %s: it belongs under \"%s\"", section ? section : "",
                            section ? "." : "", key, origin, s);
        return tl_error(TL_EUNKNOWN, "unknown key '%s.%s' in %s: it belongs at the top level", section, key, origin);
    }
    if (section != NULL) {
        char full[512];
        snprintf(full, sizeof full, "%s.%s", section, key);
        return unknown_option(full, origin);
    }
    return unknown_option(key, origin);
}

tl_status tl_config_collect(const json_t *root, const char *origin, json_t *vals[TL_NUM_OPTIONS])
{
    memset(vals, 0, TL_NUM_OPTIONS * sizeof *vals);
    if (!json_is_object(root))
        return tl_error(TL_EPARSE, "%s: the configuration must be a JSON object, got %s", origin, tl_py_type(root));
    /* Check every key before taking any, so a bad file changes nothing. */
    tl_status st;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)root, key, val) {
        int id;
        if (is_section(key)) {
            if (!json_is_object(val)) {
                if (strcmp(key, "tpu_config") == 0)
                    return tl_error(TL_ETYPE, "tpu_config in %s must be an object of TPUConfig fields, got %s",
                                    origin, tl_py_type(val));
                return tl_error(TL_ETYPE, "%s in %s must be an object of its options, got %s", key, origin,
                                tl_py_type(val));
            }
            const char *k2;
            json_t *v2;
            json_object_foreach(val, k2, v2) {
                if ((st = find_in_section(key, k2, origin, &id)) != TL_OK)
                    return st;
            }
        } else if ((st = find_in_section(NULL, key, origin, &id)) != TL_OK) {
            return st;
        }
    }
    json_object_foreach((json_t *)root, key, val) {
        int id;
        if (is_section(key)) {
            const char *k2;
            json_t *v2;
            json_object_foreach(val, k2, v2) {
                find_in_section(key, k2, origin, &id);
                vals[id] = v2;
            }
        } else {
            find_in_section(NULL, key, origin, &id);
            vals[id] = val;
        }
    }
    return TL_OK;
}

tl_status tl_config_load_json(tl_config *cfg, const char *text, size_t len, const char *origin)
{
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return tl_error(TL_EPARSE, "%s:%d:%d: malformed JSON: %s", origin, err.line, err.column, err.text);
    json_t *vals[TL_NUM_OPTIONS];
    tl_status st = tl_config_collect(root, origin, vals);
    if (st != TL_OK)
        goto out;

    /* Then apply them all or none: the origins first. */
    char where[512];
    snprintf(where, sizeof where, "file %s", origin);
    char *origins[TL_NUM_OPTIONS] = {0};
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        if (vals[i] != NULL && (origins[i] = tl_strdup(where)) == NULL) {
            for (int k = 0; k < i; k++)
                tl_free(origins[k]);
            st = tl_error_oom();
            goto out;
        }
    }
    tl_config_clear_resolved(cfg);
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        if (vals[i] == NULL)
            continue;
        json_decref(cfg->raw[i]);
        tl_free(cfg->origin[i]);
        cfg->raw[i] = json_incref(vals[i]);
        cfg->source[i] = TL_SOURCE_FILE;
        cfg->origin[i] = origins[i];
    }
out:
    json_decref(root);
    return st;
}

#define TL_CONFIG_FILE_MAX (16u << 20)

int tl_config_read_file(const char *path, tl_strbuf *sb, bool *opened)
{
    *opened = false;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return errno != 0 ? errno : EIO;
    *opened = true;
    char chunk[8192];
    size_t n;
    int rc = 0;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (sb->len + n > TL_CONFIG_FILE_MAX) {
            rc = EFBIG;
            break;
        }
        tl_strbuf_append_n(sb, chunk, n);
        if (sb->failed) {
            rc = ENOMEM;
            break;
        }
    }
    if (rc == 0 && ferror(f))
        rc = errno != 0 ? errno : EIO;
    fclose(f);
    return rc;
}

tl_status tl_config_load_file(tl_config *cfg, const char *path)
{
    tl_strbuf sb = {0};
    bool opened;
    errno = 0;
    int rc = tl_config_read_file(path, &sb, &opened);
    tl_status st = TL_OK;
    if (rc == ENOMEM)
        st = tl_error_oom();
    else if (rc == EFBIG)
        st = tl_error(TL_EINVAL, "config file %s is larger than %u bytes", path, TL_CONFIG_FILE_MAX);
    else if (rc != 0)
        st = tl_error(TL_EIO, "cannot %s config file %s: %s", opened ? "read" : "open", path, strerror(rc));
    else
        st = tl_config_load_json(cfg, sb.data ? sb.data : "", sb.len, path);
    tl_strbuf_free(&sb);
    return st;
}

tl_status tl_config_apply_env(tl_config *cfg, const char *const *envp)
{
    if (envp == NULL)
        return TL_OK;
    for (const char *const *e = envp; *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        if (eq == NULL)
            continue;
        size_t klen = (size_t)(eq - *e);
        const char *val = eq + 1;
        if (klen == 9 && strncmp(*e, "TF_CONFIG", 9) == 0) {
            char *copy = tl_strdup(val);
            if (copy == NULL)
                return tl_error_oom();
            tl_config_clear_resolved(cfg);
            tl_free(cfg->tf_config);
            cfg->tf_config = copy;
            continue;
        }
        bool matched = false;
        for (int i = 0; i < TL_NUM_OPTIONS; i++) {
            const char *env = tl_options[i].env;
            if (env == NULL || strlen(env) != klen || strncmp(*e, env, klen) != 0)
                continue;
            matched = true;
            json_t *v;
            tl_status st = value_from_text(&tl_options[i], env, val, &v);
            if (st != TL_OK)
                return st;
            char origin[128];
            snprintf(origin, sizeof origin, "env %s", env);
            if ((st = put(cfg, i, v, TL_SOURCE_ENV, origin)) != TL_OK)
                return st;
        }
        if (!matched && klen > 8 && strncmp(*e, "TPULOOP_", 8) == 0)
            tl_log(TL_LOG_WARN, "ignoring unknown environment variable %.*s", (int)klen, *e);
    }
    return TL_OK;
}

tl_status tl_config_apply_args(tl_config *cfg, int argc, char *const *argv, int *nrest, char **rest)
{
    int nr = 0;
    tl_status st = TL_OK;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            for (i++; i < argc && rest; i++)
                rest[nr++] = argv[i];
            break;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (rest == NULL) {
                st = tl_error(TL_EINVAL, "unexpected argument '%s'", a);
                break;
            }
            rest[nr++] = argv[i];
            continue;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        char key[256];
        size_t klen = eq ? (size_t)(eq - name) : strlen(name);
        if (klen >= sizeof key) {
            st = unknown_option(name, NULL);
            break;
        }
        memcpy(key, name, klen);
        key[klen] = '\0';
        int id = tl_option_find(key);
        if (id < 0) {
            if (rest == NULL) {
                st = unknown_option(key, NULL);
                break;
            }
            rest[nr++] = argv[i];
            continue;
        }
        const char *text;
        if (eq != NULL) {
            text = eq + 1;
        } else if (tl_options[id].kind == TL_OPT_BOOL) {
            text = "true";
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            text = argv[++i];
        } else {
            st = tl_error(TL_EINVAL, "flag --%s needs a value (--%s=VALUE): %s", key, key,
                          tl_options[id].allowed);
            break;
        }
        if ((st = tl_config_set(cfg, key, text, TL_SOURCE_FLAG)) != TL_OK)
            break;
    }
    if (nrest != NULL)
        *nrest = nr;
    return st;
}

tl_status tl_config_source_of(const tl_config *cfg, const char *name, tl_config_source *source,
                              const char **description)
{
    int id = tl_option_find(name);
    if (id < 0)
        return unknown_option(name, NULL);
    if (source != NULL)
        *source = cfg->source[id];
    if (description != NULL)
        *description = cfg->origin[id] ? cfg->origin[id] : "default";
    return TL_OK;
}

const char *tl_config_origin_suffix(const tl_config *cfg, tl_opt_id id, char *buf, size_t n)
{
    if (cfg->source[id] == TL_SOURCE_DEFAULT || cfg->origin[id] == NULL)
        snprintf(buf, n, "%s", "");
    else
        snprintf(buf, n, " [from %s]", cfg->origin[id]);
    return buf;
}

const tl_run_config *tl_config_get(const tl_config *cfg)
{
    return cfg->resolved ? &cfg->rc : NULL;
}

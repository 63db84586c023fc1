/* model_dir.c — reusing a model_dir's configuration: model_dir/config.json
 * (what the estimator wrote there, tl_config_to_json's text) as a source of
 * values above the defaults and below a file, the environment and flags, and
 * the list of the options those set differently from it.
 *
 * The file's values are kept apart (cfg->md) as well as applied, so that the
 * precedence holds whatever the order of the calls: loading the model_dir
 * takes only options no higher source has set, and a higher source set later
 * simply replaces the value. What a higher source decides can also make a
 * value from the file wrong, not just old — the other half of a pair
 * TensorFlow refuses together, an evaluation_master that only followed the
 * file's master, the input options of another dataset — so resolve first
 * puts those back to their defaults (tl_config_model_dir_rules). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

void tl_config_model_dir_clear(tl_config *cfg)
{
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        json_decref(cfg->md[i]);
        json_decref(cfg->md_canon[i]);
        cfg->md[i] = cfg->md_canon[i] = NULL;
    }
    tl_free(cfg->md_origin);
    cfg->md_origin = NULL;
}

static bool above_model_dir(tl_config_source s)
{
    return s == TL_SOURCE_FILE || s == TL_SOURCE_ENV || s == TL_SOURCE_FLAG;
}

/* Option id back to its default. */
static tl_status reset(tl_config *cfg, int id)
{
    json_t *v = json_loads(tl_options[id].default_json, JSON_DECODE_ANY, NULL);
    if (v == NULL)
        return tl_error_oom(); /* the table's literals are valid JSON */
    tl_config_clear_resolved(cfg);
    json_decref(cfg->raw[id]);
    tl_free(cfg->origin[id]);
    cfg->raw[id] = v;
    cfg->source[id] = TL_SOURCE_DEFAULT;
    cfg->origin[id] = NULL;
    return TL_OK;
}

tl_status tl_config_model_dir_rules(tl_config *cfg)
{
    if (cfg->md_origin == NULL)
        return TL_OK;
    tl_status st;
    /* TensorFlow refuses both halves of these set together: the half a
     * higher source sets decides, and the file's other half goes. */
    static const tl_opt_id pairs[][2] = {
        {TL_OPT_ID_save_checkpoints_steps, TL_OPT_ID_save_checkpoints_secs},
        {TL_OPT_ID_train_steps, TL_OPT_ID_max_steps},
        {TL_OPT_ID_embedding, TL_OPT_ID_embedding_config},
    };
    for (size_t i = 0; i < TL_ARRAY_LEN(pairs); i++) {
        for (int k = 0; k < 2; k++) {
            int mine = pairs[i][k], other = pairs[i][1 - k];
            if (above_model_dir(cfg->source[mine]) && cfg->source[other] == TL_SOURCE_MODEL_DIR &&
                (st = reset(cfg, other)) != TL_OK)
                return st;
        }
    }
    /* The file holds evaluation_master resolved: when it only followed the
     * file's master, it follows a new master too. */
    const json_t *md_master = cfg->md[TL_OPT_ID_master], *md_eval = cfg->md[TL_OPT_ID_evaluation_master];
    if (above_model_dir(cfg->source[TL_OPT_ID_master]) &&
        cfg->source[TL_OPT_ID_evaluation_master] == TL_SOURCE_MODEL_DIR && md_master != NULL && md_eval != NULL &&
        json_equal(md_master, md_eval) && (st = reset(cfg, TL_OPT_ID_evaluation_master)) != TL_OK)
        return st;
    /* Another dataset: the file's input options described its data. */
    const json_t *md_ds = cfg->md[TL_OPT_ID_dataset];
    if (above_model_dir(cfg->source[TL_OPT_ID_dataset]) && md_ds != NULL &&
        !json_equal(md_ds, cfg->raw[TL_OPT_ID_dataset])) {
        for (int i = 0; i < TL_NUM_OPTIONS; i++) {
            const char *section = tl_options[i].section;
            if (section != NULL && strcmp(section, "input") == 0 && cfg->source[i] == TL_SOURCE_MODEL_DIR &&
                (st = reset(cfg, i)) != TL_OK)
                return st;
        }
    }
    return TL_OK;
}

/* tpuloop before this file's format wrote iterations_per_loop as
 * {"unit": "count" | "seconds", "value": N}: read it as N or "Ns". */
static json_t *legacy_ipl(json_t *v)
{
    json_t *unit = json_object_get(v, "unit"), *value = json_object_get(v, "value");
    if (!json_is_object(v) || json_object_size(v) != 2 || !json_is_string(unit) || !json_is_integer(value))
        return json_incref(v);
    if (strcmp(json_string_value(unit), "count") == 0)
        return json_integer(json_integer_value(value));
    if (strcmp(json_string_value(unit), "seconds") == 0) {
        char text[32];
        snprintf(text, sizeof text, "%llds", (long long)json_integer_value(value));
        return json_string(text);
    }
    return json_incref(v);
}

/* The file's values (vals) as the configuration they describe would resolve
 * and print them, into canon, so that "1h" and "3600s", or a spec with and
 * without its defaults, compare equal. Where the file alone does not
 * resolve, its raw values are compared. */
static tl_status canonical(json_t *const vals[TL_NUM_OPTIONS], json_t *canon[TL_NUM_OPTIONS])
{
    tl_config *scratch;
    tl_status st = tl_config_create(&scratch);
    if (st != TL_OK)
        return st;
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        if (vals[i] == NULL)
            continue;
        json_decref(scratch->raw[i]);
        scratch->raw[i] = json_incref(vals[i]);
        scratch->source[i] = TL_SOURCE_FILE;
    }
    st = tl_config_resolve(scratch);
    bool resolved = st == TL_OK;
    if (st == TL_ENOMEM)
        goto out;
    st = TL_OK;
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        if (vals[i] == NULL)
            continue;
        canon[i] = resolved ? tl_config_value_json(scratch, i) : json_incref(vals[i]);
        if (canon[i] == NULL) {
            st = tl_error_oom();
            break;
        }
    }
out:
    tl_config_destroy(scratch);
    return st;
}

tl_status tl_config_load_model_dir(tl_config *cfg, const char *model_dir, bool *found)
{
    if (found != NULL)
        *found = false;
    if (model_dir == NULL || model_dir[0] == '\0')
        return tl_error(TL_EINVAL, "tl_config_load_model_dir: model_dir must be a non-empty path, got %s",
                        model_dir == NULL ? "NULL" : "''");
    char *path = tl_asprintf("%s/config.json", model_dir);
    char *origin = tl_asprintf("model_dir %s/config.json", model_dir);
    tl_strbuf sb = {0};
    json_t *root = NULL, *vals[TL_NUM_OPTIONS];
    json_t *taken[TL_NUM_OPTIONS] = {0}, *canon[TL_NUM_OPTIONS] = {0}, *defaults[TL_NUM_OPTIONS] = {0};
    char *origins[TL_NUM_OPTIONS] = {0};
    tl_status st = TL_OK;
    if (path == NULL || origin == NULL) {
        st = tl_error_oom();
        goto out;
    }
    bool opened;
    errno = 0;
    int rc = tl_config_read_file(path, &sb, &opened);
    if (rc == ENOENT && !opened)
        goto out; /* a new model_dir: nothing to reuse */
    if (rc == ENOMEM) {
        st = tl_error_oom();
        goto out;
    }
    if (rc == EFBIG) {
        st = tl_error(TL_EIO, "cannot read %s: larger than 16 MiB; it is not a config.json tpuloop wrote", path);
        goto out;
    }
    if (rc != 0) {
        st = tl_error(TL_EIO, "cannot %s %s: %s", opened ? "read" : "open", path, strerror(rc));
        goto out;
    }
    json_error_t err;
    root = json_loadb(sb.data ? sb.data : "", sb.len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL) {
        st = tl_error(TL_EPARSE, "%s:%d:%d: malformed JSON: %s (the model_dir's configuration is corrupt: fix or "
                      "remove it)", path, err.line, err.column, err.text);
        goto out;
    }
    if ((st = tl_config_collect(root, path, vals)) != TL_OK)
        goto out;
    /* The directory is where the file was found, whatever the file says. */
    vals[TL_OPT_ID_model_dir] = NULL;

    /* Everything that can fail first, so a failure changes nothing: the
     * values, their origins, their resolved forms, and the defaults of the
     * options an earlier model_dir set. */
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        if (vals[i] != NULL) {
            taken[i] = i == TL_OPT_ID_iterations_per_loop ? legacy_ipl(vals[i]) : json_incref(vals[i]);
            if (taken[i] == NULL || (origins[i] = tl_strdup(origin)) == NULL) {
                st = tl_error_oom();
                goto out;
            }
        }
        if (cfg->source[i] == TL_SOURCE_MODEL_DIR &&
            (defaults[i] = json_loads(tl_options[i].default_json, JSON_DECODE_ANY, NULL)) == NULL) {
            st = tl_error_oom();
            goto out;
        }
    }
    if ((st = canonical(taken, canon)) != TL_OK)
        goto out;

    tl_config_clear_resolved(cfg);
    tl_config_model_dir_clear(cfg);
    cfg->md_origin = origin;
    origin = NULL;
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        if (defaults[i] != NULL) {
            json_decref(cfg->raw[i]);
            tl_free(cfg->origin[i]);
            cfg->raw[i] = defaults[i];
            cfg->source[i] = TL_SOURCE_DEFAULT;
            cfg->origin[i] = NULL;
            defaults[i] = NULL;
        }
        if (taken[i] == NULL)
            continue;
        cfg->md[i] = json_incref(taken[i]);
        cfg->md_canon[i] = canon[i];
        canon[i] = NULL;
        if (above_model_dir(cfg->source[i]))
            continue;
        json_decref(cfg->raw[i]);
        tl_free(cfg->origin[i]);
        cfg->raw[i] = json_incref(taken[i]);
        cfg->source[i] = TL_SOURCE_MODEL_DIR;
        cfg->origin[i] = origins[i];
        origins[i] = NULL;
    }
    if (found != NULL)
        *found = true;
out:
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        json_decref(taken[i]);
        json_decref(canon[i]);
        json_decref(defaults[i]);
        tl_free(origins[i]);
    }
    json_decref(root);
    tl_strbuf_free(&sb);
    tl_free(path);
    tl_free(origin);
    return st;
}

/* v as compact JSON for a message, cut to fit. */
static void show(const json_t *v, char *buf, size_t n)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
    snprintf(buf, n, "%s", text != NULL ? text : "?");
    if (text != NULL && strlen(text) >= n && n > 4)
        memcpy(buf + n - 4, "...", 4);
    free(text);
}

tl_status tl_config_model_dir_conflicts(const tl_config *cfg, char **text)
{
    if (text == NULL)
        return tl_error(TL_EINVAL, "tl_config_model_dir_conflicts: text is NULL");
    *text = NULL;
    if (!cfg->resolved)
        return tl_error(TL_EINVAL, "the configuration is not resolved: call tl_config_resolve first");
    if (cfg->md_origin == NULL)
        return TL_OK;
    tl_strbuf sb = {0};
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        if (cfg->md_canon[i] == NULL || !above_model_dir(cfg->source[i]))
            continue;
        json_t *now = tl_config_value_json(cfg, i);
        if (now == NULL) {
            tl_strbuf_free(&sb);
            return tl_error_oom();
        }
        if (!json_equal(now, cfg->md_canon[i])) {
            char a[240], b[240];
            show(now, a, sizeof a);
            show(cfg->md_canon[i], b, sizeof b);
            tl_strbuf_appendf(&sb, "%s: %s from %s, %s has %s\n", tl_options[i].name, a,
                              cfg->origin[i] ? cfg->origin[i] : "?", cfg->md_origin, b);
        }
        json_decref(now);
    }
    if (sb.len == 0 && !sb.failed)
        return TL_OK;
    *text = tl_strbuf_take(&sb);
    return *text != NULL ? TL_OK : tl_error_oom();
}

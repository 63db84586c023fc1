/* spec.c — the parsed embedding configuration (tpuloop/emb_spec.h): its
 * memory and the checks the proto and JSON readers share. */
#include <stdio.h>
#include <string.h>

#include "emb_spec_int.h"

tl_status emb_spec_new(int num_tables, int num_features, tl_emb_spec **out)
{
    TL_ASSERT(num_tables >= 0 && num_features >= 0);
    *out = NULL;
    tl_emb_spec *s = tl_calloc(1, sizeof *s);
    if (s == NULL)
        return tl_error_oom();
    /* calloc(0) may give NULL: every array gets at least one element. */
    s->tables = tl_calloc((size_t)num_tables + 1, sizeof *s->tables);
    s->opts = tl_calloc((size_t)num_tables + 1, sizeof *s->opts);
    s->features = tl_calloc((size_t)num_features + 1, sizeof *s->features);
    s->names = tl_calloc((size_t)num_tables + (size_t)num_features + 1, sizeof *s->names);
    tl_emb_config_default(&s->cfg);
    s->cfg.tables = s->tables;
    s->cfg.num_tables = num_tables;
    s->cfg.features = s->features;
    s->cfg.num_features = num_features;
    if (s->tables == NULL || s->opts == NULL || s->features == NULL || s->names == NULL) {
        tl_emb_spec_destroy(s);
        return tl_error_oom();
    }
    *out = s;
    return TL_OK;
}

tl_status emb_spec_set_name(tl_emb_spec *s, bool is_feature, int i, const char *text, size_t len)
{
    int slot = is_feature ? s->cfg.num_tables + i : i;
    char *name = len > 0 ? tl_strndup(text, len) : tl_asprintf("%s_%d", is_feature ? "feature" : "table", i);
    if (name == NULL)
        return tl_error_oom();
    tl_free(s->names[slot]);
    s->names[slot] = name;
    if (is_feature)
        s->features[i].name = name;
    else
        s->tables[i].name = name;
    return TL_OK;
}

int emb_spec_find_table(const tl_emb_spec *s, const char *name)
{
    for (int i = 0; i < s->cfg.num_tables; i++)
        if (s->tables[i].name != NULL && strcmp(s->tables[i].name, name) == 0)
            return i;
    return -1;
}

/* FrequencyEstimatorParameters documents tau as "between (0, 1)" but
 * TensorFlow checks nothing and runs with any value: accepted, with a
 * warning, since outside the range the estimate no longer averages. */
static void warn_tau(const tl_emb_optimizer *o, const char *whose)
{
    if (o->algorithm == TL_EMB_FREQUENCY_ESTIMATOR && !(o->tau > 0.0f && o->tau < 1.0f))
        tl_log(TL_LOG_WARN,
               "%s: FrequencyEstimator tau %g is outside (0, 1), the range FrequencyEstimatorParameters documents; "
               "accepted, as TensorFlow does",
               whose, (double)o->tau);
}

tl_status emb_spec_finish(const tl_emb_spec *s)
{
    for (int i = 0; i < s->cfg.num_tables; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(s->tables[i].name, s->tables[j].name) == 0)
                return tl_error(TL_EINVAL, "Multiple tables with name %s found. (tables %d and %d)",
                                s->tables[i].name, j, i);
    bool shared_used = false;
    for (int i = 0; i < s->cfg.num_tables; i++) {
        const tl_emb_optimizer *o = s->tables[i].optimizer != NULL ? s->tables[i].optimizer : &s->cfg.optimizer;
        tl_status st = tl_emb_optimizer_validate(o);
        if (st != TL_OK)
            return tl_error(st, "table \"%s\": %s", s->tables[i].name, tl_last_error());
        shared_used |= o == &s->cfg.optimizer;
    }
    /* Once per optimizer: the shared one names no table. */
    char whose[300];
    for (int i = 0; i < s->cfg.num_tables; i++) {
        if (s->tables[i].optimizer == NULL)
            continue;
        snprintf(whose, sizeof whose, "table \"%s\"", s->tables[i].name);
        warn_tau(s->tables[i].optimizer, whose);
    }
    if (shared_used)
        warn_tau(&s->cfg.optimizer, "the embedding optimizer of the tables without their own");
    return TL_OK;
}

const tl_emb_config *tl_emb_spec_config(const tl_emb_spec *s)
{
    return s != NULL ? &s->cfg : NULL;
}

void tl_emb_spec_destroy(tl_emb_spec *s)
{
    if (s == NULL)
        return;
    if (s->names != NULL)
        for (int i = 0; i < s->cfg.num_tables + s->cfg.num_features; i++)
            tl_free(s->names[i]);
    tl_free(s->names);
    tl_free(s->tables);
    tl_free(s->opts);
    tl_free(s->features);
    tl_free(s);
}

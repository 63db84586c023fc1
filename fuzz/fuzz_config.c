/* fuzz_config.c — libFuzzer target for the configuration parser: a JSON
 * config file, --flags and environment variables, then resolution, the JSON
 * dump, the topology and the input plans of every mode, the "did you mean"
 * of every flag, and the JSON file reused as a model_dir's config.json.
 *
 * Input layout: <JSON text> NUL <flags, one per line> NUL <env lines>.
 * Missing parts are empty. Everything must end in a status, never a crash,
 * a leak or undefined behaviour. And what tl_config_to_json writes must be a
 * configuration: it loads and resolves, and (without the environment, whose
 * TF_CONFIG can give values a file cannot) prints the same text again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/tpuloop.h"

#define MAX_ARGS 64
#define MAX_FUZZ_DEVICES 4096

/* Splits s (NUL-terminated, modifiable) at newlines into at most max pieces. */
static int split_lines(char *s, char **out, int max)
{
    int n = 0;
    while (*s && n < max) {
        out[n++] = s;
        char *nl = strchr(s, '\n');
        if (nl == NULL)
            break;
        *nl = '\0';
        s = nl + 1;
    }
    return n;
}

static void exercise_topology(const tl_config *cfg)
{
    const tl_run_config *rc = tl_config_get(cfg);
    int64_t per_host = rc->devices ? rc->devices : 2;
    if (per_host * rc->num_hosts > MAX_FUZZ_DEVICES)
        return; /* valid but slow to enumerate; the parser is what is fuzzed */
    tl_topology *topo;
    if (tl_topology_create(rc, NULL, &topo) != TL_OK)
        return;
    for (int m = 0; m < 3; m++) {
        tl_input_plan *plan;
        if (tl_input_plan_create(topo, rc, (tl_mode)m, &plan) == TL_OK)
            tl_input_plan_destroy(plan);
    }
    if (rc->tpu.input_partition_dims != NULL) {
        tl_tensor_desc t[2] = {{"a", 4, {8, 16, 16, 3}}, {"b", 2, {8, 5}}};
        tl_tensor_struct one = {TL_STRUCT_TENSOR, 1, t}, dict = {TL_STRUCT_DICT, 2, t};
        tl_tensor_partition p[2];
        tl_partition_plan(rc->tpu.input_partition_dims, rc->tpu.num_cores_per_replica.value, &one, &one, p, p);
        tl_partition_plan(rc->tpu.input_partition_dims, rc->tpu.num_cores_per_replica.value, &dict, &dict, p, p);
    }
    tl_topology_destroy(topo);
}

#define CHECK(c)              \
    do {                      \
        if (!(c))             \
            __builtin_trap(); \
    } while (0)

/* to_json's text reads back as a configuration (exact when same_text). */
static void check_round_trip(const char *text, bool same_text)
{
    tl_config *back;
    if (tl_config_create(&back) != TL_OK)
        return;
    CHECK(tl_config_load_json(back, text, strlen(text), "config.json") == TL_OK);
    CHECK(tl_config_resolve(back) == TL_OK);
    char *again;
    CHECK(tl_config_to_json(back, &again) == TL_OK);
    CHECK(!same_text || strcmp(text, again) == 0);
    tl_free_string(again);
    tl_config_destroy(back);
}

/* The JSON text as a model_dir's config.json, under the flags. One
 * directory serves the whole run (left in /tmp when it ends). */
static void exercise_model_dir(const char *json, size_t len, int argc, char **argv)
{
    static char dir[] = "/tmp/fuzz-config-md-XXXXXX";
    static bool made;
    if (!made && mkdtemp(dir) == NULL)
        return;
    made = true;
    char path[64];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return;
    fwrite(json, 1, len, f);
    fclose(f);
    tl_config *cfg;
    if (tl_config_create(&cfg) != TL_OK)
        return;
    tl_config_apply_args(cfg, argc, argv, NULL, NULL);
    bool found;
    if (tl_config_load_model_dir(cfg, dir, &found) == TL_OK && tl_config_resolve(cfg) == TL_OK) {
        char *text;
        CHECK(found);
        if (tl_config_model_dir_conflicts(cfg, &text) == TL_OK)
            tl_free_string(text);
    }
    tl_config_destroy(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 3);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    buf[size] = buf[size + 1] = buf[size + 2] = '\0';
    char *json = buf;
    size_t json_len = strlen(json);
    char *flags = json + json_len + 1;
    char *env = flags + strlen(flags) + 1;
    if ((size_t)(flags - buf) > size)
        flags = env = buf + size + 1;
    else if ((size_t)(env - buf) > size)
        env = buf + size + 2;

    tl_ipl ipl;
    tl_parse_iterations_per_loop(json, &ipl);

    tl_config *cfg;
    if (tl_config_create(&cfg) != TL_OK)
        goto out;
    bool loaded = json_len > 0 && tl_config_load_json(cfg, json, json_len, "fuzz.json") == TL_OK;
    char *envv[MAX_ARGS + 1];
    int ne = split_lines(env, envv, MAX_ARGS);
    envv[ne] = NULL;
    tl_config_apply_env(cfg, (const char *const *)envv);
    char *argv[MAX_ARGS], *rest[MAX_ARGS];
    int na = split_lines(flags, argv, MAX_ARGS), nrest = 0;
    for (int i = 0; i < na; i++) {
        const char *near;
        tl_config_suggest(argv[i], &near);
    }
    tl_config_apply_args(cfg, na, argv, &nrest, rest);
    if (tl_config_resolve(cfg) == TL_OK) {
        char *text;
        if (tl_config_to_json(cfg, &text) == TL_OK) {
            check_round_trip(text, ne == 0);
            tl_free_string(text);
        }
        exercise_topology(cfg);
        tl_config_check_train(cfg);
        tl_config_check_eval(cfg);
    }
    tl_config_destroy(cfg);
    if (loaded)
        exercise_model_dir(json, json_len, na, argv);
out:
    free(buf);
    return 0;
}

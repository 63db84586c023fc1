/* config.c — `tpuloop config` (the resolved configuration, the topology,
 * the input plans of train, eval and predict, the embedding tables with
 * their optimizers' parameters and their memory, and a replica's partition
 * over its cores) and `tpuloop devices`. The command uses only the public API
 * (include/tpuloop/). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

/* ---- tpuloop devices ---------------------------------------------------- */

int cli_devices(int argc, char **argv)
{
    static const char *const allowed[] = {"--json", NULL};
    bool seen[1] = {false};
    tl_config *cfg;
    int rc = cli_load_config(argc, argv, allowed, false, &cfg, seen, 1);
    if (rc != 0)
        return rc;
    const tl_run_config *r = tl_config_get(cfg);
    tl_devices *devs;
    tl_status st = tl_devices_create((int)r->devices, (int)r->num_hosts, 0, &devs);
    if (st != TL_OK) {
        tl_config_destroy(cfg);
        return cli_fail(st);
    }
    int n = tl_devices_count(devs);
    if (seen[0]) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++) {
            const tl_device *d = tl_devices_get(devs, i);
            json_array_append_new(arr, json_pack("{s:s, s:i, s:i, s:i, s:i}", "name", d->name, "id", d->id, "host",
                                                 d->host, "local_index", d->local_index, "cpu", d->cpu));
        }
        json_t *root = json_pack("{s:i, s:i, s:i, s:b, s:o}", "num_devices", n, "num_hosts",
                                 tl_devices_num_hosts(devs), "devices_per_host", tl_devices_per_host(devs), "virtual",
                                 tl_devices_is_virtual(devs), "devices", arr);
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        putchar('\n');
        json_decref(root);
    } else {
        printf("%d device%s: %d host%s x %d per host (%s; %d core%s in the affinity mask)\n", n, n == 1 ? "" : "s",
               tl_devices_num_hosts(devs), tl_devices_num_hosts(devs) == 1 ? "" : "s", tl_devices_per_host(devs),
               tl_devices_is_virtual(devs) ? "virtual count" : "one per core", tl_available_cpus(),
               tl_available_cpus() == 1 ? "" : "s");
        printf("%-10s %5s %6s %6s\n", "device", "host", "local", "cpu");
        for (int i = 0; i < n; i++) {
            const tl_device *d = tl_devices_get(devs, i);
            char cpu[16];
            if (d->cpu >= 0)
                snprintf(cpu, sizeof cpu, "%d", d->cpu);
            else
                snprintf(cpu, sizeof cpu, "-");
            printf("%-10s %5d %6d %6s\n", d->name, d->host, d->local_index, cpu);
        }
    }
    tl_devices_destroy(devs);
    tl_config_destroy(cfg);
    return 0;
}

/* ---- tpuloop config ----------------------------------------------------- */

static json_t *plan_json(const tl_input_plan *p)
{
    json_t *calls = json_array();
    for (int i = 0; i < p->input_fn_calls; i++) {
        const tl_input_call *c = &p->calls[i];
        json_array_append_new(calls, json_pack("{s:i, s:i, s:i, s:i}", "host", c->host, "index", c->index,
                                               "first_replica", c->first_replica, "num_replicas", c->num_replicas));
    }
    json_t *o = json_object();
    json_object_set_new(o, "mode", json_string(tl_input_plan_mode_name(p)));
    json_object_set_new(o, "on_device", json_boolean(p->on_device));
    json_object_set_new(o, "global_batch_size",
                        p->global_batch_size < 0 ? json_null() : json_integer(p->global_batch_size));
    json_object_set_new(o, "input_fn_calls", json_integer(p->input_fn_calls));
    json_object_set_new(o, "input_fn_batch_size",
                        p->input_fn_batch_size < 0 ? json_null() : json_integer(p->input_fn_batch_size));
    json_object_set_new(o, "model_fn_batch_size",
                        p->model_fn_batch_size < 0 ? json_null() : json_integer(p->model_fn_batch_size));
    json_object_set_new(o, "replicas_per_call", json_integer(p->replicas_per_call));
    json_object_set_new(o, "get_next_per_step", json_integer(p->get_next_per_step));
    json_object_set_new(o, "calls", calls);
    return o;
}

/* The plan of a mode, or NULL (and TL_OK) when its batch size is None on the
 * device path, where there is nothing to plan until it is set. */
static tl_status mode_plan(const tl_topology *topo, const tl_run_config *r, tl_mode mode, tl_input_plan **out)
{
    *out = NULL;
    tl_opt_int g = mode == TL_MODE_TRAIN  ? r->train_batch_size
                   : mode == TL_MODE_EVAL ? r->eval_batch_size
                                          : r->predict_batch_size;
    if (!g.set)
        return TL_OK;
    return tl_input_plan_create(topo, r, mode, out);
}

static void print_plan_text(const char *label, const tl_input_plan *p, const char *unset_name)
{
    if (p == NULL) {
        printf("  %-8s none (%s is None)\n", label, unset_name);
        return;
    }
    printf("  %-8s %s: %d input_fn call%s, params['batch_size'] %lld; model_fn batch %lld; %d replica%s per call\n",
           label, tl_input_plan_mode_name(p), p->input_fn_calls, p->input_fn_calls == 1 ? "" : "s",
           (long long)p->input_fn_batch_size, (long long)p->model_fn_batch_size, p->replicas_per_call,
           p->replicas_per_call == 1 ? "" : "s");
    int shown = p->input_fn_calls < 8 ? p->input_fn_calls : 8;
    for (int i = 0; i < shown; i++) {
        const tl_input_call *c = &p->calls[i];
        printf("           call %d on host %d feeds replica%s %d", c->index, c->host, c->num_replicas == 1 ? "" : "s",
               c->first_replica);
        if (c->num_replicas > 1)
            printf("..%d", c->first_replica + c->num_replicas - 1);
        printf("\n");
    }
    if (shown < p->input_fn_calls)
        printf("           ... %d more calls\n", p->input_fn_calls - shown);
}

/* A line of text built piece by piece, cut at its size. */
typedef struct text_line {
    char buf[1024];
    size_t n;
} text_line;

static void add(text_line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text_line *l, const char *fmt, ...)
{
    if (l->n >= sizeof l->buf - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->buf + l->n, sizeof l->buf - l->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        l->n += (size_t)k < sizeof l->buf - l->n ? (size_t)k : sizeof l->buf - 1 - l->n;
}

/* A JSON number or null as text (malloc'd; NULL when out of memory). */
static char *num_text(const json_t *v)
{
    return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(9));
}

/* The optimizer parameters of a table that matter when reading a run: the
 * learning rate and the algorithm's own, then the common ones that are set
 * (clipping, weight decay, no accumulation, quantization). */
static void print_optimizer_text(const json_t *p)
{
    static const char *const common[] = {"type", "gradient_accumulation_status", "clipping_limits",
                                         "gradient_clipping_limits", "weight_decay_factor",
                                         "multiply_weight_decay_factor_by_learning_rate", "simulated_quantization",
                                         "low_dimensional_packing_status", "hot_id_replication_status"};
    text_line l = {.n = 0};
    l.buf[0] = '\0';
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)p, key, v) {
        bool skip = false;
        for (size_t i = 0; !skip && i < sizeof common / sizeof common[0]; i++)
            skip = strcmp(key, common[i]) == 0;
        if (skip)
            continue;
        char *t = num_text(v);
        if (strcmp(key, "learning_rate_tag") == 0)
            add(&l, "%slearning_rate dynamic (tag %s)", l.n ? ", " : "", t ? t : "?");
        else
            add(&l, "%s%s %s", l.n ? ", " : "", key, t ? t : "?");
        free(t);
    }
    for (int k = 0; k < 2; k++) {
        const json_t *lim = json_object_get(p, k == 0 ? "clipping_limits" : "gradient_clipping_limits");
        const json_t *lo = json_object_get(lim, "lower"), *hi = json_object_get(lim, "upper");
        if (json_is_null(lo) && json_is_null(hi))
            continue;
        char *a = num_text(lo), *b = num_text(hi);
        add(&l, "%s%s [%s, %s]", l.n ? ", " : "", k == 0 ? "clip weights" : "clip gradients",
            json_is_null(lo) || a == NULL ? "-inf" : a, json_is_null(hi) || b == NULL ? "inf" : b);
        free(a);
        free(b);
    }
    const json_t *wd = json_object_get(p, "weight_decay_factor");
    if (json_is_number(wd) && json_number_value(wd) != 0) {
        char *a = num_text(wd);
        add(&l, "%sweight_decay_factor %s%s", l.n ? ", " : "", a ? a : "?",
            json_is_true(json_object_get(p, "multiply_weight_decay_factor_by_learning_rate")) ? " (x learning rate)"
                                                                                              : "");
        free(a);
    }
    const char *acc = json_string_value(json_object_get(p, "gradient_accumulation_status"));
    if (acc != NULL && strcmp(acc, "disabled") == 0)
        add(&l, "%sgradient accumulation disabled", l.n ? ", " : "");
    if (json_is_true(json_object_get(json_object_get(p, "simulated_quantization"), "enabled")))
        add(&l, "%ssimulated quantization", l.n ? ", " : "");
    printf("    %s\n", l.buf);
}

/* The configured embedding tables and their memory (NULL *out when the
 * config has none): what each table and its slots take, and the per-step
 * workspace bound. */
static tl_status embedding_info(const tl_run_config *r, json_t **out)
{
    *out = NULL;
    if (r->embedding_json == NULL && r->embedding_config == NULL)
        return TL_OK;
    tl_emb_spec *spec = NULL;
    tl_status st = r->embedding_json != NULL
                       ? tl_emb_spec_from_json(r->embedding_json, strlen(r->embedding_json), &spec)
                       : tl_emb_spec_from_proto_file(r->embedding_config, &spec);
    if (st != TL_OK)
        return st; /* the readers' messages name the file or the key */
    const tl_emb_config *c = tl_emb_spec_config(spec);
    int64_t table_bytes = 0, per_id = 0;
    if ((st = tl_emb_config_bytes(c, &table_bytes, &per_id)) != TL_OK) {
        tl_emb_spec_destroy(spec);
        return st;
    }
    json_t *e = json_object(), *tables = json_array();
    for (int i = 0; i < c->num_tables; i++) {
        const tl_emb_table_config *t = &c->tables[i];
        const tl_emb_optimizer *o = t->optimizer != NULL ? t->optimizer : &c->optimizer;
        int slots = tl_emb_num_slots(o);
        char *params = NULL;
        if ((st = tl_emb_optimizer_to_json(o, &params)) != TL_OK) {
            json_decref(e);
            json_decref(tables);
            tl_emb_spec_destroy(spec);
            return st;
        }
        json_t *pj = json_loads(params, 0, NULL);
        tl_free_string(params);
        json_array_append_new(tables, json_pack("{s:s, s:I, s:i, s:s, s:o, s:i, s:I}", "name", t->name ? t->name : "",
                                                "vocabulary_size", (json_int_t)t->vocabulary_size, "dim", t->dim,
                                                "optimizer", tl_emb_algorithm_name(o->algorithm),
                                                "optimizer_parameters", pj ? pj : json_null(), "slots", slots,
                                                "bytes",
                                                (json_int_t)(t->vocabulary_size * t->dim * 4 * (1 + slots))));
    }
    int64_t step_ids = (int64_t)c->batch_size_per_tensor_core * c->num_features * c->num_tensor_cores;
    json_object_set_new(e, "tables", tables);
    json_object_set_new(e, "num_features", json_integer(c->num_features));
    json_object_set_new(e, "table_bytes", json_integer(table_bytes));
    if (r->num_hosts > 1) {
        /* Each host (process) holds its shard of every table; host 0 the most. */
        tl_emb_config host0 = *c;
        host0.num_hosts = (int)r->num_hosts;
        host0.host = 0;
        host0.num_shards = (int)r->num_hosts;
        int64_t hb = table_bytes, unused;
        if (tl_emb_config_bytes(&host0, &hb, &unused) == TL_OK)
            json_object_set_new(e, "table_bytes_per_host", json_integer(hb));
    }
    json_object_set_new(e, "workspace_bytes_per_id", json_integer(per_id));
    json_object_set_new(e, "workspace_bytes_at_one_id_per_bag", json_integer(per_id * step_ids));
    tl_emb_spec_destroy(spec);
    *out = e;
    return TL_OK;
}

/* The partition of a replica of several cores (tl_job_partition_plan), for
 * the configuration of argv with no model_dir (nothing is read or written
 * there): its JSON, or {"error": the reason it cannot be shown}. */
static json_t *partition_plan(int argc, char **argv, const char *const *allowed)
{
    tl_config *cfg;
    bool seen[1];
    char *text = NULL;
    if (cli_load_config(argc, argv, allowed, true, &cfg, seen, 1) != 0)
        return NULL;
    char *no_dir[] = {"--model_dir=null"};
    tl_job *job = NULL;
    tl_job_options o;
    tl_job_options_init(&o);
    o.train = true;
    tl_status st = tl_config_apply_args(cfg, 1, no_dir, NULL, NULL);
    if (st == TL_OK)
        st = tl_config_resolve(cfg);
    if (st == TL_OK)
        st = tl_job_create(cfg, &o, &job);
    if (st == TL_OK)
        st = tl_job_partition_plan(job, &text);
    json_t *plan = st == TL_OK ? json_loads(text, 0, NULL) : json_pack("{s:s}", "error", tl_last_error());
    tl_free_string(text);
    tl_job_destroy(job);
    tl_config_destroy(cfg);
    return plan;
}

static void print_by_op(const json_t *by)
{
    const char *op;
    json_t *n;
    int k = 0;
    printf(" (");
    json_object_foreach((json_t *)by, op, n) printf("%s%s x %lld", k++ ? ", " : "", op,
                                                    (long long)json_integer_value(n));
    printf(")");
}

/* A JSON array of ints as "[1, 2]" in buf. */
static const char *ints_text(const json_t *a, char *buf, size_t n)
{
    size_t i, at = 0;
    json_t *v;
    at += (size_t)snprintf(buf, n, "[");
    json_array_foreach(a, i, v) if (at < n) at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "",
                                                                  (long long)json_integer_value(v));
    if (at < n)
        snprintf(buf + at, n - at, "]");
    return buf;
}

static void print_partition_text(const json_t *pl)
{
    printf("partition\n");
    if (json_object_get(pl, "error") != NULL) {
        printf("  not shown: %s\n", json_string_value(json_object_get(pl, "error")));
        return;
    }
    bool tensor = strcmp(json_string_value(json_object_get(pl, "kind")), "tensor") == 0;
    printf("  the training program on %lld cores per replica, batch %lld: %s\n",
           (long long)json_integer_value(json_object_get(pl, "cores")),
           (long long)json_integer_value(json_object_get(pl, "batch")),
           tensor ? "tensor parallelism (layout_map splits the variables)" : "spatial tiles of the features");
    size_t i;
    json_t *v;
    char a[256], b[256];
    if (tensor) {
        printf("  %-44s %-14s %5s  %s\n", "variable", "shape", "dim", "chunks per core");
        json_array_foreach(json_object_get(pl, "variables"), i, v) {
            printf("  %-44s %-14s %5lld  %s\n", json_string_value(json_object_get(v, "name")),
                   ints_text(json_object_get(v, "shape"), a, sizeof a),
                   (long long)json_integer_value(json_object_get(v, "split_dim")),
                   ints_text(json_object_get(v, "chunks"), b, sizeof b));
        }
    } else {
        const json_t *sp = json_object_get(pl, "spatial");
        printf("  features %s split by %s\n", ints_text(json_object_get(sp, "features"), a, sizeof a),
               ints_text(json_object_get(sp, "grid"), b, sizeof b));
        printf("  %-5s %-22s %s\n", "core", "offset", "size");
        json_array_foreach(json_object_get(sp, "tiles"), i, v) {
            printf("  %-5lld %-22s %s\n", (long long)json_integer_value(json_object_get(v, "core")),
                   ints_text(json_object_get(v, "offset"), a, sizeof a),
                   ints_text(json_object_get(v, "size"), b, sizeof b));
        }
    }
    printf("  collectives in each core's program, and the ops they come before:\n");
    const char *kind;
    json_object_foreach(json_object_get(pl, "collectives"), kind, v) {
        long long n = (long long)json_integer_value(json_object_get(v, "count"));
        if (n == 0)
            continue;
        printf("    %-7s %3lld", kind, n);
        print_by_op(json_object_get(v, "before"));
        printf("\n");
    }
    printf("  values gathered whole: %lld\n  activations per core:",
           (long long)json_integer_value(json_object_get(pl, "gathered")));
    json_array_foreach(json_object_get(pl, "activation_bytes"), i, v)
        printf("%s %.2f MiB", i ? "," : "", (double)json_integer_value(v) / 1048576.0);
    printf("\n");
}

/* A host's replicas x devices per replica x intra-op threads per device,
 * and the cores they run on. */
static void layout_text(const tl_topology *topo, char *buf, size_t n)
{
    int per_host = tl_topology_devices_per_host(topo), threads = tl_topology_intra_op_threads(topo);
    int cpus = tl_available_cpus(), ncpr = tl_topology_num_cores_per_replica(topo);
    int rph = tl_topology_replicas_per_host(topo), dpr = ncpr > 0 ? ncpr : 1;
    int total = per_host * threads;
    char replicas[48];
    if (rph > 0)
        snprintf(replicas, sizeof replicas, "%d replica%s x %d device%s", rph, rph == 1 ? "" : "s", dpr,
                 dpr == 1 ? "" : "s");
    else
        snprintf(replicas, sizeof replicas, "%d device%s of a replica", per_host, per_host == 1 ? "" : "s");
    snprintf(buf, n, "%s x %d intra-op thread%s per host = %d thread%s on %d core%s%s", replicas, threads,
             threads == 1 ? "" : "s", total, total == 1 ? "" : "s", cpus, cpus == 1 ? "" : "s",
             total > cpus ? " (oversubscribed)" : "");
}

int cli_config(int argc, char **argv)
{
    static const char *const allowed[] = {"--json", NULL};
    bool seen[1] = {false};
    tl_config *cfg;
    int rc = cli_load_config(argc, argv, allowed, true, &cfg, seen, 1);
    if (rc != 0)
        return rc;
    const tl_run_config *r = tl_config_get(cfg);
    tl_topology *topo = NULL;
    tl_input_plan *plans[3] = {NULL, NULL, NULL};
    char *cfg_text = NULL;
    tl_status st = tl_topology_create(r, NULL, &topo);
    for (int m = 0; st == TL_OK && m < 3; m++)
        st = mode_plan(topo, r, (tl_mode)m, &plans[m]);
    if (st == TL_OK)
        st = tl_config_to_json(cfg, &cfg_text);
    json_t *emb = NULL;
    if (st == TL_OK)
        st = embedding_info(r, &emb);
    if (st != TL_OK) {
        rc = cli_fail(st);
        goto out;
    }
    json_t *conf = json_loads(cfg_text, 0, NULL);
    json_t *tpu = json_object_get(conf, "tpu_config");
    int ncpr = tl_topology_num_cores_per_replica(topo);
    char layout[160];
    layout_text(topo, layout, sizeof layout);
    json_t *plan = tl_topology_model_parallel(topo) ? partition_plan(argc, argv, allowed) : NULL;
    if (seen[0]) {
        json_t *root = json_object();
        /* The loop as TensorFlow's parse_iterations_per_loop returns it (the
         * run_config keeps the option's own syntax). */
        const tl_ipl *ipl = &r->tpu.iterations_per_loop;
        json_object_set_new(root, "iterations_per_loop",
                            json_pack("{s:s, s:I}", "unit", ipl->unit == TL_IPL_COUNT ? "count" : "seconds", "value",
                                      (json_int_t)ipl->value));
        json_object_set_new(root, "num_hosts", json_integer(tl_topology_num_hosts(topo)));
        json_object_set_new(root, "num_devices", json_integer(tl_topology_num_devices(topo)));
        json_object_set_new(root, "devices_per_host", json_integer(tl_topology_devices_per_host(topo)));
        json_object_set_new(root, "num_cores_per_replica", ncpr ? json_integer(ncpr) : json_null());
        json_object_set_new(root, "num_replicas", json_integer(tl_topology_num_replicas(topo)));
        json_object_set_new(root, "replicas_per_host", json_integer(tl_topology_replicas_per_host(topo)));
        json_object_set_new(root, "model_parallel", json_boolean(tl_topology_model_parallel(topo)));
        json_object_set_new(root, "intra_op_threads", json_integer(tl_topology_intra_op_threads(topo)));
        json_object_set_new(root, "layout", json_string(layout));
        json_object_set(root, "tpu_config", tpu);
        json_t *input = json_object();
        static const char *const names[3] = {"train", "eval", "predict"};
        for (int m = 0; m < 3; m++)
            json_object_set_new(input, names[m], plans[m] ? plan_json(plans[m]) : json_null());
        json_object_set_new(root, "input", input);
        json_t *placement = json_array();
        for (int d = 0; d < tl_topology_num_devices(topo); d++) {
            const tl_place *p = tl_topology_place(topo, d);
            json_array_append_new(placement, json_pack("{s:i, s:i, s:i, s:i}", "device", p->device, "host", p->host,
                                                       "replica", p->replica, "partition", p->partition));
        }
        json_object_set_new(root, "placement", placement);
        json_t *run = json_deep_copy(conf);
        json_object_del(run, "tpu_config");
        json_object_set_new(root, "run_config", run);
        json_object_set(root, "embedding", emb != NULL ? emb : json_null());
        json_object_set(root, "partition", plan != NULL ? plan : json_null());
        /* 15 digits print every number a user wrote as written (0.05, not
         * 0.050000000000000003) and every float of the tables exactly. */
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
        putchar('\n');
        json_decref(root);
    } else {
        printf("configuration (value, and where it came from when not a default)\n");
        const char *key;
        json_t *v;
        json_object_foreach(conf, key, v) {
            if (strcmp(key, "tpu_config") == 0)
                continue;
            char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            const char *src = "default";
            tl_config_source_of(cfg, key, NULL, &src);
            printf("  %-32s %s%s%s\n", key, s ? s : "?", strcmp(src, "default") ? "   <- " : "",
                   strcmp(src, "default") ? src : "");
            free(s);
        }
        printf("  tpu_config:\n");
        json_object_foreach(tpu, key, v) {
            char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            const char *src = "default";
            tl_config_source_of(cfg, key, NULL, &src);
            printf("    %-48s %s%s%s\n", key, s ? s : "?", strcmp(src, "default") ? "   <- " : "",
                   strcmp(src, "default") ? src : "");
            free(s);
        }
        printf("topology\n");
        printf("  %d host%s x %d device%s per host = %d device%s; ", tl_topology_num_hosts(topo),
               tl_topology_num_hosts(topo) == 1 ? "" : "s", tl_topology_devices_per_host(topo),
               tl_topology_devices_per_host(topo) == 1 ? "" : "s", tl_topology_num_devices(topo),
               tl_topology_num_devices(topo) == 1 ? "" : "s");
        if (tl_topology_model_parallel(topo))
            printf("%d cores per replica; ", ncpr);
        printf("%d replica%s, %d per host\n", tl_topology_num_replicas(topo),
               tl_topology_num_replicas(topo) == 1 ? "" : "s", tl_topology_replicas_per_host(topo));
        printf("  layout: %s\n", layout);
        int nd = tl_topology_num_devices(topo), shown = nd < 16 ? nd : 16;
        printf("  %-10s %5s %8s %10s\n", "device", "host", "replica", "partition");
        for (int d = 0; d < shown; d++) {
            const tl_place *p = tl_topology_place(topo, d);
            printf("  cpu:%-6d %5d %8d %10d\n", p->device, p->host, p->replica, p->partition);
        }
        if (shown < nd)
            printf("  ... %d more devices (--json lists all)\n", nd - shown);
        printf("input plans\n");
        print_plan_text("train", plans[0], "train_batch_size");
        print_plan_text("eval", plans[1], "eval_batch_size");
        print_plan_text("predict", plans[2], "predict_batch_size");
        if (emb != NULL) {
            printf("embedding\n");
            size_t i;
            json_t *t;
            json_array_foreach(json_object_get(emb, "tables"), i, t) {
                printf("  %-24s %12lld x %-5lld %-26s %2lld slot%s  %10.1f MiB\n",
                       json_string_value(json_object_get(t, "name")),
                       (long long)json_integer_value(json_object_get(t, "vocabulary_size")),
                       (long long)json_integer_value(json_object_get(t, "dim")),
                       json_string_value(json_object_get(t, "optimizer")),
                       (long long)json_integer_value(json_object_get(t, "slots")),
                       json_integer_value(json_object_get(t, "slots")) == 1 ? " " : "s",
                       (double)json_integer_value(json_object_get(t, "bytes")) / 1048576.0);
                print_optimizer_text(json_object_get(t, "optimizer_parameters"));
            }
            json_t *per_host = json_object_get(emb, "table_bytes_per_host");
            char hosts[64] = "";
            if (per_host != NULL)
                snprintf(hosts, sizeof hosts, " (at most %.1f MiB per host)",
                         (double)json_integer_value(per_host) / 1048576.0);
            printf("  tables and slots %.1f MiB%s; per-step workspace at most %lld bytes per id (%.1f MiB at one id "
                   "per bag)\n",
                   (double)json_integer_value(json_object_get(emb, "table_bytes")) / 1048576.0, hosts,
                   (long long)json_integer_value(json_object_get(emb, "workspace_bytes_per_id")),
                   (double)json_integer_value(json_object_get(emb, "workspace_bytes_at_one_id_per_bag")) / 1048576.0);
        }
    }
    if (!seen[0] && plan != NULL)
        print_partition_text(plan);
    json_decref(plan);
    json_decref(emb);
    json_decref(conf);
out:
    tl_free_string(cfg_text);
    for (int m = 0; m < 3; m++)
        tl_input_plan_destroy(plans[m]);
    tl_topology_destroy(topo);
    tl_config_destroy(cfg);
    return rc;
}

/* job.c — tpuloop/job.h: the model by name, the estimator and its
 * embedding tables, and the calls that train, evaluate and predict with
 * the job's inputs. One place, so `tpuloop train`, `evaluate` and `predict`
 * (and any C program) build the same estimator from the same configuration
 * and a checkpoint trained by one is read back by the others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "job_int.h"

void tl_job_options_init(tl_job_options *o)
{
    memset(o, 0, sizeof *o);
}

/* The model section's optimizer, with TensorFlow v1's defaults otherwise. */
static tl_status optimizer_of(const tl_model_config *m, tl_optimizer_config *o)
{
    static const struct {
        const char *name;
        tl_optimizer_kind kind;
    } names[] = {{"sgd", TL_OPTIM_SGD}, {"momentum", TL_OPTIM_MOMENTUM}, {"adagrad", TL_OPTIM_ADAGRAD},
                 {"adam", TL_OPTIM_ADAM}, {"rmsprop", TL_OPTIM_RMSPROP}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(m->optimizer, names[i].name) != 0)
            continue;
        tl_optimizer_config_default(names[i].kind, o);
        o->lr.learning_rate = m->learning_rate;
        if (strcmp(m->learning_rate_decay, "cosine") == 0) {
            o->lr.kind = TL_LR_COSINE_DECAY;
            o->lr.decay_steps = m->decay_steps.value;
        }
        if (names[i].kind == TL_OPTIM_MOMENTUM)
            o->momentum = 0.9;
        if (names[i].kind == TL_OPTIM_RMSPROP)
            o->momentum = 0.0;
        return tl_optimizer_config_validate(o);
    }
    return tl_error(TL_EINVAL, "model.optimizer: '%s' is not one of sgd, momentum, adagrad, adam, rmsprop",
                    m->optimizer);
}

/* DCN-v2 over the tables: the features are the dense inputs, and every
 * embedding feature's activations (each of its table's dim) join them in
 * x0; the deep network is model.top_mlp. */
static tl_status dcn_of(tl_job *job, const tl_emb_config *e, tl_estimator_options *o)
{
    const tl_model_config *mc = &job->r->model;
    tl_dcn_config *m = &job->dcn;
    memset(m, 0, sizeof *m);
    if (e->num_features > TL_DCN_MAX_FEATURES)
        return tl_error(TL_EINVAL, "dcn: %d embedding features; at most %d are supported", e->num_features,
                        TL_DCN_MAX_FEATURES);
    m->num_features = e->num_features;
    for (int f = 0; f < e->num_features; f++)
        m->dims[f] = e->tables[e->features[f].table].dim;
    m->num_cross = mc->num_cross;
    _Static_assert(TL_DCN_MAX_LAYERS == TL_MAX_HIDDEN_LAYERS, "top_mlp fits the deep network");
    m->num_deep = mc->num_top;
    memcpy(m->deep, mc->top_mlp, sizeof m->deep);
    m->num_dense = 0; /* the features' width */
    o->model_fn = tl_model_dcn;
    o->user = m;
    return TL_OK;
}

/* The layout_map section as Keras' ModelParallel(layout_map, batch_dim_name
 * "batch") over the DeviceMesh ("batch", "model") of (replicas,
 * num_cores_per_replica), each replica's cores along "model"; the map's
 * keys in the section's order, matched as Keras 3.15 matches them (the
 * whole path). */
static tl_status layout_of(tl_job *job, tl_estimator_options *o)
{
    const tl_run_config *r = job->r;
    if (r->layout_map_json == NULL)
        return TL_OK;
    tl_topology *topo;
    tl_status st = tl_topology_create(r, NULL, &topo);
    if (st != TL_OK)
        return st;
    int R = tl_topology_num_replicas(topo);
    int C = r->use_tpu && r->tpu.num_cores_per_replica.set ? (int)r->tpu.num_cores_per_replica.value : 1;
    int *ids = calloc((size_t)(R * C), sizeof *ids);
    static const char *const names[2] = {"batch", "model"};
    if (ids == NULL)
        st = tl_error(TL_ENOMEM, "layout_map: out of memory");
    for (int k = 0; st == TL_OK && k < R * C; k++)
        ids[k] = C > 1 ? tl_topology_device_of(topo, k / C, k % C) : k;
    if (st == TL_OK)
        st = tl_mesh_create(tl_topology_devices(topo), (int64_t[]){R, C}, 2, names, 2, ids, R * C, &job->mesh);
    free(ids);
    tl_topology_destroy(topo);
    json_t *lm = st == TL_OK ? json_loads(r->layout_map_json, 0, NULL) : NULL;
    if (st == TL_OK && lm == NULL)
        st = tl_error(TL_ENOMEM, "layout_map: out of memory");
    if (st == TL_OK)
        st = tl_layout_map_create(job->mesh, TL_MATCH_FULL, &job->layout_map);
    const char *key;
    json_t *v;
    json_object_foreach(lm, key, v) {
        const char *axes[TL_MAX_RANK];
        int rank = (int)json_array_size(v);
        if (st != TL_OK)
            break;
        if (rank > TL_MAX_RANK) {
            st = tl_error(TL_EINVAL, "layout_map['%s']: %d dimensions; at most %d", key, rank, TL_MAX_RANK);
            break;
        }
        for (int i = 0; i < rank; i++)
            axes[i] = json_string_value(json_array_get(v, (size_t)i)); /* NULL for null */
        if ((st = tl_layout_map_set_axes(job->layout_map, key, axes, rank)) != TL_OK)
            st = tl_error(st, "layout_map['%s']: %s", key, tl_last_error());
    }
    json_decref(lm);
    tl_model_parallel_options mo;
    tl_model_parallel_options_init(&mo);
    mo.layout_map = job->layout_map;
    mo.batch_dim_name = "batch";
    if (st == TL_OK && (st = tl_model_parallel_create(&mo, &job->distribution)) == TL_OK)
        o->distribution = job->distribution;
    return st;
}

/* The embedding section's tables (or embedding_config's), and for
 * model_name dlrm or dcn the model over them. */
static tl_status embedding_of(tl_job *job, tl_estimator_options *o)
{
    const tl_run_config *r = job->r;
    bool dlrm = strcmp(r->model.model_name, "dlrm") == 0;
    bool dcn = strcmp(r->model.model_name, "dcn") == 0;
    if (r->embedding_json == NULL && r->embedding_config == NULL) {
        if (dlrm || dcn)
            return tl_error(TL_EINVAL, "model_name %s needs embedding tables: set embedding (a JSON section) or "
                                       "embedding_config (a TPUEmbeddingConfiguration .pb)",
                            r->model.model_name);
        return TL_OK;
    }
    tl_status st = r->embedding_json != NULL
                       ? tl_emb_spec_from_json(r->embedding_json, strlen(r->embedding_json), &job->emb_spec)
                       : tl_emb_spec_from_proto_file(r->embedding_config, &job->emb_spec);
    if (st != TL_OK)
        return st;
    const tl_emb_config *e = tl_emb_spec_config(job->emb_spec);
    o->embedding_config = e; /* the estimator sizes it from its topology */
    if (dcn)
        return dcn_of(job, e, o);
    if (!dlrm)
        return TL_OK;
    /* The DLRM: the features are the dense inputs; each embedding feature's
     * ids travel apart, named by the feature. */
    tl_dlrm_config *m = &job->dlrm;
    memset(m, 0, sizeof *m);
    if (e->num_features > TL_DLRM_MAX_FEATURES)
        return tl_error(TL_EINVAL, "dlrm: %d embedding features; at most %d are supported", e->num_features,
                        TL_DLRM_MAX_FEATURES);
    m->num_features = e->num_features;
    for (int f = 0; f < e->num_features; f++)
        m->dims[f] = e->tables[e->features[f].table].dim;
    /* The model's own check, before any data is made or read. */
    int64_t d = r->model.num_bottom > 0 ? r->model.bottom_mlp[r->model.num_bottom - 1] : 0;
    for (int f = 0; f < e->num_features; f++)
        if (m->dims[f] != d)
            return tl_error(TL_EINVAL, "dlrm: bottom_mlp's last width %lld must equal feature %d's embedding dim %d "
                                       "(table %d%s%s%s): set model.bottom_mlp's last width or the table's dim",
                            (long long)d, f, m->dims[f], e->features[f].table,
                            e->tables[e->features[f].table].name ? ", \"" : "",
                            e->tables[e->features[f].table].name ? e->tables[e->features[f].table].name : "",
                            e->tables[e->features[f].table].name ? "\"" : "");
    m->num_bottom = r->model.num_bottom;
    memcpy(m->bottom, r->model.bottom_mlp, sizeof m->bottom);
    m->num_top = r->model.num_top;
    memcpy(m->top, r->model.top_mlp, sizeof m->top);
    m->num_dense = 0; /* the features' width */
    o->model_fn = tl_model_dlrm;
    o->user = m;
    return TL_OK;
}

static void on_log(const tl_train_log *log, void *user)
{
    const tl_job *job = user;
    job->opt.on_progress(log, job->final_step, job->opt.user);
}

tl_status tl_job_create(const tl_config *cfg, const tl_job_options *o, tl_job **out)
{
    *out = NULL;
    const tl_run_config *r = tl_config_get(cfg);
    if (r == NULL)
        return tl_error(TL_EINVAL, "tl_job_create: the configuration is not resolved (call tl_config_resolve)");
    tl_job *job = calloc(1, sizeof *job);
    if (job == NULL)
        return tl_error(TL_ENOMEM, "tl_job_create: out of memory");
    job->cfg = cfg;
    job->r = r;
    if (o != NULL)
        job->opt = *o;
    tl_estimator_options eo;
    tl_estimator_options_init(&eo);
    tl_status st = TL_OK;
    if (strcmp(r->model.model_name, "mlp") == 0) {
        eo.model_fn = tl_model_mlp;
        eo.user = (void *)&r->model;
    } else if (strcmp(r->model.model_name, "cnn") == 0) {
        eo.model_fn = tl_model_cnn;
    } else if (strcmp(r->model.model_name, "transformer") == 0) {
        /* synthetic_sequences' vocabulary is the model's default and least one. */
        job->transformer.vocab_size = r->input.synthetic_vocab.set ? r->input.synthetic_vocab.value : 0;
        eo.model_fn = tl_model_transformer;
        eo.user = &job->transformer;
    } else if (strcmp(r->model.model_name, "dlrm") != 0 && strcmp(r->model.model_name, "dcn") != 0) {
        st = tl_error(TL_EINVAL, "model.model_name: '%s' is not a built-in model (mlp, cnn, transformer, dlrm, dcn)",
                      r->model.model_name);
    }
    /* The configuration's mistakes first, then the data (which may take a
     * while to make). */
    if (st == TL_OK)
        st = optimizer_of(&r->model, &eo.optimizer);
    if (st == TL_OK)
        st = embedding_of(job, &eo);
    if (st == TL_OK)
        st = layout_of(job, &eo);
    if (st == TL_OK)
        st = tl_job_is_file_dataset(r) ? tl_job_files_open(job) : tl_job_data_load(job);
    /* Every host, whatever happened here: the others wait for it. */
    st = tl_job_hosts_agree(job, st);
    if (st == TL_OK) {
        eo.hosts = job->opt.hosts;
        eo.reduce_sum = r->model.reduce_sum;
        eo.after_save = tl_job_after_save;
        eo.after_save_user = job;
        if (job->opt.train_and_evaluate && r->eval_every_n_steps.set)
            eo.save_every_n_steps = r->eval_every_n_steps.value;
        if (job->opt.on_progress != NULL) {
            eo.on_log = on_log;
            eo.log_user = job;
        }
        st = tl_estimator_create(cfg, &eo, &job->est);
    }
    if (st != TL_OK) {
        tl_job_destroy(job);
        return st;
    }
    *out = job;
    return TL_OK;
}

tl_status tl_job_partition_plan(tl_job *job, char **json)
{
    *json = NULL;
    if (!job->opt.train)
        return tl_error(TL_EINVAL, "tl_job_partition_plan: the job was created without tl_job_options.train (its "
                                   "training data is not loaded)");
    return job->file_input ? tl_estimator_partition_plan(job->est, NULL, &job->train_input, json)
                           : tl_estimator_partition_plan(job->est, &job->train, NULL, json);
}

void tl_job_destroy(tl_job *job)
{
    if (job == NULL)
        return;
    tl_estimator_destroy(job->est);
    tl_distribution_destroy(job->distribution);
    tl_layout_map_destroy(job->layout_map);
    tl_mesh_destroy(job->mesh);
    tl_emb_spec_destroy(job->emb_spec);
    tl_job_files_close(job);
    tl_job_data_free(job);
    free(job);
}

bool tl_job_host0(const tl_job *job)
{
    return job->opt.hosts == NULL || tl_comm_process(job->opt.hosts) == 0;
}

tl_estimator *tl_job_estimator(tl_job *job)
{
    return job->est;
}

void tl_job_request_stop(tl_job *job)
{
    tl_estimator_request_stop(job->est);
}

tl_status tl_job_params_digest(const tl_job *job, char hex[65])
{
    return tl_estimator_params_digest(job->est, hex);
}

/* ---- checkpoints ------------------------------------------------------------ */

/* The step of dir's newest complete checkpoint. Over several hosts host 0
 * looks (reading every table shard once) and tells the others, so every
 * host restores the same one. */
static tl_status latest_checkpoint(tl_job *job, const char *dir, int64_t *step)
{
    tl_comm *hosts = job->opt.hosts;
    int64_t v[2] = {TL_OK, -1};
    if (tl_job_host0(job)) {
        tl_ckpt_reader *rd;
        tl_status st = tl_ckpt_latest_valid(dir, 0, &rd, &v[1]);
        if (st == TL_OK)
            tl_ckpt_close(rd);
        v[0] = st;
    }
    if (hosts != NULL && tl_comm_processes(hosts) > 1) {
        tl_status st = tl_comm_broadcast(hosts, tl_comm_first_rank(hosts), v, 2, TL_COMM_I64, 0);
        if (st != TL_OK)
            return st;
    }
    *step = v[1];
    if (v[0] == TL_OK || tl_job_host0(job))
        return (tl_status)v[0]; /* host 0's own error is set */
    if (v[0] == TL_ENOTFOUND)
        return TL_ENOTFOUND;
    return tl_error((tl_status)v[0], "host 0 found no checkpoint to restore in %s (its message says why)", dir);
}

tl_status tl_job_restore(tl_job *job, const char *checkpoint, char *used, size_t cap, int64_t *step)
{
    const char *dir = job->r->model_dir;
    *step = -1;
    used[0] = '\0';
    if (checkpoint != NULL) {
        /* A TensorFlow user names a checkpoint by its prefix ("model.ckpt-200");
         * the file is the prefix plus ".safetensors". */
        snprintf(used, cap, "%s", checkpoint);
        if (access(used, F_OK) != 0) {
            int n = snprintf(used, cap, "%s%s", checkpoint, TL_CKPT_SUFFIX);
            if (n < 0 || (size_t)n >= cap || access(used, F_OK) != 0)
                snprintf(used, cap, "%s", checkpoint);
        }
    } else if (dir == NULL) {
        return tl_error(TL_EINVAL, "there is no checkpoint to load: set model_dir (--model_dir=DIR) or "
                                   "--checkpoint=FILE");
    } else {
        /* The job looks the checkpoint up itself, rather than letting the
         * estimator do it, to tell which file and step it restores (the
         * estimator loads them only when the model is traced). */
        tl_status st = latest_checkpoint(job, dir, step);
        if (st == TL_ENOTFOUND)
            return tl_error(TL_ENOTFOUND, "Could not find trained model in model_dir: %s.", dir);
        if (st != TL_OK)
            return st;
        if ((st = tl_ckpt_path(dir, *step, used, cap)) != TL_OK)
            return st;
    }
    tl_status st = tl_estimator_restore(job->est, used);
    if (st == TL_OK)
        job->params_ready = true;
    return st;
}

/* ---- train ------------------------------------------------------------------- */

tl_status tl_job_train(tl_job *job, tl_job_train_result *res)
{
    memset(res, 0, sizeof *res);
    res->restored_from_step = -1;
    const tl_run_config *r = job->r;
    if (!job->opt.train)
        return tl_error(TL_EINVAL, "tl_job_train: the job was created without tl_job_options.train (its training "
                                   "data is not loaded)");
    /* Resume here rather than in the estimator's first train, to tell
     * where from. */
    if (!job->params_ready && r->model_dir != NULL) {
        tl_status st = tl_job_restore(job, NULL, res->restored_from, sizeof res->restored_from,
                                      &res->restored_from_step);
        if (st != TL_OK && st != TL_ENOTFOUND)
            return st;
        if (st == TL_ENOTFOUND)
            tl_clear_error();
    }
    int64_t from = res->restored_from_step > 0 ? res->restored_from_step : 0;
    if (job->params_ready && res->restored_from_step < 0)
        from = tl_estimator_global_step(job->est);
    job->final_step = r->train_steps.set ? from + r->train_steps.value : r->max_steps.set ? r->max_steps.value : -1;
    /* epochs: the input ends, for data in memory after epochs passes of
     * whole batches (counted from step 0); a file dataset tells where. */
    int64_t epochs = r->input.epochs.set ? r->input.epochs.value : 0;
    if (epochs > 0 && !job->file_input && r->train_batch_size.set) {
        int64_t end = epochs * (job->train.num_examples / r->train_batch_size.value);
        if (job->final_step < 0 || end < job->final_step)
            job->final_step = end;
    }
    job->train_input.finite = epochs > 0;
    if (job->opt.on_train_start != NULL && tl_job_host0(job)) {
        /* Host 0 holds the most rows (DIV and MOD give the first hosts the
         * remainder); the whole is what one host would hold. */
        tl_emb_engine *eng = tl_estimator_embedding(job->est);
        int64_t table_bytes = 0, per_id = 0;
        if (eng != NULL) {
            tl_emb_config whole = *tl_emb_engine_config(eng);
            whole.num_hosts = 1;
            whole.host = 0;
            whole.num_shards = 1;
            (void)tl_emb_config_bytes(&whole, &table_bytes, &per_id); /* the engine's own config: valid */
        }
        tl_job_train_start s = {.model_name = r->model.model_name,
                                .dataset = r->input.dataset,
                                .examples = job->file_input ? -1 : job->train.num_examples,
                                .from_step = res->restored_from_step,
                                .restored_from = res->restored_from_step >= 0 ? res->restored_from : NULL,
                                .final_step = job->final_step,
                                .global_batch_size = r->train_batch_size.set ? r->train_batch_size.value : 0,
                                .num_hosts = (int)r->num_hosts,
                                .num_devices = (int)((r->devices ? r->devices : tl_available_cpus()) * r->num_hosts),
                                .num_replicas = r->use_tpu && r->tpu.num_cores_per_replica.set
                                                    ? (int)((r->devices ? r->devices : tl_available_cpus()) *
                                                            r->num_hosts / r->tpu.num_cores_per_replica.value)
                                                    : 0,
                                .iterations_per_loop = r->tpu.iterations_per_loop,
                                .table_bytes = table_bytes,
                                .host_table_bytes = tl_emb_table_bytes(eng)};
        job->opt.on_train_start(&s, job->opt.user);
    }
    tl_status st = job->file_input ? tl_estimator_train_input(job->est, &job->train_input, &res->train)
                                   : tl_estimator_train_epochs(job->est, &job->train, epochs, &res->train);
    if (st == TL_OK)
        job->params_ready = true;
    return st;
}

/* ---- evaluate and predict ---------------------------------------------------- */

/* The parameters to use: checkpoint's, those in memory, or model_dir's
 * latest. */
static tl_status params_for(tl_job *job, const char *checkpoint, char *used, size_t cap)
{
    used[0] = '\0';
    if (checkpoint == NULL && job->params_ready)
        return TL_OK;
    int64_t step;
    return tl_job_restore(job, checkpoint, used, cap, &step);
}

tl_status tl_job_evaluate(tl_job *job, const char *checkpoint, tl_job_evaluation *res)
{
    memset(res, 0, sizeof *res);
    tl_status st = params_for(job, checkpoint, res->checkpoint, sizeof res->checkpoint);
    if (st == TL_OK)
        st = tl_job_evaluate_params(job, res);
    if (st == TL_OK && job->opt.on_evaluation != NULL && tl_job_host0(job))
        job->opt.on_evaluation(res, job->opt.user);
    return st;
}

tl_status tl_job_evaluate_params(tl_job *job, tl_job_evaluation *res)
{
    tl_status st = job->file_input ? tl_estimator_evaluate_input(job->est, &job->eval_input, &res->result)
                                   : tl_estimator_evaluate(job->est, &job->test, &res->result);
    if (st != TL_OK)
        return st;
    res->has_oracle_auc = job->has_oracle;
    res->oracle_auc = job->oracle_auc;
    return TL_OK;
}

tl_status tl_job_predict(tl_job *job, const char *checkpoint, tl_predict_result *res)
{
    memset(res, 0, sizeof *res);
    if (!job->r->predict_batch_size.set)
        return tl_error(TL_EINVAL, "predict needs predict_batch_size in the configuration (e.g. "
                                   "--predict_batch_size=1000)");
    char used[4096];
    tl_status st = params_for(job, checkpoint, used, sizeof used);
    if (st != TL_OK)
        return st;
    return job->file_input ? tl_estimator_predict_input(job->est, &job->eval_input, res)
                           : tl_estimator_predict(job->est, &job->test, res);
}

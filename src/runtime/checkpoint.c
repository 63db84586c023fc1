/*
 * checkpoint.c — the estimator's state in model_dir: what a checkpoint
 * holds, saving it through the checkpoint manager (checkpoint.h), restoring
 * it with the variables as the hard check, and warm starting (the
 * configuration's identity: ckpt_identity.c; the input positions' restore:
 * ckpt_input.c).
 *
 * A checkpoint, model_dir/model.ckpt-<step>.safetensors:
 *
 *   "<var>"            F32, the variable's shape: every variable of the model
 *   "<var>/<slot>"     F32, the same shape: its optimizer slots, named as
 *                      TensorFlow's v1 optimizers name their slot variables
 *                      ("<var>/<optimizer name>", made unique with _1, _2 in
 *                      creation order): Adam "<var>/Adam" (m) and
 *                      "<var>/Adam_1" (v); Momentum "<var>/Momentum"; Adagrad
 *                      "<var>/Adagrad"; RMSProp "<var>/RMSProp" (rms) and
 *                      "<var>/RMSProp_1" (momentum), or when centered
 *                      "<var>/RMSProp_1" (mg) and "<var>/RMSProp_2" (momentum)
 *   "global_step"      I64 scalar
 *   "input_datasets"   U8 [bytes], only when training reads input_fn
 *                      datasets and one host wrote the checkpoint: where
 *                      each invocation's dataset stands (file, offset,
 *                      shuffle buffer, epoch), as the JSON array of their
 *                      tl_dataset_save texts. It is a tensor, not metadata,
 *                      because a shuffle buffer can be larger than a header
 *                      may be (100 MB); checkpoints of earlier versions
 *                      carry it as the metadata key of that name, and
 *                      restore still reads that. Several hosts' positions
 *                      are in their host files (below).
 *
 * and in __metadata__, besides what the writer and the manager fill in
 * (format, checksums, "step"):
 *
 *   "global_step"            the step, in decimal
 *   "optimizer"              TensorFlow's name of the optimizer ("Adam")
 *   "input_epoch", "input_batch", "input_steps_per_epoch", "input_examples"
 *                            where the input pipeline stands: batch
 *                            input_batch of epoch input_epoch, of an epoch of
 *                            input_steps_per_epoch batches from input_examples
 *                            examples. The input order is a pure function of
 *                            (seed, epoch, position), so the step alone
 *                            resumes it; these let a pipeline check that it
 *                            reads the same data (a warning when not).
 *   "tf_random_seed"         the key of every random stream, or "null". Dropout
 *                            and the other streams are keyed by (seed, op,
 *                            replica, step): the step is their only counter,
 *                            and Adam's bias correction is computed from the
 *                            step too, so no RNG state or beta powers need
 *                            saving.
 *   "config"                 the canonical JSON (sorted keys) of what the
 *                            trained bits depend on: the "model" section, the
 *                            params, train_batch_size, tf_random_seed, the
 *                            optimizer and cross_shard_reduction
 *   "config_sha256"          its SHA-256
 *   "topology"               {"cores_per_replica", "hosts", "replicas"}
 *
 * The embedding tables (emb_ckpt.c): on one host "embedding/<table>/
 * parameters" and "embedding/<table>/<slot>", F32 (vocabulary_size, dim),
 * in this file.
 *
 * On H > 1 hosts every host writes its host file beside this one at every
 * save (checkpoint.h, "Host files"): its shard of the tables, and its own
 * invocations' input positions ("input_datasets", null for the other
 * hosts' invocations), so no host ever holds another's shuffle buffers.
 * This file then holds neither, and its metadata says so:
 *
 *   "host_files"               H, in decimal
 *   "table_sharding_strategy"  "DIV_DEFAULT" or "MOD", with tables only
 *   "written_by"               "tpu_worker/host 0 of 2" (tpu_job_name
 *                              naming the job), as in every host file
 *
 * The commit (tl_est_save): every host writes its host file (atomic and
 * durable, as every checkpoint file); the hosts agree — one host's failure
 * fails the save on every host, naming it and its file, and writes no main
 * file; then host 0 writes this file, the commit marker, and the index. A
 * kill before this file leaves the previous checkpoint the newest complete
 * one; host files no main file commits are removed by the manager's next
 * save. A restore reads whatever count of shards was saved into the
 * current hosts' shards (re-sharding) and each invocation's position from
 * the one host file that holds it, whatever host runs it now; with several
 * hosts every host restores the step host 0 chose, or none does.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/file.h"
#include "../mesh/mesh_int.h"
#include "estimator_int.h"

/* ---- names --------------------------------------------------------------- */

/* TensorFlow's name of slot s of oc's optimizer (tpuloop's slot order, see
 * optim.h). RMSProp creates rms, then mg when centered, then momentum. */
static const char *slot_suffix(const tl_optimizer_config *oc, int s)
{
    switch (oc->kind) {
    case TL_OPTIM_MOMENTUM: return "Momentum";
    case TL_OPTIM_ADAGRAD: return "Adagrad";
    case TL_OPTIM_ADAM: return s == 0 ? "Adam" : "Adam_1";
    case TL_OPTIM_RMSPROP:
        if (s == 0)
            return "RMSProp";
        if (s == 2)
            return "RMSProp_1";
        return oc->centered ? "RMSProp_2" : "RMSProp_1";
    default: return "slot";
    }
}

static char *slot_name(const tl_estimator *est, const tl_var *v, int s)
{
    return tl_asprintf("%s/%s", v->name, slot_suffix(&est->opt.optimizer, s));
}

/* "[4, 5]"; cut short with "...]" when it does not fit. */
static void shape_str(char *buf, size_t cap, const int64_t *shape, int rank)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len + 1 < cap)
        snprintf(buf + len, cap - len, "]");
    else if (cap >= 5)
        snprintf(buf + cap - 5, 5, "...]");
}

/* ---- saving -------------------------------------------------------------- */

static tl_status set_meta_int(tl_ckpt_writer *w, const char *key, int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return tl_ckpt_writer_set_meta(w, key, buf);
}

/* Several hosts: "written_by", the writing host as the logs name it
 * ("tpu_worker/host 1 of 2", tpu_job_name naming the job). */
static tl_status set_written_by(const tl_estimator *est, tl_ckpt_writer *w)
{
    char by[192];
    const char *job = est->rc.tpu.tpu_job_name;
    snprintf(by, sizeof by, "%.120s/host %d of %d", job != NULL ? job : "tpu_worker", est->host, est->H);
    return tl_ckpt_writer_set_meta(w, "written_by", by);
}

static tl_status fill_writer(tl_estimator *est, tl_ckpt_writer *w)
{
    const tl_vars *vars = est->vars;
    tl_status st = TL_OK;
    for (int k = 0; k < vars->n && st == TL_OK; k++) {
        const tl_var *v = &vars->v[vars->by_name[k]];
        st = tl_ckpt_writer_add(w, v->name, TL_CKPT_F32, v->shape, v->rank, est->params + v->offset);
        for (int s = 0; v->trainable && s < est->nslots && st == TL_OK; s++) { /* state variables have no slots */
            char *name = slot_name(est, v, s);
            st = name != NULL ? tl_ckpt_writer_add(w, name, TL_CKPT_F32, v->shape, v->rank, est->slots[s] + v->offset)
                              : tl_error_oom();
            tl_free(name);
        }
    }
    if (st == TL_OK)
        st = tl_est_emb_save(est, w);
    est->ckpt_step = est->global_step; /* borrowed by the writer until it is written */
    if (st == TL_OK)
        st = tl_ckpt_writer_add(w, "global_step", TL_CKPT_I64, NULL, 0, &est->ckpt_step);
    int64_t spe = est->steps_per_epoch > 0 ? est->steps_per_epoch : 1;
    const tl_run_config *rc = &est->rc;
    if (st == TL_OK)
        st = set_meta_int(w, "global_step", est->global_step);
    if (st == TL_OK)
        st = tl_ckpt_writer_set_meta(w, "optimizer", tl_optimizer_kind_name(est->opt.optimizer.kind));
    if (st == TL_OK && est->steps_per_epoch > 0 && est->data != NULL &&
        (st = set_meta_int(w, "input_epoch", est->global_step / spe)) == TL_OK &&
        (st = set_meta_int(w, "input_batch", est->global_step % spe)) == TL_OK &&
        (st = set_meta_int(w, "input_steps_per_epoch", spe)) == TL_OK)
        st = set_meta_int(w, "input_examples", est->data->num_examples);
    if (st == TL_OK)
        st = rc->tf_random_seed.set ? set_meta_int(w, "tf_random_seed", rc->tf_random_seed.value)
                                    : tl_ckpt_writer_set_meta(w, "tf_random_seed", "null");
    if (st == TL_OK)
        st = tl_ckpt_writer_set_meta(w, "config", est->identity_json);
    if (st == TL_OK)
        st = tl_ckpt_writer_set_meta(w, "config_sha256", est->config_sha256);
    if (st == TL_OK)
        st = tl_ckpt_writer_set_meta(w, "topology", est->topology_json);
    /* Several hosts: the tables and the positions are in the host files. */
    if (st == TL_OK && est->H > 1 && (st = set_written_by(est, w)) == TL_OK)
        return set_meta_int(w, TL_CKPT_META_HOST_FILES, est->H);
    /* The positions can be as large as the shuffle buffers they hold, so
     * they are a tensor: a header is limited to 100 MB, and a tensor is
     * under the same checksum and the same atomic commit. */
    tl_free(est->ckpt_input);
    est->ckpt_input = NULL;
    if (st == TL_OK && (st = tl_infeed_save_positions(est, est->global_step, &est->ckpt_input)) == TL_OK &&
        est->ckpt_input != NULL) {
        int64_t len = (int64_t)strlen(est->ckpt_input); /* borrowed by the writer until it is written */
        st = tl_ckpt_writer_add(w, TL_EST_INPUT_TENSOR, TL_CKPT_U8, &len, 1, est->ckpt_input);
    }
    return st;
}

/* Several hosts, every host: this host's file of the checkpoint of the
 * global step (checkpoint.h, "Host files"), durable — its shard of the
 * tables and its own invocations' input positions. */
static tl_status save_host_file(tl_estimator *est)
{
    char main[4096], path[4200];
    tl_status st = tl_ckpt_path(est->model_dir, est->global_step, main, sizeof main);
    if (st == TL_OK)
        st = tl_ckpt_host_path(main, est->host, est->H, path, sizeof path);
    if (st == TL_OK)
        st = tl_io_make_dirs(est->model_dir, "model_dir");
    if (st != TL_OK)
        return st;
    tl_ckpt_writer *w;
    if ((st = tl_ckpt_writer_create(&w)) != TL_OK)
        return st;
    char *positions = NULL; /* borrowed by the writer until it is written */
    st = tl_est_emb_save_host(est, w);
    if (st == TL_OK && (st = tl_infeed_save_positions(est, est->global_step, &positions)) == TL_OK &&
        positions != NULL) {
        int64_t len = (int64_t)strlen(positions);
        st = tl_ckpt_writer_add(w, TL_EST_INPUT_TENSOR, TL_CKPT_U8, &len, 1, positions);
    }
    if (st == TL_OK)
        st = set_meta_int(w, "step", est->global_step);
    if (st == TL_OK)
        st = set_meta_int(w, "global_step", est->global_step);
    if (st == TL_OK)
        st = set_meta_int(w, TL_CKPT_META_HOST_FILE, est->host);
    if (st == TL_OK)
        st = set_meta_int(w, TL_CKPT_META_HOST_FILES, est->H);
    if (st == TL_OK)
        st = tl_ckpt_writer_set_meta(w, "config_sha256", est->config_sha256);
    if (st == TL_OK)
        st = set_written_by(est, w);
    if (st == TL_OK && (st = tl_ckpt_writer_write(w, path)) != TL_OK)
        st = tl_error(st, "cannot write its host file %s: %s", path, tl_last_error());
    tl_ckpt_writer_destroy(w);
    tl_est_emb_ckpt_free(est);
    tl_free(positions);
    return st;
}

tl_status tl_est_save(tl_estimator *est)
{
    if (est->model_dir == NULL)
        return TL_OK;
    tl_status st;
    if (est->H > 1) {
        /* Each host's file first, durable; then the hosts agree, and only
         * then host 0 writes the main file, the commit marker. A host that
         * failed fails the save on every host; the checkpoints before it
         * stay as they were. */
        st = tl_est_ckpt_agree(est, save_host_file(est));
        if (st != TL_OK) {
            st = tl_error(st, "the checkpoint of step %lld is not committed (the earlier checkpoints stay): %s",
                          (long long)est->global_step, tl_last_error());
            return tl_est_hosts_same(est, st);
        }
        if (est->host > 0)
            return TL_OK;
    }
    if (est->ckpt == NULL) {
        tl_ckpt_manager_options o;
        tl_ckpt_manager_options_init(&o);
        o.keep_checkpoint_max = est->rc.keep_checkpoint_max;
        o.keep_checkpoint_every_n_hours = est->rc.keep_checkpoint_every_n_hours;
        if ((st = tl_io_make_dirs(est->model_dir, "model_dir")) != TL_OK ||
            (st = tl_ckpt_manager_create(est->model_dir, &o, &est->ckpt)) != TL_OK)
            return st;
    }
    tl_ckpt_writer *w;
    if ((st = tl_ckpt_writer_create(&w)) != TL_OK)
        return st;
    tl_log(TL_LOG_INFO, "Saving checkpoints for %lld into %s/" TL_CKPT_PREFIX ".", (long long)est->global_step,
           est->model_dir);
    if ((st = fill_writer(est, w)) == TL_OK)
        st = tl_ckpt_manager_save(est->ckpt, w, est->global_step);
    if (st == TL_OK)
        st = tl_est_summaries_checkpoint(est);
    tl_ckpt_writer_destroy(w);
    tl_est_emb_ckpt_free(est);
    tl_free(est->ckpt_input);
    est->ckpt_input = NULL;
    return st;
}

/* ---- restoring ----------------------------------------------------------- */

/* Finds name in r as dtype dt of the given shape; the error names what
 * ("checkpoint FILE", "warm_start_from FILE") and the variable. */
static tl_status check_tensor(const tl_ckpt_reader *r, const char *what, const char *name, const int64_t *shape,
                              int rank, tl_ckpt_dtype dt, tl_ckpt_tensor_info *t)
{
    char want[256], got[256];
    shape_str(want, sizeof want, shape, rank);
    if (tl_ckpt_find(r, name, t) != TL_OK)
        return tl_error(TL_EINVAL, "%s: variable '%s' is missing (the model has it: %s %s)", what, name,
                        tl_ckpt_dtype_name(dt), want);
    if (t->dtype != dt)
        return tl_error(TL_EINVAL, "%s: variable '%s' is %s, the model needs %s", what, name,
                        tl_ckpt_dtype_name(t->dtype), tl_ckpt_dtype_name(dt));
    bool same = t->rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        shape_str(got, sizeof got, t->shape, t->rank);
        return tl_error(TL_EINVAL, "%s: variable '%s' has shape %s, the model needs %s", what, name, got, want);
    }
    return TL_OK;
}

/* Appends "key: A -> B" for every key where the checkpoint's identity a and
 * ours b differ, into objects ("optimizer.lr.learning_rate: 0.01 -> 0.02"). */
static void diff_json(tl_strbuf *sb, const char *prefix, const json_t *a, const json_t *b)
{
    const char *key;
    json_t *va;
    char path[256];
    json_object_foreach((json_t *)a, key, va) {
        json_t *vb = json_object_get(b, key);
        if (vb != NULL && json_equal(va, vb))
            continue;
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", key);
        if (vb != NULL && json_is_object(va) && json_is_object(vb)) {
            diff_json(sb, path, va, vb);
            continue;
        }
        char *ta = json_dumps(va, JSON_ENCODE_ANY | JSON_COMPACT);
        char *tb = vb != NULL ? json_dumps(vb, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        tl_strbuf_appendf(sb, "%s%s: %s -> %s", sb->len ? "; " : "", path, ta ? ta : "?", tb ? tb : "(absent)");
        free(ta);
        free(tb);
    }
    json_object_foreach((json_t *)b, key, va) {
        if (json_object_get(a, key) != NULL)
            continue;
        char *tb = json_dumps(va, JSON_ENCODE_ANY | JSON_COMPACT);
        tl_strbuf_appendf(sb, "%s%s%s%s: (absent) -> %s", sb->len ? "; " : "", prefix, prefix[0] ? "." : "", key,
                          tb ? tb : "?");
        free(tb);
    }
}

/* Whether two topologies (topology_json) train the same bits: the same
 * replicas and cores per replica. The hosts they are spread over do not
 * count: the reductions keep the global replica order (comm.h). */
static bool same_replicas(const char *a, const char *b)
{
    json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
    bool same = ja != NULL && jb != NULL;
    static const char *const keys[] = {"replicas", "cores_per_replica"};
    for (int k = 0; k < 2 && same; k++)
        same = json_equal(json_object_get(ja, keys[k]), json_object_get(jb, keys[k]));
    json_decref(ja);
    json_decref(jb);
    return same;
}

/* The variables fit, so a checkpoint written with another configuration or
 * topology loads; the warning says what differs. */
static void warn_identity(const tl_estimator *est, const tl_ckpt_reader *r, const char *path)
{
    const char *sha = tl_ckpt_meta(r, "config_sha256");
    const char *topo = tl_ckpt_meta(r, "topology");
    tl_strbuf sb = {0};
    if (sha != NULL && strcmp(sha, est->config_sha256) != 0) {
        const char *text = tl_ckpt_meta(r, "config");
        json_t *a = text ? json_loads(text, 0, NULL) : NULL, *b = json_loads(est->identity_json, 0, NULL);
        if (json_is_object(a) && json_is_object(b))
            diff_json(&sb, "", a, b);
        json_decref(a);
        json_decref(b);
        if (sb.len == 0)
            tl_strbuf_append(&sb, "config_sha256 differs");
    }
    if (topo != NULL && !same_replicas(topo, est->topology_json))
        tl_strbuf_appendf(&sb, "%stopology: %s -> %s", sb.len ? "; " : "", topo, est->topology_json);
    if (sb.len > 0 && sb.data != NULL)
        tl_log(TL_LOG_WARN, "checkpoint %s: the checkpoint was written with another configuration (%s); its "
                            "variables fit, so it is loaded, but training on will not repeat the original run",
               path, sb.data);
    tl_strbuf_free(&sb);
}

/* The input datasets' positions r holds, as text (tl_malloc'd; NULL when
 * it holds none): the U8 tensor, or in a checkpoint of an earlier tpuloop
 * the metadata key of the same name. */
static tl_status read_input_positions(const tl_ckpt_reader *r, const char *what, char **out)
{
    *out = NULL;
    tl_ckpt_tensor_info t;
    if (tl_ckpt_find(r, TL_EST_INPUT_TENSOR, &t) != TL_OK) {
        tl_clear_error();
        const char *meta = tl_ckpt_meta(r, TL_EST_INPUT_TENSOR);
        if (meta != NULL && (*out = tl_strdup(meta)) == NULL)
            return tl_error_oom();
        return TL_OK;
    }
    if (t.dtype != TL_CKPT_U8 || t.rank != 1) {
        char shape[128];
        shape_str(shape, sizeof shape, t.shape, t.rank);
        return tl_error(TL_EINVAL, "%s: tensor '" TL_EST_INPUT_TENSOR "' is %s %s; the input positions are U8 [bytes]",
                        what, tl_ckpt_dtype_name(t.dtype), shape);
    }
    if (t.bytes > 0 && memchr(t.data, '\0', (size_t)t.bytes) != NULL)
        return tl_error(TL_EINVAL, "%s: tensor '" TL_EST_INPUT_TENSOR "' holds a NUL byte; the input positions are "
                                   "JSON text", what);
    char *text = tl_malloc((size_t)t.bytes + 1);
    if (text == NULL)
        return tl_error_oom();
    if (t.bytes > 0)
        memcpy(text, t.data, (size_t)t.bytes);
    text[t.bytes] = '\0';
    *out = text;
    return TL_OK;
}

/* Several hosts, collective: every host's checks passed (else every host
 * fails with the first failing host's error) and every host restores the
 * same step as host 0. */
static tl_status same_checkpoint(tl_estimator *est, tl_status st, int64_t gs, const char *path)
{
    if ((st = tl_est_ckpt_agree(est, st)) != TL_OK)
        return st;
    int64_t v = gs;
    if ((st = tl_est_hosts_bcast(est, &v, 1)) != TL_OK)
        return st;
    if (v != gs)
        st = tl_error(TL_EINVAL, "checkpoint %s has global step %lld, and host 0 restores step %lld: every host must "
                                 "restore the same checkpoint (is model_dir the same directory on every host?)",
                      path, (long long)gs, (long long)v);
    return tl_est_ckpt_agree(est, st);
}

/* Checks every variable, slot and the global step of r against the model
 * and then, only if all fit, loads them: the first pass keeps where each
 * tensor's bytes are, so the second can neither fail nor stop halfway. */
static tl_status restore_from(tl_estimator *est, const tl_ckpt_reader *r, const char *path)
{
    char what[1100];
    snprintf(what, sizeof what, "checkpoint %s", path);
    const tl_vars *vars = est->vars;
    int per_var = 1 + est->nslots;
    const void **src = tl_alloc_array((size_t)(vars->n ? vars->n : 1) * (size_t)per_var, sizeof *src);
    if (src == NULL)
        return tl_error_oom();
    tl_ckpt_tensor_info t;
    tl_status st = TL_OK;
    /* Variables first, in name order: a model mismatch names a variable. */
    for (int k = 0; k < vars->n && st == TL_OK; k++) {
        const tl_var *v = &vars->v[vars->by_name[k]];
        if ((st = check_tensor(r, what, v->name, v->shape, v->rank, TL_CKPT_F32, &t)) == TL_OK)
            src[k * per_var] = t.data;
    }
    const char *theirs = tl_ckpt_meta(r, "optimizer");
    const char *ours = tl_optimizer_kind_name(est->opt.optimizer.kind);
    for (int k = 0; k < vars->n && st == TL_OK; k++) {
        const tl_var *v = &vars->v[vars->by_name[k]];
        for (int s = 0; v->trainable && s < est->nslots && st == TL_OK; s++) {
            char *name = slot_name(est, v, s);
            st = name != NULL ? check_tensor(r, what, name, v->shape, v->rank, TL_CKPT_F32, &t) : tl_error_oom();
            tl_free(name);
            if (st == TL_OK)
                src[k * per_var + 1 + s] = t.data;
            else if (st != TL_ENOMEM && theirs != NULL && strcmp(theirs, ours) != 0)
                st = tl_error(st, "%s (it was written by optimizer %s; this model trains with %s)", tl_last_error(),
                              theirs, ours);
        }
    }
    int64_t gs = 0;
    if (st == TL_OK && (st = check_tensor(r, what, "global_step", NULL, 0, TL_CKPT_I64, &t)) == TL_OK) {
        memcpy(&gs, t.data, sizeof gs);
        if (gs < 0)
            st = tl_error(TL_EINVAL, "%s: global_step is %lld; it must be >= 0", what, (long long)gs);
    }
    tl_est_emb_src *tables = NULL;
    if (st == TL_OK)
        st = tl_est_emb_restore_check(est, r, path, what, &tables);
    /* One host's checkpoint holds the positions; several hosts' have them
     * in their host files, read when the datasets are open (the plan then
     * says which invocations this host runs). */
    char *input = NULL, *where = NULL;
    int host_files = 0;
    const char *mh = tl_ckpt_meta(r, TL_CKPT_META_HOST_FILES);
    int64_t nh;
    if (st == TL_OK && mh != NULL && (tl_parse_int64(mh, &nh) != 0 || nh < 1 || nh > TL_CKPT_MAX_HOST_FILES))
        st = tl_error(TL_EINVAL, "%s: __metadata__ " TL_CKPT_META_HOST_FILES " is \"%.64s\"; it must be a count of "
                                 "host files in [1, %d]", what, mh, TL_CKPT_MAX_HOST_FILES);
    else if (st == TL_OK && mh != NULL)
        host_files = (int)nh;
    else if (st == TL_OK)
        st = read_input_positions(r, what, &input);
    if (st == TL_OK && (where = tl_strdup(path)) == NULL)
        st = tl_error_oom();
    if (est->H > 1)
        st = same_checkpoint(est, st, gs, path);
    if (st != TL_OK) {
        tl_est_emb_src_free(tables);
        tl_free(input);
        tl_free(where);
        tl_free(src);
        return st;
    }
    /* Everything fits: load. NULL sources are empty tensors. */
    for (int k = 0; k < vars->n; k++) {
        const tl_var *v = &vars->v[vars->by_name[k]];
        size_t bytes = (size_t)v->size * sizeof(float);
        if (bytes == 0)
            continue;
        memcpy(est->params + v->offset, src[k * per_var], bytes);
        for (int s = 0; v->trainable && s < est->nslots; s++)
            memcpy(est->slots[s] + v->offset, src[k * per_var + 1 + s], bytes);
    }
    tl_free(src);
    st = tl_est_emb_restore(est, tables); /* checked above: only a broken engine fails here */
    tl_est_emb_src_free(tables);
    if (est->H > 1)
        st = tl_est_ckpt_agree(est, st);
    if (st != TL_OK) {
        tl_free(input);
        tl_free(where);
        return st;
    }
    est->global_step = gs;
    const char *spe = tl_ckpt_meta(r, "input_steps_per_epoch");
    int64_t v;
    est->restored_steps_per_epoch = spe != NULL && tl_parse_int64(spe, &v) == 0 ? v : 0;
    tl_free(est->restored_input);
    tl_free(est->restored_path);
    est->restored_input = input;
    est->restored_path = where;
    est->restored_host_files = host_files;
    est->restored_step = gs;
    est->restored_pending = true;
    warn_identity(est, r, path);
    tl_log(TL_LOG_INFO, "Restoring parameters from %s (global step %lld)", path, (long long)gs);
    return TL_OK;
}

/* The checkpoint to restore from: path's file, a directory's latest valid
 * checkpoint, or (path NULL) model_dir's. *file is tl_malloc'd. */
static tl_status open_checkpoint(const tl_estimator *est, const char *path, unsigned flags, tl_ckpt_reader **r,
                                 char **file)
{
    *r = NULL;
    *file = NULL;
    const char *dir = path;
    struct stat sb;
    if (path == NULL) {
        if (est->model_dir == NULL)
            return tl_error(TL_EINVAL, "tl_estimator_restore: no checkpoint path given and the configuration has "
                                       "no model_dir");
        dir = est->model_dir;
    } else if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        /* A file, or TensorFlow's prefix of one ("model_dir/model.ckpt-200"):
         * the prefix plus ".safetensors" when the prefix is no file. */
        char *named = NULL;
        if (stat(path, &sb) != 0 && errno == ENOENT) {
            if ((named = tl_asprintf("%s" TL_CKPT_SUFFIX, path)) == NULL)
                return tl_error_oom();
            if (stat(named, &sb) != 0) {
                tl_free(named);
                named = NULL;
            }
        }
        tl_status st = tl_ckpt_open(named != NULL ? named : path, flags, r);
        if (st == TL_OK && (*file = named != NULL ? named : tl_strdup(path)) == NULL) {
            tl_ckpt_close(*r);
            *r = NULL;
            return tl_error_oom();
        }
        if (st != TL_OK)
            tl_free(named);
        return st;
    }
    int64_t step;
    tl_status st = tl_ckpt_latest_valid(dir, flags, r, &step);
    if (st == TL_ENOTFOUND)
        return tl_error(TL_ENOTFOUND, "Could not find trained model in model_dir: %s.", dir);
    if (st != TL_OK)
        return st;
    char buf[4096];
    if ((st = tl_ckpt_path(dir, step, buf, sizeof buf)) != TL_OK || (*file = tl_strdup(buf)) == NULL) {
        tl_ckpt_close(*r);
        *r = NULL;
        return st != TL_OK ? st : tl_error_oom();
    }
    return TL_OK;
}

/* The checkpoint a train resumes from, model_dir's newest complete one.
 * With several hosts host 0 chooses it and every host opens that step's
 * file (collective; host 0's error, TL_ENOTFOUND included, on every host). */
static tl_status open_resume(tl_estimator *est, tl_ckpt_reader **r, char **file)
{
    if (est->H == 1)
        return open_checkpoint(est, NULL, 0, r, file);
    *r = NULL;
    *file = NULL;
    int64_t step = -1;
    tl_status st = TL_OK;
    if (est->host == 0 && (st = open_checkpoint(est, NULL, 0, r, file)) == TL_OK) {
        const char *ms = tl_ckpt_meta(*r, "step");
        if (ms == NULL || tl_parse_int64(ms, &step) != 0 || step < 0)
            st = tl_error(TL_EPARSE, "checkpoint %s: no __metadata__ step", *file);
    }
    if ((st = tl_est_ckpt_agree(est, st)) == TL_OK && (st = tl_est_hosts_bcast(est, &step, 1)) == TL_OK) {
        char buf[4096];
        if (est->host > 0 && (st = tl_ckpt_path(est->model_dir, step, buf, sizeof buf)) == TL_OK &&
            (st = tl_ckpt_open(buf, 0, r)) == TL_OK && (*file = tl_strdup(buf)) == NULL)
            st = tl_error_oom();
        if (st == TL_ENOTFOUND) /* not "no checkpoint": host 0 found it */
            st = tl_error(TL_EIO, "%s (host 0 resumes from it: model_dir must be one directory shared by every host)",
                          tl_last_error());
        st = tl_est_ckpt_agree(est, st);
    }
    if (st != TL_OK) {
        tl_ckpt_close(*r);
        tl_free(*file);
        *r = NULL;
        *file = NULL;
    }
    return st;
}

tl_status tl_estimator_restore(tl_estimator *est, const char *checkpoint_path)
{
    if (est->broken != TL_OK)
        return tl_error(est->broken, "%s", est->broken_err);
    tl_ckpt_reader *r;
    char *file;
    tl_status st = open_checkpoint(est, checkpoint_path, 0, &r, &file);
    if (st != TL_OK)
        return st;
    if (est->started == 0) { /* not traced yet: the first train, evaluate or predict loads it */
        tl_ckpt_close(est->pending);
        tl_free(est->pending_path);
        est->pending = r;
        est->pending_path = file;
        return TL_OK;
    }
    st = restore_from(est, r, file);
    tl_ckpt_close(r);
    tl_free(file);
    if (st == TL_OK)
        est->initialized = true;
    return st;
}

tl_status tl_est_apply_pending(tl_estimator *est)
{
    if (est->pending == NULL)
        return TL_OK;
    tl_status st = restore_from(est, est->pending, est->pending_path);
    if (st != TL_OK)
        return tl_est_hosts_same(est, st); /* every host has it (restore_from agrees) */
    tl_ckpt_close(est->pending);
    tl_free(est->pending_path);
    est->pending = NULL;
    est->pending_path = NULL;
    est->initialized = true;
    return TL_OK;
}

/* ---- warm start ---------------------------------------------------------- */

/* Bytes of variable names the warm-start line lists (a log line is at most
 * 1 KiB; the rest are counted). */
#define WARM_NAMES_SHOWN 600

/* WarmStartSettings(warm_start_from, vars_to_warm_start): the matching
 * variables take the checkpoint's values; optimizer slots and the step stay
 * fresh (TensorFlow's default warm-starts trainable variables only). Two
 * passes, so a variable that does not fit changes nothing. */
static tl_status warm_start(tl_estimator *est)
{
    if (est->warm_start_from == NULL || !est->have_warm_regex)
        return TL_OK;
    tl_ckpt_reader *r;
    char *file;
    tl_status st = open_checkpoint(est, est->warm_start_from, TL_CKPT_ALLOW_FOREIGN, &r, &file);
    if (st != TL_OK)
        return tl_error(st, "warm_start_from: %s", tl_last_error());
    char what[1100];
    snprintf(what, sizeof what, "warm_start_from %s", file);
    const tl_vars *vars = est->vars;
    const void **src = tl_calloc((size_t)(vars->n ? vars->n : 1), sizeof *src);
    bool *match = tl_calloc((size_t)(vars->n ? vars->n : 1), sizeof *match);
    if (src == NULL || match == NULL)
        st = tl_error_oom();
    tl_ckpt_tensor_info t;
    int matched = 0;
    for (int k = 0; k < vars->n && st == TL_OK; k++) {
        const tl_var *v = &vars->v[vars->by_name[k]];
        if (regexec(&est->warm_regex, v->name, 0, NULL, 0) != 0)
            continue;
        if ((st = check_tensor(r, what, v->name, v->shape, v->rank, TL_CKPT_F32, &t)) == TL_OK) {
            match[k] = true;
            src[k] = t.data;
            matched++;
        }
    }
    /* What was loaded from where, at WARN so that a `tpuloop train` user
     * (the command shows warnings) sees it: the names in the line up to
     * WARM_NAMES_SHOWN bytes, the rest counted; each variable at INFO as
     * TensorFlow's warm_start logs it. */
    tl_strbuf names = {0};
    int listed = 0;
    for (int k = 0; k < vars->n && st == TL_OK; k++) {
        const tl_var *v = &vars->v[vars->by_name[k]];
        if (!match[k])
            continue;
        if (v->size > 0)
            memcpy(est->params + v->offset, src[k], (size_t)v->size * sizeof(float));
        tl_log(TL_LOG_INFO, "Warm-starting variable: %s; prev_var_name: Unchanged", v->name);
        if (names.len + strlen(v->name) <= WARM_NAMES_SHOWN) {
            tl_strbuf_appendf(&names, "%s%s", names.len ? ", " : "", v->name);
            listed++;
        }
    }
    if (st == TL_OK && matched == 0)
        tl_log(TL_LOG_WARN, "Warm-started 0 of %d variables from %s: none matched warm_start_vars '%.200s'",
               vars->n, file, est->warm_start_vars ? est->warm_start_vars : "");
    else if (st == TL_OK) {
        char more[48] = "";
        if (listed < matched)
            snprintf(more, sizeof more, ", ... and %d more", matched - listed);
        tl_log(TL_LOG_WARN, "Warm-started %d of %d variables from %s: %s%s", matched, vars->n, file,
               names.data != NULL ? names.data : "", more);
    }
    tl_strbuf_free(&names);
    tl_free(src);
    tl_free(match);
    tl_ckpt_close(r);
    tl_free(file);
    return st;
}

/* ---- the first train ----------------------------------------------------- */

tl_status tl_est_train_begin(tl_estimator *est)
{
    tl_status st;
    /* One trainer per model_dir, from before it reads the checkpoint it
     * would resume from until the estimator is destroyed. */
    if (est->model_dir != NULL && est->lock == NULL && est->host == 0 &&
        ((st = tl_io_make_dirs(est->model_dir, "model_dir")) != TL_OK ||
         (st = tl_ckpt_lock_acquire(est->model_dir, &est->lock)) != TL_OK))
        return st;
    if (!est->initialized && est->model_dir != NULL) {
        tl_ckpt_reader *r;
        char *file;
        st = open_resume(est, &r, &file);
        if (st == TL_OK) {
            st = restore_from(est, r, file);
            tl_ckpt_close(r);
            tl_free(file);
            if (st != TL_OK)
                return tl_est_hosts_same(est, st); /* every host has it (restore_from agrees) */
            est->initialized = true;
        } else if (st != TL_ENOTFOUND) {
            /* checkpoints, but none valid: never silently start over */
            return tl_est_hosts_same(est, st);
        }
    }
    if (!est->initialized) {
        if ((st = warm_start(est)) != TL_OK)
            return st;
        est->initialized = true;
    }
    if (est->restored_steps_per_epoch > 0 && est->restored_steps_per_epoch != est->steps_per_epoch) {
        tl_log(TL_LOG_WARN, "the restored checkpoint was written with %lld batches per epoch, this input has %lld: "
                            "the input order from here on differs from the original run's",
               (long long)est->restored_steps_per_epoch, (long long)est->steps_per_epoch);
        est->restored_steps_per_epoch = 0;
    }
    if (est->model_dir != NULL && !est->config_written && est->host == 0) {
        char *path = tl_asprintf("%s/config.json", est->model_dir);
        if (path == NULL)
            return tl_error_oom();
        if ((st = tl_io_make_dirs(est->model_dir, "model_dir")) == TL_OK)
            st = tl_io_write_file_atomic(path, est->config_json, strlen(est->config_json));
        tl_free(path);
        if (st != TL_OK)
            return st;
        est->config_written = true;
    }
    return TL_OK;
}

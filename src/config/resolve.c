/* resolve.c — reads every raw value in TensorFlow's order, checks it with
 * TensorFlow's rules and messages, and fills the resolved tl_run_config.
 *
 * The order is that of the constructors a TensorFlow user calls: TPUConfig(...)
 * (spec §1), then tpu_config.RunConfig(...) (base RunConfig checks first, §2),
 * then TPUEstimator(...) (§4.5). The first failing check wins, as in Python.
 * Every message keeps TensorFlow's text and appends where the value came from. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"

#define RAW(id) (cfg->raw[TL_OPT_ID_##id])

/* Fails with TensorFlow's message plus " [from <source>]" of option id. */
#define rerr tl_config_rerr

tl_status tl_config_rerr(const tl_config *cfg, tl_opt_id id, tl_status st, const char *fmt, ...)
{
    char msg[900];
    char suffix[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tl_error(st, "%s%s", msg, tl_config_origin_suffix(cfg, id, suffix, sizeof suffix));
}

/* util.check_positive_integer: TypeError "<name> must be int, got <type>",
 * ValueError "<name> must be positive, got N". Python's bool passes as an int
 * there; tpuloop rejects it as a TypeError. */
static tl_status check_positive_integer(const tl_config *cfg, tl_opt_id id, const char *name, int64_t *out)
{
    const json_t *v = cfg->raw[id];
    if (!json_is_integer(v))
        return rerr(cfg, id, TL_ETYPE, "%s must be int, got %s", name, tl_py_type(v));
    if (json_integer_value(v) <= 0)
        return rerr(cfg, id, TL_EINVAL, "%s must be positive, got %lld", name, (long long)json_integer_value(v));
    *out = json_integer_value(v);
    return TL_OK;
}

/* An optional positive int checked with check_positive_integer when set. */
static tl_status opt_positive(const tl_config *cfg, tl_opt_id id, const char *name, tl_opt_int *out)
{
    *out = (tl_opt_int){false, 0};
    if (json_is_null(cfg->raw[id]))
        return TL_OK;
    tl_status st = check_positive_integer(cfg, id, name, &out->value);
    out->set = st == TL_OK;
    return st;
}

/* RunConfig._validate_properties: "<name> should be >= 0" / "> 0"; a value
 * that is not an int is a TypeError. */
static tl_status opt_bounded(const tl_config *cfg, tl_opt_id id, int64_t min, tl_opt_int *out)
{
    const char *name = tl_options[id].name;
    const json_t *v = cfg->raw[id];
    *out = (tl_opt_int){false, 0};
    if (json_is_null(v))
        return TL_OK;
    if (!json_is_integer(v))
        return rerr(cfg, id, TL_ETYPE, "%s must be int, got %s", name, tl_py_type(v));
    int64_t x = json_integer_value(v);
    if (x < min) {
        if (min == 0)
            return rerr(cfg, id, TL_EINVAL, "%s should be >= 0 (got %lld)", name, (long long)x);
        return rerr(cfg, id, TL_EINVAL, "%s should be > 0 (got %lld)", name, (long long)x);
    }
    *out = (tl_opt_int){true, x};
    return TL_OK;
}

/* tpuloop's own integers: in [min, max] from the option table. */
static tl_status int_in_table_range(const tl_config *cfg, tl_opt_id id, int64_t *out)
{
    const tl_option *o = &tl_options[id];
    const json_t *v = cfg->raw[id];
    if (!json_is_integer(v))
        return rerr(cfg, id, TL_ETYPE, "%s must be int, got %s (allowed: %s)", o->name, tl_py_type(v), o->allowed);
    int64_t x = json_integer_value(v);
    if (x < o->min || x > o->max)
        return rerr(cfg, id, TL_EINVAL, "%s must be in [%lld, %lld], got %lld (allowed: %s)", o->name,
                    (long long)o->min, (long long)o->max, (long long)x, o->allowed);
    *out = x;
    return TL_OK;
}

static tl_status get_bool(const tl_config *cfg, tl_opt_id id, bool *out)
{
    const json_t *v = cfg->raw[id];
    if (!json_is_boolean(v))
        return rerr(cfg, id, TL_ETYPE, "%s must be true or false, got %s", tl_options[id].name, tl_py_type(v));
    *out = json_is_true(v);
    return TL_OK;
}

/* A string option: NULL for None. */
static tl_status get_string(const tl_config *cfg, tl_opt_id id, const char **out)
{
    const json_t *v = cfg->raw[id];
    *out = NULL;
    if (json_is_null(v))
        return TL_OK;
    if (!json_is_string(v))
        return rerr(cfg, id, TL_ETYPE, "%s must be a string or None, got %s", tl_options[id].name, tl_py_type(v));
    *out = json_string_value(v);
    return TL_OK;
}

static const char *mode_names[] = {NULL, "PER_SHARD_V1", "PER_HOST_V1", "PER_HOST_V2", "BROADCAST", "SLICED"};

const char *tl_input_mode_name(tl_input_mode m)
{
    if ((int)m >= 1 && (int)m <= 5)
        return mode_names[m];
    return "UNKNOWN";
}

/* An InputPipelineConfig value: 1..5 or its name (any case); 0 if neither. */
static int input_mode_value(const json_t *v)
{
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        return x >= 1 && x <= 5 ? (int)x : 0;
    }
    if (json_is_string(v))
        for (int i = 1; i <= 5; i++)
            if (strcasecmp(json_string_value(v), mode_names[i]) == 0)
                return i;
    return 0;
}

/* TF_CONFIG, parsed (NULL when the environment had none). */
static tl_status parse_tf_config(const tl_config *cfg, json_t **out)
{
    *out = NULL;
    if (cfg->tf_config == NULL || cfg->tf_config[0] == '\0')
        return TL_OK;
    json_error_t err;
    json_t *j = json_loads(cfg->tf_config, 0, &err);
    if (j == NULL)
        return tl_error(TL_EPARSE, "TF_CONFIG environment variable: malformed JSON at line %d column %d: %s",
                        err.line, err.column, err.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return tl_error(TL_EPARSE, "TF_CONFIG environment variable must be a JSON object, got %s", tl_py_type(j));
    }
    json_t *service = json_object_get(j, "service");
    if (service != NULL && !json_is_object(service)) {
        tl_status st = tl_error(TL_ETYPE, "If \"service\" is set in TF_CONFIG, it must be a dict. Given %s",
                                tl_py_type(service));
        json_decref(j);
        return st;
    }
    *out = j;
    return TL_OK;
}

static const char *tf_config_string(const json_t *tf, const char *k1, const char *k2)
{
    if (tf == NULL)
        return NULL;
    const json_t *v = json_object_get(tf, k1);
    if (v != NULL && k2 != NULL)
        v = json_is_object(v) ? json_object_get(v, k2) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static tl_status keep_string(const char *s, char **slot, const char **out)
{
    tl_free(*slot);
    *slot = NULL;
    *out = NULL;
    if (s == NULL)
        return TL_OK;
    if ((*slot = tl_strdup(s)) == NULL)
        return tl_error_oom();
    *out = *slot;
    return TL_OK;
}

/* ---- TPUConfig (spec §1, in its order) ---------------------------------- */

static tl_status resolve_tpu_config(tl_config *cfg, const json_t *tf)
{
    tl_tpu_config *t = &cfg->rc.tpu;
    tl_status st;
    char buf[256];

    /* 1. iterations_per_loop: str(value) against the grammar. */
    const json_t *ipl = RAW(iterations_per_loop);
    const char *ipl_text = buf;
    if (json_is_string(ipl))
        ipl_text = json_string_value(ipl);
    else if (!tl_py_str(ipl, buf, sizeof buf))
        return tl_error_oom();
    if ((st = tl_parse_iterations_per_loop(ipl_text, &t->iterations_per_loop)) != TL_OK)
        return rerr(cfg, TL_OPT_ID_iterations_per_loop, st, "%s", tl_last_error());

    /* 2. num_shards */
    if ((st = opt_positive(cfg, TL_OPT_ID_num_shards, "TPUConfig num_shards", &t->num_shards)) != TL_OK)
        return st;

    /* 3. input_partition_dims: length, then the raw per_host value, then ncpr. */
    const json_t *pd = RAW(input_partition_dims);
    if (!json_is_null(pd)) {
        if (!json_is_array(pd) || (json_array_size(pd) != 1 && json_array_size(pd) != 2))
            return rerr(cfg, TL_OPT_ID_input_partition_dims, TL_EINVAL,
                        "input_partition_dims must be a list/tuple with one or two elements.");
        if (input_mode_value(RAW(per_host_input_for_training)) != TL_PER_HOST_V2)
            return rerr(cfg, TL_OPT_ID_input_partition_dims, TL_EINVAL,
                        "input_partition_dims is only supported in PER_HOST_V2 mode.");
        if (json_is_null(RAW(num_cores_per_replica)))
            return rerr(cfg, TL_OPT_ID_input_partition_dims, TL_EINVAL,
                        "input_partition_dims requires setting num_cores_per_replica.");
        if ((st = tl_partition_dims_parse(pd, &cfg->pdims)) != TL_OK)
            return rerr(cfg, TL_OPT_ID_input_partition_dims, st, "%s", tl_last_error());
    }
    t->input_partition_dims = cfg->pdims;

    /* 4. num_cores_per_replica */
    const json_t *ncpr = RAW(num_cores_per_replica);
    t->num_cores_per_replica = (tl_opt_int){false, 0};
    if (!json_is_null(ncpr)) {
        json_int_t x = json_is_integer(ncpr) ? json_integer_value(ncpr) : 0;
        if (x < 1 || x > 128 || (x & (x - 1)) != 0) {
            tl_py_str(ncpr, buf, sizeof buf);
            return rerr(cfg, TL_OPT_ID_num_cores_per_replica, TL_EINVAL,
                        "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got %s", buf);
        }
        t->num_cores_per_replica = (tl_opt_int){true, x};
    }
    if (cfg->pdims != NULL && (st = tl_partition_dims_check(cfg->pdims, t->num_cores_per_replica.value)) != TL_OK)
        return rerr(cfg, TL_OPT_ID_input_partition_dims, st, "%s", tl_last_error());

    /* 5. eval_training_input_configuration */
    const json_t *etic = RAW(eval_training_input_configuration);
    int em = input_mode_value(etic);
    if (em != TL_PER_HOST_V1 && em != TL_SLICED) {
        if (em != 0)
            snprintf(buf, sizeof buf, "%d (%s)", em, mode_names[em]);
        else
            tl_py_str(etic, buf, sizeof buf);
        return rerr(cfg, TL_OPT_ID_eval_training_input_configuration, TL_EINVAL,
                    "eval_training_input_configuration must be PER_HOST_V1 or SLICED; got %s", buf);
    }
    t->eval_training_input_configuration = (tl_input_mode)em;

    /* 6. per_host_input_for_training: False -> PER_SHARD_V1, True -> PER_HOST_V1.
     * TensorFlow stores anything else unchecked; tpuloop rejects it. */
    const json_t *ph = RAW(per_host_input_for_training);
    int pm = json_is_boolean(ph) ? (json_is_true(ph) ? TL_PER_HOST_V1 : TL_PER_SHARD_V1) : input_mode_value(ph);
    if (pm == 0 || pm == TL_SLICED) {
        tl_py_str(ph, buf, sizeof buf);
        return rerr(cfg, TL_OPT_ID_per_host_input_for_training, TL_EINVAL,
                    "per_host_input_for_training must be True, False, PER_SHARD_V1 (1), PER_HOST_V1 (2), "
                    "PER_HOST_V2 (3) or BROADCAST (4); got %s%s",
                    buf, pm == TL_SLICED ? " (SLICED is only for eval_training_input_configuration)" : "");
    }
    t->per_host_input_for_training = (tl_input_mode)pm;

    /* 7. initial_infeed_sleep_secs: `if initial_infeed_sleep_secs:
     * check_positive_integer(...)`, so a falsy number (None, 0, 0.0) is no
     * sleep, and anything truthy must be a positive int: 2.5 is TensorFlow's
     * TypeError. Falsy non-numbers ('', [], {}, False) TensorFlow lets pass
     * unchecked; tpuloop refuses them (check_positive_integer's TypeError). */
    t->initial_infeed_sleep_secs = 0;
    const json_t *sleep = RAW(initial_infeed_sleep_secs);
    bool falsy = json_is_null(sleep) || (json_is_number(sleep) && json_number_value(sleep) == 0);
    if (!falsy) {
        if ((st = check_positive_integer(cfg, TL_OPT_ID_initial_infeed_sleep_secs,
                                         "TPUConfig initial_infeed_sleep_secs", &t->initial_infeed_sleep_secs)) != TL_OK)
            return st;
    }

    /* 8. tpu_job_name, else TF_CONFIG's service.tpu_worker_job_name. */
    const char *job;
    if ((st = get_string(cfg, TL_OPT_ID_tpu_job_name, &job)) != TL_OK)
        return st;
    if (job == NULL || job[0] == '\0') {
        job = tf_config_string(tf, "service", "tpu_worker_job_name");
        if (job != NULL)
            tl_log(TL_LOG_INFO, "Load TPU job name from TF_CONFIG: %s", job);
    }
    if ((st = keep_string(job, &cfg->s_tpu_job_name, &t->tpu_job_name)) != TL_OK)
        return st;

    /* tpuloop validates what TensorFlow leaves to a later division by zero. */
    const json_t *every = RAW(experimental_host_call_every_n_steps);
    if (!json_is_integer(every))
        return rerr(cfg, TL_OPT_ID_experimental_host_call_every_n_steps, TL_ETYPE,
                    "TPUConfig experimental_host_call_every_n_steps must be int, got %s", tl_py_type(every));
    if (json_integer_value(every) < 1)
        return rerr(cfg, TL_OPT_ID_experimental_host_call_every_n_steps, TL_EINVAL,
                    "TPUConfig experimental_host_call_every_n_steps must be >= 1, got %lld",
                    (long long)json_integer_value(every));
    t->experimental_host_call_every_n_steps = json_integer_value(every);
    return get_bool(cfg, TL_OPT_ID_experimental_allow_per_host_v2_parallel_get_next,
                    &t->experimental_allow_per_host_v2_parallel_get_next);
}

/* ---- RunConfig (spec §2; base class first) ------------------------------ */

static tl_status resolve_run_config(tl_config *cfg, const json_t *tf)
{
    tl_run_config *rc = &cfg->rc;
    tl_status st;

    /* Checkpoint defaults: 600 s only when neither was given. */
    bool steps_given = cfg->source[TL_OPT_ID_save_checkpoints_steps] != TL_SOURCE_DEFAULT;
    bool secs_given = cfg->source[TL_OPT_ID_save_checkpoints_secs] != TL_SOURCE_DEFAULT;
    if (steps_given && secs_given && !json_is_null(RAW(save_checkpoints_steps)) &&
        !json_is_null(RAW(save_checkpoints_secs))) {
        char s1[300], s2[300];
        return tl_error(TL_EINVAL, "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.%s%s",
                        tl_config_origin_suffix(cfg, TL_OPT_ID_save_checkpoints_steps, s1, sizeof s1),
                        tl_config_origin_suffix(cfg, TL_OPT_ID_save_checkpoints_secs, s2, sizeof s2));
    }

    /* model_dir, and TF_CONFIG's model_dir. */
    const char *md;
    if ((st = get_string(cfg, TL_OPT_ID_model_dir, &md)) != TL_OK)
        return st;
    if (md != NULL && md[0] == '\0')
        return rerr(cfg, TL_OPT_ID_model_dir, TL_EINVAL, "model_dir should be non-empty.");
    const char *tf_md = tf_config_string(tf, "model_dir", NULL);
    if (tf_md != NULL) {
        if (tf_md[0] == '\0')
            return tl_error(TL_EINVAL, "model_dir in TF_CONFIG should be non-empty.");
        if (md != NULL && strcmp(md, tf_md) != 0)
            return rerr(cfg, TL_OPT_ID_model_dir, TL_EINVAL,
                        "`model_dir` provided in RunConfig construct, if set, must have the same value as the "
                        "model_dir in TF_CONFIG. model_dir: %s\nTF_CONFIG[\"model_dir\"]: %s.\n", md, tf_md);
        if (md == NULL)
            tl_log(TL_LOG_INFO, "Using model_dir in TF_CONFIG: %s", tf_md);
        md = tf_md;
    }
    if ((st = keep_string(md, &cfg->s_model_dir, &rc->model_dir)) != TL_OK)
        return st;

    /* _validate_properties, in its order. */
    if ((st = opt_bounded(cfg, TL_OPT_ID_save_summary_steps, 0, &rc->save_summary_steps)) != TL_OK)
        return st;
    if ((st = opt_bounded(cfg, TL_OPT_ID_save_checkpoints_steps, 0, &rc->save_checkpoints_steps)) != TL_OK)
        return st;
    if ((st = opt_bounded(cfg, TL_OPT_ID_save_checkpoints_secs, 0, &rc->save_checkpoints_secs)) != TL_OK)
        return st;
    if (!steps_given && !secs_given)
        rc->save_checkpoints_secs = (tl_opt_int){true, 600};
    tl_opt_int keep;
    if ((st = opt_bounded(cfg, TL_OPT_ID_keep_checkpoint_max, 0, &keep)) != TL_OK)
        return st;
    rc->keep_checkpoint_max = keep.set ? keep.value : 0;
    const json_t *hours = RAW(keep_checkpoint_every_n_hours);
    if (json_is_null(hours)) {
        /* None stays None: Estimator hands it to its Saver, whose rule
         * differs from every number's (see tl_ckpt_manager_save). */
        rc->keep_checkpoint_every_n_hours = -1.0;
    } else {
        if (!json_is_number(hours))
            return rerr(cfg, TL_OPT_ID_keep_checkpoint_every_n_hours, TL_ETYPE,
                        "keep_checkpoint_every_n_hours must be a number, got %s", tl_py_type(hours));
        double h = json_number_value(hours);
        if (!(h > 0) || !isfinite(h)) {
            char buf[64];
            tl_py_str(hours, buf, sizeof buf);
            return rerr(cfg, TL_OPT_ID_keep_checkpoint_every_n_hours, TL_EINVAL,
                        "keep_checkpoint_every_n_hours should be > 0 (got %s)", buf);
        }
        rc->keep_checkpoint_every_n_hours = h;
    }
    if ((st = opt_bounded(cfg, TL_OPT_ID_log_step_count_steps, 1, &rc->log_step_count_steps)) != TL_OK)
        return st;
    const json_t *seed = RAW(tf_random_seed);
    rc->tf_random_seed = (tl_opt_int){false, 0};
    if (!json_is_null(seed)) {
        if (!json_is_integer(seed))
            return rerr(cfg, TL_OPT_ID_tf_random_seed, TL_EINVAL, "tf_random_seed must be integer. (got %s)",
                        tl_py_type(seed));
        rc->tf_random_seed = (tl_opt_int){true, json_integer_value(seed)};
    }

    /* master and evaluation_master: TF_CONFIG first, then the TPU RunConfig's override. */
    const char *task_type = tf_config_string(tf, "task", "type");
    if (tf != NULL && json_object_get(tf, "cluster") == NULL) {
        /* Local mode: TensorFlow accepts only worker 0. */
        const json_t *task = json_object_get(tf, "task");
        const json_t *index = json_is_object(task) ? json_object_get(task, "index") : NULL;
        if (task_type != NULL && strcmp(task_type, "worker") != 0)
            return tl_error(TL_EINVAL, "If \"cluster\" is not set in TF_CONFIG, task type must be WORKER. (got %s)",
                            task_type);
        if (index != NULL && !(json_is_integer(index) && json_integer_value(index) == 0) &&
            !(json_is_string(index) && strcmp(json_string_value(index), "0") == 0))
            return tl_error(TL_EINVAL, "If \"cluster\" is not set in TF_CONFIG, task index must be 0.");
    }
    bool evaluator = task_type != NULL && strcmp(task_type, "evaluator") == 0;
    const char *master = tf_config_string(tf, "session_master", NULL);
    const char *eval_master = tf_config_string(tf, "eval_session_master", NULL);
    if (evaluator && json_object_get(tf, "cluster") != NULL)
        master = NULL;
    if (!evaluator && json_object_get(tf, "cluster") != NULL)
        eval_master = NULL;
    const char *m_opt, *em_opt;
    if ((st = get_string(cfg, TL_OPT_ID_master, &m_opt)) != TL_OK)
        return st;
    if ((st = get_string(cfg, TL_OPT_ID_evaluation_master, &em_opt)) != TL_OK)
        return st;
    if (m_opt != NULL)
        master = m_opt;
    if (master == NULL)
        master = "";
    if (em_opt != NULL)
        eval_master = em_opt;
    else if ((eval_master == NULL || eval_master[0] == '\0') && !evaluator)
        eval_master = master;
    if (eval_master == NULL)
        eval_master = "";
    if ((st = keep_string(master, &cfg->s_master, &rc->master)) != TL_OK)
        return st;
    return keep_string(eval_master, &cfg->s_evaluation_master, &rc->evaluation_master);
}

/* ---- TPUEstimator's constructor and train/evaluate arguments (§3.1, §4.5, §7) */

static tl_status resolve_estimator(tl_config *cfg)
{
    tl_run_config *rc = &cfg->rc;
    tl_status st;

    const json_t *params = RAW(params);
    if (!json_is_object(params))
        return rerr(cfg, TL_OPT_ID_params, TL_ETYPE, "params must be a dict, got %s", tl_py_type(params));
    if (json_object_get(params, "batch_size") != NULL || json_object_get(params, "context") != NULL) {
        char buf[600];
        tl_py_str(params, buf, sizeof buf);
        return rerr(cfg, TL_OPT_ID_params, TL_EINVAL,
                    "['batch_size', 'context'] are reserved keys but existed in params %s.", buf);
    }
    char *ptext = json_dumps(params, JSON_COMPACT | JSON_SORT_KEYS);
    if (ptext == NULL)
        return tl_error_oom();
    st = keep_string(ptext, &cfg->s_params, &rc->params_json);
    free(ptext);
    if (st != TL_OK)
        return st;

    if ((st = get_bool(cfg, TL_OPT_ID_use_tpu, &rc->use_tpu)) != TL_OK)
        return st;
    if ((st = get_bool(cfg, TL_OPT_ID_eval_on_tpu, &rc->eval_on_tpu)) != TL_OK)
        return st;
    if (!rc->use_tpu && rc->eval_on_tpu)
        tl_log(TL_LOG_INFO, "eval_on_tpu ignored because use_tpu is False.");

    /* train_batch_size may stay None until training is planned: `tpuloop
     * config` shows a configuration without one (the train plan reports
     * "`train_batch_size` cannot be `None`"). */
    if ((st = opt_positive(cfg, TL_OPT_ID_train_batch_size, "train_batch_size", &rc->train_batch_size)) != TL_OK)
        return st;
    if (rc->use_tpu && rc->tpu.per_host_input_for_training == TL_PER_SHARD_V1 && rc->tpu.num_cores_per_replica.set)
        return rerr(cfg, TL_OPT_ID_per_host_input_for_training, TL_EINVAL,
                    "Model parallelism only supports per host input for training. "
                    "Please adjust TPURunconfig.per_host_input_for_training.");
    if ((st = opt_positive(cfg, TL_OPT_ID_eval_batch_size, "eval_batch_size", &rc->eval_batch_size)) != TL_OK)
        return st;
    if ((st = opt_positive(cfg, TL_OPT_ID_predict_batch_size, "predict_batch_size", &rc->predict_batch_size)) != TL_OK)
        return st;

    /* train(steps, max_steps): the base Estimator's checks, then the TPU type checks. */
    const json_t *steps = RAW(train_steps), *max = RAW(max_steps);
    if (!json_is_null(steps) && !json_is_null(max)) {
        char s1[300], s2[300];
        return tl_error(TL_EINVAL, "Can not provide both steps and max_steps.%s%s",
                        tl_config_origin_suffix(cfg, TL_OPT_ID_train_steps, s1, sizeof s1),
                        tl_config_origin_suffix(cfg, TL_OPT_ID_max_steps, s2, sizeof s2));
    }
    char buf[64];
    if (json_is_number(steps) && json_number_value(steps) <= 0) {
        tl_py_str(steps, buf, sizeof buf);
        return rerr(cfg, TL_OPT_ID_train_steps, TL_EINVAL, "Must specify steps > 0, given: %s", buf);
    }
    if (json_is_number(max) && json_number_value(max) <= 0) {
        tl_py_str(max, buf, sizeof buf);
        return rerr(cfg, TL_OPT_ID_max_steps, TL_EINVAL, "Must specify max_steps > 0, given: %s", buf);
    }
    if ((st = opt_positive(cfg, TL_OPT_ID_train_steps, "Train steps", &rc->train_steps)) != TL_OK)
        return st;
    if ((st = opt_positive(cfg, TL_OPT_ID_max_steps, "Train max_steps", &rc->max_steps)) != TL_OK)
        return st;

    /* evaluate(steps): TPU messages on devices, the base Estimator's on the plain path. */
    const json_t *es = RAW(eval_steps);
    bool eval_on_device = rc->use_tpu && rc->eval_on_tpu;
    if (!eval_on_device && json_is_number(es) && json_number_value(es) <= 0) {
        tl_py_str(es, buf, sizeof buf);
        return rerr(cfg, TL_OPT_ID_eval_steps, TL_EINVAL, "Must specify steps > 0, given: %s", buf);
    }
    if ((st = opt_positive(cfg, TL_OPT_ID_eval_steps, "Eval steps", &rc->eval_steps)) != TL_OK)
        return st;

    /* Estimator's warm_start_from and WarmStartSettings.vars_to_warm_start.
     * The regex is checked here with the translator and the POSIX engine the
     * estimator compiles it with, so `config`, `train` and `evaluate` refuse
     * the same patterns with the same message, before any work. */
    const char *ws_from, *ws_vars;
    if ((st = get_string(cfg, TL_OPT_ID_warm_start_from, &ws_from)) != TL_OK ||
        (st = get_string(cfg, TL_OPT_ID_warm_start_vars, &ws_vars)) != TL_OK)
        return st;
    if (ws_from != NULL && ws_from[0] == '\0')
        return rerr(cfg, TL_OPT_ID_warm_start_from, TL_EINVAL,
                    "warm_start_from should be null or the path of a checkpoint or a model_dir, got ''");
    if (ws_vars != NULL && (st = tl_pyregex_check_match("warm_start_vars", ws_vars)) != TL_OK)
        return st == TL_ENOMEM ? st : rerr(cfg, TL_OPT_ID_warm_start_vars, st, "%s", tl_last_error());
    if ((st = keep_string(ws_from, &cfg->s_warm_start_from, &rc->warm_start_from)) != TL_OK ||
        (st = keep_string(ws_vars, &cfg->s_warm_start_vars, &rc->warm_start_vars)) != TL_OK)
        return st;

    /* EvalSpec's throttle_secs (its own check; train_and_evaluate's local
     * run needs it positive) and tpuloop's evaluation cadence and exporter. */
    const json_t *thr = RAW(throttle_secs);
    if (!json_is_integer(thr))
        return rerr(cfg, TL_OPT_ID_throttle_secs, TL_ETYPE, "throttle_secs must be int, got %s", tl_py_type(thr));
    if (json_integer_value(thr) < 0)
        return rerr(cfg, TL_OPT_ID_throttle_secs, TL_EINVAL, "Must specify throttle_secs >= 0, given: %lld",
                    (long long)json_integer_value(thr));
    rc->throttle_secs = json_integer_value(thr);
    if ((st = opt_bounded(cfg, TL_OPT_ID_eval_every_n_steps, 1, &rc->eval_every_n_steps)) != TL_OK ||
        (st = get_bool(cfg, TL_OPT_ID_best_exporter, &rc->best_exporter)) != TL_OK ||
        (st = int_in_table_range(cfg, TL_OPT_ID_exports_to_keep, &rc->exports_to_keep)) != TL_OK)
        return st;

    if ((st = int_in_table_range(cfg, TL_OPT_ID_devices, &rc->devices)) != TL_OK ||
        (st = int_in_table_range(cfg, TL_OPT_ID_intra_op_parallelism_threads, &rc->intra_op_parallelism_threads)) !=
            TL_OK ||
        (st = int_in_table_range(cfg, TL_OPT_ID_num_hosts, &rc->num_hosts)) != TL_OK)
        return st;
    return int_in_table_range(cfg, TL_OPT_ID_host_timeout_secs, &rc->host_timeout_secs);
}

/* ---- tpuloop's own sections: "model" and "input" -------------------------- */

/* A string option that must be one of the NULL-terminated choices. */
static tl_status one_of(const tl_config *cfg, tl_opt_id id, const char *const *choices, const char **out)
{
    tl_status st = get_string(cfg, id, out);
    if (st != TL_OK)
        return st;
    for (int i = 0; *out != NULL && choices[i] != NULL; i++)
        if (strcmp(*out, choices[i]) == 0)
            return TL_OK;
    char buf[128];
    tl_py_str(cfg->raw[id], buf, sizeof buf);
    return rerr(cfg, id, TL_EINVAL, "%s must be %s; got %s", tl_options[id].name, tl_options[id].allowed, buf);
}

static tl_status get_real(const tl_config *cfg, tl_opt_id id, double lo, bool lo_open, double hi, double *out)
{
    const json_t *v = cfg->raw[id];
    if (!json_is_number(v))
        return rerr(cfg, id, TL_ETYPE, "%s must be a number, got %s", tl_options[id].name, tl_py_type(v));
    double x = json_number_value(v);
    if (!(lo_open ? x > lo : x >= lo) || !(x < hi) || !isfinite(x)) {
        char buf[64];
        tl_py_str(v, buf, sizeof buf);
        return rerr(cfg, id, TL_EINVAL, "%s must be %s; got %s", tl_options[id].name, tl_options[id].allowed, buf);
    }
    *out = x;
    return TL_OK;
}

/* A list of layer widths: min..TL_MAX_HIDDEN_LAYERS ints in [1, 2^20]. */
static tl_status widths(tl_config *cfg, tl_opt_id id, int min, int64_t *out, int *n)
{
    const json_t *h = cfg->raw[id];
    const char *name = tl_options[id].name;
    if (!json_is_array(h) || json_array_size(h) > TL_MAX_HIDDEN_LAYERS || (int)json_array_size(h) < min)
        return rerr(cfg, id, TL_EINVAL, "%s must be %s; got %s%s", name, tl_options[id].allowed, tl_py_type(h),
                    json_is_array(h) ? " of another length" : "");
    *n = (int)json_array_size(h);
    for (int i = 0; i < *n; i++) {
        const json_t *u = json_array_get(h, (size_t)i);
        if (!json_is_integer(u) || json_integer_value(u) < 1 || json_integer_value(u) > (1 << 20))
            return rerr(cfg, id, TL_EINVAL, "%s[%d] must be an int in [1, 1048576]", name, i);
        out[i] = json_integer_value(u);
    }
    return TL_OK;
}

/* layout_map, kept as text in the user's key order (the job builds Keras'
 * LayoutMap from it): an object of lists of null or axis names. */
static tl_status resolve_layout_map(tl_config *cfg)
{
    const json_t *lm = RAW(layout_map);
    if (!json_is_null(lm) && !json_is_object(lm))
        return rerr(cfg, TL_OPT_ID_layout_map, TL_ETYPE, "layout_map must be %s; got %s",
                    tl_options[TL_OPT_ID_layout_map].allowed, tl_py_type(lm));
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)lm, key, v) {
        if (!json_is_array(v))
            return rerr(cfg, TL_OPT_ID_layout_map, TL_ETYPE,
                        "layout_map['%s'] must be a list of null or mesh axis names, one per dimension; got %s", key,
                        tl_py_type(v));
        size_t i;
        const json_t *a;
        json_array_foreach(v, i, a) {
            if (!json_is_null(a) && !json_is_string(a))
                return rerr(cfg, TL_OPT_ID_layout_map, TL_ETYPE,
                            "layout_map['%s'][%zu] must be null or a mesh axis name (\"batch\" or \"model\"); got %s",
                            key, i, tl_py_type(a));
        }
    }
    char *text = json_is_null(lm) ? NULL : json_dumps(lm, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!json_is_null(lm) && text == NULL)
        return tl_error_oom();
    tl_status st = keep_string(text, &cfg->s_layout_map_json, &cfg->rc.layout_map_json);
    free(text);
    return st;
}

static tl_status resolve_sections(tl_config *cfg)
{
    tl_model_config *m = &cfg->rc.model;
    tl_input_config *in = &cfg->rc.input;
    static const char *const models[] = {"mlp", "cnn", "transformer", "dlrm", "dcn", NULL};
    static const char *const acts[] = {"relu", "sigmoid", "tanh", NULL};
    static const char *const opts[] = {"sgd", "momentum", "adagrad", "adam", "rmsprop", NULL};
    static const char *const decays[] = {"none", "cosine", NULL};
    static const char *const sets[] = {"fashion_mnist", "synthetic", "criteo_synthetic", "synthetic_sequences",
                                       "tfrecord", "criteo", "csv", "idx", NULL};
    static const char *const reductions[] = {"MEAN", "SUM", NULL};
    const char *reduction = NULL;
    tl_status st;
    if ((st = one_of(cfg, TL_OPT_ID_model_name, models, &m->model_name)) != TL_OK)
        return st;
    if ((st = widths(cfg, TL_OPT_ID_hidden_units, 0, m->hidden_units, &m->num_hidden)) != TL_OK ||
        (st = widths(cfg, TL_OPT_ID_bottom_mlp, 1, m->bottom_mlp, &m->num_bottom)) != TL_OK ||
        (st = widths(cfg, TL_OPT_ID_top_mlp, 0, m->top_mlp, &m->num_top)) != TL_OK)
        return st;
    int64_t num_cross = 0;
    if ((st = int_in_table_range(cfg, TL_OPT_ID_num_cross_layers, &num_cross)) != TL_OK)
        return st;
    m->num_cross = (int)num_cross;
    if ((st = one_of(cfg, TL_OPT_ID_activation, acts, &m->activation)) != TL_OK ||
        (st = get_real(cfg, TL_OPT_ID_dropout, 0.0, false, 1.0, &m->dropout)) != TL_OK ||
        (st = one_of(cfg, TL_OPT_ID_optimizer, opts, &m->optimizer)) != TL_OK ||
        (st = get_real(cfg, TL_OPT_ID_learning_rate, 0.0, true, INFINITY, &m->learning_rate)) != TL_OK ||
        (st = one_of(cfg, TL_OPT_ID_learning_rate_decay, decays, &m->learning_rate_decay)) != TL_OK ||
        (st = opt_bounded(cfg, TL_OPT_ID_decay_steps, 1, &m->decay_steps)) != TL_OK ||
        (st = one_of(cfg, TL_OPT_ID_cross_shard_reduction, reductions, &reduction)) != TL_OK ||
        (st = one_of(cfg, TL_OPT_ID_dataset, sets, &in->dataset)) != TL_OK ||
        (st = get_string(cfg, TL_OPT_ID_data_dir, &in->data_dir)) != TL_OK)
        return st;
    m->reduce_sum = strcmp(reduction, "SUM") == 0;
    bool cosine = strcmp(m->learning_rate_decay, "cosine") == 0;
    if (cosine && !m->decay_steps.set)
        return rerr(cfg, TL_OPT_ID_decay_steps, TL_EINVAL,
                    "decay_steps must be an int >= 1 with learning_rate_decay cosine; got null");
    if (!cosine && m->decay_steps.set)
        return rerr(cfg, TL_OPT_ID_decay_steps, TL_EINVAL,
                    "decay_steps is only read with learning_rate_decay cosine; learning_rate_decay is %s (set it "
                    "to null)", m->learning_rate_decay);
    /* The embedding section is kept as text: embedding/ reads it (config/ knows only base). */
    const json_t *emb = RAW(embedding);
    if (!json_is_null(emb) && !json_is_object(emb))
        return rerr(cfg, TL_OPT_ID_embedding, TL_ETYPE, "embedding must be %s; got %s",
                    tl_options[TL_OPT_ID_embedding].allowed, tl_py_type(emb));
    const char *emb_path = NULL;
    if ((st = get_string(cfg, TL_OPT_ID_embedding_config, &emb_path)) != TL_OK)
        return st;
    if (emb_path != NULL && !json_is_null(emb))
        return rerr(cfg, TL_OPT_ID_embedding_config, TL_EINVAL,
                    "embedding_config and embedding are both set: give the tables one way");
    if (emb_path != NULL && emb_path[0] == '\0')
        return rerr(cfg, TL_OPT_ID_embedding_config, TL_EINVAL, "embedding_config must be %s; got ''",
                    tl_options[TL_OPT_ID_embedding_config].allowed);
    char *emb_text = json_is_null(emb) ? NULL : json_dumps(emb, JSON_COMPACT | JSON_SORT_KEYS);
    if (!json_is_null(emb) && emb_text == NULL)
        return tl_error_oom();
    st = keep_string(emb_text, &cfg->s_embedding_json, &cfg->rc.embedding_json);
    free(emb_text);
    if (st != TL_OK || (st = keep_string(emb_path, &cfg->s_embedding_config, &cfg->rc.embedding_config)) != TL_OK)
        return st;
    if ((st = resolve_layout_map(cfg)) != TL_OK)
        return st;
    if ((st = tl_config_resolve_synthetic(cfg)) != TL_OK)
        return st;
    if ((st = opt_bounded(cfg, TL_OPT_ID_epochs, 1, &in->epochs)) != TL_OK)
        return st;
    return tl_config_resolve_input(cfg);
}

tl_status tl_config_resolve(tl_config *cfg)
{
    if (cfg->resolved)
        return TL_OK;
    json_t *tf = NULL;
    memset(&cfg->rc, 0, sizeof cfg->rc);
    tl_partition_dims_destroy(cfg->pdims);
    cfg->pdims = NULL;
    tl_input_store_free(cfg->input);
    cfg->input = NULL;
    tl_status st = tl_config_model_dir_rules(cfg);
    if (st == TL_OK)
        st = parse_tf_config(cfg, &tf);
    if (st == TL_OK)
        st = resolve_tpu_config(cfg, tf);
    if (st == TL_OK)
        st = resolve_run_config(cfg, tf);
    if (st == TL_OK)
        st = resolve_estimator(cfg);
    if (st == TL_OK)
        st = resolve_sections(cfg);
    json_decref(tf);
    cfg->resolved = st == TL_OK;
    return st;
}

tl_status tl_config_check_train(const tl_config *cfg)
{
    if (!cfg->resolved)
        return tl_error(TL_EINVAL, "the configuration is not resolved: call tl_config_resolve first");
    if (cfg->rc.use_tpu && !cfg->rc.train_steps.set && !cfg->rc.max_steps.set)
        return tl_error(TL_EINVAL, "For TPU training, one of `steps` or `max_steps` must be set. "
                                   "Cannot be both `None`. (set --train_steps or --max_steps)");
    return TL_OK;
}

tl_status tl_config_check_eval(const tl_config *cfg)
{
    if (!cfg->resolved)
        return tl_error(TL_EINVAL, "the configuration is not resolved: call tl_config_resolve first");
    if (cfg->rc.use_tpu && cfg->rc.eval_on_tpu && !cfg->rc.eval_steps.set)
        return tl_error(TL_EINVAL, "Evaluate `steps` must be set on TPU. Cannot be `None`. (set --eval_steps)");
    return TL_OK;
}

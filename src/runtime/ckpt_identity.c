/* ckpt_identity.c — the identity of the configuration a checkpoint is
 * written with (its "config" and "config_sha256" metadata: what the
 * trained bits depend on), and the estimator's checkpoint state. */
#include <jansson.h>
#include <math.h>
#include <sha2.h>
#include <stdio.h>
#include <string.h>

#include "estimator_int.h"

/* ---- the configuration's identity ---------------------------------------- */

static json_t *num(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

/* The optimizer's kind, schedule and the hyperparameters its kind reads. */
static json_t *optimizer_json(const tl_optimizer_config *oc)
{
    json_t *o = json_object(), *lr = json_object();
    if (o == NULL || lr == NULL) {
        json_decref(o);
        json_decref(lr);
        return NULL;
    }
    json_object_set_new(lr, "kind", json_integer(oc->lr.kind));
    json_object_set_new(lr, "learning_rate", num(oc->lr.learning_rate));
    json_object_set_new(lr, "decay_steps", json_integer(oc->lr.decay_steps));
    json_object_set_new(lr, "decay_rate", num(oc->lr.decay_rate));
    json_object_set_new(lr, "staircase", json_boolean(oc->lr.staircase));
    json_object_set_new(lr, "alpha", num(oc->lr.alpha));
    json_object_set_new(lr, "warmup_steps", json_integer(oc->lr.warmup_steps));
    json_object_set_new(o, "name", json_string(tl_optimizer_kind_name(oc->kind)));
    json_object_set_new(o, "lr", lr);
    switch (oc->kind) {
    case TL_OPTIM_MOMENTUM:
        json_object_set_new(o, "momentum", num(oc->momentum));
        json_object_set_new(o, "use_nesterov", json_boolean(oc->use_nesterov));
        break;
    case TL_OPTIM_ADAGRAD:
        json_object_set_new(o, "initial_accumulator_value", num(oc->initial_accumulator_value));
        break;
    case TL_OPTIM_ADAM:
        json_object_set_new(o, "beta1", num(oc->beta1));
        json_object_set_new(o, "beta2", num(oc->beta2));
        json_object_set_new(o, "epsilon", num(oc->epsilon));
        break;
    case TL_OPTIM_RMSPROP:
        json_object_set_new(o, "decay", num(oc->decay));
        json_object_set_new(o, "momentum", num(oc->momentum));
        json_object_set_new(o, "epsilon", num(oc->epsilon));
        json_object_set_new(o, "centered", json_boolean(oc->centered));
        break;
    default: break;
    }
    return o;
}

/* identity_json, config_sha256 and topology_json from the resolved
 * configuration (config_json) and the options. */
static tl_status make_identity(tl_estimator *est)
{
    json_t *cfg = json_loads(est->config_json, 0, NULL);
    json_t *id = json_object();
    json_t *opt = optimizer_json(&est->opt.optimizer);
    char *text = NULL;
    if (cfg != NULL && id != NULL && opt != NULL) {
        static const char *const keys[] = {"model", "params", "train_batch_size", "tf_random_seed"};
        for (size_t i = 0; i < TL_ARRAY_LEN(keys); i++) {
            json_t *v = json_object_get(cfg, keys[i]);
            json_object_set(id, keys[i], v != NULL ? v : json_null());
        }
        /* The input decides which examples train: the data and the
         * pipeline, but not the knobs that only change speed, nor where
         * Fashion-MNIST is installed. */
        json_t *in = json_deep_copy(json_object_get(cfg, "input"));
        if (in != NULL) {
            static const char *const speed[] = {"prefetch", "num_parallel_calls", "data_dir"};
            for (size_t i = 0; i < TL_ARRAY_LEN(speed); i++)
                json_object_del(in, speed[i]);
            json_object_set_new(id, "input", in);
        }
        json_object_set(id, "optimizer", opt);
        json_object_set_new(id, "cross_shard_reduction", json_string(est->opt.reduce_sum ? "SUM" : "MEAN"));
        text = json_dumps(id, JSON_COMPACT | JSON_SORT_KEYS);
    }
    json_decref(cfg);
    json_decref(id);
    json_decref(opt);
    if (text == NULL)
        return tl_error_oom();
    est->identity_json = tl_strdup(text);
    free(text);
    if (est->identity_json == NULL)
        return tl_error_oom();
    SHA256Data((const uint8_t *)est->identity_json, strlen(est->identity_json), est->config_sha256);
    const tl_run_config *rc = &est->rc;
    int cpr = rc->tpu.num_cores_per_replica.set ? (int)rc->tpu.num_cores_per_replica.value : 1;
    est->topology_json = tl_asprintf("{\"cores_per_replica\":%d,\"hosts\":%lld,\"replicas\":%d}", cpr,
                                     (long long)rc->num_hosts, est->R);
    return est->topology_json != NULL ? TL_OK : tl_error_oom();
}

/* warm_start_vars as Python's re.match: the translated pattern anchored at
 * the start only (TensorFlow filters the collection with re.match). */
static tl_status compile_vars_regex(tl_estimator *est, const char *pat)
{
    char *ere;
    tl_status st = tl_pyregex_translate(pat, false, &ere);
    if (st == TL_ENOMEM)
        return st;
    if (st != TL_OK) {
        /* The translator speaks of LayoutMap keys; keep only its reason. */
        static const char marker[] = "regular expression";
        const char *why = strstr(tl_last_error(), marker);
        return tl_error(TL_EINVAL, "warm_start_vars '%s' is not a supported regular expression%s", pat,
                        why != NULL ? why + strlen(marker) : "");
    }
    char *anchored = tl_asprintf("^(%s)", ere);
    tl_free(ere);
    if (anchored == NULL)
        return tl_error_oom();
    int rc = regcomp(&est->warm_regex, anchored, REG_EXTENDED | REG_NOSUB);
    tl_free(anchored);
    if (rc != 0) {
        char why[256];
        regerror(rc, &est->warm_regex, why, sizeof why);
        return tl_error(TL_EINVAL, "warm_start_vars '%s' is not a supported regular expression: %s", pat, why);
    }
    est->have_warm_regex = true;
    return TL_OK;
}

tl_status tl_est_state_init(tl_estimator *est, const tl_config *cfg)
{
    const tl_run_config *rc = tl_config_get(cfg);
    atomic_init(&est->stop_requested, 0);
    if ((rc->model_dir != NULL && (est->model_dir = tl_strdup(rc->model_dir)) == NULL) ||
        (rc->warm_start_from != NULL && (est->warm_start_from = tl_strdup(rc->warm_start_from)) == NULL) ||
        (rc->warm_start_vars != NULL && (est->warm_start_vars = tl_strdup(rc->warm_start_vars)) == NULL))
        return tl_error_oom();
    tl_status st;
    if (rc->warm_start_vars != NULL && (st = compile_vars_regex(est, rc->warm_start_vars)) != TL_OK)
        return st;
    if ((st = tl_config_to_json(cfg, &est->config_json)) != TL_OK)
        return st;
    return make_identity(est);
}

tl_status tl_est_identity_refresh(tl_estimator *est)
{
    tl_free(est->identity_json);
    tl_free(est->topology_json);
    est->identity_json = est->topology_json = NULL;
    return make_identity(est);
}

void tl_est_state_free(tl_estimator *est)
{
    tl_ckpt_close(est->pending);
    tl_free(est->pending_path);
    tl_ckpt_manager_destroy(est->ckpt);
    if (est->have_warm_regex)
        regfree(&est->warm_regex);
    tl_free(est->model_dir);
    tl_free(est->warm_start_from);
    tl_free(est->warm_start_vars);
    tl_free_string(est->config_json);
    tl_free(est->identity_json);
    tl_free(est->topology_json);
    tl_free(est->restored_input);
    tl_free(est->restored_path);
    tl_free(est->ckpt_input);
    tl_ckpt_lock_release(est->lock);
}

/* host_call.c — the outfeed (spec tpu_estimator.md §6, §7): which tensors a
 * mode sends to the host (checked once, when the model_fn is traced), the
 * workers' copies of them into the outfeed area after a step, and the calls
 * of host_call's fn and metric_fn's update at the loop boundary. */
#include <stdio.h>
#include <string.h>

#include "estimator_int.h"

/* Checks tensor k of a spec list and, when `use`, appends it to the plan.
 * field is the spec's array ("host_call"), prefix the default name's. */
static tl_status add_tensor(tl_outfeed_plan *pl, const tl_graph *g, tl_mode mode, const char *field,
                            const char *prefix, int k, tl_t t, const char *name, int R, bool use)
{
    const tl_node *nd = tl_graph_node(g, t);
    if (nd == NULL)
        return tl_error(TL_EINVAL, "model_fn (%s): spec->%s[%d] is not a tensor of the graph (got %d)",
                        tl_mode_name(mode), field, k, (int)t);
    char dflt[TL_MAX_OUTFEED_NAME];
    if (name == NULL) {
        snprintf(dflt, sizeof dflt, "%s_%d", prefix, k);
        name = dflt;
    }
    size_t len = strlen(name);
    if (len == 0 || len >= TL_MAX_OUTFEED_NAME)
        return tl_error(TL_EINVAL, "model_fn (%s): spec->%s_names[%d] must have 1 to %d bytes, got %zu",
                        tl_mode_name(mode), field, k, TL_MAX_OUTFEED_NAME - 1, len);
    /* TensorFlow's outfeed concatenates along axis 0, which a scalar lacks
     * (a RuntimeError there; bad input here). */
    if (nd->rank == 0)
        return tl_error(TL_EINVAL, "All tensors outfed from TPU should preserve batch size dimension, but got "
                                   "scalar %s (spec->%s[%d] of model_fn (%s); reshape it to (1,))",
                        name, field, k, tl_mode_name(mode));
    if (nd->dtype != TL_F32 && nd->dtype != TL_I32)
        return tl_error(TL_EINVAL, "model_fn (%s): spec->%s[%d] (%s) must be float32 or int32", tl_mode_name(mode),
                        field, k, name);
    if (!use)
        return TL_OK;
    int i = pl->n_host_call + pl->n_metric;
    TL_ASSERT(i < TL_MAX_OUTFEED);
    tl_outfeed_tensor *o = &pl->t[i];
    o->t = t;
    memcpy(o->name, name, len + 1);
    o->dtype = nd->dtype;
    o->rank = nd->rank;
    memcpy(o->shape, nd->shape, sizeof o->shape);
    o->count = nd->size;
    o->offset = pl->record;
    pl->record += (int64_t)R * nd->size;
    return TL_OK;
}

static tl_status check_count(tl_mode mode, const char *field, int n, int max)
{
    if (n < 0 || n > max)
        return tl_error(TL_EINVAL, "model_fn (%s): spec->%s must be in [0, %d], got %d", tl_mode_name(mode), field,
                        max, n);
    return TL_OK;
}

tl_status tl_outfeed_plan_build(const tl_graph *g, tl_mode mode, const tl_model_spec *spec,
                                const tl_estimator_options *o, int R, tl_outfeed_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    if (mode == TL_MODE_PREDICT)
        return TL_OK;
    tl_status st = check_count(mode, "num_host_call", spec->num_host_call, TL_MAX_HOST_CALL);
    if (st != TL_OK)
        return st;
    if (spec->host_call_disabled && spec->num_host_call > 0)
        return tl_error(TL_EINVAL, "model_fn (%s): spec->host_call_disabled is set but spec->num_host_call is %d; "
                                   "disable the host_call or give it tensors, not both",
                        tl_mode_name(mode), spec->num_host_call);
    bool use = o->host_call != NULL;
    for (int k = 0; k < spec->num_host_call; k++) {
        if ((st = add_tensor(pl, g, mode, "host_call", "host_call", k, spec->host_call[k], spec->host_call_names[k],
                             R, use)) != TL_OK)
            return st;
        pl->n_host_call += use;
    }
    if (mode == TL_MODE_TRAIN && use && spec->num_host_call == 0 && !spec->host_call_disabled) {
        /* TensorFlow's default host_call: reshape(loss, [1]) every step. */
        tl_outfeed_tensor *d = &pl->t[0];
        d->t = spec->loss;
        snprintf(d->name, sizeof d->name, "loss");
        d->dtype = TL_F32;
        d->rank = 1;
        d->shape[0] = 1;
        d->count = 1;
        d->offset = 0;
        pl->record = R;
        pl->n_host_call = 1;
    }
    if (mode != TL_MODE_EVAL)
        return TL_OK;
    if ((st = check_count(mode, "num_eval_metric_tensors", spec->num_eval_metric_tensors, TL_MAX_EVAL_TENSORS)) !=
        TL_OK)
        return st;
    use = o->metric_update != NULL;
    for (int k = 0; k < spec->num_eval_metric_tensors; k++) {
        if ((st = add_tensor(pl, g, mode, "eval_metric_tensors", "eval_metric", k, spec->eval_metric_tensors[k],
                             spec->eval_metric_tensor_names[k], R, use)) != TL_OK)
            return st;
        pl->n_metric += use;
    }
    return TL_OK;
}

void tl_outfeed_write(const tl_outfeed_plan *pl, const tl_program *p, const tl_exec *x, int rank, float *record)
{
    for (int j = 0; j < pl->n_host_call + pl->n_metric; j++) {
        const tl_outfeed_tensor *o = &pl->t[j];
        /* int32 values sit in float-sized slots as their bits: memcpy keeps them. */
        memcpy(record + o->offset + (int64_t)rank * o->count, tl_exec_value(p, x, o->t),
               (size_t)o->count * sizeof *record);
    }
}

tl_status tl_outfeed_reserve(tl_estimator *est, int64_t elems)
{
    if (elems <= est->outfeed_cap)
        return TL_OK;
    elems += elems & 1; /* whole int64 words, as hosts merge it (hosts.c) */
    float *p = tl_realloc(est->outfeed, (size_t)elems * sizeof *p);
    if (p == NULL)
        return tl_error_oom();
    est->outfeed = p;
    est->outfeed_cap = elems;
    return TL_OK;
}

/* The host's views of tensors [first, first + n) of a record. */
static void views(const tl_outfeed_plan *pl, int first, int n, const float *record, int R, tl_host_tensor *out)
{
    for (int i = 0; i < n; i++) {
        const tl_outfeed_tensor *o = &pl->t[first + i];
        tl_host_tensor *h = &out[i];
        memset(h, 0, sizeof *h);
        h->name = o->name;
        h->dtype = o->dtype;
        h->data = record + o->offset;
        h->rank = o->rank;
        memcpy(h->shape, o->shape, sizeof h->shape);
        h->shape[0] *= R;
    }
}

tl_status tl_callback_failed(tl_status st, const char *what)
{
    const char *detail = tl_last_error();
    return tl_error(st, "%s: returned %s (%s)%s%s", what, tl_err_name(st), tl_strerror(st), *detail ? ": " : "",
                    detail);
}

tl_status tl_outfeed_host_call(const tl_estimator *est, const tl_outfeed_plan *pl, const float *record,
                               int64_t global_step)
{
    if (pl->n_host_call == 0)
        return TL_OK;
    tl_host_tensor ts[TL_MAX_OUTFEED];
    views(pl, 0, pl->n_host_call, record, est->R, ts);
    tl_clear_error();
    tl_status st = est->opt.host_call(global_step, ts, pl->n_host_call, est->opt.host_call_user);
    if (st == TL_OK)
        return TL_OK;
    char what[64];
    snprintf(what, sizeof what, "host_call at step %lld", (long long)global_step);
    return tl_callback_failed(st, what);
}

tl_status tl_outfeed_metric_update(const tl_estimator *est, const tl_outfeed_plan *pl, const float *record,
                                   int64_t eval_step)
{
    if (est->opt.metric_update == NULL)
        return TL_OK;
    tl_host_tensor ts[TL_MAX_OUTFEED];
    views(pl, pl->n_host_call, pl->n_metric, record, est->R, ts);
    tl_clear_error();
    tl_status st = est->opt.metric_update(ts, pl->n_metric, est->opt.metric_user);
    if (st == TL_OK)
        return TL_OK;
    char what[64];
    snprintf(what, sizeof what, "metric_update at eval step %lld", (long long)eval_step);
    return tl_callback_failed(st, what);
}

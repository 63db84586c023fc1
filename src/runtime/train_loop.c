/* train_loop.c — the host loop of train (spec tpu_estimator.md §3.1–§3.3):
 * restore or initialise, then device loops of the schedule's sizes and, at
 * every boundary, host_call, the NaN check, logging, summaries, the
 * checkpoint when due and a requested stop. The checkpoint and the stop act
 * only here, between loops, while the workers wait: that is what makes a
 * stopped-and-resumed run the same bits as one never stopped. */
#include <math.h>
#include <string.h>

#include "estimator_int.h"
#include "schedule.h"

/* The request is a plain store from a signal handler: that is only safe
 * when the atomic needs no lock. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "tl_estimator_request_stop needs a lock-free atomic int");

void tl_estimator_request_stop(tl_estimator *est)
{
    atomic_store(&est->stop_requested, 1);
}

tl_status tl_estimator_set_steps(tl_estimator *est, int64_t train_steps, int64_t max_steps, int64_t eval_steps)
{
    if (est == NULL)
        return tl_error(TL_EINVAL, "tl_estimator_set_steps: est is NULL");
    if (train_steps >= 0 && max_steps >= 0)
        return tl_error(TL_EINVAL, "Can not provide both steps and max_steps.");
    if (train_steps == 0)
        return tl_error(TL_EINVAL, "Must specify steps > 0, given: 0");
    if (max_steps == 0)
        return tl_error(TL_EINVAL, "Must specify max_steps > 0, given: 0");
    if (eval_steps == 0)
        return tl_error(TL_EINVAL, "Must specify steps > 0, given: 0");
    est->rc.train_steps = (tl_opt_int){train_steps > 0, train_steps > 0 ? train_steps : 0};
    est->rc.max_steps = (tl_opt_int){max_steps > 0, max_steps > 0 ? max_steps : 0};
    est->rc.eval_steps = (tl_opt_int){eval_steps > 0, eval_steps > 0 ? eval_steps : 0};
    return TL_OK;
}

/* §3.1's NaN checks at a loop boundary. */
static tl_status nan_check(const tl_estimator *est, double loss)
{
    if (!isfinite(loss))
        return tl_error(TL_EINVAL, "NaN loss during training. (loss %g at step %lld)", loss,
                        (long long)est->global_step);
    for (int i = 0; i < est->vars->n; i++) {
        const tl_var *v = &est->vars->v[i];
        for (int64_t k = 0; k < v->size; k++)
            if (!isfinite(est->params[v->offset + k]))
                return tl_error(TL_EINVAL, "Gradient for %s is NaN : the variable is not finite at step %lld",
                                v->name, (long long)est->global_step);
    }
    return TL_OK;
}

static double seconds_since(int64_t t0)
{
    return (double)(tl_now_ns() - t0) * 1e-9;
}

/* Flushes the summaries, then saves (CheckpointSaverHook's order: the
 * events of a step are durable no later than its checkpoint), then calls
 * the after_save listener — which may evaluate between two training loops:
 * the replicas' infeed waits of that evaluation are not training's. */
static tl_status checkpoint(tl_estimator *est)
{
    tl_status st = tl_est_summaries_flush(est);
    if (st == TL_OK)
        st = tl_est_save(est);
    if (st != TL_OK || est->model_dir == NULL)
        return st;
    /* Every host past the save before the listener (which may evaluate, on
     * every host): a host whose save failed has told the others. */
    bool any;
    if ((st = tl_est_hosts_any(est, false, &any)) != TL_OK)
        return st;
    est->last_saved_step = est->global_step;
    if (est->opt.after_save == NULL)
        return TL_OK;
    char path[4096];
    if ((st = tl_ckpt_path(est->model_dir, est->global_step, path, sizeof path)) != TL_OK)
        return st;
    int64_t waits[2 * TL_MAX_LISTENER_REPLICAS];
    int R = est->R < TL_MAX_LISTENER_REPLICAS ? est->R : TL_MAX_LISTENER_REPLICAS;
    for (int r = 0; r < R; r++) {
        waits[2 * r] = est->workers[r].wait_ns;
        waits[2 * r + 1] = est->workers[r].start_wait_ns;
    }
    tl_clear_error();
    st = est->opt.after_save(est, est->global_step, path, est->opt.after_save_user);
    for (int r = 0; r < R; r++) {
        est->workers[r].wait_ns = waits[2 * r];
        est->workers[r].start_wait_ns = waits[2 * r + 1];
    }
    return st == TL_OK ? TL_OK : tl_callback_failed(st, "after_save");
}

/* The losses since the previous loss log: their sum over replicas and
 * steps, and the steps (the log's loss_mean). */
typedef struct loss_window {
    double sum;
    int64_t steps;
    tl_train_log last; /* the latest rates */
} loss_window;

/* What happens at one loop boundary after the workers ran steps
 * [loop_start, global_step): host_call, NaN check, logging, summaries. */
static tl_status after_loop(tl_estimator *est, int64_t loop_start, int64_t fires, bool first_loop,
                            tl_log_schedule *logs, loss_window *win, double now, int64_t G, tl_train_result *res)
{
    const tl_outfeed_plan *pl = &est->train.out;
    res->loss = est->workers[0].last_loss;
    double sum = 0;
    for (int r = 0; r < est->R; r++) {
        sum += est->workers[r].last_loss;
        win->sum += est->workers[r].loss_sum;
    }
    win->steps += est->global_step - loop_start;
    res->loss_mean = sum / est->R;
    res->loops++;
    /* §6: fired step k of the loop is loop-local k * every_n; its global
     * step is the post-increment value. */
    /* host_call runs on host 0, with every host's replicas' tensors. */
    tl_status st = tl_est_hosts_merge(est, est->outfeed, (fires * pl->record + 1) / 2);
    for (int64_t k = 0; k < fires && st == TL_OK && est->host == 0; k++)
        st = tl_outfeed_host_call(est, pl, est->outfeed + k * pl->record, loop_start + k * est->host_call_every_n + 1);
    if (st != TL_OK || (st = nan_check(est, res->loss)) != TL_OK)
        return st;
    tl_log_event ev;
    tl_log_schedule_after_loop(logs, est->global_step, now, &ev);
    double rate = ev.log_rate && ev.rate_secs > 0 ? (double)ev.rate_steps / ev.rate_secs : 0;
    if ((ev.log_loss || ev.log_rate) && est->host == 0) {
        tl_train_log *lg = &win->last;
        lg->step = est->global_step;
        lg->log_loss = ev.log_loss;
        lg->log_rate = ev.log_rate;
        lg->loss = res->loss;
        if (ev.log_rate) {
            lg->has_rate = true;
            lg->steps_per_sec = rate;
            lg->examples_per_sec = rate * (double)G;
        }
        if (ev.log_loss) {
            lg->loss_steps = win->steps;
            lg->loss_mean = win->steps > 0 ? win->sum / ((double)win->steps * est->R) : res->loss;
            win->sum = 0;
            win->steps = 0;
        }
        if (est->opt.on_log != NULL) {
            est->opt.on_log(lg, est->opt.log_user);
        } else {
            if (ev.log_loss)
                tl_log(TL_LOG_INFO, "loss = %g, step = %lld (%g over the last %lld steps)", res->loss,
                       (long long)est->global_step, lg->loss_mean, (long long)lg->loss_steps);
            if (ev.log_rate)
                tl_log(TL_LOG_INFO, "global_step/sec: %g, examples/sec: %g", rate, rate * (double)G);
        }
    }
    return tl_est_summaries_after_loop(est, loop_start, first_loop, res->loss, ev.log_rate ? rate : -1,
                                       ev.log_rate ? rate * (double)G : -1);
}

/* Every host starts from the same step: each restored from model_dir,
 * which must be one directory that they all see (host 0 writes it). */
static tl_status same_start(tl_estimator *est)
{
    int64_t step = est->global_step;
    tl_status st = tl_est_hosts_bcast(est, &step, 1);
    if (st == TL_OK && step != est->global_step)
        return tl_error(TL_EINVAL, "host %d starts at global step %lld, host 0 at %lld: model_dir (%s) must be one "
                                   "directory that every host reads (a shared file system)", est->host,
                        (long long)est->global_step, (long long)step, est->model_dir ? est->model_dir : "none");
    return st;
}

/* The shape of one example of in's training input: probed from a
 * throw-away dataset before the model is traced, the traced one after. */
static tl_status input_prepare(tl_estimator *est, tl_mode mode, const tl_input *in)
{
    if (in == NULL || in->input_fn == NULL)
        return tl_error(TL_EINVAL, "tl_input.input_fn is required");
    if (in->num_feature_keys < 0 || (in->num_feature_keys > 0 && in->feature_keys == NULL))
        return tl_error(TL_EINVAL, "tl_input.num_feature_keys is %d with feature_keys %s", in->num_feature_keys,
                        in->feature_keys ? "set" : "NULL");
    if (est->started > 0 || est->broken != TL_OK)
        return tl_est_prepare_shape(est, est->frank, est->fshape);
    int frank;
    int64_t fshape[TL_MAX_RANK];
    tl_status st = tl_infeed_input_shape(est, mode, in, &frank, fshape);
    return st != TL_OK ? st : tl_est_prepare_shape(est, frank, fshape);
}

static void clear_waits(tl_estimator *est)
{
    for (int r = 0; r < est->R; r++)
        est->workers[r].wait_ns = est->workers[r].start_wait_ns = 0;
}

double tl_est_wait_seconds(const tl_estimator *est, double *start)
{
    double sum = 0, first = 0;
    for (int r = 0; r < est->R; r++) {
        sum += (double)est->workers[r].wait_ns;
        first += (double)est->workers[r].start_wait_ns;
    }
    *start = first * 1e-9 / est->R;
    return sum * 1e-9 / est->R;
}

/* Trains on data (with epochs > 0 passes of it) or in's datasets. */
static tl_status train_run(tl_estimator *est, const tl_labeled_data *data, int64_t epochs, const tl_input *in,
                            tl_train_result *res)
{
    memset(res, 0, sizeof *res);
    const tl_run_config *rc = &est->rc;
    bool ends = data != NULL ? epochs > 0 : in->finite;
    /* Errors every host meets alike end no other host's call. */
    if (rc->use_tpu && !rc->train_steps.set && !rc->max_steps.set && !ends)
        return tl_est_hosts_same(est, tl_error(TL_EINVAL, "For TPU training, one of `steps` or `max_steps` must be "
                                                          "set. Cannot be both `None`. (set train_steps or "
                                                          "max_steps, or epochs for an input that ends)"));
    if (epochs < 0)
        return tl_est_hosts_same(est, tl_error(TL_EINVAL, "epochs must be >= 0 (0: without end), got %lld",
                                               (long long)epochs));
    tl_status st = tl_host_call_check_every_n(rc->tpu.experimental_host_call_every_n_steps);
    if (st != TL_OK)
        return tl_est_hosts_same(est, st);
    tl_ckpt_schedule ck;
    if ((st = tl_ckpt_schedule_init(&ck, rc->save_checkpoints_steps, rc->save_checkpoints_secs)) != TL_OK)
        return tl_est_hosts_same(est, st);
    if ((st = data != NULL ? tl_est_prepare(est, data) : input_prepare(est, TL_MODE_TRAIN, in)) != TL_OK)
        return st;
    /* Examples per step, all replicas: BROADCAST's replicas share one batch. */
    int64_t G = est->infeed.plan[TL_MODE_TRAIN]->global_batch_size;
    if (data != NULL && data->num_examples < G)
        return tl_error(TL_EINVAL, "the training data has %lld examples, fewer than one batch of %lld",
                        (long long)data->num_examples, (long long)G);
    est->data = data;
    est->steps_per_epoch = data != NULL ? data->num_examples / G : 0;
    /* Restore (or initialise and warm-start) before planning: train_steps
     * count from the restored step, max_steps is absolute (T21, T22). */
    if ((st = tl_est_train_begin(est)) != TL_OK || (st = same_start(est)) != TL_OK)
        return st;
    /* The last step: train_steps from here, max_steps, the end of the
     * in-memory epochs, or (an input that ends) when the input says. */
    tl_opt_int steps = rc->train_steps, max_steps = rc->max_steps;
    int64_t input_end = data != NULL && epochs > 0 ? epochs * est->steps_per_epoch : INT64_MAX;
    if (input_end != INT64_MAX || (!steps.set && !max_steps.set)) {
        int64_t final = steps.set ? (steps.value > INT64_MAX - est->global_step ? INT64_MAX
                                                                                 : est->global_step + steps.value)
                        : max_steps.set ? max_steps.value
                                        : INT64_MAX;
        if (input_end <= final && est->global_step >= input_end) { /* read to its end already */
            res->end_of_input = true;
            res->global_step = est->global_step;
            tl_log(TL_LOG_INFO, "the input ended at step %lld: nothing to train", (long long)input_end);
            return TL_OK;
        }
        steps.set = false;
        max_steps = (tl_opt_int){true, final < input_end ? final : input_end};
    }
    tl_train_schedule *sched;
    if ((st = tl_train_schedule_create(rc->tpu.iterations_per_loop, steps, max_steps, est->global_step, NULL,
                                       &sched)) != TL_OK)
        return st;
    if (tl_train_schedule_skipped(sched)) { /* T23: no loop, no checkpoint */
        tl_log(TL_LOG_INFO, "%s", TL_TRAIN_SKIP_MESSAGE);
        tl_train_schedule_destroy(sched);
        res->skipped = true;
        res->global_step = est->global_step;
        return TL_OK;
    }
    if (!ck.enabled && !est->bypass_logged && est->model_dir != NULL) {
        tl_log(TL_LOG_INFO, "Bypassing TPUEstimator hook");
        est->bypass_logged = true;
    }
    if ((st = tl_est_summaries_open(est)) != TL_OK) {
        tl_train_schedule_destroy(sched);
        return st;
    }
    est->host_call_every_n = rc->tpu.experimental_host_call_every_n_steps;
    if (in != NULL && (st = tl_infeed_open_datasets(est, TL_MODE_TRAIN, in)) == TL_OK)
        st = tl_est_restore_input(est);
    if (st == TL_OK)
        st = tl_infeed_start(est, CMD_TRAIN, data, est->global_step,
                             tl_train_schedule_final_step(sched) - est->global_step);
    if (st != TL_OK) {
        tl_infeed_close_datasets(est, TL_MODE_TRAIN);
        tl_train_schedule_destroy(sched);
        return st;
    }
    clear_waits(est);
    tl_log_schedule logs;
    tl_log_schedule_init(&logs, rc->tpu.iterations_per_loop, rc->log_step_count_steps);
    loss_window win = {0};
    int64_t t0 = tl_now_ns(), start_step = est->global_step;
    /* CheckpointSaverHook saves the restored (or initial) state first. */
    est->last_saved_step = -1;
    if (tl_ckpt_schedule_at_start(&ck, est->global_step, 0.0))
        st = checkpoint(est);
    int64_t n = st == TL_OK ? tl_train_schedule_next(sched) : 0;
    const tl_outfeed_plan *pl = &est->train.out;
    while (n > 0) {
        /* A loop boundary: where a requested stop takes effect. */
        bool stop = atomic_exchange(&est->stop_requested, 0);
        if ((st = tl_est_hosts_any(est, stop, &stop)) != TL_OK)
            break;
        if (stop) {
            res->stopped = true;
            tl_log(TL_LOG_INFO, "Stop requested: stopping at step %lld", (long long)est->global_step);
            break;
        }
        int64_t tl0 = tl_now_ns();
        int64_t fires = pl->record > 0 ? tl_host_call_count(n, est->host_call_every_n) : 0;
        if ((st = tl_outfeed_reserve(est, fires * pl->record)) != TL_OK)
            break;
        if (est->H > 1 && fires * pl->record > 0) /* merged after the loop: zeros where other hosts write */
            memset(est->outfeed, 0, (size_t)(fires * pl->record + 1) / 2 * 2 * sizeof *est->outfeed);
        int64_t loop_start = est->global_step;
        tl_infeed_allow(est, loop_start + n);
        if ((st = tl_est_device_loop(est, CMD_TRAIN, loop_start, n)) != TL_OK)
            break;
        /* The runtime advances the global step once per device step; a loop
         * that met the end of the input ran fewer (every replica the same). */
        int64_t ran = est->workers[0].steps_run;
        est->global_step += ran;
        if (est->workers[0].ended) {
            res->end_of_input = true;
            tl_log(TL_LOG_INFO, "the input ended at step %lld (Estimator's OutOfRange): training stops",
                   (long long)est->global_step);
            fires = pl->record > 0 ? tl_host_call_count(ran, est->host_call_every_n) : 0;
            if (ran > 0)
                st = after_loop(est, loop_start, fires, res->loops == 0, &logs, &win, seconds_since(t0), G, res);
            break;
        }
        double elapsed = seconds_since(tl0);
        if ((st = after_loop(est, loop_start, fires, res->loops == 0, &logs, &win, seconds_since(t0), G, res)) != TL_OK)
            break;
        if ((st = tl_train_schedule_after_loop(sched, est->global_step, elapsed, &n)) != TL_OK)
            break;
        /* The schedule's saves, and options.save_every_n_steps' beside them
         * (which leave the schedule's cadence as it is). */
        bool due = tl_ckpt_schedule_after_loop(&ck, est->global_step, seconds_since(t0));
        int64_t every = est->opt.save_every_n_steps;
        if (!due && every > 0 && est->model_dir != NULL && est->global_step != est->last_saved_step)
            due = est->last_saved_step < 0 || est->global_step - est->last_saved_step >= every;
        /* By host 0's clock: every host runs the same loops and saves. */
        int64_t next[2] = {n, due};
        if ((st = tl_est_hosts_bcast(est, next, 2)) != TL_OK)
            break;
        n = next[0];
        due = next[1] != 0;
        if (due && (st = checkpoint(est)) != TL_OK)
            break;
        if (est->steps_per_epoch > 0 && input_end != INT64_MAX && est->global_step >= input_end)
            res->end_of_input = true;
    }
    tl_status ist = tl_infeed_stop(est);
    if (st == TL_OK)
        st = ist;
    tl_train_schedule_destroy(sched);
    res->infeed_wait_seconds = tl_est_wait_seconds(est, &res->infeed_start_seconds);
    /* The end: a checkpoint unless the last step was just saved — also
     * without a checkpoint hook when a stop was requested (the graceful-
     * shutdown save). Not after an error: TensorFlow's hooks do not end
     * then, and a NaN state must never be saved. */
    int64_t at_end = st == TL_OK && est->last_saved_step != est->global_step &&
                     tl_ckpt_schedule_at_end(&ck, est->global_step, seconds_since(t0), res->stopped);
    if (st == TL_OK)
        st = tl_est_hosts_bcast(est, &at_end, 1);
    if (st == TL_OK && at_end)
        st = checkpoint(est);
    tl_infeed_close_datasets(est, TL_MODE_TRAIN); /* after the last checkpoint saved their positions */
    tl_status fst = tl_est_summaries_flush(est);
    if (st == TL_OK)
        st = fst;
    /* A request that came during the last loop is met by the end itself. */
    atomic_store(&est->stop_requested, 0);
    res->global_step = est->global_step;
    res->seconds = seconds_since(t0);
    res->examples_per_sec = res->seconds > 0 ? (double)(est->global_step - start_step) * (double)G / res->seconds : 0;
    if (st == TL_OK && res->loops > 0 && est->host == 0)
        tl_log(TL_LOG_INFO, "Loss for final step: %g.", res->loss);
    return st;
}

/* An error on one host ends the call on every host (hosts.c). */
static tl_status train_impl(tl_estimator *est, const tl_labeled_data *data, int64_t epochs, const tl_input *in,
                            tl_train_result *res)
{
    est->agree_end = est->H > 1 && in != NULL;
    return tl_est_hosts_fail(est, train_run(est, data, epochs, in, res));
}

tl_status tl_estimator_train(tl_estimator *est, const tl_labeled_data *data, tl_train_result *res)
{
    if (data == NULL) {
        memset(res, 0, sizeof *res);
        return tl_error(TL_EINVAL, "tl_estimator_train: data is NULL");
    }
    return train_impl(est, data, 0, NULL, res);
}

tl_status tl_estimator_train_epochs(tl_estimator *est, const tl_labeled_data *data, int64_t epochs,
                                    tl_train_result *res)
{
    if (data == NULL) {
        memset(res, 0, sizeof *res);
        return tl_error(TL_EINVAL, "tl_estimator_train_epochs: data is NULL");
    }
    return train_impl(est, data, epochs, NULL, res);
}

tl_status tl_estimator_train_input(tl_estimator *est, const tl_input *in, tl_train_result *res)
{
    if (in == NULL) {
        memset(res, 0, sizeof *res);
        return tl_error(TL_EINVAL, "tl_estimator_train_input: in is NULL");
    }
    return train_impl(est, NULL, 0, in, res);
}

tl_status tl_est_input_prepare(tl_estimator *est, tl_mode mode, const tl_input *in)
{
    return input_prepare(est, mode, in);
}

/* trainer.c — the estimator: traced programs, one worker thread per replica,
 * device loops of n steps between host visits and the deterministic
 * reduce-and-update of data-parallel training (tpuloop/estimator.h). The
 * host loops are train_loop.c (train) and eval_loop.c (evaluate, predict);
 * the input thread is infeed.c, the outfeed of host_call and eval_metrics
 * tensors host_call.c, model_dir's checkpoints and summaries checkpoint.c
 * and summaries.c. */
#define _GNU_SOURCE
#include <math.h>
#include <sha2.h>
#include <stdio.h>
#include <string.h>

#include "../config/config_int.h"
#include "../kernels/kernels.h"
#include "estimator_int.h"
#include "schedule.h"

/* ---- workers ------------------------------------------------------------- */

static void worker_fail(tl_worker *w, tl_status st)
{
    /* A closed infeed is the input's error, which is what the other hosts'
     * replicas should hear of. */
    tl_status ist = tl_infeed_failed(w->est);
    if (ist != TL_OK)
        snprintf(w->err, sizeof w->err, "%s", tl_last_error());
    else
        snprintf(w->err, sizeof w->err, "replica %d: %s", w->rank, tl_last_error());
    w->status = ist != TL_OK ? ist : st;
    /* Replicas waiting in a collective or for a batch stop too; the host
     * reports this root cause before their "aborted" / "infeed closed". */
    tl_comm_abort(w->est->comm, w->status, w->err);
    tl_infeed_abort(w->est);
    if (w->est->C > 1)
        tl_barrier_break(&w->est->rbar[w->rank]); /* its other cores stop too */
}

/* What a step needs to know of its batch once the buffer is given back. */
typedef struct tl_batch_info {
    int64_t real_rows;
    bool stopping;
    bool end;          /* the input ended: no step runs */
} tl_batch_info;

/* Copies batch b into the program's inputs. */
static void fill_inputs(const tl_program *p, tl_t features, tl_t labels, tl_exec *x, const tl_feed_batch *b)
{
    /* The replica's batch, or with several cores this core's tile of it. */
    tl_team_copy(x->team, tl_exec_value(p, x, features), b->features,
                 (size_t)p->g->nodes[features].size * sizeof(float));
    if (labels != TL_T_INVALID)
        memcpy(tl_exec_value(p, x, labels), b->labels, (size_t)p->g->nodes[labels].size * sizeof(int32_t));
}

/* Moves the next batch, which must be for step, from the infeed into the
 * program's inputs, and its embedding ids into the engine (mode's). */
static tl_status feed(tl_worker *w, const tl_mode_prog *m, tl_exec *x, int64_t step, tl_mode mode,
                      tl_batch_info *info)
{
    tl_estimator *est = w->est;
    tl_feed_batch *b;
    /* The first batch of a call waits for the input to start (files
     * opened, a shuffle buffer filled); every later wait means the input
     * fell behind. Counted apart. */
    int64_t *waited = step == est->infeed.first ? &w->start_wait_ns : &w->wait_ns;
    tl_status st = est->relay[mode] ? tl_est_relay_pop(w, mode, step, &b, waited)
                                    : tl_infeed_pop(est, w->rank, step, w->team, &b, waited);
    if (st != TL_OK)
        return st;
    info->end = b->end;
    if (!b->end) {
        fill_inputs(m->p, m->features, m->labels, x, b);
        /* The ids are enqueued straight from the buffer, as the infeed wrote
         * them: typed, never a float among the features. (The CPU path's
         * evaluation, whose short batches run apart, has no engine.) */
        st = tl_est_emb_enqueue(w, m, b->ids, mode, step);
    }
    info->real_rows = b->real_rows;
    info->stopping = b->stopping;
    if (b != &w->relay_batch)
        tl_infeed_release(est, w->rank, b);
    return st;
}

/* Runs the optimizer on the parameters [off, off + len) of the slab, whose
 * summed gradient is grad[0, len), in runs between state variables; a state
 * variable's entries are its update summed over the replicas (each scaled by
 * 1/R, so the sum is their mean) and are added as they are. */
static void optimizer_runs(const tl_estimator *est, const tl_optimizer_step *os, int64_t off, int64_t len,
                           const float *grad)
{
    if (len <= 0)
        return;
    float *slots[TL_OPTIM_MAX_SLOTS];
    for (int s = 0; s < est->nslots; s++)
        slots[s] = est->slots[s] + off;
    tl_optimizer_apply(&est->opt.optimizer, os, est->params + off, grad, slots, len);
}

static void apply_chunk(const tl_estimator *est, const tl_optimizer_step *os, int64_t off, int64_t len,
                        const float *grad)
{
    int64_t pos = off, end = off + len;
    for (int k = 0; k < est->vars->n && pos < end; k++) { /* by_name is slab order */
        const tl_var *v = &est->vars->v[est->vars->by_name[k]];
        int64_t lo = v->offset > pos ? v->offset : pos, hi = v->offset + v->size < end ? v->offset + v->size : end;
        if (v->trainable || lo >= hi)
            continue;
        optimizer_runs(est, os, pos, lo - pos, grad + (pos - off));
        for (int64_t q = lo; q < hi; q++)
            est->params[q] += grad[q - off];
        pos = hi;
    }
    optimizer_runs(est, os, pos, end - pos, grad + (pos - off));
}

/* The optimizer on [off, off + len), split over the device's intra-op
 * threads: every update is element by element (and so is a state
 * variable's add), so the pieces give the bits of one call. */
typedef struct apply_job {
    const tl_estimator *est;
    const tl_optimizer_step *os;
    int64_t off, len;
    const float *grad;
} apply_job;

static void apply_piece(void *ctx, int part, int nparts)
{
    const apply_job *j = ctx;
    int64_t lo, hi;
    tl_team_range(j->len, 16, part, nparts, &lo, &hi);
    if (hi > lo)
        apply_chunk(j->est, j->os, j->off + lo, hi - lo, j->grad + lo);
}

/* Fewer parameters than this are updated on one thread: a hand-off costs
 * about what updating this many does. */
#define TL_APPLY_SPLIT_MIN 16384

static void apply_params(tl_worker *w, const tl_optimizer_step *os, const float *grad)
{
    apply_job j = {w->est, os, w->chunk_off, w->chunk_len, grad};
    if (w->chunk_len < TL_APPLY_SPLIT_MIN)
        apply_chunk(w->est, os, w->chunk_off, w->chunk_len, grad);
    else
        tl_team_run(w->team, apply_piece, &j);
}

/* The intra-op threads of the device of (replica, core): NULL for one. Its
 * helpers take the cores the host's devices leave (tl_topology_thread_cpu)
 * and spin between jobs only when every thread of the host has a core. */
static tl_status make_team(const tl_estimator *est, int replica, int core, tl_team **out)
{
    int T = tl_topology_intra_op_threads(est->topo);
    *out = NULL;
    if (T == 1)
        return TL_OK;
    int cpus[256];
    int dev = tl_topology_device_of(est->topo, replica, core);
    for (int j = 1; j < T && j <= 256; j++)
        cpus[j - 1] = tl_topology_thread_cpu(est->topo, dev, j);
    int64_t spin = (int64_t)est->Rl * est->C * T <= tl_available_cpus() ? 200000 : 0;
    return tl_team_create(T, cpus, spin, out);
}

/* ---- a replica of several cores ----------------------------------------- */

static tl_follower *follower_of(const tl_estimator *est, int replica, int core)
{
    return &est->followers[(replica - est->first) * (est->C - 1) + core - 1]; /* this host's replicas' */
}

/* Meets the replica's other cores at its barrier. */
static tl_status replica_meet(tl_estimator *est, int replica)
{
    if (tl_barrier_wait(&est->rbar[replica]) != TL_WAIT_OK)
        return tl_error(TL_ERUNTIME, "replica %d: another core of the replica failed", replica);
    return TL_OK;
}

/* The replica's gradient in core 0's slab: a variable read on tiles gets
 * the other cores' partials added in core order; one read whole (the same
 * on every core) is core 0's (graph/partition.h). */
static void replica_grad(tl_worker *w)
{
    const tl_estimator *est = w->est;
    const float *grads[TL_SPMD_MAX_CORES];
    grads[0] = w->train_x.param_grad;
    for (int q = 1; q < est->C; q++)
        grads[q] = follower_of(est, w->rank, q)->x[TL_MODE_TRAIN].param_grad;
    tl_partition_add_partials(&est->train.part[0], est->vars, est->C, grads, w->train_x.param_grad);
}

static void follower_fail(tl_follower *f, tl_status st)
{
    tl_estimator *est = f->est;
    snprintf(f->err, sizeof f->err, "replica %d, core %d: %s", f->replica, f->core, tl_last_error());
    f->status = st;
    tl_comm_abort(est->comm, st, f->err);
    tl_infeed_abort(est);
    tl_barrier_break(&est->rbar[f->replica]);
}

/* The device loop of core f->core of its replica: its tile of each batch
 * through its program, in step with the replica's other cores, which meet
 * in the program's collectives and, when training, where core 0 reads the
 * gradients and where it has updated the parameters (train_step). */
static tl_status follower_loop(tl_follower *f)
{
    tl_estimator *est = f->est;
    tl_mode mode = est->cmd == CMD_TRAIN ? TL_MODE_TRAIN : est->cmd == CMD_EVAL ? TL_MODE_EVAL : TL_MODE_PREDICT;
    const tl_mode_prog *m = mode == TL_MODE_TRAIN ? &est->train : mode == TL_MODE_EVAL ? &est->eval : &est->predict;
    /* The CPU path of evaluation runs the model whole on replica 0's
     * worker, fed alone (feed.h): the other cores sit it out. */
    if (mode == TL_MODE_EVAL && est->eval_cpu)
        return TL_OK;
    const tl_program *p = m->cp[f->core];
    const tl_partition *pt = &m->part[f->core];
    tl_exec *x = &f->x[mode];
    tl_t features = pt->map[m->src_features], labels = m->src_labels >= 0 ? pt->map[m->src_labels] : TL_T_INVALID;
    for (int64_t i = 0; i < est->loop_n; i++) {
        int64_t step = est->loop_start + i, waited = 0;
        tl_feed_batch *b;
        tl_status st = tl_infeed_pop_core(est, f->replica, f->core, step, f->team, &b, &waited);
        if (st != TL_OK)
            return st;
        bool end = b->end, stop = b->stopping;
        if (!end)
            fill_inputs(p, features, labels, x, b);
        tl_infeed_release_core(est, f->replica, f->core, b);
        if (end)
            return TL_OK; /* the input ended: core 0 stops at this step too */
        x->step = step;
        st = tl_program_forward(p, x);
        if (st == TL_OK && mode == TL_MODE_TRAIN) {
            st = tl_program_backward(p, x);
            if (st == TL_OK)
                st = replica_meet(est, f->replica); /* the gradients are ready */
            if (st == TL_OK)
                st = replica_meet(est, f->replica); /* read, and the parameters updated */
        }
        if (st != TL_OK || stop)
            return st; /* prediction ends with the stop batch, on every core */
    }
    return TL_OK;
}

static void *follower_main(void *arg)
{
    tl_follower *f = arg;
    tl_estimator *est = f->est;
    const tl_device *dev =
        tl_devices_get(tl_topology_devices(est->topo), tl_topology_device_of(est->topo, f->replica, f->core));
    if (dev != NULL && dev->cpu >= 0 && tl_thread_pin_self(dev->cpu) != TL_OK)
        tl_log(TL_LOG_DEBUG, "replica %d core %d runs unpinned: %s", f->replica, f->core, tl_last_error());
    tl_fp_set_kernel_env();
    for (;;) {
        if (tl_barrier_wait(&est->go) != TL_WAIT_OK || est->cmd == CMD_STOP)
            return NULL;
        f->status = TL_OK;
        tl_status st = follower_loop(f);
        if (st != TL_OK)
            follower_fail(f, st);
        if (tl_barrier_wait(&est->done) != TL_WAIT_OK)
            return NULL;
    }
}

/* One training step; *end when the input ended before it (nothing ran). */
static tl_status train_step(tl_worker *w, int64_t step, bool *end)
{
    tl_estimator *est = w->est;
    const tl_program *p = est->train.p;
    tl_exec *x = &w->train_x;
    tl_batch_info info;
    tl_status st = feed(w, &est->train, x, step, TL_MODE_TRAIN, &info);
    if (st == TL_OK && est->agree_end) {
        /* Each host reads its own invocations: the step where any of them
         * ended ends training on every host, as one feed ends it where its
         * first source ends. */
        int64_t ended = info.end;
        st = tl_comm_all_reduce(est->comm, w->rank, &ended, &ended, 1, TL_COMM_I64, TL_REDUCE_SUM);
        info.end = ended > 0;
    }
    if (st != TL_OK || (*end = info.end))
        return st;
    x->step = step;
    if ((st = tl_est_emb_forward(w, &est->train, x, TL_MODE_TRAIN)) != TL_OK)
        return st;
    st = tl_program_forward(p, x);
    if (st == TL_OK)
        st = tl_program_backward(p, x);
    /* Several cores: once each has its gradient, the replica's is core 0's
     * with the others' partials added. */
    if (st == TL_OK && est->C > 1 && (st = replica_meet(est, w->rank)) == TL_OK)
        replica_grad(w);
    /* The embedding gradients go before the dense reduce-scatter: no
     * replica leaves it before every replica has sent (emb_steps.c). */
    if (st == TL_OK)
        st = tl_est_emb_backward(w, &est->train, x, step);
    if (st != TL_OK)
        return st;
    w->last_loss = *tl_exec_value(p, x, est->train.p->loss);
    w->loss_sum += w->last_loss;
    /* Rank r receives chunk r of the gradient summed over ranks 0..R-1 in
     * order (MEAN was applied by scaling the loss by 1/R, as
     * CrossShardOptimizer does), then updates that chunk of the parameters. */
    const float *grad = x->param_grad; /* one replica: its gradient is the sum */
    if (est->H > 1) {
        /* Over processes every host needs every chunk of the parameters:
         * the whole sum (the same bits as the reduce-scatter's chunks),
         * and each local replica updates its chunk of the host's copy. */
        st = tl_comm_all_reduce(est->comm, w->rank, x->param_grad, x->param_grad, est->vars->total, TL_COMM_F32,
                                TL_REDUCE_SUM);
        if (st != TL_OK)
            return st;
        grad = x->param_grad + w->chunk_off;
    } else if (est->R > 1) {
        st = tl_comm_reduce_scatter(est->comm, w->rank, x->param_grad, w->chunk_grad, est->vars->total, TL_COMM_F32,
                                    TL_REDUCE_SUM);
        if (st != TL_OK)
            return st;
        grad = w->chunk_grad;
    }
    tl_optimizer_step os;
    if ((st = tl_optimizer_step_prepare(&est->opt.optimizer, step, &os)) != TL_OK)
        return st;
    if (w->chunk_len > 0)
        apply_params(w, &os, grad);
    if ((st = tl_est_emb_apply(w)) != TL_OK)
        return st;
    /* Nobody reads the parameters of step + 1 before every chunk is updated
     * (nor a core of the replica its gradient of step + 1 before core 0
     * has read this one's). */
    if ((st = tl_comm_barrier(est->comm, w->rank)) != TL_OK)
        return st;
    if (est->C > 1 && (st = replica_meet(est, w->rank)) != TL_OK)
        return st;
    /* The outfeed follows the train_op (§6); the host reads it after the
     * loop, past the done barrier. A variable among the tensors shows its
     * updated value: no replica updates again before this one joins the
     * next step's reduce-scatter. */
    const tl_outfeed_plan *pl = &est->train.out;
    int64_t i = step - est->loop_start;
    if (pl->record > 0 && tl_host_call_fires(i, est->host_call_every_n))
        tl_outfeed_write(pl, p, x, w->rank, est->outfeed + (i / est->host_call_every_n) * pl->record);
    return TL_OK;
}

/* The evaluation's accumulators after m ran on x: the loss, the outfeed
 * record (at loop-local step k), the scored examples of a binary model and
 * the correct ones. */
static void eval_score(tl_worker *w, const tl_mode_prog *m, tl_exec *x, float *record)
{
    const int32_t *y = (const int32_t *)tl_exec_value(m->p, x, m->labels);
    w->eval_loss_sum += *tl_exec_value(m->p, x, m->p->loss);
    /* Eval host_calls and eval_metrics outfeed every step (§6, §7). */
    if (m->out.record > 0)
        tl_outfeed_write(&m->out, m->p, x, w->rank, record);
    if (m->logits == TL_T_INVALID)
        return;
    const float *z = tl_exec_value(m->p, x, m->logits);
    int64_t C = m->g->nodes[m->logits].shape[1];
    if (C <= 2) {
        TL_ASSERT(w->scored_len + m->batch <= w->scored_cap);
        for (int64_t i = 0; i < m->batch; i++) {
            /* softmax(z)[1] = 1 / (1 + exp(z0 - z1)), or one logit's
             * sigmoid(z) = 1 / (1 + exp(-z)), in doubles. */
            tl_scored *e = &w->scored[w->scored_len++];
            double d = C == 2 ? (double)z[i * C] - (double)z[i * C + 1] : -(double)z[i];
            e->score = 1.0 / (1.0 + exp(d));
            e->label = y[i];
        }
    }
    if (C == 1) {
        for (int64_t i = 0; i < m->batch; i++)
            w->eval_correct += (z[i] > 0) == (y[i] == 1);
        return;
    }
    for (int64_t i = 0; i < m->batch; i++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (z[i * C + c] > z[i * C + best])
                best = c;
        w->eval_correct += best == y[i];
    }
}

/* Evaluation step `step` (counted from the call's first). On the CPU path
 * (one replica, batches that may end or come short) a batch marked end
 * ends the loop, and a short one is kept for the host, which evaluates it
 * at its own size (tl_est_eval_partial): both set w->ended. */
static tl_status eval_step(tl_worker *w, int64_t step)
{
    tl_estimator *est = w->est;
    const tl_mode_prog *m = &est->eval;
    tl_exec *x = &w->eval_x;
    tl_batch_info info;
    tl_status st = feed(w, m, x, step, TL_MODE_EVAL, &info);
    if (st != TL_OK || (w->ended = info.end))
        return st;
    if (info.real_rows < m->batch) {
        int64_t r = info.real_rows;
        memcpy(est->part_features, tl_exec_value(m->p, x, m->features), (size_t)(r * est->D) * sizeof(float));
        memcpy(est->part_labels, tl_exec_value(m->p, x, m->labels), (size_t)r * sizeof(int32_t));
        est->part_rows = r;
        w->ended = true;
        return TL_OK;
    }
    x->step = step; /* eval step: errors name it */
    if ((st = tl_est_emb_forward(w, m, x, TL_MODE_EVAL)) != TL_OK)
        return st;
    if ((st = tl_program_forward(m->p, x)) != TL_OK)
        return st;
    eval_score(w, m, x, est->outfeed + (step - est->loop_start) * m->out.record);
    return TL_OK;
}

/* §8: replica rank's predictions of batch `step` — its first real_rows
 * rows; padding rows follow them — go to the loop's prediction area at
 * (loop-local step, rank), with their count; the stop batch's outputs are
 * dropped (count 0). *stop: this was the stop batch. */
static tl_status predict_step(tl_worker *w, int64_t step, bool *stop)
{
    tl_estimator *est = w->est;
    const tl_mode_prog *m = &est->predict;
    tl_exec *x = &w->predict_x;
    tl_batch_info info;
    tl_status st = feed(w, m, x, step, TL_MODE_PREDICT, &info);
    if (st != TL_OK)
        return st;
    *stop = info.stopping;
    x->step = step;
    if ((st = tl_est_emb_forward(w, m, x, TL_MODE_PREDICT)) != TL_OK || (st = tl_program_forward(m->p, x)) != TL_OK)
        return st;
    int64_t slot = (step - est->loop_start) * est->R + w->rank;
    /* BROADCAST: every replica predicted the same rows; replica 0's count. */
    bool bc = est->infeed.plan[TL_MODE_PREDICT]->input_mode == TL_BROADCAST;
    int64_t rows = info.stopping || (bc && w->rank != 0) ? 0 : info.real_rows;
    est->pred_rows[slot] = rows;
    const float *out = tl_exec_value(m->p, x, m->predictions);
    memcpy(est->pred_area + slot * m->batch * est->pred_width, out, (size_t)(rows * est->pred_width) * sizeof(float));
    return TL_OK;
}

/* Prediction's device loop: up to loop_n steps, ending early at the stop
 * batch (`while not stop`, on replica 0's flag, which every replica's batch
 * carries, so all stop on the same batch). */
static void predict_loop(tl_worker *w)
{
    tl_estimator *est = w->est;
    bool stop = false;
    w->pred_stopped = false;
    for (int64_t i = 0; i < est->loop_n && !stop; i++) {
        tl_status st = predict_step(w, est->loop_start + i, &stop);
        if (st != TL_OK) {
            worker_fail(w, st);
            return;
        }
        w->steps_run++;
    }
    w->pred_stopped = stop;
}

static void *worker_main(void *arg)
{
    tl_worker *w = arg;
    tl_estimator *est = w->est;
    const tl_device *dev = tl_devices_get(tl_topology_devices(est->topo), tl_topology_device_of(est->topo, w->rank, 0));
    if (dev != NULL && dev->cpu >= 0 && tl_thread_pin_self(dev->cpu) != TL_OK)
        tl_log(TL_LOG_DEBUG, "replica %d runs unpinned: %s", w->rank, tl_last_error());
    tl_fp_set_kernel_env(); /* TensorFlow's: denormals flushed (base_int.h) */
    for (;;) {
        if (tl_barrier_wait(&est->go) != TL_WAIT_OK)
            return NULL;
        if (est->cmd == CMD_STOP)
            return NULL;
        w->status = TL_OK;
        w->eval_loss_sum = 0;
        w->eval_correct = 0;
        w->scored_len = 0;
        w->steps_run = 0;
        w->loss_sum = 0;
        w->ended = false;
        if (est->cmd == CMD_PREDICT)
            predict_loop(w);
        /* The CPU path of evaluation runs on replica 0 alone. */
        int64_t n = est->cmd == CMD_EVAL && est->eval_cpu && w->rank > 0 ? 0 : est->loop_n;
        for (int64_t i = 0; est->cmd != CMD_PREDICT && i < n && w->status == TL_OK && !w->ended; i++) {
            tl_status st = est->cmd == CMD_TRAIN ? train_step(w, est->loop_start + i, &w->ended)
                                                 : eval_step(w, est->loop_start + i);
            if (st != TL_OK)
                worker_fail(w, st);
            else if (!w->ended)
                w->steps_run++;
        }
        if (tl_barrier_wait(&est->done) != TL_WAIT_OK)
            return NULL;
    }
}

/* ---- creation ------------------------------------------------------------ */

void tl_estimator_options_init(tl_estimator_options *o)
{
    memset(o, 0, sizeof *o);
    tl_optimizer_config_default(TL_OPTIM_ADAM, &o->optimizer);
    o->optimizer.lr.learning_rate = 1e-3;
}

/* The infeed depth when the options leave it 0. */
#define TL_INFEED_DEPTH_DEFAULT 3

/* Compiles m's graph with the fusions that hide none of the values the
 * runtime reads: the logits, predictions and outfed tensors (the loss is
 * kept by the compiler). */
static tl_status compile_cores(tl_estimator *est, tl_mode_prog *m, tl_t loss, bool backward, const tl_t *keep,
                               int nkeep);

static tl_status compile(tl_estimator *est, tl_mode_prog *m, tl_t loss, bool backward)
{
    tl_t keep[2 + TL_MAX_OUTFEED];
    int nkeep = 0;
    keep[nkeep++] = m->logits;
    keep[nkeep++] = m->predictions;
    for (int k = 0; k < m->out.n_host_call + m->out.n_metric; k++)
        keep[nkeep++] = m->out.t[k].t;
    /* The CPU path of evaluation (eval_on_tpu false) runs the model whole
     * on replica 0's worker, as TensorFlow's plain Estimator does. */
    if (est->C > 1 && !(m->g->mode == TL_MODE_EVAL && est->eval_cpu))
        return compile_cores(est, m, loss, backward, keep, nkeep);
    return tl_program_compile_fused(m->g, loss, backward, keep, nkeep, &m->p);
}

/* Source tensor t as core 0 holds it, whole: the runtime reads it. */
static tl_status whole_on_core0(const tl_partition *pt, tl_t t, const char *what, tl_t *out)
{
    *out = t >= 0 ? pt->map[t] : TL_T_INVALID;
    if (t >= 0 && pt->tiled[t])
        return tl_error(TL_EINVAL, "the %s is split over the cores of a replica (a tile of the features, or a chunk "
                                   "of a split variable's product); the runtime reads it whole, which is not built "
                                   "yet", what);
    return TL_OK;
}

/* A replica of C cores (graph/partition.h): the traced graph partitioned
 * and compiled once per core, core 0's program as the mode's program. */
static tl_status compile_cores(tl_estimator *est, tl_mode_prog *m, tl_t loss, bool backward, const tl_t *keep,
                               int nkeep)
{
    int C = est->C;
    m->part = tl_calloc((size_t)C, sizeof *m->part);
    m->cp = tl_calloc((size_t)C, sizeof *m->cp);
    if (m->part == NULL || m->cp == NULL)
        return tl_error_oom();
    m->src = m->g;
    m->g = NULL;
    const int8_t *split = NULL;
    tl_status st = est->dist != NULL ? tl_est_tp_splits(est, &split) : TL_OK;
    for (int q = 0; q < C && st == TL_OK; q++) {
        tl_partition *pt = &m->part[q];
        tl_t k2[2 + TL_MAX_OUTFEED];
        st = split != NULL ? tl_partition_tensor(m->src, split, C, q, pt)
                           : tl_partition_graph(m->src, m->features, est->grid, q, pt);
        if (st != TL_OK)
            break;
        for (int k = 0; k < nkeep && st == TL_OK; k++)
            st = whole_on_core0(pt, keep[k], k == 0 ? "logits" : k == 1 ? "predictions" : "outfed tensor", &k2[k]);
        if (st == TL_OK)
            st = tl_program_compile_fused(pt->g, loss >= 0 ? pt->map[loss] : TL_T_INVALID, backward, k2, nkeep,
                                          &m->cp[q]);
    }
    if (st != TL_OK)
        return st;
    const tl_partition *p0 = &m->part[0];
    m->g = p0->g;
    m->p = m->cp[0];
    m->src_features = m->features;
    m->src_labels = m->labels;
    m->features = p0->map[m->features];
    m->labels = m->labels >= 0 ? p0->map[m->labels] : TL_T_INVALID;
    m->logits = m->logits >= 0 ? p0->map[m->logits] : TL_T_INVALID;
    m->predictions = m->predictions >= 0 ? p0->map[m->predictions] : TL_T_INVALID;
    for (int k = 0; k < m->out.n_host_call + m->out.n_metric; k++)
        m->out.t[k].t = p0->map[m->out.t[k].t];
    if (p0->gathered > 0 && split == NULL)
        tl_log(TL_LOG_INFO, "%s: %d ops have no rule for tiles: their inputs are gathered whole on every core",
               tl_mode_name(m->src->mode), p0->gathered);
    else if (p0->gathered > 0)
        tl_log(TL_LOG_INFO, "%s: %d split values meet ops that read them whole: gathered whole on every core",
               tl_mode_name(m->src->mode), p0->gathered);
    return TL_OK;
}

/* A mode's graphs and programs (C cores' when partitioned). */
static void mode_free(tl_mode_prog *m, int C)
{
    if (m->part != NULL) {
        for (int q = 0; q < C; q++) {
            if (m->cp != NULL)
                tl_program_destroy(m->cp[q]);
            tl_partition_free(&m->part[q]);
        }
        tl_free(m->part);
        tl_free(m->cp);
        tl_graph_destroy(m->src);
    } else {
        tl_program_destroy(m->p);
        tl_graph_destroy(m->g);
    }
    m->part = NULL;
    m->cp = NULL;
    m->p = NULL;
    m->g = m->src = NULL;
}

/* The TRAIN spec's optimizer (CrossShardOptimizer(opt) in a TensorFlow
 * model_fn) in place of the options': traced before the slots are made and
 * any checkpoint is read, so the update, the slots and their names, and the
 * identity a checkpoint is written and compared with all follow it. */
static tl_status spec_optimizer(tl_estimator *est, const tl_model_spec *spec)
{
    if (tl_optimizer_config_validate(spec->optimizer) != TL_OK)
        return tl_error(TL_EINVAL, "model_fn (train): spec->optimizer: %s", tl_last_error());
    est->opt.optimizer = *spec->optimizer;
    est->opt.reduce_sum = spec->optimizer_reduce_sum;
    return tl_est_identity_refresh(est);
}

/* Traces model_fn for mode at a per-replica batch and compiles it. */
static tl_status trace(tl_estimator *est, tl_mode mode, int64_t batch, const int64_t *fshape, int frank,
                       tl_mode_prog *m)
{
    tl_status st = tl_graph_create(est->vars, mode, &m->g);
    if (st != TL_OK)
        return st;
    int64_t shape[TL_MAX_RANK + 1] = {batch};
    memcpy(shape + 1, fshape, (size_t)frank * sizeof *fshape);
    m->batch = batch;
    m->features = tl_graph_input(m->g, TL_F32, shape, frank + 1);
    m->labels = mode == TL_MODE_PREDICT ? TL_T_INVALID : tl_graph_input(m->g, TL_I32, shape, 1);
    tl_model_args args = {mode, m->features, m->labels, batch, est->rc.params_json, 0};
    tl_model_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.loss = spec.logits = spec.predictions = TL_T_INVALID;
    st = est->opt.model_fn(m->g, &args, &spec, est->opt.user);
    if (st == TL_OK && tl_graph_status(m->g) != TL_OK)
        st = tl_error(tl_graph_status(m->g), "%s", tl_graph_error(m->g));
    if (st != TL_OK)
        return tl_error(st, "model_fn (%s, batch %lld): %s", tl_mode_name(mode), (long long)batch, tl_last_error());
    if (mode == TL_MODE_TRAIN && spec.optimizer != NULL && (st = spec_optimizer(est, &spec)) != TL_OK)
        return st;
    m->logits = spec.logits;
    m->predictions = spec.predictions != TL_T_INVALID ? spec.predictions : spec.logits;
    if (mode == TL_MODE_PREDICT) {
        const tl_node *pr = tl_graph_node(m->g, m->predictions);
        if (pr == NULL || pr->rank < 1 || pr->shape[0] != batch)
            return tl_error(TL_EINVAL, "model_fn (infer) must set spec->predictions (or spec->logits) to a tensor with "
                                       "a static batch dimension of %lld", (long long)batch);
        if ((st = tl_est_emb_plan(est, mode, m)) != TL_OK)
            return st;
        return compile(est, m, TL_T_INVALID, false);
    }
    if ((st = tl_est_emb_plan(est, mode, m)) != TL_OK)
        return st;
    const tl_node *loss = tl_graph_node(m->g, spec.loss);
    if (loss == NULL || loss->rank != 0)
        return tl_error(TL_EINVAL, "model_fn (%s) must set spec->loss to a scalar", tl_mode_name(mode));
    /* EVAL's logits are optional (a model_fn of TensorFlow's has none: its
     * metric_fn computes what it needs); without them there is no accuracy. */
    const tl_node *lg = tl_graph_node(m->g, spec.logits);
    if (mode == TL_MODE_EVAL && spec.logits != TL_T_INVALID &&
        (lg == NULL || lg->rank != 2 || lg->shape[0] != batch || lg->dtype != TL_F32))
        return tl_error(TL_EINVAL, "model_fn (eval) must set spec->logits to a float32 (batch, classes) tensor "
                                   "of batch %lld, or leave it unset", (long long)batch);
    /* The CPU path evaluates on one replica. */
    int R = mode == TL_MODE_EVAL && est->eval_cpu ? 1 : est->R;
    if ((st = tl_outfeed_plan_build(m->g, mode, &spec, &est->opt, R, &m->out)) != TL_OK)
        return st;
    if (mode == TL_MODE_TRAIN && (st = tl_vars_layout(est->vars)) != TL_OK)
        return st;
    return compile(est, m, spec.loss, mode == TL_MODE_TRAIN);
}

static tl_status bind_exec(tl_estimator *est, tl_worker *w, const tl_program *p, tl_exec *x, float **cursor,
                           uint8_t **mcursor)
{
    x->act = *cursor;
    *cursor += p->act_floats;
    x->grad = *cursor;
    *cursor += p->grad_floats;
    x->scratch = *cursor;
    *cursor += p->scratch_floats;
    x->mask = *mcursor;
    *mcursor += p->mask_bytes;
    x->params = est->params;
    x->replica = w->rank;
    x->seed = est->rc.tf_random_seed.set ? (uint64_t)est->rc.tf_random_seed.value : 0;
    x->loss_scale = est->opt.reduce_sum ? 1.0f : 1.0f / (float)est->R;
    x->state_scale = 1.0f / (float)est->R;
    return TL_OK;
}

/* The exec of mode m for core q of replica r, joined to its replica's
 * cores (tl_spmd): its own, in the mode's peers. */
static void join_replica(tl_estimator *est, int m, int r, int q, tl_exec *x, tl_spmd *sp)
{
    est->peers[m][r * est->C + q] = x;
    *sp = (tl_spmd){est->C, q, &est->rbar[r], est->progs[m], &est->peers[m][r * est->C]};
    x->spmd = sp;
}

/* A replica of C > 1 cores: its barrier, and a follower for each core
 * past 0 with buffers for its programs (the workers hold core 0's). */
static tl_status make_followers(tl_estimator *est)
{
    int R = est->R, C = est->C;
    tl_mode_prog *modes[3] = {&est->train, est->have_eval && !est->eval_cpu ? &est->eval : NULL,
                              est->have_predict ? &est->predict : NULL};
    est->rbar = tl_calloc((size_t)R, sizeof *est->rbar);
    est->followers = tl_calloc((size_t)(est->Rl * (C - 1)), sizeof *est->followers);
    if (est->rbar == NULL || est->followers == NULL)
        return tl_error_oom();
    for (int m = 0; m < 3; m++) {
        if (modes[m] == NULL)
            continue;
        est->progs[m] = tl_calloc((size_t)C, sizeof *est->progs[m]);
        est->peers[m] = tl_calloc((size_t)(R * C), sizeof *est->peers[m]);
        if (est->progs[m] == NULL || est->peers[m] == NULL)
            return tl_error_oom();
        for (int q = 0; q < C; q++)
            est->progs[m][q] = modes[m]->cp[q];
    }
    int spin = est->Rl * C <= tl_available_cpus() ? 20000 : 0;
    for (int r = est->first; r < est->first + est->Rl; r++) {
        tl_status st = tl_barrier_init(&est->rbar[r], C, spin);
        if (st != TL_OK)
            return st;
        tl_worker *w = &est->workers[r];
        tl_exec *wx[3] = {&w->train_x, &w->eval_x, &w->predict_x};
        for (int m = 0; m < 3; m++)
            if (modes[m] != NULL)
                join_replica(est, m, r, 0, wx[m], &w->spmd[m]);
        for (int q = 1; q < C; q++) {
            tl_follower *f = follower_of(est, r, q);
            f->est = est;
            f->replica = r;
            f->core = q;
            int64_t floats = est->vars->total + 16, masks = 64;
            for (int m = 0; m < 3; m++)
                if (modes[m] != NULL) {
                    const tl_program *p = modes[m]->cp[q];
                    floats += p->act_floats + p->grad_floats + p->scratch_floats;
                    masks += p->mask_bytes;
                }
            f->bufs = tl_calloc((size_t)floats, sizeof(float));
            f->mask = tl_calloc((size_t)masks, 1);
            if (f->bufs == NULL || f->mask == NULL)
                return tl_error_oom();
            float *cur = f->bufs;
            uint8_t *mcur = f->mask;
            for (int m = 0; m < 3; m++) {
                if (modes[m] == NULL)
                    continue;
                bind_exec(est, w, modes[m]->cp[q], &f->x[m], &cur, &mcur);
                if (m == TL_MODE_TRAIN) {
                    f->x[m].param_grad = cur;
                    cur += est->vars->total;
                }
                join_replica(est, m, r, q, &f->x[m], &f->spmd[m]);
            }
            if ((st = make_team(est, r, q, &f->team)) != TL_OK)
                return st;
            for (int m = 0; m < 3; m++)
                f->x[m].team = f->team;
        }
    }
    return TL_OK;
}

static tl_status make_workers(tl_estimator *est)
{
    int R = est->R;
    est->workers = tl_calloc((size_t)R, sizeof *est->workers);
    if (est->workers == NULL)
        return tl_error_oom();
    for (int r = 0; r < R; r++) {
        est->workers[r].est = est;
        est->workers[r].rank = r;
    }
    for (int r = est->first; r < est->first + est->Rl; r++) {
        tl_worker *w = &est->workers[r];
        /* On several hosts the chunks are those of the host's copy of the
         * parameters, split over its replicas (hosts.c). */
        tl_status st = est->H > 1 ? tl_comm_chunk(est->vars->total, est->Rl, r - est->first, &w->chunk_off,
                                                  &w->chunk_len)
                                  : tl_comm_chunk(est->vars->total, R, r, &w->chunk_off, &w->chunk_len);
        if (st != TL_OK)
            return st;
        /* One replica updates straight from its own gradient, several hosts
         * from the whole sum: no chunk_grad. */
        int64_t chunk_floats = R > 1 && est->H == 1 ? w->chunk_len : 0;
        int64_t floats = est->train.p->act_floats + est->train.p->grad_floats + est->train.p->scratch_floats +
                         est->vars->total /* param_grad */ + chunk_floats + 16;
        int64_t masks = est->train.p->mask_bytes + 64;
        if (est->have_eval) {
            floats += est->eval.p->act_floats + est->eval.p->grad_floats + est->eval.p->scratch_floats;
            masks += est->eval.p->mask_bytes;
        }
        if (est->have_predict) {
            floats += est->predict.p->act_floats + est->predict.p->grad_floats + est->predict.p->scratch_floats;
            masks += est->predict.p->mask_bytes;
        }
        w->bufs = tl_calloc((size_t)floats, sizeof(float));
        w->mask = tl_calloc((size_t)masks, 1);
        if (w->bufs == NULL || w->mask == NULL)
            return tl_error_oom();
        float *cur = w->bufs;
        uint8_t *mcur = w->mask;
        bind_exec(est, w, est->train.p, &w->train_x, &cur, &mcur);
        w->train_x.param_grad = cur;
        cur += est->vars->total;
        w->chunk_grad = chunk_floats > 0 ? cur : NULL;
        cur += chunk_floats;
        if (est->have_eval)
            bind_exec(est, w, est->eval.p, &w->eval_x, &cur, &mcur);
        if (est->have_predict)
            bind_exec(est, w, est->predict.p, &w->predict_x, &cur, &mcur);
        if ((st = tl_est_emb_worker_init(est, w)) != TL_OK || (st = tl_est_relay_init(est, w)) != TL_OK ||
            (st = make_team(est, r, 0, &w->team)) != TL_OK)
            return st;
        w->train_x.team = w->eval_x.team = w->predict_x.team = w->team;
    }
    if (est->C > 1) {
        tl_status st = make_followers(est);
        if (st != TL_OK)
            return st;
    }
    for (int r = est->first; r < est->first + est->Rl; r++) {
        tl_status st = tl_thread_start(&est->workers[r].thread, worker_main, &est->workers[r]);
        if (st != TL_OK)
            return st;
        est->started++;
    }
    for (int k = 0; est->C > 1 && k < est->Rl * (est->C - 1); k++) {
        tl_status st = tl_thread_start(&est->followers[k].thread, follower_main, &est->followers[k]);
        if (st != TL_OK)
            return st;
        est->followers_started++;
    }
    return TL_OK;
}

tl_status tl_est_eval_partial(tl_estimator *est, int64_t step)
{
    tl_mode_prog *m = &est->eval_part;
    tl_worker *w = &est->workers[0];
    int64_t r = est->part_rows;
    tl_status st;
    if (m->p == NULL || m->batch != r) {
        /* The model traced at the short batch's size, once per size: the
         * plain Estimator's graph has a dynamic batch, tpuloop's programs
         * a static one. */
        tl_program_destroy(m->p);
        tl_graph_destroy(m->g);
        tl_free(est->part_bufs);
        tl_free(est->part_mask);
        memset(m, 0, sizeof *m);
        est->part_bufs = NULL;
        est->part_mask = NULL;
        if ((st = trace(est, TL_MODE_EVAL, r, est->fshape, est->frank, m)) != TL_OK)
            return st;
        const tl_program *p = m->p;
        est->part_bufs = tl_calloc((size_t)(p->act_floats + p->grad_floats + p->scratch_floats + 16), sizeof(float));
        est->part_mask = tl_calloc((size_t)p->mask_bytes + 64, 1);
        if (est->part_bufs == NULL || est->part_mask == NULL)
            return tl_error_oom();
        float *cur = est->part_bufs;
        uint8_t *mcur = est->part_mask;
        bind_exec(est, w, p, &est->part_x, &cur, &mcur);
    }
    tl_exec *x = &est->part_x;
    memcpy(tl_exec_value(m->p, x, m->features), est->part_features, (size_t)(r * est->D) * sizeof(float));
    memcpy(tl_exec_value(m->p, x, m->labels), est->part_labels, (size_t)r * sizeof(int32_t));
    x->step = step;
    if ((st = tl_outfeed_reserve(est, m->out.record)) != TL_OK)
        return st;
    /* On the caller's thread: the kernels' environment, then the caller's. */
    tl_fp_env fp;
    tl_fp_enter(&fp);
    st = tl_program_forward(m->p, x);
    if (st == TL_OK)
        eval_score(w, m, x, est->outfeed);
    tl_fp_leave(&fp);
    return st;
}

/* The engine of options.embedding_config, sized as TPUEstimator sizes
 * TPUEmbedding: a tensor core per replica, the replica's training batch. */
static tl_status embedding_create(tl_estimator *est)
{
    tl_emb_config c = *est->opt.embedding_config;
    c.num_tensor_cores = est->R;
    /* Each process holds its host shard of the tables, at least one shard. */
    c.num_hosts = est->H;
    c.host = est->host;
    if (c.num_shards % est->H != 0)
        c.num_shards = (c.num_shards / est->H + 1) * est->H;
    c.batch_size_per_tensor_core = 1;
    if (est->rc.train_batch_size.set) {
        tl_input_plan *plan;
        tl_status st = tl_input_plan_create(est->topo, &est->rc, TL_MODE_TRAIN, &plan);
        if (st != TL_OK)
            return st;
        int64_t b = plan->model_fn_batch_size;
        tl_input_plan_destroy(plan);
        c.batch_size_per_tensor_core = b < 1 ? 1 : b < INT32_MAX ? (int)b : INT32_MAX;
    }
    tl_status st = tl_emb_engine_create(&c, &est->own_emb);
    if (st == TL_OK)
        est->opt.embedding = est->own_emb;
    return st;
}

/* What a replica of several cores runs so far (graph/partition.h): its
 * cores split the features spatially (input_partition_dims tiling one
 * image tensor) or the variables (a ModelParallel's layouts), without
 * embedding tables; a replica's cores are threads of one host. */
static tl_status model_parallel_check(const tl_run_config *rc, const tl_estimator_options *o, int64_t ncpr)
{
    const tl_partition_dims *pd = rc->tpu.input_partition_dims;
    bool spatial = pd != NULL && pd->features->kind == TL_PD_DIMS;
    bool tensor = o->distribution != NULL && tl_distribution_kind_of(o->distribution) == TL_MODEL_PARALLEL;
    if (!spatial && !tensor)
        return tl_error(TL_EINVAL, "num_cores_per_replica %lld: the cores of a replica split the images "
                                   "(input_partition_dims giving the features' tiles, as [[1, 2, 2, 1], None]) or "
                                   "the variables (a ModelParallel distribution: the configuration's layout_map); "
                                   "neither is given",
                        (long long)ncpr);
    if (spatial && tensor)
        return tl_error(TL_EINVAL, "num_cores_per_replica %lld with both input_partition_dims and ModelParallel "
                                   "layouts: splitting one replica's images and variables together is not built "
                                   "yet; give one",
                        (long long)ncpr);
    if (pd != NULL && pd->labels != NULL && pd->labels->kind != TL_PD_NONE)
        return tl_error(TL_EINVAL, "input_partition_dims: the labels must be None (every core of a replica reads "
                                   "them whole); splitting them is not built yet");
    if (o->embedding != NULL || o->embedding_config != NULL)
        return tl_error(TL_EINVAL, "num_cores_per_replica %lld with embedding tables is not built yet",
                        (long long)ncpr);
    return TL_OK;
}

tl_status tl_estimator_create(const tl_config *cfg, const tl_estimator_options *o, tl_estimator **out)
{
    *out = NULL;
    const tl_run_config *rc = tl_config_get(cfg);
    if (rc == NULL)
        return tl_error(TL_EINVAL, "the configuration is not resolved: call tl_config_resolve first");
    if (o == NULL || o->model_fn == NULL)
        return tl_error(TL_EINVAL, "tl_estimator_options.model_fn is required");
    tl_status st = tl_optimizer_config_validate(&o->optimizer);
    if (st != TL_OK)
        return st;
    if (o->infeed_depth < 0 || o->infeed_depth > 1024)
        return tl_error(TL_EINVAL, "tl_estimator_options.infeed_depth must be in [0, 1024] (0: %d), got %d",
                        TL_INFEED_DEPTH_DEFAULT, o->infeed_depth);
    if (o->save_every_n_steps < 0)
        return tl_error(TL_EINVAL, "tl_estimator_options.save_every_n_steps must be >= 0 (0: none), got %lld",
                        (long long)o->save_every_n_steps);
    int64_t ncpr = rc->use_tpu && rc->tpu.num_cores_per_replica.set ? rc->tpu.num_cores_per_replica.value : 1;
    if (ncpr > 1 && (st = model_parallel_check(rc, o, ncpr)) != TL_OK)
        return st;
    tl_estimator *est = tl_calloc(1, sizeof *est);
    if (est == NULL)
        return tl_error_oom();
    est->opt = *o;
    est->rc = *rc;
    est->C = (int)ncpr;
    const tl_partition_dims *pd = rc->tpu.input_partition_dims;
    if (ncpr > 1 && pd != NULL && pd->features->kind == TL_PD_DIMS) { /* the config's tree may not outlive create */
        const tl_pd_node *f = rc->tpu.input_partition_dims->features;
        est->pd_n = f->n;
        memcpy(est->pd_dims, f->dims, (size_t)f->n * sizeof *f->dims);
    }
    est->rc.tpu.input_partition_dims = NULL;
    /* use_tpu false is the plain Estimator: the model runs once per step on
     * this host with the global batch, whatever the devices. */
    tl_run_config one = *rc;
    if (!rc->use_tpu) {
        one.devices = 1;
        one.num_hosts = 1;
        one.tpu.num_cores_per_replica.set = false; /* the plain Estimator: the model whole, once a step */
        one.tpu.input_partition_dims = NULL;
    }
    est->H = 1; /* until tl_est_hosts_init: nothing to tell other hosts */
    if ((st = tl_topology_create(&one, NULL, &est->topo)) != TL_OK)
        goto fail;
    est->R = tl_topology_num_replicas(est->topo);
    est->Rl = est->R;
    if (est->C > 1 && (st = tl_est_tp_check(est, o->distribution)) != TL_OK)
        goto fail;
    if ((st = tl_est_hosts_init(est, o->hosts)) != TL_OK)
        goto fail;
    if (o->embedding == NULL && o->embedding_config != NULL && (st = embedding_create(est)) != TL_OK)
        goto fail;
    if ((st = tl_est_emb_check(est)) != TL_OK)
        goto fail;
    if ((st = tl_vars_create(&est->vars)) != TL_OK)
        goto fail;
    if ((st = tl_est_state_init(est, cfg)) != TL_OK)
        goto fail;
    if ((st = tl_est_hosts_handshake(est)) != TL_OK)
        goto fail;
    *out = est;
    return TL_OK;
fail:
    tl_est_hosts_fail(est, st);
    tl_estimator_destroy(est);
    return st;
}

/* Whether mode's input plan can be made; if not, its error is kept for the
 * mode's calls (tl_est_plan_error). */
static bool plan_ok(tl_estimator *est, tl_mode mode)
{
    tl_input_plan *plan;
    tl_status st = tl_input_plan_create(est->topo, &est->rc, mode, &plan);
    if (st == TL_OK)
        st = tl_est_hosts_check_plan(est, plan);
    tl_input_plan_destroy(plan);
    if (st == TL_OK)
        return true;
    est->plan_err[mode] = st;
    snprintf(est->plan_msg[mode], sizeof est->plan_msg[mode], "%s", tl_last_error());
    tl_clear_error();
    return false;
}

tl_status tl_est_plan_error(const tl_estimator *est, tl_mode mode)
{
    return est->plan_err[mode] != TL_OK ? tl_error(est->plan_err[mode], "%s", est->plan_msg[mode]) : TL_OK;
}

/* input_partition_dims against the features (batch, fshape...) with
 * TensorFlow's checks and messages (tl_partition_plan): the infeed's split
 * and the grid of the partitioner, which takes images of rank 3 or 4. */
static tl_status partition_plan(tl_estimator *est, int64_t batch)
{
    tl_pd_node fnode = {TL_PD_DIMS, est->pd_n, est->pd_dims, NULL, NULL}, lnode = {TL_PD_NONE, 0, NULL, NULL, NULL};
    tl_partition_dims pd = {&fnode, &lnode};
    tl_tensor_desc f = {NULL, est->frank + 1, {batch}}, l = {NULL, 1, {batch}};
    memcpy(f.shape + 1, est->fshape, (size_t)est->frank * sizeof *est->fshape);
    tl_tensor_struct fs = {TL_STRUCT_TENSOR, 1, &f}, ls = {TL_STRUCT_TENSOR, 1, &l};
    tl_status st = tl_partition_plan(&pd, est->C, &fs, &ls, &est->fpart, &est->lpart);
    if (st != TL_OK)
        return st;
    if (est->fpart.kind != TL_PART_TILED)
        return tl_error(TL_EINVAL, "input_partition_dims: the features' dims must tile them over the %d cores of a "
                                   "replica (a product of 1 gives them whole to core 0, which the partitioner does "
                                   "not take)", est->C);
    if (f.rank != 3 && f.rank != 4)
        return tl_error(TL_EINVAL, "input_partition_dims: the cores of a replica split images, (batch, height, width) "
                                   "or (batch, height, width, channels); the features have rank %d", f.rank);
    for (int d = 0; d < 4; d++)
        est->grid[d] = d < f.rank ? est->fpart.dims[d] : 1;
    return TL_OK;
}

/* Builds programs, parameters and workers on the first train, evaluate or
 * predict, when the input's shape is known. */
static tl_status prepare_once(tl_estimator *est, int frank, const int64_t *fshape)
{
    tl_status st;
    tl_input_plan *plan = NULL;
    const tl_run_config *rc = &est->rc;
    if ((st = tl_input_plan_create(est->topo, rc, TL_MODE_TRAIN, &plan)) != TL_OK)
        return st;
    if ((st = tl_est_hosts_check_plan(est, plan)) != TL_OK) {
        tl_input_plan_destroy(plan);
        return st;
    }
    int64_t train_batch = plan->model_fn_batch_size;
    tl_input_plan_destroy(plan);
    est->frank = frank;
    memcpy(est->fshape, fshape, (size_t)frank * sizeof *fshape);
    est->D = 1;
    for (int d = 0; d < frank; d++)
        est->D *= fshape[d];
    /* Tensor parallelism: every core reads the features and labels whole. */
    if (est->C > 1 && est->dist == NULL && (st = partition_plan(est, train_batch)) != TL_OK)
        return st;
    if ((st = trace(est, TL_MODE_TRAIN, train_batch, fshape, frank, &est->train)) != TL_OK)
        return st;
    /* TensorFlow checks an evaluation's or prediction's input rules when
     * it runs (several hosts evaluate only with BROADCAST or PER_HOST_V2,
     * ...): a mode whose plan fails is not traced, and its calls return the
     * plan's error; training goes on. */
    if (rc->eval_batch_size.set && !plan_ok(est, TL_MODE_EVAL)) {
    } else if (rc->eval_batch_size.set) {
        if ((st = tl_input_plan_create(est->topo, rc, TL_MODE_EVAL, &plan)) != TL_OK)
            return st;
        int64_t eb = plan->model_fn_batch_size;
        est->eval_cpu = !plan->on_device;
        if (est->eval_cpu && est->opt.embedding != NULL) {
            tl_input_plan_destroy(plan);
            return tl_error(TL_EINVAL, "the embedding tables live on the devices: evaluation on the CPU path (%s) "
                                       "cannot look them up; set eval_on_tpu true", !rc->use_tpu ? "use_tpu false"
                                                                                                 : "eval_on_tpu false");
        }
        tl_input_plan_destroy(plan);
        if ((st = trace(est, TL_MODE_EVAL, eb, fshape, frank, &est->eval)) != TL_OK)
            return st;
        est->have_eval = true;
    }
    if (rc->predict_batch_size.set && !plan_ok(est, TL_MODE_PREDICT)) {
    } else if (rc->predict_batch_size.set) {
        if ((st = tl_input_plan_create(est->topo, rc, TL_MODE_PREDICT, &plan)) != TL_OK)
            return st;
        int64_t pb = plan->model_fn_batch_size;
        tl_input_plan_destroy(plan);
        if ((st = trace(est, TL_MODE_PREDICT, pb, fshape, frank, &est->predict)) != TL_OK)
            return st;
        est->have_predict = true;
        const tl_node *pr = tl_graph_node(est->predict.g, est->predict.predictions);
        est->pred_width = pr->size / pr->shape[0];
    }
    int64_t total = est->vars->total;
    /* Parameters and optimizer slots in one slab, each array starting 256
     * bytes further into a page than the one before: separate page-aligned
     * allocations would put every stream of the update at the same offset
     * modulo 4 KiB, and the loads and stores then alias (measured: the Adam
     * update took twice as long). */
    est->nslots = tl_optimizer_num_slots(&est->opt.optimizer);
    int64_t stride = (total + 1023) / 1024 * 1024 + 64;
    est->state_slab = tl_calloc((size_t)(stride * (est->nslots + 1)), sizeof(float));
    if (est->state_slab == NULL)
        return tl_error_oom();
    est->params = est->state_slab;
    tl_vars_initialize(est->vars, rc->tf_random_seed.set ? (uint64_t)rc->tf_random_seed.value : 0, est->params);
    for (int s = 0; s < est->nslots; s++)
        est->slots[s] = est->state_slab + (s + 1) * stride;
    float *slot_ptrs[TL_OPTIM_MAX_SLOTS];
    for (int s = 0; s < est->nslots; s++)
        slot_ptrs[s] = est->slots[s];
    tl_optimizer_init_slots(&est->opt.optimizer, slot_ptrs, total);
    tl_k_blas_single_thread();
    /* Every host got this far (one that failed to trace or to open its
     * input told the others) before the collective create, and every host
     * still runs one configuration: the TRAIN spec may have replaced the
     * optimizer since tl_estimator_create compared config_sha256. */
    if ((st = tl_est_hosts_handshake(est)) != TL_OK)
        return st;
    st = est->H > 1 ? tl_comm_create_like(est->hcomm, est->Rl, &est->comm)
                    : tl_comm_create_threads(est->R, &est->comm);
    if (st != TL_OK)
        return st;
    if (est->H > 1)
        (void)tl_comm_set_timeout(est->comm, (double)rc->host_timeout_secs);
    int spin = est->Rl * est->C <= tl_available_cpus() ? 20000 : 0;
    if ((st = tl_barrier_init(&est->go, est->Rl * est->C + 1, spin)) != TL_OK)
        return st;
    if ((st = tl_barrier_init(&est->done, est->Rl * est->C + 1, spin)) != TL_OK) {
        tl_barrier_close(&est->go);
        return st;
    }
    if ((st = tl_infeed_init(est, est->opt.infeed_depth ? est->opt.infeed_depth : TL_INFEED_DEPTH_DEFAULT)) != TL_OK)
        return st;
    for (int m = 0; m < 3; m++)
        est->relay[m] = tl_est_relayed(est, (tl_mode)m);
    return make_workers(est);
}

tl_status tl_est_prepare_shape(tl_estimator *est, int frank, const int64_t *fshape)
{
    if (est->broken != TL_OK)
        return tl_error(est->broken, "%s", est->broken_err);
    if (est->started == 0) {
        tl_status st = prepare_once(est, frank, fshape);
        if (st != TL_OK) {
            /* A model_fn that failed for one mode may have built another
             * mode's program: no half-built estimator runs. */
            est->broken = st;
            snprintf(est->broken_err, sizeof est->broken_err, "%s", tl_last_error());
            return st;
        }
    }
    tl_status st = tl_est_apply_pending(est);
    if (st != TL_OK)
        return st;
    int64_t D = 1;
    for (int d = 0; d < frank; d++)
        D *= fshape[d];
    if (D != est->D)
        return tl_error(TL_EINVAL, "the data has %lld features per example; the model was traced for %lld",
                        (long long)D, (long long)est->D);
    return TL_OK;
}

/* In-memory data's ids fit the engine: W of them per example, feature
 * after feature. Without an engine, ids are not read. */
static tl_status check_data_ids(const tl_estimator *est, const tl_labeled_data *data)
{
    int64_t W = est->emb_width;
    if (est->opt.embedding == NULL || (data->num_ids == W && (data->ids != NULL || data->num_examples == 0)))
        return TL_OK;
    const tl_emb_config *c = tl_emb_engine_config(est->opt.embedding);
    tl_strbuf sb = {0};
    for (int f = 0; f < c->num_features && f < 8; f++)
        tl_strbuf_appendf(&sb, "%s\"%s\" %lld", f ? ", " : "", c->features[f].name,
                          (long long)tl_est_emb_width(&c->features[f]));
    tl_status st = tl_error(TL_EINVAL, "the data has %lld embedding ids per example (tl_labeled_data.num_ids%s); the "
                                       "embedding engine's %d features take %lld, feature after feature (%s%s)",
                            (long long)data->num_ids, data->ids == NULL ? ", ids NULL" : "", c->num_features,
                            (long long)W, sb.len ? sb.data : "", c->num_features > 8 ? ", ..." : "");
    tl_strbuf_free(&sb);
    return st;
}

tl_status tl_est_prepare(tl_estimator *est, const tl_labeled_data *data)
{
    /* Ids are no features: data of ids alone leaves the model no input. */
    if (data->num_features < 1)
        return tl_error(TL_EINVAL, "the data has %lld feature values per example; the model's features need at least "
                                   "one (the embedding ids travel apart, in tl_labeled_data.ids)",
                        (long long)data->num_features);
    tl_status st = check_data_ids(est, data);
    return st != TL_OK ? st : tl_est_prepare_shape(est, data->feature_rank, data->feature_shape);
}

void tl_estimator_destroy(tl_estimator *est)
{
    if (est == NULL)
        return;
    int followers = est->C > 1 && est->followers != NULL ? est->Rl * (est->C - 1) : 0;
    if (est->started > 0 || est->followers_started > 0) {
        if (est->started == est->Rl && est->followers_started == followers) {
            est->cmd = CMD_STOP;
            tl_barrier_wait(&est->go);
        } else {
            tl_barrier_break(&est->go);
        }
        for (int r = est->first; r < est->first + est->started; r++)
            tl_thread_join(&est->workers[r].thread, NULL);
        for (int k = 0; k < est->followers_started; k++)
            tl_thread_join(&est->followers[k].thread, NULL);
    }
    for (int k = 0; est->followers != NULL && k < followers; k++) {
        tl_team_destroy(est->followers[k].team);
        tl_free(est->followers[k].bufs);
        tl_free(est->followers[k].mask);
    }
    for (int r = 0; est->rbar != NULL && r < est->R; r++)
        if (est->rbar[r].count > 0)
            tl_barrier_close(&est->rbar[r]);
    tl_free(est->followers);
    tl_free(est->var_split);
    tl_free(est->rbar);
    for (int m = 0; m < 3; m++) {
        tl_free(est->progs[m]);
        tl_free(est->peers[m]);
    }
    tl_infeed_free(est);
    tl_free(est->outfeed);
    tl_free(est->pred_area);
    tl_free(est->pred_rows);
    tl_est_summaries_close(est);
    tl_est_state_free(est);
    if (est->comm != NULL) {
        tl_barrier_close(&est->go);
        tl_barrier_close(&est->done);
    }
    for (int r = 0; est->workers && r < est->R; r++) {
        tl_team_destroy(est->workers[r].team);
        tl_free(est->workers[r].bufs);
        tl_free(est->workers[r].mask);
        tl_free(est->workers[r].scored);
        tl_est_emb_worker_free(&est->workers[r]);
        tl_est_relay_free(&est->workers[r]);
    }
    tl_est_emb_ckpt_free(est);
    tl_est_emb_plan_free(&est->train);
    tl_est_emb_plan_free(&est->eval);
    tl_est_emb_plan_free(&est->predict);
    tl_free(est->workers);
    tl_comm_destroy(est->comm);
    tl_comm_destroy(est->hcomm);
    tl_free(est->state_slab);
    mode_free(&est->train, est->C);
    mode_free(&est->eval, est->C);
    mode_free(&est->predict, est->C);
    mode_free(&est->eval_part, est->C);
    tl_free(est->part_bufs);
    tl_free(est->part_mask);
    tl_free(est->part_features);
    tl_free(est->part_labels);
    tl_vars_destroy(est->vars);
    tl_topology_destroy(est->topo);
    tl_emb_engine_destroy(est->own_emb); /* after everything that steps it */
    tl_free(est);
}

/* ---- device loops and results ------------------------------------------- */

/* The first worker's error that is a root cause (not TL_ERUNTIME's "infeed
 * closed" / "aborted" of the others), else the first. */
tl_status tl_est_device_loop(tl_estimator *est, tl_cmd_kind cmd, int64_t start, int64_t n)
{
    est->cmd = cmd;
    est->loop_start = start;
    est->loop_n = n;
    tl_barrier_wait(&est->go);
    tl_barrier_wait(&est->done);
    /* An input error closes the infeed under the workers: it is the root
     * cause of their "infeed closed". */
    tl_status st = tl_infeed_failed(est);
    if (st != TL_OK)
        return tl_est_hosts_fail(est, st);
    int lo = est->first, hi = est->first + est->Rl;
    for (int r = lo; r < hi; r++)
        if (est->workers[r].status != TL_OK && est->workers[r].status != TL_ERUNTIME)
            return tl_est_hosts_fail(est, tl_error(est->workers[r].status, "%s", est->workers[r].err));
    for (int k = 0; est->C > 1 && k < est->Rl * (est->C - 1); k++)
        if (est->followers[k].status != TL_OK && est->followers[k].status != TL_ERUNTIME)
            return tl_error(est->followers[k].status, "%s", est->followers[k].err);
    for (int r = lo; r < hi; r++)
        if (est->workers[r].status != TL_OK)
            return tl_est_hosts_fail(est, tl_error(est->workers[r].status, "%s", est->workers[r].err));
    return tl_est_hosts_merge_stats(est);
}

void tl_est_sha256_floats(void *sha256_ctx, const float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &p[i], sizeof bits);
        uint8_t le[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), (uint8_t)(bits >> 24)};
        SHA256Update(sha256_ctx, le, sizeof le);
    }
}

tl_status tl_estimator_variable_value(const tl_estimator *est, const char *name, float *out, int64_t n)
{
    const tl_vars *vars = est->vars;
    if (vars == NULL || est->params == NULL)
        return tl_error(TL_EINVAL, "variable %s has no value yet: the model is built at the first train, evaluate or "
                                   "predict", name ? name : "(null)");
    for (int i = 0; name != NULL && i < vars->n; i++) {
        const tl_var *v = &vars->v[i];
        if (strcmp(v->name, name) != 0)
            continue;
        if (n != v->size)
            return tl_error(TL_EINVAL, "variable %s has %lld elements; n is %lld", name, (long long)v->size,
                            (long long)n);
        memcpy(out, est->params + v->offset, (size_t)n * sizeof *out);
        return TL_OK;
    }
    return tl_error(TL_ENOTFOUND, "no variable named %s; the model has %d variables", name ? name : "(null)",
                    vars->n);
}

tl_status tl_estimator_params_digest(const tl_estimator *est, char hex[65])
{
    SHA2_CTX ctx;
    SHA256Init(&ctx);
    for (int k = 0; est->params && k < est->vars->n; k++) {
        const tl_var *v = &est->vars->v[est->vars->by_name[k]];
        tl_est_sha256_floats(&ctx, est->params + v->offset, v->size);
    }
    /* The embedding tables too: they are the model's parameters. */
    tl_status st = tl_est_emb_digest(est, &ctx);
    if (st != TL_OK)
        return st;
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256Final(digest, &ctx);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return TL_OK;
}

int64_t tl_estimator_global_step(const tl_estimator *est)
{
    return est->global_step;
}

tl_status tl_estimator_check_mode(const tl_estimator *est, tl_mode mode)
{
    tl_input_plan *plan;
    tl_status st = tl_input_plan_create(est->topo, &est->rc, mode, &plan);
    tl_input_plan_destroy(plan);
    return st;
}

tl_emb_engine *tl_estimator_embedding(const tl_estimator *est)
{
    return est->opt.embedding;
}

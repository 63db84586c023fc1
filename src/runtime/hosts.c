/* hosts.c — the estimator over several processes (options.hosts): what the
 * hosts exchange on their host threads, between device loops.
 *
 * Each host runs its own replicas and its own input_fn invocations; the
 * replicas' gradients meet in the replicas' communicator (est->comm, R ranks
 * over the processes), whose reductions keep the global replica order, so
 * the parameters are the same bits on every host and on one process. What
 * the host loop reads of the other hosts' replicas — their losses, step
 * counts, evaluation counts, outfeed records — comes by
 * merge: every host fills a buffer where it owns the values and leaves zeros
 * elsewhere, and an int64 sum over the hosts (est->hcomm, one rank per
 * process) gives every host the whole buffer. Each 32-bit value is nonzero on
 * one host at most, so the sum carries nothing between them and the bits
 * arrive as written. Decisions that hang on a host's clock or signals (a
 * checkpoint by seconds, the next loop's size, a requested stop) are host
 * 0's, or any host's for a stop, and are exchanged the same way, so every
 * host runs the same loops. */
#include <stdio.h>
#include <string.h>

#include "estimator_int.h"

/* The longest message a communicator keeps (comm_int.h). */
#define HOST_MSG 768

bool tl_est_local_call(const tl_estimator *est, const tl_input_call *call)
{
    return est->H == 1 || call->host == est->host;
}

tl_status tl_est_hosts_merge(tl_estimator *est, void *words, int64_t n)
{
    if (est->H == 1 || n == 0)
        return TL_OK;
    return tl_comm_all_reduce(est->hcomm, est->host, words, words, n, TL_COMM_I64, TL_REDUCE_SUM);
}

tl_status tl_est_hosts_any(tl_estimator *est, bool mine, bool *any)
{
    int64_t v = mine;
    tl_status st = tl_est_hosts_merge(est, &v, 1);
    *any = v != 0;
    return st;
}

tl_status tl_est_hosts_bcast(tl_estimator *est, int64_t *v, int n)
{
    if (est->H == 1)
        return TL_OK;
    return tl_comm_broadcast(est->hcomm, est->host, v, n, TL_COMM_I64, 0);
}

tl_status tl_est_hosts_same(tl_estimator *est, tl_status st)
{
    est->same_error = st != TL_OK;
    return st;
}

tl_status tl_est_hosts_fail(tl_estimator *est, tl_status st)
{
    bool same = est->same_error;
    est->same_error = false;
    if (est->H == 1 || st == TL_OK || same)
        return st;
    /* The message is this host's error; the others see it as "process p
     * (...): message". A communicator that failed already keeps its cause. */
    char cause[HOST_MSG - 32], msg[HOST_MSG];
    snprintf(cause, sizeof cause, "%s", tl_last_error());
    snprintf(msg, sizeof msg, "host %d: %s", est->host, cause);
    if (tl_comm_status(est->hcomm) == TL_OK)
        tl_comm_abort(est->hcomm, st, msg);
    if (est->comm != NULL && tl_comm_status(est->comm) == TL_OK)
        tl_comm_abort(est->comm, st, msg);
    return tl_error(st, "%s", cause);
}

/* A replica's counters as the merge carries them: doubles and floats by
 * their bits. */
enum { S_LAST_LOSS, S_LOSS_SUM, S_STEPS, S_ENDED, S_WAIT, S_START_WAIT, S_EVAL_LOSS, S_CORRECT, S_SCORED, S_STOPPED,
       S_N };

static int64_t dbits(double x)
{
    int64_t v;
    memcpy(&v, &x, sizeof v);
    return v;
}

static double bitsd(int64_t v)
{
    double x;
    memcpy(&x, &v, sizeof x);
    return x;
}

tl_status tl_est_hosts_merge_stats(tl_estimator *est)
{
    if (est->H == 1)
        return TL_OK;
    int64_t n = (int64_t)est->R * S_N;
    int64_t *v = tl_calloc((size_t)n, sizeof *v);
    if (v == NULL)
        return tl_est_hosts_fail(est, tl_error_oom());
    for (int r = est->first; r < est->first + est->Rl; r++) {
        const tl_worker *w = &est->workers[r];
        int64_t *s = v + (int64_t)r * S_N;
        s[S_LAST_LOSS] = dbits((double)w->last_loss);
        s[S_LOSS_SUM] = dbits(w->loss_sum);
        s[S_STEPS] = w->steps_run;
        s[S_ENDED] = w->ended;
        s[S_WAIT] = w->wait_ns;
        s[S_START_WAIT] = w->start_wait_ns;
        s[S_EVAL_LOSS] = dbits(w->eval_loss_sum);
        s[S_CORRECT] = w->eval_correct;
        s[S_SCORED] = w->scored_len;
        s[S_STOPPED] = w->pred_stopped;
    }
    tl_status st = tl_est_hosts_merge(est, v, n);
    for (int r = 0; r < est->R && st == TL_OK; r++) {
        if (tl_est_local_replica(est, r))
            continue;
        tl_worker *w = &est->workers[r];
        const int64_t *s = v + (int64_t)r * S_N;
        w->last_loss = (float)bitsd(s[S_LAST_LOSS]);
        w->loss_sum = bitsd(s[S_LOSS_SUM]);
        w->steps_run = s[S_STEPS];
        w->ended = s[S_ENDED] != 0;
        w->wait_ns = s[S_WAIT];
        w->start_wait_ns = s[S_START_WAIT];
        w->eval_loss_sum = bitsd(s[S_EVAL_LOSS]);
        w->eval_correct = s[S_CORRECT];
        w->scored_len = s[S_SCORED];
        w->pred_stopped = s[S_STOPPED] != 0;
    }
    tl_free(v);
    return st;
}

tl_status tl_est_hosts_init(tl_estimator *est, tl_comm *hosts)
{
    est->H = 1;
    est->host = 0;
    est->first = 0;
    est->Rl = est->R;
    if (hosts == NULL)
        return TL_OK;
    if (tl_comm_local_ranks(hosts) != 1)
        return tl_error(TL_EINVAL, "tl_estimator_options.hosts must join the processes one rank each (a host is a "
                                   "process); this process plays %d ranks", tl_comm_local_ranks(hosts));
    int P = tl_comm_processes(hosts);
    const tl_run_config *rc = &est->rc;
    /* The hosts' own communicator first: it is collective, and every later
     * check that fails on one host tells the others through it. */
    tl_status st = P > 1 ? tl_comm_create_like(hosts, 1, &est->hcomm) : TL_OK;
    if (st != TL_OK)
        return st;
    /* A hung host (not a dead one: mpirun ends those) fails the others. */
    if (P > 1)
        (void)tl_comm_set_timeout(est->hcomm, (double)rc->host_timeout_secs);
    if (rc->num_hosts != P)
        st = tl_error(TL_EINVAL, "num_hosts is %lld but %d process%s joined as hosts (tl_estimator_options.hosts): run "
                                 "one process per host (mpirun -np %lld), or set num_hosts %d",
                      (long long)rc->num_hosts, P, P == 1 ? "" : "es", (long long)rc->num_hosts, P);
    else if (P > 1 && !rc->use_tpu)
        st = tl_error(TL_EINVAL, "use_tpu false is the plain Estimator on one host; %d processes joined as hosts", P);
    if (P == 1)
        return st;
    est->H = P;
    est->host = tl_comm_process(hosts);
    est->Rl = tl_topology_replicas_per_host(est->topo);
    est->first = est->host * est->Rl;
    if (st == TL_OK && est->Rl < 1)
        st = tl_error(TL_EINVAL, "a replica spans hosts (num_cores_per_replica > devices per host): not built yet");
    return st != TL_OK ? tl_est_hosts_fail(est, st) : TL_OK;
}

tl_status tl_est_hosts_handshake(tl_estimator *est)
{
    if (est->H == 1)
        return TL_OK;
    /* Every host's devices and configuration digest, compared with host 0's
     * (devices 0, one per core, may give hosts different counts). */
    enum { W = 9 };
    int64_t *v = tl_calloc((size_t)est->H * W, sizeof *v);
    if (v == NULL)
        return tl_est_hosts_fail(est, tl_error_oom());
    v[(int64_t)est->host * W] = tl_topology_devices_per_host(est->topo);
    memcpy(v + (int64_t)est->host * W + 1, est->config_sha256, (W - 1) * sizeof *v);
    tl_status st = tl_est_hosts_merge(est, v, (int64_t)est->H * W);
    for (int h = 1; h < est->H && st == TL_OK; h++)
        if (v[(int64_t)h * W] != v[0])
            st = tl_error(TL_EINVAL, "host %d has %lld devices, host 0 %lld: every host needs the same number (set "
                                     "devices)", h, (long long)v[(int64_t)h * W], (long long)v[0]);
    for (int h = 1; h < est->H && st == TL_OK; h++)
        if (memcmp(v + 1, v + (int64_t)h * W + 1, (W - 1) * sizeof *v) != 0) {
            char a[65], b[65];
            memcpy(a, v + 1, 64);
            memcpy(b, v + (int64_t)h * W + 1, 64);
            a[64] = b[64] = '\0';
            st = tl_error(TL_EINVAL, "host %d runs another configuration than host 0 (config_sha256 %.12s... "
                                     "against %.12s...): every host must run the same configuration, model and "
                                     "optimizer", h, b, a);
        }
    tl_free(v);
    return st;
}

tl_status tl_est_hosts_check_plan(const tl_estimator *est, const tl_input_plan *p)
{
    if (est->H == 1)
        return TL_OK;
    if (!p->on_device)
        return tl_error(TL_EINVAL, "the %s input runs on the CPU path (the plain Estimator: use_tpu or eval_on_tpu "
                                   "false), which is one host's; %d processes joined as hosts", tl_mode_name(p->mode),
                        est->H);
    return TL_OK;
}

/* ---- relay: an invocation that feeds other hosts' replicas ------------------
 *
 * BROADCAST (one invocation on host 0, a copy of its batch to every replica)
 * and SLICED (one invocation on host 0, slice r to replica r) feed every
 * host from host 0, as TensorFlow's host 0 infeeds every core. Host 0's feed
 * fills the buffers of every replica its invocation feeds; each step, worker
 * j of host 0 sends the other hosts' replicas q with q % Rl == j their
 * batches, packed, in one all-to-all over the replicas' communicator, which
 * every replica joins. A packed batch: a header (step, real_rows, stopping,
 * end), the features, labels and padding mask as 32-bit words two to an
 * int64, and the ids. */

enum { RH_STEP, RH_REAL, RH_STOPPING, RH_END, RH_N };

/* int64 words of one packed batch of b rows. */
static int64_t relay_words(const tl_estimator *est, int64_t b)
{
    return RH_N + (b * est->D + 2 * b + 1) / 2 + b * est->emb_width;
}

/* The host whose invocation feeds replica q in mode's plan. */
static int source_host(const tl_input_plan *p, int q)
{
    for (int i = 0; i < p->input_fn_calls; i++)
        if (q >= p->calls[i].first_replica && q < p->calls[i].first_replica + p->calls[i].num_replicas)
            return p->calls[i].host;
    return -1;
}

bool tl_est_relayed(const tl_estimator *est, tl_mode mode)
{
    const tl_input_plan *p = est->infeed.plan[mode];
    if (est->H == 1 || p == NULL || !p->on_device)
        return false;
    for (int q = 0; q < est->R; q++)
        if (source_host(p, q) != q / est->Rl)
            return true;
    return false;
}

tl_status tl_est_relay_init(tl_estimator *est, tl_worker *w)
{
    int64_t words = 0;
    for (int m = 0; m < 3; m++)
        if (tl_est_relayed(est, (tl_mode)m)) {
            int64_t k = relay_words(est, est->infeed.plan[m]->model_fn_batch_size);
            words = k > words ? k : words;
        }
    if (words == 0)
        return TL_OK;
    w->relay_send = tl_calloc((size_t)(words * est->H + 1), sizeof *w->relay_send);
    w->relay_recv = tl_calloc((size_t)(words + 1), sizeof *w->relay_recv);
    w->relay_counts = tl_calloc(2 * (size_t)est->R, sizeof *w->relay_counts);
    /* features, labels and mask: 2 floats to a packed word */
    w->relay_f = tl_calloc((size_t)(2 * words + 1), sizeof *w->relay_f);
    if (w->relay_send == NULL || w->relay_recv == NULL || w->relay_counts == NULL || w->relay_f == NULL)
        return tl_error_oom();
    return TL_OK;
}

void tl_est_relay_free(tl_worker *w)
{
    tl_free(w->relay_send);
    tl_free(w->relay_recv);
    tl_free(w->relay_counts);
    tl_free(w->relay_f);
}

static void pack(const tl_estimator *est, const tl_feed_batch *b, int64_t *out)
{
    out[RH_STEP] = b->step;
    out[RH_REAL] = b->real_rows;
    out[RH_STOPPING] = b->stopping;
    out[RH_END] = b->end;
    char *p = (char *)(out + RH_N);
    size_t fb = (size_t)(b->rows * est->D) * sizeof(float), lb = (size_t)b->rows * sizeof(int32_t);
    memcpy(p, b->features, fb);
    if (b->labels != NULL)
        memcpy(p + fb, b->labels, lb);
    else
        memset(p + fb, 0, lb);
    memcpy(p + fb + lb, b->padding_mask, lb);
    int64_t *ids = out + RH_N + (b->rows * est->D + 2 * b->rows + 1) / 2;
    if (est->emb_width > 0)
        memcpy(ids, b->ids, (size_t)(b->rows * est->emb_width) * sizeof *ids);
}

/* The received batch as the worker's own buffer (features, labels and mask
 * point into relay_f; the ids into the received words). */
static void unpack(const tl_estimator *est, tl_worker *w, int64_t rows, bool labels)
{
    const int64_t *in = w->relay_recv;
    tl_feed_batch *b = &w->relay_batch;
    memset(b, 0, sizeof *b);
    b->step = in[RH_STEP];
    b->rows = rows;
    b->real_rows = in[RH_REAL];
    b->stopping = in[RH_STOPPING] != 0;
    b->end = in[RH_END] != 0;
    size_t fb = (size_t)(rows * est->D) * sizeof(float), lb = (size_t)rows * sizeof(int32_t);
    memcpy(w->relay_f, in + RH_N, fb + 2 * lb);
    b->has_features = true;
    b->features = w->relay_f;
    b->has_labels = labels;
    b->labels = labels ? (int32_t *)((char *)w->relay_f + fb) : NULL;
    b->padding_mask = (int32_t *)((char *)w->relay_f + fb + lb);
    b->has_ids = est->emb_width > 0;
    b->ids = b->has_ids ? (int64_t *)(in + RH_N + (rows * est->D + 2 * rows + 1) / 2) : NULL;
}

tl_status tl_est_relay_pop(tl_worker *w, tl_mode mode, int64_t step, tl_feed_batch **out, int64_t *waited_ns)
{
    tl_estimator *est = w->est;
    const tl_input_plan *p = est->infeed.plan[mode];
    int64_t rows = p->model_fn_batch_size, words = relay_words(est, rows);
    int R = est->R, j = w->rank - est->first;
    int64_t *send_counts = w->relay_counts, *recv_counts = w->relay_counts + R;
    memset(w->relay_counts, 0, 2 * (size_t)R * sizeof *w->relay_counts);
    *out = NULL;
    tl_status st = TL_OK;
    bool mine = source_host(p, w->rank) == est->host;
    if (mine)
        st = tl_infeed_pop(est, w->rank, step, w->team, out, waited_ns);
    int64_t at = 0;
    for (int q = 0; q < R && st == TL_OK; q++) {
        if (tl_est_local_replica(est, q) || source_host(p, q) != est->host || q % est->Rl != j)
            continue;
        tl_feed_batch *b;
        if ((st = tl_infeed_pop(est, q, step, w->team, &b, waited_ns)) != TL_OK)
            break;
        pack(est, b, w->relay_send + at);
        tl_infeed_release(est, q, b);
        send_counts[q] = words;
        at += words;
    }
    if (!mine) {
        int src = source_host(p, w->rank);
        recv_counts[src * est->Rl + w->rank % est->Rl] = words;
    }
    /* Every replica joins, also after a failed pop: its error then fails
     * the communicator, which the others' calls return. */
    if (st != TL_OK) {
        if (*out != NULL)
            tl_infeed_release(est, w->rank, *out);
        *out = NULL;
        return st;
    }
    st = tl_comm_all_to_all_v(est->comm, w->rank, w->relay_send, send_counts, NULL, w->relay_recv, recv_counts, NULL,
                              TL_COMM_I64);
    if (st != TL_OK || mine) {
        if (st != TL_OK && *out != NULL) {
            tl_infeed_release(est, w->rank, *out);
            *out = NULL;
        }
        return st;
    }
    unpack(est, w, rows, mode != TL_MODE_PREDICT);
    *out = &w->relay_batch;
    return TL_OK;
}

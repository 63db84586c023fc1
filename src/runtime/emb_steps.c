/* emb_steps.c — the estimator's side of the embedding engine
 * (tpuloop/embedding.h), as TPUEstimator drives TPUEmbedding: per step and
 * replica the ids are enqueued from the batch's int64 id block (the
 * infeed's, feed.h), the activations received into the model's
 * tl_embedding_activations tensors before the forward pass, and their
 * gradients sent after the backward pass (the tables in checkpoints:
 * emb_ckpt.c).
 *
 * The replica is the engine's tensor core. A training step's send comes
 * before the dense gradients' reduce-scatter, which no replica leaves before
 * every replica entered it: so the last send — which applies the step's
 * update — is done before any replica reads step + 1's activations, and the
 * engine's order checks never fire in a healthy run. Evaluation and
 * prediction have no collective per step, so with several replicas they
 * meet at a barrier after each step's activations: an engine holds at most
 * EMB_RING steps in flight per core, and a replica may not run that far
 * ahead of another. */
#include <stdio.h>
#include <string.h>

#include "estimator_int.h"

int64_t tl_est_emb_width(const tl_emb_feature_config *f)
{
    int64_t w = f->max_sequence_length > 0 ? f->max_sequence_length : 1;
    for (int d = 0; d < f->num_output_dims; d++)
        w *= f->output_shape[d];
    return w;
}

tl_status tl_est_emb_check(tl_estimator *est)
{
    const tl_estimator_options *o = &est->opt;
    if (o->embedding == NULL)
        return TL_OK;
    const tl_emb_config *c = tl_emb_engine_config(o->embedding);
    if (c->num_tensor_cores != est->R)
        return tl_error(TL_EINVAL, "the embedding engine has num_tensor_cores %d; the estimator runs %d replicas, one "
                                   "tensor core each: they must be equal", c->num_tensor_cores, est->R);
    if (c->mode != TL_EMB_MODE_TRAINING)
        return tl_error(TL_EINVAL, "the embedding engine's mode is %s; the estimator needs TRAINING (it enqueues "
                                   "evaluation and prediction steps as inference itself)",
                        c->mode == TL_EMB_MODE_INFERENCE            ? "INFERENCE"
                        : c->mode == TL_EMB_MODE_BACKWARD_PASS_ONLY ? "BACKWARD_PASS_ONLY"
                                                                    : "UNSPECIFIED");
    if (c->pipeline_execution_with_tensor_core)
        return tl_error(TL_EINVAL, "pipeline_execution_with_tensor_core is not supported by the estimator: its "
                                   "one-step staleness would hold an update across a checkpoint, and a resumed run "
                                   "would not repeat the uninterrupted one; set it false");
    if (c->num_hosts != est->H || (est->H > 1 && c->host != est->host))
        return tl_error(TL_EINVAL, "the embedding engine is host %d of num_hosts %d; the estimator runs on host %d of "
                                   "%d processes: set tl_emb_config.num_hosts and host to them", c->host,
                        c->num_hosts, est->host, est->H);
    /* Several replicas split each step's update by row owner (the engine's
     * owner apply), after the step's collective; one applies it in its send. */
    tl_status st = tl_emb_set_owner_apply(o->embedding, est->R > 1);
    if (st != TL_OK)
        return st;
    int nd = tl_emb_num_dynamic(o->embedding);
    if (nd > 0 && o->embedding_learning_rates == NULL)
        return tl_error(TL_EINVAL, "the embedding tables use %d dynamic learning rate or hyperparameter tag%s: set "
                                   "tl_estimator_options.embedding_learning_rates", nd, nd == 1 ? "" : "s");
    est->emb_width = 0;
    for (int f = 0; f < c->num_features; f++)
        est->emb_width += tl_est_emb_width(&c->features[f]);
    return TL_OK;
}

tl_status tl_est_emb_plan(tl_estimator *est, tl_mode mode, tl_mode_prog *m)
{
    tl_emb_engine *eng = est->opt.embedding;
    if (eng == NULL) {
        for (int i = 0; i < m->g->n; i++)
            if (m->g->nodes[i].op == TL_OP_EMBEDDING)
                return tl_error(TL_EINVAL, "model_fn (%s) asked for the activations of embedding feature %lld, but "
                                           "the estimator has no embedding engine (tl_estimator_options.embedding)",
                                tl_mode_name(mode), (long long)m->g->nodes[i].iattr[0]);
        return TL_OK;
    }
    const tl_emb_config *c = tl_emb_engine_config(eng);
    int F = c->num_features;
    m->emb_leaf = tl_calloc((size_t)(F ? F : 1), sizeof *m->emb_leaf);
    if (m->emb_leaf == NULL)
        return tl_error_oom();
    for (int f = 0; f < F; f++)
        m->emb_leaf[f] = TL_T_INVALID;
    const tl_graph *g = m->g;
    for (int i = 0; i < g->n; i++) {
        const tl_node *nd = &g->nodes[i];
        if (nd->op != TL_OP_EMBEDDING)
            continue;
        int f = (int)nd->iattr[0];
        if (f >= F)
            return tl_error(TL_EINVAL, "model_fn (%s) asked for the activations of embedding feature %d; the engine "
                                       "has %d features", tl_mode_name(mode), f, F);
        const tl_emb_feature_config *fc = &c->features[f];
        /* [B, D], [B, S, D] or [B, output_shape..., D] */
        int64_t want[2 + TL_EMB_MAX_OUTPUT_DIMS] = {m->batch};
        int rank = 1;
        if (fc->max_sequence_length > 0)
            want[rank++] = fc->max_sequence_length;
        for (int d = 0; d < fc->num_output_dims; d++)
            want[rank++] = fc->output_shape[d];
        want[rank++] = c->tables[fc->table].dim;
        bool same = nd->rank == rank;
        for (int d = 0; same && d < rank; d++)
            same = nd->shape[d] == want[d];
        if (!same) {
            char ws[160], gs[160];
            size_t a = 0, b = 0;
            for (int d = 0; d < rank; d++)
                a += (size_t)snprintf(ws + a, sizeof ws - a, "%s%lld", d ? ", " : "", (long long)want[d]);
            for (int d = 0; d < nd->rank && b < sizeof gs; d++)
                b += (size_t)snprintf(gs + b, sizeof gs - b, "%s%lld", d ? ", " : "", (long long)nd->shape[d]);
            return tl_error(TL_EINVAL, "model_fn (%s): embedding feature %d (\"%s\") activations must be shaped [%s] "
                                       "(batch, %sdim); the model asked for [%s]", tl_mode_name(mode), f, fc->name, ws,
                            fc->max_sequence_length > 0 ? "max_sequence_length, "
                            : fc->num_output_dims > 0   ? "output_shape..., "
                                                        : "",
                            gs);
        }
        m->emb_leaf[f] = (tl_t)i;
    }
    return TL_OK;
}

void tl_est_emb_plan_free(tl_mode_prog *m)
{
    tl_free(m->emb_leaf);
    m->emb_leaf = NULL;
}

/* Floats of feature f's activations at batch b. */
static int64_t out_floats(const tl_emb_config *c, int f, int64_t b)
{
    return b * tl_est_emb_width(&c->features[f]) * c->tables[c->features[f].table].dim;
}

tl_status tl_est_emb_worker_init(tl_estimator *est, tl_worker *w)
{
    tl_emb_engine *eng = est->opt.embedding;
    if (eng == NULL)
        return TL_OK;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    int F = c->num_features;
    int64_t maxb = est->train.batch;
    if (est->have_eval && est->eval.batch > maxb)
        maxb = est->eval.batch;
    if (est->have_predict && est->predict.batch > maxb)
        maxb = est->predict.batch;
    int64_t scratch = 0;
    for (int f = 0; f < F; f++)
        scratch = out_floats(c, f, maxb) > scratch ? out_floats(c, f, maxb) : scratch;
    tl_est_emb *e = &w->emb;
    e->ids = tl_malloc((size_t)(maxb * est->emb_width + 1) * sizeof *e->ids);
    e->coo = tl_malloc((size_t)(maxb * est->emb_width * 2 + 1) * sizeof *e->coo);
    e->in = tl_calloc((size_t)F + 1, sizeof *e->in);
    e->out = tl_calloc((size_t)F + 1, sizeof *e->out);
    e->grad = tl_calloc((size_t)F + 1, sizeof *e->grad);
    /* Outputs the model does not read, and the zero gradients of features
     * the loss does not reach. */
    e->scratch = tl_malloc((size_t)(scratch + 1) * sizeof *e->scratch);
    e->zeros = tl_calloc((size_t)(scratch + 1), sizeof *e->zeros);
    e->nlr = tl_emb_num_dynamic(eng);
    e->lrs = tl_calloc((size_t)e->nlr + 1, sizeof *e->lrs);
    if (e->ids == NULL || e->coo == NULL || e->in == NULL || e->out == NULL || e->grad == NULL ||
        e->scratch == NULL || e->zeros == NULL || e->lrs == NULL)
        return tl_error_oom();
    if (est->H == 1)
        return TL_OK;
    e->all_ids = tl_malloc((size_t)(est->R * maxb * est->emb_width + 1) * sizeof *e->all_ids);
    e->rdd = tl_calloc((size_t)est->R, sizeof *e->rdd);
    e->a2a = tl_calloc((size_t)est->R * 4, sizeof *e->a2a);
    if (e->all_ids == NULL || e->rdd == NULL || e->a2a == NULL)
        return tl_error_oom();
    return TL_OK;
}

/* ---- several hosts -----------------------------------------------------------
 *
 * Each host's engine holds its host shard of every table (rows over hosts
 * by the sharding strategy, tpu_embedding.md §8.1) and plays every
 * replica's tensor core: its own replicas' from their batches, the other
 * hosts' replicas' from their ids, gathered from every host each step
 * (all-gather over the replicas' communicator). So each engine knows every
 * replica's unique rows, and which host holds each. Worker j of a host
 * plays the other hosts' replicas q with q % Rl == j and talks to them
 * only, by all-to-all over the replicas:
 *   - before a step's activations, it sends each of them the rows of its
 *     step that this host holds, and receives from worker j of each other
 *     host the rows of its own replica's step held there (exchange, ROWS):
 *     the holder pushes what it knows a replica reads, with no request;
 *   - after its replica's send, it sends each other host the replica's
 *     per-row gradient sums of the rows held there, and receives the sums
 *     of the replicas it plays for the rows held here, which it sends into
 *     the engine as theirs (exchange, GRADIENTS).
 * Each engine then updates the rows it holds, each once per step from every
 * replica's sums in ascending replica order: the tables are the bits of one
 * process, spread over the hosts. Per step a host receives the rows and
 * gradients its replicas' steps touch elsewhere and others' touch here,
 * each unique (row, replica) pair once, as tpu_embedding.md §7.3 has it. */

/* Whether worker w plays replica q as another host's. */
static bool plays(const tl_worker *w, int q)
{
    const tl_estimator *est = w->est;
    return !tl_est_local_replica(est, q) && q % est->Rl == w->rank - est->first;
}

void tl_est_emb_worker_free(tl_worker *w)
{
    tl_est_emb *e = &w->emb;
    tl_free(e->ids);
    tl_free(e->coo);
    tl_free(e->in);
    tl_free(e->out);
    tl_free(e->grad);
    tl_free(e->scratch);
    tl_free(e->zeros);
    tl_free(e->lrs);
    tl_free(e->all_ids);
    tl_free(e->rdd);
    tl_free(e->rows_out);
    tl_free(e->rows_in);
    tl_free(e->a2a);
    memset(e, 0, sizeof *e);
}

/* After the engine refused a step's ids: the first id its bounds check
 * meets — features in order, rows in order, a sequence's -1 skipped — as
 * the row of the replica's batch, added to the engine's message (which
 * names the feature, the id and the vocabulary). Only on the error path:
 * a healthy step checks nothing here. */
static tl_status bad_ids(tl_status st, const tl_emb_config *c, const int64_t *ids, int64_t B, int64_t W,
                         int64_t step)
{
    int64_t col = 0;
    for (int f = 0; st == TL_EINVAL && f < c->num_features; f++) {
        const tl_emb_feature_config *fc = &c->features[f];
        int64_t P = tl_est_emb_width(fc), V = c->tables[fc->table].vocabulary_size;
        for (int64_t r = 0; r < B; r++)
            for (int64_t j = 0; j < P; j++) {
                int64_t id = ids[r * W + col + j];
                if ((fc->max_sequence_length > 0 && id == -1) || (id >= 0 && id < V))
                    continue;
                return tl_error(st, "step %lld, row %lld of the batch: %s", (long long)step, (long long)r,
                                tl_last_error());
            }
        col += P;
    }
    return tl_error(st, "step %lld: %s", (long long)step, tl_last_error());
}

/* Enqueues batch_ids (B, W) as core's step. */
static tl_status enqueue_core(tl_worker *w, int core, const tl_mode_prog *m, const int64_t *batch_ids, tl_mode mode,
                              int64_t step)
{
    tl_estimator *est = w->est;
    tl_emb_engine *eng = est->opt.embedding;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    tl_est_emb *e = &w->emb;
    int F = c->num_features;
    int64_t B = m->batch, W = est->emb_width, col = 0;
    int64_t *ids = e->ids, *coo = e->coo;
    TL_ASSERT(batch_ids != NULL);
    /* The batch holds (B, W) ids, each row feature after feature; the
     * engine takes each feature's ids apart. No id is converted or checked
     * here: the engine's bounds check is the one check. */
    for (int f = 0; f < F; f++) {
        const tl_emb_feature_config *fc = &c->features[f];
        int S = fc->max_sequence_length;
        tl_emb_input *in = &e->in[f];
        int64_t P = tl_est_emb_width(fc);
        if (S == 0 && P == W) {
            /* The only feature: the block is its ids as they are. */
            *in = (tl_emb_input){.kind = TL_EMB_INPUT_DENSE, .ids = batch_ids, .n = B * P};
        } else if (S == 0) {
            /* One id per bag, P bags per example: dense. */
            for (int64_t r = 0; r < B; r++)
                for (int64_t j = 0; j < P; j++)
                    ids[r * P + j] = batch_ids[r * W + col + j];
            *in = (tl_emb_input){.kind = TL_EMB_INPUT_DENSE, .ids = ids, .n = B * P};
            ids += B * P;
        } else {
            /* Positions of a sequence, -1 where absent: COO (sample, position). */
            int64_t n = 0;
            for (int64_t r = 0; r < B; r++)
                for (int j = 0; j < S; j++) {
                    int64_t id = batch_ids[r * W + col + j];
                    if (id == -1)
                        continue;
                    ids[n] = id;
                    coo[2 * n] = r;
                    coo[2 * n + 1] = j;
                    n++;
                }
            *in = (tl_emb_input){.kind = TL_EMB_INPUT_COO, .ids = ids, .n = n, .indices = coo};
            ids += n;
            coo += 2 * n;
        }
        col += P;
    }
    const char *emode = mode == TL_MODE_TRAIN ? "training" : "inference";
    tl_status st = tl_emb_enqueue_batch(eng, core, e->in, F, emode, B);
    return st == TL_OK ? TL_OK : bad_ids(st, c, batch_ids, B, W, step);
}

tl_status tl_est_emb_enqueue(tl_worker *w, const tl_mode_prog *m, const int64_t *batch_ids, tl_mode mode,
                             int64_t step)
{
    tl_estimator *est = w->est;
    if (est->opt.embedding == NULL)
        return TL_OK;
    tl_status st = enqueue_core(w, w->rank, m, batch_ids, mode, step);
    if (st != TL_OK || est->H == 1)
        return st;
    /* Every replica's ids, from every host. */
    int64_t n = m->batch * est->emb_width;
    tl_est_emb *e = &w->emb;
    if ((st = tl_comm_all_gather(est->comm, w->rank, batch_ids, e->all_ids, n, TL_COMM_I64)) != TL_OK)
        return st;
    for (int q = 0; q < est->R && st == TL_OK; q++)
        if (plays(w, q))
            st = enqueue_core(w, q, m, e->all_ids + q * n, mode, step);
    return st;
}

/* b grown to hold n floats (*cap of them now). */
static tl_status grow(float **b, int64_t *cap, int64_t n)
{
    if (n <= *cap)
        return TL_OK;
    float *p = tl_realloc(*b, (size_t)n * sizeof *p);
    if (p == NULL)
        return tl_error(TL_ENOMEM, "embedding: cannot hold %lld floats of rows from other hosts", (long long)n);
    *b = p;
    *cap = n;
    return TL_OK;
}

/* What exchange() moves. */
typedef enum { ROWS, GRADIENTS } exchanged;

/* Several hosts: one all-to-all over the replicas, in which worker j of each
 * host talks only to worker j of the others (the replicas q it plays are
 * exactly those), of
 *   ROWS, after every played replica's recv_dedup: to each played replica
 *     the rows of its step this host holds; from each, the rows of this
 *     worker's replica's step held on that replica's host;
 *   GRADIENTS, after this replica's send: to each played replica's host
 *     this replica's per-row gradient sums of the rows held there; from
 *     each, that replica's sums of the rows held here, sent into the engine
 *     as its. */
static tl_status exchange(tl_worker *w, exchanged what)
{
    tl_estimator *est = w->est;
    tl_emb_engine *eng = est->opt.embedding;
    tl_est_emb *e = &w->emb;
    int R = est->R;
    int64_t *sc = e->a2a, *so = sc + R, *rc = so + R, *ro = rc + R, ns = 0, nr = 0;
    tl_status st = TL_OK;
    for (int q = 0; q < R && st == TL_OK; q++) {
        sc[q] = rc[q] = 0;
        so[q] = ns;
        ro[q] = nr;
        /* Its step's rows held here, and this replica's held on its host. */
        int64_t *theirs = what == ROWS ? &sc[q] : &rc[q], *mine = what == ROWS ? &rc[q] : &sc[q];
        if (plays(w, q) && (st = tl_emb_rows_floats(eng, &e->rdd[q], est->host, theirs)) == TL_OK)
            st = tl_emb_rows_floats(eng, &e->dd, q / est->Rl, mine);
        ns += sc[q];
        nr += rc[q];
    }
    if (st != TL_OK || (st = grow(&e->rows_out, &e->rows_out_cap, ns + 1)) != TL_OK ||
        (st = grow(&e->rows_in, &e->rows_in_cap, nr + 1)) != TL_OK)
        return st;
    for (int q = 0; q < R && st == TL_OK; q++)
        if (plays(w, q))
            st = what == ROWS ? tl_emb_export_rows(eng, &e->rdd[q], e->rows_out + so[q], sc[q])
                              : tl_emb_export_gradients(eng, &e->dd, q / est->Rl, e->rows_out + so[q], sc[q]);
    if (st != TL_OK ||
        (st = tl_comm_all_to_all_v(est->comm, w->rank, e->rows_out, sc, so, e->rows_in, rc, ro, TL_COMM_F32)) != TL_OK)
        return st;
    for (int q = 0; q < R && st == TL_OK; q++)
        if (plays(w, q))
            st = what == ROWS ? tl_emb_import_rows(eng, &e->dd, q / est->Rl, e->rows_in + ro[q], rc[q])
                              : tl_emb_send_row_gradients(eng, q, &e->rdd[q], e->rows_in + ro[q], rc[q], e->lrs,
                                                          e->nlr);
    return st;
}

tl_status tl_est_emb_forward(tl_worker *w, const tl_mode_prog *m, tl_exec *x, tl_mode mode)
{
    tl_estimator *est = w->est;
    tl_emb_engine *eng = est->opt.embedding;
    if (eng == NULL)
        return TL_OK;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    tl_est_emb *e = &w->emb;
    int F = c->num_features;
    tl_status st;
    if ((st = tl_emb_recv_dedup(eng, w->rank, &e->dd)) != TL_OK)
        return st;
    /* The other hosts' replicas: their model runs there, and so do their
     * activations; this host sends them its rows. */
    for (int q = 0; q < est->R && est->H > 1 && st == TL_OK; q++)
        if (plays(w, q))
            st = tl_emb_recv_dedup(eng, q, &e->rdd[q]);
    if (st != TL_OK || (est->H > 1 && (st = exchange(w, ROWS)) != TL_OK))
        return st;
    for (int f = 0; f < F; f++)
        e->out[f] = m->emb_leaf[f] != TL_T_INVALID ? tl_exec_value(m->p, x, m->emb_leaf[f]) : e->scratch;
    if ((st = tl_emb_recv_activations(eng, w->rank, &e->dd, e->out, F)) != TL_OK)
        return st;
    for (int q = 0; q < est->R && est->H > 1 && st == TL_OK; q++)
        if (plays(w, q))
            st = tl_emb_recv_activations(eng, q, &e->rdd[q], NULL, 0);
    if (st != TL_OK)
        return st;
    /* See the file's comment: inference steps keep the replicas within the
     * engine's steps in flight. */
    if (mode != TL_MODE_TRAIN && est->R > 1)
        return tl_comm_barrier(est->comm, w->rank);
    return TL_OK;
}

tl_status tl_est_emb_backward(tl_worker *w, const tl_mode_prog *m, tl_exec *x, int64_t step)
{
    tl_estimator *est = w->est;
    tl_emb_engine *eng = est->opt.embedding;
    if (eng == NULL)
        return TL_OK;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    tl_est_emb *e = &w->emb;
    int F = c->num_features;
    for (int f = 0; f < F; f++) {
        const float *g = m->emb_leaf[f] != TL_T_INVALID ? tl_exec_grad(m->p, x, m->emb_leaf[f]) : NULL;
        e->grad[f] = g != NULL ? g : e->zeros;
    }
    if (e->nlr > 0) {
        tl_status st = est->opt.embedding_learning_rates(step, e->lrs, e->nlr, est->opt.embedding_user);
        if (st != TL_OK)
            return tl_callback_failed(st, "embedding_learning_rates");
    }
    tl_status st = tl_emb_send_gradients(eng, w->rank, &e->dd, e->grad, F, e->lrs, e->nlr);
    if (st != TL_OK || est->H == 1)
        return st;
    return exchange(w, GRADIENTS);
}

tl_status tl_est_emb_apply(tl_worker *w)
{
    tl_estimator *est = w->est;
    if (est->opt.embedding == NULL || est->R == 1)
        return TL_OK;
    /* Every replica has sent once all reach this barrier. */
    tl_status st = tl_comm_barrier(est->comm, w->rank);
    if (st == TL_OK)
        st = tl_emb_apply_owned(est->opt.embedding, w->rank);
    for (int q = 0; q < est->R && est->H > 1 && st == TL_OK; q++)
        if (plays(w, q))
            st = tl_emb_apply_owned(est->opt.embedding, q);
    return st;
}

/* job_dlrm.c — what a recommendation job adds to job.c: the Criteo-shaped
 * synthetic data of a planted model (criteo_synth.h) with its oracle AUC,
 * the embedding engine of the configuration's `embedding` section (or
 * --embedding_config=FILE.pb) sized for the job's replicas, and the DLRM's
 * configuration from the model section and the tables. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define SYNTH_TRAIN_DEFAULT 1048576
#define SYNTH_EVAL_DEFAULT 131072
#define SYNTH_CAP_DEFAULT 100000

tl_status cli_criteo_synthetic(const tl_run_config *rc, bool need_train, cli_job *job)
{
    tl_criteo_synth_config c;
    tl_criteo_synth_config_default(&c);
    c.seed = rc->tf_random_seed.set ? (uint64_t)rc->tf_random_seed.value : 0;
    const tl_input_config *in = &rc->input;
    int64_t ntrain = in->synthetic_examples.set ? in->synthetic_examples.value : SYNTH_TRAIN_DEFAULT;
    int64_t neval = in->synthetic_eval_examples.set ? in->synthetic_eval_examples.value : SYNTH_EVAL_DEFAULT;
    int64_t cap = in->synthetic_vocab_cap.set ? in->synthetic_vocab_cap.value : SYNTH_CAP_DEFAULT;
    c.num_examples = ntrain + neval;
    for (int k = 0; k < c.num_categorical; k++)
        c.vocab_sizes[k] = c.vocab_sizes[k] < cap ? c.vocab_sizes[k] : cap;
    tl_criteo_synth *g;
    tl_status st = tl_criteo_synth_create(&c, &g);
    if (st != TL_OK)
        return st;
    /* Without training only the evaluation examples are made. */
    int64_t first = need_train ? 0 : ntrain;
    tl_labeled_data *d = NULL;
    st = tl_criteo_synth_load(g, first, need_train ? ntrain + neval : neval, &d);
    if (st == TL_OK)
        st = tl_criteo_synth_oracle_auc(g, ntrain, neval, &job->oracle_auc);
    tl_criteo_synth_destroy(g);
    if (st != TL_OK) {
        tl_labeled_data_destroy(d);
        return st;
    }
    int64_t skip = need_train ? ntrain : 0;
    job->owned[0] = d;
    job->has_oracle = true;
    job->train = job->test = *d;
    job->train.num_examples = need_train ? ntrain : 0;
    job->test.num_examples = neval;
    job->test.features += skip * d->num_features;
    job->test.labels += skip;
    job->test.ids += skip * d->num_ids;
    return TL_OK;
}

/* The per-replica batch and replica count of the configuration's training. */
static tl_status replicas(const tl_run_config *rc, int *R, int64_t *batch)
{
    tl_topology *topo;
    tl_status st = tl_topology_create(rc, NULL, &topo);
    if (st != TL_OK)
        return st;
    *R = tl_topology_num_replicas(topo);
    *batch = 1;
    tl_input_plan *plan = NULL;
    if (rc->train_batch_size.set && (st = tl_input_plan_create(topo, rc, TL_MODE_TRAIN, &plan)) == TL_OK)
        *batch = plan->model_fn_batch_size > 0 ? plan->model_fn_batch_size : 1;
    tl_input_plan_destroy(plan);
    tl_topology_destroy(topo);
    return st;
}

int cli_job_embedding(cli_job *job, tl_estimator_options *o)
{
    const tl_run_config *r = job->r;
    bool dlrm = strcmp(r->model.model_name, "dlrm") == 0;
    if (r->embedding_json == NULL && r->embedding_config == NULL) {
        if (!dlrm)
            return 0;
        fprintf(stderr, "error: model_name dlrm needs embedding tables: set embedding (a JSON section) or "
                        "embedding_config (a TPUEmbeddingConfiguration .pb)\n");
        return EXIT_BAD_INPUT;
    }
    tl_emb_spec *spec;
    tl_status st = r->embedding_json != NULL
                       ? tl_emb_spec_from_json(r->embedding_json, strlen(r->embedding_json), &spec)
                       : tl_emb_spec_from_proto_file(r->embedding_config, &spec);
    if (st != TL_OK)
        return cli_fail(st);
    /* TPUEstimator sizes TPUEmbedding from the run: a tensor core per replica
     * and the replica's batch (evaluation and prediction steps carry their
     * own). */
    tl_emb_config c = *tl_emb_spec_config(spec);
    int64_t b = 1;
    st = replicas(r, &c.num_tensor_cores, &b);
    c.batch_size_per_tensor_core = b < INT32_MAX ? (int)b : INT32_MAX;
    if (st == TL_OK)
        st = tl_emb_engine_create(&c, &job->emb);
    tl_emb_spec_destroy(spec);
    if (st != TL_OK)
        return cli_fail(st);
    o->embedding = job->emb;
    if (!dlrm)
        return 0;
    /* The DLRM: the features are the dense inputs; each embedding feature's
     * ids travel apart, named by the feature. */
    const tl_emb_config *e = tl_emb_engine_config(job->emb);
    tl_dlrm_config *m = &job->dlrm;
    memset(m, 0, sizeof *m);
    if (e->num_features > TL_DLRM_MAX_FEATURES) {
        fprintf(stderr, "error: dlrm: %d embedding features; at most %d are supported\n", e->num_features,
                TL_DLRM_MAX_FEATURES);
        return EXIT_BAD_INPUT;
    }
    m->num_features = e->num_features;
    for (int f = 0; f < e->num_features; f++)
        m->dims[f] = e->tables[e->features[f].table].dim;
    m->num_bottom = r->model.num_bottom;
    memcpy(m->bottom, r->model.bottom_mlp, sizeof m->bottom);
    m->num_top = r->model.num_top;
    memcpy(m->top, r->model.top_mlp, sizeof m->top);
    m->num_dense = 0; /* the features' width */
    o->model_fn = tl_model_dlrm;
    o->user = m;
    return 0;
}

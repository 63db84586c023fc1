/* job_int.h — what the job's files share (tpuloop/job.h). The job is
 * written against the public API only, as models/ is: job.c builds and
 * runs the job, data.c loads the in-memory datasets, input.c is the
 * input_fn of the file datasets, predictions.c writes predictions. */
#ifndef TL_JOB_INT_H
#define TL_JOB_INT_H

#include "tpuloop/tpuloop.h"
#include "tpuloop/job.h"

struct tl_job_files;

/* train_and_evaluate's listener state (train_eval.c). */
typedef struct tl_job_tae {
    bool active;                 /* a train_and_evaluate is running */
    bool first;                  /* the next save is the starting state's (not evaluated) */
    int64_t every_steps;         /* eval_every_n_steps, or 0 */
    int64_t every_secs;          /* throttle_secs */
    bool triggered;              /* the timer fired once */
    int64_t last_step;
    double last_time;
    int count;                   /* evaluations run */
    tl_job_evaluation last;
    bool best_known;             /* best_exporter: the lowest loss yet */
    double best_loss;
    char best_path[4400];        /* the last export, "" without */
} tl_job_tae;

struct tl_job {
    const tl_config *cfg;        /* borrowed */
    const tl_run_config *r;      /* tl_config_get(cfg) */
    tl_job_options opt;
    /* In-memory data (data.c): what train and test borrow from. */
    tl_labeled_data *owned[2];
    tl_labeled_data train;       /* empty unless the job trains */
    tl_labeled_data test;
    bool has_oracle;             /* criteo_synthetic: the planted model's AUC on the test examples */
    double oracle_auc;
    /* A file dataset (input.c). */
    bool file_input;
    tl_input train_input;        /* files; set when the job trains */
    tl_input eval_input;         /* eval_files (files when null) */
    struct tl_job_files *files[2];
    /* The model. */
    tl_emb_spec *emb_spec;       /* the embedding section's tables; NULL without */
    tl_dlrm_config dlrm;         /* model_name dlrm's, borrowed by the estimator */
    tl_dcn_config dcn;           /* model_name dcn's, borrowed by the estimator */
    tl_transformer_data transformer; /* model_name transformer's, borrowed by the estimator */
    tl_mesh *mesh;               /* layout_map's: ("batch", "model") of (replicas, num_cores_per_replica) */
    tl_layout_map *layout_map;
    tl_distribution *distribution; /* ModelParallel over them, borrowed by the estimator; NULL without */
    tl_estimator *est;
    bool params_ready;           /* trained or restored: evaluate and predict use them */
    int64_t final_step;          /* the running train's, for on_progress */
    tl_job_tae tae;
};

/* ---- job.c ----------------------------------------------------------------- */

/* Evaluates the estimator's parameters as they are (no restore):
 * tl_job_evaluate's second half (the caller calls on_evaluation). */
tl_status tl_job_evaluate_params(tl_job *job, tl_job_evaluation *res);

/* ---- train_eval.c ------------------------------------------------------------ */

/* The estimator's after_save listener (tl_estimator_options.after_save):
 * nothing unless a train_and_evaluate runs. */
tl_status tl_job_after_save(tl_estimator *est, int64_t step, const char *checkpoint, void *user);

/* ---- data.c ---------------------------------------------------------------- */

/* Loads the in-memory dataset of the input section (fashion_mnist,
 * synthetic, criteo_synthetic): the training split only when the job
 * trains. Errors: the loaders' (TL_EIO naming data_dir), TL_ENOMEM. */
tl_status tl_job_data_load(tl_job *job);
void tl_job_data_free(tl_job *job);

/* ---- input.c ---------------------------------------------------------------- */

bool tl_job_is_file_dataset(const tl_run_config *r);
/* Sets up train_input (when the job trains) and eval_input. Errors: the
 * patterns' (tl_dataset_from_files), TL_ENOMEM. */
tl_status tl_job_files_open(tl_job *job);
/* The files split 0 (training) or 1 (evaluation) reads, in order; 0 for
 * in-memory data. */
int tl_job_files_list(const tl_job *job, int split, const char *const **names);
/* This process is host 0, or the only one: it reports and writes. */
bool tl_job_host0(const tl_job *job);
/* hosts.c: every host of job->opt.hosts builds the same job — the same
 * version, resolved configuration, topology, seed, model, embedding tables
 * and data — or every host fails naming the first host and field that
 * differ; a host whose creation failed (st) reports its error on every
 * host. Returns st, or the exchange's verdict. */
tl_status tl_job_hosts_agree(tl_job *job, tl_status st);
void tl_job_files_close(tl_job *job);

#endif /* TL_JOB_INT_H */

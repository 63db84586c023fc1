/*
 * tpuloop/job.h — what `tpuloop train`, `evaluate` and `predict` do, as a
 * library: from a resolved run configuration to a job that trains,
 * evaluates, trains and evaluates, and predicts.
 *
 * A job builds, from the configuration alone, what a TPUEstimator user
 * writes by hand around the estimator:
 *
 *   - the model, by model_name (the built-in model_fns of models.h: "mlp",
 *     "cnn", "transformer", "dlrm", "dcn"), with the model section's
 *     optimizer;
 *   - the input of each mode from the input section: a dataset in memory
 *     (fashion_mnist, synthetic, criteo_synthetic) or an input_fn over files
 *     (tfrecord, criteo, csv, idx) deployed as the configuration says;
 *     `epochs` is a property of that input — it repeats that many times and
 *     training ends where it ends, as Estimator.train ends at OutOfRange;
 *   - the embedding tables of the embedding section (or embedding_config),
 *     which the estimator sizes from its own topology (one tensor core per
 *     replica, the replica's batch), as TPUEstimator sizes TPUEmbedding;
 *   - the estimator, with progress and evaluation callbacks.
 *
 * Every default lives in the configuration's option table; a job adds none.
 * The `tpuloop` command is a parser and printer over this header, so a C
 * program (and the Python package) can do all it does:
 *
 *     tl_config *cfg;                        // config.h: defaults, file, env, flags
 *     tl_config_create(&cfg);
 *     tl_config_load_file(cfg, "configs/mlp_fashion_mnist.json");
 *     tl_config_resolve(cfg);
 *     tl_job_options o;
 *     tl_job_options_init(&o);
 *     o.train = true;                        // load the training split too
 *     o.on_progress = print_progress;        // at the log schedule's boundaries
 *     tl_job *job;
 *     if (tl_job_create(cfg, &o, &job) != TL_OK)
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *     tl_job_train_result tr;
 *     tl_job_train(job, &tr);                // resumes from model_dir; to the end of the input
 *     tl_job_evaluation ev;
 *     tl_job_evaluate(job, NULL, &ev);       // the parameters in memory
 *     char digest[65];
 *     tl_job_params_digest(job, digest);
 *     tl_job_destroy(job);
 *     tl_config_destroy(cfg);                // after the job, which borrows it
 *
 * A job is used by one thread at a time, except tl_job_request_stop.
 */
#ifndef TPULOOP_JOB_H
#define TPULOOP_JOB_H

#include "tpuloop/base.h"
#include "tpuloop/config.h"
#include "tpuloop/estimator.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_job tl_job;

/* Where a training call starts, told before its first device loop. */
typedef struct tl_job_train_start {
    const char *model_name;      /* the model section's */
    const char *dataset;         /* the input section's */
    int64_t examples;            /* training examples in memory; -1 for files */
    int64_t from_step;           /* the restored global step; -1 for a new model */
    const char *restored_from;   /* that checkpoint's file; NULL for a new model */
    int64_t final_step;          /* where training ends; -1 when the end of the input decides */
    int64_t global_batch_size;   /* train_batch_size */
    int num_hosts;
    int num_devices;             /* over every host */
    int num_replicas;            /* with num_cores_per_replica (model parallelism); 0: one per device */
    tl_ipl iterations_per_loop;
    /* The embedding tables and their slots (0 without): all of them, and
     * the most one host holds (each host holds its shard of every table). */
    int64_t table_bytes;
    int64_t host_table_bytes;
} tl_job_train_start;

/* One evaluation: the estimator's result, and for criteo_synthetic the
 * planted model's AUC on the same examples (the best any model can do). */
typedef struct tl_job_evaluation {
    tl_eval_result result;
    bool has_oracle_auc;
    double oracle_auc;
    /* The checkpoint file whose parameters were evaluated; "" for the
     * parameters in memory. */
    char checkpoint[4096];
} tl_job_evaluation;

typedef struct tl_job_options {
    /* The job trains: the training split is loaded (else only what
     * evaluation and prediction read). */
    bool train;
    /* ... with tl_job_train_and_evaluate (eval_every_n_steps then adds
     * checkpoints to evaluate). */
    bool train_and_evaluate;
    /* At training's start, after the restore (NULL: nothing). */
    void (*on_train_start)(const tl_job_train_start *start, void *user);
    /* At every logging boundary of training (log_step_count_steps); NULL:
     * the estimator's INFO log line. final_step is the start's. */
    void (*on_progress)(const tl_train_log *log, int64_t final_step, void *user);
    /* After every evaluation the job runs (NULL: nothing). */
    void (*on_evaluation)(const tl_job_evaluation *ev, void *user);
    void *user;
    /* The hosts, one process each (tl_estimator_options.hosts), borrowed;
     * NULL: this process is every host. Every process creates the job
     * with the same configuration and data: tl_job_create compares them
     * first (the tpuloop version, every resolved option, the model, the
     * embedding tables, the data files or the in-memory data) and fails on
     * every host, naming the host and the first field that differs, or
     * the error of a host that could not create its job. The callbacks run
     * on host 0 only. */
    tl_comm *hosts;
} tl_job_options;

/* No callbacks, train false. */
TL_API void tl_job_options_init(tl_job_options *o);

/*
 * Builds the job of a resolved configuration, which it borrows (keep cfg
 * unchanged until tl_job_destroy). Loads the in-memory data (or opens the
 * file input's patterns), reads the embedding configuration and creates the
 * estimator; nothing is traced or trained yet.
 * Errors: TL_EINVAL for a configuration the job cannot run, naming the
 * option and the value (an unknown model_name, dlrm or dcn without
 * embedding tables, more embedding features than the DLRM or DCN takes);
 * TL_EIO when the data is missing or unreadable (fashion_mnist's data_dir
 * is named; there is no fallback to synthetic data, which only `dataset:
 * synthetic` gives); the readers', the embedding configuration's and
 * tl_estimator_create's errors; TL_ENOMEM.
 */
TL_API tl_status tl_job_create(const tl_config *cfg, const tl_job_options *o, tl_job **out);

/* Accepts NULL. */
TL_API void tl_job_destroy(tl_job *job);

typedef struct tl_job_train_result {
    tl_train_result train;
    int64_t restored_from_step;  /* -1 for a new model */
    char restored_from[4096];    /* the checkpoint restored; "" for a new model */
} tl_job_train_result;

/*
 * Trains (tl_estimator_train or _train_input): with a model_dir, from its
 * latest valid checkpoint, then to train_steps (counted from there),
 * max_steps, or the end of the input (epochs) — whichever comes first. A
 * resumed run ends where the uninterrupted one would. Errors: those of
 * tl_estimator_train_input and tl_estimator_restore (TL_EPARSE when every
 * checkpoint in model_dir is corrupt).
 */
TL_API tl_status tl_job_train(tl_job *job, tl_job_train_result *res);

/*
 * TensorFlow's train_and_evaluate, run locally: trains as tl_job_train does
 * and evaluates the checkpoints it saves, as _NewCheckpointListenerForEvaluate
 * does — not the save of the starting state; then a new checkpoint when
 * throttle_secs passed since the last evaluation (EvalSpec.throttle_secs),
 * or, with eval_every_n_steps, every that many steps (the estimator also
 * saves there); and after training the final checkpoint unless it was just
 * evaluated (not after a requested stop). Each evaluation runs between two
 * training loops on the parameters just saved — training goes on with the
 * same bits as without it —, is written to model_dir/eval (TensorBoard's
 * eval run) at its step, and goes to on_evaluation. With best_exporter, a
 * checkpoint whose evaluation loss is below every earlier one (earlier runs'
 * in model_dir/eval included) is copied to model_dir/export/best, whose
 * newest exports_to_keep stay (BestExporter). *last is the last evaluation
 * (zeros when none ran). Errors: TL_EINVAL without model_dir or
 * eval_batch_size, or with throttle_secs 0 and no eval_every_n_steps
 * (TensorFlow's message), or a job created without
 * options.train_and_evaluate; those of tl_job_train and tl_job_evaluate;
 * TL_EIO from the exporter, naming the file.
 */
TL_API tl_status tl_job_train_and_evaluate(tl_job *job, tl_job_train_result *res, tl_job_evaluation *last);

/* How many evaluations the last train_and_evaluate ran. */
TL_API int tl_job_evaluations(const tl_job *job);

/* The last checkpoint best_exporter exported (a file under
 * model_dir/export/best), or NULL. Valid until the next call on the job. */
TL_API const char *tl_job_best_export(const tl_job *job);

/*
 * Loads a checkpoint into the job's estimator: the file checkpoint names
 * (or its TensorFlow prefix without ".safetensors"), or with NULL the latest
 * valid one of model_dir (corrupt newer ones skipped with a warning). The
 * file loaded goes into used (cap bytes) and, for model_dir's, its step
 * into *step (else -1). The estimator loads the parameters when the model
 * is traced, so a variable that does not fit fails the next evaluate,
 * predict or train (tl_estimator_restore). Errors: TL_EINVAL with neither
 * model_dir nor checkpoint; TL_ENOTFOUND "Could not find trained model in
 * model_dir: DIR." (or the missing file named); TL_EPARSE for a corrupt file
 * or a model_dir whose checkpoints are all corrupt; TL_EIO.
 */
TL_API tl_status tl_job_restore(tl_job *job, const char *checkpoint, char *used, size_t cap, int64_t *step);

/*
 * Evaluates eval_steps batches of the evaluation input (with eval_on_tpu
 * false and no eval_steps: all of it) with the parameters of checkpoint (a
 * file, or its TensorFlow prefix without ".safetensors"), or, when NULL,
 * those in memory when this job has trained or restored, else the latest
 * valid checkpoint of model_dir. Errors: TL_ENOTFOUND "Could not find
 * trained model in model_dir: DIR." (or the file named); TL_EINVAL without a
 * checkpoint, model_dir or trained parameters; those of
 * tl_estimator_evaluate_input.
 */
TL_API tl_status tl_job_evaluate(tl_job *job, const char *checkpoint, tl_job_evaluation *res);

/*
 * Predicts every example of the prediction input (eval_files, or the test
 * split), with parameters chosen as tl_job_evaluate chooses them. Free
 * res->values with tl_predict_result_free. Errors: TL_EINVAL without
 * predict_batch_size (named); as tl_job_evaluate's and
 * tl_estimator_predict_input's.
 */
TL_API tl_status tl_job_predict(tl_job *job, const char *checkpoint, tl_predict_result *res);

/*
 * Writes predictions one row per example: its index, the argmax class and
 * the softmax probabilities of its logits (one logit: the sigmoid's
 * P(class 1)) — CSV with a header for a path ending in ".csv", JSON Lines
 * for ".jsonl" or ".json". Errors: TL_EINVAL for any other extension (named,
 * with the two allowed); TL_EIO naming the file and the reason.
 */
TL_API tl_status tl_job_write_predictions(const char *path, const tl_predict_result *res);

/* The extension check of tl_job_write_predictions alone, to refuse a path
 * before the work that leads to it. Errors: TL_EINVAL. */
TL_API tl_status tl_job_check_predictions_path(const char *path);

/* Asks a running (or the next) train to stop at its next loop boundary,
 * after a checkpoint: tl_estimator_request_stop. Async-signal-safe. */
TL_API void tl_job_request_stop(tl_job *job);

/* The job's estimator, borrowed (for its summary writer, global step or
 * digest); valid until tl_job_destroy. */
TL_API tl_estimator *tl_job_estimator(tl_job *job);

/* tl_estimator_params_digest of the job's estimator. */
TL_API tl_status tl_job_params_digest(const tl_job *job, char hex[65]);

/* tl_estimator_partition_plan for the job's training data or input (a job
 * created with tl_job_options.train). */
TL_API tl_status tl_job_partition_plan(tl_job *job, char **json);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_JOB_H */

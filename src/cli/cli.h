/* cli.h — what the command's files share. The command uses only the public
 * API (include/tpuloop/).
 *
 * main.c dispatches the commands and loads configurations; config.c is
 * `config` and `devices`; job.c builds the
 * estimator that train.c (`train`), evaluate.c (`evaluate`, `predict`) share,
 * and job_input.c the input_fn of the file datasets;
 * ckpt.c reads checkpoints (`ckpt list`, `ckpt inspect`); data.c and
 * data_convert.c read and write TFRecord files (`data inspect`, `data
 * convert`), the only files here that use an internal header
 * (io/compress.h, for the TFRecord reader and writer). */
#ifndef TL_CLI_H
#define TL_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "tpuloop/tpuloop.h"

#define EXIT_BAD_INPUT 2
#define EXIT_RUNTIME 1

/* Prints "error: <message>" and returns the exit status for st. */
int cli_fail(tl_status st);
/* Prints "error: <message>" and returns 1 whatever st is: for files that
 * exist but cannot be used (a corrupt checkpoint is not a usage error). */
int cli_fail_runtime(tl_status st);
/* Prints "error: ..." and a pointer to `tpuloop help`; returns 2. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Loads and resolves the configuration from [FILE], the environment and the
 * flags; arguments in `allowed` (exact, or a "--x=" prefix) are let through
 * and marked in flags_seen[0..nflags). Returns an exit status (0: *out set). */
int cli_load_config(int argc, char **argv, const char *const *allowed, bool allow_file, tl_config **out,
                    bool *flags_seen, int nflags);
/* The value of the last argument "<prefix>VALUE" (prefix "--x="), or NULL. */
const char *cli_flag_value(int argc, char **argv, const char *prefix);

/* ---- job.c: the estimator of train, evaluate and predict ----------------- */

typedef struct cli_progress {
    int64_t final_step; /* the step training ends at, for "step N/M" */
    bool tty;           /* a progress bar instead of log lines */
} cli_progress;

struct cli_files;

typedef struct cli_job {
    tl_config *cfg;
    const tl_run_config *r;     /* tl_config_get(cfg) */
    tl_labeled_data *owned[2];  /* what train and test borrow from */
    tl_labeled_data train;      /* empty unless the job trains */
    tl_labeled_data test;       /* a file dataset: eval_files, read by predict only */
    tl_estimator *est;
    cli_progress prog;          /* on_log's user data: lives in the job */
    /* A file dataset (job_input.c): train and evaluate read these inputs. */
    bool file_input;
    tl_input train_input;       /* files; set when the job trains */
    tl_input eval_input;        /* eval_files (files when null) */
    struct cli_files *files[2]; /* their input_fn's user data */
    /* A recommendation job (job_dlrm.c). */
    tl_emb_engine *emb;         /* the embedding section's tables; NULL without one */
    tl_dlrm_config dlrm;        /* model_name dlrm's, borrowed by the estimator */
    double oracle_auc;          /* criteo_synthetic: the planted model's AUC on the eval examples */
    bool has_oracle;
} cli_job;

/* ---- job_input.c: the file datasets (tfrecord, criteo, csv, idx) ---------- */

bool cli_is_file_dataset(const tl_run_config *r);
/* Sets up train_input (with need_train) and eval_input; returns an exit status. */
int cli_files_open(cli_job *job, bool need_train);
void cli_files_close(cli_job *job);
/* The records of files (tfrecord: framed, not parsed), for epochs. */
tl_status cli_files_count(cli_job *job, int64_t *count);
/* Train and evaluate the job's data: its input_fn for a file dataset, else
 * the in-memory train and test. */
tl_status cli_job_train(cli_job *job, tl_train_result *tr);
tl_status cli_job_evaluate(cli_job *job, tl_eval_result *er);
tl_status cli_job_predict(cli_job *job, tl_predict_result *pr);

/* ---- job_dlrm.c: Criteo-shaped synthetic data, the embedding engine, DLRM - */

/* The criteo_synthetic dataset in memory: synthetic_examples to train (when
 * need_train) and synthetic_eval_examples to evaluate, as 13 log(1 + x)
 * dense values and 26 ids; sets job->oracle_auc. */
tl_status cli_criteo_synthetic(const tl_run_config *rc, bool need_train, cli_job *job);
/* The engine of the embedding section (one tensor core per replica, the
 * replica's training batch) into job->emb and o->embedding, and for
 * model_name dlrm the model. Returns an exit status. */
int cli_job_embedding(cli_job *job, tl_estimator_options *o);

/* Loads the configuration: cli_load_config with allow_file, into job->cfg
 * and job->r. Returns an exit status; close the job in any case. */
int cli_job_config(cli_job *job, int argc, char **argv, const char *const *allowed, bool *seen, int nseen);
/* Then loads the dataset (only its test split without need_train), turns
 * input.epochs into train_steps when training, and creates the MLP's
 * estimator. Returns an exit status. */
int cli_job_build(cli_job *job, bool need_train);
void cli_job_close(cli_job *job);

/* Restores the named checkpoint (a file, or its TensorFlow prefix without
 * ".safetensors"), or with NULL the latest valid one of model_dir (corrupt
 * newer ones skipped with a warning), writing the file into used (cap bytes)
 * and, for model_dir's, its step into *step (else -1). Without a checkpoint
 * to load it returns 0 and leaves used "" unless required; then the exit
 * status is 2 without model_dir or checkpoint, and 1 with "Could not find
 * trained model in model_dir: DIR." Otherwise 1 with the reader's or the
 * estimator's error. The estimator loads the file when the model is traced
 * (the first train, evaluate or predict), so the variable checks fail
 * there. */
int cli_restore(cli_job *job, const char *checkpoint, bool required, char *used, size_t cap, int64_t *step);

/* The evaluation as the summary line shows it: loss, accuracy, auc (a
 * binary model), oracle_auc (criteo_synthetic), examples, global_step. A
 * new reference. */
json_t *cli_eval_json(const cli_job *job, const tl_eval_result *er);
/* "evaluation at step N: ..." on stderr. */
void cli_eval_log(const cli_job *job, const tl_eval_result *er);

/* Writes one row per example: its index, the argmax class and the softmax
 * probabilities of its logits; CSV when the path ends in ".csv", else JSON
 * Lines. Returns 0 or errno. */
int cli_write_predictions(const char *path, const tl_predict_result *pr);

/* Predicts the test split, writes path, adds "predictions": {path, rows} to
 * summary, and sets *global_step to the predicting parameters' step. Returns
 * an exit status. */
int cli_predict_to(cli_job *job, const char *path, json_t *summary, int64_t *global_step);

/* Adds params_digest, prints summary as one JSON line on stdout, and writes
 * the same line to summary_path unless NULL. Consumes summary; returns an
 * exit status. */
int cli_print_summary(cli_job *job, json_t *summary, const char *summary_path);

/* ---- the commands ------------------------------------------------------- */

int cli_train(int argc, char **argv);
int cli_evaluate(int argc, char **argv);
int cli_predict(int argc, char **argv);
int cli_ckpt(int argc, char **argv);
/* `config` and `devices` (config.c). */
int cli_config(int argc, char **argv);
int cli_devices(int argc, char **argv);
/* `data inspect` (data.c) and `data convert` (data_convert.c). */
int cli_data(int argc, char **argv);
int cli_data_convert(int argc, char **argv);

#endif /* TL_CLI_H */

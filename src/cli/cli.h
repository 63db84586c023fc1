/* cli.h — what the command's files share. The command uses only the public
 * API (include/tpuloop/).
 *
 * main.c dispatches the commands and loads configurations; config.c is
 * `config` and `devices`; run.c is what train.c (`train`), evaluate.c
 * (`evaluate`) and predict.c (`predict`) share over the job layer
 * (tpuloop/job.h);
 * ckpt.c reads checkpoints (`ckpt list`, `ckpt inspect`); data.c and
 * data_convert.c read and write TFRecord files (`data inspect`, `data
 * convert`) through tpuloop/tfrecord.h. */
#ifndef TL_CLI_H
#define TL_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "tpuloop/job.h"
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

/* ---- run.c: what train, evaluate and predict share ---------------------- */

/* The printer's state: lives beside the job, which calls it back. */
/* hosts.c: joins the hosts when an MPI launcher started this process (each
 * process one host; else nothing, and no MPI). The communicator lives until
 * the process exits: MPI is initialised once. */
tl_status cli_hosts_join(void);
/* Tags the log lines and errors with the job's name and this host. */
void cli_hosts_name(const char *job_name);
tl_comm *cli_hosts(void);   /* NULL on one host */
/* The command fails on this host: the others are told (their waits end). */
void cli_hosts_abort(tl_status st, const char *msg);
int cli_hosts_count(void);
bool cli_host0(void);       /* host 0, or the only one: it prints the results */
const char *cli_hosts_tag(void); /* "job/host h of H", NULL on one host */

typedef struct cli_run {
    tl_config *cfg;
    const tl_run_config *r;   /* tl_config_get(cfg) */
    tl_job *job;
    bool tty;                 /* a progress bar instead of log lines */
} cli_run;

/* Loads the configuration (cli_load_config with allow_file) into run->cfg
 * and run->r. Returns an exit status; close the run in any case. */
int cli_run_config(cli_run *run, int argc, char **argv, const char *const *allowed, bool *seen, int nseen);
/* Then creates the job (train: with the training data; tae: for
 * train_and_evaluate, each evaluation logged), its progress and start lines
 * printed on stderr. Returns an exit status. */
int cli_run_create(cli_run *run, bool train, bool tae);
void cli_run_close(cli_run *run);

/* tl_job_restore for evaluate and predict: the exit status is 2 without
 * model_dir or checkpoint, 1 for anything else (a checkpoint that is
 * missing or cannot be read). */
int cli_run_restore(cli_run *run, const char *checkpoint, char *used, size_t cap, int64_t *step);

/* The evaluation as the summary line shows it: loss, accuracy, auc (a
 * binary model), oracle_auc (criteo_synthetic), examples, global_step. A
 * new reference. */
json_t *cli_eval_json(const tl_job_evaluation *ev);
/* "evaluation at step N: ..." on stderr. */
void cli_eval_log(const tl_job_evaluation *ev);

/* Predicts, writes path, adds "predictions": {path, rows} to summary, and
 * sets *global_step to the predicting parameters' step. Returns an exit
 * status. */
int cli_predict_to(cli_run *run, const char *path, json_t *summary, int64_t *global_step);

/* Adds params_digest, prints summary as one JSON line on stdout, and writes
 * the same line to summary_path unless NULL. Consumes summary; returns an
 * exit status. */
int cli_print_summary(cli_run *run, json_t *summary, const char *summary_path);

/* ---- the commands ------------------------------------------------------- */

int cli_train(int argc, char **argv);
int cli_train_and_evaluate(int argc, char **argv);
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

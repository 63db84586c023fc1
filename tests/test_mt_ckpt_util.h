/*
 * test_mt_ckpt_util.h — what the threaded tests share: an allocation
 * counter (test_mt_estimator_loop.c, test_mt_hostcall.c,
 * test_mt_eval_metrics.c) and, for the model_dir tests (test_mt_ckpt.c,
 * test_mt_resume.c), scratch directories, a tiny classifier with
 * dropout, synthetic data, one-call training runs, checkpoint listings, a
 * log catcher and an event-file reader; and, for the embedding tests
 * (test_mt_estimator_embedding.c, test_estimator_vocab.c), the engine of a
 * one-table configuration. test_mt_ckpt_util.c holds no tests;
 * like the tests it uses only the assertion macros of the TSan stand-in.
 */
#ifndef TPULOOP_TESTS_MT_CKPT_UTIL_H
#define TPULOOP_TESTS_MT_CKPT_UTIL_H

#include "tpuloop/tpuloop.h"

/* Routes tpuloop's allocations through a counter (on) or back to malloc
 * (off); mtck_allocations() is the count so far, from every thread. */
void mtck_count_allocations(bool on);
long mtck_allocations(void);

/* A new empty directory under /tmp (malloc'd path); mtck_rmtree removes
 * it with everything in it. */
char *mtck_tmpdir(void);
void mtck_rmtree(const char *dir);
/* A new empty directory as mtck_tmpdir's, and its flag "--model_dir=<it>"
 * written into flag (n bytes: the test fails if it does not fit). */
char *mtck_model_dir(char *flag, size_t n);
/* mtck_rmtree(dir), then free(dir): the end of a directory from mtck_tmpdir
 * or mtck_model_dir. */
void mtck_drop_dir(char *dir);
/* dir/name in a malloc'd string. */
char *mtck_join(const char *dir, const char *name);
bool mtck_exists(const char *path);

/* The model: features -> dense(hidden, relu) "dense" -> dropout 0.1 ->
 * dense(classes) "dense_1", mean softmax cross-entropy. options.user
 * points to an mtck_model. */
typedef struct mtck_model {
    int hidden;
    int classes;
} mtck_model;
tl_status mtck_model_fn(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user);

/* n planted-model examples of MTCK_FEATURES features and `classes` classes. */
#define MTCK_FEATURES 12
tl_labeled_data *mtck_data(int64_t n, int classes, uint64_t seed);
/* The same as images (n, side, side): side * side features, learnable. */
tl_labeled_data *mtck_images(int64_t n, int64_t side, int classes, uint64_t seed);

/* A resolved configuration from --flags (fails the test on error). */
tl_config *mtck_config(int argc, const char *const *argv);

/* An estimator for flags with options o (NULL: the model {16, 4}, Adam
 * lr 0.01). *cfg_out must be destroyed after the estimator. */
tl_estimator *mtck_estimator(int argc, const char *const *argv, const tl_estimator_options *o, tl_config **cfg_out);

/* Creates an estimator from flags with the default options, trains on data
 * and returns train's status; digest (may be NULL) gets params_digest. The
 * estimator is destroyed before return. */
tl_status mtck_train(int argc, const char *const *argv, const tl_labeled_data *data, tl_train_result *tr,
                     char digest[65]);

/* The steps of dir's checkpoint files, ascending, into out (up to max);
 * returns how many there are (0 when dir does not exist). */
int mtck_steps(const char *dir, int64_t *out, int max);

/* Captures every log line (at INFO and up) from now until mtck_log_stop;
 * mtck_log_has says whether some line contains every given needle. */
void mtck_log_start(void);
/* The same at level (tl_set_log_level too): what a program that logs from
 * level up — the CLI: TL_LOG_WARN — shows. */
void mtck_log_start_at(tl_log_level level);
void mtck_log_stop(void);
bool mtck_log_has(const char *needle1, const char *needle2);

/* The scalar events tagged tag in every event file of dir (not its
 * subdirectories): their steps and values, in file order; returns the count
 * (up to max stored). */
int mtck_scalars(const char *dir, const char *tag, int64_t *steps, float *values, int max);

/* The SessionLogs and "loss" scalars of every event file of dir (not its
 * subdirectories), files in name order (TensorBoard's), events in file
 * order; returns the count (up to max stored). */
typedef struct mtck_event {
    int file;           /* index of its file in name order */
    int64_t step;
    int status;         /* a SessionLog's tl_session_status; 0 for a "loss" scalar */
    char path[512];     /* a SessionLog's checkpoint_path */
    float loss;         /* a "loss" scalar's value */
} mtck_event;
int mtck_events(const char *dir, mtck_event *out, int max);

/* tl_emb_config_default with table *t read by feature *f alone (both
 * borrowed until the engine is created: tl_emb_engine_create copies them). */
void mtck_emb_config1(tl_emb_config *c, const tl_emb_table_config *t, const tl_emb_feature_config *f);

/* The engine of configuration c (fails the test on error). */
tl_emb_engine *mtck_emb_engine(const tl_emb_config *c);

/* The text of the file at path (up to 16 KiB: the test fails on a larger
 * one) with every mark in it replaced by with; malloc'd. The tests of
 * earlier formats read their files so, a directory or file name put back
 * where it was written as a mark (test_data_dataset_state.c too). */
char *mtck_read_replacing(const char *path, const char *mark, const char *with);

/* Flips one bit of the byte at offset from the end of the file. */
void mtck_flip_byte(const char *path, long from_end);

#endif /* TPULOOP_TESTS_MT_CKPT_UTIL_H */

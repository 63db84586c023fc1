/*
 * test_cli_util.h — what the tests of the `tpuloop` command share: running
 * the built binary (TPULOOP_CLI, else build/bin/tpuloop) to completion or in
 * the background (to signal it), its output as JSON, scratch directories and
 * a tiny Fashion-MNIST-format dataset that loads in a millisecond, so a test
 * can afford dozens of training runs. test_cli_util.c holds no tests.
 *
 * Every run checks that the command's stderr has no sanitizer report (the
 * sanitizer build instruments the command too) and that it did not die of an
 * unexpected signal.
 */
#ifndef TPULOOP_TESTS_CLI_UTIL_H
#define TPULOOP_TESTS_CLI_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

typedef struct tc_result {
    int status; /* the exit status; -1 when killed by a signal */
    int signal; /* the signal that killed it, or 0 */
    char *out;  /* stdout and stderr, whole (malloc'd) */
    char *err;
} tc_result;

/* Runs `tpuloop ARGS` through the shell, with env prefixed ("A=1 " or NULL)
 * and TPULOOP_DEVICE_COUNT and TF_CONFIG unset. */
tc_result tc_run(const char *env, const char *args);
/* The same with printf-style arguments. */
tc_result tc_runf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tc_done(tc_result *r);

/* Runs `mpirun --allow-run-as-root --oversubscribe LAUNCH` (launch names the
 * binary as "@tpuloop": "-np 2 @tpuloop train ..."), with no standard input,
 * under `timeout` of limit_s seconds: a launch that hangs fails the test. */
tc_result tc_mpirun(const char *launch, int limit_s);
/* The binary's path. */
const char *tc_binary(void);

/* stdout as one JSON value; fails the test when it is not. */
json_t *tc_json(const tc_result *r);
/* The number at summary["eval"][key] (the test fails when it is missing). */
double tc_eval_num(json_t *summary, const char *key);

/* A command started in the background: argv after the binary's name. */
typedef struct tc_proc {
    pid_t pid;
    char out[64], err[64]; /* the files its stdout and stderr go to */
    double started;        /* tc_now() at the start */
} tc_proc;

void tc_spawn(tc_proc *p, const char *const *argv);
/* Waits up to timeout_s for text to appear in the command's stderr; false
 * when it does not (or the command ended first). */
bool tc_wait_for_err(const tc_proc *p, const char *text, double timeout_s);
/* Waits for the command to end and collects its result; after timeout_s it
 * kills the command and fails the test (Criterion's own .timeout is not
 * used: overlapping timed tests leak in its runner, which the sanitizer run
 * reports). */
tc_result tc_finish(tc_proc *p, double timeout_s);

/* Seconds on the monotonic clock; tc_sleep sleeps s (>= 0) seconds. */
double tc_now(void);
void tc_sleep(double s);

/* Splits a command line at spaces into a NULL-terminated argv in buf (its
 * strings point into line, which is modified); returns argv. */
const char **tc_split(char *line, const char **buf, int cap);

/* A new empty directory under /tmp (malloc'd); tc_rmtree removes it and
 * everything in it. */
char *tc_tmpdir(void);
void tc_rmtree(const char *dir);

/* The whole file (malloc'd), NULL when it cannot be read. */
char *tc_slurp(const char *path);

/* Writes the four uncompressed IDX files of Fashion-MNIST into dir:
 * n_train and n_test images of side x side pixels, labels 0..9, every byte a
 * pure function of its index (so every run of a test sees the same data). */
void tc_write_tiny_mnist(const char *dir, int n_train, int n_test, int side);

#endif /* TPULOOP_TESTS_CLI_UTIL_H */

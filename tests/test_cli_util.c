/* test_cli_util.c — helpers of the `tpuloop` command's tests (see
 * test_cli_util.h). No tests here. */
#define _GNU_SOURCE
#include "test_cli_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *binary(void)
{
    const char *cli = getenv("TPULOOP_CLI");
    return cli ? cli : "build/bin/tpuloop";
}

char *tc_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *s = malloc(cap);
    cr_assert_not_null(s);
    while ((k = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n < 1024) {
            s = realloc(s, cap *= 2);
            cr_assert_not_null(s);
        }
    }
    s[n] = '\0';
    fclose(f);
    return s;
}

static void check_clean(const tc_result *r, const char *what)
{
    /* Under the sanitizer build the command itself is instrumented. */
    cr_assert(!strstr(r->err, "Sanitizer") && !strstr(r->err, "runtime error:"), "tpuloop %s:\n%s", what, r->err);
}

tc_result tc_run(const char *env, const char *args)
{
    char out[] = "/tmp/tpuloop-cli-out-XXXXXX", err[] = "/tmp/tpuloop-cli-err-XXXXXX";
    int fo = mkstemp(out), fe = mkstemp(err);
    cr_assert(fo >= 0 && fe >= 0);
    close(fo);
    close(fe);
    size_t cap = strlen(args) + strlen(binary()) + (env ? strlen(env) : 0) + 256;
    char *cmd = malloc(cap);
    cr_assert_not_null(cmd);
    snprintf(cmd, cap, "env -u TPULOOP_DEVICE_COUNT -u TF_CONFIG %s %s %s >%s 2>%s", env ? env : "", binary(), args,
             out, err);
    int rc = system(cmd);
    free(cmd);
    tc_result r = {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 0, tc_slurp(out), tc_slurp(err)};
    cr_assert(r.out != NULL && r.err != NULL);
    unlink(out);
    unlink(err);
    check_clean(&r, args);
    return r;
}

tc_result tc_runf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *args = NULL;
    int n = vasprintf(&args, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0);
    tc_result r = tc_run(NULL, args);
    free(args);
    return r;
}

void tc_done(tc_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

json_t *tc_json(const tc_result *r)
{
    json_error_t e;
    json_t *j = json_loads(r->out, 0, &e);
    cr_assert_not_null(j, "stdout is not JSON (%s):\n%s\nstderr:\n%s", e.text, r->out, r->err);
    return j;
}

double tc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tc_sleep(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

void tc_spawn(tc_proc *p, const char *const *argv)
{
    snprintf(p->out, sizeof p->out, "/tmp/tpuloop-cli-out-XXXXXX");
    snprintf(p->err, sizeof p->err, "/tmp/tpuloop-cli-err-XXXXXX");
    int fo = mkstemp(p->out), fe = mkstemp(p->err);
    cr_assert(fo >= 0 && fe >= 0);
    int n = 0;
    while (argv[n] != NULL)
        n++;
    const char **full = calloc((size_t)n + 2, sizeof *full);
    cr_assert_not_null(full);
    full[0] = binary();
    for (int i = 0; i < n; i++)
        full[i + 1] = argv[i];
    p->started = tc_now();
    p->pid = fork();
    cr_assert(p->pid >= 0);
    if (p->pid == 0) {
        /* The command must see the default dispositions whatever the test
         * runner ignores (a background job ignores SIGINT). */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        unsetenv("TPULOOP_DEVICE_COUNT");
        unsetenv("TF_CONFIG");
        dup2(fo, STDOUT_FILENO);
        dup2(fe, STDERR_FILENO);
        execv(full[0], (char *const *)full);
        _exit(127);
    }
    free(full);
    close(fo);
    close(fe);
}

bool tc_wait_for_err(const tc_proc *p, const char *text, double timeout_s)
{
    double end = tc_now() + timeout_s;
    while (tc_now() < end) {
        char *s = tc_slurp(p->err);
        bool found = s != NULL && strstr(s, text) != NULL;
        free(s);
        if (found)
            return true;
        siginfo_t info;
        memset(&info, 0, sizeof info);
        if (waitid(P_PID, (id_t)p->pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == p->pid)
            return false; /* it ended (and is left for tc_finish to reap) */
        tc_sleep(0.0005);
    }
    return false;
}

tc_result tc_finish(tc_proc *p, double timeout_s)
{
    int status = 0;
    pid_t w;
    double end = tc_now() + timeout_s;
    bool late = false;
    while ((w = waitpid(p->pid, &status, WNOHANG)) == 0) {
        if (!late && tc_now() > end) {
            kill(p->pid, SIGKILL);
            late = true;
        }
        tc_sleep(0.001);
    }
    cr_assert_eq(w, p->pid);
    if (late) {
        unlink(p->out);
        unlink(p->err);
        cr_assert_fail("the command was still running after %g s (killed)", timeout_s);
    }
    tc_result r = {WIFEXITED(status) ? WEXITSTATUS(status) : -1, WIFSIGNALED(status) ? WTERMSIG(status) : 0,
                   tc_slurp(p->out), tc_slurp(p->err)};
    cr_assert(r.out != NULL && r.err != NULL);
    unlink(p->out);
    unlink(p->err);
    check_clean(&r, "(background)");
    return r;
}

const char **tc_split(char *line, const char **buf, int cap)
{
    int n = 0;
    for (char *tok = strtok(line, " "); tok != NULL; tok = strtok(NULL, " ")) {
        cr_assert(n < cap - 1, "too many arguments");
        buf[n++] = tok;
    }
    buf[n] = NULL;
    return buf;
}

char *tc_tmpdir(void)
{
    char *d = strdup("/tmp/tpuloop-cli-dir-XXXXXX");
    cr_assert_not_null(d);
    cr_assert_not_null(mkdtemp(d));
    return d;
}

void tc_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
            tc_rmtree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void put_be32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                          (unsigned char)v};
    cr_assert_eq(fwrite(b, 1, 4, f), 4u);
}

static void write_split(const char *dir, const char *prefix, int n, int side, uint32_t salt)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    put_be32(f, 0x00000801);
    put_be32(f, (uint32_t)n);
    unsigned char *labels = malloc((size_t)n);
    cr_assert_not_null(labels);
    for (int i = 0; i < n; i++) {
        labels[i] = (unsigned char)((i * 7u + salt) % 10u);
        fputc(labels[i], f);
    }
    cr_assert_eq(fclose(f), 0);
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
    f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    put_be32(f, 0x00000803);
    put_be32(f, (uint32_t)n);
    put_be32(f, (uint32_t)side);
    put_be32(f, (uint32_t)side);
    /* A bright band whose place is the label, over a hashed background:
     * learnable, and the same bytes every time. */
    for (int i = 0; i < n; i++)
        for (int p = 0; p < side * side; p++) {
            uint32_t h = (uint32_t)(i * side * side + p) * 2654435761u ^ salt;
            int band = p % 10 == labels[i];
            fputc(band ? 200 + (int)(h >> 29) : (int)(h >> 26), f);
        }
    cr_assert_eq(fclose(f), 0);
    free(labels);
}

void tc_write_tiny_mnist(const char *dir, int n_train, int n_test, int side)
{
    write_split(dir, "train", n_train, side, 1);
    write_split(dir, "t10k", n_test, side, 2);
}

tc_result tc_mpirun(const char *launch, int limit_s)
{
    /* "@tpuloop" in launch is the binary (an MPMD launch names it twice). */
    size_t cap = strlen(launch) * 2 + 16 * strlen(binary()) + 1024, n = 0;
    char *tail = malloc(cap);
    cr_assert_not_null(tail);
    for (const char *p = launch; *p != '\0';) {
        if (strncmp(p, "@tpuloop", 8) == 0) {
            n += (size_t)snprintf(tail + n, cap - n, "%s", binary());
            p += 8;
        } else {
            tail[n++] = *p++;
        }
        cr_assert(n < cap - 1);
    }
    tail[n] = '\0';
    /* Open MPI's own leaks are not ours (tests/mpi/lsan.supp; test_mpi.c). */
    char *args = NULL;
    cr_assert(asprintf(&args, "LSAN_OPTIONS=suppressions=tests/mpi/lsan.supp:print_suppressions=0 "
                              "OMPI_MCA_mca_base_component_disable_dlclose=1 "
                              "ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0 "
                              "timeout -k 5 %d mpirun --allow-run-as-root --oversubscribe %s </dev/null",
                       limit_s, tail) > 0);
    free(tail);
    char out[] = "/tmp/tpuloop-cli-out-XXXXXX", err[] = "/tmp/tpuloop-cli-err-XXXXXX";
    int fo = mkstemp(out), fe = mkstemp(err);
    cr_assert(fo >= 0 && fe >= 0);
    close(fo);
    close(fe);
    char *cmd = NULL;
    cr_assert(asprintf(&cmd, "env -u TPULOOP_DEVICE_COUNT -u TF_CONFIG %s >%s 2>%s", args, out, err) > 0);
    int rc = system(cmd);
    tc_result r = {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 0, tc_slurp(out), tc_slurp(err)};
    cr_assert(r.out != NULL && r.err != NULL);
    unlink(out);
    unlink(err);
    cr_assert_neq(r.status, 124, "timed out after %d s: %s\n%s%s", limit_s, cmd, r.out, r.err);
    check_clean(&r, args);
    free(cmd);
    free(args);
    return r;
}

const char *tc_binary(void)
{
    return binary();
}

double tc_eval_num(json_t *summary, const char *key)
{
    json_t *v = json_object_get(json_object_get(summary, "eval"), key);
    cr_assert(json_is_number(v), "eval.%s is missing", key);
    return json_number_value(v);
}

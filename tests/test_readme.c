/* The README's examples run as printed: every ```sh block of README.md, in
 * order, as one shell session (sh -e), with `tpuloop` the command under test
 * and /tmp/tpuloop-demo a scratch directory. The blocks' `make` lines are
 * the two commands CI itself runs, and are left out. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli_util.h"

#define DEMO "/tmp/tpuloop-demo"

/* s with every DEMO replaced by dir (malloc'd). */
static char *replace_demo(const char *s, const char *dir)
{
    size_t n = 0, dl = strlen(dir), kl = strlen(DEMO);
    for (const char *p = s; (p = strstr(p, DEMO)) != NULL; p += kl)
        n++;
    char *out = malloc(strlen(s) + n * dl + 1), *o = out;
    cr_assert_not_null(out);
    for (const char *p = s;;) {
        const char *q = strstr(p, DEMO);
        size_t len = q != NULL ? (size_t)(q - p) : strlen(p);
        memcpy(o, p, len);
        o += len;
        if (q == NULL)
            break;
        memcpy(o, dir, dl);
        o += dl;
        p = q + kl;
    }
    *o = '\0';
    return out;
}

Test(readme, every_sh_block_runs_as_printed, .timeout = 900)
{
    char *text = tc_slurp("README.md");
    cr_assert_not_null(text, "README.md (the tests run from the repository's root)");
    const char *cli = getenv("TPULOOP_CLI");
    cr_assert_not_null(cli, "TPULOOP_CLI names the tpuloop under test");
    char bindir[4096];
    snprintf(bindir, sizeof bindir, "%s", cli);
    char *slash = strrchr(bindir, '/');
    cr_assert_not_null(slash);
    *slash = '\0';
    char *dir = tc_tmpdir();
    /* The script: the blocks in order, `make` lines left out. */
    size_t cap = strlen(text) + 256, len = 0;
    char *script = malloc(cap);
    cr_assert_not_null(script);
    len += (size_t)snprintf(script, cap, "set -ex\n"); /* -x: the failing command is named */
    int blocks = 0, commands = 0;
    for (char *p = text; (p = strstr(p, "\n```sh\n")) != NULL;) {
        p += 7;
        char *end = strstr(p, "\n```");
        cr_assert_not_null(end, "an unterminated ```sh block");
        blocks++;
        for (char *line = p; line < end;) {
            char *nl = memchr(line, '\n', (size_t)(end - line));
            size_t l = nl != NULL ? (size_t)(nl - line) : (size_t)(end - line);
            if (!(l >= 5 && strncmp(line, "make ", 5) == 0)) {
                memcpy(script + len, line, l);
                len += l;
                script[len++] = '\n';
                commands += l >= 8 && strncmp(line, "tpuloop ", 8) == 0;
            }
            line += l + 1;
        }
        p = end + 4;
    }
    script[len] = '\0';
    cr_assert(blocks >= 4 && commands >= 15, "%d sh blocks with %d tpuloop commands", blocks, commands);
    char *run = replace_demo(script, dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/session.sh", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(run, f);
    fclose(f);
    char env[8400];
    /* mpirun as root (CI), and Open MPI's own leaks not ours (test_mpi.c). */
    snprintf(env, sizeof env,
             "PATH=%s:%s OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
             "LSAN_OPTIONS=suppressions=tests/mpi/lsan.supp:print_suppressions=0 "
             "OMPI_MCA_mca_base_component_disable_dlclose=1 ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0",
             bindir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    char cmd[16800];
    /* Bounded, as every test that starts mpirun: a hang fails it. */
    snprintf(cmd, sizeof cmd, "env -u TPULOOP_CLI %s timeout -k 5 900 sh %s > %s/out.txt 2> %s/err.txt < /dev/null",
             env, path, dir, dir);
    int rc = system(cmd);
    char errp[4300];
    snprintf(errp, sizeof errp, "%s/err.txt", dir);
    char *err = tc_slurp(errp);
    cr_assert_eq(rc, 0, "the README's session failed (exit %d); its last output:\n%s", rc,
                 err != NULL && strlen(err) > 4000 ? err + strlen(err) - 4000 : err);
    free(err);
    free(run);
    free(script);
    free(text);
    tc_rmtree(dir);
    free(dir);
}

/*
 * test_mpi.c — the MPI communicator across processes: tests/mpi/comm_check.c
 * started by mpirun (as root here: --allow-run-as-root; more processes than
 * cores: --oversubscribe), always under `timeout` and with no standard
 * input, so that a launch that hangs fails the test instead of the suite.
 *
 * The layouts of 4 ranks — 1 process of 4 threads, 2 of 2, 4 of 1 — must
 * give the same bits, over shared memory and over TCP loopback (--mca btl
 * tcp,self, so the network path runs too); a failure on one process must
 * end every process with a message naming it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

/* The program, beside the test binary's build: TPULOOP_CLI is
 * BUILD/bin/tpuloop, the program BUILD/tests/mpi_comm_check. */
static void program(char *buf, size_t cap)
{
    const char *cli = getenv("TPULOOP_CLI");
    if (cli == NULL)
        cli = "build/bin/tpuloop";
    const char *slash = strrchr(cli, '/');
    int dir = slash ? (int)(slash - cli) : 0;
    snprintf(buf, cap, "%.*s/../tests/mpi_comm_check", dir, cli);
}

typedef struct run_result {
    int status; /* exit status, or 128 + signal */
    char *out;  /* stdout and stderr together */
} run_result;

/* Runs `mpirun -np np [mca] comm_check local mode` (np 0: the program alone,
 * no mpirun) under a timeout of limit seconds. Open MPI's own leaks are not
 * ours: LeakSanitizer skips them (tests/mpi/lsan.supp), and to match them
 * it unwinds slowly (Open MPI keeps no frame pointers) while Open MPI keeps
 * its plugins loaded to the end, so that their frames have names. */
static run_result launch(int np, const char *mca, int local, const char *mode, int limit)
{
    char prog[512], cmd[2048];
    program(prog, sizeof prog);
    char mpirun[256] = "";
    if (np > 0)
        snprintf(mpirun, sizeof mpirun, "mpirun --allow-run-as-root --oversubscribe -np %d %s", np, mca ? mca : "");
    snprintf(cmd, sizeof cmd,
             "LSAN_OPTIONS=suppressions=tests/mpi/lsan.supp:print_suppressions=0 "
             "OMPI_MCA_mca_base_component_disable_dlclose=1 ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0 "
             "timeout -k 5 %d %s %s %d %s </dev/null 2>&1",
             limit, mpirun, prog, local, mode);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "%s", cmd);
    size_t cap = 1 << 16, n = 0, k;
    char *out = malloc(cap);
    while ((k = fread(out + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n < 1024)
            out = realloc(out, cap *= 2);
    }
    out[n] = '\0';
    int w = pclose(f);
    run_result r = {WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w), out};
    cr_assert_neq(r.status, 124, "timed out after %d s: %s\n%s", limit, cmd, out);
    cr_assert(!strstr(out, "Sanitizer") && !strstr(out, "runtime error:"), "%s\n%s", cmd, out);
    return r;
}

/* The digest process 0 printed, after checking that every one of np
 * processes printed "ok". */
static void digest_of(const run_result *r, int np, char digest[17])
{
    cr_assert_eq(r->status, 0, "%s", r->out);
    for (int q = 0; q < (np > 0 ? np : 1); q++) {
        char want[64];
        snprintf(want, sizeof want, "process %d: ok digest ", q);
        const char *at = strstr(r->out, want);
        cr_assert_not_null(at, "process %d did not pass:\n%s", q, r->out);
        if (q == 0)
            snprintf(digest, 17, "%.16s", at + strlen(want));
    }
}

Test(mpi, every_layout_of_four_ranks_gives_the_same_bits)
{
    /* The program alone is one process (a singleton: no mpirun, no daemon). */
    run_result alone = launch(0, NULL, 4, "check", 120);
    char want[17], got[17];
    digest_of(&alone, 0, want);
    cr_assert(strstr(alone.out, "(1 processes, ranks 0 to 3 of 4)"), "%s", alone.out);
    free(alone.out);
    static const struct {
        int np, local;
        const char *mca;
    } layouts[] = {
        {2, 2, NULL},                   /* shared memory */
        {2, 2, "--mca btl tcp,self"},   /* TCP loopback */
        {4, 1, "--mca btl tcp,self"},
        {1, 4, NULL},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        run_result r = launch(layouts[i].np, layouts[i].mca, layouts[i].local, "check", 180);
        digest_of(&r, layouts[i].np, got);
        cr_assert_str_eq(got, want, "%d processes x %d ranks (%s): other bits than 1 x 4\n%s", layouts[i].np,
                         layouts[i].local, layouts[i].mca ? layouts[i].mca : "shared memory", r.out);
        free(r.out);
    }
}

/* Every process q of three prints an error line holding want[q] (NULL:
 * none is asked of it), and the launch fails. */
static void every_process_says(const char *mode, const char *const want[3])
{
    run_result r = launch(3, NULL, 2, mode, 60);
    cr_assert_neq(r.status, 0, "%s", r.out);
    for (int q = 0; q < 3; q++) {
        if (want[q] == NULL)
            continue;
        char head[64];
        snprintf(head, sizeof head, "process %d: error: ", q);
        bool found = false;
        for (const char *at = strstr(r.out, head); at != NULL && !found; at = strstr(at + 1, head)) {
            const char *eol = strchr(at, '\n');
            char line[1024];
            snprintf(line, sizeof line, "%.*s", eol ? (int)(eol - at) : (int)strlen(at), at);
            found = strstr(line, want[q]) != NULL;
        }
        cr_assert(found, "want \"%s%s\" in:\n%s", head, want[q], r.out);
    }
    free(r.out);
}

Test(mpi, processes_that_disagree_all_fail_naming_the_ranks)
{
    static const char *const msg = "tl_comm_all_reduce: ranks disagree on count: rank 0 passed 1, rank 4 passed 2";
    static const char *const want[3] = {msg, msg, msg};
    every_process_says("disagree", want);
}

Test(mpi, all_to_all_counts_that_do_not_pair_fail_every_process_alike)
{
    static const char *const msg = "tl_comm_all_to_all_v: rank 1 sends 1 elements to rank 5, which expects 0";
    static const char *const want[3] = {msg, msg, msg};
    every_process_says("mismatch", want);
}

Test(mpi, an_abort_on_one_process_ends_every_process)
{
    static const char *const want[3] = {
        "process 2 (ranks 4 to 5): communicator aborted: rank failed reading its input",
        "process 2 (ranks 4 to 5): communicator aborted: rank failed reading its input",
        "communicator aborted: rank failed reading its input",
    };
    every_process_says("abort", want);
}

Test(mpi, a_silent_process_is_named_after_the_timeout)
{
    /* Processes 0 and 1 each time out, or hear first that the other did. */
    static const char *const msg = "timed out after 3.000 s waiting for process 2 (ranks 4 to 5)";
    static const char *const want[3] = {msg, msg, NULL /* it sleeps until mpirun ends it */};
    every_process_says("stall", want);
}

/* Write failures: each I/O call of a checkpoint write (and of a manager's
 * save) failing in turn through the injector of src/io/file.h, EINTR and
 * short writes, a real file-size limit (RLIMIT_FSIZE), and a real full
 * filesystem (a 64 KiB tmpfs in a private mount namespace, where the test
 * may make one). After every failure the previous checkpoint still loads
 * and no temporary file is left. */
#define _GNU_SOURCE /* unshare, CLONE_NEWNS */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/file.h"
#include "test_io_ckpt_util.h"
#include "testutil.h"
#include "tpuloop/checkpoint.h"

/* The fallible I/O calls one write of the sample to path makes. */
static long calls_of_write(const char *path, int seed)
{
    long c0 = tl_io_call_count();
    ck_sample_write(path, seed);
    return tl_io_call_count() - c0;
}

static void expect_sample(const char *path, int seed)
{
    tl_ckpt_reader *r;
    tl_status st = tl_ckpt_open(path, 0, &r);
    cr_assert_eq(st, TL_OK, "%s does not load: %s", path, tl_last_error());
    ck_sample_check(r, seed);
    tl_ckpt_close(r);
}

Test(io_ckpt_fault, each_call_of_a_write_fails_in_turn)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "model.ckpt-1.safetensors");
    long k_calls = calls_of_write(path, 1);
    cr_assert_geq(k_calls, 6, "open, write, data, pwrite, fsync, rename, directory fsync: only %ld calls", k_calls);
    ck_sample t2;
    ck_sample_fill(&t2, 2);
    static const int errs[] = {ENOSPC, EIO};
    int placed = 0;
    for (size_t e = 0; e < sizeof errs / sizeof errs[0]; e++)
        for (long k = 1; k <= k_calls; k++) {
            tl_ckpt_writer *w = ck_sample_writer(&t2);
            tl_io_fail_after((int)k, errs[e]);
            tl_status st = tl_ckpt_writer_write(w, path);
            tl_io_fail_after(0, 0);
            tl_ckpt_writer_destroy(w);
            cr_assert_eq(st, TL_EIO, "call %ld of %ld failing with %s: got %s (%s)", k, k_calls, strerror(errs[e]),
                         tl_err_name(st), tl_last_error());
            cr_assert(strstr(tl_last_error(), strerror(errs[e])) != NULL, "%s", tl_last_error());
            cr_assert(strstr(tl_last_error(), path) != NULL, "message lacks the path: %s", tl_last_error());
            cr_assert_eq(ck_count_temps(dir), 0, "call %ld: a temporary file is left", k);
            if (strstr(tl_last_error(), "is in place") != NULL) {
                /* the directory fsync after the rename: new content, durability unknown */
                expect_sample(path, 2);
                ck_sample_write(path, 1);
                placed++;
            } else {
                expect_sample(path, 1);
            }
        }
    cr_assert_eq(placed, 2, "only the last call (the directory fsync) comes after the rename");
    cr_log_info("%ld I/O calls per checkpoint write; each failed in turn with ENOSPC and EIO", k_calls);
    ck_rmtree(dir);
    free(path);
    free(dir);
}

Test(io_ckpt_fault, eintr_is_retried_and_short_writes_are_finished)
{
    char *dir = ck_tmpdir();
    char *a = ck_join(dir, "a.safetensors"), *b = ck_join(dir, "b.safetensors");
    long k_calls = calls_of_write(a, 4);
    for (long k = 1; k <= k_calls; k++) {
        tl_io_fail_after((int)k, EINTR);
        ck_sample_write(b, 4);
        tl_io_fail_after(0, 0);
        expect_sample(b, 4);
    }
    tl_io_set_max_write(3);
    ck_sample_write(b, 4);
    tl_io_set_max_write(0);
    size_t la, lb;
    unsigned char *ba = ck_read(a, &la), *bb = ck_read(b, &lb);
    cr_assert_eq(la, lb);
    cr_assert_eq(memcmp(ba, bb, la), 0, "3-byte writes gave other bytes");
    free(ba);
    free(bb);
    cr_assert_eq(ck_count_temps(dir), 0);
    ck_rmtree(dir);
    free(a);
    free(b);
    free(dir);
}

/* A byte damaged between the memory its checksum was computed from and the
 * file (each write of a checkpoint in turn): the writer reads the file back
 * before committing it, so the damaged file never replaces the good one and
 * a resume never meets it. */
Test(io_ckpt_fault, a_file_that_does_not_read_back_is_never_committed)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "model.ckpt-1.safetensors");
    long k_calls = calls_of_write(path, 1);
    ck_sample t2;
    ck_sample_fill(&t2, 2);
    int refused = 0;
    for (long k = 1; k <= k_calls; k++) {
        tl_ckpt_writer *w = ck_sample_writer(&t2);
        tl_io_corrupt_after((int)k);
        tl_status st = tl_ckpt_writer_write(w, path);
        tl_io_corrupt_after(0);
        tl_ckpt_writer_destroy(w);
        cr_assert_eq(ck_count_temps(dir), 0, "call %ld: a temporary file is left", k);
        if (st == TL_OK) { /* call k wrote nothing (open, fsync, rename...) */
            expect_sample(path, 2);
            ck_sample_write(path, 1);
            continue;
        }
        cr_assert_eq(st, TL_EIO, "call %ld: got %s (%s)", k, tl_err_name(st), tl_last_error());
        cr_assert(strstr(tl_last_error(), "the checkpoint written does not read back, so it is not committed: ") !=
                      NULL,
                  "%s", tl_last_error());
        expect_sample(path, 1);
        refused++;
    }
    /* the header, the data section and the header's rewrite with its checksums */
    cr_assert_geq(refused, 3, "only %d of %ld calls were writes whose damage was caught", refused, k_calls);
    ck_rmtree(dir);
    free(path);
    free(dir);
}

/* Writes a 1 MiB checkpoint to path in this process; the previous file
 * (the sample of seed 1) must survive the failure. Returns NULL when all
 * went as expected, else what did not (a static string). */
static const char *big_write_fails(const char *dir, const char *path, const char *want_errno_text)
{
    static char why[1200];
    static float big[1 << 18];
    tl_ckpt_writer *w;
    if (tl_ckpt_writer_create(&w) != TL_OK ||
        tl_ckpt_writer_add(w, "big", TL_CKPT_F32, (int64_t[]){1 << 18}, 1, big) != TL_OK)
        return "cannot build the writer";
    tl_status st = tl_ckpt_writer_write(w, path);
    tl_ckpt_writer_destroy(w);
    if (st != TL_EIO || strstr(tl_last_error(), want_errno_text) == NULL) {
        snprintf(why, sizeof why, "the write gave %s (%s), expected TL_EIO with \"%s\"", tl_err_name(st),
                 tl_last_error(), want_errno_text);
        return why;
    }
    tl_ckpt_reader *r;
    if (tl_ckpt_open(path, 0, &r) != TL_OK) {
        snprintf(why, sizeof why, "the previous checkpoint no longer loads: %s", tl_last_error());
        return why;
    }
    tl_ckpt_tensor_info t;
    bool same = tl_ckpt_find(r, "mask", &t) == TL_OK && t.bytes == 7;
    tl_ckpt_close(r);
    if (!same)
        return "the previous checkpoint changed";
    int temps = ck_count_temps(dir);
    if (temps != 0)
        return "a temporary file is left";
    return NULL;
}

/* Runs fn(ctx) in a child process; its string result comes back through a
 * pipe. Exit 77 with a message means "skipped". */
static int in_child(const char *(*fn)(void *ctx), void *ctx, char *msg, size_t cap)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        close(fds[0]);
        const char *why = fn(ctx);
        int code = why == NULL ? 0 : strncmp(why, "SKIP: ", 6) == 0 ? 77 : 1;
        if (why != NULL && write(fds[1], why, strlen(why)) < 0)
            code = 2;
        _exit(code);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], msg, cap - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child died (status %d)", status);
    return WEXITSTATUS(status);
}

typedef struct fs_ctx {
    char *dir;
    char *path;
} fs_ctx;

static const char *fsize_case(void *ctx)
{
    fs_ctx *c = ctx;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {64 << 10, 64 << 10};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
        return "setrlimit failed";
    return big_write_fails(c->dir, c->path, "File too large");
}

/* A real kernel failure without privileges: the file-size limit makes the
 * data write fail with EFBIG part-way. */
Test(io_ckpt_fault, file_size_limit)
{
    fs_ctx c = {ck_tmpdir(), NULL};
    c.path = ck_join(c.dir, "model.ckpt-1.safetensors");
    ck_sample_write(c.path, 1);
    char msg[1200];
    int code = in_child(fsize_case, &c, msg, sizeof msg);
    cr_assert_eq(code, 0, "%s", msg);
    expect_sample(c.path, 1);
    ck_rmtree(c.dir);
    free(c.path);
    free(c.dir);
}

static bool write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return false;
    bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return ok;
}

static const char *tmpfs_case(void *ctx)
{
    fs_ctx *c = ctx;
    static char why[512];
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWNS) != 0) {
        /* not root: a user namespace gives the capabilities for its own mounts */
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
            snprintf(why, sizeof why, "SKIP: cannot make a mount namespace (unshare: %s)", strerror(errno));
            return why;
        }
        char map[64];
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
        bool ok = write_text("/proc/self/uid_map", map);
        write_text("/proc/self/setgroups", "deny");
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)gid);
        ok = ok && write_text("/proc/self/gid_map", map);
        if (!ok)
            return "SKIP: cannot map the user into the new user namespace";
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tpuloop-test", c->dir, "tmpfs", 0, "size=64k") != 0) {
        snprintf(why, sizeof why, "SKIP: cannot mount a tmpfs (%s)", strerror(errno));
        return why;
    }
    tl_ckpt_writer *w;
    ck_sample s;
    ck_sample_fill(&s, 1);
    w = ck_sample_writer(&s);
    tl_status st = tl_ckpt_writer_write(w, c->path);
    tl_ckpt_writer_destroy(w);
    if (st != TL_OK) {
        snprintf(why, sizeof why, "the small checkpoint does not fit: %s", tl_last_error());
        return why;
    }
    return big_write_fails(c->dir, c->path, "No space left on device");
}

/* The real thing where the test can make one: ENOSPC from a full tmpfs.
 * The mount lives only in the child's mount namespace and goes with it. */
Test(io_ckpt_fault, full_filesystem)
{
    fs_ctx c = {ck_tmpdir(), NULL};
    c.path = ck_join(c.dir, "model.ckpt-1.safetensors");
    char msg[1200];
    int code = in_child(tmpfs_case, &c, msg, sizeof msg);
    ck_rmtree(c.dir);
    free(c.path);
    free(c.dir);
    if (code == 77) {
        cr_log_warn("full-filesystem case not run: %s", msg + 6);
        cr_skip_test("%s", msg + 6);
    }
    cr_assert_eq(code, 0, "%s", msg);
}

/* A manager's save: every call failing in turn (the checkpoint, the index,
 * the deletion). The directory stays loadable, the manager goes
 * sticky-failed, and a new manager recovers and saves again. */
Test(io_ckpt_fault, each_call_of_a_manager_save_fails_in_turn)
{
    tl_set_log_level(TL_LOG_ERROR);
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    o.keep_checkpoint_max = 2;
    long k_calls = -1;
    for (long k = 0; k_calls < 0 || k <= k_calls; k++) {
        char *dir = ck_tmpdir();
        tl_ckpt_manager *m;
        ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
        for (int s = 1; s <= 3; s++) {
            ck_sample smp;
            ck_sample_fill(&smp, s);
            tl_ckpt_writer *w = ck_sample_writer(&smp);
            long c0 = tl_io_call_count();
            if (s == 3 && k > 0)
                tl_io_fail_after((int)k, ENOSPC);
            tl_status st = tl_ckpt_manager_save(m, w, s * 100);
            tl_io_fail_after(0, 0);
            if (s == 3 && k == 0)
                k_calls = tl_io_call_count() - c0;
            tl_ckpt_writer_destroy(w);
            if (s < 3 || k == 0) {
                cr_assert_eq(st, TL_OK, "%s", tl_last_error());
                continue;
            }
            /* the last call is the unlink of step 100: a failure there is a warning */
            bool deleting = k == k_calls;
            cr_assert_eq(st, deleting ? TL_OK : TL_EIO, "call %ld of %ld: %s (%s)", k, k_calls, tl_err_name(st),
                         tl_last_error());
            cr_assert_eq(ck_count_temps(dir), 0, "call %ld: a temporary file is left", k);
            tl_ckpt_reader *r;
            int64_t step;
            ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
            cr_assert(step == 200 || step == 300, "call %ld: resumes from %lld", k, (long long)step);
            tl_ckpt_close(r);
            tl_ckpt_state *ix;
            ASSERT_OK(tl_ckpt_state_read(dir, &ix));
            for (int i = 0; i < ix->num_paths; i++) {
                char *p = ck_join(dir, ix->all_model_checkpoint_paths[i]);
                char *f = malloc(strlen(p) + 16);
                sprintf(f, "%s.safetensors", p);
                ASSERT_OK(tl_ckpt_open(f, 0, &r));
                tl_ckpt_close(r);
                free(f);
                free(p);
            }
            tl_ckpt_state_destroy(ix);
            if (st != TL_OK) {
                w = ck_sample_writer(&smp);
                ASSERT_ERR(tl_ckpt_manager_save(m, w, 400), TL_EIO, "an earlier checkpoint save failed");
                tl_ckpt_writer_destroy(w);
            }
        }
        tl_ckpt_manager_destroy(m);
        /* a fresh manager recovers and carries on */
        ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
        ck_sample smp;
        ck_sample_fill(&smp, 5);
        tl_ckpt_writer *w = ck_sample_writer(&smp);
        ASSERT_OK(tl_ckpt_manager_save(m, w, 500));
        tl_ckpt_writer_destroy(w);
        int n;
        const int64_t *steps = tl_ckpt_manager_steps(m, &n);
        cr_assert_eq(n, 2, "call %ld: %d kept", k, n);
        cr_assert_eq(steps[1], 500);
        tl_ckpt_manager_destroy(m);
        ck_rmtree(dir);
        free(dir);
    }
    cr_log_info("%ld I/O calls per manager save (checkpoint, index, one deletion); each failed in turn", k_calls);
}

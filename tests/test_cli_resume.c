/* `tpuloop train` with a model_dir, killed and resumed (issue 4's crash
 * test): SIGKILL at 20 moments of a run that saves a checkpoint every step
 * (some of them while a checkpoint is being written), each followed by a
 * resume to the same max_steps, must end with the params_digest of the run
 * never interrupted; SIGTERM and SIGINT stop at a loop boundary with a
 * checkpoint and exit 0 ("stopped": true), and the resume still reaches the
 * same digest; a second SIGINT quits at once.
 *
 * The runs train a tiny MLP on a tiny dataset in Fashion-MNIST's format
 * (64 features, 512 examples: an epoch is 32 steps, so the 40-step runs cross
 * an epoch boundary), so each takes a fraction of a second. The moments come
 * from a fixed seed, as progress rather than wall time (the machine's speed
 * varies): a checkpoint to wait for, then a fraction of the uninterrupted
 * run's mean step time; besides, one kill lands while the data loads, one
 * while config.json is written, and four as a checkpoint's temporary file
 * appears. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_cli_util.h"

#define MAX_STEPS 40
#define KILLS 20

/* The arguments of a tiny run on data in data_dir, as one string. */
static void tiny_args(char *buf, size_t cap, const char *data_dir, const char *model_dir, const char *extra)
{
    int n = snprintf(buf, cap,
                     "train --data_dir=%s --train_batch_size=16 --hidden_units=[8] --devices=2 --tf_random_seed=7 "
                     "--log_step_count_steps=1000%s%s %s",
                     data_dir, model_dir ? " --model_dir=" : "", model_dir ? model_dir : "", extra);
    cr_assert(n > 0 && (size_t)n < cap);
}

/* Runs `tpuloop ARGS` to completion: exit 0, and its summary line. */
static json_t *train_ok(const char *args)
{
    tc_result r = tc_run(NULL, args);
    cr_assert_eq(r.status, 0, "tpuloop %s\nstderr:\n%s", args, r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    return j;
}

static const char *digest_of(json_t *j)
{
    const char *d = json_string_value(json_object_get(j, "params_digest"));
    cr_assert(d != NULL && strlen(d) == 64);
    return d;
}

/* Files in dir whose name contains ".tmp-" and pattern: writes the kill
 * interrupted. The names go to names (cap bytes) unless it is NULL. */
static int temp_files(const char *dir, const char *pattern, char *names, size_t cap)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int n = 0;
    size_t used = 0;
    if (names != NULL)
        names[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".tmp-") == NULL || strstr(e->d_name, pattern) == NULL)
            continue;
        n++;
        if (names != NULL && used < cap)
            used += (size_t)snprintf(names + used, cap - used, "%s ", e->d_name);
    }
    closedir(d);
    return n;
}

/* Polls (every 50 µs) until path exists; false when the command ends or
 * timeout_s passes first. */
static bool wait_for_file(const tc_proc *p, const char *path, double timeout_s)
{
    double end = tc_now() + timeout_s;
    while (access(path, F_OK) != 0) {
        if (tc_now() > end || kill(p->pid, 0) != 0)
            return false;
        siginfo_t info;
        memset(&info, 0, sizeof info);
        if (waitid(P_PID, (id_t)p->pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == p->pid)
            return false;
        tc_sleep(50e-6);
    }
    return true;
}

/* xorshift64*: the kill moments, reproducible. */
static double next_uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
}

Test(cli_resume, sigkill_at_20_moments_then_resume_gives_the_uninterrupted_digest)
{
    char *data = tc_tmpdir();
    tc_write_tiny_mnist(data, 512, 128, 8);
    static const char saves[] = "--max_steps=40 --iterations_per_loop=1 --save_checkpoints_steps=1 "
                                "--keep_checkpoint_max=3";
    char args[2048], line[2048];
    const char *argv[64];

    /* The uninterrupted run, timed from the start of training. */
    char *dir = tc_tmpdir();
    tiny_args(line, sizeof line, data, dir, saves);
    tc_proc p;
    tc_spawn(&p, tc_split(line, argv, 64));
    cr_assert(tc_wait_for_err(&p, "training ", 30), "training never started");
    double t0 = tc_now();
    tc_result r = tc_finish(&p, 120);
    double step_s = (tc_now() - t0) / MAX_STEPS;
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *base = tc_json(&r);
    tc_done(&r);
    cr_assert_eq(json_integer_value(json_object_get(base, "global_step")), MAX_STEPS);
    char want[65];
    snprintf(want, sizeof want, "%s", digest_of(base));
    json_decref(base);
    tc_rmtree(dir);
    free(dir);
    /* Checkpointing does not change the bits: the same run without a model_dir. */
    tiny_args(args, sizeof args, data, NULL, "--max_steps=40 --iterations_per_loop=1");
    json_t *plain = train_ok(args);
    cr_assert_str_eq(digest_of(plain), want, "saving checkpoints changed the trained parameters");
    json_decref(plain);

    uint64_t seed = 0x5eed0f4b1dULL;
    int killed = 0, mid_write = 0, resumed_from_scratch = 0;
    for (int k = 0; k < KILLS; k++) {
        dir = tc_tmpdir();
        tiny_args(line, sizeof line, data, dir, saves);
        tc_spawn(&p, tc_split(line, argv, 64));
        /* A moment: a fraction u of a step after checkpoint `at` is saved
         * (wall time varies with the machine; progress does not). */
        int at = (int)(next_uniform(&seed) * (MAX_STEPS - 1));
        double u = next_uniform(&seed);
        char ckpt[4200];
        snprintf(ckpt, sizeof ckpt, "%s/model.ckpt-%d.safetensors", dir, at);
        if (k == 0) {
            at = -1; /* at once: while the data loads */
        } else if (k == 3) {
            /* The first write of a run: config.json, before any checkpoint. */
            at = -1;
            double end = tc_now() + 10;
            while (temp_files(dir, "", NULL, 0) == 0 && tc_now() < end)
                ;
        } else {
            cr_assert(wait_for_file(&p, ckpt, 30), "run %d: %s never appeared", k, ckpt);
            tc_sleep(u * step_s);
            /* Every fourth: the next checkpoint write, as soon as its
             * temporary file shows up. */
            double end = tc_now() + 0.5;
            while (k % 4 == 3 && temp_files(dir, ".safetensors", NULL, 0) == 0 && tc_now() < end)
                ;
        }
        kill(p.pid, SIGKILL);
        r = tc_finish(&p, 120);
        cr_assert(r.signal == SIGKILL || r.status == 0, "run %d: status %d signal %d\n%s", k, r.status, r.signal,
                  r.err);
        killed += r.signal == SIGKILL;
        mid_write += temp_files(dir, "", NULL, 0) > 0;
        tc_done(&r);

        tiny_args(args, sizeof args, data, dir, saves);
        json_t *j = train_ok(args);
        cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), MAX_STEPS, "run %d", k);
        cr_assert_str_eq(digest_of(j), want, "run %d, killed %.2f steps after checkpoint %d, resumed from step %lld",
                         k, u, at, (long long)json_integer_value(json_object_get(j, "restored_from_step")));
        resumed_from_scratch += json_is_null(json_object_get(j, "restored_from_step"));
        json_decref(j);
        /* What the checkpoint manager promises to clean up: the dead run's
         * temporary checkpoint, index and config.json files. */
        char left[1024];
        cr_assert_eq(temp_files(dir, ".safetensors", left, sizeof left) + temp_files(dir, "checkpoint.", NULL, 0) +
                         temp_files(dir, "config.json", NULL, 0),
                     0,
                     "run %d: the resumed run cleans up the dead run's temporary files: %s", k, left);
        tc_rmtree(dir);
        free(dir);
    }
    cr_log_info("%d of %d runs killed (the others had finished), %d of them in the middle of a write, %d resumed "
                "from scratch",
                killed, KILLS, mid_write, resumed_from_scratch);
    cr_assert_geq(killed, KILLS - 2, "the kills land before the end of training");
    tc_rmtree(data);
    free(data);
}

Test(cli_resume, sigterm_stops_at_a_loop_boundary_with_a_checkpoint_and_resumes)
{
    char *data = tc_tmpdir(), *dir = tc_tmpdir();
    tc_write_tiny_mnist(data, 512, 128, 8);
    /* Long enough to be stopped in the middle; checkpoints only at the
     * start and the graceful stop (save_checkpoints_secs' default). */
    static const char run[] = "--max_steps=20000 --iterations_per_loop=2";
    char args[2048], line[2048];
    const char *argv[64];
    tiny_args(args, sizeof args, data, NULL, run);
    json_t *whole = train_ok(args);
    char want[65];
    snprintf(want, sizeof want, "%s", digest_of(whole));
    double train_s = json_real_value(json_object_get(whole, "train_seconds"));
    json_decref(whole);

    tiny_args(line, sizeof line, data, dir, run);
    tc_proc p;
    tc_spawn(&p, tc_split(line, argv, 64));
    cr_assert(tc_wait_for_err(&p, "training ", 30));
    tc_sleep(0.3 * train_s);
    kill(p.pid, SIGTERM);
    tc_result r = tc_finish(&p, 120);
    cr_assert_eq(r.status, 0, "a graceful stop exits 0: signal %d\n%s", r.signal, r.err);
    cr_assert(strstr(r.err, "SIGTERM: stopping at the next loop boundary"), "%s", r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    cr_assert(json_is_true(json_object_get(j, "stopped")), "the run ended before the signal: raise max_steps");
    int64_t at = json_integer_value(json_object_get(j, "global_step"));
    cr_assert(at > 0 && at < 20000 && at % 2 == 0, "stopped at a loop boundary: %lld", (long long)at);
    cr_assert_null(json_object_get(j, "eval"));
    json_decref(j);

    /* The stop saved a checkpoint at that step, and the resume starts there. */
    r = tc_runf("ckpt list %s --json", dir);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *list = tc_json(&r);
    cr_assert_eq(json_integer_value(json_object_get(list, "resume_step")), at);
    json_decref(list);
    tc_done(&r);
    tiny_args(args, sizeof args, data, dir, run);
    j = train_ok(args);
    cr_assert_eq(json_integer_value(json_object_get(j, "restored_from_step")), at);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 20000);
    cr_assert(json_is_false(json_object_get(j, "stopped")));
    cr_assert_str_eq(digest_of(j), want, "stopped at %lld and resumed", (long long)at);
    json_decref(j);

    /* Done: another run skips training and reports the same parameters. */
    j = train_ok(args);
    cr_assert(json_is_true(json_object_get(j, "skipped")));
    cr_assert_eq(json_integer_value(json_object_get(j, "restored_from_step")), 20000);
    cr_assert_str_eq(digest_of(j), want);
    json_decref(j);
    tc_rmtree(dir);
    tc_rmtree(data);
    free(dir);
    free(data);
}

Test(cli_resume, sigint_stops_gracefully_and_a_second_sigint_quits)
{
    char *data = tc_tmpdir(), *dir = tc_tmpdir();
    tc_write_tiny_mnist(data, 512, 128, 8);
    char line[2048];
    const char *argv[64];
    /* One SIGINT: a graceful stop, as SIGTERM. */
    tiny_args(line, sizeof line, data, dir, "--max_steps=100000000 --iterations_per_loop=50");
    tc_proc p;
    tc_spawn(&p, tc_split(line, argv, 64));
    cr_assert(tc_wait_for_err(&p, "training ", 30));
    tc_sleep(0.05);
    kill(p.pid, SIGINT);
    tc_result r = tc_finish(&p, 120);
    cr_assert_eq(r.status, 0, "signal %d\n%s", r.signal, r.err);
    json_t *j = tc_json(&r);
    cr_assert(json_is_true(json_object_get(j, "stopped")));
    cr_assert(strstr(r.err, "Ctrl-C again"), "%s", r.err);
    json_decref(j);
    tc_done(&r);

    /* Two: the first asks for a stop at the end of a long device loop, the
     * second (once the first is seen) takes the default action. */
    tiny_args(line, sizeof line, data, dir, "--max_steps=100000000 --iterations_per_loop=10000000");
    tc_spawn(&p, tc_split(line, argv, 64));
    cr_assert(tc_wait_for_err(&p, "training ", 30));
    tc_sleep(0.05);
    kill(p.pid, SIGINT);
    bool seen = tc_wait_for_err(&p, "SIGINT: stopping", 30);
    kill(p.pid, SIGINT);
    r = tc_finish(&p, 30);
    cr_assert(seen, "%s", r.err);
    cr_assert_eq(r.signal, SIGINT, "status %d\n%s", r.status, r.err);
    tc_done(&r);
    tc_rmtree(dir);
    tc_rmtree(data);
    free(dir);
    free(data);
}

/* Two `tpuloop train` on one model_dir: the second exits 1 at its start,
 * naming the first's pid, host and start time; the first trains on. */
Test(cli_resume, a_second_train_on_the_same_model_dir_is_refused)
{
    char *data = tc_tmpdir(), *dir = tc_tmpdir();
    tc_write_tiny_mnist(data, 512, 128, 8);
    char line[2048], args[2048];
    const char *argv[64];
    tiny_args(line, sizeof line, data, dir, "--max_steps=100000000 --iterations_per_loop=50");
    tc_proc p;
    tc_spawn(&p, tc_split(line, argv, 64));
    cr_assert(tc_wait_for_err(&p, "training ", 30));
    tiny_args(args, sizeof args, data, dir, "--max_steps=100");
    tc_result r = tc_run(NULL, args);
    char host[256], want[512];
    cr_assert_eq(gethostname(host, sizeof host), 0);
    snprintf(want, sizeof want, "model_dir %s is in use by another trainer: pid %d on host %s, started 20", dir,
             (int)p.pid, host);
    cr_assert_eq(r.status, 1, "status %d\n%s", r.status, r.err);
    cr_assert(strstr(r.err, want) != NULL, "%s", r.err);
    tc_done(&r);
    kill(p.pid, SIGTERM);
    r = tc_finish(&p, 120);
    cr_assert_eq(r.status, 0, "the first one stops gracefully: signal %d\n%s", r.signal, r.err);
    tc_done(&r);
    /* and once it is gone, the model_dir trains again */
    tiny_args(args, sizeof args, data, dir, "--max_steps=100");
    json_decref(train_ok(args));
    tc_rmtree(dir);
    tc_rmtree(data);
    free(dir);
    free(data);
}

/* model_dir: file names, TensorFlow's `checkpoint` index (text format,
 * round trips, what TensorFlow writes, errors with line numbers), listing,
 * keep_checkpoint_max and keep_checkpoint_every_n_hours as TF 1's Saver
 * applies them, recovery after a restart or a crash, and finding the
 * latest valid checkpoint past corrupt ones. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_io_ckpt_util.h"
#include "testutil.h"
#include "tpuloop/checkpoint.h"

static void touch(const char *dir, const char *name)
{
    char *p = ck_join(dir, name);
    ck_write(p, "x", 1);
    free(p);
}

static bool exists(const char *dir, const char *name)
{
    char *p = ck_join(dir, name);
    bool ok = access(p, F_OK) == 0;
    free(p);
    return ok;
}

static char *read_text(const char *dir, const char *name)
{
    char *p = ck_join(dir, name);
    size_t len;
    char *t = (char *)ck_read(p, &len);
    t[len] = '\0';
    free(p);
    return t;
}

/* Saves the sample of seed (step % 1000) as step through m. */
static tl_status save(tl_ckpt_manager *m, int64_t step)
{
    ck_sample s;
    ck_sample_fill(&s, (int)(step % 1000));
    tl_ckpt_writer *w = ck_sample_writer(&s);
    tl_status st = tl_ckpt_manager_save(m, w, step);
    tl_ckpt_writer_destroy(w);
    return st;
}

static void assert_steps(const tl_ckpt_manager *m, const int64_t *want, int n)
{
    int got;
    const int64_t *s = tl_ckpt_manager_steps(m, &got);
    cr_assert_eq(got, n, "%d kept, want %d", got, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(s[i], want[i], "kept[%d] = %lld, want %lld", i, (long long)s[i], (long long)want[i]);
}

/* The model.ckpt files in dir are exactly want (ascending). */
static void assert_files(const char *dir, const int64_t *want, int n)
{
    int64_t *steps;
    int got;
    ASSERT_OK(tl_ckpt_list(dir, &steps, &got));
    cr_assert_eq(got, n, "%d files, want %d", got, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(steps[i], want[i], "file %d is step %lld, want %lld", i, (long long)steps[i], (long long)want[i]);
    tl_ckpt_free_steps(steps);
}

Test(io_model_dir, paths)
{
    char buf[64];
    ASSERT_OK(tl_ckpt_path("/m", 200, buf, sizeof buf));
    cr_assert_str_eq(buf, "/m/model.ckpt-200.safetensors");
    ASSERT_OK(tl_ckpt_path("/m/", 0, buf, sizeof buf));
    cr_assert_str_eq(buf, "/m/model.ckpt-0.safetensors");
    ASSERT_ERR(tl_ckpt_path("/m", -1, buf, sizeof buf), TL_EINVAL, "step must be >= 0, got -1");
    ASSERT_ERR(tl_ckpt_path("/m", 200, buf, 10), TL_EINVAL, "a buffer of 10 bytes is too small for 30");
}

Test(io_model_dir, index_text_as_tensorflow_writes_it)
{
    char *paths[] = {"model.ckpt-100", "model.ckpt-200"};
    double ts[] = {1700000000.5, 1700000600.25};
    tl_ckpt_state s = {"model.ckpt-200", 2, paths, 2, ts, 0};
    char *text = tl_ckpt_state_format(&s);
    cr_assert_str_eq(text, "model_checkpoint_path: \"model.ckpt-200\"\n"
                           "all_model_checkpoint_paths: \"model.ckpt-100\"\n"
                           "all_model_checkpoint_paths: \"model.ckpt-200\"\n"
                           "all_model_checkpoint_timestamps: 1700000000.5\n"
                           "all_model_checkpoint_timestamps: 1700000600.25\n");
    tl_ckpt_state *back;
    ASSERT_OK(tl_ckpt_state_parse(text, strlen(text), NULL, &back));
    cr_assert_str_eq(back->model_checkpoint_path, "model.ckpt-200");
    cr_assert_eq(back->num_paths, 2);
    cr_assert_str_eq(back->all_model_checkpoint_paths[0], "model.ckpt-100");
    cr_assert_eq(back->num_timestamps, 2);
    cr_assert_eq(back->all_model_checkpoint_timestamps[1], 1700000600.25);
    cr_assert_eq(back->last_preserved_timestamp, 0);
    tl_ckpt_state_destroy(back);
    tl_ckpt_free_string(text);

    /* what TF 1 (absolute paths) and TF 2 (timestamps, last preserved) write,
     * with comments, escapes, single quotes and adjacent literals */
    const char *tf = "# written by hand\n"
                     "model_checkpoint_path: \"/abs/dir/model.ckpt-3\"\n"
                     "all_model_checkpoint_paths: '/abs/dir/model.ckpt-2'\n"
                     "all_model_checkpoint_paths: \"/abs/dir/\" \"model.ckpt-3\"\n"
                     "all_model_checkpoint_timestamps: 1.7e9\n"
                     "all_model_checkpoint_timestamps: 1700000001f\n"
                     "last_preserved_timestamp: 1699999999.25\n";
    ASSERT_OK(tl_ckpt_state_parse(tf, strlen(tf), "checkpoint", &back));
    cr_assert_str_eq(back->model_checkpoint_path, "/abs/dir/model.ckpt-3");
    cr_assert_str_eq(back->all_model_checkpoint_paths[1], "/abs/dir/model.ckpt-3");
    cr_assert_eq(back->all_model_checkpoint_timestamps[0], 1.7e9);
    cr_assert_eq(back->all_model_checkpoint_timestamps[1], 1700000001.0);
    cr_assert_eq(back->last_preserved_timestamp, 1699999999.25);
    text = tl_ckpt_state_format(back);
    cr_assert(strstr(text, "last_preserved_timestamp: 1699999999.25\n") != NULL, "%s", text);
    tl_ckpt_free_string(text);
    tl_ckpt_state_destroy(back);

    /* escapes both ways */
    char *odd[] = {"dir with \"quotes\"\\ and 'ticks'\n\x01\xc3\xa9"};
    tl_ckpt_state e = {odd[0], 1, odd, 0, NULL, 0};
    text = tl_ckpt_state_format(&e);
    cr_assert_str_eq(text, "model_checkpoint_path: \"dir with \\\"quotes\\\"\\\\ and \\'ticks\\'\\n\\001\\303\\251\"\n"
                           "all_model_checkpoint_paths: \"dir with \\\"quotes\\\"\\\\ and \\'ticks\\'\\n\\001\\303\\251\"\n");
    ASSERT_OK(tl_ckpt_state_parse(text, strlen(text), NULL, &back));
    cr_assert_str_eq(back->model_checkpoint_path, odd[0]);
    tl_ckpt_state_destroy(back);
    tl_ckpt_free_string(text);
    const char *hex = "model_checkpoint_path: \"\\x41\\u00e9\\?\"";
    ASSERT_OK(tl_ckpt_state_parse(hex, strlen(hex), NULL, &back));
    cr_assert_str_eq(back->model_checkpoint_path, "A\xc3\xa9?");
    tl_ckpt_state_destroy(back);
}

Test(io_model_dir, index_errors_name_the_line)
{
    static const struct {
        const char *text, *frag;
    } cases[] = {
        {"model_checkpoint_path: \"a\"\nfoo: 1\n", "ix:2: unknown field 'foo'"},
        {"all_model_checkpoint_paths: \"a\"\n", "ix: no model_checkpoint_path (TensorFlow: Invalid checkpoint state)"},
        {"model_checkpoint_path: \"\"\n", "no model_checkpoint_path"},
        {"model_checkpoint_path \"a\"\n", "ix:1: expected ':' after 'model_checkpoint_path'"},
        {"model_checkpoint_path: a\n", "ix:1: expected a quoted string"},
        {"model_checkpoint_path: \"a\n\"", "ix:1: string runs past the end of the line"},
        {"model_checkpoint_path: \"a", "unterminated string"},
        {"model_checkpoint_path: \"a\\q\"", "unknown escape"},
        {"model_checkpoint_path: \"a\\0\"", "NUL byte"},
        {"model_checkpoint_path: \"a\"\n\nlast_preserved_timestamp: x1\n", "ix:3: expected a number"},
        {"model_checkpoint_path: \"a\"\nall_model_checkpoint_paths: \"a\"\nall_model_checkpoint_timestamps: 1\n"
         "all_model_checkpoint_timestamps: 2\n",
         "2 all_model_checkpoint_timestamps for 1 all_model_checkpoint_paths"},
        {"{", "ix:1: expected a field name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_ckpt_state *s = (tl_ckpt_state *)1;
        tl_status st = tl_ckpt_state_parse(cases[i].text, strlen(cases[i].text), "ix", &s);
        cr_assert_eq(st, TL_EPARSE, "case %zu: %s", i, tl_last_error());
        cr_assert_null(s);
        cr_assert(strstr(tl_last_error(), cases[i].frag) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, tl_last_error(),
                  cases[i].frag);
    }
    tl_ckpt_state bad = {NULL, 0, NULL, 0, NULL, 0};
    ASSERT_ERR(tl_ckpt_state_write("/tmp", &bad), TL_EINVAL, "model_checkpoint_path is NULL");
    cr_assert_null(tl_ckpt_state_format(&bad));
}

Test(io_model_dir, index_file_round_trip_and_listing)
{
    char *dir = ck_tmpdir();
    tl_ckpt_state *s;
    ASSERT_ERR(tl_ckpt_state_read(dir, &s), TL_ENOTFOUND, "checkpoint");
    char *paths[] = {"model.ckpt-5"};
    tl_ckpt_state w = {"model.ckpt-5", 1, paths, 0, NULL, 0};
    ASSERT_OK(tl_ckpt_state_write(dir, &w));
    char *text = read_text(dir, "checkpoint");
    cr_assert_str_eq(text, "model_checkpoint_path: \"model.ckpt-5\"\nall_model_checkpoint_paths: \"model.ckpt-5\"\n");
    free(text);
    ASSERT_OK(tl_ckpt_state_read(dir, &s));
    cr_assert_str_eq(s->all_model_checkpoint_paths[0], "model.ckpt-5");
    tl_ckpt_state_destroy(s);
    cr_assert_eq(ck_count_temps(dir), 0);

    static const char *const names[] = {
        "model.ckpt-5.safetensors", "model.ckpt-100.safetensors", "model.ckpt-20.safetensors",
        "model.ckpt-0.safetensors", "model.ckpt-01.safetensors", "model.ckpt--1.safetensors",
        "model.ckpt-7.index",       "model.ckpt-8.safetensors.tmp-1-2", "model.ckpt-.safetensors",
        "xmodel.ckpt-9.safetensors", "model.ckpt-9.safetensorsx", "model.ckpt-+9.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        touch(dir, names[i]);
    assert_files(dir, (int64_t[]){0, 5, 20, 100}, 4);
    int64_t *steps;
    int n;
    ASSERT_ERR(tl_ckpt_list("/nonexistent-tpuloop-dir", &steps, &n), TL_ENOTFOUND,
               "model_dir /nonexistent-tpuloop-dir does not exist");
    ck_rmtree(dir);
    free(dir);
}

Test(io_model_dir, keep_checkpoint_max)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    cr_assert_eq(o.keep_checkpoint_max, 5);
    cr_assert_eq(o.keep_checkpoint_every_n_hours, 10000);
    o.keep_checkpoint_max = 3;
    tl_ckpt_manager *m;
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    for (int64_t s = 1; s <= 6; s++)
        ASSERT_OK(save(m, s * 10));
    assert_steps(m, (int64_t[]){40, 50, 60}, 3);
    assert_files(dir, (int64_t[]){40, 50, 60}, 3);
    char *text = read_text(dir, "checkpoint");
    const char *head = "model_checkpoint_path: \"model.ckpt-60\"\n"
                       "all_model_checkpoint_paths: \"model.ckpt-40\"\n"
                       "all_model_checkpoint_paths: \"model.ckpt-50\"\n"
                       "all_model_checkpoint_paths: \"model.ckpt-60\"\n"
                       "all_model_checkpoint_timestamps: ";
    cr_assert(strncmp(text, head, strlen(head)) == 0, "%s", text);
    free(text);
    /* saving a kept step again replaces it and makes it the latest, as TF does */
    ASSERT_OK(save(m, 40));
    assert_steps(m, (int64_t[]){50, 60, 40}, 3);
    tl_ckpt_state *s;
    ASSERT_OK(tl_ckpt_state_read(dir, &s));
    cr_assert_str_eq(s->model_checkpoint_path, "model.ckpt-40");
    tl_ckpt_state_destroy(s);
    /* the metadata carries the step */
    tl_ckpt_reader *r;
    int64_t step;
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    cr_assert_eq(step, 60); /* the highest step, whatever was saved last */
    cr_assert_str_eq(tl_ckpt_meta(r, "step"), "60");
    ck_sample_check(r, 60);
    tl_ckpt_close(r);
    tl_ckpt_manager_destroy(m);

    tl_ckpt_manager_destroy(NULL);
    ck_rmtree(dir);
    free(dir);
}

/* keep_checkpoint_max 0 (TensorFlow's None or 0) as TF 1's Saver: every
 * file stays, and the index lists the checkpoints its list held when it was
 * built (none in a fresh directory) plus the latest — _RecordLastCheckpoint
 * returns at once, generate_checkpoint_state_proto appends the latest. */
Test(io_model_dir, keep_checkpoint_max_0_keeps_every_file_and_lists_the_latest)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    o.keep_checkpoint_max = 0;
    tl_ckpt_manager *m;
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    for (int64_t st = 1; st <= 12; st++)
        ASSERT_OK(save(m, st));
    assert_files(dir, (int64_t[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 12);
    assert_steps(m, (int64_t[]){12}, 1);
    char *text = read_text(dir, "checkpoint");
    const char *head = "model_checkpoint_path: \"model.ckpt-12\"\n"
                       "all_model_checkpoint_paths: \"model.ckpt-12\"\n"
                       "all_model_checkpoint_timestamps: ";
    cr_assert(strncmp(text, head, strlen(head)) == 0, "%s", text);
    cr_assert_null(strstr(text + strlen(head), "all_model_checkpoint_paths"), "%s", text);
    free(text);
    tl_ckpt_manager_destroy(m);
    /* After a restart the recovered list is the index's one checkpoint, and
     * it stays listed before each new latest. */
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    assert_steps(m, (int64_t[]){12}, 1);
    ASSERT_OK(save(m, 13));
    assert_steps(m, (int64_t[]){12, 13}, 2);
    ASSERT_OK(save(m, 14));
    assert_steps(m, (int64_t[]){12, 14}, 2);
    tl_ckpt_state *s;
    ASSERT_OK(tl_ckpt_state_read(dir, &s));
    cr_assert_str_eq(s->model_checkpoint_path, "model.ckpt-14");
    cr_assert_eq(s->num_paths, 2);
    cr_assert_str_eq(s->all_model_checkpoint_paths[0], "model.ckpt-12");
    cr_assert_str_eq(s->all_model_checkpoint_paths[1], "model.ckpt-14");
    tl_ckpt_state_destroy(s);
    /* saving the latest again lists it once */
    ASSERT_OK(save(m, 14));
    assert_steps(m, (int64_t[]){12, 14}, 2);
    assert_files(dir, (int64_t[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, 14);
    tl_ckpt_manager_destroy(m);
    ck_rmtree(dir);
    free(dir);
}

static double fake_now;
static double fake_clock(void *ud)
{
    (void)ud;
    return fake_now;
}

/* TF 1's Saver: the clock starts when the saver is built (next keep time =
 * start + n hours); a checkpoint that falls out of the kept list stays on
 * disk, unlisted, when it was written after the next keep time, which then
 * moves n hours on. Hand-worked: n = 1 h, keep 2, a save every 1000 s. */
Test(io_model_dir, keep_checkpoint_every_n_hours)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    o.keep_checkpoint_max = 2;
    o.keep_checkpoint_every_n_hours = 1;
    o.clock = fake_clock;
    fake_now = 1e9;
    tl_ckpt_manager *m;
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m)); /* next keep time 1e9 + 3600 */
    for (int k = 1; k <= 10; k++) {
        fake_now = 1e9 + 1000.0 * k;
        ASSERT_OK(save(m, k));
    }
    /* dropped in turn: 1 (t=1000), 2, 3 deleted; 4 (t=4000 > 3600) kept, next 7200;
     * 5, 6, 7 deleted; 8 (8000 > 7200) kept, next 10800 */
    assert_files(dir, (int64_t[]){4, 8, 9, 10}, 4);
    assert_steps(m, (int64_t[]){9, 10}, 2);
    tl_ckpt_state *s;
    ASSERT_OK(tl_ckpt_state_read(dir, &s));
    cr_assert_eq(s->num_paths, 2, "kept-by-hours checkpoints are not listed");
    cr_assert_eq(s->all_model_checkpoint_timestamps[0], 1e9 + 9000);
    tl_ckpt_state_destroy(s);
    tl_ckpt_manager_destroy(m);

    tl_ckpt_manager_options bad = o;
    bad.keep_checkpoint_every_n_hours = 0;
    ASSERT_ERR(tl_ckpt_manager_create(dir, &bad, &m), TL_EINVAL,
               "keep_checkpoint_every_n_hours should be > 0 (got 0), or negative for None");
    bad.keep_checkpoint_every_n_hours = NAN;
    ASSERT_ERR(tl_ckpt_manager_create(dir, &bad, &m), TL_EINVAL, "keep_checkpoint_every_n_hours should be > 0 (got nan)");
    bad = o;
    bad.keep_checkpoint_max = -1;
    ASSERT_ERR(tl_ckpt_manager_create(dir, &bad, &m), TL_EINVAL, "keep_checkpoint_max must be >= 0 (0 keeps all), got -1");
    ASSERT_ERR(tl_ckpt_manager_create("/nonexistent-tpuloop-dir", &o, &m), TL_ENOTFOUND, "model_dir /nonexistent-tpuloop-dir");
    ck_rmtree(dir);
    free(dir);
}

/* keep_checkpoint_every_n_hours None as TF 1's Saver under Estimator: the
 * SaverDef field stays unset, 0 hours, so the next keep time is when the
 * saver was built and never moves: every checkpoint written since then that
 * leaves the list of keep_checkpoint_max stays on disk, unlisted (TF 2.15
 * keeps model.ckpt-0 so); ones recovered from before it are deleted as
 * usual. Hand-worked: keep 2, a save every 1000 s. */
Test(io_model_dir, keep_checkpoint_every_n_hours_none)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    o.keep_checkpoint_max = 2;
    o.keep_checkpoint_every_n_hours = TL_CKPT_KEEP_HOURS_NONE;
    o.clock = fake_clock;
    fake_now = 1e9;
    tl_ckpt_manager *m;
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m)); /* next keep time 1e9, for good */
    ck_log_start_info();
    for (int k = 0; k <= 6; k++) {
        fake_now = 1e9 + 1000.0 * k; /* step 0 at the build time itself: not after it */
        ASSERT_OK(save(m, k));
    }
    ck_log_stop();
    cr_assert(strstr(ck_log_text(), "model.ckpt-1.safetensors kept (keep_checkpoint_every_n_hours=None)") != NULL,
              "%s", ck_log_text());
    /* dropped in turn: 0 (t = the build time) deleted; 1, 2, 3, 4 (later) kept */
    assert_files(dir, (int64_t[]){1, 2, 3, 4, 5, 6}, 6);
    assert_steps(m, (int64_t[]){5, 6}, 2);
    tl_ckpt_manager_destroy(m);
    /* a new saver, built later: the recovered 5 and 6 predate it */
    fake_now = 1e9 + 10000;
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    assert_steps(m, (int64_t[]){5, 6}, 2);
    fake_now = 1e9 + 11000;
    ASSERT_OK(save(m, 7));
    fake_now = 1e9 + 12000;
    ASSERT_OK(save(m, 8));
    fake_now = 1e9 + 13000;
    ASSERT_OK(save(m, 9));
    assert_files(dir, (int64_t[]){1, 2, 3, 4, 7, 8, 9}, 7);
    assert_steps(m, (int64_t[]){8, 9}, 2);
    tl_ckpt_manager_destroy(m);
    ck_rmtree(dir);
    free(dir);
}

/* After a restart the kept list comes back from the index (with its
 * timestamps) and the retention continues over it. */
Test(io_model_dir, recovery_after_restart_and_crash)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    o.keep_checkpoint_max = 3;
    tl_ckpt_manager *m;
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    for (int64_t s = 1; s <= 4; s++)
        ASSERT_OK(save(m, s));
    tl_ckpt_manager_destroy(m);
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    assert_steps(m, (int64_t[]){2, 3, 4}, 3);
    ASSERT_OK(save(m, 5));
    assert_files(dir, (int64_t[]){3, 4, 5}, 3);
    tl_ckpt_manager_destroy(m);

    /* a crash between a checkpoint's rename and the index's: the newer file is recovered */
    char path[256];
    ASSERT_OK(tl_ckpt_path(dir, 6, path, sizeof path));
    ck_sample_write(path, 6);
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    assert_steps(m, (int64_t[]){3, 4, 5, 6}, 4);
    ASSERT_OK(save(m, 7));
    assert_files(dir, (int64_t[]){5, 6, 7}, 3);
    tl_ckpt_manager_destroy(m);

    /* a corrupt index: a warning, and the list comes from the directory */
    char *ix = ck_join(dir, "checkpoint");
    ck_write(ix, "model_checkpoint_path: \"model.ckpt-7\n", 37);
    ck_log_start();
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    ck_log_stop();
    cr_assert(strstr(ck_log_text(), "string runs past the end of the line; recovering the list of checkpoints from the "
                                    "directory") != NULL,
              "log: %s", ck_log_text());
    assert_steps(m, (int64_t[]){5, 6, 7}, 3);
    tl_ckpt_manager_destroy(m);

    /* a missing index: the directory too; a listed file that is gone is skipped */
    unlink(ix);
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    assert_steps(m, (int64_t[]){5, 6, 7}, 3);
    ASSERT_OK(save(m, 8));
    tl_ckpt_manager_destroy(m);
    ASSERT_OK(tl_ckpt_path(dir, 7, path, sizeof path));
    unlink(path);
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    assert_steps(m, (int64_t[]){6, 8}, 2);
    tl_ckpt_manager_destroy(m);
    free(ix);
    ck_rmtree(dir);
    free(dir);
}

/* Temporary files of a writer that died are removed; others are not. */
Test(io_model_dir, stale_temporary_files)
{
    char *dir = ck_tmpdir();
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char name[128];
    snprintf(name, sizeof name, "model.ckpt-9.safetensors.tmp-%d-0", (int)dead);
    touch(dir, name);
    char ix[64];
    snprintf(ix, sizeof ix, "checkpoint.tmp-%d-3", (int)dead);
    touch(dir, ix);
    char mine[64];
    snprintf(mine, sizeof mine, "checkpoint.tmp-%d-3", (int)getpid());
    touch(dir, mine);
    char other[64];
    snprintf(other, sizeof other, "notes.txt.tmp-%d-1", (int)dead);
    touch(dir, other);
    tl_ckpt_manager *m;
    ASSERT_OK(tl_ckpt_manager_create(dir, NULL, &m));
    tl_ckpt_manager_destroy(m);
    cr_assert_not(exists(dir, name));
    cr_assert_not(exists(dir, ix));
    cr_assert(exists(dir, mine), "a live process's temporary file was removed");
    cr_assert(exists(dir, other), "a file that is not tpuloop's was removed");
    ck_rmtree(dir);
    free(dir);
}

/* The owner record of dir's lock file ("" when empty), malloc'd. */
static char *lock_text(const char *dir)
{
    return read_text(dir, TL_CKPT_LOCK_NAME);
}

/* One trainer per model_dir: a second holder is refused with the first's
 * pid, host and start time — in this process too (a second estimator) —
 * and a holder killed with SIGKILL leaves a lock file that is taken over. */
Test(io_model_dir, the_lock_admits_one_holder_and_outlives_none)
{
    char *dir = ck_tmpdir();
    char host[256];
    cr_assert_eq(gethostname(host, sizeof host), 0);
    tl_ckpt_lock *a, *b;
    ASSERT_OK(tl_ckpt_lock_acquire(dir, &a));
    char *path = ck_join(dir, TL_CKPT_LOCK_NAME);
    cr_assert_str_eq(tl_ckpt_lock_path(a), path);
    char *text = lock_text(dir);
    char want[512];
    snprintf(want, sizeof want, "{\"pid\":%d,\"host\":\"%s\",\"started\":\"20", (int)getpid(), host);
    cr_assert(strncmp(text, want, strlen(want)) == 0, "owner record %s", text);
    cr_assert(strstr(text, "Z\"}\n") != NULL, "ISO 8601 in UTC: %s", text);
    free(text);

    /* the same process, another open of the file: refused */
    snprintf(want, sizeof want, "model_dir %s is in use by another trainer: pid %d (this process: another estimator) "
                                "on host %s, started 20", dir, (int)getpid(), host);
    ASSERT_ERR(tl_ckpt_lock_acquire(dir, &b), TL_EBUSY, want);
    cr_assert(strstr(tl_last_error(), path) != NULL, "names the lock file: %s", tl_last_error());
    cr_assert_null(b);
    text = lock_text(dir);
    cr_assert_neq(text[0], '\0', "a refused trainer must not touch the holder's record");
    free(text);

    /* a clean release empties the record; the next one takes it silently */
    tl_ckpt_lock_release(a);
    text = lock_text(dir);
    cr_assert_str_eq(text, "");
    free(text);
    ck_log_start_info();
    ASSERT_OK(tl_ckpt_lock_acquire(dir, &b));
    ck_log_stop();
    cr_assert(strstr(ck_log_text(), "taking over") == NULL, "%s", ck_log_text());
    tl_ckpt_lock_release(b);

    /* a holder in another process, killed */
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        tl_ckpt_lock *c;
        char ok = tl_ckpt_lock_acquire(dir, &c) == TL_OK ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    char ok = 0;
    cr_assert_eq(read(ready[0], &ok, 1), 1);
    cr_assert_eq(ok, 'y', "the child could not take the lock");
    snprintf(want, sizeof want, "is in use by another trainer: pid %d on host %s, started 20", (int)child, host);
    ASSERT_ERR(tl_ckpt_lock_acquire(dir, &b), TL_EBUSY, want);
    kill(child, SIGKILL);
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(ready[0]);
    close(ready[1]);
    /* its record is still there, but nobody holds the lock: taken over */
    ck_log_start_info();
    ASSERT_OK(tl_ckpt_lock_acquire(dir, &b));
    ck_log_stop();
    snprintf(want, sizeof want, "taking over the lock of a trainer that ended without releasing it (pid %d on host %s",
             (int)child, host);
    cr_assert(strstr(ck_log_text(), want) != NULL, "log: %s", ck_log_text());
    text = lock_text(dir);
    snprintf(want, sizeof want, "{\"pid\":%d,", (int)getpid());
    cr_assert(strncmp(text, want, strlen(want)) == 0, "the new holder's record: %s", text);
    free(text);
    tl_ckpt_lock_release(b);
    tl_ckpt_lock_release(NULL);

    /* a record that is not tpuloop's, and a missing directory */
    ck_write(path, "garbage", 7);
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    cr_assert_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
    ASSERT_ERR(tl_ckpt_lock_acquire(dir, &b), TL_EBUSY, "the lock file does not say which (7 bytes");
    close(fd);
    ASSERT_ERR(tl_ckpt_lock_acquire("/nonexistent-tpuloop-dir", &b), TL_ENOTFOUND, "model_dir /nonexistent-tpuloop-dir");
    free(path);
    ck_rmtree(dir);
    free(dir);
}

static void flip_byte(const char *dir, int64_t step, long from_end)
{
    char path[256];
    ASSERT_OK(tl_ckpt_path(dir, step, path, sizeof path));
    size_t len;
    unsigned char *b = ck_read(path, &len);
    b[len - (size_t)from_end] ^= 0x40;
    ck_write(path, b, len);
    free(b);
}

Test(io_model_dir, latest_valid_falls_back_past_corrupt_checkpoints)
{
    char *dir = ck_tmpdir();
    tl_ckpt_reader *r;
    int64_t step;
    ASSERT_ERR(tl_ckpt_latest_valid(dir, 0, &r, &step), TL_ENOTFOUND, "no checkpoint in");
    ASSERT_ERR(tl_ckpt_latest_valid("/nonexistent-tpuloop-dir", 0, &r, &step), TL_ENOTFOUND, "does not exist");
    tl_ckpt_manager *m;
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    for (int64_t s = 100; s <= 300; s += 100)
        ASSERT_OK(save(m, s));
    tl_ckpt_manager_destroy(m);

    flip_byte(dir, 300, 2); /* a data byte */
    ck_log_start();
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    ck_log_stop();
    cr_assert_eq(step, 200);
    ck_sample_check(r, 200);
    tl_ckpt_close(r);
    char want[512];
    snprintf(want, sizeof want, "%s/model.ckpt-300.safetensors: data checksum mismatch", dir);
    cr_assert(strstr(ck_log_text(), want) != NULL, "log: %s", ck_log_text());
    cr_assert(strstr(ck_log_text(), "falling back to the previous checkpoint") != NULL, "log: %s", ck_log_text());

    /* truncated */
    char path[256];
    ASSERT_OK(tl_ckpt_path(dir, 200, path, sizeof path));
    cr_assert_eq(truncate(path, 300), 0);
    ck_log_start();
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    ck_log_stop();
    cr_assert_eq(step, 100);
    tl_ckpt_close(r);
    cr_assert(strstr(ck_log_text(), "model.ckpt-200.safetensors: ") != NULL, "log: %s", ck_log_text());

    /* a file whose name disagrees with its metadata step */
    char from[256], to[256];
    ASSERT_OK(tl_ckpt_path(dir, 100, from, sizeof from));
    ASSERT_OK(tl_ckpt_path(dir, 500, to, sizeof to));
    size_t len;
    unsigned char *b = ck_read(from, &len);
    ck_write(to, b, len);
    free(b);
    ck_log_start();
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    ck_log_stop();
    cr_assert_eq(step, 100);
    tl_ckpt_close(r);
    cr_assert(strstr(ck_log_text(), "__metadata__ step '100' but the file name says 500") != NULL, "log: %s",
              ck_log_text());

    /* none valid: an error naming the newest and why, never garbage */
    unlink(to);
    flip_byte(dir, 100, 1);
    ck_log_start();
    tl_status st = tl_ckpt_latest_valid(dir, 0, &r, &step);
    ck_log_stop();
    cr_assert_eq(st, TL_EPARSE);
    cr_assert_null(r);
    cr_assert_eq(step, -1);
    cr_assert(strstr(tl_last_error(), "none of the 3 checkpoints in") != NULL, "%s", tl_last_error());
    cr_assert(strstr(tl_last_error(), "model.ckpt-300.safetensors: data checksum mismatch") != NULL, "%s",
              tl_last_error());
    cr_assert(strstr(ck_log_text(), "no earlier checkpoint to fall back to") != NULL, "log: %s", ck_log_text());
    ck_rmtree(dir);
    free(dir);
}

static tl_status oom_manager(void *ctx)
{
    const char *dir = ctx;
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    tl_ckpt_manager *m;
    tl_status st = tl_ckpt_manager_create(dir, &o, &m);
    if (st != TL_OK)
        return st;
    static float k[3] = {1, 2, 3};
    tl_ckpt_writer *w;
    st = tl_ckpt_writer_create(&w);
    if (st == TL_OK)
        st = tl_ckpt_writer_add(w, "k", TL_CKPT_F32, (int64_t[]){3}, 1, k);
    if (st == TL_OK)
        st = tl_ckpt_manager_save(m, w, 7);
    tl_ckpt_writer_destroy(w);
    tl_ckpt_manager_destroy(m);
    tl_ckpt_reader *r = NULL;
    int64_t step;
    if (st == TL_OK)
        st = tl_ckpt_latest_valid(dir, 0, &r, &step);
    tl_ckpt_close(r);
    tl_ckpt_state *s = NULL;
    if (st == TL_OK)
        st = tl_ckpt_state_read(dir, &s);
    tl_ckpt_state_destroy(s);
    return st;
}

Test(io_model_dir, allocation_failures_unwind)
{
    char *dir = ck_tmpdir();
    tu_oom_sweep(oom_manager, dir, "manager create, save, latest_valid, index read");
    cr_assert_eq(ck_count_temps(dir), 0);
    ck_rmtree(dir);
    free(dir);
}

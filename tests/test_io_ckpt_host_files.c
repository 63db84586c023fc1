/* Host files in a model_dir (checkpoint.h, "Host files"): their file
 * names, that listing and resuming never take one for a checkpoint, that a
 * main file whose host file is missing, corrupt or of another save is
 * incomplete and skipped for the previous checkpoint (the warning naming
 * the host file) — with embedding tables or without — and that the manager
 * deletes a retired checkpoint's host files and those no main file
 * commits. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_io_ckpt_util.h"
#include "testutil.h"
#include "tpuloop/checkpoint.h"

static bool exists(const char *dir, const char *name)
{
    char *p = ck_join(dir, name);
    bool ok = access(p, F_OK) == 0;
    free(p);
    return ok;
}

/* Writes host file `host` of n of step (a sample's bytes, with the host
 * file's metadata; with tables, their strategy), as a host does before the
 * commit. */
static void write_host_file_of(const char *dir, int64_t step, int host, int n, int64_t meta_step, bool tables)
{
    char main[512], path[600], v[32];
    ASSERT_OK(tl_ckpt_path(dir, step, main, sizeof main));
    ASSERT_OK(tl_ckpt_host_path(main, host, n, path, sizeof path));
    ck_sample s;
    ck_sample_fill(&s, host);
    tl_ckpt_writer *w = ck_sample_writer(&s);
    snprintf(v, sizeof v, "%lld", (long long)meta_step);
    ASSERT_OK(tl_ckpt_writer_set_meta(w, "step", v));
    snprintf(v, sizeof v, "%d", host);
    ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_HOST_FILE, v));
    snprintf(v, sizeof v, "%d", n);
    ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_HOST_FILES, v));
    if (tables)
        ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_TABLE_SHARDING, "DIV_DEFAULT"));
    ASSERT_OK(tl_ckpt_writer_write(w, path));
    tl_ckpt_writer_destroy(w);
}

static void write_host_file(const char *dir, int64_t step, int host, int n, int64_t meta_step)
{
    write_host_file_of(dir, step, host, n, meta_step, true);
}

/* A checkpoint of n hosts: the host files, then the main file through m
 * (n 0: one host, no host files); tables: a model with embedding tables. */
static void save_hosts_of(tl_ckpt_manager *m, const char *dir, int64_t step, int n, bool tables)
{
    for (int h = 0; h < n; h++)
        write_host_file_of(dir, step, h, n, step, tables);
    ck_sample s;
    ck_sample_fill(&s, (int)(step % 1000));
    tl_ckpt_writer *w = ck_sample_writer(&s);
    if (n > 0) {
        char v[32];
        snprintf(v, sizeof v, "%d", n);
        ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_HOST_FILES, v));
        if (tables)
            ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_TABLE_SHARDING, "DIV_DEFAULT"));
    }
    ASSERT_OK(tl_ckpt_manager_save(m, w, step));
    tl_ckpt_writer_destroy(w);
}

static void save_hosts(tl_ckpt_manager *m, const char *dir, int64_t step, int n)
{
    save_hosts_of(m, dir, step, n, true);
}

static tl_ckpt_manager *manager(const char *dir, int64_t keep)
{
    tl_ckpt_manager_options o;
    tl_ckpt_manager_options_init(&o);
    o.keep_checkpoint_max = keep;
    tl_ckpt_manager *m;
    ASSERT_OK(tl_ckpt_manager_create(dir, &o, &m));
    return m;
}

Test(io_ckpt_host_files, host_file_paths_follow_the_checkpoint_file_and_are_never_checkpoints)
{
    char buf[256];
    ASSERT_OK(tl_ckpt_host_path("/m/model.ckpt-200.safetensors", 1, 2, buf, sizeof buf));
    cr_assert_str_eq(buf, "/m/model.ckpt-200.host-00001-of-00002.safetensors");
    ASSERT_OK(tl_ckpt_host_path("/m/model.ckpt-200", 0, 4, buf, sizeof buf));
    cr_assert_str_eq(buf, "/m/model.ckpt-200.host-00000-of-00004.safetensors");
    ASSERT_ERR(tl_ckpt_host_path("/m/model.ckpt-1", 2, 2, buf, sizeof buf), TL_EINVAL, "host file 2 of 2");
    ASSERT_ERR(tl_ckpt_host_path("/m/model.ckpt-1", 0, 0, buf, sizeof buf), TL_EINVAL, "[1, 99999], got 0");
    ASSERT_ERR(tl_ckpt_host_path("/m/model.ckpt-1", 0, 2, buf, 10), TL_EINVAL, "too small");

    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 5);
    save_hosts(m, dir, 100, 2);
    write_host_file(dir, 200, 0, 2, 200); /* a save that has not committed */
    int64_t *steps;
    int n;
    ASSERT_OK(tl_ckpt_list(dir, &steps, &n));
    cr_assert_eq(n, 1, "host files are not checkpoints: %d listed", n);
    cr_assert_eq(steps[0], 100);
    tl_ckpt_free_steps(steps);
    tl_ckpt_reader *r;
    int64_t step;
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    cr_assert_eq(step, 100);
    int files;
    char main[512];
    ASSERT_OK(tl_ckpt_path(dir, 100, main, sizeof main));
    ASSERT_OK(tl_ckpt_check_host_files(main, r, 0, &files));
    cr_assert_eq(files, 2);
    tl_ckpt_close(r);
    int kept;
    tl_ckpt_manager_steps(m, &kept);
    cr_assert_eq(kept, 1, "the index lists the checkpoint, not its host files");
    tl_ckpt_manager_destroy(m);
    /* A new manager recovers the one checkpoint. */
    m = manager(dir, 5);
    tl_ckpt_manager_steps(m, &kept);
    cr_assert_eq(kept, 1);
    tl_ckpt_manager_destroy(m);
    ck_rmtree(dir);
    free(dir);
}

/* latest_valid skips step 300 (complete but for `damage`) for step 200,
 * with a warning that contains `want`; tables: the model has embedding
 * tables (else its host files hold only what a host's input is). */
static void skips_of(void (*damage)(const char *dir), const char *want, bool tables)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 5);
    save_hosts_of(m, dir, 100, 0, tables);
    save_hosts_of(m, dir, 200, 2, tables);
    save_hosts_of(m, dir, 300, 2, tables);
    tl_ckpt_manager_destroy(m);
    damage(dir);
    tl_ckpt_reader *r;
    int64_t step;
    ck_log_start();
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    ck_log_stop();
    cr_assert_eq(step, 200, "%s", ck_log_text());
    ck_sample_check(r, 200);
    tl_ckpt_close(r);
    char file[512];
    snprintf(file, sizeof file, "checkpoint %s/model.ckpt-300.safetensors is incomplete: host file 1 of 2", dir);
    cr_assert(strstr(ck_log_text(), file) != NULL, "log: %s", ck_log_text());
    snprintf(file, sizeof file, "%s/model.ckpt-300.host-00001-of-00002.safetensors", dir);
    cr_assert(strstr(ck_log_text(), file) != NULL, "the warning names the host file: %s", ck_log_text());
    cr_assert(strstr(ck_log_text(), want) != NULL, "log lacks \"%s\": %s", want, ck_log_text());
    cr_assert(strstr(ck_log_text(), "falling back to the previous checkpoint") != NULL, "%s", ck_log_text());
    ck_rmtree(dir);
    free(dir);
}

static void skips(void (*damage)(const char *dir), const char *want)
{
    skips_of(damage, want, true);
}

static void remove_host_file(const char *dir)
{
    char *p = ck_join(dir, "model.ckpt-300.host-00001-of-00002.safetensors");
    cr_assert_eq(unlink(p), 0);
    free(p);
}

static void corrupt_host_file(const char *dir)
{
    char *p = ck_join(dir, "model.ckpt-300.host-00001-of-00002.safetensors");
    size_t len;
    unsigned char *b = ck_read(p, &len);
    b[len - 3] ^= 0x10;
    ck_write(p, b, len);
    free(b);
    free(p);
}

static void foreign_host_file(const char *dir)
{
    write_host_file(dir, 300, 1, 2, 299); /* another save's (its step says 299) */
}

static void tableless_host_file(const char *dir)
{
    write_host_file_of(dir, 300, 1, 2, 300, false); /* a save of a model without tables */
}

Test(io_ckpt_host_files, a_checkpoint_with_a_missing_host_file_is_skipped)
{
    skips(remove_host_file, "No such file or directory");
}

Test(io_ckpt_host_files, a_checkpoint_with_a_corrupt_host_file_is_skipped)
{
    skips(corrupt_host_file, "data checksum mismatch");
}

Test(io_ckpt_host_files, a_checkpoint_with_another_save_s_host_file_is_skipped)
{
    skips(foreign_host_file, "__metadata__ step is \"299\"");
}

Test(io_ckpt_host_files, a_checkpoint_with_a_host_file_of_another_strategy_is_skipped)
{
    skips(tableless_host_file, "__metadata__ table_sharding_strategy is missing");
}

/* Host files without tables (a model without embedding tables: they hold
 * the hosts' input positions) make a checkpoint complete the same way. */
Test(io_ckpt_host_files, a_checkpoint_without_tables_is_complete_only_with_its_host_files)
{
    skips_of(remove_host_file, "No such file or directory", false);
    skips_of(corrupt_host_file, "data checksum mismatch", false);
    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 5);
    save_hosts_of(m, dir, 100, 2, false);
    tl_ckpt_manager_destroy(m);
    tl_ckpt_reader *r;
    int64_t step;
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    cr_assert_eq(step, 100);
    cr_assert_null(tl_ckpt_meta(r, TL_CKPT_META_TABLE_SHARDING));
    int files;
    char main[512];
    ASSERT_OK(tl_ckpt_path(dir, 100, main, sizeof main));
    ASSERT_OK(tl_ckpt_check_host_files(main, r, 0, &files));
    cr_assert_eq(files, 2);
    tl_ckpt_close(r);
    ck_rmtree(dir);
    free(dir);
}

Test(io_ckpt_host_files, none_complete_is_an_error_naming_the_newest)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 5);
    save_hosts(m, dir, 300, 2);
    tl_ckpt_manager_destroy(m);
    remove_host_file(dir);
    tl_ckpt_reader *r;
    int64_t step;
    ck_log_start();
    ASSERT_ERR(tl_ckpt_latest_valid(dir, 0, &r, &step), TL_EPARSE, "none of the 1 checkpoint");
    ck_log_stop();
    cr_assert(strstr(tl_last_error(), "model.ckpt-300.host-00001-of-00002.safetensors") != NULL, "%s",
              tl_last_error());
    ck_rmtree(dir);
    free(dir);
}

Test(io_ckpt_host_files, retention_deletes_the_host_files_with_their_checkpoint)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 2);
    save_hosts(m, dir, 100, 2);
    save_hosts_of(m, dir, 200, 2, false);
    cr_assert(exists(dir, "model.ckpt-100.host-00001-of-00002.safetensors"));
    save_hosts(m, dir, 300, 2);
    cr_assert(!exists(dir, "model.ckpt-100.safetensors"));
    cr_assert(!exists(dir, "model.ckpt-100.host-00000-of-00002.safetensors"));
    cr_assert(!exists(dir, "model.ckpt-100.host-00001-of-00002.safetensors"));
    cr_assert(exists(dir, "model.ckpt-200.host-00001-of-00002.safetensors"));
    /* A checkpoint of 1 host retires one of 2 hosts' files just the same. */
    save_hosts(m, dir, 400, 0);
    cr_assert(!exists(dir, "model.ckpt-200.host-00000-of-00002.safetensors"));
    cr_assert(exists(dir, "model.ckpt-300.host-00000-of-00002.safetensors"));
    tl_ckpt_manager_destroy(m);
    ck_rmtree(dir);
    free(dir);
}

Test(io_ckpt_host_files, a_commit_removes_the_host_files_of_saves_that_never_committed)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 5);
    save_hosts(m, dir, 100, 2);
    /* A save of step 200 on 2 hosts killed before its main file, and a
     * save of step 150 whose files are of 4 hosts. */
    write_host_file(dir, 200, 0, 2, 200);
    write_host_file(dir, 200, 1, 2, 200);
    write_host_file(dir, 150, 3, 4, 150);
    /* Step 200 again on 3 hosts: its 2-host files are not this save's. */
    save_hosts(m, dir, 200, 3);
    cr_assert(!exists(dir, "model.ckpt-200.host-00000-of-00002.safetensors"));
    cr_assert(!exists(dir, "model.ckpt-200.host-00001-of-00002.safetensors"));
    cr_assert(!exists(dir, "model.ckpt-150.host-00003-of-00004.safetensors"));
    for (int s = 0; s < 3; s++) {
        char name[128];
        snprintf(name, sizeof name, "model.ckpt-200.host-%05d-of-00003.safetensors", s);
        cr_assert(exists(dir, name), "%s", name);
    }
    cr_assert(exists(dir, "model.ckpt-100.host-00001-of-00002.safetensors"), "committed: kept");
    tl_ckpt_reader *r;
    int64_t step;
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    cr_assert_eq(step, 200);
    tl_ckpt_close(r);
    tl_ckpt_manager_destroy(m);
    ck_rmtree(dir);
    free(dir);
}

Test(io_ckpt_host_files, a_bad_host_file_count_is_incomplete)
{
    char *dir = ck_tmpdir();
    char path[512];
    ASSERT_OK(tl_ckpt_path(dir, 7, path, sizeof path));
    ck_sample s;
    ck_sample_fill(&s, 7);
    tl_ckpt_writer *w = ck_sample_writer(&s);
    ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_HOST_FILES, "two"));
    ASSERT_OK(tl_ckpt_writer_write(w, path));
    tl_ckpt_writer_destroy(w);
    tl_ckpt_reader *r;
    ASSERT_OK(tl_ckpt_open(path, 0, &r));
    int n;
    ASSERT_ERR(tl_ckpt_check_host_files(path, r, 0, &n), TL_EPARSE, "host_files is \"two\"");
    tl_ckpt_close(r);
    ck_rmtree(dir);
    free(dir);
}

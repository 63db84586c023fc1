/* Table shards in a model_dir (checkpoint.h, "Table shards"): their file
 * names, that listing and resuming never take one for a checkpoint, that a
 * main file whose shard file is missing, corrupt or of another save is
 * incomplete and skipped for the previous checkpoint (the warning naming
 * the shard file), and that the manager deletes a retired checkpoint's
 * shards and those no main file commits. */
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

/* Writes table shard `shard` of n of step (a sample's bytes, with the
 * shard's metadata), as a host does before the commit. */
static void write_shard(const char *dir, int64_t step, int shard, int n, int64_t meta_step)
{
    char main[512], path[600], v[32];
    ASSERT_OK(tl_ckpt_path(dir, step, main, sizeof main));
    ASSERT_OK(tl_ckpt_shard_path(main, shard, n, path, sizeof path));
    ck_sample s;
    ck_sample_fill(&s, shard);
    tl_ckpt_writer *w = ck_sample_writer(&s);
    snprintf(v, sizeof v, "%lld", (long long)meta_step);
    ASSERT_OK(tl_ckpt_writer_set_meta(w, "step", v));
    snprintf(v, sizeof v, "%d", shard);
    ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_TABLE_SHARD, v));
    snprintf(v, sizeof v, "%d", n);
    ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_TABLE_SHARDS, v));
    ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_TABLE_SHARDING, "DIV_DEFAULT"));
    ASSERT_OK(tl_ckpt_writer_write(w, path));
    tl_ckpt_writer_destroy(w);
}

/* A checkpoint of n hosts: the shards, then the main file through m (n 0:
 * one host, no shards). */
static void save_sharded(tl_ckpt_manager *m, const char *dir, int64_t step, int n)
{
    for (int s = 0; s < n; s++)
        write_shard(dir, step, s, n, step);
    ck_sample s;
    ck_sample_fill(&s, (int)(step % 1000));
    tl_ckpt_writer *w = ck_sample_writer(&s);
    if (n > 0) {
        char v[32];
        snprintf(v, sizeof v, "%d", n);
        ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_TABLE_SHARDS, v));
        ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_TABLE_SHARDING, "DIV_DEFAULT"));
    }
    ASSERT_OK(tl_ckpt_manager_save(m, w, step));
    tl_ckpt_writer_destroy(w);
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

Test(io_ckpt_shards, shard_paths_follow_the_checkpoint_file_and_are_never_checkpoints)
{
    char buf[256];
    ASSERT_OK(tl_ckpt_shard_path("/m/model.ckpt-200.safetensors", 1, 2, buf, sizeof buf));
    cr_assert_str_eq(buf, "/m/model.ckpt-200.tables-00001-of-00002.safetensors");
    ASSERT_OK(tl_ckpt_shard_path("/m/model.ckpt-200", 0, 4, buf, sizeof buf));
    cr_assert_str_eq(buf, "/m/model.ckpt-200.tables-00000-of-00004.safetensors");
    ASSERT_ERR(tl_ckpt_shard_path("/m/model.ckpt-1", 2, 2, buf, sizeof buf), TL_EINVAL, "table shard 2 of 2");
    ASSERT_ERR(tl_ckpt_shard_path("/m/model.ckpt-1", 0, 0, buf, sizeof buf), TL_EINVAL, "[1, 99999], got 0");
    ASSERT_ERR(tl_ckpt_shard_path("/m/model.ckpt-1", 0, 2, buf, 10), TL_EINVAL, "too small");

    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 5);
    save_sharded(m, dir, 100, 2);
    write_shard(dir, 200, 0, 2, 200); /* a save that has not committed */
    int64_t *steps;
    int n;
    ASSERT_OK(tl_ckpt_list(dir, &steps, &n));
    cr_assert_eq(n, 1, "shard files are not checkpoints: %d listed", n);
    cr_assert_eq(steps[0], 100);
    tl_ckpt_free_steps(steps);
    tl_ckpt_reader *r;
    int64_t step;
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    cr_assert_eq(step, 100);
    int shards;
    char main[512];
    ASSERT_OK(tl_ckpt_path(dir, 100, main, sizeof main));
    ASSERT_OK(tl_ckpt_check_shards(main, r, 0, &shards));
    cr_assert_eq(shards, 2);
    tl_ckpt_close(r);
    int kept;
    tl_ckpt_manager_steps(m, &kept);
    cr_assert_eq(kept, 1, "the index lists the checkpoint, not its shards");
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
 * with a warning that contains `want`. */
static void skips(void (*damage)(const char *dir), const char *want)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 5);
    save_sharded(m, dir, 100, 0);
    save_sharded(m, dir, 200, 2);
    save_sharded(m, dir, 300, 2);
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
    snprintf(file, sizeof file, "checkpoint %s/model.ckpt-300.safetensors is incomplete: table shard 1 of 2", dir);
    cr_assert(strstr(ck_log_text(), file) != NULL, "log: %s", ck_log_text());
    snprintf(file, sizeof file, "%s/model.ckpt-300.tables-00001-of-00002.safetensors", dir);
    cr_assert(strstr(ck_log_text(), file) != NULL, "the warning names the shard file: %s", ck_log_text());
    cr_assert(strstr(ck_log_text(), want) != NULL, "log lacks \"%s\": %s", want, ck_log_text());
    cr_assert(strstr(ck_log_text(), "falling back to the previous checkpoint") != NULL, "%s", ck_log_text());
    ck_rmtree(dir);
    free(dir);
}

static void remove_shard(const char *dir)
{
    char *p = ck_join(dir, "model.ckpt-300.tables-00001-of-00002.safetensors");
    cr_assert_eq(unlink(p), 0);
    free(p);
}

static void corrupt_shard(const char *dir)
{
    char *p = ck_join(dir, "model.ckpt-300.tables-00001-of-00002.safetensors");
    size_t len;
    unsigned char *b = ck_read(p, &len);
    b[len - 3] ^= 0x10;
    ck_write(p, b, len);
    free(b);
    free(p);
}

static void foreign_shard(const char *dir)
{
    write_shard(dir, 300, 1, 2, 299); /* another save's (its step says 299) */
}

Test(io_ckpt_shards, a_checkpoint_with_a_missing_table_shard_is_skipped)
{
    skips(remove_shard, "No such file or directory");
}

Test(io_ckpt_shards, a_checkpoint_with_a_corrupt_table_shard_is_skipped)
{
    skips(corrupt_shard, "data checksum mismatch");
}

Test(io_ckpt_shards, a_checkpoint_with_another_save_s_table_shard_is_skipped)
{
    skips(foreign_shard, "__metadata__ step is \"299\"");
}

Test(io_ckpt_shards, none_complete_is_an_error_naming_the_newest)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 5);
    save_sharded(m, dir, 300, 2);
    tl_ckpt_manager_destroy(m);
    remove_shard(dir);
    tl_ckpt_reader *r;
    int64_t step;
    ck_log_start();
    ASSERT_ERR(tl_ckpt_latest_valid(dir, 0, &r, &step), TL_EPARSE, "none of the 1 checkpoint");
    ck_log_stop();
    cr_assert(strstr(tl_last_error(), "model.ckpt-300.tables-00001-of-00002.safetensors") != NULL, "%s",
              tl_last_error());
    ck_rmtree(dir);
    free(dir);
}

Test(io_ckpt_shards, retention_deletes_the_table_shards_with_their_checkpoint)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 2);
    save_sharded(m, dir, 100, 2);
    save_sharded(m, dir, 200, 2);
    cr_assert(exists(dir, "model.ckpt-100.tables-00001-of-00002.safetensors"));
    save_sharded(m, dir, 300, 2);
    cr_assert(!exists(dir, "model.ckpt-100.safetensors"));
    cr_assert(!exists(dir, "model.ckpt-100.tables-00000-of-00002.safetensors"));
    cr_assert(!exists(dir, "model.ckpt-100.tables-00001-of-00002.safetensors"));
    cr_assert(exists(dir, "model.ckpt-200.tables-00001-of-00002.safetensors"));
    /* A checkpoint of 1 host retires one of 2 hosts' shards just the same. */
    save_sharded(m, dir, 400, 0);
    cr_assert(!exists(dir, "model.ckpt-200.tables-00000-of-00002.safetensors"));
    cr_assert(exists(dir, "model.ckpt-300.tables-00000-of-00002.safetensors"));
    tl_ckpt_manager_destroy(m);
    ck_rmtree(dir);
    free(dir);
}

Test(io_ckpt_shards, a_commit_removes_the_shards_of_saves_that_never_committed)
{
    char *dir = ck_tmpdir();
    tl_ckpt_manager *m = manager(dir, 5);
    save_sharded(m, dir, 100, 2);
    /* A save of step 200 on 2 hosts killed before its main file, and a
     * save of step 150 whose shards are of 4 hosts. */
    write_shard(dir, 200, 0, 2, 200);
    write_shard(dir, 200, 1, 2, 200);
    write_shard(dir, 150, 3, 4, 150);
    /* Step 200 again on 3 hosts: its 2-host shards are not this save's. */
    save_sharded(m, dir, 200, 3);
    cr_assert(!exists(dir, "model.ckpt-200.tables-00000-of-00002.safetensors"));
    cr_assert(!exists(dir, "model.ckpt-200.tables-00001-of-00002.safetensors"));
    cr_assert(!exists(dir, "model.ckpt-150.tables-00003-of-00004.safetensors"));
    for (int s = 0; s < 3; s++) {
        char name[128];
        snprintf(name, sizeof name, "model.ckpt-200.tables-%05d-of-00003.safetensors", s);
        cr_assert(exists(dir, name), "%s", name);
    }
    cr_assert(exists(dir, "model.ckpt-100.tables-00001-of-00002.safetensors"), "committed: kept");
    tl_ckpt_reader *r;
    int64_t step;
    ASSERT_OK(tl_ckpt_latest_valid(dir, 0, &r, &step));
    cr_assert_eq(step, 200);
    tl_ckpt_close(r);
    tl_ckpt_manager_destroy(m);
    ck_rmtree(dir);
    free(dir);
}

Test(io_ckpt_shards, a_bad_shard_count_is_incomplete)
{
    char *dir = ck_tmpdir();
    char path[512];
    ASSERT_OK(tl_ckpt_path(dir, 7, path, sizeof path));
    ck_sample s;
    ck_sample_fill(&s, 7);
    tl_ckpt_writer *w = ck_sample_writer(&s);
    ASSERT_OK(tl_ckpt_writer_set_meta(w, TL_CKPT_META_TABLE_SHARDS, "two"));
    ASSERT_OK(tl_ckpt_writer_write(w, path));
    tl_ckpt_writer_destroy(w);
    tl_ckpt_reader *r;
    ASSERT_OK(tl_ckpt_open(path, 0, &r));
    int n;
    ASSERT_ERR(tl_ckpt_check_shards(path, r, 0, &n), TL_EPARSE, "table_shards is \"two\"");
    tl_ckpt_close(r);
    ck_rmtree(dir);
    free(dir);
}

/*
 * test_mpi_train.c — training over MPI processes, one host each: `tpuloop
 * train` under mpirun (and tests/mpi/estimator_check.c, the C API), always
 * under `timeout` and with no standard input (tc_mpirun), over shared memory
 * and over TCP loopback (--mca btl tcp,self).
 *
 * What a user relies on: 1 host x 4 devices, 2 x 2 and 4 x 1 train the same
 * bits; each host runs exactly its own input_fn invocations of the mode's
 * plan (spec tpu_estimator.md §4.1) and no other; a checkpoint written by 2
 * hosts — each host's file holding its shard of the tables and its own
 * input positions — resumes on 1 and on 4 as if never stopped; one host's
 * failure ends every host with a message naming it.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_cli_util.h"
#include "tpuloop/tpuloop.h"

/* The MLP on the planted synthetic problem, small enough for many runs. */
#define MLP                                                                                                      \
    "train --model_name=mlp --dataset=synthetic --synthetic_examples=4096 --synthetic_eval_examples=512 "        \
    "--train_batch_size=64 --tf_random_seed=3 --iterations_per_loop=10 --train_steps=30 "                       \
    "--log_step_count_steps=1000"

/* The one JSON line of a run that passed, and its params_digest. */
static void digest_of(const tc_result *r, const char *what, char out[65])
{
    cr_assert_eq(r->status, 0, "%s\n%s%s", what, r->out, r->err);
    const char *nl = strchr(r->out, '\n');
    cr_assert(nl != NULL && nl[1] == '\0', "%s: host 0 alone prints the result, one line:\n%s", what, r->out);
    json_t *j = tc_json(r);
    const char *d = json_string_value(json_object_get(j, "params_digest"));
    cr_assert_not_null(d, "%s", r->out);
    snprintf(out, 65, "%s", d);
    json_decref(j);
}

Test(mpi_train, the_mlp_trains_the_same_bits_on_1x4_2x2_and_4x1)
{
    tc_result r = tc_runf("%s --devices=4", MLP);
    char want[65], got[65];
    digest_of(&r, "1 x 4", want);
    tc_done(&r);
    static const char *const launches[] = {
        "-np 2 @tpuloop " MLP " --devices=2",                     /* shared memory */
        "-np 2 --mca btl tcp,self @tpuloop " MLP " --devices=2",  /* TCP loopback */
        "-np 4 --mca btl tcp,self @tpuloop " MLP " --devices=1",
    };
    for (size_t i = 0; i < sizeof launches / sizeof *launches; i++) {
        r = tc_mpirun(launches[i], 120);
        digest_of(&r, launches[i], got);
        cr_assert_str_eq(got, want, "%s: other bits than one host of 4 devices", launches[i]);
        cr_assert(strstr(r.err, "on 4 devices (") != NULL, "%s\n%s", launches[i], r.err);
        tc_done(&r);
    }
    /* The hosts side by side in one process are the same hosts. */
    r = tc_runf("%s --devices=2 --num_hosts=2", MLP);
    digest_of(&r, "2 simulated hosts", got);
    cr_assert_str_eq(got, want);
    tc_done(&r);
}

/* DLRM over 26 embedding tables, evaluated over hosts (PER_HOST_V2). */
#define DLRM                                                                                                     \
    "train examples/dlrm_synthetic.json --synthetic_examples=8192 --synthetic_eval_examples=1024 "              \
    "--train_steps=30 --iterations_per_loop=10 --train_batch_size=64 --eval_batch_size=64 --eval_steps=2 "       \
    "--per_host_input_for_training=PER_HOST_V2"

Test(mpi_train, dlrm_trains_the_same_tables_on_1x4_2x2_and_4x1_and_resumes_on_another_count)
{
    char *dir = tc_tmpdir();
    tc_result r = tc_runf("%s --devices=4", DLRM);
    char want[65], got[65];
    digest_of(&r, "1 x 4", want);
    json_t *j = tc_json(&r);
    double auc = json_real_value(json_object_get(json_object_get(j, "eval"), "auc"));
    json_decref(j);
    tc_done(&r);
    static const char *const launches[] = {
        "-np 2 @tpuloop " DLRM " --devices=2",
        "-np 4 --mca btl tcp,self @tpuloop " DLRM " --devices=1",
    };
    for (size_t i = 0; i < 2; i++) {
        r = tc_mpirun(launches[i], 180);
        digest_of(&r, launches[i], got);
        cr_assert_str_eq(got, want, "%s: other tables or weights than one host", launches[i]);
        j = tc_json(&r);
        cr_assert_eq(json_real_value(json_object_get(json_object_get(j, "eval"), "auc")), auc, "%s", r.out);
        json_decref(j);
        tc_done(&r);
    }
    /* 2 hosts to step 20 (the tables in their 2 host files), then 1 host. */
    char launch[1024];
    snprintf(launch, sizeof launch, "-np 2 @tpuloop %s --devices=2 --train_steps=20 --model_dir=%s/m", DLRM, dir);
    r = tc_mpirun(launch, 180);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    r = tc_runf("%s --devices=4 --train_steps=10 --model_dir=%s/m", DLRM, dir);
    digest_of(&r, "resumed on 1 host", got);
    cr_assert_str_eq(got, want);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

/* ---- checkpoints of several hosts: tables in host files -------------------- */

/* DLRM saving every 10 steps into dir/m (the at-start save too). */
#define DLRM_SAVES DLRM " --save_checkpoints_steps=10"

/* The digest of DLRM trained uninterrupted to step 30 on 1 host x 4. */
static void dlrm_digest_30(char out[65])
{
    tc_result r = tc_runf("%s --devices=4", DLRM);
    digest_of(&r, "uninterrupted 1 x 4", out);
    tc_done(&r);
}

static bool file_exists(const char *dir, const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    struct stat sb;
    bool there = stat(p, &sb) == 0;
    free(p);
    return there;
}

/* The step a run's summary says it resumed from (-1: none). */
static json_int_t restored_from(const tc_result *r)
{
    json_t *j = tc_json(r);
    json_t *v = json_object_get(j, "restored_from_step");
    json_int_t s = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(j);
    return s;
}

/* Trains DLRM on `hosts` hosts x `devices` from dir/m (resuming there)
 * with the extra flags; asserts it passed and returns the result. */
static tc_result dlrm_on(int hosts, int devices, const char *dir, const char *extra)
{
    char launch[2048];
    if (hosts == 1)
        return tc_runf("%s --devices=%d --model_dir=%s/m %s", DLRM_SAVES, devices, dir, extra);
    snprintf(launch, sizeof launch, "-np %d --mca btl tcp,self @tpuloop %s --devices=%d --model_dir=%s/m %s", hosts,
             DLRM_SAVES, devices, dir, extra);
    return tc_mpirun(launch, 180);
}

/* Resumes dir/m from step `from` on `hosts` x `devices` for 10 steps:
 * the run must end with want's bits, as if never stopped. */
static void resumes_as_never_stopped(int hosts, int devices, const char *dir, int64_t from, const char *want,
                                     const char *what)
{
    char got[65];
    tc_result r = dlrm_on(hosts, devices, dir, "--train_steps=10");
    digest_of(&r, what, got);
    cr_assert_eq(restored_from(&r), from, "%s: %s", what, r.out);
    cr_assert_str_eq(got, want, "%s", what);
    tc_done(&r);
}

Test(mpi_train, a_2_host_dlrm_checkpoint_keeps_its_tables_in_2_host_files_and_resumes_on_1_and_on_4_hosts)
{
    char *dir = tc_tmpdir(), want[65];
    dlrm_digest_30(want);
    tc_result r = dlrm_on(2, 2, dir, "--train_steps=20");
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *trained = tc_json(&r);
    tc_done(&r);
    /* The main file: the dense state and where the tables are, no table. */
    char path[1024], shard[1100];
    snprintf(path, sizeof path, "%s/m/model.ckpt-20.safetensors", dir);
    tl_ckpt_reader *main;
    cr_assert_eq(tl_ckpt_open(path, 0, &main), TL_OK, "%s", tl_last_error());
    for (int i = 0; i < tl_ckpt_num_tensors(main); i++) {
        tl_ckpt_tensor_info t;
        cr_assert_eq(tl_ckpt_tensor(main, i, &t), TL_OK);
        cr_assert(strncmp(t.name, "embedding/", 10) != 0, "the main file holds table tensor %s", t.name);
    }
    cr_assert_not_null(tl_ckpt_meta(main, "global_step"));
    cr_assert_str_eq(tl_ckpt_meta(main, TL_CKPT_META_HOST_FILES), "2");
    cr_assert_str_eq(tl_ckpt_meta(main, "written_by"), "tpu_worker/host 0 of 2");
    cr_assert_str_eq(tl_ckpt_meta(main, TL_CKPT_META_TABLE_SHARDING), "DIV_DEFAULT");
    tl_ckpt_close(main);
    /* Each host's rows of every table, parameters and the Adagrad slot:
     * C1 (1000 ids) 500 and 500, C2 (583) 292 and 291, C9 (3) 2 and 1. */
    static const struct { const char *table; int64_t rows[2]; } want_rows[] = {
        {"C1", {500, 500}}, {"C2", {292, 291}}, {"C9", {2, 1}}};
    for (int h = 0; h < 2; h++) {
        cr_assert_eq(tl_ckpt_host_path(path, h, 2, shard, sizeof shard), TL_OK);
        tl_ckpt_reader *sr;
        cr_assert_eq(tl_ckpt_open(shard, 0, &sr), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_ckpt_num_tensors(sr), 26 * 2, "26 tables' parameters and accumulators (the input is in "
                     "memory: no positions)");
        char hs[16];
        snprintf(hs, sizeof hs, "%d", h);
        cr_assert_str_eq(tl_ckpt_meta(sr, TL_CKPT_META_HOST_FILE), hs);
        cr_assert_str_eq(tl_ckpt_meta(sr, TL_CKPT_META_HOST_FILES), "2");
        cr_assert_str_eq(tl_ckpt_meta(sr, "step"), "20");
        char by[64];
        snprintf(by, sizeof by, "tpu_worker/host %d of 2", h);
        cr_assert_str_eq(tl_ckpt_meta(sr, "written_by"), by);
        for (size_t k = 0; k < sizeof want_rows / sizeof *want_rows; k++) {
            char name[64];
            snprintf(name, sizeof name, "embedding/%s/parameters", want_rows[k].table);
            tl_ckpt_tensor_info t;
            cr_assert_eq(tl_ckpt_find(sr, name, &t), TL_OK, "%s: %s", shard, name);
            cr_assert(t.dtype == TL_CKPT_F32 && t.rank == 2 && t.shape[0] == want_rows[k].rows[h] &&
                          t.shape[1] == 16, "%s: %s is [%lld, %lld]", shard, name, (long long)t.shape[0],
                      (long long)t.shape[1]);
        }
        tl_ckpt_close(sr);
    }
    /* `tpuloop ckpt` tells where the tables are. */
    r = tc_runf("ckpt inspect %s/m/model.ckpt-20", dir);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "2 host files, each with its host's shard of the embedding tables and input "
                            "positions") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "model.ckpt-20.host-00001-of-00002.safetensors: valid") != NULL, "%s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt list %s/m", dir);
    cr_assert(strstr(r.out, "valid (with 2 host files)") != NULL, "%s", r.out);
    tc_done(&r);
    /* Evaluating the checkpoint on 1 host and on 2: the training run's
     * evaluation and parameters. */
    static const char *const EVAL = "evaluate examples/dlrm_synthetic.json --synthetic_examples=8192 "
                                    "--synthetic_eval_examples=1024 --train_batch_size=64 --eval_batch_size=64 "
                                    "--eval_steps=2 --per_host_input_for_training=PER_HOST_V2";
    for (int hosts = 1; hosts <= 2; hosts++) {
        char launch[2048];
        snprintf(launch, sizeof launch, "-np 2 @tpuloop %s --devices=2 --model_dir=%s/m --checkpoint=%s", EVAL, dir,
                 path);
        r = hosts == 1 ? tc_runf("%s --devices=4 --model_dir=%s/m --checkpoint=%s", EVAL, dir, path)
                       : tc_mpirun(launch, 120);
        cr_assert_eq(r.status, 0, "%s", r.err);
        json_t *ev = tc_json(&r);
        json_t *te = json_object_get(trained, "eval");
        cr_assert(json_equal(json_object_get(ev, "auc"), json_object_get(te, "auc")) &&
                      json_equal(json_object_get(ev, "loss"), json_object_get(te, "loss")),
                  "evaluated on %d host(s): %s\ntrained: %s", hosts, r.out, json_dumps(te, 0));
        cr_assert(json_equal(json_object_get(ev, "params_digest"), json_object_get(trained, "params_digest")),
                  "%s", r.out);
        json_decref(ev);
        tc_done(&r);
    }
    json_decref(trained);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp -r %s/m %s/four && mkdir %s/on4 && mv %s/four %s/on4/m", dir, dir, dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
    /* On 1 host: the rows of both shards into one table. */
    resumes_as_never_stopped(1, 4, dir, 20, want, "resumed on 1 host");
    /* On 4 hosts: each builds its quarter from the 2 saved halves. */
    snprintf(path, sizeof path, "%s/on4", dir);
    resumes_as_never_stopped(4, 1, path, 20, want, "resumed on 4 hosts");
    cr_assert(file_exists(path, "m/model.ckpt-30.host-00003-of-00004.safetensors"));
    tc_rmtree(dir);
    free(dir);
}

Test(mpi_train, a_1_host_dlrm_checkpoint_resumes_on_2_hosts_as_if_never_stopped)
{
    char *dir = tc_tmpdir(), want[65];
    dlrm_digest_30(want);
    tc_result r = dlrm_on(1, 4, dir, "--train_steps=20");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    cr_assert(file_exists(dir, "m/model.ckpt-20.safetensors"));
    cr_assert(!file_exists(dir, "m/model.ckpt-20.host-00000-of-00001.safetensors"), "1 host: no host files");
    resumes_as_never_stopped(2, 2, dir, 20, want, "resumed on 2 hosts");
    cr_assert(file_exists(dir, "m/model.ckpt-30.host-00001-of-00002.safetensors"));
    tc_rmtree(dir);
    free(dir);
}

Test(mpi_train, a_checkpoint_missing_a_host_file_is_skipped_for_the_previous_one)
{
    char *dir = tc_tmpdir(), want[65], got[65];
    dlrm_digest_30(want);
    tc_result r = dlrm_on(2, 2, dir, "--train_steps=20");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    char gone[1024];
    snprintf(gone, sizeof gone, "%s/m/model.ckpt-20.host-00001-of-00002.safetensors", dir);
    cr_assert_eq(unlink(gone), 0);
    r = tc_runf("ckpt list %s/m", dir);
    cr_assert(strstr(r.out, "INVALID: checkpoint") != NULL && strstr(r.out, "is incomplete: host file 1 of 2") &&
                  strstr(r.out, "a resume restores step 10") != NULL, "%s", r.out);
    tc_done(&r);
    /* Step 20 is incomplete: both hosts resume from 10, to 30. */
    r = dlrm_on(2, 2, dir, "--train_steps=20");
    digest_of(&r, "resumed past the incomplete checkpoint", got);
    cr_assert_eq(restored_from(&r), 10, "%s\n%s", r.out, r.err);
    cr_assert_str_eq(got, want);
    char warn[1200];
    snprintf(warn, sizeof warn, "is incomplete: host file 1 of 2: %s", gone);
    cr_assert(strstr(r.err, warn) != NULL, "the warning names the file: %s", r.err);
    cr_assert(strstr(r.err, "falling back to the previous checkpoint") != NULL, "%s", r.err);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

Test(mpi_train, a_mod_sharded_checkpoint_resumes_on_4_hosts_and_as_div_default_on_2)
{
    char *dir = tc_tmpdir(), want[65], got[65];
    dlrm_digest_30(want);
    /* The example with MOD sharding over hosts. */
    json_error_t je;
    json_t *cfg = json_load_file("examples/dlrm_synthetic.json", 0, &je);
    cr_assert_not_null(cfg, "%s", je.text);
    json_object_set_new(json_object_get(cfg, "embedding"), "sharding_strategy", json_string("mod"));
    char mod[1024], launch[3072];
    snprintf(mod, sizeof mod, "%s/dlrm_mod.json", dir);
    cr_assert_eq(json_dump_file(cfg, mod, 0), 0);
    json_decref(cfg);
    /* DLRM_SAVES with the MOD file in place of the example. */
    const char *flags = strstr(DLRM_SAVES, "--synthetic_examples");
    snprintf(launch, sizeof launch, "-np 2 @tpuloop train %s %s --devices=2 --train_steps=20 --model_dir=%s/m", mod,
             flags, dir);
    tc_result r = tc_mpirun(launch, 180);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    char path[1024];
    snprintf(path, sizeof path, "%s/m/model.ckpt-20.safetensors", dir);
    tl_ckpt_reader *main;
    cr_assert_eq(tl_ckpt_open(path, 0, &main), TL_OK, "%s", tl_last_error());
    cr_assert_str_eq(tl_ckpt_meta(main, TL_CKPT_META_TABLE_SHARDING), "MOD");
    tl_ckpt_close(main);
    char cmd[3072];
    snprintf(cmd, sizeof cmd, "mkdir %s/on4 && cp -r %s/m %s/on4/m", dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(launch, sizeof launch, "-np 4 --mca btl tcp,self @tpuloop train %s %s --devices=1 --train_steps=10 "
             "--model_dir=%s/on4/m", mod, flags, dir);
    r = tc_mpirun(launch, 180);
    digest_of(&r, "MOD on 4 hosts", got);
    cr_assert_eq(restored_from(&r), 20, "%s", r.out);
    cr_assert_str_eq(got, want);
    tc_done(&r);
    /* The same checkpoint into DIV_DEFAULT shards of 2 hosts. */
    resumes_as_never_stopped(2, 2, dir, 20, want, "DIV_DEFAULT on 2 hosts");
    tc_rmtree(dir);
    free(dir);
}

/* params_digest gathers each table over the hosts in chunks of 1M floats:
 * a table of 70001 x 16 (two chunks, shards of uneven rows) digests as on
 * one process, with DIV_DEFAULT and with MOD sharding. */
Test(mpi_train, params_digest_over_hosts_gathers_a_table_larger_than_one_chunk)
{
    char *dir = tc_tmpdir(), want[65], got[65];
    static const char *const strategies[] = {"div_default", "mod"};
    const char *flags = strstr(DLRM, "--synthetic_examples");
    for (int k = 0; k < 2; k++) {
        json_error_t je;
        json_t *cfg = json_load_file("examples/dlrm_synthetic.json", 0, &je);
        cr_assert_not_null(cfg, "%s", je.text);
        json_t *emb = json_object_get(cfg, "embedding");
        json_object_set_new(json_array_get(json_object_get(emb, "tables"), 0), "vocabulary_size",
                            json_integer(70001));
        json_object_set_new(emb, "sharding_strategy", json_string(strategies[k]));
        char file[1024], launch[3072];
        snprintf(file, sizeof file, "%s/big_%s.json", dir, strategies[k]);
        cr_assert_eq(json_dump_file(cfg, file, 0), 0);
        json_decref(cfg);
        if (k == 0) {
            tc_result r = tc_runf("train %s %s --train_steps=10 --devices=4", file, flags);
            digest_of(&r, "1 x 4", want);
            tc_done(&r);
        }
        snprintf(launch, sizeof launch, "-np %d --mca btl tcp,self @tpuloop train %s %s --train_steps=10 --devices=%d",
                 k == 0 ? 2 : 4, file, flags, k == 0 ? 2 : 1);
        tc_result r = tc_mpirun(launch, 180);
        digest_of(&r, launch, got);
        cr_assert_str_eq(got, want, "%s", strategies[k]);
        tc_done(&r);
    }
    tc_rmtree(dir);
    free(dir);
}

/* Writes w, the tensors of file's reader r as the caller changed them,
 * over file with r's metadata (less what the writer fills in), then closes
 * both. */
static void rewrite(tl_ckpt_writer *w, tl_ckpt_reader *r, const char *file)
{
    for (int i = 0; i < tl_ckpt_num_meta(r); i++) {
        const char *k, *v;
        tl_ckpt_meta_at(r, i, &k, &v);
        if (strcmp(k, "format") != 0 && strcmp(k, "format_version") != 0 && strcmp(k, "crc32c") != 0 &&
            strcmp(k, "header_crc32c") != 0)
            cr_assert_eq(tl_ckpt_writer_set_meta(w, k, v), TL_OK);
    }
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.new", file);
    cr_assert_eq(tl_ckpt_writer_write(w, tmp), TL_OK, "%s", tl_last_error());
    tl_ckpt_writer_destroy(w);
    tl_ckpt_close(r);
    cr_assert_eq(rename(tmp, file), 0);
}

/* Rewrites host file `file` with table C1's parameters one row short
 * (everything else, the metadata included, as it was). */
static void shorten_c1(const char *file)
{
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(file, 0, &r), TL_OK, "%s", tl_last_error());
    tl_ckpt_writer *w;
    cr_assert_eq(tl_ckpt_writer_create(&w), TL_OK);
    for (int i = 0; i < tl_ckpt_num_tensors(r); i++) {
        tl_ckpt_tensor_info t;
        cr_assert_eq(tl_ckpt_tensor(r, i, &t), TL_OK);
        int64_t shape[2] = {t.shape[0], t.shape[1]};
        if (strcmp(t.name, "embedding/C1/parameters") == 0)
            shape[0]--;
        cr_assert_eq(tl_ckpt_writer_add(w, t.name, t.dtype, shape, t.rank, t.data), TL_OK);
    }
    rewrite(w, r, file);
}

Test(mpi_train, a_host_file_whose_table_tensor_does_not_fit_fails_the_restore_naming_the_file_and_tensor)
{
    char *dir = tc_tmpdir();
    tc_result r = dlrm_on(2, 2, dir, "--train_steps=20");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    char file[1024];
    snprintf(file, sizeof file, "%s/m/model.ckpt-20.host-00001-of-00002.safetensors", dir);
    shorten_c1(file);
    /* The files are whole, so step 20 is the one to resume from; it does
     * not fit the tables: nothing loads, the run fails saying where. */
    r = dlrm_on(1, 4, dir, "--train_steps=10");
    cr_assert_neq(r.status, 0, "%s", r.out);
    char want[1400];
    snprintf(want, sizeof want, "%s: embedding tensor 'embedding/C1/parameters' is F32 [499, 16], not float32 "
                                "[500, 16]", file);
    cr_assert(strstr(r.err, want) != NULL, "%s", r.err);
    cr_assert_str_eq(r.out, "");
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

Test(mpi_train, a_host_that_cannot_write_its_host_file_fails_every_host_and_commits_nothing)
{
    char *dir = tc_tmpdir(), want[65], got[65];
    dlrm_digest_30(want);
    char blocker[1024];
    snprintf(blocker, sizeof blocker, "%s/m/model.ckpt-20.host-00001-of-00002.safetensors", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", blocker);
    cr_assert_eq(system(cmd), 0);
    tc_result r = dlrm_on(2, 2, dir, "");
    cr_assert_neq(r.status, 0, "%s", r.err);
    for (int h = 0; h < 2; h++) {
        char line[1600];
        snprintf(line, sizeof line,
                 "error [tpu_worker/host %d of 2]: the checkpoint of step 20 is not committed (the earlier "
                 "checkpoints stay): host 1: cannot write its host file %s: ", h, blocker);
        cr_assert(strstr(r.err, line) != NULL, "host %d names host 1 and its file:\n%s", h, r.err);
    }
    cr_assert_str_eq(r.out, "");
    tc_done(&r);
    cr_assert(!file_exists(dir, "m/model.ckpt-20.safetensors"), "no main file for step 20");
    cr_assert(file_exists(dir, "m/model.ckpt-10.safetensors"));
    /* The cause gone, a rerun resumes from step 10 and trains the same bits. */
    cr_assert_eq(rmdir(blocker), 0);
    r = dlrm_on(2, 2, dir, "--train_steps=20");
    digest_of(&r, "rerun", got);
    cr_assert_eq(restored_from(&r), 10, "%s\n%s", r.out, r.err);
    cr_assert_str_eq(got, want);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

Test(mpi_train, retention_deletes_the_host_files_of_old_checkpoints)
{
    char *dir = tc_tmpdir();
    /* A host file of a save that never committed, left by a killed run. */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/m && echo x > %s/m/model.ckpt-5.host-00002-of-00004.safetensors", dir,
             dir);
    cr_assert_eq(system(cmd), 0);
    tc_result r = dlrm_on(2, 2, dir, "--train_steps=40 --keep_checkpoint_max=2");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    for (int step = 0; step <= 40; step += 10) {
        bool kept = step >= 30;
        char name[128];
        snprintf(name, sizeof name, "m/model.ckpt-%d.safetensors", step);
        cr_assert_eq(file_exists(dir, name), kept, "%s", name);
        for (int h = 0; h < 2; h++) {
            snprintf(name, sizeof name, "m/model.ckpt-%d.host-%05d-of-00002.safetensors", step, h);
            cr_assert_eq(file_exists(dir, name), kept, "%s %s", name, kept ? "missing" : "not deleted");
        }
    }
    cr_assert(!file_exists(dir, "m/model.ckpt-5.host-00002-of-00004.safetensors"),
              "the host file of a save that never committed is removed");
    tc_rmtree(dir);
    free(dir);
}

/* BROADCAST: host 0 reads the input and relays each batch (with its
 * embedding ids) to the other host's replicas, and writes the predictions
 * file. run (MLP or DLRM) with flags on 1 x 4 and on 2 x 2: the same
 * digest, evaluation and predictions, byte for byte. */
static void broadcast_as_one_host(const char *run, const char *flags)
{
    char *dir = tc_tmpdir();
    tc_result one = tc_runf("%s %s --devices=4 --predictions_out=%s/one.jsonl", run, flags, dir);
    char want[65], got[65];
    digest_of(&one, "1 x 4", want);
    char launch[2048];
    snprintf(launch, sizeof launch, "-np 2 @tpuloop %s %s --devices=2 --predictions_out=%s/two.jsonl", run, flags,
             dir);
    tc_result two = tc_mpirun(launch, 180);
    digest_of(&two, launch, got);
    cr_assert_str_eq(got, want);
    json_t *a = tc_json(&one), *b = tc_json(&two);
    cr_assert(json_equal(json_object_get(a, "eval"), json_object_get(b, "eval")), "%s\n%s", one.out, two.out);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(b, "predictions"), "rows")), 300, "%s", two.out);
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/one.jsonl", dir);
    snprintf(p2, sizeof p2, "%s/two.jsonl", dir);
    char *t1 = tc_slurp(p1), *t2 = tc_slurp(p2);
    cr_assert(t1 != NULL && t2 != NULL && t1[0] != '\0' && strcmp(t1, t2) == 0, "the predictions differ");
    free(t1);
    free(t2);
    json_decref(a);
    json_decref(b);
    tc_done(&one);
    tc_done(&two);
    tc_rmtree(dir);
    free(dir);
}

Test(mpi_train, dlrm_relayed_from_host_0_predicts_as_one_host)
{
    broadcast_as_one_host(DLRM, "--per_host_input_for_training=BROADCAST --synthetic_eval_examples=300 "
                                "--predict_batch_size=64 --predict");
}

Test(mpi_train, evaluation_over_hosts_counts_every_host_s_replicas)
{
    /* TensorFlow evaluates on several hosts with PER_HOST_V2 only. */
    const char *flags = "--per_host_input_for_training=PER_HOST_V2 --eval_batch_size=128 --eval_steps=3";
    tc_result one = tc_runf("%s %s --devices=4", MLP, flags);
    cr_assert_eq(one.status, 0, "%s", one.err);
    json_t *ja = tc_json(&one), *a = json_object_get(ja, "eval");
    char launch[1024];
    snprintf(launch, sizeof launch, "-np 2 @tpuloop %s %s --devices=2", MLP, flags);
    tc_result two = tc_mpirun(launch, 120);
    cr_assert_eq(two.status, 0, "%s", two.err);
    json_t *jb = tc_json(&two), *b = json_object_get(jb, "eval");
    cr_assert_not_null(a);
    cr_assert(json_equal(a, b), "%s\n%s", one.out, two.out);
    cr_assert_eq(json_integer_value(json_object_get(b, "examples")), 384);
    json_decref(ja);
    json_decref(jb);
    tc_done(&one);
    tc_done(&two);
}

Test(mpi_train, broadcast_from_host_0_trains_evaluates_and_predicts_as_one_host)
{
    broadcast_as_one_host(MLP, "--per_host_input_for_training=BROADCAST --eval_batch_size=64 --eval_steps=2 "
                               "--synthetic_eval_examples=300 --predict_batch_size=64 --predict");
}

/* ---- the C API: each host's invocations of the plan ------------------------ */

/* The lines of out that start with prefix, sorted, joined. */
static char *lines_with(const char *out, const char *prefix)
{
    char *copy = strdup(out), *save = NULL, *v[256];
    int n = 0;
    for (char *l = strtok_r(copy, "\n", &save); l != NULL && n < 256; l = strtok_r(NULL, "\n", &save))
        if (strncmp(l, prefix, strlen(prefix)) == 0)
            v[n++] = l;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
            char *t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    size_t cap = 1;
    for (int i = 0; i < n; i++)
        cap += strlen(v[i]) + 1;
    char *s = calloc(cap, 1);
    for (int i = 0; i < n; i++) {
        strcat(s, v[i]);
        strcat(s, "\n");
    }
    free(copy);
    return s;
}

static char *program(void)
{
    const char *cli = tc_binary(), *slash = strrchr(cli, '/');
    char *p = NULL;
    cr_assert(asprintf(&p, "%.*s/../tests/mpi_estimator_check", slash ? (int)(slash - cli) : 0, cli) > 0);
    return p;
}

/* What host h of a mode's plan on 2 hosts x 2 devices calls: the plan's
 * invocations on host h, in the program's format ("" when the mode cannot
 * run on 2 hosts). input_mode SLICED is PER_HOST_V1 with SLICED evaluation,
 * as the program takes it. */
static char *expected_calls(const char *input_mode, tl_mode mode, int h)
{
    char json[512];
    bool sliced = strcmp(input_mode, "SLICED") == 0;
    snprintf(json, sizeof json,
             "{\"train_batch_size\": 64, \"eval_batch_size\": 32, \"predict_batch_size\": 32, \"devices\": 2,"
             " \"num_hosts\": 2, \"tpu_config\": {\"per_host_input_for_training\": \"%s\","
             " \"eval_training_input_configuration\": \"%s\"}}",
             sliced ? "PER_HOST_V1" : input_mode, sliced ? "SLICED" : "PER_HOST_V1");
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    cr_assert_eq(tl_config_load_json(cfg, json, strlen(json), "t"), TL_OK);
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    tl_topology *topo;
    cr_assert_eq(tl_topology_create(tl_config_get(cfg), NULL, &topo), TL_OK);
    tl_input_plan *p;
    char *s = calloc(4096, 1);
    size_t n = 0;
    tl_set_log_level(TL_LOG_ERROR); /* the plan's PER_HOST_V2 warning */
    tl_status st = tl_input_plan_create(topo, tl_config_get(cfg), mode, &p);
    tl_set_log_level(TL_LOG_WARN);
    if (st != TL_OK) {
        tl_topology_destroy(topo);
        tl_config_destroy(cfg);
        return s;
    }
    for (int i = 0; i < p->input_fn_calls; i++) {
        const tl_input_call *c = &p->calls[i];
        if (c->host == h)
            n += (size_t)snprintf(s + n, 4096 - n, "host %d: call %s %d %d %d %d %d %lld\n", h, tl_mode_name(mode),
                                  c->host, c->index, p->input_fn_calls, c->num_replicas, c->first_replica,
                                  (long long)p->input_fn_batch_size);
    }
    tl_input_plan_destroy(p);
    tl_topology_destroy(topo);
    tl_config_destroy(cfg);
    return s;
}

/* Every input mode over 2 processes: each host calls exactly its own
 * invocations of each mode's plan — none at all when host 0's invocation
 * feeds every replica (BROADCAST, SLICED), whose batches host 0 relays —
 * and the parameters, the evaluation and the predictions are those of the
 * two hosts side by side in one process. */
Test(mpi_train, each_host_calls_exactly_its_invocations_of_the_plan)
{
    static const char *const modes[] = {"PER_HOST_V1", "PER_HOST_V2", "PER_SHARD_V1", "BROADCAST", "SLICED"};
    char *prog = program();
    for (int m = 0; m < 5; m++) {
        char launch[1024];
        snprintf(launch, sizeof launch, "-np 2 %s %s 2 2 mpi", prog, modes[m]);
        tc_result r = tc_mpirun(launch, 120);
        cr_assert_eq(r.status, 0, "%s\n%s%s", launch, r.out, r.err);
        /* The same program alone, the two hosts side by side: the same bits. */
        char alone[1024];
        snprintf(alone, sizeof alone, "%s %s 2 2 </dev/null 2>&1", prog, modes[m]);
        FILE *f = popen(alone, "r");
        char buf[8192] = "";
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        cr_assert_eq(pclose(f), 0, "%s\n%s", alone, buf);
        for (int k = 0; k < 2; k++) {
            const char *what = k == 0 ? "digest" : "predict";
            char p0[32], p1[32];
            snprintf(p0, sizeof p0, "host 0: %s", what);
            snprintf(p1, sizeof p1, "host 1: %s", what);
            char *d0 = lines_with(buf, p0), *d1 = lines_with(r.out, p0), *d2 = lines_with(r.out, p1);
            cr_assert(d0[0] != '\0' && strcmp(d0, d1) == 0, "%s %s: one process\n%s\ntwo\n%s", modes[m], what, buf,
                      r.out);
            cr_assert_str_eq(d1 + 6, d2 + 6, "%s %s: the hosts disagree\n%s", modes[m], what, r.out);
            free(d0);
            free(d1);
            free(d2);
        }
        bool over_hosts = m >= 3; /* host 0 feeds every replica: predictions too */
        if (over_hosts)
            cr_assert(strstr(r.out, "host 1: predict 150 ") != NULL, "%s\n%s", modes[m], r.out);
        for (int h = 0; h < 2; h++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "host %d: call", h);
            char *got = lines_with(r.out, prefix);
            /* Each plan's invocations on this host once, the training
             * plan's first twice (its shape probe): none where host 0
             * feeds every replica. Evaluation and prediction run where
             * their plans allow several hosts. */
            char *train = expected_calls(modes[m], TL_MODE_TRAIN, h);
            char *eval = expected_calls(modes[m], TL_MODE_EVAL, h);
            char *pred = expected_calls(modes[m], TL_MODE_PREDICT, h);
            char *first = strchr(train, '\n');
            char want[8192];
            snprintf(want, sizeof want, "%s%s%.*s%s", eval, pred, first ? (int)(first - train + 1) : 0, train, train);
            char *sorted = lines_with(want, prefix);
            cr_assert_str_eq(got, sorted, "%s host %d:\n%s", modes[m], h, r.out);
            if (h == 1 && m == 3)
                cr_assert_str_eq(got, "", "BROADCAST: host 1 reads nothing itself");
            free(got);
            free(train);
            free(eval);
            free(pred);
            free(sorted);
        }
        tc_done(&r);
    }
    free(prog);
}

/* ---- files, checkpoints, the end of the input ------------------------------ */

/* A tiny Fashion-MNIST as 4 TFRecord shards in a new directory. */
static char *tfrecord_shards(void)
{
    char *dir = tc_tmpdir();
    tc_write_tiny_mnist(dir, 1024, 64, 8);
    tc_result r = tc_runf("data convert --from=idx %s/train-images-idx3-ubyte --labels=%s/train-labels-idx1-ubyte "
                          "--out=%s/train.tfrecord --shards=4",
                          dir, dir, dir);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    return dir;
}

#define FILES_FLAGS                                                                                              \
    "train --model_name=mlp --dataset=tfrecord --files=%s/train-*-of-00004.tfrecord --shuffle_buffer_size=64 "  \
    "--features='{\"image\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\", \"shape\": [64]}, "          \
    "\"label\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\"}}' --scale=0.0039 --train_batch_size=32 "  \
    "--tf_random_seed=5 --iterations_per_loop=5 --per_host_input_for_training=PER_SHARD_V1 "                   \
    "--log_step_count_steps=1000"

Test(mpi_train, files_read_per_replica_train_the_same_bits_to_the_end_of_the_input)
{
    char *dir = tfrecord_shards();
    char flags[2048], launch[2300], want[65], got[65];
    /* One epoch: the input ends where the first replica's invocation ends,
     * on every host at the same step. */
    snprintf(flags, sizeof flags, FILES_FLAGS " --epochs=1", dir);
    tc_result r = tc_runf("%s --devices=4", flags);
    digest_of(&r, "1 x 4", want);
    json_t *j = tc_json(&r);
    json_int_t steps = json_integer_value(json_object_get(j, "global_step"));
    cr_assert(json_is_true(json_object_get(j, "end_of_input")), "%s", r.out);
    json_decref(j);
    tc_done(&r);
    static const char *const layouts[] = {"-np 2", "-np 4 --mca btl tcp,self"};
    for (int i = 0; i < 2; i++) {
        snprintf(launch, sizeof launch, "%s @tpuloop %s --devices=%d", layouts[i], flags, i == 0 ? 2 : 1);
        r = tc_mpirun(launch, 120);
        digest_of(&r, launch, got);
        cr_assert_str_eq(got, want, "%s", launch);
        j = tc_json(&r);
        cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), steps, "%s", r.out);
        json_decref(j);
        tc_done(&r);
    }
    tc_rmtree(dir);
    free(dir);
}

/* The JSON array a checkpoint file's "input_datasets" holds; NULL when it
 * has no such tensor. */
static json_t *positions_of(const char *file)
{
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(file, 0, &r), TL_OK, "%s", tl_last_error());
    tl_ckpt_tensor_info t;
    json_t *j = NULL;
    if (tl_ckpt_find(r, "input_datasets", &t) == TL_OK) {
        cr_assert(t.dtype == TL_CKPT_U8 && t.rank == 1, "%s", file);
        json_error_t je;
        j = json_loadb(t.data, (size_t)t.bytes, 0, &je);
        cr_assert(json_is_array(j), "%s: %s", file, je.text);
    }
    tl_ckpt_close(r);
    return j;
}

/* The checkpoint of step in model_dir dir, written by H > 1 hosts of the
 * MLP on 4 replicas reading PER_SHARD_V1 (invocation i is replica i's):
 * the main file names H host files and holds no positions and no tables;
 * host file h holds only the positions of its own invocations, [h * 4 / H,
 * (h + 1) * 4 / H), null for the others — so each invocation's is in one
 * file. */
static void positions_in_host_files(const char *dir, int step, int H)
{
    char path[1024], file[1100], count[16];
    snprintf(path, sizeof path, "%s/model.ckpt-%d.safetensors", dir, step);
    tl_ckpt_reader *main;
    cr_assert_eq(tl_ckpt_open(path, 0, &main), TL_OK, "%s", tl_last_error());
    tl_ckpt_tensor_info t;
    cr_assert_neq(tl_ckpt_find(main, "input_datasets", &t), TL_OK, "%s: the main file of %d hosts holds positions",
                  path, H);
    snprintf(count, sizeof count, "%d", H);
    cr_assert_str_eq(tl_ckpt_meta(main, TL_CKPT_META_HOST_FILES), count);
    cr_assert_null(tl_ckpt_meta(main, TL_CKPT_META_TABLE_SHARDING), "the MLP has no tables");
    tl_ckpt_close(main);
    for (int h = 0; h < H; h++) {
        cr_assert_eq(tl_ckpt_host_path(path, h, H, file, sizeof file), TL_OK);
        tl_ckpt_reader *r;
        cr_assert_eq(tl_ckpt_open(file, 0, &r), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_ckpt_num_tensors(r), 1, "%s: its positions alone", file);
        char hs[16];
        snprintf(hs, sizeof hs, "%d", h);
        cr_assert_str_eq(tl_ckpt_meta(r, TL_CKPT_META_HOST_FILE), hs);
        cr_assert_str_eq(tl_ckpt_meta(r, TL_CKPT_META_HOST_FILES), count);
        tl_ckpt_close(r);
        json_t *pos = positions_of(file);
        cr_assert_not_null(pos, "%s has no input_datasets", file);
        cr_assert_eq(json_array_size(pos), 4, "%s: one element per invocation", file);
        for (int i = 0; i < 4; i++) {
            json_t *e = json_array_get(pos, (size_t)i);
            bool mine = i / (4 / H) == h;
            cr_assert(mine ? json_is_object(e) : json_is_null(e), "%s: invocation %d is %s's, yet it is %s", file, i,
                      mine ? "this host" : "another host", json_is_null(e) ? "null" : "a position");
        }
        json_decref(pos);
    }
}

/* Rewrites checkpoint file `file` with text as its "input_datasets"
 * (everything else, the metadata included, as it was). */
static void rewrite_positions(const char *file, const char *text)
{
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(file, 0, &r), TL_OK, "%s", tl_last_error());
    tl_ckpt_writer *w;
    cr_assert_eq(tl_ckpt_writer_create(&w), TL_OK);
    for (int i = 0; i < tl_ckpt_num_tensors(r); i++) {
        tl_ckpt_tensor_info t;
        cr_assert_eq(tl_ckpt_tensor(r, i, &t), TL_OK);
        if (strcmp(t.name, "input_datasets") == 0) {
            int64_t len = (int64_t)strlen(text);
            cr_assert_eq(tl_ckpt_writer_add(w, t.name, TL_CKPT_U8, &len, 1, text), TL_OK);
        } else {
            cr_assert_eq(tl_ckpt_writer_add(w, t.name, t.dtype, t.shape, t.rank, t.data), TL_OK);
        }
    }
    rewrite(w, r, file);
}

Test(mpi_train, a_checkpoint_of_2_hosts_resumes_on_1_and_on_4_as_if_never_stopped)
{
    char *dir = tfrecord_shards();
    char flags[2048], launch[2600], want[65], want40[65], got[65], path[1024];
    snprintf(flags, sizeof flags, FILES_FLAGS " --epochs=null --save_checkpoints_steps=10", dir);
    tc_result r = tc_runf("%s --devices=4 --train_steps=30", flags);
    digest_of(&r, "uninterrupted", want);
    tc_done(&r);
    r = tc_runf("%s --devices=4 --train_steps=40", flags);
    digest_of(&r, "uninterrupted to 40", want40);
    tc_done(&r);
    /* 2 hosts to step 20: each host's file holds its own input positions. */
    snprintf(launch, sizeof launch, "-np 2 @tpuloop %s --devices=2 --train_steps=20 --model_dir=%s/two", flags, dir);
    r = tc_mpirun(launch, 120);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    snprintf(path, sizeof path, "%s/two", dir);
    for (int step = 0; step <= 20; step += 10)
        positions_in_host_files(path, step, 2);
    r = tc_runf("ckpt inspect %s/two/model.ckpt-20", dir);
    cr_assert(strstr(r.out, "2 host files, each with its host's input positions") != NULL &&
                  strstr(r.out, "model.ckpt-20.host-00001-of-00002.safetensors: valid") != NULL, "%s", r.out);
    tc_done(&r);
    r = tc_runf("ckpt inspect %s/two/model.ckpt-20 --tensor=input_datasets", dir);
    cr_assert(r.status != 0 && strstr(r.err, "input positions are in its 2 host files") != NULL, "%s", r.err);
    tc_done(&r);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp -r %s/two %s/two_copy", dir, dir);
    cr_assert_eq(system(cmd), 0);
    r = tc_runf("%s --devices=4 --train_steps=10 --model_dir=%s/two", flags, dir);
    digest_of(&r, "resumed on 1 host", got);
    cr_assert_str_eq(got, want);
    cr_assert(strstr(r.err, "will not repeat") == NULL, "the replicas are the same: %s", r.err);
    tc_done(&r);
    /* One host's checkpoint holds every position itself, as before. */
    snprintf(path, sizeof path, "%s/two/model.ckpt-30.safetensors", dir);
    json_t *pos = positions_of(path);
    cr_assert(json_array_size(pos) == 4 && json_is_object(json_array_get(pos, 0)) &&
              json_is_object(json_array_get(pos, 3)), "%s", path);
    json_decref(pos);
    snprintf(path, sizeof path, "two/model.ckpt-30.host-00000-of-00001.safetensors");
    cr_assert(!file_exists(dir, path), "1 host: no host files");
    /* And that 1-host checkpoint resumes on 2 hosts, each taking its own. */
    snprintf(launch, sizeof launch, "-np 2 @tpuloop %s --devices=2 --train_steps=10 --model_dir=%s/two", flags, dir);
    r = tc_mpirun(launch, 120);
    digest_of(&r, "the 1-host checkpoint resumed on 2 hosts", got);
    cr_assert_str_eq(got, want40);
    tc_done(&r);
    snprintf(path, sizeof path, "%s/two", dir);
    positions_in_host_files(path, 40, 2);
    snprintf(launch, sizeof launch, "-np 4 @tpuloop %s --devices=1 --train_steps=10 --model_dir=%s/two_copy", flags,
             dir);
    r = tc_mpirun(launch, 120);
    digest_of(&r, "resumed on 4 hosts", got);
    cr_assert_str_eq(got, want);
    tc_done(&r);
    snprintf(path, sizeof path, "%s/two_copy", dir);
    positions_in_host_files(path, 30, 4);
    tc_rmtree(dir);
    free(dir);
}

/* Each invocation's position is in exactly one host file; a checkpoint
 * where it is in two or in none, or whose host file has another count of
 * invocations, does not resume, and the error names the files. */
Test(mpi_train, a_position_in_two_host_files_or_in_none_fails_the_resume_naming_the_files)
{
    char *dir = tfrecord_shards();
    char flags[2048], launch[2600], main[1024], f0[1100], f1[1100];
    snprintf(flags, sizeof flags, FILES_FLAGS " --epochs=null --save_checkpoints_steps=10", dir);
    snprintf(launch, sizeof launch, "-np 2 @tpuloop %s --devices=2 --train_steps=10 --model_dir=%s/m", flags, dir);
    tc_result r = tc_mpirun(launch, 120);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    snprintf(main, sizeof main, "%s/m/model.ckpt-10.safetensors", dir);
    cr_assert_eq(tl_ckpt_host_path(main, 0, 2, f0, sizeof f0), TL_OK);
    cr_assert_eq(tl_ckpt_host_path(main, 1, 2, f1, sizeof f1), TL_OK);
    json_t *p0 = positions_of(f0);
    char *own0 = json_dumps(p0, JSON_COMPACT);
    json_decref(p0);
    char twice[4400], none[4400], short_[4400];
    snprintf(twice, sizeof twice, "checkpoint %s: input dataset 0 of 4 has a position in several host files (%s, %s)",
             main, f0, f1);
    snprintf(none, sizeof none, "checkpoint %s: input dataset 2 of 4 has no position in any of its host files, each "
             "null (%s, %s)", main, f0, f1);
    snprintf(short_, sizeof short_, "checkpoint %s: host file %s holds the positions of 1 input datasets; this "
             "input plan has 4 invocations", main, f1);
    const struct {
        const char *text, *error;
    } cases[] = {{own0, twice}, {"[null, null, null, null]", none}, {"[null]", short_}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        rewrite_positions(f1, cases[c].text);
        r = tc_runf("%s --devices=4 --train_steps=10 --model_dir=%s/m", flags, dir);
        cr_assert_neq(r.status, 0, "case %zu: %s", c, r.out);
        cr_assert(strstr(r.err, cases[c].error) != NULL, "case %zu: the error lacks\n%s\n%s", c, cases[c].error,
                  r.err);
        tc_done(&r);
    }
    free(own0);
    tc_rmtree(dir);
    free(dir);
}

/* ---- failures -------------------------------------------------------------- */

Test(mpi_train, hosts_started_with_different_configurations_fail_naming_the_field)
{
    tc_result r = tc_mpirun("-np 1 @tpuloop " MLP " --devices=2 --learning_rate=0.1 : -np 1 @tpuloop " MLP
                            " --devices=2 --learning_rate=0.2",
                            60);
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "hosts run different jobs: host 1 differs from host 0 in \"model.learning_rate\"") != NULL,
              "%s", r.err);
    cr_assert_str_eq(r.out, "", "nothing trained");
    tc_done(&r);
}

Test(mpi_train, hosts_with_other_device_counts_fail_naming_both)
{
    /* devices 0 is one per core of each process's own affinity mask. */
    tc_result r = tc_mpirun("--bind-to none -np 1 taskset -c 0,1 @tpuloop " MLP " : -np 1 taskset -c 0 @tpuloop " MLP,
                            60);
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "error [tpu_worker/host 0 of 2]: host 1 has 1 devices, host 0 2") != NULL, "%s", r.err);
    cr_assert_str_eq(r.out, "");
    tc_done(&r);
}

Test(mpi_train, num_hosts_other_than_the_processes_is_refused_naming_both)
{
    tc_result r = tc_mpirun("-np 2 @tpuloop " MLP " --devices=2 --num_hosts=4", 60);
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "num_hosts is 4 (flag --num_hosts) but the launcher started 2 processes") != NULL, "%s",
              r.err);
    tc_done(&r);
}

Test(mpi_train, a_host_that_cannot_open_its_input_fails_every_host)
{
    tc_result r = tc_mpirun("-np 1 @tpuloop " MLP " --devices=2 : -np 1 @tpuloop train --model_name=mlp "
                            "--dataset=tfrecord --files=/nonexistent/x* --features='{\"x\": {\"type\": "
                            "\"FixedLenFeature\", \"dtype\": \"float32\"}, \"label\": {\"type\": "
                            "\"FixedLenFeature\", \"dtype\": \"int64\"}}' --train_steps=5 "
                            "--train_batch_size=64 --devices=2",
                            60);
    cr_assert_neq(r.status, 0);
    /* Host 1 says why; host 0 says it too, naming host 1. */
    cr_assert(strstr(r.err, "error [tpu_worker/host 1 of 2]: file pattern \"/nonexistent/x*\" matches no file") !=
                  NULL, "%s", r.err);
    cr_assert(strstr(r.err, "error [tpu_worker/host 0 of 2]: host 1: file pattern") != NULL, "%s", r.err);
    cr_assert_str_eq(r.out, "");
    tc_done(&r);
}

/* The pid of host `host` among the processes whose command line holds
 * marker (the model_dir: mpirun's own line holds it too, but not the rank). */
static int pid_of_host(const char *marker, int host)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "for p in $(pgrep -f -- '%s'); do tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | "
             "grep -qx 'OMPI_COMM_WORLD_RANK=%d' && echo $p; done",
             marker, host);
    FILE *f = popen(cmd, "r");
    int pid = 0;
    if (fscanf(f, "%d", &pid) != 1)
        pid = 0;
    pclose(f);
    return pid;
}

/* Starts 2 hosts training for long in the background (a shell that writes
 * the launch's output and status into dir), waits for their first
 * checkpoint and returns host 1's pid. */
static int start_long_run(const char *dir, const char *extra)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "(env -u TPULOOP_DEVICE_COUNT LSAN_OPTIONS=suppressions=tests/mpi/lsan.supp:print_suppressions=0 "
             "OMPI_MCA_mca_base_component_disable_dlclose=1 ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0 "
             "timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 2 "
             "%s train --model_name=mlp --dataset=synthetic --synthetic_examples=4096 --train_batch_size=64 "
             "--tf_random_seed=3 --iterations_per_loop=10 --train_steps=10000000 --devices=2 "
             "--save_checkpoints_steps=200 --model_dir=%s/m %s </dev/null >%s/out 2>%s/err; echo $? >%s/rc) &",
             tc_binary(), dir, extra, dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
    char ck[600];
    snprintf(ck, sizeof ck, "%s/m/model.ckpt-200.safetensors", dir);
    struct stat sb;
    double t0 = tc_now();
    while (stat(ck, &sb) != 0 && tc_now() - t0 < 60)
        tc_sleep(0.05);
    cr_assert(tc_now() - t0 < 60, "no checkpoint within 60 s");
    char marker[600];
    snprintf(marker, sizeof marker, "--model_dir=%s/m", dir);
    int pid = pid_of_host(marker, 1);
    cr_assert_gt(pid, 0);
    return pid;
}

/* Waits for the background run's status (at most limit seconds). */
static int wait_rc(const char *dir, double limit, double *took)
{
    char path[600];
    snprintf(path, sizeof path, "%s/rc", dir);
    double t0 = tc_now();
    char *rc = NULL;
    while ((rc = tc_slurp(path)) == NULL || rc[0] == '\0') {
        free(rc);
        rc = NULL;
        cr_assert(tc_now() - t0 < limit, "the hosts did not stop within %g s", limit);
        tc_sleep(0.05);
    }
    *took = tc_now() - t0;
    int v = atoi(rc);
    free(rc);
    return v;
}

Test(mpi_train, a_killed_host_stops_every_host_and_the_last_checkpoint_resumes)
{
    char *dir = tc_tmpdir();
    int pid = start_long_run(dir, "");
    cr_assert_eq(kill(pid, SIGKILL), 0);
    double took;
    int rc = wait_rc(dir, 60, &took);
    cr_assert_neq(rc, 0);
    char path[600];
    snprintf(path, sizeof path, "%s/err", dir);
    char *err = tc_slurp(path);
    cr_assert(strstr(err, "rank 1") != NULL && strstr(err, "signal 9") != NULL, "names the host: %s", err);
    free(err);
    /* A rerun resumes from the newest checkpoint, which loads. */
    char launch[1024];
    snprintf(launch, sizeof launch, "-np 2 @tpuloop " MLP " --synthetic_examples=4096 --devices=2 --model_dir=%s/m",
             dir);
    tc_result r = tc_mpirun(launch, 120);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "resuming from") != NULL, "%s", r.err);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

Test(mpi_train, sigterm_to_one_host_checkpoints_on_every_host_and_stops_them)
{
    char *dir = tc_tmpdir();
    int pid = start_long_run(dir, "");
    cr_assert_eq(kill(pid, SIGTERM), 0);
    double took;
    int rc = wait_rc(dir, 60, &took);
    char path[600];
    snprintf(path, sizeof path, "%s/out", dir);
    char *out = tc_slurp(path);
    snprintf(path, sizeof path, "%s/err", dir);
    char *err = tc_slurp(path);
    cr_assert_eq(rc, 0, "%s%s", out, err);
    cr_assert(strstr(err, "Sanitizer") == NULL && strstr(err, "runtime error:") == NULL, "%s", err);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    cr_assert_not_null(j, "%s", out);
    cr_assert(json_is_true(json_object_get(j, "stopped")));
    json_int_t step = json_integer_value(json_object_get(j, "global_step"));
    snprintf(path, sizeof path, "%s/m/model.ckpt-%lld.safetensors", dir, (long long)step);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0, "the stop step's checkpoint %s", path);
    json_decref(j);
    free(out);
    free(err);
    tc_rmtree(dir);
    free(dir);
}

Test(mpi_train, a_hung_host_fails_every_host_after_host_timeout_secs)
{
    /* Stopped, not dead: mpirun sees nothing; host 0 gives up waiting. */
    char *dir = tc_tmpdir();
    int pid = start_long_run(dir, "--host_timeout_secs=3");
    cr_assert_eq(kill(pid, SIGSTOP), 0);
    double took;
    int rc = wait_rc(dir, 60, &took);
    cr_assert_neq(rc, 0);
    cr_assert_lt(took, 30, "took %g s", took);
    char path[600];
    snprintf(path, sizeof path, "%s/err", dir);
    char *err = tc_slurp(path);
    cr_assert(strstr(err, "error [tpu_worker/host 0 of 2]") != NULL && strstr(err, "process 1") != NULL,
              "host 0 names the host it waited for: %s", err);
    free(err);
    kill(pid, SIGKILL);
    tc_rmtree(dir);
    free(dir);
}

/* Replicas of several cores over hosts (issue 16): each replica's cores are
 * threads of its host, and 2 hosts of 1 replica of 2 cores train the bits
 * of 1 host of 2 such replicas — the images split spatially (the cnn on
 * Fashion-MNIST rows) and the Transformer's variables split by layout_map. */
#define CNN_MP                                                                                                   \
    "train configs/cnn_fashion_mnist.json --train_steps=6 --iterations_per_loop=3 --eval_steps=1 "              \
    "--num_cores_per_replica=2 --per_host_input_for_training=PER_HOST_V2 --input_partition_dims=[[1,2,1],null]"
#define TP_MP                                                                                                    \
    "train configs/transformer_sequences.json --train_steps=10 --iterations_per_loop=5 --num_cores_per_replica=2 " \
    "--per_host_input_for_training=PER_HOST_V2 --synthetic_examples=2048 --synthetic_eval_examples=256 "          \
    "--eval_batch_size=64 --eval_steps=4 --layout_map='{\".*ffn/dense/kernel\": [null, \"model\"], "               \
    "\".*ffn/dense_1/kernel\": [\"model\", null], \".*attention/(query|key|value)/kernel\": [null, \"model\"], "  \
    "\".*attention/output/kernel\": [\"model\", null]}'"

Test(mpi_train, replicas_of_several_cores_train_the_same_bits_over_hosts)
{
    static const char *const jobs[] = {CNN_MP, TP_MP};
    for (size_t i = 0; i < 2; i++) {
        tc_result r = tc_runf("%s --devices=4", jobs[i]);
        char want[65], got[65];
        digest_of(&r, "1 x 4", want);
        cr_assert(strstr(r.err, "(2 replicas of 2 cores)") != NULL, "%s", r.err);
        tc_done(&r);
        char launch[1024];
        snprintf(launch, sizeof launch, "-np 2 @tpuloop %s --devices=2", jobs[i]);
        r = tc_mpirun(launch, 180);
        digest_of(&r, launch, got);
        cr_assert_str_eq(got, want, "%s: other bits than one host of 2 replicas", launch);
        tc_done(&r);
    }
}

/* emb_ckpt.c — the embedding tables in checkpoints and in params_digest.
 *
 * One host (est->H == 1): each table's parameters and slots are named
 * tensors of the main file, beside the dense variables (checkpoint.c):
 *   "embedding/<table>/parameters", "embedding/<table>/<slot>"
 *                                  F32 (vocabulary_size, dim)
 *
 * Several hosts: host h's engine holds only its host shard of each table
 * (emb_steps.c), the ids that tl_emb_shard_of(sharding_strategy, V, H, id)
 * gives to h, in their local order. Each host writes its shard to its own
 * host file, the same tensors with rows (rows of shard h, dim), beside the
 * main file (checkpoint.h, "Host files"); host 0 commits the main file
 * once every host's is durable. A restore re-shards: each host builds the
 * rows of its shard of the current H from the S saved shards (or the main
 * file's whole tables), whatever S and H are, one table at a time. params_digest gathers each table in
 * bounded chunks of ids, as one process hashes it.
 *
 * A host shard of a small table may be empty (V < H): its tensors are
 * (0, dim), and the engine is neither asked for nor given its rows. */
#include <stdio.h>
#include <string.h>

#include "estimator_int.h"

/* Floats of one chunk of the digest's gather (a multiple of whole rows). */
#define DIGEST_CHUNK_FLOATS ((int64_t)1 << 20)

/* The longest message a failing host passes to the others. */
#define AGREE_MSG 1024

/* Table t's state as checkpoint tensors: [0] the parameters, [1..] the
 * slots, each (rows, dim). */
static int table_tensors(const tl_emb_config *c, int t)
{
    return 1 + tl_emb_num_slots(c->tables[t].optimizer);
}

static char *tensor_name(const tl_emb_config *c, int t, int k)
{
    return tl_asprintf("embedding/%s/%s", c->tables[t].name,
                       k == 0 ? "parameters" : tl_emb_slot_name(c->tables[t].optimizer, k - 1));
}

static const char *strategy_name(tl_emb_sharding s)
{
    return s == TL_EMB_MOD ? "MOD" : "DIV_DEFAULT";
}

static bool strategy_parse(const char *name, tl_emb_sharding *out)
{
    if (name != NULL && strcmp(name, "MOD") == 0)
        *out = TL_EMB_MOD;
    else if (name != NULL && strcmp(name, "DIV_DEFAULT") == 0)
        *out = TL_EMB_DIV_DEFAULT;
    else
        return false;
    return true;
}

/* This host's shard of the tables: (H, host), or (1, 0) on one host. */
static void own_shard(const tl_estimator *est, int *S, int *h)
{
    *S = est->H > 1 ? est->H : 1;
    *h = est->H > 1 ? est->host : 0;
}

void tl_est_emb_ckpt_free(tl_estimator *est)
{
    tl_free(est->emb_ckpt);
    est->emb_ckpt = NULL;
}

/* ---- agreeing over the hosts --------------------------------------------- */

tl_status tl_est_ckpt_agree(tl_estimator *est, tl_status st)
{
    if (est->H == 1)
        return st;
    /* Per host: its status and its message, merged (hosts.c's trick: each
     * host writes only its own words). */
    enum { W = 1 + AGREE_MSG / 8 };
    int64_t *v = tl_calloc((size_t)est->H * W, sizeof *v);
    if (v == NULL)
        return tl_error_oom();
    int64_t *mine = v + (int64_t)est->host * W;
    mine[0] = st;
    if (st != TL_OK)
        snprintf((char *)(mine + 1), AGREE_MSG, "%s", tl_last_error());
    tl_status mst = tl_est_hosts_merge(est, v, (int64_t)est->H * W);
    if (mst != TL_OK) {
        tl_free(v);
        return mst;
    }
    int first = -1, failed = 0;
    for (int h = 0; h < est->H; h++)
        if (v[(int64_t)h * W] != TL_OK) {
            failed++;
            if (first < 0)
                first = h;
        }
    tl_status out = TL_OK;
    if (first >= 0) {
        int64_t *f = v + (int64_t)first * W;
        char *msg = (char *)(f + 1);
        msg[AGREE_MSG - 1] = '\0';
        char more[64] = "";
        if (failed > 1)
            snprintf(more, sizeof more, " (and %d other host%s)", failed - 1, failed > 2 ? "s" : "");
        out = tl_error((tl_status)f[0], "host %d%s: %s", first, more, msg);
    }
    tl_free(v);
    return out;
}

/* ---- saving ---------------------------------------------------------------- */

/* Copies this host's shard of every table (parameters, then slots, each
 * (rows, dim)) into est->emb_ckpt, and adds them to w as tensors. */
static tl_status add_own_rows(tl_estimator *est, tl_ckpt_writer *w)
{
    tl_emb_engine *eng = est->opt.embedding;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    int S, h;
    own_shard(est, &S, &h);
    /* The writer borrows the bytes until it is written: one buffer holds a
     * copy of every table's shard, freed after the save. */
    int64_t floats = 0;
    for (int t = 0; t < c->num_tables; t++)
        floats += table_tensors(c, t) * tl_emb_shard_rows(c->tables[t].vocabulary_size, S, h) * c->tables[t].dim;
    tl_est_emb_ckpt_free(est);
    est->emb_ckpt = tl_malloc((size_t)(floats ? floats : 1) * sizeof(float));
    if (est->emb_ckpt == NULL)
        return tl_error(TL_ENOMEM, "checkpoint: cannot hold a copy of the embedding tables (%lld bytes)",
                        (long long)floats * 4);
    float *cur = est->emb_ckpt;
    tl_status st = TL_OK;
    for (int t = 0; t < c->num_tables && st == TL_OK; t++) {
        int n = table_tensors(c, t);
        int64_t rows = tl_emb_shard_rows(c->tables[t].vocabulary_size, S, h), dim = c->tables[t].dim;
        float *state[TL_EMB_MAX_SLOTS + 1];
        for (int k = 0; k < n; k++)
            state[k] = cur + k * rows * dim;
        if (rows > 0 && (st = tl_emb_retrieve(eng, t, NULL, S, h, state, n, rows)) != TL_OK)
            break;
        int64_t shape[2] = {rows, dim};
        for (int k = 0; k < n && st == TL_OK; k++) {
            char *name = tensor_name(c, t, k);
            st = name != NULL ? tl_ckpt_writer_add(w, name, TL_CKPT_F32, shape, 2, rows > 0 ? state[k] : NULL)
                              : tl_error_oom();
            tl_free(name);
        }
        cur += n * rows * dim;
    }
    return st;
}

static tl_status set_strategy(const tl_estimator *est, tl_ckpt_writer *w)
{
    const tl_emb_config *c = tl_emb_engine_config(est->opt.embedding);
    return tl_ckpt_writer_set_meta(w, TL_CKPT_META_TABLE_SHARDING, strategy_name(c->sharding_strategy));
}

tl_status tl_est_emb_save(tl_estimator *est, tl_ckpt_writer *wr)
{
    if (est->opt.embedding == NULL)
        return TL_OK;
    /* Several hosts: the tables are in the host files; the main file says
     * how they are split (checkpoint.c sets the count). */
    return est->H == 1 ? add_own_rows(est, wr) : set_strategy(est, wr);
}

tl_status tl_est_emb_save_host(tl_estimator *est, tl_ckpt_writer *w)
{
    if (est->opt.embedding == NULL || est->H == 1)
        return TL_OK;
    tl_status st = add_own_rows(est, w);
    return st == TL_OK ? set_strategy(est, w) : st;
}

/* ---- restoring ------------------------------------------------------------- */

struct tl_est_emb_src {
    int S;                      /* saved shards (1 when the main file holds the tables) */
    bool in_main;               /* the tables are the main file's */
    tl_emb_sharding strategy;   /* the saved shards' */
    const tl_ckpt_reader **rd;  /* (S) the host files, or the main file */
    tl_ckpt_reader **own;       /* (S) the host files this opened; NULL entries for none */
};

void tl_est_emb_src_free(tl_est_emb_src *src)
{
    if (src == NULL)
        return;
    for (int s = 0; src->own != NULL && s < src->S; s++)
        tl_ckpt_close(src->own[s]);
    tl_free(src->own);
    tl_free(src->rd);
    tl_free(src);
}

/* Host file hr (path hp) says key = want. */
static tl_status host_says(const tl_ckpt_reader *hr, const char *hp, const char *what, const char *key,
                           const char *want)
{
    const char *got = tl_ckpt_meta(hr, key);
    if (got != NULL && strcmp(got, want) == 0)
        return TL_OK;
    return tl_error(TL_EINVAL, "%s: host file %s: __metadata__ %s is %.64s, the checkpoint needs %.64s", what, hp,
                    key, got ? got : "missing", want);
}

/* Opens the S host files of the checkpoint at path into src. */
static tl_status open_host_files(tl_est_emb_src *src, const tl_ckpt_reader *r, const char *path, const char *what)
{
    const char *step = tl_ckpt_meta(r, "step");
    size_t cap = strlen(path) + 64;
    char *sp = tl_malloc(cap);
    if (sp == NULL)
        return tl_error_oom();
    char num[24], count[24];
    snprintf(count, sizeof count, "%d", src->S);
    tl_status st = TL_OK;
    for (int s = 0; s < src->S && st == TL_OK; s++) {
        if ((st = tl_ckpt_host_path(path, s, src->S, sp, cap)) != TL_OK)
            break;
        if ((st = tl_ckpt_open(sp, 0, &src->own[s])) != TL_OK) {
            if (st != TL_ENOMEM)
                st = tl_error(TL_EINVAL, "%s: host file %d of %d: %s", what, s, src->S, tl_last_error());
            break;
        }
        src->rd[s] = src->own[s];
        snprintf(num, sizeof num, "%d", s);
        st = host_says(src->own[s], sp, what, TL_CKPT_META_HOST_FILE, num);
        if (st == TL_OK)
            st = host_says(src->own[s], sp, what, TL_CKPT_META_HOST_FILES, count);
        if (st == TL_OK && step != NULL)
            st = host_says(src->own[s], sp, what, "step", step);
    }
    tl_free(sp);
    return st;
}

/* Every table's tensors in every source: names, F32, (rows of the saved
 * shard, dim). */
static tl_status check_tensors(const tl_emb_config *c, const tl_est_emb_src *src, const char *path,
                               const char *what)
{
    size_t cap = strlen(path) + 64;
    char *sp = tl_malloc(cap);
    if (sp == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    for (int s = 0; s < src->S && st == TL_OK; s++) {
        const char *sep = "", *file = ""; /* the file, when not the main one what names */
        if (!src->in_main && (st = tl_ckpt_host_path(path, s, src->S, sp, cap)) == TL_OK) {
            sep = ": ";
            file = sp;
        }
        for (int t = 0; t < c->num_tables && st == TL_OK; t++) {
            int n = table_tensors(c, t);
            int64_t V = c->tables[t].vocabulary_size, dim = c->tables[t].dim;
            int64_t rows = tl_emb_shard_rows(V, src->S, s);
            char where[160];
            if (src->in_main)
                snprintf(where, sizeof where, "table \"%s\"", c->tables[t].name);
            else
                snprintf(where, sizeof where, "table \"%s\": its shard in host file %d of %d holds %lld of its "
                         "%lld rows", c->tables[t].name, s, src->S, (long long)rows, (long long)V);
            for (int k = 0; k < n && st == TL_OK; k++) {
                char *name = tensor_name(c, t, k);
                tl_ckpt_tensor_info ti;
                if (name == NULL)
                    st = tl_error_oom();
                else if (tl_ckpt_find(src->rd[s], name, &ti) != TL_OK)
                    st = tl_error(TL_EINVAL, "%s%s%s: embedding tensor '%s' is missing (%s; with optimizer %s it "
                                             "has %d tensors of [%lld, %lld])", what, sep, file, name, where,
                                  tl_emb_algorithm_name(c->tables[t].optimizer->algorithm), n, (long long)rows,
                                  (long long)dim);
                else if (ti.dtype != TL_CKPT_F32 || ti.rank != 2 || ti.shape[0] != rows || ti.shape[1] != dim) {
                    char got[96];
                    if (ti.rank == 2)
                        snprintf(got, sizeof got, "[%lld, %lld]", (long long)ti.shape[0], (long long)ti.shape[1]);
                    else
                        snprintf(got, sizeof got, "of rank %d", ti.rank);
                    st = tl_error(TL_EINVAL, "%s%s%s: embedding tensor '%s' is %s %s, not float32 [%lld, %lld] (%s)",
                                  what, sep, file, name, tl_ckpt_dtype_name(ti.dtype), got, (long long)rows,
                                  (long long)dim, where);
                }
                tl_free(name);
            }
        }
    }
    tl_free(sp);
    return st;
}

tl_status tl_est_emb_restore_check(tl_estimator *est, const tl_ckpt_reader *r, const char *path, const char *what,
                                   tl_est_emb_src **out)
{
    *out = NULL;
    tl_emb_engine *eng = est->opt.embedding;
    if (eng == NULL)
        return TL_OK;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    tl_est_emb_src *src = tl_calloc(1, sizeof *src);
    if (src == NULL)
        return tl_error_oom();
    src->S = 1;
    src->in_main = true;
    tl_status st = TL_OK;
    const char *ms = tl_ckpt_meta(r, TL_CKPT_META_HOST_FILES);
    if (ms != NULL) {
        int64_t S;
        const char *strategy = tl_ckpt_meta(r, TL_CKPT_META_TABLE_SHARDING);
        if (tl_parse_int64(ms, &S) != 0 || S < 1 || S > TL_CKPT_MAX_HOST_FILES)
            st = tl_error(TL_EINVAL, "%s: __metadata__ " TL_CKPT_META_HOST_FILES " is \"%.64s\"; it must be a "
                                     "count of host files in [1, %d]", what, ms, TL_CKPT_MAX_HOST_FILES);
        else if (strategy == NULL)
            st = tl_error(TL_EINVAL, "%s holds no embedding tables (its __metadata__ has no "
                                     TL_CKPT_META_TABLE_SHARDING ": a model without tables wrote it); this model "
                                     "has %d", what, c->num_tables);
        else if (!strategy_parse(strategy, &src->strategy))
            st = tl_error(TL_EINVAL, "%s: __metadata__ " TL_CKPT_META_TABLE_SHARDING " is %.64s; it must be "
                                     "DIV_DEFAULT or MOD", what, strategy ? strategy : "missing");
        else {
            src->S = (int)S;
            src->in_main = false;
        }
    }
    if (st == TL_OK) {
        src->rd = tl_calloc((size_t)src->S, sizeof *src->rd);
        src->own = tl_calloc((size_t)src->S, sizeof *src->own);
        if (src->rd == NULL || src->own == NULL)
            st = tl_error_oom();
    }
    if (st == TL_OK && src->in_main)
        src->rd[0] = r;
    else if (st == TL_OK)
        st = open_host_files(src, r, path, what);
    if (st == TL_OK)
        st = check_tensors(c, src, path, what);
    if (st != TL_OK) {
        tl_est_emb_src_free(src);
        return st;
    }
    *out = src;
    return TL_OK;
}

/* Table t's rows of host shard h of H (state: n tensors of (rows, dim))
 * from the saved shards of src, by id. */
static tl_status gather_rows(const tl_emb_config *c, int t, const tl_est_emb_src *src, int H, int h,
                             float *const *state, int n, int64_t rows)
{
    int64_t V = c->tables[t].vocabulary_size, dim = c->tables[t].dim;
    for (int s = 0; s < src->S; s++) {
        const float *from[TL_EMB_MAX_SLOTS + 1];
        for (int k = 0; k < n; k++) {
            char *tn = tensor_name(c, t, k);
            tl_ckpt_tensor_info ti;
            tl_status st = tn != NULL ? tl_ckpt_find(src->rd[s], tn, &ti) : TL_ENOMEM;
            tl_free(tn);
            if (st != TL_OK)
                return st;
            from[k] = ti.data;
        }
        int64_t saved = tl_emb_shard_rows(V, src->S, s);
        for (int64_t l = 0; l < saved; l++) {
            int64_t id = tl_emb_shard_id(src->strategy, V, src->S, s, l), local;
            int to;
            tl_emb_shard_of(c->sharding_strategy, V, H, id, &to, &local);
            if (to != h)
                continue;
            TL_ASSERT(local < rows);
            for (int k = 0; k < n; k++)
                memcpy(state[k] + local * dim, from[k] + l * dim, (size_t)dim * sizeof(float));
        }
    }
    return TL_OK;
}

tl_status tl_est_emb_restore(tl_estimator *est, const tl_est_emb_src *src)
{
    tl_emb_engine *eng = est->opt.embedding;
    if (eng == NULL || src == NULL)
        return TL_OK;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    int H, h;
    own_shard(est, &H, &h);
    /* The saved shards are this host's as they are: load from the files. */
    bool same = src->S == H && (H == 1 || src->strategy == c->sharding_strategy);
    tl_status st = TL_OK;
    for (int t = 0; t < c->num_tables && st == TL_OK; t++) {
        int n = table_tensors(c, t);
        int64_t V = c->tables[t].vocabulary_size, dim = c->tables[t].dim;
        int64_t rows = tl_emb_shard_rows(V, H, h);
        if (rows == 0)
            continue;
        const float *state[TL_EMB_MAX_SLOTS + 1];
        float *buf = NULL;
        if (same) {
            for (int k = 0; k < n && st == TL_OK; k++) {
                char *name = tensor_name(c, t, k);
                tl_ckpt_tensor_info ti;
                if (name == NULL)
                    st = tl_error_oom();
                else if ((st = tl_ckpt_find(src->rd[h], name, &ti)) == TL_OK)
                    state[k] = ti.data;
                tl_free(name);
            }
        } else {
            /* One table's shard at a time: re-sharded from every saved shard. */
            buf = tl_malloc((size_t)(n * rows * dim) * sizeof *buf);
            if (buf == NULL) {
                st = tl_error(TL_ENOMEM, "restoring table \"%s\": cannot hold its %lld rows of this host",
                              c->tables[t].name, (long long)rows);
                break;
            }
            float *into[TL_EMB_MAX_SLOTS + 1];
            for (int k = 0; k < n; k++) {
                into[k] = buf + k * rows * dim;
                state[k] = into[k];
            }
            if ((st = gather_rows(c, t, src, H, h, into, n, rows)) == TL_ENOMEM)
                st = tl_error_oom();
        }
        if (st == TL_OK)
            st = tl_emb_load(eng, t, NULL, H, h, state, n, rows);
        tl_free(buf);
    }
    return st;
}

/* ---- params_digest ------------------------------------------------------- */

/* One process: every table whole. */
static tl_status digest_whole(const tl_estimator *est, void *sha256_ctx)
{
    tl_emb_engine *eng = est->opt.embedding;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    for (int t = 0; t < c->num_tables; t++) {
        int n = table_tensors(c, t);
        int64_t V = c->tables[t].vocabulary_size, dim = c->tables[t].dim;
        float *buf = tl_malloc((size_t)(n * V * dim) * sizeof *buf);
        if (buf == NULL)
            return tl_error_oom();
        float *state[TL_EMB_MAX_SLOTS + 1];
        for (int k = 0; k < n; k++)
            state[k] = buf + k * V * dim;
        tl_status st = tl_emb_retrieve(eng, t, NULL, 1, 0, state, n, V);
        if (st == TL_OK) /* the parameters, as the dense variables' */
            tl_est_sha256_floats(sha256_ctx, buf, V * dim);
        tl_free(buf);
        if (st != TL_OK)
            return st;
    }
    return TL_OK;
}

/* Several hosts: each table's parameters in chunks of ids; every host
 * fills the rows of its shard into a zeroed chunk, and an int64 sum over
 * the hosts gives every host the chunk's exact bits (each 32-bit word is
 * nonzero on one host at most, so nothing carries). Collective. */
static tl_status digest_gathered(const tl_estimator *est, void *sha256_ctx)
{
    tl_emb_engine *eng = est->opt.embedding;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    int H = est->H, h = est->host;
    int64_t most = 0;
    for (int t = 0; t < c->num_tables; t++) {
        int64_t dim = c->tables[t].dim, per = dim < DIGEST_CHUNK_FLOATS ? DIGEST_CHUNK_FLOATS / dim * dim : dim;
        int64_t all = c->tables[t].vocabulary_size * dim;
        if ((all < per ? all : per) > most)
            most = all < per ? all : per;
    }
    int64_t *chunk = tl_malloc((size_t)((most + 1) / 2 + 1) * sizeof *chunk);
    if (chunk == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    for (int t = 0; t < c->num_tables && st == TL_OK; t++) {
        int n = table_tensors(c, t);
        int64_t V = c->tables[t].vocabulary_size, dim = c->tables[t].dim;
        int64_t rows = tl_emb_shard_rows(V, H, h);
        /* This host's shard, whole (retrieve gives the slots too). */
        float *own = tl_malloc((size_t)(n * rows * dim + 1) * sizeof *own);
        if (own == NULL) {
            st = tl_error_oom();
            break;
        }
        float *state[TL_EMB_MAX_SLOTS + 1];
        for (int k = 0; k < n; k++)
            state[k] = own + k * rows * dim;
        if (rows > 0)
            st = tl_emb_retrieve(eng, t, NULL, H, h, state, n, rows);
        /* Every host goes on only if every host has its rows. */
        int64_t failed = st != TL_OK;
        tl_status cst = tl_comm_all_reduce(est->hcomm, h, &failed, &failed, 1, TL_COMM_I64, TL_REDUCE_SUM);
        if (st == TL_OK && cst != TL_OK)
            st = cst;
        else if (st == TL_OK && failed > 0)
            st = tl_error(TL_ERUNTIME, "params_digest: %lld other host%s could not read table \"%s\"",
                          (long long)failed, failed > 1 ? "s" : "", c->tables[t].name);
        int64_t per_rows = dim < DIGEST_CHUNK_FLOATS ? DIGEST_CHUNK_FLOATS / dim : 1;
        for (int64_t a = 0; a < V && st == TL_OK; a += per_rows) {
            int64_t b = a + per_rows < V ? a + per_rows : V, floats = (b - a) * dim, words = (floats + 1) / 2;
            memset(chunk, 0, (size_t)words * sizeof *chunk);
            float *f = (float *)chunk;
            for (int64_t id = a; id < b; id++) {
                int s;
                int64_t local;
                tl_emb_shard_of(c->sharding_strategy, V, H, id, &s, &local);
                if (s == h)
                    memcpy(f + (id - a) * dim, own + local * dim, (size_t)dim * sizeof *f);
            }
            st = tl_comm_all_reduce(est->hcomm, h, chunk, chunk, words, TL_COMM_I64, TL_REDUCE_SUM);
            if (st == TL_OK)
                tl_est_sha256_floats(sha256_ctx, f, floats);
        }
        tl_free(own);
    }
    tl_free(chunk);
    return st;
}

tl_status tl_est_emb_digest(const tl_estimator *est, void *sha256_ctx)
{
    if (est->opt.embedding == NULL)
        return TL_OK;
    return est->H > 1 ? digest_gathered(est, sha256_ctx) : digest_whole(est, sha256_ctx);
}

/* emb_ckpt.c — the embedding tables in checkpoints and in params_digest:
 * each table's parameters and slots as named tensors beside the dense
 * variables (checkpoint.c), restored with the same checks. */
#include <string.h>

#include "estimator_int.h"

/* Table t's state as checkpoint tensors: [0] the parameters, [1..] the
 * slots, each (vocabulary_size, dim). */
static int table_tensors(const tl_emb_config *c, int t)
{
    return 1 + tl_emb_num_slots(c->tables[t].optimizer);
}

static char *tensor_name(const tl_emb_config *c, int t, int k)
{
    return tl_asprintf("embedding/%s/%s", c->tables[t].name,
                       k == 0 ? "parameters" : tl_emb_slot_name(c->tables[t].optimizer, k - 1));
}

void tl_est_emb_ckpt_free(tl_estimator *est)
{
    tl_free(est->emb_ckpt);
    est->emb_ckpt = NULL;
}

tl_status tl_est_emb_save(tl_estimator *est, tl_ckpt_writer *wr)
{
    tl_emb_engine *eng = est->opt.embedding;
    if (eng == NULL)
        return TL_OK;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    /* The writer borrows the bytes until it is written: one buffer holds a
     * copy of every table's state (retrieve's order is the ids' with one
     * shard), freed after the save. */
    int64_t floats = 0;
    for (int t = 0; t < c->num_tables; t++)
        floats += table_tensors(c, t) * c->tables[t].vocabulary_size * c->tables[t].dim;
    tl_est_emb_ckpt_free(est);
    est->emb_ckpt = tl_malloc((size_t)(floats ? floats : 1) * sizeof(float));
    if (est->emb_ckpt == NULL)
        return tl_error(TL_ENOMEM, "checkpoint: cannot hold a copy of the embedding tables (%lld bytes)",
                        (long long)floats * 4);
    float *cur = est->emb_ckpt;
    tl_status st = TL_OK;
    for (int t = 0; t < c->num_tables && st == TL_OK; t++) {
        int n = table_tensors(c, t);
        int64_t V = c->tables[t].vocabulary_size, dim = c->tables[t].dim;
        float *state[TL_EMB_MAX_SLOTS + 1];
        for (int k = 0; k < n; k++)
            state[k] = cur + k * V * dim;
        if ((st = tl_emb_retrieve(eng, t, NULL, 1, 0, state, n, V)) != TL_OK)
            break;
        int64_t shape[2] = {V, dim};
        for (int k = 0; k < n && st == TL_OK; k++) {
            char *name = tensor_name(c, t, k);
            st = name != NULL ? tl_ckpt_writer_add(wr, name, TL_CKPT_F32, shape, 2, state[k]) : tl_error_oom();
            tl_free(name);
        }
        cur += n * V * dim;
    }
    return st;
}

tl_status tl_est_emb_restore(tl_estimator *est, const tl_ckpt_reader *r, const char *what, bool load)
{
    tl_emb_engine *eng = est->opt.embedding;
    if (eng == NULL)
        return TL_OK;
    const tl_emb_config *c = tl_emb_engine_config(eng);
    tl_status st = TL_OK;
    for (int t = 0; t < c->num_tables && st == TL_OK; t++) {
        int n = table_tensors(c, t);
        int64_t V = c->tables[t].vocabulary_size, dim = c->tables[t].dim;
        const float *state[TL_EMB_MAX_SLOTS + 1];
        for (int k = 0; k < n && st == TL_OK; k++) {
            char *name = tensor_name(c, t, k);
            tl_ckpt_tensor_info ti;
            if (name == NULL)
                st = tl_error_oom();
            else if (tl_ckpt_find(r, name, &ti) != TL_OK)
                st = tl_error(TL_EINVAL, "%s: embedding tensor '%s' is missing (table \"%s\" with optimizer %s has "
                                         "%d tensors of [%lld, %lld])", what, name, c->tables[t].name,
                              tl_emb_algorithm_name(c->tables[t].optimizer->algorithm), n, (long long)V,
                              (long long)dim);
            else if (ti.dtype != TL_CKPT_F32 || ti.rank != 2 || ti.shape[0] != V || ti.shape[1] != dim)
                st = tl_error(TL_EINVAL, "%s: embedding tensor '%s' is not float32 [%lld, %lld] (the table's shape)",
                              what, name, (long long)V, (long long)dim);
            else
                state[k] = ti.data;
            tl_free(name);
        }
        if (st == TL_OK && load)
            st = tl_emb_load(eng, t, NULL, 1, 0, state, n, V);
    }
    return st;
}

tl_status tl_est_emb_digest(const tl_estimator *est, void *sha256_ctx)
{
    tl_emb_engine *eng = est->opt.embedding;
    if (eng == NULL)
        return TL_OK;
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

/* emb_int.h — what the files of embedding/ share: the engine's tables,
 * the per-core step buffers and the steps in flight. */
#ifndef TL_EMB_INT_H
#define TL_EMB_INT_H

#include <pthread.h>

#include "../base/base_int.h"
#include "tpuloop/embedding.h"

/* Steps a core may hold: enqueued, received, sent and (pipelined) not yet
 * applied. */
#define EMB_RING 4

typedef struct emb_table {
    char *name;
    int64_t vocab;
    int dim;
    int slots;               /* K */
    int64_t stride;          /* floats per row: dim * (1 + K), the row then its slots */
    tl_emb_optimizer opt;
    tl_emb_combiner combiner;
    tl_emb_initializer init;
    int64_t held;            /* rows this engine holds: its host shard's (all with one host) */
    int nloc;                /* its shards: num_shards / num_hosts */
    float **shard;           /* (nloc) one block each: rows x stride */
    int64_t *shard_rows;     /* (nloc) */
} emb_table;

typedef struct emb_feature {
    char *name;
    int table;
    int seq;                 /* max_sequence_length S, 0 for none */
    int64_t per;             /* bags per sample: S, Π output_shape, or 1 */
    tl_emb_combiner combiner;
} emb_feature;

/* Bags of feature fe in a step of batch B: B, B * S or B * Π output_shape. */
static inline int64_t emb_bags(const emb_feature *fe, int64_t B)
{
    return B * fe->per;
}

/* A growable array of n elements of size bytes, kept between steps. */
typedef struct emb_buf {
    void *p;
    size_t cap; /* bytes */
} emb_buf;

typedef enum { CS_FREE = 0, CS_ENQUEUED, CS_RECEIVED, CS_ACTIVATED, CS_SENT } core_state;

/* One core's step. Occurrences are in input order: feature ascending, then
 * the input's order; unique rows in order of first occurrence. Each
 * occurrence's bag and unique row live in the dedup data's integers
 * (emb_occ), which the forward and the gradients read back. */
typedef struct emb_core_step {
    core_state state;
    int64_t step;
    tl_emb_mode mode;
    int64_t batch;     /* B of this step */
    int64_t n_occ, n_unique;
    emb_buf feat_off;  /* int64 (F + 1): each feature's first occurrence */
    emb_buf occ_gain;  /* float (n_occ) */
    emb_buf u_table;   /* int32 (n_unique) */
    emb_buf u_id;      /* int64 (n_unique) */
    emb_buf u_ptr;     /* float * (n_unique): the row, found once at enqueue */
    emb_buf u_goff;    /* int64 (n_unique + 1): offset of the unique row's gradient */
    emb_buf grad;      /* float (u_goff[n_unique]) */
    emb_buf ints;      /* int32 (T + 2 n_occ): the dedup data's integers */
    emb_buf in_order;  /* bool (F): the feature's bags never decrease over its occurrences */
    /* Several hosts: the host holding each unique row, and the rows other
     * hosts hold, imported for the activations (u_ptr points into it). */
    emb_buf u_host;    /* int32 (n_unique) */
    emb_buf remote;    /* float (Σ dim of the rows held elsewhere) */
    int64_t n_missing; /* rows held elsewhere and not imported yet */
    /* The dedup hash of the step, one open-addressing region per table: id
     * -> unique index (-1 empty), the id itself read back from u_id. Four
     * bytes a slot, and a table's probes stay in its own region. It lives as
     * long as the slot, so that the owners of rows find each core's sums by
     * it until the step is applied. */
    emb_buf hash;      /* int32 (Σ regions) */
    emb_buf h_base;    /* size_t (T): the table's region's first slot */
    emb_buf h_shift;   /* int (T): 64 - log2 of its slots */
} emb_core_step;

/* The dedup hash's first slot for id in a region of 2^(64 - shift) slots:
 * Fibonacci hashing, the top bits of id times 2^64/φ, so ids that differ in
 * any bit spread over the region. */
static inline size_t emb_dedup_slot(int64_t id, int shift)
{
    return (size_t)(((uint64_t)id * 0x9e3779b97f4a7c15ull) >> shift);
}

/* The unique index of (table, id) in step s, or -1 when s has no such row. */
static inline int32_t emb_dedup_find(const emb_core_step *s, int32_t table, int64_t id)
{
    int shift = ((const int *)s->h_shift.p)[table];
    const int32_t *h = (const int32_t *)s->hash.p + ((const size_t *)s->h_base.p)[table];
    const int64_t *uid = s->u_id.p;
    size_t mask = ((size_t)1 << (64 - shift)) - 1;
    for (size_t i = emb_dedup_slot(id, shift);; i = (i + 1) & mask) {
        int32_t u = h[i];
        if (u < 0 || uid[u] == id)
            return u;
    }
}

/* Occurrence k's (bag, unique row) pair in the dedup data's integers, which
 * open with the T tables' unique counts. */
static inline int32_t *emb_occ(const emb_core_step *s, int T)
{
    return (int32_t *)s->ints.p + T;
}

typedef struct emb_core {
    emb_core_step ring[EMB_RING];
    int64_t next_enqueue, next_recv; /* step numbers */
    int64_t last_received;           /* -1 */
    emb_buf bagsum;    /* double (bags): Σw or Σw² per bag while enqueuing */
} emb_core;

/* One apply's accumulation: (table, id) -> summed gradient, and the
 * tables' prepared steps. The serial apply uses the engine's first; with
 * owner apply core c uses the c-th. */
typedef struct emb_apply_ws {
    emb_buf h;                /* int32 (hcap): the accumulated row's index, -1 when empty */
    emb_buf ag;               /* float * per accumulated row: its gradient sum, in its first core's buffer */
    emb_buf at, aid, arow, steps; /* the accumulated rows' table, id, row; the tables' steps */
    emb_buf zero;             /* float (max dim): a non-lazy row's gradient where nothing arrived */
    /* The fused direct apply: occurrences grouped by unique row, and one
     * row's gradient sum. */
    emb_buf ustart, uocc;     /* int32 (n_unique + 1), int32 (n_occ) */
    emb_buf gsum;             /* float (max dim) */
    emb_buf slots;            /* emb_core_step * (C): the step's slot on each core */
    size_t hcap;
} emb_apply_ws;

/* The steps in flight across cores. */
typedef struct emb_step_rec {
    int64_t step;          /* -1 when free */
    tl_emb_mode mode;
    int enqueued, activated, sent;
    int parts;             /* owner apply: the cores that applied their rows */
    float *lrs;            /* the learning rates of the step's first send */
    int n_lr;
} emb_step_rec;

struct tl_emb_engine {
    tl_emb_config cfg;     /* tables / features point into the arrays below */
    emb_table *tables;
    emb_feature *features;
    tl_emb_table_config *table_cfgs;
    tl_emb_feature_config *feature_cfgs;
    tl_emb_optimizer *opts;  /* (num_tables) the tables' own */
    emb_core *cores;
    emb_step_rec recs[EMB_RING];
    int64_t applied_through;  /* the last step whose update was applied, -1 */
    int64_t pending;          /* a pipelined step sent and not applied, -1 */
    pthread_mutex_t mu;
    bool mu_ok;
    tl_emb_stats stats;
    emb_apply_ws *ws;         /* (C) the applies' workspaces */
    bool owner_apply;         /* tl_emb_set_owner_apply */
    int64_t *part_done;       /* (C) owner apply: the last step each core applied, -1 */
    bool direct;              /* one core, only lazy tables: updates read the core's sums in place */
    bool merge_by_dedup;      /* several cores, every table lazy and accumulating: the owners find a row's
                               * sums on the other cores through their dedup hashes */
};

static inline bool emb_direct(const tl_emb_engine *eng)
{
    return eng->direct;
}

/* buf.c-like helpers (engine.c) */
tl_status emb_reserve(emb_buf *b, size_t bytes);
void emb_buf_free(emb_buf *b);

/* The host holding row id of table t (0 with one host), and the row's
 * index in that host's shard. */
static inline int emb_host_of(const tl_emb_engine *eng, const emb_table *t, int64_t id, int64_t *local)
{
    if (eng->cfg.num_hosts == 1) {
        *local = id;
        return 0;
    }
    int h;
    tl_emb_shard_of(eng->cfg.sharding_strategy, t->vocab, eng->cfg.num_hosts, id, &h, local);
    return h;
}

/* The row id of table t (a pointer to its parameters; the slots follow),
 * or NULL when another host holds it. Rows go to hosts, then to the host's
 * shards, each level by the sharding strategy (tpu_embedding.md §8). */
static inline float *emb_row(const tl_emb_engine *eng, const emb_table *t, int64_t id)
{
    int64_t l;
    if (emb_host_of(eng, t, id, &l) != eng->cfg.host)
        return NULL;
    if (t->nloc == 1)
        return t->shard[0] + l * t->stride;
    int s;
    int64_t local;
    tl_emb_shard_of(eng->cfg.sharding_strategy, t->held, t->nloc, l, &s, &local);
    return t->shard[s] + local * t->stride;
}

/* Core c's slot holding step, or NULL. */
static inline emb_core_step *emb_find_slot(emb_core *c, int64_t step)
{
    for (int k = 0; k < EMB_RING; k++)
        if (c->ring[k].state != CS_FREE && c->ring[k].step == step)
            return &c->ring[k];
    return NULL;
}

/* Prefetches the n floats at p, a cache line at a time, into every level
 * (emb_prefetch) or into L2 (emb_prefetch_l2: for many lines ahead, as the
 * update's rows with their slots, which would crowd L1's misses). */
static inline void emb_prefetch(const float *p, int64_t n)
{
    for (int64_t k = 0; k < n; k += 16)
        __builtin_prefetch(p + k, 0, 3);
}

static inline void emb_prefetch_l2(const float *p, int64_t n)
{
    for (int64_t k = 0; k < n; k += 16)
        __builtin_prefetch(p + k, 0, 2);
}

/* update.c: the workspace of step's update (under mu), then the update from
 * every core's sent gradients, which cannot fail. */
tl_status emb_apply_reserve(tl_emb_engine *eng, int64_t step, int part, int parts, emb_apply_ws *ws);
/* grads: NULL, or (direct engine, applied inside the send) the send's
 * dL/d(out) per feature, whose sums the apply makes row by row instead of
 * reading them from the core's gradient buffer, which was not filled. */
void emb_apply_step(tl_emb_engine *eng, int64_t step, const float *const *grads);
/* The rows of part `part` of `parts` (id mod parts) with ws, outside mu
 * (parts touch disjoint rows), then, under mu, the step's end once every
 * part is done. */
void emb_apply_part(tl_emb_engine *eng, int64_t step, int part, int parts, emb_apply_ws *ws,
                    const float *const *grads);
void emb_apply_finish(tl_emb_engine *eng, int64_t step);
void emb_apply_ws_free(emb_apply_ws *ws);
int64_t emb_apply_ws_bytes(const emb_apply_ws *ws);

/* step.c */
void emb_core_free(emb_core *c);

#endif /* TL_EMB_INT_H */

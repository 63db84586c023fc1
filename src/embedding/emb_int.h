/* emb_int.h — what the files of embedding/ share: the engine's tables,
 * the per-core step buffers and the steps in flight. */
#ifndef TL_EMB_INT_H
#define TL_EMB_INT_H

#include <pthread.h>

#include "../base/base_int.h"
#include "tpuloop/embedding.h"

/* An entry of the dedup and accumulation hashes (table -1: empty). */
typedef struct emb_hent {
    int64_t id;
    int32_t table;
    int32_t val;
} emb_hent;

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
    float **shard;           /* (num_shards) one block each: rows x stride */
    int64_t *shard_rows;     /* (num_shards) */
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
 * the input's order; unique rows in order of first occurrence. */
typedef struct emb_core_step {
    core_state state;
    int64_t step;
    tl_emb_mode mode;
    int64_t batch;     /* B of this step */
    int64_t n_occ, n_unique;
    emb_buf feat_off;  /* int64 (F + 1): each feature's first occurrence */
    emb_buf occ_bag;   /* int32 (n_occ): the bag within the feature's output */
    emb_buf occ_uniq;  /* int32 (n_occ) */
    emb_buf occ_gain;  /* float (n_occ) */
    emb_buf u_table;   /* int32 (n_unique) */
    emb_buf u_id;      /* int64 (n_unique) */
    emb_buf u_ptr;     /* float * (n_unique): the row, found once at enqueue */
    emb_buf u_goff;    /* int64 (n_unique + 1): offset of the unique row's gradient */
    emb_buf grad;      /* float (u_goff[n_unique]) */
    emb_buf ints;      /* int32: the dedup data's integers */
} emb_core_step;

typedef struct emb_core {
    emb_core_step ring[EMB_RING];
    int64_t next_enqueue, next_recv; /* step numbers */
    int64_t last_received;           /* -1 */
    /* the dedup hash: (table, id) -> unique index, cleared per step */
    emb_buf hash; /* emb_hent (hcap) */
    size_t hcap;
    emb_buf bagsum;    /* double (bags): Σw or Σw² per bag while enqueuing */
} emb_core;

/* The steps in flight across cores. */
typedef struct emb_step_rec {
    int64_t step;          /* -1 when free */
    tl_emb_mode mode;
    int enqueued, activated, sent;
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
    /* the apply's accumulation: (table, id) -> summed gradient */
    emb_buf acc_h;            /* emb_hent (acc_hcap) */
    emb_buf acc_off, acc_g;
    emb_buf acc_at, acc_aid, acc_arow, acc_steps; /* the accumulated rows' table, id, row; the tables' steps */
    size_t acc_hcap;
    int64_t acc_n;
    emb_buf zero_g;           /* max dim zeros (non-lazy rows) */
    bool direct;              /* one core, only lazy tables: updates read the core's sums in place */
};

static inline bool emb_direct(const tl_emb_engine *eng)
{
    return eng->direct;
}

/* buf.c-like helpers (engine.c) */
tl_status emb_reserve(emb_buf *b, size_t bytes);
void emb_buf_free(emb_buf *b);

/* The row id of table t (a pointer to its parameters; the slots follow). */
float *emb_row(const tl_emb_engine *eng, const emb_table *t, int64_t id);

/* step.c: the workspace of step's update (under mu), then the update from
 * every core's sent gradients, which cannot fail. */
tl_status emb_apply_reserve(tl_emb_engine *eng, int64_t step);
void emb_apply_step(tl_emb_engine *eng, int64_t step);
void emb_core_free(emb_core *c);

#endif /* TL_EMB_INT_H */

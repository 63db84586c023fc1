/*
 * feed.h — the infeed proper: input_fn invocations in, every core's share of
 * every device step out, by TensorFlow's deployment rules (spec
 * tpu_estimator.md §4.1, §4.3). Internal to the runtime; the estimator's
 * infeed.c wraps it.
 *
 * A feed is made from a topology and the input plan of one mode. Each
 * invocation of the plan (tl_input_call) is a source: a stream of host
 * batches, one per get_next, of plan->input_fn_batch_size rows. One feed
 * thread walks the device steps in order and, in each, the invocations in
 * invocation order (hosts ascending, then cores), and routes what it reads:
 *
 *   PER_SHARD_V1   one get_next of b rows       -> the invocation's one replica
 *   PER_HOST_V1    one get_next of Rph * b rows -> contiguous chunks of b, chunk j
 *                                                  to the host's j-th replica
 *   PER_HOST_V2    Rph get_next of b rows       -> the k-th to the k-th replica
 *                  (one invocation per replica when replicas span hosts)
 *   BROADCAST      one get_next of G rows       -> a copy to every replica
 *   SLICED         one get_next of G rows       -> slice r (b rows) to replica r
 *
 * where b is the model_fn batch. With
 * experimental_allow_per_host_v2_parallel_get_next TensorFlow lets the Rph
 * get_next calls race, so which replica gets which batch is unordered;
 * tpuloop keeps the in-order assignment with or without it (the same bits
 * either way) and gets its parallelism from the dataset's own threads.
 *
 * The CPU path's plan (use_tpu false, or evaluation with eval_on_tpu false:
 * TensorFlow's plain Estimator) has one invocation with the global batch:
 * the feed serves replica 0 alone, with that batch.
 *
 * Inside a replica, input_partition_dims (§4.3) splits each tensor over the
 * replica's num_cores_per_replica cores: None copies it to every core, dims
 * whose product is 1 give it whole to logical core 0 only, otherwise core c
 * gets tile c of the row-major tile grid (tl_partition_tile's uneven rule).
 * Every (replica, core) has its own bounded queue of batch buffers, `depth`
 * deep: the thread runs that far ahead of the slowest consumer.
 *
 * Embedding ids travel beside features and labels, typed: each example's W
 * int64 ids (spec.ids), the replica's (b, W) block written by the sources
 * straight into its buffer as the features are. They are never tiled: the
 * embedding engine takes one enqueue per replica (its tensor core), so the
 * whole block goes to the replica's logical core 0 and no other core holds
 * it (has_ids false there).
 *
 * Prediction (§8) reads until every source is exhausted: a short host batch
 * is padded with zero rows (padding_mask 1), an exhausted source gives all
 * padding while others still have data, and after the step where all are
 * exhausted comes the stop batch, a copy of the first step's batch with
 * stopping set.
 *
 * Training (may_end) ends where the first source ends: at that step every
 * (replica, core) gets a batch marked end, with no rows. What the other
 * sources gave for that step is dropped, as TensorFlow drops the batches of
 * the other infeed queues at OutOfRange; the datasets' positions are then
 * those after the step, so a resumed run ends at the same step.
 *
 * Training can hold the thread at a step (tl_feed_allow): a dataset's
 * position is then exactly that of the last step produced, which is what a
 * checkpoint at a loop boundary saves.
 */
#ifndef TL_RUNTIME_FEED_H
#define TL_RUNTIME_FEED_H

#include "../base/base_int.h"
#include "../base/thread.h"
#include "tpuloop/topology.h"

/* One (replica, core)'s share of one device step. */
typedef struct tl_feed_batch {
    int64_t step;
    int64_t rows;              /* the replica's batch b */
    int64_t real_rows;         /* rows with padding_mask 0 (they come first) */
    bool stopping;             /* prediction's stop batch */
    bool end;                  /* may_end: the input ended before this step; no rows, the loop ends here */
    /* The tile of the replica's features (b, fshape...) and labels (b) this
     * core holds, as offset and size per dimension; has_* false when the
     * core gets none of the tensor (dims with product 1, cores > 0). */
    bool has_features, has_labels;
    int64_t f_offset[TL_MAX_RANK + 1], f_size[TL_MAX_RANK + 1];
    int64_t l_offset, l_size;
    float *features;           /* the tile, row-major */
    int32_t *labels;           /* the tile; NULL when the mode has none */
    int32_t *padding_mask;     /* (rows), of the whole replica batch */
    bool has_ids;              /* spec.ids > 0 and this is the replica's core 0 */
    int64_t *ids;              /* (rows, W) the replica's whole block (padding rows 0); NULL when !has_ids */
} tl_feed_batch;

/* Where the rows of one get_next go: row i to features[i / chunk] at row
 * i % chunk (D values a row), labels[i / chunk][i % chunk] and ids[i /
 * chunk] at row i % chunk (W ids a row). The feed hands a source the
 * replicas' own buffers, chunk = the model_fn batch, so rows are copied
 * once; with tiles it hands one staging area instead. */
typedef struct tl_feed_dest {
    float *const *features;  /* (ceil(cap / chunk)) */
    int32_t *const *labels;  /* (ceil(cap / chunk)); NULL when the mode has no labels */
    int64_t *const *ids;     /* (ceil(cap / chunk)); NULL when the examples have no ids (W 0) */
    int64_t chunk;           /* rows per destination */
    tl_team *team;           /* threads the source may copy its rows on (NULL: the caller's alone) */
} tl_feed_dest;

/* Row i's features (D values), label and ids (W) in d. */
static inline float *tl_feed_dest_row(const tl_feed_dest *d, int64_t i, int64_t D)
{
    return d->features[i / d->chunk] + (i % d->chunk) * D;
}

static inline int32_t *tl_feed_dest_label(const tl_feed_dest *d, int64_t i)
{
    return d->labels[i / d->chunk] + i % d->chunk;
}

static inline int64_t *tl_feed_dest_ids(const tl_feed_dest *d, int64_t i, int64_t W)
{
    return d->ids[i / d->chunk] + (i % d->chunk) * W;
}

/*
 * A source: the next get_next of one invocation. Writes up to cap rows into
 * dst and sets *rows. step is the device step and row0 the global row of
 * the first one (the rows of a global batch this get_next serves: first
 * replica fed times b, or 0 for BROADCAST); a dataset ignores both, the
 * estimator's in-memory data cuts its global batches with them. *rows == 0
 * is the end of the input; fewer than cap rows is an error outside
 * prediction (the feed names it: TensorFlow needs static shapes, i.e.
 * drop_remainder).
 */
typedef struct tl_feed_source {
    tl_status (*next)(void *ud, int64_t step, int64_t row0, int64_t cap, const tl_feed_dest *dst, int64_t *rows);
    void *ud;
    /* next is a function of its arguments over data that does not change,
     * and cheap: it may run on the consumer's thread (see tl_feed_start). */
    bool pure;
} tl_feed_source;

typedef struct tl_feed_spec {
    const tl_topology *topo;        /* borrowed, must outlive the feed */
    const tl_input_plan *plan;      /* copied */
    int frank;                      /* one example's features: rank and shape */
    int64_t fshape[TL_MAX_RANK];
    bool labels;                    /* the mode has labels */
    int64_t ids;                    /* W >= 0: int64 embedding ids per example (0: none) */
    const tl_tensor_partition *fpart, *lpart; /* NULL: replicate to every core */
    int depth;                      /* buffers per (replica, core), >= 1 */
    bool predict;                   /* pad short batches; the stop batch ends */
    /* Training: a source at its end ends the input at that step, as
     * Estimator.train ends at OutOfRange — every (replica, core) gets a
     * batch marked end and the thread stops — instead of an error. */
    bool may_end;
    /* A short batch is padded with zero rows (padding_mask 1) instead of
     * being an error: the plain Estimator's evaluation, whose last batch
     * may come short. */
    bool pad_short;
    /* Several processes (the estimator's hosts): with only_host this one
     * runs the invocations of host `host` and fills the buffers of the
     * replicas they feed, also other hosts' (BROADCAST, SLICED: the
     * estimator relays those); otherwise every invocation, every replica. */
    bool only_host;
    int host;
} tl_feed_spec;

typedef struct tl_feed tl_feed;

/* Makes the buffers and queues. Errors: TL_EINVAL for a spec out of range
 * (a partition whose rank is not the tensor's, ids < 0); TL_ENOMEM. */
tl_status tl_feed_create(const tl_feed_spec *spec, tl_feed **out);
void tl_feed_destroy(tl_feed *f);

/* Starts the thread on steps [first, first + count) (count < 0: until the
 * end of the input, prediction), reading sources[i] for invocation i of the
 * plan (borrowed until tl_feed_stop). limit: the thread produces steps below
 * it only, until tl_feed_allow raises it; INT64_MAX for no hold.
 *
 * A feed with one consumer queue in this process, pure sources, no hold and
 * no start sleep is pulled instead: no thread starts, and tl_feed_pop makes
 * each step on the consumer's thread, in order, as the thread would. That
 * saves the thread's hand-off of every batch (a device loop over in-memory
 * data is then a loop over a resident array, as a lax.scan is), and a third
 * busy thread on cores the device's threads use. Its consumer gives each
 * batch back before it pops the next (one buffer serves every step).
 * tl_feed_pulled says which.
 * Errors: TL_ENOMEM, a thread that cannot start. */
tl_status tl_feed_start(tl_feed *f, const tl_feed_source *sources, int64_t first, int64_t count, int64_t limit);

/* Whether the running feed is pulled (see tl_feed_start). */
bool tl_feed_pulled(const tl_feed *f);

/* Makes the next start wait ns nanoseconds before its first step
 * (initial_infeed_sleep_secs); a stop ends the wait. */
void tl_feed_set_sleep(tl_feed *f, int64_t ns);

/* Lets the thread produce steps below limit (host thread). */
void tl_feed_allow(tl_feed *f, int64_t limit);

/* Blocks until a held feed (started with a limit) has produced every step
 * below `step` (or ended): after it, the sources are at that step's end. */
void tl_feed_wait_produced(tl_feed *f, int64_t step);

/* The next batch of (replica, core), which must be for step. team: the
 * caller's threads (NULL: its own alone), over which a pulled feed's sources
 * may split their copies. *waited_ns gets the time spent blocked (NULL: not
 * measured; a pulled feed never blocks).
 * Errors: TL_ERUNTIME when the feed closed first (its error, if it had one,
 * is tl_feed_error's); a pulled feed returns its source's error itself. */
tl_status tl_feed_pop(tl_feed *f, int replica, int core, int64_t step, tl_team *team, tl_feed_batch **out,
                      int64_t *waited_ns);

/* Gives a popped buffer back. */
void tl_feed_release(tl_feed *f, int replica, int core, tl_feed_batch *b);

/* Closes every queue: consumers and the thread stop waiting. */
void tl_feed_abort(tl_feed *f);

/* Stops and joins the thread, then returns its error, if it had one (with
 * its message), else TL_OK. The feed can be started again. */
tl_status tl_feed_stop(tl_feed *f);

/* The thread's error so far (TL_OK if none) and its message. */
tl_status tl_feed_error(tl_feed *f, const char **msg);

#endif /* TL_RUNTIME_FEED_H */

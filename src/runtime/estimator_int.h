/*
 * estimator_int.h — the estimator's insides, shared by trainer.c (programs,
 * workers, the host loop), infeed.c (the input thread and its batch buffers)
 * and eval_metrics.c (AUC). Nothing here is public API.
 *
 * Threads of one train() or evaluate() call:
 *   host     runs the host loop: "run n steps" to the workers through the
 *            go/done barriers, and everything at loop boundaries (NaN check,
 *            logging, host_call callbacks);
 *   infeed   one per host (spec tpu_estimator.md §3.1): cuts every global
 *            batch into the replicas' slices, in step order, into batch
 *            buffers it takes from each replica's free list, and pushes them
 *            to the replica's bounded queue — up to infeed depth batches
 *            ahead of the workers;
 *   workers  one per replica: pop a batch, give the buffer back to the free
 *            list, run the step, and write the host_call record into the
 *            outfeed ring when the step fires (§6).
 * All buffers are made before the first device loop; a device step allocates
 * nothing.
 */
#ifndef TL_RUNTIME_ESTIMATOR_INT_H
#define TL_RUNTIME_ESTIMATOR_INT_H

#include "../base/base_int.h"
#include "../base/thread.h"
#include "../graph/program.h"
#include "tpuloop/comm.h"
#include "tpuloop/estimator.h"
#include "tpuloop/topology.h"

typedef enum { CMD_TRAIN, CMD_EVAL, CMD_PREDICT, CMD_STOP } tl_cmd_kind;

typedef struct tl_worker tl_worker;

/* One evaluated example of a binary model: P(class 1) and its label. */
typedef struct tl_scored {
    double score;
    int32_t label;
} tl_scored;

/* One mode's compiled program and the per-replica batch it was traced for. */
typedef struct tl_mode_prog {
    tl_graph *g;
    tl_program *p;
    tl_t features, labels, logits, predictions;
    int64_t batch; /* per replica */
} tl_mode_prog;

/* One replica's slice of one global batch, filled by the infeed thread. */
typedef struct tl_batch_buf {
    int64_t step;     /* the global step (training) or eval step it is for */
    float *features;  /* (batch, D) */
    int32_t *labels;  /* (batch) */
} tl_batch_buf;

/* The input pipeline of one train() or evaluate() call. */
typedef struct tl_infeed {
    int depth;                /* batches prefetched per replica */
    tl_batch_buf *bufs;       /* (R, depth), carved from slab */
    float *slab;              /* (R * depth * (max_batch * D + max_batch)) */
    tl_queue **full;          /* (R) filled buffers (tl_batch_buf *), in step order */
    tl_queue **free_list;     /* (R) buffers the replica is done with */
    tl_queue *stop;           /* never pushed; closing it ends the initial sleep */
    tl_thread thread;
    bool running;
    /* What the thread produces, set before it starts. */
    tl_cmd_kind cmd;
    int64_t first, count;     /* steps first .. first + count - 1 */
    int64_t sleep_ns;         /* before the first enqueue */
} tl_infeed;

struct tl_estimator {
    tl_estimator_options opt;
    tl_run_config rc;          /* a copy: strings are not used after create */
    tl_topology *topo;
    int R;                     /* replicas = workers */
    int64_t D;                 /* features per example */
    tl_vars *vars;
    float *state_slab;         /* params and slots, staggered (see prepare) */
    float *params;             /* (vars->total), shared by all replicas */
    float *slots[TL_OPTIM_MAX_SLOTS]; /* (vars->total) each */
    int nslots;
    tl_mode_prog train, eval, predict;
    bool have_eval, have_predict;
    float *pred_out;           /* (data->num_examples, pred_width): predict's results, in input order */
    int64_t pred_width;
    tl_comm *comm;
    tl_barrier go, done;       /* host + R workers */
    tl_worker *workers;        /* (R) */
    int started;               /* workers running */
    int64_t global_step;
    /* The command of the current device loop, written by the host before `go`. */
    tl_cmd_kind cmd;
    int64_t loop_start, loop_n;
    const tl_labeled_data *data;
    int64_t steps_per_epoch;
    tl_infeed infeed;
    /* host_call outfeed (§6): record k of a loop is loop-local step
     * k * every_n; replica r writes outfeed[k * R + r]. */
    int64_t host_call_every_n;
    float *outfeed;            /* (outfeed_cap, R) */
    int64_t outfeed_cap;       /* records per replica */
};

struct tl_worker {
    tl_estimator *est;
    int rank;
    tl_thread thread;
    tl_exec train_x, eval_x, predict_x;
    float *bufs;               /* one allocation carved into the exec slabs */
    uint8_t *mask;
    float *chunk_grad;         /* (chunk_len) reduced gradient of this rank's chunk */
    int64_t chunk_off, chunk_len;
    tl_status status;          /* the loop's outcome on this worker */
    char err[512];
    float last_loss;           /* loss at the last step of the loop */
    double eval_loss_sum;      /* sum of per-step losses */
    int64_t eval_correct;
    /* Binary evaluation: P(class 1) and the label of every example this
     * replica evaluated, in its order; NULL unless the model has 2 classes. */
    tl_scored *scored;         /* (scored_cap) */
    int64_t scored_cap, scored_len;
};

/* ---- infeed.c ------------------------------------------------------------ */

/* Makes the batch buffers for batches of up to max_batch rows (once, in
 * prepare). Errors: TL_ENOMEM. */
tl_status tl_infeed_init(tl_estimator *est, int depth, int64_t max_batch);

/* Starts the input thread for count steps from first of cmd (train: global
 * steps; eval: eval steps from 0). Errors: TL_ENOMEM, TL_ERUNTIME; then
 * nothing runs. */
tl_status tl_infeed_start(tl_estimator *est, tl_cmd_kind cmd, int64_t first, int64_t count);

/* Closes the queues (waking the thread and any waiting worker) and joins
 * the thread. Safe to call when nothing runs. */
void tl_infeed_stop(tl_estimator *est);

/* Frees the buffers. */
void tl_infeed_free(tl_estimator *est);

/* The worker side: the next batch of rank, which must be for step; the
 * buffer stays the caller's until tl_infeed_release. Errors: TL_ERUNTIME
 * "infeed closed" when the infeed was stopped (the host's loop reports the
 * root cause before such errors). */
tl_status tl_infeed_pop(tl_estimator *est, int rank, int64_t step, tl_batch_buf **out);
void tl_infeed_release(tl_estimator *est, int rank, tl_batch_buf *b);

/* ---- eval_metrics.c ------------------------------------------------------ */

/* ROC AUC of n examples with labels in {0, 1} (any label other than 1
 * counts as 0): the Mann-Whitney U from average ranks, so a tie between a
 * positive and a negative counts one half. Sorts items by score. False, and
 * *auc = NaN, when a class is absent or a score is NaN (no AUC exists). */
bool tl_roc_auc(tl_scored *items, int64_t n, double *auc);

#endif /* TL_RUNTIME_ESTIMATOR_INT_H */

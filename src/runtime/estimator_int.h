/*
 * estimator_int.h — the estimator's insides, shared by trainer.c (programs,
 * workers, the host loop), infeed.c (the input thread and its batch buffers),
 * host_call.c (the outfeed of host_call and eval_metrics tensors) and
 * eval_metrics.c (AUC, metric_fn's results). Nothing here is public API.
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
 *            list, run the step, and copy the step's host_call / eval_metrics
 *            tensors into the outfeed area when the step fires (§6, §7).
 *            Prediction loops until the stop batch instead of n steps (§8).
 * All buffers are made before the first device loop; a device step allocates
 * nothing.
 *
 * The outfeed area holds the records of one device loop: record k is the k-th
 * step that fired; inside it tensor j of the plan takes R * count_j elements
 * at offset_j, replica r writing elements [r * count_j, (r + 1) * count_j).
 * That is tensor j concatenated over replicas along axis 0 in replica order,
 * so the host hands it to the callbacks without copying.
 *
 * model_dir (checkpoint.c, summaries.c): checkpoints are read and written
 * only by the host thread, before the first device loop or between loops
 * (the workers wait at `go`, whose barrier orders the slab's reads and
 * writes), so nothing in a device loop touches a file or allocates.
 */
#ifndef TL_RUNTIME_ESTIMATOR_INT_H
#define TL_RUNTIME_ESTIMATOR_INT_H

#include <regex.h>
#include <stdatomic.h>

#include "../base/base_int.h"
#include "../base/thread.h"
#include "../data/data_int.h"
#include "../graph/partition.h"
#include "../graph/program.h"
#include "tpuloop/checkpoint.h"
#include "tpuloop/comm.h"
#include "tpuloop/embedding.h"
#include "tpuloop/estimator.h"
#include "tpuloop/topology.h"
#include "feed.h"

typedef enum { CMD_TRAIN, CMD_EVAL, CMD_PREDICT, CMD_STOP } tl_cmd_kind;

/* The checkpoint tensor (U8, [bytes]) of the input datasets' positions:
 * tl_infeed_save_positions' JSON text, in the main file of one host's
 * checkpoint and in each host file of several hosts' (checkpoint.h, "Host
 * files"). Checkpoints of earlier versions hold the same text as a
 * metadata key of this name in the main file. */
#define TL_EST_INPUT_TENSOR "input_datasets"

typedef struct tl_worker tl_worker;


/* One tensor a mode outfeeds: a host_call or eval_metrics tensor of the
 * spec, or the default host_call's loss. */
#define TL_MAX_OUTFEED (TL_MAX_HOST_CALL + TL_MAX_EVAL_TENSORS)
typedef struct tl_outfeed_tensor {
    tl_t t;
    char name[TL_MAX_OUTFEED_NAME];
    tl_dtype dtype;
    int rank;                     /* >= 1 (the default's scalar loss counts as (1)) */
    int64_t shape[TL_MAX_RANK];   /* per replica */
    int64_t count;                /* elements per replica */
    int64_t offset;               /* in a record (all replicas), elements */
} tl_outfeed_tensor;

/* What a mode outfeeds per fired step: tensors [0, n_host_call) for
 * host_call, then n_metric for metric_update. Only tensors a callback
 * consumes are in it; record is 0 when nothing is outfed. */
typedef struct tl_outfeed_plan {
    int n_host_call, n_metric;
    tl_outfeed_tensor t[TL_MAX_OUTFEED];
    int64_t record;               /* elements of one fired step, all replicas (int32 as 4 bytes) */
} tl_outfeed_plan;

/* One mode's compiled program and the per-replica batch it was traced for.
 * With C > 1 cores a replica (spatial partitioning, graph/partition.h), g
 * and p are core 0's partitioned graph and program, and every tensor here
 * is core 0's (features its tile; the rest whole); the traced graph is src,
 * and core q runs part[q]'s graph as cp[q] (cp[0] == p). */
typedef struct tl_mode_prog {
    tl_graph *g;
    tl_program *p;
    tl_t features, labels, logits, predictions;
    int64_t batch; /* per replica */
    tl_outfeed_plan out;
    tl_t *emb_leaf;  /* (embedding features) the model's activations of each, TL_T_INVALID when it reads none */
    tl_graph *src;          /* the traced graph when partitioned, else NULL */
    tl_t src_features, src_labels; /* src's */
    tl_partition *part;     /* (C) */
    tl_program **cp;        /* (C) */
} tl_mode_prog;

typedef struct tl_follower tl_follower;

/* The estimator's side of the infeed (infeed.c): one feed per mode, made in
 * prepare, and each mode's call: its sources and datasets. Two calls run at
 * once only when an evaluation runs between two training loops (train and
 * evaluate): the training feed, held at its loop boundary, waits as `outer`
 * while the workers pop the evaluation's. */
typedef struct tl_mem_source tl_mem_source;
typedef struct tl_ds_source tl_ds_source;
typedef struct tl_infeed_call {
    tl_feed_source *sources;  /* (ncalls) */
    tl_mem_source *mem;       /* (ncalls) in-memory data */
    tl_ds_source *ds;         /* (ncalls) datasets; NULL for in-memory data */
    int ncalls;
    bool hold;                /* held at loop boundaries (datasets: exact positions) */
} tl_infeed_call;

typedef struct tl_infeed {
    int depth;                /* batches prefetched per replica */
    tl_input_plan *plan[3];   /* per tl_mode */
    tl_feed *feed[3];         /* per tl_mode; NULL for a mode not traced */
    tl_infeed_call call[3];   /* per tl_mode */
    tl_feed *cur;             /* the running one the workers pop, NULL when none */
    tl_mode cur_mode;
    int64_t first;            /* the running call's first step */
    tl_feed *outer;           /* the training feed an evaluation interrupts, or NULL */
    tl_mode outer_mode;
    int64_t outer_first;
    int64_t sleep_ns;         /* initial_infeed_sleep_secs, before the first step */
} tl_infeed;

struct tl_estimator {
    tl_estimator_options opt;
    tl_run_config rc;          /* a copy: strings are not used after create */
    tl_topology *topo;
    int R;                     /* replicas = workers */
    int64_t D;                 /* features per example */
    int frank;                 /* one example's features: rank and shape (traced) */
    int64_t fshape[TL_MAX_RANK];
    tl_vars *vars;
    float *state_slab;         /* params and slots, staggered (see prepare) */
    float *params;             /* (vars->total), shared by all replicas */
    float *slots[TL_OPTIM_MAX_SLOTS]; /* (vars->total) each */
    int nslots;
    tl_mode_prog train, eval, predict;
    bool have_eval, have_predict;
    /* prepare's outcome once it failed: every later call fails the same
     * way (the programs may be half built). */
    tl_status broken;
    char broken_err[512];
    /* Prediction's outputs of one device loop (§8): step i of the loop,
     * replica r writes its rows at (i * R + r) * batch * pred_width and
     * their count at pred_rows[i * R + r]. Grown on the host between loops. */
    float *pred_area;          /* (pred_cap * R * batch * pred_width) */
    int64_t *pred_rows;        /* (pred_cap * R) */
    int64_t pred_cap;          /* steps */
    int64_t pred_width;
    tl_comm *comm;             /* the replicas' (R ranks; this process plays Rl of them) */
    tl_comm *hcomm;            /* the hosts' (one rank each), made from options.hosts; NULL on one host */
    tl_barrier go, done;       /* host + Rl workers (+ their followers) */
    /* ---- a replica of C > 1 cores (graph/partition.h: spatial partitioning
     * or tensor parallelism): the worker of a replica runs core 0 and one
     * follower thread each other core, in step with it at the replica's
     * barrier. */
    int C;                     /* num_cores_per_replica, 1 without partitioning */
    const tl_distribution *dist; /* options.distribution: ModelParallel's layouts split the variables */
    int model_axis;            /* the mesh axis of the replica's cores; -1 without dist */
    int8_t *var_split;         /* (vars->n when made) tensor parallelism: each variable's split dimension */
    int pd_n;                  /* input_partition_dims of the features, copied at create */
    int64_t pd_dims[TL_MAX_RANK + 1];
    int64_t grid[4];           /* the features' tiles over a replica's cores, as NHWC */
    tl_tensor_partition fpart, lpart; /* the infeed's split of features and labels */
    tl_follower *followers;    /* (R * (C - 1)): replica r's core q is [r * (C - 1) + q - 1] */
    tl_barrier *rbar;          /* (R) each replica's cores */
    const tl_program **progs[3]; /* per mode: (C) the cores' programs */
    const tl_exec **peers[3];  /* per mode: (R * C) replica r's core q's buffers at [r * C + q] */
    int followers_started;
    tl_worker *workers;        /* (R) only [first, first + Rl) run here; the others' stats are merged in */
    /* ---- hosts (hosts.c): with options.hosts, this process is host `host`
     * of H and runs replicas [first, first + Rl); else host 0 of 1 with
     * every replica. */
    int H, host, first, Rl;
    bool agree_end;            /* a training input that may end: the replicas agree on the step it does */
    bool same_error;           /* the call's error is one every host met alike (tl_est_hosts_same) */
    bool relay[3];             /* per tl_mode: batches relayed from another host (tl_est_relayed) */
    int started;               /* workers running */
    int64_t global_step;
    /* The command of the current device loop, written by the host before `go`. */
    tl_cmd_kind cmd;
    int64_t loop_start, loop_n;
    const tl_labeled_data *data;
    int64_t steps_per_epoch;
    tl_infeed infeed;
    /* The outfeed area (§6, §7): record k of a training loop is loop-local
     * step k * every_n; of evaluation, eval step k. Grown on the host
     * between loops only. */
    int64_t host_call_every_n;
    float *outfeed;            /* (outfeed_cap) records of the mode's plan->record elements */
    int64_t outfeed_cap;       /* elements */

    /* ---- model_dir: checkpoints, summaries, resume (checkpoint.c, summaries.c) */
    char *model_dir;           /* NULL without one */
    char *warm_start_from;     /* NULL: no warm start */
    char *warm_start_vars;     /* its pattern, for the log; NULL when none */
    bool have_warm_regex;      /* warm_regex compiled (warm_start_vars not null) */
    regex_t warm_regex;        /* warm_start_vars as re.match: ^(...) */
    char *config_json;         /* the resolved configuration, for model_dir/config.json */
    char *identity_json;       /* what the trained bits depend on (config_sha256's input) */
    char config_sha256[65];
    char *topology_json;       /* {"hosts", "replicas", "cores_per_replica"} */
    bool config_written;       /* model_dir/config.json, once per estimator */
    /* The parameters are no longer the fresh initialisation's to decide
     * about: restored, or the first train chose fresh (+ warm start). */
    bool initialized;
    tl_ckpt_reader *pending;   /* a restore asked for before the model was traced */
    char *pending_path;
    int64_t restored_steps_per_epoch; /* the last restored checkpoint's, or 0 */
    /* Its input positions, until the datasets take them: the main file's
     * (JSON text; NULL when none), or those of its host files (a checkpoint
     * of several hosts; 0 host files: one host's). */
    char *restored_input;
    char *restored_path;       /* its main file, while restored_pending */
    int64_t restored_step;     /* its step */
    int restored_host_files;
    bool restored_pending;     /* a checkpoint was restored and its input not yet applied */
    tl_ckpt_lock *lock;        /* model_dir's, taken by the first train, released by destroy */
    tl_ckpt_manager *ckpt;     /* made at the first save */
    int64_t ckpt_step;         /* "global_step"'s bytes while a save writes them */
    char *ckpt_input;          /* TL_EST_INPUT_TENSOR's bytes while a save writes them; NULL when none */
    bool bypass_logged;
    tl_summary_writer *summary;      /* training events; opened by the first train */
    tl_summary_writer *eval_summary; /* model_dir/eval; opened by the first evaluate */
    atomic_int stop_requested; /* tl_estimator_request_stop; lock-free (signal-safe) */
    /* ---- the embedding engine (emb_steps.c) */
    int64_t emb_width;         /* W = Σ W_f: int64 ids per example, beside the features (0: no engine) */
    tl_emb_engine *own_emb;       /* made from options.embedding_config; destroyed last */
    int64_t last_saved_step;      /* the running train's last checkpoint, -1 before the first */
    /* Evaluation on the CPU path (use_tpu or eval_on_tpu false): replica 0
     * alone, with the global batch, to eval_steps or the end of the input;
     * a short last batch is evaluated by eval_part, traced at its size. */
    bool eval_cpu;
    tl_mode_prog eval_part;
    tl_exec part_x;
    float *part_bufs;
    uint8_t *part_mask;
    float *part_features;         /* (eval batch, D) the short batch's rows */
    int32_t *part_labels;         /* (eval batch) */
    int64_t part_rows;            /* its real rows */
    tl_status plan_err[3];        /* a mode's input plan failed (not traced): its calls' error */
    char plan_msg[3][512];
    float *emb_ckpt;           /* a save's copy of the tables, borrowed by its writer */
};

/* A replica's embedding buffers (emb_steps.c), sized for the largest batch
 * of the traced modes. */
typedef struct tl_est_emb {
    int64_t *ids;          /* (batch * W) one step's ids as the engine takes them, feature after feature */
    int64_t *coo;          /* (batch * W, 2) sequence features' (sample, position) */
    tl_emb_input *in;      /* (F) */
    float **out;           /* (F) where each feature's activations go */
    const float **grad;    /* (F) */
    float *scratch;        /* activations the model does not read */
    float *zeros;          /* the gradient of a feature the loss does not reach */
    float *lrs;            /* (nlr) the step's dynamic values */
    int nlr;
    tl_emb_dedup dd;       /* the step's */
    /* Several hosts (emb_steps.c): every replica's ids of the step,
     * gathered from every host, and the step's dedup of each other host's
     * replica this worker plays in the engine. */
    int64_t *all_ids;      /* (R, batch * W) */
    tl_emb_dedup *rdd;     /* (R) */
    /* The rows the step reads from other hosts, and the gradients of rows
     * other hosts hold: sent to and received from the same worker of each
     * other host. */
    float *rows_out, *rows_in;
    int64_t rows_out_cap, rows_in_cap; /* floats */
    int64_t *a2a;          /* (4 R) the all-to-all's send counts, offsets, receive counts, offsets */
} tl_est_emb;

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
    double loss_sum;           /* the loop's losses, summed in step order (the log's loss_mean) */
    int64_t steps_run;         /* device steps of the loop (prediction: with the stop batch) */
    bool pred_stopped;         /* prediction: the loop ended with the stop batch */
    bool ended;                /* training: the input ended after steps_run steps of the loop */
    int64_t wait_ns;           /* time blocked on the infeed after the call's first batch */
    int64_t start_wait_ns;     /* ... for the call's first batch */
    double eval_loss_sum;      /* sum of per-step losses */
    int64_t eval_correct;
    /* Binary evaluation: P(class 1) and the label of every example this
     * replica evaluated, in its order; NULL unless the model has 2 classes. */
    tl_scored *scored;         /* (scored_cap) */
    int64_t scored_cap, scored_len;
    tl_est_emb emb;
    tl_spmd spmd[3];           /* per mode: core 0's view of its replica (C > 1) */
    struct tl_team *team;      /* the device's intra-op threads; NULL: one (every exec's team) */
    /* Several hosts: batches relayed from another host's invocation (hosts.c). */
    int64_t *relay_send;       /* (H - 1 batches) the other hosts' replicas' batches this worker sends */
    int64_t *relay_recv;       /* (1 batch) this replica's, received */
    int64_t *relay_counts;     /* (2 R) */
    float *relay_f;            /* the received batch's features, labels and mask */
    tl_feed_batch relay_batch; /* the received batch */
};

/* Core q >= 1 of a replica of several cores: it runs its program of each
 * mode on its tile of the replica's batches, in step with the replica's
 * worker (core 0) at the replica's barrier, which reads its partial
 * gradients. */
struct tl_follower {
    tl_estimator *est;
    int replica, core;
    tl_thread thread;
    tl_exec x[3];              /* per mode */
    tl_spmd spmd[3];
    struct tl_team *team;      /* as the worker's */
    float *bufs;
    uint8_t *mask;
    tl_status status;
    char err[512];
};

/* The replicas whose infeed waits an after_save listener's evaluation
 * leaves out of training's (more are counted with it). */
#define TL_MAX_LISTENER_REPLICAS 256

/* ---- trainer.c ----------------------------------------------------------- */

/* Builds the programs, parameters and workers on the first call (then every
 * call fails the same way if that failed), loads a pending restore, and
 * checks data's width. */
tl_status tl_est_prepare(tl_estimator *est, const tl_labeled_data *data);

/* The error of mode's input plan when prepare could not make it (the mode
 * was not traced), else TL_OK. */
tl_status tl_est_plan_error(const tl_estimator *est, tl_mode mode);

/* The CPU path's short batch (part_rows rows in part_features and
 * part_labels): replica 0's evaluation of it, at its own size, on the host
 * thread while the workers wait, as eval step `step`; its outfeed record at
 * the start of the area. Errors: tracing's, TL_ENOMEM, the program's. */
tl_status tl_est_eval_partial(tl_estimator *est, int64_t step);

/* tl_est_prepare for examples of features shaped fshape (frank dims). */
tl_status tl_est_prepare_shape(tl_estimator *est, int frank, const int64_t *fshape);

/* tl_est_prepare for in's datasets of mode (train_loop.c): the first call
 * probes one example's shape. */
tl_status tl_est_input_prepare(tl_estimator *est, tl_mode mode, const tl_input *in);

/* The replicas' mean time blocked on the infeed since the call began:
 * for its first batch (*start) and after it (the return value). */
double tl_est_wait_seconds(const tl_estimator *est, double *start);

/* Runs one device loop of n steps of cmd on every worker (host thread);
 * returns the root-cause worker error. */
tl_status tl_est_device_loop(tl_estimator *est, tl_cmd_kind cmd, int64_t start, int64_t n);

/* ---- hosts.c ------------------------------------------------------------- */
/* At create, after the topology: H, host, first and Rl from options.hosts
 * (NULL: one host with every replica), the hosts' communicator, and the
 * checks of num_hosts and what runs on several hosts. */
tl_status tl_est_hosts_init(tl_estimator *est, tl_comm *hosts);
/* A plan the hosts can feed (TL_EINVAL naming why not). */
tl_status tl_est_hosts_check_plan(const tl_estimator *est, const tl_input_plan *p);
/* Whether mode's invocations feed other hosts' replicas (BROADCAST,
 * SLICED over several hosts): the workers then take their batches with
 * tl_est_relay_pop, which every replica calls each step. */
bool tl_est_relayed(const tl_estimator *est, tl_mode mode);
/* The next batch of replica w->rank in a relayed mode: from the local feed
 * when this host's invocation feeds it (which also sends the other hosts'
 * replicas theirs), else received. A received batch is the worker's own
 * (w->relay_batch: not released to the feed). */
tl_status tl_est_relay_pop(tl_worker *w, tl_mode mode, int64_t step, tl_feed_batch **out, int64_t *waited_ns);
tl_status tl_est_relay_init(tl_estimator *est, tl_worker *w);
void tl_est_relay_free(tl_worker *w);
/* At the end of create: every host runs the same configuration (digest). */
tl_status tl_est_hosts_handshake(tl_estimator *est);
/* Whether this process runs replica q (its host's: [first, first + Rl)). */
static inline bool tl_est_local_replica(const tl_estimator *est, int q)
{
    return q >= est->first && q < est->first + est->Rl;
}

/* Whether this process runs invocation `call` of a plan (its host's). */
bool tl_est_local_call(const tl_estimator *est, const tl_input_call *call);
/* Host-thread exchanges among the hosts (no-ops on one host). merge sums
 * n int64 words over the hosts: a buffer that each host filled only where
 * it owns (zeros elsewhere) comes back whole, bit for bit. any: whether any
 * host passed true. bcast: host 0's n values. Errors: the hosts
 * communicator's (naming the host that failed). */
tl_status tl_est_hosts_merge(tl_estimator *est, void *words, int64_t n);
tl_status tl_est_hosts_any(tl_estimator *est, bool mine, bool *any);
tl_status tl_est_hosts_bcast(tl_estimator *est, int64_t *v, int n);
/* After a device loop: the other hosts' replicas' counters (steps, losses,
 * evaluation counts, infeed waits) into est->workers. */
tl_status tl_est_hosts_merge_stats(tl_estimator *est);
/* An error on this host ends the others: they fail with it in their next
 * exchange. st is returned. Not for an error that tl_est_hosts_same marked:
 * one that every host meets alike (a check of the configuration or of
 * arguments that every host shares) before any exchange of the call, which
 * leaves the hosts able to go on. */
tl_status tl_est_hosts_fail(tl_estimator *est, tl_status st);
tl_status tl_est_hosts_same(tl_estimator *est, tl_status st);

/* ---- checkpoint.c -------------------------------------------------------- */

/* At create: copies model_dir and the warm-start settings, compiles
 * warm_start_vars, and records the configuration (config.json's text, the
 * identity and its SHA-256, the topology). Errors: TL_EINVAL for a
 * warm_start_vars that is not a supported regex; TL_ENOMEM. */
tl_status tl_est_state_init(tl_estimator *est, const tl_config *cfg);

/* Records the identity, its SHA-256 and the topology again from the
 * options as they are now (the TRAIN spec's optimizer may have replaced
 * theirs). Errors: TL_ENOMEM. */
tl_status tl_est_identity_refresh(tl_estimator *est);

/* Frees what tl_est_state_init and the saves made. */
void tl_est_state_free(tl_estimator *est);

/* Loads the restore that tl_estimator_restore left pending (after the
 * model is traced). Errors: the variable checks'; the restore stays pending. */
tl_status tl_est_apply_pending(tl_estimator *est);

/* The first train's start: restore model_dir's latest valid checkpoint, or
 * (none) warm-start; nothing once done. Also writes config.json and warns
 * when the restored input position does not fit data. */
tl_status tl_est_train_begin(tl_estimator *est);

/* Restores the input datasets' positions that the last restored checkpoint
 * saved (once; a warning when it saved none). Errors: those of
 * tl_infeed_restore_positions. */
tl_status tl_est_restore_input(tl_estimator *est);

/* Saves the state at the global step into model_dir (nothing without one),
 * through the checkpoint manager. Host thread, workers idle. Errors: the
 * manager's (TL_EIO naming the file; sticky), TL_ENOMEM. */
tl_status tl_est_save(tl_estimator *est);

/* ---- summaries.c --------------------------------------------------------- */

/* Opens the training event writer (model_dir only; once) and writes the
 * train's SessionLog START at the global step + 1. Errors: TL_EIO. */
tl_status tl_est_summaries_open(tl_estimator *est);

/* After a save: the SessionLog CHECKPOINT at the global step, with the
 * save path "<model_dir>/model.ckpt" (nothing before the writer is open).
 * Errors: TL_EIO, TL_ENOMEM. */
tl_status tl_est_summaries_checkpoint(tl_estimator *est);

/* The summaries of the loop boundary after steps [prev_step, global_step):
 * "loss" on the first loop of a train call and at the first boundary at or
 * after each multiple of save_summary_steps; the rates when they are >= 0
 * (the log schedule reported them). */
tl_status tl_est_summaries_after_loop(tl_estimator *est, int64_t prev_step, bool first_loop, double loss,
                                      double steps_per_sec, double examples_per_sec);

/* Makes the training events durable. */
tl_status tl_est_summaries_flush(tl_estimator *est);

/* Writes every metric of an evaluation at its global step into
 * model_dir/eval and flushes (model_dir only). */
tl_status tl_est_summaries_eval(tl_estimator *est, const tl_eval_result *res);

/* Closes both writers (a failure is logged: destroy cannot report it). */
void tl_est_summaries_close(tl_estimator *est);

/* ---- infeed.c ------------------------------------------------------------ */

/* Makes the feed of every traced mode, depth batches deep (once, in
 * prepare). Errors: TL_ENOMEM, the input plans'. */
tl_status tl_infeed_init(tl_estimator *est, int depth);

/* One example's features of in's datasets for mode: a throw-away dataset of
 * invocation 0 gives its first element. Errors: the input_fn's, the
 * dataset's, TL_EINVAL for missing or unusable keys or an empty dataset. */
tl_status tl_infeed_input_shape(tl_estimator *est, tl_mode mode, const tl_input *in, int *frank, int64_t *fshape);

/* Calls in->input_fn once per invocation of mode's plan (host thread): the
 * next tl_infeed_start of that mode reads these datasets instead of data in
 * memory. Errors: the input_fn's (every dataset made is destroyed). */
tl_status tl_infeed_open_datasets(tl_estimator *est, tl_mode mode, const tl_input *in);

/* Destroys mode's datasets (after its tl_infeed_stop). */
void tl_infeed_close_datasets(tl_estimator *est, tl_mode mode);

/* This host's training datasets' positions as one JSON array (tl_free
 * it), one element per invocation of the plan: its tl_dataset_save text, or
 * null for an invocation another host runs. Once the feed has produced
 * every step below step and is held there. NULL *json for in-memory data.
 * Errors: the datasets', TL_ENOMEM. */
tl_status tl_infeed_save_positions(tl_estimator *est, int64_t step, char **json);

/* One element of a positions array: its bytes [p, p + len), or p NULL for
 * a JSON null (another host's invocation). */
typedef struct tl_infeed_text {
    const char *p;
    size_t len;
} tl_infeed_text;

/* Splits the positions array text (bytes long; no NUL needed) into its
 * elements: *elems (tl_free it) holds *count of them, pointing into text.
 * what names the text in messages ("checkpoint FILE"). Errors: TL_EPARSE
 * "WHAT: input_datasets is not a JSON array: WHY (at byte N)", TL_ENOMEM. */
tl_status tl_infeed_split_positions(const char *text, size_t bytes, const char *what, tl_infeed_text **elems,
                                    int *count);

/* Restores the open training datasets from texts[i], the saved position of
 * invocation i of n (p NULL for one this host does not run), before the
 * feed starts. what names the source ("checkpoint FILE"). Errors: TL_EINVAL
 * when n is not the plan's count of invocations ("WHAT holds the positions
 * of 2 input datasets; this input plan has 4 invocations"), when a dataset
 * of this host has no text, or a dataset's state does not match (named). */
tl_status tl_infeed_restore_positions(tl_estimator *est, const char *what, const tl_infeed_text *texts, int n);

/* Starts the input thread of cmd for count steps from first (train: global
 * steps; eval: eval steps from 0; predict: batches from 0 until the input
 * ends, then the stop batch — count < 0), reading the mode's open datasets
 * or else data. Datasets in training are held: tl_infeed_allow lets each
 * loop's steps through. An evaluation may start while training's feed runs
 * (between its loops): the workers pop the evaluation's until its stop,
 * then training's again. Errors: TL_ENOMEM, TL_ERUNTIME; then nothing runs. */
tl_status tl_infeed_start(tl_estimator *est, tl_cmd_kind cmd, const tl_labeled_data *data, int64_t first,
                          int64_t count);

/* Lets a held feed produce the steps below limit. */
void tl_infeed_allow(tl_estimator *est, int64_t limit);

/* Closes the running feed's queues (waking the thread and any waiting
 * worker), joins the thread and returns its error (a dataset's, with its
 * message) or TL_OK; an interrupted training feed runs on. Safe to call
 * when nothing runs. */
tl_status tl_infeed_stop(tl_estimator *est);

/* The running feed's error, if it failed (the root cause of the workers'
 * "infeed closed"), with tl_error set; TL_OK otherwise. */
tl_status tl_infeed_failed(tl_estimator *est);

/* Closes the queues without joining, from any thread of the running
 * pipeline (a failing worker): the others stop at their next pop. */
void tl_infeed_abort(tl_estimator *est);

/* Frees the feeds. */
void tl_infeed_free(tl_estimator *est);

/* The worker side: the next batch of rank, which must be for step; the
 * buffer stays the caller's until tl_infeed_release. team: the caller's
 * intra-op threads, which an infeed pulled on the caller's thread copies on
 * (feed.h). *waited_ns grows by the time spent waiting. Errors: TL_ERUNTIME
 * "infeed closed"; a pulled in-memory feed's own. */
tl_status tl_infeed_pop(tl_estimator *est, int rank, int64_t step, struct tl_team *team, tl_feed_batch **out,
                        int64_t *waited_ns);
void tl_infeed_release(tl_estimator *est, int rank, tl_feed_batch *b);
/* The same for core `core` of replica `replica` (a replica of several
 * cores: the features' tile of that core). */
tl_status tl_infeed_pop_core(tl_estimator *est, int replica, int core, int64_t step, struct tl_team *team,
                             tl_feed_batch **out, int64_t *waited_ns);
void tl_infeed_release_core(tl_estimator *est, int replica, int core, tl_feed_batch *b);

/* tensor_parallel.c: options.distribution's mesh against R replicas of C
 * cores (sets est->dist and ->model_axis; a DataParallel or NULL: none),
 * and each variable's split dimension from its layout (est->var_split). */
tl_status tl_est_tp_check(tl_estimator *est, const tl_distribution *d);
tl_status tl_est_tp_splits(tl_estimator *est, const int8_t **out);

/* ---- host_call.c --------------------------------------------------------- */

/*
 * Checks the host_call and eval_metrics fields of the spec a model_fn
 * returned for mode and plans what the mode outfeeds for R replicas: the
 * host_call tensors (TRAIN's default: the loss) when o->host_call is set,
 * the eval_metrics tensors in EVAL when o->metric_update is set. PREDICT
 * outfeeds nothing. Errors: TL_EINVAL naming the field and index (see
 * graph.h); the spec's loss must have been checked to be a scalar.
 */
tl_status tl_outfeed_plan_build(const tl_graph *g, tl_mode mode, const tl_model_spec *spec,
                                const tl_estimator_options *o, int R, tl_outfeed_plan *pl);

/* The worker side: copies replica rank's values of every planned tensor
 * from x into record (pl->record elements). */
void tl_outfeed_write(const tl_outfeed_plan *pl, const tl_program *p, const tl_exec *x, int rank, float *record);

/* Room for `elems` elements in the outfeed area; grows only, on the host
 * between loops. Errors: TL_ENOMEM. */
tl_status tl_outfeed_reserve(tl_estimator *est, int64_t elems);

/* The host side, per fired record: calls options.host_call with the
 * record's host_call tensors (nothing when there are none), and
 * options.metric_update with its eval_metrics tensors (when set). Errors: the
 * callback's status, "host_call at step N: ..." / "metric_update at eval
 * step N: ...". */
tl_status tl_outfeed_host_call(const tl_estimator *est, const tl_outfeed_plan *pl, const float *record,
                               int64_t global_step);
tl_status tl_outfeed_metric_update(const tl_estimator *est, const tl_outfeed_plan *pl, const float *record,
                                   int64_t eval_step);

/* The status a user callback returned, as this thread's error: "<what>:
 * returned TL_X (message)" and the callback's own tpuloop error if it left
 * one (the caller clears the error before the call). */
tl_status tl_callback_failed(tl_status st, const char *what);

/* ---- emb_steps.c --------------------------------------------------------- */

/* At create: options.embedding fits the estimator (one tensor core per
 * replica, mode TRAINING, no pipelining, the dynamic values' callback when
 * needed); sets est->emb_width. Errors: TL_EINVAL naming what. */
tl_status tl_est_emb_check(tl_estimator *est);

/* W_f, feature f's ids per example: its bags per sample (max_sequence_length,
 * or Π output_shape, or 1). */
int64_t tl_est_emb_width(const tl_emb_feature_config *f);

/* After mode's model is traced: the model's activation tensors, checked
 * against the engine's shapes. Errors: TL_EINVAL, TL_ENOMEM. */
tl_status tl_est_emb_plan(tl_estimator *est, tl_mode mode, tl_mode_prog *m);
void tl_est_emb_plan_free(tl_mode_prog *m);

/* A worker's buffers (after every mode is planned). Errors: TL_ENOMEM. */
tl_status tl_est_emb_worker_init(tl_estimator *est, tl_worker *w);
void tl_est_emb_worker_free(tl_worker *w);

/* While the worker holds the step's infeed buffer: enqueues its (batch, W)
 * int64 ids (feed.h's block, row after row, feature after feature) as the
 * replica's step, TRAIN in training mode, the others in inference. Errors:
 * the engine's, with the step (and, for an id out of range, the row of the
 * batch) added. Nothing without an engine. */
tl_status tl_est_emb_enqueue(tl_worker *w, const tl_mode_prog *m, const int64_t *ids, tl_mode mode, int64_t step);

/* Before the forward pass (the step enqueued): dedup and activations.
 * After the backward pass of a TRAIN step: the gradients. Nothing without
 * an engine. Errors: the engine's, the callback's. */
tl_status tl_est_emb_forward(tl_worker *w, const tl_mode_prog *m, tl_exec *x, tl_mode mode);
tl_status tl_est_emb_backward(tl_worker *w, const tl_mode_prog *m, tl_exec *x, int64_t step);
/* With several replicas, after every replica's send: this replica's rows
 * of the step's update (the engine's owner apply); the step's closing
 * barrier then keeps step + 1 from reading a table not yet updated. */
tl_status tl_est_emb_apply(tl_worker *w);

/* ---- emb_ckpt.c: the tables in checkpoints and params_digest ------------- */

/* With one host: adds every table's parameters and slots to the main
 * file's writer (copies held in est->emb_ckpt until tl_est_emb_ckpt_free).
 * With several: the main file's metadata says the tables' sharding
 * strategy; the tables are in the host files (tl_est_emb_save_host).
 * Nothing without an engine. Errors: TL_ENOMEM, the writer's. */
tl_status tl_est_emb_save(tl_estimator *est, tl_ckpt_writer *wr);
void tl_est_emb_ckpt_free(tl_estimator *est);

/* Several hosts: adds this host's shard of every table and the sharding
 * strategy to the writer of its host file (copies held in est->emb_ckpt
 * until tl_est_emb_ckpt_free). Nothing with one host or no engine.
 * Errors: TL_ENOMEM, the engine's, the writer's. */
tl_status tl_est_emb_save_host(tl_estimator *est, tl_ckpt_writer *w);

/* Several hosts, collective: every host passes its status and gets
 * TL_OK when every host's is, else on every host the first failing host's
 * status and message, "host h: message". One host: st. Errors: those, the
 * hosts communicator's, TL_ENOMEM. */
tl_status tl_est_ckpt_agree(tl_estimator *est, tl_status st);

/* The tables of a checkpoint being restored: the main file's, or its S
 * host files, open and checked. */
typedef struct tl_est_emb_src tl_est_emb_src;

/* Checks that the checkpoint r (read from path; what: "checkpoint FILE"
 * for the messages) holds every table: its host files open and say its
 * step, every tensor is there, F32, (rows of its shard, dim). *out (NULL
 * without an engine) is freed with tl_est_emb_src_free. Nothing is loaded.
 * Errors: TL_EINVAL naming the file and tensor, TL_ENOMEM. */
tl_status tl_est_emb_restore_check(tl_estimator *est, const tl_ckpt_reader *r, const char *path, const char *what,
                                   tl_est_emb_src **out);

/* Loads this host's shard of every table (of the current hosts: (H, host),
 * or (1, 0) on one host) from src, re-sharded from the saved shards when
 * their count or strategy differ, one table's shard in memory at a time.
 * Errors: TL_ENOMEM, the engine's. */
tl_status tl_est_emb_restore(tl_estimator *est, const tl_est_emb_src *src);
void tl_est_emb_src_free(tl_est_emb_src *src);

/* Adds every table's parameters, in table then id order, to a SHA-256
 * (a SHA2_CTX *) after the dense variables: the same bits on every host
 * and on one process. With several hosts it is collective (each table
 * gathered in chunks of at most 1M floats over the hosts). Errors:
 * TL_ENOMEM, the engine's, the hosts communicator's. */
tl_status tl_est_emb_digest(const tl_estimator *est, void *sha256_ctx);

/* trainer.c: n floats into a SHA-256 (a SHA2_CTX *) as little-endian bits,
 * the params_digest's encoding. */
void tl_est_sha256_floats(void *sha256_ctx, const float *p, int64_t n);

/* ---- eval_metrics.c ------------------------------------------------------ */

/* Calls options.metric_result (when set) into out and checks what it
 * returned: *n in [0, TL_MAX_METRICS], names non-empty, NUL-terminated,
 * distinct and not reserved ("loss", "global_step": TensorFlow's message).
 * *n is 0 on error. Errors: TL_EINVAL, the callback's status. */
tl_status tl_metric_results(const tl_estimator_options *o, tl_metric *out, int *n);



#endif /* TL_RUNTIME_ESTIMATOR_INT_H */

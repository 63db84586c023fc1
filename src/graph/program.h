/*
 * program.h — a compiled step program: the traced graph with every buffer
 * planned, the reverse-mode gradient pass decided, and the kernels to run in
 * order. Nothing is allocated after tl_program_compile; a replica's buffers
 * are one activation slab, one gradient slab and one mask slab, carved by the
 * offsets planned here (llm.c's habit), and the parameters and their
 * gradients are slabs laid out by the variable store.
 */
#ifndef TL_GRAPH_PROGRAM_H
#define TL_GRAPH_PROGRAM_H

#include "graph_int.h"

#define TL_OFF_NONE (-1)
#define TL_OFF_PARAM (-2) /* the value (or gradient) lives in the parameter (gradient) slab */

typedef struct tl_program {
    const tl_graph *g;
    tl_t loss;                /* TL_T_INVALID when there is no backward pass */
    bool backward;            /* TRAIN: compute gradients of loss */
    int64_t *val_off;         /* (n) float offset of each node's value in the activation slab */
    int64_t *grad_off;        /* (n) float offset of each node's gradient in the gradient slab */
    int64_t *mask_off;        /* (n) byte offset of a dropout node's mask in the mask slab */
    int64_t act_floats;       /* activation slab, floats (int32 inputs use float-sized slots) */
    int64_t grad_floats;      /* gradient slab, floats */
    int64_t mask_bytes;
    int64_t scratch_floats;   /* per-op scratch (largest need) */
    uint32_t *first_write;    /* (n) bit k: node i is the first, in backward order, to write input k's gradient */
    int *zero_vars;           /* variables whose gradient no op writes: zeroed each step */
    int nzero_vars;
    uint8_t *fuse;            /* (n) tl_fuse: ops fused into their producer */
    int64_t *aux_floats;      /* (n) floats each op keeps beside its value (ops.h aux; tl_exec_aux) */
    uint8_t *remat;           /* (n) 1: a transient value, recomputed before its consumer's backward (below) */
    tl_t *bias_add;           /* (n) a matmul's fused bias add (TL_FUSE_BIAS*, below), else TL_T_INVALID */
} tl_program;

/*
 * Transient values. A halo gather (ops_spmd.c) read only by the next op
 * (its conv or pool) keeps no value of its own: every such region shares
 * one buffer, as large as the largest, and so do their gradients; the
 * backward pass runs the gather again just before its consumer's backward
 * needs the region. A partitioned core then holds its tiles and one
 * region, not a region beside every tile.
 */

/*
 * Fusion. tl_program_compile_fused lets an op do the work of its only
 * consumer when nothing else reads the op's value: today a ReLU after a
 * batch norm (Keras' Conv → BN → ReLU; TensorFlow's grappler makes the same
 * _FusedBatchNormEx) or after a sum of two tensors of one shape (a ResNet's
 * residual add). The producer writes the ReLU's output and, in backward,
 * gates its gradient as the ReLU would (norm.h, tl_k_add_relu), with the
 * same bits as the two ops apart; the ReLU's value and gradient are the
 * producer's buffers, as a reshape's are its input's, and it runs nothing.
 *
 * A dense layer, matmul → bias add (→ ReLU), where only the bias add reads
 * the product and only the ReLU reads the sum, is one op: the matmul. Each
 * piece of its GEMM (a device's intra-op threads run them at once,
 * kernels.h tl_k_gemm_parts) adds the bias and applies the ReLU to its own
 * block of the output while the block is in cache, and in backward the
 * gradient is gated and the bias's column sums taken in one pass, split by
 * columns over the threads, before the two GEMMs of the matmul's gradients.
 * The bits are those of the ops apart; the bias add and the ReLU share the
 * matmul's value and gradient and run nothing.
 *
 * DLRM's interaction stacks its vectors (a concatenation along axis 1,
 * reshaped to (batch, vectors, d)) only for the pairwise dot to read them.
 * Where nothing else reads the stack, it is never built: the dot reads each
 * vector in the concatenation's inputs and, in backward, writes their
 * gradients there, as the concatenation's backward would (its first_write
 * bits, planned at the dot's place in backward order). The concatenation
 * and the reshape run nothing and have no value or gradient. The bits are
 * those of the ops apart.
 */
typedef enum {
    TL_FUSE_NONE = 0,
    TL_FUSE_RELU,      /* this op applies the ReLU that consumes it */
    TL_FUSE_INTO,      /* this op's work is done by its input 0, whose value and gradient it shares */
    TL_FUSE_BIAS,      /* this matmul adds the bias of its bias add (p->bias_add) */
    TL_FUSE_BIAS_RELU, /* ... and applies the ReLU after it */
    TL_FUSE_STACK,     /* this pairwise dot reads the inputs of the concatenation it reads (tl_program_stack_of) */
    TL_FUSE_ELIDED     /* this concatenation or reshape is never built: a TL_FUSE_STACK dot reads its inputs */
} tl_fuse;

/* The concatenation whose inputs a TL_FUSE_STACK pairwise dot, node i, reads. */
tl_t tl_program_stack_of(const tl_program *p, int i);

/*
 * Plans the program of graph g. With loss valid and backward true it also
 * plans gradients of loss with respect to every variable loss depends on.
 * Errors: TL_EINVAL (loss not a scalar float of g), TL_ENOMEM.
 */
tl_status tl_program_compile(const tl_graph *g, tl_t loss, bool backward, tl_program **out);

/* tl_program_compile, with the fusions above wherever they hide no value a
 * caller reads: the loss and the nkeep tensors of keep (the outputs it
 * fetches with tl_exec_value) keep their values as traced. */
tl_status tl_program_compile_fused(const tl_graph *g, tl_t loss, bool backward, const tl_t *keep, int nkeep,
                                   tl_program **out);
void tl_program_destroy(tl_program *p);

struct tl_barrier;
struct tl_exec;

/* The cores of a partitioned replica (partition.h), as one core sees them:
 * every core runs its own program over its own buffers, and the SPMD ops
 * (ops_spmd.c) meet at the barrier and read the other cores' buffers. */
typedef struct tl_spmd {
    int ncores, core;
    struct tl_barrier *barrier;            /* the replica's ncores threads */
    const tl_program *const *progs;        /* (ncores) each core's program; node i is the same op on each */
    const struct tl_exec *const *peers;    /* (ncores) each core's buffers; peers[core] is this core's */
} tl_spmd;

/* A replica's view of memory while it runs a program. */
typedef struct tl_exec {
    float *act;               /* (act_floats) */
    float *grad;              /* (grad_floats) */
    uint8_t *mask;            /* (mask_bytes) */
    float *scratch;           /* (scratch_floats) */
    const float *params;      /* the parameter slab (vars->total), shared, read-only while running */
    float *param_grad;        /* this replica's gradient slab (vars->total) */
    uint64_t seed;            /* tf_random_seed */
    int64_t step;             /* global step: keys dropout's stream */
    int replica;
    float loss_scale;         /* d(loss) seed: 1, or 1/R for CrossShardOptimizer's MEAN */
    float state_scale;        /* 1/R: a state variable's update (its param_grad entry) is averaged over replicas */
    const tl_spmd *spmd;      /* a core of a partitioned replica; NULL: the replica is one core */
    struct tl_team *team;     /* the device's intra-op threads (base/thread.h): its GEMMs run in pieces on them,
                                 with the bits of one thread (kernels.h, tl_k_gemm_parts); NULL: one thread */
} tl_exec;

/* Pointer to node t's value in e. */
float *tl_exec_value(const tl_program *p, const tl_exec *e, tl_t t);

/* Node t's aux floats in e (ops.h): what its forward pass keeps for its
 * backward pass, right after its value; p->aux_floats[t] of them. */
float *tl_exec_aux(const tl_program *p, const tl_exec *e, tl_t t);

/* Pointer to node t's gradient in e after the backward pass, or NULL when
 * the program computes none for t (the loss does not depend on it). */
float *tl_exec_grad(const tl_program *p, const tl_exec *e, tl_t t);

/* Runs the forward pass; returns a status for data errors (e.g. a label
 * outside [0, classes)). */
tl_status tl_program_forward(const tl_program *p, tl_exec *e);
/* Runs the backward pass into e->param_grad (overwritten, not accumulated).
 * A state variable's entry holds its update instead: state_scale times the
 * change its op (batch norm) makes this step, or zeros; the runtime sums the
 * replicas' entries and adds them to the variable (no optimizer). */
tl_status tl_program_backward(const tl_program *p, tl_exec *e);

#endif /* TL_GRAPH_PROGRAM_H */

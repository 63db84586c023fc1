/*
 * tpuloop/graph.h — writing a model_fn: a traced graph of ops on static shapes.
 *
 * A model_fn is called once per mode and per batch shape. It does not compute:
 * it records ops on symbolic tensors (tl_t handles) into a graph, and returns a
 * spec naming the loss, the predictions, the eval metrics and the host_call
 * tensors. tpuloop then differentiates the graph, plans every buffer and
 * compiles a step program that the device loop replays with no allocation.
 *
 * Errors while tracing are sticky, as NaN is in arithmetic: an op given a bad
 * shape records the first error in the graph and returns TL_T_INVALID, every
 * op given TL_T_INVALID returns it too, and tl_graph_status() tells what went
 * wrong. So a model_fn reads like the math, with one check at the end:
 *
 *     static tl_status mlp(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
 *     {
 *         (void)user;
 *         // The features keep the data's shape: (batch, 28, 28) for Fashion-MNIST,
 *         // (batch, D) for synthetic data. Dense layers take (batch, features).
 *         int64_t d[TL_MAX_RANK];
 *         int rank = tl_rank(g, a->features, d);
 *         int64_t flat[2] = {a->batch_size, 1};
 *         for (int i = 1; i < rank; i++)
 *             flat[1] *= d[i];
 *         tl_t h = tl_reshape(g, a->features, flat, 2);          // (batch, 784)
 *         h = tl_dense(g, h, 256, TL_ACT_RELU, "dense");          // dense/kernel, dense/bias
 *         h = tl_dense(g, h, 256, TL_ACT_RELU, "dense_1");
 *         tl_t logits = tl_dense(g, h, 10, TL_ACT_NONE, "dense_2");
 *         spec->logits = logits;
 *         if (a->mode != TL_MODE_PREDICT)                         // PREDICT has no labels
 *             spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
 *         return tl_graph_status(g);
 *     }
 *
 * (tests/test_header_examples.c compiles and runs this model_fn, and fails
 * when its copy and this text differ.)
 *
 * Variables are created by name (`dense_1/kernel`), once per graph; a second
 * model_fn call for another mode or batch shape finds the same names, so every
 * graph of a model shares one set of parameters. Initial values are drawn from
 * tpuloop's counter-based RNG keyed by tf_random_seed and the variable's name,
 * so they do not depend on creation order or on which graph asked first.
 *
 * The spec also names the tensors the host sees (spec tpu_estimator.md §5–§7):
 * TPUEstimatorSpec's `host_call = (fn, tensors)` and `eval_metrics =
 * (metric_fn, tensors)` become tensor lists here and callbacks in
 * tl_estimator_options (estimator.h). Every such tensor keeps its batch
 * dimension (rank >= 1): the host receives it concatenated over the replicas
 * along axis 0, in replica order, so a (1,) tensor arrives as (R,) and a
 * (batch, C) one as (R * batch, C):
 *
 *         int64_t one = 1;
 *         spec->host_call[0] = tl_reshape(g, spec->loss, &one, 1);   // resnet's idiom
 *         spec->host_call_names[0] = "loss";
 *         spec->host_call[1] = logits;
 *         spec->num_host_call = 2;                   // fn gets (R) and (R * batch, C)
 *         if (a->mode == TL_MODE_EVAL) {
 *             spec->eval_metric_tensors[0] = logits;
 *             spec->eval_metric_tensors[1] = a->labels;   // int32 arrives as TL_I32
 *             spec->num_eval_metric_tensors = 2;
 *         }
 */
#ifndef TPULOOP_GRAPH_H
#define TPULOOP_GRAPH_H

#include "tpuloop/base.h"
#include "tpuloop/optim.h" /* tl_optimizer_config */
#include "tpuloop/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A symbolic tensor: an index into its graph. */
typedef int32_t tl_t;
#define TL_T_INVALID ((tl_t)-1)

/* Element types. int64 tensors come only from tl_cast and index ops; the
 * infeed, host_call and eval metrics carry float32 and int32. */
typedef enum { TL_F32 = 0, TL_I32 = 1, TL_I64 = 2 } tl_dtype;

typedef struct tl_graph tl_graph;

typedef enum {
    TL_ACT_NONE = 0,
    TL_ACT_RELU,
    TL_ACT_SIGMOID,
    TL_ACT_TANH
} tl_activation;

typedef enum {
    TL_INIT_ZEROS = 0,
    TL_INIT_CONSTANT,          /* value */
    TL_INIT_UNIFORM,           /* [minval, maxval) */
    TL_INIT_TRUNCATED_NORMAL,  /* mean, stddev; redrawn beyond 2 stddev, as TF */
    TL_INIT_GLOROT_UNIFORM,    /* U(-l, l), l = sqrt(6 / (fan_in + fan_out)) */
    TL_INIT_HE_NORMAL          /* truncated normal, stddev sqrt(2 / fan_in) / .87962566 as Keras */
} tl_init_kind;

typedef struct tl_initializer {
    tl_init_kind kind;
    double a; /* value, minval or mean */
    double b; /* maxval or stddev */
} tl_initializer;

/* What a model_fn is given. */
typedef struct tl_model_args {
    tl_mode mode;
    tl_t features;          /* (batch, ...) float32: the data's feature shape, e.g. (batch, 28, 28) for
                               Fashion-MNIST, (batch, D) for synthetic data */
    tl_t labels;            /* (batch) int32 or (batch, ...) float32; TL_T_INVALID in PREDICT */
    int64_t batch_size;     /* params['batch_size']: the model_fn batch of the input plan */
    const char *params_json;/* the user's params (config `params`) */
    int replica;            /* the replica being traced for (its ops are the same on all) */
} tl_model_args;

/* What a model_fn returns. Unset tensors are TL_T_INVALID; the counts start
 * at 0. */
#define TL_MAX_HOST_CALL 8
#define TL_MAX_EVAL_TENSORS 8
#define TL_MAX_OUTFEED_NAME 64 /* bytes of a host_call or eval-metric tensor name, NUL included */
typedef struct tl_model_spec {
    tl_t loss;        /* scalar; required in TRAIN and EVAL */
    tl_t logits;      /* (batch, classes): predictions and the built-in metrics derive from it; optional in
                         EVAL (without it evaluation has no accuracy or AUC) */
    tl_t predictions; /* (batch, ...) any tensor to write in PREDICT; defaults to logits */
    /*
     * host_call (§6), read in TRAIN and EVAL (PREDICT ignores it): tensors of
     * rank >= 1, float32 or int32, outfed after the step and handed to
     * tl_estimator_options.host_call concatenated over replicas along axis 0.
     * In TRAIN, 0 tensors means TensorFlow's default host_call, which outfeeds
     * the loss as a (1,) tensor named "loss"; host_call_disabled (TensorFlow's
     * empty tensor list) outfeeds nothing and the callback is never called.
     * In EVAL, 0 tensors means no host_call. Names are copied when the
     * model_fn returns; NULL names default to "host_call_<k>".
     * Errors when the model is traced (TL_EINVAL): a count outside
     * [0, TL_MAX_HOST_CALL], host_call_disabled with a count > 0, a tensor
     * not of the graph, a scalar ("All tensors outfed from TPU should preserve
     * batch size dimension, but got scalar <name>"), a name that is empty or
     * longer than TL_MAX_OUTFEED_NAME - 1 bytes.
     */
    int num_host_call;
    tl_t host_call[TL_MAX_HOST_CALL];            /* each (d0, ...): (1,) or (batch, ...) typically */
    const char *host_call_names[TL_MAX_HOST_CALL];
    bool host_call_disabled;
    /*
     * eval_metrics' tensors (§7), read in EVAL only: outfed every eval step
     * and handed, concatenated over replicas like host_call's, to
     * tl_estimator_options.metric_update. Same rules and errors as host_call;
     * NULL names default to "eval_metric_<k>".
     */
    int num_eval_metric_tensors;
    tl_t eval_metric_tensors[TL_MAX_EVAL_TENSORS]; /* each (batch, ...) typically */
    const char *eval_metric_tensor_names[TL_MAX_EVAL_TENSORS];
    /*
     * The optimizer, as TensorFlow's model_fn builds `train_op =
     * CrossShardOptimizer(AdamOptimizer(lr)).minimize(loss)`; read in TRAIN
     * only (EVAL and PREDICT ignore it). NULL keeps tl_estimator_options'
     * optimizer and reduce_sum. Otherwise *optimizer (copied when the
     * model_fn returns) and optimizer_reduce_sum (the CrossShardOptimizer's
     * reduction: true SUM, false MEAN) replace the options' for this
     * estimator: the update, the slots, the slot names in checkpoints and the
     * configuration's identity (config_sha256; with several hosts, every
     * host's must be the same). The TRAIN model_fn is traced first, at the
     * first train, evaluate or predict, so an estimator that only evaluates
     * or predicts uses it too.
     * Errors when the model is traced (TL_EINVAL): an optimizer that
     * tl_optimizer_config_validate refuses ("model_fn (train):
     * spec->optimizer: <its message>").
     */
    const tl_optimizer_config *optimizer;
    bool optimizer_reduce_sum;
} tl_model_spec;

typedef tl_status (*tl_model_fn)(tl_graph *g, const tl_model_args *args, tl_model_spec *spec, void *user);

/* ---- tracing ---------------------------------------------------------------- */

/* The graph's first error (TL_OK if none); its message is in tl_last_error()
 * right after the failing op, and tl_graph_error() keeps it. */
TL_API tl_status tl_graph_status(const tl_graph *g);
TL_API const char *tl_graph_error(const tl_graph *g);

/* Records an error of the model_fn's own (a bad param, say) in the graph, if
 * none is there yet, and returns the graph's status. */
TL_API tl_status tl_graph_fail(tl_graph *g, tl_status st, const char *msg);

/* The rank and dims of t (NULL dims → only the rank); -1 for an invalid t. */
TL_API int tl_rank(const tl_graph *g, tl_t t, int64_t *dims);

/*
 * The activations of embedding feature `feature` (tpuloop/embedding.h:
 * one output per feature, [B, D] or [B, S, D]) as a float32 tensor of the
 * given shape. The runtime writes it before each step from the engine's
 * recv_activations and sends its gradient back with send_gradients, as
 * TPUEmbedding's dequeue and apply_gradients do. Errors (in the graph's
 * status): feature < 0, a bad shape, the same feature twice.
 */
TL_API tl_t tl_embedding_activations(tl_graph *g, int feature, const int64_t *shape, int rank);

/* A trainable float32 variable; an existing name must have the same shape. */
TL_API tl_t tl_variable(tl_graph *g, const char *name, const int64_t *shape, int rank, tl_initializer init);
/*
 * A state variable: float32, not trainable (Keras' trainable=False), such as
 * batch norm's moving_mean and moving_variance. It is saved in checkpoints
 * and counted in params_digest like any variable, but has no optimizer slots
 * and the loss's gradient never reaches it. Ops that keep state (batch norm
 * in TRAIN) update it once per step; with R replicas the new value is the
 * mean of the replicas' updates, as Keras aggregates its moving statistics
 * (synchronization ON_READ, aggregation MEAN), so it is the same on every
 * replica and for any iterations_per_loop. A name must stay a state variable
 * (or a trainable one) in every graph of the model.
 */
TL_API tl_t tl_state_variable(tl_graph *g, const char *name, const int64_t *shape, int rank, tl_initializer init);

TL_API tl_t tl_matmul(tl_graph *g, tl_t a, tl_t b, bool transpose_a, bool transpose_b);
TL_API tl_t tl_bias_add(tl_graph *g, tl_t x, tl_t bias);
TL_API tl_t tl_relu(tl_graph *g, tl_t x);
TL_API tl_t tl_sigmoid(tl_graph *g, tl_t x);
TL_API tl_t tl_tanh(tl_graph *g, tl_t x);
/* Per-example sparse softmax cross-entropy: logits (batch, classes), labels (batch) int32. */
TL_API tl_t tl_softmax_xent(tl_graph *g, tl_t logits, tl_t labels);
/*
 * Sigmoid cross-entropy with logits (TF's sigmoid_cross_entropy_with_logits),
 * in one of two forms:
 *  - labels float32 of logits' shape: the per-element loss, of that shape;
 *  - logits (batch, 1) and labels int32 (batch,), each 0 or 1, as TensorFlow's
 *    binary head with one logit: the per-example loss (batch,), so tl_mean of
 *    it is the mean log loss.
 * The gradient with respect to the logits is sigmoid(logits) - labels; labels
 * get none. Errors (in the graph's status): other shapes or dtypes, labels
 * not of the graph (PREDICT has none). An int32 label other than 0 or 1 is a
 * data error when the step runs: TL_EINVAL, "sigmoid_cross_entropy: example 5
 * has label 3, which is not 0 or 1", as tl_softmax_xent's label outside
 * [0, classes).
 */
TL_API tl_t tl_sigmoid_xent(tl_graph *g, tl_t logits, tl_t labels);
/* Scalar mean of (a - b)^2. */
TL_API tl_t tl_mse(tl_graph *g, tl_t a, tl_t b);
TL_API tl_t tl_concat(tl_graph *g, const tl_t *xs, int n, int axis);
TL_API tl_t tl_reshape(tl_graph *g, tl_t x, const int64_t *shape, int rank);
TL_API tl_t tl_slice(tl_graph *g, tl_t x, int axis, int64_t begin, int64_t size);
/* Scalar sum / mean of all elements. */
TL_API tl_t tl_sum(tl_graph *g, tl_t x);
TL_API tl_t tl_mean(tl_graph *g, tl_t x);
/* Identity outside TRAIN; in TRAIN drops with probability rate and scales by 1/(1-rate). */
TL_API tl_t tl_dropout(tl_graph *g, tl_t x, double rate);
/* (batch, F, D) → (batch, F*(F-1)/2): the strictly lower triangle of pairwise dots. */
TL_API tl_t tl_pairwise_dot(tl_graph *g, tl_t x);

/* ---- element-wise math with broadcasting (ops_elementwise.c) ---------------- */

/*
 * Binary ops broadcast as NumPy and TensorFlow: shapes are aligned at their
 * last dimension, each aligned pair of dimensions must be equal or one of
 * them 1, and the result has the larger rank and per dimension the larger
 * size — (4, 1, 5) with (3, 1) gives (4, 3, 5), (5,) with (4, 1) gives
 * (4, 5), a scalar goes with anything, so `tl_mul(g, x, tl_constant(g, 0.5,
 * NULL, 0))` halves x. Each input's gradient is dz (times the op's local
 * derivative) summed over the axes that input was broadcast along, in a
 * fixed order (deterministic bits).
 *
 * Errors (in the graph's status; the op returns TL_T_INVALID, as every op
 * given TL_T_INVALID does): an operand not float32 where float32 is needed
 * ("add: y must be float32, got int32"); shapes that do not broadcast ("add:
 * y has shape (4, 3), which does not broadcast with x (4, 5)").
 */

/*
 * A float32 tensor of the given shape (rank 0: a scalar; shape may then be
 * NULL) filled with value rounded to float32, as tf.constant(value,
 * shape=...). It has no gradient; the step program writes it on every step.
 * Errors: rank outside [0, TL_MAX_RANK], a dimension < 1.
 */
TL_API tl_t tl_constant(tl_graph *g, double value, const int64_t *shape, int rank);

/* x + y, x - y, x * y, x / y (tf.math.add, subtract, multiply, truediv):
 * IEEE float32, so x / 0 is ±inf or NaN, as TensorFlow. */
TL_API tl_t tl_add(tl_graph *g, tl_t x, tl_t y);
TL_API tl_t tl_sub(tl_graph *g, tl_t x, tl_t y);
TL_API tl_t tl_mul(tl_graph *g, tl_t x, tl_t y);
TL_API tl_t tl_div(tl_graph *g, tl_t x, tl_t y);
/*
 * The larger / smaller of x and y (tf.math.maximum, minimum); NaN in either
 * gives NaN, as TensorFlow >= 2.4. The gradient goes to x where x >= y
 * (maximum) or x <= y (minimum), else to y: on a tie x gets all of it and y
 * none, as TensorFlow's _MaximumGrad / _MinimumGrad.
 */
TL_API tl_t tl_maximum(tl_graph *g, tl_t x, tl_t y);
TL_API tl_t tl_minimum(tl_graph *g, tl_t x, tl_t y);
/*
 * x^y (tf.math.pow, powf): a negative x with a non-integer y gives NaN.
 * Gradients as TensorFlow's _PowGrad: dx = dz·y·x^(y-1); dy = dz·x^y·log(x)
 * where x > 0 and dz·x^y·0 elsewhere (0, unless x^y is inf or NaN).
 */
TL_API tl_t tl_pow(tl_graph *g, tl_t x, tl_t y);

/*
 * Unary math on a float32 tensor, same shape out, as tf.math's op of the
 * name: -x, |x| (gradient sign(x)·dy, 0 at 0), e^x, ln x, √x, 1/√x, x².
 * Invalid inputs give IEEE results as TensorFlow, not errors: log of a
 * negative and sqrt of a negative are NaN, log(0) = -inf, rsqrt(0) = inf
 * (and the gradient of sqrt at 0 is inf).
 */
TL_API tl_t tl_neg(tl_graph *g, tl_t x);
TL_API tl_t tl_abs(tl_graph *g, tl_t x);
TL_API tl_t tl_exp(tl_graph *g, tl_t x);
TL_API tl_t tl_ln(tl_graph *g, tl_t x); /* tf.math.log (tl_log is the logger, base.h) */
TL_API tl_t tl_sqrt(tl_graph *g, tl_t x);
TL_API tl_t tl_rsqrt(tl_graph *g, tl_t x);
TL_API tl_t tl_square(tl_graph *g, tl_t x);
/*
 * tf.clip_by_value(x, lo, hi) with scalar bounds (rounded to float32):
 * max(min(x, hi), lo); NaN stays NaN. The gradient passes where
 * lo <= x <= hi, bounds included, as TensorFlow's. Errors: a NaN bound or
 * lo > hi (TensorFlow leaves that case undefined).
 */
TL_API tl_t tl_clip(tl_graph *g, tl_t x, double lo, double hi);

/*
 * Activations, as tf.nn's:
 *  - gelu: 0.5·x·(1 + erf(x/√2)), or with approximate the tanh form
 *    0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (tf.nn.gelu's two forms);
 *  - silu = swish: x·sigmoid(x) (tf.nn.silu, tf.nn.swish);
 *  - leaky_relu: x if x > 0 else alpha·x, any alpha; the gradient at 0 is
 *    alpha. tf.nn.leaky_relu defaults alpha to 0.2 (Keras' LeakyReLU layer
 *    to 0.3); here it is always given;
 *  - elu: x if x > 0 else alpha·(e^x - 1). tf.nn.elu is alpha = 1; other
 *    alphas are Keras' ELU layer / keras.activations.elu. The gradient is 1
 *    for x > 0 and alpha·e^x for x <= 0 (alpha at 0), as those;
 *  - softplus: log(1 + e^x), computed so it never overflows; gradient sigmoid(x).
 * Errors: leaky_relu's or elu's alpha not finite.
 */
TL_API tl_t tl_gelu(tl_graph *g, tl_t x, bool approximate);
TL_API tl_t tl_silu(tl_graph *g, tl_t x);
TL_API tl_t tl_swish(tl_graph *g, tl_t x); /* tl_silu */
TL_API tl_t tl_leaky_relu(tl_graph *g, tl_t x, double alpha);
TL_API tl_t tl_elu(tl_graph *g, tl_t x, double alpha);
TL_API tl_t tl_softplus(tl_graph *g, tl_t x);

/*
 * Comparisons (tf.math.equal, not_equal, less, less_equal, greater,
 * greater_equal), broadcasting: a float32 tensor of 1.0 where x op y holds
 * and 0.0 elsewhere (TensorFlow returns bool; a float mask multiplies and
 * feeds tl_where). x and y must have the same dtype, float32, int32 or int64,
 * and are compared in it (int64 exactly). NaN compares false except in
 * not_equal. No gradient flows through a comparison. Errors: as the binary
 * ops, and differing dtypes ("less: x is int32 and y is float32; both must be
 * float32, both int32 or both int64").
 */
TL_API tl_t tl_equal(tl_graph *g, tl_t x, tl_t y);
TL_API tl_t tl_not_equal(tl_graph *g, tl_t x, tl_t y);
TL_API tl_t tl_less(tl_graph *g, tl_t x, tl_t y);
TL_API tl_t tl_less_equal(tl_graph *g, tl_t x, tl_t y);
TL_API tl_t tl_greater(tl_graph *g, tl_t x, tl_t y);
TL_API tl_t tl_greater_equal(tl_graph *g, tl_t x, tl_t y);

/*
 * x where cond, else y, with cond, x and y broadcast together (tf.where in
 * TensorFlow 2, where_v2). cond is a float32 mask (true where nonzero, NaN
 * included) or int32 (true where nonzero); x and y float32. The gradient goes
 * to x where cond and to y elsewhere, each summed over its broadcast axes;
 * cond gets none (a zero gradient if it depends on variables). Errors: cond
 * of another dtype, x or y not float32, shapes that do not broadcast ("where:
 * y has shape (3,), which does not broadcast with cond and x (4, 5)").
 */
TL_API tl_t tl_where(tl_graph *g, tl_t cond, tl_t x, tl_t y);

/*
 * x converted to dtype to (tf.cast) among float32, int32 and int64:
 * float → int truncates toward zero; a float beyond the integer's range
 * saturates to its minimum or maximum and NaN gives 0, as XLA (TPU) does —
 * TensorFlow's CPU kernel leaves these to C++ (INT_MIN on x86). int → float
 * rounds to nearest even; int64 → int32 keeps the low 32 bits (wraps), as
 * TensorFlow. Casting to x's own dtype returns x. The gradient of a float32 →
 * float32 cast is the identity (it is x); casts to or from integers carry
 * none. Errors: to not a tl_dtype.
 */
TL_API tl_t tl_cast(tl_graph *g, tl_t x, tl_dtype to);

/* (end of element-wise math) */

/* ---- shapes, gathers and indices (ops_shape.c) ------------------------------- */

/*
 * Ops that move elements: TensorFlow's ops of the same names, on float32 data
 * unless said. An axis may be negative, counted from the end as in Python
 * (-1 is the last); the rank a tensor may have is TL_MAX_RANK. Tracing errors
 * are TL_EINVAL in the graph's status, and every op given TL_T_INVALID returns
 * it. Where TensorFlow allows a dim of 0 (an empty split part, tile's 0
 * multiple, one_hot's depth 0), tpuloop does not: its tensors have no empty
 * dims.
 *
 *     // (batch, T, H·D) heads out and back: split, stack, transpose
 *     tl_t heads[4];
 *     tl_split(g, x, 4, -1, heads);                       // 4 × (batch, T, D)
 *     tl_t s = tl_stack(g, heads, 4, 1);                  // (batch, 4, T, D)
 *     tl_t t = tl_transpose(g, s, (const int[]){0, 2, 1, 3}, 4);   // (batch, T, 4, D)
 */

/*
 * tf.transpose: y's dim d is x's dim perm[d]. perm holds n == rank(x) axes,
 * each once (a negative one counts from the end); perm NULL (n unused)
 * reverses the axes, as TF's default. The gradient is dy transposed by the
 * inverse permutation.
 * Errors: n not the rank ("transpose: perm has 2 axes; x (2, 3, 4) has rank
 * 3"), an axis out of range or twice ("transpose: perm (0, 0, 1) is not a
 * permutation of 0..2").
 */
TL_API tl_t tl_transpose(tl_graph *g, tl_t x, const int *perm, int n);

/*
 * tf.expand_dims: x with a dim of size 1 inserted at axis, in
 * [-rank(x) - 1, rank(x)] (-1 appends). Any dtype. A view: y is x's bytes,
 * with no copy (a variable's is a copy), and its gradient is dy as it is.
 * Errors: axis out of range, x of rank TL_MAX_RANK already.
 */
TL_API tl_t tl_expand_dims(tl_graph *g, tl_t x, int axis);

/*
 * tf.squeeze: x without the size-1 dims named in axes (n of them, each in
 * [-rank, rank); a repeat is harmless), or without every size-1 dim when
 * n == 0 (axes may then be NULL). Any dtype. A view, as tl_expand_dims.
 * Errors: an axis out of range; a named dim that is not 1: "squeeze: dim 1 of
 * x (2, 3) has size 3, not 1".
 */
TL_API tl_t tl_squeeze(tl_graph *g, tl_t x, const int *axes, int n);

/*
 * tf.broadcast_to: x repeated to shape (rank dims, each >= 1) by NumPy's
 * rules: x's shape aligned to the right of shape, each of x's dims equal to
 * the target's or 1. The gradient sums dy over the broadcast axes, each dx
 * element's terms in dy's row-major order in float64, rounded once.
 * Errors: rank below rank(x) or over TL_MAX_RANK, a dim < 1, "broadcast_to: x
 * (2, 3) does not broadcast to (4, 2, 5): dim 1 of x is 3, the target's 5".
 */
TL_API tl_t tl_broadcast_to(tl_graph *g, tl_t x, const int64_t *shape, int rank);

/*
 * tf.gather(params, indices, axis) with batch_dims 0: y has shape
 * params.shape[:axis] + indices.shape + params.shape[axis+1:] and takes, for
 * each index, params' slice at that index along axis. params float32 of rank
 * >= 1; indices int32 or int64 of any rank (a scalar index removes the axis);
 * axis in [-rank, rank). The gradient with respect to params scatters dy
 * back: zeroed, then each index's slice added in index order (float32), so
 * a repeated index gets the sum of its gradients, the same bits every run.
 * The indices get none.
 * An index outside [0, params.shape[axis]) is a data error when the step
 * runs, as TF on CPU (TF on GPU writes zeros instead): TL_EINVAL, "gather:
 * indices[3] = 7 is not in [0, 5)" ("indices[1,2]" for indices of rank 2),
 * with the output untouched.
 * Errors while tracing: params not float32 or a scalar, indices not int32 or
 * int64, axis out of range, a result of rank over TL_MAX_RANK.
 */
TL_API tl_t tl_gather(tl_graph *g, tl_t params, tl_t indices, int axis);

/*
 * tf.one_hot: float32 y with a new axis of size depth: on_value where
 * indices[...] == d, off_value elsewhere (both rounded to float32). indices
 * int32 or int64 of any rank; axis -1 (TF's default: the new axis last) or in
 * [0, rank(indices)] — TF takes no other negative axis. As TF, an index
 * outside [0, depth) — -1, say — gives a row of off_value, not an error. No
 * gradient.
 * Errors: indices not int32 or int64, depth < 1, axis out of range, a result
 * of rank over TL_MAX_RANK.
 */
TL_API tl_t tl_one_hot(tl_graph *g, tl_t indices, int64_t depth, double on_value, double off_value, int axis);

/*
 * tf.split(x, num, axis): x cut into num equal parts along axis, out[k] the
 * k-th (out has room for num), each a tl_slice (whose gradients add up into
 * x's). Returns the graph's status; on an error every out[k] is TL_T_INVALID.
 * Errors: num < 1, axis out of range, "split: dim 1 of x (4, 5) has size 5,
 * which does not divide into 2 equal parts".
 */
TL_API tl_status tl_split(tl_graph *g, tl_t x, int num, int axis, tl_t *out);

/*
 * tf.split(x, size_splits, axis): num parts of sizes[k] along axis, which
 * add up to the dim; one size may be -1, inferred as the rest (as TF). Each
 * size is >= 1. Otherwise as tl_split.
 */
TL_API tl_status tl_split_sizes(tl_graph *g, tl_t x, const int64_t *sizes, int num, int axis, tl_t *out);

/*
 * tf.stack: n float32 tensors of one shape (1 <= n <= 32) joined along a new
 * axis, in [-rank - 1, rank]: y has rank + 1 dims, n at axis. Traced as
 * tl_expand_dims of each and tl_concat; the gradient is dy's slices.
 * Errors: n out of range, "stack: xs[2] has shape (2, 4), not (2, 3) as
 * xs[0]", axis out of range.
 */
TL_API tl_t tl_stack(tl_graph *g, const tl_t *xs, int n, int axis);

/*
 * tf.pad in CONSTANT mode: paddings (rank(x), 2) holds each axis's (before,
 * after) counts; y's dim d is x's plus both, with x at offset before and
 * constant_value (rounded to float32) everywhere else. The gradient is dy's
 * interior, where x lies. (TF's REFLECT and SYMMETRIC modes are not here.)
 * Errors: a negative padding, "pad: paddings[1] = (0, -1) for x (2, 3);
 * paddings must be >= 0".
 */
TL_API tl_t tl_pad(tl_graph *g, tl_t x, const int64_t *paddings, double constant_value);

/*
 * tf.tile: multiples[d] copies of x along each axis d (rank(x) multiples,
 * each >= 1): y's dim d is x's times multiples[d]. The gradient sums dy's
 * tiles, each dx element's terms in dy's row-major order in float64, rounded
 * once.
 * Errors: a multiple < 1, a result over 2^40 elements.
 */
TL_API tl_t tl_tile(tl_graph *g, tl_t x, const int64_t *multiples);

/* (end of shapes) */

/* ---- reductions, softmax, losses and metrics (ops_reduce.c) ------------------ */

/*
 * Reductions over axes, as tf.reduce_sum / reduce_mean / reduce_max /
 * reduce_min: x float32 of any rank; axes[0..naxes-1] name the reduced axes,
 * each in [-rank, rank) (negative counts from the end); naxes 0 reduces every
 * axis (TF's axis=None; axes may then be NULL). The result drops the reduced
 * axes, or keeps them with size 1 when keepdims. Every sum adds its terms in
 * an order fixed by the code (src/kernels/reduce_axes.h): reduced axes that
 * are contiguous give tl_sum's and tl_k_sum_axis' bits, so reducing every
 * axis of x gives exactly tl_sum(x). The mean divides the float64 sum by the
 * count. max and min propagate NaN, as XLA's.
 *
 * Gradients: sum and mean broadcast dy back (mean divided by the count);
 * max and min as TF's _MaxGrad: the gradient is split equally among the
 * elements equal to the result (indicators / count), so tied maxima share it.
 *
 * Errors (in the graph's status): x not float32, naxes < 0, axes NULL with
 * naxes > 0, an axis outside [-rank, rank) ("reduce_sum: axis 3 is outside
 * [-3, 3) for x of shape (2, 3, 4)"), an axis named twice, as -1 and 2 say
 * ("reduce_max: axes (2, -1) name axis 2 of x (2, 3, 4) twice").
 */
TL_API tl_t tl_reduce_sum(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims);
TL_API tl_t tl_reduce_mean(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims);
TL_API tl_t tl_reduce_max(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims);
TL_API tl_t tl_reduce_min(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims);

/*
 * tf.reduce_logsumexp: log(sum(exp(x))) over the axes (as tl_reduce_sum's),
 * shifted by the maximum m so large values stay finite. TF's quirk is kept:
 * where m is not finite the shift is 0, so a +inf element gives +inf and a
 * reduction of only -inf gives -inf (not NaN). The gradient is
 * dy · exp(x - result), a softmax over the reduced axes.
 * Errors: as tl_reduce_sum.
 */
TL_API tl_t tl_logsumexp(tl_graph *g, tl_t x, const int *axes, int naxes, bool keepdims);

/*
 * tf.math.argmax / argmin: the index of the largest (smallest) element of x
 * (float32, rank >= 1) along axis (in [-rank, rank)), as output_type TL_I32
 * or TL_I64; the result drops the axis. Ties give the first index, as TF.
 * NaN counts as larger (and smaller) than every number, so the first NaN's
 * index is returned, as numpy (tl_reduce_max returns that NaN). No gradient
 * (TF defines none): the result is an integer tensor.
 * Errors: x not float32, a scalar x, the axis out of range, output_type
 * neither TL_I32 nor TL_I64, an axis longer than INT32_MAX with TL_I32.
 */
TL_API tl_t tl_argmax(tl_graph *g, tl_t x, int axis, tl_dtype output_type);
TL_API tl_t tl_argmin(tl_graph *g, tl_t x, int axis, tl_dtype output_type);

/*
 * tf.nn.softmax and tf.nn.log_softmax along axis (in [-rank, rank), -1 the
 * last) of a float32 x of rank >= 1; same shape. Both subtract the maximum
 * along the axis first, so logits of 1e4 give finite results; a NaN, or an
 * infinite maximum, gives NaN along its row, as TF. Gradients as TF's
 * _SoftmaxGrad ((dy - sum(dy·y))·y) and _LogSoftmaxGrad (dy - exp(y)·sum(dy)).
 * Errors: x not float32, a scalar x, the axis out of range.
 */
TL_API tl_t tl_softmax(tl_graph *g, tl_t x, int axis);
TL_API tl_t tl_log_softmax(tl_graph *g, tl_t x, int axis);

/*
 * Per-example softmax cross-entropy with dense labels,
 * tf.nn.softmax_cross_entropy_with_logits over the last axis: logits
 * (..., C) and float32 labels of the same shape give a loss of shape
 * logits.shape[:-1] (reduce it with tl_mean). label_smoothing s in [0, 1]
 * replaces the labels with labels·(1 - s) + s / C first, as
 * tf.compat.v1.losses.softmax_cross_entropy (which then weights and reduces;
 * here the user does). Gradients, as TF: logits get dloss·(softmax(logits) -
 * labels'), which is the true gradient when each row of labels sums to 1 (TF
 * requires rows that are probability distributions, else "the computation
 * of the gradient will be incorrect"); labels get
 * -dloss·log_softmax(logits)·(1 - s).
 * Errors: logits or labels not float32, a scalar logits, labels of another
 * shape, s outside [0, 1] (TF ignores s <= 0; tpuloop rejects s < 0).
 */
TL_API tl_t tl_softmax_xent_dense(tl_graph *g, tl_t logits, tl_t labels, double label_smoothing);

/*
 * Per-example sparse softmax cross-entropy,
 * tf.nn.sparse_softmax_cross_entropy_with_logits: logits (..., C) float32,
 * labels int32 or int64 of shape logits.shape[:-1], loss of that shape. With
 * label_smoothing 0 it is tl_softmax_xent, bit for bit, for any batch shape
 * and either label type; with s in (0, 1] it is tl_softmax_xent_dense on
 * the labels' one-hot rows smoothed to onehot·(1 - s) + s / C (bit for bit),
 * which TF's sparse op does not offer. Only the logits get a gradient.
 * Errors: logits not float32 or a scalar, labels not of the graph (PREDICT
 * has none), not int32 or int64, or of another shape, s outside [0, 1]. A
 * label outside [0, C) is a data error when the step runs: TL_EINVAL,
 * "sparse_softmax_cross_entropy: example 3 has label 7, which is outside the
 * valid range of [0, 5)" (the example counted over the flattened batch
 * dimensions), as tl_softmax_xent.
 */
TL_API tl_t tl_sparse_softmax_xent(tl_graph *g, tl_t logits, tl_t labels, double label_smoothing);

/*
 * The per-element Huber loss of tf.compat.v1.losses.huber_loss (without its
 * weights and reduction): with x = predictions - labels (both float32 of
 * one shape), 0.5·x² where |x| <= delta, else delta·(|x| - 0.5·delta);
 * same shape. Gradients: predictions get dy·clip(x, -delta, delta), labels
 * its negation.
 * Errors: not float32, different shapes, delta not a positive finite number.
 */
TL_API tl_t tl_huber(tl_graph *g, tl_t predictions, tl_t labels, double delta);

/*
 * tf.math.in_top_k as float32 0/1: predictions (batch, C) float32, targets
 * (batch,) int32 or int64; out[b] = 1 when the prediction of class
 * targets[b] is finite and fewer than k classes have a strictly greater
 * one. So classes tied at the k-th value all count as in the top k, as TF's
 * documentation says. A target outside [0, C) gives 0, as TF's InTopK kernel
 * does today (its documentation only states the non-finite rule; early TF
 * versions raised "targets[i] is out of range" instead). No gradient: the
 * result is a constant for the backward pass.
 * Errors: predictions not float32 (batch, C), targets not int32 or int64
 * (batch,), k < 0 (k 0 gives all 0).
 */
TL_API tl_t tl_in_top_k(tl_graph *g, tl_t predictions, tl_t targets, int k);

/* (end of reductions) */

/* ---- normalisation (ops_norm.c) ---------------------------------------------- */

/*
 * Layer normalisation over the last axis, fused (Keras' LayerNormalization
 * with axis=-1): x (..., D) float32, gamma and beta (D,) float32, y of x's
 * shape,
 *     y = (x - mean)·rsqrt(var + epsilon)·gamma + beta,
 * mean and the biased variance (divided by D) taken over the last axis of
 * each row. The statistics are float64, the variance in two passes (never
 * E[x²] - E[x]²), every sum in a fixed order (src/kernels/norm.h).
 * Gradients reach x, gamma and beta; nothing is kept between the passes (the
 * statistics are recomputed from x).
 * axis must be -1 or rank - 1: normalising over other or several axes is not
 * supported.
 * Errors (in the graph's status): x rank 0, another axis, gamma or beta not
 * (D,) ("layer_norm: gamma has shape (5,), which is not (6,), the last
 * dimension of x (4, 6)"), epsilon negative or not finite, a tensor not
 * float32 or not of the graph.
 */
TL_API tl_t tl_layer_norm_op(tl_graph *g, tl_t x, tl_t gamma, tl_t beta, int axis, double epsilon);

/*
 * The layer: tl_layer_norm_op over the last axis with variables
 * "<name>/gamma" (ones) and "<name>/beta" (zeros) of shape (D,), Keras'
 * names. Keras' default epsilon is 1e-3 (PyTorch's LayerNorm: 1e-5).
 * Errors: as tl_layer_norm_op, and a name too long for the variables.
 */
TL_API tl_t tl_layer_norm(tl_graph *g, tl_t x, double epsilon, const char *name);

/*
 * Batch normalisation, channels last (Keras' BatchNormalization, axis=-1;
 * TF's FusedBatchNorm in NHWC): x (..., C) float32 of rank >= 1 normalised
 * per channel over every other axis (batch, height, width); gamma, beta,
 * moving_mean and moving_variance (C,) float32; y of x's shape,
 *     y = (x - mean)·rsqrt(var + epsilon)·gamma + beta.
 *
 * training true (Keras' training=True): mean and var are the batch's, over
 * the n = size / C rows, var the biased variance (divided by n), computed
 * in float64 in two passes. The gradients to x, gamma and beta go through
 * the batch statistics. The step also moves the statistics, Keras' rule
 *     moving ← moving·momentum + batch_stat·(1 - momentum),
 * for the mean and for the variance; the moving variance takes the BIASED
 * batch variance, as Keras 3 (TF1's fused batch norm fed it the unbiased
 * one, n / (n - 1) times larger). moving_mean and moving_variance must be
 * state variables (tl_state_variable), each updated by one training
 * batch_norm of the graph. The update is made in the backward pass (the
 * change goes to the runtime, which averages it over the replicas and adds
 * it, program.h), so it happens in TRAIN steps whose loss depends on y; a
 * batch norm whose output the loss does not use moves nothing.
 * (Keras computes the batch statistics in float32 by its own formula; the
 * float64 two-pass values here agree up to rounding, and keep their digits
 * when |mean| >> std, where E[x²] - E[x]² loses them.)
 *
 * training false (Keras' training=False, a frozen batch norm): mean and var
 * are moving_mean and moving_variance, read, never updated; gradients reach
 * x, gamma and beta through the fixed statistics, and the statistics too
 * when they are tensors that take one (the layer's state variables do not).
 * Any float32 (C,) tensors serve as statistics.
 *
 * Errors (in the graph's status): x rank 0; gamma, beta or a statistic not
 * (C,) ("batch_norm: gamma has shape (3,), which is not (4,), the channels
 * of x (8, 4)"); momentum not in [0, 1]; epsilon negative or not finite; in
 * training, a statistic that is not a state variable, one variable as both,
 * or a state variable another training batch_norm of the graph already
 * updates ("batch_norm: state variable bn/moving_mean is already updated by
 * another training batch_norm of this graph; one update per step").
 */
TL_API tl_t tl_batch_norm_op(tl_graph *g, tl_t x, tl_t gamma, tl_t beta, tl_t moving_mean, tl_t moving_variance,
                             double momentum, double epsilon, bool training);

/*
 * The layer (Keras' BatchNormalization, axis=-1): variables "<name>/gamma"
 * (ones) and "<name>/beta" (zeros), state variables "<name>/moving_mean"
 * (zeros) and "<name>/moving_variance" (ones), all (C,), Keras' names, so a
 * checkpoint reads like TensorFlow's. Training in a TRAIN graph
 * (g's mode), the moving statistics in EVAL and PREDICT, which share them by
 * name. Keras' defaults: momentum 0.99, epsilon 1e-3 (PyTorch's BatchNorm
 * weighs the new value by its momentum 0.1, i.e. 0.9 here, uses epsilon
 * 1e-5, and feeds its running variance the unbiased batch variance).
 * Errors: as tl_batch_norm_op (calling it twice with one name in a TRAIN
 * graph is the two-updates error), and a name too long for the variables.
 */
TL_API tl_t tl_batch_norm(tl_graph *g, tl_t x, double momentum, double epsilon, const char *name);

/* (end of normalisation) */

/* ---- linear algebra (ops_linalg.c) ------------------------------------------- */

/*
 * tf.linalg.matmul on tensors of rank >= 2 (TensorFlow's BatchMatMulV2):
 * a (..., M, K) and b (..., K, N) float32, or a (..., K, M) when adj_a and b
 * (..., N, K) when adj_b (the adjoint of a real matrix is its transpose). The
 * last two dimensions are the matrices; the leading "batch" dimensions
 * broadcast as NumPy's: aligned on the right, the shorter padded with 1s on
 * the left, each pair equal or one of them 1. The result is (batch..., M, N)
 * with the broadcast batch dimensions, rank max(rank a, rank b):
 *
 *     (8, 4, 16, 32) x (32, 64)       -> (8, 4, 16, 64)
 *     (8, 1, 16, 32) x (4, 32, 16)    -> (8, 4, 16, 16)
 *     q (B, H, S, D), k (B, H, S, D), adj_b -> scores (B, H, S, S)   // Q·Kᵀ
 *
 * Each output matrix is one GEMM, in row-major order of the batch, so two
 * 2-D operands give tl_matmul's bits. The gradient of an operand repeated
 * along a broadcast dimension is summed over it, in that order. As in
 * TensorFlow, a rank-1 operand is an error (np.matmul would promote it), and
 * only the batch dimensions broadcast, never M, K or N.
 *
 * Errors (in the graph's status): a or b not a float32 tensor of the graph,
 * a rank below 2 ("batch_matmul: a has shape (5,), rank 1; the operands need
 * rank >= 2"), inner dimensions that differ ("batch_matmul: inner dimensions
 * differ: a (2, 3, 4) gives K = 4, b (2, 5, 6)^T gives K = 6"), batch
 * dimensions that do not broadcast ("batch_matmul: b (4, 32, 16) has batch
 * dimensions (4,), which do not broadcast with a's (8, 3) of (8, 3, 16, 32)").
 */
TL_API tl_t tl_batch_matmul(tl_graph *g, tl_t a, tl_t b, bool adj_a, bool adj_b);

/*
 * tf.einsum on 1 to 3 float32 operands xs[0..n-1] ("operand k" is xs[k]):
 * the equation names each operand's axes by labels, one letter per axis
 * (a-z and A-Z, case-sensitive; spaces are ignored), terms separated by
 * commas. The output's labels follow "->"; without it (implicit mode) they
 * are the labels that appear exactly once, sorted (A-Z before a-z, as
 * tf.einsum). y[out] = the sum, over every label not in the output, of the
 * operands' products:
 *
 *     tl_einsum(g, "bhqd,bhkd->bhqk", (tl_t[]){q, k}, 2);   // scores Q·Kᵀ
 *     tl_einsum(g, "bhqk,bhkd->bhqd", (tl_t[]){p, v}, 2);   // P·V
 *     tl_einsum(g, "ij->ji", &x, 1);                         // transpose
 *     tl_einsum(g, "ij->", &x, 1);                           // sum of all
 *     tl_einsum(g, "bi,bi->b", (tl_t[]){x, y}, 2);           // row dots
 *
 * Traced, not a kernel: a label that only one operand has and the output
 * does not is summed first (tl_reduce_sum), then the operands are multiplied
 * left to right, each pair as one tl_batch_matmul (its shared labels kept
 * for the output or a later operand are the batch, the others contracted;
 * a pair with nothing to contract is a broadcast tl_mul), with tl_transpose
 * and tl_reshape around it where the axes need it. Gradients are those ops'
 * gradients; an equation that changes nothing ("ij->ij") returns the operand
 * itself.
 *
 * Not supported: the ellipsis ("...") for broadcast dimensions; a label
 * repeated within one operand ("ii->i", TF's diagonals); more than 3
 * operands. Every label has one size in all operands (TF's rule too: named
 * dimensions do not broadcast). Folding left to right, the product of the
 * first two of three operands may need more than TL_MAX_RANK axes even when
 * the result does not ("abcde,fghij,abcdefgh->ij"); that is an error.
 *
 * Errors (in the graph's status): n outside 1..3, xs NULL, an operand not a
 * float32 tensor of the graph ("einsum: operand 1 must be float32"), the
 * equation NULL, a character not a label, ',', '->' or a space, an ellipsis,
 * more than one "->", a term count that differs from n, "einsum: operand 1
 * has rank 3 but the equation gives it 2 labels 'ij'", a label twice in one
 * operand, "einsum: label 'j' has size 3 in operand 0 (2, 3) but 4 in
 * operand 1 (4, 5)", an output label twice or in no operand, a result or
 * intermediate product of rank over TL_MAX_RANK.
 */
TL_API tl_t tl_einsum(tl_graph *g, const char *equation, const tl_t *xs, int n);


/* (end of linear algebra) */

/* ---- vision, NHWC (ops_vision.c) --------------------------------------------- */

/*
 * Images are float32 (batch, height, width, channels), TensorFlow's default
 * NHWC. Windows — a convolution's filter, a pool — slide by strides and are
 * placed by TF's padding rule on each spatial axis, with the dilated window
 * keff = (k - 1)·dilation + 1:
 *   TL_PAD_VALID  no padding; out = ceil((in - keff + 1) / stride), an error
 *                 when keff > in;
 *   TL_PAD_SAME   out = ceil(in / stride); pad_total = max((out - 1)·stride +
 *                 keff - in, 0) zeros, pad_total / 2 before and the rest
 *                 after — the odd one goes after (bottom, right), as TF.
 * The gradient ops run on oneDNN (tpuloop's own im2col + GEMM where that is
 * faster) with one thread per device: the same step gives the same bits.
 *
 * A small CNN's layers:
 *
 *     int64_t fshape[4] = {3, 3, 1, 16};                           // HWIO
 *     tl_t f = tl_variable(g, "conv/kernel", fshape, 4, (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0});
 *     tl_conv2d_attrs same = {.padding = TL_PAD_SAME};             // stride 1, groups 1
 *     tl_t h = tl_relu(g, tl_conv2d(g, images, f, &same));         // (batch, 28, 28, 16)
 *     h = tl_max_pool2d(g, h, (int64_t[2]){2, 2}, (int64_t[2]){2, 2}, TL_PAD_VALID);   // (batch, 14, 14, 16)
 *     h = tl_global_avg_pool2d(g, h, false);                       // (batch, 16)
 */
typedef enum { TL_PAD_VALID = 0, TL_PAD_SAME = 1 } tl_padding;

typedef enum {
    TL_RESIZE_BILINEAR = 0, /* tf.image.ResizeMethod.BILINEAR, tf.image.resize's default */
    TL_RESIZE_NEAREST = 1   /* tf.image.ResizeMethod.NEAREST_NEIGHBOR */
} tl_resize_method;

/* A convolution's attributes; zero fields take the defaults, so
 * `(tl_conv2d_attrs){.padding = TL_PAD_SAME}` is stride 1, no dilation, one
 * group. A NULL attrs is all defaults (VALID). */
typedef struct tl_conv2d_attrs {
    int64_t strides[2];   /* (h, w), >= 1; 0 means 1 */
    int64_t dilations[2]; /* (h, w), >= 1; 0 means 1 */
    tl_padding padding;
    int64_t groups;       /* >= 1, dividing x's channels and the filter's outputs; 0 means 1 */
} tl_conv2d_attrs;

/*
 * tf.nn.conv2d(x, filter, strides, padding, dilations) in NHWC, and Keras'
 * Conv2D(groups=...): x (batch, h, w, c), filter (kh, kw, c / groups, o) —
 * TF's HWIO — to (batch, oh, ow, o). With groups g, output channel q sees
 * input channels [q / (o/g) · c/g, +c/g). No bias: add one with tl_bias_add.
 * Gradients with respect to x and the filter.
 * TF differences: Keras refuses strides > 1 together with dilations > 1;
 * tpuloop computes the strided dilated convolution.
 * Errors (in the graph's status): x or filter not 4-D float32, the filter's
 * input channels other than c / groups, groups dividing neither c nor o,
 * strides, dilations or groups < 0, an unknown padding, VALID with a window
 * larger than the input.
 */
TL_API tl_t tl_conv2d(tl_graph *g, tl_t x, tl_t filter, const tl_conv2d_attrs *attrs);

/*
 * tf.nn.depthwise_conv2d: x (batch, h, w, c), filter (kh, kw, c, m) to
 * (batch, oh, ow, c·m), output channel k·m + j being input channel k under
 * filter[:, :, k, j] — a grouped convolution with c groups. attrs' groups
 * must be 0 or 1. TF differences: TF asks for strides 1 when dilated;
 * tpuloop computes the strided dilated convolution.
 * Errors: as tl_conv2d, and the filter's third dimension other than c.
 */
TL_API tl_t tl_depthwise_conv2d(tl_graph *g, tl_t x, tl_t filter, const tl_conv2d_attrs *attrs);

/*
 * tf.nn.max_pool2d / tf.nn.avg_pool2d in NHWC: windows of ksize (h, w)
 * strides (h, w) apart, per channel, to (batch, oh, ow, c). Padding never
 * counts: max takes the window's elements inside the image, and avg divides
 * by their number (so a SAME edge window of 2 of its 4 elements is their
 * mean). max_pool's gradient goes, as TensorFlow's CPU MaxPoolGrad, to the
 * first maximum of each window in row-major order (ties: the top-left one);
 * avg_pool's spreads evenly over the counted elements.
 * Errors: x not 4-D float32, ksize or strides < 1, an unknown padding,
 * VALID with a window larger than the input.
 */
TL_API tl_t tl_max_pool2d(tl_graph *g, tl_t x, const int64_t ksize[2], const int64_t strides[2],
                          tl_padding padding);
TL_API tl_t tl_avg_pool2d(tl_graph *g, tl_t x, const int64_t ksize[2], const int64_t strides[2],
                          tl_padding padding);

/* The mean over height and width, Keras' GlobalAveragePooling2D:
 * (batch, c), or (batch, 1, 1, c) with keepdims. Errors: x not 4-D float32. */
TL_API tl_t tl_global_avg_pool2d(tl_graph *g, tl_t x, bool keepdims);

/*
 * tf.image.resize(x, (out_h, out_w), method) in TF2 (half_pixel_centers,
 * no align_corners, no antialias) of x (batch, h, w, c) to (batch, out_h,
 * out_w, c), with its gradient. Scales and sample positions are float32 as
 * TF's CPU kernels compute them: nearest takes source index
 * min(floor((i + 0.5)·in/out), in - 1); bilinear samples at (i + 0.5)·in/out
 * - 0.5 between its two clamped neighbours. Errors: x not 4-D float32,
 * out_h or out_w < 1, an unknown method.
 */
TL_API tl_t tl_resize(tl_graph *g, tl_t x, int64_t out_h, int64_t out_w, tl_resize_method method);

/* (end of vision) */

/* ---- layers ------------------------------------------------------------------ */

/* x·W + b with an activation; variables "<name>/kernel" (Glorot uniform) and
 * "<name>/bias" (zeros), as Keras' Dense. */
TL_API tl_t tl_dense(tl_graph *g, tl_t x, int64_t units, tl_activation act, const char *name);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_GRAPH_H */

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
    tl_t logits;      /* (batch, classes): predictions and the built-in metrics derive from it */
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

/* (end of shapes) */

/* ---- reductions, softmax, losses and metrics (ops_reduce.c) ------------------ */

/* (end of reductions) */

/* ---- normalisation (ops_norm.c) ---------------------------------------------- */

/* (end of normalisation) */

/* ---- linear algebra (ops_linalg.c) ------------------------------------------- */

/* (end of linear algebra) */

/* ---- vision, NHWC (ops_vision.c) --------------------------------------------- */

/* (end of vision) */

/* ---- layers ------------------------------------------------------------------ */

/* x·W + b with an activation; variables "<name>/kernel" (Glorot uniform) and
 * "<name>/bias" (zeros), as Keras' Dense. */
TL_API tl_t tl_dense(tl_graph *g, tl_t x, int64_t units, tl_activation act, const char *name);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_GRAPH_H */

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

/* (end of element-wise math) */

/* ---- shapes, gathers and indices (ops_shape.c) ------------------------------- */

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

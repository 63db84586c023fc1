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

/* (end of reductions) */

/* ---- normalisation (ops_norm.c) ---------------------------------------------- */

/* (end of normalisation) */

/* ---- linear algebra (ops_linalg.c) ------------------------------------------- */

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

/*
 * tpuloop/models.h — built-in model_fns, written only against the public API
 * (graph.h), as a user would write their own: an MLP classifier, a small
 * ResNet (cnn) and DLRM.
 *
 *     tl_estimator_options o;
 *     tl_estimator_options_init(&o);
 *     o.model_fn = tl_model_mlp;
 *     o.user = (void *)&tl_config_get(cfg)->model;   // hidden_units, activation, dropout
 *
 *     tl_dlrm_config dlrm = {.num_dense = 13, .num_bottom = 3, .bottom = {512, 256, 64},
 *                            .num_top = 2, .top = {512, 256}, .num_features = 26};
 *     for (int f = 0; f < 26; f++)
 *         dlrm.dims[f] = 64;                           // = bottom's last width
 *     o.model_fn = tl_model_dlrm;
 *     o.user = &dlrm;                                  // borrowed: keep it while the estimator lives
 */
#ifndef TPULOOP_MODELS_H
#define TPULOOP_MODELS_H

#include "tpuloop/config.h"
#include "tpuloop/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A multilayer perceptron classifier: the features flattened to (batch, D),
 * then one Dense layer per entry of hidden_units with the activation (and
 * dropout in training), then Dense(num_classes) logits and the mean sparse
 * softmax cross-entropy. Layers are named as Keras names them: dense,
 * dense_1, ... user is a const tl_model_config * and its num_classes comes
 * from params_json's "num_classes" (default 10).
 */
TL_API tl_status tl_model_mlp(tl_graph *g, const tl_model_args *args, tl_model_spec *spec, void *user);

/*
 * A small ResNet image classifier (He et al. 2016's basic blocks), NHWC as
 * TensorFlow, the model of `configs/cnn_fashion_mnist.json`:
 *
 *     x     = features, (batch, H, W) → (batch, H, W, 1), or (batch, H, W, C)
 *     h     = relu(bn(conv3x3(x, filters[0])))                       "stem"
 *     stage s = 1..S: one basic block, filters[s-1], stride 1 for s = 1 else 2:
 *         y = bn(conv3x3(relu(bn(conv3x3(h, stride))), 1))          "block<s>/a", "block<s>/b"
 *         h = relu(y + shortcut), shortcut = h, or bn(conv1x1(h, stride)) when
 *             the shape changes                                      "block<s>/shortcut"
 *     logits = Dense(num_classes)(global_avg_pool(h))                 "dense"
 *     loss   = mean sparse softmax cross-entropy (not in PREDICT)
 *
 * Convolutions are SAME-padded without bias (TensorFlow's asymmetric SAME
 * for stride 2), kernels "<layer>/conv/kernel" (KH, KW, in, out) Glorot
 * uniform as Keras' Conv2D; each batch norm "<layer>/bn/{gamma, beta,
 * moving_mean, moving_variance}" with epsilon 1e-3. params_json may set
 * "num_classes" (default 10), "filters" (default [16, 32, 64]: the stages)
 * and "batch_norm_momentum" (default 0.99). user is unused.
 * Errors (TL_EINVAL, in the graph's status): features of rank other than 3
 * or 4, a params value out of range ("cnn: params filters[1] must be an int
 * in [1, 65536], got 0").
 */
TL_API tl_status tl_model_cnn(tl_graph *g, const tl_model_args *args, tl_model_spec *spec, void *user);

/*
 * DLRM (Naumov et al. 2019), the click-through model of TPUEmbedding's
 * examples, with the dot interaction:
 *
 *     x      = features[:, :num_dense]                     (batch, num_dense)
 *     x      = bottom MLP(x), Dense + ReLU per layer        (batch, d), d = bottom[num_bottom - 1]
 *     e_f    = tl_embedding_activations(f, (batch, d))      f = 0 .. num_features - 1
 *     z      = tl_pairwise_dot(stack [x, e_0, ..., e_F-1])  (batch, (F+1)F/2), F = num_features
 *     logits = top MLP([x, z]), Dense + ReLU per layer, then Dense(1)   (batch, 1)
 *     loss   = mean sigmoid cross-entropy of logits and labels (not in PREDICT)
 *
 * The bottom MLP's last layer has a ReLU too, as the paper and the PyTorch
 * reference; the logit layer has none. The features are the dense inputs
 * only: the embedding ids travel typed beside them, to the engine
 * (estimator.h), and the activations come from it. With num_features 0
 * there is no interaction and the top MLP sees x.
 * labels are int32 (batch,) of 0/1 (tl_sigmoid_xent's binary form) or
 * float32 (batch, 1). spec->logits and spec->predictions are the logits.
 *
 * Variables, as Keras names Dense layers in a scope: bottom_mlp/dense,
 * bottom_mlp/dense_1, ..., top_mlp/dense, top_mlp/dense_1, ..., and the logit
 * layer top_mlp/logits; each with /kernel (in, units) and /bias (units).
 *
 * user is a const tl_dlrm_config *. Errors (TL_EINVAL, in the graph's status,
 * naming the field, its value and the allowed range): user NULL; features not
 * of rank 2; num_features outside [0, TL_DLRM_MAX_FEATURES]; num_bottom
 * outside [1, TL_DLRM_MAX_LAYERS]; num_top outside [0, TL_DLRM_MAX_LAYERS];
 * num_dense outside [0, the features' width]; a width or dim < 1; a feature
 * whose dim differs from the bottom MLP's last width ("dlrm: bottom_mlp's
 * last width 64 must equal feature 3's embedding dim 16"). In TRAIN and EVAL,
 * an int32 label other than 0 or 1 fails the step (tl_sigmoid_xent).
 */
#define TL_DLRM_MAX_LAYERS 16
#define TL_DLRM_MAX_FEATURES 64
typedef struct tl_dlrm_config {
    int num_dense;                          /* the first num_dense columns of features are the dense inputs, >= 1;
                                               0: all of them (the features' width) */
    int num_bottom;                         /* [1, TL_DLRM_MAX_LAYERS] */
    int64_t bottom[TL_DLRM_MAX_LAYERS];     /* (num_bottom) bottom MLP widths; the last equals every feature's dim */
    int num_top;                            /* [0, TL_DLRM_MAX_LAYERS] */
    int64_t top[TL_DLRM_MAX_LAYERS];        /* (num_top) top MLP hidden widths, before Dense(1) */
    int num_features;                       /* embedding features 0 .. num_features - 1, [0, TL_DLRM_MAX_FEATURES] */
    int dims[TL_DLRM_MAX_FEATURES];         /* (num_features) each feature's embedding dim */
} tl_dlrm_config;

TL_API tl_status tl_model_dlrm(tl_graph *g, const tl_model_args *args, tl_model_spec *spec, void *user);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_MODELS_H */

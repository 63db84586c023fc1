/*
 * tpuloop/models.h — built-in model_fns, written only against the public API
 * (graph.h), as a user would write their own: an MLP classifier, DLRM and
 * DCN-v2.
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
 *
 *     tl_dcn_config dcn = {.num_cross = 3, .num_deep = 2, .deep = {512, 256}, .num_features = 26};
 *     for (int f = 0; f < 26; f++)
 *         dcn.dims[f] = 16;                            // any dims: x0 is 13 + 26 * 16 wide
 *     o.model_fn = tl_model_dcn;
 *     o.user = &dcn;
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

/*
 * DCN-v2 (Wang et al. 2021, "DCN V2"), the stacked structure with full-rank
 * cross layers, as TF Recommenders' tfrs.layers.dcn.Cross builds them:
 *
 *     x0     = [features[:, :num_dense], e_0, ..., e_F-1]    (batch, D), D = num_dense + Σ dims
 *     e_f    = tl_embedding_activations(f, (batch, dims[f]))  f = 0 .. num_features - 1
 *     x_l+1  = x0 ⊙ (x_l W_l + b_l) + x_l                    l = 0 .. num_cross - 1, W_l (D, D)
 *     h      = deep network(x_num_cross), Dense + ReLU per layer
 *     logits = Dense(1)(h)                                    (batch, 1)
 *     loss   = mean sigmoid cross-entropy of logits and labels (not in PREDICT)
 *
 * Cross(projection_dim=None, diag_scale=0, use_bias=True): x0 * dense(x) + x.
 * Embedding features may have different dims (unlike DLRM's, which must
 * equal the bottom MLP's width). The features are the dense inputs only; the
 * embedding ids travel typed beside them, to the engine (estimator.h). With
 * num_cross 0 the model is the deep network over x0, with num_deep 0 the
 * logit reads the cross network directly. Labels and outputs as DLRM's:
 * int32 (batch,) of 0/1 or float32 (batch, 1); spec->logits and
 * spec->predictions are the logits.
 *
 * Variables, as Keras names the layers: cross/dense, cross_1/dense, ... (one
 * per cross layer; /kernel (D, D) truncated normal with stddev 0.05, Keras'
 * "truncated_normal" and Cross's default, /bias (D) zeros), deep/dense,
 * deep/dense_1, ... and logits (/kernel (in, units) Glorot uniform, /bias
 * (units) zeros, as Keras' Dense).
 *
 * user is a const tl_dcn_config *. Errors (TL_EINVAL, in the graph's status,
 * naming the field, its value and the allowed range): user NULL; features
 * not of rank 2; num_features outside [0, TL_DCN_MAX_FEATURES]; num_cross or
 * num_deep outside [0, TL_DCN_MAX_LAYERS] ("dcn: num_cross must be in [0,
 * 16], got 17"); num_dense outside [0, the features' width]; a deep width or
 * a dim < 1. In TRAIN and EVAL, an int32 label other than 0 or 1 fails the
 * step (tl_sigmoid_xent).
 */
#define TL_DCN_MAX_LAYERS 16
#define TL_DCN_MAX_FEATURES 64
typedef struct tl_dcn_config {
    int num_dense;                          /* the first num_dense columns of features are the dense inputs, >= 1;
                                               0: all of them (the features' width) */
    int num_cross;                          /* cross layers, [0, TL_DCN_MAX_LAYERS] */
    int num_deep;                           /* [0, TL_DCN_MAX_LAYERS] */
    int64_t deep[TL_DCN_MAX_LAYERS];        /* (num_deep) deep network widths, before Dense(1) */
    int num_features;                       /* embedding features 0 .. num_features - 1, [0, TL_DCN_MAX_FEATURES] */
    int dims[TL_DCN_MAX_FEATURES];          /* (num_features) each feature's embedding dim */
} tl_dcn_config;

TL_API tl_status tl_model_dcn(tl_graph *g, const tl_model_args *args, tl_model_spec *spec, void *user);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_MODELS_H */

/*
 * tpuloop/models.h — built-in model_fns, written only against the public API
 * (graph.h), as a user would write their own: an MLP classifier, a small
 * ResNet (cnn), a Transformer encoder classifier, DLRM and DCN-v2.
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
 *     loss   = mean sparse softmax cross-entropy, labels smoothed by
 *              label_smoothing as Keras' (not in PREDICT)
 *
 * Convolutions are SAME-padded without bias (TensorFlow's asymmetric SAME
 * for stride 2), kernels "<layer>/conv/kernel" (KH, KW, in, out) Glorot
 * uniform as Keras' Conv2D; each batch norm "<layer>/bn/{gamma, beta,
 * moving_mean, moving_variance}" with epsilon 1e-3. params_json may set
 * "num_classes" (default 10), "filters" (default [16, 32, 64]: the stages),
 * "batch_norm_momentum" (default 0.99) and "label_smoothing" (default 0:
 * tl_softmax_xent exactly; tl_sparse_softmax_xent's s). user is unused.
 * Errors (TL_EINVAL, in the graph's status): features of rank other than 3
 * or 4, a params value out of range ("cnn: params filters[1] must be an int
 * in [1, 65536], got 0").
 */
TL_API tl_status tl_model_cnn(tl_graph *g, const tl_model_args *args, tl_model_spec *spec, void *user);

/*
 * A Transformer encoder classifier over token ids (Vaswani et al. 2017, with
 * BERT's post-LN layers and learned positions), the model of
 * configs/transformer_sequences.json and of bench/peers/transformer_torch.py:
 *
 *     ids    = cast(features, int32)                    (batch, S): features hold token ids
 *     x      = gather(embedding/embeddings, ids)        (batch, S, d)
 *              + position_embedding/embeddings          (S, d), broadcast over the batch
 *     for i in 0 .. L-1:                                per token, (batch * S, d)
 *       q, k, v = Dense(d)(x) each, split into h heads  (batch, h, S, d/h)
 *       a      = softmax(q kᵀ / sqrt(d/h)) v            softmax over the keys
 *       x      = LayerNorm(x + Dense(d)(heads merged))  epsilon 1e-3
 *       x      = LayerNorm(x + Dense(d)(gelu(Dense(ff)(x))))   exact (erf) gelu
 *     pooled = mean of x over the sequence              (batch, d)
 *     logits = Dense(num_classes)(pooled)               (batch, C)
 *     loss   = mean sparse softmax cross-entropy of logits and labels (not in PREDICT)
 *
 * There is no mask and no dropout: every position of every sequence attends
 * to every other. The query is scaled by 1/sqrt(d/h) before the product, as
 * Keras' MultiHeadAttention does. spec->logits and spec->predictions are the
 * logits.
 *
 * Variables (Keras' names; each Dense has /kernel (in, units) Glorot uniform
 * and /bias (units) zeros; each LayerNorm /gamma (d) ones and /beta (d)
 * zeros; the embeddings U(-0.05, 0.05) as Keras' Embedding):
 *
 *     embedding/embeddings               (V, d)
 *     position_embedding/embeddings      (S, d)
 *     layer_<i>/attention/query          Dense d -> d     (and key, value, output)
 *     layer_<i>/attention_norm           LayerNorm d
 *     layer_<i>/ffn/dense                Dense d -> ff
 *     layer_<i>/ffn/dense_1              Dense ff -> d
 *     layer_<i>/ffn_norm                 LayerNorm d
 *     logits                             Dense d -> C
 *
 * The sizes come from params_json, each an int: "d_model" d (32, in
 * [1, 65536]), "num_heads" h (2, in [1, d], dividing d), "num_layers" L (2, in
 * [0, 64]), "d_ff" ff (4 d, in [1, 1048576]), "vocab_size" V (in [2, 16777216];
 * default: the data's, else 16) and "num_classes" C (V, in [2, 16777216]).
 * user is NULL or a const tl_transformer_data * telling what the data
 * decides: its vocab_size is V's default and the least V allowed, since the
 * data's ids reach vocab_size - 1.
 *
 * Errors (TL_EINVAL, in the graph's status, naming the param, its value and
 * what is allowed): a param that is not an int in its range ("transformer:
 * params num_layers must be an int in [0, 64], got 100"); d_model not a
 * multiple of num_heads ("transformer: params d_model 30 is not divisible by
 * num_heads 4"); vocab_size below the data's; features not of rank 2
 * (batch, sequence_length); user's vocab_size outside [0, 16777216]. A token
 * id outside [0, V) fails the step, as tl_gather does.
 */
typedef struct tl_transformer_data {
    int64_t vocab_size; /* the data's token ids are in [0, vocab_size); 0: unknown (params' or 16) */
} tl_transformer_data;

TL_API tl_status tl_model_transformer(tl_graph *g, const tl_model_args *args, tl_model_spec *spec, void *user);

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

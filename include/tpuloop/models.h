/*
 * tpuloop/models.h — built-in model_fns, written only against the public API
 * (graph.h), as a user would write their own.
 *
 *     tl_estimator_options o;
 *     tl_estimator_options_init(&o);
 *     o.model_fn = tl_model_mlp;
 *     o.user = (void *)&tl_config_get(cfg)->model;   // hidden_units, activation, dropout
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

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_MODELS_H */

"""tpuloop.nn: tf.nn."""
from ._ops import (avg_pool, avg_pool2d, bias_add, conv2d, depthwise_conv2d, dropout, elu, embedding_lookup,
                   gelu, in_top_k, l2_loss, leaky_relu, log_softmax, max_pool, max_pool2d, moments, pairwise_dot,
                   relu, relu6, sigmoid, sigmoid_cross_entropy_with_logits, silu, softmax,
                   softmax_cross_entropy_with_logits, softplus, sparse_softmax_cross_entropy_with_logits, swish,
                   tanh)

__all__ = ["avg_pool", "avg_pool2d", "bias_add", "conv2d", "depthwise_conv2d", "dropout", "elu", "embedding_lookup",
           "gelu", "in_top_k", "l2_loss", "leaky_relu", "log_softmax", "max_pool", "max_pool2d", "moments",
           "pairwise_dot", "relu", "relu6", "sigmoid", "sigmoid_cross_entropy_with_logits", "silu", "softmax",
           "softmax_cross_entropy_with_logits", "softplus", "sparse_softmax_cross_entropy_with_logits", "swish",
           "tanh"]

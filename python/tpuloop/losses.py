"""tpuloop.losses: tf.compat.v1.losses. With the default weights (1.0) and
reduction SUM_BY_NONZERO_WEIGHTS each is the mean over the elements."""
from . import _ops
from ._graph import _graph_of, cast, convert_to_tensor, int32, record
from ._lib import lib


class Reduction:
    """tf.compat.v1.losses.Reduction (CrossShardOptimizer's reduction too)."""
    NONE = "none"
    SUM = "weighted_sum"
    MEAN = "weighted_mean"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"


def _reduce(per_example, weights, reduction):
    if weights != 1.0:
        per_example = per_example * weights
    if reduction == Reduction.NONE:
        return per_example
    if reduction == Reduction.SUM:
        return _ops.reduce_sum(per_example)
    g = _graph_of(per_example)
    return record(g, "mean", lib.tl_mean(g.ptr, per_example.id))


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None, loss_collection=None,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    g = _graph_of(logits)
    per = record(g, "sparse_softmax_cross_entropy", lib.tl_softmax_xent(g.ptr, logits.id, cast(labels, int32).id))
    return _reduce(per, weights, reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None, loss_collection=None,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    g = _graph_of(logits)
    per = record(g, "softmax_cross_entropy", lib.tl_softmax_xent_dense(g.ptr, logits.id,
                                                                       convert_to_tensor(onehot_labels).id,
                                                                       float(label_smoothing)))
    return _reduce(per, weights, reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=None, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    if label_smoothing:
        raise ValueError("sigmoid_cross_entropy: label_smoothing is not supported by tpuloop, got %r"
                         % (label_smoothing,))
    per = _ops.sigmoid_cross_entropy_with_logits(labels=multi_class_labels, logits=logits)
    return _reduce(per, weights, reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=None,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    d = _ops.square(predictions - labels)
    return _reduce(d, weights, reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None, loss_collection=None,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    g = _graph_of(predictions)
    per = record(g, "huber_loss", lib.tl_huber(g.ptr, predictions.id, convert_to_tensor(labels).id, float(delta)))
    return _reduce(per, weights, reduction)


def absolute_difference(labels, predictions, weights=1.0, scope=None, loss_collection=None,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    return _reduce(_ops.abs(predictions - labels), weights, reduction)

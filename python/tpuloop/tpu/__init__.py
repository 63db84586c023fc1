"""tpuloop.tpu: tf.compat.v1.tpu's CrossShardOptimizer, and experimental.embedding."""
from ..losses import Reduction
from ..train import Optimizer


class CrossShardOptimizer(Optimizer):
    """tf.compat.v1.tpu.CrossShardOptimizer: the gradients of the replicas
    are reduced (MEAN by default, or SUM) before opt's update, which every
    replica applies to its chunk of the parameters."""

    def __init__(self, opt, reduction=Reduction.MEAN, name="CrossShardOptimizer", group_assignment=None):
        if reduction not in (Reduction.SUM, Reduction.MEAN):
            raise ValueError("Unsupported reduction: %s." % reduction)
        if not isinstance(opt, Optimizer):
            raise TypeError("CrossShardOptimizer wraps a tpuloop.train optimizer, got %r" % (type(opt).__name__,))
        if group_assignment is not None:
            raise ValueError("CrossShardOptimizer: group_assignment is not supported by tpuloop")
        self._opt = opt
        self._reduction = reduction
        self.name = name
        self.learning_rate = opt.learning_rate

    def config(self):
        return self._opt.config()

    def reduce_sum(self):
        return self._reduction == Reduction.SUM

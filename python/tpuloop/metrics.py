"""tpuloop.metrics: tf.compat.v1.metrics for eval_metrics' metric_fn.

TPUEstimator runs metric_fn on the host over the tensors the devices
outfeed; tpuloop calls it once per evaluation step with that step's NumPy
arrays (concatenated over the replicas). Each metric function call keeps a
running total by its position in metric_fn — as TensorFlow's metric
variables accumulate over the update ops —, and returns (value, update_op)
where value is the total so far. The evaluation's result is each metric's
value after the last step.
"""
import threading

import numpy as np

_ctx = threading.local()


class _Accumulators:
    def __init__(self):
        self.accs = []
        self.pos = 0


def _begin(accs):
    _ctx.current = accs
    accs.pos = 0


def _end():
    _ctx.current = None


class _Metric:
    """A running metric; .result() its value so far."""

    def result(self):
        raise NotImplementedError


def _get(cls, *args):
    accs = getattr(_ctx, "current", None)
    if accs is None:
        raise RuntimeError("tpuloop.metrics functions run inside an eval_metrics metric_fn that a TPUEstimator "
                           "calls on the host")
    if accs.pos == len(accs.accs):
        accs.accs.append(cls())
    m = accs.accs[accs.pos]
    if not isinstance(m, cls):
        raise RuntimeError("metric_fn called its metrics in another order than at the first step")
    accs.pos += 1
    m.update(*args)
    return MetricOp(m)


class MetricOp(tuple):
    """(value, update_op), as TensorFlow's metric functions return."""

    def __new__(cls, metric):
        self = super().__new__(cls, (metric, None))
        self.metric = metric
        return self


def _weights(w, n):
    return np.ones(n) if w is None else np.broadcast_to(np.asarray(w, np.float64).reshape(-1), (n,))


class _Mean(_Metric):
    def __init__(self):
        self.total, self.count = 0.0, 0.0

    def update(self, values, weights):
        v = np.asarray(values, np.float64).reshape(-1)
        w = _weights(weights, v.size)
        self.total += float(np.sum(v * w))
        self.count += float(np.sum(w))

    def result(self):
        return self.total / self.count if self.count else 0.0


class _Accuracy(_Mean):
    def update(self, labels, predictions, weights):
        lab = np.asarray(labels).reshape(-1)
        pred = np.asarray(predictions).reshape(-1)
        if lab.shape != pred.shape:
            raise ValueError("accuracy: labels has %d values, predictions %d" % (lab.size, pred.size))
        super().update((lab == pred).astype(np.float64), weights)


class _MSE(_Mean):
    def update(self, labels, predictions, weights):
        d = np.asarray(predictions, np.float64) - np.asarray(labels, np.float64)
        super().update(np.square(d).reshape(-1), weights)


class _RMSE(_MSE):
    def result(self):
        return float(np.sqrt(super().result()))


class _Ratio(_Metric):
    def __init__(self):
        self.num, self.den = 0.0, 0.0

    def result(self):
        return self.num / self.den if self.den else 0.0


class _Precision(_Ratio):
    def update(self, labels, predictions, weights):
        lab = np.asarray(labels).reshape(-1).astype(bool)
        pred = np.asarray(predictions).reshape(-1).astype(bool)
        w = _weights(weights, lab.size)
        self.num += float(np.sum(w * (lab & pred)))
        self.den += float(np.sum(w * pred))


class _Recall(_Ratio):
    def update(self, labels, predictions, weights):
        lab = np.asarray(labels).reshape(-1).astype(bool)
        pred = np.asarray(predictions).reshape(-1).astype(bool)
        w = _weights(weights, lab.size)
        self.num += float(np.sum(w * (lab & pred)))
        self.den += float(np.sum(w * lab))


class _AUC(_Metric):
    """TensorFlow's tf.compat.v1.metrics.auc: confusion counts at
    num_thresholds thresholds and the trapezoidal ROC (or PR) area."""

    def __init__(self):
        self.counts = None

    def configure(self, num_thresholds, curve):
        if self.counts is None:
            kepsilon = 1e-7
            inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
            self.thresholds = np.array([0.0 - kepsilon] + inner + [1.0 + kepsilon])
            self.counts = np.zeros((4, num_thresholds))  # tp, fn, tn, fp
            self.curve = curve

    def update(self, labels, predictions, weights, num_thresholds, curve):
        self.configure(num_thresholds, curve)
        lab = np.asarray(labels).reshape(-1).astype(bool)
        p = np.asarray(predictions, np.float64).reshape(-1)
        if p.size and (p.min() < 0 or p.max() > 1):
            raise ValueError("auc: predictions must be in [0, 1]")
        w = _weights(weights, lab.size)
        above = p[None, :] > self.thresholds[:, None]
        self.counts[0] += np.sum(w * (above & lab), axis=1)
        self.counts[1] += np.sum(w * (~above & lab), axis=1)
        self.counts[2] += np.sum(w * (~above & ~lab), axis=1)
        self.counts[3] += np.sum(w * (above & ~lab), axis=1)

    def result(self):
        tp, fn, tn, fp = self.counts
        eps = 1.0e-6
        rec = (tp + eps) / (tp + fn + eps)
        if self.curve == "ROC":
            x = fp / (fp + tn + eps)
            y = rec
        else:
            x = rec
            y = (tp + eps) / (tp + fp + eps)
        return float(np.sum((x[:-1] - x[1:]) * (y[:-1] + y[1:]) / 2.0))


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    return _get(_Mean, values, weights)


def accuracy(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    return _get(_Accuracy, labels, predictions, weights)


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                       name=None):
    return _get(_MSE, labels, predictions, weights)


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                            name=None):
    return _get(_RMSE, labels, predictions, weights)


def precision(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    return _get(_Precision, labels, predictions, weights)


def recall(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    return _get(_Recall, labels, predictions, weights)


def auc(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None, updates_collections=None,
        curve="ROC", name=None, summation_method="trapezoidal", thresholds=None):
    if curve not in ("ROC", "PR"):
        raise ValueError("auc: curve must be 'ROC' or 'PR', got %r" % (curve,))
    if num_thresholds < 2:
        raise ValueError("auc: num_thresholds must be > 1, got %r" % (num_thresholds,))
    return _get(_AUC, labels, predictions, weights, num_thresholds, curve)

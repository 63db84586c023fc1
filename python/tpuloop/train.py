"""tpuloop.train: TensorFlow 1's optimizers, learning-rate schedules and
get_global_step. The update rules run in C (optim.h) on every replica's
chunk of the parameters; an optimizer here is their configuration, and
minimize() is the train_op a TPUEstimatorSpec carries."""
import ctypes
import math

from . import _lib, errors
from ._lib import lib


class _GlobalStep:
    """The global step of get_global_step(): what schedules and minimize()
    take, and what a host_call may pass (reshaped or cast as TensorFlow's
    idiom `tf.reshape(tf.train.get_global_step(), [1])` does): its fn then
    receives the step of each outfed step, one per replica. The step lives
    in C; it is not a tensor of the model's graph."""

    def __repr__(self):
        return "<tpuloop global_step>"


_GLOBAL_STEP = _GlobalStep()


def get_global_step(graph=None):
    return _GLOBAL_STEP


def get_or_create_global_step(graph=None):
    return _GLOBAL_STEP


class LearningRateSchedule:
    """A decayed learning rate (tf.compat.v1.train.exponential_decay, cosine_decay, ...),
    computed in C at each step from the global step."""

    def __init__(self, **fields):
        self.fields = fields

    def c(self):
        s = _lib.LrSchedule()
        s.kind = _lib.LR_CONSTANT
        for k, v in self.fields.items():
            setattr(s, k, v)
        return s

    def __call__(self, step):
        """The rate at an integer step, as TensorFlow's schedule evaluates it."""
        s = self.c()
        return lib.tl_lr_schedule_value(ctypes.byref(s), int(step))


def _check_step(global_step, fn):
    if global_step is not _GLOBAL_STEP:
        raise ValueError("%s: global_step must be tpuloop.train.get_global_step(), got %r" % (fn, global_step))


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    _check_step(global_step, "exponential_decay")
    return LearningRateSchedule(kind=_lib.LR_EXPONENTIAL_DECAY, learning_rate=float(learning_rate),
                                decay_steps=int(decay_steps), decay_rate=float(decay_rate),
                                staircase=bool(staircase))


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    _check_step(global_step, "cosine_decay")
    return LearningRateSchedule(kind=_lib.LR_COSINE_DECAY, learning_rate=float(learning_rate),
                                decay_steps=int(decay_steps), alpha=float(alpha))


def linear_warmup(schedule, warmup_steps):
    """tpuloop's warmup: the rate rises linearly to schedule's over warmup_steps (optim.h)."""
    if not isinstance(schedule, LearningRateSchedule):
        schedule = LearningRateSchedule(kind=_lib.LR_CONSTANT, learning_rate=float(schedule))
    f = dict(schedule.fields)
    f["warmup_steps"] = int(warmup_steps)
    return LearningRateSchedule(**f)


class TrainOp:
    """What Optimizer.minimize returns: the optimizer that updates every
    trainable variable from the loss's gradient after each step."""

    def __init__(self, optimizer, loss):
        self.optimizer, self.loss = optimizer, loss


class Optimizer:
    kind = None
    name = "Optimizer"

    def __init__(self, learning_rate, use_locking=False, name=None, **hyper):
        self.learning_rate = learning_rate
        self.hyper = hyper
        self.config()  # a bad value raises here, from the user's line

    def config(self):
        """The C configuration, validated (TL_EINVAL messages name the field)."""
        c = _lib.OptimizerConfig()
        lib.tl_optimizer_config_default(self.kind, ctypes.byref(c))
        lr = self.learning_rate
        if isinstance(lr, LearningRateSchedule):
            c.lr = lr.c()
        elif lr is None:
            c.lr.learning_rate = math.nan
        else:
            if not isinstance(lr, (int, float)):
                raise TypeError("%s: learning_rate must be a number or a schedule, got %r" % (self.name, lr))
            c.lr.learning_rate = float(lr)
        for k, v in self.hyper.items():
            setattr(c, k, v)
        _lib.check(lib.tl_optimizer_config_validate(ctypes.byref(c)), self.name)
        return c

    def minimize(self, loss, global_step=None, var_list=None, **kwargs):
        if var_list is not None:
            raise errors.UnimplementedError("minimize: var_list; tpuloop trains every trainable variable")
        if global_step not in (None, _GLOBAL_STEP):
            raise ValueError("minimize: global_step must be tpuloop.train.get_global_step()")
        return TrainOp(self, loss)

    def reduce_sum(self):
        return False


class GradientDescentOptimizer(Optimizer):
    kind, name = _lib.OPTIM_SGD, "GradientDescentOptimizer"

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(learning_rate)


class MomentumOptimizer(Optimizer):
    kind, name = _lib.OPTIM_MOMENTUM, "MomentumOptimizer"

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False):
        super().__init__(learning_rate, momentum=float(momentum), use_nesterov=bool(use_nesterov))


class AdagradOptimizer(Optimizer):
    kind, name = _lib.OPTIM_ADAGRAD, "AdagradOptimizer"

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"):
        super().__init__(learning_rate, initial_accumulator_value=float(initial_accumulator_value))


class AdamOptimizer(Optimizer):
    kind, name = _lib.OPTIM_ADAM, "AdamOptimizer"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, use_locking=False, name="Adam"):
        super().__init__(learning_rate, beta1=float(beta1), beta2=float(beta2), epsilon=float(epsilon))


class RMSPropOptimizer(Optimizer):
    kind, name = _lib.OPTIM_RMSPROP, "RMSPropOptimizer"

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False, centered=False,
                 name="RMSProp"):
        super().__init__(learning_rate, decay=float(decay), momentum=float(momentum), epsilon=float(epsilon),
                         centered=bool(centered))

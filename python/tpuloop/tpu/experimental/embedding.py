"""tpuloop.tpu.experimental.embedding: tf.tpu.experimental.embedding's
TableConfig, FeatureConfig and optimizers, with TensorFlow's arguments and
checks. They build the `embedding` section of a tpuloop configuration
(emb_spec.h), which the C library validates (an error names the table, the
field and what was allowed) and runs: the tables live in C and are updated
in place by their optimizer after every step."""
import ctypes
import json

from ... import _lib, _vars, errors
from ..._lib import lib


class _Optimizer:
    """An embedding optimizer: its TensorFlow arguments, the ones given."""
    _type = None
    _defaults = {}

    def __init__(self, **kwargs):
        self.args = {}
        for k, v in kwargs.items():
            if v is None or (k in self._defaults and self._defaults[k] == v):
                continue
            if callable(v) and k != "learning_rate":
                raise TypeError("%s: %s must be a number, got %r" % (type(self).__name__, k, v))
            self.args[k] = v
        self.learning_rate = kwargs.get("learning_rate")

    def to_json(self, tags=None):
        """The optimizer's JSON; a callable learning rate becomes a dynamic
        one (learning_rate_tag), its tag taken from tags (callable -> tag)."""
        d = {"type": self._type}
        d.update(self.args)
        lr = d.get("learning_rate")
        if callable(lr):
            del d["learning_rate"]
            d["learning_rate_tag"] = tags.setdefault(lr, len(tags)) if tags is not None else 0
        return d

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in self.args.items()))


class SGD(_Optimizer):
    _type = "sgd"

    def __init__(self, learning_rate=0.01, use_gradient_accumulation=True, clip_weight_min=None,
                 clip_weight_max=None, weight_decay_factor=None, multiply_weight_decay_factor_by_learning_rate=None,
                 clipvalue=None, low_dimensional_packing_status=False):
        super().__init__(learning_rate=learning_rate, use_gradient_accumulation=use_gradient_accumulation,
                         clip_weight_min=clip_weight_min, clip_weight_max=clip_weight_max,
                         weight_decay_factor=weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate=multiply_weight_decay_factor_by_learning_rate,
                         clipvalue=clipvalue, low_dimensional_packing_status=low_dimensional_packing_status)
        self.args.setdefault("learning_rate", learning_rate)


class Adagrad(_Optimizer):
    _type = "adagrad"

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, use_gradient_accumulation=True,
                 clip_weight_min=None, clip_weight_max=None, weight_decay_factor=None,
                 multiply_weight_decay_factor_by_learning_rate=None, slot_variable_creation_fn=None,
                 clipvalue=None, low_dimensional_packing_status=False):
        if slot_variable_creation_fn is not None:
            raise errors.UnimplementedError("Adagrad: slot_variable_creation_fn")
        super().__init__(learning_rate=learning_rate, initial_accumulator_value=initial_accumulator_value,
                         use_gradient_accumulation=use_gradient_accumulation, clip_weight_min=clip_weight_min,
                         clip_weight_max=clip_weight_max, weight_decay_factor=weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate=multiply_weight_decay_factor_by_learning_rate,
                         clipvalue=clipvalue, low_dimensional_packing_status=low_dimensional_packing_status)
        self.args.setdefault("learning_rate", learning_rate)
        self.args.setdefault("initial_accumulator_value", initial_accumulator_value)


class AdagradMomentum(_Optimizer):
    _type = "adagrad_momentum"

    def __init__(self, learning_rate=0.001, momentum=0.0, use_nesterov=False, exponent=2, beta2=1, epsilon=1e-10,
                 use_gradient_accumulation=True, clip_weight_min=None, clip_weight_max=None, weight_decay_factor=None,
                 multiply_weight_decay_factor_by_learning_rate=None, slot_variable_creation_fn=None, clipvalue=None,
                 low_dimensional_packing_status=False):
        if slot_variable_creation_fn is not None:
            raise errors.UnimplementedError("AdagradMomentum: slot_variable_creation_fn")
        super().__init__(learning_rate=learning_rate, momentum=momentum, use_nesterov=use_nesterov,
                         exponent=exponent, beta2=beta2, epsilon=epsilon,
                         use_gradient_accumulation=use_gradient_accumulation, clip_weight_min=clip_weight_min,
                         clip_weight_max=clip_weight_max, weight_decay_factor=weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate=multiply_weight_decay_factor_by_learning_rate,
                         clipvalue=clipvalue, low_dimensional_packing_status=low_dimensional_packing_status)
        for k, v in (("learning_rate", learning_rate), ("momentum", momentum), ("exponent", exponent),
                     ("beta2", beta2), ("epsilon", epsilon)):
            self.args.setdefault(k, v)


class Adam(_Optimizer):
    _type = "adam"

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-07, lazy_adam=True,
                 sum_inside_sqrt=True, use_gradient_accumulation=True, clip_weight_min=None, clip_weight_max=None,
                 weight_decay_factor=None, multiply_weight_decay_factor_by_learning_rate=None,
                 slot_variable_creation_fn=None, clipvalue=None, low_dimensional_packing_status=False):
        if slot_variable_creation_fn is not None:
            raise errors.UnimplementedError("Adam: slot_variable_creation_fn")
        super().__init__(learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                         lazy_adam=lazy_adam, sum_inside_sqrt=sum_inside_sqrt,
                         use_gradient_accumulation=use_gradient_accumulation, clip_weight_min=clip_weight_min,
                         clip_weight_max=clip_weight_max, weight_decay_factor=weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate=multiply_weight_decay_factor_by_learning_rate,
                         clipvalue=clipvalue, low_dimensional_packing_status=low_dimensional_packing_status)
        for k, v in (("learning_rate", learning_rate), ("beta_1", beta_1), ("beta_2", beta_2),
                     ("epsilon", epsilon)):
            self.args.setdefault(k, v)


class FTRL(_Optimizer):
    _type = "ftrl"

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, beta=0.0, initial_accumulator_value=0.1,
                 use_gradient_accumulation=True, clip_weight_min=None, clip_weight_max=None,
                 weight_decay_factor=None, multiply_weight_decay_factor_by_learning_rate=None,
                 slot_variable_creation_fn=None, clipvalue=None, multiply_linear_by_learning_rate=False,
                 allow_zero_accumulator=False, low_dimensional_packing_status=False):
        if slot_variable_creation_fn is not None:
            raise errors.UnimplementedError("FTRL: slot_variable_creation_fn")
        super().__init__(learning_rate=learning_rate, learning_rate_power=learning_rate_power,
                         l1_regularization_strength=l1_regularization_strength,
                         l2_regularization_strength=l2_regularization_strength, beta=beta,
                         initial_accumulator_value=initial_accumulator_value,
                         use_gradient_accumulation=use_gradient_accumulation, clip_weight_min=clip_weight_min,
                         clip_weight_max=clip_weight_max, weight_decay_factor=weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate=multiply_weight_decay_factor_by_learning_rate,
                         clipvalue=clipvalue, multiply_linear_by_learning_rate=multiply_linear_by_learning_rate,
                         low_dimensional_packing_status=low_dimensional_packing_status)
        for k, v in (("learning_rate", learning_rate), ("learning_rate_power", learning_rate_power),
                     ("initial_accumulator_value", initial_accumulator_value)):
            self.args.setdefault(k, v)


def _initializer_json(init):
    if init is None:
        return None
    if isinstance(init, _vars.Initializer):
        k = init.kind
        if k == _lib.INIT_ZEROS:
            return {"type": "zeros"}
        if k == _lib.INIT_CONSTANT:
            return {"type": "constant", "value": init.a}
        if k == _lib.INIT_UNIFORM:
            return {"type": "uniform", "minval": init.a, "maxval": init.b}
        if k == _lib.INIT_TRUNCATED_NORMAL:
            return {"type": "truncated_normal", "mean": init.a, "stddev": init.b}
    raise ValueError("Argument `initializer` must be a tpuloop initializer (zeros, constant, random_uniform, "
                     "truncated_normal) or None. Received: {}".format(init))


class TableConfig:
    """tf.tpu.experimental.embedding.TableConfig."""

    def __init__(self, vocabulary_size, dim, initializer=None, optimizer=None, combiner="mean", name=None,
                 quantization_config=None, layout=None):
        if not isinstance(vocabulary_size, int) or vocabulary_size < 1:
            raise ValueError("Argument `vocabulary_size` must be an int and must be >= 1. "
                             "Received: {}".format(vocabulary_size))
        if not isinstance(dim, int) or dim < 1:
            raise ValueError("Argument `dim` (embedding dimension) must be an int and must be >= 1. "
                             "Received: {}".format(dim))
        if initializer is not None and not isinstance(initializer, _vars.Initializer):
            raise ValueError("Argument `initializer` must be a callable (or None). Received: {}".format(initializer))
        if combiner not in ("mean", "sum", "sqrtn"):
            raise ValueError("Argument `combiner` must be one of 'mean', 'sum', or 'sqrtn'. "
                             "Received: {}".format(combiner))
        if quantization_config is not None or layout is not None:
            raise errors.UnimplementedError("TableConfig: quantization_config and layout")
        _initializer_json(initializer)
        self.vocabulary_size, self.dim, self.initializer = vocabulary_size, dim, initializer
        self.optimizer, self.combiner, self.name = optimizer, combiner, name

    def __repr__(self):
        return "TableConfig(vocabulary_size={!r}, dim={!r}, combiner={!r}, name={!r})".format(
            self.vocabulary_size, self.dim, self.combiner, self.name)


class FeatureConfig:
    """tf.tpu.experimental.embedding.FeatureConfig."""

    def __init__(self, table, max_sequence_length=0, validate_weights_and_indices=True, output_shape=None,
                 name=None):
        if not isinstance(table, TableConfig):
            raise ValueError("Argument `table` is not an instance of TableConfig. Received: {}".format(table))
        if not isinstance(max_sequence_length, int) or max_sequence_length < 0:
            raise ValueError("Argument `max_sequence_length` must be an int and must be >= 0. "
                             "Received: {}".format(max_sequence_length))
        if output_shape is not None:
            raise errors.UnimplementedError("FeatureConfig: output_shape in tpuloop's Python front end")
        self.table, self.max_sequence_length, self.name = table, max_sequence_length, name
        self.output_shape = output_shape

    def __repr__(self):
        return "FeatureConfig(table={!r}, max_sequence_length={!r}, name={!r})".format(
            self.table, self.max_sequence_length, self.name)


class _Spec:
    """A parsed configuration (tl_emb_spec) that the estimator sizes."""

    def __init__(self, text):
        self.text = text
        ptr = ctypes.c_void_p()
        b = text.encode()
        _lib.check(lib.tl_emb_spec_from_json(b, len(b), ctypes.byref(ptr)), "embedding configuration")
        self.spec = ptr
        self.ptr = lib.tl_emb_spec_config(ptr)

    def __del__(self):
        if getattr(self, "spec", None):
            lib.tl_emb_spec_destroy(self.spec)
            self.spec = None


def flatten_features(feature_config):
    """[(name, FeatureConfig)] of a nested structure, in TensorFlow's order
    (dict keys sorted, as tf.nest flattens them)."""
    out = []

    def walk(x, path):
        if isinstance(x, FeatureConfig):
            out.append((x.name or "/".join(str(p) for p in path) or "feature_%d" % len(out), x))
        elif isinstance(x, dict):
            for k in sorted(x):
                walk(x[k], path + [k])
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, path + [i])
        else:
            raise ValueError("feature_config holds %r; it must be FeatureConfigs in dicts, lists or tuples" % (x,))
    walk(feature_config, [])
    return out


def learning_rate_fns(feature_config, optimizer=None):
    """The callable learning rates of the tables' optimizers (and the global
    one), in the order of their learning_rate_tag: TensorFlow's dynamic
    learning rates, called with the global step (a tpuloop.train schedule,
    or any function of one argument) or with none (a function of none)."""
    tags = {}
    config_json(feature_config, optimizer, tags=tags)
    return [fn for fn, _ in sorted(tags.items(), key=lambda kv: kv[1])]


def config_json(feature_config, optimizer=None, pipeline_execution_with_tensor_core=False, seed=None, tags=None):
    """The `embedding` section (emb_spec.h) of a feature_config structure."""
    features = flatten_features(feature_config)
    if not features:
        raise ValueError("feature_config has no FeatureConfig")
    tables, names = [], {}
    tags = {} if tags is None else tags
    for _, f in features:
        t = f.table
        if id(t) in names:
            continue
        name = t.name or "table_%d" % len(tables)
        if name in names.values():
            raise ValueError("Multiple tables with name {} found.".format(name))
        names[id(t)] = name
        d = {"name": name, "vocabulary_size": t.vocabulary_size, "dim": t.dim, "combiner": t.combiner}
        if t.initializer is not None:
            d["initializer"] = _initializer_json(t.initializer)
        if t.optimizer is not None:
            d["optimizer"] = t.optimizer.to_json(tags)
        tables.append(d)
    section = {"tables": tables,
               "features": [{"name": n, "table": names[id(f.table)], "max_sequence_length": f.max_sequence_length}
                            for n, f in features]}
    if optimizer is not None:
        section["optimizer"] = optimizer.to_json(tags)
    elif any("optimizer" not in t for t in tables):
        raise ValueError("No optimizer specified for table(s) %s and no global optimizer given"
                         % [t["name"] for t in tables if "optimizer" not in t])
    if pipeline_execution_with_tensor_core:
        section["pipeline_execution_with_tensor_core"] = True
    if seed is not None:
        section["seed"] = int(seed)
    return json.dumps(section)

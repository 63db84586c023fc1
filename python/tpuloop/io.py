"""tpuloop.io: tf.io's feature specs and parse_example, for Dataset.map.

parse_single_example (and parse_example, which tpuloop runs per record
before batch) is recorded when the map function is traced and runs in C
(tl_dataset_parse_example): the result is a dict of columns keyed as the
specs are."""
import ctypes

import numpy as np

from . import _lib
from ._graph import as_dtype

_parse_calls = []


class _Serialized:
    """The bytes column a map function parses."""

    def __init__(self, key):
        self.key = key

    def _other(self, *args):
        from .data import _unsupported
        raise _unsupported("a serialized record is only parsed")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __getitem__ = _other


class FixedLenFeature:
    def __init__(self, shape, dtype, default_value=None):
        self.shape = [] if shape is None else list(shape)
        self.dtype = dtype
        self.default_value = default_value


class VarLenFeature:
    def __init__(self, dtype):
        self.dtype = dtype


class FixedLenSequenceFeature:
    def __init__(self, shape, dtype, allow_missing=False, default_value=None):
        self.shape = list(shape)
        self.dtype = dtype
        self.allow_missing = allow_missing
        if default_value is not None:
            raise ValueError("FixedLenSequenceFeature: default_value is not supported by tpuloop")


def _kind(dtype):
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if name == "string":
        return _lib.FEATURE_BYTES, None
    dt = as_dtype(name if name != "int32" else "int64")
    return (_lib.FEATURE_FLOAT, np.float32) if dt.name == "float32" else (_lib.FEATURE_INT64, np.int64)


def _specs(features):
    from .data import Column
    specs, keep, out = [], [], {}
    seq = False
    for key, f in features.items():
        s = _lib.FeatureSpec()
        s.key = key.encode()
        keep.append(s.key)
        kind, np_t = _kind(f.dtype)
        s.dtype = kind
        if isinstance(f, FixedLenFeature):
            s.type = _lib.SPEC_FIXED_LEN
            s.rank = len(f.shape)
            for i, d in enumerate(f.shape):
                s.shape[i] = int(d)
            if f.default_value is not None:
                n = int(np.prod(f.shape, dtype=np.int64)) if f.shape else 1
                dv = np.asarray(f.default_value, dtype=np_t).reshape(-1)
                if dv.size not in (1, n):
                    raise ValueError("FixedLenFeature %r: default_value has %d values; the shape %s takes %d (or 1)"
                                     % (key, dv.size, f.shape, n))
                keep.append(dv)
                s.default_value = dv.ctypes.data
                s.default_count = dv.size
        elif isinstance(f, VarLenFeature):
            s.type = _lib.SPEC_VAR_LEN
        elif isinstance(f, FixedLenSequenceFeature):
            s.type = _lib.SPEC_FIXED_LEN_SEQUENCE
            s.rank = len(f.shape)
            for i, d in enumerate(f.shape):
                s.shape[i] = int(d)
            s.allow_missing = bool(f.allow_missing)
            seq = True
        else:
            raise TypeError("features[%r] must be a FixedLenFeature, VarLenFeature or FixedLenSequenceFeature, "
                            "got %r" % (key, type(f).__name__))
        specs.append(s)
        out[key] = Column(key, "float32" if kind == _lib.FEATURE_FLOAT else "int64")
    return specs, keep, out, seq


def parse_single_example(serialized, features, name=None, example_names=None):
    if not isinstance(serialized, _Serialized):
        raise TypeError("parse_single_example parses the records of a TFRecordDataset inside Dataset.map")
    specs, keep, out, seq = _specs(features)
    _parse_calls.append((specs, keep, seq))
    return out


parse_example = parse_single_example


def parse_single_sequence_example(serialized, context_features=None, sequence_features=None, name=None):
    if not isinstance(serialized, _Serialized):
        raise TypeError("parse_single_sequence_example parses records inside Dataset.map")
    feats = dict(context_features or {})
    feats.update(sequence_features or {})
    specs, keep, out, _ = _specs(feats)
    _parse_calls.append((specs, keep, True))
    ctx = {k: out[k] for k in (context_features or {})}
    seqs = {k: out[k] for k in (sequence_features or {})}
    return ctx, seqs


_ = ctypes

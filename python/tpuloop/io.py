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


class TFRecordOptions:
    """tf.io.TFRecordOptions: compression_type None/'' (plain), 'GZIP' or 'ZLIB'."""

    def __init__(self, compression_type=None, compression_level=None):
        codes = {None: _lib.RECORD_NONE, "": _lib.RECORD_NONE, "GZIP": _lib.RECORD_GZIP, "ZLIB": _lib.RECORD_ZLIB}
        if compression_type not in codes:
            raise ValueError("compression_type must be None, '', 'GZIP' or 'ZLIB', got %r" % (compression_type,))
        self.compression_type = compression_type
        self.code = codes[compression_type]
        self.compression_level = -1 if compression_level is None else int(compression_level)


class TFRecordWriter:
    """tf.io.TFRecordWriter: records written by tpuloop's C writer (CRC-32C
    framing, optional GZIP or ZLIB), readable by TensorFlow and by
    TFRecordDataset."""

    def __init__(self, path, options=None):
        if isinstance(options, str) or options is None:
            options = TFRecordOptions(options)
        o = _lib.RecordWriterOptions()
        _lib.lib.tl_record_writer_options_init(ctypes.byref(o))
        o.compression = options.code
        o.compression_level = options.compression_level
        w = ctypes.c_void_p()
        _lib.check(_lib.lib.tl_record_writer_open(str(path).encode(), ctypes.byref(o), ctypes.byref(w)),
                   "TFRecordWriter")
        self._w = w

    def write(self, record):
        if self._w is None:
            raise ValueError("TFRecordWriter: write after close")
        b = bytes(record)
        _lib.check(_lib.lib.tl_record_writer_write(self._w, b, len(b)), "TFRecordWriter.write")

    def flush(self):
        _lib.check(_lib.lib.tl_record_writer_flush(self._w, False), "TFRecordWriter.flush")

    def close(self):
        if self._w is not None:
            w, self._w = self._w, None
            _lib.check(_lib.lib.tl_record_writer_close(w), "TFRecordWriter.close")   # frees w in any case

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_w", None) is not None:
            _lib.lib.tl_record_writer_destroy(self._w)


def serialize_example(features):
    """The serialized tf.train.Example of {key: values}: a float array is a
    float_list, an integer array an int64_list, bytes (or a list of bytes) a
    bytes_list — what tf.train.Example(...).SerializeToString() gives."""
    b = ctypes.c_void_p()
    _lib.check(_lib.lib.tl_example_builder_create(ctypes.byref(b)), "serialize_example")
    try:
        for key, v in features.items():
            k = key.encode()
            if isinstance(v, (bytes, str)) or (isinstance(v, (list, tuple)) and v and
                                                isinstance(v[0], (bytes, str))):
                vals = [v] if isinstance(v, (bytes, str)) else list(v)
                vals = [x.encode() if isinstance(x, str) else bytes(x) for x in vals]
                arr = (_lib.Bytes * max(len(vals), 1))()
                for i, x in enumerate(vals):
                    arr[i].data = ctypes.cast(ctypes.c_char_p(x), ctypes.c_void_p)
                    arr[i].len = len(x)
                st = _lib.lib.tl_example_builder_add_bytes(b, k, arr, len(vals))
            else:
                a = np.asarray(v).reshape(-1)
                if a.dtype.kind == "f":
                    a = np.ascontiguousarray(a, np.float32)
                    st = _lib.lib.tl_example_builder_add_floats(b, k, a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                                a.size)
                elif a.dtype.kind in "iub":
                    a = np.ascontiguousarray(a, np.int64)
                    st = _lib.lib.tl_example_builder_add_int64s(b, k, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
                                                                a.size)
                else:
                    raise TypeError("serialize_example: feature %r has dtype %s" % (key, a.dtype))
            _lib.check(st, "serialize_example")
        data, n = ctypes.c_void_p(), ctypes.c_size_t()
        _lib.check(_lib.lib.tl_example_builder_serialize(b, ctypes.byref(data), ctypes.byref(n)), "serialize_example")
        return ctypes.string_at(data, n.value)
    finally:
        _lib.lib.tl_example_builder_destroy(b)

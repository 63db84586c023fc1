"""tpuloop.data: tf.data's Dataset, run in C.

A Dataset here is a recipe: each transform returns a new Dataset, and the C
pipeline (dataset.h) is built from it when the estimator calls the input_fn
(or when Python iterates it), so every element is read, parsed, shuffled and
batched in C threads, and the pipeline's position is saved with every
checkpoint. map() traces its function once over symbolic columns: what it
may do is what C runs — parse_example / parse_single_example with
FixedLenFeature and VarLenFeature specs, cast, and scaling by a constant —,
and anything else raises at once, naming what was allowed.

Structure: an element is a tensor, a tuple or a dict of them, as in tf.data.
An estimator's input_fn yields (features, labels): features a tensor (the
model_fn gets a tensor) or a dict of tensors (the model_fn gets a dict),
labels one int tensor.
"""
import ctypes

import numpy as np

from . import _lib, errors
from ._lib import lib

AUTOTUNE = -1


class Column:
    """A named tensor of the C pipeline's elements, seen while a map
    function is traced; cast and multiplication by a constant are recorded
    as C transforms."""

    def __init__(self, key, dtype, scale=1.0, cast_to=None):
        self.key, self.dtype, self.scale, self.cast_to = key, dtype, scale, cast_to

    def _scaled(self, s):
        return Column(self.key, "float32", self.scale * float(s), "float32")

    def __mul__(self, s):
        if not isinstance(s, (int, float, np.number)):
            return NotImplemented
        return self._scaled(s)

    __rmul__ = __mul__

    def __truediv__(self, s):
        if not isinstance(s, (int, float, np.number)):
            return NotImplemented
        return self._scaled(1.0 / float(s))

    def __repr__(self):
        return "<tpuloop.data column %r>" % self.key

    def _other(self, *args):
        raise _unsupported("column %r: only cast and multiplication or division by a constant" % self.key)

    __add__ = __radd__ = __sub__ = __rsub__ = __neg__ = __pow__ = __rtruediv__ = _other


def _unsupported(what):
    return errors.UnimplementedError(
        "Dataset.map: %s; a map function runs in C and may use tpuloop.io.parse_example / "
        "parse_single_example, tpuloop.cast and multiplication or division by a constant" % what)


def _flatten(structure, prefix):
    """[(path, leaf)] of a tensor, tuple or dict structure."""
    if isinstance(structure, dict):
        out = []
        for k in structure:
            out += _flatten(structure[k], prefix + (k,))
        return out
    if isinstance(structure, (tuple, list)):
        out = []
        for i, v in enumerate(structure):
            out += _flatten(v, prefix + (i,))
        return out
    return [(prefix, structure)]


def _rebuild(structure, leaf_fn, prefix=()):
    if isinstance(structure, dict):
        return {k: _rebuild(v, leaf_fn, prefix + (k,)) for k, v in structure.items()}
    if isinstance(structure, (tuple, list)):
        return tuple(_rebuild(v, leaf_fn, prefix + (i,)) for i, v in enumerate(structure))
    return leaf_fn(prefix, structure)


def _key_of(path):
    """The C key of a leaf: a dict key names it; a tuple position of an
    (features, labels) pair is "features" / "label"."""
    named = [p for p in path if isinstance(p, str)]
    if named:
        return "/".join(named)
    if path == (0,):
        return "features"
    if path == (1,):
        return "label"
    return "component_" + "_".join(str(p) for p in path) if path else "features"


class Dataset:
    """tf.data.Dataset over a C pipeline."""

    def __init__(self, build, structure, refs=(), bytes_key=None):
        self._build = build          # () -> c_void_p, a new C dataset the caller owns
        self.structure = structure   # the element's structure, leaves are C keys
        self._refs = tuple(refs)     # arrays the C pipeline borrows
        self._bytes = bytes_key      # "record" / "filename": elements are one bytes scalar

    # ---- sources -----------------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(tensors):
        """Slices NumPy arrays (a tuple or dict of them, or one) along their
        first dimension. The arrays are borrowed, not copied: each element's
        rows are copied out of them as the pipeline reads."""
        leaves = _flatten(tensors, ())
        if not leaves:
            raise ValueError("from_tensor_slices: no tensors given")
        arrays, keys = [], []
        for path, v in leaves:
            a = np.asarray(v)
            if a.dtype == np.float64:
                a = a.astype(np.float32)
            elif a.dtype.kind in "iub" and a.dtype != np.int64 and a.dtype != np.int32:
                a = a.astype(np.int64 if a.dtype.kind == "u" and a.dtype.itemsize >= 4 else np.int32)
            if a.dtype not in (np.float32, np.int32, np.int64):
                raise TypeError("from_tensor_slices: %s has dtype %s; tpuloop datasets hold float32, int32 and "
                                "int64" % (_key_of(path), a.dtype))
            if a.ndim < 1:
                raise ValueError("from_tensor_slices: %s is a scalar; slicing needs a first dimension"
                                 % _key_of(path))
            arrays.append(np.ascontiguousarray(a))
            keys.append(_key_of(path))
        n0 = arrays[0].shape[0]
        for k, a in zip(keys, arrays):
            if a.shape[0] != n0:
                raise ValueError("from_tensor_slices: dimension 0 of %r is %d but of %r is %d; all must be equal"
                                 % (keys[0], n0, k, a.shape[0]))
        codes = {np.dtype(np.float32): _lib.DT_FLOAT32, np.dtype(np.int32): _lib.DT_INT32,
                 np.dtype(np.int64): _lib.DT_INT64}
        bkeys = [k.encode() for k in keys]

        def build():
            cols = (_lib.Tensor * len(arrays))()
            for c, (k, a) in enumerate(zip(bkeys, arrays)):
                cols[c].key = k
                cols[c].dtype = codes[a.dtype]
                cols[c].rank = a.ndim
                for d in range(a.ndim):
                    cols[c].shape[d] = a.shape[d]
                cols[c].data = a.ctypes.data
            out = ctypes.c_void_p()
            _lib.check(lib.tl_dataset_from_tensor_slices(cols, len(arrays), ctypes.byref(out)), "from_tensor_slices")
            return out

        structure = _rebuild(tensors, lambda p, v: _key_of(p))
        return Dataset(build, structure, refs=arrays)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None):
        """The files a pattern (or patterns) match, sorted (shuffle is not supported)."""
        if shuffle:
            raise errors.UnimplementedError("list_files: shuffle=True; tpuloop lists files sorted "
                                            "(shuffle the records instead)")
        pats = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
        arr = (ctypes.c_char_p * len(pats))(*[p.encode() for p in pats])

        def build():
            out = ctypes.c_void_p()
            _lib.check(lib.tl_dataset_from_files(arr, len(pats), ctypes.byref(out)), "list_files")
            return out
        return Dataset(build, None, refs=(arr,), bytes_key="filename")

    # ---- transforms --------------------------------------------------------------------

    def _then(self, what, fn, structure=None, refs=(), bytes_key=False):
        def build():
            ds = self._build()
            out = ctypes.c_void_p()
            _lib.check(fn(ds, ctypes.byref(out)), what)  # a failing transform destroyed its input
            return out
        return Dataset(build, self.structure if structure is None else structure, self._refs + tuple(refs),
                       self._bytes if bytes_key is False else bytes_key)

    def shard(self, num_shards, index):
        return self._then("shard", lambda ds, o: lib.tl_dataset_shard(ds, int(num_shards), int(index), o))

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True):
        """tf.data's shuffle. seed None takes the estimator's tf_random_seed
        (0 outside one), as TensorFlow derives an op seed from the graph seed."""
        def fn(ds, o):
            s = seed if seed is not None else _seed_hook()
            return lib.tl_dataset_shuffle(ds, int(buffer_size), int(s) & (2**64 - 1), bool(reshuffle_each_iteration),
                                          o)
        return self._then("shuffle", fn)

    def repeat(self, count=None):
        return self._then("repeat", lambda ds, o: lib.tl_dataset_repeat(ds, -1 if count is None else int(count), o))

    def take(self, count):
        return self._then("take", lambda ds, o: lib.tl_dataset_take(ds, int(count), o))

    def skip(self, count):
        return self._then("skip", lambda ds, o: lib.tl_dataset_skip(ds, int(count), o))

    def batch(self, batch_size, drop_remainder=False):
        return self._then("batch", lambda ds, o: lib.tl_dataset_batch(ds, int(batch_size), bool(drop_remainder), o))

    def prefetch(self, buffer_size):
        n = 2 if buffer_size in (None, AUTOTUNE) else int(buffer_size)
        return self._then("prefetch", lambda ds, o: lib.tl_dataset_prefetch(ds, n, o))

    def interleave(self, map_func, cycle_length=None, block_length=None, num_parallel_calls=None,
                   deterministic=None):
        """Over a dataset of file names (list_files): map_func is
        TFRecordDataset (or a function returning one of the file it is given)."""
        if self._bytes != "filename":
            raise _unsupported("interleave runs over list_files' file names")
        probe = map_func("<file>")
        if not isinstance(probe, TFRecordDataset):
            raise errors.UnimplementedError("interleave: map_func must return a TFRecordDataset of its file")
        o = _lib.TfrecordOptions()
        lib.tl_tfrecord_options_init(ctypes.byref(o))
        o.compression = probe.compression
        o.cycle_length = 1 if cycle_length in (None, AUTOTUNE) else int(cycle_length)
        o.block_length = 1 if block_length is None else int(block_length)
        return self._then("interleave", lambda ds, out: lib.tl_dataset_tfrecord_interleave(ds, ctypes.byref(o), out),
                          refs=(o,), bytes_key="record")

    def map(self, map_func, num_parallel_calls=None, deterministic=None):
        """Traces map_func once over symbolic columns into C transforms."""
        from . import io as tio
        nthreads = 1 if num_parallel_calls in (None, AUTOTUNE) else int(num_parallel_calls)
        if self._bytes is not None:
            arg = (tio._Serialized(self._bytes),)
        elif isinstance(self.structure, str):
            arg = (Column(self.structure, None),)
        elif isinstance(self.structure, tuple):
            arg = tuple(_rebuild(s, lambda p, k: Column(k, None)) for s in self.structure)
        else:
            arg = (_rebuild(self.structure, lambda p, k: Column(k, None)),)
        tio._parse_calls.clear()
        out = map_func(*arg)
        parses = list(tio._parse_calls)
        tio._parse_calls.clear()
        if len(parses) > 1:
            raise _unsupported("more than one parse_example call")
        ds = self
        if parses:
            specs, ctype, seq = parses[0]
            if self._bytes != "record":
                raise _unsupported("parse_example parses a TFRecordDataset's records")
            po = _lib.ParseOptions(record_key=b"record",
                                   sequence_example=seq, skip_corrupt_records=False,
                                   num_parallel_calls=max(1, min(nthreads, 64)))
            arr = (_lib.FeatureSpec * len(specs))(*specs)
            ds = ds._then("map(parse_example)", lambda d, o: lib.tl_dataset_parse_example(d, arr, len(specs),
                                                                                         ctypes.byref(po), o),
                          refs=(arr, po, ctype))
        leaves = _flatten(out, ())
        for path, v in leaves:
            if not isinstance(v, Column):
                raise _unsupported("its result holds %r at %s" % (type(v).__name__, path or "the top"))
        scales = {}
        for _, v in leaves:
            if v.scale != 1.0 or v.cast_to == "float32":
                if scales.get(v.key, v.scale) != v.scale:
                    raise _unsupported("column %r scaled by two different constants" % v.key)
                scales[v.key] = v.scale
        for key, s in scales.items():
            k = (ctypes.c_char_p * 1)(key.encode())
            ds = ds._then("map(scale)", lambda d, o, k=k, s=s: lib.tl_dataset_scale(d, s, k, 1, None, 0, o),
                          refs=(k,))
        structure = _rebuild(out, lambda p, v: v.key)
        return Dataset(ds._build, structure, ds._refs)

    # ---- reading from Python -----------------------------------------------------------

    def __iter__(self):
        if self._bytes is not None:
            raise _unsupported("reading %s bytes into Python; map them with parse_single_example first" % self._bytes)
        ds = self._build()
        try:
            el = ctypes.POINTER(_lib.Element)()
            while True:
                _lib.check(lib.tl_dataset_next(ds, ctypes.byref(el)), "Dataset")
                if not el:
                    return
                values = _element_arrays(el.contents)
                yield values[self.structure] if isinstance(self.structure, str) \
                    else _rebuild(self.structure, lambda p, k: values[k])
        finally:
            lib.tl_dataset_destroy(ds)

    def as_numpy_iterator(self):
        return iter(self)



class TFRecordDataset(Dataset):
    """tf.data.TFRecordDataset: the records of the files, one after another
    (num_parallel_reads files at once, interleaved record by record)."""

    _COMPRESSION = {None: _lib.RECORD_NONE, "": _lib.RECORD_NONE, "GZIP": _lib.RECORD_GZIP,
                    "ZLIB": _lib.RECORD_ZLIB}

    def __init__(self, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None):
        if compression_type not in self._COMPRESSION:
            raise ValueError("TFRecordDataset: compression_type must be None, '', 'GZIP' or 'ZLIB', got %r"
                             % (compression_type,))
        self.compression = self._COMPRESSION[compression_type]
        files = [filenames] if isinstance(filenames, str) else list(filenames)
        arr = (ctypes.c_char_p * max(len(files), 1))(*[f.encode() for f in files])
        o = _lib.TfrecordOptions()
        lib.tl_tfrecord_options_init(ctypes.byref(o))
        o.compression = self.compression
        if num_parallel_reads not in (None, AUTOTUNE):
            o.cycle_length = int(num_parallel_reads)

        def build():
            out = ctypes.c_void_p()
            _lib.check(lib.tl_dataset_tfrecord(arr, len(files), ctypes.byref(o), ctypes.byref(out)),
                       "TFRecordDataset")
            return out
        super().__init__(build, None, refs=(arr, o), bytes_key="record")


def _element_arrays(e):
    out = {}
    for i in range(e.num_tensors):
        t = e.tensors[i]
        key = t.key.decode()
        shape = tuple(t.shape[d] for d in range(t.rank))
        if t.dtype == _lib.DT_BYTES:
            raise errors.UnimplementedError("reading bytes tensor %r into NumPy" % key)
        np_t = {_lib.DT_FLOAT32: np.float32, _lib.DT_INT32: np.int32, _lib.DT_INT64: np.int64}[t.dtype]
        n = t.num_values if t.ragged else int(np.prod(shape, dtype=np.int64))
        if n == 0:
            arr = np.zeros(shape if not t.ragged else (0,), np_t)
        else:
            raw = ctypes.string_at(t.data, n * np.dtype(np_t).itemsize)
            arr = np.frombuffer(raw, dtype=np_t).copy()
            arr = arr.reshape(shape) if not t.ragged else arr
        out[key] = arr
    return out


def _default_seed():
    return 0


_seed_hook = _default_seed

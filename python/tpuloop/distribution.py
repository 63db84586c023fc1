"""tpuloop.distribution: Keras 3's distribution API (keras.distribution, v3.15.1) over libtpuloop.

    import tpuloop.distribution as dist
    dist.list_devices()                                   # ['cpu:0', ..., 'cpu:7'] with TPULOOP_DEVICE_COUNT=8
    mesh = dist.DeviceMesh((2, 4), ["data", "model"], dist.list_devices())
    layout_map = dist.LayoutMap(mesh)
    layout_map[".*dense.*kernel"] = (None, "model")
    mp = dist.ModelParallel(layout_map=layout_map, batch_dim_name="data")
    with mp.scope():
        ...                                               # dist.distribution() is mp here

Every object is a C object of include/tpuloop/mesh.h and distribution.h: the rules (which mesh DataParallel
builds, which layout a variable gets, how a dataset is cut across processes) and the error messages are the C
library's, which reproduces Keras 3.15.1's. Errors are raised as tpuloop.errors exceptions, which are also the
built-in exceptions Keras raises: a bad mesh or layout is an InvalidArgumentError, i.e. a ValueError.

Devices are the C library's CPU devices (devices.h), named "cpu:<global id>" as JAX names them. A process has
TPULOOP_DEVICE_COUNT devices when that variable is set (virtual devices: TPULOOP_DEVICE_COUNT=8 gives 8 devices on
a 2-core machine) and one device per core of its affinity mask otherwise; after initialize(num_processes=P,
process_id=p) the device list is the job's, P times that many, as JAX lists every process's devices. The list is
made again at each use, so a change of TPULOOP_DEVICE_COUNT or of initialize() shows in the next call.

Where tpuloop departs from Keras, the departure is one of those the spec (distribution.md) recommends and each is
said in the docstring concerned: a DataParallel over a mesh of several axes warns (through the C library's log)
instead of raising Python's TypeError; DeviceMesh checks device names, duplicate axis names and axis sizes when it
is made; LayoutMap checks its regular expressions on insertion; a TensorLayout entry naming several mesh axes is
rejected when it is made; a rank-0 data shape is a ValueError, not an IndexError; `key in layout_map` tests the
exact key.
"""
import collections.abc
import contextlib
import ctypes
import operator
import os
import threading
import weakref
from ctypes import POINTER, Structure, c_bool, c_char, c_char_p, c_int, c_int64, c_size_t, c_void_p

import numpy as np

from . import data as _data
from . import errors
from ._lib import check, cstr, last_error, lib

__all__ = ["list_devices", "get_device_count", "initialize", "num_processes", "process_id", "DeviceMesh",
           "TensorLayout", "LayoutMap", "Distribution", "DataParallel", "ModelParallel", "distribution",
           "set_distribution"]

# ---- the C structs and functions -------------------------------------------------------------------------------

_DEVICE_NAME_MAX = 24  # TL_DEVICE_NAME_MAX
_MATCH_FULL, _MATCH_SEARCH = 0, 1  # tl_match_mode
_DISTRIBUTION_BASE, _DATA_PARALLEL, _MODEL_PARALLEL = 0, 1, 2  # tl_distribution_kind
_KERAS_3_15 = 0  # tl_keras_version
_INPUT_DATASET, _INPUT_OTHER = 0, 3  # tl_input_kind
_SHARD_IDENTITY, _SHARD_REPLICATE, _SHARD_SLICE, _SHARD_ROUND_ROBIN = 0, 1, 2, 3  # tl_shard_action


class Device(Structure):
    """tl_device."""
    _fields_ = [("id", c_int), ("host", c_int), ("local_index", c_int), ("cpu", c_int),
                ("name", c_char * _DEVICE_NAME_MAX)]


class Process(Structure):
    """tl_process."""
    _fields_ = [("num_processes", c_int), ("process_id", c_int)]


class DataParallelOptions(Structure):
    """tl_data_parallel_options."""
    _fields_ = [("device_mesh", c_void_p), ("devices", POINTER(c_int)), ("ndevices", c_int),
                ("devices_shape", POINTER(c_int64)), ("devices_ndim", c_int), ("discover", c_void_p),
                ("auto_shard_dataset", c_bool), ("process", Process)]


class ModelParallelOptions(Structure):
    """tl_model_parallel_options."""
    _fields_ = [("layout_map", c_void_p), ("batch_dim_name", c_char_p), ("auto_shard_dataset", c_bool),
                ("process", Process), ("legacy_shard_id", c_bool)]


class VariableDesc(Structure):
    """tl_variable_desc."""
    _fields_ = [("path", c_char_p), ("rank", c_int), ("shape", POINTER(c_int64)), ("layout", c_void_p)]


class DistributionScope(Structure):
    """tl_distribution_scope."""
    _fields_ = [("previous", c_void_p)]


class ShardInput(Structure):
    """tl_shard_input."""
    _fields_ = [("kind", c_int), ("batched", c_bool), ("global_batch", c_int64), ("type_name", c_char_p)]


class ShardPlan(Structure):
    """tl_shard_plan."""
    _fields_ = [("action", c_int), ("global_batch", c_int64), ("slice_size", c_int64), ("num_slices", c_int),
                ("slice_index", c_int)]


# The structs tests/test_distribution_abi.py compares with the C compiler's layout: C name -> mirror.
STRUCTS = {"tl_device": Device, "tl_process": Process, "tl_data_parallel_options": DataParallelOptions,
           "tl_model_parallel_options": ModelParallelOptions, "tl_variable_desc": VariableDesc,
           "tl_distribution_scope": DistributionScope, "tl_shard_input": ShardInput, "tl_shard_plan": ShardPlan}


def _declare(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_P = c_void_p
_PP = POINTER(c_void_p)
_IP = POINTER(c_int)
# devices.h
_declare("tl_devices_create", c_int, c_int, c_int, c_int, _PP)
_declare("tl_devices_destroy", None, _P)
_declare("tl_devices_count", c_int, _P)
_declare("tl_devices_get", POINTER(Device), _P, c_int)
_declare("tl_list_devices", c_int, _P, c_char_p, POINTER(_IP), _IP)
_declare("tl_free_ids", None, _IP)
_declare("tl_get_device_count", c_int, _P, c_char_p, _IP)
_declare("tl_device_parse", c_int, _P, c_char_p, _IP)
# mesh.h: DeviceMesh
_declare("tl_mesh_create", c_int, _P, POINTER(c_int64), c_int, POINTER(c_char_p), c_int, _IP, c_int, _PP)
_declare("tl_mesh_destroy", None, _P)
_declare("tl_mesh_ndim", c_int, _P)
_declare("tl_mesh_axis_size", c_int64, _P, c_int)
_declare("tl_mesh_axis_name", c_char_p, _P, c_int)
_declare("tl_mesh_device_count", c_int, _P)
_declare("tl_mesh_device_at", c_int, _P, c_int)
_declare("tl_mesh_repr", c_int, _P, c_char_p, c_size_t)
# mesh.h: TensorLayout
_declare("tl_layout_create", c_int, POINTER(c_char_p), c_int, _P, _PP)
_declare("tl_layout_copy", c_int, _P, _PP)
_declare("tl_layout_destroy", None, _P)
_declare("tl_layout_rank", c_int, _P)
_declare("tl_layout_axis", c_char_p, _P, c_int)
_declare("tl_layout_mesh", c_void_p, _P)
_declare("tl_layout_set_mesh", c_int, _P, _P)
_declare("tl_layout_repr", c_int, _P, c_char_p, c_size_t)
# mesh.h: LayoutMap
_declare("tl_layout_map_create", c_int, _P, c_int, _PP)
_declare("tl_layout_map_destroy", None, _P)
_declare("tl_layout_map_set", c_int, _P, c_char_p, _P)
_declare("tl_layout_map_get", c_int, _P, c_char_p, _PP)
_declare("tl_layout_map_pop", c_int, _P, c_char_p, _PP)
_declare("tl_layout_map_size", c_int, _P)
_declare("tl_layout_map_key", c_char_p, _P, c_int)
_declare("tl_layout_map_value", c_void_p, _P, c_int)
# distribution.h
_declare("tl_initialize", c_int, c_char_p, c_int, c_int, POINTER(c_char_p), POINTER(Process), c_char_p, c_size_t)
_declare("tl_data_parallel_options_init", None, POINTER(DataParallelOptions))
_declare("tl_model_parallel_options_init", None, POINTER(ModelParallelOptions))
_declare("tl_data_parallel_create", c_int, POINTER(DataParallelOptions), _PP)
_declare("tl_model_parallel_create", c_int, POINTER(ModelParallelOptions), _PP)
_declare("tl_distribution_create", c_int, _P, c_char_p, Process, _PP)
_declare("tl_distribution_destroy", None, _P)
_declare("tl_distribution_kind_of", c_int, _P)
_declare("tl_distribution_mesh", c_void_p, _P)
_declare("tl_distribution_batch_dim_name", c_char_p, _P)
_declare("tl_distribution_auto_shard_dataset", c_bool, _P)
_declare("tl_distribution_set_auto_shard_dataset", None, _P, c_bool)
_declare("tl_distribution_num_processes", c_int, _P)
_declare("tl_distribution_process_id", c_int, _P)
_declare("tl_distribution_is_multi_process", c_bool, _P)
_declare("tl_distribution_num_model_replicas", c_int, _P, _IP)
_declare("tl_distribution_data_shard_id", c_int, _P, _IP)
_declare("tl_distribution_num_data_shards", c_int, _P, _IP)
_declare("tl_distribution_get_data_layout", c_int, _P, POINTER(c_int64), c_int, _PP)
_declare("tl_distribution_get_variable_layout", c_int, _P, POINTER(VariableDesc), _PP)
_declare("tl_distribution_get_tensor_layout", c_int, _P, c_char_p, _PP)
_declare("tl_distribution_repr", c_int, _P, c_char_p, c_size_t)
_declare("tl_distribution_current", c_void_p)
_declare("tl_distribution_set", None, _P)
_declare("tl_distribution_scope_enter", None, _P, POINTER(DistributionScope))
_declare("tl_distribution_scope_exit", None, POINTER(DistributionScope))
_declare("tl_distribute_dataset_plan", c_int, _P, POINTER(ShardInput), c_int, POINTER(ShardPlan))


class _Handle:
    """One C object: its address, the function that frees it (None for an object another one owns) and the
    handles of what it borrows, which live at least as long as it does. The C object is freed when the last
    Python reference to its handle goes (__del__), after everything that borrows it."""

    def __init__(self, ptr, destroy=None, keep=()):
        self.ptr = ptr
        self._destroy = destroy
        self.keep = list(keep)

    def __del__(self):
        ptr, self.ptr = self.ptr, None
        if ptr and self._destroy is not None:
            self._destroy(ptr)


def _text(fn, ptr):
    """The text of a C repr function (snprintf's contract)."""
    n = fn(ptr, None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    fn(ptr, buf, n + 1)
    return buf.value.decode("utf-8", "replace")


def _int64s(values):
    return (c_int64 * max(len(values), 1))(*values)


def _strs(values):
    return (c_char_p * max(len(values), 1))(*[cstr(v) for v in values])


# ---- processes and devices ---------------------------------------------------------------------------------------

_process = (1, 0)      # (num_processes, process_id): what initialize() set; {1, 0} until it is called
_coordinator = None    # the coordinator address initialize() resolved ("" when none)


def initialize(job_addresses=None, num_processes=None, process_id=None):
    """Keras' initialize(job_addresses, num_processes, process_id) with the JAX backend's checks (tl_initialize).

    Each argument left None is taken from KERAS_DISTRIBUTION_JOB_ADDRESSES, KERAS_DISTRIBUTION_NUM_PROCESSES or
    KERAS_DISTRIBUTION_PROCESS_ID when that variable is set; explicit arguments win. A comma-separated
    job_addresses must list num_processes entries ("The provided job_addresses [...] has 2 jobs, but
    num_processes is 3"); the coordinator is its first entry. num_processes defaults to 1 and process_id to 0.

    The result is what every later list_devices(), DeviceMesh and distribution sees: the job's devices are
    num_processes blocks of this process's device count, and DataParallel / ModelParallel shard datasets for
    process process_id. The distributed runtime itself (MPI, the seed agreement of Keras' JAX backend) is
    started by the C job runtime, not here; unlike JAX, initialize may be called again to change the process.
    """
    global _process, _coordinator
    if job_addresses is not None and not isinstance(job_addresses, str):
        raise TypeError("initialize: job_addresses must be a str ('host:port,host:port') or None, got %r"
                        % (job_addresses,))
    env = [("%s=%s" % (k, v)).encode("utf-8", "surrogateescape") for k, v in os.environ.items()
           if k.startswith("KERAS_DISTRIBUTION_")]
    envp = (c_char_p * (len(env) + 1))(*env, None)
    addrs = job_addresses if job_addresses is not None else os.environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES", "")
    coordinator = ctypes.create_string_buffer(len(addrs.encode("utf-8", "surrogateescape")) + 1)
    out = Process()
    check(lib.tl_initialize(cstr(job_addresses), -1 if num_processes is None else operator.index(num_processes),
                            -1 if process_id is None else operator.index(process_id), envp, ctypes.byref(out),
                            coordinator, len(coordinator)))
    _process = (out.num_processes, out.process_id)
    _coordinator = coordinator.value.decode("utf-8", "replace")


def num_processes():
    """The number of processes of the job (Keras' backend num_processes()): 1 until initialize() says more."""
    return _process[0]


def process_id():
    """This process's index in the job (Keras' backend process_id()): 0 until initialize() says otherwise."""
    return _process[1]


def _per_host_devices():
    """TPULOOP_DEVICE_COUNT as tl_devices_create's per_host: 0 (one device per core) when unset."""
    v = os.environ.get("TPULOOP_DEVICE_COUNT", "").strip()
    if not v:
        return 0
    try:
        return int(v, 10)
    except ValueError:
        raise errors.InvalidArgumentError("TPULOOP_DEVICE_COUNT=%r is not an integer; give the number of devices "
                                          "per process (0 for one per core)" % v) from None


@contextlib.contextmanager
def _device_list():
    """The job's C device list (tl_devices), freed on leaving the block."""
    devs = c_void_p()
    check(lib.tl_devices_create(_per_host_devices(), _process[0], _process[1], ctypes.byref(devs)))
    try:
        yield devs
    finally:
        lib.tl_devices_destroy(devs)


def _device_name(devs, device_id):
    d = lib.tl_devices_get(devs, device_id)
    return d.contents.name.decode() if d else "cpu:%d" % device_id


def list_devices(device_type=None):
    """Keras' list_devices(device_type=None): the names of the job's devices, "cpu:0" .. "cpu:<D-1>", in global
    id order (every process's devices after initialize(), as JAX lists them).

    device_type None or "cpu" (any case) lists them all; "gpu" and "tpu" raise ValueError (this build has CPU
    devices only, as JAX raises for a backend it lacks), as does any other type.
    """
    with _device_list() as devs:
        ids = _IP()
        n = c_int()
        check(lib.tl_list_devices(devs, cstr(device_type), ctypes.byref(ids), ctypes.byref(n)))
        try:
            return [_device_name(devs, ids[i]) for i in range(n.value)]
        finally:
            lib.tl_free_ids(ids)


def get_device_count(device_type=None):
    """Keras' get_device_count(device_type=None): len(list_devices(device_type)), with its errors."""
    with _device_list() as devs:
        n = c_int()
        check(lib.tl_get_device_count(devs, cstr(device_type), ctypes.byref(n)))
        return n.value


# ---- DeviceMesh --------------------------------------------------------------------------------------------------

_meshes = weakref.WeakValueDictionary()  # C mesh address -> its DeviceMesh, to give C layouts their mesh


def _mesh_ptr(mesh):
    return mesh._h.ptr if mesh is not None else None


class DeviceMesh:
    """Keras' DeviceMesh(shape, axis_names, devices=None): the devices arranged in an N-D array with one name per
    axis, by a row-major reshape of the device list (with shape (4, 2), devices[1][0] is list entry 2).

    devices: device names ("cpu:3"; a name without ':' is id 0 of its type), a flat list or an array of any
    shape holding prod(shape) of them; None takes list_devices(). The checks and messages are Keras', in its
    order: "Shape and axis_names cannot be empty", "Shape and axis_names should have same size", "Shape does not
    match the number of devices"; then, where Keras waits for the backend, tpuloop checks at once that axis names
    are distinct non-empty strings, sizes are >= 1, and each device exists ("Device not found: cpu:9") and appears
    once.

    .shape and .axis_names are what was given (Keras keeps them as given: a tuple stays a tuple, a list a list),
    .devices a NumPy array of the device names of that shape. repr: "<DeviceMesh shape=(4, 2),
    axis_names=['batch', 'model']>".
    """

    def __init__(self, shape, axis_names, devices=None):
        dims = tuple(operator.index(s) for s in shape)
        names = list(axis_names)
        for a in names:
            if not isinstance(a, str):
                raise TypeError("DeviceMesh axis names must be strings, got %r in axis_names=%r" % (a, axis_names))
        cshape, cnames = _int64s(dims), _strs(names)
        ptr = c_void_p()
        with _device_list() as devs:
            if devices is None:
                check(lib.tl_mesh_create(devs, cshape, len(dims), cnames, len(names), None, 0, ctypes.byref(ptr)))
                flat = [_device_name(devs, lib.tl_mesh_device_at(ptr, i)) for i in range(lib.tl_mesh_device_count(ptr))]
            else:
                flat = [d for d in np.asarray(devices, dtype=object).reshape(-1)]
                ids = (c_int * max(len(flat), 1))()
                parse_error = None
                for i, name in enumerate(flat):
                    if not isinstance(name, str):
                        raise TypeError("DeviceMesh devices must be device names such as 'cpu:0', got %r" % (name,))
                    one = c_int()
                    st = lib.tl_device_parse(devs, cstr(name), ctypes.byref(one))
                    if st != 0 and parse_error is None:
                        parse_error = errors.from_status(st, last_error())
                    ids[i] = one.value if st == 0 else i
                if parse_error is not None:
                    # Keras' shape checks come first: run them on the positions, then report the name.
                    check(lib.tl_mesh_create(None, cshape, len(dims), cnames, len(names),
                                             (c_int * max(len(flat), 1))(*range(len(flat))), len(flat),
                                             ctypes.byref(ptr)))
                    lib.tl_mesh_destroy(ptr)
                    raise parse_error
                check(lib.tl_mesh_create(devs, cshape, len(dims), cnames, len(names), ids, len(flat),
                                         ctypes.byref(ptr)))
        self._h = _Handle(ptr.value, lib.tl_mesh_destroy)
        self._shape = shape
        self._axis_names = axis_names
        self._devices = np.array(flat).reshape(dims)
        _meshes[self._h.ptr] = self

    @classmethod
    def _wrap(cls, ptr, keep):
        """The DeviceMesh of a C mesh another C object owns (DataParallel's); keep is the owner's handle."""
        m = cls.__new__(cls)
        m._h = _Handle(ptr, None, [keep])
        dims = tuple(lib.tl_mesh_axis_size(ptr, i) for i in range(lib.tl_mesh_ndim(ptr)))
        m._shape = dims
        m._axis_names = [lib.tl_mesh_axis_name(ptr, i).decode() for i in range(len(dims))]
        with _device_list() as devs:
            m._devices = np.array([_device_name(devs, lib.tl_mesh_device_at(ptr, i))
                                   for i in range(lib.tl_mesh_device_count(ptr))]).reshape(dims)
        _meshes[ptr] = m
        return m

    @property
    def shape(self):
        return self._shape

    @property
    def axis_names(self):
        return self._axis_names

    @property
    def devices(self):
        return self._devices

    def __repr__(self):
        return _text(lib.tl_mesh_repr, self._h.ptr)


def _mesh_of(ptr, keep=None):
    """The DeviceMesh of a C mesh address, or None for NULL."""
    if not ptr:
        return None
    m = _meshes.get(ptr)
    if m is None:  # every C mesh is made here and stays referenced by its users; keep this one's owner alive
        m = DeviceMesh._wrap(ptr, keep)
    return m


# ---- TensorLayout ------------------------------------------------------------------------------------------------

def _invalid_axes(axes, mesh):
    """Keras' "Invalid axis names for Layout" for entries no C layout can hold (a tuple naming several axes),
    in the C library's format: both sets in first-seen order."""
    got = []
    for a in axes:
        if a is not None and a not in got:
            got.append(a)
    return errors.InvalidArgumentError("Invalid axis names for Layout. Valid axis names: {%s}, Got {%s}" % (
        ", ".join(repr(a) for a in mesh.axis_names), ", ".join(repr(a) for a in got)))


class TensorLayout:
    """Keras' TensorLayout(axes, device_mesh=None): for each dimension of a tensor, the mesh axis it is split over
    (None: whole on every device).

    axes is made a tuple as Keras does (so a string "ab" is ('a', 'b')). With a mesh, every entry must be one of
    its axis names ("Invalid axis names for Layout. Valid axis names: {...}, Got {...}"); like Keras the rank is
    not compared with any tensor. .device_mesh may be set once, while unset ("Cannot override device mesh value.
    Existing value is <DeviceMesh ...>", even for the same mesh). An entry that is a tuple of several axis names
    (JAX's multi-axis sharding) is rejected when the layout is made, with a mesh by Keras' "Invalid axis names"
    and without one too: Keras only rejects it once a mesh is set, and a C layout names one axis per dimension.
    repr: "<TensorLayout axes=('batch', None), device_mesh=<DeviceMesh ...>>".
    """

    def __init__(self, axes, device_mesh=None):
        axes = tuple(axes)
        if device_mesh is not None and not isinstance(device_mesh, DeviceMesh):
            raise TypeError("TensorLayout: device_mesh must be a DeviceMesh or None, got %r" % (device_mesh,))
        for a in axes:
            if a is None or isinstance(a, str):
                continue
            if device_mesh is not None and not isinstance(a, collections.abc.Hashable):
                raise TypeError("unhashable type: '%s'" % type(a).__name__)
            if device_mesh is not None:
                raise _invalid_axes(axes, device_mesh)
            raise errors.InvalidArgumentError(
                "TensorLayout: entry %r of axes=%r is not an axis name or None; tpuloop layouts split a dimension "
                "over one mesh axis (Keras rejects such an entry as soon as a mesh is set: Invalid axis names for "
                "Layout)" % (a, axes))
        ptr = c_void_p()
        check(lib.tl_layout_create(_strs(axes), len(axes), _mesh_ptr(device_mesh), ctypes.byref(ptr)))
        self._h = _Handle(ptr.value, lib.tl_layout_destroy, [device_mesh._h] if device_mesh is not None else [])
        self._axes = axes
        self._mesh = device_mesh

    @classmethod
    def _from_c(cls, ptr, keep=None):
        """The TensorLayout of a C layout this object now owns (a copy the C library returned)."""
        l = cls.__new__(cls)
        mesh = _mesh_of(lib.tl_layout_mesh(ptr), keep)
        l._h = _Handle(ptr, lib.tl_layout_destroy, [mesh._h] if mesh is not None else [])
        rank = lib.tl_layout_rank(ptr)
        l._axes = tuple(None if a is None else a.decode() for a in (lib.tl_layout_axis(ptr, i) for i in range(rank)))
        l._mesh = mesh
        return l

    @property
    def axes(self):
        return self._axes

    @property
    def device_mesh(self):
        return self._mesh

    @device_mesh.setter
    def device_mesh(self, device_mesh):
        if device_mesh is None and self._mesh is None:
            return
        if device_mesh is not None and not isinstance(device_mesh, DeviceMesh):
            raise TypeError("TensorLayout.device_mesh must be a DeviceMesh, got %r" % (device_mesh,))
        target = device_mesh if device_mesh is not None else self._mesh
        check(lib.tl_layout_set_mesh(self._h.ptr, target._h.ptr))
        self._h.keep.append(device_mesh._h)
        self._mesh = device_mesh

    def __repr__(self):
        return _text(lib.tl_layout_repr, self._h.ptr)


def _layout_or_none(ptr, keep=None):
    return TensorLayout._from_c(ptr.value, keep) if ptr.value else None


# ---- LayoutMap ---------------------------------------------------------------------------------------------------

class LayoutMap(collections.abc.MutableMapping):
    """Keras' LayoutMap(device_mesh): an insertion-ordered map from variable paths ("sequential/dense/kernel") to
    TensorLayouts, keyed by regular expressions.

    layout_map[key] = value: value is a TensorLayout, or a tuple of axis names that becomes one (a list is not,
    as in Keras: "['a', 'b'] should be a TensorLayout type, got <class 'list'>"). A layout without a mesh gets the
    map's (so its axes are checked then); one with its own mesh keeps it. A key set twice is "<key> already exist
    in the LayoutMap with value <TensorLayout ...>". Keys are Python regular expressions, checked when set: the
    subset the C library supports is literals, '.', '^ $', groups, '|', '* + ?', '{m,n}', bracket sets and
    '\\d \\w \\s' (mesh.h); anything else, and any invalid pattern, raises ValueError naming the key.

    layout_map[path]: the layout stored under exactly path, else the one key that matches the whole path
    (re.fullmatch, Keras 3.14+), else None; several matching keys raise "Path '...' matches multiple layout
    specification keys: [...]". match="search" selects Keras 3.0-3.13's re.search instead (a keyword tpuloop
    adds, for maps written without a leading '.*').

    del layout_map[key] and pop(key) take the exact key (KeyError otherwise); len, iteration, keys() and items()
    follow insertion order. Unlike Keras (where `in` goes through the regex lookup and is always true), `key in
    layout_map` tests for the exact key.
    """

    def __init__(self, device_mesh, *, match="fullmatch"):
        if not isinstance(device_mesh, DeviceMesh):
            raise TypeError("LayoutMap: device_mesh must be a DeviceMesh, got %r" % (device_mesh,))
        modes = {"fullmatch": _MATCH_FULL, "search": _MATCH_SEARCH}
        if match not in modes:
            raise ValueError("LayoutMap: match must be 'fullmatch' (Keras 3.14+) or 'search' (Keras 3.0-3.13), "
                             "got %r" % (match,))
        ptr = c_void_p()
        check(lib.tl_layout_map_create(device_mesh._h.ptr, modes[match], ctypes.byref(ptr)))
        self._h = _Handle(ptr.value, lib.tl_layout_map_destroy, [device_mesh._h])
        self._mesh = device_mesh
        self._layouts = {}

    @property
    def device_mesh(self):
        return self._mesh

    @staticmethod
    def _check_key(key):
        if not isinstance(key, str):
            raise TypeError("LayoutMap keys are variable paths or regular expressions (str), got %r" % (key,))

    def __setitem__(self, key, value):
        self._check_key(key)
        if key in self._layouts:
            check(lib.tl_layout_map_set(self._h.ptr, cstr(key), None))  # the C library's duplicate-key error
        if isinstance(value, tuple):
            value = TensorLayout(value)
        if not isinstance(value, TensorLayout):
            raise errors.InvalidArgumentError("%s should be a TensorLayout type, got %s" % (value, type(value)))
        copy = c_void_p()
        check(lib.tl_layout_copy(value._h.ptr, ctypes.byref(copy)))
        check(lib.tl_layout_map_set(self._h.ptr, cstr(key), copy))  # the map owns copy from here on
        if value.device_mesh is None:
            value.device_mesh = self._mesh  # Keras sets the map's mesh on the layout given; the C map accepted it
        else:
            self._h.keep.append(value.device_mesh._h)  # the map's copy borrows the layout's own mesh
        self._layouts[key] = value

    def __getitem__(self, key):
        self._check_key(key)
        out = c_void_p()
        check(lib.tl_layout_map_get(self._h.ptr, cstr(key), ctypes.byref(out)))
        if not out.value:
            return None
        for i in range(lib.tl_layout_map_size(self._h.ptr)):
            if lib.tl_layout_map_value(self._h.ptr, i) == out.value:
                return self._layouts[lib.tl_layout_map_key(self._h.ptr, i).decode()]
        raise errors.InternalError("LayoutMap: the C map returned a layout it does not hold for %r" % key)

    def __delitem__(self, key):
        self.pop(key)

    _MISSING = object()

    def pop(self, key, default=_MISSING):
        """Keras' pop(key): removes the entry stored under exactly key and returns its layout; KeyError (or
        default, when given) when no key equals key: patterns are not applied."""
        if not isinstance(key, str) or key not in self._layouts:
            if default is not LayoutMap._MISSING:
                return default
            raise KeyError(key)
        out = c_void_p()
        check(lib.tl_layout_map_pop(self._h.ptr, cstr(key), ctypes.byref(out)))
        lib.tl_layout_destroy(out)
        return self._layouts.pop(key)

    def __contains__(self, key):
        return key in self._layouts

    def __len__(self):
        return len(self._layouts)

    def __iter__(self):
        return iter(list(self._layouts))

    def __repr__(self):
        return "LayoutMap(%r, {%s})" % (self._mesh, ", ".join("%r: %r" % kv for kv in self._layouts.items()))


# ---- distributions -----------------------------------------------------------------------------------------------

_distributions = weakref.WeakValueDictionary()  # C distribution address -> its Python object
_local = threading.local()                       # .current: this thread's distribution (Keras' global_state)


def _input_type_name(obj):
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else "%s.%s" % (t.__module__, t.__qualname__)


def _leaves(element):
    """The arrays of a dataset element (a NumPy array, or a tuple / dict of them), in structure order."""
    if isinstance(element, dict):
        return [leaf for k in element for leaf in _leaves(element[k])]
    if isinstance(element, (tuple, list)):
        return [leaf for v in element for leaf in _leaves(v)]
    return [np.asarray(element)]


def _rebuild(template, leaves):
    """template's structure with its arrays taken in order from the iterator leaves."""
    if isinstance(template, dict):
        return {k: _rebuild(v, leaves) for k, v in template.items()}
    if isinstance(template, (tuple, list)):
        return tuple(_rebuild(v, leaves) for v in template)
    return next(leaves)


def _batch_size(dataset):
    """(batched, G) of a tpuloop Dataset, from its first element, as tf.data's compute_batch_size reads the
    element spec: a component of rank 0 means unbatched; G is the leading dimension when every component has
    the same one, else -1 (unknown); an empty dataset has no known batch size."""
    it = iter(dataset)
    try:
        first = next(it, None)
    finally:
        it.close()
    if first is None:
        return True, -1
    leaves = _leaves(first)
    if any(a.ndim == 0 for a in leaves):
        return False, -1
    dims = {a.shape[0] for a in leaves}
    return True, dims.pop() if len(dims) == 1 else -1


class _ShardOfBatches(_data.Dataset):
    """The shard of a batched tpuloop Dataset that one process reads under Keras 3.15's distribute_dataset:
    dataset.rebatch(G // S), i.e. unbatch().batch(G // S) over the whole stream, keeping sub-batches index,
    index + S, ... (tf.data's shard(S, index)). A partial last global batch of k rows gives only the first
    ceil(k / (G // S)) shards a (possibly short) last batch, as tf.data does.

    Iterating it from Python gives exactly those batches. The C pipeline has no unbatch / rebatch transform, so
    this dataset cannot be built in C: an estimator's input_fn that returns it (or a transform of it) raises
    UnimplementedError naming what is missing."""

    def __init__(self, parent, slice_size, num_slices, index):
        super().__init__(self._no_c_pipeline, parent.structure, parent._refs)
        self._parent = parent
        self._slice_size, self._num_slices, self._index = int(slice_size), int(num_slices), int(index)

    def _no_c_pipeline(self):
        raise errors.UnimplementedError(
            "distribute_dataset: this process's shard cuts each global batch into %d slices of %d rows "
            "(tf.data's rebatch), and tpuloop's C datasets have no unbatch / rebatch transform; iterate the shard "
            "from Python, or shard the input yourself before batching (dataset.shard(num_processes, process_id)) "
            "and set distribution.auto_shard_dataset = False" % (self._num_slices, self._slice_size))

    def __iter__(self):
        g, S, k = self._slice_size, self._num_slices, self._index
        template, buf, j = None, None, 0
        for element in self._parent:
            leaves = _leaves(element)
            dims = {a.shape[0] if a.ndim else -1 for a in leaves}
            if len(dims) != 1 or -1 in dims:
                raise errors.InvalidArgumentError(
                    "distribute_dataset: a batch whose components have leading dimensions %s cannot be rebatched"
                    % sorted(dims))
            if template is None:
                template = element
            buf = leaves if buf is None else [np.concatenate([b, a]) for b, a in zip(buf, leaves)]
            while buf[0].shape[0] >= g:
                if j % S == k:
                    yield _rebuild(template, iter([b[:g] for b in buf]))
                buf = [b[g:] for b in buf]
                j += 1
        if buf is not None and buf[0].shape[0] > 0 and j % S == k:
            yield _rebuild(template, iter(buf))


class Distribution:
    """Keras' Distribution(device_mesh, batch_dim_name=None, auto_shard_dataset=True), the base of DataParallel
    and ModelParallel: a device mesh and a rule for placing data and variables.

    The base class itself has no rule: get_data_layout, get_variable_layout, get_tensor_layout and
    num_model_replicas raise NotImplementedError (UnimplementedError), as Keras' abstract methods do.
    num_processes and the process this is are read from initialize() when the distribution is made, as Keras
    reads them from the backend.
    """

    def __init__(self, device_mesh, batch_dim_name=None, auto_shard_dataset=True):
        if not isinstance(device_mesh, DeviceMesh):
            raise TypeError("Distribution: device_mesh must be a DeviceMesh, got %r" % (device_mesh,))
        ptr = c_void_p()
        check(lib.tl_distribution_create(device_mesh._h.ptr, cstr(batch_dim_name), Process(*_process),
                                         ctypes.byref(ptr)))
        self._adopt(ptr.value, [device_mesh._h], device_mesh)
        lib.tl_distribution_set_auto_shard_dataset(self._h.ptr, bool(auto_shard_dataset))

    def _adopt(self, ptr, keep, mesh=None):
        """Takes ownership of the C distribution ptr, which borrows the objects of the handles keep."""
        self._h = _Handle(ptr, lib.tl_distribution_destroy, keep)
        self._mesh = mesh if mesh is not None else _mesh_of(lib.tl_distribution_mesh(ptr), self._h)
        _distributions[ptr] = self

    def _c_handle(self):
        """The C tl_distribution* (a c_void_p), valid while this object lives; e.g. tl_estimator_options'
        distribution."""
        return c_void_p(self._h.ptr)

    @property
    def device_mesh(self):
        return self._mesh

    @property
    def batch_dim_name(self):
        b = lib.tl_distribution_batch_dim_name(self._h.ptr)
        return b.decode() if b is not None else None

    @property
    def auto_shard_dataset(self):
        return bool(lib.tl_distribution_auto_shard_dataset(self._h.ptr))

    @auto_shard_dataset.setter
    def auto_shard_dataset(self, value):
        lib.tl_distribution_set_auto_shard_dataset(self._h.ptr, bool(value))

    @property
    def num_processes(self):
        return lib.tl_distribution_num_processes(self._h.ptr)

    def _int(self, fn):
        out = c_int()
        check(fn(self._h.ptr, ctypes.byref(out)))
        return out.value

    @property
    def num_model_replicas(self):
        """R: the mesh's device count for DataParallel, the size of the batch axis for ModelParallel
        (ValueError "'nope' is not in list" when batch_dim_name is not a mesh axis)."""
        return self._int(lib.tl_distribution_num_model_replicas)

    @property
    def data_shard_id(self):
        """The shard of the data this process reads: process_id when R >= P, else process_id // (P // R)."""
        return self._int(lib.tl_distribution_data_shard_id)

    @property
    def num_data_shards(self):
        """Keras HEAD's num_data_shards (unreleased): min(R, P)."""
        return self._int(lib.tl_distribution_num_data_shards)

    def get_data_layout(self, data_shape):
        """Keras' get_data_layout(data_shape): the first dimension on batch_dim_name, the others None, on this
        distribution's mesh. A rank-0 shape raises ValueError (Keras: IndexError); a batch_dim_name that is not
        a mesh axis raises "Invalid axis names for Layout". Entries of data_shape may be None (unknown)."""
        dims = [-1 if s is None else operator.index(s) for s in data_shape]
        out = c_void_p()
        check(lib.tl_distribution_get_data_layout(self._h.ptr, _int64s(dims), len(dims), ctypes.byref(out)))
        return _layout_or_none(out, self._h)

    def get_variable_layout(self, variable):
        """Keras' get_variable_layout(variable): the variable's own layout when it has one (Keras 3.10+:
        variable._layout), else (ModelParallel) the LayoutMap's layout for variable.path, else replicated:
        (None,) * rank on this distribution's mesh.

        variable: an object with .path (str or None: no LayoutMap lookup) and .shape, and optionally ._layout (a
        TensorLayout or None), as a Keras variable has; or a (path, shape) pair. Several LayoutMap keys matching
        the path raise ValueError ("matches multiple layout specification keys")."""
        if isinstance(variable, (tuple, list)) and len(variable) == 2 and (variable[0] is None or
                                                                           isinstance(variable[0], str)):
            path, shape, own = variable[0], variable[1], None
        elif hasattr(variable, "path") and hasattr(variable, "shape"):
            path, shape, own = variable.path, variable.shape, getattr(variable, "_layout", None)
        else:
            raise TypeError("get_variable_layout: expected a variable (with .path and .shape) or a (path, shape) "
                            "pair, got %r" % (variable,))
        if own is not None and not isinstance(own, TensorLayout):
            raise TypeError("get_variable_layout: the variable's _layout must be a TensorLayout, got %r" % (own,))
        if path is not None and not isinstance(path, str):
            raise TypeError("get_variable_layout: the variable's path must be a str, got %r" % (path,))
        dims = [operator.index(s) for s in shape]
        desc = VariableDesc(cstr(path), len(dims), _int64s(dims), own._h.ptr if own is not None else None)
        out = c_void_p()
        check(lib.tl_distribution_get_variable_layout(self._h.ptr, ctypes.byref(desc), ctypes.byref(out)))
        return _layout_or_none(out, self._h)

    def get_tensor_layout(self, path):
        """Keras' get_tensor_layout(path): the layout an intermediate tensor is moved to; DataParallel: None;
        ModelParallel: layout_map[path] (None when no key matches)."""
        if not isinstance(path, str):
            raise TypeError("get_tensor_layout: path must be a str, got %r" % (path,))
        out = c_void_p()
        check(lib.tl_distribution_get_tensor_layout(self._h.ptr, cstr(path), ctypes.byref(out)))
        return _layout_or_none(out, self._h)

    def distribute_dataset(self, dataset):
        """Keras 3.15's distribute_dataset(dataset): the part of the global dataset this process reads.

        One process, or auto_shard_dataset False: the dataset itself, whatever it is. Otherwise the dataset must
        be a tpuloop.data.Dataset ("The dataset type <class 'list'> is not supported for auto-sharding in
        multi-process setting.") whose elements are batches ("The batch size of the input dataset is unknown";
        the global batch size G is read from the first element, as tf.data reads its element spec). With one
        model replica (R = 1) every process reads every batch: the dataset, prefetched. Otherwise each global
        batch is cut into S slices of G // S rows, S = P when R >= P (G % P must be 0: "Global batch size must
        be divisible by the number of processes") and R when replicas span processes (G % R == 0; the processes
        of one replica read the same slice, data_shard_id), and this process reads its slice of every batch:
        see _ShardOfBatches, which can be iterated from Python but not built in C (tpuloop's C datasets have no
        rebatch).
        """
        d = self._h.ptr
        if not (lib.tl_distribution_is_multi_process(d) and lib.tl_distribution_auto_shard_dataset(d)):
            return dataset
        if isinstance(dataset, _data.Dataset):
            batched, G = _batch_size(dataset)
            inp = ShardInput(_INPUT_DATASET, batched, G, None)
        else:
            inp = ShardInput(_INPUT_OTHER, True, -1, cstr(_input_type_name(dataset)))
        plan = ShardPlan()
        check(lib.tl_distribute_dataset_plan(d, ctypes.byref(inp), _KERAS_3_15, ctypes.byref(plan)))
        if plan.action == _SHARD_IDENTITY:
            return dataset
        if plan.action == _SHARD_REPLICATE:
            return dataset.prefetch(_data.AUTOTUNE)
        if plan.action == _SHARD_SLICE:
            return _ShardOfBatches(dataset, plan.slice_size, plan.num_slices, plan.slice_index)
        raise errors.InternalError("distribute_dataset: unexpected shard plan action %d" % plan.action)

    @contextlib.contextmanager
    def scope(self):
        """Keras' scope(): makes this distribution current (distribution() returns it, in C too:
        tl_distribution_current) inside the block, and restores the previous one on every way out, exceptions
        included; scopes nest."""
        previous = getattr(_local, "current", None)
        sc = DistributionScope()
        lib.tl_distribution_scope_enter(self._h.ptr, ctypes.byref(sc))
        _local.current = self
        try:
            yield
        finally:
            lib.tl_distribution_scope_exit(ctypes.byref(sc))
            _local.current = previous

    def __repr__(self):
        return _text(lib.tl_distribution_repr, self._h.ptr)


class DataParallel(Distribution):
    """Keras' DataParallel(device_mesh=None, devices=None, auto_shard_dataset=True): every device holds the whole
    model and a slice of each batch.

    The mesh is, in this order: device_mesh (a DeviceMesh, else ValueError "Expect `mesh` to be an instance of
    `DeviceMesh`. Received: mesh=foo (of type <class 'str'>)"); given together with devices it wins and devices
    is ignored, as in Keras. A mesh of several axes logs Keras' intended warning "Expect the input mesh to be 1D,
    but received mesh.devices.ndim=2. The first axis will be used for data-parallel sharding." and uses its first
    axis (Keras 3.15 raises TypeError there by accident). Else devices (device names; any sequence, a NumPy array
    included): a mesh of the devices' shape with the one axis "batch", so a 2-D device list fails with "Shape and
    axis_names should have same size". Else (devices None or empty) list_devices(), as a 1-D "batch" mesh.

    batch_dim_name is the mesh's first axis; get_data_layout puts the batch on it, variables are replicated
    (or keep their own layout), get_tensor_layout is None. num_model_replicas is the mesh's device count.
    """

    def __init__(self, device_mesh=None, devices=None, auto_shard_dataset=True):
        o = DataParallelOptions()
        lib.tl_data_parallel_options_init(ctypes.byref(o))
        o.auto_shard_dataset = bool(auto_shard_dataset)
        o.process = Process(*_process)
        out = c_void_p()
        if device_mesh is not None:
            if not isinstance(device_mesh, DeviceMesh):
                raise errors.InvalidArgumentError("Expect `mesh` to be an instance of `DeviceMesh`. Received: "
                                                  "mesh=%s (of type %s)" % (device_mesh, type(device_mesh)))
            o.device_mesh = device_mesh._h.ptr
            check(lib.tl_data_parallel_create(ctypes.byref(o), ctypes.byref(out)))
            self._adopt(out.value, [device_mesh._h], device_mesh)
            return
        with _device_list() as devs:
            o.discover = devs
            if devices is not None and len(devices) > 0:
                arr = np.asarray(devices, dtype=object)
                names = list(arr.reshape(-1))
                ids = (c_int * len(names))()
                for i, name in enumerate(names):
                    if not isinstance(name, str):
                        raise TypeError("DataParallel devices must be device names such as 'cpu:0', got %r"
                                        % (name,))
                    one = c_int()
                    check(lib.tl_device_parse(devs, cstr(name), ctypes.byref(one)))
                    ids[i] = one.value
                shape = _int64s(arr.shape)
                o.devices, o.ndevices = ids, len(names)
                o.devices_shape, o.devices_ndim = shape, arr.ndim
            check(lib.tl_data_parallel_create(ctypes.byref(o), ctypes.byref(out)))
        self._adopt(out.value, [])


class ModelParallel(Distribution):
    """Keras' ModelParallel(*, layout_map=None, batch_dim_name=None, auto_shard_dataset=True, **kwargs): variables
    placed by a LayoutMap, the batch split over the mesh axis batch_dim_name.

    Keyword-only as in Keras 3.4+ (a positional argument is a TypeError). A device_mesh keyword is accepted and
    ignored, the mesh being the LayoutMap's, and other unknown keywords are ignored as Keras ignores them.
    layout_map None: ValueError "You must specify a layout_map argument."; not a LayoutMap: ValueError
    "Argument `layout_map` must be a `LayoutMap` instance. Received: layout_map=...". batch_dim_name None or ""
    is the mesh's first axis; a name that is not a mesh axis is accepted here, as in Keras, and fails in
    num_model_replicas and get_data_layout (in a multi-process run, here). In a multi-process run with more
    processes than replicas (P > R), P must be divisible by R (Keras 3.15's check).

    get_variable_layout: the variable's own layout, else layout_map[variable.path], else replicated;
    get_tensor_layout(path): layout_map[path]; num_model_replicas: the size of the batch axis.
    """

    def __init__(self, *, layout_map=None, batch_dim_name=None, auto_shard_dataset=True, **kwargs):
        kwargs.pop("device_mesh", None)
        if layout_map is not None and not isinstance(layout_map, LayoutMap):
            raise errors.InvalidArgumentError("Argument `layout_map` must be a `LayoutMap` instance. Received: "
                                              "layout_map=%s" % (layout_map,))
        if batch_dim_name is not None and not isinstance(batch_dim_name, str):
            raise TypeError("ModelParallel: batch_dim_name must be a str or None, got %r" % (batch_dim_name,))
        o = ModelParallelOptions()
        lib.tl_model_parallel_options_init(ctypes.byref(o))
        o.layout_map = layout_map._h.ptr if layout_map is not None else None
        o.batch_dim_name = cstr(batch_dim_name or None)
        o.auto_shard_dataset = bool(auto_shard_dataset)
        o.process = Process(*_process)
        out = c_void_p()
        check(lib.tl_model_parallel_create(ctypes.byref(o), ctypes.byref(out)))
        self._layout_map = layout_map
        self._adopt(out.value, [layout_map._h], layout_map.device_mesh)

    @property
    def layout_map(self):
        return self._layout_map


# ---- the current distribution ------------------------------------------------------------------------------------

def distribution():
    """Keras' distribution(): this thread's current distribution (set by set_distribution or a scope(), here or
    by C code through tl_distribution_set), None when there is none."""
    ptr = lib.tl_distribution_current()
    if not ptr:
        return None
    current = getattr(_local, "current", None)
    if current is not None and current._h.ptr == ptr:
        return current
    return _distributions.get(ptr)


def set_distribution(value):
    """Keras' set_distribution(value): makes value (a Distribution, or None to clear) this thread's current
    distribution, in C too, and keeps it alive while it is. Keras stores any value; tpuloop takes a
    Distribution or None (TypeError otherwise), since the C runtime reads it."""
    if value is not None and not isinstance(value, Distribution):
        raise TypeError("set_distribution: expected a Distribution (DataParallel, ModelParallel) or None, got %r"
                        % (value,))
    lib.tl_distribution_set(value._h.ptr if value is not None else None)
    _local.current = value

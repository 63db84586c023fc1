"""tpuloop.distribution: Keras 3.15's keras.distribution over libtpuloop, checked with the test vectors of
shared/spec/distribution.md §14 (the ids in the test names: LD-1, DM-1, DP-1, MP-1, LM-1, DS-1, SH-1, ...).

Devices are virtual: TPULOOP_DEVICE_COUNT gives every process that many devices on any machine, and
initialize(num_processes=P, process_id=p) makes this process process p of a P-process job, which is how the
multi-process vectors run in one process (Keras' tests mock the backend's process count the same way).
"""
import ctypes
import gc
import threading

import numpy as np
import pytest

import tpuloop
from tpuloop import distribution as dist
from tpuloop import errors
from tpuloop._lib import lib

DEV8 = ["cpu:%d" % i for i in range(8)]
DEV4 = DEV8[:4]


@pytest.fixture(autouse=True)
def eight_devices(monkeypatch):
    """Each test starts as one process of 8 virtual devices, with no distribution set, and ends the same way."""
    monkeypatch.setenv("TPULOOP_DEVICE_COUNT", "8")
    for name in ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
                 "KERAS_DISTRIBUTION_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    dist.initialize("", 1, 0)
    dist.set_distribution(None)
    yield
    dist.set_distribution(None)
    dist.initialize("", 1, 0)


def job(monkeypatch, num_processes, pid, local_devices):
    """This process becomes process pid of num_processes, each with local_devices devices."""
    monkeypatch.setenv("TPULOOP_DEVICE_COUNT", str(local_devices))
    dist.initialize(num_processes=num_processes, process_id=pid)


def rows(n):
    """The brief's dataset of n rows: (x, y) with x = [[0.], [1.], ...] (float32, (n, 1)) and y = 0 .. n-1."""
    return tpuloop.data.Dataset.from_tensor_slices((np.arange(n, dtype=np.float32).reshape(n, 1),
                                                    np.arange(n, dtype=np.int32)))


def labels(ds):
    """The label rows of each batch a dataset yields, checking that x and y stay together."""
    out = []
    for x, y in ds:
        assert x.dtype == np.float32 and y.dtype == np.int32
        assert x.shape == (len(y), 1)
        np.testing.assert_array_equal(x[:, 0], y.astype(np.float32))
        out.append(y.tolist())
    return out


class Var:
    """A variable as Keras' distributions see one: .path, .shape and optionally a layout of its own."""

    def __init__(self, path, shape, layout=None):
        self.path, self.shape, self._layout = path, shape, layout


# ---- list_devices, get_device_count, initialize -----------------------------------------------------------------

def test_LD_1_list_devices_gives_the_virtual_devices():
    assert dist.list_devices() == DEV8
    assert dist.list_devices("cpu") == DEV8
    assert dist.list_devices("CPU") == DEV8
    assert dist.get_device_count() == 8
    assert dist.get_device_count("cpu") == 8


def test_list_devices_rejects_device_types_this_build_lacks():
    with pytest.raises(ValueError, match="device_type 'gpu': this build has no gpu devices"):
        dist.list_devices("gpu")
    with pytest.raises(ValueError, match="device_type 'npu' is unknown"):
        dist.get_device_count("npu")


def test_the_device_count_is_read_at_each_call(monkeypatch):
    monkeypatch.setenv("TPULOOP_DEVICE_COUNT", "3")
    assert dist.list_devices() == ["cpu:0", "cpu:1", "cpu:2"]
    monkeypatch.setenv("TPULOOP_DEVICE_COUNT", "x")
    with pytest.raises(ValueError, match="TPULOOP_DEVICE_COUNT='x' is not an integer"):
        dist.list_devices()
    monkeypatch.delenv("TPULOOP_DEVICE_COUNT")
    assert dist.get_device_count() == lib.tl_available_cpus()


def test_LD_2_after_initialize_the_devices_are_the_jobs(monkeypatch):
    job(monkeypatch, 4, 1, 2)
    assert dist.list_devices() == DEV8
    assert (dist.num_processes(), dist.process_id()) == (4, 1)


def test_IN_1_and_IN_5_explicit_arguments(monkeypatch):
    dist.initialize("10.0.0.1:1234,10.0.0.2:2345", 2, 0)
    assert (dist.num_processes(), dist.process_id()) == (2, 0)
    assert dist._coordinator == "10.0.0.1:1234"
    assert dist.DataParallel().num_processes == 2
    dist.initialize("10.0.0.1:1234", 2, 1)
    assert dist._coordinator == "10.0.0.1:1234"
    assert (dist.num_processes(), dist.process_id()) == (2, 1)


def test_IN_2_and_IN_6_environment_fallback(monkeypatch):
    monkeypatch.setenv("KERAS_DISTRIBUTION_JOB_ADDRESSES", "10.0.0.1:1234,10.0.0.2:2345")
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "2")
    monkeypatch.setenv("KERAS_DISTRIBUTION_PROCESS_ID", "1")
    dist.initialize()
    assert (dist.num_processes(), dist.process_id(), dist._coordinator) == (2, 1, "10.0.0.1:1234")
    monkeypatch.delenv("KERAS_DISTRIBUTION_JOB_ADDRESSES")
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "4")
    dist.initialize(num_processes=3)
    assert (dist.num_processes(), dist.process_id()) == (3, 1)


def test_IN_3_nothing_given_is_one_process():
    dist.initialize(num_processes=2, process_id=1)
    dist.initialize()
    assert (dist.num_processes(), dist.process_id(), dist._coordinator) == (1, 0, "")


def test_IN_4_and_IN_7_initialize_errors(monkeypatch):
    with pytest.raises(ValueError, match=r"The provided job_addresses \['10.0.0.1:1234', '10.0.0.2:2345'\] has 2 "
                                         r"jobs, but num_processes is 3"):
        dist.initialize("10.0.0.1:1234,10.0.0.2:2345", 3, 0)
    with pytest.raises(ValueError, match=r"process_id must be in \[0, 2\)"):
        dist.initialize(num_processes=2, process_id=2)
    monkeypatch.setenv("KERAS_DISTRIBUTION_PROCESS_ID", "x")
    with pytest.raises(ValueError, match=r"invalid literal for int\(\) with base 10: 'x'"):
        dist.initialize()
    assert (dist.num_processes(), dist.process_id()) == (1, 0)  # a failed initialize changes nothing


# ---- DeviceMesh ------------------------------------------------------------------------------------------------

def test_DM_1_and_DM_7_mesh_over_eight_devices():
    mesh = dist.DeviceMesh((4, 2), ["batch", "model"], DEV8)
    assert mesh.shape == (4, 2)
    assert mesh.axis_names == ["batch", "model"]
    assert mesh.devices.shape == (4, 2)
    assert mesh.devices[1][0] == "cpu:2"
    assert mesh.devices[3][1] == "cpu:7"
    assert repr(mesh) == "<DeviceMesh shape=(4, 2), axis_names=['batch', 'model']>"
    assert str(mesh) == repr(mesh)


def test_DM_1_a_2d_device_array_is_flattened_row_major():
    mesh = dist.DeviceMesh((2, 4), ["data", "model"], np.array(DEV8).reshape(4, 2))
    assert mesh.devices.tolist() == [DEV8[:4], DEV8[4:]]


def test_DM_6_devices_default_to_list_devices():
    mesh = dist.DeviceMesh((8,), ["data"])
    assert mesh.devices.tolist() == DEV8


@pytest.mark.parametrize("shape, names, devices, message", [
    ((4,), "", DEV4, r"Shape and axis_names cannot be empty. Received: shape=\(4,\), axis_names=\[\]"),   # DM-2
    ((), ["x"], DEV4, r"Shape and axis_names cannot be empty. Received: shape=\(\), axis_names=\['x'\]"),  # DM-3
    ((4, 2), ["batch"], DEV4, r"Shape and axis_names should have same size. Received: shape=\(4, 2\), "
                              r"axis_names=\['batch'\]"),                                                   # DM-4
    ((4, 2), ["batch", "model"], DEV4, r"Shape does not match the number of devices. Received: shape=\(4, 2\); "
                                       r"devices.shape=\(4,\)"),                                            # DM-5
    ((2,), ["batch"], ["cpu:0", "cpu:9"], r"Device not found: cpu:9"),
    ((2,), ["batch"], ["gpu:0", "cpu:1"], r"Device not found: gpu:0"),
    ((2,), ["batch"], ["cpu:1", "cpu:1"], r"device cpu:1 appears more than once"),
    ((2, 4), ["x", "x"], DEV8, r"DeviceMesh axis names must be unique: 'x' appears twice"),
])
def test_DM_2_to_DM_5_mesh_errors(shape, names, devices, message):
    with pytest.raises(ValueError, match=message):
        dist.DeviceMesh(shape, names, devices)


def test_mesh_shape_errors_come_before_device_names():
    # Keras checks the shape first and the device names only when the backend mesh is built.
    with pytest.raises(ValueError, match="Shape and axis_names should have same size"):
        dist.DeviceMesh((4, 2), ["batch"], ["gpu:0"])
    with pytest.raises(ValueError, match="Shape does not match the number of devices"):
        dist.DeviceMesh((4,), ["batch"], ["gpu:0"])


def test_mesh_type_errors():
    with pytest.raises(TypeError):
        dist.DeviceMesh((2,), [0], ["cpu:0", "cpu:1"])
    with pytest.raises(TypeError):
        dist.DeviceMesh((2,), ["batch"], [0, 1])


# ---- TensorLayout ----------------------------------------------------------------------------------------------

@pytest.fixture
def mesh42():
    return dist.DeviceMesh((4, 2), ["data", "model"], DEV8)


def test_TL_1_layout_on_a_mesh(mesh42):
    layout = dist.TensorLayout(("data", None), mesh42)
    assert layout.axes == ("data", None)
    assert layout.device_mesh is mesh42
    assert repr(layout) == ("<TensorLayout axes=('data', None), device_mesh=<DeviceMesh shape=(4, 2), "
                            "axis_names=['data', 'model']>>")


def test_TL_2_unknown_axis(mesh42):
    with pytest.raises(ValueError, match=r"Invalid axis names for Layout. Valid axis names: \{'data', 'model'\}, "
                                         r"Got \{'data', 'unknown'\}"):
        dist.TensorLayout(("data", "unknown", None), mesh42)


def test_TL_3_to_TL_5_the_mesh_is_set_once(mesh42):
    layout = dist.TensorLayout(["data", None])
    assert layout.axes == ("data", None)
    assert layout.device_mesh is None
    assert repr(layout) == "<TensorLayout axes=('data', None), device_mesh=None>"
    layout.device_mesh = mesh42                                                                 # TL-3
    assert layout.device_mesh is mesh42
    with pytest.raises(ValueError, match=r"Cannot override device mesh value. Existing value is <DeviceMesh "
                                         r"shape=\(4, 2\)"):                                    # TL-5
        layout.device_mesh = mesh42
    bad = dist.TensorLayout(("data", "unknown", None))                                         # TL-4
    with pytest.raises(ValueError, match="Invalid axis names for Layout"):
        bad.device_mesh = mesh42
    assert bad.device_mesh is None


def test_TL_7_an_entry_naming_two_axes_is_invalid(mesh42):
    with pytest.raises(ValueError, match=r"Invalid axis names for Layout. Valid axis names: \{'data', 'model'\}, "
                                         r"Got \{\('data', 'model'\)\}"):
        dist.TensorLayout([("data", "model"), None], mesh42)
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        dist.TensorLayout([["data"], None], mesh42)
    with pytest.raises(ValueError, match="one mesh axis"):
        dist.TensorLayout([("data", "model"), None])


def test_a_string_of_axes_is_a_tuple_of_characters():
    assert dist.TensorLayout("ab").axes == ("a", "b")


# ---- DataParallel ----------------------------------------------------------------------------------------------

def test_DP_3_data_parallel_over_the_eight_devices():
    dp = dist.DataParallel()
    assert dp.device_mesh.shape == (8,)
    assert dp.device_mesh.axis_names == ["batch"]
    assert dp.device_mesh.devices.tolist() == DEV8
    assert dp.batch_dim_name == "batch"
    assert dp.num_processes == 1
    assert dp.num_model_replicas == 8
    assert dp.data_shard_id == 0
    assert dp.auto_shard_dataset is True
    layout = dp.get_data_layout((16, 5))
    assert layout.axes == ("batch", None)
    assert layout.device_mesh is dp.device_mesh
    kernel = dp.get_variable_layout(("sequential/dense/kernel", (5, 3)))
    assert kernel.axes == (None, None) and kernel.device_mesh is dp.device_mesh
    assert dp.get_variable_layout(Var("sequential/dense/bias", (3,))).axes == (None,)
    assert dp.get_tensor_layout("sequential/dense/output") is None
    assert repr(dp) == "<DataParallel device_mesh=<DeviceMesh shape=(8,), axis_names=['batch']>>"


def test_DP_1_and_DP_9_to_DP_12_given_a_mesh():
    mesh = dist.DeviceMesh((8,), ["data"], DEV8)
    dp = dist.DataParallel(device_mesh=mesh)
    assert dp.device_mesh is mesh
    assert dp.batch_dim_name == "data"
    assert dp.num_processes == 1
    layout = dp.get_data_layout((4, 2, 2))                                                      # DP-9
    assert layout.axes == ("data", None, None) and layout.device_mesh is mesh
    assert dp.get_variable_layout(Var("v", (3,))).axes == (None,)                             # DP-10
    own = dist.TensorLayout(["x"], dist.DeviceMesh((8,), ["x"], DEV8))
    got = dp.get_variable_layout(Var("v", (8,), own))                                         # DP-11
    assert got.axes == ("x",) and got.device_mesh is own.device_mesh
    assert dp.get_tensor_layout("path/to/tensor") is None                                      # DP-12


def test_DP_2_DP_5_and_DP_8b_given_devices():
    dp = dist.DataParallel(devices=DEV8)
    assert (dp.device_mesh.shape, dp.device_mesh.axis_names, dp.batch_dim_name) == ((8,), ["batch"], "batch")
    dp4 = dist.DataParallel(devices=np.array(DEV4[::-1]))
    assert dp4.device_mesh.devices.tolist() == ["cpu:3", "cpu:2", "cpu:1", "cpu:0"]
    assert dp4.num_model_replicas == 4
    assert dist.DataParallel(devices=[]).device_mesh.devices.tolist() == DEV8                  # DP-5


def test_DP_4_the_mesh_wins_over_devices():
    mesh = dist.DeviceMesh((8,), ["data"], DEV8)
    dp = dist.DataParallel(device_mesh=mesh, devices=DEV4)
    assert dp.device_mesh is mesh
    assert dp.num_model_replicas == 8


def test_DP_6_DP_8_and_DP_14_errors():
    with pytest.raises(ValueError, match=r"Expect `mesh` to be an instance of `DeviceMesh`. Received: mesh=foo "
                                         r"\(of type <class 'str'>\)"):
        dist.DataParallel(device_mesh="foo")
    with pytest.raises(ValueError, match="Shape and axis_names should have same size"):
        dist.DataParallel(devices=[DEV8[0:4], DEV8[4:8]])
    with pytest.raises(ValueError, match="Device not found: cpu:8"):
        dist.DataParallel(devices=["cpu:7", "cpu:8"])
    with pytest.raises(ValueError, match=r"data_shape=\(\) has no batch dimension"):
        dist.DataParallel().get_data_layout(())


def test_DP_7_a_2d_mesh_warns_and_uses_its_first_axis(capfd, mesh42):
    dp = dist.DataParallel(device_mesh=mesh42)
    assert dp.batch_dim_name == "data"
    assert dp.num_model_replicas == 8
    assert dp.get_data_layout((8, 3)).axes == ("data", None)
    assert ("Expect the input mesh to be 1D, but received mesh.devices.ndim=2. The first axis will be used for "
            "data-parallel sharding.") in capfd.readouterr().err


def test_DP_13_process_count_is_read_at_construction(monkeypatch):
    job(monkeypatch, 2, 1, 4)
    dp = dist.DataParallel(device_mesh=dist.DeviceMesh((8,), ["data"], DEV8))
    dist.initialize("", 1, 0)
    assert (dp.num_model_replicas, dp.num_processes, dp.data_shard_id) == (8, 2, 1)


# ---- ModelParallel ---------------------------------------------------------------------------------------------

@pytest.fixture
def mesh24():
    return dist.DeviceMesh((2, 4), ["data", "model"], DEV8)


@pytest.fixture
def lm(mesh24):
    m = dist.LayoutMap(mesh24)
    m[".*kernel"] = dist.TensorLayout([None, "model"])
    m[".*bias"] = dist.TensorLayout(["model"])
    return m


def test_MP_1_to_MP_3_variable_layouts_by_regex(lm, mesh24):
    mp = dist.ModelParallel(layout_map=lm, batch_dim_name="data")
    kernel = mp.get_variable_layout(Var("kernel", (16, 8)))
    assert kernel.axes == (None, "model") and kernel.device_mesh is mesh24
    assert mp.get_variable_layout(("sequential/dense/kernel", (16, 8))).axes == (None, "model")
    assert mp.get_variable_layout(Var("bias", (8,))).axes == ("model",)
    seed = mp.get_variable_layout(Var("seed", (2,)))
    assert seed.axes == (None,) and seed.device_mesh is mesh24
    assert mp.get_variable_layout((None, (4, 4))).axes == (None, None)  # no path: no LayoutMap lookup
    assert mp.layout_map is lm and mp.device_mesh is mesh24
    assert repr(mp) == "<ModelParallel device_mesh=<DeviceMesh shape=(2, 4), axis_names=['data', 'model']>>"


def test_MP_4_data_layout_and_batch_dim(mesh24):
    mp = dist.ModelParallel(layout_map=dist.LayoutMap(mesh24), batch_dim_name="data")
    assert mp.batch_dim_name == "data"
    assert mp.num_model_replicas == 2
    layout = mp.get_data_layout((4, 2, 2))
    assert layout.axes == ("data", None, None) and layout.device_mesh is mesh24


def test_MP_5_tensor_layouts(lm, mesh24):
    lm["/model/layer/tensor"] = ("data", None)
    mp = dist.ModelParallel(layout_map=lm, batch_dim_name="data")
    layout = mp.get_tensor_layout("/model/layer/tensor")
    assert layout.axes == ("data", None) and layout.device_mesh is mesh24
    assert mp.get_tensor_layout("/model/layer/other_tensor") is None


def test_MP_6_a_variables_own_layout_wins(lm):
    mp = dist.ModelParallel(layout_map=lm)
    own = dist.TensorLayout(["x"], dist.DeviceMesh((8,), ["x"], DEV8))
    got = mp.get_variable_layout(Var("kernel", (8, 4), own))
    assert got.axes == ("x",) and got.device_mesh is own.device_mesh


def test_MP_7_to_MP_9_constructor_errors(lm):
    with pytest.raises(ValueError, match="You must specify a layout_map argument."):
        dist.ModelParallel()
    with pytest.raises(ValueError, match=r"Argument `layout_map` must be a `LayoutMap` instance. Received: "
                                         r"layout_map=\{'a': 1\}"):
        dist.ModelParallel(layout_map={"a": 1})
    with pytest.raises(TypeError):
        dist.ModelParallel(lm)


def test_MP_10_and_MP_15_defaults(lm, mesh24):
    assert dist.ModelParallel(layout_map=lm).batch_dim_name == "data"
    assert dist.ModelParallel(layout_map=lm, batch_dim_name="").batch_dim_name == "data"
    other = dist.DeviceMesh((8,), ["x"], DEV8)
    mp = dist.ModelParallel(layout_map=lm, device_mesh=other)
    assert mp.device_mesh is mesh24


def test_MP_11_and_MP_12_process_checks(monkeypatch):
    job(monkeypatch, 4, 0, 2)
    mesh32 = dist.DeviceMesh((3, 2), ["data", "model"], DEV8[:6])
    with pytest.raises(ValueError, match=r"If `num_processes` is greater than `num_model_replicas`, "
                                         r"`num_processes` must be divisible by `num_model_replicas`. Got "
                                         r"num_processes=4, num_model_replicas=3."):
        dist.ModelParallel(layout_map=dist.LayoutMap(mesh32))
    job(monkeypatch, 2, 0, 4)
    mp = dist.ModelParallel(layout_map=dist.LayoutMap(dist.DeviceMesh((4, 2), ["batch", "model"], DEV8)))
    assert (mp.num_model_replicas, mp.num_processes) == (4, 2)
    mp = dist.ModelParallel(layout_map=dist.LayoutMap(dist.DeviceMesh((8, 1), ["batch", "model"], DEV8)))
    assert mp.num_model_replicas == 8  # 3.14.1's inverted check (MP-13) is not copied


def test_MP_14_an_unknown_batch_dim_name_fails_later(lm):
    mp = dist.ModelParallel(layout_map=lm, batch_dim_name="nope")
    assert mp.batch_dim_name == "nope"
    with pytest.raises(ValueError, match=r"'nope' is not in list \['data', 'model'\]"):
        mp.num_model_replicas
    with pytest.raises(ValueError, match=r"Invalid axis names for Layout. .*Got \{'nope'\}"):
        mp.get_data_layout((4,))


@pytest.mark.parametrize("P, local, mesh_shape, expected", [
    (4, 2, (8, 1), [0, 1, 2, 3]),   # ID-1: R=8
    (4, 2, (2, 4), [0, 0, 1, 1]),   # ID-2: R=2
    (4, 2, (4, 2), [0, 1, 2, 3]),   # ID-3: R=4
])
def test_ID_1_to_ID_3_data_shard_id(monkeypatch, P, local, mesh_shape, expected):
    got, shards = [], []
    for pid in range(P):
        job(monkeypatch, P, pid, local)
        mesh = dist.DeviceMesh(mesh_shape, ["batch", "model"], DEV8)
        mp = dist.ModelParallel(layout_map=dist.LayoutMap(mesh))
        got.append(mp.data_shard_id)
        shards.append(mp.num_data_shards)
    assert got == expected
    assert shards == [min(mesh_shape[0], P)] * P                                              # ID-5


# ---- LayoutMap -------------------------------------------------------------------------------------------------

@pytest.fixture
def s2():
    return dist.TensorLayout([None, "model"])


@pytest.fixture
def s1():
    return dist.TensorLayout(["model"])


def test_LM_1_setting_layouts(mesh42, s2, s1):
    m = dist.LayoutMap(mesh42)
    m["dense/kernel"] = s2
    m["dense/bias"] = s1
    m["conv/bias"] = ("model",)
    assert len(m) == 3
    assert m["conv/bias"].axes == ("model",)
    assert m["dense/kernel"] is s2
    assert all(m[k].device_mesh is mesh42 for k in m)
    assert s2.device_mesh is mesh42  # Keras gives the layout itself the map's mesh
    assert m.device_mesh is mesh42


def test_LM_2_LM_3_and_LM_16_setting_errors(mesh42, s2):
    m = dist.LayoutMap(mesh42)
    m["dense/kernel"] = s2
    with pytest.raises(ValueError, match=r"dense/kernel already exist in the LayoutMap with value <TensorLayout "
                                         r"axes=\(None, 'model'\)"):
        m["dense/kernel"] = dist.TensorLayout([None, None])
    with pytest.raises(ValueError, match="dense/kernel already exist"):
        m["dense/kernel"] = ["a", "b"]  # the duplicate key is reported first, as in Keras
    with pytest.raises(ValueError, match=r"\['a', 'b'\] should be a TensorLayout type, got <class 'list'>"):
        m["conv.kernel"] = ["a", "b"]
    with pytest.raises(ValueError, match=r"Invalid axis names for Layout. .*Got \{'bad'\}"):
        m["k"] = ("bad",)
    with pytest.raises(TypeError):
        m[3] = ("data",)
    assert list(m) == ["dense/kernel"]


@pytest.fixture
def lm4(mesh42, s2, s1):
    """LM-4's map: exact keys, then patterns in insertion order."""
    m = dist.LayoutMap(mesh42)
    m["dense/kernel"] = s2
    m["dense/bias"] = s1
    m[".*dense.*kernel"] = dist.TensorLayout([None, None])
    m[".*dense.*bias"] = dist.TensorLayout([None])
    m[".*bias"] = dist.TensorLayout(["model"])
    return m


def test_LM_4_to_LM_7_lookup(lm4, s2, s1):
    assert lm4["dense/kernel"] is s2                                                           # LM-4
    assert lm4["dense/bias"] is s1
    m = lm4
    assert m.get("conv2d/kernel") is None                                                      # LM-7
    assert m["conv2d/bias"].axes == ("model",)
    with pytest.raises(ValueError, match=r"Path 'dense_2/bias' matches multiple layout specification keys: "
                                         r"\['.\*dense.\*bias', '.\*bias'\]. Please make sure each "
                                         r"tensor/variable path only matches at most one layout specification key "
                                         r"in the LayoutMap."):                              # LM-6
        m["dense_2/bias"]


def test_LM_5_a_single_pattern_match(lm4):
    got = lm4["dense_2/kernel"]
    assert got is lm4[".*dense.*kernel"]
    assert got.axes == (None, None)


def test_LM_8_to_LM_10_search_mode(mesh42, s2, s1):
    full = dist.LayoutMap(mesh42)
    full["dense.*kernel"] = (None, None)
    assert full["my_model/dense_1/kernel"] is None                                             # LM-9, 3.14+
    search = dist.LayoutMap(mesh42, match="search")
    search["dense/kernel"] = s2
    search["dense/bias"] = s1
    search["dense.*kernel"] = (None, None)
    search["dense.*bias"] = (None,)
    search["bias"] = ("model",)
    assert search["my_model/dense_1/kernel"].axes == (None, None)                              # LM-9, <= 3.13
    assert search["dense/kernel"] is s2 and search["dense/bias"] is s1                         # LM-8
    assert search["dense_2/kernel"].axes == (None, None)
    assert search["conv2d/kernel"] is None and search["conv2d/bias"].axes == ("model",)
    with pytest.raises(ValueError, match=r"matches multiple layout specification keys: \['dense.\*bias', 'bias'\]"):
        search["dense_2/bias"]
    both = dist.LayoutMap(mesh42)
    both[".*dense.*kernel"] = (None, "model")
    assert both["sequential/dense/kernel"].axes == (None, "model")                             # LM-10
    with pytest.raises(ValueError, match="match must be 'fullmatch'"):
        dist.LayoutMap(mesh42, match="re")


def test_LM_11_the_docstring_map():
    mesh = dist.DeviceMesh((2, 2, 2), ["batch", "model", "extra"], DEV8)
    m = dist.LayoutMap(mesh)
    m[".*dense.*kernel"] = (None, "model")
    m[".*dense.*bias"] = ("model",)
    m[".*conv2d.*kernel"] = (None, None, None, "model")
    m[".*conv2d.*bias"] = ("model",)
    assert m["dense_1.kernel"].axes == (None, "model")
    assert m["dense_1.bias"].axes == ("model",)
    assert len(m["my_model/conv2d_123/kernel"].axes) == 4
    assert m["my_model/conv2d_123/bias"].axes == ("model",)
    assert m["my_model/conv3d_1/kernel"] is None


def test_LM_12_and_LM_13_pop_delete_and_order(mesh42, s2, s1):
    m = dist.LayoutMap(mesh42)
    m["dense/kernel"] = s2
    m["dense/bias"] = s1
    m[".*bias"] = ("model",)
    assert list(m.keys()) == ["dense/kernel", "dense/bias", ".*bias"]                          # LM-13
    assert [v for _, v in m.items()][:2] == [s2, s1]
    assert m.pop("dense/kernel") is s2                                                         # LM-12
    del m[".*bias"]
    with pytest.raises(KeyError):
        m.pop(".*bias")
    with pytest.raises(KeyError):
        del m["dense/.*"]
    assert m.pop("missing", "default") == "default"
    assert list(m) == ["dense/bias"] and len(m) == 1
    assert "dense/bias" in m and "dense/.*" not in m
    assert m["dense/kernel"] is None  # popped: no key or pattern is left for it
    m["dense/kernel"] = (None, None)  # and the key can be set again
    assert m["dense/kernel"].axes == (None, None)


def test_LM_14_invalid_patterns_are_rejected_when_set(mesh42):
    m = dist.LayoutMap(mesh42)
    with pytest.raises(ValueError, match=r"LayoutMap key 'dense\[' is not a supported regular expression"):
        m["dense["] = ("data",)
    with pytest.raises(ValueError, match="LayoutMap key"):
        m["(?:dense)/kernel"] = ("data",)
    assert len(m) == 0


def test_a_layout_keeps_its_own_mesh_in_a_map(mesh42):
    other = dist.DeviceMesh((8,), ["x"], DEV8)
    own = dist.TensorLayout(["x"], other)
    m = dist.LayoutMap(mesh42)
    m["emb"] = own
    del other, own
    gc.collect()
    mp = dist.ModelParallel(layout_map=m)
    assert repr(mp.get_variable_layout(("emb", (16,)))) == (
        "<TensorLayout axes=('x',), device_mesh=<DeviceMesh shape=(8,), axis_names=['x']>>")


# ---- the current distribution and scope() -------------------------------------------------------------------

def test_DS_1_no_distribution_at_first():
    assert dist.distribution() is None
    assert lib.tl_distribution_current() is None


def test_DS_2_scopes_nest_and_restore():
    d1, d2 = dist.DataParallel(), dist.DataParallel(devices=DEV4)
    with d1.scope():
        assert dist.distribution() is d1
        with d2.scope():
            assert dist.distribution() is d2
            assert lib.tl_distribution_current() == d2._c_handle().value  # C sees it too
        assert dist.distribution() is d1
        assert lib.tl_distribution_current() == d1._c_handle().value
    assert dist.distribution() is None
    assert lib.tl_distribution_current() is None


def test_DS_3_an_exception_restores_the_previous_distribution():
    d0, d1 = dist.DataParallel(), dist.DataParallel(devices=DEV4)
    dist.set_distribution(d0)
    with pytest.raises(RuntimeError):
        with d1.scope():
            assert dist.distribution() is d1
            raise RuntimeError("inside the scope")
    assert dist.distribution() is d0
    assert lib.tl_distribution_current() == d0._c_handle().value


def test_a_scope_keeps_the_previous_distribution_alive():
    dist.set_distribution(dist.DataParallel(devices=DEV4))  # no other reference: the current slot keeps it
    with dist.DataParallel().scope():
        gc.collect()
    gc.collect()
    assert repr(dist.distribution()) == "<DataParallel device_mesh=<DeviceMesh shape=(4,), axis_names=['batch']>>"


def test_set_distribution_and_distribution():
    dp = dist.DataParallel()
    dist.set_distribution(dp)
    assert dist.distribution() is dp
    del dp
    gc.collect()
    assert repr(dist.distribution()) == "<DataParallel device_mesh=<DeviceMesh shape=(8,), axis_names=['batch']>>"
    dist.set_distribution(None)
    assert dist.distribution() is None
    with pytest.raises(TypeError):
        dist.set_distribution("dp")


def test_a_distribution_set_from_c_is_found():
    dp = dist.DataParallel()
    lib.tl_distribution_set(dp._c_handle())
    try:
        assert dist.distribution() is dp
    finally:
        lib.tl_distribution_set(None)


def test_the_current_distribution_is_per_thread():
    dp = dist.DataParallel()
    seen = []
    with dp.scope():
        t = threading.Thread(target=lambda: seen.append(dist.distribution()))
        t.start()
        t.join()
        assert dist.distribution() is dp
    assert seen == [None]


def test_DS_4_the_base_class_is_abstract(mesh42):
    base = dist.Distribution(mesh42, "data")
    assert base.device_mesh is mesh42 and base.batch_dim_name == "data"
    assert repr(base) == "<Distribution device_mesh=<DeviceMesh shape=(4, 2), axis_names=['data', 'model']>>"
    with pytest.raises(NotImplementedError):
        base.get_data_layout((2,))
    with pytest.raises(NotImplementedError):
        base.get_variable_layout(("v", (2,)))
    with pytest.raises(NotImplementedError):
        base.get_tensor_layout("t")
    with pytest.raises(NotImplementedError):
        base.num_model_replicas


def test_c_objects_live_as_long_as_their_users():
    dp = dist.DataParallel(device_mesh=dist.DeviceMesh((8,), ["data"], DEV8))
    handle = dp._c_handle()
    assert isinstance(handle, ctypes.c_void_p) and handle.value
    gc.collect()  # the mesh has no other Python reference
    assert repr(dp) == "<DataParallel device_mesh=<DeviceMesh shape=(8,), axis_names=['data']>>"
    layout = dp.get_data_layout((8, 1))
    del dp
    gc.collect()
    assert repr(layout) == ("<TensorLayout axes=('data', None), device_mesh=<DeviceMesh shape=(8,), "
                            "axis_names=['data']>>")
    mesh = dist.DataParallel(devices=DEV4).device_mesh  # a mesh the C distribution owns
    gc.collect()
    assert mesh.devices.tolist() == DEV4 and repr(mesh) == "<DeviceMesh shape=(4,), axis_names=['batch']>"
    mp = dist.ModelParallel(layout_map=_map_only())
    gc.collect()
    assert mp.get_variable_layout(("dense/kernel", (8, 4))).axes == (None, "model")


def _map_only():
    m = dist.LayoutMap(dist.DeviceMesh((2, 4), ["data", "model"], DEV8))
    m["dense/kernel"] = (None, "model")
    return m


# ---- distribute_dataset ----------------------------------------------------------------------------------------

def test_SH_1_one_process_reads_the_dataset_unchanged():
    ds = rows(16)
    dp = dist.DataParallel()
    assert dp.distribute_dataset(ds) is ds
    assert labels(dp.distribute_dataset(ds.batch(8))) == [list(range(8)), list(range(8, 16))]
    elements = list(ds)
    assert len(elements) == 16
    assert elements[3][0].tolist() == [3.0] and elements[3][1] == 3
    stuff = [1, 2, 3]
    assert dp.distribute_dataset(stuff) is stuff


def test_SH_2_auto_sharding_off(monkeypatch):
    job(monkeypatch, 2, 1, 4)
    dp = dist.DataParallel(auto_shard_dataset=False)
    ds = rows(16).batch(8)
    assert dp.distribute_dataset(ds) is ds
    stuff = [1, 2, 3]
    assert dp.distribute_dataset(stuff) is stuff
    dp.auto_shard_dataset = True
    assert dp.auto_shard_dataset is True
    assert labels(dp.distribute_dataset(ds)) == [[4, 5, 6, 7], [12, 13, 14, 15]]


def test_SH_3_two_processes_read_halves_of_each_batch(monkeypatch):
    seen = []
    for pid in range(2):
        job(monkeypatch, 2, pid, 4)
        dp = dist.DataParallel()
        assert dp.num_model_replicas == 8
        seen.append(labels(dp.distribute_dataset(rows(16).batch(8))))
    assert seen == [[[0, 1, 2, 3], [8, 9, 10, 11]], [[4, 5, 6, 7], [12, 13, 14, 15]]]


def test_SH_8_four_processes(monkeypatch):
    for pid in range(4):
        job(monkeypatch, 4, pid, 2)
        got = labels(dist.DataParallel().distribute_dataset(rows(32).batch(8)))
        assert got == [[2 * pid + 8 * s, 2 * pid + 8 * s + 1] for s in range(4)]


def test_SH_9_and_SH_10_replicas_spanning_processes(monkeypatch):
    first = {}
    for R in (8, 4, 2, 1):
        for pid in range(4):
            job(monkeypatch, 4, pid, 2)
            mesh = dist.DeviceMesh((R, 8 // R), ["batch", "model"], DEV8)
            got = labels(dist.ModelParallel(layout_map=dist.LayoutMap(mesh)).distribute_dataset(rows(32).batch(8)))
            assert len(got) == 4 and all(b == [v + 8 * s for v in got[0]] for s, b in enumerate(got))
            first[R, pid] = got[0]
    assert [first[8, p] for p in range(4)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [first[4, p] for p in range(4)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [first[2, p] for p in range(4)] == [[0, 1, 2, 3], [0, 1, 2, 3], [4, 5, 6, 7], [4, 5, 6, 7]]
    assert [first[1, p] for p in range(4)] == [list(range(8))] * 4
    for pid, expected in enumerate([[[0, 1], [4, 5]]] * 2 + [[[2, 3], [6, 7]]] * 2):           # SH-10
        job(monkeypatch, 4, pid, 2)
        mp = dist.ModelParallel(layout_map=dist.LayoutMap(dist.DeviceMesh((2, 4), ["batch", "model"], DEV8)))
        assert labels(mp.distribute_dataset(rows(8).batch(4))) == expected


def test_SH_7_one_replica_every_process_reads_everything(monkeypatch):
    for pid in range(2):
        job(monkeypatch, 2, pid, 4)
        mp = dist.ModelParallel(layout_map=dist.LayoutMap(dist.DeviceMesh((1, 8), ["batch", "model"], DEV8)))
        assert labels(mp.distribute_dataset(rows(16).batch(8))) == [list(range(8)), list(range(8, 16))]


def test_SH_11_a_partial_last_batch(monkeypatch):
    seen = []
    for pid in range(2):
        job(monkeypatch, 2, pid, 4)
        seen.append(labels(dist.DataParallel().distribute_dataset(rows(10).batch(8))))
    assert seen == [[[0, 1, 2, 3], [8, 9]], [[4, 5, 6, 7]]]


def test_SH_4_SH_5_SH_6_and_SH_12_sharding_errors(monkeypatch):
    job(monkeypatch, 2, 0, 4)
    dp = dist.DataParallel()
    with pytest.raises(ValueError, match=r"Global batch size must be divisible by the number of processes. "
                                         r"`global_batch_size`=7 and `num_processes`=2"):
        dp.distribute_dataset(rows(16).batch(7))
    with pytest.raises(ValueError, match=r"The dataset type <class 'list'> is not supported for auto-sharding in "
                                         r"multi-process setting."):
        dp.distribute_dataset([1, 2, 3])
    with pytest.raises(ValueError, match=r"<class 'numpy.ndarray'> is not supported"):
        dp.distribute_dataset(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"The batch size of the input dataset is unknown. Please config the batch "
                                         r"size for the input dataset, e.g via `dataset.batch\(batch_size\)`"):
        dp.distribute_dataset(rows(16))
    job(monkeypatch, 4, 0, 2)
    mp = dist.ModelParallel(layout_map=dist.LayoutMap(dist.DeviceMesh((2, 4), ["batch", "model"], DEV8)))
    assert labels(mp.distribute_dataset(rows(12).batch(6))) == [[0, 1, 2], [6, 7, 8]]
    with pytest.raises(ValueError, match=r"Global batch size must be divisible by the number of replicas. "
                                         r"`global_batch_size`=5 and `num_model_replicas`=2"):
        mp.distribute_dataset(rows(10).batch(5))


def test_a_shard_cannot_be_built_as_a_c_pipeline(monkeypatch):
    job(monkeypatch, 2, 0, 4)
    shard = dist.DataParallel().distribute_dataset(rows(16).batch(8))
    assert isinstance(shard, tpuloop.data.Dataset)
    with pytest.raises(errors.UnimplementedError, match="no unbatch / rebatch transform"):
        shard._build()
    with pytest.raises(NotImplementedError, match="rebatch"):
        list(shard.prefetch(2))

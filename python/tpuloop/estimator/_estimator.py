"""TPUEstimator over the C estimator (estimator.h).

The model_fn is traced once per mode by the C library, which calls back
into Python only to trace, to call input_fn, and at loop boundaries (the
progress line, host_call's fn, metric_fn): the steps themselves run in C.
"""
import copy
import ctypes
import inspect
import json
import logging
import os
import re
import signal
import sys
import tempfile
import threading

import numpy as np

from .. import _graph, _lib, data as tdata, errors, metrics as tmetrics
from .._graph import Graph, Tensor, graph_scope
from .._lib import lib
from ..train import TrainOp, _GlobalStep
from ._run_config import ModeKeys, RunConfig, option_text

log = logging.getLogger("tpuloop")

_MODE_KEYS = {_lib.MODE_TRAIN: ModeKeys.TRAIN, _lib.MODE_EVAL: ModeKeys.EVAL, _lib.MODE_PREDICT: ModeKeys.PREDICT}
_RESERVED_PARAMS_KEYS = ["batch_size", "context"]


_HOSTS = []


def hosts():
    """The hosts of this job, one MPI process each (a communicator, once per
    process), when an MPI launcher started this process (mpirun -np H
    python3 prog.py); None otherwise. Every process then builds the same
    estimator and makes the same calls, as `mpirun -np H tpuloop train`."""
    if not _HOSTS:
        launched = any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"))
        h = None
        if launched:
            h = ctypes.c_void_p()
            _lib.check(lib.tl_comm_create_mpi(None, 1, ctypes.byref(h)), "joining the hosts over MPI")
        _HOSTS.append(h)
    return _HOSTS[0]


class TPUEstimatorSpec:
    """tf.compat.v1.estimator.tpu.TPUEstimatorSpec."""

    def __init__(self, mode, predictions=None, loss=None, train_op=None, eval_metrics=None, export_outputs=None,
                 scaffold_fn=None, host_call=None, training_hooks=None, evaluation_hooks=None,
                 prediction_hooks=None):
        if host_call is not None and (not isinstance(host_call, (tuple, list)) or len(host_call) != 2 or
                                      not callable(host_call[0])):
            raise ValueError("host_call must be a tuple of (fn, tensors), got %r" % (host_call,))
        if eval_metrics is not None and (not isinstance(eval_metrics, (tuple, list)) or len(eval_metrics) != 2 or
                                         not callable(eval_metrics[0])):
            raise ValueError("eval_metrics must be a tuple of (metric_fn, tensors), got %r" % (eval_metrics,))
        if training_hooks or evaluation_hooks or prediction_hooks or scaffold_fn is not None:
            raise ValueError("TPUEstimatorSpec: hooks and scaffold_fn are not supported by tpuloop; use host_call")
        self.mode, self.predictions, self.loss, self.train_op = mode, predictions, loss, train_op
        self.eval_metrics, self.export_outputs, self.host_call = eval_metrics, export_outputs, host_call


def _lr_caller(fn):
    """fn as a function of the global step: a schedule or a function of one
    argument gets the step; a function of none (TensorFlow's callable
    learning rate) is called as it is."""
    try:
        takes_step = len(inspect.signature(fn).parameters) >= 1
    except (TypeError, ValueError):
        takes_step = True
    return fn if takes_step else (lambda step: fn())


class TPUContext:
    """params['context'] in input_fn: the deployment of this invocation."""

    def __init__(self, ctx):
        self.mode = _MODE_KEYS[ctx.mode]
        self.batch_size = ctx.batch_size
        self._deploy = (ctx.host, ctx.index, ctx.total, ctx.num_replicas)
        self.first_replica = ctx.first_replica

    def current_input_fn_deployment(self):
        """(host, invocation index, total invocations, replicas fed), spec §4.1."""
        return self._deploy

    @property
    def num_replicas(self):
        return self._deploy[3]


def _host_arrays(tensors, n):
    out = []
    for i in range(n):
        t = tensors[i]
        shape = tuple(t.shape[d] for d in range(t.rank))
        np_t = np.float32 if t.dtype == _lib.F32 else np.int32
        count = int(np.prod(shape, dtype=np.int64))
        raw = ctypes.string_at(t.data, count * 4) if count else b""
        out.append((t.name.decode() if t.name else "", np.frombuffer(raw, dtype=np_t).reshape(shape).copy()))
    return out


def _call_with(fn, values, names):
    """fn(*values), or fn(**{name: value}) when the tensors were a dict."""
    if names is None:
        return fn(*values)
    return fn(**dict(zip(names, values)))


def _tensor_list(what, tensors, allow_step=False):
    if isinstance(tensors, dict):
        names = list(tensors.keys())
        ts = [tensors[k] for k in names]
    else:
        names, ts = None, list(tensors)
    for k, t in enumerate(ts):
        if allow_step and isinstance(t, _GlobalStep):
            continue
        if not isinstance(t, Tensor):
            raise TypeError("%s: tensor %s is %r, not a tpuloop.Tensor of the model_fn"
                            % (what, names[k] if names else k, type(t).__name__))
    return names, ts


class _Progress:
    """The training progress line, at each logging boundary (log_step_count_steps)."""

    def __init__(self, stream, final_step, tty):
        self.stream, self.final_step, self.tty = stream, final_step, tty
        self.last = None

    def __call__(self, lg):
        parts = []
        if self.final_step and self.final_step > 0 and self.tty:
            frac = min(1.0, lg.step / float(self.final_step))
            n = int(frac * 30)
            parts.append("[%s%s] %d/%d" % ("#" * n, "." * (30 - n), lg.step, self.final_step))
        else:
            parts.append("step %d" % lg.step)
        if lg.log_loss:
            parts.append("loss %.6g" % lg.loss)
        if lg.has_rate:
            parts.append("%.0f examples/s" % lg.examples_per_sec)
        line = "  ".join(parts)
        self.stream.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        self.stream.flush()
        self.last = line

    def end(self):
        if self.tty and self.last is not None:
            self.stream.write("\n")
            self.stream.flush()


class TPUEstimator:
    """tf.compat.v1.estimator.tpu.TPUEstimator, running on tpuloop's devices.

    Options are checked when the estimator is made, by the C library, with
    TensorFlow's messages. Without a model_dir (here or in the RunConfig) a
    temporary directory is used, as Estimator does."""

    def __init__(self, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True,
                 train_batch_size=None, eval_batch_size=None, predict_batch_size=None, batch_axis=None,
                 eval_on_tpu=True, export_to_tpu=True, export_to_cpu=True, warm_start_from=None,
                 embedding_config_spec=None, export_saved_model_api_version=None, progress_bar=None,
                 distribution=None):
        if model_fn is None or not callable(model_fn):
            raise ValueError("model_fn must be provided.")
        params = copy.deepcopy(params) if params is not None else {}
        bad = [k for k in _RESERVED_PARAMS_KEYS if k in params]
        if bad:
            raise ValueError("{} are reserved keys but existed in params {}.".format(bad, params))
        if batch_axis is not None:
            raise ValueError("batch_axis is not supported by tpuloop: batches split along dimension 0")
        config = config if config is not None else RunConfig()
        if not isinstance(config, RunConfig):
            raise ValueError("`config` must be provided with type `tpu_config.RunConfig`")
        cfg_dir = getattr(config, "model_dir", None)
        if model_dir is not None and cfg_dir is not None and model_dir != cfg_dir:
            raise ValueError("model_dir are set both in constructor and RunConfig, but with different values. In "
                             "constructor: '{}', in RunConfig: '{}' ".format(model_dir, cfg_dir))
        model_dir = model_dir or cfg_dir
        if model_dir is None:
            model_dir = tempfile.mkdtemp(prefix="tpuloop_model_")
            log.warning("Using temporary folder as model directory: %s", model_dir)
        self._model_dir = model_dir
        self._model_fn = model_fn
        self._params = params
        self._config = config
        self._use_tpu = bool(use_tpu)
        self._progress = progress_bar
        self._emb_spec = embedding_config_spec
        opts = [("model_dir", model_dir)] + [(k, v) for k, v in config.options() if k != "model_dir"]
        if distribution is None:
            from .. import distribution as _dist
            distribution = _dist.distribution()   # the one of an enclosing `with dist.scope():`
        self._distribution = distribution
        opts += self._distribution_options(distribution, dict(opts))
        self._hosts = hosts()
        self._host = 0
        if self._hosts is not None:
            # num_hosts is the number of processes the launcher started; a value given must equal it.
            n = lib.tl_comm_processes(self._hosts)
            self._host = lib.tl_comm_process(self._hosts)
            given = dict(opts).get("num_hosts")
            if given is not None and int(given) != n:
                raise ValueError("num_hosts is %s but the launcher started %d processes, one per host: start %s "
                                 "(mpirun -np %s), or leave num_hosts out" % (given, n, given, given))
            opts.append(("num_hosts", n))
        opts += [("use_tpu", use_tpu), ("eval_on_tpu", eval_on_tpu)]
        for k, v in (("train_batch_size", train_batch_size), ("eval_batch_size", eval_batch_size),
                     ("predict_batch_size", predict_batch_size), ("warm_start_from", warm_start_from)):
            if v is not None:
                opts.append((k, v))
        if params:
            try:
                opts.append(("params", json.dumps(params)))
            except TypeError:
                pass  # params that are not JSON stay in Python; the C side needs none of them
        self._cfg = None
        self._est = None
        self._error = None
        self._trained = False
        self._keep = []
        self._cfg = self._make_config(opts)
        self._seed = self._resolved("tf_random_seed") or 0
        if self._hosts is not None:
            _lib.check(lib.tl_comm_set_timeout(self._hosts, float(self._resolved("host_timeout_secs"))))
        self._create()

    # ---- configuration ----------------------------------------------------------------

    @staticmethod
    def _distribution_options(dist, given):
        """The options a Keras distribution sets: DataParallel's mesh is the
        replicas (one device each); ModelParallel's ("batch", "model") mesh is
        replicas x num_cores_per_replica, its LayoutMap the variables' split."""
        if dist is None:
            return []
        from .. import distribution as _dist
        shape = list(dist.device_mesh.shape)
        devices = int(np.prod(shape))
        if isinstance(dist, _dist.DataParallel):
            out = [("devices", devices)]
        elif isinstance(dist, _dist.ModelParallel):
            if len(shape) != 2:
                raise ValueError("ModelParallel: tpuloop takes a 2-D mesh (replicas, cores per replica), got shape %s"
                                 % (tuple(shape),))
            out = [("devices", devices), ("tpu_config.num_cores_per_replica", shape[1])]
            if "tpu_config.per_host_input_for_training" not in given:
                out.append(("tpu_config.per_host_input_for_training", "PER_HOST_V2"))
        else:
            raise TypeError("distribution must be a DataParallel or ModelParallel, got %r" % (type(dist).__name__,))
        if "devices" in given and int(given["devices"]) != devices:
            raise ValueError("the distribution's mesh has %d devices but the RunConfig sets devices=%s"
                             % (devices, given["devices"]))
        return out

    def _make_config(self, opts):
        cfg = ctypes.c_void_p()
        _lib.check(lib.tl_config_create(ctypes.byref(cfg)))
        try:
            env = [("%s=%s" % (k, v)).encode() for k, v in os.environ.items()
                   if k in ("TPULOOP_DEVICE_COUNT", "TF_CONFIG")]
            envp = (ctypes.c_char_p * (len(env) + 1))(*env, None)
            _lib.check(lib.tl_config_apply_env(cfg, envp))
            for name, value in opts:
                _lib.check(lib.tl_config_set(cfg, name.encode(), option_text(value).encode(), _lib.SOURCE_FLAG))
            _lib.check(lib.tl_config_resolve(cfg))
        except errors.OpError as e:
            lib.tl_config_destroy(cfg)
            # The values came from the caller's own arguments, not from command-line flags.
            msg = re.sub(r" \[from flag --[A-Za-z0-9_.]+\]", "", str(e))
            raise type(e)(msg, e.status) from None
        except BaseException:
            lib.tl_config_destroy(cfg)
            raise
        return cfg

    def _resolved(self, name):
        out = ctypes.c_void_p()
        _lib.check(lib.tl_config_to_json(self._cfg, ctypes.byref(out)))
        try:
            d = json.loads(ctypes.string_at(out.value).decode())
        finally:
            lib.tl_free_string(out)
        return d.get(name, d.get("tpu_config", {}).get(name))

    def _create(self):
        o = _lib.EstimatorOptions()
        lib.tl_estimator_options_init(ctypes.byref(o))
        self._cb_model_fn = _lib.MODEL_FN(self._trace)
        self._cb_log = _lib.ON_LOG(self._on_log)
        self._cb_host_call = _lib.HOST_CALL(self._on_host_call)
        self._cb_metric_update = _lib.METRIC_UPDATE(self._on_metric_update)
        self._cb_metric_result = _lib.METRIC_RESULT(self._on_metric_result)
        self._cb_input_fn = _lib.INPUT_FN(self._on_input_fn)
        o.model_fn = self._cb_model_fn
        o.on_log = self._cb_log
        o.host_call = self._cb_host_call
        o.metric_update = self._cb_metric_update
        o.metric_result = self._cb_metric_result
        o.hosts = self._hosts
        from .. import distribution as _dist
        if isinstance(self._distribution, _dist.ModelParallel):
            o.distribution = self._distribution._c_handle()
        self._emb_features = []
        if self._emb_spec is not None:
            self._emb_config = self._emb_spec._c_config(self._seed)
            self._emb_features = self._emb_spec.features()
            o.embedding_config = self._emb_config.ptr
            self._emb_lrs = [_lr_caller(fn) for fn in self._emb_spec.learning_rate_fns()]
            if self._emb_lrs:
                self._cb_emb_lr = _lib.EMB_LR(self._on_embedding_lr)
                o.embedding_learning_rates = self._cb_emb_lr
        self._optimizers = []
        self._var_shapes = {}
        self._host_call = {}
        self._metric_fn = None
        self._predictions = None
        self._feature_layout = None
        est = ctypes.c_void_p()
        self._run(lambda: lib.tl_estimator_create(self._cfg, ctypes.byref(o), ctypes.byref(est)), "TPUEstimator")
        self._est = est

    def close(self):
        """Stops the device threads and frees the estimator (also at garbage collection)."""
        if getattr(self, "_est", None):
            lib.tl_estimator_destroy(self._est)
            self._est = None
        if getattr(self, "_cfg", None):
            lib.tl_config_destroy(self._cfg)
            self._cfg = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def model_dir(self):
        return self._model_dir

    @property
    def config(self):
        return self._config

    @property
    def params(self):
        return copy.deepcopy(self._params)

    # ---- calls into C -----------------------------------------------------------------

    def _run(self, call, what):
        """Runs a C call; a Python exception a callback raised is re-raised
        as it was (its traceback points at the user's line), otherwise the C
        status becomes its exception."""
        self._error = None
        st = call()
        err, self._error = self._error, None
        if err is not None:
            raise err
        _lib.check(st, what if st != 0 and not _lib.last_error().startswith(what) else None)

    def _fail(self, exc):
        if self._error is None:
            self._error = exc
        return _lib.fail_status(exc)

    # ---- tracing the model_fn ------------------------------------------------------------

    def _call_model_fn(self, features, labels, mode, params):
        sig = inspect.signature(self._model_fn).parameters
        kwargs = {}
        if "labels" in sig:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")
        if "mode" in sig:
            kwargs["mode"] = mode
        if "params" not in sig:
            raise ValueError("model_fn ({}) does not include params argument, required by TPUEstimator to pass "
                             "batch size as params['batch_size']".format(self._model_fn))
        kwargs["params"] = params
        if "config" in sig:
            kwargs["config"] = self._config
        return self._model_fn(features, **kwargs)

    def _features_of(self, g, t):
        feats = self._dense_features_of(g, t)
        if not self._emb_features:
            return feats
        if not isinstance(feats, dict):
            feats = {self._input_keys[0][0]: feats}
        for j, (name, fc) in enumerate(self._emb_features):
            shape = [g.batch_size] + ([fc.max_sequence_length] if fc.max_sequence_length else []) + [fc.table.dim]
            d, n = _graph.i64s(shape)
            feats[name] = _graph.record(g, "embedding activations of %r" % name,
                                        lib.tl_embedding_activations(g.ptr, j, d, n))
        return feats

    def _dense_features_of(self, g, t):
        layout = self._feature_layout
        if layout is None or layout[0] == "tensor":
            dtype = layout[1] if layout is not None else None
            return _graph.cast(t, dtype) if dtype not in (None, "float32") else t
        out, off = {}, 0
        for key, shape, dtype in layout[1]:
            width = int(np.prod(shape, dtype=np.int64)) if shape else 1
            s = _graph.record(g, "features[%r]" % key, lib.tl_slice(g.ptr, t.id, 1, off, width))
            s = _graph.reshape(s, [g.batch_size] + list(shape))
            out[key] = _graph.cast(s, dtype) if dtype != "float32" else s
            off += width
        return out

    def _trace(self, gptr, args_p, spec_p, user):
        try:
            a = args_p.contents
            mode = _MODE_KEYS[a.mode]
            g = Graph(gptr, a.mode, a.batch_size, None)
            g.var_shapes = self._var_shapes
            params = copy.deepcopy(self._params)
            params["batch_size"] = a.batch_size
            params["use_tpu"] = self._use_tpu
            with graph_scope(g):
                features = self._features_of(g, Tensor(g, a.features))
                labels = None
                if a.mode != _lib.MODE_PREDICT:
                    labels = Tensor(g, a.labels)
                    g.tensors[a.labels] = _graph.int32
                spec = self._call_model_fn(features, labels, mode, params)
                self._fill_spec(g, a.mode, spec, spec_p.contents)
            return 0
        except BaseException as e:  # noqa: B902 - every exception goes back through C
            return self._fail(e)

    def _fill_spec(self, g, mode, spec, c):
        if not isinstance(spec, TPUEstimatorSpec):
            raise TypeError("model_fn must return a TPUEstimatorSpec, got %r" % (type(spec).__name__,))
        if mode != _lib.MODE_PREDICT:
            if not isinstance(spec.loss, Tensor):
                raise ValueError("Missing loss.")
            if spec.loss.shape != ():
                raise ValueError("Loss must be scalar, given: %s" % (tuple(spec.loss.shape),))
            c.loss = spec.loss.id
        if mode == _lib.MODE_TRAIN:
            if not isinstance(spec.train_op, TrainOp):
                raise ValueError("Missing train_op.")
            opt = spec.train_op.optimizer
            oc = opt.config()
            self._optimizers.append(oc)
            c.optimizer = ctypes.pointer(oc)
            c.optimizer_reduce_sum = opt.reduce_sum()
        if spec.host_call is not None and mode != _lib.MODE_PREDICT:
            names, ts = _tensor_list("host_call", spec.host_call[1], allow_step=True)
            slots = ["step" if isinstance(t, _GlobalStep) else t.shape[0] for t in ts]
            if names:
                names = [n for n, t in zip(names, ts) if not isinstance(t, _GlobalStep)]
            ts = [t for t in ts if not isinstance(t, _GlobalStep)]
            c.num_host_call = self._outfeed("host_call", names, ts, c.host_call, c.host_call_names)
            self._host_call[mode] = (spec.host_call[0], spec.host_call[1], slots)
        elif mode == _lib.MODE_TRAIN:
            c.host_call_disabled = True  # nothing to outfeed: Python is not called per step
            self._host_call.pop(mode, None)
        if mode == _lib.MODE_EVAL:
            if spec.eval_metrics is not None:
                names, ts = _tensor_list("eval_metrics", spec.eval_metrics[1])
                c.num_eval_metric_tensors = self._outfeed("eval_metrics", names, ts, c.eval_metric_tensors,
                                                          c.eval_metric_tensor_names)
                self._metric_fn = (spec.eval_metrics[0], names)
            else:
                self._metric_fn = None
        if mode == _lib.MODE_PREDICT:
            self._fill_predictions(g, spec.predictions, c)

    def _outfeed(self, what, names, ts, ids, c_names):
        """Fills a spec's outfed tensors (ids) and their names; returns the count."""
        if len(ts) > len(ids):
            raise ValueError("%s: %d tensors; tpuloop outfeeds at most %d" % (what, len(ts), len(ids)))
        keep = [n.encode() for n in names] if names else []
        for k, t in enumerate(ts):
            ids[k] = t.id
            if names:
                c_names[k] = keep[k]
        self._keep.append(keep)   # C copies the names when the model_fn returns
        return len(ts)

    def _fill_predictions(self, g, predictions, c):
        if predictions is None:
            raise ValueError("Missing predictions.")
        single = isinstance(predictions, Tensor)
        items = [("", predictions)] if single else list(predictions.items())
        layout, flat = [], []
        for key, t in items:
            if not isinstance(t, Tensor):
                raise TypeError("predictions[%r] is %r, not a tpuloop.Tensor" % (key, type(t).__name__))
            shape = tuple(t.shape)
            if not shape or shape[0] != g.batch_size:
                raise ValueError("predictions[%r] must keep the batch dimension %d, got shape %s"
                                 % (key, g.batch_size, shape))
            width = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
            layout.append((key, shape[1:], t.dtype, width))
            flat.append(_graph.reshape(_graph.cast(t, _graph.float32), [g.batch_size, width]))
        from .._ops import concat
        c.predictions = (flat[0] if len(flat) == 1 else concat(flat, axis=1)).id
        self._predictions = (single, layout)

    # ---- callbacks at loop boundaries ----------------------------------------------------

    def _on_log(self, lg_p, user):
        try:
            if self._progress_line is not None:
                self._progress_line(lg_p.contents)
        except BaseException as e:  # a progress line never stops training
            log.warning("progress line: %s", e)

    def _on_embedding_lr(self, step, values, n, user):
        """The dynamic embedding learning rates of a step (each replica's
        thread calls it; the values depend on the step alone)."""
        try:
            if n != len(self._emb_lrs):
                raise ValueError("the engine asks for %d dynamic learning rates; the optimizers have %d"
                                 % (n, len(self._emb_lrs)))
            for k, fn in enumerate(self._emb_lrs):
                values[k] = float(fn(step))
            return 0
        except BaseException as e:  # noqa: B902
            return self._fail(e)

    def _on_host_call(self, step, tensors, n, user):
        try:
            mode = self._mode
            hc = self._host_call.get(mode)
            if hc is not None:
                fn, given, slots = hc
                vals = iter(v for _, v in _host_arrays(tensors, n))
                full, reps = [], 1
                for slot in slots:
                    if slot != "step":
                        full.append(next(vals))
                        reps = full[-1].shape[0] // slot if slot else 1
                # The global step, where the model_fn passed get_global_step(): one per replica, as TensorFlow
                # concatenates a (1,) tensor over the replicas.
                it = iter(full)
                full = [np.full((reps,), step, np.int64) if slot == "step" else next(it) for slot in slots]
                if isinstance(given, dict):
                    fn(**dict(zip(given.keys(), full)))
                else:
                    fn(*full)
            return 0
        except BaseException as e:  # noqa: B902
            return self._fail(e)

    def _on_metric_update(self, tensors, n, user):
        try:
            if self._metric_fn is None:
                return 0
            vals = [v for _, v in _host_arrays(tensors, n)]
            tmetrics._begin(self._metric_accs)
            try:
                out = _call_with(self._metric_fn[0], vals, self._metric_fn[1])
            finally:
                tmetrics._end()
            if not isinstance(out, dict):
                raise TypeError("metric_fn must return a dict of metrics, got %r" % (type(out).__name__,))
            self._metric_ops = out
            return 0
        except BaseException as e:  # noqa: B902
            return self._fail(e)

    def _on_metric_result(self, out, cap, n_out, user):
        try:
            ops = self._metric_ops or {}
            if len(ops) > cap:
                raise ValueError("metric_fn returned %d metrics; tpuloop reports at most %d" % (len(ops), cap))
            k = 0
            for name, op in ops.items():
                if isinstance(op, tmetrics.MetricOp):
                    value = op.metric.result()
                elif isinstance(op, (tuple, list)) and op:
                    value = float(np.asarray(op[0]))
                else:
                    value = float(np.asarray(op))
                b = name.encode()
                if len(b) >= 64:
                    raise ValueError("metric name %r is longer than 63 bytes" % name)
                out[k].name = b
                out[k].value = float(value)
                k += 1
            n_out[0] = k
            return 0
        except BaseException as e:  # noqa: B902
            return self._fail(e)

    # ---- input ---------------------------------------------------------------------------

    def _check_input_fn(self, input_fn):
        if "params" not in inspect.signature(input_fn).parameters:
            raise ValueError("input_fn ({}) does not include params argument, required by TPUEstimator to pass "
                             "batch size as params[\"batch_size\"]".format(input_fn))

    def _on_input_fn(self, ctx_p, user, out):
        try:
            ctx = ctx_p.contents
            # input_fn runs once per invocation, as in TensorFlow: the estimator opens invocation 0 a second
            # time (its first training reads the input's shape from it first), and gets the same pipeline
            # again, built from the Dataset that call returned.
            key = (ctx.mode, ctx.host, ctx.index, ctx.total, ctx.num_replicas, ctx.first_replica)
            ds = self._recipes.get(key)
            if ds is None:
                ds = self._call_input_fn(ctx)
                self._recipes[key] = ds
            prev = tdata._seed_hook
            tdata._seed_hook = lambda: self._seed
            try:
                out[0] = ds._build().value
            finally:
                tdata._seed_hook = prev
            return 0
        except BaseException as e:  # noqa: B902
            return self._fail(e)

    def _call_input_fn(self, ctx):
        """The user's input_fn for one invocation: its Dataset, checked."""
        params = copy.deepcopy(self._params)
        params["batch_size"] = ctx.batch_size
        if self._use_tpu:   # spec §4: the device path only
            params["context"] = TPUContext(ctx)
        sig = inspect.signature(self._input_fn).parameters
        kwargs = {"params": params}
        if "mode" in sig:
            kwargs["mode"] = _MODE_KEYS[ctx.mode]
        if "config" in sig:
            kwargs["config"] = self._config
        prev = tdata._seed_hook
        tdata._seed_hook = lambda: self._seed
        try:
            ds = self._input_fn(**kwargs)
        finally:
            tdata._seed_hook = prev
        if not isinstance(ds, tdata.Dataset):
            raise TypeError("`input_fn` must return a `Dataset` in tpuloop (got %r): build it with "
                            "tpuloop.data" % (type(ds).__name__,))
        first = self._input_keys is None
        self._use_input(ds, ctx.mode)
        if first:
            self._set_keys(self._cinput)
        return ds

    def _use_input(self, ds, mode):
        """Checks the element structure and learns the features' layout."""
        s = ds.structure
        if isinstance(s, tuple) and len(s) == 2:
            feats, label = s
        elif mode == _lib.MODE_PREDICT:
            feats, label = (s[0] if isinstance(s, tuple) and len(s) == 1 else s), None
        else:
            raise ValueError("input_fn's dataset must yield (features, labels) for %s, got the structure %r"
                             % (_MODE_KEYS[mode], s))
        if label is not None and not isinstance(label, str):
            raise ValueError("labels must be one tensor in tpuloop, got the structure %r" % (label,))
        emb = {name for name, _ in self._emb_features}
        if isinstance(feats, dict):
            keys = [k for _, k in tdata._flatten(feats, ()) if k not in emb]
            missing = [name for name in emb if name not in feats]
            if missing:
                raise ValueError("the input's features have no ids for embedding feature(s) %s" % missing)
            if not keys:
                raise ValueError("features need one dense tensor besides the embedding ids (a model of embeddings "
                                 "alone may ignore it)")
            feats = {k: v for k, v in feats.items() if k not in emb}
        elif isinstance(feats, str):
            keys = [feats]
        else:
            raise ValueError("features must be a tensor or a dict of tensors, got the structure %r" % (feats,))
        if self._input_keys is not None and self._input_keys != (keys, label):
            raise ValueError("input_fn's invocations yield different features: %s and %s"
                             % (self._input_keys, (keys, label)))
        self._input_keys = (keys, label)
        if self._feature_layout is None:
            self._feature_layout = self._peek_layout(ds, feats, keys)

    def _peek_layout(self, ds, feats, keys):
        """Each feature's per-example shape and dtype, from the first element."""
        first = next(iter(ds), None)
        if first is None:
            raise ValueError("input_fn's dataset is empty")
        flat = dict(tdata._flatten(feats, ()))
        leaves = dict(tdata._flatten(first if not isinstance(first, tuple) else first[0], ()))
        info = []
        for path, key in flat.items():
            arr = leaves[path]
            info.append((key, tuple(arr.shape[1:]), str(arr.dtype)))
        if isinstance(feats, str):
            return ("tensor", info[0][2])
        return ("dict", info)

    def _prepare_input(self, input_fn, mode):
        """The tl_input C calls input_fn through. Its feature and label keys
        are filled in at the first invocation (C reads them only when it
        reads the elements), so input_fn runs once per invocation, as in
        TensorFlow."""
        self._check_input_fn(input_fn)
        self._input_fn = input_fn
        self._recipes = {}
        self._input_keys = None
        c = _lib.Input()
        c.input_fn = self._cb_input_fn
        self._cinput = c
        return c

    def _set_keys(self, c):
        keys, label = self._input_keys
        arr = (ctypes.c_char_p * len(keys))(*[k.encode() for k in keys])
        self._keep.append(arr)
        c.feature_keys = arr
        c.num_feature_keys = len(keys)
        c.label_key = label.encode() if label else None

    # ---- train, evaluate, predict ------------------------------------------------------

    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """Trains from model_dir's latest checkpoint for steps more (or to
        max_steps, or to the end of a finite input); returns self."""
        if hooks or saving_listeners:
            raise ValueError("train: hooks and saving_listeners are not supported by tpuloop; use host_call")
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError("Must specify steps > 0, given: {}".format(steps))
        if max_steps is not None and max_steps <= 0:
            raise ValueError("Must specify max_steps > 0, given: {}".format(max_steps))
        _lib.check(lib.tl_estimator_set_steps(self._est, -1 if steps is None else steps,
                                              -1 if max_steps is None else max_steps, -1))
        c = self._prepare_input(input_fn, _lib.MODE_TRAIN)
        c.finite = True
        res = _lib.TrainResult()
        self._mode = _lib.MODE_TRAIN
        start = lib.tl_estimator_global_step(self._est) if self._trained else self._checkpoint_step()
        final = start + steps if steps is not None else max_steps
        tty = self._progress if self._progress is not None else sys.stderr.isatty()
        show = self._progress is not False and self._host == 0     # host 0 reports, as `tpuloop train`
        self._progress_line = _Progress(sys.stderr, final, tty) if show else None
        # Ctrl-C (or SIGTERM) while C trains stops at the next loop boundary, after a checkpoint; the signal
        # is then delivered again to Python (KeyboardInterrupt for Ctrl-C), so nothing is lost and a later
        # train resumes where this one stopped.
        catch = threading.current_thread() is threading.main_thread()
        if catch:
            _lib.check(lib.tl_estimator_stop_signals_install(self._est))
        sig = 0
        try:
            self._run(lambda: lib.tl_estimator_train_input(self._est, ctypes.byref(c), ctypes.byref(res)), "train")
        finally:
            if catch:
                sig = lib.tl_estimator_stop_signals_remove()
            if self._progress_line is not None:
                self._progress_line.end()
            self._recipes = {}
        self._trained = True
        self.last_train = res
        if sig and res.stopped:
            log.warning("training stopped at step %d by signal %d, after a checkpoint", res.global_step, sig)
            signal.raise_signal(sig)
        return self

    def _ensure_params(self, checkpoint_path):
        if checkpoint_path is not None:
            self._run(lambda: lib.tl_estimator_restore(self._est, checkpoint_path.encode()), "checkpoint_path")
            self._trained = True
        elif not self._trained:
            self._run(lambda: lib.tl_estimator_restore(self._est, None), "restore")
            self._trained = True

    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """Evaluates steps batches; returns {'loss', 'global_step', metric_fn's metrics}."""
        if hooks:
            raise ValueError("evaluate: hooks are not supported by tpuloop")
        if steps is not None and steps <= 0:
            raise ValueError("Must specify steps > 0, given: {}".format(steps))
        self._ensure_params(checkpoint_path)
        _lib.check(lib.tl_estimator_set_steps(self._est, -1, -1, -1 if steps is None else steps))
        c = self._prepare_input(input_fn, _lib.MODE_EVAL)
        res = _lib.EvalResult()
        self._mode = _lib.MODE_EVAL
        self._metric_accs = tmetrics._Accumulators()
        self._metric_ops = None
        try:
            self._run(lambda: lib.tl_estimator_evaluate_input(self._est, ctypes.byref(c), ctypes.byref(res)),
                      "evaluate")
        finally:
            self._recipes = {}
        self.last_eval = res
        out = {"loss": np.float32(res.loss_replica0), "global_step": int(res.global_step)}
        for i in range(res.num_metrics):
            out[res.metrics[i].name.decode()] = np.float32(res.metrics[i].value)
        return out

    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None, yield_single_examples=True):
        """Yields the predictions of every example of the input: a NumPy
        array per example, or a dict of them when predictions is a dict."""
        if hooks:
            raise ValueError("predict: hooks are not supported by tpuloop")
        self._ensure_params(checkpoint_path)
        c = self._prepare_input(input_fn, _lib.MODE_PREDICT)
        res = _lib.PredictResult()
        self._mode = _lib.MODE_PREDICT
        try:
            self._run(lambda: lib.tl_estimator_predict_input(self._est, ctypes.byref(c), ctypes.byref(res)),
                      "predict")
        finally:
            self._recipes = {}
        try:
            n, w = res.num_examples, res.width
            values = np.ctypeslib.as_array(res.values, shape=(n, w)).copy() if n else np.zeros((0, w), np.float32)
        finally:
            lib.tl_predict_result_free(ctypes.byref(res))
        single, layout = self._predictions
        cols, off = {}, 0
        for key, shape, dtype, width in layout:
            col = values[:, off:off + width].reshape((n,) + tuple(shape))
            if dtype is not _graph.float32:
                col = col.astype(dtype.as_numpy_dtype)
            cols[key] = col
            off += width
        if predict_keys is not None and not single:
            missing = [k for k in predict_keys if k not in cols]
            if missing:
                raise ValueError("Expected to find: {} in predictions. Given: {}".format(missing, list(cols)))
            cols = {k: cols[k] for k in predict_keys}
        if not yield_single_examples:
            yield cols[""] if single else cols
            return
        for i in range(n):
            yield cols[""][i] if single else {k: v[i] for k, v in cols.items()}

    # ---- inspection ------------------------------------------------------------------------

    def get_variable_value(self, name):
        """A variable's current value as a NumPy array (after train or a restore)."""
        self._ensure_params(None)
        shape = self._variable_shape(name)
        out = np.zeros(shape, np.float32)
        self._run(lambda: lib.tl_estimator_variable_value(self._est, name.encode(),
                                                          out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                          out.size), "get_variable_value")
        return out

    def _variable_shape(self, name):
        if name not in self._var_shapes:
            raise ValueError("get_variable_value: no variable %r; the model has %s"
                             % (name, sorted(self._var_shapes)))
        return self._var_shapes[name]

    def get_variable_names(self):
        """The variables the model_fn made (after the first train, evaluate or predict)."""
        return sorted(self._var_shapes)

    def params_digest(self):
        """SHA-256 of every variable (tpuloop's params_digest, as `tpuloop train` prints it)."""
        out = (ctypes.c_char * 65)()
        _lib.check(lib.tl_estimator_params_digest(self._est, out))
        return out.value.decode()

    def _checkpoint_step(self):
        """The step training will resume from: model_dir's latest checkpoint's, or 0."""
        ck = self.latest_checkpoint()
        try:
            return int(ck.rsplit("-", 1)[1]) if ck else 0
        except ValueError:
            return 0

    def latest_checkpoint(self):
        ck = os.path.join(self._model_dir, "checkpoint")
        if not os.path.exists(ck):
            return None
        with open(ck) as f:
            for line in f:
                if line.startswith("model_checkpoint_path:"):
                    p = line.split(":", 1)[1].strip().strip('"')
                    return p if os.path.isabs(p) else os.path.join(self._model_dir, p)
        return None


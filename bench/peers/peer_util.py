# peer_util.py — shared by the peers in bench/peers (PyTorch 2.x and JAX in
# the venv of scripts/install-bench-peers): thread limits, Fashion-MNIST,
# timing and the JSON line. Imports neither torch nor jax: limit_threads must
# run before either is imported, since both size their thread pools then.
#
# Threads: the process is pinned to its first N allowed CPUs
# (sched_setaffinity), so every pool sized from the machine sees N cores, and
# OMP_NUM_THREADS, MKL_NUM_THREADS and OPENBLAS_NUM_THREADS are N. PyTorch
# also gets torch.set_num_threads(N) (its OpenMP pool) and one inter-op
# thread. For JAX the affinity is what limits it: XLA's CPU client sizes its
# pools from the CPUs the process may run on, and --xla_cpu_multi_thread_eigen
# =false alone does not hold it to one core (a jitted conv's gradient, 30
# times, kept 5 threads busy with that flag and no affinity; pinned to one CPU
# the process cannot use more than one core, whatever its threads). XLA_FLAGS
# also gets --xla_cpu_multi_thread_eigen=false at N = 1, so that Eigen's
# convolutions stay on the calling thread. XLA has no thread-count flag:
# XLA_FLAGS="--intra_op_parallelism_threads=1" aborts with "Unknown flag in
# XLA_FLAGS" (that was TensorFlow's ConfigProto). Each record carries
# cpu_util, the process's CPU seconds over wall seconds while timed: at most
# N when the limit holds, less when other processes share the cores.
import argparse
import gzip
import json
import os
import platform
import resource
import statistics
import sys
import time

FMNIST_DIR = os.environ.get("TPULOOP_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def args(description, steps, reps, warmup, extra=None):
    """Command line: --threads, --steps, --reps, --warmup; the counts default to
    TPULOOP_BENCH_PEER_STEPS, _REPS, _WARMUP, then to the given values."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--threads", type=int, default=1)
    env = os.environ.get
    ap.add_argument("--steps", type=int, default=int(env("TPULOOP_BENCH_PEER_STEPS", steps)),
                    help="timed steps per repetition (TPULOOP_BENCH_PEER_STEPS)")
    ap.add_argument("--reps", type=int, default=int(env("TPULOOP_BENCH_PEER_REPS", reps)),
                    help="repetitions (TPULOOP_BENCH_PEER_REPS)")
    ap.add_argument("--warmup", type=int, default=int(env("TPULOOP_BENCH_PEER_WARMUP", warmup)),
                    help="untimed steps first (TPULOOP_BENCH_PEER_WARMUP)")
    if extra:
        extra(ap)
    a = ap.parse_args()
    if a.threads < 1 or a.steps < 1 or a.reps < 1 or a.warmup < 0:
        ap.error("--threads, --steps and --reps must be at least 1, --warmup at least 0")
    return a


def limit_threads(n, framework):
    """Pins the process to n CPUs and sets the thread variables; call before
    importing torch or jax. Returns the fields that record it."""
    cpus = sorted(os.sched_getaffinity(0))
    if n > len(cpus):
        sys.exit("%d threads asked, but this process may run on %d CPUs only" % (n, len(cpus)))
    os.sched_setaffinity(0, cpus[:n])
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[v] = str(n)
    rec = {"threads": n, "cpus": cpus[:n]}
    if framework == "jax":
        flags = os.environ.get("XLA_FLAGS", "")
        if n == 1 and "xla_cpu_multi_thread_eigen" not in flags:
            flags = (flags + " --xla_cpu_multi_thread_eigen=false").strip()
        os.environ["XLA_FLAGS"] = flags
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        rec["XLA_FLAGS"] = flags
    return rec


def read_idx(path):
    """An IDX file (gzip or not) of unsigned bytes as a numpy array."""
    import numpy as np
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError("%s: not an IDX file of unsigned bytes" % path)
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError("%s: %d bytes of data for dims %s" % (path, arr.size, dims))
    return arr.reshape(dims)


def fashion_mnist_train():
    """The training split: images (60000, 28, 28, 1) float32 in [0, 1] (NHWC),
    labels (60000,) int32."""
    import numpy as np
    x = read_idx(os.path.join(FMNIST_DIR, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    y = read_idx(os.path.join(FMNIST_DIR, "train-labels-idx1-ubyte.gz")).astype(np.int32)
    return x.reshape(-1, 28, 28, 1), y


def fashion_mnist_test():
    """The test split, flat: images (10000, 784) float32 in [0, 1], labels
    (10000,) int32."""
    import numpy as np
    x = read_idx(os.path.join(FMNIST_DIR, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    y = read_idx(os.path.join(FMNIST_DIR, "t10k-labels-idx1-ubyte.gz")).astype(np.int32)
    return x.reshape(-1, 784), y


class Reps:
    """Times repetitions: wall seconds and the process's CPU seconds of each."""

    def __init__(self):
        self.wall, self.cpu = [], []

    def _cpu(self):
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def start(self):
        self.t0, self.c0 = time.perf_counter(), self._cpu()

    def stop(self):
        self.wall.append(time.perf_counter() - self.t0)
        self.cpu.append(self._cpu() - self.c0)

    def examples_per_s(self, reps, step_fn, examples):
        """Times reps calls of step_fn, each training `examples` examples:
        examples/s per repetition, and the last call's result."""
        eps, out = [], None
        for _ in range(reps):
            self.start()
            out = step_fn()
            self.stop()
            eps.append(examples / self.wall[-1])
        return eps, out

    def fields(self):
        util = [c / w for c, w in zip(self.cpu, self.wall)]
        return {"cpu_util_median": round(statistics.median(util), 3), "cpu_util_max": round(max(util), 3)}


def emit(rec, values, digits=1):
    """Prints rec as one JSON line with the repetitions' values, their median,
    min and max, the peak RSS and the interpreter's version."""
    rec["reps"] = [round(v, digits) for v in values]
    rec["median"] = round(statistics.median(values), digits)
    rec["min"] = round(min(values), digits)
    rec["max"] = round(max(values), digits)
    rec["maxrss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    rec["os_threads"] = len(os.listdir("/proc/self/task"))
    rec.setdefault("versions", {})["python"] = platform.python_version()
    print(json.dumps(rec), flush=True)

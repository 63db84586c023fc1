"""Hosts over MPI from Python: `mpirun -np 2 python3 prog.py` trains the bits of one process with the same
replicas (hosts_child.py: 2 hosts x 1 device against 1 host x 2 devices)."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = shutil.which("mpirun")


def run(cmd):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(["timeout", "180"] + cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env=env, cwd=HERE)


def results(prefix, n):
    return [open("%s.%d" % (prefix, r)).read().split() for r in range(n)]


@pytest.mark.skipif(MPIRUN is None, reason="Open MPI's mpirun is not installed (scripts/install-deps installs it)")
def test_two_hosts_train_the_bits_of_one(tmp_path):
    two = run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "PYTHONPATH",
               "-x", "PYTHONDONTWRITEBYTECODE", sys.executable, "hosts_child.py", str(tmp_path / "two"), "1",
               str(tmp_path / "two.out")])
    assert two.returncode == 0, two.stderr[-3000:]
    one = run([sys.executable, "hosts_child.py", str(tmp_path / "one"), "2", str(tmp_path / "one.out")])
    assert one.returncode == 0, one.stderr[-3000:]
    d2, d1 = results(tmp_path / "two.out", 2), results(tmp_path / "one.out", 1)
    assert d2[0] == d2[1] == d1[0], (d2, d1)
    assert d1[0][1] == "60"
    assert os.path.exists(tmp_path / "two" / "model.ckpt-60.safetensors")     # host 0 writes the model_dir

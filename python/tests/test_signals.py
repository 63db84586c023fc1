"""Ctrl-C while C trains: a checkpoint at the next loop boundary, then KeyboardInterrupt; resuming gives the
bits of a run never interrupted."""
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def start(model_dir, steps):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.Popen([sys.executable, os.path.join(HERE, "stop_child.py"), str(model_dir), str(steps)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env=env)


def digest_of(out):
    line = [x for x in out.splitlines() if x.startswith("digest ")][-1]
    return line.split()[1], int(line.split()[2])


def test_ctrl_c_checkpoints_and_resumes_to_the_same_bits(tmp_path):
    steps = 400000
    p = start(tmp_path / "stopped", steps)
    assert p.stdout.readline().strip() == "training"
    deadline = time.time() + 120
    ckpt_dir = tmp_path / "stopped"
    while not (ckpt_dir.exists() and any(f.startswith("model.ckpt-") for f in os.listdir(ckpt_dir))) and \
            time.time() < deadline:
        time.sleep(0.05)                                    # the save of the starting state: training runs
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode != 0 and "KeyboardInterrupt" in err, err[-2000:]
    assert "SIGINT: stopping at the next loop boundary" in err
    ckpts = sorted(int(f.split("-")[1].split(".")[0]) for f in os.listdir(tmp_path / "stopped")
                   if f.startswith("model.ckpt-") and f.endswith(".safetensors"))
    stopped_at = ckpts[-1]
    assert 0 < stopped_at < steps and stopped_at % 50 == 0, ckpts
    final = stopped_at + 100
    resumed = start(tmp_path / "stopped", final)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-2000:]
    whole = start(tmp_path / "whole", final)
    out2, err2 = whole.communicate(timeout=300)
    assert whole.returncode == 0, err2[-2000:]
    assert digest_of(out) == digest_of(out2) and digest_of(out)[1] == final

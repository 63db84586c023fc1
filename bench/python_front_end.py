"""python_front_end.py — what the Python front end costs per step: the MLP
784-256-256-10 (Adam, batch 128, Fashion-MNIST) trained by
examples/mlp_fashion_mnist.py's model_fn from Python (its input
from_tensor_slices(NumPy).shuffle(60000).repeat().batch(128)), against
`tpuloop train` of the same configuration (the idx files, shuffled and
batched by the same C pipeline: the same params_digest) and of the main job
(configs/mlp_fashion_mnist.json: the data in memory, tpuloop's fastest
input), in alternating rounds, each run its own process.

    /usr/bin/python3 bench/python_front_end.py CLI [ROUNDS [STEPS]]

Each run reports the examples/s of its C train call (global batch x steps /
the seconds training took, tracing and loading excluded alike); one JSON
line per round and device count, then one per device count with the median
Python / CLI ratio and its min and max over the rounds (the issue's target:
>= 0.97) against each configuration, and the processes' whole wall times.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FASHION = "/usr/share/datasets/fashion-mnist"
CONFIG = {
    "train_batch_size": 128, "tf_random_seed": 42, "log_step_count_steps": 1000000,
    "tpu_config": {"iterations_per_loop": 100},
    "model": {"model_name": "mlp", "hidden_units": [256, 256], "activation": "relu", "optimizer": "adam",
              "learning_rate": 0.001},
    "input": {"dataset": "idx", "files": [FASHION + "/train-images-idx3-ubyte.gz",
                                          FASHION + "/train-labels-idx1-ubyte.gz"],
              "scale": 1 / 255, "shuffle_buffer_size": 60000, "epochs": 100},
}


def child(steps, devices, model_dir):
    """The Python run (in its own process)."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import numpy as np
    import mlp_fashion_mnist as mlp
    import tpuloop as tf
    (x, y), _ = tf.datasets.fashion_mnist.load_data()
    x = x.astype(np.float32) * np.float32(1 / 255)
    config = tf.estimator.tpu.RunConfig(model_dir=model_dir, tf_random_seed=42, devices=devices,
                                        log_step_count_steps=1000000, save_checkpoints_steps=1000000,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=100))
    est = tf.estimator.tpu.TPUEstimator(model_fn=mlp.model_fn, config=config, train_batch_size=128,
                                        progress_bar=False)
    est.train(mlp.make_input_fn(x, y.astype(np.int32), True, 100), steps=steps)
    r = est.last_train
    print(json.dumps({"examples_per_sec": steps * 128 / r.seconds, "digest": est.params_digest()}))


def run(cmd, env=None):
    t = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900, env=env)
    if out.returncode != 0:
        raise RuntimeError("%s failed: %s" % (cmd[:3], out.stderr[-2000:]))
    return json.loads(out.stdout.strip().splitlines()[-1]), time.time() - t


def main():
    if sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        return
    cli = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    if not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        print(json.dumps({"bench": "python_front_end", "skipped": "no Fashion-MNIST in " + FASHION}))
        return
    tmp = tempfile.mkdtemp(prefix="tpuloop_bench_py_")
    cfg = os.path.join(tmp, "mlp_idx.json")
    with open(cfg, "w") as f:
        json.dump(CONFIG, f)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    main_cfg = os.path.join(ROOT, "configs", "mlp_fashion_mnist.json")
    for devices in (1, 2):
        ratios, ratios_main, py_eps, cli_eps, main_eps, walls = [], [], [], [], [], []
        for rnd in range(rounds):
            dirs = [os.path.join(tmp, "%s%d_%d" % (k, devices, rnd)) for k in ("cli", "main", "py")]
            flags = ["--devices=%d" % devices, "--train_steps=%d" % steps, "--save_checkpoints_steps=1000000"]
            c, cw = run([cli, "train", cfg] + flags + ["--model_dir=" + dirs[0]])
            m, mw = run([cli, "train", main_cfg] + flags + ["--model_dir=" + dirs[1]])
            p, pw = run([sys.executable, os.path.abspath(__file__), "--child", str(steps), str(devices), dirs[2]],
                        env)
            ce, me = steps * 128 / c["train_seconds"], steps * 128 / m["train_seconds"]
            ratios.append(p["examples_per_sec"] / ce)
            ratios_main.append(p["examples_per_sec"] / me)
            py_eps.append(p["examples_per_sec"])
            cli_eps.append(ce)
            main_eps.append(me)
            walls.append((pw, cw))
            print(json.dumps({"bench": "python_front_end_round", "devices": devices, "round": rnd,
                              "python_examples_per_s": round(p["examples_per_sec"]), "cli_examples_per_s": round(ce),
                              "main_config_examples_per_s": round(me), "ratio": round(ratios[-1], 4),
                              "ratio_main_config": round(ratios_main[-1], 4),
                              "same_params_digest": p["digest"] == c["params_digest"],
                              "python_wall_s": round(pw, 2), "cli_wall_s": round(cw, 2)}), flush=True)
        print(json.dumps({"bench": "python_front_end", "devices": devices, "rounds": rounds, "steps": steps,
                          "ratio_median": round(statistics.median(ratios), 4), "ratio_min": round(min(ratios), 4),
                          "ratio_max": round(max(ratios), 4),
                          "ratio_main_config_median": round(statistics.median(ratios_main), 4),
                          "ratio_main_config_min": round(min(ratios_main), 4),
                          "ratio_main_config_max": round(max(ratios_main), 4),
                          "python_examples_per_s_median": round(statistics.median(py_eps)),
                          "cli_examples_per_s_median": round(statistics.median(cli_eps)),
                          "main_config_examples_per_s_median": round(statistics.median(main_eps)),
                          "python_wall_s_median": round(statistics.median(w[0] for w in walls), 2),
                          "cli_wall_s_median": round(statistics.median(w[1] for w in walls), 2)}), flush=True)


if __name__ == "__main__":
    main()

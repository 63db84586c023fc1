#!/usr/bin/python3
"""Reference runs of TensorFlow's v1 optimizers, for tests/test_optim_ref.c.

Each case runs `--steps` updates of a vector of `--n` float64 elements with
deterministic gradients and prints the final variable and slots, computed two
ways:

  numpy  TensorFlow's formulas (tf.compat.v1.train.*Optimizer and the
         ApplyGradientDescent / ApplyMomentum / ApplyAdagrad / ApplyAdam /
         ApplyRMSProp / ApplyCenteredRMSProp kernels of training_ops.cc),
         transcribed in NumPy float64 from their documentation;
  torch  torch.optim in float64, configured so that it computes the same
         update wherever PyTorch's formula can be made to coincide with TF's
         (see torch_run); null, with the reason, where it cannot.

The inputs are the same formulas the C test uses:

  param_i(0) = 0.5 * cos(0.7 * i + 0.3)
  g_i(t)     = sin(0.37 * i + 0.11 * t) * (1 + 0.01 * t)     t = 0 .. steps-1

A case is one argument, comma-separated key=value pairs:

  kind=sgd|momentum|adagrad|adam|rmsprop  lr=<float>
  momentum=<f> nesterov=0|1               (momentum; momentum also rmsprop)
  init_acc=<f>                            (adagrad)
  beta1=<f> beta2=<f> eps=<f>             (adam; eps also rmsprop)
  decay=<f> centered=0|1                  (rmsprop)
  sched=constant|exponential|cosine decay_steps=<int> decay_rate=<f>
  staircase=0|1 alpha=<f> warmup=<int>

Output (stdout), one JSON object:
  {"steps": S, "n": N, "cases": [{"spec": "...", "lr": [S floats],
    "numpy": {"param": [N], "slots": [[N], ...]},
    "torch": {"param": [N], "slots": [[N] or null, ...]} or null,
    "torch_why": "..."}]}
Slots are in tpuloop's order (Adam m, v; Adagrad accumulator; Momentum
momentum; RMSProp rms, momentum, mg).

Usage: /usr/bin/python3 tests/ref/optim_ref.py [--steps S] [--n N] CASE...
"""
import json
import math
import sys

import numpy as np


def parse_case(text):
    case = {"kind": None, "lr": None, "momentum": 0.0, "nesterov": 0, "init_acc": 0.1,
            "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "decay": 0.9, "centered": 0,
            "sched": "constant", "decay_steps": 1, "decay_rate": 1.0, "staircase": 0,
            "alpha": 0.0, "warmup": 0}
    ints = {"nesterov", "centered", "decay_steps", "staircase", "warmup"}
    strs = {"kind", "sched"}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key not in case:
            raise ValueError("case %r: bad item %r" % (text, item))
        case[key] = value if key in strs else int(value) if key in ints else float(value)
    if case["kind"] not in ("sgd", "momentum", "adagrad", "adam", "rmsprop"):
        raise ValueError("case %r: unknown kind %r" % (text, case["kind"]))
    if case["sched"] not in ("constant", "exponential", "cosine"):
        raise ValueError("case %r: unknown sched %r" % (text, case["sched"]))
    if case["lr"] is None:
        raise ValueError("case %r: lr is required" % text)
    return case


def learning_rate(c, step):
    """tf.compat.v1.train.exponential_decay / cosine_decay, wrapped in BERT's
    linear warmup (optimization.py: init_lr * step / W while step < W)."""
    lr = c["lr"]
    if c["warmup"] > 0 and step < c["warmup"]:
        return lr * (step / c["warmup"])
    if c["sched"] == "exponential":
        p = step / c["decay_steps"]
        if c["staircase"]:
            p = math.floor(p)
        return lr * c["decay_rate"] ** p
    if c["sched"] == "cosine":
        s = min(step, c["decay_steps"])
        cosine = 0.5 * (1.0 + math.cos(math.pi * s / c["decay_steps"]))
        return lr * ((1.0 - c["alpha"]) * cosine + c["alpha"])
    return lr


def inputs(n, steps):
    i = np.arange(n, dtype=np.float64)
    param = 0.5 * np.cos(0.7 * i + 0.3)
    grads = [np.sin(0.37 * i + 0.11 * t) * (1.0 + 0.01 * t) for t in range(steps)]
    return param, grads


def numpy_run(c, n, steps):
    var, grads = inputs(n, steps)
    kind = c["kind"]
    zeros = np.zeros(n)
    if kind == "sgd":
        slots = []
    elif kind == "momentum":
        slots = [zeros.copy()]                               # "momentum"
    elif kind == "adagrad":
        slots = [np.full(n, c["init_acc"])]                  # "accumulator"
    elif kind == "adam":
        slots = [zeros.copy(), zeros.copy()]                 # "m", "v"
    else:
        slots = [np.ones(n), zeros.copy()]                   # "rms" (ones), "momentum"
        if c["centered"]:
            slots.append(zeros.copy())                       # "mg"
    lrs = []
    for step in range(steps):
        g = grads[step]
        lr = learning_rate(c, step)
        lrs.append(lr)
        if kind == "sgd":
            var = var - lr * g
        elif kind == "momentum":
            mu = c["momentum"]
            accum = mu * slots[0] + g
            slots[0] = accum
            if c["nesterov"]:
                var = var - (lr * g + lr * mu * accum)
            else:
                var = var - lr * accum
        elif kind == "adagrad":
            slots[0] = slots[0] + g * g
            var = var - lr * g / np.sqrt(slots[0])
        elif kind == "adam":
            b1, b2 = c["beta1"], c["beta2"]
            t = step + 1                   # TF's beta powers: beta^(updates so far + 1)
            lr_t = lr * math.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
            slots[0] = b1 * slots[0] + (1.0 - b1) * g
            slots[1] = b2 * slots[1] + (1.0 - b2) * g * g
            var = var - lr_t * slots[0] / (np.sqrt(slots[1]) + c["eps"])
        else:
            rho, mu, eps = c["decay"], c["momentum"], c["eps"]
            slots[0] = rho * slots[0] + (1.0 - rho) * g * g
            if c["centered"]:
                slots[2] = rho * slots[2] + (1.0 - rho) * g
                denom = slots[0] - slots[2] ** 2 + eps
            else:
                denom = slots[0] + eps
            slots[1] = mu * slots[1] + lr * g / np.sqrt(denom)
            var = var - slots[1]
    return lrs, var, slots


def torch_why_not(c):
    """Why torch.optim cannot compute TF's update for case c; None if it can."""
    if c["kind"] == "rmsprop":
        if c["eps"] > 1e-8:
            return ("RMSProp with epsilon %g: TF adds it inside the sqrt, torch outside; they coincide only "
                    "for a negligible epsilon (the comparison runs torch with eps=0)" % c["eps"])
        lr_varies = c["sched"] != "constant" or c["warmup"] > 0
        if c["momentum"] > 0 and lr_varies:
            return ("RMSProp with momentum under a varying learning rate: TF keeps lr inside the momentum "
                    "slot (mom = momentum*mom + lr*g/...), torch multiplies its buffer by the current lr")
    return None


def torch_run(c, n, steps):
    """torch.optim in float64, made to coincide with TF:

    SGD/Momentum: torch.optim.SGD(momentum, dampening=0, nesterov): its buffer
      is TF's accumulator (buf = momentum*buf + g, first buf = g = 0*momentum + g)
      and both multiply by the current lr at apply time, so they agree under
      any schedule.
    Adagrad: initial_accumulator_value as TF's, eps=0 (TF v1 has no epsilon),
      lr_decay=0.
    Adam: torch adds eps to sqrt(v)/sqrt(1-beta2^t); TF adds epsilon-hat to
      sqrt(v) outside the correction. Both are
      lr*sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + e) with e = eps_torch*sqrt(1-b2^t),
      so eps_torch = epsilon / sqrt(1 - beta2^t), set every step.
    RMSProp: torch starts square_avg at 0 and adds eps outside the sqrt; TF
      starts "rms" at 1 and adds epsilon inside. The state is preset to ones
      and torch's eps set to 0, so torch computes sqrt(ms) where TF computes
      sqrt(ms + epsilon): a relative difference of at most epsilon / (2 ms),
      about 1e-10 here. torch's momentum buffer is TF's mom / lr, so they
      agree only for a constant lr when momentum > 0 (torch_why_not).
    """
    import torch
    var0, grads = inputs(n, steps)
    p = torch.tensor(var0, dtype=torch.float64, requires_grad=True)
    kind = c["kind"]
    lr0 = learning_rate(c, 0)
    if kind in ("sgd", "momentum"):
        opt = torch.optim.SGD([p], lr=lr0, momentum=c["momentum"] if kind == "momentum" else 0.0,
                              dampening=0.0, nesterov=bool(c["nesterov"]) if kind == "momentum" else False)
    elif kind == "adagrad":
        opt = torch.optim.Adagrad([p], lr=lr0, lr_decay=0.0, initial_accumulator_value=c["init_acc"], eps=0.0)
    elif kind == "adam":
        opt = torch.optim.Adam([p], lr=lr0, betas=(c["beta1"], c["beta2"]), eps=c["eps"])
    else:
        opt = torch.optim.RMSprop([p], lr=lr0, alpha=c["decay"], eps=0.0, momentum=c["momentum"],
                                  centered=bool(c["centered"]))
        state = opt.state[p]
        state["step"] = 0
        state["square_avg"] = torch.ones_like(p, memory_format=torch.preserve_format).detach()
        if c["momentum"] > 0:
            state["momentum_buffer"] = torch.zeros_like(p).detach()
        if c["centered"]:
            state["grad_avg"] = torch.zeros_like(p).detach()
    group = opt.param_groups[0]
    for step in range(steps):
        group["lr"] = learning_rate(c, step)
        if kind == "adam":
            group["eps"] = c["eps"] / math.sqrt(1.0 - c["beta2"] ** (step + 1))
        p.grad = torch.tensor(grads[step], dtype=torch.float64)
        opt.step()
    st = opt.state[p]
    as_list = lambda t: t.detach().numpy().tolist()
    if kind == "sgd":
        slots = []
    elif kind == "momentum":
        slots = [as_list(st["momentum_buffer"])]
    elif kind == "adagrad":
        slots = [as_list(st["sum"])]
    elif kind == "adam":
        slots = [as_list(st["exp_avg"]), as_list(st["exp_avg_sq"])]
    else:
        # TF's mom is lr * torch's buffer (constant lr here); without momentum
        # torch keeps no buffer to compare.
        mom = as_list(st["momentum_buffer"] * c["lr"]) if c["momentum"] > 0 else None
        slots = [as_list(st["square_avg"]), mom]
        if c["centered"]:
            slots.append(as_list(st["grad_avg"]))
    return {"param": as_list(p), "slots": slots}


def main(argv):
    steps, n, specs = 100, 37, []
    i = 0
    while i < len(argv):
        if argv[i] in ("--steps", "--n") and i + 1 < len(argv):
            if argv[i] == "--steps":
                steps = int(argv[i + 1])
            else:
                n = int(argv[i + 1])
            i += 2
        else:
            specs.append(argv[i])
            i += 1
    if not specs:
        print(__doc__, file=sys.stderr)
        return 2
    out = {"steps": steps, "n": n, "cases": []}
    for spec in specs:
        c = parse_case(spec)
        lrs, var, slots = numpy_run(c, n, steps)
        why = torch_why_not(c)
        entry = {"spec": spec, "lr": lrs,
                 "numpy": {"param": var.tolist(), "slots": [s.tolist() for s in slots]},
                 "torch": None if why else torch_run(c, n, steps),
                 "torch_why": why or ""}
        out["cases"].append(entry)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
"""Reference runs of the TPU embedding optimizers, for tests/test_emb_optim_ref.c.

Each case runs `--steps` updates of one embedding row of `--n` elements and
prints the final row and slots, computed two ways:

  numpy  every formula of tpuloop/emb_optim.h (spec §3.1-§3.2: gradient clip,
         weight decay, the rule, weight clip), transcribed in NumPy float64
         in the textbook form (beta*x + (1 - beta)*y, where the float32
         kernels write x + (y - x)*(1 - beta));
  torch  torch.optim in float64, configured so that it computes the same
         update, for the rules where PyTorch's formula can be made to
         coincide (see torch_run); null, with the reason, elsewhere.

Both start from the float32 values the C test feeds its float32 kernel
(initial row, gradients, hyperparameters, per-step learning rates), held
exactly in float64, so what remains between them is the kernel's float32
arithmetic. The per-step learning rates and step counters are made here and
printed; the C test passes them to tl_emb_step_prepare as the dynamic
values (tag 0: learning rate, tag 1: FrequencyAwareAdagrad's step counter).

Inputs (t = 0 .. steps-1, i = 0 .. n-1):
  w_i(0) = w0shift + w0scale * cos(0.7 i + 0.3)
  g_i(t) = gscale * sin(0.37 i + 0.11 t + 0.5) * (1 + 0.01 t), and 0 at the
           steps with t % zero_every == zero_every - 1 (a row the step did not
           reach, as non-lazy Adam and Lion update it)
  lr(t)  sched=const    lr
         sched=wave     lr * (1 + 0.5 sin(0.3 t))
         sched=adam_bc  lr * sqrt(1 - beta2^(t+1)) / (1 - beta1^(t+1)): Adam's
                        bias correction, which the TPU leaves to the caller
         sched=fe_step  3t + (t^2 mod 3) + 1, the global step
                        (FrequencyEstimator's "learning rate")
  step(t) = 2t + 3 (FrequencyAwareAdagrad's step counter)
each rounded to float32.

A case is one argument, comma-separated key=value pairs (see parse_case for
the keys and defaults); alg is the proto's field name (sgd, adagrad,
adagrad_momentum, bounded_adagrad, frequency_aware_adagrad, ftrl, adam,
momentum, lion, rms_prop, centered_rms_prop, adadelta, proximal_adagrad,
proximal_yogi, frequency_estimator, assign). Clipping bounds are numbers or
"none".

Output (stdout), one JSON object:
  {"steps": S, "n": N, "cases": [{"spec": "...", "lr": [S], "step": [S],
    "numpy": {"param": [N], "slots": [[N], ...]},
    "torch": {"param": [N], "slots": [[N] or null, ...]} or null,
    "torch_why": "..."}]}
Slots are in tpuloop's load order (spec §2.4).

Usage: /usr/bin/python3 tests/ref/emb_optim_ref.py [--steps S] [--n N] CASE...
"""
import json
import math
import sys

import numpy as np

F32 = np.float32
INF = math.inf


def f32(x):
    """x rounded to float32, as a Python float (float64)."""
    return float(F32(x))


def parse_case(text):
    case = {"alg": None, "lr": None, "sched": "const", "torch": "none",
            "momentum": 0.0, "nesterov": 0, "exponent": 2.0, "beta1": 0.9, "beta2": 0.999, "eps": 1e-7,
            "uaf": 0, "max_var_update": 0.0, "max_accumulator": 0.0,
            "l1": 0.0, "l2": 0.0, "max_lr_mult": 10.0, "prob_exp": 0.5, "acc_decay": 1.0,
            "init_acc": 0.1, "lr_power": -0.5, "mlbl": 0, "beta": 0.0, "sum_inside": 0, "rho": 0.9,
            "tau": 0.1, "max_delta": 10.0, "outlier": 1.0,
            "wclip_lo": "none", "wclip_hi": "none", "gclip_lo": "none", "gclip_hi": "none",
            "wd": 0.0, "wd_lr": 0, "zero_every": 0,
            "w0shift": 0.0, "w0scale": 0.5, "gscale": 1.0}
    ints = {"nesterov", "uaf", "mlbl", "sum_inside", "wd_lr", "zero_every"}
    strs = {"alg", "sched", "torch"}
    bounds = {"wclip_lo", "wclip_hi", "gclip_lo", "gclip_hi"}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key not in case:
            raise ValueError("case %r: bad item %r" % (text, item))
        if key in strs:
            case[key] = value
        elif key in ints:
            case[key] = int(value)
        elif key in bounds:
            case[key] = None if value == "none" else f32(float(value))
        else:
            case[key] = f32(float(value))     # the C side's float32 parameter
    for key in bounds:
        if case[key] == "none":
            case[key] = None
    if case["alg"] is None or case["lr"] is None:
        raise ValueError("case %r: alg and lr are required" % text)
    if case["sched"] not in ("const", "wave", "adam_bc", "fe_step"):
        raise ValueError("case %r: unknown sched %r" % (text, case["sched"]))
    return case


def inputs(c, n, steps):
    i = np.arange(n, dtype=np.float64)
    w = (c["w0shift"] + c["w0scale"] * np.cos(0.7 * i + 0.3)).astype(F32).astype(np.float64)
    grads = []
    for t in range(steps):
        g = c["gscale"] * np.sin(0.37 * i + 0.11 * t + 0.5) * (1.0 + 0.01 * t)
        if c["zero_every"] > 0 and t % c["zero_every"] == c["zero_every"] - 1:
            g = np.zeros(n)
        grads.append(g.astype(F32).astype(np.float64))
    return w, grads


def learning_rate(c, t):
    lr = c["lr"]
    if c["sched"] == "wave":
        lr = lr * (1.0 + 0.5 * math.sin(0.3 * t))
    elif c["sched"] == "adam_bc":
        lr = lr * math.sqrt(1.0 - c["beta2"] ** (t + 1)) / (1.0 - c["beta1"] ** (t + 1))
    elif c["sched"] == "fe_step":
        lr = 3 * t + (t * t) % 3 + 1
    return f32(lr)


def step_counter(t):
    return f32(2 * t + 3)


def initial_slots(c, n):
    """tl_emb_slot_init: the accumulator-type slots at init_acc, the rest 0."""
    a, z = np.full(n, c["init_acc"]), np.zeros(n)
    return {
        "sgd": [], "assign": [],
        "adagrad": [a], "bounded_adagrad": [a], "proximal_adagrad": [a],
        "adagrad_momentum": [z, z.copy()],        # both start at 0
        "frequency_aware_adagrad": [a, z],        # accumulators, counters
        "ftrl": [a, z],                           # accumulators, linears
        "adam": [z, z.copy()],                    # momenta, velocities
        "momentum": [z], "lion": [z],
        "rms_prop": [z, z.copy()],                # ms, mom
        "centered_rms_prop": [z, z.copy(), z.copy()],  # ms, mom, mg
        "adadelta": [z, z.copy()],                # accumulators, updates
        "proximal_yogi": [a, z],                  # v, m
        "frequency_estimator": [z],               # last_hit_step
    }[c["alg"]]


def shrink(x, e, l1, l2):
    return np.sign(x) * np.maximum(np.abs(x) - e * l1, 0.0) / (1.0 + e * l2)


def rule(c, w, g, s, lr, step):
    """One optimizer update (spec §3.2); returns the new w, updates s in place."""
    alg = c["alg"]
    if alg == "sgd":
        return w - lr * g
    if alg == "assign":
        return g.copy()
    if alg == "adagrad":
        s[0] = s[0] + g * g
        return w - lr * g / np.sqrt(s[0])
    if alg == "adagrad_momentum":
        b2, mu = c["beta2"], c["momentum"]
        s[0] = s[0] + g * g if b2 == 1.0 else b2 * s[0] + (1.0 - b2) * g * g
        scale = (s[0] + c["eps"]) ** (-1.0 / c["exponent"])
        s[1] = mu * s[1] + scale * g
        u = mu * s[1] + scale * g if c["nesterov"] else s[1]
        return w - lr * u
    if alg == "bounded_adagrad":
        a_new = s[0] + g * g
        if c["max_accumulator"] > 0:
            a_new = np.minimum(a_new, c["max_accumulator"])
        d = lr * g / np.sqrt(a_new if c["uaf"] else s[0])
        if c["max_var_update"] > 0:
            d = np.clip(d, -c["max_var_update"], c["max_var_update"])
        s[0] = a_new
        return w - d
    if alg == "frequency_aware_adagrad":
        s[1] = s[1] + 1.0
        s[0] = np.maximum(c["acc_decay"] * s[0] + g * g, c["init_acc"])
        scale = np.minimum((max(step, 1.0) / s[1]) ** c["prob_exp"], c["max_lr_mult"])
        u = scale * g / np.sqrt(s[0])
        if c["l1"] > 0:
            u = u + c["l1"] * np.sign(w)
        if c["l2"] > 0:
            u = u + c["l2"] * w
        return w - lr * u
    if alg == "ftrl":
        k = -c["lr_power"]
        a_new = s[0] + g * g
        p_new, p_old = a_new ** k, s[0] ** k
        d = p_new - p_old
        if c["mlbl"]:
            s[1] = s[1] + lr * g - d * w
            den = p_new + 2.0 * lr * c["l2"] + c["beta"]
            l1s = c["l1"] * lr
        else:
            s[1] = s[1] + g - d / lr * w
            den = (p_new + c["beta"]) / lr + 2.0 * c["l2"]
            l1s = c["l1"]
        num = -s[1] if c["l1"] == 0 else np.clip(s[1], -l1s, l1s) - s[1]
        s[0] = a_new
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den == 0, w, num / den)
    if alg == "adam":
        b1, b2, eps = c["beta1"], c["beta2"], c["eps"]
        s[0] = b1 * s[0] + (1.0 - b1) * g
        s[1] = b2 * s[1] + (1.0 - b2) * g * g
        if c["sum_inside"]:
            return w - lr * s[0] / np.sqrt(s[1] + eps * eps)
        return w - lr * s[0] / (np.sqrt(s[1]) + eps)
    if alg == "momentum":
        mu = c["momentum"]
        s[0] = mu * s[0] + g
        if c["nesterov"]:
            return w - (lr * g + lr * mu * s[0])
        return w - lr * s[0]
    if alg == "lion":
        b1, b2 = c["beta1"], c["beta2"]
        cc = b1 * s[0] + (1.0 - b1) * g
        s[0] = b2 * s[0] + (1.0 - b2) * g
        return w - lr * np.sign(cc)
    if alg in ("rms_prop", "centered_rms_prop"):
        rho, mu, eps = c["rho"], c["momentum"], c["eps"]
        s[0] = rho * s[0] + (1.0 - rho) * g * g
        den = s[0] + eps
        if alg == "centered_rms_prop":
            s[2] = rho * s[2] + (1.0 - rho) * g
            den = s[0] - s[2] ** 2 + eps
        s[1] = mu * s[1] + lr * g / np.sqrt(den)
        return w - s[1]
    if alg == "adadelta":
        rho, eps = c["rho"], c["eps"]
        s[0] = rho * s[0] + (1.0 - rho) * g * g
        u = np.sqrt(s[1] + eps) / np.sqrt(s[0] + eps) * g
        s[1] = rho * s[1] + (1.0 - rho) * u * u
        return w - lr * u
    if alg == "proximal_adagrad":
        s[0] = s[0] + g * g
        e = lr / np.sqrt(s[0])
        return shrink(w - e * g, e, c["l1"], c["l2"])
    if alg == "proximal_yogi":
        b1, b2 = c["beta1"], c["beta2"]
        s[1] = b1 * s[1] + (1.0 - b1) * g
        s[0] = s[0] + (1.0 - b2) * np.sign(g * g - s[0]) * g * g
        e = lr / (np.sqrt(s[0]) + c["eps"])
        x = w - e * s[1]
        if c["l1"] > 0:
            return shrink(x, e, c["l1"], c["l2"])
        if c["l2"] > 0:
            return x / (1.0 + e * c["l2"])
        return x
    if alg == "frequency_estimator":
        step_now = lr
        d = step_now - s[0]
        dc = np.minimum(d, c["max_delta"])
        out = np.where(d >= c["outlier"] * w, dc, (1.0 - c["tau"]) * w + c["tau"] * dc)
        s[0] = np.full_like(w, step_now)
        return out
    raise ValueError("unknown alg %r" % alg)


def numpy_run(c, n, steps):
    w, grads = inputs(c, n, steps)
    s = initial_slots(c, n)
    lrs, stepc = [], []
    for t in range(steps):
        lr, step = learning_rate(c, t), step_counter(t)
        lrs.append(lr)
        stepc.append(step)
        g = grads[t]
        if c["gclip_lo"] is not None:
            g = np.maximum(g, c["gclip_lo"])
        if c["gclip_hi"] is not None:
            g = np.minimum(g, c["gclip_hi"])
        if c["wd"] > 0:
            wd = c["wd"] * (lr if c["wd_lr"] else 1.0)
            w = w - wd * w
        w = rule(c, w, g, s, lr, step)
        if c["wclip_lo"] is not None:
            w = np.maximum(w, c["wclip_lo"])
        if c["wclip_hi"] is not None:
            w = np.minimum(w, c["wclip_hi"])
    return lrs, stepc, w, s


def torch_why_not(c):
    if c["torch"] == "none":
        return "no torch.optim rule computes this update"
    return None


def torch_run(c, n, steps, lrs):
    """torch.optim in float64, made to coincide with the embedding rule:

    sgd       torch.optim.SGD, lr set per step.
    momentum  torch.optim.SGD(momentum, dampening=0, nesterov): its buffer
              is the "momenta" slot (buf = mu*buf + g, the first buf = g =
              mu*0 + g), and both multiply by the current lr.
    adagrad   torch.optim.Adagrad(initial_accumulator_value=init_acc,
              lr_decay=0, eps=0): torch adds eps OUTSIDE the sqrt
              (sum.sqrt() + eps); the embedding Adagrad has no epsilon, so
              eps=0 makes them the same formula.
    adam      torch.optim.Adam with its bias correction, against the plain
              embedding Adam (use_sum_inside_sqrt false) fed the bias
              correction in its learning rate (sched=adam_bc), as a TPU user
              does. torch's step is
                lr_torch/bc1 * m / (sqrt(v)/sqrt(bc2) + eps_torch)
                = lr_torch*sqrt(bc2)/bc1 * m / (sqrt(v) + eps_torch*sqrt(bc2))
              with bc_k = 1 - beta_k^t, so each step sets
              eps_torch = eps/sqrt(bc2) and lr_torch = lr_t*bc1/sqrt(bc2),
              lr_t being the float32 rate the C side used: both then compute
              lr_t * m/(sqrt(v) + eps) up to float64 rounding.
    rmsprop   torch.optim.RMSprop(alpha=rho, eps=0, momentum, centered):
              torch adds eps OUTSIDE the sqrt (sqrt(ms) + eps), TF inside
              (sqrt(ms + eps)). These cases run the embedding rule with
              epsilon 1e-30 (it must be > 0), which float32's ms + 1e-30
              rounds away whenever ms > 1e-23 (here ms > 1e-4), and torch
              with eps 0: the same formula. torch's momentum buffer is
              mom/lr, so the learning rate is constant and mom = lr*buf.
              Slots start at 0 in both (torch's square_avg does too).
    adadelta  torch.optim.Adadelta(lr, rho, eps): the same formula (eps
              inside both square roots), lr set per step.
    """
    import torch
    w0, grads = inputs(c, n, len(lrs))
    p = torch.tensor(w0, dtype=torch.float64, requires_grad=True)
    kind = c["torch"]
    if kind in ("sgd", "momentum"):
        opt = torch.optim.SGD([p], lr=lrs[0], momentum=c["momentum"] if kind == "momentum" else 0.0,
                              dampening=0.0, nesterov=bool(c["nesterov"]) if kind == "momentum" else False)
    elif kind == "adagrad":
        opt = torch.optim.Adagrad([p], lr=lrs[0], lr_decay=0.0, initial_accumulator_value=c["init_acc"], eps=0.0)
    elif kind == "adam":
        opt = torch.optim.Adam([p], lr=lrs[0], betas=(c["beta1"], c["beta2"]), eps=c["eps"])
    elif kind == "rmsprop":
        opt = torch.optim.RMSprop([p], lr=lrs[0], alpha=c["rho"], eps=0.0, momentum=c["momentum"],
                                  centered=c["alg"] == "centered_rms_prop")
    elif kind == "adadelta":
        opt = torch.optim.Adadelta([p], lr=lrs[0], rho=c["rho"], eps=c["eps"])
    else:
        raise ValueError("unknown torch rule %r" % kind)
    group = opt.param_groups[0]
    for t in range(len(lrs)):
        group["lr"] = lrs[t]
        if kind == "adam":
            bc1 = 1.0 - c["beta1"] ** (t + 1)
            bc2 = 1.0 - c["beta2"] ** (t + 1)
            group["lr"] = lrs[t] * bc1 / math.sqrt(bc2)
            group["eps"] = c["eps"] / math.sqrt(bc2)
        p.grad = torch.tensor(grads[t], dtype=torch.float64)
        opt.step()
    st = opt.state[p]
    as_list = lambda x: x.detach().numpy().tolist()
    if kind == "sgd":
        slots = []
    elif kind == "momentum":
        slots = [as_list(st["momentum_buffer"])]
    elif kind == "adagrad":
        slots = [as_list(st["sum"])]
    elif kind == "adam":
        slots = [as_list(st["exp_avg"]), as_list(st["exp_avg_sq"])]
    elif kind == "rmsprop":
        mom = as_list(st["momentum_buffer"] * c["lr"]) if c["momentum"] > 0 else None
        slots = [as_list(st["square_avg"]), mom]
        if c["alg"] == "centered_rms_prop":
            slots.append(as_list(st["grad_avg"]))
    else:
        slots = [as_list(st["square_avg"]), as_list(st["acc_delta"])]
    return {"param": as_list(p), "slots": slots}


def main(argv):
    steps, n, specs = 50, 37, []
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
        lrs, stepc, w, slots = numpy_run(c, n, steps)
        why = torch_why_not(c)
        out["cases"].append({
            "spec": spec, "lr": lrs, "step": stepc,
            "numpy": {"param": w.tolist(), "slots": [s.tolist() for s in slots]},
            "torch": None if why else torch_run(c, n, steps, lrs),
            "torch_why": why or ""})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

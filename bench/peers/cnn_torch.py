# cnn_torch.py — PyTorch 2.x's training examples/s on tpuloop's `cnn` model
# (the same net, batch, data and cores as bench_cnn), one JSON line.
#
# Model, op for op as tpuloop's (TF/Keras semantics): Fashion-MNIST images
# (N, 28, 28, 1) in [0, 1]; stem conv 3x3 16, stride 1, SAME, no bias -> BN ->
# ReLU; three stages of one basic residual block, filters 16, 32, 64, strides
# 1, 2, 2: conv 3x3 (stride s, no bias) -> BN -> ReLU -> conv 3x3 (no bias) ->
# BN, shortcut identity where the shape holds, else conv 1x1 stride s (no
# bias) -> BN; ReLU(main + shortcut); global average pooling -> dense 10 (with
# bias); mean sparse softmax cross-entropy; Adam lr 1e-3, betas 0.9/0.999,
# eps 1e-7 (Keras'). BN is Keras' momentum 0.99 (torch momentum 0.01), eps
# 1e-3, batch statistics in training. Kernels Glorot-uniform, biases zero, as
# Keras. TF's SAME for a 3x3 stride-2 conv on an even input pads 0 before and
# 1 after (28 -> 14, 14 -> 7): F.pad(x, (0, 1, 0, 1)) then an unpadded conv,
# not torch's symmetric padding=1; stride 1 pads 1 on each side, as torch's
# padding=1.
#
# Left as torch runs them: torch.optim.Adam's own update (eps added to
# sqrt(v_hat), where TF adds it to sqrt(v); no cost difference), its default
# implementation, eager mode (no torch.compile). Memory layout: --layout=nchw
# (the default) or nhwc (channels_last, input and weights); run_peers.sh runs
# both and summary.py takes the faster, since which one wins depends on the
# machine (oneDNN's kernels for either).
#
# Batch: --batch-per-device (128) times --threads, as tpuloop's global batch
# at that many devices. The training split is in memory as one tensor before
# timing; each step takes the next contiguous batch (no shuffle), wrapping at
# the end of the epoch (drop_remainder). Timed: --warmup steps untimed, then
# --reps repetitions of --steps steps; examples/s per repetition.
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_util  # noqa: E402


def extra(ap):
    ap.add_argument("--batch-per-device", type=int, default=128)
    ap.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw")


a = peer_util.args("PyTorch on tpuloop's cnn model", steps=30, reps=5, warmup=5, extra=extra)
rec = peer_util.limit_threads(a.threads, "torch")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def glorot(m):
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.xavier_uniform_(m.weight)
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def bn(c):
    return nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)


class ConvSame(nn.Module):
    """A TF SAME conv, no bias: symmetric padding at stride 1, (0, 1) at stride 2."""

    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.pad = k > 1 and stride == 2
        self.conv = nn.Conv2d(cin, cout, k, stride=stride, padding=0 if self.pad else k // 2, bias=False)

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1)) if self.pad else x)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = ConvSame(cin, cout, 3, stride), bn(cout)
        self.conv2, self.bn2 = ConvSame(cout, cout, 3, 1), bn(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(ConvSame(cin, cout, 1, stride), bn(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + (x if self.short is None else self.short(x)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.bn = ConvSame(1, 16, 3, 1), bn(16)
        self.blocks = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.dense = nn.Linear(64, 10)

    def forward(self, x):
        h = self.blocks(F.relu(self.bn(self.stem(x))))
        return self.dense(h.mean(dim=(2, 3)))


def main():
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    x_np, y_np = peer_util.fashion_mnist_train()
    B = a.batch_per_device * a.threads
    nb = x_np.shape[0] // B
    x = torch.from_numpy(np.ascontiguousarray(x_np.transpose(0, 3, 1, 2)))  # NCHW
    fmt = torch.channels_last if a.layout == "nhwc" else torch.contiguous_format
    batches = [(x[i * B:(i + 1) * B].contiguous(memory_format=fmt), torch.from_numpy(y_np[i * B:(i + 1) * B]).long())
               for i in range(nb)]
    model = CNN()
    model.apply(glorot)
    model = model.to(memory_format=fmt).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    step = 0

    def train(n):
        nonlocal step
        for _ in range(n):
            xb, yb = batches[step % nb]
            step += 1
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return loss

    if a.warmup:
        train(a.warmup)
    t = peer_util.Reps()
    eps, loss = t.examples_per_s(a.reps, lambda: train(a.steps), a.steps * B)
    rec.update({"bench": "cnn_torch", "peer": "torch", "model": "cnn", "dataset": "fashion_mnist",
                "batch": B, "batch_per_device": a.batch_per_device, "layout": a.layout, "opt": "adam",
                "steps_per_rep": a.steps, "warmup_steps": a.warmup, "unit": "examples/s",
                "step_ms_median": round(1000 * statistics.median(t.wall) / a.steps, 2),
                "last_loss": round(loss.item(), 4), "params": sum(p.numel() for p in model.parameters()),
                "torch_threads": torch.get_num_threads(), **t.fields(),
                "versions": {"torch": torch.__version__, "numpy": np.__version__}})
    peer_util.emit(rec, eps)


if __name__ == "__main__":
    main()

# transformer_torch.py — PyTorch 2.x's training step time (ms) on tpuloop's
# `transformer` model, one JSON line.
#
# Model, op for op as tpuloop's, written with nn.Linear, nn.LayerNorm and
# nn.Embedding (not nn.TransformerEncoderLayer, whose fused paths differ):
# token ids (B 32, S 64) from a vocabulary of 64 -> embedding d_model 128 +
# learned positional embedding (64, 128) -> 2 post-LN encoder layers, each:
# multi-head self-attention, 4 heads of 32, q/k/v/o projections with bias,
# softmax(q k^T / sqrt(32)) v, no mask, no dropout; x = LayerNorm(x + attn),
# eps 1e-3; FFN 128 -> 512 -> GELU (exact, erf) -> 128; x = LayerNorm(x +
# ffn) -> mean over the sequence -> dense 64 classes (the vocabulary: tpuloop's num_classes default); mean sparse softmax
# cross-entropy; Adam lr 1e-3, betas 0.9/0.999, eps 1e-7. Weights Glorot
# uniform, biases zero, embeddings uniform(-0.05, 0.05) as Keras'.
#
# Data: 64 fixed batches of seeded random ids, each example's label the sum
# of its ids mod 16, in memory before timing. Timed: --warmup steps untimed,
# then --reps repetitions of --steps steps; ms per step per repetition. The
# batch is the same at every thread count (--batch, 32).
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_util  # noqa: E402


def extra(ap):
    ap.add_argument("--batch", type=int, default=32)


a = peer_util.args("PyTorch on tpuloop's transformer model", steps=50, reps=5, warmup=5, extra=extra)
rec = peer_util.limit_threads(a.threads, "torch")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB, SEQ, D, HEADS, FF, CLASSES, LAYERS, LN_EPS = 64, 64, 128, 4, 512, 64, 2, 1e-3


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.ln1 = nn.LayerNorm(D, eps=LN_EPS)
        self.ff1, self.ff2 = nn.Linear(D, FF), nn.Linear(FF, D)
        self.ln2 = nn.LayerNorm(D, eps=LN_EPS)

    def forward(self, x):
        b, s, _ = x.shape
        dh = D // HEADS

        def heads(t):
            return t.view(b, s, HEADS, dh).transpose(1, 2)  # (b, h, s, dh)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, D)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.empty(SEQ, D))
        self.layers = nn.Sequential(*(EncoderLayer() for _ in range(LAYERS)))
        self.out = nn.Linear(D, CLASSES)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.uniform_(self.emb.weight, -0.05, 0.05)
        nn.init.uniform_(self.pos, -0.05, 0.05)

    def forward(self, ids):
        h = self.layers(self.emb(ids) + self.pos)
        return self.out(h.mean(dim=1))


def main():
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(64):
        ids = rng.integers(0, VOCAB, size=(a.batch, SEQ))
        batches.append((torch.from_numpy(ids).long(), torch.from_numpy(ids.sum(axis=1) % CLASSES).long()))
    model = Transformer().train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    step = 0

    def train(n):
        nonlocal step
        for _ in range(n):
            ids, y = batches[step % len(batches)]
            step += 1
            loss = F.cross_entropy(model(ids), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return loss

    if a.warmup:
        train(a.warmup)
    t = peer_util.Reps()
    ms = []
    for _ in range(a.reps):
        t.start()
        loss = train(a.steps)
        t.stop()
        ms.append(1000 * t.wall[-1] / a.steps)
    rec.update({"bench": "transformer_torch", "peer": "torch", "model": "transformer", "batch": a.batch,
                "seq": SEQ, "vocab": VOCAB, "d_model": D, "heads": HEADS, "ffn": FF, "layers": LAYERS,
                "classes": CLASSES, "opt": "adam", "steps_per_rep": a.steps, "warmup_steps": a.warmup,
                "unit": "ms/step", "examples_per_s_median": round(a.batch * 1000 / statistics.median(ms), 1),
                "last_loss": round(loss.item(), 4),
                "params": sum(p.numel() for p in model.parameters()), "torch_threads": torch.get_num_threads(),
                **t.fields(), "versions": {"torch": torch.__version__, "numpy": np.__version__}})
    peer_util.emit(rec, ms, digits=3)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""torch.nn.EmbeddingBag references for tests/test_embedding_torch.c.

The inputs are formulas the C test repeats (float64 here):

  table[r][d]   = 0.5 * cos(0.7 * (r * D + d) + 0.3)        V = 50 rows, D = 8
  bag b (0..5)  holds (3 * b) % 5 ids: id_k = (7 * b + 13 * k) % V,
                weight_k = 0.25 + 0.1 * ((b + k) % 7)
  dL/dout[b][d] = sin(0.37 * (b * D + d))

Cases: sum, sum with per_sample_weights, mean (torch takes per-sample weights
only with mode='sum'). For each, prints the forward output [6][8] and the
gradient of the table (the rows that received one, dense [V][D]) after
backward of sum(out * dL/dout), as one JSON object.
"""
import json
import math
import sys

import torch

V, D, B = 50, 8, 6


def main():
    table = torch.tensor([[0.5 * math.cos(0.7 * (r * D + d) + 0.3) for d in range(D)] for r in range(V)],
                         dtype=torch.float64)
    ids, offsets, weights = [], [], []
    for b in range(B):
        offsets.append(len(ids))
        for k in range((3 * b) % 5):
            ids.append((7 * b + 13 * k) % V)
            weights.append(0.25 + 0.1 * ((b + k) % 7))
    dl = torch.tensor([[math.sin(0.37 * (b * D + d)) for d in range(D)] for b in range(B)], dtype=torch.float64)
    out = {"torch": torch.__version__}
    for case in ("sum", "sum_weighted", "mean"):
        bag = torch.nn.EmbeddingBag(V, D, mode="mean" if case == "mean" else "sum", dtype=torch.float64)
        with torch.no_grad():
            bag.weight.copy_(table)
        psw = torch.tensor(weights, dtype=torch.float64) if case == "sum_weighted" else None
        y = bag(torch.tensor(ids), torch.tensor(offsets), per_sample_weights=psw)
        (y * dl).sum().backward()
        out[case] = {"out": y.detach().tolist(), "grad": bag.weight.grad.tolist()}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

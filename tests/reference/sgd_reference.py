#!/usr/bin/env python3
"""Reference for causalqwen::optim::Sgd: torch.optim.SGD (dampening 0, nesterov off) run on one
parameter vector for a few steps, in float32 and in float64.

Writes <out>/sgd_reference.json:
  {"seed": …, "lr": …, "steps": …, "size": …,
   "cases": [{"name", "momentum", "weight_decay", "initial": [...], "grads": [[...] per step],
              "float32": {"params": [[...] per step], "buffer": [[...] per step]},
              "float64": {...}}, ...]}
Initial values and gradients are float32-representable, so both dtypes start from the same
numbers; every float is written with Python's shortest round-trip repr (exact in float64).
"buffer" is torch's momentum_buffer after each step (absent, written as [], without momentum).

Run with Debian's /usr/bin/python3 (python3-torch 1.13):  sgd_reference.py OUTDIR
"""
import json
import os
import sys

import torch

SEED = 20260301
LR = 0.1
STEPS = 5
SIZE = 9
CASES = [  # (name, momentum, weight_decay)
    ("plain", 0.0, 0.0),
    ("momentum", 0.9, 0.0),
    ("decay", 0.0, 0.05),
    ("momentum_decay", 0.9, 0.05),
]


def f32_values(generator, *shape, scale=1.0):
    """Normal samples rounded to float32, returned as float64 (exactly representable in both)."""
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(torch.float32).to(torch.float64)


def run(initial, grads, momentum, weight_decay, dtype):
    p = torch.nn.Parameter(initial.clone().to(dtype))
    opt = torch.optim.SGD([p], lr=LR, momentum=momentum, weight_decay=weight_decay)
    params, buffers = [], []
    for g in grads:
        p.grad = g.clone().to(dtype)
        opt.step()
        params.append([float(v) for v in p.detach().to(torch.float64)])
        state = opt.state[p]
        buf = state.get("momentum_buffer")
        buffers.append([] if buf is None else [float(v) for v in buf.to(torch.float64)])
    return {"params": params, "buffer": buffers}


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    generator = torch.Generator().manual_seed(SEED)
    cases = []
    for name, momentum, weight_decay in CASES:
        initial = f32_values(generator, SIZE, scale=2.0)
        grads = f32_values(generator, STEPS, SIZE)
        grads[0, 0] = 0.0  # a zero gradient: only the decay (and later the momentum) moves it
        grads[:, 1] *= 1e-4  # a tiny one
        cases.append({
            "name": name, "momentum": momentum, "weight_decay": weight_decay,
            "initial": [float(v) for v in initial], "grads": [[float(v) for v in row] for row in grads],
            "float32": run(initial, grads, momentum, weight_decay, torch.float32),
            "float64": run(initial, grads, momentum, weight_decay, torch.float64),
        })
    with open(os.path.join(out_dir, "sgd_reference.json"), "w") as f:
        json.dump({"seed": SEED, "lr": LR, "steps": STEPS, "size": SIZE, "torch": torch.__version__,
                   "cases": cases}, f)


if __name__ == "__main__":
    main()

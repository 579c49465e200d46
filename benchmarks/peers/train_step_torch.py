#!/usr/bin/env python3
"""PyTorch peer for benchmarks/model/bench_train_step.cpp: one full training step of the whole
CausalQwen model (forward, backward, global-norm clip to 1.0, torch.optim.AdamW update), float32,
on the batch that bench_train_step.cpp builds with the same formula (batch() below).

The model is the repository's independent reference (tests/reference/): qwen2_reference's
numeric_embedding + backbone (Hugging Face Qwen2 eager: RMSNorm, RoPE, GQA, SwiGLU) and
causal_qwen_reference's softplus / ovr / cauchy_nll for the heads and the loss (the library's
defaults and numerics: stable atan2/log1p BCE summed over the K classes, mean over labelled positions; gated Cauchy NLL,
gate not detached, α = 0, λ = 1). Like every straightforward PyTorch implementation it
materialises loc_S, scale_S, P, log P, log(1 − P) and the BCE terms as [B,S,K] tensors (and their
gradients); causalqwen walks the classes in chunks instead. That is the baseline.

AdamW: lr 1e-4, betas (0.9, 0.999), eps 1e-8, weight decay 0.01 except on norms, biases, b_noise
and the numeric direction; the thresholds are not trained (causalqwen's default ParamRules).

Prints one JSON line: {"step_s": median seconds of a step, "steps": n, "tokens": B·S,
"vm_hwm_bytes": VmHWM of this process at the end (its whole peak resident set: Python, torch,
parameters, gradients, moments, activations), "rss_after_import_bytes": VmRSS after `import torch`,
"torch": version, "threads": n}.
usage: train_step_torch.py small|qwen0.5b THREADS STEPS
"""
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
from causal_qwen_reference import cauchy_nll, ovr, softplus  # noqa: E402
from qwen2_reference import backbone, numeric_embedding, parameter_shapes  # noqa: E402

CONFIGS = {
    "small": dict(vocab_size=8192, hidden_size=256, intermediate_size=704, num_layers=4, num_heads=4,
                  num_kv_heads=2, num_classes=8192, batch=4, seq=128),
    "qwen0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_layers=24, num_heads=14,
                     num_kv_heads=2, num_classes=151666, batch=1, seq=128),
}


def status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def init_params(cfg):
    """N(0, 0.02²) weights, norms 1, biases 0, and the heads' inits: W_loc = I, W_scale = 0, b_scale =
    softplus⁻¹(γ_init), … (as init_random)."""
    H, K = cfg["hidden_size"], cfg["num_classes"]
    g = torch.Generator().manual_seed(1)
    p = {}
    for name, shape in parameter_shapes(cfg).items():
        if "norm" in name:
            p[name] = torch.ones(shape)
        elif name.endswith(".bias"):
            p[name] = torch.zeros(shape)
        else:
            p[name] = 0.02 * torch.randn(shape, generator=g)
    p["causal.abduction.loc.weight"] = torch.eye(H)
    p["causal.abduction.loc.bias"] = torch.zeros(H)
    p["causal.abduction.scale.weight"] = torch.zeros(H, H)
    p["causal.abduction.scale.bias"] = torch.full((H,), 10.0 + torch.log(-torch.expm1(torch.tensor(-10.0))).item())
    p["causal.action.cls.weight"] = 0.02 * torch.randn(K, H, generator=g)
    p["causal.action.cls.bias"] = torch.zeros(K)
    bound = 0.01 * (6.0 / (H + 1)) ** 0.5
    p["causal.action.reg.weight"] = (torch.rand(1, H, generator=g) * 2 - 1) * bound
    p["causal.action.reg.bias"] = torch.zeros(1)
    p["causal.action.b_noise"] = torch.full((H,), 0.1)
    threshold = torch.full((K,), 10.0)
    for t in p.values():
        t.requires_grad_(True)
    return p, threshold


def batch(cfg):
    """The batch bench_train_step.cpp builds: ids from a fixed formula, a <NUM> (value s + 0.5) at
    every position s ≡ 3 (mod 8), next-token labels and aligned target values, the last label −100."""
    B, S, K = cfg["batch"], cfg["seq"], cfg["num_classes"]
    nid = K - 1
    ids = torch.zeros(B, S, dtype=torch.int64)
    values = torch.zeros(B, S)
    for b in range(B):
        for s in range(S):
            if s % 8 == 3:
                ids[b, s], values[b, s] = nid, s + 0.5
            else:
                ids[b, s] = ((b * S + s) * 7919 + 13) % (K - 1)
    labels = torch.full((B, S), -100, dtype=torch.int64)
    targets = torch.zeros(B, S)
    labels[:, :-1], targets[:, :-1] = ids[:, 1:], values[:, 1:]
    return ids, values, labels, targets, nid


def loss_fn(p, threshold, cfg, ids, values, labels, y, nid):
    B, S, K = cfg["batch"], cfg["seq"], cfg["num_classes"]
    mask = torch.ones(B, S, dtype=torch.int64)
    pos = torch.arange(S)[None].expand(B, S)
    full = dict(cfg, rms_norm_eps=1e-6, rope_theta=1e6)
    z = backbone(p, numeric_embedding(p, ids, values), mask, pos, full, torch.float32)
    lin = torch.nn.functional.linear
    loc_U = lin(z, p["causal.abduction.loc.weight"], p["causal.abduction.loc.bias"])
    scale_U = softplus(lin(z, p["causal.abduction.scale.weight"], p["causal.abduction.scale.bias"]))
    scale_A = scale_U + torch.abs(p["causal.action.b_noise"])
    W_cls = p["causal.action.cls.weight"]
    loc_S = lin(loc_U, W_cls, p["causal.action.cls.bias"])             # [B,S,K]
    scale_S = lin(scale_A, torch.abs(W_cls))                            # [B,S,K]
    loc_Y = lin(loc_U, p["causal.action.reg.weight"], p["causal.action.reg.bias"])[..., 0]
    scale_Y = lin(scale_A, torch.abs(p["causal.action.reg.weight"]))[..., 0]
    P, log_P, log_1mP = ovr((loc_S - threshold) / scale_S)              # [B,S,K] each
    valid = (labels != -100).float()
    onehot = torch.nn.functional.one_hot(torch.where(labels != -100, labels, 0), K).float() * valid[..., None]
    L_cls = valid * (-(onehot * log_P + (1 - onehot) * log_1mP)).sum(-1)
    L_cls_mean = L_cls.sum() / torch.clamp(valid.sum(), min=1)
    num = (labels == nid).float()
    gate = num * P[..., nid]                                            # α = 0, not detached
    L_reg_eff = (gate * cauchy_nll(y, loc_Y, scale_Y)).sum() / torch.clamp(num.sum(), min=1)
    return L_cls_mean + L_reg_eff


def main():
    name, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # optional 4th argument "bf16": the forward under torch.autocast("cpu", bfloat16), PyTorch's
    # mixed precision (its linear layers on oneDNN's bf16 kernels, AMX where the CPU has it)
    autocast = len(sys.argv) > 4 and sys.argv[4] == "bf16"
    torch.set_num_threads(threads)
    rss_import = status_bytes("VmRSS")
    cfg = CONFIGS[name]
    p, threshold = init_params(cfg)
    no_decay = lambda n: n.endswith("norm.weight") or n.endswith(".bias") or n in (  # noqa: E731
        "causal.action.b_noise", "causal.num_direction")
    groups = [{"params": [t for n, t in p.items() if not no_decay(n)], "weight_decay": 0.01},
              {"params": [t for n, t in p.items() if no_decay(n)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    ids, values, labels, y, nid = batch(cfg)
    params = list(p.values())

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(p, threshold, cfg, ids, values, labels, y, nid)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return float(loss)

    step()  # warm-up: allocates gradients and moments
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    out = {"config": name, "step_s": sorted(times)[len(times) // 2], "steps": steps,
           "tokens": cfg["batch"] * cfg["seq"], "vm_hwm_bytes": status_bytes("VmHWM"),
           "rss_after_import_bytes": rss_import, "torch": torch.__version__, "threads": threads,
           "autocast_bf16": autocast}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Golden reference for the whole CausalQwen model: an independent PyTorch implementation of its
forward pass and losses (OvR BCE, gated Cauchy NLL), its sampling mode (noise on the location:
loc_U + T·|b_noise|·ε) and its metrics, with the library's defaults (threshold 10, α 0, λ 1) and
its numerics (stable atan2/log1p forms, no ε), on tiny random checkpoints it writes itself.

  causal_qwen_reference.py OUTDIR [--case NAME] [--check-mutants]

For each case (basic, extreme) it writes
  OUTDIR/<case>/model/config.json          Hugging Face Qwen2 keys + the CausalQwen keys
  OUTDIR/<case>/model/model.safetensors    F32 tensors, Hugging Face Qwen2 names + causal.* (tied embeddings)
  OUTDIR/<case>/inputs.json                the batch, as `causalqwen forward --inputs` reads it
  OUTDIR/<case>/expected_f64.safetensors   every output computed in float64
  OUTDIR/<case>/expected_f32.safetensors   the same computed in float32 (compare_forward.py
                                           derives its tolerances from the difference)
All outputs are stored as F64 (pred and sample.pred* as I64); scalars have shape [] (0-d).
Parameters and inputs are float32-representable, so both runs see exactly the same numbers.

The model, M = B·S positions (the backbone is tests/reference/qwen2_reference.py, HF eager):
  e = embed(x) + sign(v)·log1p(|v|)·d/‖d‖ ; z = Qwen2(e, attention_mask, position_ids) + final norm
  loc_U = z W_locᵀ + b_loc ; scale_U = softplus(z W_scaleᵀ + b_scale), softplus = max(x,0)+log1p(e^-|x|)
  deterministic: scale_A = scale_U + |b_noise| ; loc_S = loc_U W_clsᵀ + b_cls ; scale_S = scale_A |W_cls|ᵀ
                 loc_Y = loc_U w_regᵀ + b_reg ; scale_Y = scale_A |w_reg|ᵀ
  ovr_z = (loc_S − C_k)/scale_S ; π·P = atan2(1, −z), π·(1−P) = atan2(1, z); the small side's log is
  log(atan2) − log π, the large side's log1p(−small/π) (no ε).
  L_cls = valid·Σ_k BCE(onehot_k, P_k) ; L_cls_mean = Σ L_cls / max(Σ valid, 1)
  nll = log π + log scale_Y + (|r| > 1 ? 2 log|r| + log1p(1/r²) : log1p(r²)), r = (y − loc_Y)/scale_Y
  gate = num·(α + (1−α)·P[..., num_token_id]) (not detached) ; L_reg_eff = Σ gate·nll / max(Σ num, 1)
  L_total = L_cls_mean + λ·L_reg_eff ; grad.<tensor> = ∂L_total/∂tensor by autograd
  sampling: ε = tan(π(u − ½)), loc_U' = loc_U + T·|b_noise|·ε, loc_S' = loc_U' W_clsᵀ + b_cls,
            scale_S' = scale_U |W_cls|ᵀ, loc_Y' = loc_U' w_regᵀ + b_reg, scale_Y' = scale_U |w_reg|ᵀ.
pred = argmax_k P_k with ties to the lowest id, computed as argmax of ovr_z (P is monotone in z;
in float32 P saturates at 1 where z does not).

Self-checks (asserts): the float64 gradient agrees with central differences on a few entries of
several tensors; in `extreme` the ε = 1e-7 BCE log(P + ε) gives a loss more than 1.0 away from the
stable one (so the case tells the two apart); every expected value is finite.
With --check-mutants it also computes, in float32, the model with each plausible mistake
(exp instead of softplus, b_noise missing from the regression scale, ε-BCE, a detached gate, KV
heads tiled instead of grouped, interleaved RoPE, RMSNorm without its weight) and asserts that
compare_forward.py rejects each one on at least one case, and accepts the float32 reference.

Run with Debian's /usr/bin/python3 (python3-torch 1.13).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_reference  # noqa: E402
from qwen2_reference import backbone, numeric_embedding, parameter_shapes  # noqa: E402
from safetensors_reference import write_file  # noqa: E402

LOG_PI = math.log(math.pi)
SEED = 20261121
MUTANT = None  # set by --check-mutants: one plausible mistake (module docstring) at a time


# ----------------------------------------------------------------- cases
def base_config(rope_theta):
    return dict(vocab_size=23, hidden_size=16, intermediate_size=24, num_layers=2, num_heads=4,
                num_kv_heads=2, rms_norm_eps=1e-6, rope_theta=rope_theta, num_classes=21,
                num_token_id=20, max_position_embeddings=32)


# input_ids, numeric_values, attention_mask, labels, target_values (B = 2, S = 6); row 0 right-padded
# (pad id 22, a padded vocabulary row), <NUM> = 20 at inputs with nonzero values, labels aligned.
BATCH = dict(
    input_ids=[[5, 20, 11, 20, 22, 22], [20, 4, 20, 20, 13, 0]],
    numeric_values=[[0.0, 3.5, 0.0, -1234.5, 0.0, 0.0], [-0.0625, 0.0, 2500000.0, 7.0, 0.0, 0.0]],
    attention_mask=[[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]],
    labels=[[20, 11, 20, 2, -100, -100], [4, 20, 20, 13, 0, 20]],
    target_values=[[3.5, 0.0, -1234.5, 0.0, 0.0, 0.0], [0.0, 2500000.0, 7.0, 0.0, 0.0, 88.25]],
    position_ids=[[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]],
)


def f32(x):
    return float(torch.tensor(x, dtype=torch.float32))


def mixed_signs(n, g):
    signs = torch.tensor([1.0 if j % 2 else -1.0 for j in range(n)])
    return signs[torch.randperm(n, generator=g)]


def make_case(name):
    """Parameters (float32), config.json dict, inputs dict."""
    extreme = name == "extreme"
    g = torch.Generator().manual_seed(SEED + (7 if extreme else 0))
    cfg = base_config(1e4 if extreme else 1e6)
    H, K, C = cfg["hidden_size"], cfg["num_classes"], cfg["hidden_size"]
    p = {}
    for pname, shape in parameter_shapes(cfg).items():
        if "layernorm" in pname or pname == "model.norm.weight":
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        elif pname == "causal.num_direction":
            t = torch.randn(shape, generator=g)
        else:
            t = 0.2 * torch.randn(shape, generator=g)
        p[pname] = t
    p["causal.abduction.loc.weight"] = 0.3 * torch.randn(C, H, generator=g)
    p["causal.abduction.loc.bias"] = 0.1 * torch.randn(C, generator=g)
    if extreme:  # scale_U ≈ 2e-9: ovr_z ~ 1e6…1e8, the <NUM> targets ~1e7…1e14 scales away
        p["causal.abduction.scale.weight"] = 0.05 * torch.randn(C, H, generator=g)
        p["causal.abduction.scale.bias"] = -20.0 + 0.5 * torch.randn(C, generator=g)
        noise = 1e-9
    else:  # scale_U = O(1)
        p["causal.abduction.scale.weight"] = 0.15 * torch.randn(C, H, generator=g)
        p["causal.abduction.scale.bias"] = -0.5 + 0.3 * torch.randn(C, generator=g)
        noise = 0.1
    p["causal.action.cls.weight"] = 0.3 * torch.randn(K, C, generator=g)
    p["causal.action.cls.bias"] = 0.2 * torch.randn(K, generator=g)
    p["causal.action.reg.weight"] = 0.3 * torch.randn(1, C, generator=g)
    p["causal.action.reg.bias"] = 0.5 * torch.randn(1, generator=g)
    p["causal.action.b_noise"] = noise * (0.5 + torch.rand(C, generator=g)) * mixed_signs(C, g)
    p["causal.ovr_threshold"] = torch.randn(K, generator=g)
    p = {k: v.to(torch.float32).contiguous() for k, v in p.items()}

    inputs = {k: [list(r) for r in v] for k, v in BATCH.items()}
    B, S = len(inputs["input_ids"]), len(inputs["input_ids"][0])
    temperature = 1.5 if extreme else 0.75
    u = (0.01 + 0.98 * torch.rand(B, S, C, generator=g, dtype=torch.float64)).to(torch.float32)
    inputs["sampling"] = {"temperature": temperature, "uniform": u.to(torch.float64).tolist()}
    hyper = dict(alpha=0.0 if extreme else 0.25, lam=1.0 if extreme else 0.8)

    if extreme:
        # Thresholds set from a first float64 pass: class <NUM>'s threshold between the 2nd and 3rd
        # of its five loc_S values at <NUM>-labelled positions (P_num ≈ 1 at some, ≈ 0 at others);
        # the others kept ≥ 0.05 away from every loc_S so that |ovr_z| ≥ ~1e6.
        out = forward(p, cfg, hyper, inputs, torch.float64, grad=False)
        loc_S = out["loc_S"].reshape(-1, K)
        num = (torch.tensor(inputs["labels"]).reshape(-1) == cfg["num_token_id"])
        v = loc_S[num, cfg["num_token_id"]].sort().values
        thr = p["causal.ovr_threshold"].to(torch.float64).clone()
        thr[cfg["num_token_id"]] = 0.5 * (v[1] + v[2])
        for k in range(K):
            if k == cfg["num_token_id"]:
                continue
            for _ in range(100):
                if (loc_S[:, k] - thr[k]).abs().min() >= 0.05:
                    break
                thr[k] += 0.037
        p["causal.ovr_threshold"] = thr.to(torch.float32)
        # <NUM> targets: one at loc_Y + 3e7·scale_Y (|r| ≈ 3e7), the others as given (|r| ≫ 1e9)
        out = forward(p, cfg, hyper, inputs, torch.float64, grad=False)
        b, s = 0, 0
        y = float(out["loc_Y"][b, s] + 3e7 * out["scale_Y"][b, s])
        inputs["target_values"][b][s] = f32(y)
    else:
        # one <NUM> target inside the Cauchy core (|r| = 0.5 < 1: the log1p(r²) branch of the nll)
        out = forward(p, cfg, hyper, inputs, torch.float64, grad=False)
        b, s = 1, 5
        inputs["target_values"][b][s] = f32(float(out["loc_Y"][b, s] - 0.5 * out["scale_Y"][b, s]))

    config = {
        "architectures": ["CausalQwenForCausalLM"], "model_type": "qwen2",
        "vocab_size": cfg["vocab_size"], "hidden_size": H, "intermediate_size": cfg["intermediate_size"],
        "num_hidden_layers": cfg["num_layers"], "num_attention_heads": cfg["num_heads"],
        "num_key_value_heads": cfg["num_kv_heads"], "rms_norm_eps": cfg["rms_norm_eps"],
        "rope_theta": cfg["rope_theta"], "tie_word_embeddings": True,
        "max_position_embeddings": cfg["max_position_embeddings"], "hidden_act": "silu",
        "torch_dtype": "float32",
        "num_token_id": cfg["num_token_id"], "causal_size": C, "num_classes": K, "gamma_init": 10.0,
        "ovr_threshold": [float(x) for x in p["causal.ovr_threshold"].tolist()],
        "reg_loss_weight": hyper["lam"], "alpha_gate": hyper["alpha"], "b_noise_init": 0.1,
    }
    return p, cfg, hyper, config, inputs


# ----------------------------------------------------------------- the model
def softplus(x):
    return torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x)))


def ovr(z):
    """P, log P, log(1 − P) of P = ½ + atan(z)/π without ε (atan2 and log1p forms)."""
    neg = z < 0
    # θ = π·min(P, 1 − P) = atan2(1, |z|) ∈ (0, π/2]; |z| written as a where so that z = 0 gets
    # the one-sided derivative of the z ≥ 0 branch (which is the true one) instead of abs's 0.
    theta = torch.atan2(torch.ones_like(z), torch.where(neg, -z, z))
    log_small = torch.log(theta) - LOG_PI
    log_large = torch.log1p(-theta / math.pi)  # both finite everywhere: no NaN through where's backward
    P = torch.where(neg, theta / math.pi, 1 - theta / math.pi)
    log_P = torch.where(neg, log_small, log_large)
    log_1mP = torch.where(neg, log_large, log_small)
    return P, log_P, log_1mP


def ovr_eps(z, eps=1e-7):  # the ε form log(P + ε), for the self-check only
    P = 0.5 + torch.atan(z) / math.pi
    return P, torch.log(P + eps), torch.log(1 - P + eps)


def cauchy_nll(y, loc, scale):
    r = (y - loc) / scale
    big = r.abs() > 1
    r_big = torch.where(big, r, torch.ones_like(r))      # keeps the unused branch's gradient finite
    r_small = torch.where(big, torch.zeros_like(r), r)
    tail = torch.where(big, 2 * torch.log(r_big.abs()) + torch.log1p(1 / (r_big * r_big)),
                       torch.log1p(r_small * r_small))
    return LOG_PI + torch.log(scale) + tail


def argmax_lowest(x):  # argmax over the last axis, ties to the lowest index
    top = x.max(dim=-1, keepdim=True).values
    idx = torch.arange(x.shape[-1]).expand_as(x)
    return torch.where(x == top, idx, torch.full_like(idx, x.shape[-1])).min(dim=-1).values


def masked_mean(x, mask):  # mean of x over mask (broadcast over trailing axes); 0 for an empty set
    m = mask.to(x.dtype)
    while m.dim() < x.dim():
        m = m[..., None]
    count = (m * torch.ones_like(x)).sum()
    return (x * m).sum() / count if count > 0 else torch.zeros((), dtype=x.dtype)


def forward(p32, cfg, hyper, inputs, dtype, grad=True, bce="stable", params=None):
    """All outputs of `causalqwen forward --grad --sampling` computed in dtype (a dict)."""
    p = params if params is not None else {k: v.to(dtype).clone().requires_grad_(grad)
                                           for k, v in p32.items()}
    ids = torch.tensor(inputs["input_ids"], dtype=torch.int64)
    values = torch.tensor(inputs["numeric_values"], dtype=torch.float32).to(dtype)
    attention_mask = torch.tensor(inputs["attention_mask"], dtype=torch.int64)
    labels = torch.tensor(inputs["labels"], dtype=torch.int64)
    y = torch.tensor(inputs["target_values"], dtype=torch.float32).to(dtype)
    position_ids = torch.tensor(inputs["position_ids"], dtype=torch.int64)
    K, nid = cfg["num_classes"], cfg["num_token_id"]
    alpha, lam = hyper["alpha"], hyper["lam"]

    e = numeric_embedding(p, ids, values)
    z = backbone(p, e, attention_mask, position_ids, cfg, dtype)
    lin = torch.nn.functional.linear
    loc_U = lin(z, p["causal.abduction.loc.weight"], p["causal.abduction.loc.bias"])
    scale_U = (torch.exp if MUTANT == "exp_instead_of_softplus" else softplus)(
        lin(z, p["causal.abduction.scale.weight"], p["causal.abduction.scale.bias"]))
    W_cls, b_cls = p["causal.action.cls.weight"], p["causal.action.cls.bias"]
    w_reg, b_reg = p["causal.action.reg.weight"], p["causal.action.reg.bias"]
    b_noise = p["causal.action.b_noise"]
    scale_A = scale_U + torch.abs(b_noise)
    loc_S = lin(loc_U, W_cls, b_cls)
    scale_S = lin(scale_A, torch.abs(W_cls))
    loc_Y = lin(loc_U, w_reg, b_reg)[..., 0]
    scale_Y = lin(scale_U if MUTANT == "reg_scale_without_b_noise" else scale_A, torch.abs(w_reg))[..., 0]
    ovr_z = (loc_S - p["causal.ovr_threshold"]) / scale_S
    P, log_P, log_1mP = (ovr if bce == "stable" and MUTANT != "eps_bce" else ovr_eps)(ovr_z)

    valid = labels != -100
    num = labels == nid
    valid_f, num_f = valid.to(dtype), num.to(dtype)
    onehot = torch.nn.functional.one_hot(torch.where(valid, labels, 0), K).to(dtype) * valid_f[..., None]
    L_cls = valid_f * (-(onehot * log_P + (1 - onehot) * log_1mP)).sum(-1)
    L_cls_mean = L_cls.sum() / torch.clamp(valid_f.sum(), min=1)
    nll = cauchy_nll(y, loc_Y, scale_Y)
    P_num = P[..., nid]
    gate = num_f * (alpha + (1 - alpha) * (P_num.detach() if MUTANT == "detached_gate" else P_num))
    L_reg_gated = gate * nll
    L_reg_eff = L_reg_gated.sum() / torch.clamp(num_f.sum(), min=1)
    L_total = L_cls_mean + lam * L_reg_eff

    out = dict(e=e, z=z, loc_U=loc_U, scale_U=scale_U, loc_S=loc_S, scale_S=scale_S, loc_Y=loc_Y,
               scale_Y=scale_Y, ovr_z=ovr_z, P=P, log_P=log_P, log_1mP=log_1mP, valid_mask=valid_f,
               num_mask=num_f, L_cls=L_cls, nll=nll, P_num=P_num, gate=gate, L_reg_gated=L_reg_gated,
               L_cls_mean=L_cls_mean, L_reg_eff=L_reg_eff, L_total=L_total)
    with torch.no_grad():
        pred = argmax_lowest(ovr_z)
        out.update(
            reg_mae=masked_mean((loc_Y - y).abs(), num),
            units_mean_loc=masked_mean(loc_U, attention_mask == 1),
            units_mean_scale=masked_mean(scale_U, attention_mask == 1),
            ovr_prob_sum=masked_mean(P.sum(-1), valid),
            accuracy=masked_mean((pred == labels).to(dtype), valid),
            num_accuracy=masked_mean((pred == nid).to(dtype), num),
            valid_count=valid_f.sum(), num_count=num_f.sum(), pred=pred)
        if "sampling" in inputs:
            T = f32(inputs["sampling"]["temperature"])
            u = torch.tensor(inputs["sampling"]["uniform"], dtype=torch.float32).to(dtype)
            eps = torch.tan(math.pi * (u - 0.5))
            sloc_U = loc_U + T * torch.abs(b_noise) * eps
            sloc_S = lin(sloc_U, W_cls, b_cls)
            sscale_S = lin(scale_U, torch.abs(W_cls))
            sz = (sloc_S - p["causal.ovr_threshold"]) / sscale_S
            out.update({"sample.epsilon": eps, "sample.loc_U": sloc_U, "sample.loc_S": sloc_S,
                        "sample.scale_S": sscale_S, "sample.ovr_z": sz, "sample.P": ovr(sz)[0],
                        "sample.loc_Y": lin(sloc_U, w_reg, b_reg)[..., 0],
                        "sample.scale_Y": lin(scale_U, torch.abs(w_reg))[..., 0],
                        "sample.pred": argmax_lowest(sz), "sample.pred_by_loc": argmax_lowest(sloc_S)})
    if grad:
        L_total.backward()
        for name, t in p.items():
            out["grad." + name] = t.grad if t.grad is not None else torch.zeros_like(t)
    out["_params"] = p
    return out


# ----------------------------------------------------------------- self-checks
def check_gradients(p32, cfg, hyper, inputs, out64, case):
    """Central differences in float64 on the largest-gradient entry and a random entry of a few tensors."""
    names = ["model.embed_tokens.weight", "causal.num_direction", "model.layers.0.self_attn.q_proj.weight",
             "model.layers.1.mlp.down_proj.weight", "model.norm.weight", "causal.abduction.loc.weight",
             "causal.abduction.scale.bias", "causal.action.cls.weight", "causal.action.reg.weight",
             "causal.action.reg.bias", "causal.action.b_noise", "causal.ovr_threshold"]
    g = torch.Generator().manual_seed(SEED + 1)
    base = {k: v.to(torch.float64) for k, v in p32.items()}

    def loss(params):
        return float(forward(None, cfg, hyper, inputs, torch.float64, grad=False, params=params)["L_total"])

    L0 = loss(base)
    worst = 0.0
    for name in names:
        grad = out64["grad." + name].reshape(-1)
        for flat in {int(grad.abs().argmax()), int(torch.randint(grad.numel(), (1,), generator=g))}:
            theta = float(base[name].reshape(-1)[flat])
            h = 1e-5 * abs(theta) if theta != 0 else 1e-7
            fd = []
            for sgn in (1, -1):
                q = dict(base)
                q[name] = base[name].clone()
                q[name].view(-1)[flat] = theta + sgn * h
                fd.append(loss(q))
            numeric = (fd[0] - fd[1]) / (2 * h)
            analytic = float(grad[flat])
            # truncation O(h²) relative, rounding ≈ ε·|L|/h absolute
            tol = 1e-6 * max(abs(analytic), abs(numeric)) + 1e4 * 2.2e-16 * max(1.0, abs(L0)) / h
            err = abs(numeric - analytic)
            worst = max(worst, err / tol)
            assert err <= tol, (f"{case}: grad.{name}[{flat}] autograd {analytic:.12g} vs central "
                                f"difference {numeric:.12g} (h = {h:.3g}, tol {tol:.3g})")
    return worst


# ----------------------------------------------------------------- sensitivity of the golden test
def _repeat_kv_tiled(hidden_states, n_rep):  # [k0,k1,k0,k1] instead of HF's grouped [k0,k0,k1,k1]
    return hidden_states.repeat(1, n_rep, 1, 1)


def _apply_rotary_interleaved(q, k, cos, sin, unsqueeze_dim=1):  # GPT-J pairs (0,1),(2,3)… instead of NEOX halves
    half = cos.shape[-1] // 2
    cos = cos[..., :half].repeat_interleave(2, dim=-1).unsqueeze(unsqueeze_dim)
    sin = sin[..., :half].repeat_interleave(2, dim=-1).unsqueeze(unsqueeze_dim)

    def rot(x):
        return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return q * cos + rot(q) * sin, k * cos + rot(k) * sin


BACKBONE_MUTANTS = {"kv_heads_tiled": ("repeat_kv", _repeat_kv_tiled),
                    "rope_interleaved": ("apply_rotary_pos_emb", _apply_rotary_interleaved)}
MUTANTS = ["exp_instead_of_softplus", "reg_scale_without_b_noise", "eps_bce", "detached_gate",
           "kv_heads_tiled", "rope_interleaved", "rmsnorm_without_weight"]


def mutant_output(name, case_inputs):
    """The float32 outputs of the model with one plausible mistake, as the C++ program would write them."""
    global MUTANT
    p32, cfg, hyper, inputs = case_inputs
    saved = {}
    if name in BACKBONE_MUTANTS:
        attr, fn = BACKBONE_MUTANTS[name]
        saved[attr] = getattr(qwen2_reference, attr)
        setattr(qwen2_reference, attr, fn)
    if name == "rmsnorm_without_weight":
        saved["rms_norm"] = qwen2_reference.rms_norm
        original = qwen2_reference.rms_norm
        qwen2_reference.rms_norm = lambda w, h, eps: original(torch.ones_like(w), h, eps)
    MUTANT = name
    try:
        return expected_tensors(forward(p32, cfg, hyper, inputs, torch.float32))
    finally:
        MUTANT = None
        for attr, fn in saved.items():
            setattr(qwen2_reference, attr, fn)


def check_mutants(cases):
    """Each plausible mistake (module docstring) must make compare_forward.py fail on at least one case."""
    import compare_forward as cf

    def as_cf(tensors):
        res = {}
        for n, (dtype, t) in tensors.items():
            flat = t.reshape(-1).tolist()
            res[n] = cf.Tensor(dtype, list(t.shape), flat)
        return res

    ok = True
    for name in MUTANTS:
        caught = []
        for case, (ref64, ref32, case_inputs) in cases.items():
            _, failures = cf.compare(as_cf(ref64), as_cf(ref32), as_cf(mutant_output(name, case_inputs)))
            if failures:
                caught.append(f"{case}: {len(failures)} tensors, e.g. {', '.join(failures[:4])}")
        print(f"mutant {name}: " + ("; ".join(caught) if caught else "NOT DETECTED"))
        ok = ok and bool(caught)
    # and the float32 reference itself passes
    for case, (ref64, ref32, _) in cases.items():
        _, failures = cf.compare(as_cf(ref64), as_cf(ref32), as_cf(ref32))
        print(f"float32 reference of {case}: " + ("passes" if not failures else f"FAILS {failures}"))
        ok = ok and not failures
    assert ok, "the golden comparison is blind to some mistake (see above)"


# ----------------------------------------------------------------- files
OUTPUTS = ["e", "z", "loc_U", "scale_U", "loc_S", "scale_S", "loc_Y", "scale_Y", "ovr_z", "P", "log_P",
           "log_1mP", "valid_mask", "num_mask", "L_cls", "nll", "P_num", "gate", "L_reg_gated",
           "L_cls_mean", "L_reg_eff", "L_total", "reg_mae", "units_mean_loc", "units_mean_scale",
           "ovr_prob_sum", "accuracy", "num_accuracy", "valid_count", "num_count", "pred"]
INTEGER = {"pred", "sample.pred", "sample.pred_by_loc"}


def expected_tensors(out):
    res = {}
    for name, t in out.items():
        if name.startswith("_"):
            continue
        t = t.detach()
        if name in INTEGER:
            res[name] = ("I64", t.to(torch.int64).contiguous())
        else:
            t = t.to(torch.float64).contiguous()
            assert torch.isfinite(t).all(), f"non-finite values in {name}"
            res[name] = ("F64", t)
    missing = [n for n in OUTPUTS if n not in res]
    assert not missing, missing
    return res


def run_case(name, out_dir):
    p32, cfg, hyper, config, inputs = make_case(name)
    case_dir = os.path.join(out_dir, name)
    os.makedirs(os.path.join(case_dir, "model"), exist_ok=True)
    with open(os.path.join(case_dir, "model", "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_file(os.path.join(case_dir, "model", "model.safetensors"),
               {k: ("F32", v) for k, v in p32.items()}, {"format": "pt"})
    with open(os.path.join(case_dir, "inputs.json"), "w") as f:
        json.dump(inputs, f)

    out64 = forward(p32, cfg, hyper, inputs, torch.float64)
    out32 = forward(p32, cfg, hyper, inputs, torch.float32)
    expected = {}
    for tag, out in (("f64", out64), ("f32", out32)):
        expected[tag] = expected_tensors(out)
        write_file(os.path.join(case_dir, f"expected_{tag}.safetensors"), expected[tag],
                   {"producer": "causal_qwen_reference.py", "case": name, "dtype": tag,
                    "torch": torch.__version__})

    worst = check_gradients(p32, cfg, hyper, inputs, out64, name)
    eps_loss = float(forward(p32, cfg, hyper, inputs, torch.float64, grad=False, bce="eps")["L_total"])
    stable = float(out64["L_total"])
    if name == "extreme":
        assert abs(eps_loss - stable) > 1.0, (
            f"extreme: the ε-BCE loss {eps_loss} is within 1.0 of the stable {stable}: case not extreme")
    az = out64["ovr_z"].abs()
    r = ((torch.tensor(inputs["target_values"], dtype=torch.float64) - out64["loc_Y"]) / out64["scale_Y"]).abs()
    r = r[out64["num_mask"] > 0]
    print(f"{name}: L_total {stable:.10g} (ε-BCE form {eps_loss:.10g}); L_cls_mean "
          f"{float(out64['L_cls_mean']):.6g}, L_reg_eff {float(out64['L_reg_eff']):.6g}; "
          f"|ovr_z| {float(az.min()):.3g}…{float(az.max()):.3g} ({int((az > 1e6).sum())}/{az.numel()} "
          f"above 1e6); <NUM> |r| {float(r.min()):.3g}…{float(r.max()):.3g}; P_num at <NUM> "
          f"{[round(float(x), 4) for x in out64['P_num'][out64['num_mask'] > 0]]}; "
          f"gradient check worst err/tol {worst:.3g}; wrote {case_dir}")
    return expected["f64"], expected["f32"], (p32, cfg, hyper, inputs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--case", choices=["basic", "extreme"], action="append")
    ap.add_argument("--check-mutants", action="store_true",
                    help="also check that each plausible mistake (see above) fails compare_forward.py")
    args = ap.parse_args()
    torch.set_num_threads(1)  # deterministic reductions
    cases = {name: run_case(name, args.out_dir) for name in args.case or ["basic", "extreme"]}
    if args.check_mutants:
        check_mutants(cases)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Golden reference for causalqwen's transformer: a small Qwen2 stack in PyTorch following
Hugging Face's modeling_qwen2.py eager path step by step (Qwen2RMSNorm, Qwen2RotaryEmbedding,
rotate_half / apply_rotary_pos_emb, repeat_kv, eager attention with the 4-D causal+padding
mask filled with finfo.min, softmax in float32, Qwen2MLP, pre-norm decoder layers, final norm),
with CausalQwen's numeric embedding in front: e = embed(x) + sign(v)·log1p(|v|)·d/‖d‖.

Writes <out>/golden.json (index) and <out>/golden.bin (float64, little endian):
parameters (f32-representable values, Hugging Face names), inputs, and for dtype in
(float32, float64): z and the gradients of L = Σ_{valid b,s} R[b,s]·z[b,s] with respect to
every parameter and to the numeric values.

Run with Debian's /usr/bin/python3 (python3-torch 1.13):  qwen2_reference.py OUTDIR
"""
import json
import math
import os
import sys

import torch

CONFIG = dict(vocab_size=29, hidden_size=32, intermediate_size=48, num_layers=2, num_heads=4,
              num_kv_heads=2, rms_norm_eps=1e-6, rope_theta=1e6)
B, S = 2, 7
SEED = 20261121


# ----------------------------------------------------------------- Hugging Face Qwen2, eager
def rms_norm(weight, hidden_states, eps):  # Qwen2RMSNorm.forward
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(torch.float32) if input_dtype == torch.float32 else hidden_states
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + eps)
    return weight * hidden_states.to(input_dtype)


def rotary_cos_sin(position_ids, dim, base, dtype):  # Qwen2RotaryEmbedding.forward (default rope)
    # HF computes inv_freq and the angles in float32; the float64 run computes them in float64.
    ftype = torch.float64 if dtype == torch.float64 else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(ftype) / dim))
    inv_freq_expanded = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].to(ftype)
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def causal_mask_4d(attention_mask, dtype):  # _prepare_4d_causal_attention_mask_with_cache_position
    batch, length = attention_mask.shape
    min_dtype = torch.finfo(dtype).min
    causal_mask = torch.full((length, length), fill_value=min_dtype, dtype=dtype)
    causal_mask = torch.triu(causal_mask, diagonal=1)
    cache_position = torch.arange(length)
    causal_mask *= torch.arange(length) > cache_position.reshape(-1, 1)
    causal_mask = causal_mask[None, None, :, :].expand(batch, 1, -1, -1).clone()
    padding_mask = causal_mask[:, :, :, :length] + attention_mask[:, None, None, :].to(dtype)
    padding_mask = padding_mask == 0
    causal_mask[:, :, :, :length] = causal_mask[:, :, :, :length].masked_fill(padding_mask, min_dtype)
    return causal_mask


def attention(p, prefix, hidden_states, cos, sin, mask4d, cfg):  # Qwen2Attention.forward, eager
    bsz, q_len, _ = hidden_states.shape
    nh, nkv = cfg["num_heads"], cfg["num_kv_heads"]
    head_dim = cfg["hidden_size"] // nh
    lin = torch.nn.functional.linear
    q = lin(hidden_states, p[prefix + "q_proj.weight"], p[prefix + "q_proj.bias"])
    k = lin(hidden_states, p[prefix + "k_proj.weight"], p[prefix + "k_proj.bias"])
    v = lin(hidden_states, p[prefix + "v_proj.weight"], p[prefix + "v_proj.bias"])
    q = q.view(bsz, q_len, nh, head_dim).transpose(1, 2)
    k = k.view(bsz, q_len, nkv, head_dim).transpose(1, 2)
    v = v.view(bsz, q_len, nkv, head_dim).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    k = repeat_kv(k, nh // nkv)
    v = repeat_kv(v, nh // nkv)
    attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(head_dim)
    attn_weights = attn_weights + mask4d[:, :, :, : k.shape[-2]]
    softmax_dtype = torch.float32 if q.dtype == torch.float32 else q.dtype
    attn_weights = torch.nn.functional.softmax(attn_weights, dim=-1, dtype=softmax_dtype).to(q.dtype)
    attn_output = torch.matmul(attn_weights, v)
    attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, nh * head_dim)
    return lin(attn_output, p[prefix + "o_proj.weight"])


def mlp(p, prefix, x):  # Qwen2MLP: down(silu(gate(x)) * up(x))
    lin = torch.nn.functional.linear
    return lin(torch.nn.functional.silu(lin(x, p[prefix + "gate_proj.weight"])) * lin(x, p[prefix + "up_proj.weight"]),
               p[prefix + "down_proj.weight"])


def numeric_embedding(p, ids, values):  # CausalQwen: e = embed(x) + sign(v)·log1p(|v|)·d/‖d‖
    d = p["causal.num_direction"]
    unit = d / torch.linalg.norm(d)
    magnitude = torch.sign(values) * torch.log1p(torch.abs(values))
    return p["model.embed_tokens.weight"][ids] + magnitude[..., None] * unit


def model_forward(p, ids, values, attention_mask, position_ids, cfg, dtype):
    return backbone(p, numeric_embedding(p, ids, values), attention_mask, position_ids, cfg, dtype)


def backbone(p, hidden, attention_mask, position_ids, cfg, dtype):  # Qwen2Model after the embedding
    cos, sin = rotary_cos_sin(position_ids, cfg["hidden_size"] // cfg["num_heads"], cfg["rope_theta"], dtype)
    mask4d = causal_mask_4d(attention_mask, dtype)
    eps = cfg["rms_norm_eps"]
    for i in range(cfg["num_layers"]):
        pre = f"model.layers.{i}."
        residual = hidden
        hidden = rms_norm(p[pre + "input_layernorm.weight"], hidden, eps)
        hidden = residual + attention(p, pre + "self_attn.", hidden, cos, sin, mask4d, cfg)
        residual = hidden
        hidden = rms_norm(p[pre + "post_attention_layernorm.weight"], hidden, eps)
        hidden = residual + mlp(p, pre + "mlp.", hidden)
    return rms_norm(p["model.norm.weight"], hidden, eps)


# ----------------------------------------------------------------- data and outputs
def parameter_shapes(cfg):
    H, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    D = H // cfg["num_heads"]
    nq, nkv = cfg["num_heads"] * D, cfg["num_kv_heads"] * D
    shapes = {"model.embed_tokens.weight": (V, H), "causal.num_direction": (H,)}
    for i in range(cfg["num_layers"]):
        pre = f"model.layers.{i}."
        shapes.update({pre + "input_layernorm.weight": (H,), pre + "self_attn.q_proj.weight": (nq, H),
                       pre + "self_attn.k_proj.weight": (nkv, H), pre + "self_attn.v_proj.weight": (nkv, H),
                       pre + "self_attn.q_proj.bias": (nq,), pre + "self_attn.k_proj.bias": (nkv,),
                       pre + "self_attn.v_proj.bias": (nkv,), pre + "self_attn.o_proj.weight": (H, nq),
                       pre + "post_attention_layernorm.weight": (H,), pre + "mlp.gate_proj.weight": (F, H),
                       pre + "mlp.up_proj.weight": (F, H), pre + "mlp.down_proj.weight": (H, F)})
    shapes["model.norm.weight"] = (H,)
    return shapes


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    g = torch.Generator().manual_seed(SEED)
    cfg = CONFIG
    params32 = {}
    for name, shape in parameter_shapes(cfg).items():
        if "layernorm" in name or name == "model.norm.weight":
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        elif name == "causal.num_direction":
            t = torch.randn(shape, generator=g)
        else:
            t = 0.2 * torch.randn(shape, generator=g)
        params32[name] = t.to(torch.float32)
    ids = torch.randint(0, cfg["vocab_size"], (B, S), generator=g)
    # row 0 right-padded (2 pads), row 1 left-padded (3 pads) as batched generation does
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1]])
    position_ids = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)
    values = torch.zeros(B, S, dtype=torch.float32)
    values[0, 2], values[1, 4], values[1, 6] = 3.25, -1500.0, 0.0625
    r = torch.randn(B, S, cfg["hidden_size"], generator=g).to(torch.float32)
    valid = attention_mask.to(torch.float32)[..., None]

    entries, blobs, offset = {}, [], 0

    def put(name, tensor):
        nonlocal offset
        flat = tensor.detach().to(torch.float64).contiguous().reshape(-1)
        entries[name] = {"shape": list(tensor.shape), "offset": offset}
        blobs.append(flat)
        offset += flat.numel()

    for name, t in params32.items():
        put("param/" + name, t)
    put("input/input_ids", ids)
    put("input/attention_mask", attention_mask)
    put("input/position_ids", position_ids)
    put("input/numeric_values", values)
    put("input/loss_weights", r)

    for dtype, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
        p = {k: v.to(dtype).clone().requires_grad_(True) for k, v in params32.items()}
        v = values.to(dtype).clone().requires_grad_(True)
        z = model_forward(p, ids, v, attention_mask, position_ids, cfg, dtype)
        loss = (z * r.to(dtype) * valid.to(dtype)).sum()
        loss.backward()
        put(f"{tag}/z", z)
        put(f"{tag}/numeric_values.grad", v.grad)
        for name, t in p.items():
            put(f"{tag}/grad/{name}", t.grad)

    torch.cat(blobs).numpy().astype("<f8").tofile(os.path.join(out_dir, "golden.bin"))
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump({"config": cfg, "batch": B, "seq": S, "seed": SEED, "torch": torch.__version__,
                   "tensors": entries}, f, indent=1)
    print(f"wrote {len(entries)} tensors ({offset} values) to {out_dir} with torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "golden")

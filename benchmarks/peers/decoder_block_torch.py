#!/usr/bin/env python3
"""PyTorch peer for benchmarks/model/bench_decoder_block.cpp: one Qwen2.5-0.5B-shaped decoder layer
(H 896, 14 heads, 2 KV heads, FFN 4864) in Hugging Face's eager formulation (RMSNorm, q/k/v with
bias, rotate-half RoPE, repeat_kv, matmul + causal mask + float32 softmax + matmul, o_proj,
SwiGLU MLP, two residuals), float32, torch.set_num_threads(THREADS).

Prints one JSON line: {"seq":S, "fwd_s":median seconds, "fwdbwd_s":median seconds,
"peak_rss_growth_bytes": growth of the peak RSS over the run (after parameters and inputs)}.
usage: decoder_block_torch.py SEQ THREADS REPEATS
"""
import json
import math
import resource
import sys
import time

import torch

H, NH, NKV, F, EPS, THETA = 896, 14, 2, 4864, 1e-6, 1e6
D = H // NH


def rms_norm(w, x):
    variance = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + EPS))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        lin = torch.nn.Linear
        self.input_layernorm = torch.nn.Parameter(torch.ones(H))
        self.q_proj, self.k_proj, self.v_proj = lin(H, NH * D), lin(H, NKV * D), lin(H, NKV * D)
        self.o_proj = lin(NH * D, H, bias=False)
        self.post_attention_layernorm = torch.nn.Parameter(torch.ones(H))
        self.gate_proj, self.up_proj, self.down_proj = lin(H, F, bias=False), lin(H, F, bias=False), lin(F, H, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        h = rms_norm(self.input_layernorm, x)
        q = self.q_proj(h).view(b, s, NH, D).transpose(1, 2)
        k = self.k_proj(h).view(b, s, NKV, D).transpose(1, 2)
        v = self.v_proj(h).view(b, s, NKV, D).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k[:, :, None].expand(b, NKV, NH // NKV, s, D).reshape(b, NH, s, D)
        v = v[:, :, None].expand(b, NKV, NH // NKV, s, D).reshape(b, NH, s, D)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(D) + mask
        w = torch.softmax(w, dim=-1, dtype=torch.float32)
        a = torch.matmul(w, v).transpose(1, 2).reshape(b, s, H)
        x2 = x + self.o_proj(a)
        h2 = rms_norm(self.post_attention_layernorm, x2)
        return x2 + self.down_proj(torch.nn.functional.silu(self.gate_proj(h2)) * self.up_proj(h2))


def main():
    seq, threads, repeats = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    block = Block()
    x = torch.randn(1, seq, H, requires_grad=True)
    pos = torch.arange(seq, dtype=torch.float32)
    inv_freq = 1.0 / (THETA ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    emb = torch.cat([pos[:, None] * inv_freq[None]] * 2, dim=-1)
    cos, sin = emb.cos()[None, None], emb.sin()[None, None]
    mask = torch.triu(torch.full((seq, seq), torch.finfo(torch.float32).min), diagonal=1)[None, None]
    dy = torch.randn(1, seq, H)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def fwd():
        with torch.no_grad():
            block(x, cos, sin, mask)

    def fwdbwd():
        block.zero_grad(set_to_none=False)
        y = block(x, cos, sin, mask)
        y.backward(dy)

    out = {"seq": seq, "threads": threads, "torch": torch.__version__}
    for name, fn in (("fwd_s", fwd), ("fwdbwd_s", fwdbwd)):
        fn()  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[name] = sorted(times)[len(times) // 2]
    out["peak_rss_growth_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
    print(json.dumps(out))


if __name__ == "__main__":
    main()

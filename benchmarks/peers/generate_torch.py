#!/usr/bin/env python3
"""PyTorch peer for benchmarks/model/bench_generate.cpp: a Qwen2.5-0.5B-shaped model (vocab
151936, H 896, 24 layers, 14/2 heads, FFN 4864, tied lm_head) in Hugging Face's eager formulation with a KV
cache (torch.cat per step), float32, torch.set_num_threads(THREADS), inference_mode. Random
weights (N(0, 0.02²)): speed does not depend on the values.

Measures prefill of S tokens (then the lm_head on the last position) for each S in SEQS, and
greedy decoding of DECODE tokens after a 128-token prompt (each step: one token through the
stack, lm_head GEMV over all 151,936 rows, argmax). Prints one JSON line:
{"prefill": {S: median seconds}, "decode_s_per_token": median seconds per decode step}.
usage: generate_torch.py THREADS DECODE SEQ...
With CQ_TORCH_DTYPE=bf16 in the environment the weights are bfloat16 and the activations follow
(PyTorch's bf16 inference: its linear layers on oneDNN's bf16 kernels, AMX where the CPU has it).
"""
import json
import os
import statistics
import sys
import time

import torch

V, H, L, NH, NKV, F, EPS, THETA = 151936, 896, 24, 14, 2, 4864, 1e-6, 1e6
D = H // NH


def rms_norm(w, x):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rotate_half(x):
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope(pos):
    inv = 1.0 / (THETA ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    f = pos[:, None].float() * inv[None, :]
    emb = torch.cat((f, f), dim=-1)
    return emb.cos(), emb.sin()


class Model:
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        r = lambda *s: torch.randn(*s, generator=g) * 0.02
        self.embed = r(V, H)
        self.layers = []
        for _ in range(L):
            self.layers.append(dict(n1=torch.ones(H), wq=r(NH * D, H), bq=r(NH * D), wk=r(NKV * D, H), bk=r(NKV * D),
                                    wv=r(NKV * D, H), bv=r(NKV * D), wo=r(H, NH * D), n2=torch.ones(H),
                                    wg=r(F, H), wu=r(F, H), wd=r(H, F)))
        self.norm = torch.ones(H)

    def forward(self, ids, start, cache):
        S = ids.shape[0]
        x = self.embed[ids]
        cos, sin = rope(torch.arange(start, start + S))
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        mask = None
        if S > 1:
            total = start + S
            mask = torch.full((S, total), float("-inf")).triu(start + 1).to(x.dtype)
        for i, p in enumerate(self.layers):
            h = rms_norm(p["n1"], x)
            q = torch.nn.functional.linear(h, p["wq"], p["bq"]).view(S, NH, D).transpose(0, 1)
            k = torch.nn.functional.linear(h, p["wk"], p["bk"]).view(S, NKV, D).transpose(0, 1)
            v = torch.nn.functional.linear(h, p["wv"], p["bv"]).view(S, NKV, D).transpose(0, 1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if cache[i] is not None:
                k = torch.cat((cache[i][0], k), dim=1)
                v = torch.cat((cache[i][1], v), dim=1)
            cache[i] = (k, v)
            kk = k.repeat_interleave(NH // NKV, dim=0)
            vv = v.repeat_interleave(NH // NKV, dim=0)
            s = torch.matmul(q, kk.transpose(1, 2)) / (D ** 0.5)
            if mask is not None:
                s = s + mask
            a = torch.matmul(torch.softmax(s, dim=-1, dtype=torch.float32).to(vv.dtype), vv)
            x = x + torch.nn.functional.linear(a.transpose(0, 1).reshape(S, H), p["wo"])
            h = rms_norm(p["n2"], x)
            x = x + torch.nn.functional.linear(
                torch.nn.functional.silu(torch.nn.functional.linear(h, p["wg"])) * torch.nn.functional.linear(h, p["wu"]), p["wd"])
        z = rms_norm(self.norm, x[-1:])
        return torch.nn.functional.linear(z, self.embed)  # tied lm_head, last position only


def main():
    threads, decode = int(sys.argv[1]), int(sys.argv[2])
    seqs = [int(s) for s in sys.argv[3:]]
    torch.set_num_threads(threads)
    m = Model()
    if os.environ.get("CQ_TORCH_DTYPE") == "bf16":
        m.embed, m.norm = m.embed.bfloat16(), m.norm.bfloat16()
        m.layers = [{k: t.bfloat16() for k, t in p.items()} for p in m.layers]
    out = {"prefill": {}, "decode_s_per_token": None}
    with torch.inference_mode():
        for S in seqs:
            ids = torch.randint(0, 151000, (S,))
            times = []
            for rep in range(4):
                t = time.perf_counter()
                m.forward(ids, 0, [None] * L)
                times.append(time.perf_counter() - t)
            out["prefill"][S] = statistics.median(times[1:])
        cache = [None] * L
        logits = m.forward(torch.randint(0, 151000, (128,)), 0, cache)
        tok = logits.argmax(-1)
        times = []
        for step in range(decode):
            t = time.perf_counter()
            logits = m.forward(tok, 128 + step, cache)
            tok = logits.argmax(-1)
            times.append(time.perf_counter() - t)
        out["decode_s_per_token"] = statistics.median(times[2:])
    print(json.dumps(out))


if __name__ == "__main__":
    main()

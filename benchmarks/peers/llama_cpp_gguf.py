#!/usr/bin/env python3
# Writes a random-weight GGUF of the Qwen2.5-0.5B shape for benchmarking llama.cpp against
# bench_generate on the same model shape:
#   arch "qwen2", vocab 151936, hidden 896, 24 layers, 14 query heads / 2 key-value heads of
#   dimension 64, FFN 4864 (SwiGLU), q/k/v biases, RoPE theta 1e6, RMSNorm eps 1e-6, and the
#   output projection tied to the token embedding (as in Qwen2.5-0.5B; --untied writes a separate
#   output.weight instead).
# Weights and biases are drawn from N(0, 0.02) (fixed seed), norm weights are 1. Matrices are
# stored as F32 or BF16 (--type); 1-D tensors (norms, biases) are always F32, as llama.cpp's
# own converter does. Quantised files (e.g. Q8_0) are made from the F32 file with llama.cpp's
# llama-quantize.
# The tokenizer metadata is a dummy "gpt2" (byte-level BPE) vocabulary: the 256 byte symbols,
# two merges, placeholder tokens, and Qwen2's special tokens at their usual ids
# (<|endoftext|> = 151643 as BOS/EOS). It is enough for llama.cpp to load the model and for
# llama-bench, which feeds random token ids; it does not tokenise real text meaningfully.
#
# The file is written with the gguf-py package from the llama.cpp source tree (llama.cpp is
# built and used outside this repository, from its public source); it needs numpy.
#
# usage: python3 benchmarks/peers/llama_cpp_gguf.py --llama-src LLAMA_SRC_DIR --type f32|bf16 \
#            --out FILE.gguf [--untied] [--seed N]
import argparse
import os
import sys
import time

VOCAB = 151936
HIDDEN = 896
LAYERS = 24
HEADS = 14
KV_HEADS = 2
HEAD_DIM = 64
FFN = 4864
ROPE_THETA = 1.0e6
RMS_EPS = 1.0e-6
CONTEXT = 32768
EOT_ID = 151643  # <|endoftext|>
STD = 0.02


def bytes_to_unicode():
    """GPT-2's byte-level BPE alphabet: the printable symbol standing for each byte 0..255."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def tokenizer(gguf):
    tokens, types = [], []
    for s in bytes_to_unicode():
        tokens.append(s)
        types.append(gguf.TokenType.NORMAL)
    merges = ["Ġ t", "i n"]
    for m in merges:
        tokens.append(m.replace(" ", ""))
        types.append(gguf.TokenType.NORMAL)
    while len(tokens) < EOT_ID:
        tokens.append(f"tok{len(tokens)}")
        types.append(gguf.TokenType.NORMAL)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(19)]
    for s in specials:
        tokens.append(s)
        types.append(gguf.TokenType.CONTROL)
    while len(tokens) < VOCAB:
        tokens.append(f"[PAD{len(tokens)}]")
        types.append(gguf.TokenType.UNUSED)
    assert len(tokens) == VOCAB and len(set(tokens)) == VOCAB
    return tokens, [int(t) for t in types], merges


def tensor_specs(untied):
    """(name, numpy shape (rows = output features, columns = input features), is_matrix, init)."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    specs = [("token_embd.weight", (VOCAB, HIDDEN), True, "normal")]
    for i in range(LAYERS):
        b = f"blk.{i}."
        specs += [
            (b + "attn_norm.weight", (HIDDEN,), False, "ones"),
            (b + "attn_q.weight", (q, HIDDEN), True, "normal"),
            (b + "attn_q.bias", (q,), False, "normal"),
            (b + "attn_k.weight", (kv, HIDDEN), True, "normal"),
            (b + "attn_k.bias", (kv,), False, "normal"),
            (b + "attn_v.weight", (kv, HIDDEN), True, "normal"),
            (b + "attn_v.bias", (kv,), False, "normal"),
            (b + "attn_output.weight", (HIDDEN, q), True, "normal"),
            (b + "ffn_norm.weight", (HIDDEN,), False, "ones"),
            (b + "ffn_gate.weight", (FFN, HIDDEN), True, "normal"),
            (b + "ffn_up.weight", (FFN, HIDDEN), True, "normal"),
            (b + "ffn_down.weight", (HIDDEN, FFN), True, "normal"),
        ]
    specs.append(("output_norm.weight", (HIDDEN,), False, "ones"))
    if untied:
        specs.append(("output.weight", (VOCAB, HIDDEN), True, "normal"))
    return specs


def main():
    ap = argparse.ArgumentParser(description="Write a random-weight Qwen2.5-0.5B-shaped GGUF with llama.cpp's gguf-py.")
    ap.add_argument("--llama-src", required=True, help="llama.cpp source tree (its gguf-py package is used)")
    ap.add_argument("--type", choices=["f32", "bf16"], required=True, help="storage type of the weight matrices")
    ap.add_argument("--out", required=True, help="output .gguf file")
    ap.add_argument("--untied", action="store_true", help="write a separate output.weight instead of tying it to token_embd")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    gguf_py = os.path.join(args.llama_src, "gguf-py")
    if not os.path.isfile(os.path.join(gguf_py, "gguf", "gguf_writer.py")):
        sys.exit(f"error: {gguf_py}/gguf/gguf_writer.py not found (is --llama-src a llama.cpp source tree?)")
    sys.path.insert(0, gguf_py)
    try:
        import numpy as np
    except ImportError:
        sys.exit(f"error: numpy is not importable by {sys.executable} (Debian: apt-get install python3-numpy)")
    # gguf/__init__.py imports its vocabulary and model-card helpers, which need sentencepiece
    # and PyYAML at import time; neither is used here, so stand-ins do if they are missing
    import types
    for mod, attrs in (("sentencepiece", ("SentencePieceProcessor",)), ("yaml", ())):
        try:
            __import__(mod)
        except ImportError:
            stub = types.ModuleType(mod)
            for a in attrs:
                setattr(stub, a, type(a, (), {}))
            sys.modules[mod] = stub
    import gguf

    t0 = time.time()
    bf16 = args.type == "bf16"
    mat_qtype = gguf.GGMLQuantizationType.BF16 if bf16 else gguf.GGMLQuantizationType.F32

    w = gguf.GGUFWriter(args.out, "qwen2")
    w.add_name("random Qwen2.5-0.5B-shaped model (benchmark only)")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if bf16 else gguf.LlamaFileType.ALL_F32)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_layer_norm_rms_eps(RMS_EPS)

    tokens, types, merges = tokenizer(gguf)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(EOT_ID)
    w.add_eos_token_id(EOT_ID)
    w.add_pad_token_id(EOT_ID)
    w.add_add_bos_token(False)

    # header and tensor infos first, then the data tensor by tensor, so that at most one
    # tensor (the 151936 x 896 embedding) is held in memory
    specs = tensor_specs(args.untied)
    for name, shape, is_matrix, _ in specs:
        n = int(np.prod(shape))
        if is_matrix and bf16:
            w.add_tensor_info(name, shape, np.dtype(np.uint16), n * 2, raw_dtype=mat_qtype)
        else:
            w.add_tensor_info(name, shape, np.dtype(np.float32), n * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()

    rng = np.random.default_rng(args.seed)
    n_params = 0
    for name, shape, is_matrix, init in specs:
        if init == "ones":
            a = np.ones(shape, dtype=np.float32)
        else:
            a = rng.standard_normal(shape, dtype=np.float32)
            a *= np.float32(STD)
        n_params += a.size
        if is_matrix and bf16:
            a = gguf.quants.quantize(a, gguf.GGMLQuantizationType.BF16).view(np.uint16).reshape(shape)
        w.write_tensor_data(a)
    w.close()
    print(f"wrote {args.out}: {n_params} parameters, matrices {args.type}, "
          f"{'untied' if args.untied else 'tied'} output, {os.path.getsize(args.out) / 1e9:.3f} GB, "
          f"{time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()

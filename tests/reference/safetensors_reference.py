#!/usr/bin/env python3
"""An independent safetensors implementation for causalqwen's io tests: the file format written
and read with nothing but struct and json, the values and the float16/bfloat16 conversions taken
from PyTorch (Debian's python3-torch; run with /usr/bin/python3).

  safetensors_reference.py write OUTDIR
      OUTDIR/reference.safetensors  one tensor of every dtype, special values included
      OUTDIR/sharded/               model.safetensors.index.json + two shards
      OUTDIR/expected.json          per tensor: dtype, shape and the values as PyTorch reads them
  safetensors_reference.py check FILE
      reads FILE (written by the C++ test) and checks its layout against the format's rules and
      the Python library's conventions, and its float16/bfloat16 tensors against PyTorch's own
      rounding of the float32 source tensor. Exit status 0 when everything holds.
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {  # safetensors name -> torch dtype
    "F64": torch.float64, "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
# Rank in the Rust safetensors::Dtype enumeration; files list tensors by descending rank, then name.
RANK = {"BOOL": 0, "U8": 1, "I8": 2, "I16": 3, "F16": 4, "BF16": 5, "I32": 6, "F32": 7,
        "F64": 8, "I64": 9}
SEED = 20261121


def tensor_bytes(t):
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: take the raw 16-bit patterns
        return t.contiguous().view(torch.int16).numpy().tobytes()
    return t.contiguous().numpy().tobytes()


def write_file(path, tensors, metadata=None):
    names = sorted(tensors, key=lambda n: (-RANK[tensors[n][0]], n))
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name in names:
        dtype, t = tensors[name]
        blob = tensor_bytes(t)
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def as_json_value(x):
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def expected_entry(dtype, t):
    values = (t.to(torch.float64) if t.is_floating_point() else t.to(torch.int64)).flatten().tolist()
    return {"dtype": dtype, "shape": list(t.shape), "values": [as_json_value(v) for v in values]}


def write_all(out):
    torch.manual_seed(SEED)
    specials = [0.0, -0.0, 1.0, -2.5, math.inf, -math.inf, math.nan, 3.14159265, 1e-3, 65504.0,
                65520.0, 6e-8, 2.0 ** -24, 2.0 ** -14, 1e-40, 9.2e-41, 3.0e38, -1.0e-45]
    spec32 = torch.tensor(specials, dtype=torch.float32)
    tensors = {
        "f32.random": ("F32", torch.randn(3, 4, dtype=torch.float32)),
        "f32.special": ("F32", spec32),
        "f64.random": ("F64", torch.randn(2, 3, dtype=torch.float64) * 1e10),
        "bf16.random": ("BF16", torch.randn(4, 5).to(torch.bfloat16)),
        "bf16.special": ("BF16", spec32.to(torch.bfloat16)),
        "f16.random": ("F16", torch.randn(5, 2).to(torch.float16)),
        "f16.special": ("F16", spec32.to(torch.float16)),
        "f16.all_subnormals": ("F16", torch.arange(1, 1024, dtype=torch.int16).view(torch.float16)),
        "i64.values": ("I64", torch.tensor([-(2 ** 62), -1, 0, 1, 2 ** 40], dtype=torch.int64)),
        "i32.values": ("I32", torch.tensor([[-(2 ** 31), 7], [0, 2 ** 31 - 1]], dtype=torch.int32)),
        "i16.values": ("I16", torch.tensor([-32768, -1, 32767], dtype=torch.int16)),
        "i8.values": ("I8", torch.tensor([-128, 5, 127], dtype=torch.int8)),
        "u8.values": ("U8", torch.tensor([0, 200, 255], dtype=torch.uint8)),
        "bool.values": ("BOOL", torch.tensor([True, False, True, True])),
        "scalar": ("F32", torch.tensor(2.75, dtype=torch.float32)),
        "empty": ("F32", torch.zeros(0, 3, dtype=torch.float32)),
    }
    write_file(os.path.join(out, "reference.safetensors"), tensors,
               {"format": "pt", "producer": "safetensors_reference.py"})
    expected = {"reference": {n: expected_entry(d, t) for n, (d, t) in tensors.items()},
                "metadata": {"format": "pt", "producer": "safetensors_reference.py"}}

    sharded_dir = os.path.join(out, "sharded")
    os.makedirs(sharded_dir, exist_ok=True)
    shards = {
        "model-00001-of-00002.safetensors": {
            "model.embed_tokens.weight": ("BF16", torch.randn(6, 4).to(torch.bfloat16)),
            "model.layers.0.input_layernorm.weight": ("F32", torch.rand(4)),
        },
        "model-00002-of-00002.safetensors": {
            "model.norm.weight": ("F16", torch.rand(4).to(torch.float16)),
            "lm_head.weight": ("F32", torch.randn(6, 4)),
        },
    }
    weight_map = {}
    expected["sharded"] = {}
    for shard, ts in shards.items():
        write_file(os.path.join(sharded_dir, shard), ts, {"format": "pt"})
        for name, (dtype, t) in ts.items():
            weight_map[name] = shard
            expected["sharded"][name] = dict(expected_entry(dtype, t), shard=shard)
    with open(os.path.join(sharded_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)


def fail(message):
    print("safetensors_reference.py check: " + message)
    sys.exit(1)


def check(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    text = data[8:8 + n]
    if n % 8:
        fail(f"header length {n} is not a multiple of 8")
    stripped = text.rstrip(b" ")
    if len(text) - len(stripped) >= 8:
        fail("more than 7 bytes of padding")
    header = json.loads(stripped)
    keys = list(header)
    metadata = header.pop("__metadata__", None)
    if metadata is not None and keys[0] != "__metadata__":
        fail("__metadata__ is not the first key")
    if metadata != {"producer": "causalqwen", "purpose": "python check"}:
        fail(f"metadata {metadata}")
    names = list(header)
    if names != sorted(names, key=lambda k: (-RANK[header[k]["dtype"]], k)):
        fail(f"tensor order {names} is not the Python library's (descending dtype, then name)")
    body = data[8 + n:]
    offset = 0
    tensors = {}
    for name in names:
        e = header[name]
        begin, end = e["data_offsets"]
        if begin != offset:
            fail(f"{name} starts at {begin}, expected {offset}")
        dtype = DTYPES[e["dtype"]]
        size = torch.empty(0, dtype=dtype).element_size()
        count = math.prod(e["shape"])
        if end - begin != count * size:
            fail(f"{name}: {end - begin} bytes for shape {e['shape']}")
        raw = bytearray(body[begin:end])
        if dtype == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else torch.zeros(0, dtype=dtype)
        else:
            t = torch.frombuffer(raw, dtype=dtype) if raw else torch.zeros(0, dtype=dtype)
        tensors[name] = t.reshape(e["shape"])
        offset = end
    if offset != len(body):
        fail(f"data section has {len(body)} bytes, the tensors {offset}")
    source = tensors["source.f32"]
    for name, dtype in (("source.bf16", torch.bfloat16), ("source.f16", torch.float16)):
        mine = tensors[name].view(torch.int16)
        theirs = source.to(dtype).view(torch.int16)
        # NaN payloads may differ; both must be NaN there.
        nan = torch.isnan(source)
        if not torch.equal(torch.isnan(tensors[name].float()), nan):
            fail(f"{name}: NaN positions differ")
        bad = (mine != theirs) & ~nan
        if bad.any():
            i = int(bad.nonzero()[0][0])
            fail(f"{name}[{i}]: 0x{int(mine[i]) & 0xFFFF:04x}, PyTorch rounds "
                 f"{float(source[i])!r} to 0x{int(theirs[i]) & 0xFFFF:04x}")
    if not torch.equal(tensors["source.f64"], torch.arange(12, dtype=torch.float64).reshape(3, 4) / 8):
        fail("source.f64 values")
    if tensors["ids.i64"].tolist() != [-(2 ** 40), 0, 7]:
        fail("ids.i64 values")
    print(f"safetensors_reference.py check: {path}: {len(names)} tensors OK")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    if sys.argv[1] == "write":
        os.makedirs(sys.argv[2], exist_ok=True)
        write_all(sys.argv[2])
    else:
        check(sys.argv[2])

#!/usr/bin/env python3
"""Compare the output of `causalqwen forward` with the golden reference (causal_qwen_reference.py).

  compare_forward.py EXPECTED_F64 EXPECTED_F32 ACTUAL [--report]

Every tensor of EXPECTED_F64 must be in ACTUAL with the same shape (extra tensors in ACTUAL are
fine). Pure Python (struct, json, array): no PyTorch needed. Prints one line per tensor
(name, shape, max abs err, tol, ok) and exits 1 on any failure, missing tensor or unreadable file.
With --report each line also shows the worst element: its index, the actual and expected values.

Tolerance rule, per tensor X (f64 = the reference in float64, f32 = the same reference computed in
float32, ε = 2⁻²³ the float32 machine epsilon):

    tol(X) = 8 · max|f32 − f64|  +  64 · ε · max|f64|

and every element must satisfy |actual − f64| ≤ tol(X) (a NaN anywhere fails).
  - The first term is the error a float32 implementation of the same formulas actually makes on
    these inputs; 8× leaves room for a different but equally sound evaluation order (fused
    kernels, GEMM blocking, analytic instead of autograd backward) without admitting a wrong formula.
  - The second term is a floor for tensors whose float32 reference error is accidentally tiny
    (exact in float32, or errors that happen to cancel): 64 ulps at the tensor's own scale. On the
    two cases the reference's own float32 error is 0–42 ulps of max|f64| (median 2–3), so the floor
    decides only where float32 happened to be nearly exact, and a sound float32 implementation that
    rounds differently (another summation order over the 16–24-term dot products and the up to
    M·K = 252-term gradient reductions) still fits in 8× that plus 64 ulps.
    The floor is relative to the tensor's magnitude, not max(1, ·): in `extreme` scale_U ≈ 2e-9 and
    scale_S, scale_Y ≈ 1e-8, and an absolute floor of 64·ε = 7.6e-6 would accept any value for
    them (e.g. a scale_Y without b_noise). A tensor that is exactly zero in the reference (accuracy
    = 0 in `basic`) must therefore be exactly 0.
Exact tensors: valid_mask, num_mask, valid_count, num_count must be equal.
Integer tensors (pred, sample.pred, sample.pred_by_loc: argmax of P, sample.P, sample.loc_S): at
each position the actual class a is accepted if score_f64[a] ≥ score_f64[expected] − tol(score),
i.e. an exact match unless the reference itself has a near-tie within the score's tolerance.
accuracy and num_accuracy get, on top of their tol, (positions of their mask where such a near-tie
exists) / (size of the mask), since each near-tie may flip one position either way.
"""
import argparse
import json
import math
import struct
import sys
from array import array

EPS32 = 2.0 ** -23
EXACT = {"valid_mask", "num_mask", "valid_count", "num_count"}
ARGMAX = {"pred": "P", "sample.pred": "sample.P", "sample.pred_by_loc": "sample.loc_S"}
ACCURACY = {"accuracy": ("pred", "valid_mask"), "num_accuracy": ("pred", "num_mask")}
FORMATS = {"F64": ("d", 8), "F32": ("f", 4), "I64": ("q", 8), "I32": ("i", 4), "I16": ("h", 2),
           "I8": ("b", 1), "U8": ("B", 1)}


class BadFile(Exception):
    pass


class Tensor:
    def __init__(self, dtype, shape, values):
        self.dtype, self.shape, self.values = dtype, shape, values

    @property
    def is_int(self):
        return self.dtype[0] in "IU"


def read_safetensors(path):
    """{name: Tensor} in file order; raises BadFile with a readable reason."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BadFile(f"{path}: cannot read ({e.strerror})")
    if len(data) < 8:
        raise BadFile(f"{path}: {len(data)} bytes, too short for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise BadFile(f"{path}: header length {n} runs past the end of the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise BadFile(f"{path}: malformed JSON header ({e})")
    if not isinstance(header, dict):
        raise BadFile(f"{path}: the header is not a JSON object")
    header.pop("__metadata__", None)
    body = data[8 + n:]
    tensors = {}
    for name, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], list(entry["shape"]), entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise BadFile(f"{path}: tensor {name!r}: entry {entry!r} lacks dtype/shape/data_offsets")
        if dtype not in FORMATS:
            raise BadFile(f"{path}: tensor {name!r}: dtype {dtype} not supported here")
        code, size = FORMATS[dtype]
        count = math.prod(shape)
        if not (0 <= begin <= end <= len(body)):
            raise BadFile(f"{path}: tensor {name!r}: data_offsets [{begin}, {end}] outside the "
                          f"{len(body)}-byte data section")
        if end - begin != count * size:
            raise BadFile(f"{path}: tensor {name!r}: {end - begin} bytes for {dtype} shape {shape}")
        values = array(code)
        values.frombytes(body[begin:end])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = Tensor(dtype, shape, values)
    return tensors


def max_abs(values):
    return max((abs(v) for v in values), default=0.0)


def unravel(flat, shape):
    idx = []
    for dim in reversed(shape):
        idx.append(flat % dim if dim else 0)
        flat = flat // dim if dim else 0
    return list(reversed(idx))


def tolerance(name, ref64, ref32):
    a, b = ref64[name].values, ref32[name].values
    diff = max((abs(x - y) for x, y in zip(a, b)), default=0.0)
    return 8.0 * diff + 64.0 * EPS32 * max_abs(a)


def worst_error(actual, expected):
    """(max abs error, flat index of it, NaN count)."""
    worst, where, nans = 0.0, 0, 0
    for i, (x, y) in enumerate(zip(actual, expected)):
        d = abs(float(x) - float(y))
        if d != d:
            nans += 1
            if worst == worst:
                worst, where = math.nan, i
        elif worst == worst and d > worst:
            worst, where = d, i
    return worst, where, nans


def argmax_acceptance(name, ref64, ref32, actual):
    """For an argmax tensor: (ok, mismatches, near_tie flags per position, note)."""
    score_name = ARGMAX[name]
    expected = ref64[name].values
    if score_name not in ref64 or score_name not in ref32:
        flags = [False] * len(expected)
        bad = sum(int(a != e) for a, e in zip(actual, expected))
        return bad == 0, bad, flags, "(no score tensor: exact)"
    score = ref64[score_name]
    tol = tolerance(score_name, ref64, ref32)
    K = score.shape[-1]
    bad, flags = 0, []
    for pos, (a, e) in enumerate(zip(actual, expected)):
        row = score.values[pos * K:(pos + 1) * K]
        top = row[int(e)]
        accepted = [k for k in range(K) if row[k] >= top - tol]
        flags.append(len(accepted) > 1)
        if int(a) not in accepted:
            bad += 1
    return bad == 0, bad, flags, f"(near-ties within tol({score_name}) = {tol:.3g}: {sum(flags)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("expected_f64")
    ap.add_argument("expected_f32")
    ap.add_argument("actual")
    ap.add_argument("--report", action="store_true", help="show the worst element of each tensor")
    args = ap.parse_args()
    try:
        ref64 = read_safetensors(args.expected_f64)
        ref32 = read_safetensors(args.expected_f32)
        act = read_safetensors(args.actual)
    except BadFile as e:
        print(f"compare_forward.py: {e}")
        return 1
    rows, failures = compare(ref64, ref32, act, args.report)
    w = max(len(r[0]) for r in rows) if rows else 4
    print(f"{'name':<{w}}  {'shape':<10} {'max abs err':>11} {'tol':>10}  ok")
    for name, shape, err, tol, ok, note in rows:
        print(f"{name:<{w}}  {shape:<10} {err:>11} {tol:>10}  {ok}" + (f"  {note}" if note else ""))
    if failures:
        print(f"compare_forward.py: {len(failures)} of {len(ref64)} tensors FAIL: " + ", ".join(failures))
        return 1
    print(f"compare_forward.py: all {len(ref64)} tensors within tolerance")
    return 0


def compare(ref64, ref32, act, report=False):
    """Rows (name, shape, err, tol, ok, note) in EXPECTED_F64's order and the names that fail."""
    rows, failures = [], []
    near_ties = {}
    # argmax tensors first: the accuracies need their near-tie flags
    order = sorted(ref64, key=lambda n: (n not in ARGMAX, list(ref64).index(n)))
    for name in order:
        exp = ref64[name]
        shape = "[" + ",".join(map(str, exp.shape)) + "]"
        if name not in ref32:
            failures.append(name)
            rows.append((name, shape, "-", "-", "FAIL", "not in EXPECTED_F32"))
            continue
        if name not in act:
            failures.append(name)
            rows.append((name, shape, "-", "-", "FAIL", "missing from ACTUAL"))
            continue
        a = act[name]
        if a.shape != exp.shape:
            failures.append(name)
            rows.append((name, shape, "-", "-", "FAIL",
                         f"ACTUAL has shape [{','.join(map(str, a.shape))}]"))
            continue
        note = ""
        if name in ARGMAX:
            if not a.is_int and any(not (v == v and abs(v) != math.inf and v == math.floor(v)) for v in a.values):
                ok, err, tol, note = False, math.nan, 0.0, f"ACTUAL is {a.dtype} with non-integer values"
            else:
                ok, bad, flags, note = argmax_acceptance(name, ref64, ref32, a.values)
                near_ties[name] = flags
                err, tol = float(bad), 0.0
                note = f"{bad} positions differ {note}"
        elif name in EXACT:
            err, where, nans = worst_error(a.values, exp.values)
            tol = 0.0
            ok = nans == 0 and err == 0.0
        else:
            err, where, nans = worst_error(a.values, exp.values)
            tol = tolerance(name, ref64, ref32)
            if name in ACCURACY:
                pred_name, mask_name = ACCURACY[name]
                flags, mask = near_ties.get(pred_name), ref64.get(mask_name)
                if flags is not None and mask is not None:
                    n = sum(1 for f, m in zip(flags, mask.values) if m > 0)
                    amb = sum(1 for f, m in zip(flags, mask.values) if f and m > 0)
                    if n and amb:
                        tol += amb / n
                        note = f"+{amb}/{n} for near-ties"
            ok = nans == 0 and err <= tol
            if nans:
                note = f"{nans} NaN"
        if report and name not in ARGMAX and exp.values:
            i = where
            idx = unravel(i, exp.shape)
            note = (note + " " if note else "") + (f"worst at {idx}: actual {float(a.values[i]):.10g} "
                                                   f"expected {float(exp.values[i]):.10g}")
        rows.append((name, shape, f"{err:.3g}", f"{tol:.3g}", "ok" if ok else "FAIL", note))
        if not ok:
            failures.append(name)

    rows.sort(key=lambda r: list(ref64).index(r[0]))
    return rows, failures

if __name__ == "__main__":
    sys.exit(main())

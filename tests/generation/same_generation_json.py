"""Compares two outputs of `causalqwen generate --json` (one object per line): every field equal,
except the floating-point ones (numbers[].value, numbers[].scale, p_num), which may differ by a
relative `tolerance` (the KV cache's one-row products sum in another order than the full pass's
GEMMs). usage: same_generation_json.py A.jsonl B.jsonl TOLERANCE"""
import json
import math
import sys


def close(a, b, tol):
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def main():
    a_path, b_path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    a_lines = [json.loads(l) for l in open(a_path, encoding="utf-8") if l.strip()]
    b_lines = [json.loads(l) for l in open(b_path, encoding="utf-8") if l.strip()]
    if len(a_lines) != len(b_lines):
        sys.exit(f"{len(a_lines)} objects vs {len(b_lines)}")
    worst = 0.0
    for n, (a, b) in enumerate(zip(a_lines, b_lines)):
        if sorted(a) != sorted(b):
            sys.exit(f"object {n}: fields {sorted(a)} vs {sorted(b)}")
        for key in a:
            if key in ("numbers", "p_num"):
                continue
            if a[key] != b[key]:
                sys.exit(f"object {n}: {key} differs: {a[key]!r} vs {b[key]!r}")
        pairs = list(zip(a["p_num"], b["p_num"]))
        if len(a["p_num"]) != len(b["p_num"]) or len(a["numbers"]) != len(b["numbers"]):
            sys.exit(f"object {n}: p_num or numbers lengths differ")
        for x, y in zip(a["numbers"], b["numbers"]):
            if x["index"] != y["index"]:
                sys.exit(f"object {n}: number indices {x['index']} vs {y['index']}")
            pairs += [(x["value"], y["value"]), (x["scale"], y["scale"])]
        for x, y in pairs:
            if not close(x, y, tol):
                sys.exit(f"object {n}: {x} vs {y} beyond the tolerance {tol}")
            worst = max(worst, abs(x - y) / max(1.0, abs(x)))
    print(f"{len(a_lines)} objects agree; largest relative float difference {worst:.3g}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Recomputes eval's proper scores from its --predictions file, independently of the C++ code
(plain Python floats and the math module), and compares them with eval's JSON report.

Usage: recompute_scores.py PREDICTIONS.jsonl REPORT.json [CALIBRATION.json]

For every scored number (y, loc, scale) of the Cauchy forecast:
  NLL  = log(pi*scale) + log(1 + z^2),  z = (y - loc)/scale
  CRPS = (2*scale/pi) * (z*atan z - 0.5*log(1 + z^2) + log 2)
  pinball = mean over tau = 0.05..0.95 of (tau - 1{y < q}) (y - q), q = loc + scale*tan(pi*(tau - 0.5))
  IS_alpha of loc +- m*scale*tan(pi*p/2) (m = 1, or the pooled multiplier of CALIBRATION.json)
summarised as mean, median, trimmed mean (the middle after floor(0.1 n) cut at each end), overall
and per group; prints SCORES_AGREE and exits 0 when every score agrees to a relative 1e-9.
"""
import json
import math
import sys


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def trimmed(values, fraction):
    v = sorted(values)
    cut = int(fraction * len(v))
    kept = v[cut:len(v) - cut]
    return sum(kept) / len(kept)


def scores(rows, levels, multiplier, baseline):
    nll, crps, pinball, abs_err = [], [], [], []
    for r in rows:
        y, loc, scale = r["y"], r["loc"], r["scale"]
        z = (y - loc) / scale
        nll.append(math.log(math.pi * scale) + math.log1p(z * z))
        crps.append(2 * scale / math.pi * (z * math.atan(z) - 0.5 * math.log1p(z * z) + math.log(2)))
        total = 0.0
        for i in range(1, 20):
            tau = 0.05 * i
            q = loc + scale * math.tan(math.pi * (tau - 0.5))
            total += (tau - (1.0 if y < q else 0.0)) * (y - q)
        pinball.append(total / 19)
        abs_err.append(abs(y - loc))
    out = {
        "numbers": len(rows),
        "nll.mean": sum(nll) / len(nll),
        "crps.mean": sum(crps) / len(crps),
        "crps.median": median(crps),
        "crps.trimmed_mean": trimmed(crps, 0.1),
        "mean_pinball": sum(pinball) / len(pinball),
        "mae": sum(abs_err) / len(abs_err),
    }
    for p in levels:
        m = multiplier(p, rows)
        alpha = 1 - p
        inside, total = 0, 0.0
        for r in rows:
            half = m * r["scale"] * math.tan(math.pi * p / 2)
            lo, hi = r["loc"] - half, r["loc"] + half
            y = r["y"]
            inside += lo <= y <= hi
            s = hi - lo
            if y < lo:
                s += 2 / alpha * (lo - y)
            if y > hi:
                s += 2 / alpha * (y - hi)
            total += s
        out[f"coverage@{p}"] = inside / len(rows)
        out[f"interval_score@{p}"] = total / len(rows)
    base = [abs(r["y"] - baseline) for r in rows]
    out["skill.crps_median"] = 1 - out["crps.median"] / median(base)
    out["skill.mae"] = 1 - out["mae"] / (sum(base) / len(base))
    return out


def reported(block):
    out = {
        "numbers": block["numbers"],
        "nll.mean": block["nll"]["mean"],
        "crps.mean": block["crps"]["mean"],
        "crps.median": block["crps"]["median"],
        "crps.trimmed_mean": block["crps"]["trimmed_mean"],
        "mean_pinball": block["mean_pinball"],
        "mae": block["mae"],
        "skill.crps_median": block["skill"]["crps_median"],
        "skill.mae": block["skill"]["mae"],
    }
    for level in block["levels"]:
        out[f"coverage@{level['level']}"] = level["coverage"]
        out[f"interval_score@{level['level']}"] = level["interval_score"]
    return out


def compare(name, mine, theirs, problems):
    for key, value in mine.items():
        if key not in theirs:
            problems.append(f"{name}: the report lacks {key}")
            continue
        other = theirs[key]
        if abs(value - other) > 1e-9 * max(1.0, abs(value)):
            problems.append(f"{name}: {key} recomputed {value!r}, reported {other!r}")


def main():
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    report = json.load(open(sys.argv[2], encoding="utf-8"))["scores"]
    calibration = json.load(open(sys.argv[3], encoding="utf-8")) if len(sys.argv) > 3 else None
    baseline = report["baseline"]["value"]
    problems = []
    blocks = [("uncalibrated", report["uncalibrated"], lambda p, rows: 1.0)]
    if calibration is not None:
        if calibration["groups"]:
            problems.append("this check recomputes pooled multipliers only")

        def pooled(p, rows):
            for level in calibration["pooled"]["levels"]:
                if abs(level["level"] - p) < 1e-12:
                    return level["multiplier"]
            raise KeyError(p)
        if report["calibrated"] is None:
            problems.append("the report has no calibrated scores")
        else:
            blocks.append(("calibrated", report["calibrated"], pooled))
    for name, block, multiplier in blocks:
        levels = [level["level"] for level in block["overall"]["levels"]]
        compare(f"{name} overall", scores(rows, levels, multiplier, baseline), reported(block["overall"]), problems)
        groups = sorted({r["group"] for r in rows if r["group"] is not None})
        for g in groups:
            members = [r for r in rows if r["group"] == g]
            compare(f"{name} group {g}", scores(members, levels, multiplier, baseline), reported(block["groups"][g]), problems)
    if problems:
        print("\n".join(problems))
        return 1
    print(f"SCORES_AGREE on {len(rows)} numbers ({', '.join(name for name, _, _ in blocks)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

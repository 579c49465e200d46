#!/bin/sh
# The recalibration of a trained model's number intervals, judged on sentences it was not
# calibrated on: the held-out sentences of a `causalqwen demo` run are split by line, the even
# lines to calibrate on, the odd lines to evaluate on (and then the other way round). Prints one
# table: coverage at 50 % and 90 % and the interval scores, before and after the conformal
# calibration, the temperature and the per-group (Mondrian) one. Then SPLITS random half splits
# (lines shuffled with awk's srand(seed), seeds 1…SPLITS), each calibrated on one half and
# evaluated on the other: the mean, standard deviation and range of the coverage and of the
# interval scores over the splits.
#
# usage: benchmarks/model/calibration_split.sh CLI DEMO_DIR WORK_DIR [SPLITS (default 10)]
#   CLI       build/bin/causalqwen
#   DEMO_DIR  the --out directory of `causalqwen demo` (model/ and held_out.jsonl)
#   WORK_DIR  scratch directory (recreated): the model is copied there, DEMO_DIR is not touched
set -e
CLI=$1 DEMO=$2 W=$3 SPLITS=${4:-10}
[ -x "$CLI" ] && [ -f "$DEMO/held_out.jsonl" ] && [ -n "$W" ] || { echo "usage: $0 CLI DEMO_DIR WORK_DIR" >&2; exit 2; }
rm -rf "$W"
mkdir -p "$W"
awk 'NR % 2 == 0' "$DEMO/held_out.jsonl" > "$W/cal.jsonl"
awk 'NR % 2 == 1' "$DEMO/held_out.jsonl" > "$W/test.jsonl"
cp -r "$DEMO/model" "$W/model"
E="$CLI eval --model $W/model --seq-len 64 --batch-size 16 --plain"
C="$CLI calibrate --model $W/model --seq-len 64 --plain"
$E --data "$DEMO/held_out.jsonl" --out "$W/all.json" > "$W/all.txt"
$E --data "$W/test.jsonl" --out "$W/before.json" > "$W/before.txt"
$C --data "$W/cal.jsonl" > "$W/calibrate.txt"
$E --data "$W/test.jsonl" --out "$W/conformal.json" --plot "$W/calibration.svg" --predictions "$W/predictions.jsonl" > "$W/conformal.txt"
cp "$W/model/calibration.json" "$W/calibration-conformal.json"
$C --data "$W/cal.jsonl" --method temperature > "$W/calibrate-temperature.txt"
$E --data "$W/test.jsonl" --out "$W/temperature.json" > "$W/temperature.txt"
$C --data "$W/cal.jsonl" --by group > "$W/calibrate-group.txt"
$E --data "$W/test.jsonl" --out "$W/group.json" > "$W/group.txt"
$C --data "$W/test.jsonl" > "$W/calibrate-reverse.txt"
$E --data "$W/cal.jsonl" --out "$W/reverse.json" > "$W/reverse.txt"
for seed in $(seq 1 "$SPLITS"); do
  awk -v seed="$seed" 'BEGIN { srand(seed) } { print rand() "\t" $0 }' "$DEMO/held_out.jsonl" | sort -k1,1 | cut -f2- > "$W/shuffled.jsonl"
  awk 'NR % 2 == 0' "$W/shuffled.jsonl" > "$W/split-cal.jsonl"
  awk 'NR % 2 == 1' "$W/shuffled.jsonl" > "$W/split-test.jsonl"
  $C --data "$W/split-cal.jsonl" > /dev/null
  $E --data "$W/split-test.jsonl" --out "$W/split-$seed.json" > /dev/null
done
/usr/bin/python3 - "$W" "$SPLITS" <<'PY'
import json, statistics, sys
w, splits = sys.argv[1], int(sys.argv[2])
def get(name, key):
    s = json.load(open(f"{w}/{name}.json"))["scores"][key]
    if s is None:
        return None
    o = s["overall"]
    lv = {l["level"]: l for l in o["levels"]}
    return o, lv
rows = [("all held-out lines, uncalibrated", "all", "uncalibrated"),
        ("odd lines, uncalibrated", "before", "uncalibrated"),
        ("odd lines, conformal (fitted on even)", "conformal", "calibrated"),
        ("odd lines, temperature (fitted on even)", "temperature", "calibrated"),
        ("odd lines, conformal by group (fitted on even)", "group", "calibrated"),
        ("even lines, uncalibrated", "reverse", "uncalibrated"),
        ("even lines, conformal (fitted on odd)", "reverse", "calibrated")]
print("| evaluated on | numbers | cover 50% | cover 90% | IS 50% | IS 90% | median width 90% | NLL | CRPS median |")
print("|---|---|---|---|---|---|---|---|---|")
for label, name, key in rows:
    o, lv = get(name, key)
    print(f"| {label} | {o['numbers']} | {lv[0.5]['coverage']:.3f} | {lv[0.9]['coverage']:.3f} | "
          f"{lv[0.5]['interval_score']:.3f} | {lv[0.9]['interval_score']:.3f} | {lv[0.9]['median_width']:.3f} | "
          f"{o['nll']['mean']:.4f} | {o['crps']['median']:.4f} |")
if splits:
    cols = {"cover 50%": [], "cover 90%": [], "IS 50% before": [], "IS 50% after": [], "IS 90% before": [], "IS 90% after": []}
    for seed in range(1, splits + 1):
        s = json.load(open(f"{w}/split-{seed}.json"))["scores"]
        before = {l["level"]: l for l in s["uncalibrated"]["overall"]["levels"]}
        after = {l["level"]: l for l in s["calibrated"]["overall"]["levels"]}
        cols["cover 50%"].append(after[0.5]["coverage"])
        cols["cover 90%"].append(after[0.9]["coverage"])
        for p in (0.5, 0.9):
            cols[f"IS {p:.0%} before"].append(before[p]["interval_score"])
            cols[f"IS {p:.0%} after"].append(after[p]["interval_score"])
    print(f"\nconformal, over {splits} random half splits (calibrated on one half, evaluated on the other):\n")
    print("| | mean | s.d. | min | max |")
    print("|---|---|---|---|---|")
    for name, v in cols.items():
        print(f"| {name} | {statistics.mean(v):.3f} | {statistics.stdev(v) if len(v) > 1 else 0:.3f} | {min(v):.3f} | {max(v):.3f} |")
PY

#!/bin/sh
# The Cauchy regression head against a Gaussian NLL head and an MSE point head on the same
# backbone, data, seed and budget: the demo's synthetic corpus (its train sentences, a BPE
# tokenizer of 1024 ids trained on them, its 512 held-out sentences with their template family
# as the group), `causalqwen train --preset tiny --reg-head H` for H = cauchy, gaussian, mse with
# the demo's recipe (lr 7.5e-4, warm-up steps/20, α = 1, regression gain 1, bias at the training
# median, batch 16 x 64 tokens, clip 1), ONE thread each, one after the other; then `causalqwen
# eval` of each on the held-out file (same threads). Writes one Markdown table (NLL, CRPS median,
# coverage at 50 % and 90 %, the interval scores at 50 % and 90 %, MAE; overall and per family)
# to OUT_MD, after a header naming the date, the command, the machine and the budget, and a
# second table of the next-token statistics (accuracy, <NUM> precision and recall, L_cls, RMSE).
#
# usage: benchmarks/model/reg_heads.sh CLI WORK_DIR [STEPS (default 5000, the demo's)] [OUT_MD (default: WORK_DIR/reg-heads.md)]
#   CLI       build/bin/causalqwen
#   WORK_DIR  scratch directory: data, tokenizer, one run per head, eval reports (a run whose
#             checkpoint of STEPS steps is there already is not trained again)
#   SEED      (environment) the seed of the data, the model init and the batches (default 20261121)
set -e
CLI=$1 W=$2 STEPS=${3:-5000} OUT_MD=${4:-$2/reg-heads.md} SEED=${SEED:-20261121}
[ -x "$CLI" ] && [ -n "$W" ] || { echo "usage: $0 CLI WORK_DIR [STEPS] [OUT_MD]" >&2; exit 2; }
mkdir -p "$W"
[ -f "$W/train.jsonl" ] || "$CLI" synth --out "$W/train.jsonl" --count 20000 --seed "$SEED"
[ -f "$W/held_out.jsonl" ] || "$CLI" synth --out "$W/held_out.jsonl" --count 512 --seed "$SEED" --split val
[ -f "$W/tokenizer.json" ] || "$CLI" bpe --corpus "$W/train.jsonl" --vocab-size 1024 --out "$W/tokenizer.json" > "$W/bpe.txt"
WARMUP=$((STEPS / 20)); [ "$WARMUP" -ge 1 ] || WARMUP=1
EVAL_EVERY=$((STEPS / 5)); [ "$EVAL_EVERY" -ge 1 ] || EVAL_EVERY=1
for H in cauchy gaussian mse; do
  R="$W/$H" CKPT="$W/$H/checkpoints/step-$(printf %08d "$STEPS")"
  if [ ! -f "$CKPT/model.safetensors" ]; then
    rm -rf "$R"
    start=$(date +%s)
    OMP_NUM_THREADS=1 "$CLI" train --preset tiny --tokenizer "$W/tokenizer.json" --synthetic 20000 --seed "$SEED" \
      --reg-head "$H" --steps "$STEPS" --batch-size 16 --seq-len 64 --lr 7.5e-4 --warmup "$WARMUP" --clip 1 \
      --alpha 1 --reg-init-gain 1.0 --reg-bias median --eval-every "$EVAL_EVERY" --checkpoint-every "$STEPS" \
      --threads 1 --out "$R" > "$W/train-$H.txt"
    echo $(( $(date +%s) - start )) > "$W/train-$H.seconds"
  fi
  OMP_NUM_THREADS=1 "$CLI" eval --model "$CKPT" --tokenizer "$W/tokenizer.json" --data "$W/held_out.jsonl" \
    --seq-len 64 --batch-size 16 --threads 1 --plain --baseline-data "$W/train.jsonl" --out "$W/eval-$H.json" > "$W/eval-$H.txt"
done
/usr/bin/python3 - "$W" "$STEPS" "$SEED" "$OUT_MD" "$0 $*" <<'PY'
import datetime, json, os, platform, subprocess, sys
w, steps, seed, out_md, command = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
heads = ["cauchy", "gaussian", "mse"]
full = {h: json.load(open(f"{w}/eval-{h}.json")) for h in heads}
reports = {h: full[h]["scores"]["uncalibrated"] for h in heads}
def fmt(v, spec=".4g"):
    return "—" if v is None else format(v, spec)
def row(name, h, s):
    lv = {l["level"]: l for l in s["levels"]}
    nll = s["nll"]["mean"] if s["nll"] else None
    get = lambda p, k: lv[p][k] if p in lv else None
    return (f"| {name} | {h} | {s['numbers']} | {fmt(nll)} | {fmt(s['crps']['median'])} | {fmt(get(0.5, 'coverage'), '.3f')} | "
            f"{fmt(get(0.9, 'coverage'), '.3f')} | {fmt(get(0.5, 'interval_score'))} | {fmt(get(0.9, 'interval_score'))} | "
            f"{fmt(s['mae'])} |")
cpu = "unknown CPU"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
seconds = {h: open(f"{w}/train-{h}.seconds").read().strip() if os.path.exists(f"{w}/train-{h}.seconds") else "?" for h in heads}
lines = ["# Regression heads: Cauchy, Gaussian NLL, MSE on the same backbone and data", "",
         "`benchmarks/model/reg_heads.sh` trains `causalqwen train --preset tiny --reg-head H` for each head on the demo's "
         "synthetic corpus (20000 training sentences, a BPE tokenizer of 1024 ids trained on them) with the same seed, "
         "recipe and budget, and scores each with `causalqwen eval` on the demo's 512 held-out sentences, by the "
         "scores of its own distribution ([calibration guide](../guide/calibration.md#4-other-regression-heads-train---reg-head-cauchygaussianmse)); "
         "MAE is of loc_Y for all three. No recalibration. \"—\": the mse head forecasts a point (no NLL, no interval).", "",
         f"Measured {datetime.date.today().isoformat()} on {cpu} ({os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}), "
         f"shared with other jobs; each training on one thread, one after the other.",
         "", "```", command, "```", "",
         f"Budget: {steps} steps of 16 sequences x 64 tokens each (the full demo runs 5000), seed {seed}; "
         f"training time in seconds: " + ", ".join(f"{h} {seconds[h]}" for h in heads) + ".",
         "", "| family | head | numbers | NLL | CRPS median | cover 50% | cover 90% | IS 50% | IS 90% | MAE |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for h in heads:
    lines.append(row("**overall**", h, reports[h]["overall"]))
for g in sorted(reports["cauchy"]["groups"]):
    for h in heads:
        if g in reports[h]["groups"]:
            lines.append(row(g, h, reports[h]["groups"][g]))
lines += ["", "The same models' next-token statistics on the held-out sentences (the regression loss shares the backbone "
          "with the classification):", "",
          "| head | next-token accuracy | <NUM> precision | <NUM> recall | L_cls | RMSE |", "|---|---|---|---|---|---|"]
for h in heads:
    t = full[h]["calibration"]["overall"]["tokens"]
    lines.append(f"| {h} | {fmt(t['accuracy'], '.4f')} | {fmt(t['num_precision'], '.4f')} | {fmt(t['num_recall'], '.4f')} | "
                 f"{fmt(full[h]['metrics']['L_cls_mean'])} | {fmt(reports[h]['overall']['rmse'])} |")
text = "\n".join(lines) + "\n"
open(out_md, "w").write(text)
print(text)
PY

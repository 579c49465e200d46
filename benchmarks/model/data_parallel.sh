#!/usr/bin/env bash
# Data-parallel training on this machine: one process with 2 threads against 2 processes with 1
# thread each (mpirun), and one process with 1 thread as the unit of scaling; the same model,
# data and global batch (2 micro-batches of 4 × 128 tokens per step). Prints, for each: tokens/s and seconds per step (medians over the steps after
# the third), the seconds per step spent inside collectives (reduce-scatter, norm, all-gather,
# metrics), the optimiser state per process, minor page faults and system time (/usr/bin/time -v).
#   bash benchmarks/model/data_parallel.sh [BUILD_DIR] [PRESET] [STEPS]     (default: build small 30)
# PRESET: tiny, small or qwen2.5-0.5b (the vocabulary is a 2,000-id BPE trained here).
set -euo pipefail
build=${1:-build}
preset=${2:-small}
steps=${3:-30}
cli=$(realpath "$build/bin/causalqwen")
command -v mpirun >/dev/null || { echo "mpirun not found: apt-get install openmpi-bin"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cli" synth --out "$work/corpus.jsonl" --count 4000 >/dev/null
"$cli" bpe --corpus "$work/corpus.jsonl" --vocab-size 2000 --out "$work/tokenizer.json" >/dev/null
args=(train --preset "$preset" --tokenizer "$work/tokenizer.json" --data "$work/corpus.jsonl" --batch-size 4
      --seq-len 128 --accumulation 2 --steps "$steps" --eval-every 0 --checkpoint-every 0 --lr 1e-3)
timed() {  # timed LOG command...: runs it under /usr/bin/time -v when there is one
  local log=$1
  shift
  if [[ -x /usr/bin/time ]]; then /usr/bin/time -v -o "$log.time" "$@" >"$log" 2>&1; else "$@" >"$log" 2>&1; fi
}
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; preset $preset, $steps steps"
timed "$work/single.log" "$cli" "${args[@]}" --threads 1 --out "$work/single"
timed "$work/one.log" "$cli" "${args[@]}" --threads 2 --out "$work/one"
timed "$work/two.log" mpirun --oversubscribe --allow-run-as-root -np 2 "$cli" "${args[@]}" --threads 1 --out "$work/two"
python3 - "$work" <<'PY'
import json, statistics, sys, re, os
work = sys.argv[1]
def summary(name):
    recs = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
    train = [r for r in recs if r["split"] == "train"][3:]
    med = lambda k: statistics.median(r.get(k, 0.0) for r in train)
    usage = {}
    if os.path.exists(f"{work}/{name}.log.time"):
        text = open(f"{work}/{name}.log.time").read()
        for key, pat in [("faults", r"Minor \(reclaiming a frame\) page faults: (\d+)"), ("sys", r"System time \(seconds\): ([\d.]+)"),
                         ("wall", r"Elapsed .*: ([\d:.]+)"), ("rss", r"Maximum resident set size \(kbytes\): (\d+)")]:
            m = re.search(pat, text)
            usage[key] = m.group(1) if m else "?"
    m = re.search(r"optimiser state ([\d.]+ MiB)", open(f"{work}/{name}.log").read())
    usage["optimizer"] = m.group(1) if m else "?"
    return med("tokens_per_s"), med("seconds"), med("comm_seconds"), train[-1]["L_total"], usage
single, one, two = summary("single"), summary("one"), summary("two")
for label, s in [("1 process x 1 thread  ", single), ("1 process x 2 threads ", one), ("2 processes x 1 thread", two)]:
    u = s[4]
    print(f"{label}: {s[0]:8.1f} tok/s, {s[1]:.3f} s/step, {s[2]:.3f} s/step in communication, "
          f"last loss {s[3]:.4f}; optimiser state {u['optimizer']} per process; minor faults {u.get('faults', '?')}, system {u.get('sys', '?')} s, "
          f"max RSS {u.get('rss', '?')} kB (of the process mpirun reports: the largest)")
print(f"2 processes x 1 thread against 1 process x 2 threads: {two[0] / one[0]:.2f}x tokens/s; "
      f"against 1 process x 1 thread: {two[0] / single[0]:.2f}x (2.00x would be perfect scaling); "
      f"communication {100 * two[2] / two[1]:.1f} % of a step")
PY

#!/bin/sh
# The crash test of `causalqwen train --resume` (a real process, SIGKILL):
#   1. an uninterrupted reference run of 60 steps;
#   2. a run killed by SIGKILL inside its 3rd checkpoint write (CAUSALQWEN_TRAIN_CRASH_IN_CHECKPOINT,
#      a fault hook of the train command: tools/causalqwen/train_fault_hooks.hpp), after which
#      LATEST must still name the 2nd checkpoint;
#   3. four resumes each killed with SIGKILL at a random moment (checkpoint writes slowed to 40 ms
#      by CAUSALQWEN_TRAIN_CHECKPOINT_SLEEP_MS so that some kills land inside one);
#   4. a last resume to the end;
# then every training step's L_total, L_cls_mean, L_reg_eff, reg_mae and grad_norm, and every
# validation record, must equal the reference's bit for bit (compared as JSON text).
# usage: resume_after_kill.sh CAUSALQWEN_BINARY WORK_DIR [more train options, e.g. --optimizer streaming]
set -eu
B=$1
W=$2
shift 2
EXTRA="$*"
rm -rf "$W" && mkdir -p "$W" && cd "$W"
SEED=${CAUSALQWEN_TEST_SEED:-$$}
echo "[seed] resume_after_kill: $SEED (replay with CAUSALQWEN_TEST_SEED=$SEED)"
"$B" synth --out data.jsonl --count 400 --seed 1 > /dev/null
"$B" bpe --corpus data.jsonl --vocab-size 384 --out tok.json > /dev/null
train() { (exec_train "$@"); }
exec_train() {
  exec "$B" train --preset tiny --tokenizer tok.json --data data.jsonl --steps 60 --batch-size 4 --seq-len 32 \
    --checkpoint-every 5 --eval-every 10 --eval-batches 2 --seed 3 --threads 2 --alpha-start 0.5 --alpha-steps 40 $EXTRA "$@"
}
train --out ref > ref.log
set +e
CAUSALQWEN_TRAIN_CRASH_IN_CHECKPOINT=3 train --out run > run0.log 2>&1
rc=$?
set -e
[ "$rc" -eq 137 ] || { echo "expected death by SIGKILL (137), got $rc"; exit 1; }
grep -qx step-00000010 run/checkpoints/LATEST || { echo "LATEST lost: $(cat run/checkpoints/LATEST)"; exit 1; }
echo "killed inside checkpoint 3; LATEST = $(cat run/checkpoints/LATEST)"
i=1
while [ $i -le 4 ]; do
  CAUSALQWEN_TRAIN_CHECKPOINT_SLEEP_MS=40 exec_train --out run --resume > run$i.log 2>&1 &
  pid=$!
  delay=$(awk -v s="$SEED" -v i="$i" 'BEGIN { srand(s + i); printf "%.3f", 0.05 + rand() * 0.5 }')
  sleep "$delay"
  kill -9 $pid 2> /dev/null || true
  wait $pid 2> /dev/null || true
  echo "resume $i killed after ${delay}s; LATEST = $(cat run/checkpoints/LATEST)"
  i=$((i + 1))
done
train --out run --resume > run_last.log
python3 - ref/metrics.jsonl run/metrics.jsonl << 'PY'
import json, sys
def load(p):
    out = []
    for line in open(p):
        r = json.loads(line)
        keys = ["L_total", "L_cls_mean", "L_reg_eff", "reg_mae", "num_accuracy", "mean_P_num"]
        if r["split"] == "train":
            keys += ["grad_norm", "lr", "alpha"]
        out.append((r["split"], r["step"]) + tuple(repr(r[k]) for k in keys))
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
for x, y in zip(a, b):
    if x != y:
        print("DIFFER:", x, y)
        sys.exit(1)
if len(a) != len(b):
    print("DIFFER: lengths", len(a), len(b))
    sys.exit(1)
print(f"RESUME_BITWISE_OK {len(a)} records")
PY

#!/bin/sh
# A 2-process `causalqwen train` whose process 1 is killed (SIGKILL) as step 10 begins must end
# with a non-zero status and a message naming the dead process, leave the checkpoint of step 8
# (the last one) complete, and that checkpoint must resume to the end in one process.
#   kill_one_process.sh "MPIRUN FLAGS" CAUSALQWEN_CLI WORK_DIR
set -u
mpirun=$1
cli=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $1"
  for f in "$work"/*.log; do echo "--- $f"; cat "$f"; done
  exit 1
}
common="--features --hidden 16 --classes 8 --batch-size 4 --seq-len 8 --steps 12 --accumulation 2 --eval-every 0
        --checkpoint-every 4 --threads 1 --out $work/run"
# shellcheck disable=SC2086
CAUSALQWEN_TRAIN_KILL=1:10 $mpirun -np 2 "$cli" train $common >"$work/killed.log" 2>&1
status=$?
[ "$status" -ne 0 ] || fail "the job whose process 1 was killed exited with status 0"
grep -qi "signal 9\|killed" "$work/killed.log" || fail "no message names the killed process"
[ "$(cat "$work/run/checkpoints/LATEST")" = "step-00000008" ] || fail "LATEST is not step-00000008"
# shellcheck disable=SC2086
"$cli" train $common --resume >"$work/resumed.log" 2>&1 || fail "the resume in one process failed"
grep -q "trained steps 8..12" "$work/resumed.log" || fail "the resume did not continue from step 8"
echo "exit status $status; the checkpoint of step 8 resumed in one process to step 12"
echo KILL_ONE_PROCESS_OK

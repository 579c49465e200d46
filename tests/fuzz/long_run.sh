#!/usr/bin/env bash
# The long fuzzing run: every libFuzzer target of a -DCAUSALQWEN_FUZZ=ON build (Clang, with
# AddressSanitizer and UBSan) for SECONDS each, one after the other, over its seed corpus. New
# inputs go to BUILD/tests/fuzz/found_<target>/; a finding stops that target, leaves its crash-*
# file in the current directory, and makes the script exit 1. One input running longer than
# PER_INPUT_TIMEOUT seconds (default 10) is a finding too (libFuzzer's -timeout=; its own default
# of 1200 s would let one slow input eat the run), left as a timeout-* file. Prints one line per
# target. Naming targets runs only those (e.g. again, for one whose run shared the machine).
#   [PER_INPUT_TIMEOUT=S] bash tests/fuzz/long_run.sh BUILD SECONDS [TARGET...]
set -uo pipefail
build=${1:?usage: long_run.sh BUILD SECONDS [TARGET...]}
seconds=${2:?usage: long_run.sh BUILD SECONDS [TARGET...]}
per_input_timeout=${PER_INPUT_TIMEOUT:-10}
if ! [[ $per_input_timeout =~ ^[1-9][0-9]*$ ]]; then
  echo "long_run.sh: PER_INPUT_TIMEOUT must be a whole number of seconds, at least 1, got '$per_input_timeout'" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
targets=(tokenizer_json numbers config_json batch_json jsonl safetensors sharded_index trainer_state checkpoint_dir)
if [[ $# -gt 2 ]]; then targets=("${@:3}"); fi
status=0
echo "per-input timeout ${per_input_timeout} s"
printf '%-16s %10s %12s %8s %8s %8s  %s\n' target seconds executions exec/s cov features result
for t in "${targets[@]}"; do
  exe="$build/tests/fuzz_$t"
  if [[ ! -x $exe ]]; then echo "$exe: not built (cmake --preset fuzz && cmake --build --preset fuzz)" >&2; exit 2; fi
  found="$build/tests/fuzz/found_$t"
  mkdir -p "$found"
  log="$build/tests/fuzz/long_run_$t.log"
  "$exe" -max_total_time="$seconds" -timeout="$per_input_timeout" -print_final_stats=1 "$found" "$here/corpus/$t" >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*$')
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*$')
  result="nothing found"
  if grep -q 'ERROR: libFuzzer: timeout' "$log"; then
    result="FOUND an input slower than ${per_input_timeout} s (see $log)"; status=1
  elif [[ $rc -ne 0 ]]; then
    result="FOUND something (exit $rc, see $log)"; status=1
  fi
  printf '%-16s %10s %12s %8s %8s %8s  %s\n' "$t" "$seconds" "${runs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
exit $status

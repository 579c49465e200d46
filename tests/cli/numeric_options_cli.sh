#!/usr/bin/env bash
# Every numeric option of every subcommand of the causalqwen program, walked with the values
#   0  -1  2^31  2^63  2^64  nan  inf  -inf  1e309
# The options and their ranges come from `causalqwen --list-numeric-options`; the test first
# checks that this list holds every option whose --help shows a numeric type (INT, UINT, FLOAT,
# NUMBER), and that each one's --help line writes its range. Then, on a quick valid command of
# each subcommand:
#   a value outside the range must end with exit status 1 or 2, at most three lines on stderr
#   naming the option, within 20 seconds and without a large allocation;
#   a value inside must end (any exit status but a signal or a sanitizer report) within 120 s,
#   without a large allocation.
# "A large allocation": more than 1 GiB of resident memory (GNU time's maximum RSS); besides,
# without sanitizers the address space is limited to 8 GiB (ulimit -v), and under AddressSanitizer
# (CQ_SANITIZED=1) an allocation above 1 GiB is a sanitizer error.
# "Naming the option": the name as typed, not a longer one it begins (--alpha, not --alpha-start).
#
# Cost: every case is one process of the program (the OpenMP settings it would restart itself
# for are set here, so it does not execute itself twice) under timeout and GNU time, and the
# checks run in bash itself, without a process per check; the cases run JOBS at a time.
#
# usage: numeric_options_cli.sh CAUSALQWEN MODEL_DIR INPUTS_JSON TOKENIZER WORK_DIR [JOBS]
set -u
CLI=$1 MODEL=$2 INPUTS=$3 TOKENIZER=$4 WORK=$5 JOBS=${6:-4}
rm -rf "$WORK" && mkdir -p "$WORK/cases" || exit 1
cd "$WORK" || exit 1
VALUES=(0 -1 2147483648 9223372036854775808 18446744073709551616 nan inf -inf 1e309)
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "GNU time ($TIME) is needed for the maximum RSS"; exit 1; }
RSS_LIMIT_KIB=$((1024 * 1024))
if [ "${CQ_SANITIZED:-0}" = 1 ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_allocation_size_mb=1024:allocator_may_return_null=0:detect_leaks=0"
fi
# the settings the program would otherwise restart itself with (tools/causalqwen/omp_wait.hpp)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000

# --- fixtures: a JSONL corpus with numbers, a BPE tokenizer with <NUM> for train/init ---------------
printf '{"text": "the value is 3 and then 4"}\n{"text": "abc 12 abc 7"}\n{"text": "we saw 5 cats"}\n' > data.jsonl
printf '{"text": "abc 3 abc"}\n{"text": "abc 4"}\n' > eval.jsonl
"$CLI" bpe --corpus data.jsonl --vocab-size 280 --out bpe.json > /dev/null || { echo "bpe fixture failed"; exit 1; }
# a CausalQwen model whose tokenizer is bpe.json (eval checks that they belong together)
"$CLI" train --preset tiny --tokenizer bpe.json --data data.jsonl --steps 1 --batch-size 1 --seq-len 8 --eval-every 0 \
  --threads 1 --out trained > /dev/null || { echo "train fixture failed"; exit 1; }
TRAINED=$WORK/trained/checkpoints/step-00000001

# the quick valid command of each subcommand; OUT is replaced by the case's own directory
declare -A BASE
BASE[bpe]="bpe --corpus data.jsonl --vocab-size 280 --out OUT/tokenizer.json"
BASE[compare-modes]="compare-modes --model $MODEL --tokenizer $TOKENIZER --prompt abc --max-new-tokens 2 --samples 1"
BASE[demo]="demo --out OUT --steps 1 --train-sentences 24 --val-sentences 4 --vocab 270 --hidden 8 --layers 1 --heads 1 --kv-heads 1 --ffn 8 --batch 1 --seq 8 --show 0 --prompts 0 --plain"
BASE[eval]="eval --model $TRAINED --tokenizer bpe.json --data eval.jsonl --seq-len 8 --batch-size 2 --threads 1 --plain"
BASE[forward]="forward --model $MODEL --inputs $INPUTS --out OUT/out.safetensors"
BASE[generate]="generate --model $MODEL --tokenizer $TOKENIZER --prompt abc --max-new-tokens 2"
BASE[init]="init --preset tiny --tokenizer bpe.json --out OUT/model"
BASE[report]="report --model $MODEL --inputs $INPUTS"
BASE[synth]="synth --out OUT/s.jsonl --count 3"
BASE[train]="train --preset tiny --tokenizer bpe.json --data data.jsonl --steps 1 --batch-size 1 --seq-len 4 --eval-every 0 --checkpoint-every 0 --threads 1 --out OUT/run"

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$CLI" --list-numeric-options > options.txt || { echo "--list-numeric-options failed"; exit 1; }
[ -s options.txt ] || { echo "--list-numeric-options printed nothing"; exit 1; }

# --- the list covers every numeric option of every --help -----------------------------------------
subcommands=$("$CLI" --help | awk '/^Subcommands:/ {on = 1; next} on && NF {print $1}')
[ -n "$subcommands" ] || { echo "no subcommand in causalqwen --help"; exit 1; }
for sub in $subcommands; do
  "$CLI" "$sub" --help > "help_$sub.txt" 2>&1 || fail "$sub --help exits $?"
  # option lines: "  -x,--name TYPE ..." or "  --name TYPE ..."; a numeric TYPE is INT, UINT, FLOAT or NUMBER
  grep -E '^ +(-[a-zA-Z],)?--[A-Za-z0-9-]+(,--[A-Za-z0-9-]+)* +(INT|UINT|FLOAT|NUMBER)\b' "help_$sub.txt" |
    sed -E 's/^ +(-[a-zA-Z],)?(--[A-Za-z0-9-]+).*/\2/' |
    while read -r opt; do
      grep -q "^$sub $opt " options.txt || echo "FAIL: $sub $opt shows a numeric type in --help but is not in --list-numeric-options"
    done >> help_failures.txt
  # a subcommand without a quick valid command here is walked with the option alone: the value
  # is checked while parsing, before the missing required options are reported
  [ -n "${BASE[$sub]+x}" ] || { grep -q "^$sub " options.txt && echo "note: $sub has no base command here: its options are given alone"; BASE[$sub]="$sub"; }
done
while read -r sub opt kind low high ends; do
  echo " $subcommands " | tr '\n' ' ' | grep -q " $sub " || fail "$sub (from --list-numeric-options) is not a subcommand"
  # the help entry (its line and the continuation lines CLI11 wraps it onto) must write the range
  line=$(awk -v opt="$opt" '
    found && /^ +-/ {exit}
    found {print; next}
    /^ +-/ { n = split($1, names, ","); for (k = 1; k <= n; k++) if (names[k] == opt) found = 1 }
    found {print}' "help_$sub.txt" | tr -s ' \n' ' ')
  [[ "$line" == *"in ["* || "$line" == *"in ("* ]] || fail "$sub $opt: its --help line writes no range: $line"
  [ ${#line} -lt 400 ] || fail "$sub $opt: its --help line is ${#line} characters long"
done < options.txt
if [ -s help_failures.txt ]; then cat help_failures.txt; failures=$((failures + $(wc -l < help_failures.txt))); fi

# --- the cases: every option with every value, and whether the value lies in its range --------
# int: an integer within [low, high] (int64 ends; 2^63 and 2^64 lie above every end);
# real: finite, and within the ends (open or closed: ends like "[)")
awk -v values="${VALUES[*]}" '
  BEGIN { nv = split(values, v, " "); n = 0 }
  {
    sub_ = $1; opt = $2; kind = $3; lo = $4; hi = $5; e = $6
    for (k = 1; k <= nv; k++) {
      x = v[k]; inside = 0
      if (kind == "int") {
        if (x ~ /^-?[0-9]+$/ && x != "9223372036854775808" && x != "18446744073709551616")
          inside = (x + 0 >= lo + 0 && x + 0 <= hi + 0)
      } else if (x != "nan" && x != "inf" && x != "-inf" && x != "1e309") {
        l = (lo == "-inf") ? -1e308 * 10 : lo + 0; h = (hi == "inf") ? 1e308 * 10 : hi + 0; y = x + 0
        ok_lo = (substr(e, 1, 1) == "(") ? y > l : y >= l
        ok_hi = (substr(e, 2, 1) == ")") ? y < h : y <= h
        inside = ok_lo && ok_hi
      }
      print ++n, sub_, opt, x, inside ? "in" : "out"
    }
  }' options.txt > cases.txt || { echo "the case list could not be made"; exit 1; }

# --- one case: its verdict in results/N, its files kept only when it fails -------------------------
mkdir -p results
run_case() {  # n sub opt value expect(in|out)
  local n=$1 sub=$2 opt=$3 value=$4 expect=$5 files="$WORK/cases/$1" dir="$WORK/cases/$1.out"
  local base=(${BASE[$sub]//OUT/$dir}) args=() i
  for ((i = 0; i < ${#base[@]}; i++)); do  # the option under test replaces the base command's
    if [ "${base[$i]}" = "$opt" ]; then i=$((i + 1)); continue; fi
    args+=("${base[$i]}")
  done
  local limit=20 what="$sub $opt=$value (outside its range)"
  if [ "$expect" = in ]; then limit=120 what="$sub $opt=$value (inside its range)"; mkdir -p "$dir"; fi
  # this function runs in a background subshell of its own: the limit applies to it alone
  [ "${CQ_SANITIZED:-0}" = 1 ] || ulimit -v $((8 * 1024 * 1024))
  timeout -s KILL "$limit" "$TIME" -f "%e %M" -o "$files.time" "$CLI" "${args[@]}" "$opt=$value" \
    > "$files.stdout" 2> "$files.stderr"
  local rc=$? rss=0 seconds=? a b line lines=0 first="" err=""
  while read -r a b; do seconds=$a rss=$b; done < "$files.time"  # its last line: "%e %M"
  while IFS= read -r line || [ -n "$line" ]; do
    [[ "$line" == "Command exited with non-zero status"* || -z "$line" ]] && continue
    lines=$((lines + 1)); [ -z "$first" ] && first=$line
    err+="$line "
  done < "$files.stderr"
  local result=ok named='(^|[^A-Za-z0-9-])'"$opt"'([^A-Za-z0-9-]|$)'
  if [ "$rc" -eq 137 ]; then result="killed after ${limit} s (a hang?)"
  elif [[ "$err" =~ AddressSanitizer|runtime\ error:|LeakSanitizer ]]; then result="sanitizer report: ${err:0:300}"
  elif [ "$rc" -gt 128 ]; then result="killed by signal $((rc - 128))"
  elif [[ "$rss" =~ ^[0-9]+$ ]] && [ "$rss" -gt "$RSS_LIMIT_KIB" ]; then result="maximum RSS ${rss} KiB"
  elif [[ "$err" =~ bad_alloc|cannot\ allocate ]]; then result="an allocation failed: $first"
  elif [ "$expect" = out ]; then
    if [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then result="exit status $rc (expected 1 or 2)"
    elif [ "$lines" -gt 3 ]; then result="$lines lines on stderr"
    elif ! [[ "$err" =~ $named ]]; then result="the message does not name $opt: $first"
    fi
  fi
  if [ "$result" = ok ]; then
    echo "ok $what: exit $rc in ${seconds} s, ${first:0:160}" > "results/$n"
    rm -rf "$files.time" "$files.stdout" "$files.stderr" "$dir"
  else
    echo "FAIL $what: $result; exit $rc; stderr: ${err:0:300}" > "results/$n"
  fi
}

cases=0
running=0
while read -r n sub opt value expect; do
  if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
  run_case "$n" "$sub" "$opt" "$value" "$expect" &
  running=$((running + 1))
  cases=$((cases + 1))
done < cases.txt
wait

options=$(wc -l < options.txt)
for f in results/*; do
  read -r verdict rest < "$f"
  if [ "$verdict" != ok ]; then cat "$f"; failures=$((failures + 1)); fi
done
[ "$(ls results | wc -l)" -eq "$cases" ] || fail "$cases cases, but $(ls results | wc -l) verdicts"
in_range=$(grep -c ' in$' cases.txt)
echo "numeric options: $options options of $(echo $subcommands | wc -w) subcommands, $cases cases ($in_range in range), $failures failures"
if [ -n "${VERBOSE:-}" ]; then cat results/*; fi
if [ "$failures" -gt 0 ]; then exit 1; fi
echo "NUMERIC_OPTIONS_OK"

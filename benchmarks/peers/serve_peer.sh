#!/usr/bin/env bash
# The same streamed load against `causalqwen serve` and llama.cpp's llama-server, in one run, on
# the Qwen2.5-0.5B shape with random weights, on the CPU with 2 threads and 8 decoding slots.
#
# llama.cpp is built outside this repository, from its public source tree given as the first
# argument, into WORK_DIR/build (as benchmarks/peers/llama_cpp_peer.sh does; only llama-server and
# llama-quantize; skipped when both binaries exist). Then:
#   1. model files, all in WORK_DIR (reused when present): benchmarks/peers/llama_cpp_gguf.py writes
#      the random-weight GGUFs (BF16, and F32 for llama-quantize's Q8_0); for ours, a
#      tokenizer.json with the GGUF's vocabulary (the 256 byte symbols, the same two merges,
#      placeholders up to id 151642, Qwen2's 22 special tokens from 151643; the same pre-tokenizer
#      regex), so that both servers split the prompt alike and our CausalQwen head has Qwen2's
#      151666 classes, and `causalqwen init --preset qwen2.5-0.5b` with it;
#   2. for each pair of weight types (PAIRS, default "bf16:bf16 int8:q8_0", ours:theirs), both
#      servers are started on loopback, each under /usr/bin/time -v (its page faults and peak
#      memory), ours `serve --weights T --threads 2 --parallel 8 --ctx-size CTX`, theirs
#      `llama-server -t 2 --parallel 8 --ctx-size 8×CTX` (llama-server splits its context among
#      the slots), and benchmarks/model/bench_serve.mjs runs the same load against each (N = COUNTS
#      concurrent streams of the same prompt text, TOKENS tokens each; llama-server with
#      ignore_eos and temperature 0, so that it writes TOKENS tokens per stream, as ours does unless
#      its greedy choice is <|endoftext|>: the bench counts each stream's tokens from the usage
#      of the same request sent whole), alternating the two servers ROUNDS times (ours first in
#      odd rounds, theirs first in even ones), so that both see the same minutes of a shared machine;
#      the load average is read before and after every bench;
#   3. one table per pair: each side's aggregate tokens/s, TTFT p50/p99 and inter-token gap
#      p50/p99, the median over the rounds, and ours over theirs.
# Differences to keep in mind: ours ends each step in the CausalQwen head (151666 classes, one
# row of W_cls each, and the <NUM> regression), theirs in the tied LM head (151936 rows); ours
# reads "12" as one <NUM> token, theirs as two digits, so the prompt token counts differ (both
# printed, as each server reports them); both keep prompts in their slots (our prefix cache,
# llama-server's cache_prompt), and the bench's whole requests leave the prompt there first.
# Both servers run with OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 (what the causalqwen program
# sets for itself); ours also with OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512F.
# Raw outputs are kept in WORK_DIR/serve-peer (bench-*.json, bench-*.txt, time-*.txt, load.txt).
#
# usage: bash benchmarks/peers/serve_peer.sh LLAMA_SRC_DIR [WORK_DIR=/tmp/llama-peer]
#   ROUNDS=N (default 2), TOKENS=N (default 32), COUNTS=1,4,8,16, CTX=N (ours per slot, default 256)
#   PAIRS="bf16:bf16 int8:q8_0"   ours:llama.cpp weight types, in this order
#   PYTHON=...   Python with numpy (default /usr/bin/python3)
set -euo pipefail
SCRIPT=serve_peer.sh
source "$(dirname "$0")/llama_cpp_common.sh"

[[ $# -ge 1 && $# -le 2 ]] || die "usage: bash benchmarks/peers/serve_peer.sh LLAMA_SRC_DIR [WORK_DIR=/tmp/llama-peer]"
LLAMA_SRC=$(cd "$1" 2>/dev/null && pwd) || die "llama.cpp source directory '$1' not found"
WORK_DIR=${2:-/tmp/llama-peer}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
CLI=$REPO/build/bin/causalqwen
BENCH=$REPO/benchmarks/model/bench_serve.mjs
GGUF_SCRIPT=$REPO/benchmarks/peers/llama_cpp_gguf.py
THREADS=2
PARALLEL=8
ROUNDS=${ROUNDS:-2}
TOKENS=${TOKENS:-32}
COUNTS=${COUNTS:-1,4,8,16}
CTX=${CTX:-256}
PAIRS=${PAIRS:-"bf16:bf16 int8:q8_0"}
PROMPT="The total is 12 and the price is"

# ---- preconditions, checked before anything slow ------------------------------------------
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a whole number ≥ 1, got '$ROUNDS'"
[[ $TOKENS =~ ^[1-9][0-9]*$ ]] || die "TOKENS must be a whole number ≥ 1, got '$TOKENS'"
[[ $CTX =~ ^[1-9][0-9]*$ ]] || die "CTX must be a whole number ≥ 1, got '$CTX'"
[[ $COUNTS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "COUNTS must be whole numbers separated by commas, got '$COUNTS'"
for p in $PAIRS; do
  [[ $p =~ ^(f32|bf16|int8):(f32|bf16|q8_0)$ ]] || die "PAIRS: '$p' is not ours:theirs (ours f32|bf16|int8, theirs f32|bf16|q8_0)"
done
llama_check_source "$LLAMA_SRC"
[[ -x $CLI ]] || die "$CLI not found: build this repository's program first (target causalqwen_cli)"
"$CLI" serve --help >/dev/null 2>&1 || die "$CLI has no serve subcommand (configure with the server's dependencies)"
command -v node >/dev/null || die "node not found on PATH (bench_serve.mjs needs Node 18 or later)"
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (Debian: apt-get install time)"
llama_check_python "$PYTHON"
mkdir -p "$WORK_DIR/serve-peer" || die "cannot create $WORK_DIR/serve-peer"
WORK_DIR=$(cd "$WORK_DIR" && pwd)
OUT=$WORK_DIR/serve-peer

# ---- llama.cpp: llama-server and llama-quantize, out of tree ------------------------------
BIN=$WORK_DIR/build/bin
llama_build "$LLAMA_SRC" "$WORK_DIR" llama-server llama-quantize

# ---- 1. model files -------------------------------------------------------------------------
LOG_DIR=$OUT
for p in $PAIRS; do llama_gguf "${p#*:}" >/dev/null; done

OURS_MODEL=$WORK_DIR/causalqwen-0.5b-qwen2-vocab
if [[ -s $OURS_MODEL/model.safetensors && -s $OURS_MODEL/tokenizer.json ]]; then
  echo "== using existing $OURS_MODEL"
else
  echo "== writing $OURS_MODEL (causalqwen init --preset qwen2.5-0.5b, the GGUF's vocabulary as tokenizer.json)"
  "$PYTHON" - "$GGUF_SCRIPT" "$OUT/tokenizer-qwen2-vocab.json" <<'EOF'
import importlib.util, json, sys

spec = importlib.util.spec_from_file_location("llama_cpp_gguf", sys.argv[1])
g = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g)
merges = ["Ġ t", "i n"]  # the GGUF's two merges, in its order
tokens = g.bytes_to_unicode() + [m.replace(" ", "") for m in merges]
tokens += [f"tok{i}" for i in range(len(tokens), g.EOT_ID)]
specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(19)]
regex = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
         "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
tok = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": g.EOT_ID + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True} for i, s in enumerate(specials)],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}, byte_level]},
    "post_processor": byte_level, "decoder": byte_level,
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
              "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
              "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
}
json.dump(tok, open(sys.argv[2], "w"), ensure_ascii=False)
EOF
  rm -rf "$OURS_MODEL.part"
  "$CLI" init --preset qwen2.5-0.5b --tokenizer "$OUT/tokenizer-qwen2-vocab.json" --out "$OURS_MODEL.part" ||
    die "causalqwen init failed"
  rm -rf "$OURS_MODEL"
  mv "$OURS_MODEL.part" "$OURS_MODEL"
fi

# ---- 2. the servers, and the load alternating between them ---------------------------------
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
if grep -qw avx512f /proc/cpuinfo; then OURS_ENV=(OPENBLAS_CORETYPE=SkylakeX); else OURS_ENV=(-u OPENBLAS_CORETYPE); fi
COMMON_ENV=(OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000)
TIME_PIDS=()
stop_servers() {  # SIGTERM to each server (the child of its /usr/bin/time), then wait for time's report
  local t child
  for t in "${TIME_PIDS[@]}"; do
    child=$(pgrep -P "$t" || true)
    [[ -n $child ]] && kill -TERM "$child" 2>/dev/null || true
  done
  for t in "${TIME_PIDS[@]}"; do wait "$t" 2>/dev/null || true; done
  TIME_PIDS=()
}
trap stop_servers EXIT
wait_health() {  # $1 URL, $2 log file
  for _ in $(seq 1 1200); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  tail -n 20 "$2" >&2
  die "no answer from $1/health within 300 s (log: $2)"
}
command -v curl >/dev/null || die "curl not found on PATH"
: >"$OUT/load.txt"
for p in $PAIRS; do
  ours_t=${p%%:*} llama_t=${p#*:}
  ours_port=$(free_port) llama_port=$(free_port)
  [[ $ours_port != "$llama_port" ]] || llama_port=$(free_port)
  echo "== pair $ours_t : $llama_t — ours on port $ours_port, llama-server on port $llama_port"
  env "${OURS_ENV[@]}" "${COMMON_ENV[@]}" /usr/bin/time -v -o "$OUT/time-ours-$ours_t.txt" \
    "$CLI" serve --model "$OURS_MODEL" --weights "$ours_t" --threads "$THREADS" --parallel "$PARALLEL" \
    --ctx-size "$CTX" --port "$ours_port" >"$OUT/server-ours-$ours_t.log" 2>&1 &
  TIME_PIDS+=($!)
  env "${COMMON_ENV[@]}" /usr/bin/time -v -o "$OUT/time-llama-$llama_t.txt" \
    "$BIN/llama-server" -m "$WORK_DIR/qwen2-0.5b-random-$llama_t.gguf" -t "$THREADS" --parallel "$PARALLEL" \
    --ctx-size $((CTX * PARALLEL)) --host 127.0.0.1 --port "$llama_port" >"$OUT/server-llama-$llama_t.log" 2>&1 &
  TIME_PIDS+=($!)
  wait_health "http://127.0.0.1:$ours_port" "$OUT/server-ours-$ours_t.log"
  wait_health "http://127.0.0.1:$llama_port" "$OUT/server-llama-$llama_t.log"
  for ((r = 1; r <= ROUNDS; ++r)); do
    if ((r % 2)); then order="ours llama"; else order="llama ours"; fi
    for side in $order; do
      if [[ $side == ours ]]; then
        url=http://127.0.0.1:$ours_port extra='{}' t=$ours_t
      else
        url=http://127.0.0.1:$llama_port extra='{"ignore_eos": true, "temperature": 0}' t=$llama_t
      fi
      echo "== round $r of $ROUNDS: $side $t ($(cut -d' ' -f1-3 /proc/loadavg))"
      echo "$side $t $r before $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load.txt"
      node "$BENCH" --base "$url" --n "$COUNTS" --tokens "$TOKENS" --prompt "$PROMPT" --extra "$extra" \
        --json "$OUT/bench-$side-$t-$r.json" | tee "$OUT/bench-$side-$t-$r.txt" ||
        die "bench_serve.mjs failed against $side ($url; server log: $OUT/server-$side-$t.log)"
      echo "$side $t $r after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load.txt"
    done
  done
  stop_servers
done

# ---- 3. the tables ------------------------------------------------------------------------
COMMIT=$(git -C "$LLAMA_SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo
"$PYTHON" - "$OUT" "$ROUNDS" "$PAIRS" "$COMMIT" "$(date -u '+%Y-%m-%d %H:%M UTC')" <<'EOF'
import json, os, re, statistics, sys

out, rounds, pairs, commit, date = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4], sys.argv[5]

def q(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")

def faults(side, t):
    """The server's page faults, peak memory and CPU time, from its /usr/bin/time -v report."""
    try:
        text = open(os.path.join(out, f"time-{side}-{t}.txt")).read()
        get = lambda key: re.search(rf"{key}[^:]*: ([0-9.]+)", text)[1]
        return (f"page faults major {get('Major')}, minor {get('Minor')}, max RSS {int(get('Maximum resident set size')) // 1024} MB, "
                f"CPU {get('User time')} s user + {get('System time')} s system")
    except (OSError, TypeError):
        return "no /usr/bin/time report"

print(f"causalqwen serve vs llama.cpp {commit} llama-server, {date}")
loads = [float(ln.split()[4]) for ln in open(os.path.join(out, "load.txt"))]
print(f"1-minute load average read around the benches: {min(loads):.2f} … {max(loads):.2f} (raw: {out}/load.txt)")
for pair in pairs:
    ours_t, llama_t = pair.split(":")
    runs = {side: [json.load(open(os.path.join(out, f"bench-{side}-{t}-{r}.json"))) for r in range(1, rounds + 1)]
            for side, t in (("ours", ours_t), ("llama", llama_t))}
    print(f"\nours {ours_t} against llama-server {llama_t}: prompt tokens ours {runs['ours'][0]['prompt_tokens']}, "
          f"llama-server {runs['llama'][0]['prompt_tokens']}; completion tokens per stream ours "
          f"{sorted(set(runs['ours'][0]['completion_tokens'].values()))}, llama-server "
          f"{sorted(set(runs['llama'][0]['completion_tokens'].values()))}")
    print(f"  ours: {faults('ours', ours_t)}; llama-server: {faults('llama', llama_t)}")
    hdr = (f"{'N':>3} {'round':>6} | {'ours tok/s':>10} {'TTFT p50':>8} {'p99':>6} {'gap p50':>7} {'p99':>6} | "
           f"{'llama tok/s':>11} {'TTFT p50':>8} {'p99':>6} {'gap p50':>7} {'p99':>6} | {'tok/s ours/llama':>16}")
    print(hdr)
    print("-" * len(hdr))
    for i, row in enumerate(runs["ours"][0]["rows"]):
        n, ratios = row["n"], []
        for r in range(rounds):
            o, l = runs["ours"][r]["rows"][i], runs["llama"][r]["rows"][i]
            ratios.append(o["tokens_per_s"] / l["tokens_per_s"])
            cells = lambda x: (f"{x['tokens_per_s']:>{10 if x is o else 11}.1f} {q(x['ttft_ms'], .5):>8.0f} {q(x['ttft_ms'], .99):>6.0f} "
                               f"{q(x['gap_ms'], .5):>7.0f} {q(x['gap_ms'], .99):>6.0f}")
            print(f"{n:>3} {r + 1:>6} | {cells(o)} | {cells(l)} | {ratios[-1]:>15.2f}x")
        if rounds > 1:
            med = lambda side: statistics.median(runs[side][r]["rows"][i]["tokens_per_s"] for r in range(rounds))
            print(f"{n:>3} {'median':>6} | {med('ours'):>10.1f} {'':>8} {'':>6} {'':>7} {'':>6} | {med('llama'):>11.1f} "
                  f"{'':>8} {'':>6} {'':>7} {'':>6} | {statistics.median(ratios):>15.2f}x")
EOF

#!/usr/bin/env bash
# Peer benchmark against llama.cpp on the Qwen2.5-0.5B shape, on the CPU with 2 threads.
#
# llama.cpp is built outside this repository, from its public source tree given as the first
# argument, into WORK_DIR/build (CMake, Release, GGML_NATIVE=ON, GGML_OPENMP=ON, LLAMA_CURL=OFF;
# only llama-bench and llama-quantize; skipped when both binaries already exist). Then:
#   1. benchmarks/peers/llama_cpp_gguf.py writes random-weight GGUFs of the Qwen2.5-0.5B shape
#      (vocab 151936, hidden 896, 24 layers, 14/2 heads, FFN 4864, tied output) in F32 and BF16,
#      and llama-quantize makes a Q8_0 file from the F32 one (files are reused when present);
#   2. llama-bench -p 128,512 -n 0 and then -p 0 -n 64 (-r 3 -t 2 -o json) measure prefill
#      (pp128, pp512) and decode (tg64) tokens/s for each of F32, BF16 and Q8_0; the decode run is
#      bracketed by this repository's bandwidth probe (build/bin/bench_decode_stream --probe);
#   3. build/bin/bench_generate 2 24 --no-torch (this repository's benchmark, built beforehand)
#      measures ours: prefill at S = 128 and 512 and decode, with f32, bf16 and int8 weights;
#   4. one table compares them: llama.cpp's mean tokens/s over the 3 repetitions (avg_ts)
#      next to ours and ours/llama.cpp, type by type (F32 with our f32, BF16 with our bf16, Q8_0
#      with our int8). Our bf16 prefill runs bf16 products, and so does our int8 prefill (its q
#      widened to bf16, each row's sum times its scale) where the CPU has AVX512-BF16; elsewhere
#      int8 prefill runs float GEMMs over the rounded float weights. A second table puts each
#      side's decode GB/s (llama.cpp: tokens/s × its GGUF file's size) over the probes that
#      bracketed it, and the ratio of the two sides at equal bandwidth: the memory of a shared
#      machine changes speed between minutes, and the sides run minutes apart.
#   5. decode once more, the two sides alternating in the same minutes (ROUNDS rounds, default 3:
#      for each type, llama-bench -p 0 -n 64 -r 1, then bench_generate --only TYPE --decode-only),
#      llama.cpp's decode bracketed by the probe as in step 3, and a third table with each round's
#      tokens/s, each side's probe and ratio, the median ratio per type, and the median over the
#      rounds whose two probes agree within 10 % (both sides in a minute of the same memory speed:
#      on these machines the memory switches between about 45 and 80 GB/s from one minute to the
#      next, and decode is bound by it).
#   6. prefill S = 512 once more, the two sides alternating in the same minutes (PREFILL_ROUNDS
#      rounds, default 3: for each type, llama-bench -p 512 -n 0 -r 1, then bench_generate --only
#      TYPE --prefill 512 --prefill-only), and a fourth table with each round's tokens/s, the
#      ratio, our fraction of the multiply-add peak that bench_generate measured in the same
#      process, and the median ratio per type: the CPU's speed, too, moves between minutes, and
#      a ratio of two runs minutes apart moves with it.
# Differences to keep in mind: our decode is measured after a 128-token prompt and includes
# the CausalQwen head over 151666 classes; llama.cpp's tg64 starts from an empty context and
# ends in the tied LM head over the 151936-token vocabulary.
# Both sides run with OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 (what the causalqwen program
# sets for itself: a 0.1 ms spin before an idle OpenMP thread sleeps; llama.cpp keeps its threads
# in one parallel region per graph and spins on its own barriers, so it hardly notices); ours
# also with OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512F, and elsewhere with
# OPENBLAS_CORETYPE unset, so that OpenBLAS picks its own kernels for the CPU (a forced SkylakeX
# would run AVX-512 instructions there).
# Raw outputs are kept in WORK_DIR (llama-bench-*.json, ours.txt, peer-results.json).
#
# usage: bash benchmarks/peers/llama_cpp_peer.sh LLAMA_SRC_DIR [WORK_DIR=/tmp/llama-peer]
#   LLAMA_COMMIT=...  names the llama.cpp commit when LLAMA_SRC_DIR is not a git checkout
#   ROUNDS=N          alternating decode rounds (step 5; 0 skips it)
#   PREFILL_ROUNDS=N  alternating prefill rounds (step 6; default 3; 0 skips it)
#   PYTHON=...        Python with numpy (default /usr/bin/python3)
set -euo pipefail
SCRIPT=llama_cpp_peer.sh
source "$(dirname "$0")/llama_cpp_common.sh"

[[ $# -ge 1 && $# -le 2 ]] || die "usage: bash benchmarks/peers/llama_cpp_peer.sh LLAMA_SRC_DIR [WORK_DIR=/tmp/llama-peer]"
LLAMA_SRC=$(cd "$1" 2>/dev/null && pwd) || die "llama.cpp source directory '$1' not found"
WORK_DIR=${2:-/tmp/llama-peer}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
OURS_BIN=$REPO/build/bin/bench_generate
GGUF_SCRIPT=$REPO/benchmarks/peers/llama_cpp_gguf.py
THREADS=2

# ---- preconditions, checked before anything slow ------------------------------------------
ROUNDS=${ROUNDS:-3}
PREFILL_ROUNDS=${PREFILL_ROUNDS:-3}
[[ $ROUNDS =~ ^[0-9]+$ ]] || die "ROUNDS must be a whole number, got '$ROUNDS'"
[[ $PREFILL_ROUNDS =~ ^[0-9]+$ ]] || die "PREFILL_ROUNDS must be a whole number, got '$PREFILL_ROUNDS'"
llama_check_source "$LLAMA_SRC"
[[ -f $GGUF_SCRIPT ]] || die "$GGUF_SCRIPT not found"
command -v cmake >/dev/null || die "cmake not found on PATH"
llama_check_python "$PYTHON"
[[ -x $OURS_BIN ]] || die "$OURS_BIN not found: build this repository's benchmarks first (target bench_generate)"
mkdir -p "$WORK_DIR" || die "cannot create $WORK_DIR"
WORK_DIR=$(cd "$WORK_DIR" && pwd)

# ---- 1. build llama-bench and llama-quantize out of tree ----------------------------------
BIN=$WORK_DIR/build/bin
llama_build "$LLAMA_SRC" "$WORK_DIR" llama-bench llama-quantize

# ---- 2. model files ---------------------------------------------------------------------
LOG_DIR=$WORK_DIR
for t in f32 bf16 q8_0; do llama_gguf "$t" >/dev/null; done

# ---- 3. llama-bench ---------------------------------------------------------------------
# prefill and decode in two invocations; the decode one bracketed by our bandwidth probe
# (bench_decode_stream --probe), whose mean the table divides decode's GB/s by: the memory of a
# shared machine changes speed between minutes, and bench_generate brackets our decode likewise
PROBE_BIN=$REPO/build/bin/bench_decode_stream
[[ -x $PROBE_BIN ]] || die "$PROBE_BIN not found: build this repository's benchmarks first (target bench_decode_stream)"
for t in f32 bf16 q8_0; do
  model=$WORK_DIR/qwen2-0.5b-random-$t.gguf
  for part in pp tg; do
    json=$WORK_DIR/llama-bench-$t-$part.json
    if [[ $part == pp ]]; then args=(-p 128,512 -n 0); else args=(-p 0 -n 64); fi
    echo "== llama-bench $t ${args[*]} (3 repetitions, $THREADS threads)"
    [[ $part == tg ]] && "$PROBE_BIN" --probe "$THREADS" >"$WORK_DIR/probe-$t.txt"
    OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 "$BIN/llama-bench" -m "$model" "${args[@]}" -r 3 -t "$THREADS" -o json \
      >"$json.part" 2>"$WORK_DIR/llama-bench-$t.log" ||
      { tail -n 20 "$WORK_DIR/llama-bench-$t.log" >&2; die "llama-bench failed on $model (log: $WORK_DIR/llama-bench-$t.log)"; }
    [[ $part == tg ]] && "$PROBE_BIN" --probe "$THREADS" >>"$WORK_DIR/probe-$t.txt"
    mv "$json.part" "$json"
  done
done

# ---- 4. ours ------------------------------------------------------------------------------
# OpenBLAS's AVX-512 kernels where the CPU has AVX-512F; elsewhere the ones OpenBLAS picks itself
if grep -qw avx512f /proc/cpuinfo; then OURS_ENV=(OPENBLAS_CORETYPE=SkylakeX); else OURS_ENV=(-u OPENBLAS_CORETYPE); fi
OURS_ENV+=(OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000)
echo "== ours: build/bin/bench_generate $THREADS 24 --no-torch (output: $WORK_DIR/ours.txt)"
(cd "$REPO" && env "${OURS_ENV[@]}" build/bin/bench_generate "$THREADS" 24 --no-torch) \
  >"$WORK_DIR/ours.txt" 2>&1 || { tail -n 20 "$WORK_DIR/ours.txt" >&2; die "bench_generate failed (output: $WORK_DIR/ours.txt)"; }
cat "$WORK_DIR/ours.txt"

# ---- 5. decode, alternating ----------------------------------------------------------------
rm -f "$WORK_DIR"/alt-*
for ((r = 1; r <= ROUNDS; ++r)); do
  for t in f32 bf16 q8_0; do
    ours_t=$t; [[ $t == q8_0 ]] && ours_t=int8
    echo "== alternating decode, round $r of $ROUNDS: llama.cpp $t tg64, then ours $ours_t"
    "$PROBE_BIN" --probe "$THREADS" >"$WORK_DIR/alt-probe-$t-$r.txt"
    OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 "$BIN/llama-bench" -m "$WORK_DIR/qwen2-0.5b-random-$t.gguf" -p 0 -n 64 -r 1 \
      -t "$THREADS" -o json >"$WORK_DIR/alt-llama-$t-$r.json" 2>>"$WORK_DIR/llama-bench-$t.log" ||
      die "llama-bench failed on $t in round $r (log: $WORK_DIR/llama-bench-$t.log)"
    "$PROBE_BIN" --probe "$THREADS" >>"$WORK_DIR/alt-probe-$t-$r.txt"
    (cd "$REPO" && env "${OURS_ENV[@]}" \
      build/bin/bench_generate "$THREADS" 24 --no-torch --only "$ours_t" --decode-only) >"$WORK_DIR/alt-ours-$t-$r.txt" 2>&1 ||
      { tail -n 20 "$WORK_DIR/alt-ours-$t-$r.txt" >&2; die "bench_generate failed (output: $WORK_DIR/alt-ours-$t-$r.txt)"; }
  done
done

# ---- 6. prefill, alternating ---------------------------------------------------------------
for ((r = 1; r <= PREFILL_ROUNDS; ++r)); do
  for t in f32 bf16 q8_0; do
    ours_t=$t; [[ $t == q8_0 ]] && ours_t=int8
    echo "== alternating prefill, round $r of $PREFILL_ROUNDS: llama.cpp $t pp512, then ours $ours_t"
    OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 "$BIN/llama-bench" -m "$WORK_DIR/qwen2-0.5b-random-$t.gguf" -p 512 -n 0 -r 1 \
      -t "$THREADS" -o json >"$WORK_DIR/alt-pp-llama-$t-$r.json" 2>>"$WORK_DIR/llama-bench-$t.log" ||
      die "llama-bench failed on $t pp512 in round $r (log: $WORK_DIR/llama-bench-$t.log)"
    (cd "$REPO" && env "${OURS_ENV[@]}" \
      build/bin/bench_generate "$THREADS" 3 --no-torch --only "$ours_t" --prefill 512 --prefill-only) \
      >"$WORK_DIR/alt-pp-ours-$t-$r.txt" 2>&1 ||
      { tail -n 20 "$WORK_DIR/alt-pp-ours-$t-$r.txt" >&2; die "bench_generate failed (output: $WORK_DIR/alt-pp-ours-$t-$r.txt)"; }
  done
done

# ---- 7. the tables ------------------------------------------------------------------------
COMMIT=${LLAMA_COMMIT:-$(git -C "$LLAMA_SRC" rev-parse --short HEAD 2>/dev/null || true)}
echo
"$PYTHON" - "$WORK_DIR" "$COMMIT" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$THREADS" "$ROUNDS" "$PREFILL_ROUNDS" <<'EOF'
import json, os, re, statistics, sys

work, commit, date, threads, rounds, prefill_rounds = sys.argv[1:7]
rounds, prefill_rounds = int(rounds), int(prefill_rounds)

def die(msg):
    sys.exit(f"llama_cpp_peer.sh: error: {msg}")

def read_probes(path):
    """The GB/s figures of a probe file (one per line; the probe's line of thread settings skipped)."""
    return [float(line) for line in open(path) if line.strip() and not line.startswith("thread settings")]

# llama.cpp: mean tokens/s of the repetitions per test
llama, info, llama_probe, gguf_bytes = {}, {}, {}, {}
for t in ("f32", "bf16", "q8_0"):
    runs = []
    for part in ("pp", "tg"):
        path = os.path.join(work, f"llama-bench-{t}-{part}.json")
        try:
            runs += json.load(open(path))
        except (OSError, ValueError) as e:
            die(f"cannot read {path}: {e}")
    probe_path = os.path.join(work, f"probe-{t}.txt")
    try:
        probes = read_probes(probe_path)
    except (OSError, ValueError) as e:
        die(f"cannot read {probe_path}: {e}")
    if len(probes) != 2:
        die(f"{probe_path}: expected the probe before and after llama-bench's decode, got {probes}")
    llama_probe[t] = sum(probes) / 2
    gguf_bytes[t] = os.path.getsize(os.path.join(work, f"qwen2-0.5b-random-{t}.gguf"))
    for r in runs:
        if r["n_prompt"] > 0 and r["n_gen"] == 0:
            llama[(t, f"pp{r['n_prompt']}")] = r["avg_ts"]
        elif r["n_gen"] > 0 and r["n_prompt"] == 0:
            llama[(t, f"tg{r['n_gen']}")] = r["avg_ts"]
        info = r

# ours: "prefill TYPE S = N   <ours tok/s> ..." rows, and the final table "decode GB/token tok/s ..."
# whose rows start with the weight type (the tok/s column is located by its header)
def read_ours(path):
    """bench_generate's rows: prefill tok/s per type and S, and the decode table's tok/s, GB/token, probe."""
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        die(f"cannot read {path}: {e}")
    ours = {}
    for ln in lines:
        m = re.match(r"^prefill (f32|bf16|int8) S = (\d+)\s+([0-9.]+)", ln)
        if m:
            ours[f"pp{m.group(2)}_{m.group(1)}"] = float(m.group(3))
    col = None
    for ln in lines:
        f = ln.split()
        if f and f[0] == "decode" and "tok/s" in f and "GB/token" in f:
            col = f.index("tok/s")
            gb_col = f.index("GB/token")
            probe_col = f.index("probe") if "probe" in f else None
        elif f and f[0] == "prefill" and "tok/s" in f:  # the prefill table after it: not decode rows
            col = None
        elif col is not None and f and f[0] in ("f32", "bf16", "int8") and len(f) > col:
            ours[f"tg_{f[0]}"] = float(f[col])
            ours[f"gb_{f[0]}"] = float(f[gb_col])
            if probe_col is not None:
                ours[f"probe_{f[0]}"] = float(f[probe_col])  # "probe GB/s" is two words, but the columns before it are one
    return ours


path = os.path.join(work, "ours.txt")
ours = read_ours(path)
for k in [f"pp{S}_{t}" for S in (128, 512) for t in ("f32", "bf16", "int8")] + ["tg_f32", "tg_bf16", "tg_int8"]:
    if k not in ours:
        die(f"could not find {k} in {path} (bench_generate output format changed?)")

if not commit:
    commit = info.get("build_commit", "unknown")
build = info.get("build_commit", "unknown")
built = f"llama-bench build {build} #{info.get('build_number', '?')}, " if build != "unknown" else ""
print(f"llama.cpp {commit} ({built}backend {info.get('backends', '?')}) vs ours, {threads} threads, {date}")
print(f"CPU: {info.get('cpu_info', '?')}")
print("model: random Qwen2.5-0.5B shape (494M parameters, tied output); llama.cpp: mean of 3 repetitions")
print("ours: each row with our weights of that type (Q8_0 against our int8)\n")
hdr = f"{'type':<6} {'test':<6} {'llama.cpp tok/s':>16} {'ours tok/s':>11} {'ours/llama.cpp':>15}"
print(hdr)
print("-" * len(hdr))
results = []
for t, label, ours_t in (("f32", "F32", "f32"), ("bf16", "BF16", "bf16"), ("q8_0", "Q8_0", "int8")):
    for test, ok in (("pp128", f"pp128_{ours_t}"), ("pp512", f"pp512_{ours_t}"), ("tg64", f"tg_{ours_t}")):
        l, o = llama.get((t, test)), ours[ok]
        ratio = o / l if l else float("nan")
        print(f"{label:<6} {test:<6} {l if l else float('nan'):>16.2f} {o:>11.2f} {ratio:>14.2f}x")
        results.append({"type": label, "test": test, "llama_cpp_tok_s": l, "ours_tok_s": o, "ours_over_llama_cpp": ratio})

# decode at equal memory speed: each side's GB/s over the probe that bracketed it (llama.cpp's
# bytes per token taken as its GGUF file's size: every matrix once, the tied output included)
print("\ndecode against the memory of its own minute (GB/s over the mean of the probes around it):")
hdr = f"{'type':<6} {'llama.cpp GB/s':>14} {'probe':>6} {'of it':>6} | {'ours GB/s':>9} {'probe':>6} {'of it':>6} | {'ours/llama.cpp at equal bandwidth':>34}"
print(hdr)
print("-" * len(hdr))
for t, label, ours_t in (("f32", "F32", "f32"), ("bf16", "BF16", "bf16"), ("q8_0", "Q8_0", "int8")):
    l = llama.get((t, "tg64"))
    if not l or f"probe_{ours_t}" not in ours:
        continue
    l_gbs, o_gbs = l * gguf_bytes[t] / 1e9, ours[f"tg_{ours_t}"] * ours[f"gb_{ours_t}"]
    l_frac, o_frac = l_gbs / llama_probe[t], o_gbs / ours[f"probe_{ours_t}"]
    equal = (ours[f"tg_{ours_t}"] / ours[f"probe_{ours_t}"]) / (l / llama_probe[t])
    print(f"{label:<6} {l_gbs:>14.1f} {llama_probe[t]:>6.1f} {l_frac:>6.2f} | {o_gbs:>9.1f} {ours[f'probe_{ours_t}']:>6.1f} {o_frac:>6.2f} | {equal:>33.2f}x")
    results.append({"type": label, "test": "tg64 at equal bandwidth", "llama_cpp_probe_gb_s": llama_probe[t],
                    "ours_probe_gb_s": ours[f"probe_{ours_t}"], "ours_over_llama_cpp": equal})
# decode with the two sides alternating, type by type, in the same minutes
if rounds > 0:
    print(f"\ndecode, the two sides alternating ({rounds} rounds; llama.cpp tg64 with 1 repetition, then ours):")
    hdr = (f"{'type':<6} {'round':>6} {'llama.cpp tok/s':>16} {'GB/s':>6} {'probe':>6} | {'ours tok/s':>11} {'GB/s':>6} "
           f"{'probe':>6} | {'ours/llama.cpp':>15}")
    print(hdr)
    print("-" * len(hdr))
    for t, label, ours_t in (("f32", "F32", "f32"), ("bf16", "BF16", "bf16"), ("q8_0", "Q8_0", "int8")):
        ratios, same = [], []
        for r in range(1, rounds + 1):
            lpath, ppath = os.path.join(work, f"alt-llama-{t}-{r}.json"), os.path.join(work, f"alt-probe-{t}-{r}.txt")
            try:
                l = next(x["avg_ts"] for x in json.load(open(lpath)) if x["n_gen"] > 0)
                probes = read_probes(ppath)
            except (OSError, ValueError, StopIteration, KeyError) as e:
                die(f"cannot read round {r} of {t} ({lpath}, {ppath}): {e}")
            if len(probes) != 2:
                die(f"{ppath}: expected the probe before and after llama-bench's decode, got {probes}")
            lp = sum(probes) / 2
            o = read_ours(os.path.join(work, f"alt-ours-{t}-{r}.txt"))
            if f"tg_{ours_t}" not in o or f"probe_{ours_t}" not in o:
                die(f"no decode row for {ours_t} in alt-ours-{t}-{r}.txt (bench_generate output format changed?)")
            ot, op = o[f"tg_{ours_t}"], o[f"probe_{ours_t}"]
            ratios.append(ot / l)
            if abs(op - lp) <= 0.1 * max(op, lp):
                same.append(ot / l)
            print(f"{label:<6} {r:>6} {l:>16.2f} {l * gguf_bytes[t] / 1e9:>6.1f} {lp:>6.1f} | {ot:>11.2f} "
                  f"{ot * o[f'gb_{ours_t}']:>6.1f} {op:>6.1f} | {ot / l:>14.2f}x")
        med = statistics.median(ratios)
        med_same = statistics.median(same) if same else None  # null in the JSON: no such round
        print(f"{label:<6} {'median':>6} {'':>16} {'':>6} {'':>6} | {'':>11} {'':>6} {'':>6} | {med:>14.2f}x")
        same_text = f"{med_same:>14.2f}x" if same else f"{'none':>15}"
        print(f"{label:<6} {'same':>6} {f'({len(same)} of {rounds} rounds with probes within 10 %)':>52} | {same_text}")
        results.append({"type": label, "test": "tg64 alternating", "rounds": ratios, "ours_over_llama_cpp": med,
                        "same_memory_rounds": same, "ours_over_llama_cpp_same_memory": med_same})

# prefill S = 512 with the two sides alternating, type by type, in the same minutes
if prefill_rounds > 0:
    print(f"\nprefill S = 512, the two sides alternating ({prefill_rounds} rounds; llama.cpp pp512 with 1 repetition, then ours):")
    hdr = f"{'type':<6} {'round':>6} {'llama.cpp tok/s':>16} | {'ours tok/s':>11} {'of peak':>8} | {'ours/llama.cpp':>15}"
    print(hdr)
    print("-" * len(hdr))
    for t, label, ours_t in (("f32", "F32", "f32"), ("bf16", "BF16", "bf16"), ("q8_0", "Q8_0", "int8")):
        ratios = []
        for r in range(1, prefill_rounds + 1):
            lpath, opath = os.path.join(work, f"alt-pp-llama-{t}-{r}.json"), os.path.join(work, f"alt-pp-ours-{t}-{r}.txt")
            try:
                l = next(x["avg_ts"] for x in json.load(open(lpath)) if x["n_prompt"] == 512)
            except (OSError, ValueError, StopIteration, KeyError) as e:
                die(f"cannot read round {r} of {t} pp512 ({lpath}): {e}")
            o = read_ours(opath)
            # the last table's row "TYPE 512 tok/s GFLOP/s fraction-of-peak"
            peak_rows = [m for m in (re.match(rf"^{ours_t}\s+512\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)$", ln.strip())
                                     for ln in open(opath)) if m]
            if f"pp512_{ours_t}" not in o or not peak_rows:
                die(f"no prefill row for {ours_t} S = 512 in {opath} (bench_generate output format changed?)")
            ot, of_peak = o[f"pp512_{ours_t}"], float(peak_rows[-1].group(1))
            ratios.append(ot / l)
            print(f"{label:<6} {r:>6} {l:>16.2f} | {ot:>11.2f} {of_peak:>8.2f} | {ot / l:>14.2f}x")
        med = statistics.median(ratios)
        print(f"{label:<6} {'median':>6} {'':>16} | {'':>11} {'':>8} | {med:>14.2f}x")
        results.append({"type": label, "test": "pp512 alternating", "rounds": ratios, "ours_over_llama_cpp": med})

json.dump({"llama_cpp_commit": commit, "date": date, "threads": int(threads), "cpu": info.get("cpu_info"),
           "results": results}, open(os.path.join(work, "peer-results.json"), "w"), indent=1)
EOF

# Shared by benchmarks/peers/llama_cpp_peer.sh and benchmarks/peers/serve_peer.sh (sourced, not
# run): the checks of a llama.cpp source tree and of a Python with numpy, the out-of-tree build of
# llama.cpp's programs, and the random-weight GGUFs of the Qwen2.5-0.5B shape.
# The sourcing script sets SCRIPT (its name, for messages) before sourcing, and, before calling
# llama_gguf: LLAMA_SRC, WORK_DIR, PYTHON, GGUF_SCRIPT, BIN, THREADS and LOG_DIR (where
# quantize.log goes).

die() {
  echo "$SCRIPT: error: $*" >&2
  exit 1
}

# llama_check_source DIR: DIR is a llama.cpp source tree with its gguf-py package.
llama_check_source() {
  [[ -f $1/CMakeLists.txt ]] || die "$1/CMakeLists.txt not found: not a llama.cpp source tree"
  [[ -f $1/gguf-py/gguf/gguf_writer.py ]] || die "$1/gguf-py/gguf/gguf_writer.py not found (llama.cpp's gguf-py package)"
}

# llama_check_python PYTHON: PYTHON runs and imports numpy.
llama_check_python() {
  [[ -x $1 ]] || die "$1 not found (set PYTHON to a Python 3 with numpy)"
  "$1" -c "import numpy" 2>/dev/null || die "numpy is not importable by $1 (Debian: apt-get install python3-numpy)"
}

# llama_build SRC WORK_DIR TARGET...: builds the targets into WORK_DIR/build (Release,
# GGML_NATIVE, OpenMP, no curl), unless every one of them is there already.
llama_build() {
  local src=$1 work=$2
  shift 2
  local bin=$work/build/bin t missing=0
  for t in "$@"; do [[ -x $bin/$t ]] || missing=1; done
  if ((missing == 0)); then
    echo "== llama.cpp: using the existing build in $work/build"
    return
  fi
  echo "== llama.cpp: building $* in $work/build (log: $work/build.log)"
  if ! { cmake -S "$src" -B "$work/build" -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DLLAMA_CURL=OFF \
           -DCMAKE_BUILD_TYPE=Release &&
         cmake --build "$work/build" --target "$@" -j2; } >"$work/build.log" 2>&1; then
    tail -n 30 "$work/build.log" >&2
    die "building llama.cpp failed (full log: $work/build.log)"
  fi
  for t in "$@"; do [[ -x $bin/$t ]] || die "$bin/$t missing after the build (see $work/build.log)"; done
}

# llama_gguf TYPE (f32, bf16 or q8_0): prints the path of the random-weight GGUF of that type,
# written by GGUF_SCRIPT (or quantised by llama-quantize from the F32 one) when missing.
llama_gguf() {
  local t=$1 out=$WORK_DIR/qwen2-0.5b-random-$1.gguf
  if [[ -s $out ]]; then
    echo "== using existing $out" >&2
  elif [[ $t == q8_0 ]]; then
    llama_gguf f32 >/dev/null
    echo "== quantising the F32 GGUF -> $out (log: $LOG_DIR/quantize.log)" >&2
    "$BIN/llama-quantize" "$WORK_DIR/qwen2-0.5b-random-f32.gguf" "$out.part" Q8_0 "$THREADS" >"$LOG_DIR/quantize.log" 2>&1 ||
      { tail -n 20 "$LOG_DIR/quantize.log" >&2; die "llama-quantize failed (log: $LOG_DIR/quantize.log)"; }
    mv "$out.part" "$out"
  else
    echo "== writing $out" >&2
    "$PYTHON" "$GGUF_SCRIPT" --llama-src "$LLAMA_SRC" --type "$t" --out "$out.part" >&2 ||
      die "writing the $t GGUF failed ($GGUF_SCRIPT)"
    mv "$out.part" "$out"
  fi
  echo "$out"
}

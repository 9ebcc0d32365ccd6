#!/usr/bin/env bash
# Before/after benchmarks of a change that must not move performance (a
# refactor), on one GPU: builds BASE_SRC (the source tree before the change,
# e.g. `mkdir .bench-base && git archive REV | tar -x -C .bench-base`, then
# carried to the machine) into build-base and this tree into build-gpu, and
# runs bench/compare_builds.py on their bench_rows and bench_gemm (each case
# in fresh processes, base and new alternating, medians).  Output: the table
# on stdout and in $OUT/compare.txt (./gpu-out when OUT is unset), one JSON
# record per case in $OUT/compare.jsonl; then (COMPARE_DISPATCH=0 skips it)
# bench/dispatch_torch.py's host time per call of both libraries, in
# $OUT/dispatch.jsonl; with COMPARE_ATTENTION="SHAPE ...", attention's
# before/after too (bench/compare_attention.py), in $OUT/attention.txt.
#
# usage: bash scripts/gpu-compare.sh BASE_SRC [compare_builds.py args...]
#        e.g. bash scripts/gpu-compare.sh .bench-base --bench rows --rounds 3
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$(pwd)
NOTES=()
source scripts/gpu-env.sh
[ $# -ge 1 ] && [ -d "$1" ] || { echo "usage: $0 BASE_SRC [compare_builds.py args...]" >&2; exit 2; }
base_src=$(cd "$1" && pwd)
shift
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"

build() { # SRC BUILD_DIR
  local log=$OUT/build-$(basename "$2").log
  fresh_build_dir "$2" "$1"
  if [ -f "$2/build.ninja" ]; then
    meson setup --reconfigure "$2" "$1" > "$log" 2>&1 || return 1
  else
    meson setup "$2" "$1" --buildtype=release > "$log" 2>&1 || return 1
  fi
  ninja -C "$2" >> "$log" 2>&1 && mark_build_dir "$2"
}
build "$base_src" "$ROOT/build-base" & base_pid=$!
build "$ROOT" "$ROOT/build-gpu" & new_pid=$!
wait $base_pid || { echo "gpu-compare: building $base_src failed:" >&2; tail -20 "$OUT/build-build-base.log" >&2; exit 1; }
wait $new_pid || { echo "gpu-compare: building this tree failed:" >&2; tail -20 "$OUT/build-build-gpu.log" >&2; exit 1; }
python3 bench/compare_builds.py --base build-base --new build-gpu -o "$OUT/compare.jsonl" "$@" \
  | tee "$OUT/compare.txt"
rc=${PIPESTATUS[0]}
# The host cost of one call, from PyTorch through ctypes (both builds,
# alternating processes): the launch path is where a refactor could add time.
if [ "${COMPARE_DISPATCH:-1}" = 1 ] && python3 -c "import torch" 2> /dev/null; then
  python3 bench/dispatch_torch.py build-base/libckjit.so build-gpu/libckjit.so \
    | tee "$OUT/dispatch.jsonl"
fi
# Attention, when COMPARE_ATTENTION lists shapes (bench/compare_attention.py:
# b:hq:hkv:s:d:causal[:alibi|bias]): both builds in one process, with
# torch's cuDNN and FlashAttention-2 backends beside them.
if [ -n "${COMPARE_ATTENTION:-}" ]; then
  read -ra shapes <<< "$COMPARE_ATTENTION"
  python3 bench/compare_attention.py build-base/libckjit.so build-gpu/libckjit.so "${shapes[@]}" \
    | tee "$OUT/attention.txt"
  ((PIPESTATUS[0] == 0)) || rc=1
fi
((${#NOTES[@]})) && printf 'note: %s\n' "${NOTES[@]}"
exit "$rc"

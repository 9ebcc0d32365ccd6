#!/usr/bin/env bash
# The whole GPU check in one script, for a CUDA machine without network:
# build into build-gpu, run the GPU test suite (the CPU suites run in CI;
# GPU_CHECK_TEST_ARGS="" runs them all), run the
# benchmarks (bench_ckjit, bench_rows, bench_gemm, bench/attention_torch.py,
# bench/paged_torch.py, bench/peers.py; on request bench/fp8_torch.py,
# bench/moe_fp8_torch.py, bench/fused_moe_torch.py and others below),
# merge them into bench/results.json
# and bench/RESULTS.md, and put into $OUT (./gpu-out when unset):
#   results.json  RESULTS.md  gpu-logs.tar.gz  summary.txt
# It installs nothing.  Debian packages the machine lacks (xxhash, cmocka, a
# pkg-config) are used from .deps/root when present (scripts/fetch-deps.sh
# makes it; carry .deps to the machine).  Every step has a time limit and the
# script ends within GPU_CHECK_BUDGET seconds (default 560, under 10 minutes).
# A failing step does not stop the later ones; the exit status is 0 only when
# every step passed.
#
# usage: bash scripts/gpu-check.sh   (from anywhere; it works in the repo root)
# env:   OUT, GPU_CHECK_BUDGET, GPU_CHECK_TEST_ARGS (meson test args; default
#        "--suite gpu"),
#        BENCH_ARGS (extra bench_ckjit args), ROWS_ARGS (extra bench_rows
#        args), GEMM_ARGS (extra bench_gemm args: --only SUBSTRING,
#        --no-flush-l2, --quick; its --only and --no-flush-l2 are passed on
#        to peers.py as --gemm-case / --no-flush-l2 unless PEERS_ARGS has
#        them), ATTN_ARGS (extra bench/attention_torch.py args: --quick,
#        --only SUBSTRING, --no-flush-l2, --no-lse), PAGED_ARGS (extra
#        bench/paged_torch.py args: --quick, --only SUBSTRING, --no-flush-l2,
#        --no-lse), PEERS_ARGS (extra peers.py args),
#        GPU_CHECK_BENCHES (which benchmark steps run: default
#        "ckjit rows gemm attention paged tools peers"; e.g. "rows peers" with PEERS_ARGS="--only
#        rows" measures only the row-wise ops, "gemm peers" with
#        PEERS_ARGS="--only gemm" only the GEMMs, "attention" alone the
#        attention records (its peers are in the same step) and "paged" alone the
#        paged-attention records (likewise), "multigpu python" (not in the
#        default list) the two-GPU and Python host times, "fleet" (not in the
#        default list) the Redis tier's fleet and first-op numbers, "fp8" (not in the default
#        list) the FP8 GEMM, grouped MoE GEMM and MoE sort records (FP8_ARGS: extra
#        bench/fp8_torch.py args), "moe" (not in the default list) the fused
#        MoE layer's records (bench/fused_moe_torch.py; MOE_ARGS: its extra
#        args: --quick, --only SUBSTRING, --no-flush-l2), "gemmtorch" (not in the
#        default list) bf16 ckjit_gemm from the outside, through ctypes over
#        torch tensors against torch.matmul, with the cluster shapes
#        (bench/gemm_torch.py; GEMM_TORCH_ARGS: --quick, --only SUBSTRING,
#        --no-flush-l2), keeping the other records of
#        bench/results.json; without gemm in the list and with no PEERS_ARGS,
#        peers.py skips its gemm section)
set -uo pipefail

START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-560}
DEADLINE=$((START + BUDGET))
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$(pwd)
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd) # absolute: the log archive is made from inside the log directory
LOGS=$(mktemp -d /tmp/ckjit-gpu-logs.XXXXXX)
TMP=$(mktemp -d /tmp/ckjit-gpu-tmp.XXXXXX)
BUILD=build-gpu
SUMMARY=()   # one line per step
NOTES=()     # anything worth knowing
FAILED=0

# Carried Debian packages, pkg-config, NVRTC on the library path: NOTES+=(...)
# says what was used.
source scripts/gpu-env.sh

# ---- steps -----------------------------------------------------------------
# step NAME LIMIT RESERVE STDOUT STDERR -- COMMAND...
#   Runs COMMAND with a time limit of LIMIT seconds, less when the deadline
#   minus RESERVE (seconds kept for the later steps) comes first.
#   STDOUT == STDERR sends both to one file.  Sets STEP_RC.
# "N cases, M measured, ..." of the records of kind $1 in the JSONL file $2
# (bench_rows, bench_gemm: a case without a value, or whose check failed,
# counts by its status).
case_detail() {
  python3 -c '
import collections, json, sys
kind, n, bad = sys.argv[1], 0, collections.Counter()
for line in open(sys.argv[2]):
    if line.startswith("{"):
        r = json.loads(line)
        if r.get("kind") == kind:
            n += 1
            if r.get("value") is None:
                bad[r.get("status", "?")] += 1
            elif r.get("check") != "ok":
                bad["check " + str(r.get("check"))] += 1
print("%d cases, %d measured%s" % (n, n - sum(bad.values()),
      "".join(", %d %s" % (v, k) for k, v in sorted(bad.items()))))' "$1" "$2" 2>&1
}

step() {
  local name=$1 limit=$2 reserve=$3 out=$4 err=$5
  shift 6
  local now left t t0 secs status
  now=$(date +%s)
  left=$((DEADLINE - now - reserve))
  t=$((limit < left ? limit : left))
  if ((t < 5)); then
    STEP_RC=125
    FAILED=1
    LAST_STATUS="SKIPPED(no time)"
    LAST_SECS=-
    echo "== $name: skipped, no time left" >&2
    return 0
  fi
  echo "== $name (limit ${t}s)" >&2
  t0=$(date +%s)
  if [ "$out" = "$err" ]; then
    timeout --kill-after=10 "$t" "$@" > "$out" 2>&1
  else
    timeout --kill-after=10 "$t" "$@" > "$out" 2> "$err"
  fi
  STEP_RC=$?
  secs=$(($(date +%s) - t0))
  if ((STEP_RC == 0)); then
    status=ok
  elif ((STEP_RC == 124 || STEP_RC == 137)); then
    status="TIMEOUT(${t}s)"
    FAILED=1
  else
    status="FAIL(rc=$STEP_RC)"
    FAILED=1
  fi
  LAST_STATUS=$status
  LAST_SECS=$secs
  if [ "$status" != ok ]; then
    echo "-- $name failed ($status); last lines of $(basename "$err"):" >&2
    tail -n 30 "$err" | sed 's/^/   | /' >&2
  fi
  return 0
}

summary_add() { # NAME DETAIL
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' "$1" "${LAST_STATUS:-?}" "${LAST_SECS:--}" "$2")")
}

# Minimum times kept for later steps: test 60, bench 90, rows 60, peers 90,
# results 20; with gemm in GPU_CHECK_BENCHES, bench and rows also keep
# GEMM_KEEP seconds for it, with attention bench, rows and gemm keep
# ATTN_KEEP for that, and with paged bench, rows, gemm and attention keep
# PAGED_KEEP (the steps before them do not: a full default run is tight in
# 560 s; run "gemm peers", "attention" or "paged" alone for those numbers).
BENCHES=" ${GPU_CHECK_BENCHES:-ckjit rows gemm attention paged tools peers} "
want() { [[ $BENCHES == *" $1 "* ]]; }
GEMM_KEEP=0
want gemm && GEMM_KEEP=60
ATTN_KEEP=0
want attention && ATTN_KEEP=60
PAGED_KEEP=0
want paged && PAGED_KEEP=45
LAST_STATUS=""; LAST_SECS=""
step env 30 370 "$LOGS/env.log" "$LOGS/env.log" -- bash -c '
  echo "date: $(date -u)"; echo "host: $(hostname)"; uname -a
  nvidia-smi || true
  command -v nvcc > /dev/null && nvcc --version
  gcc --version | head -1; echo "meson $(meson --version)"; echo "ninja $(ninja --version)"
  echo "pkg-config: ${PKG_CONFIG:-$(command -v pkg-config)}"; python3 --version
  "${PKG_CONFIG:-pkg-config}" --cflags --libs libxxhash cmocka 2>&1 || true
  python3 -c "import torch; print(\"torch\", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" 2>&1
  ldconfig -p | grep -E "libcuda\.so|libnvrtc" || true
  env | grep -E "^(PATH|LD_LIBRARY_PATH|LIBRARY_PATH|CPATH|PKG_CONFIG.*|CUDA.*|CKJIT.*)=" | sort'
summary_add env ""

fresh_build_dir "$BUILD" "$ROOT"
if [ -f "$BUILD/build.ninja" ]; then
  step configure 90 320 "$LOGS/configure.log" "$LOGS/configure.log" -- meson setup --reconfigure "$BUILD"
  if ((STEP_RC != 0)); then
    step configure 90 320 "$LOGS/configure.log" "$LOGS/configure.log" -- meson setup --wipe "$BUILD" --buildtype=release
  fi
else
  rm -rf "$BUILD"
  step configure 90 320 "$LOGS/configure.log" "$LOGS/configure.log" -- meson setup "$BUILD" --buildtype=release
fi
summary_add configure ""
CONFIGURED=$STEP_RC

BUILT=1
if ((CONFIGURED == 0)); then
  step build 240 260 "$LOGS/build.log" "$LOGS/build.log" -- meson compile -C "$BUILD"
  BUILT=$STEP_RC
  ((BUILT == 0)) && mark_build_dir "$BUILD"
  summary_add build "$(grep -c 'warning:' "$LOGS/build.log") compiler warnings"
else
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' build SKIPPED - "configure failed")")
fi

if ((BUILT == 0)); then
  # A fresh machine compiles every kernel the tests use: do it first on all
  # cores (the tests compile in one process), from the default set and the
  # specs earlier runs recorded (bench/gpu-test-specs.txt, refreshed from
  # this run's CKJIT_RECORD file in $OUT).
  # The GPU tests use a private cache unless CKJIT_CACHE_DIR names one: point
  # them and the prewarm at the same directory (kept in the build dir).
  saved_cache_dir=${CKJIT_CACHE_DIR-}
  export CKJIT_CACHE_DIR=${CKJIT_CACHE_DIR:-$ROOT/$BUILD/ckjit-cache}
  manifest=()
  [ -f bench/gpu-test-specs.txt ] && manifest=(--manifest bench/gpu-test-specs.txt)
  step prewarm 150 260 "$LOGS/prewarm.log" "$LOGS/prewarm.log" -- \
    "$BUILD/tools/ckjit-prewarm" --all --arch sm_90 "${manifest[@]}" -j "$(nproc)"
  summary_add prewarm "$(grep -Eo '[0-9]+ compiled.*' "$LOGS/prewarm.log" | tail -1)"
  read -ra test_args <<< "${GPU_CHECK_TEST_ARGS-"--suite gpu"}"
  rm -f "$LOGS/gpu-test-specs.txt"
  export CKJIT_RECORD=$LOGS/gpu-test-specs.txt
  step test 300 200 "$LOGS/test.log" "$LOGS/test.log" -- meson test -C "$BUILD" --print-errorlogs "${test_args[@]}"
  unset CKJIT_RECORD
  if [ -n "$saved_cache_dir" ]; then CKJIT_CACHE_DIR=$saved_cache_dir; else unset CKJIT_CACHE_DIR; fi
  sort -u "$LOGS/gpu-test-specs.txt" > "$OUT/gpu-test-specs.txt" 2> /dev/null
  cp "$BUILD/meson-logs/testlog.txt" "$LOGS/testlog.txt" 2> /dev/null
  cp "$BUILD/meson-logs/testlog.json" "$LOGS/testlog.json" 2> /dev/null
  counts=$(grep -E '^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout): ' "$LOGS/test.log" \
    | awk -F: '{gsub(/ /, "", $2); printf "%s %s, ", $1, $2}')
  failing=$(grep -E '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT|ERROR) ' "$LOGS/test.log" \
    | sed -E 's#^ *[0-9]+/[0-9]+ +(.*[^ ]) +(FAIL|TIMEOUT|ERROR) .*#\1#; s# / #/#' \
    | head -8 | tr '\n' ' ')
  summary_add test "${counts%, }${failing:+ | failing: $failing}"
else
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' test SKIPPED - "no build")")
fi

BENCH_BIN=$BUILD/bench/bench_ckjit
bench_args=()
: > "$LOGS/bench-ckjit.jsonl"
if ! want ckjit; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' bench SKIPPED - "not in GPU_CHECK_BENCHES")")
elif ((BUILT == 0)) && [ -x "$BENCH_BIN" ]; then
  # Fall back to --quick when little time is left.
  left=$((DEADLINE - $(date +%s) - 170 - GEMM_KEEP - ATTN_KEEP - PAGED_KEEP))
  read -ra bench_args <<< "${BENCH_ARGS:-}"
  if ((left < 120)); then
    bench_args+=(--quick)
    NOTES+=("bench_ckjit ran with --quick (only ${left}s left for it)")
  fi
  step bench 200 $((170 + GEMM_KEEP + ATTN_KEEP + PAGED_KEEP)) "$LOGS/bench-ckjit.jsonl" "$LOGS/bench-ckjit.log" -- "$BENCH_BIN" "${bench_args[@]}"
  summary_add bench "$(grep -c '^{' "$LOGS/bench-ckjit.jsonl") records${bench_args[*]:+ (${bench_args[*]})}"
else
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' bench SKIPPED - "no bench_ckjit (build failed or no cuda.h/libcuda)")")
  FAILED=1
fi

# Row-wise ops (softmax, norms, row sum, rowwise quant, topk-softmax): one
# child process per case; an op that is not implemented yet gives a record
# with its status and no number, and does not fail the step.  Its --budget
# ends it (remaining cases recorded as SKIPPED) before the step's limit.
ROWS_BIN=$BUILD/bench/bench_rows
rows_args=()
if ! want rows; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' rows SKIPPED - "not in GPU_CHECK_BENCHES")")
elif ((BUILT == 0)) && [ -x "$ROWS_BIN" ]; then
  left=$((DEADLINE - $(date +%s) - 130 - GEMM_KEEP - ATTN_KEEP - PAGED_KEEP))
  rows_limit=$((left < 150 ? left : 150))
  read -ra rows_args <<< "${ROWS_ARGS:-}"
  if ((left < 100)); then
    rows_args+=(--quick)
    NOTES+=("bench_rows ran with --quick (only ${left}s left for it)")
  fi
  # A case started just before the budget ends may run 20 s past it.
  ((rows_limit > 35)) && rows_args+=(--budget $((rows_limit - 25)))
  : > "$LOGS/bench-rows.jsonl"
  step rows 150 $((130 + GEMM_KEEP + ATTN_KEEP + PAGED_KEEP)) "$LOGS/bench-rows.jsonl" "$LOGS/bench-rows.log" -- "$ROWS_BIN" "${rows_args[@]}"
  cat "$LOGS/bench-rows.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  rows_detail=$(case_detail rows "$LOGS/bench-rows.jsonl")
  summary_add rows "$rows_detail${rows_args[*]:+ (${rows_args[*]})}"
else
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' rows SKIPPED - "no bench_rows (build failed or no cuda.h/libcuda)")")
  FAILED=1
fi

# GEMM (ckjit_gemm, ckjit_gemm_grouped): one child process per case, each
# result-checked before it is timed; as rows, an unimplemented case gives a
# record with its status and does not fail the step, and --budget ends it
# before the step's limit.  Its torch/cuBLAS peers come from the peers step.
GEMM_BIN=$BUILD/bench/bench_gemm
gemm_args=()
if ! want gemm; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' gemm SKIPPED - "not in GPU_CHECK_BENCHES")")
elif ((BUILT == 0)) && [ -x "$GEMM_BIN" ]; then
  left=$((DEADLINE - $(date +%s) - 130 - ATTN_KEEP - PAGED_KEEP))
  gemm_limit=$((left < 180 ? left : 180))
  read -ra gemm_args <<< "${GEMM_ARGS:-}"
  if ((left < 100)); then
    gemm_args+=(--quick)
    NOTES+=("bench_gemm ran with --quick (only ${left}s left for it)")
  fi
  # A case started just before the budget ends may run 20 s past it.
  ((gemm_limit > 35)) && gemm_args+=(--budget $((gemm_limit - 25)))
  : > "$LOGS/bench-gemm.jsonl"
  step gemm 180 $((130 + ATTN_KEEP + PAGED_KEEP)) "$LOGS/bench-gemm.jsonl" "$LOGS/bench-gemm.log" -- "$GEMM_BIN" "${gemm_args[@]}"
  cat "$LOGS/bench-gemm.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  gemm_detail=$(case_detail gemm "$LOGS/bench-gemm.jsonl")
  summary_add gemm "$gemm_detail${gemm_args[*]:+ (${gemm_args[*]})}"
else
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' gemm SKIPPED - "no bench_gemm (build failed or no cuda.h/libcuda)")")
  FAILED=1
fi

# Fused attention: ckjit_attention against torch SDPA's cuDNN and
# FlashAttention-2 backends (bench/attention_torch.py: ckjit through ctypes
# over torch tensors, the peers in the same process and stream, alternating
# runs), each case checked against cuDNN before it is timed; then the host
# time of one call against one ckjit_gemm call, and the compile time of each
# default attention spec (ckjit-prewarm into a fresh cache).  The cases run
# on the prewarm step's cache; as gemm, a case ckjit does not support yet
# gives a record with its status and does not fail the step, and --budget
# ends it before the step's limit.
attn_args=()
if ! want attention; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' attention SKIPPED - "not in GPU_CHECK_BENCHES")")
elif ((BUILT == 0)) && [ -f "$BUILD/libckjit.so" ]; then
  left=$((DEADLINE - $(date +%s) - 130 - PAGED_KEEP))
  attn_limit=$((left < 150 ? left : 150))
  read -ra attn_args <<< "${ATTN_ARGS:-}"
  if ((left < 100)); then
    attn_args+=(--quick)
    NOTES+=("attention_torch.py ran with --quick (only ${left}s left for it)")
  fi
  ((attn_limit > 35)) && attn_args+=(--budget $((attn_limit - 20)))
  : > "$LOGS/bench-attention.jsonl"
  step attention 150 $((130 + PAGED_KEEP)) "$LOGS/bench-attention.jsonl" "$LOGS/bench-attention.log" -- \
    env CKJIT_CACHE_DIR="${CKJIT_CACHE_DIR:-$ROOT/$BUILD/ckjit-cache}" python3 bench/attention_torch.py \
    --lib "$ROOT/$BUILD/libckjit.so" --prewarm "$ROOT/$BUILD/tools/ckjit-prewarm" "${attn_args[@]}"
  cat "$LOGS/bench-attention.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  attn_detail=$(case_detail attention "$LOGS/bench-attention.jsonl")
  summary_add attention "$attn_detail${attn_args[*]:+ (${attn_args[*]})}"
else
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' attention SKIPPED - "no $BUILD/libckjit.so (build failed)")")
  FAILED=1
fi

# Paged K/V attention (issue 18): ckjit_paged_attention (decode: vs the same
# run's copy bandwidth and cuDNN; prefill: vs dense ckjit_attention, cuDNN and
# cuDNN after gathering K/V from the pages) and ckjit_paged_kv_append (vs
# copy), through bench/paged_torch.py as the attention step (ctypes over torch
# tensors, the peers in the same process and stream, alternating runs), each
# case checked against a float32 reference before it is timed.  The cases
# run on the prewarm step's cache; as attention, a case ckjit does not support
# yet gives a record with its status and does not fail the step, and --budget
# ends it before the step's limit.
paged_args=()
if ! want paged; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' paged SKIPPED - "not in GPU_CHECK_BENCHES")")
elif ((BUILT == 0)) && [ -f "$BUILD/libckjit.so" ]; then
  left=$((DEADLINE - $(date +%s) - 130))
  paged_limit=$((left < 90 ? left : 90))
  read -ra paged_args <<< "${PAGED_ARGS:-}"
  if ((left < 70)); then
    paged_args+=(--quick)
    NOTES+=("paged_torch.py ran with --quick (only ${left}s left for it)")
  fi
  ((paged_limit > 35)) && paged_args+=(--budget $((paged_limit - 20)))
  : > "$LOGS/bench-paged.jsonl"
  step paged 90 130 "$LOGS/bench-paged.jsonl" "$LOGS/bench-paged.log" -- \
    env CKJIT_CACHE_DIR="${CKJIT_CACHE_DIR:-$ROOT/$BUILD/ckjit-cache}" python3 bench/paged_torch.py \
    --lib "$ROOT/$BUILD/libckjit.so" "${paged_args[@]}"
  cat "$LOGS/bench-paged.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  paged_detail=$(case_detail paged "$LOGS/bench-paged.jsonl")
  summary_add paged "$paged_detail${paged_args[*]:+ (${paged_args[*]})}"
else
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' paged SKIPPED - "no $BUILD/libckjit.so (build failed)")")
  FAILED=1
fi

# Host time with several GPUs (bench/multi_gpu.py; two GPUs, else it says
# why and records nothing) and of the Python package's calls against torch's
# own ops (bench/python_host_time.py).  Not in the default list: run
# GPU_CHECK_BENCHES="multigpu python" on a two-GPU machine.
if want multigpu && ((BUILT == 0)) && [ -x "$BUILD/bench/bench_multi_gpu" ]; then
  : > "$LOGS/bench-multigpu.jsonl"
  step multigpu 150 40 "$LOGS/bench-multigpu.log" "$LOGS/bench-multigpu.log" -- \
    env CKJIT_CACHE_DIR="${CKJIT_CACHE_DIR:-$ROOT/$BUILD/ckjit-cache}" python3 bench/multi_gpu.py \
    --bin "$BUILD/bench/bench_multi_gpu" --out "$LOGS/bench-multigpu.jsonl"
  cat "$LOGS/bench-multigpu.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  summary_add multigpu "$(tail -n 1 "$LOGS/bench-multigpu.log")"
elif want multigpu; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' multigpu SKIPPED - "no $BUILD/bench/bench_multi_gpu")")
fi
if want python && ((BUILT == 0)) && [ -f "$BUILD/libckjit.so" ]; then
  : > "$LOGS/bench-python.jsonl"
  step python 120 40 "$LOGS/bench-python.log" "$LOGS/bench-python.log" -- \
    env CKJIT_CACHE_DIR="${CKJIT_CACHE_DIR:-$ROOT/$BUILD/ckjit-cache}" \
    CKJIT_LIBRARY="$ROOT/$BUILD/libckjit.so" PYTHONPATH="$ROOT/python" \
    python3 bench/python_host_time.py --json "$LOGS/bench-python.jsonl"
  cat "$LOGS/bench-python.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  summary_add python "$(grep -c '^{' "$LOGS/bench-python.jsonl") records"
elif want python; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' python SKIPPED - "no $BUILD/libckjit.so")")
fi

# The remote cache on this host (issue 20): a redis-server (the machine's or
# the carried one, scripts/fetch-deps.sh) on a Unix socket; the fleet
# simulation and the first real op served by Redis.  Not in the default list.
if want fleet && ((BUILT == 0)) && [ -x "$BUILD/tests/remote/remote_helper" ]; then
  : > "$LOGS/bench-fleet.jsonl"
  step fleet 200 40 "$LOGS/bench-fleet.log" "$LOGS/bench-fleet.log" -- \
    python3 bench/fleet.py --build "$BUILD" --gpu --out "$LOGS/bench-fleet.jsonl"
  cat "$LOGS/bench-fleet.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  summary_add fleet "$(grep 'first op' "$LOGS/bench-fleet.log" | tail -n 1)"
elif want fleet; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' fleet SKIPPED - "no $BUILD/tests/remote/remote_helper (built without hiredis?)")")
fi

# FP8 GEMM (issue 21) and mixture-of-experts (issue 22): ckjit_gemm_fp8
# against torch._scaled_mm (bench/fp8_torch.py), ckjit_gemm_fp8_moe against
# dense FP8 GEMMs of the same flops and ckjit_moe_sort against torch's
# stable sort (bench/moe_fp8_torch.py).  Not in the default list (the
# default steps fill the budget): GPU_CHECK_BENCHES="fp8".
if want fp8 && ((BUILT == 0)) && [ -f "$BUILD/libckjit.so" ]; then
  : > "$LOGS/bench-fp8.jsonl"
  : > "$LOGS/bench-moe.jsonl"
  step fp8 200 60 "$LOGS/bench-fp8.log" "$LOGS/bench-fp8.log" -- \
    env CKJIT_CACHE_DIR="${CKJIT_CACHE_DIR:-$ROOT/$BUILD/ckjit-cache}" python3 bench/fp8_torch.py \
    --lib "$ROOT/$BUILD/libckjit.so" --budget 180 --json "$LOGS/bench-fp8.jsonl" ${FP8_ARGS:-}
  step moe_fp8 150 30 "$LOGS/bench-moe.log" "$LOGS/bench-moe.log" -- \
    env CKJIT_CACHE_DIR="${CKJIT_CACHE_DIR:-$ROOT/$BUILD/ckjit-cache}" python3 bench/moe_fp8_torch.py \
    --lib "$ROOT/$BUILD/libckjit.so" --json "$LOGS/bench-moe.jsonl"
  cat "$LOGS/bench-fp8.jsonl" "$LOGS/bench-moe.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  summary_add fp8 "$(cat "$LOGS/bench-fp8.jsonl" "$LOGS/bench-moe.jsonl" | grep -c '^{') records"
elif want fp8; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' fp8 SKIPPED - "no $BUILD/libckjit.so")")
fi

# bf16 GEMM from the outside (issue 21): ckjit_gemm through ctypes over torch
# tensors against torch.matmul(out=) on the same stream, alternating, cold
# L2, with CKJIT_GEMM_CLUSTER's shapes in the same rounds (bench/gemm_torch.py).
# Not in the default list: GPU_CHECK_BENCHES="gemmtorch".
if want gemmtorch && ((BUILT == 0)) && [ -f "$BUILD/libckjit.so" ]; then
  : > "$LOGS/bench-gemm-torch.jsonl"
  step gemmtorch 200 30 "$LOGS/bench-gemm-torch.log" "$LOGS/bench-gemm-torch.log" -- \
    env CKJIT_CACHE_DIR="${CKJIT_CACHE_DIR:-$ROOT/$BUILD/ckjit-cache}" python3 bench/gemm_torch.py \
    --lib "$ROOT/$BUILD/libckjit.so" --budget 180 --json "$LOGS/bench-gemm-torch.jsonl" ${GEMM_TORCH_ARGS:-}
  cat "$LOGS/bench-gemm-torch.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  summary_add gemmtorch "$(grep -c '^{' "$LOGS/bench-gemm-torch.jsonl") records"
elif want gemmtorch; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' gemmtorch SKIPPED - "no $BUILD/libckjit.so")")
fi

# Fused MoE layer: ckjit_fused_moe (bf16 weights) against a torch loop over
# the experts and dense torch.matmul GEMMs of the same flops, with FP8
# weights (block and row scales) against its bf16 self, and decode steps
# (16, 64 tokens) against the same run's copy bandwidth
# (bench/fused_moe_torch.py: ctypes over torch tensors, one stream,
# alternating runs, each case checked against the torch loop before it is
# timed, one child process for the cases).  As fp8, not in the default list:
# GPU_CHECK_BENCHES="moe"; --budget ends it before the step's limit.
moe_args=()
if want moe && ((BUILT == 0)) && [ -f "$BUILD/libckjit.so" ]; then
  left=$((DEADLINE - $(date +%s) - 30))
  moe_limit=$((left < 240 ? left : 240))
  read -ra moe_args <<< "${MOE_ARGS:-}"
  ((moe_limit > 35)) && moe_args+=(--budget $((moe_limit - 25)))
  : > "$LOGS/bench-fused-moe.jsonl"
  step moe 240 30 "$LOGS/bench-fused-moe.log" "$LOGS/bench-fused-moe.log" -- \
    env CKJIT_CACHE_DIR="${CKJIT_CACHE_DIR:-$ROOT/$BUILD/ckjit-cache}" python3 bench/fused_moe_torch.py \
    --lib "$ROOT/$BUILD/libckjit.so" --json "$LOGS/bench-fused-moe.jsonl" "${moe_args[@]}"
  cat "$LOGS/bench-fused-moe.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  moe_detail=$(case_detail fused_moe "$LOGS/bench-fused-moe.jsonl")
  summary_add moe "$moe_detail${moe_args[*]:+ (${moe_args[*]})}"
elif want moe; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' moe SKIPPED - "no $BUILD/libckjit.so")")
fi

# Host-side tool numbers (CPU only): prewarm scaling over this host's cores
# and verify of 1,000 entries, tagged with the host instead of the card.
# The prewarm points that fit 150 s (the H200 host's -j 1 alone took 152 s,
# bench/NOTES.md #186), widest first.
if ((BUILT == 0)) && want tools; then
  step tools 200 100 "$LOGS/bench-tools.jsonl" "$LOGS/bench-tools.log" -- bash -c '
    host="GPU host CPU ($(nproc) cores)"
    { BENCH_BUDGET=150 bench/bench_prewarm.sh "$1/tools/ckjit-prewarm"; bench/bench_verify.sh "$1/tools/ckjit-cache"; } |
      python3 -c "
import json, sys
for line in sys.stdin:
    if line.startswith(\"{\"):
        r = json.loads(line); r.update(kind=\"tool\", impl=\"ckjit\", card=sys.argv[1]); print(json.dumps(r))
" "$host"' _ "$BUILD"
  cat "$LOGS/bench-tools.jsonl" >> "$LOGS/bench-ckjit.jsonl"
  summary_add tools "$(grep -c '^{' "$LOGS/bench-tools.jsonl") records"
elif ! want tools; then
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' tools SKIPPED - "not in GPU_CHECK_BENCHES")")
fi

read -ra peers_args <<< "${PEERS_ARGS:-}"
if ((${#peers_args[@]} == 0)) && ! want gemm; then
  # No GEMM step: peers.py's other sections only (what it ran before gemm).
  peers_args=(--only torch --only rows --only cupy --only triton)
elif want gemm; then
  # The GEMM step's case selection and L2 flush setting, for the same cases
  # measured the same way (make_results.py refuses a ratio when the L2 flush
  # differs).
  for ((i = 0; i < ${#gemm_args[@]}; i++)); do
    case ${gemm_args[i]} in
      --only)
        [[ " ${PEERS_ARGS:-} " == *" --gemm-case "* ]] || peers_args+=(--gemm-case "${gemm_args[i + 1]:-}")
        ((i++)) ;;
      --no-flush-l2)
        [[ " ${PEERS_ARGS:-} " == *" --no-flush-l2 "* ]] || peers_args+=(--no-flush-l2) ;;
      --budget) ((i++)) ;;
    esac
  done
fi
if want peers; then
  step peers 180 20 "$LOGS/peers.jsonl" "$LOGS/peers.log" -- python3 bench/peers.py "${peers_args[@]}"
  summary_add peers "$(grep -c '^{' "$LOGS/peers.jsonl") records"
else
  : > "$LOGS/peers.jsonl"
  SUMMARY+=("$(printf '%-10s %-16s %5s  %s' peers SKIPPED - "not in GPU_CHECK_BENCHES")")
fi

# The command line of RESULTS.md names the benchmark steps that ran.
ran=""
want ckjit && ran+="; $BENCH_BIN ${bench_args[*]:-}"
want rows && ran+="; $ROWS_BIN ${rows_args[*]:-}"
want gemm && ran+="; $GEMM_BIN ${gemm_args[*]:-}"
want attention && ran+="; python3 bench/attention_torch.py ${attn_args[*]:-}"
want paged && ran+="; python3 bench/paged_torch.py ${paged_args[*]:-}"
want multigpu && ran+="; python3 bench/multi_gpu.py"
want python && ran+="; python3 bench/python_host_time.py"
want fp8 && ran+="; python3 bench/fp8_torch.py ${FP8_ARGS:-}; python3 bench/moe_fp8_torch.py"
want moe && ran+="; python3 bench/fused_moe_torch.py ${moe_args[*]:-}"
want gemmtorch && ran+="; python3 bench/gemm_torch.py ${GEMM_TORCH_ARGS:-}"
want peers && ran+="; python3 bench/peers.py ${peers_args[*]:-}"
ran="${GPU_CHECK_BENCHES:+GPU_CHECK_BENCHES=\"$GPU_CHECK_BENCHES\"}${ran}"
step results 30 0 "$LOGS/make-results.log" "$LOGS/make-results.log" -- python3 bench/make_results.py \
  --ckjit "$LOGS/bench-ckjit.jsonl" --peers "$LOGS/peers.jsonl" \
  --command "bash scripts/gpu-check.sh  (${ran#; })"
summary_add results "$(tail -n 1 "$LOGS/make-results.log")"

# ---- collect -----------------------------------------------------------------
cp bench/results.json bench/RESULTS.md "$OUT"/ 2> /dev/null
{
  echo "ckjit gpu-check $(date -u '+%Y-%m-%d %H:%M UTC'), $(($(date +%s) - START)) s"
  echo
  printf '%-10s %-16s %5s  %s\n' step status secs detail
  printf '%s\n' "${SUMMARY[@]}"
  if ((${#NOTES[@]})); then
    echo
    printf 'note: %s\n' "${NOTES[@]}"
  fi
  grep -h '"kind": *"note"' "$LOGS/bench-ckjit.jsonl" "$LOGS/peers.jsonl" 2> /dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l); print("note: %s: %s" % (r.get("impl"), r.get("note")))' 2> /dev/null
  if [ -f bench/results.json ]; then
    echo
    python3 - "$LOGS/bench-ckjit.jsonl" "$LOGS/peers.jsonl" << 'EOF'
import json, sys
res = json.load(open('bench/results.json'))
def f(v):
    return '-' if v is None else ('%.4g' % v if isinstance(v, float) else str(v))
print('%-52s %10s %10s %-7s %7s' % ('metric', 'ckjit', 'peer', 'unit', 'ratio'))
for r in res:
    m = r['metric']
    if (m.startswith('cold compile') and not m.startswith('cold compile all')) or (
            m.startswith('attention compile') and not m.startswith('attention compile all')):
        continue
    print('%-52s %10s %10s %-7s %7s' % (m[:52], f(r['ckjit']), f(r['peer']), r['unit'] or '',
                                        f(r['ratio'])))
EOF
  fi
} > "$LOGS/summary.txt" 2>&1
cp "$LOGS/summary.txt" "$OUT/summary.txt"
# The files only, not "." (the mktemp directory's 0700 mode would be
# applied to whatever directory the archive is unpacked into).
(cd "$LOGS" && tar -czf "$OUT/gpu-logs.tar.gz" -- *) 2> /dev/null
rm -rf "$TMP" "$LOGS"

echo
cat "$OUT/summary.txt"
echo
echo "files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $FAILED

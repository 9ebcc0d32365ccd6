#!/usr/bin/env bash
# Times `ckjit-prewarm --all --arch ARCH` (default sm_90; CPU only, no GPU)
# into an empty cache with -j 1, -j 2 and, where the host has more cores,
# -j 4, 8, 16 up to nproc; then once more into the full cache (nothing to
# compile).  Each point is the best of BENCH_RUNS runs (default 1).  The
# widest point runs first and each record is printed as soon as it is
# measured, so that with BENCH_BUDGET=S (seconds) a slow host still reports
# what fits: a point whose estimate (the last point's wall scaled by the
# jobs, at best linear) would end past S is skipped, and so are the
# speed-ups without -j 1.  Prints JSONL records on stdout, e.g.
#   {"metric":"prewarm --all sm_90 -j 1 wall","unit":"s","value":24.1}
#   {"metric":"prewarm --all sm_90 -j 2 wall","unit":"s","value":12.6}
#   {"metric":"prewarm --all sm_90 -j 2 speed-up","unit":"x","value":1.91}
#   {"metric":"prewarm --all sm_90 warm (all cached) -j 2 wall","unit":"s","value":0.05}
# and the details on stderr.
#
#   bench/bench_prewarm.sh [PATH-OF-ckjit-prewarm]   (default build/tools/ckjit-prewarm)
#   BENCH_ARCH=gfx90a BENCH_RUNS=3 BENCH_BUDGET=150 bench/bench_prewarm.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tool=${1:-$root/build/tools/ckjit-prewarm}
arch=${BENCH_ARCH:-sm_90}
runs=${BENCH_RUNS:-1}
[ -x "$tool" ] || { echo "bench_prewarm: $tool is not built (ninja -C build)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ckjit-bench-prewarm-XXXXXX")
trap 'rm -rf "$work"' EXIT
export CKJIT_LOG=error
unset CKJIT_CACHE_DIR CKJIT_CACHE_DISABLE CKJIT_DUMP_DIR CKJIT_RECORD CKJIT_ARCH

cores=$(nproc)
jobs=(1 2)
for j in 4 8 16; do [ "$j" -le "$cores" ] && jobs+=("$j"); done

# One run: prints "wall_ms compiled cached failed workers" from the --json summary.
run() { # cache-dir jobs
  "$tool" --all --arch "$arch" --cache-dir "$1" -j "$2" --json >"$work/out.json" ||
    { echo "bench_prewarm: ckjit-prewarm -j $2 failed:" >&2; tail -c 2000 "$work/out.json" >&2; exit 1; }
  python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(s["wall_ms"], s["compiled"], s["cached"], s["failed"], s["workers"])' "$work/out.json"
}

# The compiler must be there: a probe of one spec.
if ! "$tool" --arch "$arch" --cache-dir "$work/probe" -j 1 --json transpose:dtype=f32 >/dev/null 2>"$work/probe.err"; then
  echo "bench_prewarm: cannot compile for $arch here:" >&2
  cat "$work/probe.err" >&2
  printf '{"metric":"prewarm --all %s","skipped":"no compiler for %s"}\n' "$arch" "$arch"
  exit 0
fi

# Float arithmetic without bc.
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }

budget=${BENCH_BUDGET:-0} # 0: no limit
start=$(date +%s)
wall_record() { # jobs ms
  printf '{"metric":"prewarm --all %s -j %d wall","unit":"s","value":%.3f}\n' "$arch" "$1" "$(calc "$2 / 1000")"
}

declare -A best
last_j=0 last_ms=0
for ((i = ${#jobs[@]} - 1; i >= 0; i--)); do
  j=${jobs[i]}
  if [ "$budget" -gt 0 ] && [ "$last_j" -gt 0 ]; then
    estimate=$(calc "$last_ms * $last_j / $j / 1000 * $runs")
    if [ "$(calc "$budget < ($(date +%s) - $start) + $estimate")" != "0.000000" ]; then
      echo "-j $j: skipped, about ${estimate%.*} s would pass BENCH_BUDGET=$budget" >&2
      continue
    fi
  fi
  for r in $(seq "$runs"); do
    dir="$work/cache-j$j-r$r"
    read -r ms compiled cached failed workers < <(run "$dir" "$j")
    echo "-j $j run $r: $(calc "$ms / 1000") s, compiled $compiled, cached $cached, failed $failed, $workers workers ($cores cores)" >&2
    [ "$compiled" -gt 0 ] && [ "$cached" -eq 0 ] || { echo "bench_prewarm: the cache was not empty" >&2; exit 1; }
    if [ -z "${best[$j]:-}" ] || [ "$(calc "$ms < ${best[$j]}")" != "0.000000" ]; then best[$j]=$ms; fi
  done
  wall_record "$j" "${best[$j]}"
  last_j=$j last_ms=${best[$j]}
  if [ "$j" = "${jobs[-1]}" ]; then # the full cache again: nothing to compile
    read -r warm_ms compiled cached failed workers < <(run "$work/cache-j$j-r1" "$j")
    echo "warm -j $j: compiled $compiled, cached $cached" >&2
    [ "$compiled" -eq 0 ] || { echo "bench_prewarm: the warm run compiled $compiled" >&2; exit 1; }
    printf '{"metric":"prewarm --all %s warm (all cached) -j %d wall","unit":"s","value":%.3f}\n' \
      "$arch" "$j" "$(calc "$warm_ms / 1000")"
  fi
done

[ -n "${best[1]:-}" ] || exit 0 # no speed-ups without -j 1
for j in "${jobs[@]}"; do
  [ "$j" -gt 1 ] && [ -n "${best[$j]:-}" ] || continue
  printf '{"metric":"prewarm --all %s -j %d speed-up","unit":"x","value":%.2f}\n' "$arch" "$j" \
    "$(calc "${best[1]} / ${best[$j]}")"
done

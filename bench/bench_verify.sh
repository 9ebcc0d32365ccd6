#!/usr/bin/env bash
# Times `ckjit-cache verify` over a cache of 1,000 valid entries (random
# 8-20 KB payloads, made with the library's encoder by gen_cache_entries.c):
# the median of 5 runs, with the files in the page cache, printed as one
# JSONL record:
#   {"metric":"ckjit-cache verify 1000 entries","unit":"ms","value":...}
#
#   bench/bench_verify.sh [PATH-OF-ckjit-cache]   (default build/tools/ckjit-cache)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tool=${1:-$root/build/tools/ckjit-cache}
n=${BENCH_ENTRIES:-1000}
runs=${BENCH_RUNS:-5}
[ -x "$tool" ] || { echo "bench_verify: $tool is not built (ninja -C build)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ckjit-bench-verify-XXXXXX")
trap 'rm -rf "$work"' EXIT

cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -I"$root" "$root/bench/gen_cache_entries.c" \
  "$root/cache/entry.c" "$root/cache/key.c" "$root/cache/payload_check.c" -lxxhash -lelf -pthread \
  -o "$work/gen"
"$work/gen" "$work/cache" "$n" 42 >&2

times=()
for i in $(seq "$runs"); do
  t0=$(date +%s%N)
  "$tool" --cache-dir "$work/cache" --json verify >"$work/out.json"
  t1=$(date +%s%N)
  times+=("$(( (t1 - t0) / 1000 ))")
done
python3 - "$work/out.json" "$n" "${times[@]}" <<'PY'
import json, statistics, sys
out, n, times = sys.argv[1], int(sys.argv[2]), [int(t) / 1000.0 for t in sys.argv[3:]]
r = json.load(open(out))
if r["ok"] != n or r["bad_count"] != 0:
    sys.exit(f"bench_verify: verify found {r['ok']} ok and {r['bad_count']} bad of {n}")
print("runs (ms): " + ", ".join(f"{t:.1f}" for t in times), file=sys.stderr)
print(json.dumps({"metric": f"ckjit-cache verify {n} entries", "unit": "ms",
                  "value": round(statistics.median(times), 2)}, separators=(",", ":")))
PY

#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer + UBSan) and runs
# each for SECONDS (default 60), starting from the seed corpus in
# tests/fuzz/corpus/<target>/.  Fails on any crash, sanitizer report, leak,
# timeout or failed check, and prints the reproducer.  Not part of the meson
# build (it needs clang); the meson suite replays the seed corpus instead.
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]     (targets: entry payload manifest spec size)
#
# Needs clang and libFuzzer (Debian 12: clang, libclang-rt-14-dev).  Works in
# build-fuzz/ (ignored by git); new corpus inputs found by a run stay there.
# To reproduce a crash: build-fuzz/fuzz_<target> <crash file>.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(entry payload manifest spec size)
case "$seconds" in ''|*[!0-9]*) echo "fuzz: SECONDS must be a number" >&2; exit 2 ;; esac

CC=${FUZZ_CC:-clang}
out=build-fuzz
mkdir -p "$out"

# The toolchain: clang with libFuzzer.
cat > "$out/probe.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }
EOF
if ! command -v "$CC" >/dev/null || ! "$CC" -fsanitize=fuzzer,address "$out/probe.c" -o "$out/probe" 2>"$out/probe.log"; then
  echo "fuzz: $CC cannot build libFuzzer targets (-fsanitize=fuzzer,address):" >&2
  cat "$out/probe.log" >&2 || true
  echo "fuzz: install clang and libclang-rt-14-dev (scripts/install-deps.sh)" >&2
  exit 1
fi

san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cflags="-std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Iinclude -I."

# The library (every source, for the spec parser and what it reaches),
# instrumented for coverage and sanitized; built by meson with clang.
need_lib=0
for t in "${targets[@]}"; do [ "$t" = spec ] || [ "$t" = size ] && need_lib=1; done
if [ $need_lib = 1 ]; then
  if [ ! -f "$out/lib/build.ninja" ]; then
    # Without the Redis tier: no target reaches it, and the link lines below
    # name only the libraries the targets need.
    CC="$CC" meson setup "$out/lib" -Dbuildtype=debug -Db_sanitize=address,undefined \
      -Db_lundef=false -Dredis=disabled \
      -Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=all" \
      >"$out/meson-setup.log" 2>&1 || { cat "$out/meson-setup.log" >&2; exit 1; }
  fi
  ninja -C "$out/lib" libckjit.a >"$out/ninja.log" 2>&1 || { cat "$out/ninja.log" >&2; exit 1; }
fi

build() { # target sources...
  local t=$1
  shift
  echo "== building fuzz_$t"
  # shellcheck disable=SC2086
  "$CC" $cflags $san -fsanitize=fuzzer "tests/fuzz/fuzz_$t.c" "$@" -lxxhash -ldl -lm -pthread \
    -o "$out/fuzz_$t"
}

status=0
for t in "${targets[@]}"; do
  case "$t" in
    entry) build entry cache/entry.c cache/key.c ;;
    payload) build payload cache/payload_check.c -lelf ;;
    manifest)
      if [ ! -f tools/manifest.c ]; then
        echo "fuzz: SKIP manifest: tools/manifest.c does not exist yet"
        continue
      fi
      build manifest tools/manifest.c ;;
    spec) build spec "$out/lib/libckjit.a" -lelf ;;
    size) build size "$out/lib/libckjit.a" -lelf ;;
    *) echo "fuzz: unknown target '$t' (entry, payload, manifest, spec, size)" >&2; exit 2 ;;
  esac
  corpus="$out/corpus/$t"
  mkdir -p "$corpus" "$out/artifacts"
  rm -f "$out/artifacts/$t-"*
  echo "== fuzzing $t for ${seconds}s (seeds: tests/fuzz/corpus/$t)"
  log="$out/fuzz_$t.log"
  rc=0
  # Leaks are errors too; a single input may take at most 10 s.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$out/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" \
      "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  grep -E "^(#[0-9]+ +DONE|Done |stat::number_of_executed_units|stat::peak_rss)" "$log" || true
  if [ $rc -ne 0 ]; then
    status=1
    echo "fuzz: $t FAILED (exit $rc); the end of its log:" >&2
    tail -n 60 "$log" >&2
    for a in "$out/artifacts/$t-"*; do
      [ -f "$a" ] || continue
      echo "fuzz: reproducer $a ($(stat -c %s "$a") bytes; run: $out/fuzz_$t $a):" >&2
      head -c 512 "$a" | od -A d -t x1 | head -n 33 >&2
    done
  else
    echo "fuzz: $t OK"
  fi
done
exit $status

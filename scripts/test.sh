#!/usr/bin/env bash
# Quick start, tests: sets everything up, builds and runs the whole suite.
# GPU tests skip on a host without a GPU; their reasons are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
status=0
meson test -C build --print-errorlogs "$@" || status=$?
# meson keeps a skipped test's output in its log: show why each one skipped.
grep -h "^SKIP:" build/meson-logs/testlog.txt 2>/dev/null | sort -u | sed 's/^/skipped: /' || true
exit $status

#!/usr/bin/env bash
# Quick start, tests: sets everything up, builds and runs the whole suite.
# GPU tests skip, saying why, on a host without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
meson test -C build --print-errorlogs "$@"

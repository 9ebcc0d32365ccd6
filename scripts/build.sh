#!/usr/bin/env bash
# Configures and builds ckjit into build/ (warnings are errors).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build -Dwerror=true
fi
ninja -C build

#!/usr/bin/env bash
# Quick start, main job: sets everything up, builds, then runs ckjit-demo.
# With a GPU it runs every op end to end and checks the results; without one
# it compiles the default op set for sm_90 and gfx90a into the cache and
# lists the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/tools/ckjit-demo "$@"

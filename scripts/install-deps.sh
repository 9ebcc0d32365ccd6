#!/usr/bin/env bash
# Installs ckjit's build and test dependencies on Debian 12 (run as root).
# Skips apt-get when everything is already there, so repeated runs are quick.
set -euo pipefail

packages=(build-essential meson ninja-build pkg-config python3
          libxxhash-dev libcmocka-dev libelf-dev libmsgpack-dev
          libamdhip64-dev libhiprtc-builtins5 libamd-comgr-dev rocm-device-libs
          clang libclang-rt-14-dev python3-pytest python3-setuptools python3-pip python3-wheel
          libhiredis-dev redis-server)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root (or install them yourself)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
# NVRTC (for NVIDIA targets) comes with the CUDA toolkit, not Debian: ckjit
# finds it in /usr/local/cuda/lib64 or LD_LIBRARY_PATH when present.

#!/usr/bin/env bash
# Downloads the Debian packages that the GPU machine lacks and unpacks them
# (no install) under .deps/root, for scripts/gpu-check.sh to use there:
#   libxxhash-dev libxxhash0 libcmocka-dev libcmocka0   (build and tests)
#   libelf-dev libelf1 libmsgpack-dev libmsgpackc2 zlib1g-dev (ckjit-inspect)
#   pkgconf-bin libpkgconf3                              (a pkg-config, used
#                                                         only where none is installed)
#   libhiredis-dev libhiredis0.14                        (the remote cache tier)
#   redis-tools liblzf1 libjemalloc2                     (a redis-server for
#                                                         bench/fleet.py --gpu)
# Run it on this (Debian) machine in the repository; .deps/ is not committed
# (add it to .git/info/exclude) and travels to the GPU machine as a carried
# path.  CKJIT_DEPS_DIR overrides the target directory (default: .deps).
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS=${CKJIT_DEPS_DIR:-.deps}
PKGS=(libxxhash-dev libxxhash0 libcmocka-dev libcmocka0 libelf-dev libelf1 libmsgpack-dev libmsgpackc2 zlib1g-dev pkgconf-bin libpkgconf3
      libhiredis-dev libhiredis0.14 redis-tools liblzf1 libjemalloc2)

mkdir -p "$DEPS/debs"
rm -rf "$DEPS/root"
mkdir -p "$DEPS/root"
cd "$DEPS/debs"
rm -f ./*.deb
if ! apt-get download -o APT::Sandbox::User=root "${PKGS[@]}"; then
  echo "fetch-deps.sh: apt-get download failed; running apt-get update and retrying" >&2
  apt-get update
  apt-get download -o APT::Sandbox::User=root "${PKGS[@]}"
fi
for deb in ./*.deb; do
  dpkg -x "$deb" ../root
done
cd - > /dev/null
rm -rf "$DEPS/root/usr/share/doc" "$DEPS/root/usr/share/man"
# Only what the GPU machine runs: the carried tree (with the working tree and
# a prewarmed cache) must stay under the device tool's 64 MiB.
rm -f "$DEPS"/root/usr/bin/redis-benchmark "$DEPS"/root/usr/bin/redis-check-aof \
  "$DEPS"/root/usr/bin/redis-cli
find "$DEPS/root" -name '*.a' -delete
# Symbolic links become plain copies: the copy to the GPU machine may not
# keep links (libxxhash.so -> libxxhash.so.0.8.1 and the like).
find "$DEPS/root" -type l | while read -r link; do
  cp -L --remove-destination "$link" "$link.tmp-copy" && mv -f "$link.tmp-copy" "$link"
done
echo "fetch-deps.sh: unpacked into $DEPS/root:"
ls "$DEPS/debs"
rm -rf "$DEPS/debs"
du -sh "$DEPS"

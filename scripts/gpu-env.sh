# Sourced by scripts/gpu-check.sh and scripts/gpu-compare.sh (bash, in the
# repo root, NOTES=() defined): the environment for building and running
# ckjit on a CUDA machine without network.  Adds to NOTES what it used.
ROOT=${ROOT:-$(pwd)}
export PATH=/opt/torch/.venv/bin:$PATH
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin

# ---- carried Debian packages ----------------------------------------------
DEPS_ROOT=$ROOT/.deps/root
DEPS_LIB=$DEPS_ROOT/usr/lib/x86_64-linux-gnu
if [ -d "$DEPS_ROOT/usr" ]; then
  # The .pc files name /usr (cmocka.pc even without ${prefix}): rewrite them
  # to point into .deps/root.
  PCDIR=$ROOT/.deps/pkgconfig-rewritten   # stable: meson may re-read it on a rebuild
  rm -rf "$PCDIR"
  mkdir -p "$PCDIR"
  for pc in "$DEPS_LIB"/pkgconfig/*.pc "$DEPS_ROOT"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] || continue
    sed -E "s#(^|[=[:space:]]|-[LI])/usr(/|[[:space:]]|\$)#\\1$DEPS_ROOT/usr\\2#g" "$pc" \
      > "$PCDIR/$(basename "$pc")"
  done
  export PKG_CONFIG_PATH="$PCDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export CPATH="$DEPS_ROOT/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$DEPS_LIB${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  NOTES+=("using carried packages from .deps/root ($(ls "$PCDIR" | tr '\n' ' '))")
else
  NOTES+=("no .deps/root: relying on system xxhash/cmocka (run scripts/fetch-deps.sh and carry .deps)")
fi
if ! command -v pkg-config > /dev/null 2>&1; then
  if command -v pkgconf > /dev/null 2>&1; then
    PKG_CONFIG=$(command -v pkgconf)
    export PKG_CONFIG
  elif [ -f "$DEPS_ROOT/usr/bin/pkgconf" ]; then
    chmod +x "$DEPS_ROOT/usr/bin/pkgconf" 2> /dev/null
    if "$DEPS_ROOT/usr/bin/pkgconf" --version > /dev/null 2>&1; then
      export PKG_CONFIG=$DEPS_ROOT/usr/bin/pkgconf   # meson reads PKG_CONFIG
      NOTES+=("no pkg-config on the machine: using the carried pkgconf")
    fi
  fi
  [ -n "${PKG_CONFIG:-}" ] || NOTES+=("no pkg-config at all: meson falls back to find_library")
fi
# A carried redis-server (bench/fleet.py --gpu), after the machine's own.
# redis-tools' one binary is also the server: it runs as the server when
# its name (argv[0]) is not redis-check-rdb.
if ! command -v redis-server > /dev/null 2>&1 && [ -f "$DEPS_ROOT/usr/bin/redis-check-rdb" ]; then
  chmod +x "$DEPS_ROOT/usr/bin/redis-check-rdb" 2> /dev/null
  mkdir -p "$ROOT/.deps/bin"
  ln -sf "$DEPS_ROOT/usr/bin/redis-check-rdb" "$ROOT/.deps/bin/redis-server"
  export PATH=$PATH:$ROOT/.deps/bin
  NOTES+=("redis-server: the carried one")
fi
# The runtime compiler must be loadable by libckjit.
if ! ldconfig -p 2> /dev/null | grep -q 'libnvrtc\.so'; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    if ls "$d"/libnvrtc.so* > /dev/null 2>&1; then
      export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
      NOTES+=("libnvrtc is not in the ld.so cache: added $d to LD_LIBRARY_PATH")
      break
    fi
  done
fi

# fresh_build_dir DIR SRC: removes the build directory DIR unless it was
# built from the sources now under SRC (a checksum kept in DIR).  The device
# tool copies files with their own modification times, so ninja can take
# outputs built from other sources (a later copy with older times) for up
# to date.  mark_build_dir DIR, after a successful build, records the sum.
fresh_build_dir() {
  local dir=$1 src=$2
  SOURCE_SUM=$(cd "$src" && find base cache runtime kernel_src include tools tests bench scripts meson.build \
                 -type f \( -name '*.[ch]' -o -name '*.cu' -o -name '*.py' -o -name '*.sh' -o -name 'meson.build' \) \
                 2> /dev/null | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-64)
  if [ -d "$dir" ] && [ "$(cat "$dir/.ckjit-source-sum" 2> /dev/null)" != "$SOURCE_SUM" ]; then
    rm -rf "$dir"
    NOTES+=("$dir: not built from these sources: rebuilt from scratch")
  fi
}
mark_build_dir() { echo "$SOURCE_SUM" > "$1/.ckjit-source-sum"; }

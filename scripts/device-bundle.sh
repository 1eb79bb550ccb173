#!/usr/bin/env bash
# Packs what a bare GPU machine lacks to build and test retain into .device/ (ignored by git),
# which the device tool carries: the Debian .deb files of the C/C++ libraries retain builds with
# (headers, CMake/pkg-config files, and the runtime closure of their shared libraries), pkgconf,
# PCRE2's source tarball, and Python wheels the tests and peers need at versions the machine's
# image does not hold.
# scripts/gpu-run.sh unpacks it there. Idempotent: files already downloaded are kept.
#
#   scripts/device-bundle.sh            # build or refresh .device/
#   scripts/device-bundle.sh --check    # only verify that .device/ is complete and small enough
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE="${RETAIN_DEVICE_BUNDLE:-.device}"  # the tests point this elsewhere
LIMIT_MIB=56  # the device tool carries 64 MiB in all; the working tree needs the rest

# The -dev packages give headers and link-time files; the rest are their run-time closure minus
# what every Linux has (glibc, libstdc++, libgcc). gpu-run.sh links only the libraries the
# machine itself lacks, so its own OpenSSL, zlib, ... stay in use where present.
DEV_PACKAGES=(
  libsentencepiece-dev libhdf5-dev libyaml-cpp-dev nlohmann-json3-dev
  libutf8proc-dev libcli11-dev libgtest-dev zlib1g-dev libcairo2-dev pkgconf pkgconf-bin libpkgconf3
  libjpeg62-turbo-dev libpng-dev libwebp-dev
)
RUNTIME_ROOTS=(
  libsentencepiece0 libhdf5-103-1 libhdf5-hl-100 libyaml-cpp0.7 libutf8proc2
  zlib1g libpkgconf3 libcairo2 libjpeg62-turbo libpng16-16 libwebp7
)
# PCRE2's source (built there by scripts/build-pcre2.sh: Debian 12's 10.42 lacks Unicode 16).
PCRE2_TARBALL=pcre2_10.46.orig.tar.gz
# Python wheels (pure Python, or manylinux for CPython 3.12) the image lacks at our pins.
WHEELS=(transformers==5.23.0 tokenizers==0.23.3 rouge==1.0.1 fuzzywuzzy==0.18.0)

runtime_closure() {
  # Packages owning every shared library the roots' libraries load, glibc/libstdc++/libgcc aside.
  local libs=()
  for pkg in "${RUNTIME_ROOTS[@]}"; do
    while read -r f; do
      [[ "$f" == *.so* && -f "$f" && ! -L "$f" ]] && libs+=("$f")
    done < <(dpkg -L "$pkg")
  done
  {
    printf '%s\n' "${RUNTIME_ROOTS[@]}"
    for f in "${libs[@]}"; do ldd "$f" | awk '/=>/ {print $3}'; done | sort -u |
      xargs -r -n1 readlink -f | while read -r lib; do
        dpkg -S "$lib" 2>/dev/null || dpkg -S "${lib#/usr}" 2>/dev/null || true
      done | cut -d: -f1
  } | sort -u | grep -v -x -E 'libc6|libstdc\+\+6|libgcc-s1'
}

check() {
  local ok=1
  for pkg in "${DEV_PACKAGES[@]}"; do
    ls "$BUNDLE/debs/${pkg}_"*.deb >/dev/null 2>&1 || { echo "missing: $BUNDLE/debs/$pkg"; ok=0; }
  done
  [ -s "$BUNDLE/runtime-packages.txt" ] || { echo "missing: $BUNDLE/runtime-packages.txt"; ok=0; }
  if [ -s "$BUNDLE/runtime-packages.txt" ]; then
    while read -r pkg; do
      ls "$BUNDLE/debs/${pkg}_"*.deb >/dev/null 2>&1 || { echo "missing: $BUNDLE/debs/$pkg"; ok=0; }
    done < "$BUNDLE/runtime-packages.txt"
  fi
  [ -s "$BUNDLE/src/$PCRE2_TARBALL" ] || { echo "missing: $BUNDLE/src/$PCRE2_TARBALL"; ok=0; }
  # The peers (kvpress and the transformers it pins), as scripts/peers/install-kvpress.sh lists them.
  [ -f "$BUNDLE/wheels-kvpress/.retain-stamp" ] ||
    { echo "missing: $BUNDLE/wheels-kvpress (the peers' wheels)"; ok=0; }
  for w in "${WHEELS[@]}"; do
    local name="${w%%==*}" version="${w##*==}"
    ls "$BUNDLE/wheels/${name}-${version}-"*.whl >/dev/null 2>&1 ||
      { echo "missing: $BUNDLE/wheels/$name-$version"; ok=0; }
  done
  local size_kib
  size_kib=$(du -sk "$BUNDLE" 2>/dev/null | cut -f1)
  echo "bundle: $BUNDLE, $((size_kib / 1024)) MiB (limit $LIMIT_MIB MiB)"
  [ "$size_kib" -le $((LIMIT_MIB * 1024)) ] || { echo "bundle too large"; ok=0; }
  [ $ok -eq 1 ] && echo "bundle complete" || { echo "bundle incomplete: run scripts/device-bundle.sh"; return 1; }
}

if [ "${1:-}" = "--check" ]; then
  check
  exit
fi

mkdir -p "$BUNDLE/debs" "$BUNDLE/wheels" "$BUNDLE/src"
runtime_closure > "$BUNDLE/runtime-packages.txt.tmp"
mv "$BUNDLE/runtime-packages.txt.tmp" "$BUNDLE/runtime-packages.txt"
mapfile -t runtime < "$BUNDLE/runtime-packages.txt"
need=()
for pkg in "${DEV_PACKAGES[@]}" "${runtime[@]}"; do
  ls "$BUNDLE/debs/${pkg}_"*.deb >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "device-bundle: downloading ${#need[@]} Debian packages"
  if ! (cd "$BUNDLE/debs" && apt-get download -q "${need[@]}"); then
    # A machine whose package lists were never fetched (or were cleaned) knows no versions yet.
    echo "device-bundle: refreshing the package lists and trying again"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -q
    (cd "$BUNDLE/debs" && apt-get download -q "${need[@]}")
  fi
fi

bash scripts/build-pcre2.sh --fetch "$BUNDLE/src/$PCRE2_TARBALL"

PYTHON="${RETAIN_PYTHON:-$HOME/.cache/retain/venv/bin/python}"
for w in "${WHEELS[@]}"; do
  name="${w%%==*}" version="${w##*==}"
  ls "$BUNDLE/wheels/${name}-${version}-"*.whl >/dev/null 2>&1 && continue
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$BUNDLE/wheels" "$w"
done
RETAIN_PYTHON="$PYTHON" bash scripts/peers/install-kvpress.sh --download "$BUNDLE/wheels-kvpress"
check

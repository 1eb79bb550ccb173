#!/usr/bin/env bash
# Builds PCRE2 10.46 into a prefix outside the clone. Why not Debian 12's libpcre2 (10.42): its
# Unicode tables stop at Unicode 14, and HF tokenizers 0.23 splits with Unicode 16 (\p{L}, \p{N}
# of CJK Extension H/I, Kawi, Kaktovik numerals, Garay, ...), so the pre-tokenizer regexes of
# Llama-3, Qwen2, DeepSeek or Tekken would split such text differently. PCRE2 10.45 moved to
# Unicode 16; 10.46 is the version Debian 13 ships, and its source comes from Debian's archive
# (the package's upstream tarball, checked against the SHA-256 that Debian's Sources index lists).
# Static, 8-bit only, with the JIT; ~15 s on 2 cores. Idempotent: a finished prefix holds a stamp.
#
#   scripts/build-pcre2.sh PREFIX              # download (or reuse) the tarball, build, install
#   scripts/build-pcre2.sh PREFIX TARBALL      # build from a tarball already here (GPU machines)
#   scripts/build-pcre2.sh --fetch FILE        # only download the tarball to FILE
set -euo pipefail

VERSION=10.46
TARBALL_NAME="pcre2_${VERSION}.orig.tar.gz"
SHA256=8d28d7f2c3b970c3a4bf3776bcbb5adfc923183ce74bc8df1ebaad8c1985bd07
MIRROR="${RETAIN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
URL="$MIRROR/pool/main/p/pcre2/$TARBALL_NAME"

fetch() {  # FILE: download to FILE (atomically) and check the checksum
  local file=$1
  if [ -f "$file" ] && echo "$SHA256  $file" | sha256sum -c --status; then return 0; fi
  mkdir -p "$(dirname "$file")"
  local cached="${RETAIN_HOME:-$HOME/.cache/retain}/src/$TARBALL_NAME"
  if [ -f "$cached" ] && echo "$SHA256  $cached" | sha256sum -c --status; then
    cp "$cached" "$file.part" && mv "$file.part" "$file"
    return 0
  fi
  echo "build-pcre2: downloading $URL"
  local ok=0
  if command -v curl >/dev/null; then
    curl -fsSL --retry 3 -o "$file.part" "$URL" || ok=$?
  else
    wget -q -O "$file.part" "$URL" || ok=$?
  fi
  if [ $ok -ne 0 ]; then
    rm -f "$file.part"
    echo "build-pcre2: could not download $URL (set RETAIN_DEBIAN_MIRROR to another Debian" \
      "mirror, or put the file at $file)" >&2
    return 1
  fi
  if ! echo "$SHA256  $file.part" | sha256sum -c --status; then
    rm -f "$file.part"
    echo "build-pcre2: $URL does not have SHA-256 $SHA256 (a changed or corrupt download)" >&2
    return 1
  fi
  mv "$file.part" "$file"
}

if [ "${1:-}" = "--fetch" ]; then
  fetch "${2:?--fetch needs a file name}"
  exit
fi

PREFIX="${1:?usage: build-pcre2.sh PREFIX [TARBALL]}"
STAMP="$PREFIX/.retain-pcre2"
[ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VERSION $SHA256" ] && exit 0

TARBALL="${2:-$(dirname "$PREFIX")/src/$TARBALL_NAME}"
if [ $# -ge 2 ]; then
  echo "$SHA256  $TARBALL" | sha256sum -c --status ||
    { echo "build-pcre2: $TARBALL is not PCRE2 $VERSION's tarball (SHA-256 differs)" >&2; exit 1; }
else
  fetch "$TARBALL"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/retain-pcre2.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "build-pcre2: building PCRE2 $VERSION into $PREFIX"
tar -xzf "$TARBALL" -C "$work"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Installed into PREFIX.tmp, renamed when complete: a killed build leaves no half prefix.
cmake -S "$work/pcre2-$VERSION" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$PREFIX.tmp" -DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DPCRE2_BUILD_PCRE2_8=ON -DPCRE2_BUILD_PCRE2_16=OFF \
  -DPCRE2_BUILD_PCRE2_32=OFF -DPCRE2_SUPPORT_JIT=ON -DPCRE2_SUPPORT_UNICODE=ON \
  -DPCRE2_BUILD_PCRE2GREP=OFF -DPCRE2_BUILD_TESTS=OFF -DPCRE2_SUPPORT_LIBBZ2=OFF \
  -DPCRE2_SUPPORT_LIBZ=OFF -DPCRE2_SUPPORT_LIBEDIT=OFF -DPCRE2_SUPPORT_LIBREADLINE=OFF \
  > "$work/configure.log" || { cat "$work/configure.log" >&2; exit 1; }
rm -rf "$PREFIX.tmp"
cmake --build "$work/build" -j "$(nproc)" --target install > "$work/build.log" ||
  { tail -50 "$work/build.log" >&2; exit 1; }
rm -rf "$PREFIX.tmp/share"  # man pages and HTML docs
echo "$VERSION $SHA256" > "$PREFIX.tmp/.retain-pcre2"
rm -rf "$PREFIX"
mv "$PREFIX.tmp" "$PREFIX"

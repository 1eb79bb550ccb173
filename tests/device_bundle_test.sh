#!/usr/bin/env bash
# scripts/device-bundle.sh makes a complete bundle under the device tool's size limit, and
# scripts/gpu-run.sh --dry-run accepts it; with a package missing, --dry-run names it and fails.
set -uo pipefail
src=$1 work=$2
export RETAIN_DEVICE_BUNDLE="$work/bundle"
mkdir -p "$work"
fail() { echo "FAIL $*"; exit 1; }

bash "$src/scripts/device-bundle.sh" > "$work/bundle.log" 2>&1 || fail "device-bundle.sh: $(tail -5 "$work/bundle.log")"
grep -q "bundle complete" "$work/bundle.log" || fail "no 'bundle complete' in: $(tail -3 "$work/bundle.log")"
grep "^bundle:" "$work/bundle.log"
bash "$src/scripts/gpu-run.sh" --dry-run > "$work/dry.log" 2>&1 || fail "--dry-run rejected a fresh bundle: $(cat "$work/dry.log")"
echo "ok   bundle complete and accepted by gpu-run.sh --dry-run"

# A second run downloads nothing.
bash "$src/scripts/device-bundle.sh" > "$work/again.log" 2>&1 || fail "second device-bundle.sh run"
! grep -q "downloading" "$work/again.log" || fail "second run downloaded again"

# A missing library is named and refused.
deb=$(ls "$RETAIN_DEVICE_BUNDLE"/debs/libyaml-cpp-dev_*.deb)
mv "$deb" "$work/"
if bash "$src/scripts/gpu-run.sh" --dry-run > "$work/dry2.log" 2>&1; then
  mv "$work/$(basename "$deb")" "$RETAIN_DEVICE_BUNDLE/debs/"
  fail "--dry-run accepted a bundle without libyaml-cpp-dev"
fi
mv "$work/$(basename "$deb")" "$RETAIN_DEVICE_BUNDLE/debs/"
grep -q "missing: .*libyaml-cpp-dev" "$work/dry2.log" || fail "error does not name the package: $(cat "$work/dry2.log")"
echo "ok   a bundle without libyaml-cpp-dev is refused, naming it"

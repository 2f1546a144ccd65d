#!/usr/bin/env bash
# Build the static pod pause binary (runtime/pause) and print its path.
# Static (crt-static) so that the pause image is that one file; copied out of
# cargo's release dir so that a later dynamic build cannot replace it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_cargo

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log=$(mktemp /var/tmp/rustpod-build.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! cargo rustc --locked --release -p rustpod-pause -- -C target-feature=+crt-static >"$log" 2>&1; then
	cat "$log" >&2
	die "building rustpod-pause failed"
fi
out=$CARGO_TARGET_DIR/pause/rustpod-pause
mkdir -p "${out%/*}"
cp "$CARGO_TARGET_DIR/release/rustpod-pause" "$out.tmp"
mv "$out.tmp" "$out"
if ldd "$out" 2>&1 | grep -q '=>'; then
	die "$out is dynamically linked; it must be static to run alone in the pause image"
fi
echo "$out"

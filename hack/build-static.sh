#!/usr/bin/env bash
# Build a workspace binary statically (crt-static) and print its path, for
# programs that must run alone in a container: the pod pause binary and the
# conformance checker. The binary is copied out of cargo's release dir so that
# a later dynamic `cargo build --release` cannot replace it.
# Usage: build-static.sh PACKAGE; prints the compiler output on failure.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_cargo

(($# == 1)) || die "usage: build-static.sh PACKAGE"
pkg=$1
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log=$(mktemp /var/tmp/rustpod-build.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! cargo rustc --locked --release -p "$pkg" --bin "$pkg" -- -C target-feature=+crt-static >"$log" 2>&1; then
	cat "$log" >&2
	die "building $pkg failed"
fi
out=$CARGO_TARGET_DIR/static/$pkg
mkdir -p "${out%/*}"
cp "$CARGO_TARGET_DIR/release/$pkg" "$out.tmp"
mv "$out.tmp" "$out"
# ldd lists no libraries for a static (or static-pie) binary.
if ldd "$out" 2>&1 | grep -q '=>'; then
	die "$out is dynamically linked; it must be static"
fi
echo "$out"

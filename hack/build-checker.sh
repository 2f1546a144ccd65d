#!/usr/bin/env bash
# Build the conformance checker (tests/checker) that tests copy into container rootfses,
# linked statically so it runs in a busybox rootfs, and print its path. The binary is copied
# out of cargo's release dir so that a later dynamic `cargo build --release` cannot replace it.
# Usage: build-checker.sh; prints the path on success, the compiler output on failure.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_cargo

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log=$(mktemp /var/tmp/rustpod-build.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! cargo rustc --locked -p rustpod-checker --release --bin rustpod-checker \
	-- -C target-feature=+crt-static >"$log" 2>&1; then
	cat "$log" >&2
	die "cargo rustc (rustpod-checker) failed"
fi
out=$CARGO_TARGET_DIR/checker/rustpod-checker
mkdir -p "${out%/*}"
cp "$CARGO_TARGET_DIR/release/rustpod-checker" "$out.tmp"
mv "$out.tmp" "$out"
# ldd says "not a dynamic executable" (or "statically linked" for static-pie) and lists no libraries.
if ldd "$out" 2>&1 | grep -q '=>'; then
	die "$out is dynamically linked; it must be static to run in a busybox rootfs"
fi
echo "$out"

#!/usr/bin/env bash
# Build the workspace binaries (rustpod, containerd-shim-rustpod-v1) quietly.
# Usage: build.sh [--release]; prints nothing on success, the compiler output on failure.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_cargo

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log=$(mktemp /var/tmp/rustpod-build.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! cargo build --locked --bins "$@" >"$log" 2>&1; then
	cat "$log" >&2
	die "cargo build failed"
fi

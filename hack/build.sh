#!/usr/bin/env bash
# Build the workspace binaries (rustpod, containerd-shim-rustpod-v1) quietly.
# Usage: build.sh [--release]; prints nothing on success, the compiler output on failure.
#
# rustpod and the shim are linked static (glibc's crt-static, libseccomp's
# archive): each container costs several executions of them (shim start, the
# shim server, its create helper, the CLI), and a static binary starts without
# the dynamic loader's work and maps no shared libraries. `cargo rustc` sets
# the flag on those two binaries only; proc-macros cannot be built static.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_cargo

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log=$(mktemp /var/tmp/rustpod-build.XXXXXX)
trap 'rm -f "$log"' EXIT
static=(rustpod:rustpod containerd-shim-rustpod-v1:containerd-shim-rustpod-v1)

build() {
	cargo build --locked --workspace --bins --exclude rustpod --exclude containerd-shim-rustpod-v1 "$@" || return
	local pkg_bin
	for pkg_bin in "${static[@]}"; do
		cargo rustc --locked "$@" -p "${pkg_bin%%:*}" --bin "${pkg_bin#*:}" -- -C target-feature=+crt-static || return
	done
}

if ! build "$@" >"$log" 2>&1; then
	cat "$log" >&2
	die "cargo build failed"
fi
dir=$CARGO_TARGET_DIR/$([[ " $* " == *" --release "* ]] && echo release || echo debug)
for pkg_bin in "${static[@]}"; do
	# ldd lists no libraries for a static (or static-pie) binary.
	if ldd "$dir/${pkg_bin#*:}" 2>&1 | grep -q '=>'; then
		die "$dir/${pkg_bin#*:} is dynamically linked; it must be static"
	fi
done

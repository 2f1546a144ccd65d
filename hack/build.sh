#!/usr/bin/env bash
# Build the workspace binaries (rustpod, containerd-shim-rustpod-v1) quietly.
# Usage: build.sh [--release]; prints nothing on success, the compiler output on failure.
#
# rustpod and the shim are linked static (glibc's crt-static, libseccomp's
# archive): each container costs several executions of them (shim start, the
# shim server, its create helper, the CLI), and a static binary starts without
# the dynamic loader's work and maps no shared libraries. They are also linked
# at a fixed address (relocation-model=static), as Debian's runc, containerd
# and its Go shim are: a static-pie binary relocates ~480 KiB of data at every
# start, a page fault and a 4 KiB copy per page (~1 ms of CPU per container
# through the shim, and that much RSS in every long-lived shim). The price is
# that the binary's own image is not randomized; stacks, heap and mappings
# still are. `cargo rustc` sets the flags on those two binaries only;
# proc-macros cannot be built static.
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
		cargo rustc --locked "$@" -p "${pkg_bin%%:*}" --bin "${pkg_bin#*:}" -- -C target-feature=+crt-static -C relocation-model=static || return
	done
}

if ! build "$@" >"$log" 2>&1; then
	cat "$log" >&2
	die "cargo build failed"
fi
dir=$CARGO_TARGET_DIR/$([[ " $* " == *" --release "* ]] && echo release || echo debug)
for pkg_bin in "${static[@]}"; do
	# A static executable at a fixed address has no program interpreter and is
	# of ELF type EXEC (a PIE would be DYN).
	if ! LC_ALL=C readelf -hl "$dir/${pkg_bin#*:}" | awk '/Type:/ {exec = $2 == "EXEC"} /INTERP/ {interp = 1} END {exit !(exec && !interp)}'; then
		die "$dir/${pkg_bin#*:} is not a static non-PIE executable"
	fi
done

# The binaries' link order (runtime/ and shim/symbol-order.txt) names release
# symbols, whose hashes change with the toolchain and Cargo.lock; lld skips
# stale names silently, so say how many still match and when to regenerate.
if [[ " $* " == *" --release "* ]]; then
	# (symbol-order.sh's argument, the package's directory, the binary)
	for entry in rustpod:runtime:rustpod shim:shim:containerd-shim-rustpod-v1; do
		IFS=: read -r which pkg binary <<<"$entry"
		order=$pkg/symbol-order.txt
		[[ -f $order ]] || continue
		total=$(sort -u "$order" | wc -l)
		found=$(comm -12 <(nm --defined-only "$dir/$binary" | awk '{print $3}' | sort -u) <(sort -u "$order") | wc -l)
		percent=$((total ? found * 100 / total : 100))
		echo "build.sh: $found of $total names in $order ($percent%) are in this build" >&2
		# 88 % cost a create 0.8 MiB of RSS (bench/README.md, 2026-12-07)
		if ((percent < 95)); then
			echo "build.sh: warning: only $found of $total names in $order ($percent%) are in this build;" \
				"the binary's pages are laid out by a stale list: run hack/symbol-order.sh $which" >&2
		fi
	done
fi

# Shared helpers for the hack/ scripts; source it, do not run it.
# shellcheck shell=bash

die() { echo "${0##*/}: $*" >&2; exit 1; }

need_root() { [[ $(id -u) == 0 ]] || die "must run as root"; }

# abspath PATH: absolute path, the last components need not exist.
abspath() { realpath -m -- "$1"; }

# alive PID: true if PID is a running process (a zombie counts as dead).
alive() {
	local stat
	[[ $1 =~ ^[0-9]+$ ]] || return 1
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat:0:1} != Z ]]
}

# wait_dead PID SECONDS: wait until PID is gone; false on timeout.
wait_dead() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		alive "$1" || return 0
		sleep 0.1
	done
	! alive "$1"
}

# ctr_beside CONTAINERD: the ctr that goes with a containerd binary: the one beside it when it is
# named by path (sid's 2.x), else the one on PATH.
ctr_beside() { if [[ $1 == */* ]]; then echo "${1%/*}/ctr"; else echo ctr; fi; }

# Where cargo builds; outside the checkout so CI and sessions reuse it.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/rustpod-target}

# need_cargo: fail with a clear reason when there is no Rust toolchain.
need_cargo() { command -v cargo >/dev/null || die "cargo not found: install a Rust toolchain (rustup) first"; }

# test_env: build the binaries under test and the test helpers, and export what the tests read:
# RUSTPOD_BIN, RUSTPOD_SHIM_BIN, RUNC_BIN (the oracle, runc on PATH unless set),
# RUSTPOD_CHECKER_BIN, RUSTPOD_PAUSE_BIN and, unless RUSTPOD_CONTAINERD is set,
# RUSTPOD_CONTAINERD/RUSTPOD_CTR: containerd 2.x, which Debian 12 lacks, fetched from sid and
# unpacked (not installed) under /var/tmp on first use, for shim_containerd2.rs and the CRI tests
# under 2.x, beside the host's containerd 1.6 that every other test uses.
# hack/test.sh and hack/test-one.sh share it, so one test runs as it does in the whole suite.
test_env() {
	local hack containerd2
	hack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	"$hack/build.sh"
	RUSTPOD_CHECKER_BIN=$("$hack/build-checker.sh") || return
	RUSTPOD_PAUSE_BIN=$("$hack/build-pause.sh") || return
	export RUSTPOD_CHECKER_BIN RUSTPOD_PAUSE_BIN
	export RUSTPOD_BIN=$CARGO_TARGET_DIR/debug/rustpod
	export RUSTPOD_SHIM_BIN=$CARGO_TARGET_DIR/debug/containerd-shim-rustpod-v1
	RUNC_BIN=${RUNC_BIN:-$(command -v runc)} || die "runc not found: run hack/install-deps.sh first"
	export RUNC_BIN
	if [[ -z ${RUSTPOD_CONTAINERD:-} ]]; then
		containerd2=$("$hack/sid-packages.sh" containerd) || return
		echo "== from Debian sid (name version dir): $containerd2"
		containerd2=${containerd2##* }
		export RUSTPOD_CONTAINERD=$containerd2/usr/bin/containerd RUSTPOD_CTR=$containerd2/usr/bin/ctr
	fi
}

# print_skips LOG: the skipped tests recorded in LOG (RUSTPOD_SKIP_LOG), with their reasons.
print_skips() {
	[[ -s $1 ]] || return 0
	echo
	echo "== skipped tests (could not run on this machine) =="
	sort -u "$1"
}

# build_floor: the benchmark's floor row (hack/floor.c, static), rebuilt when its source changes;
# prints its path.
build_floor() {
	local floor=/var/tmp/rustpod-bench-floor src
	src=$(dirname "${BASH_SOURCE[0]}")/floor.c
	if [[ ! -x $floor || $src -nt $floor ]]; then
		command -v cc >/dev/null || die "cc missing (install build-essential)"
		cc -O2 -static -Wall -o "$floor.tmp" "$src" || die "cc $src failed"
		mv -f "$floor.tmp" "$floor"
	fi
	echo "$floor"
}

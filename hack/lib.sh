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

#!/usr/bin/env bash
# The whole test suite on a fresh machine: install dependencies, build, then run
# the unit tests and the integration tests against real containers and containerd.
# Tests that cannot run here are listed at the end with their reasons. Then the QEMU guest
# suites run what this host cannot (pure cgroup v2; systemd as PID 1 on cgroup v2).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

hack=$(dirname "${BASH_SOURCE[0]}")
cd "$hack/.."
"$hack/install-deps.sh"
# The sid guest's image (debootstrap, about 4 minutes on a fresh machine, mostly download and
# unpack) is built while the host builds and tests; its guest waits for it at the end.
guests=${RUSTPOD_GUESTS:-1} image_pid= image_log=$(mktemp /var/tmp/rustpod-guest-sid-image.XXXXXX)
if [[ $guests != 0 ]]; then
	"$hack/guest-sid.sh" --image-only >"$image_log" 2>&1 &
	image_pid=$!
fi
trap 'rm -f "$image_log"' EXIT
"$hack/build.sh"
RUSTPOD_CHECKER_BIN=$("$hack/build-checker.sh"); export RUSTPOD_CHECKER_BIN
RUSTPOD_PAUSE_BIN=$("$hack/build-pause.sh"); export RUSTPOD_PAUSE_BIN

export RUSTPOD_BIN=$CARGO_TARGET_DIR/debug/rustpod
export RUSTPOD_SHIM_BIN=$CARGO_TARGET_DIR/debug/containerd-shim-rustpod-v1
export RUNC_BIN=${RUNC_BIN:-$(command -v runc)}
# containerd 2.x, which Debian 12 lacks: sid's, fetched and unpacked (not installed) under
# /var/tmp on the first run, for shim_containerd2.rs and the CRI tests under 2.x, beside the
# host's containerd 1.6 that every other test uses.
if [[ -z ${RUSTPOD_CONTAINERD:-} ]]; then
	containerd2=$("$hack/sid-packages.sh" containerd)
	echo "== from Debian sid (name version dir): $containerd2"
	containerd2=${containerd2##* }
	export RUSTPOD_CONTAINERD=$containerd2/usr/bin/containerd RUSTPOD_CTR=$containerd2/usr/bin/ctr
fi
export RUSTPOD_SKIP_LOG=$(mktemp /var/tmp/rustpod-skips.XXXXXX)
trap 'rm -f "$RUSTPOD_SKIP_LOG" "$image_log"' EXIT

status=0
cargo test --locked --workspace --no-fail-fast -- --test-threads="${RUSTPOD_TEST_THREADS:-4}" "$@" || status=$?

# A pod's life again under containerd 2.x's CRI (version 3 config), with each handler: rustpod,
# and runc through 2.x's own runc shim.
if (($# == 0)); then
	for handler in rustpod runc; do
		echo
		echo "== CRI pod lifecycle under containerd 2.x ($RUSTPOD_CONTAINERD), handler $handler =="
		RUSTPOD_CRI_CONTAINERD=$RUSTPOD_CONTAINERD RUSTPOD_CRI_HANDLER=$handler \
			cargo test --locked -p rustpod-cri-tests --test pod_lifecycle -- --test-threads=2 || status=1
	done
fi

if [[ -s $RUSTPOD_SKIP_LOG ]]; then
	echo
	echo "== skipped tests (could not run on this machine) =="
	sort -u "$RUSTPOD_SKIP_LOG"
fi

# The guest suites (this host is cgroup v1 without systemd): pure cgroup v2, then a
# Debian sid node (its kernel, systemd 262 on cgroup v2, containerd 2.1, runc 1.3).
# RUSTPOD_GUESTS=0 leaves them out, loudly.
echo
if [[ $guests == 0 ]]; then
	echo "== SKIP the QEMU guest suites (cgroup v2, systemd): RUSTPOD_GUESTS=0; CI runs them ==" >&2
else
	echo "== cgroup v2 guest suite (hack/guest-v2.sh) =="
	"$hack/guest-v2.sh" --no-build || status=1
	echo
	echo "== sid guest suite (hack/guest-sid.sh) =="
	if wait "$image_pid"; then
		"$hack/guest-sid.sh" --no-build || status=1
	else
		cat "$image_log" >&2
		echo "== the sid guest's image could not be built: its suite did not run ==" >&2
		status=1
	fi
fi
exit "$status"

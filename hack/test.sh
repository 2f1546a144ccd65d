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
# unpack) is built while the host builds.
guests=${RUSTPOD_GUESTS:-1} image_pid= image_log=$(mktemp /var/tmp/rustpod-guest-sid-image.XXXXXX)
if [[ $guests != 0 ]]; then
	"$hack/guest-sid.sh" --image-only >"$image_log" 2>&1 &
	image_pid=$!
fi
trap 'rm -f "$image_log"' EXIT
test_env
export RUSTPOD_SKIP_LOG=$(mktemp /var/tmp/rustpod-skips.XXXXXX)
# The image archives the containerd tests import, built once per run (make-oci-image.sh).
export RUSTPOD_IMAGE_CACHE=$(mktemp -d /var/tmp/rustpod-images.XXXXXX)

status=0 built= image= one_pid= one_log=$(mktemp /var/tmp/rustpod-guest-sid-one.XXXXXX)
trap 'rm -rf "$RUSTPOD_SKIP_LOG" "$image_log" "$one_log" "$RUSTPOD_IMAGE_CACHE"' EXIT
# The layout is rustfmt's (rustfmt.toml), so a change's diff holds only what it changes.
cargo fmt --all --check || { echo "== cargo fmt --check failed: run cargo fmt ==" >&2; status=1; }
# Build first: the sid guest's criu files then run in a one-vCPU guest beside the host's tests
# (a host core would idle under it later; beside the two-vCPU guest it slows that one by half).
cargo test --locked --workspace --no-run && built=1
if [[ $guests != 0 ]]; then
	wait "$image_pid" && image=ok || image=failed
fi
if [[ $built && $image == ok ]]; then
	# Its vCPU before the host's tests: they are native and wait on I/O, it is TCG and holds the
	# v2 guest back until it ends (run 72: 550-583 s a criu file beside them, 171-244 s alone).
	nice -n -5 "$hack/guest-sid.sh" --no-build --part one-vcpu >"$one_log" 2>&1 &
	one_pid=$!
fi
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
	# CRI's state order under 2.x: each test answers on the rustpod handler, then on runc's, in one
	# containerd (here, not in the sid guest, where TCG made it 111 s of CI's critical path).
	echo
	echo "== CRI state order under containerd 2.x ($RUSTPOD_CONTAINERD), handlers rustpod and runc =="
	RUSTPOD_CRI_CONTAINERD=$RUSTPOD_CONTAINERD \
		cargo test --locked -p rustpod-cri-tests --test state_order -- --test-threads=2 || status=1
fi

print_skips "$RUSTPOD_SKIP_LOG"

# The sid suites and the guests (this host is cgroup v1 without systemd): sid's runc 1.3, crun
# 1.28, containerd 2.1, docker and podman on this host's kernel; then pure cgroup v2; then a
# Debian sid node (its kernel, systemd 262 on cgroup v2, containerd 2.1, runc 1.3).
# RUSTPOD_GUESTS=0 leaves them out, loudly.
echo
if [[ $guests == 0 ]]; then
	echo "== SKIP the QEMU guest suites (cgroup v2, systemd): RUSTPOD_GUESTS=0; CI runs them ==" >&2
else
	# First sid's programs on this host's kernel, natively (beside the one-vCPU guest, if it runs).
	echo "== sid's userland on this host's kernel (hack/guest-sid.sh --part host) =="
	if [[ $image == ok ]]; then
		"$hack/guest-sid.sh" --no-build --part host || status=1
	fi
	echo
	# The v2 guest on one vCPU beside the one-vCPU guest when that one is still running (one vCPU
	# a core), else on two: in run 73 the criu files outlasted the host's phase by 10 minutes, a
	# core idle, while two vCPUs beside one (three on two cores) stalled the v2 guest in run 72.
	one_status=0 v2_cpus=2
	[[ $one_pid ]] && alive "$one_pid" && v2_cpus=1
	echo "== cgroup v2 guest suite (hack/guest-v2.sh, vCPUs: $v2_cpus) =="
	RUSTPOD_V2_GUEST_CPUS=$v2_cpus "$hack/guest-v2.sh" --no-build || status=1
	[[ $one_pid ]] && { wait "$one_pid" || one_status=$?; }
	echo
	echo "== sid guest suite (hack/guest-sid.sh) =="
	if [[ $image == ok ]]; then
		"$hack/guest-sid.sh" --no-build --part main || status=1
	else
		cat "$image_log" >&2
		echo "== the sid guest's image could not be built: its suite did not run ==" >&2
		status=1
	fi
	if [[ $one_pid ]]; then
		((one_status == 0)) || status=1
		cat "$one_log"
	elif [[ $image == ok ]]; then
		echo "== the sid guest's files marked ONE_VCPU=1 did not run: the build failed ==" >&2
		status=1
	fi
fi
exit "$status"

#!/usr/bin/env bash
# The whole test suite on a fresh machine: install dependencies, build, then run
# the unit tests and the integration tests against real containers and containerd.
# Tests that cannot run here are listed at the end with their reasons.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

hack=$(dirname "${BASH_SOURCE[0]}")
cd "$hack/.."
"$hack/install-deps.sh"
"$hack/build.sh"
RUSTPOD_CHECKER_BIN=$("$hack/build-checker.sh"); export RUSTPOD_CHECKER_BIN
RUSTPOD_PAUSE_BIN=$("$hack/build-pause.sh"); export RUSTPOD_PAUSE_BIN

export RUSTPOD_BIN=$CARGO_TARGET_DIR/debug/rustpod
export RUSTPOD_SHIM_BIN=$CARGO_TARGET_DIR/debug/containerd-shim-rustpod-v1
export RUNC_BIN=${RUNC_BIN:-$(command -v runc)}
export RUSTPOD_SKIP_LOG=$(mktemp /var/tmp/rustpod-skips.XXXXXX)
trap 'rm -f "$RUSTPOD_SKIP_LOG"' EXIT

status=0
cargo test --locked --workspace --no-fail-fast -- --test-threads="${RUSTPOD_TEST_THREADS:-4}" "$@" || status=$?

if [[ -s $RUSTPOD_SKIP_LOG ]]; then
	echo
	echo "== skipped tests (could not run on this machine) =="
	sort -u "$RUSTPOD_SKIP_LOG"
fi

# The cgroup v2 tests, in a QEMU guest (this host is cgroup v1). RUSTPOD_GUESTS=0 leaves it out.
echo
if [[ ${RUSTPOD_GUESTS:-1} == 0 ]]; then
	echo "== SKIP the cgroup v2 guest suite: RUSTPOD_GUESTS=0 =="
else
	echo "== cgroup v2 guest suite (hack/guest-v2.sh) =="
	"$hack/guest-v2.sh" --no-build || status=1
fi
exit "$status"

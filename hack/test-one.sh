#!/usr/bin/env bash
# One integration test file, with the environment the whole suite gives it (hack/lib.sh's
# test_env: builds rustpod, the shim, the checker and pause helpers, and sets RUSTPOD_BIN, RUNC_BIN,
# RUSTPOD_CONTAINERD, ...). Run as root from the checkout, after hack/install-deps.sh (or a first
# hack/test.sh) has installed the dependencies.
# Usage: test-one.sh [--cri] FILE [LIBTEST ARGS...]
#   hack/test-one.sh cli_query                          # tests/tests/cli_query.rs
#   hack/test-one.sh cli_query spec_ --nocapture        # tests whose name holds spec_, their output
#   hack/test-one.sh --cri pod_lifecycle                # tests/cri/tests/pod_lifecycle.rs
# Skipped tests are listed at the end with their reasons.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

usage() { die "usage: ${0##*/} [--cri] FILE [LIBTEST ARGS...]"; }
pkg=rustpod-tests dir=tests/tests
if [[ ${1:-} == --cri ]]; then
	pkg=rustpod-cri-tests dir=tests/cri/tests
	shift
fi
(($# >= 1)) || usage
file=${1%.rs}
file=${file##*/}
shift
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -f $dir/$file.rs ]] || die "no test file $dir/$file.rs"

test_env
RUSTPOD_SKIP_LOG=$(mktemp /var/tmp/rustpod-skips.XXXXXX)
RUSTPOD_IMAGE_CACHE=$(mktemp -d /var/tmp/rustpod-images.XXXXXX)
export RUSTPOD_SKIP_LOG RUSTPOD_IMAGE_CACHE
trap 'rm -rf "$RUSTPOD_SKIP_LOG" "$RUSTPOD_IMAGE_CACHE"' EXIT

status=0
cargo test --locked -p "$pkg" --test "$file" -- --test-threads="${RUSTPOD_TEST_THREADS:-2}" "$@" || status=$?
print_skips "$RUSTPOD_SKIP_LOG"
exit "$status"

#!/bin/bash
# Runs in the systemd guest (hack/guest-systemd.sh), from the unit rustpod-guest-tests.service:
# every test file of OUT/tests.list with the test binary the host built (OUT/binaries) and the
# environment in OUT/env; writes per-file logs, OUT/summary, OUT/skips and OUT/status (0 when
# nothing failed). Usage: systemd-tests.sh OUT
set -uo pipefail
out=$1
set -a
. "$out/env"
set +a
export HOME=/root RUSTPOD_SKIP_LOG=$out/skips
: >"$RUSTPOD_SKIP_LOG"
mkdir -p "$out/logs"
t0=$(date +%s)
echo "guest booted to its test unit in $(cut -d' ' -f1 /proc/uptime) s" >"$out/timing"

{
	echo "guest: kernel $(uname -r); $(systemctl --version | head -n1); /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup)" \
		"(controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control)); $(containerd --version | cut -d' ' -f1,3); $(runc --version | head -n1)"
} >"$out/summary"

passed=0 failed=0 status=0
while read -r pkg test filters; do
	[[ -z $pkg || $pkg == \#* ]] && continue
	bin=$(awk -v t="$test" '$1 == t {print $2; exit}' "$out/binaries")
	if [[ ! -x $bin ]]; then
		echo "$test: no test binary (cargo test --no-run did not build it)" >>"$out/summary"
		status=1
		continue
	fi
	dir=$REPO/tests
	[[ $pkg == rustpod-cri-tests ]] && dir=$REPO/tests/cri
	log=$out/logs/$test.log
	# shellcheck disable=SC2086
	(cd "$dir" && "$bin" --test-threads="$RUSTPOD_TEST_THREADS" $filters) >"$log" 2>&1
	rc=$?
	result=$(grep -E '^test result:' "$log" | tail -n1)
	p=$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$result")
	f=$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$result")
	passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0}))
	if ((rc != 0)); then
		status=1
		[[ $result ]] || failed=$((failed + 1))
		echo "$test: ${p:-0} passed, ${f:-?} failed (exit $rc; log: logs/$test.log)" >>"$out/summary"
		grep -E '^test .* FAILED$' "$log" | sed 's/^/    /' >>"$out/summary"
		# The first lines of each failure's panic message.
		grep -A3 -E "^---- .* stdout ----$" "$log" | grep -vE '^(--|\s*$)' | cut -c1-300 | head -n 40 | sed 's/^/    /' >>"$out/summary"
	else
		echo "$test: ${p:-0} passed, 0 failed" >>"$out/summary"
	fi
done <"$out/tests.list"

skipped=$(sort -u "$RUSTPOD_SKIP_LOG" | grep -c '^SKIP ')
echo "total: $passed passed ($skipped of them skipped, listed below), $failed failed" >>"$out/summary"
echo "tests ran in $(($(date +%s) - t0)) s" >>"$out/timing"
echo "$status" >"$out/status"
sync

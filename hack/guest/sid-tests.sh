#!/bin/bash
# Runs in the sid guest (hack/guest-sid.sh), from the unit rustpod-guest-tests.service, or in
# sid's userland on the host's kernel (hack/guest/sid-root.sh):
# every test file of OUT/tests.list with the test binary the host built (OUT/binaries) and the
# environment in OUT/env; writes per-file logs, OUT/summary, OUT/skips and OUT/status (0 when
# nothing failed). OUT/progress records each finished file, so that a boot after a kernel panic
# (hack/guest-sid.sh) goes on from the file that was running. The files marked ONE_VCPU=1 run in
# a guest of their own (guest-sid.sh splits the list). Usage: sid-tests.sh OUT
set -uo pipefail
out=$1
set -a
. "$out/env"
set +a
# The image archives the containerd tests import, built once per boot (make-oci-image.sh), on
# the guest's own disk, which the boot's -snapshot discards.
export HOME=/root RUSTPOD_SKIP_LOG=$out/skips RUSTPOD_IMAGE_CACHE=/var/tmp/rustpod-images
mkdir -p "$out/logs"
t0=$(date +%s)
# (In the sid root on the host, /run is its own and the uptime the host's.)
[[ ! -d /run/systemd/system ]] || echo "guest booted to its test unit in $(cut -d' ' -f1 /proc/uptime) s" >>"$out/timing"

# progress: one line "INDEX PASSED FAILED STATUS" per finished file of tests.list.
done_files=0 passed=0 failed=0 status=0
if [[ -s $out/progress ]]; then
	read -r done_files passed failed status < <(awk '{n=$1; p+=$2; f+=$3; if ($4) s=1} END {print n+0, p+0, f+0, s+0}' "$out/progress")
	# After a panic, or after the one-vCPU boot that ran the panicking file alone.
	if [[ -f $out/one-file ]]; then
		echo "(the guest booted again on one vCPU after a kernel panic; running file $((done_files + 1)) alone)" >>"$out/summary"
	else
		echo "(the guest booted again; going on after file $done_files)" >>"$out/summary"
	fi
else
	: >"$RUSTPOD_SKIP_LOG"
	echo "guest: kernel $(uname -r); $(systemctl --version | head -n1); /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup)" \
		"(controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || echo 'none, not v2')); $(containerd --version | cut -d' ' -f1,3);" \
		"$(runc --version | head -n1); $(crun --version | head -n1); criu $(criu --version | sed -n 's/^Version: //p')" >"$out/summary"
fi

# A hung file is stopped after this long; what was running and what containerd said are logged.
file_timeout=${RUSTPOD_GUEST_FILE_TIMEOUT:-600}
diagnose() {
	echo "=== $1 did not finish within $file_timeout s: processes, units, containerd logs ==="
	ps -eo pid,ppid,stat,etime,args --forest | grep -v ' \[' | cut -c1-200
	systemctl list-units --no-pager --type=scope,slice | cut -c1-160
	local log
	for log in $(ls -t /var/tmp/rustpod-tests/*/containerd.log 2>/dev/null | head -n 2); do
		echo "--- $log"
		tail -n 60 "$log" | cut -c1-1500
	done
}

index=0
while read -r line; do
	[[ -z $line || $line == \#* ]] && continue
	index=$((index + 1))
	((index > done_files)) || continue
	# Leading VAR=value words are the file's environment (RUSTPOD_CRI_HANDLER=runc …).
	envs=()
	while [[ $line =~ ^([A-Z_]+=[^ ]*)\ +(.*)$ ]]; do
		envs+=("${BASH_REMATCH[1]}") line=${BASH_REMATCH[2]}
	done
	read -r pkg test filters <<<"$line"
	name=$test${envs[*]:+ (${envs[*]})}
	bin=$(awk -v t="$test" '$1 == t {print $2; exit}' "$out/binaries")
	if [[ ! -x $bin ]]; then
		echo "$name: no test binary (cargo test --no-run did not build it)" >>"$out/summary"
		status=1
		echo "$index 0 0 1" >>"$out/progress"
		continue
	fi
	dir=$REPO/tests
	[[ $pkg == rustpod-cri-tests ]] && dir=$REPO/tests/cri
	log=$out/logs/$test${envs[*]:+-${envs[*]//[^A-Za-z0-9]/_}}.log
	started=$(date +%s)
	# --report-time (unstable in libtest; RUSTC_BOOTSTRAP lets a stable test binary take it): each
	# test's own time, so that OUT/test-times shows where the guest's minutes go.
	# shellcheck disable=SC2086
	(cd "$dir" && exec timeout -k 10 "$file_timeout" env RUSTC_BOOTSTRAP=1 "${envs[@]}" "$bin" \
		--test-threads="$RUSTPOD_TEST_THREADS" -Z unstable-options --report-time $filters) >"$log" 2>&1
	rc=$?
	took="$(($(date +%s) - started)) s"
	awk -v f="$name" 'match($0, /^test .* \.\.\. [a-zA-Z]+ <[0-9.]+s>$/) {
		t = $NF; gsub(/[<>s]/, "", t); print t, f ": " $2 }' "$log" >>"$out/test-times"
	((rc != 124)) || diagnose "$test" >>"$log" 2>&1
	result=$(grep -E '^test result:' "$log" | tail -n1)
	p=$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$result")
	f=$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$result")
	failed_before=$failed
	passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0}))
	if ((rc != 0)); then
		status=1
		[[ $result ]] || failed=$((failed + 1))
		echo "$name: ${p:-0} passed, ${f:-?} failed (exit $rc, $took; log: logs/${log##*/})" >>"$out/summary"
		grep -E '^test .* FAILED$' "$log" | sed 's/^/    /' >>"$out/summary"
		# The first lines of each failure's panic message.
		grep -A3 -E "^---- .* stdout ----$" "$log" | grep -vE '^(--|\s*$)' | cut -c1-300 | head -n 40 | sed 's/^/    /' >>"$out/summary"
	else
		echo "$name: ${p:-0} passed, 0 failed ($took)" >>"$out/summary"
	fi
	echo "$index ${p:-0} $((failed - failed_before)) $((rc != 0))" >>"$out/progress"
	sync
	# A boot after a kernel panic runs the file that panicked alone, on one vCPU (guest-sid.sh).
	if [[ -f $out/one-file ]]; then
		rm -f "$out/one-file"
		touch "$out/one-file-done"
		sync
		exit 0
	fi
done <"$out/tests.list"

skipped=$(sort -u "$RUSTPOD_SKIP_LOG" | grep -c '^SKIP ')
echo "total: $passed passed ($skipped of them skipped, listed below), $failed failed" >>"$out/summary"
echo "tests ran in $(($(date +%s) - t0)) s" >>"$out/timing"
echo "$status" >"$out/status"
sync

#!/bin/bash
# Runs in the sid guest (hack/guest-sid.sh --bench), from the unit rustpod-guest-tests.service:
# hack/bench.py against the guest's runc and crun on cgroup v2, with the release binaries the
# host built and the floor it copied to OUT/floor. Writes OUT/bench (bench.py's results),
# OUT/summary (the versions and bench.py's table) and OUT/status; with --keep, OUT/bench/strace.
# Usage: sid-bench.sh OUT [BENCH.PY OPTIONS]
set -uo pipefail
out=$1
shift
set -a
. "$out/env"
set +a
export HOME=/root
echo "guest booted to its bench unit in $(cut -d' ' -f1 /proc/uptime) s" >>"$out/timing"
echo "guest: kernel $(uname -r); $(systemctl --version | head -n1); /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup);" \
	"$(runc --version | head -n1); $(crun --version | head -n1); $(nproc) vCPUs under TCG" >"$out/summary"
t0=$(date +%s)
# bench.py needs no matplotlib: without it there is no chart, only the tables.
python3 -B "$REPO/hack/bench.py" --bin-dir "$CARGO_TARGET_DIR/release" --floor-bin "$out/floor" \
	--work /var/tmp/rustpod-bench --out "$out/bench" "$@" >"$out/bench.txt" 2>"$out/bench.log"
rc=$?
# With --keep, bench.py leaves its work dir: its strace logs go out with the results.
if [[ -d /var/tmp/rustpod-bench ]]; then
	mkdir -p "$out/bench/strace"
	cp -r /var/tmp/rustpod-bench/strace-* "$out/bench/strace/" 2>/dev/null
fi
cat "$out/bench.txt" >>"$out/summary"
((rc == 0)) || { echo "bench.py failed (exit $rc); last lines of its log:"; tail -n 30 "$out/bench.log"; } >>"$out/summary"
echo "bench.py took $(($(date +%s) - t0)) s" >>"$out/timing"
echo "$rc" >"$out/status"

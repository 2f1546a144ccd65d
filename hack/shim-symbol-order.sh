#!/usr/bin/env bash
# Usage: hack/shim-symbol-order.sh [--no-build]
# Writes shim/symbol-order.txt, the functions a pod's shim server runs and,
# after them, those its short-lived processes run (create and exec helpers,
# `shim start`, a container's init before its exec); shim/build.rs links them
# in that order at the start of the shim's code.
#
# A long-lived server maps its own binary 64 KiB around every page it
# touches (the kernel's fault-around); laid out as the compiler leaves it,
# what it runs is spread over most of the code. This puts a uprobe on every
# Rust function of a copy of the shim, runs one pod through a private
# containerd with it, and lists the functions the server's threads entered,
# in address order, then those only the other processes entered. Symbol
# names carry hashes of the toolchain and Cargo.lock: rerun this after
# changing either. A stale list only costs memory: lld skips names it does
# not find (a release hack/build.sh says how many still match). It takes
# about two minutes; the probes are removed in the background for some
# minutes more.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
need_root
[[ ${1:-} == --no-build ]] || "$here/build.sh" --release
out=$here/../shim/symbol-order.txt
tracing=/sys/kernel/tracing
group=rustpod_order_$$

work=$(mktemp -d /var/tmp/rustpod-order.XXXXXX)
bin=$work/bin/containerd-shim-rustpod-v1
ctd=$work/containerd
ctr=(timeout 120 ctr -a "$ctd/containerd.sock")
ids=()

# remove ID: kill the task, wait until containerd deletes it, drop the container.
remove() {
	"${ctr[@]}" task kill -s KILL "$1" >/dev/null 2>&1 || true
	for _ in $(seq 100); do
		"${ctr[@]}" task delete "$1" >/dev/null 2>&1 && break
		"${ctr[@]}" task ls -q 2>/dev/null | grep -qx "$1" || break
		sleep 0.1
	done
	"${ctr[@]}" container delete "$1" >/dev/null 2>&1 || true
}
unprobe() {
	[[ -d $tracing/events/$group ]] || return 0
	echo 0 >"$tracing/events/$group/enable"
	# The whole group in one write (`-:GROUP/`; 6.x kernels take it).
	echo "-:$group/" >>"$tracing/uprobe_events" 2>/dev/null && return 0
	local line
	sed "s|^p:\([^ ]*\) .*|-:\1|" "$work/probes" | while read -r line; do
		echo "$line" >>"$tracing/uprobe_events"
	done
}
saved=()
cleanup() {
	local id setting
	for id in "${ids[@]}"; do remove "$id"; done
	"$here/containerd.sh" stop "$ctd" >/dev/null 2>&1 || true
	for setting in "${saved[@]}"; do echo "${setting#*=}" >"$tracing/${setting%%=*}" || true; done
	# Disabling a uprobe waits out an RCU grace period (about 50 ms here), so
	# thousands take minutes: they go in the background, in a session of their
	# own (a `timeout` around us signals our process group). Only the copy of
	# the shim in $work, which nothing runs any more, carries them.
	setsid bash -c "$(declare -f unprobe); $(declare -p tracing group work); unprobe; rm -rf \"\$work\"" \
		</dev/null >/dev/null 2>&1 &
}
trap cleanup EXIT
mkdir -p "$work/bin"
cp "$CARGO_TARGET_DIR/release/containerd-shim-rustpod-v1" "$bin"

[[ -e $tracing/uprobe_events ]] || mount -t tracefs nodev "$tracing" || die "no tracefs at $tracing"
for setting in tracing_on options/record-tgid buffer_size_kb; do
	saved+=("$setting=$(sed 's/ .*//' "$tracing/$setting")")
done
python3 "$here/symbol_order.py" probes "$bin" "$group" >"$work/probes"
# one probe per write: tracefs refuses a batch of thousands
while read -r line; do echo "$line" >>"$tracing/uprobe_events"; done <"$work/probes"
echo 1 >"$tracing/options/record-tgid"
echo 0 >"$tracing/tracing_on"
echo >"$tracing/trace"
echo 65536 >"$tracing/buffer_size_kb"
echo 1 >"$tracing/events/$group/enable"
echo 1 >"$tracing/tracing_on"

"$here/containerd.sh" start "$ctd" --shim-dir "$work/bin" >/dev/null
image=docker.io/library/busybox:rustpod-order
"$here/make-oci-image.sh" "${image##*/}" "$work/image.tar" >/dev/null
"${ctr[@]}" images import "$work/image.tar" >/dev/null

# One pod of three: the sandbox keeps the server up while the other two go
# through what kubelet does with a container.
run() {
	ids+=("$1")
	"${ctr[@]}" run -d --runtime io.containerd.rustpod.v1 --annotation io.kubernetes.cri.sandbox-id=order "$image" "$@" >/dev/null
}
run order sleep 1000000
run order-a sleep 1000000
run order-b sh -c 'while true; do echo line; sleep 0.1; done'
"${ctr[@]}" task exec --exec-id e1 order-a sh -c 'echo hi' >/dev/null
"${ctr[@]}" task ps order-a >/dev/null
"${ctr[@]}" task metrics order-a >/dev/null
"${ctr[@]}" task pause order-a
"${ctr[@]}" task resume order-a
remove order-a
remove order-b

server=
for p in /proc/[0-9]*; do
	[[ $(readlink "$p/exe" 2>/dev/null) == "$bin" ]] || continue
	tr '\0' ' ' <"$p/cmdline" | grep -q -- '-socket' && server=${p#/proc/}
done
[[ $server ]] || die "no shim server found for the pod"
echo 0 >"$tracing/tracing_on"
python3 "$here/symbol_order.py" names "$bin" "$group" "$server" <"$tracing/trace" >"$out.tmp"
echo >"$tracing/trace"
mv "$out.tmp" "$out"
echo "shim-symbol-order: $(wc -l <"$out") functions written to shim/symbol-order.txt" >&2

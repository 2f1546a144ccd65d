#!/usr/bin/env bash
# Usage: hack/symbol-order.sh shim|rustpod [--no-build]
# Writes the functions a binary's processes run to its package's
# symbol-order.txt (shim/ or runtime/); runtime/link_order.rs has lld link
# them in that order at the start of the binary's code.
#
# The kernel maps a binary 64 KiB around every page a process touches
# (fault-around); laid out as the compiler leaves it, what a process runs is
# spread over most of the code, and all of that counts in its RSS. This puts
# a uprobe on every Rust function of a copy of the binary and runs it:
# - shim: one pod through a private containerd; the list is the functions
#   the pod's server threads entered, in address order, then those only the
#   other processes entered (create and exec helpers, `shim start`, a
#   container's init before its exec);
# - rustpod: a container's lifecycle through the CLI (spec, create, start,
#   state, ps, exec, kill, delete, run), on cgroup v1 and again on v2; the
#   list is every function its processes (the commands, the init) entered:
#   those both runs entered, then each run's own, those more processes
#   entered first.
# Symbol names carry hashes of the toolchain and Cargo.lock, and new code is
# not in the list: rerun this after changing either, or the code. A stale
# list only costs memory: lld skips names it does not find (a release hack/build.sh says how many still match). It
# takes a few minutes; the probes are removed in the background for some
# minutes more.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
need_root
workload=${1:-}
case $workload in
shim) name=containerd-shim-rustpod-v1 out=$here/../shim/symbol-order.txt ;;
rustpod) name=rustpod out=$here/../runtime/symbol-order.txt ;;
*) die "usage: ${0##*/} shim|rustpod [--no-build]" ;;
esac
[[ ${2:-} == --no-build ]] || "$here/build.sh" --release
tracing=/sys/kernel/tracing
group=rustpod_order_$$

work=$(mktemp -d /var/tmp/rustpod-order.XXXXXX)
bin=$work/bin/$name
ctd=$work/containerd
ctr=(timeout 120 ctr -a "$ctd/containerd.sock")
state=$work/state
ids=()

# remove ID: rustpod's `delete -f`; for the shim, kill the task, wait until
# containerd deletes it, drop the container.
remove() {
	if [[ $name == rustpod ]]; then
		"$bin" --root "$state" delete -f "$1" >/dev/null 2>&1 || true
		return
	fi
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
	[[ ! -d $ctd ]] || "$here/containerd.sh" stop "$ctd" >/dev/null 2>&1 || true
	for setting in "${saved[@]}"; do echo "${setting#*=}" >"$tracing/${setting%%=*}" || true; done
	# Disabling a uprobe waits out an RCU grace period (about 50 ms here), so
	# thousands take minutes: they go in the background, in a session of their
	# own (a `timeout` around us signals our process group). Only the copy of
	# the binary in $work, which nothing runs any more, carries them.
	setsid bash -c "$(declare -f unprobe); $(declare -p tracing group work); unprobe; rm -rf \"\$work\"" \
		</dev/null >/dev/null 2>&1 &
}
trap cleanup EXIT
mkdir -p "$work/bin"
cp "$CARGO_TARGET_DIR/release/$name" "$bin"

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

shim_workload() {
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
	order=(names "$server")
}

# A container's lifecycle through the CLI, in a bundle of busybox: every
# command and the init. $1 names the bundle and prefixes the container ids.
rustpod_lifecycle() {
	local bundle=$work/bundle-$1 rt=("$bin" --root "$state")
	mkdir -p "$bundle/rootfs/bin"
	cp /bin/busybox "$bundle/rootfs/bin/"
	local tool
	for tool in sh sleep echo true; do ln -s busybox "$bundle/rootfs/bin/$tool"; done
	(cd "$bundle" && "$bin" spec)
	python3 - "$bundle/config.json" <<-'PY'
		import json, sys
		spec = json.load(open(sys.argv[1]))
		spec["process"]["terminal"] = False
		spec["process"]["args"] = ["sleep", "1000"]
		json.dump(spec, open(sys.argv[1], "w"), separators=(",", ":"))
	PY
	"${rt[@]}" create -b "$bundle" "$1"
	"${rt[@]}" start "$1"
	"${rt[@]}" state "$1" >/dev/null
	"${rt[@]}" list >/dev/null
	"${rt[@]}" ps "$1" >/dev/null
	"${rt[@]}" exec "$1" sh -c 'echo hi' >/dev/null
	"${rt[@]}" kill "$1" KILL
	for _ in $(seq 100); do
		"${rt[@]}" state "$1" 2>/dev/null | grep -q '"stopped"' && break
		sleep 0.1
	done
	"${rt[@]}" delete "$1"
	"${rt[@]}" run -b "$bundle" --detach "$1-detached"
	"${rt[@]}" delete -f "$1-detached"
	sed -i 's/"sleep","1000"/"true"/' "$bundle/config.json"
	"${rt[@]}" run -b "$bundle" "$1-run"
}

# The lifecycle twice, each traced on its own: on this host's cgroup v1, then
# on cgroup v2, for the functions only v2 runs (the unified hierarchy, clone3
# into the cgroup, the eBPF device filter), which a v2 node maps. For v2, a
# private mount namespace has the host's cgroup2 hierarchy at /sys/fs/cgroup
# (the host's own mounts are untouched); its controllers are v1's here, so it
# runs the default spec, which sets none. Each removes its containers, in its
# own namespace, even if it fails.
on_cgroup_v2() {
	ids=(v2 v2-detached v2-run)
	trap 'for id in "${ids[@]}"; do remove "$id"; done' EXIT
	umount -l /sys/fs/cgroup
	mount -t cgroup2 none /sys/fs/cgroup
	rustpod_lifecycle v2
}
rustpod_workload() {
	local -a ids=(v1 v1-detached v1-run)
	(
		trap 'for id in "${ids[@]}"; do remove "$id"; done' EXIT
		rustpod_lifecycle v1
	) >/dev/null
	cp "$tracing/trace" "$work/trace.v1"
	echo >"$tracing/trace"
	unshare -m --propagation private bash -c "set -euo pipefail
		$(declare -f rustpod_lifecycle remove on_cgroup_v2); $(declare -p bin state work name)
		on_cgroup_v2" >/dev/null
	order=(shared "$work/trace.v1" -)
}

order=()
"${workload}_workload"
echo 0 >"$tracing/tracing_on"
python3 "$here/symbol_order.py" "${order[0]}" "$bin" "$group" "${order[@]:1}" <"$tracing/trace" >"$out.tmp"
echo >"$tracing/trace"
mv "$out.tmp" "$out"
echo "symbol-order: $(wc -l <"$out") functions written to $out" >&2

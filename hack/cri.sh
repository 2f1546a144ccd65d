#!/usr/bin/env bash
# Usage: cri.sh start DIR [--systemd-cgroup] [--no-pivot] [--shim-dir PATHDIR] [--containerd BIN] [--systemd-unit] | images DIR
# A private containerd (hack/containerd.sh) with its CRI plugin: runtime handlers `rustpod`
# (io.containerd.rustpod.v1, found on PATHDIR) and `runc` (and on 2.x `rustpod-runc-v2`, our
# shim under runc's runtime type; with $RUSTPOD_CRI_CRUN `crun`, runc's shim driving crun),
# restrict_oom_score_adj, and the
# sandbox image registry.k8s.io/pause:3.9 built here from rustpod's static pause binary.
#   start   starts it (containerd.sh start DIR --cri) and imports the images; with
#           --systemd-cgroup both handlers get `SystemdCgroup = true`, as with kubelet's
#           systemd cgroup driver; --no-pivot gives every handler `NoPivotRoot = true`;
#           --containerd runs that containerd (a 2.x one gets its
#           version 3 config, see hack/containerd.sh); --systemd-unit runs it as a systemd
#           service, as the packaged containerd.service (see hack/containerd.sh)
#   images  builds and imports into its k8s.io namespace: the pause image, busybox and
#           rustpod-no-entrypoint (an image whose entrypoint does not exist)
# The pause binary is $RUSTPOD_PAUSE_BIN, else built by hack/build-pause.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

usage="usage: cri.sh start DIR [--systemd-cgroup] [--no-pivot] [--shim-dir PATHDIR] [--containerd BIN] [--systemd-unit] | images DIR"
(($# >= 2)) || die "$usage"
action=$1 dir=$(abspath "$2")
shift 2

images() {
	local pause=${RUSTPOD_PAUSE_BIN:-} work ctr
	# The ctr of the containerd that containerd.sh started in DIR.
	ctr=$(ctr_beside "$(cat "$dir/containerd-bin" 2>/dev/null || echo containerd)")
	[[ $pause ]] || pause=$("$here/build-pause.sh")
	[[ -x $pause ]] || die "pause binary not found: $pause"
	work=$(mktemp -d)
	# shellcheck disable=SC2064
	trap "rm -rf '$work'" RETURN
	"$here/make-oci-image.sh" registry.k8s.io/pause:3.9 "$work/pause.tar" --add "$pause:/pause" --entrypoint /pause
	"$here/make-oci-image.sh" busybox:latest "$work/busybox.tar"
	"$here/make-oci-image.sh" rustpod-no-entrypoint:latest "$work/noentry.tar" --entrypoint /no/such/entrypoint
	local tar
	for tar in pause busybox noentry; do
		"$ctr" -n k8s.io --address "$dir/containerd.sock" images import "$work/$tar.tar" >/dev/null ||
			die "importing $tar into $dir failed"
	done
}

case $action in
start)
	"$here/containerd.sh" start "$dir" --cri "$@"
	images
	;;
images)
	(($# == 0)) || die "$usage"
	images
	;;
*) die "$usage" ;;
esac

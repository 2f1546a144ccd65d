#!/bin/bash
# Runs the sid guest's userland on the host's own kernel (hack/guest-sid.sh --part host): sid's
# runc 1.3, crun 1.28, containerd 2.1, docker and podman, for the files of the list that need
# those programs but not sid's kernel, systemd or cgroup v2, at native speed instead of under
# TCG. The root is the guest's cached image, read-only, under an overlay whose upper layer, and
# /var/tmp, live in WORK on the host's disk; the repository and the target dir are bound
# read-only at their own paths and OUT at /mnt/rustpod-out, as in the guest. Then
# hack/guest/sid-tests.sh runs OUT's plan.
# Usage: unshare --mount --propagation private sid-root.sh IMAGE WORK OUT REPO TARGET
# Its mounts live in that mount namespace alone and go with it; WORK is the caller's to remove.
set -euo pipefail
image=$1 work=$2 out=$3 repo=$4 target=$5
root=$work/root

# bind_ro SRC DST: SRC at DST, read-only (a bind mount takes ro only on its remount).
bind_ro() {
	mkdir -p "$2"
	mount --bind "$1" "$2"
	mount -o remount,bind,ro "$2"
}

mkdir -p "$work"/{image,upper,overlay-work,var-tmp} "$root"
# noload: never replay a journal into the image the guests boot from.
mount -o ro,noload,loop "$image" "$work/image"
mount -t overlay rustpod-sid-root -o "lowerdir=$work/image,upperdir=$work/upper,workdir=$work/overlay-work" "$root"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
# containerd's overlayfs snapshotter and the tests' scratch dirs need a disk, not the overlay.
mount --bind "$work/var-tmp" "$root/var/tmp"
bind_ro "$repo" "$root$repo"
bind_ro "$target" "$root$target"
mkdir -p "$root/mnt/rustpod-out"
mount --bind "$out" "$root/mnt/rustpod-out"
# Its mount namespace, so that guest-sid.sh can find what a test left running in it.
readlink /proc/self/ns/mnt >"$out/mnt-ns"

# A root that is a mount of its own, as runc's pivot_root wants of its caller's (a chroot alone
# is not). / is made shared after the pivot (pivot_root refuses a shared one), as systemd makes
# it on a node: the propagation tests mount under it.
cd "$root"
mkdir -p .host
pivot_root . .host
exec chroot . /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C.UTF-8 /bin/bash -c 'umount -l /.host && rmdir /.host && mount --make-rshared / && exec "$@"' sid-root \
	"$repo/hack/guest/sid-tests.sh" /mnt/rustpod-out

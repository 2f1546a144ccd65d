#!/bin/busybox sh
# /init of the cgroup v2 test guest (hack/guest-v2.sh builds the initramfs around it).
# Copies the initramfs into a tmpfs and switches to it (pivot_root, which containers need,
# does not work from the initramfs itself), mounts a pure cgroup v2 hierarchy with every
# controller enabled for children, runs the test binaries listed in /guest/tests.list and
# reports between "=== guest" marker lines on the serial console, then powers off.
# rustpod.from=N on the kernel command line starts at the list's Nth file (a resumed boot).
export PATH=/bin:/sbin:/usr/bin:/usr/sbin

if [ ! -e /.switched ]; then
	/bin/busybox mkdir -p /proc /newroot
	/bin/busybox mount -t proc proc /proc
	if grep -q 'rustpod.probe=1' /proc/cmdline; then
		echo "=== guest probe ok"
		poweroff -f
	fi
	mount -t tmpfs -o size=85% tmpfs /newroot
	for entry in /*; do
		case $entry in /newroot | /proc) ;; *) cp -a "$entry" /newroot/ ;; esac
	done
	: >/newroot/.switched
	umount /proc
	exec switch_root /newroot /init
fi

mkdir -p /proc /sys /dev /tmp /run /var/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /dev/mqueue
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t mqueue mqueue /dev/mqueue
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/tmp
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
mount --make-rshared /
hostname rustpod-guest-v2
ip link set lo up

echo "=== guest kernel $(uname -r), $(grep -c " /sys/fs/cgroup cgroup2 " /proc/mounts) cgroup2 mount, $(nproc) cpus"
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
	echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control || echo "=== guest cannot enable $c"
done
echo "=== guest controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control)"

export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
export RUSTPOD_BIN=/guest/bin/rustpod RUNC_BIN=/usr/sbin/runc
export RUSTPOD_CHECKER_BIN=/guest/bin/rustpod-checker RUSTPOD_PAUSE_BIN=/guest/bin/rustpod-pause
export RUSTPOD_SKIP_LOG=/var/tmp/skips RUST_BACKTRACE=1
. /guest/env

from=$(sed -n 's/.*rustpod\.from=\([0-9]*\).*/\1/p' /proc/cmdline)
n=0
while read -r name args; do
	[ -n "$name" ] || continue
	n=$((n + 1))
	[ "$n" -ge "${from:-1}" ] || continue
	echo "=== guest run $name $args"
	start=$(date +%s)
	# shellcheck disable=SC2086 # the filter words are separate arguments
	(cd /guest && "/guest/tests/$name" --test-threads=2 $args)
	echo "=== guest exit $name $? $(($(date +%s) - start))s"
	# Each file's skips right after it, so that a resumed boot loses none.
	[ -s "$RUSTPOD_SKIP_LOG" ] && sort -u "$RUSTPOD_SKIP_LOG"
	: >"$RUSTPOD_SKIP_LOG"
done </guest/tests.list

echo "=== guest done"
sync
poweroff -f

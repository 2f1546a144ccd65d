#!/usr/bin/env bash
# Usage: guest-systemd.sh [--no-build] [--keep-log] [--image-only]
# Run the systemd / cgroup v2 test suite in a throw-away QEMU guest: Debian 12 with systemd 252
# as PID 1 on a pure cgroup v2 hierarchy, containerd 1.6 and runc 1.1.5 from Debian, as
# production Kubernetes nodes run. The host (cgroup v1 hybrid, no systemd) cannot run these.
#
#   1. installs qemu-system-x86, debootstrap and linux-image-amd64 on the host (the guest's
#      kernel is the host's /boot one; nothing here boots the host with it);
#   2. builds the guest's disk once: debootstrap from the mirror apt uses, into an ext4 image
#      (mkfs.ext4 -d) cached under /var/tmp/rustpod-guest-systemd, keyed by the package list
#      and IMAGE_VERSION; and a busybox initramfs keyed by the kernel;
#   3. builds rustpod, the shim and the test binaries on the host (hack/build.sh, cargo test
#      --no-run) and boots the guest (KVM if it works, else TCG) with the repository, the
#      target dir and the kernel's modules shared read-only at the same paths (virtio-9p) and
#      a writable results dir; the disk is a -snapshot, so the cached image never changes;
#   4. a unit in the guest runs hack/guest/systemd-tests.sh, which runs the tests listed in
#      hack/guest/systemd-tests.list and powers off; this prints its summary and exits non-zero
#      if a test failed or the guest did not finish.
# --no-build: use the binaries already in $CARGO_TARGET_DIR. --keep-log: keep the results dir.
# --image-only: build (or find cached) the image and initramfs, and stop.
# Environment: RUSTPOD_GUEST_TIMEOUT (seconds, default 1500), RUSTPOD_GUEST_MEM (MiB, 2048),
# RUSTPOD_GUEST_CPUS (2), RUSTPOD_GUEST_TESTS (a test list in the format of
# hack/guest/systemd-tests.list, to run fewer tests).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
need_root

# Bump to rebuild the cached image when how it is built changes.
IMAGE_VERSION=3
SUITE=bookworm
GUEST_PKGS=(systemd systemd-sysv dbus containerd runc busybox-static iproute2 util-linux jq kmod procps)
HOST_PKGS=(qemu-system-x86 debootstrap linux-image-amd64 e2fsprogs cpio)
CACHE=/var/tmp/rustpod-guest-systemd
TIMEOUT=${RUSTPOD_GUEST_TIMEOUT:-1500}

build=1 keep= image_only=
for arg; do
	case $arg in
	--no-build) build= ;;
	--keep-log) keep=1 ;;
	--image-only) image_only=1 ;;
	*) die "usage: guest-systemd.sh [--no-build] [--keep-log] [--image-only]" ;;
	esac
done

now() { date +%s; }
say() { echo "guest-systemd: $*" >&2; }

# install_host_packages: apt-get only what is missing; another engineer's apt may hold the lock.
install_host_packages() {
	local missing=() p policy=/usr/sbin/policy-rc.d mine=
	for p in "${HOST_PKGS[@]}"; do
		[[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	say "installing ${missing[*]} (qemu-system-x86 replaces a backported qemu-utils)"
	# Keep postinst scripts (udev) from starting services on the host.
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && mine=1
	fi
	local log=/var/tmp/rustpod-guest-apt.log rc=0
	{ DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -qq update &&
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -qq install -y \
			--no-install-recommends "${missing[@]}"; } >"$log" 2>&1 || rc=$?
	[[ $mine ]] && rm -f "$policy"
	((rc == 0)) || { tail -n 20 "$log" >&2; die "apt-get failed installing ${missing[*]} (log: $log)"; }
}

# mirror: the Debian mirror apt already uses (deb822 or one-line sources).
mirror() {
	local url
	url=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '$2 ~ /\/debian\/?$/ {print $2; exit}')
	[[ $url ]] || url=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
		awk '$2 ~ /\/debian\/?$/ {print $2; exit}')
	echo "${url:-http://deb.debian.org/debian}"
}

# kernel_version: the newest Debian kernel in /boot that has its modules.
kernel_version() {
	local v
	for v in $(ls -1 /boot/vmlinuz-* 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -rV); do
		[[ -d /lib/modules/$v ]] && { echo "$v"; return; }
	done
	die "no kernel in /boot with /lib/modules (install linux-image-amd64)"
}

image_key() {
	printf '%s\n' "$IMAGE_VERSION" "$SUITE" "$(mirror)" "${GUEST_PKGS[@]}" | sha256sum | cut -c1-16
}

# configure_root DIR: what the image needs besides its packages.
configure_root() {
	local root=$1
	echo rustpod-guest >"$root/etc/hostname"
	printf '127.0.0.1 localhost rustpod-guest\n' >"$root/etc/hosts"
	: >"$root/etc/fstab"
	mkdir -p "$root/mnt/rustpod-out"
	# The tests start their own containerds; the distro's must not run.
	ln -sfn /dev/null "$root/etc/systemd/system/containerd.service"
	# Account every controller, as kubelet's slices make systemd do on a node.
	mkdir -p "$root/etc/systemd/system.conf.d"
	cat >"$root/etc/systemd/system.conf.d/rustpod.conf" <<-'EOF'
		[Manager]
		DefaultCPUAccounting=yes
		DefaultMemoryAccounting=yes
		DefaultIOAccounting=yes
		DefaultTasksAccounting=yes
	EOF
	# The test run: a script the host writes into the results share for each run.
	cat >"$root/etc/systemd/system/rustpod-guest-tests.service" <<-'EOF'
		[Unit]
		Description=rustpod guest test suite
		Wants=dbus.service
		After=dbus.service systemd-logind.service basic.target
		SuccessAction=poweroff-immediate
		FailureAction=poweroff-immediate
		[Service]
		Type=oneshot
		ExecStart=/mnt/rustpod-out/run
		StandardOutput=journal+console
		StandardError=journal+console
		TimeoutStartSec=infinity
		[Install]
		WantedBy=multi-user.target
	EOF
	ln -sfn ../rustpod-guest-tests.service "$root/etc/systemd/system/multi-user.target.wants/rustpod-guest-tests.service"
	# Nothing that waits for a network, a clock or a device (no udev) the guest does not have.
	local unit
	for unit in serial-getty@.service getty@.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
		fstrim.timer man-db.timer systemd-networkd-wait-online.service; do
		ln -sfn /dev/null "$root/etc/systemd/system/$unit"
	done
	passwd -R "$root" -d root >/dev/null
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
}

# build_image PATH: debootstrap into a temp dir, then an ext4 image of it, renamed into place.
build_image() {
	local image=$1 root include
	root=$(mktemp -d /var/tmp/rustpod-guest-root.XXXXXX)
	# shellcheck disable=SC2064
	trap "rm -rf '$root' '$image.tmp'" RETURN
	include=$(IFS=,; echo "${GUEST_PKGS[*]}")
	say "debootstrap $SUITE from $(mirror) (about a minute)"
	if ! debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$(mirror)" \
		>"$CACHE/debootstrap.log" 2>&1; then
		tail -n 20 "$CACHE/debootstrap.log" >&2
		die "debootstrap failed (log: $CACHE/debootstrap.log)"
	fi
	configure_root "$root"
	rm -f "$image.tmp"
	mkfs.ext4 -q -F -L rustpod-root -d "$root" "$image.tmp" 6G >/dev/null || die "mkfs.ext4 -d $root failed"
	mv -f "$image.tmp" "$image"
}

# build_initramfs PATH KVER: static busybox, the modules to reach the disk and the shares, and
# an init that mounts them at the paths the kernel command line names, then starts systemd.
build_initramfs() {
	local out=$1 kver=$2 dir m
	dir=$(mktemp -d /var/tmp/rustpod-guest-initramfs.XXXXXX)
	# shellcheck disable=SC2064
	trap "rm -rf '$dir'" RETURN
	mkdir -p "$dir"/{bin,dev,proc,sys,newroot,modules}
	mknod -m 600 "$dir/dev/console" c 5 1
	cp /bin/busybox "$dir/bin/busybox"
	: >"$dir/modules.order"
	for m in $(modprobe -S "$kver" -a --show-depends virtio_pci virtio_blk ext4 9p 9pnet_virtio |
		awk '$1 == "insmod" {print $2}' | awk '!seen[$0]++'); do
		cp "$m" "$dir/modules/"
		echo "/modules/${m##*/}" >>"$dir/modules.order"
	done
	cp "$here/guest/systemd-init" "$dir/init"
	chmod 755 "$dir/init"
	(cd "$dir" && find . | cpio -o -H newc --quiet | gzip -1) >"$out.tmp"
	mv -f "$out.tmp" "$out"
}

# kvm_works KVER: /dev/kvm can exist on a host without vmx/svm, where a KVM guest hangs after
# SeaBIOS: only a kernel that runs far enough to panic (it has no root) proves KVM works.
kvm_works() {
	local log
	[[ -w /dev/kvm ]] && grep -qwE 'vmx|svm' /proc/cpuinfo || return 1
	log=$(timeout 30 qemu-system-x86_64 -accel kvm -cpu host -m 256 -display none -no-reboot -nic none \
		-kernel "/boot/vmlinuz-$1" -append "console=ttyS0 panic=-1" -serial stdio -monitor none \
		</dev/null 2>/dev/null) || true
	[[ $log == *"Kernel panic"* ]]
}

# plan DIR: the test binaries (cargo test --no-run) and the environment the guest runs them in.
write_plan() {
	local out=$1 list=${RUSTPOD_GUEST_TESTS:-$here/guest/systemd-tests.list} pkg tests=() line
	local -A targets=()
	while read -r line; do
		[[ $line == \#* || -z $line ]] && continue
		while [[ $line =~ ^[A-Z_]+=[^\ ]*\ +(.*)$ ]]; do line=${BASH_REMATCH[1]}; done
		read -r pkg test _ <<<"$line"
		targets["$pkg"]+=" --test $test"
	done <"$list"
	: >"$out/binaries"
	for pkg in "${!targets[@]}"; do
		# shellcheck disable=SC2086
		cargo test --locked --no-run --message-format=json -p "$pkg" ${targets[$pkg]} 2>"$out/cargo.log" |
			jq -r 'select(.reason == "compiler-artifact" and .profile.test == true and .executable != null)
				| .target.name + " " + .executable' >>"$out/binaries" ||
			{ cat "$out/cargo.log" >&2; die "cargo test --no-run failed"; }
	done
	cp "$list" "$out/tests.list"
	cat >"$out/env" <<-EOF
		REPO=$(abspath "$here/..")
		CARGO_TARGET_DIR=$CARGO_TARGET_DIR
		RUSTPOD_BIN=$CARGO_TARGET_DIR/debug/rustpod
		RUSTPOD_SHIM_BIN=$CARGO_TARGET_DIR/debug/containerd-shim-rustpod-v1
		RUSTPOD_CHECKER_BIN=$checker
		RUSTPOD_PAUSE_BIN=$pause
		RUNC_BIN=/usr/sbin/runc
		RUSTPOD_TEST_THREADS=${RUSTPOD_GUEST_TEST_THREADS:-2}
		RUSTPOD_GUEST_FILE_TIMEOUT=${RUSTPOD_GUEST_FILE_TIMEOUT:-600}
	EOF
	printf '#!/bin/sh\nexec %q %q\n' "$(abspath "$here/guest/systemd-tests.sh")" /mnt/rustpod-out >"$out/run"
	chmod 755 "$out/run"
}

# boot OUT KVER IMAGE INITRD: run the guest until it powers off or the timeout.
boot() {
	local out=$1 kver=$2 image=$3 initrd=$4 accel cpu repo rc=0
	repo=$(abspath "$here/..")
	if kvm_works "$kver"; then accel=kvm cpu=host; else accel=tcg,thread=multi cpu=max; fi
	say "booting ($accel, ${RUSTPOD_GUEST_CPUS:-2} CPUs, ${RUSTPOD_GUEST_MEM:-2048} MiB; serial log: $out/console.log)"
	local share=(-fsdev "local,id=f0,path=/lib/modules/$kver,security_model=none,readonly=on"
		-device virtio-9p-pci,fsdev=f0,mount_tag=modules
		-fsdev "local,id=f1,path=$repo,security_model=none,readonly=on"
		-device virtio-9p-pci,fsdev=f1,mount_tag=repo
		-fsdev "local,id=f2,path=$CARGO_TARGET_DIR,security_model=none,readonly=on"
		-device virtio-9p-pci,fsdev=f2,mount_tag=target
		-fsdev "local,id=f3,path=$out,security_model=none"
		-device virtio-9p-pci,fsdev=f3,mount_tag=out)
	# -snapshot: writes go to a temp file (TMPDIR), the cached image stays as built.
	TMPDIR=/var/tmp timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
		-accel "$accel" -cpu "$cpu" -machine q35 -smp "${RUSTPOD_GUEST_CPUS:-2}" -m "${RUSTPOD_GUEST_MEM:-2048}" \
		-display none -no-reboot -nic none -snapshot \
		-drive "file=$image,format=raw,if=virtio,cache=unsafe" \
		-kernel "/boot/vmlinuz-$kver" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 systemd.unified_cgroup_hierarchy=1 systemd.journald.forward_to_console=1 rustpod.kver=$kver rustpod.repo=$repo rustpod.target=$CARGO_TARGET_DIR" \
		"${share[@]}" -serial "file:$out/console.log" -monitor none </dev/null || rc=$?
	((rc != 124)) || say "the guest did not finish within $TIMEOUT s (RUSTPOD_GUEST_TIMEOUT)"
	return "$rc"
}

main() {
	local t0 t_img t_boot kver image initrd out status=0
	t0=$(now)
	install_host_packages
	mkdir -p "$CACHE"
	kver=$(kernel_version)
	image=$CACHE/debian-$SUITE-$(image_key).ext4
	if [[ ! -f $image ]]; then
		find "$CACHE" -maxdepth 1 -name 'debian-*.ext4' -delete
		build_image "$image"
	fi
	initrd=$CACHE/initramfs-$kver-$(cat "$here/guest/systemd-init" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12).cpio.gz
	if [[ ! -f $initrd ]]; then
		find "$CACHE" -maxdepth 1 -name 'initramfs-*.cpio.gz' -delete
		build_initramfs "$initrd" "$kver"
	fi
	t_img=$(now)
	if [[ $image_only ]]; then
		say "image $image, initramfs $initrd ($((t_img - t0)) s)"
		return 0
	fi
	if [[ $build ]]; then
		need_cargo
		"$here/build.sh"
	fi
	checker=$("$here/build-checker.sh")
	pause=$("$here/build-pause.sh")
	out=$(mktemp -d /var/tmp/rustpod-guest-out.XXXXXX)
	chmod 755 "$out"
	write_plan "$out"
	t_boot=$(now)
	boot "$out" "$kver" "$image" "$initrd" || status=$?
	echo
	echo "== systemd guest (Debian 12, systemd as PID 1, cgroup v2) =="
	if [[ -f $out/summary ]]; then
		cat "$out/summary"
	else
		say "no results: the guest did not run the tests; last lines of $out/console.log:"
		tail -n 40 "$out/console.log" >&2 || true
		status=1
	fi
	if [[ -s $out/skips ]]; then
		echo "-- skipped in the guest --"
		sort -u "$out/skips"
	fi
	[[ -f $out/status ]] && { read -r rc <"$out/status"; ((rc == 0)) || status=1; } || status=1
	printf 'guest-systemd: times: image %ss (cached: %s), build %ss, guest boot+tests %ss\n' \
		"$((t_img - t0))" "$([[ $((t_img - t0)) -lt 5 ]] && echo yes || echo no)" \
		"$((t_boot - t_img))" "$(($(now) - t_boot))" >&2
	[[ -f $out/timing ]] && cat "$out/timing" >&2
	if ((status)) || [[ $keep ]]; then
		say "results kept in $out"
	else
		rm -rf "$out"
	fi
	return "$status"
}

main

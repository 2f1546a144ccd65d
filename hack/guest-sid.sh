#!/usr/bin/env bash
# Usage: guest-sid.sh [--no-build] [--keep-log] [--image-only] [--part main|one-vcpu|host] [--bench DIR]
# Run the systemd / cgroup v2 test suite in a throw-away QEMU guest that is a 2026 node: Debian
# sid with its own kernel (linux-image-amd64, 7.2), systemd 262 as PID 1 on pure cgroup v2,
# containerd 2.1, runc 1.3, crun and criu from sid. The host (Debian 12, cgroup v1 hybrid, no
# systemd, containerd 1.6, runc 1.1) cannot run these.
#
#   1. installs qemu-system-x86 and debootstrap on the host (nothing from sid goes on the host);
#   2. builds the guest once: debootstrap sid from the mirror apt uses into a directory (the
#      kernel and its initramfs-tools initramfs are installed in it), copies the kernel and
#      initramfs out for QEMU's -kernel/-initrd, and makes an ext4 image of it (mkfs.ext4 -d),
#      all cached under /var/tmp/rustpod-guest-sid: keyed by the package list, the suite and
#      IMAGE_VERSION, with the versions it got in a .versions file next to it; an image older
#      than RUSTPOD_GUEST_MAX_AGE days (7) is built again, as sid moves;
#   3. builds rustpod, the shim and the test binaries on the host (hack/build.sh, cargo test
#      --no-run; they run in sid as they are, its glibc is newer) and boots the guest under TCG
#      with the repository and the target dir shared read-only at the same paths (virtio-9p,
#      mounted by systemd from systemd.mount-extra=) and a writable results dir; the disk is a
#      -snapshot, so the cached image never changes;
#   4. a unit in the guest runs hack/guest/sid-tests.sh, which runs the tests listed in
#      hack/guest/sid-tests.list and powers off; the files marked ONE_VCPU=1 run in a second,
#      one-vCPU guest booted beside the first; the files marked ON_HOST=1 need sid's programs
#      but not its kernel, systemd or cgroup v2, and run first, natively, in sid's userland on
#      this host's kernel (hack/guest/sid-root.sh: the image as the root of a mount namespace);
#      this prints each summary and exits non-zero if a test failed or a guest did not finish.
# --no-build: use the binaries already in $CARGO_TARGET_DIR. --keep-log: keep the results dir.
# --part main|one-vcpu|host: run only the main guest, only the one-vCPU guest, or only the
# ON_HOST=1 files in sid's userland here (hack/test.sh runs the one-vCPU guest beside the host's
# tests and the sid root, then the main guest).
# --image-only: build (or find cached) the image, kernel and initramfs, and stop.
# --bench DIR: instead of the tests, run hack/bench.py in the guest against its runc and crun,
# with the release binaries already in $CARGO_TARGET_DIR (hack/bench-sid builds them), and copy
# its results to DIR. RUSTPOD_GUEST_BENCH_ARGS: bench.py's options (see hack/bench-sid).
# Environment: RUSTPOD_GUEST_SUITE (sid; `testing` when sid is broken for a day),
# RUSTPOD_GUEST_TIMEOUT (seconds per boot, default 3600), RUSTPOD_GUEST_MEM (MiB, 2048),
# RUSTPOD_GUEST_CPUS (2), RUSTPOD_GUEST_TESTS (a test list in the format of
# hack/guest/sid-tests.list, to run fewer tests), RUSTPOD_GUEST_MAX_AGE (days, 7).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
need_root

# Bump to rebuild the cached image when how it is built changes.
IMAGE_VERSION=1
SUITE=${RUSTPOD_GUEST_SUITE:-sid}
# udev loads the virtio modules (the disk's in the initramfs, 9p's after it). The kernel brings
# the initramfs generator sid prefers (dracut: naming initramfs-tools too makes them conflict).
# python3, strace and time: for hack/bench-sid (bench.py runs in the guest).
GUEST_PKGS=(systemd systemd-sysv udev dbus linux-image-amd64 busybox-static iproute2 util-linux jq kmod procps
	containerd runc crun criu docker.io docker-cli podman python3 strace time)
# What the summary and the .versions file show.
SHOWN_PKGS=(linux-image-amd64 systemd containerd runc crun criu docker.io podman libc6)
HOST_PKGS=(qemu-system-x86 debootstrap e2fsprogs)
CACHE=/var/tmp/rustpod-guest-sid
MAX_AGE=${RUSTPOD_GUEST_MAX_AGE:-7}
TIMEOUT=${RUSTPOD_GUEST_TIMEOUT:-3600}

build=1 keep= image_only= bench_dir= part=both
while (($#)); do
	case $1 in
	--no-build) build= ;;
	--keep-log) keep=1 ;;
	--image-only) image_only=1 ;;
	--part)
		[[ ${2:-} =~ ^(main|one-vcpu|host)$ ]] || die "--part takes main, one-vcpu or host"
		part=$2
		shift
		;;
	--bench) (($# > 1)) || die "--bench needs a results dir"; bench_dir=$(abspath "$2"); shift ;;
	*) die "usage: guest-sid.sh [--no-build] [--keep-log] [--image-only] [--part main|one-vcpu|host] [--bench DIR]" ;;
	esac
	shift
done

now() { date +%s; }
who=guest-sid
[[ $part != one-vcpu ]] || who="guest-sid (one vCPU)"
[[ $part != host ]] || who="sid root"
say() { echo "$who: $*" >&2; }

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
	# The tests start their own containerds and dockerds; the distro's must not run.
	local unit
	for unit in containerd.service docker.service docker.socket; do
		ln -sfn /dev/null "$root/etc/systemd/system/$unit"
	done
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
		After=dbus.service systemd-logind.service basic.target local-fs.target remote-fs.target
		RequiresMountsFor=/mnt/rustpod-out
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
	# Nothing that waits for a network, a clock or a login the guest does not have.
	for unit in serial-getty@.service getty@.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
		fstrim.timer man-db.timer systemd-networkd-wait-online.service; do
		ln -sfn /dev/null "$root/etc/systemd/system/$unit"
	done
	passwd -R "$root" -d root >/dev/null
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	first_boot_work "$root"
}

# first_boot_work DIR: what systemd would do on every boot of the -snapshot disk (an /etc
# newer than /usr: ldconfig, sysusers; the journal catalog is not needed), done once here;
# under TCG it costs 10 s a boot.
first_boot_work() {
	local root=$1 unit
	chroot "$root" ldconfig
	chroot "$root" systemd-sysusers >/dev/null
	for unit in systemd-journal-catalog-update.service e2scrub_reap.service dpkg-db-backup.timer \
		systemd-tmpfiles-clean.timer; do
		ln -sfn /dev/null "$root/etc/systemd/system/$unit"
	done
	touch "$root/etc/.updated" "$root/var/.updated"
}

# build_image BASE: debootstrap into a temp dir; BASE.vmlinuz and BASE.initrd are its kernel and
# initramfs, BASE.versions what it got, BASE.ext4 the disk; each renamed into place.
build_image() {
	local base=$1 root include t0
	root=$(mktemp -d /var/tmp/rustpod-guest-root.XXXXXX)
	# shellcheck disable=SC2064
	trap "rm -rf '$root' '$base'.*.tmp" RETURN
	include=$(IFS=,; echo "${GUEST_PKGS[*]}")
	say "debootstrap $SUITE from $(mirror) (a few minutes)"
	t0=$(now)
	if ! debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$(mirror)" \
		>"$CACHE/debootstrap.log" 2>&1; then
		tail -n 20 "$CACHE/debootstrap.log" >&2
		die "debootstrap $SUITE failed (log: $CACHE/debootstrap.log; RUSTPOD_GUEST_SUITE=testing if sid is broken today)"
	fi
	say "debootstrap took $(($(now) - t0)) s"
	configure_root "$root"
	copy_boot_files "$root" "$base"
	chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' "${SHOWN_PKGS[@]}" >"$base.versions.tmp" ||
		die "dpkg-query in $root failed"
	mkfs.ext4 -q -F -L rustpod-root -d "$root" "$base.ext4.tmp" 8G >/dev/null || die "mkfs.ext4 -d $root failed"
	local f
	for f in vmlinuz initrd versions ext4; do mv -f "$base.$f.tmp" "$base.$f"; done
}

# copy_boot_files ROOT BASE: the kernel the image installed and the initramfs it made for it.
copy_boot_files() {
	local root=$1 base=$2 kernel
	kernel=$(ls -1 "$root"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1)
	[[ $kernel ]] || die "no kernel in $root/boot (linux-image-amd64 did not install)"
	[[ -f $root/boot/initrd.img-${kernel##*/vmlinuz-} ]] ||
		die "no $root/boot/initrd.img-${kernel##*/vmlinuz-} (the initramfs generator the kernel pulled in did not run)"
	cp "$kernel" "$base.vmlinuz.tmp"
	cp "$root/boot/initrd.img-${kernel##*/vmlinuz-}" "$base.initrd.tmp"
}

# cached_base: the cached image's base path, if it is complete and young enough.
cached_base() {
	local base=$CACHE/debian-$SUITE-$(image_key) f
	for f in vmlinuz initrd versions ext4; do [[ -f $base.$f ]] || return 1; done
	[[ -z $(find "$base.ext4" -mmin +$((MAX_AGE * 1440))) ]] || { say "the cached $SUITE image is older than $MAX_AGE days"; return 1; }
	echo "$base"
}

# plan DIR: the test binaries (cargo test --no-run) and the environment the guest runs them in.
write_plan() {
	local out=$1 list=${RUSTPOD_GUEST_TESTS:-$here/guest/sid-tests.list} pkg tests=() line
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
		RUSTPOD_CONTAINERD=/usr/bin/containerd
		RUSTPOD_TEST_THREADS=${RUSTPOD_GUEST_TEST_THREADS:-2}
		RUSTPOD_GUEST_FILE_TIMEOUT=${RUSTPOD_GUEST_FILE_TIMEOUT:-600}
	EOF
	printf '#!/bin/sh\nexec %q %q\n' "$(abspath "$here/guest/sid-tests.sh")" /mnt/rustpod-out >"$out/run"
	chmod 755 "$out/run"
}

# write_bench_plan OUT: what the guest needs to run bench.py instead of the tests.
write_bench_plan() {
	local out=$1 floor
	[[ -x $CARGO_TARGET_DIR/release/rustpod ]] || die "no $CARGO_TARGET_DIR/release/rustpod: run hack/bench-sid, which builds it"
	floor=$(build_floor)
	cp "$floor" "$out/floor"
	cat >"$out/env" <<-EOF
		REPO=$(abspath "$here/..")
		CARGO_TARGET_DIR=$CARGO_TARGET_DIR
	EOF
	# shellcheck disable=SC2086 # the options are words
	printf '#!/bin/sh\nexec %q %q' "$(abspath "$here/guest/sid-bench.sh")" /mnt/rustpod-out >"$out/run"
	printf ' %q' ${RUSTPOD_GUEST_BENCH_ARGS:-} >>"$out/run"
	echo >>"$out/run"
	chmod 755 "$out/run"
}

# boot OUT BASE CPUS: run the guest until it powers off or the timeout. systemd mounts the shares
# (systemd.mount-extra=) with the 9p modules of the guest's own kernel.
boot() {
	local out=$1 base=$2 cpus=$3 repo rc=0 opts=trans=virtio,version=9p2000.L,msize=262144
	repo=$(abspath "$here/..")
	say "booting (TCG, $cpus CPUs, ${RUSTPOD_GUEST_MEM:-2048} MiB; serial log: $out/console.log)"
	local share=(-fsdev "local,id=f1,path=$repo,security_model=none,readonly=on"
		-device virtio-9p-pci,fsdev=f1,mount_tag=repo
		-fsdev "local,id=f2,path=$CARGO_TARGET_DIR,security_model=none,readonly=on"
		-device virtio-9p-pci,fsdev=f2,mount_tag=target
		-fsdev "local,id=f3,path=$out,security_model=none"
		-device virtio-9p-pci,fsdev=f3,mount_tag=out)
	local mounts="systemd.mount-extra=repo:$repo:9p:$opts,ro,cache=loose"
	mounts+=" systemd.mount-extra=target:$CARGO_TARGET_DIR:9p:$opts,ro,cache=loose"
	mounts+=" systemd.mount-extra=out:/mnt/rustpod-out:9p:$opts"
	# tsc=reliable: under TCG the clocksource watchdog finds the TSC skewed minutes into a run and
	# marks sched_clock unstable, a static key whose live text patch multi-threaded TCG sometimes
	# runs stale (the int3 oops in sched_clock_cpu that two of the recorded panics show).
	# softlockup_panic: the same stale patch can leave vCPUs spinning (the v2 guest's lockup);
	# a panic ends that boot at once, and run_guest resumes as after any panic.
	# KVM does not work on these machines (NOTES.md); -snapshot: writes go to a temp file
	# (TMPDIR), the cached image stays as built.
	TMPDIR=/var/tmp timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
		-accel tcg,thread=multi -cpu max -machine q35 -smp "$cpus" -m "${RUSTPOD_GUEST_MEM:-2048}" \
		-display none -no-reboot -nic none -snapshot \
		-drive "file=$base.ext4,format=raw,if=virtio,cache=unsafe" \
		-kernel "$base.vmlinuz" -initrd "$base.initrd" \
		-append "root=/dev/vda rootfstype=ext4 rw console=ttyS0 panic=-1 softlockup_panic=1 tsc=reliable systemd.show_status=error systemd.journald.forward_to_console=1 $mounts" \
		"${share[@]}" -serial "file:$out/console.log" -monitor none </dev/null || rc=$?
	((rc != 124)) || say "the guest did not finish within $TIMEOUT s (RUSTPOD_GUEST_TIMEOUT)"
	return "$rc"
}

# take_marked OUT DEST MARK: the files marked MARK=1 leave OUT's list for a plan of their own in
# DEST. False when there are none.
take_marked() {
	local out=$1 dest=$2 marked="^([A-Z_]+=[^ ]+ +)*$3=1 "
	grep -qE "$marked" "$out/tests.list" || return 1
	cp "$out/binaries" "$out/env" "$out/run" "$dest/"
	grep -E "$marked" "$out/tests.list" >"$dest/tests.list"
	grep -vE "$marked" "$out/tests.list" >"$out/tests.list.tmp"
	mv "$out/tests.list.tmp" "$out/tests.list"
}

# one_vcpu_plan ONE: the one-vCPU guest's files get 1200 s each. It runs beside the host's tests,
# three vCPUs on two cores: each criu file took 550-583 s of the 600 s a file gets (run 72) and
# timed out at 603 s (run 71, with a build beside it too), where alone it takes 171-244 s. A hang
# still ends, later.
one_vcpu_plan() {
	sed -i "s/^RUSTPOD_GUEST_FILE_TIMEOUT=600\$/RUSTPOD_GUEST_FILE_TIMEOUT=1200/" "$1/env"
}

# host_plan HOST: the host's two cores run three test threads at native speed.
host_plan() {
	sed -i "s/^RUSTPOD_TEST_THREADS=.*/RUSTPOD_TEST_THREADS=${RUSTPOD_SID_ROOT_TEST_THREADS:-3}/" "$1/env"
}

# run_on_host OUT BASE: OUT's plan in sid's userland on the host's kernel (hack/guest/sid-root.sh),
# in a mount namespace of its own. What a test left running in it is reported, killed by PID,
# and fails the run.
run_on_host() {
	local out=$1 base=$2 work status=0 ns pid left=()
	work=$(mktemp -d /var/tmp/rustpod-sid-root.XXXXXX)
	say "running $(grep -cvE '^(#|$)' "$out/tests.list") files in sid's userland on this host's kernel $(uname -r) (work dir $work)"
	unshare --mount --propagation private "$here/guest/sid-root.sh" "$base.ext4" "$work" "$out" \
		"$(abspath "$here/..")" "$CARGO_TARGET_DIR" >"$out/console.log" 2>&1 || status=$?
	if [[ -s $out/mnt-ns ]]; then
		ns=$(cat "$out/mnt-ns")
		for pid in $(ls /proc | grep -E '^[0-9]+$'); do
			[[ $(readlink "/proc/$pid/ns/mnt" 2>/dev/null) == "$ns" ]] && left+=("$pid")
		done
	fi
	if ((${#left[@]})); then
		say "left running in the sid root's mount namespace, killed: $(ps -o pid=,args= -p "$(IFS=,; echo "${left[*]}")" | tr '\n' ';')"
		kill -KILL "${left[@]}" 2>/dev/null || true
		for pid in "${left[@]}"; do wait_dead "$pid" 10 || say "pid $pid did not die"; done
		status=1
	fi
	rm -rf "$work"
	((status == 0)) || tail -n 20 "$out/console.log" >&2
	return "$status"
}

# panic_cause CONSOLE: the kernel's first report in CONSOLE (an oops, a soft lockup) and its panic line.
panic_cause() {
	grep -m2 -oE '(BUG: .*|Oops: .*|Kernel panic - not syncing: .*)' "$1" | tr -d '\r' | paste -sd ';' -
}

# run_guest OUT BASE CPUS: boot until the guest has run OUT's whole list.
# The guest's kernel panics now and then under TCG, with no test at fault: an int3 oops at a
# nop that the kernel has just patched (a static key), which multi-threaded TCG executes
# stale. sid-tests.sh records each finished file, so boot again and go on from the file that
# was running. The same file caught by three panics in a row fails the suite (two were seen
# in checkpoint_restore, whose criu restores are followed by the oops in __schedule). The
# file that panicked runs again alone on one vCPU, which runs no code another vCPU patches
# (checkpoint_restore panicked 5 times in 5 boots on two, passed on one: 244 s against 171),
# then the rest on CPUS.
run_guest() {
	local out=$1 base=$2 own_cpus=$3 cpus=$3 status=0 boots=1 last_done=-1 in_file=0 done_files
	boot "$out" "$base" "$cpus" || status=$?
	# A benchmark is not resumed after a panic: its rounds would mix two boots.
	while [[ ! -f $out/status && -z $bench_dir ]]; do
		if [[ -f $out/one-file-done ]]; then
			rm -f "$out/one-file-done"
			mv "$out/console.log" "$out/console-one-vcpu-$boots.log"
			say "the file that panicked ran on one vCPU; booting again to go on"
			cpus=$own_cpus
		elif grep -q 'Kernel panic' "$out/console.log" 2>/dev/null; then
			done_files=$(awk 'END {print $1 + 0}' "$out/progress" 2>/dev/null || echo 0)
			mv "$out/console.log" "$out/console-panic-$boots.log"
			((done_files == last_done)) && in_file=$((in_file + 1)) || in_file=1
			if ((in_file >= 3 || boots >= ${RUSTPOD_GUEST_BOOTS:-8})); then
				say "the guest's kernel panicked $in_file times in file $((done_files + 1)), $boots boots in all (console: $out/console-panic-$boots.log)"
				break
			fi
			say "the guest's kernel panicked after $done_files files ($(panic_cause "$out/console-panic-$boots.log"); console: $out/console-panic-$boots.log); running file $((done_files + 1)) again on one vCPU"
			last_done=$done_files
			touch "$out/one-file"
			cpus=1
		else
			break
		fi
		boots=$((boots + 1)) status=0
		boot "$out" "$base" "$cpus" || status=$?
	done
	return "$status"
}

# show_results OUT: the guest's summary, or why there is none; false if a test failed or the
# guest did not finish.
show_results() {
	local out=$1 rc console
	if [[ -f $out/summary ]]; then
		cat "$out/summary"
	else
		console=$(ls -t "$out"/console*.log 2>/dev/null | sed -n 1p)
		say "no results: the guest did not run the tests; last lines of ${console:-its console log}:"
		tail -n 40 "$console" >&2 || true
		return 1
	fi
	[[ -f $out/status ]] || return 1
	read -r rc <"$out/status"
	((rc == 0))
}

# slowest OUT: the guest's thirty slowest tests (sid-tests.sh's OUT/test-times), for CI's time.
slowest() {
	[[ -s $1/test-times ]] || return 0
	echo "guest-sid: slowest tests (s):" >&2
	# sed, not head: head exits after 30 lines, sort dies of SIGPIPE, and pipefail with set -e
	# ended the script before it removed its results (CI run 91: rc=1 with every test passed).
	sort -rn "$1/test-times" | sed -n '1,30s/^/  /p' >&2
}

main() {
	local t0 t_img t_boot base out one= host= status=0 one_status=0 cpus=${RUSTPOD_GUEST_CPUS:-2} one_pid= d
	t0=$(now)
	install_host_packages
	mkdir -p "$CACHE"
	if ! base=$(cached_base); then
		base=$CACHE/debian-$SUITE-$(image_key)
		# Another package list's image stays until it is stale: another checkout may use it.
		find "$CACHE" -maxdepth 1 -name 'debian-*' -mtime +"$MAX_AGE" -delete
		build_image "$base"
	fi
	t_img=$(now)
	say "guest: $(tr '\n' ' ' <"$base.versions")"
	if [[ $image_only ]]; then
		say "image $base.ext4 with its kernel and initramfs ($((t_img - t0)) s)"
		return 0
	fi
	out=$(mktemp -d /var/tmp/rustpod-guest-out.XXXXXX)
	chmod 755 "$out"
	if [[ $bench_dir ]]; then
		write_bench_plan "$out"
	else
		if [[ $build ]]; then
			need_cargo
			"$here/build.sh"
		fi
		checker=$("$here/build-checker.sh")
		pause=$("$here/build-pause.sh")
		write_plan "$out"
		# ON_HOST=1: sid's programs without its kernel, systemd or cgroup v2, run natively.
		host=$(mktemp -d /var/tmp/rustpod-guest-out.XXXXXX)
		one=$(mktemp -d /var/tmp/rustpod-guest-out.XXXXXX)
		chmod 755 "$host" "$one"
		take_marked "$out" "$host" ON_HOST && host_plan "$host" || { rm -rf "$host"; host=; }
		# criu's files (ONE_VCPU=1: their restores toggle the static key run_guest speaks of) get
		# a one-vCPU guest of their own, booted beside the main one: a lone vCPU leaves a host
		# core idle. It slows a two-vCPU guest beside it by half (a vCPU waits for its preempted
		# sibling), so hack/test.sh runs it beside the host's own tests instead.
		((cpus > 1)) && take_marked "$out" "$one" ONE_VCPU && one_vcpu_plan "$one" || { rm -rf "$one"; one=; }
		case $part in
		host) rm -rf "$out" ${one:+"$one"}; out= one= ;;
		main) rm -rf ${host:+"$host"} ${one:+"$one"}; host= one= ;;
		one-vcpu) rm -rf "$out" ${host:+"$host"}; out=$one one= host= cpus=1 ;;
		esac
		if [[ -z $out && -z $host ]]; then
			say "nothing to run: no file of the list is marked for --part $part (ONE_VCPU=1 needs RUSTPOD_GUEST_CPUS > 1)"
			return 0
		fi
	fi
	t_boot=$(now)
	if [[ $host ]]; then
		(who="sid root"; run_on_host "$host" "$base") || status=1
	fi
	if [[ $one ]]; then
		(who="guest-sid (one vCPU)"; run_guest "$one" "$base" 1) &
		one_pid=$!
	fi
	[[ -z $out ]] || run_guest "$out" "$base" "$cpus" || status=$?
	[[ $one_pid ]] && { wait "$one_pid" || one_status=$?; }
	if [[ $host ]]; then
		echo
		echo "== sid's userland on this host's kernel ($(uname -r), cgroup $(stat -fc %T /sys/fs/cgroup)): the files marked ON_HOST=1 =="
		show_results "$host" || status=1
	fi
	if [[ $out ]]; then
		echo
		echo "== sid guest (Debian $SUITE, its kernel, systemd as PID 1, cgroup v2, containerd 2)$([[ $part == one-vcpu ]] && echo ": the files marked ONE_VCPU=1, on one vCPU") =="
		if [[ $bench_dir && -d $out/bench ]]; then
			mkdir -p "$bench_dir"
			cp -r "$out/bench/." "$bench_dir/"
			say "benchmark results copied to $bench_dir"
		fi
		show_results "$out" || status=1
	fi
	if [[ $one ]]; then
		echo "-- beside it, on one vCPU: the files marked ONE_VCPU=1 --"
		show_results "$one" || status=1
	fi
	local skips=()
	for d in $out $one $host; do [[ -s $d/skips ]] && skips+=("$d/skips"); done
	if ((${#skips[@]})); then
		echo "-- skipped --"
		sort -u "${skips[@]}"
	fi
	((one_status == 0)) || status=1
	printf 'guest-sid: times: image %ss (cached: %s), build %ss, boot+tests %ss\n' \
		"$((t_img - t0))" "$([[ $((t_img - t0)) -lt 5 ]] && echo yes || echo no)" \
		"$((t_boot - t_img))" "$(($(now) - t_boot))" >&2
	[[ $host && -f $host/timing ]] && sed 's/^/(sid root) /' "$host/timing" >&2
	[[ $out && -f $out/timing ]] && cat "$out/timing" >&2
	[[ $one && -f $one/timing ]] && sed 's/^/(one vCPU) /' "$one/timing" >&2
	for d in $host $out $one; do slowest "$d"; done
	if ((status)) || [[ $keep ]]; then
		say "results kept in $(echo $host $out $one)"
	else
		rm -rf $host $out $one
	fi
	return "$status"
}

main

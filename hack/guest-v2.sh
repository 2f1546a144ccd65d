#!/usr/bin/env bash
# The cgroup v2 suite: boots a throw-away QEMU guest with a pure cgroup v2 hierarchy (Debian's
# kernel with cgroup_no_v1=all, a busybox initramfs holding the static rustpod, runc and the
# test binaries) and runs the cgroup, device, update, pause, events, delete and leak tests there.
# Usage: guest-v2.sh [--no-build] [TEST_FILE [LIBTEST_ARGS...]]
#   with a TEST_FILE (e.g. cgroup_devices), runs only that file, with those libtest arguments.
# Prints the guest's console, then "N passed, N failed" and the skips with their reasons;
# exits non-zero if any test failed or the guest did not finish within
# $RUSTPOD_GUEST_TIMEOUT seconds (default 1200). RUSTPOD_V2_GUEST_CPUS: its vCPUs (2; hack/test.sh
# gives it 1 beside the one-vCPU sid guest). Never touches the host's cgroups.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

hack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$hack/.."
cache=/var/tmp/rustpod-guest-v2
timeout_s=${RUSTPOD_GUEST_TIMEOUT:-1200}

# A test file of tests/tests/ (or the shim's unit tests, by its binary's name), then libtest
# arguments (filters, --skip). Files with containerd or CRI tests are not here: the guest has
# neither.
shim=containerd-shim-rustpod-v1
default_tests=(
	"$shim metrics:: oom::"
	"cgroup_devices"
	"cgroup_v2"
	"config_cgroups"
	"cli_update"
	"cli_lifecycle"
	"cli_differential"
	"reliability_faults"
	"reliability_soak"
	"pause"
)
# Environment for the guest's tests.
guest_env='export RUSTPOD_SOAK_CYCLES=20'

build=1
if [[ ${1:-} == --no-build ]]; then
	build=0
	shift
fi
if (($#)); then
	tests=("$*")
else
	tests=("${default_tests[@]}")
fi

install_packages() {
	"$hack/install-deps.sh" qemu-system-x86 linux-image-amd64 busybox-static cpio
}

# The newest installed Debian kernel.
kernel() {
	local k
	k=$(ls -v /boot/vmlinuz-* 2>/dev/null | tail -n 1)
	[[ -n $k ]] || die "no /boot/vmlinuz-*: install linux-image-amd64"
	echo "$k"
}

# Test executables of the files in "${tests[@]}", one "name path" a line.
build_tests() {
	local args=(-p rustpod-tests) t
	for t in "${tests[@]}"; do
		if [[ ${t%% *} == "$shim" ]]; then
			args+=(-p "$shim" --bin "$shim")
		else
			args+=(--test "${t%% *}")
		fi
	done
	local json
	json=$(mktemp "$cache/build.XXXXXX")
	if ! cargo test --locked --no-run "${args[@]}" --message-format=json >"$json" 2>"$json.err"; then
		cat "$json.err" >&2
		rm -f "$json" "$json.err"
		die "building the guest's test binaries failed"
	fi
	jq -r 'select(.reason == "compiler-artifact" and .executable != null and .profile.test)
		| "\(.target.name) \(.executable)"' "$json"
	rm -f "$json" "$json.err"
}

# stripped SRC: a copy without debug info, cached by the content it came from.
stripped() {
	local sum dest
	sum=$(sha256sum <"$1" | cut -c1-32)
	dest=$cache/bin/$sum-${1##*/}
	if [[ ! -e $dest ]]; then
		mkdir -p "$cache/bin"
		objcopy --strip-debug "$1" "$dest.$$.tmp"
		mv "$dest.$$.tmp" "$dest"
	fi
	echo "$dest"
}

# stage_file SRC DEST: SRC into the staging dir at DEST, plus a manifest line for the cache key.
stage_file() {
	mkdir -p "$stage$(dirname "$2")"
	cp -L "$1" "$stage$2"
	echo "$2 $(sha256sum <"$1" | cut -c1-64)" >>"$stage.manifest"
}

# stage_libs BIN: the shared libraries ldd lists for BIN, at their paths.
stage_libs() {
	local lib
	for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*'); do
		[[ -e $stage$lib ]] || stage_file "$lib" "$lib"
	done
}

stage_busybox() {
	local applet
	stage_file /bin/busybox /bin/busybox
	mkdir -p "$stage/sbin" "$stage/usr/bin" "$stage/usr/sbin" "$stage/etc" "$stage/newroot"
	# Each applet where Debian has it (/usr/bin/env …) and in /bin.
	for applet in $(/bin/busybox --list-full); do
		[[ $applet == bin/busybox ]] && continue
		ln -sf /bin/busybox "$stage/$applet"
		[[ -e $stage/bin/${applet##*/} ]] || ln -s busybox "$stage/bin/${applet##*/}"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$stage/etc/passwd"
	printf 'root:x:0:\ntty:x:5:\nnogroup:x:65534:\n' >"$stage/etc/group"
}

# Builds (or finds in the cache) the initramfs; prints its path.
initramfs() {
	local target=${CARGO_TARGET_DIR}/debug name path t
	stage=$(mktemp -d "$cache/stage.XXXXXX")
	trap 'rm -rf "$stage" "$stage.manifest"' EXIT
	: >"$stage.manifest"
	stage_busybox
	stage_file "$hack/guest-v2-init.sh" /init
	stage_file "$(stripped "$target/rustpod")" /guest/bin/rustpod
	stage_file "$CARGO_TARGET_DIR/static/rustpod-checker" /guest/bin/rustpod-checker
	stage_file "$CARGO_TARGET_DIR/static/rustpod-pause" /guest/bin/rustpod-pause
	stage_file /usr/sbin/runc /usr/sbin/runc
	stage_libs /usr/sbin/runc
	local built
	built=$(build_tests) || exit 1
	while read -r name path; do
		stage_file "$(stripped "$path")" "/guest/tests/$name"
		stage_libs "$path"
	done <<<"$built"
	for t in "${tests[@]}"; do echo "$t"; done >"$stage/guest/tests.list"
	echo "$guest_env" >"$stage/guest/env"
	cat "$stage/guest/tests.list" "$stage/guest/env" >>"$stage.manifest"
	local key
	key=$(sha256sum <"$stage.manifest" | cut -c1-24)
	path=$cache/initramfs-$key.cpio
	if [[ ! -e $path ]]; then
		(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$path.$$.tmp"
		mv "$path.$$.tmp" "$path"
		# Keep the four newest images, and stripped binaries used in the last two days.
		ls -t "$cache"/initramfs-*.cpio | tail -n +5 | xargs -r rm -f
		find "$cache/bin" -type f -mtime +1 -delete
	fi
	rm -rf "$stage" "$stage.manifest"
	trap - EXIT
	echo "$path"
}

# KVM when it really runs a guest (a probe boot); TCG otherwise. /dev/kvm alone proves
# nothing: on hosts without vmx/svm the guest hangs after SeaBIOS.
accel() {
	local out
	if grep -qwE 'vmx|svm' /proc/cpuinfo && [[ -w /dev/kvm ]]; then
		out=$(timeout 30 "${qemu[@]}" -accel kvm -cpu host -kernel "$1" -initrd "$2" \
			-append "console=ttyS0 quiet panic=-1 rustpod.probe=1" </dev/null 2>&1 || true)
		if [[ $out == *"=== guest probe ok"* ]]; then
			echo "-accel kvm -cpu host"
			return
		fi
	fi
	echo "-accel tcg,thread=multi -cpu max"
}

# Sums the libtest summaries of the console log; lists the skips; fails on any failure.
report() {
	local log=$1 passed failed bad
	read -r passed failed < <(sed -nE 's/^test result: [A-Za-z]+\. ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/p' "$log" |
		awk '{p += $1; f += $2} END {print p + 0, f + 0}')
	bad=$(grep -E '^=== guest exit [^ ]+ [1-9]' "$log" | awk '{print $4}' | tr '\n' ' ' || true)
	echo
	echo "== cgroup v2 guest: $passed passed, $failed failed =="
	grep '^SKIP' "$log" | sort -u || echo "(no test skipped)"
	if ! grep -q '^=== guest done' "$log"; then
		echo "guest-v2: the guest did not finish (timeout after ${timeout_s}s or a crash; log: $log)" >&2
		return 1
	fi
	if [[ -n $bad || $failed != 0 ]]; then
		echo "guest-v2: failing test binaries: ${bad:-none exited non-zero} (log: $log)" >&2
		return 1
	fi
}

install_packages
mkdir -p "$cache"
if ((build)); then
	"$hack/build.sh"
	"$hack/build-checker.sh" >/dev/null
	"$hack/build-pause.sh" >/dev/null
fi
t0=$(date +%s)
kernel=$(kernel)
initrd=$(initramfs)
t1=$(date +%s)
qemu=(qemu-system-x86_64 -nodefaults -no-user-config -display none -serial stdio -no-reboot -m 2048 -smp "${RUSTPOD_V2_GUEST_CPUS:-2}")
read -ra accel_args <<<"$(accel "$kernel" "$initrd")"
log=$(mktemp "$cache/console.XXXXXX")
echo "guest-v2: $kernel, initramfs $initrd ($(du -h "$initrd" | cut -f1), $((t1 - t0))s), ${accel_args[*]}"

# boot FROM SECONDS: one boot running the list from its FROMth file, its console appended to $log.
# softlockup_panic ends the boot as soon as the guest's kernel reports a stuck CPU.
boot() {
	local status=0 t=$(date +%s)
	timeout --kill-after=10 "$2" "${qemu[@]}" "${accel_args[@]}" -kernel "$kernel" -initrd "$initrd" \
		-append "console=ttyS0 quiet loglevel=3 panic=-1 softlockup_panic=1 cgroup_no_v1=all rustpod.from=$1" \
		</dev/null | tr -d '\r' | tee -a "$log" || status=$?
	echo "guest-v2: guest ran $(($(date +%s) - t))s from file $1, qemu exit status $status"
}

# Multi-threaded TCG now and then runs a just-patched static key stale (guest-sid.sh has the
# same, as panics). Here it showed as a soft lockup of both vCPUs at cgroup_devices' first device
# program (runc 1.1.5's parent and child, 20 minutes, in CI on 9a8b67c): no test's fault, so the
# file it stopped in and those after it get one fresh boot. A second lockup, or any other crash, fails.
boot 1 "$timeout_s"
if ! grep -q '^=== guest done' "$log" && grep -q 'soft lockup' "$log"; then
	stuck=$(grep '^=== guest run ' "$log" | tail -n 1 | awk '{print $4}')
	from=$(grep -c '^=== guest run ' "$log")
	echo "guest-v2: the guest kernel locked up during ${stuck:-boot} ($(grep -m1 -o 'soft lockup.*' "$log"));" \
		"booting once more to run it and the files after it" >&2
	left=$((timeout_s - ($(date +%s) - t1)))
	((left > 60)) || left=60
	boot "$((from > 0 ? from : 1))" "$left"
fi
report "$log" || exit 1
rm -f "$log"

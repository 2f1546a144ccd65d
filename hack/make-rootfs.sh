#!/usr/bin/env bash
# Usage: make-rootfs.sh DIR
# Create a minimal busybox rootfs at DIR (static /bin/busybox plus one symlink per applet); no-op if it exists.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(($# == 1)) || die "usage: make-rootfs.sh DIR"
dir=$1
[[ -e $dir/bin/busybox ]] && exit 0
bb=/bin/busybox
[[ -x $bb ]] || die "$bb missing (install busybox-static)"

umask 022
mkdir -p "$dir"
chmod 755 "$dir"
mkdir -p "$dir"/{bin,proc,sys,dev,etc,var,run,tmp,root}
chmod 1777 "$dir/tmp"
chmod 700 "$dir/root"
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$dir/etc/passwd"
printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$dir/etc/group"

mapfile -t applets < <("$bb" --list | grep -vx busybox)
cd "$dir/bin"
# One process for every applet link (ln -sfn each): a fork per link costs minutes under QEMU TCG.
perl -e 'for (@ARGV) { unlink; symlink("busybox", $_) or die "symlink busybox $_: $!\n" }' "${applets[@]}"
# busybox goes in last, so a run that was interrupted is redone.
cp --reflink=auto "$bb" busybox.tmp
mv -f busybox.tmp busybox

#!/usr/bin/env bash
# Usage: sid-packages.sh PACKAGE[=VERSION]...
# Fetch Debian sid packages that Debian 12 lacks (containerd 2.x today; newer runc, crun, criu
# for the guests later) and unpack each one, without its dependencies, for tests to run the
# binaries in place. Prints one line per package: NAME VERSION DIR, DIR being where
# `dpkg -x` unpacked it (DIR/usr/bin/...).
#
# Everything goes through a private apt configuration under $RUSTPOD_SID_DIR
# (/var/tmp/rustpod-sid): its own apt.conf (APT_CONFIG, so none of the host's apt.conf.d is
# read), sources.list, lists, cache and an empty dpkg status. The host's sources and dpkg
# database are never touched. sid's Release is verified with the host's
# /usr/share/keyrings/debian-archive-keyring.gpg (sid is signed by the bookworm and trixie
# archive keys too); each .deb by its hash in that signed index. Valid-Until is not checked,
# as the host's own apt config does not: deb.debian.org is a frozen snapshot on these machines.
#
# Cached, keyed by what it fetched: an unpacked NAME_VERSION directory is reused as it is; the
# index is fetched again when older than $RUSTPOD_SID_MAX_AGE minutes (default one day), and
# an old index is used, with a warning, when the mirror cannot be reached.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(($#)) || die "usage: sid-packages.sh PACKAGE[=VERSION]..."
need_root
top=${RUSTPOD_SID_DIR:-/var/tmp/rustpod-sid}
max_age=${RUSTPOD_SID_MAX_AGE:-1440}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
mirror=http://deb.debian.org/debian
apt=$top/apt

[[ -r $keyring ]] || die "$keyring: not readable (install debian-archive-keyring)"

# private_dir DIR: create DIR, refusing one that someone else made (tests run what it holds as root).
private_dir() {
	mkdir -p -m 0755 "$1"
	[[ $(stat -c %u "$1") == 0 && ! -L $1 ]] || die "$1: not a directory owned by root; refusing to use it"
}

# write_config: the private apt configuration, rewritten on every run (it is tiny).
write_config() {
	mkdir -p "$apt/parts" "$apt/preferences.d" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/state"
	: >>"$apt/status"
	echo "deb [signed-by=$keyring] $mirror sid main" >"$apt/sources.list"
	cat >"$apt/apt.conf" <<-EOF
		Dir::Etc::main "/dev/null";
		Dir::Etc::parts "$apt/parts";
		Dir::Etc::sourcelist "$apt/sources.list";
		Dir::Etc::sourceparts "-";
		Dir::Etc::preferences "/dev/null";
		Dir::Etc::preferencesparts "$apt/preferences.d";
		Dir::State "$apt/state";
		Dir::State::lists "$apt/lists";
		Dir::State::status "$apt/status";
		Dir::Cache "$apt/cache";
		APT::Architecture "$(dpkg --print-architecture)";
		Acquire::Languages "none";
		Acquire::GzipIndexes "true";
		Acquire::Check-Valid-Until "false";
	EOF
}

sid_apt() { APT_CONFIG=$apt/apt.conf "$@"; }

# fresh_index: true if the sid index was fetched less than max_age minutes ago (a stamp of
# our own: apt dates the lists it fetches by the archive's time, not ours).
fresh_index() {
	local stamp=$apt/updated
	[[ -e $stamp && -z $(find "$stamp" -mmin "+$max_age") ]]
}

update_index() {
	fresh_index && return
	local log=$top/update.log
	if sid_apt apt-get -q update >"$log" 2>&1 && ! grep -q '^[WE]:' "$log"; then
		touch "$apt/updated"
		return
	fi
	ls "$apt/lists/"*_Packages* >/dev/null 2>&1 || { cat "$log" >&2; die "apt-get update of sid failed (log: $log)"; }
	echo "sid-packages.sh: warning: could not refresh the sid index, using the old one (log: $log)" >&2
}

# candidate NAME[=VERSION]: the version apt would fetch, or nothing.
candidate() {
	local name=${1%%=*}
	if [[ $1 == *=* ]]; then
		sid_apt apt-cache show "$1" 2>/dev/null | sed -n 's/^Version: //p' | sed -n 1p
	else
		sid_apt apt-cache policy "$name" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '^(none)$' || true
	fi
}

# unpack NAME VERSION: download the .deb and unpack it into pkg/NAME_VERSION (atomically).
unpack() {
	local name=$1 version=$2 dest=$top/pkg/$1_$2 work
	[[ -d $dest ]] && return
	work=$(mktemp -d "$top/tmp.XXXXXX")
	# apt downloads as _apt: let it write there.
	id _apt >/dev/null 2>&1 && chown _apt "$work"
	if ! (cd "$work" && sid_apt apt-get -q download "$name=$version") >"$work/download.log" 2>&1; then
		cat "$work/download.log" >&2
		rm -rf "$work"
		die "apt-get download $name=$version from sid failed"
	fi
	mkdir "$work/root"
	dpkg-deb -x "$work/$name"_*.deb "$work/root" || { rm -rf "$work"; die "dpkg-deb -x $name $version failed"; }
	mv -T "$work/root" "$dest"
	rm -rf "$work"
}

private_dir "$top"
private_dir "$top/pkg"
# One run at a time: CI, sessions and tests may ask at once.
exec 9>"$top/lock"
flock 9
write_config
update_index

for want in "$@"; do
	name=${want%%=*}
	version=$(candidate "$want")
	[[ $version ]] || die "sid has no package $want"
	unpack "$name" "$version"
	echo "$name $version $top/pkg/${name}_$version"
done

#!/usr/bin/env bash
# Usage: install-deps.sh [EXTRA_PACKAGE...]
# Install the Debian packages that rustpod's build and tests need (and any extra ones named).
# apt-get runs only when a package is missing; the distro services (containerd, docker) are never started.
# docker.io and podman are the real clients tests/tests/docker_client.rs and podman_client.rs drive.
# containerd 2.x, which Debian 12 lacks, comes from sid, unpacked beside the system (never
# installed) by hack/sid-packages.sh, for tests/tests/shim_containerd2.rs; containerd 1.6 stays
# the host's.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
. "$here/lib.sh"

# sid_packages: the packages Debian 12 lacks, each unpacked under /var/tmp (cached).
sid_packages() { "$here/sid-packages.sh" containerd >/dev/null; }

pkgs=(containerd runc crun busybox-static libseccomp-dev protobuf-compiler pkg-config jq iproute2 util-linux docker.io podman)
pkgs+=("$@")

missing=()
for p in "${pkgs[@]}"; do
	[[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
	sid_packages
	exit 0
fi

need_root
log=/var/tmp/rustpod-install-deps.log
export DEBIAN_FRONTEND=noninteractive

# Keep postinst scripts from starting services (containerd, docker) while we install,
# unless the machine already has a policy of its own.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	trap 'rm -f "$policy"' EXIT
fi

if ! { apt-get -qq update && apt-get -qq install -y --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
	cat "$log" >&2
	die "apt-get failed installing: ${missing[*]} (log: $log)"
fi
sid_packages

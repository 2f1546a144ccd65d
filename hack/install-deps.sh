#!/usr/bin/env bash
# Usage: install-deps.sh [EXTRA_PACKAGE...]
# Install the Debian packages that rustpod's build and tests need (and any extra ones named).
# apt-get runs only when a package is missing; the distro services (containerd, docker) are never started.
# docker.io and podman are the real clients tests/tests/docker_client.rs and podman_client.rs drive.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pkgs=(containerd runc crun busybox-static libseccomp-dev protobuf-compiler pkg-config jq iproute2 util-linux docker.io podman strace)
pkgs+=("$@")

missing=()
for p in "${pkgs[@]}"; do
	[[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] || missing+=("$p")
done
((${#missing[@]})) || exit 0

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

#!/bin/sh
# A CNI plugin that configures nothing: the pod's network namespace keeps only its (down) lo.
# Linked as `loopback` and `noop` into a test containerd's CNI bin dir (Cri::enable_pod_network
# in tests/cri), so that pods with their own network namespace (userns pods need one: containerd
# pins the user namespace through it) run where no CNI plugins are installed. It answers ADD
# with a made-up address, as containerd wants one for the pod's eth0.
set -eu
conf=$(cat)
version=$(printf '%s' "$conf" | sed -n 's/.*"cniVersion" *: *"\([^"]*\)".*/\1/p')
version=${version:-1.0.0}
case ${CNI_COMMAND:-} in
ADD)
	case $CNI_IFNAME in
	lo) addr=127.0.0.1/8 ;;
	*) addr=10.255.0.2/16 ;;
	esac
	printf '{"cniVersion":"%s","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[{"version":"4","interface":0,"address":"%s"}]}\n' \
		"$version" "$CNI_IFNAME" "$CNI_NETNS" "$addr"
	;;
DEL | CHECK | GC | STATUS) ;;
VERSION) printf '{"cniVersion":"%s","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}\n' "$version" ;;
*) echo "cni-noop: unknown CNI_COMMAND ${CNI_COMMAND:-}" >&2; exit 1 ;;
esac

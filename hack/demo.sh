#!/usr/bin/env bash
# The main job on a fresh machine: install what rustpod needs, build it, make a
# busybox bundle and run a real container through rustpod, printing its output.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

hack=$(dirname "${BASH_SOURCE[0]}")
"$hack/install-deps.sh"
echo "building rustpod (release; the first build takes several minutes)..." >&2
"$hack/build.sh" --release
rustpod=$CARGO_TARGET_DIR/release/rustpod

bundle=$(mktemp -d /var/tmp/rustpod-demo.XXXXXX)
id=rustpod-demo-$$
cleanup() {
	"$rustpod" delete --force "$id" 2>/dev/null || true
	rm -rf "$bundle"
}
trap cleanup EXIT

"$hack/make-rootfs.sh" "$bundle/rootfs"
"$rustpod" spec --bundle "$bundle"
script='echo "hello from a rustpod container"
echo "  pid in container: $$"
echo "  hostname: $(hostname)"
echo "  user: $(id)"
echo "  cgroup: $(grep memory /proc/1/cgroup || head -1 /proc/1/cgroup)"'
jq --arg s "$script" '.process.terminal = false | .process.args = ["sh", "-c", $s]' \
	"$bundle/config.json" >"$bundle/config.json.new"
mv "$bundle/config.json.new" "$bundle/config.json"

"$rustpod" run --bundle "$bundle" "$id"

#!/usr/bin/env bash
# Usage: make-oci-image.sh NAME[:TAG] OUT.tar [--entrypoint ARG]... [--cmd ARG]... [--add FILE:/path/in/image]...
# Build a one-layer busybox image archive by hand, reproducibly. The tar is an OCI layout (what
# `ctr image import` reads) and also carries docker's top-level manifest.json (what docker 20.10's
# `docker load` and podman's docker-archive: transport read); both name the same blobs.
# With RUSTPOD_IMAGE_CACHE set (hack/test.sh makes one per run), an archive built before from the
# same inputs is linked from that directory instead: every containerd and CRI test imports these
# images, and under QEMU TCG each build costs seconds.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

usage="usage: make-oci-image.sh NAME[:TAG] OUT.tar [--entrypoint ARG]... [--cmd ARG]... [--add FILE:/path/in/image]..."
(($# >= 2)) || die "$usage"
ref=$1 out=$2
shift 2
entrypoint=() cmd=() adds=() cmd_set=
while (($#)); do
	(($# >= 2)) || die "$usage"
	case $1 in
	--entrypoint) entrypoint+=("$2") ;;
	--cmd) cmd+=("$2") cmd_set=1 ;;
	--add) [[ $2 == ?*:/?* ]] || die "--add wants FILE:/abs/path, got '$2'"
		[[ -f ${2%:*} ]] || die "--add: no such file: ${2%:*}"
		adds+=("$2") ;;
	*) die "$usage" ;;
	esac
	shift 2
done
[[ $cmd_set ]] || ((${#entrypoint[@]})) || cmd=(sh)

# cache_key: what the archive is made of: these scripts, busybox, the arguments, the added files.
cache_key() {
	local a
	{
		sha256sum "${BASH_SOURCE[0]}" "$here/make-rootfs.sh" /bin/busybox | cut -d' ' -f1
		printf '%s\0' "$ref" "${#entrypoint[@]}" "${entrypoint[@]}" "${#cmd[@]}" "${cmd[@]}"
		for a in "${adds[@]}"; do
			printf '%s\0' "${a##*:}"
			sha256sum "${a%:*}" | cut -d' ' -f1
		done
	} | sha256sum | cut -c1-32
}
cached=
if [[ ${RUSTPOD_IMAGE_CACHE:-} ]]; then
	cached=$RUSTPOD_IMAGE_CACHE/$(cache_key).tar
	mkdir -p "$(dirname "$out")"
	if [[ -f $cached ]] && { ln -f "$cached" "$out" 2>/dev/null || cp "$cached" "$out"; }; then
		exit 0
	fi
fi

# NAME:TAG -> TAG and the full name containerd uses (docker.io/library/... when no registry).
name=$ref tag=latest
if [[ ${ref##*/} == *:* ]]; then name=${ref%:*} tag=${ref##*:}; fi
[[ $name && $tag ]] || die "bad image name '$ref'"
first=${name%%/*}
if [[ $name != */* ]]; then
	name=docker.io/library/$name
elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
	name=docker.io/$name
fi
full=$name:$tag

case $(dpkg --print-architecture 2>/dev/null || uname -m) in
amd64 | x86_64) arch=amd64 ;;
arm64 | aarch64) arch=arm64 ;;
*) die "unsupported architecture" ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umask 022
root=$work/rootfs
"$here/make-rootfs.sh" "$root"
for a in "${adds[@]}"; do
	src=${a%:*} dst=$root${a##*:}
	mkdir -p "$(dirname "$dst")"
	rm -f "$dst"    # may be an applet symlink: never write through it
	cp --reflink=auto "$src" "$dst"
	chmod go-w "$dst"
done

# deterministic tar: sorted, fixed mtime and owners, no atime/ctime.
dtar() { tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
	--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime "$@"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }
blobs=$work/oci/blobs/sha256
mkdir -p "$blobs"
put() { local d; d=$(sha "$1"); mv "$1" "$blobs/$d"; echo "$d"; }

dtar -C "$root" -cf "$work/layer.tar" .
diff_id=$(sha "$work/layer.tar")
gzip -n -6 "$work/layer.tar"
layer_size=$(size "$work/layer.tar.gz")
layer=$(put "$work/layer.tar.gz")

jarr() { if (($#)); then jq -nc '$ARGS.positional' --args "$@"; else echo null; fi; }
jq -nc --arg arch "$arch" --arg diff "sha256:$diff_id" \
	--argjson ep "$(jarr "${entrypoint[@]}")" --argjson cmd "$(jarr "${cmd[@]}")" '{
	created: "1970-01-01T00:00:00Z", architecture: $arch, os: "linux",
	config: ({Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
		WorkingDir: "/", Entrypoint: $ep, Cmd: $cmd} | with_entries(select(.value != null))),
	rootfs: {type: "layers", diff_ids: [$diff]},
	history: [{created: "1970-01-01T00:00:00Z", created_by: "rustpod hack/make-oci-image.sh"}]
}' >"$work/config.json"
config_size=$(size "$work/config.json")
config=$(put "$work/config.json")

jq -nc --arg c "sha256:$config" --argjson cs "$config_size" --arg l "sha256:$layer" --argjson ls "$layer_size" '{
	schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
	config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
	layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $l, size: $ls}]
}' >"$work/manifest.json"
manifest_size=$(size "$work/manifest.json")
manifest=$(put "$work/manifest.json")

jq -nc --arg m "sha256:$manifest" --argjson ms "$manifest_size" --arg arch "$arch" --arg full "$full" --arg tag "$tag" '{
	schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
	manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $m, size: $ms,
		platform: {architecture: $arch, os: "linux"},
		annotations: {"io.containerd.image.name": $full, "org.opencontainers.image.ref.name": $tag}}]
}' >"$work/oci/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
jq -nc --arg c "blobs/sha256/$config" --arg l "blobs/sha256/$layer" --arg full "$full" \
	'[{Config: $c, RepoTags: [$full], Layers: [$l]}]' >"$work/oci/manifest.json"

mkdir -p "$(dirname "$out")"
dtar -C "$work/oci" -cf "$work/out.tar" oci-layout index.json manifest.json blobs
if [[ $cached ]]; then
	# Whole or not at all, for another build of the same key at the same time.
	mkdir -p "$RUSTPOD_IMAGE_CACHE"
	cp "$work/out.tar" "$cached.$$.tmp" && mv -f "$cached.$$.tmp" "$cached"
fi
mv -f "$work/out.tar" "$out"

#!/usr/bin/env bash
# Usage: containerd.sh start DIR [--cri [--systemd-cgroup]] [--shim-dir PATHDIR] [--containerd BIN] | stop DIR | kill DIR | restart DIR
# Run a private containerd (apt's) rooted at DIR; it never touches the system containerd.
# --systemd-cgroup: `SystemdCgroup = true` in both CRI handlers' options, as on a node whose
# kubelet uses the systemd cgroup driver.
# --containerd BIN: that containerd instead (a 2.x one gets a `version = 3` config, and its own
# ctr and containerd-shim-runc-v2 beside it are used: put the latter on PATHDIR).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage="usage: containerd.sh start DIR [--cri [--systemd-cgroup]] [--shim-dir PATHDIR] [--containerd BIN] | stop DIR | kill DIR | restart DIR"
(($# >= 2)) || die "$usage"
action=$1 dir=$(abspath "$2")
shift 2
cri= shimdir= systemd_cgroup=false containerd=
if [[ $action == start ]]; then
	while (($#)); do
		case $1 in
		--cri) cri=1 ;;
		--systemd-cgroup) systemd_cgroup=true ;;
		--shim-dir) (($# >= 2)) || die "$usage"; shimdir=$(abspath "$2"); shift ;;
		--containerd) (($# >= 2)) || die "$usage"; containerd=$(abspath "$2"); shift ;;
		*) die "$usage" ;;
		esac
		shift
	done
fi
(($# == 0)) || die "$usage"

conf=$dir/config.toml sock=$dir/containerd.sock pidfile=$dir/containerd.pid log=$dir/containerd.log
# The containerd a restart starts again: the one `start` was given.
[[ $action == start || ! -f $dir/containerd-bin ]] || containerd=$(cat "$dir/containerd-bin")
containerd=${containerd:-containerd}
ctr=$(ctr_beside "$containerd")

# major_version: containerd's major version ("containerd github.com/… v2.1.9 …" or "1.6.20~ds1").
major_version() {
	local word
	for word in $("$containerd" --version); do
		word=${word#v}
		[[ $word =~ ^([0-9]+)\.[0-9] ]] && { echo "${BASH_REMATCH[1]}"; return; }
	done
	echo 0
}
((${#sock} + 6 < 108)) || die "socket path too long (unix sockets allow 107 bytes): $sock.ttrpc"

# running: print the PID of the containerd that owns DIR, if any (guards against PID reuse).
running() {
	local pid
	pid=$(cat "$pidfile" 2>/dev/null) || return 1
	alive "$pid" || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--config $conf " || return 1
	echo "$pid"
}

cri_toml() {
	cat <<-TOML

		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "registry.k8s.io/pause:3.9"
		  restrict_oom_score_adj = true
		  enable_unprivileged_ports = false
		  enable_unprivileged_icmp = false
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "$dir/cni/bin"
		    conf_dir = "$dir/cni/net.d"
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        SystemdCgroup = $systemd_cgroup
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.rustpod]
		      runtime_type = "io.containerd.rustpod.v1"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.rustpod.options]
		        SystemdCgroup = $systemd_cgroup
	TOML
}

# cri_toml_v3: the same for containerd 2.0-2.2 (2.3 reads it too): the CRI settings moved to
# the io.containerd.cri.v1.runtime and io.containerd.cri.v1.images plugins.
cri_toml_v3() {
	local rt="plugins.'io.containerd.cri.v1.runtime'"
	cat <<-TOML

		[plugins.'io.containerd.cri.v1.images'.pinned_images]
		  sandbox = "registry.k8s.io/pause:3.9"
		[plugins.'io.containerd.grpc.v1.cri']
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		[$rt]
		  restrict_oom_score_adj = true
		  enable_unprivileged_ports = false
		  enable_unprivileged_icmp = false
		  [$rt.cni]
		    bin_dirs = ["$dir/cni/bin"]
		    conf_dir = "$dir/cni/net.d"
		  [$rt.containerd]
		    default_runtime_name = "runc"
		    [$rt.containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [$rt.containerd.runtimes.runc.options]
		        SystemdCgroup = $systemd_cgroup
		    [$rt.containerd.runtimes.rustpod]
		      runtime_type = "io.containerd.rustpod.v1"
		      [$rt.containerd.runtimes.rustpod.options]
		        SystemdCgroup = $systemd_cgroup
	TOML
}

write_config() {
	local version=2 opt='plugins."io.containerd.internal.v1.opt"' cri_plugins='"io.containerd.grpc.v1.cri"'
	if (($(major_version) >= 2)); then
		version=3 opt="plugins.'io.containerd.internal.v1.opt'"
		cri_plugins+=', "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"'
	fi
	local plugins="disabled_plugins = [$cri_plugins]"
	[[ $cri ]] && plugins='required_plugins = ["io.containerd.grpc.v1.cri"]'
	mkdir -p "$dir"/{root,state,opt}
	[[ $cri ]] && mkdir -p "$dir"/cni/{bin,net.d}
	{
		cat <<-TOML
			version = $version
			root = "$dir/root"
			state = "$dir/state"
			$plugins

			[grpc]
			  address = "$sock"
			[ttrpc]
			  address = "$sock.ttrpc"

			[$opt]
			  path = "$dir/opt"
		TOML
		if [[ $cri && $version == 3 ]]; then
			cri_toml_v3
		elif [[ $cri ]]; then
			cri_toml
		fi
	} >"$conf.tmp"
	mv -f "$conf.tmp" "$conf"
}

launch() {
	[[ -f $conf ]] || die "no $conf: use start first"
	running >/dev/null && return 0
	local path=$PATH pid i
	[[ -f $dir/shim-dir ]] && path=$(cat "$dir/shim-dir"):$path
	rm -f "$pidfile" "$sock" "$sock.ttrpc"
	# The child writes its own PID and then execs containerd, so the PID is right even if setsid forks.
	# No nohup: setsid already detaches, and an ignored SIGHUP would be inherited by shims and containers.
	PATH=$path setsid bash -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1" && shift && exec "$@"' \
		_ "$pidfile" "$containerd" --config "$conf" </dev/null >>"$log" 2>&1 &
	for ((i = 0; i < 200; i++)); do
		if pid=$(cat "$pidfile" 2>/dev/null); then
			alive "$pid" || { tail -n 3 "$log" >&2; die "containerd exited at start (log: $log)"; }
			[[ -S $sock ]] && "$ctr" --address "$sock" --connect-timeout 2s version >/dev/null 2>&1 && return 0
		fi
		sleep 0.1
	done
	tail -n 3 "$log" >&2
	die "containerd did not answer within 20 s (log: $log)"
}

signal_and_wait() { # SIGNAL SECONDS
	local pid
	pid=$(running) || { rm -f "$pidfile"; return 0; }
	kill "-$1" "$pid" 2>/dev/null || true
	wait_dead "$pid" "$2"
}

case $action in
start)
	if running >/dev/null; then exit 0; fi
	mkdir -p "$dir"
	write_config
	if [[ $shimdir ]]; then echo "$shimdir" >"$dir/shim-dir"; else rm -f "$dir/shim-dir"; fi
	echo "$containerd" >"$dir/containerd-bin"
	launch
	;;
restart)
	signal_and_wait TERM 10 || signal_and_wait KILL 5 || die "containerd would not die"
	launch
	;;
stop)
	signal_and_wait TERM 10 || signal_and_wait KILL 5 || die "containerd would not die"
	rm -f "$pidfile"
	;;
kill)
	signal_and_wait KILL 5 || die "containerd would not die"
	;;
*) die "$usage" ;;
esac
